#include "dynamics/implicit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "dynamics/contact.hpp"
#include "dynamics/newton.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

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
  if (s.newton.quasiNewtonBudget < 1)
    msg << "newton quasi_newton_budget = " << s.newton.quasiNewtonBudget << ": must be >= 1";
  if (s.newton.quasiNewtonPairs < 0)
    msg << "newton quasi_newton_pairs = " << s.newton.quasiNewtonPairs << ": must be >= 0";
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
  for (const std::unique_ptr<LinearSolverCache>& cache : caches_) cache->dropRunState();
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
    // Thrown obstacles go first, explicitly: held where this puts them during the solve.
    kickFreeObstacles(world, 0.5 * dt);
    driftFreeObstacles(world, dt);
    world.time += dt;
    applyScriptedMotion(world);
    collideFreeObstacles(world);
    // Mesh contact: the pairs within reach of the step, found once at its start, frozen
    // over the Newton solves (mesh_contact.hpp). The reach covers twice the largest
    // displacement of the constant-acceleration guess, at most twice the widest touching
    // distance (a crack tip's released stress gives accelerations whose guess would take
    // in every pair of the mesh; contacts the step then misses leave intersections, and
    // the step is retried in halves).
    std::vector<ContactPair> contactPairs;
    if (world.contact.enabled() && !explicitNewmark) {
      double reach = 0;
      for (const Body& body : world.bodies) {
        for (size_t k = 0; k < body.positions.size(); k += 3) {
          const Vec3 v = row(body.velocities, k / 3), a = row(body.accelerations, k / 3);
          reach = std::max(reach, (dt * v + 0.5 * dt * dt * a).norm());
        }
      }
      world.contact.findPairs(world.bodies,
                              std::min(2 * reach, 2 * world.contact.widestTouching(world.bodies)),
                              contactPairs);
    }
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
        const EnergyParts elastic =
            body.model->addGradient(candidate, candidateGradient, workspaceOf(body));
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
      potential.contact = contactPairs;
      if (hasPenaltyObstacles(world)) potential.obstacles = obstaclePenalty(world, body);
      potential.bodies = world.bodies;
      potential.body = b;
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
    if (projectOutOfObstacles(world, dt) > 0) {
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
    kickFreeObstacles(world, 0.5 * dt);
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
    dampObstaclePenalty(world, dt);
  }
  {
    PhaseTimer timer(times.checks);
    checkState(world);
  }
  return report;
}

}  // namespace shellsim
