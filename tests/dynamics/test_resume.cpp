// Resume after a crash (runScene with RunOptions::resume): a run stopped after some frames
// and resumed from its checkpoint writes the same frame files, byte for byte, and the same
// simulated quantities in its summary as a run that was never stopped; for every model,
// with plasticity and cracks, explicit and implicit, on 1 and 2 threads. A checkpoint that
// is missing, corrupt, of another version or from another scene is refused by name.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/byte_stream.hpp"
#include "dynamics/dynamics_test_util.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/models/inelastic_shell.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;
using testfiles::TempFolder;
using testing::sceneWith;
using testing::sheetBody;

std::vector<char> bytesOf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json summaryOf(const fs::path& folder) {
  std::ifstream in(folder / "summary.json");
  return nlohmann::json::parse(in);
}

// The summary without what depends on the wall clock.
nlohmann::json simulatedPart(nlohmann::json summary) {
  summary.erase("phase_seconds");
  for (auto& frame : summary["frames"]) frame.erase("wall_seconds");
  return summary;
}

RunReport run(const SceneDef& scene, const fs::path& out, int threads,
              std::optional<int32_t> maxFrames = std::nullopt, bool resume = false) {
  ThreadLimit limit(threads);
  RunOptions options;
  options.outputFolder = out;
  options.maxFrames = maxFrames;
  options.resume = resume;
  return runScene(scene, options);
}

// Runs `scene` whole on 1 thread; stops a second run after `stopAfter` frames on `threads`
// threads and resumes it on the other count; expects the same files and summary.
void expectResumedRunEqualsWholeRun(const SceneDef& scene, int32_t stopAfter, int threads) {
  SCOPED_TRACE("stopped after " + std::to_string(stopAfter) + " frames on " +
               std::to_string(threads) + " threads");
  TempFolder folder("resume_");
  const fs::path whole = folder.path() / "whole", resumed = folder.path() / "resumed";
  const RunReport reference = run(scene, whole, 1);
  ASSERT_GT(reference.framesWritten, stopAfter + 1);
  (void)run(scene, resumed, threads, stopAfter);
  ASSERT_TRUE(fs::exists(resumed / "checkpoint.bin"));
  const RunReport report = run(scene, resumed, 3 - threads, std::nullopt, true);
  EXPECT_EQ(report.framesWritten, reference.framesWritten);
  EXPECT_EQ(report.steps, reference.steps);
  const auto wholeSummary = summaryOf(whole), resumedSummary = summaryOf(resumed);
  EXPECT_EQ(resumedSummary["status"], "completed");
  EXPECT_EQ(simulatedPart(resumedSummary), simulatedPart(wholeSummary));
  for (const auto& frame : wholeSummary["frames"]) {
    for (const auto& file : frame["files"]) {
      const std::string name = file.get<std::string>();
      ASSERT_TRUE(bytesOf(resumed / name) == bytesOf(whole / name)) << name << " differs";
    }
  }
  for (const auto& cache : wholeSummary.value("point_caches", nlohmann::json::array())) {
    const std::string name = cache["file"].get<std::string>();
    EXPECT_TRUE(bytesOf(resumed / name) == bytesOf(whole / name)) << name << " differs";
  }
}

SceneDef swingingSheet(const std::string& model, Integrator integrator) {
  BodyDef body = sheetBody(8);
  body.model = model;
  body.material.youngModulus = 1e6;
  body.material.thickness = 2e-3;
  body.material.damping = 0.5;
  PinDef edge;
  edge.center = {-0.25, 0, 0};
  edge.halfExtents = {0.01, 0.3, 0.01};
  body.pins.push_back(edge);
  SceneDef scene = sceneWith(body);
  ObstacleDef ball;
  ball.type = ObstacleType::kSphere;
  ball.center = {0.1, 0, -0.25};
  ball.radius = 0.15;
  scene.obstacles.push_back(ball);
  scene.time.duration = 0.25;
  scene.time.frameRate = 40;
  scene.time.integrator = integrator;
  return scene;
}

