#!/usr/bin/env python3
"""Writes a light bulb mesh for gingold2004 Fig. 1 (a bulb shattered by a projectile):
scenes/meshes/bulb.obj, for scenes/inelastic_bulb_shatter.json. By the strain limit alone
a ball shot through the globe (glass, strain limit 1e-4 to 1e-3) blasts holes of tiny shards
and leaves the globe whole; with the cracks' ends running at glass's toughness
(inelastic_shell.toughness) it shatters into shards of every size.

A glass bulb as a surface of revolution about z: a globe of radius 3 cm centred at the
origin, from its top pole down to 130 degrees, a neck that narrows smoothly to a radius of
1.2 cm at z = -4.5 cm, and a straight collar down to z = -6 cm, open at the bottom (where the
screw base would hold it; the scene pins the collar).

Rings of vertices lie one edge length h apart along the profile, each with as many vertices
as its circumference holds edges of about h (one vertex at the pole), so the triangles are
nearly equilateral everywhere, the pole included (a fixed count per ring would leave
slivers near the pole). Neighbouring rings are stitched by advancing along whichever ring's
next vertex comes first in angle. The vertices are then jittered tangentially by up to a
fifth of an edge (fixed seed), so that cracks cross the triangles at every angle.

    scripts/make_bulb.py OUT_FOLDER
writes bulb.obj (h = 4 mm: 845 vertices, 1,669 faces, smallest angle 22 degrees).
"""
import math
import os
import random

from quad_mesh import output_folder, write_obj

GLOBE_RADIUS = 0.03
GLOBE_END = math.radians(130)
NECK_RADIUS, NECK_Z = 0.012, -0.045
BASE_Z = -0.06
JITTER = 0.2  # of an edge


def profile(samples=4000):
    """(r, z) along the profile from the pole to the open bottom, finely sampled."""
    points = []
    globe = samples // 2
    for k in range(globe + 1):
        phi = GLOBE_END * k / globe
        points.append((GLOBE_RADIUS * math.sin(phi), GLOBE_RADIUS * math.cos(phi)))
    # The neck: a cubic Hermite from the globe's end (leaving along its tangent) to the
    # collar (arriving straight down).
    r0, z0 = points[-1]
    tangent = (math.cos(GLOBE_END), -math.sin(GLOBE_END))
    r1, z1 = NECK_RADIUS, NECK_Z
    span = math.hypot(r1 - r0, z1 - z0)
    for k in range(1, samples // 4 + 1):
        s = k / (samples // 4)
        h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
        h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
        points.append((h00 * r0 + h10 * span * tangent[0] + h01 * r1 + h11 * span * 0.0,
                       h00 * z0 + h10 * span * tangent[1] + h01 * z1 + h11 * span * -1.0))
    for k in range(1, samples // 4 + 1):
        points.append((NECK_RADIUS, NECK_Z + (BASE_Z - NECK_Z) * k / (samples // 4)))
    return points


def rings(edge):
    """The rings (r, z) one edge apart along the profile's arc length."""
    points = profile()
    lengths = [0.0]
    for (ra, za), (rb, zb) in zip(points, points[1:]):
        lengths.append(lengths[-1] + math.hypot(rb - ra, zb - za))
    count = max(2, round(lengths[-1] / edge))
    out, j = [], 0
    for k in range(count + 1):
        target = lengths[-1] * k / count
        while j + 1 < len(points) - 1 and lengths[j + 1] < target:
            j += 1
        w = (target - lengths[j]) / max(lengths[j + 1] - lengths[j], 1e-300)
        w = min(max(w, 0.0), 1.0)
        out.append((points[j][0] + w * (points[j + 1][0] - points[j][0]),
                    points[j][1] + w * (points[j + 1][1] - points[j][1])))
    return out


def write_bulb(path, edge, seed):
    rng = random.Random(seed)
    ring_list = rings(edge)
    vertices, ring_ids = [], []
    for k, (r, z) in enumerate(ring_list):
        n = 1 if k == 0 else max(6, round(2 * math.pi * r / edge))
        offset = rng.random()  # turn each ring by a random fraction of a segment
        ids = []
        for i in range(n):
            angle = 2 * math.pi * (i + offset) / n
            if 0 < k < len(ring_list) - 1:  # the pole and the open rim stay put
                angle += rng.uniform(-JITTER, JITTER) * 2 * math.pi / n
            vertices.append((r * math.cos(angle), r * math.sin(angle), z, angle))
            ids.append(len(vertices))
        ring_ids.append(ids)
    faces = []
    for upper, lower in zip(ring_ids, ring_ids[1:]):
        if len(upper) == 1:
            for i in range(len(lower)):
                faces.append((upper[0], lower[i], lower[(i + 1) % len(lower)]))
            continue
        # Stitch: walk both rings once around, counter-clockwise seen from +z (outward
        # normals), always advancing the ring whose next vertex has the smaller angle.
        def unwrapped(ids):
            start = vertices[ids[0] - 1][3]
            return [start + (vertices[v - 1][3] - start) % (2 * math.pi) for v in ids]

        au, al = unwrapped(upper), unwrapped(lower)
        base = min(au[0], al[0])
        au = [a - base for a in au] + [au[0] - base + 2 * math.pi]
        al = [a - base for a in al] + [al[0] - base + 2 * math.pi]
        i = j = 0
        while i < len(upper) or j < len(lower):
            u0, l0 = upper[i % len(upper)], lower[j % len(lower)]
            if j < len(lower) and (i >= len(upper) or al[j + 1] <= au[i + 1]):
                faces.append((u0, l0, lower[(j + 1) % len(lower)]))
                j += 1
            else:
                faces.append((u0, l0, upper[(i + 1) % len(upper)]))
                i += 1
    lines = [f"# light bulb, globe radius {GLOBE_RADIUS} m, edge {edge} m, jitter {JITTER}"]
    lines += [f"v {x:.7f} {y:.7f} {z:.7f}" for (x, y, z, _) in vertices]
    lines += [f"f {a} {b} {c}" for (a, b, c) in faces]
    write_obj(path, lines)
    return len(vertices), len(faces)


folder = output_folder()
print("bulb.obj: %d vertices, %d faces" % write_bulb(os.path.join(folder, "bulb.obj"), 0.004, 3))
