// Fiber model beyond elasticity (wicke2005 section 7): crack discs in the network,
// anisotropic fibers, plastic flow of the rest state, save and restore of that state.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <string>

#include "core/byte_stream.hpp"
#include "core/crack.hpp"
#include "core/union_find.hpp"
#include "models/fiber/fiber_model.hpp"
#include "models/fiber/fiber_network.hpp"
#include "models/fiber_test_nodes.hpp"
#include "models/model_contract.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/models/fiber.hpp"

namespace shellsim {
namespace {

using testing::gradientMatchesFiniteDifferences;
using testing::gridSheet;
using testing::hessianMatchesFiniteDifferences;
using testing::perturbed;
using testing::rubber;

Vec3 node(std::span<const double> x, int32_t i) {
  return {x[3 * static_cast<size_t>(i)], x[3 * static_cast<size_t>(i) + 1],
          x[3 * static_cast<size_t>(i) + 2]};
}

// x of a flat grid rolled onto a cylinder of curvature kappa whose axis is along `axis`
// (0: the sheet curves in x, z = kappa x^2 / 2 about the centre; 1: in y).
std::vector<double> rolled(const FiberNodes& nodes, double kappa, int curvedDirection) {
  std::vector<double> x = nodes.positions;
  double centre = 0;
  const size_t n = x.size() / 3;
  for (size_t i = 0; i < n; ++i) centre += x[3 * i + static_cast<size_t>(curvedDirection)];
  centre /= static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) {
    const double s = x[3 * i + static_cast<size_t>(curvedDirection)] - centre;
    const double radius = 1.0 / kappa;
    x[3 * i + static_cast<size_t>(curvedDirection)] = centre + radius * std::sin(s * kappa);
    x[3 * i + 2] = radius * (1.0 - std::cos(s * kappa));
  }
  return x;
}

TEST(FiberCrack, NoFiberCrossesADiscAndFibersAwayFromItAreUnchanged) {
  const double h = 0.05;
  const FiberNodes nodes = gridSheet(11, 11, h);
  FiberNetworkParams params;
  const FiberNetwork intact = buildFiberNetwork(nodes.positions, nodes.normals, params);
  CrackDisc disc;
  disc.centre = node(nodes.positions, 5 * 11 + 5);  // the centre node
  disc.normal = Vec3::UnitX();
  disc.radius = 2.5 * h;
  const std::vector<CrackDisc> cracks{disc};
  const FiberNetwork cut =
      buildFiberNetwork(nodes.positions, nodes.normals, params, nullptr, cracks);
  int64_t crossing = 0;  // intact fibers the disc cuts
  for (int64_t f = 0; f < intact.fiberCount(); ++f) {
    const auto fi = static_cast<size_t>(f);
    const Vec3 p = node(nodes.positions, intact.fiberNodes[3 * fi + 1]);
    crossing += segmentCrossesDisc(p, node(nodes.positions, intact.fiberNodes[3 * fi]), disc) ||
                segmentCrossesDisc(p, node(nodes.positions, intact.fiberNodes[3 * fi + 2]), disc);
  }
  ASSERT_GT(crossing, 10);
  int64_t farFibers = 0;
  for (int64_t f = 0; f < cut.fiberCount(); ++f) {
    const auto fi = static_cast<size_t>(f);
    const Vec3 p1 = node(nodes.positions, cut.fiberNodes[3 * fi]);
    const Vec3 p = node(nodes.positions, cut.fiberNodes[3 * fi + 1]);
    const Vec3 p2 = node(nodes.positions, cut.fiberNodes[3 * fi + 2]);
    EXPECT_FALSE(segmentCrossesDisc(p, p1, disc)) << "fiber " << f;
    EXPECT_FALSE(segmentCrossesDisc(p, p2, disc)) << "fiber " << f;
    if ((p - disc.centre).norm() > 5 * h) ++farFibers;
  }
  // Nodes more than 5 h away keep exactly their fibers (the crack only acts nearby).
  int64_t farIntact = 0;
  for (int64_t f = 0; f < intact.fiberCount(); ++f) {
    const Vec3 p = node(nodes.positions, intact.fiberNodes[3 * static_cast<size_t>(f) + 1]);
    if ((p - disc.centre).norm() > 5 * h) ++farIntact;
  }
  EXPECT_EQ(farFibers, farIntact);
  // The crack's own node keeps fibers on its side (it is on the plane: the + side).
  EXPECT_GT(cut.fibersAt(5 * 11 + 5), 0);
}

// A rebuild with a memo of the last build (FiberNetworkMemo) searches again only around the
// discs that changed; its network must be the one a fresh build gives, bit for bit, whether
// discs are added one by one (the first too), one is taken back (a speck's undo), the list is
// replaced (a state put back) or kept (a rebuild that confines patches to pieces), and
// whichever nodes it kept.
TEST(FiberCrack, RebuildFromAMemoEqualsAFreshBuild) {
  const double h = 0.05;
  const FiberNodes nodes = gridSheet(15, 15, h, 0.2, 7);
  FiberNetworkParams params;
  const auto disc = [&](int nodeIndex, Vec3 normal, double radius) {
    CrackDisc d;
    d.centre = node(nodes.positions, nodeIndex);
    d.normal = normal.normalized();
    d.radius = radius * h;
    return d;
  };
  const std::vector<CrackDisc> all{
      disc(7 * 15 + 7, Vec3::UnitX(), 1.5), disc(3 * 15 + 7, Vec3(1, 1, 0), 1.2),
      disc(11 * 15 + 7, Vec3::UnitY(), 2.5), disc(7 * 15 + 2, Vec3(1, -0.3, 0), 1.0)};
  // The disc lists of successive rebuilds: none, then 1, 2, 2 again, 3, 4 discs, the last
  // taken back, then a different list (first and third), then none again.
  std::vector<std::vector<CrackDisc>> sequence{{}};
  for (size_t k = 1; k <= all.size(); ++k) {
    sequence.emplace_back(all.begin(), all.begin() + k);
    if (k == 2) sequence.push_back(sequence.back());
  }
  sequence.emplace_back(all.begin(), all.begin() + 3);
  sequence.push_back({all[0], all[2]});
  sequence.push_back({});
  FiberNetworkMemo memo;
  int64_t kept = 0;
  for (const std::vector<CrackDisc>& cracks : sequence) {
    FiberNetworkMemo freshMemo;  // a build with a memo searches as one that may meet discs
    const FiberNetwork fresh =
        buildFiberNetwork(nodes.positions, nodes.normals, params, nullptr, cracks, &freshMemo);
    const std::vector<CrackDisc> before = memo.cracks;
    const std::vector<double> reachBefore = memo.reach;
    const FiberNetwork fromMemo =
        buildFiberNetwork(nodes.positions, nodes.normals, params, nullptr, cracks, &memo);
    EXPECT_EQ(fromMemo.fiberNodes, fresh.fiberNodes) << cracks.size() << " discs";
    EXPECT_EQ(fromMemo.centreOffsets, fresh.centreOffsets);
    EXPECT_EQ(fromMemo.restLength, fresh.restLength);
    EXPECT_EQ(fromMemo.restAngle, fresh.restAngle);
    EXPECT_EQ(fromMemo.flags, fresh.flags);
    EXPECT_EQ(fromMemo.incidence.offsets, fresh.incidence.offsets);
    EXPECT_EQ(fromMemo.incidence.entries, fresh.incidence.entries);
    EXPECT_EQ(fromMemo.widenedNodeCount, fresh.widenedNodeCount);
    // The nodes out of every disc's reach by the memo's recorded search radii, which it lets
    // keep their fibers: a disc 1-2.5 spacings wide reaches a few dozen of the 225 nodes.
    if (!cracks.empty() && !reachBefore.empty()) {
      for (size_t c = 0; c < reachBefore.size(); ++c) {
        bool near = false;
        for (const CrackDisc& d : all) {
          near = near || (node(nodes.positions, static_cast<int32_t>(c)) - d.centre).norm() <=
                             reachBefore[c] + d.radius;
        }
        kept += near ? 0 : 1;
      }
    }
  }
  EXPECT_GT(kept, 100) << "the memo kept (almost) nothing";
}

TEST(FiberAnisotropy, SheetStifferAlongTheAxisBendsLessAlongIt) {
  const FiberNodes nodes = gridSheet(13, 13, 0.04, 0.15, 3);
  FiberParams isotropic;
  FiberParams stiffX;
  stiffX.anisotropy = FiberAnisotropyDef{{1, 0, 0}, 4.0};
  const FiberModel plain(nodes, rubber(), isotropic);
  const FiberModel aniso(nodes, rubber(), stiffX);
  const double kappa = 2.0;
  const auto bend = [&](const FiberModel& model, int direction) {
    return model.energy(rolled(nodes, kappa, direction)).bending;
  };
  const double plainRatio = bend(plain, 0) / bend(plain, 1);
  const double anisoRatio = bend(aniso, 0) / bend(aniso, 1);
  EXPECT_NEAR(plainRatio, 1.0, 0.15);
  EXPECT_GT(anisoRatio, 1.7) << "curving along the stiff axis must cost more";
  // Stretching along the axis costs more too, less so: the areal term (A_j - A_j0)^2 of
  // E_s is isotropic (measured 1.30 on a regular grid for ratio 4).
  const FiberNodes regular = gridSheet(13, 13, 0.04);
  const FiberModel anisoRegular(regular, rubber(), stiffX);
  std::vector<double> stretchX = regular.positions, stretchY = regular.positions;
  for (size_t i = 0; i < stretchX.size() / 3; ++i) {
    stretchX[3 * i] *= 1.01;
    stretchY[3 * i + 1] *= 1.01;
  }
  EXPECT_GT(anisoRegular.energy(stretchX).stretching,
            1.2 * anisoRegular.energy(stretchY).stretching);
  // Still the exact gradient of its energy, and force free at rest.
  const std::vector<double> x = perturbed(nodes.positions, 0.004, 11);
  EXPECT_TRUE(gradientMatchesFiniteDifferences(aniso, x, 1e-6, 1e-5));
  EXPECT_NEAR(aniso.energy(nodes.positions).total(), 0.0, 1e-18);
}

TEST(FiberPlasticity, HeldBendFlowsIntoTheRestShapeAndStaysWithoutPlasticity) {
  const FiberNodes nodes = gridSheet(11, 11, 0.04);
  FiberParams plastic;
  plastic.plasticity = FiberPlasticityDef{
      .yieldStrain = 0.05, .yieldAngle = 0.01, .stretchCreep = 50, .bendCreep = 50, .weakening = 0};
  FiberModel soft(nodes, rubber(), plastic);
  FiberModel elastic(nodes, rubber(), FiberParams{});
  const std::vector<double> bent = rolled(nodes, 4.0, 0);
  const double before = soft.energy(bent).bending;
  int64_t yielding = 0;
  for (int i = 0; i < 40; ++i) {
    yielding += soft.updateInelastic(bent, 0.005).yieldingElements;
    EXPECT_EQ(elastic.updateInelastic(bent, 0.005).yieldingElements, 0);
  }
  EXPECT_GT(yielding, 0);
  const double after = soft.energy(bent).bending;
  EXPECT_LT(after, 0.2 * before) << "the rest shape flowed towards the held bend";
  // Unloaded, the flat sheet is no longer the rest shape: half the bend stores less energy
  // than flat, so the shell springs back only part way (the dent stays).
  const std::vector<double> half = rolled(nodes, 2.0, 0);
  EXPECT_LT(soft.energy(half).total(), soft.energy(nodes.positions).total());
  EXPECT_GT(elastic.energy(half).total(), elastic.energy(nodes.positions).total());
  EXPECT_NEAR(elastic.energy(nodes.positions).total(), 0.0, 1e-18);
  // The model stays the exact gradient of its energy with plastic rest values.
  EXPECT_TRUE(gradientMatchesFiniteDifferences(soft, perturbed(half, 0.003, 5), 1e-6, 1e-5));
  EXPECT_TRUE(hessianMatchesFiniteDifferences(soft, perturbed(half, 0.003, 5), 1e-6, 1e-5));
}

// The rate-independent flow: one step of any length puts every yielding fiber on its
// threshold, so the stretched sheet keeps exactly the stress of a stretch of beta_l, and
// unloads to a rest shape stretched by 1.05 / (1 + beta_l). Creep at a stiff shell's explicit
// step (1 us) hardly moves.
TEST(FiberPlasticity, PerfectFlowPutsEveryFiberOnItsThresholdWhateverTheStep) {
  const FiberNodes nodes = gridSheet(11, 11, 0.04);
  const double yieldStrain = 0.01, stretch = 1.05;
  FiberParams perfect;
  perfect.plasticity = FiberPlasticityDef{
      .flow = FiberPlasticFlow::kPerfect, .yieldStrain = yieldStrain, .yieldAngle = 0.5};
  FiberParams creep;
  creep.plasticity =
      FiberPlasticityDef{.yieldStrain = yieldStrain, .yieldAngle = 0.5, .stretchCreep = 50};
  const auto scaled = [&](double factor) {
    std::vector<double> x = nodes.positions;
    for (size_t i = 0; i < x.size() / 3; ++i) {
      x[3 * i] *= factor;
      x[3 * i + 1] *= factor;
    }
    return x;
  };
  const std::vector<double> pulled = scaled(stretch);
  FiberModel shortStep(nodes, rubber(), perfect), longStep(nodes, rubber(), perfect);
  FiberModel creeping(nodes, rubber(), creep);
  const FiberModel elastic(nodes, rubber(), FiberParams{});
  const double before = elastic.energy(pulled).total();
  ASSERT_GT(before, 0);
  EXPECT_GT(shortStep.updateInelastic(pulled, 1e-6).yieldingElements, 0);
  EXPECT_GT(longStep.updateInelastic(pulled, 0.1).yieldingElements, 0);
  creeping.updateInelastic(pulled, 1e-6);
  const double held = shortStep.energy(pulled).total();
  EXPECT_NEAR(longStep.energy(pulled).total(), held, 1e-12 * before);
  EXPECT_GT(creeping.energy(pulled).total(), 0.99 * before);
  // Every term of E_s is (pi/4)^2 (l^2 - l0^2)^2 or its node mean: degree 4 in the lengths, so
  // the held stress is that of the elastic sheet stretched by 1 + beta_l, scaled by
  // (new rest / old rest)^4.
  const double restScale = stretch / (1 + yieldStrain);
  EXPECT_NEAR(held, std::pow(restScale, 4) * elastic.energy(scaled(1 + yieldStrain)).total(),
              1e-9 * held);
  EXPECT_LT(shortStep.energy(scaled(restScale)).total(), 1e-12 * before) << "the new rest shape";
  // A second update at the same shape finds it on the threshold and changes nothing.
  shortStep.updateInelastic(pulled, 1e-6);
  EXPECT_NEAR(shortStep.energy(pulled).total(), held, 1e-9 * held);
  // Bending: held on a cylinder, the angles keep a deviation of beta_theta, so the sheet holds
  // part of its bending energy; released flat, it would spring back part way, not to flat.
  FiberParams perfectBend;
  perfectBend.plasticity = FiberPlasticityDef{
      .flow = FiberPlasticFlow::kPerfect, .yieldStrain = 0.5, .yieldAngle = 0.01};
  FiberModel bender(nodes, rubber(), perfectBend), benderLong(nodes, rubber(), perfectBend);
  const std::vector<double> bent = rolled(nodes, 4.0, 0);
  const double bentBefore = bender.energy(bent).bending;
  EXPECT_GT(bender.updateInelastic(bent, 1e-6).yieldingElements, 0);
  benderLong.updateInelastic(bent, 0.1);
  const double bentHeld = bender.energy(bent).bending;
  EXPECT_NEAR(benderLong.energy(bent).bending, bentHeld, 1e-12 * bentBefore);
  EXPECT_LT(bentHeld, 0.5 * bentBefore);
  EXPECT_GT(bentHeld, 0.0);
  EXPECT_GT(bender.energy(nodes.positions).total(), 0.0) << "flat is no longer the rest shape";
  EXPECT_LT(bender.energy(rolled(nodes, 3.0, 0)).total(), bender.energy(nodes.positions).total());
  // Still the exact gradient of its energy.
  EXPECT_TRUE(gradientMatchesFiniteDifferences(bender, perturbed(bent, 0.003, 7), 1e-6, 1e-5));
}

TEST(FiberFracture, OverStretchedFibersBreakFormOneCrackPerStepAndStateRoundTrips) {
  const double h = 0.04;
  const FiberNodes nodes = gridSheet(11, 11, h);
  FiberParams params;
  params.fracture = FiberFractureDef{
      .stretchLimit = 1.05, .bendLimit = 10.0, .brokenRatio = 0.2, .cooldownSteps = 0};
  FiberModel model(nodes, rubber(), params);
  const ModelState intact = model.state();
  const int64_t fibersBefore = model.elementCount();
  // Stretch the right half of the sheet away: the column of fibers across x = 5 h - h / 2
  // is pulled by 30 %, everything else rigidly moved.
  std::vector<double> x = nodes.positions;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    if (x[3 * i] > 5.5 * h) x[3 * i] += 0.3 * h;
  }
  int32_t cracks = 0;
  for (int step = 0; step < 30; ++step) {
    const InelasticReport report = model.updateInelastic(x, 1e-3);
    EXPECT_LE(static_cast<int32_t>(report.edit.cuts.size()), 1) << "one crack per step at most";
    cracks += static_cast<int32_t>(report.edit.cuts.size());
  }
  EXPECT_GT(cracks, 0);
  EXPECT_EQ(static_cast<int32_t>(model.cracks().size()), cracks);
  EXPECT_GT(model.topologyVersion(), 0u);
  std::vector<int32_t> pieces = model.nodePieces();
  EXPECT_EQ(*std::max_element(pieces.begin(), pieces.end()), 1) << "two pieces";
  EXPECT_NE(pieces[0], pieces[10]) << "left and right edge nodes are separated";
  // The batched pass agrees with the scalar reference of eqs. (4)-(8) on the torn network
  // (broken fibers, fibers cut by cracks, stiffness scaled by the surviving share).
  {
    const std::vector<double> probe = perturbed(x, 0.002, 5);
    const EnergyParts reference = model.referenceEnergy(probe);
    const EnergyParts batched = model.energy(probe);
    EXPECT_NEAR(batched.stretching, reference.stretching, 1e-12 * reference.total());
    EXPECT_NEAR(batched.bending, reference.bending, 1e-12 * reference.total());
  }
  // The torn model is still an exact gradient of its energy.
  EXPECT_TRUE(gradientMatchesFiniteDifferences(model, perturbed(x, 0.002, 3), 1e-6, 1e-5));
  EXPECT_TRUE(hessianMatchesFiniteDifferences(model, perturbed(x, 0.002, 3), 1e-6, 1e-5));
  // Written to bytes (a checkpoint) and read into a fresh model, the torn state gives the
  // same energy and gradient, bit for bit.
  {
    ByteWriter out;
    model.state().write(out);
    FiberModel fresh(nodes, rubber(), params);
    ByteReader in(out.bytes(), "test");
    fresh.setState(ModelState::read(in));
    EXPECT_TRUE(in.atEnd());
    EXPECT_EQ(fresh.elementCount(), model.elementCount());
    const std::vector<double> probe = perturbed(x, 0.002, 4);
    std::vector<double> g1(probe.size(), 0.0), g2(probe.size(), 0.0);
    const EnergyParts e1 = model.addGradient(probe, g1), e2 = fresh.addGradient(probe, g2);
    EXPECT_EQ(e1.total(), e2.total());
    EXPECT_EQ(g1, g2);
    // A state of another node count does not fit, and says so.
    FiberModel smaller(gridSheet(9, 9, h), rubber(), params);
    ByteReader again(out.bytes(), "test");
    const ModelState foreign = ModelState::read(again);
    const uint64_t smallerVersion = smaller.topologyVersion();
    EXPECT_THROW(smaller.setState(foreign), InputError);
    // ... and leaves the model as it was: intact, force free at rest.
    EXPECT_TRUE(smaller.cracks().empty());
    EXPECT_EQ(smaller.state().fields().size(), intact.fields().size());
    EXPECT_GE(smaller.topologyVersion(), smallerVersion);
    EXPECT_NEAR(smaller.energy(gridSheet(9, 9, h).positions).total(), 0.0, 1e-18);
    // Nor one of fewer nodes, whose per-node piece labels (patch_pieces: the torn sheet's
    // patches are confined to its two pieces) would leave nodes unlabelled.
    FiberModel larger(gridSheet(13, 13, h), rubber(), params);
    try {
      larger.setState(foreign);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("patch_pieces"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(larger.cracks().empty());
  }
  // Restoring the intact state rebuilds the intact network.
  model.setState(intact);
  EXPECT_EQ(model.elementCount(), fibersBefore);
  EXPECT_TRUE(model.cracks().empty());
  pieces = model.nodePieces();
  EXPECT_EQ(*std::max_element(pieces.begin(), pieces.end()), 0);
  EXPECT_NEAR(model.energy(nodes.positions).total(), 0.0, 1e-18);
}

// nodePieces keeps its last labels while the fibers that broke since leave their nodes linked
// (fiber_model.hpp, PiecesMemo); at every step of a tear they must be the components of the
// active fibers' segments, as a union-find over the network finds them: in a sheet pulled
// apart slowly (fibers break at many steps, held nodes keep it in one piece), in one pulled
// apart at once (cracks part it in two) and in a tube pulled apart along its axis, whose
// breaks alone part it (every node keeps its fibers around the tube, so none seeds a crack).
TEST(FiberFracture, PiecesFollowTheActiveFibersThroughATear) {
  const double h = 0.04;
  const FiberNodes sheet = gridSheet(13, 13, h, 0.2, 11);
  constexpr int kAround = 24;
  FiberNodes tube = gridSheet(kAround, 13, h);  // rolled up: x around, y along the axis
  const double radius = kAround * h / (2 * std::numbers::pi);
  for (size_t i = 0; i < tube.areas.size(); ++i) {
    const double angle = tube.positions[3 * i] / radius;
    tube.positions[3 * i] = radius * std::cos(angle);
    tube.positions[3 * i + 2] = radius * std::sin(angle);
    tube.normals[3 * i] = std::cos(angle);
    tube.normals[3 * i + 2] = std::sin(angle);
    tube.areas[i] = h * h;
  }
  enum class Pull { kSlowly, kAtOnce, kTubeAtOnce };
  for (const Pull pull : {Pull::kSlowly, Pull::kAtOnce, Pull::kTubeAtOnce}) {
    FiberParams params;
    params.fracture = FiberFractureDef{.stretchLimit = pull == Pull::kSlowly ? 1.08 : 1.05,
                                       .bendLimit = 10.0,
                                       .brokenRatio = pull == Pull::kSlowly ? 0.3 : 0.2,
                                       .cooldownSteps = pull == Pull::kSlowly ? 2 : 0};
    if (pull == Pull::kTubeAtOnce) params.fracture->brokenRatio = 1.0;
    const FiberNodes& nodes = pull == Pull::kTubeAtOnce ? tube : sheet;
    FiberModel model(nodes, rubber(), params);
    const auto referencePieces = [&] {
      const FiberNetwork& net = model.network();
      UnionFind pieces(static_cast<size_t>(net.nodeCount));
      for (size_t f = 0; f < net.flags.size(); ++f) {
        if ((net.flags[f] & kFiberActive) == 0) continue;
        pieces.unite(net.fiberNodes[3 * f], net.fiberNodes[3 * f + 1]);
        pieces.unite(net.fiberNodes[3 * f + 1], net.fiberNodes[3 * f + 2]);
      }
      return pieces.labels();
    };
    ASSERT_EQ(model.nodePieces(), referencePieces());
    int stepsWithBreaks = 0;
    for (int step = 0; step < 60; ++step) {
      std::vector<double> x = nodes.positions;
      const double shift = pull == Pull::kSlowly ? 0.01 * h * step : 0.3 * h;
      for (size_t i = 0; i < x.size() / 3; ++i) {
        if (pull == Pull::kTubeAtOnce && x[3 * i + 1] > 6.5 * h) x[3 * i + 1] += shift;
        if (pull != Pull::kTubeAtOnce && x[3 * i] > 6.5 * h) x[3 * i] += shift;
      }
      const InelasticReport report = model.updateInelastic(x, 1e-3);
      stepsWithBreaks += report.brokenElements > 0 ? 1 : 0;
      ASSERT_EQ(model.nodePieces(), referencePieces()) << "step " << step;
    }
    const std::vector<int32_t> pieces = model.nodePieces();
    const int32_t last = *std::max_element(pieces.begin(), pieces.end());
    if (pull == Pull::kSlowly) {
      EXPECT_GT(stepsWithBreaks, 20);
      EXPECT_EQ(last, 0);
    } else {
      EXPECT_EQ(last, 1) << "two pieces";
    }
    if (pull == Pull::kTubeAtOnce) {
      EXPECT_TRUE(model.cracks().empty());
    }
  }
}

TEST(FiberFracture, DelayLetsBriefOverloadsPassAndBreaksUnderSustainedOnes) {
  const double h = 0.04;
  const FiberNodes nodes = gridSheet(11, 11, h);
  FiberParams params;
  params.fracture = FiberFractureDef{.stretchLimit = 1.05,
                                     .bendLimit = 10.0,
                                     .brokenRatio = 0.2,
                                     .cooldownSteps = 0,
                                     .delay = 0.0095};
  FiberModel model(nodes, rubber(), params);
  std::vector<double> stretched = nodes.positions;
  for (size_t i = 0; i < stretched.size() / 3; ++i) {
    if (stretched[3 * i] > 5.5 * h) stretched[3 * i] += 0.3 * h;  // 30 % across the middle
  }
  const double dt = 1e-3;
  const auto brokenAfter = [&](int overSteps, int underSteps, int repeats) {
    int64_t broken = 0;
    for (int r = 0; r < repeats; ++r) {
      for (int s = 0; s < overSteps; ++s)
        broken += model.updateInelastic(stretched, dt).brokenElements;
      for (int s = 0; s < underSteps; ++s)
        broken += model.updateInelastic(nodes.positions, dt).brokenElements;
    }
    return broken;
  };
  // An overload of 9 ms, then as long below, ten times over: the net overload time never
  // reaches the 9.5 ms delay, so nothing breaks.
  EXPECT_EQ(brokenAfter(9, 9, 10), 0);
  // Sustained: the fibers across the middle break on the tenth step (10 ms), not the ninth.
  EXPECT_EQ(brokenAfter(9, 0, 1), 0);
  EXPECT_GT(brokenAfter(1, 0, 1), 0);
  // Without a delay they break at once.
  params.fracture->delay = 0;
  FiberModel immediate(nodes, rubber(), params);
  EXPECT_GT(immediate.updateInelastic(stretched, dt).brokenElements, 0);
}

// A jittered sheet stretched by 8 % along d, 30 degrees off its rows, with a weak band across
// the middle: every crack disc with crack_normal principal faces d within 3 degrees (the
// fit of the node's fiber stretches; 0.96 measured), while the broken fibers' tangents (the
// paper's normals) scatter by their spacing in angle (12 degrees measured).
TEST(FiberFracture, PrincipalCrackNormalsFaceThePull) {
  const double h = 0.04;
  const FiberNodes nodes = gridSheet(13, 13, h, 0.25, 3);
  const Vec3 pull(std::cos(std::numbers::pi / 6), std::sin(std::numbers::pi / 6), 0);
  std::vector<double> x = nodes.positions;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const Vec3 p = node(nodes.positions, static_cast<int32_t>(i));
    const Vec3 moved = p + 0.08 * p.dot(pull) * pull;
    for (size_t c = 0; c < 3; ++c) x[3 * i + c] = moved[static_cast<int>(c)];
  }
  const double middle = 6 * h;  // the sheet's centre column
  const auto worstAngle = [&](FiberCrackNormal normal, int32_t& count) {
    FiberParams params;
    params.fracture = FiberFractureDef{.stretchLimit = 1.04,
                                       .bendLimit = 10.0,
                                       .brokenRatio = 0.2,
                                       .cooldownSteps = 0,
                                       .crackNormal = normal};
    params.nodeFractureScale.assign(nodes.areas.size(), 10.0);
    for (size_t i = 0; i < nodes.areas.size(); ++i) {
      if (std::abs(nodes.positions[3 * i] - middle) < 1.5 * h) params.nodeFractureScale[i] = 1.0;
    }
    FiberModel model(nodes, rubber(), params);
    for (int step = 0; step < 8; ++step) (void)model.updateInelastic(x, 1e-3);
    double worst = 0;
    for (const CrackDisc& disc : model.cracks()) {
      worst = std::max(worst, std::acos(std::min(1.0, std::abs(disc.normal.dot(pull)))));
    }
    count = static_cast<int32_t>(model.cracks().size());
    return worst * 180 / std::numbers::pi;
  };
  int32_t principalCracks = 0, fiberCracks = 0;
  const double principal = worstAngle(FiberCrackNormal::kPrincipal, principalCracks);
  const double fiber = worstAngle(FiberCrackNormal::kFiber, fiberCracks);
  std::cout << "[ measured ] largest angle between a crack normal and the pull: principal "
            << principal << " deg (" << principalCracks << " cracks), fiber " << fiber << " deg ("
            << fiberCracks << " cracks)\n";
  ASSERT_GE(principalCracks, 4);
  ASSERT_GE(fiberCracks, 4);
  EXPECT_LT(principal, 3.0) << principalCracks << " cracks";
  EXPECT_GT(fiber, 5.0) << fiberCracks << " cracks";
}

// Under bending the fibers' stretches say nothing of a direction; with crack_normal principal
// a crack broken by bending faces across the fold (the direction the normals turn in, or
// across the line from a node that cracked already), not along the most urgent fiber, which
// on a sampling with diagonal fibers is often a diagonal one. A jittered sheet rolled about y
// until its fibers break by bending (stretch limit far away): the principal discs face x, at
// the sheet's corners too.
TEST(FiberFracture, PrincipalCrackNormalsFaceAcrossTheFold) {
  const double h = 0.04;
  const FiberNodes nodes = gridSheet(11, 11, h, 0.2, 5);
  const std::vector<double> bent = rolled(nodes, 6.0, 0);
  const auto worstAngle = [&](FiberCrackNormal normal, size_t& count) {
    FiberParams params;
    params.fracture = FiberFractureDef{.stretchLimit = 1.5,
                                       .bendLimit = 0.05,
                                       .brokenRatio = 0.2,
                                       .cooldownSteps = 0,
                                       .crackNormal = normal};
    FiberModel model(nodes, rubber(), params);
    for (int step = 0; step < 6; ++step) (void)model.updateInelastic(bent, 1e-3);
    double worst = 0;
    for (const CrackDisc& disc : model.cracks()) {
      worst = std::max(
          worst, std::acos(std::min(1.0, std::abs(disc.normal.x()))) * 180 / std::numbers::pi);
    }
    count = model.cracks().size();
    return worst;
  };
  size_t principalCracks = 0, fiberCracks = 0;
  const double principal = worstAngle(FiberCrackNormal::kPrincipal, principalCracks);
  const double fiber = worstAngle(FiberCrackNormal::kFiber, fiberCracks);
  std::cout << "[ measured ] largest angle between a crack normal and the fold's normal: "
            << "principal " << principal << " deg (" << principalCracks << " cracks), fiber "
            << fiber << " deg (" << fiberCracks << " cracks)\n";
  ASSERT_GE(principalCracks, 4U);
  ASSERT_GE(fiberCracks, 4U);
  // Measured 0.18 deg (fiber 0.96); 33 deg at the sheet's corners when the direction came
  // from how much the neighbours' normals turned.
  EXPECT_LT(principal, 2.0);
}

TEST(FiberFracture, WeakRegionBreaksFirst) {
  const double h = 0.04;
  const FiberNodes nodes = gridSheet(11, 11, h);
  FiberParams params;
  params.fracture = FiberFractureDef{
      .stretchLimit = 1.2, .bendLimit = 10.0, .brokenRatio = 0.2, .cooldownSteps = 0};
  params.nodeFractureScale.assign(nodes.areas.size(), 1.0);
  for (size_t i = 0; i < nodes.areas.size(); ++i) {
    if (nodes.positions[3 * i + 1] > 8.5 * h) params.nodeFractureScale[i] = 0.2;  // top rows
  }
  FiberModel model(nodes, rubber(), params);
  std::vector<double> x = nodes.positions;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    if (x[3 * i] > 5.5 * h) x[3 * i] += 0.2 * h;  // 20 % on the middle column: below 1.2
  }
  int32_t cracks = 0;
  for (int step = 0; step < 5; ++step)
    cracks += static_cast<int32_t>(model.updateInelastic(x, 1e-3).edit.cuts.size());
  ASSERT_GT(cracks, 0);
  for (const CrackDisc& disc : model.cracks()) {
    EXPECT_GT(disc.centre.y(), 8.5 * h) << "cracks start in the weak region only";
  }
}

