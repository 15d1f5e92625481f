// The per-phyxel kernels of the meshless volume model (muller2004, sections 3.2-3.5).
//
// Conventions (notes specs/muller2004.md, B1): F is the deformation gradient, the paper's J
// (eq. 1); the paper's strain eps = F^T F - I (eq. 3) is twice the Green strain, which makes
// its material 4 times stiffer than St Venant-Kirchhoff of the same (E, nu). This model uses
// the standard Green strain E = (F^T F - I) / 2, so E and nu mean what they mean elsewhere;
// reproducing the paper's look needs 4 E.
#pragma once

#include <Eigen/Core>
#include <Eigen/Geometry>  // cross products
#include <Eigen/LU>        // determinant

namespace shellsim::mls {

using Mat3 = Eigen::Matrix3d;
using Tangent = Eigen::Matrix<double, 9, 9>;  // dP_ac / dF_bd at (3a + c, 3b + d)

// The poly6 kernel of muller2004 eq. (9) without its normalisation 315 / (64 pi h^9):
// (1 - r^2 / h^2)^3 for r < h, else 0. The MLS vectors d_j = A^-1 x_ij w_ij (eq. 21) do not
// depend on the kernel's scale, so the constant is left out.
[[nodiscard]] inline double poly6Shape(double r2, double h2) {
  if (r2 >= h2) return 0.0;
  const double s = 1.0 - r2 / h2;
  return s * s * s;
}

// Lame parameters and the volume term's stiffness.
struct Elasticity {
  double mu = 0;               // shear modulus E / (2 (1 + nu)), Pa
  double lambda = 0;           // E nu / ((1 + nu)(1 - 2 nu)), Pa
  double volumeStiffness = 0;  // k_v of muller2004 eq. (7), Pa
};

// cof(F) = det(F) F^-T, columns f1 x f2, f2 x f0, f0 x f1 for the columns f_i of F
// (muller2004 eq. 22 writes its rows of the transpose).
[[nodiscard]] Mat3 cofactor(const Mat3& F);

// The energy density per rest volume, J/m^3, with the plastic strain E_p (muller2004 section
// 4.1: the elastic strain is the total less the plastic, E_e = E - E_p; null: none),
//   Psi(F) = mu E_e:E_e + lambda / 2 tr(E_e)^2 + k_v / 2 (det F - 1)^2,  E = (F^T F - I) / 2,
// St Venant-Kirchhoff (muller2004 eqs. 4-5 in the standard convention) plus the volume
// term of eq. (7). Writes the first Piola-Kirchhoff stress P = dPsi/dF = F S + k_v (J - 1)
// cof(F), S = 2 mu E_e + lambda tr(E_e) I, when `stress` is given, and the tangent dP/dF (the
// notes' B5: dP = dF S + F dS, dS = 2 mu dE + lambda tr(dE) I, dE = sym(F^T dF), plus
// k_v ((cof : dF) cof + (J - 1) dcof)) when `tangent` is given.
// volumeScale a: the volume term measures a det F against 1 (a melt's reference has a
// times the original volume), 1/2 k_v (a J - 1)^2, so that P gains k_v (a J - 1) a cof(F).
//
// sheetNormal n (unit, in the reference), when given: the phyxel is one of two layers of a
// sheet, which cannot show a thickness strain that varies across the sheet; the isotropic
// law would then hold the thickness strain of bending at 0 and stiffen bending by up to
// (1 - nu)^2 / (1 - 2 nu) (Poisson locking of solid shells). The sheet law replaces the
// coupling through the thickness by plane stress in the sheet: with E_t = (I - nn^T) E
// (I - nn^T), g = (I - nn^T) E n, e = n^T E n,
//   Psi = mu E_t:E_t + lambda' / 2 tr(E_t)^2 + 2 mu |g|^2 + (lambda + 2 mu) / 2 e^2,
// lambda' = 2 lambda mu / (lambda + 2 mu) = E nu / (1 - nu^2), the same as the isotropic
// law for every strain with e = 0 when nu = 0, and S = 2 mu E_t + lambda' tr(E_t) (I - nn^T) +
// 2 mu (g n^T + n g^T) + (lambda + 2 mu) e nn^T.
double strainEnergyDensity(const Mat3& F, const Elasticity& material, const Mat3* plastic,
                           Mat3* stress, Tangent* tangent, double volumeScale = 1.0,
                           const Eigen::Vector3d* sheetNormal = nullptr);

}  // namespace shellsim::mls
