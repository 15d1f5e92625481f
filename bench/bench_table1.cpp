// Table 1 of wicke2005 on this machine: milliseconds per frame (1/30 s of simulated time)
// for forces and integration, for fracture tests and neighbourhood recomputation (crack
// rebuilds, with plasticity when on), for moving the high-resolution surface, and in total,
// for four scenes with the paper's sizes:
//   Max     931 nodes,    9,835 surface points   (the plastic bust: Igea, plasticity)
//   Balloon 1,170 nodes,  24,578 points, fracture (a sphere inflated until it tears)
//   Mask    1,987 nodes,  40,880 points          (the elastic head drop: Igea)
//   Pinup   11,860 nodes, 240,000 points, fracture (the poster torn from a weak point)
// The paper's totals on a 3 GHz PC of 2005: 71, 212, 547 and 9,058 ms per frame. Each
// iteration simulates one frame with the automatic time step of `shellsim run` (half the
// stable explicit estimate),
// reported as dt_s with steps_per_frame, then moves the surface once; the state carries on
// from frame to frame, like a run. The surface points are evenly spaced vertices of the
// scene's dense surface (Igea's 134,345 vertices, a sphere or a sheet), bound as a point
// cloud. The third argument picks the integrator: 0 explicit as above, 1 backward Euler at
// 1/240 s (8 steps per frame) with the quasi-Newton solver (time.newton_hessian
// "quasi_newton", tolerance 1e-3; dynamics/implicit.hpp), reported with Newton and
// quasi-Newton iterations per step. Run: build/release/bench/shellsim_bench
// --benchmark_filter=Table1
// Measured 2026-11-30 (Release, 2 threads, total ms per frame, explicit / implicit): Max
// 70 / 90 (654 explicit steps per frame; the implicit run takes 0.56 stand-in and 5.2
// more Newton iterations per step: bending, which the stand-in lacks, makes it fall back
// on the factor), Balloon 45 / 179, Mask 514 / Newton fails where the head meets the
// floor (t = 0.44 s), Pinup 1,165 / 896 (first 3 frames, no crack yet). Against the
// paper's 71, 212, 547 and 9,058 ms: the explicit runs are 1.0, 4.7, 1.06 and 7.8 times
// faster (the Mask scene became the face cut from Igea, its 1,987 nodes closer together,
// after issue 22 measured 64 ms: its explicit step is now 11 us, 2,958 per frame).
//
// Like for like. The paper gives no material, only times; our scenes use physical E and h
// and take 654, 142, 2,958 and 1,020 explicit steps per frame. Its step counts are inferred
// per scene from the one column computed by the same algorithm on both sides, the surface
// (section 6, eqs. 17-21, once per frame): the paper's surface time over ours is the 2005
// PC's slowdown for that scene, S = 119, 140, 143, 55 (64 / 0.54, 166 / 1.18, 325 / 2.27,
// 1,459 / 26.6 ms); the paper's forces per frame over (S times our forces per step) give
// 7 / (119 x 0.062) = 0.95, 24 / (140 x 0.123) = 1.4, 222 / (143 x 0.131) = 11.9 and
// 1,533 / (55 x 0.866) = 32 steps per frame: kPaperStepsPerFrame = 1, 2, 12, 32. Were the
// paper's force code 5 times leaner than its surface code, the counts would be 5 times
// larger. The fourth argument 1 softens E (and the over-pressure) to take those steps:
// E = 46 Pa (Max), 197 Pa (Balloon), 32 Pa (Mask), 9.6 kPa (Pinup): raw stiffnesses of
// a jelly, which the paper's scenes must have had at its sizes and speeds. Measured
// 2026-12-05 after bebb57e (two runs, total ms per frame): Max 0.55-0.57 (125-129 x the
// paper's 71), Balloon 3.7-3.8 (56-57 x; 2.2-2.3 ms of it crack rebuilds, 11 cracks in 30
// frames), Mask 3.3-3.4 (160-165 x), Pinup 386-418 (22-23 x; 321-349 ms of crack rebuilds,
// 21 cracks in 3 frames: the soft sheet tears under its own weight from 0.1 s and blows up at
// 0.23 s, so only 3 frames). Every crack rebuilds the network, patches, rest shape, stiffness
// mapping and evaluation plan (FiberModel::rebuildKeepingFiberState), and so do steps whose
// breaks part pieces (41 rebuilds in the Pinup's 3 frames); before bebb57e that took
// 1,220-1,580 ms per Pinup frame (5.5-7.1 x). After be0ea04 (2026-12-06, 8 runs): Pinup
// 232-291, median 261 (31-39 x, fracture 169-213); Max 0.66, Balloon 3.7, Mask 4.0. The
// scene's own materials: Max 44-69, Balloon 21-33, Mask 380-455, Pinup 870-1,020 (3 frames,
// no crack yet).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dynamics/implicit.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "geometry/primitives.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/scene.hpp"
#include "surface/surface_binding.hpp"

