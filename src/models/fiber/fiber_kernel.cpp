// Hessians and node-coordinate wrappers of the fiber kernel; the derivation is in
// fiber_kernel.hpp.
#include "models/fiber/fiber_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace shellsim::fiber {

namespace {

// out[k] = 1 / sqrt(x[k]) for k < count (a multiple of 8), 0 where x[k] is 0 (x >= 0).
// With AVX-512: vrsqrt14pd (relative error < 2^-14) and two Newton steps
// y <- y (3/2 - x/2 y^2) (error < 2^-27, then a few ulp), no division or square root; an x
// below the smallest normal double (1e-308, i.e. a sample speed below 1e-154 m) counts as
// 0. Otherwise 1 / std::sqrt(x), vectorized by the compiler, with the same cut-off.
void inverseSqrt(const double* __restrict x, double* __restrict out, int count) {
#if defined(__AVX512F__)
  const __m512d half = _mm512_set1_pd(0.5);
  const __m512d threeHalves = _mm512_set1_pd(1.5);
  const __m512d smallest = _mm512_set1_pd(std::numeric_limits<double>::min());
  for (int k = 0; k < count; k += 8) {
    const __m512d value = _mm512_load_pd(x + k);
    const __m512d halfValue = _mm512_mul_pd(half, value);
    __m512d y = _mm512_rsqrt14_pd(value);
    for (int step = 0; step < 2; ++step) {
      const __m512d yy = _mm512_mul_pd(y, y);
      y = _mm512_mul_pd(y, _mm512_fnmadd_pd(halfValue, yy, threeHalves));
    }
    const __mmask8 normal = _mm512_cmp_pd_mask(value, smallest, _CMP_GE_OQ);
    _mm512_store_pd(out + k, _mm512_maskz_mov_pd(normal, y));
  }
#else
  // The division runs on every lane and the zero is selected after it: a division inside
  // a conditional would keep the compiler from vectorizing (it may not trap where the
  // source would not divide).
  constexpr double kSmallest = std::numeric_limits<double>::min();
  for (int k = 0; k < count; ++k) {
    const double inverse = 1.0 / std::sqrt(std::max(x[k], kSmallest));
    out[k] = x[k] >= kSmallest ? inverse : 0.0;
  }
#endif
}

}  // namespace

