// Disjoint sets over the indices 0 .. n-1 whose representative is the smallest member, so
// that labels numbered by smallest member are the same whatever the order of the unions
// (pieces of a torn shell, components of a mesh, fans around a vertex).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace shellsim {

class UnionFind {
 public:
  explicit UnionFind(size_t count) : parent_(count) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }

  // The smallest member of i's set (path halving on the way).
  int32_t find(int32_t i) {
    while (parent_[static_cast<size_t>(i)] != i) {
      parent_[static_cast<size_t>(i)] =
          parent_[static_cast<size_t>(parent_[static_cast<size_t>(i)])];
      i = parent_[static_cast<size_t>(i)];
    }
    return i;
  }

  void unite(int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }

  // The set of every index as a label 0, 1, ... numbered by the sets' smallest members.
  std::vector<int32_t> labels() {
    std::vector<int32_t> label(parent_.size(), -1), out(parent_.size());
    int32_t next = 0;
    for (size_t i = 0; i < parent_.size(); ++i) {
      const auto root = static_cast<size_t>(find(static_cast<int32_t>(i)));
      if (label[root] < 0) label[root] = next++;
      out[i] = label[root];
    }
    return out;
  }

 private:
  std::vector<int32_t> parent_;
};

}  // namespace shellsim
