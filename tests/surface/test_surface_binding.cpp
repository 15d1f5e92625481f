// High-resolution surface binding (wicke2005 section 6): rigid motion, node reproduction,
// stretch, bending, determinism, cracks and degenerate input.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <Eigen/Geometry>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "surface/surface_binding.hpp"

namespace shellsim {
namespace {

Vec3 row(const std::vector<double>& flat, size_t i) {
  return {flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
}

// side x side nodes of spacing h in z = 0, corner at the origin, jittered by `jitter` * h
// in the plane.
std::vector<double> gridNodes(int side, double h, double jitter = 0, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-jitter * h, jitter * h);
  std::vector<double> nodes;
  for (int j = 0; j < side; ++j) {
    for (int i = 0; i < side; ++i) nodes.insert(nodes.end(), {h * i + u(rng), h * j + u(rng), 0.0});
  }
  return nodes;
}

// m x m vertex mesh over [0, size]^2 in z = 0, normals +z; quad (i, j) is split by the
// diagonal (i, j) - (i + 1, j + 1). The grid is offset by `offset` in x and y.
Geometry sheetMesh(int m, double size, double offset = 0) {
  Geometry g;
  const double step = size / (m - 1);
  for (int j = 0; j < m; ++j) {
    for (int i = 0; i < m; ++i) {
      g.positions.insert(g.positions.end(), {offset + step * i, offset + step * j, 0.0});
      g.normals.insert(g.normals.end(), {0.0, 0.0, 1.0});
    }
  }
  for (int j = 0; j + 1 < m; ++j) {
    for (int i = 0; i + 1 < m; ++i) {
      const int a = j * m + i, b = a + 1, c = a + m + 1, d = a + m;
      g.triangles.insert(g.triangles.end(), {a, b, c, a, c, d});
    }
  }
  return g;
}

// Lifts z = 0 points onto the paraboloid z = kappa (x^2 + y^2) / 2 and sets the normals.
void liftToParaboloid(std::vector<double>& positions, std::vector<double>* normals, double kappa) {
  for (size_t i = 0; i < positions.size() / 3; ++i) {
    const double x = positions[3 * i], y = positions[3 * i + 1];
    positions[3 * i + 2] = 0.5 * kappa * (x * x + y * y);
    if (normals != nullptr) {
      const Vec3 n = Vec3(-kappa * x, -kappa * y, 1.0).normalized();
      for (int d = 0; d < 3; ++d) (*normals)[3 * i + d] = n[d];
    }
  }
}

struct Rigid {
  Eigen::Matrix3d rotation;
  Vec3 translation;
  [[nodiscard]] std::vector<double> apply(const std::vector<double>& p,
                                          bool isVector = false) const {
    std::vector<double> out(p.size());
    for (size_t i = 0; i < p.size() / 3; ++i) {
      const Vec3 q = rotation * row(p, i) + (isVector ? Vec3::Zero() : translation);
      for (int d = 0; d < 3; ++d) out[3 * i + d] = q[d];
    }
    return out;
  }
};

Rigid someRigidMotion() {
  return {Eigen::AngleAxisd(2.1, Vec3(0.3, -0.5, 0.8).normalized()).toRotationMatrix(),
          Vec3(0.7, -1.3, 2.9)};
}

double maxDistance(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() / 3; ++i) worst = std::max(worst, (row(a, i) - row(b, i)).norm());
  return worst;
}

bool allFinite(const Geometry& g) {
  return std::all_of(g.positions.begin(), g.positions.end(),
                     [](double v) { return std::isfinite(v); }) &&
         std::all_of(g.normals.begin(), g.normals.end(), [](double v) { return std::isfinite(v); });
}

TEST(SurfaceBinding, RigidMotionMovesPointsAndNormalsExactly) {
  const double h = 0.1;
  std::vector<double> nodes = gridNodes(12, h, 0.2);
  liftToParaboloid(nodes, nullptr, 1.5);
  Geometry dense = sheetMesh(45, 11 * h, 0.003);
  liftToParaboloid(dense.positions, &dense.normals, 1.5);
  const SurfaceBinding binding(nodes, dense);
  EXPECT_EQ(binding.translationCount(), 0);
  const Rigid motion = someRigidMotion();
  const Geometry moved = binding.deform(motion.apply(nodes));
  const double scale = 11 * h + motion.translation.norm();
  EXPECT_LE(maxDistance(moved.positions, motion.apply(dense.positions)), 1e-12 * scale);
  EXPECT_LE(maxDistance(moved.normals, motion.apply(dense.normals, true)), 1e-12);
  EXPECT_EQ(moved.triangles, dense.triangles);
  // At rest the surface is reproduced too.
  const Geometry rest = binding.deform(nodes);
  EXPECT_LE(maxDistance(rest.positions, dense.positions), 1e-13);
  EXPECT_LE(maxDistance(rest.normals, dense.normals), 1e-13);
}

TEST(SurfaceBinding, NodesAsPassivePointsFollowTheNodes) {
  const std::vector<double> nodes = gridNodes(10, 0.1, 0.25);
  Geometry cloud;
  cloud.positions = nodes;  // a point cloud without normals
  const SurfaceBinding binding(nodes, cloud);
  std::vector<double> x = nodes;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-0.03, 0.03);
  for (double& v : x) v += u(rng);  // a non-rigid deformation
  const Geometry moved = binding.deform(x);
  EXPECT_TRUE(moved.normals.empty());
  ASSERT_EQ(moved.positions.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(moved.positions[i], x[i]) << i;
}

// In-plane stretch by s: each frame of eq. (17) stretches along e^1 only (e^2, e^3 are
// normalised), so a frame's error is (s - 1) times the part of c - p_0 across e^1, and the
// blend's error is at most (s - 1) |c - p_0| (what translating with p_0 alone would give).
// The blend of differently oriented frames must do clearly better: on average below 60%
// of that bound (measured 37%), with the points kept exactly in the plane.
TEST(SurfaceBinding, InPlaneAffineMotionIsExact) {
  // A flat sheet stretched 1.8 times along x, 0.9 along y, sheared by 0.3 and moved: the
  // dense surface follows exactly (e^2' carried by the least-squares map, see the header).
  // The paper's e^2' = N' x e^1' / |e^1'| of unit length was off by up to 0.6 node spacings
  // under such a stretch (measured before the change); under an isotropic stretch of 1.1 its
  // error was bounded by 0.1 times the distance to the nearest node, and not zero.
  const double h = 0.1;
  const std::vector<double> nodes = gridNodes(12, h, 0.15);
  const Geometry dense = sheetMesh(50, 11 * h, 0.001);
  const SurfaceBinding binding(nodes, dense);
  const auto affine = [](const Vec3& p) {
    return Vec3(1.8 * p.x() + 0.3 * p.y() + 0.05, 0.9 * p.y() - 0.02, 0.1);
  };
  std::vector<double> x = nodes;
  for (size_t i = 0; i < x.size() / 3; ++i) setRow(x, i, affine(row(nodes, i)));
  const Geometry moved = binding.deform(x);
  double worst = 0;
  for (int32_t v = 0; v < binding.vertexCount(); ++v) {
    const auto i = static_cast<size_t>(v);
    worst = std::max(worst, (row(moved.positions, i) - affine(row(dense.positions, i))).norm());
    EXPECT_NEAR(row(moved.normals, i).z(), 1.0, 1e-14);
  }
  EXPECT_LT(worst, 1e-12 * 11 * h);
}

// Nodes rolled onto a cylinder of radius R (arc length kept). The surface between nodes is
// interpolated from chords: its distance from the cylinder is of the order of a chord's
// sagitta, (2h)^2 / (8 R) for the frames' longest edges ~2h; we require 0.5 h^2 / R (measured
// 0.24). Normals turn with the tangent maps at the nodes (quadratic fits), blended with the
// weights of eq. (21): blending directions that differ by ~ h / R between nodes leaves a
// fraction of h / R. We require 0.5 h / R at least 2 h inside the sheet (measured 0.28) and
// 0.75 h / R everywhere (measured 0.49 at the edges, where the regularised fit is one-sided;
// a linear fit there gave 0.99).
TEST(SurfaceBinding, BentSheetStaysNearTheCylinder) {
  const double h = 0.05, radius = 0.4;
  const std::vector<double> nodes = gridNodes(16, h, 0.1);
  const Geometry dense = sheetMesh(61, 15 * h, 0.0);
  const SurfaceBinding binding(nodes, dense);
  const auto roll = [&](const Vec3& p) {
    return Vec3(radius * std::sin(p.x() / radius), p.y(),
                radius - radius * std::cos(p.x() / radius));
  };
  std::vector<double> x = nodes;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const Vec3 q = roll(row(nodes, i));
    for (int d = 0; d < 3; ++d) x[3 * i + d] = q[d];
  }
  const Geometry moved = binding.deform(x);
  double worstDistance = 0, worstAngle = 0, worstInteriorAngle = 0;
  for (size_t i = 0; i < moved.positions.size() / 3; ++i) {
    const Vec3 p = row(moved.positions, i);
    const Vec3 fromAxis(p.x(), 0.0, p.z() - radius);
    worstDistance = std::max(worstDistance, std::abs(fromAxis.norm() - radius));
    const Vec3 inward = -fromAxis.normalized();  // the rest normal +z points to the axis
    const double angle = std::acos(std::clamp(row(moved.normals, i).dot(inward), -1.0, 1.0));
    const Vec3 c = row(dense.positions, i);
    const bool interior = std::min({c.x(), c.y(), 15 * h - c.x(), 15 * h - c.y()}) > 2 * h;
    (interior ? worstInteriorAngle : worstAngle) =
        std::max(interior ? worstInteriorAngle : worstAngle, angle);
  }
  RecordProperty("distanceOverH2R", std::to_string(worstDistance * radius / (h * h)));
  RecordProperty("angleOverHR", std::to_string(worstAngle * radius / h));
  RecordProperty("interiorAngleOverHR", std::to_string(worstInteriorAngle * radius / h));
  EXPECT_LE(worstDistance, 0.5 * h * h / radius);
  EXPECT_LE(worstInteriorAngle, 0.5 * h / radius);
  EXPECT_LE(worstAngle, 0.75 * h / radius);
}

