#include "models/fiber/fiber_model.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>

#include "models/fiber/fiber_kernel.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

using fiber::Mat3;
constexpr double kPi = std::numbers::pi;
constexpr int kMaxFibersPerNode = kMaxNeighbourCount;
constexpr size_t kNodeGrain = 256;

std::string nodeMessage(size_t node, const std::string& what) {
  return "fiber model: node " + std::to_string(node) + ": " + what;
}

}  // namespace

FiberModel::FiberModel(const FiberNodes& nodes, const MaterialDef& material,
                       const FiberParams& params, std::vector<int32_t> outputTriangles,
                       std::vector<std::string>* warnings)
    : samples_(params.samples), triangles_(std::move(outputTriangles)) {
  const size_t n = nodes.positions.size() / 3;
  if (nodes.positions.size() % 3 != 0 || nodes.normals.size() != 3 * n || nodes.areas.size() != n) {
    throw InputError(
        "fiber model: positions (nNodes, 3), normals (nNodes, 3) and areas (nNodes) disagree in "
        "size");
  }
  for (size_t i = 0; i < n; ++i) {
    if (!row(nodes.positions, i).allFinite()) {
      throw InputError(nodeMessage(i, "non-finite position"));
    }
    const Vec3 normal = row(nodes.normals, i);
    if (!normal.allFinite() || !(normal.norm() > 1e-12)) {
      throw InputError(nodeMessage(i, "zero or non-finite normal"));
    }
    if (!std::isfinite(nodes.areas[i]) || !(nodes.areas[i] > 0)) {
      throw InputError(nodeMessage(i, "area " + std::to_string(nodes.areas[i]) + " must be > 0"));
    }
  }
  for (size_t t = 0; t < triangles_.size(); ++t) {
    if (triangles_[t] < 0 || static_cast<size_t>(triangles_[t]) >= n) {
      throw InputError("fiber model: output triangle " + std::to_string(t / 3) + ": vertex index " +
                       std::to_string(triangles_[t]) + " out of range");
    }
  }

  const auto checkScale = [&](const std::vector<double>& scale, const char* what) {
    if (!scale.empty() && scale.size() != n) {
      throw InputError(std::string("fiber model: ") + what + " must have one value per node");
    }
    for (size_t i = 0; i < scale.size(); ++i) {
      if (!std::isfinite(scale[i]) || !(scale[i] > 0)) {
        throw InputError(nodeMessage(i, std::string(what) + " must be > 0"));
      }
    }
  };
  checkScale(params.nodeStiffnessScale, "stiffness scale");
  checkScale(params.nodeFractureScale, "fracture scale");
  if (params.anisotropy) {
    const Vec3 axis(params.anisotropy->axis[0], params.anisotropy->axis[1],
                    params.anisotropy->axis[2]);
    if (!axis.allFinite() || !(axis.norm() > 0) || !(params.anisotropy->ratio > 0)) {
      throw InputError("fiber model: anisotropy needs a non-zero axis and a ratio > 0");
    }
  }

  material_ = material;
  params_ = params;
  areas_ = nodes.areas;
  restPositions_ = nodes.positions;
  restNormals_.resize(3 * n);
  for (size_t i = 0; i < n; ++i) setRow(restNormals_, i, row(nodes.normals, i).normalized());
  crackAtNode_.assign(n, 0);
  buildTopology(warnings);
}

