// The thick-shell model (steinemann section 4.1): its area and volume stencils, the energy
// contract on one- and two-layer shells, masses that weigh the shell, stiffness that
// follows the depth (Fig. 3), and an undamped run that keeps its energy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <numbers>
#include <numeric>
#include <random>
#include <string>

#include "core/union_find.hpp"
#include "geometry/primitives.hpp"
#include "models/model_contract.hpp"
#include "models/thick_shell/thick_shell_kernel.hpp"
#include "models/thick_shell/thick_shell_model.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/thicken.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

using testing::ModelContract;

MaterialDef shellMaterial(double thickness) {
  MaterialDef m;
  m.youngModulus = 1e6;
  m.poisson = 0.3;
  m.thickness = thickness;
  m.density = 1000;
  return m;
}

Geometry sphereMesh(double radius, int resolution) {
  PrimitiveDef p;
  p.type = PrimitiveType::kSphere;
  p.radius = radius;
  p.resolution = resolution;
  return makePrimitive(p);
}

Geometry sheetMesh(double size, int resolution) {
  PrimitiveDef p;
  p.type = PrimitiveType::kSheet;
  p.size = {size, size, 1};
  p.resolution = resolution;
  return makePrimitive(p);
}

std::unique_ptr<ThickShellModel> makeModel(const Geometry& mesh, double thickness, int layers,
                                           double extrusion = 1) {
  ThickenOptions t;
  t.depth = thickness;
  t.verify = false;
  const ThickShell shell = thickenMesh(mesh, t);
  ThickShellDef options;
  options.layers = layers;
  options.extrusionFactor = extrusion;
  return std::make_unique<ThickShellModel>(mesh, shell, shellMaterial(thickness), options);
}

// The brittle look (section 4.2.4): a bent shell is drawn at the rigid motion that best fits
// it, so every drawn distance is a rest distance; moved rigidly, it is drawn where it is.
TEST(ThickShellModel, BrittleFramesDrawEachPieceRigidly) {
  const Geometry mesh = sphereMesh(0.5, 8);
  for (const int layers : {1, 2}) {
    ThickenOptions t;
    t.depth = 0.05;
    t.verify = false;
    const ThickShell shell = thickenMesh(mesh, t);
    ThickShellDef options;
    options.layers = layers;
    options.brittle = true;
    const ThickShellModel model(mesh, shell, shellMaterial(0.05), options);
    const std::span<const double> rest = model.restPositions();
    const auto nodes = static_cast<size_t>(model.nodeCount());
    const Eigen::Matrix3d turn =
        Eigen::AngleAxisd(0.7, Vec3(1, 2, 3).normalized()).toRotationMatrix();
    const Vec3 shift(0.3, -1, 2);
    std::vector<double> moved(3 * nodes), bent(3 * nodes);
    for (size_t i = 0; i < nodes; ++i) {
      const Vec3 p = row(rest, i);
      setRow(moved, i, turn * p + shift);
      // Squashed along z and sheared: anything but rigid.
      setRow(bent, i, turn * Vec3(p.x() + 0.3 * p.z(), p.y(), 0.6 * p.z()) + shift);
    }
    const Geometry drawnMoved = model.surface(moved);
    const Geometry drawnBent = model.surface(bent);
    const auto n = static_cast<size_t>(mesh.vertexCount());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_LT((row(drawnMoved.positions, i) - row(moved, i)).norm(), 1e-12) << layers;
    }
    double worst = 0, bentWorst = 0;
    for (size_t i = 0; i < n; i += 7) {
      for (size_t j = i + 3; j < n; j += 11) {
        const double restDistance = (row(rest, i) - row(rest, j)).norm();
        worst = std::max(
            worst, std::abs((row(drawnBent.positions, i) - row(drawnBent.positions, j)).norm() -
                            restDistance));
        bentWorst =
            std::max(bentWorst, std::abs((row(bent, i) - row(bent, j)).norm() - restDistance));
      }
    }
    EXPECT_LT(worst, 1e-12) << layers;
    EXPECT_GT(bentWorst, 0.1) << "the bent shell is not rigid";
  }
}

// Finite differences of the two stencils on a random configuration, gradient and Hessian.
TEST(ThickShellKernel, AreaAndVolumeMatchFiniteDifferences) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  Vec3 tri[3], tet[4];
  for (Vec3& p : tri) p = Vec3(u(rng), u(rng), u(rng));
  for (Vec3& p : tet) p = Vec3(u(rng), u(rng), u(rng));
  const double h = 1e-6;
  {
    Vec3 g[3];
    Eigen::Matrix<double, 9, 9> hessian;
    const double restArea = 0.7;
    thick_shell::areaEnergyGradient(2.0, restArea, tri, g, &hessian);
    for (int k = 0; k < 9; ++k) {
      Vec3 plus[3] = {tri[0], tri[1], tri[2]}, minus[3] = {tri[0], tri[1], tri[2]};
      plus[k / 3][k % 3] += h;
      minus[k / 3][k % 3] -= h;
      Vec3 gp[3], gm[3];
      const double ep = thick_shell::areaEnergyGradient(2.0, restArea, plus, gp);
      const double em = thick_shell::areaEnergyGradient(2.0, restArea, minus, gm);
      EXPECT_NEAR(g[k / 3][k % 3], (ep - em) / (2 * h), 1e-7);
      for (int j = 0; j < 9; ++j) {
        EXPECT_NEAR(hessian(j, k), (gp[j / 3][j % 3] - gm[j / 3][j % 3]) / (2 * h), 1e-6);
      }
    }
  }
  {
    Vec3 g[4];
    Eigen::Matrix<double, 12, 12> hessian;
    const double restVolume = 0.05;
    thick_shell::volumeEnergyGradient(2.0, restVolume, tet, g, &hessian);
    for (int k = 0; k < 12; ++k) {
      Vec3 plus[4] = {tet[0], tet[1], tet[2], tet[3]}, minus[4] = {tet[0], tet[1], tet[2], tet[3]};
      plus[k / 3][k % 3] += h;
      minus[k / 3][k % 3] -= h;
      Vec3 gp[4], gm[4];
      const double ep = thick_shell::volumeEnergyGradient(2.0, restVolume, plus, gp);
      const double em = thick_shell::volumeEnergyGradient(2.0, restVolume, minus, gm);
      EXPECT_NEAR(g[k / 3][k % 3], (ep - em) / (2 * h),
                  1e-5 * std::max(1.0, std::abs(g[k / 3][k % 3])));
      for (int j = 0; j < 12; ++j) {
        EXPECT_NEAR(hessian(j, k), (gp[j / 3][j % 3] - gm[j / 3][j % 3]) / (2 * h),
                    1e-5 * std::max(1.0, std::abs(hessian(j, k))));
      }
    }
  }
}

