// Side by side with Bullet's soft body (btSoftBody in a btSoftRigidDynamicsWorld, the
// system package libbullet-dev, single precision): the same triangle mesh, a 0.5 m sheet
// of the sheet primitive (resolution 32: 33 x 33 nodes, 2048 triangles, 3040 edges) hanging
// from one pinned edge under gravity, stepped from rest; each benchmark iteration is one
// step, so the reported time is per step.
//   BM_BulletSoftBodyStep:  Bullet cloth (edge links, bending links of distance 2,
//                           default 1 position iteration), dt = 1/240 s
//   BM_DiscreteShellStep:   our discrete shell (edges, hinges; nu = 0.3, no area term),
//                           method 0: explicit velocity Verlet at its stable step,
//                           method 1: backward Euler (Newton, sparse Cholesky) at 1/240 s,
//                           method 2: Newmark beta 1/4 at 1/240 s
// Not the same physics: Bullet's links are position-based constraints (stiffness 0..1 per
// iteration, no material law), ours integrate the elastic energy of E = 100 kPa, 1 mm,
// rho = 500 kg/m^3. Steps are taken for 2 s of simulated time at most (then the state is
// reset), so both stay near the hanging state.
// Run (Release build):
//   build/release/bench/shellsim_bench --benchmark_filter='Bullet|DiscreteShellStep'
// Measured 2026-11-26 14:05 (Release, native, default frozen Hessian, machine otherwise
// idle; ms per step, real time):
//   Bullet btSoftBody, 1/240 s:                      0.248
//   discrete shell, Verlet at 0.73 ms:               0.067 (1 thread), 0.054 (2 threads)
//   discrete shell, backward Euler at 1/240 s:       11.2 / 8.6  (1 / 2 threads; 5.05
//                                                    Newton iterations per step)
//   discrete shell, Newmark 1/4 at 1/240 s:          13.1 / 10.4 (5 iterations)
// Per simulated second: Bullet 240 steps (~0.06 s), Verlet 1366 steps (~0.09 s with 1
// thread), backward Euler 240 steps (~2.7 s).
//   BM_SheetPerSimulatedSecond: the sheet run for 2 s of simulated time per configuration
//                           (integrator, Newton Hessian, tolerance; see kSheetRuns) and
//                           model (0 the discrete shell, 1 the fiber model), wall
//                           ms per simulated second, steps, Newton, quasi-Newton and
//                           factorizations per step, and the motion error: the largest
//                           distance, at 60 sample times, of the free edge's middle node
//                           from where the same scheme puts it at a quarter of the step
//                           (Newton tolerance 1e-9), in mm (tip_error_mm) and in percent
//                           of the sheet's 0.5 m (tip_error_percent), and over the first
//                           0.5 s only (first_swing_tip_error_mm).
// Measured 2026-11-30 (Release, native, two runs on a shared 2-core VM: Bullet 0.308 and
// 0.343 ms per step; wall ms per simulated second, 1 / 2 threads; first-swing error):
//   verlet                      78-108 / 77-86   0.9 mm (whole 2 s: 49 mm, see below)
//   euler_frozen_1e-6          1529-1777 / 1346-1372  37.2 mm, 4.65 Newton, 0.86 factorizations
//   euler_frozen_1e-3          1086-1089 / 871-922    37.0 mm, 2.17 Newton, 0.62 factorizations
//   euler_quasi_newton_1e-3     322-339 / 272-284     37.0 mm, 6.7 stand-in its, 0.03
//   factorizations newmark_*_1e-3: Newton fails to converge at t = 1.03-1.09 s (the run stops; the
//   step pipeline of a scene would halve the step there).
// Backward Euler at 1/240 s is 37 mm (7 % of the sheet) off its quarter step in the first
// swing whatever the solver, so the Newton tolerance of 1e-3 costs nothing visible; the
// implicit step with the quasi-Newton solver costs 18-24 Verlet steps (113 with the
// defaults). Over the whole 2 s every scheme drifts far from its quarter step (Verlet 49 mm,
// backward Euler 123 mm): the flapping free edge is sensitive to small differences, and
// backward Euler at a quarter step is still 56 mm from a sixteenth step.
// The fiber model on the same mesh (model:1, 1 thread): Verlet 124 ms per simulated second
// (900 steps, first-swing error 11 mm); backward Euler at 1/240 s 12,709 ms with the
// defaults (5.6 Newton iterations, 1.7 factorizations per step), 6,217 at 1e-3, 791 with
// quasi_newton at 1e-3 (7.9 stand-in iterations, 0.006 factorizations): its step costs 24
// Verlet steps (the defaults' 385). Its quarter-step reference stalls in Newton at t =
// 0.425 s, so these runs carry no error counters.
// Measured 2026-12-06 (Release, idle, two runs; ms per simulated second 1 / 2 threads, the
// implicit step in Verlet steps of the same model, first-swing error): with looser
// quasi-Newton tolerances (runs 6 and 7) the discrete shell's step is
//   verlet                       66-67 / 68-89 (48-65 us per step)     0.9 mm
//   euler_quasi_newton_1e-3     240-242 / 228-251   20.8 / 15-21 steps  37.0 mm, 6.7 its
//   euler_quasi_newton_1e-2     130-132 / 143-167   11.3 / 9-14 steps   37.1 mm, 4.4 its
//   euler_quasi_newton_3e-2     106-107 / 116-133    9.2 / 7.5-11 steps 33.2 mm, 3.4 its
// and the fiber sheet's (Verlet 73-74 / 41-65 at 870 steps; its reference now runs through):
//   1e-3 595-601 / 458-476 (29.7 steps), 1e-2 280-283 / 227-229 (13.9), 3e-2 238-239 /
//   190-199 (11.8); first-swing errors 37.6, 30.8 and 24.8 mm. Backward Euler's own error
//   (37 mm at 1e-3 against its quarter step) dwarfs the discrete shell's solver error up to
//   1e-2 (0.04 mm); at 3e-2 the motion moves by at least 3.8 mm (0.8 % of the sheet), the
//   fiber sheet's by 7-13 mm from 1e-2 on. Bullet the same day: 0.219-0.240 ms per step,
//   53-58 ms per simulated second.
#include <BulletSoftBody/btSoftBodyHelpers.h>
#include <BulletSoftBody/btSoftBodyRigidBodyCollisionConfiguration.h>
#include <BulletSoftBody/btSoftRigidDynamicsWorld.h>
#include <benchmark/benchmark.h>
#include <btBulletDynamicsCommon.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "dynamics/implicit.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "geometry/primitives.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/models/discrete_shell.hpp"
#include "shellsim/parallel.hpp"

