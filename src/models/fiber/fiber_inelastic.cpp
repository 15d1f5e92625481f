// The fiber model's plasticity and fracture (wicke2005 section 7): rest lengths and
// angles that creep, fibers that break, crack planes that cut the network.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <utility>

#include "models/fiber/fiber_kernel.hpp"
#include "models/fiber/fiber_model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr size_t kNodeGrain = 256;

// The change of a yielding fiber's rest length l0 (|l - l0| > beta_l l0). Creep: eq. (25).
// Perfect: the new rest length sits on the threshold, |l - l0'| = beta_l l0', i.e.
// l0' = l / (1 + beta_l) when stretched and l / (1 - beta_l) when compressed (a compression past
// the threshold needs beta_l < 1, as l >= 0).
double lengthFlow(const FiberPlasticityDef& plastic, double length, double restLength, double dt) {
  if (plastic.flow == FiberPlasticFlow::kCreep) {
    return std::min(plastic.stretchCreep * dt, 1.0) * (length - restLength);
  }
  const double sign = length > restLength ? 1.0 : -1.0;
  return length / (1.0 + sign * plastic.yieldStrain) - restLength;
}

// The change of a yielding fiber's rest angle theta0 (|theta - theta0| > beta_theta). Creep:
// eq. (26). Perfect: theta0' = theta - sign(theta - theta0) beta_theta.
double angleFlow(const FiberPlasticityDef& plastic, double angle, double restAngle, double dt) {
  if (plastic.flow == FiberPlasticFlow::kCreep) {
    return std::min(plastic.bendCreep * dt, 1.0) * (angle - restAngle);
  }
  const double sign = angle > restAngle ? 1.0 : -1.0;
  return angle - sign * plastic.yieldAngle - restAngle;
}

// eq. (27)'s two terms for a fiber of length l and angle theta now: (l / l0) / gamma_l and
// |theta - theta0| / gamma_theta, with a region's fracture scale s in
// gamma_l = 1 + s (gamma_l - 1) (gamma_theta, the fiber's own, already scaled).
struct Urgency {
  double stretch, bend;
};
Urgency fractureUrgency(const FiberFractureDef& fracture, double fractureScale, double length,
                        double restLength, double angle, double restAngle, double bendLimit) {
  const double stretchLimit = 1.0 + fractureScale * (fracture.stretchLimit - 1.0);
  return {(length / restLength) / stretchLimit, std::abs(angle - restAngle) / bendLimit};
}

}  // namespace

void FiberModel::refreshRestMeans(size_t node) {
  int count = 0;
  double sumArea = 0, sumAngle = 0;
  for (int32_t f = network_.centreOffsets[node]; f < network_.centreOffsets[node + 1]; ++f) {
    const auto fi = static_cast<size_t>(f);
    if ((network_.flags[fi] & kFiberActive) == 0) continue;
    ++count;
    sumArea += kPi / 4 * network_.restLength[fi] * network_.restLength[fi];
    sumAngle += network_.restAngle[fi];
  }
  restArea_[node] = count > 0 ? sumArea / count : 0.0;
  restMeanAngle_[node] = count > 0 ? sumAngle / count : 0.0;
  const double share = originalFibers_[node] > 0
                           ? std::min(1.0, static_cast<double>(count) / originalFibers_[node])
                           : 1.0;
  stretchK_[node] = mappedStretchK_[node] * share;
  bendK_[node] = mappedBendK_[node] * share;
}

std::vector<Model::NodeScalar> FiberModel::nodeScalars() const {
  if (!params_.plasticity && !params_.fracture) return {};
  const auto n = static_cast<size_t>(network_.nodeCount);
  NodeScalar damage{"damage", std::vector<double>(n, 0.0)};
  NodeScalar plastic{"plastic_strain", std::vector<double>(n, 0.0)};
  for (size_t j = 0; j < n; ++j) {
    int active = 0;
    double strain = 0;
    for (auto f = static_cast<size_t>(network_.centreOffsets[j]);
         f < static_cast<size_t>(network_.centreOffsets[j + 1]); ++f) {
      if ((network_.flags[f] & kFiberActive) == 0) continue;
      ++active;
      if (!plasticLength_.empty()) {
        const double original = network_.restLength[f] - plasticLength_[f];
        if (original > 0) {
          strain += (std::abs(plasticLength_[f]) +
                     std::abs(plasticAngle_[f]) * material_.thickness / 1.5) /
                    original;
        }
      }
    }
    if (originalFibers_[j] > 0) {
      damage.values[j] =
          std::clamp(1.0 - static_cast<double>(active) / originalFibers_[j], 0.0, 1.0);
    }
    if (active > 0) plastic.values[j] = strain / active;
  }
  return {std::move(damage), std::move(plastic)};
}

