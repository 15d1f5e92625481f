// The point-sampled thin shell of wicke2005 (sections 3 and 4): every node is the centre
// of a few fibers (fiber_network.hpp); their arc lengths measure the node's area and their
// tangential angles its mean curvature (fiber_kernel.hpp).
//
// Energy of node j, the centre of the fibers k in F_j, n_j = |F_j|:
//   A_k = pi/4 l_k^2,  A_j = (1/n_j) sum_k A_k                                    eq. (4)
//   E_s(j) = K_s,j / 2 [ (A_j - A_j0)^2 + (1/n_j) sum_k (A_k - A_k0)^2 ]           eq. (5)
//   H_j = (1/n_j) sum_k theta_k                                                   eq. (7)
//   E_b(j) = K_b,j / 2 A_j0 [ alpha (H_j - H_j0)^2                              eq. (6), (8)
//                             + (1 - alpha) (1/n_j) sum_k w_k^2 (theta_k - theta_k0)^2 ]
// The paper's bending energy is the alpha = 1 term alone: a function of the mean angle, i.e.
// of the mean curvature kappa1 + kappa2, which is a plate with Poisson ratio 1 in bending
// (W = D/2 (kappa1 + kappa2)^2): anticlastic bending is free, and a cantilever plate sagged
// 19% (k = 8) to 30% (k = 12) below its stiffness. The per-fiber term, with each fiber's
// angle normalised to the node's mean sensitivity (w_k = tr Qbar / tr Q_k, see (b) below),
// measures the directional curvatures: averaged over isotropic fibers it stores
// 3/8 (kappa1^2 + kappa2^2) + 1/4 kappa1 kappa2 per unit of the mean term's kappa1^2, a plate
// with Poisson ratio 1/3. The blend alpha = (3 nu - 1) / (1 + nu) gives the material's nu for
// every nu in [0, 1/2) ("Poisson ratio in bending" below). Both terms are calibrated together
// (b).
// Eq. (8) integrates over the current area A_j, but the force of eq. (11) uses the rest
// area A_j0; we take A_j0 in the energy, so the forces are its exact negative gradient and
// bending does not couple to stretching. (Eq. (11) also mixes the indices i and j; the
// energy above is the definition, the gradient is derived from it.)
//
// Gradient, three passes, none sharing a write (DESIGN.md principle 5); fiber_model_eval.cpp:
//   1. per chunk of consecutive centre nodes (parallel; the chunks and every order of summation
//      are fixed by the plan, see the members), in groups of 8 nodes, one per SIMD lane: the
//      patch frames N_j; l_k, theta_k and their gradients for the fibers k in F_j, as rows of
//      8 lanes of a fiber_kernel.hpp FiberBatch; A_j - A_j0 = (1/n_j) sum_k (A_k - A_k0) and
//      H_j - H_j0 = (1/n_j) sum_k (theta_k - theta_k0) (A_j0, H_j0 are the means of the rest
//      values; as sums of differences they are exactly 0 at rest); E_s(j), E_b(j); the
//      multipliers dE/dl_k = K_s/n_j [(A_j - A_j0) + (A_k - A_k0)] pi/2 l_k and dE/dtheta_k =
//      K_b A_j0 / n_j [alpha (H_j - H_j0) + (1 - alpha) w_k^2 (theta_k - theta_k0)]; the
//      fiber's gradient (g_e, g_q) w.r.t. its reduced coordinates pulled back to its three
//      slots (fiberSlotGradient), and dE/dN_j through the patch frame (see "Chain rule"
//      below) as shares c_i1 dE/df1 + c_i2 dE/df2 of the patch members; all of it added into
//      the chunk's own accumulator, then into the gradient for the nodes no other chunk
//      touches. The rest lengths and angles are measured with the same code
//      (measureRestShape), so the rest state is force free bit for bit.
//   2. per node touched by several chunks (parallel): their parts, in chunk order.
//   3. energies: the chunks' sums, in chunk order.
//
// Stiffness mapping (material -> K_s,j, K_b,j), per node from its rest fibers and its area
// a_j (the true surface area the node represents, m^2: its Voronoi area, geometry/sampling.hpp
// voronoiAreas, or a clustered node's sum of its points' areas; with a third of each triangle
// instead, a grid whose diagonals alternate gave its nodes 4/3 and 2/3 of a cell in a
// checkerboard, K_b,j alternated by a factor of 2, and the solution relaxed its bending through
// a checkerboard ripple: every plate sagged about 3.5 % more than Kirchhoff's at any
// resolution):
//  (a) Stretching. An equibiaxial stretch by (1 + eps) scales every l~ by (1 + eps) (l~ is
//      homogeneous of degree 1), so A_k - A_k0 = (2 eps + eps^2) A_k0 and
//        E_s(j) = K_s,j / 2 (2 eps)^2 M_j + O(eps^3),  M_j = A_j0^2 + (1/n_j) sum_k A_k0^2.
//      Plane stress stores W = E h / (2 (1 - nu^2)) (2 eps^2 (1 + nu)) = E h eps^2 / (1 - nu)
//      per unit area, hence
//        K_s,j = E h a_j / (2 (1 - nu) M_j)                                   [N/m^3]
//      Note: for isotropically distributed fibers the energy (5) expands to
//      A0^2 [5/2 (e_xx^2 + e_yy^2) + 3 e_xx e_yy + 2 e_xy^2], a plane-stress form with
//      Poisson ratio 3/5 whatever nu is: the mapping matches the areal (bulk) stiffness
//      E h / (1 - nu) exactly; shear and uniaxial stiffness follow from the model.
//  (b) Bending. Bend the rest surface around node j by a small curvature kappa (a symmetric
//      2x2 tensor in the node's tangent frame): a neighbour at tangent-plane offset d rises by
//      1/2 d^T kappa d along N, so to first order each fiber's angle changes by
//        theta_k - theta_k0 = Q_k : kappa   (2x2 Q_k, the fiber's bending sensitivity).
//      Q_k is MEASURED, not derived: the node's rest patch and fiber ends are lifted by
//      +-eps (1/2 d^T kappa d) N for kappa = e_x e_x^T, e_y e_y^T and the twist, and theta_k
//      evaluated about the patch frame's normal N_j(x) by the kernel (central differences,
//      heights 1e-5 of the patch). That includes the tilt of N_j, which the energy also sees:
//      where the patch is one-sided (an edge) it tilts with the bending and changes the angle of
//      a fiber kinked within the tangent plane at first order; the earlier closed form
//      Q_k = -1/2 sum_ends (N . grad theta_k) d d^T left it out and made edge nodes about 20 %
//      too stiff. For a straight symmetric fiber of length l along u, Q_k = 3/4 l u u^T (the
//      natural spline turns by 3/4 of the circle's angle, fiber_kernel.hpp).
//      In v = (kxx, kyy, sqrt2 kxy) (an isometry of symmetric tensors) with q = (Qxx, Qyy,
//      sqrt2 Qxy), E_b(j) = K_b,j A_j0 / 2 v^T B_j v + O(kappa^3), the node's bending form
//        B_j = alpha qbar qbar^T + (1 - alpha) (1/n_j) sum_k w_k^2 q_k q_k^T,   qbar = mean q_k.
//      The plate stores D/2 v^T C v per unit area, C = [[1, nu, 0], [nu, 1, 0], [0, 0, 1 - nu]],
//      D = E h^3 / (12 (1 - nu^2)). A scalar K_b,j matches one measure of B_j to C:
//      - interior nodes: the cylinder energy averaged over its direction psi,
//        e = (c^2, s^2, sqrt2 c s), mean_psi e^T C e = 1, so
//          K_b,j = D a_j / (A_j0 <B_j, M>),  M = mean_psi e e^T = [[3/8, 1/8, 0], [1/8, 3/8, 0],
//                                                                  [0, 0, 1/4]];
//        on a direction-balanced node (an interior node of a regular grid with 8 neighbours)
//        B_j is proportional to C and every mode (cylinder in any direction, sphere, saddle,
//        twist) is exact. Elsewhere (12 or 16 neighbours on a grid, where the axes' fibers
//        outnumber the diagonals', clustered or jittered nodes) the weights w_k^2 are FITTED
//        first (ours): the w_k^2 >= their floor nearest (1 / tr Q_k)^2 tr Qbar^2 in relative
//        terms for which B_j = lambda C for some lambda > 0, six linear equations in the
//        n_j + 1 unknowns (fitBendWeights in fiber_model.cpp; free-edge nodes and nodes whose
//        fibers span too few directions keep the normalised weights). Then every mode is exact
//        at the node. On the 12-neighbour grid the plate modes' energies went from 0.83 of
//        Kirchhoff's to 0.97 (64 cells), the simply supported plate's deflection at 32 cells
//        from 1.20 to 1.05 times (tests/dynamics/test_fiber_accuracy.cpp).
//        |w_k| is capped at 10, before and after the fit: a fiber that barely senses curvature
//        (tr Q_k near 0, e.g. kinked by a crack's rebuild) would otherwise make its angle's
//        stiffness w_k^2 grow without bound. In the torn poster a speck's fiber got w_k^2 =
//        1.3e22 (tr Q_k 1e-11 of the node's mean), its neighbour an acceleration of 7e21 m/s^2
//        and the run blew up at 0.385 s; an intact clustered sheet's largest w_k^2 is 60.
//      - nodes on the input surface's free edges (the fibers' ends leave an angular gap wider
//        than 3/4 pi around the node; the gap's bisector is the outward normal n, t the edge's
//        tangent; found on the crack-free network and kept through cracks): the plate there
//        carries no moment M_nn, so it bends as kappa = t t^T - nu n n^T and stores
//        D (1 - nu^2) / 2 per unit area; that mode is matched,
//          K_b,j = D (1 - nu^2) a_j / (A_j0 max(v_e^T B_j v_e, (1 - nu^2) <B_j, M>)),
//        never stiffer than the direction average (after cracks a node may keep fibers that
//        barely sense the mode). The direction average alone counts modes an edge node
//        cannot sense (its fibers run along the edge) and left it 2.7 times too stiff along
//        the edge: a clamped strip 2 cells wide bent 36 % short of the elastica, 9 nodes wide
//        9 % (python/examples/shell_accuracy.py; now +4 %). Crack edges keep the average.
//        What the edge nodes still miss is the twist at the edge (they store about a tenth
//        of it): on a simply supported plate, whose edges twist, the first mode's energy is
//        4 % low at 32 cells and the deflection 8 % high.
//  Poisson ratio in bending. Averaged over isotropic fibers the per-fiber term is the plate
//  form with nu = 1/3 and the mean term (H_j - H_j0)^2 the one with nu = 1 (W ~ (k1 + k2)^2);
//  the blend alpha qbar qbar^T + (1 - alpha) F is the plate form with
//    nu = (1 + alpha) / (3 - alpha),  i.e.  alpha = (3 nu - 1) / (1 + nu),
//  which is -1 at nu = 0, 0 at nu = 1/3, 1/3 at nu = 1/2. (The first version used the linear
//  interpolation (3 nu - 1) / 2 clamped at 0: nu < 1/3 bent as 1/3 and nu = 0.45 as 0.42.)
//  With alpha < 0 the energy in the angle changes, alpha (mean dtheta)^2 + (1 - alpha)
//  mean(w^2 dtheta^2), stays positive definite if mean(1 / w_k^2) < (1 - alpha) / (-alpha)
//  (Cauchy-Schwarz); every w_k^2 is floored at -alpha / (3/4 (1 - alpha)) (0.67 at nu = 0; a
//  regular grid's fibers, w_k^2 >= 0.73, are untouched), leaving a quarter of (1 - alpha).
//  Raw overrides: FiberParams::stretchStiffness / bendStiffness replace K_s,j / K_b,j for
//  every node. MaterialDef::stiffness, if set, is used as K_s for every node (N/m^3) unless
//  FiberParams::stretchStiffness is set; K_b keeps the mapping.
//  Masses: m_j = rho h a_j.
//
// Reference normals (the orientation of theta, eq. (38)). The curvature sign needs a normal
// at every centre node that follows the surface's rotation and cannot flip on a bent or
// crumpled surface. It must also be a FUNCTION OF THE POSITIONS that the energy is
// differentiated through: a normal held fixed while differentiating and updated between
// steps (our first version re-fitted a rotation per node each step) leaves a force term
// out, since theta of a fiber kinked within the tangent plane depends on N to first order;
// that made a vibrating sphere gain 1% of its energy per 20000 steps and a stiff drop gain
// energy at every step size.
// N_j is the oriented normal of the best-fit linear map from node j's rest patch to its
// current patch. Patch P_j: j and the ends of the fibers centred at j; when these are
// nearly collinear (smaller eigenvalue of G below 1e-2 of the larger) or fewer than 4 (a
// node with one fiber: the plane of the fiber itself would give theta = 0 whatever the
// bending, and pi once folded), the patch grows by rings of the "shares a fiber" relation, up to 3.
// With the rest tangent basis (T1, T2), T1 x T2 = N_j0 (the input normal), rest offsets d_i = x_i0
// - c0 (c0 the patch centroid) and their tangent coordinates u_i = (T1.d_i, T2.d_i):
//     G = sum_i u_i u_i^T (2x2),   c_i = G^-1 u_i,   sum_i c_i = 0
//     f_a = sum_{i in P_j} c_ia x_i   (a = 1, 2; linear in x, translation-free)
//     v = f1 x f2,   N_j = v / |v|.
// f = (f1, f2) minimises sum_i |(x_i - c) - F u_i|^2 over 3x2 maps F, so at rest
// f_a = T_a + N_j0 sum_i h_i c_ia (h_i the rest heights) and N_j ~ N_j0 tilted by the
// patch's best-fit plane. A rotation R of x turns f and N_j by R exactly: the energy is
// rotation invariant, so the net torque vanishes. The rest angles theta_k0 are evaluated
// with N_j(x0), so the rest state is force free whatever normals the input had.
// Chain rule, with g = dE/dN_j (theta's N-derivative, fiber_kernel.hpp, summed with the
// bending multipliers) and P = I - N N^T:
//     w = P g / |v|,   dE/df1 = f2 x w,   dE/df2 = w x f1,   dE/dx_i += c_i1 dE/df1 + c_i2 dE/df2
// and for the Hessian, with dv/df = [-[f2]x, [f1]x] and u = N_j:
//     d2(g.N)/dv2 = -(u g^T + g u^T + (g.u)(I - 3 u u^T)) / |v|^2,
//     d2(w.v)/df1 df2 = -[w]x  (w.(f1 x f2) = f1^T (-[w]x) f2).
//
// Inhomogeneity and anisotropy (section 7.3: "vary the stiffness constants of the individual
// fibers according to position or direction"). A region's stiffness scale multiplies K_s,j
// and K_b,j of the nodes inside. Anisotropy gives fiber k the factor
//   s_k = 1 + (ratio - 1) cos^2 phi_k    (phi_k: angle between its rest chord p2 - p1 and the axis)
// on its own terms, (A_k - A_k0)^2 in E_s and w_k^2 (theta_k - theta_k0)^2 in E_b; the mean
// terms stay isotropic. The mapping (a), (b) includes s_k (M_j = A_j0^2 + (1/n) sum s_k A_k0^2,
// w_k^2 -> s_k w_k^2 in c_j), so the direction-averaged stiffness is still the material's and
// the axis is `ratio` times stiffer than the cross direction in the per-fiber terms. With
// nu <= 1/3 (alpha = 0) bending is all per-fiber terms.
//
// Plasticity (section 7.1). The rest values are l0 = l_orig + l_plastic, theta0 = theta_orig +
// theta_plastic (eq. (22)). After every accepted step, for each active fiber:
//   |l - l0| > beta_l l0      =>  dl_plastic = min(eta_l dt, 1) (l - l0)          eq. (23), (25)
//   |theta - theta0| > beta_t =>  dtheta_plastic = min(eta_t dt, 1) (theta - theta0)  (24), (26)
//                                  gamma_theta -= alpha gamma_theta |dtheta_plastic|      eq. (29)
// Deviations: the yield threshold of (23) is a strain (beta_l l0), not a length, so one value
// fits every sampling density; the creep factor is capped at 1 so that a large eta dt cannot
// overshoot past the current shape. A_j0 and H_j0 follow as the means of the fibers' new rest
// values (A_k0 = pi/4 l0^2), so the new shape is force free; K_s,j, K_b,j keep their mapping.
// Creep makes the yield rate dependent: a fraction eta dt per step, so a stiff shell's impact
// (thousands of explicit steps of microseconds) yields almost nothing unless eta is huge, and
// then all elastic stress of a yielding fiber relaxes, not only the excess, so the shell goes
// limp wherever it yields. The `perfect` flow (an addition) is the rate-independent return
// mapping of an elastic-perfectly plastic material in these variables: after every step the
// rest value moves just enough that the deviation sits on the threshold (l0' = l / (1 +- beta_l),
// theta0' = theta -+ beta_theta), so the fiber keeps its yield stress and springs back by
// exactly beta on unloading, whatever the step.
// The node scalar "plastic_strain" is the mean over the node's fibers of the plastic stretch
// |l_plastic| / l_orig plus the plastic bending strain at the surfaces, kappa_p h / 2 with
// theta ~ 3/4 kappa l for a circular arc (fiber_kernel.hpp): |theta_plastic| h / (1.5 l_orig).
//
// Fracture (section 7.2). A fiber whose urgency u = max((l / l0) / gamma_l, |theta - theta0| /
// gamma_theta) (eq. (27), (28)) exceeds 1 breaks: it leaves the energy for good (a
// microcrack); a region's fracture scale s gives gamma_l = 1 + s (gamma_l - 1), gamma_theta =
// s gamma_theta. With a `delay` (an addition) a fiber breaks only once the time it spent
// with u > 1, minus the time it spent below, reaches the delay: explicit integration carries
// stress waves that overshoot a threshold for a few steps after every crack, and breaking on
// them crumbled torn sheets into node-sized shards. A node where a fiber broke in this step or
// during the cooldown before it, whose broken fibers make up `brokenRatio` of its fibers and which
// has no crack yet, is a crack candidate (eq. (28) chooses among fibers breaking now, not long
// broken); of all candidates the broken fiber with the largest urgency places the crack: a disc
// normal to the fiber's rest tangent at the node (e = (p2 - p1)/2, projected into the tangent
// plane), or with `crackNormal` kPrincipal (an addition) normal to the node's largest stretch
// fitted to all its fibers (principalStretchDirection in fiber_inelastic.cpp), with the mean
// rest distance from the node to its fiber ends as radius. The paper centres
// it at the node; we shift it along the normal halfway to the end of the fiber's more stretched leg
// (at the current positions), i.e. into the gap that opened, so the node keeps its intact side. At
// most one crack per step, then `cooldownSteps` steps without one. With `minPieceNodes` (an
// addition) a disc that would cut a piece of fewer nodes off a larger one, and part no two
// larger ones, is taken back (the state before it put back) and its node never seeds again:
// specks below the sampling's resolution. Likewise a node that a step's broken fibers leave
// without any active fiber (as centre or end) keeps the least overloaded of them, held from
// breaking from then on (kFiberHeld): without it such nodes flew off as one-node specks (10
// of the poster's 12 surface pieces at 2.5 s, 24 of the old balloon's 25). A crack rebuilds the
// network from the rest positions with no neighbour pair across any disc (fiber_network.hpp), then
// the normal patches, the rest angles and the stiffness mapping; each fiber that exists before and
// after (same centre and ends) keeps its plastic parts, its gamma_theta and its broken state. A
// node whose patch degenerates (its remaining neighbours nearly collinear: after a crack a spread
// under 0.05, see buildNormalPatches) loses its fibers instead of failing the run. Pieces are the
// connected components of the nodes joined by active fibers. A normal patch holds nodes of its
// node's piece only (patchPieces_, found before each rebuild, and a step whose breaks part pieces
// without a crack rebuilds too): pieces apart exchange no force (a patch across a parting oriented
// one piece's fibers by another's nodes, and a speck cut off the burst balloon was flung by its
// skin). A speck left with too few nodes for a patch loses its fibers: lone nodes that fall as
// points.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/crack.hpp"
#include "core/vec3.hpp"
#include "models/fiber/fiber_network.hpp"
#include "models/model.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

