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

// strainEnergyDensity's isotropic case without a tangent: the same formulas on plain
// scalars, since Eigen's 3 x 3 temporaries made them wait on the stack (mixed-width stores
// and loads that cannot forward) for a quarter of the force evaluation of a bunny of
// phyxels; inline, since a call into another file cost that evaluation 9 % more (22.7
// against 20.6 us for 190 phyxels, BM_MlsGradient).
inline double isotropicDensity(const Mat3& F, const Elasticity& material, const Mat3* plastic,
                               Mat3* stress, double scale) {
  double f[3][3];  // f[r][c] = F(r, c)
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) f[r][c] = F(r, c);
  }
  double e[3][3];  // Green strain minus the plastic strain
  for (int a = 0; a < 3; ++a) {
    for (int b = a; b < 3; ++b) {
      const double c = f[0][a] * f[0][b] + f[1][a] * f[1][b] + f[2][a] * f[2][b];
      e[a][b] = 0.5 * (c - (a == b ? 1.0 : 0.0)) - (plastic != nullptr ? (*plastic)(a, b) : 0.0);
      e[b][a] = e[a][b];
    }
  }
  const double trace = e[0][0] + e[1][1] + e[2][2];
  double S[3][3];
  double contraction = 0;
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      S[a][b] = 2.0 * material.mu * e[a][b] + (a == b ? material.lambda * trace : 0.0);
      contraction += S[a][b] * e[a][b];
    }
  }
  // Cofactor columns: cof_0 = F_1 x F_2, cof_1 = F_2 x F_0, cof_2 = F_0 x F_1.
  double cof[3][3];  // cof[r][c]
  for (int c = 0; c < 3; ++c) {
    const int i = (c + 1) % 3, j = (c + 2) % 3;
    cof[0][c] = f[1][i] * f[2][j] - f[2][i] * f[1][j];
    cof[1][c] = f[2][i] * f[0][j] - f[0][i] * f[2][j];
    cof[2][c] = f[0][i] * f[1][j] - f[1][i] * f[0][j];
  }
  const double J = f[0][0] * cof[0][0] + f[1][0] * cof[1][0] + f[2][0] * cof[2][0];
  const double volume = scale * J - 1.0;
  const double energy = 0.5 * contraction + 0.5 * material.volumeStiffness * volume * volume;
  if (stress != nullptr) {
    const double pressure = material.volumeStiffness * volume * scale;
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) {
        (*stress)(r, c) =
            f[r][0] * S[0][c] + f[r][1] * S[1][c] + f[r][2] * S[2][c] + pressure * cof[r][c];
      }
    }
  }
  return energy;
}

}  // namespace shellsim::mls
