// Quasi-Newton iterations of the implicit solver (dynamics/newton.hpp): the L-BFGS history
// and the Laplacian stand-in of NewtonSettings::quasiNewton.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/implicit.hpp"
#include "dynamics/newton.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

using testing::sceneWith;
using testing::sheetBody;

// A random symmetric positive definite 6 x 6 matrix, well conditioned.
Eigen::MatrixXd randomSpd(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Eigen::MatrixXd b(6, 6);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = u(rng);
  return b * b.transpose() + 6 * Eigen::MatrixXd::Identity(6, 6);
}

// Two free nodes (6 dofs), none pinned.
const std::vector<int> kFreeIndex = {0, 1, 2, 3, 4, 5};

TEST(QuasiNewtonHistory, MeetsTheSecantEquationOfItsNewestPairAndDescends) {
  // Phi = 1/2 x^T A x - b^T x with H0 = diag(A): after each recorded step s with gradient
  // change y = A s, the updated inverse maps y to s (BFGS's secant condition), and every
  // direction is a descent direction (the inverse stays positive definite).
  const Eigen::MatrixXd a = randomSpd(3);
  const Eigen::VectorXd b = Eigen::VectorXd::LinSpaced(6, -1, 1);
  const Eigen::VectorXd initialInverse = a.diagonal().cwiseInverse();
  const auto applyInitialInverse = [&](const Vector& r) -> Vector {
    return initialInverse.cwiseProduct(r);
  };
  QuasiNewtonHistory history(8);
  std::vector<double> x(6, 0.0);
  const auto gradientAt = [&](const std::vector<double>& at) -> Vector {
    return a * Eigen::Map<const Eigen::VectorXd>(at.data(), 6) - b;
  };
  for (int k = 0; k < 5; ++k) {
    const Vector g = gradientAt(x);
    const Vector d = history.direction(g, applyInitialInverse);
    EXPECT_LT(g.dot(d), 0) << "iteration " << k;
    history.start(x, kFreeIndex, g);
    const std::vector<double> before = x;
    for (size_t i = 0; i < 6; ++i) x[i] += 0.7 * d[static_cast<Eigen::Index>(i)];
    history.record(x, kFreeIndex, gradientAt(x));
    EXPECT_FALSE(history.pending);
    Vector s(6);
    for (size_t i = 0; i < 6; ++i) s[static_cast<Eigen::Index>(i)] = x[i] - before[i];
    const Vector y = a * s;
    // direction(g) = -H g, so direction(-y) = H y, which must be s.
    const Vector mapped = history.direction(-y, applyInitialInverse);
    EXPECT_LT((mapped - s).norm(), 1e-12 * s.norm()) << "iteration " << k;
  }
  // The iterates approach the minimizer A^-1 b.
  const Eigen::VectorXd solution = a.ldlt().solve(b);
  EXPECT_LT((Eigen::Map<const Eigen::VectorXd>(x.data(), 6) - solution).norm(),
            0.1 * solution.norm());
}

TEST(QuasiNewtonHistory, KeepsNoPairOfNonPositiveCurvature) {
  // A step along which the gradient fell (s . y < 0, a concave direction) would make the
  // updated inverse indefinite: it is dropped, and the direction stays H0^-1 (-g).
  QuasiNewtonHistory history(4);
  const auto identity = [](const Vector& r) -> Vector { return r; };
  const std::vector<double> x0(6, 0.0);
  Vector g = Vector::Ones(6);
  history.start(x0, kFreeIndex, g);
  std::vector<double> x1(6, 0.1);
  history.record(x1, kFreeIndex, Vector::Constant(6, 0.5));  // s . y = 6 * 0.1 * -0.5
  const Vector d = history.direction(g, identity);
  EXPECT_LT((d + g).norm(), 1e-15);
  // With no capacity nothing is ever kept.
  QuasiNewtonHistory none(0);
  none.start(x0, kFreeIndex, g);
  EXPECT_FALSE(none.pending);
}

