// Bounds, edge topology and vertex normals on hand-made meshes whose counts are known.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {
namespace {

Geometry mesh(std::vector<double> positions, std::vector<int32_t> triangles) {
  Geometry g;
  g.positions = std::move(positions);
  g.triangles = std::move(triangles);
  return g;
}

// A regular-ish tetrahedron, every face counter-clockwise seen from outside:
//
//        3 (0,0,1)
//        |
//        0 ------ 1 (1,0,0)
//       /
//      2 (0,1,0)
Geometry tetrahedron() {
  return mesh({0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}, {0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3});
}

TEST(MeshTopology, FindsSliversDuplicatesFlippedEdgesAndStrayComponents) {
  // Two unit right triangles sharing edge (1, 2), both counter-clockwise (triangle 0 runs
  // along it 1 -> 2, triangle 1 2 -> 1); a sliver 0.001 high beside them, on its own; and
  // vertex 7 on top of vertex 0, in no triangle.
  const Geometry m = mesh({0, 0, 0, 1, 0, 0, 0,   1,     0, 1, 1, 0,   // 0..3
                           5, 0, 0, 6, 0, 0, 5.5, 0.001, 0, 0, 0, 0},  // 4..7
                          {0, 1, 2, 1, 3, 2, 4, 5, 6});
  MeshTopology t = analyzeTopology(m);
  EXPECT_EQ(t.inconsistentEdgeCount, 0);
  EXPECT_EQ(t.medianEdgeLength, 1.0);  // of 0.5, 0.5, 1 (x5), sqrt(2)
  Geometry flipped = m;
  std::swap(flipped.triangles[4], flipped.triangles[5]);  // (1, 2, 3) runs 1 -> 2 as well
  t = analyzeTopology(flipped);
  EXPECT_EQ(t.inconsistentEdgeCount, 1);
  EXPECT_EQ(t.connectedComponentCount, 2);
  EXPECT_EQ(t.smallestComponentVertexCount, 3);
  EXPECT_EQ(t.unreferencedVertexCount, 1);  // vertex 7: not a duplicate, in no triangle
  EXPECT_EQ(t.duplicateVertexCount, 0);
  EXPECT_EQ(t.smallestHeightTriangle, 2);
  EXPECT_NEAR(t.smallestHeight, 0.001, 1e-12);
  EXPECT_EQ(t.sliverTriangleCount, 1);
  EXPECT_EQ(meshRefusals(t).size(), 1u);  // the flipped edge
  const std::vector<std::string> warnings = meshWarnings(t);
  ASSERT_EQ(warnings.size(), 2u);  // the sliver, the 3-vertex component
  EXPECT_NE(warnings[0].find("triangle 2"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("smallest of 3 vertices"), std::string::npos) << warnings[1];
  // Vertex 7 used by a triangle: it coincides with vertex 0, a seam.
  Geometry seam = m;
  seam.triangles.insert(seam.triangles.end(), {7, 2, 3});
  EXPECT_EQ(analyzeTopology(seam).duplicateVertexCount, 1);
}

TEST(WeldCoincidentVertices, MergesIntoTheLowestIndexAndDropsCollapsedTriangles) {
  Geometry m;
  m.positions = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0};
  m.normals = {0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, -1, 0, 0, 1, 0, 0, -1};
  m.colors.assign(18, 0.5F);
  // (3, 4, 2) uses 3, a copy of 1; (5, 1, 2) becomes (0, 1, 2) again, a repeated triangle
  // but not a collapsed one, and is kept; (0, 5, 4) has two corners at one place: dropped.
  m.triangles = {0, 1, 2, 3, 4, 2, 5, 1, 2, 0, 5, 4};
  const std::vector<int32_t> map = weldCoincidentVertices(m);
  EXPECT_EQ(map, (std::vector<int32_t>{0, 1, 2, 1, 3, 0}));
  EXPECT_EQ(m.vertexCount(), 4);
  EXPECT_EQ(m.positions, (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0}));
  EXPECT_EQ(m.normals, (std::vector<double>{0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1}));  // the first's
  EXPECT_EQ(m.colors.size(), 12u);
  EXPECT_EQ(m.triangles, (std::vector<int32_t>{0, 1, 2, 1, 3, 2, 0, 1, 2}));
  // Nothing to weld: the identity, and the geometry untouched.
  Geometry cloud;
  cloud.positions = {0, 0, 0, 1, 0, 0, 0, 1e-300, 0};
  const Geometry before = cloud;
  EXPECT_EQ(weldCoincidentVertices(cloud), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(cloud.positions, before.positions);
}

// A square of cells x cells unit cells in z = 0, two triangles per cell.
Geometry grid(int cells) {
  Geometry g;
  for (int j = 0; j <= cells; ++j) {
    for (int i = 0; i <= cells; ++i) g.positions.insert(g.positions.end(), {1.0 * i, 1.0 * j, 0});
  }
  const auto v = [&](int i, int j) { return j * (cells + 1) + i; };
  for (int j = 0; j < cells; ++j) {
    for (int i = 0; i < cells; ++i) {
      g.triangles.insert(g.triangles.end(), {v(i, j), v(i + 1, j), v(i + 1, j + 1), v(i, j),
                                             v(i + 1, j + 1), v(i, j + 1)});
    }
  }
  return g;
}

TEST(RepairMesh, SplitsNonManifoldEdgesWeldsSeamsDropsStrayPartsAndRemovesSlivers) {
  Geometry m = grid(6);
  const auto n = static_cast<int32_t>(m.positions.size() / 3);
  // A third sheet on the edge (0, 1)-(1, 1) of the grid's first cell: non-manifold.
  m.positions.insert(m.positions.end(), {0.5, 0.5, 1});
  m.triangles.insert(m.triangles.end(), {1, 8, n});
  // A seam: a copy of vertex 20 used by one of its triangles instead of it.
  m.positions.insert(m.positions.end(), {m.positions[60], m.positions[61], m.positions[62]});
  for (size_t t = 0; t < m.triangles.size(); ++t) {
    if (m.triangles[t] == 20) {
      m.triangles[t] = n + 1;
      break;
    }
  }
  // A stray triangle far away, and a sliver 0.01 high on the grid's border.
  m.positions.insert(m.positions.end(), {20, 20, 0, 21, 20, 0, 20, 21, 0, 3, -0.01, 0});
  m.triangles.insert(m.triangles.end(), {n + 2, n + 3, n + 4, 3, 2, n + 5});
  const MeshTopology before = analyzeTopology(m);
  ASSERT_EQ(before.nonManifoldEdgeCount, 1);
  ASSERT_EQ(before.duplicateVertexCount, 1);
  ASSERT_EQ(before.connectedComponentCount, 2);
  ASSERT_EQ(before.sliverTriangleCount, 1);
  ASSERT_FALSE(meshRefusals(before).empty());

  Geometry repaired = m;
  RepairOptions options;
  options.minComponentFaces = 2;
  const RepairReport report = repairMesh(repaired, options);
  EXPECT_EQ(report.after.nonManifoldEdgeCount, 0);
  EXPECT_EQ(report.after.inconsistentEdgeCount, 0);
  EXPECT_EQ(report.after.duplicateVertexCount, 0);
  EXPECT_TRUE(meshRefusals(report.after).empty());
  // The stray triangle is gone; the third sheet, split off at the edge, is one triangle
  // too and goes with it.
  EXPECT_EQ(report.after.connectedComponentCount, 1);
  EXPECT_EQ(repaired.triangleCount(), 6 * 6 * 2 + 1);  // the grid and the sliver

  options.targetEdgeLength = 1.0;  // remeshed: even triangles, no sliver
  Geometry remeshed = m;
  const RepairReport even = repairMesh(remeshed, options);
  EXPECT_EQ(even.after.sliverTriangleCount, 0);
  EXPECT_GT(even.after.smallestHeight, 0.2);
  EXPECT_EQ(even.after.nonManifoldEdgeCount, 0);

  Geometry cloud;
  cloud.positions = {0, 0, 0};
  EXPECT_THROW((void)repairMesh(cloud), InputError);
  options.targetEdgeLength = -1;
  EXPECT_THROW((void)repairMesh(remeshed, options), InputError);
}

// A strip of two squares (x from 0 to 2) cut at x <= 1.5: of the mesh, the first square's two
// triangles and their four vertices, renumbered in order, with their normals and scalars; of
// the same vertices as a point cloud, the four inside.
TEST(CropGeometry, KeepsTheWholeTrianglesInsideAndTheirVerticesInOrder) {
  Geometry strip = mesh({0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 1, 0, 1, 1, 0, 2, 1, 0},
                        {0, 1, 4, 0, 4, 3, 1, 2, 5, 1, 5, 4});
  strip.normals.assign(18, 0.0);
  for (int v = 0; v < 6; ++v) strip.normals[3 * v + 2] = v;  // tells the vertices apart
  strip.vertexScalars.push_back({"damage", {0, 1, 2, 3, 4, 5}});
  const auto left = [](const double* x) { return x[0] <= 1.5; };
  const Geometry part = cropGeometry(strip, left);
  EXPECT_EQ(part.triangles, (std::vector<int32_t>{0, 1, 3, 0, 3, 2}));
  EXPECT_EQ(part.positions, (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0}));
  ASSERT_EQ(part.normals.size(), 12u);
  EXPECT_EQ(part.normals[3 * 2 + 2], 3);  // the third kept vertex was vertex 3
  ASSERT_EQ(part.vertexScalars.size(), 1u);
  EXPECT_EQ(part.vertexScalars[0].values, (std::vector<float>{0, 1, 3, 4}));
  // A vertex inside that no kept triangle uses is dropped: a mesh stays a mesh.
  const Geometry corner = cropGeometry(strip, [](const double* x) { return x[0] <= 0.5; });
  EXPECT_EQ(corner.vertexCount(), 0);
  Geometry cloud = strip;
  cloud.triangles.clear();
  EXPECT_EQ(cropGeometry(cloud, left).vertexCount(), 4);
  EXPECT_TRUE(cropGeometry(cloud, left).isPointCloud());
}

