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
//
// Quadratic-patch bending (the default; the paper's operator above stays an option): E_c
// above is consistent only where every flap is the parallelogram completion of its face
// (notes section 3), and a face on a boundary sees no curvature across its boundary edge.
// Instead, each face fits one quadratic height function over the nodes of the faces within
// two steps across edges (12 nodes inside a manifold mesh: the corners, the three flaps and
// the six nodes beyond them; more steps near a boundary, to at least 8 nodes), with
// parameters (u_b, v_b) their rest positions projected onto the face's rest plane (frame:
// origin X0, first axis along X1 - X0), by least squares:
//   V = rows (1, u, v, u^2, u v, v^2) of the nodes (scaled, centred on the face),
//   x_{,k} = y_k = sum_b w_{k,b} x_b,  k in (uu, vv, uv),  w the second-derivative rows of V^+,
//   kappa_k = -n . y_k,   n = (x1 - x0) x (x2 - x0) / |...| the face's unit normal,
// exact for every quadratic surface (first-order accurate on any mesh; the face normal stands
// for the surface's), > 0 where convex like E_c above. An exact six-node fit is not enough:
// on the sheet primitive's alternating diagonals every six-node patch is a cross centred on
// a valence-4 vertex, so a checkerboard looks like a uniform curvature to every face and the
// plate comes out 1.5-1.75 times too soft (measured). The least-squares residual of the
// extra nodes is therefore penalized too, in an orthonormal basis Q (columns) of the
// complement of V's range (the residual r = (I - V V^+) z = Q Q^T z):
//   rho_j = -n . sum_b Q_{b,j} x_b,  j < nodes - 6,
//   A W_b = c^T Cb c + s sum_j (rho_j - rho0_j)^2,   c = kappa - kappa0 - P_c,
//   Cb = K_b [[1, nu, 0], [nu, 1, 0], [0, 0, 2 (1 - nu)]],   s = beta K_b / (2 A)^2,
// beta = kResidualWeight (2): zero for a quadratic, O(h^2) relative for a smooth surface;
// measured on simply supported plates it keeps the alternating and jittered meshes within
// 2 % of Kirchhoff (tests/dynamics/test_static.cpp). Every component q (3 curvatures, then
// the residuals) has the form q = -n . y_q, y_q = sum_b w_{q,b} x_b, so with
// f(x) = n . ytilde, ytilde = sum_q lambda_q y_q (fixed lambda), z = (I - n n^T) ytilde / r,
// r = |m|, m = e1 x e2, e1 = x1 - x0, e2 = x2 - x0:
//   df/dx_b = wtilde_b n + Dm_b^T z,   Dm_0 = [e2 - e1]x, Dm_1 = -[e2]x, Dm_2 = [e1]x,
//   d2f/dx_a dx_b = wtilde_a J_b + wtilde_b J_a^T + Dm_a^T Hm Dm_b + Z_ab,
//   J_a = (I - n n^T) Dm_a / r,
//   Hm = -(ytilde n^T + n ytilde^T + (ytilde . n) (I - 3 n n^T)) / r^2,
//   Z_01 = Z_12 = Z_20 = -[z]x, Z_10 = Z_21 = Z_02 = [z]x, Z_aa = 0
// (Z from z . (e1 x e2), bilinear); with G the component energy's multipliers
// (2 Cb c, 2 s rho), g = -sum_q G_q grad f_q and H = 2 Dq Cq Dq^T + the f Hessian with
// lambda = -G.
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
  // 1 where the face bends by its quadratic patch (PatchParams) instead of the operator.
  uint8_t quadratic = 0;
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

// The quadratic patch of a face (header): up to kPatchNodes nodes, its component weights and
// rest values. Slots past `nodes` have zero weights.
constexpr int kPatchNodes = 12;
constexpr int kPatchComponents = 3 + (kPatchNodes - 6);
constexpr double kResidualWeight = 2.0;
using Mat36 = Eigen::Matrix<double, 3 * kPatchNodes, 3 * kPatchNodes>;
struct PatchParams {
  // w_{q,b}: rows kappa xx, yy, xy (1/m^2), then the residual modes Q^T (1), (components, nodes).
  std::array<double, kPatchComponents * kPatchNodes> weights{};
  // kappa0 + P_c (1/m), then rho0 (m).
  std::array<double, kPatchComponents> rest{};
  std::array<double, 3> elasticCurvature{};  // kappa0 (xx, yy, xy), 1/m
  std::array<double, 9> bending{};           // Cb, 3 x 3 row-major, J m^2
  double residualStiffness = 0;              // s, J/m^2
  int32_t nodes = 0;                         // slots used
};

// The patch of a face from its nodes' rest parameters uv (first `count` rows: the corners,
// then the others) and rest positions; false where the fit is ill-posed (fewer than 6 nodes,
// or the nodes near one conic: the reciprocal condition of the scaled V below 1e-3).
bool patchParams(const Eigen::Matrix<double, kPatchNodes, 2>& uv, const Vec3 (&rest)[kPatchNodes],
                 int count, double youngModulus, double poisson, double thickness,
                 PatchParams& out);

// Energies of a face bending by its patch, over the kPatchNodes slots (membrane on slots
// 0-2); gradient and, with h, Hessian.
FaceEnergy patchFaceEnergy(const FaceParams& params, const PatchParams& patch,
                           const Vec3 (&x)[kPatchNodes], Vec3 (&g)[kPatchNodes],
                           Mat36* hessian = nullptr);

// The elastic bending strain E_c of a patch face at x (2x2 row-major, rest frame).
void patchBendingStrain(const PatchParams& patch, const Vec3 (&x)[kPatchNodes],
                        double (&bending)[4]);

// The face's rest frame: origin X0, axes a along X1 - X0 and b = n x a; a point's (u, v).
struct RestFrame {
  Vec3 origin, a, b, normal;
  [[nodiscard]] Eigen::Vector2d of(const Vec3& p) const {
    return {(p - origin).dot(a), (p - origin).dot(b)};
  }
};
RestFrame restFrame(const Vec3 (&rest)[3]);

}  // namespace shellsim::inelastic_shell
