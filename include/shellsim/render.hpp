// Headless previews of runs: one PNG per frame, an H.264 video, a contact sheet and an
// energy plot, rendered on the CPU without a display (library target shellsim::render).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shellsim/geometry.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// An 8-bit sRGB image, rows top to bottom.
struct Image {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3)

  Image() = default;
  Image(int32_t w, int32_t h) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, 0) {}
  [[nodiscard]] uint8_t* at(int32_t x, int32_t y) {
    return rgb.data() + (static_cast<size_t>(y) * width + x) * 3;
  }
  [[nodiscard]] const uint8_t* at(int32_t x, int32_t y) const {
    return rgb.data() + (static_cast<size_t>(y) * width + x) * 3;
  }
};

// Writes an 8-bit RGB PNG atomically (writeFileAtomically). Throws IoError naming the path.
void writePng(const std::filesystem::path& path, const Image& image);

// A pinhole camera. Scene files may set one (output.camera); otherwise one is fitted to
// the bounds of the whole run.
struct Camera {
  Vec3d eye{2, -3, 2};     // m
  Vec3d target{0, 0, 0};   // m
  Vec3d up{0, 0, 1};       // need not be unit or orthogonal to the view direction
  double fovDegrees = 40;  // vertical field of view
};

// What the renderer draws besides the bodies.
struct StageObstacle {
  ObstacleType type = ObstacleType::kSphere;
  Vec3d center{0, 0, 0};       // sphere, box, m
  double radius = 0;           // sphere, m
  Vec3d halfExtents{0, 0, 0};  // box, m
};
struct Stage {
  Vec3d up{0, 0, 1};                     // unit; opposite to gravity
  Vec3d groundPoint{0, 0, 0};            // a point of the ground plane, m
  Vec3d groundNormal{0, 0, 1};           // unit
  std::vector<StageObstacle> obstacles;  // planes are the ground, not listed here
  double extent = 1;  // size of the run's bounds, m: sets the grid spacing and ray offsets
};

// One body of one frame, ready to draw.
struct RenderBody {
  Geometry geometry;             // mesh (smooth-shaded) or point cloud (surfels)
  std::array<float, 3> color{};  // used where the geometry has no per-vertex colour
  std::vector<int32_t> pinned;   // vertex indices drawn as small red balls, may be empty
};

struct RenderSettings {
  int32_t width = 1280;
  int32_t height = 720;
  bool showPins = false;   // draw pinned nodes
  bool wireframe = false;  // draw the edges of triangle meshes (about a pixel wide)
};

