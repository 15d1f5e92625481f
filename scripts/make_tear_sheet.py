#!/usr/bin/env python3
"""Writes the notched sheets of scenes/inelastic_sheet_tear*.json (gingold2004 Fig. 8).

A sheet 0.2 m wide (x) and 0.1 m high (y) in the xy plane, with a V notch 2 cm deep cut into
its left edge at y = 0 (1 mm half-opening at the edge, closing to the tip), so that a pull
along y tears it from the notch across the sheet. Its interior vertices are jittered by up
to a quarter of a cell and each cell's diagonal is chosen at random (fixed seed): the crack
then crosses the triangles at every angle, as on the irregular meshes the paper tears,
instead of running along a grid line where budging would have nothing to do.

    scripts/make_tear_sheet.py scenes/meshes
writes tear_sheet.obj (40 x 20 cells, 1,600 faces) and tear_sheet_fine.obj (80 x 40 cells,
four times the faces: the paper's comparison of budging with a finer mesh).
"""
import os
import random

from quad_mesh import output_folder, quad_faces, write_obj

WIDTH, HEIGHT = 0.2, 0.1
NOTCH_DEPTH, NOTCH_HALF_OPENING = 0.02, 0.001
JITTER = 0.25  # of a cell, in x and y


def write_sheet(path, across, up, seed):
    dx, dy = WIDTH / across, HEIGHT / up
    rng = random.Random(seed)
    notch_row = up // 2  # y = 0
    tip_column = round(NOTCH_DEPTH / dx)
    positions = {}  # (i, j, side) -> (x, y); side 1 is the lower copy of a notch vertex
    for j in range(up + 1):
        for i in range(across + 1):
            x, y = -WIDTH / 2 + i * dx, -HEIGHT / 2 + j * dy
            on_boundary = i in (0, across) or j in (0, up)
            in_notch = j == notch_row and i <= tip_column
            if not on_boundary and not in_notch:
                x += rng.uniform(-JITTER, JITTER) * dx
                y += rng.uniform(-JITTER, JITTER) * dy
            if in_notch:
                opening = NOTCH_HALF_OPENING * (tip_column - i) / tip_column
                positions[(i, j, 0)] = (x, y + opening)
                if i < tip_column:
                    positions[(i, j, 1)] = (x, y - opening)
            else:
                positions[(i, j, 0)] = (x, y)
    index = {key: n + 1 for n, key in enumerate(positions)}

    def vertex(i, j, below_notch):
        if below_notch and (i, j, 1) in index:
            return index[(i, j, 1)]
        return index[(i, j, 0)]

    lines = [f"# notched tear sheet, {WIDTH} x {HEIGHT} m, {across} x {up} cells, jitter {JITTER}"]
    lines += [f"v {x:.7f} {y:.7f} 0" for (x, y) in positions.values()]
    for j in range(up):
        below = j < notch_row  # cells under the notch use its lower copies
        for i in range(across):
            a, b = vertex(i, j, below), vertex(i + 1, j, below)
            c, d = vertex(i + 1, j + 1, below), vertex(i, j + 1, below)
            lines += quad_faces(a, b, c, d, rng.random() < 0.5)
    write_obj(path, lines)


folder = output_folder()
write_sheet(os.path.join(folder, "tear_sheet.obj"), 40, 20, seed=8)
write_sheet(os.path.join(folder, "tear_sheet_fine.obj"), 80, 40, seed=8)
