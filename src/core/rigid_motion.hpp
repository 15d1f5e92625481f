// The rigid motion that carries the same linear and angular momentum as a set of nodes
// (steinemann section 4.3, notes A10): used to hand a piece over to a rigid body and to damp
// the motion relative to the rigid one.
#pragma once

#include <Eigen/Eigenvalues>
#include <cstdint>
#include <span>

#include "core/vec3.hpp"

namespace shellsim {

struct RigidMotion {
  double mass = 0;                                    // kg, sum m_i
  Vec3 centre = Vec3::Zero();                         // m, sum m_i x_i / m
  Vec3 velocity = Vec3::Zero();                       // m/s, sum m_i v_i / m
  Vec3 angularMomentum = Vec3::Zero();                // kg m^2/s, sum m_i r_i x (v_i - v)
  Eigen::Matrix3d inertia = Eigen::Matrix3d::Zero();  // kg m^2, sum m_i (|r_i|^2 1 - r_i r_i^T)
  Vec3 spin = Vec3::Zero();                           // rad/s, I^-1 L

  [[nodiscard]] Vec3 velocityAt(const Vec3& x) const { return velocity + spin.cross(x - centre); }
};

// The rigid motion of `nodes` (indices into masses (nNodes), positions and velocities
// (nNodes, 3)), summed in the order given. A set with a singular inertia (one node, nodes on
// a line) spins about what the pseudo-inverse finds: the line carries no angular momentum
// along itself. A set of zero mass has the zero motion.
[[nodiscard]] inline RigidMotion fitRigidMotion(std::span<const double> masses,
                                                std::span<const double> positions,
                                                std::span<const double> velocities,
                                                std::span<const int32_t> nodes) {
  RigidMotion r;
  Vec3 moment = Vec3::Zero(), momentum = Vec3::Zero();
  for (const int32_t node : nodes) {
    const auto i = static_cast<size_t>(node);
    r.mass += masses[i];
    moment += masses[i] * row(positions, i);
    momentum += masses[i] * row(velocities, i);
  }
  if (!(r.mass > 0)) return {};
  r.centre = moment / r.mass;
  r.velocity = momentum / r.mass;
  for (const int32_t node : nodes) {
    const auto i = static_cast<size_t>(node);
    const Vec3 d = row(positions, i) - r.centre;
    r.angularMomentum += masses[i] * d.cross(row(velocities, i) - r.velocity);
    r.inertia += masses[i] * (d.squaredNorm() * Eigen::Matrix3d::Identity() - d * d.transpose());
  }
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eigen(r.inertia);
  const Vec3 values = eigen.eigenvalues();
  Vec3 inverse = Vec3::Zero();
  for (int k = 0; k < 3; ++k) {
    if (values[k] > 1e-12 * values.maxCoeff()) inverse[k] = 1.0 / values[k];
  }
  r.spin = eigen.eigenvectors() * inverse.asDiagonal() * eigen.eigenvectors().transpose() *
           r.angularMomentum;
  return r;
}

}  // namespace shellsim
