#include "dynamics/implicit.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/block_cholesky.hpp"
#include "dynamics/contact.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

using SparseMatrix = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;
using Vector = Eigen::VectorXd;

// The Newton matrix Hess Phi on the free dofs, assembled from Model::hessianBlocks, and
// its factorization. The layout is built once per topology version and free-dof map: the
// matrix's 3x3 blocks are numbered by column node, then row node; block k of column node b
// holds entries (3a' + i, 3b' + j) (a', b' free node indices) at
// matrix.valuePtr()[blockSlots[3k + j] + i], and is the sum, in this order, of the model's
// blocks contributions[contributionOffsets[k] .. contributionOffsets[k + 1]).
struct LinearSolverCache {
  SparseMatrix matrix;        // Hess Phi on free dofs, compressed columns (CG products)
  std::vector<int> diagonal;  // (nFree), index of (i, i) in matrix.valuePtr()
  bool layoutValid = false;
  uint64_t layoutTopology = 0;               // Model::topologyVersion() it was built for
  std::vector<int> freeIndex;                // the free-dof map it was built for
  std::vector<double> blockValues;           // (nModelBlocks, 3, 3), hessianBlocks output
  std::vector<int32_t> columnBlockOffsets;   // (nFreeNodes + 1), matrix blocks per column
  std::vector<int32_t> blockRow;             // (nMatrixBlocks), free row node of each
  std::vector<int32_t> blockSlots;           // (nMatrixBlocks, 3)
  std::vector<int32_t> contributionOffsets;  // (nMatrixBlocks + 1)
  std::vector<int32_t> contributions;        // model block indices
  // Bumped whenever the layout is rebuilt; the symbolic factorization was made for layout
  // analyzedLayout (layouts count from 1, so 0 is "none yet").
  uint64_t layout = 0;
  uint64_t analyzedLayout = 0;
  BlockCholesky cholesky;
  bool factorized = false;  // cholesky holds a factor (of 3 cholesky.nodeCount() dofs)

  void analyze() {
    cholesky.analyze(static_cast<int32_t>(columnBlockOffsets.size() - 1), columnBlockOffsets,
                     blockRow);
    factorized = false;
  }
  // Numeric factorization of `matrix`; false if it is not positive definite.
  bool factorize() {
    factorized = cholesky.factorize(
        std::span<const double>(matrix.valuePtr(), static_cast<size_t>(matrix.nonZeros())),
        blockSlots);
    return factorized;
  }
  // The last factor's solution of F x = b.
  [[nodiscard]] Vector solve(const Vector& b) const {
    Vector x = b;
    cholesky.solve(std::span<double>(x.data(), static_cast<size_t>(x.size())));
    return x;
  }
};

namespace {

// Armijo sufficient-decrease constant and the shortest step of the backtracking.
constexpr double kArmijo = 1e-4;
constexpr int kMaxHalvings = 40;
// Below this fraction of Phi's magnitude a predicted decrease is lost in rounding.
constexpr double kResolvableDecrease = 1e-11;
// A frozen-Hessian iteration must reduce the residual at least by this factor, or the
// solve returns to full Newton iterations.
constexpr double kFrozenContraction = 0.5;
// Factor by which the mass shift tau grows after a failed factorization or line search.
constexpr double kShiftGrowth = 4;

// The potential of one Newton solve, on one body:
//   Phi(x) = alpha/2 (x - y)^T M (x - y) + E(x) - f.x   (free dofs only in the last two terms)
struct Potential {
  double alpha = 0;
  std::vector<double> target;  // y, (nNodes, 3); used when alpha > 0
  std::vector<double> force;   // f, (nNodes, 3); empty: none
};

struct FreeDofs {
  std::vector<int> index;  // (3 nNodes), free index of each dof, or -1 for pinned nodes
  int count = 0;
};

FreeDofs freeDofs(const Body& body) {
  FreeDofs free;
  const size_t n = static_cast<size_t>(body.nodeCount());
  free.index.assign(3 * n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (body.pinned[i]) continue;
    for (size_t c = 0; c < 3; ++c) free.index[3 * i + c] = free.count++;
  }
  return free;
}

// The diagonal of the bounding box of positions x, (nNodes, 3), m: a body's length scale.
double boundsDiagonal(std::span<const double> x) {
  Vec3 lo = Vec3::Constant(std::numeric_limits<double>::infinity()), hi = -lo;
  for (size_t k = 0; k + 2 < x.size(); k += 3) {
    const Vec3 p(x[k], x[k + 1], x[k + 2]);
    lo = lo.cwiseMin(p);
    hi = hi.cwiseMax(p);
  }
  return (hi - lo).norm();
}

std::string bodyLabel(const Body& body) {
  return "body '" + body.name + "'";
}

class NewtonSolver {
 public:
  NewtonSolver(Body& body, const Potential& potential, const NewtonSettings& settings,
               LinearSolverCache& cache, double time)
      : body_(body),
        potential_(potential),
        settings_(settings),
        cache_(cache),
        time_(time),
        free_(freeDofs(body)),
        mass_(body.model->nodeMasses()) {}

