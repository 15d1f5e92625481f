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

constexpr double kPi = std::numbers::pi;
constexpr int kMaxFibersPerNode = 32;  // = the largest neighbourCount
constexpr size_t kNodeGrain = 256;

Vec3 row(std::span<const double> flat, size_t i) {
  return {flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
}

void setRow(std::span<double> flat, size_t i, const Vec3& v) {
  flat[3 * i] = v.x();
  flat[3 * i + 1] = v.y();
  flat[3 * i + 2] = v.z();
}

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

  restPositions_ = nodes.positions;
  restNormals_.resize(3 * n);
  for (size_t i = 0; i < n; ++i) setRow(restNormals_, i, row(nodes.normals, i).normalized());
  normals_ = restNormals_;
  rotations_.assign(4 * n, 0.0);
  for (size_t i = 0; i < n; ++i) rotations_[4 * i] = 1.0;

  FiberNetworkParams netParams;
  netParams.neighbourCount = params.neighbourCount;
  netParams.samples = params.samples;
  network_ = buildFiberNetwork(restPositions_, restNormals_, netParams, warnings);

  // Neighbourhoods for shape matching: the node and every node sharing a fiber with it.
  patchOffsets_.assign(n + 1, 0);
  {
    std::vector<std::vector<int32_t>> patches(n);
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, kNodeGrain),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t j = r.begin(); j != r.end(); ++j) {
                          std::vector<int32_t>& patch = patches[j];
                          patch.push_back(static_cast<int32_t>(j));
                          const Incidence& inc = network_.incidence;
                          for (int32_t i = inc.offsets[j]; i < inc.offsets[j + 1]; ++i) {
                            const auto f = static_cast<size_t>(inc.entries[i] / 3);
                            for (int s = 0; s < 3; ++s)
                              patch.push_back(network_.fiberNodes[3 * f + s]);
                          }
                          std::sort(patch.begin(), patch.end());
                          patch.erase(std::unique(patch.begin(), patch.end()), patch.end());
                        }
                      });
    for (size_t j = 0; j < n; ++j) {
      patchOffsets_[j + 1] = patchOffsets_[j] + static_cast<int32_t>(patches[j].size());
    }
    patchNodes_.reserve(static_cast<size_t>(patchOffsets_[n]));
    for (const auto& patch : patches)
      patchNodes_.insert(patchNodes_.end(), patch.begin(), patch.end());
  }

  // Per-node rest values and the stiffness mapping (see the header for the derivation).
  mass_.resize(n);
  stretchK_.resize(n);
  bendK_.resize(n);
  restArea_.resize(n);
  restMeanAngle_.resize(n);
  const double e = material.youngModulus;
  const double nu = material.poisson;
  const double h = material.thickness;
  const double flexural = e * h * h * h / (12.0 * (1.0 - nu * nu));  // D, N m
  const std::optional<double> rawStretch =
      params.stretchStiffness ? params.stretchStiffness : material.stiffness;
  for (size_t j = 0; j < n; ++j) {
    const double area = nodes.areas[j];
    mass_[j] = material.density * h * area;
    const Vec3 normal = row(restNormals_, j);
    const Vec3 tangent1 = normal.unitOrthogonal();
    const Vec3 tangent2 = normal.cross(tangent1);
    int count = 0;
    double sumArea = 0, sumArea2 = 0, sumAngle = 0;
    double qxx = 0, qxy = 0, qyy = 0;  // sum_k Q_k, the bending sensitivity (see header)
    const Vec3 centre = row(restPositions_, j);
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const auto fi = static_cast<size_t>(f);
      if ((network_.flags[fi] & kFiberActive) == 0) continue;
      ++count;
      const double length = network_.restLength[fi];
      const double fiberArea = kPi / 4 * length * length;
      sumArea += fiberArea;
      sumArea2 += fiberArea * fiberArea;
      sumAngle += network_.restAngle[fi];
      const Vec3 end1 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fi]));
      const Vec3 end2 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fi + 2]));
      Vec3 ge, gq;
      fiber::tangentAngle(fiber::reduce(end1, centre, end2), normal, &ge, &gq);
      const Vec3 ends[2] = {end1 - centre, end2 - centre};
      const double slopes[2] = {fiber::fiberSlotGradient(0, ge, gq).dot(normal),
                                fiber::fiberSlotGradient(2, ge, gq).dot(normal)};
      for (int s = 0; s < 2; ++s) {
        const double dx = ends[s].dot(tangent1);
        const double dy = ends[s].dot(tangent2);
        qxx -= 0.5 * slopes[s] * dx * dx;
        qxy -= 0.5 * slopes[s] * dx * dy;
        qyy -= 0.5 * slopes[s] * dy * dy;
      }
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
    const double directional = trace * trace / 4.0 + (trace * trace - 4.0 * det) / 8.0;
    bendK_[j] = params.bendStiffness
                    ? *params.bendStiffness
                    : (directional > 0 ? flexural * area / (directional * restArea_[j]) : 0.0);
  }

  fiberGradient_.resize(6 * static_cast<size_t>(network_.fiberCount()));
  nodeStretch_.resize(n);
  nodeBend_.resize(n);
}

