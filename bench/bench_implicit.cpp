// Implicit integration (dynamics/implicit.hpp).
//
// BM_ImplicitNewtonIteration: time per Newton iteration (gradient, Hessian assembly,
//   Cholesky or CG solve, line search) of a backward Euler step of a 1 mm aluminium
//   mass-spring sheet hanging from one edge, at 20x the explicit stable step, for sheets of
//   ~1k, 10k and 100k dofs, with the direct (solver:0) and the CG (solver:1) linear solver.
// BM_StiffSheetStep: cost per step on the same sheet (33 x 33 nodes): explicit velocity
//   Verlet (method:0) at the largest step that survives 2000 steps (found by search,
//   counter dt_over_estimate) versus Newmark beta 1/4 (method:1) and backward Euler
//   (method:2) at 10x, 20x and 100x the estimate (factor), with the default frozen Hessian
//   (hessian:0), the exact Hessian with the last factor as CG preconditioner (hessian:1,
//   newton_hessian "exact") and the exact Hessian refactorized at every iteration
//   (hessian:2). model:0 is the mass-spring model, model:1 the fiber model on a 17 x 17
//   node sheet, model:2 the discrete shell. Implicit figures are the steady state (one
//   warm-up step analyses the pattern and factorizes first).
// BM_NewtonSystemCholesky: factorization and solve of one backward Euler Newton system
//   (alpha M + K at 10x the stable step) of the discrete-shell aluminium sheet, 33 x 33 to
//   101 x 101 nodes: Eigen's scalar SimplicialLLT (solver:0) versus BlockCholesky
//   (solver:1) versus CHOLMOD's supernodal factorization (solver:2, SuiteSparse with the
//   system's BLAS: OpenBLAS after scripts/install-deps.sh); counters factorize_ms, solve_ms
//   and the factor's nonzeros.
// BM_TubeNewtonSystemCholesky: the same three on the Newmark system of the tube of
//   inelastic_tube_drop at its step (Fig. 12; 880 nodes, a factor 2.8x denser per dof).
// Run (Release build):
//   build/rel/bench/shellsim_bench --benchmark_filter='Implicit|StiffSheet'
#include <benchmark/benchmark.h>

