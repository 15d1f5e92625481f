// The inelastic thin shells of gingold2004 (models/inelastic_shell): the Green membrane
// strain, the shape-operator bending strain against closed forms, the energies against the
// plate's, and the energy contract.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numbers>
#include <numeric>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "core/byte_stream.hpp"
#include "geometry/primitives.hpp"
#include "geometry/triangle_mesh.hpp"
#include "models/inelastic_shell/inelastic_shell_model.hpp"
#include "models/model_contract.hpp"
#include "models/shell_test_util.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

using inelastic_shell::FaceEnergy;

MaterialDef aluminium(double poisson = 0.3) {
  MaterialDef m;
  m.youngModulus = 7e10;
  m.poisson = poisson;
  m.thickness = 3e-4;
  m.density = 2700;
  return m;
}

using testing::blended;
using testing::plateRigidity;
using testing::primitive;

// A right-angled grid in z = 0 with every quad split along the same diagonal (valence 6
// everywhere: each flap is the parallelogram completion of its face), counter-clockwise
// about +z.
Geometry oneWayGrid(int cells, double spacing) {
  Geometry g;
  for (int j = 0; j <= cells; ++j) {
    for (int i = 0; i <= cells; ++i) {
      g.positions.insert(g.positions.end(), {spacing * i, spacing * j, 0.0});
    }
  }
  const auto id = [&](int i, int j) { return j * (cells + 1) + i; };
  for (int j = 0; j < cells; ++j) {
    for (int i = 0; i < cells; ++i) {
      g.triangles.insert(g.triangles.end(), {id(i, j), id(i + 1, j), id(i + 1, j + 1)});
      g.triangles.insert(g.triangles.end(), {id(i, j), id(i + 1, j + 1), id(i, j + 1)});
    }
  }
  return g;
}

Geometry singleTriangle(const Vec3& a, const Vec3& b, const Vec3& c) {
  Geometry g;
  g.positions = {a.x(), a.y(), a.z(), b.x(), b.y(), b.z(), c.x(), c.y(), c.z()};
  g.triangles = {0, 1, 2};
  return g;
}

// The faces none of whose flaps is missing.
std::vector<size_t> interiorFaces(const InelasticShellModel& model) {
  std::vector<size_t> faces;
  for (size_t f = 0; f < static_cast<size_t>(model.elementCount()); ++f) {
    const auto& hinged = model.face(f).hinged;
    if (hinged[0] != 0 && hinged[1] != 0 && hinged[2] != 0) faces.push_back(f);
  }
  return faces;
}

FaceEnergy faceEnergyAt(const InelasticShellModel& model, size_t f, std::span<const double> x) {
  FaceEnergy energy;
  model.withStencilWidth([&]<int N>() {
    Vec3 xs[N], g[N];
    for (size_t k = 0; k < static_cast<size_t>(N); ++k) {
      xs[k] = row(x, static_cast<size_t>(model.faceStencils()[N * f + k]));
    }
    energy = model.evaluateFace<N>(f, xs, g, nullptr);
  });
  return energy;
}

// The face's rest area, from its corners in the rest mesh.
double restArea(const InelasticShellModel& model, const Geometry& rest, size_t f) {
  const auto corner = [&](int c) {
    return row(rest.positions,
               static_cast<size_t>(
                   model.faceStencils()[model.stencilWidth() * f + static_cast<size_t>(c)]));
  };
  return 0.5 * (corner(1) - corner(0)).cross(corner(2) - corner(0)).norm();
}

TEST(InelasticShellMembrane, IsTheGreenStrainOfTheAffineMapOnRandomTriangles) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 50; ++trial) {
    const Vec3 rest[3] = {Vec3(normal(rng), normal(rng), normal(rng)),
                          Vec3(normal(rng), normal(rng), normal(rng)),
                          Vec3(normal(rng), normal(rng), normal(rng))};
    const Geometry mesh = singleTriangle(rest[0], rest[1], rest[2]);
    const InelasticShellModel model(mesh, aluminium());
    // Rest frame: a along X1 - X0, b = n x a; rest coordinates u_k; a random 3x2 map F.
    const Vec3 a = (rest[1] - rest[0]).normalized();
    const Vec3 b = (rest[1] - rest[0]).cross(rest[2] - rest[0]).normalized().cross(a);
    Eigen::Matrix<double, 3, 2> f;
    for (int i = 0; i < 6; ++i) f(i / 2, i % 2) = (i / 2 == i % 2 ? 1.0 : 0.0) + 0.3 * normal(rng);
    std::vector<double> x(9);
    for (int k = 0; k < 3; ++k) {
      const Eigen::Vector2d u((rest[k] - rest[0]).dot(a), (rest[k] - rest[0]).dot(b));
      const Vec3 p = f * u + Vec3(1, 2, 3);
      for (int c = 0; c < 3; ++c) x[3 * static_cast<size_t>(k) + static_cast<size_t>(c)] = p[c];
    }
    double membrane[4], bending[4];
    model.faceStrains(x, 0, membrane, bending);
    const Eigen::Matrix2d green = 0.5 * (f.transpose() * f - Eigen::Matrix2d::Identity());
    for (int k = 0; k < 4; ++k) {
      EXPECT_NEAR(membrane[k], green(k / 2, k % 2), 1e-12 * (1 + green.norm())) << trial;
      EXPECT_EQ(bending[k], 0.0);
    }
    // The energy is the plane-stress St Venant-Kirchhoff energy of that strain.
    const MaterialDef m = aluminium();
    const double area = 0.5 * (rest[1] - rest[0]).cross(rest[2] - rest[0]).norm();
    const double expected =
        area * m.thickness * m.youngModulus / (2 * (1 - m.poisson * m.poisson)) *
        ((1 - m.poisson) * (green * green).trace() + m.poisson * green.trace() * green.trace());
    EXPECT_NEAR(model.energy(x).stretching, expected, 1e-11 * expected) << trial;
  }
}

TEST(InelasticShellMembrane, UniformScalingAndRigidMotion) {
  const Geometry mesh = singleTriangle(Vec3(0, 0, 0), Vec3(2, 0.1, 0), Vec3(0.4, 1.3, 0.2));
  const InelasticShellModel model(mesh, aluminium());
  const double eps = 0.01;
  std::vector<double> scaled = mesh.positions;
  for (double& v : scaled) v *= 1 + eps;
  double membrane[4], bending[4];
  model.faceStrains(scaled, 0, membrane, bending);
  EXPECT_NEAR(membrane[0], eps + eps * eps / 2, 1e-14);
  EXPECT_NEAR(membrane[3], eps + eps * eps / 2, 1e-14);
  EXPECT_NEAR(membrane[1], 0.0, 1e-14);
  const Eigen::Matrix3d r =
      Eigen::AngleAxisd(1.1, Vec3(1, -2, 0.5).normalized()).toRotationMatrix();
  std::vector<double> moved(9);
  for (size_t k = 0; k < 3; ++k) {
    const Vec3 p = r * row(mesh.positions, k) + Vec3(-3, 4, 1);
    for (size_t c = 0; c < 3; ++c) moved[3 * k + c] = p[c];
  }
  model.faceStrains(moved, 0, membrane, bending);
  for (const double v : membrane) EXPECT_NEAR(v, 0.0, 1e-14);
}

// A flat mesh mapped onto a cylinder of radius R whose curved direction is
// d = (cos psi, sin psi) (the axis along (-sin psi, cos psi)), or onto the sphere of radius
// R as a height field z = R - sqrt(R^2 - r^2) around `centre`.
std::vector<double> rolledOntoCylinder(const Geometry& flat, double radius, double psi) {
  std::vector<double> x = flat.positions;
  const Eigen::Vector2d d(std::cos(psi), std::sin(psi)), axis(-std::sin(psi), std::cos(psi));
  for (size_t k = 0; k < x.size() / 3; ++k) {
    const Eigen::Vector2d u(x[3 * k], x[3 * k + 1]);
    const double s = u.dot(d), w = u.dot(axis);
    const Eigen::Vector2d inPlane = radius * std::sin(s / radius) * d + w * axis;
    x[3 * k] = inPlane.x();
    x[3 * k + 1] = inPlane.y();
    x[3 * k + 2] = radius * (1 - std::cos(s / radius));
  }
  return x;
}

std::vector<double> liftedOntoSphere(const Geometry& flat, double radius, const Vec3& centre) {
  std::vector<double> x = flat.positions;
  for (size_t k = 0; k < x.size() / 3; ++k) {
    const double r2 = std::pow(x[3 * k] - centre.x(), 2) + std::pow(x[3 * k + 1] - centre.y(), 2);
    x[3 * k + 2] = radius - std::sqrt(radius * radius - r2);
  }
  return x;
}

// E_c in the face's rest frame (a along its rest edge x0 -> x1) as a world-plane tensor.
Eigen::Matrix2d bendingInPlane(const InelasticShellModel& model, const Geometry& flat,
                               std::span<const double> x, size_t f) {
  double membrane[4], bending[4];
  model.faceStrains(x, f, membrane, bending);
  const size_t width = model.stencilWidth();
  const Vec3 x0 = row(flat.positions, static_cast<size_t>(model.faceStencils()[width * f]));
  const Vec3 x1 = row(flat.positions, static_cast<size_t>(model.faceStencils()[width * f + 1]));
  const Vec3 a3 = (x1 - x0).normalized();
  Eigen::Matrix2d frame;  // columns: a, b = z x a in world xy
  frame << a3.x(), -a3.y(), a3.y(), a3.x();
  Eigen::Matrix2d local;
  local << bending[0], bending[1], bending[2], bending[3];
  return frame * local * frame.transpose();
}

