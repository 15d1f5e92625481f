#include "dynamics/step_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "shellsim/errors.hpp"

namespace shellsim {

double plannedTimeStep(const TimeDef& time, double stableStep, double longest,
                       std::vector<std::string>& warnings) {
  const bool implicit = isImplicit(time);
  const double requested = time.timeStep;
  double target = requested > 0
                      ? requested
                      : (implicit ? kImplicitStepFactor : kAutomaticStepSafety) * stableStep;
  if (!implicit && requested > 0 && requested > stableStep) {
    std::ostringstream msg;
    msg << "time.time_step = " << requested << " s is above the stable explicit step estimate "
        << stableStep << " s; the run may blow up";
    warnings.push_back(msg.str());
  }
  return std::min(target, longest);
}

double contactReferenceStep(const TimeDef& time, double stableStep) {
  if (!isImplicit(time)) return stableStep;
  std::vector<std::string> ignored;
  return std::max(stableStep, plannedTimeStep(time, stableStep, 1.0 / time.frameRate, ignored));
}

namespace {

ImplicitSettings implicitSettings(const TimeDef& time) {
  ImplicitSettings settings;
  settings.scheme = time.integrator == Integrator::kBackwardEuler ? ImplicitScheme::kBackwardEuler
                                                                  : ImplicitScheme::kNewmark;
  settings.beta = time.newmarkBeta;
  settings.gamma = time.newmarkGamma;
  settings.newton.tolerance = time.newtonTolerance;
  settings.newton.maxIterations = time.newtonMaxIterations;
  settings.newton.frozenHessian = time.newtonFrozenHessian;
  settings.newton.quasiNewton = time.newtonQuasiNewton;
  return settings;
}

// The sum of the bodies' topology versions: it changes when any body's topology does.
uint64_t topologySum(const World& world) {
  uint64_t sum = 0;
  for (const Body& body : world.bodies) sum += body.model->topologyVersion();
  return sum;
}

}  // namespace

TimeIntegrator::TimeIntegrator(const TimeDef& time, double timeStep,
                               std::function<void(const std::string&)> warn)
    : warn_(std::move(warn)), starts_(kMaxStepSplits + 1) {
  // Newmark with beta = 0 runs through the implicit stepper too: its explicit branch.
  if (time.integrator != Integrator::kVerlet) implicit_.emplace(implicitSettings(time));
  explicit_ = !isImplicit(time);
  setTimeStep(timeStep);
}

void TimeIntegrator::followStableStep(double stableStep) {
  stepPerStableStep_ =
      explicit_ && stableStep > 0 && std::isfinite(stableStep) ? timeStep_ / stableStep : 0.0;
}

bool TimeIntegrator::followTopology(const World& world) {
  const double stable = stableTimeStep(world);
  const double allowed = stepPerStableStep_ * stable;
  if (!(allowed < timeStep_) || !(allowed > 0)) return false;
  if (!warnedStableStep_ && warn_) {
    std::ostringstream msg;
    msg << "a topology edit (fracture, melting, stiffening) lowered the stable explicit step to "
        << stable << " s at t = " << world.time << " s: the time step goes from " << timeStep_
        << " to " << allowed << " s for the rest of the run";
    warn_(msg.str());
  }
  warnedStableStep_ = true;
  timeStep_ = allowed;
  return true;
}

void TimeIntegrator::setTimeStep(double timeStep) {
  if (!(timeStep > 0) || !std::isfinite(timeStep)) {
    std::ostringstream msg;
    msg << "time step " << timeStep << " s must be positive and finite";
    throw InputError(msg.str());
  }
  timeStep_ = timeStep;
}

void TimeIntegrator::dropSolverCaches() {
  if (implicit_) implicit_->dropCaches();
}

void TimeIntegrator::advance(World& world, double interval, double endTime, PhaseTimes& times) {
  if (!(interval > 0) || !std::isfinite(interval)) {
    std::ostringstream msg;
    msg << "cannot advance by " << interval << " s: must be positive and finite";
    throw InputError(msg.str());
  }
  const double count = stepCount(interval, timeStep_);
  if (count > kMaxStepsPerAdvance) {
    std::ostringstream msg;
    msg << "advancing by " << interval << " s with time step " << timeStep_ << " s takes " << count
        << " steps, more than " << kMaxStepsPerAdvance;
    throw InputError(msg.str());
  }
  auto steps = static_cast<int64_t>(count);
  double dt = interval / count;
  acceptedCrossings_ = -1;  // the state may have been restored or edited since
  sustainedDepth_ = 0;
  acceptedSinceSustained_ = 0;
  const bool follow = stepPerStableStep_ > 0;
  double remaining = interval;
  for (int64_t s = 0; s < steps; ++s) {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
      std::ostringstream msg;
      msg << "stopped on request at t = " << world.time << " s";
      throw Interrupted(msg.str());
    }
    const uint64_t before = follow ? topologySum(world) : 0;
    stepWithRetry(world, dt, 0, times);
    remaining -= dt;
    if (follow && topologySum(world) != before && followTopology(world) && s + 1 < steps) {
      // The rest of the interval in equal steps no longer than the lowered one.
      const double rest = stepCount(remaining, timeStep_);
      steps = s + 1 + static_cast<int64_t>(rest);
      dt = remaining / rest;
    }
  }
  world.time = endTime;
  PhaseTimer timer(times.inelastic);
  // Rigid fragments catch up with the shell (rigid_fragments.hpp).
  if (world.rigid.finishAdvance(world) && world.contact.enabled()) computeAccelerations(world);
}

