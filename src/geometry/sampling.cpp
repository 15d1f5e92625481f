// Simulation nodes from a dense surface: point areas, then clustering after Pauly, Gross,
// Kobbelt 2002 ("Efficient simplification of point-sampled surfaces", PGK02), as Wicke et
// al. 2005, section 5, use it. The pipeline is described in sampling.hpp.
//
// Determinism (DESIGN.md principle 5): the parallel loops (point areas, Lloyd assignment)
// write only their own point's slot; every sum runs on one thread in ascending point order;
// splits partition index ranges with std::partition on a fixed input order. The result is
// bit-identical for any thread count.
#include "geometry/sampling.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "core/spatial.hpp"
#include "core/tie_grid.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {
namespace {

using Vec3 = Eigen::Vector3d;

Vec3 row3(const std::vector<double>& flat, size_t i) {
  return {flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
}

// The discrete choices below (which cluster splits next, which way, which centroid a point
// joins, which member is the node) are made on the tie grid (core/tie_grid.hpp), so that
// rounding does not choose the nodes.

// Throws InputError unless `surface` is a usable mesh or point cloud (no silent failure).
void validateSurface(const Geometry& surface, const char* caller) {
  const std::string who(caller);
  const auto& p = surface.positions;
  if (p.empty()) throw InputError(who + ": the surface has no points");
  if (p.size() % 3 != 0) {
    throw InputError(who + ": positions has " + std::to_string(p.size()) +
                     " values, not a multiple of 3");
  }
  const size_t n = p.size() / 3;
  if (n > static_cast<size_t>(INT32_MAX)) {
    throw InputError(who + ": too many points (" + std::to_string(n) + ")");
  }
  for (size_t i = 0; i < p.size(); ++i) {
    if (!std::isfinite(p[i])) {
      throw InputError(who + ": point " + std::to_string(i / 3) + " has a non-finite coordinate");
    }
  }
  if (surface.hasNormals()) {
    if (surface.normals.size() != p.size()) {
      throw InputError(who + ": normals has " + std::to_string(surface.normals.size()) +
                       " values for " + std::to_string(n) + " points");
    }
    for (size_t i = 0; i < n; ++i) {
      const Vec3 normal = row3(surface.normals, i);
      const double length = normal.norm();
      if (!std::isfinite(length) || length == 0) {
        throw InputError(who + ": normal " + std::to_string(i) +
                         " is zero or has a non-finite coordinate");
      }
    }
  }
  const auto& t = surface.triangles;
  if (t.size() % 3 != 0) {
    throw InputError(who + ": triangles has " + std::to_string(t.size()) +
                     " indices, not a multiple of 3");
  }
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 0 || static_cast<size_t>(t[i]) >= n) {
      throw InputError(who + ": triangle " + std::to_string(i / 3) + " names vertex " +
                       std::to_string(t[i]) + " of " + std::to_string(n));
    }
  }
  if (surface.isPointCloud() && n < 3) {
    throw InputError(who + ": the point cloud has " + std::to_string(n) +
                     " points; at least 3 are needed");
  }
}

// Principal axis (unit eigenvector of the largest eigenvalue) of a symmetric positive
// semi-definite 3x3 matrix, the same however the matrix was rounded. Eigen sorts eigenvalues in
// increasing order, so it is the last column, unless the largest eigenvalue ties with the next
// (a cluster symmetric about its centroid, a square of grid points): then every unit vector of
// their eigenspace is principal and the eigensolver's pick is rounding's. Taken instead: the
// coordinate axis whose projection P e_k onto that eigenspace is longest (|P e_k|^2 = P_kk;
// the lower axis on ties), normalised. The sign makes the largest component positive (the
// lower component on ties).
Vec3 principalAxis(const Eigen::Matrix3d& covariance) {
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> solver(covariance);
  const Vec3 values = solver.eigenvalues();
  const double scale = values[2];
  Eigen::Index first = 2;  // the principal eigenspace: columns first..2
  while (first > 0 && tieKey(values[2] - values[first - 1], scale) == 0) --first;
  Vec3 axis = solver.eigenvectors().col(2);
  if (first < 2) {
    Eigen::Matrix3d projector = Eigen::Matrix3d::Zero();
    for (Eigen::Index k = first; k < 3; ++k) {
      projector.noalias() +=
          solver.eigenvectors().col(k) * solver.eigenvectors().col(k).transpose();
    }
    Eigen::Index longest = 0;
    for (Eigen::Index k = 1; k < 3; ++k) {
      if (tieKey(projector(k, k), 1.0) > tieKey(projector(longest, longest), 1.0)) longest = k;
    }
    axis = projector.col(longest).normalized();
  }
  Eigen::Index largest = 0;
  for (Eigen::Index k = 1; k < 3; ++k) {
    if (tieKey(std::abs(axis[k]), 1.0) > tieKey(std::abs(axis[largest]), 1.0)) largest = k;
  }
  return axis[largest] < 0 ? Vec3(-axis) : axis;
}

