// BlockCholesky (core/block_cholesky.hpp) against dense factorizations.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <limits>
#include <random>
#include <vector>

#include "core/block_cholesky.hpp"

namespace shellsim {
namespace {

// A symmetric block matrix in the layout BlockCholesky reads: per column node, its row
// nodes in ascending order, each block a 3-row run of a compressed-column value array.
struct BlockMatrix {
  int32_t nodes = 0;
  std::vector<int32_t> offsets, rows, slots;
  std::vector<double> values;
};

// The blocks of `dense` (3 nodes x 3 nodes) where `coupled(r, c)` or r == c.
template <class Coupled>
BlockMatrix fromDense(const Eigen::MatrixXd& dense, const Coupled& coupled) {
  BlockMatrix m;
  m.nodes = static_cast<int32_t>(dense.rows() / 3);
  m.offsets.push_back(0);
  std::vector<std::vector<int32_t>> columns(static_cast<size_t>(m.nodes));
  for (int32_t c = 0; c < m.nodes; ++c) {
    for (int32_t r = 0; r < m.nodes; ++r) {
      if (r == c || coupled(r, c)) columns[static_cast<size_t>(c)].push_back(r);
    }
    m.rows.insert(m.rows.end(), columns[static_cast<size_t>(c)].begin(),
                  columns[static_cast<size_t>(c)].end());
    m.offsets.push_back(static_cast<int32_t>(m.rows.size()));
  }
  // Scalar columns 3c + j hold the 3-row runs of column node c's blocks in order.
  m.slots.resize(3 * m.rows.size());
  for (int32_t c = 0; c < m.nodes; ++c) {
    for (int j = 0; j < 3; ++j) {
      for (auto b = static_cast<size_t>(m.offsets[static_cast<size_t>(c)]);
           b < static_cast<size_t>(m.offsets[static_cast<size_t>(c) + 1]); ++b) {
        m.slots[3 * b + static_cast<size_t>(j)] = static_cast<int32_t>(m.values.size());
        for (int i = 0; i < 3; ++i) m.values.push_back(dense(3 * m.rows[b] + i, 3 * c + j));
      }
    }
  }
  return m;
}

// A random symmetric positive definite matrix coupling nodes r, c with |r - c| <= 1 on a
// ring and a few long-range pairs; zero blocks elsewhere.
Eigen::MatrixXd randomSpd(int32_t nodes, unsigned seed, std::vector<std::pair<int, int>>& pairs) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::uniform_int_distribution<int> pick(0, nodes - 1);
  pairs.clear();
  for (int i = 0; i < nodes; ++i) pairs.emplace_back(i, (i + 1) % nodes);
  for (int e = 0; e < nodes / 3; ++e) {
    const int a = pick(random), b = pick(random);
    if (a != b) pairs.emplace_back(a, b);
  }
  // A = sum over pairs of B_p^T B_p with B_p a random 3x6 map of the pair's dofs, plus a
  // small multiple of the identity: symmetric positive definite with the pairs' pattern.
  Eigen::MatrixXd a = 0.1 * Eigen::MatrixXd::Identity(3 * nodes, 3 * nodes);
  for (const auto& [p, q] : pairs) {
    Eigen::Matrix<double, 3, 6> b;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 6; ++j) b(i, j) = uniform(random);
    const Eigen::Matrix<double, 6, 6> local = b.transpose() * b;
    const int index[2] = {p, q};
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < 2; ++t)
        a.block<3, 3>(3 * index[s], 3 * index[t]) += local.block<3, 3>(3 * s, 3 * t);
  }
  return a;
}

bool coupledBy(const std::vector<std::pair<int, int>>& pairs, int r, int c) {
  for (const auto& [p, q] : pairs) {
    if ((p == r && q == c) || (p == c && q == r)) return true;
  }
  return false;
}

