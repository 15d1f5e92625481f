// The mass-spring model's registration (models/registry.hpp): no options of its own (the
// material's `stiffness` is its spring constant); the mesh's vertices are the nodes.
#include <string>
#include <vector>

#include "models/mass_spring/mass_spring.hpp"
#include "models/registry.hpp"

namespace shellsim {
namespace {

Discretization discretizeMassSpring(const BodyDef& def, Geometry geometry,
                                    std::vector<std::string>& warnings, const std::string& label) {
  Discretization d = meshDiscretization("mass_spring", geometry, warnings, label);
  MassSpringSetup setup;
  d.model = std::make_unique<MassSpringModel>(geometry, def.material, &setup);
  for (const auto& w : setup.warnings) warnings.push_back(label + ": " + w);
  d.nodePositions = std::move(geometry.positions);
  return d;
}

}  // namespace

ModelRegistration massSpringRegistration() {
  return {.name = "mass_spring",
          .meaning = {},
          .options = nullptr,
          .nestedOptions = {},
          .readOptions = nullptr,
          .writeOptions = nullptr,
          .discretize = discretizeMassSpring};
}

}  // namespace shellsim
