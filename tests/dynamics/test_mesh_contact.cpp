// Mesh contact (gingold2004 section 4.3): exact predicates, the bounding-volume hierarchy,
// the penalty energy's gradient and balance, the exclusions, and runs of stacked and
// folded sheets that never intersect.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/aabb_tree.hpp"
#include "core/predicates.hpp"
#include "dynamics/dynamics_test_util.hpp"
#include "dynamics/mesh_contact.hpp"
#include "dynamics/step_pipeline.hpp"
#include "dynamics/stepper.hpp"
#include "dynamics/world.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

TEST(Predicates, Orient3dIsExactOnDegenerateInputs) {
  // Far from the origin, where the products lose every digit that decides the sign.
  const Vec3 a(1e15, 1e15, 1e15);
  const Vec3 b = a + Vec3(1, 0, 0), c = a + Vec3(0, 1, 0);
  EXPECT_EQ(orient3d(a, b, c, a + Vec3(1, 1, 0)), 0);
  EXPECT_EQ(orient3d(a, b, c, a + Vec3(3, 5, 1)), 1);
  EXPECT_EQ(orient3d(a, b, c, a + Vec3(3, 5, -1)), -1);
  // A point a hair off the plane of three nearly collinear points.
  const Vec3 p(0.1, 0.2, 0.3), q(0.4, 0.5, 0.6), r(0.7, 0.8, 0.9 + 1e-16);
  const Vec3 above = Vec3(0.3, 0.1, 0.2);
  const int s = orient3d(p, q, r, above);
  // Antisymmetry holds exactly, whatever the rounding of the filter would say.
  EXPECT_EQ(orient3d(q, p, r, above), -s);
  EXPECT_EQ(orient3d(p, r, q, above), -s);
  EXPECT_EQ(orient3d(q, r, p, above), s);
  std::mt19937 random(7);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int trial = 0; trial < 2000; ++trial) {
    const Vec3 u(unit(random), unit(random), unit(random));
    const Vec3 v(unit(random), unit(random), unit(random));
    const Vec3 w(unit(random), unit(random), unit(random));
    // On the plane of u, v, w up to rounding: the sign is decided exactly.
    const double sv = unit(random), sw = unit(random);
    const Vec3 d = u + sv * (v - u) + sw * (w - u);
    const int o = orient3d(u, v, w, d);
    ASSERT_EQ(orient3d(v, u, w, d), -o);
    ASSERT_EQ(orient3d(u, v, d, w), -o);
    ASSERT_EQ(orient3d(d, u, v, w), -orient3d(u, d, v, w));
  }
}

// Points of the plane z = x + y with dyadic coordinates spanning 46 bits (their sums
// exact), scaled by powers of two down to where every product underflows and up to where
// it overflows: exactly coplanar, and a nudge of the fourth point by one ulp along z is
// on the side a large offset is on (the determinant is linear in that offset).
TEST(Predicates, Orient3dIsExactAcrossTheExponentRange) {
  std::mt19937 random(11);
  std::uniform_int_distribution<int> small(1, 63), shift(-20, 20);
  for (const int scale : {0, -40, -1000, 400, 900}) {
    int planes = 0;
    for (int trial = 0; trial < 200; ++trial) {
      std::array<Vec3, 4> p;
      for (Vec3& point : p) {
        const double x = std::ldexp(small(random), shift(random) + scale);
        const double y = std::ldexp(small(random), shift(random) + scale);
        point = Vec3(x, y, x + y);
      }
      ASSERT_EQ(orient3d(p[0], p[1], p[2], p[3]), 0) << "scale 2^" << scale;
      const int side = orient3d(p[0], p[1], p[2], p[3] + Vec3(0, 0, std::ldexp(1.0, 30 + scale)));
      if (side == 0) continue;  // the first three collinear: no plane to be on a side of
      ++planes;
      const Vec3 up(p[3].x(), p[3].y(), std::nextafter(p[3].z(), HUGE_VAL));
      const Vec3 down(p[3].x(), p[3].y(), std::nextafter(p[3].z(), -HUGE_VAL));
      ASSERT_EQ(orient3d(p[0], p[1], p[2], up), side) << "scale 2^" << scale;
      ASSERT_EQ(orient3d(p[0], p[1], p[2], down), -side) << "scale 2^" << scale;
      ASSERT_EQ(orient3d(p[1], p[0], p[2], up), -side) << "scale 2^" << scale;
    }
    EXPECT_GT(planes, 150) << "scale 2^" << scale << ": orientations decided";
  }
  const Vec3 inf(HUGE_VAL, 0, 0), o(0, 0, 0), ex(1, 0, 0), ey(0, 1, 0);
  EXPECT_EQ(orient3d(o, ex, ey, inf), 0) << "no orientation for a point at infinity";
}

