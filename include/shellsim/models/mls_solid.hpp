// Options of the meshless volume model (muller2004): a body's `"mls_solid": {...}` in a scene
// file, body.options<MlsSolidDef>() in code. src/models/mls/mls_registration.cpp reads,
// writes and documents them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shellsim {

// Strain-state plasticity of an mls_solid (muller2004 section 4.1), in Green strain.
struct MlsPlasticityDef {
  double yieldStrain = 0.01;    // c_yield
  double creep = 10;            // c_creep, 1/s
  double maxStrain = 1;         // c_max
  bool deviatoric = true;       // flow by the deviator of the elastic strain
  double from = 0;              // s, plastic from this time on
  std::optional<double> until;  // s; none: to the end
  bool melt = false;            // absorb the shape into the reference while plastic
  double meltInterval = 0.005;  // s, at most this often (0: every step)
  double solidStiffness = 1;    // Young's modulus times this after `until` ("stiff again")
  bool operator==(const MlsPlasticityDef&) const = default;
};

// Options of an mls_solid body; the material's Young's modulus, Poisson ratio and density
// give St Venant-Kirchhoff elasticity (its thickness is a layered sheet's).
struct MlsSolidDef {
  static constexpr std::string_view kModel = "mls_solid";
  int32_t phyxelCount = 400;    // phyxels sampled inside a mesh (about); 0: by spacing
  double phyxelSpacing = 0;     // m, lattice spacing inside a mesh; 0: by count
  int32_t neighbours = 26;      // stencil size less the phyxel
  bool quadraticBasis = true;   // F from a quadratic fit; false: the paper's linear one
  double hourglass = 0.1;       // misfit penalty c_hg relative to the shear modulus
  double volumeStiffness = 0;   // k_v of muller2004 eq. (7), Pa
  bool projectHessian = false;  // clamp each phyxel's material tangent to PSD
  std::optional<MlsPlasticityDef> plasticity;  // none: elastic
  int32_t layers = 0;  // 0: phyxels fill a closed mesh; 2 or 3: layers of a sheet (the mesh)
  bool resampledSurface = false;  // melting: surfels that split and merge (section 5.2)
  int32_t surfelCount = 0;        // resampled: surfels chosen from the mesh; 0: its vertices
  bool operator==(const MlsSolidDef&) const = default;
};

}  // namespace shellsim