// Barycentric vertex areas: a third of each incident triangle's area.
std::vector<double> meshPointAreas(const Geometry& mesh) {
  const size_t n = static_cast<size_t>(mesh.vertexCount());
  std::vector<double> areas(n, 0.0);  // (nVertices)
  const auto& t = mesh.triangles;
  for (size_t f = 0; f < t.size() / 3; ++f) {
    const Vec3 a = row3(mesh.positions, static_cast<size_t>(t[3 * f]));
    const Vec3 b = row3(mesh.positions, static_cast<size_t>(t[3 * f + 1]));
    const Vec3 c = row3(mesh.positions, static_cast<size_t>(t[3 * f + 2]));
    const double third = (b - a).cross(c - a).norm() / 6;
    for (size_t k = 0; k < 3; ++k) areas[static_cast<size_t>(t[3 * f + k])] += third;
  }
  return areas;
}

// The mixed Voronoi areas of Meyer, Desbrun, Schroeder and Barr ("Discrete differential-
// geometry operators for triangulated 2-manifolds", 2003, fig. 4): in a triangle without an
// obtuse angle each corner gets the part of the triangle nearer to it than to the other
// corners, 1/8 (|ab|^2 cot C + |ac|^2 cot B) at corner a; in an obtuse triangle the obtuse
// corner gets half the area and the others a quarter each. A right angle counts as not obtuse
// (its Voronoi parts are exact there).
std::vector<double> meshVoronoiAreas(const Geometry& mesh) {
  const size_t n = static_cast<size_t>(mesh.vertexCount());
  std::vector<double> areas(n, 0.0);  // (nVertices)
  const auto& t = mesh.triangles;
  for (size_t f = 0; f < t.size() / 3; ++f) {
    const std::array<Vec3, 3> corner = {row3(mesh.positions, static_cast<size_t>(t[3 * f])),
                                        row3(mesh.positions, static_cast<size_t>(t[3 * f + 1])),
                                        row3(mesh.positions, static_cast<size_t>(t[3 * f + 2]))};
    const double area = (corner[1] - corner[0]).cross(corner[2] - corner[0]).norm() / 2;
    std::array<double, 3> share{};
    // dot[k]: the corner k's edges' dot product; < 0 at an obtuse angle.
    std::array<double, 3> dot{};
    for (size_t k = 0; k < 3; ++k) {
      dot[k] = (corner[(k + 1) % 3] - corner[k]).dot(corner[(k + 2) % 3] - corner[k]);
    }
    const auto obtuse = static_cast<size_t>(std::min_element(dot.begin(), dot.end()) - dot.begin());
    if (!(area > 0)) {
      share = {area / 3, area / 3, area / 3};
    } else if (dot[obtuse] < 0) {
      for (size_t k = 0; k < 3; ++k) share[k] = k == obtuse ? area / 2 : area / 4;
    } else {
      // cot of the angle at corner k = dot[k] / (2 area); the edge opposite corner k runs
      // between the other two, so corner k gets 1/8 of (edge to k+1)^2 cot(k+2) + (edge to
      // k+2)^2 cot(k+1).
      for (size_t k = 0; k < 3; ++k) {
        const size_t next = (k + 1) % 3, last = (k + 2) % 3;
        share[k] = ((corner[next] - corner[k]).squaredNorm() * dot[last] +
                    (corner[last] - corner[k]).squaredNorm() * dot[next]) /
                   (16 * area);
      }
    }
    for (size_t k = 0; k < 3; ++k) areas[static_cast<size_t>(t[3 * f + k])] += share[k];
  }
  return areas;
}

// Area of the convex polygon `poly` clipped to the half-plane x . dir <= offset
// (Sutherland-Hodgman against one edge); `poly` is replaced by the clipped polygon.
void clipHalfPlane(std::vector<Eigen::Vector2d>& poly, const Eigen::Vector2d& dir, double offset,
                   std::vector<Eigen::Vector2d>& scratch) {
  scratch.clear();
  const size_t count = poly.size();
  for (size_t j = 0; j < count; ++j) {
    const Eigen::Vector2d& a = poly[j];
    const Eigen::Vector2d& b = poly[(j + 1) % count];
    const double fa = a.dot(dir) - offset;
    const double fb = b.dot(dir) - offset;
    if (fa <= 0) scratch.push_back(a);
    if ((fa < 0 && fb > 0) || (fa > 0 && fb < 0)) scratch.push_back(a + (fa / (fa - fb)) * (b - a));
  }
  poly.swap(scratch);
}

