#include "dynamics/rigid_fragments.hpp"

#include <LinearMath/btConvexHullComputer.h>
#include <btBulletDynamicsCommon.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/rigid_motion.hpp"
#include "dynamics/world.hpp"

namespace shellsim {

namespace {

static_assert(sizeof(btScalar) == sizeof(double),
              "shellsim links Bullet in double precision (pkg-config bullet-float64)");

// Bullet's collision margin of a cell: a fifth of its thickness, never above Bullet's default
// 4 cm. Contact then starts within the margin's rounding of the cell's edges.
constexpr double kMarginPerThickness = 0.2;
constexpr double kMaxMargin = 0.04;  // m
// The thinnest solid a fragment is given, relative to its size (a shell of zero thickness
// still needs a volume to collide with).
constexpr double kMinThicknessPerSize = 1e-3;

btVector3 toBullet(const Vec3& v) {
  return {v.x(), v.y(), v.z()};
}
Vec3 fromBullet(const btVector3& v) {
  return {v.x(), v.y(), v.z()};
}
btMatrix3x3 toBullet(const Eigen::Matrix3d& m) {
  return {m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2), m(2, 0), m(2, 1), m(2, 2)};
}
Eigen::Matrix3d fromBullet(const btMatrix3x3& m) {
  Eigen::Matrix3d out;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) out(r, c) = m[r][c];
  }
  return out;
}

// Where an obstacle is at `time`: its definition's position plus its offset.
Vec3 obstaclePosition(const Obstacle& obstacle, double time) {
  const ObstacleDef& def = obstacle.def;
  const Vec3d& base = def.type == ObstacleType::kPlane ? def.point : def.center;
  return Vec3(base[0], base[1], base[2]) + obstacle.offset(time);
}

// One convex cell: its corners shrunk by `margin` (btConvexHullComputer moves every face
// inwards by it), and the margin it got (less where the cell is too thin for all of it).
struct ShrunkCell {
  std::vector<Vec3> points;
  double margin = 0;
};
ShrunkCell shrinkCell(const std::vector<Vec3>& corners, double margin) {
  btConvexHullComputer hull;
  std::vector<double> coords;
  for (const Vec3& p : corners) coords.insert(coords.end(), {p.x(), p.y(), p.z()});
  const double shrunk = hull.compute(coords.data(), 3 * static_cast<int>(sizeof(double)),
                                     static_cast<int>(corners.size()), margin, 0.4);
  ShrunkCell cell;
  if (shrunk > 0 && hull.vertices.size() >= 4) {
    for (int k = 0; k < hull.vertices.size(); ++k)
      cell.points.push_back(fromBullet(hull.vertices[k]));
    cell.margin = shrunk;
  } else {
    cell.points = corners;  // flat or too thin to shrink: no margin
  }
  return cell;
}

}  // namespace

// Bullet's world: the obstacles and the fragments, in the order of World::obstacles and
// RigidFragments::fragments_.
struct RigidFragments::Engine {
  btDefaultCollisionConfiguration configuration;
  btCollisionDispatcher dispatcher{&configuration};
  btDbvtBroadphase broadphase;
  btSequentialImpulseConstraintSolver solver;
  btDiscreteDynamicsWorld dynamics{&dispatcher, &broadphase, &solver, &configuration};
  std::vector<std::unique_ptr<btCollisionShape>> shapes;  // every shape, children included
  std::vector<std::unique_ptr<btDefaultMotionState>> motionStates;  // moving obstacles
  std::vector<std::unique_ptr<btRigidBody>> obstacles;              // per obstacle
  std::vector<std::unique_ptr<btRigidBody>> fragments;              // per fragment

  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() {
    // Out of Bullet's world before the bodies go (its destructor reads their proxies).
    for (auto& body : fragments) dynamics.removeRigidBody(body.get());
    for (auto& body : obstacles) dynamics.removeRigidBody(body.get());
  }

