#include "models/inelastic_shell/inelastic_shell_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "models/discrete_shell/discrete_shell_kernel.hpp"

namespace shellsim::inelastic_shell {

namespace {

using Mat2 = Eigen::Matrix2d;
using Vec2 = Eigen::Vector2d;

// Slots of the hinge of edge i in the face stencil: (x_{i+1}, x_{i+2}, x_i, f_i), the
// discrete shell's hinge (x0, x1, x2, x3) with triangle A the face itself.
constexpr int kHingeSlots[3][4] = {{1, 2, 0, 3}, {2, 0, 1, 4}, {0, 1, 2, 5}};

// (1 - nu) tr(P Q) + nu tr P tr Q for symmetric 2x2 P, Q.
double pairing(const Mat2& p, const Mat2& q, double poisson) {
  return (1 - poisson) * (p.cwiseProduct(q)).sum() + poisson * p.trace() * q.trace();
}

}  // namespace

Phi phi(double theta) {
  constexpr double kLimit = std::numbers::pi - 1e-3;
  if (std::abs(theta) > kLimit) {
    return {2 * std::tan(0.5 * std::copysign(kLimit, theta)), 0.0, 0.0};
  }
  const double value = 2 * std::tan(0.5 * theta);
  const double first = 1 + 0.25 * value * value;
  return {value, first, 0.5 * value * first};
}

FaceParams faceParams(const Vec3 (&rest)[3], const std::array<double, 3>& restAngle,
                      const std::array<uint8_t, 3>& hinged, double youngModulus, double poisson,
                      double thickness, double* membraneBasis, double* bendingBasis) {
  // An orthonormal frame of the rest plane: a along X1 - X0, b = n x a.
  const Vec3 normal = (rest[1] - rest[0]).cross(rest[2] - rest[0]);
  const double area = 0.5 * normal.norm();
  const Vec3 a = (rest[1] - rest[0]).normalized();
  const Vec3 b = normal.normalized().cross(a);
  Vec2 t[3];
  double length[3];
  FaceParams params;
  for (int i = 0; i < 3; ++i) {
    const Vec3 v = rest[(i + 2) % 3] - rest[(i + 1) % 3];
    const Vec2 v2(v.dot(a), v.dot(b));
    t[i] = Vec2(-v2.y(), v2.x());
    length[i] = v2.norm();
    params.restSquaredLength[static_cast<size_t>(i)] = v.squaredNorm();
    params.hinged[static_cast<size_t>(i)] = hinged[static_cast<size_t>(i)];
    params.restPhi[static_cast<size_t>(i)] =
        hinged[static_cast<size_t>(i)] != 0 ? phi(restAngle[static_cast<size_t>(i)]).value : 0.0;
  }
  Mat2 m[3], tt[3];
  for (int i = 0; i < 3; ++i) {
    const Vec2& tj = t[(i + 1) % 3];
    const Vec2& tk = t[(i + 2) % 3];
    m[i] = -(tj * tk.transpose() + tk * tj.transpose()) / (16 * area * area);
    tt[i] = t[i] * t[i].transpose() / (2 * area * length[i]);
  }
  const double denominator = 1 - poisson * poisson;
  const double km = area * thickness * youngModulus / (2 * denominator);
  const double kb = area * youngModulus * thickness * thickness * thickness / (24 * denominator);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      params.membrane[static_cast<size_t>(3 * i + j)] = km * pairing(m[i], m[j], poisson);
      params.bending[static_cast<size_t>(3 * i + j)] =
          hinged[static_cast<size_t>(i)] != 0 && hinged[static_cast<size_t>(j)] != 0
              ? kb * pairing(tt[i], tt[j], poisson)
              : 0.0;
    }
  }
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 4; ++k) {
      if (membraneBasis != nullptr) membraneBasis[4 * i + k] = m[i](k / 2, k % 2);
      if (bendingBasis != nullptr) bendingBasis[4 * i + k] = tt[i](k / 2, k % 2);
    }
  }
  return params;
}

