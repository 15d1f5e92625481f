// Hessians of the discrete-shell stencils; the derivations are in discrete_shell_kernel.hpp.
#include "models/discrete_shell/discrete_shell_kernel.hpp"

#include <numbers>

#include "core/lane_gather.hpp"

namespace shellsim::discrete_shell {
namespace {

using Mat3x12 = Eigen::Matrix<double, 3, 12>;

}  // namespace

double edgeEnergyHessian(double stiffness, double restLength, const Vec3 (&x)[2], Vec3 (&g)[2],
                         Mat6& hessian) {
  const double energy = edgeEnergy(stiffness, restLength, x, g);
  const Vec3 d = x[1] - x[0];
  const double length = d.norm();
  if (!(length > 0)) {
    hessian.setZero();
    return energy;
  }
  const Vec3 u = d / length;
  const Mat3 uu = u * u.transpose();
  const Mat3 h = stiffness * (uu + (1.0 - restLength / length) * (Mat3::Identity() - uu));
  hessian.topLeftCorner<3, 3>() = h;
  hessian.bottomRightCorner<3, 3>() = h;
  hessian.topRightCorner<3, 3>() = -h;
  hessian.bottomLeftCorner<3, 3>() = -h;
  return energy;
}

double triangleEnergyHessian(double stiffness, double restArea, const Vec3 (&x)[3], Vec3 (&g)[3],
                             Mat9& hessian) {
  const double energy = triangleEnergy(stiffness, restArea, x, g);
  const Vec3 n = (x[1] - x[0]).cross(x[2] - x[0]);
  const double norm = n.norm();
  if (!(norm > 0)) {
    hessian.setZero();
    return energy;
  }
  const Vec3 nh = n / norm;
  const double excess = 0.5 * norm - restArea;
  const Mat3 projector = Mat3::Identity() - nh * nh.transpose();
  Mat3 jacobian[3];  // J_i = [e_i]x
  Eigen::Matrix<double, 9, 1> areaGradient;
  for (int i = 0; i < 3; ++i) {
    const Vec3 opposite = x[(i + 2) % 3] - x[(i + 1) % 3];  // e_i
    jacobian[i] = crossMatrix(opposite);
    areaGradient.segment<3>(3 * i) = 0.5 * nh.cross(opposite);
  }
  Mat9 areaHessian;
  const Mat3 nhSkew = crossMatrix(nh);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      Mat3 block = (0.5 / norm) * jacobian[i].transpose() * projector * jacobian[j];
      if (j == (i + 1) % 3) block -= 0.5 * nhSkew;
      if (i == (j + 1) % 3) block += 0.5 * nhSkew;
      areaHessian.block<3, 3>(3 * i, 3 * j) = block;
    }
  }
  hessian = stiffness * (areaGradient * areaGradient.transpose() + excess * areaHessian);
  return energy;
}

