#include "shellsim/run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <sstream>

#include "dynamics/implicit.hpp"
#include "dynamics/recorder.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

// Safety factor on the stable-step estimate when the scene asks for an automatic step.
constexpr double kAutomaticStepSafety = 0.5;
// Automatic step of the implicit integrators, in stable explicit steps: large enough to pay
// for the Newton solves (about 20-30 explicit steps each, bench_implicit), small enough to
// resolve the bounces and folds the explicit runs show.
constexpr double kImplicitStepFactor = 20.0;

// A frame that blows up is recomputed from its start with half the step, at most this
// many times (down to 1/16 of the step) before the run gives up. The stable-step estimate
// holds at rest; contact and large deformation can stiffen a shell beyond it.
constexpr int kMaxStepHalvings = 4;

// The state a frame starts from, to recompute the frame with a smaller step.
struct Checkpoint {
  double time = 0;
  std::vector<std::vector<double>> positions, velocities;  // per body
  std::vector<std::unique_ptr<ModelState>> models;         // per body, null if elastic
  std::vector<int64_t> brokenElements;                     // per body
  std::vector<int32_t> cracks;                             // per body
};

Checkpoint save(const World& world) {
  Checkpoint c;
  c.time = world.time;
  for (const Body& body : world.bodies) {
    c.positions.push_back(body.positions);
    c.velocities.push_back(body.velocities);
    c.models.push_back(body.model->saveState());
    c.brokenElements.push_back(body.brokenElements);
    c.cracks.push_back(body.cracks);
  }
  return c;
}

void restore(World& world, const Checkpoint& c) {
  world.time = c.time;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    world.bodies[b].positions = c.positions[b];
    world.bodies[b].velocities = c.velocities[b];
    Body& body = world.bodies[b];
    if (c.models[b]) {
      const size_t cracksBefore = body.model->crackDiscs().size();
      body.model->restoreState(c.models[b].get());
      if (body.embedded && body.model->crackDiscs().size() != cracksBefore) {
        // The binding knows cracks the restored state has not had yet: bind again.
        body.embedded =
            std::make_unique<SurfaceBinding>(body.embedded->restNodes(), *body.embeddedRest,
                                             SurfaceBindingParams{}, body.model->crackDiscs());
        body.embeddedPieces = 1;
      }
    }
    world.bodies[b].brokenElements = c.brokenElements[b];
    world.bodies[b].cracks = c.cracks[b];
  }
  computeAccelerations(world);  // also re-prepares model state (e.g. reference normals)
}

struct StepPlan {
  double timeStep = 0;  // s, divides the frame interval exactly
  int64_t stepsPerFrame = 0;
};

bool isImplicit(const TimeDef& time) {
  return time.integrator == Integrator::kBackwardEuler ||
         (time.integrator == Integrator::kNewmark && time.newmarkBeta > 0);
}

StepPlan planSteps(double requested, double stable, double frameInterval, bool implicit,
                   std::vector<std::string>& warnings) {
  double target =
      requested > 0 ? requested : (implicit ? kImplicitStepFactor : kAutomaticStepSafety) * stable;
  if (!implicit && requested > 0 && requested > stable) {
    std::ostringstream msg;
    msg << "time.time_step = " << requested << " s is above the stable explicit step estimate "
        << stable << " s; the run may blow up";
    warnings.push_back(msg.str());
  }
  target = std::min(target, frameInterval);
  StepPlan plan;
  plan.stepsPerFrame = static_cast<int64_t>(std::ceil(frameInterval / target - 1e-9));
  plan.stepsPerFrame = std::max<int64_t>(plan.stepsPerFrame, 1);
  plan.timeStep = frameInterval / static_cast<double>(plan.stepsPerFrame);
  return plan;
}

}  // namespace

