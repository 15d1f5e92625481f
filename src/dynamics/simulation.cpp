#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/byte_stream.hpp"
#include "dynamics/implicit.hpp"
#include "dynamics/simulation_impl.hpp"
#include "dynamics/stepper.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/world.hpp"

namespace shellsim {

namespace {

// An advance that still fails after its steps were split is recomputed from its start
// with half the planned step, at most this many times (down to 1/16 of the step).
constexpr int kMaxStepHalvings = 4;

std::atomic<uint64_t> nextIdentity{1};

Vec3 toVec3(const Vec3d& v) {
  return {v[0], v[1], v[2]};
}

// Mixes `bytes`, preceded by their count, into a fingerprint (Impl::fingerprint).
void mixFingerprint(uint64_t& hash, std::span<const uint8_t> bytes) {
  const uint64_t size = bytes.size();
  hash = fnv1a(std::span(reinterpret_cast<const uint8_t*>(&size), sizeof size), hash);
  hash = fnv1a(bytes, hash);
}

void mixFingerprint(uint64_t& hash, const std::string& text) {
  mixFingerprint(hash, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

template <class T>
void mixFingerprint(uint64_t& hash, const std::vector<T>& values) {
  mixFingerprint(
      hash, std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)));
}

// A body definition as scene text, for the fingerprint.
std::string sceneTextOf(const BodyDef& body) {
  SceneDef scene;
  scene.bodies.push_back(body);
  return sceneToJson(scene);
}

}  // namespace

struct SimulationStateAccess {
  static std::shared_ptr<const SimulationState::Data>& data(SimulationState& state) {
    return state.data_;
  }
  static const std::shared_ptr<const SimulationState::Data>& data(const SimulationState& state) {
    return state.data_;
  }
};

// What SimulationState holds: the evolving state of every body at one time.
struct SimulationState::Data {
  uint64_t simulation = 0;  // Impl::identity of the simulation it was saved from
  double time = 0;          // s
  double timeStep = 0;      // s, the planned step then (0: not yet planned)
  struct BodyState {
    BodyKinematics kinematics;
    ModelState model;  // Model::state: empty for a model without evolving state
    int64_t brokenElements = 0;
    std::vector<CrackDisc> cuts;                    // Body::cuts
    int64_t nodeEdits = 0;                          // Body::nodeEdits
    std::vector<Body::BindingEvent> bindingEvents;  // of the embedded surface
    // Pins, loads and contact per node, for a model that changes its nodes; null otherwise.
    std::shared_ptr<const BodyNodeSets> nodeSets;
    std::vector<int32_t> rigidFragment;           // Body::rigidFragment, (nNodes) or empty
    std::vector<double> rigidLocal;               // Body::rigidLocal, (nNodes, 3) or empty
    double ventStart = PressureLoad::kNotVented;  // PressureLoad::ventStart, s
    double gas = PressureLoad::kNotSealed;        // PressureLoad::gas, Pa m^3
    double ventedFloor = std::numeric_limits<double>::infinity();  // PressureLoad's, Pa
  };
  std::vector<RigidFragment> rigidFragments;  // World::rigid
  std::vector<BodyState> bodies;
  std::vector<FreeMotion> obstacles;  // per obstacle (thrown ones move)
  StepCounts counts;                  // the integrator's, over the whole run
  int64_t recomputations = 0;         // StepStatistics::recomputations
  bool hasGuard = false;              // the energy guard existed (its values below)
  EnergyGuard::Values guard;
  double externalWork = 0;           // World::externalWork, J
  double externalWorkMagnitude = 0;  // World::externalWorkMagnitude, J
  double obstaclePower = 0;          // World::obstaclePower, W
};

SimulationState::SimulationState() = default;

double SimulationState::time() const {
  return data_ ? data_->time : 0.0;
}

Simulation::Impl& implOf(Simulation& simulation) {
  return *simulation.impl_;
}
const Simulation::Impl& implOf(const Simulation& simulation) {
  return *simulation.impl_;
}

void Simulation::Impl::warn(const std::string& message) {
  warnings.push_back(message);
  if (onWarning) onWarning(message);
}

void Simulation::Impl::refresh() {
  applyScriptedMotion(world);
  computeAccelerations(world);
  checkState(world);
  energyGuard.reset();
}

void Simulation::Impl::warnIfLong(double step, double stepsPerFrame) {
  const double total = std::ceil(settings.time.duration / step - 1e-9);
  if (total <= kLongRunSteps || longRunWarned) return;
  longRunWarned = true;
  // The body whose stable step is the smallest sets the step of an explicit run.
  size_t limiting = 0;
  for (size_t b = 1; b < world.bodies.size(); ++b) {
    if (world.bodies[b].model->stableTimeStep() < world.bodies[limiting].model->stableTimeStep()) {
      limiting = b;
    }
  }
  const Body& body = world.bodies[limiting];
  std::ostringstream msg;
  msg.precision(3);
  msg << "the run takes about " << total << " steps (" << stepsPerFrame << " per frame) of " << step
      << " s: body '" << body.name << "' (" << body.model->name()
      << ") has a stable explicit step of " << body.model->stableTimeStep() << " s";
  if (isImplicit(settings.time)) {
    msg << "; give time.time_step a larger value";
  } else {
    msg << "; its smallest or stiffest elements set it (`shellsim info` lists degenerate "
           "triangles): a coarser or cleaner mesh, a softer material or "
           "time.integrator \"backward_euler\" shortens the run";
  }
  warn(msg.str());
}

StepCounts Simulation::Impl::counts() const {
  if (isStatic()) return staticCounts;
  return integrator ? integrator->counts() : StepCounts{};
}

void Simulation::Impl::setCounts(const StepCounts& counts) {
  if (isStatic()) {
    staticCounts = counts;
  } else {
    integratorForRun().setCounts(counts);
  }
}

void Simulation::Impl::updateStatistics() {
  const StepCounts counts = this->counts();
  statistics.steps = counts.accepted;
  statistics.rejectedSteps = counts.rejected;
  statistics.newtonIterations = counts.newton.iterations;
  statistics.factorizations = counts.newton.factorizations;
}

TimeIntegrator& Simulation::Impl::integratorForRun() {
  if (world.bodies.empty()) throw InputError("the simulation has no body to advance");
  if (isStatic()) {
    throw InputError(
        "a static simulation (time.integrator \"static\") has no time steps: "
        "advanceFrames solves its load increments");
  }
  if (!stableStep) stableStep = shellsim::stableTimeStep(world);
  if (!integrator || replan) {
    // The planned step divides the frame interval: a frame is a whole number of steps.
    const double frameInterval = 1.0 / settings.time.frameRate;
    std::vector<std::string> planWarnings;
    const double target = plannedTimeStep(settings.time, *stableStep, frameInterval, planWarnings);
    const double stepsPerFrame = stepCount(frameInterval, target);
    if (stepsPerFrame > 1e7) {
      std::ostringstream msg;
      msg << "the stable time step " << *stableStep
          << " s needs more than 10^7 steps per frame; the material is too stiff for explicit "
             "integration at this resolution";
      throw InputError(msg.str());
    }
    for (const std::string& w : planWarnings) warn(w);
    warnIfLong(frameInterval / stepsPerFrame, stepsPerFrame);
    if (integrator) {
      integrator->setTimeStep(frameInterval / stepsPerFrame);
    } else {
      integrator.emplace(settings.time, frameInterval / stepsPerFrame,
                         [this](const std::string& w) { warn(w); });
    }
    integrator->followStableStep(*stableStep);
    replan = false;
  }
  return *integrator;
}

const Body& Simulation::Impl::body(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= world.bodies.size()) {
    std::ostringstream msg;
    msg << "body index " << index << " out of range [0, " << world.bodies.size() << ")";
    throw InputError(msg.str());
  }
  return world.bodies[static_cast<size_t>(index)];
}