class PointKdTree;

namespace fiber {
struct FiberBatch;
}

// Simulation nodes of a fiber shell.
struct FiberNodes {
  std::vector<double> positions;  // (nNodes, 3), m: the rest configuration
  std::vector<double> normals;    // (nNodes, 3), unit outward normals (normalised if not)
  std::vector<double> areas;      // (nNodes), m^2: surface area each node represents, > 0
};

struct FiberParams {
  int neighbourCount = 8;  // k nearest neighbours of each node, [2, 32] (section 5)
  int samples = 4;         // arc-length samples per spline piece, [1, 16] (eq. (33))
  std::optional<double> stretchStiffness;        // raw K_s for every node, N/m^3
  std::optional<double> bendStiffness;           // raw K_b for every node, N/m
  std::optional<FiberPlasticityDef> plasticity;  // section 7.1; absent: elastic
  std::optional<FiberFractureDef> fracture;      // section 7.2; absent: never breaks
  std::optional<FiberAnisotropyDef> anisotropy;  // section 7.3
  std::optional<FiberResampleDef> resample;      // nodes added under stretch; absent: never
  std::vector<double> nodeStiffnessScale;        // (nNodes) factor on K_s,j and K_b,j, or empty (1)
  std::vector<double> nodeFractureScale;  // (nNodes) factor on gamma_l - 1, gamma_theta, or empty
};

