// Hessians and node-coordinate wrappers of the fiber kernel; the derivation is in
// fiber_kernel.hpp.
#include "models/fiber/fiber_kernel.hpp"

#include <cmath>

#include "core/simd_lanes.hpp"

namespace shellsim::fiber {

namespace {

// evaluateBatch with kSamples samples per piece, or `runtimeSamples` for kSamples = 0. A
// constant count lets the compiler unroll the sample loops and keep every sample's speed and
// inverse speed in registers; a runtime count keeps them in memory (3% of the whole force
// pass at the default 4 samples, bench_fiber).
template <int kSamples>
void evaluateBatchWith(FiberBatch& b, const int count, const int runtimeSamples,
                       const bool wantGradient) {
  const int samples = kSamples > 0 ? kSamples : runtimeSamples;
  // Lanes (core/simd_lanes.hpp) of 8 fibers at a time, every intermediate in registers.
  const double invN = 1.0 / samples;
  constexpr double kEps2 = kSpeedSmoothing * kSpeedSmoothing;
  // Arc length: arcLength's sum over samples, 8 lanes at a time in registers, with
  // |v|_eps = |v|_eps^2 r and r = 1 / |v|_eps from inverseSqrtClampedLanes. The squared speeds come
  // from three dot products: |e -+ a q|^2 + eps^2 |e|^2 = (1 + eps^2) e.e -+ 2 a e.q + a^2 q.q;
  // the difference's rounding error, relative to |v|_eps^2, is about 1e-16 (e.e + a^2 q.q) /
  // |v|_eps^2, below 1e-9 while a^2 q.q < 1e1 e.e thanks to the floor eps^2 e.e (a fiber
  // whose ends nearly meet loses accuracy only in the samples at its hairpin).
  // The gradient needs only three sums of the samples' inverse speeds r_-+: with
  // u_-+ = r_-+ (e -+ a_i q),
  //   sum (u_- + u_+) = S0 e + S1 q,   sum a_i (u_+ - u_-) = S1 e + S2 q,
  //   S0 = sum (r_- + r_+),  S1 = sum a_i (r_+ - r_-),  S2 = sum a_i^2 (r_- + r_+),
  // so dl/de = (1/n) ((1 + eps^2) S0 e + S1 q) (the eps^2 S0 e from the smoothing) and
  // dl/dq = (1/n) (S1 e + S2 q): per sample three scalars instead of two 3-vectors.
  // a_i, a_i^2, 2 a_i of sample i (sampleWeight).
  double weight[kMaxSamples], weight2[kMaxSamples], twoWeight[kMaxSamples];
  for (int i = 0; i < samples; ++i) {
    const double s = (i + 0.5) * invN;
    weight[i] = kTangentWeight * (1.0 - s * s);
    weight2[i] = weight[i] * weight[i];
    twoWeight[i] = 2.0 * weight[i];
  }
  for (int k = 0; k < count; k += kLaneCount) {
    Lanes e[3], q[3];
    for (int c = 0; c < 3; ++c) {
      e[c] = loadLanes(&b.e[c][k]);
      q[c] = loadLanes(&b.q[c][k]);
    }
    const Lanes ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
    const Lanes eq = e[0] * q[0] + e[1] * q[1] + e[2] * q[2];
    const Lanes qq = q[0] * q[0] + q[1] * q[1] + q[2] * q[2];
    const Lanes smoothedEE = (1.0 + kEps2) * ee;
    // All samples' squared speeds and inverse speeds first, then the sums: the inverse square
    // roots are long chains, and independent ones overlap. A squared speed is >= eps^2 |e|^2
    // > 0 unless e = 0; then, with q = 0 too, the clamped inverse is finite and every term it
    // enters is multiplied by a zero (the speed^2 itself, e or q).
    Lanes speed2[2 * kMaxSamples], inverse[2 * kMaxSamples];
    for (int i = 0; i < samples; ++i) {
      const Lanes middle = smoothedEE + weight2[i] * qq;
      const Lanes cross = twoWeight[i] * eq;
      speed2[2 * i] = middle - cross;      // |f1'(s_i)|_eps^2
      speed2[2 * i + 1] = middle + cross;  // |f2'(1 - s_i)|_eps^2
    }
    for (int i = 0; i < 2 * samples; ++i) inverse[i] = inverseSqrtClampedLanes(speed2[i]);
    Lanes length{}, sum0{}, sum1{}, sum2{};
    for (int i = 0; i < samples; ++i) {
      const Lanes rMinus = inverse[2 * i];
      const Lanes rPlus = inverse[2 * i + 1];
      length += speed2[2 * i] * rMinus + speed2[2 * i + 1] * rPlus;
      const Lanes rSum = rMinus + rPlus;
      sum0 += rSum;
      sum1 += weight[i] * (rPlus - rMinus);
      sum2 += weight2[i] * rSum;
    }
    storeLanes(&b.length[k], invN * length);
    storeLanes(&b.lengthCoef[0][k], (invN * (1.0 + kEps2)) * sum0);
    storeLanes(&b.lengthCoef[1][k], invN * sum1);
    storeLanes(&b.lengthCoef[2][k], invN * sum2);
  }

  // Tangential angle: angleTerms and tangentAngle, 8 lanes at a time, with 1/s from
  // inverseSqrtLanes and each quotient taken as a product with a reciprocal (reciprocalLanes).
  constexpr double kBeta = kTangentWeight;
  for (int k = 0; k < count; k += kLaneCount) {
    Lanes e[3], q[3], n[3];
    for (int c = 0; c < 3; ++c) {
      e[c] = loadLanes(&b.e[c][k]);
      q[c] = loadLanes(&b.q[c][k]);
      n[c] = loadLanes(&b.normal[c][k]);
    }
    const Lanes eN = e[0] * n[0] + e[1] * n[1] + e[2] * n[2];
    const Lanes qe = q[0] * e[0] + q[1] * e[1] + q[2] * e[2];
    const Lanes qN = q[0] * n[0] + q[1] * n[1] + q[2] * n[2];
    const Lanes ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
    const Lanes yNum = eN * qe - ee * qN;  // Y
    const Lanes s2 = ee - eN * eN;
    const Lanes s2Floor = 1e-24 * ee;
    const Lanes invS = inverseSqrtLanes(s2 > s2Floor ? s2 : s2Floor);
    // s > 0 exactly when ee > 0 (s^2 >= 1e-24 |e|^2); invS is 0 otherwise.
    const auto valid = ee > 0.0;
    const Lanes inverseEE = reciprocalLanes(valid ? ee : 1.0);
    const Lanes invEE = valid ? inverseEE : 0.0;
    const Lanes k1 = 2.0 * kBeta * invS;
    const Lanes y = k1 * yNum;
    const Lanes u = 0.5 * y * invEE;
    // u goes into `angle` for the second loop.
    storeLanes(&b.angle[k], u);
    if (!wantGradient) continue;
    // dtheta = c du, c = 2 / (1 + u^2), du = dy / (2 |e|^2) - y / |e|^4 (e, 0);
    // dy/de = 2 beta (dY/de / s - Y P e / s^3), dy/dq = 2 beta dY/dq / s,
    // dy/dN = 2 beta (dY/dN / s + Y (e.N) e / s^3). With h = beta / (|e|^2 s) (= k1 / (4
    // |e|^2)), k2 = Y / s^2 and dY/de, dY/dq, dY/dN of fiber_kernel.hpp, collected on e, q, N:
    //   dtheta/de = c [h (q.e + k2 e.N) N + h (e.N) q - (h (2 q.N + k2) + y / |e|^4) e]
    //   dtheta/dq = c [h (e.N) e - h |e|^2 N],   dtheta/dN = c [h (q.e + k2 e.N) e - h |e|^2 q].
    // This loop stores the brackets' coefficients, the second multiplies them by c.
    // Invalid lanes have invS = invEE = 0, so h = y = 0.
    const Lanes h = (0.5 * invEE) * k1;
    const Lanes k2 = yNum * invS * invS;
    storeLanes(&b.angleCoef[0][k], h * (qe + k2 * eN));
    storeLanes(&b.angleCoef[1][k], h * eN);
    storeLanes(&b.angleCoef[2][k], -(h * (2.0 * qN + k2) + y * invEE * invEE));
    storeLanes(&b.angleCoef[3][k], -(h * ee));
  }
  // theta = 2 atan(u) and c = 2 / (1 + u^2). A loop of its own: the chain from e, q, N
  // through 1/s, u, the reduced argument's reciprocal and the polynomial is too long for the
  // out-of-order window to overlap consecutive lanes when it is one loop (llvm-mca, Ice Lake:
  // 107 cycles per 8 fibers against a throughput bound of 48).
  for (int k = 0; k < count; k += kLaneCount) {
    const Lanes u = loadLanes(&b.angle[k]);
    storeLanes(&b.angle[k], 2.0 * atanLanes(u));
    if (!wantGradient) continue;
    const Lanes c = 2.0 * reciprocalLanes(1.0 + u * u);
    for (int i = 0; i < 4; ++i) storeLanes(&b.angleCoef[i][k], c * loadLanes(&b.angleCoef[i][k]));
  }
}

}  // namespace

void evaluateBatch(FiberBatch& b, const int count, const int samples, const bool wantGradient) {
  switch (samples) {
    case 1: return evaluateBatchWith<1>(b, count, samples, wantGradient);
    case 2: return evaluateBatchWith<2>(b, count, samples, wantGradient);
    case 3: return evaluateBatchWith<3>(b, count, samples, wantGradient);
    case 4: return evaluateBatchWith<4>(b, count, samples, wantGradient);
    case 6: return evaluateBatchWith<6>(b, count, samples, wantGradient);
    case 8: return evaluateBatchWith<8>(b, count, samples, wantGradient);
    default: return evaluateBatchWith<0>(b, count, samples, wantGradient);
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
