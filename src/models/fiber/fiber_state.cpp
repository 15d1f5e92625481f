// The fiber model's evolving state (plastic rest values, broken fibers, cracks): the members
// Model::state copies and Model::setState puts back (model_state.hpp).
#include <algorithm>

#include "models/fiber/fiber_model.hpp"

namespace shellsim {

void FiberModel::listStateFields(StateFields& fields) {
  if (!params_.plasticity && !params_.fracture) return;  // elastic: nothing evolves
  using enum StateShape;
  // The cracks first: the network, hence the element count, is a function of them.
  fields.add("cracks", &cracks_);
  fields.add("crack_at_node", &crackAtNode_, kPerNode);
  fields.add("fiber_flags", &network_.flags, kPerElement);
  fields.add("rest_length", &network_.restLength, kPerElement);
  fields.add("rest_angle", &network_.restAngle, kPerElement);
  fields.add("plastic_length", &plasticLength_, kPerElement);
  fields.add("plastic_angle", &plasticAngle_, kPerElement);
  fields.add("bend_limit", &bendLimit_, kPerElement);
  fields.add("break_urgency", &breakUrgency_, kPerElement);
  fields.add("overload_time", &overloadTime_, kPerElement);
  fields.add("rest_area", &restArea_, kPerNode);
  fields.add("rest_mean_angle", &restMeanAngle_, kPerNode);
  fields.add("stretch_stiffness", &stretchK_, kPerNode);
  fields.add("bend_stiffness", &bendK_, kPerNode);
  fields.add("cooldown", &cooldown_);
  fields.add("inelastic_step", &inelasticStep_);
  fields.add("last_break_step", &lastBreakStep_, kPerNodeOrEmpty);
}

void FiberModel::stateAssigned() {
  const auto sameDisc = [](const CrackDisc& a, const CrackDisc& b) {
    return a.centre == b.centre && a.normal == b.normal && a.radius == b.radius;
  };
  if (std::equal(cracks_.begin(), cracks_.end(), networkCracks_.begin(), networkCracks_.end(),
                 sameDisc)) {
    return;
  }
  // Other cracks: the network (and with it the patches, the plan and the per-fiber arrays'
  // lengths) is rebuilt from them, which resets the per-fiber and per-node values; the
  // state's are then put back over the rebuilt ones.
  const ModelState assigned = state();
  buildTopology(nullptr);
  ++topologyVersion_;
  assignStateFields(assigned);
}

}  // namespace shellsim