// A tet pushed through its base (inside out) is pushed back: the force on the apex points
// to the side it came from.
TEST(ThickShellKernel, InvertedTetIsPushedBack) {
  const Vec3 base[3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  const double restVolume = thick_shell::tetVolume(base[0], base[1], base[2], {0.2, 0.2, 1});
  ASSERT_GT(restVolume, 0);
  const Vec3 tet[4] = {base[0], base[1], base[2], {0.2, 0.2, -0.3}};
  Vec3 g[4];
  thick_shell::volumeEnergyGradient(1.0, restVolume, tet, g);
  EXPECT_GT(-g[3].z(), 0);  // the force on the apex points up, back through the base
  // Net force zero.
  EXPECT_NEAR((g[0] + g[1] + g[2] + g[3]).norm(), 0, 1e-12);
}

// A thick-shell model at its rest positions, for the contract (edges about 0.1 m).
testing::ContractSetup contractSetup(std::unique_ptr<ThickShellModel> model) {
  testing::ContractSetup s;
  s.rest.assign(model->restPositions().begin(), model->restPositions().end());
  s.model = std::move(model);
  s.scale = 0.1;
  return s;
}

// The contract case with the tolerances every thick-shell case uses.
testing::ContractCase thickShellContract(std::string name,
                                         std::function<testing::ContractSetup()> setup) {
  testing::ContractCase c;
  c.name = std::move(name);
  c.setup = std::move(setup);
  c.perturbation = 0.02;
  c.gradientTolerance = 1e-5;
  c.hessianStep = 1e-7;
  c.hessianTolerance = 1e-5;
  c.forceTolerance = 1e-11;
  c.torqueTolerance = 1e-11;
  c.expectStretching = true;
  return c;
}

testing::ContractCase thickShellCase(const std::string& which, int layers) {
  return thickShellContract(which + std::to_string(layers), [which, layers] {
    const Geometry mesh = which == "sphere" ? sphereMesh(0.5, 10) : sheetMesh(1.0, 6);
    return contractSetup(
        makeModel(mesh, which == "sphere" ? 0.05 : 0.08, layers, which == "sheet" ? 2.0 : 1.0));
  });
}

INSTANTIATE_TEST_SUITE_P(ThickShell, ModelContract,
                         ::testing::Values(thickShellCase("sphere", 1), thickShellCase("sphere", 2),
                                           thickShellCase("sheet", 2)),
                         testing::contractCaseName);

// The body weighs what its shell holds: a sphere of radius R thickened by eps weighs
// rho 4/3 pi (R^3 - (R - eps)^3), up to the mesh's facets (the icosphere's inscribed
// polyhedron holds a little less).
TEST(ThickShell, MassIsTheShellsVolume) {
  const double radius = 0.5, eps = 0.05;
  const Geometry mesh = sphereMesh(radius, 30);
  for (const int layers : {1, 2}) {
    const auto model = makeModel(mesh, eps, layers);
    const auto masses = model->nodeMasses();
    const double total = std::accumulate(masses.begin(), masses.end(), 0.0);
    const double exact =
        1000 * 4.0 / 3.0 * std::numbers::pi * (std::pow(radius, 3) - std::pow(radius - eps, 3));
    EXPECT_NEAR(total / exact, 1.0, 0.02) << layers << " layers";
  }
}

// Fig. 3: a wall twice as thick has springs twice as stiff (and twice the mass), so the
// same blow stretches it less.
TEST(ThickShell, StiffnessFollowsTheDepth) {
  const Geometry mesh = sphereMesh(0.5, 10);
  const auto thin = makeModel(mesh, 0.02, 1), thick = makeModel(mesh, 0.04, 1);
  ASSERT_EQ(thin->springStiffness().size(), thick->springStiffness().size());
  for (size_t s = 0; s < thin->springStiffness().size(); ++s) {
    EXPECT_NEAR(thick->springStiffness()[s] / thin->springStiffness()[s], 2.0, 1e-9);
  }
}

// Two layers: S' nodes at the generated depth (f = 1) or f times deeper, and the drawn
// surface back at the generated depth; S, S' and no walls on a closed mesh.
TEST(ThickShell, TwoLayersAndTheDrawnSurface) {
  const Geometry mesh = sphereMesh(0.5, 10);
  const auto model = makeModel(mesh, 0.05, 2, 2.0);
  const auto n = static_cast<size_t>(mesh.vertexCount());
  ASSERT_EQ(model->nodeCount(), static_cast<int32_t>(2 * n));
  const auto rest = model->restPositions();
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR((row(rest, i) - row(rest, n + i)).norm(), 0.1, 1e-12);  // f eps
  }
  const Geometry drawn = model->surface(rest);
  ASSERT_EQ(drawn.positions.size(), 6 * n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR((row(drawn.positions, i) - row(drawn.positions, n + i)).norm(), 0.05, 1e-12);
  }
  EXPECT_EQ(drawn.triangles.size(), 2 * mesh.triangles.size());
  EXPECT_EQ(model->energy(rest).total(), 0.0);
}