  // Minimizes Phi starting from body.positions (pinned dofs already at their targets);
  // forceScale is F of the convergence test. Leaves the result in body.positions. `known`
  // is the elastic gradient at the positions, where valid (see KnownGradient): on entry at
  // the start, on return at the result (valid when the last evaluation was there).
  NewtonReport solve(double forceScale, KnownGradient& known) {
    NewtonReport report;
    std::vector<double>& x = body_.positions;
    const size_t dofs = x.size();
    known.gradient.resize(dofs);
    std::vector<double>& gradient = known.gradient;
    std::vector<double> trial(dofs);
    Vector g(free_.count), d(free_.count);
    report.usedIterativeSolver = free_.count > settings_.directMaxDofs;
    if (free_.count == 0) {
      report.converged = true;
      return report;
    }
    const double lengthScale = boundsDiagonal(x);
    double previousTau = 0;
    // Dynamic steps only (alpha > 0): see NewtonSettings::frozenHessian.
    const bool frozenAllowed =
        settings_.frozenHessian && potential_.alpha > 0 && free_.count <= settings_.directMaxDofs;
    double frozenFrom = -1;     // residual before the last frozen iteration, or -1
    bool frozenFailed = false;  // a frozen iteration of this solve contracted too little
    for (int32_t iteration = 0;; ++iteration) {
      const bool stale = body_.model->prepare(x);
      if (!known.valid || stale) {
        std::fill(gradient.begin(), gradient.end(), 0.0);
        known.energy = body_.model->addGradient(x, gradient);
        known.valid = true;
      }
      const double elastic = known.energy.total();
      double scale = 0;
      const double phi = elastic + extraTerms(x, &scale);
      scale += std::abs(elastic);
      for (size_t k = 0; k < dofs; ++k) {
        const int f = free_.index[k];
        if (f < 0) continue;
        g[f] = gradient[k] + extraGradient(x, k);
      }
      const double gNorm = g.norm();
      if (!std::isfinite(phi) || !std::isfinite(gNorm)) {
        fail("the incremental potential or its gradient is not finite", iteration);
      }
      const double residual = forceScale > 0 ? gNorm / forceScale : gNorm;
      report.residuals.push_back(residual);
      report.residual = residual;
      if (gNorm <= settings_.tolerance * forceScale) {
        report.converged = true;
        return report;
      }
      if (iteration == settings_.maxIterations) return report;
      ++report.iterations;
      // After a frozen iteration that contracted too little, full Newton steps for the rest
      // of the solve; so too for the second half of the iteration budget, where they
      // converge quadratically and a frozen factor might keep contracting just enough.
      if (frozenFrom >= 0 && residual > kFrozenContraction * frozenFrom) frozenFailed = true;
      const bool frozenUsable =
          frozenAllowed && !frozenFailed && 2 * iteration < settings_.maxIterations;
      frozenFrom = -1;
      if (frozenUsable && cache_.factorized && 3 * cache_.cholesky.nodeCount() == free_.count) {
        // Modified Newton: the last factor (possibly from an earlier step) as the Hessian.
        d = cache_.solve(-g);
        if (d.allFinite()) {
          if (d.lpNorm<Eigen::Infinity>() <= settings_.stepTolerance * lengthScale) {
            for (size_t k = 0; k < dofs; ++k) {
              if (free_.index[k] >= 0) x[k] += d[free_.index[k]];
            }
            known.valid = false;
            ++report.frozenIterations;
            report.converged = true;
            return report;
          }
          if (lineSearch(x, trial, d, phi, scale, g.dot(d), known) > 0) {
            ++report.frozenIterations;
            frozenFrom = residual;
            continue;
          }
        }
        frozenFailed = true;
      }
      assemble(x);
      const double forcing = std::min(0.1, residual);
      // Levenberg-Marquardt-like memory: start below the shift the last iteration needed.
      double tau = previousTau / kShiftGrowth >= initialShift() ? previousTau / kShiftGrowth : 0.0;
      for (int32_t shift = 0;; ++shift) {
        // With frozen iterations, the factor is refreshed here rather than used to
        // precondition: it was found too far from the Hessian.
        tau = direction(g, tau, forcing, !frozenAllowed, d, report);
        if (tau == 0 && d.lpNorm<Eigen::Infinity>() <= settings_.stepTolerance * lengthScale) {
          // An unshifted Newton step at the rounding level of the positions: the residual
          // is at its rounding floor (stiff materials) and Phi cannot resolve the step.
          for (size_t k = 0; k < dofs; ++k) {
            if (free_.index[k] >= 0) x[k] += d[free_.index[k]];
          }
          known.valid = false;
          report.converged = true;
          return report;
        }
        if (lineSearch(x, trial, d, phi, scale, g.dot(d), known) > 0) break;
        if (shift == settings_.maxShifts) {
          fail("the line search found no decrease of the incremental potential", iteration);
        }
        tau = std::max(kShiftGrowth * tau, initialShift());
      }
      previousTau = tau;
      if (tau > 0) ++report.shiftedIterations;
    }
  }

 private:
  // alpha/2 |x - y|_M^2 - f.x over free dofs; *scale gets the sum of magnitudes of its terms.
  double extraTerms(std::span<const double> x, double* scale) const {
    double inertia = 0, work = 0, workScale = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      if (free_.index[k] < 0) continue;
      const double m = mass_[k / 3];
      if (potential_.alpha > 0) {
        const double dx = x[k] - potential_.target[k];
        inertia += m * dx * dx;
      }
      if (!potential_.force.empty()) {
        work += potential_.force[k] * x[k];
        workScale += std::abs(potential_.force[k] * x[k]);
      }
    }
    inertia *= 0.5 * potential_.alpha;
    *scale = inertia + workScale;
    return inertia - work;
  }

  double extraGradient(std::span<const double> x, size_t k) const {
    double g = 0;
    if (potential_.alpha > 0) g += potential_.alpha * mass_[k / 3] * (x[k] - potential_.target[k]);
    if (!potential_.force.empty()) g -= potential_.force[k];
    return g;
  }

