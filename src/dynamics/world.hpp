// The simulated world: bodies (model + state), obstacles and gravity.
#pragma once

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/vec3.hpp"
#include "dynamics/mesh_contact.hpp"
#include "dynamics/rigid_fragments.hpp"
#include "models/model.hpp"
#include "shellsim/scene.hpp"
#include "surface/surface_binding.hpp"

namespace shellsim {

// Piecewise-linear scripted offset over time; constant before the first and after the
// last keyframe. Keyframe times are strictly increasing (the scene parser checks).
class KinematicPath {
 public:
  KinematicPath() = default;
  explicit KinematicPath(std::vector<ObstacleDef::Keyframe> keyframes);
  [[nodiscard]] Vec3 offset(double time) const;    // m
  [[nodiscard]] Vec3 velocity(double time) const;  // m/s, the slope of the active segment
  [[nodiscard]] bool isStatic() const { return keyframes_.empty(); }

 private:
  std::vector<ObstacleDef::Keyframe> keyframes_;
};

// Piecewise-linear scalar factor over time; constant outside the keys; 1 without keys.
class Ramp {
 public:
  Ramp() = default;
  explicit Ramp(std::vector<RampKey> keys) : keys_(std::move(keys)) {}
  [[nodiscard]] double value(double time) const;

 private:
  std::vector<RampKey> keys_;
};

// A force on a set of nodes, spread in proportion to their masses.
struct LoadGroup {
  std::vector<int32_t> nodes;  // (nLoaded), node indices
  std::vector<double> shares;  // (nLoaded), m_i / sum of the group's masses
  Vec3 force = Vec3::Zero();   // total, N, times the ramp
  Ramp ramp;
};

// Gas over-pressure inside a closed shell (wicke2005 Fig. 9, the balloon).
struct PressureLoad {
  double pressure = 0;  // Pa, times the ramp
  Ramp ramp;
  bool releaseOnFracture = true;  // the gas leaves from the body's first crack on
  VentModel vent = VentModel::kExponential;
  double ventTime = 0;            // s: exp(-(t - ventStart) / ventTime) then; 0: at once
  double ventStart = kNotVented;  // s: the world time of the body's first crack
  static constexpr double kNotVented = std::numeric_limits<double>::infinity();
  // The orifice vent (PressureDef): from the first crack the gas is an ideal gas at constant
  // temperature, `gas` = p_abs V (Pa m^3), which only the flow through the openings lowers.
  double ambientPressure = 101325;  // Pa, absolute
  double gasDensity = 1.2;          // kg/m^3
  double dischargeCoefficient = 0.61;
  double gas = kNotSealed;  // Pa m^3; negative until sealed in at the first crack
  static constexpr double kNotSealed = -1;
  // The lowest over-pressure since the gas was sealed in, Pa: through the shell's openings the
  // gas only leaves, so the shell's own motion cannot compress it past that (ventSealedGas).
  double ventedFloor = std::numeric_limits<double>::infinity();
  // |sum A_i| / sum |A_i| of the rest shape's area vectors: what the sampling leaves of a
  // closed surface's zero sum, not counted as an opening.
  double closedResidue = 0;

