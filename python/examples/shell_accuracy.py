#!/usr/bin/env python3
"""Measures how accurately each shell model bends: the numbers behind its material mapping.

    PYTHONPATH=build/release/python /usr/bin/python3 python/examples/shell_accuracy.py \
        --models fiber,discrete_shell --strip-cells 84 --plate-cells 16,32

Three measurements, each against a closed form, all solved statically (time.integrator
"static"):

- strip: the clamped strip of scenes/static_cantilever.json (1 m long, 10 cm wide, 1 mm,
  E = 1 GPa, nu = 0), refined to --strip-cells cells along, under a dead tip load
  P = k EI / L^2 (k = 1, 2, 4), against the elastica (Bisshopp and Drucker 1945): tip
  deflection w/L and shortening -u/L over the elastica's;
- plates: a unit square plate, a / h = 100, nu = 0.3, under its own weight, simply supported
  (its boundary nodes pinned) and clamped (the boundary and a ring of one cell beyond it
  pinned: a rotation-free shell is clamped by two rows of pins), centre deflection over
  Kirchhoff's (Timoshenko and Woinowsky-Krieger, tables 8 and 35);
- modes: the unit plate, free, given a small height field (a cylinder, a bowl, a saddle, a
  twist, and the first simply supported mode sin(pi x) sin(pi y)), bending energy over the
  plate's integral of D/2 [(w_xx + w_yy)^2 - 2 (1 - nu) (w_xx w_yy - w_xy^2)]: where the
  model's energy is right in the interior, what is missing sits at the free edges.

Every number printed is a ratio to the closed form (1 is exact).
"""

import argparse
import json
import math
import os
import sys

import numpy as np

import shellsim

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# k = P L^2 / (E I): (tip shortening -u/L, tip deflection w/L) of the elastica.
ELASTICA = {1: (0.056433, 0.301721), 2: (0.160642, 0.493457), 4: (0.328941, 0.669964)}
# Centre deflection w = alpha q a^4 / D of the square plate with nu = 0.3.
KIRCHHOFF = {"simply supported": 0.00406235, "clamped": 0.00126532}


def model_body(model, neighbours):
    """The body keys that choose the model (and the fiber model's neighbour count)."""
    body = {"model": model}
    if model == "fiber":
        body["fiber"] = {"neighbours": neighbours}
    return body


def solve(scene, increments):
    sim = shellsim.Simulation.from_scene(shellsim.Scene.from_dict(scene, SOURCE))
    rest = sim.positions(0).copy()
    sim.advance_frames(increments)
    return rest, sim.positions(0)


def strip(model, neighbours, cells, k):
    with open(os.path.join(SOURCE, "scenes", "static_cantilever.json")) as f:
        scene = json.load(f)
    body = scene["bodies"][0]
    body.update(model_body(model, neighbours))
    body["primitive"]["resolution"] = cells
    material = body["material"]
    ei = material["young_modulus"] * 0.1 * material["thickness"] ** 3 / 12  # width 0.1 m
    body["loads"][0]["force"] = [0, 0, -k * ei]  # L = 1 m
    increments = 2 * int(math.ceil(k))
    scene["time"]["load_increments"] = increments
    scene.pop("output", None)
    rest, x = solve(scene, increments)
    tip = np.abs(rest[:, 0] - 1.0) < 1e-9
    shortening = (1.0 - x[tip, 0]).mean()
    deflection = -x[tip, 2].mean()
    return deflection / ELASTICA[k][1], shortening / ELASTICA[k][0]


PLATE = {"young_modulus": 7e10, "poisson": 0.3, "thickness": 0.01, "density": 2700}


