// Options of the fiber model (wicke2005): a body's `"fiber": {...}` in a scene file,
// body.options<FiberDef>() in code. src/models/fiber/fiber_registration.cpp reads, writes
// and documents them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "shellsim/scene.hpp"

namespace shellsim {

// How a yielding fiber's rest value moves.
enum class FiberPlasticFlow {
  kCreep,    // wicke2005 eq. (25), (26): by eta dt of the whole deviation per step
  kPerfect,  // rate independent: just enough that the deviation sits on the yield threshold
};

// Plastic flow of the fibers' rest state (wicke2005 section 7.1, eq. (22)-(26), (29)).
struct FiberPlasticityDef {
  FiberPlasticFlow flow = FiberPlasticFlow::kCreep;
  double yieldStrain = 0.02;  // beta_l as a strain: |l - l0| / l0 above which l0 creeps, > 0
  double yieldAngle = 0.05;   // beta_theta: |theta - theta0| above which theta0 creeps, rad, > 0
  double stretchCreep = 20;   // eta_l of eq. (25), 1/s, >= 0 (creep flow only)
  double bendCreep = 20;      // eta_theta of eq. (26), 1/s, >= 0 (creep flow only)
  double weakening = 0;       // alpha of eq. (29): gamma_theta shrinks with plastic bending, >= 0
  bool operator==(const FiberPlasticityDef&) const = default;
};

// Which way a crack disc faces (its normal).
enum class FiberCrackNormal {
  kFiber,      // the broken fiber's rest tangent at its centre node (wicke2005 Fig. 5)
  kPrincipal,  // [ours] the direction in which the node's fibers are stretched most
};

// Fibers breaking and crack planes (wicke2005 section 7.2, eq. (27), (28)).
struct FiberFractureDef {
  double stretchLimit = 1.5;   // gamma_l: a fiber breaks when l / l0 exceeds it, > 1
  double bendLimit = 1.0;      // gamma_theta: ... or |theta - theta0| exceeds it, rad, > 0
  double brokenRatio = 0.25;   // a crack plane forms at a node once this share of its fibers broke
  int32_t cooldownSteps = 20;  // steps after a crack before the next may form, >= 0
  // A fiber breaks once it has been past a threshold for this long, net of the time it
  // spent below (s, >= 0; 0 breaks at once, as in the paper): stress waves that overshoot
  // for a moment do not break it, a sustained load does.
  double delay = 0;
  // > 0: a crack that would cut a piece of fewer nodes off a larger one is not placed, and
  // its node seeds none again (its broken fibers stay broken), and a node left without any
  // fiber keeps its least overloaded one, unbreakable from then on; 0: every crack is placed.
  int32_t minPieceNodes = 0;
  FiberCrackNormal crackNormal = FiberCrackNormal::kFiber;
  // The fracture thresholds of fibers centred within twice a crack disc's radius of its centre
  // (rest space) are scaled by this, (0, 1]: the stress concentration at a crack's end that a
  // disc of the sampling's size does not make by itself; 1: none (the paper).
  double crackTipScale = 1.0;
  bool operator==(const FiberFractureDef&) const = default;
};

// A region of a fiber body with its own stiffness or fracture thresholds (wicke2005
// sections 7.2 "controlled fracture" and 7.3 "inhomogeneity").
struct FiberRegionDef {
  PinShape shape = PinShape::kBox;      // box or sphere, in world space after the transform
  Vec3d center{0, 0, 0};                // m
  Vec3d halfExtents{0.05, 0.05, 0.05};  // box, m
  double radius = 0.05;                 // sphere, m
  double stiffnessScale = 1;            // multiplies K_s and K_b of fibers centred inside, > 0
  double fractureScale = 1;             // multiplies gamma_l - 1 and gamma_theta inside, > 0
  bool operator==(const FiberRegionDef&) const = default;
};

// Direction-dependent fiber stiffness (wicke2005 section 7.3).
struct FiberAnisotropyDef {
  Vec3d axis{1, 0, 0};  // direction of the stiff (ratio > 1) or soft (< 1) axis, world space
  double ratio = 1;     // stiffness of a fiber along the axis over one across it, > 0
  bool operator==(const FiberAnisotropyDef&) const = default;
};

// Nodes added where the surface stretches (wicke2005 sections 8 and 9: "under very large
// stretching deformations, the initial sampling degrades", resampling is future work): a pair of
// neighbouring nodes that moves farther apart than `maxSpacing` times the spacing their nodes had
// at the start gets a node between them, so that the surface stays smooth and its fibers short
// (models/fiber/fiber_resample.cpp).
struct FiberResampleDef {
  double maxSpacing = 1.5;  // >= 1.5: at rest no pair of a usual sampling is that long
  bool operator==(const FiberResampleDef&) const = default;
};

// How a fiber-model body is discretized (wicke2005 section 5).
struct FiberDef {
  static constexpr std::string_view kModel = "fiber";
  int32_t nodeCount = 0;                   // > 0: cluster the surface into about this many nodes
  double nodeSpacing = 0;                  // > 0: cluster into nodes about this far apart, m
                                           // (both 0: every vertex or point is a node)
  int32_t neighbours = 8;                  // k nearest neighbours per node, one fiber each
  int32_t arcLengthSamples = 4;            // samples of the arc-length quadrature per spline piece
  std::optional<double> stretchStiffness;  // raw K_s, N/m^3, overrides the material map
  std::optional<double> bendStiffness;     // raw K_b, N/m, overrides the material map
  std::optional<FiberPlasticityDef> plasticity;  // absent: elastic
  std::optional<FiberFractureDef> fracture;      // absent: fibers never break
  std::vector<FiberRegionDef> regions;           // later regions override earlier ones
  std::optional<FiberAnisotropyDef> anisotropy;
  std::optional<FiberResampleDef> resample;  // absent: the nodes never change
  // The surface written as frames when nodes are clustered: the dense input surface moved
  // by the nodes (wicke2005 section 6), or the nodes themselves.
  bool highResolutionSurface = true;
  bool operator==(const FiberDef&) const = default;
};

}  // namespace shellsim