void evaluateBatch(FiberBatch& b, const int count, const int samples, const bool wantGradient) {
  // Every loop below runs over the lanes k with no dependence between lanes; the arrays are
  // distinct members of one struct, so the compiler vectorizes them without alias checks.
  // (This file is compiled with -fno-math-errno so that sqrt vectorizes.)
  const double invN = 1.0 / samples;
  constexpr double kEps2 = kSpeedSmoothing * kSpeedSmoothing;
  constexpr int kLanes = FiberBatch::kLanes;
  // The gradient needs only three sums of the samples' inverse speeds r_-+ = 1/|v_-+|_eps:
  // with u_-+ = r_-+ (e -+ a_i q),
  //   sum (u_- + u_+) = S0 e + S1 q,   sum a_i (u_+ - u_-) = S1 e + S2 q,
  //   S0 = sum (r_- + r_+),  S1 = sum a_i (r_+ - r_-),  S2 = sum a_i^2 (r_- + r_+),
  // so dl/de = (1/n) ((1 + eps^2) S0 e + S1 q) (the eps^2 S0 e from the smoothing) and
  // dl/dq = (1/n) (S1 e + S2 q): per sample three scalars instead of two 3-vectors.
  alignas(64) double floor2[kLanes];      // eps^2 |e|^2
  alignas(64) double sums[3][kLanes];     // S0, S1, S2
  alignas(64) double speed2[2][kLanes];   // |v_-|^2 + floor2, |v_+|^2 + floor2
  alignas(64) double inverse[2][kLanes];  // r_-, r_+
  for (int k = 0; k < count; ++k) {
    floor2[k] = kEps2 * (b.e[0][k] * b.e[0][k] + b.e[1][k] * b.e[1][k] + b.e[2][k] * b.e[2][k]);
    b.length[k] = sums[0][k] = sums[1][k] = sums[2][k] = 0;
  }
  // Arc length: arcLength's sum over samples, sample by sample for all lanes, with
  // |v|_eps = |v|_eps^2 r and r from inverseSqrt.
  for (int i = 0; i < samples; ++i) {
    const double s = (i + 0.5) * invN;
    const double a = kTangentWeight * (1.0 - s * s);  // = sampleWeight(i, samples)
    for (int k = 0; k < count; ++k) {
      double nMinus = floor2[k], nPlus = floor2[k];
      for (int c = 0; c < 3; ++c) {
        const double vMinus = b.e[c][k] - a * b.q[c][k];  // f1'(s_i)
        const double vPlus = b.e[c][k] + a * b.q[c][k];   // f2'(1 - s_i)
        nMinus += vMinus * vMinus;
        nPlus += vPlus * vPlus;
      }
      speed2[0][k] = nMinus;
      speed2[1][k] = nPlus;
    }
    inverseSqrt(speed2[0], inverse[0], count);
    inverseSqrt(speed2[1], inverse[1], count);
    for (int k = 0; k < count; ++k) {
      const double rMinus = inverse[0][k];
      const double rPlus = inverse[1][k];
      b.length[k] += speed2[0][k] * rMinus + speed2[1][k] * rPlus;
      sums[0][k] += rMinus + rPlus;
      sums[1][k] += a * (rPlus - rMinus);
      sums[2][k] += (a * a) * (rMinus + rPlus);
    }
  }
  for (int k = 0; k < count; ++k) {
    b.length[k] *= invN;
    const double s0 = invN * (1.0 + kEps2) * sums[0][k];
    const double s1 = invN * sums[1][k];
    const double s2 = invN * sums[2][k];
    for (int c = 0; c < 3; ++c) {
      b.lengthE[c][k] = s0 * b.e[c][k] + s1 * b.q[c][k];
      b.lengthQ[c][k] = s1 * b.e[c][k] + s2 * b.q[c][k];
    }
  }

  // Tangential angle: angleTerms and tangentAngle, lane by lane, with 1/s from inverseSqrt
  // and each quotient by |e|^2 taken as a product with its inverse.
  alignas(64) double s2[FiberBatch::kLanes];
  alignas(64) double invS[FiberBatch::kLanes];
  for (int k = 0; k < count; ++k) {
    const double ee = b.e[0][k] * b.e[0][k] + b.e[1][k] * b.e[1][k] + b.e[2][k] * b.e[2][k];
    const double eN =
        b.e[0][k] * b.normal[0][k] + b.e[1][k] * b.normal[1][k] + b.e[2][k] * b.normal[2][k];
    s2[k] = std::max(ee - eN * eN, 1e-24 * ee);
  }
  inverseSqrt(s2, invS, count);
  constexpr double kBeta = kTangentWeight;
  alignas(64) double angleU[kLanes];      // u = y / (2 |e|^2)
  alignas(64) double angleInvEE[kLanes];  // 1 / |e|^2, 0 for e = 0
  for (int k = 0; k < count; ++k) {
    // The value and gradient loops each load e, q, N and form the dot products themselves:
    // moved into a helper returning a struct, GCC 12 stopped vectorizing both loops
    // (BM_FiberForces side 158, 1 thread: 7.7 ms -> 12.5 ms per evaluation).
    const double e[3] = {b.e[0][k], b.e[1][k], b.e[2][k]};
    const double q[3] = {b.q[0][k], b.q[1][k], b.q[2][k]};
    const double n[3] = {b.normal[0][k], b.normal[1][k], b.normal[2][k]};
    const double eN = e[0] * n[0] + e[1] * n[1] + e[2] * n[2];
    const double qe = q[0] * e[0] + q[1] * e[1] + q[2] * e[2];
    const double qN = q[0] * n[0] + q[1] * n[1] + q[2] * n[2];
    const double ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
    const double yNum = eN * qe - ee * qN;  // Y
    // s > 0 exactly when ee > 0 (s^2 >= 1e-24 |e|^2); invS is 0 otherwise.
    const bool valid = ee > 0;
    const double inverseEE = 1.0 / (valid ? ee : 1.0);  // unconditional, see inverseSqrt
    const double invEE = valid ? inverseEE : 0.0;
    const double u = 0.5 * (2.0 * kBeta * invS[k] * yNum) * invEE;
    angleU[k] = u;
    angleInvEE[k] = invEE;
    b.angle[k] = 2.0 * atan2Poly(u, 1.0);
  }
  if (!wantGradient) return;
  for (int k = 0; k < count; ++k) {
    const double e[3] = {b.e[0][k], b.e[1][k], b.e[2][k]};
    const double q[3] = {b.q[0][k], b.q[1][k], b.q[2][k]};
    const double n[3] = {b.normal[0][k], b.normal[1][k], b.normal[2][k]};
    const double eN = e[0] * n[0] + e[1] * n[1] + e[2] * n[2];
    const double qe = q[0] * e[0] + q[1] * e[1] + q[2] * e[2];
    const double qN = q[0] * n[0] + q[1] * n[1] + q[2] * n[2];
    const double ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
    const double yNum = eN * qe - ee * qN;  // Y
    const double invEE = angleInvEE[k];
    const double k1 = 2.0 * kBeta * invS[k];
    const double y = k1 * yNum;
    const double u = angleU[k];
    // dtheta = c du, c = 2 / (1 + u^2), du = dy / (2 |e|^2) - y / |e|^4 (e, 0);
    // dy/de = 2 beta (dY/de / s - Y P e / s^3), dy/dq = 2 beta dY/dq / s,
    // dy/dN = 2 beta (dY/dN / s + Y (e.N) e / s^3). Invalid lanes have invS = invEE = 0.
    const double c = 2.0 / (1.0 + u * u);
    const double half = 0.5 * c * invEE;          // c / (2 |e|^2)
    const double alongE = c * y * invEE * invEE;  // c y / |e|^4
    const double k2 = yNum * invS[k] * invS[k];
    for (int d = 0; d < 3; ++d) {
      const double dYde = qe * n[d] + eN * q[d] - 2.0 * qN * e[d];
      const double dYdq = eN * e[d] - ee * n[d];
      const double dYdn = qe * e[d] - ee * q[d];
      const double projectedE = e[d] - eN * n[d];  // P e
      b.angleE[d][k] = half * (k1 * (dYde - k2 * projectedE)) - alongE * e[d];
      b.angleQ[d][k] = half * (k1 * dYdq);
      b.angleN[d][k] = half * (k1 * (dYdn + k2 * eN * e[d]));
    }
  }
}

