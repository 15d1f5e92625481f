// Resampling of a fiber body under stretch (FiberParams::resample). wicke2005 section 8:
// "Under very large stretching deformations, the initial sampling degrades. Currently, no
// resampling of the simulation nodes is done"; section 9 names it future work. Here a pair of
// neighbouring nodes that moves too far apart gets a node between them.
//
// Watched pairs. With output triangles: the mesh edges (so the drawn mesh is split with them)
// whose nodes are in one piece and no crack disc separates. (Only the edges that are also fiber
// legs, the first version, left long edges unwatched once the nodes' nearest neighbours were
// new nodes: a strip pulled to twice its length kept edges of 3.4 spacings.) Without triangles:
// the legs (centre, end) of active fibers no longer at rest than 1.5 times the shortest leg of
// their centre (its first ring). Broken and cut fibers give none, so the gap of a tear is never
// bridged.
// Spacing. s_j: the mean rest length of node j's pairs in the input sampling; a new node takes
// the mean of its two ends'. A pair's limit is L = max_spacing * max(s_a, s_b), so the
// bound is on the current distance in units of the input's spacing: a pair that was split has
// half the rest length and half the length now, and splits again only once it is as long as L.
// Without triangles, L = max_spacing * max(s_a, s_b, l_ab) with l_ab the pair's rest length:
// the legs of an irregular sampling (clustered nodes) are longer than their ends' spacings by
// up to half, and split at a few percent of stretch otherwise.
// Trigger and batch. After an accepted step, when some pair is longer than L at x, every pair
// longer than 0.85 L gets a node: one rebuild for a batch, not one per step while the stretch
// grows. A pair is split only while its rest length is at least 1/4 of its nodes' spacing
// (two halvings), so no motion can multiply the nodes without bound (with 1/8, the singular
// strain at a grip's corner drew ever smaller nodes there). Without triangles, a
// pair whose midpoint lies within a third of its rest length of a node made earlier in the
// batch is skipped (the two diagonals of a square share their midpoint); a pair with any node
// there, or shorter than the finest share, is not watched at all (clustered nodes: a pair
// whose centre was split in an earlier batch may still be joined by a fiber, and its midpoint
// is that node; watched, such a pair kept the trigger on in every step).
// The new node m of the pair (a, b) sits at the midpoint, at rest and now, moves with the mean
// velocity, and takes the same share of area from a and from b. With output triangles each
// triangle (a, b, c) is cut in two at m, (a, m, c) and (m, b, c), keeping its orientation, and
// a and b each give a sixth of its rest area (their barycentric thirds halve, m gets a third of
// both halves): the input's barycentric areas stay barycentric. Without triangles the share is
// that of two equilateral triangles on the pair, sqrt3/12 l^2, at most a_k / (c_k + 2) of either
// end (c_k the batch's pairs at node k: on a line, c = 2, the areas of regular refinement). No
// end gives more than half of what it has left. Masses follow (m = rho h a): the total mass is
// unchanged exactly; equal shares at the mean velocity keep the total momentum exactly as well
// (the kinetic energy loses the share of the pair's relative motion that the averaging removes).
// (The first version took a_k / (c_k + 2) from each end whatever the geometry and placed the
// node at the area-weighted mean: a node in many small events shrank to 1/1700 of its area,
// new nodes sat a twentieth of a pair from an end, and a pulled strip blew up at 1.7 times its
// length.) Its rest normal is the normalised mean of a's and b's.
// Flips. Split in the input's pattern, a sheet that is not stretched evenly (the neck between
// two grips) turns its triangles into slivers, and a sliver of the drawn mesh flips over at the
// least sideways motion of a node: fiber_sheet_stretch showed 6 to 35 of its 700 to 1,500
// triangles face down in frames 25 to 60, none without resampling. The output triangles serve
// the drawing and the watched pairs only (the network comes from the rest positions), so they
// may be re-triangulated: after each batch, and after any step that leaves a triangle of shape
// quality below 0.2 now (4 sqrt3 A / sum of squared edges, 1 for an equilateral triangle; when
// no flip mends it, again only once the worst is 0.02 below what the last pass left), an
// inner edge is flipped when both new triangles face the way the old pair does at rest and now,
// neither is worse than 0.1 at rest (a later split of a flat rest triangle would put its
// midpoint onto a node), its new diagonal joins nodes of one piece that no crack separates,
// and the worse of the two is better now than the worse of the old two; the sweeps repeat
// until none flips. The flipped diagonals are the shorter ones, so fewer pairs pass their
// limit: the scene ends with 575 nodes instead of 829, 1 of 1,005 triangles face down (16 of
// 1,515 before; at most 6 in any frame, 35 before) and 20 below quality 0.1 (128)
// (FiberResample.NeckedSheetKeepsItsTrianglesFacingUpAndWellShaped). What flips cannot mend is
// a node that crossed an edge within the surface (the quad is no longer convex): the fiber
// model's fibers measure lengths and out-of-plane angles, so a fold within the tangent plane
// costs little, and the event's new fibers push the nodes sideways (see Energy below).
// Rebuild. The network is built again from the rest positions (the same k-nearest rule: the
// fibers near the new nodes are shorter), then the patches, the rest angles and the stiffness
// mapping (a_j enters K_s,j and K_b,j). A fiber with the same centre and ends as before keeps
// its state. A new fiber of an elastic body starts from its rest shape, which is exact: the
// rest positions of the new nodes are the same midpoints as their positions. In a plastic
// body the rest shape is no longer the stress-free one; a new fiber's rest values are its
// length and angle now less the elastic strain its centre's fibers carry (the mean of l / l0
// and of theta - theta0 over the centre's active fibers; a new node takes its sources'), so
// that it neither pulls the surface back to the input's shape nor starts slack.
// Energy. The new fibers measure the same shape with other weights, so an event changes the
// stored energy at fixed positions: +17 % for a sheet held at 1.8 times its length, +22 % (0.78
// J) at the first event of a 400-node clustered balloon inflating (the fiber model's energy
// depends on the sampling, wicke2005 sec. 8). Where it comes from (the balloon, per node):
// the old nodes whose fibers changed stored 19.7 J/m^2 before and 24.0 after, the new nodes
// 29.2: a centre sliding along its fiber's chord costs that fiber nothing, so the coarse fibers
// leave node-scale strain unmeasured that the finer ones measure (uniform inflation keeps the
// energy exactly). Explicit steps turned it into motion at once (1.65 J of kinetic energy
// after the first batch), the motion stretched more pairs past their limits and every event
// added more: the balloon blew up at 1.07 s. So after an event that raised it (ours), the new
// nodes, the old ones whose fibers changed and the ends of those fibers slide within the
// surface (the gradient less its part along N_j, the event's normals held) by steepest
// descent with a backtracking step, each iteration moving no node more than 5 % of the mean
// input spacing, until the energy is no more than before the event, at most 100 iterations
// (edit.displacements). Nodes the world moves itself (pinned, setWorldMovedNodes) do not
// slide, nor a new node between two of them. Sliding the new nodes alone won back
// a quarter of the rise; with the rest, every event of the balloon got all of it in 5 to 12
// iterations (a few near 2 times the radius stopped at the cap, 0.05 J over), moving nodes by
// up to 12 mm (a third of a stretched spacing); the held sheet's event (its left edge pinned)
// now takes out 0.15 of 13.2 J (EnergyGuard.CountsTheEnergyThatResamplingAdded). The balloon then
// ran explicitly to 1.49 s (kinetic 0.08 J after the first batch) and blew up when it refined into
// a cascade of events at about 1.8 times its radius; backward Euler (2 ms) inflates it to 2 s and
// 1,168 nodes without the sideways swing the events gave it (7 cm) and with fewer lumps. The model
// adds what is left up (Model::addedEnergy) and the energy guard counts it as put in, like a pin's
// work. The response across the pull changes too: a 41 x 15 grid held at 1.3 times its length
// stores the least energy at 0.68 of its width as sampled, at 0.835 once refined (its new fibers
// run mostly along the pull), so fiber_sheet_stretch widens from 3.6 to 4.4 cm in the frame of its
// first event. Cost: the new nodes are closer in rest space and the body is stretched, so the
// explicit stable step goes down: after an event it is the smaller of the estimates at rest and at
// the event's positions (a run follows it, TimeIntegrator::followTopology). Where the strain is
// singular (the corners of a grip) that is far down: fiber_sheet_stretch run explicitly ends
// with a step 48 times shorter (450,000 steps, 58 s against 9 s implicit) and crumpled by the
// events' energy, which explicit steps do not damp; the scene runs backward Euler.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/crack.hpp"
#include "core/spatial.hpp"
#include "models/fiber/fiber_kernel.hpp"
#include "models/fiber/fiber_model.hpp"

