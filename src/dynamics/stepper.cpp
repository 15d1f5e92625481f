#include "dynamics/stepper.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "core/assembler.hpp"
#include "core/rigid_motion.hpp"
#include "core/vec3.hpp"
#include "dynamics/contact.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

template <class Function>
void forEachNode(const Body& body, const Function& function) {
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, static_cast<size_t>(body.nodeCount()), kAssemblyGrain),
      [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) function(i);
      });
}

// v <- exp(-c dt/2) (v + dt/2 a) on free nodes; with kDrift then x <- x + dt v, in the same
// pass over the nodes.
template <bool kDrift = false>
void halfKick(Body& body, double dt) {
  const double decay = std::exp(-body.damping * 0.5 * dt);
  forEachNode(body, [&](size_t i) {
    if (body.pinned[i]) return;
    for (size_t c = 3 * i; c < 3 * i + 3; ++c) {
      body.velocities[c] = decay * (body.velocities[c] + 0.5 * dt * body.accelerations[c]);
      if constexpr (kDrift) body.positions[c] += dt * body.velocities[c];
    }
  });
}

// Scripted nodes follow their paths exactly: position and velocity at `time`. A pin past its
// release has let go (its nodes keep their velocity).
void moveScriptedNodes(Body& body, double time) {
  holdPinsAt(body, time);
  for (const PinGroup& pin : body.pins) {
    if (!pin.holding) continue;
    const Vec3 offset = pin.path.offset(time);
    const Vec3 velocity = pin.path.velocity(time);
    for (size_t k = 0; k < pin.nodes.size(); ++k) {
      const size_t node = static_cast<size_t>(pin.nodes[k]);
      for (int c = 0; c < 3; ++c) {
        body.positions[3 * node + c] = pin.restPositions[3 * k + c] + offset[c];
        body.velocities[3 * node + c] = velocity[c];
      }
    }
  }
}

}  // namespace

void dampInternalMotion(World& world, double dt) {
  for (Body& body : world.bodies) {
    if (!(body.internalDamping > 0)) continue;
    const double keep = std::exp(-body.internalDamping * dt);
    const std::vector<int32_t> pieces = body.model->nodePieces();
    const auto n = static_cast<size_t>(body.nodeCount());
    const auto pieceOf = [&](size_t i) {
      return pieces.empty() ? size_t{0} : static_cast<size_t>(pieces[i]);
    };
    const auto mass = body.model->nodeMasses();
    // The rigid motion of each piece's free nodes, summed in node order.
    std::vector<RigidMotionFit> fits(static_cast<size_t>(pieceCount(pieces)));
    for (size_t i = 0; i < n; ++i) {
      if (!body.pinned[i])
        fits[pieceOf(i)].add(mass[i], row(body.positions, i), row(body.velocities, i));
    }
    for (RigidMotionFit& fit : fits) fit.centre();
    for (size_t i = 0; i < n; ++i) {
      if (!body.pinned[i]) {
        fits[pieceOf(i)].addAbout(mass[i], row(body.positions, i), row(body.velocities, i));
      }
    }
    std::vector<RigidMotion> rigid;
    rigid.reserve(fits.size());
    for (const RigidMotionFit& fit : fits) rigid.push_back(fit.finish());
    forEachNode(body, [&](size_t i) {
      if (body.pinned[i]) return;
      const Vec3 rigidVelocity = rigid[pieceOf(i)].velocityAt(row(body.positions, i));
      setRow(body.velocities, i, rigidVelocity + keep * (row(body.velocities, i) - rigidVelocity));
    });
  }
}

void holdPinsAt(Body& body, double time) {
  bool changed = false;
  for (PinGroup& pin : body.pins) {
    const bool holding = time < pin.release;
    changed = changed || holding != pin.holding;
    pin.holding = holding;
  }
  if (changed) refreshPinned(body);
}

void applyScriptedMotion(World& world) {
  for (Body& body : world.bodies) moveScriptedNodes(body, world.time);
}