// Renders bodies on the stage. Deterministic: the image does not depend on the number of
// threads. Point clouds are drawn as oriented discs (surfels) whose radii follow the local
// point spacing (see surfelRadii), with the file's normals or, without them, normals from a
// plane fit to the same neighbours. Holds the Embree device and caches between
// frames the neighbour lists of point clouds, the shaded sky and ground of the camera and
// the BVH (refitted while the bodies keep their topology), so keep one Renderer for a run.
class Renderer {
 public:
  explicit Renderer(RenderSettings settings);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  [[nodiscard]] Image render(const std::vector<RenderBody>& bodies, const Stage& stage,
                             const Camera& camera);
  [[nodiscard]] const RenderSettings& settings() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Surfel radii for a point cloud, (nPoints): 0.8 times the mean distance to the 6 nearest
// neighbours, so that discs on a regular grid overlap without holes.
[[nodiscard]] std::vector<float> surfelRadii(const Geometry& cloud);

// Colours of connected components of a mesh's triangles (pieces after fracture), per vertex
// (nVertices, 3); components are numbered by their lowest vertex index, so colours stay put
// from frame to frame. `offset` shifts the palette (one per body).
[[nodiscard]] std::vector<float> componentColors(const Geometry& mesh, int32_t offset);

// Plastic flow (the frames' `plastic_strain` vertex property) tints a mesh's vertex colours
// toward dark red on a log scale: untouched up to kPlasticTintFrom, fully red from
// kPlasticTintFull on, so that dents and creases show in every frame whatever their depth.
inline constexpr float kPlasticTintFrom = 1e-4F;
inline constexpr float kPlasticTintFull = 1e-2F;
void tintPlasticFlow(Geometry& geometry);

// A camera that looks at `bounds` (min, max corners, m) from the front-right and above,
// at the given aspect ratio, with the whole box in view.
[[nodiscard]] Camera fitCamera(const Bounds& bounds, const Vec3d& up, double aspect);

struct RenderOptions {
  RenderSettings settings;
  std::optional<Camera> camera;  // overrides the scene's and the fitted camera
  bool video = true;             // run ffmpeg
  int32_t contactSheetFrames = 12;
  std::function<void(int32_t frame, int32_t frameCount)> onFrame;  // progress
  std::function<void(const std::string&)> onMessage;  // notices, e.g. why there is no video
};

struct RenderReport {
  int32_t framesRendered = 0;
  std::filesystem::path framesFolder;  // PNG frames: frame_00000.png, ...
  std::filesystem::path contactSheet;
  std::filesystem::path energyPlot;            // empty when not written (compare)
  std::optional<std::filesystem::path> video;  // empty when ffmpeg is missing
  std::vector<std::string> messages;
};

// Renders the run in `runFolder` (its summary.json and frames/): PNG frames in
// runFolder/render/, runFolder/video.mp4, runFolder/contact_sheet.png and
// runFolder/energy.png. Throws IoError / InputError naming a missing or corrupt file.
RenderReport renderRun(const std::filesystem::path& runFolder, const RenderOptions& options = {});

// Renders two runs side by side, each labelled with its folder name, with one camera
// fitted to both: outFolder/frames/, outFolder/compare.mp4, outFolder/contact_sheet.png.
// The shorter run holds its last frame.
RenderReport compareRuns(const std::filesystem::path& runA, const std::filesystem::path& runB,
                         const std::filesystem::path& outFolder, const RenderOptions& options = {});

// A finished run as a .blend file (`shellsim export-blend`), made by running the system's
// Blender headless: each body one animated object (shape keys, one per frame) or, when its
// mesh changes topology (fracture), one object per frame shown on its frame only; the
// obstacles (moving ones keyframed), the renderer's camera, a sun light, the frame rate and
// range. Frames are read from the run's .ply or .obj files.
struct BlendExportOptions {
  std::string blender = "blender";     // the program, looked up on PATH
  int32_t width = 1280, height = 720;  // the render resolution set in the file
};
struct BlendExport {
  std::filesystem::path blendFile;
  int32_t objects = 0;  // bodies' objects, obstacles, camera and light
  int32_t frameStart = 0, frameEnd = 0;
  double frameRate = 0;               // frames per second
  std::vector<std::string> messages;  // e.g. that the run did not complete
};
// Throws InputError for a folder that holds no run, IoError when Blender is missing or fails
// (its messages kept in <blend stem>.blender.log beside the target).
BlendExport exportBlend(const std::filesystem::path& runFolder,
                        const std::filesystem::path& blendFile,
                        const BlendExportOptions& options = {});

// The wedge sheet of a sweep folder (shellsim sweep, sweep-report): <out>/sweep_sheet.png,
// every variant's last frame rendered `thumbnailWidth` pixels wide with one camera fitted to
// all of them, labelled with its index, time, status and values; a grid sweep's last
// parameter runs along the rows. A variant without frames is a grey tile. IoError /
// InputError for a folder without a readable sweep.json.
std::filesystem::path renderSweepSheet(const std::filesystem::path& out,
                                       int32_t thumbnailWidth = 320);

// Plots kinetic, stretching, bending and dissipated energy of a run summary over time.
void plotEnergy(const std::filesystem::path& summaryPath, const std::filesystem::path& pngPath,
                int32_t width = 1280, int32_t height = 720);

// Renders frames while a run writes them (`shellsim run --preview`): call addFrame after
// each frame is written (RunOptions::onProgress), then finish(). Future frames are not known,
// so the camera is the scene's or one fitted to the first frame, the obstacles and the
// ground, with a margin; finish() writes the video, contact sheet and energy plot into the
// run folder, as renderRun does.
class PreviewRecorder {
 public:
  PreviewRecorder(std::filesystem::path runFolder, RenderOptions options);
  ~PreviewRecorder();
  PreviewRecorder(const PreviewRecorder&) = delete;
  PreviewRecorder& operator=(const PreviewRecorder&) = delete;

  // Renders frame `frame` (of `frameCount`) as listed in the run's summary.json.
  void addFrame(int32_t frame, int32_t frameCount);
  RenderReport finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shellsim
