// The meshless volume model (muller2004, issue 19): the St Venant-Kirchhoff kernel against
// finite differences, the MLS gradient's first-order consistency, the energy contract on
// lattices, jittered lattices and a sampled sphere, volumes that sum to the mesh's, the
// refusal of coplanar phyxels, and the zero-energy mode the misfit penalty removes.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <iostream>
#include <numbers>
#include <random>

#include "geometry/primitives.hpp"
#include "geometry/volume_sampling.hpp"
#include "model_contract.hpp"
#include "models/mls/mls_kernel.hpp"
#include "models/mls/mls_model.hpp"
#include "models/model_state.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim {
namespace {

// nx x ny x nz phyxels a apart from the origin, each moved by up to jitter a (fixed seed).
std::vector<double> lattice(int nx, int ny, int nz, double a, double jitter = 0,
                            unsigned seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::vector<double> x;
  for (int k = 0; k < nz; ++k) {
    for (int j = 0; j < ny; ++j) {
      for (int i = 0; i < nx; ++i) {
        x.push_back(a * (i + jitter * unit(rng)));
        x.push_back(a * (j + jitter * unit(rng)));
        x.push_back(a * (k + jitter * unit(rng)));
      }
    }
  }
  return x;
}

MaterialDef rubberBlock(double poisson = 0.3) {
  MaterialDef m;
  m.youngModulus = 1e5;
  m.poisson = poisson;
  m.density = 1000;
  return m;
}

mls::Mat3 randomF(std::mt19937& rng, double amplitude) {
  std::uniform_real_distribution<double> unit(-amplitude, amplitude);
  mls::Mat3 F = mls::Mat3::Identity();
  for (int i = 0; i < 9; ++i) F(i / 3, i % 3) += unit(rng);
  return F;
}

TEST(MlsKernel, StressAndTangentAreTheDerivativesOfTheEnergyDensity) {
  std::mt19937 rng(5);
  const mls::Elasticity material{3e4, 7e4, 2e4};
  for (int trial = 0; trial < 40; ++trial) {
    const mls::Mat3 F = randomF(rng, 0.4);
    mls::Mat3 plastic = randomF(rng, 0.05) - mls::Mat3::Identity();
    plastic = 0.5 * (plastic + plastic.transpose()).eval();
    // Odd trials: the sheet law of two layers about a random normal.
    const Eigen::Vector3d normal = Eigen::Vector3d(randomF(rng, 1).col(0)).normalized();
    const Eigen::Vector3d* sheet = trial % 2 == 1 ? &normal : nullptr;
    const auto density = [&](const mls::Mat3& G, mls::Mat3* P, mls::Tangent* C) {
      return mls::strainEnergyDensity(G, material, &plastic, P, C, 1.0, sheet);
    };
    mls::Mat3 P;
    mls::Tangent C;
    density(F, &P, &C);
    const double h = 1e-6;
    for (int b = 0; b < 3; ++b) {
      for (int d = 0; d < 3; ++d) {
        mls::Mat3 plus = F, minus = F;
        plus(b, d) += h;
        minus(b, d) -= h;
        const double numeric =
            (density(plus, nullptr, nullptr) - density(minus, nullptr, nullptr)) / (2 * h);
        EXPECT_NEAR(P(b, d), numeric, 1e-6 * std::max(1.0, std::abs(numeric)));
        mls::Mat3 Pp, Pm;
        density(plus, &Pp, nullptr);
        density(minus, &Pm, nullptr);
        const mls::Mat3 dP = (Pp - Pm) / (2 * h);
        for (int a = 0; a < 3; ++a) {
          for (int c = 0; c < 3; ++c) {
            EXPECT_NEAR(C(3 * a + c, 3 * b + d), dP(a, c), 1e-5 * C.cwiseAbs().maxCoeff());
          }
        }
      }
    }
  }
}

TEST(MlsKernel, TheSheetLawIsPlaneStressInTheSheetAndUncoupledAcrossIt) {
  const double E = 2e5, nu = 0.3, eps = 1e-7;
  const mls::Elasticity material{E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu)), 0};
  const Eigen::Vector3d normal = Eigen::Vector3d::UnitZ();
  // Stretched along x with the lateral in-plane strain -nu eps and none across the sheet:
  // plane stress gives sigma_xx = E eps, sigma_yy = 0, and no stress across.
  mls::Mat3 F = mls::Mat3::Identity();
  F(0, 0) += eps;
  F(1, 1) -= nu * eps;
  mls::Mat3 P;
  mls::strainEnergyDensity(F, material, nullptr, &P, nullptr, 1.0, &normal);
  EXPECT_NEAR(P(0, 0), E * eps, 1e-5 * E * eps);
  EXPECT_NEAR(P(1, 1), 0, 1e-5 * E * eps);
  EXPECT_NEAR(P(2, 2), 0, 1e-5 * E * eps);
  // A strain across the sheet stresses only across it, by lambda + 2 mu.
  F = mls::Mat3::Identity();
  F(2, 2) += eps;
  mls::strainEnergyDensity(F, material, nullptr, &P, nullptr, 1.0, &normal);
  EXPECT_NEAR(P(2, 2), (material.lambda + 2 * material.mu) * eps, 1e-5 * E * eps);
  EXPECT_NEAR(P(0, 0), 0, 1e-5 * E * eps);
  // Shear across the sheet as the isotropic law: tau = mu gamma.
  F = mls::Mat3::Identity();
  F(0, 2) += eps;
  mls::strainEnergyDensity(F, material, nullptr, &P, nullptr, 1.0, &normal);
  EXPECT_NEAR(P(0, 2), material.mu * eps, 1e-5 * E * eps);
}

TEST(MlsKernel, SmallStrainIsLinearElasticity) {
  // Uniaxial stretch eps with free sides: sigma = E eps needs lateral strain -nu eps.
  const double E = 2e5, nu = 0.3, eps = 1e-7;
  const mls::Elasticity material{E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu)), 0};
  mls::Mat3 F = mls::Mat3::Identity();
  F(0, 0) += eps;
  F(1, 1) -= nu * eps;
  F(2, 2) -= nu * eps;
  mls::Mat3 P;
  mls::strainEnergyDensity(F, material, nullptr, &P, nullptr);
  EXPECT_NEAR(P(0, 0), E * eps, 1e-5 * E * eps);
  EXPECT_NEAR(P(1, 1), 0, 1e-5 * E * eps);
}

TEST(MlsSolid, AffineMotionsGiveTheirGradientExactlyAtEveryPhyxel) {
  const std::vector<double> rest = lattice(5, 4, 6, 0.01, 0.2);
  const Geometry none;
  const MlsSolidModel model(rest, {}, rubberBlock(), MlsSolidParams{}, none);
  std::mt19937 rng(9);
  const mls::Mat3 G = randomF(rng, 0.5);
  const Vec3 t(0.3, -0.1, 0.2);
  std::vector<double> x(rest.size());
  for (size_t i = 0; i < rest.size() / 3; ++i) setRow(x, i, G * row(rest, i) + t);
  const std::vector<double> F = model.deformationGradients(x);
  double worst = 0;
  for (size_t p = 0; p < rest.size() / 3; ++p) {
    for (int e = 0; e < 9; ++e) worst = std::max(worst, std::abs(F[9 * p + e] - G(e / 3, e % 3)));
  }
  EXPECT_LT(worst, 1e-12);
}

