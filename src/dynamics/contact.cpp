#include "dynamics/contact.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
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

int64_t projectOutOfObstacles(World& world) {
  int64_t contacts = 0;
  for (Body& body : world.bodies) {
    const size_t n = static_cast<size_t>(body.nodeCount());
    body.contactObstacle.assign(n, -1);
    body.contactNormal.resize(3 * n);
    for (size_t o = 0; o < world.obstacles.size(); ++o) {
      const Obstacle& obstacle = world.obstacles[o];
      if (obstacle.def.response == ObstacleResponse::kPenalty) continue;
      const Vec3 offset = obstacle.offset(world.time);
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
              if (body.contactObstacle[i] < 0) ++count;
              body.contactObstacle[i] = static_cast<int32_t>(o);
              Eigen::Map<Vec3>(&body.contactNormal[3 * i]) = normal;
            }
            return count;
          },
          [](int64_t a, int64_t b) { return a + b; });
    }
  }
  return contacts;
}

void applyContactVelocities(World& world) {
  for (Body& body : world.bodies) {
    if (body.contactObstacle.empty()) continue;
    const size_t n = static_cast<size_t>(body.nodeCount());
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
            v = obstacleVelocity + newRelative;
          }
        });
  }
}

bool hasPenaltyObstacles(const World& world) {
  return std::any_of(world.obstacles.begin(), world.obstacles.end(), [](const Obstacle& o) {
    return o.def.response == ObstacleResponse::kPenalty;
  });
}

ObstaclePenalty obstaclePenalty(const World& world, const Body& body) {
  return {world.obstacles, world.time, world.contact.stiffnessPerMass(),
          world.contact.obstacleClearance(body)};
}

namespace {

// Nodes per chunk of the penalty's deterministic sum.
constexpr size_t kPenaltyChunk = 1024;

// The scripted offsets of the penalty obstacles at `time`, (nObstacles); absent ones skipped.
std::vector<std::optional<Vec3>> penaltyOffsets(std::span<const Obstacle> obstacles, double time) {
  std::vector<std::optional<Vec3>> offsets(obstacles.size());
  for (size_t o = 0; o < obstacles.size(); ++o) {
    if (obstacles[o].def.response == ObstacleResponse::kPenalty)
      offsets[o] = obstacles[o].offset(time);
  }
  return offsets;
}

}  // namespace

double addObstaclePenalty(const ObstaclePenalty& penalty, const Body& body,
                          std::span<const double> x, std::span<double> gradient,
                          std::span<double> diagonal, std::span<Vec3> reactions) {
  const std::vector<std::optional<Vec3>> offsets = penaltyOffsets(penalty.obstacles, penalty.time);
  if (std::none_of(offsets.begin(), offsets.end(), [](const auto& o) { return o.has_value(); }))
    return 0.0;
  const auto mass = body.model->nodeMasses();
  const size_t n = x.size() / 3;
  const size_t chunks = (n + kPenaltyChunk - 1) / kPenaltyChunk;
  std::vector<double> chunkEnergy(chunks, 0.0);
  const size_t obstacles = offsets.size();
  // (chunks, nObstacles): each chunk's share of the reactions, summed in chunk order.
  std::vector<Vec3> chunkReactions(reactions.empty() ? 0 : chunks * obstacles, Vec3::Zero());
  tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
    double energy = 0;
    for (size_t i = c * kPenaltyChunk; i < std::min(n, (c + 1) * kPenaltyChunk); ++i) {
      if (body.pinned[i]) continue;
      const Vec3 p(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
      const double k = penalty.stiffnessPerMass * mass[i];
      for (size_t o = 0; o < offsets.size(); ++o) {
        if (!offsets[o]) continue;
        Vec3 normal;
        const double phi =
            obstacleSignedDistance(penalty.obstacles[o].def, *offsets[o], p, &normal);
        const double depth = penalty.clearance - phi;
        if (depth <= 0) continue;
        energy += 0.5 * k * depth * depth;
        if (!reactions.empty()) chunkReactions[c * obstacles + o] -= k * depth * normal;
        if (!gradient.empty()) {
          for (int a = 0; a < 3; ++a) gradient[3 * i + a] -= k * depth * normal[a];
        }
        if (!diagonal.empty()) {
          for (int r = 0; r < 3; ++r) {
            for (int a = 0; a < 3; ++a) diagonal[9 * i + 3 * r + a] += k * normal[r] * normal[a];
          }
        }
      }
    }
    chunkEnergy[c] = energy;
  });
  double energy = 0;
  for (const double e : chunkEnergy) energy += e;
  for (size_t c = 0; c < chunkReactions.size(); ++c) reactions[c % obstacles] += chunkReactions[c];
  return energy;
}

