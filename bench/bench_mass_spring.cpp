// Force evaluation of the mass-spring model: time per spring for sheets from 10^3 to
// ~10^6 springs, with 1 and 2 threads. Run: build/release/bench/shellsim_bench
//   --benchmark_filter=MassSpring
#include <benchmark/benchmark.h>

#include "bench_util.hpp"
#include "geometry/primitives.hpp"
#include "models/mass_spring/mass_spring.hpp"

namespace {

void BM_MassSpringForces(benchmark::State& state) {
  shellsim::PrimitiveDef sheet;
  sheet.type = shellsim::PrimitiveType::kSheet;
  sheet.resolution = static_cast<int>(state.range(0));
  const shellsim::Geometry mesh = shellsim::makePrimitive(sheet);
  const shellsim::MassSpringModel model(mesh, shellsim::MaterialDef{});
  shellsim::bench::timeGradient(state, model, mesh.positions, 1e-3);
  state.counters["springs"] = static_cast<double>(model.elementCount());
  state.counters["ns_per_spring"] =
      shellsim::bench::nsPer(state, static_cast<double>(model.elementCount()));
}

BENCHMARK(BM_MassSpringForces)
    ->ArgsProduct({{18, 58, 182, 577}, {1, 2}})
    ->ArgNames({"resolution", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
