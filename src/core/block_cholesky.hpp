// Sparse Cholesky factorization of a symmetric positive definite matrix made of 3x3 node
// blocks: the Newton systems alpha M + K of dynamics/implicit.cpp, where every node has
// three dofs and every stencil couples whole nodes.
//
// Working on nodes rather than scalar dofs cuts the index work ninefold: the ordering, the
// elimination tree and the pattern of L are those of the node graph, and every arithmetic
// step is a 3x3 block operation (27 fused multiply-adds on contiguous values). On the
// Newton systems of the aluminium sheet (bench_implicit, BM_NewtonSystemCholesky), with the
// same fill as Eigen's scalar SimplicialLLT, it factorizes 3.0-3.4x and solves 1.5-2.9x
// faster (3k to 30k dofs).
//
// Factorization, with P a fill-reducing node permutation (AMD on the node graph, Eigen's
// AMDOrdering) and A' = P A P^T:  A' = L L^T,  L block lower triangular with lower
// triangular diagonal blocks. Up-looking, one block row k of L at a time (the block form
// of the simplicial LDL^T of T. Davis, which Eigen's SimplicialLLT also uses): with
// X_j = L_kj^T, row k solves the block lower-triangular system
//   sum_{i <= j} L_ji X_i = A'_jk   for the j < k in the row's pattern (its elimination-tree
//   reach), in topological order:  X_j = L_jj^-1 (A'_jk - sum_{i < j} L_ji X_i),
// then  L_kk = chol(A'_kk - sum_j X_j^T X_j).  A pivot block that is not positive definite
// (a non-positive or non-finite pivot of its 3x3 Cholesky) stops the factorization.
// The diagonal blocks are kept inverted (L_kk^-1), so that the solves multiply.
//
// Deterministic: serial, with a fixed order of every sum.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace shellsim {

class BlockCholesky {
 public:
  // The block pattern of A over nodeCount nodes: column node c has blocks in the row
  // nodes rows[offsets[c] .. offsets[c + 1]), which must be symmetric (both triangles,
  // block (r, c) present iff (c, r) is) and hold every diagonal block. Computes the
  // ordering and the pattern of L; the last factorization is discarded.
  void analyze(int32_t nodeCount, std::span<const int32_t> offsets, std::span<const int32_t> rows);

  // Numeric factorization of A with the analysed pattern: entry (i, j) of A's block number
  // b (b in [0, offsets[nodeCount]), the order of `rows`) is values[slots[3 b + j] + i]
  // (the layout of a compressed-column matrix whose blocks are 3-row runs; only blocks on
  // or above the diagonal in the permuted order are read). Returns false if A is not
  // positive definite; then solve() must not be called.
  bool factorize(std::span<const double> values, std::span<const int32_t> slots);

  // Solves A x = b in place: x holds b on entry, shape (nodeCount, 3).
  void solve(std::span<double> x) const;

  [[nodiscard]] bool factorized() const { return factorized_; }
  [[nodiscard]] int32_t nodeCount() const { return nodeCount_; }
  // Off-diagonal blocks of L.
  [[nodiscard]] int64_t factorBlocks() const { return static_cast<int64_t>(factorRows_.size()); }

 private:
  int32_t nodeCount_ = 0;
  bool factorized_ = false;
  std::vector<int32_t> order_;     // (nNodes): original node at permuted position k
  std::vector<int32_t> position_;  // (nNodes): permuted position of original node
  // A's pattern in permuted numbering, per column, blocks on or above the diagonal only:
  // column k reads rows upperRows_[upperOffsets_[k] ..] with A's block numbers upperBlocks_.
  std::vector<int32_t> upperOffsets_, upperRows_, upperBlocks_;
  std::vector<int32_t> parent_;          // (nNodes): elimination tree, -1 at roots
  std::vector<int32_t> columnOffsets_;   // (nNodes + 1): L's off-diagonal blocks per column
  std::vector<int32_t> factorRows_;      // (nFactorBlocks): row of each, ascending per column
  std::vector<double> factorValues_;     // (nFactorBlocks, 3, 3), column-major blocks
  std::vector<double> inverseDiagonal_;  // (nNodes, 3, 3): L_kk^-1, column-major
  // Factorization workspace.
  std::vector<double> accumulator_;  // (nNodes, 3, 3)
  std::vector<int32_t> pattern_, tags_, filled_;
  mutable std::vector<double> permuted_;  // (nNodes, 3), solve workspace
};

}  // namespace shellsim
