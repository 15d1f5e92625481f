// Penalty contact between and within the triangle meshes of the bodies (gingold2004
// section 4.3, notes section 9).
//
// Detection. Each body's collision surface (Model::contactMesh) keeps three AabbTrees, over
// its triangles, its vertices and its edges, built when the body's topology changes
// (fracture) and refit otherwise; a vertex's box is inflated by the search distance, an
// edge's by half of it. Overlapping boxes, within a body and between bodies, give the
// candidate vertex-face and edge-edge pairs, each met once.
//
// Pairs and features. A candidate within the search distance becomes a contact on the
// feature that holds its closest point: a vertex against a face's interior, an edge or a
// vertex (closestOnTriangle), or two edges' interiors (edge-edge pairs whose closest point
// is an end point are the vertex's). Each feature pair is kept once, so that a vertex
// near the shared edge of two faces is not pushed twice. Left out, within one body: pairs
// that share a node, and pairs closer than twice their touching distance in the rest shape
// (closest points of the primitives, not their nodes): that includes the two sides of a
// fresh crack (they coincide in the rest shape), and nothing a fold can bring into contact
// (a U of diameter d takes pi d / 2 of sheet), while the neighbours of a sharp crease, one
// ring apart, collide. An edge pair is left out too when an end of one edge is left
// out against a face at the other, so that an edge contact never starts where the end's
// contact was missing (it would start deep, with up to 1/2 k delta^2 at once). The paper
// insets contact from the mesh boundary by delta instead; the rest-shape rule keeps crack
// edges colliding with the rest of the body while exempting exactly the neighbours the
// crack separated. Rigid fragments (rigid_fragments.hpp) take no part [ours]: Bullet moves
// them against the obstacles and each other, and the shell and its fragments pass through
// each other (driven nodes that jump once a millisecond and feel no reaction would pump
// energy into the shell).
//
// Energy. A contact has nodes x_0..x_3 with weights w_k (vertex-face: 1, -w_a, -w_b, -w_c;
// edge-edge: 1 - s, s, -(1 - t), -t), a unit normal n from the second primitive to the
// first and the distance d = n . sum_k w_k x_k, found at detection. Its energy is
//   E = 1/2 k (delta - d)^2  for d < delta, else 0,
//   dE/dx_k = -k (delta - d) w_k n,   Gauss-Newton Hessian  k w_k w_l n n^T,
// delta the touching distance, k = kappa m / dt_s^2 (ContactDef). With n and w frozen, d is
// linear in x; at the positions where they were found it is the true distance and, by
// the envelope theorem (the closest point minimizes the distance), the frozen gradient is
// the true distance's gradient: the explicit step finds the contacts at every force
// evaluation and so integrates the true penalty field; the implicit solve freezes them
// over one Newton solve (found with a margin at the step's start) and minimizes the
// frozen energy exactly (the frozen d stays signed: a node pushed past a face is pulled
// back, not through).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/aabb_tree.hpp"
#include "core/assembler.hpp"
#include "core/vec3.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

struct Body;
struct IntersectingTriangles;  // shellsim/world.hpp

struct ContactPair {
  std::array<int32_t, 4> body;   // body of each node
  std::array<int32_t, 4> node;   // vertex-face: vertex, face corners; edge-edge: p0, p1, q0, q1
  std::array<double, 4> weight;  // d = normal . sum_k weight[k] x_k, m
  Vec3 normal;                   // unit
  double gap = 0;                // delta, m
  double stiffness = 0;          // k, N/m
};

class MeshContact {
 public:
  MeshContact() = default;
  // `stableStep`: the stable explicit step of the world at the start, s (> 0).
  MeshContact(const ContactDef& def, double stableStep);

  [[nodiscard]] const ContactDef& def() const { return def_; }
  [[nodiscard]] bool enabled() const { return def_.enabled; }
  // kappa / dt_s^2, 1/s^2: a node of mass m gets the penalty spring k = m times this, against
  // another mesh (of the lighter side) or a penalty obstacle.
  [[nodiscard]] double stiffnessPerMass() const { return def_.stiffness / stableStepSquared_; }
  // 1 / dt_s^2, 1/s^2: the stiffness per mass of kappa = 1.
  [[nodiscard]] double stiffnessPerKappa() const { return 1.0 / stableStepSquared_; }
  // Where a body's mid-surface touches a penalty obstacle, m: half its touching thickness.
  [[nodiscard]] double obstacleClearance(const Body& body) const;
  // The largest touching distance any pair of these bodies can have, m.
  [[nodiscard]] double widestTouching(std::span<const Body> bodies) const;

  // Every contact within its touching distance plus `margin` (m, >= 0) at the bodies'
  // current positions, in a fixed order; replaces `pairs`.
  void findPairs(std::span<const Body> bodies, double margin, std::vector<ContactPair>& pairs);

  // Triangle pairs that intersect (trianglesIntersect, exact) at the bodies' current
  // positions, self and between bodies, without the pairs contact leaves out (sharing a
  // node, neighbours in the rest shape).
  [[nodiscard]] int64_t countIntersections(std::span<const Body> bodies);
  // The same pairs, in a fixed order.
  [[nodiscard]] std::vector<IntersectingTriangles> listIntersections(std::span<const Body> bodies);

