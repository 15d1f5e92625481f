#include "dynamics/recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <system_error>
#include <tuple>

#include "dynamics/stepper.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim {

namespace {

const char* extension(OutputFormat format) {
  switch (format) {
    case OutputFormat::kPly: return "ply";
    case OutputFormat::kObj: return "obj";
    case OutputFormat::kVtp: return "vtp";
    case OutputFormat::kPc2: return "pc2";
  }
  return "ply";
}

// What the renderer needs besides the frames: which way is up, the camera of the scene
// (if any) and the obstacles at time 0 (moving ones get per-frame offsets).
nlohmann::json viewJson(const World& world, const std::optional<CameraDef>& camera) {
  using nlohmann::json;
  json view;
  const double g = world.gravity.norm();
  // "+ 0.0" turns the -0 of negated zero components into 0 in the file.
  const Vec3 up = (g > 0 ? Vec3(-world.gravity / g) : Vec3(0, 0, 1)) + Vec3::Zero();
  view["up"] = {up.x(), up.y(), up.z()};
  if (camera) {
    view["camera"] = {{"eye", camera->eye},
                      {"target", camera->target},
                      {"up", camera->up},
                      {"fov", camera->fovDegrees}};
  }
  json obstacles = json::array();
  for (const Obstacle& o : world.obstacles) {
    const ObstacleDef& d = o.def;
    switch (d.type) {
      case ObstacleType::kPlane:
        obstacles.push_back({{"type", "plane"}, {"point", d.point}, {"normal", d.normal}});
        break;
      case ObstacleType::kSphere:
        obstacles.push_back({{"type", "sphere"}, {"center", d.center}, {"radius", d.radius}});
        break;
      case ObstacleType::kBox:
        obstacles.push_back(
            {{"type", "box"}, {"center", d.center}, {"half_extents", d.halfExtents}});
        break;
    }
  }
  view["obstacles"] = obstacles;
  return view;
}

}  // namespace

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return {};
  return host;
}

Recorder::Recorder(std::filesystem::path folder, std::vector<OutputFormat> formats,
                   std::optional<CameraDef> camera)
    : folder_(std::move(folder)),
      formats_(std::move(formats)),
      host_(hostName()),
      pid_(getpid()),
      camera_(std::move(camera)) {
  std::error_code error;
  std::filesystem::create_directories(folder_ / "frames", error);
  if (error) {
    throw IoError(folder_.string() + ": cannot create output folder: " + error.message());
  }
}

std::vector<int32_t> persistentPieceIds(std::span<const int32_t> previous,
                                        std::span<const int32_t> labels, int32_t& nextId) {
  const int32_t labelCount = pieceCount(labels);
  std::vector<int32_t> idOfLabel(static_cast<size_t>(labelCount), -1);
  if (previous.empty()) {
    for (int32_t l = 0; l < labelCount; ++l) idOfLabel[static_cast<size_t>(l)] = l;
    nextId = std::max(nextId, labelCount);
  } else {
    // (label, previous id) -> nodes shared; the largest overlaps claim first, ties in
    // label then id order, so that the ids do not depend on anything but the two lists.
    std::map<std::pair<int32_t, int32_t>, int64_t> shared;
    const size_t common = std::min(previous.size(), labels.size());
    for (size_t i = 0; i < common; ++i) ++shared[{labels[i], previous[i]}];
    std::vector<std::tuple<int64_t, int32_t, int32_t>> claims;
    claims.reserve(shared.size());
    for (const auto& [pair, count] : shared) claims.emplace_back(-count, pair.first, pair.second);
    std::sort(claims.begin(), claims.end());
    std::set<int32_t> taken;
    for (const auto& [negativeCount, label, id] : claims) {
      if (idOfLabel[static_cast<size_t>(label)] >= 0 || taken.count(id) > 0) continue;
      idOfLabel[static_cast<size_t>(label)] = id;
      taken.insert(id);
    }
    for (int32_t& id : idOfLabel) {
      if (id < 0) id = nextId++;
    }
  }
  std::vector<int32_t> ids(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) ids[i] = idOfLabel[static_cast<size_t>(labels[i])];
  return ids;
}