InelasticReport FiberModel::updateInelastic(std::span<const double> x, double dt,
                                            ModelWorkspace* modelWorkspace) {
  InelasticReport report;
  if (params_.plasticity || params_.fracture) report = updateInelasticFibers(x, dt, modelWorkspace);
  // Resampling waits while a crack has just rebuilt the network (one rebuild per step).
  if (params_.resample && report.edit.cuts.empty()) resample(x, report.edit);
  return report;
}

InelasticReport FiberModel::updateInelasticFibers(std::span<const double> x, double dt,
                                                  ModelWorkspace* modelWorkspace) {
  InelasticReport report;
  const auto n = static_cast<size_t>(network_.nodeCount);
  std::vector<int64_t> yielding(n, 0), broken(n, 0);
  ++inelasticStep_;
  if (lastBreakStep_.size() != n) {
    lastBreakStep_.assign(n, std::numeric_limits<int64_t>::min() / 2);
  }
  const FiberPlasticityDef* plastic = params_.plasticity ? &*params_.plasticity : nullptr;
  const FiberFractureDef* fracture = params_.fracture ? &*params_.fracture : nullptr;
  // The fibers that break in this step, for keepNodesAttached (min_piece_nodes only).
  std::vector<uint8_t> brokeNow;
  if (fracture != nullptr && fracture->minPieceNodes > 0) brokeNow.assign(network_.flags.size(), 0);
  // l and theta as the last gradient evaluation measured them, when it was at x with the
  // current fibers; else measured here.
  const auto* workspace = dynamic_cast<const Workspace*>(modelWorkspace);
  const bool cached = workspace != nullptr && workspace->evaluatedTopology == topologyVersion_ &&
                      workspace->lengthNow.size() == network_.restLength.size() &&
                      workspace->evaluatedX.size() == x.size() &&
                      std::equal(x.begin(), x.end(), workspace->evaluatedX.begin());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, kNodeGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t j = r.begin(); j != r.end(); ++j) {
          const auto begin = static_cast<size_t>(network_.centreOffsets[j]);
          const auto end = static_cast<size_t>(network_.centreOffsets[j + 1]);
          if (begin == end) continue;
          const Vec3 normal = cached ? Vec3::Zero() : patchFrame(x, j).normal;
          const Vec3 centre = row(x, j);
          const double tipScale = crackTipScale_.empty() ? 1.0 : crackTipScale_[j];
          const double fractureScale =
              (params_.nodeFractureScale.empty() ? 1.0 : params_.nodeFractureScale[j]) * tipScale;
          bool changed = false;
          for (size_t f = begin; f < end; ++f) {
            if ((network_.flags[f] & kFiberActive) == 0) continue;
            double length, angle;
            if (cached) {
              length = workspace->lengthNow[f];
              angle = workspace->angleNow[f];
            } else {
              const fiber::Reduced z =
                  fiber::reduce(row(x, static_cast<size_t>(network_.fiberNodes[3 * f])), centre,
                                row(x, static_cast<size_t>(network_.fiberNodes[3 * f + 2])));
              length = fiber::arcLength(z, samples_);
              angle = fiber::tangentAngle(z, normal);
            }
            double& restLength = network_.restLength[f];
            double& restAngle = network_.restAngle[f];
            if (plastic != nullptr) {
              // eq. (23)-(26), (29)
              if (std::abs(length - restLength) > plastic->yieldStrain * restLength) {
                const double flow = lengthFlow(*plastic, length, restLength, dt);
                plasticLength_[f] += flow;
                restLength += flow;
                changed = true;
                ++yielding[j];
              }
              if (std::abs(angle - restAngle) > plastic->yieldAngle) {
                const double flow = angleFlow(*plastic, angle, restAngle, dt);
                plasticAngle_[f] += flow;
                restAngle += flow;
                bendLimit_[f] -= plastic->weakening * bendLimit_[f] * std::abs(flow);
                bendLimit_[f] = std::max(bendLimit_[f], 0.0);
                changed = true;
                if (!(std::abs(length - restLength) > plastic->yieldStrain * restLength)) {
                  ++yielding[j];
                }
              }
            }
            if (fracture != nullptr && (network_.flags[f] & kFiberHeld) == 0) {
              // eq. (27), (28)
              const Urgency terms = fractureUrgency(*fracture, fractureScale, length, restLength,
                                                    angle, restAngle, tipScale * bendLimit_[f]);
              const double urgency = std::max(terms.stretch, terms.bend);
              // Past a threshold the fiber accumulates overload time, below it sheds it;
              // it breaks once the net time reaches the delay (at once for delay 0).
              double& overload = overloadTime_[f];
              overload = urgency > 1.0 ? overload + dt : std::max(overload - dt, 0.0);
              if (urgency > 1.0 && overload >= fracture->delay) {
                network_.flags[f] = kFiberBroken;
                breakUrgency_[f] = urgency;
                lastBreakStep_[j] = inelasticStep_;
                changed = true;
                ++broken[j];
                if (!brokeNow.empty()) brokeNow[f] = 1;
              }
            }
          }
          if (changed) refreshRestMeans(j);
        }
      });
  const bool anyBroke =
      std::any_of(broken.begin(), broken.end(), [](int64_t count) { return count > 0; });
  // Only a step in which fibers broke can leave a node without any.
  if (!brokeNow.empty() && anyBroke) keepNodesAttached(brokeNow, broken);
  for (size_t j = 0; j < n; ++j) {
    report.yieldingElements += yielding[j];
    report.brokenElements += broken[j];
  }
  if (fracture != nullptr) {
    if (cooldown_ > 0) {
      --cooldown_;
    } else if (const int64_t fibersBefore = elementCount(); formCrack(x)) {
      // A crack is a topology edit with one cut and the fibers the rebuild changed; the
      // nodes stay.
      report.edit.cuts.push_back(cracks_.back());
      report.edit.elementsAdded = std::max<int64_t>(elementCount() - fibersBefore, 0);
      report.edit.elementsRemoved = std::max<int64_t>(fibersBefore - elementCount(), 0);
      cooldown_ = fracture->cooldownSteps;
    }
  }
  // Breaks that parted pieces without a crack leave normal patches reaching across the
  // parting; rebuilt, the patches are confined to their pieces (a crack's rebuild does it).
  if (anyBroke && report.edit.cuts.empty() && patchesSpanPieces()) {
    rebuildKeepingFiberState(x, {}, {});
  }
  return report;
}