void FiberModel::buildTopology(std::vector<std::string>* warnings) {
  const auto n = restPositions_.size() / 3;
  FiberNetworkParams netParams;
  netParams.neighbourCount = params_.neighbourCount;
  netParams.samples = params_.samples;
  network_ = buildFiberNetwork(restPositions_, restNormals_, netParams, warnings, cracks_);
  buildNormalPatches(!cracks_.empty());
  // Rest lengths and angles, measured by the code evaluate() runs (the batch kernel, with the
  // normals N_j(x0) the energy uses), so that the rest state is force free to the last bit.
  measureRestShape();
  const std::vector<double> restFrameNormals = referenceNormals(restPositions_);

  // Per-node rest values and the stiffness mapping (see the header for the derivation).
  mass_.resize(n);
  stretchK_.resize(n);
  bendK_.resize(n);
  restArea_.resize(n);
  restMeanAngle_.resize(n);
  const double e = material_.youngModulus;
  const double nu = material_.poisson;
  const double h = material_.thickness;
  const double flexural = e * h * h * h / (12.0 * (1.0 - nu * nu));  // D, N m
  const std::optional<double> rawStretch =
      params_.stretchStiffness ? params_.stretchStiffness : material_.stiffness;
  meanAngleWeight_ = std::clamp((3.0 * nu - 1.0) / 2.0, 0.0, 1.0);
  const auto fiberCount = static_cast<size_t>(network_.fiberCount());
  fiberBendWeight_.assign(fiberCount, 0.0);
  fiberStretchWeight_.clear();
  if (params_.anisotropy && params_.anisotropy->ratio != 1.0) {
    // s_k = 1 + (ratio - 1) cos^2 phi_k, phi_k between the rest chord and the axis.
    const Vec3 axis =
        Vec3(params_.anisotropy->axis[0], params_.anisotropy->axis[1], params_.anisotropy->axis[2])
            .normalized();
    fiberStretchWeight_.resize(fiberCount);
    for (size_t f = 0; f < fiberCount; ++f) {
      const Vec3 chord = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * f + 2])) -
                         row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * f]));
      const double cosine = chord.dot(axis) / chord.norm();
      fiberStretchWeight_[f] = 1.0 + (params_.anisotropy->ratio - 1.0) * cosine * cosine;
    }
  }
  const auto directionWeight = [&](size_t f) {
    return fiberStretchWeight_.empty() ? 1.0 : fiberStretchWeight_[f];
  };
  for (size_t j = 0; j < n; ++j) {
    const double area = areas_[j];
    mass_[j] = material_.density * h * area;
    const Vec3 normal = row(restFrameNormals, j);
    const Vec3 tangent1 = normal.unitOrthogonal();
    const Vec3 tangent2 = normal.cross(tangent1);
    int count = 0;
    double sumArea = 0, sumArea2 = 0, sumAngle = 0;
    double qxx = 0, qxy = 0, qyy = 0;  // sum_k Q_k, the bending sensitivity (see header)
    std::array<double, 3 * kMaxFibersPerNode> fiberQ{};  // Q_k of the active fibers
    const Vec3 centre = row(restPositions_, j);
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const auto fi = static_cast<size_t>(f);
      if ((network_.flags[fi] & kFiberActive) == 0) continue;
      ++count;
      const double length = network_.restLength[fi];
      const double fiberArea = kPi / 4 * length * length;
      sumArea += fiberArea;
      sumArea2 += directionWeight(fi) * fiberArea * fiberArea;
      sumAngle += network_.restAngle[fi];
      const Vec3 end1 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fi]));
      const Vec3 end2 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fi + 2]));
      Vec3 ge, gq;
      fiber::tangentAngle(fiber::reduce(end1, centre, end2), normal, &ge, &gq);
      const Vec3 ends[2] = {end1 - centre, end2 - centre};
      const double slopes[2] = {fiber::fiberSlotGradient(0, ge, gq).dot(normal),
                                fiber::fiberSlotGradient(2, ge, gq).dot(normal)};
      double fxx = 0, fxy = 0, fyy = 0;  // Q_k
      for (int s = 0; s < 2; ++s) {
        const double dx = ends[s].dot(tangent1);
        const double dy = ends[s].dot(tangent2);
        fxx -= 0.5 * slopes[s] * dx * dx;
        fxy -= 0.5 * slopes[s] * dx * dy;
        fyy -= 0.5 * slopes[s] * dy * dy;
      }
      qxx += fxx;
      qxy += fxy;
      qyy += fyy;
      fiberQ[3 * static_cast<size_t>(count - 1)] = fxx;
      fiberQ[3 * static_cast<size_t>(count - 1) + 1] = fxy;
      fiberQ[3 * static_cast<size_t>(count - 1) + 2] = fyy;
    }
    if (count == 0) {
      stretchK_[j] = bendK_[j] = restArea_[j] = restMeanAngle_[j] = 0;
      continue;
    }
    const double invCount = 1.0 / count;
    restArea_[j] = sumArea * invCount;
    restMeanAngle_[j] = sumAngle * invCount;
    const double areaMoment = restArea_[j] * restArea_[j] + sumArea2 * invCount;  // M_j
    stretchK_[j] = rawStretch ? *rawStretch : e * h * area / (2.0 * (1.0 - nu) * areaMoment);
    // c_j = mean over psi of (e_psi^T Qbar e_psi)^2 = tr^2/4 + (tr^2 - 4 det)/8.
    qxx *= invCount;
    qxy *= invCount;
    qyy *= invCount;
    const double trace = qxx + qyy;
    const double det = qxx * qyy - qxy * qxy;
    // Per-fiber weights w_k = tr Qbar / tr Q_k and sum_k w_k^2 mean_psi (e_psi^T Q_k e_psi)^2.
    double sumFiberDirectional = 0;
    {
      int k = 0;
      for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
        const auto fi = static_cast<size_t>(f);
        if ((network_.flags[fi] & kFiberActive) == 0) continue;
        const double fxx = fiberQ[3 * static_cast<size_t>(k)];
        const double fxy = fiberQ[3 * static_cast<size_t>(k) + 1];
        const double fyy = fiberQ[3 * static_cast<size_t>(k) + 2];
        ++k;
        const double fiberTrace = fxx + fyy;
        const double weight =
            std::abs(fiberTrace) > 1e-12 * std::abs(trace) ? trace / fiberTrace : 0.0;
        fiberBendWeight_[fi] = directionWeight(fi) * weight * weight;
        sumFiberDirectional +=
            fiberBendWeight_[fi] *
            (fiberTrace * fiberTrace / 4.0 + ((fxx - fyy) * (fxx - fyy) + 4.0 * fxy * fxy) / 8.0);
      }
    }
    const double directional =
        meanAngleWeight_ * (trace * trace / 4.0 + (trace * trace - 4.0 * det) / 8.0) +
        (1.0 - meanAngleWeight_) * sumFiberDirectional * invCount;
    bendK_[j] = params_.bendStiffness
                    ? *params_.bendStiffness
                    : (directional > 0 ? flexural * area / (directional * restArea_[j]) : 0.0);
    if (!params_.nodeStiffnessScale.empty()) {
      stretchK_[j] *= params_.nodeStiffnessScale[j];
      bendK_[j] *= params_.nodeStiffnessScale[j];
    }
  }

  mappedStretchK_ = stretchK_;
  mappedBendK_ = bendK_;
  if (originalFibers_.empty()) {
    originalFibers_.assign(n, 0);
    for (size_t j = 0; j < n; ++j) {
      for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
        originalFibers_[j] += (network_.flags[static_cast<size_t>(f)] & kFiberActive) != 0;
      }
    }
  }

  // Fresh inelastic state; formCrack() carries the old one over. An elastic model holds
  // none (32 bytes per fiber).
  const size_t inelasticCount = params_.plasticity || params_.fracture ? fiberCount : 0;
  plasticLength_.assign(inelasticCount, 0.0);
  plasticAngle_.assign(inelasticCount, 0.0);
  breakUrgency_.assign(inelasticCount, 0.0);
  overloadTime_.assign(params_.fracture ? fiberCount : 0, 0.0);
  bendLimit_.assign(inelasticCount, std::numeric_limits<double>::infinity());
  if (params_.fracture) {
    for (size_t f = 0; f < fiberCount; ++f) {
      const auto centre = static_cast<size_t>(network_.fiberNodes[3 * f + 1]);
      bendLimit_[f] = params_.fracture->bendLimit *
                      (params_.nodeFractureScale.empty() ? 1.0 : params_.nodeFractureScale[centre]);
    }
  }
}

void FiberModel::buildNormalPatches(bool dropDegenerate) {
  const auto n = static_cast<size_t>(network_.nodeCount);
  // "Shares a fiber" neighbours of a node, for growing degenerate patches by rings.
  const auto addRing = [&](std::vector<int32_t>& patch) {
    const std::vector<int32_t> current = patch;
    const Incidence& inc = network_.incidence;
    for (const int32_t node : current) {
      for (int32_t i = inc.offsets[static_cast<size_t>(node)];
           i < inc.offsets[static_cast<size_t>(node) + 1]; ++i) {
        const auto f = static_cast<size_t>(inc.entries[static_cast<size_t>(i)] / 3);
        if ((network_.flags[f] & kFiberActive) == 0) continue;
        for (size_t s = 0; s < 3; ++s) patch.push_back(network_.fiberNodes[3 * f + s]);
      }
    }
    std::sort(patch.begin(), patch.end());
    patch.erase(std::unique(patch.begin(), patch.end()), patch.end());
  };
  std::vector<std::vector<int32_t>> patches(n);
  std::vector<std::vector<double>> weights(n);
  std::vector<uint8_t> collinear(n, 0);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t j = r.begin(); j != r.end(); ++j) {
          std::vector<int32_t>& patch = patches[j];
          patch.push_back(static_cast<int32_t>(j));
          for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
            const auto fi = static_cast<size_t>(f);
            if ((network_.flags[fi] & kFiberActive) == 0) continue;
            patch.push_back(network_.fiberNodes[3 * fi]);
            patch.push_back(network_.fiberNodes[3 * fi + 2]);
          }
          std::sort(patch.begin(), patch.end());
          patch.erase(std::unique(patch.begin(), patch.end()), patch.end());
          const Vec3 normal = row(restNormals_, j);
          const Vec3 tangent1 = normal.unitOrthogonal();
          const Vec3 tangent2 = normal.cross(tangent1);
          for (int ring = 0;; ++ring) {
            Vec3 centroid = Vec3::Zero();
            for (const int32_t i : patch) centroid += row(restPositions_, static_cast<size_t>(i));
            centroid /= static_cast<double>(patch.size());
            Eigen::Matrix2d g = Eigen::Matrix2d::Zero();
            std::vector<Eigen::Vector2d> u(patch.size());
            for (size_t e = 0; e < patch.size(); ++e) {
              const Vec3 d = row(restPositions_, static_cast<size_t>(patch[e])) - centroid;
              u[e] = {tangent1.dot(d), tangent2.dot(d)};
              g.noalias() += u[e] * u[e].transpose();
            }
            const Eigen::Vector2d eig =
                Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d>(g, Eigen::EigenvaluesOnly)
                    .eigenvalues();
            // At least 4 nodes: the plane of a lone fiber's own three nodes would make its
            // angle identically 0 (or pi once folded), measuring no bending at all.
            if (patch.size() >= 4 && eig[0] > 1e-2 * eig[1] && eig[1] > 0) {
              const Eigen::Matrix2d inverse = g.inverse();
              weights[j].resize(2 * patch.size());
              for (size_t e = 0; e < patch.size(); ++e) {
                const Eigen::Vector2d c = inverse * u[e];
                weights[j][2 * e] = c[0];
                weights[j][2 * e + 1] = c[1];
              }
              break;
            }
            const size_t before = patch.size();
            if (ring < 3) addRing(patch);
            if (ring >= 3 || patch.size() == before) {
              collinear[j] = 1;
              patch.clear();
              break;
            }
          }
        }
      });
  for (size_t j = 0; j < n; ++j) {
    if (collinear[j] != 0 && network_.fibersAt(static_cast<int32_t>(j)) > 0) {
      if (dropDegenerate) {
        // Next to a crack: no plane orients this node's fibers any more; they leave.
        for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
          network_.flags[static_cast<size_t>(f)] = 0;
        }
        continue;
      }
      throw InputError(nodeMessage(
          j,
          "its neighbourhood is (nearly) collinear, so no normal orients its fibers; a fiber "
          "shell needs a surface sampled in two directions"));
    }
  }
  patchOffsets_.assign(n + 1, 0);
  for (size_t j = 0; j < n; ++j) {
    patchOffsets_[j + 1] = patchOffsets_[j] + static_cast<int32_t>(patches[j].size());
  }
  const auto entries = static_cast<size_t>(patchOffsets_[n]);
  patchNodes_.clear();
  patchNodes_.reserve(entries);
  patchWeights_.clear();
  patchWeights_.reserve(2 * entries);
  for (size_t j = 0; j < n; ++j) {
    patchNodes_.insert(patchNodes_.end(), patches[j].begin(), patches[j].end());
    patchWeights_.insert(patchWeights_.end(), weights[j].begin(), weights[j].end());
  }
  buildEvaluationPlan();
}

