#include "geometry/volume_sampling.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <vector>

#include "geometry/sampling.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

double windingNumber(const Geometry& mesh, const Vec3& p) {
  double sum = 0;
  const auto triangles = static_cast<size_t>(mesh.triangleCount());
  for (size_t t = 0; t < triangles; ++t) {
    const Vec3 a = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t])) - p;
    const Vec3 b = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 1])) - p;
    const Vec3 c = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 2])) - p;
    const double la = a.norm(), lb = b.norm(), lc = c.norm();
    const double numerator = a.dot(b.cross(c));
    const double denominator = la * lb * lc + a.dot(b) * lc + b.dot(c) * la + c.dot(a) * lb;
    sum += 2.0 * std::atan2(numerator, denominator);
  }
  return sum / (4.0 * std::numbers::pi);
}

double enclosedVolume(const Geometry& mesh) {
  double sum = 0;
  const auto triangles = static_cast<size_t>(mesh.triangleCount());
  for (size_t t = 0; t < triangles; ++t) {
    const Vec3 a = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t]));
    const Vec3 b = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 1]));
    const Vec3 c = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 2]));
    sum += a.dot(b.cross(c));
  }
  return std::abs(sum) / 6.0;
}

namespace {

// a before b in the (u, v) plane, lexicographically: the order in which an edge's end points
// are taken, so that the two triangles sharing it see exactly opposite edge functions.
bool before(const Vec3& a, const Vec3& b, int u, int v) {
  return a[u] < b[u] || (a[u] == b[u] && a[v] < b[v]);
}

// The edge function of the point (pu, pv) against the edge a -> b in the (u, v) plane: twice
// the signed area of (a, b, p), positive left of the edge. Computed from the edge's end
// points in a fixed order, so that the triangles on either side of the edge get values that
// are exactly each other's negative, also after rounding.
double edgeFunction(const Vec3& a, const Vec3& b, int u, int v, double pu, double pv) {
  const bool flip = before(b, a, u, v);
  const Vec3& lo = flip ? b : a;
  const Vec3& hi = flip ? a : b;
  const double e = (hi[u] - lo[u]) * (pv - lo[v]) - (pu - lo[u]) * (hi[v] - lo[v]);
  return flip ? -e : e;
}

// Where a column passes exactly through an edge (or a vertex), the point is moved by the
// infinitesimal (eps, eps^2): the sign of the edge function's change is that of
// -(b_v - a_v), or of (b_u - a_u) when the edge is parallel to u (simulation of simplicity).
// Of the two triangles sharing the edge exactly one then holds the column, so the crossing
// counts once: before, a column through a face diagonal of the box primitive counted it
// twice or not at all, and a 6 x 6 x 24 bar lost one of its 864 lattice points.
double edgeTieBreak(const Vec3& a, const Vec3& b, int u, int v) {
  const bool flip = before(b, a, u, v);
  const Vec3& lo = flip ? b : a;
  const Vec3& hi = flip ? a : b;
  const double d = hi[v] != lo[v] ? -(hi[v] - lo[v]) : hi[u] - lo[u];
  return flip ? -d : d;
}

}  // namespace

