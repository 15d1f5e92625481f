// Newton's method on one body's potential, the solver of the implicit integrators
// (implicit.cpp) and of static equilibrium (static_equilibrium.cpp):
//   Phi(x) = alpha/2 (x - y)^T M (x - y) + E(x) - f.x
// with the Hessian Hess Phi assembled from Model::hessianBlocks into a cached block layout
// (LinearSolverCache), a shifted Cholesky factorization or preconditioned CG for the
// direction, and a backtracking line search. Private to the dynamics.
#pragma once

#include <Eigen/SparseCholesky>
#include <Eigen/SparseCore>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/block_cholesky.hpp"
#include "dynamics/contact.hpp"
#include "dynamics/implicit.hpp"
#include "dynamics/world.hpp"

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
  // The rotation-invariant stand-in of Hess Phi, alpha M + L (x) I3 (see
  // NewtonSolver::buildLaplacian), factorized: made (laplacianBuilt) for the topology, free
  // dofs, alpha and place of building below, and usable if laplacianValid.
  // Its Cholesky factor P L P^T = L_f L_f^T as compressed columns (the diagonal first in
  // each) and the fill-reducing permutation, for a solve on three interleaved right-hand
  // sides at once.
  std::vector<int32_t> laplacianOuter, laplacianInner, laplacianPermutation;
  std::vector<double> laplacianValues;
  bool laplacianBuilt = false;
  bool laplacianValid = false;
  int32_t laplacianSkip = 0;      // solves left that skip the stand-in
  int32_t laplacianFailures = 0;  // consecutive solves it did not converge in
  uint64_t laplacianTopology = 0;
  double laplacianAlpha = 0;
  std::vector<int> laplacianFree;
  // Built at the model's Model::standInPositions (a function of its state alone) rather
  // than at a position of the run.
  bool laplacianAtReference = false;

  // Forgets what depends on the run's path (the frozen factor and its layout, a stand-in
  // built at a state of the run, the stand-in's failure counts), so that the next solve is
  // the same whether the run came here or was restored here (each frame starts so,
  // Simulation::advanceFrames). A stand-in built at the model's reference depends on none
  // of it and is kept: rebuilding it each frame took half of the implicit bunny's time.
  void dropRunState() {
    LinearSolverCache fresh;
    if (laplacianBuilt && laplacianAtReference) {
      fresh.laplacianOuter = std::move(laplacianOuter);
      fresh.laplacianInner = std::move(laplacianInner);
      fresh.laplacianPermutation = std::move(laplacianPermutation);
      fresh.laplacianValues = std::move(laplacianValues);
      fresh.laplacianBuilt = true;
      fresh.laplacianValid = laplacianValid;
      fresh.laplacianTopology = laplacianTopology;
      fresh.laplacianAlpha = laplacianAlpha;
      fresh.laplacianFree = std::move(laplacianFree);
      fresh.laplacianAtReference = true;
    }
    *this = std::move(fresh);
  }

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

// The potential of one Newton solve, on one body:
//   Phi(x) = alpha/2 (x - y)^T M (x - y) + E(x) - f.x   (free dofs only in the last two terms)
struct Potential {
  double alpha = 0;
  std::vector<double> target;  // y, (nNodes, 3); used when alpha > 0
  std::vector<double> force;   // f, (nNodes, 3); empty: none
  // Mesh contact with frozen pairs (mesh_contact.hpp), the other bodies held where they
  // are: Phi gains the pairs' energy, its Hessian their Gauss-Newton diagonal node blocks.
  std::span<const ContactPair> contact;
  std::span<const Body> bodies;
  size_t body = 0;  // this body's index in `bodies`
  // Penalty obstacles (contact.hpp): Phi gains their energy, the Hessian their Gauss-Newton
  // blocks. No obstacles: none.
  ObstaclePenalty obstacles;
};

struct FreeDofs {
  std::vector<int> index;  // (3 nNodes), free index of each dof, or -1 for pinned nodes
  int count = 0;
};

