#include "models/discrete_shell/discrete_shell_model.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>

#include "core/lane_gather.hpp"
#include "geometry/triangle_mesh.hpp"
#include "models/discrete_shell/discrete_shell_kernel.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

using discrete_shell::Mat12;
using discrete_shell::Mat6;
using discrete_shell::Mat9;

Vec3 vertex(std::span<const double> positions, int32_t i) {
  const size_t o = 3 * static_cast<size_t>(i);
  return {positions[o], positions[o + 1], positions[o + 2]};
}

[[noreturn]] void fail(const std::string& what) {
  throw InputError("discrete_shell: " + what);
}

// Per-hinge scale of the bending stiffness, header comment (c):
//   s_h = (v(x2) + v(x3)) / 12,
// v the equivalent valence of an apex, its number of triangles times 2 pi over the sum of
// their angles at it (the valence of an interior vertex of a flat mesh; a vertex on a
// straight boundary counts as if the mesh were mirrored across it).
void scaleHingesByApexValence(std::span<const double> positions, std::span<const int32_t> triangles,
                              std::span<const int32_t> hingeNodes, std::vector<double>& stiffness) {
  const size_t nodes = positions.size() / 3;
  std::vector<double> count(nodes, 0.0), angle(nodes, 0.0);
  for (size_t t = 0; t < triangles.size() / 3; ++t) {
    for (size_t c = 0; c < 3; ++c) {
      const int32_t v = triangles[3 * t + c];
      const Vec3 p = vertex(positions, v);
      const Vec3 a = vertex(positions, triangles[3 * t + (c + 1) % 3]) - p;
      const Vec3 b = vertex(positions, triangles[3 * t + (c + 2) % 3]) - p;
      count[static_cast<size_t>(v)] += 1;
      angle[static_cast<size_t>(v)] += std::atan2(a.cross(b).norm(), a.dot(b));
    }
  }
  const auto valence = [&](int32_t v) {
    const auto i = static_cast<size_t>(v);
    return count[i] * 2 * std::numbers::pi / angle[i];
  };
  for (size_t k = 0; k < stiffness.size(); ++k) {
    stiffness[k] *= (valence(hingeNodes[4 * k + 2]) + valence(hingeNodes[4 * k + 3])) / 12;
  }
}

}  // namespace

