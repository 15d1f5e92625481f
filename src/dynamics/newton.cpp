#include "dynamics/newton.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "shellsim/errors.hpp"

namespace shellsim {
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

// The free node index of each node, -1 for pinned ones (all three dofs of a node are free
// or pinned together); *count gets the number of free nodes.
std::vector<int32_t> freeNodeIndices(const FreeDofs& free, int32_t* count) {
  const size_t nodes = free.index.size() / 3;
  std::vector<int32_t> freeNode(nodes, -1);
  *count = 0;
  for (size_t i = 0; i < nodes; ++i) {
    if (free.index[3 * i] >= 0) freeNode[i] = (*count)++;
  }
  return freeNode;
}

}  // namespace

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

std::string labelOf(const Body& body) {
  return "body '" + body.name + "'";
}

void QuasiNewtonHistory::start(std::span<const double> x, const std::vector<int>& freeIndex,
                               const Vector& g) {
  if (capacity_ == 0) return;
  startX_.resize(g.size());
  for (size_t k = 0; k < freeIndex.size(); ++k) {
    if (freeIndex[k] >= 0) startX_[freeIndex[k]] = x[k];
  }
  startG_ = g;
  pending = true;
}

void QuasiNewtonHistory::record(std::span<const double> x, const std::vector<int>& freeIndex,
                                const Vector& g) {
  pending = false;
  Vector s(g.size());
  for (size_t k = 0; k < freeIndex.size(); ++k) {
    if (freeIndex[k] >= 0) s[freeIndex[k]] = x[k] - startX_[freeIndex[k]];
  }
  Vector y = g - startG_;
  const double curvature = s.dot(y);
  if (!(curvature > 0) || !std::isfinite(curvature)) return;
  if (s_.size() == capacity_) {
    s_.erase(s_.begin());
    y_.erase(y_.begin());
    rho_.erase(rho_.begin());
  }
  s_.push_back(std::move(s));
  y_.push_back(std::move(y));
  rho_.push_back(1 / curvature);
}

