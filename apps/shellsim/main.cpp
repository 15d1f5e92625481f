// The shellsim command-line tool: parses arguments and calls the library.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/render.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace {

using shellsim::ExitCode;

constexpr const char* kExitCodes =
    "Exit codes:\n"
    "  0  success\n"
    "  1  internal error (a bug in shellsim)\n"
    "  2  bad input: command line, scene file or geometry file\n"
    "  3  numerical failure: the simulation blew up (NaN, velocity beyond bound)\n"
    "  4  I/O failure: a file could not be read or written\n";

struct CommonOptions {
  int threads = 0;
  bool quiet = false;
};

void addCommonOptions(CLI::App* command, CommonOptions& common) {
  command->add_option("--threads", common.threads, "Worker threads (0: all cores)")
      ->check(CLI::Range(0, 1024));
  command->add_flag("-q,--quiet", common.quiet, "Print errors only");
  command->footer(kExitCodes);
}

std::string formatSeconds(double seconds) {
  std::ostringstream out;
  out.precision(seconds < 10 ? 2 : 0);
  out << std::fixed << seconds << " s";
  return out.str();
}

// A progress bar redrawn in place on a terminal; plain log lines otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), terminal_(isatty(STDERR_FILENO) != 0) {}

  void operator()(const shellsim::RunProgress& p) {
    if (quiet_) return;
    const double stepsPerSecond =
        p.wallSeconds > 0 ? static_cast<double>(p.steps) / p.wallSeconds : 0;
    const double done = static_cast<double>(p.frame + 1) / p.frameCount;
    const double eta = done > 0 ? p.wallSeconds * (1 - done) / done : 0;
    char line[256];
    std::snprintf(line, sizeof line, "frame %d/%d  t = %.3f s  %.0f steps/s  ETA %s", p.frame + 1,
                  p.frameCount, p.simulatedTime, stepsPerSecond, formatSeconds(eta).c_str());
    if (terminal_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(done * kWidth);
      std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
                << std::string(static_cast<size_t>(kWidth - filled), '.') << "] " << line
                << "\x1b[K" << std::flush;
      if (p.frame + 1 == p.frameCount) std::cerr << '\n';
    } else {
      std::cerr << line << '\n';
    }
  }

 private:
  bool quiet_;
  bool terminal_;
};

struct PreviewOptions {
  std::string size = "1280x720";
  bool pins = false;
  bool wireframe = false;
  bool noVideo = false;
};

void addPreviewOptions(CLI::App* command, PreviewOptions& preview) {
  command->add_option("--size", preview.size, "Image size WIDTHxHEIGHT")->capture_default_str();
  command->add_flag("--pins", preview.pins, "Mark pinned nodes with red dots");
  command->add_flag("--wireframe", preview.wireframe,
                    "Draw the edges of triangle meshes (to see cuts, budges, slivers)");
  command->add_flag("--no-video", preview.noVideo, "PNG frames and contact sheet only");
}

shellsim::RenderOptions renderOptions(const PreviewOptions& preview, const CommonOptions& common) {
  shellsim::RenderOptions options;
  int width = 0, height = 0;
  char extra = 0;
  if (std::sscanf(preview.size.c_str(), "%dx%d%c", &width, &height, &extra) != 2) {
    throw shellsim::InputError("--size " + preview.size + ": expected WIDTHxHEIGHT, e.g. 1280x720");
  }
  options.settings.width = width;
  options.settings.height = height;
  options.settings.showPins = preview.pins;
  options.settings.wireframe = preview.wireframe;
  options.video = !preview.noVideo;
  options.onMessage = [](const std::string& m) { std::cerr << "shellsim: " << m << '\n'; };
  if (!common.quiet) {
    options.onFrame = [](int32_t frame, int32_t count) {
      if (frame + 1 == count || (frame + 1) % 30 == 0) {
        std::cerr << "rendered frame " << frame + 1 << "/" << count << '\n';
      }
    };
  }
  return options;
}

void printRenderReport(const shellsim::RenderReport& report, const CommonOptions& common) {
  if (common.quiet) return;
  std::cout << "rendered " << report.framesRendered << " frames to " << report.framesFolder.string()
            << '\n';
  if (report.video) std::cout << "video: " << report.video->string() << '\n';
  std::cout << "contact sheet: " << report.contactSheet.string() << '\n';
  if (!report.energyPlot.empty())
    std::cout << "energy plot: " << report.energyPlot.string() << '\n';
}