DiscreteShellModel::DiscreteShellModel(const Geometry& mesh, const MaterialDef& material,
                                       const DiscreteShellParams& params,
                                       std::vector<std::string>* warnings)
    : projectHessian_(params.projectHessian) {
  const TriangleMeshTopology topology = checkedTriangleMesh(mesh, "discrete_shell");
  nodeCount_ = mesh.vertexCount();
  const auto nodes = static_cast<size_t>(nodeCount_);
  const auto triangleCount = static_cast<size_t>(mesh.triangleCount());
  triangles_ = mesh.triangles;
  restPositions_ = mesh.positions;

  // Rest areas, masses.
  triangleRestArea_ = topology.restArea;
  mass_ = lumpedMasses(triangles_, triangleRestArea_, material.density * material.thickness,
                       nodeCount_);

  // Edges (in the topology's order) and a hinge per interior edge: triangle A (the first
  // side) traverses the edge x0 -> x1, triangle B x1 -> x0.
  const auto corner = [&](int32_t triangle, int32_t c, int offset) {
    return triangles_[3 * static_cast<size_t>(triangle) + static_cast<size_t>((c + offset) % 3)];
  };
  edgeNodes_ = topology.edgeNodes;
  const size_t edgeTotal = edgeNodes_.size() / 2;
  std::vector<double> edgeArea(edgeTotal);  // sum of incident rest triangle areas
  std::vector<int32_t> hingeEdge;           // the edge of each hinge, (nHinges)
  for (size_t k = 0; k < edgeTotal; ++k) {
    const int32_t* side = &topology.edgeSides[4 * k];
    edgeArea[k] = triangleRestArea_[static_cast<size_t>(side[0])];
    if (side[2] < 0) {
      boundaryEdges_.push_back(static_cast<int32_t>(k));
      continue;
    }
    edgeArea[k] += triangleRestArea_[static_cast<size_t>(side[2])];
    hingeNodes_.insert(hingeNodes_.end(),
                       {corner(side[0], side[1], 0), corner(side[0], side[1], 1),
                        corner(side[0], side[1], 2), corner(side[2], side[3], 2)});
    hingeEdge.push_back(static_cast<int32_t>(k));
  }

  // Stiffnesses (material map in the header comment).
  const double e = material.youngModulus;
  const double nu = material.poisson;
  const double h = material.thickness;
  double ks = 4 * e * h / (3 * (1 + nu));
  double ka = e * h * (3 * nu - 1) / (2 * (1 - nu * nu));
  if (ka < 0) {
    ka = 0;
    ks = 2 * e * h / (3 * (1 - nu));
    if (warnings != nullptr && !params.stretchStiffness && !params.areaStiffness) {
      std::ostringstream msg;
      msg << "discrete_shell: Poisson ratio " << nu
          << " < 1/3 is not represented by edge and area terms; the membrane keeps the areal "
             "stiffness E h / (1 - nu) and has Poisson ratio 1/3";
      warnings->push_back(msg.str());
    }
  }
  const double bendingRigidity = e * h * h * h / (12 * (1 - nu * nu));  // D, N m
  const double kB = params.bendStiffness ? *params.bendStiffness : bendingRigidity / 6;

  const size_t edgeCount = edgeArea.size();
  edgeRestLength_.resize(edgeCount);
  edgeStiffness_.resize(edgeCount);
  for (size_t k = 0; k < edgeCount; ++k) {
    const double length =
        (vertex(mesh.positions, edgeNodes_[2 * k + 1]) - vertex(mesh.positions, edgeNodes_[2 * k]))
            .norm();
    edgeRestLength_[k] = length;
    if (params.stretchStiffness) {
      edgeStiffness_[k] = 2 * *params.stretchStiffness / length;
    } else if (material.stiffness) {
      edgeStiffness_[k] = *material.stiffness;
    } else {
      edgeStiffness_[k] = ks * edgeArea[k] / (length * length);
    }
  }
  triangleStiffness_.resize(triangleCount);
  for (size_t t = 0; t < triangleCount; ++t) {
    triangleStiffness_[t] = params.areaStiffness ? 2 * *params.areaStiffness / triangleRestArea_[t]
                                                 : ka / triangleRestArea_[t];
  }
  const size_t hingeCount = hingeNodes_.size() / 4;
  hingeRestAngle_.resize(hingeCount);
  hingeStiffness_.resize(hingeCount);
  for (size_t k = 0; k < hingeCount; ++k) {
    const int32_t* ids = &hingeNodes_[4 * k];
    const Vec3 x0 = vertex(mesh.positions, ids[0]);
    const Vec3 x1 = vertex(mesh.positions, ids[1]);
    const Vec3 x2 = vertex(mesh.positions, ids[2]);
    const Vec3 x3 = vertex(mesh.positions, ids[3]);
    hingeRestAngle_[k] = discrete_shell::dihedralAngle(x0, x1, x2, x3);
    const double restArea =
        discrete_shell::triangleArea(x0, x1, x2) + discrete_shell::triangleArea(x1, x0, x3);
    hingeStiffness_[k] = 2 * kB * 3 * (x1 - x0).squaredNorm() / restArea;
  }
  if (!params.bendStiffness && params.calibrateBending && hingeCount > 0) {
    scaleHingesByApexValence(mesh.positions, triangles_, hingeNodes_, hingeStiffness_);
  }

  const auto anyNonZero = [](const std::vector<double>& values) {
    return std::any_of(values.begin(), values.end(), [](double v) { return v != 0.0; });
  };
  hasEdgeTerm_ = anyNonZero(edgeStiffness_);
  hasAreaTerm_ = anyNonZero(triangleStiffness_);
  hasBending_ = anyNonZero(hingeStiffness_);
  buildForceLayout(mesh.positions, hingeEdge);

  // Stable step: Gershgorin on S = M^-1/2 K M^-1/2 at rest. At rest every stencil's
  // residual (l - L, A - A0, theta - theta0) is exactly zero, so its Hessian is the rank-one
  // k w w^T, w the gradient of its length, area or angle (discrete_shell_kernel.hpp); its
  // rows' absolute sums, scaled, are k |w_i| m_i^-1/2 sum_j |w_j| m_j^-1/2. Adding them
  // stencil by stencil bounds the assembled rows' absolute sums from above.
  std::vector<double> rowSum(3 * nodes, 0.0);
  std::vector<double> invSqrtMass(nodes);
  for (size_t v = 0; v < nodes; ++v) invSqrtMass[v] = 1.0 / std::sqrt(mass_[v]);
  const auto accumulate = [&](const int32_t* ids, int count, double stiffness, const Vec3* w) {
    double sum = 0;
    for (int a = 0; a < count; ++a) {
      sum += w[a].cwiseAbs().sum() * invSqrtMass[static_cast<size_t>(ids[a])];
    }
    for (int a = 0; a < count; ++a) {
      const auto node = static_cast<size_t>(ids[a]);
      for (int i = 0; i < 3; ++i) {
        rowSum[3 * node + static_cast<size_t>(i)] +=
            std::abs(stiffness) * std::abs(w[a][i]) * invSqrtMass[node] * sum;
      }
    }
  };
  for (size_t k = 0; k < edgeCount; ++k) {
    const Vec3 u = (vertex(mesh.positions, edgeNodes_[2 * k + 1]) -
                    vertex(mesh.positions, edgeNodes_[2 * k])) /
                   edgeRestLength_[k];
    const Vec3 w[2] = {-u, u};  // dl/dx
    accumulate(&edgeNodes_[2 * k], 2, edgeStiffness_[k], w);
  }
  for (size_t t = 0; t < triangleCount; ++t) {
    Vec3 p[3];
    for (int c = 0; c < 3; ++c) {
      p[c] = vertex(mesh.positions, triangles_[3 * t + static_cast<size_t>(c)]);
    }
    const Vec3 normal = (p[1] - p[0]).cross(p[2] - p[0]).normalized();
    Vec3 w[3];  // dA/dx_i = 1/2 nh x e_i
    for (int c = 0; c < 3; ++c) w[c] = 0.5 * normal.cross(p[(c + 2) % 3] - p[(c + 1) % 3]);
    accumulate(&triangles_[3 * t], 3, triangleStiffness_[t], w);
  }
  for (size_t k = 0; k < hingeCount; ++k) {
    Vec3 p[4], w[4];  // dtheta/dx
    for (int c = 0; c < 4; ++c) {
      p[c] = vertex(mesh.positions, hingeNodes_[4 * k + static_cast<size_t>(c)]);
    }
    discrete_shell::dihedralAngleGradient(p, w);
    accumulate(&hingeNodes_[4 * k], 4, hingeStiffness_[k], w);
  }
  const double lambda = rowSum.empty() ? 0.0 : *std::max_element(rowSum.begin(), rowSum.end());
  stableStep_ = lambda > 0 ? 2.0 / std::sqrt(lambda) : std::numeric_limits<double>::infinity();
}

