// Loads and inelastic fiber shells in the stepper: pressure on a closed shell, region
// loads, a dent that stays (plasticity) and a sheet torn in two (fracture).
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "core/palette.hpp"
#include "core/rigid_motion.hpp"
#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/implicit.hpp"
#include "dynamics/recorder.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "geometry/primitives.hpp"
#include "geometry/volume_sampling.hpp"
#include "io/json_file.hpp"
#include "shellsim/io.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

using testing::gripLeftAndRightEdges;
using testing::pinBoundary;
using testing::sceneWith;
using testing::sheetBody;

BodyDef fiberSphere(double pressure) {
  BodyDef body;
  body.name = "balloon";
  body.model = "fiber";
  PrimitiveDef sphere;
  sphere.type = PrimitiveType::kSphere;
  sphere.radius = 0.2;
  sphere.resolution = 16;
  body.primitive = sphere;
  body.material.youngModulus = 1e5;
  body.material.density = 500;
  body.pressure = PressureDef{pressure, {}};
  return body;
}

TEST(Pressure, ClosedSpherePushesOutwardWithZeroNetForce) {
  World world = buildWorld(sceneWith(fiberSphere(100.0)));
  Body& body = world.bodies[0];
  updateExternalForces(world);
  const size_t n = static_cast<size_t>(body.nodeCount());
  Vec3 net = Vec3::Zero();
  double magnitude = 0, radial = 0;
  for (size_t i = 0; i < n; ++i) {
    const Vec3 f(body.externalForces[3 * i], body.externalForces[3 * i + 1],
                 body.externalForces[3 * i + 2]);
    const Vec3 x(body.positions[3 * i], body.positions[3 * i + 1], body.positions[3 * i + 2]);
    net += f;
    magnitude += f.norm();
    radial += f.dot(x.normalized());
  }
  EXPECT_LT(net.norm(), 1e-12 * magnitude);
  EXPECT_GT(radial, 0.99 * magnitude) << "pressure pushes along the outward normals";
  // p times the sphere's area, within the sampling's area error.
  EXPECT_NEAR(magnitude, 100.0 * 4 * M_PI * 0.2 * 0.2, 0.05 * magnitude);
  // Before the correction the sampled sum of a_j N_j nearly cancels by itself.
  std::vector<double> area(3 * n);
  ASSERT_TRUE(body.model->nodeAreaVectors(body.positions, area));
  Vec3 raw = Vec3::Zero();
  for (size_t i = 0; i < n; ++i) raw += Vec3(area[3 * i], area[3 * i + 1], area[3 * i + 2]);
  EXPECT_LT(raw.norm(), 0.02 * magnitude / 100.0);
}

TEST(Pressure, MeshModelsPushAlongTheirTrianglesAreaVectors) {
  BodyDef body = fiberSphere(100.0);
  body.model = "discrete_shell";
  World world = buildWorld(sceneWith(body));
  updateExternalForces(world);
  const Body& b = world.bodies[0];
  Vec3 net = Vec3::Zero();
  double magnitude = 0, radial = 0;
  for (size_t i = 0; i < b.positions.size() / 3; ++i) {
    const Vec3 f(b.externalForces[3 * i], b.externalForces[3 * i + 1], b.externalForces[3 * i + 2]);
    const Vec3 x(b.positions[3 * i], b.positions[3 * i + 1], b.positions[3 * i + 2]);
    net += f;
    magnitude += f.norm();
    radial += f.dot(x.normalized());
  }
  EXPECT_LT(net.norm(), 1e-12 * magnitude);
  EXPECT_GT(radial, 0.99 * magnitude);
  // About p times the sphere's area: the coarse icosphere's area and the spread of the
  // triangle normals around each vertex make it 6 % less (measured).
  EXPECT_NEAR(magnitude, 100.0 * 4 * M_PI * 0.2 * 0.2, 0.1 * magnitude);
}

// An open surface keeps its net pressure force (only a closed shell's sampled residue is
// taken off): a free flat sheet of area A under pressure p is pushed along its normal by
// p A as a whole (a sail, a parachute), for a mesh model exactly, for the fiber model's
// sampled areas within their error; a closed sphere of either model is still pushed by
// nothing as a whole.
TEST(Pressure, AnOpenSheetIsPushedAsAWholeAClosedShellIsNot) {
  for (const std::string model : {"fiber", "discrete_shell", "inelastic_shell"}) {
    BodyDef sheet = sheetBody(8);  // 0.5 x 0.5 m in z = 0
    sheet.model = model;
    sheet.pressure = PressureDef{100.0, {}};
    World world = buildWorld(sceneWith(sheet));
    ASSERT_FALSE(world.bodies[0].pressure->closed) << model;
    updateExternalForces(world);
    Vec3 net = Vec3::Zero();
    const std::vector<double>& f = world.bodies[0].externalForces;
    for (size_t i = 0; i < f.size() / 3; ++i) net += Vec3(f[3 * i], f[3 * i + 1], f[3 * i + 2]);
    const double expected = 100.0 * 0.5 * 0.5;  // N
    EXPECT_NEAR(std::abs(net.z()), expected, (model == "fiber" ? 0.05 : 1e-12) * expected) << model;
    EXPECT_LT(std::hypot(net.x(), net.y()), 1e-9 * expected) << model;

    BodyDef sphere = fiberSphere(100.0);
    sphere.model = model;
    World closed = buildWorld(sceneWith(sphere));
    EXPECT_TRUE(closed.bodies[0].pressure->closed) << model;

    // The orifice vent seals in what the surface encloses: an open one is refused.
    sheet.pressure->vent = VentModel::kOrifice;
    try {
      (void)buildWorld(sceneWith(sheet));
      ADD_FAILURE() << model << ": an open sheet with the orifice vent was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(".pressure.vent: 'orifice'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("this surface is open"), std::string::npos) << e.what();
    }
    sheet.pressure->releaseOnFracture = false;  // never vented: the pressure as given
    EXPECT_NO_THROW((void)buildWorld(sceneWith(sheet))) << model;
  }
}

// A fiber body from a point cloud has no edges to count: its area vectors decide. Those of a
// closed sphere's points nearly cancel, a hemisphere's sum to half their lengths.
TEST(Pressure, APointCloudIsClosedWhenItsAreaVectorsCancel) {
  testfiles::TempFolder folder("pressure_points");
  for (const bool whole : {true, false}) {
    const std::filesystem::path file = folder.path() / (whole ? "sphere.xyz" : "cap.xyz");
    std::ofstream out(file);
    constexpr int kPoints = 800;  // a Fibonacci sphere of radius 0.2 m, normals outward
    for (int i = 0; i < kPoints; ++i) {
      const double z = 1 - (2 * i + 1.0) / kPoints;
      if (!whole && z < 0) continue;
      const double r = std::sqrt(1 - z * z), phi = i * M_PI * (3 - std::sqrt(5.0));
      const Vec3 n(r * std::cos(phi), r * std::sin(phi), z);
      out << 0.2 * n.x() << ' ' << 0.2 * n.y() << ' ' << 0.2 * n.z() << ' ' << n.x() << ' ' << n.y()
          << ' ' << n.z() << '\n';
    }
    out.close();
    BodyDef body;
    body.name = "cloud";
    body.model = "fiber";
    body.file = file.string();
    body.material.youngModulus = 1e5;
    body.material.density = 500;
    body.pressure = PressureDef{100.0, {}};
    World world = buildWorld(sceneWith(body));
    ASSERT_TRUE(world.bodies[0].model->surface(world.bodies[0].positions).isPointCloud());
    EXPECT_EQ(world.bodies[0].pressure->closed, whole);
  }
}

// The example of an open sheet blown up against its frame (scenes/fiber_sheet_inflated.json):
// the pressure's work goes into the summary, and the energy balance the energy plot draws,
// dissipated = initial total + work done - total, starts at zero and only grows (damping
// only takes energy out), although the stretching energy breathes with the dome.
TEST(Pressure, TheInflatedSheetsEnergyBalanceClosesWithThePressuresWork) {
  testfiles::TempFolder folder("inflated_sheet");
  SceneDef scene = loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" /
                             "fiber_sheet_inflated.json");
  scene.time.duration = 1.2;
  RunOptions options;
  options.outputFolder = folder.path();
  (void)runScene(scene, options);
  const nlohmann::json summary = readJsonFile(folder.path() / "summary.json");
  const nlohmann::json& frames = summary.at("frames");
  const auto total = [](const nlohmann::json& f) {
    return f.at("kinetic_energy").get<double>() + f.at("potential_energy").get<double>();
  };
  const double work = frames.back().at("external_work").get<double>();
  EXPECT_GT(work, 1.0) << "400 Pa lifting a 0.6 m sheet's middle by about 10 cm";
  double previous = 0;
  for (const nlohmann::json& f : frames) {
    const double dissipated = total(frames[0]) + f.at("external_work").get<double>() - total(f);
    EXPECT_GE(dissipated, previous - 1e-6 * work) << "frame " << f.at("frame");
    previous = dissipated;
  }
  EXPECT_LT(previous, 0.2 * work) << "most of the work is stored, not dissipated";
}

TEST(Pressure, InflatesASphereWithoutMovingItsCentre) {
  SceneDef scene = sceneWith(fiberSphere(200.0));
  scene.gravity = {0, 0, 0};
  scene.bodies[0].material.damping = 20;
  World world = buildWorld(scene);
  Body& body = world.bodies[0];
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.5 * stableTimeStep(world);
  const auto mass = body.model->nodeMasses();
  const auto measure = [&](double& radius, Vec3& centre) {
    radius = 0;
    centre = Vec3::Zero();
    double total = 0;
    for (size_t i = 0; i < mass.size(); ++i) {
      const Vec3 x(body.positions[3 * i], body.positions[3 * i + 1], body.positions[3 * i + 2]);
      radius += x.norm();
      centre += mass[i] * x;
      total += mass[i];
    }
    centre /= total;
  };
  double radius0 = 0, radius = 0;
  Vec3 centre0, centre;
  measure(radius0, centre0);
  for (int s = 0; s < 400; ++s) step(world, dt, times);
  measure(radius, centre);
  EXPECT_GT(radius / radius0, 1.01) << "the balloon grew";
  EXPECT_LT((centre - centre0).norm(), 1e-12) << "and its centre of mass did not move";
}

