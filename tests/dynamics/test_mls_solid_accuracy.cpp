// Accuracy of the meshless volume model (muller2004, issue 19), static solves of scenes built
// here: a bar under an end load against uniaxial linear elasticity (Young's modulus and
// Poisson's ratio measured in its middle, where Saint-Venant's principle makes the stress
// uniaxial), Fig. 6's stretch with nu = 0 and 0.49 (volume change), and a cantilever of
// phyxels against the Timoshenko beam.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <sstream>
#include <string>

#include "shellsim/errors.hpp"
#include "shellsim/models/mls_solid.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;

constexpr double kYoung = 1e6;  // Pa

std::string mlsBody(double width, double length, double spacing, double poisson,
                    const std::string& pins, const std::string& loads) {
  std::ostringstream s;
  s.precision(17);
  s << R"({"name": "bar", "primitive": {"type": "box", "size": [)" << width << ", " << width << ", "
    << length << R"(], "resolution": 8}, "transform": {"translation": [0, 0, )" << length / 2
    << R"(]}, "model": "mls_solid", "mls_solid": {"phyxel_count": 0,
    "phyxel_spacing": )"
    << spacing << R"(}, "material": {"young_modulus": )" << kYoung << R"(, "poisson": )" << poisson
    << R"(, "density": 1000}, "pins": [)" << pins << R"(], "loads": [)" << loads << "]}";
  return s.str();
}

std::string slab(double z, double half, double thickness) {
  std::ostringstream s;
  s.precision(17);
  s << R"({"shape": "box", "center": [0, 0, )" << z << R"(], "half_extents": [)" << half << ", "
    << half << ", " << thickness << "]}";
  return s.str();
}

std::unique_ptr<Simulation> staticRun(const fs::path& folder, const std::string& body,
                                      int increments) {
  std::ostringstream scene;
  scene << R"({"gravity": [0, 0, 0], "bodies": [)" << body
        << R"(], "time": {"duration": 1, "integrator": "static", "load_increments": )" << increments
        << R"(, "newton_tolerance": 1e-10, "newton_max_iterations": 60},
        "output": {"folder": "out", "formats": ["ply"]}})";
  const SceneDef def = parseScene(scene.str(), "bar.json", folder);
  auto sim = std::make_unique<Simulation>(def);
  return sim;
}

// Mean of coordinate `axis` over the phyxels whose rest z is within 1e-9 of `z`.
double layerMean(std::span<const double> rest, std::span<const double> x, double z, int axis,
                 bool absolute = false) {
  double sum = 0;
  int count = 0;
  for (size_t p = 0; p < rest.size() / 3; ++p) {
    if (std::abs(rest[3 * p + 2] - z) > 1e-9) continue;
    const double v = x[3 * p + static_cast<size_t>(axis)];
    sum += absolute ? std::abs(v) : v;
    ++count;
  }
  return sum / count;
}

struct Uniaxial {
  double young, poisson;  // measured in the middle of the bar
};

// A w x w x 4w bar, its bottom layer of phyxels pinned, its top layer pulled (sign 1) or
// pushed (-1) by a stress of 1e-3 E; the strains between the two layers a quarter of the
// length either side of its middle, where the stress is uniaxial.
Uniaxial barUnderEndLoad(const fs::path& folder, double poisson, int across, double sign) {
  const double width = 0.06, length = 4 * width, a = width / across;
  const double stress = sign * 1e-3 * kYoung;
  std::ostringstream load;
  load << R"({"shape": "box", "center": [0, 0, )" << length - a / 2
       << R"(], "half_extents": [1, 1, 1e-6], "force": [0, 0, )" << stress * width * width << "]}";
  auto sim =
      staticRun(folder, mlsBody(width, length, a, poisson, slab(a / 2, 1, 1e-6), load.str()), 1);
  const std::vector<double> rest(sim->positions(0).begin(), sim->positions(0).end());
  sim->advanceFrames(1);
  const std::span<const double> x = sim->positions(0);
  // Two layers a quarter of the length either side of the middle.
  const int layers = static_cast<int>(std::lround(length / a));
  const double z0 = a / 2 + a * (layers / 4), z1 = a / 2 + a * (3 * layers / 4);
  const double axial = (layerMean(rest, x, z1, 2) - layerMean(rest, x, z0, 2)) / (z1 - z0) - 1;
  const double middle = a / 2 + a * (layers / 2);
  const double lateral =
      layerMean(rest, x, middle, 0, true) / layerMean(rest, rest, middle, 0, true) - 1;
  return {stress / axial, -lateral / axial};
}