FiberModel::PatchFrame FiberModel::patchFrame(std::span<const double> x, size_t node) const {
  // f_a = sum_i c_ia x_i over the patch (header comment), accumulated in locals.
  const int32_t* nodes = patchNodes_.data();
  const double* weights = patchWeights_.data();
  const double* positions = x.data();
  double f1[3] = {0, 0, 0}, f2[3] = {0, 0, 0};
  const auto begin = static_cast<size_t>(patchOffsets_[node]);
  const auto end = static_cast<size_t>(patchOffsets_[node + 1]);
  for (size_t e = begin; e < end; ++e) {
    const double* p = positions + 3 * static_cast<size_t>(nodes[e]);
    const double c1 = weights[2 * e];
    const double c2 = weights[2 * e + 1];
    for (int c = 0; c < 3; ++c) {
      f1[c] += c1 * p[c];
      f2[c] += c2 * p[c];
    }
  }
  PatchFrame frame{Vec3(f1[0], f1[1], f1[2]), Vec3(f2[0], f2[1], f2[2]), row(restNormals_, node),
                   0.0};
  const double v[3] = {f1[1] * f2[2] - f1[2] * f2[1], f1[2] * f2[0] - f1[0] * f2[2],
                       f1[0] * f2[1] - f1[1] * f2[0]};
  const double length = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  if (length > 0 && std::isfinite(length)) {
    const double inverse = 1.0 / length;
    frame.normal = Vec3(v[0] * inverse, v[1] * inverse, v[2] * inverse);
    frame.length = length;
  }
  return frame;
}

std::vector<double> FiberModel::referenceNormals(std::span<const double> x) const {
  const auto n = static_cast<size_t>(network_.nodeCount);
  std::vector<double> normals(3 * n);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, kNodeGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t j = r.begin(); j != r.end(); ++j)
                        setRow(normals, j, patchFrame(x, j).normal);
                    });
  return normals;
}

std::span<const int32_t> FiberModel::normalPatch(int32_t node) const {
  const auto j = static_cast<size_t>(node);
  return std::span<const int32_t>(patchNodes_)
      .subspan(static_cast<size_t>(patchOffsets_[j]),
               static_cast<size_t>(patchOffsets_[j + 1] - patchOffsets_[j]));
}

EnergyParts FiberModel::energy(std::span<const double> x) const {
  return evaluate(x, {});
}

EnergyParts FiberModel::addGradient(std::span<const double> x, std::span<double> gradient) const {
  return evaluate(x, gradient);
}

void FiberModel::nodeValues(std::span<const double> x, std::span<double> stretching,
                            std::span<double> bending, std::span<double> meanAngle) const {
  NodeOutputs outputs;
  if (!stretching.empty()) outputs.stretching = stretching.data();
  if (!bending.empty()) outputs.bending = bending.data();
  if (!meanAngle.empty()) outputs.meanAngle = meanAngle.data();
  evaluate(x, {}, outputs);
}

std::vector<int32_t> FiberModel::hessianBlockNodes() const {
  // Every pair of nodes of every centre's normal patch, centre by centre (hessianBlocks).
  std::vector<int32_t> pairs;
  for (int32_t j = 0; j < network_.nodeCount; ++j) appendNodePairs(normalPatch(j), pairs);
  return pairs;
}

bool FiberModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  const auto n = static_cast<size_t>(network_.nodeCount);
  std::vector<size_t> offsets(n + 1, 0);  // first value of each centre's blocks
  for (size_t j = 0; j < n; ++j) {
    const auto size = static_cast<size_t>(patchOffsets_[j + 1] - patchOffsets_[j]);
    offsets[j + 1] = offsets[j] + 9 * size * size;
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 16), [&](const tbb::blocked_range<size_t>& r) {
    Eigen::MatrixXd h;
    for (size_t j = r.begin(); j != r.end(); ++j) {
      centreHessian(x, j, h);
      writeNodeBlocks(h, values.data() + offsets[j]);
    }
  });
  return true;
}

