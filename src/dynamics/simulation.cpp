#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>

#include "dynamics/simulation_impl.hpp"
#include "shellsim/errors.hpp"
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

}  // namespace

// What SimulationState holds: the evolving state of every body at one time.
struct SimulationState::Data {
  uint64_t simulation = 0;  // Impl::identity of the simulation it was saved from
  double time = 0;          // s
  double timeStep = 0;      // s, the planned step then (0: not yet planned)
  struct BodyState {
    // (nNodes, 3) each. The accelerations are part of the state: after plastic flow they
    // are those of the rest state before it (the step pipeline recomputes them only when
    // the topology changes), and a restored state must continue exactly as the saved one.
    std::vector<double> positions, velocities, accelerations, externalForces;
    EnergyParts elastic;                      // J
    std::shared_ptr<const ModelState> model;  // null for a model without evolving state
    int64_t brokenElements = 0;
    int32_t cracks = 0;
    int32_t embeddedPieces = 1;
  };
  std::vector<BodyState> bodies;
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

void Simulation::Impl::updateStatistics() {
  if (!integrator) return;
  const StepCounts& counts = integrator->counts();
  statistics.steps = counts.accepted;
  statistics.rejectedSteps = counts.rejected;
  statistics.newtonIterations = counts.newton.iterations;
  statistics.factorizations = counts.newton.factorizations;
}

TimeIntegrator& Simulation::Impl::integratorForRun() {
  if (world.bodies.empty()) throw InputError("the simulation has no body to advance");
  if (!stableStep) stableStep = shellsim::stableTimeStep(world);
  if (!integrator || replan) {
    // The planned step divides the frame interval: a frame is a whole number of steps.
    const double frameInterval = 1.0 / settings.time.frameRate;
    std::vector<std::string> planWarnings;
    const double target = plannedTimeStep(settings.time, *stableStep, frameInterval, planWarnings);
    const double stepsPerFrame = std::max(1.0, std::ceil(frameInterval / target - 1e-9));
    if (stepsPerFrame > 1e7) {
      std::ostringstream msg;
      msg << "the stable time step " << *stableStep
          << " s needs more than 10^7 steps per frame; the material is too stiff for explicit "
             "integration at this resolution";
      throw InputError(msg.str());
    }
    for (const std::string& w : planWarnings) warn(w);
    if (integrator) {
      integrator->setTimeStep(frameInterval / stepsPerFrame);
    } else {
      integrator.emplace(settings.time, frameInterval / stepsPerFrame,
                         [this](const std::string& w) { warn(w); });
    }
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
  for (const double g : settings.gravity) {
    if (!std::isfinite(g)) throw InputError("shellsim: gravity must be finite");
  }
  impl_->settings = settings;
  impl_->world.gravity = toVec3(settings.gravity);
  impl_->identity = nextIdentity.fetch_add(1);
}

Simulation::Simulation(const SceneDef& scene)
    : Simulation(SimulationSettings{scene.gravity, scene.time}) {
  for (const ObstacleDef& obstacle : scene.obstacles) addObstacle(obstacle);
  for (const BodyDef& body : scene.bodies) addBody(body);
}

Simulation::Simulation(Simulation&&) noexcept = default;
Simulation& Simulation::operator=(Simulation&&) noexcept = default;
Simulation::~Simulation() = default;

int32_t Simulation::addBody(Geometry geometry, BodyDef def) {
  Impl& impl = *impl_;
  const size_t index = impl.world.bodies.size();
  if (def.name.empty()) def.name = "body" + std::to_string(index);
  const std::string path = "bodies[" + std::to_string(index) + "]";
  for (size_t b = 0; b < index; ++b) {
    if (impl.world.bodies[b].name == def.name) {
      throw InputError("shellsim: " + path + ".name = \"" + def.name + "\": already names bodies[" +
                       std::to_string(b) + "]; names must be distinct");
    }
  }
  validateBody(def, path, true);
  const size_t warningsBefore = impl.world.warnings.size();
  (void)shellsim::addBody(impl.world, def, std::move(geometry), bodyLabel(index, def));
  for (size_t w = warningsBefore; w < impl.world.warnings.size(); ++w) {
    impl.warn(impl.world.warnings[w]);
  }
  impl.stableStep.reset();
  impl.replan = true;  // the new body's stable step may be smaller
  try {
    impl.refresh();
  } catch (...) {
    impl.world.bodies.pop_back();
    throw;
  }
  return static_cast<int32_t>(index);
}

int32_t Simulation::addBody(BodyDef def) {
  const size_t index = impl_->world.bodies.size();
  if (def.name.empty()) def.name = "body" + std::to_string(index);
  validateBody(def, "bodies[" + std::to_string(index) + "]", false);
  Geometry geometry = loadBodyGeometry(def, bodyLabel(index, def));
  return addBody(std::move(geometry), std::move(def));
}

int32_t Simulation::addObstacle(const ObstacleDef& obstacle) {
  Impl& impl = *impl_;
  const size_t index = impl.world.obstacles.size();
  validateObstacle(obstacle, "obstacles[" + std::to_string(index) + "]");
  impl.world.obstacles.push_back({obstacle, KinematicPath(obstacle.path)});
  impl.energyGuard.reset();
  return static_cast<int32_t>(index);
}

void Simulation::addPin(int32_t body, const PinDef& pin) {
  Impl& impl = *impl_;
  const Body& b = impl.body(body);
  const size_t index = static_cast<size_t>(body);
  std::ostringstream label;
  label << "bodies[" << index << "] '" << b.name << "'.pins[" << b.pins.size() << "]";
  BodyDef probe;  // the pin checked as the scene reader checks one
  probe.name = b.name;
  probe.pins.push_back(pin);
  validateBody(probe, "bodies[" + std::to_string(index) + "]", true);
  shellsim::addPin(impl.world, index, pin, label.str());
  impl.refresh();
}

void Simulation::addLoad(int32_t body, const LoadDef& load) {
  Impl& impl = *impl_;
  const Body& b = impl.body(body);
  const size_t index = static_cast<size_t>(body);
  std::ostringstream label;
  label << "bodies[" << index << "] '" << b.name << "'.loads[" << b.loads.size() << "]";
  BodyDef probe;
  probe.name = b.name;
  probe.loads.push_back(load);
  validateBody(probe, "bodies[" + std::to_string(index) + "]", true);
  shellsim::addLoad(impl.world, index, load, label.str());
  impl.refresh();
}

namespace {

std::shared_ptr<const SimulationState::Data> saveData(const Simulation::Impl& impl) {
  auto data = std::make_shared<SimulationState::Data>();
  data->simulation = impl.identity;
  data->time = impl.world.time;
  data->timeStep = impl.integrator ? impl.integrator->timeStep() : 0.0;
  for (const Body& body : impl.world.bodies) {
    SimulationState::Data::BodyState& state = data->bodies.emplace_back();
    state.positions = body.positions;
    state.velocities = body.velocities;
    state.accelerations = body.accelerations;
    state.externalForces = body.externalForces;
    state.elastic = body.elastic;
    state.model = body.model->saveState();
    state.brokenElements = body.brokenElements;
    state.cracks = body.cracks;
    state.embeddedPieces = body.embeddedPieces;
  }
  return data;
}

void restoreData(Simulation::Impl& impl, const SimulationState::Data& data) {
  World& world = impl.world;
  world.time = data.time;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    Body& body = world.bodies[b];
    const SimulationState::Data::BodyState& state = data.bodies[b];
    body.positions = state.positions;
    body.velocities = state.velocities;
    body.accelerations = state.accelerations;
    body.externalForces = state.externalForces;
    body.elastic = state.elastic;
    if (state.model) {
      const size_t cracksBefore = body.model->crackDiscs().size();
      body.model->restoreState(state.model.get());
      if (body.embedded && body.model->crackDiscs().size() != cracksBefore) {
        // The binding knows cracks the restored state has not had yet: bind again.
        body.embedded =
            std::make_unique<SurfaceBinding>(body.embedded->restNodes(), *body.embeddedRest,
                                             SurfaceBindingParams{}, body.model->crackDiscs());
        body.embeddedPieces = 1;
        if (state.embeddedPieces > 1) {
          body.embedded->separatePieces(body.model->nodePieces());
          body.embeddedPieces = state.embeddedPieces;
        }
      }
    }
    body.brokenElements = state.brokenElements;
    body.cracks = state.cracks;
    // State held fixed while differentiating (Model::prepare) follows the positions.
    (void)body.model->prepare(body.positions);
  }
}

}  // namespace

namespace {

// One advance of `interval` seconds ending at `endTime`, with the last-resort retry:
// recomputed from its start with half the planned step, up to kMaxStepHalvings times.
void advanceInterval(Simulation::Impl& impl, double interval, double endTime,
                     const std::string& during) {
  TimeIntegrator& integrator = impl.integratorForRun();
  if (!impl.energyGuard) impl.energyGuard.emplace(impl.world);
  const std::shared_ptr<const SimulationState::Data> checkpoint = saveData(impl);
  for (int halvings = 0;; ++halvings) {
    try {
      integrator.advance(impl.world, interval, endTime, impl.times);
      impl.energyGuard->check(impl.world);
      break;
    } catch (const NumericalError& e) {
      std::ostringstream msg;
      msg << e.what() << " (" << during << " with time step " << integrator.timeStep() << " s)";
      restoreData(impl, *checkpoint);
      if (halvings == kMaxStepHalvings) {
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

}  // namespace

void Simulation::advance(double seconds) {
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
    advanceInterval(impl, onFrame ? frameInterval : end - impl.world.time, end, during.str());
  }
}

double Simulation::time() const {
  return impl_->world.time;
}

double Simulation::timeStep() const {
  return impl_->integratorForRun().timeStep();
}

double Simulation::stableTimeStep() const {
  if (impl_->world.bodies.empty()) throw InputError("the simulation has no body");
  if (!impl_->stableStep) impl_->stableStep = shellsim::stableTimeStep(impl_->world);
  return *impl_->stableStep;
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

void Simulation::setPositions(int32_t body, std::span<const double> positions) {
  Body& b = impl_->body(body);
  checkNodeArray(b, body, positions, "Positions");
  const std::vector<double> previous = b.positions;
  std::copy(positions.begin(), positions.end(), b.positions.begin());
  try {
    impl_->refresh();
  } catch (...) {
    b.positions = previous;
    impl_->refresh();
    throw;
  }
}

void Simulation::setVelocities(int32_t body, std::span<const double> velocities) {
  Body& b = impl_->body(body);
  checkNodeArray(b, body, velocities, "Velocities");
  const std::vector<double> previous = b.velocities;
  std::copy(velocities.begin(), velocities.end(), b.velocities.begin());
  try {
    impl_->refresh();
  } catch (...) {
    b.velocities = previous;
    impl_->refresh();
    throw;
  }
}

std::span<const int32_t> Simulation::nodeOfVertex(int32_t body) const {
  return impl_->body(body).nodeOfInputVertex;
}

std::span<const uint8_t> Simulation::pinnedNodes(int32_t body) const {
  return impl_->body(body).pinned;
}

Geometry Simulation::surface(int32_t body) const {
  return bodySurface(impl_->body(body), static_cast<size_t>(body));
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

int64_t Simulation::brokenElements(int32_t body) const {
  return impl_->body(body).brokenElements;
}

int32_t Simulation::cracks(int32_t body) const {
  return impl_->body(body).cracks;
}

SimulationState Simulation::saveState() const {
  SimulationState state;
  state.data_ = saveData(*impl_);
  return state;
}

void Simulation::restoreState(const SimulationState& state) {
  Impl& impl = *impl_;
  if (state.empty()) throw InputError("restoreState: the state is empty (never saved)");
  const SimulationState::Data& data = *state.data_;
  if (data.simulation != impl.identity) {
    throw InputError("restoreState: the state was saved from another simulation");
  }
  if (data.bodies.size() != impl.world.bodies.size()) {
    throw InputError("restoreState: the state was saved with " +
                     std::to_string(data.bodies.size()) + " bodies, the simulation has " +
                     std::to_string(impl.world.bodies.size()));
  }
  for (size_t b = 0; b < data.bodies.size(); ++b) {
    if (data.bodies[b].positions.size() != impl.world.bodies[b].positions.size()) {
      throw InputError("restoreState: body '" + impl.world.bodies[b].name +
                       "' has another node count than when the state was saved");
    }
  }
  restoreData(impl, data);
  if (data.timeStep > 0) impl.integratorForRun().setTimeStep(data.timeStep);
}

const std::vector<std::string>& Simulation::warnings() const {
  return impl_->warnings;
}

void Simulation::onWarning(std::function<void(const std::string&)> handler) {
  impl_->onWarning = std::move(handler);
}

}  // namespace shellsim