Mat6 arcLengthHessianReduced(const Reduced& z, int samples) {
  // l~ = (1/n) sum |w|, w = (e -+ a_i q, eps e):  d2|w|/dw2 = (I - w^ w^T)/|w| with
  // w^ = (u, r); dw/d(e, q) = [[I, -+a_i I], [eps I, 0]] (fiber_kernel.hpp).
  Mat6 h = Mat6::Zero();
  const double invN = 1.0 / samples;
  const double eps = kSpeedSmoothing;
  const double floor2 = eps * eps * z.e.squaredNorm();
  const Mat3 identity = Mat3::Identity();
  for (int i = 0; i < samples; ++i) {
    const double a = sampleWeight(i, samples);
    for (const double sign : {-1.0, 1.0}) {
      const Vec3 v = z.e + sign * a * z.q;
      const double length = std::sqrt(v.squaredNorm() + floor2);
      if (!(length > 0)) continue;
      const Vec3 u = v / length;
      const Vec3 r = (eps / length) * z.e;
      const double w = invN / length;
      const Mat3 hvv = w * (identity - u * u.transpose());
      const Mat3 hrv = -w * (r * u.transpose());  // rows: the eps e part, cols: v
      const Mat3 hrr = w * (identity - r * r.transpose());
      const Mat3 hev = hvv + eps * hrv;  // d2/de dv along dw/de = (I, eps I)
      h.topLeftCorner<3, 3>() += hev + eps * (hrv.transpose() + eps * hrr);
      h.topRightCorner<3, 3>() += sign * a * hev;
      h.bottomLeftCorner<3, 3>() += sign * a * hev.transpose();
      h.bottomRightCorner<3, 3>() += a * a * hvv;
    }
  }
  return h;
}