double polygonArea(const std::vector<Eigen::Vector2d>& poly) {
  double twice = 0;
  for (size_t j = 0; j < poly.size(); ++j) {
    const Eigen::Vector2d& a = poly[j];
    const Eigen::Vector2d& b = poly[(j + 1) % poly.size()];
    twice += a.x() * b.y() - a.y() * b.x();
  }
  return 0.5 * std::abs(twice);
}

// Tangent-plane Voronoi cell areas of a point cloud (see pointAreas in sampling.hpp).
std::vector<double> cloudPointAreas(const Geometry& cloud) {
  const std::vector<double>& positions = cloud.positions;  // (nPoints, 3)
  const size_t n = positions.size() / 3;
  // The query point itself is among its nearest (distance 0), hence + 1.
  const size_t k = std::min(static_cast<size_t>(kPointAreaNeighbours) + 1, n);
  const PointKdTree tree(positions);
  // The clipping disk as a regular polygon; 32 sides lose 0.6% of the disk's area, which
  // only matters for boundary cells.
  constexpr int kDiskSides = 32;

  std::vector<double> areas(n, 0.0);  // (nPoints)
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, 512), [&](const tbb::blocked_range<size_t>& r) {
        std::vector<uint32_t> neighbours(k);
        std::vector<double> distances2(k);
        std::vector<Eigen::Vector2d> poly;
        std::vector<Eigen::Vector2d> scratch;
        for (size_t i = r.begin(); i != r.end(); ++i) {
          const Vec3 p = row3(positions, i);
          const size_t found =
              tree.nearest(&positions[3 * i], k, neighbours.data(), distances2.data());
          Vec3 normal;
          if (cloud.hasNormals()) {
            normal = row3(cloud.normals, i).normalized();
          } else {
            // Plane fit to the neighbourhood (as estimateNormals does); the sign is irrelevant.
            Vec3 centroid = Vec3::Zero();
            for (size_t j = 0; j < found; ++j) centroid += row3(positions, neighbours[j]);
            centroid /= static_cast<double>(found);
            Eigen::Matrix3d covariance = Eigen::Matrix3d::Zero();
            for (size_t j = 0; j < found; ++j) {
              const Vec3 d = row3(positions, neighbours[j]) - centroid;
              covariance.noalias() += d * d.transpose();
            }
            const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> solver(covariance);
            normal = solver.eigenvectors().col(0);
          }
          // Tangent basis (u, v) of the plane through p with this normal.
          const Vec3 helper = std::abs(normal.x()) < 0.9 ? Vec3::UnitX() : Vec3::UnitY();
          const Vec3 u = normal.cross(helper).normalized();
          const Vec3 v = normal.cross(u);

          const double radius = 0.5 * std::sqrt(distances2[found - 1]);
          if (!(radius > 0)) continue;  // more than k points at one position: area 0
          poly.clear();
          for (int s = 0; s < kDiskSides; ++s) {
            const double angle = 2 * std::numbers::pi * s / kDiskSides;
            poly.emplace_back(radius * std::cos(angle), radius * std::sin(angle));
          }
          int coincident = 0;
          for (size_t j = 0; j < found; ++j) {
            if (neighbours[j] == i) continue;
            const Vec3 e = row3(positions, neighbours[j]) - p;
            const double e2 = e.squaredNorm();
            if (e2 == 0) {
              ++coincident;
              continue;
            }
            // Points x of the tangent plane nearer p than q: |x|^2 <= |x - e|^2, i.e.
            // x . e_t <= |e|^2 / 2 with e_t the tangential part of e (x is orthogonal to n).
            clipHalfPlane(poly, {e.dot(u), e.dot(v)}, 0.5 * e2, scratch);
          }
          areas[i] = polygonArea(poly) / (1 + coincident);
        }
      });
  return areas;
}

// What the clustering reads: positions (nPoints, 3), unit normals (nPoints, 3), point areas
// (nPoints).
struct Surface {
  const std::vector<double>& positions;
  const std::vector<double>& normals;
  const std::vector<double>& areas;
};

// Weights of a cluster's members in centroids and mean normals: their areas, or 1 each when
// the cluster has no area at all (e.g. points no triangle references).
struct Weighting {
  bool byArea;
  [[nodiscard]] double of(const Surface& s, int32_t i) const {
    return byArea ? s.areas[static_cast<size_t>(i)] : 1.0;
  }
};

Weighting weightingOf(const Surface& s, const int32_t* members, size_t count) {
  double area = 0;
  for (size_t j = 0; j < count; ++j) area += s.areas[static_cast<size_t>(members[j])];
  return {area > 0};
}

