// Tests of the fiber thin-shell model (wicke2005): the kernel alone, the network, the
// energy contract on real networks, the curvature sign, the stiffness mapping,
// determinism and the stable time step. Every check compares against an independent
// value (finite differences, closed forms, plate theory) with a stated tolerance.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <set>
#include <tuple>

#include "geometry/primitives.hpp"
#include "last_place.hpp"
#include "models/fiber/fiber_kernel.hpp"
#include "models/fiber/fiber_model.hpp"
#include "models/fiber/fiber_network.hpp"
#include "models/fiber_test_nodes.hpp"
#include "models/model_contract.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/parallel.hpp"

namespace shellsim {
namespace {

using fiber::Mat9;
using testing::bunnyNodes;
using testing::gradientMatchesFiniteDifferences;
using testing::gridSheet;
using testing::ModelContract;
using testing::nodesFromMesh;
using testing::perturbed;
using testing::primitiveNodes;
using testing::rubber;
using testing::verletEnergyGrowth;
using testing::vertexAreas;
constexpr double kPi = std::numbers::pi;

// ---------------------------------------------------------------------------------------
// Node sets.

double meanRestLength(const FiberModel& model) {
  double sum = 0;
  for (double l : model.network().restLength) sum += l;
  return sum / static_cast<double>(model.network().restLength.size());
}

// ---------------------------------------------------------------------------------------
// Kernel.

TEST(FiberKernel, SplineInterpolatesTheThreePointsWithContinuousTangentAndZeroEndCurvature) {
  const Vec3 x[3] = {Vec3(0.1, -0.3, 0.2), Vec3(0.5, 0.4, -0.1), Vec3(1.3, 0.2, 0.6)};
  EXPECT_LT((fiber::splinePoint(x, 0.0) - x[0]).norm(), 1e-15);
  EXPECT_LT((fiber::splinePoint(x, 0.5) - x[1]).norm(), 1e-15);
  EXPECT_LT((fiber::splinePoint(x, 1.0) - x[2]).norm(), 1e-15);
  const double d = 1e-7;
  EXPECT_LT((fiber::splinePoint(x, 0.5 - d) - fiber::splinePoint(x, 0.5)).norm(), 1e-6);
  EXPECT_LT((fiber::splineDerivative(x, 0.5 - d) - fiber::splineDerivative(x, 0.5)).norm(), 1e-5);
  // Second derivative at the ends vanishes (natural spline): f'(t) flat near t = 0, 1.
  const Vec3 secondAt0 = (fiber::splineDerivative(x, 1e-4) - fiber::splineDerivative(x, 0)) / 1e-4;
  const Vec3 secondAt1 =
      (fiber::splineDerivative(x, 1) - fiber::splineDerivative(x, 1 - 1e-4)) / 1e-4;
  EXPECT_LT(secondAt0.norm(), 1e-2);
  EXPECT_LT(secondAt1.norm(), 1e-2);
  // ... and it is non-zero at the centre for a bent fiber (the check above can fail).
  const Vec3 secondAtCentre =
      (fiber::splineDerivative(x, 0.5 + 1e-4) - fiber::splineDerivative(x, 0.5 - 1e-4)) / 2e-4;
  EXPECT_GT(secondAtCentre.norm(), 1.0);
}

enum class FiberShape { kRandom, kNearlyStraight, kStronglyBent };

// A fiber of the given kind and a unit normal roughly perpendicular to its chord.
std::tuple<std::array<Vec3, 3>, Vec3> sampleFiber(FiberShape shape, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  const auto random = [&] { return Vec3(u(rng), u(rng), u(rng)); };
  std::array<Vec3, 3> x;
  if (shape == FiberShape::kRandom) {
    x = {random(), random(), random()};
  } else if (shape == FiberShape::kNearlyStraight) {
    x = {Vec3(-1, 0, 0) + 1e-4 * random(), 1e-4 * random(), Vec3(0.9, 0, 0) + 1e-4 * random()};
  } else {
    // Legs opening by ~125 degrees, bent out of the plane as well.
    const double half = 0.5 * (kPi - 125.0 * kPi / 180.0);
    x = {Vec3(-std::cos(half), -std::sin(half), 0.3) + 0.05 * random(), Vec3::Zero(),
         Vec3(std::cos(half), -std::sin(half), 0.35) + 0.05 * random()};
  }
  Vec3 normal;
  const Vec3 chord = (x[2] - x[0]).normalized();
  do {
    normal = (Vec3(0, 0, 1) + 0.5 * random()).normalized();
  } while (std::abs(normal.dot(chord)) > 0.8);
  return {x, normal};
}

// Central differences of value(x) against gradient and Hessian, every coordinate.
template <class Value>
void expectDerivativesMatch(const std::array<Vec3, 3>& x, const Value& value,
                            const Vec3 gradient[3], const Mat9& hessian, double tolerance,
                            const std::string& what) {
  const double step = 1e-6;
  double gradScale = 1e-12, hessScale = 1e-12;
  for (int s = 0; s < 3; ++s) gradScale = std::max(gradScale, gradient[s].cwiseAbs().maxCoeff());
  hessScale = std::max(hessScale, hessian.cwiseAbs().maxCoeff());
  for (int j = 0; j < 9; ++j) {
    std::array<Vec3, 3> plus = x, minus = x;
    plus[static_cast<size_t>(j / 3)][j % 3] += step;
    minus[static_cast<size_t>(j / 3)][j % 3] -= step;
    Vec3 gp[3], gm[3];
    const double numeric = (value(plus.data(), gp) - value(minus.data(), gm)) / (2 * step);
    ASSERT_NEAR(numeric, gradient[j / 3][j % 3], tolerance * gradScale) << what << " d/dx" << j;
    for (int i = 0; i < 9; ++i) {
      const double column = (gp[i / 3][i % 3] - gm[i / 3][i % 3]) / (2 * step);
      ASSERT_NEAR(column, hessian(i, j), tolerance * hessScale)
          << what << " H(" << i << "," << j << ")";
    }
  }
}

class FiberKernelDerivatives : public ::testing::TestWithParam<FiberShape> {};

TEST_P(FiberKernelDerivatives, ArcLengthGradientAndHessianMatchFiniteDifferences) {
  std::mt19937 rng(static_cast<unsigned>(GetParam()) + 10);
  for (int trial = 0; trial < 40; ++trial) {
    const auto [x, normal] = sampleFiber(GetParam(), rng);
    for (int samples : {1, 4, 7}) {
      Vec3 g[3];
      Mat9 h;
      fiber::fiberArcLength(x.data(), samples, g, &h);
      expectDerivativesMatch(
          x, [&](const Vec3* y, Vec3* gy) { return fiber::fiberArcLength(y, samples, gy); }, g, h,
          1e-6, "trial " + std::to_string(trial) + " samples " + std::to_string(samples));
    }
  }
}

TEST(FiberKernel, ArcLengthIsSmoothWhereTheSplineFoldsIntoAHairpin) {
  // A compressed fiber whose first sample has f1'(s_0) = e - a_0 q = 0 exactly. Without
  // the speed smoothing |v| has a kink there: its gradient jumps from -u to +u across v = 0
  // and the finite differences of the gradient (~1/step) disagree with any Hessian.
  const int samples = 4;
  const Vec3 e(0.4, 0.1, 0.05);
  const Vec3 q = e / fiber::sampleWeight(0, samples);
  const std::array<Vec3, 3> x = {Vec3(0.5 * q - e), Vec3::Zero(), Vec3(0.5 * q + e)};
  Vec3 g[3];
  Mat9 h;
  fiber::fiberArcLength(x.data(), samples, g, &h);
  EXPECT_TRUE(h.allFinite());
  expectDerivativesMatch(
      x, [&](const Vec3* y, Vec3* gy) { return fiber::fiberArcLength(y, samples, gy); }, g, h, 1e-5,
      "hairpin");
}

TEST_P(FiberKernelDerivatives, AngleGradientAndHessianMatchFiniteDifferences) {
  std::mt19937 rng(static_cast<unsigned>(GetParam()) + 20);
  for (int trial = 0; trial < 40; ++trial) {
    const auto [x, normal] = sampleFiber(GetParam(), rng);
    Vec3 g[3];
    Mat9 h;
    fiber::fiberTangentAngle(x.data(), normal, g, &h);
    expectDerivativesMatch(
        x, [&](const Vec3* y, Vec3* gy) { return fiber::fiberTangentAngle(y, normal, gy); }, g, h,
        1e-5, "trial " + std::to_string(trial));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FiberKernelDerivatives,
                         ::testing::Values(FiberShape::kRandom, FiberShape::kNearlyStraight,
                                           FiberShape::kStronglyBent));

TEST(FiberKernel, AngleGradientNeedsTheDerivativeOfTheBendingDirection) {
  // b = N x t_c / |N x t_c| moves with the centre tangent. A gradient that holds b fixed
  // differs from the finite difference by far more than the tolerance used above, so the
  // derivative tests can tell the two apart.
  const Vec3 x[3] = {Vec3(-1, 0.3, 0.2), Vec3(0, 0, 0), Vec3(1, 0.2, 0.25)};
  const Vec3 normal = Vec3(0.1, 0.2, 1).normalized();
  Vec3 g[3];
  fiber::fiberTangentAngle(x, normal, g);
  const fiber::Reduced z = fiber::reduce(x[0], x[1], x[2]);
  const Vec3 b = normal.cross(z.e).normalized();
  const auto frozen = [&](const Vec3* y) {
    const fiber::Reduced w = fiber::reduce(y[0], y[1], y[2]);
    const Vec3 t0 = w.e - 0.75 * w.q, t1 = w.e + 0.75 * w.q;
    return std::atan2(t0.cross(t1).dot(b), t0.dot(t1));
  };
  double worst = 0;
  for (int j = 0; j < 9; ++j) {
    Vec3 plus[3] = {x[0], x[1], x[2]}, minus[3] = {x[0], x[1], x[2]};
    plus[j / 3][j % 3] += 1e-6;
    minus[j / 3][j % 3] -= 1e-6;
    worst = std::max(worst, std::abs((frozen(plus) - frozen(minus)) / 2e-6 - g[j / 3][j % 3]));
  }
  EXPECT_GT(worst, 1e-2);
}

// Three points on a circle of radius R at polar angles -phi, 0, phi (centre below p).
std::array<Vec3, 3> circularArc(double radius, double halfAngle) {
  const auto at = [&](double a) {
    return Vec3(radius * std::sin(a), radius * (std::cos(a) - 1.0), 0.0);
  };
  return {at(-halfAngle), at(0), at(halfAngle)};
}

// Arc length of the spline by the composite midpoint rule with many points.
double denseSplineLength(const std::array<Vec3, 3>& x) {
  const int n = 20000;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += fiber::splineDerivative(x.data(), (i + 0.5) / n).norm();
  return sum / n;
}

// Three points on a circle of radius 1 at polar angles -a, 0, b.
std::array<Vec3, 3> unevenArc(double a, double b) {
  const auto at = [](double t) { return Vec3(std::sin(t), std::cos(t) - 1.0, 0.0); };
  return {at(-a), at(0), at(b)};
}

TEST(FiberKernel, MidpointArcLengthIsAccurateAndBeatsTheLeftRuleOnCircularArcs) {
  // Against a dense quadrature of the same spline: the 4-point midpoint rule per piece is
  // within 2e-4 relative for arcs up to 2 x 60 degrees. On an uneven arc (the pieces
  // differ) it is at least 10x more accurate than the left rule of eq. (33)-(34) with the
  // same samples; on symmetric arcs the left rules of the two pieces add up to a
  // trapezoid rule and the two are comparable.
  for (double halfAngle : {0.1, 0.5, 1.0}) {
    const auto x = circularArc(1.0, halfAngle);
    const double dense = denseSplineLength(x);
    EXPECT_NEAR(fiber::fiberArcLength(x.data(), 4), dense, 2e-4 * dense) << halfAngle;
    // The spline is not the circle but close to it: R 2 phi within 0.5% up to phi = 0.5,
    // 2.5% at phi = 1.
    EXPECT_NEAR(fiber::fiberArcLength(x.data(), 4), 2 * halfAngle,
                (halfAngle < 0.6 ? 5e-3 : 2.5e-2) * 2 * halfAngle)
        << halfAngle;
  }
  for (double scale : {0.2, 0.6}) {
    const auto x = unevenArc(scale, 0.4 * scale);
    const double dense = denseSplineLength(x);
    double left = 0;
    for (int i = 0; i < 4; ++i) {
      left += 0.5 *
              (fiber::splineDerivative(x.data(), 0.5 * i / 4.0).norm() +
               fiber::splineDerivative(x.data(), 0.5 + 0.5 * i / 4.0).norm()) /
              4.0;
    }
    const double midpointError = std::abs(fiber::fiberArcLength(x.data(), 4) - dense) / dense;
    const double leftError = std::abs(left - dense) / dense;
    std::cout << "[ measured ] uneven arc " << scale << ": midpoint error " << midpointError
              << ", left-rule error " << leftError << "\n";
    EXPECT_LT(midpointError, 2e-4);
    EXPECT_LT(10 * midpointError, leftError);
  }
  // Straight fibers are measured exactly, up to the speed smoothing: the factor
  // sqrt(1 + eps^2) with equal legs, within eps^2 = 1e-6 with legs 1 : 2.
  const double smoothing = std::sqrt(1 + fiber::kSpeedSmoothing * fiber::kSpeedSmoothing);
  const Vec3 even[3] = {Vec3(0, 0, 0), Vec3(0.6, 0.8, 0), Vec3(1.2, 1.6, 0)};
  EXPECT_NEAR(fiber::fiberArcLength(even, 4), 2 * smoothing, 1e-14);
  const Vec3 straight[3] = {Vec3(0, 0, 0), Vec3(0.3, 0.4, 0), Vec3(0.9, 1.2, 0)};
  EXPECT_NEAR(fiber::fiberArcLength(straight, 4), 1.5, 1.5e-6);
}

TEST(FiberKernel, AngleOfACircularArcIsTheSplinesExactTurningWithTheRightSign) {
  // Symmetric points on a circle: t0 = (R sin phi, 3/2 R (1 - cos phi)) and t1 mirrored, so
  // the spline turns by exactly 2 atan(3/2 tan(phi/2)) (~ 3/4 of the circle's 2 phi).
  for (double halfAngle : {0.05, 0.3, 0.8}) {
    const auto x = circularArc(2.0, halfAngle);
    const double exact = 2 * std::atan(1.5 * std::tan(halfAngle / 2));
    // The arc bends down, away from +y: theta > 0 with N = +y (convex, like a sphere
    // with outward normals) and theta < 0 with N = -y (concave).
    EXPECT_NEAR(fiber::fiberTangentAngle(x.data(), Vec3(0, 1, 0)), exact, 1e-14);
    EXPECT_NEAR(fiber::fiberTangentAngle(x.data(), Vec3(0, -1, 0)), -exact, 1e-14);
    // Tilting N towards the chord leaves b, hence theta, unchanged; tilting it about the
    // chord by tau measures the arc projected onto the normal plane span(chord, N), whose
    // tangents are (t_x, t_y cos tau): theta = 2 atan(tan(exact / 2) cos tau).
    EXPECT_NEAR(fiber::fiberTangentAngle(x.data(), Vec3(0.3, 1, 0).normalized()), exact, 1e-14);
    const double tilt = 0.4;
    const double projected = 2 * std::atan(std::tan(exact / 2) * std::cos(tilt));
    EXPECT_NEAR(fiber::fiberTangentAngle(x.data(), Vec3(0, std::cos(tilt), std::sin(tilt))),
                projected, 1e-12);
  }
  const Vec3 straight[3] = {Vec3(-1, 0, 0), Vec3(0, 0, 0), Vec3(1.2, 0, 0)};
  EXPECT_EQ(fiber::fiberTangentAngle(straight, Vec3(0, 0, 1)), 0.0);
}

// ---------------------------------------------------------------------------------------
// Network.

// Rounding does not choose a grid's fibers (core/tie_grid.hpp): equidistant neighbours and
// exactly opposite pairs are ties, taken by index, so nodes moved by a few units in the last
// place (another build's rounding) keep every fiber.
TEST(FiberNetwork, RoundingDoesNotChooseTheFibersOfAGrid) {
  const FiberNodes nodes = gridSheet(24, 24, 0.0125);
  const FiberNetwork net = buildFiberNetwork(nodes.positions, nodes.normals, {});
  for (const int unitsInTheLastPlace : {1, 4}) {
    std::vector<double> moved = nodes.positions;
    testing::moveByUnitsInTheLastPlace(moved, unitsInTheLastPlace, 2024);
    const FiberNetwork other = buildFiberNetwork(moved, nodes.normals, {});
    EXPECT_EQ(other.centreOffsets, net.centreOffsets) << unitsInTheLastPlace << " ulp";
    EXPECT_EQ(other.fiberNodes, net.fiberNodes) << unitsInTheLastPlace << " ulp";
  }
}

TEST(FiberNetwork, RegularGridGivesFourStraightFibersPerInteriorNodeSortedAndUnique) {
  const FiberNodes nodes = gridSheet(7, 6, 0.1);
  const FiberNetwork net = buildFiberNetwork(nodes.positions, nodes.normals, {});
  const int nx = 7;
  const auto id = [nx](int i, int j) { return j * nx + i; };
  // Interior node (3, 3): four fibers through the axis and diagonal neighbours.
  const int32_t centre = id(3, 3);
  ASSERT_EQ(net.fibersAt(centre), 4);
  std::set<std::pair<int32_t, int32_t>> ends;
  for (int32_t f = net.centreOffsets[centre]; f < net.centreOffsets[centre + 1]; ++f) {
    EXPECT_EQ(net.fiberNodes[3 * f + 1], centre);
    ends.insert({net.fiberNodes[3 * f], net.fiberNodes[3 * f + 2]});
    EXPECT_NEAR(net.restAngle[static_cast<size_t>(f)], 0.0, 1e-15);
  }
  const std::set<std::pair<int32_t, int32_t>> expected = {
      {id(2, 2), id(4, 4)}, {id(3, 2), id(3, 4)}, {id(4, 2), id(2, 4)}, {id(2, 3), id(4, 3)}};
  EXPECT_EQ(ends, expected);
  // Sorted by centre, then ends; first end < second end; no duplicates.
  for (int64_t f = 0; f < net.fiberCount(); ++f) {
    const auto i = static_cast<size_t>(f);
    EXPECT_LT(net.fiberNodes[3 * i], net.fiberNodes[3 * i + 2]);
    if (f > 0) {
      const auto a = std::make_tuple(net.fiberNodes[3 * i - 2], net.fiberNodes[3 * i - 3],
                                     net.fiberNodes[3 * i - 1]);
      const auto b = std::make_tuple(net.fiberNodes[3 * i + 1], net.fiberNodes[3 * i],
                                     net.fiberNodes[3 * i + 2]);
      EXPECT_LT(a, b) << "fiber " << f;
    }
  }
  EXPECT_NEAR(net.restLength[static_cast<size_t>(net.centreOffsets[centre])],
              0.2 * std::sqrt(2.0) * std::sqrt(1 + fiber::kSpeedSmoothing * fiber::kSpeedSmoothing),
              1e-14);
}

TEST(FiberNetwork, ANodeBesideADenseClusterWidensItsNeighbourhoodToCentreTwoFibers) {
  // Node (4, 4) of a 9 x 9 grid (spacing 0.1) with a ring of 10 nodes of radius 8 mm
  // centred 3 cm to its right: its 8 nearest neighbours are all in the ring, within 20
  // degrees of +x, so no two of them open by 120 degrees and it centres no fiber. Widened to
  // 16 neighbours it reaches the grid nodes on its other side.
  const int nx = 9;
  FiberNodes nodes = gridSheet(nx, nx, 0.1);
  const FiberNetwork regular = buildFiberNetwork(nodes.positions, nodes.normals, {});
  EXPECT_EQ(regular.widenedNodeCount, 0);  // an even sampling is left as the paper builds it
  const int32_t centre = 4 * nx + 4;
  for (int i = 0; i < 10; ++i) {
    const double angle = 2 * std::numbers::pi * i / 10;
    nodes.positions.insert(nodes.positions.end(),
                           {0.43 + 0.008 * std::cos(angle), 0.4 + 0.008 * std::sin(angle), 0.0});
    nodes.normals.insert(nodes.normals.end(), {0.0, 0.0, 1.0});
  }
  FiberNetworkParams params;
  params.neighbourCount = 8;
  std::vector<std::string> warnings;
  const FiberNetwork net = buildFiberNetwork(nodes.positions, nodes.normals, params, &warnings);
  EXPECT_GE(net.fibersAt(centre), 2);
  EXPECT_GE(net.widenedNodeCount, 1);
  // Every node but the grid's four corners centres at least 2 fibers; the warning about
  // weak nodes (4 of 91, above 1%) lists exactly the corners.
  for (int32_t j = 0; j < net.nodeCount; ++j) {
    const bool corner = j == 0 || j == nx - 1 || j == nx * (nx - 1) || j == nx * nx - 1;
    if (!corner) {
      EXPECT_GE(net.fibersAt(j), 2) << "node " << j;
    }
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("4 of 91 nodes"), std::string::npos) << warnings[0];
}

TEST(FiberNetwork, CornersGetNoFoldedFibersAndAreReported) {
  // A corner's neighbours all lie in one quadrant: every candidate fiber folds back by
  // more than 60 degrees and is discarded, and the corner is reported.
  const FiberNodes nodes = gridSheet(6, 6, 0.1);
  std::vector<std::string> warnings;
  const FiberNetwork net = buildFiberNetwork(nodes.positions, nodes.normals, {}, &warnings);
  EXPECT_EQ(net.fibersAt(0), 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("node 0"), std::string::npos) << warnings[0];
  // Every fiber opens by >= 120 degrees.
  for (int64_t f = 0; f < net.fiberCount(); ++f) {
    const auto i = static_cast<size_t>(f);
    const auto p = [&](int s) {
      const auto v = static_cast<size_t>(net.fiberNodes[3 * i + static_cast<size_t>(s)]);
      return Vec3(nodes.positions[3 * v], nodes.positions[3 * v + 1], nodes.positions[3 * v + 2]);
    };
    const Vec3 a = p(0) - p(1), b = p(2) - p(1);
    EXPECT_LE(a.dot(b), -0.5 * a.norm() * b.norm() + 1e-12);
  }
}

TEST(FiberNetwork, RejectsBadInputNamingTheNode) {
  FiberNodes nodes = gridSheet(4, 4, 0.1);
  const auto expectError = [](const FiberNodes& bad, const std::string& needle) {
    try {
      FiberModel model(bad, rubber());
      FAIL() << "accepted input that should fail with '" << needle << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  FiberNodes nan = nodes;
  nan.positions[3 * 5 + 1] = std::nan("");
  expectError(nan, "node 5");
  FiberNodes zeroArea = nodes;
  zeroArea.areas[7] = 0;
  expectError(zeroArea, "node 7");
  FiberNodes zeroNormal = nodes;
  zeroNormal.normals[3 * 9] = zeroNormal.normals[3 * 9 + 1] = zeroNormal.normals[3 * 9 + 2] = 0;
  expectError(zeroNormal, "node 9");
  FiberNodes coincident = nodes;
  for (int c = 0; c < 3; ++c) coincident.positions[3 * 6 + c] = coincident.positions[3 * 5 + c];
  expectError(coincident, "nodes 5 and 6");
  FiberNodes tiny;
  tiny.positions = {0, 0, 0, 1, 0, 0};
  tiny.normals = {0, 0, 1, 0, 0, 1};
  tiny.areas = {1, 1};
  expectError(tiny, "at least 3 nodes");
}

// ---------------------------------------------------------------------------------------
// The energy contract on real networks.

FiberNodes contractNodes(const std::string& which) {
  if (which == "bunny" || which == "bunny_k16_anisotropic") return bunnyNodes();
  if (which == "sphere") return primitiveNodes(PrimitiveType::kSphere, 20);
  if (which == "jittered_strip") return gridSheet(24, 5, 0.1, 0.45, 1);
  return primitiveNodes(PrimitiveType::kSheet, 12);
}

// Besides the defaults: 16 neighbours (up to 16 fibers per node, several rows of 4 in the
// force pass's per-fiber loads) with anisotropic fibers (their own stretch weights), and a
// strongly jittered strip five nodes wide, where patches grow by rings (extra rows of the
// force pass; FiberModel.StripHasGrownPatches checks that they do). Since nodes with fewer
// than 2 fibers widen their neighbourhood (fiber_network.hpp), few patches grow: 9 of 120
// here, against 3 of 96 on the milder strip used before.
FiberParams contractParams(const std::string& which) {
  FiberParams params;
  if (which == "bunny_k16_anisotropic") {
    params.neighbourCount = 16;
    params.anisotropy = FiberAnisotropyDef{{1, 0.5, 0}, 3.0};
  }
  if (which == "jittered_strip") params.neighbourCount = 4;
  return params;
}

// The energy contract (model_contract.hpp) on a sheet, a sphere and the bunny, random
// deformations of 5% of the mean fiber length.
//  - Gradient: central differences converge as step^2 (measured on the bunny: relative
//    error 1.1e-4, 1.1e-6, 1.2e-8 at steps 1e-4, 1e-5, 1e-6 of the fiber length, then
//    round-off), so the step is 2e-7 of the fiber length and the tolerance 1e-6.
//  - Net force and torque: the energy is a function of the positions alone (the reference
//    normals included) and invariant under translation and rotation, so both vanish to
//    round-off (relative to sum |g_i| max(1, |x_i|)).
testing::ContractCase fiberCase(const std::string& which) {
  testing::ContractCase c;
  c.name = which;
  c.setup = [which] {
    const FiberNodes n = contractNodes(which);
    auto model = std::make_unique<FiberModel>(n, rubber(), contractParams(which));
    testing::ContractSetup s;
    s.scale = meanRestLength(*model);
    s.model = std::move(model);
    s.rest = n.positions;
    return s;
  };
  c.perturbation = 0.05;
  c.gradientStep = 2e-7;
  c.gradientTolerance = 1e-6;
  c.hessianStep = 1e-6;
  c.hessianTolerance = 1e-6;
  c.forceTolerance = 1e-12;
  c.torqueTolerance = 1e-11;
  c.rigidTolerance = 1e-9;
  c.expectStretching = true;
  c.expectBending = true;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Fiber, ModelContract,
                         ::testing::Values(fiberCase("sheet"), fiberCase("sphere"),
                                           fiberCase("bunny"), fiberCase("bunny_k16_anisotropic"),
                                           fiberCase("jittered_strip")),
                         testing::contractCaseName);

// The batched SIMD pass (fiber_model_eval.cpp) against the scalar reference of eqs. (4)-(8)
// (FiberModel::referenceEnergy), node by node, on every contract network deformed by 5 %
// of the fiber length, isotropic and anisotropic, for Poisson ratios with the per-fiber
// bending term alone (nu <= 1/3: alpha = 0) and with both terms (nu = 0.45: alpha = 0.175).
// Two code paths: they agree to round-off, not bit for bit.
TEST(FiberModel, BatchedEnergiesAgreeWithTheScalarReferenceNodeByNode) {
  for (const std::string which :
       {"sheet", "sphere", "bunny", "bunny_k16_anisotropic", "jittered_strip"}) {
    for (const double poisson : {0.3, 0.45}) {
      MaterialDef material = rubber();
      material.poisson = poisson;
      const FiberNodes nodes = contractNodes(which);
      const FiberModel model(nodes, material, contractParams(which));
      const std::vector<double> x = perturbed(nodes.positions, 0.05 * meanRestLength(model), 7);
      const size_t n = nodes.areas.size();
      std::vector<double> stretching(n), bending(n), refStretching(n), refBending(n);
      model.nodeValues(x, stretching, bending, {});
      const EnergyParts reference = model.referenceEnergy(x, refStretching, refBending);
      const EnergyParts batched = model.energy(x);
      ASSERT_GT(reference.stretching, 0) << which;
      ASSERT_GT(reference.bending, 0) << which;
      EXPECT_NEAR(batched.stretching, reference.stretching, 1e-12 * reference.stretching) << which;
      EXPECT_NEAR(batched.bending, reference.bending, 1e-12 * reference.bending) << which;
      const double largest = std::max(*std::max_element(refStretching.begin(), refStretching.end()),
                                      *std::max_element(refBending.begin(), refBending.end()));
      for (size_t j = 0; j < n; ++j) {
        ASSERT_NEAR(stretching[j], refStretching[j], 1e-12 * largest) << which << " node " << j;
        ASSERT_NEAR(bending[j], refBending[j], 1e-12 * largest) << which << " node " << j;
      }
    }
  }
}

TEST(FiberModel, StripHasGrownPatches) {
  // A patch larger than the node and its fibers' ends grew by rings (fiber_model.hpp,
  // "Reference normals"): on nodes with fibers, whose frame the energy uses, the contract case
  // "jittered_strip" then covers those rows.
  const FiberModel model(contractNodes("jittered_strip"), rubber(),
                         contractParams("jittered_strip"));
  int grown = 0;
  for (int32_t j = 0; j < model.nodeCount(); ++j) {
    const auto fibers = static_cast<size_t>(model.network().fibersAt(j));
    grown += fibers > 0 && model.normalPatch(j).size() > 1 + 2 * fibers ? 1 : 0;
  }
  std::cout << "[ measured ] " << grown << " of " << model.nodeCount()
            << " nodes with fibers have grown patches\n";
  EXPECT_GE(grown, 5);
}

class FiberReferenceNormals : public ::testing::TestWithParam<const char*> {};

TEST_P(FiberReferenceNormals, TurnWithTheBody) {
  // The reference normals, functions of the positions, turn with the body.
  const FiberNodes n = contractNodes(GetParam());
  FiberModel model(n, rubber());
  const auto x = perturbed(n.positions, 0.05 * meanRestLength(model), 3);
  const Eigen::Matrix3d r = Eigen::AngleAxisd(0.7, Vec3(1, 2, 3).normalized()).toRotationMatrix();
  const std::vector<double> before = model.referenceNormals(x);
  std::vector<double> rotated(x.size());
  for (size_t i = 0; i < rotated.size() / 3; ++i) {
    const Vec3 p = r * Vec3(x[3 * i], x[3 * i + 1], x[3 * i + 2]) + Vec3(0.3, -2, 5);
    for (int c = 0; c < 3; ++c) rotated[3 * i + static_cast<size_t>(c)] = p[c];
  }
  const std::vector<double> after = model.referenceNormals(rotated);
  for (size_t i = 0; i < before.size() / 3; ++i) {
    const Vec3 expected = r * Vec3(before[3 * i], before[3 * i + 1], before[3 * i + 2]);
    ASSERT_LT((Vec3(after[3 * i], after[3 * i + 1], after[3 * i + 2]) - expected).norm(), 1e-9)
        << i;
  }
}

TEST_P(FiberReferenceNormals, AgreeWithTheInputNormalsAtRest) {
  // The patch plane of a sampled smooth surface is close to its tangent plane, so at rest
  // the reference normals agree with the input normals on average, and none is flipped
  // (the worst node of the coarse bunny, at an ear's rim, is 60 degrees off: its patch
  // spans the rim).
  const FiberNodes n = contractNodes(GetParam());
  const FiberModel model(n, rubber());
  const std::vector<double> normals = model.referenceNormals(n.positions);
  double worst = 1, mean = 0;
  for (size_t i = 0; i < normals.size() / 3; ++i) {
    const Vec3 given =
        Vec3(n.normals[3 * i], n.normals[3 * i + 1], n.normals[3 * i + 2]).normalized();
    const Vec3 mine(normals[3 * i], normals[3 * i + 1], normals[3 * i + 2]);
    EXPECT_NEAR(mine.norm(), 1.0, 1e-12);
    worst = std::min(worst, mine.dot(given));
    mean += mine.dot(given);
  }
  mean /= static_cast<double>(normals.size() / 3);
  EXPECT_GT(worst, 0.4);
  EXPECT_GT(mean, 0.95);  // measured: 0.966 on the bunny
}

INSTANTIATE_TEST_SUITE_P(Networks, FiberReferenceNormals,
                         ::testing::Values("sheet", "sphere", "bunny"));

TEST(FiberModel, DetectsAWrongGradient) {
  // The contract check must be able to fail: energy from a 1% stiffer model.
  const FiberNodes n = gridSheet(5, 5, 0.1);
  const FiberModel other(n, [] {
    MaterialDef m = rubber();
    m.youngModulus *= 1.01;
    return m;
  }());
  struct Mismatched final : FiberModel {
    Mismatched(const FiberNodes& nodes, const FiberModel& energyModel)
        : FiberModel(nodes, rubber()), energyModel_(energyModel) {}
    using Model::energy;
    EnergyParts energy(std::span<const double> x, ModelWorkspace* workspace) const override {
      (void)workspace;
      return energyModel_.energy(x);
    }
    const FiberModel& energyModel_;
  } broken(n, other);
  EXPECT_FALSE(
      gradientMatchesFiniteDifferences(broken, perturbed(n.positions, 0.005, 5), 1e-7, 1e-5));
}

// ---------------------------------------------------------------------------------------
// Curvature sign.

TEST(FiberModel, MeanAngleIsPositiveOnAConvexSphereNegativeWhenConcaveZeroWhenFlat) {
  FiberNodes sphere = primitiveNodes(PrimitiveType::kSphere, 20);
  const auto meanAngles = [](const FiberNodes& nodes) {
    const FiberModel model(nodes, rubber());
    std::vector<double> h(nodes.areas.size());
    model.nodeValues(nodes.positions, {}, {}, h);
    return h;
  };
  for (double h : meanAngles(sphere)) EXPECT_GT(h, 0.05);
  for (double& v : sphere.normals) v = -v;
  for (double h : meanAngles(sphere)) EXPECT_LT(h, -0.05);
  for (double h : meanAngles(gridSheet(6, 6, 0.1))) EXPECT_EQ(h, 0.0);
}

// ---------------------------------------------------------------------------------------
// Stiffness mapping.

bool interior(int i, int j, int nx, int ny, int margin) {
  return i >= margin && j >= margin && i < nx - margin && j < ny - margin;
}

TEST(FiberModel, EquibiaxialStretchStoresThePlateEnergy) {
  // E h eps^2 / (1 - nu) per unit area. Every node is calibrated on its own fibers, so
  // boundary nodes match too; the tolerance 1e-3 covers the O(eps) = 1e-4 nonlinearity.
  const int nx = 12, ny = 10;
  const FiberNodes n = gridSheet(nx, ny, 0.01);
  const MaterialDef material = rubber();
  FiberModel model(n, material);
  const double eps = 1e-4;
  std::vector<double> x = n.positions;
  for (double& v : x) v *= 1 + eps;
  std::vector<double> stretch(n.areas.size());
  model.nodeValues(x, stretch, {}, {});
  const double density =
      material.youngModulus * material.thickness * eps * eps / (1 - material.poisson);
  double total = 0, area = 0;
  for (size_t j = 0; j < stretch.size(); ++j) {
    if (model.network().fibersAt(static_cast<int32_t>(j)) == 0) continue;  // corners
    EXPECT_NEAR(stretch[j], density * n.areas[j], 1e-3 * density * n.areas[j]) << "node " << j;
    total += stretch[j];
    area += n.areas[j];
  }
  EXPECT_NEAR(model.energy(x).stretching, density * area, 1e-3 * density * area);
}

// Maps a flat grid (z = 0) isometrically onto a cylinder of curvature kappa whose curved
// direction is the unit in-plane vector `across`, bulging towards +z.
std::vector<double> rollUp(const std::vector<double>& flat, double kappa, const Vec3& across) {
  std::vector<double> x(flat.size());
  const double radius = 1 / kappa;
  for (size_t i = 0; i < flat.size() / 3; ++i) {
    const Vec3 p(flat[3 * i], flat[3 * i + 1], 0);
    const double s = p.dot(across) - 0.05;
    const Vec3 along = p - p.dot(across) * across;
    const Vec3 q = along + (0.05 + radius * std::sin(s / radius)) * across +
                   Vec3(0, 0, radius * (1 - std::cos(s / radius)));
    for (int c = 0; c < 3; ++c) x[3 * i + static_cast<size_t>(c)] = q[c];
  }
  return x;
}

// Bending energy of the interior nodes (>= 2 rows from the edge) over D kappa^2 / 2 times
// their area.
double interiorBendingRatio(const FiberNodes& n, int nx, int ny, int neighbours, const Vec3& across,
                            double kappa) {
  const MaterialDef material = rubber();
  FiberParams params;
  params.neighbourCount = neighbours;
  FiberModel model(n, material, params);
  const std::vector<double> x = rollUp(n.positions, kappa, across);
  std::vector<double> bend(n.areas.size());
  model.nodeValues(x, {}, bend, {});
  const double d = material.youngModulus * std::pow(material.thickness, 3) /
                   (12 * (1 - material.poisson * material.poisson));
  double energy = 0, area = 0;
  for (int j = 0; j < ny; ++j) {
    for (int i = 0; i < nx; ++i) {
      if (!interior(i, j, nx, ny, 2)) continue;
      const auto node = static_cast<size_t>(j * nx + i);
      energy += bend[node];
      area += n.areas[node];
    }
  }
  return energy / (0.5 * d * kappa * kappa * area);
}

TEST(FiberModel, CylindricalBendingStoresThePlateEnergyInTheInterior) {
  // D kappa^2 / 2 per unit area on a regular grid, kappa l ~ 0.03: the interior nodes
  // are direction-balanced (C = 0) so the energy must not depend on the cylinder's
  // direction; tolerance 1% (the O((kappa l)^2) and spline-vs-circle terms are ~1e-3).
  const int nx = 14, ny = 12;
  const FiberNodes n = gridSheet(nx, ny, 0.01);
  for (const Vec3& across :
       {Vec3(1, 0, 0), Vec3(0, 1, 0), Vec3(1, 1, 0).normalized(), Vec3(1, 0.3, 0).normalized()}) {
    EXPECT_NEAR(interiorBendingRatio(n, nx, ny, 8, across, 1.0), 1.0, 1e-2) << across.transpose();
  }
}

TEST(FiberModel, BendingEnergyBarelyDependsOnTheNeighbourCount) {
  // Wicke 2005 section 8: more fibers per node do not stiffen the material. On a jittered
  // grid (irregular, as real samplings are) the interior bending energy for k = 6, 8, 12
  // stays within 5% of the plate value and within 6% of each other (measured: 1.039,
  // 0.986, 1.020).
  const int nx = 16, ny = 16;
  const FiberNodes n = gridSheet(nx, ny, 0.01, 0.2, 7);
  std::vector<double> ratios;
  for (int k : {6, 8, 12}) {
    double sum = 0;
    const Vec3 directions[] = {Vec3(1, 0, 0), Vec3(0, 1, 0), Vec3(1, 1, 0).normalized()};
    for (const Vec3& across : directions) sum += interiorBendingRatio(n, nx, ny, k, across, 1.0);
    ratios.push_back(sum / 3);
    std::cout << "[ measured ] k = " << k << ": interior bending energy / plate = " << ratios.back()
              << "\n";
  }
  for (double r : ratios) EXPECT_NEAR(r, 1.0, 0.05);
  EXPECT_LT(*std::max_element(ratios.begin(), ratios.end()) -
                *std::min_element(ratios.begin(), ratios.end()),
            0.06);
}

// Bending energy of every node with fibers over the plate's D/2 [(kxx + kyy)^2 - 2 (1 - nu)
// (kxx kyy - kxy^2)] times its area, for the small height field z = 1/2 (kxx x^2 + 2 kxy x y +
// kyy y^2) about the grid's centre; nodes with fewer than `margin` rows to the edge left out.
double modeRatio(const FiberNodes& n, int nx, int ny, double nu, double kxx, double kyy, double kxy,
                 int margin) {
  MaterialDef material = rubber();
  material.poisson = nu;
  const FiberModel model(n, material);
  std::vector<double> x = n.positions;
  const double cx = 0.5 * (x[0] + x[3 * static_cast<size_t>(nx * ny - 1)]);
  const double cy = 0.5 * (x[1] + x[3 * static_cast<size_t>(nx * ny - 1) + 1]);
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const double dx = x[3 * i] - cx, dy = x[3 * i + 1] - cy;
    x[3 * i + 2] = 0.5 * (kxx * dx * dx + 2 * kxy * dx * dy + kyy * dy * dy);
  }
  std::vector<double> bend(n.areas.size());
  model.nodeValues(x, {}, bend, {});
  const double d = material.youngModulus * std::pow(material.thickness, 3) / (12 * (1 - nu * nu));
  const double density =
      0.5 * d * ((kxx + kyy) * (kxx + kyy) - 2 * (1 - nu) * (kxx * kyy - kxy * kxy));
  double energy = 0, area = 0;
  for (int j = 0; j < ny; ++j) {
    for (int i = 0; i < nx; ++i) {
      if (!interior(i, j, nx, ny, margin)) continue;
      const auto node = static_cast<size_t>(j * nx + i);
      energy += bend[node];
      area += n.areas[node];
    }
  }
  return energy / (density * area);
}

TEST(FiberModel, InteriorBendingHasThePoissonRatioOfTheMaterial) {
  // The blend alpha = (3 nu - 1) / (1 + nu) of the mean-angle and per-fiber terms gives the
  // plate's Poisson ratio in bending for every nu in [0, 1/2): cylinder, sphere (bowl),
  // saddle and twist store the plate's energy, whose ratios to each other depend on nu
  // (bowl / cylinder = 2 (1 + nu), saddle / cylinder = 2 (1 - nu)). The earlier blend
  // alpha = (3 nu - 1) / 2, clamped at 0, bent as nu = 1/3 below it (at nu = 0 the bowl a
  // third too stiff) and as nu = 0.42 at 0.45 (the saddle 6 % too stiff), by the formulas;
  // the test fails with it. Tolerance 1 %.
  const int nx = 14, ny = 12;
  const FiberNodes n = gridSheet(nx, ny, 0.01);
  const double k = 0.5;
  for (const double nu : {0.0, 0.2, 0.3, 0.45}) {
    EXPECT_NEAR(modeRatio(n, nx, ny, nu, k, 0, 0, 2), 1.0, 0.01) << "cylinder, nu " << nu;
    EXPECT_NEAR(modeRatio(n, nx, ny, nu, k, k, 0, 2), 1.0, 0.01) << "bowl, nu " << nu;
    EXPECT_NEAR(modeRatio(n, nx, ny, nu, k, -k, 0, 2), 1.0, 0.01) << "saddle, nu " << nu;
    EXPECT_NEAR(modeRatio(n, nx, ny, nu, 0, 0, k, 2), 1.0, 0.01) << "twist, nu " << nu;
  }
}

TEST(FiberModel, EdgeNodesStoreThePlateEnergyOfBendingAlongTheEdge) {
  // A free edge carries M_nn = 0, so its bending is kappa_tt with kappa_nn = -nu kappa_tt,
  // energy D (1 - nu^2) / 2 kappa_tt^2: the edge nodes (whose fibers leave a gap of more than
  // 3/4 pi) are calibrated on that mode. On a strip 3 and 5 nodes wide rolled along its length
  // (nu = 0), every node of the long edges away from the ends stores D/2 kappa^2 times its
  // area within 1.5 % (measured 0.992-0.997). Calibrated on the direction average, as the
  // interior is, a node whose fibers all run along the edge stores 8/3 of it (the strip's
  // edge nodes, with 5 fibers some of them kinked, stored 1.12 to 1.41 in the variants
  // tried: least-squares fits of the whole form).
  for (const int ny : {3, 5}) {
    const int nx = 22;
    const FiberNodes n = gridSheet(nx, ny, 0.05);
    MaterialDef material = rubber();
    material.poisson = 0;
    const FiberModel model(n, material);
    const double kappa = 2;
    const std::vector<double> x = rollUp(n.positions, kappa, Vec3(1, 0, 0));
    std::vector<double> bend(n.areas.size());
    model.nodeValues(x, {}, bend, {});
    const double d = material.youngModulus * std::pow(material.thickness, 3) / 12;
    for (const int j : {0, ny - 1}) {
      for (int i = 2; i < nx - 2; ++i) {
        const auto node = static_cast<size_t>(j * nx + i);
        EXPECT_NEAR(bend[node] / (0.5 * d * kappa * kappa * n.areas[node]), 1.0, 0.015)
            << "row " << j << ", node " << i << " of a strip " << ny << " wide";
      }
    }
  }
}

TEST(FiberModel, BendingEnergyIsPositiveForEveryPoissonRatio) {
  // With nu < 1/3 the mean-angle term enters with a negative weight (alpha down to -1 at
  // nu = 0); the per-fiber weights' floor keeps every node's energy a positive definite form
  // of its angle changes. Random small deformations of the jittered grid and the bunny.
  for (const std::string which : {"jittered_strip", "bunny"}) {
    MaterialDef material = rubber();
    material.poisson = 0;
    const FiberNodes nodes = contractNodes(which);
    const FiberModel model(nodes, material, contractParams(which));
    for (const unsigned seed : {1u, 2u, 3u}) {
      const std::vector<double> x = perturbed(nodes.positions, 1e-3 * meanRestLength(model), seed);
      std::vector<double> bend(nodes.areas.size());
      model.nodeValues(x, {}, bend, {});
      for (size_t j = 0; j < bend.size(); ++j) ASSERT_GE(bend[j], 0.0) << which << " node " << j;
      EXPECT_GT(model.energy(x).bending, 0.0);
    }
  }
}

TEST(FiberModel, RawStiffnessOverridesAndMasses) {
  const FiberNodes n = gridSheet(5, 5, 0.1);
  MaterialDef material = rubber();
  material.stiffness = 123.0;
  FiberParams params;
  params.bendStiffness = 4.5;
  const FiberModel model(n, material, params);
  for (size_t j = 0; j < n.areas.size(); ++j) {
    if (model.network().fibersAt(static_cast<int32_t>(j)) == 0) continue;
    EXPECT_EQ(model.stretchStiffness()[j], 123.0);
    EXPECT_EQ(model.bendStiffness()[j], 4.5);
    EXPECT_DOUBLE_EQ(model.nodeMasses()[j], material.density * material.thickness * n.areas[j]);
  }
  params.stretchStiffness = 7.0;
  const FiberModel overridden(n, material, params);
  EXPECT_EQ(overridden.stretchStiffness()[12], 7.0);
}

// ---------------------------------------------------------------------------------------
// Determinism.

TEST(FiberModel, GradientIsBitIdenticalWithOneAndTwoThreads) {
  PrimitiveDef sheet;
  sheet.type = PrimitiveType::kSheet;
  sheet.resolution = 60;
  const FiberNodes n = nodesFromMesh(makePrimitive(sheet), 1);
  FiberModel model(n, rubber());
  ASSERT_GT(model.elementCount(), 10000);
  const auto x = perturbed(n.positions, 0.003, 9);
  const auto run = [&](int threads) {
    const ThreadLimit limit(threads);
    std::vector<double> g(x.size(), 0.0);
    const EnergyParts e = model.addGradient(x, g);
    g.push_back(e.stretching);
    g.push_back(e.bending);
    return g;
  };
  const std::vector<double> one = run(1);
  const std::vector<double> two = run(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(double)), 0);
}

// ---------------------------------------------------------------------------------------
// Stable time step.

TEST(FiberModel, StableTimeStepIsStableAndFiveTimesItIsNot) {
  const FiberNodes n = gridSheet(9, 8, 0.02);
  FiberModel model(n, rubber());
  const double dt = model.stableTimeStep();
  ASSERT_TRUE(std::isfinite(dt));
  ASSERT_GT(dt, 0);
  const auto x0 = perturbed(n.positions, 0.002, 11);
  EXPECT_LT(verletEnergyGrowth(model, x0, dt, 3000), 1.2);
  EXPECT_GT(verletEnergyGrowth(model, x0, 5 * dt, 3000), 1e3);

  // Against the exact limit 2 / sqrt(lambda_max(M^-1 K)) at rest from a dense eigen-solve.
  std::vector<Eigen::Triplet<double>> triplets;
  ASSERT_TRUE(model.addHessian(n.positions, triplets));
  const auto dofs = static_cast<Eigen::Index>(n.positions.size());
  Eigen::SparseMatrix<double> k(dofs, dofs);
  k.setFromTriplets(triplets.begin(), triplets.end());
  Eigen::MatrixXd dense = Eigen::MatrixXd(k);
  const auto mass = model.nodeMasses();
  for (Eigen::Index i = 0; i < dofs; ++i) {
    for (Eigen::Index j = 0; j < dofs; ++j) dense(i, j) /= std::sqrt(mass[i / 3] * mass[j / 3]);
  }
  const double exact =
      2 / std::sqrt(Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(dense).eigenvalues().maxCoeff());
  std::cout << "[ measured ] stable step " << dt << " s, exact limit at rest " << exact << " s\n";
  EXPECT_LE(dt, exact);
  EXPECT_GE(dt, 0.5 * exact);
}

TEST(FiberModel, SurfaceIsAPointCloudWithReferenceNormalsOrTheGivenMesh) {
  const FiberNodes n = gridSheet(4, 4, 0.1);
  const FiberModel cloud(n, rubber());
  const Geometry g = cloud.surface(n.positions);
  EXPECT_TRUE(g.isPointCloud());
  EXPECT_EQ(g.normals, cloud.referenceNormals(n.positions));
  const FiberModel mesh(n, rubber(), {}, {0, 1, 5, 0, 5, 4});
  const Geometry m = mesh.surface(n.positions);
  EXPECT_EQ(m.triangleCount(), 2);
  ASSERT_EQ(m.normals.size(), n.positions.size());
  EXPECT_NEAR(m.normals[2], 1.0, 1e-12);
}

TEST(FiberModel, NoFibersBendingTermOutweighsItsNodesByMoreThanTheCap) {
  // w_k = tr Qbar / tr Q_k grows without bound for a fiber that barely senses curvature. Before
  // the cap (|w_k| <= 10, fiber_model.hpp "(b) Bending") the bunny's largest s_k w_k^2 was
  // 6.3e4 with 8 neighbours and 1.0e6 with 12, where it set the stable step (3.26e-5 s against
  // 4.71e-5 s now), and a jittered grid's 6.7e3; a torn poster's speck reached 1.3e22 and blew
  // up (FractureSlow.ThePosterTearsThroughIntoTwoHalvesWithFewSpecks).
  const auto largestWeight = [](const FiberModel& model) {
    const std::span<const double> w = model.fiberBendWeights();
    return *std::max_element(w.begin(), w.end());
  };
  for (const int neighbours : {8, 12}) {
    FiberParams params;
    params.neighbourCount = neighbours;
    const FiberModel bunny(bunnyNodes(), rubber(), params);
    EXPECT_LE(largestWeight(bunny), 100.0 * (1 + 1e-12)) << neighbours << " neighbours";
    if (neighbours == 12) {
      EXPECT_GT(bunny.stableTimeStep(), 4e-5);
    }
  }
  const FiberModel grid(gridSheet(30, 30, 0.1, 0.3, 2), rubber());
  EXPECT_LE(largestWeight(grid), 100.0 * (1 + 1e-12));
  // The regular sheet's weights are the plain ratios, far below the cap.
  const FiberModel sheet(gridSheet(12, 12, 0.1), rubber());
  EXPECT_LT(largestWeight(sheet), 3.0);
}

}  // namespace
}  // namespace shellsim