EnergyParts FiberModel::evaluate(std::span<const double> x, std::span<const double> normals,
                                 std::span<double> gradient, double* meanAngleOut) const {
  const bool wantGradient = !gradient.empty();
  const auto n = static_cast<size_t>(network_.nodeCount);
  const int samples = samples_;
  const std::vector<int32_t>& fiberNodes = network_.fiberNodes;
  const std::vector<int32_t>& offsets = network_.centreOffsets;

  // Pass 1: per centre node.
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        std::array<double, kMaxFibersPerNode> length, angle;
        std::array<Vec3, kMaxFibersPerNode> lengthE, lengthQ, angleE, angleQ;
        for (size_t j = r.begin(); j != r.end(); ++j) {
          const auto begin = static_cast<size_t>(offsets[j]);
          const auto end = static_cast<size_t>(offsets[j + 1]);
          const Vec3 centre = row(x, j);
          const Vec3 normal = row(normals, j);
          int count = 0;
          double sumArea = 0, sumAreaChange2 = 0, sumAngle = 0;
          for (size_t f = begin; f < end; ++f) {
            const size_t local = f - begin;
            if ((network_.flags[f] & kFiberActive) == 0) continue;
            const fiber::Reduced z =
                fiber::reduce(row(x, static_cast<size_t>(fiberNodes[3 * f])), centre,
                              row(x, static_cast<size_t>(fiberNodes[3 * f + 2])));
            if (wantGradient) {
              length[local] = fiber::arcLength(z, samples, &lengthE[local], &lengthQ[local]);
              angle[local] = fiber::tangentAngle(z, normal, &angleE[local], &angleQ[local]);
            } else {
              length[local] = fiber::arcLength(z, samples);
              angle[local] = fiber::tangentAngle(z, normal);
            }
            const double restLength = network_.restLength[f];
            const double areaChange =
                kPi / 4 * (length[local] * length[local] - restLength * restLength);
            ++count;
            sumArea += kPi / 4 * length[local] * length[local];
            sumAreaChange2 += areaChange * areaChange;
            sumAngle += angle[local];
          }
          if (count == 0) {
            nodeStretch_[j] = nodeBend_[j] = 0;
            if (meanAngleOut != nullptr) meanAngleOut[j] = 0;
            if (wantGradient) std::fill(&fiberGradient_[6 * begin], &fiberGradient_[6 * end], 0.0);
            continue;
          }
          const double invCount = 1.0 / count;
          const double areaError = sumArea * invCount - restArea_[j];         // A_j - A_j0
          const double angleError = sumAngle * invCount - restMeanAngle_[j];  // H_j - H_j0
          nodeStretch_[j] =
              0.5 * stretchK_[j] * (areaError * areaError + sumAreaChange2 * invCount);
          nodeBend_[j] = 0.5 * bendK_[j] * angleError * angleError * restArea_[j];
          if (meanAngleOut != nullptr) meanAngleOut[j] = sumAngle * invCount;
          if (!wantGradient) continue;
          const double dEdAngle = bendK_[j] * restArea_[j] * angleError * invCount;
          for (size_t f = begin; f < end; ++f) {
            const size_t local = f - begin;
            double* out = &fiberGradient_[6 * f];
            if ((network_.flags[f] & kFiberActive) == 0) {
              std::fill(out, out + 6, 0.0);
              continue;
            }
            const double restLength = network_.restLength[f];
            const double areaChange =
                kPi / 4 * (length[local] * length[local] - restLength * restLength);
            const double dEdLength =
                stretchK_[j] * invCount * (areaError + areaChange) * (kPi / 2) * length[local];
            const Vec3 ge = dEdLength * lengthE[local] + dEdAngle * angleE[local];
            const Vec3 gq = dEdLength * lengthQ[local] + dEdAngle * angleQ[local];
            out[0] = ge.x();
            out[1] = ge.y();
            out[2] = ge.z();
            out[3] = gq.x();
            out[4] = gq.y();
            out[5] = gq.z();
          }
        }
      });

  // Pass 2: per node, gather its incident (fiber, slot) shares in ascending order.
  if (wantGradient) {
    const Incidence& inc = network_.incidence;
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
          for (size_t j = r.begin(); j != r.end(); ++j) {
            double sum[3] = {0, 0, 0};
            for (int32_t i = inc.offsets[j]; i < inc.offsets[j + 1]; ++i) {
              const auto entry = static_cast<size_t>(inc.entries[static_cast<size_t>(i)]);
              const double* g = &fiberGradient_[6 * (entry / 3)];
              // g_p1 = -g_e/2 + g_q, g_p = -2 g_q, g_p2 = g_e/2 + g_q  (fiberSlotGradient)
              const double eWeight = entry % 3 == 0 ? -0.5 : (entry % 3 == 1 ? 0.0 : 0.5);
              const double qWeight = entry % 3 == 1 ? -2.0 : 1.0;
              for (int c = 0; c < 3; ++c) sum[c] += eWeight * g[c] + qWeight * g[3 + c];
            }
            for (int c = 0; c < 3; ++c) gradient[3 * j + static_cast<size_t>(c)] += sum[c];
          }
        });
  }

  // Pass 3: energies in a fixed reduction order.
  EnergyParts parts;
  parts.stretching = deterministicSum(nodeStretch_);
  parts.bending = deterministicSum(nodeBend_);
  return parts;
}