// PGK02's variation criterion as a normal cone: true when some weighted member's normal is
// more than kMaxNormalAngleDegrees from the weighted mean normal (or the mean vanishes).
bool normalsVary(const Surface& s, const int32_t* members, size_t count) {
  if (count < 2) return false;
  const Weighting w = weightingOf(s, members, count);
  Vec3 mean = Vec3::Zero();
  for (size_t j = 0; j < count; ++j) mean += w.of(s, members[j]) * row3(s.normals, members[j]);
  const double length = mean.norm();
  if (!(length > 1e-12)) return true;
  mean /= length;
  const double cosMax = std::cos(kMaxNormalAngleDegrees * std::numbers::pi / 180);
  for (size_t j = 0; j < count; ++j) {
    if (w.of(s, members[j]) > 0 && row3(s.normals, members[j]).dot(mean) < cosMax) return true;
  }
  return false;
}

// Splits members [first, last) in two along the principal axis of the weighted covariance
// of their positions (PGK02, sec. 3.2: the plane through the centroid orthogonal to the
// axis of largest variance) or, when `byNormal`, of their normals: for two opposite sheets
// that axis is the sheets' normal, so one cut separates them, where a spatial cut would
// have to shrink the cluster to the thickness first. Returns the split point; both halves
// are non-empty.
int32_t* splitCluster(const Surface& s, int32_t* first, int32_t* last, bool byNormal) {
  const auto count = static_cast<size_t>(last - first);
  const std::vector<double>& data = byNormal ? s.normals : s.positions;
  const Weighting w = weightingOf(s, first, count);
  double total = 0;
  Vec3 mean = Vec3::Zero();
  for (size_t j = 0; j < count; ++j) {
    total += w.of(s, first[j]);
    mean += w.of(s, first[j]) * row3(data, first[j]);
  }
  mean /= total;
  Eigen::Matrix3d covariance = Eigen::Matrix3d::Zero();
  for (size_t j = 0; j < count; ++j) {
    const Vec3 d = row3(data, first[j]) - mean;
    covariance.noalias() += w.of(s, first[j]) * d * d.transpose();
  }
  const Vec3 axis = principalAxis(covariance);
  // Members on the cutting plane but for rounding (a symmetric cluster's middle row) are
  // halved along a second direction across the axis (the coordinate axis least along it,
  // made orthogonal), so that the halves stay contiguous and even; the tie grid's scale is
  // the members' spread along the axis.
  const double spread = std::sqrt(std::max(axis.dot(covariance * axis), 0.0) / total);
  Eigen::Index across = 0;
  for (Eigen::Index k = 1; k < 3; ++k) {
    if (tieKey(std::abs(axis[k]), 1.0) < tieKey(std::abs(axis[across]), 1.0)) across = k;
  }
  const Vec3 second = (Vec3::Unit(across) - axis[across] * axis).normalized();
  int32_t* middle = std::partition(first, last, [&](int32_t i) {
    const Vec3 offset = row3(data, i) - mean;
    const int64_t along = tieKey(offset.dot(axis), spread);
    return along < 0 || (along == 0 && tieKey(offset.dot(second), spread) < 0);
  });
  // All members project alike (coincident points, or zero-weight outliers): halve by index
  // order, which is still deterministic.
  if (middle == first || middle == last) middle = first + count / 2;
  return middle;
}

// Phase 1, PGK02 hierarchical clustering driven by a count: clusters with varying normals
// are split first, then always the one with the largest area (areas compared on the tie grid
// of the total area; lowest first index on ties), until there are `target` clusters. Returns
// the clusters as ranges of `order`.
std::vector<std::pair<int32_t, int32_t>> splitHierarchically(const Surface& s,
                                                             std::vector<int32_t>& order,
                                                             size_t target) {
  struct Entry {
    bool varies;
    int64_t areaKey;  // the area on the tie grid
    int32_t begin;
    int32_t end;
    // Max-heap order: varying normals first, then larger area, then lower begin.
    bool operator<(const Entry& o) const {
      if (varies != o.varies) return !varies;
      if (areaKey != o.areaKey) return areaKey < o.areaKey;
      return begin > o.begin;
    }
  };
  double totalArea = 0;
  for (const int32_t i : order) totalArea += s.areas[static_cast<size_t>(i)];
  auto makeEntry = [&](int32_t begin, int32_t end) {
    const int32_t* first = order.data() + begin;
    const auto count = static_cast<size_t>(end - begin);
    double area = 0;
    for (size_t j = 0; j < count; ++j) area += s.areas[static_cast<size_t>(first[j])];
    return Entry{normalsVary(s, first, count), tieKey(area, totalArea), begin, end};
  };

  std::priority_queue<Entry> heap;
  heap.push(makeEntry(0, static_cast<int32_t>(order.size())));
  std::vector<std::pair<int32_t, int32_t>> done;
  size_t clusterCount = 1;
  while (!heap.empty()) {
    const Entry top = heap.top();
    if (!top.varies && clusterCount >= target) break;
    heap.pop();
    if (top.end - top.begin < 2) {  // a single point cannot be split (nor vary)
      done.emplace_back(top.begin, top.end);
      continue;
    }
    int32_t* first = order.data() + top.begin;
    int32_t* middle = splitCluster(s, first, order.data() + top.end, top.varies);
    const auto mid = static_cast<int32_t>(middle - order.data());
    heap.push(makeEntry(top.begin, mid));
    heap.push(makeEntry(mid, top.end));
    ++clusterCount;
  }
  for (; !heap.empty(); heap.pop()) done.emplace_back(heap.top().begin, heap.top().end);
  return done;
}

