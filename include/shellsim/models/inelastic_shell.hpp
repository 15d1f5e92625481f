// Options of the inelastic thin shells model (gingold2004): a body's
// `"inelastic_shell": {...}` in a scene file, body.options<InelasticShellDef>() in code.
// src/models/inelastic_shell/inelastic_shell_registration.cpp reads, writes and documents
// them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shellsim {

// Options of an inelastic-shell body (gingold2004); the material's Young's modulus, Poisson
// ratio and thickness give the Koiter energy.
struct InelasticShellDef {
  static constexpr std::string_view kModel = "inelastic_shell";
  // Bending from the quadratic patch of each face's six-node stencil; true: the paper's
  // shape-operator difference (consistent only on regular meshes).
  bool shapeOperatorBending = false;
  std::optional<double> yieldStrain;  // plasticity's eps0, 1; none: elastic
  double hardening = 0;               // kinematic hardening gamma, 1
  // [ours] The norm the back strain saturates at (> 0, in strain like yieldStrain); none:
  // linear hardening, the back strain gamma P unbounded.
  std::optional<double> hardeningLimit;
  std::optional<double> strainLimit;  // fracture's lambda_f, 1; none: never breaks
  bool tensileOnly = true;            // only tensile strain breaks a face
  double absorption = 0.5;            // share of a broken face's elastic strain made plastic
  int32_t refractorySteps = 10;       // steps a new face cannot break
  double minimumSplit = 0.15;         // the crack's end on the opposite edge, t in [m, 1 - m]
  int32_t maxCracksPerStep = 1;       // faces cut in one step at most
  bool waveSpacing = false;           // cuts of one step farther apart than the wave travels
  double budgeLimit = 0.2;            // budge a vertex when the crack ends within t of it
  double toughness = 0;               // K_c at crack ends, Pa m^1/2; 0: no crack ends
  std::optional<double> stepSearch;   // the step search's force ratio (> 1); none: off
  // The step search's bound on a face's plastic increment in one step, in yield strains
  // (> 0; needs yieldStrain); none: off.
  std::optional<double> plasticStep;
  bool projectHessian = false;  // clamp each face's Hessian to PSD
  bool operator==(const InelasticShellDef&) const = default;
};

}  // namespace shellsim