void triangleAreaVectors(std::span<const double> positions, std::span<const int32_t> triangles,
                         std::span<double> area) {
  std::fill(area.begin(), area.end(), 0.0);
  for (size_t t = 0; t + 2 < triangles.size(); t += 3) {
    const auto a = static_cast<size_t>(triangles[t]);
    const auto b = static_cast<size_t>(triangles[t + 1]);
    const auto c = static_cast<size_t>(triangles[t + 2]);
    const Eigen::Map<const Vec3> pa(&positions[3 * a]), pb(&positions[3 * b]),
        pc(&positions[3 * c]);
    const Vec3 third = (pb - pa).cross(pc - pa) / 6.0;
    for (const size_t v : {a, b, c}) {
      for (int k = 0; k < 3; ++k) area[3 * v + k] += third[k];
    }
  }
}

namespace {

// Each node's area vector on the body's current shape, (nNodes, 3), m^2: the model's own, or
// a third of each triangle's of PressureLoad::triangles per corner.
void pressureAreaVectors(const Body& body, std::vector<double>& area) {
  area.assign(body.positions.size(), 0.0);
  if (body.model->nodeAreaVectors(body.positions, area)) return;
  triangleAreaVectors(body.positions, body.pressure->triangles, area);
}

// The sealed gas's over-pressure at the body's current shape (Boyle: p_abs = gas / V),
// Pa; none once the enclosure has turned inside out or the gas is at ambient.
double sealedOverPressure(const PressureLoad& load, const EnclosedGas& enclosure) {
  if (enclosure.volume <= 0) return 0.0;
  return std::max(load.gas / enclosure.volume - load.ambientPressure, 0.0);
}

// What the sealed gas pushes the shell with, Pa: Boyle's over-pressure, but through the
// shell's openings the gas only leaves, so no more than its lowest since sealing
// (PressureLoad::ventedFloor). ventSealedGas holds the gas there after each step; within a
// step the shell moves first, and a torn skin whose measured volume shrank by a share s
// since pushed with about s times the ambient pressure (1 kPa a percent): in fiber_balloon
// at 50 us steps one such step threw 429 nodes of the burst skin out at up to 207 m/s
// (kinetic energy 0.3 -> 20 J, no fiber stretched past 2).
double pushingOverPressure(const PressureLoad& load, const EnclosedGas& enclosure) {
  return std::min(sealedOverPressure(load, enclosure), load.ventedFloor);
}

// The sealed gas after dt of flow out of `enclosure`'s openings, Pa m^3.
double ventedGas(double gas, const EnclosedGas& enclosure, const PressureLoad& load, double dt) {
  // Bernoulli through the openings, Q = C_d A sqrt(2 dp / rho) (m^3/s at the inside state);
  // the gas leaving takes p_abs Q of p V per second: gas' = -(gas / V) Q. Backward Euler in
  // dp, exact in the exponential: gas' = gas exp(-Q(dp') dt / V) with dp' = gas' / V - p_a.
  // Explicit in dp, a wide opening on a shell crushed within a step overshot: 13 kPa in a
  // 50 Pa balloon. In s = sqrt(dp'), g(s) = (p_a + s^2) V - gas exp(-k s) = 0 with
  // k = C_d A sqrt(2 / rho) dt / V: g rises from g(0) < 0 (gas above ambient) to
  // g(sqrt(gas / V - p_a)) >= 0, one root, found by Newton kept inside the bracket.
  const double volume = enclosure.volume;
  const double held = gas / volume - load.ambientPressure;  // dp with nothing flowing out
  if (!(held > 0) || !(enclosure.openingArea > 0)) return gas;
  const double k = load.dischargeCoefficient * enclosure.openingArea *
                   std::sqrt(2.0 / load.gasDensity) * dt / volume;
  const auto g = [&](double s) {
    return (load.ambientPressure + s * s) * volume - gas * std::exp(-k * s);
  };
  double lo = 0, hi = std::sqrt(held), s = hi;
  for (int iteration = 0; iteration < 100; ++iteration) {
    const double value = g(s);
    if (value == 0) break;
    (value < 0 ? lo : hi) = s;
    const double slope = 2 * s * volume + gas * k * std::exp(-k * s);
    double next = s - value / slope;
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    const bool converged = std::abs(next - s) <= 1e-14 * std::max(s, 1.0);
    s = next;
    if (converged) break;
  }
  return (load.ambientPressure + s * s) * volume;
}

}  // namespace