namespace {

// Whether the pieces after a crack (one label per node) cut a speck off: a node is in a piece
// of fewer than `smallest` nodes that was in a larger one before, and no two larger pieces
// came apart (a crack that completes a tear may leave a speck).
bool cutsOffSpeck(std::span<const int32_t> before, std::span<const int32_t> after,
                  int32_t smallest) {
  const auto sizes = [](std::span<const int32_t> labels) {
    std::vector<int32_t> size(labels.size(), 0);
    for (const int32_t label : labels) ++size[static_cast<size_t>(label)];
    return size;
  };
  const auto large = [&](const std::vector<int32_t>& size) {
    return std::count_if(size.begin(), size.end(), [&](int32_t s) { return s >= smallest; });
  };
  const std::vector<int32_t> sizeBefore = sizes(before), sizeAfter = sizes(after);
  if (large(sizeAfter) > large(sizeBefore)) return false;
  for (size_t j = 0; j < after.size(); ++j) {
    if (sizeAfter[static_cast<size_t>(after[j])] < smallest &&
        sizeBefore[static_cast<size_t>(before[j])] >= smallest) {
      return true;
    }
  }
  return false;
}

// [ours] The in-plane direction of a node's largest stretch, as a unit combination of u and v
// (orthonormal, in the rest tangent plane); nullopt when the node's fibers (active or broken)
// span fewer than three directions. A fiber k through the node with rest direction
// (c_k, s_k) in (u, v) and legs of rest lengths a_k, b_k now a'_k, b'_k is stretched by
// e_k = (a'_k + b'_k) / (a_k + b_k) - 1; the symmetric 2 x 2 tensor E with
// e_k ~ (c_k, s_k) E (c_k, s_k)^T, fitted in least squares (three unknowns E11, E12, E22),
// is the node's strain as its fibers sample it; its larger eigenvector is the pull a mode-I
// crack runs across. Exact for a homogeneous strain small enough that e_k is quadratic in
// the direction.
std::optional<Vec3> principalStretchDirection(const FiberNetwork& network,
                                              std::span<const double> rest,
                                              std::span<const double> x, size_t node, const Vec3& u,
                                              const Vec3& v) {
  Eigen::Matrix3d normal = Eigen::Matrix3d::Zero();
  Eigen::Vector3d rhs = Eigen::Vector3d::Zero();
  const Vec3 centreRest = row(rest, node), centreNow = row(x, node);
  for (int32_t f = network.centreOffsets[node]; f < network.centreOffsets[node + 1]; ++f) {
    const auto fiber = static_cast<size_t>(f);
    if ((network.flags[fiber] & (kFiberActive | kFiberBroken)) == 0) continue;
    const auto end1 = static_cast<size_t>(network.fiberNodes[3 * fiber]);
    const auto end2 = static_cast<size_t>(network.fiberNodes[3 * fiber + 2]);
    const double restLength =
        (row(rest, end1) - centreRest).norm() + (row(rest, end2) - centreRest).norm();
    const double nowLength = (row(x, end1) - centreNow).norm() + (row(x, end2) - centreNow).norm();
    const Vec3 along = row(rest, end2) - row(rest, end1);
    const double c = along.dot(u), s = along.dot(v), squared = c * c + s * s;
    if (!(squared > 0) || !(restLength > 0)) continue;
    const Eigen::Vector3d basis(c * c / squared, 2 * c * s / squared, s * s / squared);
    normal += basis * basis.transpose();
    rhs += basis * (nowLength / restLength - 1);
  }
  // Fewer than three distinct directions leave the fit singular (its scale: trace^3 / 27).
  const double trace = normal.trace();
  if (!(std::abs(normal.determinant()) > 1e-6 * trace * trace * trace)) return std::nullopt;
  const Eigen::Vector3d e = normal.ldlt().solve(rhs);
  Eigen::Matrix2d strain;
  strain << e[0], e[1], e[1], e[2];
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> eigen(strain);
  const Eigen::Vector2d largest = eigen.eigenvectors().col(1);  // eigenvalues ascending
  return (largest[0] * u + largest[1] * v).normalized();
}

}  // namespace

