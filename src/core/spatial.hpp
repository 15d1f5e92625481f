// Spatial search over flat point arrays: one kd-tree (nanoflann) for every module that
// needs nearest neighbours (normal estimation, clustering, fiber networks, surface binding).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <nanoflann.hpp>
#include <span>
#include <vector>

namespace shellsim {

// A kd-tree over `positions` (nPoints, 3). The array is referenced, not copied: it must
// outlive the tree and not change while the tree is used. Queries are const and may run
// from several threads at once.
class PointKdTree {
 public:
  explicit PointKdTree(std::span<const double> positions)
      : cloud_{positions},
        tree_(std::make_unique<Tree>(3, cloud_, nanoflann::KDTreeSingleIndexAdaptorParams(16))) {
    tree_->buildIndex();
  }
  // The tree holds a reference to cloud_, so the object stays where it was built.
  PointKdTree(const PointKdTree&) = delete;
  PointKdTree& operator=(const PointKdTree&) = delete;

  [[nodiscard]] size_t size() const { return cloud_.kdtree_get_point_count(); }

  // The min(k, size()) nearest points to `query` (3 doubles), nearest first, ties broken
  // by nanoflann's deterministic order. Returns the count found; fills `indices` and
  // `squaredDistances` (resized to the count).
  size_t nearest(const double* query, size_t k, std::vector<uint32_t>& indices,
                 std::vector<double>& squaredDistances) const {
    indices.resize(k);
    squaredDistances.resize(k);
    const size_t found = nearest(query, k, indices.data(), squaredDistances.data());
    indices.resize(found);
    squaredDistances.resize(found);
    return found;
  }

  // Indices of the points within `radius` of `query` (inclusive), ascending, into `indices`.
  void withinRadius(const double* query, double radius, std::vector<uint32_t>& indices) const {
    std::vector<std::pair<uint32_t, double>> matches;
    tree_->radiusSearch(query, radius * radius, matches, nanoflann::SearchParams(32, 0, false));
    indices.clear();
    for (const auto& match : matches) indices.push_back(match.first);
    std::sort(indices.begin(), indices.end());
  }

  // The same into caller-owned arrays of at least k entries.
  size_t nearest(const double* query, size_t k, uint32_t* indices, double* squaredDistances) const {
    return tree_->knnSearch(query, k, indices, squaredDistances);
  }

 private:
  // nanoflann's dataset interface over the flat array, no copy.
  struct FlatCloud {
    std::span<const double> positions;  // (nPoints, 3)
    [[nodiscard]] size_t kdtree_get_point_count() const { return positions.size() / 3; }
    [[nodiscard]] double kdtree_get_pt(uint32_t index, size_t dim) const {
      return positions[3 * static_cast<size_t>(index) + dim];
    }
    template <class Bbox>
    bool kdtree_get_bbox(Bbox& /*bbox*/) const {
      return false;
    }
  };
  using Tree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<double, FlatCloud>,
                                                   FlatCloud, 3, uint32_t>;

  FlatCloud cloud_;
  std::unique_ptr<Tree> tree_;
};

}  // namespace shellsim
