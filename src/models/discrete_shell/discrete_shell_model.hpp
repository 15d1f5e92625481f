// The discrete shells of Grinspun, Hirani, Desbrun and Schroeder 2003 (grinspun2003): a
// triangle mesh whose rest shape is the input mesh (curved or flat), with
//   W = k_L W_L + k_A W_A + k_B W_B                                 (slides "Dynamics")
//   W_L = sum_edges     (1 - |e|/|e0|)^2 |e0|          stretching, edge stencils (K = 2)
//   W_A = sum_triangles (1 - A/A0)^2 A0                area change, triangle stencils (K = 3)
//   W_B = sum_hinges    (theta - theta0)^2 3|e0|^2/A0  bending, hinge stencils (K = 4),
//                       A0 = sum of the rest areas of the hinge's two triangles
// (W_B with the weight 3|e0|^2/A0 = |e0|/h0 of the slides "Flexural Energy (5 of 6)",
// h0 = A0 / (3 |e0|) a sixth of the two heights; theta the signed dihedral angle of
// discrete_shell_kernel.hpp, the difference wrapped to [-pi, pi]). Every interior edge of
// a consistently oriented manifold mesh is one hinge; boundary edges have none.
// The stencils and their derivatives are in discrete_shell_kernel.hpp. Forces: the hinge
// and the edge of every interior edge are evaluated together, eight hinges at a time in
// vectorized lanes, the triangles eight at a time too, the boundary edges one by one; every
// stencil writes its
// own gradient slots, which the assembler's gather pass (core/assembler.hpp) sums per node
// in a fixed order, so results are bit-identical for any thread count.
//
// Stiffness per element. A single k_L, k_A for the whole mesh (as the slides write it)
// makes the membrane depend on the mesh resolution (sum over edges of |e0| grows as 1/a
// for spacing a), so the material map sets one stiffness per element:
//   edge e:      E_e = 1/2 k_e (l - L)^2,      k_e = ks sum_{T contains e} A_T / L^2
//   triangle T:  E_T = 1/2 k_T (A - A0)^2,     k_T = ka / A0
//   hinge h:     E_h = 1/2 k_h d^2,            k_h = 2 k_B 3 |e0|^2 / A0
// (k_e = 2 k_L / L and k_T = 2 k_A / A0 in the slides' notation).
//
// Material map (E, nu, h, rho -> ks, ka, k_B). Derivation on the equilateral mesh of
// spacing a, small strain eps (2x2, tangent plane), edge directions t:
//  (a) Membrane. Plane stress stores, per unit area,
//        W = mu' |eps|^2 + lambda'/2 tr(eps)^2,  mu' = E h / (2 (1 + nu)),
//        lambda' = E h nu / (1 - nu^2).
//      An edge strains by l - L = L t^T eps t; give each triangle half of each of its
//      edges' springs: 1/2 ks A_T sum_{3 edges} (t^T eps t)^2, and for three directions
//      60 degrees apart sum (t^T eps t)^2 = 3/8 tr(eps)^2 + 3/4 |eps|^2. The area term adds
//      1/2 k_T (A0 tr eps)^2 = ka/2 tr(eps)^2 A0. Per unit area the mesh stores
//        (3/8 ks) |eps|^2 + (3/16 ks + ka/2) tr(eps)^2,
//      isotropic for any ks, ka. Matching both Lame constants:
//        ks = 8 mu' / 3 = 4 E h / (3 (1 + nu)),
//        ka = lambda' - mu' = E h (3 nu - 1) / (2 (1 - nu^2)).
//      ka < 0 for nu < 1/3 (springs alone have Poisson ratio 1/3, Van Gelder 1998); a
//      negative area stiffness is not bounded below per triangle, so for nu < 1/3 we set
//      ka = 0 and choose ks to keep the AREAL (equibiaxial) stiffness exact:
//        uniform stretch eps I:  W = E h eps^2 / (1 - nu)  =  (3/2 ks + 2 ka) eps^2
//        -> ks = 2 E h / (3 (1 - nu)),  ka = 0      (nu < 1/3; a warning says so)
//      What holds: the equibiaxial energy E h eps^2 / (1 - nu) per area is exact (to
//      O(eps^3)) on EVERY mesh, whatever the triangles' shapes: every edge strains by eps
//      and every area by 2 eps, so each triangle stores (3/2 ks + 2 ka) eps^2 A_T. On an
//      equilateral mesh, for nu >= 1/3, the whole plane-stress energy (shear and uniaxial
//      included) is exact; for nu < 1/3 the membrane has Poisson ratio 1/3 and its shear
//      stiffness is (1 + nu) / (2 (1 - nu)) of the true one (0.93 at nu = 0.3). On other
//      meshes shear and uniaxial stiffness hold only approximately and depend on direction.
//  (b) Bending. On a quadratic surface with shape operator K the hinge angle of an edge
//      of the equilateral mesh is, to first order in a K,
//        theta = (d^T K d - e^T K e / 4) / h = a (3 k_m - k_t) / (2 sqrt 3),
//      d the apex offset from the edge midpoint, h = sqrt(3)/2 a its height, k_m, k_t the
//      normal curvatures across and along the edge (the piecewise-linear interpolant's
//      gradient jump across the edge). With 3|e0|^2/A0 = 2 sqrt 3, one hinge's energy per
//      unit of its diamond area A0/3 is k_B (3 k_m - k_t)^2; the mesh has one hinge of each
//      of the three edge directions per 3 diamonds, and summing (3 k_m - k_t)^2 over three
//      directions 60 degrees apart gives the energy density
//        k_B [ (k1 + k2)^2 + 2 (k1 - k2)^2 ]          (k1, k2 principal curvatures)
//      independent of how the mesh is turned. A cylinder (k1 = kappa, k2 = 0) stores
//      3 k_B kappa^2; the plate stores D kappa^2 / 2 with D = E h^3 / (12 (1 - nu^2)), so
//        k_B = D / 6                                                     [N m]
//      What holds: on an equilateral mesh a cylinder of any direction stores exactly the
//      plate energy D kappa^2 / 2 per area (to O((kappa a)^2)) averaged over the three edge
//      directions; single hinges do not (with one edge direction along the cylinder's
//      axis, those hinges store 3x the mean and the two other directions nothing).
//      Doubly curved bending is not the plate's: the hinge energy is
//      D/2 [k1^2 + k2^2 - 2/3 k1 k2], a plate with Poisson ratio -1/3 whatever nu is (a
//      sphere stores 2/3 D kappa^2 against the plate's (1 + nu) D kappa^2). On other meshes
//      the cylinder energy holds only approximately: on the right-angled grid of the sheet
//      primitive (alternating diagonals) measured 0.99x the plate for a cylinder along the
//      grid and 1.51x along a diagonal (tests/models/test_discrete_shell.cpp) with the
//      uniform k_B; (c) replaces that by per-hinge scales.
//  (c) Per-hinge scales, s_h = (v(x2) + v(x3)) / 12 (DiscreteShellParams::calibrateBending,
//      on by default), v the equivalent valence of a hinge apex: its triangle count times
//      2 pi over the sum of its triangles' angles at it (a vertex on a straight boundary
//      counts as if the mesh were mirrored across it). Why: the energy density of (b) is what
//      the mesh stores when it is FORCED into a smooth shape. Under a load, nodes of a mesh
//      with two kinds of vertices relax against each other, and the mesh is softer than (b).
//      The sheet and cylinder primitives' right-angled grid with alternating diagonals has
//      valence-8 vertices (where diagonals meet) and valence-4 ones. With grid spacing a,
//      w = 1/2 x^T K x plus a shift delta of every valence-8 vertex, and stiffnesses
//      beta D on the grid-line hinges and 2 alpha D on the diagonals (the uniform map:
//      alpha = beta = 1), the hinge angles are
//        grid line along x:  a K_yy + 2 delta / a      (along y: a K_xx + 2 delta / a)
//        diagonals:          -+sqrt 2 a K_xy - 2 sqrt 2 delta / a     (the two directions)
//      so per area, with u = 2 delta / a^2, the mesh stores
//        D/2 [beta (K_xx + u)^2 + beta (K_yy + u)^2 + 4 alpha (K_xy^2 + u^2)],
//      and the nodes relax to u = -beta tr K / (2 beta + 4 alpha), leaving
//        D/2 [beta (K_xx^2 + K_yy^2) + 4 alpha K_xy^2 - beta^2 tr(K)^2 / (2 beta + 4 alpha)].
//      Uniform map: D/2 [5/6 (K_xx^2 + K_yy^2) - 1/3 K_xx K_yy + 4 K_xy^2]; on a simply
//      supported square plate (sin x sin y shape: the integrals of K_xx^2, K_yy^2, K_xy^2
//      and K_xx K_yy are equal) 4/3 of the plate's energy, so the centre deflection is
//      3/4 of the plate's: measured 0.745 at 32 x 32 cells (tests/dynamics/
//      test_discrete_shell_validation.cpp). A cylinder of any direction stores exactly
//      D kappa^2 / 2 after relaxing for beta = 4/3, alpha = 2/3, and then the density is
//        D/2 [K_xx^2 + K_yy^2 - 2/3 K_xx K_yy + 8/3 K_xy^2],
//      the isotropic plate with Poisson ratio -1/3, the same as the equilateral mesh of (b)
//      (whose vertices are all alike and do not relax). The apex-valence rule gives
//      exactly these: the grid-line hinges' apexes are valence-8 vertices (s = 16/12), the
//      diagonals' valence-4 ones (s = 8/12), and every hinge of the equilateral mesh s = 1.
//      It is an interpolation between the two lattices derived here, not derived for other
//      meshes (irregular meshes: unverified; a right-angled grid with all diagonals one way
//      has valence 6 everywhere, s = 1, and keeps the direction dependence of (b)). On a
//      curved rest shape the angle sum also carries the Gaussian curvature: a geodesic
//      sphere's valence-5 vertices (angle sum ~5 pi / 3) count as ~6, which is what they
//      stand for; the rolled grid of the cylinder primitive is developable and scales as
//      the flat grid.
//      Measured with it (simply supported square plate, nu = 0.3, centre deflection /
//      plate theory): 1.0246, 1.0056, 1.0011, 0.99996 at 8, 16, 32, 64 cells a side.
//      What does not hold: the hinge energy is a plate with Poisson ratio -1/3 whatever nu
//      is, so only problems where nu does not enter (plates with w = 0 on straight edges,
//      cylinders) come out right; a strip free to curve across its width bends with
//      (1 - 1/9) D (the elastica test: 3-6% too soft at nu = 0).
//  Raw overrides (DiscreteShellParams): stretchStiffness = k_L, areaStiffness = k_A,
//  bendStiffness = k_B replace the map uniformly, as the slides' formulas read.
//  MaterialDef::stiffness, if set and stretchStiffness is not, is the spring constant k_e
//  of every edge (N/m, as in mass_spring).
//  Masses: m_i = rho h sum_{T contains i} A_T / 3 (lumped).
#pragma once

