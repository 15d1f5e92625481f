#include "models/inelastic_shell/inelastic_shell_kernel.hpp"

#include <Eigen/SVD>
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

namespace {

using Mat3 = Eigen::Matrix3d;

Mat3 cross(const Vec3& v) {
  Mat3 m;
  m << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
  return m;
}

// The paper's operator (header): bending energy, its gradient added to g and, with h, its
// Hessian added to h.
double operatorBending(const FaceParams& params, const Vec3 (&x)[6], Vec3 (&g)[6], Mat18* h) {
  double c[3] = {0, 0, 0};
  Phi ph[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  Vec3 dtheta[3][4];
  discrete_shell::Mat12 d2theta[3];
  for (int i = 0; i < 3; ++i) {
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    const Vec3 hinge[4] = {x[kHingeSlots[i][0]], x[kHingeSlots[i][1]], x[kHingeSlots[i][2]],
                           x[kHingeSlots[i][3]]};
    const double theta = h != nullptr
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
  if (h == nullptr) return bending;
  Eigen::Matrix<double, 18, 3> dc = Eigen::Matrix<double, 18, 3>::Zero();
  for (int i = 0; i < 3; ++i) {
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    for (int k = 0; k < 4; ++k) {
      dc.block<3, 1>(3 * kHingeSlots[i][k], i) += ph[i].first * dtheta[i][k];
    }
  }
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> cb(params.bending.data());
  h->noalias() += 2 * dc * cb * dc.transpose();
  for (int i = 0; i < 3; ++i) {
    if (params.hinged[static_cast<size_t>(i)] == 0) continue;
    Eigen::Matrix<double, 12, 1> dt;
    for (int k = 0; k < 4; ++k) dt.segment<3>(3 * k) = dtheta[i][k];
    const discrete_shell::Mat12 local =
        2 * bc[i] * (ph[i].second * dt * dt.transpose() + ph[i].first * d2theta[i]);
    for (int p = 0; p < 4; ++p) {
      for (int q = 0; q < 4; ++q) {
        h->block<3, 3>(3 * kHingeSlots[i][p], 3 * kHingeSlots[i][q]) +=
            local.block<3, 3>(3 * p, 3 * q);
      }
    }
  }
  return bending;
}

// The components q of a patch at x (header): the unit normal, |m|, the edge vectors, the
// sums y_q and the values -n . y_q.
struct PatchState {
  Vec3 y[kPatchComponents];
  Vec3 e1, e2, normal;
  double r;
  double value[kPatchComponents];
};
PatchState patchAt(const PatchParams& patch, const Vec3 (&x)[kPatchNodes]) {
  PatchState p;
  for (int q = 0; q < kPatchComponents; ++q) {
    p.y[q].setZero();
    for (int b = 0; b < patch.nodes; ++b) {
      p.y[q] += patch.weights[static_cast<size_t>(kPatchNodes * q + b)] * x[b];
    }
  }
  p.e1 = x[1] - x[0];
  p.e2 = x[2] - x[0];
  const Vec3 m = p.e1.cross(p.e2);
  p.r = m.norm();
  p.normal = m / p.r;
  for (int q = 0; q < kPatchComponents; ++q) p.value[q] = -p.normal.dot(p.y[q]);
  return p;
}

// Adds the gradient of f = n . ytilde (header) to g, for ytilde = sum_q lambda_q y_q; returns
// ytilde, z and wtilde_b = sum_q lambda_q w_{q,b} for the Hessian.
void addPatchGradient(const PatchParams& patch, const PatchState& p,
                      const double (&lambda)[kPatchComponents], Vec3 (&g)[kPatchNodes],
                      Vec3& ytilde, Vec3& z, double (&wtilde)[kPatchNodes]) {
  ytilde.setZero();
  for (int q = 0; q < kPatchComponents; ++q) ytilde += lambda[q] * p.y[q];
  for (int b = 0; b < kPatchNodes; ++b) {
    wtilde[b] = 0;
    for (int q = 0; q < kPatchComponents; ++q) {
      wtilde[b] += lambda[q] * patch.weights[static_cast<size_t>(kPatchNodes * q + b)];
    }
    g[b] += wtilde[b] * p.normal;
  }
  z = (ytilde - p.normal * p.normal.dot(ytilde)) / p.r;
  const Vec3 g1 = p.e2.cross(z), g2 = z.cross(p.e1);
  g[1] += g1;
  g[2] += g2;
  g[0] -= g1 + g2;
}

// The patch's bending energy; its gradient added to g and, with h, its Hessian to h.
double patchBending(const PatchParams& patch, const Vec3 (&x)[kPatchNodes], Vec3 (&g)[kPatchNodes],
                    Mat36* h) {
  const PatchState p = patchAt(patch, x);
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> cb(patch.bending.data());
  double c[kPatchComponents], multiplier[kPatchComponents];
  for (int q = 0; q < kPatchComponents; ++q) {
    c[q] = p.value[q] - patch.rest[static_cast<size_t>(q)];
  }
  const Eigen::Vector3d bc = cb * Eigen::Vector3d(c[0], c[1], c[2]);
  double energy = c[0] * bc[0] + c[1] * bc[1] + c[2] * bc[2];
  for (int q = 0; q < 3; ++q) multiplier[q] = 2 * bc[q];
  for (int q = 3; q < kPatchComponents; ++q) {
    energy += patch.residualStiffness * c[q] * c[q];
    multiplier[q] = 2 * patch.residualStiffness * c[q];
  }
  // dE = sum_q multiplier_q dvalue_q = d(n . ytilde) with lambda = -multiplier.
  double lambda[kPatchComponents];
  for (int q = 0; q < kPatchComponents; ++q) lambda[q] = -multiplier[q];
  Vec3 ytilde, z;
  double wtilde[kPatchNodes];
  addPatchGradient(patch, p, lambda, g, ytilde, z, wtilde);
  if (h == nullptr) return energy;

  // 2 Dq Cq Dq^T, Dq the components' gradients (-grad f_q), Cq = diag(Cb, s I).
  Eigen::Matrix<double, 3 * kPatchNodes, kPatchComponents> dq;
  for (int q = 0; q < kPatchComponents; ++q) {
    double unit[kPatchComponents] = {};
    unit[q] = -1;
    Vec3 gq[kPatchNodes];
    for (Vec3& v : gq) v.setZero();
    Vec3 unusedY, unusedZ;
    double unusedW[kPatchNodes];
    addPatchGradient(patch, p, unit, gq, unusedY, unusedZ, unusedW);
    for (int b = 0; b < kPatchNodes; ++b) dq.block<3, 1>(3 * b, q) = gq[b];
  }
  const auto curvature = dq.leftCols<3>();
  const auto residual = dq.rightCols<kPatchComponents - 3>();
  h->noalias() += 2 * curvature * cb * curvature.transpose();
  h->noalias() += 2 * patch.residualStiffness * residual * residual.transpose();

  // The Hessian of f = n . ytilde.
  const Vec3& n = p.normal;
  const Mat3 projector = Mat3::Identity() - n * n.transpose();
  const Mat3 dm[3] = {cross(p.e2 - p.e1), -cross(p.e2), cross(p.e1)};
  Mat3 jn[3];
  for (int a = 0; a < 3; ++a) jn[a] = projector * dm[a] / p.r;
  const double yn = ytilde.dot(n);
  const Mat3 hm = -(ytilde * n.transpose() + n * ytilde.transpose() +
                    yn * (Mat3::Identity() - 3 * n * n.transpose())) /
                  (p.r * p.r);
  const Mat3 zx = cross(z);
  for (int a = 0; a < kPatchNodes; ++a) {
    if (wtilde[a] == 0) continue;
    for (int b = 0; b < 3; ++b) {
      // wtilde_a J_b at (a, b); for the pair the other way round, wtilde_a J_b^T at (b, a).
      h->block<3, 3>(3 * a, 3 * b) += wtilde[a] * jn[b];
      h->block<3, 3>(3 * b, 3 * a) += wtilde[a] * jn[b].transpose();
    }
  }
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) h->block<3, 3>(3 * a, 3 * b) += dm[a].transpose() * hm * dm[b];
  }
  h->block<3, 3>(0, 3) -= zx;
  h->block<3, 3>(3, 6) -= zx;
  h->block<3, 3>(6, 0) -= zx;
  h->block<3, 3>(3, 0) += zx;
  h->block<3, 3>(6, 3) += zx;
  h->block<3, 3>(0, 6) += zx;
  return energy;
}

// Membrane energy of the face on slots 0-2 of any stencil: gradient set on g (all slots, the
// others zero) and, with h, the Hessian set (the rest zero).
template <int N>
double membrane(const FaceParams& params, const Vec3 (&x)[N], Vec3 (&g)[N],
                Eigen::Matrix<double, 3 * N, 3 * N>* hessian) {
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
  if (hessian == nullptr) return stretching;
  // The membrane's two sums of the header; ds_i as 9-vectors over the corners.
  auto& h = *hessian;
  h.setZero();
  Eigen::Matrix<double, 9, 3> ds = Eigen::Matrix<double, 9, 3>::Zero();
  for (int i = 0; i < 3; ++i) {
    ds.block<3, 1>(3 * ((i + 2) % 3), i) = 2 * edge[i];
    ds.block<3, 1>(3 * ((i + 1) % 3), i) = -2 * edge[i];
  }
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> cm(params.membrane.data());
  h.template topLeftCorner<9, 9>().noalias() += 2 * ds * cm * ds.transpose();
  for (int i = 0; i < 3; ++i) {
    const int a = 3 * ((i + 1) % 3), b = 3 * ((i + 2) % 3);
    const double w = 2 * me[i] * 2;
    for (int k = 0; k < 3; ++k) {
      h(a + k, a + k) += w;
      h(b + k, b + k) += w;
      h(a + k, b + k) -= w;
      h(b + k, a + k) -= w;
    }
  }
  return stretching;
}

}  // namespace