void FiberModel::centreHessian(std::span<const double> x, size_t j, Eigen::MatrixXd& h) const {
  // Per centre node j, on the nodes L of its normal patch (which holds every node of its
  // fibers): with u_k, w_k the gradients of l_k and theta_k (through z_k and N_j) scattered
  // to L, sigma_k = dE/dA_k = K_s/n [(A_j - A_j0) + (A_k - A_k0)], a_k = sigma_k pi/2 l_k =
  // dE/dl_k and b = dE/dtheta_k = K_b A_j0 (H_j - H_j0)/n:
  //   H_j = K_s (pi/2)^2 / n^2 U U^T + sum_k [K_s (pi/2)^2 l_k^2 / n + sigma_k pi/2] u_k u_k^T
  //       + (1 - alpha) K_b A_j0 / n sum_k w_k^2 v_k v_k^T  (v_k: theta_k's gradient)
  //       + alpha K_b A_j0 / n^2 W W^T + sum_k (a_k H(l_k) + b_k H(theta_k)),
  //   U = sum_k l_k u_k, W = sum_k w_k,
  // H(theta_k) = J^T T_zz J + J^T T_zN D + D^T T_Nz J + D^T T_NN D + sum_c T_N,c H(N_c)
  // with T the kernel's 9x9 Hessian over (e, q, N), J = dz/dx, D = dN/dx = N_f C (C the
  // patch weights), and the last term from the header comment's d2N formulas.
  const Mat3 identity = Mat3::Identity();
  const std::span<const int32_t> local = normalPatch(static_cast<int32_t>(j));
  const auto dim = static_cast<Eigen::Index>(3 * local.size());
  h.setZero(dim, dim);
  const auto begin = static_cast<size_t>(network_.centreOffsets[j]);
  const auto end = static_cast<size_t>(network_.centreOffsets[j + 1]);
  bool any = false;
  for (size_t f = begin; f < end; ++f) any |= (network_.flags[f] & kFiberActive) != 0;
  if (!any) return;
  const auto patchBegin = static_cast<size_t>(patchOffsets_[j]);
  const auto localIndex = [&](int32_t node) {
    return static_cast<Eigen::Index>(std::lower_bound(local.begin(), local.end(), node) -
                                     local.begin());
  };
  const PatchFrame frame = patchFrame(x, j);
  const Vec3& normal = frame.normal;
  const bool normalMoves = frame.length > 0;
  // D = dN/dx over L (3 x dim): N_f1 c_a1 + N_f2 c_a2 per node a.
  Eigen::MatrixXd normalJacobian = Eigen::MatrixXd::Zero(3, dim);
  Mat3 nf1 = Mat3::Zero(), nf2 = Mat3::Zero();
  if (normalMoves) {
    const Mat3 projector = (identity - normal * normal.transpose()) / frame.length;
    nf1 = -projector * crossMatrix(frame.f2);
    nf2 = projector * crossMatrix(frame.f1);
    for (size_t a = 0; a < local.size(); ++a) {
      normalJacobian.block<3, 3>(0, static_cast<Eigen::Index>(3 * a)) =
          patchWeights_[2 * (patchBegin + a)] * nf1 + patchWeights_[2 * (patchBegin + a) + 1] * nf2;
    }
  }
  struct FiberTerms {
    double length, angle, restLength, restAngle, bendWeight, stretchWeight;
    Vec3 lengthGrad[3], angleGrad[3], angleNormal;
    fiber::Mat9 lengthHess, angleHess;  // angleHess over (e, q, N)
    fiber::Reduced z;
    Eigen::Index slots[3];
  };
  std::vector<FiberTerms> terms;
  double sumArea = 0, sumAngle = 0;
  for (size_t f = begin; f < end; ++f) {
    if ((network_.flags[f] & kFiberActive) == 0) continue;
    FiberTerms t;
    Vec3 xs[3];
    for (int s = 0; s < 3; ++s) {
      const int32_t node = network_.fiberNodes[3 * f + static_cast<size_t>(s)];
      xs[s] = row(x, static_cast<size_t>(node));
      t.slots[s] = localIndex(node);
    }
    t.restLength = network_.restLength[f];
    t.restAngle = network_.restAngle[f];
    t.bendWeight = fiberBendWeight_[f];
    t.stretchWeight = fiberStretchWeight_.empty() ? 1.0 : fiberStretchWeight_[f];
    t.length = fiber::fiberArcLength(xs, samples_, t.lengthGrad, &t.lengthHess);
    t.z = fiber::reduce(xs[0], xs[1], xs[2]);
    Vec3 ge, gq;
    t.angle = fiber::tangentAngle(t.z, normal, &ge, &gq, &t.angleNormal);
    for (int s = 0; s < 3; ++s) t.angleGrad[s] = fiber::fiberSlotGradient(s, ge, gq);
    t.angleHess = fiber::tangentAngleHessianWithNormal(t.z, normal);
    sumArea += kPi / 4 * t.length * t.length;
    sumAngle += t.angle;
    terms.push_back(t);
  }
  const double count = static_cast<double>(terms.size());
  const double areaError = sumArea / count - restArea_[j];
  const double angleError = sumAngle / count - restMeanAngle_[j];
  const double ks = stretchK_[j];
  const double kb = bendK_[j] * restArea_[j];
  const double alpha = meanAngleWeight_;
  Eigen::VectorXd sumU = Eigen::VectorXd::Zero(dim), sumW = Eigen::VectorXd::Zero(dim);
  Eigen::MatrixXd mixed = Eigen::MatrixXd::Zero(dim, 3);  // sum_k b J^T T_zN
  Mat3 normalNormal = Mat3::Zero();                       // sum_k b T_NN
  Vec3 dEdNormal = Vec3::Zero();                          // sum_k b T_N
  // J = dz/dp for slots (p1, p, p2): e = (p2 - p1)/2, q = p1 - 2p + p2.
  const double eSlot[3] = {-0.5, 0.0, 0.5};
  const double qSlot[3] = {1.0, -2.0, 1.0};
  for (const FiberTerms& t : terms) {
    const double dEdAngle =
        kb / count * (alpha * angleError + (1.0 - alpha) * t.bendWeight * (t.angle - t.restAngle));
    const double areaChange = kPi / 4 * (t.length * t.length - t.restLength * t.restLength);
    const double sigma = ks / count * (areaError + t.stretchWeight * areaChange);
    const double dEdLength = sigma * kPi / 2 * t.length;
    Eigen::VectorXd u = Eigen::VectorXd::Zero(dim), w = Eigen::VectorXd::Zero(dim);
    for (int s = 0; s < 3; ++s) {
      u.segment<3>(3 * t.slots[s]) += t.lengthGrad[s];
      w.segment<3>(3 * t.slots[s]) += t.angleGrad[s];
    }
    if (normalMoves) w += normalJacobian.transpose() * t.angleNormal;
    sumU += t.length * u;
    sumW += w;
    h += (1.0 - alpha) * kb / count * t.bendWeight * w * w.transpose();
    h += (ks * (kPi / 2) * (kPi / 2) * t.stretchWeight * t.length * t.length / count +
          sigma * kPi / 2) *
         u * u.transpose();
    const fiber::Mat9 own =
        dEdLength * t.lengthHess +
        dEdAngle * fiber::expandReducedHessian(t.angleHess.topLeftCorner<6, 6>());
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        h.block<3, 3>(3 * t.slots[a], 3 * t.slots[b]) += own.block<3, 3>(3 * a, 3 * b);
      }
    }
    if (normalMoves) {
      const Mat3 eN = t.angleHess.block<3, 3>(0, 6);
      const Mat3 qN = t.angleHess.block<3, 3>(3, 6);
      for (int s = 0; s < 3; ++s) {
        mixed.block<3, 3>(3 * t.slots[s], 0) += dEdAngle * (eSlot[s] * eN + qSlot[s] * qN);
      }
      normalNormal += dEdAngle * t.angleHess.block<3, 3>(6, 6);
      dEdNormal += dEdAngle * t.angleNormal;
    }
  }
  h += ks * (kPi / 2) * (kPi / 2) / (count * count) * sumU * sumU.transpose();
  h += alpha * kb / (count * count) * sumW * sumW.transpose();
  if (normalMoves) {
    const Eigen::MatrixXd cross = mixed * normalJacobian;
    h += cross + cross.transpose();
    h += normalJacobian.transpose() * normalNormal * normalJacobian;
    // sum_c g_c H(N_c) over f = (f1, f2), then C^T S C over L.
    const Vec3 g = dEdNormal;
    const double gu = g.dot(normal);
    const Mat3 dvv = -(normal * g.transpose() + g * normal.transpose() +
                       gu * (identity - 3.0 * normal * normal.transpose())) /
                     (frame.length * frame.length);
    Eigen::Matrix<double, 3, 6> dvdf;
    dvdf << -crossMatrix(frame.f2), crossMatrix(frame.f1);
    Eigen::Matrix<double, 6, 6> sf = dvdf.transpose() * dvv * dvdf;
    const Vec3 w = (g - gu * normal) / frame.length;
    sf.block<3, 3>(0, 3) -= crossMatrix(w);
    sf.block<3, 3>(3, 0) += crossMatrix(w);  // (-[w]x)^T = [w]x
    for (size_t a = 0; a < local.size(); ++a) {
      const double ca[2] = {patchWeights_[2 * (patchBegin + a)],
                            patchWeights_[2 * (patchBegin + a) + 1]};
      for (size_t b = 0; b < local.size(); ++b) {
        const double cb[2] = {patchWeights_[2 * (patchBegin + b)],
                              patchWeights_[2 * (patchBegin + b) + 1]};
        Mat3 block = Mat3::Zero();
        for (int p = 0; p < 2; ++p) {
          for (int q = 0; q < 2; ++q) block += ca[p] * cb[q] * sf.block<3, 3>(3 * p, 3 * q);
        }
        h.block<3, 3>(static_cast<Eigen::Index>(3 * a), static_cast<Eigen::Index>(3 * b)) += block;
      }
    }
  }
}