// The rigid part taken off a closed shell's pressure forces (removeRigidPart): what is left
// has neither net force nor torque, and forces that had neither are left as they were.
TEST(Pressure, RemovingTheRigidPartLeavesNoNetForceOrTorque) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  const size_t n = 40;
  std::vector<double> positions(3 * n), force(3 * n), mass(n);
  for (size_t i = 0; i < n; ++i) mass[i] = 1 + 0.5 * uniform(random);
  for (double& value : positions) value = uniform(random);
  for (double& value : force) value = uniform(random);
  const std::vector<double> before = force;
  removeRigidPart(mass, positions, force);
  // Sums about the origin: with no net force left the torque is the same about any point.
  const auto sums = [&](const std::vector<double>& f, Vec3& net, Vec3& torque, double& size) {
    net = torque = Vec3::Zero();
    size = 0;
    for (size_t i = 0; i < n; ++i) {
      net += row(f, i);
      torque += row(positions, i).cross(row(f, i));
      size += row(f, i).norm();
    }
  };
  Vec3 net, torque, rawNet, rawTorque;
  double size = 0, rawSize = 0;
  sums(before, rawNet, rawTorque, rawSize);
  sums(force, net, torque, size);
  EXPECT_GT(rawNet.norm(), 0.05 * rawSize) << "random forces push the cloud";
  EXPECT_GT(rawTorque.norm(), 0.05 * rawSize) << "and turn it";
  EXPECT_LT(net.norm(), 1e-12 * rawSize);
  EXPECT_LT(torque.norm(), 1e-12 * rawSize);
  EXPECT_GT(size, 0.5 * rawSize) << "only the rigid part was taken off";
  // The pressure forces of a closed box (opposite faces) have neither: nothing changes.
  const std::vector<double> boxPositions = {1, 0,  0, -1, 0, 0, 0, 2, 0,
                                            0, -2, 0, 0,  0, 3, 0, 0, -3};
  const std::vector<double> boxMass = {0.25, 0.25, 0.5, 0.5, 0.25, 0.25};
  std::vector<double> boxForce = {6, 0, 0, -6, 0, 0, 0, 3, 0, 0, -3, 0, 0, 0, 2, 0, 0, -2};
  const std::vector<double> boxBefore = boxForce;
  removeRigidPart(boxMass, boxPositions, boxForce);
  for (size_t i = 0; i < 18; ++i) EXPECT_NEAR(boxForce[i], boxBefore[i], 1e-14) << i;
}

// An unevenly sampled closed shell under pressure neither drifts nor starts to spin: its
// sampled area vectors have a torque (the shell below is a sphere whose nodes were moved off
// it at random), which, left in, spun the free balloon up as it inflated.
TEST(Pressure, InflatesAnUnevenShellWithoutTurningIt) {
  SceneDef scene = sceneWith(fiberSphere(200.0));
  scene.gravity = {0, 0, 0};
  World world = buildWorld(scene);
  Body& body = world.bodies[0];
  std::mt19937 random(3);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (double& x : body.positions) x *= 1 + 0.05 * uniform(random);
  const auto mass = body.model->nodeMasses();
  const size_t n = mass.size();
  std::vector<double> area(3 * n);
  ASSERT_TRUE(body.model->nodeAreaVectors(body.positions, area));
  const auto momenta = [&](Vec3& linear, Vec3& angular, double& scale) {
    Vec3 centre = Vec3::Zero();
    double total = 0;
    linear = Vec3::Zero();
    for (size_t i = 0; i < n; ++i) {
      centre += mass[i] *
                Vec3(body.positions[3 * i], body.positions[3 * i + 1], body.positions[3 * i + 2]);
      total += mass[i];
    }
    centre /= total;
    angular = Vec3::Zero();
    scale = 0;
    for (size_t i = 0; i < n; ++i) {
      const Vec3 arm =
          Vec3(body.positions[3 * i], body.positions[3 * i + 1], body.positions[3 * i + 2]) -
          centre;
      const Vec3 v(body.velocities[3 * i], body.velocities[3 * i + 1], body.velocities[3 * i + 2]);
      linear += mass[i] * v;
      angular += mass[i] * arm.cross(v);
      scale += mass[i] * arm.norm() * v.norm();
    }
  };
  Vec3 centre = Vec3::Zero();
  for (size_t i = 0; i < n; ++i)
    centre += Vec3(body.positions[3 * i], body.positions[3 * i + 1], body.positions[3 * i + 2]);
  centre /= static_cast<double>(n);
  Vec3 rawTorque = Vec3::Zero();
  double magnitude = 0;
  for (size_t i = 0; i < n; ++i) {
    const Vec3 a(area[3 * i], area[3 * i + 1], area[3 * i + 2]);
    rawTorque +=
        (Vec3(body.positions[3 * i], body.positions[3 * i + 1], body.positions[3 * i + 2]) - centre)
            .cross(a);
    magnitude += 0.2 * a.norm();
  }
  ASSERT_GT(rawTorque.norm(), 1e-3 * magnitude) << "the uneven sampling has a torque to remove";
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.5 * stableTimeStep(world);
  for (int s = 0; s < 400; ++s) step(world, dt, times);
  Vec3 linear, angular;
  double scale = 0;
  momenta(linear, angular, scale);
  ASSERT_GT(scale, 0) << "the shell moves";
  EXPECT_LT(angular.norm(), 1e-9 * scale) << "and does not turn";
  EXPECT_LT(linear.norm(), 1e-9 * scale / 0.2);
}

// A torn balloon's gas leaves through the tear over `vent_time`: from the first crack the
// pressure falls as exp(-(t - t_crack) / vent_time), and the crack's time is kept.
TEST(Pressure, TheGasEscapesThroughTheFirstCrackOverTheVentTime) {
  for (const double ventTime : {0.0, 0.01}) {
    BodyDef body = fiberSphere(300.0);
    body.pressure->ramp = {{0.0, 0.0}, {1.0, 1.0}};  // inflated slowly until it tears
    body.pressure->ventTime = ventTime;
    body.options<FiberDef>().fracture = FiberFractureDef{
        .stretchLimit = 1.05, .bendLimit = 50.0, .brokenRatio = 0.25, .cooldownSteps = 2};
    SceneDef scene = sceneWith(body);
    scene.gravity = {0, 0, 0};
    World world = buildWorld(scene);
    Body& balloon = world.bodies[0];
    PhaseTimes times;
    computeAccelerations(world);
    const double dt = 0.5 * stableTimeStep(world);
    const auto totalForce = [&] {
      updateExternalForces(world);
      double sum = 0;
      for (const double f : balloon.externalForces) sum += std::abs(f);
      return sum;
    };
    int steps = 0;
    while (balloon.crackCount() == 0 && steps < 20000) {
      EXPECT_EQ(balloon.pressure->ventStart, PressureLoad::kNotVented);
      step(world, dt, times);
      ++steps;
    }
    ASSERT_GT(balloon.crackCount(), 0) << "the over-inflated sphere tore";
    const double crackTime = world.time;
    EXPECT_EQ(balloon.pressure->ventStart, crackTime) << "the gas starts leaving then";
    const int ventSteps = std::max(1, static_cast<int>(0.01 / dt));  // about one vent time
    for (int s = 0; s < ventSteps; ++s) step(world, dt, times);
    EXPECT_EQ(balloon.pressure->ventStart, crackTime) << "later cracks do not restart it";
    const double vented = totalForce();
    balloon.pressure->ventStart = PressureLoad::kNotVented;
    const double full = totalForce();
    ASSERT_GT(full, 0);
    const double expected = ventTime > 0 ? std::exp(-(world.time - crackTime) / ventTime) : 0.0;
    EXPECT_NEAR(vented / full, expected, 1e-12) << "vent time " << ventTime;
    if (ventTime > 0) {
      EXPECT_GT(expected, 0.05) << "still pushing: the tear opens under gas";
    }
  }
}

// Area vectors of a triangle mesh, a third of each triangle's per corner, (nVertices, 3).
std::vector<double> meshAreaVectors(const Geometry& mesh) {
  std::vector<double> area(mesh.positions.size());
  triangleAreaVectors(mesh.positions, mesh.triangles, area);
  return area;
}