  // Hess Phi on the free dofs into cache_.matrix; the layout and the symbolic
  // factorization are redone only when the topology or the free dofs changed.
  void assemble(std::span<const double> x) {
    if (!assembleBlocks(x)) {
      throw InputError(bodyLabel(body_) + ": the model '" + body_.model->name() +
                       "' has no Hessian; implicit integration needs one");
    }
    finishAssembly();
  }

  // The diagonal and mass vectors of the shift, and the symbolic factorization when the
  // pattern changed.
  void finishAssembly() {
    const SparseMatrix& H = cache_.matrix;
    diagonalMass_.resize(free_.count);
    baseDiagonal_.resize(free_.count);
    for (size_t k = 0; k < free_.index.size(); ++k) {
      const int f = free_.index[k];
      if (f < 0) continue;
      diagonalMass_[f] = mass_[k / 3];
      baseDiagonal_[f] = H.valuePtr()[cache_.diagonal[static_cast<size_t>(f)]];
    }
    if (free_.count > settings_.directMaxDofs) return;
    if (cache_.analyzedLayout != cache_.layout) {
      cache_.analyze();
      cache_.analyzedLayout = cache_.layout;
    }
  }

  // Hess Phi from Model::hessianBlocks into the cached layout, in parallel over column
  // nodes, each matrix block summed in a fixed order (deterministic for any thread count).
  // Returns false if the model offers no blocks.
  bool assembleBlocks(std::span<const double> x) {
    const uint64_t topology = body_.model->topologyVersion();
    const bool layoutValid =
        cache_.layoutValid && cache_.layoutTopology == topology &&
        cache_.freeIndex.size() == free_.index.size() &&
        std::equal(free_.index.begin(), free_.index.end(), cache_.freeIndex.begin());
    if (!layoutValid && !buildBlockLayout(topology)) return false;
    if (!body_.model->hessianBlocks(x, cache_.blockValues)) return false;
    double* values = cache_.matrix.valuePtr();
    const double* source = cache_.blockValues.data();
    const auto freeNodes = cache_.columnBlockOffsets.size() - 1;
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, freeNodes, 64), [&](const tbb::blocked_range<size_t>& r) {
          for (size_t column = r.begin(); column != r.end(); ++column) {
            for (auto k = static_cast<size_t>(cache_.columnBlockOffsets[column]);
                 k < static_cast<size_t>(cache_.columnBlockOffsets[column + 1]); ++k) {
              double sum[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
              for (auto c = static_cast<size_t>(cache_.contributionOffsets[k]);
                   c < static_cast<size_t>(cache_.contributionOffsets[k + 1]); ++c) {
                const double* block = source + 9 * static_cast<size_t>(cache_.contributions[c]);
                for (int e = 0; e < 9; ++e) sum[e] += block[e];
              }
              for (int j = 0; j < 3; ++j) {
                double* out = values + cache_.blockSlots[3 * k + static_cast<size_t>(j)];
                for (int i = 0; i < 3; ++i) out[i] = sum[3 * i + j];
              }
            }
          }
        });
    for (size_t k = 0; k < free_.index.size(); ++k) {
      const int f = free_.index[k];
      if (f >= 0)
        values[cache_.diagonal[static_cast<size_t>(f)]] += potential_.alpha * mass_[k / 3];
    }
    return true;
  }

  // The block layout for the model's current topology and the free dofs: the matrix
  // pattern (every free node's diagonal block included, so that tau M can be added in
  // place), block slots and contribution lists. Returns false if the model has no blocks.
  bool buildBlockLayout(uint64_t topology) {
    cache_.layoutValid = false;
    const std::vector<int32_t> pairs = body_.model->hessianBlockNodes();
    if (pairs.empty()) return false;
    const size_t modelBlocks = pairs.size() / 2;
    // Free node index of each node (all three dofs of a node are free or pinned together).
    const size_t nodes = free_.index.size() / 3;
    std::vector<int32_t> freeNode(nodes, -1);
    int32_t freeNodes = 0;
    for (size_t i = 0; i < nodes; ++i) {
      if (free_.index[3 * i] >= 0) freeNode[i] = freeNodes++;
    }
    // (column, row, model block) of every free-free block, plus the diagonal blocks.
    struct Entry {
      int32_t column, row, block;
    };
    std::vector<Entry> entries;
    entries.reserve(modelBlocks + static_cast<size_t>(freeNodes));
    for (size_t t = 0; t < modelBlocks; ++t) {
      const int32_t row = freeNode[static_cast<size_t>(pairs[2 * t])];
      const int32_t column = freeNode[static_cast<size_t>(pairs[2 * t + 1])];
      if (row >= 0 && column >= 0) entries.push_back({column, row, static_cast<int32_t>(t)});
    }
    for (int32_t f = 0; f < freeNodes; ++f) entries.push_back({f, f, -1});
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.column != b.column ? a.column < b.column
                                  : (a.row != b.row ? a.row < b.row : a.block < b.block);
    });
    cache_.columnBlockOffsets.assign(static_cast<size_t>(freeNodes) + 1, 0);
    cache_.contributionOffsets.assign(1, 0);
    cache_.contributions.clear();
    std::vector<int32_t>& blockRow = cache_.blockRow;
    blockRow.clear();
    for (size_t e = 0; e < entries.size(); ++e) {
      const bool newBlock = e == 0 || entries[e].column != entries[e - 1].column ||
                            entries[e].row != entries[e - 1].row;
      if (newBlock) {
        if (e > 0)
          cache_.contributionOffsets.push_back(static_cast<int32_t>(cache_.contributions.size()));
        blockRow.push_back(entries[e].row);
        ++cache_.columnBlockOffsets[static_cast<size_t>(entries[e].column) + 1];
      }
      if (entries[e].block >= 0) cache_.contributions.push_back(entries[e].block);
    }
    cache_.contributionOffsets.push_back(static_cast<int32_t>(cache_.contributions.size()));
    for (size_t f = 0; f < static_cast<size_t>(freeNodes); ++f) {
      cache_.columnBlockOffsets[f + 1] += cache_.columnBlockOffsets[f];
    }
    // The scalar pattern: column 3b' + j holds rows 3a' + i of its column node's blocks.
    const auto matrixBlocks = blockRow.size();
    SparseMatrix& H = cache_.matrix;
    H.resize(free_.count, free_.count);
    H.resizeNonZeros(static_cast<Eigen::Index>(9 * matrixBlocks));
    int* outer = H.outerIndexPtr();
    int* inner = H.innerIndexPtr();
    cache_.blockSlots.resize(3 * matrixBlocks);
    int slot = 0;
    for (size_t f = 0; f < static_cast<size_t>(freeNodes); ++f) {
      for (int j = 0; j < 3; ++j) {
        outer[3 * f + static_cast<size_t>(j)] = slot;
        for (auto k = static_cast<size_t>(cache_.columnBlockOffsets[f]);
             k < static_cast<size_t>(cache_.columnBlockOffsets[f + 1]); ++k) {
          cache_.blockSlots[3 * k + static_cast<size_t>(j)] = slot;
          for (int i = 0; i < 3; ++i) inner[slot++] = 3 * blockRow[k] + i;
        }
      }
    }
    outer[free_.count] = slot;
    std::fill(H.valuePtr(), H.valuePtr() + slot, 0.0);
    cache_.diagonal.resize(static_cast<size_t>(free_.count));
    for (size_t f = 0; f < static_cast<size_t>(freeNodes); ++f) {
      for (auto k = static_cast<size_t>(cache_.columnBlockOffsets[f]);
           k < static_cast<size_t>(cache_.columnBlockOffsets[f + 1]); ++k) {
        if (blockRow[k] != static_cast<int32_t>(f)) continue;
        for (int j = 0; j < 3; ++j)
          cache_.diagonal[3 * f + static_cast<size_t>(j)] =
              cache_.blockSlots[3 * k + static_cast<size_t>(j)] + j;
      }
    }
    cache_.blockValues.resize(9 * modelBlocks);
    cache_.freeIndex = free_.index;
    cache_.layoutTopology = topology;
    cache_.layoutValid = true;
    ++cache_.layout;
    return true;
  }

  // tau_0 = max(alpha, 1e-4 max_i K_ii / m_i).
  double initialShift() const {
    double stiffest = 0;
    for (Eigen::Index f = 0; f < baseDiagonal_.size(); ++f) {
      stiffest = std::max(stiffest, (baseDiagonal_[f] / diagonalMass_[f]) - potential_.alpha);
    }
    const double tau = std::max(potential_.alpha, 1e-4 * stiffest);
    return tau > 0 ? tau : 1.0;
  }

  void setShift(double tau) {
    double* values = cache_.matrix.valuePtr();
    for (Eigen::Index f = 0; f < baseDiagonal_.size(); ++f) {
      values[cache_.diagonal[static_cast<size_t>(f)]] = baseDiagonal_[f] + tau * diagonalMass_[f];
    }
  }

  // Solves (H + tau M) d = -g, raising tau from `tau` until the factorization succeeds;
  // returns the tau used.
  double direction(const Vector& g, double tau, double forcing, bool mayReuse, Vector& d,
                   NewtonReport& report) {
    if (free_.count > settings_.directMaxDofs) {
      setShift(tau);
      const Vector inverseDiagonal = jacobi();
      report.linearIterations += conjugateGradient(
          g, forcing, settings_.maxLinearIterations, true,
          [&](const Vector& r) -> Vector { return inverseDiagonal.cwiseProduct(r); }, d);
      return tau;
    }
    if (mayReuse && settings_.reuseFactorization && cache_.factorized) {
      // The last factor (of an earlier iteration or step) preconditions CG on the current
      // system; refactorize only if that takes too long or meets negative curvature.
      setShift(tau);
      const int64_t used = conjugateGradient(
          g, forcing, settings_.maxReuseIterations, false,
          [&](const Vector& r) -> Vector { return cache_.solve(r); }, d);
      report.linearIterations += std::abs(used);
      if (used > 0 && d.allFinite()) return tau;
    }
    for (int32_t shift = 0;; ++shift) {
      setShift(tau);
      cache_.factorize();
      ++report.factorizations;
      if (cache_.factorized) {
        d = cache_.solve(-g);
        if (d.allFinite()) return tau;
        cache_.factorized = false;
      }
      if (shift == settings_.maxShifts) {
        std::ostringstream msg;
        msg << "the Newton system is not positive definite even with a mass shift of " << tau
            << " 1/s^2";
        fail(msg.str(), report.iterations);
      }
      tau = tau > 0 ? kShiftGrowth * tau : initialShift();
    }
  }

  // Inverse of diag(H), or 1/m where it is not positive.
  Vector jacobi() const {
    Vector inverseDiagonal(free_.count);
    for (Eigen::Index f = 0; f < inverseDiagonal.size(); ++f) {
      const double diag = cache_.matrix.valuePtr()[cache_.diagonal[static_cast<size_t>(f)]];
      inverseDiagonal[f] = diag > 0 ? 1.0 / diag : 1.0 / diagonalMass_[f];
    }
    return inverseDiagonal;
  }

  // Preconditioned CG on H d = -g to relative residual `forcing`. At non-positive
  // curvature it truncates (Steihaug): with `truncate`, it returns the iterate so far (or
  // the preconditioned gradient on the first iteration), both descent directions;
  // without, it gives up. Returns the iterations taken, negated when it gave up or hit
  // `maxIterations` without `truncate`.
  template <class Preconditioner>
  int64_t conjugateGradient(const Vector& g, double forcing, int64_t maxIterations, bool truncate,
                            const Preconditioner& precondition, Vector& d) const {
    const SparseMatrix& H = cache_.matrix;
    d.setZero();
    Vector r = -g;
    Vector z = precondition(r);
    Vector p = z;
    Vector q(free_.count);
    double rz = r.dot(z);
    const double stop = forcing * g.norm();
    for (int64_t iteration = 0; iteration < maxIterations; ++iteration) {
      q.noalias() = H * p;
      const double curvature = p.dot(q);
      if (!(curvature > 0)) {
        if (!truncate) return -(iteration + 1);
        if (iteration == 0) d = z;  // preconditioned steepest descent
        return iteration + 1;
      }
      const double step = rz / curvature;
      d += step * p;
      r -= step * q;
      if (r.norm() <= stop) return iteration + 1;
      z = precondition(r);
      const double rzNext = r.dot(z);
      p = z + (rzNext / rz) * p;
      rz = rzNext;
    }
    return truncate ? maxIterations : -maxIterations;
  }

  // Backtracking on Phi along d from x (prepared state held fixed); on success x moves.
  // Returns the step length taken, or 0 if none decreased Phi. The full step's trial is
  // evaluated with its gradient (at the cost of an energy: the models' passes are the
  // same), so that when it is accepted `known` holds the gradient at the new x.
  double lineSearch(std::vector<double>& x, std::vector<double>& trial, const Vector& d, double phi,
                    double scale, double slope, KnownGradient& known) {
    if (!(slope < 0)) return 0;
    const bool unresolvable = -slope <= kResolvableDecrease * (std::abs(phi) + scale);
    double step = 1;
    for (int halving = 0; halving <= kMaxHalvings; ++halving, step *= 0.5) {
      trial = x;
      for (size_t k = 0; k < x.size(); ++k) {
        const int f = free_.index[k];
        if (f >= 0) trial[k] += step * d[f];
      }
      if (unresolvable) {
        x.swap(trial);
        known.valid = false;
        return step;
      }
      EnergyParts elastic;
      if (halving == 0) {
        trialGradient_.assign(x.size(), 0.0);
        elastic = body_.model->addGradient(trial, trialGradient_);
      } else {
        elastic = body_.model->energy(trial);
      }
      double trialScale = 0;
      const double trialPhi = elastic.total() + extraTerms(trial, &trialScale);
      if (std::isfinite(trialPhi) && trialPhi <= phi + kArmijo * step * slope) {
        x.swap(trial);
        known.valid = halving == 0;
        if (known.valid) {
          known.gradient.swap(trialGradient_);
          known.energy = elastic;
        }
        return step;
      }
    }
    return 0;
  }

  [[noreturn]] void fail(const std::string& what, int32_t iteration) const {
    std::ostringstream msg;
    msg << bodyLabel(body_) << ": " << what << " (Newton iteration " << iteration
        << ", t = " << time_ << " s)";
    throw NumericalError(msg.str());
  }

  Body& body_;
  const Potential& potential_;
  const NewtonSettings& settings_;
  LinearSolverCache& cache_;
  double time_;
  FreeDofs free_;
  std::span<const double> mass_;
  Vector diagonalMass_, baseDiagonal_;  // (nFree): m, and diag(H) without shift
  std::vector<double> trialGradient_;   // (nNodes, 3), the line search's full-step gradient
};