double FiberModel::stableTimeStep() const {
  if (stableStep_) return *stableStep_;
  // Lanczos on S = M^-1/2 K M^-1/2 at rest, K v ~ (g(x0 + t M^-1/2 v) - g(x0 - t M^-1/2 v)) / 2t.
  const size_t dofs = restPositions_.size();
  const size_t nodes = dofs / 3;
  double meanLength = 0;
  for (double l : network_.restLength) meanLength += l;
  meanLength = network_.restLength.empty()
                   ? 1.0
                   : meanLength / static_cast<double>(network_.restLength.size());
  std::vector<double> invSqrtMass(nodes);
  for (size_t i = 0; i < nodes; ++i) invSqrtMass[i] = 1.0 / std::sqrt(mass_[i]);
  std::vector<double> v(dofs), previous(dofs, 0.0), w(dofs), plus(dofs), minus(dofs), gp(dofs),
      gm(dofs);
  std::mt19937 rng(12345);
  std::normal_distribution<double> normal;
  double norm = 0;
  for (double& value : v) {
    value = normal(rng);
    norm += value * value;
  }
  for (double& value : v) value /= std::sqrt(norm);
  const int steps = static_cast<int>(std::min<size_t>(40, dofs));
  std::vector<double> alpha, beta;
  double betaPrevious = 0;
  for (int step = 0; step < steps; ++step) {
    double maxDisplacement = 0;
    for (size_t i = 0; i < dofs; ++i)
      maxDisplacement = std::max(maxDisplacement, std::abs(v[i] * invSqrtMass[i / 3]));
    const double t = 1e-6 * meanLength / maxDisplacement;
    for (size_t i = 0; i < dofs; ++i) {
      const double d = t * v[i] * invSqrtMass[i / 3];
      plus[i] = restPositions_[i] + d;
      minus[i] = restPositions_[i] - d;
    }
    std::fill(gp.begin(), gp.end(), 0.0);
    std::fill(gm.begin(), gm.end(), 0.0);
    evaluate(plus, gp);
    evaluate(minus, gm);
    double a = 0;
    for (size_t i = 0; i < dofs; ++i) {
      w[i] = (gp[i] - gm[i]) / (2 * t) * invSqrtMass[i / 3] - betaPrevious * previous[i];
      a += w[i] * v[i];
    }
    double b = 0;
    for (size_t i = 0; i < dofs; ++i) {
      w[i] -= a * v[i];
      b += w[i] * w[i];
    }
    b = std::sqrt(b);
    alpha.push_back(a);
    if (!(b > 1e-12 * std::abs(a)) || step + 1 == steps) break;
    beta.push_back(b);
    previous = v;
    for (size_t i = 0; i < dofs; ++i) v[i] = w[i] / b;
    betaPrevious = b;
  }
  const auto m = static_cast<Eigen::Index>(alpha.size());
  Eigen::MatrixXd tridiagonal = Eigen::MatrixXd::Zero(m, m);
  for (Eigen::Index i = 0; i < m; ++i) {
    tridiagonal(i, i) = alpha[static_cast<size_t>(i)];
    if (i + 1 < m) tridiagonal(i, i + 1) = tridiagonal(i + 1, i) = beta[static_cast<size_t>(i)];
  }
  const double lambda =
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(tridiagonal, Eigen::EigenvaluesOnly)
          .eigenvalues()
          .maxCoeff();
  stableStep_ =
      lambda > 0 ? 0.7 * 2.0 / std::sqrt(lambda) : std::numeric_limits<double>::infinity();
  return *stableStep_;
}

Geometry FiberModel::surface(std::span<const double> x) const {
  Geometry g;
  g.positions.assign(x.begin(), x.end());
  if (!triangles_.empty()) {
    if (cracks_.empty()) {
      g.triangles = triangles_;
    } else {
      // A torn mesh keeps the triangles within one piece: none is drawn across a crack.
      const std::vector<int32_t> pieces = nodePieces();
      const auto piece = [&](int32_t v) { return pieces[static_cast<size_t>(v)]; };
      for (size_t t = 0; t + 2 < triangles_.size(); t += 3) {
        const int32_t a = triangles_[t], b = triangles_[t + 1], c = triangles_[t + 2];
        if (piece(a) == piece(b) && piece(b) == piece(c))
          g.triangles.insert(g.triangles.end(), {a, b, c});
      }
    }
    computeVertexNormals(g);
  } else {
    g.normals = referenceNormals(x);
  }
  return g;
}

void FiberModel::refreshRestMeans(size_t node) {
  int count = 0;
  double sumArea = 0, sumAngle = 0;
  for (int32_t f = network_.centreOffsets[node]; f < network_.centreOffsets[node + 1]; ++f) {
    const auto fi = static_cast<size_t>(f);
    if ((network_.flags[fi] & kFiberActive) == 0) continue;
    ++count;
    sumArea += kPi / 4 * network_.restLength[fi] * network_.restLength[fi];
    sumAngle += network_.restAngle[fi];
  }
  restArea_[node] = count > 0 ? sumArea / count : 0.0;
  restMeanAngle_[node] = count > 0 ? sumAngle / count : 0.0;
  const double share = originalFibers_[node] > 0
                           ? std::min(1.0, static_cast<double>(count) / originalFibers_[node])
                           : 1.0;
  stretchK_[node] = mappedStretchK_[node] * share;
  bendK_[node] = mappedBendK_[node] * share;
}