TEST(Predicates, TrianglePairsIntersectOnlyWhenTheyCross) {
  const Vec3 a0(0, 0, 0), a1(1, 0, 0), a2(0, 1, 0);
  // A triangle piercing the first.
  EXPECT_TRUE(trianglesIntersect(a0, a1, a2, {0.2, 0.2, -0.5}, {0.3, 0.2, 0.5}, {0.2, 0.3, 0.5}));
  // Parallel, 1 mm apart.
  EXPECT_FALSE(trianglesIntersect(a0, a1, a2, {0, 0, 1e-3}, {1, 0, 1e-3}, {0, 1, 1e-3}));
  // A neighbour sharing an edge, folded or flat: touching is not crossing.
  EXPECT_FALSE(trianglesIntersect(a0, a1, a2, a1, a2, {1, 1, 0}));
  EXPECT_FALSE(trianglesIntersect(a0, a1, a2, a1, a2, {1, 1, 0.4}));
  // Touching at one vertex.
  EXPECT_FALSE(trianglesIntersect(a0, a1, a2, {0.2, 0.2, 0}, {0.5, 0.5, 1}, {0.2, 0.6, 1}));
  // Crossing like two links of a chain.
  EXPECT_TRUE(trianglesIntersect(a0, a1, a2, {0.2, -0.5, -0.5}, {0.2, -0.5, 0.5}, {0.2, 0.5, 0}));
}

std::vector<double> randomBoxes(std::mt19937& random, int count, double size) {
  std::uniform_real_distribution<double> where(0, 1), extent(0, size);
  std::vector<double> boxes;
  for (int i = 0; i < count; ++i) {
    double lo[3];
    for (double& l : lo) l = where(random);
    for (const double l : lo) boxes.push_back(l);
    for (const double l : lo) boxes.push_back(l + extent(random));
  }
  return boxes;
}

bool overlap(const std::vector<double>& a, size_t i, const std::vector<double>& b, size_t j) {
  for (size_t k = 0; k < 3; ++k) {
    if (a[6 * i + k] > b[6 * j + 3 + k] || b[6 * j + k] > a[6 * i + 3 + k]) return false;
  }
  return true;
}

TEST(AabbTree, FindsTheSamePairsAsBruteForceAfterBuildAndRefit) {
  std::mt19937 random(3);
  std::vector<double> boxes = randomBoxes(random, 500, 0.15);
  const std::vector<double> others = randomBoxes(random, 300, 0.12);
  AabbTree tree, otherTree;
  tree.build(boxes);
  otherTree.build(others);
  const auto check = [&] {
    std::vector<std::pair<int32_t, int32_t>> self, expected, cross, expectedCross;
    tree.forEachSelfPair([&](int32_t i, int32_t j) { self.emplace_back(i, j); });
    tree.forEachPairWith(otherTree, [&](int32_t i, int32_t j) { cross.emplace_back(i, j); });
    std::sort(self.begin(), self.end());
    std::sort(cross.begin(), cross.end());
    for (size_t i = 0; i < boxes.size() / 6; ++i) {
      for (size_t j = i + 1; j < boxes.size() / 6; ++j) {
        if (overlap(boxes, i, boxes, j))
          expected.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(j));
      }
      for (size_t j = 0; j < others.size() / 6; ++j) {
        if (overlap(boxes, i, others, j))
          expectedCross.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(j));
      }
    }
    EXPECT_GT(expected.size(), 100U);
    EXPECT_EQ(self, expected);
    EXPECT_EQ(cross, expectedCross);
  };
  check();
  // Every box moved: the refit tree (same structure, new bounds) still finds them all.
  std::normal_distribution<double> shift(0, 0.05);
  for (size_t i = 0; i < boxes.size() / 6; ++i) {
    for (size_t k = 0; k < 3; ++k) {
      const double d = shift(random);
      boxes[6 * i + k] += d;
      boxes[6 * i + 3 + k] += d;
    }
  }
  tree.refit(boxes);
  check();
}

