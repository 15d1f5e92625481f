#include "models/thick_shell/thick_shell_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "core/rigid_motion.hpp"
#include "core/union_find.hpp"
#include "geometry/prism_split.hpp"
#include "models/mass_spring/mass_spring.hpp"
#include "models/stable_step.hpp"
#include "models/thick_shell/thick_shell_kernel.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

Vec3 at(std::span<const double> x, int32_t i) {
  return row(x, static_cast<size_t>(i));
}

struct ThickShellWorkspace : ModelWorkspace {
  AssemblyScratch springs, areas, tets;
};

}  // namespace

ThickShellModel::ThickShellModel(const Geometry& mesh, const ThickShell& shell,
                                 const MaterialDef& material, const ThickShellDef& options)
    : vertexCount_(mesh.vertexCount()),
      layers_(options.layers),
      extrusionFactor_(options.extrusionFactor),
      areaStiffnessFactor_(options.areaStiffness),
      volumeStiffnessFactor_(options.volumeStiffness),
      brittle_(options.brittle),
      triangles_(mesh.triangles),
      depth_(shell.depth) {
  if (mesh.isPointCloud()) {
    throw InputError("model thick_shell needs a triangle mesh, but the geometry is a point cloud");
  }
  if (shell.inner.size() != mesh.positions.size()) {
    throw InputError("model thick_shell: the shell was generated from another mesh");
  }
  if (layers_ != 1 && layers_ != 2) throw InputError("model thick_shell: layers must be 1 or 2");
  fracture_ = options.fracture;
  young_ = material.youngModulus;
  floorDepth_ = kMinDepthFraction * material.thickness;
  const auto n = static_cast<size_t>(vertexCount_);
  rest_ = mesh.positions;
  if (layers_ == 2) {
    rest_.resize(6 * n);
    for (size_t i = 0; i < n; ++i) {
      const Vec3 inner =
          row(mesh.positions, i) + extrusionFactor_ * shell.depth[i] * row(shell.direction, i);
      setRow(rest_, n + i, inner);
    }
  }
  crackedSide_.assign(triangles_.size(), 0);
  for (size_t t = 0; t < triangles_.size() / 3; ++t) {
    const int32_t c[3] = {triangles_[3 * t], triangles_[3 * t + 1], triangles_[3 * t + 2]};
    const Vec3 p[3] = {at(mesh.positions, c[0]), at(mesh.positions, c[1]),
                       at(mesh.positions, c[2])};
    const double area = 0.5 * (p[1] - p[0]).cross(p[2] - p[0]).norm();
    if (!(area > 0)) {
      std::ostringstream msg;
      msg << "triangle " << t << ": zero area";
      throw InputError(msg.str());
    }
    // The prism's volume at the drawn depth: three tets of one split (its side quads bend a
    // little, so another split differs by a little), at least A times the floored depth.
    Vec3 q[3];
    for (size_t k = 0; k < 3; ++k) {
      const auto v = static_cast<size_t>(c[k]);
      q[k] = p[k] + shell.depth[v] * row(shell.direction, v);
    }
    const double prismVolume = std::abs(thick_shell::tetVolume(p[0], p[1], p[2], q[0])) +
                               std::abs(thick_shell::tetVolume(p[1], p[2], q[0], q[1])) +
                               std::abs(thick_shell::tetVolume(p[2], q[0], q[1], q[2]));
    prismMass_.push_back(material.density * std::max(prismVolume, area * floorDepth_));
  }
  crackTip_.assign(n, 0);
  mayStart_.assign(n, 1);
  splitKey_.resize(n);
  std::iota(splitKey_.begin(), splitKey_.end(), 0);
  rng_ = fracture_ ? fracture_->seed : 0;
  rebuild();
  computeStableStep();
}

void ThickShellModel::addSpring(int32_t a, int32_t b, double stiffness) {
  springNodes_.insert(springNodes_.end(), {a, b});
  springRest_.push_back((at(rest_, b) - at(rest_, a)).norm());
  springStiffness_.push_back(stiffness);
}

