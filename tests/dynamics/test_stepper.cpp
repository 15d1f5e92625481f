#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <tuple>

#include "dynamics/contact.hpp"
#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/recorder.hpp"
#include "dynamics/simulation_impl.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/run.hpp"

namespace shellsim {
namespace {

using testing::gripLeftAndRightEdges;
using testing::sceneWith;
using testing::sheetBody;

namespace fs = std::filesystem;

fs::path scratchFolder(const std::string& name) {
  const fs::path folder = fs::temp_directory_path() / ("shellsim_test_" + name);
  fs::remove_all(folder);
  return folder;
}

// A sheet with vertex 0 pinned, so that it swings and deforms under gravity.
BodyDef sheetPinnedAtVertexZero() {
  BodyDef body = sheetBody();
  PinDef pin;
  pin.shape = PinShape::kVertices;
  pin.vertices = {0};
  body.pins.push_back(pin);
  return body;
}

TEST(Stepper, FreeFallIsExactForConstantAcceleration) {
  SceneDef scene = sceneWith(sheetBody());
  scene.bodies[0].initialVelocity = {0.5, 0, 2};
  World world = buildWorld(scene);
  const std::vector<double> x0 = world.bodies[0].positions;
  computeAccelerations(world);
  PhaseTimes times;
  const double dt = 1e-3;
  for (int s = 0; s < 400; ++s) step(world, dt, times);
  const double t = 400 * dt;
  for (size_t i = 0; i < x0.size(); i += 3) {
    EXPECT_NEAR(world.bodies[0].positions[i], x0[i] + 0.5 * t, 1e-12);
    EXPECT_NEAR(world.bodies[0].positions[i + 2], x0[i + 2] + 2 * t - 0.5 * 9.81 * t * t, 1e-11);
  }
}

// Largest deviation of the total energy from its initial value, and the change of its
// running mean between the first and last tenth of the run (the drift).
struct EnergyError {
  double worst = 0;
  double drift = 0;
};

EnergyError undampedVibration(double stepFraction, int steps) {
  SceneDef scene = sceneWith(sheetBody());
  scene.gravity = {0, 0, 0};
  World world = buildWorld(scene);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.004, 0.004);
  for (double& x : world.bodies[0].positions) x += u(rng);
  computeAccelerations(world);
  const double e0 = totalEnergy(world);
  const double dt = stepFraction * stableTimeStep(world);
  PhaseTimes times;
  EnergyError error;
  double first = 0, last = 0;
  const int window = steps / 10;
  for (int s = 0; s < steps; ++s) {
    step(world, dt, times);
    const double e = totalEnergy(world);
    error.worst = std::max(error.worst, std::abs(e - e0) / e0);
    if (s < window) first += e / window;
    if (s >= steps - window) last += e / window;
  }
  error.drift = std::abs(last - first) / e0;
  return error;
}

TEST(Stepper, UndampedVibrationConservesEnergy) {
  // Velocity Verlet is symplectic: the energy error oscillates with an amplitude of
  // O(dt^2) and does not drift. A random perturbation excites the stiffest modes, so at
  // a quarter of the stable step the oscillation stays below 3% and the drift of the
  // mean energy over 8000 steps below 0.2% (0.05% at half the step: it is the O(dt^2)
  // offset of the shadow energy, not a drift); halving the step divides the oscillation
  // by about 4. Measured: 1.8% / 0.13% at 1/4, 0.46% / 0.034% at 1/8 of the stable step.
  const EnergyError coarse = undampedVibration(0.25, 8000);
  const EnergyError fine = undampedVibration(0.125, 16000);
  EXPECT_LT(coarse.worst, 3e-2);
  EXPECT_LT(coarse.drift, 2e-3);
  EXPECT_LT(fine.drift, 0.5e-3);
  EXPECT_NEAR(coarse.worst / fine.worst, 4.0, 1.0);
}

TEST(Stepper, DampingDissipatesEnergy) {
  SceneDef scene = sceneWith(sheetBody());
  scene.gravity = {0, 0, 0};
  scene.bodies[0].material.damping = 5.0;
  scene.bodies[0].initialVelocity = {0, 0, 1};
  World world = buildWorld(scene);
  computeAccelerations(world);
  PhaseTimes times;
  const double e0 = kineticEnergy(world.bodies[0]);
  for (int s = 0; s < 1000; ++s) step(world, 1e-3, times);
  // Uniform motion: pure exponential decay of the speed, exp(-c t).
  EXPECT_NEAR(kineticEnergy(world.bodies[0]), e0 * std::exp(-2 * 5.0 * 1.0), 1e-6 * e0);
}

TEST(Contact, DroppedSphereStaysAboveFloorAndComesToRest) {
  BodyDef ball;
  ball.name = "ball";
  PrimitiveDef sphere;
  sphere.type = PrimitiveType::kSphere;
  sphere.radius = 0.2;
  sphere.resolution = 12;
  ball.primitive = sphere;
  ball.transform.translation = {0, 0, 0.5};
  ball.material.youngModulus = 2e5;
  ball.material.damping = 4.0;
  SceneDef scene = sceneWith(ball);
  ObstacleDef floor;
  floor.friction = 0.5;
  scene.obstacles.push_back(floor);
  World world = buildWorld(scene);
  computeAccelerations(world);
  PhaseTimes times;
  const double dt = 0.5 * stableTimeStep(world);
  double lowest = 1;
  for (double t = 0; t < 3.0; t += dt) {
    step(world, dt, times);
    for (size_t i = 2; i < world.bodies[0].positions.size(); i += 3) {
      lowest = std::min(lowest, world.bodies[0].positions[i]);
    }
  }
  EXPECT_GE(lowest, 0.0);
  // At rest: kinetic energy below 10^-4 of the potential energy it fell through.
  double mass = 0;
  for (double m : world.bodies[0].model->nodeMasses()) mass += m;
  EXPECT_LT(kineticEnergy(world.bodies[0]), 1e-4 * mass * 9.81 * 0.3);
}

// A one-cell sheet over `floor`, the floor its only obstacle.
World sheetOverFloor(const ObstacleDef& floor) {
  World world;
  world.obstacles.emplace_back(floor);
  World built = buildWorld(sceneWith(sheetBody(1)));
  world.bodies = std::move(built.bodies);
  return world;
}

TEST(Contact, RestitutionAndFrictionActOnTheRelativeVelocity) {
  ObstacleDef floor;
  floor.restitution = 0.5;
  floor.friction = 0.2;
  World world = sheetOverFloor(floor);
  Body& body = world.bodies[0];
  for (size_t i = 0; i < body.positions.size(); i += 3) {
    body.positions[i + 2] = -0.01;
    body.velocities[i] = 1.0;
    body.velocities[i + 1] = 0.0;
    body.velocities[i + 2] = -2.0;
  }
  const std::vector<double> before = body.positions;
  // Slipping 1 cm in the step against a cone of 0.2 * 1 cm: the node slides on.
  const int64_t contacts = projectOutOfObstacles(world, 0.01);
  applyContactVelocities(world);
  EXPECT_EQ(contacts, body.nodeCount());
  for (size_t i = 0; i < body.positions.size(); i += 3) {
    EXPECT_DOUBLE_EQ(body.positions[i], before[i]);
    EXPECT_DOUBLE_EQ(body.positions[i + 2], 0.0);
    EXPECT_DOUBLE_EQ(body.velocities[i + 2], 1.0);            // -e * vn
    EXPECT_NEAR(body.velocities[i], 1.0 - 0.2 * 3.0, 1e-15);  // friction * |dvn|
  }
  // Slipping 1 mm, within the cone of 2 mm: it sticks, the slip undone.
  for (size_t i = 0; i < body.positions.size(); i += 3) {
    body.positions[i + 2] = -0.01;
    body.velocities[i] = 0.1;
    body.velocities[i + 2] = -2.0;
  }
  const std::vector<double> sliding = body.positions;
  (void)projectOutOfObstacles(world, 0.01);
  for (size_t i = 0; i < body.positions.size(); i += 3) {
    EXPECT_NEAR(body.positions[i], sliding[i] - 0.1 * 0.01, 1e-15);
    EXPECT_DOUBLE_EQ(body.positions[i + 2], 0.0);
    // and the velocity whose slip was undone with it: kept, the tangential pull on a held
    // node built it up step after step until the node jumped (the draped default sheet
    // then slid off the sphere and chattered on the floor for ever, RestSlow).
    EXPECT_DOUBLE_EQ(body.velocities[i], 0.0);
  }
}

// A node held by a scripted floor's static friction moves with the floor, and the velocity
// the floor gives it is the floor's work (World::projectionWork, m dv . u).
TEST(Contact, ANodeHeldByAMovingFloorMovesWithItAndTheFloorDoesTheWork) {
  ObstacleDef floor;
  floor.friction = 0.2;
  floor.path = {{0.0, {0, 0, 0}}, {1.0, {0.5, 0, 0}}};  // 0.5 m/s along x
  World world = sheetOverFloor(floor);
  Body& body = world.bodies[0];
  world.time = 0.5;
  for (size_t i = 0; i < body.positions.size(); i += 3) {
    body.positions[i + 2] = -0.01;
    body.velocities[i] = 0.45;  // slips 0.5 mm against the floor in 10 ms, cone 2 mm
    body.velocities[i + 1] = 0.0;
    body.velocities[i + 2] = -2.0;
  }
  world.projectionWork = 0;
  (void)projectOutOfObstacles(world, 0.01);
  double expectedWork = 0;
  const auto mass = body.model->nodeMasses();
  for (size_t i = 0; i < body.positions.size(); i += 3) {
    EXPECT_DOUBLE_EQ(body.velocities[i], 0.5);
    expectedWork += mass[i / 3] * (0.5 - 0.45) * 0.5;
  }
  EXPECT_NEAR(world.projectionWork, expectedWork, 1e-15);
  EXPECT_GT(expectedWork, 0.0);
}

// A sheet resting on a slope, projection and penalty response: below the friction angle it
// stays (no creep down the slope, step after step; on the penalty slope it crept 2.1 mm in
// 0.5 s before its static friction), above it it slides with g (sin a - mu cos a) (the
// velocity filter's Coulomb friction).
TEST(Contact, ASheetOnASlopeSticksBelowTheFrictionAngleAndSlidesAbove) {
  for (const ObstacleResponse response :
       {ObstacleResponse::kProjection, ObstacleResponse::kPenalty})
    for (const double degrees : {20.0, 40.0}) {
      const double a = degrees * M_PI / 180, mu = 0.5;  // friction angle 26.6 degrees
      ObstacleDef slope;
      slope.normal = {std::sin(a), 0, std::cos(a)};
      slope.friction = mu;
      slope.restitution = 0;
      slope.response = response;
      SceneDef scene = sceneWith(sheetBody(4));
      scene.obstacles.push_back(slope);
      World world = buildWorld(scene);
      Body& body = world.bodies[0];
      // Laid on the slope: rotated about y by a (z' = z cos a - x sin a), resting on it.
      for (size_t i = 0; i < body.positions.size(); i += 3) {
        const double x = body.positions[i];
        body.positions[i] = x * std::cos(a);
        body.positions[i + 2] = -x * std::sin(a);
      }
      computeAccelerations(world);
      const double dt = 0.5 * stableTimeStep(world);
      PhaseTimes times;
      const auto centre = [&] {
        Vec3 c = Vec3::Zero();
        for (size_t i = 0; i < body.positions.size(); i += 3) {
          c += Vec3(body.positions[i], body.positions[i + 1], body.positions[i + 2]);
        }
        return Vec3(c / static_cast<double>(body.nodeCount()));
      };
      while (world.time < 0.2) step(world, dt, times);  // settle
      const Vec3 settled = centre();
      const double start = world.time;
      while (world.time < start + 0.5) step(world, dt, times);
      const double travelled = (centre() - settled).norm();
      if (std::tan(a) < mu) {
        EXPECT_LT(travelled, 1e-6) << degrees << " degrees";
      } else {
        // From rest after settling: at least a quarter of the free-sliding distance.
        const double sliding = 0.5 * 9.81 * (std::sin(a) - mu * std::cos(a)) * 0.25;
        EXPECT_GT(travelled, 0.25 * sliding) << degrees << " degrees";
      }
    }
}

// Rest that stays at rest, over a million steps: the default scene's sheet draped over
// the sphere (friction 0.4 on the sphere, 0.5 on the floor) and a sheet on a 20 degree slope
// (friction 0.5, below the friction angle). After they settle, their kinetic energy stays
// near zero and no node drifts. (Before static friction, a node on a slope crept a dt^2 / 2
// per step: 2.1 mm in 0.5 s on the slope.)
TEST(RestSlow, ADrapedSheetAndASheetOnASlopeStayAtRestForAMillionSteps) {
  const auto soak = [](World& world, const char* what) {
    computeAccelerations(world);
    const double dt = 0.5 * stableTimeStep(world);
    PhaseTimes times;
    constexpr int64_t kSteps = 1'000'000, kSettle = 250'000;
    std::vector<double> settled;
    double mostKinetic = 0, mostDrift = 0;
    for (int64_t s = 0; s < kSteps; ++s) {
      step(world, dt, times);
      if (s + 1 == kSettle) settled = world.bodies[0].positions;
      if (s + 1 > kSettle && (s + 1) % 1000 == 0) {
        mostKinetic = std::max(mostKinetic, kineticEnergy(world.bodies[0]));
        const std::vector<double>& x = world.bodies[0].positions;
        for (size_t i = 0; i < x.size(); i += 3) {
          mostDrift = std::max(mostDrift, std::hypot(x[i] - settled[i], x[i + 1] - settled[i + 1],
                                                     x[i + 2] - settled[i + 2]));
        }
      }
    }
    EXPECT_LT(mostKinetic, 1e-12) << what << ", J, after " << kSettle << " steps of " << dt << " s";
    EXPECT_LT(mostDrift, 1e-4) << what << ", m";
  };
  World draped = buildWorld(defaultScene());
  soak(draped, "the draped sheet");

  const double a = 20 * M_PI / 180;
  ObstacleDef slope;
  slope.normal = {std::sin(a), 0, std::cos(a)};
  slope.friction = 0.5;
  slope.restitution = 0;
  SceneDef scene = sceneWith(sheetBody(4));
  scene.obstacles.push_back(slope);
  World onSlope = buildWorld(scene);
  std::vector<double>& x = onSlope.bodies[0].positions;
  for (size_t i = 0; i < x.size(); i += 3) {
    const double along = x[i];
    x[i] = along * std::cos(a);
    x[i + 2] = -along * std::sin(a);
  }
  soak(onSlope, "the sheet on the slope");
}

TEST(Contact, BoxAndSphereSignedDistances) {
  ObstacleDef box;
  box.type = ObstacleType::kBox;
  box.halfExtents = {1, 2, 3};
  Vec3 n;
  EXPECT_DOUBLE_EQ(obstacleSignedDistance(box, Vec3::Zero(), Vec3(0.5, 0, 0), &n), -0.5);
  EXPECT_EQ(n, Vec3(1, 0, 0));
  EXPECT_DOUBLE_EQ(obstacleSignedDistance(box, Vec3::Zero(), Vec3(0, -2.5, 0), &n), 0.5);
  EXPECT_EQ(n, Vec3(0, -1, 0));
  EXPECT_DOUBLE_EQ(obstacleSignedDistance(box, Vec3::Zero(), Vec3(4, 6, 3), &n), 5.0);
  ObstacleDef ball;
  ball.type = ObstacleType::kSphere;
  ball.radius = 1;
  EXPECT_DOUBLE_EQ(obstacleSignedDistance(ball, Vec3(0, 0, 1), Vec3(0, 0, 3), &n), 1.0);
  EXPECT_EQ(n, Vec3(0, 0, 1));
}

TEST(Stepper, PinnedNodesFollowTheirScriptedPath) {
  BodyDef body = sheetBody();
  PinDef pin;
  pin.shape = PinShape::kBox;
  pin.center = {-0.25, -0.25, 0};
  pin.halfExtents = {0.01, 0.01, 0.01};
  pin.path = {{0.0, {0, 0, 0}}, {1.0, {0, 0, 0.5}}};
  body.pins.push_back(pin);
  World world = buildWorld(sceneWith(body));
  ASSERT_EQ(world.bodies[0].pins.size(), 1u);
  ASSERT_EQ(world.bodies[0].pins[0].nodes.size(), 1u);
  const size_t node = static_cast<size_t>(world.bodies[0].pins[0].nodes[0]);
  computeAccelerations(world);
  PhaseTimes times;
  for (int s = 0; s < 500; ++s) step(world, 1e-3, times);
  EXPECT_NEAR(world.bodies[0].positions[3 * node + 2], 0.25, 1e-12);
  EXPECT_NEAR(world.bodies[0].velocities[3 * node + 2], 0.5, 1e-12);
}

TEST(World, FiberBodyFromAMeshDropsVerticesOfNoTriangle) {
  // A 5 x 5 grid of 0.1 m cells whose OBJ starts with a stray vertex: a fiber body of every
  // vertex gets the 25 grid vertices as nodes (the stray one has no area, which the model
  // rejects), a warning, and pins by input vertex index still find their vertex.
  const fs::path folder = scratchFolder("fiber_stray_vertex");
  fs::create_directories(folder);
  std::ofstream obj(folder / "grid.obj");
  obj << "v 5 5 5\n";
  for (int j = 0; j < 5; ++j) {
    for (int i = 0; i < 5; ++i) obj << "v " << 0.1 * i << " " << 0.1 * j << " 0\n";
  }
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 4; ++i) {
      const int a = 2 + 5 * j + i;  // OBJ indices from 1, after the stray vertex
      obj << "f " << a << " " << a + 1 << " " << a + 6 << "\n";
      obj << "f " << a << " " << a + 6 << " " << a + 5 << "\n";
    }
  }
  obj.close();
  BodyDef body;
  body.name = "grid";
  body.file = folder / "grid.obj";
  body.model = "fiber";
  PinDef pin;
  pin.shape = PinShape::kVertices;
  pin.vertices = {7};  // input vertex 7: grid vertex (1, 1) at (0.1, 0.1, 0)
  body.pins.push_back(pin);
  const World world = buildWorld(sceneWith(body));
  ASSERT_EQ(world.bodies[0].nodeCount(), 25);
  bool warned = false;
  for (const std::string& w : world.warnings) {
    warned = warned || w.find("dropped 1 vertices that belong to no triangle") != std::string::npos;
  }
  EXPECT_TRUE(warned);
  ASSERT_EQ(world.bodies[0].pins.size(), 1u);
  ASSERT_EQ(world.bodies[0].pins[0].nodes.size(), 1u);
  const auto node = static_cast<size_t>(world.bodies[0].pins[0].nodes[0]);
  EXPECT_DOUBLE_EQ(world.bodies[0].positions[3 * node], 0.1);
  EXPECT_DOUBLE_EQ(world.bodies[0].positions[3 * node + 1], 0.1);
  fs::remove_all(folder);
}