// The smaller over the larger spread of node j's normal patch at rest: the two largest
// eigenvalues of its rest positions' covariance (the patch's least-squares plane).
double patchSpread(const FiberModel& model, int32_t j) {
  const std::span<const int32_t> patch = model.normalPatch(j);
  const std::span<const double> rest = model.restPositions();
  Vec3 centroid = Vec3::Zero();
  for (const int32_t i : patch) centroid += node(rest, i) / static_cast<double>(patch.size());
  Eigen::Matrix3d covariance = Eigen::Matrix3d::Zero();
  for (const int32_t i : patch) {
    const Vec3 d = node(rest, i) - centroid;
    covariance += d * d.transpose();
  }
  const Eigen::Vector3d eig =
      Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d>(covariance, Eigen::EigenvaluesOnly)
          .eigenvalues();
  return eig[1] / eig[2];
}

// A jittered sheet shaken apart (every node moved at random by up to 0.6 of the spacing,
// every fiber over a 5 % stretch breaks) cracks into small pieces. A node whose normal patch
// is (nearly) a line has no plane to orient its fibers by; its normal swings with the slightest
// motion across that line and its angles' stiffness with it: in the Pinup poster a 4-node
// speck whose patch spread 0.022 (smaller over larger) swung its one node's fibers at
// 100-220 m/s for seconds at the intact sheet's stable step. Once cracks cut the network, no
// node centres an active fiber on a patch spread under 0.05 (intact, this sampling's edge
// nodes go down to 0.033). Measured: smallest 0.052 of the 165 that do; with the intact
// sampling's 1e-2 kept after cracks it fails at three nodes, down to 0.042.
TEST(FiberFracture, NoFiberOfATornSheetIsOrientedByANearlyCollinearPatch) {
  const double h = 0.04;
  const FiberNodes nodes = gridSheet(15, 15, h, 0.35, 5);  // jittered: uneven patches
  FiberParams params;
  params.fracture = FiberFractureDef{
      .stretchLimit = 1.05, .bendLimit = 10.0, .brokenRatio = 0.2, .cooldownSteps = 0};
  FiberModel model(nodes, rubber(), params);
  const std::vector<double> x = perturbed(nodes.positions, 0.6 * h, 17);
  int32_t cracks = 0;
  for (int step = 0; step < 200; ++step) {
    cracks += static_cast<int32_t>(model.updateInelastic(x, 1e-3).edit.cuts.size());
  }
  const std::vector<int32_t> pieces = model.nodePieces();
  const int32_t pieceCount = *std::max_element(pieces.begin(), pieces.end()) + 1;
  ASSERT_GE(cracks, 20);
  ASSERT_GE(pieceCount, 5);
  double smallest = 1;
  int32_t oriented = 0;
  for (int32_t j = 0; j < model.nodeCount(); ++j) {
    bool active = false;
    for (int32_t f = model.network().centreOffsets[static_cast<size_t>(j)];
         f < model.network().centreOffsets[static_cast<size_t>(j) + 1]; ++f) {
      active |= (model.network().flags[static_cast<size_t>(f)] & kFiberActive) != 0;
    }
    if (!active) continue;
    ++oriented;
    const double spread = patchSpread(model, j);
    smallest = std::min(smallest, spread);
    EXPECT_GE(spread, 0.05) << "node " << j;
  }
  EXPECT_GT(oriented, 0);
  std::cout << cracks << " cracks, " << pieceCount << " pieces, " << oriented
            << " nodes centre active fibers, smallest patch spread " << smallest << "\n";
}

