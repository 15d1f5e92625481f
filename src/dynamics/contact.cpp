#include "dynamics/contact.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>

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
      const Vec3 offset = obstacle.path.offset(world.time);
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
            const Vec3 obstacleVelocity = obstacle.path.velocity(world.time);
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

}  // namespace shellsim