TEST(MlsSolid, RigidMotionsStoreNoEnergyAndTheCarriedSurfaceMovesWithThem) {
  // A unit-cube mesh around a lattice: its vertices follow eq. (27) exactly under a rigid
  // motion (first-order consistency), and the stencils store no energy.
  PrimitiveDef box;
  box.type = PrimitiveType::kBox;
  box.size = {0.05, 0.05, 0.05};
  box.resolution = 4;
  const Geometry mesh = makePrimitive(box);
  const VolumeSampling sampling = sampleVolume(mesh, 0.01);
  const MlsSolidModel model(sampling.positions, {}, rubberBlock(), MlsSolidParams{}, mesh);
  const Eigen::Matrix3d R =
      Eigen::AngleAxisd(0.9, Vec3(1, 2, -0.5).normalized()).toRotationMatrix();
  const Vec3 t(1, 2, 3);
  std::vector<double> x(sampling.positions.size());
  for (size_t i = 0; i < x.size() / 3; ++i) setRow(x, i, R * row(sampling.positions, i) + t);
  // No energy but rounding's: less than that of a uniform stretch of 1e-6 (a stretch of 1e-4
  // stores 1e4 times as much). A fixed 1e-20 J held on one machine; on an AMD EPYC with
  // AVX-512 the rounding of the moved positions left 2.2e-13 J, as much as a stretch of 5e-8.
  std::vector<double> stretched = sampling.positions;
  for (double& value : stretched) value *= 1 + 1e-4;
  const double microStretch = 1e-4 * model.energy(stretched).total();
  ASSERT_GT(microStretch, 0.0);
  EXPECT_LT(model.energy(x).total(), microStretch);
  const Geometry moved = model.surface(x);
  ASSERT_EQ(moved.vertexCount(), mesh.vertexCount());
  double worst = 0;
  for (size_t v = 0; v < static_cast<size_t>(mesh.vertexCount()); ++v) {
    worst = std::max(worst, (row(moved.positions, v) - (R * row(mesh.positions, v) + t)).norm());
  }
  EXPECT_LT(worst, 1e-12);
}

TEST(MlsSolid, SurfelsFollowAnAffineMotionAndTheirNormalsTheInverseTranspose) {
  // Surfels (points with normals) around a lattice: under x -> G X + t their centres move
  // affinely and their normals turn to G^-T n, normalised (section 5.1).
  const std::vector<double> rest = lattice(5, 5, 5, 0.01);
  Geometry surfels;
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int k = 0; k < 50; ++k) {
    const Vec3 p(0.02 + 0.025 * unit(rng), 0.02 + 0.025 * unit(rng), 0.02 + 0.025 * unit(rng));
    const Vec3 n = Vec3(unit(rng), unit(rng), unit(rng)).normalized();
    surfels.positions.insert(surfels.positions.end(), {p.x(), p.y(), p.z()});
    surfels.normals.insert(surfels.normals.end(), {n.x(), n.y(), n.z()});
  }
  const MlsSolidModel model(rest, {}, rubberBlock(), MlsSolidParams{}, surfels);
  std::mt19937 shapes(8);
  const mls::Mat3 G = randomF(shapes, 0.3);
  const Vec3 t(0.1, 0.2, -0.3);
  std::vector<double> x(rest.size());
  for (size_t i = 0; i < rest.size() / 3; ++i) setRow(x, i, G * row(rest, i) + t);
  const Geometry moved = model.surface(x);
  ASSERT_EQ(moved.vertexCount(), 50);
  ASSERT_TRUE(moved.hasNormals());
  for (size_t v = 0; v < 50; ++v) {
    EXPECT_LT((row(moved.positions, v) - (G * row(surfels.positions, v) + t)).norm(), 1e-12);
    const Vec3 expected = (G.inverse().transpose() * row(surfels.normals, v)).normalized();
    EXPECT_LT((row(moved.normals, v) - expected).norm(), 1e-12);
  }
}

TEST(MlsSolid, LatticeVolumesSumToTheMeshVolume) {
  PrimitiveDef sphere;
  sphere.type = PrimitiveType::kSphere;
  sphere.radius = 0.1;
  sphere.resolution = 24;
  const Geometry mesh = makePrimitive(sphere);
  const double volume = enclosedVolume(mesh);
  // The inscribed polyhedron of 24 segments holds 2.2 % less than the sphere.
  EXPECT_NEAR(volume, 4.0 / 3.0 * std::numbers::pi * 1e-3, 0.03 * 4.2e-3);
  PrimitiveDef box;
  box.type = PrimitiveType::kBox;
  box.size = {0.1, 0.2, 0.3};
  EXPECT_NEAR(enclosedVolume(makePrimitive(box)), 0.006, 1e-15);
  const VolumeSampling s = sampleVolumeByCount(mesh, 500);
  const size_t count = s.positions.size() / 3;
  EXPECT_NEAR(static_cast<double>(count), 500, 50);
  for (size_t i = 0; i < count; ++i) EXPECT_LT(row(s.positions, i).norm(), 0.1);
  // Inside and outside by winding number.
  EXPECT_NEAR(windingNumber(mesh, Vec3(0.01, 0.02, -0.03)), 1.0, 1e-9);
  EXPECT_NEAR(windingNumber(mesh, Vec3(0.2, 0.0, 0.0)), 0.0, 1e-9);
}

// The lattice's inside test (signed ray crossings along its columns, two of three axes; the
// cow's horns overlap its head, where parity would say outside) against the
// generalized winding number at every lattice point of the bounds, on closed meshes and on
// the bunny with its open base.
TEST(MlsSolid, ColumnCrossingsAgreeWithTheWindingNumber) {
  for (const std::string name : {"spot.obj", "stanford-bunny.obj", "cow.obj"}) {
    Geometry mesh = readGeometry(std::string(SHELLSIM_DATA_DIR) + "/" + name);
    removeUnreferencedVertices(mesh);
    const Bounds b = computeBounds(mesh);
    const double spacing = (b.max[0] - b.min[0]) / 12;
    const VolumeSampling parity = sampleVolume(mesh, spacing);
    // The same lattice (sampleVolume's rule), classified by winding number.
    size_t counts[3];
    double origin[3];
    for (int k = 0; k < 3; ++k) {
      const double extent = std::max(1.0, std::floor((b.max[k] - b.min[k]) / spacing + 1e-9));
      counts[k] = static_cast<size_t>(extent);
      origin[k] = 0.5 * (b.min[k] + b.max[k]) - 0.5 * spacing * (extent - 1);
    }
    std::vector<double> winding;
    for (size_t iz = 0; iz < counts[2]; ++iz) {
      for (size_t iy = 0; iy < counts[1]; ++iy) {
        for (size_t ix = 0; ix < counts[0]; ++ix) {
          const Vec3 p(origin[0] + spacing * static_cast<double>(ix),
                       origin[1] + spacing * static_cast<double>(iy),
                       origin[2] + spacing * static_cast<double>(iz));
          if (std::abs(windingNumber(mesh, p)) > 0.5) {
            winding.insert(winding.end(), {p.x(), p.y(), p.z()});
          }
        }
      }
    }
    std::cout << name << ": " << parity.positions.size() / 3 << " lattice points inside by "
              << "ray crossings, " << winding.size() / 3 << " by winding number\n";
    EXPECT_GT(winding.size() / 3, 80u);
    EXPECT_EQ(parity.positions, winding);
  }
}

