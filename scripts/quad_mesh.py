"""Shared by the mesh scripts: a quad cell as two OBJ faces, and writing an OBJ file."""
import os
import sys


def quad_faces(a, b, c, d, diagonal_ac):
    """The cell a-b-c-d (counter-clockwise, 1-based OBJ indices) cut along a-c or b-d."""
    if diagonal_ac:
        return [f"f {a} {b} {c}", f"f {a} {c} {d}"]
    return [f"f {a} {b} {d}", f"f {b} {c} {d}"]


def write_obj(path, lines):
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def output_folder():
    """The folder named on the command line (default scenes/meshes), created."""
    folder = sys.argv[1] if len(sys.argv) > 1 else "scenes/meshes"
    os.makedirs(folder, exist_ok=True)
    return folder