double dihedralAngleHessian(const Vec3 (&x)[4], Vec3 (&g)[4], Mat12& hessian) {
  const double theta = dihedralAngleGradient(x, g);
  const Vec3 e = x[1] - x[0];
  const Vec3 fA = x[2] - x[0];
  const Vec3 fB = x[3] - x[0];
  const Vec3 nA = e.cross(fA);
  const Vec3 nB = fB.cross(e);
  const double ee = e.squaredNorm();
  const double nA2 = nA.squaredNorm();
  const double nB2 = nB.squaredNorm();
  if (!(nA2 > 0) || !(nB2 > 0) || !(ee > 0)) {
    hessian.setZero();
    return theta;
  }
  const double eLen = std::sqrt(ee);
  const Mat3 identity = Mat3::Identity();
  Mat3x12 de = Mat3x12::Zero(), dfA = Mat3x12::Zero(), dfB = Mat3x12::Zero();
  de.block<3, 3>(0, 0) = -identity;
  de.block<3, 3>(0, 3) = identity;
  dfA.block<3, 3>(0, 0) = -identity;
  dfA.block<3, 3>(0, 6) = identity;
  dfB.block<3, 3>(0, 0) = -identity;
  dfB.block<3, 3>(0, 9) = identity;
  const Mat3x12 dnA = -crossMatrix(fA) * de + crossMatrix(e) * dfA;
  const Mat3x12 dnB = -crossMatrix(e) * dfB + crossMatrix(fB) * de;
  const Eigen::Matrix<double, 1, 12> dLen = (e / eLen).transpose() * de;  // d|e|
  const Vec3 vA = (eLen / nA2) * nA;
  const Vec3 vB = (eLen / nB2) * nB;
  const Mat3x12 dvA =
      (nA / nA2) * dLen + (eLen / nA2) * (identity - (2 / nA2) * nA * nA.transpose()) * dnA;
  const Mat3x12 dvB =
      (nB / nB2) * dLen + (eLen / nB2) * (identity - (2 / nB2) * nB * nB.transpose()) * dnB;
  const double sA = fA.dot(e) / ee;
  const double sB = fB.dot(e) / ee;
  const Eigen::Matrix<double, 1, 12> dsA =
      (e.transpose() * dfA + (fA - 2 * sA * e).transpose() * de) / ee;
  const Eigen::Matrix<double, 1, 12> dsB =
      (e.transpose() * dfB + (fB - 2 * sB * e).transpose() * de) / ee;
  hessian.block<3, 12>(0, 0) = -vA * dsA + (1 - sA) * dvA - vB * dsB + (1 - sB) * dvB;
  hessian.block<3, 12>(3, 0) = vA * dsA + sA * dvA + vB * dsB + sB * dvB;
  hessian.block<3, 12>(6, 0) = -dvA;
  hessian.block<3, 12>(9, 0) = -dvB;
  hessian = 0.5 * (hessian + hessian.transpose()).eval();
  return theta;
}

// GCC keeps to 256-bit vectors by default even where the target has 512-bit ones; the eight
// lanes fit one 512-bit register (measured ~20% faster for the whole force evaluation on a
// Xeon with AVX-512). No effect on targets without AVX-512; not a clang attribute.
#if defined(__GNUC__) && !defined(__clang__)
#define SHELLSIM_PREFER_512 __attribute__((target("prefer-vector-width=512")))
#else
#define SHELLSIM_PREFER_512
#endif