std::vector<uint8_t> ThickShellModel::sidesWithSprings() const {
  std::vector<uint8_t> carries(crackedSide_.size());
  for (size_t s = 0; s < carries.size(); ++s) carries[s] = crackedSide_[s] == 0 ? 1 : 0;
  if (layers_ == 1) return carries;
  // Two layers: a cracked side whose edge no other triangle runs the other way any more
  // (the crack has opened there) is its triangle's own edge again.
  std::set<std::pair<int32_t, int32_t>> directed;
  for (size_t s = 0; s < triangles_.size(); ++s)
    directed.emplace(triangles_[s], triangles_[s - s % 3 + (s + 1) % 3]);
  for (size_t s = 0; s < carries.size(); ++s) {
    const int32_t a = triangles_[s], b = triangles_[s - s % 3 + (s + 1) % 3];
    if (!directed.contains({b, a})) carries[s] = 1;
  }
  return carries;
}

double ThickShellModel::flooredDepth(int32_t v) const {
  return std::max(depth_[static_cast<size_t>(v)], floorDepth_);
}

std::map<std::pair<int32_t, int32_t>, ThickShellModel::EdgeSprings> ThickShellModel::edgeSprings()
    const {
  // Van Gelder's map per triangle side, summed over the sides of an edge that carry springs,
  // with the local depth for the thickness, shared by the layers; in ascending (a, b) order.
  const std::vector<uint8_t> carries = sidesWithSprings();
  std::map<std::pair<int32_t, int32_t>, EdgeSprings> edges;
  for (size_t t = 0; t < triangles_.size() / 3; ++t) {
    const int32_t c[3] = {triangles_[3 * t], triangles_[3 * t + 1], triangles_[3 * t + 2]};
    const double area =
        thick_shell::triangleArea(at(rest_, c[0]), at(rest_, c[1]), at(rest_, c[2]));
    for (size_t k = 0; k < 3; ++k) {
      if (carries[3 * t + k] == 0) continue;
      const int32_t a = c[k], b = c[(k + 1) % 3];
      const double length = (at(rest_, b) - at(rest_, a)).norm();
      EdgeSprings& edge = edges[{std::min(a, b), std::max(a, b)}];
      edge.stiffness +=
          young_ * 0.5 * (flooredDepth(a) + flooredDepth(b)) * area / (length * length) / layers_;
      edge.wallShare += 0.5;
    }
  }
  return edges;
}

void ThickShellModel::distributeMasses() {
  const auto n = static_cast<size_t>(vertexCount_);
  mass_.assign(static_cast<size_t>(nodeCount_), 0.0);
  for (size_t t = 0; t < triangles_.size() / 3; ++t) {
    for (size_t k = 0; k < 3; ++k) {
      const auto v = static_cast<size_t>(triangles_[3 * t + k]);
      mass_[v] += prismMass_[t] / (3.0 * layers_);
      if (layers_ == 2) mass_[n + v] += prismMass_[t] / 6.0;
    }
  }
  for (size_t i = 0; i < mass_.size(); ++i) {
    if (!(mass_[i] > 0)) {
      std::ostringstream msg;
      msg << "vertex " << i % n << ": has no mass (in no triangle)";
      throw InputError(msg.str());
    }
  }
}

void ThickShellModel::rebuild() {
  vertexCount_ = static_cast<int32_t>(rest_.size() / 3) / layers_;
  nodeCount_ = layers_ * vertexCount_;
  pieces_ = connectedParts();
  distributeMasses();
  springNodes_.clear();
  springRest_.clear();
  springStiffness_.clear();
  areaNodes_.clear();
  areaRest_.clear();
  areaStiffness_.clear();
  tetNodes_.clear();
  tetVolume_.clear();
  tetStiffness_.clear();
  const std::map<std::pair<int32_t, int32_t>, EdgeSprings> edges = edgeSprings();
  if (layers_ == 1) {
    for (const auto& [edge, springs] : edges) addSpring(edge.first, edge.second, springs.stiffness);
  } else {
    addAreaAndVolumeTerms();
    addCrossAndInternalSprings(edges);
  }
  springIncidence_ = buildIncidence(springNodes_, nodeCount_);
  areaIncidence_ = buildIncidence(areaNodes_, nodeCount_);
  tetIncidence_ = buildIncidence(tetNodes_, nodeCount_);
}

