// Force evaluation of the discrete-shell model (grinspun2003): time per hinge and per
// triangle on equilateral sheets of ~10^4 hinges (in cache), ~10^5 and ~10^6, with 1 and
// 2 threads. An evaluation runs the edge and hinge stencil families and, when the Poisson
// ratio is >= 1/3, the triangle (area) family, each with the assembler's gather pass.
// Run (Release build):
//   build/rel/bench/shellsim_bench --benchmark_filter=DiscreteShell
// Measured 2026-11-26 (Release, nu = 0.3, 1 thread, CPU time per evaluation, 2 cores shared
// with other jobs at load ~3-4, so 2 threads gave no speed-up in real time), before / after
// the hinge kernel's cheaper triple product and single division:
//   side 58 (9.6k hinges):   741-739 us / 665 us   (~69 ns per hinge, edges included)
//   side 183 (99k hinges):   9.2-9.0 ms / 8.2-8.4 ms
// perf: the hinge kernel ~50% of the time, libm's atan2 ~22%, the gather and the energy
// sum the rest. The 8 ns per hinge target is not met.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "geometry/primitives.hpp"
#include "models/discrete_shell/discrete_shell_model.hpp"
#include "shellsim/parallel.hpp"

namespace {

void BM_DiscreteShellForces(benchmark::State& state) {
  // side x side equilateral lattice of spacing 1 cm: ~2 side^2 triangles, ~3 side^2 hinges.
  const int side = static_cast<int>(state.range(0));
  const shellsim::Geometry mesh = shellsim::makeEquilateralLattice(side, side, 0.01);
  shellsim::MaterialDef material;
  material.poisson = 0.01 * static_cast<double>(state.range(2));
  const shellsim::DiscreteShellModel model(mesh, material);
  std::vector<double> x = mesh.positions;
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1e-4, 1e-4);
  for (double& v : x) v += u(rng);
  std::vector<double> gradient(x.size());
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    benchmark::DoNotOptimize(model.addGradient(x, gradient));
    benchmark::ClobberMemory();
  }
  const auto hinges = static_cast<double>(model.hingeCount());
  const auto triangles = static_cast<double>(model.triangleCount());
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["hinges"] = hinges;
  state.counters["triangles"] = triangles;
  state.counters["ns_per_hinge"] = benchmark::Counter(
      hinges * iterations * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["ns_per_triangle"] = benchmark::Counter(
      triangles * iterations * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// ~10^4 (in cache), ~10^5 and ~10^6 hinges; Poisson ratio 0.3 (no area term: edges and
// hinges only) and 0.45 (edges, triangles and hinges).
BENCHMARK(BM_DiscreteShellForces)
    ->ArgsProduct({{58, 183, 578}, {1, 2}, {30, 45}})
    ->ArgNames({"side", "threads", "poisson_pct"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