// Columns through the box primitive's face diagonals hit edges shared by two triangles:
// each crossing counts once, and every cell centre of the box is inside.
TEST(MlsSolid, ABoxKeepsEveryCellCentreWhereColumnsRunThroughFaceDiagonals) {
  PrimitiveDef box;
  box.type = PrimitiveType::kBox;
  box.resolution = 8;
  for (const double length : {0.24, 0.6}) {  // the bar and the cantilever of the accuracy tests
    box.size = {0.06, 0.06, length};
    for (const double spacing : {0.01, 0.015, 0.03}) {
      const VolumeSampling s = sampleVolume(makePrimitive(box), spacing);
      const auto n = [&](double side) { return static_cast<size_t>(std::lround(side / spacing)); };
      EXPECT_EQ(s.positions.size() / 3, n(0.06) * n(0.06) * n(length))
          << "length " << length << ", spacing " << spacing;
    }
  }
}

TEST(MlsSolid, RefusesPhyxelsInOnePlane) {
  const std::vector<double> sheet = lattice(8, 8, 1, 0.01);
  const Geometry none;
  try {
    const MlsSolidModel model(sheet, {}, rubberBlock(), MlsSolidParams{}, none);
    FAIL() << "a single layer of phyxels was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("in a plane"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("phyxel 0"), std::string::npos) << e.what();
  }
}

TEST(MlsSolid, RefusesCoincidentPhyxelsAndTooFewOfThem) {
  std::vector<double> x = lattice(4, 4, 4, 0.01);
  x[3] = x[0];
  x[4] = x[1];
  x[5] = x[2];
  const Geometry none;
  EXPECT_THROW(MlsSolidModel(x, {}, rubberBlock(), MlsSolidParams{}, none), InputError);
  EXPECT_THROW(MlsSolidModel(lattice(3, 3, 2, 0.01), {}, rubberBlock(), MlsSolidParams{}, none),
               InputError);
}

// The checkerboard displacement (-1)^(i+j+k) e of a lattice: F = I at every phyxel (notes
// B3), so without the misfit penalty it stores no energy and meets no force.
std::vector<double> checkerboard(std::span<const double> rest, int nx, int ny, double amplitude) {
  std::vector<double> x(rest.begin(), rest.end());
  for (size_t p = 0; p < rest.size() / 3; ++p) {
    const size_t i = p % static_cast<size_t>(nx);
    const size_t j = (p / static_cast<size_t>(nx)) % static_cast<size_t>(ny);
    const size_t k = p / static_cast<size_t>(nx * ny);
    const double sign = (i + j + k) % 2 == 0 ? 1.0 : -1.0;
    x[3 * p + 2] += sign * amplitude;
  }
  return x;
}

// The checkerboard amplitude of the phyxels at least 3 layers inside the lattice, which no
// one-sided boundary stencil reaches (a boundary phyxel's 26 neighbours lie within 2 layers).
double interiorCheckerboard(std::span<const double> u, int n) {
  double sum = 0;
  int count = 0;
  for (int k = 3; k + 3 < n; ++k) {
    for (int j = 3; j + 3 < n; ++j) {
      for (int i = 3; i + 3 < n; ++i) {
        const auto p = static_cast<size_t>(i + n * (j + n * k));
        sum += ((i + j + k) % 2 == 0 ? 1.0 : -1.0) * u[3 * p + 2];
        ++count;
      }
    }
  }
  return sum / count;
}

// Undamped velocity Verlet from rest positions with the checkerboard as initial velocity;
// returns the largest interior checkerboard amplitude over the run, m.
double checkerboardGrowth(const MlsSolidModel& model, std::span<const double> rest, int n,
                          double speed, double dt, int steps) {
  std::vector<double> x(rest.begin(), rest.end());
  std::vector<double> v = checkerboard(std::vector<double>(rest.size(), 0.0), n, n, speed);
  std::vector<double> g(x.size(), 0.0);
  const auto m = model.nodeMasses();
  model.addGradient(x, g);
  double largest = 0;
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < x.size(); ++i) {
      v[i] -= 0.5 * dt * g[i] / m[i / 3];
      x[i] += dt * v[i];
    }
    std::fill(g.begin(), g.end(), 0.0);
    model.addGradient(x, g);
    for (size_t i = 0; i < x.size(); ++i) v[i] -= 0.5 * dt * g[i] / m[i / 3];
    std::vector<double> u(x.size());
    for (size_t i = 0; i < x.size(); ++i) u[i] = x[i] - rest[i];
    largest = std::max(largest, std::abs(interiorCheckerboard(u, n)));
  }
  return largest;
}

TEST(MlsSolid, TheCheckerboardIsAZeroEnergyModeThatTheMisfitPenaltyHolds) {
  constexpr int n = 9;
  const std::vector<double> rest = lattice(n, n, n, 0.01);
  const Geometry none;
  MlsSolidParams off;
  off.hourglass = 0;
  const MlsSolidModel plain(rest, {}, rubberBlock(), off, none);
  const MlsSolidModel penalised(rest, {}, rubberBlock(), MlsSolidParams{}, none);
  // An interior phyxel's stencil is symmetric: the checkerboard leaves its F = I exactly.
  const std::vector<double> x = checkerboard(rest, n, n, 1e-4);
  const std::vector<double> F = plain.deformationGradients(x);
  const size_t centre = 4 + n * (4 + n * 4);
  double deviation = 0;
  for (int e = 0; e < 9; ++e) deviation += std::abs(F[9 * centre + e] - (e % 4 == 0 ? 1 : 0));
  EXPECT_LT(deviation, 1e-12);
  // No restoring force on the deep interior without the penalty; with it, one against the
  // displacement on every interior phyxel.
  const std::vector<double> gPlain = testing::gradientAt(plain, x);
  const std::vector<double> gPenalised = testing::gradientAt(penalised, x);
  EXPECT_LT(std::abs(gPlain[3 * centre + 2]), 1e-12 * std::abs(gPenalised[3 * centre + 2]));
  // The centre phyxel moved by +1e-4 m in z (i + j + k even): dE/dz > 0, pushed back.
  EXPECT_GT(gPenalised[3 * centre + 2], 0.0);
  // Undamped, kicked in the mode: without the penalty only the boundary's one-sided stencils
  // pull the interior back, slowly (measured: amplitude 2.3e-5 m, a period of about 0.2 s);
  // with it the mode is stiff (2.7e-6 m).
  const double speed = 1e-3;  // m/s
  const double dt = 0.5 * std::min(plain.stableTimeStep(), penalised.stableTimeStep());
  const int steps = 2000;
  const double plainLargest = checkerboardGrowth(plain, rest, n, speed, dt, steps);
  const double penalisedLargest = checkerboardGrowth(penalised, rest, n, speed, dt, steps);
  std::cout << "interior checkerboard over " << steps * dt << " s: plain " << plainLargest
            << " m, penalised " << penalisedLargest << " m\n";
  EXPECT_LT(penalisedLargest, 0.25 * plainLargest);
}