RunReport runScene(const SceneDef& scene, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  World world = buildWorld(scene);
  RunReport report;
  report.warnings = world.warnings;
  report.stableTimeStep = stableTimeStep(world);

  const double frameInterval = 1.0 / scene.time.frameRate;
  const bool implicit = isImplicit(scene.time);
  const StepPlan plan = planSteps(scene.time.timeStep, report.stableTimeStep, frameInterval,
                                  implicit, report.warnings);
  report.timeStep = plan.timeStep;
  std::optional<ImplicitStepper> implicitStepper;
  if (scene.time.integrator != Integrator::kVerlet) {
    ImplicitSettings settings;
    settings.scheme = scene.time.integrator == Integrator::kBackwardEuler
                          ? ImplicitScheme::kBackwardEuler
                          : ImplicitScheme::kNewmark;
    settings.beta = scene.time.newmarkBeta;
    settings.gamma = scene.time.newmarkGamma;
    settings.newton.tolerance = scene.time.newtonTolerance;
    settings.newton.maxIterations = scene.time.newtonMaxIterations;
    settings.newton.frozenHessian = scene.time.newtonFrozenHessian;
    implicitStepper.emplace(settings);
  }
  if (static_cast<double>(plan.stepsPerFrame) > 1e7) {
    std::ostringstream msg;
    msg << "the stable time step " << report.stableTimeStep
        << " s needs more than 10^7 steps per frame; the material is too stiff for explicit "
           "integration at this resolution";
    throw InputError(msg.str());
  }
  int32_t frameCount =
      static_cast<int32_t>(std::floor(scene.time.duration / frameInterval + 1e-9)) + 1;
  if (options.maxFrames) frameCount = std::min(frameCount, std::max(*options.maxFrames, 1));

  Recorder recorder(options.outputFolder.value_or(scene.output.folder), scene.output.formats,
                    scene.output.camera);
  report.outputFolder = recorder.folder();
  report.summaryPath = recorder.summaryPath();
  for (const auto& warning : report.warnings) {
    if (options.onWarning) options.onWarning(warning);
  }

  const std::string sceneName = options.sceneName;
  PhaseTimes times;
  applyScriptedMotion(world);
  computeAccelerations(world);
  checkState(world);
  const EnergyGuard energyGuard(world);
  NewtonCounts newton;  // implicit runs, so far

  const auto record = [&](int32_t frame) {
    {
      const auto outputStart = std::chrono::steady_clock::now();
      recorder.writeFrame(world, frame, report.steps, elapsed(),
                          implicitStepper ? std::optional<NewtonCounts>(newton) : std::nullopt);
      recorder.writeSummary(world, sceneName, report.timeStep, report.stableTimeStep, times,
                            report.warnings, frame + 1 == frameCount ? "completed" : "running", "");
      times.output +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - outputStart).count();
    }
    report.framesWritten = frame + 1;
    if (options.onProgress) {
      options.onProgress({frame, frameCount, world.time, report.steps, elapsed()});
    }
  };

  record(0);
  int64_t stepsPerFrame = plan.stepsPerFrame;
  for (int32_t frame = 1; frame < frameCount; ++frame) {
    const Checkpoint checkpoint = save(world);
    for (int halvings = 0;; ++halvings) {
      try {
        const double dt = frameInterval / static_cast<double>(stepsPerFrame);
        for (int64_t s = 0; s < stepsPerFrame; ++s) {
          if (implicitStepper) {
            const ImplicitStepReport solved = implicitStepper->step(world, dt, times);
            for (const NewtonReport& body : solved.bodies) {
              newton.iterations += body.iterations;
              newton.factorizations += body.factorizations;
            }
          } else {
            step(world, dt, times);
          }
          ++report.steps;
        }
        energyGuard.check(world);
        break;
      } catch (const NumericalError& e) {
        std::ostringstream msg;
        msg << e.what() << " (while computing frame " << frame << " with time step "
            << frameInterval / static_cast<double>(stepsPerFrame) << " s)";
        if (halvings == kMaxStepHalvings) {
          recorder.writeSummary(world, sceneName, report.timeStep, report.stableTimeStep, times,
                                report.warnings, "numerical_failure", msg.str());
          throw NumericalError(msg.str());
        }
        restore(world, checkpoint);
        stepsPerFrame *= 2;
        report.timeStep = frameInterval / static_cast<double>(stepsPerFrame);
        std::ostringstream warning;
        warning << msg.str() << "; recomputing the frame with time step " << report.timeStep
                << " s";
        report.warnings.push_back(warning.str());
        if (options.onWarning) options.onWarning(warning.str());
      }
    }
    // Frame times are exact multiples of the frame interval, not accumulated sums.
    world.time = frame * frameInterval;
    record(frame);
  }
  // Refresh phase times (the output of the last frame) in the final summary.
  recorder.writeSummary(world, sceneName, report.timeStep, report.stableTimeStep, times,
                        report.warnings, "completed", "");
  return report;
}

}  // namespace shellsim