Body& Simulation::Impl::body(int32_t index) {
  return const_cast<Body&>(std::as_const(*this).body(index));
}

Simulation::Simulation(const SimulationSettings& settings) : impl_(std::make_unique<Impl>()) {
  validateTime(settings.time, "time");
  validateContact(settings.contact, "contact", settings.time);
  for (const double g : settings.gravity) {
    if (!std::isfinite(g)) throw InputError("shellsim: gravity must be finite");
  }
  impl_->settings = settings;
  impl_->world.gravity = toVec3(settings.gravity);
  impl_->identity = nextIdentity.fetch_add(1);
  SceneDef probe;  // the settings as scene text; a longer run may resume a shorter one
  probe.gravity = settings.gravity;
  probe.time = settings.time;
  probe.time.duration = 0;
  probe.contact = settings.contact;
  mixFingerprint(impl_->fingerprint, "settings " + sceneToJson(probe));
}

Simulation::Simulation(const SceneDef& scene)
    : Simulation(SimulationSettings{scene.gravity, scene.time, scene.contact}) {
  for (const ObstacleDef& obstacle : scene.obstacles) addObstacle(obstacle);
  for (const BodyDef& body : scene.bodies) addBody(body);
}

Simulation::Simulation(Simulation&&) noexcept = default;
Simulation& Simulation::operator=(Simulation&&) noexcept = default;
Simulation::~Simulation() = default;

namespace {

// An empty name becomes "body<i>"; a name another body has is an InputError.
void nameBody(const Simulation::Impl& impl, BodyDef& def) {
  const size_t index = impl.world.bodies.size();
  if (def.name.empty()) def.name = "body" + std::to_string(index);
  for (size_t b = 0; b < index; ++b) {
    if (impl.world.bodies[b].name == def.name) {
      throw InputError("shellsim: bodies[" + std::to_string(index) + "].name = \"" + def.name +
                       "\": already names bodies[" + std::to_string(b) +
                       "]; names must be distinct");
    }
  }
}

// Adds a body whose definition has been checked (validateBody) and named (nameBody).
int32_t addCheckedBody(Simulation::Impl& impl, Geometry geometry, const BodyDef& def) {
  const size_t index = impl.world.bodies.size();
  // The definition as scene text and the geometry by its bytes, not its file; taken into
  // the simulation's fingerprint only once the body is in.
  uint64_t fingerprint = impl.fingerprint;
  SceneDef probe;
  probe.bodies.push_back(def);
  probe.bodies[0].file.reset();
  probe.bodies[0].primitive.reset();
  mixFingerprint(fingerprint, "body " + sceneToJson(probe));
  mixFingerprint(fingerprint, geometry.positions);
  mixFingerprint(fingerprint, geometry.normals);
  mixFingerprint(fingerprint, geometry.triangles);
  const size_t warningsBefore = impl.world.warnings.size();
  (void)shellsim::addBody(impl.world, def, std::move(geometry), bodyLabel(index, def));
  for (size_t w = warningsBefore; w < impl.world.warnings.size(); ++w) {
    impl.warn(impl.world.warnings[w]);
  }
  impl.stableStep.reset();
  impl.replan = true;  // the new body's stable step may be smaller
  impl.world.contact =
      MeshContact(impl.settings.contact,
                  contactReferenceStep(impl.settings.time, shellsim::stableTimeStep(impl.world)));
  try {
    impl.refresh();
  } catch (...) {
    impl.world.bodies.pop_back();
    throw;
  }
  impl.fingerprint = fingerprint;
  return static_cast<int32_t>(index);
}

}  // namespace

int32_t Simulation::addBody(Geometry geometry, BodyDef def) {
  nameBody(*impl_, def);
  validateBody(def, "bodies[" + std::to_string(impl_->world.bodies.size()) + "]", true);
  return addCheckedBody(*impl_, std::move(geometry), def);
}

int32_t Simulation::addBody(BodyDef def) {
  const size_t index = impl_->world.bodies.size();
  nameBody(*impl_, def);
  validateBody(def, "bodies[" + std::to_string(index) + "]", false);
  Geometry geometry = loadBodyGeometry(def, bodyLabel(index, def));
  return addCheckedBody(*impl_, std::move(geometry), def);
}

int32_t Simulation::addObstacle(const ObstacleDef& obstacle) {
  Impl& impl = *impl_;
  const size_t index = impl.world.obstacles.size();
  validateObstacle(obstacle, "obstacles[" + std::to_string(index) + "]", impl.settings.time);
  impl.world.obstacles.emplace_back(obstacle);
  SceneDef probe;
  probe.obstacles.push_back(obstacle);
  mixFingerprint(impl.fingerprint, "obstacle " + sceneToJson(probe));
  impl.energyGuard.reset();
  return static_cast<int32_t>(index);
}

namespace {

// Adds a pin or load (`kind`, the scene key) to a body: checked as the scene reader checks
// one (as the only entry of `probe`), added by `add(label)`, then the forces recomputed
// and the definition taken into the fingerprint.
template <class Add>
void addSelection(Simulation::Impl& impl, int32_t body, const char* kind, size_t existing,
                  BodyDef probe, const Add& add) {
  const Body& b = impl.body(body);
  const std::string path = "bodies[" + std::to_string(body) + "]";
  probe.name = b.name;
  validateBody(probe, path, true);
  add(path + " '" + b.name + "'." + kind + "[" + std::to_string(existing) + "]");
  impl.refresh();
  mixFingerprint(impl.fingerprint,
                 std::string(kind) + " " + std::to_string(body) + " " + sceneTextOf(probe));
}

}  // namespace

void Simulation::addPin(int32_t body, const PinDef& pin) {
  BodyDef probe;
  probe.pins.push_back(pin);
  addSelection(*impl_, body, "pins", impl_->body(body).pins.size(), probe,
               [&](const std::string& label) {
                 shellsim::addPin(impl_->world, static_cast<size_t>(body), pin, label);
               });
}

void Simulation::addLoad(int32_t body, const LoadDef& load) {
  BodyDef probe;
  probe.loads.push_back(load);
  addSelection(*impl_, body, "loads", impl_->body(body).loads.size(), probe,
               [&](const std::string& label) {
                 shellsim::addLoad(impl_->world, static_cast<size_t>(body), load, label);
               });
}

