// Hessians and node-coordinate wrappers of the fiber kernel; the derivation is in
// fiber_kernel.hpp.
#include "models/fiber/fiber_kernel.hpp"

namespace shellsim::fiber {

Mat6 arcLengthHessianReduced(const Reduced& z, int samples) {
  // l~ = (1/n) sum |e -+ a_i q|;  d2|v|/dv2 = (I - u u^T)/|v|,  dv/d(e, q) = (I, -+a_i I).
  Mat6 h = Mat6::Zero();
  const double invN = 1.0 / samples;
  for (int i = 0; i < samples; ++i) {
    const double a = sampleWeight(i, samples);
    for (const double sign : {-1.0, 1.0}) {
      const Vec3 v = z.e + sign * a * z.q;
      const double length = v.norm();
      if (!(length > 0)) continue;
      const Vec3 u = v / length;
      const Mat3 k = invN * (Mat3::Identity() - u * u.transpose()) / length;
      h.topLeftCorner<3, 3>() += k;
      h.topRightCorner<3, 3>() += sign * a * k;
      h.bottomLeftCorner<3, 3>() += sign * a * k;
      h.bottomRightCorner<3, 3>() += a * a * k;
    }
  }
  return h;
}

Mat6 tangentAngleHessianReduced(const Reduced& z, const Vec3& normal) {
  using Vec6 = Eigen::Matrix<double, 6, 1>;
  constexpr double kBeta = kTangentWeight;
  const AngleTerms t = angleTerms(z, normal);
  const double r2 = t.x * t.x + t.y * t.y;
  if (!(r2 > 0) || !(t.s > 0)) return Mat6::Zero();
  const Mat3 identity = Mat3::Identity();
  const Vec3& e = z.e;
  const Vec3& q = z.q;
  const Vec3& n = normal;

  // Y = (e.N)(q.e) - |e|^2 (q.N): gradient and Hessian.
  Vec6 dY;
  dY << t.qe * n + t.eN * q - 2.0 * t.qN * e, t.eN * e - t.ee * n;
  Mat6 hY = Mat6::Zero();
  hY.topLeftCorner<3, 3>() = n * q.transpose() + q * n.transpose() - 2.0 * t.qN * identity;
  hY.topRightCorner<3, 3>() = n * e.transpose() + t.eN * identity - 2.0 * e * n.transpose();
  hY.bottomLeftCorner<3, 3>() = hY.topRightCorner<3, 3>().transpose();

  // g = 1/s, s = |P e|: gradient and Hessian (e block only).
  const Vec3 pe = e - t.eN * n;
  const double g = 1.0 / t.s;
  const double g3 = g * g * g;
  Vec6 dg = Vec6::Zero();
  dg.head<3>() = -g3 * pe;
  Mat6 hg = Mat6::Zero();
  hg.topLeftCorner<3, 3>() =
      -g3 * (identity - n * n.transpose()) + 3.0 * g3 * g * g * pe * pe.transpose();

  // y = 2 beta Y g, x = |e|^2 - beta^2 |q|^2.
  const Vec6 dy = 2.0 * kBeta * (g * dY + t.yNum * dg);
  const Mat6 hy = 2.0 * kBeta * (g * hY + dY * dg.transpose() + dg * dY.transpose() + t.yNum * hg);
  Vec6 dx;
  dx << 2.0 * e, -2.0 * kBeta * kBeta * q;
  Mat6 hx = Mat6::Zero();
  hx.topLeftCorner<3, 3>() = 2.0 * identity;
  hx.bottomRightCorner<3, 3>() = -2.0 * kBeta * kBeta * identity;

  // Second derivatives of atan2(y, x).
  const double r4 = r2 * r2;
  const double thetaX = -t.y / r2;
  const double thetaY = t.x / r2;
  const double thetaXX = 2.0 * t.x * t.y / r4;
  const double thetaXY = (t.y * t.y - t.x * t.x) / r4;
  return thetaX * hx + thetaY * hy + thetaXX * (dx * dx.transpose() - dy * dy.transpose()) +
         thetaXY * (dx * dy.transpose() + dy * dx.transpose());
}

Mat9 expandReducedHessian(const Mat6& h) {
  // z = J p with J = [[-1/2 I, 0, 1/2 I], [I, -2 I, I]] (rows e, q; columns p1, p, p2).
  Eigen::Matrix<double, 6, 9> j = Eigen::Matrix<double, 6, 9>::Zero();
  const Mat3 identity = Mat3::Identity();
  j.block<3, 3>(0, 0) = -0.5 * identity;
  j.block<3, 3>(0, 6) = 0.5 * identity;
  j.block<3, 3>(3, 0) = identity;
  j.block<3, 3>(3, 3) = -2.0 * identity;
  j.block<3, 3>(3, 6) = identity;
  return j.transpose() * h * j;
}

double fiberArcLength(const Vec3 x[3], int samples, Vec3 gradient[3], Mat9* hessian) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  Vec3 ge, gq;
  const double length = arcLength(z, samples, gradient != nullptr ? &ge : nullptr,
                                  gradient != nullptr ? &gq : nullptr);
  if (gradient != nullptr) {
    for (int slot = 0; slot < 3; ++slot) gradient[slot] = fiberSlotGradient(slot, ge, gq);
  }
  if (hessian != nullptr) *hessian = expandReducedHessian(arcLengthHessianReduced(z, samples));
  return length;
}

double fiberTangentAngle(const Vec3 x[3], const Vec3& normal, Vec3 gradient[3], Mat9* hessian) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  Vec3 ge, gq;
  const double theta = tangentAngle(z, normal, gradient != nullptr ? &ge : nullptr,
                                    gradient != nullptr ? &gq : nullptr);
  if (gradient != nullptr) {
    for (int slot = 0; slot < 3; ++slot) gradient[slot] = fiberSlotGradient(slot, ge, gq);
  }
  if (hessian != nullptr) *hessian = expandReducedHessian(tangentAngleHessianReduced(z, normal));
  return theta;
}

Vec3 splinePoint(const Vec3 x[3], double t) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  if (t < 0.5) {
    // f1(s) = a1 + b1 s + d1 s^3, a1 = p1, b1 = e - 3/4 q, d1 = q/4   (eq. (31), (32))
    const double s = 2.0 * t;
    return x[0] + s * (z.e - kTangentWeight * z.q) + (0.25 * s * s * s) * z.q;
  }
  // f2(s) = a2 + b2 s + c2 s^2 + d2 s^3, a2 = p, b2 = e, c2 = 3/4 q, d2 = -q/4
  const double s = 2.0 * (t - 0.5);
  return x[1] + s * z.e + (0.75 * s * s - 0.25 * s * s * s) * z.q;
}

Vec3 splineDerivative(const Vec3 x[3], double t) {
  const Reduced z = reduce(x[0], x[1], x[2]);
  if (t < 0.5) {
    const double s = 2.0 * t;
    return 2.0 * (z.e - kTangentWeight * (1.0 - s * s) * z.q);
  }
  const double s = 2.0 * (t - 0.5);
  return 2.0 * (z.e + kTangentWeight * (1.0 - (1.0 - s) * (1.0 - s)) * z.q);
}

}  // namespace shellsim::fiber
