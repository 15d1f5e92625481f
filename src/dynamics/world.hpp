// The simulated world: bodies (model + state), obstacles and gravity.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/assembler.hpp"
#include "models/model.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// Piecewise-linear scripted offset over time; constant before the first and after the
// last keyframe. Keyframe times are strictly increasing (the scene parser checks).
class KinematicPath {
 public:
  KinematicPath() = default;
  explicit KinematicPath(std::vector<ObstacleDef::Keyframe> keyframes);
  [[nodiscard]] Vec3 offset(double time) const;    // m
  [[nodiscard]] Vec3 velocity(double time) const;  // m/s, the slope of the active segment
  [[nodiscard]] bool isStatic() const { return keyframes_.empty(); }

 private:
  std::vector<ObstacleDef::Keyframe> keyframes_;
};

// Nodes moved by the script instead of by forces.
struct PinGroup {
  std::vector<int32_t> nodes;         // (nPinned), node indices
  std::vector<double> restPositions;  // (nPinned, 3), positions at time 0, m
  KinematicPath path;
};

struct Body {
  std::string name;
  std::unique_ptr<Model> model;
  std::vector<double> positions;      // (nNodes, 3), m
  std::vector<double> velocities;     // (nNodes, 3), m/s
  std::vector<double> accelerations;  // (nNodes, 3), m/s^2 at the current positions
  std::vector<uint8_t> pinned;        // (nNodes), 1 where a pin drives the node
  std::vector<PinGroup> pins;
  std::vector<int32_t> contactObstacle;  // (nNodes), obstacle touched this step, or -1
  std::vector<double> contactNormal;     // (nNodes, 3), its outward normal where touched
  double damping = 0;                    // mass-proportional damping, 1/s
  EnergyParts elastic;                   // at the current positions, J

  [[nodiscard]] int32_t nodeCount() const { return model->nodeCount(); }
};

struct Obstacle {
  ObstacleDef def;
  KinematicPath path;
};

struct World {
  Vec3 gravity{0, 0, -9.81};  // m/s^2
  std::vector<Body> bodies;
  std::vector<Obstacle> obstacles;
  double time = 0;                    // s
  std::vector<std::string> warnings;  // collected while building, reported in the summary
};

// Loads or generates each body's geometry, applies its transform, builds its model,
// selects pinned nodes and sets initial velocities. Throws InputError naming the body
// (e.g. "bodies[1] 'cloth': pins[0] selects no node") or the geometry file.
[[nodiscard]] World buildWorld(const SceneDef& scene);

// The largest stable explicit step over all bodies, s.
[[nodiscard]] double stableTimeStep(const World& world);

}  // namespace shellsim
