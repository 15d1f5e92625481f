#include "models/inelastic_shell/inelastic_shell_model.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
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
      bending_(params.bending),
      plasticity_(params.plasticity),
      fracture_(params.fracture),
      stepSearch_(params.stepSearch),
      material_(material) {
  if (plasticity_ &&
      (!(plasticity_->yieldStrain > 0) || !std::isfinite(plasticity_->yieldStrain) ||
       !(plasticity_->hardening >= 0) || !std::isfinite(plasticity_->hardening) ||
       !(plasticity_->stepLimit >= 0) || !std::isfinite(plasticity_->stepLimit) ||
       !(plasticity_->hardeningLimit >= 0) || !std::isfinite(plasticity_->hardeningLimit))) {
    throw InputError(
        "inelastic_shell: plasticity needs a yield strain > 0, a hardening >= 0, a plastic "
        "step limit >= 0 and a hardening limit >= 0");
  }
  if (fracture_ && (!(fracture_->strainLimit > 0) || !std::isfinite(fracture_->strainLimit) ||
                    !(fracture_->absorption >= 0 && fracture_->absorption <= 1) ||
                    fracture_->refractorySteps < 0 || fracture_->maxCracksPerStep < 1 ||
                    !(fracture_->minimumSplit > 0 && fracture_->minimumSplit < 0.5) ||
                    !(fracture_->toughness >= 0) || !std::isfinite(fracture_->toughness))) {
    throw InputError(
        "inelastic_shell: fracture needs a strain limit > 0, an absorption in [0, 1], "
        "refractory steps >= 0, a minimum split in (0, 0.5), at least 1 crack per step and a "
        "toughness >= 0");
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
  refractory_.assign(faces, 0.0);

  computeStableStep();
}

void InelasticShellModel::computeStableStep() {
  const size_t faces = faceParams_.size();
  // Stable step: Gershgorin on S = M^-1/2 K M^-1/2 at rest, face Hessians added by their
  // absolute values (an upper bound of the assembled rows' absolute sums): per face and
  // slot row sum_b |h_ab| / sqrt(m_b) in parallel, gathered per node in a fixed order, times
  // 1 / sqrt(m_a).
  std::vector<double> inverseRoot(mass_.size());
  for (size_t n = 0; n < mass_.size(); ++n) inverseRoot[n] = 1 / std::sqrt(mass_[n]);
  std::vector<double> slotSum, rowSum(3 * static_cast<size_t>(nodeCount_), 0.0);
  withStencilWidth([&]<int N>() {
    const auto width = static_cast<size_t>(N);
    slotSum.assign(3 * width * faces, 0.0);
    tbb::parallel_for(tbb::blocked_range<size_t>(0, faces, 64),
                      [&](const tbb::blocked_range<size_t>& r) {
                        Eigen::Matrix<double, 3 * N, 3 * N> h;
                        Vec3 x[N], g[N];
                        double scale[3 * N];
                        for (size_t f = r.begin(); f != r.end(); ++f) {
                          for (size_t k = 0; k < width; ++k) {
                            const auto node = static_cast<size_t>(faceStencil_[width * f + k]);
                            x[k] = vertex(restPositions_, faceStencil_[width * f + k]);
                            for (size_t c = 0; c < 3; ++c) scale[3 * k + c] = inverseRoot[node];
                          }
                          (void)evaluateFace<N>(f, x, g, &h);
                          for (int a = 0; a < 3 * N; ++a) {
                            double sum = 0;
                            for (int b = 0; b < 3 * N; ++b) sum += std::abs(h(a, b)) * scale[b];
                            slotSum[3 * width * f + static_cast<size_t>(a)] = sum;
                          }
                        }
                      });
  });
  gatherIncidentGradients<3, 1>(incidence_, slotSum, rowSum);
  double lambda = 0;
  for (size_t i = 0; i < rowSum.size(); ++i)
    lambda = std::max(lambda, rowSum[i] * inverseRoot[i / 3]);
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
  // 3u + j is edge j of triangle u, opposite its corner j, which triangles_[across] is), then
  // with the quadratic patch the slots makeQuadraticPatch fills (corner 0 until then).
  const std::vector<int32_t> previousStencil = std::move(faceStencil_);
  const size_t width = stencilWidth();
  faceStencil_.assign(width * faces, 0);
  for (size_t f = 0; f < faces; ++f) {
    for (size_t k = 0; k < width; ++k) faceStencil_[width * f + k] = corner(f, 0);
    for (int i = 0; i < 3; ++i) {
      faceStencil_[width * f + static_cast<size_t>(i)] = corner(f, i);
      const int32_t across = faceNeighbour_[3 * f + static_cast<size_t>(i)];
      faceStencil_[width * f + 3 + static_cast<size_t>(i)] =
          across < 0 ? corner(f, i) : triangles_[static_cast<size_t>(across)];
    }
  }

  // Rest data, masses.
  faceParams_.resize(faces);
  membraneBasis_.resize(12 * faces);
  bendingBasis_.resize(12 * faces);
  elasticRestSquaredLength_.resize(3 * faces);
  elasticRestPhi_.resize(3 * faces);
  if (bending_ == InelasticShellBending::kQuadraticPatch) patch_.resize(faces);
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
          vertex(restPositions_, faceStencil_[width * f + 3 + static_cast<size_t>(i)])};
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
    if (bending_ == InelasticShellBending::kQuadraticPatch) makeQuadraticPatch(f, previousStencil);
  }
  mass_ = lumpedMasses(triangles_, topology.restArea, material_.density * material_.thickness,
                       nodeCount_);
  incidence_ = buildIncidence(faceStencil_, nodeCount_);
  findCrackEnds();
}