  void addFragment(const RigidFragment& f, const Body& body) {
    auto compound = std::make_unique<btCompoundShape>(true, static_cast<int>(f.cellMargins.size()));
    for (size_t k = 0; k + 1 < f.cellOffsets.size(); ++k) {
      auto hull = std::make_unique<btConvexHullShape>();
      for (auto p = static_cast<size_t>(f.cellOffsets[k]);
           p < static_cast<size_t>(f.cellOffsets[k + 1]); ++p) {
        hull->addPoint(
            btVector3(f.cellPoints[3 * p], f.cellPoints[3 * p + 1], f.cellPoints[3 * p + 2]),
            false);
      }
      hull->setMargin(f.cellMargins[k]);
      hull->recalcLocalAabb();  // after the margin: the box grows with it
      compound->addChildShape(btTransform::getIdentity(), hull.get());
      shapes.push_back(std::move(hull));
    }
    btRigidBody::btRigidBodyConstructionInfo info(f.mass, nullptr, compound.get(),
                                                  toBullet(f.principalInertia));
    const RigidFragmentsDef& def = *body.rigidFragments;
    info.m_friction = def.friction;
    info.m_restitution = def.restitution;
    // Mass-proportional damping c (1/s): Bullet scales velocities by (1 - d)^dt.
    info.m_linearDamping = 1.0 - std::exp(-body.damping);
    info.m_angularDamping = info.m_linearDamping;
    shapes.push_back(std::move(compound));
    auto rigid = std::make_unique<btRigidBody>(info);
    rigid->setCenterOfMassTransform(btTransform(toBullet(f.rotation), toBullet(f.centre)));
    rigid->setLinearVelocity(toBullet(f.velocity));
    rigid->setAngularVelocity(toBullet(f.spin));
    // The gyroscopic term w x I w (implicit; Bullet's default since 2.83, said here because
    // the tumbling test depends on it): a shard spun about no principal axis tumbles and
    // keeps its angular momentum.
    rigid->setFlags(rigid->getFlags() | BT_ENABLE_GYROSCOPIC_FORCE_IMPLICIT_BODY);
    rigid->setActivationState(DISABLE_DEACTIVATION);  // no sleep timers: nothing unsaved
    dynamics.addRigidBody(rigid.get());
    fragments.push_back(std::move(rigid));
  }
};

RigidFragments::RigidFragments() = default;
RigidFragments::~RigidFragments() = default;
RigidFragments::RigidFragments(RigidFragments&&) noexcept = default;
RigidFragments& RigidFragments::operator=(RigidFragments&&) noexcept = default;

void RigidFragments::setFragments(std::vector<RigidFragment> fragments) {
  fragments_ = std::move(fragments);
  behind_ = 0;
  engine_.reset();
}

void RigidFragments::invalidate() {
  engine_.reset();
}

int32_t RigidFragments::count(size_t body) const {
  return static_cast<int32_t>(
      std::count_if(fragments_.begin(), fragments_.end(),
                    [&](const RigidFragment& f) { return static_cast<size_t>(f.body) == body; }));
}

