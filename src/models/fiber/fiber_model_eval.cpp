// The force pass of the fiber model (fiber_model.hpp, "Gradient"): the evaluation plan,
// the rest-shape measurement and FiberModel::evaluate.
//
// Layout. Nodes are taken in groups of kGroup = 8 consecutive nodes, one node per SIMD lane
// (a `Lanes` vector, core/simd_lanes.hpp, holds one value per node of the group). Group g has
// F_g fiber rows and P_g rows of nodes (fiber_model.hpp, the plan's members): row 0 the lane's
// node, rows 1 + s and 1 + F_g + s the ends of its fiber s, then other patch members. One
// gather of a row's positions (8 nodes, transposed in registers) feeds the patch frame
// f_a = sum_i c_ia x_i as 8-lane multiply-adds, and the fibers: fiber s of node 8 g + L is
// lane k = 8 s + L of a fiber::FiberBatch, so every per-node sum of eq. (4)-(8) is a sum of
// F_g vectors. On the way back each row takes one read-modify-write of the accumulator per
// lane: the member's frame share plus the row's end or centre terms. Rows past a node's own
// fibers or patch are padding: benign fibers with no energy, members of weight 0.
// Chunks of chunkNodeCount_ nodes (whole groups) are the parallel tasks; each works on a copy
// of the positions it touches ("local slots", fiber_model.hpp) and adds its force terms into
// a local accumulator in a fixed order, so the result does not depend on the thread count.
// Hardware gathers (vgatherdpd) are avoided: several times slower than loads and shuffles on
// our Xeon.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <span>

#include "core/lane_gather.hpp"
#include "core/simd_lanes.hpp"
#include "models/fiber/fiber_kernel.hpp"
#include "models/fiber/fiber_model.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace shellsim {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr int kGroup = kLaneCount;  // nodes per group, one per lane
static_assert(kGroup == kGatherLanes);
// A group's fibers, at most kMaxNeighbourCount per node, fill one batch.
static_assert(kGroup * kMaxNeighbourCount <= fiber::FiberBatch::kLanes);
constexpr size_t kSharedGrain = 256;

// A chunk's local positions and accumulator hold kSlotStride doubles per local slot (x, y, z,
// and a fourth that is never used): every slot is one aligned 256-bit load or store, and
// updates of neighbouring slots do not overlap (a partial overlap would stall the store
// forwarding of the read-modify-writes in scatterAddRow).
constexpr int kSlotStride = 4;

// acc[index[L] + c] += v[c][L] for c < 3, lane after lane (a node may appear in several lanes).
// With AVX-512 the three vectors are transposed into one (x, y, z, 0) per lane, each added
// with one 256-bit load, add and store; otherwise scalars. Both give the same bits.
[[gnu::always_inline]] inline void scatterAddRow(double* acc, const int32_t* index,
                                                 const Lanes v[3]) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
  const __m512d x = (__m512d)v[0];
  const __m512d y = (__m512d)v[1];
  const __m512d z = (__m512d)v[2];
  const __m512d zero = _mm512_setzero_pd();
  const __m512d xyEven = _mm512_unpacklo_pd(x, y);    // x0 y0 x2 y2 | x4 y4 x6 y6
  const __m512d xyOdd = _mm512_unpackhi_pd(x, y);     // x1 y1 x3 y3 | x5 y5 x7 y7
  const __m512d zEven = _mm512_unpacklo_pd(z, zero);  // z0 0 z2 0 | z4 0 z6 0
  const __m512d zOdd = _mm512_unpackhi_pd(z, zero);
  const __m512i lowPairs = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i highPairs = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512d lanes02 = _mm512_permutex2var_pd(xyEven, lowPairs, zEven);   // lane 0 | lane 2
  const __m512d lanes46 = _mm512_permutex2var_pd(xyEven, highPairs, zEven);  // lane 4 | lane 6
  const __m512d lanes13 = _mm512_permutex2var_pd(xyOdd, lowPairs, zOdd);
  const __m512d lanes57 = _mm512_permutex2var_pd(xyOdd, highPairs, zOdd);
  const __m256d rows[kGroup] = {
      _mm512_castpd512_pd256(lanes02),    _mm512_castpd512_pd256(lanes13),
      _mm512_extractf64x4_pd(lanes02, 1), _mm512_extractf64x4_pd(lanes13, 1),
      _mm512_castpd512_pd256(lanes46),    _mm512_castpd512_pd256(lanes57),
      _mm512_extractf64x4_pd(lanes46, 1), _mm512_extractf64x4_pd(lanes57, 1)};
  for (int lane = 0; lane < kGroup; ++lane) {
    double* out = acc + index[lane];
    _mm256_storeu_pd(out, _mm256_add_pd(_mm256_loadu_pd(out), rows[lane]));
  }
#else
  for (int lane = 0; lane < kGroup; ++lane) {
    double* out = acc + index[lane];
    for (int c = 0; c < 3; ++c) out[c] += v[c][lane];
  }
#endif
}