namespace shellsim {
namespace {

// relaxAfterEvent: at most this many descent iterations, each moving no node by more than
// this share of the mean input spacing.
constexpr int kRelaxIterations = 100;
constexpr double kRelaxLongestMove = 0.05;

// A pair's limit, and the batch's share of it, in units of max(s_a, s_b) (see above).
constexpr double kBatchShare = 0.85;
// Pairs stop splitting once their rest length is below this share of their nodes' spacing.
constexpr double kFinestShare = 1.0 / 4.0;
// Without triangles: the first ring of a centre, its legs up to this times its shortest.
constexpr double kFirstRing = 1.5;

std::pair<int32_t, int32_t> ordered(int32_t a, int32_t b) {
  return {std::min(a, b), std::max(a, b)};
}

// Shape quality of the triangle (p, q, r) seen along the unit vector `up`: 4 sqrt3 A / (sum of
// squared edge lengths), 1 for an equilateral triangle, 0 for a degenerate one, negative when it
// faces away from `up` (A the signed area).
double signedQuality(const Vec3& p, const Vec3& q, const Vec3& r, const Vec3& up) {
  const double twiceArea = (q - p).cross(r - p).dot(up);
  const double squares = (q - p).squaredNorm() + (r - q).squaredNorm() + (p - r).squaredNorm();
  return squares > 0 ? 2 * std::sqrt(3.0) * twiceArea / squares : 0.0;
}

// Edge flips after a batch of splits (header comment, "Flips"). The pair (a, b, c), (b, a, d)
// becomes (a, d, c), (d, b, c) when both new triangles face the way the pair does at rest and
// at x, `mayJoin(c, d)`, and the worse of the two is better now (at x) than the worse of the old
// two by at least kFlipGain. Each flip raises the sorted list of qualities at x
// lexicographically, so the sweeps end; they are capped all the same. True if any flipped.
constexpr double kFlipGain = 1e-3;
// A flip never makes a triangle worse than this at rest: a later split of a nearly degenerate
// rest triangle would put its midpoint onto a node.
constexpr double kFlipRestQuality = 0.1;
// Between events, flips are looked for once a triangle's quality now is below this.
constexpr double kReshapeQuality = 0.2;
// ... and tried again, when none mended the worst, once it is this much worse.
constexpr double kReshapeRetry = 0.02;
constexpr int kFlipSweeps = 16;

// The worst shape quality of the triangles at x, whichever way they face (seen along its own
// normal, each has its unsigned quality; a degenerate one has 0).
double worstQuality(std::span<const int32_t> triangles, std::span<const double> x) {
  double worst = 1;
  for (size_t t = 0; t + 2 < triangles.size(); t += 3) {
    const Vec3 p = row(x, static_cast<size_t>(triangles[t]));
    const Vec3 q = row(x, static_cast<size_t>(triangles[t + 1]));
    const Vec3 r = row(x, static_cast<size_t>(triangles[t + 2]));
    worst = std::min(worst, signedQuality(p, q, r, (q - p).cross(r - p).stableNormalized()));
  }
  return worst;
}

template <class MayJoin>
bool flipToBetterTriangles(std::vector<int32_t>& triangles, std::span<const double> rest,
                           std::span<const double> x, const MayJoin& mayJoin) {
  const size_t count = triangles.size() / 3;
  // The triangles on each edge, keyed by its ordered nodes: exactly two for an inner edge.
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> trianglesOn;
  for (size_t t = 0; t < count; ++t) {
    for (size_t e = 0; e < 3; ++e) {
      trianglesOn[ordered(triangles[3 * t + e], triangles[3 * t + (e + 1) % 3])].push_back(
          static_cast<int32_t>(t));
    }
  }
  // The node of triangle t that is neither u nor v, and whether t runs u -> v.
  const auto apex = [&](int32_t t, int32_t u, int32_t v) {
    const auto base = 3 * static_cast<size_t>(t);
    for (size_t c = 0; c < 3; ++c) {
      const int32_t w = triangles[base + c];
      if (w != u && w != v) return std::pair(w, triangles[base + (c + 1) % 3] == u);
    }
    return std::pair(int32_t{-1}, false);
  };
  const auto moveEdge = [&](std::pair<int32_t, int32_t> edge, int32_t from, int32_t to) {
    auto& on = trianglesOn[edge];
    std::replace(on.begin(), on.end(), from, to);
  };
  bool any = false;
  for (int sweep = 0; sweep < kFlipSweeps; ++sweep) {
    bool flipped = false;
    std::vector<std::pair<int32_t, int32_t>> edges;
    edges.reserve(trianglesOn.size());
    for (const auto& [edge, on] : trianglesOn) {
      if (on.size() == 2) edges.push_back(edge);
    }
    for (const auto& [u, v] : edges) {
      const auto found = trianglesOn.find({u, v});
      if (found == trianglesOn.end() || found->second.size() != 2) continue;
      // t1 runs a -> b, t2 runs b -> a.
      int32_t t1 = found->second[0], t2 = found->second[1];
      auto [c, t1Forward] = apex(t1, u, v);
      auto [d, t2Forward] = apex(t2, u, v);
      if (c < 0 || d < 0 || c == d || t1Forward == t2Forward) continue;
      int32_t a = u, b = v;
      if (!t1Forward) {
        std::swap(t1, t2);
        std::swap(c, d);
      }
      if (trianglesOn.count(ordered(c, d)) > 0 || !mayJoin(c, d)) continue;
      bool better = true;
      double oldWorst = 0, newWorst = 0;
      for (const std::span<const double> at : {rest, x}) {
        const auto p = [&](int32_t i) { return row(at, static_cast<size_t>(i)); };
        Vec3 up = (p(b) - p(a)).cross(p(c) - p(a)) + (p(a) - p(b)).cross(p(d) - p(b));
        if (up.squaredNorm() == 0) {
          better = false;
          break;
        }
        up.normalize();
        oldWorst =
            std::min(signedQuality(p(a), p(b), p(c), up), signedQuality(p(b), p(a), p(d), up));
        newWorst =
            std::min(signedQuality(p(a), p(d), p(c), up), signedQuality(p(d), p(b), p(c), up));
        better = better && newWorst > (at.data() == rest.data() ? kFlipRestQuality : 0.0);
      }
      if (!better || newWorst < oldWorst + kFlipGain) continue;  // the last pass was at x

      const auto base1 = 3 * static_cast<size_t>(t1), base2 = 3 * static_cast<size_t>(t2);
      triangles[base1] = a, triangles[base1 + 1] = d, triangles[base1 + 2] = c;
      triangles[base2] = d, triangles[base2 + 1] = b, triangles[base2 + 2] = c;
      trianglesOn.erase(found);
      trianglesOn[ordered(c, d)] = {t1, t2};
      moveEdge(ordered(a, d), t2, t1);  // (a, d) was t2's, (b, c) t1's; (c, a), (d, b) stay
      moveEdge(ordered(b, c), t1, t2);
      flipped = true;
    }
    if (!flipped) break;
    any = true;
  }
  return any;
}

}  // namespace

bool FiberModel::splittable(int32_t a, int32_t b, const PointKdTree& nodes,
                            std::vector<uint32_t>& near) const {
  const Vec3 pa = row(restPositions_, static_cast<size_t>(a));
  const Vec3 pb = row(restPositions_, static_cast<size_t>(b));
  const double rest = (pa - pb).norm();
  if (rest <
      kFinestShare * std::min(spacing_[static_cast<size_t>(a)], spacing_[static_cast<size_t>(b)])) {
    return false;
  }
  // A node within a third of the pair's length of its midpoint: the pair runs past it (the
  // pair of a node split earlier, when the network still joins its ends), and a new node
  // would all but coincide with it.
  const Vec3 mid = 0.5 * (pa + pb);
  const double radius = rest / 3.0;
  nodes.withinRadius(mid.data(), radius, near);
  return std::none_of(near.begin(), near.end(), [&](uint32_t j) {
    return (row(restPositions_, j) - mid).squaredNorm() < radius * radius;
  });
}

void FiberModel::buildResamplePairs() {
  resamplePairs_.clear();
  resampleLimit_.clear();
  if (!params_.resample) return;
  const auto n = static_cast<size_t>(network_.nodeCount);
  const auto restDistance = [&](int32_t a, int32_t b) {
    return (row(restPositions_, static_cast<size_t>(a)) -
            row(restPositions_, static_cast<size_t>(b)))
        .norm();
  };
  std::vector<std::pair<int32_t, int32_t>> legs;
  for (size_t j = 0; j < n && triangles_.empty(); ++j) {
    double shortest = std::numeric_limits<double>::infinity();
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const auto fi = static_cast<size_t>(f);
      if ((network_.flags[fi] & kFiberActive) == 0) continue;
      for (const size_t slot : {size_t{0}, size_t{2}}) {
        shortest = std::min(
            shortest, restDistance(static_cast<int32_t>(j), network_.fiberNodes[3 * fi + slot]));
      }
    }
    for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
      const auto fi = static_cast<size_t>(f);
      if ((network_.flags[fi] & kFiberActive) == 0) continue;
      for (const size_t slot : {size_t{0}, size_t{2}}) {
        const int32_t end = network_.fiberNodes[3 * fi + slot];
        if (restDistance(static_cast<int32_t>(j), end) > kFirstRing * shortest) continue;
        legs.push_back(ordered(static_cast<int32_t>(j), end));
      }
    }
  }
  std::sort(legs.begin(), legs.end());
  legs.erase(std::unique(legs.begin(), legs.end()), legs.end());
  std::vector<std::pair<int32_t, int32_t>> pairs;
  if (triangles_.empty()) {
    pairs = std::move(legs);
  } else {
    const std::vector<int32_t> pieces = nodePieces();
    for (size_t t = 0; t + 2 < triangles_.size(); t += 3) {
      for (size_t e = 0; e < 3; ++e) {
        const auto [a, b] = ordered(triangles_[t + e], triangles_[t + (e + 1) % 3]);
        const auto ia = static_cast<size_t>(a), ib = static_cast<size_t>(b);
        if (pieces[ia] != pieces[ib] ||
            separatedByCracks(row(restPositions_, ia), row(restPositions_, ib), cracks_)) {
          continue;
        }
        pairs.emplace_back(a, b);
      }
    }
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }
  if (spacing_.size() != n) {  // the input sampling: s_j, the mean rest length of j's pairs
    std::vector<double> sum(n, 0.0);
    std::vector<int32_t> count(n, 0);
    double total = 0;
    for (const auto& [a, b] : pairs) {
      const double d = restDistance(a, b);
      sum[static_cast<size_t>(a)] += d;
      sum[static_cast<size_t>(b)] += d;
      ++count[static_cast<size_t>(a)];
      ++count[static_cast<size_t>(b)];
      total += d;
    }
    const double mean = pairs.empty() ? 0.0 : total / static_cast<double>(pairs.size());
    spacing_.resize(n);
    for (size_t j = 0; j < n; ++j) spacing_[j] = count[j] > 0 ? sum[j] / count[j] : mean;
  }
  // A point set watches only the pairs that can be split (see the header: not below the
  // finest share, no node at the midpoint). A watched pair past its limit that no batch can
  // split kept the trigger on: every step listed the pairs again and chose none, and a
  // clustered balloon spent 296 s of a 300 s run doing so.
  std::optional<PointKdTree> nodes;
  std::vector<uint32_t> near;
  if (triangles_.empty()) nodes.emplace(restPositions_);
  resamplePairs_.reserve(2 * pairs.size());
  resampleLimit_.reserve(pairs.size());
  for (const auto& [a, b] : pairs) {
    if (nodes && !splittable(a, b, *nodes, near)) continue;
    resamplePairs_.push_back(a);
    resamplePairs_.push_back(b);
    // A point set's leg longer at rest than its ends' spacings (clustered nodes are
    // irregular: legs of 1.4 s at rest are common) is split only once stretched by
    // max_spacing itself; by the spacings alone a clustered balloon went from 1,170 to 1,716 nodes
    // at 7 % of stretch.
    const double restLength = triangles_.empty() ? restDistance(a, b) : 0.0;
    resampleLimit_.push_back(
        params_.resample->maxSpacing *
        std::max({spacing_[static_cast<size_t>(a)], spacing_[static_cast<size_t>(b)], restLength}));
  }
}