// The quadratic patch of face f (inelastic_shell_kernel.hpp): the nodes of the faces within
// two steps across edges (then more steps, up to six, while fewer than 8 nodes), in that
// order, at most kPatchNodes; parameters their rest positions projected onto the face's rest
// plane. Faces across edges only, so a patch never reaches across a crack. A face whose
// nodes do not determine a quadratic (a strip one face wide) keeps the paper's operator. A
// face whose patch nodes are those it had before the last topology change keeps its patch
// (fracture rebuilds the topology after every cut; rest positions never move).
void InelasticShellModel::makeQuadraticPatch(size_t f, const std::vector<int32_t>& previous) {
  constexpr size_t kWidth = inelastic_shell::kPatchNodes;
  std::vector<int32_t> nodes{triangles_[3 * f], triangles_[3 * f + 1], triangles_[3 * f + 2]};
  std::vector<int32_t> seen{static_cast<int32_t>(f)}, ring{static_cast<int32_t>(f)};
  for (int depth = 1; depth <= 6 && nodes.size() < kWidth && (depth <= 2 || nodes.size() < 8);
       ++depth) {
    std::vector<int32_t> next;
    for (const int32_t face : ring) {
      for (size_t e = 0; e < 3; ++e) {
        const int32_t across = faceNeighbour_[3 * static_cast<size_t>(face) + e];
        if (across < 0) continue;
        const int32_t u = across / 3;
        if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
        seen.push_back(u);
        next.push_back(u);
        for (size_t c = 0; c < 3 && nodes.size() < kWidth; ++c) {
          const int32_t node = triangles_[3 * static_cast<size_t>(u) + c];
          if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
        }
      }
    }
    if (next.empty()) break;
    ring = std::move(next);
  }
  const auto count = static_cast<int>(nodes.size());
  const auto slot = [&](size_t k) -> int32_t& { return faceStencil_[kWidth * f + k]; };
  const bool unchanged = previous.size() >= kWidth * (f + 1) && patch_[f].nodes == count &&
                         std::equal(nodes.begin(), nodes.end(),
                                    previous.begin() + static_cast<std::ptrdiff_t>(kWidth * f));
  if (!unchanged) {
    Vec3 rest[kWidth];
    for (size_t k = 0; k < kWidth; ++k) {
      rest[k] = vertex(restPositions_, k < nodes.size() ? nodes[k] : nodes[0]);
    }
    const Vec3 corners[3] = {rest[0], rest[1], rest[2]};
    const inelastic_shell::RestFrame frame = inelastic_shell::restFrame(corners);
    Eigen::Matrix<double, kWidth, 2> uv = Eigen::Matrix<double, kWidth, 2>::Zero();
    for (int k = 0; k < count; ++k) uv.row(k) = frame.of(rest[k]).transpose();
    inelastic_shell::PatchParams patch;
    if (!inelastic_shell::patchParams(uv, rest, count, material_.youngModulus, material_.poisson,
                                      material_.thickness, patch)) {
      patch_[f] = {};
      faceParams_[f].quadratic = 0;
      return;  // the operator's stencil stays
    }
    patch_[f] = patch;
  }
  faceParams_[f].quadratic = 1;
  for (size_t k = 0; k < kWidth; ++k) slot(k) = k < nodes.size() ? nodes[k] : nodes[0];
}

bool InelasticShellModel::bendsFreely(size_t f) const {
  const auto& params = faceParams_[f];
  return params.quadratic != 0 ||
         (params.hinged[0] != 0 && params.hinged[1] != 0 && params.hinged[2] != 0);
}

std::unique_ptr<ModelWorkspace> InelasticShellModel::makeWorkspace() const {
  return std::make_unique<InelasticShellWorkspace>();
}

EnergyParts InelasticShellModel::energy(std::span<const double> x,
                                        ModelWorkspace* workspace) const {
  return addGradient(x, {}, workspace);
}