#include <Eigen/Core>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/assembler.hpp"
#include "models/model.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

struct DiscreteShellParams {
  std::optional<double> stretchStiffness;  // k_L of W_L for every edge, N
  std::optional<double> areaStiffness;     // k_A of W_A for every triangle, N/m
  std::optional<double> bendStiffness;     // k_B of W_B for every hinge, N m
  // hessianBlocks() projects each stencil's Hessian to positive semi-definite (eigenvalues
  // clamped at 0) so that the assembled matrix is, for Newton-type implicit steps.
  bool projectHessian = false;
  // Scale each hinge's stiffness by its apexes' valences (header comment (c)). Only with
  // the material map (no bendStiffness); false keeps the uniform k_B = D / 6.
  bool calibrateBending = true;
};

class DiscreteShellModel : public Model {
 public:
  // mesh: the rest configuration, a manifold triangle mesh with consistently oriented
  // triangles (open boundaries allowed); every vertex must belong to a triangle. Throws
  // InputError naming the element for a point cloud, a non-finite position, an index out of
  // range, a triangle with a repeated vertex or zero rest area, an edge shared by more than
  // two triangles, two triangles that traverse an edge in the same direction, or a vertex
  // in no triangle. Warnings (a Poisson ratio the membrane cannot represent) are appended
  // to `warnings`.
  DiscreteShellModel(const Geometry& mesh, const MaterialDef& material,
                     const DiscreteShellParams& params = {},
                     std::vector<std::string>* warnings = nullptr);

