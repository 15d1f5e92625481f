// Contact between body nodes and the scene's analytic obstacles.
#pragma once

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
//    surface; the node remembers the obstacle and the contact normal.
// 2. After the closing half kick, the velocity of each node in contact is filtered: its
//    approaching normal velocity relative to the obstacle is reversed and scaled by the
//    restitution, and its tangential velocity is reduced by Coulomb friction,
//    |dv_t| <= friction * |dv_n|, never reversing it.
// Filtering after the kick (not before it) lets a node resting on a floor end the step
// with zero normal velocity instead of the velocity gravity gave it in the last half kick.
// Returns the number of nodes in contact.
int64_t projectOutOfObstacles(World& world);
void applyContactVelocities(World& world);

}  // namespace shellsim
