#include "geometry/triangle_mesh.hpp"

#include <algorithm>
#include <sstream>

#include "core/vec3.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

struct HalfEdge {
  uint64_t key;  // (min vertex << 32) | max vertex
  int32_t triangle;
  int32_t corner;  // the half-edge runs from this corner to the next
};

}  // namespace

TriangleMeshTopology checkedTriangleMesh(const Geometry& mesh, const std::string& who) {
  const auto fail = [&](const std::string& what) { throw InputError(who + ": " + what); };
  if (mesh.isPointCloud()) fail("needs a triangle mesh, but the geometry is a point cloud");
  if (mesh.positions.size() % 3 != 0 || mesh.triangles.size() % 3 != 0) {
    fail("positions must be (nVertices, 3) and triangles (nTriangles, 3)");
  }
  const int32_t nodeCount = mesh.vertexCount();
  const auto vertex = [&](int32_t v) {
    const auto i = static_cast<size_t>(v);
    return Vec3(mesh.positions[3 * i], mesh.positions[3 * i + 1], mesh.positions[3 * i + 2]);
  };
  for (int32_t v = 0; v < nodeCount; ++v) {
    if (!vertex(v).allFinite()) fail("vertex " + std::to_string(v) + ": non-finite position");
  }
  const auto triangleCount = static_cast<size_t>(mesh.triangleCount());
  TriangleMeshTopology topology;
  topology.restArea.resize(triangleCount);
  std::vector<uint8_t> used(static_cast<size_t>(nodeCount), 0);
  for (size_t t = 0; t < triangleCount; ++t) {
    const int32_t* tri = &mesh.triangles[3 * t];
    for (int c = 0; c < 3; ++c) {
      if (tri[c] < 0 || tri[c] >= nodeCount) {
        std::ostringstream msg;
        msg << "triangle " << t << ": vertex index " << tri[c] << " out of range [0, " << nodeCount
            << ")";
        fail(msg.str());
      }
    }
    std::ostringstream name;
    name << "triangle " << t << " (" << tri[0] << ", " << tri[1] << ", " << tri[2] << ")";
    if (tri[0] == tri[1] || tri[1] == tri[2] || tri[2] == tri[0]) {
      fail(name.str() + ": repeated vertex");
    }
    const Vec3 a = vertex(tri[0]), b = vertex(tri[1]), c = vertex(tri[2]);
    const double area = 0.5 * (b - a).cross(c - a).norm();
    const double longest =
        std::max({(b - a).squaredNorm(), (c - b).squaredNorm(), (a - c).squaredNorm()});
    if (!(area > 1e-12 * longest)) {
      std::ostringstream msg;
      msg << name.str() << ": degenerate, rest area " << area << " m^2";
      fail(msg.str());
    }
    topology.restArea[t] = area;
    for (int k = 0; k < 3; ++k) used[static_cast<size_t>(tri[k])] = 1;
  }
  for (int32_t v = 0; v < nodeCount; ++v) {
    if (used[static_cast<size_t>(v)] == 0) {
      fail("vertex " + std::to_string(v) +
           ": belongs to no triangle (no mass); remove unreferenced vertices first");
    }
  }

  std::vector<HalfEdge> halfEdges(3 * triangleCount);
  for (size_t t = 0; t < triangleCount; ++t) {
    for (int c = 0; c < 3; ++c) {
      const auto i = static_cast<uint32_t>(mesh.triangles[3 * t + static_cast<size_t>(c)]);
      const auto j =
          static_cast<uint32_t>(mesh.triangles[3 * t + static_cast<size_t>((c + 1) % 3)]);
      const uint64_t key = (static_cast<uint64_t>(std::min(i, j)) << 32) | std::max(i, j);
      halfEdges[3 * t + static_cast<size_t>(c)] = {key, static_cast<int32_t>(t), c};
    }
  }
  std::sort(halfEdges.begin(), halfEdges.end(), [](const HalfEdge& a, const HalfEdge& b) {
    return a.key != b.key
               ? a.key < b.key
               : (a.triangle != b.triangle ? a.triangle < b.triangle : a.corner < b.corner);
  });
  const auto from = [&](const HalfEdge& h) {
    return mesh.triangles[3 * static_cast<size_t>(h.triangle) + static_cast<size_t>(h.corner)];
  };
  topology.faceNeighbour.assign(3 * triangleCount, -1);
  // The half-edge from corner c is the edge opposite corner c + 2.
  const auto faceEdge = [](const HalfEdge& h) { return 3 * h.triangle + (h.corner + 2) % 3; };
  for (size_t begin = 0; begin < halfEdges.size();) {
    size_t end = begin + 1;
    while (end < halfEdges.size() && halfEdges[end].key == halfEdges[begin].key) ++end;
    const auto lo = static_cast<int32_t>(halfEdges[begin].key >> 32);
    const auto hi = static_cast<int32_t>(halfEdges[begin].key & 0xffffffffu);
    if (end - begin > 2) {
      std::ostringstream msg;
      msg << "edge (" << lo << ", " << hi << ") is shared by " << end - begin << " triangles (";
      for (size_t k = begin; k < end; ++k) msg << (k > begin ? ", " : "") << halfEdges[k].triangle;
      msg << "): non-manifold (`shellsim repair` or the body's `repair` option splits such "
             "edges; the fiber and mass_spring models take the mesh as it is)";
      fail(msg.str());
    }
    const HalfEdge& first = halfEdges[begin];
    topology.edgeNodes.insert(topology.edgeNodes.end(), {lo, hi});
    topology.edgeSides.insert(topology.edgeSides.end(), {first.triangle, first.corner, -1, -1});
    if (end - begin == 2) {
      const HalfEdge& second = halfEdges[begin + 1];
      if (from(first) == from(second)) {
        std::ostringstream msg;
        msg << "edge (" << lo << ", " << hi << "): triangles " << first.triangle << " and "
            << second.triangle
            << " traverse it in the same direction (inconsistent orientation); orient the mesh "
               "consistently (`shellsim repair` or the body's `repair` option does)";
        fail(msg.str());
      }
      topology.edgeSides[topology.edgeSides.size() - 2] = second.triangle;
      topology.edgeSides.back() = second.corner;
      topology.faceNeighbour[static_cast<size_t>(faceEdge(first))] = faceEdge(second);
      topology.faceNeighbour[static_cast<size_t>(faceEdge(second))] = faceEdge(first);
    }
    begin = end;
  }
  return topology;
}

std::vector<double> lumpedMasses(std::span<const int32_t> triangles,
                                 std::span<const double> restArea, double arealDensity,
                                 int32_t nodeCount) {
  std::vector<double> mass(static_cast<size_t>(nodeCount), 0.0);
  for (size_t t = 0; t < restArea.size(); ++t) {
    for (size_t k = 0; k < 3; ++k) {
      mass[static_cast<size_t>(triangles[3 * t + k])] += arealDensity * restArea[t] / 3.0;
    }
  }
  return mass;
}

}  // namespace shellsim