namespace {

std::shared_ptr<const SimulationState::Data> saveData(const Simulation::Impl& impl) {
  auto data = std::make_shared<SimulationState::Data>();
  data->simulation = impl.identity;
  data->time = impl.world.time;
  data->timeStep = impl.integrator ? impl.integrator->timeStep() : 0.0;
  data->counts = impl.counts();
  data->recomputations = impl.statistics.recomputations;
  data->hasGuard = impl.energyGuard.has_value();
  if (impl.energyGuard) data->guard = impl.energyGuard->values();
  data->externalWork = impl.world.externalWork;
  data->externalWorkMagnitude = impl.world.externalWorkMagnitude;
  data->obstaclePower = impl.world.obstaclePower;
  for (const Obstacle& obstacle : impl.world.obstacles) data->obstacles.push_back(obstacle.free);
  for (const Body& body : impl.world.bodies) {
    SimulationState::Data::BodyState& state = data->bodies.emplace_back();
    saveKinematics(body, state.kinematics);
    state.model = body.model->state();
    state.brokenElements = body.brokenElements;
    state.cuts = body.cuts;
    state.nodeEdits = body.nodeEdits;
    state.bindingEvents = body.bindingEvents;
    if (body.model->changesNodeCount()) {
      state.nodeSets = std::make_shared<const BodyNodeSets>(saveNodeSets(body));
    }
    state.rigidFragment = body.rigidFragment;
    state.rigidLocal = body.rigidLocal;
    if (body.pressure) {
      state.ventStart = body.pressure->ventStart;
      state.gas = body.pressure->gas;
      state.ventedFloor = body.pressure->ventedFloor;
    }
  }
  data->rigidFragments = impl.world.rigid.fragments();
  return data;
}

void restoreData(Simulation::Impl& impl, const SimulationState::Data& data) {
  World& world = impl.world;
  world.time = data.time;
  world.externalWork = data.externalWork;
  world.externalWorkMagnitude = data.externalWorkMagnitude;
  world.obstaclePower = data.obstaclePower;
  for (size_t o = 0; o < world.obstacles.size(); ++o) world.obstacles[o].free = data.obstacles[o];
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    Body& body = world.bodies[b];
    const SimulationState::Data::BodyState& state = data.bodies[b];
    body.model->setState(state.model);
    if (state.nodeSets) restoreNodeSets(body, *state.nodeSets);
    holdPinsAt(body, data.time);  // a pin released before the saved time has let go
    body.rigidFragment = state.rigidFragment;
    body.rigidLocal = state.rigidLocal;
    refreshPinned(body);
    body.brokenElements = state.brokenElements;
    body.cuts = state.cuts;
    body.nodeEdits = state.nodeEdits;
    if (body.pressure) {
      body.pressure->ventStart = state.ventStart;
      body.pressure->gas = state.gas;
      body.pressure->ventedFloor = state.ventedFloor;
    }
    if (body.embedded && body.bindingEvents != state.bindingEvents) {
      replayBinding(body, state.bindingEvents);
    }
    restoreKinematics(body, state.kinematics);  // last: Model::prepare sees the restored model
  }
  world.rigid.setFragments(data.rigidFragments);
  world.rigid.markChecked(world);
}

// restoreData, and what a saved state has besides the bodies: the planned step, the step
// counts and the energy guard (a state restored continues as the saved one did).
void restoreEverything(Simulation::Impl& impl, const SimulationState::Data& data) {
  restoreData(impl, data);
  if (data.timeStep > 0) impl.integratorForRun().setTimeStep(data.timeStep);
  if (data.timeStep > 0 || impl.isStatic()) impl.setCounts(data.counts);
  impl.statistics.recomputations = data.recomputations;
  impl.updateStatistics();
  impl.energyGuard.reset();
  if (data.hasGuard) impl.energyGuard.emplace(data.guard);
}

// The first bytes of every state file, and its format version (bumped whenever the layout
// below changes: a file of another version is refused, never misread).
constexpr char kStateMagic[8] = {'S', 'H', 'S', 'T', 'A', 'T', 'E', '\n'};
constexpr uint32_t kStateFormatVersion = 15;
constexpr const char* kLibraryVersion = "0.1.0";

void writeNodeSets(const BodyNodeSets& sets, ByteWriter& out) {
  out.array(sets.pinned);
  out.value<uint64_t>(sets.pinNodes.size());
  for (size_t p = 0; p < sets.pinNodes.size(); ++p) {
    out.array(sets.pinNodes[p]);
    out.array(sets.pinRestPositions[p]);
  }
  out.value<uint64_t>(sets.loadNodes.size());
  for (size_t l = 0; l < sets.loadNodes.size(); ++l) {
    out.array(sets.loadNodes[l]);
    out.array(sets.loadShares[l]);
  }
  out.array(sets.nodeOfInputVertex);
  out.array(sets.pressureTriangles);
  out.array(sets.contactObstacle);
  out.array(sets.contactNormal);
}

// Reads what writeNodeSets wrote for `body` (its pin and load group counts) and checks that
// every index is in range for `nodes` nodes.
BodyNodeSets readNodeSets(const Body& body, ByteReader& in) {
  BodyNodeSets sets;
  const auto fail = [&](const std::string& what) { in.fail("body '" + body.name + "': " + what); };
  sets.pinned = in.array<uint8_t>("pinned nodes");
  const size_t nodes = sets.pinned.size();
  const auto inRange = [&](const std::vector<int32_t>& indices, bool allowNone) {
    return std::all_of(indices.begin(), indices.end(), [&](int32_t i) {
      return (allowNone && i == -1) || (i >= 0 && static_cast<size_t>(i) < nodes);
    });
  };
  if (in.value<uint64_t>("pin count") != body.pins.size()) fail("another number of pins");
  for (size_t p = 0; p < body.pins.size(); ++p) {
    sets.pinNodes.push_back(in.array<int32_t>("pinned nodes"));
    sets.pinRestPositions.push_back(in.array<double>("pin rest positions"));
    if (!inRange(sets.pinNodes.back(), false) ||
        sets.pinRestPositions.back().size() != 3 * sets.pinNodes.back().size()) {
      fail("pins[" + std::to_string(p) + "] names nodes out of range");
    }
  }
  if (in.value<uint64_t>("load count") != body.loads.size()) fail("another number of loads");
  for (size_t l = 0; l < body.loads.size(); ++l) {
    sets.loadNodes.push_back(in.array<int32_t>("loaded nodes"));
    sets.loadShares.push_back(in.array<double>("load shares"));
    if (!inRange(sets.loadNodes.back(), false) ||
        sets.loadShares.back().size() != sets.loadNodes.back().size()) {
      fail("loads[" + std::to_string(l) + "] names nodes out of range");
    }
  }
  sets.nodeOfInputVertex = in.array<int32_t>("input vertex map");
  sets.pressureTriangles = in.array<int32_t>("pressure triangles");
  sets.contactObstacle = in.array<int32_t>("contact obstacles");
  sets.contactNormal = in.array<double>("contact normals");
  if (!inRange(sets.nodeOfInputVertex, true) || !inRange(sets.pressureTriangles, false) ||
      sets.pressureTriangles.size() % 3 != 0 ||
      (!sets.contactObstacle.empty() && sets.contactObstacle.size() != nodes) ||
      sets.contactNormal.size() != 3 * sets.contactObstacle.size()) {
    fail("its per-node sets do not fit its node count");
  }
  return sets;
}

