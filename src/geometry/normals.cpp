// Normals of point clouds: a least-squares plane through each point's k nearest
// neighbours, then a consistent orientation propagated along a minimum spanning tree of
// the kNN graph (Hoppe, DeRose, Duchamp, McDonald, Stuetzle 1992, "Surface reconstruction
// from unorganized points", sections 3.2 and 3.3).
//
// Pipeline of estimateNormals:
//   1. validate                       (>= 3 points, finite positions, k >= 3)
//   2. kd-tree, kNN of every point    (nanoflann; parallel over points)
//   3. PCA plane fit per point        (parallel over points)
//   4. symmetric kNN graph, CSR       (sequential)
//   5. per connected component: seed, Prim's MST, flip along tree edges (sequential)
//   6. per component: flip all if the normals point into it on average
// Steps 2 and 3 write only their own point's rows and steps 4-6 run on one thread, so the
// normals are bit-identical for any thread count (DESIGN.md principle 5).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/spatial.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {
namespace {

Eigen::Vector3d point(const std::vector<double>& flat, size_t i) {
  return {flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
}

// Normal of the least-squares plane through `count` points (Hoppe 1992, sec. 3.2): the
// eigenvector of the covariance C = sum (p - o)(p - o)^T, o the centroid, with the
// smallest eigenvalue. Eigen sorts the eigenvalues in increasing order, so it is column 0.
// For a degenerate neighbourhood (coincident or collinear points) the smallest eigenvalue
// is repeated and any vector of its eigenspace is returned; it is still unit length.
Eigen::Vector3d planeNormal(const std::vector<double>& positions, const uint32_t* indices,
                            size_t count) {
  Eigen::Vector3d centroid = Eigen::Vector3d::Zero();
  for (size_t j = 0; j < count; ++j) centroid += point(positions, indices[j]);
  centroid /= static_cast<double>(count);
  Eigen::Matrix3d covariance = Eigen::Matrix3d::Zero();
  for (size_t j = 0; j < count; ++j) {
    const Eigen::Vector3d d = point(positions, indices[j]) - centroid;
    covariance.noalias() += d * d.transpose();
  }
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> solver(covariance);
  Eigen::Vector3d normal = solver.eigenvectors().col(0);
  const double length = normal.norm();
  if (!(length > 0) || !std::isfinite(length)) return {0, 0, 1};
  return normal / length;
}

// The symmetric kNN graph in compressed rows: i ~ j when j is among the k nearest of i
// or i among those of j (Hoppe's "Riemannian graph" without the EMST edges; the
// components of this graph are the pieces of the cloud that are oriented separately).
struct Graph {
  std::vector<int32_t> offsets;     // (nPoints + 1): row i is [offsets[i], offsets[i+1])
  std::vector<int32_t> neighbours;  // (nEdges * 2), each row sorted ascending
};

Graph buildSymmetricGraph(const std::vector<uint32_t>& knn, size_t n, size_t k) {
  std::vector<int32_t> degree(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < k; ++j) {
      const uint32_t other = knn[i * k + j];
      if (other == i) continue;
      ++degree[i + 1];
      ++degree[other + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) degree[i + 1] += degree[i];
  std::vector<int32_t> entries(static_cast<size_t>(degree[n]));
  std::vector<int32_t> cursor(degree.begin(), degree.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < k; ++j) {
      const uint32_t other = knn[i * k + j];
      if (other == i) continue;
      entries[static_cast<size_t>(cursor[i]++)] = static_cast<int32_t>(other);
      entries[static_cast<size_t>(cursor[other]++)] = static_cast<int32_t>(i);
    }
  }
  // Sort and deduplicate each row (i ~ j appears twice when the relation is mutual).
  Graph graph;
  graph.offsets.assign(n + 1, 0);
  graph.neighbours.reserve(entries.size());
  for (size_t i = 0; i < n; ++i) {
    const auto begin = entries.begin() + degree[i];
    const auto end = entries.begin() + degree[i + 1];
    std::sort(begin, end);
    const auto last = std::unique(begin, end);
    graph.neighbours.insert(graph.neighbours.end(), begin, last);
    graph.offsets[i + 1] = static_cast<int32_t>(graph.neighbours.size());
  }
  return graph;
}

// Orients `normals` (nPoints, 3) in place over every connected component of `graph`.
void orientNormals(const std::vector<double>& positions, const Graph& graph,
                   std::vector<double>& normals) {
  const size_t n = positions.size() / 3;
  auto normalOf = [&](size_t i) { return point(normals, i); };
  auto flip = [&](size_t i) {
    for (size_t d = 0; d < 3; ++d) normals[3 * i + d] = -normals[3 * i + d];
  };

  // Components by breadth-first search from the lowest unvisited index; `order` lists the
  // points of component c in [componentStart[c], componentStart[c+1]).
  std::vector<int32_t> component(n, -1);  // (nPoints)
  std::vector<int32_t> order;             // (nPoints)
  std::vector<size_t> componentStart{0};  // (nComponents + 1)
  order.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    if (component[s] >= 0) continue;
    const auto c = static_cast<int32_t>(componentStart.size() - 1);
    component[s] = c;
    order.push_back(static_cast<int32_t>(s));
    for (size_t head = componentStart.back(); head < order.size(); ++head) {
      const auto i = static_cast<size_t>(order[head]);
      for (int32_t e = graph.offsets[i]; e < graph.offsets[i + 1]; ++e) {
        const auto j = static_cast<size_t>(graph.neighbours[static_cast<size_t>(e)]);
        if (component[j] >= 0) continue;
        component[j] = c;
        order.push_back(static_cast<int32_t>(j));
      }
    }
    componentStart.push_back(order.size());
  }

  std::vector<char> visited(n, 0);  // (nPoints)
  // Min-heap entries (weight, point, parent): ties in weight are broken by the point and
  // then the parent index, so the tree does not depend on the heap's internals.
  // best[j] = the smallest (weight, parent) pushed for j so far; an entry that would not
  // improve on it can never be the first of j to leave the heap, so it is not pushed.
  using Entry = std::tuple<double, int32_t, int32_t>;
  std::vector<std::pair<double, int32_t>> best(n, {std::numeric_limits<double>::infinity(), 0});
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (size_t c = 0; c + 1 < componentStart.size(); ++c) {
    const size_t begin = componentStart[c];
    const size_t end = componentStart[c + 1];
    // Centroid, summed in ascending point index for a fixed rounding order.
    std::vector<int32_t> members(order.begin() + static_cast<std::ptrdiff_t>(begin),
                                 order.begin() + static_cast<std::ptrdiff_t>(end));
    std::sort(members.begin(), members.end());
    Eigen::Vector3d centroid = Eigen::Vector3d::Zero();
    for (int32_t i : members) centroid += point(positions, static_cast<size_t>(i));
    centroid /= static_cast<double>(members.size());

    // Seed: the point farthest from the centroid (lowest index on ties); its tangent plane
    // supports the piece from outside, so its normal should point away from the centroid.
    // (Hoppe seeds with the largest z and +z; this is the same idea without a preferred
    // axis.)
    int32_t seed = members.front();
    double farthest = -1;
    for (int32_t i : members) {
      const double d2 = (point(positions, static_cast<size_t>(i)) - centroid).squaredNorm();
      if (d2 > farthest) {
        farthest = d2;
        seed = i;
      }
    }
    const auto seedIndex = static_cast<size_t>(seed);
    if (normalOf(seedIndex).dot(point(positions, seedIndex) - centroid) < 0) flip(seedIndex);

    // Prim's algorithm on weights 1 - |n_i . n_j| (Hoppe 1992, sec. 3.3): the tree prefers
    // edges between nearly parallel tangent planes, where the sign test n_i . n_j < 0 is
    // reliable, and reaches sharp creases and thin gaps last. Each point is oriented
    // against its tree parent when it is taken off the heap.
    heap.emplace(0.0, seed, seed);
    while (!heap.empty()) {
      const auto [weight, i32, parent32] = heap.top();
      heap.pop();
      const auto i = static_cast<size_t>(i32);
      if (visited[i]) continue;
      visited[i] = 1;
      const Eigen::Vector3d ni = normalOf(i);
      if (i32 != parent32 && ni.dot(normalOf(static_cast<size_t>(parent32))) < 0) flip(i);
      const Eigen::Vector3d oriented = normalOf(i);
      for (int32_t e = graph.offsets[i]; e < graph.offsets[i + 1]; ++e) {
        const int32_t j = graph.neighbours[static_cast<size_t>(e)];
        if (visited[static_cast<size_t>(j)]) continue;
        const double w = 1.0 - std::abs(oriented.dot(normalOf(static_cast<size_t>(j))));
        auto& bestOfJ = best[static_cast<size_t>(j)];
        if (std::pair{w, i32} < bestOfJ) {
          bestOfJ = {w, i32};
          heap.emplace(w, j, i32);
        }
      }
    }

    // A piece whose normals point into it on average, mean of n . (p - centroid) < 0,
    // is turned inside out as a whole (the seed alone can be fooled by noise).
    double meanOutward = 0;
    for (int32_t i : members) {
      const auto k = static_cast<size_t>(i);
      meanOutward += normalOf(k).dot(point(positions, k) - centroid);
    }
    if (meanOutward < 0) {
      for (int32_t i : members) flip(static_cast<size_t>(i));
    }
  }
}

}  // namespace