EnclosedGas measureEnclosedGas(std::span<const double> positions, std::span<const double> area,
                               std::span<const double> mass, double closedResidue) {
  const size_t n = mass.size();
  Vec3 centre = Vec3::Zero();
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    centre += mass[i] * Vec3(positions[3 * i], positions[3 * i + 1], positions[3 * i + 2]);
    total += mass[i];
  }
  if (total > 0) centre /= total;
  // V = 1/3 sum_i (x_i - c) . A_i (divergence theorem; on a closed surface independent of c,
  // on a torn one the openings' own share, about 1/3 r A_hole, is missing).
  EnclosedGas out;
  Vec3 sum = Vec3::Zero();
  double lengths = 0;
  for (size_t i = 0; i < n; ++i) {
    const Vec3 a(area[3 * i], area[3 * i + 1], area[3 * i + 2]);
    const Vec3 x(positions[3 * i], positions[3 * i + 1], positions[3 * i + 2]);
    out.volume += (x - centre).dot(a) / 3.0;
    sum += a;
    lengths += a.norm();
  }
  // A closed surface's area vectors sum to zero, a surface with openings to minus the area
  // vector of the patches that would close them: for one plane opening, its area. What is
  // left under 1e-12 of the surface's area is the sums' rounding (the residue, |sum| / lengths
  // at rest, times lengths is |sum| only to rounding), not an opening.
  const double opening = sum.norm() - closedResidue * lengths;
  out.openingArea = opening > 1e-12 * lengths ? opening : 0.0;
  return out;
}

EnclosedGas measureEnclosure(const Body& body) {
  std::vector<double> area;
  pressureAreaVectors(body, area);
  return measureEnclosedGas(body.positions, area, body.model->nodeMasses(),
                            body.pressure->closedResidue);
}

double currentOverPressure(const Body& body, double time) {
  if (!body.pressure) return 0.0;
  const PressureLoad& load = *body.pressure;
  if (!load.sealed()) return load.pressure * load.ramp.value(time) * load.remainingShare(time);
  return pushingOverPressure(load, measureEnclosure(body));
}

void ventSealedGas(Body& body, double time, double dt, const EnclosedGas* beforeUpdate,
                   bool edited) {
  if (!body.pressure || !body.pressure->releaseOnFracture ||
      body.pressure->vent != VentModel::kOrifice || body.crackCount() == 0) {
    return;
  }
  PressureLoad& load = *body.pressure;
  // Without an edit the update moved nothing the measure reads: the enclosure is the same.
  const EnclosedGas enclosure =
      beforeUpdate != nullptr && !edited ? *beforeUpdate : measureEnclosure(body);
  if (load.gas < 0) {  // the first crack: what the pump put in stays in
    const double over = load.pressure * load.ramp.value(time);
    load.gas = enclosure.volume > 0 ? (load.ambientPressure + over) * enclosure.volume : 0.0;
    return;
  }
  if (enclosure.volume <= 0) {
    load.gas = 0;
    return;
  }
  // A crack or a broken element changes area vectors near it at once, hence the measured
  // volume, not the gas: its pressure carries over the edit.
  if (beforeUpdate != nullptr && edited) {
    load.gas = (load.ambientPressure + sealedOverPressure(load, *beforeUpdate)) * enclosure.volume;
  }
  load.gas = ventedGas(load.gas, enclosure, load, dt);
  // Through an opening the gas only leaves: a torn skin that crumples does not compress it
  // (its measured V falls; in fiber_balloon with a crack-tip rule, the burst skin's
  // over-pressure read 0, 403, 0, then 8,130 Pa 5 ms apart and the skin blew up). The
  // over-pressure is kept at or under its lowest since sealing.
  const double over = sealedOverPressure(load, enclosure);
  if (over > load.ventedFloor) {
    load.gas = (load.ambientPressure + load.ventedFloor) * enclosure.volume;
  }
  load.ventedFloor = std::min(load.ventedFloor, over);
}

