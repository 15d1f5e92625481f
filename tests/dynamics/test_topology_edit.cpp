// Topology edits as events (models/model.hpp, TopologyEdit; dynamics/world.hpp,
// applyTopologyEdit), proved with a toy model that splits nodes mid-run
// (splitting_chain.hpp): mass and momentum conserved by a split, every per-node array
// remapped, explicit and implicit runs carrying on through splits, saved states and state
// files across splits, and frames whose node count changes written and rendered.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/recorder.hpp"
#include "dynamics/simulation_impl.hpp"
#include "dynamics/splitting_chain.hpp"
#include "dynamics/step_pipeline.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/render.hpp"

namespace shellsim {
namespace {

using testing::SplittingChain;

using testing::splittingChainBody;

constexpr int32_t kNodes = testing::kChainNodes;

Body chainBody(double stretch = 1.0) {
  return splittingChainBody(stretch);
}

World chainWorld(double stretch = 1.0) {
  World world;
  world.gravity = Vec3::Zero();
  world.bodies.push_back(chainBody(stretch));
  computeAccelerations(world);
  return world;
}

double totalMass(const Body& body) {
  const auto m = body.model->nodeMasses();
  return std::accumulate(m.begin(), m.end(), 0.0);
}

Vec3 momentum(const Body& body) {
  const auto m = body.model->nodeMasses();
  Vec3 p = Vec3::Zero();
  for (size_t i = 0; i < m.size(); ++i) {
    p +=
        m[i] * Vec3(body.velocities[3 * i], body.velocities[3 * i + 1], body.velocities[3 * i + 2]);
  }
  return p;
}

// Pins the chain's input vertices `vertices` (a pin named "pin").
void pinChainVertices(World& world, std::vector<int32_t> vertices) {
  PinDef pin;
  pin.shape = PinShape::kVertices;
  pin.vertices = std::move(vertices);
  addPin(world, 0, pin, "pin");
}

TEST(TopologyEdit, ASplitConservesMassMomentumAndKineticEnergy) {
  World world = chainWorld(1.1);  // every spring 10 % long: the first one's node splits
  Body& body = world.bodies[0];
  const double mass = totalMass(body);
  const Vec3 p = momentum(body);
  const double kinetic = kineticEnergy(body);
  PhaseTimes times;
  updateInelastic(world, 1e-3, times);

  ASSERT_EQ(body.nodeCount(), kNodes + 1);
  EXPECT_EQ(body.positions.size(), 3u * (kNodes + 1));
  EXPECT_EQ(body.accelerations.size(), 3u * (kNodes + 1));
  EXPECT_EQ(body.nodeEdits, 1);
  // Spring (1, 2) is the first with two springs at its first node: node 1 split into 1, 2.
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(body.positions[3 + c], body.positions[6 + c]);
    EXPECT_EQ(body.velocities[3 + c], body.velocities[6 + c]);
  }
  EXPECT_NEAR(totalMass(body), mass, 1e-15 * mass);
  EXPECT_NEAR((momentum(body) - p).norm(), 0.0, 1e-15 * p.norm());
  EXPECT_NEAR(kineticEnergy(body), kinetic, 1e-15 * kinetic);
  EXPECT_EQ(pieceCount(body), 2);
  // The accelerations are those of the new springs: the broken-off spring pulls only the copy.
  std::vector<double> gradient(body.positions.size(), 0.0);
  (void)body.model->addGradient(body.positions, gradient);
  const auto m = body.model->nodeMasses();
  for (size_t i = 0; i < gradient.size(); ++i) {
    EXPECT_DOUBLE_EQ(body.accelerations[i], -gradient[i] / m[i / 3]) << i;
  }
}

TEST(TopologyEdit, PinsLoadsVertexMapAndPressureTrianglesFollowTheNodes) {
  World world = chainWorld();
  Body& body = world.bodies[0];
  pinChainVertices(world, {2});
  LoadDef load;
  load.select.shape = PinShape::kVertices;
  load.select.vertices = {2, 3};
  load.force = {1, 0, 0};
  addLoad(world, 0, load, "load");
  body.pressure.emplace();
  body.pressure->pressure = 100.0;
  body.pressure->triangles = {1, 2, 3, 0, 4, 5};
  const std::vector<double> pinRest(body.positions.begin() + 6, body.positions.begin() + 9);

  auto& chain = dynamic_cast<SplittingChain&>(*body.model);
  applyTopologyEdit(body, chain.split(2));  // spring (2, 3): node 2 splits into 2 and 3

  EXPECT_EQ(body.pinned, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(body.pins[0].nodes, (std::vector<int32_t>{2, 3}));
  std::vector<double> bothRest = pinRest;
  bothRest.insert(bothRest.end(), pinRest.begin(), pinRest.end());
  EXPECT_EQ(body.pins[0].restPositions, bothRest);
  EXPECT_EQ(body.loads[0].nodes, (std::vector<int32_t>{2, 3, 4}));
  const auto m = body.model->nodeMasses();
  const double loaded = m[2] + m[3] + m[4];
  ASSERT_EQ(body.loads[0].shares.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(body.loads[0].shares[k], m[2 + k] / loaded);
  EXPECT_EQ(body.nodeOfInputVertex, (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(body.pressure->triangles, (std::vector<int32_t>{1, 2, 4, 0, 5, 6}));
  EXPECT_EQ(body.externalForces.size(), 3u * (kNodes + 1));
}

// A node made on an edge between a pinned and a free node (fracture through a face next to
// a clamp) is free: pinned, it would be held at the pinned end's rest position. A node made
// of pinned nodes only stays pinned, and a load keeps the nodes all of whose sources it held.
TEST(TopologyEdit, ANodeBetweenAPinnedAndAFreeNodeIsFree) {
  World world = chainWorld();
  Body& body = world.bodies[0];
  pinChainVertices(world, {1, 2});
  LoadDef load;
  load.select.shape = PinShape::kVertices;
  load.select.vertices = {2, 3};
  load.force = {1, 0, 0};
  addLoad(world, 0, load, "load");
  auto& chain = dynamic_cast<SplittingChain&>(*body.model);
  (void)chain.split(2);  // the model now has one node more; the edit below replaces its own
  // New node 3 halfway between old 2 (pinned) and old 3 (free); new node 2 halfway between
  // old 1 and 2 (both pinned); the others copies.
  TopologyEdit edit;
  edit.sourceOffsets = {0};
  const auto add = [&](std::vector<std::pair<int32_t, double>> sources) {
    for (const auto& [node, weight] : sources) {
      edit.sourceNodes.push_back(node);
      edit.sourceWeights.push_back(weight);
    }
    edit.sourceOffsets.push_back(static_cast<int32_t>(edit.sourceNodes.size()));
  };
  add({{0, 1.0}});
  add({{1, 1.0}});
  add({{1, 0.5}, {2, 0.5}});
  add({{2, 0.5}, {3, 0.5}});
  for (int32_t i = 3; i < kNodes; ++i) add({{i, 1.0}});
  const std::vector<double> old = body.positions;
  applyTopologyEdit(body, edit);
  EXPECT_EQ(body.pinned, (std::vector<uint8_t>{0, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(body.pins[0].nodes, (std::vector<int32_t>{1, 2}));
  ASSERT_EQ(body.pins[0].restPositions.size(), 6u);
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_DOUBLE_EQ(body.pins[0].restPositions[3 + c], 0.5 * (old[3 + c] + old[6 + c]));
  }
  EXPECT_EQ(body.loads[0].nodes, (std::vector<int32_t>{3, 4}));
}

// An edit's displacements (a model's nodes sliding after an event, fiber_resample.cpp) move
// the free nodes after the blend; a pinned node stays on its pin. A displacement list of the
// wrong length is refused by name.
TEST(TopologyEdit, DisplacementsMoveTheFreeNodesOnly) {
  // Two pinned chains split alike, one edit with displacements and one without.
  World moved = chainWorld(), still = chainWorld();
  pinChainVertices(moved, {2});
  pinChainVertices(still, {2});
  // Node 2 splits into 2 and 3, both pinned.
  TopologyEdit edit = dynamic_cast<SplittingChain&>(*moved.bodies[0].model).split(2);
  const TopologyEdit plain = dynamic_cast<SplittingChain&>(*still.bodies[0].model).split(2);
  edit.displacements.assign(3 * static_cast<size_t>(edit.nodeCount()), 0.0);
  for (size_t i = 0; i < edit.displacements.size(); i += 3) edit.displacements[i + 2] = 0.01;
  TopologyEdit wrong = edit;
  wrong.displacements.pop_back();
  EXPECT_THROW(applyTopologyEdit(still.bodies[0], wrong), NumericalError);
  applyTopologyEdit(still.bodies[0], plain);
  applyTopologyEdit(moved.bodies[0], edit);
  const Body& body = moved.bodies[0];
  ASSERT_EQ(body.pinned, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0}));
  for (size_t i = 0; i < body.pinned.size(); ++i) {
    const double lift = body.positions[3 * i + 2] - still.bodies[0].positions[3 * i + 2];
    EXPECT_DOUBLE_EQ(lift, body.pinned[i] != 0 ? 0.0 : 0.01) << "node " << i;
  }
}

TEST(TopologyEdit, AMalformedEditIsAnErrorNamingTheModel) {
  World world = chainWorld();
  Body& body = world.bodies[0];
  auto& chain = dynamic_cast<SplittingChain&>(*body.model);
  TopologyEdit edit = chain.split(0);
  edit.sourceNodes[3] = 99;
  try {
    applyTopologyEdit(body, edit);
    FAIL() << "no error";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("splitting_chain"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("old node 99"), std::string::npos) << e.what();
  }
  edit = TopologyEdit{};
  edit.sourceOffsets = {0, 1};
  edit.sourceNodes = {0};
  edit.sourceWeights = {1};
  EXPECT_THROW(applyTopologyEdit(body, edit), NumericalError);  // 1 node, the model has 7
}

// Runs the chain for 0.4 s with `time`; returns the world.
World runChain(const TimeDef& time, double step) {
  World world = chainWorld();
  TimeIntegrator integrator(time, step);
  PhaseTimes times;
  for (int frame = 1; frame <= 12; ++frame) {
    integrator.advance(world, 1.0 / 30, frame / 30.0, times);
  }
  return world;
}

TEST(TopologyEdit, ExplicitAndImplicitRunsCarryOnThroughSplits) {
  const World start = chainWorld();
  const Vec3 p = momentum(start.bodies[0]);
  const double mass = totalMass(start.bodies[0]);
  TimeDef implicit;
  implicit.integrator = Integrator::kBackwardEuler;
  implicit.newtonTolerance = 1e-10;
  for (const auto& [time, step, tolerance] :
       {std::tuple{TimeDef{}, 2e-4, 1e-12}, std::tuple{implicit, 1.0 / 300, 1e-8}}) {
    const World world = runChain(time, step);
    const Body& body = world.bodies[0];
    EXPECT_GE(body.nodeCount(), kNodes + 2) << "the chain split at least twice";
    EXPECT_GE(pieceCount(body), 3);
    EXPECT_EQ(body.nodeEdits, body.nodeCount() - kNodes);
    EXPECT_NEAR(totalMass(body), mass, 1e-14 * mass);
    EXPECT_NEAR((momentum(body) - p).norm(), 0.0, tolerance * p.norm());
    for (const double x : body.positions) ASSERT_TRUE(std::isfinite(x));
  }
}

// The chain's points, at rest along x.
Geometry chainPoints() {
  Geometry points;
  for (int32_t i = 0; i < kNodes; ++i) {
    points.positions.insert(points.positions.end(), {testing::kChainSpacing * i, 0.0, 0.0});
  }
  return points;
}

// A Simulation whose one body is the chain, made through the public API with the chain
// registered as a model (splitting_chain.hpp), moving as chainBody().
Simulation chainSimulation() {
  testing::registerSplittingChain();
  SimulationSettings settings;
  settings.gravity = {0, 0, 0};
  settings.time.frameRate = 30;
  Simulation simulation(settings);
  BodyDef chain;
  chain.name = "chain";
  chain.model = "splitting_chain";
  chain.options<testing::SplittingChainDef>().splitStrain = testing::kChainSplitStrain;
  (void)simulation.addBody(chainPoints(), chain);
  simulation.setVelocities(0, chainBody().velocities);
  return simulation;
}

TEST(TopologyEdit, SavedStatesAndStateFilesComeBackAcrossSplits) {
  Simulation simulation = chainSimulation();
  const SimulationState start = simulation.saveState();
  simulation.advanceFrames(12);
  const int32_t nodes = simulation.nodeCount(0);
  ASSERT_GT(nodes, kNodes);
  const std::vector<double> after(simulation.positions(0).begin(), simulation.positions(0).end());
  const SimulationState end = simulation.saveState();

  simulation.restoreState(start);  // back across the splits
  EXPECT_EQ(simulation.nodeCount(0), kNodes);
  EXPECT_EQ(simulation.positions(0).size(), 3u * kNodes);
  EXPECT_EQ(simulation.pieceCount(0), 1);
  simulation.advanceFrames(12);  // and forward again: the same splits, the same motion
  EXPECT_EQ(simulation.nodeCount(0), nodes);
  EXPECT_TRUE(std::equal(after.begin(), after.end(), simulation.positions(0).begin()));

  // A state file written after the splits, read into a simulation set up the same way.
  const auto file = std::filesystem::path(::testing::TempDir()) / "chain_state.bin";
  simulation.writeStateFile(end, file);
  simulation.advanceFrames(6);
  Simulation fresh = chainSimulation();
  fresh.restoreState(fresh.readStateFile(file));
  EXPECT_EQ(fresh.nodeCount(0), nodes);
  EXPECT_EQ(implOf(fresh).world.bodies[0].nodeEdits, nodes - kNodes);
  fresh.advanceFrames(6);
  ASSERT_EQ(fresh.nodeCount(0), simulation.nodeCount(0));
  EXPECT_TRUE(std::equal(fresh.positions(0).begin(), fresh.positions(0).end(),
                         simulation.positions(0).begin()));
  std::filesystem::remove(file);
}

TEST(TopologyEdit, FramesWithAChangingNodeCountAreWrittenAndRendered) {
  World world = chainWorld();
  const auto folder = std::filesystem::path(::testing::TempDir()) / "splitting_chain_run";
  std::filesystem::remove_all(folder);
  Recorder recorder(folder, {OutputFormat::kPly, OutputFormat::kObj, OutputFormat::kVtp});
  TimeIntegrator integrator(TimeDef{}, 2e-4);
  PhaseTimes times;
  recorder.writeFrame(world, 0, integrator.counts(), false, 0);
  for (int frame = 1; frame <= 12; ++frame) {
    integrator.advance(world, 1.0 / 30, frame / 30.0, times);
    recorder.writeFrame(world, frame, integrator.counts(), false, 0);
  }
  recorder.writeSummary(world, "chain", 2e-4, 1e-3, times, {}, "completed", "");

  const Geometry first = readGeometry(folder / recorder.frames().front().files[0]);
  const Geometry last = readGeometry(folder / recorder.frames().back().files[0]);
  EXPECT_EQ(first.vertexCount(), kNodes);
  EXPECT_EQ(last.vertexCount(), world.bodies[0].nodeCount());
  EXPECT_GT(last.vertexCount(), first.vertexCount());
  std::ifstream summaryFile(folder / "summary.json");
  const auto summary = nlohmann::json::parse(summaryFile);
  EXPECT_EQ(summary["frames"][0]["bodies"][0]["nodes"], kNodes);
  EXPECT_EQ(summary["frames"][12]["bodies"][0]["nodes"], world.bodies[0].nodeCount());
  EXPECT_EQ(summary["frames"][12]["bodies"][0]["elements"], kNodes - 1);

  RenderOptions options;
  options.settings.width = 160;
  options.settings.height = 90;
  options.video = false;
  const RenderReport report = renderRun(folder, options);
  EXPECT_EQ(report.framesRendered, 13);
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace shellsim
