// Node sets of the fiber-model tests: grids, primitives and the bunny.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "geometry/primitives.hpp"
#include "models/fiber/fiber_model.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"

namespace shellsim::testing {

// E = 1 MPa, nu = 0.3, 1 mm, 1000 kg/m^3.
inline MaterialDef rubber() {
  MaterialDef m;
  m.youngModulus = 1e6;
  m.poisson = 0.3;
  m.thickness = 1e-3;
  m.density = 1000;
  return m;
}

// A regular nx x ny grid of spacing h in z = 0, normal +z; areas are the true areas of the
// grid cells around each node (h^2 inside, h^2/2 on edges, h^2/4 at corners).
inline FiberNodes gridSheet(int nx, int ny, double h, double jitter = 0.0, unsigned seed = 1) {
  FiberNodes nodes;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-jitter * h, jitter * h);
  for (int j = 0; j < ny; ++j) {
    for (int i = 0; i < nx; ++i) {
      const bool edgeI = i == 0 || i == nx - 1;
      const bool edgeJ = j == 0 || j == ny - 1;
      const bool interior = !edgeI && !edgeJ;
      nodes.positions.insert(nodes.positions.end(), {h * i + (interior ? u(rng) : 0.0),
                                                     h * j + (interior ? u(rng) : 0.0), 0.0});
      nodes.normals.insert(nodes.normals.end(), {0.0, 0.0, 1.0});
      nodes.areas.push_back(h * h * (edgeI ? 0.5 : 1.0) * (edgeJ ? 0.5 : 1.0));
    }
  }
  return nodes;
}

// Barycentric vertex areas of a triangle mesh, (nVertices).
inline std::vector<double> vertexAreas(const Geometry& mesh) {
  std::vector<double> areas(static_cast<size_t>(mesh.vertexCount()), 0.0);
  for (int32_t t = 0; t < mesh.triangleCount(); ++t) {
    Vec3 p[3];
    for (int c = 0; c < 3; ++c) {
      const auto v = static_cast<size_t>(mesh.triangles[3 * static_cast<size_t>(t) + c]);
      p[c] = Vec3(mesh.positions[3 * v], mesh.positions[3 * v + 1], mesh.positions[3 * v + 2]);
    }
    const double area = 0.5 * (p[1] - p[0]).cross(p[2] - p[0]).norm();
    for (int c = 0; c < 3; ++c) {
      areas[static_cast<size_t>(mesh.triangles[3 * static_cast<size_t>(t) + c])] += area / 3;
    }
  }
  return areas;
}

// Every `stride`-th vertex of a mesh, with normals of the full mesh and its barycentric
// area times the stride (so the areas still sum to about the mesh's area).
inline FiberNodes nodesFromMesh(Geometry mesh, int stride) {
  computeVertexNormals(mesh);
  const std::vector<double> areas = vertexAreas(mesh);
  FiberNodes nodes;
  for (size_t v = 0; v < areas.size(); v += static_cast<size_t>(stride)) {
    if (!(areas[v] > 0)) continue;
    for (int c = 0; c < 3; ++c) {
      nodes.positions.push_back(mesh.positions[3 * v + static_cast<size_t>(c)]);
      nodes.normals.push_back(mesh.normals[3 * v + static_cast<size_t>(c)]);
    }
    nodes.areas.push_back(areas[v] * stride);
  }
  return nodes;
}

inline FiberNodes primitiveNodes(PrimitiveType type, int resolution) {
  PrimitiveDef p;
  p.type = type;
  p.resolution = resolution;
  return nodesFromMesh(makePrimitive(p), 1);
}

inline FiberNodes bunnyNodes() {
  return nodesFromMesh(readGeometry(std::string(SHELLSIM_DATA_DIR) + "/stanford-bunny.obj"), 20);
}

}  // namespace shellsim::testing