// Notes section 3: on a mesh whose flaps are parallelogram completions, E_c R = d d^T for
// a cylinder of any direction and E_c R = I for a sphere, up to O(a / R) (the sign: the
// surface curves towards the normal, a valley, theta < 0).
// Both bending discretizations.
constexpr InelasticShellBending kBendings[] = {InelasticShellBending::kQuadraticPatch,
                                               InelasticShellBending::kShapeOperator};

InelasticShellParams withBending(InelasticShellBending bending) {
  InelasticShellParams params;
  params.bending = bending;
  return params;
}

TEST(InelasticShellBending, ShapeOperatorOfCylindersAndSphereOnRegularMeshes) {
  const double radius = 1.0;
  for (const InelasticShellBending bending : kBendings)
    for (const Geometry& flat : {makeEquilateralLattice(12, 12, 0.01), oneWayGrid(12, 0.01)}) {
      const InelasticShellModel model(flat, aluminium(), withBending(bending));
      const std::vector<size_t> faces = interiorFaces(model);
      ASSERT_GT(faces.size(), 100u);
      for (const double psi : {0.0, 0.4, 1.0, 2.2}) {
        const std::vector<double> x = rolledOntoCylinder(flat, radius, psi);
        const Eigen::Vector2d d(std::cos(psi), std::sin(psi));
        const Eigen::Matrix2d expected = -d * d.transpose() / radius;
        double worst = 0;
        for (const size_t f : faces) {
          worst = std::max(worst, (bendingInPlane(model, flat, x, f) - expected).norm() * radius);
        }
        EXPECT_LT(worst, 0.02) << "psi " << psi;
      }
      const std::vector<double> x = liftedOntoSphere(flat, radius, Vec3(0.06, 0.05, 0));
      double worst = 0;
      for (const size_t f : faces) {
        worst = std::max(
            worst,
            (bendingInPlane(model, flat, x, f) + Eigen::Matrix2d::Identity() / radius).norm() *
                radius);
      }
      EXPECT_LT(worst, 0.03);
    }
}

// The bending energy per rest area of the interior faces: D kappa^2 / 2 for a cylinder of
// every direction and every nu, D (1 + nu) kappa^2 for a sphere (a plate with the material's
// Poisson ratio).
TEST(InelasticShellBending, CylinderAndSphereEnergiesAreThePlatesForEveryPoissonRatio) {
  const double radius = 0.5;
  const Geometry flat = makeEquilateralLattice(12, 12, 0.005);
  for (const InelasticShellBending bending : kBendings)
    for (const double nu : {0.0, 0.3, 0.45}) {
      const MaterialDef m = aluminium(nu);
      const InelasticShellModel model(flat, m, withBending(bending));
      const std::vector<size_t> faces = interiorFaces(model);
      const auto density = [&](std::span<const double> x) {
        double energy = 0, area = 0;
        for (const size_t f : faces) {
          energy += faceEnergyAt(model, f, x).bending;
          area += restArea(model, flat, f);
        }
        return energy / area;
      };
      const double d = plateRigidity(m), kappa = 1 / radius;
      for (const double psi : {0.0, 0.7, 1.6}) {
        EXPECT_NEAR(density(rolledOntoCylinder(flat, radius, psi)) / (d * kappa * kappa / 2), 1.0,
                    0.01)
            << "nu " << nu << " psi " << psi;
      }
      EXPECT_NEAR(density(liftedOntoSphere(flat, radius, Vec3(0.03, 0.025, 0))) /
                      (d * (1 + nu) * kappa * kappa),
                  1.0, 0.02)
          << "nu " << nu;
    }
}

TEST(InelasticShell, RefusesBrokenMeshesNamingTheElement) {
  Geometry g = oneWayGrid(2, 0.1);
  g.triangles[4] = 99;
  try {
    const InelasticShellModel model(g, aluminium());
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("inelastic_shell: triangle 1: vertex index 99"),
              std::string::npos)
        << e.what();
  }
  Geometry flipped = oneWayGrid(2, 0.1);
  std::swap(flipped.triangles[0], flipped.triangles[1]);
  EXPECT_THROW(InelasticShellModel(flipped, aluminium()), InputError);
}

// ---------------------------------------------------------------------------------------
// Plasticity (inelastic_shell_plasticity.hpp).

// Positions of the single rest triangle `flat` (in z = 0, first edge along x, so that its
// rest frame is the world's xy) under the map F = sqrt(I + 2 E): its Green strain is E.
std::vector<double> withGreenStrain(const Geometry& flat, const Eigen::Matrix2d& green) {
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> eigen(Eigen::Matrix2d::Identity() +
                                                             2 * green);
  const Eigen::Matrix2d f = eigen.eigenvectors() * eigen.eigenvalues().cwiseSqrt().asDiagonal() *
                            eigen.eigenvectors().transpose();
  std::vector<double> x = flat.positions;
  for (size_t k = 0; k < x.size() / 3; ++k) {
    const Eigen::Vector2d u = f * Eigen::Vector2d(x[3 * k], x[3 * k + 1]);
    x[3 * k] = u.x();
    x[3 * k + 1] = u.y();
  }
  return x;
}

Eigen::Matrix2d plasticMembraneOf(const InelasticShellModel& model) {
  double pm[4], pc[4];
  model.plasticStrains(0, pm, pc);
  Eigen::Matrix2d m;
  m << pm[0], pm[1], pm[2], pm[3];
  return m;
}

InelasticShellParams plasticParams(double yieldStrain, double hardening) {
  InelasticShellParams params;
  params.plasticity = InelasticShellPlasticity{yieldStrain, hardening};
  return params;
}

// Pure shear E = [[0, s], [s, 0]] (no trace: no plane-stress coupling) driven to +3 eps0
// and back to -3 eps0: yield at |xi| = sqrt 2 s = eps0; past it the plastic shear grows at
// 1 / (1 + gamma) of s; on the way back it holds until s has fallen by sqrt 2 eps0 (the
// deviatoric norm by 2 eps0: the Bauschinger offset), then flows the other way.
TEST(InelasticShellPlasticity, ShearCycleYieldHardeningAndBauschingerOffset) {
  const double eps0 = 2e-3;
  const Geometry flat = singleTriangle(Vec3(0, 0, 0), Vec3(0.1, 0, 0), Vec3(0.03, 0.08, 0));
  for (const double gamma : {0.0, 0.5, 2.0}) {
    InelasticShellModel model(flat, aluminium(), plasticParams(eps0, gamma));
    const double onset = eps0 / std::sqrt(2.0);
    const double peak = 3 * eps0;
    double plasticAtPeak = 0;
    const auto shear = [&](double s) {
      Eigen::Matrix2d e;
      e << 0, s, s, 0;
      const std::vector<double> x = withGreenStrain(flat, e);
      (void)model.updateInelastic(x, 1e-4);
      return std::pair{plasticMembraneOf(model), x};
    };
    for (int step = 1; step <= 60; ++step) {
      const double s = peak * step / 60;
      const auto [p, x] = shear(s);
      const double expected = s <= onset ? 0.0 : (s - onset) / (1 + gamma);
      EXPECT_NEAR(p(0, 1), expected, 1e-9 * eps0) << "gamma " << gamma << " loading s " << s;
      EXPECT_NEAR(p(0, 0), 0.0, 1e-12 * eps0);
      EXPECT_NEAR(p(1, 1), 0.0, 1e-12 * eps0);
      if (s > onset) {
        EXPECT_NEAR(model.yieldNorm(x, 0), eps0, 1e-10 * eps0);
      }
      plasticAtPeak = p(0, 1);
    }
    for (int step = 1; step <= 120; ++step) {
      const double s = peak - 2 * peak * step / 120;
      const auto [p, x] = shear(s);
      const double reverse = peak - std::sqrt(2.0) * eps0;  // reverse yield
      const double expected =
          s >= reverse ? plasticAtPeak : plasticAtPeak - (reverse - s) / (1 + gamma);
      EXPECT_NEAR(p(0, 1), expected, 1e-9 * eps0) << "gamma " << gamma << " unloading s " << s;
    }
  }
}

InelasticShellParams saturatingParams(double yieldStrain, double hardening, double limit) {
  InelasticShellParams params = plasticParams(yieldStrain, hardening);
  params.plasticity->hardeningLimit = limit;
  return params;
}

// Saturating hardening in pure shear: past yield the plastic shear p at total shear s solves
// sqrt 2 (s - p) - L tanh(gamma sqrt 2 p / L) = eps0 (the header's closed form, norms sqrt N
// = sqrt 2 of the shears), found here by bisection; the face lands on the yield surface.
TEST(InelasticShellPlasticity, SaturatingHardeningFollowsItsClosedFormInShear) {
  const double eps0 = 2e-3;
  const Geometry flat = singleTriangle(Vec3(0, 0, 0), Vec3(0.1, 0, 0), Vec3(0.03, 0.08, 0));
  for (const double limit : {0.25 * eps0, 2 * eps0}) {
    const double gamma = 0.5;
    InelasticShellModel model(flat, aluminium(), saturatingParams(eps0, gamma, limit));
    const auto closedForm = [&](double s) {
      const auto overstress = [&](double p) {
        return std::sqrt(2.0) * (s - p) - limit * std::tanh(gamma * std::sqrt(2.0) * p / limit) -
               eps0;
      };
      if (overstress(0) <= 0) return 0.0;
      double lo = 0, hi = s;
      for (int i = 0; i < 200; ++i) (overstress(0.5 * (lo + hi)) > 0 ? lo : hi) = 0.5 * (lo + hi);
      return 0.5 * (lo + hi);
    };
    double previous = 0;
    for (int step = 1; step <= 80; ++step) {
      const double s = 40 * eps0 * step / 80;
      Eigen::Matrix2d e;
      e << 0, s, s, 0;
      const std::vector<double> x = withGreenStrain(flat, e);
      (void)model.updateInelastic(x, 1e-4);
      const double p = plasticMembraneOf(model)(0, 1);
      EXPECT_NEAR(p, closedForm(s), 1e-9 * eps0) << "limit " << limit << " s " << s;
      if (p > 0) {
        EXPECT_NEAR(model.yieldNorm(x, 0), eps0, 1e-10 * eps0);
      }
      // Past saturation the plastic strain takes nearly all of the strain's growth.
      if (s > 30 * eps0) {
        EXPECT_GT(p - previous, 0.99 * 0.5 * eps0) << "limit " << limit;
      }
      previous = p;
    }
  }
}

