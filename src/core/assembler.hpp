// One assembler for every stencil model (DESIGN.md principle 2 and 5).
//
// A stencil is a fixed-size group of K nodes (spring K=2, fiber K=3, hinge K=4) whose
// kernel is a pure function of the K node positions returning its energy and gradient.
// Assembly runs in two parallel passes that never share a write:
//   pass 1, per element: kernel -> elementEnergy[e], elementGradient[e][k][0..2]
//   pass 2, per node:    gradient[n] += sum of elementGradient over the node's incidences,
//                        visited in ascending (element, slot) order (even and odd
//                        entries in two partial sums).
// The energy is summed with a deterministic blocked reduction. Every floating-point sum
// therefore happens in an order independent of the thread count, so results are
// bit-identical for 1 or N threads.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/partitioner.h>

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/vec3.hpp"

#if defined(__AVX512F__) && defined(__AVX512VL__)
#include <immintrin.h>
#endif

namespace shellsim {

// Node -> incident (element, slot) pairs in CSR form, sorted by element then slot.
struct Incidence {
  std::vector<int32_t> offsets;  // (nNodes + 1): node n owns entries[offsets[n], offsets[n+1])
  std::vector<int32_t> entries;  // (nElements * K): element * K + slot
};

// elementNodes has shape (nElements, K) for any K: entry i is element i / K, slot i % K.
// Throws nothing; indices must be in [0, nNodes).
inline Incidence buildIncidence(std::span<const int32_t> elementNodes, int32_t nodeCount) {
  Incidence incidence;
  incidence.offsets.assign(static_cast<size_t>(nodeCount) + 1, 0);
  for (int32_t node : elementNodes) ++incidence.offsets[static_cast<size_t>(node) + 1];
  for (size_t n = 0; n < static_cast<size_t>(nodeCount); ++n) {
    incidence.offsets[n + 1] += incidence.offsets[n];
  }
  incidence.entries.resize(elementNodes.size());
  std::vector<int32_t> cursor(incidence.offsets.begin(), incidence.offsets.end() - 1);
  // Visiting entries in increasing flat index keeps each node's list sorted.
  for (size_t i = 0; i < elementNodes.size(); ++i) {
    incidence.entries[static_cast<size_t>(cursor[static_cast<size_t>(elementNodes[i])]++)] =
        static_cast<int32_t>(i);
  }
  return incidence;
}

// Grain size of the parallel loops: fixed, so the reduction tree does not depend on
// the scheduler.
inline constexpr size_t kAssemblyGrain = 1024;
// Nodes per task of the gather pass. Each node's sum has a fixed order whatever the tasks,
// so this grain only balances the load: ~3,400 nodes in tasks of 1,024 left one of two
// threads with 2,048 of them.
inline constexpr size_t kGatherGrain = 256;

// Sums values[0..n) with a fixed reduction tree (deterministic for any thread count).
inline double deterministicSum(std::span<const double> values) {
  return tbb::parallel_deterministic_reduce(
      tbb::blocked_range<size_t>(0, values.size(), kAssemblyGrain), 0.0,
      [&](const tbb::blocked_range<size_t>& r, double sum) {
        for (size_t i = r.begin(); i != r.end(); ++i) sum += values[i];
        return sum;
      },
      [](double a, double b) { return a + b; }, tbb::simple_partitioner());
}

// Pass 2 (any layout of the per-element gradients): for every node n, in parallel,
//   gradient[n] += sum over n's incidence entries i, in a fixed order, of
//                  (slots[o], slots[o + kStride], slots[o + 2 kStride]),  o = kScale * i.
// kScale = 3, kStride = 1 for the (nElements, K, 3) layout of assembleEnergyGradient; a
// layout in lanes (batches of L elements, (nBatches, K, L, 3)) stores the offsets o
// themselves as entries and uses kScale = 1, kStride = 1.
template <size_t kScale, size_t kStride>
void gatherIncidentGradients(const Incidence& incidence, std::span<const double> slots,
                             std::span<double> gradient) {
  const size_t nodeCount = incidence.offsets.size() - 1;
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, nodeCount, kGatherGrain),
      [&](const tbb::blocked_range<size_t>& r) {
        const int32_t* entries = incidence.entries.data();
        const double* source = slots.data();
        for (size_t n = r.begin(); n != r.end(); ++n) {
          int32_t i = incidence.offsets[n];
          const int32_t end = incidence.offsets[n + 1];
#if defined(__AVX512F__) && defined(__AVX512VL__)
          if constexpr (kStride == 1) {
            // A slot's (x, y, z) side by side: one masked 256-bit load and add per entry
            // instead of three scalar ones; the same additions in the same order.
            __m256d even = _mm256_setzero_pd(), odd = _mm256_setzero_pd();
            for (; i + 1 < end; i += 2) {
              even = _mm256_add_pd(
                  even,
                  _mm256_maskz_loadu_pd(0x7, source + kScale * static_cast<size_t>(entries[i])));
              odd = _mm256_add_pd(odd,
                                  _mm256_maskz_loadu_pd(
                                      0x7, source + kScale * static_cast<size_t>(entries[i + 1])));
            }
            if (i < end) {
              even = _mm256_add_pd(
                  even,
                  _mm256_maskz_loadu_pd(0x7, source + kScale * static_cast<size_t>(entries[i])));
            }
            double* out = gradient.data() + 3 * n;
            _mm256_mask_storeu_pd(
                out, 0x7, _mm256_add_pd(_mm256_maskz_loadu_pd(0x7, out), _mm256_add_pd(even, odd)));
            continue;
          }
#endif
          // Two partial sums (even and odd entries) halve the chain of dependent
          // additions; the order is still fixed.
          double even[3] = {0, 0, 0}, odd[3] = {0, 0, 0};
          for (; i + 1 < end; i += 2) {
            const double* a = source + kScale * static_cast<size_t>(entries[i]);
            const double* b = source + kScale * static_cast<size_t>(entries[i + 1]);
            for (size_t c = 0; c < 3; ++c) {
              even[c] += a[c * kStride];
              odd[c] += b[c * kStride];
            }
          }
          if (i < end) {
            const double* a = source + kScale * static_cast<size_t>(entries[i]);
            for (size_t c = 0; c < 3; ++c) even[c] += a[c * kStride];
          }
          for (size_t c = 0; c < 3; ++c) gradient[3 * n + c] += even[c] + odd[c];
        }
      });
}

