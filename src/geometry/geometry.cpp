// Bounds, edge topology and area-weighted vertex normals of triangle meshes.
#include "shellsim/geometry.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

// Throws InputError unless the flat arrays have whole rows of 3 and every triangle
// index names a vertex. Reports the first bad triangle (no silent failure).
void checkMeshArrays(const Geometry& mesh, const char* caller) {
  if (mesh.positions.size() % 3 != 0) {
    throw InputError(std::string(caller) + ": positions has " +
                     std::to_string(mesh.positions.size()) + " values, not a multiple of 3");
  }
  if (mesh.triangles.size() % 3 != 0) {
    throw InputError(std::string(caller) + ": triangles has " +
                     std::to_string(mesh.triangles.size()) + " indices, not a multiple of 3");
  }
  const int32_t n = mesh.vertexCount();
  for (size_t i = 0; i < mesh.triangles.size(); ++i) {
    const int32_t v = mesh.triangles[i];
    if (v < 0 || v >= n) {
      throw InputError(std::string(caller) + ": triangle " + std::to_string(i / 3) +
                       " names vertex " + std::to_string(v) + " of " + std::to_string(n));
    }
  }
}

// Disjoint sets with path halving and union by index (the smaller root wins), so the
// result is independent of the order in which unions happen.
class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int32_t find(int32_t x) {
    while (parent_[static_cast<size_t>(x)] != x) {
      parent_[static_cast<size_t>(x)] =
          parent_[static_cast<size_t>(parent_[static_cast<size_t>(x)])];
      x = parent_[static_cast<size_t>(x)];
    }
    return x;
  }
  void unite(int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (a < b) std::swap(a, b);
    parent_[static_cast<size_t>(a)] = b;
  }

 private:
  std::vector<int32_t> parent_;  // (n)
};

// Twice the area vector of triangle (a, b, c): (pb - pa) x (pc - pa), written to out[3].
void crossOfEdges(const double* p, int32_t a, int32_t b, int32_t c, double out[3]) {
  const double* pa = p + 3 * static_cast<size_t>(a);
  const double* pb = p + 3 * static_cast<size_t>(b);
  const double* pc = p + 3 * static_cast<size_t>(c);
  const double e1[3] = {pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]};
  const double e2[3] = {pc[0] - pa[0], pc[1] - pa[1], pc[2] - pa[2]};
  out[0] = e1[1] * e2[2] - e1[2] * e2[1];
  out[1] = e1[2] * e2[0] - e1[0] * e2[2];
  out[2] = e1[0] * e2[1] - e1[1] * e2[0];
}

}  // namespace

Geometry cropGeometry(const Geometry& geometry, const std::function<bool(const double*)>& inside) {
  const auto n = static_cast<size_t>(geometry.vertexCount());
  std::vector<char> keep(n, 0);
  for (size_t v = 0; v < n; ++v) keep[v] = inside(&geometry.positions[3 * v]) ? 1 : 0;
  Geometry part;
  if (!geometry.isPointCloud()) {
    // A mesh stays a mesh: a vertex is kept only where a kept triangle uses it.
    std::vector<char> used(n, 0);
    for (size_t t = 0; t + 2 < geometry.triangles.size(); t += 3) {
      const auto a = static_cast<size_t>(geometry.triangles[t]);
      const auto b = static_cast<size_t>(geometry.triangles[t + 1]);
      const auto c = static_cast<size_t>(geometry.triangles[t + 2]);
      if (keep[a] != 0 && keep[b] != 0 && keep[c] != 0) {
        used[a] = used[b] = used[c] = 1;
        part.triangles.insert(
            part.triangles.end(),
            {geometry.triangles[t], geometry.triangles[t + 1], geometry.triangles[t + 2]});
      }
    }
    keep = std::move(used);
  }
  std::vector<int32_t> newIndex(n, -1);
  int32_t count = 0;
  for (size_t v = 0; v < n; ++v) {
    if (keep[v] != 0) newIndex[v] = count++;
  }
  for (int32_t& index : part.triangles) index = newIndex[static_cast<size_t>(index)];
  const auto copyRows = [&](const auto& from, auto& to, size_t width) {
    if (from.size() != width * n) return;
    for (size_t v = 0; v < n; ++v) {
      if (keep[v] == 0) continue;
      to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>(width * v),
                from.begin() + static_cast<std::ptrdiff_t>(width * (v + 1)));
    }
  };
  copyRows(geometry.positions, part.positions, 3);
  copyRows(geometry.normals, part.normals, 3);
  copyRows(geometry.colors, part.colors, 3);
  copyRows(geometry.pieces, part.pieces, 1);
  for (const VertexScalar& scalar : geometry.vertexScalars) {
    VertexScalar& kept = part.vertexScalars.emplace_back();
    kept.name = scalar.name;
    copyRows(scalar.values, kept.values, 1);
  }
  return part;
}