bool FiberModel::flipTriangles(std::span<const double> x, std::span<const int32_t> pieces) {
  return flipToBetterTriangles(triangles_, restPositions_, x, [&](int32_t c, int32_t d) {
    const auto ic = static_cast<size_t>(c), id = static_cast<size_t>(d);
    return pieces[ic] == pieces[id] &&
           !separatedByCracks(row(restPositions_, ic), row(restPositions_, id), cracks_);
  });
}

bool FiberModel::resample(std::span<const double> x, TopologyEdit& edit) {
  const size_t pairCount = resampleLimit_.size();
  const auto length = [&](size_t p) {
    return (row(x, static_cast<size_t>(resamplePairs_[2 * p])) -
            row(x, static_cast<size_t>(resamplePairs_[2 * p + 1])))
        .norm();
  };
  bool triggered = false;
  for (size_t p = 0; p < pairCount && !triggered; ++p) triggered = length(p) > resampleLimit_[p];
  if (!triggered) {
    // Between events the triangles follow the motion: once one is a sliver now, flips; a
    // sliver no flip mends is tried again only once the worst is 0.02 worse.
    if (triangles_.empty()) return false;
    const double worst = worstQuality(triangles_, x);
    if (worst >= kReshapeQuality) {
      reshapeQuality_[0] = 1;
    } else if (worst < reshapeQuality_[0] - kReshapeRetry) {
      if (flipTriangles(x, nodePieces())) buildResamplePairs();
      reshapeQuality_[0] = worstQuality(triangles_, x);
    }
    return false;
  }
  // Fibers broke since the pairs were listed: list them again before choosing.
  buildResamplePairs();
  const auto oldCount = static_cast<size_t>(network_.nodeCount);
  struct Candidate {
    double ratio;  // length now / limit
    int32_t a, b;
  };
  std::vector<Candidate> candidates;
  for (size_t p = 0; p < resampleLimit_.size(); ++p) {
    const int32_t a = resamplePairs_[2 * p], b = resamplePairs_[2 * p + 1];
    const double now = length(p);
    const double rest =
        (row(restPositions_, static_cast<size_t>(a)) - row(restPositions_, static_cast<size_t>(b)))
            .norm();
    const double finest =
        kFinestShare * std::min(spacing_[static_cast<size_t>(a)], spacing_[static_cast<size_t>(b)]);
    if (now > kBatchShare * resampleLimit_[p] && rest >= finest) {
      candidates.push_back({now / resampleLimit_[p], a, b});
    }
  }
  if (candidates.empty()) return false;
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& l, const Candidate& r) {
    if (l.ratio != r.ratio) return l.ratio > r.ratio;
    return std::pair(l.a, l.b) < std::pair(r.a, r.b);
  });
  std::vector<Candidate> chosen;
  if (triangles_.empty()) {
    // In order, a candidate is skipped when an earlier chosen one's midpoint lies within a
    // third of its rest length of its own.
    std::vector<double> midpoints(3 * candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
      setRow(midpoints, i,
             0.5 * (row(restPositions_, static_cast<size_t>(candidates[i].a)) +
                    row(restPositions_, static_cast<size_t>(candidates[i].b))));
    }
    const PointKdTree tree(midpoints);
    std::vector<uint8_t> taken(candidates.size(), 0);
    std::vector<uint32_t> near;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const double radius = (row(restPositions_, static_cast<size_t>(candidates[i].a)) -
                             row(restPositions_, static_cast<size_t>(candidates[i].b)))
                                .norm() /
                            3.0;
      const Vec3 mid = row(midpoints, i);
      tree.withinRadius(mid.data(), radius, near);
      const bool crowded = std::any_of(near.begin(), near.end(), [&](uint32_t j) {
        return taken[j] != 0 && (row(midpoints, j) - mid).squaredNorm() < radius * radius;
      });
      if (crowded) continue;
      taken[i] = 1;
      chosen.push_back(candidates[i]);
    }
  } else {
    chosen = std::move(candidates);
  }

  // The new nodes: midpoints at rest and now, their shares of area (header comment).
  const size_t added = chosen.size();
  const size_t n = oldCount + added;
  std::vector<int32_t> splits(oldCount, 0);
  for (const Candidate& c : chosen) {
    ++splits[static_cast<size_t>(c.a)];
    ++splits[static_cast<size_t>(c.b)];
  }
  const std::vector<double> oldAreas = areas_;
  for (size_t k = 0; k < added; ++k) {
    const auto a = static_cast<size_t>(chosen[k].a), b = static_cast<size_t>(chosen[k].b);
    restPositions_.insert(restPositions_.end(), 3, 0.0);
    setRow(restPositions_, oldCount + k, 0.5 * (row(restPositions_, a) + row(restPositions_, b)));
  }
  std::vector<double> share(added, 0.0);  // area the new node takes from each of its two ends
  std::vector<double> areaLeft = oldAreas;
  if (!triangles_.empty()) {
    // Each triangle with the edge (a, b) is cut in two at m: (a, m, c) and (m, b, c), keeping
    // its orientation. a and b each give m a sixth of its rest area (their barycentric thirds
    // of it halve, m gets a third of both halves): barycentric areas stay barycentric.
    std::vector<std::vector<int32_t>> trianglesAt(n);
    for (size_t t = 0; t < triangles_.size() / 3; ++t) {
      for (size_t c = 0; c < 3; ++c) {
        trianglesAt[static_cast<size_t>(triangles_[3 * t + c])].push_back(static_cast<int32_t>(t));
      }
    }
    for (size_t k = 0; k < added; ++k) {
      const int32_t a = chosen[k].a, b = chosen[k].b;
      const auto m = static_cast<int32_t>(oldCount + k);
      const std::vector<int32_t> atA = trianglesAt[static_cast<size_t>(a)];
      for (const int32_t t : atA) {
        const auto base = 3 * static_cast<size_t>(t);
        const auto slotOf = [&](int32_t v) {
          for (size_t c = 0; c < 3; ++c) {
            if (triangles_[base + c] == v) return static_cast<int>(c);
          }
          return -1;
        };
        const int slotA = slotOf(a), slotB = slotOf(b);
        if (slotB < 0) continue;
        const int32_t other = triangles_[base + static_cast<size_t>(3 - slotA - slotB)];
        share[k] += (row(restPositions_, static_cast<size_t>(b)) -
                     row(restPositions_, static_cast<size_t>(a)))
                        .cross(row(restPositions_, static_cast<size_t>(other)) -
                               row(restPositions_, static_cast<size_t>(a)))
                        .norm() /
                    12;  // a sixth of the triangle's area
        std::array<int32_t, 3> second = {triangles_[base], triangles_[base + 1],
                                         triangles_[base + 2]};
        second[static_cast<size_t>(slotA)] = m;
        triangles_[base + static_cast<size_t>(slotB)] = m;
        const auto t2 = static_cast<int32_t>(triangles_.size() / 3);
        triangles_.insert(triangles_.end(), second.begin(), second.end());
        auto& atB = trianglesAt[static_cast<size_t>(b)];
        std::replace(atB.begin(), atB.end(), t, t2);
        trianglesAt[static_cast<size_t>(m)].insert(trianglesAt[static_cast<size_t>(m)].end(),
                                                   {t, t2});
        trianglesAt[static_cast<size_t>(other)].push_back(t2);
      }
    }
  } else {
    // Without triangles: the sixths of two equilateral triangles on the pair, sqrt3/12 l^2, at
    // most 1 / (c + 2) of either end's area (the areas of a regular refinement on a line).
    for (size_t k = 0; k < added; ++k) {
      const auto a = static_cast<size_t>(chosen[k].a), b = static_cast<size_t>(chosen[k].b);
      const double restLength = (row(restPositions_, a) - row(restPositions_, b)).norm();
      share[k] = std::min({std::sqrt(3.0) / 12 * restLength * restLength,
                           oldAreas[a] / (splits[a] + 2), oldAreas[b] / (splits[b] + 2)});
    }
  }

  edit.sourceOffsets.resize(n + 1);
  edit.sourceNodes.clear();
  edit.sourceWeights.clear();
  for (size_t i = 0; i < oldCount; ++i) {
    edit.sourceOffsets[i] = static_cast<int32_t>(i);
    edit.sourceNodes.push_back(static_cast<int32_t>(i));
    edit.sourceWeights.push_back(1.0);
  }
  std::vector<double> xNew(x.begin(), x.end());
  xNew.resize(3 * n);
  for (size_t k = 0; k < added; ++k) {
    const auto a = static_cast<size_t>(chosen[k].a), b = static_cast<size_t>(chosen[k].b);
    // Never more than half of what an end has left (areas that were not barycentric).
    share[k] = std::min({share[k], 0.5 * areaLeft[a], 0.5 * areaLeft[b]});
    areaLeft[a] -= share[k];
    areaLeft[b] -= share[k];
    edit.sourceOffsets[oldCount + k] = static_cast<int32_t>(edit.sourceNodes.size());
    edit.sourceNodes.insert(edit.sourceNodes.end(), {chosen[k].a, chosen[k].b});
    edit.sourceWeights.insert(edit.sourceWeights.end(), {0.5, 0.5});
    setRow(xNew, oldCount + k, 0.5 * (row(x, a) + row(x, b)));
    areas_.push_back(2 * share[k]);
    Vec3 normal = row(restNormals_, a) + row(restNormals_, b);
    normal = normal.norm() > 1e-12 ? Vec3(normal.normalized()) : row(restNormals_, a);
    restNormals_.insert(restNormals_.end(), {normal.x(), normal.y(), normal.z()});
    spacing_.push_back(0.5 * (spacing_[a] + spacing_[b]));
    crackAtNode_.push_back(0);
    if (!lastBreakStep_.empty()) lastBreakStep_.push_back(std::numeric_limits<int64_t>::min() / 2);
    for (std::vector<double>* scale : {&params_.nodeStiffnessScale, &params_.nodeFractureScale}) {
      if (!scale->empty()) scale->push_back(0.5 * ((*scale)[a] + (*scale)[b]));
    }
    if (!cracks_.empty()) {  // otherwise buildTopology finds the free edges again
      const Vec3 ea = row(freeEdgeNormal_, a), eb = row(freeEdgeNormal_, b);
      Vec3 edge = Vec3::Zero();
      if (ea.squaredNorm() > 0 && eb.squaredNorm() > 0) edge = (ea + eb).normalized();
      freeEdgeNormal_.insert(freeEdgeNormal_.end(), {edge.x(), edge.y(), edge.z()});
    }
  }
  edit.sourceOffsets[n] = static_cast<int32_t>(edit.sourceNodes.size());
  for (size_t i = 0; i < oldCount; ++i) areas_[i] = areaLeft[i];
  if (!triangles_.empty()) {
    std::vector<int32_t> pieces = nodePieces();  // the old nodes'; a new node is in its ends'
    for (const Candidate& c : chosen) pieces.push_back(pieces[static_cast<size_t>(c.a)]);
    flipTriangles(xNew, pieces);
  }

  // The elastic strain of every node's fibers at x, for the new fibers of a plastic body.
  std::vector<double> centreStretch, centreAngleChange;
  if (params_.plasticity) {
    centreStretch.assign(n, 1.0);
    centreAngleChange.assign(n, 0.0);
    for (size_t j = 0; j < oldCount; ++j) {
      const Vec3 normal = patchFrame(x, j).normal;
      int count = 0;
      double stretch = 0, angle = 0;
      for (int32_t f = network_.centreOffsets[j]; f < network_.centreOffsets[j + 1]; ++f) {
        const auto fi = static_cast<size_t>(f);
        if ((network_.flags[fi] & kFiberActive) == 0) continue;
        const fiber::Reduced z =
            fiber::reduce(row(x, static_cast<size_t>(network_.fiberNodes[3 * fi])), row(x, j),
                          row(x, static_cast<size_t>(network_.fiberNodes[3 * fi + 2])));
        stretch += fiber::arcLength(z, samples_) / network_.restLength[fi];
        angle += fiber::tangentAngle(z, normal) - network_.restAngle[fi];
        ++count;
      }
      if (count > 0) {
        centreStretch[j] = stretch / count;
        centreAngleChange[j] = angle / count;
      }
    }
    for (size_t k = 0; k < added; ++k) {
      const auto a = static_cast<size_t>(chosen[k].a), b = static_cast<size_t>(chosen[k].b);
      centreStretch[oldCount + k] = 0.5 * (centreStretch[a] + centreStretch[b]);
      centreAngleChange[oldCount + k] = 0.5 * (centreAngleChange[a] + centreAngleChange[b]);
    }
  }

  // Rebuild. A node whose fibers changed counts the fibers it has now as its intact ones
  // (refreshRestMeans scales a node's stiffness by active / original).
  const int64_t fibersBefore = elementCount();
  const double energyBefore = energy(x).total();
  originalFibers_.resize(n, 0);
  rebuildKeepingFiberState(xNew, centreStretch, centreAngleChange);
  std::vector<uint8_t> touched(n, 0);
  for (size_t j = oldCount; j < n; ++j) touched[j] = 1;
  for (size_t f = 0; f < network_.flags.size(); ++f) {
    const bool hasNew = std::any_of(&network_.fiberNodes[3 * f], &network_.fiberNodes[3 * f + 3],
                                    [&](int32_t v) { return static_cast<size_t>(v) >= oldCount; });
    if (hasNew) touched[static_cast<size_t>(network_.fiberNodes[3 * f + 1])] = 1;
  }
  for (size_t j = 0; j < n; ++j) {
    if (touched[j] == 0) continue;
    originalFibers_[j] = network_.fibersAt(static_cast<int32_t>(j));
    refreshRestMeans(j);
  }
  // The nodes that slide: those touched and the ends of their fibers, less those the world
  // moves (a new node between two of them is one as well).
  std::vector<uint8_t> moving = touched;
  for (size_t f = 0; f < network_.flags.size(); ++f) {
    if (touched[static_cast<size_t>(network_.fiberNodes[3 * f + 1])] == 0) continue;
    moving[static_cast<size_t>(network_.fiberNodes[3 * f])] = 1;
    moving[static_cast<size_t>(network_.fiberNodes[3 * f + 2])] = 1;
  }
  if (worldMoved_.size() == oldCount) {
    for (size_t i = 0; i < oldCount; ++i) {
      if (worldMoved_[i] != 0) moving[i] = 0;
    }
    for (size_t k = 0; k < added; ++k) {
      if (worldMoved_[static_cast<size_t>(chosen[k].a)] != 0 &&
          worldMoved_[static_cast<size_t>(chosen[k].b)] != 0) {
        moving[oldCount + k] = 0;
      }
    }
  }
  const double energyAfter = relaxAfterEvent(xNew, moving, energyBefore, edit);
  // The new nodes are closer at rest and the body is stretched now: both lower the stable step.
  stableStep_ = std::min(stableStepAt(restPositions_), stableStepAt(xNew));
  resampleEnergy_[0] += energyAfter - energyBefore;
  reshapeQuality_[0] = 1;
  edit.elementsAdded = std::max<int64_t>(elementCount() - fibersBefore, 0);
  edit.elementsRemoved = std::max<int64_t>(fibersBefore - elementCount(), 0);
  return true;
}

