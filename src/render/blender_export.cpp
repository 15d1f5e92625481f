// `shellsim export-blend`: a finished run as a .blend file, made by the system's Blender run
// headless on our script (blender_export.py, compiled in), which reads a plan of the run
// written here: the frames and their files, the bodies and their colours, the obstacles and
// their offsets, the camera the renderer would use.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/subprocess.hpp"
#include "io/json_file.hpp"
#include "render/blender_script.hpp"
#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/render.hpp"
#include "shellsim/run.hpp"

namespace shellsim {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

void writeText(const fs::path& path, const std::string& text) {
  writeFileAtomically(path, [&](std::ostream& out) { out << text; });
}

}  // namespace

BlendExport exportBlend(const fs::path& runFolder, const fs::path& blendFile,
                        const BlendExportOptions& options) {
  const detail::RunInfo run = detail::readRunInfo(runFolder);
  const Json summary = readJsonFile(run.summaryPath);
  const Bounds bounds = detail::runBounds({&run});
  const Camera camera =
      run.camera ? *run.camera
                 : fitCamera(bounds, run.up, static_cast<double>(options.width) / options.height);
  double extent = 0;
  for (int c = 0; c < 3; ++c) extent = std::max(extent, bounds.max[c] - bounds.min[c]);

  Json plan;
  const fs::path blend = fs::absolute(blendFile);
  plan["fps"] = detail::frameRateOf(run);
  plan["resolution"] = {options.width, options.height};
  plan["camera"] = {{"eye", camera.eye},
                    {"target", camera.target},
                    {"up", camera.up},
                    {"fov", camera.fovDegrees}};
  // The renderer's key light: from above, a little to the side.
  plan["light_direction"] = {0.3 - run.up[0], -0.2 - run.up[1], -run.up[2]};
  plan["ground_size"] = 20 * std::max(extent, 1e-3);
  Json bodies = Json::array();
  for (size_t b = 0; b < run.bodies.size(); ++b) {
    const std::array<float, 3> color = detail::paletteColor(static_cast<int32_t>(b));
    bodies.push_back({{"name", run.bodies[b].name}, {"color", color}});
  }
  plan["bodies"] = bodies;
  plan["obstacles"] = summary.at("view").value("obstacles", Json::array());
  const auto obstacleCount = plan["obstacles"].size();
  Json frames = Json::array();
  const Json& recorded = summary.at("frames");
  for (size_t k = 0; k < run.frames.size(); ++k) {
    const detail::RunFrame& frame = run.frames[k];
    Json files = Json::array();
    for (const fs::path& file : frame.files) files.push_back(fs::absolute(file).string());
    Json offsets = Json::array();
    if (const auto it = recorded[k].find("obstacle_offsets"); it != recorded[k].end()) {
      offsets = *it;
      if (offsets.size() != obstacleCount) {
        throw InputError(run.summaryPath.string() + ": frame " + std::to_string(frame.frame) +
                         " has " + std::to_string(offsets.size()) + " obstacle offsets for " +
                         std::to_string(obstacleCount) + " obstacles");
      }
    }
    frames.push_back({{"frame", frame.frame}, {"files", files}, {"offsets", offsets}});
  }
  plan["frames"] = frames;

  const fs::path folder = blend.parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw IoError(folder.string() + ": cannot create: " + ec.message());
  const std::string stem = "." + blend.stem().string() + "." + std::to_string(getpid());
  const fs::path planPath = folder / (stem + ".plan.json");
  const fs::path scriptPath = folder / (stem + ".export.py");
  const fs::path log = folder / (blend.stem().string() + ".blender.log");
  // Blender saves to a temporary name, renamed over the target once it succeeded: a failed
  // export leaves no half file.
  const fs::path temp = folder / (stem + ".blend");
  plan["blend"] = temp.string();
  writeText(planPath, plan.dump());
  writeText(scriptPath, std::string(detail::kBlenderExportScript));
  const ProcessResult result =
      runProgram({options.blender, "-b", "--factory-startup", "--python-exit-code", "3", "--python",
                  scriptPath.string(), "--", planPath.string()},
                 log);
  fs::remove(planPath, ec);
  fs::remove(scriptPath, ec);
  if (result.spawnError != 0) {
    fs::remove(log, ec);
    throw IoError(options.blender + ": cannot run Blender (" + result.how() +
                  "); install it with scripts/install-deps.sh or give --blender PATH");
  }
  // The script's last line says what it made.
  std::ifstream in(log);
  std::string line, report;
  while (std::getline(in, line)) {
    if (line.rfind("SHELLSIM_EXPORT ", 0) == 0) report = line.substr(16);
  }
  if (!result.succeeded() || report.empty() || !fs::exists(temp)) {
    fs::remove(temp, ec);
    throw IoError(blend.string() + ": Blender failed (" + result.how() + "); its messages are in " +
                  log.string());
  }
  fs::rename(temp, blend, ec);
  if (ec) throw IoError(blend.string() + ": cannot rename " + temp.string() + ": " + ec.message());
  fs::remove(log, ec);
  const Json made = Json::parse(report);
  BlendExport exported;
  exported.blendFile = blend;
  exported.objects = made.at("objects").get<int32_t>();
  exported.frameStart = made.at("frame_start").get<int32_t>();
  exported.frameEnd = made.at("frame_end").get<int32_t>();
  exported.frameRate = made.at("fps").get<double>();
  if (const RunStatus status = readRunStatus(runFolder); status.status != "completed") {
    exported.messages.push_back(status.description);
  }
  return exported;
}

}  // namespace shellsim
