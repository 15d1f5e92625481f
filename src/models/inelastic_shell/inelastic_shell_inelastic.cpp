// The inelastic shell's plasticity: the plastic triples, the return mapping after each
// accepted step, and the state that carries them (inelastic_shell_model.hpp).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <utility>

#include "models/inelastic_shell/inelastic_shell_model.hpp"
#include "models/inelastic_shell/inelastic_shell_plasticity.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

using Mat2 = Eigen::Matrix2d;

// The basis tensors B_i (2x2 each, (3, 2, 2) row-major) as columns of (xx, xy, yy).
Eigen::Matrix3d basisColumns(const double* basis) {
  Eigen::Matrix3d columns;
  for (int i = 0; i < 3; ++i) {
    columns(0, i) = basis[4 * i];
    columns(1, i) = basis[4 * i + 1];
    columns(2, i) = basis[4 * i + 3];
  }
  return columns;
}

Eigen::Vector3d components(const Mat2& m) {
  return {m(0, 0), 0.5 * (m(0, 1) + m(1, 0)), m(1, 1)};
}

Mat2 combination(const double* basis, const double* weights) {
  Mat2 m = Mat2::Zero();
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 4; ++k) m(k / 2, k % 2) += weights[i] * basis[4 * i + k];
  }
  return m;
}

// N(P) = tr P^2 + (tr P)^2 of a plastic strain (the 3-D norm of the traceless tensor).
double plasticNorm(const Mat2& p) {
  return p.squaredNorm() + p.trace() * p.trace();
}

}  // namespace

void InelasticShellModel::plasticStrains(size_t f, double (&membrane)[4],
                                         double (&bending)[4]) const {
  const Mat2 pm = plasticMembrane(f), pc = plasticBending(f);
  for (int k = 0; k < 4; ++k) {
    membrane[k] = pm(k / 2, k % 2);
    bending[k] = pc(k / 2, k % 2);
  }
}

Mat2 InelasticShellModel::plasticMembrane(size_t f) const {
  return combination(&membraneBasis_[12 * f], &plasticSquaredLength_[3 * f]);
}

Mat2 InelasticShellModel::plasticBending(size_t f) const {
  return combination(&bendingBasis_[12 * f], &plasticPhi_[3 * f]);
}

// p from P_m = sum p_i M_i (the M_i span the symmetric 2x2 tensors of a non-degenerate face);
// q by least squares over the hinged T_i (all three, or a quadratic patch: exact; fewer: P_c's
// projection).
void InelasticShellModel::setPlastic(size_t f, const Mat2& membrane, const Mat2& bending) {
  const Eigen::Vector3d p =
      basisColumns(&membraneBasis_[12 * f]).fullPivLu().solve(components(membrane));
  for (size_t i = 0; i < 3; ++i) plasticSquaredLength_[3 * f + i] = p[static_cast<Eigen::Index>(i)];
  setPlasticBending(f, bending);
}

void InelasticShellModel::setPlasticBending(size_t f, const Mat2& bending) {
  const Eigen::Matrix3d t = basisColumns(&bendingBasis_[12 * f]);
  const bool free = bendsFreely(f);
  const auto& hinged = faceParams_[f].hinged;
  Eigen::Matrix3d used = Eigen::Matrix3d::Zero();
  for (int i = 0; i < 3; ++i) {
    if (free || hinged[static_cast<size_t>(i)] != 0) used.col(i) = t.col(i);
  }
  const Eigen::Vector3d q = used.colPivHouseholderQr().solve(components(bending));
  for (size_t i = 0; i < 3; ++i) {
    plasticPhi_[3 * f + i] = free || hinged[i] != 0 ? q[static_cast<Eigen::Index>(i)] : 0.0;
  }
}

void InelasticShellModel::refreshRestValues(size_t f) {
  inelastic_shell::FaceParams& params = faceParams_[f];
  for (size_t i = 0; i < 3; ++i) {
    params.restSquaredLength[i] =
        elasticRestSquaredLength_[3 * f + i] + plasticSquaredLength_[3 * f + i];
    params.restPhi[i] =
        params.hinged[i] != 0 ? elasticRestPhi_[3 * f + i] + plasticPhi_[3 * f + i] : 0.0;
  }
  if (params.quadratic != 0) {
    // kappa0 + P_c over (xx, yy, xy).
    inelastic_shell::PatchParams& patch = patch_[f];
    const Mat2 pc = plasticBending(f);
    patch.rest[0] = patch.elasticCurvature[0] + pc(0, 0);
    patch.rest[1] = patch.elasticCurvature[1] + pc(1, 1);
    patch.rest[2] = patch.elasticCurvature[2] + 0.5 * (pc(0, 1) + pc(1, 0));
  }
}

double InelasticShellModel::yieldNorm(std::span<const double> x, size_t f) const {
  const Strains elastic = strainsOf(x, f);
  const inelastic_shell::YieldParams params{
      plasticity_ ? plasticity_->yieldStrain : 0.0, plasticity_ ? plasticity_->hardening : 0.0,
      plasticity_ ? plasticity_->hardeningLimit : 0.0, material_.poisson, material_.thickness};
  return inelastic_shell::yieldNorm(elastic.membrane, elastic.bending, plasticMembrane(f),
                                    plasticBending(f), params);
}

