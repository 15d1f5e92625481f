// The library's public face: a simulated world built and stepped in memory, with no scene
// file and no JSON (docs/api.md shows a complete program).
//
//   shellsim::Simulation sim;                        // gravity -9.81 z, velocity Verlet
//   shellsim::BodyDef sheet;  sheet.model = "discrete_shell";
//   const int32_t body = sim.addBody(mesh, sheet);   // a Geometry made in memory
//   sim.addObstacle(ground);                         // an ObstacleDef
//   sim.advance(0.5);                                // seconds
//   std::span<const double> x = sim.positions(body); // (nNodes, 3), m
//
// Definitions (BodyDef, ObstacleDef, PinDef, LoadDef, TimeDef) are the scene file's
// (shellsim/scene.hpp), with the same units and defaults; docs/scene-reference.md lists
// them. Values are checked when they are added: a bad one throws InputError naming it.
// Every method that can fail throws an exception of shellsim/errors.hpp and leaves the
// simulation as it was before the call (advance: at the last time it reached in whole,
// see there).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "shellsim/geometry.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

struct SimulationSettings {
  Vec3d gravity{0, 0, -9.81};  // m/s^2
  // The integrator and its settings, and the step (time.timeStep; 0: chosen from the
  // stable-step estimate). time.frameRate is the frame of advanceFrames; time.duration is
  // not used (a Simulation runs as long as it is advanced).
  TimeDef time;
  // Penalty contact between and within the bodies' meshes (off by default).
  ContactDef contact;
};

// Energies of one body, J.
struct BodyEnergies {
  double kinetic = 0;
  double stretching = 0;
  double bending = 0;
  double gravitational = 0;  // -sum m g.x, zero at the origin
  [[nodiscard]] double total() const { return kinetic + stretching + bending + gravitational; }
};

// Steps taken since the simulation was made.
struct StepStatistics {
  int64_t steps = 0;           // accepted steps
  int64_t rejectedSteps = 0;   // proposals undone and retried as two half steps
  int64_t recomputations = 0;  // advances recomputed from their start with half the step
  int64_t newtonIterations = 0;
  int64_t factorizations = 0;  // Cholesky factorizations (implicit integrators)
};

// Two triangles that intersect (Simulation::intersectingTriangles): the body and the nodes
// of each.
struct IntersectingTriangles {
  int32_t bodyA = 0;
  std::array<int32_t, 3> nodesA{};
  int32_t bodyB = 0;
  std::array<int32_t, 3> nodesB{};
};

class Simulation;

// A copy of everything in a simulation that evolves: time, positions, velocities, each
// model's plastic and fracture state, the step. Restoring it (Simulation::restoreState)
// makes the simulation continue exactly as it did from the moment it was saved. Cheap to
// copy (shared, immutable).
class SimulationState {
 public:
  SimulationState();
  [[nodiscard]] double time() const;  // s
  [[nodiscard]] bool empty() const { return data_ == nullptr; }

  struct Data;  // opaque

 private:
  friend class Simulation;
  friend struct SimulationStateAccess;
  std::shared_ptr<const Data> data_;
};

class Simulation {
 public:
  // Validates the settings (throws InputError naming the value).
  explicit Simulation(const SimulationSettings& settings = {});
  // Every body and obstacle of a scene, with the scene's gravity and time settings; the
  // bodies' geometry files are read. Output settings are not used.
  explicit Simulation(const SceneDef& scene);
  Simulation(Simulation&&) noexcept;
  Simulation& operator=(Simulation&&) noexcept;
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;
  ~Simulation();

  // Adds a body made from a triangle mesh or point cloud in memory, with the definition's
  // transform, model, material, pins, loads, pressure and initial velocity (def.file and
  // def.primitive are ignored: `geometry` takes their place). An empty name becomes
  // "body<i>"; names are unique. Returns the body's index. The nodes are the geometry's
  // vertices or points, or clusters of them (fiber.node_count), minus vertices of no
  // triangle (with a warning); nodeOfVertex maps one to the other.
  int32_t addBody(Geometry geometry, BodyDef def);
  // Adds a body from def.file or def.primitive (paths as given, relative to the working
  // directory).
  int32_t addBody(BodyDef def);
  // Adds an analytic obstacle (plane, sphere, box), optionally moving on a path.
  int32_t addObstacle(const ObstacleDef& obstacle);
  // Pins, or loads, the nodes a selection picks on an existing body.
  void addPin(int32_t body, const PinDef& pin);
  void addLoad(int32_t body, const LoadDef& load);

  // Advances by `seconds` (> 0) in equal steps no longer than timeStep(). A step that
  // fails (NaN, runaway speed, Newton) or that a model rejects is retried as two half
  // steps; if that fails too, the whole advance is recomputed from its start with half
  // the step (up to 4 times, the smaller step kept), each with a warning. Throws
  // NumericalError when it still fails, leaving the simulation at the start of the advance.
  // The implicit integrators keep their Newton solver's Hessian factor from step to step,
  // across advances too, and where within its tolerance Newton stops depends on it (in the
  // last bits). advanceFrames starts every frame without it, as do saveState and
  // restoreState: a frame depends on the state at its start alone (a run resumed from a
  // checkpoint writes the unbroken run's frames, a run restored to a frame replays the
  // frames after it), and a restored state continues bit for bit as the run that saved it.
  // Advancing step by step with advance keeps the factor (on a 400-node fiber balloon,
  // backward Euler at 2 ms: 0.68 s for 500 such calls; 5.9 s if each started afresh).
  void advance(double seconds);
  // Advances by `frames` frames of 1 / settings.time.frameRate seconds each, one advance
  // per frame; frame times are exact multiples of the frame interval.
  void advanceFrames(int32_t frames = 1);