VolumeSampling sampleVolume(const Geometry& mesh, double spacing) {
  if (mesh.isPointCloud()) {
    throw InputError(
        "sampling a volume needs a closed triangle mesh, but the geometry is a "
        "point cloud");
  }
  if (!(spacing > 0) || !std::isfinite(spacing)) {
    std::ostringstream msg;
    msg << "volume sampling: spacing " << spacing << " must be positive";
    throw InputError(msg.str());
  }
  const Bounds bounds = computeBounds(mesh);
  size_t counts[3];
  double origin[3];
  double cells = 1;
  for (int a = 0; a < 3; ++a) {
    // floor(extent / spacing) points centred in the bounds: a box whose sides are multiples
    // of the spacing gets one point at the centre of each cell, none on its faces (where the
    // winding number is 1/2 and rounding would decide).
    const double extent =
        std::max(1.0, std::floor((bounds.max[a] - bounds.min[a]) / spacing + 1e-9));
    cells *= extent;
    if (!(cells <= 2e7)) {
      std::ostringstream msg;
      msg << "volume sampling: spacing " << spacing
          << " m puts more than 2e7 lattice points in the mesh's bounds: choose a larger spacing";
      throw InputError(msg.str());
    }
    counts[a] = static_cast<size_t>(extent);
    origin[a] = 0.5 * (bounds.min[a] + bounds.max[a]) - 0.5 * spacing * (extent - 1);
  }
  const size_t total = counts[0] * counts[1] * counts[2];
  const auto latticePoint = [&](size_t i) {
    const size_t ix = i % counts[0];
    const size_t iy = (i / counts[0]) % counts[1];
    const size_t iz = i / (counts[0] * counts[1]);
    return Vec3(origin[0] + spacing * static_cast<double>(ix),
                origin[1] + spacing * static_cast<double>(iy),
                origin[2] + spacing * static_cast<double>(iz));
  };
  // Inside by the winding number of rays along the lattice's columns (signed crossings), along
  // each of the three axes, and by majority: each triangle visits only the columns its
  // shadow covers, so the cost is the triangles plus the points (a generalized winding number
  // per point costs their product: 9.5 s for 2,000 phyxels of the bunny, 2 s now). A ray
  // through a hole (the bunny's open base) or exactly through an edge can miscount along one
  // axis; the two others outvote it. Signed counts, not parity: the cow's horns overlap its
  // head, and parity called the overlap outside.
  std::vector<uint8_t> votes(total, 0);
  const auto index = [&](size_t ix, size_t iy, size_t iz) {
    return ix + counts[0] * (iy + counts[1] * iz);
  };
  for (int axis = 0; axis < 3; ++axis) {
    const int u = (axis + 1) % 3, v = (axis + 2) % 3;
    const size_t columns = counts[u] * counts[v];
    // Per column (iu, iv): where triangles cross it along `axis`, and whether each faces
    // +axis (+1, leaving an outward-oriented surface) or -axis (-1).
    std::vector<std::vector<std::pair<double, int>>> crossings(columns);
    const auto triangles = static_cast<size_t>(mesh.triangleCount());
    for (size_t t = 0; t < triangles; ++t) {
      Vec3 corner[3];
      for (int k = 0; k < 3; ++k) {
        corner[k] = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + k]));
      }
      const double minU = std::min({corner[0][u], corner[1][u], corner[2][u]});
      const double maxU = std::max({corner[0][u], corner[1][u], corner[2][u]});
      const double minV = std::min({corner[0][v], corner[1][v], corner[2][v]});
      const double maxV = std::max({corner[0][v], corner[1][v], corner[2][v]});
      // The columns under the shadow's bounds, one more on each side: a column on the bounds
      // may round out of them, and the exact test below decides (a column through the
      // shared edge of two triangles belongs to the one the tie-break gives it, which may be
      // the one whose bounds it rounded out of).
      const double firstU = std::max(0.0, std::ceil((minU - origin[u]) / spacing) - 1);
      const double lastU = std::min(static_cast<double>(counts[u]) - 1,
                                    std::floor((maxU - origin[u]) / spacing) + 1);
      const double firstV = std::max(0.0, std::ceil((minV - origin[v]) / spacing) - 1);
      const double lastV = std::min(static_cast<double>(counts[v]) - 1,
                                    std::floor((maxV - origin[v]) / spacing) + 1);
      // Twice the signed area of the shadow, and the edge functions of a column point.
      const double area = (corner[1][u] - corner[0][u]) * (corner[2][v] - corner[0][v]) -
                          (corner[2][u] - corner[0][u]) * (corner[1][v] - corner[0][v]);
      if (area == 0) continue;  // seen edge-on: the ray grazes it
      for (double iu = firstU; iu <= lastU; ++iu) {
        for (double iv = firstV; iv <= lastV; ++iv) {
          const double pu = origin[u] + spacing * iu, pv = origin[v] + spacing * iv;
          double weight[3];
          bool inside = true;
          for (int k = 0; k < 3 && inside; ++k) {
            const double side =
                edgeFunction(corner[(k + 1) % 3], corner[(k + 2) % 3], u, v, pu, pv);
            weight[k] = side / area;
            inside = side != 0 ? (side > 0) == (area > 0)
                               : (edgeTieBreak(corner[(k + 1) % 3], corner[(k + 2) % 3], u, v) >
                                  0) == (area > 0);
          }
          if (!inside) continue;
          const double along = weight[0] * corner[0][axis] + weight[1] * corner[1][axis] +
                               weight[2] * corner[2][axis];
          crossings[static_cast<size_t>(iu) + counts[u] * static_cast<size_t>(iv)].emplace_back(
              along, area > 0 ? 1 : -1);
        }
      }
    }
    tbb::parallel_for(tbb::blocked_range<size_t>(0, columns, 64),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t c = r.begin(); c != r.end(); ++c) {
                          std::vector<std::pair<double, int>>& hits = crossings[c];
                          std::sort(hits.begin(), hits.end());
                          const size_t iu = c % counts[u], iv = c / counts[u];
                          // The ray's winding number: the signed crossings beyond the point
                          // (0 outside; 1 inside, -1 in an inward-oriented mesh, 2 where two
                          // closed parts overlap, which parity would call outside).
                          int beyond = 0;
                          for (const auto& hit : hits) beyond += hit.second;
                          size_t passed = 0;
                          for (size_t ia = 0; ia < counts[axis]; ++ia) {
                            const double at = origin[axis] + spacing * static_cast<double>(ia);
                            while (passed < hits.size() && hits[passed].first < at) {
                              beyond -= hits[passed].second;
                              ++passed;
                            }
                            if (beyond == 0) continue;
                            size_t ijk[3];
                            ijk[axis] = ia;
                            ijk[u] = iu;
                            ijk[v] = iv;
                            ++votes[index(ijk[0], ijk[1], ijk[2])];
                          }
                        }
                      });
  }
  VolumeSampling out;
  out.spacing = spacing;
  for (size_t i = 0; i < total; ++i) {
    if (votes[i] < 2) continue;
    const Vec3 p = latticePoint(i);
    out.positions.insert(out.positions.end(), {p.x(), p.y(), p.z()});
  }
  return out;
}

