// The three stencils of the discrete shells of Grinspun, Hirani, Desbrun and Schroeder 2003
// (grinspun2003, slides "Dynamics (2 of 2)" and "Flexural Energy"): an edge (2 nodes), a
// triangle (3 nodes) and a hinge (4 nodes). Each is a pure function of its node positions
// returning the energy, its gradient and, on request, its Hessian, all in closed form.
//
// ---------------------------------------------------------------------------------------
// Edge, K = 2.        x0 o-----------o x1       rest length L, stiffness k
//   The slides' W_L term k_L (1 - l/L)^2 L equals 1/2 k (l - L)^2 with k = 2 k_L / L.
//   d = x1 - x0, l = |d|, u = d / l
//   dE/dx1 = k (l - L) u = -dE/dx0
//   d2E/dx1^2 = k [u u^T + (1 - L/l)(I - u u^T)] = H,   blocks [H, -H; -H, H]
//   (the spring of mass_spring.hpp). H is indefinite when l < L (compressed edge).
//
// ---------------------------------------------------------------------------------------
// Triangle, K = 3.    x2 o
//                       / \             rest area A0, stiffness k
//                      /   \   E = 1/2 k (A - A0)^2
//                  x0 o-----o x1
//   The slides' W_A term k_A (1 - A/A0)^2 A0 equals 1/2 k (A - A0)^2 with k = 2 k_A / A0.
//   n = (x1 - x0) x (x2 - x0) = x0 x x1 + x1 x x2 + x2 x x0,  A = |n| / 2,  nh = n / |n|.
//   With the edges opposite each vertex e_0 = x2 - x1, e_1 = x0 - x2, e_2 = x1 - x0:
//     dn = sum_i J_i dx_i,  J_i = [e_i]x  (d(a x b) = da x b + a x db, cyclic sum)
//     dA/dx_i = 1/2 J_i^T nh = 1/2 nh x e_i
//   Second derivative: d2|n| = dn^T (I - nh nh^T) dn / |n| + nh . d2n, and nh . d2n couples
//   only cyclic neighbours, nh . (dx_i x dx_{i+1}) = dx_i^T [nh]x^T dx_{i+1}, so
//     d2A/dx_i dx_j = 1/(2|n|) J_i^T (I - nh nh^T) J_j + 1/2 S_ij,
//     S_{i,i+1} = [nh]x^T = -[nh]x,  S_{i+1,i} = [nh]x,  S_ii = 0   (indices mod 3).
//   E = 1/2 k (A - A0)^2:  g = k (A - A0) dA,  H = k (dA dA^T + (A - A0) d2A).
//   A zero-area triangle (n = 0) has no defined gradient: it returns its energy and zero
//   derivatives.
//
// ---------------------------------------------------------------------------------------
// Hinge, K = 4: the two triangles A = (x0, x1, x2) and B = (x1, x0, x3) of an interior
// edge, both counter-clockwise seen from outside (consistently oriented):
//
//                     x2
//                    /  \        (A, B counter-clockwise)
//                   / A  \            e = x1 - x0 (the hinge edge)
//                 x0 ---- x1          fA = x2 - x0,  fB = x3 - x0
//                   \ B  /            nA = e x fA,   nB = fB x e   (outward normals)
//                    \  /
//                     x3
//
// Signed dihedral angle (the "complement of the dihedral angle" of the slides, the angle
// between the two normals), from atan2 so it is defined on all of (-pi, pi]:
//     theta = atan2( (nA x nB) . e / |e|, nA . nB ) = atan2( det(nA, nB, e), |e| nA . nB ).
// SIGN: theta > 0 where the surface is convex (a ridge, the edges of a sphere with outward
// normals), theta < 0 where it is concave (a valley, the same sphere with its triangles
// reversed), theta = 0 when flat. Example: x0 = 0, x1 = (1, 0, 0), x2 = (0.5, 1, -h),
// x3 = (0.5, -1, -h) gives nA = (0, h, 1), nB = (0, -h, 1), nA x nB = (2h, 0, 0): theta > 0.
//
// Gradient (Bridson, Marino, Fedkiw 2003; Tamstorf and Grinspun 2013). With the heights
// hA = |nA| / |e|, hB = |nB| / |e| of the apexes over the edge and
//     vA = nA / (|nA| hA) = |e| nA / |nA|^2,   vB = |e| nB / |nB|^2,
//     sA = fA . e / |e|^2,   sB = fB . e / |e|^2   (where the apexes project onto the edge),
//   dtheta/dx2 = -vA,   dtheta/dx3 = -vB              (lifting an apex along its normal
//                                                     by t flattens the hinge by t / h)
//   dtheta/dx0 = (1 - sA) vA + (1 - sB) vB,   dtheta/dx1 = sA vA + sB vB
//   (the edge moves the apex's projection as a lever; the four sum to zero).
// Hessian: differentiate these expressions. With the 3x12 Jacobians
//     De = [-I, I, 0, 0],  DfA = [-I, 0, I, 0],  DfB = [-I, 0, 0, I]
//     DnA = -[fA]x De + [e]x DfA,    DnB = -[e]x DfB + [fB]x De
//     DvA = nA/|nA|^2 (e/|e|)^T De + |e|/|nA|^2 (I - 2 nA nA^T/|nA|^2) DnA   (same for B)
//     dsA = ( e^T DfA + (fA - 2 sA e)^T De ) / |e|^2                         (1x12)
//   the 12x12 Hessian of theta has the row blocks
//     node 0:  -vA dsA + (1 - sA) DvA - vB dsB + (1 - sB) DvB
//     node 1:   vA dsA + sA DvA + vB dsB + sB DvB
//     node 2:  -DvA,     node 3:  -DvB
//   (symmetric up to round-off; the code symmetrises it).
// Energy (slides "Flexural Energy (6 of 6)" with the weight 3|e0|^2/A0 of DESIGN.md):
//     E = 1/2 k wrap(theta - theta0)^2,  k = 2 k_B 3 |e0|^2 / A0,  A0 = A0(A) + A0(B),
//   wrap() mapping the difference to [-pi, pi] so that a hinge crossing theta = +-pi
//   (a fold through itself) keeps its energy continuous. g = k d dtheta,
//   H = k (dtheta dtheta^T + d d2theta), d = wrap(theta - theta0); the wrap is locally a
//   constant shift, so it does not enter the derivatives.
//   The derivatives are infinite when a triangle degenerates (|nA| -> 0 or |e| -> 0); a
//   hinge with an exactly zero normal or edge returns its energy and zero derivatives.
#pragma once

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <cmath>
#include <numbers>