TEST(BlockCholesky, SolvesRandomSparseSpdSystemsAsDenseCholeskyDoes) {
  for (unsigned seed : {1u, 2u, 3u}) {
    std::vector<std::pair<int, int>> pairs;
    const int32_t nodes = 40;
    const Eigen::MatrixXd a = randomSpd(nodes, seed, pairs);
    const BlockMatrix m = fromDense(a, [&](int r, int c) { return coupledBy(pairs, r, c); });
    BlockCholesky cholesky;
    cholesky.analyze(m.nodes, m.offsets, m.rows);
    ASSERT_TRUE(cholesky.factorize(m.values, m.slots));
    const Eigen::VectorXd b = Eigen::VectorXd::LinSpaced(3 * nodes, -1, 2);
    std::vector<double> x(b.data(), b.data() + b.size());
    cholesky.solve(x);
    const Eigen::VectorXd expected = a.llt().solve(b);
    const Eigen::VectorXd got = Eigen::Map<const Eigen::VectorXd>(x.data(), 3 * nodes);
    EXPECT_LT((got - expected).norm(), 1e-10 * expected.norm()) << "seed " << seed;
    EXPECT_LT((a * got - b).norm(), 1e-10 * b.norm());
    // Fill: L has at least the lower blocks of A.
    EXPECT_GE(cholesky.factorBlocks(), static_cast<int64_t>(pairs.size()) - 2);
  }
}

TEST(BlockCholesky, RefactorizesNewValuesOnTheSamePatternAndRejectsIndefiniteMatrices) {
  std::vector<std::pair<int, int>> pairs;
  const int32_t nodes = 25;
  const Eigen::MatrixXd a = randomSpd(nodes, 7, pairs);
  const auto coupled = [&](int r, int c) { return coupledBy(pairs, r, c); };
  BlockCholesky cholesky;
  const BlockMatrix m = fromDense(a, coupled);
  cholesky.analyze(m.nodes, m.offsets, m.rows);

  // Indefinite: one diagonal entry made strongly negative. Fails, and leaves no residue in
  // the workspace that would spoil the next factorization.
  Eigen::MatrixXd indefinite = a;
  indefinite(31, 31) = -50;
  const BlockMatrix bad = fromDense(indefinite, coupled);
  EXPECT_FALSE(cholesky.factorize(bad.values, bad.slots));
  EXPECT_FALSE(cholesky.factorized());
  Eigen::MatrixXd nan = a;
  nan(4, 4) = std::numeric_limits<double>::quiet_NaN();
  const BlockMatrix notFinite = fromDense(nan, coupled);
  EXPECT_FALSE(cholesky.factorize(notFinite.values, notFinite.slots));

  for (double shift : {0.0, 10.0}) {
    const Eigen::MatrixXd shifted = a + shift * Eigen::MatrixXd::Identity(3 * nodes, 3 * nodes);
    const BlockMatrix s = fromDense(shifted, coupled);
    ASSERT_TRUE(cholesky.factorize(s.values, s.slots));
    const Eigen::VectorXd b = Eigen::VectorXd::Ones(3 * nodes);
    std::vector<double> x(b.data(), b.data() + b.size());
    cholesky.solve(x);
    const Eigen::VectorXd got = Eigen::Map<const Eigen::VectorXd>(x.data(), 3 * nodes);
    EXPECT_LT((shifted * got - b).norm(), 1e-10 * b.norm()) << "shift " << shift;
  }
}

TEST(BlockCholesky, HandlesDisconnectedNodesAndADenseMatrix) {
  // Block diagonal (every node alone: a forest of single-node trees) and fully coupled.
  for (bool dense : {false, true}) {
    std::vector<std::pair<int, int>> pairs;
    const int32_t nodes = 12;
    Eigen::MatrixXd a = randomSpd(nodes, 11, pairs);
    if (!dense) {
      for (int r = 0; r < nodes; ++r)
        for (int c = 0; c < nodes; ++c)
          if (r != c) a.block<3, 3>(3 * r, 3 * c).setZero();
    }
    const BlockMatrix m = fromDense(a, [&](int, int) { return dense; });
    BlockCholesky cholesky;
    cholesky.analyze(m.nodes, m.offsets, m.rows);
    ASSERT_TRUE(cholesky.factorize(m.values, m.slots));
    EXPECT_EQ(cholesky.factorBlocks(), dense ? nodes * (nodes - 1) / 2 : 0);
    const Eigen::VectorXd b = Eigen::VectorXd::LinSpaced(3 * nodes, 1, 3);
    std::vector<double> x(b.data(), b.data() + b.size());
    cholesky.solve(x);
    const Eigen::VectorXd got = Eigen::Map<const Eigen::VectorXd>(x.data(), 3 * nodes);
    EXPECT_LT((a * got - b).norm(), 1e-10 * b.norm());
  }
}

}  // namespace
}  // namespace shellsim
