// The fiber network of wicke2005 section 5: for every node p, one fiber through each of its
// k nearest neighbours p_i, p and the neighbour most opposite to p_i (eq. (16)).
//
//      p_i o-------o p-------o p_j        p_j = the neighbour q of p minimising the cosine
//                                          of the angle between q - p and p_i - p
//
// Deviations from the paper, each for a reason:
//  - Eq. (16) as printed, argmin_q <q - p, p - p_i>, selects p_i itself (the value is
//    -|p_i - p|^2 < 0); with the sign fixed, the unnormalised projection still prefers far
//    nodes at a worse angle (on a hexagonal lattice with k = 12 it picks the node at 150
//    degrees and distance sqrt(3) a over the exactly opposite one at distance a). We
//    minimise the cosine instead: p_j = argmin_q <q - p, p_i - p> / (|q - p| |p_i - p|),
//    ties broken by distance, then index.
//  - Folded fibers are discarded. A fiber is kept only if
//      (a) its legs open by at least `minOpeningAngleDegrees` (default 120):
//          <p_i - p, p_j - p> <= cos(120 deg) |p_i - p| |p_j - p|, and
//      (b) at rest its spline's end tangents t0, t1 turn by at most acos(0.25) = 75.5
//          degrees: <t0, t1> >= minEndTangentCosine |t0| |t1|.
//    Rule (b) keeps the splines of rest fibers well shaped: a fiber folded in the tangent
//    plane (equal legs at 90 degrees: <t0, t1> = -0.625; equal legs need > 112.6 degrees
//    for <t0, t1> > 0), or a straight fiber whose legs differ by more than a factor 5
//    (the natural spline then runs backwards at one end), measures its arc length and
//    stretching badly. Rule (a) alone (the "~90 degrees" of the issue) would accept both.
//  - Duplicates (same centre, same unordered pair of ends) are discarded.
//  - Widening (not in the paper, which samples evenly): a node that its k nearest neighbours
//    leave the centre of fewer than 2 fibers, as happens on uneven samplings (a vertex next
//    to a fan of slivers, clusters of unequal size), has no stiffness in some directions and
//    blows up. It takes 2k, 3k, ... up to kMaxNeighbourCount nearest and keeps the first set
//    that gives it 2 fibers.
// Everything is deterministic: the neighbours of each node are sorted by (distance,
// index) before use and each node's fibers by (smaller end, larger end), so the network
// does not depend on the number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/assembler.hpp"
#include "core/crack.hpp"
#include "core/spatial.hpp"

namespace shellsim {

// The largest neighbourCount, hence the most fibers of one node (one per neighbour).
inline constexpr int kMaxNeighbourCount = 32;

struct FiberNetworkParams {
  int neighbourCount = 8;               // k nearest neighbours per node, [2, kMaxNeighbourCount]
  double minOpeningAngleDegrees = 120;  // rule (a) above
  double minEndTangentCosine = 0.25;    // rule (b) above
  int samples = 4;                      // arc-length samples per spline piece, [1, 16]
  bool operator==(const FiberNetworkParams&) const = default;
};

// Fiber flag bits.
inline constexpr uint8_t kFiberActive = 1;  // counted in the energy (all fibers at creation)
inline constexpr uint8_t kFiberBroken = 2;  // broke under load (wicke2005 sec. 7.2); not active
// With kFiberActive: kept from breaking, the last fiber holding a node (min_piece_nodes).
inline constexpr uint8_t kFiberHeld = 4;

struct FiberNetwork {
  int32_t nodeCount = 0;
  // Fibers sorted by centre, then by (first end, second end); first end < second end.
  std::vector<int32_t> fiberNodes;     // (nFibers, 3): end p1, centre p, end p2
  std::vector<int32_t> centreOffsets;  // (nNodes + 1): node j is the centre of fibers
                                       // [centreOffsets[j], centreOffsets[j + 1])
  std::vector<double> restLength;      // rest arc length l~0, (nFibers), m
  std::vector<double> restAngle;       // rest tangential angle theta0, (nFibers), rad
  std::vector<uint8_t> flags;          // kFiber* bits, (nFibers)
  Incidence incidence;                 // node -> (fiber * 3 + slot), ascending
  int32_t widenedNodeCount = 0;        // nodes whose fibers needed more than k neighbours

  // From the structure, not from the per-fiber values: a state put back (Model::setState)
  // is checked against it.
  [[nodiscard]] int64_t fiberCount() const { return static_cast<int64_t>(fiberNodes.size() / 3); }
  [[nodiscard]] int32_t fibersAt(int32_t node) const {
    return centreOffsets[static_cast<size_t>(node) + 1] - centreOffsets[static_cast<size_t>(node)];
  }
};

// Builds the network over positions (nNodes, 3) with unit normals (nNodes, 3) (they orient
// the rest angles). A node that its k nearest neighbours leave the centre of fewer than 2
// fibers takes 2k, 3k, ... up to kMaxNeighbourCount nearest until it centres 2 (and keeps
// its k-neighbour fibers if none does, as the corners of a sheet). Nodes separated by a crack disc
// are never neighbours (wicke2005 sec. 7.2: "only nodes that are not separated by a crack plane can
// be in the same neighborhood"), so no fiber crosses a crack. Throws InputError naming the node for
// non-finite input, coincident nodes or fewer than 3 nodes. Appends a warning for nodes with fewer
// than 2 fibers.
// A kd-tree with its own copy of the points it was built over.
struct OwnedKdTree {
  explicit OwnedKdTree(std::span<const double> points)
      : positions(points.begin(), points.end()), tree(positions) {}
  std::vector<double> positions;  // (nNodes, 3)
  PointKdTree tree;               // over `positions`
};

// What a build found, kept by its caller for the next one (a crack's rebuild): with the
// same positions, normals and parameters, only the nodes whose searches reach a changed disc
// (added, removed or replaced) search again; the others keep their fibers and rest values,
// bit for bit what a search would give them again (a disc can cut a segment from node c only
// if its centre lies within the segment's length plus its radius of c). With the same discs
// the build is the memo's network. A build with a memo searches as a build with discs does
// (more candidates), before the first crack too.
struct FiberNetworkMemo {
  std::shared_ptr<const OwnedKdTree> nodes;  // the last build's positions and their tree
  std::vector<double> normals;               // the last build's normals, (nNodes, 3)
  FiberNetworkParams params;
  std::vector<CrackDisc> cracks;
  std::vector<double> reach;     // (nNodes): farthest node any search of the node found, m
  std::vector<uint8_t> widened;  // (nNodes): its neighbourhood grew past k
  FiberNetwork network;          // the last build's result, as built (all fibers active)
};

[[nodiscard]] FiberNetwork buildFiberNetwork(std::span<const double> positions,
                                             std::span<const double> normals,
                                             const FiberNetworkParams& params,
                                             std::vector<std::string>* warnings = nullptr,
                                             std::span<const CrackDisc> cracks = {},
                                             FiberNetworkMemo* memo = nullptr);

}  // namespace shellsim