bool patchParams(const Eigen::Matrix<double, kPatchNodes, 2>& uv, const Vec3 (&rest)[kPatchNodes],
                 int count, double youngModulus, double poisson, double thickness,
                 PatchParams& out) {
  if (count < 6 || count > kPatchNodes) return false;
  const double area = 0.5 * (rest[1] - rest[0]).cross(rest[2] - rest[0]).norm();
  const double length = std::sqrt(2 * area);
  if (!(length > 0)) return false;
  const Eigen::Vector2d centre = (uv.row(0) + uv.row(1) + uv.row(2)).transpose() / 3;
  Eigen::MatrixXd v(count, 6);
  for (int a = 0; a < count; ++a) {
    const double u = (uv(a, 0) - centre.x()) / length, w = (uv(a, 1) - centre.y()) / length;
    v.row(a) << 1, u, w, u * u, u * w, w * w;
  }
  // Well-posed when the columns are far from dependent: the smallest singular value of the
  // scaled V over its largest.
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(v, Eigen::ComputeFullU | Eigen::ComputeThinV);
  const Eigen::VectorXd sigma = svd.singularValues();
  if (!(sigma[5] > 1e-3 * sigma[0])) return false;
  // V^+ = V_s diag(1 / sigma) U_6^T; the residual basis: U's columns past the sixth, which
  // span the complement of V's range.
  const Eigen::MatrixXd& q = svd.matrixU();
  const Eigen::MatrixXd pseudoInverse =
      svd.matrixV() * sigma.cwiseInverse().asDiagonal() * q.leftCols(6).transpose();
  out = PatchParams{};
  out.nodes = count;
  const double scale = 1 / (length * length);
  for (int b = 0; b < count; ++b) {
    out.weights[static_cast<size_t>(b)] = 2 * pseudoInverse(3, b) * scale;
    out.weights[static_cast<size_t>(kPatchNodes + b)] = 2 * pseudoInverse(5, b) * scale;
    out.weights[static_cast<size_t>(2 * kPatchNodes + b)] = pseudoInverse(4, b) * scale;
    for (int j = 0; j < count - 6; ++j) {
      out.weights[static_cast<size_t>(kPatchNodes * (3 + j) + b)] = q(b, 6 + j);
    }
  }
  const double kb =
      area * youngModulus * thickness * thickness * thickness / (24 * (1 - poisson * poisson));
  out.bending = {kb, kb * poisson, 0, kb * poisson, kb, 0, 0, 0, 2 * kb * (1 - poisson)};
  out.residualStiffness = kResidualWeight * kb / (length * length * length * length);
  const PatchState p = patchAt(out, rest);
  for (int q2 = 0; q2 < kPatchComponents; ++q2) out.rest[static_cast<size_t>(q2)] = p.value[q2];
  for (size_t k = 0; k < 3; ++k) out.elasticCurvature[k] = out.rest[k];
  return true;
}

