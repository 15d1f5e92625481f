// The renderer: silhouettes against the analytic answer, determinism across thread counts,
// whole runs (frames, contact sheet, plot, video) and the errors for broken run folders.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>

#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/render.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test.
class TempFolder : public testfiles::TempFolder {
 public:
  TempFolder() : testfiles::TempFolder("shellsim_render_") {}
};

// A UV sphere mesh with vertex normals: `rings` latitude bands, 2 * rings longitudes.
Geometry meshSphere(double radius, const Vec3d& centre, int rings) {
  Geometry g;
  const int segments = 2 * rings;
  for (int i = 0; i <= rings; ++i) {
    const double theta = std::numbers::pi * i / rings;
    for (int j = 0; j < segments; ++j) {
      const double phi = 2 * std::numbers::pi * j / segments;
      const double n[3] = {std::sin(theta) * std::cos(phi), std::sin(theta) * std::sin(phi),
                           std::cos(theta)};
      for (int c = 0; c < 3; ++c) {
        g.positions.push_back(centre[c] + radius * n[c]);
        g.normals.push_back(n[c]);
      }
    }
  }
  for (int i = 0; i < rings; ++i) {
    for (int j = 0; j < segments; ++j) {
      const int a = i * segments + j, b = i * segments + (j + 1) % segments;
      const int c = a + segments, d = b + segments;
      g.triangles.insert(g.triangles.end(), {a, c, b, b, c, d});
    }
  }
  return g;
}

// Evenly spread points on a sphere (Fibonacci spiral), with normals.
Geometry pointSphere(double radius, const Vec3d& centre, int n) {
  Geometry g;
  const double golden = std::numbers::pi * (3 - std::sqrt(5.0));
  for (int i = 0; i < n; ++i) {
    const double z = 1 - 2 * (i + 0.5) / n;
    const double r = std::sqrt(1 - z * z);
    const double p[3] = {r * std::cos(golden * i), r * std::sin(golden * i), z};
    for (int c = 0; c < 3; ++c) {
      g.positions.push_back(centre[c] + radius * p[c]);
      g.normals.push_back(p[c]);
    }
  }
  return g;
}

// Pure red bodies: every shade of them has red well above green, which neither the grey
// ground nor the blue-grey sky has.
bool isObject(const Image& image, int32_t x, int32_t y) {
  const uint8_t* p = image.at(x, y);
  return p[0] > p[1] + 40;
}

struct Coverage {
  int64_t pixels = 0;
  double cx = 0, cy = 0;  // centroid, pixels
};

Coverage coverage(const Image& image) {
  Coverage c;
  for (int32_t y = 0; y < image.height; ++y) {
    for (int32_t x = 0; x < image.width; ++x) {
      if (!isObject(image, x, y)) continue;
      ++c.pixels;
      c.cx += x + 0.5;
      c.cy += y + 0.5;
    }
  }
  if (c.pixels > 0) {
    c.cx /= static_cast<double>(c.pixels);
    c.cy /= static_cast<double>(c.pixels);
  }
  return c;
}

// A sphere of radius R at distance D straight ahead subtends a cone of half angle
// asin(R / D); a pinhole camera maps it to a disc of radius tan(asin(R / D)) / tan(fov / 2)
// times half the image height, in pixels.
double expectedPixels(double radius, double distance, double fovDegrees, int32_t height) {
  const double alpha = std::asin(radius / distance);
  const double tanHalf = std::tan(0.5 * fovDegrees * std::numbers::pi / 180);
  const double r = std::tan(alpha) / tanHalf * 0.5 * height;
  return std::numbers::pi * r * r;
}

struct SilhouetteSetup {
  Camera camera;
  Stage stage;
  static constexpr double kRadius = 0.5, kDistance = 3.0;
  SilhouetteSetup() {
    camera.eye = {0, -kDistance, 0};
    camera.target = {0, 0, 0};
    camera.up = {0, 0, 1};
    camera.fovDegrees = 40;
    // Ground far below: it only fills the picture's lower part near the horizon.
    stage.groundPoint = {0, 0, -50};
    stage.extent = 1;
  }
};

std::vector<RenderBody> redBody(Geometry g) {
  std::vector<RenderBody> bodies(1);
  bodies[0].geometry = std::move(g);
  bodies[0].color = {1, 0, 0};
  return bodies;
}