Bounds computeBounds(const Geometry& geometry) {
  Bounds bounds;
  const size_t n = geometry.positions.size() / 3;
  if (n == 0) return bounds;
  for (int d = 0; d < 3; ++d)
    bounds.min[d] = bounds.max[d] = geometry.positions[static_cast<size_t>(d)];
  for (size_t i = 1; i < n; ++i) {
    for (size_t d = 0; d < 3; ++d) {
      const double x = geometry.positions[3 * i + d];
      bounds.min[d] = std::min(bounds.min[d], x);
      bounds.max[d] = std::max(bounds.max[d], x);
    }
  }
  return bounds;
}

// Conventions, so that counts are well defined on broken input:
//  - A triangle with a repeated vertex index is degenerate and takes no part in the edge
//    counts (it has no well-defined edges); its vertices still count as referenced and
//    still join connected components.
//  - A triangle with three distinct indices whose area is at most
//    kDegenerateAreaRatio * d^2, d the diagonal of the mesh's bounding box, is degenerate
//    too but keeps its edges: its connectivity is valid, only its geometry collapsed.
//    1e-14 is about 100 times the relative rounding error of the cross product of two
//    edges of length d, so exactly collinear or coincident vertices are caught while a
//    genuine triangle would need edges ~1e-7 d long to be flagged.
//  - Edges are counted by sorting the (min, max) vertex pair of every edge occurrence;
//    the run length of a pair is its number of incident triangles.
MeshTopology analyzeTopology(const Geometry& mesh) {
  constexpr double kDegenerateAreaRatio = 1e-14;
  checkMeshArrays(mesh, "analyzeTopology");
  MeshTopology topology;
  const int32_t n = mesh.vertexCount();
  const int32_t m = mesh.triangleCount();
  const std::vector<int32_t>& t = mesh.triangles;
  const double* p = mesh.positions.data();

  const Bounds bounds = computeBounds(mesh);
  double diagonal2 = 0;
  for (int d = 0; d < 3; ++d)
    diagonal2 += (bounds.max[d] - bounds.min[d]) * (bounds.max[d] - bounds.min[d]);
  // area <= ratio * d^2  <=>  |cross| <= 2 * ratio * d^2 (|cross| is twice the area).
  const double crossLimit = 2.0 * kDegenerateAreaRatio * diagonal2;
  const auto distance = [&](int32_t a, int32_t b) {
    double d2 = 0;
    for (size_t d = 0; d < 3; ++d) {
      const double x = p[3 * static_cast<size_t>(a) + d] - p[3 * static_cast<size_t>(b) + d];
      d2 += x * x;
    }
    return std::sqrt(d2);
  };

  // (min << 32 | max) per edge occurrence, and whether it runs min -> max, (<= 3 m)
  std::vector<std::pair<uint64_t, bool>> edgeKeys;
  edgeKeys.reserve(3 * static_cast<size_t>(m));
  std::vector<char> referenced(static_cast<size_t>(n), 0);  // (n)
  std::vector<double> heights;                              // per non-degenerate triangle, m
  UnionFind components(static_cast<size_t>(n));
  for (int32_t f = 0; f < m; ++f) {
    const int32_t v[3] = {t[3 * static_cast<size_t>(f)], t[3 * static_cast<size_t>(f) + 1],
                          t[3 * static_cast<size_t>(f) + 2]};
    for (int32_t x : v) referenced[static_cast<size_t>(x)] = 1;
    components.unite(v[0], v[1]);
    components.unite(v[1], v[2]);
    if (v[0] == v[1] || v[1] == v[2] || v[2] == v[0]) {
      ++topology.degenerateTriangleCount;
      continue;
    }
    double c[3];
    crossOfEdges(p, v[0], v[1], v[2], c);
    const double doubleArea = std::sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    for (int k = 0; k < 3; ++k) {
      const int32_t from = v[k], to = v[(k + 1) % 3];
      const auto a = static_cast<uint64_t>(std::min(from, to));
      const auto b = static_cast<uint64_t>(std::max(from, to));
      edgeKeys.emplace_back(a << 32 | b, from < to);
    }
    if (doubleArea <= crossLimit) {
      ++topology.degenerateTriangleCount;
      continue;
    }
    const double longest =
        std::max({distance(v[0], v[1]), distance(v[1], v[2]), distance(v[2], v[0])});
    const double height = doubleArea / longest;
    heights.push_back(height);
    if (topology.smallestHeightTriangle < 0 || height < topology.smallestHeight) {
      topology.smallestHeight = height;
      topology.smallestHeightTriangle = f;
    }
  }

  std::sort(edgeKeys.begin(), edgeKeys.end());
  std::vector<double> edgeLengths;  // per unique edge, m
  for (size_t i = 0; i < edgeKeys.size();) {
    size_t j = i + 1;
    while (j < edgeKeys.size() && edgeKeys[j].first == edgeKeys[i].first) ++j;
    const size_t incident = j - i;
    ++topology.edgeCount;
    if (incident == 1) ++topology.boundaryEdgeCount;
    if (incident >= 3) ++topology.nonManifoldEdgeCount;
    // Sorted pairs: a consistent edge has one false (max -> min) and one true occurrence.
    if (incident == 2 && edgeKeys[i].second == edgeKeys[i + 1].second) {
      ++topology.inconsistentEdgeCount;
    }
    const uint64_t key = edgeKeys[i].first;
    edgeLengths.push_back(
        distance(static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffU)));
    i = j;
  }
  if (!edgeLengths.empty()) {
    const auto middle = edgeLengths.begin() + static_cast<std::ptrdiff_t>(edgeLengths.size() / 2);
    std::nth_element(edgeLengths.begin(), middle, edgeLengths.end());
    topology.medianEdgeLength = *middle;
  }
  for (double h : heights) {
    if (h < kSliverHeightRatio * topology.medianEdgeLength) ++topology.sliverTriangleCount;
  }

  std::vector<int64_t> componentSize(static_cast<size_t>(n), 0);  // per root vertex
  for (int32_t v = 0; v < n; ++v) {
    if (referenced[static_cast<size_t>(v)])
      ++componentSize[static_cast<size_t>(components.find(v))];
  }
  for (int32_t v = 0; v < n; ++v) {
    if (!referenced[static_cast<size_t>(v)]) {
      ++topology.unreferencedVertexCount;
    } else if (components.find(v) == v) {
      ++topology.connectedComponentCount;
      const int64_t size = componentSize[static_cast<size_t>(v)];
      if (topology.smallestComponentVertexCount == 0 ||
          size < topology.smallestComponentVertexCount) {
        topology.smallestComponentVertexCount = size;
      }
    }
  }

  // Duplicates: referenced vertices sorted by position; equal neighbours coincide.
  std::vector<int32_t> order;
  for (int32_t v = 0; v < n; ++v) {
    if (referenced[static_cast<size_t>(v)]) order.push_back(v);
  }
  const auto position = [&](int32_t v) {
    return std::array<double, 3>{p[3 * static_cast<size_t>(v)], p[3 * static_cast<size_t>(v) + 1],
                                 p[3 * static_cast<size_t>(v) + 2]};
  };
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return position(a) < position(b); });
  for (size_t i = 1; i < order.size(); ++i) {
    if (position(order[i]) == position(order[i - 1])) ++topology.duplicateVertexCount;
  }
  return topology;
}

