// The inelastic thin shells of Gingold, Secord, Han, Grinspun and Zorin 2004 (gingold2004;
// notes: ../shared/specs/gingold2004.md): a triangle mesh whose faces carry the Green
// membrane strain and the shape-operator bending strain of their three-neighbour stencil,
// with the Koiter energy of the material's Young's modulus, Poisson ratio and thickness
// (inelastic_shell_kernel.hpp has the formulas and their derivatives).
//
// Elements: the faces, one stencil each (the quadratic patch's kPatchNodes nodes, or with
// the paper's operator the face and the flap vertices across its edges, six nodes),
// assembled by core/assembler.hpp's two passes (per face, then per node in a fixed order):
// bit-identical for any thread count.
// Rest state: the input mesh (curved or flat); the rest curvatures are measured on it, so the
// input shape is force free.
// Masses: m_i = rho h sum_{T contains i} A_T / 3 (lumped).
//
// What the energy represents (tests/models/test_inelastic_shell.cpp,
// tests/dynamics/test_inelastic_shell_accuracy.cpp): E_m is the exact Green strain of every
// triangle's affine map, so the membrane is the plane-stress St Venant-Kirchhoff energy on
// any mesh, Poisson ratio included (the discrete shell's edge springs have Poisson ratio
// 1/3). Bending (InelasticShellBending):
// - the quadratic patch (default, inelastic_shell_kernel.hpp) is exact for quadratic
//   surfaces on any mesh: a cylinder stores D kappa^2 / 2 and a sphere D (1 + nu) kappa^2
//   per area, D = Y h^3 / (12 (1 - nu^2)); measured on the sheet primitive's alternating
//   diagonals at 32 x 32 cells, a simply supported plate is within 0.4 % of Kirchhoff's
//   deflection (1.2 % with the interior vertices jittered by 20 % of an edge), a cantilever
//   at 40 cells within 0.4 % of the elastica at k = 1, 2, 4; a clamp of two rows of pins
//   costs O(h) (6 % on the clamped plate at 32 cells, 3 % at 64);
// - the paper's operator E_c approximates the shape-operator difference to first order only
//   where every flap vertex is the parallelogram completion of its face (regular
//   three-direction meshes, a right-angled grid with all diagonals one way); off such meshes
//   it is not consistent (the notes measured 11-35 % error for flaps jittered by 10-30 % of
//   an edge; on alternating diagonals its twist is twice too stiff and the simply supported
//   plate 40 % too stiff, at every resolution).
//
// Plasticity (section 3.3, inelastic_shell_plasticity.hpp): per face, the plastic strains
// are stored as the paper's triples (notes section 5.3), p_i with P_m = sum p_i M_i and q_i
// with P_c = sum q_i T_i, so that the kernel only sees rest values: e_i = s_i - p_i and, with
// the patch, c = kappa - kappa0 - P_c (with the operator c_i = dphi_i - q_i over the face's
// hinged edges). After every accepted step updateInelastic runs the return mapping on each
// face and moves its rest values. With the operator, a face with a boundary edge holds no
// plastic curvature across it (its q_i is 0; the return projects P_c onto the hinged T_i).
// Fracture (section 3.4, inelastic_shell_fracture.cpp): after the plastic update, a face
// whose elastic strain at z = +-h/2 has an eigenvalue beyond the strain limit is cut from
// the corner whose angle holds the crack direction (perpendicular to the principal
// direction, in the rest frame) to the opposite edge, which is split by a pair of new nodes
// (and its neighbour across it with them): reading A of the notes (section 6.3), the crack
// runs corner -> edge point -> the neighbour's far corner. Where that point falls within
// budgeLimit of a vertex, the vertex is budged onto the crack line instead (Fig. 7, reading
// (ii) of the notes' section 7: rest and current position move, every face whose stencil
// holds it absorbs its strain change plastically) and the crack runs along the existing edge
// (tryBudge); where the vertex may not move (or the world moves it), the crack runs along
// that edge unmoved. A face all of whose corners the world moves (pinned, or riding a rigid
// fragment: setWorldMovedNodes) does not break: its strain is the world's doing, and a
// rigid fragment's strain, frozen when it was handed over, would otherwise go on cutting it
// into slivers of no mass. A
// corner whose fan the cut separates (a boundary vertex) gets a copy per fan. Faces are
// processed one pass per step in descending order of overstrain (then by index), a face
// touched this pass waits for the next step; the children absorb part of the parent's
// elastic strain plastically and cannot break for a few steps of the longest step so far
// (runaway guards, notes section 6.6). The edit (new nodes with their parents' weights)
// goes to the world as a TopologyEdit.
#pragma once

