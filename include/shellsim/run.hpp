// Running a scene: the library entry point behind `shellsim run`.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shellsim/scene.hpp"

namespace shellsim {

// Reported after every frame written.
struct RunProgress {
  int32_t frame = 0;         // index of the frame just written, 0 = initial state
  int32_t frameCount = 0;    // frames the run will write in all
  double simulatedTime = 0;  // s
  int64_t steps = 0;         // steps taken so far
  double wallSeconds = 0;    // since the run started
};

struct RunOptions {
  std::string sceneName = "default";                  // recorded in the summary
  std::optional<std::filesystem::path> outputFolder;  // overrides scene.output.folder
  std::optional<int32_t> maxFrames;                   // stop after this many frames (incl. frame 0)
  std::function<void(const RunProgress&)> onProgress;  // called after each frame
  std::function<void(const std::string&)> onWarning;   // called once per warning
  // Continue a run that stopped (killed, power loss) from the last checkpoint in the output
  // folder (output.checkpoint_every): the frames after it are computed again and are
  // byte-identical to an uninterrupted run's, and so are the summary's simulated
  // quantities. A checkpoint that is missing, corrupt, from another scene or another
  // format version throws InputError naming it.
  bool resume = false;
  // Read before every step and frame (Simulation::setStopFlag): once true, the run stops
  // between two steps, keeps every frame written, checkpoints the last one (when
  // output.checkpoint_every > 0, so that `resume` continues from it), writes
  // `status: interrupted` in the summary and throws Interrupted.
  const std::atomic<bool>* stopFlag = nullptr;
};

struct RunReport {
  int32_t framesWritten = 0;
  int64_t steps = 0;
  double timeStep = 0;        // s
  double stableTimeStep = 0;  // s, the estimate for explicit integration
  std::filesystem::path outputFolder;
  std::filesystem::path summaryPath;
  std::vector<std::string> warnings;
};

// Builds the world, steps it and writes frames (one file per body, frame and format
// under <output>/frames/) and <output>/summary.json, which is rewritten atomically after
// every frame. A frame that blows up (NaN, runaway speed) is recomputed from its start with
// half the time step, up to 4 times, with a warning; the smaller step is kept for the rest
// of the run. If it still fails, the summary records the failure, the frames already
// written stay valid, the failing state is not written, and NumericalError is rethrown.
// After every output.checkpoint_every frames the state goes to <output>/checkpoint.bin
// (atomically), for RunOptions::resume.
RunReport runScene(const SceneDef& scene, const RunOptions& options = {});

// What a run folder's summary.json says of the run, and whether a run it says is still
// running really is: `running` with its writing process gone (killed, the machine lost)
// is a run that stopped without finishing.
struct RunStatus {
  std::string status;  // "running", "completed", "interrupted", "numerical_failure"
  std::string error;   // why it stopped, when it did not complete
  std::string scene;   // the scene file it ran
  int32_t framesWritten = 0;
  double time = 0;          // s, of the last frame written
  bool stale = false;       // says running, but its process is gone from this host
  std::string description;  // one line for a user: the state, and what to do about it
};
// Reads <folder>/summary.json. IoError when it cannot be read, InputError when it is not a
// run summary; both name the file.
RunStatus readRunStatus(const std::filesystem::path& folder);

}  // namespace shellsim