// A face sheared far past yield and then left with no elastic strain (its load taken off:
// the total strain is its plastic strain): with linear hardening its back strain gamma |P|
// passes eps0, so it flows back to p' = (p + eps0 / sqrt 2) / (1 + gamma); with a hardening
// limit below eps0 it keeps its plastic strain bit for bit.
TEST(InelasticShellPlasticity, UnloadedFaceFlowsBackUnlessTheBackStrainIsBounded) {
  const double eps0 = 3e-3;
  const double gamma = 0.05;
  const Geometry flat = singleTriangle(Vec3(0, 0, 0), Vec3(0.1, 0, 0), Vec3(0.03, 0.08, 0));
  const auto shear = [&](InelasticShellModel& model, double s) {
    Eigen::Matrix2d e;
    e << 0, s, s, 0;
    return model.updateInelastic(withGreenStrain(flat, e), 1e-4).yieldingElements;
  };
  InelasticShellModel linear(flat, aluminium(), plasticParams(eps0, gamma));
  InelasticShellModel bounded(flat, aluminium(), saturatingParams(eps0, gamma, 0.5 * eps0));
  for (int step = 1; step <= 40; ++step) {
    (void)shear(linear, 0.15 * step / 40);
    (void)shear(bounded, 0.15 * step / 40);
  }
  const double pLinear = plasticMembraneOf(linear)(0, 1);
  const double pBounded = plasticMembraneOf(bounded)(0, 1);
  ASSERT_GT(gamma * std::sqrt(2.0) * pLinear, eps0) << "the linear back strain passed yield";
  EXPECT_EQ(shear(linear, pLinear), 1);
  EXPECT_NEAR(plasticMembraneOf(linear)(0, 1), (pLinear + eps0 / std::sqrt(2.0)) / (1 + gamma),
              1e-9 * eps0);
  EXPECT_EQ(shear(bounded, pBounded), 0);
  EXPECT_EQ(plasticMembraneOf(bounded)(0, 1), pBounded);
}

// Uniaxial stress (E = diag(eps, -nu eps), the elastic plane-stress state) yields at
// eps_y = sqrt(3/2) eps0 / (1 + nu); past it the iterated return lands on the yield surface.
TEST(InelasticShellPlasticity, UniaxialYieldOnsetAndReturnAccuracy) {
  const double eps0 = 1e-3;
  const Geometry flat = singleTriangle(Vec3(0, 0, 0), Vec3(0.1, 0, 0), Vec3(0.04, 0.07, 0));
  for (const double nu : {0.0, 0.3, 0.45}) {
    const double yieldAt = std::sqrt(1.5) * eps0 / (1 + nu);
    const auto uniaxial = [&](double eps) {
      Eigen::Matrix2d e;
      e << eps, 0, 0, -nu * eps;
      return withGreenStrain(flat, e);
    };
    InelasticShellModel below(flat, aluminium(nu), plasticParams(eps0, 0.3));
    EXPECT_EQ(below.updateInelastic(uniaxial(0.999 * yieldAt), 1e-4).yieldingElements, 0);
    EXPECT_EQ(plasticMembraneOf(below).norm(), 0.0);
    InelasticShellModel above(flat, aluminium(nu), plasticParams(eps0, 0.3));
    EXPECT_EQ(above.updateInelastic(uniaxial(1.001 * yieldAt), 1e-4).yieldingElements, 1);
    EXPECT_GT(plasticMembraneOf(above).norm(), 0.0);
    InelasticShellModel far(flat, aluminium(nu), plasticParams(eps0, 0.3));
    const std::vector<double> x = uniaxial(4 * yieldAt);
    (void)far.updateInelastic(x, 1e-4);
    EXPECT_NEAR(far.yieldNorm(x, 0), eps0, 1e-10 * eps0) << "nu " << nu;
    // The plastic strain is traceless in 3-D with p_33 = -tr P: it flows along x and
    // contracts across.
    const Eigen::Matrix2d p = plasticMembraneOf(far);
    EXPECT_GT(p(0, 0), 0.0);
    EXPECT_LT(p(1, 1), 0.0);
  }
}

Geometry rolledSheet() {
  return oneWayGrid(8, 0.01);
}

// A sheet held rolled onto a cylinder of radius 5 cm flows (ideal plasticity, below the
// bending strain of the roll): its rest shape moves towards the roll, so the roll stores
// less energy and the flat sheet some; a yield strain nothing reaches changes nothing,
// bit for bit.
TEST(InelasticShellPlasticity, HeldRollFlowsIntoTheRestShapeAndNothingBelowYield) {
  const Geometry flat = rolledSheet();
  const std::vector<double> roll = rolledOntoCylinder(flat, 0.05, 0.3);
  InelasticShellModel plastic(flat, aluminium(), plasticParams(1e-3, 0.0));
  InelasticShellModel elastic(flat, aluminium());
  InelasticShellModel unreached(flat, aluminium(), plasticParams(1.0, 0.0));
  const double before = plastic.energy(roll).total();
  int64_t yielding = 0;
  for (int i = 0; i < 3; ++i) {
    yielding += plastic.updateInelastic(roll, 1e-4).yieldingElements;
    EXPECT_EQ(unreached.updateInelastic(roll, 1e-4).yieldingElements, 0);
  }
  EXPECT_GT(yielding, 0);
  EXPECT_LT(plastic.energy(roll).total(), 0.5 * before);
  EXPECT_GT(plastic.energy(flat.positions).total(), 0.0) << "the flat sheet is dented now";
  const std::vector<double> probe = testing::perturbed(roll, 1e-4, 3);
  std::vector<double> g1(probe.size(), 0.0), g2(probe.size(), 0.0);
  EXPECT_EQ(unreached.addGradient(probe, g1).total(), elastic.addGradient(probe, g2).total());
  EXPECT_EQ(g1, g2);
  // The flowed state: written, read into a fresh model, the same energy and gradient bit for
  // bit; node scalars show the plastic strain.
  ByteWriter out;
  plastic.state().write(out);
  InelasticShellModel fresh(flat, aluminium(), plasticParams(1e-3, 0.0));
  ByteReader in(out.bytes(), "state");
  fresh.setState(ModelState::read(in));
  std::fill(g1.begin(), g1.end(), 0.0);
  std::fill(g2.begin(), g2.end(), 0.0);
  EXPECT_EQ(fresh.addGradient(probe, g1).total(), plastic.addGradient(probe, g2).total());
  EXPECT_EQ(g1, g2);
  const std::vector<Model::NodeScalar> scalars = fresh.nodeScalars();
  ASSERT_EQ(scalars.size(), 1u);
  EXPECT_EQ(scalars[0].name, "plastic_strain");
  EXPECT_GT(*std::max_element(scalars[0].values.begin(), scalars[0].values.end()), 1e-4);
}

// ---------------------------------------------------------------------------------------
// Fracture (inelastic_shell_fracture.cpp).

InelasticShellParams fractureParams(int32_t maxCracks = 1) {
  InelasticShellParams params;
  params.fracture = InelasticShellFracture{.strainLimit = 0.01,
                                           .tensileOnly = true,
                                           .absorption = 0.5,
                                           .refractorySteps = 10,
                                           .minimumSplit = 0.15,
                                           .maxCracksPerStep = maxCracks};
  return params;
}

std::vector<double> stretchedAlongX(std::span<const double> rest, double strain) {
  std::vector<double> x(rest.begin(), rest.end());
  for (size_t i = 0; i < x.size() / 3; ++i) x[3 * i] *= 1 + strain;
  return x;
}

Vec3 momentumOf(std::span<const double> masses, std::span<const double> v) {
  Vec3 p = Vec3::Zero();
  for (size_t i = 0; i < masses.size(); ++i) p += masses[i] * row(v, i);
  return p;
}