void updateExternalForces(World& world) {
  for (Body& body : world.bodies) {
    if (!body.hasLoads()) continue;
    std::vector<double>& force = body.externalForces;
    std::fill(force.begin(), force.end(), 0.0);
    for (const LoadGroup& load : body.loads) {
      const Vec3 total = load.ramp.value(world.time) * load.force;
      for (size_t k = 0; k < load.nodes.size(); ++k) {
        const auto node = static_cast<size_t>(load.nodes[k]);
        for (int c = 0; c < 3; ++c) force[3 * node + c] += load.shares[k] * total[c];
      }
    }
    if (!body.pressure) continue;
    const PressureLoad& load = *body.pressure;
    double pressure = load.pressure * load.ramp.value(world.time) * load.remainingShare(world.time);
    if (pressure == 0 && !load.sealed()) continue;
    const size_t n = static_cast<size_t>(body.nodeCount());
    std::vector<double> area;
    pressureAreaVectors(body, area);
    const auto mass = body.model->nodeMasses();
    if (load.sealed()) {
      pressure = pushingOverPressure(
          load, measureEnclosedGas(body.positions, area, mass, load.closedResidue));
      if (pressure == 0) continue;
    }
    // A closed shell's pressure is internal to it and its gas: its exact net force and
    // torque are zero. The sampled ones are not (a point-sampled surface's area vectors need
    // not close), so both are taken off as a rigid acceleration; an open surface keeps them
    // (PressureLoad::closed).
    for (double& value : area) value *= pressure;
    if (body.pressure->closed) removeRigidPart(mass, body.positions, area);
    for (size_t i = 0; i < 3 * n; ++i) force[i] += area[i];
  }
}

void computeAccelerations(World& world) {
  computeAccelerations(world, {});
}

void computeAccelerations(World& world, std::span<const KnownGradient> known) {
  updateExternalForces(world);
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    Body& body = world.bodies[b];
    const bool stale = body.model->prepare(body.positions);
    if (b < known.size() && known[b].valid && !stale) {
      std::copy(known[b].gradient.begin(), known[b].gradient.end(), body.accelerations.begin());
      body.elastic = known[b].energy;
    } else {
      std::fill(body.accelerations.begin(), body.accelerations.end(), 0.0);
      body.elastic = body.model->addGradient(body.positions, body.accelerations, workspaceOf(body));
    }
  }
  world.contactEnergy = 0;
  world.obstaclePower = 0;
  if (world.contact.enabled()) {
    // The contacts at these positions, their penalty gradient added to the elastic one.
    world.contact.findPairs(world.bodies, 0.0, world.contactPairs);
    std::vector<std::span<double>> gradients;
    for (Body& body : world.bodies) gradients.emplace_back(body.accelerations);
    world.contactEnergy = addContactGradient(world.contactPairs, world.bodies, gradients);
  }
  if (hasPenaltyObstacles(world)) {
    std::vector<Vec3> reactions(world.obstacles.size(), Vec3::Zero());
    for (Body& body : world.bodies) {
      world.contactEnergy += addObstaclePenalty(obstaclePenalty(world, body), body, body.positions,
                                                body.accelerations, {}, reactions);
    }
    for (size_t o = 0; o < world.obstacles.size(); ++o) {
      Obstacle& obstacle = world.obstacles[o];
      if (obstacle.isFree())
        obstacle.free.acceleration = world.gravity + reactions[o] / obstacle.def.mass;
      if (obstacle.isDriven()) {
        world.obstaclePower -= reactions[o].dot(obstacle.velocity(world.time));
      }
    }
  }
  for (Body& body : world.bodies) {
    // accelerations holds dU/dx here. Serial: the same sum for any thread count.
    body.pinPower = 0;
    if (body.hasMovingPins()) {
      for (size_t i = 0; i < body.pinned.size(); ++i) {
        if (body.pinned[i] == 0) continue;
        for (size_t c = 3 * i; c < 3 * i + 3; ++c) {
          body.pinPower += body.accelerations[c] * body.velocities[c];
        }
      }
    }
    const auto mass = body.model->nodeMasses();
    const bool loaded = !body.externalForces.empty();
    forEachNode(body, [&](size_t i) {
      for (int c = 0; c < 3; ++c) {
        double& a = body.accelerations[3 * i + c];
        const double external = loaded ? body.externalForces[3 * i + c] : 0.0;
        a = body.pinned[i] ? 0.0 : (external - a) / mass[i] + world.gravity[c];
      }
    });
  }
}

