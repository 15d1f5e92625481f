// Rendering whole runs: frames, contact sheet, energy plot, video; two runs side by side;
// previews while a run goes.
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/run.hpp"

namespace shellsim {

namespace {

namespace fs = std::filesystem;
using detail::Rgb;

constexpr const char* kFramePattern = "frame_%05d.png";
// Thumbnails of the contact sheet are about this wide.
constexpr int32_t kThumbnailWidth = 320;

fs::path framePath(const fs::path& folder, int32_t index) {
  char name[32];
  std::snprintf(name, sizeof name, kFramePattern, index);
  return folder / name;
}

void makeFolder(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw IoError(folder.string() + ": cannot create folder: " + ec.message());
}

// PNGs left by an earlier, longer render would end up in the video (ffmpeg reads the
// numbered sequence until the first gap).
void removeOldFrames(const fs::path& folder) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("frame_", 0) == 0 && entry.path().extension() == ".png") {
      fs::remove(entry.path(), ec);
    }
  }
}

// The time with as many decimals as the frame interval needs (at least 2): frames of a
// 1000 fps impact read 0.003 s, 0.004 s, not 0.00 s twice.
std::string timeLabel(int32_t frame, double time, double frameRate) {
  const int decimals = std::clamp(static_cast<int>(std::ceil(std::log10(frameRate) - 1e-9)), 2, 6);
  char text[64];
  std::snprintf(text, sizeof text, "frame %d  t = %.*f s", frame, decimals, time);
  return text;
}

int32_t thumbnailFactor(int32_t width) {
  return std::max(1, width / kThumbnailWidth);
}

void note(const RenderOptions& options, RenderReport& report, const std::string& message) {
  report.messages.push_back(message);
  if (options.onMessage) options.onMessage(message);
}

// Video (optional) and contact sheet: the common tail of every render.
void finishOutputs(const RenderOptions& options, RenderReport& report, const fs::path& frames,
                   double frameRate, const fs::path& video, const std::vector<Image>& thumbnails,
                   const std::vector<std::string>& labels, const fs::path& sheetPath) {
  writePng(sheetPath, detail::contactSheet(thumbnails, labels));
  report.contactSheet = sheetPath;
  if (!options.video) return;
  std::string why;
  report.video = detail::encodeVideo(frames, kFramePattern, frameRate, video, why);
  if (!report.video) {
    // A video from an earlier render would no longer match the frames.
    std::error_code ignored;
    fs::remove(video, ignored);
    note(options, report, why);
  }
}

