// Advancing a world in time: one step pipeline for every integrator, with accept and
// reject (DESIGN.md, "Data flows one way").
//
// One step of length h, from time t:
//
//   propose   scripted motion -> forces -> integrate -> contact -> checks
//             (the integration strategy: explicit velocity Verlet, stepper.hpp, or an
//             implicit scheme, implicit.hpp; both end with the NaN / speed checks)
//   accept?   the proposal is rejected when it failed (NaN, a node faster than
//             kMaxNodeSpeed, Newton did not converge: NumericalError) or when a body's model
//             rejects it (Model::inspectStep, e.g. gingold2004's time-step search; a model's
//             rejection marked acceptAtFinest is accepted at the deepest split)
//   commit    plasticity -> fracture (updateInelastic), only for an accepted step
//
// A rejected step is undone (positions, velocities, accelerations and time back to what
// they were at t) and retried as two steps of h/2, each of them again proposed,
// inspected and possibly split, down to h / 2^kMaxStepSplits. The halves end where the
// whole step would have ended, so a rejection never moves a frame's time. Each split is
// local: the next step takes the planned length again, except after a sustained rejection
// (StepVerdict::sustained, e.g. plastic flow over a long impact; ours): then the following
// steps start at the depth that resolved it, one level coarser after every
// kSustainedRelaxSteps accepted steps without another, and from the planned step at each
// advance (a frame's steps do not hang on hidden state: a resumed run takes the same ones).
// A step that still fails at the
// deepest split throws NumericalError; the caller (Simulation, include/shellsim/world.hpp)
// then recomputes the whole interval from its checkpoint with half the planned step, the
// last resort.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dynamics/implicit.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// Newton work of an implicit run, all bodies.
struct NewtonCounts {
  int64_t iterations = 0;
  int64_t factorizations = 0;
};

// Steps taken so far, over the whole run.
struct StepCounts {
  int64_t accepted = 0;  // steps whose plasticity and fracture ran, split halves counted
  int64_t rejected = 0;  // proposals undone (failed or rejected by a model)
  NewtonCounts newton;   // implicit runs; the iterations of rejected proposals included
};

// A rejected step is split into halves at most this many times (down to 1/64 of it).
inline constexpr int kMaxStepSplits = 6;

// Accepted steps after which a sustained split depth relaxes by one level (doubles the step).
inline constexpr int kSustainedRelaxSteps = 8;

// More steps than this in one advance means the step is hopelessly small for the interval.
inline constexpr double kMaxStepsPerAdvance = 1e10;

// Safety factor on the stable-step estimate when the scene asks for an automatic step.
inline constexpr double kAutomaticStepSafety = 0.5;
// Automatic step of the implicit integrators, in stable explicit steps: large enough to pay
// for the Newton solves (about 20-30 explicit steps each, bench_implicit), small enough to
// resolve the bounces and folds the explicit runs show.
inline constexpr double kImplicitStepFactor = 20.0;

// The fewest equal steps no longer than `longest` that make up `interval` (at least 1;
// a step within 1e-9 of fitting counts as fitting).
[[nodiscard]] inline double stepCount(double interval, double longest) {
  return std::max(1.0, std::ceil(interval / longest - 1e-9));
}

// The planned step: time.timeStep when given, else the automatic one from the stable
// explicit step, never above `longest` (a frame interval). Adds a warning when a requested
// explicit step exceeds the stable estimate.
[[nodiscard]] double plannedTimeStep(const TimeDef& time, double stableStep, double longest,
                                     std::vector<std::string>& warnings);

// The step the mesh contact's penalty stiffness is scaled with (mesh_contact.hpp), s: the
// stable explicit step of the bodies as defined (before any fracture, so that a resumed
// run, which defines them again, gets the same), or the planned step of an implicit
// integrator where larger, which an implicit solve can resolve.
[[nodiscard]] double contactReferenceStep(const TimeDef& time, double stableStep);

class TimeIntegrator {
 public:
  // The integration strategy from time.integrator (validated); `timeStep` is the planned
  // step, s, > 0. `warn` receives one message the first time a step is rejected.
  TimeIntegrator(const TimeDef& time, double timeStep,
                 std::function<void(const std::string&)> warn = {});

