// The rigid motion that carries the same linear and angular momentum as a set of nodes
// (steinemann section 4.3, notes A10): used to hand a piece over to a rigid body and to damp
// the motion relative to the rigid one.
#pragma once

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <cstdint>
#include <span>
#include <vector>

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

// The sums that fit a rigid motion to one set of nodes, in two passes over the set (the
// second needs the centre): add() every node, centre(), addAbout() every node, finish().
class RigidMotionFit {
 public:
  void add(double mass, const Vec3& x, const Vec3& v) {
    fit_.mass += mass;
    moment_ += mass * x;
    momentum_ += mass * v;
  }
  void centre() {
    if (!(fit_.mass > 0)) return;
    fit_.centre = moment_ / fit_.mass;
    fit_.velocity = momentum_ / fit_.mass;
  }
  void addAbout(double mass, const Vec3& x, const Vec3& v) {
    const Vec3 d = x - fit_.centre;
    fit_.angularMomentum += mass * d.cross(v - fit_.velocity);
    fit_.inertia += mass * (d.squaredNorm() * Eigen::Matrix3d::Identity() - d * d.transpose());
  }
  // A set with a singular inertia (one node, nodes on a line) spins about what the
  // pseudo-inverse finds: the line carries no angular momentum along itself. A set of zero
  // mass has the zero motion.
  [[nodiscard]] RigidMotion finish() const {
    if (!(fit_.mass > 0)) return {};
    RigidMotion r = fit_;
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

 private:
  RigidMotion fit_;
  Vec3 moment_ = Vec3::Zero(), momentum_ = Vec3::Zero();
};

// The rotation R that best carries one point set onto another (Kabsch): for the moment
// M = sum_i m_i (y_i - cy) (x_i - cx)^T of the targets y about their centre and the sources x
// about theirs, the R maximising tr(R^T M), i.e. minimising sum_i m_i |R (x_i - cx) - (y_i -
// cy)|^2, with det R = +1 (no reflection).
[[nodiscard]] inline Eigen::Matrix3d bestRotation(const Eigen::Matrix3d& moment) {
  const Eigen::JacobiSVD<Eigen::Matrix3d> svd(moment, Eigen::ComputeFullU | Eigen::ComputeFullV);
  Eigen::Matrix3d u = svd.matrixU();
  if ((u * svd.matrixV().transpose()).determinant() < 0) u.col(2) *= -1.0;
  return u * svd.matrixV().transpose();
}

// The rigid motion of `nodes` (indices into masses (nNodes), positions and velocities
// (nNodes, 3)), summed in the order given.
[[nodiscard]] inline RigidMotion fitRigidMotion(std::span<const double> masses,
                                                std::span<const double> positions,
                                                std::span<const double> velocities,
                                                std::span<const int32_t> nodes) {
  RigidMotionFit fit;
  for (const int32_t node : nodes) {
    const auto i = static_cast<size_t>(node);
    fit.add(masses[i], row(positions, i), row(velocities, i));
  }
  fit.centre();
  for (const int32_t node : nodes) {
    const auto i = static_cast<size_t>(node);
    fit.addAbout(masses[i], row(positions, i), row(velocities, i));
  }
  return fit.finish();
}

// Takes off a force field (nNodes, 3) its rigid part: the forces m_i (a + alpha x r_i) of the
// rigid acceleration fitted to a_i = f_i / m_i, r_i = x_i - c about the centre of mass c. The
// fit's m a is the net force F and its I alpha the torque T = sum_i r_i x f_i (the "angular
// momentum" of the field a_i); what is taken off has the sum F (sum_i m_i r_i = 0) and the
// torque sum_i m_i r_i x (alpha x r_i) = I alpha = T, so the rest has neither (about c, hence
// about any point). With a singular I (nodes on a line) no torque along the line is taken off.
// Nodes of zero mass are left out of the fit and keep their forces. Shapes: masses (nNodes),
// positions and force (nNodes, 3).
inline void removeRigidPart(std::span<const double> masses, std::span<const double> positions,
                            std::span<double> force) {
  std::vector<double> acceleration(force.size(), 0.0);
  std::vector<int32_t> massive;
  for (size_t i = 0; i < masses.size(); ++i) {
    if (!(masses[i] > 0)) continue;
    setRow(acceleration, i, row(force, i) / masses[i]);
    massive.push_back(static_cast<int32_t>(i));
  }
  const RigidMotion rigid = fitRigidMotion(masses, positions, acceleration, massive);
  for (const int32_t node : massive) {
    const auto i = static_cast<size_t>(node);
    setRow(force, i, row(force, i) - masses[i] * rigid.velocityAt(row(positions, i)));
  }
}

}  // namespace shellsim
