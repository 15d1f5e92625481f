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
  // The strip's two ends (its outermost columns, held by the grips) end in different
  // pieces; the crack leaves a few shards at most. (Which faces break near the crack differs
  // between builds with and without AVX-512: a shard may hold a node of a grip, so the test
  // looks at the ends, not at whole grips.)
  const Geometry surface = sim.surface(0);
  ASSERT_EQ(surface.pieces.size(), static_cast<size_t>(surface.vertexCount()));
  double lowest = 1, highest = -1;
  for (int32_t v = 0; v < surface.vertexCount(); ++v) {
    lowest = std::min(lowest, surface.positions[3 * static_cast<size_t>(v)]);
    highest = std::max(highest, surface.positions[3 * static_cast<size_t>(v)]);
  }
  std::set<int32_t> leftPieces, rightPieces;
  for (int32_t v = 0; v < surface.vertexCount(); ++v) {
    const double x = surface.positions[3 * static_cast<size_t>(v)];
    if (x < lowest + 1e-6) leftPieces.insert(surface.pieces[static_cast<size_t>(v)]);
    if (x > highest - 1e-6) rightPieces.insert(surface.pieces[static_cast<size_t>(v)]);
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
