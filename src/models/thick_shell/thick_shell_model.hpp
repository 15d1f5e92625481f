// The thick shell of steinemann section 4.1 as a mass-spring model on a generated shell
// (shellsim/thicken.hpp): S is the body's mesh, S' its inner surface at depth d_i.
//
// Nodes: the vertices of S (0..n-1) and, with two layers, those of S' (n..2n-1), placed at
// v_i + f d_i (-n_i) (f the extrusion length factor: "used behind the scenes just for the
// computation of the dynamics"; the frames draw S' at depth d_i).
// Stencils, E = 1/2 k C^2 each (thick_shell_kernel.hpp):
//   springs (K = 2), C = l - L:  edges of S [and S'], internal (v_i, v'_i), and both
//       diagonals of every side quad (v_a, v_b, v'_b, v'_a) (cross springs, Fig. 2);
//   areas (K = 3), C = (A - A0)/A0:  the triangles of S and S' (two layers);
//   volumes (K = 4), C = (V - V0)/V0:  the three tets of every prism (two layers), split
//       along the side diagonals of the smallest-index rule so neighbours agree.
// Stiffness follows the depth (Fig. 3, "a thin shell is more easily fractured"), all from
// E and the local depth d (floored at kMinDepthFraction of epsilon, [ours]):
//   layer edge (a, b):  k = E d_ab sum_{T at e} A_T / |e|^2 / layers  (Van Gelder 1998 with
//                       the depth for the thickness, shared by the layers);
//   internal (i):       k = E A_i / max(L_i, floor f epsilon), A_i = sum A_T / 3 at i;
//   cross (a, b):       k = 1/2 E |e|^2 L_ab / |diagonal|^2  ([ours]: the paper gives none);
//   area (T):           k = areaStiffness E A0 d_T / 2;  volume (tet): k = volumeStiffness E V0.
// Masses: each prism rho times its volume at the drawn depth (at least A_T times the floored
// depth), shared by its corners (3 on one layer, 6 on two): the body weighs what its shell
// holds. Everything is `stretching` energy: bending comes from
// the two layers stretching apart.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/assembler.hpp"
#include "models/model.hpp"
#include "shellsim/models/thick_shell.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/thicken.hpp"

namespace shellsim {

class ThickShellModel : public Model {
 public:
  // A depth below this fraction of epsilon counts as this much for stiffness and mass (a
  // vertex at depth 0 would otherwise carry no mass and hold nothing).
  static constexpr double kMinDepthFraction = 0.05;

  // mesh: S at rest (checked as thickenMesh checks it); shell: its generated inner surface
  // for depth epsilon = material.thickness. Throws InputError naming a bad element.
  ThickShellModel(const Geometry& mesh, const ThickShell& shell, const MaterialDef& material,
                  const ThickShellDef& options);

  [[nodiscard]] std::string name() const override { return "thick_shell"; }
  [[nodiscard]] int32_t nodeCount() const override { return nodeCount_; }
  [[nodiscard]] int64_t elementCount() const override {
    return static_cast<int64_t>(triangles_.size() / 3);
  }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return mass_; }
  using Model::addGradient;
  using Model::energy;
  using Model::updateInelastic;
  [[nodiscard]] std::unique_ptr<ModelWorkspace> makeWorkspace() const override;
  [[nodiscard]] EnergyParts energy(std::span<const double> x,
                                   ModelWorkspace* workspace) const override;
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override;
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override;
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override;
  [[nodiscard]] double stableTimeStep() const override { return stableStep_; }
  [[nodiscard]] Geometry surface(std::span<const double> x) const override;
  [[nodiscard]] ContactMesh contactMesh() const override { return {triangles_, rest_}; }

  // Fracture: a vertex split of S per overstretched spring of S, its S' node split with it
  // (thick_shell_fracture.cpp).
  InelasticReport updateInelastic(std::span<const double> x, double dt,
                                  ModelWorkspace* workspace) override;
  [[nodiscard]] uint64_t topologyVersion() const override { return topologyVersion_; }
  [[nodiscard]] bool changesNodeCount() const override { return fracture_.has_value(); }
  [[nodiscard]] std::vector<int32_t> nodePieces() const override;
  // The material lies between S and the drawn S', d_i below S (two layers: S' nodes are
  // inside it, extents 0).
  bool nodeSolidExtents(std::span<double> below, std::span<double> above) const override;
  void listStateFields(StateFields& fields) override;
  void stateAssigned() override;