// A fiber sheet pulled apart by a scripted pin: plastic flow, broken fibers and cracks.
SceneDef tearingFiberSheet() {
  BodyDef body = sheetBody(10);
  body.model = "fiber";
  body.options<FiberDef>().plasticity = FiberPlasticityDef{};
  body.options<FiberDef>().fracture = FiberFractureDef{};
  body.options<FiberDef>().fracture->stretchLimit = 1.05;
  body.options<FiberDef>().fracture->cooldownSteps = 2;
  PinDef left;
  left.center = {-0.25, 0, 0};
  left.halfExtents = {0.01, 0.3, 0.01};
  PinDef right = left;
  right.center = {0.25, 0, 0};
  right.path = {{0, {0, 0, 0}}, {0.2, {0.2, 0, 0}}};
  body.pins = {left, right};
  SceneDef scene = sceneWith(body);
  scene.time.duration = 0.2;
  scene.time.frameRate = 40;
  return scene;
}

TEST(Resume, MassSpringExplicitWithContact) {
  const SceneDef scene = swingingSheet("mass_spring", Integrator::kVerlet);
  for (const int threads : {1, 2}) expectResumedRunEqualsWholeRun(scene, 4, threads);
}

// A pin that lets go mid-run (at 0.1 s): stopped before the release and after it.
TEST(Resume, APinThatLetsGoMidRun) {
  SceneDef scene = swingingSheet("mass_spring", Integrator::kVerlet);
  scene.bodies[0].pins[0].release = 0.1;
  for (const int32_t stopAfter : {2, 6}) {
    for (const int threads : {1, 2}) expectResumedRunEqualsWholeRun(scene, stopAfter, threads);
  }
}

TEST(Resume, DiscreteShellExplicitAndBackwardEuler) {
  expectResumedRunEqualsWholeRun(swingingSheet("discrete_shell", Integrator::kVerlet), 4, 2);
  // The implicit solver keeps a Cholesky factor between steps; every checkpoint drops it, in
  // the whole run as in the resumed one.
  expectResumedRunEqualsWholeRun(swingingSheet("discrete_shell", Integrator::kBackwardEuler), 3, 1);
}

TEST(Resume, FiberWithPlasticityAndCracks) {
  const SceneDef scene = tearingFiberSheet();
  TempFolder folder("resume_");
  const RunReport whole = run(scene, folder.path() / "probe", 2);
  const auto summary = summaryOf(folder.path() / "probe");
  const auto& last = summary["frames"].back()["bodies"][0];
  ASSERT_GT(last["cracks"].get<int>(), 0) << "the sheet did not crack: the test tests less";
  ASSERT_GT(summary["frames"][3]["bodies"][0]["broken_elements"].get<int>(), 0);
  (void)whole;
  for (const int threads : {1, 2}) expectResumedRunEqualsWholeRun(scene, 4, threads);
}

// The inelastic shell (gingold2004) tearing with plasticity: the mesh, the plastic strains
// and the faces' refractory counters come back from the checkpoint, taken after the first
// cuts; more cuts follow after the resume.
TEST(Resume, InelasticShellWithPlasticityAndFracture) {
  SceneDef scene = testing::pulledInelasticStrip();
  scene.bodies[0].options<InelasticShellDef>().yieldStrain = 0.0095;
  scene.bodies[0].options<InelasticShellDef>().hardening = 1.0;
  scene.time.duration = 0.17;
  scene.time.frameRate = 500;  // the strip tears over about 5 ms from t = 0.16 s
  TempFolder folder("resume_");
  (void)run(scene, folder.path() / "probe", 2);
  const auto summary = summaryOf(folder.path() / "probe");
  const int cutsAtStop = summary["frames"][81]["bodies"][0]["broken_elements"].get<int>();
  const int cutsAtEnd = summary["frames"].back()["bodies"][0]["broken_elements"].get<int>();
  ASSERT_GT(cutsAtStop, 0) << "no cut before the stop: the test tests less";
  ASSERT_GT(cutsAtEnd, cutsAtStop) << "no cut after the stop: the test tests less";
  expectResumedRunEqualsWholeRun(scene, 81, 2);
}