int runCommand(const std::optional<std::string>& scenePath, const std::optional<std::string>& out,
               std::optional<int> frames, bool resume, const CommonOptions& common,
               const std::optional<PreviewOptions>& preview) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const shellsim::SceneDef scene =
      scenePath ? shellsim::loadScene(*scenePath) : shellsim::defaultScene();
  shellsim::RunOptions options;
  options.sceneName = scenePath ? *scenePath : "default";
  if (out) options.outputFolder = *out;
  if (frames) options.maxFrames = *frames;
  options.resume = resume;
  options.onProgress = ProgressPrinter(common.quiet);
  std::unique_ptr<shellsim::PreviewRecorder> recorder;
  if (preview) {
    shellsim::RenderOptions renderOpts = renderOptions(*preview, common);
    renderOpts.onFrame = nullptr;  // the run's progress line already counts frames
    recorder = std::make_unique<shellsim::PreviewRecorder>(
        options.outputFolder.value_or(scene.output.folder), std::move(renderOpts));
    options.onProgress = [printer = ProgressPrinter(common.quiet),
                          &recorder](const shellsim::RunProgress& p) mutable {
      recorder->addFrame(p.frame, p.frameCount);
      printer(p);
    };
  }
  options.onWarning = [&](const std::string& w) {
    if (!common.quiet) std::cerr << "warning: " << w << '\n';
  };
  // A test aid (tests/cli/resume_after_kill.sh): SHELLSIM_KILL_AFTER_FRAME=N makes the run
  // kill itself with SIGKILL (no clean-up, as `kill -9` or a power loss) once frame N is
  // written, so that --resume is tested at a known point of a run of any speed.
  if (const char* kill = std::getenv("SHELLSIM_KILL_AFTER_FRAME"); kill != nullptr) {
    const int killFrame = std::atoi(kill);
    options.onProgress = [progress = std::move(options.onProgress),
                          killFrame](const shellsim::RunProgress& p) {
      progress(p);
      if (p.frame == killFrame) std::raise(SIGKILL);
    };
  }
  if (!common.quiet) {
    std::cerr << "shellsim: running " << (scenePath ? *scenePath : "the built-in default scene")
              << " with " << shellsim::ThreadLimit::current() << " threads\n";
  }
  shellsim::RunReport report;
  try {
    report = shellsim::runScene(scene, options);
  } catch (const shellsim::NumericalError&) {
    // The frames before the failure are valid: their preview is worth having.
    if (recorder) recorder->finish();
    throw;
  }
  if (!common.quiet) {
    std::cout << "wrote " << report.framesWritten << " frames (" << report.steps << " steps of "
              << report.timeStep << " s) to " << report.outputFolder.string() << "\n"
              << "summary: " << report.summaryPath.string() << '\n';
  }
  if (recorder) printRenderReport(recorder->finish(), common);
  return 0;
}

int renderCommand(const std::string& folder, const PreviewOptions& preview,
                  const CommonOptions& common) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const auto start = std::chrono::steady_clock::now();
  const shellsim::RenderReport report = shellsim::renderRun(folder, renderOptions(preview, common));
  printRenderReport(report, common);
  if (!common.quiet) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "took " << formatSeconds(seconds) << '\n';
  }
  return 0;
}

int compareCommand(const std::string& a, const std::string& b, const std::string& out,
                   const PreviewOptions& preview, const CommonOptions& common) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const shellsim::RenderReport report =
      shellsim::compareRuns(a, b, out, renderOptions(preview, common));
  printRenderReport(report, common);
  return 0;
}

int infoCommand(const std::string& path, const CommonOptions& common) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const shellsim::Geometry geometry = shellsim::readGeometry(path);
  const shellsim::Bounds bounds = shellsim::computeBounds(geometry);
  std::cout << "file:      " << path << '\n'
            << "kind:      " << (geometry.isPointCloud() ? "point cloud" : "triangle mesh") << '\n'
            << "vertices:  " << geometry.vertexCount() << '\n'
            << "triangles: " << geometry.triangleCount() << '\n'
            << "normals:   " << (geometry.hasNormals() ? "yes" : "no") << '\n'
            << "colors:    " << (geometry.colors.empty() ? "no" : "yes") << '\n'
            << "bounds:    [" << bounds.min[0] << ", " << bounds.min[1] << ", " << bounds.min[2]
            << "] .. [" << bounds.max[0] << ", " << bounds.max[1] << ", " << bounds.max[2] << "]\n";
  if (!geometry.isPointCloud()) {
    const shellsim::MeshTopology t = shellsim::analyzeTopology(geometry);
    std::cout << "edges:     " << t.edgeCount << '\n'
              << "boundary edges:      " << t.boundaryEdgeCount << '\n'
              << "non-manifold edges:  " << t.nonManifoldEdgeCount << '\n'
              << "degenerate triangles: " << t.degenerateTriangleCount << '\n'
              << "connected components: " << t.connectedComponentCount << '\n'
              << "unreferenced vertices: " << t.unreferencedVertexCount << '\n';
  }
  return 0;
}