Mat6 tangentAngleHessianReduced(const Reduced& z, const Vec3& normal) {
  return tangentAngleHessianWithNormal(z, normal).topLeftCorner<6, 6>();
}

Mat9 tangentAngleHessianWithNormal(const Reduced& z, const Vec3& normal) {
  using Vec9 = Eigen::Matrix<double, 9, 1>;
  constexpr double kBeta = kTangentWeight;
  const AngleTerms t = angleTerms(z, normal);
  if (!(t.ee > 0) || !(t.s > 0)) return Mat9::Zero();
  const Mat3 identity = Mat3::Identity();
  const Vec3& e = z.e;
  const Vec3& q = z.q;
  const Vec3& n = normal;

  // Y = (e.N)(q.e) - |e|^2 (q.N): gradient and Hessian over (e, q, N).
  Vec9 dY;
  dY << t.qe * n + t.eN * q - 2.0 * t.qN * e, t.eN * e - t.ee * n, t.qe * e - t.ee * q;
  Mat9 hY = Mat9::Zero();
  hY.block<3, 3>(0, 0) = n * q.transpose() + q * n.transpose() - 2.0 * t.qN * identity;
  hY.block<3, 3>(0, 3) = n * e.transpose() + t.eN * identity - 2.0 * e * n.transpose();
  hY.block<3, 3>(6, 0) = e * q.transpose() + t.qe * identity - 2.0 * q * e.transpose();
  hY.block<3, 3>(6, 3) = e * e.transpose() - t.ee * identity;
  hY.block<3, 3>(3, 0) = hY.block<3, 3>(0, 3).transpose();
  hY.block<3, 3>(0, 6) = hY.block<3, 3>(6, 0).transpose();
  hY.block<3, 3>(3, 6) = hY.block<3, 3>(6, 3).transpose();

  // g = 1/s = (s^2)^(-1/2), s^2 = |e|^2 - (e.N)^2.
  const Vec3 pe = e - t.eN * n;
  const double g = 1.0 / t.s;
  const double g3 = g * g * g;
  Vec9 dS2 = Vec9::Zero();
  dS2.head<3>() = 2.0 * pe;
  dS2.tail<3>() = -2.0 * t.eN * e;
  Mat9 hS2 = Mat9::Zero();
  hS2.block<3, 3>(0, 0) = 2.0 * (identity - n * n.transpose());
  hS2.block<3, 3>(6, 0) = -2.0 * (e * n.transpose() + t.eN * identity);  // rows N, cols e
  hS2.block<3, 3>(0, 6) = hS2.block<3, 3>(6, 0).transpose();
  hS2.block<3, 3>(6, 6) = -2.0 * e * e.transpose();
  const Vec9 dg = -0.5 * g3 * dS2;
  const Mat9 hg = -0.5 * g3 * hS2 + 0.75 * g3 * g * g * dS2 * dS2.transpose();

  // y = 2 beta Y g.
  const Vec9 dy = 2.0 * kBeta * (g * dY + t.yNum * dg);
  const Mat9 hy = 2.0 * kBeta * (g * hY + dY * dg.transpose() + dg * dY.transpose() + t.yNum * hg);

  // u = y / (2 |e|^2), theta = 2 atan(u).
  const double ee = t.ee;
  Vec9 dEE = Vec9::Zero();
  dEE.head<3>() = 2.0 * e;
  Mat9 hu = hy / (2.0 * ee) - (dy * dEE.transpose() + dEE * dy.transpose()) / (2.0 * ee * ee) +
            t.y * dEE * dEE.transpose() / (ee * ee * ee);
  hu.block<3, 3>(0, 0) -= t.y / (ee * ee) * identity;  // - y H(|e|^2) / (2 |e|^4)
  const Vec9 du = dy / (2.0 * ee) - t.y / (2.0 * ee * ee) * dEE;
  const double onePlus = 1.0 + t.u * t.u;
  return 2.0 / onePlus * hu - 4.0 * t.u / (onePlus * onePlus) * du * du.transpose();
}

