// The inelastic shell (gingold2004) in the world: a strip pulled apart by its grips tears
// across (fracture through faces, topology edits applied by the world, backward Euler).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "dynamics/dynamics_test_util.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

using testing::pulledInelasticStrip;

TEST(InelasticShellRun, APulledStripTearsAcrossIntoTwoHalves) {
  const SceneDef scene = pulledInelasticStrip();
  Simulation sim(scene);
  const int32_t nodesBefore = sim.nodeCount(0);
  const auto total = [&] {
    const auto m = sim.masses(0);
    return std::accumulate(m.begin(), m.end(), 0.0);
  };
  const double massBefore = total();
  sim.advanceFrames(7);  // 0.14 s: below the limit, intact
  EXPECT_EQ(sim.pieceCount(0), 1);
  EXPECT_EQ(sim.nodeCount(0), nodesBefore);
  sim.advanceFrames(8);  // to 0.3 s
  EXPECT_DOUBLE_EQ(sim.time(), 0.3);
  EXPECT_GT(sim.nodeCount(0), nodesBefore);
  EXPECT_NEAR(total(), massBefore, 1e-14 * massBefore) << "fracture conserves mass";
  // The grips end in different pieces; the crack leaves a few shards at most.
  const Geometry surface = sim.surface(0);
  ASSERT_EQ(surface.pieces.size(), static_cast<size_t>(surface.vertexCount()));
  std::set<int32_t> leftPieces, rightPieces;
  for (int32_t v = 0; v < surface.vertexCount(); ++v) {
    const double x = surface.positions[3 * static_cast<size_t>(v)];
    if (x < -0.095) leftPieces.insert(surface.pieces[static_cast<size_t>(v)]);
    if (x > 0.1) rightPieces.insert(surface.pieces[static_cast<size_t>(v)]);
  }
  ASSERT_EQ(leftPieces.size(), 1u);
  ASSERT_EQ(rightPieces.size(), 1u);
  EXPECT_NE(*leftPieces.begin(), *rightPieces.begin());
  EXPECT_LE(sim.pieceCount(0), 6);
  // Every position finite, the halves at rest apart: no node far from the strip's plane.
  for (const double p : surface.positions) EXPECT_TRUE(std::isfinite(p));
  for (int32_t v = 0; v < surface.vertexCount(); ++v) {
    EXPECT_LT(std::abs(surface.positions[3 * static_cast<size_t>(v) + 2]), 0.01);
  }
}

}  // namespace
}  // namespace shellsim
