// The step pipeline's accept and reject (dynamics/step_pipeline.hpp): a step a model
// rejects, or one that fails, is undone and retried as two half steps that land on the
// same time; a step that fails at the deepest split is reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/step_pipeline.hpp"
#include "dynamics/world.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/models/fiber.hpp"

namespace shellsim {
namespace {

using testing::sceneWith;
using testing::sheetBody;

// A model that behaves exactly as the one it wraps, except that it rejects every
// proposed step longer than `longestStep`, and that its next `failingEvaluations` gradient
// evaluations return NaN (a step whose forces blow up).
class PickyModel : public Model {
 public:
  PickyModel(std::unique_ptr<Model> inner, double longestStep)
      : inner_(std::move(inner)), longestStep_(longestStep) {}

  int failingEvaluations = 0;
  bool acceptAtFinest = false;  // its rejections only ask to resolve an event in time
  bool sustained = false;       // its rejections' cause lasts (StepVerdict::sustained)
  mutable int inspections = 0;

  [[nodiscard]] std::string name() const override { return "picky " + inner_->name(); }
  [[nodiscard]] int32_t nodeCount() const override { return inner_->nodeCount(); }
  [[nodiscard]] int64_t elementCount() const override { return inner_->elementCount(); }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return inner_->nodeMasses(); }
  bool prepare(std::span<const double> x) override { return inner_->prepare(x); }
  using Model::addGradient;
  using Model::energy;
  using Model::updateInelastic;
  [[nodiscard]] std::unique_ptr<ModelWorkspace> makeWorkspace() const override {
    return inner_->makeWorkspace();
  }
  [[nodiscard]] EnergyParts energy(std::span<const double> x,
                                   ModelWorkspace* workspace) const override {
    return inner_->energy(x, workspace);
  }
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override {
    const EnergyParts e = inner_->addGradient(x, gradient, workspace);
    if (failingEvaluations > 0) {
      --const_cast<PickyModel*>(this)->failingEvaluations;
      gradient.back() = std::numeric_limits<double>::quiet_NaN();
    }
    return e;
  }
  [[nodiscard]] double stableTimeStep() const override { return inner_->stableTimeStep(); }
  [[nodiscard]] Geometry surface(std::span<const double> x) const override {
    return inner_->surface(x);
  }
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override {
    return inner_->hessianBlockNodes();
  }
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override {
    return inner_->hessianBlocks(x, values);
  }
  InelasticReport updateInelastic(std::span<const double> x, double dt,
                                  ModelWorkspace* workspace) override {
    return inner_->updateInelastic(x, dt, workspace);
  }
  [[nodiscard]] uint64_t topologyVersion() const override { return inner_->topologyVersion(); }
  void listStateFields(StateFields& fields) override { inner_->listStateFields(fields); }
  void stateAssigned() override { inner_->stateAssigned(); }
  [[nodiscard]] std::vector<int32_t> nodePieces() const override { return inner_->nodePieces(); }
  bool nodeAreaVectors(std::span<const double> x, std::span<double> out) const override {
    return inner_->nodeAreaVectors(x, out);
  }
  [[nodiscard]] StepVerdict inspectStep(std::span<const double> before,
                                        std::span<const double> after, double dt) const override {
    EXPECT_EQ(before.size(), after.size());
    ++inspections;
    if (dt > longestStep_ * (1 + 1e-12)) {
      return {false, "longer than the picky model allows", acceptAtFinest, sustained};
    }
    return {};
  }