// Undamped velocity Verlet at the model's stable step keeps the energy of a deformed shell.
TEST(ThickShell, VerletKeepsTheEnergy) {
  const Geometry mesh = sphereMesh(0.5, 8);
  const auto model = makeModel(mesh, 0.05, 2);
  const std::vector<double> start = testing::perturbed(model->restPositions(), 0.005, 5);
  const double growth =
      testing::verletEnergyGrowth(*model, start, 0.5 * model->stableTimeStep(), 400);
  EXPECT_LT(growth, 1.05);  // the largest total energy over the first, Verlet's O(dt^2) swing
}

// A two-layer ball (R = 0.2 m, 2 cm wall) dropped 0.1 m onto the floor, through the world
// and the shared integrators: explicit Verlet and backward Euler at 1/240 s. Both come to
// rest on the floor, round, and agree on where.
TEST(ThickShell, DroppedBallRestsWithVerletAndBackwardEuler) {
  std::vector<double> heights;
  for (const Integrator integrator : {Integrator::kVerlet, Integrator::kBackwardEuler}) {
    SimulationSettings settings;
    settings.time.integrator = integrator;
    settings.time.frameRate = 30;
    if (integrator == Integrator::kBackwardEuler) settings.time.timeStep = 1.0 / 240;
    Simulation sim(settings);
    ObstacleDef floor;
    floor.friction = 0.5;
    sim.addObstacle(floor);
    BodyDef def;
    def.model = "thick_shell";
    def.material = shellMaterial(0.02);
    def.material.damping = 2;
    def.material.internalDamping = 20;
    def.transform.translation = {0, 0, 0.3};
    const int32_t body = sim.addBody(sphereMesh(0.2, 10), def);
    EXPECT_EQ(sim.modelName(body), "thick_shell");
    sim.advance(1.0);
    const auto x = sim.positions(body);
    const auto m = sim.masses(body);
    double lowest = 1e9, mass = 0, centre = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      ASSERT_TRUE(std::isfinite(x[3 * i + 2]));
      lowest = std::min(lowest, x[3 * i + 2]);
      centre += m[i] * x[3 * i + 2];
      mass += m[i];
    }
    centre /= mass;
    EXPECT_GT(lowest, -1e-3);        // on the floor, not through it
    EXPECT_NEAR(centre, 0.2, 0.03);  // resting, about round
    heights.push_back(centre);
  }
  EXPECT_NEAR(heights[0], heights[1], 0.01);
}

// --- Fracture (one layer) ---

// A shell `depth` deep on `mesh` that breaks as `fracture` says.
std::unique_ptr<ThickShellModel> fracturingShell(const Geometry& mesh, double depth,
                                                 const ThickShellFractureDef& fracture,
                                                 int layers = 1, double extrusion = 1) {
  ThickenOptions t;
  t.depth = depth;
  t.verify = false;
  ThickShellDef options;
  options.layers = layers;
  options.extrusionFactor = extrusion;
  options.fracture = fracture;
  return std::make_unique<ThickShellModel>(mesh, thickenMesh(mesh, t), shellMaterial(depth),
                                           options);
}

std::unique_ptr<ThickShellModel> fracturingSheet(const Geometry& mesh, bool coarse) {
  ThickShellFractureDef f;
  f.stretch = 0.1;
  f.coarse = coarse;
  f.maxSplits = 4;
  return fracturingShell(mesh, 0.01, f);
}

// rows (nOld, 3) -> (nNew, 3) as a topology edit carries them: each new row the weighted
// sum of its sources' rows.
std::vector<double> blendedRows(const TopologyEdit& edit, const std::vector<double>& rows) {
  const auto n = static_cast<size_t>(edit.nodeCount());
  std::vector<double> out(3 * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (auto k = static_cast<size_t>(edit.sourceOffsets[i]);
         k < static_cast<size_t>(edit.sourceOffsets[i + 1]); ++k) {
      const auto s = static_cast<size_t>(edit.sourceNodes[k]);
      setRow(out, i, row(out, i) + edit.sourceWeights[k] * row(rows, s));
    }
  }
  return out;
}

// Every node's triangles form one fan across shared edges: no piece hangs by one node.
void expectOneFanPerNode(const ThickShellModel& model, const Geometry& surface, int32_t nodes) {
  std::vector<std::vector<int32_t>> at(static_cast<size_t>(nodes));
  const auto f = static_cast<int32_t>(model.elementCount());
  for (int32_t t = 0; t < f; ++t) {
    for (int k = 0; k < 3; ++k) at[static_cast<size_t>(surface.triangles[3 * t + k])].push_back(t);
  }
  for (int32_t v = 0; v < nodes; ++v) {
    const auto& fan = at[static_cast<size_t>(v)];
    ASSERT_FALSE(fan.empty()) << "node " << v << " in no triangle";
    UnionFind joined(fan.size());
    for (size_t p = 0; p < fan.size(); ++p) {
      for (size_t q = p + 1; q < fan.size(); ++q) {
        int shared = 0;
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) {
            shared +=
                surface.triangles[3 * fan[p] + i] == surface.triangles[3 * fan[q] + j] ? 1 : 0;
          }
        }
        if (shared == 2) joined.unite(static_cast<int32_t>(p), static_cast<int32_t>(q));
      }
    }
    const auto labels = joined.labels();
    EXPECT_EQ(*std::max_element(labels.begin(), labels.end()), 0)
        << "node " << v << " is a bow-tie";
  }
}

