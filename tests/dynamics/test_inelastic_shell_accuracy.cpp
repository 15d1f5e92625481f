// Accuracy of the inelastic shell's bending (gingold2004, issue 17): square plates under a
// uniform load against Kirchhoff plate theory, the clamped strip under a tip load against
// the linear beam and the elastica, each on the sheet primitive (alternating diagonals) and
// with its interior vertices jittered by 20 % of an edge; solved by the static integrator
// from scenes built here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numbers>
#include <random>
#include <sstream>
#include <string>

#include "geometry/primitives.hpp"
#include "plate_scene.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;
using plate_scene::coordinates;
using plate_scene::pinBox;
using plate_scene::writeGrid;

// A clamp of a rotation-free shell is two rows of pins, here one cell apart. What it costs:
// the patches of the faces along the clamp fit their quadratics across the clamped line,
// where the curvature jumps from its largest value to 0, and measure less than it (measured
// on the clamped square plate at 16 / 32 / 64 cells with alpha = 0.00126: 13.9 / 6.2 / 3.1 % soft;
// a quarter-cell ring 15 % and a two-cell ring 13.5 % at 32; clamped on two opposite sides
// only: 10.0 / 3.5 / 0.8 %). A clamped boundary condition in the model (mirrored ghost nodes) would
// remove it; not built.
constexpr double kClampRing = 1.0;

// Aluminium-like, a / h = 100: the centre deflection is about 2 % of the thickness, linear.
constexpr double kYoung = 7e10, kPoisson = 0.3, kThickness = 0.01, kDensity = 2700, kGravity = 9.81;

std::string materialJson() {
  std::ostringstream s;
  s << R"("material": {"young_modulus": )" << kYoung << R"(, "poisson": )" << kPoisson
    << R"(, "thickness": )" << kThickness << R"(, "density": )" << kDensity << "}";
  return s.str();
}

// The centre deflection of a unit square plate under its own weight (q = rho h g), over
// Kirchhoff's w = alpha q a^4 / D (Timoshenko and Woinowsky-Krieger, tables 8 and 35).
// Simply supported: the boundary's nodes pinned (alpha = 0.00406235). Clamped: the plate
// extended by a ring of kClampRing cells whose nodes are pinned with the boundary's (alpha =
// 0.00126532).
double plateDeflectionRatio(const fs::path& folder, bool clamped, int cells,
                            const std::string& bending, double jitter) {
  const double cell = 1.0 / cells;
  const double ring = clamped ? kClampRing * cell : 0.0;
  const std::vector<double> c = coordinates(-0.5, 0.5, cells, ring);
  const fs::path mesh = writeGrid(
      folder, "plate_" + std::to_string(cells) + (clamped ? "_clamped_" : "_") + bending, c, c,
      jitter, [](double x, double y) { return std::max(std::abs(x), std::abs(y)) < 0.5 - 1e-9; });
  const std::string scene = plate_scene::pinnedPlateScene(
      mesh,
      R"("model": "inelastic_shell", "inelastic_shell": {"bending": ")" + bending + R"("}, )" +
          materialJson(),
      kGravity, ring);
  const SceneDef def = parseScene(scene, "plate.json", folder);
  Simulation sim(def);
  const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
  sim.advanceFrames(1);
  const std::span<const double> x = sim.positions(0);
  size_t centre = 0;
  for (size_t v = 0; v < rest.size() / 3; ++v) {
    if (std::hypot(rest[3 * v], rest[3 * v + 1]) <
        std::hypot(rest[3 * centre], rest[3 * centre + 1])) {
      centre = v;
    }
  }
  const double d = kYoung * std::pow(kThickness, 3) / (12 * (1 - kPoisson * kPoisson));
  const double q = kDensity * kThickness * kGravity;
  const double alpha = clamped ? 0.00126532 : 0.00406235;
  return -x[3 * centre + 2] / (alpha * q / d);
}

// The strip of scenes/static_cantilever.json (L = 1 m, 0.1 m wide, E I = E h^3 0.1 / 12, nu
// = 0.3 here) clamped by the nodes at x <= 0 (a ring of one cell at x < 0), under a dead tip
// load P = k E I / L^2 at x = L, `cells` along it; returns the mean tip deflection w / L and
// shortening -u / L.
struct Tip {
  double deflection, shortening;
};
Tip cantileverTip(const fs::path& folder, int cells, double k, const std::string& bending,
                  double jitter) {
  const double cell = 1.0 / cells;
  const int across = std::max(2, cells / 10);
  const std::vector<double> xs = coordinates(0, 1, cells, cell);
  std::vector<double> ys = coordinates(-0.05, 0.05, across);
  std::vector<double> clamped(xs.begin(), xs.end() - 1);  // no ring at the tip
  const fs::path mesh = writeGrid(
      folder, "strip_" + std::to_string(cells) + "_" + bending, clamped, ys, jitter,
      [](double x, double y) { return x > 1e-9 && x < 1 - 1e-9 && std::abs(y) < 0.05 - 1e-9; });
  const double ei = kYoung * std::pow(kThickness, 3) * 0.1 / 12;
  std::ostringstream scene;
  scene.precision(17);
  scene << R"({"gravity": [0, 0, 0], "bodies": [{"name": "strip", "file": ")" << mesh.string()
        << R"(", "model": "inelastic_shell", "inelastic_shell": {"bending": ")" << bending
        << R"("}, )" << materialJson() << R"(, "pins": [)"
        << pinBox(-cell / 2, 0, cell / 2 + 1e-6, 0.1) << R"(], "loads": [{"shape": "box",
        "center": [1, 0, 0], "half_extents": [1e-6, 0.1, 0.001], "force": [0, 0, )"
        << -k * ei << R"(]}]}], "time": {"duration": 1, "integrator": "static",
        "load_increments": )"
        << std::max(1, static_cast<int>(std::ceil(k))) << R"(, "newton_tolerance": 1e-10,
        "newton_max_iterations": 100}, "output": {"folder": "out", "formats": ["ply"]}})";
  const SceneDef def = parseScene(scene.str(), "strip.json", folder);
  Simulation sim(def);
  const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
  sim.advanceFrames(def.time.loadIncrements);
  const std::span<const double> x = sim.positions(0);
  Tip tip{0, 0};
  int count = 0;
  for (size_t v = 0; v < rest.size() / 3; ++v) {
    if (std::abs(rest[3 * v] - 1) > 1e-9) continue;
    tip.deflection -= x[3 * v + 2];
    tip.shortening += 1 - x[3 * v];
    ++count;
  }
  return {tip.deflection / count, tip.shortening / count};
}

