// Reading a run folder (summary.json and the frame files it lists) into what the renderer
// draws, and the contact sheet.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim::detail {

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// Formats the renderer can read, best first (binary PLY is the fastest to read; VTK
// PolyData is written for ParaView and has no reader here).
int formatRank(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == ".ply") return 0;
  if (ext == ".obj") return 1;
  if (ext == ".off" || ext == ".stl" || ext == ".xyz") return 2;
  return -1;
}

Vec3d readVec3(const Json& j, const std::string& where) {
  if (!j.is_array() || j.size() != 3 || !j[0].is_number() || !j[1].is_number() ||
      !j[2].is_number()) {
    throw InputError(where + ": expected [x, y, z]");
  }
  return {j[0].get<double>(), j[1].get<double>(), j[2].get<double>()};
}

double readNumber(const Json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) {
    throw InputError(where + ": missing number '" + key + "'");
  }
  return it->get<double>();
}

void extend(Bounds& b, const Vec3d& lo, const Vec3d& hi, bool& any) {
  for (int c = 0; c < 3; ++c) {
    b.min[c] = any ? std::min(b.min[c], lo[c]) : lo[c];
    b.max[c] = any ? std::max(b.max[c], hi[c]) : hi[c];
  }
  any = true;
}

}  // namespace

double frameRateOf(const RunInfo& run) {
  if (run.frames.size() >= 2) {
    const double dt = run.frames[1].time - run.frames[0].time;
    if (dt > 0) return 1.0 / dt;
  }
  return 30.0;
}

RunInfo readRunInfo(const fs::path& folder) {
  RunInfo run;
  run.folder = folder;
  run.summaryPath = folder / "summary.json";
  const std::string name = run.summaryPath.string();
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw IoError(folder.string() + ": not a folder (expected the output folder of a run)");
  }
  std::ifstream in(run.summaryPath, std::ios::binary);
  if (!in) {
    throw IoError(name + ": cannot open (is " + folder.string() +
                  " the output folder of a shellsim run?)");
  }
  std::stringstream text;
  text << in.rdbuf();
  Json summary = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded() || !summary.is_object()) {
    throw InputError(name + ": not valid JSON (a corrupt run summary)");
  }
  try {
    const Json& bodies = summary.at("bodies");
    for (size_t b = 0; b < bodies.size(); ++b) {
      RunBody body;
      body.name = bodies[b].at("name").get<std::string>();
      if (const auto it = bodies[b].find("pinned_nodes"); it != bodies[b].end()) {
        body.pinned = it->get<std::vector<int32_t>>();
      }
      run.bodies.push_back(std::move(body));
    }
    if (const auto view = summary.find("view"); view != summary.end()) {
      if (const auto up = view->find("up"); up != view->end())
        run.up = readVec3(*up, name + ": view.up");
      if (const auto cam = view->find("camera"); cam != view->end()) {
        Camera c;
        c.eye = readVec3(cam->at("eye"), name + ": view.camera.eye");
        c.target = readVec3(cam->at("target"), name + ": view.camera.target");
        c.up = readVec3(cam->at("up"), name + ": view.camera.up");
        c.fovDegrees = readNumber(*cam, "fov", name + ": view.camera");
        run.camera = c;
      }
      if (const auto obstacles = view->find("obstacles"); obstacles != view->end()) {
        for (const Json& o : *obstacles) {
          const std::string type = o.at("type").get<std::string>();
          StageObstacle s;
          if (type == "plane") {
            if (!run.groundPoint) {
              run.groundPoint = readVec3(o.at("point"), name + ": view.obstacles.point");
              run.groundNormal = readVec3(o.at("normal"), name + ": view.obstacles.normal");
            }
            s.type = ObstacleType::kPlane;
          } else if (type == "sphere") {
            s.type = ObstacleType::kSphere;
            s.center = readVec3(o.at("center"), name + ": view.obstacles.center");
            s.radius = readNumber(o, "radius", name + ": view.obstacles");
          } else if (type == "box") {
            s.type = ObstacleType::kBox;
            s.center = readVec3(o.at("center"), name + ": view.obstacles.center");
            s.halfExtents = readVec3(o.at("half_extents"), name + ": view.obstacles.half_extents");
          }
          // Planes stay in the list so that obstacle_offsets line up with it.
          run.obstacles.push_back(s);
        }
      }
    }
    const Json& frames = summary.at("frames");
    for (const Json& f : frames) {
      RunFrame frame;
      frame.frame = f.at("frame").get<int32_t>();
      frame.time = f.at("time").get<double>();
      frame.kinetic = f.value("kinetic_energy", 0.0);
      frame.externalWork = f.value("external_work", 0.0);
      for (const Json& e : f.value("bodies", Json::array())) {
        frame.stretching += e.value("stretching", 0.0);
        frame.bending += e.value("bending", 0.0);
        if (e.contains("gravitational")) {
          frame.gravitational += e.value("gravitational", 0.0);
          frame.haveGravitational = true;
        }
      }
      const std::vector<std::string> files = f.at("files").get<std::vector<std::string>>();
      for (const RunBody& body : run.bodies) {
        // Files are named frames/<body>_<frame>.<ext>; pick the best readable format.
        const std::string prefix = "frames/" + body.name + "_";
        fs::path best;
        int bestRank = std::numeric_limits<int>::max();
        for (const std::string& file : files) {
          if (file.rfind(prefix, 0) != 0) continue;
          const int rank = formatRank(file);
          if (rank >= 0 && rank < bestRank) {
            bestRank = rank;
            best = folder / file;
          }
        }
        if (best.empty()) {
          throw InputError(name + ": frame " + std::to_string(frame.frame) + " of body '" +
                           body.name +
                           "' has no file the renderer reads (.ply or .obj); add \"ply\" to "
                           "output.formats");
        }
        frame.files.push_back(best);
      }
      if (const auto offsets = f.find("obstacle_offsets"); offsets != f.end()) {
        for (const Json& o : *offsets) frame.obstacleOffsets.push_back(readVec3(o, name));
      }
      run.frames.push_back(std::move(frame));
    }
  } catch (const Json::exception& e) {
    throw InputError(name + ": not a shellsim run summary: " + e.what());
  }
  if (run.frames.empty()) throw InputError(name + ": the run has no frames");
  return run;
}

