// Built-in primitive meshes (sheet, sphere, hemisphere, cylinder, box) and transforms.
#include "geometry/primitives.hpp"

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

constexpr int32_t kMaxResolution = 2048;

void requirePositive(double value, const char* what) {
  if (!(value > 0) || !std::isfinite(value)) {
    throw InputError(std::string("primitive ") + what + " = " + std::to_string(value) +
                     ": must be a finite number > 0");
  }
}

// Number of cells of size ~`cell` along `length`, at least `minimum`.
int32_t cellCount(double length, double cell, int32_t minimum) {
  const double count = std::round(length / cell);
  return std::max(minimum, static_cast<int32_t>(std::min(count, double{kMaxResolution} * 4)));
}

void pushTriangle(std::vector<int32_t>& triangles, int32_t a, int32_t b, int32_t c) {
  triangles.push_back(a);
  triangles.push_back(b);
  triangles.push_back(c);
}

// Triangulates an nu x nv grid of quads whose corner (i, j), i in [0, nu], j in [0, nv],
// is vertex `index(i, j)`. The frame (u, v, outward normal) is right-handed, so the
// triangles are counter-clockwise seen from outside. The diagonal alternates like a
// checkerboard, so the mesh has no preferred shear direction:
//
//   (i,j+1)---(i+1,j+1)     (i,j+1)---(i+1,j+1)
//      |     /    |            |    \     |
//      |   /      |            |      \   |
//   (i,j)-----(i+1,j)        (i,j)-----(i+1,j)
//      i + j even               i + j odd
template <class Index>
void triangulateGrid(int32_t nu, int32_t nv, Index index, std::vector<int32_t>& triangles) {
  for (int32_t j = 0; j < nv; ++j) {
    for (int32_t i = 0; i < nu; ++i) {
      const int32_t v00 = index(i, j), v10 = index(i + 1, j);
      const int32_t v11 = index(i + 1, j + 1), v01 = index(i, j + 1);
      if ((i + j) % 2 == 0) {
        pushTriangle(triangles, v00, v10, v11);
        pushTriangle(triangles, v00, v11, v01);
      } else {
        pushTriangle(triangles, v00, v10, v01);
        pushTriangle(triangles, v10, v11, v01);
      }
    }
  }
}

void pushVector(std::vector<double>& flat, const Eigen::Vector3d& v) {
  flat.push_back(v.x());
  flat.push_back(v.y());
  flat.push_back(v.z());
}

Geometry makeSheet(const PrimitiveDef& def) {
  requirePositive(def.size[0], "size[0]");
  requirePositive(def.size[1], "size[1]");
  const double lx = def.size[0], ly = def.size[1];
  const double cell = std::max(lx, ly) / def.resolution;
  const int32_t nx = cellCount(lx, cell, 1), ny = cellCount(ly, cell, 1);
  Geometry g;
  for (int32_t j = 0; j <= ny; ++j) {
    for (int32_t i = 0; i <= nx; ++i) {
      pushVector(g.positions, {-0.5 * lx + lx * i / nx, -0.5 * ly + ly * j / ny, 0.0});
      pushVector(g.normals, {0, 0, 1});
    }
  }
  triangulateGrid(
      nx, ny, [&](int32_t i, int32_t j) { return j * (nx + 1) + i; }, g.triangles);
  return g;
}

