// Contact between body nodes and the scene's analytic obstacles.
#pragma once

#include <span>

#include "core/vec3.hpp"
#include "dynamics/world.hpp"

namespace shellsim {

// Signed distance from p to the obstacle surface (negative inside the solid), m, and
// the outward unit normal of the closest surface point. `offset` is the obstacle's
// scripted displacement at the current time.
double obstacleSignedDistance(const ObstacleDef& obstacle, const Vec3& offset, const Vec3& p,
                              Vec3* normal);

// Contact is resolved in two phases around the force evaluation of a step:
//
// 1. After the drift, every free node inside an obstacle is projected back onto its
//    surface; the node remembers the obstacle and the contact normal. Static friction acts
//    here, on the step's displacement d = v dt relative to the obstacle (v the velocity the
//    drift used): where its tangential part d_t is within the friction cone of the
//    penetration p, |d_t| <= friction * p, the node sticks (d_t is undone), as position-based
//    friction does (Macklin et al. 2014, "Unified particle physics for real-time
//    applications", its friction model), and its velocity along the obstacle becomes the
//    obstacle's (d_t / dt is taken off: position-based dynamics derives the velocity from
//    the corrected move). A node at rest on a slope below the friction angle then stays
//    where it is: the drift's a dt^2 / 2 would otherwise creep it down the slope step after
//    step (0.27 m per million steps of 0.4 ms on 20 degrees). Undoing the move but keeping
//    the velocity let a tangential pull build the velocity up unseen while the node stayed,
//    until the cone gave and it jumped: a sheet draped over a sphere onto the floor chattered
//    for ever (kinetic energy up to 1.3e-3 J from 105 to 422 s, RestSlow).
// 2. After the closing half kick, the velocity of each node in contact is filtered: its
//    approaching normal velocity relative to the obstacle is reversed and scaled by the
//    restitution, and its tangential velocity is reduced by Coulomb friction,
//    |dv_t| <= friction * |dv_n|, never reversing it.
// Filtering after the kick (not before it) lets a node resting on a floor end the step
// with zero normal velocity instead of the velocity gravity gave it in the last half kick.
// Returns the number of nodes in contact.
// Both leave obstacles with the penalty response to their springs, except that
// projectOutOfObstacles also undoes, the same way, the tangential slip of a node held by a
// still penalty obstacle's friction (within mu s depth dt^2 / 2, the slip a stuck node's
// tangential acceleration a_t <= mu s depth gives it in one drift).
int64_t projectOutOfObstacles(World& world, double dt);
// Moves each point of `positions` ((n, 3), m) that lies inside an obstacle (any response)
// onto the obstacle's surface, along its normal: for drawn surfaces, not for nodes.
void keepOutOfObstacles(const World& world, std::span<double> positions);
// (The velocity changes against a scripted obstacle add their work, m dv . velocity, to
// world.projectionWork.)
void applyContactVelocities(World& world);

// Penalty obstacles (ObstacleResponse::kPenalty; gingold2004 section 4.3, where the floor,
// boxes and projectiles share the meshes' penalty). For every free node i of a body and
// every penalty obstacle with signed distance phi_i < delta at x:
//   E = sum_i 1/2 k_i (delta - phi_i)^2,  k_i = s_o m_i  (s_o = stiffnessPerMassOf
//   obstacle o: its own kappa, ObstacleDef::stiffness, or the meshes'),
//   dE/dx_i = -k_i (delta - phi_i) n_i  (grad phi = n wherever phi is differentiable),
//   Gauss-Newton Hessian block k_i n_i n_i^T. The exact Hessian adds
//   -k_i (delta - phi_i) Hess(phi), negative semidefinite for the convex shapes (plane,
//   sphere, box); left out, the blocks stay positive semidefinite for Newton.
// The spring is conservative: its energy is part of World::contactEnergy.
struct ObstaclePenalty {
  std::span<const Obstacle> obstacles;  // all of the world's; projection ones are skipped
  double time = 0;                      // s, where the scripted obstacles are
  double stiffnessPerMass = 0;          // s_o of an obstacle without its own kappa, 1/s^2
  double stiffnessPerKappa = 0;         // 1 / dt_s^2, 1/s^2: s_o = kappa_o times this
  double clearance = 0;                 // delta, m