// rows[r][L] = values[begin[L] + first + r] for r < 4 and first + r < count[L], else 0: per
// lane one (masked) 256-bit load of its node's consecutive fibers, transposed in registers
// (transposeLanes, core/lane_gather.hpp).
[[gnu::always_inline]] inline void loadFiberRows(const double* values, const int32_t* begin,
                                                 const int32_t* count, int first, Lanes rows[4]) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
  __m256d lanes[kGroup];
  for (int lane = 0; lane < kGroup; ++lane) {
    const int valid = std::clamp(count[lane] - first, 0, 4);
    lanes[lane] = _mm256_maskz_loadu_pd(static_cast<__mmask8>((1U << valid) - 1U),
                                        values + begin[lane] + first);
  }
  __m512d transposed[4];
  transposeLanes(lanes, transposed);
  for (int r = 0; r < 4; ++r) rows[r] = (Lanes)transposed[r];
#else
  for (int r = 0; r < 4; ++r) {
    for (int lane = 0; lane < kGroup; ++lane) {
      rows[r][lane] = first + r < count[lane] ? values[begin[lane] + first + r] : 0.0;
    }
  }
#endif
}

// The flags of 4 consecutive fibers per lane (bytes first .. first + 3 of the lane's fibers,
// 0 past its count) as one 32-bit word per lane, with AVX-512 by one masked byte load each.
using FlagWords = int32_t __attribute__((vector_size(sizeof(int32_t) * kGroup)));
[[gnu::always_inline]] inline FlagWords loadFlagWords(const uint8_t* flags, const int32_t* begin,
                                                      const int32_t* count, int first) {
  FlagWords words;
  for (int lane = 0; lane < kGroup; ++lane) {
    const int valid = std::clamp(count[lane] - first, 0, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    words[lane] = _mm_cvtsi128_si32(_mm_maskz_loadu_epi8(static_cast<__mmask16>((1U << valid) - 1U),
                                                         flags + begin[lane] + first));
#else
    uint32_t word = 0;
    for (int b = 0; b < valid; ++b) {
      word |= static_cast<uint32_t>(flags[begin[lane] + first + b]) << (8 * b);
    }
    words[lane] = static_cast<int32_t>(word);
#endif
  }
  return words;
}

// 1 where fiber `first + row` of the lane exists and is active, else 0.
[[gnu::always_inline]] inline Lanes activeLanes(FlagWords words, int row) {
  const FlagWords bit = (words >> (8 * row)) & kFiberActive;
  return __builtin_convertvector(bit, Lanes);
}

// A node quantity of group g's lanes (0 past the last node).
Lanes nodeLanes(const std::vector<double>& values, size_t firstNode, size_t nodeCount) {
  if (firstNode + kGroup <= nodeCount) return loadLanes(values.data() + firstNode);
  Lanes v{};
  for (size_t lane = 0; firstNode + lane < nodeCount; ++lane) v[lane] = values[firstNode + lane];
  return v;
}

void storeNodeLanes(double* out, Lanes v, size_t firstNode, size_t nodeCount) {
  if (firstNode + kGroup <= nodeCount) {
    storeLanes(out + firstNode, v);
    return;
  }
  for (size_t lane = 0; firstNode + lane < nodeCount; ++lane) out[firstNode + lane] = v[lane];
}

// One group's patch frames f1, f2 and normals N = f1 x f2 / |f1 x f2| (fiber_model.hpp,
// "Reference normals"), lane L = node 8 g + L.
struct GroupFrames {
  Lanes f1[3], f2[3], normal[3];
  Lanes inverseLength;  // 1 / |f1 x f2|, 0 where the patch collapsed (N = the rest normal)
};

}  // namespace

