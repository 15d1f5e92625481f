// Penalty obstacles (ObstacleResponse::kPenalty, dynamics/contact.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dynamics/contact.hpp"
#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

using testing::sceneWith;
using testing::sheetBody;

ObstacleDef penaltyFloor(double restitution, double friction) {
  ObstacleDef floor;
  floor.response = ObstacleResponse::kPenalty;
  floor.restitution = restitution;
  floor.friction = friction;
  return floor;
}

// A sheet's nodes scattered in a 0.3 m cube around a plane, a sphere and a box, each a
// penalty obstacle: the energy's gradient against central differences, node by node.
TEST(ObstaclePenalty, GradientMatchesFiniteDifferences) {
  SceneDef scene = sceneWith(sheetBody(4));
  ObstacleDef plane = penaltyFloor(0, 0);
  plane.normal = {0, 0.6, 0.8};
  ObstacleDef ball = plane;
  ball.type = ObstacleType::kSphere;
  ball.center = {0.05, 0, 0.02};
  ball.radius = 0.08;
  ObstacleDef box = plane;
  box.type = ObstacleType::kBox;
  box.center = {-0.05, 0.04, 0};
  box.halfExtents = {0.06, 0.03, 0.05};
  ball.stiffness = 3;  // its own kappa: 6e4 per mass below
  scene.obstacles = {plane, ball, box};
  World world = buildWorld(scene);
  const Body& body = world.bodies[0];
  std::vector<double> x = body.positions;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> spread(-0.15, 0.15);
  for (double& c : x) c = spread(rng);
  ObstaclePenalty penalty = obstaclePenalty(world, body);
  penalty.stiffnessPerMass = 1e4;
  penalty.stiffnessPerKappa = 2e4;
  penalty.clearance = 0.02;
  std::vector<double> gradient(x.size(), 0.0);
  const double energy = addObstaclePenalty(penalty, body, x, gradient, {});
  ASSERT_GT(energy, 0.0);
  int touching = 0;
  const double h = 1e-7;
  for (size_t k = 0; k < x.size(); ++k) {
    std::vector<double> plus = x, minus = x;
    plus[k] += h;
    minus[k] -= h;
    const double fd = (addObstaclePenalty(penalty, body, plus, {}, {}) -
                       addObstaclePenalty(penalty, body, minus, {}, {})) /
                      (2 * h);
    EXPECT_NEAR(gradient[k], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "dof " << k;
    touching += gradient[k] != 0.0 ? 1 : 0;
  }
  EXPECT_GT(touching, 6);  // several nodes in the penalty layers
}

// On a plane the Gauss-Newton block is the exact Hessian: k n n^T, from differences of the
// gradient.
TEST(ObstaclePenalty, PlaneBlocksAreTheHessian) {
  SceneDef scene = sceneWith(sheetBody(2));
  ObstacleDef plane = penaltyFloor(0, 0);
  plane.normal = {0.48, 0.6, 0.64};
  scene.obstacles = {plane};
  World world = buildWorld(scene);
  const Body& body = world.bodies[0];
  std::vector<double> x = body.positions;
  ObstaclePenalty penalty = obstaclePenalty(world, body);
  penalty.stiffnessPerMass = 1e4;
  penalty.clearance = 0.5;  // every node in the layer
  std::vector<double> blocks(3 * x.size(), 0.0);
  (void)addObstaclePenalty(penalty, body, x, {}, blocks);
  const double h = 1e-6;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    for (int a = 0; a < 3; ++a) {
      std::vector<double> plus = x, minus = x, gPlus(x.size(), 0.0), gMinus(x.size(), 0.0);
      plus[3 * i + a] += h;
      minus[3 * i + a] -= h;
      (void)addObstaclePenalty(penalty, body, plus, gPlus, {});
      (void)addObstaclePenalty(penalty, body, minus, gMinus, {});
      for (int r = 0; r < 3; ++r) {
        const double fd = (gPlus[3 * i + r] - gMinus[3 * i + r]) / (2 * h);
        EXPECT_NEAR(blocks[9 * i + 3 * r + a], fd, 1e-6 * std::abs(fd) + 1e-9);
      }
    }
  }
}

