#!/usr/bin/env python3
"""Writes the hat of scenes/discrete_shell_hat_drop.json (the grinspun2003 slides' hat video).

A felt hat as a surface of revolution about z: a domed top, a crown whose side tapers a
little towards the top, and a brim that curls up at its edge. The profile (r, z) is sampled
about every STEP metres of its length; each sample is a ring of SEGMENTS vertices (the top
centre is one vertex), neighbouring rings joined by triangles with alternating diagonals,
wound so that the normals point out of the hat (up on the top, outward on the crown, up
on the brim).

    scripts/make_hat.py scenes/meshes
writes hat.obj.
"""
import math
import os

from quad_mesh import output_folder, write_obj

SEGMENTS = 48
STEP = 0.008  # m along the profile


def profile():
    """(r, z) from the top centre, over the crown, down its side and out along the brim."""
    points = []
    crown_top, crown_radius, side_bottom_radius, shoulder = 0.11, 0.082, 0.092, 0.012
    brim_radius, curl = 0.17, 0.016

    def add(r, z):
        if not points or math.dist(points[-1], (r, z)) > 1e-9:
            points.append((r, z))

    # The top, a shallow dome, then a rounded shoulder of radius `shoulder`.
    top_edge = crown_radius - shoulder
    n = max(2, round(top_edge / STEP))
    for i in range(n + 1):
        r = top_edge * i / n
        add(r, crown_top - 0.01 * (r / crown_radius) ** 2)
    z_shoulder = crown_top - 0.01 * (top_edge / crown_radius) ** 2 - shoulder
    n = max(2, round(0.5 * math.pi * shoulder / STEP))
    for i in range(1, n + 1):
        a = 0.5 * math.pi * i / n
        add(top_edge + shoulder * math.sin(a), z_shoulder + shoulder * math.cos(a))
    # The side, down to the brim, widening a little.
    n = max(2, round(z_shoulder / STEP))
    for i in range(1, n + 1):
        t = i / n
        add(crown_radius + (side_bottom_radius - crown_radius) * t, z_shoulder * (1 - t))
    # The brim, flat at first, curling up towards its edge.
    width = brim_radius - side_bottom_radius
    n = max(2, round(width / STEP))
    for i in range(1, n + 1):
        t = i / n
        add(side_bottom_radius + width * t, curl * t ** 3)
    return points


def write_hat(path):
    rings = profile()
    lines = [f"# hat: {len(rings)} rings of {SEGMENTS} vertices, brim radius {rings[-1][0]} m"]
    lines.append(f"v 0 0 {rings[0][1]:.7f}")  # the top centre, vertex 1
    for r, z in rings[1:]:
        for s in range(SEGMENTS):
            a = 2 * math.pi * s / SEGMENTS
            lines.append(f"v {r * math.cos(a):.7f} {r * math.sin(a):.7f} {z:.7f}")

    def vertex(ring, s):  # ring >= 1, 1-based OBJ index
        return 2 + (ring - 1) * SEGMENTS + s % SEGMENTS

    # Counter-clockwise seen from outside: the angle grows anticlockwise seen from above,
    # and the profile runs outward and down.
    for s in range(SEGMENTS):
        lines.append(f"f 1 {vertex(1, s)} {vertex(1, s + 1)}")
    for ring in range(1, len(rings) - 1):
        for s in range(SEGMENTS):
            a, b = vertex(ring, s), vertex(ring, s + 1)
            c, d = vertex(ring + 1, s + 1), vertex(ring + 1, s)
            if (ring + s) % 2 == 0:
                lines += [f"f {a} {d} {c}", f"f {a} {c} {b}"]
            else:
                lines += [f"f {a} {d} {b}", f"f {b} {d} {c}"]
    write_obj(path, lines)


write_hat(os.path.join(output_folder(), "hat.obj"))
