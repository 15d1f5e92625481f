// The stencils of the two-layer thick shell (steinemann section 4.1, after Teschner et al.
// 2004, "A versatile and robust model for geometrically complex deformable solids"): with
// a constraint C and stiffness k, E = 1/2 k C^2, and
//   triangle area (K = 3):  C_A = (A - A0) / A0,  A = 1/2 |(x1 - x0) x (x2 - x0)|
//   tet volume    (K = 4):  C_V = (V - V0) / V0,  V = 1/6 (x1 - x0) . ((x2 - x0) x (x3 - x0))
// (springs are the mass-spring model's). V is signed, so an inverted tet is pushed back.
//
// Derivatives, with y_k = x_k - x0 (x0's rows are minus the sum of the others):
//   dA/dy1 = 1/2 y2 x n^,  dA/dy2 = 1/2 n^ x y1                        (n = y1 x y2)
//   d2A = 1/2 [J^T (I - n^ n^T) J / |n| + B],  J = dn/dy = [-[y2]x, [y1]x],
//         B = [0, -[n^]x; [n^]x, 0]  (the second derivative of n^ . (y1 x y2), n^ held)
//   dV/dy1 = 1/6 y2 x y3,  dV/dy2 = 1/6 y3 x y1,  dV/dy3 = 1/6 y1 x y2
//   d2V/dy1dy2 = -1/6 [y3]x,  d2V/dy1dy3 = 1/6 [y2]x,  d2V/dy2dy3 = -1/6 [y1]x
// and for E = 1/2 k C^2:  dE = k C dC,  d2E = k (dC dC^T + C d2C).
#pragma once

#include <Eigen/Core>

#include "core/vec3.hpp"

namespace shellsim::thick_shell {

// Area term of a triangle x[0..2]; gradient (3 rows) and, if asked, the 9x9 Hessian. A
// triangle of zero area has no defined normal: energy only, no force.
double areaEnergyGradient(double stiffness, double restArea, const Vec3 (&x)[3],
                          Vec3 (&gradient)[3], Eigen::Matrix<double, 9, 9>* hessian = nullptr);

// Volume term of a tet x[0..3]; gradient and, if asked, the 12x12 Hessian.
double volumeEnergyGradient(double stiffness, double restVolume, const Vec3 (&x)[4],
                            Vec3 (&gradient)[4], Eigen::Matrix<double, 12, 12>* hessian = nullptr);

// The area 1/2 |(x1 - x0) x (x2 - x0)|, m^2, and the signed volume
// 1/6 (x1 - x0) . ((x2 - x0) x (x3 - x0)), m^3: out of line and used by the kernels too, so
// that a rest value taken from a configuration is bit for bit the value the kernel finds
// there (an inlined copy may fuse its multiply-adds differently): zero force at rest.
[[nodiscard]] double triangleArea(const Vec3& x0, const Vec3& x1, const Vec3& x2);
[[nodiscard]] double tetVolume(const Vec3& x0, const Vec3& x1, const Vec3& x2, const Vec3& x3);

}  // namespace shellsim::thick_shell