def plate(model, neighbours, cells, support):
    cell = 1.0 / cells
    ring = 0.0 if support == "simply supported" else cell
    size = 1.0 + 2 * ring
    edge, far = 0.5 - 1e-6, size / 2 + 0.01
    half, middle = (far - edge) / 2, (far + edge) / 2
    boxes = [([-middle, 0, 0], [half, far, 0.001]), ([middle, 0, 0], [half, far, 0.001]),
             ([0, -middle, 0], [far, half, 0.001]), ([0, middle, 0], [far, half, 0.001])]
    body = {"name": "plate", "material": PLATE,
            "primitive": {"type": "sheet", "size": [size, size, 0],
                          "resolution": cells + (2 if ring > 0 else 0)},
            "pins": [{"shape": "box", "center": c, "half_extents": e} for c, e in boxes]}
    body.update(model_body(model, neighbours))
    g = 9.81
    scene = {"gravity": [0, 0, -g], "bodies": [body],
             "time": {"duration": 1, "integrator": "static", "load_increments": 1,
                      "newton_tolerance": 1e-10, "newton_max_iterations": 50}}
    rest, x = solve(scene, 1)
    r = np.hypot(rest[:, 0], rest[:, 1])
    centre = r < r.min() + 1e-9
    e, nu, h, rho = PLATE["young_modulus"], PLATE["poisson"], PLATE["thickness"], PLATE["density"]
    d = e * h**3 / (12 * (1 - nu * nu))
    return -(x[centre, 2] - rest[centre, 2]).mean() / (KIRCHHOFF[support] * rho * h * g / d)


def mode_energy(model, neighbours, cells, mode):
    body = {"name": "plate", "material": PLATE,
            "primitive": {"type": "sheet", "size": [1, 1, 0], "resolution": cells}}
    body.update(model_body(model, neighbours))
    sim = shellsim.Simulation.from_scene(shellsim.Scene.from_dict(
        {"gravity": [0, 0, 0], "bodies": [body], "time": {"duration": 1}}, SOURCE))
    x = sim.positions(0).copy()
    px, py = x[:, 0], x[:, 1]
    a = 1e-4  # small: the energies are quadratic in a
    nu = PLATE["poisson"]
    d = PLATE["young_modulus"] * PLATE["thickness"] ** 3 / (12 * (1 - nu * nu))
    # Height field and the plate's energy over the unit square.
    if mode == "cylinder":
        x[:, 2] = a / 2 * px**2
        energy = d / 2 * a * a
    elif mode == "bowl":
        x[:, 2] = a / 2 * (px**2 + py**2)
        energy = d / 2 * 2 * (1 + nu) * a * a
    elif mode == "saddle":
        x[:, 2] = a / 2 * (px**2 - py**2)
        energy = d / 2 * 2 * (1 - nu) * a * a
    elif mode == "twist":
        x[:, 2] = a * px * py
        energy = d / 2 * 2 * (1 - nu) * a * a
    else:  # the first simply supported mode
        x[:, 2] = a * np.sin(math.pi * (px + 0.5)) * np.sin(math.pi * (py + 0.5))
        energy = d / 2 * math.pi**4 * a * a
    sim.set_positions(0, x)
    return sim.energies(0)["bending"] / energy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="fiber,discrete_shell,inelastic_shell",
                        help="comma-separated shell models")
    parser.add_argument("--neighbours", default="8", help="fiber model: comma-separated counts")
    parser.add_argument("--strip-cells", default="84", help="comma-separated; empty: no strips")
    parser.add_argument("--plate-cells", default="16,32", help="comma-separated; empty: none")
    parser.add_argument("--mode-cells", default="32", help="comma-separated; empty: none")
    args = parser.parse_args()

    def numbers(text):
        return [int(v) for v in text.split(",") if v]

    variants = []
    for model in args.models.split(","):
        for neighbours in (numbers(args.neighbours) if model == "fiber" else [8]):
            label = model + (f" ({neighbours} neighbours)" if model == "fiber" else "")
            variants.append((label, model, neighbours))

    print("| measurement | " + " | ".join(label for label, _, _ in variants) + " |")
    print("|---|" + "---|" * len(variants))

    def row(name, values):
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in values) + " |")
        sys.stdout.flush()

    for cells in numbers(args.strip_cells):
        for k in (1, 2, 4):
            results = [strip(model, n, cells, k) for _, model, n in variants]
            row(f"strip, {cells} cells, k = {k}: w/L", [r[0] for r in results])
            row(f"strip, {cells} cells, k = {k}: -u/L", [r[1] for r in results])
    for support in KIRCHHOFF:
        for cells in numbers(args.plate_cells):
            row(f"{support} plate, {cells} cells: centre deflection",
                [plate(model, n, cells, support) for _, model, n in variants])
    for cells in numbers(args.mode_cells):
        for mode in ("cylinder", "bowl", "saddle", "twist", "sine"):
            row(f"free plate, {cells} cells, {mode}: bending energy",
                [mode_energy(model, n, cells, mode) for _, model, n in variants])


if __name__ == "__main__":
    main()