void TimeIntegrator::stepWithRetry(World& world, double dt, int depth, PhaseTimes& times) {
  if (depth < sustainedDepth_) {
    // A sustained cause needed a finer step a moment ago: split without proposing this one.
    stepWithRetry(world, dt / 2, depth + 1, times);
    stepWithRetry(world, dt / 2, depth + 1, times);
    return;
  }
  StepStart& start = starts_[static_cast<size_t>(depth)];
  save(world, start);
  const bool rejectIntersections =
      world.contact.enabled() && world.contact.def().rejectIntersections;
  if (rejectIntersections && acceptedCrossings_ < 0) {
    PhaseTimer timer(times.checks);
    acceptedCrossings_ = world.contact.countIntersections(world.bodies);
  }
  world.projectionWork = 0;
  Rejection rejection;
  try {
    rejection = proposeAndInspect(world, dt, start, times);
  } catch (const NumericalError& e) {
    rejection = {e.what(), false};
  }
  const bool finest = depth == kMaxStepSplits;
  // Formatted only for a warning or a rejection: an accepted step's message would cost a
  // few percent of a small body's explicit step.
  const auto describeStep = [&] {
    std::ostringstream what;
    what << "the step from t = " << start.time << " s of " << dt << " s was ";
    return what.str();
  };
  if (!rejection.reason.empty() && finest && rejection.acceptAtFinest) {
    if (!warnedFinest_ && warn_) {
      warn_(describeStep() + "accepted at the deepest split although " + rejection.reason +
            " (an event resolved as finely as the search goes)");
    }
    warnedFinest_ = true;
    rejection.reason.clear();
  }
  if (rejection.reason.empty()) {
    const double work = stepWork(world, start.bodies, start.obstaclePower, dt);
    world.externalWork += work;
    world.externalWorkMagnitude += std::abs(work);
    dampInternalMotion(world, dt);
    acceptedCrossings_ = rejectIntersections ? proposedCrossings_ : -1;
    const uint64_t topology = topologySum(world);
    updateInelastic(world, dt, times);  // commit: plasticity, fracture
    if (topologySum(world) != topology) acceptedCrossings_ = -1;
    ++counts_.accepted;
    if (sustainedDepth_ > 0 && ++acceptedSinceSustained_ >= kSustainedRelaxSteps) {
      --sustainedDepth_;
      acceptedSinceSustained_ = 0;
    }
    return;
  }
  ++counts_.rejected;
  if (rejection.sustained && !finest) {
    sustainedDepth_ = std::max(sustainedDepth_, depth + 1);
    acceptedSinceSustained_ = 0;
  }
  std::ostringstream what;
  what << describeStep() << "rejected: " << rejection.reason;
  if (finest) {
    what << " (after " << kMaxStepSplits << " splits into halves)";
    throw NumericalError(what.str());
  }
  if (counts_.rejected == 1 && warn_) {
    warn_(what.str() +
          "; retried as two half steps (later rejections are counted in the "
          "summary's steps_rejected)");
  }
  restore(world, start);
  stepWithRetry(world, dt / 2, depth + 1, times);
  stepWithRetry(world, dt / 2, depth + 1, times);
}

