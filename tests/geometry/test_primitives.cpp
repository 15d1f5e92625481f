// Built-in primitives: shape (area, volume), closedness, orientation; transforms.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <tuple>
#include <vector>

#include "geometry/primitives.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {
namespace {

constexpr double kPi = std::numbers::pi;

struct Measures {
  double area = 0;
  double signedVolume = 0;  // (1/6) sum a . (b x c): positive when closed and outward
  double minQuality = 1;    // min over triangles of 4 sqrt(3) A / sum(l^2); 1 = equilateral
};

Measures measure(const Geometry& g) {
  Measures m;
  const auto& p = g.positions;
  for (size_t t = 0; t < g.triangles.size(); t += 3) {
    const double* a = &p[3 * static_cast<size_t>(g.triangles[t])];
    const double* b = &p[3 * static_cast<size_t>(g.triangles[t + 1])];
    const double* c = &p[3 * static_cast<size_t>(g.triangles[t + 2])];
    const double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    const double e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    const double e3[3] = {c[0] - b[0], c[1] - b[1], c[2] - b[2]};
    const double x[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                         e1[0] * e2[1] - e1[1] * e2[0]};
    const double area = 0.5 * std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    m.area += area;
    m.signedVolume += (a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2]) +
                       a[2] * (b[0] * c[1] - b[1] * c[0])) /
                      6;
    double sum2 = 0;
    for (const double* e : {e1, e2, e3}) sum2 += e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
    m.minQuality = std::min(m.minQuality, 4 * std::sqrt(3.0) * area / sum2);
  }
  return m;
}

// Every face normal (counter-clockwise) agrees with the vertex normals of its corners.
int facesAgainstVertexNormals(const Geometry& g) {
  int wrong = 0;
  const auto& p = g.positions;
  for (size_t t = 0; t < g.triangles.size(); t += 3) {
    const size_t ia = 3 * static_cast<size_t>(g.triangles[t]);
    const size_t ib = 3 * static_cast<size_t>(g.triangles[t + 1]);
    const size_t ic = 3 * static_cast<size_t>(g.triangles[t + 2]);
    const double e1[3] = {p[ib] - p[ia], p[ib + 1] - p[ia + 1], p[ib + 2] - p[ia + 2]};
    const double e2[3] = {p[ic] - p[ia], p[ic + 1] - p[ia + 1], p[ic + 2] - p[ia + 2]};
    const double x[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                         e1[0] * e2[1] - e1[1] * e2[0]};
    for (size_t v : {ia, ib, ic}) {
      if (x[0] * g.normals[v] + x[1] * g.normals[v + 1] + x[2] * g.normals[v + 2] <= 0) ++wrong;
    }
  }
  return wrong;
}

int duplicatedVertices(const Geometry& g) {
  std::map<std::tuple<long, long, long>, int> seen;
  int duplicates = 0;
  for (size_t i = 0; i < g.positions.size(); i += 3) {
    // Rounded to 1e-9: seam vertices computed twice would differ by rounding only.
    const auto key =
        std::make_tuple(std::lround(g.positions[i] * 1e9), std::lround(g.positions[i + 1] * 1e9),
                        std::lround(g.positions[i + 2] * 1e9));
    if (seen[key]++ > 0) ++duplicates;
  }
  return duplicates;
}

PrimitiveDef primitive(PrimitiveType type, int32_t resolution) {
  PrimitiveDef def;
  def.type = type;
  def.resolution = resolution;
  return def;
}

void expectClosedSingleComponent(const Geometry& g) {
  const MeshTopology t = analyzeTopology(g);
  EXPECT_EQ(t.boundaryEdgeCount, 0);
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.degenerateTriangleCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
  EXPECT_EQ(t.unreferencedVertexCount, 0);
  // Euler characteristic of a sphere: V - E + F = 2.
  EXPECT_EQ(g.vertexCount() - t.edgeCount + g.triangleCount(), 2);
  EXPECT_EQ(duplicatedVertices(g), 0);
}

TEST(Primitives, SheetAreaOrientationAndCells) {
  PrimitiveDef def = primitive(PrimitiveType::kSheet, 10);
  def.size = {2.0, 1.0, 0};
  const Geometry g = makePrimitive(def);
  EXPECT_EQ(g.vertexCount(), 11 * 6);  // 10 x 5 square cells
  EXPECT_EQ(g.triangleCount(), 100);
  const Measures m = measure(g);
  EXPECT_NEAR(m.area, 2.0, 1e-12);
  EXPECT_NEAR(m.minQuality, 4 * std::sqrt(3.0) * 0.02 / 0.16, 1e-9);  // right isoceles
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
  for (size_t i = 2; i < g.normals.size(); i += 3) EXPECT_EQ(g.normals[i], 1.0);
  const MeshTopology t = analyzeTopology(g);
  EXPECT_EQ(t.boundaryEdgeCount, 2 * (10 + 5));
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
  const Bounds b = computeBounds(g);
  EXPECT_DOUBLE_EQ(b.min[0], -1.0);
  EXPECT_DOUBLE_EQ(b.max[1], 0.5);
}