// An equilateral lattice pulled along x past the limit breaks one face per step (the most
// overstrained; a tie goes to the smallest index): the crack runs perpendicular to the pull
// (vertical, from a corner to the middle of the opposite horizontal edge), the opposite edge
// splits into two nodes at one point, mass and momentum are conserved exactly, the mesh stays
// a consistently oriented manifold, and the two halves of the broken face keep half its
// elastic strain (absorption 0.5).
TEST(InelasticShellFracture, OneCutAcrossThePullConservesMassAndMomentum) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  InelasticShellModel model(lattice, aluminium(), fractureParams());
  const std::vector<double> x = stretchedAlongX(lattice.positions, 0.013);
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  std::vector<double> v(x.size());
  for (double& value : v) value = normal(rng);
  const std::vector<double> massBefore(model.nodeMasses().begin(), model.nodeMasses().end());
  const double totalBefore = std::accumulate(massBefore.begin(), massBefore.end(), 0.0);
  const Vec3 momentumBefore = momentumOf(massBefore, v);
  const int64_t facesBefore = model.elementCount();
  const int32_t nodesBefore = model.nodeCount();

  const InelasticReport report = model.updateInelastic(x, 1e-4);
  ASSERT_EQ(report.brokenElements, 1);
  ASSERT_TRUE(report.edit.changesNodes());
  EXPECT_EQ(model.nodeCount(), report.edit.nodeCount());
  EXPECT_GE(model.nodeCount(), nodesBefore + 2);
  EXPECT_EQ(model.elementCount(), facesBefore + report.edit.elementsAdded);
  EXPECT_GE(report.edit.elementsAdded, 1);
  const std::vector<double> y = blended(x, report.edit), w = blended(v, report.edit);
  const auto massAfter = model.nodeMasses();
  EXPECT_NEAR(std::accumulate(massAfter.begin(), massAfter.end(), 0.0), totalBefore,
              1e-15 * totalBefore);
  EXPECT_LT((momentumOf(massAfter, w) - momentumBefore).norm(), 1e-14 * momentumBefore.norm());
  const Geometry cut = model.surface(y);
  EXPECT_NO_THROW((void)checkedTriangleMesh(cut, "cut"));
  // The two edge nodes coincide; each shares a face with a node straight above or below it.
  const auto p0 = static_cast<size_t>(nodesBefore), p1 = p0 + 1;
  EXPECT_EQ(row(y, p0), row(y, p1));
  bool vertical = false;
  for (size_t t = 0; t < cut.triangles.size(); t += 3) {
    const bool holds = cut.triangles[t] == nodesBefore || cut.triangles[t + 1] == nodesBefore ||
                       cut.triangles[t + 2] == nodesBefore;
    for (size_t c = 0; c < 3 && holds; ++c) {
      const auto other = static_cast<size_t>(cut.triangles[t + c]);
      if (other != p0 && std::abs(y[3 * other] - y[3 * p0]) < 1e-12) vertical = true;
    }
  }
  EXPECT_TRUE(vertical) << "the crack runs perpendicular to the pull";
  // Elastic strain of the faces at the new nodes: half the pull's (eps + eps^2 / 2).
  const double pulled = 0.013 + 0.013 * 0.013 / 2;
  for (size_t f = 0; f < static_cast<size_t>(model.elementCount()); ++f) {
    const auto corners = model.faceStencils().subspan(model.stencilWidth() * f, 3);
    if (std::find(corners.begin(), corners.end(), nodesBefore) == corners.end()) continue;
    double em[4], ec[4];
    model.faceStrains(y, f, em, ec);
    EXPECT_NEAR(0.5 * (em[0] + em[3]), 0.5 * pulled / 2, 1e-9) << "face " << f;
    // Still uniaxial (zero determinant): the parent's tensor is carried into the child's own
    // rest frame, whose first edge need not be the parent's.
    EXPECT_NEAR(em[0] * em[3] - em[1] * em[2], 0.0, 1e-12) << "face " << f;
  }
  // Refractory: the halves wait, another face breaks at the next step.
  EXPECT_EQ(model.updateInelastic(y, 1e-4).brokenElements, 1);
}

// A cut changes no face's strains but by the absorbed share of the broken faces' [ours]: a
// lattice rolled onto a cylinder (bending in every face) and pulled past the limit breaks
// faces whose neighbours' stencils lose a flap or a patch node. Every face that kept its
// corners keeps its elastic membrane and bending strains, the children keep 1 - absorption of
// their parent's, so the elastic energy can only fall. (Before, the curvature the operator
// measures changed with the stencil: cuts raised the energy by up to 5 mJ on a glass bulb.)
TEST(InelasticShellFracture, ACutRaisesNoFacesStrainAndNeverTheEnergy) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  for (const bool byOperator : {false, true}) {
    InelasticShellParams params = fractureParams(4);
    if (byOperator) params.bending = InelasticShellBending::kShapeOperator;
    InelasticShellModel model(lattice, aluminium(), params);
    const std::vector<double> x = stretchedAlongX(rolledOntoCylinder(lattice, 0.05, 0.3), 0.013);
    const size_t facesBefore = static_cast<size_t>(model.elementCount());
    const size_t width = model.stencilWidth();
    const std::vector<int32_t> stencilsBefore(model.faceStencils().begin(),
                                              model.faceStencils().end());
    std::vector<std::array<double, 8>> strainsBefore(facesBefore);
    for (size_t f = 0; f < facesBefore; ++f) {
      double em[4], ec[4];
      model.faceStrains(x, f, em, ec);
      std::copy(em, em + 4, strainsBefore[f].begin());
      std::copy(ec, ec + 4, strainsBefore[f].begin() + 4);
    }
    const double energyBefore = model.energy(x).total();
    const InelasticReport report = model.updateInelastic(x, 1e-4);
    ASSERT_GE(report.brokenElements, 2);
    const std::vector<double> y = blended(x, report.edit);
    int32_t restencilled = 0;
    for (size_t f = 0; f < facesBefore; ++f) {
      const auto stencil = model.faceStencils().subspan(width * f, width);
      if (!std::equal(stencil.begin(), stencil.begin() + 3, stencilsBefore.begin() + width * f))
        continue;  // cut, or a corner copied: a child
      if (std::equal(stencil.begin(), stencil.end(), stencilsBefore.begin() + width * f)) continue;
      ++restencilled;
      double em[4], ec[4];
      model.faceStrains(y, f, em, ec);
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_NEAR(em[k], strainsBefore[f][k], 1e-12) << "face " << f;
        EXPECT_NEAR(ec[k], strainsBefore[f][4 + k], 1e-9 * 20) << "face " << f;  // 1/m
      }
    }
    const double energyAfter = model.energy(y).total();
    std::cout << (byOperator ? "shape operator" : "quadratic patch") << ": "
              << report.brokenElements << " cuts, " << restencilled
              << " faces with a changed stencil; elastic energy " << energyBefore << " -> "
              << energyAfter << " J\n";
    EXPECT_GT(restencilled, 0);
    EXPECT_LT(energyAfter, energyBefore);
  }
}

// The refractory wait of a crack's children is counted in steps of the longest step so far:
// a step of a 64th (the step search's split) takes a 64th off it, a full step one.
TEST(InelasticShellFracture, RefractoryWaitCountsSplitStepsForTheirShare) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  InelasticShellModel model(lattice, aluminium(), fractureParams());
  std::vector<double> x = stretchedAlongX(lattice.positions, 0.013);
  const InelasticReport first = model.updateInelastic(x, 1e-4);
  ASSERT_EQ(first.brokenElements, 1);
  x = blended(x, first.edit);
  const auto waits = [&] {
    const ModelState state = model.state();
    return std::get<std::vector<double>>(state.find("refractory")->value);
  };
  // The halves of the first cut (faces keep their index through later cuts).
  std::vector<size_t> halves;
  const std::vector<double> start = waits();
  for (size_t f = 0; f < start.size(); ++f) {
    if (start[f] > 0) halves.push_back(f);
  }
  ASSERT_GE(halves.size(), 2U);
  const auto expectWait = [&](double expected) {
    const std::vector<double> now = waits();
    for (const size_t f : halves) EXPECT_NEAR(now[f], expected, 1e-12) << "face " << f;
  };
  const auto step = [&](double dt) {
    const InelasticReport report = model.updateInelastic(x, dt);
    if (report.edit.changesNodes()) x = blended(x, report.edit);
  };
  expectWait(10.0);
  step(1e-4 / 64);
  expectWait(10.0 - 1.0 / 64);
  step(1e-4 / 64);
  step(1e-4);
  expectWait(9.0 - 2.0 / 64);
}

// crack_pacing "wave": the faces one step cuts lie farther apart than the membrane wave travels
// in the step. On a uniformly overstrained lattice (8 x 8 cm) a step of 3 cm / c cuts several
// faces, pairwise more than 3 cm apart, where the unpaced count cuts many more, and a step
// whose wave crosses the whole lattice cuts one.
TEST(InelasticShellFracture, WavePacingKeepsOneStepsCutsFartherApartThanTheWaveTravels) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  const MaterialDef material = aluminium();
  const double waveSpeed = std::sqrt(
      material.youngModulus / (material.density * (1 - material.poisson * material.poisson)));
  const std::vector<double> x = stretchedAlongX(lattice.positions, 0.013);
  const double reach = 0.03;
  const auto cutsOf = [&](bool wave, double dt, std::vector<Vec3>* centroids) {
    InelasticShellParams params = fractureParams(1000);
    params.fracture->waveSpacing = wave;
    InelasticShellModel model(lattice, material, params);
    const InelasticReport report = model.updateInelastic(x, dt);
    if (centroids != nullptr) {
      // The faces of this step's cuts wait out the refractory time.
      const ModelState state = model.state();
      const auto& waits = std::get<std::vector<double>>(state.find("refractory")->value);
      const auto rest = model.restPositions();
      const size_t width = model.stencilWidth();
      for (size_t f = 0; f < waits.size(); ++f) {
        if (waits[f] == 0) continue;
        const auto corners = model.faceStencils().subspan(width * f, 3);
        Vec3 c = Vec3::Zero();
        for (const int32_t node : corners) c += row(rest, static_cast<size_t>(node)) / 3;
        centroids->push_back(c);
      }
    }
    return report.brokenElements;
  };
  const double dt = reach / waveSpeed;
  std::vector<Vec3> centroids;
  const int64_t paced = cutsOf(true, dt, &centroids);
  const int64_t unpaced = cutsOf(false, dt, nullptr);
  EXPECT_GE(paced, 2);
  EXPECT_GT(unpaced, 2 * paced);
  // The children of one cut lie within a cell of each other; those of two cuts more than the
  // reach apart, less the shift of a child's centroid from its parent's (under half a cell).
  for (size_t i = 0; i < centroids.size(); ++i) {
    for (size_t j = i + 1; j < centroids.size(); ++j) {
      const double distance = (centroids[i] - centroids[j]).norm();
      EXPECT_TRUE(distance < 0.012 || distance > reach - 0.006)
          << i << ", " << j << ": " << distance;
    }
  }
  EXPECT_EQ(cutsOf(true, 0.2 / waveSpeed, nullptr), 1);
}

