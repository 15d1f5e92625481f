#include "models/inelastic_shell/inelastic_shell_model.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <limits>

#include "geometry/triangle_mesh.hpp"
#include "models/discrete_shell/discrete_shell_kernel.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

Vec3 vertex(std::span<const double> x, int32_t v) {
  return row(x, static_cast<size_t>(v));
}

// Scratch of one evaluation: every face's energies and slot gradients.
struct InelasticShellWorkspace : ModelWorkspace {
  std::vector<double> faceEnergy;    // (2, nFaces): stretching, then bending, J
  std::vector<double> slotGradient;  // (nFaces, 6, 3), J/m
};

}  // namespace

InelasticShellModel::InelasticShellModel(const Geometry& mesh, const MaterialDef& material,
                                         const InelasticShellParams& params)
    : projectHessian_(params.projectHessian),
      plasticity_(params.plasticity),
      fracture_(params.fracture),
      stepSearch_(params.stepSearch),
      material_(material) {
  if (plasticity_ && (!(plasticity_->yieldStrain > 0) || !std::isfinite(plasticity_->yieldStrain) ||
                      !(plasticity_->hardening >= 0) || !std::isfinite(plasticity_->hardening))) {
    throw InputError("inelastic_shell: plasticity needs a yield strain > 0 and a hardening >= 0");
  }
  if (fracture_ && (!(fracture_->strainLimit > 0) || !std::isfinite(fracture_->strainLimit) ||
                    !(fracture_->absorption >= 0 && fracture_->absorption <= 1) ||
                    fracture_->refractorySteps < 0 || fracture_->maxCracksPerStep < 1 ||
                    !(fracture_->minimumSplit > 0 && fracture_->minimumSplit < 0.5))) {
    throw InputError(
        "inelastic_shell: fracture needs a strain limit > 0, an absorption in [0, 1], "
        "refractory steps >= 0, a minimum split in (0, 0.5) and at least 1 crack per step");
  }
  if (stepSearch_ && !(stepSearch_->forceRatio > 1 && std::isfinite(stepSearch_->forceRatio))) {
    throw InputError("inelastic_shell: the step search needs a force ratio > 1");
  }
  if (mesh.isPointCloud()) {
    throw InputError("inelastic_shell: needs a triangle mesh, but the geometry is a point cloud");
  }
  restPositions_ = mesh.positions;
  triangles_ = mesh.triangles;
  buildTopology();
  const size_t faces = triangles_.size() / 3;
  plasticSquaredLength_.assign(3 * faces, 0.0);
  plasticPhi_.assign(3 * faces, 0.0);
  refractory_.assign(faces, 0);

  computeStableStep();
}

void InelasticShellModel::computeStableStep() {
  const size_t faces = faceParams_.size();
  // Stable step: Gershgorin on S = M^-1/2 K M^-1/2 at rest, face Hessians added by their
  // absolute values (an upper bound of the assembled rows' absolute sums).
  std::vector<double> rowSum(3 * static_cast<size_t>(nodeCount_), 0.0);
  inelastic_shell::Mat18 h;
  Vec3 x[6], g[6];
  for (size_t f = 0; f < faces; ++f) {
    for (int k = 0; k < 6; ++k)
      x[k] = vertex(restPositions_, faceStencil_[6 * f + static_cast<size_t>(k)]);
    (void)inelastic_shell::faceEnergy(faceParams_[f], x, g, &h);
    for (int a = 0; a < 18; ++a) {
      const auto nodeA = static_cast<size_t>(faceStencil_[6 * f + static_cast<size_t>(a / 3)]);
      double sum = 0;
      for (int b = 0; b < 18; ++b) {
        const auto nodeB = static_cast<size_t>(faceStencil_[6 * f + static_cast<size_t>(b / 3)]);
        sum += std::abs(h(a, b)) / std::sqrt(mass_[nodeA] * mass_[nodeB]);
      }
      rowSum[3 * nodeA + static_cast<size_t>(a % 3)] += sum;
    }
  }
  double lambda = 0;
  for (const double s : rowSum) lambda = std::max(lambda, s);
  stableStep_ = lambda > 0 ? 2.0 / std::sqrt(lambda) : std::numeric_limits<double>::infinity();
}