namespace {

using namespace shellsim;

constexpr int kResolution = 32;
constexpr double kSize = 0.5;
constexpr double kStep = 1.0 / 240;

PrimitiveDef sheetPrimitive() {
  PrimitiveDef sheet;
  sheet.type = PrimitiveType::kSheet;
  sheet.size = {kSize, kSize, 0};
  sheet.resolution = kResolution;
  return sheet;
}

SceneDef sheetScene(const char* model = "discrete_shell") {
  BodyDef body;
  body.name = "sheet";
  body.primitive = sheetPrimitive();
  body.model = model;
  body.material.youngModulus = 1e5;
  body.material.thickness = 1e-3;
  body.material.density = 500;
  body.material.poisson = 0.3;
  PinDef pin;
  pin.shape = PinShape::kBox;
  pin.center = {-0.5 * kSize, 0, 0};
  pin.halfExtents = {1e-3, kSize, 1e-3};
  body.pins.push_back(pin);
  SceneDef scene;
  scene.bodies.push_back(body);
  return scene;
}

// Bullet's world and the cloth made from the same mesh (float copies of the positions),
// `density` kg/m^3 of a 1 mm sheet, `positionIterations` of its position solver; the nodes
// within `pinnedWidth` of the edge x = -0.25 are fixed (0: the edge's row only).
struct BulletCloth {
  btSoftBodyRigidBodyCollisionConfiguration config;
  btCollisionDispatcher dispatcher{&config};
  btDbvtBroadphase broadphase;
  btSequentialImpulseConstraintSolver solver;
  btSoftRigidDynamicsWorld world{&dispatcher, &broadphase, &solver, &config};
  btSoftBody* body = nullptr;