#include "core/atan2.hpp"
#include "core/vec3.hpp"

namespace shellsim::discrete_shell {

using Mat3 = Eigen::Matrix3d;
using Mat6 = Eigen::Matrix<double, 6, 6>;
using Mat9 = Eigen::Matrix<double, 9, 9>;
using Mat12 = Eigen::Matrix<double, 12, 12>;

// x - 2 pi round(x / 2 pi): the representative of x in [-pi, pi].
inline double wrapAngle(double x) {
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  if (x >= -std::numbers::pi && x <= std::numbers::pi) return x;
  return x - kTwoPi * std::round(x / kTwoPi);
}

// ---- edge ------------------------------------------------------------------------------

// E = 1/2 k (l - L)^2 and dE/dx (see the header comment).
inline double edgeEnergy(double stiffness, double restLength, const Vec3 (&x)[2], Vec3 (&g)[2]) {
  const Vec3 d = x[1] - x[0];
  const double length = d.norm();
  const double stretch = length - restLength;
  if (length > 0) {
    g[1] = (stiffness * stretch / length) * d;
    g[0] = -g[1];
  } else {
    g[0].setZero();
    g[1].setZero();
  }
  return 0.5 * stiffness * stretch * stretch;
}

// Same, with the 6x6 Hessian over (x0, x1).
double edgeEnergyHessian(double stiffness, double restLength, const Vec3 (&x)[2], Vec3 (&g)[2],
                         Mat6& hessian);

// ---- triangle --------------------------------------------------------------------------

// Area of the triangle, m^2.
inline double triangleArea(const Vec3& x0, const Vec3& x1, const Vec3& x2) {
  return 0.5 * (x1 - x0).cross(x2 - x0).norm();
}

// E = 1/2 k (A - A0)^2 and dE/dx (see the header comment).
inline double triangleEnergy(double stiffness, double restArea, const Vec3 (&x)[3], Vec3 (&g)[3]) {
  const Vec3 n = (x[1] - x[0]).cross(x[2] - x[0]);
  const double norm = n.norm();
  const double excess = 0.5 * norm - restArea;
  if (norm > 0) {
    // dE/dx_i = k (A - A0) 1/2 nh x e_i
    const Vec3 scaled = (0.5 * stiffness * excess / norm) * n;
    g[0] = scaled.cross(x[2] - x[1]);
    g[1] = scaled.cross(x[0] - x[2]);
    g[2] = scaled.cross(x[1] - x[0]);
  } else {
    g[0].setZero();
    g[1].setZero();
    g[2].setZero();
  }
  return 0.5 * stiffness * excess * excess;
}

// Same, with the 9x9 Hessian over (x0, x1, x2).
double triangleEnergyHessian(double stiffness, double restArea, const Vec3 (&x)[3], Vec3 (&g)[3],
                             Mat9& hessian);

// ---- hinge -----------------------------------------------------------------------------

// Signed dihedral angle theta of the hinge (x0, x1, x2, x3), radians in (-pi, pi].
inline double dihedralAngle(const Vec3& x0, const Vec3& x1, const Vec3& x2, const Vec3& x3) {
  const Vec3 e = x1 - x0;
  const Vec3 nA = e.cross(x2 - x0);
  const Vec3 fB = x3 - x0;
  const Vec3 nB = fB.cross(e);
  // (nA x nB) . e = -(nA . fB) |e|^2 ((a x b) x (c x d) = ((a x b) . d) c - ((a x b) . c) d);
  // both arguments divided by |e|.
  return atan2Poly(-nA.dot(fB) * e.norm(), nA.dot(nB));
}

// theta and its gradient dtheta/dx_i (see the header comment).
inline double dihedralAngleGradient(const Vec3 (&x)[4], Vec3 (&g)[4]) {
  const Vec3 e = x[1] - x[0];
  const Vec3 fA = x[2] - x[0];
  const Vec3 fB = x[3] - x[0];
  const Vec3 nA = e.cross(fA);
  const Vec3 nB = fB.cross(e);
  const double ee = e.squaredNorm();
  const double eLen = std::sqrt(ee);
  const double theta = atan2Poly(-nA.dot(fB) * eLen, nA.dot(nB));  // as dihedralAngle
  const double nA2 = nA.squaredNorm();
  const double nB2 = nB.squaredNorm();
  if (!(nA2 > 0) || !(nB2 > 0) || !(ee > 0)) {
    for (Vec3& v : g) v.setZero();
    return theta;
  }
  // One division for the three reciprocals 1/|nA|^2, 1/|nB|^2, 1/|e|^2.
  const double inverse = 1.0 / (nA2 * nB2 * ee);
  const Vec3 vA = (eLen * nB2 * ee * inverse) * nA;
  const Vec3 vB = (eLen * nA2 * ee * inverse) * nB;
  const double invEE = nA2 * nB2 * inverse;
  const double sA = fA.dot(e) * invEE;
  const double sB = fB.dot(e) * invEE;
  g[0] = (1 - sA) * vA + (1 - sB) * vB;
  g[1] = sA * vA + sB * vB;
  g[2] = -vA;
  g[3] = -vB;
  return theta;
}

// theta, its gradient and its 12x12 Hessian over (x0, x1, x2, x3).
double dihedralAngleHessian(const Vec3 (&x)[4], Vec3 (&g)[4], Mat12& hessian);

// E = 1/2 k wrap(theta - theta0)^2 and dE/dx.
inline double hingeEnergy(double stiffness, double restAngle, const Vec3 (&x)[4], Vec3 (&g)[4]) {
  const double theta = dihedralAngleGradient(x, g);
  const double d = wrapAngle(theta - restAngle);
  const double scale = stiffness * d;
  for (Vec3& v : g) v *= scale;
  return 0.5 * stiffness * d * d;
}

// Same, with the 12x12 Hessian.
double hingeEnergyHessian(double stiffness, double restAngle, const Vec3 (&x)[4], Vec3 (&g)[4],
                          Mat12& hessian);

// ---- hinge and its edge, in batches ------------------------------------------------------

// The hinge and edge stencils of one interior edge fused, for kLanes hinges at a time in
// structure-of-arrays form (lane l = one hinge), so that the loops over lanes vectorize:
// E_l = 1/2 k_h wrap(theta - theta0)^2 (bending)  +  1/2 k_e (|x1 - x0| - L)^2 (stretching),
// the same formulas as hingeEnergy and edgeEnergy above (the edge of the hinge is its edge
// stencil x0 - x1), with atan2Poly for theta, one square root (|e|) and two divisions per
// hinge: one in atan2Poly, one for both 1/|e|^2 and 1/(|nA|^2 |nB|^2). wrap() is the
// branch-free x -+ 2 pi for |x| < 3 pi, all a difference of two angles in (-pi, pi] needs.
// Degenerate lanes (zero edge or normal) give zero derivatives as the scalar kernels do; a
// lane with all four nodes equal and zero stiffnesses (padding) gives exact zeros.
inline constexpr int kLanes = 8;

// x: node positions, (4 slots x0..x3, 3 axes, kLanes), m.
// parameters: (4, kLanes): theta0 (rad), k_h (N m), rest length L of the edge x0 - x1 (m),
//   its stiffness k_e (N/m).
// Writes the energies bending and stretching, (kLanes) each, J, dE/dx into gradient,
// (4 slots, kLanes, 3 axes), J/m: the three components of a slot side by side, as the gather
// pass reads them, and shape, (2, kLanes): theta (rad) and |x1 - x0| (m). Rest values taken
// from shape (not from dihedralAngle or Eigen's norm, which may round differently, e.g. with
// FMA) make the energy and forces at rest exactly zero.
void hingeEdgeEnergyLanes(const double* __restrict x, const double* __restrict parameters,
                          double* __restrict bending, double* __restrict stretching,
                          double* __restrict gradient, double* __restrict shape);

// hingeEdgeEnergyLanes over `batches` consecutive batches, positions gathered from
// xs (N, 3), m, by offsets (batches, 4 slots, kLanes), each node's 3 n (lane_gather.hpp):
// parameters (batches, 4, kLanes) and gradient (batches, 4 slots, kLanes, 3) as there; the
// lanes' energies are added to bending and stretching, (kLanes) each, batch after batch.
// mayReachEnd: some lane's node may be xs's last (N - 1); false only when none is (the
// gather then reads one value past each node, see gatherLanePositions).
void hingeEdgeEnergyBatches(const double* __restrict xs, const int32_t* __restrict offsets,
                            const double* __restrict parameters, int64_t batches, bool mayReachEnd,
                            double* __restrict bending, double* __restrict stretching,
                            double* __restrict gradient);

// The triangle stencil (triangleEnergy) for kLanes triangles at a time, the same way.
// x: (3 slots, 3 axes, kLanes), m. parameters: (2, kLanes): k_T (N/m^3), A0 (m^2).
// Writes energy, (kLanes), J, gradient, (3 slots, kLanes, 3 axes), J/m, and area, (kLanes),
// m^2 (rest areas taken from it make the rest state exactly force-free, as for hinges).
void triangleEnergyLanes(const double* __restrict x, const double* __restrict parameters,
                         double* __restrict energy, double* __restrict gradient,
                         double* __restrict area);

// triangleEnergyLanes over `batches` consecutive batches, gathered as hingeEdgeEnergyBatches
// gathers (offsets (batches, 3, kLanes)); parameters (batches, 2, kLanes), gradient
// (batches, 3, kLanes, 3); the lanes' energies are added to energy, (kLanes).
void triangleEnergyBatches(const double* __restrict xs, const int32_t* __restrict offsets,
                           const double* __restrict parameters, int64_t batches, bool mayReachEnd,
                           double* __restrict energy, double* __restrict gradient);

// ---- positive semi-definite projection -------------------------------------------------

// Replaces a symmetric matrix by its nearest positive semi-definite matrix (Frobenius):
// V max(Lambda, 0) V^T from its eigen-decomposition. A matrix whose negative eigenvalues
// are round-off (>= -1e-12 of the largest magnitude, e.g. the zero modes of a stencil at
// rest) is left untouched.
template <int N>
void projectToPositiveSemiDefinite(Eigen::Matrix<double, N, N>& m) {
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix<double, N, N>> eigen(m);
  const auto& values = eigen.eigenvalues();
  if (values.minCoeff() >= -1e-12 * values.cwiseAbs().maxCoeff()) return;
  const Eigen::Matrix<double, N, 1> clamped = values.cwiseMax(0.0);
  m = eigen.eigenvectors() * clamped.asDiagonal() * eigen.eigenvectors().transpose();
}

}  // namespace shellsim::discrete_shell