  [[nodiscard]] std::span<const double> restPositions() const { return rest_; }
  [[nodiscard]] std::span<const int32_t> springNodes() const { return springNodes_; }
  [[nodiscard]] std::span<const double> springStiffness() const { return springStiffness_; }
  [[nodiscard]] std::span<const int32_t> tetNodes() const { return tetNodes_; }
  [[nodiscard]] std::span<const double> tetRestVolumes() const { return tetVolume_; }

 private:
  void computeStableStep();
  // After a fracture step: the estimate followed cheaply (thick_shell_model.cpp).
  void followStableStep();
  // Springs, area and volume terms, masses and incidences from triangles_, crackedSide_,
  // rest_, depth_ and prismMass_ (at construction and after every fracture).
  void rebuild();
  // Two layers: the area terms on t and t' and the three tets of every prism.
  void addAreaAndVolumeTerms();
  // Per triangle side (nTriangles, 3): 1 where it carries springs. One layer: the uncracked
  // sides (a crack's faces are free edges; a triangle cut loose is free particles or a rigid
  // fragment). Two layers: also a cracked side once the crack has opened there (no triangle
  // runs its edge the other way), so a prism cut loose on every side keeps its shape rather
  // than hanging by area and volume terms alone ([measured] one such prism, pinned by a
  // corner in a wall's base, was flung to 1000 m/s by the 1 GPa wall's volume terms).
  [[nodiscard]] std::vector<uint8_t> sidesWithSprings() const;
  // d_i, floored at kMinDepthFraction of epsilon (for stiffness and mass), m.
  [[nodiscard]] double flooredDepth(int32_t v) const;
  // Per edge of S (a < b): its springs on each layer, Van Gelder's map per triangle side that
  // carries springs with the local depth for the thickness, shared by the layers; and its
  // wall share, half per such side [ours]: the cross springs of an edge inside the mesh are
  // whole, of one on the boundary half (its wall belongs to one prism), as the layer springs.
  struct EdgeSprings {
    double stiffness = 0;  // N/m
    double wallShare = 0;  // 0.5 or 1
  };
  [[nodiscard]] std::map<std::pair<int32_t, int32_t>, EdgeSprings> edgeSprings() const;
  // Two layers: the springs of every edge on S and S', its cross springs, and the internal
  // springs at every vertex.
  void addCrossAndInternalSprings(const std::map<std::pair<int32_t, int32_t>, EdgeSprings>& edges);
  void addSpring(int32_t a, int32_t b, double stiffness);
  // mass_ from prismMass_: a third of each prism to each corner (one layer), a sixth to each
  // corner on S and S' (two); InputError for a node in no triangle.
  void distributeMasses();
  // The connected part of S each vertex of S is in, (nVertices).
  [[nodiscard]] const std::vector<int32_t>& surfacePieces() const { return pieces_; }
  [[nodiscard]] std::vector<int32_t> connectedParts() const;  // computes it
  // The nodes as a brittle frame draws them: every piece at the rigid motion that best fits
  // x (shape matching), (nNodes, 3).
  [[nodiscard]] std::vector<double> rigidlyFitted(std::span<const double> x) const;
  // Fracture helpers (thick_shell_fracture.cpp). x: current positions, grown with new nodes.
  // Splits v along the plane through it normal to `normal`; the far ends of the sides it
  // cracked are appended to `tips` (if given). False when the plane cuts no side.
  // The plane passes through planePoint when given (a crack extended along one plane).
  bool splitAt(int32_t v, const Vec3& normal, std::vector<double>& x,
               std::vector<int32_t>* tips = nullptr, const Vec3* planePoint = nullptr);
  // Large-fragment fracture (section 4.2.3): the crack split at `start` runs on from its
  // tips along the same plane (through planePoint) until `extension` metres from it.
  void extendCrack(const Vec3& start, const Vec3& planePoint, const Vec3& normal,
                   std::vector<int32_t> tips, std::vector<double>& x);
  // Local re-meshing (section 4.2.3, Fig. 5): every triangle at v whose far side the plane
  // (planePoint, normal) crosses well inside is cut in two along the plane, with the
  // triangle across that side, so the split that follows cracks along the plane.
  void remeshAt(int32_t v, const Vec3& planePoint, const Vec3& normal, std::vector<double>& x);
  // Cuts triangle t (corners v, a, b in its order) and the triangle across (a, b) at the
  // new node a + tau (b - a) when every angle the cut makes is at least the scene's limit;
  // false otherwise.
  bool cutTriangle(int32_t t, size_t corner, double tau, std::vector<double>& x);
  void separateFans(int32_t v, std::vector<double>& x);
  int32_t copyNode(int32_t v, std::vector<double>& x);
  // A new node blending a and b by weights (1 - tau, tau): position, rest position, depth.
  int32_t blendNode(int32_t a, int32_t b, double tau, std::vector<double>& x);
  // A new triangle (corners, cracked sides, prism mass), registered at its corners.
  int32_t addTriangle(const std::array<int32_t, 3>& corners, const std::array<uint8_t, 3>& cracked,
                      double prismMass);
  [[nodiscard]] int32_t otherTriangleAt(int32_t v, int32_t w, int32_t t) const;

