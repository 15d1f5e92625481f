#include "dynamics/contact.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "core/assembler.hpp"

namespace shellsim {

double obstacleSignedDistance(const ObstacleDef& obstacle, const Vec3& offset, const Vec3& p,
                              Vec3* normal) {
  switch (obstacle.type) {
    case ObstacleType::kPlane: {
      const Vec3 n(obstacle.normal[0], obstacle.normal[1], obstacle.normal[2]);
      const Vec3 point = Vec3(obstacle.point[0], obstacle.point[1], obstacle.point[2]) + offset;
      *normal = n;
      return (p - point).dot(n);
    }
    case ObstacleType::kSphere: {
      const Vec3 c = Vec3(obstacle.center[0], obstacle.center[1], obstacle.center[2]) + offset;
      const Vec3 d = p - c;
      const double r = d.norm();
      *normal = r > 0.0 ? Vec3(d / r) : Vec3(0, 0, 1);
      return r - obstacle.radius;
    }
    case ObstacleType::kBox: {
      // Distance to a solid axis-aligned box: outside, the distance to the clamped point;
      // inside, minus the distance to the nearest face, whose normal pushes the node out.
      const Vec3 c = Vec3(obstacle.center[0], obstacle.center[1], obstacle.center[2]) + offset;
      const Vec3 h(obstacle.halfExtents[0], obstacle.halfExtents[1], obstacle.halfExtents[2]);
      const Vec3 d = p - c;
      const Vec3 q = d.cwiseAbs() - h;
      if (q.maxCoeff() > 0.0) {
        const Vec3 outside = q.cwiseMax(0.0);
        Vec3 n = Vec3::Zero();
        for (int i = 0; i < 3; ++i) n[i] = outside[i] * (d[i] < 0 ? -1.0 : 1.0);
        const double dist = n.norm();
        *normal = n / dist;
        return dist;
      }
      int axis = 0;
      q.maxCoeff(&axis);
      *normal = Vec3::Zero();
      (*normal)[axis] = d[axis] < 0 ? -1.0 : 1.0;
      return q[axis];
    }
  }
  *normal = Vec3(0, 0, 1);
  return 0.0;
}

void keepOutOfObstacles(const World& world, std::span<double> positions) {
  for (const Obstacle& obstacle : world.obstacles) {
    const Vec3 offset = obstacle.offset(world.time);
    // Each point on its own: no shared writes.
    tbb::parallel_for(tbb::blocked_range<size_t>(0, positions.size() / 3, kAssemblyGrain),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i != r.end(); ++i) {
                          Eigen::Map<Vec3> x(&positions[3 * i]);
                          Vec3 normal;
                          const double phi =
                              obstacleSignedDistance(obstacle.def, offset, x, &normal);
                          if (phi < 0.0) x -= phi * normal;
                        }
                      });
  }
}