// Geodesic subdivision of a polyhedron inscribed in the unit sphere (class I): every face
// (A, B, C) is split into f^2 triangles whose vertices are the lattice points
// (wA A + wB B + wC C) / f, wA + wB + wC = f, projected radially on the sphere.
// A lattice point is identified by its non-zero (corner, weight) pairs, which faces that
// share an edge or corner agree on exactly, so seam vertices are created once.
Geometry geodesicSphere(const std::vector<Eigen::Vector3d>& corners,
                        std::vector<std::array<int32_t, 3>> faces, int32_t f, double radius) {
  Geometry g;
  std::unordered_map<uint64_t, int32_t> vertexOfKey;
  // Key: up to three (corner: 4 bits, weight: 12 bits) pairs sorted by corner; f <= 512.
  auto vertex = [&](std::array<std::pair<int32_t, int32_t>, 3> weights) {
    std::sort(weights.begin(), weights.end());
    uint64_t key = 0;
    Eigen::Vector3d p = Eigen::Vector3d::Zero();
    for (const auto& [corner, weight] : weights) {
      if (weight == 0) continue;
      key = key << 16 | static_cast<uint64_t>(corner) << 12 | static_cast<uint64_t>(weight);
      p += weight * corners[static_cast<size_t>(corner)];
    }
    const auto [it, inserted] = vertexOfKey.try_emplace(key, g.vertexCount());
    if (inserted) {
      const Eigen::Vector3d unit = p.normalized();
      pushVector(g.positions, radius * unit);
      pushVector(g.normals, unit);
    }
    return it->second;
  };
  for (auto& [a, b, c] : faces) {
    // Make the face counter-clockwise seen from outside whatever order it was listed in.
    const Eigen::Vector3d& pa = corners[static_cast<size_t>(a)];
    const Eigen::Vector3d& pb = corners[static_cast<size_t>(b)];
    const Eigen::Vector3d& pc = corners[static_cast<size_t>(c)];
    if ((pb - pa).cross(pc - pa).dot(pa + pb + pc) < 0) std::swap(b, c);
    // Lattice point (i, j) has weights (f - i - j, i, j) on (a, b, c). The triangles
    // "(i,j) (i+1,j) (i,j+1)" and "(i+1,j) (i+1,j+1) (i,j+1)" turn the same way as
    // (a, b, c).
    // Copies of the bindings: C++20 lambdas may not capture structured bindings in clang 14.
    const int32_t ia = a, ib = b, ic = c;
    auto at = [&](int32_t i, int32_t j) {
      return vertex({std::pair{ia, f - i - j}, std::pair{ib, i}, std::pair{ic, j}});
    };
    for (int32_t j = 0; j < f; ++j) {
      for (int32_t i = 0; i + j < f; ++i) {
        pushTriangle(g.triangles, at(i, j), at(i + 1, j), at(i, j + 1));
        if (i + j + 1 < f) pushTriangle(g.triangles, at(i + 1, j), at(i + 1, j + 1), at(i, j + 1));
      }
    }
  }
  return g;
}

Geometry makeSphere(const PrimitiveDef& def) {
  requirePositive(def.radius, "radius");
  // Icosahedron: the 12 cyclic permutations of (0, +-1, +-phi). Its 10-triangle middle
  // band spans 5 edges around the sphere, so f = resolution / 5 gives ~resolution
  // edges around a great circle.
  const double phi = std::numbers::phi;
  std::vector<Eigen::Vector3d> corners = {{-1, phi, 0}, {1, phi, 0}, {-1, -phi, 0}, {1, -phi, 0},
                                          {0, -1, phi}, {0, 1, phi}, {0, -1, -phi}, {0, 1, -phi},
                                          {phi, 0, -1}, {phi, 0, 1}, {-phi, 0, -1}, {-phi, 0, 1}};
  for (Eigen::Vector3d& c : corners) c.normalize();
  const std::vector<std::array<int32_t, 3>> faces = {
      {0, 11, 5},  {0, 5, 1},  {0, 1, 7},  {0, 7, 10}, {0, 10, 11}, {1, 5, 9}, {5, 11, 4},
      {11, 10, 2}, {10, 7, 6}, {7, 1, 8},  {3, 9, 4},  {3, 4, 2},   {3, 2, 6}, {3, 6, 8},
      {3, 8, 9},   {4, 9, 5},  {2, 4, 11}, {6, 2, 10}, {8, 6, 7},   {9, 8, 1}};
  const int32_t f = std::max(1, static_cast<int32_t>(std::lround(def.resolution / 5.0)));
  return geodesicSphere(corners, faces, f, def.radius);
}

Geometry makeHemisphere(const PrimitiveDef& def) {
  requirePositive(def.radius, "radius");
  // The upper half of an octahedron: its equator lies in z = 0, and so do the projected
  // points on it, so the rim is exactly the circle z = 0 with 4 f edges.
  const std::vector<Eigen::Vector3d> corners = {
      {1, 0, 0}, {0, 1, 0}, {-1, 0, 0}, {0, -1, 0}, {0, 0, 1}};
  const std::vector<std::array<int32_t, 3>> faces = {{0, 1, 4}, {1, 2, 4}, {2, 3, 4}, {3, 0, 4}};
  const int32_t f = std::max(1, static_cast<int32_t>(std::lround(def.resolution / 4.0)));
  return geodesicSphere(corners, faces, f, def.radius);
}

