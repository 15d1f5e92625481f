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
// cloud. Run: build/release/bench/shellsim_bench --benchmark_filter=Table1
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "geometry/primitives.hpp"
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

void BM_Table1(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  Table1Scene t = makeScene(which);
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
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

  const double frame = 1.0 / 30.0;
  const double stable = shellsim::stableTimeStep(world);
  const auto steps = static_cast<int64_t>(std::ceil(frame / (0.5 * stable)));
  const double dt = frame / static_cast<double>(steps);
  shellsim::PhaseTimes times;
  shellsim::applyScriptedMotion(world);
  shellsim::computeAccelerations(world);
  Geometry surface;
  double surfaceSeconds = 0;
  for (auto _ : state) {
    for (int64_t s = 0; s < steps; ++s) shellsim::step(world, dt, times);
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
}

// (scene, threads); a fixed number of frames each, so the fractures happen within them.
BENCHMARK(BM_Table1)->Args({0, 2})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({1, 2})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({2, 2})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Table1)->Args({3, 2})->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
