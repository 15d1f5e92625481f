// Implicit time integration and static equilibrium for every model with a Hessian.
//
// Notation, per body: x, v, a node positions, velocities, accelerations (3n dofs), M the
// lumped mass matrix (diagonal, m_i on the three dofs of node i), E(x) the model's
// internal energy, K(x) = d2E/dx2 its Hessian (Model::addHessian), g gravity, c the body's
// mass-proportional damping (1/s), h the time step. Pinned (scripted) nodes are fixed
// dofs: at the start of the step they are moved to their path's position and velocity at
// t + h (applyScriptedMotion) and take no part in the solve; every vector and matrix below
// is restricted to the free dofs.
//
// Damping. The explicit stepper applies the exact decay exp(-c h) to the velocity. An
// implicit scheme takes the Rayleigh mass-damping force -c M v at the new time level into
// its equation of motion,  M a = -dE/dx + M g - c M v,  which is the same force (wicke2005
// eq. 15) discretized by the scheme: for uniform motion the velocity decays per step by
// (1 - c h/2)/(1 + c h/2) with Newmark gamma = 1/2 and by 1/(1 + c h) with backward Euler
// (they differ from exp(-c h) by O((c h)^3) and O((c h)^2)). Both have magnitude <= 1 for
// any h, so damping never destabilizes a large step; Newmark's factor turns negative for
// c h > 2 (the velocity flips sign while decaying), where backward Euler is the better
// choice. Because C = c M is proportional to the mass, the damped step is still the
// minimizer of a potential.
//
// Newmark (beta, gamma), grinspun2003 (slides, "Newmark"):
//   x+ = x + h v + h^2 [(1/2 - beta) a + beta a+],   v+ = v + h [(1 - gamma) a + gamma a+].
// With the predictors  xt = x + h v + h^2 (1/2 - beta) a,  vt = v + h (1 - gamma) a,  the
// new acceleration is a+ = (x+ - xt) / (beta h^2) and the equation of motion at t + h,
//   (1 + c gamma h) M a+ = -dE/dx(x+) + M (g - c vt),
// is the stationarity condition of the incremental potential
//   Phi(x) = alpha/2 (x - y)^T M (x - y) + E(x),
//   alpha = (1 + c gamma h) / (beta h^2),   y = xt + (g - c vt) / alpha,
//   grad Phi = alpha M (x - y) + dE/dx,     Hess Phi = alpha M + K(x).
// Then v+ = vt + gamma h a+. beta = 1/4, gamma = 1/2 is the average-acceleration
// (trapezoidal) scheme: unconditionally stable and energy conserving for linear systems,
// second order. beta = 0 is the explicit central-difference scheme: x+ = xt needs no solve,
// a+ = [-dE/dx(x+)/m + g - c vt] / (1 + c gamma h), stable only below the explicit limit.
// The step reads a = (the accelerations computeAccelerations left, -dE/dx / m + g) - c v:
// the physical state is (x, v) alone. The solver also keeps, per body, the last Cholesky
// factor (frozen Hessian); it changes the Newton iterates, not what they converge to, so
// a step recomputed from a checkpoint (run.cpp) agrees with the first attempt to the
// Newton tolerance, not bit for bit. A run is still deterministic.
//
// Backward (implicit) Euler:  v+ = v + h a+,  x+ = x + h v+,  M a+ = -dE/dx(x+) + M g - c M v+:
//   Phi(x) = alpha/2 (x - y)^T M (x - y) + E(x),
//   alpha = (1 + c h) / h^2,   y = x + (h v + h^2 g) / (1 + c h),
//   grad Phi = alpha M (x - y) + dE/dx,     Hess Phi = alpha M + K(x),
// then v+ = (x+ - x) / h. First order; it dissipates energy (for convex E the total energy
// falls by at least 1/2 |v+ - v|_M^2 per step).
//
// Static equilibrium: Phi(x) = E(x) - f.x with f = M g + the given nodal loads (alpha = 0),
//   grad Phi = dE/dx - f,   Hess Phi = K(x).
//
// Newton's method on Phi, one body at a time. Obstacles are resolved after the solve, as
// in the explicit step. Mesh contact (mesh_contact.hpp) enters Phi: the pairs within reach
// of the step are found once at its start and frozen, the other bodies held where they are
// (those solved before at their new positions), and their penalty energy, gradient and
// Gauss-Newton diagonal node blocks join Phi, its gradient and its Hessian:
//  0. Initial guess: of the constant-acceleration guess (Newmark: x + h v + h^2/2 a;
//     Euler: x + h v + h^2 a) and y (where the step ends without elastic forces: x + h v
//     up to the loads' O(h^2) fall), the one with the lower Phi; both are evaluated with
//     their gradients, and Newton starts with the winner's.
//  1. model.prepare(x), then gradient and Hessian at x (a model may hold state fixed in
//     prepare, so that Phi and its derivatives agree within the iteration). A gradient
//     already computed at x (a start candidate's, the line search's full step) is reused
//     unless prepare reports that the held state changed.
//  2. Convergence: the relative residual |grad Phi(x)| / F <= tolerance, F the force scale
//     of the step: |alpha M (x0 - y) - f| + |dE/dx(x0)| at the step's start x0 (inertial
//     plus external plus elastic force magnitudes; it does not vanish at equilibrium).
//     Also converged when an unshifted Newton step moves no dof by more than
//     stepTolerance times the body's size: the residual is then at its rounding floor,
//     which for stiff materials lies above useful tolerances (1 mm aluminium: ~3e-8).
//  3. Direction: solve (Hess Phi + tau M) d = -grad Phi. The exact fiber Hessian, the
//     mass-spring Hessian of a compressed spring and a flat membrane's out-of-plane block
//     are not positive definite; when the Cholesky factorization reports a non-positive
//     pivot, tau grows: from 0 to tau_0 = max(alpha, 1e-4 max_i K_ii / m_i), then x4 per
//     retry (at most NewtonSettings::maxShifts). Each iteration starts from a quarter of
//     the tau the previous one needed (0 once that is below tau_0), as in
//     Levenberg-Marquardt, so a persistently indefinite Hessian does not pay a failed
//     factorization for every smaller tau each time. A positive definite system gives a
//     descent direction; near a strict minimum Phi's Hessian is positive definite again
//     and the iteration returns to pure Newton (quadratic convergence).
//     Linear solver: a sparse Cholesky factorization (the symbolic analysis kept while the
//     sparsity pattern is unchanged) up to NewtonSettings::directMaxDofs free dofs; above
//     it, conjugate gradients with a Jacobi (diagonal) preconditioner, stopped at a
//     relative residual eta = min(0.1, |grad Phi|/F) (inexact Newton with a forcing term
//     that keeps the convergence superlinear) and truncated at the first direction of
//     non-positive curvature (Steihaug): the iterate so far, or the preconditioned steepest
//     descent direction on the first iteration, which are descent directions. With
//     reuseFactorization, the direct path first runs CG preconditioned by the last Cholesky
//     factor (kept across iterations and steps: the Hessian of a slowly deforming body
//     changes little), to the same forcing term, and refactorizes only when that takes
//     more than maxReuseIterations or meets non-positive curvature. With frozenHessian (the
//     default for dynamic steps; NewtonSettings), iterations first solve with the last
//     factor as it is, without assembling. With quasiNewton, before all of that, L-BFGS
//     iterations on a fixed Laplacian stand-in of Hess Phi (NewtonSettings::quasiNewton).
//     Assembly by node blocks (Model::hessianBlocks): the layout (the matrix pattern,
//     where each model block lands, which blocks sum into each matrix block) is built once
//     per topology and free-dof set; each assembly sums the blocks in parallel over column
//     nodes in a fixed order. Factorization by BlockCholesky (core/block_cholesky.hpp),
//     which works on 3x3 node blocks. Measured (bench_implicit, BM_NewtonSystemCholesky,
//     discrete-shell aluminium sheet): 3,168 dofs factorize 3.3 ms, solve 0.18 ms (Eigen's
//     scalar SimplicialLLT: 12.1 and 0.58); 30,300 dofs 216 and 10.3 ms (Eigen 702 and 16.5).
//     CHOLMOD (SuiteSparse 5.12 with OpenBLAS, supernodal) took 15-18 ms and 0.34 ms at
//     3,168 dofs and 258 ms at 30,300, so it was not added as a dependency.
//  4. Backtracking (Armijo, c1 = 1e-4, halving) on Phi with the prepared state fixed. Once
//     the predicted decrease |grad Phi . d| falls below 1e-11 of Phi's magnitude, Phi can no
//     longer resolve it in floating point and the full step is taken. If no step length
//     down to 2^-40 decreases Phi, tau is raised as in 3 and the direction recomputed.
// Non-convergence within maxIterations, or a non-finite Phi or gradient, throws
// NumericalError naming the body.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"