// Closes the rim of `around` vertices from `first` on (the circle of `radius` at height z)
// with a flat disc facing `side` (+1: +z, -1: -z): concentric rings of about `cell` spacing
// whose vertex counts fall in proportion to their radius (at least 6), each joined to the
// next by a zipper that always advances the ring whose next vertex comes first in angle,
// and a fan around the centre. The triangles' edges stay near `cell` long: no slivers.
void addCap(Geometry& g, int32_t first, int32_t around, double cell, double z, double radius,
            double side) {
  const int32_t bands = std::max(1, static_cast<int32_t>(std::lround(radius / cell)));
  struct Ring {
    int32_t first, count;
    double phase;  // angle of vertex 0, rad
  };
  std::vector<Ring> ring{{first, around, 0.0}};
  for (int32_t b = 1; b < bands; ++b) {
    const double r = radius * (1.0 - static_cast<double>(b) / bands);
    const int32_t count = std::max(6, static_cast<int32_t>(std::lround(around * r / radius)));
    // Every other ring turned by half a spacing, so that the zippers do not line up into
    // spokes; within one spacing, so that the walk below starts at the outer vertex 0.
    const double phase = (b % 2) * std::numbers::pi / count;
    const int32_t start = static_cast<int32_t>(g.positions.size() / 3);
    for (int32_t i = 0; i < count; ++i) {
      const double theta = phase + 2 * std::numbers::pi * i / count;
      pushVector(g.positions, Eigen::Vector3d(r * std::cos(theta), r * std::sin(theta), z));
      pushVector(g.normals, Eigen::Vector3d(0, 0, side));
    }
    ring.push_back({start, count, phase});
  }
  const int32_t centre = static_cast<int32_t>(g.positions.size() / 3);
  pushVector(g.positions, Eigen::Vector3d(0, 0, z));
  pushVector(g.normals, Eigen::Vector3d(0, 0, side));
  // Appends the triangle turned to face `side`.
  const auto face = [&](int32_t a, int32_t b, int32_t c) {
    const auto p = [&](int32_t v) {
      return Eigen::Vector3d(g.positions[3 * static_cast<size_t>(v)],
                             g.positions[3 * static_cast<size_t>(v) + 1], 0.0);
    };
    const double turn = (p(b) - p(a)).cross(p(c) - p(a)).z();
    if (turn * side > 0) {
      pushTriangle(g.triangles, a, b, c);
    } else {
      pushTriangle(g.triangles, a, c, b);
    }
  };
  for (size_t k = 0; k + 1 < ring.size(); ++k) {
    const Ring& outer = ring[k];
    const Ring& inner = ring[k + 1];
    const auto angle = [](const Ring& r, int32_t i) {
      return r.phase + 2 * std::numbers::pi * i / r.count;
    };
    // Vertex i of a ring is r.first + i % r.count. The walk starts on the edge from outer
    // vertex 0 to inner vertex 0 (at or just after it in angle) and goes once around.
    int32_t i = 0, j = 0;
    while (i < outer.count || j < inner.count) {
      const double nextOuter = angle(outer, i + 1);
      const double nextInner = angle(inner, j + 1);
      const int32_t a = outer.first + i % outer.count;
      const int32_t b = inner.first + j % inner.count;
      if (j >= inner.count || (i < outer.count && nextOuter <= nextInner)) {
        face(a, outer.first + (i + 1) % outer.count, b);
        ++i;
      } else {
        face(a, inner.first + (j + 1) % inner.count, b);
        ++j;
      }
    }
  }
  const Ring& last = ring.back();
  for (int32_t i = 0; i < last.count; ++i) {
    face(last.first + i, last.first + (i + 1) % last.count, centre);
  }
}

Geometry makeCylinder(const PrimitiveDef& def) {
  requirePositive(def.radius, "radius");
  requirePositive(def.height, "height");
  const double circumference = 2 * std::numbers::pi * def.radius;
  const double cell = std::max(circumference, def.height) / def.resolution;
  int32_t around = cellCount(circumference, cell, 4);
  around += around % 2;  // even, so the checkerboard of diagonals closes over the seam
  const int32_t rings = cellCount(def.height, cell, 1);
  Geometry g;
  for (int32_t j = 0; j <= rings; ++j) {
    for (int32_t i = 0; i < around; ++i) {
      const double theta = 2 * std::numbers::pi * i / around;
      const Eigen::Vector3d radial(std::cos(theta), std::sin(theta), 0);
      pushVector(
          g.positions,
          def.radius * radial + Eigen::Vector3d(0, 0, -0.5 * def.height + def.height * j / rings));
      pushVector(g.normals, radial);
    }
  }
  // (e_theta, e_z, e_r) is right-handed, so the grid (i: angle, j: height) triangulated
  // counter-clockwise in (i, j) faces outward. Column `around` is column 0 again.
  triangulateGrid(
      around, rings, [&](int32_t i, int32_t j) { return j * around + i % around; }, g.triangles);
  if (def.caps) {
    addCap(g, 0, around, cell, -0.5 * def.height, def.radius, -1.0);
    addCap(g, rings * around, around, cell, 0.5 * def.height, def.radius, 1.0);
  }
  return g;
}

Geometry makeBox(const PrimitiveDef& def) {
  for (int d = 0; d < 3; ++d) {
    const std::string what = "size[" + std::to_string(d) + "]";
    requirePositive(def.size[static_cast<size_t>(d)], what.c_str());
  }
  const double cell = std::max({def.size[0], def.size[1], def.size[2]}) / def.resolution;
  const std::array<int32_t, 3> n = {cellCount(def.size[0], cell, 1),
                                    cellCount(def.size[1], cell, 1),
                                    cellCount(def.size[2], cell, 1)};
  Geometry g;
  // Surface vertices are lattice points (i, j, k) of the box's grid. A point on an edge of
  // the box (two or three coordinates at an extreme) is shared by two or three faces, which
  // find it in a map of the O(n) edge points; a point inside a face is created once, by
  // that face. Each face first resolves its (nu + 1, nv + 1) lattice to vertex indices.
  std::unordered_map<int64_t, int32_t> vertexOfEdgePoint;
  auto vertex = [&](const std::array<int32_t, 3>& l) {
    int extremes = 0;
    for (size_t d = 0; d < 3; ++d) extremes += l[d] == 0 || l[d] == n[d];
    const int32_t next = g.vertexCount();
    if (extremes >= 2) {
      const int64_t key = l[0] + int64_t{n[0] + 1} * (l[1] + int64_t{n[1] + 1} * l[2]);
      const auto [it, inserted] = vertexOfEdgePoint.try_emplace(key, next);
      if (!inserted) return it->second;
    }
    for (size_t d = 0; d < 3; ++d) {
      g.positions.push_back(-0.5 * def.size[d] + def.size[d] * l[d] / n[d]);
    }
    return next;
  };
  for (int32_t axis = 0; axis < 3; ++axis) {
    for (int32_t side = 0; side < 2; ++side) {
      // In-plane axes (u, v) with u x v = the outward normal: (axis+1, axis+2) on the
      // + side (x: y z, y: z x, z: x y), swapped on the - side.
      size_t u = static_cast<size_t>(axis + 1) % 3, v = static_cast<size_t>(axis + 2) % 3;
      if (side == 0) std::swap(u, v);
      const int32_t nu = n[u], nv = n[v];
      std::vector<int32_t> face(static_cast<size_t>(nu + 1) * static_cast<size_t>(nv + 1));
      for (int32_t j = 0; j <= nv; ++j) {
        for (int32_t i = 0; i <= nu; ++i) {
          std::array<int32_t, 3> l{};
          l[static_cast<size_t>(axis)] = side == 0 ? 0 : n[static_cast<size_t>(axis)];
          l[u] = i;
          l[v] = j;
          face[static_cast<size_t>(j) * static_cast<size_t>(nu + 1) + static_cast<size_t>(i)] =
              vertex(l);
        }
      }
      triangulateGrid(
          nu, nv,
          [&](int32_t i, int32_t j) {
            return face[static_cast<size_t>(j) * static_cast<size_t>(nu + 1) +
                        static_cast<size_t>(i)];
          },
          g.triangles);
    }
  }
  computeVertexNormals(g);
  return g;
}

}  // namespace

Geometry makePrimitive(const PrimitiveDef& primitive) {
  if (primitive.resolution < 1 || primitive.resolution > kMaxResolution) {
    throw InputError("primitive resolution = " + std::to_string(primitive.resolution) +
                     ": must be in [1, " + std::to_string(kMaxResolution) + "]");
  }
  switch (primitive.type) {
    case PrimitiveType::kSheet: return makeSheet(primitive);
    case PrimitiveType::kSphere: return makeSphere(primitive);
    case PrimitiveType::kHemisphere: return makeHemisphere(primitive);
    case PrimitiveType::kCylinder: return makeCylinder(primitive);
    case PrimitiveType::kBox: return makeBox(primitive);
  }
  throw InputError("primitive type " + std::to_string(static_cast<int>(primitive.type)) +
                   " is unknown");
}