TEST(SurfaceBinding, BitIdenticalForOneAndTwoThreads) {
  std::vector<double> nodes = gridNodes(30, 0.1, 0.3);
  liftToParaboloid(nodes, nullptr, 0.5);
  Geometry dense = sheetMesh(120, 2.9, 0.002);
  liftToParaboloid(dense.positions, &dense.normals, 0.5);
  std::vector<double> x = nodes;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-0.02, 0.02);
  for (double& v : x) v += u(rng);
  const std::vector<CrackDisc> cracks = {{Vec3(1.45, 1.43, 0.0), Vec3(0, 1, 0), 0.8}};
  const auto run = [&](int threads) {
    const tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                    static_cast<size_t>(threads));
    const SurfaceBinding binding(nodes, dense, {}, cracks);
    return binding.deform(x);
  };
  const Geometry one = run(1);
  const Geometry two = run(2);
  ASSERT_EQ(one.positions.size(), two.positions.size());
  EXPECT_EQ(std::memcmp(one.positions.data(), two.positions.data(), one.positions.size() * 8), 0);
  EXPECT_EQ(std::memcmp(one.normals.data(), two.normals.data(), one.normals.size() * 8), 0);
  EXPECT_EQ(one.triangles, two.triangles);
}

// A disc across the whole sheet between two node rows and two vertex rows; the nodes above
// it move up by 5 h. Each quad row the crack crosses has m - 1 "lower" triangles (two
// corners below, whose upper corner is split) and m - 1 "upper" ones (one lower corner
// split): 2 (m - 1) split vertices, none shared.
struct CrackedSheet {
  double h = 0.1;
  int m = 31;              // vertices a side, spacing h / 3
  double crackY = 0.5165;  // node rows 5, 6 | vertex rows 15, 16 | the centroids
  std::vector<double> nodes = gridNodes(11, 0.1);
  Geometry dense = sheetMesh(31, 1.0);
  std::vector<CrackDisc> cracks = {{Vec3(0.5, 0.5165, 0.0), Vec3(0, 1, 0), 2.0}};
  [[nodiscard]] std::vector<double> opened() const {
    std::vector<double> x = nodes;
    for (size_t i = 0; i < x.size() / 3; ++i) {
      if (x[3 * i + 1] > crackY) x[3 * i + 1] += 5 * h;
    }
    return x;
  }
};