// The soft hanging sheet of bench_bullet (E = 100 kPa, 1 mm, 500 kg/m^3, nu = 0.3),
// 16 x 16 cells, pinned along x = -0.25, swinging down from horizontal under gravity.
BodyDef swingingSheet(const char* model) {
  BodyDef body = sheetBody(16);
  body.model = model;
  body.material.thickness = 1e-3;
  body.material.poisson = 0.3;
  PinDef pin;
  pin.shape = PinShape::kBox;
  pin.center = {-0.25, 0, 0};
  pin.halfExtents = {1e-3, 0.3, 1e-3};
  body.pins.push_back(pin);
  return body;
}

struct SwingResult {
  std::vector<double> positions;
  int32_t quasiNewton = 0, factorizations = 0;
};

SwingResult swing(const BodyDef& body, const NewtonSettings& newton, int steps,
                  double dt = 1.0 / 240) {
  World world = buildWorld(sceneWith(body));
  computeAccelerations(world);
  ImplicitSettings settings;
  settings.scheme = ImplicitScheme::kBackwardEuler;
  settings.newton = newton;
  ImplicitStepper stepper(settings);
  PhaseTimes times;
  SwingResult result;
  for (int s = 0; s < steps; ++s) {
    const ImplicitStepReport report = stepper.step(world, dt, times);
    result.quasiNewton += report.bodies[0].quasiNewtonIterations;
    result.factorizations += report.bodies[0].factorizations;
  }
  result.positions = world.bodies[0].positions;
  return result;
}

double largestDistance(const std::vector<double>& a, const std::vector<double>& b) {
  double largest = 0;
  for (size_t i = 0; i < a.size(); i += 3) {
    largest = std::max(largest, std::hypot(a[i] - b[i], a[i + 1] - b[i + 1], a[i + 2] - b[i + 2]));
  }
  return largest;
}

TEST(QuasiNewton, SwingingSheetFollowsExactNewtonWithoutRefactorizing) {
  // 0.25 s of the swing (60 backward Euler steps of 1/240 s): the Laplacian stand-in's
  // iterations to a relative residual of 1e-3 against exact Newton to 1e-9. The stand-in
  // never goes stale as the sheet turns: no Cholesky factorization of the model's Hessian
  // at all. Measured, largest node distance from exact Newton: 0.24 mm (discrete shell,
  // 4.4 iterations per step), 0.26 mm (mass-spring, 4.5), 9.2 mm (fiber, 2.4), where the
  // frozen factor to the same 1e-3 gives 0.05, 0.08 and 0.21 mm. The fiber sheet's
  // outliers are a few nodes at the free corners, whose soft local bending the stand-in
  // (stretching only) leaves least converged: their residual is small because they are
  // soft. All well inside the scheme's own error at this step (the sheet's free edge
  // moves 37 mm from where a quarter step puts it in the first 0.5 s,
  // BM_SheetPerSimulatedSecond in bench_bullet.cpp).
  for (const char* model : {"discrete_shell", "fiber", "mass_spring"}) {
    const BodyDef body = swingingSheet(model);
    NewtonSettings exact;
    exact.frozenHessian = false;
    exact.tolerance = 1e-9;
    NewtonSettings quasi;
    quasi.quasiNewton = true;
    quasi.tolerance = 1e-3;
    const SwingResult reference = swing(body, exact, 60);
    const SwingResult fast = swing(body, quasi, 60);
    const double distance = largestDistance(reference.positions, fast.positions);
    std::cout << "[ measured ] " << model << ": " << fast.quasiNewton / 60.0
              << " quasi-Newton iterations and " << fast.factorizations
              << " factorizations in 60 steps, largest node distance " << 1e3 * distance << " mm\n";
    EXPECT_GT(fast.quasiNewton, 60) << model;
    EXPECT_EQ(fast.factorizations, 0) << model;
    EXPECT_LT(distance, std::string(model) == "fiber" ? 15e-3 : 1e-3) << model;
  }
}