// A flat sheet falling at 1 m/s without gravity onto a penalty floor acts as one mass on
// the spring-damper: it rebounds with the floor's restitution, and never sinks by more
// than its speed over the spring's frequency, v / sqrt(s).
// Returns the mean vertical velocity at the end; `deepest`: the lowest node of any frame
// minus the clearance, over v / omega (0 at the clearance, -1 at the undamped bound).
// `floorKappa`: the floor's own kappa (ObstacleDef::stiffness; 0: the contact's).
double reboundSpeed(double restitution, Integrator integrator, double* deepest,
                    double floorKappa = 0) {
  BodyDef sheet = sheetBody(4);
  sheet.transform.translation = {0, 0, 0.01};
  sheet.initialVelocity = {0, 0, -1};
  SceneDef scene = sceneWith(sheet);
  scene.gravity = {0, 0, 0};
  scene.obstacles = {penaltyFloor(restitution, 0.5)};
  scene.obstacles[0].stiffness = floorKappa;
  scene.time.integrator = integrator;
  scene.time.duration = 0.1;
  scene.time.frameRate = 100;
  if (integrator != Integrator::kVerlet) scene.time.timeStep = 1e-4;
  const double omega =
      std::sqrt(obstaclePenalty(buildWorld(scene)).stiffnessPerMassOf(scene.obstacles[0]));
  Simulation sim(scene);
  double lowest = 1;
  for (int frame = 0; frame < 100; ++frame) {
    sim.advance(1e-3);
    const std::span<const double> x = sim.positions(0);
    for (size_t i = 2; i < x.size(); i += 3) lowest = std::min(lowest, x[i]);
  }
  *deepest = (lowest - 0.5e-3) * omega / 1.0;
  const std::span<const double> v = sim.velocities(0);
  double mean = 0;
  for (size_t i = 2; i < v.size(); i += 3) mean += v[i];
  return mean / static_cast<double>(v.size() / 3);
}

// With the contact's kappa (0.25) and with the floor's own (2: a spring eight times stiffer,
// its damper on its own frequency).
TEST(ObstaclePenalty, FlatImpactReboundsWithTheRestitution) {
  for (const double kappa : {0.0, 2.0}) {
    for (const double e : {0.0, 0.5, 1.0}) {
      double deepest = 0;
      const double rebound = reboundSpeed(e, Integrator::kVerlet, &deepest, kappa);
      EXPECT_NEAR(rebound, e, 0.03) << "restitution " << e << ", kappa " << kappa;
      // The clearance is half the 1 mm thickness; the spring stops 1 m/s within 1 / omega
      // (less with damping), sampled every millisecond.
      EXPECT_GT(deepest, -1.05) << "restitution " << e << ", kappa " << kappa;
      EXPECT_LT(deepest, e == 1.0 ? -0.8 : 0.0) << "restitution " << e << ", kappa " << kappa;
    }
  }
}

TEST(ObstaclePenalty, ImplicitImpactReboundsAndStopsAbove) {
  // Newmark (beta 1/4) keeps the spring's energy; backward Euler damps it, so only the
  // upward rebound is asked of it.
  double deepest = 0;
  EXPECT_NEAR(reboundSpeed(1.0, Integrator::kNewmark, &deepest), 1.0, 0.05);
  EXPECT_GT(deepest, -1.05);
  EXPECT_GT(reboundSpeed(1.0, Integrator::kBackwardEuler, &deepest), 0.2);
}

// Under gravity, backward Euler at 1/240 s: the sheet settles where the spring holds its
// weight, delta - g / s, every node, with the floor's friction holding it in place; with
// kappa 2 (0.34 mm of sag) and 200 (3.4 um), which only implicit integrators allow, as the
// contact's kappa or as the floor's own (over a contact kappa of 2).
TEST(ObstaclePenalty, ImplicitSheetRestsWhereTheSpringHoldsItsWeight) {
  struct Case {
    double contactKappa, floorKappa, kappa;
  };
  for (const Case c : {Case{2.0, 0.0, 2.0}, Case{200.0, 0.0, 200.0}, Case{2.0, 200.0, 200.0}}) {
    const double kappa = c.kappa;
    SCOPED_TRACE(::testing::Message()
                 << "contact " << c.contactKappa << ", floor " << c.floorKappa);
    BodyDef sheet = sheetBody(6);
    sheet.transform.translation = {0, 0, 0.02};
    SceneDef scene = sceneWith(sheet);
    scene.obstacles = {penaltyFloor(0, 0.5)};
    scene.obstacles[0].stiffness = c.floorKappa;
    scene.time.integrator = Integrator::kBackwardEuler;
    scene.time.timeStep = 1.0 / 240;
    scene.time.frameRate = 30;
    scene.contact.stiffness = c.contactKappa;
    Simulation sim(scene);
    sim.advance(1.0);
    const double dtRef = 1.0 / 240;  // the planned step, above the stable one
    const double sag = 9.81 * dtRef * dtRef / kappa;
    const double expected = 0.5e-3 - sag;
    const std::span<const double> x = sim.positions(0);
    const std::span<const double> v = sim.velocities(0);
    for (size_t i = 0; i < x.size() / 3; ++i) {
      EXPECT_NEAR(x[3 * i + 2], expected, 0.01 * sag) << "node " << i;
      EXPECT_LT(std::hypot(v[3 * i], v[3 * i + 1], v[3 * i + 2]), 1e-3) << "node " << i;
    }
  }
}

