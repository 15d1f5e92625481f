// The high-resolution surface of wicke2005 section 6: a dense surface (triangle mesh or
// point cloud) whose vertices, the passive points, follow the coarse simulation nodes.
//
// Binding (rest state, once per passive point c):
//   p_0 .. p_n   the K = n + 1 nearest nodes that no crack disc hides from c (p_0 nearest,
//                p_n farthest), K = SurfaceBindingParams::neighbours.
//   Plane. Tangent basis (T1, T2) of the least-squares (PCA) plane of the p_i, its normal
//   oriented by c's input normal (arbitrary but fixed when the input has none). With
//   u_i = (T1.(p_i - pbar), T2.(p_i - pbar)), G = sum_i u_i u_i^T (2x2) and a_i = G^-1 u_i
//   (sum_i a_i = 0), the least-squares linear map from tangent coordinates to positions is
//       f_a(x) = sum_{i>=1} a_ia (x_i - x_0),   a = 1, 2        (3x2, translation-free)
//   and the plane normal is N(x) = f1 x f2 / |f1 x f2|. At rest f_a = T_a (the heights of the
//   p_i are uncorrelated with u in the PCA basis), so N(p) is the least-squares plane normal
//   of the paper, with the orientation chosen above. Deformed, N' = N(p') is a smooth
//   function of the node positions with no sign ambiguity (no eigenvector): it rotates with
//   any rotation of the nodes and flips only if the neighbourhood itself folds over.
//   Frames, eq. (17), i = 1..n:  e_i^1 = p_i - p_0,  e_i^2 = N x e_i^1 / |e_i^1|,
//                                e_i^3 = e_i^2 x e_i^1 / |e_i^1|
//   Coordinates, eq. (18):       C_i^k = <c - p_0, e_i^k> / |e_i^k|^2
//   Weights, eq. (21):           t_i = |p_i - c| / |p_n - c|,  w(t) = (1/t - 1)^2,
//                                W_i = w(t_i) / sum_j w(t_j)  (normalised; coords_ holds
//                                W_i C_i^k, weights_ the W_i)
//   w(t) = (1/t - 1)^2 is smooth on (0, 1], w(0+) = inf, w(1) = 0 and w'(1) = 0, so a node
//   entering or leaving the neighbourhood as the farthest one (t = 1) changes c' with zero
//   weight and zero slope. Note that the frame of p_n itself always has weight 0: p_n only
//   sets the scale and helps fit the plane (as printed in the paper). t = 0 happens only when
//   c coincides with p_0 (nodes closer than 1e-12 of the node bounding box to p_0 are
//   dropped); then every C_i = 0 and c' = p'_0 exactly, whatever the weights.
// Deformation (every call):
//   c'_i = p'_0 + C_i^1 e_i^1' + C_i^2 e_i^2' + C_i^3 e_i^3'                  eq. (19)
//   c'   = sum_i W_i c'_i                                                     eq. (20)
//   with e_i^1' and e_i^3' of eq. (17) on the deformed nodes and N' = N(p'), but [ours]
//   e_i^2' = alpha_i f1' + beta_i f2', where e_i^2 = alpha_i f1 + beta_i f2 at rest (e_i^2
//   lies in the rest plane, which f spans). The paper's e_i^2' = N' x e_i^1' / |e_i^1'| has
//   unit length whatever the stretch, so a point beside a chord keeps its distance from it:
//   under an anisotropic stretch the surface was off by up to 0.6 node spacings at 1.8 times
//   the length, and a pulled sheet's edges went ragged. f' follows every affine motion of
//   the nodes, so the surface of a flat sheet moved affinely within its plane is now exact,
//   rigid motions stay exact, and e_i^2' is still a smooth function of the nodes. As
//   sum_i W_i C_i^2 e_i^2' = (sum_i W_i C_i^2 alpha_i) f1' + (sum_i W_i C_i^2 beta_i) f2',
//   the two sums are stored per point.
// Normals (only when the input has normals; meshes and points alike, no recomputation from
// the deformed triangles, so deform() needs no topology). A normal must turn with the
// surface AT c, but N' above is the plane of the whole neighbourhood, centred near its
// centroid: on a bent sheet it is off by ~ h / R (h the node spacing, R the bending radius),
// and it jumps where the neighbour set changes. Instead every NODE j gets the normal
// transform of the tangent map AT the node: j = q_0 and its K - 1 nearest visible nodes q_i,
// offsets d_i = q_i - q_0 in the tangent basis of their least-squares plane, u_i (2), are fitted
// by a quadratic, x_i - x_0 ~ F u_i + Q(u_i, u_i), in least squares with a small Tikhonov term
// on Q (1e-2 of the mean diagonal of the scaled normal matrix, so one-sided or clustered
// neighbourhoods keep bounded weights); F = [f1 f2] is linear in the x_i with weights fixed at
// rest, like f above. A linear fit would give the tangent at the neighbourhood's centroid,
// off by a fraction of h / R, and by ~ h / R at the edge of a sheet; the quadratic one is
// second-order accurate at the node (fewer than 6 nodes or a singular fit: the linear fit).
// With F_j = [f1 f2 m], m = f1 x f2, rest and deformed:
//     M_j = F_j'^-T F_j^T = [f2' x m', m' x f1', m'] / |m'|^2  [f1 f2 m]^T    (3x3)
// (the inverse transpose of the map F_j' F_j^-1: exact for normals under the neighbourhood's
// affine motion; independent of the tangent basis chosen at rest, so node frames need no
// orientation). Passive point c blends them with the weights of eq. (21) over ALL of its
// bound nodes, p_0 included (omega_i = w(|p_i - c| / |p_n - c|), normalised; c on a node
// takes that node's M alone):
//     n' = normalise(sum_i omega_i M_{j_i} n)
// M_j is the rotation itself for a rigid motion (n' = R n exactly), is the identity at rest,
// follows shear and anisotropic stretch, and is continuous over the surface (a node enters or
// leaves a point's set as its farthest, with weight 0; each node's transform is fitted around
// the node, where the blend gives it most weight). This replaces the "blended frame
// rotation" the brief suggested: the frames of eq. (17) share the point's one
// N', so their blend has the same ~ h / R error. Cost: per deform, one 3x3 per node; per
// point, K matrix-vector products. A node whose frame is degenerate (collinear neighbours,
// or collapsed at run time) contributes nothing; if nothing is left, n' = n.
// Degenerate neighbourhoods. When fewer than 3 distinct nodes are visible, or the visible
// ones are (nearly) collinear (smaller tangent eigenvalue of G below 1e-4 of the larger), or
// no frame has positive weight, the point is bound by PURE TRANSLATION with its nearest
// visible node: c' = c + p'_0 - p_0 (counted by translationCount()); its normal still uses
// the node transforms. A point that no candidate node is visible from (isolated by discs)
// translates with its nearest node. At run time a frame whose edge collapsed (|e_i^1'| = 0)
// keeps only its p'_0 + C^1 e^1' part, and a neighbourhood that collapsed to a line
// (f1' x f2' = 0) uses the rest N in eq. (17). Finite node positions never give NaN.
// Cracks (wicke2005 sec. 7.2). A passive point binds only to nodes whose rest segment from the
// point crosses no disc (core/crack.hpp). Candidates are the 4K nearest nodes, widened to at
// most 32K while fewer than K are visible. Mesh triangles are never stretched across a
// crack. Rule: a triangle STRADDLES when one of its rest edges crosses a disc. It keeps the
// side of its rest centroid g: each corner v whose segment g -> v crosses a disc is replaced
// by a split vertex, at v's rest position and with v's normal and colour, bound to the nodes
// visible from g (distances still measured from v). So when the nodes on the two sides
// separate, the triangle follows g's side and the crack opens between triangles. Split
// vertices are shared by the triangles that need the same binding of the same input vertex
// (same node list); one whose binding equals the input vertex's own is not created. Split
// vertices are appended after the input vertices in creation order (triangles in index
// order, corners in order), so the result is deterministic. A vertex no triangle uses any
// more stays (deformed, harmless), like a tombstone.
// rebind(all, new): a passive point's K nearest visible nodes change only if one of its
// bound segments (from the point, or from g for a split vertex) crosses a new disc: exactly
// those points are re-bound with all discs; then triangles with a rest edge crossing a new
// disc are split by the rule above (with all discs).
// Parallelism: binding and deformation run per point with TBB; every point is computed
// alone from fixed inputs, so results are bit-identical for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/crack.hpp"
#include "core/spatial.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {

