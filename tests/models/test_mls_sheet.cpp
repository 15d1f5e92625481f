// Thin sheets as two or three layers of phyxels (muller2004 section 7; specs/muller2004.md B8,
// issue 19): the layers' Gauss placement stores the plate's bending energy, faces placement
// three times it; the quadratic fit of two layers keeps bending exact; bad sheets are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "geometry/primitives.hpp"
#include "geometry/volume_sampling.hpp"
#include "models/mls/mls_model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

constexpr double kSpacing = 0.01;    // m, the lattice's edge
constexpr double kThickness = 2e-3;  // m

MaterialDef sheetMaterial(double poisson) {
  MaterialDef m;
  m.youngModulus = 1e6;
  m.poisson = poisson;
  m.density = 1000;
  m.thickness = kThickness;
  return m;
}

// A flat sheet's points (x, y, z), z across it, bent about the y axis into a cylinder of
// curvature kappa: the mid-surface keeps its length, and a fibre at height z stretches by
// 1 + kappa z (Green strain kappa z + (kappa z)^2 / 2 along x, none across).
std::vector<double> bentAboutY(std::span<const double> flat, double kappa) {
  std::vector<double> bent(flat.size());
  const double radius = 1 / kappa;
  for (size_t p = 0; p < flat.size() / 3; ++p) {
    const double x = flat[3 * p], y = flat[3 * p + 1], z = flat[3 * p + 2];
    const double angle = kappa * x;
    bent[3 * p] = (radius + z) * std::sin(angle);
    bent[3 * p + 1] = y;
    bent[3 * p + 2] = (radius + z) * std::cos(angle) - radius;
  }
  return bent;
}

// The energy of the sheet bent to curvature kappa over the plate's D kappa^2 / 2 per area,
// D = E t^3 / (12 (1 - nu^2)) (no strain along y nor across: with nu > 0 that is the plate's
// cylindrical bending only for the sheet law of two layers, which does not couple the
// thickness strain; the exact energy of the stretch above adds (kappa t)^2 / 80).
double bendingEnergyRatio(int layers, double spread, double kappa, double poisson = 0) {
  const Geometry mesh = makeEquilateralLattice(13, 15, kSpacing);
  VolumeSampling sheet = sampleSheetLayers(mesh, kThickness, layers);
  for (size_t p = 0; p < sheet.volumes.size(); ++p) {
    const size_t v = p / static_cast<size_t>(layers);
    sheet.positions[3 * p + 2] = mesh.positions[3 * v + 2] + spread * sheet.positions[3 * p + 2];
  }
  MlsSolidParams params;
  params.layers = layers;
  params.hourglass = 0;
  const MlsSolidModel model(sheet.positions, sheet.volumes, sheetMaterial(poisson), params,
                            Geometry{});
  double area = 0;
  for (const double v : sheet.volumes) area += v / kThickness;
  const double plate =
      1e6 * std::pow(kThickness, 3) / (12 * (1 - poisson * poisson)) * kappa * kappa / 2 * area;
  return model.energy(bentAboutY(sheet.positions, kappa)).total() / plate;
}

TEST(MlsSheet, GaussPlacedLayersStoreThePlateBendingEnergyAndFacePlacedOnesThreeTimesIt) {
  for (const int layers : {2, 3}) {
    const double gauss = bendingEnergyRatio(layers, 1.0, 2.0);
    std::cout << "[ measured ] " << layers
              << " layers at the Gauss points: energy / plate = " << gauss << "\n";
    EXPECT_NEAR(gauss, 1.0, 0.02);
  }
  // Two layers, nu = 0.3: the sheet law's plane stress gives the plate's D with 1 - nu^2.
  const double poisson = bendingEnergyRatio(2, 1.0, 2.0, 0.3);
  std::cout << "[ measured ] 2 layers, nu = 0.3: energy / plate = " << poisson << "\n";
  EXPECT_NEAR(poisson, 1.0, 0.02);
  // Two layers at the faces +-t/2 (the Gauss points' offsets times sqrt 3): nodal quadrature
  // of the quadratic density at the faces, 3 times the integral (notes B8).
  const double faces = bendingEnergyRatio(2, std::sqrt(3.0), 2.0);
  std::cout << "[ measured ] 2 layers at the faces: energy / plate = " << faces << "\n";
  EXPECT_NEAR(faces, 3.0, 0.06);
}

TEST(MlsSheet, LayersSumToTheSheetsVolumeAndSitAcrossIt) {
  PrimitiveDef def;
  def.type = PrimitiveType::kSphere;
  def.radius = 0.1;
  def.resolution = 10;
  const Geometry sphere = makePrimitive(def);
  for (const int layers : {2, 3}) {
    const VolumeSampling sheet = sampleSheetLayers(sphere, kThickness, layers);
    ASSERT_EQ(sheet.volumes.size(), static_cast<size_t>(sphere.vertexCount() * layers));
    double volume = 0;
    for (const double v : sheet.volumes) volume += v;
    double area = 0;
    for (size_t t = 0; t < static_cast<size_t>(sphere.triangleCount()); ++t) {
      const Vec3 a = row(sphere.positions, static_cast<size_t>(sphere.triangles[3 * t]));
      const Vec3 b = row(sphere.positions, static_cast<size_t>(sphere.triangles[3 * t + 1]));
      const Vec3 c = row(sphere.positions, static_cast<size_t>(sphere.triangles[3 * t + 2]));
      area += (b - a).cross(c - a).norm() / 2;
    }
    EXPECT_NEAR(volume, area * kThickness, 1e-12 * area);
    // The outer layer lies outside the sphere by zeta t / 2.
    const size_t outer = static_cast<size_t>(layers) - 1;
    const double expected =
        0.1 + (layers == 2 ? 1 / std::sqrt(3.0) : std::sqrt(0.6)) * kThickness / 2;
    EXPECT_NEAR(row(sheet.positions, outer).norm(), expected, 1e-3 * kThickness);
  }
}

TEST(MlsSheet, RefusesOneLayerAPointCloudAndAFlatSheetTooSmallForItsStencil) {
  const Geometry mesh = makeEquilateralLattice(3, 3, kSpacing);
  EXPECT_THROW((void)sampleSheetLayers(mesh, kThickness, 1), InputError);
  EXPECT_THROW((void)sampleSheetLayers(mesh, 0, 2), InputError);
  Geometry cloud;
  cloud.positions = mesh.positions;
  EXPECT_THROW((void)sampleSheetLayers(cloud, kThickness, 2), InputError);
  const VolumeSampling sheet = sampleSheetLayers(mesh, kThickness, 2);
  MlsSolidParams params;
  params.layers = 2;
  params.neighbours = 26;  // 14 vertices per stencil; the sheet has 9
  try {
    MlsSolidModel model(sheet.positions, sheet.volumes, sheetMaterial(0.3), params, Geometry{});
    FAIL() << "a sheet of 9 vertices was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("9 vertices"), std::string::npos) << e.what();
  }
  params.neighbours = 15;  // 8 vertices
  EXPECT_NO_THROW(
      MlsSolidModel(sheet.positions, sheet.volumes, sheetMaterial(0.3), params, Geometry{}));
}

}  // namespace
}  // namespace shellsim