InelasticReport FiberModel::updateInelastic(std::span<const double> x, double dt) {
  InelasticReport report;
  if (!params_.plasticity && !params_.fracture) return report;
  const auto n = static_cast<size_t>(network_.nodeCount);
  std::vector<int64_t> yielding(n, 0), broken(n, 0);
  ++inelasticStep_;
  if (lastBreakStep_.size() != n) {
    lastBreakStep_.assign(n, std::numeric_limits<int64_t>::min() / 2);
  }
  const FiberPlasticityDef* plastic = params_.plasticity ? &*params_.plasticity : nullptr;
  const FiberFractureDef* fracture = params_.fracture ? &*params_.fracture : nullptr;
  const bool cached = evaluatedX_.size() == x.size() &&
                      lengthNow_.size() == network_.restLength.size() &&
                      std::equal(x.begin(), x.end(), evaluatedX_.begin());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t j = r.begin(); j != r.end(); ++j) {
          const auto begin = static_cast<size_t>(network_.centreOffsets[j]);
          const auto end = static_cast<size_t>(network_.centreOffsets[j + 1]);
          if (begin == end) continue;
          const Vec3 normal = cached ? Vec3::Zero() : patchFrame(x, j).normal;
          const Vec3 centre = row(x, j);
          const double fractureScale =
              params_.nodeFractureScale.empty() ? 1.0 : params_.nodeFractureScale[j];
          bool changed = false;
          for (size_t f = begin; f < end; ++f) {
            if ((network_.flags[f] & kFiberActive) == 0) continue;
            double length, angle;
            if (cached) {
              length = lengthNow_[f];
              angle = angleNow_[f];
            } else {
              const fiber::Reduced z =
                  fiber::reduce(row(x, static_cast<size_t>(network_.fiberNodes[3 * f])), centre,
                                row(x, static_cast<size_t>(network_.fiberNodes[3 * f + 2])));
              length = fiber::arcLength(z, samples_);
              angle = fiber::tangentAngle(z, normal);
            }
            double& restLength = network_.restLength[f];
            double& restAngle = network_.restAngle[f];
            if (plastic != nullptr) {
              // eq. (23)-(26), (29)
              if (std::abs(length - restLength) > plastic->yieldStrain * restLength) {
                const double flow =
                    std::min(plastic->stretchCreep * dt, 1.0) * (length - restLength);
                plasticLength_[f] += flow;
                restLength += flow;
                changed = true;
                ++yielding[j];
              }
              if (std::abs(angle - restAngle) > plastic->yieldAngle) {
                const double flow = std::min(plastic->bendCreep * dt, 1.0) * (angle - restAngle);
                plasticAngle_[f] += flow;
                restAngle += flow;
                bendLimit_[f] -= plastic->weakening * bendLimit_[f] * std::abs(flow);
                bendLimit_[f] = std::max(bendLimit_[f], 0.0);
                changed = true;
                if (!(std::abs(length - restLength) > plastic->yieldStrain * restLength)) {
                  ++yielding[j];
                }
              }
            }
            if (fracture != nullptr) {
              // eq. (27), (28)
              const double stretchLimit = 1.0 + fractureScale * (fracture->stretchLimit - 1.0);
              const double urgency = std::max((length / restLength) / stretchLimit,
                                              std::abs(angle - restAngle) / bendLimit_[f]);
              // Past a threshold the fiber accumulates overload time, below it sheds it;
              // it breaks once the net time reaches the delay (at once for delay 0).
              double& overload = overloadTime_[f];
              overload = urgency > 1.0 ? overload + dt : std::max(overload - dt, 0.0);
              if (urgency > 1.0 && overload >= fracture->delay) {
                network_.flags[f] = kFiberBroken;
                breakUrgency_[f] = urgency;
                lastBreakStep_[j] = inelasticStep_;
                changed = true;
                ++broken[j];
              }
            }
          }
          if (changed) refreshRestMeans(j);
        }
      });
  for (size_t j = 0; j < n; ++j) {
    report.yieldingElements += yielding[j];
    report.brokenElements += broken[j];
  }
  if (fracture != nullptr) {
    if (cooldown_ > 0) {
      --cooldown_;
    } else if (const int64_t fibersBefore = elementCount(); formCrack(x)) {
      // A crack is a topology edit with one cut and the fibers the rebuild changed; the
      // nodes stay.
      report.edit.cuts.push_back(cracks_.back());
      report.edit.elementsAdded = std::max<int64_t>(elementCount() - fibersBefore, 0);
      report.edit.elementsRemoved = std::max<int64_t>(fibersBefore - elementCount(), 0);
      cooldown_ = fracture->cooldownSteps;
    }
  }
  return report;
}