// Area-weighted centroids (nClusters, 3) and unit mean normals (nClusters, 3; zero when the
// normals cancel) of the clusters, summed in ascending point order.
void clusterCentres(const Surface& s, const std::vector<int32_t>& clusterOf, size_t clusterCount,
                    std::vector<double>& centres, std::vector<double>& centreNormals) {
  std::vector<double> area(clusterCount, 0.0);              // (nClusters)
  std::vector<double> count(clusterCount, 0.0);             // (nClusters)
  std::vector<Vec3> areaSum(clusterCount, Vec3::Zero());    // sum a p
  std::vector<Vec3> plainSum(clusterCount, Vec3::Zero());   // sum p
  std::vector<Vec3> normalSum(clusterCount, Vec3::Zero());  // sum a n
  std::vector<Vec3> plainNormal(clusterCount, Vec3::Zero());
  for (size_t i = 0; i < clusterOf.size(); ++i) {
    if (clusterOf[i] < 0) continue;  // a point without area, not clustered yet
    const auto c = static_cast<size_t>(clusterOf[i]);
    const double a = s.areas[i];
    const Vec3 p = row3(s.positions, i);
    const Vec3 nrm = row3(s.normals, i);
    area[c] += a;
    count[c] += 1;
    areaSum[c] += a * p;
    plainSum[c] += p;
    normalSum[c] += a * nrm;
    plainNormal[c] += nrm;
  }
  centres.assign(3 * clusterCount, 0.0);
  centreNormals.assign(3 * clusterCount, 0.0);
  for (size_t c = 0; c < clusterCount; ++c) {
    const bool byArea = area[c] > 0;
    const Vec3 centre = byArea ? Vec3(areaSum[c] / area[c]) : Vec3(plainSum[c] / count[c]);
    Vec3 normal = byArea ? normalSum[c] : plainNormal[c];
    const double length = normal.norm();
    normal = length > 1e-12 ? Vec3(normal / length) : Vec3::Zero();
    for (Eigen::Index d = 0; d < 3; ++d) {
      centres[3 * c + static_cast<size_t>(d)] = centre[d];
      centreNormals[3 * c + static_cast<size_t>(d)] = normal[d];
    }
  }
}

// The tie grid's scale for squared distances between points and centroids: the squared
// diagonal of the points' bounding box over the cluster count (about a cluster's squared width
// on a surface).
double squaredSpacing(const Surface& s, size_t clusterCount) {
  Vec3 low = Vec3::Constant(std::numeric_limits<double>::infinity());
  Vec3 high = -low;
  for (size_t i = 0; i < s.positions.size() / 3; ++i) {
    low = low.cwiseMin(row3(s.positions, i));
    high = high.cwiseMax(row3(s.positions, i));
  }
  return (high - low).squaredNorm() / static_cast<double>(std::max<size_t>(clusterCount, 1));
}

// Puts the `found` nearest candidates of a kd-tree query in order of squared distance on the
// tie grid of `scale2`, equal ones by index: the tree orders exact ties its own way, and which
// of two centroids equidistant but for rounding comes first is rounding's.
void orderCandidates(uint32_t* indices, double* distances2, size_t found, double scale2) {
  std::array<std::pair<int64_t, uint32_t>, 6> keyed{};
  for (size_t j = 0; j < found; ++j) keyed[j] = {tieKey(distances2[j], scale2), indices[j]};
  std::sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(found));
  for (size_t j = 0; j < found; ++j) indices[j] = keyed[j].second;
}

// Drops empty clusters, keeping the order of the rest; returns the new cluster count.
size_t dropEmptyClusters(std::vector<int32_t>& clusterOf, size_t clusterCount) {
  std::vector<int32_t> renumber(clusterCount, 0);  // (nClusters): 1 if used, then new index
  for (int32_t c : clusterOf) {
    if (c >= 0) renumber[static_cast<size_t>(c)] = 1;
  }
  int32_t next = 0;
  for (auto& r : renumber) r = r ? next++ : -1;
  for (auto& c : clusterOf) {
    if (c >= 0) c = renumber[static_cast<size_t>(c)];
  }
  return static_cast<size_t>(next);
}

