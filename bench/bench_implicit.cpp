// Implicit integration (dynamics/implicit.hpp).
//
// BM_ImplicitNewtonIteration: time per Newton iteration (gradient, Hessian assembly,
//   Cholesky or CG solve, line search) of a backward Euler step of a 1 mm aluminium
//   mass-spring sheet hanging from one edge, at 20x the explicit stable step, for sheets of
//   ~1k, 10k and 100k dofs, with the direct (solver:0) and the CG (solver:1) linear solver.
// BM_StiffSheetStep: cost per step on the same sheet (33 x 33 nodes): explicit velocity
//   Verlet (method:0) at the largest step that survives 2000 steps (found by search,
//   counter dt_over_estimate) versus Newmark beta 1/4 (method:1) and backward Euler
//   (method:2) at 20x and 100x the estimate (factor), and the same with frozenHessian
//   (method:3, 4). model:1 repeats explicit, Newmark and Euler with the fiber model on a
//   17 x 17 node sheet, model:2 with the discrete-shell model on the 33 x 33 sheet (also
//   at 10x).
// Run (Release build):
//   build/rel/bench/shellsim_bench --benchmark_filter='Implicit|StiffSheet'
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "dynamics/implicit.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"

namespace {

using namespace shellsim;

SceneDef aluminiumScene(int resolution, const std::string& model = "mass_spring") {
  BodyDef body;
  body.name = "aluminium";
  PrimitiveDef sheet;
  sheet.type = PrimitiveType::kSheet;
  sheet.size = {0.5, 0.5, 0};
  sheet.resolution = resolution;
  body.primitive = sheet;
  body.model = model;
  body.material.youngModulus = 70e9;
  body.material.thickness = 1e-3;
  body.material.density = 2700;
  body.material.poisson = 0.33;
  PinDef pin;
  pin.shape = PinShape::kBox;
  pin.center = {-0.25, 0, 0};
  pin.halfExtents = {1e-3, 0.3, 1e-3};
  body.pins.push_back(pin);
  SceneDef scene;
  scene.bodies.push_back(body);
  return scene;
}

constexpr double kImplicitStepFactor = 20;

void BM_ImplicitNewtonIteration(benchmark::State& state) {
  const int resolution = static_cast<int>(state.range(0));
  World world = buildWorld(aluminiumScene(resolution));
  computeAccelerations(world);
  ImplicitSettings settings;
  settings.scheme = ImplicitScheme::kBackwardEuler;
  if (state.range(1) == 1) settings.newton.directMaxDofs = 0;
  settings.newton.maxIterations = 100;
  ImplicitStepper stepper(settings);
  const double dt = kImplicitStepFactor * stableTimeStep(world);
  PhaseTimes times;
  (void)stepper.step(world, dt, times);  // warm-up: symbolic analysis
  int64_t iterations = 0, linear = 0, steps = 0;
  for (auto _ : state) {
    const ImplicitStepReport report = stepper.step(world, dt, times);
    iterations += report.totalIterations();
    linear += report.bodies[0].linearIterations;
    ++steps;
  }
  state.counters["dofs"] = static_cast<double>(3 * world.bodies[0].nodeCount());
  state.counters["newton_per_step"] =
      static_cast<double>(iterations) / static_cast<double>(std::max<int64_t>(steps, 1));
  state.counters["cg_per_newton"] =
      static_cast<double>(linear) / static_cast<double>(std::max<int64_t>(iterations, 1));
  state.counters["s_per_newton"] = benchmark::Counter(
      static_cast<double>(iterations), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_ImplicitNewtonIteration)
    ->ArgsProduct({{17, 57, 182}, {0, 1}})
    ->ArgNames({"resolution", "solver"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

// Largest multiple of the stable-step estimate at which explicit stepping survives 2000
// steps, among a fixed ladder of factors.
double largestExplicitFactor(int resolution, const std::string& model) {
  double best = 0;
  for (double factor : {0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0}) {
    World world = buildWorld(aluminiumScene(resolution, model));
    computeAccelerations(world);
    const EnergyGuard guard(world);
    const double dt = factor * stableTimeStep(world);
    PhaseTimes times;
    try {
      for (int s = 0; s < 2000; ++s) step(world, dt, times);
      guard.check(world);
      best = factor;
    } catch (const NumericalError&) {
      break;
    }
  }
  return best;
}

// model: 0 mass-spring, 1 fiber, 2 discrete shell.
constexpr const char* kStiffSheetModels[] = {"mass_spring", "fiber", "discrete_shell"};

void BM_StiffSheetStep(benchmark::State& state) {
  const std::string model = kStiffSheetModels[state.range(2)];
  const int resolution = state.range(2) == 1 ? 16 : 32;
  // 0 explicit; 1 Newmark, 2 backward Euler (full Newton); 3, 4 the same, frozenHessian.
  const int method = static_cast<int>(state.range(0));
  World world = buildWorld(aluminiumScene(resolution, model));
  computeAccelerations(world);
  const double estimate = stableTimeStep(world);
  const double factor =
      method == 0 ? largestExplicitFactor(resolution, model) : static_cast<double>(state.range(1));
  const double dt = factor * estimate;
  ImplicitSettings settings;
  settings.scheme = method % 2 == 0 ? ImplicitScheme::kBackwardEuler : ImplicitScheme::kNewmark;
  settings.newton.frozenHessian = method == 3 || method == 4;
  if (method == 5) settings.newton.reuseFactorization = false;
  ImplicitStepper stepper(settings);
  PhaseTimes times;
  // Warm-up: the first implicit step analyses the pattern and factorizes; the timed steps
  // show the steady state.
  if (method != 0) (void)stepper.step(world, dt, times);
  int64_t iterations = 0, frozen = 0, factorizations = 0, steps = 0;
  for (auto _ : state) {
    if (method == 0) {
      step(world, dt, times);
    } else {
      const ImplicitStepReport report = stepper.step(world, dt, times);
      iterations += report.totalIterations();
      frozen += report.bodies[0].frozenIterations;
      factorizations += report.bodies[0].factorizations;
    }
    ++steps;
  }
  state.counters["factorizations_per_step"] =
      static_cast<double>(factorizations) / static_cast<double>(std::max<int64_t>(steps, 1));
  state.counters["frozen_per_step"] =
      static_cast<double>(frozen) / static_cast<double>(std::max<int64_t>(steps, 1));
  state.counters["dt_s"] = dt;
  state.counters["dt_over_estimate"] = factor;
  state.counters["newton_per_step"] =
      static_cast<double>(iterations) / static_cast<double>(std::max<int64_t>(steps, 1));
  state.counters["simulated_s_per_wall_s"] =
      benchmark::Counter(dt * static_cast<double>(steps), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_StiffSheetStep)
    ->Args({0, 0, 0})
    ->ArgsProduct({{1, 2, 3, 4}, {20, 100}, {0}})
    ->Args({0, 0, 1})
    ->ArgsProduct({{1, 2}, {20, 100}, {1}})
    ->Args({0, 0, 2})
    ->ArgsProduct({{1, 2, 3, 4, 5}, {10, 20, 100}, {2}})
    ->ArgNames({"method", "factor", "model"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