  [[nodiscard]] bool sealed() const {
    return releaseOnFracture && vent == VentModel::kOrifice && gas >= 0;
  }
  // The exponential vent's share of the gas still in at `time` (1 before any crack, without
  // release, and for the orifice vent, whose pressure follows from `gas` instead).
  [[nodiscard]] double remainingShare(double time) const {
    if (!releaseOnFracture || time < ventStart || vent == VentModel::kOrifice) return 1.0;
    return ventTime > 0 ? std::exp(-(time - ventStart) / ventTime) : 0.0;
  }
  // For a model without area vectors: its surface mesh over the nodes, (nTriangles, 3),
  // whose area vectors the pressure then uses (the topology of such models is fixed).
  std::vector<int32_t> triangles;
  // A closed surface (no boundary edge; for a point cloud, area vectors summing to under
  // kClosedAreaRatio of their lengths' sum), decided on the rest shape: the gas's net
  // force on it is zero, so the sampled sum's residue is taken off in proportion to mass.
  // An open surface (a sheet, a sail) keeps its net force: it is pushed as a whole.
  bool closed = true;
  static constexpr double kClosedAreaRatio = 0.05;
};

// Nodes moved by the script instead of by forces.
struct PinGroup {
  std::vector<int32_t> nodes;         // (nPinned), node indices
  std::vector<double> restPositions;  // (nPinned, 3), positions at time 0, m
  KinematicPath path;
  double release = std::numeric_limits<double>::infinity();  // s: lets go from then on
  bool holding = true;  // whether Body::pinned counts it (follows release and the time)
};

struct Body {
  std::string name;
  std::unique_ptr<Model> model;
  // Scratch of the model's passes (Model::makeWorkspace), for the model it was made for:
  // use workspaceOf(body), which makes it anew when the model was replaced.
  std::unique_ptr<ModelWorkspace> workspace;
  const Model* workspaceModel = nullptr;
  std::vector<double> positions;      // (nNodes, 3), m
  std::vector<double> velocities;     // (nNodes, 3), m/s
  std::vector<double> accelerations;  // (nNodes, 3), m/s^2 at the current positions
  std::vector<uint8_t> pinned;        // (nNodes), 1 where a pin drives the node
  std::vector<PinGroup> pins;
  // The node each vertex or point of the body's input geometry became, (nInputVertices),
  // -1 where it was dropped: pins and loads given as vertex lists go through it.
  std::vector<int32_t> nodeOfInputVertex;
  std::vector<int32_t> contactObstacle;  // (nNodes), obstacle touched this step, or -1
  std::vector<double> contactNormal;     // (nNodes, 3), its outward normal where touched
  double damping = 0;                    // mass-proportional damping, 1/s
  double internalDamping = 0;            // decay of motion relative to the rigid, 1/s
  double thickness = 0;                  // the material's, m: where its surface touches another
  EnergyParts elastic;                   // at the current positions, J
  // sum over the pinned nodes of dU/dx_i . v_i at the current positions and time, W: the
  // rate at which the pins feed the elastic (and contact) energy
  double pinPower = 0;
  std::vector<LoadGroup> loads;
  std::optional<PressureLoad> pressure;
  std::vector<double> externalForces;  // (nNodes, 3), N, at the current positions and time;
                                       // empty when the body has no loads
  // The high-resolution surface the nodes move (wicke2005 section 6), written as the
  // body's frames instead of Model::surface; null when the nodes are the surface.
  std::unique_ptr<SurfaceBinding> embedded;
  std::shared_ptr<const Geometry> embeddedRest;  // its rest geometry, to rebind from scratch
  std::vector<double> embeddedFirstNodes;  // the rest nodes it was first bound to, (nNodes0, 3)
  int32_t embeddedPieces = 1;              // pieces the binding was last separated into
  // What changed the binding since it was made, in order (SurfaceBinding::rebind,
  // separatePieces, and a binding made anew when the model changed its nodes): a restored
  // state rebinds a fresh binding by replaying them, so that its surface is the one the run
  // had (binding from scratch with all cracks gives another).
  struct BindingEvent {
    int32_t crackCount = 0;         // rebind: the cracks then, the last newCracks of them new;
                                    // a new binding: the cracks it was made with
    int32_t newCracks = 0;          // 0: separatePieces, or a new binding
    std::vector<int32_t> pieces;    // the node pieces passed to separatePieces, (nNodes);
                                    // empty for a new binding of one piece
    std::vector<double> restNodes;  // a new binding: its rest nodes, (nNodes, 3); else empty
    [[nodiscard]] bool rebinds() const { return newCracks > 0; }
    [[nodiscard]] bool bindsAnew() const { return !restNodes.empty(); }
    bool operator==(const BindingEvent&) const = default;
  };
  std::vector<BindingEvent> bindingEvents;
  // Inelastic events so far (Model::updateInelastic).
  int64_t brokenElements = 0;
  std::vector<CrackDisc> cuts;  // every cut of a topology edit, in order (rest space)
  int64_t nodeEdits = 0;        // topology edits that changed the nodes
  // Rigid fragments (steinemann section 4.3, dynamics/rigid_fragments.hpp): the scene's
  // settings (none: the body keeps its pieces deformable); for each node the fragment of
  // World::rigid it moves with, -1 while deformable, (nNodes), empty until the first one; and
  // its place in that fragment's principal frame, (nNodes, 3), m. A rigid node counts as pinned.
  std::optional<RigidFragmentsDef> rigidFragments;
  std::vector<int32_t> rigidFragment;
  std::vector<double> rigidLocal;

  [[nodiscard]] bool hasLoads() const { return !loads.empty() || pressure.has_value(); }
  // A pin on a path: static pins hold their nodes at rest and do no work.
  [[nodiscard]] bool hasMovingPins() const {
    return std::any_of(pins.begin(), pins.end(),
                       [](const PinGroup& pin) { return !pin.path.isStatic(); });
  }
  [[nodiscard]] int32_t crackCount() const { return static_cast<int32_t>(cuts.size()); }

