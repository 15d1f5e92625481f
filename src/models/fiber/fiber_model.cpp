#include "models/fiber/fiber_model.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <span>

#include "core/lanczos.hpp"
#include "core/union_find.hpp"
#include "models/fiber/fiber_kernel.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

using fiber::Mat3;
constexpr double kPi = std::numbers::pi;
constexpr int kMaxFibersPerNode = kMaxNeighbourCount;
// A node whose fibers' ends leave an angular gap wider than this (in its tangent plane) lies on
// a free edge of the surface (a straight edge leaves pi, an interior node of a jittered grid
// rarely more than pi/2).
constexpr double kEdgeGap = 0.75 * std::numbers::pi;

// A node's bending form B (header (b)): its bending energy per K_b A_j0 / 2 as a quadratic form
// in v = (kxx, kyy, sqrt2 kxy), the curvature in its tangent frame (an isometry of the
// symmetric 2x2 tensors, so rotations of the frame act on v orthogonally).
struct BendingForm {
  std::array<double, 6> b{};  // B00 B11 B22 B01 B02 B12
  // B += weight q q^T, q = (Qxx, Qyy, sqrt2 Qxy) of a 2x2 sensitivity Q.
  void addOuter(double weight, double qxx, double qxy, double qyy) {
    const double q[3] = {qxx, qyy, std::numbers::sqrt2 * qxy};
    b[0] += weight * q[0] * q[0];
    b[1] += weight * q[1] * q[1];
    b[2] += weight * q[2] * q[2];
    b[3] += weight * q[0] * q[1];
    b[4] += weight * q[0] * q[2];
    b[5] += weight * q[1] * q[2];
  }
  // v^T B v for the curvature kappa = m m^T - nu n n^T (unit tangent vectors m, n).
  [[nodiscard]] double bendAlong(double mx, double my, double nu, double nx, double ny) const {
    const double v[3] = {mx * mx - nu * nx * nx, my * my - nu * ny * ny,
                         std::numbers::sqrt2 * (mx * my - nu * nx * ny)};
    return b[0] * v[0] * v[0] + b[1] * v[1] * v[1] + b[2] * v[2] * v[2] +
           2 * (b[3] * v[0] * v[1] + b[4] * v[0] * v[2] + b[5] * v[1] * v[2]);
  }
  // Mean over the cylinder's direction psi of e^T B e, e = (c^2, s^2, sqrt2 c s): <B, M> with
  // M = mean e e^T = [[3/8, 1/8, 0], [1/8, 3/8, 0], [0, 0, 1/4]]. The plate's is D for every nu.
  [[nodiscard]] double cylinderAverage() const {
    return 0.375 * (b[0] + b[1]) + 0.25 * b[3] + 0.25 * b[2];
  }
};