void dampObstaclePenalty(World& world, double dt) {
  const std::vector<std::optional<Vec3>> offsets = penaltyOffsets(world.obstacles, world.time);
  if (std::none_of(offsets.begin(), offsets.end(), [](const auto& o) { return o.has_value(); }))
    return;
  const double s = world.contact.stiffnessPerMass();
  const double omega = std::sqrt(s);
  const size_t obstacles = offsets.size();
  const bool anyFree = std::any_of(world.obstacles.begin(), world.obstacles.end(),
                                   [](const Obstacle& o) { return o.isFree(); });
  for (Body& body : world.bodies) {
    const double clearance = world.contact.obstacleClearance(body);
    const size_t n = static_cast<size_t>(body.nodeCount());
    const auto mass = body.model->nodeMasses();
    const size_t chunks = (n + kPenaltyChunk - 1) / kPenaltyChunk;
    // (chunks, nObstacles): the momentum the nodes of each chunk lost to each obstacle.
    std::vector<Vec3> chunkMomentum(anyFree ? chunks * obstacles : 0, Vec3::Zero());
    tbb::parallel_for(size_t{0}, chunks, [&](size_t chunk) {
      for (size_t i = chunk * kPenaltyChunk; i < std::min(n, (chunk + 1) * kPenaltyChunk); ++i) {
        if (body.pinned[i]) continue;
        const Eigen::Map<const Vec3> x(&body.positions[3 * i]);
        Eigen::Map<Vec3> v(&body.velocities[3 * i]);
        for (size_t o = 0; o < offsets.size(); ++o) {
          if (!offsets[o]) continue;
          const Obstacle& obstacle = world.obstacles[o];
          Vec3 normal;
          const double phi = obstacleSignedDistance(obstacle.def, *offsets[o], x, &normal);
          const double depth = clearance - phi;
          if (depth <= 0) continue;
          const double e = obstacle.def.restitution;
          const double logE = std::log(e);
          const double zeta = e > 0 ? -logE / std::sqrt(M_PI * M_PI + logE * logE) : 1.0;
          const Vec3 obstacleVelocity = obstacle.velocity(world.time);
          const Vec3 relative = v - obstacleVelocity;
          const double vn = relative.dot(normal);
          const Vec3 tangential = relative - vn * normal;
          const double tangentialSpeed = tangential.norm();
          const double slowdown = std::min(tangentialSpeed, obstacle.def.friction * s * depth * dt);
          Vec3 newRelative = vn * std::exp(-2 * zeta * omega * dt) * normal + tangential;
          if (tangentialSpeed > 0) newRelative -= slowdown / tangentialSpeed * tangential;
          if (obstacle.isFree())
            chunkMomentum[chunk * obstacles + o] += mass[i] * (relative - newRelative);
          v = obstacleVelocity + newRelative;
        }
      }
    });
    for (size_t c = 0; c < chunkMomentum.size(); ++c) {
      Obstacle& obstacle = world.obstacles[c % obstacles];
      if (obstacle.isFree()) obstacle.free.velocity += chunkMomentum[c] / obstacle.def.mass;
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