// The lattice stretched by `strain` along the direction at `degrees` from x.
std::vector<double> stretchedAlong(std::span<const double> rest, double strain, double degrees) {
  const double angle = degrees * std::numbers::pi / 180;
  const Vec3 d(std::cos(angle), std::sin(angle), 0);
  std::vector<double> x(rest.begin(), rest.end());
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const Vec3 p = row(rest, i);
    const Vec3 q = p + strain * p.dot(d) * d;
    for (size_t c = 0; c < 3; ++c) x[3 * i + c] = q[c];
  }
  return x;
}

// The smallest corner angle at rest of the faces with a corner `node` (all faces: -1) and
// the number of faces with an angle below 10 degrees.
struct Angles {
  double smallest = 180;
  int slivers = 0;
};
Angles anglesAround(const InelasticShellModel& model, int32_t node = -1) {
  Angles angles;
  const auto rest = model.restPositions();
  const size_t width = model.stencilWidth();
  for (size_t f = 0; f < static_cast<size_t>(model.elementCount()); ++f) {
    const auto corners = model.faceStencils().subspan(width * f, 3);
    if (node >= 0 && std::find(corners.begin(), corners.end(), node) == corners.end()) continue;
    double smallest = 180;
    for (size_t c = 0; c < 3; ++c) {
      const auto at = [&](size_t k) {
        return row(rest, static_cast<size_t>(corners[(c + k) % 3]));
      };
      const Vec3 e1 = at(1) - at(0), e2 = at(2) - at(0);
      smallest =
          std::min(smallest, std::atan2(e1.cross(e2).norm(), e1.dot(e2)) * 180 / std::numbers::pi);
    }
    angles.smallest = std::min(angles.smallest, smallest);
    if (smallest < 10) ++angles.slivers;
  }
  return angles;
}

// Vertex budging (section 3.4, Fig. 7; notes section 7): a crack 2 degrees off the lattice's
// horizontal edges would end near a vertex; the vertex moves onto the crack line (its node
// blends itself and its edge neighbour), the crack runs along the existing edge, no face
// around it has an angle below 10 degrees, and every face whose stencil held the vertex
// keeps its elastic strains (the two faces along the crack keep 1 - absorption of them).
// Without budging the same passes split faces at t = minimumSplit: more slivers.
TEST(InelasticShellFracture, BudgingMovesAVertexOntoTheCrackWithoutChangingStrains) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  std::vector<double> x = stretchedAlong(lattice.positions, 0.013, 92);
  InelasticShellModel model(lattice, aluminium(), fractureParams());
  // The first crack starts inside (it splits: an edge with both ends inside cannot open);
  // the cracks that continue it budge. Passes until one does.
  int32_t budged = -1;
  std::vector<int32_t> stencilsBefore;
  std::vector<std::array<double, 8>> strainsBefore;
  std::vector<double> before, restBefore;
  InelasticReport report;
  for (int pass = 0; pass < 20 && budged < 0; ++pass) {
    before = x;
    restBefore.assign(model.restPositions().begin(), model.restPositions().end());
    stencilsBefore.assign(model.faceStencils().begin(), model.faceStencils().end());
    strainsBefore.assign(static_cast<size_t>(model.elementCount()), {});
    for (size_t f = 0; f < strainsBefore.size(); ++f) {
      double em[4], ec[4];
      model.faceStrains(x, f, em, ec);
      std::copy(em, em + 4, strainsBefore[f].begin());
      std::copy(ec, ec + 4, strainsBefore[f].begin() + 4);
    }
    const int32_t nodesBefore = model.nodeCount();
    report = model.updateInelastic(x, 1e-4);
    if (report.edit.changesNodes()) x = blended(x, report.edit);
    // The budged node: an old node that now blends two.
    for (int32_t i = 0; i < nodesBefore && report.edit.changesNodes(); ++i) {
      const auto n = static_cast<size_t>(i);
      if (report.edit.sourceOffsets[n + 1] - report.edit.sourceOffsets[n] == 2) budged = i;
    }
  }
  ASSERT_GE(budged, 0) << "no vertex was budged";
  const size_t width = model.stencilWidth();
  EXPECT_GE(anglesAround(model, budged).smallest, 10.0);
  const std::vector<double>& y = x;
  int affected = 0, alongCrack = 0;
  for (size_t f = 0; f < strainsBefore.size(); ++f) {
    const auto stencil = std::span(stencilsBefore).subspan(width * f, width);
    if (std::find(stencil.begin(), stencil.end(), budged) == stencil.end()) continue;
    ++affected;
    // Strains as tensors of the lattice's plane (z = 0), each from its face's rest frame
    // before and after the budge (the moved vertex may be the one that sets the frame).
    const auto inPlane = [&](std::span<const double> rest, const double* local) {
      const Vec3 x0 = row(rest, static_cast<size_t>(stencil[0]));
      const Vec3 x1 = row(rest, static_cast<size_t>(stencil[1]));
      const Vec3 a3 = (x1 - x0).normalized();
      Eigen::Matrix2d frame;  // columns: a, b = z x a
      frame << a3.x(), -a3.y(), a3.y(), a3.x();
      Eigen::Matrix2d tensor;
      tensor << local[0], local[1], local[2], local[3];
      return Eigen::Matrix2d(frame * tensor * frame.transpose());
    };
    double em[4], ec[4];
    model.faceStrains(y, f, em, ec);
    const Eigen::Matrix2d membraneAfter = inPlane(model.restPositions(), em);
    const Eigen::Matrix2d bendingAfter = inPlane(model.restPositions(), ec);
    const Eigen::Matrix2d membraneBefore = inPlane(restBefore, &strainsBefore[f][0]);
    const Eigen::Matrix2d bendingBefore = inPlane(restBefore, &strainsBefore[f][4]);
    // The faces along the crack kept half (absorption 0.5); the others all of it.
    const double kept =
        (membraneAfter - membraneBefore).norm() < 1e-9 * membraneBefore.norm() ? 1.0 : 0.5;
    if (kept < 1) ++alongCrack;
    EXPECT_LT((membraneAfter - kept * membraneBefore).norm(), 1e-12) << "face " << f;
    EXPECT_LT((bendingAfter - kept * bendingBefore).norm(), 1e-9) << "face " << f;
  }
  EXPECT_GT(affected, 6);
  EXPECT_EQ(alongCrack, 2);

  // The same passes with and without budging: fewer slivers with it.
  const auto sliversAfter = [&](double budgeLimit) {
    InelasticShellParams params = fractureParams();
    params.fracture->budgeLimit = budgeLimit;
    InelasticShellModel run(lattice, aluminium(), params);
    std::vector<double> z = stretchedAlong(lattice.positions, 0.013, 92);
    for (int pass = 0; pass < 20; ++pass) {
      const InelasticReport r = run.updateInelastic(z, 1e-4);
      if (r.edit.changesNodes()) z = blended(z, r.edit);
    }
    return anglesAround(run).slivers;
  };
  const int with = sliversAfter(0.2), without = sliversAfter(0);
  // Many cracks a pass: budges next to faces the same pass cut; the mesh stays a manifold.
  InelasticShellModel many(lattice, aluminium(), fractureParams(8));
  std::vector<double> w = stretchedAlong(lattice.positions, 0.013, 92);
  for (int pass = 0; pass < 10; ++pass) {
    const InelasticReport r = many.updateInelastic(w, 1e-4);
    if (r.edit.changesNodes()) w = blended(w, r.edit);
  }
  EXPECT_NO_THROW((void)checkedTriangleMesh(many.surface(w), "many cracks"));
  EXPECT_GE(anglesAround(many).smallest, 10.0);
  std::cout << "[ measured ] faces with an angle below 10 degrees after 20 passes: " << with
            << " with budging, " << without << " without\n";
  EXPECT_LT(with, without);
}

// The world moves some nodes itself (pinned, or riding a rigid fragment; setWorldMovedNodes).
// A face all of whose corners it moves does not break, however overstrained: the shatter with
// rigid fragments had Bullet's chips go on cracking along their frozen strain into specks of
// 1e-12 kg, and budges of their nodes (rest position moved, the node left where the world put
// it) raised the elastic energy by 5 J until the run stopped. A budge never moves such a node:
// with every other node held, the crack still runs, and no held node blends two.
TEST(InelasticShellFracture, FacesTheWorldMovesDoNotBreakAndItsNodesAreNotBudged) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  const std::vector<double> pulled = stretchedAlongX(lattice.positions, 0.013);
  const auto nodes = static_cast<size_t>(lattice.vertexCount());
  InelasticShellModel held(lattice, aluminium(), fractureParams());
  held.setWorldMovedNodes(std::vector<uint8_t>(nodes, 1));
  EXPECT_EQ(held.updateInelastic(pulled, 1e-4).brokenElements, 0);
  InelasticShellModel free(lattice, aluminium(), fractureParams());
  free.setWorldMovedNodes(std::vector<uint8_t>(nodes, 0));
  EXPECT_EQ(free.updateInelastic(pulled, 1e-4).brokenElements, 1);

  // Every other node held (no face has three held corners: each has two neighbours in a
  // row of the lattice among them); the budging passes of the test above.
  InelasticShellModel half(lattice, aluminium(), fractureParams(8));
  std::vector<double> x = stretchedAlong(lattice.positions, 0.013, 92);
  std::vector<uint8_t> moved(nodes, 0);
  for (size_t i = 0; i < nodes; i += 2) moved[i] = 1;
  int64_t broken = 0;
  for (int pass = 0; pass < 20; ++pass) {
    half.setWorldMovedNodes(moved);
    const std::vector<double> restBefore(half.restPositions().begin(), half.restPositions().end());
    const InelasticReport report = half.updateInelastic(x, 1e-4);
    broken += report.brokenElements;
    if (!report.edit.changesNodes()) continue;
    for (size_t i = 0; i < moved.size(); ++i) {
      if (moved[i] == 0) continue;
      EXPECT_EQ(report.edit.sourceOffsets[i + 1] - report.edit.sourceOffsets[i], 1) << "node " << i;
      EXPECT_EQ(row(half.restPositions(), i), row(restBefore, i)) << "node " << i;
    }
    x = blended(x, report.edit);
    moved.resize(static_cast<size_t>(half.nodeCount()), 0);  // new nodes are free
  }
  EXPECT_GT(broken, 10);
}

