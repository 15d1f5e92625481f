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

#include "core/lanczos.hpp"
#include "core/union_find.hpp"
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
  networkCracks_ = cracks_;
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
          "shell needs a surface sampled in two directions (on a mesh of long thin "
          "triangles, cluster it into even nodes with node_spacing or remesh it with "
          "`shellsim repair --remesh auto`)"));
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

EnergyParts FiberModel::energy(std::span<const double> x, ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::energy(x);
  return evaluate(x, {}, NodeOutputs(), dynamic_cast<Workspace&>(*workspace));
}

EnergyParts FiberModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                    ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::addGradient(x, gradient);
  return evaluate(x, gradient, NodeOutputs(), dynamic_cast<Workspace&>(*workspace));
}

void FiberModel::nodeValues(std::span<const double> x, std::span<double> stretching,
                            std::span<double> bending, std::span<double> meanAngle) const {
  NodeOutputs outputs;
  if (!stretching.empty()) outputs.stretching = stretching.data();
  if (!bending.empty()) outputs.bending = bending.data();
  if (!meanAngle.empty()) outputs.meanAngle = meanAngle.data();
  Workspace workspace;
  evaluate(x, {}, outputs, workspace);
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
  std::vector<double> plus(dofs), minus(dofs), gp(dofs), gm(dofs);
  Workspace workspace;
  const double lambda =
      largestEigenvalueLanczos(dofs, 40, [&](std::span<const double> v, std::span<double> w) {
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
        evaluate(plus, gp, NodeOutputs(), workspace);
        evaluate(minus, gm, NodeOutputs(), workspace);
        for (size_t i = 0; i < dofs; ++i) w[i] = (gp[i] - gm[i]) / (2 * t) * invSqrtMass[i / 3];
      });
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

std::vector<int32_t> FiberModel::nodePieces() const {
  UnionFind pieces(static_cast<size_t>(network_.nodeCount));
  for (size_t f = 0; f < network_.flags.size(); ++f) {
    if ((network_.flags[f] & kFiberActive) == 0) continue;
    pieces.unite(network_.fiberNodes[3 * f], network_.fiberNodes[3 * f + 1]);
    pieces.unite(network_.fiberNodes[3 * f + 1], network_.fiberNodes[3 * f + 2]);
  }
  return pieces.labels();
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
         bytes(sharedNodes_) + bytes(shareOffsets_) + bytes(fiberBendWeight_) +
         bytes(fiberStretchWeight_) + bytes(plasticLength_) + bytes(plasticAngle_) +
         bytes(bendLimit_) + bytes(breakUrgency_) + bytes(overloadTime_) + bytes(areas_) +
         bytes(mappedStretchK_) + bytes(mappedBendK_) + bytes(originalFibers_);
}

}  // namespace shellsim