// The energy contract (model_contract.hpp) on evolved states, the way a run leaves them:
// a sheet whose rest shape flowed under a held bend, a torn sheet (broken fibers, a crack
// through the network, stiffness scaled by the surviving share), and that torn state
// written to bytes and put back into a freshly built model (Model::state, ModelState::read,
// Model::setState).
std::unique_ptr<FiberModel> flowedSheet(const FiberNodes& nodes) {
  FiberParams plastic;
  plastic.plasticity = FiberPlasticityDef{
      .yieldStrain = 0.05, .yieldAngle = 0.01, .stretchCreep = 50, .bendCreep = 50, .weakening = 0};
  auto model = std::make_unique<FiberModel>(nodes, rubber(), plastic);
  const std::vector<double> bent = rolled(nodes, 4.0, 0);
  for (int i = 0; i < 20; ++i) (void)model->updateInelastic(bent, 0.005);
  return model;
}

FiberParams tearing() {
  FiberParams params;
  params.fracture = FiberFractureDef{
      .stretchLimit = 1.05, .bendLimit = 10.0, .brokenRatio = 0.2, .cooldownSteps = 0};
  return params;
}

void tear(FiberModel& model, const FiberNodes& nodes, double h) {
  std::vector<double> x = nodes.positions;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    if (x[3 * i] > 5.5 * h) x[3 * i] += 0.3 * h;
  }
  for (int step = 0; step < 30; ++step) (void)model.updateInelastic(x, 1e-3);
}