namespace {

// Static friction on a still penalty obstacle (the position half of it; dampObstaclePenalty's
// Coulomb filter is the velocity half). A node within the clearance, depth = delta - phi > 0,
// is pressed with s depth per mass, so friction can hold a tangential acceleration up to
// mu s depth. A node that stuck last step has drifted a_t dt^2 / 2 along the obstacle since:
// if that slip is within mu s depth dt^2 / 2 it is undone, as for a projection obstacle.
// Without it a node resting on a slope below the friction angle crept a_t dt^2 / 2 per step
// (2.1 mm in 0.5 s on 20 degrees with friction 0.5).
void stickToPenaltyObstacle(const World& world, Body& body, const Obstacle& obstacle, double dt) {
  // Only still obstacles: a moving one (an impactor punching through a sheet) would drag
  // the nodes it presses hardest along with it, past the mesh contact that keeps the
  // sheet's triangles apart (the puncture scenes then wrote intersecting frames).
  if (obstacle.def.friction <= 0 || obstacle.moves()) return;
  const Vec3 offset = obstacle.offset(world.time);
  const Vec3 velocity = obstacle.velocity(world.time);
  const ObstaclePenalty penalty = obstaclePenalty(world, body);
  const double clearance = penalty.clearance;
  const double stick =
      0.5 * obstacle.def.friction * penalty.stiffnessPerMassOf(obstacle.def) * dt * dt;
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, static_cast<size_t>(body.nodeCount()), kAssemblyGrain),
      [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) {
          if (body.pinned[i]) continue;
          Eigen::Map<Vec3> x(&body.positions[3 * i]);
          Vec3 normal;
          const double phi = obstacleSignedDistance(obstacle.def, offset, x, &normal);
          const double depth = clearance - phi;
          if (depth <= 0.0) continue;
          const Vec3 slip = (Eigen::Map<const Vec3>(&body.velocities[3 * i]) - velocity) * dt;
          const Vec3 tangentialSlip = slip - slip.dot(normal) * normal;
          if (tangentialSlip.norm() <= stick * depth) x -= tangentialSlip;
        }
      });
}

}  // namespace

int64_t projectOutOfObstacles(World& world, double dt) {
  int64_t contacts = 0;
  std::vector<double> stuckWork;  // per node: m dv . velocity of a scripted obstacle, J
  for (Body& body : world.bodies) {
    const size_t n = static_cast<size_t>(body.nodeCount());
    body.contactObstacle.assign(n, -1);
    body.contactNormal.resize(3 * n);
    for (size_t o = 0; o < world.obstacles.size(); ++o) {
      const Obstacle& obstacle = world.obstacles[o];
      if (obstacle.isPenalty()) {
        stickToPenaltyObstacle(world, body, obstacle, dt);
        continue;
      }
      const Vec3 offset = obstacle.offset(world.time);
      const Vec3 velocity = obstacle.velocity(world.time);
      const bool driven = obstacle.isDriven();
      const auto mass = body.model->nodeMasses();
      stuckWork.assign(driven ? n : 0, 0.0);
      // Each node is handled independently: no shared writes, integer count reduction.
      contacts += tbb::parallel_reduce(
          tbb::blocked_range<size_t>(0, n, kAssemblyGrain), int64_t{0},
          [&](const tbb::blocked_range<size_t>& r, int64_t count) {
            for (size_t i = r.begin(); i != r.end(); ++i) {
              if (body.pinned[i]) continue;
              Eigen::Map<Vec3> x(&body.positions[3 * i]);
              Vec3 normal;
              const double phi = obstacleSignedDistance(obstacle.def, offset, x, &normal);
              if (phi >= 0.0) continue;
              x -= phi * normal;
              // Static friction on the step's slip (see the header).
              Eigen::Map<Vec3> v(&body.velocities[3 * i]);
              const Vec3 slip = (v - velocity) * dt;
              const Vec3 tangentialSlip = slip - slip.dot(normal) * normal;
              if (tangentialSlip.norm() <= obstacle.def.friction * -phi) {
                x -= tangentialSlip;
                // A node held for the step moves with the obstacle along it: keeping the
                // velocity whose slip was undone let the tangential pull build it up step
                // after step, unseen, until the cone gave and the node jumped.
                const Vec3 change = -tangentialSlip / dt;
                v += change;
                if (driven) stuckWork[i] = mass[i] * change.dot(velocity);
              }
              if (body.contactObstacle[i] < 0) ++count;
              body.contactObstacle[i] = static_cast<int32_t>(o);
              Eigen::Map<Vec3>(&body.contactNormal[3 * i]) = normal;
            }
            return count;
          },
          [](int64_t a, int64_t b) { return a + b; });
      for (const double w : stuckWork) world.projectionWork += w;  // in node order
    }
  }
  return contacts;
}

