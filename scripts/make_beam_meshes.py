#!/usr/bin/env python3
"""Writes the two cantilever strips of scenes/discrete_shell_flat_vs_v_beam.json.

Both are the same developed sheet, 0.3 m long and 0.04 m wide, 30 x 4 cells; the V beam
folds it along its centre line by 30 degrees on each side (grinspun2003 slides: the V is
far stiffer, its flexural rigidity comes from the curvature of the section). Usage:
    scripts/make_beam_meshes.py scenes/meshes
"""
import math
import os

from quad_mesh import output_folder, quad_faces, write_obj


def write_strip(path, fold_degrees):
    length, width, along, across = 0.3, 0.04, 30, 4
    phi = math.radians(fold_degrees)
    lines = [f"# cantilever strip, {length} x {width} m, fold {fold_degrees} degrees"]
    for i in range(along + 1):
        for j in range(across + 1):
            s = -width / 2 + width * j / across  # developed coordinate across the strip
            lines.append(f"v {length * i / along:.6f} {s * math.cos(phi):.6f} {abs(s) * math.sin(phi):.6f}")
    for i in range(along):
        for j in range(across):
            a = i * (across + 1) + j + 1
            b, c, d = a + across + 1, a + across + 2, a + 1
            # alternate the diagonal so the mesh has no preferred direction
            lines += quad_faces(a, b, c, d, (i + j) % 2 == 0)
    write_obj(path, lines)


folder = output_folder()
write_strip(os.path.join(folder, "flat_beam.obj"), 0)
write_strip(os.path.join(folder, "v_beam.obj"), 30)
