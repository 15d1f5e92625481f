#include "shellsim/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/byte_stream.hpp"
#include "dynamics/recorder.hpp"
#include "dynamics/simulation_impl.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/world.hpp"

namespace shellsim {

namespace {

constexpr const char* kCheckpointName = "checkpoint.bin";

// The run's section of a checkpoint: the frame it was taken at, the recorder's frame
// records and the warnings so far.
std::vector<uint8_t> runSection(int32_t frame, const Recorder& recorder,
                                const std::vector<std::string>& warnings) {
  ByteWriter out;
  out.value(frame);
  recorder.writeRecords(out);
  out.value<uint64_t>(warnings.size());
  for (const std::string& w : warnings) out.string(w);
  return out.take();
}

}  // namespace

// A short loop over the public API (shellsim/world.hpp): build, then advance a frame and
// record it, frame after frame. The recorder reads the world behind the API.
RunReport runScene(const SceneDef& scene, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  double wallOffset = 0;  // s, the wall time of the run resumed, up to its checkpoint
  const auto elapsed = [&] {
    return wallOffset +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  Simulation simulation(scene);
  Simulation::Impl& impl = implOf(simulation);
  RunReport report;
  report.stableTimeStep = simulation.stableTimeStep();
  report.timeStep = simulation.timeStep();  // plans the step; may warn
  report.warnings = simulation.warnings();
  const double frameInterval = 1.0 / scene.time.frameRate;
  const bool isStatic = scene.time.integrator == Integrator::kStatic;
  int32_t frameCount =
      isStatic ? scene.time.loadIncrements + 1
               : static_cast<int32_t>(std::floor(scene.time.duration / frameInterval + 1e-9)) + 1;
  if (options.maxFrames) frameCount = std::min(frameCount, std::max(*options.maxFrames, 1));

  Recorder recorder(options.outputFolder.value_or(scene.output.folder), scene.output.formats,
                    scene.output.camera);
  report.outputFolder = recorder.folder();
  report.summaryPath = recorder.summaryPath();
  const std::filesystem::path checkpointPath = recorder.folder() / kCheckpointName;
  for (const auto& warning : report.warnings) {
    if (options.onWarning) options.onWarning(warning);
  }

  int32_t firstFrame = 0;  // the first frame to compute and write
  if (options.resume) {
    if (!std::filesystem::exists(checkpointPath)) {
      throw InputError(checkpointPath.string() +
                       ": no checkpoint to resume from (the run wrote none: it stopped before "
                       "its first frame, or output.checkpoint_every is 0)");
    }
    SimulationState state;
    const std::vector<uint8_t> section =
        decodeState(impl, readFileBytes(checkpointPath), checkpointPath.string(), state);
    ByteReader in(section, checkpointPath.string());
    const auto frame = in.value<int32_t>("checkpoint frame");
    recorder.readRecords(in);
    if (frame < 0 || static_cast<size_t>(frame) + 1 != recorder.frames().size()) {
      in.fail("the checkpoint's frame does not match its frame records");
    }
    recorder.resumePointCaches(impl.world);
    const auto warnings = in.value<uint64_t>("warning count");
    if (warnings > 100'000) in.fail(std::to_string(warnings) + " warnings");
    report.warnings.clear();
    for (uint64_t w = 0; w < warnings; ++w) report.warnings.push_back(in.string("warning"));
    if (!in.atEnd()) in.fail("bytes after the run section");
    simulation.restoreState(state);
    report.timeStep = simulation.timeStep();
    wallOffset = recorder.frames().back().wallSeconds;
    firstFrame = frame + 1;
    report.framesWritten = firstFrame;
  } else {
    // A checkpoint left by an earlier run in this folder belongs to that run.
    std::error_code ignored;
    std::filesystem::remove(checkpointPath, ignored);
  }
  simulation.onWarning([&](const std::string& warning) {
    report.warnings.push_back(warning);
    if (options.onWarning) options.onWarning(warning);
  });

  const std::string sceneName = options.sceneName;
  const bool implicit = isStatic || impl.integrator->implicit();
  double outputSeconds = 0;
  const auto summary = [&](const std::string& status, const std::string& error) {
    PhaseTimes times = impl.times;
    times.output = outputSeconds;
    recorder.writeSummary(impl.world, sceneName, report.timeStep, report.stableTimeStep, times,
                          report.warnings, status, error);
  };
  const int32_t checkpointEvery = scene.output.checkpointEvery;
  const auto checkpoint = [&](int32_t frame) {
    writeEncodedState(checkpointPath, impl, simulation.saveState(),
                      runSection(frame, recorder, report.warnings));
  };
  const auto record = [&](int32_t frame) {
    const auto outputStart = std::chrono::steady_clock::now();
    std::optional<StaticFrame> staticFrame;
    if (isStatic && frame > 0 && impl.lastIncrement) {
      staticFrame = StaticFrame{impl.lastIncrement->loadFactor, impl.lastIncrement->residual};
    }
    recorder.writeFrame(impl.world, frame, impl.counts(), implicit, elapsed(), staticFrame);
    summary(frame + 1 == frameCount ? "completed" : "running", "");
    if (checkpointEvery > 0 && frame % checkpointEvery == 0) checkpoint(frame);
    outputSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - outputStart).count();
    report.framesWritten = frame + 1;
    report.steps = simulation.statistics().steps;
    if (options.onProgress) {
      options.onProgress({frame, frameCount, simulation.time(), report.steps, elapsed()});
    }
  };

  if (firstFrame == 0) {
    record(0);
    firstFrame = 1;
  }
  simulation.setStopFlag(options.stopFlag);
  for (int32_t frame = firstFrame; frame < frameCount; ++frame) {
    try {
      if (options.stopFlag != nullptr && options.stopFlag->load()) {
        std::ostringstream msg;
        msg << "stopped on request at t = " << simulation.time() << " s";
        throw Interrupted(msg.str());
      }
      simulation.advanceFrames(1);
    } catch (const Interrupted& e) {
      // The simulation is back at the end of frame - 1, the last one written: checkpoint it
      // so that --resume loses nothing, then say why the run ended.
      const bool resumable = checkpointEvery > 0;
      if (resumable && frame - 1 >= 0) checkpoint(frame - 1);
      const std::string message = std::string(e.what()) + "; frames 0.." +
                                  std::to_string(frame - 1) + " are written" +
                                  (resumable ? "; continue with --resume"
                                             : " (no checkpoint: output.checkpoint_every is 0)");
      summary("interrupted", message);
      throw Interrupted(message);
    } catch (const NumericalError& e) {
      report.timeStep = simulation.timeStep();
      summary("numerical_failure", e.what());
      throw;
    }
    report.timeStep = simulation.timeStep();
    record(frame);
  }
  // Refresh phase times (the output of the last frame) in the final summary.
  report.steps = simulation.statistics().steps;
  summary("completed", "");
  return report;
}

RunStatus readRunStatus(const std::filesystem::path& folder) {
  const std::filesystem::path path =
      std::filesystem::is_directory(folder) ? folder / "summary.json" : folder;
  const std::vector<uint8_t> bytes = readFileBytes(path);
  const nlohmann::json summary = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr,
                                                       /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return InputError(path.string() + ": not a shellsim run summary (" + why + ")");
  };
  if (summary.is_discarded() || !summary.is_object()) throw bad("not valid JSON");
  const auto text = [&](const char* key) -> std::string {
    const auto it = summary.find(key);
    return it != summary.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  RunStatus run;
  run.status = text("status");
  if (run.status.empty()) throw bad("no status");
  run.error = text("error");
  run.scene = text("scene");
  if (const auto frames = summary.find("frames"); frames != summary.end() && frames->is_array()) {
    run.framesWritten = static_cast<int32_t>(frames->size());
    if (!frames->empty() && frames->back().is_object()) {
      run.time = frames->back().value("time", 0.0);
    }
  }
  std::ostringstream line;
  line << path.parent_path().string() << ": " << run.status << ", " << run.framesWritten
       << " frames to t = " << run.time << " s";
  // RunOptions::sceneName is "default" for the built-in scene, which `run` takes bare.
  const std::string scene = run.scene.empty()        ? "SCENE "
                            : run.scene == "default" ? ""
                                                     : run.scene + " ";
  const std::string resume =
      "`shellsim run " + scene + "--out " + path.parent_path().string() + " --resume` continues it";
  if (run.status == "running") {
    long pid = 0;
    std::string host;
    if (const auto process = summary.find("process");
        process != summary.end() && process->is_object()) {
      pid = process->value("pid", 0L);
      host = process->value("host", std::string());
    }
    if (pid <= 0 || host.empty()) {
      line << " (the summary does not say which process writes it: if no run is writing it, "
           << "it stopped without finishing; " << resume << ")";
    } else if (host != hostName()) {
      line << " (written by process " << pid << " on host " << host
           << ": whether it still runs cannot be told from here)";
    } else if (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) {
      line << " (process " << pid << " is writing it)";
    } else {
      run.stale = true;
      line << ", but stopped without finishing: its process " << pid
           << " is gone (killed, or the machine went down); " << resume;
    }
  } else if (!run.error.empty()) {
    line << ": " << run.error;
  }
  run.description = line.str();
  return run;
}

}  // namespace shellsim
