// Mass-spring network over the edges of a triangle mesh.
//
// The baseline membrane model: one spring per unique mesh edge, masses lumped from the
// triangles. It is the one-layer surface model of Steinemann's thick shells (section 4:
// "one layer of springs on the surface"), which has no bending resistance: a sheet of
// it behaves like cloth.
//
// Spring stencil (K = 2):   x0 o-----------o x1     rest length L, stiffness k
//   E = 1/2 k (l - L)^2,  l = |x1 - x0|
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

// One spring: energy, gradient w.r.t. (x0, x1) and, if requested, the 6x6 Hessian.
//   d = x1 - x0, l = |d|, u = d / l
//   dE/dx1 = k (l - L) u = -dE/dx0
//   d2E/dx1^2 = k [u u^T + (1 - L/l)(I - u u^T)],  blocks: [H, -H; -H, H]
// A zero-length spring (l = 0) has an undefined direction; it contributes its energy
// 1/2 k L^2 and no force, which is the limit of the symmetric configuration.
double springEnergyGradient(double stiffness, double restLength, const Vec3 x[2], Vec3 gradient[2],
                            Eigen::Matrix<double, 6, 6>* hessian = nullptr);

struct MassSpringSetup {
  std::vector<std::string> warnings;  // e.g. a Poisson ratio a spring network cannot represent
};

class MassSpringModel : public Model {
 public:
  // mesh: triangle mesh at rest (its positions are the rest configuration). Every
  // vertex must belong to a triangle. Throws InputError naming the offending element.
  // Stiffness: material.stiffness if given, else the area-weighted map of Van Gelder
  // (1998), k_e = E h sum_{T contains e} A_T / |e|^2, which reproduces the plane-stress
  // Young's modulus E of a regular triangular mesh exactly (with Poisson ratio 1/3,
  // the only one a spring network can have). Masses: m_i = rho h sum_{T contains i} A_T / 3.
  MassSpringModel(const Geometry& mesh, const MaterialDef& material,
                  MassSpringSetup* setup = nullptr);

  [[nodiscard]] std::string name() const override { return "mass_spring"; }
  [[nodiscard]] int32_t nodeCount() const override { return nodeCount_; }
  [[nodiscard]] int64_t elementCount() const override {
    return static_cast<int64_t>(restLength_.size());
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
  [[nodiscard]] double stableTimeStep() const override;
  [[nodiscard]] Geometry surface(std::span<const double> x) const override;
  [[nodiscard]] ContactMesh contactMesh() const override { return {triangles_, restPositions_}; }
  // The input's shape, fixed for the run: the quasi-Newton stand-in built there is kept
  // from frame to frame (Model::standInPositions).
  [[nodiscard]] std::span<const double> standInPositions() const override { return restPositions_; }

  [[nodiscard]] std::span<const int32_t> springNodes() const { return springNodes_; }
  [[nodiscard]] std::span<const double> springStiffness() const { return stiffness_; }
  [[nodiscard]] std::span<const double> springRestLength() const { return restLength_; }

 private:
  int32_t nodeCount_ = 0;
  std::vector<int32_t> triangles_;     // (nTriangles, 3), for output and contact
  std::vector<double> restPositions_;  // (nNodes, 3), m, the input's positions, for contact
  std::vector<int32_t> springNodes_;   // (nSprings, 2), node indices, first < second
  std::vector<double> restLength_;     // (nSprings), m
  std::vector<double> stiffness_;      // (nSprings), N/m
  std::vector<double> mass_;           // (nNodes), kg
  Incidence incidence_;                // node -> (spring, end)
};

}  // namespace shellsim