void applyContactVelocities(World& world) {
  const bool driven = std::any_of(world.obstacles.begin(), world.obstacles.end(),
                                  [](const Obstacle& o) { return o.isDriven(); });
  std::vector<double> work;  // per node: m dv . velocity of a scripted obstacle, J
  for (Body& body : world.bodies) {
    if (body.contactObstacle.empty()) continue;
    const size_t n = static_cast<size_t>(body.nodeCount());
    const auto mass = body.model->nodeMasses();
    work.assign(driven ? n : 0, 0.0);
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, n, kAssemblyGrain), [&](const tbb::blocked_range<size_t>& r) {
          for (size_t i = r.begin(); i != r.end(); ++i) {
            const int32_t o = body.contactObstacle[i];
            if (o < 0 || body.pinned[i]) continue;
            const Obstacle& obstacle = world.obstacles[static_cast<size_t>(o)];
            const Vec3 obstacleVelocity = obstacle.velocity(world.time);
            const Vec3 normal(body.contactNormal[3 * i], body.contactNormal[3 * i + 1],
                              body.contactNormal[3 * i + 2]);
            Eigen::Map<Vec3> v(&body.velocities[3 * i]);
            const Vec3 relative = v - obstacleVelocity;
            const double vn = relative.dot(normal);
            if (vn >= 0.0) continue;
            const double restitution = obstacle.def.restitution;
            const Vec3 tangential = relative - vn * normal;
            const double tangentialSpeed = tangential.norm();
            const double normalChange = -(1.0 + restitution) * vn;
            const double tangentialChange =
                std::min(tangentialSpeed, obstacle.def.friction * normalChange);
            Vec3 newRelative = -restitution * vn * normal + tangential;
            if (tangentialSpeed > 0.0)
              newRelative -= tangentialChange / tangentialSpeed * tangential;
            if (obstacle.isDriven()) {
              work[i] = mass[i] * (newRelative - relative).dot(obstacleVelocity);
            }
            v = obstacleVelocity + newRelative;
          }
        });
    for (const double w : work) world.projectionWork += w;  // in node order
  }
}

bool hasPenaltyObstacles(const World& world) {
  return std::any_of(world.obstacles.begin(), world.obstacles.end(),
                     [](const Obstacle& o) { return o.isPenalty(); });
}

ObstaclePenalty obstaclePenalty(const World& world) {
  return {world.obstacles, world.time, world.contact.stiffnessPerMass(),
          world.contact.stiffnessPerKappa(), 0.0};
}

ObstaclePenalty obstaclePenalty(const World& world, const Body& body) {
  ObstaclePenalty penalty = obstaclePenalty(world);
  penalty.clearance = world.contact.obstacleClearance(body);
  return penalty;
}

