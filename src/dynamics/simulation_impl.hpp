// What a Simulation (include/shellsim/world.hpp) holds: the world and the integrator of
// the step pipeline. Private to the library: runScene and the recorder reach the world
// through it.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
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
  const std::atomic<bool>* stopFlag = nullptr;  // Simulation::setStopFlag
  StepStatistics statistics;
  // Static runs (time.integrator "static"): load increments solved, sub-increments
  // included, in `accepted`; failed solves in `rejected`; Newton work.
  StepCounts staticCounts;
  // The last static increment: its load factor and the largest final relative residual
  // over the bodies.
  struct StaticIncrement {
    double loadFactor = 0;
    double residual = 0;
  };
  std::optional<StaticIncrement> lastIncrement;
  [[nodiscard]] bool isStatic() const { return settings.time.integrator == Integrator::kStatic; }
  // The run's step counts (the integrator's, or the static ones).
  [[nodiscard]] StepCounts counts() const;
  void setCounts(const StepCounts& counts);
  PhaseTimes times;  // wall time per phase of every step so far
  std::vector<std::string> warnings;
  std::function<void(const std::string&)> onWarning;
  uint64_t identity = 0;  // distinguishes simulations, for restoreState
  // A hash of how the simulation was set up (settings but the duration, every body's
  // definition and geometry, obstacles, pins, loads), in order: a state file records it,
  // and only a simulation set up the same way reads it.
  uint64_t fingerprint = 0;

  void warn(const std::string& message);
  // A run of more than this many steps gets a warning naming the body that sets the step
  // (a sliver triangle can make a 2 s drop take an hour without a word otherwise).
  static constexpr double kLongRunSteps = 1e6;
  bool longRunWarned = false;
  // Warns once when `step` (s) makes the whole duration take more than kLongRunSteps.
  void warnIfLong(double step, double stepsPerFrame);
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

// A state as the bytes of a state file, with `extra` bytes of the caller's (runScene's
// section: frame records, warnings) inside the checksum.
[[nodiscard]] std::vector<uint8_t> encodeState(const Simulation::Impl& impl,
                                               const SimulationState& state,
                                               std::span<const uint8_t> extra);
// encodeState written to `path` atomically (a temporary file, then a rename); IoError.
void writeEncodedState(const std::filesystem::path& path, const Simulation::Impl& impl,
                       const SimulationState& state, std::span<const uint8_t> extra);
// Checks and reads the bytes of a state file (`source` names it in errors) into `state`;
// returns the extra bytes. Throws InputError.
std::vector<uint8_t> decodeState(const Simulation::Impl& impl, std::span<const uint8_t> bytes,
                                 const std::string& source, SimulationState& state);
// The whole content of a file; IoError naming it when it cannot be read.
[[nodiscard]] std::vector<uint8_t> readFileBytes(const std::filesystem::path& path);

}  // namespace shellsim
