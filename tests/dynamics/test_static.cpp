// Static equilibrium from a scene file (time.integrator "static", load increments): the
// clamped strip of scenes/static_cantilever.json under a dead tip load P = k EI / L^2,
// against the elastica; convergence at k = 10 whatever the density; the summary's
// residual per increment; resume; a membrane without bending hangs from its clamp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = SHELLSIM_SOURCE_DIR;

// Tip shortening -u/L and deflection w/L of the elastica of a cantilever under a dead end
// load, k = P L^2 / (E I) = 1, 2, 4 (Bisshopp and Drucker 1945; the values the discrete
// shell's validation uses, test_discrete_shell_validation.cpp).
struct Tip {
  double shortening, deflection;
};
constexpr double kLoads[] = {1, 2, 4};
constexpr Tip kElastica[] = {{0.056433, 0.301721}, {0.160642, 0.493457}, {0.328941, 0.669964}};

SceneDef cantilever(const std::string& model, double k) {
  SceneDef scene = loadScene(kSourceDir / "scenes" / "static_cantilever.json");
  BodyDef& strip = scene.bodies[0];
  strip.model = model;
  const double ei = strip.material.youngModulus * 0.1 * std::pow(strip.material.thickness, 3) / 12;
  strip.loads[0].force = {0, 0, -k * ei};  // L = 1 m
  scene.time.loadIncrements = static_cast<int32_t>(std::ceil(k));
  return scene;
}

// Solves every increment of the scene; returns the mean tip displacement over L.
Tip solve(const SceneDef& scene, StepStatistics* statistics = nullptr) {
  Simulation sim(scene);
  const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
  sim.advanceFrames(scene.time.loadIncrements);
  EXPECT_DOUBLE_EQ(sim.time(), scene.time.duration);
  const std::span<const double> x = sim.positions(0);
  Tip tip{0, 0};
  int count = 0;
  for (size_t i = 0; i < rest.size() / 3; ++i) {
    if (std::abs(rest[3 * i] - 1.0) > 1e-9) continue;
    tip.shortening += 1.0 - x[3 * i];
    tip.deflection -= x[3 * i + 2];
    ++count;
  }
  EXPECT_GT(count, 1);
  if (statistics != nullptr) *statistics = sim.statistics();
  return {tip.shortening / count, tip.deflection / count};
}

// The strip of `model` at k = 1, 2, 4: tip shortening and deflection within `tolerance` (of
// L) of the elastica; prints what it measured.
void expectElastica(const std::string& model, double tolerance) {
  for (size_t c = 0; c < std::size(kLoads); ++c) {
    const Tip tip = solve(cantilever(model, kLoads[c]));
    std::cout << "[ measured ] " << model << ", k = " << kLoads[c] << ": -u/L " << tip.shortening
              << " (elastica " << kElastica[c].shortening << "), w/L " << tip.deflection
              << " (elastica " << kElastica[c].deflection << ")\n";
    EXPECT_NEAR(tip.shortening, kElastica[c].shortening, tolerance) << "k = " << kLoads[c];
    EXPECT_NEAR(tip.deflection, kElastica[c].deflection, tolerance) << "k = " << kLoads[c];
  }
}

// Measured (20 cells along the strip): k = 1: -u/L 0.0630, w/L 0.3197; k = 2: 0.1666,
// 0.5038; k = 4: 0.3251, 0.6695 — the discrete shell's own limit at this mesh (its hinge
// energy acts like Poisson ratio -1/3, discrete_shell_model.hpp), as with the internal solver.
TEST(StaticCantilever, DiscreteShellMatchesTheElasticaFromTheSceneFile) {
  expectElastica("discrete_shell", 0.025);
}

