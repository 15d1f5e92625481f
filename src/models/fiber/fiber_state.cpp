// The fiber model's evolving state (plastic rest values, broken fibers, cracks): the members
// Model::state copies and Model::setState puts back (model_state.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "models/fiber/fiber_model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

void FiberModel::listStateFields(StateFields& fields) {
  using enum StateShape;
  if (params_.resample) {
    // The nodes: the network, the masses and the stiffnesses follow from them.
    fields.add("rest_positions", &restPositions_, kPerNode, 3);
    fields.add("rest_normals", &restNormals_, kPerNode, 3);
    fields.add("areas", &areas_, kPerNode);
    fields.add("spacing", &spacing_, kPerNode);
    fields.add("free_edge_normal", &freeEdgeNormal_, kPerNode, 3);
    fields.add("original_fibers", &originalFibers_, kPerNode);
    fields.add("stiffness_scale", &params_.nodeStiffnessScale, kPerNodeOrEmpty);
    fields.add("fracture_scale", &params_.nodeFractureScale, kPerNodeOrEmpty);
    fields.add("triangles", &triangles_);
    fields.add("resample_energy", &resampleEnergy_);
    fields.add("reshape_quality", &reshapeQuality_);
  }
  if (!params_.plasticity && !params_.fracture) return;  // elastic: nothing else evolves
  // The cracks first: the network, hence the element count, is a function of them.
  fields.add("cracks", &cracks_);
  fields.add("crack_at_node", &crackAtNode_, kPerNode);
  fields.add("patch_pieces", &patchPieces_, kPerNodeOrEmpty);
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
  const bool sameNodes = !params_.resample || restPositions_ == builtRestPositions_;
  if (sameNodes && patchPieces_ == builtPatchPieces_ &&
      std::equal(cracks_.begin(), cracks_.end(), networkCracks_.begin(), networkCracks_.end(),
                 sameDisc)) {
    if (params_.resample) buildResamplePairs();  // the triangles may have flipped since
    return;
  }
  if (params_.resample) {
    // An elastic body's state does not list these; they follow the node count.
    if (!params_.plasticity && !params_.fracture) crackAtNode_.assign(areas_.size(), 0);
    checkNodeState();
  }
  // Other cracks: the network (and with it the patches, the plan and the per-fiber arrays'
  // lengths) is rebuilt from them, which resets the per-fiber and per-node values; the
  // state's are then put back over the rebuilt ones.
  if (!patchPieces_.empty() && patchPieces_.size() != restPositions_.size() / 3) {
    throw InputError("fiber model: the state's patch_pieces has " +
                     std::to_string(patchPieces_.size()) + " values for " +
                     std::to_string(restPositions_.size() / 3) + " nodes");
  }
  const ModelState assigned = state();
  buildTopology(nullptr);
  ++topologyVersion_;
  assignStateFields(assigned);
  buildResamplePairs();
  if (!sameNodes) stableStep_.reset();
}

void FiberModel::checkNodeState() const {
  const size_t n = areas_.size();
  const auto fail = [](const std::string& what) {
    throw InputError("fiber model: the state's " + what);
  };
  if (n < 3 || restPositions_.size() != 3 * n || restNormals_.size() != 3 * n ||
      spacing_.size() != n || freeEdgeNormal_.size() != 3 * n || originalFibers_.size() != n ||
      crackAtNode_.size() != n || triangles_.size() % 3 != 0 || resampleEnergy_.size() != 1 ||
      !std::isfinite(resampleEnergy_[0]) || reshapeQuality_.size() != 1 ||
      !std::isfinite(reshapeQuality_[0])) {
    fail("per-node arrays disagree in length");
  }
  for (size_t i = 0; i < n; ++i) {
    if (!(areas_[i] > 0) || !std::isfinite(areas_[i]) || !(spacing_[i] > 0) ||
        !std::isfinite(spacing_[i]) || !row(restPositions_, i).allFinite() ||
        !row(restNormals_, i).allFinite() || !(row(restNormals_, i).norm() > 1e-12) ||
        !row(freeEdgeNormal_, i).allFinite() || originalFibers_[i] < 0) {
      fail("node " + std::to_string(i) + " has a non-finite or non-positive value");
    }
  }
  for (const int32_t v : triangles_) {
    if (v < 0 || static_cast<size_t>(v) >= n) fail("triangles name a node out of range");
  }
  for (const std::vector<double>* scale :
       {&params_.nodeStiffnessScale, &params_.nodeFractureScale}) {
    if (!scale->empty() && scale->size() != n) fail("node scales disagree in length");
  }
}

}  // namespace shellsim