void updateInelastic(World& world, double dt, PhaseTimes& times) {
  bool changed = false;
  {
    PhaseTimer timer(times.inelastic);
    for (Body& body : world.bodies) {
      // A sealed gas's enclosure before the update (ventSealedGas).
      std::optional<EnclosedGas> beforeUpdate;
      if (body.pressure && body.pressure->sealed()) beforeUpdate = measureEnclosure(body);
      if (body.model->changesNodeCount()) body.model->setWorldMovedNodes(worldMovedNodes(body));
      const InelasticReport report =
          body.model->updateInelastic(body.positions, dt, workspaceOf(body));
      body.brokenElements += report.brokenElements;
      if (!report.edit.empty()) applyTopologyEdit(body, report.edit);
      if (body.pressure && body.crackCount() > 0 &&
          body.pressure->ventStart == PressureLoad::kNotVented) {
        body.pressure->ventStart = world.time;  // the gas starts to escape
      }
      const bool separated = report.brokenElements > 0 || !report.edit.empty();
      ventSealedGas(body, world.time, dt, beforeUpdate ? &*beforeUpdate : nullptr, separated);
      if (separated) separateEmbeddedPieces(body);
      changed |= separated;
    }
    // Rigid fragments: moved by Bullet over the step, then the pieces that qualify now
    // handed over. Only mesh contact sees the moved nodes (the rest of the forces ignore
    // driven nodes, and a fragment's own elements keep their energy under a rigid motion).
    const bool rigidMoved = world.rigid.advance(world, dt);
    changed |= rigidMoved && world.contact.enabled();
  }
  if (changed) {
    PhaseTimer timer(times.forces);
    computeAccelerations(world);
  }
}

void step(World& world, double dt, PhaseTimes& times) {
  proposeStep(world, dt, times);
  updateInelastic(world, dt, times);
}

void proposeStep(World& world, double dt, PhaseTimes& times) {
  {
    PhaseTimer timer(times.integrate);
    for (Body& body : world.bodies) halfKick</*kDrift=*/true>(body, dt);
    kickFreeObstacles(world, 0.5 * dt);
    driftFreeObstacles(world, dt);
    world.time += dt;
    applyScriptedMotion(world);
    collideFreeObstacles(world);
  }
  {
    PhaseTimer timer(times.contact);
    projectOutOfObstacles(world, dt);
  }
  {
    PhaseTimer timer(times.forces);
    computeAccelerations(world);
  }
  {
    PhaseTimer timer(times.integrate);
    for (Body& body : world.bodies) halfKick(body, dt);
    kickFreeObstacles(world, 0.5 * dt);
  }
  {
    PhaseTimer timer(times.contact);
    applyContactVelocities(world);
    dampObstaclePenalty(world, dt);
  }
  {
    PhaseTimer timer(times.checks);
    checkState(world);
  }
}

double stepWork(const World& world, std::span<const BodyKinematics> start,
                double startObstaclePower, double dt) {
  double work = 0.5 * (startObstaclePower + world.obstaclePower) * dt + world.projectionWork;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    const Body& body = world.bodies[b];
    const BodyKinematics& before = start[b];
    if (!body.externalForces.empty() && before.externalForces.size() == body.positions.size()) {
      for (size_t i = 0; i < body.pinned.size(); ++i) {
        if (body.pinned[i] != 0) continue;
        for (size_t c = 3 * i; c < 3 * i + 3; ++c) {
          work += 0.5 * (before.externalForces[c] + body.externalForces[c]) *
                  (body.positions[c] - before.positions[c]);
        }
      }
    }
    if (!body.hasMovingPins()) continue;  // static pins: zero velocity, zero displacement
    work += 0.5 * (before.pinPower + body.pinPower) * dt;
    const auto mass = body.model->nodeMasses();
    for (size_t i = 0; i < body.pinned.size(); ++i) {
      if (body.pinned[i] == 0) continue;
      const Eigen::Map<const Vec3> x0(&before.positions[3 * i]), x1(&body.positions[3 * i]);
      const Eigen::Map<const Vec3> v0(&before.velocities[3 * i]), v1(&body.velocities[3 * i]);
      work += 0.5 * mass[i] * (v1.squaredNorm() - v0.squaredNorm()) -
              mass[i] * world.gravity.dot(x1 - x0);
    }
  }
  return work;
}