void writeData(const SimulationState::Data& data, ByteWriter& out) {
  out.value(data.time);
  out.value(data.timeStep);
  out.value(data.counts.accepted);
  out.value(data.counts.rejected);
  out.value(data.counts.newton.iterations);
  out.value(data.counts.newton.factorizations);
  out.value(data.recomputations);
  out.value<uint8_t>(data.hasGuard ? 1 : 0);
  out.value<uint8_t>(data.guard.enabled ? 1 : 0);
  out.value(data.guard.initialEnergy);
  out.value(data.guard.scale);
  out.value(data.guard.initialWork);
  out.value(data.guard.initialWorkMagnitude);
  out.value(data.externalWork);
  out.value(data.externalWorkMagnitude);
  out.value(data.obstaclePower);
  out.value<uint64_t>(data.obstacles.size());
  for (const FreeMotion& motion : data.obstacles) {
    for (const Vec3* v : {&motion.offset, &motion.velocity, &motion.acceleration}) {
      for (int c = 0; c < 3; ++c) out.value((*v)[c]);
    }
  }
  out.value<uint64_t>(data.bodies.size());
  for (const SimulationState::Data::BodyState& body : data.bodies) {
    const BodyKinematics& k = body.kinematics;
    out.array(k.positions);
    out.array(k.velocities);
    out.array(k.accelerations);
    out.array(k.externalForces);
    out.value(k.elastic.stretching);
    out.value(k.elastic.bending);
    out.value(k.pinPower);
    out.value(body.brokenElements);
    writeCrackDiscs(out, body.cuts);
    out.value(body.nodeEdits);
    out.value<uint8_t>(body.nodeSets ? 1 : 0);
    if (body.nodeSets) writeNodeSets(*body.nodeSets, out);
    out.value<uint64_t>(body.bindingEvents.size());
    for (const Body::BindingEvent& event : body.bindingEvents) {
      out.value(event.crackCount);
      out.value(event.newCracks);
      out.array(event.pieces);
      out.array(event.restNodes);
    }
    out.value<uint8_t>(body.model.empty() ? 0 : 1);
    if (!body.model.empty()) body.model.write(out);
    out.array(body.rigidFragment);
    out.array(body.rigidLocal);
    out.value(body.ventStart);
    out.value(body.gas);
    out.value(body.ventedFloor);
  }
  out.value<uint64_t>(data.rigidFragments.size());
  for (const RigidFragment& f : data.rigidFragments) {
    out.value(f.body);
    out.value(f.mass);
    for (const Vec3* v : {&f.principalInertia, &f.centre, &f.velocity, &f.spin}) {
      for (int c = 0; c < 3; ++c) out.value((*v)[c]);
    }
    for (int k = 0; k < 9; ++k) out.value(f.rotation(k / 3, k % 3));
    out.array(f.cellOffsets);
    out.array(f.cellPoints);
    out.array(f.cellMargins);
  }
}