void FiberModel::buildEvaluationPlan() {
  static_assert(kGroupNodes == kGroup);
  const auto n = static_cast<size_t>(network_.nodeCount);
  // About kChunksPerModel chunks, of kMinChunkNodes to kMaxChunkNodes nodes: larger chunks
  // touch fewer nodes outside themselves (each touched node costs a copy, an accumulator
  // row and, if shared, a pass-2 row), smaller ones balance the threads. A function of the
  // node count only, so the result stays independent of the thread count.
  chunkNodeCount_ = std::clamp((n / kChunksPerModel + kGroup - 1) / kGroup * kGroup, kMinChunkNodes,
                               kMaxChunkNodes);
  const size_t chunkSize = chunkNodeCount_;
  const std::vector<int32_t>& offsets = network_.centreOffsets;
  const size_t chunks = (n + chunkSize - 1) / chunkSize;
  const size_t groups = (n + kGroup - 1) / kGroup;
  // Each chunk plans its own groups (a chunk holds whole groups: its size is a multiple of
  // kGroup), in parallel; the plans are then joined in chunk order, so the tables are the
  // same on any thread count. A kept plan whose inputs are unchanged is used as it is.
  const bool keepPlans = params_.fracture.has_value();
  if (!keepPlans || chunkPlans_.size() != chunks) chunkPlans_.assign(chunks, ChunkPlan{});
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& range) {
        std::vector<int32_t> fibersRead, patchRead;
        for (size_t c = range.begin(); c != range.end(); ++c) {
          const size_t nodeBegin = c * chunkSize;
          const size_t nodeEnd = std::min(n, nodeBegin + chunkSize);
          // What the chunk's plan reads: its fibers' nodes, its patches' nodes and weights.
          const std::span<const int32_t> chunkFiberNodes =
              std::span<const int32_t>(network_.fiberNodes)
                  .subspan(3 * static_cast<size_t>(offsets[nodeBegin]),
                           3 * static_cast<size_t>(offsets[nodeEnd] - offsets[nodeBegin]));
          const auto patchBegin = static_cast<size_t>(patchOffsets_[nodeBegin]);
          const auto patchCount = static_cast<size_t>(patchOffsets_[nodeEnd]) - patchBegin;
          const std::span<const int32_t> chunkPatchNodes =
              std::span<const int32_t>(patchNodes_).subspan(patchBegin, patchCount);
          const std::span<const double> chunkPatchWeights =
              std::span<const double>(patchWeights_).subspan(2 * patchBegin, 2 * patchCount);
          ChunkPlan& plan = chunkPlans_[c];
          if (keepPlans) {
            // The key: each node's fiber and patch counts, then the nodes themselves.
            fibersRead.clear();
            patchRead.clear();
            for (size_t j = nodeBegin; j < nodeEnd; ++j) {
              fibersRead.push_back(offsets[j + 1] - offsets[j]);
              patchRead.push_back(patchOffsets_[j + 1] - patchOffsets_[j]);
            }
            fibersRead.insert(fibersRead.end(), chunkFiberNodes.begin(), chunkFiberNodes.end());
            patchRead.insert(patchRead.end(), chunkPatchNodes.begin(), chunkPatchNodes.end());
            if (!plan.touched.empty() && plan.fibers == fibersRead && plan.patch == patchRead &&
                std::ranges::equal(chunkPatchWeights, plan.patchWeights)) {
              continue;
            }
          }
          plan = ChunkPlan{};
          if (keepPlans) {
            plan.fibers = fibersRead;
            plan.patch = patchRead;
            plan.patchWeights.assign(chunkPatchWeights.begin(), chunkPatchWeights.end());
          }
          std::vector<int32_t>& touched = plan.touched;
          // Local slots: the chunk's own nodes and every node of its fibers and patches, sorted.
          for (size_t j = nodeBegin; j < nodeEnd; ++j) touched.push_back(static_cast<int32_t>(j));
          touched.insert(touched.end(), chunkFiberNodes.begin(), chunkFiberNodes.end());
          touched.insert(touched.end(), chunkPatchNodes.begin(), chunkPatchNodes.end());
          std::sort(touched.begin(), touched.end());
          touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
          // kSlotStride x the local slot of a node: the offset of its x in the local positions.
          const auto local = [&](int32_t node) {
            return kSlotStride *
                   static_cast<int32_t>(std::lower_bound(touched.begin(), touched.end(), node) -
                                        touched.begin());
          };
          for (size_t g = nodeBegin / kGroup; g * kGroup < nodeEnd; ++g) {
            // Rows of each lane's node j: 0 = j, 1 + s = end p1 of its fiber s, 1 + F + s = end
            // p2, then the patch members that are none of these (grown rings). A patch member's
            // weights go on its first row, every other row has weight 0; rows past the lane's own
            // fibers or members are padding (j, weight 0; slot 0 past the last node).
            const size_t first = g * kGroup;
            int32_t fibers = 0;
            for (size_t j = first; j < std::min(nodeEnd, first + kGroup); ++j) {
              fibers = std::max(fibers, offsets[j + 1] - offsets[j]);
            }
            std::array<std::vector<int32_t>, kGroup> rowNodes;   // per lane: node of each row
            std::array<std::vector<double>, kGroup> rowWeights;  // per lane: (c1, c2) of each row
            size_t rows = 0;
            for (size_t lane = 0; lane < kGroup; ++lane) {
              const size_t j = first + lane;
              if (j >= nodeEnd) continue;
              std::vector<int32_t>& nodes = rowNodes[lane];
              nodes.assign(1 + 2 * static_cast<size_t>(fibers), static_cast<int32_t>(j));
              const int32_t count = offsets[j + 1] - offsets[j];
              for (int32_t s = 0; s < count; ++s) {
                const size_t f = static_cast<size_t>(offsets[j] + s);
                nodes[1 + static_cast<size_t>(s)] = network_.fiberNodes[3 * f];
                nodes[1 + static_cast<size_t>(fibers + s)] = network_.fiberNodes[3 * f + 2];
              }
              std::vector<double>& weights = rowWeights[lane];
              weights.assign(2 * nodes.size(), 0.0);
              for (auto e = static_cast<size_t>(patchOffsets_[j]);
                   e < static_cast<size_t>(patchOffsets_[j + 1]); ++e) {
                // Its first row among the centre and the real ends, else a row of its own.
                size_t row = nodes.size();
                for (size_t r = 0; r < 1 + 2 * static_cast<size_t>(fibers); ++r) {
                  const bool real =
                      r == 0 || (r - 1) % static_cast<size_t>(fibers) < static_cast<size_t>(count);
                  if (real && nodes[r] == patchNodes_[e]) {
                    row = r;
                    break;
                  }
                }
                if (row == nodes.size()) {
                  nodes.push_back(patchNodes_[e]);
                  weights.resize(2 * nodes.size(), 0.0);
                }
                weights[2 * row] = patchWeights_[2 * e];
                weights[2 * row + 1] = patchWeights_[2 * e + 1];
              }
              rows = std::max(rows, nodes.size());
            }
            plan.groupFibers.push_back(fibers);
            plan.groupRows.push_back(static_cast<int32_t>(rows));
            for (size_t r = 0; r < rows; ++r) {
              for (size_t lane = 0; lane < kGroup; ++lane) {
                const bool real = r < rowNodes[lane].size();
                plan.patchLocal.push_back(real                     ? local(rowNodes[lane][r])
                                          : rowNodes[lane].empty() ? 0
                                                                   : local(rowNodes[lane][0]));
              }
              for (size_t a = 0; a < 2; ++a) {
                for (size_t lane = 0; lane < kGroup; ++lane) {
                  plan.patchRowWeights.push_back(
                      r < rowNodes[lane].size() ? rowWeights[lane][2 * r + a] : 0.0);
                }
              }
            }
          }
        }
      });
  // The tables join the chunks' plans in chunk order. A kept plan already in place (at the
  // same offsets as at the last join) is not copied again: a crack's rebuild replans one or
  // two chunks of dozens, and copying all of them (with the tables reallocated) took most of
  // this function's time.
  chunkNodeOffsets_.assign(chunks + 1, 0);
  groupFibers_.assign(groups, 0);
  groupPatchRows_.assign(groups + 1, 0);
  maxGroupRows_ = 0;
  std::vector<size_t> localAt(chunks + 1, 0), weightsAt(chunks + 1, 0);
  size_t g = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const ChunkPlan& plan = chunkPlans_[c];
    for (size_t k = 0; k < plan.groupFibers.size(); ++k, ++g) {
      groupFibers_[g] = plan.groupFibers[k];
      groupPatchRows_[g + 1] = groupPatchRows_[g] + plan.groupRows[k];
      maxGroupRows_ = std::max(maxGroupRows_, static_cast<size_t>(plan.groupRows[k]));
    }
    chunkNodeOffsets_[c + 1] = chunkNodeOffsets_[c] + static_cast<int32_t>(plan.touched.size());
    localAt[c + 1] = localAt[c] + plan.patchLocal.size();
    weightsAt[c + 1] = weightsAt[c] + plan.patchRowWeights.size();
  }
  chunkNodes_.resize(static_cast<size_t>(chunkNodeOffsets_[chunks]));
  groupPatchLocal_.resize(localAt[chunks]);
  groupPatchWeights_.resize(weightsAt[chunks]);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& range) {
        for (size_t c = range.begin(); c != range.end(); ++c) {
          ChunkPlan& plan = chunkPlans_[c];
          const auto nodesAt = static_cast<size_t>(chunkNodeOffsets_[c]);
          if (plan.joinedAt == std::array{nodesAt, localAt[c], weightsAt[c]}) {
            continue;
          }
          std::ranges::copy(plan.touched, chunkNodes_.begin() + static_cast<ptrdiff_t>(nodesAt));
          std::ranges::copy(plan.patchLocal,
                            groupPatchLocal_.begin() + static_cast<ptrdiff_t>(localAt[c]));
          std::ranges::copy(plan.patchRowWeights,
                            groupPatchWeights_.begin() + static_cast<ptrdiff_t>(weightsAt[c]));
          plan.joinedAt = {nodesAt, localAt[c], weightsAt[c]};
        }
      });
  if (!keepPlans) {  // no rebuild to come: the tables are enough
    chunkPlans_.clear();
    for (auto* table : {&chunkNodes_, &groupPatchLocal_}) table->shrink_to_fit();
    groupPatchWeights_.shrink_to_fit();
  }
  // Nodes touched by several chunks get one row per chunk, in ascending chunk order.
  std::vector<int32_t> chunksTouching(n, 0);
  for (const int32_t node : chunkNodes_) ++chunksTouching[static_cast<size_t>(node)];
  sharedNodes_.clear();
  shareOffsets_.assign(1, 0);
  std::vector<int32_t> nextRow(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (chunksTouching[i] < 2) continue;
    sharedNodes_.push_back(static_cast<int32_t>(i));
    nextRow[i] = shareOffsets_.back();
    shareOffsets_.push_back(shareOffsets_.back() + chunksTouching[i]);
  }
  slotShare_.resize(chunkNodes_.size());
  for (size_t slot = 0; slot < chunkNodes_.size(); ++slot) {  // chunk by chunk, ascending
    const auto node = static_cast<size_t>(chunkNodes_[slot]);
    slotShare_[slot] = chunksTouching[node] < 2 ? -1 : nextRow[node]++;
  }
}