std::vector<RenderBody> loadFrame(const RunInfo& run, const RunFrame& frame,
                                  int32_t paletteOffset) {
  std::vector<RenderBody> bodies;
  for (size_t b = 0; b < frame.files.size(); ++b) {
    RenderBody body;
    body.geometry = readGeometry(frame.files[b]);
    body.color = paletteColor(paletteOffset + static_cast<int32_t>(b));
    // Pieces after fracture get their own colours; a point cloud keeps the colours of its
    // file (the recorder colours a torn point cloud's pieces, core/palette.hpp).
    if (!body.geometry.isPointCloud() && body.geometry.colors.empty()) {
      body.geometry.colors =
          componentColors(body.geometry, paletteOffset + static_cast<int32_t>(b));
    }
    tintPlasticFlow(body.geometry);
    body.pinned = run.bodies[b].pinned;
    bodies.push_back(std::move(body));
  }
  return bodies;
}

Bounds runBounds(const std::vector<const RunInfo*>& runs) {
  Bounds bounds;
  bool any = false;
  std::optional<Vec3d> groundPoint, groundNormal;
  for (const RunInfo* run : runs) {
    if (run->groundPoint) {
      groundPoint = run->groundPoint;
      groundNormal = run->groundNormal;
    }
    for (const RunFrame& frame : run->frames) {
      for (const fs::path& file : frame.files) {
        const Geometry g = readGeometry(file);
        if (g.vertexCount() == 0) continue;
        const Bounds b = computeBounds(g);
        extend(bounds, {b.min[0], b.min[1], b.min[2]}, {b.max[0], b.max[1], b.max[2]}, any);
      }
    }
  }
  if (!any) bounds = Bounds{{-0.5, -0.5, -0.5}, {0.5, 0.5, 0.5}};
  // Obstacles near the bodies belong in the picture too (the sphere a sheet drapes over);
  // far ones (a huge box used as a wall) would shrink the bodies to dots, so only those
  // no bigger than the bodies' own bounds count.
  Bounds bodiesOnly = bounds;
  const double size =
      std::hypot(bodiesOnly.max[0] - bodiesOnly.min[0], bodiesOnly.max[1] - bodiesOnly.min[1],
                 bodiesOnly.max[2] - bodiesOnly.min[2]);
  for (const RunInfo* run : runs) {
    for (const StageObstacle& o : run->obstacles) {
      Vec3d half{0, 0, 0};
      if (o.type == ObstacleType::kSphere)
        half = {o.radius, o.radius, o.radius};
      else if (o.type == ObstacleType::kBox)
        half = o.halfExtents;
      else
        continue;
      if (2 * std::hypot(half[0], half[1], half[2]) > 2 * size) continue;
      extend(bounds, {o.center[0] - half[0], o.center[1] - half[1], o.center[2] - half[2]},
             {o.center[0] + half[0], o.center[1] + half[1], o.center[2] + half[2]}, any);
    }
  }
  // Down to the ground under the bodies, so the contact and the shadow are in view.
  if (groundPoint) {
    const Vec3d n = *groundNormal;
    for (int corner = 0; corner < 8; ++corner) {
      Vec3d p;
      for (int c = 0; c < 3; ++c) p[c] = ((corner >> c) & 1) != 0 ? bounds.max[c] : bounds.min[c];
      const double h = (p[0] - (*groundPoint)[0]) * n[0] + (p[1] - (*groundPoint)[1]) * n[1] +
                       (p[2] - (*groundPoint)[2]) * n[2];
      const Vec3d q{p[0] - h * n[0], p[1] - h * n[1], p[2] - h * n[2]};
      extend(bounds, q, q, any);
    }
  }
  return bounds;
}