TEST(Resume, FromACheckpointOlderThanTheLastFrame) {
  // Checkpoints every 3 frames; the run stops after frame 4: frames 4 and 5 are computed
  // again from the checkpoint at frame 3 and come out the same.
  SceneDef scene = swingingSheet("fiber", Integrator::kVerlet);
  scene.output.checkpointEvery = 3;
  expectResumedRunEqualsWholeRun(scene, 5, 2);
}

// Point caches (output.formats "pc2") are cut back to the checkpoint's frame and go on from
// there: the same bytes as a run never stopped, for a cache written whole (a swinging sheet)
// and one that ends where the body breaks (a torn fiber sheet).
TEST(Resume, PointCachesGoOnFromTheCheckpoint) {
  SceneDef swinging = swingingSheet("discrete_shell", Integrator::kVerlet);
  swinging.output.formats = {OutputFormat::kPly, OutputFormat::kPc2};
  swinging.output.checkpointEvery = 3;
  expectResumedRunEqualsWholeRun(swinging, 5, 2);
  SceneDef torn = tearingFiberSheet();
  torn.output.formats = {OutputFormat::kPly, OutputFormat::kPc2};
  expectResumedRunEqualsWholeRun(torn, 4, 2);
}

// A point cache holds the frames' vertices as float32, after the PC2 header, and ends where
// the body's surface changes its topology (the summary says so).
TEST(PointCache, HoldsEachFramesVerticesUntilTheTopologyChanges) {
  for (const bool tearing : {false, true}) {
    SCOPED_TRACE(tearing ? "torn" : "swinging");
    SceneDef scene =
        tearing ? tearingFiberSheet() : swingingSheet("discrete_shell", Integrator::kVerlet);
    scene.output.formats = {OutputFormat::kPly, OutputFormat::kPc2};
    TempFolder folder("pc2_");
    const RunReport report = run(scene, folder.path(), 2);
    const auto summary = summaryOf(folder.path());
    ASSERT_EQ(summary["point_caches"].size(), 1U);
    const auto& cache = summary["point_caches"][0];
    const std::vector<char> bytes = bytesOf(folder.path() / cache["file"].get<std::string>());
    ASSERT_GE(bytes.size(), 32U);
    EXPECT_EQ(std::string(bytes.data(), 11), "POINTCACHE2");
    int32_t version = 0, points = 0, samples = 0;
    float start = -1, rate = 0;
    std::memcpy(&version, bytes.data() + 12, 4);
    std::memcpy(&points, bytes.data() + 16, 4);
    std::memcpy(&start, bytes.data() + 20, 4);
    std::memcpy(&rate, bytes.data() + 24, 4);
    std::memcpy(&samples, bytes.data() + 28, 4);
    EXPECT_EQ(version, 1);
    EXPECT_EQ(start, 0.0F);
    EXPECT_EQ(rate, 1.0F);
    EXPECT_EQ(samples, cache["frames"].get<int32_t>());
    EXPECT_EQ(bytes.size(), 32U + static_cast<size_t>(samples) * points * 12);
    const int brokenAtEnd = summary["frames"].back()["bodies"][0]["cracks"].get<int>();
    if (tearing) {
      ASSERT_GT(brokenAtEnd, 0) << "the sheet did not tear: the test tests less";
      EXPECT_TRUE(cache["topology_changed"].get<bool>());
      EXPECT_LT(samples, report.framesWritten);
      EXPECT_GT(samples, 0);
    } else {
      EXPECT_FALSE(cache["topology_changed"].get<bool>());
      EXPECT_EQ(samples, report.framesWritten);
    }
    for (int32_t k = 0; k < samples; ++k) {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "_%05d.ply", k);
      const std::string name =
          "frames/" + summary["bodies"][0]["name"].get<std::string>() + suffix;
      const Geometry frame = readGeometry(folder.path() / name);
      ASSERT_EQ(frame.vertexCount(), points) << name;
      for (int32_t i = 0; i < 3 * points; ++i) {
        float value = 0;
        std::memcpy(&value, bytes.data() + 32 + (static_cast<size_t>(k) * points * 3 + i) * 4, 4);
        ASSERT_EQ(value, static_cast<float>(frame.positions[static_cast<size_t>(i)]))
            << name << " value " << i;
      }
    }
  }
}

