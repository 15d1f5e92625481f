#include "models/registry.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "shellsim/errors.hpp"

namespace shellsim {

// One line per model: its registration (defined in its folder).
ModelRegistration massSpringRegistration();
ModelRegistration fiberRegistration();
ModelRegistration discreteShellRegistration();
ModelRegistration inelasticShellRegistration();
ModelRegistration mlsSolidRegistration();
ModelRegistration thickShellRegistration();

namespace {

struct Registry {
  std::deque<ModelRegistration> models;  // a deque: findModel's pointers stay valid
  uint64_t version = 1;
};

Registry& registry() {
  static Registry instance{{
                               massSpringRegistration(),
                               fiberRegistration(),
                               discreteShellRegistration(),
                               inelasticShellRegistration(),
                               mlsSolidRegistration(),
                               thickShellRegistration(),
                           },
                           1};
  return instance;
}

}  // namespace

const std::deque<ModelRegistration>& modelRegistry() {
  return registry().models;
}

const ModelRegistration* findModel(std::string_view name) {
  const std::deque<ModelRegistration>& all = modelRegistry();
  const auto found = std::find_if(all.begin(), all.end(),
                                  [&](const ModelRegistration& m) { return m.name == name; });
  return found == all.end() ? nullptr : &*found;
}

void registerModel(const ModelRegistration& model) {
  const std::string name(model.name);
  if (name.empty()) throw std::invalid_argument("registerModel: a model needs a name");
  if (findModel(name) != nullptr) {
    throw std::invalid_argument("registerModel: a model named '" + name + "' exists");
  }
  if (model.discretize == nullptr) {
    throw std::invalid_argument("registerModel: model '" + name + "' has no discretizer");
  }
  if (model.options != nullptr && (model.readOptions == nullptr || model.writeOptions == nullptr)) {
    throw std::invalid_argument("registerModel: model '" + name +
                                "' has options without a reader and a writer");
  }
  registry().models.push_back(model);
  ++registry().version;
}

uint64_t modelRegistryVersion() {
  return registry().version;
}

std::vector<int32_t> identityMap(int32_t count) {
  std::vector<int32_t> map(static_cast<size_t>(count));
  for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int32_t>(i);
  return map;
}

std::vector<int32_t> dropUnreferencedVertices(Geometry& mesh, std::vector<std::string>& warnings,
                                              const std::string& label) {
  const int32_t before = mesh.vertexCount();
  std::vector<int32_t> kept = removeUnreferencedVertices(mesh);
  if (mesh.vertexCount() != before) {
    std::ostringstream msg;
    msg << label << ": dropped " << before - mesh.vertexCount()
        << " vertices that belong to no triangle";
    warnings.push_back(msg.str());
  }
  return kept;
}

Discretization meshDiscretization(std::string_view model, Geometry& geometry,
                                  std::vector<std::string>& warnings, const std::string& label) {
  if (geometry.isPointCloud()) {
    throw InputError("model " + std::string(model) +
                     " needs a triangle mesh, but the geometry is a point cloud");
  }
  Discretization d;
  d.nodeOfVertex = dropUnreferencedVertices(geometry, warnings, label);
  return d;
}

}  // namespace shellsim