void FiberModel::keepNodesAttached(std::vector<uint8_t>& brokeNow, std::vector<int64_t>& brokenAt) {
  // In node order, so the outcome does not depend on the threads: a node that this step's
  // breaks left without any active fiber (as centre or end) keeps the one of them that was
  // least overloaded, held from breaking from now on. A held fiber joins its three nodes, so
  // a later node of the same fiber needs nothing more.
  const auto n = static_cast<size_t>(network_.nodeCount);
  const Incidence& incidence = network_.incidence;
  for (size_t v = 0; v < n; ++v) {
    bool attached = false;
    int64_t keep = -1;
    for (int32_t e = incidence.offsets[v]; e < incidence.offsets[v + 1] && !attached; ++e) {
      const auto f = static_cast<size_t>(incidence.entries[static_cast<size_t>(e)] / 3);
      attached = (network_.flags[f] & kFiberActive) != 0;
      if (brokeNow[f] != 0 &&
          (keep < 0 || breakUrgency_[f] < breakUrgency_[static_cast<size_t>(keep)])) {
        keep = static_cast<int64_t>(f);
      }
    }
    if (attached || keep < 0) continue;
    const auto f = static_cast<size_t>(keep);
    network_.flags[f] = kFiberActive | kFiberHeld;
    breakUrgency_[f] = 0;
    overloadTime_[f] = 0;
    brokeNow[f] = 0;
    const auto centre = static_cast<size_t>(network_.fiberNodes[3 * f + 1]);
    --brokenAt[centre];
    refreshRestMeans(centre);
  }
}