// The orifice vent measures the gas from the area vectors alone: a closed mesh's volume is
// its polyhedron's (the divergence theorem holds exactly for flat triangles) and it has no
// opening; an open dome's opening is its rim polygon's area, and the volume does not depend
// on the masses' centre for the closed mesh.
TEST(Pressure, EnclosedGasMeasuresAClosedMeshsVolumeAndAnOpenOnesOpening) {
  PrimitiveDef sphere;
  sphere.type = PrimitiveType::kSphere;
  sphere.radius = 0.3;
  sphere.resolution = 20;
  const Geometry ball = makePrimitive(sphere);
  const double tetrahedra = enclosedVolume(ball);  // sum a . (b x c) / 6 over the triangles
  const size_t n = ball.positions.size() / 3;
  std::vector<double> mass(n, 1.0);
  mass[0] = 50;  // the centre of mass off the origin
  const EnclosedGas closed = measureEnclosedGas(ball.positions, meshAreaVectors(ball), mass, 0);
  EXPECT_NEAR(closed.volume, tetrahedra, 1e-12 * tetrahedra);
  EXPECT_NEAR(closed.volume, 4.0 / 3.0 * M_PI * 0.027, 0.05 * closed.volume) << "a sphere";
  EXPECT_LT(closed.openingArea, 1e-14);

  PrimitiveDef dome = sphere;
  dome.type = PrimitiveType::kHemisphere;
  const Geometry cup = makePrimitive(dome);
  std::vector<std::pair<double, Vec3>> rim;  // by angle around z
  for (size_t v = 0; v < cup.positions.size() / 3; ++v) {
    if (std::abs(cup.positions[3 * v + 2]) > 1e-12) continue;
    const Vec3 p(cup.positions[3 * v], cup.positions[3 * v + 1], 0);
    rim.emplace_back(std::atan2(p.y(), p.x()), p);
  }
  std::sort(rim.begin(), rim.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  ASSERT_GE(rim.size(), 8u);
  double polygon = 0;  // shoelace
  for (size_t k = 0; k < rim.size(); ++k) {
    polygon += rim[k].second.cross(rim[(k + 1) % rim.size()].second).z() / 2;
  }
  const std::vector<double> cupArea = meshAreaVectors(cup);
  const std::vector<double> cupMass(cup.positions.size() / 3, 1.0);
  const EnclosedGas open = measureEnclosedGas(cup.positions, cupArea, cupMass, 0);
  EXPECT_NEAR(open.openingArea, polygon, 1e-12 * polygon);
  EXPECT_NEAR(open.openingArea, M_PI * 0.09, 0.02 * open.openingArea) << "the dome's mouth";
  // What a closedResidue names (a share of sum |A_i|) is not counted as an opening.
  double lengths = 0;
  for (size_t v = 0; v < cupMass.size(); ++v) {
    lengths += Vec3(cupArea[3 * v], cupArea[3 * v + 1], cupArea[3 * v + 2]).norm();
  }
  EXPECT_NEAR(
      measureEnclosedGas(cup.positions, cupArea, cupMass, 0.5 * polygon / lengths).openingArea,
      0.5 * polygon, 1e-12 * polygon);
  EXPECT_EQ(
      measureEnclosedGas(cup.positions, cupArea, cupMass, 1.01 * polygon / lengths).openingArea,
      0.0);
}

// A sealed gas is an ideal gas at constant temperature: its over-pressure follows the
// enclosed volume (Boyle), and an intact closed shell has no opening whatever its size, so
// nothing leaves (the fiber sphere's sampled area vectors do not cancel exactly: their
// residue at rest is taken off).
TEST(Pressure, ASealedGasFollowsBoylesLawAndStaysInAClosedShell) {
  BodyDef body = fiberSphere(300.0);
  body.pressure->vent = VentModel::kOrifice;
  SceneDef scene = sceneWith(body);
  scene.gravity = {0, 0, 0};
  World world = buildWorld(scene);
  Body& balloon = world.bodies[0];
  PressureLoad& load = *balloon.pressure;
  ASSERT_GT(load.closedResidue, 0) << "the sampled sphere's area vectors leave a residue";
  const auto measure = [&] {
    std::vector<double> area(balloon.positions.size());
    EXPECT_TRUE(balloon.model->nodeAreaVectors(balloon.positions, area));
    return measureEnclosedGas(balloon.positions, area, balloon.model->nodeMasses(),
                              load.closedResidue);
  };
  const EnclosedGas rest = measure();
  EXPECT_NEAR(rest.volume, 4.0 / 3.0 * M_PI * 0.008, 0.05 * rest.volume);
  EXPECT_EQ(rest.openingArea, 0.0);
  EXPECT_EQ(currentOverPressure(balloon, 0.0), 300.0) << "pumped: the given pressure";
  load.gas = (load.ambientPressure + 300.0) * rest.volume;
  ASSERT_TRUE(load.sealed());
  EXPECT_NEAR(currentOverPressure(balloon, 0.0), 300.0, 1e-9);
  for (const double scale : {1.0005, 0.9995}) {
    std::vector<double> restPositions = balloon.positions;
    for (double& x : balloon.positions) x *= scale;
    const EnclosedGas now = measure();
    EXPECT_NEAR(now.volume, rest.volume * scale * scale * scale, 1e-12 * rest.volume);
    EXPECT_LT(now.openingArea, 1e-15) << "a uniformly inflated closed shell stays closed";
    const double boyle =
        (load.ambientPressure + 300.0) / (scale * scale * scale) - load.ambientPressure;
    EXPECT_NEAR(currentOverPressure(balloon, 0.0), boyle, 1e-6);
    EXPECT_GT(std::abs(boyle - 300.0), 140.0) << "0.15 % of the volume is 0.15 % of 1 bar";
    // Nothing leaves a closed shell (the vent needs a crack to run at all; called as if
    // the balloon had one, the opening is zero).
    const double gas = load.gas;
    ventSealedGas(balloon, 0.0, 1e-3, nullptr, false);
    EXPECT_NEAR(load.gas, gas, 1e-12 * gas);
    balloon.positions = restPositions;
  }
}

// The orifice vent on a torn balloon: at the first crack the gas the pump put in is sealed
// in ((p_ambient + p) V), then each accepted step lets Q = C_d A sqrt(2 p / rho) out at the
// inside state: gas' = -gas Q / V, backward Euler in the over-pressure and exact in the
// exponential; the forces push with gas / V - p_ambient. The tear opens, the gas leaves over
// several steps and is out within 50 ms.
TEST(Pressure, TheOrificeVentSealsTheGasAtTheFirstCrackAndLetsItOutThroughTheOpening) {
  BodyDef body = fiberSphere(300.0);
  body.primitive->resolution = 32;
  body.pressure->ramp = {{0.0, 0.0}, {1.0, 1.0}};
  body.pressure->vent = VentModel::kOrifice;
  // Strong but for a weak spot, where it tears (a sphere torn all over at once leaves no
  // membrane to measure: every node a loose shard).
  FiberDef& fiber = body.options<FiberDef>();
  fiber.fracture = FiberFractureDef{
      .stretchLimit = 1.5, .bendLimit = 50.0, .brokenRatio = 0.25, .cooldownSteps = 2};
  fiber.regions.push_back(FiberRegionDef{
      .shape = PinShape::kSphere, .center = {0.2, 0, 0}, .radius = 0.06, .fractureScale = 0.3});
  SceneDef scene = sceneWith(body);
  scene.gravity = {0, 0, 0};
  World world = buildWorld(scene);
  Body& balloon = world.bodies[0];
  const PressureLoad& load = *balloon.pressure;
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.25 * stableTimeStep(world);
  const auto measure = [&] {
    std::vector<double> area(balloon.positions.size());
    EXPECT_TRUE(balloon.model->nodeAreaVectors(balloon.positions, area));
    return measureEnclosedGas(balloon.positions, area, balloon.model->nodeMasses(),
                              load.closedResidue);
  };
  int steps = 0;
  while (balloon.crackCount() == 0 && steps < 20000) {
    EXPECT_FALSE(load.sealed());
    step(world, dt, times);
    ++steps;
  }
  ASSERT_GT(balloon.crackCount(), 0) << "the over-inflated sphere tore";
  ASSERT_TRUE(load.sealed());
  const double pumped = load.pressure * load.ramp.value(world.time);
  EXPECT_NEAR(load.gas, (load.ambientPressure + pumped) * measure().volume, 1e-12 * load.gas);
  EXPECT_NEAR(currentOverPressure(balloon, world.time), pumped, 1e-9 * pumped);
  const double sealed = load.gas;
  double largestOpening = 0;
  int flowingSteps = 0;
  const int ventSteps = static_cast<int>(0.05 / dt);
  int heldSteps = 0;
  for (int s = 0; s < ventSteps; ++s) {
    const double gas = load.gas;
    const double floor = load.ventedFloor;
    const int64_t broken = balloon.brokenElements;
    const int32_t cracks = balloon.crackCount();
    step(world, dt, times);
    const EnclosedGas now = measure();
    if (balloon.brokenElements != broken || balloon.crackCount() != cracks) {
      continue;  // the gas's pressure carried over the edit (checked by the scene's test)
    }
    largestOpening = std::max(largestOpening, now.openingArea);
    // The over-pressure at the step's end drives the flow over it (backward Euler).
    const double over = std::max(load.gas / now.volume - load.ambientPressure, 0.0);
    const double flow =
        load.dischargeCoefficient * now.openingArea * std::sqrt(2 * over / load.gasDensity);
    // ... unless the shell's motion would compress it past its lowest over-pressure so far:
    // through the opening it leaves instead (ventSealedGas).
    double expected = gas * std::exp(-flow * dt / now.volume);
    if (expected / now.volume - load.ambientPressure > floor) {
      expected = (load.ambientPressure + floor) * now.volume;
      ++heldSteps;
    }
    ASSERT_NEAR(load.gas, expected, 1e-12 * gas) << "step " << s;
    ASSERT_LE(load.gas, gas);
    ASSERT_LE(load.gas / now.volume - load.ambientPressure, floor + 1e-9 * pumped);
    EXPECT_NEAR(currentOverPressure(balloon, world.time),
                std::max(load.gas / now.volume - load.ambientPressure, 0.0), 1e-6);
    if (flow > 0) ++flowingSteps;
  }
  EXPECT_LT(currentOverPressure(balloon, world.time), 0.05 * pumped) << "the gas got out";
  EXPECT_LT(load.gas, sealed);
  // Measured: 11.8 cm^2 (0.23 % of the sphere's area) at this sampling, when the clustering
  // decides its ties on the tie grid; 1 % at the one before. Closed, the opening is 0.
  EXPECT_GT(largestOpening, 0.001 * 4 * M_PI * 0.04) << "through a tear of the surface";
  EXPECT_GT(flowingSteps, 3) << "over several steps, not at once";
  std::cout << "over-pressure " << pumped << " Pa sealed in; over " << ventSteps
            << " steps, gas flowed out in " << flowingSteps << ", largest opening "
            << largestOpening * 1e4 << " cm^2, " << (sealed - load.gas) / load.ambientPressure * 1e6
            << " cm^3 of outside air; held at its lowest in " << heldSteps << " steps\n";
  // A torn shell that crumples does not compress what is left in it: its nodes pulled 5 %
  // towards their centre (V 14 % smaller), the over-pressure stays at its lowest so far,
  // where Boyle's law alone would raise it by about 14 kPa. So it is for the forces at once,
  // within the step that moved the nodes, before the vent's update holds the gas there (the
  // forces pushed with Boyle's 14 kPa until then: in fiber_balloon at 50 us steps one such
  // step threw the burst skin apart).
  const double lowest = load.ventedFloor;
  const double gasBefore = load.gas;
  Vec3 centre = Vec3::Zero();
  const size_t n = balloon.positions.size() / 3;
  for (size_t i = 0; i < n; ++i) centre += row(balloon.positions, i) / static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) {
    setRow(balloon.positions, i, centre + 0.95 * (row(balloon.positions, i) - centre));
  }
  const EnclosedGas crumpled = measure();
  EXPECT_GT(gasBefore / crumpled.volume - load.ambientPressure, lowest + 1e4);
  EXPECT_LE(currentOverPressure(balloon, world.time), lowest + 1e-9 * pumped);
  updateExternalForces(world);
  std::vector<double> area(balloon.positions.size());
  ASSERT_TRUE(balloon.model->nodeAreaVectors(balloon.positions, area));
  double pushed = 0, areas = 0;
  for (size_t i = 0; i < n; ++i) {
    pushed += row(balloon.externalForces, i).norm();
    areas += row(area, i).norm();
  }
  // At most the floor on every area vector, and the rigid part taken off (at most twice
  // more: minus the net force and torque, each no larger in sum than the forces themselves).
  EXPECT_LE(pushed, 3 * (lowest + 1e-9 * pumped) * areas)
      << "Boyle's law would push with " << gasBefore / crumpled.volume - load.ambientPressure
      << " Pa";
  ventSealedGas(balloon, world.time, dt, nullptr, false);
  EXPECT_LE(currentOverPressure(balloon, world.time), lowest + 1e-9 * pumped);
}