void expectOpenedCleanly(const CrackedSheet& sheet, const SurfaceBinding& binding,
                         const Geometry& moved) {
  ASSERT_EQ(binding.vertexCount(), sheet.m * sheet.m + 2 * (sheet.m - 1));
  ASSERT_EQ(moved.triangles.size(), sheet.dense.triangles.size());
  const double middle = sheet.crackY + 2.5 * sheet.h;
  for (size_t t = 0; t < moved.triangles.size() / 3; ++t) {
    int above = 0;
    for (int s = 0; s < 3; ++s) {
      above += moved.positions[3 * static_cast<size_t>(moved.triangles[3 * t + s]) + 1] > middle;
    }
    EXPECT_TRUE(above == 0 || above == 3) << "triangle " << t << " spans the crack";
    for (int s = 0; s < 3; ++s) {
      const auto a = static_cast<size_t>(moved.triangles[3 * t + s]);
      const auto b = static_cast<size_t>(moved.triangles[3 * t + (s + 1) % 3]);
      const auto restA = static_cast<size_t>(sheet.dense.triangles[3 * t + s]);
      const auto restB = static_cast<size_t>(sheet.dense.triangles[3 * t + (s + 1) % 3]);
      const double rest =
          (row(sheet.dense.positions, restA) - row(sheet.dense.positions, restB)).norm();
      EXPECT_LT((row(moved.positions, a) - row(moved.positions, b)).norm(), 2 * rest) << t;
    }
  }
}

