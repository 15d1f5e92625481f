// Meshless volumes on unconnected points, "phyxels" (muller2004, "Point Based Animation of
// Elastic, Plastic and Melting Objects", sections 3.2-3.5; notes specs/muller2004.md B2-B5).
//
// Stencil: a phyxel i and its `neighbours` nearest phyxels j in the rest shape (fixed while
// the reference is; the paper takes every phyxel within h_i = 3 rbar_i, about 178 of them on
// a lattice, nearly all-to-all for its 200-phyxel models). A melt's rebuilt stencils keep
// only neighbours within the first build's h_i, so a melt can split and merge; a layered
// sheet's stencil is every layer of the nearest vertices (MlsSolidParams::layers).
//
//            j   j   j
//             \  |  /        x_ij = X_j - X_i (rest), w_ij = W(|x_ij|, h_i)
//          j -- (i) -- j     A_i = sum_j x_ij x_ij^T w_ij            (eq. 14)
//             /  |  \        d_j = A_i^-1 x_ij w_ij,  d_i = -sum_j d_j  (eqs. 20-21)
//            j   j   j       F_i = I + sum_j (u_j - u_i) d_j^T = sum_k x_k d_k^T
//
// (the last form since sum_j x_ij d_j^T = A A^-1 = I: F is linear in the current positions
// x_k of the stencil, exact for every affine motion; notes B3.)
//
// Energy: E(x) = sum_i v_i Psi(F_i) + E_hg (mls_kernel.hpp: St Venant-Kirchhoff in the
// standard Green strain plus muller2004's volume term, eq. 7), so that the forces of
// eqs. (18)-(19) and (23) are the exact gradient f_k = -sum_i v_i P_i d_k (the paper's
// -2 v J sigma d has the paper's doubled strain; notes B4) and the tangent stiffness of
// eq. (47) the exact Hessian, block (k, l) of stencil i: v_i B_k^T (dP/dF) B_l with
// (B_k)_{(a c), b} = delta_ab d_k[c].
//
// Deviations from the paper, each because the paper's choice fails a test:
// - Support. h_i = 1.25 times the distance to the farthest of the `neighbours` nearest
//   phyxels (default 26: the 3 x 3 x 3 block of a lattice, full rank at faces, edges and
//   corners), not 3 rbar_i: the stencils' cost is n^2 per phyxel in the Hessian, and 26
//   neighbours already condition A (the notes measured cond 1.4 inside and 2.1 at a
//   corner for 41).
// - Basis. F comes from a quadratic fit, u_j - u_i = grad u . x_ij + x_ij^T H x_ij / 2 in
//   weighted least squares, not the paper's linear one (eqs. 12-13). On a symmetric stencil
//   the two give the same gradient; on the one-sided stencils at a body's faces the linear
//   fit sees a plane through a bent field and misses the outer fibres' strain: a cantilever
//   of 6 phyxels across was 1.29 times softer than the beam with it, 1.047 with the quadratic
//   (tests/dynamics/test_mls_solid_accuracy.cpp). F stays linear in the positions, exact for
//   every affine motion. Where a stencil cannot fix a quadratic (a slab two phyxels thick)
//   that phyxel fits a plane. Option basis: linear keeps the paper's everywhere.
// - Volumes. v_i = V / n for phyxels sampled on a lattice inside a closed mesh, V the volume
//   it encloses, so masses and volumes sum to the object's; the paper's v_i = m_i / rho_i
//   (eq. 10) inflates boundary phyxels (1.57 times at faces, 6.7 times at corners; notes
//   B2b). Phyxels given as points have no enclosing surface: they take the Shepard volume
//   v_i = 1 / sum_j W(|x_ij|, h_i) over their stencil (normalised W), exact inside a regular
//   sampling and inflated at its boundary like the paper's.
// - A singular moment matrix (the neighbours coplanar: one layer of phyxels, notes B8) is
//   an error naming the phyxel, not a pseudo-inverse: with rank 2 the normal derivative is
//   lost and a rigid rotation about an in-plane axis strains the phyxel.
// - Zero-energy (hourglass) modes. On a lattice a checkerboard displacement gives F = I
//   exactly (notes B3), so nodal integration has no restoring force for it. The paper does
//   not mention it. Suppressed (after Ganzenmuller 2015) by penalising the MLS fit's misfit
//     E_hg = sum_i c_hg mu v_i / 2 sum_j wbar_ij |F_i x_ij - (x_j - x_i)|^2 / |x_ij|^2,
//   wbar_ij = w_ij / sum_j w_ij, with F_i x_ij replaced by the fit's prediction at j (the
//   quadratic's, so a bent field is not penalised): zero for every affine motion (so rigid motions
//   and uniform strains are untouched), invariant under rotations, quadratic in x with a constant
//   Hessian Q_i (x) I per stencil, precomputed.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/assembler.hpp"
#include "core/vec3.hpp"
#include "models/mls/mls_kernel.hpp"
#include "models/model.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// Strain-state plasticity (muller2004 section 4.1 after O'Brien et al. 2002; notes B6), per
// phyxel, in Green strain (the paper's values are in its doubled strain): the elastic strain
// is E_e = E - E_p; after each step, where |dev E_e| (or |E_e| with full flow) passes the
// yield strain, E_p += min(1, c_creep dt) dev E_e, then |E_p| is capped at the maximum.
// Active from `from` to `until` seconds of the body's time (muller2004 Fig. 3 switches a head
// from elastic to plastic and back).
struct MlsPlasticity {
  double yieldStrain = 0.01;  // c_yield, Frobenius norm of the (deviatoric) elastic strain
  double creep = 10;          // c_creep, 1/s
  double maxStrain = 1;       // c_max, Frobenius norm of the plastic strain
  bool deviatoric = true;     // flow by the deviator (volume kept) or the whole elastic strain
  double from = 0;            // s
  double until = std::numeric_limits<double>::infinity();  // s
  // Melting (section 4.2): every step while active, the current shape becomes the reference
  // (its elastic strain kept as a plastic strain rotated with the material), so the body
  // flows; the volume term then measures each phyxel's volume against its original one.
  bool melt = false;
  // Absorb at most this often, s (0: every step, as the paper): each absorption rebuilds the
  // stencils, which costs about as much as tens of explicit steps.
  double meltInterval = 0.005;
  // Past `until`, Young's modulus times this (muller2004 Fig. 3, "stiff again"): at the first
  // step past `until` the current shape becomes the reference (absorbReference), storing the
  // elastic strain whose stress under the k times larger moduli is the Kirchhoff stress the
  // phyxel had, so the stress does not jump; 1: no change.
  double solidStiffness = 1;
  [[nodiscard]] bool stiffens() const { return solidStiffness != 1; }
  // The reference moves (melting, or the absorption at solidification).
  [[nodiscard]] bool movesReference() const { return melt || stiffens(); }
};