TEST(Loads, RampedRegionForceAcceleratesOnlyTheRegion) {
  BodyDef body = sheetBody(6);
  body.model = "fiber";
  LoadDef load;
  load.select.shape = PinShape::kBox;
  load.select.center = {0.25, 0, 0};
  load.select.halfExtents = {0.01, 0.3, 0.1};
  load.force = {2.0, 0, 0};
  load.ramp = {{0.0, 0.0}, {1.0, 1.0}};
  body.loads.push_back(load);
  World world = buildWorld(sceneWith(body));
  world.time = 0.5;
  updateExternalForces(world);
  Vec3 total = Vec3::Zero();
  const Body& b = world.bodies[0];
  for (size_t i = 0; i < b.positions.size() / 3; ++i) {
    const Vec3 f(b.externalForces[3 * i], b.externalForces[3 * i + 1], b.externalForces[3 * i + 2]);
    if (std::abs(b.positions[3 * i] - 0.25) > 0.01) {
      EXPECT_EQ(f.norm(), 0.0);
    }
    total += f;
  }
  EXPECT_NEAR(total.x(), 1.0, 1e-12) << "half the force at half the ramp";
}

// A pinned square fiber sheet pushed down in its centre for 0.3 s, then released and
// left to settle: with plasticity the centre stays down, without it springs back.
double centreAfterPushAndRelease(bool plastic) {
  BodyDef body = sheetBody(10);
  body.model = "fiber";
  body.material.damping = 8;
  body.material.youngModulus = 1e6;
  if (plastic) {
    body.options<FiberDef>().plasticity = FiberPlasticityDef{.yieldStrain = 0.001,
                                                             .yieldAngle = 0.02,
                                                             .stretchCreep = 30,
                                                             .bendCreep = 30,
                                                             .weakening = 0};
  }
  pinBoundary(body);
  LoadDef push;
  push.select.shape = PinShape::kSphere;
  push.select.center = {0, 0, 0};
  push.select.radius = 0.08;
  push.force = {0, 0, -0.6};
  push.ramp = {{0.0, 1.0}, {0.3, 1.0}, {0.35, 0.0}};
  body.loads.push_back(push);
  SceneDef scene = sceneWith(body);
  scene.gravity = {0, 0, 0};
  World world = buildWorld(scene);
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.5 * stableTimeStep(world);
  while (world.time < 2.0) step(world, dt, times);
  const Body& b = world.bodies[0];
  double lowest = 0;
  for (size_t i = 0; i < b.positions.size() / 3; ++i)
    lowest = std::min(lowest, b.positions[3 * i + 2]);
  // The frames carry each node's plastic strain where the sheet flowed, and no damage.
  const Geometry frame = bodySurface(world, 0, b.model->nodePieces());
  if (plastic) {
    EXPECT_EQ(frame.vertexScalars.size(), 2u);
    for (const VertexScalar& scalar : frame.vertexScalars) {
      EXPECT_EQ(scalar.values.size(), static_cast<size_t>(frame.vertexCount()));
      const float largest = *std::max_element(scalar.values.begin(), scalar.values.end());
      if (scalar.name == "plastic_strain") {
        EXPECT_GT(largest, 1e-3f);
      } else {
        EXPECT_EQ(scalar.name, "damage");
        EXPECT_EQ(largest, 0.0f);
      }
    }
  } else {
    EXPECT_TRUE(frame.vertexScalars.empty()) << "an elastic body has none";
  }
  return lowest;
}

TEST(Plasticity, DentStaysAfterTheLoadIsGoneAndSpringsBackWithoutPlasticity) {
  const double plastic = centreAfterPushAndRelease(true);
  const double elastic = centreAfterPushAndRelease(false);
  // Measured: plastic 0.075 m deep, elastic 0.0018 m (still creeping back).
  EXPECT_LT(plastic, -0.03) << "dent depth " << plastic;
  EXPECT_GT(elastic, -0.005) << "elastic sheet springs back, depth " << elastic;
}

// wicke2005 Fig. 7, scenes/fiber_bust_plastic.json: the heavy bronze-like bust (perfect plastic
// flow) dropped face first. The shell caves in where it hit, deep and local, keeps the dent,
// hardly bounces, then topples onto the back of its head (the dented face up, towards the
// scene's camera) and comes to rest. The dent is measured on the nodes after the rigid motion
// that best carries the rest shape onto the last one (Kabsch): how much closer to the centre
// each node came. Measured at 3 s: deepest 43 mm, 5.4 % of the nodes more than 5 mm in, the
// dent facing (0.81, -0.40, 0.44) from the centre; kinetic energy in the bounce (0.2 to 0.5 s)
// at most 1.3 J of the 357 J it hit with, 0.0036 J at 3 s. (Dropped crown first, as before,
// it came to rest standing on the flattened crown: the dent faced the floor.)
TEST(PlasticitySlow, TheBronzeBustCavesInWhereItHitAndComesToRest) {
  SceneDef scene =
      loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / "fiber_bust_plastic.json");
  Simulation sim(scene);
  const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
  const double impactKinetic = sim.energies(0).kinetic;
  double reboundKinetic = 0;
  for (int frame = 0; frame < 90; ++frame) {
    sim.advance(1.0 / 30);
    if (frame >= 6 && frame < 15)
      reboundKinetic = std::max(reboundKinetic, sim.energies(0).kinetic);
  }
  const std::span<const double> x = sim.positions(0);
  const auto n = static_cast<Eigen::Index>(rest.size() / 3);
  const Eigen::Map<const Eigen::Matrix<double, 3, Eigen::Dynamic>> before(rest.data(), 3, n);
  const Eigen::Map<const Eigen::Matrix<double, 3, Eigen::Dynamic>> after(x.data(), 3, n);
  const Eigen::Vector3d c0 = before.rowwise().mean(), c1 = after.rowwise().mean();
  const Eigen::Matrix3d cross =
      (after.colwise() - c1) * (before.colwise() - c0).transpose();  // sum (y - c1)(x - c0)^T
  const Eigen::Matrix3d rotation = bestRotation(cross);
  double deepest = 0;
  int64_t dented = 0;
  Eigen::Vector3d dentCentre = Eigen::Vector3d::Zero();
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Vector3d back = rotation.transpose() * (after.col(i) - c1);  // into rest placing
    const double inward = (before.col(i) - c0).norm() - back.norm();
    deepest = std::max(deepest, inward);
    if (inward > 0.005) {
      ++dented;
      dentCentre += after.col(i);
    }
  }
  // Where the dent faces at the end, from the body's centre (unit vector).
  const Eigen::Vector3d dentFacing =
      (dentCentre / static_cast<double>(std::max<int64_t>(dented, 1)) - c1).normalized();
  const double dentedShare = static_cast<double>(dented) / static_cast<double>(n);
  const double restKinetic = sim.energies(0).kinetic;
  std::cout << "[ measured ] deepest " << deepest * 1e3 << " mm, " << 100 * dentedShare
            << " % of nodes over 5 mm in; kinetic energy " << impactKinetic << " J at the start, "
            << reboundKinetic << " J at most from 0.2 to 0.5 s, " << restKinetic
            << " J at 3 s; the dent faces " << dentFacing.transpose() << "\n";
  EXPECT_GT(deepest, 0.03) << "the face caves in";
  EXPECT_LT(dentedShare, 0.15) << "where it hit, not all over";
  EXPECT_GT(dentedShare, 0.01);
  EXPECT_LT(reboundKinetic, 0.02 * impactKinetic) << "heavy and plastic: a small bounce";
  EXPECT_LT(restKinetic, 1e-3 * impactKinetic) << "comes to rest";
  EXPECT_GT(dentFacing.z(), 0.3) << "it rests on the back of its head, the dented face up";
}