// A bar fixed at its bottom layer, released from a uniform stretch, vibrates at the fixed-free
// bar's fundamental f = c / (4 l), c = sqrt(E / rho) (nu = 0: no lateral inertia), l from the
// fixed layer to the free end; undamped velocity Verlet keeps its energy.
struct Vibration {
  double period;  // s, from three downward zero crossings of the free end
  double drift;   // largest |E(t) - E(0)| / E(0)
};

Vibration vibrateBar(const MlsSolidModel& model, std::span<const double> rest, double a, double top,
                     double dt) {
  const size_t count = rest.size() / 3;
  std::vector<char> fixed(count, 0);
  for (size_t p = 0; p < count; ++p) fixed[p] = rest[3 * p + 2] < a ? 1 : 0;
  const double strain = 1e-4;
  std::vector<double> x(rest.begin(), rest.end()), v(rest.size(), 0.0), g(rest.size(), 0.0);
  for (size_t p = 0; p < count; ++p) x[3 * p + 2] += strain * (rest[3 * p + 2] - a / 2);
  const auto m = model.nodeMasses();
  const double initial = model.addGradient(x, g).total();
  double previous = 0, worstDrift = 0;
  std::vector<double> crossings;
  for (int step = 1; step <= 100000 && crossings.size() < 3; ++step) {
    for (size_t i = 0; i < x.size(); ++i) {
      if (fixed[i / 3] == 0) v[i] -= 0.5 * dt * g[i] / m[i / 3];
      x[i] += dt * v[i];
    }
    std::fill(g.begin(), g.end(), 0.0);
    const double potential = model.addGradient(x, g).total();
    double kinetic = 0, tip = 0;
    int tipCount = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (fixed[i / 3] == 0) v[i] -= 0.5 * dt * g[i] / m[i / 3];
      kinetic += 0.5 * m[i / 3] * v[i] * v[i];
    }
    for (size_t p = 0; p < count; ++p) {
      if (std::abs(rest[3 * p + 2] - top) < 1e-9) {
        tip += x[3 * p + 2] - rest[3 * p + 2];
        ++tipCount;
      }
    }
    tip /= tipCount;
    worstDrift = std::max(worstDrift, std::abs(potential + kinetic - initial) / initial);
    if (previous > 0 && tip <= 0)
      crossings.push_back((step - 1 + previous / (previous - tip)) * dt);
    previous = tip;
  }
  if (crossings.size() < 3) return {0, worstDrift};
  return {(crossings[2] - crossings[0]) / 2, worstDrift};
}

// A bar fixed at its bottom layer, released from a uniform stretch, vibrates at the fixed-free
// bar's fundamental f = c / (4 l), c = sqrt(E / rho) (nu = 0: no lateral inertia), l from the
// fixed layer to the free end; undamped velocity Verlet keeps its energy to O(dt^2).
TEST(MlsSolid, BarVibratesAtItsFundamentalAndVerletKeepsTheEnergy) {
  constexpr int across = 3, layers = 24;
  const double a = 0.01;
  std::vector<double> rest = lattice(across, across, layers, a);
  for (double& v : rest) v += a / 2;  // cell centres of [0, 3a]^2 x [0, 24 a]
  const Geometry none;
  const MaterialDef material = rubberBlock(0.0);
  const MlsSolidModel model(rest, std::vector<double>(rest.size() / 3, a * a * a), material,
                            MlsSolidParams{}, none);
  const double top = a / 2 + a * (layers - 1);
  const Vibration coarse = vibrateBar(model, rest, a, top, 0.5 * model.stableTimeStep());
  const Vibration fine = vibrateBar(model, rest, a, top, 0.25 * model.stableTimeStep());
  const double length = layers * a - a / 2;
  const double expected = 4 * length / std::sqrt(material.youngModulus / material.density);
  std::cout << "fixed-free bar: period " << coarse.period << " s, 4 l / c gives " << expected
            << " s; energy drift " << coarse.drift << " at half the stable step, " << fine.drift
            << " at a quarter\n";
  EXPECT_NEAR(coarse.period / expected, 1.0, 0.03);
  EXPECT_LT(coarse.drift, 5e-3);
  EXPECT_LT(fine.drift, 0.35 * coarse.drift);  // O(dt^2): a quarter
}

// The affine image of the rest phyxels under G.
std::vector<double> affine(std::span<const double> rest, const mls::Mat3& G) {
  std::vector<double> x(rest.size());
  for (size_t i = 0; i < rest.size() / 3; ++i) setRow(x, i, G * row(rest, i));
  return x;
}

MlsSolidParams plasticParams(bool deviatoric) {
  MlsSolidParams params;
  MlsPlasticity plastic;
  plastic.yieldStrain = 0.02;
  plastic.creep = 50;
  plastic.maxStrain = 0.5;
  plastic.deviatoric = deviatoric;
  params.plasticity = plastic;
  return params;
}

// A block held at a uniform stretch creeps (muller2004 section 4.1) until its elastic strain
// is back at the yield strain; released, it rests where its Green strain is the plastic
// strain: the affine shape F = sqrt(I + 2 E_p), stress free. Below the yield strain nothing
// flows.
TEST(MlsSolidPlasticity, AHeldStretchCreepsToTheYieldStrainAndLeavesAPermanentShape) {
  const std::vector<double> rest = lattice(5, 5, 5, 0.01, 0.2);
  const Geometry none;
  for (const bool deviatoric : {false, true}) {
    MlsSolidModel model(rest, {}, rubberBlock(), plasticParams(deviatoric), none);
    mls::Mat3 G = mls::Mat3::Identity();
    G(2, 2) = 1.2;  // 20 % stretch
    const std::vector<double> held = affine(rest, G);
    for (int step = 0; step < 200; ++step) model.updateInelastic(held, 1e-3);
    const mls::Mat3 green = 0.5 * (G.transpose() * G - mls::Mat3::Identity());
    mls::Mat3 Ep;
    const double* e = &model.plasticStrain()[6 * 62];
    Ep << e[0], e[3], e[5], e[3], e[1], e[4], e[5], e[4], e[2];
    mls::Mat3 elastic = green - Ep;
    if (deviatoric) elastic -= elastic.trace() / 3 * mls::Mat3::Identity();
    EXPECT_LE(elastic.norm(), 0.02 + 1e-12);
    EXPECT_GT(elastic.norm(), 0.02 * (1 - 0.05) - 1e-12);  // one step of 5 % below at most
    if (deviatoric) {
      EXPECT_NEAR(Ep.trace(), 0, 1e-12);
    }
    // Released: the stress-free shape is the affine F = sqrt(I + 2 E_p) of every phyxel.
    const Eigen::SelfAdjointEigenSolver<mls::Mat3> eigen(mls::Mat3::Identity() + 2 * Ep);
    const mls::Mat3 relaxed = eigen.operatorSqrt();
    const std::vector<double> free = affine(rest, relaxed);
    const double stored = model.energy(held).total();
    EXPECT_LT(model.energy(free).total(), 1e-12 * stored);
    std::cout << (deviatoric ? "deviatoric" : "full") << " flow: permanent stretch "
              << relaxed(2, 2) << ", elastic strain left " << elastic.norm() << "\n";
    EXPECT_GT(relaxed(2, 2), 1.1);
  }
  // Below the yield strain: elastic.
  MlsSolidModel model(rest, {}, rubberBlock(), plasticParams(true), none);
  mls::Mat3 G = mls::Mat3::Identity();
  G(2, 2) = 1.02;
  for (int step = 0; step < 20; ++step) model.updateInelastic(affine(rest, G), 1e-3);
  for (const double e : model.plasticStrain()) EXPECT_EQ(e, 0.0);
}

TEST(MlsSolidPlasticity, FlowsOnlyWithinItsTimeWindowAndItsStateRoundTrips) {
  const std::vector<double> rest = lattice(4, 4, 4, 0.01);
  const Geometry none;
  MlsSolidParams params = plasticParams(true);
  params.plasticity->from = 0.05;
  params.plasticity->until = 0.08;
  MlsSolidModel model(rest, {}, rubberBlock(), params, none);
  mls::Mat3 G = mls::Mat3::Identity();
  G(0, 1) = 0.3;  // shear
  const std::vector<double> held = affine(rest, G);
  int64_t yielding = 0;
  for (int step = 0; step < 40; ++step)
    yielding += model.updateInelastic(held, 1e-3).yieldingElements;
  EXPECT_EQ(yielding, 0);  // until 0.04 s
  for (int step = 0; step < 60; ++step)
    yielding += model.updateInelastic(held, 1e-3).yieldingElements;
  EXPECT_EQ(yielding, 30 * 64);  // 0.05 < t <= 0.08 s (the clock at each step's end)
  // The state (plastic strains and clock) into a fresh model: the same energy bit for bit.
  MlsSolidModel copy(rest, {}, rubberBlock(), params, none);
  ByteWriter out;
  model.state().write(out);
  ByteReader in(out.bytes(), "test");
  copy.setState(ModelState::read(in));
  const std::vector<double> x = testing::perturbed(held, 1e-3, 4);
  EXPECT_EQ(copy.energy(x).total(), model.energy(x).total());
}

// "Stiff again" (muller2004 Fig. 3: plastic, then "we switch back to a stiff elastic
// material"). A block held stretched and sheared, partly yielded, keeps every phyxel's
// stress when it stiffens k = 5 times at the end of its plastic window (the stored strain's
// stress under the new moduli is the Kirchhoff stress it had); a bent one keeps its dent (its
// reference is the bent shape), resists a further bend about k times as much, passes the energy
// contract, and its explicit step shrinks by about sqrt(k); its state round-trips.
TEST(MlsSolidPlasticity, StiffAgainKeepsTheForcesAndTheDentAndResistsKTimesMore) {
  const std::vector<double> rest = lattice(5, 4, 4, 0.01, 0.1);
  MlsSolidParams params = plasticParams(false);
  params.plasticity->creep = 200;  // part of the strain flows, part stays elastic
  params.plasticity->until = 0.0105;
  params.plasticity->solidStiffness = 5;
  params.volumeStiffness = 2e4;
  const Geometry none;
  const auto largest = [&](const std::vector<double>& g) {
    double m = 0;
    for (size_t i = 0; i < g.size() / 3; ++i) m = std::max(m, row(g, i).norm());
    return m;
  };
  {
    MlsSolidModel model(rest, {}, rubberBlock(), params, none);
    mls::Mat3 G = mls::Mat3::Identity();
    G(0, 0) = 1.15;
    G(0, 2) = 0.2;
    const std::vector<double> held = affine(rest, G);
    for (int step = 0; step < 10; ++step) model.updateInelastic(held, 1e-3);  // t = 0.01
    // Each phyxel's Kirchhoff stress tau = P F^T, from its F, stored strain and volume ratio.
    const auto kirchhoff = [&](const MlsSolidModel& m, double factor) {
      const MaterialDef material = rubberBlock();
      mls::Elasticity c;
      c.mu = factor * material.youngModulus / (2 * (1 + material.poisson));
      c.lambda = factor * material.youngModulus * material.poisson /
                 ((1 + material.poisson) * (1 - 2 * material.poisson));
      c.volumeStiffness = params.volumeStiffness;
      const std::vector<double> gradients = m.deformationGradients(held);
      std::vector<mls::Mat3> out;
      for (size_t p = 0; p < rest.size() / 3; ++p) {
        const mls::Mat3 F =
            Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(&gradients[9 * p]);
        const double* e = &m.plasticStrain()[6 * p];
        mls::Mat3 Ep;
        Ep << e[0], e[3], e[5], e[3], e[1], e[4], e[5], e[4], e[2];
        mls::Mat3 P;
        (void)mls::strainEnergyDensity(F, c, &Ep, &P, nullptr, m.volumeRatios()[p]);
        out.push_back(P * F.transpose());
      }
      return out;
    };
    const std::vector<mls::Mat3> before = kirchhoff(model, 1);
    model.updateInelastic(held, 1e-3);  // t = 0.011 > until: stiffens
    const std::vector<mls::Mat3> after = kirchhoff(model, 5);
    double worst = 0, scale = 0;
    for (size_t p = 0; p < before.size(); ++p) {
      worst = std::max(worst, (after[p] - before[p]).norm());
      scale = std::max(scale, before[p].norm());
    }
    ASSERT_GT(scale, 0.0) << "the yielded block still holds elastic strain";
    EXPECT_LT(worst, 1e-9 * scale) << "no stress jump when it stiffens";
  }
  MlsSolidModel model(rest, {}, rubberBlock(), params, none);
  // Bent: z += 2 x^2 (a curvature of 4 / m), plus a shear.
  std::vector<double> held = rest;
  for (size_t i = 0; i < rest.size() / 3; ++i) {
    held[3 * i + 2] += 2.0 * rest[3 * i] * rest[3 * i] + 0.2 * rest[3 * i + 1];
  }
  for (int step = 0; step < 10; ++step) model.updateInelastic(held, 1e-3);
  const std::vector<double> before = testing::gradientAt(model, held);
  const double stepBefore = model.stableTimeStep();
  const uint64_t version = model.topologyVersion();
  const auto furtherBend = [&](const MlsSolidModel& m) {
    // d^T K d along a further bend, by a second difference.
    std::vector<double> plus = held, minus = held;
    for (size_t i = 0; i < rest.size() / 3; ++i) {
      const double d = 0.5 * rest[3 * i] * rest[3 * i];
      plus[3 * i + 2] += d;
      minus[3 * i + 2] -= d;
    }
    return m.energy(plus).total() + m.energy(minus).total() - 2 * m.energy(held).total();
  };
  const double stiffnessBefore = furtherBend(model);
  model.updateInelastic(held, 1e-3);
  EXPECT_EQ(model.topologyVersion(), version + 1);
  const std::vector<double> after = testing::gradientAt(model, held);
  std::vector<double> change(before.size());
  for (size_t k = 0; k < change.size(); ++k) change[k] = after[k] - before[k];
  const double stiffnessAfter = furtherBend(model);
  // The forces follow the stresses up to the discretisation: the new stencils (neighbours
  // and weights from the bent reference) are not the old ones mapped by F (measured: the
  // largest change 0.09 of the largest force).
  std::cout << "[ measured ] bent block stiffened 5x: largest force change "
            << largest(change) / largest(before) << " of the largest force, stiffness ratio "
            << stiffnessAfter / stiffnessBefore << ", stable step ratio "
            << model.stableTimeStep() / stepBefore << "\n";
  EXPECT_GT(stiffnessAfter / stiffnessBefore, 3.5);
  EXPECT_LT(stiffnessAfter / stiffnessBefore, 5.5);
  EXPECT_NEAR(model.stableTimeStep() / stepBefore, 1 / std::sqrt(5.0), 0.1);
  // Its reference is the bent shape now: the dent stays.
  EXPECT_EQ(
      std::vector<double>(model.referencePositions().begin(), model.referencePositions().end()),
      held);
  const double scale = largest(before);
  const std::vector<double> x = testing::perturbed(held, 2e-4, 9);
  EXPECT_TRUE(testing::gradientMatchesFiniteDifferences(model, x, 1e-7, 1e-5));
  EXPECT_TRUE(testing::hessianMatchesFiniteDifferences(model, x, 1e-7, 1e-4));
  EXPECT_TRUE(testing::zeroNetForceAndTorque(model, x, 1e-9 * scale, 1e-9 * scale));
  // Nothing flows any more, and the state (with the stiffening) round-trips bit for bit.
  EXPECT_EQ(model.updateInelastic(x, 1e-3).yieldingElements, 0);
  EXPECT_EQ(model.topologyVersion(), version + 1);
  MlsSolidModel copy(rest, {}, rubberBlock(), params, none);
  ByteWriter out;
  model.state().write(out);
  ByteReader in(out.bytes(), "test");
  copy.setState(ModelState::read(in));
  EXPECT_EQ(copy.energy(x).total(), model.energy(x).total());
  EXPECT_EQ(copy.stableTimeStep(), model.stableTimeStep());
}