void Recorder::writeFrame(const World& world, int32_t frame, const StepCounts& steps, bool implicit,
                          double wallSeconds, const std::optional<StaticFrame>& staticFrame) {
  FrameRecord record;
  record.frame = frame;
  record.time = world.time;
  record.steps = steps.accepted;
  record.rejectedSteps = steps.rejected;
  if (implicit) record.newton = steps.newton;
  record.staticFrame = staticFrame;
  record.wallSeconds = wallSeconds;
  // The energy the models' discretization changes added (resampling) counts as put in, as the
  // energy guard counts it: the energy plot's balance (what was dissipated) stays true.
  record.externalWork = world.externalWork;
  for (const Body& body : world.bodies) record.externalWork += body.model->addedEnergy();
  const bool obstaclesMove = std::any_of(world.obstacles.begin(), world.obstacles.end(),
                                         [](const Obstacle& o) { return o.moves(); });
  if (obstaclesMove) {
    for (const Obstacle& o : world.obstacles) {
      record.obstacleOffsets.push_back(o.offset(world.time));
    }
  }
  pieceIds_.resize(world.bodies.size());
  nextPieceId_.resize(world.bodies.size(), 0);
  for (size_t bodyIndex = 0; bodyIndex < world.bodies.size(); ++bodyIndex) {
    const Body& body = world.bodies[bodyIndex];
    const std::vector<int32_t> pieces = body.model->nodePieces();
    record.bodies.push_back({kineticEnergy(body), body.elastic.stretching, body.elastic.bending,
                             gravitationalEnergy(body, world.gravity), pieceCount(pieces),
                             world.rigid.count(bodyIndex), body.brokenElements, body.crackCount(),
                             body.nodeCount(), body.model->elementCount(),
                             currentOverPressure(body, world.time)});
    // A model that tracks no pieces has no ids either.
    pieceIds_[bodyIndex] =
        pieces.empty() ? std::vector<int32_t>()
                       : persistentPieceIds(pieceIds_[bodyIndex], pieces, nextPieceId_[bodyIndex]);
    const auto start = std::chrono::steady_clock::now();
    const Geometry surface = bodySurface(world, bodyIndex, pieceIds_[bodyIndex]);
    if (body.embedded) {
      surfaceSeconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    for (OutputFormat format : formats_) {
      if (format == OutputFormat::kPc2) {
        appendPointCache(bodyIndex, body, surface, frame);
        continue;
      }
      char name[64];
      std::snprintf(name, sizeof name, "_%05d.%s", frame, extension(format));
      const std::string relative = "frames/" + body.name + name;
      const std::filesystem::path path = folder_ / relative;
      switch (format) {
        case OutputFormat::kPly: writePly(path, surface); break;
        case OutputFormat::kObj: writeObj(path, surface); break;
        case OutputFormat::kVtp: writeVtp(path, surface); break;
        case OutputFormat::kPc2: break;
      }
      record.files.push_back(relative);
    }
  }
  frames_.push_back(std::move(record));
}

namespace {

// The PC2 header (Blender's io_mesh_pc2 and Mesh Cache modifier): "POINTCACHE2\0", version 1,
// point count, start frame, frames between samples, sample count; little-endian, then the
// samples, each (points, 3) float32.
constexpr std::streamoff kPc2HeaderBytes = 32;

void writePc2Header(std::ostream& out, int32_t points, int32_t firstFrame, int32_t samples) {
  const char magic[12] = {'P', 'O', 'I', 'N', 'T', 'C', 'A', 'C', 'H', 'E', '2', '\0'};
  const int32_t version = 1;
  const auto start = static_cast<float>(firstFrame);
  const float rate = 1.0F;
  out.write(magic, sizeof magic);
  out.write(reinterpret_cast<const char*>(&version), 4);
  out.write(reinterpret_cast<const char*>(&points), 4);
  out.write(reinterpret_cast<const char*>(&start), 4);
  out.write(reinterpret_cast<const char*>(&rate), 4);
  out.write(reinterpret_cast<const char*>(&samples), 4);
}

}  // namespace

// A sample is appended, flushed, and only then counted in the header: a run killed midway
// leaves a cache whose header names only whole samples (resume cuts it back further).
void Recorder::appendPointCache(size_t bodyIndex, const Body& body, const Geometry& surface,
                                int32_t frame) {
  if (caches_.size() <= bodyIndex) caches_.resize(bodyIndex + 1);
  std::optional<PointCache>& cache = caches_[bodyIndex];
  const std::filesystem::path folder = folder_ / "cache";
  if (!cache) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) throw IoError(folder.string() + ": cannot create: " + error.message());
    cache = PointCache{"cache/" + body.name + ".pc2", surface.vertexCount(), frame, 0,
                       body.brokenElements,           body.crackCount(),     true};
    std::ofstream out(folder_ / cache->relative, std::ios::binary | std::ios::trunc);
    writePc2Header(out, cache->points, frame, 0);
    if (!out) throw IoError((folder_ / cache->relative).string() + ": cannot write");
  }
  if (!cache->open) return;
  if (surface.vertexCount() != cache->points || body.brokenElements != cache->brokenElements ||
      body.crackCount() != cache->cracks) {
    cache->open = false;  // broken: the first frame's mesh no longer fits
    return;
  }
  const std::filesystem::path path = folder_ / cache->relative;
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  if (!file) throw IoError(path.string() + ": cannot open for appending");
  std::vector<float> sample(surface.positions.begin(), surface.positions.end());
  file.seekp(kPc2HeaderBytes + static_cast<std::streamoff>(cache->samples) *
                                   static_cast<std::streamoff>(sample.size() * sizeof(float)));
  file.write(reinterpret_cast<const char*>(sample.data()),
             static_cast<std::streamsize>(sample.size() * sizeof(float)));
  file.flush();
  ++cache->samples;
  file.seekp(0);
  writePc2Header(file, cache->points, cache->firstFrame, cache->samples);
  file.flush();
  if (!file) throw IoError(path.string() + ": write failed");
}