// Two small discrete-shell sheets 2 mm apart (touching at 4 mm), the upper one turned and
// jittered so that vertex-face (interior, edge, vertex) and edge-edge contacts all occur.
World facingSheets(bool contact = true) {
  SceneDef scene;
  scene.gravity = {0, 0, 0};
  for (int s = 0; s < 2; ++s) {
    BodyDef body = testing::sheetBody(6);
    body.name = s == 0 ? "lower" : "upper";
    body.model = "discrete_shell";
    body.primitive->size = {0.1, 0.1, 0};
    body.material.thickness = 0.004;
    body.material.youngModulus = 1e6;
    if (s == 1) {
      body.transform.rotationDegrees = {0, 0, 37};
      body.transform.translation = {0.004, -0.003, 0.002};
    }
    scene.bodies.push_back(body);
  }
  scene.contact.enabled = contact;
  World world = buildWorld(scene);
  std::mt19937 random(11);
  std::uniform_real_distribution<double> jitter(-0.0012, 0.0012);
  for (double& x : world.bodies[1].positions) x += jitter(random);
  computeAccelerations(world);
  return world;
}

double contactEnergyAt(World& world) {
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  std::vector<std::span<double>> none(world.bodies.size());
  return addContactGradient(pairs, world.bodies, none);
}

TEST(MeshContact, GradientMatchesFiniteDifferences) {
  World world = facingSheets();
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  ASSERT_GT(pairs.size(), 20U);
  int edgeEdge = 0;
  for (const ContactPair& pair : pairs) edgeEdge += pair.body[1] != pair.body[0] ? 0 : 1;
  EXPECT_GT(edgeEdge, 0) << "no edge-edge contact in the test configuration";
  std::vector<std::vector<double>> gradient;
  std::vector<std::span<double>> spans;
  for (const Body& body : world.bodies) gradient.emplace_back(body.positions.size(), 0.0);
  for (auto& g : gradient) spans.emplace_back(g);
  const double energy = addContactGradient(pairs, world.bodies, spans);
  ASSERT_GT(energy, 0.0);
  double largest = 0;
  for (const auto& g : gradient) {
    for (const double v : g) largest = std::max(largest, std::abs(v));
  }
  const double h = 1e-8;
  double worst = 0;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    for (size_t k = 0; k < world.bodies[b].positions.size(); ++k) {
      double& x = world.bodies[b].positions[k];
      const double saved = x;
      x = saved + h;
      const double up = contactEnergyAt(world);
      x = saved - h;
      const double down = contactEnergyAt(world);
      x = saved;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - gradient[b][k]));
    }
  }
  EXPECT_LT(worst, 1e-5 * largest) << "largest gradient entry " << largest;
}

TEST(MeshContact, ForcesBalanceAndExertNoTorque) {
  World world = facingSheets();
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  std::vector<std::vector<double>> gradient;
  std::vector<std::span<double>> spans;
  for (const Body& body : world.bodies) gradient.emplace_back(body.positions.size(), 0.0);
  for (auto& g : gradient) spans.emplace_back(g);
  (void)addContactGradient(pairs, world.bodies, spans);
  Vec3 force = Vec3::Zero(), torque = Vec3::Zero();
  double scale = 0;
  for (size_t b = 0; b < world.bodies.size(); ++b) {
    for (size_t i = 0; i < gradient[b].size() / 3; ++i) {
      const Vec3 f = -row(gradient[b], i);
      force += f;
      torque += row(world.bodies[b].positions, i).cross(f);
      scale += f.norm();
    }
  }
  ASSERT_GT(scale, 0.0);
  EXPECT_LT(force.norm(), 1e-12 * scale);
  EXPECT_LT(torque.norm(), 1e-12 * scale);
  // The lower sheet is pushed down, the upper one up.
  double lowerZ = 0;
  for (size_t i = 0; i < gradient[0].size() / 3; ++i) lowerZ -= gradient[0][3 * i + 2];
  EXPECT_LT(lowerZ, 0.0);
}