namespace {

// Scratch of one force evaluation (addGradient).
struct DiscreteShellWorkspace : ModelWorkspace {
  std::vector<double> slotGradient;  // (slotCount_): every stencil's gradient, in lanes
  std::vector<double> chunkEnergy;   // (nChunks, 2): stretching, bending, J
};

}  // namespace

std::unique_ptr<ModelWorkspace> DiscreteShellModel::makeWorkspace() const {
  return std::make_unique<DiscreteShellWorkspace>();
}

EnergyParts DiscreteShellModel::energy(std::span<const double> x, ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::energy(x);
  return addGradient(x, {}, workspace);
}

// Lanes and slots of the force evaluation (the members' comments in the header).
void DiscreteShellModel::buildForceLayout(std::span<const double> restPositions,
                                          std::span<const int32_t> hingeEdge) {
  using discrete_shell::kLanes;
  const auto batches = [](size_t count) {
    return static_cast<int64_t>((count + kLanes - 1) / kLanes);
  };
  if (3 * static_cast<size_t>(nodeCount_) >
      static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("mesh too large: more than 2^31 / 3 nodes");
  }
  const size_t hingeCount = hingeRestAngle_.size();
  const bool fused = hasEdgeTerm_ || hasBending_;
  hingeBatches_ = fused ? batches(hingeCount) : 0;
  boundaryEdgeBatches_ = hasEdgeTerm_ ? batches(boundaryEdges_.size()) : 0;
  triangleBatches_ = hasAreaTerm_ ? batches(triangleRestArea_.size()) : 0;
  const auto lanes = static_cast<size_t>(hingeBatches_) * kLanes;
  laneOffsets_.assign(4 * lanes, 0);
  laneParameters_.assign(4 * lanes, 0.0);
  const size_t triangleCount = triangleRestArea_.size();
  const auto triangleLanes = static_cast<size_t>(triangleBatches_) * kLanes;
  laneTriangleOffsets_.assign(3 * triangleLanes, 0);
  laneTriangleParameters_.assign(2 * triangleLanes, 0.0);
  for (size_t t = 0; t < (triangleBatches_ > 0 ? triangleCount : 0); ++t) {
    const size_t base = 3 * (t - t % kLanes) + t % kLanes;  // (batch, slot 0, lane)
    for (size_t c = 0; c < 3; ++c) {
      laneTriangleOffsets_[base + c * kLanes] = 3 * triangles_[3 * t + c];
    }
    const size_t parameterBase = 2 * (t - t % kLanes) + t % kLanes;
    laneTriangleParameters_[parameterBase] = triangleStiffness_[t];
    laneTriangleParameters_[parameterBase + kLanes] = triangleRestArea_[t];
  }
  for (size_t k = 0; k < (fused ? hingeCount : 0); ++k) {
    const size_t base = 4 * (k - k % kLanes) + k % kLanes;  // (batch, slot 0, lane)
    const auto edge = static_cast<size_t>(hingeEdge[k]);
    for (size_t c = 0; c < 4; ++c) laneOffsets_[base + c * kLanes] = 3 * hingeNodes_[4 * k + c];
    laneParameters_[base] = hingeRestAngle_[k];
    laneParameters_[base + kLanes] = hingeStiffness_[k];
    laneParameters_[base + 2 * kLanes] = edgeRestLength_[edge];
    laneParameters_[base + 3 * kLanes] = edgeStiffness_[edge];
  }
  const auto reachesEnd = [this](const std::vector<int32_t>& offsets, int64_t batchCount,
                                 size_t slots) {
    const int32_t last = 3 * (nodeCount_ - 1);
    const size_t perChunk = slots * kLanes * kChunkBatches;
    std::vector<uint8_t> flags(
        static_cast<size_t>((batchCount + kChunkBatches - 1) / kChunkBatches), 0);
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (offsets[i] == last) flags[i / perChunk] = 1;
    }
    return flags;
  };
  hingeChunkReachesEnd_ = reachesEnd(laneOffsets_, hingeBatches_, 4);
  triangleChunkReachesEnd_ = reachesEnd(laneTriangleOffsets_, triangleBatches_, 3);
  // Rest angles, hinge-edge lengths and triangle areas of the lanes from the lane kernels
  // themselves at the rest positions, so that d, l - L and A - A0 are exactly 0 at rest
  // (the scalar values above may differ in the last bit, e.g. with FMA). The energies and
  // gradients of this pass are discarded.
  {
    std::vector<double> gradient(12 * kLanes);
    std::vector<double> energy(kLanes), energy2(kLanes), shape(2 * kLanes);
    forEachGatheredBatch<4>(
        restPositions.data(), laneOffsets_.data(), hingeBatches_, true,
        [&](int64_t b, const double* positions) {
          double* parameters = &laneParameters_[4 * kLanes * static_cast<size_t>(b)];
          discrete_shell::hingeEdgeEnergyLanes(positions, parameters, energy.data(), energy2.data(),
                                               gradient.data(), shape.data());
          for (size_t l = 0; l < kLanes && kLanes * static_cast<size_t>(b) + l < hingeCount; ++l) {
            parameters[l] = shape[l];                        // theta0
            parameters[2 * kLanes + l] = shape[kLanes + l];  // L
          }
        });
    forEachGatheredBatch<3>(
        restPositions.data(), laneTriangleOffsets_.data(), triangleBatches_, true,
        [&](int64_t b, const double* positions) {
          double* parameters = &laneTriangleParameters_[2 * kLanes * static_cast<size_t>(b)];
          discrete_shell::triangleEnergyLanes(positions, parameters, energy.data(), gradient.data(),
                                              shape.data());
          for (size_t l = 0; l < kLanes && kLanes * static_cast<size_t>(b) + l < triangleCount;
               ++l) {
            parameters[kLanes + l] = shape[l];  // A0
          }
        });
  }
  // The node of every slot and its offset in slotGradient_, family after family: slot c of
  // element e of a family with K slots starting at `base` is at
  // base + 3 K kLanes (e / kLanes) + 3 (kLanes c + e % kLanes) (then +1: y, +2: z).
  std::vector<int32_t> slotNodes;
  std::vector<int32_t> slotOffsets;
  size_t base = 0;
  const auto addFamily = [&](size_t count, size_t k, const auto& node) {
    for (size_t e = 0; e < count; ++e) {
      for (size_t c = 0; c < k; ++c) {
        slotNodes.push_back(node(e, c));
        slotOffsets.push_back(
            static_cast<int32_t>(base + 3 * k * (e - e % kLanes) + 3 * (kLanes * c + e % kLanes)));
      }
    }
    base += 3 * k * kLanes * ((count + kLanes - 1) / kLanes);
  };
  if (hingeBatches_ > 0) {
    addFamily(hingeCount, 4, [&](size_t e, size_t c) { return hingeNodes_[4 * e + c]; });
  }
  if (boundaryEdgeBatches_ > 0) {
    addFamily(boundaryEdges_.size(), 2, [&](size_t e, size_t c) {
      return edgeNodes_[2 * static_cast<size_t>(boundaryEdges_[e]) + c];
    });
  }
  if (triangleBatches_ > 0) {
    addFamily(triangleRestArea_.size(), 3,
              [&](size_t e, size_t c) { return triangles_[3 * e + c]; });
  }
  if (base > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("mesh too large: more than 2^31 gradient slots");
  }
  slotIncidence_ = buildIncidence(slotNodes, nodeCount_);
  for (int32_t& entry : slotIncidence_.entries) entry = slotOffsets[static_cast<size_t>(entry)];
  slotCount_ = base;
}

