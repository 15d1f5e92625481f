// High-resolution surface (wicke2005 section 6): time of SurfaceBinding::deform (positions
// and normals into a caller-owned Geometry) for 10k, 25k, 41k and 240k passive points on a
// unit sphere, bound to 1/20 as many nodes (240k points: 12k nodes), K = 8, with 1 and 2
// threads; the nodes are displaced randomly by 1% of their spacing. Also the binding's bytes
// per point, positions alone, and the time to bind. Run: build/release/bench/shellsim_bench
//   --benchmark_filter=Surface
#include <benchmark/benchmark.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "shellsim/parallel.hpp"
#include "surface/surface_binding.hpp"

namespace {

// n points of a Fibonacci spiral on the unit sphere, ordered pole to pole, with normals.
shellsim::Geometry fibonacciSphere(int n) {
  shellsim::Geometry g;
  const double golden = std::numbers::pi * (3.0 - std::sqrt(5.0));
  for (int i = 0; i < n; ++i) {
    const double z = 1.0 - (2.0 * i + 1.0) / n;
    const double r = std::sqrt(1.0 - z * z);
    const double phi = golden * i;
    g.positions.insert(g.positions.end(), {r * std::cos(phi), r * std::sin(phi), z});
    g.normals.insert(g.normals.end(), {r * std::cos(phi), r * std::sin(phi), z});
  }
  return g;
}

struct SurfaceCase {
  shellsim::Geometry dense;
  std::vector<double> nodes;
  std::vector<double> x;
};

SurfaceCase surfaceCase(int points) {
  SurfaceCase c;
  c.dense = fibonacciSphere(points);
  const int nodeCount = points / 20;
  c.nodes = fibonacciSphere(nodeCount).positions;
  c.x = c.nodes;
  const double spacing = std::sqrt(4 * std::numbers::pi / nodeCount);
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-0.01 * spacing, 0.01 * spacing);
  for (double& v : c.x) v += u(rng);
  return c;
}

void BM_SurfaceDeform(benchmark::State& state) {
  const SurfaceCase c = surfaceCase(static_cast<int>(state.range(0)));
  const shellsim::SurfaceBinding binding(c.nodes, c.dense);
  shellsim::Geometry out;
  binding.deform(c.x, out);  // sizes `out`
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    binding.deform(c.x, out);
    benchmark::DoNotOptimize(out.positions.data());
    benchmark::ClobberMemory();
  }
  const auto points = static_cast<double>(binding.vertexCount());
  state.counters["nodes"] = binding.nodeCount();
  state.counters["bytes_per_point"] = static_cast<double>(binding.memoryBytes()) / points;
  state.counters["ns_per_point"] =
      benchmark::Counter(points * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SurfaceDeform)
    ->ArgsProduct({{10000, 25000, 41000, 240000}, {1, 2}})
    ->ArgNames({"points", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Positions only (deformPoints without normals), 240k points.
void BM_SurfaceDeformPositions(benchmark::State& state) {
  const SurfaceCase c = surfaceCase(static_cast<int>(state.range(0)));
  const shellsim::SurfaceBinding binding(c.nodes, c.dense);
  std::vector<double> positions(3 * static_cast<size_t>(binding.vertexCount()));
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    binding.deformPoints(c.x, positions, {});
    benchmark::DoNotOptimize(positions.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_SurfaceDeformPositions)
    ->ArgsProduct({{240000}, {1, 2}})
    ->ArgNames({"points", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SurfaceBind(benchmark::State& state) {
  const SurfaceCase c = surfaceCase(static_cast<int>(state.range(0)));
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    const shellsim::SurfaceBinding binding(c.nodes, c.dense);
    benchmark::DoNotOptimize(binding.vertexCount());
  }
}
BENCHMARK(BM_SurfaceBind)
    ->ArgsProduct({{240000}, {1, 2}})
    ->ArgNames({"points", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

}  // namespace