std::unique_ptr<ModelWorkspace> FiberModel::makeWorkspace() const {
  return std::make_unique<Workspace>();
}

void FiberModel::gatherChunk(std::span<const double> x, size_t chunk, double* local) const {
  const auto begin = static_cast<size_t>(chunkNodeOffsets_[chunk]);
  const auto end = static_cast<size_t>(chunkNodeOffsets_[chunk + 1]);
  const int32_t* nodes = chunkNodes_.data();
  const double* positions = x.data();
  for (size_t slot = begin; slot < end; ++slot) {
    const double* p = positions + 3 * static_cast<size_t>(nodes[slot]);
    double* out = local + kSlotStride * (slot - begin);
    out[0] = p[0];
    out[1] = p[1];
    out[2] = p[2];
    out[3] = 0.0;
  }
}

// Per lane of one group's batch (lane k = 8 s + L): the terms of the per-node sums, kept for
// the multipliers. Inactive and padding lanes hold zeros.
struct FiberModel::GroupTerms {
  static constexpr int kLanes = fiber::FiberBatch::kRow;  // padded like FiberBatch's rows
  alignas(64) double active[kLanes];                      // 1 or 0
  alignas(64) double areaChange[kLanes];                  // A_k - A_k0, m^2
  alignas(64) double angleChange[kLanes];                 // theta_k - theta_k0, rad
  alignas(64) double stretchWeight[kLanes];               // s_k of E_s
  alignas(64) double bendWeight[kLanes];                  // s_k w_k^2 of E_b
  // Per row of the group (the plan's rows, maxGroupRows_ of them): its positions (x, y, z of 8
  // lanes) and the force terms of its fibers' end or centre slots, (rows, 3, 8) each.
  std::vector<double> rowPositions;
  std::vector<double> rowForces;
  explicit GroupTerms(size_t rows)
      : rowPositions(rows * 3 * kGroup), rowForces(rows * 3 * kGroup) {}
};