TEST(RenderSilhouette, MeshSphereCoversTheAnalyticDisc) {
  const SilhouetteSetup setup;
  RenderSettings settings;
  settings.width = 640;
  settings.height = 480;
  Renderer renderer(settings);
  const Image image = renderer.render(redBody(meshSphere(SilhouetteSetup::kRadius, {0, 0, 0}, 96)),
                                      setup.stage, setup.camera);
  const double expected = expectedPixels(SilhouetteSetup::kRadius, SilhouetteSetup::kDistance,
                                         setup.camera.fovDegrees, settings.height);
  const Coverage c = coverage(image);
  RecordProperty("pixels", std::to_string(c.pixels) + " of expected " + std::to_string(expected));
  // About 2 * pi * r = 900 boundary pixels on ~45,000: 1.5% holds the edge pixels and the
  // polygon's chords (0.05% of the area at 96 rings).
  EXPECT_NEAR(static_cast<double>(c.pixels), expected, 0.015 * expected);
  EXPECT_NEAR(c.cx, 320, 1.0);
  EXPECT_NEAR(c.cy, 240, 1.0);
}

TEST(RenderSilhouette, SurfelSphereIsClosedAndCoversTheAnalyticDisc) {
  const SilhouetteSetup setup;
  RenderSettings settings;
  settings.width = 640;
  settings.height = 480;
  Renderer renderer(settings);
  const Image image = renderer.render(
      redBody(pointSphere(SilhouetteSetup::kRadius, {0, 0, 0}, 20000)), setup.stage, setup.camera);
  const double expected = expectedPixels(SilhouetteSetup::kRadius, SilhouetteSetup::kDistance,
                                         setup.camera.fovDegrees, settings.height);
  const Coverage c = coverage(image);
  RecordProperty("pixels", std::to_string(c.pixels) + " of expected " + std::to_string(expected));
  // Discs at the rim stick out a little beyond the sphere: 3%.
  EXPECT_NEAR(static_cast<double>(c.pixels), expected, 0.03 * expected);
  EXPECT_NEAR(c.cx, 320, 1.0);
  EXPECT_NEAR(c.cy, 240, 1.0);
  // No holes: every pixel well inside the silhouette is the body, not the background.
  const double r = std::sqrt(expected / std::numbers::pi);
  int64_t holes = 0;
  for (int32_t y = 0; y < image.height; ++y) {
    for (int32_t x = 0; x < image.width; ++x) {
      if (std::hypot(x + 0.5 - 320, y + 0.5 - 240) < 0.9 * r && !isObject(image, x, y)) ++holes;
    }
  }
  EXPECT_EQ(holes, 0);
}

TEST(RenderSilhouette, SurfelRadiiFollowThePointSpacing) {
  // A square grid of spacing h: radius 0.8 * mean of 4 neighbours at h and 2 at h * sqrt 2.
  Geometry grid;
  const double h = 0.01;
  for (int i = 0; i < 20; ++i) {
    for (int j = 0; j < 20; ++j) grid.positions.insert(grid.positions.end(), {i * h, j * h, 0});
  }
  const std::vector<float> radii = surfelRadii(grid);
  const size_t centre = 10 * 20 + 10;
  // Which two of the four diagonal neighbours come 5th and 6th is a tie; both are h sqrt 2.
  EXPECT_NEAR(radii[centre], 0.8 * (4 * h + 2 * std::sqrt(2.0) * h) / 6, 1e-6);
  EXPECT_GT(radii[centre], std::sqrt(0.5) * h);  // discs cover the holes of the grid
}

