// Point-cloud normal estimation: accuracy of the plane fit and the orientation of each
// connected piece (Hoppe et al. 1992).
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"

namespace shellsim {
namespace {

struct Vec {
  double x, y, z;
};

double dot(const Vec& a, const Vec& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}

Vec normalAt(const Geometry& g, size_t i) {
  return {g.normals[3 * i], g.normals[3 * i + 1], g.normals[3 * i + 2]};
}

void push(Geometry& g, const Vec& p) {
  g.positions.insert(g.positions.end(), {p.x, p.y, p.z});
}

// Quasi-uniform points on a sphere (Fibonacci spiral); the true normal of point p is
// (p - centre) / radius.
void addFibonacciSphere(Geometry& g, Vec centre, double radius, int count) {
  const double golden = std::numbers::pi * (3 - std::sqrt(5.0));
  for (int i = 0; i < count; ++i) {
    const double z = 1 - (2 * i + 1.0) / count;
    const double r = std::sqrt(1 - z * z);
    const double phi = golden * i;
    push(g, {centre.x + radius * r * std::cos(phi), centre.y + radius * r * std::sin(phi),
             centre.z + radius * z});
  }
}

// Maximum angle between estimated and true normals, in degrees, and the number of
// estimated normals on the wrong side (negative dot product with the true normal).
struct Agreement {
  double maxAngleDegrees = 0;
  int wrongSide = 0;
};

template <class TrueNormal>
Agreement compare(const Geometry& g, TrueNormal trueNormal) {
  Agreement a;
  for (size_t i = 0; i < static_cast<size_t>(g.vertexCount()); ++i) {
    const Vec n = normalAt(g, i);
    EXPECT_NEAR(dot(n, n), 1.0, 1e-12);
    const double c = dot(n, trueNormal(i));
    if (c < 0) ++a.wrongSide;
    a.maxAngleDegrees =
        std::max(a.maxAngleDegrees, std::acos(std::min(1.0, std::abs(c))) * 180 / std::numbers::pi);
  }
  return a;
}

TEST(EstimateNormals, SphereNormalsAreRadialAndOutward) {
  Geometry g;
  addFibonacciSphere(g, {0.3, -0.2, 0.1}, 2.0, 4000);
  estimateNormals(g);
  ASSERT_EQ(g.normals.size(), g.positions.size());
  const Agreement a = compare(g, [&](size_t i) {
    return Vec{(g.positions[3 * i] - 0.3) / 2, (g.positions[3 * i + 1] + 0.2) / 2,
               (g.positions[3 * i + 2] - 0.1) / 2};
  });
  EXPECT_LT(a.maxAngleDegrees, 2.0);
  EXPECT_EQ(a.wrongSide, 0);
}

TEST(EstimateNormals, RandomSphereSamplesPointOutward) {
  // Uniform random samples: uneven neighbourhoods tilt the fit more than the spiral does.
  Geometry g;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  while (g.vertexCount() < 3000) {
    const Vec p{uniform(rng), uniform(rng), uniform(rng)};
    const double r2 = dot(p, p);
    if (r2 < 1e-4 || r2 > 1) continue;
    const double r = std::sqrt(r2);
    push(g, {p.x / r, p.y / r, p.z / r});
  }
  estimateNormals(g, 16);
  const Agreement a = compare(g, [&](size_t i) {
    return Vec{g.positions[3 * i], g.positions[3 * i + 1], g.positions[3 * i + 2]};
  });
  EXPECT_LT(a.maxAngleDegrees, 10.0);
  EXPECT_EQ(a.wrongSide, 0);
}

TEST(EstimateNormals, NoisyPlaneIsConsistentlyOriented) {
  Geometry g;
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 0.002);
  for (int j = 0; j < 60; ++j) {
    for (int i = 0; i < 60; ++i) push(g, {0.1 * i, 0.1 * j, noise(rng)});
  }
  estimateNormals(g);
  double sumZ = 0;
  for (size_t i = 0; i < static_cast<size_t>(g.vertexCount()); ++i) {
    const double z = normalAt(g, i).z;
    EXPECT_GT(std::abs(z), std::cos(5 * std::numbers::pi / 180)) << "point " << i;
    sumZ += z;
  }
  // One side or the other, but every normal on the same side.
  for (size_t i = 0; i < static_cast<size_t>(g.vertexCount()); ++i) {
    EXPECT_GT(normalAt(g, i).z * sumZ, 0) << "point " << i;
  }
}

TEST(EstimateNormals, TorusPointsOutward) {
  const double bigR = 1.0, smallR = 0.35;
  Geometry g;
  std::vector<Vec> truth;
  for (int j = 0; j < 40; ++j) {
    for (int i = 0; i < 120; ++i) {
      const double u = 2 * std::numbers::pi * i / 120,
                   v = 2 * std::numbers::pi * (j + 0.5 * (i % 2)) / 40;
      const Vec n{std::cos(v) * std::cos(u), std::cos(v) * std::sin(u), std::sin(v)};
      push(g, {(bigR + smallR * std::cos(v)) * std::cos(u),
               (bigR + smallR * std::cos(v)) * std::sin(u), smallR * std::sin(v)});
      truth.push_back(n);
    }
  }
  estimateNormals(g);
  const Agreement a = compare(g, [&](size_t i) { return truth[i]; });
  EXPECT_LT(a.maxAngleDegrees, 5.0);
  EXPECT_EQ(a.wrongSide, 0);
}

TEST(EstimateNormals, TwoSeparateSpheresAreEachOutward) {
  Geometry g;
  addFibonacciSphere(g, {-3, 0, 0}, 1.0, 1500);
  addFibonacciSphere(g, {3, 0.5, 0}, 0.5, 800);
  estimateNormals(g);
  const Agreement a = compare(g, [&](size_t i) {
    const bool first = i < 1500;
    const Vec c = first ? Vec{-3, 0, 0} : Vec{3, 0.5, 0};
    const double r = first ? 1.0 : 0.5;
    return Vec{(g.positions[3 * i] - c.x) / r, (g.positions[3 * i + 1] - c.y) / r,
               (g.positions[3 * i + 2] - c.z) / r};
  });
  EXPECT_LT(a.maxAngleDegrees, 5.0);  // coarser than the 2-degree test: ~800 points
  EXPECT_EQ(a.wrongSide, 0);
}

TEST(EstimateNormals, IdenticalForOneAndTwoThreads) {
  Geometry g;
  addFibonacciSphere(g, {0, 0, 0}, 1.0, 5000);
  addFibonacciSphere(g, {5, 0, 0}, 1.0, 700);
  Geometry one = g, two = g;
  {
    const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    estimateNormals(one);
  }
  {
    const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
    estimateNormals(two);
  }
  EXPECT_EQ(one.normals, two.normals);  // bit-identical, not merely close
}

TEST(EstimateNormals, RejectsBadInput) {
  Geometry two;
  two.positions = {0, 0, 0, 1, 0, 0};
  EXPECT_THROW(estimateNormals(two), InputError);

  Geometry withNan;
  addFibonacciSphere(withNan, {0, 0, 0}, 1.0, 20);
  withNan.positions[7] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(estimateNormals(withNan), InputError);

  Geometry fine;
  addFibonacciSphere(fine, {0, 0, 0}, 1.0, 20);
  EXPECT_THROW(estimateNormals(fine, 2), InputError);
  EXPECT_NO_THROW(estimateNormals(fine, 3));
}

TEST(EstimateNormals, FewerPointsThanNeighbours) {
  // k is clamped to the number of points.
  Geometry g;
  g.positions = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0};
  estimateNormals(g, 12);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(std::abs(normalAt(g, i).z), 1.0, 1e-12);
}