void RigidFragments::build(const World& world, double startTime) {
  engine_.reset();
  auto engine = std::make_unique<Engine>();
  engine->dynamics.setGravity(toBullet(world.gravity));
  // Every overlap is undone by split impulses, which move the bodies apart without adding
  // velocity. Bullet's default turns overlaps shallower than 4 cm into velocity, erp depth /
  // dt: at our steps of 0.1 ms a fragment born 1 cm inside the ball that broke it would
  // leave at 20 m/s.
  btContactSolverInfo& solver = engine->dynamics.getSolverInfo();
  solver.m_splitImpulse = 1;
  solver.m_splitImpulsePenetrationThreshold = 0;
  for (const Obstacle& obstacle : world.obstacles) {
    const ObstacleDef& def = obstacle.def;
    std::unique_ptr<btCollisionShape> shape;
    switch (def.type) {
      case ObstacleType::kPlane: {
        const Vec3 normal = Vec3(def.normal[0], def.normal[1], def.normal[2]).normalized();
        shape = std::make_unique<btStaticPlaneShape>(toBullet(normal), 0.0);
        break;
      }
      case ObstacleType::kSphere: shape = std::make_unique<btSphereShape>(def.radius); break;
      case ObstacleType::kBox:
        shape = std::make_unique<btBoxShape>(
            btVector3(def.halfExtents[0], def.halfExtents[1], def.halfExtents[2]));
        break;
    }
    btTransform place(btMatrix3x3::getIdentity(), toBullet(obstaclePosition(obstacle, startTime)));
    btDefaultMotionState* motion = nullptr;
    if (obstacle.moves()) {
      engine->motionStates.push_back(std::make_unique<btDefaultMotionState>(place));
      motion = engine->motionStates.back().get();
    }
    btRigidBody::btRigidBodyConstructionInfo info(0.0, motion, shape.get());
    info.m_friction = def.friction;
    info.m_restitution = def.restitution;
    auto body = std::make_unique<btRigidBody>(info);
    body->setWorldTransform(place);
    if (obstacle.moves()) {
      body->setCollisionFlags(body->getCollisionFlags() | btCollisionObject::CF_KINEMATIC_OBJECT);
      body->setActivationState(DISABLE_DEACTIVATION);
    }
    engine->dynamics.addRigidBody(body.get());
    engine->shapes.push_back(std::move(shape));
    engine->obstacles.push_back(std::move(body));
  }
  for (const RigidFragment& f : fragments_) {
    engine->addFragment(f, world.bodies[static_cast<size_t>(f.body)]);
  }
  engine_ = std::move(engine);
}

bool RigidFragments::advance(World& world, double dt) {
  bool moved = false;
  if (fragments_.empty()) {
    behind_ = 0;
  } else {
    behind_ += dt;
    if (behind_ >= kRigidStep) moved = flush(world);
  }
  if (checkedVersion_.size() != world.bodies.size()) markChecked(world);  // the first step
  sinceCheck_ += dt;
  bool check = sinceCheck_ >= kRigidStep;
  for (size_t b = 0; b < world.bodies.size() && !check; ++b) {
    check = world.bodies[b].rigidFragments &&
            world.bodies[b].model->topologyVersion() != checkedVersion_[b];
  }
  if (!check) return moved;
  markChecked(world);
  return handOver(world) || moved;
}

bool RigidFragments::finishAdvance(World& world) {
  const bool moved = flush(world);
  markChecked(world);
  return handOver(world) || moved;
}

void RigidFragments::markChecked(const World& world) {
  sinceCheck_ = 0;
  checkedVersion_.resize(world.bodies.size());
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    checkedVersion_[b] = world.bodies[b].model->topologyVersion();
  }
}

bool RigidFragments::flush(World& world) {
  if (fragments_.empty() || !(behind_ > 0)) {
    behind_ = 0;
    return false;
  }
  const double dt = behind_;
  behind_ = 0;
  if (!engine_) build(world, world.time - dt);
  Engine& engine = *engine_;
  size_t moving = 0;
  for (const Obstacle& obstacle : world.obstacles) {
    if (!obstacle.moves()) continue;
    // Bullet takes a kinematic body's velocity from its motion state's move over the step.
    engine.motionStates[moving++]->setWorldTransform(
        btTransform(btMatrix3x3::getIdentity(), toBullet(obstaclePosition(obstacle, world.time))));
  }
  engine.dynamics.stepSimulation(dt, 0, dt);
  for (size_t k = 0; k < fragments_.size(); ++k) {
    const btRigidBody& body = *engine.fragments[k];
    RigidFragment& f = fragments_[k];
    f.centre = fromBullet(body.getCenterOfMassTransform().getOrigin());
    f.rotation = fromBullet(body.getCenterOfMassTransform().getBasis());
    f.velocity = fromBullet(body.getLinearVelocity());
    f.spin = fromBullet(body.getAngularVelocity());
  }
  placeNodes(world);
  return true;
}