bool FiberModel::formCrack(std::span<const double> x) {
  const auto n = static_cast<size_t>(network_.nodeCount);
  const double ratio = params_.fracture->brokenRatio;
  const int64_t window = 20 * (params_.fracture->cooldownSteps + 1);
  int64_t best = -1;
  double bestUrgency = 0;
  for (size_t j = 0; j < n; ++j) {
    // Eq. (28) chooses among the fibers breaking now: only a node where a fiber broke in
    // this step or during the cooldown just before it is a candidate. A node whose fibers
    // broke long ago seeds no crack later (when it could, every node left with old
    // microcracks after a tear grew its own crack and the torn parts crumbled to dust).
    if (crackAtNode_[j] != 0 || inelasticStep_ - lastBreakStep_[j] > window) continue;
    int total = 0, brokenCount = 0;
    int64_t nodeBest = -1;
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const uint8_t flags = network_.flags[static_cast<size_t>(f)];
      if ((flags & (kFiberActive | kFiberBroken)) == 0) continue;  // dropped at a rebuild
      ++total;
      if ((flags & kFiberBroken) == 0) continue;
      ++brokenCount;
      if (nodeBest < 0 ||
          breakUrgency_[static_cast<size_t>(f)] > breakUrgency_[static_cast<size_t>(nodeBest)]) {
        nodeBest = f;
      }
    }
    if (total == 0 || nodeBest < 0 || brokenCount < ratio * total) continue;
    if (best < 0 || breakUrgency_[static_cast<size_t>(nodeBest)] > bestUrgency) {
      best = nodeBest;
      bestUrgency = breakUrgency_[static_cast<size_t>(nodeBest)];
    }
  }
  if (best < 0) return false;

  // The disc (header comment), in the rest configuration.
  const auto fiber = static_cast<size_t>(best);
  const auto node = static_cast<size_t>(network_.fiberNodes[3 * fiber + 1]);
  const Vec3 centre = row(restPositions_, node);
  const Vec3 end1 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fiber]));
  const Vec3 end2 = row(restPositions_, static_cast<size_t>(network_.fiberNodes[3 * fiber + 2]));
  const Vec3 surfaceNormal = patchFrame(restPositions_, node).normal;
  Vec3 tangent = 0.5 * (end2 - end1);
  const Vec3 inPlane = tangent - tangent.dot(surfaceNormal) * surfaceNormal;
  if (inPlane.norm() > 1e-3 * tangent.norm()) tangent = inPlane;
  // Eq. (27)'s two terms, now: broken by bending when the bending term is the larger.
  const fiber::Reduced z =
      fiber::reduce(row(x, static_cast<size_t>(network_.fiberNodes[3 * fiber])), row(x, node),
                    row(x, static_cast<size_t>(network_.fiberNodes[3 * fiber + 2])));
  const double scale = params_.nodeFractureScale.empty() ? 1.0 : params_.nodeFractureScale[node];
  const Urgency terms = fractureUrgency(*params_.fracture, scale, fiber::arcLength(z, samples_),
                                        network_.restLength[fiber],
                                        fiber::tangentAngle(z, patchFrame(x, node).normal),
                                        network_.restAngle[fiber], bendLimit_[fiber]);
  const bool bent = terms.bend > terms.stretch;
  const bool principalNormal = params_.fracture->crackNormal == FiberCrackNormal::kPrincipal;
  // crack_normal "principal": across the pull for a tension crack, across the fold for a
  // bending one.
  const bool pulledApart = principalNormal && !bent;
  double radius = 0;
  int legs = 0;
  for (int32_t f = network_.centreOffsets[node]; f < network_.centreOffsets[node + 1]; ++f) {
    for (const size_t slot : {size_t{0}, size_t{2}}) {
      radius += (row(restPositions_,
                     static_cast<size_t>(network_.fiberNodes[3 * static_cast<size_t>(f) + slot])) -
                 centre)
                    .norm();
      ++legs;
    }
  }
  if (principalNormal && bent) {
    // Broken by bending: the plane is normal to the direction the surface bends most in at
    // the node (acrossTheFold). The node's own fibers do not say it: on a regular sampling the
    // diagonal ones, whose longer legs span more of the bend, are often the most urgent, and
    // their planes at 45 degrees to the fold left gaps through which the rebuilt fibers held
    // both sides; and once a neighbour's crack has cut some of them the rest are lopsided (20
    // degrees off the fold, or along it).
    if (const std::optional<Vec3> across =
            acrossTheFold(x, node, surfaceNormal, 2 * radius / legs)) {
      tangent = across->dot(tangent) >= 0 ? *across : Vec3(-*across);
    }
  }
  if (pulledApart) {
    const Vec3 u = tangent.normalized();
    if (const std::optional<Vec3> pull = principalStretchDirection(
            network_, restPositions_, x, node, u, surfaceNormal.cross(u).normalized())) {
      tangent = *pull;
    }
  }
  // The disc sits halfway to the next nodes on the side that opened (the more stretched
  // leg, now, at x; for a bending crack the side that turned): the node stays with its
  // intact side and the plane runs through the gap. (Through the node itself, the node would
  // join an arbitrary side, and the next crack across the same gap would isolate it between
  // two planes.)
  const Vec3 now = row(x, node);
  const double stretch1 =
      (row(x, static_cast<size_t>(network_.fiberNodes[3 * fiber])) - now).norm() /
      (end1 - centre).norm();
  const double stretch2 =
      (row(x, static_cast<size_t>(network_.fiberNodes[3 * fiber + 2])) - now).norm() /
      (end2 - centre).norm();
  const Vec3 unitTangent = tangent.normalized();
  // The disc's normal points from the node towards the gap, side 0 along +unitTangent, side 1
  // along -unitTangent. The node's legs (ends of the fibers it centres, broken ones too)
  // within 60 degrees of the normal, by side: how far they reach along it and how much
  // their ends turned from their rest orientation.
  const auto turned = [&](size_t end) {
    return 1.0 - patchFrame(x, end).normal.dot(patchFrame(restPositions_, end).normal);
  };
  std::array<double, 2> reachAlong{}, turnedBy{};
  std::array<int, 2> legsOn{};
  for (int32_t f = network_.centreOffsets[node]; f < network_.centreOffsets[node + 1]; ++f) {
    const auto fi = static_cast<size_t>(f);
    if ((network_.flags[fi] & (kFiberActive | kFiberBroken)) == 0) continue;
    for (const size_t slot : {size_t{0}, size_t{2}}) {
      const auto end = static_cast<size_t>(network_.fiberNodes[3 * fi + slot]);
      const Vec3 leg = row(restPositions_, end) - centre;
      const double reach = leg.dot(unitTangent);
      if (std::abs(reach) < 0.5 * leg.norm()) continue;
      const size_t side = reach > 0 ? 0 : 1;
      reachAlong[side] += std::abs(reach);
      turnedBy[side] += turned(end);
      ++legsOn[side];
    }
  }
  const Vec3 stretchedEnd = stretch2 > stretch1 ? end2 : end1;
  size_t side = (stretchedEnd - centre).dot(unitTangent) >= 0 ? 0 : 1;
  if (bent && legsOn[0] > 0 && legsOn[1] > 0) {
    // Broken by bending, the legs stretch alike and their stretches' difference is
    // rounding: the gap opens on the side that turned more from its rest orientation (the
    // flap, not the part held flat on the table).
    side = turnedBy[0] / legsOn[0] >= turnedBy[1] / legsOn[1] ? 0 : 1;
  }
  CrackDisc disc;
  disc.radius = 0.6 * radius / legs;
  // A crack that runs on from a disc nearby, across about the same direction, opens its
  // gap on the same side: the nearest such disc's normal (node to gap) and the new one's
  // agree. Chosen by each node's legs alone, a bending crack (both legs alike) put
  // neighbouring discs on either side of a row of nodes; each node between two planes lost
  // all its fibers (a crease of lone nodes), and where two runs met the step between their
  // planes let fibers through (a hinge).
  const CrackDisc* runsOn = nullptr;
  double nearest = std::numeric_limits<double>::infinity();
  for (const CrackDisc& other : cracks_) {
    const double distance = (other.centre - centre).norm();
    if (distance > 2.5 * (other.radius + disc.radius) ||
        std::abs(other.normal.dot(unitTangent)) < std::cos(std::numbers::pi / 4) ||
        distance >= nearest) {
      continue;
    }
    nearest = distance;
    runsOn = &other;
  }
  // With crack_normal "fiber" a tension crack keeps the paper's disc (its normal the broken
  // fiber's tangent, the side its stretch says): run on there, the tearing sheets of the tests
  // stayed bridged.
  const bool runsOnNeighbours = bent || principalNormal;
  if (runsOnNeighbours && runsOn != nullptr) side = runsOn->normal.dot(unitTangent) >= 0 ? 0 : 1;
  const Vec3 towardsGap = side == 0 ? unitTangent : Vec3(-unitTangent);
  // Halfway to the next nodes on that side: the broken fiber's own leg there, or, with the
  // plane across the fold or the pull rather than along a fiber, the legs' mean reach.
  const Vec3& fiberEnd =
      ((end2 - centre).dot(towardsGap) >= (end1 - centre).dot(towardsGap)) ? end2 : end1;
  double gapWidth = std::max((fiberEnd - centre).dot(towardsGap), 0.0);
  if ((principalNormal || gapWidth == 0) && legsOn[side] > 0) {
    gapWidth = reachAlong[side] / legsOn[side];
  }
  if (gapWidth == 0) gapWidth = radius / legs;
  disc.centre = centre + 0.5 * gapWidth * towardsGap;
  disc.normal = runsOnNeighbours ? towardsGap : unitTangent;
  if (bent && runsOn != nullptr) {
    // A fold is straight (a bent plate is developable: its rulings are straight lines), and
    // so is the crack along it: the disc continues the plane of the one it runs on, where
    // that plane passes between the node and the next nodes on the gap's side.
    const double along = (runsOn->centre - centre).dot(runsOn->normal);
    if (along > 0.1 * gapWidth && along < 0.9 * gapWidth &&
        runsOn->normal.dot(disc.normal) > std::cos(std::numbers::pi / 18)) {
      disc.normal = runsOn->normal;
      disc.centre = centre + along * disc.normal;
    }
  }
  // fracture.min_piece_nodes: a disc that would cut a speck off is not placed; the model is
  // put back as it was and the node never seeds a crack again.
  const int32_t smallest = params_.fracture->minPieceNodes;
  std::vector<int32_t> piecesBefore;
  ModelState before;
  if (smallest > 0) {
    piecesBefore = nodePieces();
    before = state();
  }
  cracks_.push_back(disc);
  crackAtNode_[node] = 1;
  rebuildKeepingFiberState(x, {}, {});
  if (smallest > 0 && cutsOffSpeck(piecesBefore, nodePieces(), smallest)) {
    setState(before);
    crackAtNode_[node] = 1;
    return false;
  }
  return true;
}