TEST(QuasiNewton, StiffPlateFallsBackToTheFrozenFactorAndStopsTrying) {
  // A 1 mm aluminium cantilever at 20x its stable step: bending dominates, which the
  // stand-in does not know, so its iterations do not converge in their budget; the solve
  // goes on with the frozen factor and reaches the same solution as without the stand-in
  // (both to 1e-9), and the stand-in is tried again only after 1, 2, 4, ... skipped steps:
  // at steps 0, 2, 5, 10, 19, 36 and 69 of 100, so at most 7 budgets of 15 iterations.
  BodyDef body = sheetBody(16);
  body.material.youngModulus = 70e9;
  body.material.thickness = 1e-3;
  body.material.density = 2700;
  body.material.poisson = 0.33;
  body.pins = swingingSheet("discrete_shell").pins;
  World probe = buildWorld(sceneWith(body));
  const double dt = 20 * stableTimeStep(probe);
  NewtonSettings frozen;
  frozen.tolerance = 1e-9;
  NewtonSettings quasi = frozen;
  quasi.quasiNewton = true;
  const SwingResult reference = swing(body, frozen, 100, dt);
  const SwingResult tried = swing(body, quasi, 100, dt);
  EXPECT_LT(largestDistance(reference.positions, tried.positions), 1e-9);
  EXPECT_GT(tried.quasiNewton, 0);
  EXPECT_LE(tried.quasiNewton, 7 * quasi.quasiNewtonBudget);
}

TEST(QuasiNewton, StepsAreBitIdenticalWithOneAndTwoThreads) {
  for (const char* model : {"mass_spring", "fiber", "discrete_shell"}) {
    const auto run = [&](int threads) {
      const ThreadLimit limit(threads);
      NewtonSettings quasi;
      quasi.quasiNewton = true;
      quasi.tolerance = 1e-3;
      return swing(swingingSheet(model), quasi, 20).positions;
    };
    const std::vector<double> one = run(1);
    const std::vector<double> two = run(2);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(double))) << model;
  }
}

// An elastic MLS solid's stand-in is built at its rest shape (Model::standInPositions) and
// kept from frame to frame, where a stand-in built at the run's positions is dropped with
// the rest of the run's state (LinearSolverCache::dropRunState).
TEST(QuasiNewton, OnlyAStandInBuiltAtTheModelsReferenceOutlivesTheFrame) {
  for (const bool atReference : {true, false}) {
    LinearSolverCache cache;
    cache.laplacianBuilt = true;
    cache.laplacianValid = true;
    cache.laplacianAtReference = atReference;
    cache.laplacianTopology = 3;
    cache.laplacianAlpha = 14400;
    cache.laplacianFree = kFreeIndex;
    cache.laplacianValues = {1.0, 2.0};
    cache.laplacianFailures = 2;
    cache.laplacianSkip = 4;
    cache.layoutValid = true;
    cache.factorized = true;
    cache.dropRunState();
    EXPECT_EQ(cache.laplacianBuilt, atReference);
    EXPECT_EQ(cache.laplacianValues.size(), atReference ? 2U : 0U);
    EXPECT_EQ(cache.laplacianFree.size(), atReference ? kFreeIndex.size() : 0U);
    EXPECT_EQ(cache.laplacianTopology, atReference ? 3U : 0U);
    // What the run's path decided goes in both cases.
    EXPECT_EQ(cache.laplacianFailures, 0);
    EXPECT_EQ(cache.laplacianSkip, 0);
    EXPECT_FALSE(cache.layoutValid);
    EXPECT_FALSE(cache.factorized);
  }
}