// A w x w x L cantilever of phyxels along z, its two bottom layers pinned (a clamp), a load
// P across it (x) on its top layer; the top layer's mean deflection over the Timoshenko
// beam's P l^3 / (3 E I) + P l / (kappa G A), kappa = 5/6, l from the clamp (the last pinned
// layer, z = 3a/2, as a finite element clamp at its last fixed nodes) to the loaded layer.
double cantileverRatio(const fs::path& folder, double poisson, int across, double slenderness) {
  const double width = 0.06, a = width / across, length = slenderness * width;
  const double inertia = std::pow(width, 4) / 12, area = width * width;
  const double free = length - 2 * a;
  const double shear = kYoung / (2 * (1 + poisson));
  const double force = 1e-4 * 3 * kYoung * inertia / (free * free);  // deflection 1e-4 l
  std::ostringstream load;
  load << R"({"shape": "box", "center": [0, 0, )" << length - a / 2
       << R"(], "half_extents": [1, 1, 1e-6], "force": [)" << force << ", 0, 0]}";
  auto sim =
      staticRun(folder, mlsBody(width, length, a, poisson, slab(a, 1, a * 0.6), load.str()), 1);
  const std::vector<double> rest(sim->positions(0).begin(), sim->positions(0).end());
  sim->advanceFrames(1);
  const std::span<const double> x = sim->positions(0);
  const double tip =
      layerMean(rest, x, length - a / 2, 0) - layerMean(rest, rest, length - a / 2, 0);
  const double beam = force * std::pow(free, 3) / (3 * kYoung * inertia) +
                      force * free / (5.0 / 6.0 * shear * area);
  return tip / beam;
}

// Measured (nu = 0.3, L = 10 w): 1.106 / 1.047 / 1.023 of the beam at 4 / 6 / 8 phyxels
// across with the quadratic fit. With the beam measured from z = 2a instead, the quadratic
// fit gave 1.15 / 1.07 at 4 / 6 and the paper's linear fit 1.73 / 1.29: its one-sided
// stencils at the top and bottom faces see a plane through a bent field and miss most of the
// outer fibres' strain. What is left is the nodal quadrature of I (the layers' sum of a z^2
// is t^3/12 (1 - (a/t)^2)) and the clamp's O(a).
TEST(MlsSolidAccuracy, CantileverWithinFivePercentOfTheTimoshenkoBeam) {
  const testfiles::TempFolder folder("MlsCantilever");
  const double six = cantileverRatio(folder.path(), 0.3, 6, 10);
  const double eight = cantileverRatio(folder.path(), 0.3, 8, 10);
  std::cout << "| cantilever | L = 10 w | 6 across " << six << " | 8 across " << eight << " |\n";
  EXPECT_LT(std::abs(eight - 1), 0.05);
  EXPECT_LT(std::abs(eight - 1), std::abs(six - 1));
  EXPECT_LT(std::abs(six - 1), 0.08);
}

// Measured at 6 phyxels across (6 x 6 x 24), tension: E 0.997 / 0.994 / 0.992 and nu 0.007 /
// 0.305 / 0.450 for nu = 0 / 0.3 / 0.45; at 4 across the fit's boundary layers are half the
// bar and nu is off by up to 0.1.
TEST(MlsSolidAccuracy, BarInTensionAndCompressionHasTheMaterialsModulusAndPoissonRatio) {
  const testfiles::TempFolder folder("MlsBar");
  for (const double nu : {0.0, 0.3, 0.45}) {
    for (const double sign : {1.0, -1.0}) {
      const Uniaxial m = barUnderEndLoad(folder.path(), nu, 6, sign);
      std::cout << "| bar | " << (sign > 0 ? "tension" : "compression") << " | nu " << nu << " | E "
                << m.young / kYoung << " E | nu " << m.poisson << " |\n";
      EXPECT_NEAR(m.young / kYoung, 1, 0.02);
      EXPECT_NEAR(m.poisson, nu, 0.015);
    }
  }
}