VolumeSampling sampleVolumeByCount(const Geometry& mesh, int32_t count) {
  if (count <= 0) {
    std::ostringstream msg;
    msg << "volume sampling: count " << count << " must be positive";
    throw InputError(msg.str());
  }
  if (mesh.isPointCloud()) return sampleVolume(mesh, 1.0);  // throws the point-cloud error
  const double volume = enclosedVolume(mesh);
  if (!(volume > 0)) {
    throw InputError("volume sampling: the mesh encloses no volume (is it closed?)");
  }
  double spacing = std::cbrt(volume / count);
  VolumeSampling best = sampleVolume(mesh, spacing);
  for (int refinement = 0; refinement < 6; ++refinement) {
    const auto found = static_cast<double>(best.positions.size() / 3);
    if (std::abs(found - count) <= 0.1 * count) break;
    spacing *= std::cbrt(std::max(found, 1.0) / count);
    VolumeSampling next = sampleVolume(mesh, spacing);
    const auto nextFound = static_cast<double>(next.positions.size() / 3);
    if (std::abs(nextFound - count) < std::abs(found - count)) best = std::move(next);
  }
  return best;
}

VolumeSampling sampleSheetLayers(const Geometry& mesh, double thickness, int32_t layers) {
  if (mesh.isPointCloud()) throw InputError("sheet layers: need a triangle mesh");
  if (!(thickness > 0) || !std::isfinite(thickness)) {
    throw InputError("sheet layers: the thickness must be positive");
  }
  if (layers != 2 && layers != 3) throw InputError("sheet layers: 2 or 3 layers");
  const double edge = std::sqrt(0.6);
  const std::vector<double> zeta =
      layers == 2 ? std::vector<double>{-1 / std::sqrt(3.0), 1 / std::sqrt(3.0)}
                  : std::vector<double>{-edge, 0, edge};
  const std::vector<double> weight =
      layers == 2 ? std::vector<double>{1, 1} : std::vector<double>{5.0 / 9, 8.0 / 9, 5.0 / 9};
  const auto vertices = static_cast<size_t>(mesh.vertexCount());
  const std::vector<double> area = voronoiAreas(mesh);
  Geometry oriented = mesh;
  computeVertexNormals(oriented);
  const auto L = static_cast<size_t>(layers);
  VolumeSampling sheet;
  sheet.positions.resize(3 * vertices * L);
  sheet.volumes.resize(vertices * L);
  for (size_t v = 0; v < vertices; ++v) {
    const Vec3 normal = row(oriented.normals, v);
    if (!(area[v] > 0) || !(std::abs(normal.norm() - 1.0) < 1e-6)) {
      std::ostringstream msg;
      msg << "sheet layers: vertex " << v << " has no area or no normal (its triangles are "
          << "degenerate or cancel out): repair the mesh";
      throw InputError(msg.str());
    }
    for (size_t l = 0; l < L; ++l) {
      setRow(sheet.positions, v * L + l, row(mesh.positions, v) + zeta[l] * thickness / 2 * normal);
      sheet.volumes[v * L + l] = area[v] * thickness * weight[l] / 2;
    }
  }
  return sheet;
}

}  // namespace shellsim