// Tip shortening -u/L and deflection w/L of the elastica under a dead end load, k = P L^2 /
// (E I) = 1, 2, 4 (Bisshopp and Drucker 1945), as in test_static.cpp.
constexpr double kLoads[] = {1, 2, 4};
constexpr Tip kElastica[] = {{0.301721, 0.056433}, {0.493457, 0.160642}, {0.669964, 0.328941}};

// Measured at 40 cells along, 4 across: w/L 0.30209 / 0.49321 / 0.66914 and -u/L 0.05654 /
// 0.16034 / 0.32747 at k = 1 / 2 / 4 (within 0.4 % of the elastica); the linear beam at k =
// 0.01 1.0028 w_beam; jittered by 20 %, every answer changes by less than 0.6 %. At 20 cells
// the linear beam is 2.2 % soft, at 80 0.3 % stiff.
TEST(InelasticShellAccuracy, CantileverWithinTwoPercentOfTheElasticaAndTheBeam) {
  testfiles::TempFolder folder("strip_");
  constexpr int kCells = 40;
  for (const double jitter : {0.0, 0.2}) {
    const Tip beam = cantileverTip(folder.path(), kCells, 0.01, "quadratic_patch", jitter);
    std::cout << "[ measured ] jitter " << jitter << ", k = 0.01: w / w_beam "
              << beam.deflection / (0.01 / 3) << '\n';
    EXPECT_NEAR(beam.deflection / (0.01 / 3), 1.0, 0.02) << "jitter " << jitter;
  }
  for (size_t c = 0; c < std::size(kLoads); ++c) {
    const Tip regular = cantileverTip(folder.path(), kCells, kLoads[c], "quadratic_patch", 0.0);
    const Tip jittered = cantileverTip(folder.path(), kCells, kLoads[c], "quadratic_patch", 0.2);
    for (const Tip& tip : {regular, jittered}) {
      std::cout << "[ measured ] k = " << kLoads[c] << ": w/L " << tip.deflection << " (elastica "
                << kElastica[c].deflection << "), -u/L " << tip.shortening << " (elastica "
                << kElastica[c].shortening << ")\n";
      EXPECT_NEAR(tip.deflection / kElastica[c].deflection, 1.0, 0.02) << "k = " << kLoads[c];
      EXPECT_NEAR(tip.shortening / kElastica[c].shortening, 1.0, 0.02) << "k = " << kLoads[c];
    }
    EXPECT_NEAR(jittered.deflection / regular.deflection, 1.0, 0.03) << "k = " << kLoads[c];
    EXPECT_NEAR(jittered.shortening / regular.shortening, 1.0, 0.03) << "k = " << kLoads[c];
  }
}

// Measured: simply supported 1.0036 (jittered 1.0115); clamped 1.0577 (1.0656), the clamp's
// error (kClampRing), 1.0271 at 64 cells. The paper's operator on the same mesh: simply
// supported 0.602 at 16, 32 and 64 cells (its twist is twice too stiff on alternating
// diagonals, a mesh whose flaps are not parallelogram completions).
TEST(InelasticShellAccuracy, SquarePlatesAgainstKirchhoff) {
  testfiles::TempFolder folder("plate_");
  for (const bool clamped : {false, true}) {
    double regular = 0;
    for (const double jitter : {0.0, 0.2}) {
      const double ratio =
          plateDeflectionRatio(folder.path(), clamped, 32, "quadratic_patch", jitter);
      std::cout << "[ measured ] " << (clamped ? "clamped" : "simply supported")
                << " plate, 32 x 32 cells, jitter " << jitter << ": w / w_Kirchhoff " << ratio
                << '\n';
      EXPECT_NEAR(ratio, 1.0, clamped ? 0.07 : 0.02)
          << "clamped " << clamped << ", jitter " << jitter;
      if (jitter == 0) regular = ratio;
      EXPECT_NEAR(ratio / regular, 1.0, 0.03) << "clamped " << clamped;
    }
  }
  // The clamp's error halves with the cell.
  const double fine = plateDeflectionRatio(folder.path(), true, 64, "quadratic_patch", 0.0);
  std::cout << "[ measured ] clamped plate, 64 x 64 cells: w / w_Kirchhoff " << fine << '\n';
  EXPECT_NEAR(fine, 1.0, 0.035);
  EXPECT_NEAR(plateDeflectionRatio(folder.path(), false, 16, "shape_operator", 0.0), 0.6, 0.02)
      << "the paper's operator";
}
}  // namespace
}  // namespace shellsim