// A node pulled far out of a sheet overstretches its springs: the split adds nodes that
// start where their parents are, the masses keep their sum and each parent's share (so
// momentum is kept exactly with the copies' velocities), and the mesh stays manifold.
TEST(ThickShellFracture, SplitKeepsMassAndManifold) {
  const Geometry mesh = makeEquilateralLattice(7, 7, 0.1);
  auto model = fracturingSheet(mesh, false);
  const auto massBefore =
      std::vector<double>(model->nodeMasses().begin(), model->nodeMasses().end());
  std::vector<double> x(model->restPositions().begin(), model->restPositions().end());
  x[3 * 24 + 0] += 0.04;  // the middle node, 40 % of an edge to the right
  x[3 * 24 + 2] += 0.02;
  const InelasticReport report = model->updateInelastic(x, 1e-3);
  ASSERT_TRUE(report.edit.changesNodes());
  EXPECT_GT(report.brokenElements, 0);
  const int32_t nodes = report.edit.nodeCount();
  EXPECT_GT(nodes, 49);
  EXPECT_EQ(model->nodeCount(), nodes);
  const auto massAfter = model->nodeMasses();
  std::vector<double> perParent(49, 0.0);
  for (int32_t i = 0; i < nodes; ++i) {
    const int32_t begin = report.edit.sourceOffsets[static_cast<size_t>(i)];
    ASSERT_EQ(report.edit.sourceOffsets[static_cast<size_t>(i) + 1] - begin, 1);
    EXPECT_EQ(report.edit.sourceWeights[static_cast<size_t>(begin)], 1.0);
    perParent[static_cast<size_t>(report.edit.sourceNodes[static_cast<size_t>(begin)])] +=
        massAfter[static_cast<size_t>(i)];
  }
  for (size_t p = 0; p < 49; ++p) EXPECT_NEAR(perParent[p], massBefore[p], 1e-15) << "parent " << p;
  std::vector<double> grown(3 * static_cast<size_t>(nodes));
  for (int32_t i = 0; i < nodes; ++i) {
    const int32_t parent =
        report.edit
            .sourceNodes[static_cast<size_t>(report.edit.sourceOffsets[static_cast<size_t>(i)])];
    for (int k = 0; k < 3; ++k)
      grown[3 * static_cast<size_t>(i) + k] = x[3 * static_cast<size_t>(parent) + k];
  }
  const Geometry surface = model->surface(grown);
  expectOneFanPerNode(*model, surface, nodes);
  EXPECT_EQ(analyzeTopology(surface).nonManifoldEdgeCount, 0);
  // The state is a value: put back, the model has its old nodes again.
  EXPECT_GT(model->topologyVersion(), 0U);
}

// Two layers (A8 step 4: "a new shell-vertex pair"): the pass splits S and each new node of
// S gets its S' node, from the S' nodes of its sources with the same weights; each layer's
// mass is kept per parent; every vertex keeps its internal spring; the rebuilt shell is at
// rest at its rest positions and stays manifold.
TEST(ThickShellFracture, TwoLayerSplitTakesTheInnerNodeAlong) {
  const Geometry mesh = makeEquilateralLattice(7, 7, 0.1);
  ThickShellFractureDef f;
  f.stretch = 0.1;
  f.maxSplits = 4;
  f.remesh = true;
  auto model = fracturingShell(mesh, 0.02, f, 2, 3.0);
  const int32_t n0 = 49;
  ASSERT_EQ(model->nodeCount(), 2 * n0);
  const std::vector<double> massBefore(model->nodeMasses().begin(), model->nodeMasses().end());
  const std::vector<double> restBefore(model->restPositions().begin(),
                                       model->restPositions().end());
  std::vector<double> x = restBefore;
  for (const int32_t node : {24, 24 + n0}) {  // the middle vertex and its S' node, pulled out
    x[3 * static_cast<size_t>(node) + 0] += 0.04;
    x[3 * static_cast<size_t>(node) + 2] += 0.02;
  }
  {
    // Without re-meshing (whose cuts add springs) a split changes no term at the same
    // positions (with two layers the cracked sides keep their springs, each on its own
    // triangle's nodes, free to part): the elastic energy cannot rise.
    ThickShellFractureDef plainFracture = f;
    plainFracture.remesh = false;
    auto plain = fracturingShell(mesh, 0.02, plainFracture, 2, 3.0);
    const double before = plain->energy(x).total();
    const InelasticReport split = plain->updateInelastic(x, 1e-3);
    ASSERT_TRUE(split.edit.changesNodes());
    const double after = plain->energy(blendedRows(split.edit, x)).total();
    std::cout << "elastic energy " << before << " J before the split, " << after << " J after\n";
    EXPECT_LE(after, before * (1 + 1e-12));
  }
  const InelasticReport report = model->updateInelastic(x, 1e-3);
  ASSERT_TRUE(report.edit.changesNodes());
  const TopologyEdit& edit = report.edit;
  const int32_t nodes = model->nodeCount();
  ASSERT_EQ(edit.nodeCount(), nodes);
  ASSERT_EQ(nodes % 2, 0);
  const int32_t n = nodes / 2;
  EXPECT_GT(n, n0);
  // S' node n + i: the sources of vertex i, each moved to its S' node, same weights.
  for (int32_t i = 0; i < n; ++i) {
    const auto outer = static_cast<size_t>(i), inner = static_cast<size_t>(n + i);
    const int32_t count = edit.sourceOffsets[outer + 1] - edit.sourceOffsets[outer];
    ASSERT_EQ(edit.sourceOffsets[inner + 1] - edit.sourceOffsets[inner], count) << "node " << i;
    for (int32_t k = 0; k < count; ++k) {
      const auto ko = static_cast<size_t>(edit.sourceOffsets[outer] + k);
      const auto ki = static_cast<size_t>(edit.sourceOffsets[inner] + k);
      EXPECT_LT(edit.sourceNodes[ko], n0);
      EXPECT_EQ(edit.sourceNodes[ki], edit.sourceNodes[ko] + n0);
      EXPECT_EQ(edit.sourceWeights[ki], edit.sourceWeights[ko]);
    }
  }
  // The new rest positions are the old ones blended as the edit blends positions.
  const std::vector<double> restBlended = blendedRows(edit, restBefore);
  for (size_t k = 0; k < restBlended.size(); ++k)
    EXPECT_NEAR(model->restPositions()[k], restBlended[k], 1e-14);
  // Mass and momentum, for any velocities (a linear function of them).
  std::mt19937 random(3);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<double> v(3 * static_cast<size_t>(2 * n0));
  for (double& value : v) value = uniform(random);
  const std::vector<double> vNew = blendedRows(edit, v);
  Vec3 momentum0 = Vec3::Zero(), momentum = Vec3::Zero();
  double mass0 = 0, mass = 0;
  for (size_t i = 0; i < massBefore.size(); ++i) {
    momentum0 += massBefore[i] * row(v, i);
    mass0 += massBefore[i];
  }
  for (size_t i = 0; i < static_cast<size_t>(nodes); ++i) {
    momentum += model->nodeMasses()[i] * row(vNew, i);
    mass += model->nodeMasses()[i];
  }
  EXPECT_NEAR(mass, mass0, 1e-14 * mass0);
  EXPECT_LT((momentum - momentum0).norm(), 1e-13);
  // Every vertex keeps one internal spring to its own S' node, at its rest depth.
  std::vector<int> internal(static_cast<size_t>(n), 0);
  const auto springs = model->springNodes();
  for (size_t s = 0; s < springs.size() / 2; ++s) {
    const int32_t a = springs[2 * s], b = springs[2 * s + 1];
    if (b == a + n) ++internal[static_cast<size_t>(a)];
  }
  for (int32_t i = 0; i < n; ++i) EXPECT_EQ(internal[static_cast<size_t>(i)], 1) << "vertex " << i;
  // At rest: no energy, no force.
  const auto rest = model->restPositions();
  std::vector<double> g(rest.size(), 0.0);
  EXPECT_NEAR(model->addGradient(rest, g).total(), 0.0, 1e-18);
  for (const double value : g) EXPECT_NEAR(value, 0.0, 1e-9);
  const std::vector<double> xNew = blendedRows(edit, x);
  const Geometry surface = model->surface(xNew);
  expectOneFanPerNode(*model, surface, n);
  EXPECT_EQ(analyzeTopology(surface).nonManifoldEdgeCount, 0);
  // The frames: S and S' of each piece, one label per node of both.
  EXPECT_EQ(model->nodePieces().size(), static_cast<size_t>(nodes));
}

