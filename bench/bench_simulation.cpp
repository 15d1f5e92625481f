// What users feel: wall time per frame and per simulated second of whole scenes, stepped
// through the public API only (shellsim/world.hpp; no src/ header), with the scene's own
// integrator and automatic step. Each iteration advances one frame (1/30 s at the scenes'
// frame rate) from where the last left off, as a run does; nothing is written.
//   default          the 1 m fiber sheet dropped on a sphere (explicit)
//   cloth_on_sphere  mass_spring_cloth_on_sphere (explicit)
//   bowl_drop        discrete_shell_bowl_drop (backward Euler)
//   poster_tear      fiber_poster_tear, the first frames of the tear (explicit, fracture)
// Run: build/release/bench/shellsim_bench --benchmark_filter=Simulation
#include <benchmark/benchmark.h>

#include <string>

#include "shellsim/parallel.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace {

shellsim::SceneDef sceneOf(int which) {
  const std::string scenes = SHELLSIM_SCENES_DIR;
  switch (which) {
    case 0: return shellsim::defaultScene();
    case 1: return shellsim::loadScene(scenes + "/mass_spring_cloth_on_sphere.json");
    case 2: return shellsim::loadScene(scenes + "/discrete_shell_bowl_drop.json");
    default: return shellsim::loadScene(scenes + "/fiber_poster_tear.json");
  }
}

void BM_SimulationFrame(benchmark::State& state) {
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  const shellsim::SceneDef scene = sceneOf(static_cast<int>(state.range(0)));
  shellsim::Simulation sim(scene);
  for (auto _ : state) sim.advanceFrames(1);
  const double frames = static_cast<double>(state.iterations());
  const shellsim::StepStatistics& s = sim.statistics();
  state.counters["nodes"] = sim.nodeCount(0);
  state.counters["steps_per_frame"] = static_cast<double>(s.steps) / frames;
  state.counters["dt_s"] = sim.timeStep();
  state.counters["rejected_steps"] = static_cast<double>(s.rejectedSteps);
  // Wall seconds per simulated second, from the per-frame time (Google Benchmark's real
  // time per iteration): multiply the reported ms per frame by the frame rate / 1000.
  state.counters["frame_rate"] = scene.time.frameRate;
  state.SetLabel(sim.bodyName(0) + " (" + sim.modelName(0) + ")");
}

// (scene, threads); a fixed number of frames, so every variant simulates the same motion.
BENCHMARK(BM_SimulationFrame)
    ->ArgsProduct({{0, 1, 2, 3}, {1, 2}})
    ->Iterations(15)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