std::vector<std::string> meshRefusals(const MeshTopology& t) {
  std::vector<std::string> lines;
  const auto refuse = [&](int64_t count, const std::string& what) {
    if (count > 0) {
      lines.push_back(std::to_string(count) + " " + what +
                      ": the discrete_shell and inelastic_shell models refuse the mesh (fiber "
                      "and mass_spring run on it; `shellsim repair` fixes it)");
    }
  };
  refuse(t.nonManifoldEdgeCount, "non-manifold edges (shared by 3 or more triangles)");
  refuse(t.inconsistentEdgeCount,
         "edges across which the triangles' orientation flips (orient the mesh consistently)");
  refuse(t.degenerateTriangleCount, "degenerate triangles (zero area or a repeated vertex)");
  return lines;
}

std::vector<std::string> meshWarnings(const MeshTopology& t) {
  std::vector<std::string> lines;
  std::ostringstream msg;
  msg.precision(3);
  if (t.sliverTriangleCount > 0 && t.smallestHeight > 0) {
    const double ratio = t.medianEdgeLength / t.smallestHeight;
    msg << t.sliverTriangleCount << " sliver triangles (lower than " << kSliverHeightRatio
        << " of the median edge, " << t.medianEdgeLength << " m); the lowest, triangle "
        << t.smallestHeightTriangle << ", is " << t.smallestHeight << " m high, 1/" << ratio
        << " of it: the stable explicit step may follow the lowest triangles, up to " << ratio
        << " times shorter than on an even mesh of this size; `shellsim repair --remesh auto` "
           "makes even triangles, or integrate implicitly";
    lines.push_back(msg.str());
    msg.str("");
  }
  if (t.duplicateVertexCount > 0) {
    lines.push_back(std::to_string(t.duplicateVertexCount) +
                    " vertices lie on another vertex: the mesh is cut there and its sides "
                    "come apart (`shellsim repair` welds them)");
  }
  // A component of fewer than 100 vertices beside others is most often a stray part the
  // modeller left (a car body's 6-vertex clip), not a piece meant to fly off.
  if (t.connectedComponentCount > 1 && t.smallestComponentVertexCount < 100) {
    lines.push_back(std::to_string(t.connectedComponentCount) +
                    " connected components, the smallest of " +
                    std::to_string(t.smallestComponentVertexCount) +
                    " vertices: each moves as a piece of its own (`shellsim repair "
                    "--min-component-faces N` drops stray parts)");
  }
  return lines;
}

// Area-weighted vertex normals: each vertex sums the unnormalised face normals
// (pb - pa) x (pc - pa) = 2 A n_f of its triangles, so a face contributes in proportion
// to its area, then the sum is normalised. The faces are visited in index order on one
// thread, so the result does not depend on the thread count.
//
// A vertex whose sum vanishes (unreferenced, only on degenerate triangles, or on faces
// whose normals cancel) gets (0, 0, 1): a unit vector that keeps `normals` usable, with
// no claim to be meaningful.
std::vector<int32_t> removeUnreferencedVertices(Geometry& mesh) {
  std::vector<int32_t> remap(static_cast<size_t>(mesh.vertexCount()), -1);
  for (int32_t v : mesh.triangles) remap[static_cast<size_t>(v)] = 0;
  int32_t next = 0;
  for (auto& r : remap) {
    if (r == 0) r = next++;
  }
  if (next == mesh.vertexCount()) return remap;
  Geometry compact;
  compact.positions.resize(3 * static_cast<size_t>(next));
  if (mesh.hasNormals()) compact.normals.resize(3 * static_cast<size_t>(next));
  if (!mesh.colors.empty()) compact.colors.resize(3 * static_cast<size_t>(next));
  for (size_t v = 0; v < remap.size(); ++v) {
    if (remap[v] < 0) continue;
    const size_t to = 3 * static_cast<size_t>(remap[v]);
    for (int c = 0; c < 3; ++c) {
      compact.positions[to + c] = mesh.positions[3 * v + c];
      if (mesh.hasNormals()) compact.normals[to + c] = mesh.normals[3 * v + c];
      if (!mesh.colors.empty()) compact.colors[to + c] = mesh.colors[3 * v + c];
    }
  }
  compact.triangles = mesh.triangles;
  for (auto& v : compact.triangles) v = remap[static_cast<size_t>(v)];
  mesh = std::move(compact);
  return remap;
}