  // s_o of one obstacle, 1/s^2: its own kappa (ObstacleDef::stiffness) or the meshes'.
  [[nodiscard]] double stiffnessPerMassOf(const ObstacleDef& obstacle) const {
    return obstacle.stiffness > 0 ? obstacle.stiffness * stiffnessPerKappa : stiffnessPerMass;
  }
};
[[nodiscard]] bool hasPenaltyObstacles(const World& world);
// The world's penalty obstacles touching `body` (its clearance), or any body (clearance 0,
// for what needs only the springs' stiffness).
[[nodiscard]] ObstaclePenalty obstaclePenalty(const World& world, const Body& body);
[[nodiscard]] ObstaclePenalty obstaclePenalty(const World& world);
// E at the body's positions x, (nNodes, 3); adds dE/dx into `gradient` and the
// Gauss-Newton blocks into `diagonal`, (nNodes, 3, 3), and the springs' forces on each
// obstacle, -k_i (delta - phi_i) n_i (= -dE/d offset), into `reactions`, (nObstacles),
// each where not empty. The sums are the same on any number of threads.
double addObstaclePenalty(const ObstaclePenalty& penalty, const Body& body,
                          std::span<const double> x, std::span<double> gradient,
                          std::span<double> diagonal, std::span<Vec3> reactions = {});
// The penalty's dissipation, after a step of dt: for a free node within delta of a penalty
// obstacle, the normal velocity relative to the obstacle decays as a linear damper of
// ratio zeta on the spring's frequency w = sqrt(s) integrates it exactly,
// v_n <- v_n exp(-2 zeta w dt), zeta = -ln e / sqrt(pi^2 + ln^2 e) (a spring-damper
// contact then rebounds with restitution e; e = 0 gives zeta = 1); the tangential velocity
// loses at most friction times the spring's normal impulse per mass, s (delta - phi) dt,
// never reversing (Coulomb). The momentum the nodes lose goes to a thrown obstacle (the
// damper sees it as infinitely heavy within the step: projectiles are much heavier than
// the nodes they touch).
// The velocity changes against a scripted obstacle add their work to world.projectionWork.
void dampObstaclePenalty(World& world, double dt);

// Thrown obstacles (ObstacleDef::mass > 0) step by velocity Verlet with the bodies: a half
// kick v += dt/2 a and a drift x += dt v before the force evaluation, which sets
// a = g + (sum of the penalty reactions) / mass (computeAccelerations), a half kick after.
void kickFreeObstacles(World& world, double dt);
void driftFreeObstacles(World& world, double dt);
// Thrown obstacles against the other obstacles (static, scripted or thrown), after the
// drift: a pair that overlaps by d along its contact normal n is pushed apart by d (each
// side by its share of the inverse masses; a static or scripted obstacle does not move), and
// where it approaches, (v_a - v_b) . n = v_n < 0, gets the normal impulse
// j = -(1 + e) v_n / (w_a + w_b) (w the inverse masses, 0 for one that is not thrown) and a
// Coulomb friction impulse up to mu j that never reverses the sliding. [ours: e the larger of
// the two restitutions and mu the geometric mean of the frictions, as Box2D combines them]
// Pairs in index order, four sweeps (a ball resting on a box on the floor): the same result
// on any number of threads. Shapes: sphere and axis-aligned box against a plane, a sphere or a
// box (two planes never meet). A scripted obstacle's impulse adds its work to
// world.projectionWork. Returns the number of touching pairs in the last sweep.
int collideFreeObstacles(World& world);
// The kinetic and gravitational energy of the thrown obstacles, J (the latter zero where
// they started).
[[nodiscard]] double freeObstacleEnergy(const World& world);

}  // namespace shellsim