// --wireframe: a unit square of two triangles facing the camera, 220 pixels a side. The
// pixels that change are those within about 0.6 pixel of an edge: along the outline (inside
// only) and across the diagonal, about 4 * 220 * 0.6 + 311 * 1.2 = 900; the diagonal's
// pixel at the centre is darkened, a pixel inside a triangle is not touched.
TEST(RenderWireframe, DarkensThePixelsOnTheEdgesOnly) {
  const SilhouetteSetup setup;
  Geometry square;
  square.positions = {-0.5, 0, -0.5, 0.5, 0, -0.5, 0.5, 0, 0.5, -0.5, 0, 0.5};
  square.triangles = {0, 1, 2, 0, 2, 3};
  RenderSettings settings;
  settings.width = 480;
  settings.height = 480;
  Renderer plain(settings);
  settings.wireframe = true;
  Renderer wired(settings);
  const Image a = plain.render(redBody(square), setup.stage, setup.camera);
  const Image b = wired.render(redBody(square), setup.stage, setup.camera);
  ASSERT_EQ(a.rgb.size(), b.rgb.size());
  size_t changed = 0;
  for (size_t i = 0; i < a.rgb.size(); i += 3) {
    changed += a.rgb[i] != b.rgb[i] || a.rgb[i + 1] != b.rgb[i + 1] || a.rgb[i + 2] != b.rgb[i + 2];
  }
  RecordProperty("changed_pixels", std::to_string(changed));
  EXPECT_GT(changed, 500U);
  EXPECT_LT(changed, 2000U);
  // Pixel (240, 239) lies on the diagonal (0, 2); (-0.25, 0, 0.25) is inside triangle (0, 2, 3),
  // 55 pixels from its nearest edge.
  const auto red = [&](const Image& image, int x, int y) {
    return image.rgb[3 * (static_cast<size_t>(y) * 480 + static_cast<size_t>(x))];
  };
  EXPECT_LT(red(b, 240, 239), 0.6 * red(a, 240, 239));  // centre (240.5, 239.5)
  EXPECT_EQ(red(b, 185, 185), red(a, 185, 185));
  EXPECT_GT(red(a, 185, 185), 0);
}

TEST(RenderColors, PiecesAfterFractureGetDistinctColours) {
  Geometry two = meshSphere(0.2, {-0.5, 0, 0}, 8);
  const Geometry other = meshSphere(0.2, {0.5, 0, 0}, 8);
  const int32_t offset = two.vertexCount();
  two.positions.insert(two.positions.end(), other.positions.begin(), other.positions.end());
  for (const int32_t t : other.triangles) two.triangles.push_back(t + offset);
  const std::vector<float> colors = componentColors(two, 0);
  ASSERT_EQ(colors.size(), two.positions.size());
  const auto colorOf = [&](int32_t v) {
    return std::array<float, 3>{colors[3 * v], colors[3 * v + 1], colors[3 * v + 2]};
  };
  EXPECT_EQ(colorOf(0), colorOf(offset - 1));
  EXPECT_EQ(colorOf(offset), colorOf(two.vertexCount() - 1));
  EXPECT_NE(colorOf(0), colorOf(offset));
}

// Plastic strain tints toward dark red on a log scale: none up to 1e-4, half at 1e-3, all
// from 1e-2; a vertex without plastic flow keeps its colour.
TEST(RenderColors, PlasticFlowTintsTowardDarkRed) {
  Geometry g = meshSphere(0.2, {0, 0, 0}, 4);
  g.colors = componentColors(g, 0);
  const std::vector<float> before = g.colors;
  VertexScalar plastic{"plastic_strain",
                       std::vector<float>(static_cast<size_t>(g.vertexCount()), 0.0F)};
  plastic.values[1] = 1e-4F;
  plastic.values[2] = 1e-3F;
  plastic.values[3] = 1e-2F;
  plastic.values[4] = 1.0F;
  g.vertexScalars.push_back(plastic);
  tintPlasticFlow(g);
  for (const int v : {0, 1}) {
    for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(g.colors[3 * v + c], before[3 * v + c]) << v;
  }
  const float dark[3] = {0.55F, 0.08F, 0.06F};
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(g.colors[6 + c], 0.5F * (before[6 + c] + dark[c]), 1e-5F);
    EXPECT_NEAR(g.colors[9 + c], dark[c], 1e-6F);
    EXPECT_NEAR(g.colors[12 + c], dark[c], 1e-6F);
  }
}

// A scene with every kind of thing the renderer draws: mesh, surfels, pins, a sphere and
// a box obstacle, the ground with its grid and shadows. `lift` raises the bodies (m).
struct MixedScene {
  std::vector<RenderBody> bodies;
  Stage stage;
  Camera camera;
  RenderSettings settings;