FaceEnergy faceEnergy(const FaceParams& params, const Vec3 (&x)[6], Vec3 (&g)[6], Mat18* hessian) {
  // Membrane: e_i and its multiplier (Cm e)_i.
  Vec3 edge[3];
  double e[3];
  for (int i = 0; i < 3; ++i) {
    edge[i] = x[(i + 2) % 3] - x[(i + 1) % 3];
    e[i] = edge[i].squaredNorm() - params.restSquaredLength[static_cast<size_t>(i)];
  }
  double me[3], stretching = 0;
  for (int i = 0; i < 3; ++i) {
    me[i] = 0;
    for (int j = 0; j < 3; ++j) me[i] += params.membrane[static_cast<size_t>(3 * i + j)] * e[j];
    stretching += e[i] * me[i];
  }
  for (Vec3& v : g) v.setZero();
  for (int i = 0; i < 3; ++i) {
    const Vec3 ds = 2 * edge[i];  // ds_i/dx_{i+2}
    g[(i + 2) % 3] += 2 * me[i] * ds;
    g[(i + 1) % 3] -= 2 * me[i] * ds;
  }

  // Bending: c_i, phi'_i, dtheta_i over the hinge's four slots.
  double c[3] = {0, 0, 0};
  Phi ph[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  Vec3 dtheta[3][4];
  discrete_shell::Mat12 d2theta[3];
  for (int i = 0; i < 3; ++i) {
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    const Vec3 hinge[4] = {x[kHingeSlots[i][0]], x[kHingeSlots[i][1]], x[kHingeSlots[i][2]],
                           x[kHingeSlots[i][3]]};
    const double theta = hessian != nullptr
                             ? discrete_shell::dihedralAngleHessian(hinge, dtheta[i], d2theta[i])
                             : discrete_shell::dihedralAngleGradient(hinge, dtheta[i]);
    ph[i] = phi(theta);
    c[i] = ph[i].value - params.restPhi[static_cast<size_t>(i)];
  }
  double bc[3], bending = 0;
  for (int i = 0; i < 3; ++i) {
    bc[i] = 0;
    for (int j = 0; j < 3; ++j) bc[i] += params.bending[static_cast<size_t>(3 * i + j)] * c[j];
    bending += c[i] * bc[i];
  }
  for (int i = 0; i < 3; ++i) {
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    for (int k = 0; k < 4; ++k) g[kHingeSlots[i][k]] += 2 * bc[i] * ph[i].first * dtheta[i][k];
  }
  if (hessian == nullptr) return {stretching, bending};

  // Hessian, as the header's four sums; ds_i and phi'_i dtheta_i as 18-vectors.
  Mat18& h = *hessian;
  h.setZero();
  Eigen::Matrix<double, 18, 3> ds = Eigen::Matrix<double, 18, 3>::Zero();
  Eigen::Matrix<double, 18, 3> dc = Eigen::Matrix<double, 18, 3>::Zero();
  for (int i = 0; i < 3; ++i) {
    ds.block<3, 1>(3 * ((i + 2) % 3), i) = 2 * edge[i];
    ds.block<3, 1>(3 * ((i + 1) % 3), i) = -2 * edge[i];
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    for (int k = 0; k < 4; ++k) {
      dc.block<3, 1>(3 * kHingeSlots[i][k], i) += ph[i].first * dtheta[i][k];
    }
  }
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> cm(params.membrane.data());
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> cb(params.bending.data());
  h.noalias() += 2 * ds * cm * ds.transpose();
  h.noalias() += 2 * dc * cb * dc.transpose();
  for (int i = 0; i < 3; ++i) {
    const int a = 3 * ((i + 1) % 3), b = 3 * ((i + 2) % 3);
    const double w = 2 * me[i] * 2;
    for (int k = 0; k < 3; ++k) {
      h(a + k, a + k) += w;
      h(b + k, b + k) += w;
      h(a + k, b + k) -= w;
      h(b + k, a + k) -= w;
    }
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    Eigen::Matrix<double, 12, 1> dt;
    for (int k = 0; k < 4; ++k) dt.segment<3>(3 * k) = dtheta[i][k];
    const discrete_shell::Mat12 local =
        2 * bc[i] * (ph[i].second * dt * dt.transpose() + ph[i].first * d2theta[i]);
    for (int p = 0; p < 4; ++p) {
      for (int q = 0; q < 4; ++q) {
        h.block<3, 3>(3 * kHingeSlots[i][p], 3 * kHingeSlots[i][q]) +=
            local.block<3, 3>(3 * p, 3 * q);
      }
    }
  }
  return {stretching, bending};
}

void faceStrains(const FaceParams& params, const double* membraneBasis, const double* bendingBasis,
                 const Vec3 (&x)[6], double (&membrane)[4], double (&bending)[4]) {
  for (int k = 0; k < 4; ++k) membrane[k] = bending[k] = 0;
  for (int i = 0; i < 3; ++i) {
    const double e = (x[(i + 2) % 3] - x[(i + 1) % 3]).squaredNorm() -
                     params.restSquaredLength[static_cast<size_t>(i)];
    double c = 0;
    if (params.hinged[static_cast<size_t>(i)] != 0) {
      const Vec3 hinge[4] = {x[kHingeSlots[i][0]], x[kHingeSlots[i][1]], x[kHingeSlots[i][2]],
                             x[kHingeSlots[i][3]]};
      Vec3 unused[4];
      const double theta = discrete_shell::dihedralAngleGradient(hinge, unused);
      c = phi(theta).value - params.restPhi[static_cast<size_t>(i)];
    }
    for (int k = 0; k < 4; ++k) {
      membrane[k] += e * membraneBasis[4 * i + k];
      bending[k] += c * bendingBasis[4 * i + k];
    }
  }
}

}  // namespace shellsim::inelastic_shell
