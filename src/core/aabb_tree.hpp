// A bounding-volume hierarchy of axis-aligned boxes (gingold2004 section 4.3 and notes
// section 9): built top-down by median splits on the longest axis of the box centres,
// refit bottom-up when the boxes move, and queried for overlapping pairs, within one tree
// (self-collision) or between two (body-body). Deterministic: the pairs come in an order fixed by
// the tree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace shellsim {

class AabbTree {
 public:
  // Builds over `boxes`, shape (nBoxes, 6): min x, y, z, max x, y, z, each box's min <= max.
  void build(std::span<const double> boxes);
  // The same boxes moved (same count): every node's box recomputed, the structure kept.
  void refit(std::span<const double> boxes);
  [[nodiscard]] int32_t size() const { return static_cast<int32_t>(order_.size()); }

  // Every pair (i, j), i < j, of overlapping boxes of this tree (forEachSelfPair), or (i of
  // this tree, j of other) (forEachPairWith), passed to visit(i, j) as the traversal meets
  // them: in an order fixed by the tree, the same on every call for the same boxes.
  template <class Visit>
  void forEachSelfPair(const Visit& visit) const {
    if (nodes_.empty()) return;
    descend(*this, 0, 0, true, [&](int32_t p, int32_t q) {
      const int32_t a = order_[static_cast<size_t>(p)], b = order_[static_cast<size_t>(q)];
      visit(std::min(a, b), std::max(a, b));
    });
  }
  template <class Visit>
  void forEachPairWith(const AabbTree& other, const Visit& visit) const {
    if (nodes_.empty() || other.nodes_.empty()) return;
    descend(other, 0, 0, false, [&](int32_t p, int32_t q) {
      visit(order_[static_cast<size_t>(p)], other.order_[static_cast<size_t>(q)]);
    });
  }

 private:
  static constexpr int32_t kLeafSize = 4;
  struct Node {
    double lo[3], hi[3];
    int32_t first = 0;  // leaf: first entry of order_; inner: the right child (left is next)
    int32_t count = 0;  // leaf: number of boxes; inner: 0
  };
  int32_t buildNode(std::span<const double> boxes, std::vector<double>& centres, int32_t first,
                    int32_t count);
  static bool overlap(const Node& a, const Node& b);
  [[nodiscard]] bool boxesOverlap(const AabbTree& other, int32_t p, int32_t q) const;
  void storeBoxes(std::span<const double> boxes);
  template <class Emit>
  void descend(const AabbTree& other, int32_t a, int32_t b, bool self, const Emit& emit) const;

  std::vector<Node> nodes_;     // pre-order: a node's children come after it
  std::vector<int32_t> order_;  // (nBoxes), box indices in leaf order
  std::vector<double> boxes_;   // (nBoxes, 6), the boxes in leaf order
};

inline bool AabbTree::overlap(const Node& a, const Node& b) {
  for (int k = 0; k < 3; ++k) {
    if (a.lo[k] > b.hi[k] || b.lo[k] > a.hi[k]) return false;
  }
  return true;
}

inline bool AabbTree::boxesOverlap(const AabbTree& other, int32_t p, int32_t q) const {
  const double* a = &boxes_[6 * static_cast<size_t>(p)];
  const double* b = &other.boxes_[6 * static_cast<size_t>(q)];
  for (int k = 0; k < 3; ++k) {
    if (a[k] > b[3 + k] || b[k] > a[3 + k]) return false;
  }
  return true;
}

template <class Emit>
inline void AabbTree::descend(const AabbTree& other, int32_t a, int32_t b, bool self,
                              const Emit& emit) const {
  std::vector<std::pair<int32_t, int32_t>> stack{{a, b}};
  stack.reserve(64);
  while (!stack.empty()) {
    const auto [i, j] = stack.back();
    stack.pop_back();
    const Node& ni = nodes_[static_cast<size_t>(i)];
    const Node& nj = other.nodes_[static_cast<size_t>(j)];
    if (!(self && i == j) && !overlap(ni, nj)) continue;
    const bool leafI = ni.count > 0, leafJ = nj.count > 0;
    if (leafI && leafJ) {
      for (int32_t p = ni.first; p < ni.first + ni.count; ++p) {
        // Within one leaf against itself: each unordered pair once.
        const int32_t qStart = self && i == j ? p + 1 : nj.first;
        for (int32_t q = qStart; q < nj.first + nj.count; ++q) {
          if (boxesOverlap(other, p, q)) emit(p, q);
        }
      }
      continue;
    }
    if (self && i == j) {
      // A node against itself: its two children against themselves and each other.
      const int32_t left = i + 1, right = ni.first;
      stack.emplace_back(left, left);
      stack.emplace_back(right, right);
      stack.emplace_back(left, right);
      continue;
    }
    // Split the larger (or the inner) one.
    const bool splitI =
        !leafI &&
        (leafJ || (ni.hi[0] - ni.lo[0]) + (ni.hi[1] - ni.lo[1]) + (ni.hi[2] - ni.lo[2]) >=
                      (nj.hi[0] - nj.lo[0]) + (nj.hi[1] - nj.lo[1]) + (nj.hi[2] - nj.lo[2]));
    if (splitI) {
      stack.emplace_back(i + 1, j);
      stack.emplace_back(ni.first, j);
    } else {
      stack.emplace_back(i, j + 1);
      stack.emplace_back(i, nj.first);
    }
  }
}

}  // namespace shellsim
