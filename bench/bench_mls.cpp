// Table 1 of muller2004 on this machine, with the bunny for the paper's Max Planck bust:
// milliseconds of physics per frame (1/30 s simulated) for 200 and 400 phyxels, explicit
// (velocity Verlet at half the stable step, and at the step itself) and implicit (backward
// Euler at 1/120 s, the Newton solve of appendix B, and a quasi-Newton one), the bunny
// dropped on a floor; and the surfel update (eq. 27
// with the normals, section 5.1) for 10k, 20k and 100k surfels on 200 phyxels. The floor is
// a penalty obstacle (backward Euler over a projection floor gains energy at the impact and
// the run retries it at a quarter of the step). The paper's
// figures (Pentium 4, 2.8 GHz): 200 phyxels + 10k surfels 15 ms (explicit) and 22 ms
// (implicit) of physics per frame, 400 + 20k 35 and 60 ms; the surface with rendering 22
// and 50 ms. Run: build/release/bench/shellsim_bench --benchmark_filter=Muller
// Measured 2026-11-30 (Release, native, two runs on a shared 2-core VM; soft bunny, ms per
// frame, 1 / 2 threads): 188 phyxels explicit 1.01-1.26 / 1.02-1.15 (19 steps per frame),
// at the estimate 0.55-0.58 / 0.52-0.64 (10 steps), backward Euler frozen 10.9-11.1 /
// 9.6-12.1 (6.25 Newton iterations per step), quasi-Newton 4.1-4.4 / 3.1-3.2 (8.1); 392
// phyxels 3.6-5.2 / 3.0-3.9 (33 steps), 1.9-2.2 / 1.6-1.9 (17), 85-88 / 67-83 (6.1), 10.8-11.4
// / 8.8-10.1 (9.8). Surfels on 190 phyxels: 10k 1.05-1.30 / 0.58-0.60 ms, 100k 10.8-13.2 /
// 5.5-6.4 ms. Per explicit step 52-64 us for 188 phyxels against the paper's 0.75-1 ms
// (15 ms per frame at its 15-20 steps): 12-19 times.
// Measured 2026-12-05 after the gradient's incidence sums, the inlined energy density and
// the serial loops below 512 phyxels (same machine, medians of 3, on an idle machine first,
// then beside the commit before them on a busier one): BM_MlsGradient 190 / 395 phyxels
// 20.6 / 45.0 us on 1 thread (before 24.7 / 56.8), on 2 threads the same (before 35-41 /
// 60-83); the soft bunny explicit at the default step 0.59 / 2.57 ms per frame, at the
// estimate 0.32 / 1.14 on 1 and 2 threads alike (31-32 and 67-78 us per step; before, on
// the busier machine, 1.01 / 3.62 and 0.54 / 1.88 on 1 thread, 1.15 / 3.59 and 0.63 / 1.98
// on 2; after, there, 0.60-0.64 / 2.57-3.07 and 0.44 / 1.15-1.48). Implicit, quasi-Newton
// 5.5-6.6 / 17.8-22.0 ms (frozen 26-28 / 97-112); with the stand-in kept across frames
// (fff7d19) 2.7-3.6 / 9.6 ms. Per explicit step 31 us for 188 phyxels
// against the paper's 0.75-1 ms: 24-32 times; per frame at the estimate 46 and 31 times the
// paper's 15 and 35 ms, at the default step (half of it) 25 and 14 times.
#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "core/vec3.hpp"
#include "geometry/volume_sampling.hpp"
#include "models/mls/mls_model.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace {

// The integrators of the Table 1 rows: explicit at the default step (half the stable
// estimate), explicit at the estimate itself, backward Euler at 1/120 s with the default
// frozen-factor Newton, and with the quasi-Newton start at a residual of 1e-3.
enum class Table1Run : int64_t { kExplicit, kExplicitAtEstimate, kImplicit, kImplicitQuasiNewton };