EnergyParts FiberModel::energy(std::span<const double> x) const {
  return evaluate(x, normals_, {}, nullptr);
}

EnergyParts FiberModel::addGradient(std::span<const double> x, std::span<double> gradient) const {
  return evaluate(x, normals_, gradient, nullptr);
}

void FiberModel::nodeValues(std::span<const double> x, std::span<double> stretching,
                            std::span<double> bending, std::span<double> meanAngle) const {
  evaluate(x, normals_, {}, meanAngle.empty() ? nullptr : meanAngle.data());
  if (!stretching.empty()) std::copy(nodeStretch_.begin(), nodeStretch_.end(), stretching.begin());
  if (!bending.empty()) std::copy(nodeBend_.begin(), nodeBend_.end(), bending.begin());
}

void FiberModel::prepare(std::span<const double> x) {
  const auto n = static_cast<size_t>(network_.nodeCount);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t j = r.begin(); j != r.end(); ++j) {
          const auto begin = static_cast<size_t>(patchOffsets_[j]);
          const auto end = static_cast<size_t>(patchOffsets_[j + 1]);
          Vec3 centre = Vec3::Zero(), restCentre = Vec3::Zero();
          for (size_t i = begin; i < end; ++i) {
            const auto node = static_cast<size_t>(patchNodes_[i]);
            centre += row(x, node);
            restCentre += row(restPositions_, node);
          }
          const double inv = 1.0 / static_cast<double>(end - begin);
          centre *= inv;
          restCentre *= inv;
          Eigen::Matrix3d a = Eigen::Matrix3d::Zero();  // sum (x - c)(x0 - c0)^T
          for (size_t i = begin; i < end; ++i) {
            const auto node = static_cast<size_t>(patchNodes_[i]);
            a.noalias() +=
                (row(x, node) - centre) * (row(restPositions_, node) - restCentre).transpose();
          }
          // The rotation maximising tr(R^T A): Newton's method on R <- R exp([w]) with
          // M = R^T A: w = (tr(M) I - sym(M))^-1 axial(M - M^T), warm-started from the last R
          // (a gradient step, Mueller et al. 2016, while the matrix is not positive definite).
          Eigen::Quaterniond rotation(rotations_[4 * j], rotations_[4 * j + 1],
                                      rotations_[4 * j + 2], rotations_[4 * j + 3]);
          for (int iteration = 0; iteration < 40; ++iteration) {
            const Eigen::Matrix3d m = rotation.toRotationMatrix().transpose() * a;
            const Vec3 axial(m(2, 1) - m(1, 2), m(0, 2) - m(2, 0), m(1, 0) - m(0, 1));
            const double trace = m.trace();
            const Eigen::Matrix3d b =
                trace * Eigen::Matrix3d::Identity() - 0.5 * (m + m.transpose());
            const Eigen::LLT<Eigen::Matrix3d> llt(b);
            Vec3 omega = llt.info() == Eigen::Success ? Vec3(llt.solve(axial))
                                                      : Vec3(axial / (std::abs(trace) + 1e-300));
            const double angle = omega.norm();
            if (!(angle > 1e-15)) break;
            if (angle > 1.0) omega /= angle;  // at most one radian per step
            rotation =
                rotation * Eigen::Quaterniond(Eigen::AngleAxisd(omega.norm(), omega.normalized()));
            rotation.normalize();
            if (angle < 1e-13) break;
          }
          rotations_[4 * j] = rotation.w();
          rotations_[4 * j + 1] = rotation.x();
          rotations_[4 * j + 2] = rotation.y();
          rotations_[4 * j + 3] = rotation.z();
          setRow(normals_, j, (rotation * row(restNormals_, j)).normalized());
        }
      });
}