// wicke2005 Fig. 8, scenes/fiber_poster_tear.json: the tear runs from the weak point on the top
// edge down through the poster while the grips part, so each grip holds its own half at the
// end; fracture.min_piece_nodes keeps the specks few. Measured at 2.5 s (3,000 nodes): 2
// pieces with it in the Release build, 6 in the ci build (12-17 before its held fibers kept
// single nodes attached, 10 of them one node each), 25 and 41 without. (Fracture counts vary
// between builds and machines: the bounds are loose.)
TEST(FractureSlow, ThePosterTearsThroughIntoTwoHalvesWithFewSpecks) {
  const auto piecesAtTheEnd = [](int32_t minPieceNodes) {
    SceneDef scene =
        loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / "fiber_poster_tear.json");
    scene.bodies[0].options<FiberDef>().fracture->minPieceNodes = minPieceNodes;
    Simulation sim(scene);
    sim.advanceFrames(75);  // 2.5 s, frame by frame as the command line runs it
    const std::vector<int32_t> pieces = sim.nodePieces(0);
    // The pinned nodes farthest left and right: one in each grip.
    const std::span<const double> x = sim.positions(0);
    const std::span<const uint8_t> pinned = sim.pinnedNodes(0);
    size_t left = 0, right = 0;
    for (size_t i = 0; i < pinned.size(); ++i) {
      if (pinned[i] == 0) continue;
      if (pinned[left] == 0 || x[3 * i] < x[3 * left]) left = i;
      if (pinned[right] == 0 || x[3 * i] > x[3 * right]) right = i;
    }
    EXPECT_NE(pieces[left], pieces[right])
        << "the grips hold different halves (min_piece_nodes " << minPieceNodes << ")";
    return *std::max_element(pieces.begin(), pieces.end()) + 1;
  };
  const int32_t withRule = piecesAtTheEnd(4);
  const int32_t without = piecesAtTheEnd(0);
  std::cout << "[ measured ] pieces at 2.5 s: " << withRule << " with min_piece_nodes 4, "
            << without << " without\n";
  EXPECT_LE(withRule, 10);
  EXPECT_GE(without, withRule + 10);
}

// wicke2005 Fig. 9, scenes/fiber_balloon.json: "A balloon tears when inflated too much. Once
// the tear is opened, the shell can relax and the tearing process stops." Inflated until its
// weak spot tears, the balloon keeps its gas for the frame the tear takes to open (the orifice
// vent: a slit lets little out), then empties through the hole within a few frames, stops
// tearing, and hangs from its knot as one torn skin, no shards, above the floor, at rest;
// specks cut off it fall and lie on the floor. Measured (ci build, 1,170 nodes, crack_tip_scale
// 0.5, the clustering's and the network's ties decided on the tie grid, the same in the
// portable build): radius 0.1200 -> 0.1379 m, the first crack in frame 24 at 1,150 Pa, the gas
// 840 Pa in that frame, then 20, 0.2, 0; 33 cracks; one torn skin, its lowest node 0.23 m;
// kinetic energy 0.0014 J at 3 s. (With the sampling before: 26 cracks, the skin and three lone
// nodes on the floor; before the patches were confined to their pieces those three nodes
// stayed a speck that the skin flung up to 1.5 m at 40 m/s.) The other samplings burst too
// (TheBalloonBurstsAtOtherSamplingsToo).
TEST(Fracture, TheBalloonTearsAtItsWeakSpotLetsItsGasOutAndRelaxes) {
  SceneDef scene =
      loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / "fiber_balloon.json");
  Simulation sim(scene);
  const auto meanRadius = [&] {
    const std::span<const double> x = sim.positions(0);
    const size_t n = x.size() / 3;
    Vec3 centre = Vec3::Zero();
    for (size_t i = 0; i < n; ++i) centre += Vec3(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
    centre /= static_cast<double>(n);
    double radius = 0;
    for (size_t i = 0; i < n; ++i) {
      radius += (Vec3(x[3 * i], x[3 * i + 1], x[3 * i + 2]) - centre).norm();
    }
    return radius / static_cast<double>(n);
  };
  const double restRadius = meanRadius();
  double inflatedRadius = restRadius, pumped = 0, peakStretching = 0;
  int firstCrackFrame = -1;
  std::vector<double> gas;  // per frame from the first crack on, Pa
  int32_t cracksSoonAfter = 0;
  for (int frame = 1; frame <= 90; ++frame) {
    const double radius = meanRadius();
    const double pressure = sim.gasPressure(0);
    sim.advanceFrames(1);
    peakStretching = std::max(peakStretching, sim.energies(0).stretching);
    if (firstCrackFrame < 0 && sim.cracks(0) > 0) {
      firstCrackFrame = frame;
      inflatedRadius = radius;
      pumped = pressure;
    }
    if (firstCrackFrame > 0) gas.push_back(sim.gasPressure(0));
    if (firstCrackFrame > 0 && frame == firstCrackFrame + 10) cracksSoonAfter = sim.cracks(0);
  }
  ASSERT_GT(firstCrackFrame, 0) << "it tore";
  const std::vector<int32_t> pieces = sim.nodePieces(0);
  const auto largest = static_cast<double>(std::count(pieces.begin(), pieces.end(), 0));
  // The skin (piece 0) and what was cut off it.
  double lowest = std::numeric_limits<double>::infinity();
  double lowestCut = std::numeric_limits<double>::infinity(), fastestCut = 0;
  const std::span<const double> x = sim.positions(0);
  const std::span<const double> v = sim.velocities(0);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i] == 0) {
      lowest = std::min(lowest, x[3 * i + 2]);
    } else {
      lowestCut = std::min(lowestCut, x[3 * i + 2]);
      fastestCut = std::max(fastestCut, Vec3(v[3 * i], v[3 * i + 1], v[3 * i + 2]).norm());
    }
  }
  const double kinetic = sim.energies(0).kinetic;
  std::cout << "[ measured ] radius " << restRadius << " -> " << inflatedRadius
            << " m; first crack in frame " << firstCrackFrame << " at " << pumped
            << " Pa; gas then";
  for (size_t k = 0; k < std::min<size_t>(gas.size(), 5); ++k) std::cout << " " << gas[k];
  std::cout << " Pa; " << sim.cracks(0) << " cracks (" << cracksSoonAfter
            << " ten frames after the first), " << sim.pieceCount(0)
            << " pieces, the skin's lowest node " << lowest << " m, the cut-off nodes' lowest "
            << lowestCut << " m and fastest " << fastestCut << " m/s, kinetic " << kinetic
            << " J at 3 s (peak stretching " << peakStretching << " J)\n";
  EXPECT_GT(inflatedRadius, 1.1 * restRadius) << "inflated visibly before it tore";
  EXPECT_GT(gas[0], 0.5 * pumped) << "no collapse within the frame of the tear";
  ASSERT_GE(gas.size(), 6u);
  EXPECT_LT(gas[5], 0.05 * pumped) << "the gas is out within five frames";
  EXPECT_EQ(sim.cracks(0), cracksSoonAfter) << "the tearing stops once the tear is open";
  EXPECT_LE(sim.pieceCount(0), 6) << "the skin and at most a few specks cut off it";
  EXPECT_GT(largest, 0.98 * static_cast<double>(pieces.size())) << "one torn skin, no shards";
  EXPECT_GT(lowest, 0.05) << "hanging from its knot above the floor";
  if (sim.pieceCount(0) > 1) {
    EXPECT_GT(lowestCut, -0.002) << "what was cut off lies on the floor, not in it";
    EXPECT_LT(fastestCut, 0.01) << "and rests there";
  }
  EXPECT_LT(kinetic, 0.01 * peakStretching) << "at rest";
}

// fracture.crack_tip_scale: the balloon bursts whatever its sampling. Without it (1) only the
// scene's 1,170 nodes burst; at 1,130 and 1,190 (and 1,100, 1,150, 1,210) the first crack
// stayed a slit that leaked the gas out over seconds (session 38).
TEST(Fracture, TheBalloonBurstsAtOtherSamplingsToo) {
  for (const int32_t nodes : {1130, 1190}) {
    SceneDef scene =
        loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / "fiber_balloon.json");
    scene.bodies[0].options<FiberDef>().nodeCount = nodes;
    Simulation sim(scene);
    int firstCrackFrame = -1;
    double pumped = 0, gasAfter = 0;
    for (int frame = 1; frame <= 40 && (firstCrackFrame < 0 || frame <= firstCrackFrame + 5);
         ++frame) {
      const double pressure = sim.gasPressure(0);
      sim.advanceFrames(1);
      if (firstCrackFrame < 0 && sim.cracks(0) > 0) {
        firstCrackFrame = frame;
        pumped = pressure;
      }
      gasAfter = sim.gasPressure(0);
    }
    ASSERT_GT(firstCrackFrame, 0) << nodes << " nodes: it tore";
    std::cout << "[ measured ] " << nodes << " nodes: first crack in frame " << firstCrackFrame
              << ", " << sim.cracks(0) << " cracks five frames later, gas " << pumped << " -> "
              << gasAfter << " Pa, " << sim.pieceCount(0) << " pieces\n";
    EXPECT_GE(sim.cracks(0), 10) << nodes << " nodes: the tear ran";
    EXPECT_LT(gasAfter, 0.05 * pumped) << nodes << " nodes: the gas is out";
    EXPECT_LE(sim.pieceCount(0), 3) << nodes << " nodes";
  }
}