struct MlsSolidParams {
  int32_t neighbours = 26;      // stencil size less the phyxel itself
  bool quadraticBasis = true;   // fit F with a quadratic (else the paper's linear) basis
  double hourglass = 0.1;       // c_hg, the misfit penalty relative to mu, 1
  double volumeStiffness = 0;   // k_v of muller2004 eq. (7), Pa
  bool projectHessian = false;  // clamp each phyxel's material tangent to PSD
  std::optional<MlsPlasticity> plasticity;  // none: elastic
  // 0: the phyxels sample a volume. 2 or 3: they are the layers of a sheet, vertex-major
  // ((nVertices, layers, 3) phyxels, each vertex's layers ordered across the sheet): a
  // phyxel's stencil is every layer of the nearest vertices on the mid-surface, and with two
  // layers the quadratic fit leaves out the square across the sheet (notes B8).
  int32_t layers = 0;
  // Melting only: the surface (surfels: a point cloud with normals) is blended onto the
  // phyxels' implicit surface where their boundary changes and resampled (section 5.2,
  // mls_surface.hpp), so it splits and merges with the body.
  bool resampleSurface = false;
};

class MlsSolidModel : public Model {
 public:
  // phyxels: rest positions, (nPhyxels, 3), m. volumes: rest volume of each, (nPhyxels), m^3,
  // or empty for the Shepard volumes of points (see above). material: E, nu, density (its
  // thickness is unused). surface: a mesh or a point cloud (surfels: with normals) carried
  // by the phyxels for the frames (eq. 27), or an empty geometry to write the phyxels
  // themselves. Throws InputError for
  // too few phyxels, coincident phyxels, or a phyxel whose neighbours are coplanar.
  MlsSolidModel(std::span<const double> phyxels, std::span<const double> volumes,
                const MaterialDef& material, const MlsSolidParams& params, const Geometry& surface);

