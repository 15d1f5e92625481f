// The wedge sheet of a sweep (shellsim sweep-report): every variant's last frame, rendered
// small with one camera for all so that they compare, labelled with its values.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/json_file.hpp"
#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/render.hpp"
#include "shellsim/run.hpp"

namespace shellsim {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// "young_modulus=1e+06" from ("bodies[0].material.young_modulus", "1000000.0").
std::string labelOf(const std::string& path, const Json& value) {
  const size_t dot = path.find_last_of('.');
  std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  std::string text;
  if (value.is_number()) {
    char number[32];
    std::snprintf(number, sizeof number, "%g", value.get<double>());
    text = number;
  } else {
    text = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return key + "=" + text;
}

}  // namespace

fs::path renderSweepSheet(const fs::path& out, int32_t thumbnailWidth) {
  if (thumbnailWidth < 32 || thumbnailWidth > 2048) {
    throw InputError("sweep sheet: thumbnail width must be in [32, 2048]");
  }
  const Json description = readJsonFile(out / "sweep.json");
  const auto parameters = description.at("parameters").get<std::vector<std::string>>();
  const Json& variants = description.at("variants");
  // The runs that wrote frames; the others get a grey tile.
  std::vector<std::optional<detail::RunInfo>> runs;
  std::vector<const detail::RunInfo*> finished;
  for (const Json& variant : variants) {
    const fs::path folder = out / variant.at("folder").get<std::string>();
    std::optional<detail::RunInfo> run;
    if (fs::exists(folder / "summary.json")) {
      try {
        run = detail::readRunInfo(folder);
        if (run->frames.empty()) run.reset();
      } catch (const Error&) {
        run.reset();
      }
    }
    runs.push_back(std::move(run));
  }
  for (const auto& run : runs) {
    if (run) finished.push_back(&*run);
  }
  const int32_t width = thumbnailWidth, height = thumbnailWidth * 9 / 16;
  RenderSettings settings;
  settings.width = width;
  settings.height = height;
  Renderer renderer(settings);
  Bounds bounds;
  Camera camera;
  if (!finished.empty()) {
    bounds = detail::runBounds(finished);
    camera = finished.front()->camera
                 ? *finished.front()->camera
                 : fitCamera(bounds, finished.front()->up, static_cast<double>(width) / height);
  }
  // The parameters that vary (one that takes a single value says nothing on a tile), and
  // the columns: the values of a grid sweep's last varying parameter, so that a row holds
  // one value of the others.
  std::vector<std::string> varying;
  std::vector<int32_t> distinct;
  for (const std::string& p : parameters) {
    std::vector<std::string> seen;
    for (const Json& variant : variants) {
      const std::string value = variant.at("values").at(p).dump();
      if (std::find(seen.begin(), seen.end(), value) == seen.end()) seen.push_back(value);
    }
    if (seen.size() > 1) {
      varying.push_back(p);
      distinct.push_back(static_cast<int32_t>(seen.size()));
    }
  }
  int32_t columns = 4;
  if (description.value("combine", std::string("grid")) == "grid" && !distinct.empty()) {
    columns = distinct.back();
  }
  columns = std::clamp(columns, 1, 8);
  const auto count = static_cast<int32_t>(variants.size());
  const int32_t rows = (count + columns - 1) / columns;
  constexpr int32_t kGap = 6, kScale = 1;
  const int32_t lineHeight = detail::textHeight(kScale) + 2;
  const int32_t labelHeight = lineHeight * (static_cast<int32_t>(varying.size()) + 1) + 4;
  Image sheet(columns * (width + kGap) + kGap, rows * (height + labelHeight + kGap) + kGap);
  detail::fillRect(sheet, 0, 0, sheet.width, sheet.height, {32, 34, 38});
  for (int32_t i = 0; i < count; ++i) {
    const Json& variant = variants[static_cast<size_t>(i)];
    const int32_t x = kGap + (i % columns) * (width + kGap);
    const int32_t y = kGap + (i / columns) * (height + labelHeight + kGap);
    const std::optional<detail::RunInfo>& run = runs[static_cast<size_t>(i)];
    std::string state = "not run";
    if (run) {
      const detail::RunFrame& last = run->frames.back();
      const Stage stage = detail::makeStage(*run, &last, bounds);
      detail::blit(sheet, renderer.render(detail::loadFrame(*run, last, 0), stage, camera), x, y);
      char time[48];
      std::snprintf(time, sizeof time, "t=%.3g s", last.time);
      state = time;
      const RunStatus status = readRunStatus(run->folder);
      if (status.status != "completed") state += " " + status.status;
    } else {
      detail::fillRect(sheet, x, y, width, height, {70, 72, 76});
    }
    char index[16];
    std::snprintf(index, sizeof index, "%04d ", variant.at("index").get<int32_t>());
    detail::drawText(sheet, x + 2, y + height + 3, index + state, kScale, {200, 200, 200});
    for (size_t p = 0; p < varying.size(); ++p) {
      detail::drawText(sheet, x + 2, y + height + 3 + lineHeight * static_cast<int32_t>(p + 1),
                       labelOf(varying[p], variant.at("values").at(varying[p])), kScale,
                       {235, 235, 235});
    }
  }
  const fs::path path = out / "sweep_sheet.png";
  writePng(path, sheet);
  return path;
}

}  // namespace shellsim