void ThickShellModel::addAreaAndVolumeTerms() {
  for (size_t t = 0; t < triangles_.size() / 3; ++t) {
    const int32_t c[3] = {triangles_[3 * t], triangles_[3 * t + 1], triangles_[3 * t + 2]};
    const double meanDepth = (flooredDepth(c[0]) + flooredDepth(c[1]) + flooredDepth(c[2])) / 3;
    const double area =
        thick_shell::triangleArea(at(rest_, c[0]), at(rest_, c[1]), at(rest_, c[2]));
    // Area terms on t and t'.
    for (int layer = 0; layer < 2; ++layer) {
      const auto offset = static_cast<int32_t>(layer * vertexCount_);
      const double restArea = thick_shell::triangleArea(
          at(rest_, c[0] + offset), at(rest_, c[1] + offset), at(rest_, c[2] + offset));
      if (!(restArea > 0)) continue;  // a t' collapsed where S is thin
      areaNodes_.insert(areaNodes_.end(), {c[0] + offset, c[1] + offset, c[2] + offset});
      areaRest_.push_back(restArea);
      areaStiffness_.push_back(areaStiffnessFactor_ * young_ * restArea * meanDepth / 2);
    }
    // The prism's tets (geometry/prism_split.hpp: by the smallest-index rule on the split
    // keys, so neighbours agree on their side quads and a split keeps every prism's tets);
    // flat ones (depth 0 at a corner) are left out.
    const std::array<int32_t, 6> prism = {
        c[0], c[1], c[2], c[0] + vertexCount_, c[1] + vertexCount_, c[2] + vertexCount_};
    const auto key = [&](int32_t v) { return splitKey_[static_cast<size_t>(v)]; };
    for (const std::array<int, 4>& local : prismSplit({key(c[0]), key(c[1]), key(c[2])}).tets) {
      const std::array<int32_t, 4> tet = {
          prism[static_cast<size_t>(local[0])], prism[static_cast<size_t>(local[1])],
          prism[static_cast<size_t>(local[2])], prism[static_cast<size_t>(local[3])]};
      const double volume = thick_shell::tetVolume(at(rest_, tet[0]), at(rest_, tet[1]),
                                                   at(rest_, tet[2]), at(rest_, tet[3]));
      if (!(std::abs(volume) > 1e-6 * area * extrusionFactor_ * floorDepth_)) continue;
      tetNodes_.insert(tetNodes_.end(), tet.begin(), tet.end());
      tetVolume_.push_back(volume);
      tetStiffness_.push_back(volumeStiffnessFactor_ * young_ * std::abs(volume));
    }
  }
}

void ThickShellModel::addCrossAndInternalSprings(
    const std::map<std::pair<int32_t, int32_t>, EdgeSprings>& edges) {
  const int32_t n = vertexCount_;
  for (const auto& [edge, springs] : edges) {
    const auto [a, b] = edge;
    const double length = (at(rest_, b) - at(rest_, a)).norm();
    const double edgeDepth = 0.5 * (flooredDepth(a) + flooredDepth(b));
    addSpring(a, b, springs.stiffness);
    addSpring(a + n, b + n, springs.stiffness);
    // Cross springs: both diagonals of the side quad (a, b, b', a'), in the edge's wall
    // share.
    for (const auto& [p, q] : {std::pair{a, b + n}, std::pair{b, a + n}}) {
      const double diagonal = (at(rest_, q) - at(rest_, p)).norm();
      addSpring(p, q,
                springs.wallShare * 0.5 * young_ * length * length * extrusionFactor_ * edgeDepth /
                    (diagonal * diagonal));
    }
  }
  // Internal springs (v_i, v'_i), k = E A_i / (f d_i), A_i a third of the area at i.
  std::vector<double> vertexArea(static_cast<size_t>(n), 0.0);
  for (size_t t = 0; t < triangles_.size() / 3; ++t) {
    const int32_t c[3] = {triangles_[3 * t], triangles_[3 * t + 1], triangles_[3 * t + 2]};
    const double area =
        thick_shell::triangleArea(at(rest_, c[0]), at(rest_, c[1]), at(rest_, c[2]));
    for (const int32_t v : c) vertexArea[static_cast<size_t>(v)] += area / 3;
  }
  for (int32_t i = 0; i < n; ++i) {
    addSpring(i, i + n,
              young_ * vertexArea[static_cast<size_t>(i)] / (extrusionFactor_ * flooredDepth(i)));
  }
}