MlsSolidParams meltParams() {
  MlsSolidParams params;
  MlsPlasticity melt;
  melt.yieldStrain = 0.01;
  melt.creep = 0;  // no flow: only the absorption (section 4.2)
  melt.deviatoric = false;
  melt.melt = true;
  melt.meltInterval = 0;  // every step
  params.plasticity = melt;
  params.volumeStiffness = 5e4;
  return params;
}

// Reference absorption (muller2004 section 4.2) is objective: a block stretched along x and
// absorbed stores the stretch as elastic strain (it wants to contract along x); turned
// rigidly by 90 degrees about z and absorbed again, its forces turn with it (it wants to
// contract along y), with no net force or torque. Storing the strain without the rotation
// (notes B6 a) would keep pulling along x: a spurious torque on a spinning blob.
TEST(MlsSolidMelting, AbsorptionTurnsTheStoredStrainWithTheMaterial) {
  const std::vector<double> rest = lattice(4, 4, 4, 0.01, 0.15);
  const Geometry none;
  MlsSolidModel model(rest, {}, rubberBlock(), meltParams(), none);
  mls::Mat3 stretch = mls::Mat3::Identity();
  stretch(0, 0) = 1.1;
  const std::vector<double> stretched = affine(rest, stretch);
  model.updateInelastic(stretched, 1e-3);
  EXPECT_EQ(model.topologyVersion(), 1u);
  const std::vector<double> before = testing::gradientAt(model, stretched);
  const mls::Mat3 Q = Eigen::AngleAxisd(std::numbers::pi / 2, Vec3::UnitZ()).toRotationMatrix();
  const std::vector<double> turned = affine(stretched, Q);
  model.updateInelastic(turned, 1e-3);
  const std::vector<double> after = testing::gradientAt(model, turned);
  double worst = 0, scale = 0;
  Vec3 force = Vec3::Zero(), torque = Vec3::Zero();
  for (size_t i = 0; i < rest.size() / 3; ++i) {
    worst = std::max(worst, (row(after, i) - Q * row(before, i)).norm());
    scale = std::max(scale, row(before, i).norm());
    force += row(after, i);
    torque += row(turned, i).cross(row(after, i));
  }
  EXPECT_GT(scale, 0.0);  // the stretch is stored
  EXPECT_LT(worst, 1e-9 * scale);
  EXPECT_LT(force.norm(), 1e-10 * scale);
  EXPECT_LT(torque.norm(), 1e-10 * scale * 0.04);
  // The stored strain pulls the block back along y now: the phyxels at large y are pulled
  // towards smaller y (dE/dy > 0 there).
  size_t top = 0;
  for (size_t i = 0; i < rest.size() / 3; ++i) {
    if (turned[3 * i + 1] > turned[3 * top + 1]) top = i;
  }
  EXPECT_GT(after[3 * top + 1], 0.0);
  // Volume: the stretch's det F = 1.1 is remembered, the rigid turn's 1 adds nothing.
  for (const double a : model.volumeRatios()) EXPECT_NEAR(a, 1.1, 1e-9);
}

// Re-solidification (muller2004 Figs. 1 and 7): a block melted while held sheared forgets its
// shape; once its plastic window closes it is an elastic solid in the sheared shape: holding
// it there costs nothing, and forcing it back into its original shape costs what shearing the
// unmelted block cost, while its reference no longer moves.
TEST(MlsSolidMelting, AfterItsWindowAMeltIsElasticInTheShapeItFlowedInto) {
  const std::vector<double> rest = lattice(5, 4, 4, 0.01, 0.1);
  MlsSolidParams params;
  MlsPlasticity melt;
  melt.yieldStrain = 1e-4;
  melt.creep = 1e4;  // the elastic strain flows away within each step
  melt.deviatoric = false;
  melt.melt = true;
  melt.meltInterval = 0;
  melt.until = 0.0105;
  params.plasticity = melt;
  const Geometry none;
  MlsSolidModel model(rest, {}, rubberBlock(), params, none);
  const MlsSolidModel solid(rest, {}, rubberBlock(), MlsSolidParams{}, none);
  mls::Mat3 shear = mls::Mat3::Identity();
  shear(0, 2) = 0.3;
  const std::vector<double> sheared = affine(rest, shear);
  const double shearEnergy = solid.energy(sheared).total();
  ASSERT_GT(shearEnergy, 0.0);
  for (int step = 0; step < 10; ++step) model.updateInelastic(sheared, 1e-3);  // t = 0.01
  EXPECT_LT(model.energy(sheared).total(), 1e-6 * shearEnergy);
  const uint64_t version = model.topologyVersion();
  const std::vector<double> reference(model.referencePositions().begin(),
                                      model.referencePositions().end());
  // Past `until`: forced back, it stores energy and its reference stays.
  for (int step = 0; step < 20; ++step) model.updateInelastic(rest, 1e-3);
  EXPECT_EQ(model.topologyVersion(), version);
  const std::vector<double> after(model.referencePositions().begin(),
                                  model.referencePositions().end());
  EXPECT_EQ(after, reference);
  const double back = model.energy(rest).total();
  std::cout << "[ measured ] forced back after solidifying: energy / shearing the unmelted block = "
            << back / shearEnergy << "\n";
  EXPECT_GT(back, 0.5 * shearEnergy);
  EXPECT_LT(model.energy(sheared).total(), 1e-6 * shearEnergy);
}