namespace {

// Nodes per chunk of the penalty's deterministic sums.
constexpr size_t kPenaltyChunk = 1024;

// A penalty obstacle where it is at one time.
struct PenaltyPlace {
  size_t index = 0;           // in the world's obstacles
  Vec3 offset;                // m
  Vec3 velocity;              // m/s
  double stiffnessPerMass{};  // s_o, 1/s^2
};

// The penalty obstacles' places at the penalty's time, in the obstacles' order.
std::vector<PenaltyPlace> penaltyPlaces(const ObstaclePenalty& penalty) {
  std::vector<PenaltyPlace> places;
  for (size_t o = 0; o < penalty.obstacles.size(); ++o) {
    const Obstacle& obstacle = penalty.obstacles[o];
    if (!obstacle.isPenalty()) continue;
    places.push_back({o, obstacle.offset(penalty.time), obstacle.velocity(penalty.time),
                      penalty.stiffnessPerMassOf(obstacle.def)});
  }
  return places;
}

// Calls contact(i, place, depth, normal) for every free node i of chunk `chunk` within
// `clearance` of a placed obstacle (depth = clearance - phi > 0, normal outward), node by
// node in order, obstacle by obstacle.
template <class Contact>
void forEachPenaltyContact(std::span<const Obstacle> obstacles,
                           std::span<const PenaltyPlace> places, double clearance, const Body& body,
                           std::span<const double> x, size_t chunk, const Contact& contact) {
  const size_t n = x.size() / 3;
  for (size_t i = chunk * kPenaltyChunk; i < std::min(n, (chunk + 1) * kPenaltyChunk); ++i) {
    if (body.pinned[i]) continue;
    const Vec3 p(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
    for (const PenaltyPlace& place : places) {
      Vec3 normal;
      const double phi =
          obstacleSignedDistance(obstacles[place.index].def, place.offset, p, &normal);
      const double depth = clearance - phi;
      if (depth > 0) contact(i, place, depth, normal);
    }
  }
}

size_t penaltyChunks(size_t nodes) {
  return (nodes + kPenaltyChunk - 1) / kPenaltyChunk;
}

// The damper ratio that makes a linear spring-damper contact rebound with restitution e.
double dampingRatio(double restitution) {
  if (restitution <= 0) return 1.0;
  const double logE = std::log(restitution);
  return -logE / std::sqrt(std::numbers::pi * std::numbers::pi + logE * logE);
}

}  // namespace

double addObstaclePenalty(const ObstaclePenalty& penalty, const Body& body,
                          std::span<const double> x, std::span<double> gradient,
                          std::span<double> diagonal, std::span<Vec3> reactions) {
  const std::vector<PenaltyPlace> places = penaltyPlaces(penalty);
  if (places.empty()) return 0.0;
  const auto mass = body.model->nodeMasses();
  const size_t chunks = penaltyChunks(x.size() / 3);
  const size_t obstacles = penalty.obstacles.size();
  std::vector<double> chunkEnergy(chunks, 0.0);
  // (chunks, nObstacles): each chunk's share of the reactions, summed in chunk order.
  std::vector<Vec3> chunkReactions(reactions.empty() ? 0 : chunks * obstacles, Vec3::Zero());
  tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
    double energy = 0;
    forEachPenaltyContact(
        penalty.obstacles, places, penalty.clearance, body, x, c,
        [&](size_t i, const PenaltyPlace& place, double depth, const Vec3& normal) {
          const double k = place.stiffnessPerMass * mass[i];
          energy += 0.5 * k * depth * depth;
          if (!reactions.empty()) chunkReactions[c * obstacles + place.index] -= k * depth * normal;
          if (!gradient.empty()) {
            for (int a = 0; a < 3; ++a) gradient[3 * i + a] -= k * depth * normal[a];
          }
          if (!diagonal.empty()) {
            for (int r = 0; r < 3; ++r) {
              for (int a = 0; a < 3; ++a) diagonal[9 * i + 3 * r + a] += k * normal[r] * normal[a];
            }
          }
        });
    chunkEnergy[c] = energy;
  });
  double energy = 0;
  for (const double e : chunkEnergy) energy += e;
  for (size_t c = 0; c < chunkReactions.size(); ++c) reactions[c % obstacles] += chunkReactions[c];
  return energy;
}

