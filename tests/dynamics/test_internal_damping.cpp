// Internal friction (material.internal_damping): a spinning, flying, vibrating block of
// phyxels keeps its momentum and angular momentum exactly and its rigid motion, while its
// vibration dies out; without it the vibration goes on.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <sstream>

#include "core/vec3.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

struct Motion {
  Vec3 momentum = Vec3::Zero();
  Vec3 angular = Vec3::Zero();  // about the origin
  double kinetic = 0;
};

Motion motion(const Simulation& sim) {
  Motion m;
  const auto x = sim.positions(0), v = sim.velocities(0), mass = sim.masses(0);
  for (size_t i = 0; i < mass.size(); ++i) {
    const Vec3 p = mass[i] * row(v, i);
    m.momentum += p;
    m.angular += row(x, i).cross(p);
    m.kinetic += 0.5 * p.dot(row(v, i));
  }
  return m;
}

struct Outcome {
  Motion before, after;
  double vibrationBefore, elasticAfter;
};

Outcome spinAndRing(const std::filesystem::path& folder, double internalDamping) {
  std::ostringstream scene;
  scene << R"({"gravity": [0, 0, 0], "bodies": [{"name": "block", "primitive": {"type": "box",
    "size": [0.06, 0.06, 0.06], "resolution": 6}, "model": "mls_solid", "mls_solid":
    {"phyxel_count": 0, "phyxel_spacing": 0.01}, "material": {"young_modulus": 1e5,
    "poisson": 0.3, "density": 1000, "internal_damping": )"
        << internalDamping << R"(}}], "time": {"duration": 0.5, "frame_rate": 10},
    "output": {"folder": "out", "formats": ["ply"]}})";
  Simulation sim(parseScene(scene.str(), "block.json", folder));
  const auto x = sim.positions(0);
  std::vector<double> v(x.size());
  const Vec3 flight(0.3, -0.1, 0.2), spin(2.0, 1.0, -3.0);
  double vibration = 0;
  const auto mass = sim.masses(0);
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const Vec3 p = row(x, i);
    // A stretching vibration: the block's halves move apart along z.
    const Vec3 ring(0, 0, 0.05 * std::sin(std::numbers::pi * p.z() / 0.06));
    setRow(v, i, flight + spin.cross(p) + ring);
    vibration += 0.5 * mass[i] * ring.squaredNorm();
  }
  sim.setVelocities(0, v);
  Outcome out;
  out.before = motion(sim);
  out.vibrationBefore = vibration;
  sim.advanceFrames(5);
  out.after = motion(sim);
  const BodyEnergies e = sim.energies(0);
  out.elasticAfter = e.stretching + e.bending;
  return out;
}

TEST(InternalDamping, StillsVibrationAndKeepsMomentumAngularMomentumAndRigidMotion) {
  const testfiles::TempFolder folder("InternalDamping");
  const Outcome damped = spinAndRing(folder.path(), 30);
  const Outcome free = spinAndRing(folder.path(), 0);
  for (const Outcome* o : {&damped, &free}) {
    EXPECT_LT((o->after.momentum - o->before.momentum).norm(), 1e-12 * o->before.momentum.norm());
    EXPECT_LT((o->after.angular - o->before.angular).norm(), 1e-10 * o->before.angular.norm());
  }
  // The rigid part of the kinetic energy is what is left of it once the ring is gone.
  const double rigid = damped.before.kinetic - damped.vibrationBefore;
  EXPECT_NEAR(damped.after.kinetic, rigid, 0.02 * rigid);
  EXPECT_LT(damped.elasticAfter, 1e-3 * damped.vibrationBefore);
  EXPECT_GT(free.elasticAfter + free.after.kinetic - rigid, 0.3 * free.vibrationBefore);
}

}  // namespace
}  // namespace shellsim