std::string bunnyScene(int phyxels, Table1Run run, double young, double timeStep) {
  std::ostringstream s;
  s.precision(17);
  s << R"({"gravity": [0, 0, -9.81], "obstacles": [{"type": "plane", "point": [0, 0, 0],
    "normal": [0, 0, 1], "friction": 0.5, "response": "penalty"}], "bodies": [{"name": "bunny", "file": ")"
    << SHELLSIM_DATA_DIR << R"(/stanford-bunny.obj", "transform": {"scale": 2,
    "rotation_degrees": [90, 0, 0], "translation": [0, 0, 0.05]}, "model": "mls_solid",
    "mls_solid": {"phyxel_count": )"
    << phyxels << R"(}, "material": {"young_modulus": )" << young
    << R"(, "poisson": 0.3, "density": 1000,
    "internal_damping": 10}}], "time": {"duration": 100, "frame_rate": 30)";
  if (run == Table1Run::kImplicit || run == Table1Run::kImplicitQuasiNewton) {
    s << R"(, "integrator": "backward_euler", "time_step": 0.008333333333333333)";
  }
  if (run == Table1Run::kImplicitQuasiNewton) {
    s << R"(, "newton_hessian": "quasi_newton", "newton_tolerance": 1e-3)";
  }
  if (timeStep > 0) s << R"(, "time_step": )" << timeStep;
  s << R"(}, "output": {"folder": "out", "formats": ["ply"], "checkpoint_every": 0}})";
  return s.str();
}

// (phyxels, run, threads, soft): run a Table1Run; E = 5e5 Pa, or with soft = 1 E = 1e4 Pa,
// where the explicit run at the default step takes about the paper's 15-20 steps per frame
// (19 for 200 phyxels; its E is lost in the OCR). The explicit step at the estimate is 0.7 of
// the Verlet limit 2 / omega_max (Lanczos at rest): the soft bunny of 200 phyxels ran 3 s
// without a rejected step at 0.96 of the limit and blew up at 1.15.
void BM_MullerTable1Physics(benchmark::State& state) {
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(2)));
  const auto phyxels = static_cast<int>(state.range(0));
  const auto run = static_cast<Table1Run>(state.range(1));
  const double young = state.range(3) != 0 ? 1e4 : 5e5;
  const auto parse = [&](double timeStep) {
    return shellsim::parseScene(bunnyScene(phyxels, run, young, timeStep), "bunny.json",
                                std::filesystem::temp_directory_path());
  };
  double timeStep = 0;
  if (run == Table1Run::kExplicitAtEstimate)
    timeStep = shellsim::Simulation(parse(0)).stableTimeStep();
  shellsim::Simulation sim(parse(timeStep));
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    sim.advanceFrames(1);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const shellsim::StepStatistics steps = sim.statistics();
  const double frames = static_cast<double>(state.iterations());
  const auto stepCount = static_cast<double>(steps.steps);
  state.counters["phyxels"] = static_cast<double>(sim.masses(0).size());
  state.counters["steps_per_frame"] = stepCount / frames;
  state.counters["newton_per_step"] = static_cast<double>(steps.newtonIterations) / stepCount;
  state.counters["ms_per_frame"] = 1e3 * seconds / frames;
  state.counters["ms_per_simulated_s"] = 1e3 * seconds / (frames / 30.0);
}
BENCHMARK(BM_MullerTable1Physics)
    ->ArgsProduct({{200, 400}, {0, 1, 2, 3}, {1, 2}, {0, 1}})
    ->Iterations(30)
    ->Unit(benchmark::kMillisecond);

// (surfels, threads): the surfels are the bunny's vertices with their normals, cycled with
// small offsets past its 35k, carried by 200 phyxels, at a deformed state.
void BM_MullerSurfels(benchmark::State& state) {
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  shellsim::Geometry bunny =
      shellsim::readGeometry(std::string(SHELLSIM_DATA_DIR) + "/stanford-bunny.obj");
  shellsim::computeVertexNormals(bunny);
  const shellsim::VolumeSampling phyxels = shellsim::sampleVolumeByCount(bunny, 200);
  shellsim::Geometry surfels;
  const auto count = static_cast<size_t>(state.range(0));
  const auto vertices = static_cast<size_t>(bunny.vertexCount());
  for (size_t k = 0; k < count; ++k) {
    const size_t v = k % vertices;
    const double offset = 1e-4 * static_cast<double>(k / vertices);
    for (int c = 0; c < 3; ++c) {
      surfels.positions.push_back(bunny.positions[3 * v + c] + offset);
      surfels.normals.push_back(bunny.normals[3 * v + c]);
    }
  }
  shellsim::MaterialDef material;
  material.youngModulus = 5e5;
  const shellsim::MlsSolidModel model(phyxels.positions, {}, material, shellsim::MlsSolidParams{},
                                      surfels);
  std::vector<double> x(phyxels.positions);
  for (size_t i = 0; i < x.size(); i += 3) x[i + 2] += 0.1 * x[i] * x[i];  // a bend
  for (auto _ : state) {
    const shellsim::Geometry moved = model.surface(x);
    benchmark::DoNotOptimize(moved.positions.data());
  }
  state.counters["surfels"] = static_cast<double>(count);
  state.counters["phyxels"] = static_cast<double>(model.nodeCount());
}
BENCHMARK(BM_MullerSurfels)
    ->ArgsProduct({{10000, 20000, 100000}, {1, 2}})
    ->Unit(benchmark::kMillisecond);