// An obstacle added through the API meets the scene reader's bound: its own kappa of 4 or
// more would make explicit steps unstable, so an explicit simulation refuses it by name; an
// implicit one takes it.
TEST(ObstaclePenalty, TheApiRefusesAnOwnStiffnessOf4OrMoreWithExplicitSteps) {
  ObstacleDef floor = penaltyFloor(0, 0.5);
  floor.stiffness = 5;
  SceneDef scene = sceneWith(sheetBody(2));
  Simulation explicitSim(scene);
  try {
    (void)explicitSim.addObstacle(floor);
    FAIL() << "an own stiffness of 5 was taken with explicit steps";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "obstacles[0].stiffness = 5: must be < 4 with an explicit integrator"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(explicitSim.obstacleCount(), 0);
  scene.time.integrator = Integrator::kBackwardEuler;
  scene.time.timeStep = 1e-3;
  Simulation implicitSim(scene);
  EXPECT_EQ(implicitSim.addObstacle(floor), 0);
  floor.response = ObstacleResponse::kProjection;  // an own stiffness needs the penalty
  EXPECT_THROW((void)implicitSim.addObstacle(floor), InputError);
}

// The energy's sum is chunked, not reduced across threads: the same frames bit for bit.
TEST(ObstaclePenalty, TheSameFramesOnOneAndTwoThreads) {
  std::vector<std::vector<double>> frames;
  for (const int threads : {1, 2}) {
    const ThreadLimit limit(threads);
    BodyDef sheet = sheetBody(48);  // 2401 nodes: three chunks
    sheet.transform.translation = {0, 0, 0.01};
    sheet.transform.rotationDegrees = {10, 5, 0};
    SceneDef scene = sceneWith(sheet);
    scene.obstacles = {penaltyFloor(0.3, 0.5)};
    Simulation sim(scene);
    sim.advance(0.1);
    frames.emplace_back(sim.positions(0).begin(), sim.positions(0).end());
  }
  EXPECT_EQ(frames[0], frames[1]);
}

}  // namespace
}  // namespace shellsim

