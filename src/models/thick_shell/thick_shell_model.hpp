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

  [[nodiscard]] std::span<const double> restPositions() const { return rest_; }
  [[nodiscard]] std::span<const int32_t> springNodes() const { return springNodes_; }
  [[nodiscard]] std::span<const double> springStiffness() const { return springStiffness_; }
  [[nodiscard]] std::span<const int32_t> tetNodes() const { return tetNodes_; }
  [[nodiscard]] std::span<const double> tetRestVolumes() const { return tetVolume_; }

 private:
  void computeStableStep();

  int32_t vertexCount_ = 0;  // n, the vertices of S
  int32_t nodeCount_ = 0;    // n or 2n
  int32_t layers_ = 2;
  double extrusionFactor_ = 1;
  std::vector<int32_t> triangles_;       // (nTriangles, 3), S
  std::vector<double> depth_;            // (n), m, the drawn depth d_i
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
};

}  // namespace shellsim