void throwNotConverged(const Body& body, const NewtonReport& report, const NewtonSettings& settings,
                       double time, const char* hint = "try a smaller time step") {
  std::ostringstream msg;
  msg << bodyLabel(body) << ": Newton's method did not converge in " << settings.maxIterations
      << " iterations (relative residual " << report.residual << " > tolerance "
      << settings.tolerance << ") at t = " << time << " s; " << hint;
  throw NumericalError(msg.str());
}

// |grad E(x)| over free dofs, from the accelerations computeAccelerations left:
// dE/dx = m (g - a).
double elasticForceNorm(const Body& body, const Vec3& gravity) {
  const auto mass = body.model->nodeMasses();
  double sum = 0;
  for (size_t i = 0; i < mass.size(); ++i) {
    if (body.pinned[i]) continue;
    for (int c = 0; c < 3; ++c) {
      const double f = mass[i] * (gravity[c] - body.accelerations[3 * i + c]);
      sum += f * f;
    }
  }
  return std::sqrt(sum);
}

}  // namespace

void validate(const ImplicitSettings& s) {
  std::ostringstream msg;
  if (!(s.beta >= 0 && s.beta <= 0.5))
    msg << "newmark beta = " << s.beta << ": must be in [0, 0.5]";
  if (!(s.gamma >= 0.5 && s.gamma <= 1))
    msg << "newmark gamma = " << s.gamma << ": must be in [0.5, 1]";
  if (!(s.newton.tolerance > 0))
    msg << "newton tolerance = " << s.newton.tolerance << ": must be > 0";
  if (s.newton.maxIterations < 1)
    msg << "newton max_iterations = " << s.newton.maxIterations << ": must be >= 1";
  if (s.newton.maxLinearIterations < 1)
    msg << "newton max_linear_iterations = " << s.newton.maxLinearIterations << ": must be >= 1";
  if (s.newton.maxReuseIterations < 1)
    msg << "newton max_reuse_iterations = " << s.newton.maxReuseIterations << ": must be >= 1";
  if (!(s.newton.stepTolerance >= 0))
    msg << "newton step_tolerance = " << s.newton.stepTolerance << ": must be >= 0";
  if (s.newton.maxShifts < 0)
    msg << "newton max_shifts = " << s.newton.maxShifts << ": must be >= 0";
  if (!msg.str().empty()) throw InputError(msg.str());
}