TEST(SurfaceBinding, CrackSplitsStraddlingTriangles) {
  const CrackedSheet sheet;
  const SurfaceBinding binding(sheet.nodes, sheet.dense, {}, sheet.cracks);
  EXPECT_EQ(binding.translationCount(), 0);
  const Geometry moved = binding.deform(sheet.opened());
  expectOpenedCleanly(sheet, binding, moved);
  // No vertex binds across the disc.
  for (int32_t v = 0; v < binding.vertexCount(); ++v) {
    const Vec3 c = row(sheet.dense.positions,
                       static_cast<size_t>(binding.sourceVertex()[static_cast<size_t>(v)]));
    const bool split = v >= binding.inputVertexCount();
    for (const int32_t node : binding.boundNodes(v)) {
      const bool crosses =
          separatedByCracks(c, row(sheet.nodes, static_cast<size_t>(node)), sheet.cracks);
      EXPECT_EQ(crosses, split) << "vertex " << v << " node " << node;
    }
  }
}

TEST(SurfaceBinding, RebindAfterACrackEqualsBindingWithIt) {
  const CrackedSheet sheet;
  const SurfaceBinding reference(sheet.nodes, sheet.dense, {}, sheet.cracks);
  SurfaceBinding binding(sheet.nodes, sheet.dense);
  EXPECT_EQ(binding.vertexCount(), sheet.m * sheet.m);
  const int rebound = binding.rebind(sheet.cracks, sheet.cracks);
  // Only vertices within reach of the crack are re-bound: at most the rows within 2 node
  // spacings (6 vertex rows a side), plus the split vertices.
  EXPECT_GT(rebound, 0);
  EXPECT_LE(rebound, 12 * sheet.m + 2 * (sheet.m - 1));
  const std::vector<double> x = sheet.opened();
  const Geometry moved = binding.deform(x);
  expectOpenedCleanly(sheet, binding, moved);
  const Geometry expected = reference.deform(x);
  EXPECT_EQ(moved.positions, expected.positions);
  EXPECT_EQ(moved.normals, expected.normals);
  EXPECT_EQ(moved.triangles, expected.triangles);
  // A second rebind without new discs changes nothing.
  EXPECT_EQ(binding.rebind(sheet.cracks, {}), 0);
  EXPECT_EQ(binding.deform(x).positions, expected.positions);
}