std::optional<Vec3> FiberModel::acrossTheFold(std::span<const double> x, size_t node,
                                              const Vec3& restNormal, double reach) const {
  // The surface's curvature at the node, fitted by least squares: the heights of the nodes
  // within `reach` over the node's tangent plane now, h_j = (x_j - x_c) . N_c, as
  // h = a r1^2 + b r1 r2 + c r2^2 + d r1 + e r2 of their in-plane rest offsets r_j (the linear
  // terms take up the tilt). The fold's normal is the direction of the larger principal
  // curvature of [[2a, b], [b, 2c]]. (Weighting unit offsets by how much the neighbours'
  // normals turned tilted it towards the diagonal at a sheet's corners, where the neighbours
  // lie on one side and the normals tilt with the bending.) The same pass finds the nearest
  // node that cracked already.
  const auto n = static_cast<size_t>(network_.nodeCount);
  const Vec3 centre = row(restPositions_, node);
  const Vec3 e1 = restNormal.unitOrthogonal();
  const Vec3 e2 = restNormal.cross(e1);
  const Vec3 normalNow = patchFrame(x, node).normal;
  using Vector5d = Eigen::Matrix<double, 5, 1>;
  Eigen::Matrix<double, 5, 5> normalMatrix = Eigen::Matrix<double, 5, 5>::Zero();
  Vector5d rightSide = Vector5d::Zero();
  int fitted = 0;
  size_t previous = n;
  double previousDistance = reach;
  for (size_t j = 0; j < n; ++j) {
    const Vec3 d = row(restPositions_, j) - centre;
    const double distance = d.norm();
    if (j == node || !(distance > 0) || distance > reach) continue;
    const double r1 = d.dot(e1) / reach, r2 = d.dot(e2) / reach;  // scaled to order 1
    Vector5d basis;
    basis << r1 * r1, r1 * r2, r2 * r2, r1, r2;
    normalMatrix += basis * basis.transpose();
    rightSide += basis * (row(x, j) - row(x, node)).dot(normalNow);
    ++fitted;
    if (crackAtNode_[j] != 0 && distance < previousDistance) {
      previous = j;
      previousDistance = distance;
    }
  }
  bool clear = false;
  Vec3 direction = Vec3::Zero();
  const Eigen::LDLT<Eigen::Matrix<double, 5, 5>> solver(normalMatrix);
  if (fitted >= 5 && solver.info() == Eigen::Success && solver.isPositive() &&
      normalMatrix.diagonal().minCoeff() > 0) {
    const Vector5d c = solver.solve(rightSide);
    Eigen::Matrix2d curvature;
    curvature << 2 * c[0], c[1], c[1], 2 * c[2];
    const Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> principal(curvature);
    const Eigen::Vector2d values = principal.eigenvalues().cwiseAbs();
    const int top = values[1] >= values[0] ? 1 : 0;
    const Eigen::Vector2d v = principal.eigenvectors().col(top);
    direction = (v[0] * e1 + v[1] * e2).normalized();
    // A clear direction only: bent alike every way (the principal curvatures' sizes within
    // 10 %), the most urgent fiber decides.
    clear = values[top] > 1.1 * values[1 - top] && direction.allFinite();
  }
  // Next to a node that cracked already the crack runs on along the line from it, and the
  // plane is across that line: each node's own estimate of the fold (measured with how much
  // its neighbours' normals turned) swung 10-20 degrees along a crack (the parts already
  // parted hang differently), and discs tilted so passed on either side of the next node and
  // cut it off, or left steps between them. Only where that line runs along the fold (within
  // 30 degrees): on a surface bent all over, as a rolled sheet, cracks spring up anywhere and
  // the nearest may lie across the fold.
  if (previous < n) {
    Vec3 along = centre - row(restPositions_, previous);
    along -= along.dot(restNormal) * restNormal;
    if (along.norm() > 0) {
      const Vec3 across = restNormal.cross(along).normalized();
      if (!clear || std::abs(across.dot(direction)) > std::cos(std::numbers::pi / 6)) {
        return across;
      }
    }
  }
  if (clear) return direction;
  return std::nullopt;
}

