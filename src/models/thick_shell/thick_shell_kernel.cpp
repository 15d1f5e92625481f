#include "models/thick_shell/thick_shell_kernel.hpp"

namespace shellsim::thick_shell {

namespace {

// Maps a Hessian in y_k = x_k - x0 (k = 1..K-1) to one in x_0..x_{K-1}: H_x = T^T H_y T with
// T = [-I, I, 0...; -I, 0, I, ...].
template <int K>
void toNodeHessian(const Eigen::Matrix<double, 3 * (K - 1), 3 * (K - 1)>& hy,
                   Eigen::Matrix<double, 3 * K, 3 * K>& hx) {
  hx.setZero();
  hx.template bottomRightCorner<3 * (K - 1), 3 * (K - 1)>() = hy;
  for (int a = 1; a < K; ++a) {
    Eigen::Matrix3d rowSum = Eigen::Matrix3d::Zero(), colSum = Eigen::Matrix3d::Zero();
    for (int b = 1; b < K; ++b) {
      rowSum += hy.template block<3, 3>(3 * (a - 1), 3 * (b - 1));
      colSum += hy.template block<3, 3>(3 * (b - 1), 3 * (a - 1));
    }
    hx.template block<3, 3>(3 * a, 0) = -rowSum;
    hx.template block<3, 3>(0, 3 * a) = -colSum;
  }
  Eigen::Matrix3d all = Eigen::Matrix3d::Zero();
  for (int a = 1; a < K; ++a) {
    for (int b = 1; b < K; ++b) all += hy.template block<3, 3>(3 * (a - 1), 3 * (b - 1));
  }
  hx.template block<3, 3>(0, 0) = all;
}

}  // namespace

[[gnu::noinline]] double triangleArea(const Vec3& x0, const Vec3& x1, const Vec3& x2) {
  return 0.5 * (x1 - x0).cross(x2 - x0).norm();
}

[[gnu::noinline]] double tetVolume(const Vec3& x0, const Vec3& x1, const Vec3& x2, const Vec3& x3) {
  return (x1 - x0).dot((x2 - x0).cross(x3 - x0)) / 6.0;
}

double areaEnergyGradient(double stiffness, double restArea, const Vec3 (&x)[3],
                          Vec3 (&gradient)[3], Eigen::Matrix<double, 9, 9>* hessian) {
  const Vec3 y1 = x[1] - x[0], y2 = x[2] - x[0];
  const Vec3 n = y1.cross(y2);
  const double length = n.norm();
  const double constraint = (triangleArea(x[0], x[1], x[2]) - restArea) / restArea;
  const double energy = 0.5 * stiffness * constraint * constraint;
  if (!(length > 0)) {
    for (Vec3& g : gradient) g.setZero();
    if (hessian != nullptr) hessian->setZero();
    return energy;
  }
  const Vec3 unit = n / length;
  // dC/dy = dA/dy / A0.
  Eigen::Matrix<double, 6, 1> dC;
  dC.head<3>() = 0.5 * y2.cross(unit) / restArea;
  dC.tail<3>() = 0.5 * unit.cross(y1) / restArea;
  const double scale = stiffness * constraint;
  gradient[1] = scale * dC.head<3>();
  gradient[2] = scale * dC.tail<3>();
  gradient[0] = -gradient[1] - gradient[2];
  if (hessian != nullptr) {
    Eigen::Matrix<double, 3, 6> jacobian;
    jacobian.leftCols<3>() = -crossMatrix(y2);
    jacobian.rightCols<3>() = crossMatrix(y1);
    Eigen::Matrix<double, 6, 6> d2A = jacobian.transpose() *
                                      (Eigen::Matrix3d::Identity() - unit * unit.transpose()) *
                                      jacobian / length;
    d2A.topRightCorner<3, 3>() -= crossMatrix(unit);
    d2A.bottomLeftCorner<3, 3>() += crossMatrix(unit);
    d2A *= 0.5;
    const Eigen::Matrix<double, 6, 6> hy =
        stiffness * (dC * dC.transpose() + constraint * d2A / restArea);
    toNodeHessian<3>(hy, *hessian);
  }
  return energy;
}

double volumeEnergyGradient(double stiffness, double restVolume, const Vec3 (&x)[4],
                            Vec3 (&gradient)[4], Eigen::Matrix<double, 12, 12>* hessian) {
  const Vec3 y1 = x[1] - x[0], y2 = x[2] - x[0], y3 = x[3] - x[0];
  const double constraint = (tetVolume(x[0], x[1], x[2], x[3]) - restVolume) / restVolume;
  Eigen::Matrix<double, 9, 1> dC;
  dC.segment<3>(0) = y2.cross(y3) / (6.0 * restVolume);
  dC.segment<3>(3) = y3.cross(y1) / (6.0 * restVolume);
  dC.segment<3>(6) = y1.cross(y2) / (6.0 * restVolume);
  const double scale = stiffness * constraint;
  gradient[0].setZero();
  for (int k = 1; k < 4; ++k) {
    gradient[k] = scale * dC.segment<3>(3 * (k - 1));
    gradient[0] -= gradient[k];
  }
  if (hessian != nullptr) {
    Eigen::Matrix<double, 9, 9> d2V = Eigen::Matrix<double, 9, 9>::Zero();
    d2V.block<3, 3>(0, 3) = -crossMatrix(y3);
    d2V.block<3, 3>(0, 6) = crossMatrix(y2);
    d2V.block<3, 3>(3, 6) = -crossMatrix(y1);
    d2V.block<3, 3>(3, 0) = d2V.block<3, 3>(0, 3).transpose();
    d2V.block<3, 3>(6, 0) = d2V.block<3, 3>(0, 6).transpose();
    d2V.block<3, 3>(6, 3) = d2V.block<3, 3>(3, 6).transpose();
    d2V /= 6.0;
    const Eigen::Matrix<double, 9, 9> hy =
        stiffness * (dC * dC.transpose() + constraint * d2V / restVolume);
    toNodeHessian<4>(hy, *hessian);
  }
  return 0.5 * stiffness * constraint * constraint;
}

}  // namespace shellsim::thick_shell