  // Steps the world by `interval` seconds (> 0) in n equal steps of interval / n, n the
  // fewest that keep them no longer than the planned step, each through the pipeline above.
  // world.time ends exactly at `endTime`, which is world.time + interval up to rounding
  // (frame times are exact multiples of the frame interval, not sums of steps). Needs
  // computeAccelerations(world) once before the first call (and after the world's state
  // was changed from outside). Throws NumericalError when a step fails at the deepest
  // split, leaving the world mid-step; InputError when the interval needs more than
  // kMaxStepsPerAdvance steps.
  void advance(World& world, double interval, double endTime, PhaseTimes& times);

  [[nodiscard]] double timeStep() const { return timeStep_; }
  void setTimeStep(double timeStep);
  // Checked before every step: once it reads true, advance throws Interrupted (the world
  // is then left between two steps; the caller restores the advance's start).
  void setStopFlag(const std::atomic<bool>* stop) { stop_ = stop; }
  // Explicit integration only: the planned step was chosen for a stable explicit step of
  // `stableStep` (s). When a topology edit (fracture making small elements) lowers the
  // bodies' stable step, the step is lowered in proportion, for the rest of the run (a
  // warning says so), and the rest of the interval being advanced is re-divided.
  void followStableStep(double stableStep);
  [[nodiscard]] bool implicit() const { return implicit_.has_value(); }
  [[nodiscard]] const StepCounts& counts() const { return counts_; }
  void setCounts(const StepCounts& counts) { counts_ = counts; }
  // Drops what the implicit solver keeps between steps (the frozen Cholesky factor, the
  // sparsity analysis): the next step starts as the first one did. A checkpoint does this
  // where it is taken, so that a run resumed from it takes exactly the steps of the run
  // that wrote it (the factor changes the Newton iterates, not what they converge to).
  void dropSolverCaches();

 private:
  // The world at the start of a step, per split depth (buffers reused).
  struct StepStart {
    double time = 0;                     // s
    std::vector<BodyKinematics> bodies;  // per body
    double contactEnergy = 0;            // J
    double externalWork = 0;             // J
    double externalWorkMagnitude = 0;    // J
    double obstaclePower = 0;            // W
    std::vector<FreeMotion> obstacles;   // per obstacle
  };

  // One step of length dt through propose / accept? / commit, split on rejection.
  void stepWithRetry(World& world, double dt, int depth, PhaseTimes& times);
  // Why a proposal is rejected (empty: accepted), and whether every rejecting model allows
  // accepting it at the deepest split (StepVerdict::acceptAtFinest).
  struct Rejection {
    std::string reason;
    bool acceptAtFinest = false;
    bool sustained = false;  // some rejecting model's cause lasts (StepVerdict::sustained)
  };
  // Proposes one step from `start` and inspects it.
  Rejection proposeAndInspect(World& world, double dt, const StepStart& start, PhaseTimes& times);
  void save(const World& world, StepStart& start) const;
  static void restore(World& world, const StepStart& start);

  // Lowers timeStep_ in proportion to the world's stable step (followStableStep); true if it
  // did.
  bool followTopology(const World& world);

  std::optional<ImplicitStepper> implicit_;
  double timeStep_ = 0;  // s
  bool explicit_ = false;
  double stepPerStableStep_ = 0;  // planned step / stable step when planned; 0: not followed
  bool warnedStableStep_ = false;
  bool warnedFinest_ = false;
  // Intersecting triangle pairs (ContactDef::rejectIntersections) in the last accepted
  // state, -1 while unknown (each advance counts them afresh, and so does a commit that
  // changed a topology), and in the last proposal.
  int64_t acceptedCrossings_ = -1;
  int64_t proposedCrossings_ = 0;
  // The split depth the last sustained rejection needed (0: none), and the steps accepted
  // since it or since it last relaxed.
  int sustainedDepth_ = 0;
  int acceptedSinceSustained_ = 0;
  std::function<void(const std::string&)> warn_;
  StepCounts counts_;
  std::vector<StepStart> starts_;            // (kMaxStepSplits + 1)
  const std::atomic<bool>* stop_ = nullptr;  // setStopFlag
};

}  // namespace shellsim