TEST(MeshContact, ASheetDoesNotTouchItsOwnNeighbours) {
  World world = facingSheets();
  world.bodies.pop_back();
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  EXPECT_TRUE(pairs.empty());
  EXPECT_EQ(world.contact.countIntersections(world.bodies), 0);
}

TEST(MeshContact, CountsIntersectionsOfSheetsPushedThroughEachOther) {
  World world = facingSheets();
  EXPECT_EQ(world.contact.countIntersections(world.bodies), 0);
  // Bend the upper sheet's middle through the lower one.
  Body& upper = world.bodies[1];
  for (size_t i = 0; i < upper.positions.size() / 3; ++i) {
    const Vec3 x = row(upper.positions, i);
    if (x.head<2>().norm() < 0.03) upper.positions[3 * i + 2] -= 0.01;
  }
  EXPECT_GT(world.contact.countIntersections(world.bodies), 0);
}

// A strip folded over onto itself, 3 mm above its other half (touching at 4 mm): the two
// halves are far apart in the rest shape, so they repel.
TEST(MeshContact, AStripFoldedOntoItselfRepelsItself) {
  SceneDef scene;
  scene.gravity = {0, 0, -9.81};
  BodyDef strip = testing::sheetBody(20);
  strip.model = "discrete_shell";
  strip.primitive->size = {0.4, 0.05, 0};
  strip.material.thickness = 0.004;
  strip.material.youngModulus = 1e6;
  strip.material.damping = 2;
  scene.bodies.push_back(strip);
  scene.contact.enabled = true;
  World world = buildWorld(scene);
  Body& body = world.bodies[0];
  // Fold about x = 0 with a bend radius of 1.5 mm: x > 0 goes over onto x < 0.
  for (size_t i = 0; i < body.positions.size() / 3; ++i) {
    const double x = body.positions[3 * i];
    if (x > 0) {
      body.positions[3 * i] = -x;
      body.positions[3 * i + 2] = 0.003;
    }
  }
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  EXPECT_GT(pairs.size(), 50U);
  computeAccelerations(world);
  EXPECT_GT(world.contactEnergy, 0.0);
  // Upper layer pushed up, lower layer down (on top of gravity, much weaker here).
  double upward = 0;
  for (size_t i = 0; i < body.positions.size() / 3; ++i) {
    if (body.positions[3 * i + 2] > 0.001) upward += body.accelerations[3 * i + 2];
  }
  EXPECT_GT(upward, 0.0);
}

// A crease folded sharper than the touching distance: the strip is folded flat about the
// column x = h / 2 (h the 2 cm cell), so the cells at x in [h, 2h] lie 2 mm above those at
// [-h, 0], one ring apart in the rest shape (h = 20 mm, over the 4 mm touching distance).
// They repel, and where they are pushed through each other the crossing counts. (Left out
// were once all pairs with nodes within the touching distance plus a rest edge: every
// neighbour one ring away, so a crushed can's creases folded faces through each other.)
TEST(MeshContact, FacesOneRingApartInTheRestShapeCollideInASharpFold) {
  SceneDef scene;
  scene.gravity = {0, 0, 0};
  BodyDef strip = testing::sheetBody(20);
  strip.model = "discrete_shell";
  strip.primitive->size = {0.4, 0.05, 0};
  strip.material.thickness = 0.004;
  scene.bodies.push_back(strip);
  scene.contact.enabled = true;
  const double h = 0.4 / 20;
  const auto fold = [&](double dropBeyond) {
    World world = buildWorld(scene);
    Body& body = world.bodies[0];
    for (size_t i = 0; i < body.positions.size() / 3; ++i) {
      const double x = body.positions[3 * i];
      if (x > 0.5 * h) {
        body.positions[3 * i] = h - x;
        body.positions[3 * i + 2] = x > 1.5 * h ? dropBeyond : 0.002;
      }
    }
    return world;
  };
  World flat = fold(0.002);
  std::vector<ContactPair> pairs;
  flat.contact.findPairs(flat.bodies, 0.0, pairs);
  const std::span<const double> rest = flat.bodies[0].model->contactMesh().restPositions;
  int oneRing = 0;  // a vertex at x = h (rest) against a face of [-h, 0]
  for (const ContactPair& pair : pairs) {
    const double vertexX = rest[3 * static_cast<size_t>(pair.node[0])];
    double faceX = 0;
    for (int k = 1; k < 4; ++k)
      faceX = std::max(faceX, rest[3 * static_cast<size_t>(pair.node[k])]);
    if (std::abs(vertexX - h) < 1e-9 && faceX < 1e-9) ++oneRing;
  }
  EXPECT_GT(oneRing, 0) << pairs.size() << " contacts";
  EXPECT_EQ(flat.contact.countIntersections(flat.bodies), 0);
  // The cells of [h, 2h] now slope from 2 mm above to 2 mm below those of [-h, 0].
  World crossed = fold(-0.002);
  EXPECT_GT(crossed.contact.countIntersections(crossed.bodies), 0);
}