int32_t ImplicitStepReport::maxIterations() const {
  int32_t most = 0;
  for (const NewtonReport& r : bodies) most = std::max(most, r.iterations);
  return most;
}

int32_t ImplicitStepReport::totalIterations() const {
  int32_t total = 0;
  for (const NewtonReport& r : bodies) total += r.iterations;
  return total;
}

ImplicitStepper::ImplicitStepper(const ImplicitSettings& settings) : settings_(settings) {
  validate(settings_);
}
ImplicitStepper::ImplicitStepper(ImplicitStepper&&) noexcept = default;
ImplicitStepper& ImplicitStepper::operator=(ImplicitStepper&&) noexcept = default;
ImplicitStepper::~ImplicitStepper() = default;

void ImplicitStepper::dropCaches() {
  caches_.clear();
}

ImplicitStepReport ImplicitStepper::step(World& world, double dt, PhaseTimes& times) {
  ImplicitStepReport report = propose(world, dt, times);
  updateInelastic(world, dt, times);
  return report;
}

ImplicitStepReport ImplicitStepper::propose(World& world, double dt, PhaseTimes& times) {
  if (!(dt > 0) || !std::isfinite(dt)) {
    std::ostringstream msg;
    msg << "implicit step: time step " << dt << " s must be positive and finite";
    throw InputError(msg.str());
  }
  const bool newmark = settings_.scheme == ImplicitScheme::kNewmark;
  const bool explicitNewmark = newmark && settings_.beta == 0;
  const double beta = settings_.beta, gamma = settings_.gamma;
  while (caches_.size() < world.bodies.size()) {
    caches_.push_back(std::make_unique<LinearSolverCache>());
  }
  ImplicitStepReport report;
  report.bodies.resize(world.bodies.size());
  // Per body: the predicted velocity vt (Newmark), needed after the solve.
  std::vector<std::vector<double>> predictedVelocity(world.bodies.size());
  // Per body: the elastic gradient at the solution, reused for the accelerations.
  std::vector<KnownGradient> knownGradients(world.bodies.size());
  {
    PhaseTimer timer(times.integrate);
    const Vec3 g = world.gravity;
    std::vector<std::vector<double>> start(world.bodies.size());
    for (size_t b = 0; b < world.bodies.size(); ++b) start[b] = world.bodies[b].positions;
    const double startTime = world.time;
    world.time += dt;
    applyScriptedMotion(world);
    for (size_t b = 0; b < world.bodies.size(); ++b) {
      Body& body = world.bodies[b];
      const auto mass = body.model->nodeMasses();
      const std::vector<double>& x0 = start[b];
      const std::vector<double>& v0 = body.velocities;  // free nodes still at t
      const double c = body.damping;
      const size_t n = static_cast<size_t>(body.nodeCount());
      Potential potential;
      potential.target.assign(3 * n, 0.0);
      std::vector<double>& vt = predictedVelocity[b];
      vt.assign(3 * n, 0.0);
      std::vector<double> predictor(3 * n);  // xt (Newmark) or x + h v (Euler)
      std::vector<double> guess(3 * n);      // constant-acceleration guess
      for (size_t i = 0; i < n; ++i) {
        if (body.pinned[i]) continue;
        for (size_t k = 3 * i; k < 3 * i + 3; ++k) {
          const double a = body.accelerations[k] - c * v0[k];
          if (newmark) {
            predictor[k] = x0[k] + dt * v0[k] + dt * dt * (0.5 - beta) * a;
            vt[k] = v0[k] + dt * (1 - gamma) * a;
            guess[k] = x0[k] + dt * v0[k] + 0.5 * dt * dt * a;
          } else {
            predictor[k] = x0[k] + dt * v0[k];
            guess[k] = predictor[k] + dt * dt * a;
          }
        }
      }
      if (explicitNewmark) {
        for (size_t i = 0; i < n; ++i) {
          if (body.pinned[i]) continue;
          for (size_t k = 3 * i; k < 3 * i + 3; ++k) body.positions[k] = predictor[k];
        }
        report.bodies[b].converged = true;
        continue;
      }
      potential.alpha =
          newmark ? (1 + c * gamma * dt) / (beta * dt * dt) : (1 + c * dt) / (dt * dt);
      double inertialScale = 0;
      for (size_t i = 0; i < n; ++i) {
        if (body.pinned[i]) continue;
        for (size_t k = 3 * i; k < 3 * i + 3; ++k) {
          // Loads as evaluated at the step's start (explicit in the load).
          const double gk = g[static_cast<Eigen::Index>(k - 3 * i)] +
                            (body.externalForces.empty() ? 0.0 : body.externalForces[k] / mass[i]);
          potential.target[k] = newmark ? predictor[k] + (gk - c * vt[k]) / potential.alpha
                                        : x0[k] + (dt * v0[k] + dt * dt * gk) / (1 + c * dt);
          const double f = potential.alpha * mass[i] * (x0[k] - potential.target[k]);
          inertialScale += f * f;
        }
      }
      const double forceScale = std::sqrt(inertialScale) + elasticForceNorm(body, g);
      // Start from the better of the constant-acceleration guess and the inertial target y
      // (the state prepared at x0 is held while choosing). y, where the step would end
      // without elastic forces, differs from the zero-acceleration guess x + h v only by
      // the loads' O(h^2) fall, so that guess is not evaluated separately. Each is evaluated with
      // its gradient, for the cost of its energy, and Newton starts with the best one's.
      double best = std::numeric_limits<double>::infinity();
      std::vector<double> candidate = body.positions;  // pinned dofs at their targets
      KnownGradient& known = knownGradients[b];
      known.valid = false;
      std::vector<double> candidateGradient(3 * n);
      for (const std::vector<double>* source : {&guess, &potential.target}) {
        for (size_t i = 0; i < n; ++i) {
          if (body.pinned[i]) continue;
          for (size_t k = 3 * i; k < 3 * i + 3; ++k) candidate[k] = (*source)[k];
        }
        double inertia = 0;
        for (size_t k = 0; k < 3 * n; ++k) {
          if (body.pinned[k / 3]) continue;
          const double dx = candidate[k] - potential.target[k];
          inertia += mass[k / 3] * dx * dx;
        }
        std::fill(candidateGradient.begin(), candidateGradient.end(), 0.0);
        const EnergyParts elastic = body.model->addGradient(candidate, candidateGradient);
        const double phi = 0.5 * potential.alpha * inertia + elastic.total();
        if (phi < best) {
          best = phi;
          body.positions = candidate;
          known.gradient.swap(candidateGradient);
          candidateGradient.resize(3 * n);
          known.energy = elastic;
          known.valid = true;
        }
      }
      NewtonSolver solver(body, potential, settings_.newton, *caches_[b], startTime);
      report.bodies[b] = solver.solve(forceScale, known);
      if (!report.bodies[b].converged)
        throwNotConverged(body, report.bodies[b], settings_.newton, startTime);
      for (size_t i = 0; i < n; ++i) {
        if (body.pinned[i]) continue;
        for (size_t k = 3 * i; k < 3 * i + 3; ++k) {
          if (newmark) {
            const double a = (body.positions[k] - predictor[k]) / (beta * dt * dt);
            body.velocities[k] = vt[k] + gamma * dt * a;
          } else {
            body.velocities[k] = (body.positions[k] - x0[k]) / dt;
          }
        }
      }
    }
  }
  {
    PhaseTimer timer(times.contact);
    // A node in contact was projected out of its obstacle (it moved): its body's gradient
    // must be recomputed.
    if (projectOutOfObstacles(world) > 0) {
      for (size_t b = 0; b < world.bodies.size(); ++b) {
        const std::vector<int32_t>& contact = world.bodies[b].contactObstacle;
        if (std::any_of(contact.begin(), contact.end(), [](int32_t o) { return o >= 0; }))
          knownGradients[b].valid = false;
      }
    }
  }
  {
    PhaseTimer timer(times.forces);
    computeAccelerations(world, knownGradients);
  }
  if (explicitNewmark) {
    PhaseTimer timer(times.integrate);
    // (1 + c gamma h) a+ = a(x+) - c vt,  v+ = vt + gamma h a+.
    for (size_t b = 0; b < world.bodies.size(); ++b) {
      Body& body = world.bodies[b];
      const double c = body.damping;
      for (size_t i = 0; i < static_cast<size_t>(body.nodeCount()); ++i) {
        if (body.pinned[i]) continue;
        for (size_t k = 3 * i; k < 3 * i + 3; ++k) {
          const double vt = predictedVelocity[b][k];
          const double a = (body.accelerations[k] - c * vt) / (1 + c * gamma * dt);
          body.velocities[k] = vt + gamma * dt * a;
        }
      }
    }
  }
  {
    PhaseTimer timer(times.contact);
    applyContactVelocities(world);
  }
  {
    PhaseTimer timer(times.checks);
    checkState(world);
  }
  return report;
}