  [[nodiscard]] std::string name() const override { return "mls_solid"; }
  [[nodiscard]] int32_t nodeCount() const override { return nodeCount_; }
  [[nodiscard]] int64_t elementCount() const override { return nodeCount_; }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return mass_; }
  using Model::addGradient;
  using Model::energy;
  [[nodiscard]] std::unique_ptr<ModelWorkspace> makeWorkspace() const override;
  [[nodiscard]] EnergyParts energy(std::span<const double> x,
                                   ModelWorkspace* workspace) const override;
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override;
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override;
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override;
  // 0.7 x 2 / sqrt(lambda_max(M^-1 K)) at the reference by Lanczos, never below Gershgorin.
  [[nodiscard]] double stableTimeStep() const override { return stableStep_; }
  [[nodiscard]] Geometry surface(std::span<const double> x) const override;
  InelasticReport updateInelastic(std::span<const double> x, double dt,
                                  ModelWorkspace* workspace) override;
  using Model::updateInelastic;
  [[nodiscard]] std::vector<NodeScalar> nodeScalars() const override;
  void listStateFields(StateFields& fields) override;
  void stateAssigned() override;
  // The plastic strain of every phyxel, (nPhyxels, 6): xx, yy, zz, xy, yz, zx; empty when
  // elastic.
  [[nodiscard]] std::span<const double> plasticStrain() const { return plasticStrain_; }
  [[nodiscard]] uint64_t topologyVersion() const override { return topologyVersion_; }
  // The reference positions the stencils were built on, (nPhyxels, 3), m (the rest shape
  // until a melt absorbs the deformation).
  [[nodiscard]] std::span<const double> referencePositions() const { return rest_; }
  // An elastic body's rest shape: its Hessian there depends on nothing the run changes, and
  // under small strains the stand-in built there is the one built at the deformed shape
  // turned back (its weights are the blocks' traces, rotation-invariant). None with
  // plasticity, whose stored strain enters the Hessian and changes from step to step.
  [[nodiscard]] std::span<const double> standInPositions() const override {
    return plasticity_ ? std::span<const double>() : std::span<const double>(rest_);
  }
  // Each phyxel's volume now over its original one at the reference, (nPhyxels); empty
  // unless melting.
  [[nodiscard]] std::span<const double> volumeRatios() const { return volumeRatio_; }

  // The deformation gradient of every phyxel at x, (nPhyxels, 3, 3) row-major.
  [[nodiscard]] std::vector<double> deformationGradients(std::span<const double> x) const;
  [[nodiscard]] std::span<const double> restVolumes() const { return volume_; }
  [[nodiscard]] std::span<const double> supportRadii() const { return support_; }
  // The stencil of phyxel i: itself first, then its neighbours.
  [[nodiscard]] std::span<const int32_t> stencil(int32_t i) const {
    const auto b = static_cast<size_t>(stencilOffsets_[static_cast<size_t>(i)]);
    const auto e = static_cast<size_t>(stencilOffsets_[static_cast<size_t>(i) + 1]);
    return std::span<const int32_t>(stencilNodes_).subspan(b, e - b);
  }
  // Phyxels whose gradient comes from the quadratic fit (the others fit a plane).
  [[nodiscard]] int64_t quadraticFitCount() const { return quadraticCount_; }
  // The largest condition number of the phyxels' moment matrices A_i.
  [[nodiscard]] double worstMomentCondition() const { return worstCondition_; }

 private:
  // Elastic energy of phyxel p at the displacements u ((nPhyxels), padded with a zero); writes
  // the columns of v_p P (the first Piola-Kirchhoff stress times the volume), padded, to
  // stress[0..2] when stress is not null. The misfit penalty is addGradient's
  // (misfitValues_).
  double phyxelEnergy(size_t p, const Eigen::Vector4d* u, Eigen::Vector4d* stress) const;
  // Row p of the misfit penalties' matrix times the displacements u: (A u)_p, the misfit's
  // gradient at phyxel p (u_p . (A u)_p / 2 its share of the energy). One sparse product
  // instead of each stencil's dense n x n one: a sixth of the multiplications (86 nonzeros per
  // row for 190 phyxels of the bunny against 27 x 27 per stencil, whose products took 60 % of
  // an explicit step).
  [[nodiscard]] Eigen::Vector4d misfitForce(size_t p, const Eigen::Vector4d* u) const;
  // Phyxel p's plastic strain, or null when the model is elastic.
  [[nodiscard]] const mls::Mat3* plasticAt(size_t p, mls::Mat3& storage) const;
  // Phyxel p's sheet normal (two layers: the kernel's sheet law), or null.
  [[nodiscard]] const Eigen::Vector3d* sheetNormalAt(size_t p, Eigen::Vector3d& storage) const {
    if (sheetNormal_.empty()) return nullptr;
    storage = row(sheetNormal_, p);
    return &storage;
  }
  // Stores the symmetric part of `strain` as phyxel p's plastic strain (the 6 components).
  void setPlasticAt(size_t p, const mls::Mat3& strain);
  // F of phyxel p at x (eq. 14 with the displacements u = x - X).
  [[nodiscard]] mls::Mat3 deformationGradient(size_t p, std::span<const double> x) const;
  [[nodiscard]] double volumeScale(size_t p) const {
    return volumeRatio_.empty() ? 1.0 : volumeRatio_[p];
  }
  [[nodiscard]] Vec3 displacement(std::span<const double> x, size_t node) const {
    return row(x, node) - row(rest_, node);
  }
  void bindSurface(const Geometry& surface);
  // Section 5.2: the field, iso-value and blending state of the surfels, then one update
  // after an absorption.
  void startResampledSurface();
  void updateResampledSurface();
  // Eq. (27) for every surface vertex (and surfel normal, when `normals` is given) at x.
  void carrySurface(std::span<const double> x, std::vector<double>& positions,
                    std::vector<double>* normals) const;
  // The stencils, their fits, support radii and misfit penalties on rest_ (first build:
  // refuses coincident phyxels and singular neighbourhoods; a melt's rebuild takes them as
  // they come), with the Shepard volumes when asked for (volume_ holds the given ones
  // otherwise: the penalty scales with them); computeStableStep follows each build.
  void buildStencils(bool firstBuild, bool shepardVolumes);
  void computeStableStep();
  // The shape at x becomes the reference. stiffening 0, melting (section 4.2): the elastic
  // strain is kept as the stored strain, turned with the material (R E_e R^T). stiffening k
  // > 0, solidification: the stored strain is the one whose stress under k times the moduli
  // is the Kirchhoff stress now, F S F^T, so every force stays where it was for an affine
  // state (the reference keeps the original volumes, which makes the Kirchhoff, not the
  // Cauchy, stress the one to keep).
  void absorbReference(std::span<const double> x, double stiffening = 0.0);
  // The moduli times MlsPlasticity::solidStiffness when solidified_, else the material's.
  void applyStiffness();
  // misfitRowOffsets_, misfitColumns_, misfitValues_ from misfit_, the stencils, incidence_
  // and entryStencil_.
  void assembleMisfit();

  int32_t nodeCount_ = 0;
  mls::Elasticity elasticity_;
  double hourglassScale_ = 0;                                           // c_hg mu, Pa
  double materialMu_ = 0, materialLambda_ = 0, materialHourglass_ = 0;  // before stiffening, Pa
  bool projectHessian_ = false;
  std::vector<double> rest_;             // (nPhyxels, 3), m
  std::vector<double> volume_;           // (nPhyxels), m^3
  std::vector<double> mass_;             // (nPhyxels), kg
  std::vector<double> support_;          // h_i, (nPhyxels), m
  std::vector<double> cutoff_;           // h_i of the first build: a melt's reach, (nPhyxels), m
  std::vector<int32_t> stencilOffsets_;  // (nPhyxels + 1) into stencilNodes_
  std::vector<int32_t> stencilNodes_;    // (nEntries): phyxel, then its neighbours
  std::vector<double> shape_;            // d_k of each entry, (nEntries, 3), 1/m
  std::vector<double> sheetNormal_;      // two layers: (nPhyxels, 3), across the sheet; else empty
  std::vector<int64_t> squareOffsets_;   // (nPhyxels + 1): prefix sums of n_i^2
  std::vector<double> misfit_;  // Q_i, (sum n_i^2): stencil-by-stencil, row-major, Pa m^3/m^2
  Incidence incidence_;         // node -> entries of stencilNodes_
  std::vector<int32_t> entryStencil_;  // (nEntries): the phyxel whose stencil holds the entry
  // The incidence in its own order, so that a phyxel's gradient reads contiguous memory:
  // incidenceStencil_[k] = entryStencil_[e] and incidenceShape_ row k = shape_ row e for
  // e = incidence_.entries[k]. (nEntries) and (nEntries, 3), 1/m.
  std::vector<int32_t> incidenceStencil_;
  std::vector<double> incidenceShape_;
  // The misfit penalties summed into one matrix over the phyxels, A = sum_i S_i^T Q_i S_i
  // (S_i picks stencil i's phyxels), as compressed rows: E_misfit = sum_c u_c^T A u_c / 2
  // over the displacement components. Constant between stencil rebuilds.
  std::vector<int32_t> misfitRowOffsets_;  // (nPhyxels + 1) into the two below
  std::vector<int32_t> misfitColumns_;     // (nNonzeros), ascending within a row
  std::vector<double> misfitValues_;       // (nNonzeros), Pa m^3/m^2
  double stableStep_ = 0;                  // s
  double worstCondition_ = 0;
  int32_t neighbours_ = 26;
  int32_t layers_ = 0;  // MlsSolidParams::layers
  bool quadratic_ = true;
  std::optional<MlsPlasticity> plasticity_;
  uint64_t topologyVersion_ = 0;       // bumped when an absorption rebuilds the stencils; state
  std::vector<double> volumeRatio_;    // (nPhyxels) when the reference moves: volume over the
                                       // original
  int64_t absorptions_ = 0;            // reference absorptions so far; state
  int64_t solidified_ = 0;             // 1 once stiffened past `until`; state
  std::vector<double> plasticStrain_;  // (nPhyxels, 6): xx, yy, zz, xy, yz, zx; state
  std::vector<double> clock_;          // (1): the body's time, s; state
  int64_t quadraticCount_ = 0;

  // The surface carried by the phyxels (eq. 27), bound at rest.
  Geometry restSurface_;              // positions (nVertices, 3), triangles
  std::vector<int32_t> bindOffsets_;  // (nVertices + 1)
  std::vector<int32_t> bindPhyxels_;  // (nBindings)
  std::vector<double> bindWeights_;   // (nBindings), sum 1 per vertex

  // A resampled surface (section 5.2): restSurface_ holds the surfels.
  bool resampled_ = false;
  double fieldWidth_ = 0;               // sigma of eq. (28), m
  double isoValue_ = 0;                 // S
  double surfelSpacing_ = 0;            // the initial surfels' mean spacing, m
  size_t maxSurfels_ = 0;               // 4 times the initial count
  std::vector<double> surfelInitial_;   // s^0, (nSurfels); state
  std::vector<double> surfelEstimate_;  // s^(t-1), (nSurfels); state
  std::vector<double> surfelBlended_;   // Delta_Sigma, (nSurfels); state
  std::vector<double> boundaryBefore_;  // P at the last update, (nPhyxels); state
};

}  // namespace shellsim