std::unique_ptr<ModelWorkspace> ThickShellModel::makeWorkspace() const {
  return std::make_unique<ThickShellWorkspace>();
}

EnergyParts ThickShellModel::energy(std::span<const double> x, ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::energy(x);
  return addGradient(x, {}, workspace);
}

EnergyParts ThickShellModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                         ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::addGradient(x, gradient);
  auto& w = dynamic_cast<ThickShellWorkspace&>(*workspace);
  EnergyParts parts;
  parts.stretching = assembleEnergyGradient<2>(
      springNodes_, springIncidence_, x, gradient, w.springs,
      [this](size_t s, const Vec3(&xs)[2], Vec3(&g)[2]) {
        return springEnergyGradient(springStiffness_[s], springRest_[s], xs, g);
      });
  if (!areaRest_.empty()) {
    parts.stretching += assembleEnergyGradient<3>(
        areaNodes_, areaIncidence_, x, gradient, w.areas,
        [this](size_t s, const Vec3(&xs)[3], Vec3(&g)[3]) {
          return thick_shell::areaEnergyGradient(areaStiffness_[s], areaRest_[s], xs, g);
        });
  }
  if (!tetVolume_.empty()) {
    parts.stretching += assembleEnergyGradient<4>(
        tetNodes_, tetIncidence_, x, gradient, w.tets,
        [this](size_t s, const Vec3(&xs)[4], Vec3(&g)[4]) {
          return thick_shell::volumeEnergyGradient(tetStiffness_[s], tetVolume_[s], xs, g);
        });
  }
  return parts;
}

std::vector<int32_t> ThickShellModel::hessianBlockNodes() const {
  std::vector<int32_t> pairs;
  stencilBlockNodes<2>(springNodes_, pairs);
  stencilBlockNodes<3>(areaNodes_, pairs);
  stencilBlockNodes<4>(tetNodes_, pairs);
  return pairs;
}

bool ThickShellModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  const size_t springBlocks = 4 * (springNodes_.size() / 2),
               areaBlocks = 9 * (areaNodes_.size() / 3);
  stencilHessianBlocks<2>(
      springNodes_, x, values.subspan(0, 9 * springBlocks),
      [this](size_t s, const Vec3(&xs)[2], Vec3(&g)[2], Eigen::Matrix<double, 6, 6>& h) {
        springEnergyGradient(springStiffness_[s], springRest_[s], xs, g, &h);
      });
  stencilHessianBlocks<3>(
      areaNodes_, x, values.subspan(9 * springBlocks, 9 * areaBlocks),
      [this](size_t s, const Vec3(&xs)[3], Vec3(&g)[3], Eigen::Matrix<double, 9, 9>& h) {
        thick_shell::areaEnergyGradient(areaStiffness_[s], areaRest_[s], xs, g, &h);
      });
  stencilHessianBlocks<4>(
      tetNodes_, x, values.subspan(9 * (springBlocks + areaBlocks)),
      [this](size_t s, const Vec3(&xs)[4], Vec3(&g)[4], Eigen::Matrix<double, 12, 12>& h) {
        thick_shell::volumeEnergyGradient(tetStiffness_[s], tetVolume_[s], xs, g, &h);
      });
  return true;
}

void ThickShellModel::computeStableStep() {
  // Springs, areas and tets of very different stiffness at one node: Lanczos
  // (stable_step.hpp).
  const StableStep step = stableStepEstimate(*this, rest_, mass_);
  stableStep_ = step.estimate;
  stableStepState_ = {stableStep_, step.estimate, step.gershgorin};
}

void ThickShellModel::followStableStep() {
  // After vertex splits: Lanczos on the whole shell costs forty products with its Hessian,
  // most of a fracture step on a large model (the castle: 43 % of the run). Gershgorin's
  // step costs one pass and follows the lightest new nodes; the Lanczos estimate is scaled
  // with it, never up, until Gershgorin's step has fallen 5 % below its value at the last
  // Lanczos estimate, which is then made again.
  const double gershgorin = stableStepEstimate(*this, rest_, mass_, false).gershgorin;
  const double lanczos = stableStepState_[1], lanczosGershgorin = stableStepState_[2];
  if (!(gershgorin >= 0.95 * lanczosGershgorin)) {
    computeStableStep();
    return;
  }
  stableStep_ =
      std::min(stableStep_, std::max(gershgorin, lanczos * gershgorin / lanczosGershgorin));
  stableStepState_[0] = stableStep_;
}