NewtonReport NewtonSolver::solve(double forceScale, KnownGradient& known) {
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
  double frozenStep = 0;      // the line search's step length of the last frozen iteration
  // L-BFGS pairs of this solve's iterations without a fresh factor (quasiNewton only); they
  // hold whichever initial inverse Hessian is applied (the Laplacian stand-in, then the
  // frozen factor).
  QuasiNewtonHistory history(settings_.quasiNewton ? settings_.quasiNewtonPairs : 0);
  bool laplacianPhase = settings_.quasiNewton && potential_.alpha > 0 &&
                        free_.count <= settings_.directMaxDofs && cache_.laplacianSkip == 0;
  if (settings_.quasiNewton && cache_.laplacianSkip > 0) --cache_.laplacianSkip;
  // The stand-in's iterations take at most half of the solve's; the rest, from
  // `fallbackFrom` on, are the factor's.
  const int32_t laplacianBudget =
      std::min(settings_.quasiNewtonBudget, settings_.maxIterations / 2);
  int32_t fallbackFrom = 0;
  for (int32_t iteration = 0;; ++iteration) {
    const bool stale = body_.model->prepare(x);
    if (!known.valid || stale) {
      std::fill(gradient.begin(), gradient.end(), 0.0);
      known.energy = body_.model->addGradient(x, gradient, workspaceOf(body_));
      known.valid = true;
    }
    const double elastic = known.energy.total();
    // The contact energy and its gradient in one pass over the pairs.
    const bool contact = hasContact();
    double contactEnergy = 0;
    if (contact) {
      contactGradient_.assign(dofs, 0.0);
      contactEnergy = contactTerms(x, contactGradient_);
    }
    double scale = 0;
    const double phi = elastic + extraTerms(x, &scale, &contactEnergy);
    scale += std::abs(elastic);
    for (size_t k = 0; k < dofs; ++k) {
      const int f = free_.index[k];
      if (f < 0) continue;
      g[f] = gradient[k] + extraGradient(x, k) + (contact ? contactGradient_[k] : 0.0);
    }
    // The last iteration's step and change of gradient: an L-BFGS pair.
    if (history.pending) history.record(x, free_.index, g);
    const double gNorm = g.norm();
    if (!std::isfinite(phi) || !std::isfinite(gNorm)) {
      fail("the incremental potential or its gradient is not finite", iteration);
    }
    const double residual = forceScale > 0 ? gNorm / forceScale : gNorm;
    report.residuals.push_back(residual);
    report.residual = residual;
    if (gNorm <= settings_.tolerance * forceScale) {
      if (laplacianPhase) cache_.laplacianFailures = 0;
      report.converged = true;
      return report;
    }
    if (iteration == settings_.maxIterations) return report;
    ++report.iterations;
    if (laplacianPhase) {
      if (iteration < laplacianBudget && buildLaplacian(x)) {
        d = history.direction(g, [&](const Vector& r) { return applyLaplacianInverse(r); });
        history.start(x, free_.index, g);
        if (d.allFinite() && lineSearch(x, trial, d, phi, scale, g.dot(d), known) > 0) {
          ++report.quasiNewtonIterations;
          continue;
        }
        history.pending = false;
      }
      // Not converged within the budget: the factor's iterations take over, and the next
      // solves skip the stand-in for 1, 2, 4, ... 64 steps while it keeps failing.
      laplacianPhase = false;
      fallbackFrom = iteration;
      cache_.laplacianSkip = 1 << std::min(cache_.laplacianFailures, 6);
      ++cache_.laplacianFailures;
    }
    // After a frozen iteration that contracted too little, full Newton steps for the rest
    // of the solve; so too for the second half of the iteration budget, where they
    // converge quadratically and a frozen factor might keep contracting just enough.
    if (frozenFrom >= 0 && residual > kFrozenContraction * frozenFrom) {
      frozenFailed = true;
      if (residual > frozenFrom && frozenStep < 1) {
        // The frozen direction overshot (the line search shortened it) and the step raised
        // the residual (Phi fell, its gradient grew): it went where the stale factor
        // misreads the curvature, and full Newton steps from there oscillated (the broken
        // crater sheet: 1e-2 -> 2e-2, then 9e-5, 8e-4, 7e-5, 3e-4, ... over 8 iterations).
        // They start from the iterate before it instead. A full frozen step that raised
        // the residual is kept: on smooth problems (bench_implicit's stiff sheets) exact
        // Newton converges from there in one iteration.
        x.swap(trial);  // the frozen step's line search left its start there
        known.valid = false;
        frozenFrom = -1;
        ++report.frozenUndone;
        continue;
      }
    }
    const bool frozenUsable =
        frozenAllowed && !frozenFailed &&
        2 * (iteration - fallbackFrom) < settings_.maxIterations - fallbackFrom;
    frozenFrom = -1;
    if (frozenUsable && cache_.factorized && 3 * cache_.cholesky.nodeCount() == free_.count) {
      // Modified Newton: the last factor (possibly from an earlier step) as the Hessian,
      // updated by the solve's L-BFGS pairs (with quasiNewton).
      d = history.direction(g, [&](const Vector& r) { return cache_.solve(r); });
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
        history.start(x, free_.index, g);
        frozenStep = lineSearch(x, trial, d, phi, scale, g.dot(d), known);
        if (frozenStep > 0) {
          ++report.frozenIterations;
          frozenFrom = residual;
          continue;
        }
        history.pending = false;
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

double NewtonSolver::extraTerms(std::span<const double> x, double* scale,
                                const double* knownContact) const {
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
  const double contact = knownContact != nullptr ? *knownContact
                         : hasContact()          ? contactTerms(x, {})
                                                 : 0.0;
  *scale = inertia + workScale + contact;
  return inertia - work + contact;
}

bool NewtonSolver::hasContact() const {
  return !potential_.contact.empty() || !potential_.obstacles.obstacles.empty();
}

double NewtonSolver::contactTerms(std::span<const double> x, std::span<double> gradient) const {
  double energy = 0;
  if (!potential_.contact.empty()) {
    energy +=
        addBodyContactGradient(potential_.contact, potential_.bodies, potential_.body, x, gradient);
  }
  if (!potential_.obstacles.obstacles.empty()) {
    energy += addObstaclePenalty(potential_.obstacles, body_, x, gradient, {});
  }
  return energy;
}

void NewtonSolver::addContactDiagonal(std::span<const double> x, std::span<double> diagonal) const {
  if (!potential_.contact.empty()) {
    addBodyContactDiagonal(potential_.contact, potential_.bodies, potential_.body, x, diagonal);
  }
  if (!potential_.obstacles.obstacles.empty()) {
    (void)addObstaclePenalty(potential_.obstacles, body_, x, {}, diagonal);
  }
}

double NewtonSolver::extraGradient(std::span<const double> x, size_t k) const {
  double g = 0;
  if (potential_.alpha > 0) g += potential_.alpha * mass_[k / 3] * (x[k] - potential_.target[k]);
  if (!potential_.force.empty()) g -= potential_.force[k];
  return g;
}

void NewtonSolver::assemble(std::span<const double> x) {
  if (!assembleBlocks(x)) {
    throw InputError(labelOf(body_) + ": the model '" + body_.model->name() +
                     "' has no Hessian; implicit integration needs one");
  }
  finishAssembly();
}

void NewtonSolver::finishAssembly() {
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

bool NewtonSolver::assembleBlocks(std::span<const double> x) {
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
    if (f >= 0) values[cache_.diagonal[static_cast<size_t>(f)]] += potential_.alpha * mass_[k / 3];
  }
  if (hasContact()) {
    contactBlocks_.assign(3 * free_.index.size(), 0.0);
    addContactDiagonal(x, contactBlocks_);
    // Into each free node's diagonal block (the layout always holds it).
    int32_t column = 0;
    for (size_t i = 0; 3 * i < free_.index.size(); ++i) {
      if (free_.index[3 * i] < 0) continue;
      const double* block = &contactBlocks_[9 * i];
      const bool any = std::any_of(block, block + 9, [](double v) { return v != 0.0; });
      if (any) {
        for (auto k = static_cast<size_t>(cache_.columnBlockOffsets[static_cast<size_t>(column)]);
             k < static_cast<size_t>(cache_.columnBlockOffsets[static_cast<size_t>(column) + 1]);
             ++k) {
          if (cache_.blockRow[k] != column) continue;
          for (int j = 0; j < 3; ++j) {
            double* out = values + cache_.blockSlots[3 * k + static_cast<size_t>(j)];
            for (int r = 0; r < 3; ++r) out[r] += block[3 * r + j];
          }
        }
      }
      ++column;
    }
  }
  return true;
}

bool NewtonSolver::buildBlockLayout(uint64_t topology) {
  cache_.layoutValid = false;
  const std::vector<int32_t> pairs = body_.model->hessianBlockNodes();
  if (pairs.empty()) return false;
  const size_t modelBlocks = pairs.size() / 2;
  int32_t freeNodes = 0;
  const std::vector<int32_t> freeNode = freeNodeIndices(free_, &freeNodes);
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

bool NewtonSolver::buildLaplacian(std::span<const double> x) {
  const uint64_t topology = body_.model->topologyVersion();
  const std::span<const double> reference = body_.model->standInPositions();
  // The model's reference changes only with its topology version (Model::standInPositions).
  const bool atReference = reference.size() == x.size();
  if (cache_.laplacianBuilt && cache_.laplacianTopology == topology &&
      cache_.laplacianAlpha == potential_.alpha && cache_.laplacianFree == free_.index &&
      cache_.laplacianAtReference == atReference) {
    return cache_.laplacianValid;
  }
  // Tried once per topology, free dofs, alpha and place of building, whether it works or not.
  cache_.laplacianBuilt = true;
  cache_.laplacianValid = false;
  cache_.laplacianTopology = topology;
  cache_.laplacianAlpha = potential_.alpha;
  cache_.laplacianFree = free_.index;
  cache_.laplacianAtReference = atReference;
  const std::vector<int32_t> pairs = body_.model->hessianBlockNodes();
  if (pairs.empty()) return false;
  std::vector<double> values(pairs.size() / 2 * 9);
  if (!body_.model->hessianBlocks(atReference ? reference : x, values)) return false;
  int32_t freeNodes = 0;
  const std::vector<int32_t> freeNode = freeNodeIndices(free_, &freeNodes);
  const size_t nodes = freeNode.size();
  std::vector<double> diagonal(static_cast<size_t>(freeNodes), 0.0);
  for (size_t i = 0; i < nodes; ++i) {
    if (freeNode[i] >= 0) diagonal[static_cast<size_t>(freeNode[i])] = potential_.alpha * mass_[i];
  }
  std::vector<Eigen::Triplet<double>> triplets;
  for (size_t t = 0; t < pairs.size() / 2; ++t) {
    const int32_t a = freeNode[static_cast<size_t>(pairs[2 * t])];
    const int32_t b = freeNode[static_cast<size_t>(pairs[2 * t + 1])];
    if (a < 0 || pairs[2 * t] == pairs[2 * t + 1]) continue;
    const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> block(&values[9 * t]);
    const double weight = -block.trace() / 3;
    if (!(weight > 0)) continue;
    diagonal[static_cast<size_t>(a)] += weight;
    if (b >= 0) triplets.emplace_back(a, b, -weight);
  }
  for (int32_t f = 0; f < freeNodes; ++f)
    triplets.emplace_back(f, f, diagonal[static_cast<size_t>(f)]);
  SparseMatrix laplacian(freeNodes, freeNodes);
  laplacian.setFromTriplets(triplets.begin(), triplets.end());
  Eigen::SimplicialLLT<SparseMatrix> factor(laplacian);
  if (factor.info() != Eigen::Success) return false;
  const SparseMatrix lower = factor.matrixL();
  cache_.laplacianOuter.assign(lower.outerIndexPtr(), lower.outerIndexPtr() + freeNodes + 1);
  cache_.laplacianInner.assign(lower.innerIndexPtr(), lower.innerIndexPtr() + lower.nonZeros());
  cache_.laplacianValues.assign(lower.valuePtr(), lower.valuePtr() + lower.nonZeros());
  const auto& permutation = factor.permutationP().indices();
  cache_.laplacianPermutation.assign(permutation.data(), permutation.data() + freeNodes);
  cache_.laplacianValid = true;
  return true;
}

Vector NewtonSolver::applyLaplacianInverse(const Vector& r) const {
  const auto freeNodes = static_cast<size_t>(r.size() / 3);
  const std::vector<int32_t>& outer = cache_.laplacianOuter;
  const std::vector<int32_t>& inner = cache_.laplacianInner;
  const std::vector<double>& value = cache_.laplacianValues;
  const std::vector<int32_t>& permutation = cache_.laplacianPermutation;
  // y = P r, then L_f z = y, L_f^T w = z (in place), then x = P^T w; a node's three
  // components side by side, padded to four so that a term is one vector multiply-add.
  std::vector<Eigen::Vector4d> v(freeNodes);
  for (size_t f = 0; f < freeNodes; ++f) {
    v[static_cast<size_t>(permutation[f])] << r.segment<3>(3 * static_cast<Eigen::Index>(f)), 0.0;
  }
  for (size_t j = 0; j < freeNodes; ++j) {
    const auto begin = static_cast<size_t>(outer[j]), end = static_cast<size_t>(outer[j + 1]);
    v[j] /= value[begin];
    const Eigen::Vector4d vj = v[j];
    for (size_t p = begin + 1; p < end; ++p) v[static_cast<size_t>(inner[p])] -= value[p] * vj;
  }
  // The back substitution's sums in two halves (even and odd entries), so that the
  // subtractions do not each wait on the one before.
  for (size_t j = freeNodes; j-- > 0;) {
    const auto begin = static_cast<size_t>(outer[j]), end = static_cast<size_t>(outer[j + 1]);
    Eigen::Vector4d even = Eigen::Vector4d::Zero(), odd = Eigen::Vector4d::Zero();
    size_t p = begin + 1;
    for (; p + 1 < end; p += 2) {
      even += value[p] * v[static_cast<size_t>(inner[p])];
      odd += value[p + 1] * v[static_cast<size_t>(inner[p + 1])];
    }
    if (p < end) even += value[p] * v[static_cast<size_t>(inner[p])];
    v[j] = (v[j] - (even + odd)) / value[begin];
  }
  Vector out(r.size());
  for (size_t f = 0; f < freeNodes; ++f) {
    out.segment<3>(3 * static_cast<Eigen::Index>(f)) =
        v[static_cast<size_t>(permutation[f])].head<3>();
  }
  return out;
}

double NewtonSolver::initialShift() const {
  double stiffest = 0;
  for (Eigen::Index f = 0; f < baseDiagonal_.size(); ++f) {
    stiffest = std::max(stiffest, (baseDiagonal_[f] / diagonalMass_[f]) - potential_.alpha);
  }
  const double tau = std::max(potential_.alpha, 1e-4 * stiffest);
  return tau > 0 ? tau : 1.0;
}

void NewtonSolver::setShift(double tau) {
  double* values = cache_.matrix.valuePtr();
  for (Eigen::Index f = 0; f < baseDiagonal_.size(); ++f) {
    values[cache_.diagonal[static_cast<size_t>(f)]] = baseDiagonal_[f] + tau * diagonalMass_[f];
  }
}

double NewtonSolver::direction(const Vector& g, double tau, double forcing, bool mayReuse,
                               Vector& d, NewtonReport& report) {
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

Vector NewtonSolver::jacobi() const {
  Vector inverseDiagonal(free_.count);
  for (Eigen::Index f = 0; f < inverseDiagonal.size(); ++f) {
    const double diag = cache_.matrix.valuePtr()[cache_.diagonal[static_cast<size_t>(f)]];
    inverseDiagonal[f] = diag > 0 ? 1.0 / diag : 1.0 / diagonalMass_[f];
  }
  return inverseDiagonal;
}

template <class Preconditioner>
int64_t NewtonSolver::conjugateGradient(const Vector& g, double forcing, int64_t maxIterations,
                                        bool truncate, const Preconditioner& precondition,
                                        Vector& d) const {
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

double NewtonSolver::lineSearch(std::vector<double>& x, std::vector<double>& trial, const Vector& d,
                                double phi, double scale, double slope, KnownGradient& known) {
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
      elastic = body_.model->addGradient(trial, trialGradient_, workspaceOf(body_));
    } else {
      elastic = body_.model->energy(trial, workspaceOf(body_));
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

[[noreturn]] void NewtonSolver::fail(const std::string& what, int32_t iteration) const {
  std::ostringstream msg;
  msg << labelOf(body_) << ": " << what << " (Newton iteration " << iteration << ", t = " << time_
      << " s)";
  throw NumericalError(msg.str());
}

void throwNotConverged(const Body& body, const NewtonReport& report, const NewtonSettings& settings,
                       double time, const char* hint) {
  std::ostringstream msg;
  msg << labelOf(body) << ": Newton's method did not converge in " << settings.maxIterations
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

}  // namespace shellsim
