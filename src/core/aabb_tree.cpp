#include "core/aabb_tree.hpp"

#include <algorithm>
#include <limits>

namespace shellsim {

void AabbTree::build(std::span<const double> boxes) {
  const auto n = static_cast<int32_t>(boxes.size() / 6);
  order_.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
  std::vector<double> centres(3 * static_cast<size_t>(n));
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    for (size_t k = 0; k < 3; ++k)
      centres[3 * i + k] = 0.5 * (boxes[6 * i + k] + boxes[6 * i + 3 + k]);
  }
  nodes_.clear();
  nodes_.reserve(static_cast<size_t>(2 * n / kLeafSize + 2));
  if (n > 0) buildNode(boxes, centres, 0, n);
  storeBoxes(boxes);
}

int32_t AabbTree::buildNode(std::span<const double> boxes, std::vector<double>& centres,
                            int32_t first, int32_t count) {
  const auto index = static_cast<int32_t>(nodes_.size());
  nodes_.emplace_back();
  double clo[3], chi[3];
  for (int k = 0; k < 3; ++k) {
    nodes_.back().lo[k] = clo[k] = std::numeric_limits<double>::infinity();
    nodes_.back().hi[k] = chi[k] = -std::numeric_limits<double>::infinity();
  }
  for (int32_t e = first; e < first + count; ++e) {
    const auto i = static_cast<size_t>(order_[static_cast<size_t>(e)]);
    Node& node = nodes_[static_cast<size_t>(index)];
    for (size_t k = 0; k < 3; ++k) {
      node.lo[k] = std::min(node.lo[k], boxes[6 * i + k]);
      node.hi[k] = std::max(node.hi[k], boxes[6 * i + 3 + k]);
      clo[k] = std::min(clo[k], centres[3 * i + k]);
      chi[k] = std::max(chi[k], centres[3 * i + k]);
    }
  }
  if (count <= kLeafSize) {
    nodes_[static_cast<size_t>(index)].first = first;
    nodes_[static_cast<size_t>(index)].count = count;
    return index;
  }
  int axis = 0;
  for (int k = 1; k < 3; ++k) {
    if (chi[k] - clo[k] > chi[axis] - clo[axis]) axis = k;
  }
  const int32_t half = count / 2;
  const auto begin = order_.begin() + first;
  // Ties broken by the box index, so the split does not depend on the sort's internals.
  std::nth_element(begin, begin + half, begin + count, [&](int32_t a, int32_t b) {
    const double ca = centres[3 * static_cast<size_t>(a) + static_cast<size_t>(axis)];
    const double cb = centres[3 * static_cast<size_t>(b) + static_cast<size_t>(axis)];
    return ca < cb || (ca == cb && a < b);
  });
  buildNode(boxes, centres, first, half);
  const int32_t right = buildNode(boxes, centres, first + half, count - half);
  nodes_[static_cast<size_t>(index)].first = right;
  nodes_[static_cast<size_t>(index)].count = 0;
  return index;
}

void AabbTree::storeBoxes(std::span<const double> boxes) {
  boxes_.resize(6 * order_.size());
  for (size_t e = 0; e < order_.size(); ++e) {
    const auto i = static_cast<size_t>(order_[e]);
    std::copy_n(boxes.begin() + static_cast<std::ptrdiff_t>(6 * i), 6,
                boxes_.begin() + static_cast<std::ptrdiff_t>(6 * e));
  }
}

void AabbTree::refit(std::span<const double> boxes) {
  storeBoxes(boxes);
  // Children follow their parent, so a backward sweep sees them first.
  for (size_t j = nodes_.size(); j-- > 0;) {
    Node& node = nodes_[j];
    if (node.count > 0) {
      for (int k = 0; k < 3; ++k) {
        node.lo[k] = std::numeric_limits<double>::infinity();
        node.hi[k] = -std::numeric_limits<double>::infinity();
      }
      for (int32_t e = node.first; e < node.first + node.count; ++e) {
        const auto i = static_cast<size_t>(order_[static_cast<size_t>(e)]);
        for (size_t k = 0; k < 3; ++k) {
          node.lo[k] = std::min(node.lo[k], boxes[6 * i + k]);
          node.hi[k] = std::max(node.hi[k], boxes[6 * i + 3 + k]);
        }
      }
    } else {
      const Node& left = nodes_[j + 1];
      const Node& right = nodes_[static_cast<size_t>(node.first)];
      for (int k = 0; k < 3; ++k) {
        node.lo[k] = std::min(left.lo[k], right.lo[k]);
        node.hi[k] = std::max(left.hi[k], right.hi[k]);
      }
    }
  }
}

}  // namespace shellsim
