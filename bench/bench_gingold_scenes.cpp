// The gingold2004 scenes as a user runs them: time per step and per simulated second.
//
// BM_TubeDrop: scenes/inelastic_tube_drop.json (Fig. 12; 880 nodes, 1,680 faces, Newmark
// at 20 us with plastic_step 0.25, penalty obstacles), the first 30 ms: the fall onto the
// box edge, the dent and the rebound, one 10 ms frame (500 planned steps, split while the
// dent flows) per iteration. The paper gives 11 minutes for its
// whole tube run on a 1.7 GHz P4, without its length or mesh.
// Run (Release build):
//   build/release/bench/shellsim_bench --benchmark_filter=TubeDrop
// Measured 2026-11-30 17:12, 2 threads, idle: 2,326 steps, 21.5 ms per step, 4.41 Newton
// iterations, 1,666 s per simulated second; the whole scene 7 min 15 s (`shellsim run`:
// 18,601 steps, 171 rejected). The same 30 ms without plastic_step (the dent five times too
// deep) took 45.3 s, 1,500 steps at 6.1 Newton iterations, against 47.8 s with it
// (/tmp/probe/sstat, 2 threads). Earlier, with fewer Newton iterations per step (not traced),
// measured 2026-11-27 16:14 on the 2-core Xeon, 2 threads: 13.0 ms per step (4.08 Newton
// iterations, 0.39 factorizations), 648 s per simulated second; the whole 0.35 s scene
// about 4 minutes. perf (1 thread, 20 ms of it): 49 % in the block Cholesky factorization
// (about 33 ms each, the 12-node quadratic-patch stencils couple nodes four rings apart),
// 11 % assembling the Hessian, 9 % triangular solves, 16 % the patch bending forces.
#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "shellsim/parallel.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace {

void BM_TubeDrop(benchmark::State& state) {
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(0)));
  const shellsim::SceneDef scene =
      shellsim::loadScene(std::string(SHELLSIM_SCENES_DIR) + "/inelastic_tube_drop.json");
  shellsim::Simulation sim(scene);
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    sim.advanceFrames(1);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const shellsim::StepStatistics& s = sim.statistics();
  const auto steps = static_cast<double>(s.steps);
  state.counters["steps"] = steps;
  state.counters["ms_per_step"] = 1e3 * seconds / steps;
  state.counters["s_per_simulated_s"] = seconds / sim.time();
  state.counters["newton_per_step"] = static_cast<double>(s.newtonIterations) / steps;
  state.counters["factorizations_per_step"] = static_cast<double>(s.factorizations) / steps;
}

BENCHMARK(BM_TubeDrop)->Arg(2)->ArgName("threads")->Iterations(3)->Unit(benchmark::kSecond);

// BM_SheetTear: a whole run of scenes/inelastic_sheet_tear*.json (Fig. 8) as `shellsim run`
// makes it, frames written, per iteration: the notched sheet pulled apart, the step search
// resolving the tear; the summary's phase times say where the time goes (the implicit steps'
// forces, Hessian and solves under "integrate", the fracture tests, cuts and budges under
// "inelastic"). Arg: 0 the 1,600-face sheet with budging, 1 without, 2 the 6,400-face sheet
// without (the paper's "four times as many faces").
//   build/release/bench/shellsim_bench --benchmark_filter=SheetTear
// Measured 2026-11-27 19:15 on the 2-core Xeon, idle, 2 threads (15 ms simulated each):
//   budging     21.2 s, 1,182 steps + 432 rejected, 17.9 ms per accepted step, 1,410 s per
//               simulated second; integrate 86 %, fracture and plasticity 3.3 %, output 5 %
//   no budging  21.8 s, 1,258 + 508, 17.3 ms, 1,453 s per simulated second; integrate 91 %
//   4x faces    242 s, 1,422 + 672, 170 ms, 16,121 s per simulated second; integrate 96 %
// The paper gives 8-30 minutes for its sheet runs (mesh and length not given). Where the
// time goes: the implicit steps (Hessian, block Cholesky of the 12-node stencils, solves);
// every cut changes the sparsity and forces a new analysis and factorization, and the
// search's rejected halves cost as much as accepted steps.
void BM_SheetTear(benchmark::State& state) {
  const shellsim::ThreadLimit limit(2);
  const char* names[] = {"inelastic_sheet_tear", "inelastic_sheet_tear_no_budging",
                         "inelastic_sheet_tear_fine"};
  const std::string name = names[state.range(0)];
  const shellsim::SceneDef scene =
      shellsim::loadScene(std::string(SHELLSIM_SCENES_DIR) + "/" + name + ".json");
  shellsim::RunOptions options;
  options.outputFolder = std::filesystem::temp_directory_path() / ("shellsim_bench_" + name);
  double seconds = 0;
  nlohmann::json summary;
  for (auto _ : state) {
    std::filesystem::remove_all(*options.outputFolder);
    const auto start = std::chrono::steady_clock::now();
    const shellsim::RunReport report = shellsim::runScene(scene, options);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::ifstream in(report.summaryPath);
    summary = nlohmann::json::parse(in);
  }
  const double runs = static_cast<double>(state.iterations());
  const double steps = summary["steps"].get<double>();
  state.counters["steps"] = steps;
  state.counters["rejected_steps"] = summary["steps_rejected"].get<double>();
  state.counters["ms_per_step"] = 1e3 * seconds / runs / steps;
  state.counters["s_per_simulated_s"] = seconds / runs / scene.time.duration;
  state.counters["faces_at_end"] = summary["bodies"][0]["elements"].get<double>();
  const nlohmann::json& phases = summary["phase_seconds"];
  for (const char* phase : {"integrate", "inelastic", "contact", "output"}) {
    state.counters[std::string(phase) + "_share"] = phases[phase].get<double>() / (seconds / runs);
  }
  std::filesystem::remove_all(*options.outputFolder);
}

BENCHMARK(BM_SheetTear)
    ->DenseRange(0, 2)
    ->ArgName("sheet")
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace
