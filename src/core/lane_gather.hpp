// Node positions of a batch of 8 stencils in structure-of-arrays form, for the lane kernels
// (a loop over 8 lanes that the compiler vectorizes): positions (K slots, 3 axes, 8 lanes)
// from the flat node positions xs (N, 3) and offsets (K slots, 8 lanes), the index in xs of
// each node's x, 3 n (stored so, it saves an address computation per node and lane).
//
// Why not a plain loop: GCC turns `positions[(3c + i) 8 + l] = xs[offsets[8c + l] + i]` into
// scalar loads, element inserts and partial stores, and the lane kernel's 512-bit loads of
// those partial stores then cannot be forwarded from the store buffer; hardware gathers
// (vgatherdpd) were slower still on our Xeon (a discrete-shell force evaluation took 290 us
// against 206 us with the plain loop). With AVX-512 the batch is gathered by 256-bit loads,
// one node (x, y, z, and a masked-off fourth value) each, and transposed in registers:
//   a_i = [node i | node i+4], i = 0..3                  (x y z 0 | x y z 0)
//   t0 = unpacklo(a0, a1) = [x0 x1 z0 z1 | x4 x5 z4 z5]
//   t1 = unpackhi(a0, a1) = [y0 y1 . . | y4 y5 . .]
//   t2, t3 the same from a2, a3 (nodes 2, 3, 6, 7)
//   x = permute2(t0, t2; 0 1 8 9 4 5 12 13)
//   z = permute2(t0, t2; 2 3 10 11 6 7 14 15)
//   y = permute2(t1, t3; 0 1 8 9 4 5 12 13)
// 11 shuffles and 8 loads per slot, and full-width stores the kernel's loads forward from.
// A node's 256-bit load reads one value past it, which for the array's last node lies past
// the end: kMayReachEnd = true masks that value off (never read); false, for batches known
// not to hold the last node, uses plain loads, which fold into the inserts (~2% of a
// discrete-shell force evaluation).
// The values are copied, not computed: both paths give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX512F__) && defined(__AVX512VL__)
#include <immintrin.h>
#endif

namespace shellsim {

inline constexpr int kGatherLanes = 8;

#if defined(__AVX512F__) && defined(__AVX512VL__)
// The transpose of 8 lanes' 4-vectors, rows[r][l] = lanes[l][r], by the scheme above (4
// inserts, 4 unpacks and one two-source permute per row; the compiler drops a row its caller
// does not use). Also used for other per-lane runs of 4 values (fiber_model_eval.cpp).
inline void transposeLanes(const __m256d (&lanes)[kGatherLanes], __m512d (&rows)[4]) {
  const __m512i evenPairs = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i oddPairs = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  __m512d a[4];  // lanes i and i + 4
  for (int i = 0; i < 4; ++i) {
    a[i] = _mm512_insertf64x4(_mm512_castpd256_pd512(lanes[i]), lanes[i + 4], 1);
  }
  const __m512d t0 = _mm512_unpacklo_pd(a[0], a[1]);  // rows 0, 2 of lanes 0, 1, 4, 5
  const __m512d t1 = _mm512_unpackhi_pd(a[0], a[1]);  // rows 1, 3
  const __m512d t2 = _mm512_unpacklo_pd(a[2], a[3]);  // rows 0, 2 of lanes 2, 3, 6, 7
  const __m512d t3 = _mm512_unpackhi_pd(a[2], a[3]);
  rows[0] = _mm512_permutex2var_pd(t0, evenPairs, t2);
  rows[1] = _mm512_permutex2var_pd(t1, evenPairs, t3);
  rows[2] = _mm512_permutex2var_pd(t0, oddPairs, t2);
  rows[3] = _mm512_permutex2var_pd(t1, oddPairs, t3);
}
#endif

template <int K, bool kMayReachEnd = true>
inline void gatherLanePositions(const double* __restrict xs, const int32_t* __restrict offsets,
                                double* __restrict positions) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
  const auto node = [xs](int32_t offset) {
    if constexpr (kMayReachEnd) {
      return _mm256_maskz_loadu_pd(0x7, xs + offset);
    } else {
      return _mm256_loadu_pd(xs + offset);
    }
  };
  for (int c = 0; c < K; ++c) {
    const int32_t* slot = offsets + kGatherLanes * c;
    __m256d lanes[kGatherLanes];
    for (int l = 0; l < kGatherLanes; ++l) lanes[l] = node(slot[l]);
    __m512d rows[4];  // x, y, z, and the unused fourth values
    transposeLanes(lanes, rows);
    double* out = positions + 3 * kGatherLanes * c;
    for (int i = 0; i < 3; ++i) _mm512_storeu_pd(out + i * kGatherLanes, rows[i]);
  }
#else
  for (int c = 0; c < K; ++c) {
    for (int i = 0; i < 3; ++i) {
      for (int l = 0; l < kGatherLanes; ++l) {
        positions[(3 * c + i) * kGatherLanes + l] =
            xs[static_cast<ptrdiff_t>(offsets[c * kGatherLanes + l]) + i];
      }
    }
  }
#endif
}

// For each of `batches` consecutive batches b (offsets (batches, K, 8)): gathers its
// positions and calls body(b, positions), positions (K, 3, 8). mayReachEnd as kMayReachEnd
// above, for all the batches; chosen once, outside the loop. In a hot loop, mark body
// __attribute__((always_inline)) as this loop is: the lane kernel must be inlined into the
// caller to be vectorized with the caller's target options (a lambda does not inherit
// them; without the attribute a discrete-shell force evaluation took 40% longer).
template <int K, class Body>
inline void forEachGatheredBatch(const double* __restrict xs, const int32_t* __restrict offsets,
                                 int64_t batches, bool mayReachEnd, Body&& body) {
  alignas(64) double positions[3 * K * kGatherLanes];
  const auto run = [&]<bool kMayReachEnd>() __attribute__((always_inline)) {
    for (int64_t b = 0; b < batches; ++b) {
      gatherLanePositions<K, kMayReachEnd>(xs, offsets + K * kGatherLanes * b, positions);
      body(b, static_cast<const double*>(positions));
    }
  };
  if (mayReachEnd) {
    run.template operator()<true>();
  } else {
    run.template operator()<false>();
  }
}

}  // namespace shellsim
