// Writes frames and the run summary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/byte_stream.hpp"
#include "dynamics/step_pipeline.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// A frame of a static run (time.integrator "static"): one load increment.
struct StaticFrame {
  double loadFactor = 0;  // of gravity and the loads, (0, 1]
  double residual = 0;    // final relative Newton residual, largest over the bodies
};

struct FrameRecord {
  int32_t frame = 0;
  double time = 0;            // s
  int64_t steps = 0;          // steps accepted up to this frame
  int64_t rejectedSteps = 0;  // proposals undone and split up to this frame
  // Implicit runs: Newton iterations and Cholesky factorizations up to this frame, all
  // bodies (the completed steps of failed, recomputed attempts included, as in `steps`);
  // absent for explicit runs.
  std::optional<NewtonCounts> newton;
  std::optional<StaticFrame> staticFrame;  // static runs, frames after the first
  double wallSeconds = 0;                  // since the run started
  // Work done on the bodies since the start by loads, pressure, moving pins and scripted
  // obstacles (World::externalWork), and the energy resampling added (Model::addedEnergy),
  // J: what the total energy may have gained.
  double externalWork = 0;
  struct BodyEnergy {
    double kinetic = 0, stretching = 0, bending = 0, gravitational = 0;  // J
    int32_t pieces = 1;          // connected pieces (Model::nodePieces)
    int32_t rigidFragments = 0;  // of them handed to Bullet (rigid_fragments.hpp)
    int64_t brokenElements = 0;  // broken so far
    int32_t cracks = 0;          // crack planes so far
    int32_t nodes = 0;           // nodes now (topology edits change it)
    int64_t elements = 0;        // elements now (Model::elementCount)
    double gasPressure = 0;      // Pa, the over-pressure pushing now (bodies with a pressure)
  };
  std::vector<BodyEnergy> bodies;
  std::vector<std::string> files;     // written for this frame, relative to the output folder
  std::vector<Vec3> obstacleOffsets;  // scripted offset per obstacle; empty when none moves
};

// This machine's host name ("" when it cannot be read): with the process id in a summary,
// it tells a run still being written from one whose process is gone (readRunStatus).
[[nodiscard]] std::string hostName();

// Piece ids that last over a run, so that a piece keeps its colour while it keeps its nodes:
// `labels` are this frame's Model::nodePieces (0 .. k-1, renumbered as the model likes),
// `previous` the ids given to the nodes at the last frame (empty at the first). Each label
// takes the previous id it shares the most nodes with (the largest overlaps first; a node
// index keeps its meaning, new nodes are appended), and a label left without one, a piece
// newly broken off, takes `nextId`, which then grows. (nNodes) ids.
[[nodiscard]] std::vector<int32_t> persistentPieceIds(std::span<const int32_t> previous,
                                                      std::span<const int32_t> labels,
                                                      int32_t& nextId);

class Recorder {
 public:
  // Creates the output folder (and frames/ inside it). Throws IoError naming it. `camera`
  // is recorded in the summary for the renderer.
  Recorder(std::filesystem::path folder, std::vector<OutputFormat> formats,
           std::optional<CameraDef> camera = std::nullopt);

  // Writes every body's surface in every format and appends the frame's energies.
  // `steps`: the run's counts so far; Newton counts are recorded when `implicit`.
  void writeFrame(const World& world, int32_t frame, const StepCounts& steps, bool implicit,
                  double wallSeconds, const std::optional<StaticFrame>& staticFrame = {});

  // Rewrites summary.json atomically. `status` is "running", "completed" or
  // "numerical_failure"; `error` is the failure message, if any.
  void writeSummary(const World& world, const std::string& sceneName, double timeStep,
                    double stableTimeStep, const PhaseTimes& times,
                    const std::vector<std::string>& warnings, const std::string& status,
                    const std::string& error) const;

  [[nodiscard]] const std::filesystem::path& folder() const { return folder_; }
  [[nodiscard]] std::filesystem::path summaryPath() const { return folder_ / "summary.json"; }
  [[nodiscard]] const std::vector<FrameRecord>& frames() const { return frames_; }

  // The records of the frames so far, for a checkpoint, and back (a resumed run continues
  // the summary of the run it resumes). readRecords throws InputError through `in`.
  void writeRecords(ByteWriter& out) const;
  void readRecords(ByteReader& in);
  // After readRecords (a resumed run): cuts the point caches back to the frames recorded,
  // so the frames computed again append where the checkpoint was taken.
  void resumePointCaches(const World& world);

 private:
  std::filesystem::path folder_;
  std::vector<OutputFormat> formats_;
  // Who writes the summary (this process, on this host): read once, not per frame.
  std::string host_;
  int64_t pid_ = 0;
  std::optional<CameraDef> camera_;
  std::vector<FrameRecord> frames_;
  // OutputFormat::kPc2: one cache per body, (nBodies); absent before the body's first frame.
  struct PointCache {
    std::string relative;        // cache/<body>.pc2, relative to the folder
    int32_t points = 0;          // the surface's vertex count when it started
    int32_t firstFrame = 0;      // the frame of its first sample
    int32_t samples = 0;         // frames written
    int64_t brokenElements = 0;  // the body's, when it started: a break ends the cache
    int32_t cracks = 0;
    bool open = true;  // false once the topology changed
  };
  std::vector<std::optional<PointCache>> caches_;
  void appendPointCache(size_t bodyIndex, const Body& body, const Geometry& surface, int32_t frame);
  double surfaceSeconds_ = 0;  // moving embedded surfaces (wicke2005 section 6), s
  // persistentPieceIds per body, (nBodies) x (nNodes), and the next id each gives.
  std::vector<std::vector<int32_t>> pieceIds_;
  std::vector<int32_t> nextPieceId_;
};

}  // namespace shellsim
