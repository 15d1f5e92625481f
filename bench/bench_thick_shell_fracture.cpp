// Table 2 of steinemann on this machine: fracture of one-layer thick shells in fine mode,
// rigid fragments in Bullet included. The paper (Pentium 4, 3 GHz) gives frame rates: walls
// (600 vertices) 100 fps, cow (3,000) 32 fps, castle (11,000) 10 fps; it never says how
// much simulated time a frame covers, so its "frame" is read here as one simulation step
// (an interactive loop that steps once per drawn frame). Reported per model: steps per
// second (the paper's fps), and what a user feels, wall seconds per 1/30 s frame and per
// simulated second.
//
// The scene: the model, about 1 m tall, standing on the floor, hit by a 20 kg ball at 5 m/s
// (penalty contact), breaking at 2 % stretch (fine mode, 16 splits per step at most),
// pieces of up to 60 nodes handed to Bullet. The modes (section 4.2.2-4.2.3; argument
// `mode`): 0 fine; 1 coarse; 2 large-fragment, fine with cracks extended 0.2 m and at most 2
// splits a step (crack frequency); 3 the same with local re-meshing. Timed: the first 10
// frames (1/3 s), through the
// impact and the fragments' fall. The walls are a box of 1 x 0.1 x 0.8 m; the cow is
// ../shared/data/cow.obj (2,903 vertices); the castle stand-in is the Stanford bunny remeshed
// (CGAL, isotropic) to about 11,000 vertices.
// Run: build/release/bench/shellsim_bench --benchmark_filter=Table2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "geometry/primitives.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"
#include "shellsim/models/thick_shell.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/world.hpp"

namespace {

using shellsim::Geometry;

// The model scaled to 1 m along its longest side, standing on z = 0, centred in x and y.
Geometry standing(Geometry mesh) {
  const shellsim::Bounds b = shellsim::computeBounds(mesh);
  const double longest = std::max({b.max[0] - b.min[0], b.max[1] - b.min[1], b.max[2] - b.min[2]});
  for (size_t i = 0; i < mesh.positions.size(); i += 3) {
    mesh.positions[i] = (mesh.positions[i] - 0.5 * (b.min[0] + b.max[0])) / longest;
    mesh.positions[i + 1] = (mesh.positions[i + 1] - 0.5 * (b.min[1] + b.max[1])) / longest;
    mesh.positions[i + 2] = (mesh.positions[i + 2] - b.min[2]) / longest;
  }
  return mesh;
}

const Geometry& table2Model(int which) {
  static const Geometry walls = [] {
    shellsim::PrimitiveDef box;
    box.type = shellsim::PrimitiveType::kBox;
    box.size = {1.0, 0.1, 0.8};
    box.resolution = 17;  // 610 vertices
    return standing(shellsim::makePrimitive(box));
  }();
  static const Geometry cow = [] {
    return standing(shellsim::readGeometry(std::string(SHELLSIM_DATA_DIR) + "/cow.obj"));
  }();
  static const Geometry castle = [] {
    Geometry mesh = shellsim::readGeometry(std::string(SHELLSIM_DATA_DIR) + "/stanford-bunny.obj");
    shellsim::RepairOptions options;
    options.targetEdgeLength = 2.55e-3;  // about 11,000 vertices
    (void)shellsim::repairMesh(mesh, options);
    return standing(mesh);
  }();
  return which == 0 ? walls : (which == 1 ? cow : castle);
}

void BM_ThickShellFractureTable2(benchmark::State& state) {
  const Geometry& mesh = table2Model(static_cast<int>(state.range(0)));
  const shellsim::ThreadLimit limit(static_cast<int>(state.range(1)));
  const int64_t mode = state.range(2);
  constexpr int kFrames = 10;
  double seconds = 0;
  int64_t steps = 0;
  int32_t pieces = 0, fragments = 0, nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    shellsim::SimulationSettings settings;
    shellsim::Simulation sim(settings);
    shellsim::ObstacleDef floor;
    floor.friction = 0.6;
    sim.addObstacle(floor);
    const shellsim::Bounds b = shellsim::computeBounds(mesh);
    shellsim::ObstacleDef ball;
    ball.type = shellsim::ObstacleType::kSphere;
    ball.radius = 0.12;
    ball.center = {0, b.min[1] - 0.2, 0.5 * b.max[2]};
    ball.response = shellsim::ObstacleResponse::kPenalty;
    ball.mass = 20;
    ball.velocity = {0, 5, 0};
    sim.addObstacle(ball);
    shellsim::BodyDef def;
    def.model = "thick_shell";
    def.material.youngModulus = 5e6;
    def.material.thickness = 0.02;
    def.material.density = 800;
    def.material.internalDamping = 20;
    shellsim::ThickShellDef& options = def.options<shellsim::ThickShellDef>();
    options.layers = 1;
    shellsim::ThickShellFractureDef fracture;
    fracture.stretch = 0.02;
    fracture.maxSplits = 16;
    fracture.coarse = mode == 1;
    if (mode >= 2) {
      fracture.extension = 0.2;
      fracture.maxSplits = 2;
      fracture.remesh = mode == 3;
    }
    options.fracture = fracture;
    shellsim::RigidFragmentsDef rigid;
    rigid.maxNodes = 60;
    def.rigidFragments = rigid;
    shellsim::PinDef base;
    base.center = {0, 0, 0};
    base.halfExtents = {2, 2, 0.02};
    def.pins = {base};
    const int32_t body = sim.addBody(mesh, def);
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    sim.advanceFrames(kFrames);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    steps = sim.statistics().steps;
    pieces = sim.pieceCount(body);
    fragments = sim.rigidFragmentCount(body);
    nodes = sim.nodeCount(body);
  }
  const double simulated = kFrames / 30.0;
  state.counters["vertices"] = static_cast<double>(mesh.vertexCount());
  state.counters["nodes_after"] = nodes;
  state.counters["pieces"] = pieces;
  state.counters["rigid_fragments"] = fragments;
  state.counters["steps_per_s"] = static_cast<double>(steps) / seconds;
  state.counters["s_per_frame"] = seconds / kFrames;
  state.counters["s_per_sim_s"] = seconds / simulated;
}
BENCHMARK(BM_ThickShellFractureTable2)
    ->ArgNames({"model", "threads", "mode"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}, {0}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();
BENCHMARK(BM_ThickShellFractureTable2)
    ->ArgNames({"model", "threads", "mode"})
    ->ArgsProduct({{0, 1, 2}, {2}, {1, 2, 3}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