// "1.5e+03"-style labels are hard to read on an axis; three significant digits.
std::string formatTick(double v) {
  char text[32];
  if (v == 0) return "0";
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

double niceStep(double range, int targetTicks) {
  const double raw = std::max(range, 1e-30) / targetTicks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

}  // namespace

void plotEnergy(const fs::path& summaryPath, const fs::path& pngPath, int32_t width,
                int32_t height) {
  const detail::RunInfo run = detail::readRunInfo(summaryPath.parent_path());
  const size_t n = run.frames.size();
  std::vector<double> t(n), kinetic(n), stretching(n), bending(n), work(n), dissipated(n);
  const bool gravity = n > 0 && run.frames[0].haveGravitational;
  const auto total = [&](const detail::RunFrame& f) {
    return f.kinetic + f.stretching + f.bending + (gravity ? f.gravitational : 0.0);
  };
  bool worked = false;
  for (size_t i = 0; i < n; ++i) {
    const detail::RunFrame& f = run.frames[i];
    t[i] = f.time;
    kinetic[i] = f.kinetic;
    stretching[i] = f.stretching;
    bending[i] = f.bending;
    // The energy balance: what the total lacks of its start plus the work done on the
    // bodies (loads, pressure, moving pins and obstacles) was dissipated (damping,
    // plasticity, fracture, friction, the integrator's own loss).
    work[i] = f.externalWork - run.frames[0].externalWork;
    worked = worked || work[i] != 0;
    dissipated[i] = total(run.frames[0]) + work[i] - total(f);
  }
  struct Series {
    const char* name;
    const std::vector<double>* values;
    Rgb color;
  };
  std::vector<Series> series = {{"kinetic", &kinetic, {214, 39, 40}},
                                {"stretching", &stretching, {31, 119, 180}},
                                {"bending", &bending, {44, 160, 44}}};
  if (worked) series.push_back({"work done on it", &work, {148, 103, 189}});
  series.push_back({"dissipated", &dissipated, {110, 110, 110}});
  double lo = 0, hi = 0;
  for (const Series& s : series) {
    for (const double v : *s.values) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (hi - lo <= 0) hi = lo + 1;
  const double tMin = n > 0 ? t.front() : 0;
  double tMax = n > 0 ? t.back() : 1;
  if (tMax <= tMin) tMax = tMin + 1;
  const double yStep = niceStep(hi - lo, 6);
  lo = std::floor(lo / yStep) * yStep;
  hi = std::ceil(hi / yStep) * yStep;
  const double xStep = niceStep(tMax - tMin, 8);

  Image image(width, height);
  detail::fillRect(image, 0, 0, width, height, {255, 255, 255});
  constexpr int32_t kScale = 2;
  const int32_t left = 120, right = width - 30, top = 60, bottom = height - 80;
  const auto px = [&](double x) { return left + (x - tMin) / (tMax - tMin) * (right - left); };
  const auto py = [&](double y) { return bottom - (y - lo) / (hi - lo) * (bottom - top); };
  // Grid and tick labels.
  for (double y = lo; y <= hi + 0.5 * yStep; y += yStep) {
    const double yy = py(y);
    detail::drawLine(image, left, yy, right, yy, 1,
                     std::abs(y) < 1e-12 * yStep ? Rgb{120, 120, 120} : Rgb{225, 225, 225});
    const std::string label = formatTick(std::abs(y) < 1e-9 * yStep ? 0 : y);
    detail::drawText(image, left - 10 - detail::textWidth(label, kScale),
                     static_cast<int32_t>(yy) - 7, label, kScale, {60, 60, 60});
  }
  for (double x = std::ceil(tMin / xStep) * xStep; x <= tMax + 1e-9 * xStep; x += xStep) {
    const double xx = px(x);
    detail::drawLine(image, xx, top, xx, bottom, 1, {225, 225, 225});
    const std::string label = formatTick(x);
    detail::drawText(image, static_cast<int32_t>(xx) - detail::textWidth(label, kScale) / 2,
                     bottom + 10, label, kScale, {60, 60, 60});
  }
  detail::drawLine(image, left, top, left, bottom, 2, {40, 40, 40});
  detail::drawLine(image, left, bottom, right, bottom, 2, {40, 40, 40});
  const std::string xLabel = "time (s)";
  detail::drawText(image, (left + right) / 2 - detail::textWidth(xLabel, kScale) / 2, bottom + 40,
                   xLabel, kScale, {40, 40, 40});
  detail::drawText(image, 10, 20, "energy (J)", kScale, {40, 40, 40});
  const std::string title = std::string(worked ? "dissipated = initial total + work done - total"
                                               : "dissipated = initial total - total") +
                            (gravity ? "; total = kinetic + elastic + gravitational"
                                     : "; total = kinetic + elastic (no gravity in summary)");
  detail::drawText(image, std::max<int32_t>(left, right - detail::textWidth(title, 1) - 4), 22,
                   title, 1, {100, 100, 100});
  // Curves, then the legend over them.
  for (const Series& s : series) {
    for (size_t i = 1; i < n; ++i) {
      const double a = (*s.values)[i - 1], b = (*s.values)[i];
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      detail::drawLine(image, px(t[i - 1]), py(a), px(t[i]), py(b), 3, s.color);
    }
  }
  int32_t ly = top + 12;
  int32_t legendWidth = 0;
  for (const Series& s : series) {
    legendWidth = std::max(legendWidth, 60 + detail::textWidth(s.name, kScale));
  }
  detail::fillRect(image, left + 14, top + 6, legendWidth,
                   static_cast<int32_t>(series.size()) * 24 + 8, {255, 255, 255});
  for (const Series& s : series) {
    detail::fillRect(image, left + 24, ly + 5, 30, 5, s.color);
    detail::drawText(image, left + 64, ly, s.name, kScale, {40, 40, 40});
    ly += 24;
  }
  writePng(pngPath, image);
}

RenderReport renderRun(const fs::path& runFolder, const RenderOptions& options) {
  const detail::RunInfo run = detail::readRunInfo(runFolder);
  RenderReport report;
  // A run that did not complete renders as far as it got; the user hears how it stands.
  if (const RunStatus status = readRunStatus(runFolder); status.status != "completed") {
    note(options, report, status.description);
  }
  const Bounds bounds = detail::runBounds({&run});
  const RenderSettings& s = options.settings;
  const Camera camera = options.camera ? *options.camera
                        : run.camera
                            ? *run.camera
                            : fitCamera(bounds, run.up, static_cast<double>(s.width) / s.height);
  Renderer renderer(s);
  report.framesFolder = runFolder / "render";
  makeFolder(report.framesFolder);
  removeOldFrames(report.framesFolder);
  const int32_t count = static_cast<int32_t>(run.frames.size());
  const std::vector<int32_t> picks = detail::evenlySpaced(count, options.contactSheetFrames);
  std::vector<Image> thumbnails;
  std::vector<std::string> labels;
  // Frames flow through three stages, each one frame at a time and in order: read, render,
  // write. Reading the next frame and encoding the last one's PNG (single-threaded, about
  // 20 ms at 1280x720) overlap with rendering, which keeps both cores busy.
  struct Job {
    int32_t index = 0;
    std::vector<RenderBody> bodies;
    Stage stage;
    Image image;
  };
  int32_t next = 0;
  tbb::parallel_pipeline(
      3, tbb::make_filter<void, std::shared_ptr<Job>>(
             tbb::filter_mode::serial_in_order,
             [&](tbb::flow_control& control) -> std::shared_ptr<Job> {
               if (next >= count) {
                 control.stop();
                 return nullptr;
               }
               auto job = std::make_shared<Job>();
               job->index = next++;
               const detail::RunFrame& frame = run.frames[static_cast<size_t>(job->index)];
               job->stage = detail::makeStage(run, &frame, bounds);
               job->bodies = detail::loadFrame(run, frame, 0);
               return job;
             }) &
             tbb::make_filter<std::shared_ptr<Job>, std::shared_ptr<Job>>(
                 tbb::filter_mode::serial_in_order,
                 [&](std::shared_ptr<Job> job) {
                   job->image = renderer.render(job->bodies, job->stage, camera);
                   job->bodies.clear();
                   return job;
                 }) &
             tbb::make_filter<std::shared_ptr<Job>, void>(
                 tbb::filter_mode::serial_in_order, [&](const std::shared_ptr<Job>& job) {
                   const int32_t i = job->index;
                   const detail::RunFrame& frame = run.frames[static_cast<size_t>(i)];
                   writePng(framePath(report.framesFolder, i), job->image);
                   if (std::find(picks.begin(), picks.end(), i) != picks.end()) {
                     thumbnails.push_back(detail::downscale(job->image, thumbnailFactor(s.width)));
                     labels.push_back(timeLabel(frame.frame, frame.time, detail::frameRateOf(run)));
                   }
                   report.framesRendered = i + 1;
                   if (options.onFrame) options.onFrame(i, count);
                 }));
  report.energyPlot = runFolder / "energy.png";
  plotEnergy(run.summaryPath, report.energyPlot);
  finishOutputs(options, report, report.framesFolder, detail::frameRateOf(run),
                runFolder / "video.mp4", thumbnails, labels, runFolder / "contact_sheet.png");
  return report;
}

RenderReport compareRuns(const fs::path& runA, const fs::path& runB, const fs::path& outFolder,
                         const RenderOptions& options) {
  const detail::RunInfo a = detail::readRunInfo(runA);
  const detail::RunInfo b = detail::readRunInfo(runB);
  const Bounds bounds = detail::runBounds({&a, &b});
  RenderSettings half = options.settings;
  half.width = options.settings.width / 2;
  const Camera camera =
      options.camera ? *options.camera
      : a.camera     ? *a.camera
                     : fitCamera(bounds, a.up, static_cast<double>(half.width) / half.height);
  Renderer renderA(half), renderB(half);
  RenderReport report;
  report.framesFolder = outFolder / "frames";
  makeFolder(report.framesFolder);
  removeOldFrames(report.framesFolder);
  const int32_t count = static_cast<int32_t>(std::max(a.frames.size(), b.frames.size()));
  const std::vector<int32_t> picks = detail::evenlySpaced(count, options.contactSheetFrames);
  std::vector<Image> thumbnails;
  std::vector<std::string> labels;
  const auto name = [](const fs::path& p) {
    const fs::path clean = p.has_filename() ? p : p.parent_path();
    return clean.filename().string();
  };
  for (int32_t i = 0; i < count; ++i) {
    Image image(options.settings.width, options.settings.height);
    double time = 0;
    int32_t x = 0;
    // The second run's bodies take the next palette colour, so the two read apart.
    for (const auto& [run, renderer, label, palette] :
         {std::tuple{&a, &renderA, name(runA), 0}, std::tuple{&b, &renderB, name(runB), 1}}) {
      const size_t k = std::min(static_cast<size_t>(i), run->frames.size() - 1);
      const detail::RunFrame& frame = run->frames[k];
      time = std::max(time, frame.time);
      const Stage stage = detail::makeStage(*run, &frame, bounds);
      Image part = renderer->render(detail::loadFrame(*run, frame, palette), stage, camera);
      detail::drawText(part, 12, 12, label, 2, {20, 20, 20});
      detail::blit(image, part, x, 0);
      x += half.width;
    }
    detail::fillRect(image, half.width - 1, 0, 2, image.height, {20, 20, 20});
    writePng(framePath(report.framesFolder, i), image);
    if (std::find(picks.begin(), picks.end(), i) != picks.end()) {
      thumbnails.push_back(detail::downscale(image, thumbnailFactor(options.settings.width)));
      labels.push_back(timeLabel(i, time, detail::frameRateOf(a)));
    }
    report.framesRendered = i + 1;
    if (options.onFrame) options.onFrame(i, count);
  }
  finishOutputs(options, report, report.framesFolder, detail::frameRateOf(a),
                outFolder / "compare.mp4", thumbnails, labels, outFolder / "contact_sheet.png");
  return report;
}

struct PreviewRecorder::Impl {
  fs::path folder;
  RenderOptions options;
  std::optional<Renderer> renderer;
  std::optional<Camera> camera;
  Bounds bounds;
  RenderReport report;
  std::vector<int32_t> picks;
  std::vector<Image> thumbnails;
  std::vector<std::string> labels;
  double frameRate = 30;
};

PreviewRecorder::PreviewRecorder(fs::path runFolder, RenderOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->folder = std::move(runFolder);
  impl_->options = std::move(options);
  impl_->renderer.emplace(impl_->options.settings);
}

PreviewRecorder::~PreviewRecorder() = default;

void PreviewRecorder::addFrame(int32_t frame, int32_t frameCount) {
  Impl& p = *impl_;
  // The summary is rewritten after every frame; it lists the frame's files, the bodies'
  // pins and the view (camera, ground, obstacles).
  const detail::RunInfo run = detail::readRunInfo(p.folder);
  const auto it = std::find_if(run.frames.begin(), run.frames.end(),
                               [&](const detail::RunFrame& f) { return f.frame == frame; });
  if (it == run.frames.end()) {
    throw InputError(run.summaryPath.string() + ": frame " + std::to_string(frame) +
                     " is not listed");
  }
  const RenderSettings& s = p.options.settings;
  if (!p.camera) {
    p.report.framesFolder = p.folder / "render";
    makeFolder(p.report.framesFolder);
    removeOldFrames(p.report.framesFolder);
    p.picks = detail::evenlySpaced(frameCount, p.options.contactSheetFrames);
    // The first frame, its obstacles and the ground, grown by half its size: bodies fall,
    // spread and bounce, and the camera cannot follow without jumping.
    detail::RunInfo first = run;
    first.frames.assign(1, *it);
    p.bounds = detail::runBounds({&first});
    for (int c = 0; c < 3; ++c) {
      const double mid = 0.5 * (p.bounds.min[c] + p.bounds.max[c]);
      const double halfSize = 0.5 * (p.bounds.max[c] - p.bounds.min[c]);
      const double grown = std::max(1.25 * halfSize, 0.1);
      p.bounds.min[c] = mid - grown;
      p.bounds.max[c] = mid + grown;
    }
    p.camera = p.options.camera ? *p.options.camera
               : run.camera     ? *run.camera
                            : fitCamera(p.bounds, run.up, static_cast<double>(s.width) / s.height);
  }
  const Stage stage = detail::makeStage(run, &*it, p.bounds);
  const Image image = p.renderer->render(detail::loadFrame(run, *it, 0), stage, *p.camera);
  writePng(framePath(p.report.framesFolder, frame), image);
  if (std::find(p.picks.begin(), p.picks.end(), frame) != p.picks.end()) {
    p.thumbnails.push_back(detail::downscale(image, thumbnailFactor(s.width)));
    p.labels.push_back(timeLabel(frame, it->time, detail::frameRateOf(run)));
  }
  p.frameRate = detail::frameRateOf(run);
  p.report.framesRendered = std::max(p.report.framesRendered, frame + 1);
  if (p.options.onFrame) p.options.onFrame(frame, frameCount);
}

RenderReport PreviewRecorder::finish() {
  Impl& p = *impl_;
  if (p.report.framesRendered == 0) return p.report;
  p.report.energyPlot = p.folder / "energy.png";
  plotEnergy(p.folder / "summary.json", p.report.energyPlot);
  finishOutputs(p.options, p.report, p.report.framesFolder, p.frameRate, p.folder / "video.mp4",
                p.thumbnails, p.labels, p.folder / "contact_sheet.png");
  return p.report;
}

}  // namespace shellsim