namespace {

// The lane loop of hingeEdgeEnergyLanes; inlined into both entry points.
inline __attribute__((always_inline)) void hingeEdgeLanes(
    const double* __restrict x, const double* __restrict parameters, double* __restrict bending,
    double* __restrict stretching, double* __restrict gradient, double* __restrict shape) {
  constexpr double kPi = std::numbers::pi;
  // Plain loops over lanes with selects instead of branches: GCC vectorizes them (and
  // needs -fno-math-errno for the square root, set on the library target).
  for (int l = 0; l < kLanes; ++l) {
    const auto p = [&](int slot, int axis) { return x[(slot * 3 + axis) * kLanes + l]; };
    double e[3], fA[3], fB[3];
    for (int i = 0; i < 3; ++i) {
      e[i] = p(1, i) - p(0, i);
      fA[i] = p(2, i) - p(0, i);
      fB[i] = p(3, i) - p(0, i);
    }
    // nA = e x fA, nB = fB x e (header comment).
    const double nA[3] = {e[1] * fA[2] - e[2] * fA[1], e[2] * fA[0] - e[0] * fA[2],
                          e[0] * fA[1] - e[1] * fA[0]};
    const double nB[3] = {fB[1] * e[2] - fB[2] * e[1], fB[2] * e[0] - fB[0] * e[2],
                          fB[0] * e[1] - fB[1] * e[0]};
    const double ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
    const double nA2 = nA[0] * nA[0] + nA[1] * nA[1] + nA[2] * nA[2];
    const double nB2 = nB[0] * nB[0] + nB[1] * nB[1] + nB[2] * nB[2];
    const double nAfB = nA[0] * fB[0] + nA[1] * fB[1] + nA[2] * fB[2];
    const double nAnB = nA[0] * nB[0] + nA[1] * nB[1] + nA[2] * nB[2];
    const double fAe = fA[0] * e[0] + fA[1] * e[1] + fA[2] * e[2];
    const double fBe = fB[0] * e[0] + fB[1] * e[1] + fB[2] * e[2];
    const double eLen = std::sqrt(ee);
    const double theta = atan2Poly(-nAfB * eLen, nAnB);  // as dihedralAngle
    shape[l] = theta;
    shape[kLanes + l] = eLen;
    // One division: r = 1 / (|nA|^2 |nB|^2 |e|^2), each factor replaced by 1 where it is 0.
    // (Comparisons and the arms of selects unconditional: GCC does not if-convert an
    // operation that only some paths evaluate, as it could trap.)
    const double nn = nA2 * nB2;
    const bool eOk = ee > 0;
    const bool nnOk = nn > 0;
    const double nnSafe = nnOk ? nn : 1.0;
    const double eeSafe = eOk ? ee : 1.0;
    const double r = 1.0 / (nnSafe * eeSafe);
    const double nnR = nnSafe * r;
    const double eeR = eeSafe * r;
    const double invEE = eOk ? nnR : 0.0;  // 1 / |e|^2
    double invNN = eOk ? eeR : 0.0;        // 1 / (|nA|^2 |nB|^2)
    invNN = nnOk ? invNN : 0.0;
    // d = wrap(theta - theta0), |theta - theta0| < 2 pi.
    const double difference = theta - parameters[l];
    const double below = difference - 2 * kPi;
    const double above = difference + 2 * kPi;
    const double d = difference > kPi ? below : (difference < -kPi ? above : difference);
    const double k = parameters[kLanes + l];
    bending[l] = 0.5 * k * d * d;
    // Edge: E = 1/2 k_e (l - L)^2, dE/dx1 = k_e (l - L) / l e = -dE/dx0.
    const double stretch = eLen - parameters[2 * kLanes + l];
    stretching[l] = 0.5 * parameters[3 * kLanes + l] * stretch * stretch;
    const double edgeScale = parameters[3 * kLanes + l] * stretch * eLen * invEE;
    // k d dtheta: vA = |e| nA / |nA|^2, sA = fA . e / |e|^2 (same for B), then
    // g0 = (1 - sA) vA + (1 - sB) vB, g1 = sA vA + sB vB, g2 = -vA, g3 = -vB.
    const double kd = k * d;
    const double cA = kd * eLen * nB2 * invNN;  // k d |e| / |nA|^2
    const double cB = kd * eLen * nA2 * invNN;
    const double sA = fAe * invEE;
    const double sB = fBe * invEE;
    for (int i = 0; i < 3; ++i) {
      const double vA = cA * nA[i];
      const double vB = cB * nB[i];
      const double ge = edgeScale * e[i];
      gradient[(0 * kLanes + l) * 3 + i] = (1 - sA) * vA + (1 - sB) * vB - ge;
      gradient[(1 * kLanes + l) * 3 + i] = sA * vA + sB * vB + ge;
      gradient[(2 * kLanes + l) * 3 + i] = -vA;
      gradient[(3 * kLanes + l) * 3 + i] = -vB;
    }
  }
}

}  // namespace

SHELLSIM_PREFER_512 void hingeEdgeEnergyLanes(
    const double* __restrict x, const double* __restrict parameters, double* __restrict bending,
    double* __restrict stretching, double* __restrict gradient, double* __restrict shape) {
  hingeEdgeLanes(x, parameters, bending, stretching, gradient, shape);
}

SHELLSIM_PREFER_512 void hingeEdgeEnergyBatches(
    const double* __restrict xs, const int32_t* __restrict offsets,
    const double* __restrict parameters, int64_t batches, bool mayReachEnd,
    double* __restrict bending, double* __restrict stretching, double* __restrict gradient) {
  static_assert(kLanes == kGatherLanes);
  double laneBending[kLanes], laneStretching[kLanes], shape[2 * kLanes];
  forEachGatheredBatch<4>(
      xs, offsets, batches,
      mayReachEnd, [&](int64_t b, const double* positions) __attribute__((always_inline)) {
        hingeEdgeLanes(positions, parameters + 4 * kLanes * b, laneBending, laneStretching,
                       gradient + 12 * kLanes * b, shape);
        for (int l = 0; l < kLanes; ++l) {
          bending[l] += laneBending[l];
          stretching[l] += laneStretching[l];
        }
      });
}