#include <Eigen/SparseCholesky>
#ifdef SHELLSIM_BENCH_CHOLMOD
#include <Eigen/CholmodSupport>
#endif
#include <chrono>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "core/block_cholesky.hpp"
#include "dynamics/implicit.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/scene.hpp"

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
  // Full Newton iterations (assembly and a fresh factorization or CG solve each), not the
  // frozen factor's cheaper ones: the cost of one exact iteration per solver.
  settings.newton.frozenHessian = false;
  settings.newton.reuseFactorization = false;
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
  const std::string model = kStiffSheetModels[state.range(3)];
  const int resolution = state.range(3) == 1 ? 16 : 32;
  const int method = static_cast<int>(state.range(0));   // 0 explicit, 1 Newmark, 2 Euler
  const int hessian = static_cast<int>(state.range(2));  // 0 frozen, 1 exact, 2 no reuse
  World world = buildWorld(aluminiumScene(resolution, model));
  computeAccelerations(world);
  const double estimate = stableTimeStep(world);
  const double factor =
      method == 0 ? largestExplicitFactor(resolution, model) : static_cast<double>(state.range(1));
  const double dt = factor * estimate;
  ImplicitSettings settings;
  settings.scheme = method == 2 ? ImplicitScheme::kBackwardEuler : ImplicitScheme::kNewmark;
  settings.newton.frozenHessian = hessian == 0;
  settings.newton.reuseFactorization = hessian != 2;
  ImplicitStepper stepper(settings);
  PhaseTimes times;
  if (method != 0) (void)stepper.step(world, dt, times);  // warm-up
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
  const auto perStep = [&](int64_t count) {
    return static_cast<double>(count) / static_cast<double>(std::max<int64_t>(steps, 1));
  };
  state.counters["dt_s"] = dt;
  state.counters["dt_over_estimate"] = factor;
  state.counters["newton_per_step"] = perStep(iterations);
  state.counters["frozen_per_step"] = perStep(frozen);
  state.counters["factorizations_per_step"] = perStep(factorizations);
  state.counters["simulated_s_per_wall_s"] =
      benchmark::Counter(dt * static_cast<double>(steps), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_StiffSheetStep)
    ->Args({0, 0, 0, 0})
    ->ArgsProduct({{1, 2}, {20, 100}, {0, 1}, {0}})
    ->Args({0, 0, 0, 1})
    ->ArgsProduct({{1, 2}, {20, 100}, {0, 1}, {1}})
    ->Args({0, 0, 0, 2})
    ->ArgsProduct({{1, 2}, {10, 12, 20, 100}, {0, 1, 2}, {2}})
    ->ArgNames({"method", "factor", "hessian", "model"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// A Newton system alpha M + K on the free dofs of a world's first body at rest, as a
// compressed-column matrix with the node pattern and block slots BlockCholesky reads. The
// models emit whole 3x3 blocks, and setFromTriplets keeps explicit zeros, so every column
// 3c + j holds 3-row runs.
struct NewtonSystem {
  Eigen::SparseMatrix<double, Eigen::ColMajor, int> matrix;
  int nodes = 0;
  std::vector<int32_t> offsets{0}, rows, slots;
};

NewtonSystem newtonSystem(const World& world, double alpha) {
  const Body& body = world.bodies[0];
  std::vector<Eigen::Triplet<double>> triplets;
  (void)body.model->addHessian(body.positions, triplets);
  const auto mass = body.model->nodeMasses();
  NewtonSystem system;
  std::vector<int> freeNode(static_cast<size_t>(body.nodeCount()), -1);
  for (size_t i = 0; i < freeNode.size(); ++i) {
    if (!body.pinned[i]) freeNode[i] = system.nodes++;
  }
  std::vector<Eigen::Triplet<double>> free;
  for (const auto& t : triplets) {
    const int r = freeNode[static_cast<size_t>(t.row() / 3)];
    const int c = freeNode[static_cast<size_t>(t.col() / 3)];
    if (r >= 0 && c >= 0) free.emplace_back(3 * r + t.row() % 3, 3 * c + t.col() % 3, t.value());
  }
  for (size_t i = 0; i < freeNode.size(); ++i) {
    if (freeNode[i] < 0) continue;
    for (int k = 0; k < 3; ++k)
      free.emplace_back(3 * freeNode[i] + k, 3 * freeNode[i] + k, alpha * mass[i]);
  }
  const int dofs = 3 * system.nodes;
  system.matrix.resize(dofs, dofs);
  system.matrix.setFromTriplets(free.begin(), free.end());
  const Eigen::SparseMatrix<double, Eigen::ColMajor, int>& matrix = system.matrix;
  for (int c = 0; c < system.nodes; ++c) {
    const int begin = matrix.outerIndexPtr()[3 * c];
    const int end = matrix.outerIndexPtr()[3 * c + 1];
    for (int p = begin; p < end; p += 3) system.rows.push_back(matrix.innerIndexPtr()[p] / 3);
    system.offsets.push_back(static_cast<int32_t>(system.rows.size()));
    for (int b = 0; b < (end - begin) / 3; ++b) {
      for (int j = 0; j < 3; ++j) system.slots.push_back(matrix.outerIndexPtr()[3 * c + j] + 3 * b);
    }
  }
  return system;
}

// Factorizes and solves `system` with solver 0 (Eigen's SimplicialLLT), 1 (BlockCholesky)
// or 2 (CHOLMOD's supernodal LLT, whose dense blocks go to the BLAS the system provides).
void benchmarkCholesky(benchmark::State& state, const NewtonSystem& system, int64_t solver) {
  using Matrix = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;
  const Matrix& matrix = system.matrix;
  const Eigen::VectorXd rhs = Eigen::VectorXd::Ones(matrix.rows());
  Eigen::SimplicialLLT<Matrix, Eigen::Lower, Eigen::AMDOrdering<int>> eigen;
  BlockCholesky block;
#ifdef SHELLSIM_BENCH_CHOLMOD
  Eigen::CholmodSupernodalLLT<Matrix, Eigen::Lower> cholmod;
#else
  if (solver == 2) {
    state.SkipWithError("built without CHOLMOD (libsuitesparse-dev)");
    return;
  }
#endif
  switch (solver) {
    case 0: eigen.analyzePattern(matrix); break;
    case 1: block.analyze(system.nodes, system.offsets, system.rows); break;
#ifdef SHELLSIM_BENCH_CHOLMOD
    default: cholmod.analyzePattern(matrix); break;
#endif
  }
  const std::span<const double> values(matrix.valuePtr(), static_cast<size_t>(matrix.nonZeros()));
  double factorSeconds = 0, solveSeconds = 0, residual = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    bool positive = true;
    switch (solver) {
      case 0:
        eigen.factorize(matrix);
        positive = eigen.info() == Eigen::Success;
        break;
      case 1: positive = block.factorize(values, system.slots); break;
#ifdef SHELLSIM_BENCH_CHOLMOD
      default:
        cholmod.factorize(matrix);
        positive = cholmod.info() == Eigen::Success;
        break;
#endif
    }
    if (!positive) {
      state.SkipWithError("not positive definite");
      break;  // Google Benchmark's way out of the loop after an error
    }
    const auto factored = std::chrono::steady_clock::now();
    Eigen::VectorXd x = rhs;
    switch (solver) {
      case 0: x = eigen.solve(rhs); break;
      case 1: block.solve(std::span<double>(x.data(), static_cast<size_t>(x.size()))); break;
#ifdef SHELLSIM_BENCH_CHOLMOD
      default: x = cholmod.solve(rhs); break;
#endif
    }
    const auto solved = std::chrono::steady_clock::now();
    factorSeconds += std::chrono::duration<double>(factored - start).count();
    solveSeconds += std::chrono::duration<double>(solved - factored).count();
    residual = (matrix * x - rhs).norm() / rhs.norm();
  }
  if (state.error_occurred()) return;
  const auto runs = static_cast<double>(state.iterations());
  state.counters["dofs"] = static_cast<double>(matrix.rows());
  state.counters["factorize_ms"] = 1e3 * factorSeconds / runs;
  state.counters["solve_ms"] = 1e3 * solveSeconds / runs;
  double factorNonzeros = 9.0 * static_cast<double>(block.factorBlocks()) + 6.0 * system.nodes;
  if (solver == 0) {
    factorNonzeros = static_cast<double>(eigen.matrixL().nestedExpression().nonZeros());
  }
#ifdef SHELLSIM_BENCH_CHOLMOD
  if (solver == 2) factorNonzeros = static_cast<double>(cholmod.cholmod().lnz);
#endif
  state.counters["factor_nonzeros"] = factorNonzeros;
  state.counters["relative_residual"] = residual;
}

void BM_NewtonSystemCholesky(benchmark::State& state) {
  const World world =
      buildWorld(aluminiumScene(static_cast<int>(state.range(1)), "discrete_shell"));
  const double dt = 10 * stableTimeStep(world);
  benchmarkCholesky(state, newtonSystem(world, 1 / (dt * dt)), state.range(0));
}

BENCHMARK(BM_NewtonSystemCholesky)
    ->ArgsProduct({{0, 1, 2}, {32, 64, 100}})
    ->ArgNames({"solver", "resolution"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The tube of inelastic_tube_drop (Fig. 12 of gingold2004) at rest: the quadratic-patch
// bending couples every node with its neighbours up to two rings away, so its factor is
// nearly as dense as a band three rings wide. Newmark's alpha = 1 / (beta dt^2), beta 1/4.
void BM_TubeNewtonSystemCholesky(benchmark::State& state) {
  const SceneDef scene = loadScene(std::string(SHELLSIM_SCENES_DIR) + "/inelastic_tube_drop.json");
  const World world = buildWorld(scene);
  const double dt = scene.time.timeStep;
  benchmarkCholesky(state, newtonSystem(world, 4 / (dt * dt)), state.range(0));
}

BENCHMARK(BM_TubeNewtonSystemCholesky)
    ->DenseRange(0, 2)
    ->ArgName("solver")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// muller2004 appendix B on the bunny of BM_MullerTable1Physics (bench_mls.cpp: 200 or 400
// phyxels requested, E = 1e4 Pa, at rest): what one linearized implicit step needs beyond
// a gradient, the tangent stiffness K of eq. (47) (hessian_ms: the model's 3 x 3 blocks,
// one per pair of phyxels sharing a stencil) and M / dt^2 + K factorized by BlockCholesky
// (factorize_ms) for backward Euler at 1/120 s. Against the paper's 22 and 60 ms of implicit
// physics per frame, 3-4 such steps.
void BM_MullerNewtonSystem(benchmark::State& state) {
  std::ostringstream json;
  json << R"({"bodies": [{"name": "bunny", "file": ")" << SHELLSIM_DATA_DIR
       << R"(/stanford-bunny.obj", "transform": {"scale": 2}, "model": "mls_solid",
    "mls_solid": {"phyxel_count": )"
       << state.range(1) << R"(}, "material": {"young_modulus": 1e4, "poisson": 0.3,
    "density": 1000}}], "output": {"folder": "out", "formats": ["ply"]}})";
  const World world = buildWorld(parseScene(json.str(), "bunny.json", "."));
  const Body& body = world.bodies[0];
  const std::vector<int32_t> pairs = body.model->hessianBlockNodes();
  std::vector<double> values(pairs.size() / 2 * 9);
  const auto start = std::chrono::steady_clock::now();
  constexpr int kAssemblies = 20;
  for (int k = 0; k < kAssemblies; ++k) (void)body.model->hessianBlocks(body.positions, values);
  const double hessianSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kAssemblies;
  const double dt = 1.0 / 120;
  benchmarkCholesky(state, newtonSystem(world, 1 / (dt * dt)), state.range(0));
  state.counters["hessian_ms"] = 1e3 * hessianSeconds;
  state.counters["phyxels"] = static_cast<double>(body.nodeCount());
}

BENCHMARK(BM_MullerNewtonSystem)
    ->ArgsProduct({{1}, {200, 400}})
    ->ArgNames({"solver", "phyxels"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