// (phyxels, threads): one gradient of the bunny's MLS solid (the explicit step's force
// evaluation, most of its time) at a bent state, with the misfit penalty: microseconds per
// evaluation and nanoseconds per phyxel. Steadier than the Table 1 rows on a shared machine.
void BM_MlsGradient(benchmark::State& state) {
  const shellsim::Geometry bunny =
      shellsim::readGeometry(std::string(SHELLSIM_DATA_DIR) + "/stanford-bunny.obj");
  const shellsim::VolumeSampling phyxels =
      shellsim::sampleVolumeByCount(bunny, static_cast<int32_t>(state.range(0)));
  shellsim::MaterialDef material;
  material.youngModulus = 1e4;
  const shellsim::MlsSolidModel model(phyxels.positions, phyxels.volumes, material,
                                      shellsim::MlsSolidParams{}, shellsim::Geometry{});
  std::vector<double> x(phyxels.positions);
  for (size_t i = 0; i < x.size(); i += 3) x[i + 2] += 0.1 * x[i] * x[i];  // a bend
  shellsim::bench::timeGradient(state, model, x, 0.0);
  const auto count = static_cast<double>(model.nodeCount());
  state.counters["phyxels"] = count;
  state.counters["ns_per_phyxel"] = shellsim::bench::nsPer(state, count);
}
BENCHMARK(BM_MlsGradient)->ArgsProduct({{200, 400, 2000}, {1, 2}})->Unit(benchmark::kMicrosecond);

// The clamped plate of tests/dynamics/test_plate_models.cpp (1 m, a / h = 100, nu = 0.3,
// aluminium) through every shell model, explicit: (model, cells, threads) with model 0
// discrete_shell, 1 fiber, 2 inelastic_shell, 3 and 4 mls_solid of 2 and 3 layers. Reports
// the nodes, the stable step and the time per step; the deflections are the test's.
void BM_PlateModels(benchmark::State& state) {
  static const char* const kModels[] = {R"("model": "discrete_shell")", R"("model": "fiber")",
                                        R"("model": "inelastic_shell")",
                                        R"("model": "mls_solid", "mls_solid": {"layers": 2})",
                                        R"("model": "mls_solid", "mls_solid": {"layers": 3})"};
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(2)));
  std::ostringstream scene;
  scene << R"({"gravity": [0, 0, -9.81], "bodies": [{"name": "plate", "primitive": {"type":
    "sheet", "size": [1, 1, 0], "resolution": )"
        << state.range(1) << R"(}, )" << kModels[state.range(0)]
        << R"(, "material": {"young_modulus": 7e10, "poisson": 0.3, "thickness": 0.01,
    "density": 2700}, "pins": [{"shape": "box", "center": [0.5, 0, 0], "half_extents": [0.001,
    1, 0.01]}, {"shape": "box", "center": [-0.5, 0, 0], "half_extents": [0.001, 1, 0.01]},
    {"shape": "box", "center": [0, 0.5, 0], "half_extents": [1, 0.001, 0.01]}, {"shape": "box",
    "center": [0, -0.5, 0], "half_extents": [1, 0.001, 0.01]}]}], "time": {"duration": 100,
    "frame_rate": 10000}, "output": {"folder": "out", "formats": ["ply"], "checkpoint_every": 0}})";
  const shellsim::SceneDef def =
      shellsim::parseScene(scene.str(), "plate.json", std::filesystem::temp_directory_path());
  shellsim::Simulation sim(def);
  sim.advanceFrames(1);  // warm: the first frame sizes the buffers
  const int64_t before = sim.statistics().steps;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    sim.advanceFrames(1);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const auto steps = static_cast<double>(sim.statistics().steps - before);
  state.counters["nodes"] = static_cast<double>(sim.masses(0).size());
  state.counters["stable_step_us"] = 1e6 * sim.stableTimeStep(0);
  state.counters["us_per_step"] = 1e6 * seconds / steps;
  state.counters["s_per_simulated_s"] = seconds / (static_cast<double>(state.iterations()) / 1e4);
}
BENCHMARK(BM_PlateModels)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {32}, {2}})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

}  // namespace