// The volume terms of a two-layer model at x: sum over its tets of 1/2 k ((V - V0)/V0)^2,
// k = E |V0| (shellMaterial's E, volume_stiffness 1).
double tetEnergy(const ThickShellModel& model, std::span<const double> x) {
  const auto tets = model.tetNodes();
  const auto rest = model.tetRestVolumes();
  double sum = 0;
  for (size_t t = 0; t < rest.size(); ++t) {
    const auto corner = [&](size_t k) { return row(x, static_cast<size_t>(tets[4 * t + k])); };
    const double c =
        (thick_shell::tetVolume(corner(0), corner(1), corner(2), corner(3)) - rest[t]) / rest[t];
    sum += 0.5 * 1e6 * std::abs(rest[t]) * c * c;
  }
  return sum;
}

// A split hands every prism's tets, springs and areas to the nodes its corners now have: on a
// randomly deformed two-layer sphere the volume terms keep their energy exactly (each prism
// keeps its three tets) and the whole elastic energy at the same positions never rises
// (without re-meshing, whose cuts add springs).
TEST(ThickShellFracture, TwoLayerSplitNeverAddsElasticEnergy) {
  ThickShellFractureDef f;
  f.stretch = 0.05;
  f.maxSplits = 20;
  for (const uint32_t seed : {1U, 2U, 3U, 4U}) {
    auto model = fracturingShell(sphereMesh(0.5, 10), 0.05, f, 2, 2.0);
    std::vector<double> x(model->restPositions().begin(), model->restPositions().end());
    std::mt19937 random(seed);
    std::uniform_real_distribution<double> uniform(-0.03, 0.03);
    for (double& value : x) value += uniform(random);
    const double before = model->energy(x).total(), tetsBefore = tetEnergy(*model, x);
    const InelasticReport report = model->updateInelastic(x, 1e-3);
    ASSERT_TRUE(report.edit.changesNodes());
    const std::vector<double> xNew = blendedRows(report.edit, x);
    const double after = model->energy(xNew).total(), tetsAfter = tetEnergy(*model, xNew);
    std::cout << "seed " << seed << ": elastic energy " << before << " J before, " << after
              << " J after " << report.brokenElements << " splits; tets " << tetsBefore << " J, "
              << tetsAfter << " J\n";
    EXPECT_LE(after, before * (1 + 1e-12)) << "seed " << seed;
    EXPECT_NEAR(tetsAfter, tetsBefore, 1e-12 * tetsBefore) << "seed " << seed;
  }
}

// The energy contract on two-layer shells that have cracked (re-meshed on the sphere, plain
// on the lattice): the rebuilt springs, areas and tets on split and blended nodes.
testing::ContractCase crackedShellCase(const std::string& which) {
  return thickShellContract("cracked_" + which, [which] {
    ThickShellFractureDef f;
    f.stretch = 0.05;
    f.maxSplits = 6;
    f.remesh = which == "sphere";
    const Geometry mesh =
        which == "sphere" ? sphereMesh(0.5, 10) : makeEquilateralLattice(7, 7, 0.1);
    auto model = fracturingShell(mesh, which == "sphere" ? 0.05 : 0.02, f, 2, 2.0);
    std::vector<double> x(model->restPositions().begin(), model->restPositions().end());
    std::mt19937 random(17);
    std::uniform_real_distribution<double> uniform(-0.02, 0.02);
    for (double& value : x) value += uniform(random);
    const InelasticReport report = model->updateInelastic(x, 1e-3);
    EXPECT_TRUE(report.edit.changesNodes());
    return contractSetup(std::move(model));
  });
}

INSTANTIATE_TEST_SUITE_P(ThickShellCracked, ModelContract,
                         ::testing::Values(crackedShellCase("sphere"), crackedShellCase("lattice")),
                         testing::contractCaseName);

int32_t pieceCount(const Geometry& surface) {
  if (surface.pieces.empty()) return 1;
  return *std::max_element(surface.pieces.begin(), surface.pieces.end()) + 1;
}