void Recorder::resumePointCaches(const World& world) {
  if (std::find(formats_.begin(), formats_.end(), OutputFormat::kPc2) == formats_.end()) return;
  caches_.assign(world.bodies.size(), std::nullopt);
  const auto recorded = static_cast<int32_t>(frames_.size());  // frames 0 .. recorded - 1
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    const std::string relative = "cache/" + world.bodies[b].name + ".pc2";
    const std::filesystem::path path = folder_ / relative;
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;  // written from a later frame on
    char header[kPc2HeaderBytes] = {};
    in.read(header, kPc2HeaderBytes);
    const bool whole = in.gcount() == kPc2HeaderBytes;
    in.close();
    int32_t points = 0, samples = 0;
    float start = 0;
    std::memcpy(&points, header + 16, 4);
    std::memcpy(&start, header + 20, 4);
    std::memcpy(&samples, header + 28, 4);
    const auto firstFrame = static_cast<int32_t>(start);
    if (!whole || std::memcmp(header, "POINTCACHE2", 11) != 0 || points < 0 || samples < 0 ||
        firstFrame < 0 || firstFrame >= recorded ||
        frames_[static_cast<size_t>(firstFrame)].bodies.size() <= b) {
      throw InputError(path.string() + ": not a point cache this run wrote");
    }
    // Samples beyond the checkpoint's frame are computed again.
    const int32_t keep = std::min(samples, recorded - firstFrame);
    const FrameRecord::BodyEnergy& first = frames_[static_cast<size_t>(firstFrame)].bodies[b];
    caches_[b] = PointCache{relative,
                            points,
                            firstFrame,
                            keep,
                            first.brokenElements,
                            first.cracks,
                            keep == recorded - firstFrame};
    std::error_code error;
    std::filesystem::resize_file(
        path,
        static_cast<uintmax_t>(kPc2HeaderBytes) +
            static_cast<uintmax_t>(keep) * static_cast<uintmax_t>(points) * 12U,
        error);
    if (error) throw IoError(path.string() + ": cannot cut back: " + error.message());
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
    writePc2Header(file, points, firstFrame, keep);
    if (!file) throw IoError(path.string() + ": write failed");
  }
}