TimeIntegrator::Rejection TimeIntegrator::proposeAndInspect(World& world, double dt,
                                                            const StepStart& start,
                                                            PhaseTimes& times) {
  if (implicit_) {
    const ImplicitStepReport solved = implicit_->propose(world, dt, times);
    for (const NewtonReport& body : solved.bodies) {
      counts_.newton.iterations += body.iterations;
      counts_.newton.factorizations += body.factorizations;
    }
  } else {
    proposeStep(world, dt, times);
  }
  PhaseTimer timer(times.checks);
  Rejection rejection{{}, true};
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    const Body& body = world.bodies[b];
    const StepVerdict verdict =
        body.model->inspectStep(start.bodies[b].positions, body.positions, dt);
    if (!verdict.accepted) {
      if (!rejection.reason.empty()) rejection.reason += "; ";
      rejection.reason +=
          "body '" + body.name + "' (" + body.model->name() + "): " + verdict.reason;
      rejection.acceptAtFinest = rejection.acceptAtFinest && verdict.acceptAtFinest;
      rejection.sustained = rejection.sustained || verdict.sustained;
      // A rejection that must be resolved decides: the other bodies need not be asked.
      if (!rejection.acceptAtFinest) break;
    }
  }
  // gingold2004 section 4.2: a state with intersecting surfaces is not accepted; at the
  // deepest split it is (the search goes no finer), with a warning. [ours] A step that
  // starts with intersections (accepted so at an earlier deepest split, or given) is not
  // rejected for them: no split of it can undo them, and every later step would otherwise
  // split down to the deepest level while contact pushes them apart (a broken wall hit by a
  // ball crawled at 1/64 of its step that way). The rule holds again once they are gone.
  proposedCrossings_ = 0;
  if (rejection.acceptAtFinest && world.contact.enabled() &&
      world.contact.def().rejectIntersections) {
    proposedCrossings_ = world.contact.countIntersections(world.bodies);
    if (proposedCrossings_ > 0 && acceptedCrossings_ == 0) {
      if (!rejection.reason.empty()) rejection.reason += "; ";
      rejection.reason += std::to_string(proposedCrossings_) + " intersecting triangle pairs";
    }
  }
  return rejection;
}

void TimeIntegrator::save(const World& world, StepStart& start) const {
  start.time = world.time;
  start.contactEnergy = world.contactEnergy;
  start.externalWork = world.externalWork;
  start.externalWorkMagnitude = world.externalWorkMagnitude;
  start.obstaclePower = world.obstaclePower;
  start.bodies.resize(world.bodies.size());
  for (size_t b = 0; b < world.bodies.size(); ++b) saveKinematics(world.bodies[b], start.bodies[b]);
  start.obstacles.clear();
  for (const Obstacle& obstacle : world.obstacles) start.obstacles.push_back(obstacle.free);
}

void TimeIntegrator::restore(World& world, const StepStart& start) {
  world.time = start.time;
  world.contactEnergy = start.contactEnergy;
  world.externalWork = start.externalWork;
  world.externalWorkMagnitude = start.externalWorkMagnitude;
  world.obstaclePower = start.obstaclePower;
  for (size_t b = 0; b < world.bodies.size(); ++b)
    restoreKinematics(world.bodies[b], start.bodies[b]);
  for (size_t o = 0; o < world.obstacles.size(); ++o) world.obstacles[o].free = start.obstacles[o];
}

}  // namespace shellsim