// deform() leaves out, once the shell has cracks or pieces, triangles with an edge stretched
// beyond this factor of its rest length: they span a tear (see deform()).
inline constexpr double kTornStretch = 3.0;

struct SurfaceBindingParams {
  int neighbours = 8;  // K = n + 1 nodes per passive point, [3, 32] (clamped to the node count)
};

class SurfaceBinding {
 public:
  // restNodes (nNodes, 3): rest node positions, nNodes >= 3. dense: the rest high-resolution
  // surface (mesh or point cloud; normals optional, colours carried along). cracks: discs
  // in rest space. Throws InputError for non-finite values, a zero normal, a bad triangle
  // index, a bad disc or neighbours outside [3, 32].
  SurfaceBinding(std::span<const double> restNodes, const Geometry& dense,
                 const SurfaceBindingParams& params = {}, std::span<const CrackDisc> cracks = {});
  SurfaceBinding(const SurfaceBinding&) = delete;
  SurfaceBinding& operator=(const SurfaceBinding&) = delete;
  SurfaceBinding(SurfaceBinding&&) noexcept;
  SurfaceBinding& operator=(SurfaceBinding&&) noexcept;
  ~SurfaceBinding();

  // The deformed dense surface for node positions x (nNodes, 3): positions by eq. (19)-(20),
  // normals (if the input had them) by the node transforms, the (split) triangles and
  // colours. Throws InputError when x is not (nNodes, 3). Not to be called on one binding
  // from two threads at once (it writes a per-node scratch).
  [[nodiscard]] Geometry deform(std::span<const double> x) const;
  // The same into a caller-owned geometry; reuses its capacity (no allocation once sized).
  // Triangles and colours are copied on every call (a few ms for millions of triangles).
  void deform(std::span<const double> x, Geometry& out) const;
  // Positions (vertexCount(), 3) and, if non-empty, normals (vertexCount(), 3) only.
  void deformPoints(std::span<const double> x, std::span<double> positions,
                    std::span<double> normals) const;