TEST(World, PinThatSelectsNothingIsAnError) {
  BodyDef body = sheetBody();
  PinDef pin;
  pin.shape = PinShape::kSphere;
  pin.center = {5, 5, 5};
  body.pins.push_back(pin);
  try {
    (void)buildWorld(sceneWith(body));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bodies[0] 'sheet'.pins[0]: selects no node"),
              std::string::npos)
        << e.what();
  }
}

TEST(Run, WritesFramesAndSummary) {
  SceneDef scene = sceneWith(sheetBody());
  scene.time.duration = 0.2;
  scene.time.frameRate = 20;
  scene.output.formats = {OutputFormat::kPly, OutputFormat::kObj, OutputFormat::kVtp};
  const fs::path out = scratchFolder("run");
  RunOptions options;
  options.outputFolder = out;
  const RunReport report = runScene(scene, options);
  EXPECT_EQ(report.framesWritten, 5);
  for (int f = 0; f < 5; ++f) {
    char name[32];
    std::snprintf(name, sizeof name, "sheet_%05d", f);
    for (const char* ext : {".ply", ".obj", ".vtp"}) {
      EXPECT_TRUE(fs::exists(out / "frames" / (std::string(name) + ext))) << name << ext;
    }
  }
  const Geometry last = readGeometry(out / "frames" / "sheet_00004.ply");
  EXPECT_EQ(last.vertexCount(), 81);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["frames"].size(), 5u);
  EXPECT_GT(summary["steps"].get<int64_t>(), 0);
  EXPECT_NEAR(summary["frames"][4]["time"].get<double>(), 0.2, 1e-12);
  // Free fall from rest: kinetic energy = m g^2 t^2 / 2 at t = 0.2 s.
  const double mass = 500 * 1e-3 * 0.25;
  EXPECT_NEAR(summary["frames"][4]["kinetic_energy"].get<double>(),
              0.5 * mass * std::pow(9.81 * 0.2, 2), 1e-9);
}