namespace {

using shellsim::Geometry;

// `count` evenly spaced vertices of `g`, with its normals, as a point cloud.
Geometry evenlySpaced(const Geometry& g, int32_t count) {
  Geometry points;
  const int64_t n = g.vertexCount();
  for (int64_t k = 0; k < count; ++k) {
    const auto v = static_cast<size_t>(k * n / count);
    points.positions.insert(points.positions.end(), &g.positions[3 * v], &g.positions[3 * v + 3]);
    if (g.hasNormals()) {
      points.normals.insert(points.normals.end(), &g.normals[3 * v], &g.normals[3 * v + 3]);
    }
  }
  return points;
}

struct Table1Scene {
  shellsim::SceneDef scene;
  int32_t points = 0;
};

Table1Scene makeScene(int which) {
  const std::string scenes = SHELLSIM_SCENES_DIR;
  Table1Scene t;
  switch (which) {
    case 0:
      t.scene = shellsim::loadScene(scenes + "/fiber_bust_plastic.json");
      t.points = 9835;
      {
        // The paper's Max spent 7 ms per frame on forces, a few explicit steps of 931 nodes
        // on a 2005 PC: a soft material, bronze only in colour. The scene is bronze-like
        // (E = 10 GPa, 6 mm, dropped at 6 m/s: a step 5.4 times shorter); the table keeps the
        // soft rubber-like bust the scene had before (20 MPa, 2,000 kg/m^3, 15 mm, creeping
        // plasticity, 2.5 m/s), to compare like with like.
        shellsim::BodyDef& bust = t.scene.bodies[0];
        bust.material.youngModulus = 2e7;
        bust.material.density = 2000;
        bust.material.thickness = 0.015;
        bust.initialVelocity = {0, 0, -2.5};
        bust.options<shellsim::FiberDef>().plasticity = shellsim::FiberPlasticityDef{
            .yieldStrain = 0.004, .yieldAngle = 0.04, .stretchCreep = 40, .bendCreep = 40};
      }
      break;
    case 1:
      t.scene = shellsim::loadScene(scenes + "/fiber_balloon.json");
      t.points = 24578;
      break;
    case 2:
      t.scene = shellsim::loadScene(scenes + "/fiber_mask_drop.json");
      t.points = 40880;
      break;
    default:
      t.scene = shellsim::loadScene(scenes + "/fiber_poster_tear.json");
      t.scene.bodies[0].options<shellsim::FiberDef>().nodeCount = 11860;
      t.scene.bodies[0].primitive->resolution = 600;  // 601 x 401 vertices
      t.points = 240000;
      break;
  }
  // The dense surface is bound below with the requested point count.
  t.scene.bodies[0].options<shellsim::FiberDef>().highResolutionSurface = false;
  return t;
}

// Explicit steps per frame of the paper's runs, inferred per scene (see the header):
// Max, Balloon, Mask, Pinup.
constexpr int64_t kPaperStepsPerFrame[4] = {1, 2, 12, 32};

// Softens the scene's material so that the automatic explicit step (half the stable
// estimate) takes `steps` per frame: the stable step of the stretching and bending terms
// scales as sqrt(density / E), so E is multiplied by f = (stable * steps / (2 frame))^2.
// Over-pressure is multiplied by f too, so that a pressurised shell stretches as far.
// Returns f.
double softenToPaperSteps(shellsim::SceneDef& scene, double stable, double frame, int64_t steps) {
  // 1 % short, so that rounding up the step count does not add a step.
  const double ratio = 0.99 * stable * static_cast<double>(steps) / (2.0 * frame);
  const double factor = std::min(1.0, ratio * ratio);
  for (shellsim::BodyDef& body : scene.bodies) {
    body.material.youngModulus *= factor;
    if (body.pressure) body.pressure->pressure *= factor;
  }
  return factor;
}

void BM_Table1(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  Table1Scene t = makeScene(which);
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  const double frame = 1.0 / 30.0;
  const bool paperMaterial = state.range(3) == 1;
  double softening = 1;
  if (paperMaterial) {
    softening = softenToPaperSteps(t.scene, shellsim::stableTimeStep(shellsim::buildWorld(t.scene)),
                                   frame, kPaperStepsPerFrame[which]);
  }
  shellsim::World world = shellsim::buildWorld(t.scene);
  shellsim::Body& body = world.bodies[0];
  // The same dense geometry buildWorld clustered, transformed the same way.
  const shellsim::BodyDef& def = t.scene.bodies[0];
  Geometry dense =
      def.file ? shellsim::readGeometry(*def.file) : shellsim::makePrimitive(*def.primitive);
  shellsim::applyTransform(dense, def.transform);
  shellsim::computeVertexNormals(dense);
  const Geometry points = evenlySpaced(dense, t.points);
  body.embedded = std::make_unique<shellsim::SurfaceBinding>(body.positions, points);

  const double stable = shellsim::stableTimeStep(world);
  const bool implicit = state.range(2) == 1;
  const auto steps =
      implicit ? int64_t{8} : static_cast<int64_t>(std::ceil(frame / (0.5 * stable)));
  const double dt = frame / static_cast<double>(steps);
  shellsim::ImplicitSettings settings;
  settings.scheme = shellsim::ImplicitScheme::kBackwardEuler;
  settings.newton.quasiNewton = true;
  settings.newton.tolerance = 1e-3;
  shellsim::ImplicitStepper stepper(settings);
  int64_t newton = 0, quasiNewton = 0;
  shellsim::PhaseTimes times;
  shellsim::applyScriptedMotion(world);
  shellsim::computeAccelerations(world);
  Geometry surface;
  double surfaceSeconds = 0;
  for (auto _ : state) {
    try {
      for (int64_t s = 0; s < steps; ++s) {
        if (implicit) {
          const shellsim::ImplicitStepReport report = stepper.step(world, dt, times);
          newton += report.bodies[0].iterations;
          quasiNewton += report.bodies[0].quasiNewtonIterations;
        } else {
          shellsim::step(world, dt, times);
        }
      }
    } catch (const shellsim::NumericalError& e) {
      state.SkipWithError(e.what());
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    body.embedded->deform(body.positions, surface);
    surfaceSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(surface.positions.data());
  }
  const double frames = static_cast<double>(state.iterations());
  const double forces = times.forces + times.integrate + times.contact + times.checks;
  state.counters["nodes"] = body.nodeCount();
  state.counters["points"] = body.embedded->vertexCount();
  state.counters["dt_s"] = dt;
  state.counters["steps_per_frame"] = static_cast<double>(steps);
  state.counters["forces_ms"] = 1e3 * forces / frames;
  state.counters["fracture_ms"] = 1e3 * times.inelastic / frames;
  state.counters["surface_ms"] = 1e3 * surfaceSeconds / frames;
  state.counters["total_ms"] = 1e3 * (forces + times.inelastic + surfaceSeconds) / frames;
  state.counters["ms_per_step"] =
      1e3 * (forces + times.inelastic) / (frames * static_cast<double>(steps));
  state.counters["cracks"] = body.crackCount();
  state.counters["young_modulus_Pa"] = t.scene.bodies[0].material.youngModulus;
  state.counters["softening"] = softening;
  if (implicit) {
    const double allSteps = frames * static_cast<double>(steps);
    state.counters["newton_per_step"] = static_cast<double>(newton) / allSteps;
    state.counters["quasi_newton_per_step"] = static_cast<double>(quasiNewton) / allSteps;
  }
}

// (scene, threads, integrator, material): material 0 is the scene's own, 1 the paper-like
// soft one (explicit only: it is what makes the explicit steps long). A fixed number of
// frames each, so the fractures happen within them.
BENCHMARK(BM_Table1)->Args({0, 2, 0, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({1, 2, 0, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({2, 2, 0, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({3, 2, 0, 0})->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({0, 2, 1, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({1, 2, 1, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({2, 2, 1, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({3, 2, 1, 0})->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({0, 2, 0, 1})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({1, 2, 0, 1})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({2, 2, 0, 1})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({3, 2, 0, 1})->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