Mat9 expandReducedHessian(const Mat6& h) {
  // z = J p with J = [[-1/2 I, 0, 1/2 I], [I, -2 I, I]] (rows e, q; columns p1, p, p2).
  Eigen::Matrix<double, 6, 9> j = Eigen::Matrix<double, 6, 9>::Zero();
  const Mat3 identity = Mat3::Identity();
  j.block<3, 3>(0, 0) = -0.5 * identity;
  j.block<3, 3>(0, 6) = 0.5 * identity;
  j.block<3, 3>(3, 0) = identity;
  j.block<3, 3>(3, 3) = -2.0 * identity;
  j.block<3, 3>(3, 6) = identity;
  return j.transpose() * h * j;
}

double fiberArcLength(const Vec3 x[3], int samples, Vec3 gradient[3], Mat9* hessian) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  Vec3 ge, gq;
  const double length = arcLength(z, samples, gradient != nullptr ? &ge : nullptr,
                                  gradient != nullptr ? &gq : nullptr);
  if (gradient != nullptr) {
    for (int slot = 0; slot < 3; ++slot) gradient[slot] = fiberSlotGradient(slot, ge, gq);
  }
  if (hessian != nullptr) *hessian = expandReducedHessian(arcLengthHessianReduced(z, samples));
  return length;
}

double fiberTangentAngle(const Vec3 x[3], const Vec3& normal, Vec3 gradient[3], Mat9* hessian) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  Vec3 ge, gq;
  const double theta = tangentAngle(z, normal, gradient != nullptr ? &ge : nullptr,
                                    gradient != nullptr ? &gq : nullptr);
  if (gradient != nullptr) {
    for (int slot = 0; slot < 3; ++slot) gradient[slot] = fiberSlotGradient(slot, ge, gq);
  }
  if (hessian != nullptr) *hessian = expandReducedHessian(tangentAngleHessianReduced(z, normal));
  return theta;
}

Vec3 splinePoint(const Vec3 x[3], double t) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  if (t < 0.5) {
    // f1(s) = a1 + b1 s + d1 s^3, a1 = p1, b1 = e - 3/4 q, d1 = q/4   (eq. (31), (32))
    const double s = 2.0 * t;
    return x[0] + s * (z.e - kTangentWeight * z.q) + (0.25 * s * s * s) * z.q;
  }
  // f2(s) = a2 + b2 s + c2 s^2 + d2 s^3, a2 = p, b2 = e, c2 = 3/4 q, d2 = -q/4
  const double s = 2.0 * (t - 0.5);
  return x[1] + s * z.e + (0.75 * s * s - 0.25 * s * s * s) * z.q;
}

Vec3 splineDerivative(const Vec3 x[3], double t) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  if (t < 0.5) {
    const double s = 2.0 * t;
    return 2.0 * (z.e - kTangentWeight * (1.0 - s * s) * z.q);
  }
  const double s = 2.0 * (t - 0.5);
  return 2.0 * (z.e + kTangentWeight * (1.0 - (1.0 - s) * (1.0 - s)) * z.q);
}

}  // namespace shellsim::fiber
