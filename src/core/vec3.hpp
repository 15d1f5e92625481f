// Small vectors of 3 doubles: positions, normals, forces. Flat (n, 3) arrays hold the nodes
// (DESIGN.md: flat arrays with their shapes written down); Vec3 is one row of them.
#pragma once

#include <Eigen/Core>
#include <Eigen/Geometry>  // cross products on Vec3
#include <cstddef>
#include <span>

namespace shellsim {

using Vec3 = Eigen::Vector3d;

// Row i of a flat (n, 3) array as a vector, and the reverse.
inline Vec3 row(std::span<const double> flat, size_t i) {
  return {flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
}
inline void setRow(std::span<double> flat, size_t i, const Vec3& v) {
  flat[3 * i] = v.x();
  flat[3 * i + 1] = v.y();
  flat[3 * i + 2] = v.z();
}

// [a]x, the matrix of b -> a x b.
inline Eigen::Matrix3d crossMatrix(const Vec3& a) {
  Eigen::Matrix3d m;
  m << 0, -a.z(), a.y(), a.z(), 0, -a.x(), -a.y(), a.x(), 0;
  return m;
}

}  // namespace shellsim
