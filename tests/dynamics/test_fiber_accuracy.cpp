// The fiber model's calibration on plates (issue 20): square plates, a / h = 100, nu = 0.3,
// simply supported (the boundary's nodes pinned) and clamped (the boundary and a ring of one
// cell pinned, as test_plate_models.cpp), against Kirchhoff; the energies of the simply
// supported plate's modes; for the neighbour counts 8, 12 and 16. The strips against the
// elastica are in test_static.cpp.
//
// What the calibration rests on (fiber_model.hpp (b), geometry/sampling.hpp voronoiAreas):
// every node's area is its Voronoi area, not a third of its triangles' (on this grid, whose
// diagonals alternate as the sheet primitive's, those are 4/3 and 2/3 of a cell in a
// checkerboard, and the plates sagged about 3.5 % more than Kirchhoff's at every resolution:
// 1.0465 simply supported and 1.0675 clamped at 128 cells, converging to about 1.036 for both);
// and an interior node's per-fiber weights are fitted so that its bending form is the plate's
// in every mode (with 12 neighbours on this grid the fibers along the axes outnumber the
// diagonal ones, and the plate sagged 1.20 times Kirchhoff's at 32 cells).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "plate_scene.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;

constexpr double kYoung = 7e10, kPoisson = 0.3, kThickness = 0.01, kDensity = 2700;
constexpr double kGravity = 9.81;
// Centre deflection w = alpha q a^4 / D, nu = 0.3 (Timoshenko and Woinowsky-Krieger, tables 8
// and 35).
constexpr double kSimplySupportedAlpha = 0.00406235, kClampedAlpha = 0.00126532;
constexpr int kNeighbourCounts[] = {8, 12, 16};

double flexuralRigidity() {
  return kYoung * std::pow(kThickness, 3) / (12 * (1 - kPoisson * kPoisson));
}

// The unit plate of `cells` x `cells` fiber nodes' cells (and a ring of one cell when
// clamped) as a simulation with every node at |x| or |y| >= 1/2 pinned; `jitter` > 0 moves
// every node inside the plate but the centre by up to that many cells.
Simulation fiberPlate(const fs::path& folder, int cells, bool clamped, int neighbours,
                      double gravity = kGravity, double jitter = 0) {
  const double cell = 1.0 / cells;
  const double ring = clamped ? cell : 0.0;
  const std::vector<double> c = plate_scene::coordinates(-0.5, 0.5, cells, ring);
  const fs::path mesh = plate_scene::writeGrid(
      folder, "plate_" + std::to_string(cells) + (clamped ? "_c" : "_s"), c, c, jitter,
      [](double x, double y) {
        return std::max(std::abs(x), std::abs(y)) < 0.5 - 1e-9 && std::hypot(x, y) > 1e-9;
      });
  std::ostringstream body;
  body << R"("model": "fiber", "fiber": {"neighbours": )" << neighbours
       << R"(}, "material": {"young_modulus": )" << kYoung << R"(, "poisson": )" << kPoisson
       << R"(, "thickness": )" << kThickness << R"(, "density": )" << kDensity << "}";
  return Simulation(parseScene(plate_scene::pinnedPlateScene(mesh, body.str(), gravity, ring),
                               "plate.json", folder));
}