  explicit MixedScene(double lift = 0) : bodies(2) {
    bodies[0].geometry = meshSphere(0.3, {-0.4, 0, 0.5 + lift}, 24);
    bodies[0].color = {0.9f, 0.55f, 0.2f};
    bodies[0].pinned = {0, 5, 100};
    bodies[1].geometry = pointSphere(0.3, {0.4, 0, 0.5 + lift}, 5000);
    bodies[1].geometry.normals.clear();  // normals from the neighbours
    bodies[1].color = {0.25f, 0.55f, 0.85f};
    stage.extent = 2;
    stage.obstacles.push_back({ObstacleType::kSphere, {0, 0.6, 0.2}, 0.2, {0, 0, 0}});
    stage.obstacles.push_back({ObstacleType::kBox, {0, -0.6, 0.1}, 0, {0.1, 0.1, 0.1}});
    Bounds b;
    b.min[0] = -0.8, b.min[1] = -0.8, b.min[2] = 0;
    b.max[0] = 0.8, b.max[1] = 0.8, b.max[2] = 0.8;
    settings.width = 322;  // not a multiple of the 4x4 ray packets
    settings.height = 183;
    settings.showPins = true;
    camera = fitCamera(b, {0, 0, 1}, 322.0 / 183.0);
  }
  [[nodiscard]] Image render(Renderer& renderer) const {
    return renderer.render(bodies, stage, camera);
  }
};

Image renderMixedScene() {
  const MixedScene scene;
  Renderer renderer(scene.settings);
  return scene.render(renderer);
}

TEST(RenderDeterminism, SameImageWithOneAndTwoThreads) {
  Image one, two;
  {
    const ThreadLimit limit(1);
    one = renderMixedScene();
  }
  {
    const ThreadLimit limit(2);
    two = renderMixedScene();
  }
  ASSERT_EQ(one.rgb.size(), two.rgb.size());
  EXPECT_TRUE(one.rgb == two.rgb);
  if (const char* dump = std::getenv("SHELLSIM_TEST_IMAGES"))
    writePng(fs::path(dump) / "mixed.png", one);
  // And the picture is not empty: both bodies are in it.
  EXPECT_GT(coverage(one).pixels, 0);
}

// A renderer refits last frame's BVH when the next frame has the same structure: the
// picture must be the one a fresh renderer makes.
TEST(RenderDeterminism, RefittedFrameEqualsFreshRender) {
  const MixedScene first(0), second(0.1);
  Renderer reused(first.settings);
  (void)first.render(reused);
  const Image refitted = second.render(reused);
  Renderer fresh(second.settings);
  const Image expected = second.render(fresh);
  EXPECT_TRUE(refitted.rgb == expected.rgb);
  EXPECT_FALSE(refitted.rgb == first.render(fresh).rgb);  // the bodies did move
}

TEST(RenderImage, PngIsWrittenAtomicallyWithItsSignature) {
  const TempFolder folder;
  Image image(32, 16);
  image.at(3, 4)[0] = 255;
  writePng(folder.path() / "a.png", image);
  std::ifstream in(folder.path() / "a.png", std::ios::binary);
  char signature[8] = {};
  in.read(signature, 8);
  EXPECT_EQ(std::string(signature + 1, 3), "PNG");
  EXPECT_THROW(writePng(folder.path() / "no-such-folder" / "a.png", image), IoError);
}

// A small run of the default scene: a coarse sheet, four frames.
fs::path smallRun(const fs::path& folder) {
  SceneDef scene = defaultScene();
  scene.bodies[0].primitive->resolution = 6;
  RunOptions options;
  options.outputFolder = folder;
  options.maxFrames = 4;
  (void)runScene(scene, options);
  return folder;
}

RenderOptions smallOptions() {
  RenderOptions options;
  options.settings.width = 160;
  options.settings.height = 90;
  return options;
}

// PATH without ffmpeg for the lifetime of the object.
class NoFfmpeg {
 public:
  NoFfmpeg() {
    const char* old = std::getenv("PATH");
    old_ = old != nullptr ? old : "";
    setenv("PATH", "/nonexistent-shellsim-test", 1);
  }
  ~NoFfmpeg() { setenv("PATH", old_.c_str(), 1); }
  NoFfmpeg(const NoFfmpeg&) = delete;
  NoFfmpeg& operator=(const NoFfmpeg&) = delete;

 private:
  std::string old_;
};

bool ffmpegInstalled() {
  return std::system("ffmpeg -version > /dev/null 2>&1") == 0;
}

TEST(RenderRun, WritesFramesContactSheetPlotAndVideo) {
  const TempFolder folder;
  const fs::path run = smallRun(folder.path() / "run");
  const RenderReport report = renderRun(run, smallOptions());
  EXPECT_EQ(report.framesRendered, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(fs::exists(run / "render" / ("frame_0000" + std::to_string(i) + ".png")));
  }
  EXPECT_TRUE(fs::exists(run / "contact_sheet.png"));
  EXPECT_TRUE(fs::exists(run / "energy.png"));
  if (ffmpegInstalled()) {
    ASSERT_TRUE(report.video.has_value());
    EXPECT_GT(fs::file_size(run / "video.mp4"), 0u);
  }
}

