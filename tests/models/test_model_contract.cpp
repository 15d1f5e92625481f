// The energy contract (DESIGN.md principle 1), written once and run on every model: each
// model's test file instantiates ModelContract with its cases (model_contract.hpp).
#include <gtest/gtest.h>

#include "models/model_contract.hpp"

namespace shellsim::testing {
namespace {

TEST_P(ModelContract, ZeroEnergyAndForceAtRest) {
  const ContractSetup s = GetParam().setup();
  ASSERT_GT(s.model->elementCount(), 0);
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

TEST_P(ModelContract, ZeroNetForceAndTorque) {
  const ContractCase& c = GetParam();
  const ContractSetup s = c.setup();
  const std::vector<double> x = perturbed(s.rest, c.perturbation * s.scale, 4);
  s.model->prepare(x);
  EXPECT_TRUE(zeroNetForceAndTorque(*s.model, x, c.forceTolerance, c.torqueTolerance));
}

}  // namespace
}  // namespace shellsim::testing