// The inelastic shell (gingold2004) on the same scene file, its model swapped: measured (20
// cells along, 2 across, the sheet primitive's alternating diagonals, the quadratic-patch
// bending) k = 1: -u/L 0.0584, w/L 0.3082; k = 2: 0.1650, 0.5019; k = 4: 0.3362, 0.6798,
// within 0.01 L; the paper's operator gave 0.3217 at k = 1 (and is twice too stiff in twist
// on this mesh). Finer strips against the elastica: test_inelastic_shell_accuracy.cpp.
TEST(StaticCantilever, InelasticShellAgainstTheElastica) {
  expectElastica("inelastic_shell", 0.012);
}

// The fiber strip against the elastica (issue 20's calibration), the scene's strip refined to
// `resolution` cells along (8 across at 84, 16 at 168), with `neighbours` per node: the tip
// deflection within `tolerance` of the elastica's, relative, the shortening (second order, and
// more sensitive to the root's rotation) within twice that. Returns the tip deflections over
// the elastica's at k = 1, 2, 4. Measured (w/L over the elastica's - 1, k = 1 / 2 / 4; the
// test's increments, k of them): 84 cells, 8 neighbours +1.7 / +1.4 / +1.1 % (-u/L +2.9 / +2.3 /
// +1.7 %); 168 cells, 8 / 12 / 16 neighbours: +0.9 / +0.7 / +0.5 %, -1.6 / -1.0 / -0.4 %,
// -0.2 / -0.0 / +0.2 % (-u/L +1.4 / +1.2 / +0.8 %, -3.8 / -2.8 / -1.6 %, -0.8 / -0.5 / -0.2 %);
// the counts 2.5 % apart at most (k = 1). With 8 neighbours the strip
// converges from the soft side as the clamp by rows of pins lets the root turn by O(cell), as on
// the clamped plates. Before the Voronoi node areas and the fitted weights
// (test_fiber_accuracy.cpp) 8 neighbours gave +3.9 / +2.9 / +1.8 % at 84 cells and +2.9 / +2.1 /
// +1.3 % at 168, and at 84 cells, k = 1, 12 neighbours -10.9 % and 16 -1.0 % (now -3.2 and -1.2 %);
// before the edge calibration and the Poisson blend (fiber_model.hpp (b)) the edge nodes were 2.7
// times too stiff along the edge and bending acted as nu = 1/3 whatever the material's (here 0):
// w/L -36 % on the scene's own strip (2 cells across).
std::vector<double> expectFiberElastica(int resolution, int neighbours, double tolerance) {
  std::vector<double> ratios;
  for (size_t c = 0; c < std::size(kLoads); ++c) {
    SceneDef scene = cantilever("fiber", kLoads[c]);
    scene.bodies[0].primitive->resolution = resolution;
    scene.bodies[0].options<FiberDef>().neighbours = neighbours;
    const Tip tip = solve(scene);
    std::cout << "[ measured ] fiber, " << resolution << " cells, " << neighbours
              << " neighbours, k = " << kLoads[c] << ": -u/L " << tip.shortening << " (elastica "
              << kElastica[c].shortening << "), w/L " << tip.deflection << " (elastica "
              << kElastica[c].deflection << ")\n";
    ratios.push_back(tip.deflection / kElastica[c].deflection);
    EXPECT_NEAR(ratios.back(), 1.0, tolerance) << "k = " << kLoads[c];
    EXPECT_NEAR(tip.shortening / kElastica[c].shortening, 1.0, 2 * tolerance)
        << "k = " << kLoads[c];
  }
  return ratios;
}

TEST(StaticCantilever, FiberMeetsTheElasticaWithinThreePercent) {
  (void)expectFiberElastica(84, 8, 0.03);
}

