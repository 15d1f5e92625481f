#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <Eigen/Eigenvalues>
#include <cmath>
#include <random>

#include "geometry/primitives.hpp"
#include "models/mass_spring/mass_spring.hpp"
#include "models/model_contract.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim {
namespace {

using testing::gradientMatchesFiniteDifferences;
using testing::ModelContract;
using testing::perturbed;

MaterialDef rubber() {
  MaterialDef m;
  m.youngModulus = 1e6;
  m.thickness = 1e-3;
  m.density = 1000;
  m.poisson = 1.0 / 3.0;
  return m;
}

TEST(SpringKernel, GradientAndHessianMatchFiniteDifferences) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 50; ++trial) {
    Vec3 x[2] = {Vec3(u(rng), u(rng), u(rng)), Vec3(u(rng), u(rng), u(rng))};
    const double k = 10.0 + 5 * u(rng);
    const double rest = 0.5 + 0.3 * u(rng);
    Vec3 g[2];
    Eigen::Matrix<double, 6, 6> h;
    springEnergyGradient(k, rest, x, g, &h);
    const double step = 1e-6;
    for (int j = 0; j < 6; ++j) {
      Vec3 xp[2] = {x[0], x[1]}, xm[2] = {x[0], x[1]};
      xp[j / 3][j % 3] += step;
      xm[j / 3][j % 3] -= step;
      Vec3 gp[2], gm[2];
      const double ep = springEnergyGradient(k, rest, xp, gp);
      const double em = springEnergyGradient(k, rest, xm, gm);
      EXPECT_NEAR((ep - em) / (2 * step), g[j / 3][j % 3], 1e-6 * k) << "trial " << trial;
      for (int i = 0; i < 6; ++i) {
        EXPECT_NEAR((gp[i / 3][i % 3] - gm[i / 3][i % 3]) / (2 * step), h(i, j), 1e-5 * k)
            << "trial " << trial << " H(" << i << "," << j << ")";
      }
    }
  }
}

TEST(SpringKernel, ZeroLengthSpringHasNoForceAndFiniteEnergy) {
  Vec3 x[2] = {Vec3(1, 2, 3), Vec3(1, 2, 3)};
  Vec3 g[2];
  const double e = springEnergyGradient(4.0, 0.5, x, g);
  EXPECT_DOUBLE_EQ(e, 0.5 * 4.0 * 0.25);
  EXPECT_EQ(g[0], Vec3::Zero());
  EXPECT_EQ(g[1], Vec3::Zero());
}

// The energy contract (model_contract.hpp) on a flat sheet, a sphere and the spot mesh;
// random deformations of 2 cm (the meshes are ~1 m across).
testing::ContractCase massSpringCase(const std::string& which) {
  testing::ContractCase c;
  c.name = which;
  c.setup = [which] {
    Geometry g;
    if (which == "spot") {
      g = readGeometry(std::string(SHELLSIM_DATA_DIR) + "/spot.obj");
    } else {
      PrimitiveDef p;
      p.type = which == "sphere" ? PrimitiveType::kSphere : PrimitiveType::kSheet;
      p.resolution = 12;
      g = makePrimitive(p);
    }
    testing::ContractSetup s;
    s.model = std::make_unique<MassSpringModel>(g, rubber());
    s.rest = g.positions;
    return s;
  };
  c.perturbation = 0.02;
  c.gradientStep = 1e-7;
  c.gradientTolerance = 1e-5;
  c.hessianStep = 1e-7;
  c.hessianTolerance = 1e-5;
  c.expectStretching = true;
  return c;
}

INSTANTIATE_TEST_SUITE_P(MassSpring, ModelContract,
                         ::testing::Values(massSpringCase("sheet"), massSpringCase("sphere"),
                                           massSpringCase("spot")),
                         testing::contractCaseName);

TEST(MassSpring, DetectsAWrongGradient) {
  // The contract check must be able to fail: scale the stiffness used for the energy only.
  const Geometry g = makeEquilateralLattice(4, 4, 0.1);
  const MassSpringModel model(g, rubber());
  MaterialDef stiffer = rubber();
  stiffer.youngModulus *= 1.01;
  const MassSpringModel other(g, stiffer);
  struct Mismatched final : MassSpringModel {
    Mismatched(const Geometry& mesh, const MaterialDef& m, const MassSpringModel& energyModel)
        : MassSpringModel(mesh, m), energyModel_(energyModel) {}
    using Model::energy;
    EnergyParts energy(std::span<const double> x, ModelWorkspace* workspace) const override {
      (void)workspace;
      return energyModel_.energy(x);
    }
    const MassSpringModel& energyModel_;
  } broken(g, rubber(), other);
  EXPECT_FALSE(
      gradientMatchesFiniteDifferences(broken, perturbed(g.positions, 0.01, 5), 1e-7, 1e-5));
}