#include <Eigen/Core>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/assembler.hpp"
#include "models/inelastic_shell/inelastic_shell_kernel.hpp"
#include "models/model.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

struct InelasticShellPlasticity {
  double yieldStrain = 0;  // eps0 > 0: the RMS deviatoric elastic strain at yield, 1
  double hardening = 0;    // gamma >= 0: kinematic hardening h_kin / (2 mu), 1
  // [ours] > 0: a proposed step is rejected, and retried in halves (Model::inspectStep), when
  // the return mapping at its end would move some face's plastic strain by more than
  // stepLimit eps0 (in the yield norm); 0: every step's flow accepted.
  double stepLimit = 0;
  // [ours] L > 0: the back strain saturates at norm L (inelastic_shell_plasticity.hpp); 0:
  // linear kinematic hardening (the paper's), 1.
  double hardeningLimit = 0;
};

struct InelasticShellFracture {
  // lambda_f > 0: a face breaks when an eigenvalue of its elastic strain at z = +-h/2 passes
  // it, 1.
  double strainLimit = 0;
  bool tensileOnly = true;  // only tensile eigenvalues count; false: |lambda|
  // Share in [0, 1] of the parent's elastic strain its children take as plastic strain (stress
  // relief, so that they are not born over the limit).
  double absorption = 0.5;
  int32_t refractorySteps = 10;  // steps during which a newly cut face cannot break
  // Where the crack meets the opposite edge, t in [minimumSplit, 1 - minimumSplit] (a crack
  // closer to a corner is turned to this: no slivers, no cut along an existing edge).
  double minimumSplit = 0.15;
  // The most faces cut in one step (the most overstrained first): a uniformly strained
  // sheet reaches the limit everywhere at once, and one pass would shatter it where the
  // first crack's relief has not arrived yet.
  int32_t maxCracksPerStep = 1;
  // Faces cut in one step must lie (rest centroids) farther apart than the membrane wave
  // c = sqrt(E / (rho (1 - nu^2))) travels in the step: nearer, one crack's relief reaches the
  // other within the step, so they are not independent; farther, they are (a fast impact
  // cracks in many places at once, and a large step still cuts one face per region).
  bool waveSpacing = false;
  // Vertex budging (section 3.4, Fig. 7): where the crack would meet the opposite edge at t <
  // budgeLimit from one of its ends, that vertex moves onto the crack line instead (its strain
  // change absorbed plastically) and the crack runs along the existing edge; 0: never.
  double budgeLimit = 0.2;
  // Fracture toughness K_c > 0 (Pa m^1/2) [ours, beyond the paper]: a crack's end breaks on
  // once the mean strain of the faces around it reaches what the tip field of linear fracture
  // mechanics at K_c puts there, K_c (3.2 (3 - 2 nu) / (3 pi)) / (E sqrt(2 pi l)) (l the
  // radius of a disc of their area), if that is below the strain limit; the crack then runs
  // on from the end, perpendicular to that mean strain's principal direction. A face's strain
  // at a tip on a mesh of edge h is O(K / sqrt(h)), not the tip's unbounded stress, so
  // without this a crack runs only where the load alone breaks the faces (a glass globe hit
  // by a ball cracks under the ball and nowhere else). 0: no crack ends (the paper).
  double toughness = 0;
};

// The time-step search of gingold2004 sections 4.1-4.2 (Model::inspectStep): a proposed step
// is rejected, and retried in halves, when the largest internal node force grew by more than
// forceRatio (F_after > forceRatio max(F_before, the largest node weight m g)), or when a face
// would break at its end: fracture then happens at the step the halving narrows it to (the
// finest split accepts it, StepVerdict::acceptAtFinest), so that the faces around a new
// crack relax against it instead of breaking in a burst.
struct InelasticShellStepSearch {
  double forceRatio = 1.1;     // > 1
  bool fractureEvents = true;  // resolve fracture events in time too
};

// How a face measures its bending strain (inelastic_shell_kernel.hpp): the quadratic patch
// through its six stencil nodes (consistent on any mesh), or the paper's shape-operator
// difference from its three dihedral angles (consistent only on regular meshes).
enum class InelasticShellBending { kQuadraticPatch, kShapeOperator };

