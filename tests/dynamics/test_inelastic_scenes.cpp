// The gingold2004 example scenes, coarsened, hold what their figures' captions say.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "shellsim/models/inelastic_shell.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;

// The largest plastic strain on the body's surface (the frames' plastic_strain).
double largestPlasticStrain(const Simulation& sim) {
  const Geometry surface = sim.surface(0);
  for (const VertexScalar& scalar : surface.vertexScalars) {
    if (scalar.name == "plastic_strain")
      return *std::max_element(scalar.values.begin(), scalar.values.end());
  }
  return 0.0;
}

// Fig. 12: "an elastoplastic tube as it falls, dents, and bounces off boxes". At half the
// scene's resolution, 60 ms: the tube yields where it hits the box edge, keeps that strain
// after leaving it, and leaves upward with a share of its impact energy; no node sinks
// into the box by more than the tube's thickness.
TEST(InelasticScenes, TubeDentsAndBounces) {
  SceneDef scene = loadScene(fs::path(SHELLSIM_SOURCE_DIR) / "scenes" / "inelastic_tube_drop.json");
  scene.bodies[0].primitive->resolution = 20;
  Simulation sim(scene);
  const double boxTop = 0.08;
  double lowest = 1;
  double impactKinetic = sim.energies(0).kinetic;
  for (int k = 0; k < 12; ++k) {
    sim.advance(0.005);
    const std::span<const double> x = sim.positions(0);
    for (size_t i = 0; i < x.size() / 3; ++i) {
      if (std::abs(x[3 * i]) < 0.08 && std::abs(x[3 * i + 1]) < 0.03)
        lowest = std::min(lowest, x[3 * i + 2]);
    }
  }
  const double yieldStrain = *scene.bodies[0].options<InelasticShellDef>().yieldStrain;
  EXPECT_GT(largestPlasticStrain(sim), 0.5 * yieldStrain);  // a dent, kept after the impact
  const std::span<const double> v = sim.velocities(0);
  const std::span<const double> m = sim.masses(0);
  double momentum = 0, mass = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    momentum += m[i] * v[3 * i + 2];
    mass += m[i];
  }
  EXPECT_GT(momentum / mass, 0.3);  // m/s upward: it bounced (it arrived at 3.13 m/s)
  const double kinetic = sim.energies(0).kinetic;
  EXPECT_LT(kinetic, impactKinetic);  // the dent and the floor's damping took their share
  EXPECT_GT(kinetic, 0.1 * impactKinetic);
  EXPECT_GT(lowest, boxTop - scene.bodies[0].material.thickness);
}

}  // namespace
}  // namespace shellsim
