// Surface geometry as read from files or generated: a triangle mesh or a point cloud.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace shellsim {

// A named quantity per vertex that a model reports (a fiber body's `damage`, its
// `plastic_strain`), written with the frames: a PLY vertex property, a VTP point array.
struct VertexScalar {
  std::string name;           // letters, digits and '_' (isVertexScalarName)
  std::vector<float> values;  // (nVertices)
  bool operator==(const VertexScalar&) const = default;
};

// Whether `name` may name a vertex scalar: not empty, letters, digits and '_' only (a PLY
// property or VTP array name the readers of both formats accept).
[[nodiscard]] bool isVertexScalarName(std::string_view name);

// A triangle mesh (triangles non-empty) or a point cloud (triangles empty).
// Flat arrays, row-major; the shape of each is written beside it.
struct Geometry {
  std::vector<double> positions;   // vertex positions, (nVertices, 3), metres
  std::vector<double> normals;     // unit vertex normals, (nVertices, 3), or empty
  std::vector<float> colors;       // vertex colours in [0, 1], (nVertices, 3), or empty
  std::vector<int32_t> triangles;  // vertex indices, (nTriangles, 3), counter-clockwise
  // The connected piece of each vertex (the fragments of a torn body, numbered from 0), or
  // empty. Frames carry it where the model tracks pieces: a PLY vertex property `piece`, a
  // VTP point and cell array `Piece`, OBJ groups `g piece_<n>`.
  std::vector<int32_t> pieces;
  std::vector<VertexScalar> vertexScalars;  // each (nVertices); empty: none

  [[nodiscard]] int32_t vertexCount() const { return static_cast<int32_t>(positions.size() / 3); }
  [[nodiscard]] int32_t triangleCount() const { return static_cast<int32_t>(triangles.size() / 3); }
  [[nodiscard]] bool hasNormals() const { return !normals.empty(); }
  [[nodiscard]] bool isPointCloud() const { return triangles.empty(); }
};

// Axis-aligned bounds of the vertices; both corners are zero for an empty geometry.
struct Bounds {
  double min[3] = {0, 0, 0};
  double max[3] = {0, 0, 0};
};
[[nodiscard]] Bounds computeBounds(const Geometry& geometry);

// The part of `geometry` whose vertices `inside` (given a vertex's x, y, z) keeps: of a point
// cloud the points inside; of a mesh the triangles with all three corners inside and the
// vertices they use, renumbered in their order (normals, colours, pieces and vertex scalars
// follow their vertices). The result may be empty.
[[nodiscard]] Geometry cropGeometry(const Geometry& geometry,
                                    const std::function<bool(const double*)>& inside);

// Edge topology of a triangle mesh, as `shellsim info` reports it.
struct MeshTopology {
  int64_t edgeCount = 0;                // unique undirected edges
  int64_t boundaryEdgeCount = 0;        // edges with exactly one incident triangle
  int64_t nonManifoldEdgeCount = 0;     // edges with three or more incident triangles
  int64_t degenerateTriangleCount = 0;  // zero area or repeated vertex index
  int64_t connectedComponentCount = 0;  // over vertices referenced by triangles
  int64_t unreferencedVertexCount = 0;
  // What makes a run slow or a model refuse a mesh, beyond its topology:
  int64_t smallestComponentVertexCount = 0;  // vertices of the smallest component
  int64_t duplicateVertexCount = 0;  // referenced vertices at the position of an earlier one
  // Interior manifold edges whose two triangles run along them the same way (their normals
  // disagree: the orientation flips across the edge).
  int64_t inconsistentEdgeCount = 0;
  double medianEdgeLength = 0;  // m, over the unique edges of non-degenerate triangles
  // The smallest height (twice the area over the longest side) of a non-degenerate
  // triangle, m, and that triangle: explicit steps scale with it.
  double smallestHeight = 0;
  int32_t smallestHeightTriangle = -1;
  // Non-degenerate triangles lower than kSliverHeightRatio times the median edge length.
  int64_t sliverTriangleCount = 0;
};
// A triangle is a sliver when its height is below this fraction of the median edge.
inline constexpr double kSliverHeightRatio = 0.1;
// What the mesh models (discrete_shell, inelastic_shell) refuse: non-manifold edges,
// flipped orientation, degenerate triangles; one line each, empty when none.
[[nodiscard]] std::vector<std::string> meshRefusals(const MeshTopology& topology);
// What any model runs on but suffers from: slivers (explicit steps set by the lowest
// triangle), coincident vertices (a seam the sides come apart at), tiny components (loose
// debris); one line each, empty when none. A body whose nodes are the mesh's vertices gets
// these as warnings at set-up; `shellsim info` prints them.
[[nodiscard]] std::vector<std::string> meshWarnings(const MeshTopology& topology);

// What repairMesh does beyond what it always does (merge coincident vertices, drop
// degenerate and repeated triangles, orient consistently, split non-manifold edges and
// vertices so that the sheets meeting there come apart whole).
struct RepairOptions {
  int64_t minComponentFaces = 0;  // drop components of fewer triangles (0, 1: keep all)
  // m; > 0: isotropic remeshing to triangles of about this edge (slivers gone, the stable
  // step set by the material and this size); 0: no remeshing.
  double targetEdgeLength = 0;
  // Remesh to the input's median edge length (targetEdgeLength is then ignored).
  bool remeshAtMedianEdge = false;
  int remeshIterations = 3;  // [1, 100]
};
struct RepairReport {
  MeshTopology before, after;
  int64_t componentsRemoved = 0;
  double remeshEdgeLength = 0;  // m, the edge length remeshed to; 0: not remeshed
};
// Repairs a triangle mesh in place with CGAL's polygon-mesh processing (normals, colours
// and other per-vertex data are dropped: the vertices change). InputError for a point
// cloud, bad options, or nothing left.
RepairReport repairMesh(Geometry& mesh, const RepairOptions& options = {});
[[nodiscard]] MeshTopology analyzeTopology(const Geometry& mesh);

// Drops the vertices of a triangle mesh that no triangle uses (with their normals and
// colors; triangles renumbered, order kept) and returns the map old index -> new index (-1
// for dropped ones).
std::vector<int32_t> removeUnreferencedVertices(Geometry& mesh);

// Merges vertices (or points) at exactly the same position into the one of lowest index,
// which keeps its normal and colour; triangles are renumbered and those left with a
// repeated corner dropped, the order of the rest kept. Returns the map old index -> new
// index (merged vertices share one). Meant for the meshless fiber model, where two nodes at
// one place are one node; a mesh model keeps a seam's two sides apart.
std::vector<int32_t> weldCoincidentVertices(Geometry& geometry);

// Area-weighted vertex normals of a triangle mesh; replaces `mesh.normals`.
void computeVertexNormals(Geometry& mesh);

// Normals of a point cloud from a plane fit to each point's k nearest neighbours, then
// oriented consistently over each connected piece of the cloud by propagating along a
// minimum spanning tree of the kNN graph (Hoppe et al. 1992), with each piece's
// orientation chosen so its normals point away from its centroid on average.
// Replaces `cloud.normals`. Throws InputError when the cloud has fewer than 3 points.
void estimateNormals(Geometry& cloud, int neighbourCount = 12);

}  // namespace shellsim