std::shared_ptr<const SimulationState::Data> readData(const Simulation::Impl& impl,
                                                      ByteReader& in) {
  auto data = std::make_shared<SimulationState::Data>();
  data->simulation = impl.identity;
  data->time = in.value<double>("time");
  data->timeStep = in.value<double>("time step");
  data->counts.accepted = in.value<int64_t>("step counts");
  data->counts.rejected = in.value<int64_t>("step counts");
  data->counts.newton.iterations = in.value<int64_t>("Newton counts");
  data->counts.newton.factorizations = in.value<int64_t>("Newton counts");
  data->recomputations = in.value<int64_t>("recomputations");
  data->hasGuard = in.value<uint8_t>("energy guard") != 0;
  data->guard.enabled = in.value<uint8_t>("energy guard") != 0;
  data->guard.initialEnergy = in.value<double>("energy guard");
  data->guard.scale = in.value<double>("energy guard");
  data->guard.initialWork = in.value<double>("energy guard");
  data->guard.initialWorkMagnitude = in.value<double>("energy guard");
  data->externalWork = in.value<double>("external work");
  data->externalWorkMagnitude = in.value<double>("external work");
  data->obstaclePower = in.value<double>("obstacle power");
  if (!std::isfinite(data->time) || !(data->timeStep >= 0) || !std::isfinite(data->timeStep)) {
    in.fail("the time or the step is not a finite number");
  }
  for (const double value : {data->guard.initialEnergy, data->guard.scale, data->guard.initialWork,
                             data->guard.initialWorkMagnitude, data->externalWork,
                             data->externalWorkMagnitude, data->obstaclePower}) {
    if (!std::isfinite(value)) in.fail("an energy or work is not a finite number");
  }
  const auto obstacles = in.value<uint64_t>("obstacle count");
  if (obstacles != impl.world.obstacles.size()) {
    in.fail("holds " + std::to_string(obstacles) + " obstacles, the simulation has " +
            std::to_string(impl.world.obstacles.size()));
  }
  for (uint64_t o = 0; o < obstacles; ++o) {
    FreeMotion& motion = data->obstacles.emplace_back();
    for (Vec3* v : {&motion.offset, &motion.velocity, &motion.acceleration}) {
      for (int c = 0; c < 3; ++c) (*v)[c] = in.value<double>("obstacle motion");
      if (!v->allFinite()) in.fail("an obstacle's motion is not finite");
    }
  }
  const auto bodies = in.value<uint64_t>("body count");
  if (bodies != impl.world.bodies.size()) {
    in.fail("holds " + std::to_string(bodies) + " bodies, the simulation has " +
            std::to_string(impl.world.bodies.size()));
  }
  for (const Body& body : impl.world.bodies) {
    SimulationState::Data::BodyState& state = data->bodies.emplace_back();
    BodyKinematics& k = state.kinematics;
    k.positions = in.array<double>("positions");
    k.velocities = in.array<double>("velocities");
    k.accelerations = in.array<double>("accelerations");
    k.externalForces = in.array<double>("external forces");
    // The node count: the body's, or for a model that changes its nodes the one of the
    // state's node sets (read below; checked there).
    const size_t size = body.model->changesNodeCount() ? k.positions.size() : body.positions.size();
    if (k.positions.size() != size || size % 3 != 0 || k.velocities.size() != size ||
        k.accelerations.size() != size ||
        k.externalForces.size() != (body.externalForces.empty() ? 0 : size)) {
      in.fail("body '" + body.name + "' has " + std::to_string(body.nodeCount()) +
              " nodes, the state another count");
    }
    for (const std::vector<double>* v : {&k.positions, &k.velocities}) {
      if (!std::all_of(v->begin(), v->end(), [](double x) { return std::isfinite(x); })) {
        in.fail("body '" + body.name + "': a position or velocity is not finite");
      }
    }
    k.elastic.stretching = in.value<double>("elastic energy");
    k.elastic.bending = in.value<double>("elastic energy");
    k.pinPower = in.value<double>("pin power");
    state.brokenElements = in.value<int64_t>("broken elements");
    state.cuts = readCrackDiscs(in, "body '" + body.name + "': cut", 10'000'000);
    state.nodeEdits = in.value<int64_t>("node edits");
    const bool hasNodeSets = in.value<uint8_t>("node sets flag") != 0;
    if (hasNodeSets != body.model->changesNodeCount()) {
      in.fail("body '" + body.name +
              "': node sets where the model keeps its nodes, or none "
              "where it changes them");
    }
    if (hasNodeSets) {
      auto sets = std::make_shared<BodyNodeSets>(readNodeSets(body, in));
      if (3 * sets->pinned.size() != size) {
        in.fail("body '" + body.name + "': its node sets and positions have other node counts");
      }
      state.nodeSets = std::move(sets);
    } else if (state.nodeEdits != 0) {
      in.fail("body '" + body.name + "': node edits on a model that keeps its nodes");
    }
    const auto events = in.value<uint64_t>("binding events");
    if (events > 10'000'000) in.fail(std::to_string(events) + " binding events");
    for (uint64_t e = 0; e < events; ++e) {
      Body::BindingEvent& event = state.bindingEvents.emplace_back();
      event.crackCount = in.value<int32_t>("binding event");
      event.newCracks = in.value<int32_t>("binding event");
      event.pieces = in.array<int32_t>("binding event pieces");
      event.restNodes = in.array<double>("binding event rest nodes");
      if (!body.embedded) in.fail("body '" + body.name + "' has no embedded surface to rebind");
    }
    if (in.value<uint8_t>("model state flag") != 0) {
      state.model = ModelState::read(in);
      if (3 * static_cast<size_t>(state.model.nodeCount()) != size) {
        in.fail("body '" + body.name + "': the model's state has " +
                std::to_string(state.model.nodeCount()) + " nodes, the positions " +
                std::to_string(size / 3));
      }
      if (!body.model->hasState()) {
        in.fail("body '" + body.name + "': a model state for a model without evolving state");
      }
    } else if (body.model->hasState()) {
      in.fail("body '" + body.name + "': the model's evolving state is missing");
    }
    state.rigidFragment = in.array<int32_t>("rigid fragment of each node");
    state.rigidLocal = in.array<double>("rigid fragment places");
    if ((!state.rigidFragment.empty() && 3 * state.rigidFragment.size() != size) ||
        state.rigidLocal.size() != 3 * state.rigidFragment.size() ||
        !std::all_of(state.rigidLocal.begin(), state.rigidLocal.end(),
                     [](double x) { return std::isfinite(x); })) {
      in.fail("body '" + body.name + "': its rigid fragment nodes do not fit its node count");
    }
    state.ventStart = in.value<double>("vent start");
    if (std::isnan(state.ventStart)) in.fail("body '" + body.name + "': vent start is NaN");
    state.gas = in.value<double>("sealed gas");
    if (!std::isfinite(state.gas))
      in.fail("body '" + body.name + "': its sealed gas is not finite");
    state.ventedFloor = in.value<double>("vented floor");
    if (std::isnan(state.ventedFloor) || state.ventedFloor < 0)
      in.fail("body '" + body.name + "': its vented gas's floor is NaN or negative");
  }
  const auto fragments = in.value<uint64_t>("rigid fragment count");
  if (fragments > 10'000'000) in.fail(std::to_string(fragments) + " rigid fragments");
  for (uint64_t k = 0; k < fragments; ++k) {
    RigidFragment& f = data->rigidFragments.emplace_back();
    f.body = in.value<int32_t>("rigid fragment body");
    f.mass = in.value<double>("rigid fragment mass");
    for (Vec3* v : {&f.principalInertia, &f.centre, &f.velocity, &f.spin}) {
      for (int c = 0; c < 3; ++c) (*v)[c] = in.value<double>("rigid fragment motion");
    }
    for (int e = 0; e < 9; ++e)
      f.rotation(e / 3, e % 3) = in.value<double>("rigid fragment motion");
    f.cellOffsets = in.array<int32_t>("rigid fragment cells");
    f.cellPoints = in.array<double>("rigid fragment cells");
    f.cellMargins = in.array<double>("rigid fragment cells");
    const auto points = static_cast<int64_t>(f.cellPoints.size() / 3);
    bool cellsFit = !f.cellOffsets.empty() && f.cellOffsets.front() == 0 &&
                    f.cellOffsets.back() == points && f.cellPoints.size() % 3 == 0 &&
                    f.cellMargins.size() + 1 == f.cellOffsets.size();
    for (size_t c = 1; c < f.cellOffsets.size() && cellsFit; ++c) {
      cellsFit = f.cellOffsets[c] >= f.cellOffsets[c - 1];
    }
    const bool finite = std::isfinite(f.mass) && f.mass > 0 && f.principalInertia.allFinite() &&
                        f.centre.allFinite() && f.velocity.allFinite() && f.spin.allFinite() &&
                        f.rotation.allFinite() &&
                        std::all_of(f.cellPoints.begin(), f.cellPoints.end(),
                                    [](double x) { return std::isfinite(x); }) &&
                        std::all_of(f.cellMargins.begin(), f.cellMargins.end(),
                                    [](double x) { return std::isfinite(x) && x >= 0; });
    if (f.body < 0 || static_cast<size_t>(f.body) >= impl.world.bodies.size() ||
        !impl.world.bodies[static_cast<size_t>(f.body)].rigidFragments || !cellsFit || !finite) {
      in.fail("rigid fragment " + std::to_string(k) + " is malformed");
    }
  }
  for (const SimulationState::Data::BodyState& state : data->bodies) {
    for (const int32_t k : state.rigidFragment) {
      if (k < -1 || k >= static_cast<int64_t>(fragments)) {
        in.fail("a node names rigid fragment " + std::to_string(k) + " of " +
                std::to_string(fragments));
      }
    }
  }
  return data;
}

}  // namespace

std::vector<uint8_t> encodeState(const Simulation::Impl& impl, const SimulationState& state,
                                 std::span<const uint8_t> extra) {
  ByteWriter payload;
  writeData(*SimulationStateAccess::data(state), payload);
  payload.array(extra);
  ByteWriter file;
  for (const char c : kStateMagic) file.value(c);
  file.value(kStateFormatVersion);
  file.string(kLibraryVersion);
  file.value(impl.fingerprint);
  file.array(payload.bytes());
  file.value(fnv1a(file.bytes()));
  return file.take();
}

void writeEncodedState(const std::filesystem::path& path, const Simulation::Impl& impl,
                       const SimulationState& state, std::span<const uint8_t> extra) {
  const std::vector<uint8_t> bytes = encodeState(impl, state, extra);
  writeFileAtomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  });
}