// Topology changes of a melt (muller2004 section 5.2 and Fig. 10, on the phyxels): the
// stencils of an absorbed reference reach only as far as the first supports, so a bar whose
// halves flowed apart becomes two bodies that do not feel each other, a phyxel dropped far
// away is loose (no force on it), and the halves brought back together act as one again.
TEST(MlsSolidMelting, AMeltSplitsWhereItsPartsFlowApartAndMergesWhereTheyMeet) {
  const std::vector<double> rest = lattice(8, 4, 4, 0.01);
  const Geometry none;
  MlsSolidModel model(rest, {}, rubberBlock(), meltParams(), none);
  const size_t count = rest.size() / 3;
  const auto side = [&](size_t p) { return rest[3 * p] > 0.035; };
  const auto moved = [&](double gap, size_t drop) {
    std::vector<double> x = rest;
    for (size_t p = 0; p < count; ++p) {
      if (side(p)) x[3 * p] += gap;
    }
    if (drop < count) x[3 * drop + 2] -= 0.2;
    return x;
  };
  const auto straddling = [&] {
    int64_t stencils = 0;
    for (size_t p = 0; p < count; ++p) {
      for (const int32_t q : model.stencil(static_cast<int32_t>(p))) {
        if (side(static_cast<size_t>(q)) != side(p)) {
          ++stencils;
          break;
        }
      }
    }
    return stencils;
  };
  EXPECT_GT(straddling(), 0);
  // Apart by 5 spacings (the supports reach about 2.2), with phyxel 0 dropped 20 spacings.
  const std::vector<double> apart = moved(0.05, 0);
  model.updateInelastic(apart, 1e-3);
  EXPECT_EQ(straddling(), 0);
  EXPECT_EQ(model.stencil(0).size(), 1u);  // loose
  const std::vector<double> g = testing::gradientAt(model, apart);
  EXPECT_EQ(row(g, 0).norm(), 0.0);
  // Moving one part rigidly changes nothing: they are two bodies.
  const double energy = model.energy(apart).total();
  EXPECT_NEAR(model.energy(moved(0.08, 0)).total(), energy, 1e-9 * std::max(1.0, energy));
  // Back together (phyxel 0 too): one body again.
  const std::vector<double> together = moved(0, count);
  model.updateInelastic(together, 1e-3);
  EXPECT_GT(straddling(), 0);
  EXPECT_GT(model.stencil(0).size(), 1u);
  const double joined = model.energy(together).total();
  EXPECT_GT(model.energy(moved(0.003, count)).total(), joined + 1e-6);
}

// A melt squeezed flat (here to a twentieth of its height, absorbed) leaves the flattened
// direction out of its fits instead of fitting it from tiny offsets, whose shape vectors
// would make it stiff and its stable step tiny.
TEST(MlsSolidMelting, AMeltSqueezedFlatKeepsItsStableStep) {
  const std::vector<double> rest = lattice(6, 6, 3, 0.01);
  const Geometry none;
  MlsSolidModel model(rest, {}, rubberBlock(), meltParams(), none);
  const double before = model.stableTimeStep();
  mls::Mat3 squeeze = mls::Mat3::Identity();
  squeeze(2, 2) = 0.05;
  const std::vector<double> flat = affine(rest, squeeze);
  model.updateInelastic(flat, 1e-3);
  const double after = model.stableTimeStep();
  std::cout << "[ measured ] squeezed to 1/20: stable step " << after / before << " of before\n";
  EXPECT_GT(after, 0.1 * before);  // 0.082 with the first build's limits
}

// Surfels on the faces of the box [lo, hi] at the given spacing, normals outward.
Geometry boxSurfels(const Vec3& lo, const Vec3& hi, double spacing) {
  Geometry g;
  for (int axis = 0; axis < 3; ++axis) {
    const int u = (axis + 1) % 3, v = (axis + 2) % 3;
    const int nu = static_cast<int>(std::round((hi[u] - lo[u]) / spacing));
    const int nv = static_cast<int>(std::round((hi[v] - lo[v]) / spacing));
    for (const int sign : {-1, 1}) {
      for (int i = 0; i < nu; ++i) {
        for (int j = 0; j < nv; ++j) {
          Vec3 x, n = Vec3::Zero();
          x[axis] = sign < 0 ? lo[axis] : hi[axis];
          x[u] = lo[u] + (i + 0.5) * (hi[u] - lo[u]) / nu;
          x[v] = lo[v] + (j + 0.5) * (hi[v] - lo[v]) / nv;
          n[axis] = sign;
          for (int c = 0; c < 3; ++c) {
            g.positions.push_back(x[c]);
            g.normals.push_back(n[c]);
          }
        }
      }
    }
  }
  return g;
}

// The resampled surface (muller2004 section 5.2, Fig. 10) of a bar melted in two and back: no
// surfel is left in the gap, both new ends are covered, and once merged no surfel is left
// inside; a rigid turn before changes nothing. The state round-trips. (The carried surface
// fails the split's checks: 64 surfels in the gap, 32 cut phyxels uncovered.)
TEST(MlsSolidMelting, TheResampledSurfaceSplitsWithTheBodyAndMergesBack) {
  const std::vector<double> rest = lattice(8, 4, 4, 0.01);
  const Geometry surfels =
      boxSurfels(Vec3(-0.005, -0.005, -0.005), Vec3(0.075, 0.035, 0.035), 0.005);
  MlsSolidParams params = meltParams();
  params.resampleSurface = true;
  MlsSolidModel model(rest, {}, rubberBlock(), params, surfels);
  const size_t count = rest.size() / 3;
  const auto moved = [&](double gap) {
    std::vector<double> x = rest;
    for (size_t p = 0; p < count; ++p) {
      if (rest[3 * p] > 0.035) x[3 * p] += gap;
    }
    return x;
  };
  // Turned rigidly and absorbed, the boundary does not change: every surfel keeps its place
  // on the body (the detail surface, eq. 27), none is added or removed.
  const mls::Mat3 turn = Eigen::AngleAxisd(0.7, Vec3(1, 2, 3).normalized()).toRotationMatrix();
  const std::vector<double> turned = affine(rest, turn);
  for (int update = 0; update < 3; ++update) model.updateInelastic(turned, 1e-3);
  const Geometry carried = model.surface(turned);
  ASSERT_EQ(carried.vertexCount(), surfels.vertexCount());
  double worst = 0;
  for (size_t s = 0; s < static_cast<size_t>(surfels.vertexCount()); ++s) {
    worst = std::max(worst, (row(carried.positions, s) - turn * row(surfels.positions, s)).norm());
  }
  EXPECT_LT(worst, 1e-12);
  const std::vector<double> apart = moved(0.05);
  for (int update = 0; update < 12; ++update) model.updateInelastic(apart, 1e-3);
  Geometry shown = model.surface(apart);
  const auto surfelCount = static_cast<size_t>(shown.vertexCount());
  std::cout << "[ measured ] split: " << surfelCount << " surfels (from " << surfels.vertexCount()
            << ")\n";
  int inGap = 0;
  for (size_t s = 0; s < surfelCount; ++s) {
    const double x = shown.positions[3 * s];
    if (x > 0.045 && x < 0.075) ++inGap;
  }
  EXPECT_EQ(inGap, 0);
  // The new ends: every phyxel at the cut has a surfel just beyond it.
  const auto coveredBeyond = [&](size_t p, double direction) {
    for (size_t s = 0; s < surfelCount; ++s) {
      const Vec3 d = row(shown.positions, s) - row(apart, p);
      if (d.x() * direction > 0.002 && d.norm() < 0.01) return true;
    }
    return false;
  };
  int uncovered = 0;
  for (size_t p = 0; p < count; ++p) {
    if (std::abs(rest[3 * p] - 0.03) < 1e-9 && !coveredBeyond(p, 1)) ++uncovered;
    if (std::abs(rest[3 * p] - 0.04) < 1e-9 && !coveredBeyond(p, -1)) ++uncovered;
  }
  EXPECT_EQ(uncovered, 0);
  EXPECT_LT(surfelCount, 4 * static_cast<size_t>(surfels.vertexCount()));
  // Round trip of the resampled state.
  MlsSolidModel copy(rest, {}, rubberBlock(), params, surfels);
  ByteWriter out;
  model.state().write(out);
  ByteReader in(out.bytes(), "test");
  copy.setState(ModelState::read(in));
  EXPECT_EQ(copy.surface(apart).positions, shown.positions);
  // Merged back: nothing left inside the bar.
  const std::vector<double> together = moved(0);
  for (int update = 0; update < 12; ++update) model.updateInelastic(together, 1e-3);
  shown = model.surface(together);
  int inside = 0;
  for (size_t s = 0; s < static_cast<size_t>(shown.vertexCount()); ++s) {
    const Vec3 x = row(shown.positions, s);
    if (x.x() > 0.01 && x.x() < 0.06 && x.y() > 0.008 && x.y() < 0.022 && x.z() > 0.008 &&
        x.z() < 0.022) {
      ++inside;
    }
  }
  std::cout << "[ measured ] merged: " << shown.vertexCount() << " surfels\n";
  EXPECT_EQ(inside, 0);
}