// muller2004 Fig. 6: a block stretched with nu = 0 keeps its width and gains volume as it
// stretches; with nu = 0.49 it narrows and keeps its volume: dV / V = (1 - 2 nu) eps.
TEST(MlsSolidAccuracy, StretchedWithPoissonRatioNearOneHalfTheVolumeIsKept) {
  const testfiles::TempFolder folder("MlsFig6");
  for (const double nu : {0.0, 0.49}) {
    const Uniaxial m = barUnderEndLoad(folder.path(), nu, 6, 1.0);
    const double volumeChange = 1 - 2 * m.poisson;  // dV / V per axial strain
    std::cout << "| stretch | nu " << nu << " | lateral / axial " << -m.poisson << " | dV/V / eps "
              << volumeChange << " |\n";
    EXPECT_NEAR(volumeChange, 1 - 2 * nu, 0.03);
  }
}

// Bad input is refused with the element named: one layer of phyxels (a planar point cloud)
// names the phyxel whose neighbourhood is flat; an open sheet encloses no volume.
// muller2004 Fig. 3, "stiff again", on scenes/mls_bunny_dent.json: the bunny turns plastic
// for its second impact (0.6-1.2 s) and dents; at 1.2 s it stiffens 5 times. The elastic
// strain its plastic flow locked in (about 1.6 J at rest) must not kick it: its kinetic energy
// over the next 0.2 s stays that of the same run kept at its old stiffness (measured: at most
// 2.08 J against 2.17 J), and the locked-in energy falls instead of growing 5 times (to
// 0.45 J). Stiffening without the new reference multiplied it and threw the bunny about
// (kinetic energy 2.5 to 4.5 J within 0.1 s).
TEST(MlsSolidStiffAgainSlow, TheDentedBunnyStiffensWithoutAKick) {
  const auto run = [](double stiffening, double& peakKinetic, double& elastic) {
    SceneDef scene = loadScene(fs::path(SHELLSIM_SOURCE_DIR) / "scenes" / "mls_bunny_dent.json");
    scene.bodies[0].options<MlsSolidDef>().plasticity->solidStiffness = stiffening;
    Simulation sim(scene);
    sim.advance(1.2);
    peakKinetic = 0;
    for (int frame = 0; frame < 6; ++frame) {
      sim.advance(1.0 / 30);
      peakKinetic = std::max(peakKinetic, sim.energies(0).kinetic);
    }
    const BodyEnergies e = sim.energies(0);
    elastic = e.stretching + e.bending;
  };
  double keptPeak = 0, keptElastic = 0, stiffPeak = 0, stiffElastic = 0;
  run(1, keptPeak, keptElastic);
  run(5, stiffPeak, stiffElastic);
  std::cout << "[ measured ] 1.2-1.4 s: peak kinetic energy " << stiffPeak << " J stiffened 5x, "
            << keptPeak << " J kept; elastic energy " << stiffElastic << " J, " << keptElastic
            << " J\n";
  EXPECT_LT(stiffPeak, 1.2 * keptPeak);
  EXPECT_LT(stiffElastic, 0.5 * keptElastic);
}

TEST(MlsSolidInput, APlanarCloudAndAnOpenSheetAreRefusedWithTheReason) {
  const testfiles::TempFolder folder("MlsInput");
  std::string cloud;
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 8; ++i)
      cloud += std::to_string(0.01 * i) + " " + std::to_string(0.01 * j) + " 0\n";
  }
  folder.write("sheet.xyz", cloud);
  const auto refused = [&](const std::string& body) -> std::string {
    std::ostringstream scene;
    scene << R"({"bodies": [)" << body << R"(], "time": {"duration": 0.1},
      "output": {"folder": "out"}})";
    try {
      Simulation sim(parseScene(scene.str(), "bad.json", folder.path()));
    } catch (const InputError& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string flat =
      refused(R"({"name": "flat", "file": "sheet.xyz", "model": "mls_solid"})");
  EXPECT_NE(flat.find("phyxel"), std::string::npos) << flat;
  EXPECT_NE(flat.find("in a plane"), std::string::npos) << flat;
  const std::string open = refused(
      R"({"name": "open", "primitive": {"type": "sheet", "size": [0.1, 0.1, 0]}, "model": "mls_solid"})");
  EXPECT_NE(open.find("encloses no volume"), std::string::npos) << open;
}

}  // namespace
}  // namespace shellsim