TEST(RenderRun, WithoutFfmpegTheRestIsWrittenAndOneLineSaysWhy) {
  const TempFolder folder;
  const fs::path run = smallRun(folder.path() / "run");
  RenderReport report;
  {
    const NoFfmpeg noFfmpeg;
    report = renderRun(run, smallOptions());
  }
  EXPECT_FALSE(report.video.has_value());
  EXPECT_FALSE(fs::exists(run / "video.mp4"));
  EXPECT_TRUE(fs::exists(run / "contact_sheet.png"));
  ASSERT_EQ(report.messages.size(), 1u);
  EXPECT_NE(report.messages[0].find("no video: ffmpeg is not installed"), std::string::npos);
}

TEST(RenderRun, PreviewWhileRunningWritesTheSameOutputs) {
  const TempFolder folder;
  SceneDef scene = defaultScene();
  scene.bodies[0].primitive->resolution = 6;
  PreviewRecorder preview(folder.path(), smallOptions());
  RunOptions options;
  options.outputFolder = folder.path();
  options.maxFrames = 3;
  options.onProgress = [&](const RunProgress& p) { preview.addFrame(p.frame, p.frameCount); };
  (void)runScene(scene, options);
  const RenderReport report = preview.finish();
  EXPECT_EQ(report.framesRendered, 3);
  EXPECT_TRUE(fs::exists(folder.path() / "render" / "frame_00002.png"));
  EXPECT_TRUE(fs::exists(folder.path() / "contact_sheet.png"));
  EXPECT_TRUE(fs::exists(folder.path() / "energy.png"));
}

TEST(RenderRun, CompareWritesOneSideBySideVideo) {
  const TempFolder folder;
  const fs::path run = smallRun(folder.path() / "run");
  const RenderReport report = compareRuns(run, run, folder.path() / "cmp", smallOptions());
  EXPECT_EQ(report.framesRendered, 4);
  EXPECT_TRUE(fs::exists(folder.path() / "cmp" / "frames" / "frame_00003.png"));
  EXPECT_TRUE(fs::exists(folder.path() / "cmp" / "contact_sheet.png"));
  if (ffmpegInstalled()) {
    EXPECT_TRUE(fs::exists(folder.path() / "cmp" / "compare.mp4"));
  }
}

// The message of the error `f` throws, which must be of type E.
template <class E, class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error of the expected type";
  return {};
}

TEST(RenderErrors, MissingFrameFileIsNamed) {
  const TempFolder folder;
  const fs::path run = smallRun(folder.path() / "run");
  const fs::path missing = run / "frames" / "sheet_00002.ply";
  fs::remove(missing);
  const std::string message = errorOf<IoError>([&] { (void)renderRun(run, smallOptions()); });
  EXPECT_NE(message.find(missing.string()), std::string::npos) << message;
}

TEST(RenderErrors, CorruptFrameFileIsNamed) {
  const TempFolder folder;
  const fs::path run = smallRun(folder.path() / "run");
  const fs::path corrupt = run / "frames" / "sheet_00001.ply";
  std::ofstream(corrupt, std::ios::binary | std::ios::trunc) << "ply\nformat nonsense\n";
  const std::string message = errorOf<InputError>([&] { (void)renderRun(run, smallOptions()); });
  EXPECT_NE(message.find(corrupt.string()), std::string::npos) << message;
}

TEST(RenderErrors, MissingOrCorruptSummaryIsNamed) {
  const TempFolder folder;
  std::string message = errorOf<IoError>([&] { (void)renderRun(folder.path(), smallOptions()); });
  EXPECT_NE(message.find("summary.json"), std::string::npos) << message;
  std::ofstream(folder.path() / "summary.json") << "{\"frames\": [";
  message = errorOf<InputError>([&] { (void)renderRun(folder.path(), smallOptions()); });
  EXPECT_NE(message.find("summary.json"), std::string::npos) << message;
}

TEST(RenderErrors, ImageSizeIsChecked) {
  RenderSettings settings;
  settings.width = 8;
  EXPECT_THROW(Renderer{settings}, InputError);
}

}  // namespace
}  // namespace shellsim