struct InelasticShellParams {
  InelasticShellBending bending = InelasticShellBending::kQuadraticPatch;
  std::optional<InelasticShellPlasticity> plasticity;  // none: elastic
  std::optional<InelasticShellStepSearch> stepSearch;  // none: every step accepted
  std::optional<InelasticShellFracture> fracture;      // none: never breaks
  // hessianBlocks() projects each face's Hessian to positive semi-definite, for Newton-type
  // implicit steps (the exact one is indefinite away from rest).
  bool projectHessian = false;
};

class InelasticShellModel : public Model {
 public:
  // mesh: the rest configuration, a manifold, consistently oriented triangle mesh (open
  // boundaries allowed). Throws InputError naming the element for what
  // geometry/triangle_mesh.hpp refuses.
  InelasticShellModel(const Geometry& mesh, const MaterialDef& material,
                      const InelasticShellParams& params = {});

  [[nodiscard]] std::string name() const override { return "inelastic_shell"; }
  [[nodiscard]] int32_t nodeCount() const override { return nodeCount_; }
  [[nodiscard]] int64_t elementCount() const override {
    return static_cast<int64_t>(faceParams_.size());
  }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return mass_; }
  using Model::addGradient;
  using Model::energy;
  [[nodiscard]] std::unique_ptr<ModelWorkspace> makeWorkspace() const override;
  [[nodiscard]] EnergyParts energy(std::span<const double> x,
                                   ModelWorkspace* workspace) const override;
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override;
  // One dense 6 x 6 block matrix per face over its stencil (core/assembler.hpp layout).
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override;
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override;
  // 2 / sqrt(lambda), lambda Gershgorin's bound on the largest eigenvalue of
  // M^-1/2 K M^-1/2 at rest, face by face (computed at construction and again after every
  // fracture: small new faces lower it, and explicit integration follows,
  // TimeIntegrator::followStableStep).
  [[nodiscard]] double stableTimeStep() const override { return stableStep_; }
  // The mesh with positions x and area-weighted vertex normals.
  [[nodiscard]] Geometry surface(std::span<const double> x) const override;

  // The nodes of every face's stencil, (nFaces, stencilWidth()). With the paper's operator
  // (width 6): its corners, then the flap across each edge (the face's own corner i on a
  // boundary edge i). With the quadratic patch (width kPatchNodes): a patch face's patch
  // nodes (corners first, then padded with corner 0); a face left with the operator has the
  // operator's six, then corner 0.
  [[nodiscard]] std::span<const int32_t> faceStencils() const { return faceStencil_; }
  [[nodiscard]] size_t stencilWidth() const {
    return bending_ == InelasticShellBending::kQuadraticPatch ? inelastic_shell::kPatchNodes : 6;
  }
  [[nodiscard]] const inelastic_shell::FaceParams& face(size_t f) const { return faceParams_[f]; }
  // Face f's energies at the stencil positions x (width N = stencilWidth()), its gradient
  // over the slots and, with h, its Hessian.
  template <int N>
  inelastic_shell::FaceEnergy evaluateFace(size_t f, const Vec3 (&x)[N], Vec3 (&g)[N],
                                           Eigen::Matrix<double, 3 * N, 3 * N>* h) const;
  // Calls body.template operator()<N>() with N = stencilWidth().
  template <class Body>
  void withStencilWidth(Body&& body) const {
    if (bending_ == InelasticShellBending::kQuadraticPatch) {
      body.template operator()<inelastic_shell::kPatchNodes>();
    } else {
      body.template operator()<6>();
    }
  }
  // The rest positions of the nodes (the input's, then those fracture made), (nNodes, 3), m.
  [[nodiscard]] std::span<const double> restPositions() const { return restPositions_; }
  [[nodiscard]] ContactMesh contactMesh() const override { return {triangles_, restPositions_}; }
  // Elastic membrane strain E_m and bending strain E_c (1/m) of face f at x, 2x2 row-major
  // in the face's rest frame (first axis along its rest edge x0 -> x1).
  void faceStrains(std::span<const double> x, size_t f, double (&membrane)[4],
                   double (&bending)[4]) const;
  // What the fracture test measures of a face: its elastic strains and, unless it is
  // refractory, its overstrain (the largest counted eigenvalue at z = +-h/2 over the limit;
  // > 1 breaks) with the principal direction d of that eigenvalue, in the rest frame.
  struct FractureCandidate {
    double overstrain = 0;
    Eigen::Vector2d direction = Eigen::Vector2d::Zero();
    Eigen::Matrix2d membrane = Eigen::Matrix2d::Zero(), bending = Eigen::Matrix2d::Zero();
    int32_t corner = -1;  // the crack starts at this corner (a crack's end), or where it fits
  };
  // A crack's end [ours] (InelasticShellFracture::toughness): a node on the boundary whose
  // faces turn more than 3/4 of a full turn around it in the rest shape (a cut's last node,
  // or a notch of the input), the faces around it (`fan`, rest areas `weight`), the strain
  // its fan's mean breaks it at, the outward normal, a tangent and the direction from the
  // node into the crack (the mean of its boundary edges), in the rest shape.
  struct CrackEnd {
    int32_t node = 0;
    double limit = 0;
    Vec3 normal = Vec3::Zero(), tangent = Vec3::Zero(), back = Vec3::Zero();
    std::vector<int32_t> fan;
    std::vector<double> weight;
  };
  [[nodiscard]] const std::vector<CrackEnd>& crackEnds() const { return crackEnds_; }
  // The overstrain of every face at x as the fracture pass measures it (0 while refractory).
  [[nodiscard]] std::vector<FractureCandidate> fractureCandidates(std::span<const double> x) const;
  // Plastic strains P_m (1) and P_c (1/m) of face f, 2x2 row-major in its rest frame.
  void plasticStrains(size_t f, double (&membrane)[4], double (&bending)[4]) const;
  // The yield norm F of face f at x (inelastic_shell_plasticity.hpp): F - eps0 > 0 outside
  // the yield surface. Needs plasticity.
  [[nodiscard]] double yieldNorm(std::span<const double> x, size_t f) const;
  // The largest yield norm of all faces at x and its face (the lowest index among equals:
  // the same on any number of threads). Needs plasticity.
  [[nodiscard]] std::pair<double, size_t> largestYieldNorm(std::span<const double> x) const;

  // With plasticity: the return mapping on every face (in parallel, each face its own), the
  // faces' rest values moved by their new plastic strains. With fracture: then one pass of
  // cuts (header), returned as the edit.
  using Model::updateInelastic;
  InelasticReport updateInelastic(std::span<const double> x, double dt,
                                  ModelWorkspace* workspace) override;
  [[nodiscard]] uint64_t topologyVersion() const override { return topologyVersion_; }
  // With the step search (InelasticShellStepSearch) or the plastic step limit
  // (InelasticShellPlasticity::stepLimit).
  [[nodiscard]] StepVerdict inspectStep(std::span<const double> before,
                                        std::span<const double> after, double dt) const override;
  [[nodiscard]] bool changesNodeCount() const override { return fracture_.has_value(); }
  void setWorldMovedNodes(std::span<const uint8_t> moved) override {
    worldMoved_.assign(moved.begin(), moved.end());
  }
  // Connected pieces by shared edges of the faces.
  [[nodiscard]] std::vector<int32_t> nodePieces() const override;
  // With plasticity or fracture: the plastic triples p, q of every face; with fracture also
  // the mesh (rest positions, triangles) and the faces' refractory counters.
  void listStateFields(StateFields& fields) override;
  void stateAssigned() override;
  // With plasticity, per node: `plastic_strain`, the mean over its faces of the RMS plastic
  // strain sqrt(N(P_m) + h^2 / 12 N(P_c)) (N of the plasticity header).
  [[nodiscard]] std::vector<NodeScalar> nodeScalars() const override;

 private:
  // Rest values of face f's kernel from the elastic rest and its plastic triples.
  void refreshRestValues(size_t f);
  // P_m = sum p_i M_i and P_c = sum q_i T_i of face f, and the inverse maps.
  [[nodiscard]] Eigen::Matrix2d plasticMembrane(size_t f) const;
  [[nodiscard]] Eigen::Matrix2d plasticBending(size_t f) const;
  void setPlastic(size_t f, const Eigen::Matrix2d& membrane, const Eigen::Matrix2d& bending);
  void setPlasticBending(size_t f, const Eigen::Matrix2d& bending);
  // Rebuilds what follows from restPositions_ and triangles_ (header of the .cpp).
  void buildTopology();
  // Makes face f bend by its quadratic patch (the .cpp), its stencil the patch's nodes; where
  // they do not determine a quadratic the face keeps the paper's operator. previous: the
  // stencils before the rebuild (an unchanged patch is kept).
  void makeQuadraticPatch(size_t f, const std::vector<int32_t>& previous);
  // Whether face f's plastic curvature may take any value (else only along its hinged T_i).
  [[nodiscard]] bool bendsFreely(size_t f) const;
  // stableStep_ for the current mesh.
  void computeStableStep();
  // One fracture pass at positions x (inelastic_shell_fracture.cpp); the edit is empty when
  // nothing broke.
  TopologyEdit fracturePass(std::span<const double> x, double dt, int64_t& broken);
  // The face that would break first at x (largest overstrain > 1, not refractory), or -1.
  [[nodiscard]] int64_t firstToBreak(std::span<const double> x) const;
  // Elastic strains E_m (1) and E_c (1/m) of face f at x, in its rest frame (faceStrains).
  struct Strains {
    Eigen::Matrix2d membrane, bending;
  };
  [[nodiscard]] Strains strainsOf(std::span<const double> x, size_t f) const;

  // crackEnds_ for the current mesh (with a toughness; else none).
  void findCrackEnds();
  // Vertex budging within a fracture pass (inelastic_shell_fracture.cpp): a node moved (rest
  // and current position) to (1 - s) of itself + s of `other`; a face whose rest data that
  // changed, its elastic strains before and the share of them it keeps.
  struct Budge {
    int32_t node, other;
    double s;
  };
  struct Absorbed {
    int32_t face;
    Eigen::Matrix2d membrane, bending;  // in `frame`: the face's rest frame before the edit
                                        // (a cut's child: its parent's)
    double kept;
    inelastic_shell::RestFrame frame;
  };
  // The rest frame of face f from the current triangles and rest positions.
  [[nodiscard]] inelastic_shell::RestFrame faceRestFrame(size_t f) const;
  bool tryBudge(size_t f, size_t k, double t, const std::vector<FractureCandidate>& candidates,
                std::vector<uint8_t>& touched, const std::vector<uint8_t>& onBoundary,
                std::vector<int32_t>& tips, std::vector<Budge>& budges,
                std::vector<std::pair<int32_t, int32_t>>& cutEdges,
                std::vector<Absorbed>& absorbed);

  int32_t nodeCount_ = 0;
  bool projectHessian_ = false;
  InelasticShellBending bending_ = InelasticShellBending::kQuadraticPatch;
  std::vector<int32_t> triangles_;                       // (nFaces, 3)
  std::vector<int32_t> faceStencil_;                     // (nFaces, stencilWidth())
  std::vector<inelastic_shell::PatchParams> patch_;      // (nFaces) with the quadratic patch
  std::vector<inelastic_shell::FaceParams> faceParams_;  // (nFaces)
  std::vector<double> membraneBasis_;  // M_i of every face, (nFaces, 3, 2, 2), 1/m^2
  std::vector<double> bendingBasis_;   // T_i of every face, (nFaces, 3, 2, 2), 1/m
  std::vector<double> mass_;           // (nNodes), kg
  std::optional<InelasticShellPlasticity> plasticity_;
  std::optional<InelasticShellFracture> fracture_;
  std::optional<InelasticShellStepSearch> stepSearch_;
  MaterialDef material_;
  std::vector<double> restPositions_;   // (nNodes, 3), m
  std::vector<int32_t> faceNeighbour_;  // (nFaces, 3): across edge i, 3 u + j or -1
  // (nFaces): steps of refractoryStep_ before the face may break; a step of dt counts for
  // dt / refractoryStep_, so that the step search's split steps do not shorten the wait.
  std::vector<double> refractory_;
  std::vector<double> refractoryStep_{0.0};  // (1): the longest step so far, s
  std::vector<CrackEnd> crackEnds_;
  // Nodes the world moves itself (setWorldMovedNodes), (nNodes) or empty; not state: set
  // before every update.
  std::vector<uint8_t> worldMoved_;
  // Nodes made this fracture pass are not in the mask: the world has not seen them yet.
  [[nodiscard]] bool worldMovesNode(int32_t node) const {
    return static_cast<size_t>(node) < worldMoved_.size() &&
           worldMoved_[static_cast<size_t>(node)] != 0;
  }
  uint64_t topologyVersion_ = 0;
  // The elastic rest values l_i^2 (m^2) and phi(theta0_i) of every face, (nFaces, 3) each,
  // and the plastic triples p_i (m^2) and q_i (1), (nFaces, 3) each (zero when elastic).
  std::vector<double> elasticRestSquaredLength_, elasticRestPhi_;
  std::vector<double> plasticSquaredLength_, plasticPhi_;
  Incidence incidence_;  // node -> (face, slot) of faceStencil_
  double stableStep_ = 0;
};

}  // namespace shellsim