TEST(Primitives, SheetDiagonalsAlternate) {
  // Cell (0,0) is cut by its diagonal 0-4, its neighbour (1,0) by the other one, 2-4.
  const Geometry g = makePrimitive(primitive(PrimitiveType::kSheet, 2));
  auto hasEdge = [&](int32_t a, int32_t b) {
    for (size_t t = 0; t < g.triangles.size(); t += 3) {
      int hits = 0;
      for (size_t k = 0; k < 3; ++k) hits += g.triangles[t + k] == a || g.triangles[t + k] == b;
      if (hits == 2) return true;
    }
    return false;
  };
  // Grid 3 x 3 vertices, index j * 3 + i.
  EXPECT_TRUE(hasEdge(0, 4));
  EXPECT_FALSE(hasEdge(1, 3));
  EXPECT_TRUE(hasEdge(2, 4));
  EXPECT_FALSE(hasEdge(1, 5));
}

TEST(Primitives, SphereIsClosedOutwardAndRound) {
  PrimitiveDef def = primitive(PrimitiveType::kSphere, 32);
  def.radius = 0.7;
  const Geometry g = makePrimitive(def);
  expectClosedSingleComponent(g);
  const Measures m = measure(g);
  const double r = def.radius;
  EXPECT_NEAR(m.area, 4 * kPi * r * r, 0.02 * 4 * kPi * r * r);
  EXPECT_NEAR(m.signedVolume, 4.0 / 3 * kPi * r * r * r, 0.03 * 4.0 / 3 * kPi * r * r * r);
  EXPECT_GT(m.minQuality, 0.8);
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
  for (size_t i = 0; i < g.positions.size(); i += 3) {
    const double d = std::hypot(g.positions[i], g.positions[i + 1], g.positions[i + 2]);
    EXPECT_NEAR(d, r, 1e-12);
  }
}

TEST(Primitives, SphereAtLowestResolutionIsAnIcosahedron) {
  const Geometry g = makePrimitive(primitive(PrimitiveType::kSphere, 1));
  EXPECT_EQ(g.vertexCount(), 12);
  EXPECT_EQ(g.triangleCount(), 20);
  expectClosedSingleComponent(g);
  EXPECT_GT(measure(g).signedVolume, 0);
}

TEST(Primitives, HemisphereIsAnOpenDome) {
  PrimitiveDef def = primitive(PrimitiveType::kHemisphere, 32);
  def.radius = 2.0;
  const Geometry g = makePrimitive(def);
  const MeshTopology t = analyzeTopology(g);
  EXPECT_EQ(t.boundaryEdgeCount, 32);  // the rim: 4 f edges, f = 8
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
  EXPECT_EQ(duplicatedVertices(g), 0);
  const Measures m = measure(g);
  EXPECT_NEAR(m.area, 2 * kPi * 4, 0.02 * 2 * kPi * 4);
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
  int onRim = 0;
  for (size_t i = 0; i < g.positions.size(); i += 3) {
    EXPECT_GE(g.positions[i + 2], 0.0);
    if (g.positions[i + 2] == 0.0) ++onRim;
  }
  EXPECT_EQ(onRim, 32);
}

TEST(Primitives, CylinderIsOpenTube) {
  PrimitiveDef def = primitive(PrimitiveType::kCylinder, 24);
  def.radius = 0.5;
  def.height = 2.0;
  const Geometry g = makePrimitive(def);
  const MeshTopology t = analyzeTopology(g);
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
  EXPECT_EQ(t.degenerateTriangleCount, 0);
  EXPECT_EQ(duplicatedVertices(g), 0);
  // Two rims of `around` edges each; Euler characteristic of an annulus is 0.
  EXPECT_EQ(g.vertexCount() - t.edgeCount + g.triangleCount(), 0);
  EXPECT_EQ(t.boundaryEdgeCount % 2, 0);
  const Measures m = measure(g);
  EXPECT_NEAR(m.area, 2 * kPi * 0.5 * 2.0, 0.02 * 2 * kPi);
  EXPECT_GT(m.minQuality, 0.6);
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
  const Bounds b = computeBounds(g);
  EXPECT_DOUBLE_EQ(b.min[2], -1.0);
  EXPECT_DOUBLE_EQ(b.max[2], 1.0);
}

// A can: the tube closed by two discs of rings, no slivers, at low and high resolution.
TEST(Primitives, CappedCylinderIsAClosedCan) {
  for (const int32_t resolution : {12, 40, 96}) {
    PrimitiveDef def = primitive(PrimitiveType::kCylinder, resolution);
    def.radius = 0.033;
    def.height = 0.12;
    def.caps = true;
    const Geometry g = makePrimitive(def);
    SCOPED_TRACE(resolution);
    expectClosedSingleComponent(g);
    const Measures m = measure(g);
    const double r = def.radius, h = def.height;
    EXPECT_NEAR(m.signedVolume, kPi * r * r * h, 0.06 * kPi * r * r * h);
    EXPECT_NEAR(m.area, 2 * kPi * r * (r + h), 0.06 * 2 * kPi * r * (r + h));
    EXPECT_GT(m.minQuality, 0.4);
  }
}