// A crack that would meet an edge next to a vertex on the mesh's fringe, where budging may not
// move that vertex (it would leave the boundary), runs along the existing edge to it instead
// of splitting a sliver off (inelastic_shell_fracture.cpp, tryBudge): such a pass adds no
// face and no edge point, only the copy of the fringe vertex that opens the edge, and the two
// faces along the edge keep half their membrane strain (absorption 0.5) while every other
// face keeps all of it. On a jittered lattice pulled across, with budging on; off, no pass
// cuts along an edge.
TEST(InelasticShellFracture, CracksMeetingTheFringeNearAVertexRunAlongTheEdgeUnmoved) {
  // The nodes on a boundary of a mesh (its rim, or a crack's fringe).
  const auto boundaryOf = [](const Geometry& mesh) {
    const TriangleMeshTopology topology = checkedTriangleMesh(mesh, "lattice");
    std::vector<uint8_t> boundary(static_cast<size_t>(mesh.vertexCount()), 0);
    for (size_t e = 0; e < topology.faceNeighbour.size(); ++e) {
      if (topology.faceNeighbour[e] >= 0) continue;
      const size_t face = e / 3, corner = e % 3;
      boundary[static_cast<size_t>(mesh.triangles[3 * face + (corner + 1) % 3])] = 1;
      boundary[static_cast<size_t>(mesh.triangles[3 * face + (corner + 2) % 3])] = 1;
    }
    return boundary;
  };
  Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  const std::vector<uint8_t> rim = boundaryOf(lattice);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> jitter(-0.002, 0.002);  // 20 % of an edge
  for (size_t i = 0; i < rim.size(); ++i) {
    if (rim[i] != 0) continue;
    lattice.positions[3 * i] += jitter(rng);
    lattice.positions[3 * i + 1] += jitter(rng);
  }
  const auto edgeCutPasses = [&](double budgeLimit, bool check) {
    InelasticShellParams params = fractureParams();
    params.fracture->budgeLimit = budgeLimit;
    InelasticShellModel model(lattice, aluminium(), params);
    std::vector<double> x = stretchedAlong(lattice.positions, 0.013, 90);
    int passes = 0;
    for (int pass = 0; pass < 30; ++pass) {
      const auto faces = static_cast<size_t>(model.elementCount());
      std::vector<std::array<double, 4>> before(faces);
      for (size_t f = 0; f < faces; ++f) {
        double em[4], ec[4];
        model.faceStrains(x, f, em, ec);
        std::copy(em, em + 4, before[f].begin());
      }
      const int32_t nodesBefore = model.nodeCount();
      const std::vector<uint8_t> boundary = boundaryOf(model.surface(x));
      const InelasticReport report = model.updateInelastic(x, 1e-4);
      if (!report.edit.changesNodes()) continue;
      x = blended(x, report.edit);
      // Every node has one source: no edge point, no budge; the new ones copy a fringe node.
      bool unmoved = report.edit.elementsAdded == 0;
      for (size_t n = 0; n + 1 < report.edit.sourceOffsets.size() && unmoved; ++n) {
        unmoved = report.edit.sourceOffsets[n + 1] - report.edit.sourceOffsets[n] == 1;
      }
      if (!unmoved) continue;
      ++passes;
      if (!check) continue;
      EXPECT_GT(model.nodeCount(), nodesBefore);
      for (int32_t n = nodesBefore; n < model.nodeCount(); ++n) {
        const auto source = report.edit.sourceNodes[static_cast<size_t>(
            report.edit.sourceOffsets[static_cast<size_t>(n)])];
        EXPECT_EQ(boundary[static_cast<size_t>(source)], 1) << "copy of node " << source;
      }
      int halved = 0;
      for (size_t f = 0; f < faces; ++f) {
        double em[4], ec[4];
        model.faceStrains(x, f, em, ec);
        const Eigen::Matrix2d after = Eigen::Map<const Eigen::Matrix2d>(em);
        const Eigen::Matrix2d was = Eigen::Map<const Eigen::Matrix2d>(before[f].data());
        if ((after - was).norm() < 1e-12) continue;
        EXPECT_LT((after - 0.5 * was).norm(), 1e-12) << "face " << f;
        ++halved;
      }
      EXPECT_EQ(halved, 2) << "pass " << pass;
    }
    EXPECT_NO_THROW((void)checkedTriangleMesh(model.surface(x), "torn lattice"));
    return passes;
  };
  const int with = edgeCutPasses(0.2, true), without = edgeCutPasses(0, false);
  std::cout << "[ measured ] passes cutting along an edge unmoved: " << with << " with budging, "
            << without << " without\n";
  EXPECT_GE(with, 1);
  EXPECT_EQ(without, 0);
}

// The step search (gingold2004 sections 4.1-4.2): a step at whose end a face breaks, or whose
// largest node force grows by more than the ratio, is rejected to be resolved in time (and
// accepted at the deepest split); a step that changes little is accepted.
// A plate of width w (x) and height 2 w (y) in z = 0, cells of `cell` split along
// alternating diagonals, with a centre crack from x = -a to a along y = 0: the nodes strictly
// between its ends are doubled, the faces above the slit taking the copies.
Geometry centreCrackedPlate(double w, double a, double cell) {
  const auto columns = static_cast<int>(std::lround(w / cell));
  const auto rows = 2 * columns;
  Geometry plate;
  const auto id = [&](int i, int j) { return j * (columns + 1) + i; };
  for (int j = 0; j <= rows; ++j) {
    for (int i = 0; i <= columns; ++i) {
      plate.positions.insert(plate.positions.end(), {-w / 2 + i * cell, -w + j * cell, 0.0});
    }
  }
  std::vector<int32_t> copyOf(plate.positions.size() / 3, -1);
  for (int i = 0; i <= columns; ++i) {
    const int node = id(i, columns);
    if (std::abs(plate.positions[3 * static_cast<size_t>(node)]) < a - 1e-9) {
      copyOf[static_cast<size_t>(node)] = plate.vertexCount();
      plate.positions.insert(plate.positions.end(), {plate.positions[3 * node], 0.0, 0.0});
    }
  }
  for (int j = 0; j < rows; ++j) {
    for (int i = 0; i < columns; ++i) {
      const bool above = j >= columns;
      const auto at = [&](int ii, int jj) {
        const int node = id(ii, jj);
        return above && copyOf[static_cast<size_t>(node)] >= 0 ? copyOf[static_cast<size_t>(node)]
                                                               : node;
      };
      if ((i + j) % 2 == 0) {
        plate.triangles.insert(plate.triangles.end(), {at(i, j), at(i + 1, j), at(i + 1, j + 1)});
        plate.triangles.insert(plate.triangles.end(), {at(i, j), at(i + 1, j + 1), at(i, j + 1)});
      } else {
        plate.triangles.insert(plate.triangles.end(), {at(i, j), at(i + 1, j), at(i, j + 1)});
        plate.triangles.insert(plate.triangles.end(),
                               {at(i + 1, j), at(i + 1, j + 1), at(i, j + 1)});
      }
    }
  }
  return plate;
}

// The plate's equilibrium in its plane (z held) with its bottom row held and its top row
// pulled along y by `force` in all (shares by edge length), from one linear solve with the
// Hessian at rest: the strains are about 1e-4.
std::vector<double> pulledInPlane(const InelasticShellModel& model, std::span<const double> rest,
                                  double cell, double force) {
  const size_t nodes = rest.size() / 3;
  double bottom = 1e300, top = -1e300;
  for (size_t n = 0; n < nodes; ++n) {
    bottom = std::min(bottom, rest[3 * n + 1]);
    top = std::max(top, rest[3 * n + 1]);
  }
  double left = 1e300, right = -1e300;
  for (size_t n = 0; n < nodes; ++n) {
    left = std::min(left, rest[3 * n]);
    right = std::max(right, rest[3 * n]);
  }
  std::vector<int> dof(3 * nodes, -1);
  int count = 0;
  for (size_t n = 0; n < nodes; ++n) {
    if (rest[3 * n + 1] < bottom + 1e-9) continue;
    dof[3 * n] = count++;
    dof[3 * n + 1] = count++;
  }
  std::vector<Eigen::Triplet<double>> all, reduced;
  EXPECT_TRUE(model.addHessian(rest, all));
  for (const auto& t : all) {
    const int r = dof[static_cast<size_t>(t.row())], c = dof[static_cast<size_t>(t.col())];
    if (r >= 0 && c >= 0) reduced.emplace_back(r, c, t.value());
  }
  Eigen::SparseMatrix<double> k(count, count);
  k.setFromTriplets(reduced.begin(), reduced.end());
  Eigen::VectorXd f = Eigen::VectorXd::Zero(count);
  const double width = right - left;
  for (size_t n = 0; n < nodes; ++n) {
    if (rest[3 * n + 1] < top - 1e-9) continue;
    const bool corner = rest[3 * n] < left + 1e-9 || rest[3 * n] > right - 1e-9;
    f[dof[3 * n + 1]] = force * (corner ? 0.5 : 1.0) * cell / width;
  }
  const Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver(k);
  EXPECT_EQ(solver.info(), Eigen::Success);
  const Eigen::VectorXd u = solver.solve(f);
  std::vector<double> x(rest.begin(), rest.end());
  for (size_t i = 0; i < x.size(); ++i) {
    if (dof[i] >= 0) x[i] += u[dof[i]];
  }
  return x;
}