// An edge whose end touched, in the rest shape, one of the two faces at another edge (as a
// crack's cut vertex touches the faces of the other side) still collides with that edge:
// the end's contact with the other face covers the edge, so the edge pair is kept. A roof
// of two faces B and C meeting at a ridge, and a triangle A whose corner v rests on C's far
// corner (left out against C, 8.5 mm from B); A is moved above the ridge, its edge from v
// across the ridge and its corners more than a touching distance from either face when
// the edge meets the ridge, and dropped at 2 m/s. Only the edge pair can stop it: it did
// not while one face left out was enough to leave the pair out (a glass bulb's shards
// crossed that way), and A then passed through the ridge.
TEST(MeshContact, AnEdgeCollidesWithAnEdgeWhoseOtherFaceItsEndTouchedAtRest) {
  const double length = 0.01, a = 0.6 * length;
  const double middle = length / 2;
  const std::array<std::array<double, 3>, 7> corners = {{
      {0, 0, 0},                                      // the ridge, q0
      {length, 0, 0},                                 // and q1
      {middle, -a, -a},                               // B's far corner
      {middle, a, -a},                                // C's far corner
      {middle, a, -a},                                // A: v, at C's far corner
      {middle, a + 0.6 * length, -a},                 // w
      {middle, a + 0.3 * length, -a + 0.4 * length},  // A's third corner
  }};
  Geometry roof;
  for (const auto& corner : corners)
    roof.positions.insert(roof.positions.end(), corner.begin(), corner.end());
  roof.triangles = {0, 1, 2, 1, 0, 3, 4, 5, 6};
  SimulationSettings settings;
  settings.gravity = {0, 0, 0};
  settings.contact.enabled = true;
  Simulation sim(settings);
  BodyDef def;
  def.model = "discrete_shell";
  def.material.thickness = 0.0005;  // touching at 0.5 mm, left out within 1 mm at rest
  def.material.youngModulus = 1e7;
  const int32_t body = sim.addBody(roof, def);
  std::vector<double> x(sim.positions(body).begin(), sim.positions(body).end());
  const double above = 0.002;
  const std::array<std::array<double, 3>, 3> dropped = {{
      {middle, -0.3 * length, above},  // v, over B
      {middle, 0.3 * length, above},   // w, over C
      {middle, 0, above + 0.4 * length},
  }};
  for (size_t k = 0; k < 3; ++k)
    std::copy(dropped[k].begin(), dropped[k].end(), x.begin() + 12 + 3 * k);
  sim.setPositions(body, x);
  std::vector<double> v(x.size(), 0.0);
  for (size_t i = 4; i < 7; ++i) v[3 * i + 2] = -2.0;
  sim.setVelocities(body, v);
  ASSERT_EQ(sim.intersectingTrianglePairs(), 0);
  for (int k = 0; k < 20; ++k) {
    sim.advance(0.0002);
    ASSERT_EQ(sim.intersectingTrianglePairs(), 0) << "at " << sim.time() << " s";
  }
  // A bounced off the ridge: its edge is above it and moving away.
  const std::span<const double> xs = sim.positions(body), vs = sim.velocities(body);
  const double ridge = 0.5 * (xs[2] + xs[5]);
  EXPECT_GT(0.5 * (xs[14] + xs[17]), ridge + 0.0004);
  EXPECT_GT(0.5 * (vs[14] + vs[17]) - 0.5 * (vs[2] + vs[5]), 0.5);
}

