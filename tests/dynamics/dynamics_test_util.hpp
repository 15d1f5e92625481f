// Small scenes shared by the dynamics tests (one test executable, several files).
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "dynamics/world.hpp"
#include "shellsim/scene.hpp"

namespace shellsim::testing {

// A 0.5 m x 0.5 m sheet of `resolution` x `resolution` cells, soft (E = 100 kPa), at z = 0.
inline BodyDef sheetBody(int resolution = 8) {
  BodyDef body;
  body.name = "sheet";
  PrimitiveDef sheet;
  sheet.type = PrimitiveType::kSheet;
  sheet.size = {0.5, 0.5, 0};
  sheet.resolution = resolution;
  body.primitive = sheet;
  body.material.youngModulus = 1e5;
  body.material.density = 500;
  return body;
}

inline SceneDef sceneWith(BodyDef body) {
  SceneDef scene;
  scene.bodies.push_back(std::move(body));
  return scene;
}

// Pins every vertex on the boundary of a sheet body (its primitive's size, centred at the
// origin before the transform; the body must have no rotation).
inline void pinBoundary(BodyDef& body) {
  const World probe = buildWorld(sceneWith(body));
  const double halfX = 0.5 * body.primitive->size[0] * body.transform.scale[0];
  const double halfY = 0.5 * body.primitive->size[1] * body.transform.scale[1];
  const double cx = body.transform.translation[0];
  const double cy = body.transform.translation[1];
  PinDef pin;
  pin.shape = PinShape::kVertices;
  const std::vector<double>& x = probe.bodies[0].positions;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    if (std::abs(std::abs(x[3 * i] - cx) - halfX) < 1e-9 ||
        std::abs(std::abs(x[3 * i + 1] - cy) - halfY) < 1e-9)
      pin.vertices.push_back(static_cast<int32_t>(i));
  }
  body.pins.push_back(pin);
}

}  // namespace shellsim::testing