void estimateNormals(Geometry& cloud, int neighbourCount) {
  const std::vector<double>& positions = cloud.positions;  // (nPoints, 3)
  if (positions.size() % 3 != 0) {
    throw InputError("estimateNormals: positions has " + std::to_string(positions.size()) +
                     " values, not a multiple of 3");
  }
  const size_t n = positions.size() / 3;
  if (n < 3) {
    throw InputError("estimateNormals: the point cloud has " + std::to_string(n) +
                     " points; at least 3 are needed to fit a plane");
  }
  if (n > static_cast<size_t>(INT32_MAX)) {
    throw InputError("estimateNormals: too many points (" + std::to_string(n) + ")");
  }
  if (neighbourCount < 3) {
    throw InputError("estimateNormals: neighbour count " + std::to_string(neighbourCount) +
                     " is below 3");
  }
  for (size_t i = 0; i < positions.size(); ++i) {
    if (!std::isfinite(positions[i])) {
      throw InputError("estimateNormals: point " + std::to_string(i / 3) +
                       " has a non-finite coordinate");
    }
  }
  // Each neighbourhood contains the point itself (distance 0).
  const size_t k = std::min(static_cast<size_t>(neighbourCount), n);

  const PointKdTree tree(positions);

  std::vector<uint32_t> knn(n * k);    // neighbour indices, (nPoints, k), nearest first
  std::vector<double> normals(3 * n);  // unoriented unit normals, (nPoints, 3)
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, 256), [&](const tbb::blocked_range<size_t>& r) {
        std::vector<double> distances2(k);
        for (size_t i = r.begin(); i != r.end(); ++i) {
          uint32_t* row = &knn[i * k];
          const size_t found = tree.nearest(&positions[3 * i], k, row, distances2.data());
          // found == k always since k <= n; kept defensive for an index that returns fewer.
          for (size_t j = found; j < k; ++j) row[j] = static_cast<uint32_t>(i);
          const Eigen::Vector3d normal = planeNormal(positions, row, found);
          for (size_t d = 0; d < 3; ++d) normals[3 * i + d] = normal[static_cast<Eigen::Index>(d)];
        }
      });

  const Graph graph = buildSymmetricGraph(knn, n, k);
  orientNormals(positions, graph, normals);
  cloud.normals = std::move(normals);
}

}  // namespace shellsim
