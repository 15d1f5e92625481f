// The box and sphere shapes of a scene file (pins, loads, fiber regions, crops): which points
// they hold.
#pragma once

#include <cmath>

#include "core/vec3.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// Whether `point` (x, y, z) lies in the box (|point - center| <= halfExtents in each axis) or
// the sphere (|point - center| <= radius) that `shape` names, boundary included. Not for
// PinShape::kVertices, which names nodes rather than a region.
[[nodiscard]] inline bool insideShape(PinShape shape, const Vec3d& center, const Vec3d& halfExtents,
                                      double radius, const double* point) {
  const Vec3 d = Vec3(point[0], point[1], point[2]) - Vec3(center[0], center[1], center[2]);
  if (shape == PinShape::kSphere) return d.norm() <= radius;
  return std::abs(d.x()) <= halfExtents[0] && std::abs(d.y()) <= halfExtents[1] &&
         std::abs(d.z()) <= halfExtents[2];
}

}  // namespace shellsim