// The outward direction (angle in the tangent frame) of the widest gap between the directions
// `angles` (radians, any order; sorted here) when it exceeds kEdgeGap; none for an interior
// node.
std::optional<double> freeEdgeOutward(std::vector<double>& angles) {
  if (angles.empty()) return std::nullopt;
  std::sort(angles.begin(), angles.end());
  double gap = angles.front() + 2 * kPi - angles.back();
  double start = angles.back();
  for (size_t a = 1; a < angles.size(); ++a) {
    if (angles[a] - angles[a - 1] > gap) {
      gap = angles[a] - angles[a - 1];
      start = angles[a - 1];
    }
  }
  if (gap <= kEdgeGap) return std::nullopt;
  return start + gap / 2;
}
// Per-fiber bending weights that make a node's bending form the plate's in every mode
// (header (b), "fitted weights"): with q_k = (Qxx, Qyy, sqrt2 Qxy) of fiber k's sensitivity
// and qbar their mean,
//   alpha qbar qbar^T + (1 - alpha) / n sum_k omega_k q_k q_k^T = lambda C,   omega_k >= floor,
// C = [[1, nu, 0], [nu, 1, 0], [0, 0, 1 - nu]] (any lambda > 0: the scalar K_b,j sets the
// scale). Six linear equations in n + 1 unknowns; of the solutions the one nearest the prior
// weights p_k in relative terms, min sum_k ((omega_k - p_k) / p_k)^2 + ((lambda - lambda0) /
// lambda0)^2 with lambda0 = <B_prior, M>, by the minimum-norm solution of the equations in those
// relative unknowns (complete orthogonal decomposition: straight fibers span only five of the
// six dimensions, and then the mean term's share fixes lambda). Weights that fall below the
// floor are held there and the rest solved again (an active set, at most n rounds). None when
// the equations have no solution within 1e-9 of the form's size (fibers in fewer than three
// directions, e.g. along a free edge) or lambda would not be positive.
std::optional<std::vector<double>> fitBendWeights(std::span<const std::array<double, 3>> q,
                                                  std::span<const double> prior, double alpha,
                                                  double nu, double floor) {
  const auto n = static_cast<Eigen::Index>(q.size());
  if (n < 2) return std::nullopt;
  // The six entries B00 B11 B22 B01 B02 B12 of a b^T (as a column; BendingForm's order).
  const auto entries = [](const std::array<double, 3>& a, const std::array<double, 3>& b) {
    Eigen::VectorXd e(6);
    e << a[0] * b[0], a[1] * b[1], a[2] * b[2], a[0] * b[1], a[0] * b[2], a[1] * b[2];
    return e;
  };
  std::array<double, 3> mean{};
  for (const auto& qk : q) {
    for (size_t c = 0; c < 3; ++c) mean[c] += qk[c] / static_cast<double>(n);
  }
  Eigen::VectorXd plate(6);  // C
  plate << 1, 1, 1 - nu, nu, 0, 0;
  Eigen::MatrixXd outer(6, n);  // column k: (1 - alpha) / n q_k q_k^T
  for (Eigen::Index k = 0; k < n; ++k) {
    const std::array<double, 3>& qk = q[static_cast<size_t>(k)];
    outer.col(k) = (1 - alpha) / static_cast<double>(n) * entries(qk, qk);
  }
  const Eigen::VectorXd meanTerm = alpha * entries(mean, mean);
  const Eigen::VectorXd priorWeights = Eigen::Map<const Eigen::VectorXd>(prior.data(), n);
  const Eigen::VectorXd priorVector = meanTerm + outer * priorWeights;
  BendingForm priorForm;  // the same entries in the same order
  std::copy(priorVector.begin(), priorVector.end(), priorForm.b.begin());
  const double lambda0 = priorForm.cylinderAverage();  // <B_prior, M>
  if (!(lambda0 > 0)) return std::nullopt;
  std::vector<bool> held(static_cast<size_t>(n), false);  // at the floor
  std::vector<double> weights(prior.begin(), prior.end());
  for (Eigen::Index round = 0; round <= n; ++round) {
    // Unknowns y_k = (omega_k - p_k) / p_k of the fibers not held and z = (lambda - lambda0) /
    // lambda0; equations B(omega) - lambda C = 0.
    std::vector<Eigen::Index> free;
    Eigen::VectorXd rhs = lambda0 * plate - meanTerm;
    for (Eigen::Index k = 0; k < n; ++k) {
      const auto kk = static_cast<size_t>(k);
      rhs -= outer.col(k) * (held[kk] ? floor : prior[kk]);
      if (!held[kk]) free.push_back(k);
    }
    const auto unknowns = static_cast<Eigen::Index>(free.size());
    Eigen::MatrixXd system(6, unknowns + 1);
    for (Eigen::Index f = 0; f < unknowns; ++f) {
      system.col(f) = outer.col(free[static_cast<size_t>(f)]) *
                      prior[static_cast<size_t>(free[static_cast<size_t>(f)])];
    }
    system.col(unknowns) = -lambda0 * plate;
    const Eigen::VectorXd solution = system.completeOrthogonalDecomposition().solve(rhs);
    if ((system * solution - rhs).norm() > 1e-9 * lambda0 * plate.norm()) return std::nullopt;
    if (!(1 + solution[unknowns] > 0)) return std::nullopt;
    bool below = false;
    for (Eigen::Index f = 0; f < unknowns; ++f) {
      const auto k = static_cast<size_t>(free[static_cast<size_t>(f)]);
      weights[k] = prior[k] * (1 + solution[f]);
      if (weights[k] < floor) {
        weights[k] = floor;
        held[k] = true;
        below = true;
      }
    }
    if (!below) return weights;
  }
  return std::nullopt;
}

constexpr size_t kNodeGrain = 256;
// The largest |w_k| of a fiber's bending term (fiber_model.hpp, "(b) Bending").
constexpr double kMaxBendWeightRatio = 10.0;

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
  buildResamplePairs();
}