void Recorder::writeSummary(const World& world, const std::string& sceneName, double timeStep,
                            double stableTimeStep, const PhaseTimes& times,
                            const std::vector<std::string>& warnings, const std::string& status,
                            const std::string& error) const {
  using nlohmann::json;
  json summary;
  summary["shellsim_version"] = "0.1.0";
  summary["scene"] = sceneName;
  summary["status"] = status;
  if (!error.empty()) summary["error"] = error;
  // Who writes it: a summary left "running" by a killed process is told from one still
  // being written by a live one (readRunStatus).
  summary["process"] = {{"pid", pid_}, {"host", host_}};
  summary["time_step"] = timeStep;
  summary["stable_time_step"] = stableTimeStep;
  json bodies = json::array();
  for (const Body& body : world.bodies) {
    // Pinned nodes are frame vertices (every model writes its nodes as the frame's
    // vertices), so the renderer can mark them; an embedded surface's vertices are not nodes.
    std::vector<int32_t> pinned;
    for (size_t i = 0; i < body.pinned.size() && !body.embedded; ++i) {
      if (body.pinned[i] != 0) pinned.push_back(static_cast<int32_t>(i));
    }
    bodies.push_back({{"name", body.name},
                      {"model", body.model->name()},
                      {"nodes", body.model->nodeCount()},
                      {"elements", body.model->elementCount()},
                      {"pinned_nodes", pinned}});
  }
  summary["bodies"] = bodies;
  if (!caches_.empty()) {
    json caches = json::array();
    for (size_t b = 0; b < caches_.size(); ++b) {
      if (!caches_[b]) continue;
      const PointCache& c = *caches_[b];
      caches.push_back({{"body", world.bodies[b].name},
                        {"file", c.relative},
                        {"points", c.points},
                        {"first_frame", c.firstFrame},
                        {"frames", c.samples},
                        {"topology_changed", !c.open}});
    }
    summary["point_caches"] = caches;
  }
  summary["view"] = viewJson(world, camera_);
  json frames = json::array();
  for (const FrameRecord& record : frames_) {
    json energies = json::array();
    double kinetic = 0, potential = 0;
    for (size_t b = 0; b < record.bodies.size(); ++b) {
      const auto& e = record.bodies[b];
      kinetic += e.kinetic;
      potential += e.stretching + e.bending + e.gravitational;
      energies.push_back({{"body", world.bodies[b].name},
                          {"kinetic", e.kinetic},
                          {"stretching", e.stretching},
                          {"bending", e.bending},
                          {"gravitational", e.gravitational},
                          {"pieces", e.pieces},
                          {"rigid_fragments", e.rigidFragments},
                          {"broken_elements", e.brokenElements},
                          {"cracks", e.cracks},
                          {"nodes", e.nodes},
                          {"elements", e.elements}});
      if (world.bodies[b].pressure) energies.back()["gas_pressure"] = e.gasPressure;
    }
    json frame;
    frame["frame"] = record.frame;
    frame["time"] = record.time;
    frame["steps"] = record.steps;
    frame["steps_rejected"] = record.rejectedSteps;
    frame["wall_seconds"] = record.wallSeconds;
    if (record.newton) {
      frame["newton_iterations"] = record.newton->iterations;
      frame["factorizations"] = record.newton->factorizations;
    }
    if (record.staticFrame) {
      frame["load_factor"] = record.staticFrame->loadFactor;
      frame["residual"] = record.staticFrame->residual;
    }
    frame["kinetic_energy"] = kinetic;
    frame["potential_energy"] = potential;
    frame["external_work"] = record.externalWork;
    frame["bodies"] = energies;
    frame["files"] = record.files;
    if (!record.obstacleOffsets.empty()) {
      json offsets = json::array();
      for (const Vec3& o : record.obstacleOffsets) offsets.push_back({o.x(), o.y(), o.z()});
      frame["obstacle_offsets"] = offsets;
    }
    frames.push_back(std::move(frame));
  }
  summary["frames"] = frames;
  summary["steps"] = frames_.empty() ? 0 : frames_.back().steps;
  summary["steps_rejected"] = frames_.empty() ? 0 : frames_.back().rejectedSteps;
  if (!frames_.empty() && frames_.back().newton) {
    summary["newton_iterations"] = frames_.back().newton->iterations;
    summary["factorizations"] = frames_.back().newton->factorizations;
  }
  summary["phase_seconds"] = {{"forces", times.forces},    {"integrate", times.integrate},
                              {"contact", times.contact},  {"checks", times.checks},
                              {"output", times.output},    {"inelastic", times.inelastic},
                              {"surface", surfaceSeconds_}};
  summary["warnings"] = warnings;
  const std::string text = summary.dump(2);
  writeFileAtomically(summaryPath(), [&](std::ostream& out) { out << text << '\n'; });
}

