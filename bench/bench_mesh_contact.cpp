// Mesh contact (dynamics/mesh_contact.hpp): what a force evaluation pays for finding the
// contacts, and what a whole step pays, on a 40 cm discrete-shell sheet of n x n cells
// held at two edges with a 20 cm sheet of half the cells resting on it, 4 mm thick.
//   BM_MeshContactFindPairs/n   findPairs at the resting state, candidate list valid
//                               (the common case: nodes moved less than half the skin)
//   BM_MeshContactRebuild/n     findPairs with the candidate list rebuilt (trees, lists)
//   BM_MeshContactRefresh/n     findPairs after the upper sheet slid 1 cm (and back in the
//                               next round): the candidate list rebuilt, topology kept
//   BM_MeshContactIntersections/n  the exact intersection count of the step check
//   BM_SheetOnSheetStep/n/contact  one explicit step of the whole world, contact 0 or 1
//   BM_Orient3d/exact           orient3d on four points in general position (0: the
//                               floating-point filter decides) or exactly coplanar off the
//                               coordinate planes (1: the exact integer evaluation)
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/predicates.hpp"
#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/mesh_contact.hpp"
#include "dynamics/step_pipeline.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"

namespace shellsim {
namespace {

// The upper sheet starts 6 mm above the lower one.
SceneDef sheetOnSheet(int cells, bool contact) {
  return testing::twoSheets(cells, cells / 2, 0.106, contact);
}

// The world after 0.05 s, the upper sheet (started 6 mm above) lying on the lower one.
World settledWorld(int cells, bool contact) {
  World world = buildWorld(sheetOnSheet(cells, contact));
  computeAccelerations(world);
  TimeIntegrator integrator(TimeDef{}, 0.5 * stableTimeStep(world));
  PhaseTimes times;
  integrator.advance(world, 0.05, 0.05, times);
  return world;
}

void BM_MeshContactFindPairs(benchmark::State& state) {
  World world = settledWorld(static_cast<int>(state.range(0)), true);
  std::vector<ContactPair> pairs;
  for (auto _ : state) {
    world.contact.findPairs(world.bodies, 0.0, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
  state.counters["pairs"] = static_cast<double>(pairs.size());
}
BENCHMARK(BM_MeshContactFindPairs)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_MeshContactRebuild(benchmark::State& state) {
  World world = settledWorld(static_cast<int>(state.range(0)), true);
  std::vector<ContactPair> pairs;
  for (auto _ : state) {
    // A fresh detector: trees and candidate lists built from scratch.
    MeshContact fresh(world.contact.def(), 1e-4);
    fresh.findPairs(world.bodies, 0.0, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
}
BENCHMARK(BM_MeshContactRebuild)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_MeshContactRefresh(benchmark::State& state) {
  World world = settledWorld(static_cast<int>(state.range(0)), true);
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  std::vector<double>& upper = world.bodies[1].positions;
  double slide = 0.01;  // m, past half the skin (a touching distance, 4 mm): a rebuild
  for (auto _ : state) {
    for (size_t k = 0; k < upper.size(); k += 3) upper[k] += slide;
    slide = -slide;
    world.contact.findPairs(world.bodies, 0.0, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
}
BENCHMARK(BM_MeshContactRefresh)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_MeshContactIntersections(benchmark::State& state) {
  World world = settledWorld(static_cast<int>(state.range(0)), true);
  int64_t count = 0;
  for (auto _ : state) {
    count = world.contact.countIntersections(world.bodies);
    benchmark::DoNotOptimize(count);
  }
  state.counters["intersections"] = static_cast<double>(count);
}
BENCHMARK(BM_MeshContactIntersections)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_SheetOnSheetStep(benchmark::State& state) {
  const bool contact = state.range(1) != 0;
  World world = settledWorld(static_cast<int>(state.range(0)), contact);
  TimeIntegrator integrator(TimeDef{}, 0.5 * stableTimeStep(world));
  PhaseTimes times;
  const double dt = integrator.timeStep();
  for (auto _ : state) integrator.advance(world, dt, world.time + dt, times);
  state.counters["nodes"] =
      static_cast<double>(world.bodies[0].nodeCount() + world.bodies[1].nodeCount());
}
BENCHMARK(BM_SheetOnSheetStep)
    ->Args({16, 0})
    ->Args({16, 1})
    ->Args({32, 0})
    ->Args({32, 1})
    ->Args({64, 0})
    ->Args({64, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_Orient3d(benchmark::State& state) {
  // Points of the plane z = x + y (dyadic coordinates: the sums are exact), moved off the
  // origin by an offset that keeps them exactly coplanar; 32 quadruples cycled.
  const bool coplanar = state.range(0) == 1;
  std::vector<std::array<Vec3, 4>> quads;
  for (int q = 0; q < 32; ++q) {
    std::array<Vec3, 4> quad;
    for (int k = 0; k < 4; ++k) {
      const double x = std::ldexp(1 + 3 * q + 5 * k, -7), y = std::ldexp(7 + (q + 1) * k * k, -9);
      quad[static_cast<size_t>(k)] = Vec3(x, y, x + y + (coplanar || k < 3 ? 0.0 : 0.01));
    }
    quads.push_back(quad);
  }
  int64_t sum = 0;
  size_t i = 0;
  for (auto _ : state) {
    const std::array<Vec3, 4>& quad = quads[i++ % quads.size()];
    sum += orient3d(quad[0], quad[1], quad[2], quad[3]);
    benchmark::DoNotOptimize(sum);
  }
  state.counters["sum"] = static_cast<double>(sum);
}
BENCHMARK(BM_Orient3d)->Arg(0)->Arg(1)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace shellsim
