"""Shared pieces of the Python tests: a small sheet, a PLY frame reader, paths."""

import os
import numpy as np

DATA_DIR = os.environ.get("SHELLSIM_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))
CLI = os.environ.get("SHELLSIM_CLI", "shellsim")


def sheet(n=8, size=1.0, height=0.3):
    """A size x size sheet of n x n cells at z = height: vertices (N, 3), triangles (M, 3)."""
    xs, ys = np.meshgrid(np.linspace(-size / 2, size / 2, n + 1), np.linspace(-size / 2, size / 2, n + 1))
    vertices = np.c_[xs.ravel(), ys.ravel(), np.full(xs.size, height)]
    triangles = []
    for j in range(n):
        for i in range(n):
            a = j * (n + 1) + i
            triangles += [[a, a + 1, a + n + 2], [a, a + n + 2, a + n + 1]]
    return vertices, np.array(triangles, dtype=np.int32)


def read_ply_vertices(path):
    """The vertex positions of a binary little-endian PLY frame, (n, 3) float32."""
    with open(path, "rb") as f:
        header = []
        while True:
            line = f.readline().decode("ascii").strip()
            header.append(line)
            if line == "end_header":
                break
        count = 0
        properties = []
        in_vertex = False
        for line in header:
            words = line.split()
            if words[:2] == ["element", "vertex"]:
                count = int(words[2])
                in_vertex = True
            elif words[:1] == ["element"]:
                in_vertex = False
            elif words[:1] == ["property"] and in_vertex:
                properties.append((words[1], words[2]))
        sizes = {"float": 4, "double": 8, "int": 4, "uchar": 1, "uint": 4}
        kinds = {"float": "<f4", "double": "<f8", "int": "<i4", "uchar": "u1", "uint": "<u4"}
        dtype = np.dtype([(name, kinds[kind]) for kind, name in properties])
        assert dtype.itemsize == sum(sizes[k] for k, _ in properties)
        rows = np.frombuffer(f.read(count * dtype.itemsize), dtype=dtype, count=count)
        return np.c_[rows["x"], rows["y"], rows["z"]]
