// The fiber stencil of Wicke, Steinemann and Gross 2005, "Efficient Animation of
// Point-Sampled Thin Shells" (wicke2005), Appendix A: a natural cubic spline through three
// nodes, its sampled arc length and its signed tangential angle, with exact gradients and
// Hessians. Pure functions of the three positions (and, for the angle, a reference normal
// held fixed while differentiating).
//
//            p1 o                       o p2          one fiber, K = 3 nodes:
//                 `- ._           _ .-'               slot 0 = p1 (end), slot 1 = p
//                        `-- o --'                    (centre), slot 2 = p2 (end)
//                            p
//                            |  N (reference normal at the centre)
//
// ---------------------------------------------------------------------------------------
// Reduced coordinates. Every quantity below depends on the three points only through
//     e = (p2 - p1) / 2          (the tangent at the centre, t_c = b2 of eq. (32))
//     q = p1 - 2 p + p2          (the second difference; 4 d1 = 4 c2 / 3 = q)
// so translations drop out exactly. The linear map z = (e, q) = J (p1, p, p2) has
//     de/dp1 = -1/2, de/dp = 0, de/dp2 = +1/2,    dq/dp1 = 1, dq/dp = -2, dq/dp2 = 1,
// and a gradient (g_e, g_q) w.r.t. z pulls back to the nodes as (fiberSlotGradient)
//     g_p1 = -g_e/2 + g_q,   g_p = -2 g_q,   g_p2 = g_e/2 + g_q;   Hessian: J^T H_z J.
// The three node gradients sum to zero for any (g_e, g_q): no net force.
//
// Spline, wicke2005 eq. (30)-(32). Substituting (32) into the derivatives of (31):
//     f1'(s) = b1 + 3 d1 s^2            = e - (3/4) q (1 - s^2),        s in [0, 1]
//     f2'(s) = b2 + 2 c2 s + 3 d2 s^2   = e + (3/4) q (1 - (1 - s)^2),  s in [0, 1]
// (derivatives w.r.t. each piece's own parameter s; the global t = s/2 or (1 + s)/2).
// f1(0) = p1, f1(1) = f2(0) = p, f2(1) = p2; f1' and f1'' (= 6 d1 s) match f2' and
// f2'' (= 2 c2 + 6 d2 s) at the centre; f1''(0) = f2''(1) = 0 (natural spline).
//
// Arc length, eq. (33). The printed rule samples f' at t = i/n on the whole fiber, while
// eq. (34) sums over both pieces at i/n: a left rule, which under-weights the ends. We use
// the composite MIDPOINT rule with `samples` = n points per piece, s_i = (i + 1/2)/n:
//     l~ = (1/n) sum_{i<n} ( |f1'(s_i)| + |f2'(s_i)| )
//        = (1/n) sum_{i<n} ( |e - a_i q| + |e + a_i q| ),   a_i = (3/4)(1 - s_i^2)
// (for piece 2, 1 - s_i = s_{n-1-i}, so the same a_i appear with a plus sign). It is
// symmetric under p1 <-> p2 and exact for straight fibers; its error is O(n^-2) against
// O(n^-1) for the left rule (tests/models/test_fiber.cpp measures both).
// Gradient: with v = e +- a q and u = v / |v|,
//     dl/de = (1/n) sum (u_- + u_+),   dl/dq = (1/n) sum a_i (u_+ - u_-)
// (the printed eq. (35)-(37) carry wrong polynomial coefficients; this is the truth).
// Hessian: d2|v|/dv2 = (I - u u^T) / |v|, and dv/d(e, q) = (I, +-a_i I).
// Smoothed samples. |v| is not differentiable at v = 0, and a compressed fiber folding into
// a hairpin passes through a sample with f' = 0: backward Euler's Newton iterates landed on
// that kink (a torn sheet, issue 4) and stalled. Each sample therefore uses
//     |v|_eps = |w|,  w = (v, eps e) in R^6,  eps = kSpeedSmoothing = 1e-3,
// smooth wherever e != 0, with a relative bias of sqrt(1 + eps^2) - 1 = 5e-7 on a straight
// fiber and less otherwise; the rest lengths are measured with the same rule, so rest
// states stay force free. With u = v / |w| and r = eps e / |w|:
//     dl/de = (1/n) sum (u_- + u_+ + eps r_- + eps r_+),   dl/dq as above,
//     d2|w|/dw2 = (I - w^ w^T) / |w|, w^ = (u, r), and dw/d(e, q) = [[I, +-a_i I], [eps I, 0]].
//
// Tangential angle, eq. (38). The printed sign(<N, f''>) * arccos(<t0, t1>/|t0||t1|) has an
// infinite derivative at theta = 0, i.e. on every straight fiber (the rest state of a flat
// sheet), and a sign that jumps. We measure instead the turning of the spline in the
// fiber's normal plane span(t_c, N): with t0 = f1'(0) = e - (3/4) q and t1 = f2'(1) =
// e + (3/4) q the end tangents, t_c = e, N the reference normal at the centre,
// b = (N x e) / |N x e| the bending axis and nu = b x e / |e| the in-plane "up" direction
// (N with its chord component removed, normalised), the tangents projected onto the normal
// plane are |e| e^ -+ beta (q.e^) e^ -+ beta (q.nu) nu. Dropping the chord components
// +-beta (q.e^) (an imbalance of the legs, a membrane effect: it turns a fiber whose centre
// slid past an end into a hairpin), the two tangents are |e| e^ -+ beta (q.nu) nu, which turn
// by exactly
//     theta = 2 atan( -beta (q.nu) / |e| ) = 2 atan( y / (2 |e|^2) ),   beta = 3/4,
//     y = <t0 x t1, b> = 2 beta <e x q, b> = -2 beta |e| (q.nu).
// theta is smooth wherever |N x e| > 0, lies in (-pi, pi) (a fold approaches +-pi and stays
// there: no branch cut to jump across) and is blind to kinks within the tangent plane (q
// along b) and along the chord. Earlier versions used atan2(y, <t0, t1>): a fiber kinked
// in-plane to an opening of 112.6 degrees, or whose centre slid past an end, reaches
// atan2's singular point x = y = 0, where forces blow up and theta jumps by up to 2 pi
// (a spot drop gained 20% of its energy in single steps this way).
// For y, Binet-Cauchy gives <e x q, N x e> = (e.N)(q.e) - |e|^2 (q.N), so, with
// s = |N x e| = sqrt(|e|^2 - (e.N)^2) for unit N,
//     y = 2 beta [ (e.N)(q.e) - |e|^2 (q.N) ] / s.
// SIGN: theta > 0 when the fiber bends AWAY from N (q.N < 0 for a fiber across a ridge),
// i.e. a sphere with outward normals has theta > 0 and the same sphere with inward normals
// (concave) theta < 0; a straight fiber, or one kinked within the tangent plane, has
// theta = 0.
// b depends on positions through t_c = e; that dependence is differentiated:
//     Y = (e.N)(q.e) - |e|^2 (q.N)
//     dY/de = (q.e) N + (e.N) q - 2 (q.N) e,     dY/dq = (e.N) e - |e|^2 N
//     ds/de = (e - (e.N) N) / s = P e / s,       P = I - N N^T
//     dy/de = 2 beta ( dY/de / s - Y P e / s^3 ),  dy/dq = 2 beta dY/dq / s
//     u = y / (2 |e|^2):  du = dy / (2 |e|^2) - y / |e|^4 (e, 0),  dtheta = 2 du / (1 + u^2).
// Second derivatives (used by the Hessian):
//     d2Y/de2 = N q^T + q N^T - 2 (q.N) I,   d2Y/de dq = N e^T + (e.N) I - 2 e N^T,
//     d2Y/dq2 = 0;   g = 1/s: dg/de = -P e / s^3, d2g/de2 = -P / s^3 + 3 (P e)(P e)^T / s^5
//     y = 2 beta Y g  ->  H_y = 2 beta (g H_Y + dY dg^T + dg dY^T + Y H_g)
//     with d(|e|^2) = (2 e, 0), H(|e|^2) = diag(2 I, 0):
//     H_u = H_y / (2|e|^2) - (dy d|e|^2^T + d|e|^2 dy^T) / (2 |e|^4)
//           + y d|e|^2 d|e|^2^T / |e|^6 - y H(|e|^2) / (2 |e|^4)
//     H_theta = 2 H_u / (1 + u^2) - 4 u du du^T / (1 + u^2)^2.
// The reference normal N is itself a function of the positions (fiber_model.hpp: the
// oriented best-fit plane of the centre's neighbourhood), so theta is also differentiated
// w.r.t. N, treated as a free 3-vector in the formulas above (N stays unit, so only the
// tangential part of these derivatives matters, and any extension off |N| = 1 gives it):
//     dY/dN = (q.e) e - |e|^2 q,     s^2 = |e|^2 - (e.N)^2,   d(s^2)/dN = -2 (e.N) e
//     dg/dN = g^3 (e.N) e,           dy/dN = 2 beta (g dY/dN + Y dg/dN),
//     dtheta/dN = 2 / (1 + u^2) dy/dN / (2 |e|^2)
// and for the Hessian over (e, q, N):
//     d2Y/dN de = e q^T + (q.e) I - 2 q e^T,   d2Y/dN dq = e e^T - |e|^2 I,   d2Y/dN2 = 0
//     d2g = -1/2 g^3 d2(s^2) + 3/4 g^5 d(s^2) d(s^2)^T with d(s^2) = (2 P e, 0, -2 (e.N) e),
//     d2(s^2)/de2 = 2 P,  d2(s^2)/dN de = -2 (e N^T + (e.N) I),  d2(s^2)/dN2 = -2 e e^T.
// Small-curvature limit: three points on a normal section of curvature kappa_n, spaced h
// along the chord, give theta = 2 atan(3/2 tan(phi/2)) for a circular arc of half-angle phi,
// i.e. theta ~ (3/4) kappa_n l: the natural spline's curvature is a hat function that
// vanishes at the ends, so its total turning is 3/4 of the circle's. The stiffness mapping
// in fiber_model.hpp uses this factor.
// Degenerate cases: when the chord e is parallel to N (s = 0) the direction b is undefined;
// s is clamped below by 1e-12 |e| so the values stay finite (the derivative is then not
// exact; the network never creates such fibers at rest). When both ends coincide (e = 0)
// theta = 0 with zero derivatives.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "core/atan2.hpp"
#include "core/vec3.hpp"