namespace shellsim {

enum class ImplicitScheme { kNewmark, kBackwardEuler };

struct NewtonSettings {
  double tolerance = 1e-6;     // relative residual |grad Phi| / F (see above), > 0
  int32_t maxIterations = 30;  // Newton iterations per body per solve, >= 1
  // Also converged when an unshifted Newton step moves no dof by more than this fraction
  // of the body's bounding-box diagonal: the residual is then at its rounding floor
  // (stiff materials: the 1 mm aluminium sheet's floor is 1e-8..1e-9 relative, its Newton
  // steps there ~2e-14 m on a 0.7 m sheet). 1e-12 is far below visible or physical
  // accuracy and ~10^4 units in the last place of the coordinates. >= 0.
  double stepTolerance = 1e-12;
  // Free dofs up to which the sparse Cholesky factorization is used; above it the
  // Jacobi-preconditioned conjugate gradient. Measured (bench_implicit,
  // BM_ImplicitNewtonIteration: backward Euler on the 1 mm aluminium mass-spring sheet at
  // 20x its stable step, full Newton iterations, Release, 2 cores), seconds per iteration,
  // block Cholesky vs CG: 1k dofs 0.0004 vs 0.0014, 10k 0.014 vs 0.027, 100k 0.38 vs 0.46
  // (CG needs 50-130 iterations at this step; Eigen's scalar Cholesky took 1.2 s at 100k).
  // The factorization grows like n^1.5 on a sheet and its memory like n log n, CG linearly
  // per iteration, and frozen-Hessian iterations (direct path only) cost a fraction of a
  // factorization: the crossover lies above 1e5 dofs, hence 2e5 (unmeasured above 1e5).
  int64_t directMaxDofs = 200000;
  int32_t maxLinearIterations = 10000;  // Jacobi-CG iterations per solve
  // Direct path: precondition CG with the last Cholesky factor (from an earlier iteration
  // or step) and refactorize only when that needs more than maxReuseIterations
  // iterations or meets negative curvature. Off: factorize at every iteration.
  bool reuseFactorization = true;
  int32_t maxReuseIterations = 20;
  // Modified Newton (direct path, dynamic steps): while a Cholesky factor exists (from an
  // earlier iteration or step), iterate with it as the Hessian, without assembling: each
  // iteration costs one gradient, two triangular solves and the line search. It converges
  // linearly; once an iteration reduces the residual by less than half (or its direction
  // fails the line search), or half of maxIterations is used, the rest of the solve takes
  // full Newton steps, each assembling and refactorizing, and the newest factor is the one
  // frozen at the next step. A frozen step that raised the residual, after its line search
  // had to shorten it, is undone first, so that the full steps start from the iterate
  // before it (NewtonReport::frozenUndone): on the broken crater sheet
  // (inelastic_sheet_puncture_crater, Release, 2 threads) the run took 62.9 s instead of
  // 99.7 s, 5.9 instead of 7.6 Newton iterations per step; the tube and bench_implicit's
  // stiff sheets, where it never triggers or its steps are full, are unchanged. On by default: on
  // the 1 mm aluminium sheet (bench_implicit, discrete shell, backward Euler) a step at 10x the
  // explicit estimate costs 0.53 ms with it and 2.6 ms without, at 100x 2.7 and 5.0 ms (an explicit
  // step: 0.063 ms). Where the Hessian changes fast it costs some wasted iterations: the can
  // crushed with backward Euler (0.5 s) took 39 s with it and 33 s without. Static equilibrium
  // (alpha = 0) always takes full Newton steps: without the inertia term the Hessian changes too
  // much along a large-deflection path (the cantilever elastica diverged with a frozen factor).
  bool frozenHessian = true;
  // With quasiNewton: the L-BFGS pairs (QuasiNewtonHistory, newton.hpp) of the solve's
  // earlier iterations that update the Laplacian stand-in below, and the frozen factor
  // after it; 4, 8, 16 and 32 converge alike on bench_bullet's sheet. The frozen factor
  // alone keeps none: pairs made its iterations per step on the 1 mm aluminium sheets
  // (backward Euler at 20x the stable step) rise from 1.09 to 1.26 (discrete shell) and
  // from 1.70 to 2.64 (fiber), near the residual's rounding floor where y is noise, while
  // on the swinging soft sheet they cut the factorizations from 0.86 to 0.71 per step.
  // >= 0.
  int32_t quasiNewtonPairs = 8;
  // Dynamic steps (direct path): each solve first takes L-BFGS iterations on a fixed,
  // rotation-invariant stand-in of Hess Phi, alpha M + L (x) I3 with L a weighted graph
  // Laplacian of the model's node couplings (the isotropic part of each Hessian block,
  // NewtonSolver::buildLaplacian), factorized once per topology, free dofs and alpha
  // (Liu, Bouaziz and Kavan, "Quasi-Newton methods for real-time simulation of
  // hyperelastic materials", ACM TOG 36(3), 2017, with our blocks for their Laplacian).
  // It does not go stale as a body turns, where a frozen factor does, but it knows nothing
  // of bending, so it converges only linearly and only where stretching and inertia
  // dominate. After quasiNewtonBudget iterations (at most half of maxIterations) without
  // convergence the solve goes on with the frozen factor (or exact Newton), keeping the
  // pairs, and the next 1, 2, 4 ... 64 solves skip the stand-in while it keeps failing.
  // Worth it with a loose tolerance: bench_bullet's BM_SheetPerSimulatedSecond (the soft
  // sheet swinging, backward Euler at 1/240 s, 1e-3) 322-339 ms per simulated second
  // against 1,086-1,089 for the frozen factor alone and 1,529-1,777 for the defaults (1e-6),
  // 6.7 stand-in iterations and 0.03 factorizations per step. Off by default.
  bool quasiNewton = false;
  int32_t quasiNewtonBudget = 15;  // >= 1
  int32_t maxShifts = 12;          // retries with a growing tau M per iteration
};

struct ImplicitSettings {
  ImplicitScheme scheme = ImplicitScheme::kNewmark;
  double beta = 0.25;  // Newmark, [0, 1/2]; 0 is explicit central difference
  double gamma = 0.5;  // Newmark, [1/2, 1]
  NewtonSettings newton;
};

// Throws InputError if a setting is out of range, naming it.
void validate(const ImplicitSettings& settings);

// One Newton solve of one body.
struct NewtonReport {
  int32_t iterations = 0;  // iterations taken: Newton, frozen and quasi-Newton
  bool converged = false;
  double residual = 0;                // final relative residual
  std::vector<double> residuals;      // relative residual at each iterate, first to last
  int32_t shiftedIterations = 0;      // iterations that needed tau > 0
  int32_t frozenIterations = 0;       // modified-Newton iterations (frozenHessian)
  int32_t frozenUndone = 0;           // of those, undone (see NewtonSolver::solve)
  int32_t quasiNewtonIterations = 0;  // iterations on the Laplacian stand-in (quasiNewton)
  int32_t factorizations = 0;         // numeric Cholesky factorizations, failed ones included
  int64_t linearIterations = 0;       // conjugate-gradient iterations, all solves
  bool usedIterativeSolver = false;
};

struct ImplicitStepReport {
  std::vector<NewtonReport> bodies;  // per body, in world order
  [[nodiscard]] int32_t maxIterations() const;
  [[nodiscard]] int32_t totalIterations() const;
};

// Per-body cache of the linear solver (sparsity pattern, symbolic factorization).
struct LinearSolverCache;

// Steps a world with an implicit scheme. Keeps per-body solver state between steps, so use
// one ImplicitStepper per world. Like step(), it needs computeAccelerations(world) once
// before the first step (and after positions are restored from a checkpoint).
class ImplicitStepper {
 public:
  explicit ImplicitStepper(const ImplicitSettings& settings);  // validates
  ImplicitStepper(const ImplicitStepper&) = delete;
  ImplicitStepper& operator=(const ImplicitStepper&) = delete;
  ImplicitStepper(ImplicitStepper&&) noexcept;
  ImplicitStepper& operator=(ImplicitStepper&&) noexcept;
  ~ImplicitStepper();