// The two-sheet drop: a 20 cm sheet falls 6 cm onto a 40 cm sheet held at two edges.
SceneDef sheetOnSheet(Integrator integrator, bool contact) {
  SceneDef scene = testing::twoSheets(12, 8, 0.16, contact);
  scene.time.integrator = integrator;
  scene.time.frameRate = 30;
  return scene;
}

double meanHeight(const std::vector<double>& x) {
  double sum = 0;
  for (size_t i = 2; i < x.size(); i += 3) sum += x[i];
  return sum / static_cast<double>(x.size() / 3);
}

void expectRestsOnTheLowerSheet(Integrator integrator) {
  Simulation sim(sheetOnSheet(integrator, true));
  MeshContact counter(ContactDef{.enabled = true}, 1.0);
  for (int frame = 0; frame < 12; ++frame) {
    sim.advanceFrames(1);
    const std::span<const double> lower = sim.positions(0), upper = sim.positions(1);
    // Every written frame free of intersections, checked on a copy of the bodies.
    World copy = buildWorld(sheetOnSheet(integrator, true));
    copy.bodies[0].positions.assign(lower.begin(), lower.end());
    copy.bodies[1].positions.assign(upper.begin(), upper.end());
    ASSERT_EQ(counter.countIntersections(copy.bodies), 0) << "frame " << frame;
  }
  // The upper sheet lies on the lower one: above it by about the touching distance.
  const std::span<const double> lower = sim.positions(0), upper = sim.positions(1);
  double lowestGap = 1;
  for (size_t i = 0; i < upper.size() / 3; ++i) {
    double below = -1;  // the lower sheet's height under this node, from its nearest node
    double nearest = 1e9;
    for (size_t j = 0; j < lower.size() / 3; ++j) {
      const double d = std::hypot(upper[3 * i] - lower[3 * j], upper[3 * i + 1] - lower[3 * j + 1]);
      if (d < nearest) {
        nearest = d;
        below = lower[3 * j + 2];
      }
    }
    lowestGap = std::min(lowestGap, upper[3 * i + 2] - below);
  }
  EXPECT_GT(lowestGap, 0.001);
  EXPECT_LT(meanHeight({upper.begin(), upper.end()}), 0.11);  // fell from 0.16 m onto it
}

TEST(MeshContact, ASheetDroppedOnASheetRestsOnItExplicit) {
  expectRestsOnTheLowerSheet(Integrator::kVerlet);
}

TEST(MeshContact, ASheetDroppedOnASheetRestsOnItImplicit) {
  expectRestsOnTheLowerSheet(Integrator::kBackwardEuler);
}