std::vector<uint8_t> decodeState(const Simulation::Impl& impl, std::span<const uint8_t> bytes,
                                 const std::string& source, SimulationState& state) {
  ByteReader header(bytes, source);
  if (bytes.size() < sizeof kStateMagic + sizeof(uint64_t) ||
      std::memcmp(bytes.data(), kStateMagic, sizeof kStateMagic) != 0) {
    header.fail("not a shellsim state or checkpoint file");
  }
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + body, sizeof checksum);
  if (checksum != fnv1a(bytes.first(body))) {
    header.fail("corrupt: the checksum does not match its contents (truncated or damaged)");
  }
  ByteReader in(bytes.first(body), source);
  for (size_t i = 0; i < sizeof kStateMagic; ++i) (void)in.value<char>("magic");
  const auto version = in.value<uint32_t>("format version");
  const std::string library = in.string("library version");
  if (version != kStateFormatVersion) {
    in.fail("written by shellsim " + library + " in format version " + std::to_string(version) +
            "; this shellsim " + kLibraryVersion + " reads version " +
            std::to_string(kStateFormatVersion));
  }
  if (in.value<uint64_t>("fingerprint") != impl.fingerprint) {
    in.fail(
        "saved from another scene or set-up: its bodies, geometry, obstacles or settings "
        "differ from this simulation's");
  }
  const std::vector<uint8_t> payloadBytes = in.array<uint8_t>("payload");
  if (!in.atEnd()) in.fail("bytes after the payload");
  ByteReader payload(payloadBytes, source);
  SimulationStateAccess::data(state) = readData(impl, payload);
  std::vector<uint8_t> extra = payload.array<uint8_t>("run section");
  if (!payload.atEnd()) payload.fail("bytes after the run section");
  return extra;
}

namespace {

// The body a failure is most likely in, from the failed state: the first with a position or
// velocity that is not finite, else the one with the most kinetic energy.
size_t failingBody(const World& world) {
  size_t most = 0;
  double mostKinetic = -1;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    const Body& body = world.bodies[b];
    const auto finite = [](const std::vector<double>& v) {
      return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
    };
    if (!finite(body.positions) || !finite(body.velocities)) return b;
    const double kinetic = kineticEnergy(body);
    if (kinetic > mostKinetic) {
      mostKinetic = kinetic;
      most = b;
    }
  }
  return most;
}

// Why a body blew up, as far as its set-up tells: the warnings it got when it was made
// (under-sampled fiber nodes, slivers) name the usual causes; otherwise the step against
// the body's stable explicit step.
std::string likelyCause(const Simulation::Impl& impl, size_t b, double step) {
  const Body& body = impl.world.bodies[b];
  std::ostringstream cause;
  cause.precision(3);
  cause << "body '" << body.name << "' (" << body.model->name() << ")";
  const std::string label = "'" + body.name + "'";
  std::vector<std::string> causes;
  for (const std::string& warning : impl.world.warnings) {
    if (warning.find(label) == std::string::npos) continue;
    if (warning.find("fewer than 2 fibers") != std::string::npos) {
      causes.emplace_back(
          "under-sampled nodes (the centre of fewer than 2 fibers: no stiffness in some "
          "directions; see its set-up warning)");
    } else if (warning.find("sliver triangles") != std::string::npos) {
      causes.emplace_back("sliver triangles (see its set-up warning)");
    } else if (warning.find("lie on another vertex") != std::string::npos) {
      causes.emplace_back("coincident vertices, a seam that opens");
    }
  }
  const double stable = body.model->stableTimeStep();
  if (causes.empty() || step > stable) {
    std::ostringstream stiff;
    stiff.precision(3);
    stiff << "too stiff for the step (" << step << " s against its stable explicit estimate "
          << stable << " s" << (impl.integrator && impl.integrator->implicit() ? ", implicit" : "")
          << ")";
    causes.push_back(stiff.str());
  }
  cause << "; likely cause: ";
  for (size_t c = 0; c < causes.size(); ++c) cause << (c > 0 ? ", or " : "") << causes[c];
  return cause.str();
}

// One advance of `interval` seconds ending at `endTime`, with the last-resort retry:
// recomputed from its start with half the planned step, up to kMaxStepHalvings times and
// never below minimumTimeStep(time): a run that would need more stops instead of crawling.
void advanceInterval(Simulation::Impl& impl, double interval, double endTime,
                     const std::string& during) {
  TimeIntegrator& integrator = impl.integratorForRun();
  integrator.setStopFlag(impl.stopFlag);
  if (!impl.energyGuard) impl.energyGuard.emplace(impl.world);
  const std::shared_ptr<const SimulationState::Data> checkpoint = saveData(impl);
  // Bullet's world is made anew at every advance, as a resumed run makes it (rigid_fragments.hpp).
  impl.world.rigid.invalidate();
  for (int halvings = 0;; ++halvings) {
    try {
      integrator.advance(impl.world, interval, endTime, impl.times);
      impl.energyGuard->check(impl.world);
      break;
    } catch (const Interrupted&) {
      // Back at the advance's start, as promised, with its step counts: the steps taken
      // since are undone, so a run resumed from here counts as an uninterrupted one.
      restoreData(impl, *checkpoint);
      impl.setCounts(checkpoint->counts);
      impl.updateStatistics();
      throw;
    } catch (const NumericalError& e) {
      std::ostringstream msg;
      msg << e.what() << " (" << during << " with time step " << integrator.timeStep() << " s)";
      const size_t body = failingBody(impl.world);
      restoreData(impl, *checkpoint);
      const double floor = minimumTimeStep(impl.settings.time);
      const bool belowFloor = integrator.timeStep() / 2 < floor;
      if (halvings == kMaxStepHalvings || belowFloor) {
        if (belowFloor) {
          msg << "; half the step would be below time.min_time_step = " << floor
              << " s (the run stops rather than crawl)";
        }
        msg << "; " << likelyCause(impl, body, integrator.timeStep());
        impl.updateStatistics();
        throw NumericalError(msg.str());
      }
      integrator.setTimeStep(integrator.timeStep() / 2);
      ++impl.statistics.recomputations;
      msg << "; recomputing the frame with time step " << integrator.timeStep() << " s";
      impl.warn(msg.str());
    }
  }
  impl.updateStatistics();
}

// A static increment is split into halves when its Newton solve fails, at most this many
// times (down to 1/64 of it).
constexpr int kMaxLoadSplits = 6;

// Static equilibrium at load factor `factor` (time.integrator "static"): gravity and every
// load times the factor, pins and ramps at the pseudo-time factor * duration; Newton from
// the current positions (solveStaticEquilibrium: full Newton steps, Armijo line search on
// the potential, a growing shift where the Hessian is indefinite).
void solveAtLoadFactor(Simulation::Impl& impl, double factor) {
  World& world = impl.world;
  const TimeDef& time = impl.settings.time;
  world.time = factor * time.duration;
  updateExternalForces(world);
  std::vector<std::vector<double>> forces(world.bodies.size());
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    forces[b] = world.bodies[b].externalForces;  // empty without loads
    for (double& f : forces[b]) f *= factor;
  }
  NewtonSettings newton;
  newton.tolerance = time.newtonTolerance;
  newton.maxIterations = time.newtonMaxIterations;
  const Vec3 gravity = world.gravity;
  world.gravity = factor * gravity;
  std::vector<NewtonReport> reports;
  try {
    reports = solveStaticEquilibrium(world, newton, forces);
  } catch (...) {
    world.gravity = gravity;
    throw;
  }
  world.gravity = gravity;
  computeAccelerations(world);  // the elastic energies at the solution
  ++impl.staticCounts.accepted;
  double residual = 0;
  for (const NewtonReport& r : reports) {
    impl.staticCounts.newton.iterations += r.iterations;
    impl.staticCounts.newton.factorizations += r.factorizations;
    residual = std::max(residual, r.residual);
  }
  impl.lastIncrement = Simulation::Impl::StaticIncrement{factor, residual};
}