namespace {

// |dE/dx(x) - f| over free dofs at the body's positions, divided by the force scale F.
// The gradient is taken from `known` where a Newton solve left it valid there, else
// evaluated (and kept in `known`).
double staticResidual(const Body& body, const Potential& potential, double forceScale,
                      KnownGradient& known) {
  if (!known.valid) {
    known.gradient.assign(body.positions.size(), 0.0);
    known.energy = body.model->addGradient(body.positions, known.gradient);
    known.valid = true;
  }
  double sum = 0;
  for (size_t k = 0; k < known.gradient.size(); ++k) {
    if (body.pinned[k / 3]) continue;
    const double r = known.gradient[k] - potential.force[k];
    sum += r * r;
  }
  return std::sqrt(sum) / forceScale;
}

// Static equilibrium where Newton from the start makes no progress: a body that is a
// mechanism under its load (a membrane under a transverse load can only hang; its flat
// start has no transverse stiffness, and the shift tau M that makes the system solvable is
// set by the in-plane stiffness, so each Newton step barely moves it). Pseudo-transient
// continuation (Kelley and Keyes 1998): a sequence of implicit steps of
//   Phi_k(x) = alpha_k/2 (x - x_k)^T M (x - x_k) + E(x) - f.x,
// each a well-posed minimization, with alpha_0 such that the load alone moves no node more
// than 5% of the body's size in one step, and alpha_{k+1} = alpha_k r_{k+1} / (2 r_k)
// (switched evolution relaxation, halved: the pseudo step grows as the residual r falls,
// and also while it falls slowly, as when a mechanism swings into place); a step whose
// Newton solve does not converge is retried with 4 alpha. Once r is below 100 tolerances,
// Newton on the static potential (alpha = 0) finishes from there. Measured on
// scenes/static_cantilever.json as mass-spring (it hangs: -u/L = w/L = 1.000): k = 10 in
// 10 increments 0.8 s, in 1 increment 0.2 s; k = 1 in 1 increment 0.7 s, but in 10
// increments (a tenth of the load, little tension to swing it) the first increment does not
// converge within kMaxPseudoSteps (10 s): alpha cycles between a step too long for the
// inner Newton and one too short to move. A limit, reported as a non-convergence.
NewtonReport pseudoTransientContinuation(Body& body, const Potential& potential,
                                         const NewtonSettings& settings, double forceScale,
                                         double time, int32_t iterationsSoFar) {
  constexpr int kMaxPseudoSteps = 400;
  NewtonReport report;
  report.iterations = iterationsSoFar;
  const auto mass = body.model->nodeMasses();
  const size_t n = mass.size();
  double fastest = 0;  // max |f_i| / m_i over free nodes, m/s^2
  for (size_t i = 0; i < n; ++i) {
    if (body.pinned[i]) continue;
    const double f = std::sqrt(potential.force[3 * i] * potential.force[3 * i] +
                               potential.force[3 * i + 1] * potential.force[3 * i + 1] +
                               potential.force[3 * i + 2] * potential.force[3 * i + 2]);
    fastest = std::max(fastest, f / mass[i]);
  }
  const double size = boundsDiagonal(body.positions);
  if (!(fastest > 0) || !(size > 0)) return report;
  double alpha = fastest / (0.05 * size);
  NewtonSettings inner = settings;
  inner.frozenHessian = false;
  Potential step = potential;
  KnownGradient known;  // dE/dx at the body's positions, when valid
  double residual = staticResidual(body, potential, forceScale, known);
  LinearSolverCache cache;
  for (int k = 0; k < kMaxPseudoSteps && residual > 100 * settings.tolerance; ++k) {
    const std::vector<double> from = body.positions;
    const KnownGradient atFrom = known;
    step.alpha = alpha;
    step.target = from;
    NewtonSolver solver(body, step, inner, cache, time);
    const NewtonReport r = solver.solve(forceScale, known);
    report.iterations += r.iterations;
    report.factorizations += r.factorizations;
    if (!r.converged) {
      body.positions = from;
      known = atFrom;
      alpha *= 4;
      continue;
    }
    const double next = staticResidual(body, potential, forceScale, known);
    alpha *= 0.5 * std::clamp(next / residual, 0.1, 2.0);
    residual = next;
  }
  NewtonSolver finish(body, potential, settings, cache, time);
  const NewtonReport last = finish.solve(forceScale, known);
  report.iterations += last.iterations;
  report.factorizations += last.factorizations;
  report.converged = last.converged;
  report.residual = last.residual;
  report.residuals = last.residuals;
  return report;
}

}  // namespace