 private:
  std::unique_ptr<Model> inner_;
  double longestStep_;
};

// A pinned sheet swinging under gravity; with `longestStep` > 0 its model is wrapped.
World swingingSheet(double longestStep) {
  BodyDef body = sheetBody(6);
  PinDef corner;
  corner.shape = PinShape::kVertices;
  corner.vertices = {0};
  body.pins.push_back(corner);
  World world = buildWorld(sceneWith(body));
  if (longestStep > 0) {
    world.bodies[0].model =
        std::make_unique<PickyModel>(std::move(world.bodies[0].model), longestStep);
  }
  computeAccelerations(world);
  return world;
}

// The swinging sheet advanced by `interval` in plain steps of h: no model rejects any.
World plainRun(double h, double interval) {
  World plain = swingingSheet(0);
  TimeIntegrator small(TimeDef{}, h);
  PhaseTimes times;
  small.advance(plain, interval, interval, times);
  EXPECT_EQ(small.counts().rejected, 0);
  return plain;
}

// Bit for bit the same node positions.
void expectSamePositions(const World& a, const World& b) {
  const auto& x = a.bodies[0].positions;
  const auto& y = b.bodies[0].positions;
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(double)), 0);
}

TEST(StepPipeline, ARejectedStepIsRetriedAsHalvesThatLandOnTheSameTime) {
  // Planned step 4h, the model accepts at most h: every step is rejected, its halves (2h)
  // rejected again, and the quarters accepted. That is the run with step h, bit for bit:
  // the same code, and h = (4h) / 2 / 2 exactly.
  const double h = 1e-4;
  World picky = swingingSheet(h);
  std::vector<std::string> warnings;
  TimeIntegrator splitting(TimeDef{}, 4 * h, [&](const std::string& w) { warnings.push_back(w); });
  PhaseTimes times;
  const double interval = 8 * 4 * h;
  splitting.advance(picky, interval, interval, times);

  EXPECT_EQ(picky.time, interval);
  EXPECT_EQ(splitting.counts().accepted, 32);
  EXPECT_EQ(splitting.counts().rejected, 8 * 3);  // each 4h step once, its two 2h halves once
  expectSamePositions(picky, plainRun(h, interval));
  EXPECT_LT(picky.bodies[0].positions[3 * 20 + 2], -1e-5) << "the sheet fell";
  // One warning, naming the body, the reason and what was done.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("body 'sheet'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("longer than the picky model allows"), std::string::npos);
  EXPECT_NE(warnings[0].find("two half steps"), std::string::npos);
}

// A sustained rejection (plastic flow, not an event): the following steps start at the depth
// that resolved it and relax one level after kSustainedRelaxSteps (8) accepted steps. Planned
// 4h, the model takes at most h, 8 planned steps: the first is rejected at 4h and 2h (depth
// 2); the next four quarter steps relax it to depth 1 after 8 accepted in all, so every
// second planned step probes 2h once more (planned steps 3, 5 and 7): 2 + 3 rejections
// against 24 for an event. The same steps h as the plain run, so bit for bit its state.
TEST(StepPipeline, ASustainedRejectionKeepsItsSplitForTheFollowingSteps) {
  const double h = 1e-4;
  World picky = swingingSheet(h);
  dynamic_cast<PickyModel&>(*picky.bodies[0].model).sustained = true;
  TimeIntegrator splitting(TimeDef{}, 4 * h);
  PhaseTimes times;
  const double interval = 8 * 4 * h;
  splitting.advance(picky, interval, interval, times);
  EXPECT_EQ(picky.time, interval);
  EXPECT_EQ(splitting.counts().accepted, 32);
  EXPECT_EQ(splitting.counts().rejected, 2 + 3);
  expectSamePositions(picky, plainRun(h, interval));
  // Each advance starts from the planned step: the next one probes 4h and 2h again.
  splitting.advance(picky, 4 * h, interval + 4 * h, times);
  EXPECT_EQ(splitting.counts().rejected, 2 + 3 + 2);
}