FreeDofs freeDofs(const Body& body);

// The diagonal of the bounding box of positions x, (nNodes, 3), m: a body's length scale.
double boundsDiagonal(std::span<const double> x);

// "body 'name'", the prefix of the solver's messages.
std::string labelOf(const Body& body);

// L-BFGS on top of a fixed initial Hessian H0 (the Laplacian stand-in, then the frozen
// Cholesky factor; NewtonSettings::quasiNewton): the two-loop recursion of Nocedal and
// Wright, Numerical Optimization (2nd ed.), Algorithm 7.4, with H0^-1 applied by a
// factor's solve instead of a scaled identity. The pairs
//   s_k = x_{k+1} - x_k,   y_k = grad Phi(x_{k+1}) - grad Phi(x_k)   (free dofs)
// come from the solve's iterations without a fresh factor; a pair is kept only where
// s_k . y_k > 0, so the updated inverse stays positive definite and -H_k^-1 g a descent
// direction. The secant updates correct H0 along the directions the iteration has
// explored. With no pairs (capacity 0: the default solver) the direction is H0^-1 (-g),
// the plain modified Newton step.
class QuasiNewtonHistory {
 public:
  explicit QuasiNewtonHistory(int32_t capacity) : capacity_(static_cast<size_t>(capacity)) {}

  // Remembers the iterate and gradient a frozen step starts from (free dofs of x).
  void start(std::span<const double> x, const std::vector<int>& freeIndex, const Vector& g);
  // The pair from the remembered iterate to x, gradient g there; clears `pending`.
  void record(std::span<const double> x, const std::vector<int>& freeIndex, const Vector& g);
  // -H^-1 g, with applyInitialInverse(r) = H0^-1 r.
  template <class InitialInverse>
  [[nodiscard]] Vector direction(const Vector& g, const InitialInverse& applyInitialInverse) const {
    Vector q = -g;
    std::vector<double> a(s_.size());
    for (size_t k = s_.size(); k-- > 0;) {
      a[k] = rho_[k] * s_[k].dot(q);
      q -= a[k] * y_[k];
    }
    Vector r = applyInitialInverse(q);
    for (size_t k = 0; k < s_.size(); ++k) r += (a[k] - rho_[k] * y_[k].dot(r)) * s_[k];
    return r;
  }

  bool pending = false;  // start() called, its step accepted, record() not yet