TEST(Primitives, BoxIsClosedAndExact) {
  PrimitiveDef def = primitive(PrimitiveType::kBox, 8);
  def.size = {2.0, 1.0, 0.5};
  const Geometry g = makePrimitive(def);
  expectClosedSingleComponent(g);
  const Measures m = measure(g);
  EXPECT_NEAR(m.area, 2 * (2.0 * 1.0 + 2.0 * 0.5 + 1.0 * 0.5), 1e-12);
  EXPECT_NEAR(m.signedVolume, 1.0, 1e-12);
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
  // Cells of 0.25: 8 x 4 x 2 -> surface lattice points.
  EXPECT_EQ(g.vertexCount(), 9 * 5 * 3 - 7 * 3 * 1);
}

TEST(Primitives, RejectsInvalidParameters) {
  EXPECT_THROW((void)makePrimitive(primitive(PrimitiveType::kSheet, 0)), InputError);
  EXPECT_THROW((void)makePrimitive(primitive(PrimitiveType::kSphere, 2049)), InputError);
  PrimitiveDef def = primitive(PrimitiveType::kBox, 4);
  def.size = {1, -1, 1};
  EXPECT_THROW((void)makePrimitive(def), InputError);
  def = primitive(PrimitiveType::kSphere, 4);
  def.radius = 0;
  EXPECT_THROW((void)makePrimitive(def), InputError);
  def = primitive(PrimitiveType::kCylinder, 4);
  def.height = std::nan("");
  EXPECT_THROW((void)makePrimitive(def), InputError);
  def = primitive(PrimitiveType::kSheet, 4);
  def.size = {1, 0, 1};
  EXPECT_THROW((void)makePrimitive(def), InputError);
}

TEST(Transform, KnownPointAndNormal) {
  Geometry g;
  g.positions = {1, 0, 0};
  g.normals = {1, 1, 0};  // unnormalised on purpose: the result is renormalised
  TransformDef t;
  t.scale = {2, 1, 1};
  t.rotationDegrees = {0, 0, 90};
  t.translation = {0, 0, 5};
  applyTransform(g, t);
  // Scale: (2, 0, 0); Rz(90): (0, 2, 0); translate: (0, 2, 5).
  EXPECT_NEAR(g.positions[0], 0, 1e-12);
  EXPECT_NEAR(g.positions[1], 2, 1e-12);
  EXPECT_NEAR(g.positions[2], 5, 1e-12);
  // Normal: S^-1 n = (0.5, 1, 0); Rz(90): (-1, 0.5, 0); normalised.
  const double l = std::sqrt(1.25);
  EXPECT_NEAR(g.normals[0], -1 / l, 1e-12);
  EXPECT_NEAR(g.normals[1], 0.5 / l, 1e-12);
  EXPECT_NEAR(g.normals[2], 0, 1e-12);
}

TEST(Transform, RotationOrderIsXThenYThenZ) {
  Geometry g;
  g.positions = {0, 1, 0};
  TransformDef t;
  t.rotationDegrees = {90, 90, 0};
  applyTransform(g, t);
  // Rx(90): (0, 1, 0) -> (0, 0, 1); then Ry(90): (0, 0, 1) -> (1, 0, 0).
  EXPECT_NEAR(g.positions[0], 1, 1e-12);
  EXPECT_NEAR(g.positions[1], 0, 1e-12);
  EXPECT_NEAR(g.positions[2], 0, 1e-12);
}

TEST(Transform, NormalsStayPerpendicularUnderNonUniformScale) {
  Geometry g = makePrimitive(primitive(PrimitiveType::kSphere, 10));
  TransformDef t;
  t.scale = {3, 1, 0.5};
  t.rotationDegrees = {10, 20, 30};
  applyTransform(g, t);
  // On the ellipsoid the exact normal is not radial; the transformed vertex normal must
  // still face outward from every incident face and be unit length.
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
  for (size_t i = 0; i < g.normals.size(); i += 3) {
    EXPECT_NEAR(std::hypot(g.normals[i], g.normals[i + 1], g.normals[i + 2]), 1.0, 1e-12);
  }
  EXPECT_NEAR(measure(g).signedVolume /
                  measure(makePrimitive(primitive(PrimitiveType::kSphere, 10))).signedVolume,
              1.5, 1e-9);
}

TEST(Transform, MirrorKeepsOutwardOrientation) {
  Geometry g = makePrimitive(primitive(PrimitiveType::kBox, 2));
  TransformDef t;
  t.scale = {-1, 1, 1};
  applyTransform(g, t);
  EXPECT_GT(measure(g).signedVolume, 0);
  EXPECT_EQ(facesAgainstVertexNormals(g), 0);
}

TEST(Transform, RejectsZeroScale) {
  Geometry g = makePrimitive(primitive(PrimitiveType::kSheet, 1));
  TransformDef t;
  t.scale = {1, 0, 1};
  EXPECT_THROW(applyTransform(g, t), InputError);
}

}  // namespace
}  // namespace shellsim
