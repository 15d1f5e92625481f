#!/usr/bin/env python3
"""Writes the diving board of scenes/inelastic_diving_boards.json (the gingold2004 video's
boards, ductile to brittle).

A plank 0.3 m long (x, from 0 to 0.3) and 6 cm wide (y, centred), in the xy plane, 40 x 8
cells, interior vertices jittered by up to a quarter of a cell and each cell's diagonal
chosen at random (fixed seed), so that a crack across the board crosses the triangles at
every angle instead of running along a grid line.

    scripts/make_board.py scenes/meshes
writes board.obj (640 faces).
"""
import os
import random

from quad_mesh import output_folder, quad_faces, write_obj

LENGTH, WIDTH = 0.3, 0.06
ACROSS, UP = 40, 8
JITTER = 0.25  # of a cell, in x and y


def write_board(path, seed):
    rng = random.Random(seed)
    dx, dy = LENGTH / ACROSS, WIDTH / UP
    lines = [f"# diving board, {LENGTH} x {WIDTH} m, {ACROSS} x {UP} cells, jitter {JITTER}"]
    for j in range(UP + 1):
        for i in range(ACROSS + 1):
            x, y = i * dx, -WIDTH / 2 + j * dy
            if 0 < i < ACROSS and 0 < j < UP:
                x += rng.uniform(-JITTER, JITTER) * dx
                y += rng.uniform(-JITTER, JITTER) * dy
            lines.append(f"v {x:.7f} {y:.7f} 0")

    def vertex(i, j):
        return j * (ACROSS + 1) + i + 1

    for j in range(UP):
        for i in range(ACROSS):
            lines += quad_faces(vertex(i, j), vertex(i + 1, j), vertex(i + 1, j + 1),
                                vertex(i, j + 1), rng.random() < 0.5)
    write_obj(path, lines)


write_board(os.path.join(output_folder(), "board.obj"), seed=4)