bool FiberModel::formCrack(std::span<const double> x) {
  const auto n = static_cast<size_t>(network_.nodeCount);
  const double ratio = params_.fracture->brokenRatio;
  const int64_t window = 20 * (params_.fracture->cooldownSteps + 1);
  int64_t best = -1;
  double bestUrgency = 0;
  for (size_t j = 0; j < n; ++j) {
    // Eq. (28) chooses among the fibers breaking now: only a node where a fiber broke in
    // this step or during the cooldown just before it is a candidate. A node whose fibers
    // broke long ago seeds no crack later (when it could, every node left with old
    // microcracks after a tear grew its own crack and the torn parts crumbled to dust).
    if (crackAtNode_[j] != 0 || inelasticStep_ - lastBreakStep_[j] > window) continue;
    int total = 0, brokenCount = 0;
    int64_t nodeBest = -1;
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const uint8_t flags = network_.flags[static_cast<size_t>(f)];
      if ((flags & (kFiberActive | kFiberBroken)) == 0) continue;  // dropped at a rebuild
      ++total;
      if ((flags & kFiberBroken) == 0) continue;
      ++brokenCount;
      if (nodeBest < 0 ||
          breakUrgency_[static_cast<size_t>(f)] > breakUrgency_[static_cast<size_t>(nodeBest)]) {
        nodeBest = f;
      }
    }
    if (total == 0 || nodeBest < 0 || brokenCount < ratio * total) continue;
    if (best < 0 || breakUrgency_[static_cast<size_t>(nodeBest)] > bestUrgency) {
      best = nodeBest;
      bestUrgency = breakUrgency_[static_cast<size_t>(nodeBest)];
    }
  }
  if (best < 0) return false;

  // The disc (header comment), in the rest configuration.
  const auto fiber = static_cast<size_t>(best);
  const auto node = static_cast<size_t>(network_.fiberNodes[3 * fiber + 1]);
  const Vec3 centre = row(restPositions_, node);
  const Vec3 end1 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fiber]));
  const Vec3 end2 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fiber + 2]));
  const Vec3 surfaceNormal = patchFrame(restPositions_, node).normal;
  Vec3 tangent = 0.5 * (end2 - end1);
  const Vec3 inPlane = tangent - tangent.dot(surfaceNormal) * surfaceNormal;
  if (inPlane.norm() > 1e-3 * tangent.norm()) tangent = inPlane;
  double radius = 0;
  int legs = 0;
  for (int32_t f = network_.centreOffsets[node]; f < network_.centreOffsets[node + 1]; ++f) {
    for (const size_t slot : {size_t{0}, size_t{2}}) {
      radius += (row(restPositions_,
                     static_cast<size_t>(network_.fiberNodes[3 * static_cast<size_t>(f) + slot])) -
                 centre)
                    .norm();
      ++legs;
    }
  }
  // The disc sits halfway along the more stretched leg (now, at x): the node stays with
  // its intact side and the plane runs through the gap that opened. (Through the node
  // itself, the node would join an arbitrary side, and the next crack across the same gap
  // would isolate it between two planes.)
  const Vec3 now = row(x, node);
  const double stretch1 =
      (row(x, static_cast<size_t>(network_.fiberNodes[3 * fiber])) - now).norm() /
      (end1 - centre).norm();
  const double stretch2 =
      (row(x, static_cast<size_t>(network_.fiberNodes[3 * fiber + 2])) - now).norm() /
      (end2 - centre).norm();
  const Vec3 gapEnd = stretch2 > stretch1 ? end2 : end1;
  CrackDisc disc;
  disc.centre = centre + 0.5 * (gapEnd - centre).dot(tangent.normalized()) * tangent.normalized();
  disc.normal = tangent.normalized();
  disc.radius = 0.6 * radius / legs;
  cracks_.push_back(disc);
  crackAtNode_[node] = 1;

  // Rebuild, then carry the state of every fiber that survives (same centre and ends).
  const FiberNetwork old = network_;
  const std::vector<double> oldPlasticLength = plasticLength_, oldPlasticAngle = plasticAngle_,
                            oldBendLimit = bendLimit_, oldUrgency = breakUrgency_,
                            oldOverload = overloadTime_;
  buildTopology(nullptr);
  evaluatedX_.clear();  // the cached l, theta belong to the old fibers
  const auto fiberCount = static_cast<size_t>(network_.fiberCount());
  for (size_t f = 0; f < fiberCount; ++f) {
    const int32_t c = network_.fiberNodes[3 * f + 1];
    const int32_t a = network_.fiberNodes[3 * f];
    const int32_t b = network_.fiberNodes[3 * f + 2];
    size_t lo = static_cast<size_t>(old.centreOffsets[static_cast<size_t>(c)]);
    size_t hi = static_cast<size_t>(old.centreOffsets[static_cast<size_t>(c) + 1]);
    while (lo < hi) {  // old fibers of c are sorted by (first end, second end)
      const size_t mid = (lo + hi) / 2;
      const std::pair<int32_t, int32_t> key{old.fiberNodes[3 * mid], old.fiberNodes[3 * mid + 2]};
      if (key < std::pair<int32_t, int32_t>{a, b}) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const bool found = lo < static_cast<size_t>(old.centreOffsets[static_cast<size_t>(c) + 1]) &&
                       old.fiberNodes[3 * lo] == a && old.fiberNodes[3 * lo + 2] == b;
    if (found) {
      plasticLength_[f] = oldPlasticLength[lo];
      plasticAngle_[f] = oldPlasticAngle[lo];
      bendLimit_[f] = oldBendLimit[lo];
      breakUrgency_[f] = oldUrgency[lo];
      overloadTime_[f] = oldOverload[lo];
      if ((old.flags[lo] & kFiberBroken) != 0 && (network_.flags[f] & kFiberActive) != 0) {
        network_.flags[f] = kFiberBroken;
      }
      network_.restLength[f] += plasticLength_[f];
      network_.restAngle[f] += plasticAngle_[f];
    }
    // A fiber active now that was not before (new, or dropped at an earlier rebuild) starts
    // from its rest shape, but its nodes may have drifted apart already (joined only
    // through broken fibers): one past its thresholds now is dropped instead of kicking its
    // nodes apart for a step with the force of a many-times over-stretched fiber.
    if ((network_.flags[f] & kFiberActive) == 0 || (found && (old.flags[lo] & kFiberActive) != 0)) {
      continue;
    }
    const fiber::Reduced z =
        fiber::reduce(row(x, static_cast<size_t>(a)), row(x, static_cast<size_t>(c)),
                      row(x, static_cast<size_t>(b)));
    const double fractureScale =
        params_.nodeFractureScale.empty() ? 1.0 : params_.nodeFractureScale[static_cast<size_t>(c)];
    const double stretchLimit = 1.0 + fractureScale * (params_.fracture->stretchLimit - 1.0);
    const double urgency =
        std::max(fiber::arcLength(z, samples_) / network_.restLength[f] / stretchLimit,
                 std::abs(fiber::tangentAngle(z, patchFrame(x, static_cast<size_t>(c)).normal) -
                          network_.restAngle[f]) /
                     bendLimit_[f]);
    if (urgency > 1.0) {
      // Dropped, not broken: it never carried load, so it does not count towards its node's
      // broken share (counted, such fibers made every rebuild seed cracks all around the
      // last one: a cascade that ground torn sheets into dust).
      network_.flags[f] = 0;
    }
  }
  for (size_t j = 0; j < n; ++j) refreshRestMeans(j);
  ++topologyVersion_;
  return true;
}

namespace {
struct FiberModelState : ModelState {
  std::vector<CrackDisc> cracks;
  std::vector<uint8_t> crackAtNode, flags;
  std::vector<double> restLength, restAngle, plasticLength, plasticAngle, bendLimit, urgency,
      overload, restArea, restMeanAngle, stretchK, bendK;
  int32_t cooldown = 0;
  int64_t inelasticStep = 0;
  std::vector<int64_t> lastBreakStep;

  // The per-fiber, (nFibers), and per-node, (nNodes), double arrays of a state (const or
  // not), in the order they are written.
  template <class State>
  static auto fiberValues(State& s) {
    return std::array{&s.restLength, &s.restAngle, &s.plasticLength, &s.plasticAngle,
                      &s.bendLimit,  &s.urgency,   &s.overload};
  }
  template <class State>
  static auto nodeValues(State& s) {
    return std::array{&s.restArea, &s.restMeanAngle, &s.stretchK, &s.bendK};
  }

  void write(ByteWriter& out) const override {
    out.value<uint64_t>(cracks.size());
    for (const CrackDisc& c : cracks) {
      out.value(c.centre.x());
      out.value(c.centre.y());
      out.value(c.centre.z());
      out.value(c.normal.x());
      out.value(c.normal.y());
      out.value(c.normal.z());
      out.value(c.radius);
    }
    out.array(crackAtNode);
    out.array(flags);
    for (const std::vector<double>* v : fiberValues(*this)) out.array(*v);
    for (const std::vector<double>* v : nodeValues(*this)) out.array(*v);
    out.value(cooldown);
    out.value(inelasticStep);
    out.array(lastBreakStep);
  }
};
}  // namespace

std::unique_ptr<ModelState> FiberModel::readState(ByteReader& in) const {
  auto state = std::make_unique<FiberModelState>();
  const auto cracks = in.value<uint64_t>("fiber state: crack count");
  if (cracks > 1'000'000) in.fail("fiber state: " + std::to_string(cracks) + " cracks");
  for (uint64_t c = 0; c < cracks; ++c) {
    double v[7];
    for (double& x : v) x = in.value<double>("fiber state: crack disc");
    CrackDisc disc;
    disc.centre = Vec3(v[0], v[1], v[2]);
    disc.normal = Vec3(v[3], v[4], v[5]);
    disc.radius = v[6];
    if (!disc.centre.allFinite() || !(std::abs(disc.normal.norm() - 1) < 1e-9) ||
        !(disc.radius > 0) || !std::isfinite(disc.radius)) {
      in.fail("fiber state: crack " + std::to_string(c) + " is not a valid disc");
    }
    state->cracks.push_back(disc);
  }
  state->crackAtNode = in.array<uint8_t>("fiber state: crack nodes");
  state->flags = in.array<uint8_t>("fiber state: fiber flags");
  for (std::vector<double>* v : FiberModelState::fiberValues(*state)) {
    *v = in.array<double>("fiber state: fiber values");
  }
  for (std::vector<double>* v : FiberModelState::nodeValues(*state)) {
    *v = in.array<double>("fiber state: node values");
  }
  state->cooldown = in.value<int32_t>("fiber state: cooldown");
  state->inelasticStep = in.value<int64_t>("fiber state: step");
  state->lastBreakStep = in.array<int64_t>("fiber state: last breaks");
  return state;
}