EnergyParts DiscreteShellModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                            ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::addGradient(x, gradient);
  auto& scratch = dynamic_cast<DiscreteShellWorkspace&>(*workspace);
  // Padding lanes are never written: they keep the zeros the slots start with.
  if (scratch.slotGradient.size() != slotCount_) scratch.slotGradient.assign(slotCount_, 0.0);
  std::vector<double>& chunkEnergy = scratch.chunkEnergy;
  using discrete_shell::kLanes;
  // Fixed chunks of kChunk batches are the parallel tasks; each sums its energies in
  // element order (lane by lane, then the lanes in order) and the chunks are added in
  // order, so the sums do not depend on the thread count. Chunks: the hinge batches, then
  // the boundary edges, then the triangle batches.
  constexpr int64_t kChunk = kChunkBatches;
  const auto chunksOf = [](int64_t batches) { return (batches + kChunk - 1) / kChunk; };
  const int64_t hingeChunks = chunksOf(hingeBatches_);
  const int64_t edgeChunks = chunksOf(boundaryEdgeBatches_);
  const int64_t chunks = hingeChunks + edgeChunks + chunksOf(triangleBatches_);
  chunkEnergy.resize(2 * static_cast<size_t>(chunks));
  double* const slots = scratch.slotGradient.data();
  double* const edgeSlots = slots + 12 * kLanes * hingeBatches_;
  double* const triangleSlots = edgeSlots + 6 * kLanes * boundaryEdgeBatches_;
  const double* const xs = x.data();

  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t chunk = r.begin(); chunk != r.end(); ++chunk) {
          double stretching = 0, bending = 0;
          double sumStretching[kLanes] = {}, sumBending[kLanes] = {};
          if (chunk < hingeChunks) {
            const int64_t first = chunk * kChunk;
            const int64_t last = std::min(first + kChunk, hingeBatches_);
            discrete_shell::hingeEdgeEnergyBatches(
                xs, &laneOffsets_[4 * kLanes * first], &laneParameters_[4 * kLanes * first],
                last - first, hingeChunkReachesEnd_[static_cast<size_t>(chunk)] != 0, sumBending,
                sumStretching, slots + 12 * kLanes * first);
          } else if (chunk < hingeChunks + edgeChunks) {
            // Boundary edges one by one (few), into their lanes.
            const auto begin = static_cast<size_t>((chunk - hingeChunks) * kChunk * kLanes);
            const size_t end = std::min(begin + kChunk * kLanes, boundaryEdges_.size());
            Vec3 ends[2], g[2];
            for (size_t e = begin; e < end; ++e) {
              const auto edge = static_cast<size_t>(boundaryEdges_[e]);
              for (size_t c = 0; c < 2; ++c) ends[c] = vertex(x, edgeNodes_[2 * edge + c]);
              stretching +=
                  discrete_shell::edgeEnergy(edgeStiffness_[edge], edgeRestLength_[edge], ends, g);
              double* out = edgeSlots + 6 * (e - e % kLanes) + 3 * (e % kLanes);
              for (int c = 0; c < 2; ++c) {
                for (int i = 0; i < 3; ++i) out[3 * kLanes * c + i] = g[c][i];
              }
            }
          } else {
            const int64_t first = (chunk - hingeChunks - edgeChunks) * kChunk;
            const int64_t last = std::min(first + kChunk, triangleBatches_);
            discrete_shell::triangleEnergyBatches(
                xs, &laneTriangleOffsets_[3 * kLanes * first],
                &laneTriangleParameters_[2 * kLanes * first], last - first,
                triangleChunkReachesEnd_[static_cast<size_t>(chunk - hingeChunks - edgeChunks)] !=
                    0,
                sumStretching, triangleSlots + 9 * kLanes * first);
          }
          for (int l = 0; l < kLanes; ++l) {
            bending += sumBending[l];
            stretching += sumStretching[l];
          }
          chunkEnergy[2 * static_cast<size_t>(chunk)] = stretching;
          chunkEnergy[2 * static_cast<size_t>(chunk) + 1] = bending;
        }
      });

  EnergyParts parts;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    parts.stretching += chunkEnergy[2 * static_cast<size_t>(chunk)];
    parts.bending += chunkEnergy[2 * static_cast<size_t>(chunk) + 1];
  }
  if (!gradient.empty())
    gatherIncidentGradients<1, 1>(slotIncidence_, scratch.slotGradient, gradient);
  return parts;
}