TEST(MassSpring, VanGelderStiffnessGivesPlaneStressModulusOnEquilateralMesh) {
  // Uniaxial strain eps along x with the lateral strain held at zero. Plane stress with
  // Poisson ratio 1/3 stores W = E h eps^2 / (2 (1 - nu^2)) = (9/16) E h eps^2 per area;
  // the spring network stores sum_e 1/2 k_e (L_e eps cos^2 theta_e)^2, equal to it
  // exactly on an equilateral mesh (sum of cos^4 over a triangle's edges = 9/8).
  const Geometry g = makeEquilateralLattice(9, 11, 0.05);
  const MaterialDef material = rubber();
  const MassSpringModel model(g, material);
  const double eps = 1e-5;
  std::vector<double> x = g.positions;
  for (size_t i = 0; i < x.size(); i += 3) x[i] *= 1 + eps;
  double area = 0;
  for (int t = 0; t < g.triangleCount(); ++t) {
    const auto p = [&](int c) {
      const size_t v = 3 * static_cast<size_t>(g.triangles[3 * static_cast<size_t>(t) + c]);
      return Vec3(g.positions[v], g.positions[v + 1], g.positions[v + 2]);
    };
    area += 0.5 * (p(1) - p(0)).cross(p(2) - p(0)).norm();
  }
  const double expected =
      9.0 / 16.0 * material.youngModulus * material.thickness * eps * eps * area;
  EXPECT_NEAR(model.energy(x).total(), expected, 1e-4 * expected);
}

TEST(MassSpring, MassesSumToDensityTimesVolume) {
  const Geometry g = makeEquilateralLattice(5, 6, 0.1);
  const MaterialDef material = rubber();
  const MassSpringModel model(g, material);
  double total = 0;
  for (double m : model.nodeMasses()) total += m;
  const double area = 2 * 4 * 5 * (std::sqrt(3.0) / 4 * 0.01);
  EXPECT_NEAR(total, material.density * material.thickness * area, 1e-12);
}

TEST(MassSpring, StableStepIsAProvableBoundAndNotFarBelowIt) {
  // 2 / sqrt(lambda_max(M^-1 K)) from a dense eigen-solve is the exact limit of
  // velocity Verlet at rest; the estimate must not exceed it.
  const Geometry g = makeEquilateralLattice(5, 5, 0.1);
  const MassSpringModel model(g, rubber());
  std::vector<Eigen::Triplet<double>> triplets;
  model.addHessian(g.positions, triplets);
  const Eigen::Index n = 3 * g.vertexCount();
  Eigen::SparseMatrix<double> k(n, n);
  k.setFromTriplets(triplets.begin(), triplets.end());
  Eigen::MatrixXd dense = Eigen::MatrixXd(k);
  const auto m = model.nodeMasses();
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) dense(i, j) /= std::sqrt(m[i / 3] * m[j / 3]);
  }
  const double lambdaMax =
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(dense).eigenvalues().maxCoeff();
  const double exact = 2.0 / std::sqrt(lambdaMax);
  EXPECT_LE(model.stableTimeStep(), exact);
  EXPECT_GE(model.stableTimeStep(), 0.3 * exact);
}

TEST(MassSpring, RejectsPointCloudsAndCoincidentVertices) {
  Geometry cloud;
  cloud.positions = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  EXPECT_THROW(MassSpringModel(cloud, rubber()), InputError);
  Geometry collapsed = makeEquilateralLattice(3, 3, 0.1);
  for (int c = 0; c < 3; ++c) collapsed.positions[3 + c] = collapsed.positions[c];
  try {
    MassSpringModel model(collapsed, rubber());
    FAIL() << "coincident vertices accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vertices 0 and 1"), std::string::npos) << e.what();
  }
}

TEST(MassSpring, WarnsWhenThePoissonRatioCannotBeRepresented) {
  MaterialDef material = rubber();
  material.poisson = 0.45;
  MassSpringSetup setup;
  const MassSpringModel model(makeEquilateralLattice(3, 3, 0.1), material, &setup);
  ASSERT_EQ(setup.warnings.size(), 1u);
  EXPECT_NE(setup.warnings[0].find("Poisson"), std::string::npos);
}

}  // namespace
}  // namespace shellsim
