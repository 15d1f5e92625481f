// Thick shells from a surface (steinemann section 3): an inner surface S' offset inwards
// from the input surface S, grown in small steps without ever intersecting S or itself.
//
// A shell vertex i is the pair (v_i on S, v'_i = v_i - d_i n_i on S'), depth d_i >= 0
// along the extrusion direction -n_i; a shell element is a triangle t of S with its copy t'
// on S' (a prism). The shell is consistent when
//   (a) no triangle of S' crosses a triangle of S or another triangle of S' properly (an
//       edge through the other's interior, decided with exact predicates: touching at
//       shared vertices or edges, which neighbouring triangles always do, does not count),
//       and t' crosses no triangle of S, its own t included;
//   (b) no element is inverted: each of the three tetrahedra its prism splits into (along
//       the side diagonals of the smallest-index rule, the split neighbouring prisms share)
//       keeps the orientation of an inward extrusion or is flat. This catches t' folding
//       over at a crease, which (a) cannot see. [ours: the paper checks only (a)]
// S itself is the input and is not tested against itself.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shellsim/geometry.hpp"

namespace shellsim {

enum class ThickenMethod {
  kFront,         // section 3.2.3: every vertex moves each iteration, colliding pairs revert
  kSingleVertex,  // section 3.2.2: one vertex at a time, halving its step until it fits
};

struct ThickenOptions {
  double depth = 0;  // epsilon, the shell's thickness where there is room, m, > 0
  ThickenMethod method = ThickenMethod::kFront;
  int32_t stepsPerDepth = 5;  // k: a vertex reaches its depth in k steps, [1, 1000]
  // Section 3.2.4: cast a segment of length 2 epsilon from each vertex along -n and let the
  // vertex go at most gapFraction of the way to the first triangle it meets (the paper
  // halves it; 0.45 leaves a tenth of the gap between facing inner surfaces), in k steps.
  // Off: every vertex aims at epsilon in steps of epsilon / k.
  bool precomputeSteps = true;
  double gapFraction = 0.45;  // (0, 0.5]
  // A vertex stops when its step, halved on every collision, falls below this fraction of
  // epsilon (the paper's epsilon_min, a value it does not give), (0, 1).
  double minStepFraction = 1e-3;
  // Cross-check the finished shell with every pair of overlapping triangles (exact; about
  // as costly as the generation itself): ThickShell::intersectingPairs, invertedElements.
  bool verify = true;
};

struct ThickShell {
  std::vector<double> inner;      // v'_i, (nVertices, 3), m
  std::vector<double> depth;      // d_i, (nVertices), m, in [0, epsilon]
  std::vector<double> direction;  // -n_i, unit, (nVertices, 3)
  std::vector<double> maxDepth;   // D_i, the depth vertex i aimed at, (nVertices), m
  // Statistics. A collision is a rejected move: one per colliding element pair found in
  // front propagation, one per halving in single-vertex propagation (Table 1 counts these).
  int64_t collisions = 0;
  int64_t iterations = 0;     // front: passes over all vertices; single vertex: moves tried
  int64_t triangleTests = 0;  // triangle pairs tested with exact predicates
  double seconds = 0;         // wall time of the generation (without verification)
  int32_t thinVertices = 0;   // vertices that ended below 0.99 epsilon
  // The thin vertices in groups joined by mesh edges (ears, legs, horns), the largest first.
  struct ThinRegion {
    int32_t vertices = 0;
    std::array<double, 3> centre{};  // mean position of its vertices on S, m
    double thinnest = 0;             // its smallest depth, m
  };
  std::vector<ThinRegion> thinRegions;
  double minDepth = 0, meanDepth = 0;  // m
  // Verification (ThickenOptions::verify), -1 when not run.
  int64_t intersectingPairs = -1;  // triangle pairs breaking (a)
  int64_t invertedElements = -1;   // elements breaking (b)
  // Triangle pairs of S that cross (the input intersects itself; the paper requires it not
  // to); S' triangles still at depth 0 there repeat those crossings and are not counted in
  // intersectingPairs.
  int64_t inputIntersectingPairs = -1;
};

// Grows S' inwards from `mesh` (a triangle mesh: manifold, consistently oriented with
// outward normals, holes allowed, no vertex outside every triangle; analyzeTopology and
// meshRefusals). The extrusion directions are angle-weighted vertex pseudo-normals (Thürmer
// and Wüthrich 1998; the paper gives no formula), which follow creases better than
// area-weighted ones. Deterministic: the result does not depend on the number of threads.
// Throws InputError naming the problem (a point cloud, a refused mesh, bad options).
[[nodiscard]] ThickShell thickenMesh(const Geometry& mesh, const ThickenOptions& options);

// Counts what breaks consistency, by brute force over every pair of overlapping triangle
// boxes of S and S' (an AABB tree; exact predicates): the triangle pairs of (a) and the
// elements of (b), and the crossings of S with itself apart. Used by thickenMesh's
// verification and the tests.
struct ShellConsistency {
  int64_t intersectingPairs = 0;
  int64_t invertedElements = 0;
  int64_t inputIntersectingPairs = 0;
};
[[nodiscard]] ShellConsistency checkShellConsistency(std::span<const double> outer,
                                                     std::span<const double> inner,
                                                     std::span<const int32_t> triangles);

// The shell as one closed-where-possible mesh any viewer opens: S (vertices 0..n-1, the
// input's triangles), S' (vertices n..2n-1, triangles reversed so they face into the
// cavity, i.e. out of the shell's material), and a wall of two triangles along every
// boundary edge joining S to S'. Vertex colours: white on S, red on S' (steinemann Fig. 7).
[[nodiscard]] Geometry thickShellGeometry(const Geometry& mesh, const ThickShell& shell);

// The same from positions: S `outer` and S' `inner`, both (nVertices, 3), over S's
// `triangles`; no colours.
[[nodiscard]] Geometry thickShellSurfaces(std::span<const double> outer,
                                          std::span<const double> inner,
                                          std::span<const int32_t> triangles);

}  // namespace shellsim