class FiberModel : public Model {
 public:
  // Throws InputError naming the node for bad input (non-finite values, non-positive
  // area, zero normal, fewer than 3 nodes, coincident nodes) or a bad triangle index.
  // `outputTriangles` (nTriangles, 3), if given, turns surface() into a mesh.
  // Warnings (nodes with fewer than 2 fibers) are appended to `warnings`.
  FiberModel(const FiberNodes& nodes, const MaterialDef& material, const FiberParams& params = {},
             std::vector<int32_t> outputTriangles = {},
             std::vector<std::string>* warnings = nullptr);

  [[nodiscard]] std::string name() const override { return "fiber"; }
  [[nodiscard]] int32_t nodeCount() const override { return network_.nodeCount; }
  [[nodiscard]] int64_t elementCount() const override { return network_.fiberCount(); }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return mass_; }
  using Model::addGradient;
  using Model::energy;
  using Model::updateInelastic;
  [[nodiscard]] std::unique_ptr<ModelWorkspace> makeWorkspace() const override;
  [[nodiscard]] EnergyParts energy(std::span<const double> x,
                                   ModelWorkspace* workspace) const override;
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override;
  // The exact Hessian, one dense block per centre node over its normal patch (every pair of
  // patch nodes, centre by centre; zero for a centre without active fibers), computed in
  // parallel over centres.
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override;
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override;
  // 0.7 * 2 / sqrt(lambda), lambda the largest eigenvalue of M^-1 K at rest from 40 Lanczos
  // steps (Hessian-vector products by central differences of the gradient). Lanczos
  // approaches lambda_max from below; the factor 0.7 covers that and the stiffening of the
  // area terms under stretch (computed once, then cached).
  // After a resampling event, the smaller of that at rest and that at the positions of the
  // event (a stretched body is stiffer than at rest: the area terms grow like 3 l^2 - l0^2).
  [[nodiscard]] double stableTimeStep() const override;
  // The estimate above at positions x0, (nNodes, 3).
  [[nodiscard]] double stableStepAt(std::span<const double> x0) const;
  [[nodiscard]] Geometry surface(std::span<const double> x) const override;
  // With the workspace of a gradient evaluation at x (the step's last), the fibers' l and
  // theta are taken from it instead of measured again.
  InelasticReport updateInelastic(std::span<const double> x, double dt,
                                  ModelWorkspace* workspace) override;
  [[nodiscard]] uint64_t topologyVersion() const override { return topologyVersion_; }
  // An elastic body's rest shape (as an elastic mls_solid's): its Hessian there depends on
  // nothing the run changes, and the stand-in's weights, the blocks' traces, do not turn with
  // the body. None with plasticity, fracture or resampling, whose rest values or nodes change.
  [[nodiscard]] std::span<const double> standInPositions() const override {
    const bool elastic = !params_.plasticity && !params_.fracture && !params_.resample;
    return elastic ? std::span<const double>(restPositions_) : std::span<const double>();
  }
  [[nodiscard]] bool changesNodeCount() const override { return params_.resample.has_value(); }
  void setWorldMovedNodes(std::span<const uint8_t> moved) override {
    worldMoved_.assign(moved.begin(), moved.end());
  }
  [[nodiscard]] double addedEnergy() const override {
    return resampleEnergy_.empty() ? 0.0 : resampleEnergy_[0];
  }
  // With plasticity or fracture: the cracks, the fibers' flags, rest and plastic values,
  // and the per-node rest means and stiffnesses (fiber_state.cpp).
  void listStateFields(StateFields& fields) override;
  void stateAssigned() override;
  [[nodiscard]] std::vector<int32_t> nodePieces() const override;
  // With plasticity or fracture, per node: `damage`, the share of its intact fibers that
  // broke or were cut (1 - active / original, in [0, 1]), and `plastic_strain`, the mean
  // |l_plastic| / l_original of its active fibers.
  [[nodiscard]] std::vector<NodeScalar> nodeScalars() const override;
  // a_j (f1 x f2): the node's area a_j scaled by its patch's area stretch |f1 x f2|, along N_j.
  bool nodeAreaVectors(std::span<const double> x, std::span<double> out) const override;
  [[nodiscard]] std::span<const CrackDisc> cracks() const { return cracks_; }
  // Plastic parts l_plastic, theta_plastic of every fiber, (nFibers) each.
  [[nodiscard]] std::span<const double> plasticLength() const { return plasticLength_; }
  [[nodiscard]] std::span<const double> plasticAngle() const { return plasticAngle_; }

  // The energy by the scalar reference of eqs. (4)-(8) (fiber_reference.cpp: node by node,
  // scalar kernels, no SIMD), and per node into `stretching`, `bending` ((nNodes) each) when
  // they are not empty. For the tests of the batched pass; orders of magnitude slower.
  [[nodiscard]] EnergyParts referenceEnergy(std::span<const double> x,
                                            std::span<double> stretching = {},
                                            std::span<double> bending = {}) const;

  // Per-node energies E_s(j), E_b(j) (J) and mean angles H_j (rad), each (nNodes) or empty.
  void nodeValues(std::span<const double> x, std::span<double> stretching,
                  std::span<double> bending, std::span<double> meanAngle) const;

  [[nodiscard]] const FiberNetwork& network() const { return network_; }
  // The rest positions, (nNodes, 3), m, and the output triangles, (nTriangles, 3) (resampling
  // adds to both).
  [[nodiscard]] std::span<const double> restPositions() const { return restPositions_; }
  [[nodiscard]] std::span<const int32_t> outputTriangles() const { return triangles_; }
  // N_j(x) for every node, (nNodes, 3), unit (see the header comment).
  [[nodiscard]] std::vector<double> referenceNormals(std::span<const double> x) const;
  // The patch P_j whose best-fit plane orients node j (sorted node indices).
  [[nodiscard]] std::span<const int32_t> normalPatch(int32_t node) const;
  [[nodiscard]] std::span<const double> stretchStiffness() const { return stretchK_; }
  [[nodiscard]] std::span<const double> bendStiffness() const { return bendK_; }
  // s_k w_k^2 of each fiber's term in E_b, (nFibers), 1 (0 for inactive fibers).
  [[nodiscard]] std::span<const double> fiberBendWeights() const { return fiberBendWeight_; }
  // Bytes held by the model's arrays (capacity); a workspace holds about 3 doubles per
  // fiber and per node more.
  [[nodiscard]] size_t memoryBytes() const;

 private:
  // Centre j's Hessian over its normal patch, (3 |patch|, 3 |patch|).
  void centreHessian(std::span<const double> x, size_t j, Eigen::MatrixXd& h) const;
  // The patch frame f1, f2 of node j at x and N_j = f1 x f2 / |f1 x f2| (the rest normal
  // and length 0 when the patch has collapsed to a line or a point).
  struct PatchFrame {
    Vec3 f1, f2, normal;
    double length;  // |f1 x f2|
  };
  PatchFrame patchFrame(std::span<const double> x, size_t node) const;
  // Fills patchOffsets_, patchNodes_, patchWeights_ from the network and the rest state, then
  // the evaluation plan (buildEvaluationPlan). With `dropDegenerate` (after a crack) a patch
  // needs a wider spread (0.05 against 1e-2) and a node whose patch stays too thin after three
  // rings loses its fibers; otherwise that throws.
  void buildNormalPatches(bool dropDegenerate);
  // The network from the rest positions and cracks_, then the patches, rest angles and the
  // stiffness mapping; per-fiber state is reset (l_plastic = 0, ...).
  void buildTopology(std::vector<std::string>* warnings);
  // A_j0 and H_j0 of node j from its active fibers' rest values.
  void refreshRestMeans(size_t node);
  // Forms a crack at the most urgent candidate, if any (see the header); true if it did.
  bool formCrack(std::span<const double> x);
  // The unit in-plane direction across the fold at `node` (rest normal `restNormal`) from the
  // nodes within `reach` of it at rest, for a crack broken by bending; none when the surface
  // bends alike every way there and no cracked node is near (see formCrack).
  [[nodiscard]] std::optional<Vec3> acrossTheFold(std::span<const double> x, size_t node,
                                                  const Vec3& restNormal, double reach) const;
  // min_piece_nodes for single nodes (see the header): brokeNow (nFibers) marks the fibers
  // broken in this step, brokenAt (nNodes) their count per centre; both are updated.
  void keepNodesAttached(std::vector<uint8_t>& brokeNow, std::vector<int64_t>& brokenAt);
  // Whether a node's normal patch holds a node of another piece (see patchPieces_).
  [[nodiscard]] bool patchesSpanPieces() const;
  // patchPieces_ from the active fibers, before a rebuild.
  void confinePatchesToPieces();
  // Plastic flow and fracture of one accepted step (updateInelastic without resampling).
  InelasticReport updateInelasticFibers(std::span<const double> x, double dt,
                                        ModelWorkspace* workspace);
  // The network rebuilt from the rest positions and cracks (buildTopology), then the state of
  // every fiber that exists before and after (same centre and ends) carried over; x, (nNodes, 3)
  // of the new node count, places the new fibers (startNewFiber). centreStretch and
  // centreAngleChange, (nNodes) or empty: the elastic stretch l / l0 and angle change
  // theta - theta0 of each node's fibers, for the new fibers of a plastic body.
  void rebuildKeepingFiberState(std::span<const double> x, std::span<const double> centreStretch,
                                std::span<const double> centreAngleChange);
  // Fiber f, which the rebuild made: its rest values with plasticity (see above), and with
  // fracture dropped if it is past a threshold at x already.
  void startNewFiber(size_t f, std::span<const double> x, std::span<const double> centreStretch,
                     std::span<const double> centreAngleChange);
  // Resampling (fiber_resample.cpp). The watched pairs and their limits, from the network (and
  // the output triangles); spacing_ from them the first time.
  void buildResamplePairs();
  // Whether a point set's pair (a, b) can be split: not below the finest share of its ends'
  // spacings, no node of `nodes` (the rest positions' tree) near its midpoint. near: scratch.
  [[nodiscard]] bool splittable(int32_t a, int32_t b, const PointKdTree& nodes,
                                std::vector<uint32_t>& near) const;
  // Adds nodes where a pair at x is past its limit; fills edit's node sources. True if it did.
  bool resample(std::span<const double> x, TopologyEdit& edit);
  // After an event whose energy at x, (nNodes, 3), exceeds `target` (the energy before it):
  // slides the `moving` nodes ((nNodes) flags) within the surface until it no longer does
  // (fiber_resample.cpp, "Energy"); x becomes the relaxed positions, edit.displacements the
  // moves. Returns the energy at the relaxed x.
  double relaxAfterEvent(std::vector<double>& x, std::span<const uint8_t> moving, double target,
                         TopologyEdit& edit) const;
  // Edge flips of the output triangles that make them better shaped at x, between nodes of
  // one piece (`pieces`, one label per node) that no crack separates. True if any flipped.
  bool flipTriangles(std::span<const double> x, std::span<const int32_t> pieces);
  // Throws InputError when a put-back state's node arrays disagree or hold bad values.
  void checkNodeState() const;

  // Chunks, groups, local slots and shared rows (see the members below), from the network
  // and the patches.
  void buildEvaluationPlan();
  // Copies the positions of chunk c's local slots from x into local (nSlots, 4): x, y, z, 0.
  void gatherChunk(std::span<const double> x, size_t chunk, double* local) const;
  // Scratch of evaluateGroup (fiber_model_eval.cpp).
  struct GroupTerms;
  // Per-node results of an evaluation, each (nNodes) or null: E_s(j), E_b(j) (J), H_j (rad).
  struct NodeOutputs {
    double* stretching = nullptr;
    double* bending = nullptr;
    double* meanAngle = nullptr;
  };
  // Node group g of a chunk whose local positions are `local`: patch frames, the fibers'
  // l~ and theta, per-node sums and energies (added lane by lane to energy[0] (E_s) and
  // energy[1] (E_b); per node into the non-null outputs). With `sum` (the chunk's
  // accumulator, (nSlots, 4)) non-null also the gradient, added into it. With restLengthOut
  // non-null only l~ and theta, written per fiber to restLengthOut and restAngleOut (the
  // rest-shape measurement).
  // With lengthNow non-null (the workspace's, on a gradient pass of an inelastic model),
  // also each fiber's l and theta into lengthNow and angleNow.
  void evaluateGroup(size_t group, const double* local, fiber::FiberBatch& batch, GroupTerms& t,
                     double* sum, const NodeOutputs& outputs, double energy[2],
                     double* restLengthOut, double* restAngleOut, double* lengthNow,
                     double* angleNow) const;
  // restLength and restAngle of every fiber at the rest positions, by the batch code.
  void measureRestShape();
  // Pass 1 of evaluate() over every chunk (the energies into the workspace's chunkEnergy, the
  // gradient into `gradient` and its shareRows if non-empty); with restLengthOut non-null only the
  // rest shape (evaluateGroup). Scratch of one evaluation, sized on use (the plan may have changed
  // since the last).
  struct Workspace : ModelWorkspace {
    std::vector<double> shareRows;    // (nShareRows, 3): a chunk's part of dE/dx_i
    std::vector<double> chunkEnergy;  // (nChunks, 2): E_s, E_b of each chunk, J
    // l_k and theta_k of the last gradient evaluation and its x, for updateInelastic (only
    // with plasticity or fracture; stale once the topology version moved on).
    std::vector<double> lengthNow;   // (nFibers), m
    std::vector<double> angleNow;    // (nFibers), rad
    std::vector<double> evaluatedX;  // (nNodes, 3), m
    uint64_t evaluatedTopology = 0;  // topologyVersion_ of lengthNow, angleNow
  };
  void evaluateChunks(std::span<const double> x, std::span<double> gradient,
                      const NodeOutputs& outputs, double* restLengthOut, double* restAngleOut,
                      Workspace& workspace) const;
  // Pass 1 and 3 (and pass 2 if `gradient` is non-empty); fills the non-null outputs.
  EnergyParts evaluate(std::span<const double> x, std::span<double> gradient,
                       const NodeOutputs& outputs, Workspace& workspace) const;

  int samples_ = 4;
  double meanAngleWeight_ = 1;  // alpha of E_b, from the Poisson ratio (see the header)
  MaterialDef material_;
  FiberParams params_;
  std::vector<double> areas_;  // a_j, (nNodes), m^2
  FiberNetwork network_;
  std::vector<int32_t> triangles_;  // (nTriangles, 3), output only
  std::vector<double> mass_;        // (nNodes), kg
  // K_s,j and K_b,j in use: the mapping times min(1, active fibers / originalFibers_), so a
  // node that lost fibers (broken, or cut by a crack) keeps the stiffness per remaining
  // fiber instead of concentrating its whole stiffness in them (the (1/n) averages of E_s
  // and E_b would, making a lone surviving fiber n times stiffer: that broke the explicit
  // step's stability and pumped energy into torn sheets).
  std::vector<double> stretchK_;         // (nNodes), N/m^3
  std::vector<double> bendK_;            // (nNodes), N/m
  std::vector<double> mappedStretchK_;   // K_s,j of the current network's mapping, (nNodes)
  std::vector<double> mappedBendK_;      // K_b,j of the mapping, (nNodes)
  std::vector<int32_t> originalFibers_;  // active fibers of each node when intact, (nNodes)
  // (n, 3): outward unit normal (rest frame) of the nodes on the input surface's free edges,
  // zero elsewhere; measured on the crack-free network, kept through cracks.
  std::vector<double> freeEdgeNormal_;
  std::vector<double> restArea_;            // A_j0, (nNodes), m^2
  std::vector<double> restMeanAngle_;       // H_j0, (nNodes), rad
  std::vector<double> fiberBendWeight_;     // s_k w_k^2 of E_b, (nFibers), 1
  std::vector<double> fiberStretchWeight_;  // s_k of E_s, (nFibers), 1; empty when isotropic
  // The stiffness mapping of the last build, node by node, with every input it read: a crack's
  // rebuild maps again only the nodes whose fibers, rest values, patch or normals changed, and
  // copies the others' results (bit for bit what mapping them again gives). Kept only when
  // fracture is on (the one case that rebuilds at run time): about 90 doubles per node.
  struct MappingMemo {
    std::vector<double> shared;                // inputs every node reads (rest positions, ...)
    std::vector<std::vector<double>> inputs;   // (nNodes) of the node's own inputs
    std::vector<std::vector<double>> outputs;  // (nNodes) of the node's results
  };
  MappingMemo mappingMemo_;
  // Inelastic state (see the header), (nFibers) each.
  std::vector<double> plasticLength_;  // l_plastic, m
  std::vector<double> plasticAngle_;   // theta_plastic, rad
  std::vector<double> bendLimit_;      // gamma_theta, rad (eq. (29) lowers it)
  std::vector<double> breakUrgency_;   // u of eq. (28) when the fiber broke, 0 if intact
  std::vector<double> overloadTime_;   // s past a threshold, net (FiberFractureDef::delay)
  std::vector<CrackDisc> cracks_;      // every crack so far, in order of formation
  // fracture.crack_tip_scale per node, (nNodes) or empty (none near a crack): the scale of
  // the fibers centred there, derived from cracks_ with the network (buildTopology).
  std::vector<double> crackTipScale_;
  std::vector<CrackDisc> networkCracks_;  // the cracks network_ was built with
  FiberNetworkMemo networkMemo_;          // the last network build's searches (fracture only)
  uint64_t networkBuilds_ = 0;            // buildTopology calls so far
  // buildNormalPatches' per-node lists, (nNodes) each, kept for their capacity only.
  std::vector<std::vector<int32_t>> patchLists_;
  std::vector<std::vector<double>> patchWeightLists_;
  // nodePieces' last labels and what they follow from: the network build and the fibers'
  // flags. Asked after every step that broke a fiber and several times per
  // crack, a union-find over all fibers each time was a tenth of a torn poster's fracture
  // time.
  struct PiecesMemo {
    uint64_t networkBuild = 0;
    std::vector<uint8_t> flags;  // network_.flags when last asked, (nFibers)
    std::vector<int32_t> pieces;
    // Scratch of the search that shows a broken fiber's nodes still linked: the search's
    // number per node that it reached, (nNodes), and its queue.
    uint32_t epoch = 0;
    std::vector<uint32_t> visited;
    std::vector<int32_t> queue;
  };
  mutable std::mutex piecesMutex_;  // nodePieces is const and may be asked from any thread
  mutable PiecesMemo piecesMemo_;
  // The piece of each node the normal patches are confined to, (nNodes), -1 for a node
  // added since; empty: unconfined (no piece was ever parted). Found from the active fibers
  // at each rebuild; a state lists it, so a patch put back is the one the run had.
  std::vector<int32_t> patchPieces_;
  std::vector<int32_t> builtPatchPieces_;  // the patchPieces_ the patches were built with
  std::vector<uint8_t> crackAtNode_;       // (nNodes), 1 where a crack was placed
  int32_t cooldown_ = 0;                   // steps left before the next crack may form
  int64_t inelasticStep_ = 0;              // updateInelastic calls so far
  std::vector<int64_t> lastBreakStep_;     // (nNodes): the call in which a fiber of j last broke
  // Resampling (fiber_resample.cpp): s_j, the mean rest length of node j's watched pairs in
  // the input sampling (a new node: the mean of its two ends'), (nNodes), m; the
  // watched pairs (nPairs, 2) and their limits max_spacing * max(s_a, s_b), (nPairs), m; the
  // rest positions the network was last built from, (nNodes, 3), m (stateAssigned compares).
  std::vector<double> spacing_;
  std::vector<int32_t> resamplePairs_;
  std::vector<double> resampleLimit_;
  std::vector<double> builtRestPositions_;
  // The elastic energy the resampling events added at fixed positions (Model::addedEnergy),
  // J, one value (a vector: the state's field type).
  std::vector<double> resampleEnergy_{0.0};
  // Nodes the world moves itself (setWorldMovedNodes), (nNodes) or empty; not state: set
  // before every update.
  std::vector<uint8_t> worldMoved_;
  // The worst triangle quality the last flip pass between events left, 1 when none since the
  // last event or since the worst was good again (fiber_resample.cpp, "Flips"); one value.
  std::vector<double> reshapeQuality_{1.0};
  uint64_t topologyVersion_ = 0;
  std::vector<double> restPositions_;  // (nNodes, 3), m
  std::vector<double> restNormals_;    // N_j0, (nNodes, 3), unit: the input normals
  // Normal patches: node j's patch is patchNodes_[patchOffsets_[j] .. [j + 1]) (sorted),
  // with weights c_i = patchWeights_[2 e], [2 e + 1] for entry e; empty for a node whose
  // normal is never used (no fibers) and whose patch is degenerate.
  std::vector<int32_t> patchOffsets_;  // (nNodes + 1)
  std::vector<int32_t> patchNodes_;    // (nEntries)
  std::vector<double> patchWeights_;   // (nEntries, 2), 1/m
  // Evaluation plan (buildEvaluationPlan, fiber_model_eval.cpp), fixed until the topology
  // changes, so that the order of every sum, hence every bit of the result, is independent of
  // the thread count. Nodes form groups of kGroupNodes consecutive nodes, one per SIMD lane;
  // groups form chunks of chunkNodeCount_ nodes, the parallel tasks. Chunk c's fibers and patches
  // touch the nodes chunkNodes_[chunkNodeOffsets_[c] .. [c + 1]) (ascending, its own nodes
  // included), its "local slots". Pass 1 copies those positions into a local array, evaluates
  // the chunk's groups from it and adds every force term into a local accumulator in a fixed
  // order; then a node touched by this chunk alone (slotShare_ = -1) gets its sum added to
  // the gradient right there, and a node touched by several chunks parks this chunk's part in
  // the workspace's shareRows[slotShare_]. Pass 2 adds each shared node's parts in ascending chunk
  // order. Group g (nodes 8 g + L, lane L) has F_g = groupFibers_[g] fiber rows (the most fibers of
  // its nodes) and P_g rows of nodes: row 0 is the lane's own node, rows 1 + s and 1 + F_g + s
  // the ends p1, p2 of its fiber s, then the patch members that are none of these. Each patch
  // member's weights (c_i1, c_i2) sit on its first row, every other row has weight 0; rows past
  // a node's own fibers or members are padding (the node itself, weight 0). One gather of a
  // row's positions serves the frame and the fibers, one update of the accumulator adds the
  // member's share and the end or centre terms.
  // "Local" indices below are kSlotStride (4) x the local slot: the offset of x in the local
  // positions.
  static constexpr size_t kGroupNodes = 8;
  static constexpr size_t kChunksPerModel = 32;
  static constexpr size_t kMinChunkNodes = 512;
  static constexpr size_t kMaxChunkNodes = 8192;
  size_t chunkNodeCount_ = kMinChunkNodes;  // nodes per chunk (a multiple of 8)
  std::vector<int32_t> chunkNodeOffsets_;   // (nChunks + 1)
  std::vector<int32_t> chunkNodes_;         // (nLocalSlots): the node of each local slot
  std::vector<int32_t> slotShare_;          // (nLocalSlots): row of the shareRows, or -1
  std::vector<int32_t> groupFibers_;        // (nGroups): F_g
  std::vector<int32_t> groupPatchRows_;     // (nGroups + 1): first row of g (P_g rows)
  size_t maxGroupRows_ = 0;                 // the largest P_g
  std::vector<int32_t> groupPatchLocal_;    // (nRows, 8): local index of each lane's row node
  std::vector<double> groupPatchWeights_;   // (nRows, 2, 8): c_i1, c_i2, 1/m
  // Shared nodes: sharedNodes_[s] has the parts shareRows[shareOffsets_[s] .. [s + 1]).
  std::vector<int32_t> sharedNodes_;   // (nShared), ascending
  std::vector<int32_t> shareOffsets_;  // (nShared + 1)
  // One chunk's part of the tables above, planned from its nodes' fibers and patches alone
  // (`fibers`, `patch`, `patchWeights`: what it read). With fracture on, each chunk's plan is
  // kept, and a rebuild plans again only the chunks whose fibers or patches changed.
  struct ChunkPlan {
    std::vector<int32_t> fibers;          // per node its fiber count, then fiberNodes' entries
    std::vector<int32_t> patch;           // per node its patch size, then patchNodes' entries
    std::vector<double> patchWeights;     // patchWeights_' entries
    std::vector<int32_t> touched;         // the chunk's local slots' nodes, sorted
    std::vector<int32_t> groupFibers;     // per group of the chunk
    std::vector<int32_t> groupRows;       // per group of the chunk
    std::vector<int32_t> patchLocal;      // its rows of groupPatchLocal_
    std::vector<double> patchRowWeights;  // its rows of groupPatchWeights_
    // Where the last join copied it into chunkNodes_, groupPatchLocal_ and
    // groupPatchWeights_; none (all ones) if it has not been copied yet.
    std::array<size_t, 3> joinedAt{SIZE_MAX, SIZE_MAX, SIZE_MAX};
  };
  std::vector<ChunkPlan> chunkPlans_;
  // The stable step, computed at the first call (40 gradient evaluations): a memo of a
  // function of the fixed model, not scratch of an evaluation.
  mutable std::optional<double> stableStep_;
};

}  // namespace shellsim