void FiberModel::evaluateGroup(size_t group, const double* local, fiber::FiberBatch& batch,
                               GroupTerms& t, double* sum, const NodeOutputs& outputs,
                               double energy[2], double* restLengthOut, double* restAngleOut,
                               double* lengthNow, double* angleNow) const {
  const auto n = static_cast<size_t>(network_.nodeCount);
  const std::vector<int32_t>& offsets = network_.centreOffsets;
  const size_t first = group * kGroup;
  const int fibers = groupFibers_[group];
  // Fiber index of row s, lane L: fiberBegin[L] + s (valid where s < fiberCount[L]).
  alignas(64) int32_t fiberBegin[kGroup];
  alignas(64) int32_t fibersAt[kGroup];
  Lanes fiberCount{};
  for (size_t lane = 0; lane < kGroup; ++lane) {
    const size_t j = first + lane;
    fiberBegin[lane] = j < n ? offsets[j] : 0;
    fibersAt[lane] = j < n ? offsets[j + 1] - offsets[j] : 0;
    fiberCount[lane] = fibersAt[lane];
  }

  // Patch frames, f_a = sum_i c_ia x_i (fiber_model.hpp), row by row; the rows' positions are
  // kept for the fibers.
  GroupFrames frame{};
  const auto patchRow = static_cast<size_t>(groupPatchRows_[group]);
  const auto patchRows = static_cast<size_t>(groupPatchRows_[group + 1]) - patchRow;
  double* rowPositions = t.rowPositions.data();
  for (size_t p = 0; p < patchRows; ++p) {
    const int32_t* index = &groupPatchLocal_[kGroup * (patchRow + p)];
    const double* weights = &groupPatchWeights_[2 * kGroup * (patchRow + p)];
    const Lanes c1 = loadLanes(weights);
    const Lanes c2 = loadLanes(weights + kGroup);
    gatherLanePositions<1, false>(local, index, rowPositions + 3 * kGroup * p);
    for (int c = 0; c < 3; ++c) {
      const Lanes position = loadLanes(rowPositions + kGroup * (3 * p + static_cast<size_t>(c)));
      frame.f1[c] += c1 * position;
      frame.f2[c] += c2 * position;
    }
  }
  {
    const Lanes* f1 = frame.f1;
    const Lanes* f2 = frame.f2;
    const Lanes v[3] = {f1[1] * f2[2] - f1[2] * f2[1], f1[2] * f2[0] - f1[0] * f2[2],
                        f1[0] * f2[1] - f1[1] * f2[0]};
    // 1 / |v| by inverseSqrtLanes (0 for |v|^2 below the smallest normal double); a patch
    // collapsed to a line or a point, or an overflowing one, keeps the rest normal.
    const Lanes length2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    const auto valid = length2 > 0.0 && length2 < std::numeric_limits<double>::infinity();
    frame.inverseLength = valid ? inverseSqrtLanes(length2) : 0.0;
    const auto keepRest = frame.inverseLength == 0.0;
    for (int c = 0; c < 3; ++c) frame.normal[c] = v[c] * frame.inverseLength;
    for (size_t lane = 0; lane < kGroup; ++lane) {
      if (keepRest[lane] == 0 || first + lane >= n) continue;
      for (int c = 0; c < 3; ++c) frame.normal[c][lane] = restNormals_[3 * (first + lane) + c];
    }
  }

  // The batch: fiber row s holds fiber s of every node, its ends in rows 1 + s and 1 + F + s,
  // the centre in row 0; padding lanes a straight unit fiber.
  const auto rowPosition = [&](size_t row, int c) {
    return loadLanes(rowPositions + kGroup * (3 * row + static_cast<size_t>(c)));
  };
  for (int s = 0; s < fibers; ++s) {
    const auto real = broadcast(s) < fiberCount;
    const size_t k = kGroup * static_cast<size_t>(s);
    for (int c = 0; c < 3; ++c) {
      const Lanes p1 = rowPosition(1 + static_cast<size_t>(s), c);
      const Lanes p2 = rowPosition(1 + static_cast<size_t>(fibers + s), c);
      const Lanes centre = rowPosition(0, c);
      storeLanes(&batch.e[c][k], real ? 0.5 * (p2 - p1) : (c == 0 ? 1.0 : 0.0));  // fiber::reduce
      storeLanes(&batch.q[c][k], real ? p1 - 2.0 * centre + p2 : 0.0);
      storeLanes(&batch.normal[c][k], real ? frame.normal[c] : (c == 2 ? 1.0 : 0.0));
    }
  }
  const int laneCount = kGroup * fibers;
  const bool wantGradient = sum != nullptr;
  fiber::evaluateBatch(batch, laneCount, samples_, wantGradient);
  if (restLengthOut != nullptr) {
    for (int s = 0; s < fibers; ++s) {
      for (size_t lane = 0; lane < kGroup; ++lane) {
        if (s >= fiberCount[lane]) continue;
        const auto f = static_cast<size_t>(fiberBegin[lane] + s);
        restLengthOut[f] = batch.length[kGroup * s + static_cast<int>(lane)];
        restAngleOut[f] = batch.angle[kGroup * s + static_cast<int>(lane)];
      }
    }
    return;
  }

  // Per-node sums of eq. (4)-(8), as differences to the rest values (exactly 0 at rest:
  // A_k - A_k0 = pi/4 (l - l0)(l + l0)); inactive and padding lanes add zeros.
  const bool anisotropic = !fiberStretchWeight_.empty();
  const bool inelastic = lengthNow != nullptr;
  Lanes count{}, sumAreaChange{}, sumAreaChange2{}, sumAngle{}, sumAngleChange{}, sumAngleChange2{};
  const uint8_t* flags = network_.flags.data();
  for (int block = 0; block < fibers; block += 4) {
    Lanes restLength[4], restAngle[4], bendWeight[4], stretchWeight[4];
    loadFiberRows(network_.restLength.data(), fiberBegin, fibersAt, block, restLength);
    loadFiberRows(network_.restAngle.data(), fiberBegin, fibersAt, block, restAngle);
    loadFiberRows(fiberBendWeight_.data(), fiberBegin, fibersAt, block, bendWeight);
    if (anisotropic) {
      loadFiberRows(fiberStretchWeight_.data(), fiberBegin, fibersAt, block, stretchWeight);
    } else {
      for (Lanes& weight : stretchWeight) weight = broadcast(1.0);
    }
    const FlagWords flagWords = loadFlagWords(flags, fiberBegin, fibersAt, block);
    for (int r = 0; r < 4 && block + r < fibers; ++r) {
      const int s = block + r;
      const Lanes active = activeLanes(flagWords, r);
      const size_t k = kGroup * static_cast<size_t>(s);
      const Lanes length = loadLanes(&batch.length[k]);
      const Lanes angle = loadLanes(&batch.angle[k]);
      const auto on = active != 0.0;
      const Lanes areaChange =
          on ? kPi / 4 * ((length - restLength[r]) * (length + restLength[r])) : 0.0;
      const Lanes angleChange = on ? angle - restAngle[r] : 0.0;
      count += active;
      sumAreaChange += areaChange;
      sumAreaChange2 += stretchWeight[r] * areaChange * areaChange;
      sumAngle += on ? angle : 0.0;
      sumAngleChange += angleChange;
      sumAngleChange2 += bendWeight[r] * angleChange * angleChange;
      storeLanes(&t.active[k], active);
      storeLanes(&t.areaChange[k], areaChange);
      storeLanes(&t.angleChange[k], angleChange);
      storeLanes(&t.stretchWeight[k], stretchWeight[r]);
      storeLanes(&t.bendWeight[k], bendWeight[r]);
      if (inelastic) {
        for (size_t lane = 0; lane < kGroup; ++lane) {
          if (s >= fibersAt[lane]) continue;
          lengthNow[static_cast<size_t>(fiberBegin[lane] + s)] = length[lane];
          angleNow[static_cast<size_t>(fiberBegin[lane] + s)] = angle[lane];
        }
      }
    }
  }
  const auto any = count > 0.0;
  const Lanes invCount = any ? 1.0 / count : 0.0;
  const Lanes areaError = sumAreaChange * invCount;    // A_j - A_j0
  const Lanes angleError = sumAngleChange * invCount;  // H_j - H_j0
  const double alpha = meanAngleWeight_;
  const Lanes stretchK = nodeLanes(stretchK_, first, n);
  const Lanes bendArea = nodeLanes(bendK_, first, n) * nodeLanes(restArea_, first, n);
  const Lanes stretching = 0.5 * stretchK * (areaError * areaError + sumAreaChange2 * invCount);
  const Lanes bending =
      0.5 * bendArea *
      (alpha * angleError * angleError + (1.0 - alpha) * sumAngleChange2 * invCount);
  for (int lane = 0; lane < kGroup; ++lane) {  // lanes past the last node hold zeros
    energy[0] += stretching[lane];
    energy[1] += bending[lane];
  }
  if (outputs.stretching != nullptr) storeNodeLanes(outputs.stretching, stretching, first, n);
  if (outputs.bending != nullptr) storeNodeLanes(outputs.bending, bending, first, n);
  if (outputs.meanAngle != nullptr)
    storeNodeLanes(outputs.meanAngle, sumAngle * invCount, first, n);
  if (!wantGradient) return;

  // Per lane: dE/dl_k = K_s / n [(A_j - A_j0) + s_k (A_k - A_k0)] pi/2 l_k and dE/dtheta_k =
  // K_b A_j0 / n [alpha (H_j - H_j0) + (1 - alpha) s_k w_k^2 (theta_k - theta_k0)] times the
  // kernel's gradients (FiberBatch's coefficients on e, q, N), pulled back to the slots
  // (fiberSlotGradient); the centre slots and dE/dN_j summed per node. With
  //   g_e = dE/de = A e + M q + C N,   g_q = dE/dq = M e + G q + H N,
  // the ends get -g_e/2 + g_q and g_e/2 + g_q, the centre -2 g_q, and dE/dN = C e + H q.
  // N is the node's, the same in every fiber row: the centre's N terms are summed as sum H.
  const Lanes stretchScale = stretchK * invCount * (kPi / 2);
  const Lanes bendScale = bendArea * invCount;
  const Lanes bendMean = bendScale * alpha * angleError;
  const Lanes bendOwn = bendScale * (1.0 - alpha);
  Lanes centreGradient[3] = {}, normalGradient[3] = {}, sumH{};
  double* rowForces = t.rowForces.data();
  const Lanes* normal = frame.normal;
  for (int s = 0; s < fibers; ++s) {
    const size_t k = kGroup * static_cast<size_t>(s);
    const Lanes active = loadLanes(&t.active[k]);
    const Lanes dEdLength =
        active * stretchScale *
        (areaError + loadLanes(&t.stretchWeight[k]) * loadLanes(&t.areaChange[k])) *
        loadLanes(&batch.length[k]);
    const Lanes dEdAngle =
        active * (bendMean + bendOwn * loadLanes(&t.bendWeight[k]) * loadLanes(&t.angleChange[k]));
    const Lanes a = dEdLength * loadLanes(&batch.lengthCoef[0][k]) +
                    dEdAngle * loadLanes(&batch.angleCoef[2][k]);
    const Lanes m = dEdLength * loadLanes(&batch.lengthCoef[1][k]) +
                    dEdAngle * loadLanes(&batch.angleCoef[1][k]);
    const Lanes gg = dEdLength * loadLanes(&batch.lengthCoef[2][k]);
    const Lanes cn = dEdAngle * loadLanes(&batch.angleCoef[0][k]);
    const Lanes hn = dEdAngle * loadLanes(&batch.angleCoef[3][k]);
    // End p1: (M - A/2) e + (G - M/2) q + (H - C/2) N; end p2 with + A/2, + M/2, + C/2.
    const Lanes e1 = m - 0.5 * a, q1 = gg - 0.5 * m, n1 = hn - 0.5 * cn;
    const Lanes e2 = m + 0.5 * a, q2 = gg + 0.5 * m, n2 = hn + 0.5 * cn;
    sumH += hn;
    double* end1 = rowForces + 3 * kGroup * (1 + static_cast<size_t>(s));
    double* end2 = rowForces + 3 * kGroup * (1 + static_cast<size_t>(fibers + s));
    for (int c = 0; c < 3; ++c) {
      const Lanes e = loadLanes(&batch.e[c][k]);
      const Lanes q = loadLanes(&batch.q[c][k]);
      storeLanes(end1 + kGroup * c, e1 * e + q1 * q + n1 * normal[c]);
      storeLanes(end2 + kGroup * c, e2 * e + q2 * q + n2 * normal[c]);
      centreGradient[c] += m * e + gg * q;
      normalGradient[c] += cn * e + hn * q;
    }
  }
  for (int c = 0; c < 3; ++c) {
    storeLanes(rowForces + kGroup * c, -2.0 * (centreGradient[c] + sumH * normal[c]));
  }
  // The patch frame's gradient (fiber_model.hpp, "Chain rule"): w = P g / |v|, dE/df1 = f2 x w,
  // dE/df2 = w x f1; member i of the patch gets c_i1 dE/df1 + c_i2 dE/df2.
  const Lanes* g = normalGradient;
  const Lanes gN = g[0] * normal[0] + g[1] * normal[1] + g[2] * normal[2];
  Lanes w[3];
  for (int c = 0; c < 3; ++c) w[c] = (g[c] - gN * normal[c]) * frame.inverseLength;
  const Lanes* f1 = frame.f1;
  const Lanes* f2 = frame.f2;
  const Lanes g1[3] = {f2[1] * w[2] - f2[2] * w[1], f2[2] * w[0] - f2[0] * w[2],
                       f2[0] * w[1] - f2[1] * w[0]};
  const Lanes g2[3] = {w[1] * f1[2] - w[2] * f1[1], w[2] * f1[0] - w[0] * f1[2],
                       w[0] * f1[1] - w[1] * f1[0]};

  // Into the accumulator, row by row: the patch member's share c_i1 dE/df1 + c_i2 dE/df2 (0 on
  // rows of weight 0) plus the row's fiber end or centre terms (none past row 2 F).
  const size_t forceRows = 1 + 2 * static_cast<size_t>(fibers);
  for (size_t p = 0; p < patchRows; ++p) {
    const size_t row = patchRow + p;
    const Lanes c1 = loadLanes(&groupPatchWeights_[2 * kGroup * row]);
    const Lanes c2 = loadLanes(&groupPatchWeights_[2 * kGroup * row + kGroup]);
    Lanes force[3];
    for (int c = 0; c < 3; ++c) {
      force[c] = c1 * g1[c] + c2 * g2[c];
      if (p < forceRows)
        force[c] += loadLanes(rowForces + kGroup * (3 * p + static_cast<size_t>(c)));
    }
    scatterAddRow(sum, &groupPatchLocal_[kGroup * row], force);
  }
}