std::vector<int32_t> DiscreteShellModel::hessianBlockNodes() const {
  // Edges, triangles, hinges: the order hessianBlocks() writes.
  std::vector<int32_t> pairs;
  stencilBlockNodes<2>(edgeNodes_, pairs);
  stencilBlockNodes<3>(triangles_, pairs);
  stencilBlockNodes<4>(hingeNodes_, pairs);
  return pairs;
}

bool DiscreteShellModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  const size_t edgeValues = 36 * edgeRestLength_.size();
  const size_t triangleValues = 81 * triangleRestArea_.size();
  stencilHessianBlocks<2>(edgeNodes_, x, values.subspan(0, edgeValues),
                          [this](size_t k, const Vec3(&xs)[2], Vec3(&g)[2], Mat6& h) {
                            discrete_shell::edgeEnergyHessian(edgeStiffness_[k], edgeRestLength_[k],
                                                              xs, g, h);
                            if (projectHessian_)
                              discrete_shell::projectToPositiveSemiDefinite<6>(h);
                          });
  stencilHessianBlocks<3>(triangles_, x, values.subspan(edgeValues, triangleValues),
                          [this](size_t t, const Vec3(&xs)[3], Vec3(&g)[3], Mat9& h) {
                            discrete_shell::triangleEnergyHessian(triangleStiffness_[t],
                                                                  triangleRestArea_[t], xs, g, h);
                            if (projectHessian_)
                              discrete_shell::projectToPositiveSemiDefinite<9>(h);
                          });
  stencilHessianBlocks<4>(hingeNodes_, x, values.subspan(edgeValues + triangleValues),
                          [this](size_t k, const Vec3(&xs)[4], Vec3(&g)[4], Mat12& h) {
                            discrete_shell::hingeEnergyHessian(hingeStiffness_[k],
                                                               hingeRestAngle_[k], xs, g, h);
                            if (projectHessian_)
                              discrete_shell::projectToPositiveSemiDefinite<12>(h);
                          });
  return true;
}

void DiscreteShellModel::hingeValues(std::span<const double> x, std::span<double> angles,
                                     std::span<double> energies) const {
  for (size_t k = 0; k < hingeRestAngle_.size(); ++k) {
    const int32_t* ids = &hingeNodes_[4 * k];
    const double theta = discrete_shell::dihedralAngle(vertex(x, ids[0]), vertex(x, ids[1]),
                                                       vertex(x, ids[2]), vertex(x, ids[3]));
    if (!angles.empty()) angles[k] = theta;
    if (!energies.empty()) {
      const double d = discrete_shell::wrapAngle(theta - hingeRestAngle_[k]);
      energies[k] = 0.5 * hingeStiffness_[k] * d * d;
    }
  }
}

Geometry DiscreteShellModel::surface(std::span<const double> x) const {
  Geometry g;
  g.positions.assign(x.begin(), x.end());
  g.triangles = triangles_;
  computeVertexNormals(g);
  return g;
}

}  // namespace shellsim
