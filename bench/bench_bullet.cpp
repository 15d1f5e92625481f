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
#include <BulletSoftBody/btSoftBodyHelpers.h>
#include <BulletSoftBody/btSoftBodyRigidBodyCollisionConfiguration.h>
#include <BulletSoftBody/btSoftRigidDynamicsWorld.h>
#include <benchmark/benchmark.h>
#include <btBulletDynamicsCommon.h>

#include <cmath>
#include <memory>
#include <vector>

#include "dynamics/implicit.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "geometry/primitives.hpp"
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

SceneDef sheetScene() {
  BodyDef body;
  body.name = "sheet";
  body.primitive = sheetPrimitive();
  body.model = "discrete_shell";
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

// Bullet's world and the cloth made from the same mesh (float copies of the positions).
struct BulletCloth {
  btSoftBodyRigidBodyCollisionConfiguration config;
  btCollisionDispatcher dispatcher{&config};
  btDbvtBroadphase broadphase;
  btSequentialImpulseConstraintSolver solver;
  btSoftRigidDynamicsWorld world{&dispatcher, &broadphase, &solver, &config};
  btSoftBody* body = nullptr;

  BulletCloth() {
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
    body->setTotalMass(static_cast<btScalar>(500 * 1e-3 * kSize * kSize));
    for (int i = 0; i < body->m_nodes.size(); ++i) {
      if (std::abs(body->m_nodes[i].m_x.x() + kSize / 2) < 1e-4) body->setMass(i, 0);
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

BENCHMARK(BM_BulletSoftBodyStep)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DiscreteShellStep)
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->ArgNames({"method", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
