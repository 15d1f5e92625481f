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