// The load step from factor `from` (solved; `start` is the state there, where the
// simulation is on entry) to `to`, halved where Newton fails.
void solveLoadStep(Simulation::Impl& impl, double from, double to, int depth,
                   const SimulationState::Data& start) {
  try {
    solveAtLoadFactor(impl, to);
    return;
  } catch (const NumericalError& e) {
    restoreData(impl, start);
    ++impl.staticCounts.rejected;
    std::ostringstream msg;
    msg << "static: the load step from factor " << from << " to " << to
        << " did not converge: " << e.what();
    if (depth == kMaxLoadSplits) {
      msg << " (after " << kMaxLoadSplits << " splits into halves)";
      throw NumericalError(msg.str());
    }
    if (impl.staticCounts.rejected == 1) {
      impl.warn(msg.str() +
                "; split into two half steps (later splits are counted in the "
                "summary's steps_rejected)");
    }
  }
  const double middle = 0.5 * (from + to);
  solveLoadStep(impl, from, middle, depth + 1, start);
  const std::shared_ptr<const SimulationState::Data> halfway = saveData(impl);
  solveLoadStep(impl, middle, to, depth + 1, *halfway);
}

void solveNextLoadIncrement(Simulation::Impl& impl) {
  if (impl.world.bodies.empty()) throw InputError("the simulation has no body to solve");
  const int32_t increments = impl.settings.time.loadIncrements;
  const double interval = impl.settings.time.duration / increments;
  const auto solved = static_cast<int64_t>(std::floor(impl.world.time / interval + 1e-9));
  if (solved >= increments) {
    throw InputError("static: all " + std::to_string(increments) +
                     " load increments are solved (the load factor is 1)");
  }
  const double from = static_cast<double>(solved) / increments;
  const double to = static_cast<double>(solved + 1) / increments;
  const std::shared_ptr<const SimulationState::Data> start = saveData(impl);
  try {
    solveLoadStep(impl, from, to, 0, *start);
  } catch (...) {
    restoreData(impl, *start);  // at the last equilibrium, as an advance that fails
    impl.updateStatistics();
    throw;
  }
  impl.world.time = static_cast<double>(solved + 1) * interval;
  impl.updateStatistics();
}

}  // namespace

void Simulation::advance(double seconds) {
  if (impl_->isStatic()) {
    throw InputError(
        "a static simulation (time.integrator \"static\") is not advanced in "
        "time: advanceFrames solves its next load increments");
  }
  if (!(seconds > 0) || !std::isfinite(seconds)) {
    std::ostringstream msg;
    msg << "advance(" << seconds << "): the time to advance must be positive and finite, s";
    throw InputError(msg.str());
  }
  Impl& impl = *impl_;
  const double start = impl.world.time;
  std::ostringstream during;
  during << "while advancing from t = " << start << " s to " << start + seconds << " s";
  advanceInterval(impl, seconds, start + seconds, during.str());
}

void Simulation::advanceFrames(int32_t frames) {
  if (frames < 1) {
    throw InputError("advanceFrames(" + std::to_string(frames) + "): needs at least 1 frame");
  }
  Impl& impl = *impl_;
  if (impl.isStatic()) {
    for (int32_t f = 0; f < frames; ++f) solveNextLoadIncrement(impl);
    return;
  }
  const double frameInterval = 1.0 / impl.settings.time.frameRate;
  for (int32_t f = 0; f < frames; ++f) {
    // The frame the current time lies in (on its start, up to rounding), and the next.
    const double position = impl.world.time / frameInterval;
    const double current = std::floor(position + 1e-9);
    const bool onFrame = std::abs(position - current) <= 1e-9;
    const double next = current + 1;
    const double end = next * frameInterval;
    std::ostringstream during;
    during << "while computing frame " << static_cast<int64_t>(next);
    // Each frame starts the implicit solver afresh (world.hpp, advanceFrames).
    impl.integratorForRun().dropSolverCaches();
    advanceInterval(impl, onFrame ? frameInterval : end - impl.world.time, end, during.str());
  }
}

double Simulation::time() const {
  return impl_->world.time;
}

double Simulation::timeStep() const {
  if (impl_->isStatic()) {
    return impl_->settings.time.duration / impl_->settings.time.loadIncrements;
  }
  return impl_->integratorForRun().timeStep();
}

double Simulation::stableTimeStep() const {
  if (impl_->world.bodies.empty()) throw InputError("the simulation has no body");
  if (!impl_->stableStep) impl_->stableStep = shellsim::stableTimeStep(impl_->world);
  return *impl_->stableStep;
}

double Simulation::stableTimeStep(int32_t body) const {
  return impl_->body(body).model->stableTimeStep();
}

const StepStatistics& Simulation::statistics() const {
  return impl_->statistics;
}

int32_t Simulation::bodyCount() const {
  return static_cast<int32_t>(impl_->world.bodies.size());
}

int32_t Simulation::obstacleCount() const {
  return static_cast<int32_t>(impl_->world.obstacles.size());
}

namespace {

const Obstacle& obstacleAt(const World& world, int32_t index) {
  if (index < 0 || static_cast<size_t>(index) >= world.obstacles.size()) {
    throw InputError("obstacle " + std::to_string(index) + " does not exist (the simulation has " +
                     std::to_string(world.obstacles.size()) + ")");
  }
  return world.obstacles[static_cast<size_t>(index)];
}

Vec3d toArray(const Vec3& v) {
  return {v.x(), v.y(), v.z()};
}

}  // namespace

Vec3d Simulation::obstacleOffset(int32_t obstacle) const {
  return toArray(obstacleAt(impl_->world, obstacle).offset(impl_->world.time));
}

Vec3d Simulation::obstacleVelocity(int32_t obstacle) const {
  return toArray(obstacleAt(impl_->world, obstacle).velocity(impl_->world.time));
}

int32_t Simulation::bodyIndex(const std::string& name) const {
  for (size_t b = 0; b < impl_->world.bodies.size(); ++b) {
    if (impl_->world.bodies[b].name == name) return static_cast<int32_t>(b);
  }
  throw InputError("no body named '" + name + "'");
}

const std::string& Simulation::bodyName(int32_t body) const {
  return impl_->body(body).name;
}

std::string Simulation::modelName(int32_t body) const {
  return impl_->body(body).model->name();
}

int32_t Simulation::nodeCount(int32_t body) const {
  return impl_->body(body).nodeCount();
}

int64_t Simulation::elementCount(int32_t body) const {
  return impl_->body(body).model->elementCount();
}

std::span<const double> Simulation::positions(int32_t body) const {
  return impl_->body(body).positions;
}

std::span<const double> Simulation::velocities(int32_t body) const {
  return impl_->body(body).velocities;
}

