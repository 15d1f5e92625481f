// One time step of the world, as a named pipeline.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "dynamics/world.hpp"

namespace shellsim {

// Wall time spent in each phase, s.
struct PhaseTimes {
  double forces = 0;
  double integrate = 0;
  double contact = 0;
  double checks = 0;
  double output = 0;
  double inelastic = 0;  // plasticity, fracture tests and crack rebuilds
};

// Adds the wall time of its scope to one of the PhaseTimes fields.
class PhaseTimer {
 public:
  explicit PhaseTimer(double& accumulator)
      : accumulator_(accumulator), start_(std::chrono::steady_clock::now()) {}
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() {
    accumulator_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& accumulator_;
  std::chrono::steady_clock::time_point start_;
};

// Bound on node speed beyond which the state counts as blown up, m/s. No shell in a
// scene of everyday objects legitimately moves at a kilometre per second; a diverging
// explicit step reaches it within a few steps.
inline constexpr double kMaxNodeSpeed = 1.0e3;

// Computes every body's elastic energy and accelerations at the current positions,
// a = (-dE/dx + f_ext) / m + g (f_ext: updateExternalForces); pinned nodes get zero
// acceleration. Must be called once
// before the first step.
void computeAccelerations(World& world);

// The elastic gradient dE/dx of a body at its current positions, shape (nNodes, 3), and
// its energy, when a solver already has them (valid = false: not known).
struct KnownGradient {
  bool valid = false;
  std::vector<double> gradient;
  EnergyParts energy;
};
// As computeAccelerations, taking body b's gradient from known[b] where it is valid and
// Model::prepare reports no change of state (same values, one evaluation fewer).
void computeAccelerations(World& world, std::span<const KnownGradient> known);

// Velocity Verlet (kick-drift-kick), the integrator of wicke2005 section 8, with
// mass-proportional damping (wicke2005 eq. 15) applied as the exact decay
// exp(-c dt / 2) at each half kick, and scripted nodes moved by their paths:
//   v += dt/2 a(x);  x += dt v;  pins;  project out of obstacles;  a = a(x);
//   v += dt/2 a(x);  contact velocity response
// then checks for NaN and blow-up, then plasticity and fracture (updateInelastic). Throws
// NumericalError naming the body and node. The same as proposeStep followed by
// updateInelastic: the step pipeline (step_pipeline.hpp) inspects the step in between.
void step(World& world, double dt, PhaseTimes& times);
// The step above up to and including the checks, without plasticity and fracture: a step
// proposed to the pipeline's "accept?" stage, which may still undo it.
void proposeStep(World& world, double dt, PhaseTimes& times);

// Plasticity and fracture of every body after an accepted step of length dt
// (Model::updateInelastic); applies each topology edit a model returns to its body
// (applyTopologyEdit: nodes, per-node arrays, cuts) and recomputes the accelerations when
// an element broke or the topology changed, so the next step starts from forces of the new
// topology.
void updateInelastic(World& world, double dt, PhaseTimes& times);
// Internal friction after an accepted step of dt (Body::internalDamping): in every piece of a
// body, the free nodes' velocities relative to the piece's rigid motion (the velocity field
// v_r(x) = V + omega x (x - c) with the free nodes' momentum and angular momentum about
// their centre of mass c) are scaled by exp(-internalDamping dt). The relative velocities
// carry no momentum and no angular momentum, so both are kept exactly. Sums in node order:
// the same for any thread count.
void dampInternalMotion(World& world, double dt);

// Every body's external loads at its current positions and world.time into
// body.externalForces: region forces, and pressure p a_j N_j along the nodes' area vectors.
// Pressure inside a closed shell is internal to the shell and its gas and neither moves nor
// turns it: the discretization's residual net force and torque (a sampled sum of a_j N_j is
// not exactly zero, unlike the closed surface integral) are removed as one rigid
// acceleration (removeRigidPart).
void updateExternalForces(World& world);

// The gas a shell encloses, measured from its nodes' area vectors A_i.
struct EnclosedGas {
  double volume = 0;       // m^3, 1/3 sum_i (x_i - c) . A_i (c: the centre of mass)
  double openingArea = 0;  // m^2, |sum_i A_i| less the closed surface's sampling residue
};
// positions and area (nNodes, 3), mass (nNodes); closedResidue: PressureLoad::closedResidue.
EnclosedGas measureEnclosedGas(std::span<const double> positions, std::span<const double> area,
                               std::span<const double> mass, double closedResidue);
// The same on the body's current shape, from the area vectors its pressure pushes along
// (body.pressure must be set).
EnclosedGas measureEnclosure(const Body& body);
// Area vectors of a triangle mesh over positions (nNodes, 3), a third of each triangle's per
// corner, into area (nNodes, 3), m^2.
void triangleAreaVectors(std::span<const double> positions, std::span<const int32_t> triangles,
                         std::span<double> area);

// The over-pressure pushing on the body at `time`, Pa (0 without a pressure load).
double currentOverPressure(const Body& body, double time);

// The orifice vent (PressureDef::vent) over an accepted step of dt, after the model's
// inelastic update: at the body's first crack the gas is sealed in (PressureLoad::gas), after
// it flows out through the openings. beforeUpdate: the enclosure measured before that update
// (a body whose gas is sealed; else null); edited: the update changed the body's elements, so
// its measured volume jumped while the gas did not: the over-pressure before is kept.
void ventSealedGas(Body& body, double time, double dt, const EnclosedGas* beforeUpdate,
                   bool edited);

// Moves every scripted (pinned) node to its path's position and velocity at world.time.
void applyScriptedMotion(World& world);
// The pins that hold at `time` (those before their release) and the pinned flags they set.
void holdPinsAt(Body& body, double time);

// Work done on the bodies over one step of dt from `start` (per body, the state at the
// step's start) to the current state, J, by what a script drives:
//   loads and pressure, on the free nodes: sum_i (F_i(t0) + F_i(t1)) / 2 . (x_i(t1) - x_i(t0))
//     (trapezoidal; a load on a pinned node works on its pin, not on the body);
//   moving pins: (P(t0) + P(t1)) / 2 dt, P = sum_pinned dU/dx_i . v_i (Body::pinPower), the
//     energy they feed into the elastic and contact energy, plus the kinetic and
//     gravitational energy of the pinned nodes themselves, which only the pins change.
// Second order in dt for smooth paths and forces; static pins do no work.
//   scripted obstacles: penalty ones (P_o(t0) + P_o(t1)) / 2 dt (World::obstaclePower, the
//     power at the start given as startObstaclePower), projection ones World::projectionWork.
[[nodiscard]] double stepWork(const World& world, std::span<const BodyKinematics> start,
                              double startObstaclePower, double dt);

// Kinetic energy of a body, J.
[[nodiscard]] double kineticEnergy(const Body& body);
// Gravitational potential energy of a body, -sum m g.x, J (zero at the origin).
[[nodiscard]] double gravitationalEnergy(const Body& body, const Vec3& gravity);

// An energy bound: with non-negative damping, the total energy (kinetic + elastic +
// gravitational + contact + thrown obstacles) can only fall, up to the integrator's O(dt^2)
// oscillation, except by the work that loads, pressure, moving pins and scripted obstacles
// do (World::externalWork, stepWork). A run whose energy rises above its start plus that
// work by more than kEnergyGrowthLimit times the energy scale (initial kinetic + elastic
// energy plus the work gravity would do over the bodies' extent, plus the magnitude of the
// scripted work: its accounting is second order in the step, not exact) has blown up, even
// if no node is fast.
inline constexpr double kEnergyGrowthLimit = 0.5;

class EnergyGuard {
 public:
  // Records the initial energy and work; disabled when a body has negative damping.
  explicit EnergyGuard(const World& world);
  // Throws NumericalError naming the body whose energy rose the most.
  void check(const World& world) const;
  [[nodiscard]] bool enabled() const { return enabled_; }
  // Its values, to put the same guard back from a checkpoint.
  struct Values {
    bool enabled = false;
    double initialEnergy = 0;         // J
    double scale = 0;                 // J
    double initialWork = 0;           // World::externalWork then, J
    double initialWorkMagnitude = 0;  // World::externalWorkMagnitude then, J
  };
  [[nodiscard]] Values values() const {
    return {enabled_, initialEnergy_, scale_, initialWork_, initialWorkMagnitude_};
  }
  explicit EnergyGuard(const Values& values)
      : enabled_(values.enabled),
        initialEnergy_(values.initialEnergy),
        scale_(values.scale),
        initialWork_(values.initialWork),
        initialWorkMagnitude_(values.initialWorkMagnitude) {}

 private:
  bool enabled_ = false;
  double initialEnergy_ = 0;         // J
  double scale_ = 0;                 // J
  double initialWork_ = 0;           // J
  double initialWorkMagnitude_ = 0;  // J
};

// Total energy of the world, J: kinetic + elastic + gravitational + contact penalty.
[[nodiscard]] double totalEnergy(const World& world);

// Throws NumericalError if any position or velocity is not finite or a node is faster
// than kMaxNodeSpeed; the message names the body, the node and the time.
void checkState(const World& world);

}  // namespace shellsim