void FiberModel::rebuildKeepingFiberState(std::span<const double> x,
                                          std::span<const double> centreStretch,
                                          std::span<const double> centreAngleChange) {
  const auto oldCount = static_cast<size_t>(network_.nodeCount);
  if (params_.fracture) confinePatchesToPieces();
  // Moved out: buildTopology builds all of them anew.
  const FiberNetwork old = std::move(network_);
  const std::vector<double> oldPlasticLength = std::move(plasticLength_),
                            oldPlasticAngle = std::move(plasticAngle_),
                            oldBendLimit = std::move(bendLimit_),
                            oldUrgency = std::move(breakUrgency_),
                            oldOverload = std::move(overloadTime_);
  buildTopology(nullptr);  // a workspace's l and theta are stale from here: version bumped below
  const auto n = static_cast<size_t>(network_.nodeCount);
  const auto fiberCount = static_cast<size_t>(network_.fiberCount());
  const bool inelastic = params_.plasticity || params_.fracture;
  for (size_t f = 0; f < fiberCount && inelastic; ++f) {
    const int32_t c = network_.fiberNodes[3 * f + 1];
    const int32_t a = network_.fiberNodes[3 * f];
    const int32_t b = network_.fiberNodes[3 * f + 2];
    if (static_cast<size_t>(c) >= oldCount) {  // a node added by resampling: all its fibers new
      startNewFiber(f, x, centreStretch, centreAngleChange);
      continue;
    }
    size_t lo = static_cast<size_t>(old.centreOffsets[static_cast<size_t>(c)]);
    size_t hi = static_cast<size_t>(old.centreOffsets[static_cast<size_t>(c) + 1]);
    while (lo < hi) {  // old fibers of c are sorted by (first end, second end)
      const size_t mid = (lo + hi) / 2;
      const std::pair<int32_t, int32_t> key{old.fiberNodes[3 * mid], old.fiberNodes[3 * mid + 2]};
      if (key < std::pair<int32_t, int32_t>{a, b}) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const bool found = lo < static_cast<size_t>(old.centreOffsets[static_cast<size_t>(c) + 1]) &&
                       old.fiberNodes[3 * lo] == a && old.fiberNodes[3 * lo + 2] == b;
    if (found) {
      plasticLength_[f] = oldPlasticLength[lo];
      plasticAngle_[f] = oldPlasticAngle[lo];
      bendLimit_[f] = oldBendLimit[lo];
      breakUrgency_[f] = oldUrgency[lo];
      if (!overloadTime_.empty()) overloadTime_[f] = oldOverload[lo];  // fracture only
      if ((old.flags[lo] & kFiberBroken) != 0 && (network_.flags[f] & kFiberActive) != 0) {
        network_.flags[f] = kFiberBroken;
      } else if ((old.flags[lo] & kFiberHeld) != 0 && (network_.flags[f] & kFiberActive) != 0) {
        network_.flags[f] |= kFiberHeld;
      }
      network_.restLength[f] += plasticLength_[f];
      network_.restAngle[f] += plasticAngle_[f];
    }
    // A fiber active now that was not before (new, or dropped at an earlier rebuild) starts
    // from its rest shape, but its nodes may have drifted apart already (joined only
    // through broken fibers): one past its thresholds now is dropped instead of kicking its
    // nodes apart for a step with the force of a many-times over-stretched fiber.
    if ((network_.flags[f] & kFiberActive) == 0 || (found && (old.flags[lo] & kFiberActive) != 0)) {
      continue;
    }
    if (found) {
      // Dropped at an earlier rebuild (the rebuild keeps cutting the fibers that cross a crack,
      // so an inactive fiber found again was dropped by the test below): it stays dropped.
      // Checked again at every rebuild, such fibers came back whenever their nodes swung
      // within the thresholds, strained up to the stretch limit (1.5): in fiber_plate_snap
      // a rebuild put 57 J into one node that way and the run blew up (with the free edges'
      // calibration, fiber_model.hpp (b)); kept dropped, it runs through.
      network_.flags[f] = 0;
      continue;
    }
    startNewFiber(f, x, centreStretch, centreAngleChange);
  }
  for (size_t j = 0; j < n; ++j) refreshRestMeans(j);
  buildResamplePairs();
  ++topologyVersion_;
  // The pieces were found before this rebuild: a crack's disc, or a patch left degenerate
  // (its fibers dropped), may have parted more. Rebuilt again, the parted patches are
  // confined too; the nodes are the rebuild's by then.
  if (params_.fracture && patchesSpanPieces()) rebuildKeepingFiberState(x, {}, {});
}

void FiberModel::confinePatchesToPieces() {
  std::vector<int32_t> pieces = nodePieces();
  if (std::all_of(pieces.begin(), pieces.end(), [](int32_t piece) { return piece == 0; })) {
    patchPieces_.clear();  // one piece: nothing to confine
    return;
  }
  pieces.resize(restPositions_.size() / 3, -1);  // nodes a resampling event adds: any piece
  patchPieces_ = std::move(pieces);
}

bool FiberModel::patchesSpanPieces() const {
  const std::vector<int32_t> pieces = nodePieces();
  for (size_t j = 0; j + 1 < patchOffsets_.size(); ++j) {
    for (auto e = static_cast<size_t>(patchOffsets_[j]);
         e < static_cast<size_t>(patchOffsets_[j + 1]); ++e) {
      if (pieces[static_cast<size_t>(patchNodes_[e])] != pieces[j]) return true;
    }
  }
  return false;
}

void FiberModel::startNewFiber(size_t f, std::span<const double> x,
                               std::span<const double> centreStretch,
                               std::span<const double> centreAngleChange) {
  if ((network_.flags[f] & kFiberActive) == 0) return;
  const auto c = static_cast<size_t>(network_.fiberNodes[3 * f + 1]);
  const auto a = static_cast<size_t>(network_.fiberNodes[3 * f]);
  const auto b = static_cast<size_t>(network_.fiberNodes[3 * f + 2]);
  const fiber::Reduced z = fiber::reduce(row(x, a), row(x, c), row(x, b));
  const double length = fiber::arcLength(z, samples_);
  const double angle = fiber::tangentAngle(z, patchFrame(x, c).normal);
  if (params_.plasticity && !centreStretch.empty()) {
    // A fiber that resampling made in a plastic body: its rest values are its shape now less
    // the elastic strain its centre's fibers carry (fiber_resample.cpp), so that it neither
    // pulls the new node back to the old rest shape nor starts slack.
    const double restLength = length / centreStretch[c];
    const double restAngle = angle - centreAngleChange[c];
    plasticLength_[f] = restLength - network_.restLength[f];
    plasticAngle_[f] = restAngle - network_.restAngle[f];
    network_.restLength[f] = restLength;
    network_.restAngle[f] = restAngle;
  }
  if (!params_.fracture) return;
  const double fractureScale =
      params_.nodeFractureScale.empty() ? 1.0 : params_.nodeFractureScale[c];
  const double stretchLimit = 1.0 + fractureScale * (params_.fracture->stretchLimit - 1.0);
  const double urgency = std::max(length / network_.restLength[f] / stretchLimit,
                                  std::abs(angle - network_.restAngle[f]) / bendLimit_[f]);
  if (urgency > 1.0) {
    // Dropped, not broken: it never carried load, so it does not count towards its node's
    // broken share (counted, such fibers made every rebuild seed cracks all around the
    // last one: a cascade that ground torn sheets into dust).
    network_.flags[f] = 0;
  }
}

}  // namespace shellsim