 private:
  size_t capacity_;
  Vector startX_, startG_;
  std::vector<Vector> s_, y_;  // oldest first
  std::vector<double> rho_;    // 1 / (s_k . y_k)
};

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
  NewtonReport solve(double forceScale, KnownGradient& known);

 private:
  // alpha/2 |x - y|_M^2 - f.x over free dofs plus the contact energy (knownContact where the
  // caller has it at x); *scale gets the sum of magnitudes of its terms.
  double extraTerms(std::span<const double> x, double* scale,
                    const double* knownContact = nullptr) const;

  double extraGradient(std::span<const double> x, size_t k) const;

  // Hess Phi on the free dofs into cache_.matrix; the layout and the symbolic
  // factorization are redone only when the topology or the free dofs changed.
  void assemble(std::span<const double> x);

  // The diagonal and mass vectors of the shift, and the symbolic factorization when the
  // pattern changed.
  void finishAssembly();

  // Hess Phi from Model::hessianBlocks into the cached layout, in parallel over column
  // nodes, each matrix block summed in a fixed order (deterministic for any thread count).
  // Returns false if the model offers no blocks.
  bool assembleBlocks(std::span<const double> x);

  // The block layout for the model's current topology and the free dofs: the matrix
  // pattern (every free node's diagonal block included, so that tau M can be added in
  // place), block slots and contribution lists. Returns false if the model has no blocks.
  bool buildBlockLayout(uint64_t topology);

  // The stand-in A (x) I3 of Hess Phi on the free nodes, A = alpha M + L, made at x and
  // factorized, unless already made for this topology, free-dof map and alpha. L is the
  // graph Laplacian with weight w_t = max(0, -tr(B_t) / 3) for every model block B_t
  // coupling two different nodes: -tr(B)/3 I3 is the multiple of the identity nearest to
  // -B (Frobenius), the isotropic part of the coupling (k/3 for a spring of stiffness k
  // along u, whose block is -k u u^T). Weights to pinned nodes go to the diagonal only.
  // Rotating the body rotates each block, B -> R B R^T, and keeps its trace: A does not
  // depend on the orientation. Diagonally dominant with a positive diagonal, so positive
  // definite where alpha > 0. False if the model has no blocks or the factorization fails.
  bool buildLaplacian(std::span<const double> x);
  // L^-1 r for r over the free dofs (3 per free node).
  Vector applyLaplacianInverse(const Vector& r) const;

  // tau_0 = max(alpha, 1e-4 max_i K_ii / m_i).
  double initialShift() const;

  void setShift(double tau);

  // Solves (H + tau M) d = -g, raising tau from `tau` until the factorization succeeds;
  // returns the tau used.
  double direction(const Vector& g, double tau, double forcing, bool mayReuse, Vector& d,
                   NewtonReport& report);

  // Inverse of diag(H), or 1/m where it is not positive.
  Vector jacobi() const;

  // Preconditioned CG on H d = -g to relative residual `forcing`. At non-positive
  // curvature it truncates (Steihaug): with `truncate`, it returns the iterate so far (or
  // the preconditioned gradient on the first iteration), both descent directions;
  // without, it gives up. Returns the iterations taken, negated when it gave up or hit
  // `maxIterations` without `truncate`.
  template <class Preconditioner>
  int64_t conjugateGradient(const Vector& g, double forcing, int64_t maxIterations, bool truncate,
                            const Preconditioner& precondition, Vector& d) const;

  // Backtracking on Phi along d from x (prepared state held fixed); on success x moves and
  // `trial` holds the x it started from (the buffers are swapped). Returns the step length
  // taken, or 0 if none decreased Phi. The full step's trial is evaluated with its gradient
  // (at the cost of an energy: the models' passes are the same), so that when it is
  // accepted `known` holds the gradient at the new x.
  double lineSearch(std::vector<double>& x, std::vector<double>& trial, const Vector& d, double phi,
                    double scale, double slope, KnownGradient& known);

  [[noreturn]] void fail(const std::string& what, int32_t iteration) const;

  Body& body_;
  const Potential& potential_;
  const NewtonSettings& settings_;
  LinearSolverCache& cache_;
  double time_;
  FreeDofs free_;
  std::span<const double> mass_;
  Vector diagonalMass_, baseDiagonal_;  // (nFree): m, and diag(H) without shift
  std::vector<double> trialGradient_;   // (nNodes, 3), the line search's full-step gradient
  // Mesh contact or penalty obstacles in the potential.
  [[nodiscard]] bool hasContact() const;
  // Their energy at x; adds their gradient into `gradient` unless it is empty.
  double contactTerms(std::span<const double> x, std::span<double> gradient) const;
  // Adds their Gauss-Newton diagonal node blocks at x into `diagonal`, (nNodes, 3, 3).
  void addContactDiagonal(std::span<const double> x, std::span<double> diagonal) const;
  std::vector<double> contactGradient_;  // (nNodes, 3), of the contact pairs at the iterate
  std::vector<double> contactBlocks_;    // (nNodes, 3, 3), their Gauss-Newton diagonal blocks
};

void throwNotConverged(const Body& body, const NewtonReport& report, const NewtonSettings& settings,
                       double time, const char* hint = "try a smaller time step");

// |grad E(x)| over free dofs, from the accelerations computeAccelerations left:
// dE/dx = m (g - a).
double elasticForceNorm(const Body& body, const Vec3& gravity);

}  // namespace shellsim