// Every neighbour count within 3 % of the elastica at 168 cells, and within 3 % of each other.
TEST(StaticCantileverSlow, FiberMeetsTheElasticaWhateverTheNeighbourCountAtTwiceTheResolution) {
  std::vector<std::vector<double>> byCount;
  for (const int neighbours : {8, 12, 16})
    byCount.push_back(expectFiberElastica(168, neighbours, 0.03));
  for (size_t c = 0; c < std::size(kLoads); ++c) {
    double lo = 10, hi = 0;
    for (const std::vector<double>& ratios : byCount) {
      lo = std::min(lo, ratios[c]);
      hi = std::max(hi, ratios[c]);
    }
    EXPECT_LT(hi / lo - 1, 0.03) << "k = " << kLoads[c];
  }
}

TEST(StaticCantilever, KTenConvergesInTenIncrementsWhateverTheDensity) {
  for (const char* model : {"discrete_shell", "fiber"}) {
    double reference = 0;
    for (const double density : {1000.0, 1.0, 1e5}) {
      SceneDef scene = cantilever(model, 10);
      scene.bodies[0].material.density = density;
      StepStatistics statistics;
      const Tip tip = solve(scene, &statistics);
      EXPECT_LE(statistics.steps, 20) << model << ", density " << density;
      // Elastica at k = 10: w/L = 0.8106; without gravity the density changes nothing.
      EXPECT_NEAR(tip.deflection, 0.8106, 0.07) << model;
      if (reference == 0) reference = tip.deflection;
      EXPECT_NEAR(tip.deflection, reference, 1e-9) << model << ", density " << density;
    }
  }
}

TEST(StaticCantilever, TheSummaryHasTheResidualAndLoadFactorOfEveryIncrement) {
  testfiles::TempFolder folder("static_");
  RunOptions options;
  options.outputFolder = folder.path() / "run";
  const SceneDef scene = loadScene(kSourceDir / "scenes" / "static_cantilever.json");
  const RunReport report = runScene(scene, options);
  EXPECT_EQ(report.framesWritten, scene.time.loadIncrements + 1);
  std::ifstream in(folder.path() / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["status"], "completed");
  const auto& frames = summary["frames"];
  ASSERT_EQ(frames.size(), 11u);
  EXPECT_FALSE(frames[0].contains("residual"));
  for (size_t f = 1; f < frames.size(); ++f) {
    EXPECT_NEAR(frames[f]["load_factor"].get<double>(), 0.1 * static_cast<double>(f), 1e-12);
    EXPECT_LT(frames[f]["residual"].get<double>(), 1e-6);
    EXPECT_EQ(frames[f]["kinetic_energy"].get<double>(), 0.0);
    EXPECT_GT(frames[f]["newton_iterations"].get<int64_t>(),
              frames[f - 1].value("newton_iterations", int64_t{0}));
  }
  EXPECT_GT(frames[10]["bodies"][0]["bending"].get<double>(), 0);
}

TEST(StaticCantilever, AMembraneWithoutBendingStiffnessHangsFromItsClamp) {
  // A mass-spring strip is a mechanism under a transverse load: its equilibrium is hanging
  // straight down from the clamp (-u/L = w/L = 1, a little more by the stretch). Newton
  // from the flat start cannot move it (no transverse stiffness); pseudo-transient
  // continuation (implicit.cpp) swings it down, whatever the density. Measured: k = 10 in
  // 10 increments, about 10,000 Newton iterations in all, 0.8 s.
  for (const double density : {1000.0, 1.0}) {
    SceneDef scene = cantilever("mass_spring", 10);
    scene.bodies[0].material.density = density;
    const Tip tip = solve(scene);
    EXPECT_NEAR(tip.shortening, 1.0, 2e-3) << "density " << density;
    EXPECT_NEAR(tip.deflection, 1.0, 2e-3) << "density " << density;
  }
}

TEST(StaticCantilever, AStaticSimulationIsNotAdvancedInTime) {
  Simulation sim(cantilever("discrete_shell", 1));
  EXPECT_THROW(sim.advance(0.1), InputError);
  sim.advanceFrames(1);
  EXPECT_THROW(sim.advanceFrames(1), InputError);  // all increments solved
}

}  // namespace
}  // namespace shellsim