TEST(Resume, StaticLoadIncrements) {
  SceneDef scene = loadScene(fs::path(SHELLSIM_SOURCE_DIR) / "scenes" / "static_cantilever.json");
  scene.time.loadIncrements = 8;
  expectResumedRunEqualsWholeRun(scene, 3, 2);
}

TEST(Resume, ACheckpointThatDoesNotFitIsRefusedByName) {
  TempFolder folder("resume_");
  const fs::path out = folder.path() / "run";
  const SceneDef scene = swingingSheet("mass_spring", Integrator::kVerlet);
  const auto errorOf = [&](const SceneDef& s) {
    try {
      (void)run(s, out, 1, std::nullopt, true);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no InputError";
    return std::string();
  };
  EXPECT_NE(errorOf(scene).find("no checkpoint to resume from"), std::string::npos);
  (void)run(scene, out, 1, 3);
  const fs::path checkpoint = out / "checkpoint.bin";
  const std::vector<char> good = bytesOf(checkpoint);
  const auto write = [&](const std::vector<char>& bytes) {
    std::ofstream o(checkpoint, std::ios::binary | std::ios::trunc);
    o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };

  SceneDef other = scene;  // another material: another scene
  other.bodies[0].material.youngModulus *= 2;
  EXPECT_NE(errorOf(other).find("from another scene"), std::string::npos) << errorOf(other);

  std::vector<char> bad = good;
  bad[bad.size() / 2] ^= 0x10;
  write(bad);
  EXPECT_NE(errorOf(scene).find("corrupt"), std::string::npos) << errorOf(scene);
  EXPECT_NE(errorOf(scene).find(checkpoint.string()), std::string::npos);

  write(std::vector<char>(good.begin(), good.begin() + 100));
  EXPECT_NE(errorOf(scene).find("corrupt"), std::string::npos);

  write(std::vector<char>{'h', 'e', 'l', 'l', 'o'});
  EXPECT_NE(errorOf(scene).find("not a shellsim state"), std::string::npos);

  // Another format version, with a checksum that matches: refused for its version.
  bad = good;
  uint32_t version = 0;
  std::memcpy(&version, &bad[8], sizeof version);
  ++version;
  std::memcpy(&bad[8], &version, sizeof version);
  const size_t body = bad.size() - sizeof(uint64_t);
  const uint64_t checksum = fnv1a(std::span(reinterpret_cast<const uint8_t*>(bad.data()), body));
  std::memcpy(&bad[body], &checksum, sizeof checksum);
  write(bad);
  EXPECT_NE(
      errorOf(scene).find("format version " + std::to_string(version) +
                          "; this shellsim 0.1.0 reads version " + std::to_string(version - 1)),
      std::string::npos)
      << errorOf(scene);

  // The good one still resumes, and the run then completes.
  write(good);
  EXPECT_EQ(run(scene, out, 1, std::nullopt, true).framesWritten, 11);
}

TEST(Resume, ALongerRunContinuesAShorterOne) {
  // The duration is not part of what must match: a finished run can be extended.
  SceneDef scene = swingingSheet("mass_spring", Integrator::kVerlet);
  TempFolder folder("resume_");
  const fs::path whole = folder.path() / "whole", extended = folder.path() / "extended";
  (void)run(scene, whole, 1);
  SceneDef shorter = scene;
  shorter.time.duration = 0.1;
  EXPECT_EQ(run(shorter, extended, 1).framesWritten, 5);
  EXPECT_EQ(run(scene, extended, 1, std::nullopt, true).framesWritten, 11);
  EXPECT_EQ(simulatedPart(summaryOf(extended)), simulatedPart(summaryOf(whole)));
}

}  // namespace
}  // namespace shellsim