std::vector<int32_t> weldCoincidentVertices(Geometry& geometry) {
  const auto n = static_cast<size_t>(geometry.vertexCount());
  std::vector<int32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  const auto position = [&](int32_t v) {
    const size_t i = 3 * static_cast<size_t>(v);
    return std::array<double, 3>{geometry.positions[i], geometry.positions[i + 1],
                                 geometry.positions[i + 2]};
  };
  // Equal positions end up next to each other, the lowest index first.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::pair(position(a), a) < std::pair(position(b), b);
  });
  std::vector<int32_t> representative(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = order[i];
    representative[static_cast<size_t>(v)] = i > 0 && position(v) == position(order[i - 1])
                                                 ? representative[static_cast<size_t>(order[i - 1])]
                                                 : v;
  }
  std::vector<int32_t> remap(n, -1);
  int32_t next = 0;
  for (size_t v = 0; v < n; ++v) {
    if (representative[v] == static_cast<int32_t>(v)) remap[v] = next++;
  }
  if (static_cast<size_t>(next) == n) return remap;
  for (size_t v = 0; v < n; ++v) remap[v] = remap[static_cast<size_t>(representative[v])];
  Geometry welded;
  welded.positions.resize(3 * static_cast<size_t>(next));
  if (geometry.hasNormals()) welded.normals.resize(3 * static_cast<size_t>(next));
  if (!geometry.colors.empty()) welded.colors.resize(3 * static_cast<size_t>(next));
  for (size_t v = 0; v < n; ++v) {
    if (representative[v] != static_cast<int32_t>(v)) continue;
    const size_t to = 3 * static_cast<size_t>(remap[v]);
    for (size_t c = 0; c < 3; ++c) {
      welded.positions[to + c] = geometry.positions[3 * v + c];
      if (geometry.hasNormals()) welded.normals[to + c] = geometry.normals[3 * v + c];
      if (!geometry.colors.empty()) welded.colors[to + c] = geometry.colors[3 * v + c];
    }
  }
  for (size_t t = 0; t + 2 < geometry.triangles.size(); t += 3) {
    const int32_t a = remap[static_cast<size_t>(geometry.triangles[t])];
    const int32_t b = remap[static_cast<size_t>(geometry.triangles[t + 1])];
    const int32_t c = remap[static_cast<size_t>(geometry.triangles[t + 2])];
    if (a == b || b == c || a == c) continue;
    welded.triangles.insert(welded.triangles.end(), {a, b, c});
  }
  geometry = std::move(welded);
  return remap;
}

void computeVertexNormals(Geometry& mesh) {
  checkMeshArrays(mesh, "computeVertexNormals");
  const size_t n = static_cast<size_t>(mesh.vertexCount());
  std::vector<double> normals(3 * n, 0.0);  // (n, 3)
  const std::vector<int32_t>& t = mesh.triangles;
  for (size_t f = 0; f < t.size() / 3; ++f) {
    double c[3];
    crossOfEdges(mesh.positions.data(), t[3 * f], t[3 * f + 1], t[3 * f + 2], c);
    for (size_t k = 0; k < 3; ++k) {
      double* nv = &normals[3 * static_cast<size_t>(t[3 * f + k])];
      nv[0] += c[0];
      nv[1] += c[1];
      nv[2] += c[2];
    }
  }
  for (size_t v = 0; v < n; ++v) {
    double* nv = &normals[3 * v];
    const double length = std::sqrt(nv[0] * nv[0] + nv[1] * nv[1] + nv[2] * nv[2]);
    if (length > 0 && std::isfinite(length)) {
      nv[0] /= length;
      nv[1] /= length;
      nv[2] /= length;
    } else {
      nv[0] = 0;
      nv[1] = 0;
      nv[2] = 1;
    }
  }
  mesh.normals = std::move(normals);
}

bool isVertexScalarName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

}  // namespace shellsim
