// atan2 without branches or library calls, so that a loop over a batch of angles
// vectorizes (libm's atan2 is a call per value and was ~22% of a discrete-shell force
// evaluation). Within 2 ulp of std::atan2 for finite arguments (measured in
// tests/models/test_atan2.cpp).
//
// Reduction. With a = |x|, b = |y|, lo = min(a, b), hi = max(a, b) the angle
// phi = atan(lo / hi) is in [0, pi/4]. Where r = lo / hi > tan(pi/8),
//     atan(r) = pi/4 + atan((r - 1) / (r + 1)) = pi/4 + atan((lo - hi) / (lo + hi)),
// so one division gives t with |t| <= tan(pi/8) = 0.41421 and phi = k0 pi/4 + atan(t),
// k0 in {0, 1}. On that interval
//     atan(t) = t + t s P(s),   s = t^2 <= tan^2(pi/8) = 0.17157,
// P of degree 10 interpolating (atan(sqrt s) / sqrt s - 1) / s at the 11 Chebyshev nodes of
// [0, tan^2(pi/8)] (computed with mpmath at 60 digits, coefficients rounded to double): the
// polynomial's error relative to atan(t) is below 7e-18 (0.06 ulp); the rest is rounding.
// Quadrants. b > a: pi/2 - phi; then x < 0 (its sign bit, so that x = -0 counts):
// pi - that; then the sign of y. Together the angle is k pi/4 + sign atan(t), k in 0..4,
// added as k (pi/4)_hi + (k (pi/4)_lo + sign atan(t)): (pi/4)_hi, pi/4 rounded to double,
// ends in three zero bits, so k (pi/4)_hi is exact.
// Special values as std::atan2: atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi,
// atan2(y != 0, +-0) = +-pi/2. Arguments must be finite with |x| + |y| finite (an infinite
// argument or an overflowing sum gives NaN or a wrong angle); NaN in, NaN out.
// atanLanes(y) is atan2Poly(y, 1) = atan(y) on 8 lanes (simd_lanes.hpp), the same operations
// but for the reduction's division, a reciprocal (reciprocalLanes) times the numerator.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/simd_lanes.hpp"

namespace shellsim {

namespace atan2_detail {
inline constexpr double kPiOver4Hi = 0x1.921fb54442d18p-1;   // pi/4 rounded; last 3 bits zero
inline constexpr double kPiOver4Lo = 0x1.1a62633145c07p-55;  // pi/4 - kPiOver4Hi
inline constexpr double kTanPiOver8 = 0.41421356237309503;
// P(s) from the lowest degree up.
inline constexpr double kP[11] = {-0.3333333333333333,  0.1999999999999552,   -0.14285714284666542,
                                  0.11111111015256361,  -0.09090904578123903, 0.07692183190826087,
                                  -0.06664511447381948, 0.0585814891280221,   -0.0508544973794026,
                                  0.03923165829558719,  -0.01917688711906226};

// t + t s P(s), s = t^2, by Estrin's scheme (depth 5 instead of Horner's 10 dependent
// multiply-adds), written out: a loop here can stay a loop and stop the caller's
// vectorization.
template <class T>
inline T atanOfReduced(T t) {
  const T s = t * t;
  const T s2 = s * s;
  const T s4 = s2 * s2;
  const T s8 = s4 * s4;
  const T q01 = kP[0] + kP[1] * s;
  const T q23 = kP[2] + kP[3] * s;
  const T q45 = kP[4] + kP[5] * s;
  const T q67 = kP[6] + kP[7] * s;
  const T q89 = kP[8] + kP[9] * s;
  const T q03 = q01 + q23 * s2;
  const T q47 = q45 + q67 * s2;
  const T q8a = q89 + kP[10] * s2;
  const T p = (q03 + q47 * s4) + q8a * s8;
  return t + t * s * p;
}
}  // namespace atan2_detail

inline double atan2Poly(double y, double x) {
  using namespace atan2_detail;
  const double a = std::fabs(x);
  const double b = std::fabs(y);
  const bool swapped = b > a;
  const double lo = swapped ? a : b;
  const double hi = swapped ? b : a;
  const bool reduced = lo > kTanPiOver8 * hi;
  // Every arm of every select is computed unconditionally: GCC does not if-convert an
  // operation that only some paths evaluate (it could trap), and then does not vectorize.
  // hi = 0 only for x = y = 0: t = 0 / 1.
  const double difference = lo - hi;
  const double sum = lo + hi;
  const double hiSafe = hi > 0 ? hi : 1.0;
  const double t = (reduced ? difference : lo) / (reduced ? sum : hiSafe);
  double atanT = atanOfReduced(t);
  // Selects, not branches (and std::signbit would stop GCC 12 from vectorizing).
  double k = reduced ? 1.0 : 0.0;
  const double kSwapped = 2.0 - k;
  k = swapped ? kSwapped : k;  // pi/2 - phi
  atanT = swapped ? -atanT : atanT;
  const bool negativeX = std::copysign(1.0, x) < 0;
  const double kNegative = 4.0 - k;
  k = negativeX ? kNegative : k;  // pi - that
  atanT = negativeX ? -atanT : atanT;
  const double angle = k * kPiOver4Hi + (k * kPiOver4Lo + atanT);
  return std::copysign(angle, y);
}

// atan2Poly(y, 1) lane by lane: x = 1 > 0, so hi >= 1 and no quadrant flip for x.
inline Lanes atanLanes(Lanes y) {
  using namespace atan2_detail;
  using Bits = int64_t __attribute__((vector_size(sizeof(Lanes))));
  constexpr int64_t kSign = INT64_MIN;
  const Lanes one = broadcast(1.0);
  const Lanes b = (Lanes)((Bits)y & ~kSign);  // |y|
  const auto swapped = b > one;
  const Lanes lo = swapped ? one : b;
  const Lanes hi = swapped ? b : one;
  const auto reduced = lo > kTanPiOver8 * hi;
  // The denominator is >= 1: a Newton reciprocal instead of a division (a few ulp).
  const Lanes t = (reduced ? lo - hi : lo) * reciprocalLanes(reduced ? lo + hi : hi);
  Lanes atanT = atanOfReduced(t);
  Lanes k = reduced ? one : Lanes{};
  k = swapped ? 2.0 - k : k;
  atanT = swapped ? -atanT : atanT;
  const Lanes angle = k * kPiOver4Hi + (k * kPiOver4Lo + atanT);
  return (Lanes)(((Bits)angle & ~kSign) | ((Bits)y & kSign));  // copysign(angle, y)
}

}  // namespace shellsim