void FiberModel::buildTopology(std::vector<std::string>* warnings) {
  const auto n = restPositions_.size() / 3;
  FiberNetworkParams netParams;
  netParams.neighbourCount = params_.neighbourCount;
  netParams.samples = params_.samples;
  network_ = buildFiberNetwork(restPositions_, restNormals_, netParams, warnings, cracks_,
                               params_.fracture ? &networkMemo_ : nullptr);
  ++networkBuilds_;
  networkCracks_ = cracks_;
  // fracture.crack_tip_scale for the fibers centred within twice a disc's radius of its centre.
  crackTipScale_.clear();
  if (params_.fracture && params_.fracture->crackTipScale != 1.0 && !cracks_.empty()) {
    crackTipScale_.assign(n, 1.0);
    for (const CrackDisc& disc : cracks_) {
      for (size_t j = 0; j < n; ++j) {
        if ((row(restPositions_, j) - disc.centre).norm() < 2 * disc.radius) {
          crackTipScale_[j] = params_.fracture->crackTipScale;
        }
      }
    }
  }
  if (params_.resample) builtRestPositions_ = restPositions_;
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
  meanAngleWeight_ = std::clamp((3.0 * nu - 1.0) / (1.0 + nu), -1.0, 1.0);
  // With alpha < 0 the bending energy, a quadratic form in the angle changes,
  //   alpha (mean dtheta)^2 + (1 - alpha) mean(w^2 dtheta^2),
  // stays positive definite if mean(1 / w_k^2) < (1 - alpha) / (-alpha) (Cauchy-Schwarz); each
  // w_k^2 is kept >= its floor, which leaves a quarter of (1 - alpha) as margin.
  const double minimumBendWeight =
      meanAngleWeight_ < 0 ? -meanAngleWeight_ / (0.75 * (1.0 - meanAngleWeight_)) : 0.0;
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
  // Q_k measured: the rest patch of node j bent by z = 1/2 kappa:(d d^T) along its normal, each
  // fiber's angle about the patch frame's normal (which tilts with the bending where the patch
  // is one-sided, e.g. at an edge), by central differences.
  struct SensitivityProbe {
    const FiberModel& model;
    std::vector<double> positions;
    std::vector<size_t> touched;
    std::array<double, 3 * kMaxFibersPerNode> sensitivity{};
    void measure(size_t j, const Vec3& normal, const Vec3& tangent1, const Vec3& tangent2) {
      const FiberNetwork& net = model.network_;
      touched.clear();
      for (int32_t e = model.patchOffsets_[j]; e < model.patchOffsets_[j + 1]; ++e) {
        touched.push_back(static_cast<size_t>(model.patchNodes_[static_cast<size_t>(e)]));
      }
      touched.push_back(j);
      for (int32_t f = net.centreOffsets[j]; f < net.centreOffsets[j + 1]; ++f) {
        touched.push_back(static_cast<size_t>(net.fiberNodes[3 * static_cast<size_t>(f)]));
        touched.push_back(static_cast<size_t>(net.fiberNodes[3 * static_cast<size_t>(f) + 2]));
      }
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      const Vec3 centre = row(model.restPositions_, j);
      double reach = 0;
      for (const size_t i : touched)
        reach = std::max(reach, (row(model.restPositions_, i) - centre).norm());
      const double step = reach > 0 ? 1e-5 / reach : 0.0;  // heights ~1e-5 of the patch size
      sensitivity.fill(0.0);
      if (step == 0) return;
      for (int mode = 0; mode < 3; ++mode) {
        double angles[2][kMaxFibersPerNode] = {};
        for (int side = 0; side < 2; ++side) {
          const double amplitude = side == 0 ? step : -step;
          for (const size_t i : touched) {
            const Vec3 d = row(model.restPositions_, i) - centre;
            const double dx = d.dot(tangent1), dy = d.dot(tangent2);
            const double height = mode == 0 ? 0.5 * dx * dx : (mode == 1 ? 0.5 * dy * dy : dx * dy);
            setRow(positions, i, row(model.restPositions_, i) + amplitude * height * normal);
          }
          const Vec3 frameNormal = model.patchFrame(positions, j).normal;
          int k = 0;
          for (int32_t f = net.centreOffsets[j]; f < net.centreOffsets[j + 1]; ++f) {
            const auto fi = static_cast<size_t>(f);
            if ((net.flags[fi] & kFiberActive) == 0) continue;
            const Vec3 ends[3] = {row(positions, static_cast<size_t>(net.fiberNodes[3 * fi])),
                                  row(positions, j),
                                  row(positions, static_cast<size_t>(net.fiberNodes[3 * fi + 2]))};
            angles[side][k++] = fiber::fiberTangentAngle(ends, frameNormal);
          }
          for (const size_t i : touched) setRow(positions, i, row(model.restPositions_, i));
        }
        // kappa_xy = 1 moves z by dx dy = 2 (1/2 dx dy): its derivative is 2 Q_xy.
        const double scale = mode == 2 ? 0.5 : 1.0;
        const int slot = mode == 0 ? 0 : (mode == 1 ? 2 : 1);
        for (size_t k = 0; k < kMaxFibersPerNode; ++k) {
          sensitivity[3 * k + static_cast<size_t>(slot)] =
              scale * (angles[0][k] - angles[1][k]) / (2 * step);
        }
      }
    }
  };
  // One worker's probe (a private copy of the rest positions, which it bends and restores)
  // and scratch.
  struct NodeScratch {
    SensitivityProbe probe;
    std::vector<double> endAngles;  // directions of a node's fiber ends, for freeEdgeOutward
    std::vector<std::array<double, 3>> sensitivities;  // a node's q_k, (fibers)
    std::vector<double> weights;                       // its fibers' w_k^2, (fibers)
    std::vector<double> inputs;                        // the node's memo key (mappingMemo_)
  };
  if (cracks_.empty()) freeEdgeNormal_.assign(3 * n, 0.0);
  // Node j writes only its own entries (and the bend weights of the fibers it centres), from
  // the rest state alone: the same numbers on any thread count. Run once at the start and at
  // every crack's rebuild, it was a fifth of a rebuild's time on one thread.
  tbb::enumerable_thread_specific<NodeScratch> scratches([&] {
    return NodeScratch{SensitivityProbe{*this, restPositions_, {}, {}}, {}, {}, {}, {}};
  });
  const auto mapNode = [&](size_t j, NodeScratch& scratch) {
    SensitivityProbe& probe = scratch.probe;
    std::vector<double>& endAngles = scratch.endAngles;
    std::vector<std::array<double, 3>>& sensitivities = scratch.sensitivities;
    std::vector<double>& weights = scratch.weights;
    const double area = areas_[j];
    mass_[j] = material_.density * h * area;
    const Vec3 normal = row(restFrameNormals, j);
    const Vec3 tangent1 = normal.unitOrthogonal();
    const Vec3 tangent2 = normal.cross(tangent1);
    int count = 0;
    double sumArea = 0, sumArea2 = 0, sumAngle = 0;
    double qxx = 0, qxy = 0, qyy = 0;  // sum_k Q_k, the bending sensitivity (see header)
    const Vec3 centre = row(restPositions_, j);
    probe.measure(j, normal, tangent1, tangent2);
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const auto fi = static_cast<size_t>(f);
      if ((network_.flags[fi] & kFiberActive) == 0) continue;
      ++count;
      const double length = network_.restLength[fi];
      const double fiberArea = kPi / 4 * length * length;
      sumArea += fiberArea;
      sumArea2 += directionWeight(fi) * fiberArea * fiberArea;
      sumAngle += network_.restAngle[fi];
      qxx += probe.sensitivity[3 * static_cast<size_t>(count - 1)];
      qxy += probe.sensitivity[3 * static_cast<size_t>(count - 1) + 1];
      qyy += probe.sensitivity[3 * static_cast<size_t>(count - 1) + 2];
    }
    if (count == 0) {
      stretchK_[j] = bendK_[j] = restArea_[j] = restMeanAngle_[j] = 0;
      return;
    }
    const double invCount = 1.0 / count;
    restArea_[j] = sumArea * invCount;
    restMeanAngle_[j] = sumAngle * invCount;
    const double areaMoment = restArea_[j] * restArea_[j] + sumArea2 * invCount;  // M_j
    stretchK_[j] = rawStretch ? *rawStretch : e * h * area / (2.0 * (1.0 - nu) * areaMoment);
    qxx *= invCount;
    qxy *= invCount;
    qyy *= invCount;
    const double trace = qxx + qyy;
    endAngles.clear();
    sensitivities.clear();
    weights.clear();
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const auto fi = static_cast<size_t>(f);
      if ((network_.flags[fi] & kFiberActive) == 0) continue;
      const size_t k = sensitivities.size();
      const double fxx = probe.sensitivity[3 * k];  // Q_k
      const double fxy = probe.sensitivity[3 * k + 1];
      const double fyy = probe.sensitivity[3 * k + 2];
      sensitivities.push_back({fxx, fyy, std::numbers::sqrt2 * fxy});
      const double fiberTrace = fxx + fyy;
      // w_k = tr Qbar / tr Q_k, at most kMaxBendWeightRatio in size (see the header).
      const double weight = std::abs(fiberTrace) * kMaxBendWeightRatio > std::abs(trace)
                                ? trace / fiberTrace
                                : (std::abs(trace) > 0 ? kMaxBendWeightRatio : 0.0);
      weights.push_back(std::max(weight * weight, minimumBendWeight));
      if (cracks_.empty()) {  // the free edges are found on the crack-free network
        for (const int end : {0, 2}) {
          const Vec3 d =
              row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fi + end])) - centre;
          endAngles.push_back(std::atan2(d.dot(tangent2), d.dot(tangent1)));
        }
      }
    }
    if (cracks_.empty()) {
      const std::optional<double> outward = freeEdgeOutward(endAngles);
      setRow(freeEdgeNormal_, j,
             outward ? Vec3(std::cos(*outward) * tangent1 + std::sin(*outward) * tangent2)
                     : Vec3::Zero());
    }
    const Vec3 outward = row(freeEdgeNormal_, j);
    const double inPlane = std::hypot(outward.dot(tangent1), outward.dot(tangent2));
    if (inPlane <= 1e-6) {  // an interior node: its form fitted to the plate's
      if (const std::optional<std::vector<double>> fitted =
              fitBendWeights(sensitivities, weights, meanAngleWeight_, nu, minimumBendWeight)) {
        weights = *fitted;
        for (double& w2 : weights) w2 = std::min(w2, kMaxBendWeightRatio * kMaxBendWeightRatio);
      }
    }
    // B = alpha Qbar Qbar^T + (1 - alpha) (1/n) sum_k w_k^2 Q_k Q_k^T (as vectors q).
    BendingForm form;
    form.addOuter(meanAngleWeight_, qxx, qxy, qyy);
    {
      size_t k = 0;
      for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
        const auto fi = static_cast<size_t>(f);
        if ((network_.flags[fi] & kFiberActive) == 0) continue;
        fiberBendWeight_[fi] = directionWeight(fi) * weights[k];
        form.addOuter((1.0 - meanAngleWeight_) * invCount * fiberBendWeight_[fi],
                      probe.sensitivity[3 * k], probe.sensitivity[3 * k + 1],
                      probe.sensitivity[3 * k + 2]);
        ++k;
      }
    }
    // Interior node: the cylinder energy averaged over its direction is the plate's,
    // K_b A_j0 <B, M> = D a_j. Free-edge node: the plate there carries M_nn = 0, so it bends as
    // kappa = t t^T - nu n n^T (t along the edge, n outward) storing D (1 - nu^2) / 2 per unit
    // area; that mode is matched (K_b A_j0 B(kappa) = D (1 - nu^2) a_j), within the bound below.
    // A direction average would count the modes an edge node cannot sense (its fibers run along
    // the edge) and make it up to 8/3 too stiff along the edge.
    // Only the input surface's free edges, found on the crack-free network: the sides of a
    // crack keep the direction average (a choice; their fibers change at every rebuild).
    double sensitivity = form.cylinderAverage();
    if (inPlane > 1e-6) {  // zero for interior nodes
      const double nx = outward.dot(tangent1) / inPlane, ny = outward.dot(tangent2) / inPlane;
      const double edgeMode = form.bendAlong(-ny, nx, nu, nx, ny);
      // Never stiffer than the direction average: after cracks an edge node may keep only
      // fibers that barely sense this mode, and matching it alone would make it arbitrarily
      // stiff.
      sensitivity = std::max(sensitivity, edgeMode / (1.0 - nu * nu));
    }
    bendK_[j] = params_.bendStiffness
                    ? *params_.bendStiffness
                    : (sensitivity > 0 ? flexural * area / (sensitivity * restArea_[j]) : 0.0);
    if (!params_.nodeStiffnessScale.empty()) {
      stretchK_[j] *= params_.nodeStiffnessScale[j];
      bendK_[j] *= params_.nodeStiffnessScale[j];
    }
  };
  // The memo (see the header). Its key for node j holds everything mapNode(j) reads besides
  // `shared`: whether the free edges are measured now, the frame normal N_j(x0) and the input
  // normal that orients it, the free-edge normal when it is read, each fiber centred at j
  // (its ends, whether active, its rest length and angle: the probe touches the ends of all,
  // active or not) and the normal patch (nodes and weights).
  const bool memoize = params_.fracture.has_value();
  if (memoize) {
    std::vector<double> shared = restPositions_;
    shared.insert(shared.end(), restNormals_.begin(), restNormals_.end());
    shared.insert(shared.end(), areas_.begin(), areas_.end());
    shared.insert(shared.end(), params_.nodeStiffnessScale.begin(),
                  params_.nodeStiffnessScale.end());
    shared.insert(shared.end(),
                  {e, nu, h, material_.density, rawStretch ? 1.0 : 0.0, rawStretch.value_or(0.0),
                   params_.bendStiffness ? 1.0 : 0.0, params_.bendStiffness.value_or(0.0)});
    shared.insert(shared.end(), fiberStretchWeight_.begin(), fiberStretchWeight_.end());
    if (shared != mappingMemo_.shared || mappingMemo_.inputs.size() != n) {
      mappingMemo_.shared = std::move(shared);
      mappingMemo_.inputs.assign(n, {});
      mappingMemo_.outputs.assign(n, {});
    }
  } else {
    mappingMemo_ = MappingMemo{};
  }
  const auto mapNodeOnce = [&](size_t j, NodeScratch& scratch) {
    if (!memoize) {
      mapNode(j, scratch);
      return;
    }
    std::vector<double>& key = scratch.inputs;
    key.clear();
    key.push_back(cracks_.empty() ? 1.0 : 0.0);
    key.insert(key.end(), &restFrameNormals[3 * j], &restFrameNormals[3 * j] + 3);
    key.insert(key.end(), &restNormals_[3 * j], &restNormals_[3 * j] + 3);
    if (!cracks_.empty())
      key.insert(key.end(), &freeEdgeNormal_[3 * j], &freeEdgeNormal_[3 * j] + 3);
    const auto fiberBegin = static_cast<size_t>(network_.centreOffsets[j]);
    const auto fiberEnd = static_cast<size_t>(network_.centreOffsets[j + 1]);
    key.push_back(static_cast<double>(fiberEnd - fiberBegin));
    for (size_t f = fiberBegin; f < fiberEnd; ++f) {
      key.insert(key.end(), {static_cast<double>(network_.fiberNodes[3 * f]),
                             static_cast<double>(network_.fiberNodes[3 * f + 2]),
                             (network_.flags[f] & kFiberActive) != 0 ? 1.0 : 0.0,
                             network_.restLength[f], network_.restAngle[f]});
    }
    const auto patchBegin = static_cast<size_t>(patchOffsets_[j]);
    const auto patchEnd = static_cast<size_t>(patchOffsets_[j + 1]);
    for (size_t p = patchBegin; p < patchEnd; ++p) {
      key.insert(key.end(), {static_cast<double>(patchNodes_[p]), patchWeights_[2 * p],
                             patchWeights_[2 * p + 1]});
    }
    std::vector<double>& out = mappingMemo_.outputs[j];
    if (key == mappingMemo_.inputs[j]) {
      mass_[j] = out[0];
      stretchK_[j] = out[1];
      bendK_[j] = out[2];
      restArea_[j] = out[3];
      restMeanAngle_[j] = out[4];
      setRow(freeEdgeNormal_, j, Vec3(out[5], out[6], out[7]));
      std::copy(out.begin() + 8, out.end(),
                fiberBendWeight_.begin() + static_cast<ptrdiff_t>(fiberBegin));
      return;
    }
    mapNode(j, scratch);
    mappingMemo_.inputs[j] = key;
    out.assign({mass_[j], stretchK_[j], bendK_[j], restArea_[j], restMeanAngle_[j],
                freeEdgeNormal_[3 * j], freeEdgeNormal_[3 * j + 1], freeEdgeNormal_[3 * j + 2]});
    out.insert(out.end(), fiberBendWeight_.begin() + static_cast<ptrdiff_t>(fiberBegin),
               fiberBendWeight_.begin() + static_cast<ptrdiff_t>(fiberEnd));
  };
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 64), [&](const tbb::blocked_range<size_t>& r) {
    NodeScratch& scratch = scratches.local();
    for (size_t j = r.begin(); j != r.end(); ++j) mapNodeOnce(j, scratch);
  });

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
  // A patch holds nodes of its node's piece only (patchPieces_): a fiber broken since the
  // pieces parted is active in a rebuilt network until its state is put back, and a patch
  // reaching across would orient one piece's fibers by the other's nodes and push them.
  builtPatchPieces_ = patchPieces_;
  const auto keepOwnPiece = [&](size_t owner, std::vector<int32_t>& patch) {
    if (patchPieces_.empty() || patchPieces_[owner] < 0) return;
    std::erase_if(patch, [&](int32_t i) {
      const int32_t piece = patchPieces_[static_cast<size_t>(i)];
      return piece >= 0 && piece != patchPieces_[owner];
    });
  };
  // "Shares a fiber" neighbours of a node, for growing degenerate patches by rings.
  const auto addRing = [&](size_t owner, std::vector<int32_t>& patch) {
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
    keepOwnPiece(owner, patch);
  };
  // The smaller spread of a patch's rest positions in the tangent plane over the larger (the
  // eigenvalues of their covariance) below which the patch grows by a ring, and past three
  // rings counts as collinear. The normal's response to a node's motion across the plane
  // grows as the smaller spread shrinks, and so does the stiffness the node's angles give it.
  // A sampling is an input error only when nearly collinear (1e-2; a jittered grid's edge
  // nodes spread down to 0.033, a regular one's 0.12). Once cracks cut the network, 0.05:
  // in the Pinup poster a 4-node speck cut off along a line (spread 0.022) kept one node's
  // two fibers oriented by that patch and swung them at 100-220 m/s for seconds (stable for
  // the intact sheet's step, not for that patch), flying to 4.7 m while the two halves hung
  // still. Tried and measured worse: the 0.05 for the cut nodes only (the 3,000-node poster
  // in the portable build gathered 381 cracks without parting and blew up in frame 28), and
  // dropping a cut node's fibers instead of growing its patch (the tearing sheets of the
  // fracture tests stayed bridged between their grips).
  const double smallestSpread = dropDegenerate ? 0.05 : 1e-2;
  // Each node's patch and weights, in lists kept between builds for their capacity: a
  // crack's rebuild allocated and freed three lists per node, half of this function's time.
  std::vector<std::vector<int32_t>>& patches = patchLists_;
  std::vector<std::vector<double>>& weights = patchWeightLists_;
  patches.resize(n);
  weights.resize(n);
  std::vector<uint8_t> collinear(n, 0);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        std::vector<Eigen::Vector2d> u;  // the patch's rest offsets in the tangent plane
        for (size_t j = r.begin(); j != r.end(); ++j) {
          std::vector<int32_t>& patch = patches[j];
          patch.assign(1, static_cast<int32_t>(j));
          weights[j].clear();
          for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
            const auto fi = static_cast<size_t>(f);
            if ((network_.flags[fi] & kFiberActive) == 0) continue;
            patch.push_back(network_.fiberNodes[3 * fi]);
            patch.push_back(network_.fiberNodes[3 * fi + 2]);
          }
          std::sort(patch.begin(), patch.end());
          patch.erase(std::unique(patch.begin(), patch.end()), patch.end());
          keepOwnPiece(j, patch);
          const Vec3 normal = row(restNormals_, j);
          const Vec3 tangent1 = normal.unitOrthogonal();
          const Vec3 tangent2 = normal.cross(tangent1);
          for (int ring = 0;; ++ring) {
            Vec3 centroid = Vec3::Zero();
            for (const int32_t i : patch) centroid += row(restPositions_, static_cast<size_t>(i));
            centroid /= static_cast<double>(patch.size());
            Eigen::Matrix2d g = Eigen::Matrix2d::Zero();
            u.resize(patch.size());
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
            if (patch.size() >= 4 && eig[0] > smallestSpread * eig[1] && eig[1] > 0) {
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
            if (ring < 3) addRing(j, patch);
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
  if (!params_.fracture && !params_.resample) {  // built once: nothing to keep them for
    patchLists_ = {};
    patchWeightLists_ = {};
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
  if (!stableStep_) stableStep_ = stableStepAt(restPositions_);
  return *stableStep_;
}

double FiberModel::stableStepAt(std::span<const double> x0) const {
  // Lanczos on S = M^-1/2 K M^-1/2 at x0, K v ~ (g(x0 + t M^-1/2 v) - g(x0 - t M^-1/2 v)) / 2t.
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
          plus[i] = x0[i] + d;
          minus[i] = x0[i] - d;
        }
        std::fill(gp.begin(), gp.end(), 0.0);
        std::fill(gm.begin(), gm.end(), 0.0);
        evaluate(plus, gp, NodeOutputs(), workspace);
        evaluate(minus, gm, NodeOutputs(), workspace);
        for (size_t i = 0; i < dofs; ++i) w[i] = (gp[i] - gm[i]) / (2 * t) * invSqrtMass[i / 3];
      });
  return lambda > 0 ? 0.7 * 2.0 / std::sqrt(lambda) : std::numeric_limits<double>::infinity();
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
  const std::scoped_lock lock(piecesMutex_);
  PiecesMemo& memo = piecesMemo_;
  const size_t fiberCount = network_.flags.size();
  // The pieces are the components of the graph whose edges are the active fibers' segments
  // (end, centre). Since the memo's labels, fibers that turned inactive split nothing if the
  // two nodes of each of their segments are still linked; found by a search from one node
  // for the other over active segments, given up after kSearchCap nodes (at the front of a
  // tear the nodes of a broken fiber stay linked a few segments around). A fiber that turned
  // active may join two pieces: labelled anew.
  constexpr size_t kSearchCap = 512;
  const auto n = static_cast<size_t>(network_.nodeCount);
  memo.visited.resize(n, 0);
  const auto stillLinked = [&](int32_t from, int32_t to) {
    if (++memo.epoch == 0) {  // the stamps wrapped: clear them
      std::fill(memo.visited.begin(), memo.visited.end(), 0);
      memo.epoch = 1;
    }
    std::vector<int32_t>& queue = memo.queue;
    queue.assign(1, from);
    memo.visited[static_cast<size_t>(from)] = memo.epoch;
    const Incidence& inc = network_.incidence;
    for (size_t head = 0; head < queue.size() && queue.size() < kSearchCap; ++head) {
      const auto u = static_cast<size_t>(queue[head]);
      for (auto e = static_cast<size_t>(inc.offsets[u]);
           e < static_cast<size_t>(inc.offsets[u + 1]); ++e) {
        const auto f = static_cast<size_t>(inc.entries[e] / 3);
        if ((network_.flags[f] & kFiberActive) == 0) continue;
        const int32_t* nodes = &network_.fiberNodes[3 * f];
        const bool centre = inc.entries[e] % 3 == 1;
        for (const int32_t v : {centre ? nodes[0] : nodes[1], centre ? nodes[2] : nodes[1]}) {
          if (v == to) return true;
          if (memo.visited[static_cast<size_t>(v)] == memo.epoch) continue;
          memo.visited[static_cast<size_t>(v)] = memo.epoch;
          queue.push_back(v);
        }
      }
    }
    return false;
  };
  const std::vector<uint8_t>& flags = network_.flags;
  bool same = memo.networkBuild == networkBuilds_ && memo.flags.size() == fiberCount &&
              memo.pieces.size() == n;
  constexpr size_t kBlock = 4096;  // flags compared a block at a time, most blocks unchanged
  for (size_t block = 0; block < fiberCount && same; block += kBlock) {
    const size_t end = std::min(block + kBlock, fiberCount);
    if (std::memcmp(&memo.flags[block], &flags[block], end - block) == 0) continue;
    for (size_t f = block; f < end && same; ++f) {
      if (((memo.flags[f] ^ flags[f]) & kFiberActive) == 0) continue;
      const int32_t* nodes = &network_.fiberNodes[3 * f];
      same = (flags[f] & kFiberActive) == 0 && stillLinked(nodes[0], nodes[1]) &&
             stillLinked(nodes[2], nodes[1]);
    }
  }
  memo.flags = flags;
  if (same) return memo.pieces;
  UnionFind pieces(n);
  for (size_t f = 0; f < fiberCount; ++f) {
    if ((flags[f] & kFiberActive) == 0) continue;
    pieces.unite(network_.fiberNodes[3 * f], network_.fiberNodes[3 * f + 1]);
    pieces.unite(network_.fiberNodes[3 * f + 1], network_.fiberNodes[3 * f + 2]);
  }
  memo.networkBuild = networkBuilds_;
  memo.pieces = pieces.labels();
  return memo.pieces;
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
         bytes(mappedStretchK_) + bytes(mappedBendK_) + bytes(originalFibers_) +
         bytes(freeEdgeNormal_);
}

}  // namespace shellsim