TEST(MlsSolidMelting, AMeltedStateRoundTripsBitForBit) {
  const std::vector<double> rest = lattice(4, 4, 4, 0.01, 0.15);
  PrimitiveDef box;
  box.type = PrimitiveType::kBox;
  box.size = {0.04, 0.04, 0.04};
  box.resolution = 4;
  Geometry mesh = makePrimitive(box);
  for (size_t i = 0; i < mesh.positions.size(); ++i) mesh.positions[i] += 0.015;
  MlsSolidModel model(rest, {}, rubberBlock(), meltParams(), mesh);
  std::vector<double> x(rest);
  for (int step = 0; step < 20; ++step) {  // a shear that grows, absorbed every step
    mls::Mat3 G = mls::Mat3::Identity();
    G(0, 2) = 0.01 * step;
    x = affine(rest, G);
    model.updateInelastic(x, 1e-3);
  }
  MlsSolidModel copy(rest, {}, rubberBlock(), meltParams(), mesh);
  ByteWriter out;
  model.state().write(out);
  ByteReader in(out.bytes(), "test");
  copy.setState(ModelState::read(in));
  const std::vector<double> y = testing::perturbed(x, 1e-3, 4);
  EXPECT_EQ(copy.energy(y).total(), model.energy(y).total());
  EXPECT_EQ(copy.surface(y).positions, model.surface(y).positions);
  EXPECT_EQ(copy.stableTimeStep(), model.stableTimeStep());
}

// The energy contract on a lattice block, a jittered one (with the volume term and a
// different neighbour count), and phyxels sampled inside a sphere mesh.
testing::ContractCase mlsCase(const std::string& which) {
  testing::ContractCase c;
  c.name = which;
  c.setup = [which] {
    testing::ContractSetup s;
    MlsSolidParams params;
    std::vector<double> rest;
    Geometry surface;
    if (which == "lattice") {
      rest = lattice(5, 4, 4, 0.01);
    } else if (which == "jittered") {
      rest = lattice(5, 5, 4, 0.01, 0.25);
      params.neighbours = 18;
      params.volumeStiffness = 5e4;
      params.hourglass = 0.5;
    } else if (which == "melted") {
      rest = lattice(5, 4, 4, 0.01, 0.1);
      params = meltParams();
    } else if (which == "plastic") {
      rest = lattice(5, 4, 4, 0.01, 0.1);
      params = plasticParams(true);
    } else if (which == "sheet2" || which == "sheet3") {
      // Two or three layers of a sheet curled on a cylinder of radius 5 cm.
      Geometry mid = makeEquilateralLattice(6, 7, 0.01);
      for (size_t v = 0; v < static_cast<size_t>(mid.vertexCount()); ++v) {
        const double angle = mid.positions[3 * v] / 0.05;
        mid.positions[3 * v] = 0.05 * std::sin(angle);
        mid.positions[3 * v + 2] = 0.05 * std::cos(angle);
      }
      const int layers = which == "sheet2" ? 2 : 3;
      const VolumeSampling sheet = sampleSheetLayers(mid, 0.003, layers);
      params.layers = layers;
      params.neighbours = 20;
      s.model = std::make_unique<MlsSolidModel>(sheet.positions, sheet.volumes, rubberBlock(),
                                                params, mid);
      s.rest = sheet.positions;
      s.scale = 0.01;
      return s;
    } else {
      PrimitiveDef sphere;
      sphere.type = PrimitiveType::kSphere;
      sphere.radius = 0.03;
      sphere.resolution = 12;
      surface = makePrimitive(sphere);
      rest = sampleVolume(surface, 0.012).positions;
      params.neighbours = 20;
    }
    s.model = std::make_unique<MlsSolidModel>(rest, std::span<const double>{}, rubberBlock(),
                                              params, surface);
    s.rest = rest;
    if (which == "melted") {
      // Sheared by 20 % in four absorbed steps: stored strain, a volume ratio, new stencils.
      for (int step = 1; step <= 4; ++step) {
        mls::Mat3 G = mls::Mat3::Identity();
        G(0, 2) = 0.05 * step;
        G(1, 1) = 1 + 0.02 * step;
        s.model->updateInelastic(affine(rest, G), 2e-3);
      }
      s.rest =
          std::vector<double>(dynamic_cast<MlsSolidModel&>(*s.model).referencePositions().begin(),
                              dynamic_cast<MlsSolidModel&>(*s.model).referencePositions().end());
      s.restIsRelaxed = false;
    }
    if (which == "plastic") {
      // Sheared by 30 % and held while the plastic strain creeps.
      mls::Mat3 G = mls::Mat3::Identity();
      G(0, 2) = 0.3;
      const std::vector<double> held = affine(rest, G);
      for (int step = 0; step < 10; ++step) s.model->updateInelastic(held, 2e-3);
      s.restIsRelaxed = false;
    }
    s.scale = 0.01;
    return s;
  };
  c.perturbation = 0.1;
  c.gradientStep = 1e-6;
  c.gradientTolerance = 1e-6;
  c.hessianStep = 1e-7;
  c.hessianTolerance = 1e-6;
  c.forceTolerance = 1e-11;
  c.torqueTolerance = 1e-11;
  c.expectStretching = true;
  return c;
}

using testing::ModelContract;
INSTANTIATE_TEST_SUITE_P(MlsSolid, ModelContract,
                         ::testing::Values(mlsCase("lattice"), mlsCase("jittered"),
                                           mlsCase("sphere"), mlsCase("plastic"), mlsCase("melted"),
                                           mlsCase("sheet2"), mlsCase("sheet3")),
                         testing::contractCaseName);

}  // namespace
}  // namespace shellsim