// Everything that follows from the rest positions and the triangles (the elastic rest values,
// the bases, the stencils, the masses), for the mesh as built and after every fracture. The
// face adjacency is keyed by vertex pairs (geometry/triangle_mesh.hpp): a cut never runs
// along an existing edge (inelastic_shell_fracture.cpp), so no two boundary edges of a cut
// mesh share both endpoints and nothing is glued back.
void InelasticShellModel::buildTopology() {
  Geometry mesh;
  mesh.positions = restPositions_;
  mesh.triangles = triangles_;
  const TriangleMeshTopology topology = checkedTriangleMesh(mesh, "inelastic_shell");
  nodeCount_ = mesh.vertexCount();
  faceNeighbour_ = topology.faceNeighbour;
  const size_t faces = triangles_.size() / 3;
  const auto corner = [&](size_t f, int c) { return triangles_[3 * f + static_cast<size_t>(c)]; };

  // Stencils: corners, then flaps (the neighbour's corner opposite the shared edge: across =
  // 3u + j is edge j of triangle u, opposite its corner j, which triangles_[across] is).
  faceStencil_.resize(6 * faces);
  for (size_t f = 0; f < faces; ++f) {
    for (int i = 0; i < 3; ++i) {
      faceStencil_[6 * f + static_cast<size_t>(i)] = corner(f, i);
      const int32_t across = faceNeighbour_[3 * f + static_cast<size_t>(i)];
      faceStencil_[6 * f + 3 + static_cast<size_t>(i)] =
          across < 0 ? corner(f, i) : triangles_[static_cast<size_t>(across)];
    }
  }

  // Rest data, masses.
  faceParams_.resize(faces);
  membraneBasis_.resize(12 * faces);
  bendingBasis_.resize(12 * faces);
  elasticRestSquaredLength_.resize(3 * faces);
  elasticRestPhi_.resize(3 * faces);
  for (size_t f = 0; f < faces; ++f) {
    const Vec3 rest[3] = {vertex(restPositions_, corner(f, 0)),
                          vertex(restPositions_, corner(f, 1)),
                          vertex(restPositions_, corner(f, 2))};
    std::array<double, 3> restAngle{};
    std::array<uint8_t, 3> hinged{};
    for (int i = 0; i < 3; ++i) {
      if (faceNeighbour_[3 * f + static_cast<size_t>(i)] < 0) continue;
      hinged[static_cast<size_t>(i)] = 1;
      // Measured by the function the force pass uses, so that the rest shape is force free
      // to the last bit.
      const Vec3 hinge[4] = {
          rest[(i + 1) % 3], rest[(i + 2) % 3], rest[i],
          vertex(restPositions_, faceStencil_[6 * f + 3 + static_cast<size_t>(i)])};
      Vec3 unused[4];
      restAngle[static_cast<size_t>(i)] = discrete_shell::dihedralAngleGradient(hinge, unused);
    }
    faceParams_[f] = inelastic_shell::faceParams(rest, restAngle, hinged, material_.youngModulus,
                                                 material_.poisson, material_.thickness,
                                                 &membraneBasis_[12 * f], &bendingBasis_[12 * f]);
    for (size_t i = 0; i < 3; ++i) {
      elasticRestSquaredLength_[3 * f + i] = faceParams_[f].restSquaredLength[i];
      elasticRestPhi_[3 * f + i] = faceParams_[f].restPhi[i];
    }
  }
  mass_ = lumpedMasses(triangles_, topology.restArea, material_.density * material_.thickness,
                       nodeCount_);
  incidence_ = buildIncidence(faceStencil_, nodeCount_);
}

std::unique_ptr<ModelWorkspace> InelasticShellModel::makeWorkspace() const {
  return std::make_unique<InelasticShellWorkspace>();
}

EnergyParts InelasticShellModel::energy(std::span<const double> x,
                                        ModelWorkspace* workspace) const {
  return addGradient(x, {}, workspace);
}

EnergyParts InelasticShellModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                             ModelWorkspace* workspace) const {
  if (workspace == nullptr)
    return gradient.empty() ? Model::energy(x) : Model::addGradient(x, gradient);
  auto& w = static_cast<InelasticShellWorkspace&>(*workspace);
  const size_t faces = faceParams_.size();
  const bool wantGradient = !gradient.empty();
  w.faceEnergy.resize(2 * faces);
  if (wantGradient) w.slotGradient.resize(18 * faces);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, faces, kAssemblyGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      Vec3 xs[6], g[6];
                      for (size_t f = r.begin(); f != r.end(); ++f) {
                        for (int k = 0; k < 6; ++k) {
                          xs[k] = vertex(x, faceStencil_[6 * f + static_cast<size_t>(k)]);
                        }
                        const inelastic_shell::FaceEnergy e =
                            inelastic_shell::faceEnergy(faceParams_[f], xs, g);
                        w.faceEnergy[f] = e.stretching;
                        w.faceEnergy[faces + f] = e.bending;
                        if (!wantGradient) continue;
                        double* out = &w.slotGradient[18 * f];
                        for (int k = 0; k < 6; ++k) {
                          for (int c = 0; c < 3; ++c) out[3 * k + c] = g[k][c];
                        }
                      }
                    });
  if (wantGradient) gatherIncidentGradients<3, 1>(incidence_, w.slotGradient, gradient);
  const std::span<const double> energies(w.faceEnergy);
  return {deterministicSum(energies.first(faces)), deterministicSum(energies.subspan(faces))};
}

std::vector<int32_t> InelasticShellModel::hessianBlockNodes() const {
  std::vector<int32_t> pairs;
  stencilBlockNodes<6>(faceStencil_, pairs);
  return pairs;
}

bool InelasticShellModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  stencilHessianBlocks<6>(
      faceStencil_, x, values,
      [&](size_t f, const Vec3(&xs)[6], Vec3(&g)[6], inelastic_shell::Mat18& h) {
        (void)inelastic_shell::faceEnergy(faceParams_[f], xs, g, &h);
        if (projectHessian_) discrete_shell::projectToPositiveSemiDefinite(h);
      });
  return true;
}

Geometry InelasticShellModel::surface(std::span<const double> x) const {
  Geometry out;
  out.positions.assign(x.begin(), x.end());
  out.triangles = triangles_;
  computeVertexNormals(out);
  return out;
}

InelasticShellModel::Strains InelasticShellModel::strainsOf(std::span<const double> x,
                                                            size_t f) const {
  double em[4], ec[4];
  faceStrains(x, f, em, ec);
  Strains strains;
  strains.membrane << em[0], em[1], em[2], em[3];
  strains.bending << ec[0], ec[1], ec[2], ec[3];
  return strains;
}

void InelasticShellModel::faceStrains(std::span<const double> x, size_t f, double (&membrane)[4],
                                      double (&bending)[4]) const {
  Vec3 xs[6];
  for (int k = 0; k < 6; ++k) xs[k] = vertex(x, faceStencil_[6 * f + static_cast<size_t>(k)]);
  inelastic_shell::faceStrains(faceParams_[f], &membraneBasis_[12 * f], &bendingBasis_[12 * f], xs,
                               membrane, bending);
}

}  // namespace shellsim
