// Force evaluation of the inelastic shell (gingold2004): time per face of one energy and
// gradient pass (every face's six-node stencil: Green membrane strain and the shape-operator
// bending of its three hinges, then the gather pass per node) on equilateral sheets of
// ~7 * 10^3 faces (in cache) and ~7 * 10^4, with 1 and 2 threads.
// Run (Release build):
//   build/release/bench/shellsim_bench --benchmark_filter=InelasticShellForces
// The stencils are evaluated one face at a time in scalar code (no lanes yet); the discrete
// shell's batched kernel (bench_discrete_shell.cpp) is the model for making it faster.
// Measured 2026-11-27 07:30 on the 2-core Xeon (--benchmark_min_time=0.3, one run), ns per
// face: side 58 (6,498 faces) 193 on 1 thread, 98 on 2; side 183 (66,248 faces) 207 and 101.
// Each face evaluates its three hinges' dihedral angles (every interior hinge twice, once
// per face), about 25 times the discrete shell's cost per hinge.
#include <benchmark/benchmark.h>

#include "bench_util.hpp"
#include "geometry/primitives.hpp"
#include "models/inelastic_shell/inelastic_shell_model.hpp"

namespace {

void BM_InelasticShellForces(benchmark::State& state) {
  // side x side equilateral lattice of spacing 1 cm: ~2 side^2 faces.
  const int side = static_cast<int>(state.range(0));
  const shellsim::Geometry mesh = shellsim::makeEquilateralLattice(side, side, 0.01);
  const shellsim::InelasticShellModel model(mesh, shellsim::MaterialDef{});
  shellsim::bench::timeGradient(state, model, mesh.positions, 1e-4);
  const auto faces = static_cast<double>(model.elementCount());
  state.counters["faces"] = faces;
  state.counters["ns_per_face"] = shellsim::bench::nsPer(state, faces);
}

BENCHMARK(BM_InelasticShellForces)
    ->ArgsProduct({{58, 183}, {1, 2}})
    ->ArgNames({"side", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
