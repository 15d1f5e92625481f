// Pieces shared by the files of the render library; not installed.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "shellsim/render.hpp"

namespace shellsim::detail {

// ---- renderer.cpp ----
// Colour `index` of the body palette.
std::array<float, 3> paletteColor(int32_t index);

// ---- image.cpp: drawing for the contact sheet and the plot ----
using Rgb = std::array<uint8_t, 3>;
void fillRect(Image& image, int32_t x, int32_t y, int32_t w, int32_t h, Rgb color);
// A line `width` pixels wide between two points (pixel coordinates), drawn as stamped squares.
void drawLine(Image& image, double x0, double y0, double x1, double y1, int32_t width, Rgb color);
// Text in the built-in 5x7 bitmap font (ASCII 32..126), each font pixel `scale` pixels
// square; (x, y) is the top-left corner. Returns the width drawn.
int32_t drawText(Image& image, int32_t x, int32_t y, const std::string& text, int32_t scale,
                 Rgb color);
[[nodiscard]] int32_t textWidth(const std::string& text, int32_t scale);
[[nodiscard]] constexpr int32_t textHeight(int32_t scale) {
  return 8 * scale;
}
// Box-filtered downscale by an integer factor (the last partial block is dropped).
[[nodiscard]] Image downscale(const Image& image, int32_t factor);
// Copies `source` into `target` with its top-left corner at (x, y), clipped.
void blit(Image& target, const Image& source, int32_t x, int32_t y);

// ---- run_files.cpp: what a run folder holds ----
struct RunBody {
  std::string name;
  std::vector<int32_t> pinned;  // pinned node (= frame vertex) indices
};
struct RunFrame {
  int32_t frame = 0;
  double time = 0;                                                     // s
  double kinetic = 0, stretching = 0, bending = 0, gravitational = 0;  // J, all bodies
  bool haveGravitational = false;
  // Work done on the bodies by loads, pressure, moving pins and scripted obstacles since
  // the start, J (summary "external_work"; 0 in summaries written before it was).
  double externalWork = 0;
  std::vector<std::filesystem::path> files;  // per body: the frame file to render, absolute
  std::vector<Vec3d> obstacleOffsets;        // per obstacle of the view; empty: all static
};
struct RunInfo {
  std::filesystem::path folder;
  std::filesystem::path summaryPath;
  std::vector<RunBody> bodies;
  std::vector<RunFrame> frames;
  Vec3d up{0, 0, 1};
  std::optional<Camera> camera;
  std::optional<Vec3d> groundPoint, groundNormal;  // the first plane obstacle
  std::vector<StageObstacle> obstacles;            // spheres and boxes at time 0
};
// Reads folder/summary.json. Throws IoError (missing, unreadable) or InputError (not a run
// summary, a frame lacking a renderable file) naming the file.
[[nodiscard]] RunInfo readRunInfo(const std::filesystem::path& folder);
// Frames per second, from the first two frames' times (30 for a run of one frame).
[[nodiscard]] double frameRateOf(const RunInfo& run);
// Reads the bodies of one frame, coloured (components, or per-point colours of the file).
[[nodiscard]] std::vector<RenderBody> loadFrame(const RunInfo& run, const RunFrame& frame,
                                                int32_t paletteOffset);
// Union of the bodies' bounds over every frame, the obstacles and the ground below them.
[[nodiscard]] Bounds runBounds(const std::vector<const RunInfo*>& runs);
// The stage of a run at a frame (obstacles moved by their offsets).
[[nodiscard]] Stage makeStage(const RunInfo& run, const RunFrame* frame, const Bounds& bounds);

// ---- video.cpp ----
// Encodes folder/<pattern> (printf pattern, e.g. frame_%05d.png) into `video` with
// ffmpeg (H.264, yuv420p). Returns the path written, or nothing with `why` set when ffmpeg
// is not installed. Throws IoError when ffmpeg fails, naming its log file.
std::optional<std::filesystem::path> encodeVideo(const std::filesystem::path& folder,
                                                 const std::string& pattern, double frameRate,
                                                 const std::filesystem::path& video,
                                                 std::string& why);

// ---- run_files.cpp ----
// Picks up to `count` evenly spaced indices in [0, n).
[[nodiscard]] std::vector<int32_t> evenlySpaced(int32_t n, int32_t count);
// Lays thumbnails out in a grid with a label under each.
[[nodiscard]] Image contactSheet(const std::vector<Image>& thumbnails,
                                 const std::vector<std::string>& labels);

}  // namespace shellsim::detail