std::vector<double> ThickShellModel::rigidlyFitted(std::span<const double> x) const {
  // Muller et al. 2005, shape matching: the rotation R of the polar decomposition of
  // A = sum_i m_i (x_i - c)(p_i - p0)^T and the centres of mass c (now) and p0 (at rest)
  // minimise sum_i m_i |c + R (p_i - p0) - x_i|^2 over rigid motions.
  const auto n = static_cast<size_t>(vertexCount_);
  const std::vector<int32_t>& pieces = surfacePieces();
  const auto pieceOfNode = [&](size_t i) { return static_cast<size_t>(pieces[i % n]); };
  const size_t count =
      pieces.empty() ? 0 : static_cast<size_t>(*std::max_element(pieces.begin(), pieces.end())) + 1;
  std::vector<double> mass(count, 0.0);
  std::vector<Vec3> now(count, Vec3::Zero()), rest(count, Vec3::Zero());
  const size_t nodes = static_cast<size_t>(nodeCount_);
  for (size_t i = 0; i < nodes; ++i) {
    const size_t p = pieceOfNode(i);
    mass[p] += mass_[i];
    now[p] += mass_[i] * row(x, i);
    rest[p] += mass_[i] * row(rest_, i);
  }
  std::vector<Eigen::Matrix3d> moment(count, Eigen::Matrix3d::Zero());
  for (size_t p = 0; p < count; ++p) {
    now[p] /= mass[p];
    rest[p] /= mass[p];
  }
  for (size_t i = 0; i < nodes; ++i) {
    const size_t p = pieceOfNode(i);
    moment[p] += mass_[i] * (row(x, i) - now[p]) * (row(rest_, i) - rest[p]).transpose();
  }
  std::vector<Eigen::Matrix3d> rotation(count);
  for (size_t p = 0; p < count; ++p) rotation[p] = bestRotation(moment[p]);
  std::vector<double> fitted(x.size());
  for (size_t i = 0; i < nodes; ++i) {
    const size_t p = pieceOfNode(i);
    setRow(fitted, i, now[p] + rotation[p] * (row(rest_, i) - rest[p]));
  }
  return fitted;
}

Geometry ThickShellModel::surface(std::span<const double> deformed) const {
  const std::vector<double> fitted = brittle_ ? rigidlyFitted(deformed) : std::vector<double>{};
  const std::span<const double> x = brittle_ ? std::span<const double>(fitted) : deformed;
  const auto n = static_cast<size_t>(vertexCount_);
  const std::span<const double> outer = x.subspan(0, 3 * n);
  std::vector<double> inner(3 * n);
  if (layers_ == 2) {
    // Drawn at depth d_i: 1/f of the way to the physics' S'.
    for (size_t i = 0; i < n; ++i) {
      setRow(inner, i, row(outer, i) + (row(x, n + i) - row(outer, i)) / extrusionFactor_);
    }
  } else {
    // One layer: S' follows S's current normals at depth d_i (section 4.2.4, thick rendering).
    Geometry s;
    s.positions.assign(outer.begin(), outer.end());
    s.triangles = triangles_;
    computeVertexNormals(s);
    for (size_t i = 0; i < n; ++i) setRow(inner, i, row(outer, i) - depth_[i] * row(s.normals, i));
  }
  Geometry g = thickShellSurfaces(outer, inner, triangles_);
  computeVertexNormals(g);
  // One piece per connected part of S, its S' with it (no triangle joins them on a closed
  // mesh: the frames say they are one).
  const std::vector<int32_t>& labels = surfacePieces();
  g.pieces = labels;
  g.pieces.insert(g.pieces.end(), labels.begin(), labels.end());
  return g;
}

std::vector<int32_t> ThickShellModel::connectedParts() const {
  UnionFind parts(static_cast<size_t>(vertexCount_));
  for (size_t t = 0; t < triangles_.size(); t += 3) {
    parts.unite(triangles_[t], triangles_[t + 1]);
    parts.unite(triangles_[t + 1], triangles_[t + 2]);
  }
  return parts.labels();
}

}  // namespace shellsim