std::unique_ptr<ModelState> FiberModel::saveState() const {
  if (!params_.plasticity && !params_.fracture) return nullptr;
  auto state = std::make_unique<FiberModelState>();
  state->cracks = cracks_;
  state->crackAtNode = crackAtNode_;
  state->flags = network_.flags;
  state->restLength = network_.restLength;
  state->restAngle = network_.restAngle;
  state->plasticLength = plasticLength_;
  state->plasticAngle = plasticAngle_;
  state->bendLimit = bendLimit_;
  state->urgency = breakUrgency_;
  state->overload = overloadTime_;
  state->restArea = restArea_;
  state->restMeanAngle = restMeanAngle_;
  state->stretchK = stretchK_;
  state->bendK = bendK_;
  state->cooldown = cooldown_;
  state->inelasticStep = inelasticStep_;
  state->lastBreakStep = lastBreakStep_;
  return state;
}

void FiberModel::restoreState(const ModelState* state) {
  const auto* saved = dynamic_cast<const FiberModelState*>(state);
  if (saved == nullptr) return;
  // A state read from a checkpoint must fit: per-node arrays of the node count, per-fiber
  // arrays of the fiber count of the network its cracks give (checked after the rebuild).
  const auto nodes = static_cast<size_t>(network_.nodeCount);
  const auto fitsNodes = [&](size_t size) { return size == nodes; };
  bool nodesFit = fitsNodes(saved->crackAtNode.size()) &&
                  (saved->lastBreakStep.empty() || fitsNodes(saved->lastBreakStep.size()));
  for (const std::vector<double>* v : FiberModelState::nodeValues(*saved)) {
    nodesFit = nodesFit && fitsNodes(v->size());
  }
  if (!nodesFit) {
    throw InputError("fiber model: the state has per-node values for another node count than " +
                     std::to_string(nodes));
  }
  evaluatedX_.clear();
  const auto sameDisc = [](const CrackDisc& a, const CrackDisc& b) {
    return a.centre == b.centre && a.normal == b.normal && a.radius == b.radius;
  };
  if (!std::equal(saved->cracks.begin(), saved->cracks.end(), cracks_.begin(), cracks_.end(),
                  sameDisc)) {
    cracks_ = saved->cracks;
    buildTopology(nullptr);  // the network is a function of the cracks
    ++topologyVersion_;
  }
  const size_t fibers = network_.restLength.size();
  for (const std::vector<double>* v : FiberModelState::fiberValues(*saved)) {
    if (v->size() != fibers) {
      throw InputError("fiber model: the state has per-fiber values for " +
                       std::to_string(v->size()) + " fibers, the network of its " +
                       std::to_string(cracks_.size()) + " cracks has " + std::to_string(fibers));
    }
  }
  if (saved->flags.size() != fibers) {
    throw InputError("fiber model: the state has flags for another fiber count than " +
                     std::to_string(fibers));
  }
  crackAtNode_ = saved->crackAtNode;
  network_.flags = saved->flags;
  network_.restLength = saved->restLength;
  network_.restAngle = saved->restAngle;
  plasticLength_ = saved->plasticLength;
  plasticAngle_ = saved->plasticAngle;
  bendLimit_ = saved->bendLimit;
  breakUrgency_ = saved->urgency;
  overloadTime_ = saved->overload;
  restArea_ = saved->restArea;
  restMeanAngle_ = saved->restMeanAngle;
  stretchK_ = saved->stretchK;
  bendK_ = saved->bendK;
  cooldown_ = saved->cooldown;
  inelasticStep_ = saved->inelasticStep;
  lastBreakStep_ = saved->lastBreakStep;
}

std::vector<int32_t> FiberModel::nodePieces() const {
  const auto n = static_cast<size_t>(network_.nodeCount);
  std::vector<int32_t> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = static_cast<int32_t>(i);
  const auto find = [&](int32_t i) {
    while (parent[static_cast<size_t>(i)] != i) {
      parent[static_cast<size_t>(i)] = parent[static_cast<size_t>(parent[static_cast<size_t>(i)])];
      i = parent[static_cast<size_t>(i)];
    }
    return i;
  };
  const auto unite = [&](int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  };
  for (size_t f = 0; f < network_.flags.size(); ++f) {
    if ((network_.flags[f] & kFiberActive) == 0) continue;
    unite(network_.fiberNodes[3 * f], network_.fiberNodes[3 * f + 1]);
    unite(network_.fiberNodes[3 * f + 1], network_.fiberNodes[3 * f + 2]);
  }
  std::vector<int32_t> label(n, -1), pieces(n);
  int32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto root = static_cast<size_t>(find(static_cast<int32_t>(i)));
    if (label[root] < 0) label[root] = next++;
    pieces[i] = label[root];
  }
  return pieces;
}

bool FiberModel::nodeAreaVectors(std::span<const double> x, std::span<double> out) const {
  const auto n = static_cast<size_t>(network_.nodeCount);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t j = r.begin(); j != r.end(); ++j) {
          // A node whose fibers all broke is a loose shard, no longer part of
          // the membrane the gas pushes on.
          bool attached = false;
          for (int32_t f = network_.centreOffsets[j];
               f < network_.centreOffsets[j + 1] && !attached; ++f) {
            attached = (network_.flags[static_cast<size_t>(f)] & kFiberActive) != 0;
          }
          const PatchFrame frame = patchFrame(x, j);
          setRow(out, j, attached ? Vec3(areas_[j] * frame.length * frame.normal) : Vec3::Zero());
        }
      });
  return true;
}

size_t FiberModel::memoryBytes() const {
  const auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return bytes(network_.fiberNodes) + bytes(network_.centreOffsets) + bytes(network_.restLength) +
         bytes(network_.restAngle) + bytes(network_.flags) + bytes(network_.incidence.offsets) +
         bytes(network_.incidence.entries) + bytes(triangles_) + bytes(mass_) + bytes(stretchK_) +
         bytes(bendK_) + bytes(restArea_) + bytes(restMeanAngle_) + bytes(restPositions_) +
         bytes(restNormals_) + bytes(patchOffsets_) + bytes(patchNodes_) + bytes(patchWeights_) +
         bytes(chunkNodeOffsets_) + bytes(chunkNodes_) + bytes(slotShare_) + bytes(groupFibers_) +
         bytes(groupPatchRows_) + bytes(groupPatchLocal_) + bytes(groupPatchWeights_) +
         bytes(sharedNodes_) + bytes(shareOffsets_) + bytes(shareRows_) + bytes(fiberBendWeight_) +
         bytes(chunkEnergy_) + bytes(fiberStretchWeight_) + bytes(plasticLength_) +
         bytes(plasticAngle_) + bytes(bendLimit_) + bytes(breakUrgency_) + bytes(overloadTime_) +
         bytes(areas_) + bytes(mappedStretchK_) + bytes(mappedBendK_) + bytes(originalFibers_) +
         bytes(lengthNow_) + bytes(angleNow_) + bytes(evaluatedX_);
}

}  // namespace shellsim