// Crack ends meet linear fracture mechanics [ours]: a centre crack of 2a in a plate of width
// w = 10 a pulled by a remote stress sigma has K = sigma sqrt(pi a) sqrt(sec(pi a / w))
// (Feddersen; Tada, Paris and Irwin) and the T-stress sigma_xx = -sigma along the crack. The
// plate's two crack ends are found; at equilibrium under sigma their fans' mean strain across
// the crack (the overstrain the fracture pass reads, times the limit) is the tip field's
// mean over a disc of the fan's area, K c(nu) / (E sqrt(2 pi l)), plus the T-stress's
// -nu T / E, times the discrete fan's factor 1.12 within 5 % on the grid at a / h = 5 and 10
// and on a grid whose nodes moved by up to 0.3 h at a / h = 10, and the same within 1 % at
// a / h = 5 and 10: a crack runs at the K_c the scene names whatever the mesh. Measured:
// 1.115 and 1.116 times on the grid (without the T-stress term 1.38 and 1.31, its share
// falling as sqrt(h / a)), 1.09-1.16 on the jittered one (its two ends differ). The face it
// would cut holds the end as its corner and the crack runs on along the slit.
TEST(InelasticShellFracture, CrackEndMeanStrainMeetsTheTipField) {
  const double a = 0.02, w = 10 * a, toughness = 1e6;
  std::vector<double> ratioAt;
  for (const auto& [perA, jitter] : {std::pair{5, 0.0}, std::pair{10, 0.0}, std::pair{10, 0.3}}) {
    const double cell = a / perA;
    Geometry plate = centreCrackedPlate(w, a, cell);
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> unit(-1, 1);
    for (size_t n = 0; n < plate.positions.size() / 3 && jitter > 0; ++n) {
      double& px = plate.positions[3 * n];
      double& py = plate.positions[3 * n + 1];
      if (std::abs(py) < 1e-9 || std::abs(std::abs(px) - w / 2) < 1e-9 ||
          std::abs(std::abs(py) - w) < 1e-9) {
        continue;  // the slit's line and the plate's edges stay straight
      }
      px += jitter * cell * unit(rng);
      py += jitter * cell * unit(rng);
    }
    InelasticShellParams params = fractureParams();
    params.fracture->strainLimit = 1;  // only the ends break
    params.fracture->toughness = toughness;
    const MaterialDef material = aluminium();
    InelasticShellModel model(plate, material, params);
    ASSERT_EQ(model.crackEnds().size(), 2u);
    for (const auto& end : model.crackEnds()) {
      EXPECT_NEAR(std::abs(model.restPositions()[3 * static_cast<size_t>(end.node)]), a, 1e-12);
      EXPECT_NEAR(std::abs(end.back.x()), 1.0, 1e-12) << "into the slit";
    }
    const double sigma = 1e7;  // Pa
    const std::vector<double> x =
        pulledInPlane(model, plate.positions, cell, sigma * w * material.thickness);
    const double k = sigma * std::sqrt(std::numbers::pi * a / std::cos(std::numbers::pi * a / w));
    const auto candidates = model.fractureCandidates(x);
    const double nu = material.poisson;
    std::vector<double> ratios;
    for (const auto& end : model.crackEnds()) {
      const double area = std::accumulate(end.weight.begin(), end.weight.end(), 0.0);
      const double radius = std::sqrt(area / std::numbers::pi);
      const double expected =
          k * 3.2 * (3 - 2 * nu) / (3 * std::numbers::pi) /
              (material.youngModulus * std::sqrt(2 * std::numbers::pi * radius)) +
          nu * sigma / material.youngModulus;
      constexpr double kDiscreteTipFactor = 1.12;  // inelastic_shell_fracture.cpp
      double worst = 0;
      int32_t face = -1;
      for (const int32_t f : end.fan) {
        const auto& c = candidates[static_cast<size_t>(f)];
        if (c.corner >= 0 && c.overstrain > worst) {
          worst = c.overstrain;
          face = f;
        }
      }
      ASSERT_GE(face, 0);
      const double measured = worst * end.limit;
      std::cout << "[ measured ] a / h = " << perA << ", jitter " << jitter
                << ": crack end mean strain " << measured << ", the tip field's with the T-stress "
                << expected << " (ratio " << measured / expected << ")\n";
      EXPECT_NEAR(measured / (kDiscreteTipFactor * expected), 1.0, 0.05)
          << "a / h = " << perA << ", jitter " << jitter;
      ratios.push_back(measured / expected);
      const auto& c = candidates[static_cast<size_t>(face)];
      EXPECT_EQ(model.faceStencils()[model.stencilWidth() * static_cast<size_t>(face) +
                                     static_cast<size_t>(c.corner)],
                end.node);
      const auto corner = [&](size_t i) {
        return row(model.restPositions(),
                   static_cast<size_t>(
                       model.faceStencils()[model.stencilWidth() * static_cast<size_t>(face) + i]));
      };
      const Vec3 axisA = (corner(1) - corner(0)).normalized();
      const Vec3 axisB = Vec3::UnitZ().cross(axisA);
      const Vec3 across = c.direction.x() * axisA + c.direction.y() * axisB;
      EXPECT_GT(std::abs(across.y()), 0.99) << "the crack runs on along the slit";
    }
    ratioAt.push_back(ratios.front());
  }
  EXPECT_NEAR(ratioAt[0] / ratioAt[1], 1.0, 0.01) << "the same at a / h = 5 and 10";
}

// The cut at a crack's end [ours]: the centre-cracked plate (a / h = 5) pulled to K = 0.9
// K_c breaks nothing; pulled to 1.1 K_c it breaks at its ends, each cut starting at the end
// node and running on along the slit's line, so the crack grows at both ends (two cuts:
// max_cracks_per_step 2) and its new ends lie farther out on y = 0.
TEST(InelasticShellFracture, ACrackRunsOnFromItsEndsOnceKPassesTheToughness) {
  const double a = 0.02, w = 10 * a, cell = a / 5, toughness = 1e6;
  const Geometry plate = centreCrackedPlate(w, a, cell);
  InelasticShellParams params = fractureParams(2);
  params.fracture->strainLimit = 1;
  params.fracture->toughness = toughness;
  params.fracture->budgeLimit = 0;
  const MaterialDef material = aluminium();
  // sigma_c from one solve at sigma0 (linear; the ends' overstrain is reported once past 1).
  const double sigma0 = 1e7;
  InelasticShellModel probe(plate, material, params);
  const std::vector<double> pulled =
      pulledInPlane(probe, plate.positions, cell, sigma0 * w * material.thickness);
  double overstrain = 0;
  for (const auto& c : probe.fractureCandidates(pulled)) {
    overstrain = std::max(overstrain, c.overstrain);
  }
  const double sigmaCritical = sigma0 / overstrain;
  const double k =
      sigmaCritical * std::sqrt(std::numbers::pi * a / std::cos(std::numbers::pi * a / w));
  std::cout << "[ measured ] the ends break at K = " << k / toughness << " K_c\n";
  // At a / h = 5 the T-stress adds a quarter to the ends' mean strain (the test above).
  EXPECT_NEAR(k / toughness, 0.8, 0.05);
  const auto scaled = [&](double factor) {
    std::vector<double> x(plate.positions.begin(), plate.positions.end());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] += factor * sigmaCritical / sigma0 * (pulled[i] - x[i]);
    }
    return x;
  };
  {
    InelasticShellModel model(plate, material, params);
    EXPECT_EQ(model.updateInelastic(scaled(0.9), 1e-6).brokenElements, 0);
  }
  InelasticShellModel model(plate, material, params);
  const InelasticReport report = model.updateInelastic(scaled(1.1), 1e-6);
  EXPECT_EQ(report.brokenElements, 2);
  ASSERT_EQ(model.crackEnds().size(), 2u);
  for (const auto& end : model.crackEnds()) {
    const Vec3 at = row(model.restPositions(), static_cast<size_t>(end.node));
    EXPECT_NEAR(at.y(), 0.0, 1e-12) << "on the slit's line";
    EXPECT_GT(std::abs(at.x()), a + 0.5 * cell) << "farther out";
  }
}

TEST(InelasticShellStepSearch, RejectsFractureEventsAndForceJumps) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  InelasticShellParams params = fractureParams();
  params.stepSearch = InelasticShellStepSearch{1.1, true};
  const InelasticShellModel model(lattice, aluminium(), params);
  const std::vector<double> calm = stretchedAlongX(lattice.positions, 0.005);
  const StepVerdict breaks =
      model.inspectStep(calm, stretchedAlongX(lattice.positions, 0.013), 1e-4);
  EXPECT_FALSE(breaks.accepted);
  EXPECT_TRUE(breaks.acceptAtFinest);
  EXPECT_NE(breaks.reason.find("breaks within the step"), std::string::npos) << breaks.reason;
  const StepVerdict jump = model.inspectStep(calm, stretchedAlongX(lattice.positions, 0.008), 1e-4);
  EXPECT_FALSE(jump.accepted);
  EXPECT_NE(jump.reason.find("largest node force grew"), std::string::npos) << jump.reason;
  EXPECT_TRUE(model.inspectStep(calm, stretchedAlongX(lattice.positions, 0.0051), 1e-4).accepted);
  const InelasticShellModel unsearched(lattice, aluminium(), fractureParams());
  EXPECT_TRUE(
      unsearched.inspectStep(calm, stretchedAlongX(lattice.positions, 0.013), 1e-4).accepted);
}