// Igea (134,345 points, Cyberware scan) has no stored normals, only triangle strips:
// the reference is the area-weighted normal of the mesh the reader builds from them.
TEST(EstimateNormals, IgeaAgreesWithMeshNormals) {
  const std::filesystem::path path = std::filesystem::path(SHELLSIM_DATA_DIR) / "igea.ply";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  Geometry mesh = readGeometry(path);
  ASSERT_EQ(mesh.vertexCount(), 134345);
  ASSERT_FALSE(mesh.isPointCloud()) << "the reader returned no triangles for igea's tristrips";
  computeVertexNormals(mesh);

  Geometry cloud;
  cloud.positions = mesh.positions;
  const auto start = std::chrono::steady_clock::now();
  estimateNormals(cloud);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("estimateNormalsSeconds", std::to_string(seconds));

  // Vertices the strips do not reach (or only reach through degenerate triangles) have no
  // reference normal; they are left out of the count.
  const MeshTopology topology = analyzeTopology(mesh);
  std::vector<char> referenced(static_cast<size_t>(mesh.vertexCount()), 0);
  for (int32_t v : mesh.triangles) referenced[static_cast<size_t>(v)] = 1;
  size_t agree = 0, compared = 0;
  for (size_t i = 0; i < referenced.size(); ++i) {
    if (!referenced[i]) continue;
    ++compared;
    if (dot(normalAt(cloud, i), normalAt(mesh, i)) > 0) ++agree;
  }
  RecordProperty("signAgreement",
                 std::to_string(static_cast<double>(agree) / static_cast<double>(compared)));
  EXPECT_EQ(static_cast<int64_t>(compared) + topology.unreferencedVertexCount, mesh.vertexCount());
  EXPECT_GE(static_cast<double>(agree), 0.99 * static_cast<double>(compared))
      << agree << " of " << compared << " normals agree in sign";
}

}  // namespace
}  // namespace shellsim
