// Rendering one 1280x720 frame on 1 and 2 threads: 240,000 surfels (a point-sampled sphere) and
// a 69,451-triangle mesh (the Stanford bunny). Each iteration is what `shellsim render`
// does per frame after reading the file: surfel radii and normals from the cached neighbour
// lists, the Embree BVH refitted (rebuilt every 17th frame), one primary and one shadow ray
// per pixel; PNG encoding is not included (BM_WritePng720p times it). The first render,
// which builds the neighbour lists, is outside the timing. 34 iterations hold 2 rebuilds
// and 32 refits, the mix of a long run.
//
// "Time" is wall-clock time; "CPU" is the CPU time of the whole process (both threads), so
// on a busy shared machine CPU / 2 is what the frame costs on 2 idle cores.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numbers>

#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/render.hpp"

namespace {

const std::filesystem::path kData = SHELLSIM_DATA_DIR;

// Points on a Fibonacci spiral over a sphere: even spacing, like a sampled shell.
shellsim::Geometry fibonacciSphere(int n, double radius, const shellsim::Vec3d& centre) {
  shellsim::Geometry g;
  const double golden = std::numbers::pi * (3 - std::sqrt(5.0));
  for (int i = 0; i < n; ++i) {
    const double z = 1 - 2 * (i + 0.5) / n;
    const double r = std::sqrt(1 - z * z);
    const double a = golden * i;
    const double p[3] = {r * std::cos(a), r * std::sin(a), z};
    for (int c = 0; c < 3; ++c) {
      g.positions.push_back(centre[c] + radius * p[c]);
      g.normals.push_back(p[c]);
    }
  }
  return g;
}

// With SHELLSIM_BENCH_IMAGES=DIR set, the first frame of each benchmark is written to
// DIR/<name>.png, to look at what is being timed.
void renderBody(benchmark::State& state, shellsim::Geometry geometry, const char* name) {
  const shellsim::ThreadLimit threads(static_cast<int>(state.range(0)));
  const shellsim::Bounds b = shellsim::computeBounds(geometry);
  shellsim::Stage stage;
  stage.groundPoint = {0, 0, b.min[2]};
  stage.extent = std::hypot(b.max[0] - b.min[0], b.max[1] - b.min[1], b.max[2] - b.min[2]);
  const shellsim::Camera camera = shellsim::fitCamera(b, {0, 0, 1}, 1280.0 / 720.0);
  std::vector<shellsim::RenderBody> bodies(1);
  bodies[0].geometry = std::move(geometry);
  bodies[0].color = {0.9f, 0.55f, 0.2f};
  shellsim::Renderer renderer({});
  const shellsim::Image first = renderer.render(bodies, stage, camera);
  if (const char* dir = std::getenv("SHELLSIM_BENCH_IMAGES")) {
    shellsim::writePng(std::filesystem::path(dir) / (std::string(name) + ".png"), first);
  }
  for (auto _ : state) {
    const shellsim::Image image = renderer.render(bodies, stage, camera);
    benchmark::DoNotOptimize(image.rgb.data());
  }
}

void BM_RenderSurfels240k(benchmark::State& state) {
  renderBody(state, fibonacciSphere(240000, 0.5, {0, 0, 0.6}), "surfels240k");
}
BENCHMARK(BM_RenderSurfels240k)
    ->Iterations(34)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_RenderBunnyMesh70k(benchmark::State& state) {
  shellsim::Geometry bunny;
  try {
    bunny = shellsim::readGeometry(kData / "stanford-bunny.obj");
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  renderBody(state, std::move(bunny), "bunny70k");
}
BENCHMARK(BM_RenderBunnyMesh70k)
    ->Iterations(34)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_WritePng720p(benchmark::State& state) {
  shellsim::Image image(1280, 720);
  for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = static_cast<uint8_t>((i * 7) % 251);
  const auto path = std::filesystem::temp_directory_path() / "shellsim_bench_frame.png";
  for (auto _ : state) shellsim::writePng(path, image);
  std::filesystem::remove(path);
}
BENCHMARK(BM_WritePng720p)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
