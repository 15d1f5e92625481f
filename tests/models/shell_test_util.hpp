// Small helpers of the triangle-mesh shell tests (discrete and inelastic shells).
#pragma once

#include <cmath>

#include "geometry/primitives.hpp"
#include "shellsim/scene.hpp"

namespace shellsim::testing {

// D = E h^3 / (12 (1 - nu^2)), N m.
inline double plateRigidity(const MaterialDef& m) {
  return m.youngModulus * std::pow(m.thickness, 3) / (12 * (1 - m.poisson * m.poisson));
}

// A built-in primitive at a resolution, its other parameters the defaults.
inline Geometry primitive(PrimitiveType type, int resolution) {
  PrimitiveDef p;
  p.type = type;
  p.resolution = resolution;
  return makePrimitive(p);
}

}  // namespace shellsim::testing