std::pair<double, size_t> InelasticShellModel::largestYieldNorm(std::span<const double> x) const {
  using Largest = std::pair<double, size_t>;
  const auto larger = [](const Largest& a, const Largest& b) {
    return b.first > a.first || (b.first == a.first && b.second < a.second) ? b : a;
  };
  return tbb::parallel_reduce(
      tbb::blocked_range<size_t>(0, faceParams_.size(), 256), Largest{0.0, 0},
      [&](const tbb::blocked_range<size_t>& r, Largest largest) {
        for (size_t f = r.begin(); f != r.end(); ++f)
          largest = larger(largest, {yieldNorm(x, f), f});
        return largest;
      },
      larger);
}

InelasticReport InelasticShellModel::updateInelastic(std::span<const double> x, double dt,
                                                     ModelWorkspace* workspace) {
  (void)workspace;
  InelasticReport report;
  if (plasticity_) {
    const size_t faces = faceParams_.size();
    const inelastic_shell::YieldParams params{plasticity_->yieldStrain, plasticity_->hardening,
                                              plasticity_->hardeningLimit, material_.poisson,
                                              material_.thickness};
    std::vector<uint8_t> yielded(faces, 0);
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, faces, 256), [&](const tbb::blocked_range<size_t>& r) {
          for (size_t f = r.begin(); f != r.end(); ++f) {
            const Strains elastic = strainsOf(x, f);
            Mat2 pm = plasticMembrane(f), pc = plasticBending(f);
            // The elastic strains the kernel sees plus the plastic ones: the total strains.
            const Mat2 totalM = elastic.membrane + pm, totalC = elastic.bending + pc;
            const bool free = bendsFreely(f);
            const auto project = [&](Mat2& bending) {
              setPlasticBending(f, bending);
              bending = plasticBending(f);
            };
            const int passes = inelastic_shell::returnMap(
                totalM, totalC, pm, pc, params,
                free ? std::function<void(Mat2&)>() : std::function<void(Mat2&)>(project));
            if (passes == 0) continue;
            setPlastic(f, pm, pc);
            refreshRestValues(f);
            yielded[f] = 1;
          }
        });
    report.yieldingElements = std::count(yielded.begin(), yielded.end(), uint8_t{1});
  }
  // Fracture tests the strains after the plastic update (notes section 5.2, item 7).
  if (fracture_) report.edit = fracturePass(x, dt, report.brokenElements);
  return report;
}

void InelasticShellModel::listStateFields(StateFields& fields) {
  if (!plasticity_ && !fracture_) return;
  fields.add("plastic_squared_length", &plasticSquaredLength_, StateShape::kPerElement, 3);
  fields.add("plastic_phi", &plasticPhi_, StateShape::kPerElement, 3);
  if (!fracture_) return;
  fields.add("rest_positions", &restPositions_, StateShape::kPerNode, 3);
  fields.add("triangles", &triangles_, StateShape::kPerElement, 3);
  fields.add("refractory", &refractory_, StateShape::kPerElement);
  fields.add("refractory_step", &refractoryStep_);
}

void InelasticShellModel::stateAssigned() {
  const auto finite = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  if (!finite(plasticSquaredLength_) || !finite(plasticPhi_) || !finite(restPositions_)) {
    throw InputError(
        "inelastic_shell: a plastic strain or rest position of the state is not finite");
  }
  // With fracture the mesh is part of the state: rebuilt from it (a mesh that is no valid
  // triangle mesh throws, naming the element).
  // The version only moves forward (caches keyed on it are rebuilt).
  if (fracture_) {
    buildTopology();
    ++topologyVersion_;
  }
  const size_t faces = triangles_.size() / 3;
  if (plasticSquaredLength_.size() != 3 * faces || plasticPhi_.size() != 3 * faces ||
      (fracture_ && (refractory_.size() != faces || refractoryStep_.size() != 1))) {
    throw InputError("inelastic_shell: the state's plastic strains do not fit its " +
                     std::to_string(faces) + " faces");
  }
  for (size_t f = 0; f < faces; ++f) refreshRestValues(f);
  if (fracture_) computeStableStep();
}

std::vector<Model::NodeScalar> InelasticShellModel::nodeScalars() const {
  if (!plasticity_) return {};
  NodeScalar plastic{"plastic_strain", std::vector<double>(static_cast<size_t>(nodeCount_), 0.0)};
  std::vector<int32_t> count(static_cast<size_t>(nodeCount_), 0);
  for (size_t f = 0; f < faceParams_.size(); ++f) {
    const double value =
        std::sqrt(plasticNorm(plasticMembrane(f)) +
                  material_.thickness * material_.thickness / 12 * plasticNorm(plasticBending(f)));
    for (size_t c = 0; c < 3; ++c) {
      const auto node = static_cast<size_t>(triangles_[3 * f + c]);
      plastic.values[node] += value;
      ++count[node];
    }
  }
  for (size_t v = 0; v < plastic.values.size(); ++v) {
    if (count[v] > 0) plastic.values[v] /= count[v];
  }
  return {plastic};
}

}  // namespace shellsim