void FiberModel::measureRestShape() {
  Workspace workspace;
  evaluateChunks(restPositions_, {}, NodeOutputs(), network_.restLength.data(),
                 network_.restAngle.data(), workspace);
}

void FiberModel::evaluateChunks(std::span<const double> x, std::span<double> gradient,
                                const NodeOutputs& outputs, double* restLengthOut,
                                double* restAngleOut, Workspace& workspace) const {
  // Pass 1: per chunk, its positions copied to `local`, then group by group (evaluateGroup)
  // into the accumulator `sum`; then the chunk's sums go straight into the gradient for the
  // nodes it alone touches, else into the node's share row.
  const bool wantGradient = !gradient.empty();
  const size_t chunks = chunkNodeOffsets_.size() - 1;
  const size_t groups = groupFibers_.size();
  workspace.chunkEnergy.resize(2 * chunks);
  if (wantGradient) workspace.shareRows.resize(3 * static_cast<size_t>(shareOffsets_.back()));
  const bool recordShape = wantGradient && !workspace.lengthNow.empty();
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& r) {
        fiber::FiberBatch batch;
        GroupTerms terms(maxGroupRows_);
        std::vector<double> local, sum;  // (nSlots, kSlotStride) each
        for (size_t chunk = r.begin(); chunk != r.end(); ++chunk) {
          const auto slotBegin = static_cast<size_t>(chunkNodeOffsets_[chunk]);
          const auto slotCount = static_cast<size_t>(chunkNodeOffsets_[chunk + 1]) - slotBegin;
          local.resize(kSlotStride * slotCount);
          gatherChunk(x, chunk, local.data());
          if (wantGradient) sum.assign(kSlotStride * slotCount, 0.0);
          const size_t groupBegin = chunk * (chunkNodeCount_ / kGroup);
          const size_t groupEnd = std::min(groups, groupBegin + chunkNodeCount_ / kGroup);
          double energy[2] = {0, 0};  // this chunk's, summed group by group, lane by lane
          for (size_t g = groupBegin; g < groupEnd; ++g) {
            evaluateGroup(g, local.data(), batch, terms, wantGradient ? sum.data() : nullptr,
                          outputs, energy, restLengthOut, restAngleOut,
                          recordShape ? workspace.lengthNow.data() : nullptr,
                          recordShape ? workspace.angleNow.data() : nullptr);
          }
          workspace.chunkEnergy[2 * chunk] = energy[0];
          workspace.chunkEnergy[2 * chunk + 1] = energy[1];
          if (!wantGradient) continue;
          for (size_t slot = 0; slot < slotCount; ++slot) {
            const int32_t share = slotShare_[slotBegin + slot];
            const double* part = &sum[kSlotStride * slot];
            if (share < 0) {
              double* out = &gradient[3 * static_cast<size_t>(chunkNodes_[slotBegin + slot])];
              for (int c = 0; c < 3; ++c) out[c] += part[c];
            } else {
              double* out = &workspace.shareRows[3 * static_cast<size_t>(share)];
              for (int c = 0; c < 3; ++c) out[c] = part[c];
            }
          }
        }
      });
}

