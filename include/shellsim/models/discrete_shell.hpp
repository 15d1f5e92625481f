// Options of the discrete shells model (grinspun2003): a body's `"discrete_shell": {...}`
// in a scene file, body.options<DiscreteShellDef>() in code.
// src/models/discrete_shell/discrete_shell_registration.cpp reads, writes and documents them.
#pragma once

#include <optional>
#include <string_view>

namespace shellsim {

// Options of a discrete-shell body (grinspun2003); the material map is the default.
struct DiscreteShellDef {
  static constexpr std::string_view kModel = "discrete_shell";
  std::optional<double> stretchStiffness;  // raw k_L of every edge, N
  std::optional<double> areaStiffness;     // raw k_A of every triangle, N/m
  std::optional<double> bendStiffness;     // raw k_B of every hinge, N m
  bool projectHessian = false;             // clamp each stencil Hessian to PSD
  bool operator==(const DiscreteShellDef&) const = default;
};

}  // namespace shellsim
