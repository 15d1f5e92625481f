#include "core/block_cholesky.hpp"

#include <Eigen/Core>
#include <Eigen/OrderingMethods>
#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>

namespace shellsim {
namespace {

using Mat3 = Eigen::Matrix3d;
using Map3 = Eigen::Map<Mat3>;
using ConstMap3 = Eigen::Map<const Mat3>;

// The inverse of the lower Cholesky factor of the symmetric 3x3 block d (its lower triangle
// is read), or false if d is not positive definite.
bool invertedCholesky(const Mat3& d, Mat3& inverse) {
  const double l00Squared = d(0, 0);
  if (!(l00Squared > 0) || !std::isfinite(l00Squared)) return false;
  const double l00 = std::sqrt(l00Squared);
  const double l10 = d(1, 0) / l00;
  const double l20 = d(2, 0) / l00;
  const double l11Squared = d(1, 1) - l10 * l10;
  if (!(l11Squared > 0) || !std::isfinite(l11Squared)) return false;
  const double l11 = std::sqrt(l11Squared);
  const double l21 = (d(2, 1) - l20 * l10) / l11;
  const double l22Squared = d(2, 2) - l20 * l20 - l21 * l21;
  if (!(l22Squared > 0) || !std::isfinite(l22Squared)) return false;
  const double l22 = std::sqrt(l22Squared);
  // Inverse of [l00 0 0; l10 l11 0; l20 l21 l22], lower triangular.
  const double i00 = 1 / l00, i11 = 1 / l11, i22 = 1 / l22;
  const double i10 = -l10 * i00 * i11;
  const double i21 = -l21 * i11 * i22;
  const double i20 = -(l20 * i00 + l21 * i10) * i22;
  inverse << i00, 0, 0, i10, i11, 0, i20, i21, i22;
  return true;
}

}  // namespace

void BlockCholesky::analyze(int32_t nodeCount, std::span<const int32_t> offsets,
                            std::span<const int32_t> rows) {
  nodeCount_ = nodeCount;
  factorized_ = false;
  const auto n = static_cast<size_t>(nodeCount);
  // Fill-reducing ordering of the node graph.
  {
    std::vector<Eigen::Triplet<double, int>> entries;
    entries.reserve(rows.size());
    for (size_t c = 0; c < n; ++c) {
      for (auto b = static_cast<size_t>(offsets[c]); b < static_cast<size_t>(offsets[c + 1]); ++b) {
        entries.emplace_back(rows[b], static_cast<int>(c), 1.0);
      }
    }
    Eigen::SparseMatrix<double, Eigen::ColMajor, int> graph(nodeCount, nodeCount);
    graph.setFromTriplets(entries.begin(), entries.end());
    Eigen::PermutationMatrix<Eigen::Dynamic, Eigen::Dynamic, int> permutation;
    Eigen::AMDOrdering<int>()(graph, permutation);
    // Eigen's ordering lists the original index of each pivot, in elimination order.
    order_.assign(permutation.indices().data(), permutation.indices().data() + n);
  }
  position_.assign(n, 0);
  for (size_t k = 0; k < n; ++k)
    position_[static_cast<size_t>(order_[k])] = static_cast<int32_t>(k);

  // A's blocks on or above the diagonal, by permuted column.
  upperOffsets_.assign(n + 1, 0);
  for (size_t c = 0; c < n; ++c) {
    const int32_t k = position_[c];
    for (auto b = static_cast<size_t>(offsets[c]); b < static_cast<size_t>(offsets[c + 1]); ++b) {
      if (position_[static_cast<size_t>(rows[b])] <= k) ++upperOffsets_[static_cast<size_t>(k) + 1];
    }
  }
  for (size_t k = 0; k < n; ++k) upperOffsets_[k + 1] += upperOffsets_[k];
  upperRows_.resize(static_cast<size_t>(upperOffsets_[n]));
  upperBlocks_.resize(upperRows_.size());
  for (size_t c = 0; c < n; ++c) {
    const auto k = static_cast<size_t>(position_[c]);
    auto cursor = static_cast<size_t>(upperOffsets_[k]);
    for (auto b = static_cast<size_t>(offsets[c]); b < static_cast<size_t>(offsets[c + 1]); ++b) {
      const int32_t i = position_[static_cast<size_t>(rows[b])];
      if (i > static_cast<int32_t>(k)) continue;
      upperRows_[cursor] = i;
      upperBlocks_[cursor] = static_cast<int32_t>(b);
      ++cursor;
    }
  }

  // Elimination tree and column counts of L: row k of L has a block in every column on the
  // tree paths from the rows of A's column k up to k.
  parent_.assign(n, -1);
  tags_.assign(n, -1);
  std::vector<int32_t> counts(n, 0);
  for (size_t k = 0; k < n; ++k) {
    tags_[k] = static_cast<int32_t>(k);
    for (auto p = static_cast<size_t>(upperOffsets_[k]);
         p < static_cast<size_t>(upperOffsets_[k + 1]); ++p) {
      for (auto i = static_cast<size_t>(upperRows_[p]); tags_[i] != static_cast<int32_t>(k);
           i = static_cast<size_t>(parent_[i])) {
        if (parent_[i] == -1) parent_[i] = static_cast<int32_t>(k);
        ++counts[i];
        tags_[i] = static_cast<int32_t>(k);
      }
    }
  }
  columnOffsets_.assign(n + 1, 0);
  for (size_t k = 0; k < n; ++k) columnOffsets_[k + 1] = columnOffsets_[k] + counts[k];
  factorRows_.assign(static_cast<size_t>(columnOffsets_[n]), 0);
  factorValues_.assign(9 * factorRows_.size(), 0.0);
  inverseDiagonal_.assign(9 * n, 0.0);
  accumulator_.assign(9 * n, 0.0);
  pattern_.assign(n, 0);
  filled_.assign(n, 0);
  permuted_.assign(3 * n, 0.0);
}

bool BlockCholesky::factorize(std::span<const double> values, std::span<const int32_t> slots) {
  factorized_ = false;
  const auto n = static_cast<size_t>(nodeCount_);
  std::fill(tags_.begin(), tags_.end(), -1);
  std::fill(filled_.begin(), filled_.end(), 0);
  double* y = accumulator_.data();
  for (size_t k = 0; k < n; ++k) {
    // Scatter A's column k into the accumulator and collect the row's pattern, the tree
    // reach of its rows, in topological order (pattern_[top ..]).
    size_t top = n;
    tags_[k] = static_cast<int32_t>(k);
    for (auto p = static_cast<size_t>(upperOffsets_[k]);
         p < static_cast<size_t>(upperOffsets_[k + 1]); ++p) {
      const auto row = static_cast<size_t>(upperRows_[p]);
      const auto block = static_cast<size_t>(upperBlocks_[p]);
      double* target = y + 9 * row;
      for (size_t j = 0; j < 3; ++j) {
        const double* source = values.data() + slots[3 * block + j];
        for (size_t i = 0; i < 3; ++i) target[3 * j + i] += source[i];
      }
      size_t length = 0;
      for (auto i = row; tags_[i] != static_cast<int32_t>(k); i = static_cast<size_t>(parent_[i])) {
        pattern_[length++] = static_cast<int32_t>(i);
        tags_[i] = static_cast<int32_t>(k);
      }
      while (length > 0) pattern_[--top] = pattern_[--length];
    }
    Mat3 diagonal = ConstMap3(y + 9 * k);
    Map3(y + 9 * k).setZero();
    for (; top < n; ++top) {
      const auto j = static_cast<size_t>(pattern_[top]);
      // X_j = L_jj^-1 y_j, then y_r -= L_rj X_j below it, and L_kj = X_j^T.
      const Mat3 x = ConstMap3(inverseDiagonal_.data() + 9 * j) * ConstMap3(y + 9 * j);
      Map3(y + 9 * j).setZero();
      const auto begin = static_cast<size_t>(columnOffsets_[j]);
      const auto end = begin + static_cast<size_t>(filled_[j]);
      for (size_t p = begin; p < end; ++p) {
        Map3(y + 9 * static_cast<size_t>(factorRows_[p])).noalias() -=
            ConstMap3(factorValues_.data() + 9 * p) * x;
      }
      diagonal.noalias() -= x.transpose() * x;
      factorRows_[end] = static_cast<int32_t>(k);
      Map3(factorValues_.data() + 9 * end) = x.transpose();
      ++filled_[j];
    }
    Mat3 inverse;
    if (!invertedCholesky(diagonal, inverse)) {
      // Leave the workspace clean for the next factorization.
      std::fill(accumulator_.begin(), accumulator_.end(), 0.0);
      return false;
    }
    Map3(inverseDiagonal_.data() + 9 * k) = inverse;
  }
  factorized_ = true;
  return true;
}

void BlockCholesky::solve(std::span<double> x) const {
  const auto n = static_cast<size_t>(nodeCount_);
  using Vec3 = Eigen::Vector3d;
  using VecMap = Eigen::Map<Vec3>;
  double* z = permuted_.data();
  for (size_t k = 0; k < n; ++k) {
    VecMap(z + 3 * k) = VecMap(x.data() + 3 * static_cast<size_t>(order_[k]));
  }
  // L z = b.
  for (size_t j = 0; j < n; ++j) {
    const Vec3 zj = ConstMap3(inverseDiagonal_.data() + 9 * j) * VecMap(z + 3 * j);
    VecMap(z + 3 * j) = zj;
    for (auto p = static_cast<size_t>(columnOffsets_[j]);
         p < static_cast<size_t>(columnOffsets_[j + 1]); ++p) {
      VecMap(z + 3 * static_cast<size_t>(factorRows_[p])).noalias() -=
          ConstMap3(factorValues_.data() + 9 * p) * zj;
    }
  }
  // L^T x = z.
  for (size_t j = n; j-- > 0;) {
    Vec3 sum = VecMap(z + 3 * j);
    for (auto p = static_cast<size_t>(columnOffsets_[j]);
         p < static_cast<size_t>(columnOffsets_[j + 1]); ++p) {
      sum.noalias() -= ConstMap3(factorValues_.data() + 9 * p).transpose() *
                       VecMap(z + 3 * static_cast<size_t>(factorRows_[p]));
    }
    VecMap(z + 3 * j) = ConstMap3(inverseDiagonal_.data() + 9 * j).transpose() * sum;
  }
  for (size_t k = 0; k < n; ++k) {
    VecMap(x.data() + 3 * static_cast<size_t>(order_[k])) = VecMap(z + 3 * k);
  }
}

}  // namespace shellsim