template <int N>
inelastic_shell::FaceEnergy InelasticShellModel::evaluateFace(
    size_t f, const Vec3 (&x)[N], Vec3 (&g)[N], Eigen::Matrix<double, 3 * N, 3 * N>* h) const {
  if constexpr (N == 6) {
    return inelastic_shell::faceEnergy(faceParams_[f], x, g, h);
  } else {
    if (faceParams_[f].quadratic != 0) {
      return inelastic_shell::patchFaceEnergy(faceParams_[f], patch_[f], x, g, h);
    }
    // The paper's operator on the first six slots.
    Vec3 x6[6], g6[6];
    for (int k = 0; k < 6; ++k) x6[k] = x[k];
    inelastic_shell::Mat18 h18;
    const inelastic_shell::FaceEnergy e =
        inelastic_shell::faceEnergy(faceParams_[f], x6, g6, h != nullptr ? &h18 : nullptr);
    for (int k = 0; k < N; ++k) g[k] = k < 6 ? g6[k] : Vec3::Zero();
    if (h != nullptr) {
      h->setZero();
      h->template topLeftCorner<18, 18>() = h18;
    }
    return e;
  }
}

template inelastic_shell::FaceEnergy InelasticShellModel::evaluateFace<6>(
    size_t, const Vec3 (&)[6], Vec3 (&)[6], Eigen::Matrix<double, 18, 18>*) const;
template inelastic_shell::FaceEnergy
InelasticShellModel::evaluateFace<inelastic_shell::kPatchNodes>(
    size_t, const Vec3 (&)[inelastic_shell::kPatchNodes], Vec3 (&)[inelastic_shell::kPatchNodes],
    inelastic_shell::Mat36*) const;

EnergyParts InelasticShellModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                             ModelWorkspace* workspace) const {
  if (workspace == nullptr)
    return gradient.empty() ? Model::energy(x) : Model::addGradient(x, gradient);
  auto& w = static_cast<InelasticShellWorkspace&>(*workspace);
  const size_t faces = faceParams_.size();
  const bool wantGradient = !gradient.empty();
  const size_t width = stencilWidth();
  w.faceEnergy.resize(2 * faces);
  if (wantGradient) w.slotGradient.resize(3 * width * faces);
  withStencilWidth([&]<int N>() {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, faces, kAssemblyGrain),
                      [&](const tbb::blocked_range<size_t>& r) {
                        Vec3 xs[N], g[N];
                        for (size_t f = r.begin(); f != r.end(); ++f) {
                          for (size_t k = 0; k < static_cast<size_t>(N); ++k) {
                            xs[k] = vertex(x, faceStencil_[N * f + k]);
                          }
                          const inelastic_shell::FaceEnergy e = evaluateFace<N>(f, xs, g, nullptr);
                          w.faceEnergy[f] = e.stretching;
                          w.faceEnergy[faces + f] = e.bending;
                          if (!wantGradient) continue;
                          double* out = &w.slotGradient[3 * N * f];
                          for (int k = 0; k < N; ++k) {
                            for (int c = 0; c < 3; ++c) out[3 * k + c] = g[k][c];
                          }
                        }
                      });
  });
  if (wantGradient) gatherIncidentGradients<3, 1>(incidence_, w.slotGradient, gradient);
  const std::span<const double> energies(w.faceEnergy);
  return {deterministicSum(energies.first(faces)), deterministicSum(energies.subspan(faces))};
}

std::vector<int32_t> InelasticShellModel::hessianBlockNodes() const {
  std::vector<int32_t> pairs;
  withStencilWidth([&]<int N>() { stencilBlockNodes<N>(faceStencil_, pairs); });
  return pairs;
}

bool InelasticShellModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  withStencilWidth([&]<int N>() {
    stencilHessianBlocks<N>(
        faceStencil_, x, values,
        [&](size_t f, const Vec3(&xs)[N], Vec3(&g)[N], Eigen::Matrix<double, 3 * N, 3 * N>& h) {
          (void)evaluateFace<N>(f, xs, g, &h);
          if (projectHessian_) discrete_shell::projectToPositiveSemiDefinite(h);
        });
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
  const size_t width = stencilWidth();
  Vec3 xs[inelastic_shell::kPatchNodes];
  for (size_t k = 0; k < width; ++k) xs[k] = vertex(x, faceStencil_[width * f + k]);
  Vec3 x6[6];
  for (int k = 0; k < 6; ++k) x6[k] = xs[k];
  inelastic_shell::faceStrains(faceParams_[f], &membraneBasis_[12 * f], &bendingBasis_[12 * f], x6,
                               membrane, bending);
  if (faceParams_[f].quadratic != 0) inelastic_shell::patchBendingStrain(patch_[f], xs, bending);
}

}  // namespace shellsim