void dampObstaclePenalty(World& world, double dt) {
  std::vector<PenaltyPlace> places = penaltyPlaces(obstaclePenalty(world));
  if (places.empty()) return;
  const size_t obstacles = world.obstacles.size();
  // Per obstacle: the factor a step leaves of the normal velocity (the damper on the
  // spring's frequency omega = sqrt(s_o)).
  std::vector<double> normalDecay(obstacles, 1.0);
  for (const PenaltyPlace& place : places) {
    const double zeta = dampingRatio(world.obstacles[place.index].def.restitution);
    normalDecay[place.index] = std::exp(-2 * zeta * std::sqrt(place.stiffnessPerMass) * dt);
  }
  const bool anyFree = std::any_of(world.obstacles.begin(), world.obstacles.end(),
                                   [](const Obstacle& o) { return o.isFree(); });
  for (Body& body : world.bodies) {
    const auto mass = body.model->nodeMasses();
    const size_t chunks = penaltyChunks(static_cast<size_t>(body.nodeCount()));
    // (chunks, nObstacles): the momentum the nodes of each chunk lost to each obstacle.
    std::vector<Vec3> chunkMomentum(anyFree ? chunks * obstacles : 0, Vec3::Zero());
    // The work of the scripted obstacles on each chunk's nodes, m dv . velocity (World::
    // projectionWork), summed in chunk order.
    std::vector<double> chunkWork(chunks, 0.0);
    tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
      forEachPenaltyContact(
          world.obstacles, places, world.contact.obstacleClearance(body), body, body.positions, c,
          [&](size_t i, const PenaltyPlace& place, double depth, const Vec3& normal) {
            const Obstacle& obstacle = world.obstacles[place.index];
            Eigen::Map<Vec3> v(&body.velocities[3 * i]);
            const Vec3 relative = v - place.velocity;
            const double vn = relative.dot(normal);
            const Vec3 tangential = relative - vn * normal;
            const double tangentialSpeed = tangential.norm();
            const double slowdown = std::min(
                tangentialSpeed, obstacle.def.friction * place.stiffnessPerMass * depth * dt);
            Vec3 newRelative = vn * normalDecay[place.index] * normal + tangential;
            if (tangentialSpeed > 0) newRelative -= slowdown / tangentialSpeed * tangential;
            if (obstacle.isFree())
              chunkMomentum[c * obstacles + place.index] += mass[i] * (relative - newRelative);
            if (obstacle.isDriven())
              chunkWork[c] += mass[i] * (newRelative - relative).dot(place.velocity);
            v = place.velocity + newRelative;
          });
    });
    for (const double work : chunkWork) world.projectionWork += work;
    for (size_t c = 0; c < chunkMomentum.size(); ++c) {
      Obstacle& obstacle = world.obstacles[c % obstacles];
      if (obstacle.isFree()) obstacle.free.velocity += chunkMomentum[c] / obstacle.def.mass;
    }
    // The next body meets the thrown obstacles as this one left them.
    if (anyFree) {
      for (PenaltyPlace& place : places)
        place.velocity = world.obstacles[place.index].velocity(world.time);
    }
  }
}

void kickFreeObstacles(World& world, double dt) {
  for (Obstacle& obstacle : world.obstacles) {
    if (obstacle.isFree()) obstacle.free.velocity += dt * obstacle.free.acceleration;
  }
}

void driftFreeObstacles(World& world, double dt) {
  for (Obstacle& obstacle : world.obstacles) {
    if (obstacle.isFree()) obstacle.free.offset += dt * obstacle.free.velocity;
  }
}