// Centre deflection under the plate's weight over Kirchhoff's.
double deflectionRatio(const fs::path& folder, int cells, bool clamped, int neighbours,
                       double jitter = 0) {
  Simulation sim = fiberPlate(folder, cells, clamped, neighbours, kGravity, jitter);
  const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
  sim.advanceFrames(1);
  const std::span<const double> x = sim.positions(0);
  double deflection = 0;
  int count = 0;
  for (size_t v = 0; v < rest.size() / 3; ++v) {
    if (std::hypot(rest[3 * v], rest[3 * v + 1]) < 1e-9) {
      deflection -= x[3 * v + 2] - rest[3 * v + 2];
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "a node at the centre (even cells)";
  const double load = kDensity * kThickness * kGravity;
  const double alpha = clamped ? kClampedAlpha : kSimplySupportedAlpha;
  return deflection / count / (alpha * load / flexuralRigidity());
}

// The plates at `cells` for every neighbour count: each within `tolerance` of Kirchhoff, and
// the neighbour counts within `spread` of each other.
void expectPlates(int cells, double simplySupportedTolerance, double clampedTolerance,
                  double spread) {
  testfiles::TempFolder folder("fiber_plates");
  for (const bool clamped : {false, true}) {
    std::vector<double> ratios;
    for (const int neighbours : kNeighbourCounts) {
      ratios.push_back(deflectionRatio(folder.path(), cells, clamped, neighbours));
      std::cout << "[ measured ] fiber " << (clamped ? "clamped" : "simply supported") << " plate, "
                << cells << " cells, " << neighbours << " neighbours: deflection / Kirchhoff's "
                << ratios.back() << "\n";
      EXPECT_NEAR(ratios.back(), 1.0, clamped ? clampedTolerance : simplySupportedTolerance)
          << neighbours << " neighbours";
    }
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    EXPECT_LT(*hi / *lo - 1, spread) << (clamped ? "clamped" : "simply supported");
  }
}

// Measured (deflection / Kirchhoff's for 8 / 12 / 16 neighbours), simply supported: 32 cells
// 1.0392 / 1.0503 / 1.0337, 64 cells 1.0191 / 1.0252 / 1.0169, 128 cells 1.0093 / 1.0123 /
// 1.0084; clamped: 1.1317 / 1.1718 / 1.1521, 1.0641 / 1.0825 / 1.0707, 1.0317 / 1.0404 /
// 1.0340. First order towards 1 (the clamp by two rows of pins lets the root turn by O(cell),
// as on the discrete and inelastic shells, test_plate_models.cpp). Before: 1.0786 / 1.2617 /
// 1.1075 simply supported and 1.1657 / 1.1970 / 1.2052 clamped at 32 cells.
TEST(FiberAccuracy, PlatesConvergeToKirchhoffWhateverTheNeighbourCount) {
  expectPlates(64, 0.03, 0.09, 0.03);
}

// The interior nodes moved by up to 20 % of a cell (8 neighbours): measured at 64 cells,
// simply supported 1.0191 (1.0191 regular), clamped 1.0715 (1.0641). Another draw of the
// jitter (a probe, 12 and 16 neighbours): simply supported 1.0592 and 1.0284, clamped 1.0899 and
// 1.0783; with the triangulation's areas and the normalised weights 1.0556 simply supported
// and 1.1072 clamped with 8 neighbours, 1.1554 simply supported with 12.
TEST(FiberAccuracy, JitteredPlatesBendAsRegularOnes) {
  testfiles::TempFolder folder("fiber_jittered_plates");
  for (const bool clamped : {false, true}) {
    const double regular = deflectionRatio(folder.path(), 64, clamped, 8);
    const double jittered = deflectionRatio(folder.path(), 64, clamped, 8, 0.2);
    std::cout << "[ measured ] fiber " << (clamped ? "clamped" : "simply supported")
              << " plate, 64 cells, jittered by 20 %: deflection / Kirchhoff's " << jittered
              << " (regular " << regular << ")\n";
    EXPECT_NEAR(jittered / regular, 1.0, 0.015);
  }
}

TEST(FiberAccuracySlow, PlatesWithinFivePercentOfKirchhoffAt128Cells) {
  expectPlates(128, 0.05, 0.05, 0.02);
}

// Bending energy of the simply supported plate's mode w = eps sin(m pi u) sin(n pi v)
// (u, v in [0, 1]) against D/2 int (lap w)^2 = D pi^4 (m^2 + n^2)^2 eps^2 / 8 (the Gaussian
// term integrates to 0 here). Measured at 64 cells, (1, 1) / (1, 2) / (2, 2): 8 neighbours
// 0.9801 / 0.9854 / 0.9766, 12: 0.9744 / 0.9813 / 0.9706, 16: 0.9823 / 0.9856 / 0.9771. Without
// the fitted weights: 12 neighbours 0.8309 / 0.9524 / 0.8282, 16: 0.9488 / 0.9824 / 0.9439 (8
// the same: its interior nodes' forms were already the plate's). The node areas barely move
// these (8 neighbours, (1, 1): 0.9800 with the triangulation's): a smooth field averages the
// checkerboard out; only the solution exploits it.
TEST(FiberAccuracy, PlateModesStoreKirchhoffsEnergyWhateverTheNeighbourCount) {
  testfiles::TempFolder folder("fiber_modes");
  constexpr int kCells = 64;
  constexpr double kAmplitude = 1e-5;  // m: linear
  for (const int neighbours : kNeighbourCounts) {
    Simulation sim = fiberPlate(folder.path(), kCells, false, neighbours, 0.0);
    const std::vector<double> rest(sim.positions(0).begin(), sim.positions(0).end());
    for (const auto& [m, n] : {std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
      std::vector<double> x = rest;
      for (size_t v = 0; v < x.size() / 3; ++v) {
        x[3 * v + 2] = kAmplitude * std::sin(m * std::numbers::pi * (rest[3 * v] + 0.5)) *
                       std::sin(n * std::numbers::pi * (rest[3 * v + 1] + 0.5));
      }
      sim.setPositions(0, x);
      const double exact = flexuralRigidity() * std::pow(std::numbers::pi, 4) *
                           std::pow(m * m + n * n, 2) * kAmplitude * kAmplitude / 8;
      const double ratio = sim.energies(0).bending / exact;
      std::cout << "[ measured ] fiber, " << neighbours << " neighbours, " << kCells
                << " cells: mode (" << m << ", " << n << ") bending energy / plate's " << ratio
                << "\n";
      EXPECT_NEAR(ratio, 1.0, 0.04) << neighbours << " neighbours, mode " << m << ", " << n;
    }
  }
}

}  // namespace
}  // namespace shellsim
