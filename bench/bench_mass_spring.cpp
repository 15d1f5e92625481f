// Force evaluation of the mass-spring model: time per spring for sheets from 10^3 to
// ~10^6 springs, with 1 and 2 threads. Run: build/release/bench/shellsim_bench
//   --benchmark_filter=MassSpring
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "geometry/primitives.hpp"
#include "models/mass_spring/mass_spring.hpp"
#include "shellsim/parallel.hpp"

namespace {

void BM_MassSpringForces(benchmark::State& state) {
  const int resolution = static_cast<int>(state.range(0));
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  shellsim::PrimitiveDef sheet;
  sheet.type = shellsim::PrimitiveType::kSheet;
  sheet.resolution = resolution;
  const shellsim::Geometry mesh = shellsim::makePrimitive(sheet);
  const shellsim::MassSpringModel model(mesh, shellsim::MaterialDef{});
  std::vector<double> x = mesh.positions;
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1e-3, 1e-3);
  for (double& v : x) v += u(rng);
  std::vector<double> gradient(x.size());
  // The caller's workspace, as a body holds one: no allocation per evaluation.
  const std::unique_ptr<shellsim::ModelWorkspace> workspace = model.makeWorkspace();
  for (auto _ : state) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    benchmark::DoNotOptimize(model.addGradient(x, gradient, workspace.get()));
    benchmark::ClobberMemory();
  }
  state.counters["springs"] = static_cast<double>(model.elementCount());
  state.counters["ns_per_spring"] = benchmark::Counter(
      static_cast<double>(model.elementCount()) * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_MassSpringForces)
    ->ArgsProduct({{18, 58, 182, 577}, {1, 2}})
    ->ArgNames({"resolution", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