namespace {

Vec3 toVec3(const Vec3d& v) {
  return {v[0], v[1], v[2]};
}

// The overlap of obstacles a and b at their offsets: the signed gap along the unit normal
// n that points from b towards a (negative when they overlap), or nullopt for two planes.
std::optional<double> obstacleGap(const ObstacleDef& a, const Vec3& offsetA, const ObstacleDef& b,
                                  const Vec3& offsetB, Vec3* n) {
  if (a.type == ObstacleType::kPlane && b.type == ObstacleType::kPlane) return std::nullopt;
  if (a.type == ObstacleType::kPlane) {
    const std::optional<double> gap = obstacleGap(b, offsetB, a, offsetA, n);
    *n = -*n;
    return gap;
  }
  const Vec3 centerA = toVec3(a.center) + offsetA;
  if (a.type == ObstacleType::kSphere) {
    return obstacleSignedDistance(b, offsetB, centerA, n) - a.radius;
  }
  // a is a box.
  const Vec3 half = toVec3(a.halfExtents);
  switch (b.type) {
    case ObstacleType::kPlane: {
      // The corner deepest on the plane's solid side.
      const Vec3 normal = toVec3(b.normal);
      const Vec3 corner = centerA - half.cwiseProduct(normal.cwiseSign());
      *n = normal;
      return (corner - (toVec3(b.point) + offsetB)).dot(normal);
    }
    case ObstacleType::kSphere: {
      const double gap =
          obstacleSignedDistance(a, offsetA, toVec3(b.center) + offsetB, n) - b.radius;
      *n = -*n;
      return gap;
    }
    case ObstacleType::kBox: {
      // Two axis-aligned boxes: apart, the distance between them; overlapping, the least
      // penetration over the three axes.
      const Vec3 d = centerA - (toVec3(b.center) + offsetB);
      const Vec3 q = d.cwiseAbs() - (half + toVec3(b.halfExtents));
      const Vec3 sign = d.unaryExpr([](double x) { return x < 0 ? -1.0 : 1.0; });
      if (q.maxCoeff() > 0.0) {
        const Vec3 outside = q.cwiseMax(0.0).cwiseProduct(sign);
        const double distance = outside.norm();
        *n = outside / distance;
        return distance;
      }
      int axis = 0;
      q.maxCoeff(&axis);
      *n = Vec3::Zero();
      (*n)[axis] = sign[axis];
      return q[axis];
    }
  }
  return std::nullopt;
}

}  // namespace

int collideFreeObstacles(World& world) {
  const auto count = world.obstacles.size();
  int touching = 0;
  constexpr int kSweeps = 4;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    touching = 0;
    for (size_t ia = 0; ia < count; ++ia) {
      for (size_t ib = ia + 1; ib < count; ++ib) {
        Obstacle& a = world.obstacles[ia];
        Obstacle& b = world.obstacles[ib];
        if (!a.isFree() && !b.isFree()) continue;
        Vec3 n;
        const std::optional<double> gap =
            obstacleGap(a.def, a.offset(world.time), b.def, b.offset(world.time), &n);
        if (!gap || *gap >= 0) continue;
        ++touching;
        const double wa = a.isFree() ? 1 / a.def.mass : 0;
        const double wb = b.isFree() ? 1 / b.def.mass : 0;
        const double w = wa + wb;
        if (a.isFree()) a.free.offset -= (*gap * wa / w) * n;
        if (b.isFree()) b.free.offset += (*gap * wb / w) * n;
        const Vec3 relative = a.velocity(world.time) - b.velocity(world.time);
        const double normalSpeed = relative.dot(n);
        if (normalSpeed >= 0) continue;
        const double restitution = std::max(a.def.restitution, b.def.restitution);
        const double friction = std::sqrt(a.def.friction * b.def.friction);
        const double j = -(1 + restitution) * normalSpeed / w;
        Vec3 impulse = j * n;
        const Vec3 sliding = relative - normalSpeed * n;
        const double slidingSpeed = sliding.norm();
        if (slidingSpeed > 0) {
          impulse -= std::min(friction * j, slidingSpeed / w) / slidingSpeed * sliding;
        }
        if (a.isFree()) a.free.velocity += wa * impulse;
        if (b.isFree()) b.free.velocity -= wb * impulse;
        // A scripted obstacle's push is work its script does (World::projectionWork).
        if (a.isDriven()) world.projectionWork -= impulse.dot(a.velocity(world.time));
        if (b.isDriven()) world.projectionWork += impulse.dot(b.velocity(world.time));
      }
    }
    if (touching == 0) break;
  }
  return touching;
}

double freeObstacleEnergy(const World& world) {
  double energy = 0;
  for (const Obstacle& obstacle : world.obstacles) {
    if (!obstacle.isFree()) continue;
    energy += 0.5 * obstacle.def.mass * obstacle.free.velocity.squaredNorm() -
              obstacle.def.mass * world.gravity.dot(obstacle.free.offset);
  }
  return energy;
}

}  // namespace shellsim
