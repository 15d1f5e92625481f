#include "shellsim/run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "dynamics/recorder.hpp"
#include "dynamics/simulation_impl.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/world.hpp"

namespace shellsim {

// A short loop over the public API (shellsim/world.hpp): build, then advance a frame and
// record it, frame after frame. The recorder reads the world behind the API.
RunReport runScene(const SceneDef& scene, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  Simulation simulation(scene);
  const Simulation::Impl& impl = implOf(std::as_const(simulation));
  RunReport report;
  report.stableTimeStep = simulation.stableTimeStep();
  report.timeStep = simulation.timeStep();  // plans the step; may warn
  report.warnings = simulation.warnings();
  const double frameInterval = 1.0 / scene.time.frameRate;
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
  simulation.onWarning([&](const std::string& warning) {
    report.warnings.push_back(warning);
    if (options.onWarning) options.onWarning(warning);
  });

  const std::string sceneName = options.sceneName;
  const bool implicit = impl.integrator->implicit();
  double outputSeconds = 0;
  const auto summary = [&](const std::string& status, const std::string& error) {
    PhaseTimes times = impl.times;
    times.output = outputSeconds;
    recorder.writeSummary(impl.world, sceneName, report.timeStep, report.stableTimeStep, times,
                          report.warnings, status, error);
  };
  const auto record = [&](int32_t frame) {
    const auto outputStart = std::chrono::steady_clock::now();
    recorder.writeFrame(impl.world, frame, impl.integrator->counts(), implicit, elapsed());
    summary(frame + 1 == frameCount ? "completed" : "running", "");
    outputSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - outputStart).count();
    report.framesWritten = frame + 1;
    report.steps = simulation.statistics().steps;
    if (options.onProgress) {
      options.onProgress({frame, frameCount, simulation.time(), report.steps, elapsed()});
    }
  };

  record(0);
  for (int32_t frame = 1; frame < frameCount; ++frame) {
    try {
      simulation.advanceFrames(1);
    } catch (const NumericalError& e) {
      report.timeStep = simulation.timeStep();
      summary("numerical_failure", e.what());
      throw;
    }
    report.timeStep = simulation.timeStep();
    record(frame);
  }
  // Refresh phase times (the output of the last frame) in the final summary.
  summary("completed", "");
  return report;
}

}  // namespace shellsim