// Scratch buffers of one assembly, kept between calls to avoid reallocations.
struct AssemblyScratch {
  std::vector<double> elementEnergy;    // (nElements)
  std::vector<double> elementGradient;  // (nElements, K, 3)
};

// Evaluates `kernel(e, const Vec3 (&x)[K], Vec3 (&g)[K]) -> double` on every element and
// returns the total energy; when `gradient` is non-empty (shape (nNodes, 3)) the element
// gradients are added into it.
template <int K, class Kernel>
double assembleEnergyGradient(std::span<const int32_t> elementNodes, const Incidence& incidence,
                              std::span<const double> positions, std::span<double> gradient,
                              AssemblyScratch& scratch, const Kernel& kernel) {
  const size_t elementCount = elementNodes.size() / K;
  const bool wantGradient = !gradient.empty();
  scratch.elementEnergy.resize(elementCount);
  if (wantGradient) scratch.elementGradient.resize(elementCount * K * 3);

  tbb::parallel_for(tbb::blocked_range<size_t>(0, elementCount, kAssemblyGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      Vec3 x[K];
                      Vec3 g[K];
                      for (size_t e = r.begin(); e != r.end(); ++e) {
                        for (int k = 0; k < K; ++k) {
                          const size_t node = static_cast<size_t>(elementNodes[e * K + k]);
                          x[k] = Vec3(positions[3 * node], positions[3 * node + 1],
                                      positions[3 * node + 2]);
                        }
                        scratch.elementEnergy[e] = kernel(e, x, g);
                        if (wantGradient) {
                          double* out = &scratch.elementGradient[e * K * 3];
                          for (int k = 0; k < K; ++k) {
                            out[3 * k] = g[k].x();
                            out[3 * k + 1] = g[k].y();
                            out[3 * k + 2] = g[k].z();
                          }
                        }
                      }
                    });

  if (wantGradient) gatherIncidentGradients<3, 1>(incidence, scratch.elementGradient, gradient);
  return deterministicSum(scratch.elementEnergy);
}

// Hessians of K-node stencils as 3x3 node blocks (Model::hessianBlocks): element e owns
// the K^2 blocks (a, b), a, b < K, in that order, block (a, b) coupling nodes
// elementNodes[eK + a] (rows) and elementNodes[eK + b] (columns).
//   stencilBlockNodes: appends their node pairs, shape (nElements K^2, 2);
//   stencilHessianBlocks: `kernel(e, const Vec3 (&x)[K], Vec3 (&g)[K], Matrix<3K, 3K>& h)`
//     fills element e's Hessian h, written to values[(e K^2 + a K + b) 9 ..] row-major,
//     in parallel; every element writes its own slots, so the values do not depend on the
//     thread count.
// The node pairs (nodes[a], nodes[b]) of one dense Hessian over `nodes`, appended in
// block order (a, b); writeNodeBlocks writes its values in the same order.
inline void appendNodePairs(std::span<const int32_t> nodes, std::vector<int32_t>& pairs) {
  for (const int32_t a : nodes) {
    for (const int32_t b : nodes) {
      pairs.push_back(a);
      pairs.push_back(b);
    }
  }
}

// Writes the 3x3 node blocks of h (3m x 3m, m nodes) in block order (a, b), each row-major,
// from out on; returns the end.
template <class Matrix>
double* writeNodeBlocks(const Matrix& h, double* out) {
  const Eigen::Index nodes = h.rows() / 3;
  for (Eigen::Index a = 0; a < nodes; ++a) {
    for (Eigen::Index b = 0; b < nodes; ++b) {
      for (Eigen::Index i = 0; i < 3; ++i) {
        for (Eigen::Index j = 0; j < 3; ++j) *out++ = h(3 * a + i, 3 * b + j);
      }
    }
  }
  return out;
}

template <int K>
void stencilBlockNodes(std::span<const int32_t> elementNodes, std::vector<int32_t>& pairs) {
  const size_t count = elementNodes.size() / K;
  pairs.reserve(pairs.size() + 2 * K * K * count);
  for (size_t e = 0; e < count; ++e) appendNodePairs(elementNodes.subspan(e * K, K), pairs);
}

template <int K, class Kernel>
void stencilHessianBlocks(std::span<const int32_t> elementNodes, std::span<const double> positions,
                          std::span<double> values, const Kernel& kernel) {
  const size_t count = elementNodes.size() / K;
  constexpr size_t kPerElement = 9 * K * K;
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 256), [&](const tbb::blocked_range<size_t>& r) {
        Vec3 x[K];
        Vec3 g[K];
        Eigen::Matrix<double, 3 * K, 3 * K> h;
        for (size_t e = r.begin(); e != r.end(); ++e) {
          for (int k = 0; k < K; ++k) {
            x[k] =
                row(positions, static_cast<size_t>(elementNodes[e * K + static_cast<size_t>(k)]));
          }
          kernel(e, x, g, h);
          writeNodeBlocks(h, values.data() + kPerElement * e);
        }
      });
}

}  // namespace shellsim