TEST(Bounds, EmptyGeometryHasZeroCorners) {
  const Bounds b = computeBounds(Geometry{});
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(b.min[d], 0);
    EXPECT_EQ(b.max[d], 0);
  }
}

TEST(Bounds, CoversAllVertices) {
  const Bounds b = computeBounds(mesh({1, -2, 3, -4, 5, 0.5, 0, 0, 7}, {}));
  EXPECT_EQ(b.min[0], -4);
  EXPECT_EQ(b.min[1], -2);
  EXPECT_EQ(b.min[2], 0.5);
  EXPECT_EQ(b.max[0], 1);
  EXPECT_EQ(b.max[1], 5);
  EXPECT_EQ(b.max[2], 7);
}

TEST(Topology, SingleTriangleHasThreeBoundaryEdges) {
  const MeshTopology t = analyzeTopology(mesh({0, 0, 0, 1, 0, 0, 0, 1, 0}, {0, 1, 2}));
  EXPECT_EQ(t.edgeCount, 3);
  EXPECT_EQ(t.boundaryEdgeCount, 3);
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.degenerateTriangleCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
  EXPECT_EQ(t.unreferencedVertexCount, 0);
}

TEST(Topology, TwoTrianglesSharingAnEdge) {
  const MeshTopology t =
      analyzeTopology(mesh({0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0}, {0, 1, 2, 0, 2, 3}));
  EXPECT_EQ(t.edgeCount, 5);
  EXPECT_EQ(t.boundaryEdgeCount, 4);
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
}

