// The two gathers around the batched stencil kernels (core/lane_gather.hpp and
// gatherIncidentGradients in core/assembler.hpp): with AVX-512 both run on intrinsics, and
// they must give the very bits of the plain loops they replace, the last node of the array
// included (its 256-bit load reaches one value past the end, masked off).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/assembler.hpp"
#include "core/lane_gather.hpp"
#include "guarded_buffer.hpp"

namespace shellsim {
namespace {

template <int K, bool kMayReachEnd>
void expectGatherMatchesPlainLoop(std::mt19937& rng) {
  constexpr int kNodes = 37;
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  // Exactly kNodes * 3 values: the last node ends the allocation.
  std::vector<double> xs(3 * kNodes);
  for (double& v : xs) v = u(rng);
  // Plain loads (kMayReachEnd = false) only for nodes before the last.
  std::uniform_int_distribution<int32_t> node(0, kMayReachEnd ? kNodes - 1 : kNodes - 2);
  std::vector<int32_t> offsets(K * kGatherLanes);
  for (int32_t& o : offsets) o = 3 * node(rng);
  if (kMayReachEnd) {
    offsets[0] = 3 * (kNodes - 1);
    offsets[K * kGatherLanes - 1] = 3 * (kNodes - 1);
  }
  alignas(64) double positions[K * 3 * kGatherLanes];
  gatherLanePositions<K, kMayReachEnd>(xs.data(), offsets.data(), positions);
  for (int c = 0; c < K; ++c) {
    for (int i = 0; i < 3; ++i) {
      for (int l = 0; l < kGatherLanes; ++l) {
        EXPECT_EQ(positions[(3 * c + i) * kGatherLanes + l],
                  xs[static_cast<size_t>(offsets[c * kGatherLanes + l] + i)])
            << "slot " << c << ", axis " << i << ", lane " << l;
      }
    }
  }
}

TEST(LaneGather, PositionsAreTheNodesOfEachSlotAndLane) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    expectGatherMatchesPlainLoop<3, true>(rng);
    expectGatherMatchesPlainLoop<4, true>(rng);
    expectGatherMatchesPlainLoop<3, false>(rng);
    expectGatherMatchesPlainLoop<4, false>(rng);
  }
}

TEST(LaneGather, TheLastNodeIsReadUpToItsEndAndNoFurther) {
  // The positions end where an unreadable page begins: a load past the last node faults.
  constexpr int kNodes = 5;
  GuardedBuffer buffer(3 * kNodes);
  double* xs = buffer.data();
  for (int i = 0; i < 3 * kNodes; ++i) xs[i] = 0.5 * i;
  int32_t offsets[4 * kGatherLanes];
  for (int i = 0; i < 4 * kGatherLanes; ++i) offsets[i] = 3 * ((i * 7) % kNodes);
  offsets[5] = 3 * (kNodes - 1);
  alignas(64) double positions[12 * kGatherLanes];
  gatherLanePositions<4, true>(xs, offsets, positions);
  EXPECT_EQ(positions[5], xs[3 * (kNodes - 1)]);                         // slot 0, x, lane 5
  EXPECT_EQ(positions[2 * kGatherLanes + 5], xs[3 * (kNodes - 1) + 2]);  // z
}

TEST(LaneGather, IncidentGradientsSumEachNodesSlotsInEntryOrder) {
  // Slots of 3 values at arbitrary offsets (kScale = kStride = 1, the discrete shell's
  // layout), 0 to 13 entries per node, the last slot ending the array.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  constexpr int kSlots = 200;
  std::vector<double> slots(3 * kSlots);
  for (double& v : slots) v = u(rng);
  Incidence incidence;
  incidence.offsets = {0};
  std::uniform_int_distribution<int> count(0, 13);
  std::uniform_int_distribution<int32_t> slot(0, kSlots - 1);
  for (int n = 0; n < 30; ++n) {
    const int c = count(rng);
    for (int j = 0; j < c; ++j) incidence.entries.push_back(3 * slot(rng));
    incidence.offsets.push_back(static_cast<int32_t>(incidence.entries.size()));
  }
  incidence.entries.back() = 3 * (kSlots - 1);
  const size_t nodes = incidence.offsets.size() - 1;
  std::vector<double> gradient(3 * nodes);
  for (double& v : gradient) v = u(rng);
  std::vector<double> expected = gradient;
  gatherIncidentGradients<1, 1>(incidence, slots, gradient);
  for (size_t n = 0; n < nodes; ++n) {
    // The documented order: even and odd entries summed apart, then added.
    double even[3] = {0, 0, 0}, odd[3] = {0, 0, 0};
    for (int32_t i = incidence.offsets[n]; i < incidence.offsets[n + 1]; ++i) {
      double* sum = (i - incidence.offsets[n]) % 2 == 0 ? even : odd;
      for (int c = 0; c < 3; ++c) sum[c] += slots[static_cast<size_t>(incidence.entries[i] + c)];
    }
    for (size_t c = 0; c < 3; ++c) {
      expected[3 * n + c] += even[c] + odd[c];
      EXPECT_EQ(gradient[3 * n + c], expected[3 * n + c]) << "node " << n << ", axis " << c;
    }
  }
}

}  // namespace
}  // namespace shellsim