TEST(SurfaceBinding, CollinearNodesGiveFiniteTranslation) {
  std::vector<double> nodes;
  for (int i = 0; i < 10; ++i) nodes.insert(nodes.end(), {0.1 * i, 0.0, 0.0});
  const Geometry dense = sheetMesh(8, 0.9, 0.01);
  const SurfaceBinding binding(nodes, dense);
  EXPECT_EQ(binding.translationCount(), binding.vertexCount());
  std::vector<double> x = nodes;
  for (size_t i = 0; i < x.size(); i += 3) x[i + 2] += 0.5;
  const Geometry moved = binding.deform(x);
  ASSERT_TRUE(allFinite(moved));
  for (size_t i = 0; i < moved.positions.size() / 3; ++i) {
    EXPECT_NEAR(moved.positions[3 * i + 2], 0.5, 1e-15);
  }
}

TEST(SurfaceBinding, CollapsedNodesStayFinite) {
  const std::vector<double> nodes = gridNodes(6, 0.1);
  const Geometry dense = sheetMesh(20, 0.5, 0.001);
  const SurfaceBinding binding(nodes, dense);
  const std::vector<double> point(nodes.size(), 0.25);  // every node at one point
  std::vector<double> line = nodes;                     // every node on the x axis
  for (size_t i = 0; i < line.size(); i += 3) line[i + 1] = 0;
  for (const auto& x : {point, line}) {
    const Geometry moved = binding.deform(x);
    EXPECT_TRUE(allFinite(moved));
  }
}

TEST(SurfaceBinding, PointIsolatedByCracksStaysFinite) {
  const std::vector<double> nodes = gridNodes(6, 0.1);
  Geometry dense;
  dense.positions = {0.23, 0.27, 0.0, 0.31, 0.12, 0.0};
  dense.normals = {0, 0, 1, 0, 0, 1};
  // A box of discs around the first point, away from the second.
  const double r = 0.07;
  const Vec3 c(0.23, 0.27, 0.0);
  std::vector<CrackDisc> box;
  for (int axis = 0; axis < 3; ++axis) {
    for (const double side : {-1.0, 1.0}) {
      Vec3 normal = Vec3::Zero();
      normal[axis] = 1;
      box.push_back({c + side * 0.02 * normal, normal, r});
    }
  }
  const SurfaceBinding binding(nodes, dense, {}, box);
  EXPECT_EQ(binding.translationCount(), 1);
  std::vector<double> x = nodes;
  for (double& v : x) v *= 1.3;
  const Geometry moved = binding.deform(x);
  EXPECT_TRUE(allFinite(moved));
}