namespace shellsim::fiber {

using Mat3 = Eigen::Matrix3d;
using Mat6 = Eigen::Matrix<double, 6, 6>;
using Mat9 = Eigen::Matrix<double, 9, 9>;

inline constexpr double kTangentWeight = 0.75;  // beta: t0 = e - beta q, t1 = e + beta q
inline constexpr int kMaxSamples = 16;          // upper bound of `samples` per piece

// (e, q) of a fiber (p1, p, p2).
struct Reduced {
  Vec3 e;  // (p2 - p1) / 2, m
  Vec3 q;  // p1 - 2 p + p2, m
};

inline Reduced reduce(const Vec3& p1, const Vec3& p, const Vec3& p2) {
  return {0.5 * (p2 - p1), p1 - 2.0 * p + p2};
}

// Node gradient of slot 0, 1, 2 from a gradient (ge, gq) w.r.t. (e, q).
inline Vec3 fiberSlotGradient(int slot, const Vec3& ge, const Vec3& gq) {
  if (slot == 0) return -0.5 * ge + gq;
  if (slot == 1) return -2.0 * gq;
  return 0.5 * ge + gq;
}

// Midpoint-rule weights a_i = (3/4)(1 - s_i^2), s_i = (i + 1/2)/n; see the header comment.
inline double sampleWeight(int i, int samples) {
  const double s = (i + 0.5) / samples;
  return kTangentWeight * (1.0 - s * s);
}

// Smoothing of each sample's speed, |v|_eps = sqrt(|v|^2 + eps^2 |e|^2); see the header
// comment ("Smoothed samples"). Relative bias of a straight fiber: sqrt(1 + eps^2) - 1 = 5e-7.
inline constexpr double kSpeedSmoothing = 1e-3;

// Sampled arc length l~ (wicke2005 eq. (33), midpoint rule, `samples` points per piece,
// smoothed speeds) and, if dE/dQ are non-null, its gradient w.r.t. e and q.
inline double arcLength(const Reduced& z, int samples, Vec3* dE = nullptr, Vec3* dQ = nullptr) {
  const double invN = 1.0 / samples;
  const double floor2 = kSpeedSmoothing * kSpeedSmoothing * z.e.squaredNorm();
  double length = 0;
  double inverseSum = 0;  // sum of 1/|v|_eps, for the gradient of the eps^2 |e|^2 terms
  Vec3 ge = Vec3::Zero(), gq = Vec3::Zero();
  for (int i = 0; i < samples; ++i) {
    const double s = (i + 0.5) * invN;
    const double a = kTangentWeight * (1.0 - s * s);  // = sampleWeight(i, samples)
    const Vec3 vMinus = z.e - a * z.q;                // f1'(s_i)
    const Vec3 vPlus = z.e + a * z.q;                 // f2'(1 - s_i)
    const double nMinus = std::sqrt(vMinus.squaredNorm() + floor2);
    const double nPlus = std::sqrt(vPlus.squaredNorm() + floor2);
    length += nMinus + nPlus;
    if (dE != nullptr) {
      // A zero derivative (all three points coincident) contributes no gradient.
      const double rMinus = nMinus > 0 ? 1.0 / nMinus : 0.0;
      const double rPlus = nPlus > 0 ? 1.0 / nPlus : 0.0;
      const Vec3 uMinus = rMinus * vMinus;
      const Vec3 uPlus = rPlus * vPlus;
      ge += uMinus + uPlus;
      gq += a * (uPlus - uMinus);
      inverseSum += rMinus + rPlus;
    }
  }
  if (dE != nullptr) {
    *dE = invN * (ge + (kSpeedSmoothing * kSpeedSmoothing * inverseSum) * z.e);
    *dQ = invN * gq;
  }
  return invN * length;
}

// The pieces of theta = 2 atan(u), u = y / (2 |e|^2), and of their derivatives.
struct AngleTerms {
  double y;     // <t0 x t1, b>
  double u;     // y / (2 |e|^2)
  double s;     // |N x e| (clamped)
  double yNum;  // Y = (e.N)(q.e) - |e|^2 (q.N)
  double eN, qe, qN, ee;
};

inline AngleTerms angleTerms(const Reduced& z, const Vec3& normal) {
  AngleTerms t{};
  t.eN = z.e.dot(normal);
  t.qe = z.q.dot(z.e);
  t.qN = z.q.dot(normal);
  t.ee = z.e.squaredNorm();
  const double s2 = std::max(t.ee - t.eN * t.eN, 1e-24 * t.ee);
  t.s = std::sqrt(s2);
  t.yNum = t.eN * t.qe - t.ee * t.qN;
  constexpr double kBeta = kTangentWeight;
  t.y = t.s > 0 ? 2.0 * kBeta * t.yNum / t.s : 0.0;
  t.u = t.ee > 0 ? t.y / (2.0 * t.ee) : 0.0;
  return t;
}

// Signed tangential angle theta (our eq. (38), see the header comment), radians, and, if
// dE/dQ are non-null, its gradient w.r.t. e and q (and w.r.t. the normal if dN is non-null).
// `normal` is a unit vector.
inline double tangentAngle(const Reduced& z, const Vec3& normal, Vec3* dE = nullptr,
                           Vec3* dQ = nullptr, Vec3* dN = nullptr) {
  const AngleTerms t = angleTerms(z, normal);
  // atan2Poly (core/atan2.hpp) has no branches, so the batch loops vectorize through it;
  // the scalar kernel uses it too, so both measure the same theta.
  const double theta = 2.0 * atan2Poly(t.u, 1.0);
  if (dE != nullptr) {
    constexpr double kBeta = kTangentWeight;
    if (!(t.ee > 0) || !(t.s > 0)) {
      dE->setZero();
      dQ->setZero();
      if (dN != nullptr) dN->setZero();
      return theta;
    }
    const double invS = 1.0 / t.s;
    const Vec3 dYde = t.qe * normal + t.eN * z.q - 2.0 * t.qN * z.e;
    const Vec3 dYdq = t.eN * z.e - t.ee * normal;
    const Vec3 projectedE = z.e - t.eN * normal;  // P e
    const Vec3 dyde = 2.0 * kBeta * invS * (dYde - (t.yNum * invS * invS) * projectedE);
    const Vec3 dydq = 2.0 * kBeta * invS * dYdq;
    // dtheta = 2 / (1 + u^2) du,  du = dy / (2 |e|^2) - y / |e|^4 (e, 0)
    const double c = 2.0 / (1.0 + t.u * t.u);
    const double invEE = 1.0 / t.ee;
    *dE = c * (0.5 * invEE * dyde - t.y * invEE * invEE * z.e);
    *dQ = (c * 0.5 * invEE) * dydq;
    if (dN != nullptr) {
      // dy/dN = 2 beta (g dY/dN + Y dg/dN), dY/dN = (q.e) e - |e|^2 q, dg/dN = g^3 (e.N) e
      const Vec3 dYdn = t.qe * z.e - t.ee * z.q;
      const Vec3 dydn = 2.0 * kBeta * invS * (dYdn + (t.yNum * t.eN * invS * invS) * z.e);
      *dN = (c * 0.5 * invEE) * dydn;
    }
  }
  return theta;
}

// A batch of fibers in structure-of-arrays form, lane k = one fiber, for the force pass of
// fiber_model_eval.cpp: the same l~, theta and gradients as arcLength and tangentAngle (same
// formulas), evaluated 8 lanes at a time (core/simd_lanes.hpp). The rounding differs from
// the scalar functions: each sample's squared speed is formed from the dot products e.e, e.q,
// q.q (fiber_kernel.cpp), its |v|_eps is |v|_eps^2 r with r = 1/|v|_eps from one inverse
// square root (with AVX-512 an estimate and two Newton steps), and 1/s, 1/|e|^2 are
// multiplied instead of divided.
// The model therefore measures its rest lengths and angles with this code too (a lane's
// result does not depend on the other lanes or on wantGradient), so the rest state stays
// force free to the last bit. Every array is (3, kRow) or (kRow), of which lanes [0, kLanes)
// are used; the caller fills e, q, normal for lanes [0, count) and evaluateBatch fills the
// rest. `count` must be a multiple of kLaneMultiple with benign padding lanes (e.g.
// e = (1, 0, 0), q = 0, normal = (0, 0, 1)): their results are computed and ignored.
struct FiberBatch {
  static constexpr int kLanes = 256;  // 8 nodes x up to 32 fibers (fiber_model_eval.cpp)
  static constexpr int kLaneMultiple = 8;
  // Row length of every array: kLanes plus one cache line, so that the rows do not all start
  // at multiples of 2 KiB (they would share a few L1 sets and evict each other).
  static constexpr int kRow = kLanes + 8;
  alignas(64) double e[3][kRow];       // (e_x, e_y, e_z) per lane, m
  alignas(64) double q[3][kRow];       // m
  alignas(64) double normal[3][kRow];  // reference normal N of the centre, unit
  alignas(64) double length[kRow];     // l~, m
  alignas(64) double angle[kRow];      // theta, rad
  // The gradients as coefficients on e, q and N (lane by lane; 3 + 4 numbers instead of 15):
  //   dl~/de = L0 e + L1 q,            dl~/dq = L1 e + L2 q,
  //   dtheta/de = T2 e + T1 q + T0 N,  dtheta/dq = T1 e + T3 N,  dtheta/dN = T0 e + T3 q,
  // (L0, L1, L2) = lengthCoef, each 1/m; (T0, T1, T2, T3) = angleCoef, in 1/m, 1/m^2, 1/m^2,
  // 1/m.
  alignas(64) double lengthCoef[3][kRow];
  alignas(64) double angleCoef[4][kRow];
};

// Fills length, angle and (with wantGradient) their gradients of lanes [0, count).
void evaluateBatch(FiberBatch& batch, int count, int samples, bool wantGradient);

// 6x6 Hessians w.r.t. z = (e, q) (rows/cols 0-2: e, 3-5: q).
Mat6 arcLengthHessianReduced(const Reduced& z, int samples);
Mat6 tangentAngleHessianReduced(const Reduced& z, const Vec3& normal);
// 9x9 Hessian of theta w.r.t. (e, q, N) (rows/cols 0-2: e, 3-5: q, 6-8: N); its top-left
// 6x6 block is tangentAngleHessianReduced.
Mat9 tangentAngleHessianWithNormal(const Reduced& z, const Vec3& normal);

// The 9x9 Hessian w.r.t. (p1, p, p2) of a function with reduced Hessian h: J^T h J.
Mat9 expandReducedHessian(const Mat6& h);

// Convenience wrappers on the three node positions x = {p1, p, p2}: value, gradient
// (3 x Vec3, may be null) and Hessian (9x9 over (p1, p, p2), may be null).
double fiberArcLength(const Vec3 x[3], int samples, Vec3 gradient[3] = nullptr,
                      Mat9* hessian = nullptr);
double fiberTangentAngle(const Vec3 x[3], const Vec3& normal, Vec3 gradient[3] = nullptr,
                         Mat9* hessian = nullptr);

// The spline f(t), t in [0, 1], of eq. (30)-(32), and its derivative df/dt (for tests and
// for drawing fibers).
Vec3 splinePoint(const Vec3 x[3], double t);
Vec3 splineDerivative(const Vec3 x[3], double t);

}  // namespace shellsim::fiber
