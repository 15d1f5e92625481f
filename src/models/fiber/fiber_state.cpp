// The fiber model's evolving state (plastic rest values, broken fibers, cracks): saved,
// restored and read back from checkpoints.
#include <algorithm>
#include <array>
#include <cmath>

#include "models/fiber/fiber_model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {
struct FiberModelState : ModelState {
  std::vector<CrackDisc> cracks;
  std::vector<uint8_t> crackAtNode, flags;
  std::vector<double> restLength, restAngle, plasticLength, plasticAngle, bendLimit, urgency,
      overload, restArea, restMeanAngle, stretchK, bendK;
  int32_t cooldown = 0;
  int64_t inelasticStep = 0;
  std::vector<int64_t> lastBreakStep;

  // The per-fiber, (nFibers), and per-node, (nNodes), double arrays of a state (const or
  // not), in the order they are written.
  template <class State>
  static auto fiberValues(State& s) {
    return std::array{&s.restLength, &s.restAngle, &s.plasticLength, &s.plasticAngle,
                      &s.bendLimit,  &s.urgency,   &s.overload};
  }
  template <class State>
  static auto nodeValues(State& s) {
    return std::array{&s.restArea, &s.restMeanAngle, &s.stretchK, &s.bendK};
  }

  void write(ByteWriter& out) const override {
    writeCrackDiscs(out, cracks);
    out.array(crackAtNode);
    out.array(flags);
    for (const std::vector<double>* v : fiberValues(*this)) out.array(*v);
    for (const std::vector<double>* v : nodeValues(*this)) out.array(*v);
    out.value(cooldown);
    out.value(inelasticStep);
    out.array(lastBreakStep);
  }
};
}  // namespace

std::unique_ptr<ModelState> FiberModel::readState(ByteReader& in) const {
  auto state = std::make_unique<FiberModelState>();
  state->cracks = readCrackDiscs(in, "fiber state: crack", 1'000'000);
  state->crackAtNode = in.array<uint8_t>("fiber state: crack nodes");
  state->flags = in.array<uint8_t>("fiber state: fiber flags");
  for (std::vector<double>* v : FiberModelState::fiberValues(*state)) {
    *v = in.array<double>("fiber state: fiber values");
  }
  for (std::vector<double>* v : FiberModelState::nodeValues(*state)) {
    *v = in.array<double>("fiber state: node values");
  }
  state->cooldown = in.value<int32_t>("fiber state: cooldown");
  state->inelasticStep = in.value<int64_t>("fiber state: step");
  state->lastBreakStep = in.array<int64_t>("fiber state: last breaks");
  return state;
}

std::unique_ptr<ModelState> FiberModel::saveState() const {
  if (!params_.plasticity && !params_.fracture) return nullptr;
  auto state = std::make_unique<FiberModelState>();
  state->cracks = cracks_;
  state->crackAtNode = crackAtNode_;
  state->flags = network_.flags;
  state->restLength = network_.restLength;
  state->restAngle = network_.restAngle;
  state->plasticLength = plasticLength_;
  state->plasticAngle = plasticAngle_;
  state->bendLimit = bendLimit_;
  state->urgency = breakUrgency_;
  state->overload = overloadTime_;
  state->restArea = restArea_;
  state->restMeanAngle = restMeanAngle_;
  state->stretchK = stretchK_;
  state->bendK = bendK_;
  state->cooldown = cooldown_;
  state->inelasticStep = inelasticStep_;
  state->lastBreakStep = lastBreakStep_;
  return state;
}

void FiberModel::restoreState(const ModelState* state) {
  const auto* saved = dynamic_cast<const FiberModelState*>(state);
  if (saved == nullptr) return;
  // A state read from a checkpoint must fit: per-node arrays of the node count, per-fiber
  // arrays of the fiber count of the network its cracks give (checked after the rebuild).
  const auto nodes = static_cast<size_t>(network_.nodeCount);
  const auto fitsNodes = [&](size_t size) { return size == nodes; };
  bool nodesFit = fitsNodes(saved->crackAtNode.size()) &&
                  (saved->lastBreakStep.empty() || fitsNodes(saved->lastBreakStep.size()));
  for (const std::vector<double>* v : FiberModelState::nodeValues(*saved)) {
    nodesFit = nodesFit && fitsNodes(v->size());
  }
  if (!nodesFit) {
    throw InputError("fiber model: the state has per-node values for another node count than " +
                     std::to_string(nodes));
  }
  const auto sameDisc = [](const CrackDisc& a, const CrackDisc& b) {
    return a.centre == b.centre && a.normal == b.normal && a.radius == b.radius;
  };
  if (!std::equal(saved->cracks.begin(), saved->cracks.end(), cracks_.begin(), cracks_.end(),
                  sameDisc)) {
    cracks_ = saved->cracks;
    buildTopology(nullptr);  // the network is a function of the cracks
    ++topologyVersion_;
  }
  const size_t fibers = network_.restLength.size();
  for (const std::vector<double>* v : FiberModelState::fiberValues(*saved)) {
    if (v->size() != fibers) {
      throw InputError("fiber model: the state has per-fiber values for " +
                       std::to_string(v->size()) + " fibers, the network of its " +
                       std::to_string(cracks_.size()) + " cracks has " + std::to_string(fibers));
    }
  }
  if (saved->flags.size() != fibers) {
    throw InputError("fiber model: the state has flags for another fiber count than " +
                     std::to_string(fibers));
  }
  crackAtNode_ = saved->crackAtNode;
  network_.flags = saved->flags;
  network_.restLength = saved->restLength;
  network_.restAngle = saved->restAngle;
  plasticLength_ = saved->plasticLength;
  plasticAngle_ = saved->plasticAngle;
  bendLimit_ = saved->bendLimit;
  breakUrgency_ = saved->urgency;
  overloadTime_ = saved->overload;
  restArea_ = saved->restArea;
  restMeanAngle_ = saved->restMeanAngle;
  stretchK_ = saved->stretchK;
  bendK_ = saved->bendK;
  cooldown_ = saved->cooldown;
  inelasticStep_ = saved->inelasticStep;
  lastBreakStep_ = saved->lastBreakStep;
}

}  // namespace shellsim