// Two nodes on the point's side of a disc, a grid on the other: fewer than 3 visible, so
// the point translates with the nearer of its two (its normal turns with nothing: n' = n).
TEST(SurfaceBinding, TwoVisibleNodesTranslateWithTheNearest) {
  std::vector<double> nodes = gridNodes(5, 0.1);
  nodes.insert(nodes.end(), {0.1, -0.2, 0.0, 0.3, -0.2, 0.0});
  Geometry dense;
  dense.positions = {0.12, -0.15, 0.0};
  dense.normals = {0.0, 0.0, 1.0};
  const std::vector<CrackDisc> wall = {{Vec3(0.2, -0.05, 0.0), Vec3(0, 1, 0), 1.0}};
  const SurfaceBinding binding(nodes, dense, {}, wall);
  EXPECT_EQ(binding.translationCount(), 1);
  EXPECT_EQ(binding.boundNodes(0)[0], 25);
  std::vector<double> x = nodes;
  for (size_t i = 0; i < x.size(); ++i) x[i] += 0.01 * static_cast<double>(i % 7);
  const Geometry moved = binding.deform(x);
  ASSERT_TRUE(allFinite(moved));
  for (size_t d = 0; d < 3; ++d) {
    EXPECT_DOUBLE_EQ(moved.positions[d], dense.positions[d] + x[75 + d] - nodes[75 + d]);
  }
  EXPECT_NEAR(row(moved.normals, 0).z(), 1.0, 1e-15);
}

TEST(SurfaceBinding, RejectsBadInput) {
  const std::vector<double> nodes = gridNodes(4, 0.1);
  const Geometry dense = sheetMesh(5, 0.3);
  EXPECT_THROW(SurfaceBinding(nodes, dense, {.neighbours = 2}), InputError);
  EXPECT_THROW(SurfaceBinding(std::vector<double>{0, 0, 0, 1, 0, 0}, dense), InputError);
  std::vector<double> bad = nodes;
  bad[4] = std::nan("");
  EXPECT_THROW(SurfaceBinding(bad, dense), InputError);
  Geometry badTriangle = dense;
  badTriangle.triangles[5] = 99;
  EXPECT_THROW(SurfaceBinding(nodes, badTriangle), InputError);
  Geometry zeroNormal = dense;
  zeroNormal.normals[3] = zeroNormal.normals[4] = zeroNormal.normals[5] = 0;
  EXPECT_THROW(SurfaceBinding(nodes, zeroNormal), InputError);
  const std::vector<CrackDisc> badDisc = {{Vec3::Zero(), Vec3::UnitX(), 0.0}};
  EXPECT_THROW(SurfaceBinding(nodes, dense, {}, badDisc), InputError);
  const SurfaceBinding binding(nodes, dense);
  EXPECT_THROW((void)binding.deform(std::vector<double>(6, 0.0)), InputError);
}

TEST(SurfaceBinding, BunnyFollowsRigidMotion) {
  const std::filesystem::path path =
      std::filesystem::path(SHELLSIM_DATA_DIR) / "stanford-bunny.obj";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "stanford-bunny.obj not found";
  Geometry bunny = readGeometry(path);
  computeVertexNormals(bunny);
  std::vector<double> nodes;
  for (size_t i = 0; i < bunny.positions.size() / 3; i += 36) {
    nodes.insert(nodes.end(), bunny.positions.begin() + static_cast<std::ptrdiff_t>(3 * i),
                 bunny.positions.begin() + static_cast<std::ptrdiff_t>(3 * i + 3));
  }
  ASSERT_GE(nodes.size() / 3, 900u);
  const SurfaceBinding binding(nodes, bunny);
  RecordProperty("nodes", std::to_string(nodes.size() / 3));
  RecordProperty("translationBound", std::to_string(binding.translationCount()));
  EXPECT_EQ(binding.translationCount(), 0);
  const Rigid motion = someRigidMotion();
  const Geometry moved = binding.deform(motion.apply(nodes));
  const Bounds b = computeBounds(bunny);
  const double size =
      (Vec3(b.max[0], b.max[1], b.max[2]) - Vec3(b.min[0], b.min[1], b.min[2])).norm();
  const double positionError = maxDistance(moved.positions, motion.apply(bunny.positions));
  const double normalError = maxDistance(moved.normals, motion.apply(bunny.normals, true));
  RecordProperty("positionError", std::to_string(positionError));
  RecordProperty("normalError", std::to_string(normalError * 1e12) + "e-12");
  EXPECT_LE(positionError, 1e-12 * (size + motion.translation.norm()));
  EXPECT_LE(normalError, 1e-12);
}

}  // namespace
}  // namespace shellsim
