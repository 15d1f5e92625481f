// The checks every triangle-mesh model makes of its input, and the mesh's edges with the
// triangles on each side, computed once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shellsim/geometry.hpp"

namespace shellsim {

// A checked, consistently oriented manifold triangle mesh (open boundaries allowed).
struct TriangleMeshTopology {
  std::vector<double> restArea;  // (nTriangles), m^2
  // Edges in ascending (min vertex, max vertex) order: edge k joins edgeNodes[2k] <
  // edgeNodes[2k + 1]; its first side is the triangle edgeSides[4k] whose corner
  // edgeSides[4k + 1] starts it (the triangle traverses the edge from that corner to the
  // next), its second side edgeSides[4k + 2], [4k + 3] the other triangle, or -1, -1 on a
  // boundary. The first side is the triangle of smaller index.
  std::vector<int32_t> edgeNodes;  // (nEdges, 2)
  std::vector<int32_t> edgeSides;  // (nEdges, 4)
  // Across edge i of triangle t (the edge opposite corner i, from corner i + 1 to i + 2):
  // faceNeighbour[3t + i] = 3u + j for triangle u whose edge j it is, -1 on a boundary.
  std::vector<int32_t> faceNeighbour;  // (nTriangles, 3)
};

// Checks `mesh` and builds its topology. Throws InputError, "<who>: <what>" naming the
// element, for a point cloud, a non-finite position, an index out of range, a triangle with
// a repeated vertex or zero rest area (below 1e-12 of its longest edge squared), an edge
// shared by more than two triangles, two triangles that traverse an edge in the same
// direction, or a vertex in no triangle.
TriangleMeshTopology checkedTriangleMesh(const Geometry& mesh, const std::string& who);

// Lumped node masses, kg, (nodeCount): m_i = rho h sum_{T contains i} A_T / 3, for triangles
// (nTriangles, 3), their rest areas (nTriangles, m^2) and the areal density rho h (kg/m^2).
std::vector<double> lumpedMasses(std::span<const int32_t> triangles,
                                 std::span<const double> restArea, double arealDensity,
                                 int32_t nodeCount);

}  // namespace shellsim