double kineticEnergy(const Body& body) {
  const auto mass = body.model->nodeMasses();
  double energy = 0;
  for (size_t i = 0; i < mass.size(); ++i) {
    const Eigen::Map<const Vec3> v(&body.velocities[3 * i]);
    energy += 0.5 * mass[i] * v.squaredNorm();
  }
  return energy;
}

double gravitationalEnergy(const Body& body, const Vec3& gravity) {
  const auto mass = body.model->nodeMasses();
  double energy = 0;
  for (size_t i = 0; i < mass.size(); ++i) {
    const Eigen::Map<const Vec3> x(&body.positions[3 * i]);
    energy -= mass[i] * gravity.dot(x);
  }
  return energy;
}

void checkState(const World& world) {
  for (const Body& body : world.bodies) {
    const size_t n = static_cast<size_t>(body.nodeCount());
    for (size_t i = 0; i < n; ++i) {
      const Eigen::Map<const Vec3> x(&body.positions[3 * i]);
      const Eigen::Map<const Vec3> v(&body.velocities[3 * i]);
      const char* problem = nullptr;
      if (!x.allFinite()) {
        problem = "position is not finite";
      } else if (!v.allFinite()) {
        problem = "velocity is not finite";
      } else if (v.squaredNorm() > kMaxNodeSpeed * kMaxNodeSpeed) {
        problem = "speed exceeds 1000 m/s (the simulation blew up; try a smaller time_step)";
      }
      if (problem != nullptr) {
        std::ostringstream msg;
        msg << "body '" << body.name << "', node " << i << ": " << problem
            << " at t = " << world.time << " s";
        throw NumericalError(msg.str());
      }
    }
  }
}

double totalEnergy(const World& world) {
  double energy = world.contactEnergy + freeObstacleEnergy(world);
  for (const Body& body : world.bodies) {
    energy += kineticEnergy(body) + body.elastic.total() + gravitationalEnergy(body, world.gravity);
  }
  return energy;
}

EnergyGuard::EnergyGuard(const World& world) {
  enabled_ = true;
  for (const Body& body : world.bodies) enabled_ &= body.damping >= 0;
  initialEnergy_ = totalEnergy(world);
  initialWork_ = world.externalWork;
  initialWorkMagnitude_ = world.externalWorkMagnitude;
  const double g = world.gravity.norm();
  for (const Body& body : world.bodies) {
    Vec3 lo = Vec3::Constant(std::numeric_limits<double>::infinity());
    Vec3 hi = -lo;
    for (size_t i = 0; i < body.positions.size(); i += 3) {
      const Vec3 p(body.positions[i], body.positions[i + 1], body.positions[i + 2]);
      lo = lo.cwiseMin(p);
      hi = hi.cwiseMax(p);
    }
    double mass = 0;
    for (double m : body.model->nodeMasses()) mass += m;
    scale_ += kineticEnergy(body) + body.elastic.total() + mass * g * (hi - lo).norm();
  }
  scale_ = std::max(scale_, std::numeric_limits<double>::min());
}

void EnergyGuard::check(const World& world) const {
  if (!enabled_) return;
  const double energy = totalEnergy(world);
  // Energy the models' discretization changes added (resampling), counted as put in, with a
  // tolerance growing with it as with the work. Since the run started: a guard is made at the
  // first advance, when the models have added nothing yet (a resumed run puts back both).
  double added = 0;
  for (const Body& body : world.bodies) added += body.model->addedEnergy();
  const double work = world.externalWork - initialWork_ + added;
  const double bound = kEnergyGrowthLimit * (scale_ + world.externalWorkMagnitude -
                                             initialWorkMagnitude_ + std::abs(added));
  if (energy - initialEnergy_ - work <= bound) return;
  std::ostringstream msg;
  msg << "the total energy rose from " << initialEnergy_ << " J to " << energy
      << " J at t = " << world.time << " s";
  if (work != 0) {
    msg << ", of which the loads and moving pins did " << work - added << " J";
    if (added != 0) msg << " and resampling added " << added << " J";
  }
  msg << ": more than the bound of " << bound
      << " J above what the scene put in (the simulation blew up)";
  throw NumericalError(msg.str());
}

}  // namespace shellsim