TEST(Topology, ThreeTrianglesOnOneEdgeAreNonManifold) {
  // Edge 0-1 carries three fins.
  const MeshTopology t = analyzeTopology(
      mesh({0, 0, 0, 1, 0, 0, 0.5, 1, 0, 0.5, -1, 0, 0.5, 0, 1}, {0, 1, 2, 1, 0, 3, 0, 1, 4}));
  EXPECT_EQ(t.edgeCount, 7);
  EXPECT_EQ(t.nonManifoldEdgeCount, 1);
  EXPECT_EQ(t.boundaryEdgeCount, 6);
  EXPECT_EQ(t.connectedComponentCount, 1);
}

TEST(Topology, ClosedTetrahedron) {
  const MeshTopology t = analyzeTopology(tetrahedron());
  EXPECT_EQ(t.edgeCount, 6);
  EXPECT_EQ(t.boundaryEdgeCount, 0);
  EXPECT_EQ(t.nonManifoldEdgeCount, 0);
  EXPECT_EQ(t.degenerateTriangleCount, 0);
  EXPECT_EQ(t.connectedComponentCount, 1);
}

TEST(Topology, TwoDisjointTrianglesAndAnUnreferencedVertex) {
  const MeshTopology t = analyzeTopology(
      mesh({0, 0, 0, 1, 0, 0, 0, 1, 0, 5, 0, 0, 6, 0, 0, 5, 1, 0, 9, 9, 9}, {0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(t.connectedComponentCount, 2);
  EXPECT_EQ(t.unreferencedVertexCount, 1);
  EXPECT_EQ(t.boundaryEdgeCount, 6);
}

TEST(Topology, DegenerateTriangles) {
  // Triangle 1 repeats a vertex, triangle 2 has three collinear vertices.
  const MeshTopology t =
      analyzeTopology(mesh({0, 0, 0, 1, 0, 0, 0, 1, 0, 2, 0, 0}, {0, 1, 2, 0, 0, 2, 0, 1, 3}));
  EXPECT_EQ(t.degenerateTriangleCount, 2);
  EXPECT_EQ(t.connectedComponentCount, 1);
}

TEST(Topology, RejectsOutOfRangeIndices) {
  EXPECT_THROW((void)analyzeTopology(mesh({0, 0, 0, 1, 0, 0, 0, 1, 0}, {0, 1, 3})), InputError);
  EXPECT_THROW((void)analyzeTopology(mesh({0, 0, 0, 1, 0, 0, 0, 1, 0}, {0, 1, -1})), InputError);
}

TEST(VertexNormals, TetrahedronNormalsPointOutward) {
  Geometry g = tetrahedron();
  computeVertexNormals(g);
  ASSERT_EQ(g.normals.size(), g.positions.size());
  const double centroid[3] = {0.25, 0.25, 0.25};
  for (size_t v = 0; v < 4; ++v) {
    double dot = 0, length2 = 0;
    for (size_t d = 0; d < 3; ++d) {
      dot += g.normals[3 * v + d] * (g.positions[3 * v + d] - centroid[d]);
      length2 += g.normals[3 * v + d] * g.normals[3 * v + d];
    }
    EXPECT_GT(dot, 0) << "vertex " << v;
    EXPECT_NEAR(length2, 1.0, 1e-12);
  }
  // Vertex 0 sits on three faces of equal area with normals -x, -y, -z.
  const double s = -1 / std::sqrt(3.0);
  EXPECT_NEAR(g.normals[0], s, 1e-12);
  EXPECT_NEAR(g.normals[1], s, 1e-12);
  EXPECT_NEAR(g.normals[2], s, 1e-12);
}

TEST(VertexNormals, AreaWeighted) {
  // Vertex 0 is shared by a large triangle facing +z and a small one facing +x.
  Geometry g = mesh({0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 1, 0, 0, 0, 1}, {0, 1, 2, 0, 3, 4});
  computeVertexNormals(g);
  // Sum of 2A n: (0, 0, 16) + (1, 0, 0).
  const double length = std::sqrt(16.0 * 16.0 + 1.0);
  EXPECT_NEAR(g.normals[0], 1 / length, 1e-12);
  EXPECT_NEAR(g.normals[2], 16 / length, 1e-12);
}

TEST(VertexNormals, IsolatedVertexGetsUnitZ) {
  Geometry g = mesh({0, 0, 0, 1, 0, 0, 0, 1, 0, 3, 3, 3}, {0, 1, 2});
  computeVertexNormals(g);
  EXPECT_EQ(g.normals[9], 0);
  EXPECT_EQ(g.normals[10], 0);
  EXPECT_EQ(g.normals[11], 1);
}

}  // namespace
}  // namespace shellsim