// Phase 2: Lloyd relaxation on the points. Each point joins the nearest cluster centroid
// whose mean normal is within kMaxNormalAngleDegrees of its own normal (among the few
// nearest centroids; it stays put when none qualifies). Returns the cluster count.
size_t relax(const Surface& s, std::vector<int32_t>& clusterOf, size_t clusterCount) {
  const size_t n = clusterOf.size();
  const double cosMax = std::cos(kMaxNormalAngleDegrees * std::numbers::pi / 180);
  std::vector<double> centres;        // (nClusters, 3)
  std::vector<double> centreNormals;  // (nClusters, 3)
  std::vector<int32_t> next(n);       // (nPoints)
  const double scale2 = squaredSpacing(s, clusterCount);
  for (int iteration = 0; iteration < kRelaxationIterations; ++iteration) {
    clusterCentres(s, clusterOf, clusterCount, centres, centreNormals);
    const PointKdTree tree(centres);
    // A handful of candidates: the nearest is almost always compatible; more are only
    // looked at near creases and thin parts.
    const size_t candidates = std::min<size_t>(6, clusterCount);
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, n, 1024), [&](const tbb::blocked_range<size_t>& r) {
          std::array<uint32_t, 6> nearest{};
          std::array<double, 6> distances2{};
          for (size_t i = r.begin(); i != r.end(); ++i) {
            next[i] = clusterOf[i];
            if (clusterOf[i] < 0) continue;  // a point without area: joins at the end
            const size_t found =
                tree.nearest(&s.positions[3 * i], candidates, nearest.data(), distances2.data());
            orderCandidates(nearest.data(), distances2.data(), found, scale2);
            const Vec3 normal = row3(s.normals, i);
            for (size_t j = 0; j < found; ++j) {
              if (row3(centreNormals, nearest[j]).dot(normal) >= cosMax) {
                next[i] = static_cast<int32_t>(nearest[j]);
                break;
              }
            }
          }
        });
    size_t changed = 0;
    for (size_t i = 0; i < n; ++i) changed += next[i] != clusterOf[i] ? 1 : 0;
    clusterOf.swap(next);
    clusterCount = dropEmptyClusters(clusterOf, clusterCount);
    if (changed == 0) break;
  }
  return clusterCount;
}

// Puts every point still without a cluster (clusterOf -1) into the cluster with the nearest
// centroid whose mean normal is within kMaxNormalAngleDegrees of the point's normal, or the
// nearest of all when none of the few nearest qualifies.
void attachUnclustered(const Surface& s, std::vector<int32_t>& clusterOf, size_t clusterCount) {
  if (std::find(clusterOf.begin(), clusterOf.end(), -1) == clusterOf.end()) return;
  const double cosMax = std::cos(kMaxNormalAngleDegrees * std::numbers::pi / 180);
  std::vector<double> centres;        // (nClusters, 3)
  std::vector<double> centreNormals;  // (nClusters, 3)
  clusterCentres(s, clusterOf, clusterCount, centres, centreNormals);
  const PointKdTree tree(centres);
  const size_t candidates = std::min<size_t>(6, clusterCount);
  std::array<uint32_t, 6> nearest{};
  std::array<double, 6> distances2{};
  const double scale2 = squaredSpacing(s, clusterCount);
  for (size_t i = 0; i < clusterOf.size(); ++i) {
    if (clusterOf[i] >= 0) continue;
    const size_t found =
        tree.nearest(&s.positions[3 * i], candidates, nearest.data(), distances2.data());
    orderCandidates(nearest.data(), distances2.data(), found, scale2);
    clusterOf[i] = static_cast<int32_t>(nearest[0]);
    for (size_t j = 0; j < found; ++j) {
      if (row3(centreNormals, nearest[j]).dot(row3(s.normals, i)) >= cosMax) {
        clusterOf[i] = static_cast<int32_t>(nearest[j]);
        break;
      }
    }
  }
}