EnergyParts FiberModel::evaluate(std::span<const double> x, std::span<double> gradient,
                                 const NodeOutputs& outputs, Workspace& workspace) const {
  const bool wantGradient = !gradient.empty();
  // Plasticity and fracture read l and theta at the step's final positions, which the
  // stepper's last gradient evaluation had: the workspace keeps them (and x) for
  // updateInelastic instead of a second pass.
  const bool inelastic = params_.plasticity.has_value() || params_.fracture.has_value();
  if (inelastic && wantGradient) {
    workspace.lengthNow.resize(network_.restLength.size());
    workspace.angleNow.resize(network_.restLength.size());
    workspace.evaluatedX.assign(x.begin(), x.end());
    workspace.evaluatedTopology = topologyVersion_;
  }

  evaluateChunks(x, gradient, outputs, nullptr, nullptr, workspace);

  // Pass 2: each node touched by several chunks gets their parts, in ascending chunk order.
  if (wantGradient) {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, sharedNodes_.size(), kSharedGrain),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t s = r.begin(); s != r.end(); ++s) {
                          double total[3] = {0, 0, 0};
                          for (auto row = static_cast<size_t>(shareOffsets_[s]);
                               row < static_cast<size_t>(shareOffsets_[s + 1]); ++row) {
                            for (int c = 0; c < 3; ++c) {
                              total[c] += workspace.shareRows[3 * row + c];
                            }
                          }
                          double* out = &gradient[3 * static_cast<size_t>(sharedNodes_[s])];
                          for (int c = 0; c < 3; ++c) out[c] += total[c];
                        }
                      });
  }

  // Pass 3: the chunks' energies in chunk order.
  EnergyParts parts;
  for (size_t chunk = 0; chunk + 1 < chunkNodeOffsets_.size(); ++chunk) {
    parts.stretching += workspace.chunkEnergy[2 * chunk];
    parts.bending += workspace.chunkEnergy[2 * chunk + 1];
  }
  return parts;
}

}  // namespace shellsim
