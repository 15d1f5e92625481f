#include "models/fiber/fiber_network.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <sstream>
#include <utility>

#include "core/crack.hpp"
#include "core/spatial.hpp"
#include "core/tie_grid.hpp"
#include "models/fiber/fiber_kernel.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

struct EndPair {
  int32_t first, second;  // first < second
  auto operator<=>(const EndPair&) const = default;
};

}  // namespace

FiberNetwork buildFiberNetwork(std::span<const double> positions, std::span<const double> normals,
                               const FiberNetworkParams& params, std::vector<std::string>* warnings,
                               std::span<const CrackDisc> cracks, FiberNetworkMemo* memo) {
  const size_t n = positions.size() / 3;
  if (positions.size() % 3 != 0 || normals.size() != positions.size()) {
    throw InputError("fiber network: positions and normals must both have shape (nNodes, 3)");
  }
  if (n < 3) {
    throw InputError("fiber network: needs at least 3 nodes, got " + std::to_string(n));
  }
  if (params.neighbourCount < 2 || params.neighbourCount > kMaxNeighbourCount) {
    throw InputError("fiber network: neighbourCount = " + std::to_string(params.neighbourCount) +
                     ": must be in [2, " + std::to_string(kMaxNeighbourCount) + "]");
  }
  if (params.samples < 1 || params.samples > fiber::kMaxSamples) {
    throw InputError("fiber network: samples = " + std::to_string(params.samples) +
                     ": must be in [1, 16]");
  }
  for (size_t i = 0; i < n; ++i) {
    const Vec3 p = row(positions, i);
    const Vec3 normal = row(normals, i);
    if (!p.allFinite()) {
      throw InputError("fiber network: node " + std::to_string(i) + " has a non-finite position");
    }
    if (!normal.allFinite() || !(normal.norm() > 1e-12)) {
      throw InputError("fiber network: node " + std::to_string(i) +
                       " has a zero or non-finite normal");
    }
  }

  FiberNetwork net;
  net.nodeCount = static_cast<int32_t>(n);
  const size_t k = std::min(static_cast<size_t>(params.neighbourCount), n - 1);
  // A node left the centre of fewer than 2 fibers by its k nearest neighbours (all of them
  // on one side, as next to a cluster of small triangles or where the sampling is uneven)
  // has no stiffness in some directions. Its neighbourhood grows (2k, 3k, ... up to
  // kMaxNeighbourCount) until it centres 2 fibers; the larger set is kept only then, so the
  // corners and straight edges of a sheet, which no neighbourhood gives two fibers, keep
  // their k-neighbour fibers.
  const size_t kMax = std::min(static_cast<size_t>(kMaxNeighbourCount), n - 1);
  double maxDiscRadius = 0;
  std::vector<double> discCentres;  // (nCracks, 3)
  for (const CrackDisc& disc : cracks) {
    maxDiscRadius = std::max(maxDiscRadius, disc.radius);
    discCentres.insert(discCentres.end(), disc.centre.data(), disc.centre.data() + 3);
  }
  std::optional<PointKdTree> discTree;
  if (!cracks.empty()) discTree.emplace(discCentres);
  const double cosOpening = std::cos(params.minOpeningAngleDegrees * std::numbers::pi / 180.0);
  // Next to a crack about half the nearest nodes lie across it and are skipped, so a search
  // that may meet discs queries more. A build with a memo (a body that can crack) queries as
  // many before its first crack, so that the first crack, like the others, searches again
  // only near its disc.
  const bool mayMeetDiscs = !cracks.empty() || memo != nullptr;

  std::vector<std::vector<EndPair>> perNode(n);  // fibers centred at each node
  std::vector<int64_t> coincident(n, -1);        // a node at distance 0, or -1
  std::vector<uint8_t> widened(n, 0);            // the neighbourhood grew past k
  std::vector<double> reach2(n, 0.0);            // squared farthest distance its searches found
  // Nodes to search: all, or with a memo of the same inputs, those a changed disc may cut.
  std::vector<uint8_t> search(n, 1);
  const bool reuse =
      memo != nullptr && memo->nodes && memo->network.nodeCount == static_cast<int32_t>(n) &&
      memo->params == params &&
      std::equal(positions.begin(), positions.end(), memo->nodes->positions.begin(),
                 memo->nodes->positions.end()) &&
      std::equal(normals.begin(), normals.end(), memo->normals.begin(), memo->normals.end());
  if (reuse) {
    const auto same = [](const CrackDisc& a, const CrackDisc& b) {
      return a.centre == b.centre && a.normal == b.normal && a.radius == b.radius;
    };
    const auto missingFrom = [&](const CrackDisc& disc, std::span<const CrackDisc> list) {
      return std::none_of(list.begin(), list.end(),
                          [&](const CrackDisc& other) { return same(disc, other); });
    };
    std::vector<CrackDisc> changed;
    for (const CrackDisc& disc : cracks) {
      if (missingFrom(disc, memo->cracks)) changed.push_back(disc);
    }
    for (const CrackDisc& disc : memo->cracks) {
      if (missingFrom(disc, cracks)) changed.push_back(disc);
    }
    if (changed.empty() && warnings == nullptr) {
      // The same discs (a rebuild that only confines patches to pieces): every node keeps
      // its fibers, which is what the loops below would copy.
      memo->cracks.assign(cracks.begin(), cracks.end());
      return memo->network;
    }
    for (size_t c = 0; c < n; ++c) {
      const Vec3 p = row(positions, c);
      // A relative margin for the rounding of both distances: searching again is harmless.
      search[c] = std::any_of(changed.begin(), changed.end(), [&](const CrackDisc& disc) {
        return (p - disc.centre).norm() <= (memo->reach[c] + disc.radius) * (1 + 1e-9);
      });
    }
  }
  // The tree over the nodes, kept by the memo for the next build over the same nodes.
  const std::shared_ptr<const OwnedKdTree> nodes =
      reuse ? memo->nodes : std::make_shared<const OwnedKdTree>(positions);
  const PointKdTree& tree = nodes->tree;
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, 256), [&](const tbb::blocked_range<size_t>& r) {
        std::vector<uint32_t> found;
        std::vector<double> distances2;
        std::vector<std::pair<int64_t, uint32_t>> sorted;  // (squared distance's tie key, node)
        std::vector<uint32_t> discIndices;
        std::vector<CrackDisc> nearDiscs;
        std::vector<EndPair> fibers;
        // The fibers of centre c through its `neighbours` nearest visible nodes; false if c
        // coincides with a node.
        const auto fibersThrough = [&](size_t c, size_t neighbours) {
          // Query a few more than k + 1 so that ties at the k-th distance are broken by
          // index, not by the kd-tree's traversal order.
          const size_t query = std::min(mayMeetDiscs ? 2 * neighbours + 8 : neighbours + 5, n);
          found.resize(query);
          distances2.resize(query);
          const size_t count =
              tree.nearest(&positions[3 * c], query, found.data(), distances2.data());
          if (count > 0) reach2[c] = std::max(reach2[c], distances2[count - 1]);
          nearDiscs.clear();
          if (discTree && count > 0) {
            // A disc can only cut a segment from c if its centre is within the segment's
            // length plus the disc's radius of c.
            const double reach = std::sqrt(distances2[count - 1]) + maxDiscRadius;
            discTree->withinRadius(&positions[3 * c], reach, discIndices);
            for (const uint32_t d : discIndices) nearDiscs.push_back(cracks[d]);
          }
          // Distances, cosines and rule (b) on the tie grid (core/tie_grid.hpp): a grid's
          // equidistant and exactly opposite neighbours are chosen by index, not by rounding.
          sorted.clear();
          const Vec3 p = row(positions, c);
          const double scale2 = count > 0 ? distances2[count - 1] : 0.0;
          for (size_t i = 0; i < count; ++i) {
            if (found[i] == c) continue;
            if (!nearDiscs.empty() && separatedByCracks(p, row(positions, found[i]), nearDiscs)) {
              continue;
            }
            if (distances2[i] == 0.0) {
              coincident[c] = found[i];
              return false;
            }
            sorted.emplace_back(tieKey(distances2[i], scale2), found[i]);
          }
          std::sort(sorted.begin(), sorted.end());
          if (sorted.size() > neighbours) sorted.resize(neighbours);
          fibers.clear();
          for (size_t i = 0; i < sorted.size(); ++i) {
            const Vec3 di = row(positions, sorted[i].second) - p;
            int64_t bestCos = std::numeric_limits<int64_t>::max();
            size_t best = i;
            for (size_t j = 0; j < sorted.size(); ++j) {
              if (j == i) continue;
              const Vec3 dj = row(positions, sorted[j].second) - p;
              const int64_t cosine = tieKey(di.dot(dj) / (di.norm() * dj.norm()), 1.0);
              if (cosine < bestCos) {  // strict: the nearer (earlier) node wins a tie
                bestCos = cosine;
                best = j;
              }
            }
            if (best == i || bestCos > tieKey(cosOpening, 1.0)) continue;  // rule (a)
            const auto a = static_cast<int32_t>(sorted[i].second);
            const auto b = static_cast<int32_t>(sorted[best].second);
            fibers.push_back({std::min(a, b), std::max(a, b)});
          }
          std::sort(fibers.begin(), fibers.end());
          fibers.erase(std::unique(fibers.begin(), fibers.end()), fibers.end());
          // Rule (b): the rest spline's end tangents turn by less than
          // acos(minEndTangentCosine).
          std::erase_if(fibers, [&](const EndPair& f) {
            const fiber::Reduced z = fiber::reduce(row(positions, static_cast<size_t>(f.first)), p,
                                                   row(positions, static_cast<size_t>(f.second)));
            const Vec3 t0 = z.e - fiber::kTangentWeight * z.q;
            const Vec3 t1 = z.e + fiber::kTangentWeight * z.q;
            const double norms = t0.norm() * t1.norm();
            if (!(norms > 0)) return false;
            return tieKey(t0.dot(t1) / norms, 1.0) < tieKey(params.minEndTangentCosine, 1.0);
          });
          return true;
        };
        for (size_t c = r.begin(); c != r.end(); ++c) {
          if (search[c] == 0) {  // kept from the memo (its fibers are copied below)
            widened[c] = memo->widened[c];
            continue;
          }
          if (!fibersThrough(c, k)) continue;
          perNode[c] = fibers;
          for (size_t grown = k; perNode[c].size() < 2 && grown < kMax;) {
            grown = std::min(grown + k, kMax);
            if (!fibersThrough(c, grown)) break;
            if (fibers.size() >= 2) {
              perNode[c] = fibers;
              widened[c] = 1;
            }
          }
        }
      });
  for (size_t c = 0; c < n; ++c) {
    if (coincident[c] >= 0) {
      std::ostringstream msg;
      msg << "fiber network: nodes " << std::min<int64_t>(static_cast<int64_t>(c), coincident[c])
          << " and " << std::max<int64_t>(static_cast<int64_t>(c), coincident[c])
          << " coincide (zero distance)";
      throw InputError(msg.str());
    }
  }

  net.centreOffsets.assign(n + 1, 0);
  for (size_t c = 0; c < n; ++c) {
    net.centreOffsets[c + 1] =
        net.centreOffsets[c] + (search[c] != 0 ? static_cast<int32_t>(perNode[c].size())
                                               : memo->network.fibersAt(static_cast<int32_t>(c)));
  }
  const auto fiberCount = static_cast<size_t>(net.centreOffsets[n]);
  net.fiberNodes.resize(3 * fiberCount);
  net.restLength.resize(fiberCount);
  net.restAngle.resize(fiberCount);
  net.flags.assign(fiberCount, kFiberActive);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, n, 256), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t c = r.begin(); c != r.end(); ++c) {
          // Unit normals are used bit for bit (the model passes its own, so that the rest
          // angles equal the angles it evaluates at rest exactly); others are normalised.
          auto f = static_cast<size_t>(net.centreOffsets[c]);
          if (search[c] == 0) {  // the same fibers as the memo's, so the same rest values
            const FiberNetwork& last = memo->network;
            const auto from = static_cast<size_t>(last.centreOffsets[c]);
            const auto count = static_cast<size_t>(last.fibersAt(static_cast<int32_t>(c)));
            std::copy_n(last.fiberNodes.begin() + static_cast<ptrdiff_t>(3 * from), 3 * count,
                        net.fiberNodes.begin() + static_cast<ptrdiff_t>(3 * f));
            std::copy_n(last.restLength.begin() + static_cast<ptrdiff_t>(from), count,
                        net.restLength.begin() + static_cast<ptrdiff_t>(f));
            std::copy_n(last.restAngle.begin() + static_cast<ptrdiff_t>(from), count,
                        net.restAngle.begin() + static_cast<ptrdiff_t>(f));
            continue;
          }
          Vec3 normal = row(normals, c);
          if (std::abs(normal.norm() - 1.0) > 1e-12) normal.normalize();
          for (const EndPair& ends : perNode[c]) {
            net.fiberNodes[3 * f] = ends.first;
            net.fiberNodes[3 * f + 1] = static_cast<int32_t>(c);
            net.fiberNodes[3 * f + 2] = ends.second;
            const fiber::Reduced z =
                fiber::reduce(row(positions, static_cast<size_t>(ends.first)), row(positions, c),
                              row(positions, static_cast<size_t>(ends.second)));
            net.restLength[f] = fiber::arcLength(z, params.samples);
            net.restAngle[f] = fiber::tangentAngle(z, normal);
            ++f;
          }
        }
      });
  net.incidence = buildIncidence(net.fiberNodes, net.nodeCount);
  net.widenedNodeCount = static_cast<int32_t>(std::count(widened.begin(), widened.end(), 1));
  if (memo != nullptr) {
    if (!reuse) {
      memo->nodes = nodes;
      memo->normals.assign(normals.begin(), normals.end());
      memo->params = params;
      memo->reach.assign(n, 0.0);
    }
    for (size_t c = 0; c < n; ++c) {
      if (search[c] != 0) memo->reach[c] = std::sqrt(reach2[c]);
    }
    memo->cracks.assign(cracks.begin(), cracks.end());
    memo->widened = widened;
    memo->network = net;
  }

  if (warnings != nullptr) {
    std::vector<int32_t> weak;
    for (size_t c = 0; c < n; ++c) {
      if (net.fibersAt(static_cast<int32_t>(c)) < 2) weak.push_back(static_cast<int32_t>(c));
    }
    // A few such nodes are normal (the corners of a sheet are held only as fiber ends);
    // more than 1% of the nodes means features smaller than the node spacing (tips, hooves,
    // thin tubes), where no neighbourhood, however widened, surrounds the node.
    if (100 * weak.size() > n) {
      std::ostringstream msg;
      msg << "fiber network: " << weak.size() << " of " << n
          << " nodes are the centre of fewer than 2 fibers and have no stretching or bending "
             "stiffness in some directions (e.g. node";
      for (size_t i = 0; i < std::min<size_t>(weak.size(), 5); ++i) {
        msg << ' ' << weak[i] << " (" << net.fibersAt(weak[i]) << ")";
      }
      const Vec3 first = row(positions, static_cast<size_t>(weak.front()));
      // Named as the scene spells them (FiberDef's `neighbours`, `node_count`).
      msg << "; node " << weak.front() << " at (" << first.x() << ", " << first.y() << ", "
          << first.z() << ")), even with up to " << kMax
          << " neighbours: they sit on tips or on features narrower than the node spacing; "
             "give more nodes (node_count or node_spacing) or sample the surface more evenly "
             "(remesh it)";
      warnings->push_back(msg.str());
    }
  }
  return net;
}

}  // namespace shellsim