// The same for the shells that name their rest shape (an elastic fiber sheet, a discrete
// shell, a mass-spring cloth): a sheet pinned along one edge swings with quasi-Newton backward
// Euler; restored at frame 3 it replays frames 4-6 bit for bit, and the stand-in built at rest in
// frame 1 serves every frame (no Cholesky factorization of the model's Hessian in the run).
TEST(QuasiNewton, ASheetRunRestoredReplaysItsFramesBitForBit) {
  for (const std::string model : {"fiber", "discrete_shell", "mass_spring"}) {
    const std::string scene = R"({"gravity": [0, 0, -9.81], "bodies": [{"name": "sheet",
      "primitive": {"type": "sheet", "size": [0.5, 0.5, 0], "resolution": 16}, "model": ")" +
                              model + R"(", "material": {"young_modulus": 1e5, "poisson": 0.3,
      "thickness": 0.001, "density": 500}, "pins": [{"shape": "box", "center": [-0.25, 0, 0],
      "half_extents": [0.001, 0.3, 0.001]}]}], "time": {"duration": 1, "frame_rate": 30,
      "integrator": "backward_euler", "time_step": 0.004166666666666667, "newton_hessian":
      "quasi_newton", "newton_tolerance": 1e-2}, "output": {"folder": "out", "formats":
      ["ply"]}})";
    Simulation sim(parseScene(scene, "sheet.json", std::filesystem::temp_directory_path()));
    const std::vector<double> start(sim.positions(0).begin(), sim.positions(0).end());
    sim.advanceFrames(3);
    const SimulationState saved = sim.saveState();
    sim.advanceFrames(3);
    const std::vector<double> first(sim.positions(0).begin(), sim.positions(0).end());
    sim.restoreState(saved);
    sim.advanceFrames(3);
    const std::span<const double> second = sim.positions(0);
    ASSERT_EQ(first.size(), second.size()) << model;
    EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(double))) << model;
    EXPECT_GT(largestDistance(start, first), 0.05) << model << ": it swung down";
    EXPECT_EQ(sim.statistics().factorizations, 0) << model;
  }
}

// The kept stand-in does not make frames depend on where the run started: an elastic MLS
// block dropped on a floor with quasi-Newton backward Euler, restored at frame 3, replays
// frames 4-6 bit for bit (the run that saved had built its stand-in in frame 1).
TEST(QuasiNewton, AnMlsRunRestoredReplaysItsFramesBitForBit) {
  const std::string scene = R"({"gravity": [0, 0, -9.81], "obstacles": [{"type": "plane",
    "point": [0, 0, 0], "normal": [0, 0, 1], "response": "penalty"}], "bodies": [{"name":
    "block", "primitive": {"type": "box", "size": [0.1, 0.1, 0.1], "resolution": 4},
    "transform": {"translation": [0, 0, 0.06]}, "model": "mls_solid", "mls_solid":
    {"phyxel_count": 0, "phyxel_spacing": 0.025}, "material": {"young_modulus": 1e4,
    "poisson": 0.3, "density": 1000}}], "time": {"duration": 1, "frame_rate": 30,
    "integrator": "backward_euler", "time_step": 0.008333333333333333, "newton_hessian":
    "quasi_newton", "newton_tolerance": 1e-3}, "output": {"folder": "out", "formats": ["ply"]}})";
  Simulation sim(parseScene(scene, "block.json", std::filesystem::temp_directory_path()));
  const auto lowestOf = [](std::span<const double> x) {
    double lowest = 1;
    for (size_t k = 2; k < x.size(); k += 3) lowest = std::min(lowest, x[k]);
    return lowest;
  };
  const double start = lowestOf(sim.positions(0));
  sim.advanceFrames(3);
  const SimulationState saved = sim.saveState();
  sim.advanceFrames(3);
  const std::vector<double> first(sim.positions(0).begin(), sim.positions(0).end());
  const int64_t iterations = sim.statistics().newtonIterations;
  sim.restoreState(saved);
  sim.advanceFrames(3);
  const std::span<const double> second = sim.positions(0);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(double)));
  // It fell the 1 cm gap and the floor stopped it (a free fall goes 0.2 m in these frames;
  // the soft block's lowest phyxels sink 1.8 cm into the penalty floor, as before the stand-in
  // was kept).
  const double lowest = lowestOf(first);
  std::cout << "[ measured ] lowest phyxel " << start << " -> " << lowest << " m, " << iterations
            << " Newton iterations in 6 frames\n";
  EXPECT_LT(lowest, start - 0.01);
  EXPECT_GT(lowest, -0.05);
  EXPECT_GT(iterations, 0);
}

}  // namespace
}  // namespace shellsim