void Recorder::writeRecords(ByteWriter& out) const {
  out.value(surfaceSeconds_);
  out.value<uint64_t>(pieceIds_.size());
  for (size_t b = 0; b < pieceIds_.size(); ++b) {
    out.array(pieceIds_[b]);
    out.value(nextPieceId_[b]);
  }
  out.value<uint64_t>(frames_.size());
  for (const FrameRecord& r : frames_) {
    out.value(r.frame);
    out.value(r.time);
    out.value(r.steps);
    out.value(r.rejectedSteps);
    out.value<uint8_t>(r.newton ? 1 : 0);
    if (r.newton) {
      out.value(r.newton->iterations);
      out.value(r.newton->factorizations);
    }
    out.value(r.wallSeconds);
    out.value(r.externalWork);
    out.value<uint8_t>(r.staticFrame ? 1 : 0);
    if (r.staticFrame) {
      out.value(r.staticFrame->loadFactor);
      out.value(r.staticFrame->residual);
    }
    out.value<uint64_t>(r.bodies.size());
    for (const FrameRecord::BodyEnergy& b : r.bodies) {  // field by field: no padding bytes
      for (const double e : {b.kinetic, b.stretching, b.bending, b.gravitational}) out.value(e);
      out.value(b.pieces);
      out.value(b.rigidFragments);
      out.value(b.brokenElements);
      out.value(b.cracks);
      out.value(b.nodes);
      out.value(b.elements);
      out.value(b.gasPressure);
    }
    out.value<uint64_t>(r.files.size());
    for (const std::string& file : r.files) out.string(file);
    out.value<uint64_t>(r.obstacleOffsets.size());
    for (const Vec3& o : r.obstacleOffsets) {
      for (int c = 0; c < 3; ++c) out.value(o[c]);
    }
  }
}

void Recorder::readRecords(ByteReader& in) {
  surfaceSeconds_ = in.value<double>("surface seconds");
  const auto pieceBodies = in.value<uint64_t>("piece id bodies");
  if (pieceBodies > 1'000'000) in.fail("piece ids of " + std::to_string(pieceBodies) + " bodies");
  std::vector<std::vector<int32_t>> ids(pieceBodies);
  std::vector<int32_t> next(pieceBodies);
  for (size_t b = 0; b < pieceBodies; ++b) {
    ids[b] = in.array<int32_t>("piece ids");
    next[b] = in.value<int32_t>("next piece id");
    for (const int32_t id : ids[b]) {
      if (id < 0 || id >= next[b]) in.fail("piece id " + std::to_string(id) + " out of range");
    }
  }
  pieceIds_ = std::move(ids);
  nextPieceId_ = std::move(next);
  const auto count = in.value<uint64_t>("frame count");
  std::vector<FrameRecord> frames;
  for (uint64_t f = 0; f < count; ++f) {
    FrameRecord& r = frames.emplace_back();
    r.frame = in.value<int32_t>("frame");
    if (r.frame != static_cast<int64_t>(f)) in.fail("frame records out of order");
    r.time = in.value<double>("frame time");
    r.steps = in.value<int64_t>("frame steps");
    r.rejectedSteps = in.value<int64_t>("frame steps");
    if (in.value<uint8_t>("Newton flag") != 0) {
      NewtonCounts newton;
      newton.iterations = in.value<int64_t>("Newton counts");
      newton.factorizations = in.value<int64_t>("Newton counts");
      r.newton = newton;
    }
    r.wallSeconds = in.value<double>("wall seconds");
    r.externalWork = in.value<double>("external work");
    if (in.value<uint8_t>("static flag") != 0) {
      StaticFrame increment;
      increment.loadFactor = in.value<double>("load factor");
      increment.residual = in.value<double>("residual");
      r.staticFrame = increment;
    }
    const auto bodies = in.value<uint64_t>("body count");
    if (bodies > 1'000'000) in.fail("frame records: " + std::to_string(bodies) + " bodies");
    for (uint64_t b = 0; b < bodies; ++b) {
      FrameRecord::BodyEnergy& e = r.bodies.emplace_back();
      for (double* v : {&e.kinetic, &e.stretching, &e.bending, &e.gravitational}) {
        *v = in.value<double>("frame energies");
      }
      e.pieces = in.value<int32_t>("pieces");
      e.rigidFragments = in.value<int32_t>("rigid fragments");
      e.brokenElements = in.value<int64_t>("broken elements");
      e.cracks = in.value<int32_t>("cracks");
      e.nodes = in.value<int32_t>("nodes");
      e.elements = in.value<int64_t>("elements");
      e.gasPressure = in.value<double>("gas pressure");
    }
    const auto files = in.value<uint64_t>("file count");
    if (files > 1'000'000) in.fail("frame records: " + std::to_string(files) + " files");
    for (uint64_t i = 0; i < files; ++i) r.files.push_back(in.string("file name"));
    const auto offsets = in.value<uint64_t>("obstacle count");
    if (offsets > 1'000'000) in.fail("frame records: " + std::to_string(offsets) + " obstacles");
    for (uint64_t i = 0; i < offsets; ++i) {
      Vec3 o;
      for (int c = 0; c < 3; ++c) o[c] = in.value<double>("obstacle offset");
      r.obstacleOffsets.push_back(o);
    }
  }
  frames_ = std::move(frames);
}

}  // namespace shellsim