namespace {

// The lane loop of triangleEnergyLanes; inlined into both entry points.
inline __attribute__((always_inline)) void triangleLanes(const double* __restrict x,
                                                         const double* __restrict parameters,
                                                         double* __restrict energy,
                                                         double* __restrict gradient,
                                                         double* __restrict area) {
  for (int l = 0; l < kLanes; ++l) {
    const auto p = [&](int slot, int axis) { return x[(slot * 3 + axis) * kLanes + l]; };
    double e[3][3];  // e_i, the edge opposite x_i: x2 - x1, x0 - x2, x1 - x0
    for (int i = 0; i < 3; ++i) {
      e[0][i] = p(2, i) - p(1, i);
      e[1][i] = p(0, i) - p(2, i);
      e[2][i] = p(1, i) - p(0, i);
    }
    // n = (x1 - x0) x (x2 - x0) = e_2 x (-e_1)
    const double n[3] = {e[1][1] * e[2][2] - e[1][2] * e[2][1],
                         e[1][2] * e[2][0] - e[1][0] * e[2][2],
                         e[1][0] * e[2][1] - e[1][1] * e[2][0]};
    const double norm = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    const double k = parameters[l];
    area[l] = 0.5 * norm;
    const double excess = area[l] - parameters[kLanes + l];
    energy[l] = 0.5 * k * excess * excess;
    // dE/dx_i = k (A - A0) 1/2 nh x e_i = c n x e_i, c = k (A - A0) / (2 |n|) (0 if n = 0).
    const double normSafe = norm > 0 ? norm : 1.0;
    const double c = norm > 0 ? 0.5 * k * excess / normSafe : 0.0;
    const double m[3] = {c * n[0], c * n[1], c * n[2]};
    for (int v = 0; v < 3; ++v) {
      double* g = gradient + 3 * (v * kLanes + l);
      g[0] = m[1] * e[v][2] - m[2] * e[v][1];
      g[1] = m[2] * e[v][0] - m[0] * e[v][2];
      g[2] = m[0] * e[v][1] - m[1] * e[v][0];
    }
  }
}

}  // namespace

SHELLSIM_PREFER_512 void triangleEnergyLanes(const double* __restrict x,
                                             const double* __restrict parameters,
                                             double* __restrict energy, double* __restrict gradient,
                                             double* __restrict area) {
  triangleLanes(x, parameters, energy, gradient, area);
}

SHELLSIM_PREFER_512 void triangleEnergyBatches(const double* __restrict xs,
                                               const int32_t* __restrict offsets,
                                               const double* __restrict parameters, int64_t batches,
                                               bool mayReachEnd, double* __restrict energy,
                                               double* __restrict gradient) {
  double laneEnergy[kLanes], area[kLanes];
  forEachGatheredBatch<3>(
      xs, offsets, batches,
      mayReachEnd, [&](int64_t b, const double* positions) __attribute__((always_inline)) {
        triangleLanes(positions, parameters + 2 * kLanes * b, laneEnergy, gradient + 9 * kLanes * b,
                      area);
        for (int l = 0; l < kLanes; ++l) energy[l] += laneEnergy[l];
      });
}

double hingeEnergyHessian(double stiffness, double restAngle, const Vec3 (&x)[4], Vec3 (&g)[4],
                          Mat12& hessian) {
  const double theta = dihedralAngleHessian(x, g, hessian);
  const double d = wrapAngle(theta - restAngle);
  Eigen::Matrix<double, 12, 1> grad;
  for (int i = 0; i < 4; ++i) grad.segment<3>(3 * i) = g[i];
  hessian = stiffness * (grad * grad.transpose() + d * hessian);
  for (Vec3& v : g) v *= stiffness * d;
  return 0.5 * stiffness * d * d;
}

}  // namespace shellsim::discrete_shell