TEST(Run, BlowUpIsCaughtAndEarlierFramesStayValid) {
  BodyDef body = sheetPinnedAtVertexZero();
  body.material.youngModulus = 1e9;  // far too stiff for the requested step
  body.initialVelocity = {0, 0, 0.1};
  SceneDef scene = sceneWith(body);
  scene.time.frameRate = 100;
  scene.time.timeStep = 1e-3;
  scene.time.duration = 1;
  const fs::path out = scratchFolder("blowup");
  RunOptions options;
  options.outputFolder = out;
  std::vector<std::string> warnings;
  options.onWarning = [&](const std::string& w) { warnings.push_back(w); };
  try {
    (void)runScene(scene, options);
    FAIL() << "blow-up not detected";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("body 'sheet'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("frame"), std::string::npos) << e.what();
  }
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("stable"), std::string::npos);
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["status"], "numerical_failure");
  for (const auto& frame : summary["frames"]) {
    for (const auto& file : frame["files"]) {
      const Geometry g = readGeometry(out / file.get<std::string>());
      for (double v : g.positions) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

// Every model runs every integrator from the scene: a sheet pinned along one edge swings
// under gravity for 0.3 s with each (model, integrator) pair, completes, stays finite and
// sags below its pinned edge; the implicit runs take steps at least 5 times the explicit
// ones.
class ModelIntegratorRun : public ::testing::TestWithParam<std::tuple<const char*, Integrator>> {};

TEST_P(ModelIntegratorRun, CompletesAndSags) {
  const auto [model, integrator] = GetParam();
  BodyDef body = sheetBody(8);
  body.model = model;
  body.material.youngModulus = 1e6;
  body.material.thickness = 2e-3;
  body.material.damping = 1.0;
  PinDef edge;
  edge.shape = PinShape::kBox;
  edge.center = {-0.25, 0, 0};
  edge.halfExtents = {0.01, 0.3, 0.01};
  body.pins.push_back(edge);
  SceneDef scene = sceneWith(body);
  scene.time.duration = 0.3;
  scene.time.frameRate = 10;
  scene.time.integrator = integrator;
  const fs::path out = scratchFolder(std::string("integrators_") + model + "_" +
                                     std::to_string(static_cast<int>(integrator)));
  RunOptions options;
  options.outputFolder = out;
  const RunReport report = runScene(scene, options);
  EXPECT_EQ(report.framesWritten, 4);
  if (integrator != Integrator::kVerlet) {
    EXPECT_GE(report.timeStep, 5 * report.stableTimeStep);
  }
  const Geometry last = readGeometry(out / "frames" / "sheet_00003.ply");
  double lowest = 0;
  for (size_t i = 0; i < last.positions.size(); ++i) {
    ASSERT_TRUE(std::isfinite(last.positions[i]));
    if (i % 3 == 2) lowest = std::min(lowest, last.positions[i]);
  }
  EXPECT_LT(lowest, -0.01) << "the free edge did not sag";
  // Implicit runs report their Newton work per frame, cumulative: at least one iteration
  // per step, a factorization at least on the first step; explicit runs report none.
  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  const auto& frames = summary["frames"];
  if (integrator == Integrator::kVerlet) {
    EXPECT_FALSE(summary.contains("newton_iterations"));
    EXPECT_FALSE(frames[3].contains("newton_iterations"));
  } else {
    int64_t previous = 0;
    for (size_t f = 1; f < frames.size(); ++f) {
      const auto iterations = frames[f]["newton_iterations"].get<int64_t>();
      EXPECT_GE(iterations - previous,
                frames[f]["steps"].get<int64_t>() - frames[f - 1]["steps"].get<int64_t>())
          << "frame " << f;
      previous = iterations;
    }
    EXPECT_EQ(summary["newton_iterations"].get<int64_t>(), previous);
    EXPECT_GE(summary["factorizations"].get<int64_t>(), 1);
  }
}

std::string modelIntegratorName(
    const ::testing::TestParamInfo<ModelIntegratorRun::ParamType>& info) {
  static const char* const kIntegratorNames[] = {"Verlet", "Newmark", "BackwardEuler"};
  return std::string(std::get<0>(info.param)) + "_" +
         kIntegratorNames[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(
    AllPairs, ModelIntegratorRun,
    ::testing::Combine(::testing::Values("mass_spring", "fiber", "discrete_shell"),
                       ::testing::Values(Integrator::kVerlet, Integrator::kNewmark,
                                         Integrator::kBackwardEuler)),
    modelIntegratorName);

TEST(Run, BitIdenticalFramesWithOneAndTwoThreads) {
  // 48 x 48 cells: 2401 nodes and ~7000 springs, several parallel chunks per loop.
  SceneDef scene = sceneWith(sheetBody(48));
  ObstacleDef ball;
  ball.type = ObstacleType::kSphere;
  ball.center = {0.05, 0, -0.3};
  ball.radius = 0.25;
  scene.obstacles.push_back(ball);
  scene.time.duration = 0.3;
  std::vector<std::vector<double>> finals;
  for (int threads : {1, 2}) {
    ThreadLimit limit(threads);
    World world = buildWorld(scene);
    computeAccelerations(world);
    PhaseTimes times;
    for (int s = 0; s < 600; ++s) step(world, 2e-4, times);
    finals.push_back(world.bodies[0].positions);
  }
  ASSERT_EQ(finals[0].size(), finals[1].size());
  EXPECT_EQ(std::memcmp(finals[0].data(), finals[1].data(), finals[0].size() * sizeof(double)), 0);
}

TEST(Run, AFrameThatBlowsUpIsRecomputedWithASmallerStep) {
  // A step 6x the stable estimate diverges; halving it up to 4 times recovers.
  SceneDef scene = sceneWith(sheetPinnedAtVertexZero());
  scene.time.frameRate = 10;
  scene.time.duration = 1.0;
  const double stable = stableTimeStep(buildWorld(scene));
  scene.time.timeStep = 6 * stable;
  const fs::path out = scratchFolder("retry");
  RunOptions options;
  options.outputFolder = out;
  const RunReport report = runScene(scene, options);
  EXPECT_EQ(report.framesWritten, 11);
  EXPECT_LT(report.timeStep, 1.5 * stable);
  bool retried = false;
  for (const auto& w : report.warnings)
    retried |= w.find("recomputing the frame") != std::string::npos;
  EXPECT_TRUE(retried);
  std::ifstream in(out / "summary.json");
  EXPECT_EQ(nlohmann::json::parse(in)["status"], "completed");
}

TEST(EnergyGuard, CatchesEnergyGrowthWithoutFastNodes) {
  World world = buildWorld(sceneWith(sheetBody()));
  computeAccelerations(world);
  const EnergyGuard guard(world);
  ASSERT_TRUE(guard.enabled());
  EXPECT_NO_THROW(guard.check(world));
  // 10 m/s everywhere: far below the speed bound, far above the energy budget of a
  // sheet at rest 0.5 m across (m g h ~ 0.6 J vs 1/2 m v^2 ~ 6 J).
  for (double& v : world.bodies[0].velocities) v = 10.0 / std::sqrt(3.0);
  EXPECT_THROW(guard.check(world), NumericalError);
}

// A mass-spring sheet 0.5 m across, its edge x = -0.25 held by a pin; with `lift` the pin
// rises 0.2 m in the first second, then stays.
Simulation pinnedSheet(bool lift, const Vec3d& gravity = {0, 0, -9.81}) {
  SimulationSettings settings;
  settings.gravity = gravity;
  settings.time.frameRate = 30;
  Simulation sim(settings);
  BodyDef body = sheetBody();
  PinDef edge;
  edge.center = {-0.25, 0, 0};
  edge.halfExtents = {0.01, 0.3, 0.01};
  if (lift) edge.path = {{0.0, {0, 0, 0}}, {1.0, {0, 0, 0.2}}};
  body.pins.push_back(edge);
  (void)sim.addBody(body);
  return sim;
}

double totalOf(const Simulation& sim) {
  return totalEnergy(implOf(sim).world);
}

TEST(EnergyGuard, CountsTheWorkOfAMovingPin) {
  // No damping: the energy the sheet gains while its edge is lifted is the pins' work (the
  // kinetic energy of the pinned nodes, jumping to 0.2 m/s at the start, included). The
  // accounting is second order in the step: within 1% of the work here.
  Simulation sim = pinnedSheet(true);
  const double before = totalOf(sim);
  sim.advanceFrames(45);  // 1.5 s: the lift and half a second after it
  const World& world = implOf(sim).world;
  ASSERT_TRUE(implOf(sim).energyGuard && implOf(sim).energyGuard->enabled());
  const double work = world.externalWork;
  double mass = 0;
  for (const double m : sim.masses(0)) mass += m;
  EXPECT_GT(work, 0.5 * mass * 9.81 * 0.2) << "at least half the sheet's weight lifted 0.2 m";
  std::cout << "[ measured ] pin work " << work << " J, energy gained " << totalOf(sim) - before
            << " J\n";
  EXPECT_NEAR(totalOf(sim) - before, work, 0.01 * work);
  // A static pin does no work, and the sheet's energy only falls.
  Simulation still = pinnedSheet(false);
  const double stillBefore = totalOf(still);
  still.advanceFrames(45);
  EXPECT_EQ(implOf(still).world.externalWork, 0.0);
  EXPECT_LE(totalOf(still) - stillBefore, 1e-6 * stillBefore);
}

TEST(EnergyGuard, CountsTheWorkOfALoad) {
  // Without gravity, a uniform load of 0.5 N pushes the whole sheet: the work F . dx of its
  // centre of mass is all kinetic energy, and the trapezoidal sum is exact for the
  // constant force.
  SimulationSettings settings;
  settings.gravity = {0, 0, 0};
  Simulation sim(settings);
  const int32_t body = sim.addBody(sheetBody());
  LoadDef load;
  load.select.halfExtents = {1, 1, 1};
  load.force = {0, 0, 0.5};
  sim.addLoad(body, load);
  sim.advance(0.5);
  const double work = implOf(sim).world.externalWork;
  double mass = 0;
  for (const double m : sim.masses(body)) mass += m;
  const double lift = 0.5 * 0.5 / mass * 0.5 * 0.5;  // z = F t^2 / (2 m)
  EXPECT_NEAR(work, 0.5 * lift, 1e-9 * work);
  EXPECT_NEAR(sim.energies(body).total(), work, 1e-9 * work);
}

TEST(EnergyGuard, CatchesEnergyGrowthBeyondWhatTheScriptDid) {
  Simulation sim = pinnedSheet(true);
  sim.advanceFrames(15);
  World& world = implOf(sim).world;
  ASSERT_NO_THROW(implOf(sim).energyGuard->check(world));
  for (double& v : world.bodies[0].velocities) v = 10.0 / std::sqrt(3.0);
  EXPECT_THROW(implOf(sim).energyGuard->check(world), NumericalError);
}

TEST(EnergyGuard, CountsTheEnergyThatResamplingAdded) {
  // A fiber sheet with resampling, held still 1.8 times as long as at rest: the resampling
  // event changes the world's energy by what the model reports (the new fibers measure the
  // same shape with other weights); the guard counts it as put in. The nodes near the event
  // slide within the sheet's plane until the energy is no more than before (it rose 17 %
  // before they did: fiber_resample.cpp, "Energy").
  BodyDef body = sheetBody(12);
  body.model = "fiber";
  body.options<FiberDef>().resample = FiberResampleDef{};
  PinDef edge;  // the left edge, held where it is: it does not slide
  edge.shape = PinShape::kBox;
  edge.center = {-0.25, 0, 0};
  edge.halfExtents = {0.01, 0.3, 0.01};
  body.pins = {edge};
  World world = buildWorld(sceneWith(body));
  world.gravity = Vec3::Zero();
  Body& sheet = world.bodies[0];
  const int32_t before = sheet.nodeCount();
  ASSERT_EQ(std::count(sheet.pinned.begin(), sheet.pinned.end(), 1), 13);
  for (size_t i = 0; i < sheet.positions.size(); i += 3) sheet.positions[i] *= 1.8;
  const std::vector<double> held = sheet.positions;
  computeAccelerations(world);
  const EnergyGuard guard(world);
  const double energyBefore = totalEnergy(world);
  ASSERT_EQ(sheet.model->addedEnergy(), 0.0);
  PhaseTimes times;
  updateInelastic(world, 1e-4, times);
  ASSERT_GT(sheet.nodeCount(), before);
  const double added = sheet.model->addedEnergy();
  std::cout << "[ measured ] " << before << " -> " << sheet.nodeCount() << " nodes, energy "
            << energyBefore << " J, resampling added " << added << " J\n";
  EXPECT_NE(added, 0.0);
  EXPECT_LE(added, 0.0) << "the event put energy in";
  EXPECT_NEAR(totalEnergy(world) - energyBefore, added, 1e-9 * energyBefore);
  double slid = 0, lifted = 0;
  for (size_t i = 0; i < static_cast<size_t>(before); ++i) {
    if (sheet.pinned[i] != 0) {
      EXPECT_EQ(row(sheet.positions, i), row(held, i)) << "pinned node " << i << " slid";
      continue;
    }
    slid = std::max(slid, (row(sheet.positions, i) - row(held, i)).norm());
    lifted = std::max(lifted, std::abs(sheet.positions[3 * i + 2] - held[3 * i + 2]));
  }
  std::cout << "[ measured ] old nodes slid by up to " << slid * 1e3 << " mm\n";
  EXPECT_GT(slid, 0.0);
  EXPECT_LT(slid, 0.25 * 0.5 / 12 * 1.8) << "a quarter of a stretched spacing";
  EXPECT_LT(lifted, 1e-12) << "within the sheet's plane";
  EXPECT_NO_THROW(guard.check(world));
  // The frames count it as put in too, so the energy plot's balance (dissipated) holds.
  const auto folder = std::filesystem::path(::testing::TempDir()) / "resampling_work_run";
  std::filesystem::remove_all(folder);
  Recorder recorder(folder, {OutputFormat::kPly});
  recorder.writeFrame(world, 0, {}, false, 0);
  EXPECT_EQ(recorder.frames().back().externalWork, world.externalWork + added);
}

// A 0.5 m fiber sheet of 100 nodes clustered from a 40 x 40-cell mesh, which its frames
// draw (wicke2005 section 6), with resampling on; no gravity.
BodyDef clusteredResamplingSheet(bool resample = true) {
  BodyDef body = sheetBody(40);
  body.model = "fiber";
  body.material.damping = 5;
  body.options<FiberDef>().nodeCount = 100;
  if (resample) body.options<FiberDef>().resample = FiberResampleDef{};
  return body;
}

// The distances between the vertices of a and b, ascending.
std::vector<double> distances(const Geometry& a, const Geometry& b) {
  std::vector<double> d;
  for (size_t i = 0; i < a.positions.size(); i += 3) {
    d.push_back(std::hypot(a.positions[i] - b.positions[i], a.positions[i + 1] - b.positions[i + 1],
                           a.positions[i + 2] - b.positions[i + 2]));
  }
  std::sort(d.begin(), d.end());
  return d;
}

TEST(ResampledSurface, IsBoundAnewToTheNewNodesAndFollowsTheShapeNoWorse) {
  // Stretched to 1.8 times its length and rolled onto a cylinder of radius 0.3 m, the sheet's
  // resampling event adds nodes; the dense surface is then bound anew to all of them. The
  // binding is exact for in-plane affine motions (surface_binding.hpp), so what is left is
  // the bending: the chords between nodes cut under the cylinder. Bound to the denser nodes
  // the surface is no farther from the exact one (the map applied to the rest surface), and
  // it moves at the event by less than a tenth of a node spacing.
  World world = buildWorld(sceneWith(clusteredResamplingSheet()));
  world.gravity = Vec3::Zero();
  Body& sheet = world.bodies[0];
  ASSERT_TRUE(sheet.embedded);
  const Geometry rest = bodySurface(world, 0, {});
  const double radius = 0.3;
  const auto map = [radius](double x, double y) {
    const double arc = 1.8 * x / radius;
    return Vec3(radius * std::sin(arc), y, radius * (1 - std::cos(arc)));
  };
  for (size_t i = 0; i < sheet.positions.size(); i += 3) {
    setRow(sheet.positions, i / 3, map(sheet.positions[i], sheet.positions[i + 1]));
  }
  computeAccelerations(world);
  const Geometry before = bodySurface(world, 0, {});
  const int32_t nodesBefore = sheet.nodeCount();
  PhaseTimes times;
  updateInelastic(world, 1e-4, times);
  ASSERT_GT(sheet.nodeCount(), nodesBefore);
  ASSERT_EQ(sheet.embedded->nodeCount(), sheet.nodeCount());
  // At the event, the new nodes sit at their pairs' midpoints, on the chords under the
  // cylinder (the model's bending then moves them out onto it).
  const Geometry atEvent = bodySurface(world, 0, {});
  ASSERT_EQ(atEvent.vertexCount(), rest.vertexCount());
  EXPECT_EQ(atEvent.triangles, rest.triangles);
  const std::span<const double> restNodes = sheet.embedded->restNodes();
  for (size_t i = 0; i < sheet.positions.size(); i += 3) {
    setRow(sheet.positions, i / 3, map(restNodes[i], restNodes[i + 1]));
  }
  const Geometry after = bodySurface(world, 0, {});
  Geometry exact = rest;
  for (size_t i = 0; i < exact.positions.size(); i += 3) {
    setRow(exact.positions, i / 3, map(rest.positions[i], rest.positions[i + 1]));
  }
  const double spacing = 0.5 / std::sqrt(static_cast<double>(nodesBefore));
  const std::vector<double> errorBefore = distances(before, exact);
  const std::vector<double> errorAfter = distances(after, exact);
  const std::vector<double> jump = distances(atEvent, before);
  std::cout << "[ measured ] " << nodesBefore << " -> " << sheet.nodeCount() << " nodes (spacing "
            << spacing * 1e3
            << " mm); the surface off the exact one, median / 99th percentile / largest: "
            << "before the event " << errorBefore[errorBefore.size() / 2] * 1e3 << " / "
            << errorBefore[errorBefore.size() * 99 / 100] * 1e3 << " / " << errorBefore.back() * 1e3
            << " mm, after it with the nodes on the cylinder "
            << errorAfter[errorAfter.size() / 2] * 1e3 << " / "
            << errorAfter[errorAfter.size() * 99 / 100] * 1e3 << " / " << errorAfter.back() * 1e3
            << " mm; moved at the event by " << jump[jump.size() / 2] * 1e3 << " / "
            << jump[jump.size() * 99 / 100] * 1e3 << " / " << jump.back() * 1e3 << " mm\n";
  EXPECT_LT(errorAfter[errorAfter.size() / 2], errorBefore[errorBefore.size() / 2]);
  EXPECT_LE(errorAfter.back(), errorBefore.back());
  EXPECT_LT(jump[jump.size() / 2], 0.05 * spacing);
  EXPECT_LT(jump.back(), 0.25 * spacing);
  // The event is in the binding's history: replayed from the first binding, the same surface.
  ASSERT_EQ(sheet.bindingEvents.size(), 1u);
  EXPECT_TRUE(sheet.bindingEvents[0].bindsAnew());
  const std::vector<Body::BindingEvent> events = sheet.bindingEvents;
  replayBinding(sheet, events);
  EXPECT_EQ(bodySurface(world, 0, {}).positions, after.positions);
  // A history that ends bound to other nodes than the body's is refused by name.
  std::vector<Body::BindingEvent> shorter = events;
  shorter[0].restNodes.resize(shorter[0].restNodes.size() - 3);
  EXPECT_THROW(
      {
        try {
          replayBinding(sheet, shorter);
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("sheet"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
}

// The clustered sheet gripped 3 cm at its left and right edges, pulled to 1.4 times its
// length in 1 s, backward Euler at 5 ms, 10 frames per second. (Pulled to 1.8 times, the
// fiber membrane necks to a thread next to the grips, a stretch of 5 to 8 between the
// gripped nodes and the new ones beside them, and the points beyond the last gripped node
// extrapolate it: up to 16 cm from any node with resampling, 9 cm without.)
SceneDef pulledClusteredSheet(bool resample) {
  BodyDef body = clusteredResamplingSheet(resample);
  gripLeftAndRightEdges(body, 0.03, 0.1);
  SceneDef scene = sceneWith(body);
  scene.gravity = {0, 0, 0};
  scene.time.duration = 1.0;
  scene.time.frameRate = 10;
  scene.time.integrator = Integrator::kBackwardEuler;
  scene.time.timeStep = 0.005;
  return scene;
}

// For each point of `from`, (n, 3), the distance to the nearest point of `to` (itself left
// out when both are one array), ascending.
std::vector<double> nearestDistances(std::span<const double> from, std::span<const double> to) {
  std::vector<double> nearest;
  for (size_t i = 0; i < from.size(); i += 3) {
    double d = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < to.size(); j += 3) {
      if (from.data() == to.data() && i == j) continue;
      d = std::min(d,
                   std::hypot(from[i] - to[j], from[i + 1] - to[j + 1], from[i + 2] - to[j + 2]));
    }
    nearest.push_back(d);
  }
  std::sort(nearest.begin(), nearest.end());
  return nearest;
}

TEST(ResampledSurface, APulledClusteredSheetKeepsItsNodesCloseAndItsSurfaceOnThem) {
  // Run through the public API: nodes are added as the sheet stretches, so the largest gap
  // between nodes stays bounded and the drawn surface's points stay nearer to them than
  // without resampling; a state file brings the surface back bit for bit across the events.
  Simulation plain(pulledClusteredSheet(false));
  const std::vector<double> restNodes(plain.positions(0).begin(), plain.positions(0).end());
  plain.advanceFrames(10);
  const std::vector<double> plainGaps = nearestDistances(plain.positions(0), plain.positions(0));
  const std::vector<double> plainReach =
      nearestDistances(plain.surface(0).positions, plain.positions(0));
  const SceneDef scene = pulledClusteredSheet(true);
  Simulation sim(scene);
  const int32_t nodesAtRest = sim.nodeCount(0);
  const SimulationState start = sim.saveState();
  sim.advanceFrames(6);
  const SimulationState middle = sim.saveState();
  sim.advanceFrames(4);
  ASSERT_GT(sim.nodeCount(0), nodesAtRest);
  const Geometry end = sim.surface(0);
  const std::vector<double> gaps = nearestDistances(sim.positions(0), sim.positions(0));
  const std::vector<double> reach = nearestDistances(end.positions, sim.positions(0));
  std::cout << "[ measured ] " << nodesAtRest << " -> " << sim.nodeCount(0)
            << " nodes; largest gap to a node's nearest " << gaps.back() * 1e3 << " mm ("
            << plainGaps.back() * 1e3 << " without resampling); surface points from the nearest "
            << "node, median / largest: " << reach[reach.size() / 2] * 1e3 << " / "
            << reach.back() * 1e3 << " mm (" << plainReach[plainReach.size() / 2] * 1e3 << " / "
            << plainReach.back() * 1e3 << "), 99th percentile "
            << reach[reach.size() * 99 / 100] * 1e3 << " mm ("
            << plainReach[plainReach.size() * 99 / 100] * 1e3 << ")\n";
  // How far each node at rest is from its nearest now, over how far it was at rest; the
  // largest over the nodes.
  const auto largestGrowth = [&](std::span<const double> now) {
    double largest = 0;
    for (size_t i = 0; i < restNodes.size(); i += 3) {
      double restGap = std::numeric_limits<double>::infinity();
      double gap = std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < restNodes.size(); j += 3) {
        if (j == i) continue;
        restGap = std::min(
            restGap, std::hypot(restNodes[i] - restNodes[j], restNodes[i + 1] - restNodes[j + 1],
                                restNodes[i + 2] - restNodes[j + 2]));
      }
      for (size_t j = 0; j < now.size(); j += 3) {
        if (j == i) continue;
        gap = std::min(
            gap, std::hypot(now[i] - now[j], now[i + 1] - now[j + 1], now[i + 2] - now[j + 2]));
      }
      largest = std::max(largest, gap / restGap);
    }
    return largest;
  };
  const double growth = largestGrowth(sim.positions(0));
  const double plainGrowth = largestGrowth(plain.positions(0));
  std::cout << "[ measured ] a node's nearest over its nearest at rest, largest: " << growth << " ("
            << plainGrowth << " without resampling)\n";
  // The largest gap measured as a node's nearest (62.5 mm both ways with the clustering's
  // ties on the tie grid, core/tie_grid.hpp: a gap across the pull that the sampling has at
  // rest; 62.5 against 72 mm with the sampling before) says less than its growth: measured
  // 1.67 against 1.98 times without resampling.
  EXPECT_LE(gaps.back(), plainGaps.back());
  EXPECT_LT(growth, 0.9 * plainGrowth);
  EXPECT_LT(reach[reach.size() / 2], 0.95 * plainReach[plainReach.size() / 2]);
  // The worst points lie beyond the last gripped nodes, where the surface extrapolates; since
  // the nodes near an event slide within the sheet and the gripped ones do not (8755bf7 and
  // after), the free nodes beside the grips slide away from them: measured 81 / 70 mm at the
  // largest / 99th percentile against 74 / 56 without resampling (74 / 53 against 70 / 50
  // with the sampling before; 61 mm largest when the slide ignored the grips, a model-side
  // move the world then dropped).
  EXPECT_LE(reach.back(), 1.15 * plainReach.back());
  EXPECT_LE(reach[reach.size() * 99 / 100], 1.3 * plainReach[plainReach.size() * 99 / 100]);
  EXPECT_TRUE(std::all_of(end.positions.begin(), end.positions.end(),
                          [](double v) { return std::isfinite(v); }));

  // Back to the start and forward again: the same events, the same surface.
  sim.restoreState(start);
  EXPECT_EQ(sim.nodeCount(0), nodesAtRest);
  sim.advanceFrames(10);
  EXPECT_EQ(sim.surface(0).positions, end.positions);
  // A state file from between the events, read by a simulation set up from the scene, gives
  // the surface of the same state restored in memory, then and after more events.
  const auto file = std::filesystem::path(::testing::TempDir()) / "resampled_surface_state.bin";
  sim.writeStateFile(middle, file);
  Simulation fresh(scene);
  fresh.restoreState(fresh.readStateFile(file));
  sim.restoreState(middle);
  EXPECT_EQ(fresh.surface(0).positions, sim.surface(0).positions);
  fresh.advanceFrames(4);
  sim.advanceFrames(4);
  ASSERT_EQ(fresh.nodeCount(0), sim.nodeCount(0));
  EXPECT_EQ(fresh.surface(0).positions, sim.surface(0).positions);
  std::filesystem::remove(file);
}

class ScriptedObstacleWork : public ::testing::TestWithParam<ObstacleResponse> {};

TEST_P(ScriptedObstacleWork, LiftingASheetIsCountedAndTheGuardStaysOn) {
  // A floor rising 0.2 m in 1 s carries the sheet lying on it (no damping). Its work buys
  // the sheet's gain in energy plus what the contact dissipates; the start of the lift, an
  // inelastic impact at 0.2 m/s, loses at most m v^2 / 2 of it, and the penalty's damper
  // about as much again.
  SimulationSettings settings;
  settings.time.frameRate = 30;
  Simulation sim(settings);
  BodyDef body = sheetBody();
  body.transform.translation = {0, 0, 0.01};
  const int32_t sheet = sim.addBody(body);
  ObstacleDef floor;
  floor.type = ObstacleType::kPlane;
  floor.response = GetParam();
  floor.path = {{0.0, {0, 0, 0}}, {0.2, {0, 0, 0}}, {1.2, {0, 0, 0.2}}};
  sim.addObstacle(floor);
  sim.advanceFrames(6);  // the sheet has landed
  const double before = totalOf(sim);
  const double workBefore = implOf(sim).world.externalWork;
  sim.advanceFrames(36);  // the lift
  ASSERT_TRUE(implOf(sim).energyGuard && implOf(sim).energyGuard->enabled());
  double mass = 0;
  for (const double m : sim.masses(sheet)) mass += m;
  const double work = implOf(sim).world.externalWork - workBefore;
  const double gained = totalOf(sim) - before;
  std::cout << "[ measured ] obstacle work " << work << " J, energy gained " << gained
            << " J, m g h " << mass * 9.81 * 0.2 << " J\n";
  EXPECT_GT(gained, 0.9 * mass * 9.81 * 0.2);
  EXPECT_GE(work, gained - 0.01 * gained);
  EXPECT_LE(work, gained + 2 * mass * 0.2 * 0.2);
}

INSTANTIATE_TEST_SUITE_P(BothResponses, ScriptedObstacleWork,
                         ::testing::Values(ObstacleResponse::kProjection,
                                           ObstacleResponse::kPenalty));

}  // namespace
}  // namespace shellsim