// Sorts the points by cluster (ascending point index inside each), as ranges of `order`;
// points with cluster -1 are left out.
std::vector<std::pair<int32_t, int32_t>> groupByCluster(const std::vector<int32_t>& clusterOf,
                                                        size_t clusterCount,
                                                        std::vector<int32_t>& order) {
  std::vector<int32_t> start(clusterCount + 1, 0);  // (nClusters + 1)
  for (int32_t c : clusterOf) {
    if (c >= 0) ++start[static_cast<size_t>(c) + 1];
  }
  for (size_t c = 0; c < clusterCount; ++c) start[c + 1] += start[c];
  std::vector<int32_t> cursor(start.begin(), start.end() - 1);
  order.resize(static_cast<size_t>(start[clusterCount]));
  for (size_t i = 0; i < clusterOf.size(); ++i) {
    if (clusterOf[i] < 0) continue;
    order[static_cast<size_t>(cursor[static_cast<size_t>(clusterOf[i])]++)] =
        static_cast<int32_t>(i);
  }
  std::vector<std::pair<int32_t, int32_t>> ranges(clusterCount);
  for (size_t c = 0; c < clusterCount; ++c) ranges[c] = {start[c], start[c + 1]};
  return ranges;
}

// Phase 3: splits, in normal space, every cluster that relaxation left with varying normals.
std::vector<std::pair<int32_t, int32_t>> repairNormalCones(
    const Surface& s, std::vector<int32_t>& order,
    const std::vector<std::pair<int32_t, int32_t>>& ranges) {
  std::vector<std::pair<int32_t, int32_t>> result;
  result.reserve(ranges.size());
  std::vector<std::pair<int32_t, int32_t>> stack;
  for (const auto& range : ranges) {
    stack.push_back(range);
    while (!stack.empty()) {
      const auto [begin, end] = stack.back();
      stack.pop_back();
      int32_t* first = order.data() + begin;
      if (!normalsVary(s, first, static_cast<size_t>(end - begin))) {
        result.emplace_back(begin, end);
        continue;
      }
      const auto mid = static_cast<int32_t>(
          splitCluster(s, first, order.data() + end, /*byNormal=*/true) - order.data());
      stack.emplace_back(mid, end);
      stack.emplace_back(begin, mid);
    }
  }
  return result;
}

// Phase 4: the nodes. Clusters are numbered by their lowest member index; each node sits on
// the member nearest the cluster's area-weighted centroid (members with area preferred;
// distances on the tie grid, the lowest index on ties), so it lies exactly on the surface even
// where the centroid of a curved cluster does not.
NodeSampling makeNodes(const Surface& s, std::vector<int32_t>& order,
                       std::vector<std::pair<int32_t, int32_t>> ranges) {
  for (const auto& [begin, end] : ranges) {
    std::sort(order.begin() + begin, order.begin() + end);
  }
  std::sort(ranges.begin(), ranges.end(), [&](const auto& a, const auto& b) {
    return order[static_cast<size_t>(a.first)] < order[static_cast<size_t>(b.first)];
  });
  const size_t nodeCount = ranges.size();
  NodeSampling nodes;
  nodes.positions.resize(3 * nodeCount);
  nodes.normals.resize(3 * nodeCount);
  nodes.areas.resize(nodeCount);
  nodes.sourcePoint.resize(nodeCount);
  nodes.clusterOfPoint.assign(s.positions.size() / 3, -1);
  const double scale2 = squaredSpacing(s, nodeCount);
  for (size_t c = 0; c < nodeCount; ++c) {
    const int32_t* first = order.data() + ranges[c].first;
    const auto count = static_cast<size_t>(ranges[c].second - ranges[c].first);
    const Weighting w = weightingOf(s, first, count);
    double area = 0;
    double weight = 0;
    Vec3 centroid = Vec3::Zero();
    Vec3 normal = Vec3::Zero();
    for (size_t j = 0; j < count; ++j) {
      const auto i = static_cast<size_t>(first[j]);
      nodes.clusterOfPoint[i] = static_cast<int32_t>(c);
      area += s.areas[i];
      weight += w.of(s, first[j]);
      centroid += w.of(s, first[j]) * row3(s.positions, i);
      normal += w.of(s, first[j]) * row3(s.normals, i);
    }
    centroid /= weight;
    // The cone test guarantees a clearly non-zero mean for clusters of several weighted
    // points; the fallback covers a lone point.
    const double length = normal.norm();
    normal = length > 1e-12 ? Vec3(normal / length) : row3(s.normals, static_cast<size_t>(*first));
    int32_t source = first[0];
    int64_t best = std::numeric_limits<int64_t>::max();
    for (size_t j = 0; j < count; ++j) {  // members in ascending index order
      if (w.of(s, first[j]) <= 0) continue;
      const int64_t d2 = tieKey(
          (row3(s.positions, static_cast<size_t>(first[j])) - centroid).squaredNorm(), scale2);
      if (d2 < best) {
        best = d2;
        source = first[j];
      }
    }
    nodes.areas[c] = area;
    nodes.sourcePoint[c] = source;
    for (size_t d = 0; d < 3; ++d) {
      nodes.positions[3 * c + d] = s.positions[3 * static_cast<size_t>(source) + d];
      nodes.normals[3 * c + d] = normal[static_cast<Eigen::Index>(d)];
    }
  }
  return nodes;
}

}  // namespace

