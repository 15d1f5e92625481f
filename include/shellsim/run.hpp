// Running a scene: the library entry point behind `shellsim run`.
#pragma once

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

}  // namespace shellsim
