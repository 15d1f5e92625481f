#!/usr/bin/env python3
"""How a torn mesh's cracks look, from two frames of a run (binary PLY, as shellsim writes):
the first (the uncut mesh) and a later one. Prints the faces, the pieces (connected by
shared nodes) with the largest ones and the count of loose bits under 10 faces, the faces
with an angle under 10 degrees (slivers) and the smallest angle, the crack edges (boundary
edges that were not on the first frame's boundary; nodes keep their index through cuts) and
their length, and the fringe's mean turning: at each node on a crack, |pi - the sum of its
faces' angles there|, 0 on a straight fringe and unchanged by bending; tips and branch points
(over 120 degrees) left out.

    scripts/crack_fringe_stats.py out/inelastic_sheet_tear/frames/sheet_00000.ply \\
                                  out/inelastic_sheet_tear/frames/sheet_00015.ply
"""
import math
import struct
import sys
from collections import defaultdict

TYPES = {"float": "f", "double": "d", "int": "i", "uint": "I", "uchar": "B", "char": "b",
         "short": "h", "ushort": "H", "float32": "f", "float64": "d", "int32": "i", "uint8": "B"}


def read_ply(path):
    data = open(path, "rb").read()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    counts, vertex_props, element = {}, [], None
    for line in data[:end].decode().splitlines():
        words = line.split()
        if words[0] == "format" and words[1] != "binary_little_endian":
            sys.exit(f"{path}: only binary little-endian PLY is read")
        if words[0] == "element":
            element = words[1]
            counts[element] = int(words[2])
        elif words[0] == "property" and element == "vertex":
            vertex_props.append(TYPES[words[1]])
    vertex = struct.Struct("<" + "".join(vertex_props))
    offset = end
    positions = []
    for _ in range(counts["vertex"]):
        positions.append(vertex.unpack_from(data, offset)[:3])
        offset += vertex.size
    faces = []
    for _ in range(counts.get("face", 0)):
        n = data[offset]
        faces.append(struct.unpack_from(f"<{n}i", data, offset + 1))
        offset += 1 + 4 * n
    return positions, faces


def angle(p, q, r):  # at p
    u = [q[i] - p[i] for i in range(3)]
    v = [r[i] - p[i] for i in range(3)]
    nu, nv = math.sqrt(sum(x * x for x in u)), math.sqrt(sum(x * x for x in v))
    return math.acos(max(-1.0, min(1.0, sum(u[i] * v[i] for i in range(3)) / (nu * nv))))


def boundary_edges(faces):
    count = defaultdict(int)
    for f in faces:
        for k in range(3):
            a, b = f[k], f[(k + 1) % 3]
            count[(min(a, b), max(a, b))] += 1
    return {e for e, n in count.items() if n == 1}


def main(first, later):
    _, first_faces = read_ply(first)
    rim = boundary_edges(first_faces)
    rim_nodes = {v for e in rim for v in e}
    x, faces = read_ply(later)
    angle_sum = defaultdict(float)
    slivers, smallest = 0, math.pi
    parent = list(range(len(x)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for f in faces:
        angles = [angle(x[f[k]], x[f[(k + 1) % 3]], x[f[(k + 2) % 3]]) for k in range(3)]
        for k in range(3):
            angle_sum[f[k]] += angles[k]
        slivers += min(angles) < math.radians(10)
        smallest = min(smallest, min(angles))
        parent[find(f[1])] = find(f[0])
        parent[find(f[2])] = find(f[0])
    sizes = defaultdict(int)
    for f in faces:
        sizes[find(f[0])] += 1
    sizes = sorted(sizes.values(), reverse=True)
    crack = [e for e in boundary_edges(faces) if e not in rim]
    length = sum(math.dist(x[a], x[b]) for a, b in crack)
    turning = [abs(math.pi - angle_sum[v]) for v in {v for e in crack for v in e}
               if v not in rim_nodes]
    turning = [t for t in turning if t < math.radians(120)]
    mean = math.degrees(sum(turning) / len(turning)) if turning else 0.0
    print(f"{later}: {len(faces)} faces, {len(sizes)} pieces (largest {sizes[:3]}, "
          f"{sum(1 for s in sizes if s < 10)} under 10 faces), {slivers} faces with an angle "
          f"under 10 degrees (smallest {math.degrees(smallest):.1f}), {len(crack)} crack edges "
          f"({100 * length:.1f} cm), mean turning of the fringe {mean:.1f} degrees")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