  // One step of size dt, as a pipeline: time += dt and pins to their paths; per body,
  // Newton on Phi; velocities; project out of obstacles; accelerations at the new
  // positions; contact velocity response; checkState; plasticity and fracture. Throws
  // NumericalError (naming the body) on non-convergence, NaN or blow-up, leaving the world mid-step
  // (restore a checkpoint, as run.cpp does, then computeAccelerations); InputError if a body's
  // model has no Hessian. Newton time counts as `integrate`, the final force evaluation as
  // `forces`.
  ImplicitStepReport step(World& world, double dt, PhaseTimes& times);
  // The step above without its last stage, plasticity and fracture (updateInelastic): a
  // step proposed to the step pipeline (step_pipeline.hpp), which may still undo it.
  ImplicitStepReport propose(World& world, double dt, PhaseTimes& times);

  [[nodiscard]] const ImplicitSettings& settings() const { return settings_; }
  // Forgets every body's solver state (factor, pattern); the next step rebuilds it.
  void dropCaches();

 private:
  ImplicitSettings settings_;
  std::vector<std::unique_ptr<LinearSolverCache>> caches_;  // (nBodies)
};

// Static equilibrium of every body with its pins at their positions at world.time: Newton
// on Phi(x) = E(x) - f.x, f = M g + externalForces[b] (nodal forces, N, shape (nNodes, 3);
// an empty span or an empty vector adds none). Starts from the current positions; on
// return the positions are the equilibrium, velocities of free nodes are zero and the
// accelerations and elastic energies are updated. Throws NumericalError naming the body if
// Newton does not converge.
std::vector<NewtonReport> solveStaticEquilibrium(
    World& world, const NewtonSettings& settings,
    std::span<const std::vector<double>> externalForces = {});

}  // namespace shellsim