  // After new crack discs appeared (allCracks includes newCracks): re-binds the passive
  // points a new disc hides a bound node from, then splits the triangles that straddle a
  // new disc. Returns the number of vertices re-bound plus split vertices created.
  int rebind(std::span<const CrackDisc> allCracks, std::span<const CrackDisc> newCracks);

  // After fracture split the nodes into pieces (labels, (nNodes)): re-binds every vertex
  // (and node normal frame) whose bound nodes lie in more than one piece to nodes of the
  // piece of its nearest visible node only, so no point is stretched between pieces that
  // drift apart (a piece can separate through broken fibers alone, with no disc between).
  // Later bindings keep to pieces too, and deform() leaves out the triangles whose corners
  // follow different pieces. Returns the number of vertices re-bound.
  int separatePieces(std::span<const int32_t> pieces);

  [[nodiscard]] int32_t vertexCount() const { return static_cast<int32_t>(frames_.size()); }
  [[nodiscard]] int32_t inputVertexCount() const { return inputVertexCount_; }
  [[nodiscard]] int32_t nodeCount() const { return static_cast<int32_t>(restNodes_.size() / 3); }
  [[nodiscard]] std::span<const double> restNodes() const { return restNodes_; }  // (nNodes, 3)
  [[nodiscard]] int neighbours() const { return k_; }
  // The input vertex each vertex copies (itself for input vertices), (vertexCount()).
  [[nodiscard]] std::span<const int32_t> sourceVertex() const { return source_; }
  // Triangles with split vertices, (nTriangles, 3).
  [[nodiscard]] std::span<const int32_t> triangles() const { return triangles_; }
  // Node indices bound to vertex v, nearest first, (neighbours()); unused slots repeat p_0.
  [[nodiscard]] std::span<const int32_t> boundNodes(int32_t v) const;
  // Vertices bound by pure translation (degenerate neighbourhood, see the header).
  [[nodiscard]] int32_t translationCount() const;
  // Bytes held by the binding's arrays (capacity; the kd-tree estimated).
  [[nodiscard]] size_t memoryBytes() const;

 private:
  struct BindScratch;