FaceEnergy patchFaceEnergy(const FaceParams& params, const PatchParams& patch,
                           const Vec3 (&x)[kPatchNodes], Vec3 (&g)[kPatchNodes], Mat36* hessian) {
  const double stretching = membrane<kPatchNodes>(params, x, g, hessian);
  return {stretching, patchBending(patch, x, g, hessian)};
}

void patchBendingStrain(const PatchParams& patch, const Vec3 (&x)[kPatchNodes],
                        double (&bending)[4]) {
  const PatchState p = patchAt(patch, x);
  bending[0] = p.value[0] - patch.rest[0];
  bending[3] = p.value[1] - patch.rest[1];
  bending[1] = bending[2] = p.value[2] - patch.rest[2];
}

RestFrame restFrame(const Vec3 (&rest)[3]) {
  RestFrame frame;
  frame.origin = rest[0];
  frame.normal = (rest[1] - rest[0]).cross(rest[2] - rest[0]).normalized();
  frame.a = (rest[1] - rest[0]).normalized();
  frame.b = frame.normal.cross(frame.a);
  return frame;
}

FaceEnergy faceEnergy(const FaceParams& params, const Vec3 (&x)[6], Vec3 (&g)[6], Mat18* hessian) {
  const double stretching = membrane<6>(params, x, g, hessian);
  return {stretching, operatorBending(params, x, g, hessian)};
}

void faceStrains(const FaceParams& params, const double* membraneBasis, const double* bendingBasis,
                 const Vec3 (&x)[6], double (&membrane)[4], double (&bending)[4]) {
  for (int k = 0; k < 4; ++k) membrane[k] = bending[k] = 0;

  for (int i = 0; i < 3; ++i) {
    const double e = (x[(i + 2) % 3] - x[(i + 1) % 3]).squaredNorm() -
                     params.restSquaredLength[static_cast<size_t>(i)];
    double c = 0;
    // A patch face's bending strain is the patch's (patchBendingStrain).
    if (params.quadratic == 0 && params.hinged[static_cast<size_t>(i)] != 0) {
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
