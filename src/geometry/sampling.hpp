// Choosing simulation nodes from a dense surface (private to the library).
//
// Wicke et al. 2005, section 5 ("Fiber Creation"), picks the simulation nodes with "an adapted
// version of the clustering algorithm described in [PGK02]" (Pauly, Gross, Kobbelt 2002,
// "Efficient simplification of point-sampled surfaces", section 3.2, hierarchical clustering).
// The adaptation here, in clusterSurface:
//   1. PGK02 hierarchical clustering: split clusters recursively along the principal axis of
//      their covariance, through the centroid. Instead of PGK02's size threshold, the cluster
//      with the largest area is split next until the requested count is reached, so the count
//      is met exactly before step 2; clusters whose normals vary too much are always split
//      first (PGK02's variation criterion), in normal space so the two sheets of a thin part
//      separate in one cut.
//   2. A few Lloyd iterations (nearest centroid, then centroids again) even out the cluster
//      sizes and shapes, which binary splits leave up to 2:1 in area and elongated. A point
//      may only join a centroid whose mean normal is within kMaxNormalAngleDegrees of its
//      own, so relaxation never pulls the bottom of a thin plate into a top cluster.
//   3. Clusters that still violate the normal criterion are split in normal space again.
//   4. Points without area (vertices no triangle references) take no part in 1-3 and then
//      join the nearest compatible cluster, so no node is massless.
//   5. Each node sits on the member point nearest the cluster's area-weighted centroid: the
//      nodes are a subset of the input points ("we can control which points on the surface
//      become simulation nodes", Wicke 2005, sec. 5), exactly on the surface. The price is
//      a quantisation of up to half the input spacing, visible when clusters hold only a few
//      points each.
#pragma once

#include <cstdint>
#include <vector>

#include "shellsim/geometry.hpp"

namespace shellsim {

// A cluster is split when a member normal deviates from the cluster's area-weighted mean
// normal by more than this. PGK02 bound the surface variation lambda_0 / (lambda_0 + lambda_1
// + lambda_2) of the position covariance instead; a cone on the (oriented) normals is used
// here because it is what tells the two sheets of a thin part apart, whose points are
// almost coplanar locally. Two points with opposite normals can never share a cluster: that
// needs a cone of at least 90 degrees.
inline constexpr double kMaxNormalAngleDegrees = 60;

// Neighbours used for the area of a point-cloud point (pointAreas).
inline constexpr int kPointAreaNeighbours = 12;

// Lloyd iterations after the hierarchical split (fewer when nothing moves any more).
inline constexpr int kRelaxationIterations = 8;

// Area each input point represents, m^2, (nVertices).
//   Mesh: one third of the area of each incident triangle (barycentric areas); they sum to
//     the mesh area, and a vertex no triangle references gets 0.
//   Point cloud: the area of the point's Voronoi cell in its tangent plane, among its
//     kPointAreaNeighbours nearest neighbours, clipped to the disk of radius r_k / 2 (r_k the
//     distance to the farthest of them). Inside that disk the cell is exact: a Voronoi
//     vertex at distance d is the centre of an empty circle through p of radius d, which only
//     involves points within 2 d of p. The bisector with a neighbour q is taken in 3D
//     restricted to the plane (x . (q - p)_t <= |q - p|^2 / 2), so a point of the opposite
//     sheet of a thin part, right below p, does not cut the cell. Points at the same position
//     share one cell equally. The tangent plane is the input normal's, or a plane fit to the
//     neighbours. No rescaling: a cloud has no reference area. On a regular sampling interior
//     cells are exact; a cell on an open boundary reaches about r_k / 2 past the last sample.
// Throws InputError for empty or non-finite positions, bad triangle indices, or a point
// cloud with fewer than 3 points.
[[nodiscard]] std::vector<double> pointAreas(const Geometry& surface);

// Area each input point represents as a node of a meshless model, m^2, (nVertices): for a mesh
// the mixed Voronoi areas of Meyer, Desbrun, Schroeder and Barr (2003): the part of each
// triangle nearer to the corner than to the other two, or in an obtuse triangle half of it to
// the obtuse corner and a quarter to each other one; they sum to the mesh area and follow where
// the vertices are, not how the triangles pair them. Barycentric areas do not: on a grid whose
// diagonals alternate they are 4/3 and 2/3 of a cell in a checkerboard, and a model whose
// stiffness follows the node's area then lets a checkerboard ripple relax its bending (the
// fiber model's plates sagged 3.5 % more than Kirchhoff's at any resolution). A point cloud's
// as pointAreas. Throws as pointAreas.
[[nodiscard]] std::vector<double> voronoiAreas(const Geometry& surface);

struct NodeSampling {
  std::vector<double> positions;        // node positions, (nNodes, 3), m: the member point
                                        // nearest the cluster's area-weighted centroid
  std::vector<double> normals;          // unit node normals, (nNodes, 3): the normalised
                                        // area-weighted mean of the member normals
  std::vector<double> areas;            // sum of the member points' areas, (nNodes), m^2
  std::vector<int32_t> clusterOfPoint;  // node index of each input point, (nInputPoints)
  std::vector<int32_t> sourcePoint;     // input point each node sits on, (nNodes)

  [[nodiscard]] int32_t nodeCount() const { return static_cast<int32_t>(areas.size()); }
};

struct SamplingParams {
  int32_t targetNodeCount = 0;  // > 0: aim for this many nodes (all points if more)
  double spacing = 0;           // > 0, m: aim for clusters about this wide, i.e. for
                                // area / spacing^2 nodes; neighbouring nodes are then about
                                // this far apart (median nearest-node distance 0.85-1.0 x)
};

// Clusters the dense surface into simulation nodes (see the pipeline at the top). Normals
// come from the input when present (renormalised), else from computeVertexNormals for a
// mesh or estimateNormals for a point cloud. Nodes are numbered by their lowest member
// point index. The result is the same for any thread count.
// Exactly one of targetNodeCount and spacing must be set; the node count after relaxation
// is within a few percent of the target (empty clusters are dropped, normal splits add).
// A target of at least the point count makes every point its own node.
// Throws InputError for empty input, non-finite or zero-length values, normals of the wrong
// size, bad triangle indices, a point cloud of fewer than 3 points, or bad parameters.
[[nodiscard]] NodeSampling clusterSurface(const Geometry& surface, const SamplingParams& params);

}  // namespace shellsim