  // The K nearest distinct nodes to c visible from `origin`, nearest first, into chosen
  // (K entries); the nearest node whatever the discs say if none is visible. Returns the count.
  size_t visibleNodes(const Vec3& c, const Vec3& origin, int32_t* chosen,
                      BindScratch& scratch) const;
  // Least-squares map of the nodes chosen[0..count): fills plane (count - 1, 2) with a_i and
  // f1, f2 at rest; false (plane zeroed) when degenerate.
  bool fitPlane(const int32_t* chosen, size_t count, const Vec3* orientation, double* plane,
                Vec3& f1, Vec3& f2) const;
  // Replaces a node's linear fit (plane, f1, f2) by the tangent map at chosen[0] of a
  // quadratic least-squares fit, when count >= 6 and it is well conditioned.
  void quadraticTangents(const int32_t* chosen, size_t count, Vec3& f1, Vec3& f2,
                         double* plane) const;
  // Node j's frame for the normal transforms (its own K nearest visible nodes).
  void bindNode(size_t j, BindScratch& scratch);
  void bindNodes(std::span<const int32_t> nodes);
  // Whether a segment origin -> nodes[i] (K nodes) crosses one of `discs`; reach is the
  // segments' longest length (reachOf).
  bool crossesNewDisc(const Vec3& origin, const int32_t* nodes, double reach,
                      std::span<const CrackDisc> discs) const;
  // The distance from origin to the farthest of its K nodes.
  [[nodiscard]] double reachOf(const Vec3& origin, const int32_t* nodes) const;
  // nodeTransforms_ for node positions x, and a vertex's normal from them.
  void computeNodeTransforms(std::span<const double> x) const;
  [[nodiscard]] Vec3 movedNormal(size_t v) const;
  // Binds vertex v (rest position restPositions_[v]) to the K nearest nodes visible from
  // `origin` (v's own position, or the centroid of the triangle for a split vertex).
  void bindVertex(size_t v, const Vec3& origin, BindScratch& scratch);
  // Binds the listed vertices in parallel (each from its origins_ row).
  void bindVertices(std::span<const int32_t> vertices);
  // Splits the triangles with a rest edge crossing one of `discs` (all cracks decide the
  // sides); returns the number of split vertices created.
  int splitTriangles(std::span<const CrackDisc> discs);
  void resizeVertices(size_t count);
  void moveVertex(size_t from, size_t to);
  [[nodiscard]] bool sameBinding(size_t a, size_t b) const;

  int k_ = 8;                          // nodes per vertex, K
  int32_t inputVertexCount_ = 0;       // vertices of the input geometry
  bool hasNormals_ = false;            // whether the input had normals
  bool hasColors_ = false;             // whether the input had colours
  std::vector<double> restNodes_;      // (nNodes, 3), m
  std::vector<int32_t> nodePiece_;     // (nNodes) piece labels, or empty (one piece)
  std::unique_ptr<PointKdTree> tree_;  // over restNodes_
  double nodeTolerance_ = 0;           // coincident-node distance, m
  std::vector<CrackDisc> cracks_;      // all discs so far, rest space

  // Per vertex (input vertices first, then split vertices); nV = vertexCount().
  std::vector<double> restPositions_;  // (nV, 3), m
  std::vector<double> restNormals_;    // (nV, 3), unit, or empty
  std::vector<float> colors_;          // (nV, 3), or empty
  std::vector<int32_t> source_;        // (nV): input vertex copied
  std::vector<double> origins_;        // (nV, 3): point the visibility is tested from, m
  std::vector<uint8_t> frames_;        // (nV): last frame with weight; 0: pure translation
  std::vector<int32_t> nodes_;         // (nV, K): p_0 .. p_n, nearest first
  std::vector<double> coords_;         // (nV, K-1, 3): W_i C_i^k, eq. (18) times eq. (20)
  std::vector<double> weights_;        // (nV, K-1): W_i of eq. (20)-(21), sum 1
  std::vector<double> planeWeights_;   // (nV, K-1, 2): a_i of the least-squares map f
  std::vector<double> across_;         // (nV, 2): sum_i W_i C_i^2 (alpha_i, beta_i), m
  std::vector<double> normalWeights_;  // (nV, K): omega_i over p_0 .. p_n (if normals)
  std::vector<double> frameNormals_;   // (nV, 3): rest N, the fallback of a collapsed plane
  // (nV): reachOf(origins_ row, nodes_ row), m. A crack's rebind tests each vertex against
  // the new discs; measuring the K distances of all vertices each time was most of its time.
  std::vector<double> reach_;

  std::vector<int32_t> triangles_;  // (nTriangles, 3), corners possibly split vertices

  // Node frames for the normal transforms (only when the input has normals).
  std::vector<int32_t> nodeFrameNodes_;  // (nNodes, K): node j's neighbourhood, j first
  std::vector<double> nodeFramePlane_;   // (nNodes, K-1, 2): its a_i
  std::vector<double> nodeRestFrame_;    // (nNodes, 3, 3): rows f1, f2, m at rest, or 0
  // (nNodes, 3, 3) row-major M_j of the last deform: scratch, so deform() must not run on
  // one binding from two threads at once.
  mutable std::vector<double> nodeTransforms_;
};

}  // namespace shellsim