bool FiberModel::addHessian(std::span<const double> x,
                            std::vector<Eigen::Triplet<double>>& triplets) const {
  // Per centre node j, on its local nodes L (sorted): with u_k, w_k the gradients of l_k
  // and theta_k scattered to L, sigma_k = dE/dA_k = K_s/n [(A_j - A_j0) + (A_k - A_k0)],
  // a_k = sigma_k pi/2 l_k = dE/dl_k and b = dE/dtheta_k = K_b A_j0 (H_j - H_j0)/n:
  //   H_j = K_s (pi/2)^2 / n^2 U U^T + sum_k [K_s (pi/2)^2 l_k^2 / n + sigma_k pi/2] u_k u_k^T
  //       + K_b A_j0 / n^2 W W^T + sum_k (a_k H(l_k) + b H(theta_k)),
  //   U = sum_k l_k u_k, W = sum_k w_k
  // (d2E_s/dA_k dA_m = K_s (1/n^2 + delta_km / n), d2E_b/dtheta_k dtheta_m = K_b A_j0 / n^2).
  const auto n = static_cast<size_t>(network_.nodeCount);
  for (size_t j = 0; j < n; ++j) {
    const auto begin = static_cast<size_t>(network_.centreOffsets[j]);
    const auto end = static_cast<size_t>(network_.centreOffsets[j + 1]);
    std::vector<int32_t> local;
    for (size_t f = begin; f < end; ++f) {
      if ((network_.flags[f] & kFiberActive) == 0) continue;
      for (int s = 0; s < 3; ++s)
        local.push_back(network_.fiberNodes[3 * f + static_cast<size_t>(s)]);
    }
    if (local.empty()) continue;
    std::sort(local.begin(), local.end());
    local.erase(std::unique(local.begin(), local.end()), local.end());
    const auto dim = static_cast<Eigen::Index>(3 * local.size());
    const auto localIndex = [&](int32_t node) {
      return static_cast<Eigen::Index>(std::lower_bound(local.begin(), local.end(), node) -
                                       local.begin());
    };
    const Vec3 normal = row(normals_, j);
    struct FiberTerms {
      double length, angle;
      Vec3 lengthGrad[3], angleGrad[3];
      fiber::Mat9 lengthHess, angleHess;
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
      t.length = fiber::fiberArcLength(xs, samples_, t.lengthGrad, &t.lengthHess);
      t.angle = fiber::fiberTangentAngle(xs, normal, t.angleGrad, &t.angleHess);
      sumArea += kPi / 4 * t.length * t.length;
      sumAngle += t.angle;
      terms.push_back(t);
    }
    const double count = static_cast<double>(terms.size());
    const double areaError = sumArea / count - restArea_[j];
    const double angleError = sumAngle / count - restMeanAngle_[j];
    const double ks = stretchK_[j];
    const double kb = bendK_[j] * restArea_[j];
    const double dEdAngle = kb * angleError / count;
    Eigen::MatrixXd h = Eigen::MatrixXd::Zero(dim, dim);
    Eigen::VectorXd sumU = Eigen::VectorXd::Zero(dim), sumW = Eigen::VectorXd::Zero(dim);
    size_t fiberIndex = begin;
    for (const FiberTerms& t : terms) {
      while ((network_.flags[fiberIndex] & kFiberActive) == 0) ++fiberIndex;
      const double restLength = network_.restLength[fiberIndex++];
      const double areaChange = kPi / 4 * (t.length * t.length - restLength * restLength);
      const double sigma = ks / count * (areaError + areaChange);
      const double dEdLength = sigma * kPi / 2 * t.length;
      Eigen::VectorXd u = Eigen::VectorXd::Zero(dim), w = Eigen::VectorXd::Zero(dim);
      for (int s = 0; s < 3; ++s) {
        u.segment<3>(3 * t.slots[s]) += t.lengthGrad[s];
        w.segment<3>(3 * t.slots[s]) += t.angleGrad[s];
      }
      sumU += t.length * u;
      sumW += w;
      h += (ks * (kPi / 2) * (kPi / 2) * t.length * t.length / count + sigma * kPi / 2) * u *
           u.transpose();
      const fiber::Mat9 own = dEdLength * t.lengthHess + dEdAngle * t.angleHess;
      for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < 3; ++b) {
          h.block<3, 3>(3 * t.slots[a], 3 * t.slots[b]) += own.block<3, 3>(3 * a, 3 * b);
        }
      }
    }
    h += ks * (kPi / 2) * (kPi / 2) / (count * count) * sumU * sumU.transpose();
    h += kb / (count * count) * sumW * sumW.transpose();
    for (Eigen::Index a = 0; a < dim; ++a) {
      for (Eigen::Index b = 0; b < dim; ++b) {
        triplets.emplace_back(static_cast<int>(3 * local[static_cast<size_t>(a / 3)] + a % 3),
                              static_cast<int>(3 * local[static_cast<size_t>(b / 3)] + b % 3),
                              h(a, b));
      }
    }
  }
  return true;
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
    evaluate(plus, restNormals_, gp, nullptr);
    evaluate(minus, restNormals_, gm, nullptr);
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
    g.triangles = triangles_;
    computeVertexNormals(g);
  } else {
    g.normals = normals_;
  }
  return g;
}

size_t FiberModel::memoryBytes() const {
  const auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return bytes(network_.fiberNodes) + bytes(network_.centreOffsets) + bytes(network_.restLength) +
         bytes(network_.restAngle) + bytes(network_.flags) + bytes(network_.incidence.offsets) +
         bytes(network_.incidence.entries) + bytes(triangles_) + bytes(mass_) + bytes(stretchK_) +
         bytes(bendK_) + bytes(restArea_) + bytes(restMeanAngle_) + bytes(restPositions_) +
         bytes(restNormals_) + bytes(normals_) + bytes(rotations_) + bytes(patchOffsets_) +
         bytes(patchNodes_) + bytes(fiberGradient_) + bytes(nodeStretch_) + bytes(nodeBend_);
}

}  // namespace shellsim
