// Lanes: 8 doubles as one value (GCC/Clang vector extension), for explicit lane-parallel code
// where the auto-vectorizer would not keep the values in registers (a loop over samples
// inside a loop over lanes, transposed loads and stores). With AVX-512 a Lanes is one zmm
// register; elsewhere the compiler splits it into smaller registers or scalars with the same
// results. Arithmetic operators, comparisons (giving integer lanes of 0 or -1) and the
// conditional operator (`mask ? a : b`) work lane by lane.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace shellsim {

inline constexpr int kLaneCount = 8;
using Lanes = double __attribute__((vector_size(sizeof(double) * kLaneCount)));

inline Lanes loadLanes(const double* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeLanes(double* p, Lanes v) {
  std::memcpy(p, &v, sizeof v);
}
inline Lanes broadcast(double a) {
  return Lanes{} + a;
}

#if defined(__AVX512F__)
namespace simd_detail {
// vrsqrt14pd (relative error < 2^-14) and two Newton steps y <- y (3/2 - x/2 y^2) (error
// < 2^-27, then a few ulp); inf for x = 0.
inline __m512d newtonInverseSqrt(__m512d value) {
  const __m512d halfValue = _mm512_mul_pd(_mm512_set1_pd(0.5), value);
  const __m512d threeHalves = _mm512_set1_pd(1.5);
  __m512d y = _mm512_rsqrt14_pd(value);
  for (int step = 0; step < 2; ++step) {
    const __m512d yy = _mm512_mul_pd(y, y);
    y = _mm512_mul_pd(y, _mm512_fnmadd_pd(halfValue, yy, threeHalves));
  }
  return y;
}
}  // namespace simd_detail
#endif

// 1 / sqrt(x) for x >= 0, 0 where x is below the smallest normal double (1e-308). With
// AVX-512: vrsqrt14pd (relative error < 2^-14) and two Newton steps y <- y (3/2 - x/2 y^2)
// (error < 2^-27, then a few ulp); no division or square root. Otherwise 1 / std::sqrt(x).
inline Lanes inverseSqrtLanes(Lanes x) {
  constexpr double kSmallest = std::numeric_limits<double>::min();
#if defined(__AVX512F__)
  const __m512d value = (__m512d)x;
  const __m512d y = simd_detail::newtonInverseSqrt(value);
  const __mmask8 normal = _mm512_cmp_pd_mask(value, _mm512_set1_pd(kSmallest), _CMP_GE_OQ);
  return (Lanes)_mm512_maskz_mov_pd(normal, y);
#else
  Lanes y;
  for (int lane = 0; lane < kLaneCount; ++lane) {
    y[lane] = x[lane] >= kSmallest ? 1.0 / std::sqrt(x[lane]) : 0.0;
  }
  return y;
#endif
}

// 1 / sqrt(max(x, 4 x the smallest normal double)): inverseSqrtLanes without its zero test,
// for callers whose x is positive except where every use of the result is multiplied by 0.
// The floor is 4 times the smallest normal so that the Newton steps' x/2 stays normal: at the
// smallest normal itself it is subnormal, and each lane with x = 0 (a fiber whose three nodes
// coincide) took a microcode assist; padding fibers made that way slowed the fiber force
// pass on a surface threefold.
inline Lanes inverseSqrtClampedLanes(Lanes x) {
  constexpr double kSmallest = 4 * std::numeric_limits<double>::min();
#if defined(__AVX512F__)
  return (Lanes)simd_detail::newtonInverseSqrt(
      _mm512_max_pd((__m512d)x, _mm512_set1_pd(kSmallest)));
#else
  Lanes y;
  for (int lane = 0; lane < kLaneCount; ++lane)
    y[lane] = 1.0 / std::sqrt(std::max(x[lane], kSmallest));
  return y;
#endif
}

// 1 / x for x > 0 of normal magnitude (the callers' denominators are >= 1 or checked).
// With AVX-512: vrcp14pd (relative error < 2^-14) and two Newton steps y <- y (2 - x y)
// (error < 2^-28, then a few ulp): a 512-bit division has a throughput of one per 16 cycles
// on Ice Lake, these five operations one per few. Otherwise 1 / x.
inline Lanes reciprocalLanes(Lanes x) {
#if defined(__AVX512F__)
  const __m512d value = (__m512d)x;
  const __m512d two = _mm512_set1_pd(2.0);
  __m512d y = _mm512_rcp14_pd(value);
  for (int step = 0; step < 2; ++step) y = _mm512_mul_pd(y, _mm512_fnmadd_pd(value, y, two));
  return (Lanes)y;
#else
  return 1.0 / x;
#endif
}

}  // namespace shellsim