// Rounding must not decide how a balloon bursts (issue 20): builds with and without
// -march=native (FMA, AVX-512 against SSE2) round differently, and a run's rounding differences
// grow as a perturbation of its state does. Each node of fiber_balloon moved by up to 1 nm at
// the start (ten million times a coordinate's rounding, a hundred-millionth of the radius), the
// visible outcome is the unperturbed run's: the first crack in the same frame or the next, the
// tear as long within a third, one torn skin and at most a few specks cut off it. Measured (ci
// build): unperturbed and both seeds first crack in frame 24, 33 cracks, one piece at 40
// frames; with the sampling before, 6 seeds at 1 nm and 4 at 10 um all tore in frame 24 (22-27
// cracks, 1-4 pieces, the skin over 99.5 % of the nodes). The native and the portable build
// now start from the same nodes and fibers (ClusterSurface.RoundingDoesNotChooseTheNodes...,
// FiberNetwork.RoundingDoesNotChooseTheFibers...) and agree to 2e-14 m until the first crack.
TEST(Fracture, RoundingDoesNotDecideHowTheBalloonBursts) {
  struct Outcome {
    int firstCrackFrame = -1;
    int32_t cracks = 0, pieces = 0;
    double skinShare = 0;
  };
  const auto burst = [](uint32_t seed) {
    SceneDef scene =
        loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / "fiber_balloon.json");
    Simulation sim(scene);
    if (seed != 0) {
      std::mt19937 random(seed);
      std::uniform_real_distribution<double> nudge(-1e-9, 1e-9);
      std::vector<double> x(sim.positions(0).begin(), sim.positions(0).end());
      for (double& coordinate : x) coordinate += nudge(random);
      sim.setPositions(0, x);
    }
    Outcome outcome;
    for (int frame = 1; frame <= 40; ++frame) {
      sim.advanceFrames(1);
      if (outcome.firstCrackFrame < 0 && sim.cracks(0) > 0) outcome.firstCrackFrame = frame;
    }
    outcome.cracks = sim.cracks(0);
    outcome.pieces = sim.pieceCount(0);
    const std::vector<int32_t> pieces = sim.nodePieces(0);
    outcome.skinShare = static_cast<double>(std::count(pieces.begin(), pieces.end(), 0)) /
                        static_cast<double>(pieces.size());
    std::cout << "[ measured ] seed " << seed << ": first crack in frame "
              << outcome.firstCrackFrame << ", " << outcome.cracks << " cracks, " << outcome.pieces
              << " pieces, the skin " << outcome.skinShare << " of the nodes at 40 frames\n";
    return outcome;
  };
  const Outcome reference = burst(0);
  ASSERT_GT(reference.firstCrackFrame, 0) << "it tore";
  for (const uint32_t seed : {1u, 2u}) {
    const Outcome nudged = burst(seed);
    EXPECT_GE(nudged.firstCrackFrame, reference.firstCrackFrame - 1) << "seed " << seed;
    EXPECT_LE(nudged.firstCrackFrame, reference.firstCrackFrame + 1) << "seed " << seed;
    EXPECT_GT(nudged.cracks, 2 * reference.cracks / 3) << "seed " << seed;
    EXPECT_LT(nudged.cracks, 4 * reference.cracks / 3) << "seed " << seed;
    EXPECT_LE(nudged.pieces, 6) << "seed " << seed << ": one torn skin, no confetti";
    EXPECT_GT(nudged.skinShare, 0.98) << "seed " << seed;
  }
}

// A 0.5 m fiber sheet of 13 x 13 nodes pulled apart at its left and right edges (two columns
// of nodes gripped on each side: gripped by one, the 13 x 13 sheet tore its grip's column off
// node by node once its nodes' areas were the same, fiber_model.hpp), with a weak point on its
// top edge; `dense` > 0 embeds a dense sheet mesh of that resolution;
// `file` replaces the sheet's geometry (the same sheet as a point cloud, say);
// `minPieceNodes`: fracture.min_piece_nodes; `cells`: the sheet's cells along a side without
// a dense mesh.
World tearingSheet(int dense, const std::filesystem::path& file = {}, int32_t minPieceNodes = 0,
                   int cells = 12) {
  BodyDef body = sheetBody(dense > 0 ? dense : cells);
  if (!file.empty()) {
    body.primitive.reset();
    body.file = file;
  }
  body.model = "fiber";
  body.material.damping = 5;
  if (dense > 0) body.options<FiberDef>().nodeCount = 169;
  body.options<FiberDef>().fracture = FiberFractureDef{.stretchLimit = 1.15,
                                                       .bendLimit = 3.0,
                                                       .brokenRatio = 0.25,
                                                       .cooldownSteps = 2,
                                                       .minPieceNodes = minPieceNodes};
  FiberRegionDef weak;
  weak.shape = PinShape::kSphere;
  weak.center = {0, 0.25, 0};
  weak.radius = 0.06;
  weak.fractureScale = 0.3;
  body.options<FiberDef>().regions.push_back(weak);
  gripLeftAndRightEdges(body, 0.05, 0.15);
  SceneDef scene = sceneWith(body);
  scene.gravity = {0, 0, 0};
  return buildWorld(scene);
}

TEST(Fracture, TornSheetSurfaceSplitsWithoutStretchedTriangles) {
  World world = tearingSheet(48);
  Body& body = world.bodies[0];
  ASSERT_TRUE(body.embedded) << "clustered nodes embed the dense sheet";
  const Geometry rest = body.embedded->deform(body.positions);
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.5 * stableTimeStep(world);
  while (world.time < 1.0) step(world, dt, times);
  const std::vector<int32_t> pieces = body.model->nodePieces();
  ASSERT_GE(*std::max_element(pieces.begin(), pieces.end()), 1) << "the sheet tore";
  const Geometry torn = body.embedded->deform(body.positions);
  // Rest edge length h = 0.5 / 48; no visible triangle is stretched across the tear.
  const double h = 0.5 / 48;
  double longest = 0;
  for (size_t t = 0; t + 2 < torn.triangles.size(); t += 3) {
    for (int c = 0; c < 3; ++c) {
      const auto a = static_cast<size_t>(torn.triangles[t + static_cast<size_t>(c)]);
      const auto b = static_cast<size_t>(torn.triangles[t + static_cast<size_t>((c + 1) % 3)]);
      longest = std::max(
          longest,
          (Vec3(torn.positions[3 * a], torn.positions[3 * a + 1], torn.positions[3 * a + 2]) -
           Vec3(torn.positions[3 * b], torn.positions[3 * b + 1], torn.positions[3 * b + 2]))
              .norm());
    }
  }
  // At most kTornStretch times a rest edge (diagonals are sqrt(2) h); drawn across the
  // opening a triangle would span ~0.25 m (measured before the torn-triangle rule).
  EXPECT_LE(longest, kTornStretch * std::sqrt(2.0) * h * (1 + 1e-9));
  // The surface's left and right edges moved apart with their pins: it opened.
  double left = 1, right = -1;
  for (size_t v = 0; v < static_cast<size_t>(torn.vertexCount()); ++v) {
    if (std::abs(rest.positions[3 * v + 1]) > 0.1) continue;
    if (rest.positions[3 * v] < -0.24) left = std::min(left, torn.positions[3 * v]);
    if (rest.positions[3 * v] > 0.24) right = std::max(right, torn.positions[3 * v]);
  }
  EXPECT_GT(right - left, 0.5 + 0.25);
  EXPECT_GT(torn.vertexCount(), rest.vertexCount()) << "split vertices along the cracks";
  // Each vertex of the embedded surface carries the piece of its nearest bound node, and
  // every drawn triangle lies within one piece.
  const Geometry frame = bodySurface(world, 0, pieces);
  ASSERT_EQ(frame.pieces.size(), static_cast<size_t>(frame.vertexCount()));
  const std::set<int32_t> seen(frame.pieces.begin(), frame.pieces.end());
  EXPECT_EQ(static_cast<int32_t>(seen.size()), pieceCount(pieces));
  for (size_t t = 0; t + 2 < frame.triangles.size(); t += 3) {
    const auto piece = [&](size_t c) {
      return frame.pieces[static_cast<size_t>(frame.triangles[t + c])];
    };
    EXPECT_TRUE(piece(0) == piece(1) && piece(1) == piece(2)) << "triangle " << t / 3;
  }
}

// wicke2005 Fig. 4(b), a crack by bending stress (scenes/fiber_plate_snap.json): a plate held
// on a table, scored along the table's edge (its fracture thresholds 0.3 of the rest there, as
// a tile is scored before it is snapped) and pressed down past the edge by a ball, snaps along
// the score once its fibers there bend past 0.3 gamma_theta: two pieces, every node on the
// table in one and every node past the edge in the other, one crack a row and not a node
// lost. With the bending threshold out of reach (the same stretch threshold) nothing breaks.
// At 30 cells (the scene) and 40 (the score 1 cm wide, so it holds a row of nodes). Measured
// in the ci and the portable build alike, and for bend limits 0.14-0.24 with scores 0.3-0.4:
// 16 cracks, 304 / 192 nodes at 30 cells, 21 cracks, 525 / 336 at 40. Before the crack discs
// ran on from their neighbours (same side, same plane, across the fold rather than along the
// most urgent fiber) the same plate creased into a hinge of a few fibers or parted with 4-40
// lone nodes along the edge, and differently in the two builds.
TEST(Fracture, AScoredPlatePressedOverAnEdgeSnapsAlongTheScoreByBendingOnly) {
  const auto pressed = [](int resolution, double bendLimit) {
    SceneDef scene =
        loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / "fiber_plate_snap.json");
    scene.bodies[0].primitive->resolution = resolution;
    auto& fiber = scene.bodies[0].options<FiberDef>();
    fiber.fracture->bendLimit = bendLimit;
    if (resolution != 30) fiber.regions.at(0).halfExtents[0] = 0.005;
    Simulation sim(scene);
    const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
    sim.advance(0.5);
    const std::vector<int32_t> pieces = sim.surface(0).pieces;
    EXPECT_EQ(pieces.size(), rest.size() / 3);
    // Every node on the table (x < 0 at rest, the score's row among them at 30 cells) in the
    // piece of node 0, every node past the edge in another.
    int32_t strays = 0;
    std::set<int32_t> pastTheEdge;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (rest[3 * i] < 0.003) {
        strays += pieces[i] != pieces[0] ? 1 : 0;
      } else {
        strays += pieces[i] == pieces[0] ? 1 : 0;
        pastTheEdge.insert(pieces[i]);
      }
    }
    std::cout << "[ measured ] " << resolution << " cells, bend limit " << bendLimit << ": "
              << sim.cracks(0) << " cracks, " << sim.brokenElements(0) << " fibers broken, "
              << sim.pieceCount(0) << " pieces, " << strays
              << " nodes on the wrong side of the score\n";
    return std::make_tuple(sim.cracks(0), sim.pieceCount(0), strays, pastTheEdge.size());
  };
  for (const int resolution : {30, 40}) {
    const auto [cracks, pieceCount, strays, piecesPastTheEdge] = pressed(resolution, 0.16);
    EXPECT_EQ(pieceCount, 2) << resolution << " cells";
    EXPECT_EQ(strays, 0) << resolution << " cells";
    EXPECT_EQ(piecesPastTheEdge, 1u) << resolution << " cells";
    // One crack a row of nodes along the score (16 and 21 rows), give or take a few.
    EXPECT_LE(cracks, resolution) << resolution << " cells";
  }
  const auto [cracksIntact, pieceCountIntact, straysIntact, piecesIntact] = pressed(30, 100.0);
  EXPECT_EQ(cracksIntact, 0) << "the stretch threshold alone breaks nothing";
  EXPECT_EQ(pieceCountIntact, 1);
}

