// The face stencil of the inelastic thin shells of gingold2004 (section 2.1, 3.1; notes in
// ../shared/specs/gingold2004.md, sections 2-4): a triangle (x0, x1, x2), counter-clockwise
// about its outward normal, and the three flap vertices across its edges, six nodes:
//
//                 f1 o-------o x2 o-------o f0        edge i is opposite corner i, from
//                     \     / \     /                 x_{i+1} to x_{i+2}; flap f_i is the
//                      \   /   \   /                  apex of the neighbour across edge i
//                       x0 o-----o x1                 (slot 3 + i of the stencil)
//                           \   /
//                            \ /
//                             o f2
//
// Rest data (tilde = deformed, no tilde = rest), in the face's rest plane:
//   v_i = X_{i+2} - X_{i+1}, l_i = |v_i|, A the rest area, t_i = v_i turned by 90 degrees
//   in the plane (|t_i| = l_i; the sense does not matter, t's come in pairs).
// Membrane (Green) strain from the squared edge lengths s_i = |x_{i+2} - x_{i+1}|^2 - l_i^2:
//   E_m = sum_i s_i M_i,   M_i = -(t_j t_k^T + t_k t_j^T) / (16 A^2)      ((i, j, k) cyclic)
//   (the paper's Eq. 2 has the opposite sign and twice the value: it drops the 1/2 of
//   E = 1/2 (F^T F - I) and v_i . t_j, v_i . t_k have opposite signs; the tests check
//   E_m = 1/2 (F^T F - I) on random triangles).
// Bending strain (the paper's shape-operator difference, Fig. 5):
//   E_c = sum_i dphi_i T_i,   T_i = t_i t_i^T / (2 A l_i)   [1/m],
//   dphi_i = phi(theta_i) - phi(theta0_i),   phi(theta) = 2 tan(theta / 2),
//   theta_i the signed dihedral angle across edge i (discrete_shell_kernel.hpp: > 0 where
//   convex), 0 on a boundary edge. phi' = 1 + phi^2 / 4, phi'' = phi / 2 (1 + phi^2 / 4).
//   phi diverges at theta = +-pi (a fold flat onto itself, the paper's barrier); theta is
//   clamped to +-(pi - 1e-3) there, where the energy stops growing (and its derivatives
//   are those of the clamped value: zero).
// Energy (Koiter, section 3.1, over the rest area so that the forces are its exact
// gradient): with plane-stress densities
//   W_m = h Y / (2 (1 - nu^2)) [(1 - nu) tr E_m^2 + nu (tr E_m)^2],
//   W_b = Y h^3 / (24 (1 - nu^2)) [(1 - nu) tr E_c^2 + nu (tr E_c)^2],
// A W_m = e^T Cm e with e_i = s_i - p_i and Cm_ij = K_m [(1 - nu) tr(M_i M_j) + nu tr M_i
// tr M_j], K_m = A h Y / (2 (1 - nu^2)); A W_b = c^T Cb c with c_i = dphi_i - q_i and Cb
// likewise from the T_i with K_b = A Y h^3 / (24 (1 - nu^2)). p_i, q_i are the plastic
// strains stored as triples (notes section 5.3), folded into the rest values below.
// Derivatives: ds_i/dx_{i+2} = 2 d_i = -ds_i/dx_{i+1} (d_i the current edge vector),
// dc_i/dx = phi'_i dtheta_i/dx;
//   g = 2 sum_i (Cm e)_i ds_i + 2 sum_i (Cb c)_i phi'_i dtheta_i,
//   H = 2 sum_ij Cm_ij ds_i ds_j^T + 2 sum_i (Cm e)_i d2s_i
//     + 2 sum_ij Cb_ij phi'_i phi'_j dtheta_i dtheta_j^T
//     + 2 sum_i (Cb c)_i (phi''_i dtheta_i dtheta_i^T + phi'_i d2theta_i),
//   d2s_i = 2 [I -I; -I I] on (x_{i+1}, x_{i+2}).
// A boundary edge has no flap: its slot holds the face's own corner i and c_i = 0.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>

#include "core/vec3.hpp"

namespace shellsim::inelastic_shell {

using Mat18 = Eigen::Matrix<double, 18, 18>;

// What the stencil of one face needs, fixed between inelastic updates.
struct FaceParams {
  std::array<double, 9> membrane{};  // Cm (3x3, row-major), J/m^4
  std::array<double, 9> bending{};   // Cb (3x3, row-major), J
  // l_i^2 + p_i: e_i = |x_{i+2} - x_{i+1}|^2 - restSquaredLength[i], m^2.
  std::array<double, 3> restSquaredLength{};
  // phi(theta0_i) + q_i: c_i = phi(theta_i) - restPhi[i], 1.
  std::array<double, 3> restPhi{};
  std::array<uint8_t, 3> hinged{};  // 1 where edge i has a flap
};

// The rest data of a face from its rest corners X (counter-clockwise) and its rest
// dihedral angles (0 on a boundary edge), for Young's modulus Y (Pa), Poisson ratio nu,
// thickness h (m). M and T: the bases above as 2x2 in an orthonormal frame of the rest
// plane (first axis along X1 - X0), each (3, 2, 2) row-major; null when not wanted.
FaceParams faceParams(const Vec3 (&rest)[3], const std::array<double, 3>& restAngle,
                      const std::array<uint8_t, 3>& hinged, double youngModulus, double poisson,
                      double thickness, double* membraneBasis = nullptr,
                      double* bendingBasis = nullptr);

// phi(theta) = 2 tan(theta / 2) and its first two derivatives, theta clamped as above.
struct Phi {
  double value, first, second;
};
Phi phi(double theta);

// Energies of one face (J), the gradient g over its six slots and, with h non-null, its
// Hessian (18 x 18, slot-major).
struct FaceEnergy {
  double stretching = 0;
  double bending = 0;
};
FaceEnergy faceEnergy(const FaceParams& params, const Vec3 (&x)[6], Vec3 (&g)[6],
                      Mat18* hessian = nullptr);

// The strains of a face at x: E_m (1) and E_c (1/m) as 2x2 in the face's rest frame,
// row-major, from the bases faceParams wrote (for tests, plasticity and fracture).
void faceStrains(const FaceParams& params, const double* membraneBasis, const double* bendingBasis,
                 const Vec3 (&x)[6], double (&membrane)[4], double (&bending)[4]);

}  // namespace shellsim::inelastic_shell