 private:
  struct BodyMesh {
    bool valid = false;
    uint64_t topology = 0;
    int32_t nodeCount = 0;
    std::vector<int32_t> triangles;      // (nTriangles, 3)
    std::vector<int32_t> edges;          // (nEdges, 2), first < second
    std::vector<int32_t> triangleEdges;  // (nTriangles, 3), edge k opposite corner k
    Incidence edgeFaces;                 // the sides 3 t + k of triangles t that are each edge
    std::vector<double> restEdge;        // (nTriangles), longest rest edge, m
    std::vector<double> edgeRestLength;  // (nEdges), m
    std::vector<int32_t> vertices;       // (nVertices), the nodes of the triangles, ascending
    std::vector<double> boxes;           // scratch, (n, 6)
    AabbTree faces;                      // over the triangles, not inflated
    AabbTree points;                     // over the vertices, inflated by the search distance
    AabbTree edgeBoxes;                  // over the edges, inflated by half of it
    // The body's own primitive pairs closer than closeReach in the rest shape that share no
    // node, as sorted keys first << 32 | second (vertex node and triangle; edges and
    // triangles with first < second): the rest shape is fixed per topology, so they are
    // found once (findCloseAtRest) and looked up at every candidate rebuild.
    double closeReach = -1;  // m; < 0: not found since the last rebuild
    std::vector<uint64_t> closeVertexFaces, closeEdgePairs, closeTrianglePairs;
  };
  // Whether the triangle pair trianglePairCandidates_[i] intersects now (exact; pairs moving
  // with a rigid fragment never do).
  [[nodiscard]] bool candidateIntersects(std::span<const Body> bodies, size_t i) const;
  // Refreshes the body's mesh and trees at its positions, every box inflated by search / 2.
  void update(const Body& body, size_t index, double search);
  double touching(const Body& a, const Body& b) const;
  // Makes the candidate list cover every primitive pair within `reach` (m) of each other;
  // true if it was rebuilt.
  bool refreshCandidates(std::span<const Body> bodies, double reach);
  // Whether the body's mesh must be rebuilt: new topology, node or triangle count.
  [[nodiscard]] static bool stale(const BodyMesh& mesh, const Body& body);
  // Whether primitives with nodes a and b of one body (a vertex and a face, two edges or two
  // faces) are left out of contact: they share a node, or they were closer than `reach` in
  // the rest shape. bound: the sum of their longest rest edges (the node distance past
  // which they cannot be that close; a vertex has none).
  [[nodiscard]] static bool closeAtRest(const Body& body, std::span<const int32_t> a,
                                        std::span<const int32_t> b, double reach, double bound);
  // Fills the mesh's close* lists: every pair of its primitives for which closeAtRest
  // holds at `reach` (m) without a shared node.
  static void findCloseAtRest(const Body& body, BodyMesh& mesh, double reach);

  ContactDef def_;
  double stableStepSquared_ = 0;  // s^2
  std::vector<BodyMesh> meshes_;
  // Scratch, reused between calls.
  // kind: 0 vertex-face interior, 1 vertex-edge, 2 vertex-vertex, 3 edge-edge; node keys
  // ordered so that both ways of finding a feature pair agree.
  struct FeatureKey {
    int kind;
    std::array<int64_t, 4> ids;
    auto operator<=>(const FeatureKey&) const = default;
  };
  std::vector<std::pair<FeatureKey, ContactPair>> found_;
  // The candidate list (a Verlet list): primitive pairs within builtReach_ of each other at
  // builtPositions_, after the exclusions; rebuilt by refreshCandidates when a node has
  // moved too far or a topology changed.
  struct PrimitivePair {
    int32_t bodyA, a;  // vertex-face: body and node of the vertex; edge-edge: body, edge
    int32_t bodyB, b;  // body and triangle; body and edge
  };
  std::vector<PrimitivePair> vertexFaceCandidates_, edgeEdgeCandidates_;
  std::vector<PrimitivePair> trianglePairCandidates_;  // bodyA, triangle a; bodyB, triangle b
  std::vector<std::vector<double>> builtPositions_;    // per body, (nNodes, 3)
  double builtReach_ = 0;                              // m
  bool candidatesValid_ = false;
};

// Sum of the pairs' energies at the bodies' positions, J; adds dE/dx into gradients[b]
// ((nNodes, 3) of body b) where gradients[b] is not empty.
double addContactGradient(std::span<const ContactPair> pairs, std::span<const Body> bodies,
                          std::span<const std::span<double>> gradients);

// The same for one body's positions x with the other bodies held where they are: pairs
// that do not touch body b are skipped. For the implicit solve.
double addBodyContactGradient(std::span<const ContactPair> pairs, std::span<const Body> bodies,
                              size_t b, std::span<const double> x, std::span<double> gradient);
// Adds the Gauss-Newton diagonal blocks k w_k^2 n n^T of body b's nodes, of the pairs
// active at x (body b's positions, the others where they are), to `diagonal`, shape
// (nNodes, 3, 3).
void addBodyContactDiagonal(std::span<const ContactPair> pairs, std::span<const Body> bodies,
                            size_t b, std::span<const double> x, std::span<double> diagonal);

}  // namespace shellsim