  [[nodiscard]] std::string name() const override { return "discrete_shell"; }
  [[nodiscard]] int32_t nodeCount() const override { return nodeCount_; }
  // Edges + triangles + hinges.
  [[nodiscard]] int64_t elementCount() const override {
    return static_cast<int64_t>(edgeRestLength_.size() + triangleRestArea_.size() +
                                hingeRestAngle_.size());
  }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return mass_; }
  using Model::addGradient;
  using Model::energy;
  [[nodiscard]] std::unique_ptr<ModelWorkspace> makeWorkspace() const override;
  [[nodiscard]] EnergyParts energy(std::span<const double> x,
                                   ModelWorkspace* workspace) const override;
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override;
  // Blocks of the edges, then the triangles, then the hinges (core/assembler.hpp layout).
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override;
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override;
  // 2 / sqrt(lambda), lambda Gershgorin's bound on the largest eigenvalue of
  // M^-1/2 K M^-1/2 at rest (absolute row sums added stencil by stencil; at rest each
  // stencil's Hessian is the rank-one k w w^T): never above the exact rest limit of
  // velocity Verlet (measured 0.74-0.78 of it), computed once at construction for about
  // the cost of one gradient evaluation. Stretched or folded states stiffen a little.
  [[nodiscard]] double stableTimeStep() const override { return stableStep_; }
  // The mesh with positions x and area-weighted vertex normals.
  [[nodiscard]] Geometry surface(std::span<const double> x) const override;
  [[nodiscard]] ContactMesh contactMesh() const override { return {triangles_, restPositions_}; }
  // The input's shape, fixed for the run: the quasi-Newton stand-in built there is kept
  // from frame to frame (Model::standInPositions).
  [[nodiscard]] std::span<const double> standInPositions() const override { return restPositions_; }

  [[nodiscard]] int64_t edgeCount() const { return static_cast<int64_t>(edgeRestLength_.size()); }
  [[nodiscard]] int64_t triangleCount() const {
    return static_cast<int64_t>(triangleRestArea_.size());
  }
  [[nodiscard]] int64_t hingeCount() const { return static_cast<int64_t>(hingeRestAngle_.size()); }
  [[nodiscard]] std::span<const int32_t> edgeNodes() const { return edgeNodes_; }
  [[nodiscard]] std::span<const int32_t> hingeNodes() const { return hingeNodes_; }
  [[nodiscard]] std::span<const double> edgeStiffness() const { return edgeStiffness_; }
  [[nodiscard]] std::span<const double> triangleStiffness() const { return triangleStiffness_; }
  [[nodiscard]] std::span<const double> hingeStiffness() const { return hingeStiffness_; }
  [[nodiscard]] std::span<const double> hingeRestAngles() const { return hingeRestAngle_; }
  // Signed dihedral angles theta (rad) and bending energies E_h (J) of every hinge at x,
  // each (nHinges) or empty.
  void hingeValues(std::span<const double> x, std::span<double> angles,
                   std::span<double> energies) const;

 private:
  void buildForceLayout(std::span<const double> restPositions, std::span<const int32_t> hingeEdge);

  int32_t nodeCount_ = 0;
  bool projectHessian_ = false;
  bool hasEdgeTerm_ = false, hasAreaTerm_ = false, hasBending_ = false;  // a k != 0
  std::vector<int32_t> triangles_;         // (nTriangles, 3), the input triangles
  std::vector<double> restPositions_;      // (nNodes, 3), m, the input's positions, for contact
  std::vector<int32_t> edgeNodes_;         // (nEdges, 2), first < second
  std::vector<double> edgeRestLength_;     // L, (nEdges), m
  std::vector<double> edgeStiffness_;      // k_e, (nEdges), N/m
  std::vector<double> triangleRestArea_;   // A0, (nTriangles), m^2
  std::vector<double> triangleStiffness_;  // k_T, (nTriangles), N/m^3
  std::vector<int32_t> hingeNodes_;        // (nHinges, 4): x0, x1 (edge), x2, x3 (apexes)
  std::vector<double> hingeRestAngle_;     // theta0, (nHinges), rad
  std::vector<double> hingeStiffness_;     // k_h, (nHinges), N m
  std::vector<double> mass_;               // (nNodes), kg
  // Force evaluation (addGradient, DiscreteShellModel.cpp). The hinge and the edge stencils
  // of each interior edge run fused, kLanes hinges at a time
  // (discrete_shell::hingeEdgeEnergyBatches), triangles kLanes at a time too
  // (triangleEnergyBatches), boundary edges one by one. Every
  // stencil writes its gradient into its own slots of slotGradient_, summed per node by one
  // gather pass. A family whose stiffnesses are all zero has no slots (skipped).
  std::vector<int32_t> boundaryEdges_;        // edges with no hinge, (nBoundaryEdges)
  std::vector<int32_t> laneOffsets_;          // (nBatches, 4, kLanes) hinge nodes n as 3 n (the
                                              // index of x_n in x); padding: node 0
  std::vector<double> laneParameters_;        // (nBatches, 4, kLanes): theta0, k_h, L and k_e of
                                              // the hinge's edge (theta0, L: the lane kernel's
                                              // values at rest); padding: 0
  std::vector<int32_t> laneTriangleOffsets_;  // (nTriangleBatches, 3, kLanes), 3 n; padding: 0
  std::vector<double>
      laneTriangleParameters_;  // (nTriangleBatches, 2, kLanes): k_T, A0 (kernel value)
  // Parallel tasks of the force evaluation: chunks of kChunkBatches batches of one family.
  static constexpr int64_t kChunkBatches = 32;
  // Per chunk of hinge (triangle) batches: 1 if a lane's node is the last node, whose
  // gather must not read past the positions (discrete_shell::hingeEdgeEnergyBatches).
  std::vector<uint8_t> hingeChunkReachesEnd_, triangleChunkReachesEnd_;
  Incidence slotIncidence_;  // node -> offsets into slotGradient_ of its stencil slots
  int64_t hingeBatches_ = 0, boundaryEdgeBatches_ = 0, triangleBatches_ = 0;  // with slots
  double stableStep_ = 0;                                                     // s
  // Per-stencil gradients (the workspace's slotGradient), layout in lanes:
  // (hingeBatches_, 4, kLanes, 3) for hinge + edge, then (boundaryEdgeBatches_, 2, kLanes,
  // 3), then (triangleBatches_, 3, kLanes, 3): this many values.
  size_t slotCount_ = 0;
};

}  // namespace shellsim
