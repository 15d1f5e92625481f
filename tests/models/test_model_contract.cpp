// The energy contract (DESIGN.md principle 1), written once and run on every model: each
// model's test file instantiates ModelContract with its cases (model_contract.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "models/model_contract.hpp"

namespace shellsim::testing {
namespace {

TEST_P(ModelContract, ZeroEnergyAndForceAtRest) {
  const ContractSetup s = GetParam().setup();
  ASSERT_GT(s.model->elementCount(), 0);
  if (!s.restIsRelaxed) {
    EXPECT_GT(s.model->energy(s.rest).total(), 0.0) << "a flowed rest shape stores energy";
    return;
  }
  // A freshly built model is prepared for its rest state. (Not prepare(rest) again: the
  // fiber model's shape-matching rotations then differ from the identity by round-off,
  // which leaves forces of ~1e-18 N on the bunny.)
  const std::vector<double> g = gradientAt(*s.model, s.rest);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], 0.0) << "dof " << i;
  EXPECT_EQ(s.model->energy(s.rest).total(), 0.0);
}

TEST_P(ModelContract, GradientMatchesFiniteDifferences) {
  const ContractCase& c = GetParam();
  const ContractSetup s = c.setup();
  const std::vector<double> x = perturbed(s.rest, c.perturbation * s.scale, 1);
  s.model->prepare(x);
  const EnergyParts e = s.model->energy(x);
  if (c.expectStretching) {
    EXPECT_GT(e.stretching, 0);
  }
  if (c.expectBending) {
    EXPECT_GT(e.bending, 0);
  }
  EXPECT_TRUE(
      gradientMatchesFiniteDifferences(*s.model, x, c.gradientStep * s.scale, c.gradientTolerance));
}

TEST_P(ModelContract, HessianMatchesFiniteDifferences) {
  const ContractCase& c = GetParam();
  const ContractSetup s = c.setup();
  const std::vector<double> x = perturbed(s.rest, c.perturbation * s.scale, 2);
  s.model->prepare(x);
  EXPECT_TRUE(
      hessianMatchesFiniteDifferences(*s.model, x, c.hessianStep * s.scale, c.hessianTolerance));
}

TEST_P(ModelContract, InvariantUnderRigidMotion) {
  const ContractCase& c = GetParam();
  const ContractSetup s = c.setup();
  EXPECT_TRUE(rigidMotionInvariant(*s.model, perturbed(s.rest, c.perturbation * s.scale, 3),
                                   c.rigidTolerance));
}

// Energy and gradient are pure functions of (model, positions): the scratch is in the
// caller's workspace (Model::makeWorkspace), so two threads with a workspace each evaluate
// one model at once and get what one thread gets alone, bit for bit.
TEST_P(ModelContract, TwoWorkspacesEvaluateOneModelFromTwoThreadsAtOnce) {
  const ContractCase& c = GetParam();
  const ContractSetup s = c.setup();
  const std::vector<double> x[2] = {perturbed(s.rest, c.perturbation * s.scale, 11),
                                    perturbed(s.rest, c.perturbation * s.scale, 12)};
  std::vector<double> expected[2];
  double expectedEnergy[2];
  for (int k = 0; k < 2; ++k) {
    expected[k].assign(x[k].size(), 0.0);
    expectedEnergy[k] = s.model->addGradient(x[k], expected[k]).total();
  }
  bool same[2] = {true, true};
  const auto evaluate = [&](int k) {
    const std::unique_ptr<ModelWorkspace> workspace = s.model->makeWorkspace();
    std::vector<double> g(x[k].size());
    for (int repeat = 0; repeat < 20; ++repeat) {
      std::fill(g.begin(), g.end(), 0.0);
      const double energy = s.model->addGradient(x[k], g, workspace.get()).total();
      same[k] = same[k] && energy == expectedEnergy[k] && g == expected[k];
    }
  };
  std::thread first(evaluate, 0), second(evaluate, 1);
  first.join();
  second.join();
  EXPECT_TRUE(same[0]);
  EXPECT_TRUE(same[1]);
}

TEST_P(ModelContract, ZeroNetForceAndTorque) {
  const ContractCase& c = GetParam();
  const ContractSetup s = c.setup();
  const std::vector<double> x = perturbed(s.rest, c.perturbation * s.scale, 4);
  s.model->prepare(x);
  EXPECT_TRUE(zeroNetForceAndTorque(*s.model, x, c.forceTolerance, c.torqueTolerance));
}

// A spring between two nodes, E = k/2 (|x1 - x0| - L)^2, with an exact gradient and no
// Hessian: the smallest model that must fail the Hessian check.
class SpringWithoutHessian : public Model {
 public:
  [[nodiscard]] std::string name() const override { return "spring without Hessian"; }
  [[nodiscard]] int32_t nodeCount() const override { return 2; }
  [[nodiscard]] int64_t elementCount() const override { return 1; }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return masses_; }
  using Model::addGradient;
  using Model::energy;
  [[nodiscard]] EnergyParts energy(std::span<const double> x, ModelWorkspace*) const override {
    const double stretch = length(x) - 1.0;
    return {0.5 * stretch * stretch, 0.0};
  }
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace*) const override {
    const double l = length(x);
    for (int c = 0; c < 3; ++c) {
      const double g = (l - 1.0) * (x[3 + c] - x[c]) / l;
      gradient[c] -= g;
      gradient[3 + c] += g;
    }
    return energy(x);
  }
  [[nodiscard]] double stableTimeStep() const override { return 1.0; }
  [[nodiscard]] Geometry surface(std::span<const double> x) const override {
    Geometry g;
    g.positions.assign(x.begin(), x.end());
    return g;
  }

 private:
  static double length(std::span<const double> x) {
    return std::sqrt((x[3] - x[0]) * (x[3] - x[0]) + (x[4] - x[1]) * (x[4] - x[1]) +
                     (x[5] - x[2]) * (x[5] - x[2]));
  }
  std::vector<double> masses_{1.0, 1.0};
};

TEST(ModelContractChecks, AModelWithoutAHessianFailsTheHessianCheck) {
  const SpringWithoutHessian spring;
  const std::vector<double> x = {0, 0, 0, 1.2, 0.1, -0.3};
  EXPECT_TRUE(gradientMatchesFiniteDifferences(spring, x, 1e-7, 1e-6));
  const ::testing::AssertionResult hessian = hessianMatchesFiniteDifferences(spring, x, 1e-6, 1e-6);
  EXPECT_FALSE(hessian);
  EXPECT_NE(std::string(hessian.message()).find("has no Hessian"), std::string::npos);
}

}  // namespace
}  // namespace shellsim::testing