// The plastic step limit (ours): in pure shear s past the onset eps0 / sqrt 2 the return
// mapping moves the plastic strain by (sqrt 2 s - eps0) / (1 + gamma) in the yield norm, so a
// step ending there is rejected exactly when that passes limit eps0; a step that ends inside
// the yield surface, or a model without the limit, is accepted.
TEST(InelasticShellStepSearch, RejectsAStepWhosePlasticFlowPassesTheLimit) {
  const double eps0 = 2e-3, gamma = 0.5, limit = 0.25;
  const Geometry flat = singleTriangle(Vec3(0, 0, 0), Vec3(0.1, 0, 0), Vec3(0.03, 0.08, 0));
  InelasticShellParams params = plasticParams(eps0, gamma);
  params.plasticity->stepLimit = limit;
  const InelasticShellModel model(flat, aluminium(), params);
  const InelasticShellModel unlimited(flat, aluminium(), plasticParams(eps0, gamma));
  const auto shearedTo = [&](double increment) {
    const double s = (eps0 + (1 + gamma) * increment * eps0) / std::sqrt(2.0);
    Eigen::Matrix2d e;
    e << 0, s, s, 0;
    return withGreenStrain(flat, e);
  };
  const std::vector<double> rest = flat.positions;
  EXPECT_TRUE(model.inspectStep(rest, shearedTo(-0.5), 1e-4).accepted) << "inside the surface";
  EXPECT_TRUE(model.inspectStep(rest, shearedTo(0.9 * limit), 1e-4).accepted);
  const StepVerdict flows = model.inspectStep(rest, shearedTo(1.1 * limit), 1e-4);
  EXPECT_FALSE(flows.accepted);
  EXPECT_TRUE(flows.acceptAtFinest);
  EXPECT_NE(flows.reason.find("the plastic strain of face 0 would grow by 0.27"), std::string::npos)
      << flows.reason;
  EXPECT_TRUE(unlimited.inspectStep(rest, shearedTo(10 * limit), 1e-4).accepted);
  // The estimate is the return mapping's own increment: one update from rest moves P by it.
  InelasticShellModel updated(flat, aluminium(), plasticParams(eps0, gamma));
  (void)updated.updateInelastic(shearedTo(1.1 * limit), 1e-4);
  EXPECT_NEAR(std::sqrt(2.0) * plasticMembraneOf(updated)(0, 1), 1.1 * limit * eps0, 1e-9 * eps0);
}

// A torn lattice (ten cuts) written to bytes and put into a freshly built model: the same
// mesh, energy and gradient bit for bit; a state of another mesh does not fit and leaves the
// model as it was.
TEST(InelasticShellFracture, TornStateRoundTrips) {
  const Geometry lattice = makeEquilateralLattice(8, 9, 0.01);
  InelasticShellModel model(lattice, aluminium(), fractureParams());
  std::vector<double> x = stretchedAlongX(lattice.positions, 0.013);
  for (int step = 0; step < 10; ++step) {
    const InelasticReport r = model.updateInelastic(x, 1e-4);
    if (r.edit.changesNodes()) x = blended(x, r.edit);
  }
  ASSERT_GT(model.nodeCount(), lattice.vertexCount() + 10);
  ByteWriter out;
  model.state().write(out);
  InelasticShellModel fresh(lattice, aluminium(), fractureParams());
  ByteReader in(out.bytes(), "torn");
  fresh.setState(ModelState::read(in));
  EXPECT_EQ(fresh.nodeCount(), model.nodeCount());
  EXPECT_EQ(fresh.elementCount(), model.elementCount());
  const std::vector<double> probe = testing::perturbed(x, 1e-4, 9);
  std::vector<double> g1(probe.size(), 0.0), g2(probe.size(), 0.0);
  EXPECT_EQ(fresh.addGradient(probe, g1).total(), model.addGradient(probe, g2).total());
  EXPECT_EQ(g1, g2);
  // The mesh is part of the state: one whose triangles name a node that does not exist is
  // refused, naming the triangle, and the model stays as it was.
  const ModelState torn = model.state();
  const auto values = [&](const char* name) { return torn.find(name)->value; };
  auto plasticLength = std::get<std::vector<double>>(values("plastic_squared_length"));
  auto plasticPhi = std::get<std::vector<double>>(values("plastic_phi"));
  auto rest = std::get<std::vector<double>>(values("rest_positions"));
  auto triangles = std::get<std::vector<int32_t>>(values("triangles"));
  auto refractory = std::get<std::vector<double>>(values("refractory"));
  triangles[7] = 100000;
  StateFields hostile;
  hostile.add("plastic_squared_length", &plasticLength, StateShape::kPerElement, 3);
  hostile.add("plastic_phi", &plasticPhi, StateShape::kPerElement, 3);
  hostile.add("rest_positions", &rest, StateShape::kPerNode, 3);
  hostile.add("triangles", &triangles, StateShape::kPerElement, 3);
  hostile.add("refractory", &refractory, StateShape::kPerElement);
  auto refractoryStep = std::get<std::vector<double>>(values("refractory_step"));
  hostile.add("refractory_step", &refractoryStep);
  InelasticShellModel intact(lattice, aluminium(), fractureParams());
  try {
    intact.setState(ModelState("inelastic_shell", torn.nodeCount(), hostile));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("triangle 2: vertex index 100000"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(intact.nodeCount(), lattice.vertexCount());
  EXPECT_EQ(intact.energy(lattice.positions).total(), 0.0);
}

// The energy contract (model_contract.hpp): a flat regular sheet, the sheet primitive with
// jittered vertices, the sphere primitive (curved rest shape: the rest curvatures are
// measured, so it is force free) and the cylinder, after plastic flow and after fracture;
// deformations of 5 % of an edge. Names starting with "operator_": the paper's bending.
testing::ContractCase inelasticShellCase(const std::string& name) {
  testing::ContractCase c;
  c.name = name;
  c.setup = [name] {
    const bool byOperator = name.starts_with("operator_");
    const std::string which = byOperator ? name.substr(9) : name;
    Geometry g;
    if (which == "sheet") g = oneWayGrid(6, 0.02);
    if (which == "jittered") {
      g = primitive(PrimitiveType::kSheet, 7);
      std::mt19937 rng(2);
      std::uniform_real_distribution<double> offset(-0.03, 0.03);
      for (double& v : g.positions) v += offset(rng);
    }
    if (which == "lattice") g = makeEquilateralLattice(7, 8, 0.02);
    if (which == "sphere") g = primitive(PrimitiveType::kSphere, 12);
    if (which == "cylinder") g = primitive(PrimitiveType::kCylinder, 12);
    if (which == "flowed") g = rolledSheet();
    if (which == "torn") g = makeEquilateralLattice(8, 9, 0.01);
    const auto bent = [&](InelasticShellParams params) {
      if (byOperator) params.bending = InelasticShellBending::kShapeOperator;
      return params;
    };
    auto model = std::make_unique<InelasticShellModel>(
        g, aluminium(),
        bent(which == "flowed" ? plasticParams(1e-3, 0.5) : InelasticShellParams{}));
    if (which == "flowed") {
      for (int i = 0; i < 3; ++i) {
        (void)model->updateInelastic(rolledOntoCylinder(g, 0.05, 0.3), 1e-4);
      }
    }
    if (which == "torn") {
      model = std::make_unique<InelasticShellModel>(g, aluminium(), bent(fractureParams()));
      std::vector<double> x = stretchedAlongX(g.positions, 0.013);
      for (int step = 0; step < 8; ++step) {
        const InelasticReport r = model->updateInelastic(x, 1e-4);
        if (r.edit.changesNodes()) x = blended(x, r.edit);
      }
    }
    testing::ContractSetup s;
    double sum = 0;
    for (size_t t = 0; t < g.triangles.size(); t += 3) {
      sum += (row(g.positions, static_cast<size_t>(g.triangles[t + 1])) -
              row(g.positions, static_cast<size_t>(g.triangles[t])))
                 .norm();
    }
    s.scale = sum / static_cast<double>(g.triangles.size() / 3);
    s.rest.assign(model->restPositions().begin(), model->restPositions().end());
    s.model = std::move(model);
    s.restIsRelaxed = which != "flowed" && which != "torn";
    return s;
  };
  c.perturbation = 0.05;
  c.gradientStep = 1e-6;
  c.gradientTolerance = 1e-6;
  c.hessianStep = 1e-6;
  c.hessianTolerance = 1e-6;
  c.forceTolerance = 1e-12;
  c.torqueTolerance = 1e-12;
  c.rigidTolerance = 1e-9;
  c.expectStretching = true;
  c.expectBending = true;
  return c;
}

using testing::ModelContract;
INSTANTIATE_TEST_SUITE_P(
    InelasticShell, ModelContract,
    ::testing::Values(inelasticShellCase("sheet"), inelasticShellCase("lattice"),
                      inelasticShellCase("jittered"), inelasticShellCase("sphere"),
                      inelasticShellCase("cylinder"), inelasticShellCase("flowed"),
                      inelasticShellCase("torn"), inelasticShellCase("operator_sheet"),
                      inelasticShellCase("operator_sphere"), inelasticShellCase("operator_flowed"),
                      inelasticShellCase("operator_torn")),
    testing::contractCaseName);

}  // namespace
}  // namespace shellsim
