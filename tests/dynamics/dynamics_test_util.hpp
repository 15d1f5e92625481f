// Small scenes shared by the dynamics tests (one test executable, several files).
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "dynamics/world.hpp"
#include "shellsim/models/inelastic_shell.hpp"
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

// Grips sheetBody()'s left and right edges, boxes `gripWidth` deep from each (half extents
// gripWidth, 0.3, 0.1 m, centred at x = -+0.25 m), and pulls each outwards by `pull` m over
// the first second.
inline void gripLeftAndRightEdges(BodyDef& body, double gripWidth, double pull) {
  for (const double side : {-1.0, 1.0}) {
    PinDef pin;
    pin.shape = PinShape::kBox;
    pin.center = {side * 0.25, 0, 0};
    pin.halfExtents = {gripWidth, 0.3, 0.1};
    pin.path = {{0.0, {0, 0, 0}}, {1.0, {side * pull, 0, 0}}};
    body.pins.push_back(pin);
  }
}

// A 20 x 5 cm inelastic-shell strip (gingold2004), 1 mm thick, E = 10 MPa, fracture at 1 %
// strain, gripped 6 mm at each end; the right grip moves at 1 cm/s along the strip, so the
// strip tears after about 0.15 s. Backward Euler at 0.2 ms, 50 frames per second, 0.3 s.
inline SceneDef pulledInelasticStrip() {
  SceneDef scene;
  scene.gravity = {0, 0, 0};
  BodyDef strip;
  strip.name = "strip";
  PrimitiveDef sheet;
  sheet.type = PrimitiveType::kSheet;
  sheet.size = {0.2, 0.05, 0};
  sheet.resolution = 40;
  strip.primitive = sheet;
  strip.model = "inelastic_shell";
  strip.options<InelasticShellDef>().strainLimit = 0.01;
  strip.material.youngModulus = 1e7;
  strip.material.poisson = 0.3;
  strip.material.thickness = 1e-3;
  strip.material.density = 1000;
  strip.material.damping = 1.0;
  PinDef left;
  left.shape = PinShape::kBox;
  left.center = {-0.1, 0, 0};
  left.halfExtents = {0.006, 0.1, 0.01};
  PinDef right = left;
  right.center = {0.1, 0, 0};
  right.path = {{0.0, {0, 0, 0}}, {1.0, {0.01, 0, 0}}};
  strip.pins = {left, right};
  scene.bodies.push_back(strip);
  scene.time.duration = 0.3;
  scene.time.frameRate = 50;
  scene.time.integrator = Integrator::kBackwardEuler;
  scene.time.timeStep = 2e-4;
  return scene;
}

// Two discrete-shell sheets, 4 mm thick, E = 5 MPa: a 40 cm sheet of lowerCells x
// lowerCells at z = 0.1 m held at two edges, and a 20 cm sheet of upperCells x upperCells
// turned 30 degrees with its plane at upperHeight (m), free; mesh contact on or off. The
// mesh-contact tests drop the upper one (bench_mesh_contact.cpp rests it on the lower).
inline SceneDef twoSheets(int lowerCells, int upperCells, double upperHeight, bool contact) {
  SceneDef scene;
  for (int s = 0; s < 2; ++s) {
    BodyDef body = sheetBody(s == 0 ? lowerCells : upperCells);
    body.name = s == 0 ? "lower" : "upper";
    body.model = "discrete_shell";
    body.primitive->size = s == 0 ? Vec3d{0.4, 0.4, 0} : Vec3d{0.2, 0.2, 0};
    body.material.youngModulus = 5e6;
    body.material.thickness = 0.004;
    body.material.damping = 1;
    body.transform.translation = {0, 0, s == 0 ? 0.1 : upperHeight};
    if (s == 1) body.transform.rotationDegrees = {0, 0, 30};
    if (s == 0) {
      for (const double x : {-0.2, 0.2}) {
        PinDef pin;
        pin.shape = PinShape::kBox;
        pin.center = {x, 0, 0.1};
        pin.halfExtents = {0.01, 0.3, 0.01};
        body.pins.push_back(pin);
      }
    }
    scene.bodies.push_back(body);
  }
  scene.contact.enabled = contact;
  return scene;
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