std::vector<double> pointAreas(const Geometry& surface) {
  validateSurface(surface, "pointAreas");
  return surface.isPointCloud() ? cloudPointAreas(surface) : meshPointAreas(surface);
}

std::vector<double> voronoiAreas(const Geometry& surface) {
  validateSurface(surface, "voronoiAreas");
  return surface.isPointCloud() ? cloudPointAreas(surface) : meshVoronoiAreas(surface);
}

NodeSampling clusterSurface(const Geometry& surface, const SamplingParams& params) {
  validateSurface(surface, "clusterSurface");
  if (params.targetNodeCount < 0) {
    throw InputError("clusterSurface: target node count " + std::to_string(params.targetNodeCount) +
                     " is negative");
  }
  if (std::isnan(params.spacing) || std::isinf(params.spacing) || params.spacing < 0) {
    throw InputError("clusterSurface: spacing " + std::to_string(params.spacing) +
                     " m must be finite and positive");
  }
  if ((params.targetNodeCount > 0) == (params.spacing > 0)) {
    throw InputError("clusterSurface: set exactly one of target node count and spacing (got " +
                     std::to_string(params.targetNodeCount) + " nodes, " +
                     std::to_string(params.spacing) + " m)");
  }
  const size_t n = surface.positions.size() / 3;

  // Unit normals: the input's, renormalised; a mesh's area-weighted vertex normals; or a
  // point cloud's estimated, consistently oriented ones.
  std::vector<double> normals;  // (nPoints, 3)
  if (surface.hasNormals()) {
    normals = surface.normals;
    for (size_t i = 0; i < n; ++i) {
      const double length = row3(normals, i).norm();
      for (size_t d = 0; d < 3; ++d) normals[3 * i + d] /= length;
    }
  } else {
    Geometry copy;
    copy.positions = surface.positions;
    copy.triangles = surface.triangles;
    if (surface.isPointCloud()) {
      estimateNormals(copy);
    } else {
      computeVertexNormals(copy);
    }
    normals = std::move(copy.normals);
  }
  const std::vector<double> areas = pointAreas(surface);  // (nPoints)
  const Surface s{surface.positions, normals, areas};

  size_t target = 0;
  if (params.targetNodeCount > 0) {
    target = static_cast<size_t>(params.targetNodeCount);
  } else {
    double totalArea = 0;
    for (double a : areas) totalArea += a;
    if (!(totalArea > 0)) {
      throw InputError("clusterSurface: the surface has zero area, so a spacing cannot be met");
    }
    // Clusters `spacing` wide: each node gets spacing^2 of area.
    const double wanted = totalArea / (params.spacing * params.spacing);
    target = wanted >= static_cast<double>(n) ? n : std::max<size_t>(1, std::llround(wanted));
  }

  // Points with area make the nodes; points without (vertices no triangle references) join
  // the nearest node at the end, so that no node is massless. When no point has any area,
  // all take part with equal weights.
  std::vector<int32_t> order;  // point indices, grouped by cluster as the phases go
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (areas[i] > 0) order.push_back(static_cast<int32_t>(i));
  }
  if (order.empty()) {
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int32_t>(i));
  }
  std::vector<int32_t> clusterOf(n, -1);  // cluster of each point, -1 while unassigned, (nPoints)
  size_t clusterCount = 0;
  if (target >= order.size()) {
    for (size_t j = 0; j < order.size(); ++j) {
      clusterOf[static_cast<size_t>(order[j])] = static_cast<int32_t>(j);
    }
    clusterCount = order.size();
  } else {
    const auto splitRanges = splitHierarchically(s, order, target);
    for (size_t c = 0; c < splitRanges.size(); ++c) {
      for (int32_t j = splitRanges[c].first; j < splitRanges[c].second; ++j) {
        clusterOf[static_cast<size_t>(order[static_cast<size_t>(j)])] = static_cast<int32_t>(c);
      }
    }
    clusterCount = relax(s, clusterOf, splitRanges.size());
  }
  const auto ranges = repairNormalCones(s, order, groupByCluster(clusterOf, clusterCount, order));
  for (size_t c = 0; c < ranges.size(); ++c) {
    for (int32_t j = ranges[c].first; j < ranges[c].second; ++j) {
      clusterOf[static_cast<size_t>(order[static_cast<size_t>(j)])] = static_cast<int32_t>(c);
    }
  }
  clusterCount = ranges.size();
  attachUnclustered(s, clusterOf, clusterCount);
  return makeNodes(s, order, groupByCluster(clusterOf, clusterCount, order));
}

}  // namespace shellsim
