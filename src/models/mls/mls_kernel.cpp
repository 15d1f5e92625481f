#include "models/mls/mls_kernel.hpp"

namespace shellsim::mls {

Mat3 cofactor(const Mat3& F) {
  Mat3 c;
  c.col(0) = F.col(1).cross(F.col(2));
  c.col(1) = F.col(2).cross(F.col(0));
  c.col(2) = F.col(0).cross(F.col(1));
  return c;
}

namespace {

// The second Piola-Kirchhoff stress of a strain, S = dPsi/dE (linear in E): isotropic, or the
// sheet law about the normal n (see the header).
Mat3 secondPiola(const Mat3& strain, const Elasticity& material, const Eigen::Vector3d* normal) {
  if (normal == nullptr) {
    return 2.0 * material.mu * strain + material.lambda * strain.trace() * Mat3::Identity();
  }
  const Eigen::Vector3d& n = *normal;
  const Mat3 tangential = Mat3::Identity() - n * n.transpose();
  const Mat3 inPlane = tangential * strain * tangential;
  const Eigen::Vector3d shear = tangential * (strain * n);
  const double across = n.dot(strain * n);
  const double mu = material.mu, lambda = material.lambda;
  const double planeLambda = 2.0 * lambda * mu / (lambda + 2.0 * mu);
  return 2.0 * mu * inPlane + planeLambda * inPlane.trace() * tangential +
         2.0 * mu * (shear * n.transpose() + n * shear.transpose()) +
         (lambda + 2.0 * mu) * across * n * n.transpose();
}

// The isotropic energy density and its first Piola-Kirchhoff stress on plain scalars: the
// same formulas as strainEnergyDensity below, which Eigen's 3 x 3 temporaries made wait on
// the stack (mixed-width stores and loads that cannot forward) for a quarter of the force
// evaluation of a bunny of phyxels.
double isotropicDensity(const Mat3& F, const Elasticity& material, const Mat3* plastic,
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

}  // namespace

double strainEnergyDensity(const Mat3& F, const Elasticity& material, const Mat3* plastic,
                           Mat3* stress, Tangent* tangent, double volumeScale,
                           const Eigen::Vector3d* sheetNormal) {
  if (sheetNormal == nullptr && tangent == nullptr) {
    return isotropicDensity(F, material, plastic, stress, volumeScale);
  }
  const Mat3 identity = Mat3::Identity();
  Mat3 green = 0.5 * (F.transpose() * F - identity);
  if (plastic != nullptr) green -= *plastic;
  const double scale = volumeScale;
  const double J = F.determinant();
  // Psi is quadratic in the strain: Psi = S(E) : E / 2.
  const Mat3 S = secondPiola(green, material, sheetNormal);
  const double energy = 0.5 * S.cwiseProduct(green).sum() +
                        0.5 * material.volumeStiffness * (scale * J - 1.0) * (scale * J - 1.0);
  if (stress == nullptr && tangent == nullptr) return energy;
  const Mat3 cof = cofactor(F);
  if (stress != nullptr)
    *stress = F * S + material.volumeStiffness * (scale * J - 1.0) * scale * cof;
  if (tangent != nullptr) {
    for (int b = 0; b < 3; ++b) {
      for (int d = 0; d < 3; ++d) {
        Mat3 dF = Mat3::Zero();
        dF(b, d) = 1.0;
        const Mat3 FtdF = F.transpose() * dF;
        const Mat3 dE = 0.5 * (FtdF + FtdF.transpose());
        const Mat3 dS = secondPiola(dE, material, sheetNormal);
        Mat3 dCof;
        dCof.col(0) = dF.col(1).cross(F.col(2)) + F.col(1).cross(dF.col(2));
        dCof.col(1) = dF.col(2).cross(F.col(0)) + F.col(2).cross(dF.col(0));
        dCof.col(2) = dF.col(0).cross(F.col(1)) + F.col(0).cross(dF.col(1));
        const double dJ = cof(b, d);  // cof : dF
        const Mat3 dP =
            dF * S + F * dS +
            material.volumeStiffness * scale * (scale * dJ * cof + (scale * J - 1.0) * dCof);
        for (int a = 0; a < 3; ++a) {
          for (int c = 0; c < 3; ++c) (*tangent)(3 * a + c, 3 * b + d) = dP(a, c);
        }
      }
    }
  }
  return energy;
}

}  // namespace shellsim::mls