TEST(StepPipeline, AStepWhoseForcesBlowUpIsUndoneAndRetried) {
  const double h = 2e-4;
  World world = swingingSheet(1.0);  // accepts any step length
  auto& picky = dynamic_cast<PickyModel&>(*world.bodies[0].model);
  picky.failingEvaluations = 1;  // the first step's force evaluation gives NaN
  TimeIntegrator integrator(TimeDef{}, h);
  PhaseTimes times;
  integrator.advance(world, 10 * h, 10 * h, times);
  EXPECT_EQ(integrator.counts().rejected, 1);
  EXPECT_EQ(integrator.counts().accepted, 11);  // the first step as two halves, then 9
  EXPECT_EQ(world.time, 10 * h);
  for (const double v : world.bodies[0].positions) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NO_THROW(checkState(world));
}

TEST(StepPipeline, AStepRejectedAtTheDeepestSplitIsANumericalError) {
  const double h = 1e-3;
  World world = swingingSheet(h / 1000);  // below h / 2^kMaxStepSplits
  TimeIntegrator integrator(TimeDef{}, h);
  PhaseTimes times;
  try {
    integrator.advance(world, h, h, times);
    FAIL() << "no error";
  } catch (const NumericalError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("after 6 splits"), std::string::npos) << what;
    EXPECT_NE(what.find("longer than the picky model allows"), std::string::npos) << what;
  }
  EXPECT_EQ(integrator.counts().accepted, 0);
  EXPECT_EQ(integrator.counts().rejected, kMaxStepSplits + 1);
}

// A model's rejection that only asks to resolve an event in time (gingold2004's search) is
// accepted at the deepest split: the step ends as 2^kMaxStepSplits pieces, the frame on time.
TEST(StepPipeline, ARejectionToResolveAnEventIsAcceptedAtTheDeepestSplit) {
  const double h = 1e-3;
  World world = swingingSheet(h / 1000);
  dynamic_cast<PickyModel&>(*world.bodies[0].model).acceptAtFinest = true;
  std::vector<std::string> warnings;
  TimeIntegrator integrator(TimeDef{}, h, [&](const std::string& w) { warnings.push_back(w); });
  PhaseTimes times;
  integrator.advance(world, h, h, times);
  EXPECT_EQ(world.time, h);
  EXPECT_EQ(integrator.counts().accepted, 1 << kMaxStepSplits);
  EXPECT_EQ(integrator.counts().rejected, (1 << kMaxStepSplits) - 1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("accepted at the deepest split"), std::string::npos) << warnings[1];
}

TEST(StepPipeline, PlasticityAndFractureSeeOnlyAcceptedSteps) {
  // The model is asked about every proposal; updateInelastic runs once per accepted step,
  // so a fiber body with plasticity flows as in the run with the small step, bit for bit.
  // (Recomputing the accelerations after an undone step, instead of restoring them, made
  // them differ by 4e-10 m after 10 steps: the restored step started from forces of the
  // rest state after plastic flow, the direct run from those before it.)
  const double h = 1e-4;
  const auto run = [&](double planned, double longest) {
    BodyDef body = sheetBody(6);
    body.model = "fiber";
    body.options<FiberDef>().plasticity = FiberPlasticityDef{};
    body.options<FiberDef>().plasticity->yieldStrain = 1e-6;
    body.options<FiberDef>().plasticity->yieldAngle = 1e-6;
    body.initialVelocity = {0, 0, 1};
    PinDef corner;
    corner.shape = PinShape::kVertices;
    corner.vertices = {0, 6};
    body.pins.push_back(corner);
    World world = buildWorld(sceneWith(body));
    world.bodies[0].model = std::make_unique<PickyModel>(std::move(world.bodies[0].model), longest);
    computeAccelerations(world);
    TimeIntegrator integrator(TimeDef{}, planned);
    PhaseTimes times;
    integrator.advance(world, 40 * h, 40 * h, times);
    return world.bodies[0].positions;
  };
  const std::vector<double> split = run(4 * h, h);
  const std::vector<double> direct = run(h, 1.0);
  ASSERT_EQ(split.size(), direct.size());
  EXPECT_EQ(std::memcmp(split.data(), direct.data(), split.size() * sizeof(double)), 0);
}

}  // namespace
}  // namespace shellsim