std::vector<NewtonReport> solveStaticEquilibrium(
    World& world, const NewtonSettings& settings,
    std::span<const std::vector<double>> externalForces) {
  ImplicitSettings check;
  check.newton = settings;
  validate(check);
  applyScriptedMotion(world);
  std::vector<NewtonReport> reports(world.bodies.size());
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    Body& body = world.bodies[b];
    const auto mass = body.model->nodeMasses();
    const size_t n = static_cast<size_t>(body.nodeCount());
    Potential potential;
    potential.force.assign(3 * n, 0.0);
    const bool hasLoad = b < externalForces.size() && !externalForces[b].empty();
    if (hasLoad && externalForces[b].size() != 3 * n) {
      throw InputError(bodyLabel(body) + ": external forces must have shape (nNodes, 3)");
    }
    for (size_t k = 0; k < 3 * n; ++k) {
      potential.force[k] = mass[k / 3] * world.gravity[static_cast<Eigen::Index>(k % 3)] +
                           (hasLoad ? externalForces[b][k] : 0.0);
    }
    // F = |f| + |dE/dx(x0)| over free dofs.
    body.model->prepare(body.positions);
    std::vector<double> gradient(3 * n, 0.0);
    const EnergyParts startEnergy = body.model->addGradient(body.positions, gradient);
    double load = 0, elastic = 0;
    for (size_t k = 0; k < 3 * n; ++k) {
      if (body.pinned[k / 3]) continue;
      load += potential.force[k] * potential.force[k];
      elastic += gradient[k] * gradient[k];
    }
    LinearSolverCache cache;
    NewtonSolver solver(body, potential, settings, cache, world.time);
    KnownGradient known;
    known.gradient = std::move(gradient);  // at the start
    known.energy = startEnergy;
    known.valid = true;
    const std::vector<double> start = body.positions;
    const double forceScale = std::sqrt(load) + std::sqrt(elastic);
    reports[b] = solver.solve(forceScale, known);
    if (!reports[b].converged) {
      body.positions = start;
      reports[b] = pseudoTransientContinuation(body, potential, settings, forceScale, world.time,
                                               reports[b].iterations);
    }
    if (!reports[b].converged) {
      throwNotConverged(body, reports[b], settings, world.time,
                        "try more load increments or newton_max_iterations");
    }
    for (size_t i = 0; i < n; ++i) {
      if (body.pinned[i]) continue;
      for (size_t k = 3 * i; k < 3 * i + 3; ++k) body.velocities[k] = 0;
    }
  }
  computeAccelerations(world);
  checkState(world);
  return reports;
}

}  // namespace shellsim
