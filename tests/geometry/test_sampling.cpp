// Point areas and simulation nodes by clustering (Pauly, Gross, Kobbelt 2002, as used by
// Wicke et al. 2005, section 5): counts, areas, uniformity, thin parts, orientation,
// determinism, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "geometry/primitives.hpp"
#include "geometry/sampling.hpp"
#include "last_place.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"

namespace shellsim {
namespace {

double meshArea(const Geometry& g) {
  double area = 0;
  const auto& p = g.positions;
  for (size_t t = 0; t < g.triangles.size(); t += 3) {
    const double* a = &p[3 * static_cast<size_t>(g.triangles[t])];
    const double* b = &p[3 * static_cast<size_t>(g.triangles[t + 1])];
    const double* c = &p[3 * static_cast<size_t>(g.triangles[t + 2])];
    const double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    const double e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    const double x[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                         e1[0] * e2[1] - e1[1] * e2[0]};
    area += 0.5 * std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
  }
  return area;
}

double sum(const std::vector<double>& values) {
  double total = 0;
  for (double v : values) total += v;
  return total;
}

// Distance from each node to its nearest other node, (nNodes); brute force.
std::vector<double> nearestNodeDistances(const NodeSampling& nodes) {
  const auto count = static_cast<size_t>(nodes.nodeCount());
  std::vector<double> nearest(count, std::numeric_limits<double>::infinity());
  for (size_t a = 0; a < count; ++a) {
    for (size_t b = 0; b < count; ++b) {
      if (a == b) continue;
      double d2 = 0;
      for (size_t d = 0; d < 3; ++d) {
        const double diff = nodes.positions[3 * a + d] - nodes.positions[3 * b + d];
        d2 += diff * diff;
      }
      nearest[a] = std::min(nearest[a], std::sqrt(d2));
    }
  }
  return nearest;
}

// Structural invariants every sampling must satisfy.
void expectConsistent(const Geometry& surface, const NodeSampling& nodes) {
  const auto count = static_cast<size_t>(nodes.nodeCount());
  ASSERT_GT(count, 0u);
  ASSERT_EQ(nodes.positions.size(), 3 * count);
  ASSERT_EQ(nodes.normals.size(), 3 * count);
  ASSERT_EQ(nodes.sourcePoint.size(), count);
  ASSERT_EQ(nodes.clusterOfPoint.size(), static_cast<size_t>(surface.vertexCount()));
  std::vector<int> members(count, 0);
  for (int32_t c : nodes.clusterOfPoint) {
    ASSERT_GE(c, 0);
    ASSERT_LT(static_cast<size_t>(c), count);
    ++members[static_cast<size_t>(c)];
  }
  for (size_t c = 0; c < count; ++c) {
    EXPECT_GT(members[c], 0) << "node " << c << " has no member";
    const auto source = static_cast<size_t>(nodes.sourcePoint[c]);
    EXPECT_EQ(nodes.clusterOfPoint[source], static_cast<int32_t>(c));
    for (size_t d = 0; d < 3; ++d) {
      EXPECT_EQ(nodes.positions[3 * c + d], surface.positions[3 * source + d]);
    }
    const double length =
        std::hypot(nodes.normals[3 * c], nodes.normals[3 * c + 1], nodes.normals[3 * c + 2]);
    EXPECT_NEAR(length, 1.0, 1e-12);
  }
}

Geometry sheet(int resolution) {
  PrimitiveDef def;
  def.type = PrimitiveType::kSheet;
  def.size = {1, 1, 1};
  def.resolution = resolution;
  return makePrimitive(def);
}

TEST(SamplingPointAreas, SphereMeshSumsToMeshArea) {
  PrimitiveDef def;
  def.type = PrimitiveType::kSphere;
  def.radius = 0.5;
  def.resolution = 40;
  const Geometry sphere = makePrimitive(def);
  const std::vector<double> areas = pointAreas(sphere);
  ASSERT_EQ(areas.size(), static_cast<size_t>(sphere.vertexCount()));
  EXPECT_NEAR(sum(areas), meshArea(sphere), 1e-12 * meshArea(sphere));
  for (double a : areas) EXPECT_GT(a, 0);
}

// The sheet primitive's diagonals alternate, so a third of each triangle gives its vertices
// 4/3 and 2/3 of a cell in a checkerboard; the Voronoi areas are the cells (a half at an
// edge, a quarter at a corner) whatever the diagonals.
TEST(SamplingVoronoiAreas, GridVerticesGetTheirCellsWhateverTheDiagonals) {
  const Geometry s = sheet(8);
  const double cell = 1.0 / 64;
  const std::vector<double> barycentric = pointAreas(s);
  const std::vector<double> voronoi = voronoiAreas(s);
  ASSERT_EQ(voronoi.size(), barycentric.size());
  EXPECT_NEAR(sum(voronoi), 1.0, 1e-12);
  double smallest = 1, largest = 0;
  for (size_t v = 0; v < voronoi.size(); ++v) {
    const int onEdges = (std::abs(std::abs(s.positions[3 * v]) - 0.5) < 1e-9 ? 1 : 0) +
                        (std::abs(std::abs(s.positions[3 * v + 1]) - 0.5) < 1e-9 ? 1 : 0);
    EXPECT_NEAR(voronoi[v], cell / (1 << onEdges), 1e-15) << "vertex " << v;
    if (onEdges == 0) {
      smallest = std::min(smallest, barycentric[v]);
      largest = std::max(largest, barycentric[v]);
    }
  }
  EXPECT_NEAR(smallest, 2 * cell / 3, 1e-15);
  EXPECT_NEAR(largest, 4 * cell / 3, 1e-15);
}

// An obtuse triangle gives half its area to the obtuse corner and a quarter to each other
// (its Voronoi parts would reach outside it); an equilateral one a third to each; a right
// one its Voronoi parts, 1/8 (|PQ|^2 cot R + |PR|^2 cot Q) at corner P.
TEST(SamplingVoronoiAreas, ObtuseTrianglesSplitByHalvesAndQuarters) {
  Geometry obtuse;
  obtuse.positions = {0, 0, 0, 4, 0, 0, 2, 0.5, 0};
  obtuse.triangles = {0, 1, 2};
  const std::vector<double> a = voronoiAreas(obtuse);
  EXPECT_NEAR(a[2], 0.5, 1e-15);  // area 1
  EXPECT_NEAR(a[0], 0.25, 1e-15);
  EXPECT_NEAR(a[1], 0.25, 1e-15);
  Geometry equilateral;
  equilateral.positions = {0, 0, 0, 1, 0, 0, 0.5, std::sqrt(3.0) / 2, 0};
  equilateral.triangles = {0, 1, 2};
  for (const double area : voronoiAreas(equilateral)) {
    EXPECT_NEAR(area, std::sqrt(3.0) / 12, 1e-15);
  }
  // Legs 1 and 2: the right corner 1/8 (1 * 2 + 4 * 1/2) = 1/2, the others 1/8 (1 * 2 + 5 * 0)
  // and 1/8 (4 * 1/2 + 5 * 0) = 1/4.
  Geometry right;
  right.positions = {0, 0, 0, 1, 0, 0, 0, 2, 0};
  right.triangles = {0, 1, 2};
  const std::vector<double> r = voronoiAreas(right);
  EXPECT_NEAR(r[0], 0.5, 1e-15);
  EXPECT_NEAR(r[1], 0.25, 1e-15);
  EXPECT_NEAR(r[2], 0.25, 1e-15);
}

// On a regular grid the tangent-plane Voronoi cell of an interior point is the grid cell.
TEST(SamplingPointAreas, CloudOfRegularGridIsExactInside) {
  Geometry cloud = sheet(32);
  cloud.triangles.clear();
  const double h = 1.0 / 32;
  for (const bool withNormals : {true, false}) {
    if (!withNormals) cloud.normals.clear();
    const std::vector<double> areas = pointAreas(cloud);
    double interior = 0;
    for (size_t i = 0; i < areas.size(); ++i) {
      const double x = cloud.positions[3 * i];
      const double y = cloud.positions[3 * i + 1];
      if (std::abs(x) < 0.5 - 1e-9 && std::abs(y) < 0.5 - 1e-9) {
        EXPECT_NEAR(areas[i], h * h, 1e-12) << "point " << i;
        interior += areas[i];
      }
    }
    EXPECT_NEAR(interior, 31.0 * 31.0 * h * h, 1e-9);
    // Boundary cells reach r_k / 2 (about 1.1 h here) past the last sample (documented), so
    // the total exceeds the sheet's area by about the perimeter times 1.1 h.
    EXPECT_GT(sum(areas), 1.0);
    EXPECT_LT(sum(areas), 1.0 + 5 * 1.0 * h);
  }
}

// Uniformity bound: on a 1 x 1 sheet the farthest-apart node's nearest neighbour is at most
// this many times as far as the closest pair's (a square grid would give 1, random points
// far more than 10).
constexpr double kSheetSpacingRatioBound = 2.0;

TEST(ClusterSurface, SheetTo100NodesIsUniform) {
  const Geometry s = sheet(64);
  const NodeSampling nodes = clusterSurface(s, {.targetNodeCount = 100});
  expectConsistent(s, nodes);
  EXPECT_GE(nodes.nodeCount(), 90);
  EXPECT_LE(nodes.nodeCount(), 110);
  EXPECT_NEAR(sum(nodes.areas), 1.0, 1e-12);
  for (size_t c = 0; c < static_cast<size_t>(nodes.nodeCount()); ++c) {
    EXPECT_EQ(nodes.positions[3 * c + 2], 0.0);
    EXPECT_EQ(nodes.normals[3 * c + 2], 1.0);
  }
  const std::vector<double> nearest = nearestNodeDistances(nodes);
  const auto [lo, hi] = std::minmax_element(nearest.begin(), nearest.end());
  RecordProperty("spacingRatio", std::to_string(*hi / *lo));
  EXPECT_LT(*hi / *lo, kSheetSpacingRatioBound) << "min " << *lo << " max " << *hi;
  // Cluster areas stay within a factor of 3 of each other.
  const auto [aLo, aHi] = std::minmax_element(nodes.areas.begin(), nodes.areas.end());
  EXPECT_LT(*aHi / *aLo, 3.0);
}

// Rounding does not choose the nodes (core/tie_grid.hpp): a symmetric surface clustered as it
// is and with every coordinate moved by a few units in the last place (as a build with fused
// multiply-adds or other vector widths rounds its sums differently) gives the same nodes.
// Before the ties were decided on the tie grid, fiber_balloon's sphere kept 51 of its 1,170
// nodes between the native and the portable build; with those comparisons, moved by 1 and 4
// units this sheet's nodes differed in 400 and 396 of 400, the sphere's in 1,166 and 1,164
// of 1,170.
TEST(ClusterSurface, RoundingDoesNotChooseTheNodesOfASymmetricSurface) {
  PrimitiveDef ball;
  ball.type = PrimitiveType::kSphere;
  ball.radius = 0.12;
  ball.resolution = 248;
  const std::vector<std::pair<Geometry, int32_t>> cases = {{sheet(80), 400},
                                                           {makePrimitive(ball), 1170}};
  for (const auto& [surface, count] : cases) {
    const NodeSampling nodes = clusterSurface(surface, {.targetNodeCount = count});
    for (const int unitsInTheLastPlace : {1, 4}) {
      Geometry nudged = surface;
      testing::moveByUnitsInTheLastPlace(nudged.positions, unitsInTheLastPlace, 12345);
      const NodeSampling moved = clusterSurface(nudged, {.targetNodeCount = count});
      ASSERT_EQ(moved.nodeCount(), nodes.nodeCount());
      int differing = 0;
      for (size_t c = 0; c < static_cast<size_t>(nodes.nodeCount()); ++c) {
        differing += moved.sourcePoint[c] != nodes.sourcePoint[c] ? 1 : 0;
      }
      EXPECT_EQ(differing, 0) << count << " nodes, coordinates moved by up to "
                              << unitsInTheLastPlace << " units in the last place";
    }
  }
}

TEST(ClusterSurface, SpacingModeGivesThatSpacing) {
  const Geometry s = sheet(64);
  for (const double spacing : {0.1, 0.2}) {
    const NodeSampling nodes = clusterSurface(s, {.spacing = spacing});
    expectConsistent(s, nodes);
    std::vector<double> nearest = nearestNodeDistances(nodes);
    std::sort(nearest.begin(), nearest.end());
    const double median = nearest[nearest.size() / 2];
    EXPECT_GT(median, 0.8 * spacing) << nodes.nodeCount() << " nodes";
    EXPECT_LT(median, 1.25 * spacing) << nodes.nodeCount() << " nodes";
  }
}

// The two faces of a thin plate are 0.02 apart, far less than a cluster is wide; no cluster
// may hold points of both (their normals are opposite).
void expectFacesSeparate(const Geometry& box, const NodeSampling& nodes) {
  const auto count = static_cast<size_t>(nodes.nodeCount());
  std::vector<char> hasTop(count, 0), hasBottom(count, 0);
  for (size_t i = 0; i < static_cast<size_t>(box.vertexCount()); ++i) {
    const auto c = static_cast<size_t>(nodes.clusterOfPoint[i]);
    if (box.normals[3 * i + 2] > 0.9) hasTop[c] = 1;
    if (box.normals[3 * i + 2] < -0.9) hasBottom[c] = 1;
  }
  int mixed = 0;
  for (size_t c = 0; c < count; ++c) mixed += hasTop[c] && hasBottom[c];
  EXPECT_EQ(mixed, 0);
}

TEST(ClusterSurface, ThinBoxNeverMixesTopAndBottom) {
  PrimitiveDef def;
  def.type = PrimitiveType::kBox;
  def.size = {1, 1, 0.02};
  def.resolution = 100;
  const Geometry box = makePrimitive(def);
  for (const int32_t target : {50, 400}) {
    const NodeSampling nodes = clusterSurface(box, {.targetNodeCount = target});
    expectConsistent(box, nodes);
    EXPECT_NEAR(sum(nodes.areas), meshArea(box), 1e-9);
    expectFacesSeparate(box, nodes);
    EXPECT_GE(nodes.nodeCount(), target * 9 / 10);
    EXPECT_LE(nodes.nodeCount(), target * 11 / 10);
  }
  // The same as a point cloud with normals (tangent-plane areas, no triangles).
  Geometry cloud = box;
  cloud.triangles.clear();
  const NodeSampling nodes = clusterSurface(cloud, {.targetNodeCount = 200});
  expectConsistent(cloud, nodes);
  expectFacesSeparate(box, nodes);
}

Geometry readBunny() {
  const std::filesystem::path path =
      std::filesystem::path(SHELLSIM_DATA_DIR) / "stanford-bunny.obj";
  if (!std::filesystem::exists(path)) return {};
  Geometry bunny = readGeometry(path);
  bunny.normals.clear();  // use the mesh's own area-weighted normals
  return bunny;
}

TEST(ClusterSurface, BunnyNodesPointOutward) {
  const Geometry bunny = readBunny();
  if (bunny.positions.empty()) GTEST_SKIP() << "stanford-bunny.obj not found";
  const NodeSampling nodes = clusterSurface(bunny, {.targetNodeCount = 1000});
  expectConsistent(bunny, nodes);
  RecordProperty("bunnyNodes", std::to_string(nodes.nodeCount()));
  EXPECT_GE(nodes.nodeCount(), 900);
  EXPECT_LE(nodes.nodeCount(), 1100);
  EXPECT_NEAR(sum(nodes.areas), meshArea(bunny), 1e-9 * meshArea(bunny));

  // Reference: area-weighted vertex normals of the mesh, summed per cluster with the
  // barycentric areas.
  Geometry withNormals = bunny;
  computeVertexNormals(withNormals);
  const std::vector<double> areas = pointAreas(bunny);
  std::vector<double> reference(nodes.normals.size(), 0.0);
  for (size_t i = 0; i < areas.size(); ++i) {
    const auto c = static_cast<size_t>(nodes.clusterOfPoint[i]);
    for (size_t d = 0; d < 3; ++d)
      reference[3 * c + d] += areas[i] * withNormals.normals[3 * i + d];
  }
  int inward = 0;
  for (size_t c = 0; c < static_cast<size_t>(nodes.nodeCount()); ++c) {
    double dot = 0;
    for (size_t d = 0; d < 3; ++d) dot += reference[3 * c + d] * nodes.normals[3 * c + d];
    inward += dot <= 0;
  }
  EXPECT_EQ(inward, 0);
}

void expectIdentical(const NodeSampling& a, const NodeSampling& b) {
  EXPECT_EQ(a.positions, b.positions);  // bit-identical, not merely close
  EXPECT_EQ(a.normals, b.normals);
  EXPECT_EQ(a.areas, b.areas);
  EXPECT_EQ(a.clusterOfPoint, b.clusterOfPoint);
  EXPECT_EQ(a.sourcePoint, b.sourcePoint);
}

TEST(ClusterSurface, SameResultForOneAndTwoThreads) {
  Geometry bunny = readBunny();
  if (bunny.positions.empty()) bunny = sheet(64);
  // A point cloud without normals goes through estimateNormals and the Voronoi areas.
  PrimitiveDef def;
  def.type = PrimitiveType::kSphere;
  def.resolution = 60;
  Geometry cloud = makePrimitive(def);
  cloud.triangles.clear();
  cloud.normals.clear();
  for (const Geometry* g : {&bunny, &cloud}) {
    NodeSampling one, two;
    {
      const ThreadLimit limit(1);
      one = clusterSurface(*g, {.targetNodeCount = 500});
    }
    {
      const ThreadLimit limit(2);
      two = clusterSurface(*g, {.targetNodeCount = 500});
    }
    expectIdentical(one, two);
  }
}

TEST(ClusterSurface, TargetAbovePointCountMakesEveryPointANode) {
  const Geometry s = sheet(4);  // 25 vertices
  const NodeSampling nodes = clusterSurface(s, {.targetNodeCount = 1000});
  expectConsistent(s, nodes);
  ASSERT_EQ(nodes.nodeCount(), 25);
  for (int32_t i = 0; i < 25; ++i) EXPECT_EQ(nodes.sourcePoint[static_cast<size_t>(i)], i);
  EXPECT_EQ(nodes.areas, pointAreas(s));
  // A spacing finer than the points does the same.
  EXPECT_EQ(clusterSurface(s, {.spacing = 1e-3}).nodeCount(), 25);
  // A spacing wider than the sheet leaves one node.
  EXPECT_EQ(clusterSurface(s, {.spacing = 10}).nodeCount(), 1);
}

TEST(ClusterSurface, RejectsBadInput) {
  const Geometry s = sheet(4);
  EXPECT_THROW((void)clusterSurface(Geometry{}, {.targetNodeCount = 10}), InputError);
  EXPECT_THROW((void)pointAreas(Geometry{}), InputError);
  EXPECT_THROW((void)clusterSurface(s, {}), InputError);  // neither
  EXPECT_THROW((void)clusterSurface(s, {.targetNodeCount = 10, .spacing = 0.1}), InputError);
  EXPECT_THROW((void)clusterSurface(s, {.targetNodeCount = -1}), InputError);
  EXPECT_THROW((void)clusterSurface(s, {.spacing = -0.1}), InputError);
  EXPECT_THROW((void)clusterSurface(s, {.spacing = std::nan("")}), InputError);
  EXPECT_THROW((void)clusterSurface(s, {.spacing = std::numeric_limits<double>::infinity()}),
               InputError);

  Geometry nanPoint = s;
  nanPoint.positions[7] = std::nan("");
  EXPECT_THROW((void)clusterSurface(nanPoint, {.targetNodeCount = 10}), InputError);
  Geometry ragged = s;
  ragged.positions.pop_back();
  EXPECT_THROW((void)clusterSurface(ragged, {.targetNodeCount = 10}), InputError);
  Geometry badNormals = s;
  badNormals.normals.resize(6);
  EXPECT_THROW((void)clusterSurface(badNormals, {.targetNodeCount = 10}), InputError);
  Geometry zeroNormal = s;
  zeroNormal.normals[3] = zeroNormal.normals[4] = zeroNormal.normals[5] = 0;
  EXPECT_THROW((void)clusterSurface(zeroNormal, {.targetNodeCount = 10}), InputError);
  Geometry badTriangle = s;
  badTriangle.triangles[4] = 25;
  EXPECT_THROW((void)clusterSurface(badTriangle, {.targetNodeCount = 10}), InputError);
  EXPECT_THROW((void)pointAreas(badTriangle), InputError);
  Geometry twoPoints;
  twoPoints.positions = {0, 0, 0, 1, 0, 0};
  EXPECT_THROW((void)clusterSurface(twoPoints, {.targetNodeCount = 1}), InputError);
  // A mesh of zero area cannot be given a spacing.
  Geometry flat;
  flat.positions = {0, 0, 0, 1, 0, 0, 2, 0, 0};
  flat.triangles = {0, 1, 2};
  EXPECT_THROW((void)clusterSurface(flat, {.spacing = 0.1}), InputError);
}

// Igea (134,345 points) to about 1,000 and 10,000 nodes: the count is met within 10% and the
// time is recorded (the brief asks for well under 2 s each in Release; not asserted here, as
// sanitizer and debug builds run the same test).
TEST(ClusterSurface, IgeaCountsAndTime) {
  const std::filesystem::path path = std::filesystem::path(SHELLSIM_DATA_DIR) / "igea.ply";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const Geometry igea = readGeometry(path);
  for (const int32_t target : {1000, 10000}) {
    const auto start = std::chrono::steady_clock::now();
    const NodeSampling nodes = clusterSurface(igea, {.targetNodeCount = target});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty("igea" + std::to_string(target) + "Seconds", std::to_string(seconds));
    RecordProperty("igea" + std::to_string(target) + "Nodes", std::to_string(nodes.nodeCount()));
    std::printf("igea target %d: %d nodes in %.3f s\n", target, nodes.nodeCount(), seconds);
    expectConsistent(igea, nodes);
    EXPECT_GE(nodes.nodeCount(), target * 9 / 10);
    EXPECT_LE(nodes.nodeCount(), target * 11 / 10);
  }
}

}  // namespace
}  // namespace shellsim