// Local re-meshing (section 4.2.3, Fig. 5), the notes' test: a lattice of equilateral
// triangles stretched along its 120-degree edges breaks along a plane at 30 degrees to its
// rows, which crosses every other triangle. One crack, extended across the plate: with
// re-meshing every node it makes lies on one plane (to 1e-9) and no angle falls below the
// limit; without, the crack zigzags along the edges, about an edge across. Masses,
// momentum (the new nodes' velocities blended from their sources) and manifoldness hold.
struct RemeshedCrack {
  double spread = 0;         // of the made nodes across the plane, m
  double blendedSpread = 0;  // of those made on a side, m
  double smallestAngle = 0;  // of all triangles at rest, degrees
  int32_t blendedNodes = 0;  // made on a side (two sources)
  int32_t pieces = 0;
  int32_t nodes = 0;
};

RemeshedCrack crackAcrossLattice(bool remesh, double bump = 0) {
  ThickShellFractureDef f;
  f.stretch = 0.1;
  f.maxSplits = 1;
  f.extension = 10;  // across the whole plate
  f.remesh = remesh;
  f.bump = bump;
  const auto shell = fracturingShell(makeEquilateralLattice(15, 15, 0.1), 0.01, f);
  ThickShellModel& model = *shell;
  const auto n0 = static_cast<size_t>(model.nodeCount());
  const std::vector<double> mass0(model.nodeMasses().begin(), model.nodeMasses().end());
  // About 30 % stretch along the 120-degree direction d, x = X + (0.3 + 0.003 g) s d with
  // s = d.(X - c) and g a bump at c: the strain along d peaks at c, so the spring across c
  // (nodes (7, 7) and (8, 7), c a little off its midpoint) is the one most stretched by a
  // margin far above rounding. (A uniform stretch ties every spring along d, and which one
  // breaks first then depends on how the build rounds: the plain cut from a spring on the
  // plate's edge wandered into 12 pieces on an SSE2 build.)
  const Vec3 d(std::cos(2 * std::numbers::pi / 3), std::sin(2 * std::numbers::pi / 3), 0);
  const Vec3 peak(0.725 + 0.004, 7.5 * 0.1 * std::sqrt(3.0) / 2 - 0.003, 0);
  std::vector<double> x(model.restPositions().begin(), model.restPositions().end());
  for (size_t i = 0; i < n0; ++i) {
    const Vec3 offset = row(x, i) - peak;
    const double weight = std::exp(-offset.squaredNorm() / 0.09);
    setRow(x, i, row(x, i) + (0.3 + 0.003 * weight) * d.dot(offset) * d);
  }
  // Any velocities: momentum is a linear function of them.
  std::mt19937 random(5);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<double> v(3 * n0);
  for (double& value : v) value = uniform(random);
  const InelasticReport report = model.updateInelastic(x, 1e-3);
  EXPECT_TRUE(report.edit.changesNodes());
  EXPECT_EQ(report.brokenElements, 1);
  const TopologyEdit& edit = report.edit;
  const auto n = static_cast<size_t>(model.nodeCount());
  EXPECT_EQ(static_cast<size_t>(edit.nodeCount()), n);
  const std::vector<double> xNew = blendedRows(edit, x), vNew = blendedRows(edit, v);
  RemeshedCrack out;
  double low = 1e300, high = -1e300, blendedLow = 1e300, blendedHigh = -1e300;
  for (size_t i = n0; i < n; ++i) {
    // The plane is normal to the stretched 120-degree edges: d in the deformed plate.
    const double across = row(xNew, i).dot(d);
    low = std::min(low, across);
    high = std::max(high, across);
    if (edit.sourceOffsets[i + 1] - edit.sourceOffsets[i] != 2) continue;
    ++out.blendedNodes;
    blendedLow = std::min(blendedLow, across);
    blendedHigh = std::max(blendedHigh, across);
  }
  out.spread = high - low;
  out.blendedSpread = std::max(0.0, blendedHigh - blendedLow);
  out.nodes = static_cast<int32_t>(n);
  const auto mass = model.nodeMasses();
  double total0 = 0, total = 0;
  Vec3 momentum0 = Vec3::Zero(), momentum = Vec3::Zero();
  for (size_t i = 0; i < n0; ++i) {
    total0 += mass0[i];
    momentum0 += mass0[i] * row(v, i);
  }
  for (size_t i = 0; i < n; ++i) {
    total += mass[i];
    momentum += mass[i] * row(vNew, i);
  }
  EXPECT_NEAR(total, total0, 1e-14 * total0);
  EXPECT_LT((momentum - momentum0).norm(), 1e-13);
  const Geometry surface = model.surface(xNew);
  expectOneFanPerNode(model, surface, static_cast<int32_t>(n));
  EXPECT_EQ(analyzeTopology(surface).nonManifoldEdgeCount, 0);
  out.pieces = pieceCount(surface);
  out.smallestAngle = 180;
  const auto rest = model.restPositions();
  const auto tris = surface.triangles;
  for (size_t tri = 0; tri < static_cast<size_t>(model.elementCount()); ++tri) {
    for (size_t k = 0; k < 3; ++k) {
      const Vec3 c = row(rest, static_cast<size_t>(tris[3 * tri + k]));
      const Vec3 p = row(rest, static_cast<size_t>(tris[3 * tri + (k + 1) % 3]));
      const Vec3 q = row(rest, static_cast<size_t>(tris[3 * tri + (k + 2) % 3]));
      const double angle = std::atan2((p - c).cross(q - c).norm(), (p - c).dot(q - c));
      out.smallestAngle = std::min(out.smallestAngle, angle * 180 / std::numbers::pi);
    }
  }
  return out;
}