  int32_t vertexCount_ = 0;  // n, the vertices of S
  int32_t nodeCount_ = 0;    // n or 2n
  int32_t layers_ = 2;
  double extrusionFactor_ = 1;
  double areaStiffnessFactor_ = 1, volumeStiffnessFactor_ = 1;  // ThickShellDef
  bool brittle_ = false;                                        // ThickShellDef::brittle
  std::vector<int32_t> triangles_;                              // (nTriangles, 3), S
  // Fracture state. Side k of triangle t is its edge (c_k, c_k+1); a cracked side carries no
  // spring (nor, with two layers, its S' twin or cross springs), and the fans of its ends are
  // split apart where it separates them. Per-node arrays of the fracture pass are per vertex
  // of S (n); S' node n + i follows vertex i.
  std::vector<uint8_t> crackedSide_;  // (nTriangles, 3)
  std::vector<double> prismMass_;     // (nTriangles), kg
  std::vector<uint8_t> crackTip_;     // (n): a crack ends here
  std::vector<uint8_t> mayStart_;     // (n): coarse mode, a crack may start here
  // (n): the order that splits each prism into tets (the smallest-index rule on these keys):
  // a copy keeps its parent's key, so a split never re-cuts a deformed prism into other tets
  // (whose rest volumes differ from the ones it stretched: an energy jump of thousands of
  // joules in a stiff wall); a node made on a side (re-meshing) takes its own index.
  std::vector<int32_t> splitKey_;
  uint64_t rng_ = 0;  // splitmix64 state: which end of a spring splits
  uint64_t topologyVersion_ = 0;
  std::optional<ThickShellFractureDef> fracture_;
  double young_ = 0, floorDepth_ = 0;
  // During a fracture pass: the triangles at each node, and for every node made in the pass
  // the old nodes it blends (weights summing to 1; a copy has one, its parent).
  std::vector<std::vector<int32_t>> trianglesAt_;
  std::vector<std::vector<std::pair<int32_t, double>>> passSources_;
  std::vector<double> depth_;            // (n), m, the drawn depth d_i
  std::vector<int32_t> pieces_;          // (n), surfacePieces(), after every topology change
  std::vector<double> rest_;             // (nNodes, 3), m
  std::vector<double> mass_;             // (nNodes), kg
  std::vector<int32_t> springNodes_;     // (nSprings, 2)
  std::vector<double> springRest_;       // (nSprings), m
  std::vector<double> springStiffness_;  // (nSprings), N/m
  std::vector<int32_t> areaNodes_;       // (nAreas, 3)
  std::vector<double> areaRest_;         // (nAreas), m^2
  std::vector<double> areaStiffness_;    // (nAreas), J
  std::vector<int32_t> tetNodes_;        // (nTets, 4)
  std::vector<double> tetVolume_;        // (nTets), m^3, signed
  std::vector<double> tetStiffness_;     // (nTets), J
  Incidence springIncidence_, areaIncidence_, tetIncidence_;
  double stableStep_ = 0;
  // stableStep_, and the Lanczos estimate and Gershgorin's step when Lanczos last ran
  // (followStableStep), s; part of the fracture state, so that a restored run follows the
  // same steps.
  std::vector<double> stableStepState_{0, 0, 0};
};

}  // namespace shellsim
