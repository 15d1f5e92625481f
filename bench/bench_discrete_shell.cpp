// Force evaluation of the discrete-shell model (grinspun2003): time per hinge and per
// triangle on equilateral sheets of ~10^4 hinges (in cache), ~10^5 and ~10^6, with 1 and
// 2 threads. An evaluation runs the edge and hinge stencil families and, when the Poisson
// ratio is >= 1/3, the triangle (area) family; one gather pass sums their gradients per node.
// Run (Release build; -march=native is the default, SHELLSIM_NATIVE_ARCH=OFF gives "rel"):
//   build/release/bench/shellsim_bench --benchmark_filter=DiscreteShellForces
// Figures count the whole evaluation (edges, triangles and the gather pass included) per
// hinge. Measured 2026-11-26 13:06-13:08 on the 2-core Xeon @ 2.8 GHz (AVX-512, Ice Lake
// server, 1.25 MB L2 per core), shared with other virtual machines: its speed swings by up
// to 40% from hour to hour, so "before" (commit ef472c7) and "after" (this code) ran
// alternately, 10 rounds of --benchmark_min_time=0.3 each; real time per evaluation,
// smallest / median of the 10, in ns per hinge:
//                                          before         after
//   nu = 0.3 (edges + hinges), side 58 (9,633 hinges, in cache):
//     1 thread                             20.4 / 21.7    14.4 / 15.3
//     2 threads                            11.3 / 12.1     7.75 / 8.35   (target <= 8)
//   nu = 0.3, side 183 (99,008 hinges):
//     1 thread                             28.0 / 32.2    18.9 / 22.6
//     2 threads                            12.2 / 13.1     8.4 / 9.1
//   nu = 0.45 (edges, triangles, hinges), side 58, 2 threads, per triangle (6,498):
//                                          26.3 / 29.8    16.8 / 18.4
// What changed (perf, side 58, 1 thread): node positions used to be gathered into the
// lanes by scalar loads and partial stores (33% of the time, and the kernel's 512-bit loads
// of those stores could not be forwarded); they are now 256-bit loads transposed in
// registers (core/lane_gather.hpp). The gather pass adds a slot with one masked 256-bit
// load. Parallel tasks are 32 batches and 256 nodes, which balances ~10k hinges on two
// threads. Now the hinge+edge kernel with its gather is ~65% (latency-bound: square root,
// then atan2's division, then its polynomial, on one chain per batch), the gather pass ~30%.
// Tried and dropped, all slower or within the noise: hardware gathers (vgatherdpd, +45%),
// gradients in (slot, axis, lane) order (the gather pass then loads 3 scalars per slot),
// adding straight into the node gradients instead of slots (+50%), gathering each node
// right after its last hinge batch, software prefetch, 4 partial sums, two batches per
// loop iteration, the static partitioner (worse with triangles or out of cache).
#include <benchmark/benchmark.h>


#include "bench_util.hpp"
#include "geometry/primitives.hpp"
#include "models/discrete_shell/discrete_shell_model.hpp"

namespace {

void BM_DiscreteShellForces(benchmark::State& state) {
  // side x side equilateral lattice of spacing 1 cm: ~2 side^2 triangles, ~3 side^2 hinges.
  const int side = static_cast<int>(state.range(0));
  const shellsim::Geometry mesh = shellsim::makeEquilateralLattice(side, side, 0.01);
  shellsim::MaterialDef material;
  material.poisson = 0.01 * static_cast<double>(state.range(2));
  const shellsim::DiscreteShellModel model(mesh, material);
  shellsim::bench::timeGradient(state, model, mesh.positions, 1e-4);
  const auto hinges = static_cast<double>(model.hingeCount());
  const auto triangles = static_cast<double>(model.triangleCount());
  state.counters["hinges"] = hinges;
  state.counters["triangles"] = triangles;
  state.counters["ns_per_hinge"] = shellsim::bench::nsPer(state, hinges);
  state.counters["ns_per_triangle"] = shellsim::bench::nsPer(state, triangles);
}

// ~10^4 (in cache), ~10^5 and ~10^6 hinges; Poisson ratio 0.3 (no area term: edges and
// hinges only) and 0.45 (edges, triangles and hinges).
BENCHMARK(BM_DiscreteShellForces)
    ->ArgsProduct({{58, 183, 578}, {1, 2}, {30, 45}})
    ->ArgNames({"side", "threads", "poisson_pct"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