// Checks what a run checks: the scene file, then the world built from it as `run` builds
// it (every body's geometry read and discretized by its model, pins and loads selected),
// so a mesh the model refuses (non-manifold, a point cloud for a mesh model) fails here
// too. Reports each body's nodes and elements and the time step the run would take.
int validateCommand(const std::string& path, const CommonOptions& common) {
  const shellsim::SceneDef scene = shellsim::loadScene(path);
  shellsim::Simulation simulation(scene);
  if (common.quiet) return 0;
  std::cout << path << ": valid (" << scene.bodies.size() << " bodies, " << scene.obstacles.size()
            << " obstacles)\n";
  for (int32_t b = 0; b < simulation.bodyCount(); ++b) {
    std::cout << "  bodies[" << b << "] '" << simulation.bodyName(b)
              << "': " << simulation.modelName(b) << ", " << simulation.nodeCount(b) << " nodes, "
              << simulation.elementCount(b) << " elements\n";
  }
  const shellsim::TimeDef& time = scene.time;
  if (time.integrator == shellsim::Integrator::kStatic) {
    std::cout << "  static equilibrium in " << time.loadIncrements << " load increments\n";
  } else if (simulation.bodyCount() > 0) {
    const double step = simulation.timeStep();
    std::ostringstream line;
    line.precision(3);
    line << "  time step " << step << " s (stable explicit estimate " << simulation.stableTimeStep()
         << " s): " << static_cast<int64_t>(std::ceil(1.0 / time.frameRate / step - 1e-9))
         << " steps per frame, about "
         << static_cast<int64_t>(std::ceil(time.duration / step - 1e-9)) << " steps in all\n";
    std::cout << line.str();
  }
  for (const std::string& warning : simulation.warnings()) {
    std::cout << "  warning: " << warning << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shellsim: physically based animation of thin and thick shells"};
  app.require_subcommand(1);
  app.footer(kExitCodes);

  CommonOptions common;
  std::optional<std::string> scenePath;
  std::optional<std::string> out;
  std::optional<int> frames;
  CLI::App* run =
      app.add_subcommand("run", "Run a scene (the built-in default scene without SCENE)");
  run->add_option("scene", scenePath, "Scene file (JSON)");
  run->add_option("-o,--out", out, "Output folder (overrides output.folder of the scene)");
  run->add_option("--frames", frames, "Write at most this many frames, frame 0 included")
      ->check(CLI::PositiveNumber);
  bool previewFlag = false;
  PreviewOptions preview;
  CLI::Option* previewOption = run->add_flag(
      "--preview", previewFlag,
      "Render each frame as it is written, then a video, contact sheet and energy plot");
  bool resume = false;
  run->add_flag("--resume", resume,
                "Continue a run that was stopped (killed, power loss) from the last checkpoint "
                "in its output folder; the frames are the same as an uninterrupted run's "
                "(render the finished run with `shellsim render`)")
      ->excludes(previewOption);
  addPreviewOptions(run, preview);
  addCommonOptions(run, common);

  std::string renderFolder;
  CLI::App* render = app.add_subcommand(
      "render", "Render a finished run: PNG frames, video.mp4, contact_sheet.png, energy.png");
  render->add_option("outdir", renderFolder, "Output folder of a run (holds summary.json)")
      ->required();
  addPreviewOptions(render, preview);
  addCommonOptions(render, common);

  std::string runA, runB, compareOut = "out/compare";
  CLI::App* compare = app.add_subcommand("compare", "Render two runs side by side in one video");
  compare->add_option("run_a", runA, "Output folder of the first run")->required();
  compare->add_option("run_b", runB, "Output folder of the second run")->required();
  compare->add_option("-o,--out", compareOut, "Where the frames and compare.mp4 go")
      ->capture_default_str();
  addPreviewOptions(compare, preview);
  addCommonOptions(compare, common);

  std::string filePath;
  CLI::App* info = app.add_subcommand("info", "Describe a mesh or point-cloud file");
  info->add_option("file", filePath, "Geometry file (OBJ, PLY, OFF, STL, XYZ)")->required();
  addCommonOptions(info, common);

  std::string validatePath;
  CLI::App* validate = app.add_subcommand(
      "validate", "Check a scene file and build its bodies as a run would; list every problem");
  validate->add_option("scene", validatePath, "Scene file (JSON)")->required();
  addCommonOptions(validate, common);

  CLI::App* reference =
      app.add_subcommand("scene-reference", "Print the scene file reference (Markdown)");
  addCommonOptions(reference, common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kBadInput);
  }

  try {
    if (run->parsed()) {
      return runCommand(scenePath, out, frames, resume, common,
                        previewFlag ? std::optional<PreviewOptions>(preview) : std::nullopt);
    }
    if (render->parsed()) return renderCommand(renderFolder, preview, common);
    if (compare->parsed()) return compareCommand(runA, runB, compareOut, preview, common);
    if (info->parsed()) return infoCommand(filePath, common);
    if (validate->parsed()) return validateCommand(validatePath, common);
    if (reference->parsed()) {
      std::cout << shellsim::sceneReferenceMarkdown();
      return 0;
    }
  } catch (const shellsim::Error& e) {
    // On a terminal the progress bar may still hold the cursor: start a fresh line.
    if (isatty(STDERR_FILENO) != 0) std::cerr << '\n';
    std::cerr << "shellsim: error: " << e.what() << '\n';
    return static_cast<int>(e.exitCode());
  } catch (const std::bad_alloc&) {
    std::cerr << "shellsim: error: out of memory\n";
    return static_cast<int>(ExitCode::kInternal);
  } catch (const std::exception& e) {
    std::cerr << "shellsim: internal error: " << e.what() << '\n';
    return static_cast<int>(ExitCode::kInternal);
  }
  return static_cast<int>(ExitCode::kInternal);
}