namespace shellsim {
namespace {

// A 0.2 kg ball thrown at 5 m/s at a free sheet without gravity: the penalty springs act
// equally on both, and the damper's and friction's impulses go to the ball too, so the
// momentum of sheet and ball together is kept.
struct Throw {
  Vec3 momentum = Vec3::Zero();  // kg m/s, sheet plus ball
  double energy = 0;             // J, kinetic of both plus the sheet's elastic
  double ballSpeed = 0;          // m/s, along z
  double sheetSpeed = 0;         // m/s, the sheet's mean along z
};

Throw throwBall(double restitution, double friction, double seconds) {
  BodyDef sheet = sheetBody(8);
  sheet.material.youngModulus = 1e6;
  SceneDef scene = sceneWith(sheet);
  scene.gravity = {0, 0, 0};
  ObstacleDef ball = penaltyFloor(restitution, friction);
  ball.type = ObstacleType::kSphere;
  ball.center = {0.02, 0.01, -0.06};
  ball.radius = 0.05;
  ball.mass = 0.2;
  ball.velocity = {0, 0, 5};
  scene.obstacles = {ball};
  Simulation sim(scene);
  sim.advance(seconds);
  Throw t;
  const std::span<const double> v = sim.velocities(0);
  const std::span<const double> m = sim.masses(0);
  double mass = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    t.momentum += m[i] * Vec3(v[3 * i], v[3 * i + 1], v[3 * i + 2]);
    mass += m[i];
  }
  t.sheetSpeed = t.momentum.z() / mass;
  const Vec3d ballVelocity = sim.obstacleVelocity(0);
  t.ballSpeed = ballVelocity[2];
  t.momentum += 0.2 * Vec3(ballVelocity[0], ballVelocity[1], ballVelocity[2]);
  const BodyEnergies e = sim.energies(0);
  const Vec3 ballVelocity3(ballVelocity[0], ballVelocity[1], ballVelocity[2]);
  t.energy = e.kinetic + e.stretching + e.bending + 0.5 * 0.2 * ballVelocity3.squaredNorm();
  return t;
}

TEST(ThrownObstacle, KeepsTheMomentumOfBallAndSheet) {
  for (const auto& [restitution, friction] : {std::pair{1.0, 0.0}, std::pair{0.3, 0.5}}) {
    const Throw t = throwBall(restitution, friction, 0.05);
    EXPECT_GT(t.sheetSpeed, 0.5) << restitution;  // the ball hit the sheet and pushed it
    EXPECT_LT(t.ballSpeed, 4.9) << restitution;   // and slowed down
    EXPECT_NEAR(t.momentum.z(), 0.2 * 5.0, 1e-9) << restitution;
    EXPECT_NEAR(t.momentum.x(), 0.0, 1e-9) << restitution;
    EXPECT_NEAR(t.momentum.y(), 0.0, 1e-9) << restitution;
  }
}

TEST(ThrownObstacle, ElasticHitKeepsTheEnergyAndDampedLosesSome) {
  const double thrown = 0.5 * 0.2 * 25;
  EXPECT_NEAR(throwBall(1.0, 0.0, 0.05).energy, thrown, 0.01 * thrown);
  EXPECT_LT(throwBall(0.0, 0.0, 0.05).energy, 0.97 * thrown);
}

// Alone, under gravity, a thrown obstacle flies the parabola exactly (velocity Verlet is
// exact for a constant acceleration), with explicit and implicit bodies alike.
TEST(ThrownObstacle, FliesTheParabola) {
  for (const Integrator integrator : {Integrator::kVerlet, Integrator::kBackwardEuler}) {
    BodyDef sheet = sheetBody(2);
    sheet.transform.translation = {5, 0, 0};
    SceneDef scene = sceneWith(sheet);
    scene.time.integrator = integrator;
    scene.time.timeStep = 1e-3;
    ObstacleDef ball = penaltyFloor(0, 0);
    ball.type = ObstacleType::kSphere;
    ball.radius = 0.05;
    ball.mass = 1;
    ball.velocity = {1, 0, 3};
    scene.obstacles = {ball};
    Simulation sim(scene);
    sim.advance(0.5);
    const Vec3d at = sim.obstacleOffset(0);
    EXPECT_NEAR(at[0], 0.5, 1e-12);
    EXPECT_NEAR(at[2], 3 * 0.5 - 0.5 * 9.81 * 0.25, 1e-12);
    EXPECT_NEAR(sim.obstacleVelocity(0)[2], 3 - 9.81 * 0.5, 1e-12);
  }
}

// A thrown sphere or box dropped with a sideways speed onto a static floor plane, and onto a
// static box (with the implicit integrator): it lands on top and stays there (the centre one
// radius or half height above, within the g dt^2 a step sinks it), its fall stopped, its
// sliding stopped by friction.
TEST(ThrownObstacle, LandsOnTheFloorOrABoxAndStays) {
  for (const ObstacleType shape : {ObstacleType::kSphere, ObstacleType::kBox}) {
    for (const bool onBox : {false, true}) {
      const Integrator integrator = onBox ? Integrator::kBackwardEuler : Integrator::kVerlet;
      SCOPED_TRACE(::testing::Message() << static_cast<int>(shape) << " on box " << onBox);
      BodyDef sheet = sheetBody(2);
      sheet.transform.translation = {50, 0, 0};
      SceneDef scene = sceneWith(sheet);
      scene.time.integrator = integrator;
      scene.time.timeStep = 1e-3;
      ObstacleDef ground;  // the default: a floor plane through 0 facing +z, projection
      ground.friction = 0.5;
      if (onBox) {
        ground.type = ObstacleType::kBox;
        ground.center = {0.5, 0, -0.5};
        ground.halfExtents = {1, 1, 0.5};
      }
      ObstacleDef thrown = penaltyFloor(0, 0.5);
      thrown.type = shape;
      thrown.center = {0, 0, 1};
      thrown.radius = 0.1;
      thrown.halfExtents = {0.1, 0.2, 0.1};
      thrown.mass = 2;
      thrown.velocity = {1, 0, 0};
      scene.obstacles = {ground, thrown};
      Simulation sim(scene);
      sim.advance(1.5);
      const Vec3d at = sim.obstacleOffset(1);
      const Vec3d v = sim.obstacleVelocity(1);
      EXPECT_NEAR(1 + at[2], 0.1, 2 * 9.81 * 1e-6);  // resting on top, not fallen through
      EXPECT_LT(std::abs(v[2]), 9.81 * 1e-3);        // one step's gravity at most
      EXPECT_NEAR(v[0], 0, 1e-12);                   // friction stopped the sliding
      // It flew sqrt(2 * 0.9 / g) = 0.428 s at 1 m/s, and landing (normal impulse 4.2 m/s
      // times a friction of 0.5) took all its sideways speed at once.
      EXPECT_NEAR(at[0], std::sqrt(2 * 0.9 / 9.81), 2e-3);
    }
  }
}

// Two thrown balls, 1 kg at 2 m/s and 3 kg at rest, meet without gravity. Head on, elastic
// (e = 1): the closed form of a one-dimensional elastic collision, -1 and +1 m/s; plastic
// (e = 0): both on at the momentum's 0.5 m/s. Off centre with friction: the momentum is kept
// in every component and the energy does not rise.
TEST(ThrownObstacle, TwoBallsCollideAsTheClosedFormSays) {
  struct Case {
    double restitution, friction, offCentre, v1, v2;
  };
  for (const Case c : {Case{1, 0, 0, -1, 1}, Case{0, 0, 0, 0.5, 0.5}, Case{0.5, 0.5, 0.05, 0, 0}}) {
    SCOPED_TRACE(::testing::Message() << c.restitution << " " << c.offCentre);
    BodyDef sheet = sheetBody(2);
    sheet.transform.translation = {50, 0, 0};
    SceneDef scene = sceneWith(sheet);
    scene.gravity = {0, 0, 0};
    scene.time.timeStep = 1e-3;
    ObstacleDef first = penaltyFloor(c.restitution, c.friction);
    first.type = ObstacleType::kSphere;
    first.center = {0, 0, 0};
    first.radius = 0.1;
    first.mass = 1;
    first.velocity = {2, 0, 0};
    ObstacleDef second = first;
    second.center = {1, c.offCentre, 0};
    second.mass = 3;
    second.velocity = {0, 0, 0};
    scene.obstacles = {first, second};
    Simulation sim(scene);
    sim.advance(1.0);
    const Vec3d v1 = sim.obstacleVelocity(0), v2 = sim.obstacleVelocity(1);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(1 * v1[k] + 3 * v2[k], k == 0 ? 2.0 : 0.0, 1e-12);
    const double energy =
        0.5 * (v1[0] * v1[0] + v1[1] * v1[1]) + 1.5 * (v2[0] * v2[0] + v2[1] * v2[1]);
    EXPECT_LE(energy, 2.0 + 1e-12);
    if (c.offCentre == 0) {
      EXPECT_NEAR(v1[0], c.v1, 1e-12);
      EXPECT_NEAR(v2[0], c.v2, 1e-12);
    } else {
      EXPECT_GT(v2[1], 0.01);  // pushed off the line of flight
      EXPECT_LT(energy, 2.0);
    }
  }
}

// The flight is part of the saved state: restored, the run goes on bit for bit.
TEST(ThrownObstacle, ItsFlightIsSavedAndRestored) {
  BodyDef sheet = sheetBody(6);
  SceneDef scene = sceneWith(sheet);
  ObstacleDef ball = penaltyFloor(0.5, 0.3);
  ball.type = ObstacleType::kSphere;
  ball.center = {0, 0, 0.1};
  ball.radius = 0.04;
  ball.mass = 0.1;
  ball.velocity = {0, 0, -3};
  scene.obstacles = {ball};
  Simulation sim(scene);
  sim.advance(0.02);
  const SimulationState saved = sim.saveState();
  sim.advance(0.03);
  const Vec3d first = sim.obstacleOffset(0);
  const std::vector<double> x(sim.positions(0).begin(), sim.positions(0).end());
  sim.restoreState(saved);
  sim.advance(0.03);
  EXPECT_EQ(sim.obstacleOffset(0), first);
  EXPECT_EQ(std::vector<double>(sim.positions(0).begin(), sim.positions(0).end()), x);
  EXPECT_LT(first[2], -0.05);  // it reached the sheet
}

}  // namespace
}  // namespace shellsim