// Many re-meshed splits on an irregular closed mesh (a sphere shaken hard, ten fracture
// passes): every node keeps mass and one fan, the mesh stays manifold, the total mass and
// momentum stay.
TEST(ThickShellFracture, RemeshedSplitsKeepTheMeshWhole) {
  ThickShellFractureDef f;
  f.stretch = 0.05;
  f.maxSplits = 40;
  f.remesh = true;
  f.remeshMinAngle = 10;
  f.remeshMinFraction = 0.1;
  const auto shell = fracturingShell(sphereMesh(0.5, 12), 0.02, f);
  ThickShellModel& model = *shell;
  std::vector<double> x(model.restPositions().begin(), model.restPositions().end());
  std::vector<double> v(x.size());
  std::mt19937 random(11);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (double& value : v) value = uniform(random);
  const double total = std::accumulate(model.nodeMasses().begin(), model.nodeMasses().end(), 0.0);
  int64_t added = 0;
  for (int pass = 0; pass < 10; ++pass) {
    for (double& value : x) value += 0.01 * uniform(random);  // a fifth of an edge
    const auto n0 = static_cast<size_t>(model.nodeCount());
    Vec3 momentum0 = Vec3::Zero();
    for (size_t i = 0; i < n0; ++i) momentum0 += model.nodeMasses()[i] * row(v, i);
    const InelasticReport report = model.updateInelastic(x, 1e-3);
    if (!report.edit.changesNodes()) continue;
    added += report.edit.elementsAdded;
    const TopologyEdit& edit = report.edit;
    const auto n = static_cast<size_t>(model.nodeCount());
    x = blendedRows(edit, x);
    v = blendedRows(edit, v);
    Vec3 momentum = Vec3::Zero();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_GT(model.nodeMasses()[i], 0) << "node " << i << ", pass " << pass;
      momentum += model.nodeMasses()[i] * row(v, i);
    }
    EXPECT_LT((momentum - momentum0).norm(), 1e-12);
    const Geometry surface = model.surface(x);
    expectOneFanPerNode(model, surface, static_cast<int32_t>(n));
    EXPECT_EQ(analyzeTopology(surface).nonManifoldEdgeCount, 0);
  }
  EXPECT_NEAR(std::accumulate(model.nodeMasses().begin(), model.nodeMasses().end(), 0.0), total,
              1e-12 * total);
  EXPECT_GT(added, 20);  // it cut triangles
  EXPECT_GT(pieceCount(model.surface(x)), 2);
}

TEST(ThickShellFracture, RemeshingCutsAlongThePlane) {
  const RemeshedCrack remeshed = crackAcrossLattice(true);
  const RemeshedCrack plain = crackAcrossLattice(false);
  std::cout << "spread across the plane: re-meshed " << remeshed.spread << " m, its "
            << remeshed.blendedNodes << " cut nodes " << remeshed.blendedSpread << " m, "
            << remeshed.pieces << " pieces; plain " << plain.spread << " m, " << plain.pieces
            << " pieces\n";
  // The nodes made on sides lie on the plane; the copies of nodes it passed within the
  // re-meshing margin of lie off it by what the bump of the stretch moved them (0.2 mm).
  EXPECT_LT(remeshed.blendedSpread, 1e-9);
  EXPECT_LT(remeshed.spread, 0.01 * 0.1);
  EXPECT_GE(remeshed.blendedNodes, 4);
  EXPECT_GE(remeshed.smallestAngle, 20 - 1e-9);
  EXPECT_EQ(remeshed.pieces, 2);
  EXPECT_GT(plain.spread, 0.25 * 0.1);  // a quarter edge off the plane at least
  EXPECT_EQ(plain.blendedNodes, 0);
  EXPECT_EQ(plain.pieces, 2);
  // Bumpy (section 4.2.3): each tip turns the plane by up to 10 degrees; the crack wanders
  // off the first plane, still parts the plate, and the same seed gives the same crack.
  const RemeshedCrack bumpy = crackAcrossLattice(true, 10);
  std::cout << "bumpy: spread " << bumpy.spread << " m, " << bumpy.pieces << " pieces\n";
  EXPECT_GT(bumpy.spread, 0.005);
  EXPECT_GE(bumpy.pieces, 2);
  EXPECT_GE(bumpy.smallestAngle, 20 - 1e-9);
  const RemeshedCrack again = crackAcrossLattice(true, 10);
  EXPECT_EQ(again.nodes, bumpy.nodes);
  EXPECT_EQ(again.spread, bumpy.spread);
}

// A strip body, 1 m x 0.2 m of 21 x 5 nodes, one layer, 1 cm deep, breaking at `fracture`,
// held at x = -0.5 and pulled at x = 0.5 by `pull` m over `seconds`, with internal damping
// `damping` (1/s). The tests break it with thresholds 1 % +- 20 % (scatter), so that it
// breaks at a weakest spring, in coarse mode with crack extension across the width.
// With `lattice`, the strip is a lattice of equilateral triangles (rows along the strip).
// With two layers, S' lies 5 cm deep for the dynamics (f = 5: internal springs as long as
// the edges, as the paper advises).
int32_t addPulledStrip(Simulation& sim, const ThickShellFractureDef& fracture, double pull,
                       double seconds, double damping = 50, bool lattice = false, int layers = 1) {
  BodyDef def;
  def.model = "thick_shell";
  def.material = shellMaterial(0.01);
  def.material.internalDamping = damping;
  ThickShellDef& options = def.options<ThickShellDef>();
  options.layers = layers;
  options.extrusionFactor = layers == 2 ? 5.0 : 1.0;
  options.fracture = fracture;
  PinDef held;
  held.center = {-0.5, 0, 0};
  held.halfExtents = {0.03, 0.15, 0.1};
  PinDef pulled = held;
  pulled.center = {0.5, 0, 0};
  pulled.path = {{0, {0, 0, 0}}, {seconds, {pull, 0, 0}}};
  def.pins = {held, pulled};
  PrimitiveDef strip;
  strip.size = {1.0, 0.2, 1};
  strip.resolution = 20;
  if (!lattice) return sim.addBody(makePrimitive(strip), def);
  Geometry mesh = makeEquilateralLattice(5, 21, 0.05);
  for (size_t i = 0; i < mesh.positions.size() / 3; ++i) {
    mesh.positions[3 * i] -= 0.5125;
    mesh.positions[3 * i + 1] -= 0.0866;
  }
  return sim.addBody(mesh, def);
}

SimulationSettings weightless() {
  SimulationSettings settings;
  settings.gravity = {0, 0, 0};
  return settings;
}

