// The shellsim command-line tool: parses arguments and calls the library.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
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
#include "shellsim/sweep.hpp"
#include "shellsim/thicken.hpp"
#include "shellsim/world.hpp"

namespace {

using shellsim::ExitCode;

// SIGINT (Ctrl-C) and SIGTERM (kill, a batch system's preemption) ask the run to stop
// between two steps: it keeps its frames, checkpoints and marks its summary `interrupted`.
// The handler is reset on the first signal, so a second one ends the process at once.
std::atomic<bool> stopRequested{false};
volatile std::sig_atomic_t stopSignal = 0;

extern "C" void requestStop(int signal) {
  stopSignal = signal;
  stopRequested.store(true);
}

void installStopHandlers() {
  static_assert(std::atomic<bool>::is_always_lock_free, "used in a signal handler");
  struct sigaction action {};
  action.sa_handler = requestStop;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

constexpr const char* kExitCodes =
    "Exit codes:\n"
    "  0  success\n"
    "  1  internal error (a bug in shellsim)\n"
    "  2  bad input: command line, scene file or geometry file\n"
    "  3  numerical failure: the simulation blew up (NaN, velocity beyond bound)\n"
    "  4  I/O failure: a file could not be read or written\n"
    "  130, 143  stopped by SIGINT (Ctrl-C) or SIGTERM: the frames written are kept, the\n"
    "     summary says interrupted, and `run --resume` continues from the last frame\n";

struct CommonOptions {
  int threads = 0;
  bool quiet = false;
};

// An integer option's lower (and upper) bound, with a message a user reads as the others:
// CLI11's own Range prints the bounds of a double (309 digits for "no upper bound").
CLI::Validator integerAtLeast(int64_t least, int64_t most = std::numeric_limits<int32_t>::max()) {
  return CLI::Validator(
      [least, most](const std::string& text) -> std::string {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not an integer";
        if (value < least || value > most) {
          std::string range = "at least " + std::to_string(least);
          if (most < std::numeric_limits<int32_t>::max()) {
            range = "in [" + std::to_string(least) + ", " + std::to_string(most) + "]";
          }
          return "must be " + range + ", got " + text;
        }
        return "";
      },
      "INT>=" + std::to_string(least));
}

void addCommonOptions(CLI::App* command, CommonOptions& common) {
  command->add_option("--threads", common.threads, "Worker threads (0: all cores)")
      ->check(integerAtLeast(0, 1024));
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
    // The ETA follows the recent frames' rate, not the whole run's: a run slows down when
    // a body hits the floor or starts to crack, and the mean rate would promise too much.
    recent_.push_back({p.frame, p.wallSeconds});
    if (recent_.size() > kRecentFrames) recent_.pop_front();
    double eta = 0;
    if (recent_.size() >= 2 && recent_.back().frame > recent_.front().frame) {
      const double perFrame = (recent_.back().wallSeconds - recent_.front().wallSeconds) /
                              (recent_.back().frame - recent_.front().frame);
      eta = perFrame * (p.frameCount - 1 - p.frame);
    } else if (done > 0) {
      eta = p.wallSeconds * (1 - done) / done;
    }
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
  static constexpr size_t kRecentFrames = 10;  // frames the ETA's rate is taken over
  struct FrameTime {
    int32_t frame;
    double wallSeconds;
  };
  bool quiet_;
  bool terminal_;
  std::deque<FrameTime> recent_;
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
  options.stopFlag = &stopRequested;
  installStopHandlers();
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
  // send itself a signal once frame N is written, so that --resume is tested at a known
  // point of a run of any speed: SIGKILL (no clean-up, as `kill -9` or a power loss), or
  // with SHELLSIM_KILL_SIGNAL=INT or TERM the signal a user's Ctrl-C or a batch system sends.
  if (const char* kill = std::getenv("SHELLSIM_KILL_AFTER_FRAME"); kill != nullptr) {
    const int killFrame = std::atoi(kill);
    const char* name = std::getenv("SHELLSIM_KILL_SIGNAL");
    const std::string signalName = name != nullptr ? name : "KILL";
    const int signal = signalName == "INT" ? SIGINT : signalName == "TERM" ? SIGTERM : SIGKILL;
    options.onProgress = [progress = std::move(options.onProgress), killFrame,
                          signal](const shellsim::RunProgress& p) {
      progress(p);
      if (p.frame == killFrame) std::raise(signal);
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
  } catch (const shellsim::Interrupted&) {
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
  // A run's output folder (or its summary.json): how the run stands.
  if (std::filesystem::is_directory(path) &&
      !std::filesystem::exists(std::filesystem::path(path) / "summary.json")) {
    throw shellsim::IoError(path +
                            ": a folder without summary.json (info takes a geometry file or a "
                            "run's output folder)");
  }
  if (std::filesystem::is_directory(path) ||
      std::filesystem::path(path).filename() == "summary.json") {
    const shellsim::RunStatus run = shellsim::readRunStatus(path);
    std::cout << run.description << '\n';
    return 0;
  }
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
              << "connected components: " << t.connectedComponentCount;
    if (t.connectedComponentCount > 1) {
      std::cout << " (the smallest has " << t.smallestComponentVertexCount << " vertices)";
    }
    std::cout << '\n'
              << "unreferenced vertices: " << t.unreferencedVertexCount << '\n'
              << "duplicate vertices:  " << t.duplicateVertexCount << '\n'
              << "inconsistently oriented edges: " << t.inconsistentEdgeCount << '\n'
              << "median edge length:  " << t.medianEdgeLength << " m\n"
              << "smallest triangle height: " << t.smallestHeight << " m (triangle "
              << t.smallestHeightTriangle << ")\n"
              << "sliver triangles:    " << t.sliverTriangleCount << " (height below "
              << shellsim::kSliverHeightRatio << " of the median edge)\n";
    // What each mesh model will make of it (Simulation::addBody says the same at a run).
    for (const std::string& refusal : shellsim::meshRefusals(t)) {
      std::cout << "refused: " << refusal << '\n';
    }
    for (const std::string& warning : shellsim::meshWarnings(t)) {
      std::cout << "warning: " << warning << '\n';
    }
  }
  return 0;
}

void printTopologyLine(const char* when, const shellsim::MeshTopology& t) {
  std::cout << when << t.nonManifoldEdgeCount << " non-manifold edges, " << t.inconsistentEdgeCount
            << " flipped edges, " << t.degenerateTriangleCount << " degenerate and "
            << t.sliverTriangleCount << " sliver triangles (smallest height " << t.smallestHeight
            << " m, median edge " << t.medianEdgeLength << " m), " << t.duplicateVertexCount
            << " duplicate vertices, " << t.connectedComponentCount << " components, "
            << t.boundaryEdgeCount << " boundary edges\n";
}

// `shellsim repair IN OUT`: the mesh made fit for the mesh models (shellsim::repairMesh),
// written as OBJ or PLY by OUT's extension.
int repairCommand(const std::string& in, const std::string& out, int64_t minComponentFaces,
                  const std::string& remesh, const CommonOptions& common) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const std::string extension = std::filesystem::path(out).extension().string();
  if (extension != ".obj" && extension != ".ply") {
    throw shellsim::InputError(out + ": the repaired mesh is written as .obj or .ply");
  }
  shellsim::Geometry mesh = shellsim::readGeometry(in);
  shellsim::RepairOptions options;
  options.minComponentFaces = minComponentFaces;
  if (remesh == "auto") {
    options.remeshAtMedianEdge = true;
  } else if (!remesh.empty()) {
    char* end = nullptr;
    options.targetEdgeLength = std::strtod(remesh.c_str(), &end);
    if (end == remesh.c_str() || *end != 0 || !(options.targetEdgeLength > 0)) {
      throw shellsim::InputError("--remesh " + remesh +
                                 ": expected an edge length > 0 in metres, or auto");
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const shellsim::RepairReport report = shellsim::repairMesh(mesh, options);
  if (extension == ".obj") {
    shellsim::writeObj(out, mesh);
  } else {
    shellsim::writePly(out, mesh);
  }
  if (common.quiet) return 0;
  printTopologyLine("before: ", report.before);
  printTopologyLine("after:  ", report.after);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "wrote " << mesh.vertexCount() << " vertices, " << mesh.triangleCount()
            << " triangles to " << out << " (" << report.componentsRemoved << " components removed";
  if (report.remeshEdgeLength > 0)
    std::cout << ", remeshed to " << report.remeshEdgeLength << " m edges";
  std::cout << ") in " << formatSeconds(seconds) << '\n';
  for (const std::string& refusal : shellsim::meshRefusals(report.after)) {
    std::cout << "still refused: " << refusal << '\n';
  }
  for (const std::string& warning : shellsim::meshWarnings(report.after)) {
    std::cout << "warning: " << warning << '\n';
  }
  return 0;
}

// The cut-away preview of a thick shell: the shell cut by the plane through its centre
// across its thinnest extent, the half behind the plane kept, seen from the cut side: S
// white, S' red, the walls between them where the cut and the holes are.
void writeShellPreview(const std::string& path, const shellsim::Geometry& shellMesh,
                       const shellsim::Bounds& bounds) {
  int cutAxis = 0;
  double extent[3];
  for (int k = 0; k < 3; ++k) extent[k] = bounds.max[k] - bounds.min[k];
  for (int k = 1; k < 3; ++k) {
    if (extent[k] < extent[cutAxis]) cutAxis = k;
  }
  const double centre[3] = {0.5 * (bounds.min[0] + bounds.max[0]),
                            0.5 * (bounds.min[1] + bounds.max[1]),
                            0.5 * (bounds.min[2] + bounds.max[2])};
  shellsim::RenderBody body;
  body.geometry.positions = shellMesh.positions;
  body.geometry.colors = shellMesh.colors;
  for (size_t t = 0; t < shellMesh.triangles.size(); t += 3) {
    double mean = 0;
    for (int k = 0; k < 3; ++k) {
      mean += shellMesh.positions[3 * static_cast<size_t>(shellMesh.triangles[t + k]) + cutAxis];
    }
    if (mean / 3 > centre[cutAxis]) continue;
    body.geometry.triangles.insert(body.geometry.triangles.end(), shellMesh.triangles.begin() + t,
                                   shellMesh.triangles.begin() + t + 3);
  }
  (void)shellsim::removeUnreferencedVertices(body.geometry);
  body.color = {0.9F, 0.9F, 0.9F};
  // Up: y for the usual y-up model files unless the cut is across y, then z.
  const int upAxis = cutAxis == 1 ? 2 : 1;
  shellsim::Stage stage;
  stage.up = {0, 0, 0};
  stage.up[upAxis] = 1;
  stage.groundNormal = stage.up;
  stage.groundPoint = {centre[0], centre[1], centre[2]};
  stage.groundPoint[upAxis] = bounds.min[upAxis] - 0.05 * extent[upAxis];
  stage.extent = std::max({extent[0], extent[1], extent[2]});
  shellsim::Camera camera;
  camera.fovDegrees = 35;
  camera.target = {centre[0], centre[1], centre[2]};
  camera.up = stage.up;
  const double radius =
      0.5 * std::sqrt(extent[0] * extent[0] + extent[1] * extent[1] + extent[2] * extent[2]);
  const double distance = 1.1 * radius / std::tan(0.5 * camera.fovDegrees * 3.14159265358979 / 180);
  camera.eye = camera.target;
  camera.eye[cutAxis] += distance;
  camera.eye[upAxis] += 0.25 * distance;
  shellsim::RenderSettings settings;
  settings.width = 1280;
  settings.height = 720;
  shellsim::Renderer renderer(settings);
  shellsim::writePng(path, renderer.render({body}, stage, camera));
}

// `shellsim thicken IN OUT --depth D`: the thick shell of a surface mesh (steinemann
// section 3), written as one mesh (S, S' and the walls at holes).
struct ThickenCommandOptions {
  std::string in, out, method = "front", preview;
  double depth = 0;
  int steps = 5;
  double minStep = shellsim::ThickenOptions{}.minStepFraction;
  bool repair = false;
};
int thickenCommand(const ThickenCommandOptions& o, const CommonOptions& common) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const std::string extension = std::filesystem::path(o.out).extension().string();
  if (extension != ".obj" && extension != ".ply") {
    throw shellsim::InputError(o.out + ": the thick shell is written as .obj or .ply");
  }
  shellsim::Geometry mesh = shellsim::readGeometry(o.in);
  if (mesh.triangles.empty()) {
    throw shellsim::InputError(o.in + ": a point cloud; thicken needs a triangle mesh");
  }
  mesh.normals.clear();
  mesh.colors.clear();
  if (o.repair) {
    (void)shellsim::repairMesh(mesh);
  } else {
    const std::vector<int32_t> map = shellsim::removeUnreferencedVertices(mesh);
    const auto dropped = std::count(map.begin(), map.end(), -1);
    if (dropped > 0 && !common.quiet) {
      std::cout << o.in << ": " << dropped << " vertices in no triangle left out\n";
    }
    const std::vector<std::string> refusals =
        shellsim::meshRefusals(shellsim::analyzeTopology(mesh));
    if (!refusals.empty()) {
      throw shellsim::InputError(o.in + ": " + refusals.front() +
                                 "; thicken needs a manifold, consistently oriented mesh (add "
                                 "--repair to repair it first)");
    }
  }
  shellsim::ThickenOptions options;
  options.depth = o.depth;
  options.stepsPerDepth = o.steps;
  options.minStepFraction = o.minStep;
  options.method = o.method == "vertex" ? shellsim::ThickenMethod::kSingleVertex
                                        : shellsim::ThickenMethod::kFront;
  const shellsim::ThickShell shell = shellsim::thickenMesh(mesh, options);
  const shellsim::Geometry out = shellsim::thickShellGeometry(mesh, shell);
  if (extension == ".obj") {
    shellsim::writeObj(o.out, out);
  } else {
    shellsim::writePly(o.out, out);
  }
  if (!o.preview.empty()) writeShellPreview(o.preview, out, shellsim::computeBounds(mesh));
  if (common.quiet) return 0;
  std::cout << o.in << ": " << mesh.vertexCount() << " vertices, " << mesh.triangleCount()
            << " triangles, depth " << o.depth << " m, " << o.method
            << " propagation, k = " << o.steps << '\n';
  std::cout << "generated in " << formatSeconds(shell.seconds) << ": " << shell.iterations
            << (options.method == shellsim::ThickenMethod::kFront ? " passes, " : " moves, ")
            << shell.collisions << " collisions, " << shell.triangleTests
            << " triangle pairs tested\n";
  std::cout << "depth: mean " << shell.meanDepth << " m, min " << shell.minDepth << " m; "
            << shell.thinVertices << " of " << mesh.vertexCount()
            << " vertices thinner than the depth (where the surface is closer than twice it)\n";
  std::cout << "thin regions: " << shell.thinRegions.size() << '\n';
  for (size_t r = 0; r < std::min<size_t>(shell.thinRegions.size(), 5); ++r) {
    const shellsim::ThickShell::ThinRegion& region = shell.thinRegions[r];
    std::cout << "  " << region.vertices << " vertices around (" << region.centre[0] << ", "
              << region.centre[1] << ", " << region.centre[2] << "), thinnest " << region.thinnest
              << " m\n";
  }
  std::cout << "check (every pair of triangles, exact): " << shell.intersectingPairs
            << " crossing pairs, " << shell.invertedElements << " inverted elements";
  if (shell.inputIntersectingPairs > 0) {
    std::cout << "; the input itself crosses at " << shell.inputIntersectingPairs
              << " triangle pairs";
  }
  std::cout << "\nwrote " << out.vertexCount() << " vertices, " << out.triangleCount()
            << " triangles to " << o.out << " (S white, S' red)\n";
  if (!o.preview.empty()) std::cout << "preview: " << o.preview << '\n';
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
              << simulation.elementCount(b) << " elements, stable explicit step "
              << simulation.stableTimeStep(b) << " s\n";
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

int exportBlendCommand(const std::string& runFolder, const std::string& out,
                       const std::string& blender, const CommonOptions& common) {
  namespace fs = std::filesystem;
  shellsim::ThreadLimit threadLimit(common.threads);
  fs::path target = out;
  if (target.empty()) {
    const fs::path folder = fs::absolute(runFolder).lexically_normal();
    const std::string name = folder.has_filename() ? folder.filename().string()
                                                   : folder.parent_path().filename().string();
    target = fs::path(runFolder) / (name + ".blend");
  }
  if (target.extension() != ".blend") {
    throw shellsim::InputError(target.string() + ": the output must end in .blend");
  }
  shellsim::BlendExportOptions options;
  options.blender = blender;
  const shellsim::BlendExport made = shellsim::exportBlend(runFolder, target, options);
  if (!common.quiet) {
    for (const std::string& message : made.messages) std::cout << "note: " << message << '\n';
    std::cout << "wrote " << made.blendFile.string() << ": " << made.objects << " objects, frames "
              << made.frameStart << " to " << made.frameEnd << " at " << made.frameRate << " fps\n";
  }
  return 0;
}

void printSweepReport(const shellsim::SweepReport& report, const std::filesystem::path& sheet) {
  std::cout << report.completed << " completed, " << report.failed << " failed or stopped, "
            << report.missing << " not run; report: " << report.csv.string() << ", "
            << report.markdown.string() << ", " << sheet.string() << '\n';
}

struct SweepCommandOptions {
  bool local = false, slurm = false, submit = false, yes = false;
  int jobs = 1;
  shellsim::SlurmOptions slurmOptions;
};

int sweepCommand(const std::string& file, const std::string& out,
                 const SweepCommandOptions& command, const CommonOptions& common) {
  const shellsim::SweepDef sweep = shellsim::loadSweep(file);
  constexpr int64_t kManyVariants = 1000;
  if (sweep.variantCount > kManyVariants && !command.yes) {
    throw shellsim::InputError(file + ": " + std::to_string(sweep.variantCount) +
                               " variants; more than " + std::to_string(kManyVariants) +
                               " is often a mistake: give --yes to go on");
  }
  const std::vector<shellsim::SweepVariant> variants = shellsim::expandSweep(sweep);
  if (command.slurm) {
    shellsim::SlurmOptions slurm = command.slurmOptions;
    slurm.executable = std::filesystem::read_symlink("/proc/self/exe");
    const shellsim::SlurmScripts scripts = shellsim::writeSlurmScripts(sweep, variants, out, slurm);
    if (!command.submit) {
      if (!common.quiet) {
        std::cout << scripts.tasks << " variants in " << out << "/variants; Slurm scripts:\n  "
                  << scripts.arrayScript.string() << "\n  " << scripts.reportScript.string()
                  << "\nsubmit both with " << scripts.submitScript.string()
                  << " (or add --submit)\n";
      }
      return 0;
    }
    const shellsim::SlurmSubmission jobs = shellsim::submitSlurmScripts(scripts);
    if (!common.quiet) {
      std::cout << "submitted array job " << jobs.arrayJob << " (" << scripts.tasks
                << " tasks) and report job " << jobs.reportJob << " (after it); ids in "
                << jobs.record.string() << "\nwatch with: squeue -j " << jobs.arrayJob << ","
                << jobs.reportJob << "; the report: " << out << "/report.md\n";
    } else {
      std::cout << jobs.arrayJob << ' ' << jobs.reportJob << '\n';
    }
    return 0;
  }
  if (!command.local) {
    const auto folders = shellsim::writeSweepVariants(sweep, variants, out);
    if (!common.quiet) {
      std::cout << folders.size() << " variants in " << out << "/variants; run each with\n"
                << "  shellsim run " << out << "/variants/NNNN/scene.json --out " << out
                << "/variants/NNNN   (add --resume to continue a stopped one)\n"
                << "then shellsim sweep-report " << out << "; or all here with --local\n";
    }
    return 0;
  }
  shellsim::SweepRunOptions options;
  options.executable = std::filesystem::read_symlink("/proc/self/exe");
  options.jobs = command.jobs;
  if (!common.quiet) options.onMessage = [](const std::string& line) { std::cout << line << '\n'; };
  const shellsim::SweepRunReport ran = shellsim::runSweepLocally(sweep, variants, out, options);
  if (!common.quiet) {
    std::cout << ran.ran << " ran, " << ran.skipped << " completed before, " << ran.failed
              << " failed\n";
  }
  const shellsim::SweepReport report = shellsim::writeSweepReport(out);
  const std::filesystem::path sheet = shellsim::renderSweepSheet(out);
  if (!common.quiet) printSweepReport(report, sheet);
  return ran.failed > 0 ? static_cast<int>(shellsim::ExitCode::kNumerical) : 0;
}

// One variant of a written sweep, as a farm task runs it: skipped, resumed or started.
int sweepVariantCommand(const std::string& out, int index, const CommonOptions& common) {
  const shellsim::SweepTask task = shellsim::sweepTask(out, index);
  if (!common.quiet) {
    std::cerr << "shellsim: variant " << shellsim::sweepVariantName(index) << " of " << out << ": "
              << task.why << '\n';
  }
  if (task.action == shellsim::SweepTask::Action::kSkip) return 0;
  return runCommand(task.scene.string(), task.folder.string(), std::nullopt,
                    task.action == shellsim::SweepTask::Action::kResume, common, std::nullopt);
}

int sweepReportCommand(const std::string& out, const std::vector<std::string>& fields,
                       const CommonOptions& common) {
  shellsim::ThreadLimit threadLimit(common.threads);
  const shellsim::SweepReport report = shellsim::writeSweepReport(out, fields);
  const std::filesystem::path sheet = shellsim::renderSweepSheet(out);
  if (!common.quiet) printSweepReport(report, sheet);
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
      ->check(integerAtLeast(1));
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
  CLI::App* info = app.add_subcommand(
      "info", "Describe a mesh or point-cloud file, or how a run in an output folder stands");
  info->add_option("file", filePath,
                   "Geometry file (OBJ, PLY, OFF, STL, XYZ), or a run's output folder")
      ->required();
  addCommonOptions(info, common);

  std::string validatePath;
  CLI::App* validate = app.add_subcommand(
      "validate", "Check a scene file and build its bodies as a run would; list every problem");
  validate->add_option("scene", validatePath, "Scene file (JSON)")->required();
  addCommonOptions(validate, common);

  std::string repairIn, repairOut, remesh;
  int64_t minComponentFaces = 0;
  CLI::App* repair = app.add_subcommand(
      "repair",
      "Repair a triangle mesh for the shell models: merge coincident vertices, drop degenerate "
      "triangles, orient consistently, split non-manifold edges, drop stray parts, remesh");
  repair->add_option("in", repairIn, "Triangle mesh (OBJ, PLY, OFF, STL)")->required();
  repair->add_option("out", repairOut, "The repaired mesh (.obj or .ply)")->required();
  repair
      ->add_option("--min-component-faces", minComponentFaces,
                   "Drop connected components with fewer triangles than this")
      ->check(integerAtLeast(0));
  repair->add_option("--remesh", remesh,
                     "Remesh isotropically to this edge length, m, or 'auto' (the median "
                     "edge): even triangles, no slivers");
  addCommonOptions(repair, common);

  ThickenCommandOptions thickenOptions;
  CLI::App* thicken = app.add_subcommand(
      "thicken",
      "Make a thick shell of a surface mesh: an inner surface grown inwards to a depth "
      "without intersections (steinemann section 3), written with the outer surface as one mesh");
  thicken->add_option("in", thickenOptions.in, "Triangle mesh (OBJ, PLY, OFF, STL)")->required();
  thicken->add_option("out", thickenOptions.out, "The shell (.obj or .ply; PLY keeps the colours)")
      ->required();
  thicken->add_option("--depth", thickenOptions.depth, "Shell thickness where there is room, m")
      ->required()
      ->check(CLI::PositiveNumber);
  thicken
      ->add_option("--method", thickenOptions.method,
                   "front: every vertex steps at once (fast); vertex: one vertex at a time")
      ->check(CLI::IsMember({"front", "vertex"}));
  thicken->add_option("--steps", thickenOptions.steps, "Steps to reach the depth (k)")
      ->check(integerAtLeast(1, 1000));
  thicken
      ->add_option("--min-step", thickenOptions.minStep,
                   "A vertex stops when its step, halved at every collision, falls below this "
                   "fraction of the depth (epsilon_min; default 0.001). 0.01 generates the cow "
                   "1.6 to 2.4 times faster, its mean depth 0.3 to 4 % less")
      ->check(CLI::Range(1e-6, 0.5));
  thicken->add_flag("--repair", thickenOptions.repair,
                    "Repair the mesh first (as shellsim repair: merge, orient, split non-manifold "
                    "edges)");
  thicken->add_option("--preview", thickenOptions.preview,
                      "Also render a cut-away view of the shell to this PNG");
  addCommonOptions(thicken, common);

  std::string blendRun, blendOut, blender = "blender";
  CLI::App* exportBlend = app.add_subcommand(
      "export-blend",
      "Turn a finished run into a .blend file: each body an animated object, the obstacles, "
      "a camera and a light (runs the system's Blender headless)");
  exportBlend->add_option("outdir", blendRun, "Output folder of a run (holds summary.json)")
      ->required();
  exportBlend->add_option("-o,--out", blendOut,
                          "The .blend file (default OUTDIR/<folder name>.blend)");
  exportBlend->add_option("--blender", blender, "The Blender program")->capture_default_str();
  addCommonOptions(exportBlend, common);

  std::string sweepFile, sweepOut, reportFolder;
  SweepCommandOptions sweepOptions;
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Expand a sweep file (a base scene and values to vary) into one scene per variant "
      "(OUT/variants/NNNN/scene.json); with --local, run them here and write the report");
  sweep->add_option("sweep", sweepFile, "Sweep file (JSON, docs/sweeps.md)")->required();
  sweep->add_option("-o,--out", sweepOut, "Folder of the sweep")->required();
  CLI::Option* localOption =
      sweep->add_flag("--local", sweepOptions.local,
                      "Run the variants on this machine, --jobs at a time (a variant whose "
                      "summary says completed is skipped: run again to finish a stopped sweep)");
  sweep->add_option("--jobs", sweepOptions.jobs, "Variants at a time with --local")
      ->check(integerAtLeast(1, 256))
      ->capture_default_str();
  CLI::Option* slurmOption =
      sweep
          ->add_flag("--slurm", sweepOptions.slurm,
                     "Write Slurm batch scripts (OUT/slurm): a job array, one task per variant "
                     "(requeueable, resumed from its checkpoint), and a report job after it")
          ->excludes(localOption);
  shellsim::SlurmOptions& slurm = sweepOptions.slurmOptions;
  sweep->add_option("--partition", slurm.partition, "Slurm partition (default: the cluster's)")
      ->needs(slurmOption);
  sweep
      ->add_option("--time", slurm.timeLimit,
                   "Time limit of each task, as sbatch --time takes it (H:M:S, D-H, ...)")
      ->needs(slurmOption);
  sweep->add_option("--cpus", slurm.cpusPerTask, "CPUs (threads) of each task")
      ->check(integerAtLeast(1, 4096))
      ->capture_default_str()
      ->needs(slurmOption);
  sweep
      ->add_option("--max-running", slurm.maxRunning,
                   "Tasks of the array running at once (--array=0-N%max; 0: no limit)")
      ->check(integerAtLeast(0))
      ->capture_default_str()
      ->needs(slurmOption);
  sweep
      ->add_option("--sbatch", slurm.sbatchOptions,
                   "Another #SBATCH line for both scripts, e.g. --sbatch=--account=lab "
                   "(repeatable)")
      ->needs(slurmOption);
  sweep
      ->add_flag("--submit", sweepOptions.submit,
                 "Submit the scripts with sbatch and print the job ids (without it they are "
                 "only written, for you to check and submit with OUT/slurm/submit.sh)")
      ->needs(slurmOption);
  sweep->add_flag("--yes", sweepOptions.yes, "Allow more than 1000 variants");
  addCommonOptions(sweep, common);
  std::string variantFolder;
  int variantIndex = 0;
  CLI::App* sweepVariant = app.add_subcommand(
      "sweep-variant",
      "Run one variant of a sweep written by `shellsim sweep` (a farm task's command): "
      "skipped when it completed, resumed from its checkpoint when it left one, else started");
  sweepVariant->add_option("out", variantFolder, "Folder of the sweep")->required();
  sweepVariant->add_option("index", variantIndex, "The variant, from 0 ($SLURM_ARRAY_TASK_ID)")
      ->required()
      ->check(integerAtLeast(0));
  addCommonOptions(sweepVariant, common);
  CLI::App* sweepReport = app.add_subcommand(
      "sweep-report", "Write a sweep's report: OUT/report.csv and report.md, one row per variant");
  sweepReport->add_option("out", reportFolder, "Folder of the sweep")->required();
  std::vector<std::string> reportFields;
  sweepReport->add_option("--field", reportFields,
                          "Another column: a path into each run's summary.json, e.g. "
                          "steps_rejected or frames[-1].bodies[0].cracks (repeatable; the "
                          "sweep file's report_fields are always there)");
  addCommonOptions(sweepReport, common);

  CLI::App* reference =
      app.add_subcommand("scene-reference", "Print the scene file reference (Markdown)");
  addCommonOptions(reference, common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    // Read like every other error: the prefix, the message, where to look next.
    std::cerr << "shellsim: error: " << e.what() << "\n(run shellsim --help, or shellsim "
              << "COMMAND --help, for the options)\n";
    return static_cast<int>(ExitCode::kBadInput);
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
    if (repair->parsed()) {
      return repairCommand(repairIn, repairOut, minComponentFaces, remesh, common);
    }
    if (thicken->parsed()) return thickenCommand(thickenOptions, common);
    if (exportBlend->parsed()) return exportBlendCommand(blendRun, blendOut, blender, common);
    if (sweep->parsed()) {
      return sweepCommand(sweepFile, sweepOut, sweepOptions, common);
    }
    if (sweepVariant->parsed()) return sweepVariantCommand(variantFolder, variantIndex, common);
    if (sweepReport->parsed()) return sweepReportCommand(reportFolder, reportFields, common);
    if (reference->parsed()) {
      std::cout << shellsim::sceneReferenceMarkdown();
      return 0;
    }
  } catch (const shellsim::Interrupted& e) {
    if (isatty(STDERR_FILENO) != 0) std::cerr << '\n';
    const int signal = stopSignal != 0 ? static_cast<int>(stopSignal) : SIGINT;
    std::cerr << "shellsim: interrupted (" << (signal == SIGTERM ? "SIGTERM" : "SIGINT")
              << "): " << e.what() << '\n';
    return 128 + signal;
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
