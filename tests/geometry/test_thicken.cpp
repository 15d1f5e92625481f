// Thick-shell generation (steinemann section 3): the spatial hash, the prism and
// intersection checks, the planned depths (section 3.2.4), both propagation algorithms on
// shapes with closed-form answers, and the no-intersection check on the shared models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "core/predicates.hpp"
#include "core/spatial_hash.hpp"
#include "core/vec3.hpp"
#include "geometry/primitives.hpp"
#include "geometry/volume_sampling.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/thicken.hpp"

namespace shellsim {
namespace {

Geometry sphere(double radius, int resolution) {
  PrimitiveDef def;
  def.type = PrimitiveType::kSphere;
  def.radius = radius;
  def.resolution = resolution;
  return makePrimitive(def);
}

Geometry box(double x, double y, double z, int resolution) {
  PrimitiveDef def;
  def.type = PrimitiveType::kBox;
  def.size = {x, y, z};
  def.resolution = resolution;
  return makePrimitive(def);
}

ThickenOptions options(double depth, ThickenMethod method) {
  ThickenOptions o;
  o.depth = depth;
  o.method = method;
  return o;
}

std::vector<double> randomBoxes(int count, double spread, double maxHalf, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> centre(-spread, spread), half(0.001, maxHalf);
  std::vector<double> boxes;
  for (int i = 0; i < count; ++i) {
    double c[3], h[3];
    for (int k = 0; k < 3; ++k) {
      c[k] = centre(rng);  // negative cells too
      h[k] = half(rng);
    }
    for (int k = 0; k < 3; ++k) boxes.push_back(c[k] - h[k]);
    for (int k = 0; k < 3; ++k) boxes.push_back(c[k] + h[k]);
  }
  return boxes;
}

bool boxesOverlap(const std::vector<double>& a, size_t i, std::span<const double> b) {
  for (int k = 0; k < 3; ++k) {
    if (a[6 * i + k] > b[3 + k] || b[k] > a[6 * i + 3 + k]) return false;
  }
  return true;
}

// Each overlapping box exactly once, and no other, for queries of every size: within a
// cell, across many, and larger than the cell limit (a scan).
TEST(SpatialHash, ReportsEveryOverlapOnce) {
  const std::vector<double> boxes = randomBoxes(400, 3, 0.4, 7);
  SpatialHash hash;
  hash.build(boxes, 0.3);
  for (const double queryHalf : {0.05, 0.5, 30.0}) {
    const std::vector<double> queries = randomBoxes(200, 3, queryHalf, 11);
    int64_t overlapping = 0;
    for (size_t q = 0; q < 200; ++q) {
      const std::span<const double> query(&queries[6 * q], 6);
      std::vector<int32_t> found;
      hash.forEachOverlap(query, [&](int32_t i) { found.push_back(i); });
      std::sort(found.begin(), found.end());
      EXPECT_EQ(std::adjacent_find(found.begin(), found.end()), found.end()) << "a box came twice";
      std::vector<int32_t> expected;
      for (size_t j = 0; j < 400; ++j) {
        if (boxesOverlap(boxes, j, query)) expected.push_back(static_cast<int32_t>(j));
      }
      overlapping += static_cast<int64_t>(expected.size());
      EXPECT_EQ(found, expected) << "query " << q << " of half size " << queryHalf;
    }
    EXPECT_GT(overlapping, 20);
  }
}

TEST(SpatialHash, HugeBoxesOverflow) {
  const std::vector<double> boxes = {0, 0, 0, 1, 1, 1, -1e3, -1e3, -1e3, 1e3, 1e3, 1e3};
  SpatialHash hash;
  hash.build(boxes, 0.5);
  std::vector<int32_t> found;
  const double far[6] = {500, 500, 500, 501, 501, 501};
  hash.forEachOverlap(far, [&](int32_t i) { found.push_back(i); });
  EXPECT_EQ(found, std::vector<int32_t>{1});
  // The segment walk meets the unit box after the overflow box.
  const double origin[3] = {-2, 0.5, 0.5}, direction[3] = {1, 0, 0};
  std::vector<int32_t> met;
  hash.walkSegment(origin, direction, 5.0, [&](std::span<const int32_t> cell, double) {
    met.insert(met.end(), cell.begin(), cell.end());
    return false;
  });
  EXPECT_EQ(met.front(), 1);
  EXPECT_NE(std::find(met.begin(), met.end(), 0), met.end());
}

TEST(TrianglesIntersect, NeighboursOnlyTouch) {
  const Vec3 a{0, 0, 0}, b{1, 0, 0}, c{0, 1, 0};
  // A shared vertex, the other corners on both sides of the plane: still only touching
  // when the second triangle's interior misses the first.
  EXPECT_FALSE(trianglesIntersect(a, b, c, a, {-1, -1, 1}, {-1, -1, -1}));
  // A shared vertex and a crossing through the interior elsewhere.
  EXPECT_TRUE(trianglesIntersect(a, b, c, a, {0.5, 0.3, 1}, {0.3, 0.5, -1}));
  // A shared edge, folded: touching only.
  EXPECT_FALSE(trianglesIntersect(a, b, c, a, b, {0.3, 0.3, 1e-9}));
  // Coplanar overlap is not counted (measure zero for simulated surfaces).
  EXPECT_FALSE(trianglesIntersect(a, b, c, {0.1, 0.1, 0}, {2, 0.1, 0}, {0.1, 2, 0}));
  // Disjoint, an edge crossing the interior.
  EXPECT_FALSE(trianglesIntersect(a, b, c, {0, 0, 1}, {1, 0, 1}, {0, 1, 2}));
  EXPECT_TRUE(trianglesIntersect(a, b, c, {0.2, 0.2, -1}, {0.2, 0.2, 1}, {3, 3, 0.5}));
}

// One triangle extruded along -n by h: every labelling of its corners gives a prism that
// is not inverted; extruded along +n it is.
TEST(ShellConsistency, RightPrismIsUpright) {
  const std::vector<double> outer = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  std::vector<int32_t> labels = {0, 1, 2};
  do {
    // Triangle counter-clockwise from +z, with vertex numbers permuted: positions follow.
    std::vector<double> x(9), below(9), above(9);
    for (int k = 0; k < 3; ++k) {
      for (int d = 0; d < 3; ++d) x[3 * labels[k] + d] = outer[3 * k + d];
    }
    const std::vector<int32_t> triangle = {labels[0], labels[1], labels[2]};
    for (int i = 0; i < 3; ++i) {
      below[3 * i] = above[3 * i] = x[3 * i];
      below[3 * i + 1] = above[3 * i + 1] = x[3 * i + 1];
      below[3 * i + 2] = -0.3;
      above[3 * i + 2] = 0.3;
    }
    EXPECT_EQ(checkShellConsistency(x, below, triangle).invertedElements, 0);
    EXPECT_EQ(checkShellConsistency(x, above, triangle).invertedElements, 1);
    EXPECT_EQ(checkShellConsistency(x, x, triangle).invertedElements, 0);  // flat
    // One corner pushed through the opposite side: t' crosses t.
    std::vector<double> crossed = below;
    crossed[3 * labels[0] + 2] = 0.5;
    EXPECT_GE(checkShellConsistency(x, crossed, triangle).invertedElements, 1);
  } while (std::next_permutation(labels.begin(), labels.end()));
}

TEST(Thicken, SphereReachesFullDepthEverywhere) {
  const Geometry mesh = sphere(1.0, 20);
  for (const ThickenMethod method : {ThickenMethod::kFront, ThickenMethod::kSingleVertex}) {
    const ThickShell shell = thickenMesh(mesh, options(0.1, method));
    EXPECT_EQ(shell.intersectingPairs, 0);
    EXPECT_EQ(shell.invertedElements, 0);
    EXPECT_EQ(shell.collisions, 0);
    EXPECT_EQ(shell.thinVertices, 0);
    for (size_t i = 0; i < shell.depth.size(); ++i) {
      EXPECT_DOUBLE_EQ(shell.depth[i], 0.1);
      // Pseudo-normals of an icosphere point to the centre up to the mesh's discretisation.
      const Vec3 x = row(shell.inner, i);
      EXPECT_NEAR(x.norm(), 0.9, 2e-3);
    }
  }
}

TEST(Thicken, ThinBoxStopsShortOfTheMiddle) {
  const Geometry mesh = box(1, 1, 0.1, 12);
  for (const ThickenMethod method : {ThickenMethod::kFront, ThickenMethod::kSingleVertex}) {
    const ThickShell shell = thickenMesh(mesh, options(0.2, method));
    EXPECT_EQ(shell.intersectingPairs, 0);
    EXPECT_EQ(shell.invertedElements, 0);
    for (size_t i = 0; i < shell.depth.size(); ++i) {
      // The big faces, away from the sides: they see the opposite face 0.1 away.
      const Vec3 x = row(mesh.positions, i);
      if (std::abs(x[2]) == 0.05 && std::abs(x[0]) <= 0.3 && std::abs(x[1]) <= 0.3) {
        EXPECT_LE(shell.depth[i], 0.45 * 0.1 + 1e-12) << "vertex " << i;
      }
      // Every inner vertex inside the box.
      EXPECT_GT(windingNumber(mesh, row(shell.inner, i)), 0.5) << "vertex " << i;
    }
    EXPECT_GT(shell.meanDepth, 0.04);
  }
}

// Two parallel sheets at gap g: each vertex aims at 0.45 g (section 3.2.4, notes A4).
TEST(Thicken, FacingSheetsShareTheGap) {
  Geometry mesh = makeEquilateralLattice(6, 6, 0.1);
  const auto n = static_cast<int32_t>(mesh.positions.size() / 3);
  Geometry lower = mesh;
  const double gap = 0.05;
  for (size_t i = 0; i < lower.positions.size(); i += 3) lower.positions[i + 2] = -gap;
  // The upper sheet faces up and grows down, the lower one (reversed triangles) faces down
  // and grows up: towards each other.
  for (size_t t = 0; t < lower.triangles.size(); t += 3) {
    std::swap(lower.triangles[t + 1], lower.triangles[t + 2]);
  }
  mesh.positions.insert(mesh.positions.end(), lower.positions.begin(), lower.positions.end());
  for (const int32_t v : lower.triangles) mesh.triangles.push_back(v + n);
  // Depth 0.1 would reach through the gap; the interior vertices see the other sheet.
  const ThickShell shell = thickenMesh(mesh, options(0.1, ThickenMethod::kFront));
  EXPECT_EQ(shell.intersectingPairs, 0);
  EXPECT_EQ(shell.invertedElements, 0);
  int32_t interior = 0;
  for (int32_t i = 0; i < 2 * n; ++i) {
    const double d = shell.maxDepth[static_cast<size_t>(i)];
    if (std::abs(d - 0.45 * gap) < 1e-12) ++interior;
    EXPECT_LE(shell.depth[static_cast<size_t>(i)], 0.45 * gap + 1e-12);
  }
  EXPECT_GE(interior, 2 * 4 * 4);  // at least the inner 4 x 4 of each 6 x 6 sheet
}

// Without the planned steps and with one step per depth, the front tunnels through the
// thin box (the paper: "whole fronts may overlap in one iteration"): the inner vertices of
// the big faces end outside the box, which the local collision tests cannot see. The
// planned steps prevent it (previous test).
TEST(Thicken, FrontTunnelsWithoutPlannedSteps) {
  const Geometry mesh = box(1, 1, 0.1, 12);
  ThickenOptions o = options(0.2, ThickenMethod::kFront);
  o.precomputeSteps = false;
  o.stepsPerDepth = 1;
  const ThickShell shell = thickenMesh(mesh, o);
  int32_t outside = 0;
  for (size_t i = 0; i < shell.depth.size(); ++i) {
    if (windingNumber(mesh, row(shell.inner, i)) < 0.5 && shell.depth[i] > 0) ++outside;
  }
  EXPECT_GT(outside, 100);
}

TEST(Thicken, FrontNeedsFewerCollisionsThanSingleVertex) {
  const Geometry mesh = box(1, 1, 0.1, 16);
  ThickenOptions o = options(0.2, ThickenMethod::kFront);
  o.precomputeSteps = false;
  o.stepsPerDepth = 20;  // small enough not to tunnel: 0.01 per step, a gap of 0.1
  const ThickShell front = thickenMesh(mesh, o);
  o.method = ThickenMethod::kSingleVertex;
  const ThickShell single = thickenMesh(mesh, o);
  for (const ThickShell* shell : {&front, &single}) {
    EXPECT_EQ(shell->intersectingPairs, 0);
    EXPECT_EQ(shell->invertedElements, 0);
    EXPECT_GT(shell->collisions, 0);
  }
  EXPECT_LT(front.collisions, single.collisions);
}

TEST(Thicken, SameResultOnAnyThreadCount) {
  const Geometry mesh = box(1, 1, 0.1, 12);
  const ThickShell a = thickenMesh(mesh, options(0.2, ThickenMethod::kFront));
  ThickShell b;
  {
    const ThreadLimit limit(1);
    b = thickenMesh(mesh, options(0.2, ThickenMethod::kFront));
  }
  EXPECT_EQ(a.inner, b.inner);
  EXPECT_EQ(a.collisions, b.collisions);
  EXPECT_EQ(a.triangleTests, b.triangleTests);
}

TEST(Thicken, RejectsBadInput) {
  Geometry cloud;
  cloud.positions = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  EXPECT_THROW((void)thickenMesh(cloud, options(0.1, ThickenMethod::kFront)), InputError);
  const Geometry mesh = sphere(1, 5);
  for (const double depth : {0.0, -1.0, std::nan("")}) {
    EXPECT_THROW((void)thickenMesh(mesh, options(depth, ThickenMethod::kFront)), InputError);
  }
  ThickenOptions o = options(0.1, ThickenMethod::kFront);
  o.stepsPerDepth = 0;
  EXPECT_THROW((void)thickenMesh(mesh, o), InputError);
  o = options(0.1, ThickenMethod::kFront);
  o.gapFraction = 0.6;
  EXPECT_THROW((void)thickenMesh(mesh, o), InputError);
  // A flipped triangle: inconsistent orientation.
  Geometry flipped = mesh;
  std::swap(flipped.triangles[1], flipped.triangles[2]);
  try {
    (void)thickenMesh(flipped, options(0.1, ThickenMethod::kFront));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("thicken"), std::string::npos) << e.what();
  }
}

TEST(Thicken, GeometryHasBothSurfacesAndWalls) {
  const Geometry mesh = makeEquilateralLattice(4, 4, 0.1);
  const ThickShell shell = thickenMesh(mesh, options(0.02, ThickenMethod::kFront));
  const Geometry out = thickShellGeometry(mesh, shell);
  const size_t n = mesh.positions.size() / 3, f = mesh.triangles.size() / 3;
  EXPECT_EQ(out.positions.size(), 6 * n);
  // 12 boundary edges on a 4 x 4 lattice: 2 wall triangles each.
  EXPECT_EQ(out.triangles.size() / 3, 2 * f + 2 * 12);
  EXPECT_EQ(analyzeTopology(out).boundaryEdgeCount, 0);  // closed: S, S' and the walls
}

// The shared models at three depths each: no intersection, no inverted prism. Thin parts
// (ears, legs, the teapot's spout and handle) end thinner.
class ThickenModelsSlow : public ::testing::TestWithParam<const char*> {};

TEST_P(ThickenModelsSlow, NoIntersectionAtThreeDepths) {
  Geometry mesh = readGeometry(std::string(SHELLSIM_DATA_DIR) + "/" + GetParam());
  (void)removeUnreferencedVertices(mesh);
  const MeshTopology topology = analyzeTopology(mesh);
  for (const double fraction : {0.5, 2.0, 8.0}) {
    const double depth = fraction * topology.medianEdgeLength;
    const ThickShell shell = thickenMesh(mesh, options(depth, ThickenMethod::kFront));
    EXPECT_EQ(shell.intersectingPairs, 0) << GetParam() << " at depth " << depth;
    EXPECT_EQ(shell.invertedElements, 0) << GetParam() << " at depth " << depth;
    // Half an edge deep most of the surface reaches the depth (the teapot least, 0.65: where
    // its spout, handle and lid cross its body, 151 triangle pairs, the shell stays at 0);
    // 8 edges deep is more than the legs, ears, spout and handle hold.
    if (fraction == 0.5) {
      EXPECT_GT(shell.meanDepth, 0.6 * depth) << GetParam();
    }
    if (fraction == 8.0) {
      EXPECT_GT(shell.thinVertices, 0) << GetParam();
    }
    EXPECT_GT(shell.meanDepth, 0.0) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ThickenModelsSlow,
                         ::testing::Values("cow.obj", "stanford-bunny.obj", "teapot.obj"));

// The cow at one depth in the default run.
TEST(Thicken, CowHasNoIntersection) {
  const Geometry mesh = readGeometry(std::string(SHELLSIM_DATA_DIR) + "/cow.obj");
  const ThickShell shell = thickenMesh(mesh, options(0.3, ThickenMethod::kFront));
  EXPECT_EQ(shell.intersectingPairs, 0);
  EXPECT_EQ(shell.invertedElements, 0);
  EXPECT_GT(shell.thinVertices, 0);  // legs, ears and horns
  // The thin vertices in regions, the largest first, each at most epsilon deep.
  ASSERT_FALSE(shell.thinRegions.empty());
  int32_t inRegions = 0;
  for (size_t r = 0; r < shell.thinRegions.size(); ++r) {
    const ThickShell::ThinRegion& region = shell.thinRegions[r];
    inRegions += region.vertices;
    EXPECT_GE(region.thinnest, 0.0);
    EXPECT_LT(region.thinnest, 0.99 * 0.3);
    if (r > 0) {
      EXPECT_LE(region.vertices, shell.thinRegions[r - 1].vertices);
    }
  }
  EXPECT_EQ(inRegions, shell.thinVertices);
  EXPECT_GT(shell.meanDepth, 0.15);
}

}  // namespace
}  // namespace shellsim