testing::ContractCase evolvedCase(const std::string& which) {
  testing::ContractCase c;
  c.name = which;
  c.setup = [which] {
    const double h = 0.04;
    const FiberNodes nodes = gridSheet(11, 11, h);
    std::unique_ptr<FiberModel> model;
    if (which == "flowed") {
      model = flowedSheet(nodes);
    } else {
      model = std::make_unique<FiberModel>(nodes, rubber(), tearing());
      tear(*model, nodes, h);
      if (model->cracks().empty()) throw std::logic_error("the sheet did not tear");
      if (which == "torn_round_trip") {
        ByteWriter out;
        model->state().write(out);
        auto fresh = std::make_unique<FiberModel>(nodes, rubber(), tearing());
        ByteReader in(out.bytes(), "contract");
        fresh->setState(ModelState::read(in));
        model = std::move(fresh);
      }
    }
    testing::ContractSetup s;
    s.scale = h;
    s.restIsRelaxed = which != "flowed";
    s.model = std::move(model);
    s.rest = nodes.positions;
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

using testing::ModelContract;
INSTANTIATE_TEST_SUITE_P(FiberEvolved, ModelContract,
                         ::testing::Values(evolvedCase("flowed"), evolvedCase("torn"),
                                           evolvedCase("torn_round_trip")),
                         testing::contractCaseName);

}  // namespace
}  // namespace shellsim