Stage makeStage(const RunInfo& run, const RunFrame* frame, const Bounds& bounds) {
  Stage stage;
  const Vec3d u = run.up;
  const double un = std::hypot(u[0], u[1], u[2]);
  stage.up = un > 0 ? Vec3d{u[0] / un, u[1] / un, u[2] / un} : Vec3d{0, 0, 1};
  stage.extent = std::max(std::hypot(bounds.max[0] - bounds.min[0], bounds.max[1] - bounds.min[1],
                                     bounds.max[2] - bounds.min[2]),
                          1e-6);
  if (run.groundPoint) {
    stage.groundPoint = *run.groundPoint;
    const Vec3d n = *run.groundNormal;
    const double nn = std::hypot(n[0], n[1], n[2]);
    stage.groundNormal = {n[0] / nn, n[1] / nn, n[2] / nn};
  } else {
    // No floor in the scene: a ground plane just below the lowest point of the run, across
    // the up direction, still gives height and a shadow to read.
    double lowest = std::numeric_limits<double>::infinity();
    for (int corner = 0; corner < 8; ++corner) {
      double h = 0;
      for (int c = 0; c < 3; ++c) {
        h += (((corner >> c) & 1) != 0 ? bounds.max[c] : bounds.min[c]) * stage.up[c];
      }
      lowest = std::min(lowest, h);
    }
    lowest -= 0.02 * stage.extent;
    stage.groundPoint = {lowest * stage.up[0], lowest * stage.up[1], lowest * stage.up[2]};
    stage.groundNormal = stage.up;
  }
  for (size_t i = 0; i < run.obstacles.size(); ++i) {
    StageObstacle o = run.obstacles[i];
    if (o.type == ObstacleType::kPlane) continue;
    if (frame != nullptr && i < frame->obstacleOffsets.size()) {
      for (int c = 0; c < 3; ++c) o.center[c] += frame->obstacleOffsets[i][c];
    }
    stage.obstacles.push_back(o);
  }
  return stage;
}

std::vector<int32_t> evenlySpaced(int32_t n, int32_t count) {
  std::vector<int32_t> out;
  if (n <= 0 || count <= 0) return out;
  if (count >= n) {
    for (int32_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (int32_t i = 0; i < count; ++i) {
    const int32_t index =
        count == 1
            ? 0
            : static_cast<int32_t>(std::lround(static_cast<double>(i) * (n - 1) / (count - 1)));
    if (out.empty() || out.back() != index) out.push_back(index);
  }
  return out;
}

Image contactSheet(const std::vector<Image>& thumbnails, const std::vector<std::string>& labels) {
  if (thumbnails.empty()) return Image(16, 16);
  const int32_t columns = std::min<int32_t>(4, static_cast<int32_t>(thumbnails.size()));
  const int32_t rows = (static_cast<int32_t>(thumbnails.size()) + columns - 1) / columns;
  const int32_t tw = thumbnails[0].width, th = thumbnails[0].height;
  constexpr int32_t kGap = 6, kLabel = 22, kScale = 2;
  Image sheet(columns * (tw + kGap) + kGap, rows * (th + kLabel + kGap) + kGap);
  fillRect(sheet, 0, 0, sheet.width, sheet.height, {32, 34, 38});
  for (size_t i = 0; i < thumbnails.size(); ++i) {
    const int32_t col = static_cast<int32_t>(i) % columns, row = static_cast<int32_t>(i) / columns;
    const int32_t x = kGap + col * (tw + kGap), y = kGap + row * (th + kLabel + kGap);
    blit(sheet, thumbnails[i], x, y);
    if (i < labels.size()) drawText(sheet, x + 4, y + th + 4, labels[i], kScale, {230, 230, 230});
  }
  return sheet;
}

}  // namespace shellsim::detail
