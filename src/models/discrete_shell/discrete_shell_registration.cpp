// The discrete shells model's registration (models/registry.hpp): its scene options
// (DiscreteShellDef, shellsim/models/discrete_shell.hpp) and the discretization of a body
// (grinspun2003: the mesh's vertices are the nodes; edges, triangles and hinges the
// stencils).
#include <string>
#include <vector>

#include "io/json_fields.hpp"
#include "io/scene_names.hpp"
#include "models/discrete_shell/discrete_shell_model.hpp"
#include "models/registry.hpp"
#include "shellsim/models/discrete_shell.hpp"

namespace shellsim {
namespace {

using json_fields::FieldKind;
using json_fields::FieldSpec;
using json_fields::Json;
using json_fields::ObjectReader;
using json_fields::ObjectSpec;
using json_fields::Problems;
using json_fields::Range;
using scene_names::kHessianKinds;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr FieldSpec kDiscreteShellFields[] = {
    {.key = "stretch_stiffness",
     .unit = "N",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Raw k_L of the edge energy k_L (1 - l/L)^2 L; overrides the material map."},
    {.key = "area_stiffness",
     .unit = "N/m",
     .range = Range::atLeast(0),
     .optional = true,
     .meaning = "Raw k_A of the triangle-area energy; overrides the material map."},
    {.key = "bend_stiffness",
     .unit = "N m",
     .range = Range::atLeast(0),
     .optional = true,
     .meaning = "Raw k_B of the hinge energy; overrides D / 6 from the material."},
    {.key = "hessian",
     .kind = FieldKind::kChoice,
     .text = "exact",
     .choices = kHessianKinds,
     .meaning = "`projected` clamps each stencil's Hessian to positive semi-definite for the "
                "implicit integrators' Newton steps; `exact` keeps it."},
};

constexpr ObjectSpec kDiscreteShellSpec{
    "discrete_shell", "Options of the discrete shells model (grinspun2003) on a triangle mesh.",
    kDiscreteShellFields};
#pragma GCC diagnostic pop

void readDiscreteShell(ObjectReader& r, Problems& problems, BodyDef& body) {
  (void)problems;
  DiscreteShellDef& options = body.options<DiscreteShellDef>();
  options.stretchStiffness = r.tryNumber("stretch_stiffness");
  options.areaStiffness = r.tryNumber("area_stiffness");
  options.bendStiffness = r.tryNumber("bend_stiffness");
  options.projectHessian = r.choice("hessian") == "projected";
  r.finish();
}

Json writeDiscreteShell(const BodyDef& body) {
  const DiscreteShellDef& d = body.options<DiscreteShellDef>();
  Json out = {{"hessian", d.projectHessian ? "projected" : "exact"}};
  if (d.stretchStiffness) out["stretch_stiffness"] = *d.stretchStiffness;
  if (d.areaStiffness) out["area_stiffness"] = *d.areaStiffness;
  if (d.bendStiffness) out["bend_stiffness"] = *d.bendStiffness;
  return out;
}

Discretization discretizeDiscreteShell(const BodyDef& def, Geometry geometry,
                                       std::vector<std::string>& warnings,
                                       const std::string& label) {
  Discretization d = meshDiscretization("discrete_shell", geometry, warnings, label);
  std::vector<std::string> modelWarnings;
  const DiscreteShellDef& options = def.options<DiscreteShellDef>();
  DiscreteShellParams params;
  params.stretchStiffness = options.stretchStiffness;
  params.areaStiffness = options.areaStiffness;
  params.bendStiffness = options.bendStiffness;
  params.projectHessian = options.projectHessian;
  d.model = std::make_unique<DiscreteShellModel>(geometry, def.material, params, &modelWarnings);
  for (const auto& w : modelWarnings) warnings.push_back(label + ": " + w);
  d.nodePositions = std::move(geometry.positions);
  return d;
}

}  // namespace

ModelRegistration discreteShellRegistration() {
  return {.name = DiscreteShellDef::kModel,
          .meaning = "Options of a body whose model is `discrete_shell`.",
          .options = &kDiscreteShellSpec,
          .nestedOptions = {},
          .readOptions = readDiscreteShell,
          .writeOptions = writeDiscreteShell,
          .discretize = discretizeDiscreteShell};
}

}  // namespace shellsim