// The pieces once the strip has broken and 0.5 s more have passed (or at the pull's end).
int32_t pulledStripPieces(bool coarse, double pull, double seconds, double damping, uint64_t seed,
                          int32_t* nodes = nullptr, bool remesh = false, int layers = 1) {
  Simulation sim(weightless());
  ThickShellFractureDef f;
  f.remesh = remesh;
  f.stretch = 0.01;
  f.scatter = 0.2;
  f.coarse = coarse;
  f.extension = coarse ? 0.3 : 0;
  f.seed = seed;
  const int32_t body = addPulledStrip(sim, f, pull, seconds, damping, false, layers);
  double t = 0;
  while (t < seconds && pieceCount(sim.surface(body)) == 1) {
    sim.advance(0.05);
    t += 0.05;
  }
  sim.advance(0.5);
  if (nodes != nullptr) *nodes = sim.nodeCount(body);
  return pieceCount(sim.surface(body));
}

TEST(ThickShellFracture, PulledStripBreaksInTwoInCoarseMode) {
  // Quasi-static: pulled 2 cm over 8 s and damped to 2 ms, every seed parts the strip once,
  // with and without re-meshing. [measured] Pulled 4x faster and damped 10x less, the
  // release wave rings in the lattice ahead of its front and breaks a weak spring elsewhere
  // before it has passed (3 to 5 pieces in 5 of 12 seeds).
  std::string counts;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    for (const bool remesh : {false, true}) {
      const int32_t pieces = pulledStripPieces(true, 0.02, 8.0, 500, seed, nullptr, remesh);
      counts += std::to_string(pieces) + (remesh ? " " : "/");
      EXPECT_EQ(pieces, 2) << "seed " << seed << (remesh ? ", re-meshed" : "");
    }
  }
  std::cout << "coarse pieces (plain/re-meshed), seeds 1..12: " << counts << '\n';
  // Fine mode, pulled fast and hardly damped: many cracks start at once.
  EXPECT_GT(pulledStripPieces(false, 0.1, 1.0, 50, 1), 2);
}

// The same with two layers: the split nodes take their S' nodes along, and the strip parts
// once, whole through both surfaces.
TEST(ThickShellFracture, TwoLayerStripBreaksInTwoInCoarseMode) {
  std::string counts;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    int32_t nodes = 0;
    const int32_t pieces = pulledStripPieces(true, 0.02, 8.0, 500, seed, &nodes, seed % 2 == 0, 2);
    counts += std::to_string(pieces) + " ";
    EXPECT_EQ(pieces, 2) << "seed " << seed;
    EXPECT_EQ(nodes % 2, 0);
    EXPECT_GT(nodes, 2 * 21 * 5);
  }
  std::cout << "two-layer coarse pieces, seeds 1..4 (even ones re-meshed): " << counts << '\n';
}

// A saved state holds the split nodes and the cracks: restored, the run goes on the same.
// With re-meshing the state also holds the triangles cut in two and the nodes made on sides.
TEST(ThickShellFracture, RestoredStateContinuesTheSame) {
  for (const int layers : {1, 2}) {
    for (const bool remesh : {false, true}) {
      Simulation sim(weightless());
      ThickShellFractureDef f;
      f.stretch = 0.01;
      f.scatter = 0.3;
      f.remesh = remesh;
      const int32_t body = addPulledStrip(sim, f, 0.1, 1.0, 50, true, layers);
      sim.advance(0.2);
      const int32_t nodesAtSave = sim.nodeCount(body);
      const int64_t trianglesAtSave = sim.elementCount(body);
      const SimulationState saved = sim.saveState();
      sim.advance(0.3);
      const int32_t nodesAfter = sim.nodeCount(body);
      ASSERT_GT(nodesAtSave, layers * 21 * 5);  // it had split before the save
      if (remesh) {
        EXPECT_GT(sim.elementCount(body), 20 * 4 * 2);  // and cut triangles
      }
      const std::vector<double> first(sim.positions(body).begin(), sim.positions(body).end());
      sim.restoreState(saved);
      EXPECT_EQ(sim.nodeCount(body), nodesAtSave);
      EXPECT_EQ(sim.elementCount(body), trianglesAtSave);
      sim.advance(0.3);
      ASSERT_EQ(sim.nodeCount(body), nodesAfter);
      const std::vector<double> second(sim.positions(body).begin(), sim.positions(body).end());
      EXPECT_EQ(first, second) << (remesh ? "re-meshed" : "plain") << ", " << layers << " layers";
    }
  }
}

// Section 4.2: the same frames with one and two threads, two layers, re-meshed, pulled
// fast in fine mode (many splits and cuts per step).
TEST(ThickShellFracture, TwoLayerFractureIsTheSameOnOneAndTwoThreads) {
  const auto run = [](int threads) {
    const ThreadLimit limit(threads);
    Simulation sim(weightless());
    ThickShellFractureDef f;
    f.stretch = 0.01;
    f.scatter = 0.3;
    f.remesh = true;
    const int32_t body = addPulledStrip(sim, f, 0.1, 1.0, 50, true, 2);
    sim.advance(0.3);
    EXPECT_GT(sim.nodeCount(body), 2 * 21 * 5);  // it split
    return std::vector<double>(sim.positions(body).begin(), sim.positions(body).end());
  };
  EXPECT_EQ(run(1), run(2));
}

TEST(ThickShellFracture, SameSeedSamePieces) {
  int32_t a = 0, b = 0;
  const int32_t first = pulledStripPieces(false, 0.05, 2.0, 50, 7, &a);
  EXPECT_EQ(pulledStripPieces(false, 0.05, 2.0, 50, 7, &b), first);
  EXPECT_EQ(a, b);
  EXPECT_GT(a, 21 * 5);  // it split
}

TEST(ThickShell, RejectsMismatchedShell) {
  const Geometry mesh = sphereMesh(0.5, 8);
  ThickShell shell;
  EXPECT_THROW(ThickShellModel(mesh, shell, shellMaterial(0.05), ThickShellDef{}), InputError);
}

}  // namespace
}  // namespace shellsim
