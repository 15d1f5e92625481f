// The fiber model's Hessian: exact 3x3 node blocks of the energy of each centre node's
// fibers (FiberModel::hessianBlocks; proved against finite differences in the tests).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numbers>

#include "models/fiber/fiber_kernel.hpp"
#include "models/fiber/fiber_model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

using fiber::Mat3;
constexpr double kPi = std::numbers::pi;
constexpr size_t kNodeGrain = 256;

}  // namespace

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

}  // namespace shellsim