double FiberModel::relaxAfterEvent(std::vector<double>& x, std::span<const uint8_t> moving,
                                   double target, TopologyEdit& edit) const {
  const auto workspace = makeWorkspace();
  double energyNow = energy(x, workspace.get()).total();
  if (energyNow <= target) return energyNow;
  const size_t n = x.size() / 3;
  const std::vector<double> start = x;
  // The directions: the negative gradient on the moving nodes, less its part along N_j at the
  // event's positions (a slide within the surface).
  const std::vector<double> normals = referenceNormals(x);
  double meanSpacing = 0;
  for (const double s : spacing_) meanSpacing += s;
  meanSpacing /= static_cast<double>(std::max<size_t>(spacing_.size(), 1));
  const double longestMove = kRelaxLongestMove * meanSpacing;  // per iteration
  std::vector<double> gradient(x.size()), trial(x.size());
  double step = 0;  // how far the fastest node moves in an iteration, m; 0: not yet chosen
  for (int iteration = 0; iteration < kRelaxIterations && energyNow > target; ++iteration) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    addGradient(x, gradient, workspace.get());
    double largest = 0;
    for (size_t i = 0; i < n; ++i) {
      Vec3 g = Vec3::Zero();
      if (moving[i] != 0) {
        const Vec3 normal = row(normals, i);
        g = row(gradient, i);
        g -= g.dot(normal) * normal;
      }
      setRow(gradient, i, g);
      largest = std::max(largest, g.norm());
    }
    if (!(largest > 0)) break;
    step = std::min(step > 0 ? 2 * step : longestMove, longestMove);
    bool lowered = false;
    for (int halving = 0; halving < 30 && !lowered; ++halving, step *= 0.5) {
      for (size_t c = 0; c < x.size(); ++c) trial[c] = x[c] - step / largest * gradient[c];
      const double energyTrial = energy(trial, workspace.get()).total();
      if (energyTrial < energyNow) {
        energyNow = energyTrial;
        x.swap(trial);
        lowered = true;
        step *= 2;  // undone by the loop's halving
      }
    }
    if (!lowered) break;
  }
  edit.displacements.resize(x.size());
  for (size_t c = 0; c < x.size(); ++c) edit.displacements[c] = x[c] - start[c];
  return energyNow;
}

}  // namespace shellsim
