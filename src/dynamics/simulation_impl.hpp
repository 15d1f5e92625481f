// What a Simulation (include/shellsim/world.hpp) holds: the world and the integrator of
// the step pipeline. Private to the library: runScene and the recorder reach the world
// through it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dynamics/step_pipeline.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/world.hpp"

namespace shellsim {

struct Simulation::Impl {
  SimulationSettings settings;
  World world;
  std::optional<TimeIntegrator> integrator;  // made at the first advance, after the bodies
  std::optional<double> stableStep;          // s, over all bodies; reset when one is added
  bool replan = false;                       // plan the step again (a body was added)
  // Checks energy growth per advance; remade whenever the state is changed from outside
  // (a body added, positions set, a state restored), since it compares with the energy at
  // its making.
  std::optional<EnergyGuard> energyGuard;
  StepStatistics statistics;
  PhaseTimes times;  // wall time per phase of every step so far
  std::vector<std::string> warnings;
  std::function<void(const std::string&)> onWarning;
  uint64_t identity = 0;  // distinguishes simulations, for restoreState

  void warn(const std::string& message);
  // Scripted motion, forces and checks at the current state; drops the energy guard.
  void refresh();
  // The integrator, made or re-planned from the stable step and the frame interval.
  TimeIntegrator& integratorForRun();
  // Copies the integrator's counts into `statistics`.
  void updateStatistics();
  [[nodiscard]] const Body& body(int32_t index) const;
  Body& body(int32_t index);
};

Simulation::Impl& implOf(Simulation& simulation);
const Simulation::Impl& implOf(const Simulation& simulation);

}  // namespace shellsim