void RigidFragments::placeNodes(World& world) const {
  for (Body& body : world.bodies) {
    for (size_t i = 0; i < body.rigidFragment.size(); ++i) {
      const int32_t k = body.rigidFragment[i];
      if (k < 0) continue;
      const RigidFragment& f = fragments_[static_cast<size_t>(k)];
      const Vec3 arm = f.rotation * row(body.rigidLocal, i);
      setRow(body.positions, i, f.centre + arm);
      setRow(body.velocities, i, f.velocity + f.spin.cross(arm));
      setRow(body.accelerations, i, Vec3::Zero());
    }
  }
}

bool RigidFragments::handOver(World& world) {
  bool handed = false;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    Body& body = world.bodies[b];
    if (!body.rigidFragments) continue;
    const RigidFragmentsDef& def = *body.rigidFragments;
    const std::vector<int32_t> pieces = body.model->nodePieces();
    const int32_t pieceTotal = pieceCount(pieces);
    if (pieceTotal < 2) continue;
    const auto n = static_cast<size_t>(body.nodeCount());
    std::vector<std::vector<int32_t>> members(static_cast<size_t>(pieceTotal));
    std::vector<uint8_t> excluded(members.size(), 0);  // held by a pin, or rigid already
    for (size_t i = 0; i < n; ++i) {
      const auto p = static_cast<size_t>(pieces[i]);
      members[p].push_back(static_cast<int32_t>(i));
      if (body.pinned[i]) excluded[p] = 1;
    }
    size_t largest = 0;
    for (size_t p = 1; p < members.size(); ++p) {
      if (members[p].size() > members[largest].size()) largest = p;
    }
    const auto mass = body.model->nodeMasses();
    const Model::ContactMesh mesh = body.model->contactMesh();
    std::vector<double> below, above;  // made for the first piece handed over
    for (size_t p = 0; p < members.size(); ++p) {
      if (p == largest || excluded[p]) continue;
      const std::vector<int32_t>& nodes = members[p];
      bool qualifies = def.maxNodes > 0 && std::ssize(nodes) <= def.maxNodes;
      if (!qualifies && !(def.stillSpeed > 0)) continue;  // no need to fit its motion
      const RigidMotion motion = fitRigidMotion(mass, body.positions, body.velocities, nodes);
      if (!qualifies && motion.mass > 0) {
        double squares = 0;
        for (const int32_t node : nodes) {
          const auto i = static_cast<size_t>(node);
          squares +=
              mass[i] *
              (row(body.velocities, i) - motion.velocityAt(row(body.positions, i))).squaredNorm();
        }
        qualifies = std::sqrt(squares / motion.mass) < def.stillSpeed;
      }
      if (!qualifies || !(motion.mass > 0)) continue;
      // The fragments there are at world.time before one joins them.
      flush(world);
      if (below.empty()) {
        below.assign(n, 0.5 * body.thickness);
        above.assign(n, 0.5 * body.thickness);
        (void)body.model->nodeSolidExtents(below, above);
      }

      RigidFragment f;
      f.body = static_cast<int32_t>(b);
      f.mass = motion.mass;
      f.centre = motion.centre;
      f.velocity = motion.velocity;
      f.spin = motion.spin;
      const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eigen(motion.inertia);
      f.rotation = eigen.eigenvectors();
      if (f.rotation.determinant() < 0) f.rotation.col(2) *= -1.0;
      f.principalInertia = eigen.eigenvalues().cwiseMax(0.0);

      // The cells, in the principal frame.
      std::vector<uint8_t> inPiece(n, 0);
      for (const int32_t node : nodes) inPiece[static_cast<size_t>(node)] = 1;
      Vec3 lo = Vec3::Constant(std::numeric_limits<double>::infinity()), hi = -lo;
      for (const int32_t node : nodes) {
        lo = lo.cwiseMin(row(body.positions, static_cast<size_t>(node)));
        hi = hi.cwiseMax(row(body.positions, static_cast<size_t>(node)));
      }
      const double minThickness = kMinThicknessPerSize * std::max((hi - lo).norm(), 1e-6);
      std::vector<Vec3> normal(n, Vec3::Zero());
      std::vector<size_t> triangles;
      for (size_t t = 0; t + 2 < mesh.triangles.size(); t += 3) {
        const auto a = static_cast<size_t>(mesh.triangles[t]);
        const auto c1 = static_cast<size_t>(mesh.triangles[t + 1]);
        const auto c2 = static_cast<size_t>(mesh.triangles[t + 2]);
        if (!inPiece[a] || !inPiece[c1] || !inPiece[c2]) continue;
        const Vec3 area = (row(body.positions, c1) - row(body.positions, a))
                              .cross(row(body.positions, c2) - row(body.positions, a));
        for (const size_t v : {a, c1, c2}) normal[v] += area;
        triangles.push_back(t);
      }
      std::vector<uint8_t> onTriangle(n, 0);
      for (const size_t t : triangles) {
        for (int c = 0; c < 3; ++c) onTriangle[static_cast<size_t>(mesh.triangles[t + c])] = 1;
      }
      const auto toLocal = [&](const Vec3& x) -> Vec3 {
        return f.rotation.transpose() * (x - f.centre);
      };
      const auto addCell = [&](const std::vector<Vec3>& corners, double thickness) {
        const double margin = std::min(kMaxMargin, kMarginPerThickness * thickness);
        const ShrunkCell cell = shrinkCell(corners, margin);
        f.cellOffsets.push_back(static_cast<int32_t>(f.cellPoints.size() / 3));
        for (const Vec3& corner : cell.points)
          f.cellPoints.insert(f.cellPoints.end(), {corner.x(), corner.y(), corner.z()});
        f.cellMargins.push_back(cell.margin);
      };
      // The extents below and above the surface at a node, with the thinnest solid kept.
      const auto extents = [&](size_t i) {
        double down = std::max(below[i], 0.0), up = std::max(above[i], 0.0);
        if (down + up < minThickness) {
          const double grow = 0.5 * (minThickness - down - up);
          down += grow;
          up += grow;
        }
        return std::pair{down, up};
      };
      for (const size_t t : triangles) {
        std::vector<Vec3> corners;
        double thickness = std::numeric_limits<double>::infinity();
        for (int c = 0; c < 3; ++c) {
          const auto i = static_cast<size_t>(mesh.triangles[t + c]);
          const Vec3 unit = normal[i].norm() > 0 ? Vec3(normal[i].normalized()) : Vec3::UnitZ();
          const auto [down, up] = extents(i);
          corners.push_back(toLocal(row(body.positions, i) + up * unit));
          corners.push_back(toLocal(row(body.positions, i) - down * unit));
          thickness = std::min(thickness, down + up);
        }
        addCell(corners, thickness);
      }
      for (const int32_t node : nodes) {
        const auto i = static_cast<size_t>(node);
        if (onTriangle[i]) continue;
        const auto [down, up] = extents(i);
        const double radius = 0.5 * (down + up);
        const Vec3 centre = toLocal(row(body.positions, i));
        std::vector<Vec3> corners;
        for (int axis = 0; axis < 3; ++axis) {
          for (const double sign : {-1.0, 1.0})
            corners.push_back(centre + sign * radius * Vec3::Unit(axis));
        }
        addCell(corners, 2 * radius);
      }
      f.cellOffsets.push_back(static_cast<int32_t>(f.cellPoints.size() / 3));

      // The nodes follow it from now on.
      const auto k = static_cast<int32_t>(fragments_.size());
      if (body.rigidFragment.empty()) {
        body.rigidFragment.assign(n, -1);
        body.rigidLocal.assign(3 * n, 0.0);
      }
      for (const int32_t node : nodes) {
        const auto i = static_cast<size_t>(node);
        body.rigidFragment[i] = k;
        setRow(body.rigidLocal, i, toLocal(row(body.positions, i)));
        body.pinned[i] = 1;
        setRow(body.velocities, i, motion.velocityAt(row(body.positions, i)));
        setRow(body.accelerations, i, Vec3::Zero());
      }
      if (engine_) engine_->addFragment(f, body);
      fragments_.push_back(std::move(f));
      handed = true;
    }
  }
  return handed;
}

}  // namespace shellsim