TEST(PieceIds, APieceKeepsItsIdWhileItKeepsItsNodesNewPiecesTakeNewOnes) {
  int32_t next = 0;
  // The first frame: the model's labels.
  EXPECT_EQ(persistentPieceIds({}, std::vector<int32_t>{0, 0, 0, 0}, next),
            (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(next, 1);
  // A shard breaks off with node 0, so the model labels it 0 and the rest 1: the rest keeps
  // id 0 (its colour), the shard takes a new one.
  std::vector<int32_t> ids = persistentPieceIds(std::vector<int32_t>{0, 0, 0, 0, 0, 0},
                                                std::vector<int32_t>{0, 1, 1, 1, 1, 1}, next);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(next, 2);
  // Nodes appended by a cut join their piece; labels renumbered again.
  ids = persistentPieceIds(ids, std::vector<int32_t>{1, 0, 0, 0, 0, 0, 0, 1}, next);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(next, 2);
  // Two pieces merge (phyxels melting together): the larger overlap, then the lower id, wins.
  ids =
      persistentPieceIds(std::vector<int32_t>{0, 0, 1, 1}, std::vector<int32_t>{0, 0, 0, 0}, next);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 0, 0, 0}));
  // Two new pieces at once: new ids in label order.
  ids =
      persistentPieceIds(std::vector<int32_t>{0, 0, 0, 0}, std::vector<int32_t>{2, 0, 0, 1}, next);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 0, 0, 2}));
  EXPECT_EQ(next, 4);
}

// The frames of a tearing sheet: a piece whose nodes are the same as in the frame before
// keeps its id (its colour), and the sheet's largest piece keeps id 0 throughout, however
// the model renumbers its pieces as shards break off (and loose nodes rejoin).
TEST(PieceIds, TheFramesOfATearingSheetKeepEachPiecesId) {
  const testfiles::TempFolder folder("shellsim_piece_ids_");
  World world = tearingSheet(0);
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.5 * stableTimeStep(world);
  Recorder recorder(folder.path(), {OutputFormat::kPly});
  constexpr int kFrames = 20;
  for (int frame = 0; frame < kFrames; ++frame) {
    while (world.time < 1.2 * frame / (kFrames - 1) - 0.5 * dt) step(world, dt, times);
    recorder.writeFrame(world, frame, StepCounts{}, false, 0.0);
  }
  using Pieces = std::map<int32_t, std::set<size_t>>;  // id -> its nodes
  Pieces previous;
  std::set<int32_t> seen;
  int kept = 0;
  for (int frame = 0; frame < kFrames; ++frame) {
    char name[32];
    std::snprintf(name, sizeof name, "sheet_%05d.ply", frame);
    const std::vector<int32_t> ids = readGeometry(folder.path() / "frames" / name).pieces;
    ASSERT_EQ(ids.size(), static_cast<size_t>(world.bodies[0].nodeCount()));
    Pieces pieces;
    for (size_t i = 0; i < ids.size(); ++i) pieces[ids[i]].insert(i);
    const auto largest = std::max_element(pieces.begin(), pieces.end(), [](auto& a, auto& b) {
      return a.second.size() < b.second.size();
    });
    EXPECT_EQ(largest->first, 0) << "frame " << frame;
    for (const auto& [id, nodes] : pieces) {
      for (const auto& [before, nodesBefore] : previous) {
        if (nodesBefore != nodes) continue;
        EXPECT_EQ(id, before) << "frame " << frame << ": a piece of " << nodes.size()
                              << " nodes changed its id";
        ++kept;
      }
    }
    previous = std::move(pieces);
    seen.insert(ids.begin(), ids.end());
  }
  EXPECT_GE(seen.size(), 3u) << "the sheet tore, shards broke off";
  EXPECT_GT(kept, kFrames) << "pieces lasted over frames";
}

// fracture.min_piece_nodes for single nodes: tearing the sheet (25 x 25 nodes: at 13 x 13 the
// rule's refused cracks leave the tear bridged) leaves nodes whose every fiber (as centre or
// end) broke, one-node pieces flung off; with the rule each keeps its least overloaded
// fiber, held from then on, and the sheet still tears into the grips' two sides. Measured
// (ci build): 100 one-node pieces of 107 at 1.2 s without the rule, 16 of 17 with the crack
// rule alone, 2 of 5 with the held fibers too (what is left: cracks that part two large
// pieces may cut a node off); since the patches are confined to their pieces, 75 without and
// 5 with; since the ties are decided on the tie grid (session 40), 63 and 12.
TEST(Fracture, MinPieceNodesKeepsNodesFromFlyingOffAlone) {
  const auto tear = [](int32_t minPieceNodes) {
    World world = tearingSheet(0, {}, minPieceNodes, 24);
    PhaseTimes times;
    computeAccelerations(world);
    const double dt = 0.5 * stableTimeStep(world);
    while (world.time < 1.2) step(world, dt, times);
    const Body& body = world.bodies[0];
    const std::vector<int32_t> pieces = body.model->nodePieces();
    size_t left = 0, right = 0;  // the pinned nodes farthest left and right
    for (size_t i = 0; i < body.pinned.size(); ++i) {
      if (body.pinned[i] == 0) continue;
      if (body.pinned[left] == 0 || body.positions[3 * i] < body.positions[3 * left]) left = i;
      if (body.pinned[right] == 0 || body.positions[3 * i] > body.positions[3 * right]) right = i;
    }
    EXPECT_NE(pieces[left], pieces[right])
        << "torn apart (min_piece_nodes " << minPieceNodes << ")";
    std::map<int32_t, int> size;
    for (const int32_t piece : pieces) ++size[piece];
    return static_cast<int>(
        std::count_if(size.begin(), size.end(), [](const auto& p) { return p.second == 1; }));
  };
  const int without = tear(0);
  const int with = tear(4);
  std::cout << "[ measured ] one-node pieces at 1.2 s: " << without << " without, " << with
            << " with min_piece_nodes 4\n";
  EXPECT_GT(without, 20) << "the sheet's tear cuts nodes loose";
  EXPECT_LE(5 * with, without);
}