Geometry makeEquilateralLattice(int rows, int cols, double spacing) {
  Geometry g;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      g.positions.insert(g.positions.end(),
                         {spacing * (c + 0.5 * (r % 2)), spacing * std::sqrt(3.0) / 2.0 * r, 0.0});
    }
  }
  const auto id = [cols](int r, int c) { return r * cols + c; };
  for (int r = 0; r + 1 < rows; ++r) {
    for (int c = 0; c + 1 < cols; ++c) {
      if (r % 2 == 0) {
        g.triangles.insert(g.triangles.end(), {id(r, c), id(r, c + 1), id(r + 1, c)});
        g.triangles.insert(g.triangles.end(), {id(r, c + 1), id(r + 1, c + 1), id(r + 1, c)});
      } else {
        g.triangles.insert(g.triangles.end(), {id(r, c), id(r + 1, c + 1), id(r + 1, c)});
        g.triangles.insert(g.triangles.end(), {id(r, c), id(r, c + 1), id(r + 1, c + 1)});
      }
    }
  }
  return g;
}

void applyTransform(Geometry& geometry, const TransformDef& transform) {
  for (size_t d = 0; d < 3; ++d) {
    const double s = transform.scale[d];
    if (!(s != 0) || !std::isfinite(s)) {
      throw InputError("transform scale[" + std::to_string(d) + "] = " + std::to_string(s) +
                       ": must be finite and non-zero");
    }
    if (!std::isfinite(transform.rotationDegrees[d]) || !std::isfinite(transform.translation[d])) {
      throw InputError("transform rotation and translation must be finite");
    }
  }
  if (geometry.positions.size() % 3 != 0 ||
      (geometry.hasNormals() && geometry.normals.size() != geometry.positions.size())) {
    throw InputError("applyTransform: positions and normals must both have shape (nVertices, 3)");
  }
  const Eigen::Vector3d scale(transform.scale[0], transform.scale[1], transform.scale[2]);
  const Eigen::Vector3d translation(transform.translation[0], transform.translation[1],
                                    transform.translation[2]);
  const double toRadians = std::numbers::pi / 180.0;
  // R = Rz * Ry * Rx: applied to a vector, the rotation about x acts first.
  const Eigen::Matrix3d rotation =
      (Eigen::AngleAxisd(transform.rotationDegrees[2] * toRadians, Eigen::Vector3d::UnitZ()) *
       Eigen::AngleAxisd(transform.rotationDegrees[1] * toRadians, Eigen::Vector3d::UnitY()) *
       Eigen::AngleAxisd(transform.rotationDegrees[0] * toRadians, Eigen::Vector3d::UnitX()))
          .toRotationMatrix();

  // x' = R S x + t.
  for (size_t i = 0; i < geometry.positions.size(); i += 3) {
    const Eigen::Vector3d x(geometry.positions[i], geometry.positions[i + 1],
                            geometry.positions[i + 2]);
    const Eigen::Vector3d y = rotation * scale.cwiseProduct(x) + translation;
    for (size_t d = 0; d < 3; ++d) geometry.positions[i + d] = y[static_cast<Eigen::Index>(d)];
  }
  // Normals map by the inverse transpose of M = R S: (R S)^-T = R S^-1 since R^-T = R.
  for (size_t i = 0; i < geometry.normals.size(); i += 3) {
    const Eigen::Vector3d nv(geometry.normals[i], geometry.normals[i + 1], geometry.normals[i + 2]);
    Eigen::Vector3d m = rotation * nv.cwiseQuotient(scale);
    const double length = m.norm();
    if (length > 0) m /= length;
    for (size_t d = 0; d < 3; ++d) geometry.normals[i + d] = m[static_cast<Eigen::Index>(d)];
  }
  // det(R S) = sx sy sz < 0 mirrors the shape, which turns counter-clockwise into clockwise.
  if (scale.prod() < 0) {
    for (size_t t = 0; t + 2 < geometry.triangles.size(); t += 3) {
      std::swap(geometry.triangles[t + 1], geometry.triangles[t + 2]);
    }
  }
}

}  // namespace shellsim