// Contacts are evaluated and intersections counted in parallel: the frames are the same bit
// for bit with 1 and 2 threads.
TEST(MeshContact, TheSameFramesOnOneAndTwoThreads) {
  std::vector<std::vector<double>> runs;
  for (const int threads : {1, 2}) {
    const ThreadLimit limit(threads);
    Simulation sim(sheetOnSheet(Integrator::kVerlet, true));
    sim.advanceFrames(6);
    std::vector<double> x(sim.positions(1).begin(), sim.positions(1).end());
    x.insert(x.end(), sim.positions(0).begin(), sim.positions(0).end());
    runs.push_back(x);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(MeshContact, WithoutContactTheSheetFallsThrough) {
  Simulation sim(sheetOnSheet(Integrator::kBackwardEuler, false));
  sim.advanceFrames(12);
  EXPECT_LT(meanHeight({sim.positions(1).begin(), sim.positions(1).end()}),
            meanHeight({sim.positions(0).begin(), sim.positions(0).end()}) - 0.02);
}

// The contacts the run's MeshContact keeps finding incrementally (trees refit, candidate
// list reused while nodes stay within the skin) are those a fresh one finds from scratch.
// A run that starts with the sheets through each other (they cross along a line) cannot
// undo that by splitting steps: it goes on at its step while contact pushes them apart,
// instead of splitting every step down to the deepest level ([measured] 55,062 rejected
// steps in these two frames before, 15 s; now a few, once the sheets are apart and one
// step would push them through again).
TEST(MeshContact, IntersectionsAtTheStartDoNotSplitEveryStep) {
  SceneDef scene = testing::twoSheets(12, 8, 0.1, true);
  scene.bodies[1].transform.rotationDegrees = {15, 0, 30};  // tilted through the lower sheet
  scene.time.frameRate = 30;
  Simulation sim(scene);
  sim.advanceFrames(2);
  EXPECT_LT(sim.statistics().rejectedSteps, 20);
  EXPECT_GT(sim.statistics().steps, 0);
}

TEST(MeshContact, IncrementalDetectionFindsWhatAFullRebuildFinds) {
  const SceneDef scene = sheetOnSheet(Integrator::kVerlet, true);
  World world = buildWorld(scene);
  computeAccelerations(world);
  TimeIntegrator integrator(scene.time, 0.5 * stableTimeStep(world));
  PhaseTimes times;
  size_t touching = 0;
  for (int frame = 1; frame <= 10; ++frame) {
    integrator.advance(world, 1.0 / 30, frame / 30.0, times);
    MeshContact fresh(scene.contact, stableTimeStep(buildWorld(scene)));
    std::vector<ContactPair> incremental, rebuilt;
    // Within a margin of 5 mm, so that the frames where the sheet is in the air count too.
    world.contact.findPairs(world.bodies, 0.005, incremental);
    fresh.findPairs(world.bodies, 0.005, rebuilt);
    ASSERT_EQ(incremental.size(), rebuilt.size()) << "frame " << frame;
    for (size_t i = 0; i < rebuilt.size(); ++i) {
      for (int k = 0; k < 4; ++k) {
        ASSERT_EQ(incremental[i].node[k], rebuilt[i].node[k]);
        ASSERT_EQ(incremental[i].weight[k], rebuilt[i].weight[k]);
      }
      ASSERT_EQ(incremental[i].stiffness, rebuilt[i].stiffness);
    }
    touching = std::max(touching, rebuilt.size());
  }
  EXPECT_GT(touching, 50U);
}

// Fracture changes the mesh: the trees and lists are rebuilt for the new topology, and the
// two sides of the fresh crack, coincident in the rest shape, do not repel each other.
TEST(MeshContact, FollowsFractureAndLeavesTheCrackSidesAlone) {
  SceneDef scene = testing::pulledInelasticStrip();
  scene.contact.enabled = true;
  World world = buildWorld(scene);
  computeAccelerations(world);
  TimeIntegrator integrator(scene.time, scene.time.timeStep);
  PhaseTimes times;
  const int32_t nodesBefore = world.bodies[0].nodeCount();
  const double stableStep = stableTimeStep(world);
  size_t near = 0;
  for (int frame = 1; frame <= 15; ++frame) {
    integrator.advance(world, 0.02, 0.02 * frame, times);
    ASSERT_EQ(world.contact.countIntersections(world.bodies), 0) << "frame " << frame;
    // The pairs left out for good are found once per topology and kept: after every cut
    // the world's detector finds what a fresh one, built for the cut mesh, finds (within a
    // margin of 5 mm, an edge of the strip, so that faces a few rings apart count).
    MeshContact fresh(scene.contact, stableStep);
    std::vector<ContactPair> kept, rebuilt;
    world.contact.findPairs(world.bodies, 0.005, kept);
    fresh.findPairs(world.bodies, 0.005, rebuilt);
    ASSERT_EQ(kept.size(), rebuilt.size()) << "frame " << frame;
    for (size_t i = 0; i < rebuilt.size(); ++i) {
      ASSERT_EQ(kept[i].node, rebuilt[i].node) << "frame " << frame;
    }
    near = std::max(near, rebuilt.size());
  }
  EXPECT_GT(near, 0U);
  EXPECT_GT(world.bodies[0].nodeCount(), nodesBefore);
  EXPECT_GT(pieceCount(world.bodies[0]), 1);
  std::vector<ContactPair> pairs;
  world.contact.findPairs(world.bodies, 0.0, pairs);
  EXPECT_TRUE(pairs.empty()) << pairs.size() << " contacts in a flat, torn strip";
  EXPECT_EQ(world.contactEnergy, 0.0);
}

// gingold2004 section 4.3, the issue's "no triangle pair of any surface intersects in any
// written frame": the inelastic example scenes run as the command line runs them (the
// public Simulation: its planned step, retries and recomputations), every frame of their
// whole duration counted with exact predicates on the world's own, cut meshes
// (Simulation::intersectingTrianglePairs). Each scene is one test, so ctest runs them side
// by side. What it took (measured scene by scene with a probe first): mesh contact on in the
// three punctures (flaps, and one shard pair at 5 ms, crossed without it; the crater's
// shards crossed in 4 pairs in frame 7 in the ci build on an AMD EPYC, none on the Xeon
// before; with contact none, 96 s instead of 39); in both coarse torn sheets at stiffness 3
// (without budging, two or three sliver pairs crossed from 13 ms without contact and one at
// stiffness 1). Pairs closer than twice the touching distance in the rest shape are left
// out, here as in contact; until 2026-12-01 a whole rest edge more was: the crushed can's
// plastic hinges then folded faces one ring apart through one another (up to 22 pairs), and
// on an AMD EPYC in the ci build two pairs two rings apart crossed in frame 12; with contact
// between those neighbours none does in its 40 frames (this test, the same build). The count
// with the narrower exemption found the fine tear's flaps crossing in frame 13 without
// contact: it has contact on at stiffness 3 now, like the coarse tears. The tube, the eggs
// and the bowl need none.
// The glass bulb crossed in one pair from 4.7 ms (frames 19 to 21, ci build) until
// 2026-12-03: an edge of one side of a crack passed through an edge of the other side with
// no contact between them, the pair left out because the edge's end had touched the
// neighbouring face at rest (AnEdgeCollidesWithAnEdgeWhoseOtherFaceItsEndTouchedAtRest).
// The diving boards joined on 2026-12-03 (mesh contact on at 1, the balls' and floor's own
// stiffness 300): without contact the brittle board's shards crossed from 40 ms; with it at
// 100 us steps Newton kept failing (1,343 rejections in frame 26's 2,143 steps): a 3-node chip
// cut off with two nodes moving at 3 m/s and the third at rest on the floor, stiff and turning
// fast, and the tough board crushed to an indefinite Hessian. Now the brittle board's chips of
// at most 12 nodes are rigid fragments and the steps are 20 us: no step is rejected.
class MeshContactSlow : public ::testing::TestWithParam<const char*> {};

TEST_P(MeshContactSlow, TheInelasticSceneWritesNoFrameWithIntersections) {
  const SceneDef scene =
      loadScene(std::filesystem::path(SHELLSIM_SOURCE_DIR) / "scenes" / GetParam());
  Simulation sim(scene);
  const auto frames = static_cast<int>(std::lround(scene.time.duration * scene.time.frameRate));
  int64_t crossing = 0;
  for (int frame = 1; frame <= frames; ++frame) {
    sim.advanceFrames(1);
    crossing = sim.intersectingTrianglePairs();
    ASSERT_EQ(crossing, 0) << GetParam() << ", frame " << frame;
  }
  int64_t nodes = 0;
  for (int32_t b = 0; b < sim.bodyCount(); ++b) nodes += sim.nodeCount(b);
  std::cout << "[ measured ] " << GetParam() << ": " << nodes << " nodes after " << frames
            << " frames, " << crossing << " crossing pairs, " << sim.statistics().steps
            << " steps\n";
}

INSTANTIATE_TEST_SUITE_P(
    InelasticScenes, MeshContactSlow,
    ::testing::Values("inelastic_sheet_puncture.json", "inelastic_sheet_puncture_crater.json",
                      "inelastic_sheet_puncture_shatter.json", "inelastic_tube_drop.json",
                      "inelastic_sheet_tear.json", "inelastic_sheet_tear_no_budging.json",
                      "inelastic_sheet_tear_fine.json", "inelastic_can_crush.json",
                      "inelastic_egg_drop.json", "inelastic_egg_drop_no_search.json",
                      "inelastic_bowl_shatter.json", "inelastic_bulb_shatter.json",
                      "inelastic_diving_boards.json"),
    [](const ::testing::TestParamInfo<const char*>& param) {
      std::string name = std::filesystem::path(param.param).stem().string();
      std::erase(name, '_');
      return name;
    });

}  // namespace
}  // namespace shellsim
