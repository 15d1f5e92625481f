// Force evaluation of the fiber model (wicke2005): time per fiber on regular sheet
// networks of ~10^3 to ~10^6 fibers with 1 and 2 threads, the model's bytes per fiber
// (all of its arrays, nodes included, scratch included), and a STREAM triad for the
// machine's memory bandwidth to compare with. Run: build/release/bench/shellsim_bench
//   --benchmark_filter='Fiber|StreamTriad'
//
// Measured 2026-11-26 on a 2-core Xeon (Ice Lake, AVX-512, 2.8 GHz) shared with other jobs
// (load average 4.5 to 6 on the 2 cores, so every figure is inflated and noisy): CPU time of
// the calling thread per fiber, the smallest of 5 repetitions
// (--benchmark_filter='BM_FiberForces/side:(158|500)' --benchmark_repetitions=5), in ns.
// With 2 threads the calling thread does its half, so its CPU time approximates the wall
// time of an unloaded machine.
//                              10^5 fibers       10^6 fibers      bytes
//                             1 thr   2 thr     1 thr   2 thr    / fiber
//   before (517381e), -O3      159     116       199      97      208.0 / 208.7
//   after,            -O3      104      58       116      61      214.0 / 214.7
//   before, -O3 -march=native  152      93       147      62
//   after,  -O3 -march=native   74      43        66      36
// STREAM triad in the same runs: 7 to 10 GB/s with 1 or 2 threads. Issue 3's target (8 ns at
// 10^5 and 15 ns at 10^6 with 2 threads) is not reached. Where the time goes (perf, 10^5
// fibers, 1 thread, -march=native): pass 1's per-node sums, per-lane multipliers, frame
// shares and write-back 42 %, the lane-parallel kernel (fiber::evaluateBatch) 19 %, the patch
// frames 16 %, gathering (e, q, N) 12 %, pass 2 (the per-node gather) 11 %.
// Re-measured 2026-11-26 09:07 on the idle machine (load ~1.2), the default build (Release,
// -march=native), --benchmark_filter='BM_FiberForces/side:(158|500)/|StreamTriad'
// --benchmark_repetitions=3, real time per fiber (mean): 10^5 fibers 75.5 ns (1 thr), 38.9 ns
// (2 thr, 1.94x); 10^6 fibers 69.5 ns, 50.2 ns (1.38x: bandwidth-bound); STREAM triad 17 ms
// (1 thr), 8 ms (2 thr). Main before the batch kernel, built the same way: 150 and 78 ns at
// 10^5.
#include <benchmark/benchmark.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "geometry/sampling.hpp"
#include "models/fiber/fiber_model.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"

namespace {

// side x side grid of spacing 1 cm in z = 0; interior nodes are the centre of 4 fibers.
shellsim::FiberNodes sheetNodes(int side) {
  shellsim::FiberNodes nodes;
  const double h = 0.01;
  for (int j = 0; j < side; ++j) {
    for (int i = 0; i < side; ++i) {
      nodes.positions.insert(nodes.positions.end(), {h * i, h * j, 0.0});
      nodes.normals.insert(nodes.normals.end(), {0.0, 0.0, 1.0});
      nodes.areas.push_back(h * h);
    }
  }
  return nodes;
}

// The gradient of `model` at its nodes moved by up to `jitter` (m) per coordinate, with
// state.range(1) threads; counters: fibers, bytes per fiber, ns per fiber.
void measureForces(benchmark::State& state, const shellsim::FiberModel& model,
                   const shellsim::FiberNodes& nodes, double jitter) {
  std::vector<double> x = nodes.positions;
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-jitter, jitter);
  for (double& v : x) v += u(rng);
  std::vector<double> gradient(x.size());
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    benchmark::DoNotOptimize(model.addGradient(x, gradient));
    benchmark::ClobberMemory();
  }
  const auto fibers = static_cast<double>(model.elementCount());
  state.counters["fibers"] = fibers;
  state.counters["bytes_per_fiber"] = static_cast<double>(model.memoryBytes()) / fibers;
  state.counters["ns_per_fiber"] =
      benchmark::Counter(fibers * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_FiberForces(benchmark::State& state) {
  const shellsim::FiberNodes nodes = sheetNodes(static_cast<int>(state.range(0)));
  const shellsim::FiberModel model(nodes, shellsim::MaterialDef{});
  measureForces(state, model, nodes, 1e-4);
}

// ~10^3, 10^4, 10^5, 10^6 fibers (4 per node).
BENCHMARK(BM_FiberForces)
    ->ArgsProduct({{16, 50, 158, 500}, {1, 2}})
    ->ArgNames({"side", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Real surfaces, whose node order is the file's: every vertex of the Stanford bunny (35,947
// nodes), and the Igea point set clustered to 10^5 nodes (geometry/sampling.hpp) as a scene's
// `node_count` would. Same measurement as BM_FiberForces.
shellsim::FiberNodes surfaceNodes(int which) {
  shellsim::FiberNodes nodes;
  if (which == 0) {
    shellsim::Geometry mesh = shellsim::readGeometry(SHELLSIM_DATA_DIR "/stanford-bunny.obj");
    shellsim::computeVertexNormals(mesh);
    const std::vector<double> areas = shellsim::pointAreas(mesh);
    for (size_t v = 0; v < areas.size(); ++v) {
      if (!(areas[v] > 0)) continue;  // vertices of no triangle
      nodes.areas.push_back(areas[v]);
      for (size_t c = 0; c < 3; ++c) {
        nodes.positions.push_back(mesh.positions[3 * v + c]);
        nodes.normals.push_back(mesh.normals[3 * v + c]);
      }
    }
  } else {
    shellsim::Geometry cloud = shellsim::readGeometry(SHELLSIM_DATA_DIR "/igea.ply");
    if (!cloud.hasNormals()) shellsim::estimateNormals(cloud);
    shellsim::SamplingParams sampling;
    sampling.targetNodeCount = 100000;
    shellsim::NodeSampling clusters = shellsim::clusterSurface(cloud, sampling);
    nodes.positions = std::move(clusters.positions);
    nodes.normals = std::move(clusters.normals);
    nodes.areas = std::move(clusters.areas);
  }
  return nodes;
}

void BM_FiberForcesSurface(benchmark::State& state) {
  static const shellsim::FiberNodes bunny = surfaceNodes(0);
  static const shellsim::FiberNodes igea = surfaceNodes(1);
  const shellsim::FiberNodes& nodes = state.range(0) == 0 ? bunny : igea;
  std::unique_ptr<shellsim::FiberModel> built;
  try {
    built = std::make_unique<shellsim::FiberModel>(nodes, shellsim::MaterialDef{});
  } catch (const std::exception& error) {
    state.SkipWithError(error.what());
    return;
  }
  measureForces(state, *built, nodes, 1e-5);
}
BENCHMARK(BM_FiberForcesSurface)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"surface", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// STREAM triad a = b + s c over 3 x 64 MiB, counted as 24 bytes per element.
void BM_StreamTriad(benchmark::State& state) {
  const size_t n = size_t{1} << 23;
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(0)));
  const double s = 3.0;
  for (auto _ : state) {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, size_t{1} << 16),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i != r.end(); ++i) a[i] = b[i] + s * c[i];
                      });
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(24 * n));
}
BENCHMARK(BM_StreamTriad)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
