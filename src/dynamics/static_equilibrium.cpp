// Static equilibrium (time.integrator "static"): Newton on E(x) - f.x per load increment,
// with pseudo-transient continuation for mechanisms (solveStaticEquilibrium, implicit.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "dynamics/implicit.hpp"
#include "dynamics/newton.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

// |dE/dx(x) - f| over free dofs at the body's positions, divided by the force scale F.
// The gradient is taken from `known` where a Newton solve left it valid there, else
// evaluated (and kept in `known`).
double staticResidual(Body& body, const Potential& potential, double forceScale,
                      KnownGradient& known) {
  if (!known.valid) {
    known.gradient.assign(body.positions.size(), 0.0);
    known.energy = body.model->addGradient(body.positions, known.gradient, workspaceOf(body));
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
      throw InputError(labelOf(body) + ": external forces must have shape (nNodes, 3)");
    }
    for (size_t k = 0; k < 3 * n; ++k) {
      potential.force[k] = mass[k / 3] * world.gravity[static_cast<Eigen::Index>(k % 3)] +
                           (hasLoad ? externalForces[b][k] : 0.0);
    }
    // F = |f| + |dE/dx(x0)| over free dofs.
    body.model->prepare(body.positions);
    std::vector<double> gradient(3 * n, 0.0);
    const EnergyParts startEnergy =
        body.model->addGradient(body.positions, gradient, workspaceOf(body));
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