  [[nodiscard]] double time() const;  // s
  // The planned step, s (smaller after a recomputation), and the stable explicit step
  // estimate over all bodies, s.
  [[nodiscard]] double timeStep() const;
  [[nodiscard]] double stableTimeStep() const;
  // One body's stable explicit step estimate, s (InputError for a bad index).
  [[nodiscard]] double stableTimeStep(int32_t body) const;
  [[nodiscard]] const StepStatistics& statistics() const;

  [[nodiscard]] int32_t bodyCount() const;
  [[nodiscard]] int32_t obstacleCount() const;
  // Where an obstacle is now, as a displacement from its definition (its path's offset, or a
  // thrown obstacle's flight), m; and its velocity, m/s. InputError for a bad index.
  [[nodiscard]] Vec3d obstacleOffset(int32_t obstacle) const;
  [[nodiscard]] Vec3d obstacleVelocity(int32_t obstacle) const;
  // Index of the body with this name; throws InputError when there is none.
  [[nodiscard]] int32_t bodyIndex(const std::string& name) const;
  [[nodiscard]] const std::string& bodyName(int32_t body) const;
  [[nodiscard]] std::string modelName(int32_t body) const;
  [[nodiscard]] int32_t nodeCount(int32_t body) const;
  [[nodiscard]] int64_t elementCount(int32_t body) const;

  // Node positions, m, and velocities, m/s, shape (nNodes, 3); masses, kg, (nNodes).
  [[nodiscard]] std::span<const double> positions(int32_t body) const;
  [[nodiscard]] std::span<const double> velocities(int32_t body) const;
  [[nodiscard]] std::span<const double> masses(int32_t body) const;
  // Replace them (shape (nNodes, 3), finite); forces are recomputed at once. Pinned nodes
  // keep following their pins at the next step.
  void setPositions(int32_t body, std::span<const double> positions);
  void setVelocities(int32_t body, std::span<const double> velocities);
  // For each vertex or point of the geometry the body was made from, its node (-1:
  // dropped), (nInputVertices).
  [[nodiscard]] std::span<const int32_t> nodeOfVertex(int32_t body) const;
  // 1 where a pin drives the node, (nNodes).
  [[nodiscard]] std::span<const uint8_t> pinnedNodes(int32_t body) const;

  // The surface as it would be written to a frame: the mesh over the nodes, the dense
  // input surface moved by clustered fiber nodes, or the nodes as a point cloud.
  [[nodiscard]] Geometry surface(int32_t body) const;
  [[nodiscard]] BodyEnergies energies(int32_t body) const;
  // Connected piece of every node, (nNodes), numbered 0.. by smallest node; all 0 for a
  // model that never breaks.
  [[nodiscard]] std::vector<int32_t> nodePieces(int32_t body) const;
  [[nodiscard]] int32_t pieceCount(int32_t body) const;
  [[nodiscard]] int64_t brokenElements(int32_t body) const;  // so far
  [[nodiscard]] int32_t cracks(int32_t body) const;          // crack planes so far
  // The gas over-pressure pushing on the body now, Pa (the scene's pressure times its ramp;
  // after the first crack as vented; 0 without a pressure).
  [[nodiscard]] double gasPressure(int32_t body) const;
  // Triangle pairs of the bodies' meshes, within a body and between bodies, that intersect
  // at the current positions (exact predicates; gingold2004 section 4.3's "no triangle pair
  // intersects"), leaving out the pairs mesh contact leaves out: those sharing a node and
  // those closer than twice their touching distance in the rest shape, and triangles moving
  // with a rigid fragment. Counted whether or not the scene's contact is on; 0 without
  // triangle meshes (the fiber model's points).
  [[nodiscard]] int64_t intersectingTrianglePairs() const;
  // The same pairs, with their bodies and nodes, in a fixed order.
  [[nodiscard]] std::vector<IntersectingTriangles> intersectingTriangles() const;
  // Pieces handed to Bullet as rigid bodies so far (BodyDef::rigidFragments), and for each
  // node the one it moves with, -1 while it deforms, (nNodes); empty before the first.
  [[nodiscard]] int32_t rigidFragmentCount(int32_t body) const;
  [[nodiscard]] std::span<const int32_t> rigidFragmentOfNode(int32_t body) const;

  // Copies, and puts back, the state that evolves. Restoring a state saved from another
  // simulation, or before bodies were added, throws InputError. A restored state continues
  // bit for bit as the run that saved it did (see advance).
  [[nodiscard]] SimulationState saveState() const;
  void restoreState(const SimulationState& state);
  // The same as a file: written atomically (a temporary file, then a rename), versioned and
  // checksummed. Reading checks the file against this simulation: one that is corrupt,
  // written by another format version or saved from a simulation set up differently
  // (other bodies, geometry, definitions, obstacles or settings; the duration aside) throws
  // InputError naming the file and what is wrong. IoError when it cannot be read or written.
  void writeStateFile(const SimulationState& state, const std::filesystem::path& path) const;
  [[nodiscard]] SimulationState readStateFile(const std::filesystem::path& path) const;

  // Every warning so far (discretization, step rejections, recomputations), in order.
  [[nodiscard]] const std::vector<std::string>& warnings() const;
  // Called once for each warning from now on, as it is made.
  void onWarning(std::function<void(const std::string&)> handler);
  // A flag read before every step (e.g. set by a signal handler, or by another thread):
  // once it is true, the advance in progress throws Interrupted and leaves the simulation
  // at that advance's start, as a failed one does. nullptr (the default): never stopped.
  // The flag must outlive the calls that may read it.
  void setStopFlag(const std::atomic<bool>* stop);

  struct Impl;

 private:
  friend Impl& implOf(Simulation& simulation);
  friend const Impl& implOf(const Simulation& simulation);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shellsim