TEST(Fracture, TornFramesShowPiecesApartMeshesWithoutCrossingTrianglesPointCloudsColoured) {
  const testfiles::TempFolder folder("shellsim_torn_frames_");
  // The pulled sheet once as its mesh and once as a point cloud (the mesh's vertices).
  World meshWorld = tearingSheet(0);
  Geometry cloud = makePrimitive(*sceneWith(sheetBody(12)).bodies[0].primitive);
  cloud.triangles.clear();
  cloud.normals.clear();
  writePly(folder.path() / "sheet.ply", cloud);
  World cloudWorld = tearingSheet(0, folder.path() / "sheet.ply");
  PhaseTimes times;
  for (World* world : {&meshWorld, &cloudWorld}) {
    computeAccelerations(*world);
    const double dt = 0.5 * stableTimeStep(*world);
    while (world->time < 1.0) step(*world, dt, times);
    Recorder recorder(folder.path() / (world == &meshWorld ? "mesh" : "cloud"),
                      {OutputFormat::kPly, OutputFormat::kObj, OutputFormat::kVtp});
    recorder.writeFrame(*world, 0, StepCounts{}, false, 0.0);
  }
  const auto piecesOf = [](const World& world) { return world.bodies[0].model->nodePieces(); };
  // Mesh: every triangle lies within one piece.
  const std::vector<int32_t> meshPieces = piecesOf(meshWorld);
  ASSERT_GE(*std::max_element(meshPieces.begin(), meshPieces.end()), 1) << "the sheet tore";
  const Geometry mesh = readGeometry(folder.path() / "mesh" / "frames" / "sheet_00000.ply");
  ASSERT_GT(mesh.triangleCount(), 0);
  for (size_t t = 0; t < mesh.triangles.size(); t += 3) {
    const auto piece = [&](size_t c) {
      return meshPieces[static_cast<size_t>(mesh.triangles[t + c])];
    };
    EXPECT_TRUE(piece(0) == piece(1) && piece(1) == piece(2)) << "triangle " << t / 3;
  }
  // Every vertex carries its piece: a PLY property, a VTP point and cell array, OBJ groups.
  const Geometry surface = bodySurface(meshWorld, 0, meshPieces);
  EXPECT_EQ(surface.pieces, meshPieces);
  const auto text = [&](const std::string& name) {
    std::ifstream in(folder.path() / "mesh" / "frames" / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_NE(text("sheet_00000.ply").find("property int piece\nproperty float damage\n"),
            std::string::npos);
  ASSERT_FALSE(surface.vertexScalars.empty());
  EXPECT_EQ(surface.vertexScalars[0].name, "damage");
  const std::vector<float>& damage = surface.vertexScalars[0].values;
  EXPECT_GT(*std::max_element(damage.begin(), damage.end()), 0.2f) << "the torn nodes";
  EXPECT_GE(*std::min_element(damage.begin(), damage.end()), 0.0f);
  EXPECT_LE(*std::max_element(damage.begin(), damage.end()), 1.0f);
  const std::string vtp = text("sheet_00000.vtp");
  const size_t pointPieces = vtp.find("<DataArray type=\"Int32\" Name=\"Piece\"");
  EXPECT_LT(vtp.find("<PointData"), pointPieces);
  EXPECT_LT(pointPieces, vtp.find("</PointData>"));
  EXPECT_NE(vtp.find("<CellData>\n<DataArray type=\"Int32\" Name=\"Piece\""), std::string::npos);
  EXPECT_NE(vtp.find("<DataArray type=\"Float32\" Name=\"damage\""), std::string::npos);
  // The OBJ's faces are grouped by piece: at least two groups (a piece of loose nodes
  // without a triangle has none).
  const std::string obj = text("sheet_00000.obj");
  std::set<std::string> groups;
  for (size_t at = obj.find("\ng piece_"); at != std::string::npos;
       at = obj.find("\ng piece_", at + 1)) {
    groups.insert(obj.substr(at + 1, obj.find('\n', at + 1) - at - 1));
  }
  EXPECT_GE(groups.size(), 2u);
  EXPECT_TRUE(groups.contains("g piece_0"));
  // Point cloud: each point carries its piece's colour, the same within a piece, and
  // different pieces (fewer than the palette's entries here) differ.
  const std::vector<int32_t> cloudPieces = piecesOf(cloudWorld);
  ASSERT_GE(*std::max_element(cloudPieces.begin(), cloudPieces.end()), 1) << "the cloud tore";
  const Geometry points = readGeometry(folder.path() / "cloud" / "frames" / "sheet_00000.ply");
  ASSERT_EQ(points.colors.size(), 3 * cloudPieces.size());
  // And its disc radius, the renderer's rule (0.8 of the mean distance to 6 neighbours: about
  // 0.9 of the spacing h = 0.5 / 12 where the sheet is whole).
  const auto radius = std::find_if(points.vertexScalars.begin(), points.vertexScalars.end(),
                                   [](const VertexScalar& v) { return v.name == "radius"; });
  ASSERT_NE(radius, points.vertexScalars.end());
  ASSERT_EQ(radius->values.size(), cloudPieces.size());
  std::vector<float> radii = radius->values;
  std::nth_element(radii.begin(), radii.begin() + radii.size() / 2, radii.end());
  EXPECT_NEAR(radii[radii.size() / 2], 0.9 * 0.5 / 12, 0.25 * 0.5 / 12);
  std::map<int32_t, std::array<float, 3>> colourOf;
  for (size_t i = 0; i < cloudPieces.size(); ++i) {
    const std::array<float, 3> c{points.colors[3 * i], points.colors[3 * i + 1],
                                 points.colors[3 * i + 2]};
    const auto [it, inserted] = colourOf.emplace(cloudPieces[i], c);
    EXPECT_NEAR(it->second[0], c[0], 1e-2);
    EXPECT_NEAR(it->second[1], c[1], 1e-2);
    EXPECT_NEAR(it->second[2], c[2], 1e-2);
  }
  if (colourOf.size() <= static_cast<size_t>(kPiecePaletteSize)) {
    std::set<std::array<float, 3>> distinct;
    for (const auto& [piece, colour] : colourOf) distinct.insert(colour);
    EXPECT_EQ(distinct.size(), colourOf.size());
  }
}

TEST(Fracture, TearingIsBitIdenticalWithOneAndTwoThreads) {
  const auto run = [](int threads) {
    const ThreadLimit limit(threads);
    World world = tearingSheet(0);
    PhaseTimes times;
    computeAccelerations(world);
    const double dt = 0.5 * stableTimeStep(world);
    for (int s = 0; s < 1500; ++s) step(world, dt, times);
    EXPECT_GT(world.bodies[0].crackCount(), 0);
    return world.bodies[0].positions;
  };
  const std::vector<double> one = run(1);
  const std::vector<double> two = run(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(double)));
}

TEST(Fracture, BackwardEulerTearsTheSheetWithoutNewtonStalling) {
  // Before the arc length's speed smoothing (fiber_kernel.hpp), Newton stalled at t = 0.55 s
  // (relative residual 0.038 after 30 iterations) on a compressed fiber folding into a
  // hairpin; measured after: 2.7 Newton iterations per step, at most 7, 53 cracks. The
  // bound is for full Newton steps; with the default frozen Hessian (modified Newton, which
  // converges linearly) the solve must still converge at every step.
  for (const bool frozen : {false, true}) {
    World world = tearingSheet(0);
    ImplicitSettings settings;
    settings.scheme = ImplicitScheme::kBackwardEuler;
    settings.newton.frozenHessian = frozen;
    ImplicitStepper stepper(settings);
    PhaseTimes times;
    computeAccelerations(world);
    const double dt = stableTimeStep(world);
    int32_t worst = 0;
    while (world.time < 1.0) {
      const ImplicitStepReport report = stepper.step(world, dt, times);
      ASSERT_TRUE(report.bodies[0].converged) << "t = " << world.time << ", frozen " << frozen;
      worst = std::max(worst, report.maxIterations());
    }
    if (!frozen) {
      EXPECT_LE(worst, 15);
    }
    const std::vector<int32_t> pieces = world.bodies[0].model->nodePieces();
    EXPECT_GE(*std::max_element(pieces.begin(), pieces.end()) + 1, 2) << "frozen " << frozen;
    const auto& pins = world.bodies[0].pins;
    EXPECT_NE(pieces[static_cast<size_t>(pins[0].nodes[0])],
              pieces[static_cast<size_t>(pins[1].nodes[0])])
        << "frozen " << frozen;
  }
}

// The pieces of a torn body are apart: the fibers of one piece neither feel nor push the
// nodes of another, so each piece's internal forces sum to zero, and so do their moments.
// A node's normal patch reaching across a parting broke this (a fiber broken since the
// patches were made, or one a rebuild makes anew before its broken state is put back): a
// three-node speck cut off the burst balloon (its pressure torque taken off) rattled on the
// floor and was flung up to 1.5 m at 40 m/s by the skin it had left. Here a corner block of a sheet
// is pulled off it in one step (every fiber joining it breaks), then every node is lifted at random
// so that the patch normals matter, and the gradient is summed per piece. Without the confinement
// (patchPieces_) the block's net force was 5e-6 of its force sum and the torque as much (the
// sum is mostly stretching, which no patch touches); with it, rounding (7e-17).
TEST(Fracture, APieceCutOffNeitherFeelsNorPushesTheRest) {
  BodyDef sheet = sheetBody(12);
  sheet.model = "fiber";
  sheet.options<FiberDef>().fracture =
      FiberFractureDef{.stretchLimit = 1.5, .bendLimit = 50, .brokenRatio = 0.25};
  World world = buildWorld(sceneWith(sheet));
  Body& body = world.bodies[0];
  const auto n = static_cast<size_t>(body.nodeCount());
  std::vector<double> x = body.positions;
  for (size_t i = 0; i < n; ++i) {
    if (x[3 * i] > 0.1 && x[3 * i + 1] > 0.1) {
      x[3 * i] += 0.2;
      x[3 * i + 1] += 0.2;
    }
  }
  (void)body.model->updateInelastic(x, 1e-4);
  const std::vector<int32_t> pieces = body.model->nodePieces();
  const auto pieceCount = static_cast<size_t>(*std::max_element(pieces.begin(), pieces.end()) + 1);
  ASSERT_GE(pieceCount, 2u) << "the corner came off";
  std::mt19937 random(5);
  std::uniform_real_distribution<double> lift(-0.01, 0.01);
  for (size_t i = 0; i < n; ++i) x[3 * i + 2] += lift(random);
  std::vector<double> gradient(x.size(), 0.0);
  (void)body.model->addGradient(x, gradient);
  std::vector<Vec3> net(pieceCount, Vec3::Zero()), torque(pieceCount, Vec3::Zero());
  std::vector<double> size(pieceCount, 0.0);
  for (size_t i = 0; i < n; ++i) {
    const auto p = static_cast<size_t>(pieces[i]);
    net[p] += row(gradient, i);
    torque[p] += row(x, i).cross(row(gradient, i));  // about the origin, within 0.5 m
    size[p] += row(gradient, i).norm();
  }
  double worst = 0, worstTorque = 0;
  size_t loaded = 0;
  for (size_t p = 0; p < pieceCount; ++p) {
    if (!(size[p] > 0)) continue;  // a lone node without fibers
    ++loaded;
    worst = std::max(worst, net[p].norm() / size[p]);
    worstTorque = std::max(worstTorque, torque[p].norm() / (0.5 * size[p]));
  }
  std::cout << "[ measured ] " << pieceCount << " pieces (" << loaded
            << " with fibers): largest net force " << worst << ", torque " << worstTorque
            << " of the piece's force sum\n";
  EXPECT_GE(loaded, 2u) << "both sides keep fibers";
  EXPECT_LT(worst, 1e-12);
  EXPECT_LT(worstTorque, 1e-12);
}

TEST(Fracture, SheetPulledApartTearsIntoTwoPiecesOneCrackPerStep) {
  World world = tearingSheet(0);
  PhaseTimes times;
  computeAccelerations(world);
  const double dt = 0.5 * stableTimeStep(world);
  int32_t cracks = 0;
  while (world.time < 1.0) {
    step(world, dt, times);
    EXPECT_LE(world.bodies[0].crackCount() - cracks, 1);
    cracks = world.bodies[0].crackCount();
  }
  const std::vector<int32_t> pieces = world.bodies[0].model->nodePieces();
  const int32_t count = *std::max_element(pieces.begin(), pieces.end()) + 1;
  EXPECT_GE(count, 2);
  EXPECT_GT(cracks, 3);
  // The two pinned edges ended in different pieces.
  const auto& pins = world.bodies[0].pins;
  EXPECT_NE(pieces[static_cast<size_t>(pins[0].nodes[0])],
            pieces[static_cast<size_t>(pins[1].nodes[0])]);
}

}  // namespace
}  // namespace shellsim