  [[nodiscard]] int32_t nodeCount() const { return model->nodeCount(); }
  [[nodiscard]] bool isRigid(size_t node) const {
    return !rigidFragment.empty() && rigidFragment[node] >= 0;
  }
};

// Body::pinned anew: the nodes of the pins that hold, and the rigid fragments' nodes.
void refreshPinned(Body& body);
// The nodes the world moves itself, (nNodes) flags: pinned ones and those riding a rigid
// fragment (Model::setWorldMovedNodes; a topology edit's displacements leave them alone).
std::vector<uint8_t> worldMovedNodes(const Body& body);

// A thrown obstacle's motion (ObstacleDef::mass > 0), integrated by velocity Verlet with
// the bodies' steps under gravity and the reactions of the penalty springs (contact.hpp).
struct FreeMotion {
  Vec3 offset = Vec3::Zero();        // m, from the definition's position
  Vec3 velocity = Vec3::Zero();      // m/s
  Vec3 acceleration = Vec3::Zero();  // m/s^2, at the last force evaluation
  bool operator==(const FreeMotion&) const = default;
};

struct Obstacle {
  ObstacleDef def;
  KinematicPath path;
  FreeMotion free;  // used when isFree()

  explicit Obstacle(const ObstacleDef& definition);
  [[nodiscard]] bool isFree() const { return def.mass > 0; }
  [[nodiscard]] bool isPenalty() const { return def.response == ObstacleResponse::kPenalty; }
  [[nodiscard]] bool moves() const { return isFree() || !path.isStatic(); }
  // Moved by its script, doing work on what it touches (a thrown one exchanges energy).
  [[nodiscard]] bool isDriven() const { return !isFree() && !path.isStatic(); }
  [[nodiscard]] Vec3 offset(double time) const {
    return isFree() ? free.offset : path.offset(time);
  }
  [[nodiscard]] Vec3 velocity(double time) const {
    return isFree() ? free.velocity : path.velocity(time);
  }
};

struct World {
  Vec3 gravity{0, 0, -9.81};  // m/s^2
  std::vector<Body> bodies;
  std::vector<Obstacle> obstacles;
  double time = 0;                        // s
  std::vector<std::string> warnings;      // collected while building, reported in the summary
  MeshContact contact;                    // between and within the bodies' meshes
  std::vector<ContactPair> contactPairs;  // found at the last force evaluation
  double contactEnergy = 0;               // J, of those pairs at the current positions
  // Work done on the bodies since the start by what a script drives (loads, pressure,
  // moving pins; stepWork in stepper.hpp), J, and the sum of its steps' magnitudes, J: the
  // energy guard allows the total energy to rise by the one, with a tolerance growing with
  // the other.
  double externalWork = 0;
  double externalWorkMagnitude = 0;
  // The scripted obstacles' share of it: the power of the penalty ones, -sum_o reaction_o .
  // velocity_o, W, at the current positions and time; and the work of the projection ones
  // in the step under way, sum m dv . velocity_o over the velocity changes of their
  // contacts (applyContactVelocities), J.
  double obstaclePower = 0;
  double projectionWork = 0;
  // The pieces that became rigid bodies, and the Bullet world that moves them.
  RigidFragments rigid;
};

// What a step changes of a body before it is accepted, its kinematic state: saved at the
// start of each step (to undo a rejected one, step_pipeline.hpp) and in every
// SimulationState. The accelerations are part of it, not recomputed on restore: after
// plastic flow they are those of the rest state before it (updateInelastic recomputes them
// only when the topology changes), and a restored body must continue exactly as it would
// have.
struct BodyKinematics {
  // (nNodes, 3) each; externalForces empty for a body without loads
  std::vector<double> positions, velocities, accelerations, externalForces;
  EnergyParts elastic;  // J
  double pinPower = 0;  // W
};
// Copies the body's kinematic state into `out`, reusing its buffers.
void saveKinematics(const Body& body, BodyKinematics& out);
// Puts it back (same node count), then lets state held fixed while differentiating
// (Model::prepare) follow the positions.
void restoreKinematics(Body& body, const BodyKinematics& saved);

// What a body holds per node besides its kinematics, for a body whose model changes its
// nodes (Model::changesNodeCount): a saved state holds it, since the pins, loads and
// contact then follow the nodes through topology edits. The pins' paths and the loads'
// forces and ramps come from the definitions and do not change.
struct BodyNodeSets {
  std::vector<uint8_t> pinned;                        // (nNodes)
  std::vector<std::vector<int32_t>> pinNodes;         // per pin group, (nPinned)
  std::vector<std::vector<double>> pinRestPositions;  // per pin group, (nPinned, 3), m
  std::vector<std::vector<int32_t>> loadNodes;        // per load group, (nLoaded)
  std::vector<std::vector<double>> loadShares;        // per load group, (nLoaded)
  std::vector<int32_t> nodeOfInputVertex;             // (nInputVertices)
  std::vector<int32_t> pressureTriangles;             // (nTriangles, 3), or empty
  std::vector<int32_t> contactObstacle;               // (nNodes)
  std::vector<double> contactNormal;                  // (nNodes, 3)
  bool operator==(const BodyNodeSets&) const = default;
};
[[nodiscard]] BodyNodeSets saveNodeSets(const Body& body);
// Puts them back (the pin and load group counts must match the body's; the node count is
// the model's, restored before).
void restoreNodeSets(Body& body, const BodyNodeSets& sets);

// Applies an inelastic update's topology edit (models/model.hpp) to the body, after the
// model changed itself: remaps positions and velocities by the edit's weights and every
// per-node array the body owns: pinned (a node whose sources are all pinned is pinned, its
// pin rest position their weighted one; a node made between a pinned and a free node is
// free), pin groups, loads (the same rule; their shares recomputed from the new masses), the
// input-vertex map and pressure triangles (an old node maps to the first new node made from it;
// triangles of removed nodes are dropped), contact (from the first source); records the cuts and
// rebinds the embedded surface across them. When the nodes changed, the embedded surface is
// bound anew to them (rest nodes: the edit's weights of the old rest nodes; all cracks so far),
// separated into the model's pieces; otherwise rebound across the new cuts only. Accelerations
// and external forces are resized only: the caller recomputes them (computeAccelerations). Throws
// NumericalError naming the model when the edit is malformed (a model error): sources out
// of range, weights not positive or not summing to 1, a node count other than the model's.
void applyTopologyEdit(Body& body, const TopologyEdit& edit);

// After elements broke or a topology edit: separates the embedded surface into the model's
// node pieces when their count changed (SurfaceBinding::separatePieces), recording it in
// Body::bindingEvents; no-op without an embedded surface.
void separateEmbeddedPieces(Body& body);

// The body's model workspace (Body::workspace), made for its current model at first use.
[[nodiscard]] ModelWorkspace* workspaceOf(Body& body);

// "bodies[i] 'name'", the prefix of a body's messages.
[[nodiscard]] std::string bodyLabel(size_t index, const BodyDef& def);

// A body's geometry from def.file or def.primitive. Throws InputError naming the body.
[[nodiscard]] Geometry loadBodyGeometry(const BodyDef& def, const std::string& label);

// Adds a body made from `geometry` (def.file and def.primitive are not read) with its
// transform, model, pins, loads, pressure and initial velocity; returns its index. Messages
// start with `label`. Throws InputError; the world is unchanged then.
size_t addBody(World& world, const BodyDef& def, Geometry geometry, const std::string& label);

// Pins (or loads) the nodes `pin` selects on an existing body; throws InputError naming
// `label` when it selects no node or a vertex index is out of range.
void addPin(World& world, size_t body, const PinDef& pin, const std::string& label);
void addLoad(World& world, size_t body, const LoadDef& load, const std::string& label);

// Loads or generates each body's geometry, applies its transform, builds its model,
// selects pinned nodes and sets initial velocities. Throws InputError naming the body
// (e.g. "bodies[1] 'cloth': pins[0] selects no node") or the geometry file.
[[nodiscard]] World buildWorld(const SceneDef& scene);

// Makes the body's embedded surface binding anew from its first rest nodes and replays
// `events` (Body::bindingEvents) with the model's current cracks; no-op without an embedded
// surface. Throws InputError naming the body when an event does not fit (a crack it names
// that the body lacks, pieces or rest nodes of another node count).
void replayBinding(Body& body, const std::vector<Body::BindingEvent>& events);

// Connected pieces of a body's nodes (Model::nodePieces): 1 for a model without pieces.
[[nodiscard]] int32_t pieceCount(const Body& body);
// The same from node piece labels (Model::nodePieces; empty: one piece).
[[nodiscard]] int32_t pieceCount(std::span<const int32_t> pieces);

// The surface a frame shows of body `bodyIndex` at its current positions: the embedded
// high-resolution surface moved by the nodes, or the model's surface; a torn point cloud's
// points carry their piece's colour (core/palette.hpp, entry bodyIndex + piece), as the
// renderer colours the pieces of a mesh. Where the model tracks pieces, every vertex
// carries its piece (Geometry::pieces): its node's, or for an embedded surface its nearest
// bound node's. A point cloud carries each point's disc radius (vertex scalar `radius`,
// core/surfel_radii.hpp).
// An embedded surface is kept out of the world's obstacles: its vertices are interpolated
// from the nodes, which the obstacles hold out, and would otherwise dip into them between
// nodes (a clustered body resting on the floor); each vertex inside an obstacle is moved
// onto its surface. The state is not changed: this is the surface drawn.
// `pieces`: the body's Model::nodePieces, which the caller has at hand.
[[nodiscard]] Geometry bodySurface(const World& world, size_t bodyIndex,
                                   std::span<const int32_t> pieces);

// The largest stable explicit step over all bodies, s.
[[nodiscard]] double stableTimeStep(const World& world);

}  // namespace shellsim