std::span<const double> Simulation::masses(int32_t body) const {
  return impl_->body(body).model->nodeMasses();
}

namespace {

void checkNodeArray(const Body& body, int32_t index, std::span<const double> values,
                    const char* what) {
  if (values.size() != body.positions.size()) {
    std::ostringstream msg;
    msg << "set" << what << "(body " << index << " '" << body.name << "'): " << values.size() / 3
        << " nodes given (" << values.size() << " values), the body has " << body.nodeCount()
        << " (shape (nNodes, 3))";
    throw InputError(msg.str());
  }
  for (size_t k = 0; k < values.size(); ++k) {
    if (!std::isfinite(values[k])) {
      std::ostringstream msg;
      msg << "set" << what << "(body " << index << " '" << body.name << "'): node " << k / 3
          << " has a non-finite value";
      throw InputError(msg.str());
    }
  }
}

}  // namespace

namespace {

// Replaces one of a body's node arrays (positions, velocities) with checked values and
// recomputes the forces; puts the old values back if that fails.
void replaceNodeArray(Simulation::Impl& impl, int32_t index, std::vector<double> Body::*array,
                      std::span<const double> values, const char* what) {
  Body& body = impl.body(index);
  checkNodeArray(body, index, values, what);
  std::vector<double>& target = body.*array;
  const std::vector<double> previous = target;
  std::copy(values.begin(), values.end(), target.begin());
  try {
    impl.refresh();
  } catch (...) {
    target = previous;
    impl.refresh();
    throw;
  }
}

}  // namespace

void Simulation::setPositions(int32_t body, std::span<const double> positions) {
  replaceNodeArray(*impl_, body, &Body::positions, positions, "Positions");
}

void Simulation::setVelocities(int32_t body, std::span<const double> velocities) {
  replaceNodeArray(*impl_, body, &Body::velocities, velocities, "Velocities");
}

std::span<const int32_t> Simulation::nodeOfVertex(int32_t body) const {
  return impl_->body(body).nodeOfInputVertex;
}

std::span<const uint8_t> Simulation::pinnedNodes(int32_t body) const {
  return impl_->body(body).pinned;
}

Geometry Simulation::surface(int32_t body) const {
  const Body& b = impl_->body(body);
  return bodySurface(impl_->world, static_cast<size_t>(body), b.model->nodePieces());
}

BodyEnergies Simulation::energies(int32_t body) const {
  const Body& b = impl_->body(body);
  BodyEnergies e;
  e.kinetic = kineticEnergy(b);
  e.stretching = b.elastic.stretching;
  e.bending = b.elastic.bending;
  e.gravitational = gravitationalEnergy(b, impl_->world.gravity);
  return e;
}

std::vector<int32_t> Simulation::nodePieces(int32_t body) const {
  const Body& b = impl_->body(body);
  std::vector<int32_t> pieces = b.model->nodePieces();
  if (pieces.empty()) pieces.assign(static_cast<size_t>(b.nodeCount()), 0);
  return pieces;
}

int32_t Simulation::pieceCount(int32_t body) const {
  return shellsim::pieceCount(impl_->body(body));
}

int64_t Simulation::intersectingTrianglePairs() const {
  MeshContact counter(ContactDef{.enabled = true}, 1.0);  // the step only scales stiffness
  return counter.countIntersections(impl_->world.bodies);
}

std::vector<IntersectingTriangles> Simulation::intersectingTriangles() const {
  MeshContact counter(ContactDef{.enabled = true}, 1.0);
  return counter.listIntersections(impl_->world.bodies);
}

int64_t Simulation::brokenElements(int32_t body) const {
  return impl_->body(body).brokenElements;
}

int32_t Simulation::cracks(int32_t body) const {
  return impl_->body(body).crackCount();
}

double Simulation::gasPressure(int32_t body) const {
  return currentOverPressure(impl_->body(body), impl_->world.time);
}

int32_t Simulation::rigidFragmentCount(int32_t body) const {
  (void)impl_->body(body);  // checks the index
  return impl_->world.rigid.count(static_cast<size_t>(body));
}

std::span<const int32_t> Simulation::rigidFragmentOfNode(int32_t body) const {
  return impl_->body(body).rigidFragment;
}

SimulationState Simulation::saveState() const {
  SimulationState state;
  SimulationStateAccess::data(state) = saveData(*impl_);
  // The run that saved continues without the solver's warm start, as a restored one does.
  if (impl_->integrator) impl_->integrator->dropSolverCaches();
  return state;
}

void Simulation::restoreState(const SimulationState& state) {
  Impl& impl = *impl_;
  if (state.empty()) throw InputError("restoreState: the state is empty (never saved)");
  const SimulationState::Data& data = *SimulationStateAccess::data(state);
  if (data.simulation != impl.identity) {
    throw InputError("restoreState: the state was saved from another simulation");
  }
  if (data.bodies.size() != impl.world.bodies.size()) {
    throw InputError("restoreState: the state was saved with " +
                     std::to_string(data.bodies.size()) + " bodies, the simulation has " +
                     std::to_string(impl.world.bodies.size()));
  }
  if (data.obstacles.size() != impl.world.obstacles.size()) {
    throw InputError("restoreState: the state was saved with " +
                     std::to_string(data.obstacles.size()) + " obstacles, the simulation has " +
                     std::to_string(impl.world.obstacles.size()));
  }
  for (size_t b = 0; b < data.bodies.size(); ++b) {
    // A model that changes its nodes restores its node count with its state.
    if (!impl.world.bodies[b].model->changesNodeCount() &&
        data.bodies[b].kinematics.positions.size() != impl.world.bodies[b].positions.size()) {
      throw InputError("restoreState: body '" + impl.world.bodies[b].name +
                       "' has another node count than when the state was saved");
    }
  }
  restoreEverything(impl, data);
  if (impl.integrator) impl.integrator->dropSolverCaches();
}

std::vector<uint8_t> readFileBytes(const std::filesystem::path& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) throw IoError(path.string() + ": no such file");
  if (std::filesystem::is_directory(status)) throw IoError(path.string() + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open for reading");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError(path.string() + ": read failed");
  return bytes;
}

void Simulation::writeStateFile(const SimulationState& state,
                                const std::filesystem::path& path) const {
  if (state.empty()) throw InputError("writeStateFile: the state is empty (never saved)");
  if (SimulationStateAccess::data(state)->simulation != impl_->identity) {
    throw InputError("writeStateFile: the state was saved from another simulation");
  }
  writeEncodedState(path, *impl_, state, {});
}

SimulationState Simulation::readStateFile(const std::filesystem::path& path) const {
  SimulationState state;
  const std::vector<uint8_t> extra = decodeState(*impl_, readFileBytes(path), path.string(), state);
  (void)extra;  // a run checkpoint's own section, not needed to restore the state
  return state;
}

const std::vector<std::string>& Simulation::warnings() const {
  return impl_->warnings;
}

void Simulation::onWarning(std::function<void(const std::string&)> handler) {
  impl_->onWarning = std::move(handler);
}

void Simulation::setStopFlag(const std::atomic<bool>* stop) {
  impl_->stopFlag = stop;
}

}  // namespace shellsim