  explicit BulletCloth(double density = 500, int positionIterations = 1, double pinnedWidth = 0) {
    const Geometry mesh = makePrimitive(sheetPrimitive());
    std::vector<btScalar> vertices(mesh.positions.begin(), mesh.positions.end());
    world.setGravity(btVector3(0, 0, -9.81f));
    btSoftBodyWorldInfo& info = world.getWorldInfo();
    info.m_gravity = btVector3(0, 0, -9.81f);
    info.m_sparsesdf.Initialize();
    body = btSoftBodyHelpers::CreateFromTriMesh(info, vertices.data(), mesh.triangles.data(),
                                                mesh.triangleCount(), false);
    btSoftBody::Material* material = body->appendMaterial();
    material->m_kLST = 1.0f;
    body->generateBendingConstraints(2, material);
    body->m_cfg.piterations = positionIterations;
    body->setTotalMass(static_cast<btScalar>(density * 1e-3 * kSize * kSize));
    for (int i = 0; i < body->m_nodes.size(); ++i) {
      if (body->m_nodes[i].m_x.x() + kSize / 2 < pinnedWidth + 1e-4) body->setMass(i, 0);
    }
    world.addSoftBody(body);
  }
  ~BulletCloth() {
    world.removeSoftBody(body);
    delete body;
  }
  BulletCloth(const BulletCloth&) = delete;
  BulletCloth& operator=(const BulletCloth&) = delete;
};

void BM_BulletSoftBodyStep(benchmark::State& state) {
  auto cloth = std::make_unique<BulletCloth>();
  int steps = 0;
  for (auto _ : state) {
    if (++steps * kStep > 2.0) {
      state.PauseTiming();
      cloth = std::make_unique<BulletCloth>();
      steps = 1;
      state.ResumeTiming();
    }
    cloth->world.stepSimulation(static_cast<btScalar>(kStep), 0);
  }
  state.counters["nodes"] = cloth->body->m_nodes.size();
  state.counters["links"] = cloth->body->m_links.size();
  state.counters["dt_ms"] = 1e3 * kStep;
}

void BM_DiscreteShellStep(benchmark::State& state) {
  const int method = static_cast<int>(state.range(0));
  const ThreadLimit limit(static_cast<int>(state.range(1)));
  const SceneDef scene = sheetScene();
  std::unique_ptr<World> world;
  std::unique_ptr<ImplicitStepper> stepper;
  double dt = kStep;
  const auto reset = [&]() {
    world = std::make_unique<World>(buildWorld(scene));
    computeAccelerations(*world);
    if (method == 0) {
      dt = 0.9 * stableTimeStep(*world);
    } else {
      ImplicitSettings settings;
      settings.scheme = method == 1 ? ImplicitScheme::kBackwardEuler : ImplicitScheme::kNewmark;
      stepper = std::make_unique<ImplicitStepper>(settings);
    }
  };
  reset();
  PhaseTimes times;
  int steps = 0;
  int64_t newton = 0;
  for (auto _ : state) {
    if (++steps * dt > 2.0) {
      state.PauseTiming();
      reset();
      steps = 1;
      state.ResumeTiming();
    }
    if (method == 0) {
      step(*world, dt, times);
    } else {
      newton += stepper->step(*world, dt, times).totalIterations();
    }
  }
  state.counters["nodes"] = world->bodies[0].nodeCount();
  state.counters["dt_ms"] = 1e3 * dt;
  if (method != 0)
    state.counters["newton_per_step"] =
        static_cast<double>(newton) / static_cast<double>(state.iterations());
}

// One way of stepping the sheet: the integrator, its step, and for the implicit ones the
// Newton Hessian and tolerance.
struct SheetRun {
  const char* label;
  int method;   // 0 Verlet at 0.9 of the stable step, 1 backward Euler, 2 Newmark 1/4
  int hessian;  // 0 exact, 1 frozen, 2 quasi-Newton
  double tolerance;
};

constexpr SheetRun kSheetRuns[] = {
    {"verlet", 0, 0, 0},
    {"euler_frozen_1e-6", 1, 1, 1e-6},
    {"euler_frozen_1e-3", 1, 1, 1e-3},
    {"euler_quasi_newton_1e-3", 1, 2, 1e-3},
    {"newmark_frozen_1e-3", 2, 1, 1e-3},
    {"newmark_quasi_newton_1e-3", 2, 2, 1e-3},
    {"euler_quasi_newton_1e-2", 1, 2, 1e-2},
    {"euler_quasi_newton_3e-2", 1, 2, 3e-2},
};

constexpr double kSheetSeconds = 2.0;
constexpr int kTipSamples = 60;

struct SheetTrajectory {
  std::vector<Vec3> tip;  // (kTipSamples), the free edge's middle node
  int64_t steps = 0, newton = 0, quasiNewton = 0, factorizations = 0;
  double wallSeconds = 0;
};

// The free edge's middle node: largest x, then smallest |y|.
size_t tipNode(const Body& body) {
  size_t tip = 0;
  for (size_t i = 1; i < static_cast<size_t>(body.nodeCount()); ++i) {
    const Vec3 p = row(body.positions, i), q = row(body.positions, tip);
    if (p.x() > q.x() + 1e-9 ||
        (std::abs(p.x() - q.x()) <= 1e-9 && std::abs(p.y()) < std::abs(q.y())))
      tip = i;
  }
  return tip;
}

constexpr const char* kSheetModels[] = {"discrete_shell", "fiber"};

// `refine` steps per nominal step; tolerance overrides the run's when positive.
SheetTrajectory runSheet(const SheetRun& run, const char* model, int refine, double tolerance) {
  World world = buildWorld(sheetScene(model));
  computeAccelerations(world);
  const size_t tip = tipNode(world.bodies[0]);
  const double nominal = run.method == 0 ? 0.9 * stableTimeStep(world) : kStep;
  // Whole steps per sample interval, so that samples fall on step boundaries.
  const double interval = kSheetSeconds / kTipSamples;
  const auto perSample = static_cast<int64_t>(std::ceil(interval / nominal - 1e-9)) * refine;
  const double dt = interval / static_cast<double>(perSample);
  std::unique_ptr<ImplicitStepper> stepper;
  if (run.method != 0) {
    ImplicitSettings settings;
    settings.scheme = run.method == 1 ? ImplicitScheme::kBackwardEuler : ImplicitScheme::kNewmark;
    settings.newton.frozenHessian = run.hessian != 0;
    settings.newton.quasiNewton = run.hessian == 2;
    settings.newton.tolerance = tolerance > 0 ? tolerance : run.tolerance;
    stepper = std::make_unique<ImplicitStepper>(settings);
  }
  SheetTrajectory out;
  PhaseTimes times;
  const auto start = std::chrono::steady_clock::now();
  for (int sample = 0; sample < kTipSamples; ++sample) {
    for (int64_t s = 0; s < perSample; ++s) {
      if (stepper) {
        const ImplicitStepReport report = stepper->step(world, dt, times);
        out.newton += report.bodies[0].iterations;
        out.quasiNewton += report.bodies[0].quasiNewtonIterations;
        out.factorizations += report.bodies[0].factorizations;
      } else {
        step(world, dt, times);
      }
      ++out.steps;
    }
    out.tip.push_back(row(world.bodies[0].positions, tip));
  }
  out.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void BM_SheetPerSimulatedSecond(benchmark::State& state) {
  const SheetRun& run = kSheetRuns[state.range(0)];
  const ThreadLimit limit(static_cast<int>(state.range(1)));
  const char* model = kSheetModels[state.range(2)];
  state.SetLabel(std::string(model) + " " + run.label);
  // The reference: the same scheme at a quarter of the step, exact Newton to 1e-9 (once
  // per model and scheme; one thread). Where it fails (Newton stalls: the fiber sheet at
  // 1/960 s, t = 0.425 s) the run is timed without the error counters.
  static std::map<std::pair<int64_t, int>, std::vector<Vec3>> references;
  const std::pair<int64_t, int> scheme{state.range(2), run.method};
  if (references.find(scheme) == references.end()) {
    const ThreadLimit one(1);
    const SheetRun exact{"reference", run.method, 0, 1e-9};
    try {
      references[scheme] = runSheet(exact, model, 4, 0).tip;
    } catch (const NumericalError&) {
      references[scheme] = {};
    }
  }
  const bool referenced = !references[scheme].empty();
  if (!referenced) state.SetLabel(std::string(model) + " " + run.label + " (no reference)");
  SheetTrajectory trajectory;
  for (auto _ : state) {
    try {
      trajectory = runSheet(run, model, 1, 0);
    } catch (const NumericalError& e) {
      state.SkipWithError(e.what());
      return;
    }
    state.SetIterationTime(trajectory.wallSeconds);
  }
  // Over the whole run and over its first half second (the first swing down).
  double error = 0, firstSwingError = 0;
  for (int k = 0; k < kTipSamples && referenced; ++k) {
    const double distance =
        (trajectory.tip[static_cast<size_t>(k)] - references[scheme][static_cast<size_t>(k)])
            .norm();
    error = std::max(error, distance);
    if (4 * (k + 1) <= kTipSamples) firstSwingError = std::max(firstSwingError, distance);
  }
  const auto steps = static_cast<double>(trajectory.steps);
  state.counters["ms_per_simulated_s"] = 1e3 * trajectory.wallSeconds / kSheetSeconds;
  state.counters["steps_per_simulated_s"] = steps / kSheetSeconds;
  state.counters["newton_per_step"] = static_cast<double>(trajectory.newton) / steps;
  state.counters["quasi_newton_per_step"] = static_cast<double>(trajectory.quasiNewton) / steps;
  state.counters["factorizations_per_step"] =
      static_cast<double>(trajectory.factorizations) / steps;
  if (referenced) {
    state.counters["tip_error_mm"] = 1e3 * error;
    state.counters["tip_error_percent"] = 100 * error / kSize;
    state.counters["first_swing_tip_error_mm"] = 1e3 * firstSwingError;
  }
}

// The stiffer case: the same sheet as 1 mm aluminium (E = 70 GPa, nu = 0.33, 2,700 kg/m^3),
// a cantilever clamped by pinning its first two node rows (one row is a hinge), released
// flat, 2 s. Its tip (the free edge's middle) should settle at the plate's sag under its
// own weight, between the narrow strip's q L^4 / (8 D) = 27.8 mm (q = rho h g, D = E h^3 /
// (12 (1 - nu^2)), L = 0.5 m less the clamped cell, 0.484 m) and 1 / (1 - nu^2) times that,
// 31.2 mm (a wide plate bends cylindrically). engine 0: Bullet's cloth
// (links and bending links cannot hold a material stiffness; more position iterations make
// it stiffer), with `iterations` position iterations, 1/240 s; engine 1: our discrete
// shell, backward Euler at 1/240 s (about 4,300 times its explicit stable step) with the
// default frozen Hessian (engine 2: Newton tolerance 1e-3 instead of 1e-6; engine 3: and
// the stencil Hessians clamped positive semi-definite, discrete_shell.hessian "projected").
// Counters: mean_sag_mm,
// the tip's mean depth over the second second (the sheet still swings: the mean is its rest),
// ms_per_simulated_s, and for ours explicit_steps_per_simulated_s, what Verlet at 0.9 of its stable
// step would need.
// Measured 2026-11-30 (Release, 1 thread): Bullet sags 352, 338, 338, 340 and 333 mm with 1,
// 4, 16, 64 and 256 position iterations (78, 196, 572, 2,207 and 8,374 ms per simulated
// second): it never holds the aluminium's shape, more iterations only cost time. Ours:
// 28.7 mm (within the plate's 27.8-31.2) in 2,956 ms per simulated second (4.3 Newton
// iterations and 2.4 factorizations per step: the bent plate's Hessian is indefinite and
// each shift refactorizes; 2,890 at tolerance 1e-3; 9,010 with projected Hessians, whose
// per-stencil eigen decompositions cost more than the shifts they save). Verlet would need
// 502,619 steps per simulated second, about 28 s of wall time at 0.056 ms per step.
void BM_StiffSheetHoldsItsShape(benchmark::State& state) {
  const int engine = static_cast<int>(state.range(0));
  const int iterations = static_cast<int>(state.range(1));
  constexpr double kAluminium = 2700;
  constexpr double kCell = kSize / kResolution;
  constexpr double kSeconds = 2;
  const auto steps = static_cast<int>(std::lround(kSeconds / kStep));
  double sagSum = 0, wallSeconds = 0;
  int samples = 0;
  for (auto _ : state) {
    sagSum = 0;
    samples = 0;
    const auto start = std::chrono::steady_clock::now();
    if (engine == 0) {
      BulletCloth cloth(kAluminium, iterations, kCell);
      // The free edge's middle node of Bullet's copy of the mesh.
      int tip = 0;
      for (int i = 1; i < cloth.body->m_nodes.size(); ++i) {
        const btVector3& p = cloth.body->m_nodes[i].m_x;
        const btVector3& q = cloth.body->m_nodes[tip].m_x;
        if (p.x() > q.x() + 1e-6 ||
            (std::abs(p.x() - q.x()) <= 1e-6 && std::abs(p.y()) < std::abs(q.y())))
          tip = i;
      }
      for (int s = 0; s < steps; ++s) {
        cloth.world.stepSimulation(static_cast<btScalar>(kStep), 0);
        if (2 * s >= steps) {
          sagSum -= static_cast<double>(cloth.body->m_nodes[tip].m_x.z());
          ++samples;
        }
      }
    } else {
      SceneDef scene = sheetScene();
      scene.bodies[0].pins[0].center[0] += 0.5 * kCell;
      scene.bodies[0].pins[0].halfExtents[0] += 0.5 * kCell;
      scene.bodies[0].material.youngModulus = 70e9;
      scene.bodies[0].material.poisson = 0.33;
      scene.bodies[0].material.density = kAluminium;
      scene.bodies[0].options<DiscreteShellDef>().projectHessian = engine == 3;
      World world = buildWorld(scene);
      computeAccelerations(world);
      state.counters["explicit_steps_per_simulated_s"] = 1 / (0.9 * stableTimeStep(world));
      const size_t tip = tipNode(world.bodies[0]);
      ImplicitSettings settings;
      settings.scheme = ImplicitScheme::kBackwardEuler;
      if (engine >= 2) settings.newton.tolerance = 1e-3;
      ImplicitStepper stepper(settings);
      PhaseTimes times;
      int64_t newton = 0, factorizations = 0;
      for (int s = 0; s < steps; ++s) {
        const ImplicitStepReport report = stepper.step(world, kStep, times);
        newton += report.bodies[0].iterations;
        factorizations += report.bodies[0].factorizations;
        if (2 * s >= steps) {
          sagSum -= world.bodies[0].positions[3 * tip + 2];
          ++samples;
        }
      }
      state.counters["newton_per_step"] = static_cast<double>(newton) / steps;
      state.counters["factorizations_per_step"] = static_cast<double>(factorizations) / steps;
    }
    wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(wallSeconds);
  }
  state.SetLabel(engine == 0   ? "bullet"
                 : engine == 1 ? "discrete_shell_backward_euler"
                 : engine == 2 ? "discrete_shell_backward_euler_1e-3"
                               : "discrete_shell_projected_backward_euler_1e-3");
  state.counters["mean_sag_mm"] = 1e3 * sagSum / samples;
  state.counters["ms_per_simulated_s"] = 1e3 * wallSeconds / kSeconds;
}

BENCHMARK(BM_BulletSoftBodyStep)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StiffSheetHoldsItsShape)
    ->Args({0, 1})
    ->Args({0, 4})
    ->Args({0, 16})
    ->Args({0, 64})
    ->Args({0, 256})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Args({3, 0})
    ->ArgNames({"engine", "iterations"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);
BENCHMARK(BM_SheetPerSimulatedSecond)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {1, 2}, {0, 1}})
    ->ArgNames({"run", "threads", "model"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);
BENCHMARK(BM_DiscreteShellStep)
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->ArgNames({"method", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
