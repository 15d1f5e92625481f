#include "surface/surface_binding.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

constexpr size_t kGrain = 256;       // vertices per parallel task
constexpr int kMaxNeighbours = 32;   // largest K
constexpr double kCollinear = 1e-4;  // smaller / larger tangent eigenvalue below: a line
// |N x e^1| / |e^1| below this: the frame is unusable (eq. 18).
constexpr double kFrameSine = 1e-6;
// Smallest / largest eigenvalue of the quadratic fit's normal matrix below this: keep the
// linear fit.
constexpr double kQuadraticConditioning = 1e-6;
// Tikhonov term on the quadratic coefficients, relative to the mean diagonal.
constexpr double kCurvatureRegularisation = 1e-2;

// Eq. (21): smooth on (0, 1], w(0+) = inf, w(1) = w'(1) = 0 (see the header).
double weightFunction(double t) {
  const double s = 1.0 / t - 1.0;
  return s * s;
}

std::string message(const std::string& what) {
  return "surface binding: " + what;
}

bool finite(std::span<const double> values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

void validateCracks(std::span<const CrackDisc> cracks) {
  for (size_t i = 0; i < cracks.size(); ++i) {
    const CrackDisc& d = cracks[i];
    if (!d.centre.allFinite() || !d.normal.allFinite() || d.normal.squaredNorm() == 0 ||
        !std::isfinite(d.radius) || d.radius <= 0) {
      throw InputError(message("crack disc " + std::to_string(i) +
                               ": needs a finite centre, a non-zero normal and radius > 0"));
    }
  }
}

template <class T>
size_t bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

}  // namespace

struct SurfaceBinding::BindScratch {
  std::vector<uint32_t> candidates;
  std::vector<double> squaredDistances;
  std::vector<const CrackDisc*> nearDiscs;
};

SurfaceBinding::SurfaceBinding(std::span<const double> restNodes, const Geometry& dense,
                               const SurfaceBindingParams& params,
                               std::span<const CrackDisc> cracks) {
  if (params.neighbours < 3 || params.neighbours > kMaxNeighbours) {
    throw InputError(
        message("neighbours = " + std::to_string(params.neighbours) + ": must be in [3, 32]"));
  }
  if (restNodes.size() % 3 != 0 || restNodes.size() < 9) {
    throw InputError(message("needs at least 3 nodes as (nNodes, 3) positions"));
  }
  if (!finite(restNodes)) throw InputError(message("non-finite node position"));
  const size_t nv = dense.positions.size() / 3;
  if (dense.positions.size() % 3 != 0) {
    throw InputError(message("dense positions must be (nVertices, 3)"));
  }
  for (size_t v = 0; v < nv; ++v) {
    if (!row(dense.positions, v).allFinite()) {
      throw InputError(message("vertex " + std::to_string(v) + ": non-finite position"));
    }
  }
  hasNormals_ = !dense.normals.empty();
  hasColors_ = !dense.colors.empty();
  if (hasNormals_ && dense.normals.size() != dense.positions.size()) {
    throw InputError(message("dense normals must be empty or (nVertices, 3)"));
  }
  if (!dense.colors.empty() && dense.colors.size() != dense.positions.size()) {
    throw InputError(message("dense colours must be empty or (nVertices, 3)"));
  }
  if (dense.triangles.size() % 3 != 0) throw InputError(message("triangles must be (nT, 3)"));
  for (size_t t = 0; t < dense.triangles.size(); ++t) {
    if (dense.triangles[t] < 0 || static_cast<size_t>(dense.triangles[t]) >= nv) {
      throw InputError(message("triangle " + std::to_string(t / 3) + ": vertex index " +
                               std::to_string(dense.triangles[t]) + " out of range"));
    }
  }
  validateCracks(cracks);

  restNodes_.assign(restNodes.begin(), restNodes.end());
  const size_t nodeCount = restNodes_.size() / 3;
  k_ = static_cast<int>(std::min<size_t>(static_cast<size_t>(params.neighbours), nodeCount));
  tree_ = std::make_unique<PointKdTree>(restNodes_);
  Vec3 lo = row(restNodes_, 0), hi = lo;
  for (size_t i = 1; i < nodeCount; ++i) {
    lo = lo.cwiseMin(row(restNodes_, i));
    hi = hi.cwiseMax(row(restNodes_, i));
  }
  nodeTolerance_ = 1e-12 * (hi - lo).norm();
  cracks_.assign(cracks.begin(), cracks.end());

  inputVertexCount_ = static_cast<int32_t>(nv);
  resizeVertices(nv);
  std::copy(dense.positions.begin(), dense.positions.end(), restPositions_.begin());
  std::copy(dense.positions.begin(), dense.positions.end(), origins_.begin());
  if (hasNormals_) {
    for (size_t v = 0; v < nv; ++v) {
      const Vec3 n = row(dense.normals, v);
      const double length = n.norm();
      if (!std::isfinite(length) || length == 0) {
        throw InputError(message("vertex " + std::to_string(v) + ": zero or non-finite normal"));
      }
      setRow(restNormals_, v, n / length);
    }
  }
  std::copy(dense.colors.begin(), dense.colors.end(), colors_.begin());
  std::iota(source_.begin(), source_.end(), 0);

  if (hasNormals_) {
    const auto k = static_cast<size_t>(k_);
    nodeFrameNodes_.resize(k * nodeCount);
    nodeFramePlane_.resize(2 * (k - 1) * nodeCount);
    nodeRestFrame_.resize(9 * nodeCount);
    nodeTransforms_.resize(9 * nodeCount);
    std::vector<int32_t> allNodes(nodeCount);
    std::iota(allNodes.begin(), allNodes.end(), 0);
    bindNodes(allNodes);
  }
  std::vector<int32_t> all(nv);
  std::iota(all.begin(), all.end(), 0);
  bindVertices(all);
  triangles_ = dense.triangles;
  if (!cracks_.empty()) splitTriangles(cracks_);
}

SurfaceBinding::SurfaceBinding(SurfaceBinding&&) noexcept = default;
SurfaceBinding& SurfaceBinding::operator=(SurfaceBinding&&) noexcept = default;
SurfaceBinding::~SurfaceBinding() = default;

void SurfaceBinding::resizeVertices(size_t count) {
  const auto k = static_cast<size_t>(k_);
  restPositions_.resize(3 * count);
  if (hasNormals_) {
    restNormals_.resize(3 * count);
    normalWeights_.resize(static_cast<size_t>(k_) * count);
  }
  if (hasColors_) colors_.resize(3 * count);
  source_.resize(count);
  origins_.resize(3 * count);
  frames_.resize(count);
  nodes_.resize(k * count);
  coords_.resize(3 * (k - 1) * count);
  weights_.resize((k - 1) * count);
  planeWeights_.resize(2 * (k - 1) * count);
  across_.resize(2 * count);
  frameNormals_.resize(3 * count);
  reach_.resize(count);
}

void SurfaceBinding::moveVertex(size_t from, size_t to) {
  const auto k = static_cast<size_t>(k_);
  const auto copyRows = [&](auto& array, size_t width) {
    std::copy_n(array.begin() + static_cast<std::ptrdiff_t>(width * from), width,
                array.begin() + static_cast<std::ptrdiff_t>(width * to));
  };
  copyRows(restPositions_, 3);
  if (hasNormals_) {
    copyRows(restNormals_, 3);
    copyRows(normalWeights_, k);
  }
  if (hasColors_) copyRows(colors_, 3);
  copyRows(source_, 1);
  copyRows(origins_, 3);
  copyRows(frames_, 1);
  copyRows(nodes_, k);
  copyRows(coords_, 3 * (k - 1));
  copyRows(weights_, k - 1);
  copyRows(planeWeights_, 2 * (k - 1));
  copyRows(across_, 2);
  copyRows(frameNormals_, 3);
  copyRows(reach_, 1);
}

bool SurfaceBinding::sameBinding(size_t a, size_t b) const {
  const auto k = static_cast<size_t>(k_);
  return (frames_[a] == 0) == (frames_[b] == 0) &&
         std::equal(nodes_.begin() + static_cast<std::ptrdiff_t>(k * a),
                    nodes_.begin() + static_cast<std::ptrdiff_t>(k * (a + 1)),
                    nodes_.begin() + static_cast<std::ptrdiff_t>(k * b));
}

size_t SurfaceBinding::visibleNodes(const Vec3& c, const Vec3& origin, int32_t* chosen,
                                    BindScratch& scratch) const {
  const auto k = static_cast<size_t>(k_);
  const size_t nodeCount = restNodes_.size() / 3;
  const size_t widest = std::min(nodeCount, 32 * k);
  size_t want = cracks_.empty() ? k : std::min(nodeCount, 4 * k);
  size_t count = 0;
  for (;;) {
    tree_->nearest(c.data(), want, scratch.candidates, scratch.squaredDistances);
    scratch.nearDiscs.clear();
    if (!cracks_.empty()) {
      // A disc can cut a segment origin -> candidate only if it reaches within the
      // candidates' distance from the origin.
      const double reach =
          (origin - c).norm() + std::sqrt(scratch.squaredDistances.back()) + nodeTolerance_;
      for (const CrackDisc& disc : cracks_) {
        if ((disc.centre - origin).norm() <= disc.radius + reach) {
          scratch.nearDiscs.push_back(&disc);
        }
      }
    }
    count = 0;
    for (const uint32_t candidate : scratch.candidates) {
      const Vec3 p = row(restNodes_, candidate);
      bool visible = true;
      for (const CrackDisc* disc : scratch.nearDiscs) {
        if (segmentCrossesDisc(origin, p, *disc)) {
          visible = false;
          break;
        }
      }
      if (!visible) continue;
      if (!nodePiece_.empty() && count > 0 &&
          nodePiece_[candidate] != nodePiece_[static_cast<size_t>(chosen[0])]) {
        continue;
      }
      bool distinct = true;
      for (size_t j = 0; j < count; ++j) {
        if ((row(restNodes_, static_cast<size_t>(chosen[j])) - p).norm() <= nodeTolerance_) {
          distinct = false;
        }
      }
      if (!distinct) continue;
      chosen[count++] = static_cast<int32_t>(candidate);
      if (count == k) break;
    }
    if (count == k || want >= widest) break;
    want = std::min(widest, 4 * want);
  }
  if (count == 0) chosen[count++] = static_cast<int32_t>(scratch.candidates.front());
  return count;
}

bool SurfaceBinding::fitPlane(const int32_t* chosen, size_t count, const Vec3* orientation,
                              double* plane, Vec3& f1, Vec3& f2) const {
  const auto node = [&](size_t i) { return row(restNodes_, static_cast<size_t>(chosen[i])); };
  if (count < 3) return false;
  // Least-squares plane (PCA) of the p_i, oriented by `orientation` if given.
  Vec3 centroid = Vec3::Zero();
  for (size_t i = 0; i < count; ++i) centroid += node(i);
  centroid /= static_cast<double>(count);
  Eigen::Matrix3d covariance = Eigen::Matrix3d::Zero();
  for (size_t i = 0; i < count; ++i) {
    const Vec3 d = node(i) - centroid;
    covariance.noalias() += d * d.transpose();
  }
  const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eigen(covariance);
  const Eigen::Vector3d lambda = eigen.eigenvalues();  // ascending
  if (!(lambda[2] > 0) || lambda[1] <= kCollinear * lambda[2]) return false;
  Vec3 planeNormal = eigen.eigenvectors().col(0);
  if (orientation != nullptr && planeNormal.dot(*orientation) < 0) planeNormal = -planeNormal;
  const Vec3 t1 = eigen.eigenvectors().col(2);
  const Vec3 t2 = planeNormal.cross(t1);  // t1 x t2 = planeNormal

  // a_i = G^-1 u_i; the i = 0 term drops out of f because f uses x_i - x_0 (sum a_i = 0).
  Eigen::Matrix2d g = Eigen::Matrix2d::Zero();
  std::array<Eigen::Vector2d, kMaxNeighbours> u;
  for (size_t i = 0; i < count; ++i) {
    const Vec3 d = node(i) - centroid;
    u[i] = {t1.dot(d), t2.dot(d)};
    g.noalias() += u[i] * u[i].transpose();
  }
  const Eigen::Matrix2d inverse = g.inverse();
  f1.setZero();
  f2.setZero();
  for (size_t i = 1; i < count; ++i) {
    const Eigen::Vector2d a = inverse * u[i];
    plane[2 * (i - 1)] = a[0];
    plane[2 * (i - 1) + 1] = a[1];
    const Vec3 e = node(i) - node(0);
    f1 += a[0] * e;
    f2 += a[1] * e;
  }
  const double mLength2 = f1.cross(f2).squaredNorm();
  if (!(mLength2 > 0) || !std::isfinite(mLength2)) {
    std::fill(plane, plane + 2 * (count - 1), 0.0);
    return false;
  }
  return true;
}

void SurfaceBinding::bindNode(size_t j, BindScratch& scratch) {
  const auto k = static_cast<size_t>(k_);
  const Vec3 p = row(restNodes_, j);
  int32_t* nodes = &nodeFrameNodes_[k * j];
  double* plane = &nodeFramePlane_[2 * (k - 1) * j];
  double* frame = &nodeRestFrame_[9 * j];
  std::fill(plane, plane + 2 * (k - 1), 0.0);
  std::fill(frame, frame + 9, 0.0);
  const size_t count = visibleNodes(p, p, nodes, scratch);
  for (size_t i = count; i < k; ++i) nodes[i] = nodes[0];
  Vec3 f1, f2;
  if (!fitPlane(nodes, count, nullptr, plane, f1, f2)) return;  // frame 0: no normal term
  if (count >= 6) quadraticTangents(nodes, count, f1, f2, plane);
  const Vec3 m = f1.cross(f2);
  for (int d = 0; d < 3; ++d) {
    frame[d] = f1[d];
    frame[3 + d] = f2[d];
    frame[6 + d] = m[d];
  }
}

void SurfaceBinding::bindVertex(size_t v, const Vec3& origin, BindScratch& scratch) {
  const auto k = static_cast<size_t>(k_);
  const Vec3 c = row(restPositions_, v);
  const auto node = [&](size_t i) { return row(restNodes_, i); };

  // Reset the vertex's record: unused slots repeat p_0 with zero weights.
  int32_t* nodes = &nodes_[k * v];
  double* coords = &coords_[3 * (k - 1) * v];
  double* weights = &weights_[(k - 1) * v];
  double* plane = &planeWeights_[2 * (k - 1) * v];
  double* across = &across_[2 * v];
  across[0] = across[1] = 0;
  std::fill(coords, coords + 3 * (k - 1), 0.0);
  std::fill(weights, weights + (k - 1), 0.0);
  std::fill(plane, plane + 2 * (k - 1), 0.0);
  const bool hasNormal = hasNormals_;
  const Vec3 inputNormal = hasNormal ? row(restNormals_, v) : Vec3::UnitZ();
  setRow(frameNormals_, v, inputNormal);
  frames_[v] = 0;

  // The K nearest nodes visible from `origin`, distinct, nearest first (the nearest node
  // whatever the discs say if none is visible).
  std::array<int32_t, kMaxNeighbours> chosen{};
  const size_t count = visibleNodes(c, origin, chosen.data(), scratch);
  for (size_t i = 0; i < k; ++i) nodes[i] = chosen[i < count ? i : 0];
  const double farthest = (node(static_cast<size_t>(chosen[count - 1])) - c).norm();

  // Normal blending weights over all bound nodes (p_0 included), w of eq. (21).
  if (hasNormal) {
    double* normalWeights = &normalWeights_[k * v];
    std::fill(normalWeights, normalWeights + k, 0.0);
    double sum = 0;
    for (size_t i = 0; i < count; ++i) {
      const double d = (node(static_cast<size_t>(chosen[i])) - c).norm();
      if (d == 0) {  // c is node i: its transform alone
        std::fill(normalWeights, normalWeights + k, 0.0);
        normalWeights[i] = 1;
        sum = 1;
        break;
      }
      normalWeights[i] = farthest > 0 ? weightFunction(std::min(1.0, d / farthest)) : 1.0;
      sum += normalWeights[i];
    }
    if (!(sum > 0) || !std::isfinite(sum)) {  // all nodes equally far: equal weights
      for (size_t i = 0; i < count; ++i) normalWeights[i] = 1;
      sum = static_cast<double>(count);
    }
    for (size_t i = 0; i < count; ++i) normalWeights[i] /= sum;
  }

  Vec3 f1, f2;
  if (!fitPlane(chosen.data(), count, hasNormal ? &inputNormal : nullptr, plane, f1, f2)) return;
  const Vec3 m = f1.cross(f2);
  const Vec3 normal = m.normalized();  // N = N(p), as deform() computes N'

  // Frames, coordinates and weights, eq. (17), (18), (21). e^2 lies in the plane: its
  // components in the rest map, e^2 = alpha f1 + beta f2 (f_a = T_a at rest, so a 2 x 2
  // least-squares solve only guards against rounding), carry it to e^2' = alpha f1' + beta f2'.
  const Vec3 p0 = node(static_cast<size_t>(chosen[0]));
  const Vec3 r = c - p0;
  const double g11 = f1.squaredNorm(), g12 = f1.dot(f2), g22 = f2.squaredNorm();
  const double determinant = g11 * g22 - g12 * g12;
  std::array<double, kMaxNeighbours> alpha{}, beta{};
  double weightSum = 0;
  size_t usable = 0;
  std::array<bool, kMaxNeighbours> isUsable{};
  for (size_t i = 1; i < count; ++i) {
    const Vec3 p = node(static_cast<size_t>(chosen[i]));
    const Vec3 e1 = p - p0;
    const double length = e1.norm();
    const Vec3 e2 = normal.cross(e1) / length;
    const Vec3 e3 = e2.cross(e1) / length;
    const double s2 = e2.squaredNorm();  // = |e3|^2 = sin^2 of the angle(N, e1)
    if (!(s2 > kFrameSine * kFrameSine)) continue;
    double* ci = coords + 3 * (i - 1);
    ci[0] = r.dot(e1) / (length * length);
    ci[1] = r.dot(e2) / s2;
    ci[2] = r.dot(e3) / s2;
    const double b1 = f1.dot(e2), b2 = f2.dot(e2);
    alpha[i] = (g22 * b1 - g12 * b2) / determinant;
    beta[i] = (g11 * b2 - g12 * b1) / determinant;
    const double t = farthest > 0 ? std::min(1.0, (p - c).norm() / farthest) : 1.0;
    weights[i - 1] = weightFunction(t);  // t > 0: p_i is distinct from p_0, the nearest
    weightSum += weights[i - 1];
    isUsable[i] = true;
    ++usable;
  }
  if (usable == 0) {
    std::fill(plane, plane + 2 * (k - 1), 0.0);
    std::fill(coords, coords + 3 * (k - 1), 0.0);
    return;
  }
  if (weightSum > 0 && std::isfinite(weightSum)) {
    for (size_t i = 0; i + 1 < k; ++i) weights[i] /= weightSum;
  } else {
    // Every usable frame at t = 1 (all nodes equally far): equal weights.
    for (size_t i = 1; i < count; ++i) {
      weights[i - 1] = isUsable[i] ? 1.0 / static_cast<double>(usable) : 0.0;
    }
  }
  // Store W_i C_i^k; frames_[v] = the last frame with weight.
  uint8_t frames = 0;
  for (size_t i = 1; i < k; ++i) {
    for (size_t d = 0; d < 3; ++d) coords[3 * (i - 1) + d] *= weights[i - 1];
    if (weights[i - 1] != 0) frames = static_cast<uint8_t>(i);
    across[0] += coords[3 * (i - 1) + 1] * alpha[i];
    across[1] += coords[3 * (i - 1) + 1] * beta[i];
  }
  setRow(frameNormals_, v, normal);
  frames_[v] = frames;
}

void SurfaceBinding::quadraticTangents(const int32_t* chosen, size_t count, Vec3& f1, Vec3& f2,
                                       double* plane) const {
  using Vec5 = Eigen::Matrix<double, 5, 1>;
  using Mat5 = Eigen::Matrix<double, 5, 5>;
  const Vec3 p0 = row(restNodes_, static_cast<size_t>(chosen[0]));
  // Tangent basis of the linear fit: its f at rest spans the plane.
  const Vec3 t1 = f1.normalized();
  const Vec3 t2 = f1.cross(f2).cross(f1).normalized();
  std::array<Eigen::Vector2d, kMaxNeighbours> u;
  double scale2 = 0;
  for (size_t i = 1; i < count; ++i) {
    const Vec3 d = row(restNodes_, static_cast<size_t>(chosen[i])) - p0;
    u[i] = {t1.dot(d), t2.dot(d)};
    scale2 += u[i].squaredNorm();
  }
  const double scale = std::sqrt(scale2 / static_cast<double>(count - 1));  // > 0: not collinear
  Mat5 normal = Mat5::Zero();
  std::array<Vec5, kMaxNeighbours> rows;
  for (size_t i = 1; i < count; ++i) {
    const Eigen::Vector2d q = u[i] / scale;
    rows[i] << q[0], q[1], 0.5 * q[0] * q[0], q[0] * q[1], 0.5 * q[1] * q[1];
    normal.noalias() += rows[i] * rows[i].transpose();
  }
  // Tikhonov on the curvature terms: bounds the weights where the neighbours hardly
  // determine them (one-sided or clustered), shrinking towards a linear fit through p_0.
  normal.diagonal().tail<3>().array() += kCurvatureRegularisation * normal.trace() / 5;
  const Eigen::SelfAdjointEigenSolver<Mat5> eigen(normal);
  const Vec5 lambda = eigen.eigenvalues();
  if (!(lambda[0] > kQuadraticConditioning * lambda[4])) return;  // keep the linear fit
  const Mat5 inverse =
      eigen.eigenvectors() * lambda.cwiseInverse().asDiagonal() * eigen.eigenvectors().transpose();
  f1.setZero();
  f2.setZero();
  for (size_t i = 1; i < count; ++i) {
    const Vec5 c = inverse * rows[i];
    plane[2 * (i - 1)] = c[0] / scale;
    plane[2 * (i - 1) + 1] = c[1] / scale;
    const Vec3 e = row(restNodes_, static_cast<size_t>(chosen[i])) - p0;
    f1 += plane[2 * (i - 1)] * e;
    f2 += plane[2 * (i - 1) + 1] * e;
  }
}

void SurfaceBinding::bindNodes(std::span<const int32_t> nodes) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, nodes.size(), kGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      BindScratch scratch;
                      for (size_t i = r.begin(); i != r.end(); ++i) {
                        bindNode(static_cast<size_t>(nodes[i]), scratch);
                      }
                    });
}

void SurfaceBinding::bindVertices(std::span<const int32_t> vertices) {
  const auto k = static_cast<size_t>(k_);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, vertices.size(), kGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      BindScratch scratch;
                      for (size_t i = r.begin(); i != r.end(); ++i) {
                        const auto v = static_cast<size_t>(vertices[i]);
                        bindVertex(v, row(origins_, v), scratch);
                        reach_[v] = reachOf(row(origins_, v), &nodes_[k * v]);
                      }
                    });
}

int SurfaceBinding::splitTriangles(std::span<const CrackDisc> discs) {
  const size_t triangleCount = triangles_.size() / 3;
  const auto corner = [&](size_t t, size_t s) {
    return row(restPositions_,
               static_cast<size_t>(source_[static_cast<size_t>(triangles_[3 * t + s])]));
  };
  // Straddling triangles: a rest edge crosses one of `discs`.
  std::vector<uint8_t> straddles(triangleCount, 0);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, triangleCount, kGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t t = r.begin(); t != r.end(); ++t) {
                        const Vec3 a = corner(t, 0), b = corner(t, 1), c = corner(t, 2);
                        straddles[t] = separatedByCracks(a, b, discs) ||
                                       separatedByCracks(b, c, discs) ||
                                       separatedByCracks(c, a, discs);
                      }
                    });
  // Requests: (triangle slot, input vertex, centroid) for each corner across a disc from
  // its triangle's centroid; all discs decide. Each becomes a provisional vertex.
  struct Request {
    size_t slot;  // 3 * triangle + corner
    int32_t source;
  };
  std::vector<Request> requests;
  for (size_t t = 0; t < triangleCount; ++t) {
    if (straddles[t] == 0) continue;
    const Vec3 centroid = (corner(t, 0) + corner(t, 1) + corner(t, 2)) / 3.0;
    for (size_t s = 0; s < 3; ++s) {
      const int32_t source = source_[static_cast<size_t>(triangles_[3 * t + s])];
      if (separatedByCracks(centroid, corner(t, s), cracks_)) {
        requests.push_back({3 * t + s, source});
      } else {
        triangles_[3 * t + s] = source;
      }
    }
  }
  if (requests.empty()) return 0;

  const size_t base = source_.size();
  resizeVertices(base + requests.size());
  std::vector<int32_t> provisional(requests.size());
  for (size_t q = 0; q < requests.size(); ++q) {
    const size_t v = base + q;
    const auto source = static_cast<size_t>(requests[q].source);
    const size_t t = requests[q].slot / 3;
    setRow(restPositions_, v, row(restPositions_, source));
    if (hasNormals_) setRow(restNormals_, v, row(restNormals_, source));
    if (hasColors_) {
      std::copy_n(colors_.begin() + static_cast<std::ptrdiff_t>(3 * source), 3,
                  colors_.begin() + static_cast<std::ptrdiff_t>(3 * v));
    }
    source_[v] = requests[q].source;
    setRow(origins_, v, (corner(t, 0) + corner(t, 1) + corner(t, 2)) / 3.0);
    provisional[q] = static_cast<int32_t>(v);
  }
  bindVertices(provisional);

  // Share equal bindings of the same input vertex, in request order (deterministic).
  std::unordered_map<int32_t, std::vector<int32_t>> existing;  // input vertex -> split ones
  for (size_t v = static_cast<size_t>(inputVertexCount_); v < base; ++v) {
    existing[source_[v]].push_back(static_cast<int32_t>(v));
  }
  size_t accepted = 0;
  for (size_t q = 0; q < requests.size(); ++q) {
    const size_t v = base + q;
    const int32_t source = requests[q].source;
    int32_t match = -1;
    if (sameBinding(v, static_cast<size_t>(source))) {
      match = source;
    } else {
      for (const int32_t w : existing[source]) {
        if (sameBinding(v, static_cast<size_t>(w))) {
          match = w;
          break;
        }
      }
    }
    if (match < 0) {
      const size_t target = base + accepted++;
      if (target != v) moveVertex(v, target);
      match = static_cast<int32_t>(target);
      existing[source].push_back(match);
    }
    triangles_[requests[q].slot] = match;
  }
  resizeVertices(base + accepted);
  return static_cast<int>(accepted);
}

double SurfaceBinding::reachOf(const Vec3& origin, const int32_t* nodes) const {
  double reach = 0;
  for (size_t i = 0; i < static_cast<size_t>(k_); ++i) {
    reach = std::max(reach, (row(restNodes_, static_cast<size_t>(nodes[i])) - origin).norm());
  }
  return reach;
}

bool SurfaceBinding::crossesNewDisc(const Vec3& origin, const int32_t* nodes, double reach,
                                    std::span<const CrackDisc> discs) const {
  const auto k = static_cast<size_t>(k_);
  for (const CrackDisc& disc : discs) {
    if ((disc.centre - origin).norm() > disc.radius + reach) continue;
    for (size_t i = 0; i < k; ++i) {
      if (segmentCrossesDisc(origin, row(restNodes_, static_cast<size_t>(nodes[i])), disc)) {
        return true;
      }
    }
  }
  return false;
}

int SurfaceBinding::separatePieces(std::span<const int32_t> pieces) {
  const size_t nodeCount = restNodes_.size() / 3;
  if (pieces.size() != nodeCount) {
    throw InputError("surface binding: pieces must have one label per node");
  }
  nodePiece_.assign(pieces.begin(), pieces.end());
  const auto k = static_cast<size_t>(k_);
  const auto mixed = [&](const int32_t* bound) {
    for (size_t i = 1; i < k; ++i) {
      if (bound[i] >= 0 &&
          pieces[static_cast<size_t>(bound[i])] != pieces[static_cast<size_t>(bound[0])]) {
        return true;
      }
    }
    return false;
  };
  std::vector<int32_t> list;
  for (size_t v = 0; v < source_.size(); ++v) {
    if (mixed(&nodes_[k * v])) list.push_back(static_cast<int32_t>(v));
  }
  bindVertices(list);
  if (hasNormals_) {
    std::vector<int32_t> nodeList;
    for (size_t j = 0; j < nodeCount; ++j) {
      if (mixed(&nodeFrameNodes_[k * j])) nodeList.push_back(static_cast<int32_t>(j));
    }
    bindNodes(nodeList);
  }
  return static_cast<int>(list.size());
}

int SurfaceBinding::rebind(std::span<const CrackDisc> allCracks,
                           std::span<const CrackDisc> newCracks) {
  validateCracks(allCracks);
  validateCracks(newCracks);
  cracks_.assign(allCracks.begin(), allCracks.end());
  if (newCracks.empty()) return 0;
  const auto k = static_cast<size_t>(k_);
  const size_t count = source_.size();
  // A vertex's K nearest visible nodes change only if a new disc hides one of them.
  std::vector<uint8_t> affected(count, 0);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, kGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t v = r.begin(); v != r.end(); ++v) {
          affected[v] = crossesNewDisc(row(origins_, v), &nodes_[k * v], reach_[v], newCracks);
        }
      });
  std::vector<int32_t> list;
  for (size_t v = 0; v < count; ++v) {
    if (affected[v] != 0) list.push_back(static_cast<int32_t>(v));
  }
  bindVertices(list);
  if (hasNormals_) {
    // Node frames (normal transforms) whose neighbourhood a new disc cuts.
    const size_t nodeCount = restNodes_.size() / 3;
    std::vector<uint8_t> nodeAffected(nodeCount, 0);
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, nodeCount, kGrain), [&](const tbb::blocked_range<size_t>& r) {
          for (size_t j = r.begin(); j != r.end(); ++j) {
            const Vec3 origin = row(restNodes_, j);
            const int32_t* nodes = &nodeFrameNodes_[k * j];
            nodeAffected[j] = crossesNewDisc(origin, nodes, reachOf(origin, nodes), newCracks);
          }
        });
    std::vector<int32_t> nodeList;
    for (size_t j = 0; j < nodeCount; ++j) {
      if (nodeAffected[j] != 0) nodeList.push_back(static_cast<int32_t>(j));
    }
    bindNodes(nodeList);
  }
  const int created = splitTriangles(newCracks);
  return static_cast<int>(list.size()) + created;
}

void SurfaceBinding::computeNodeTransforms(std::span<const double> x) const {
  const auto k = static_cast<size_t>(k_);
  const size_t nodeCount = restNodes_.size() / 3;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, nodeCount, kGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t j = r.begin(); j != r.end(); ++j) {
                        double* out = &nodeTransforms_[9 * j];
                        std::fill(out, out + 9, 0.0);
                        const double* rest = &nodeRestFrame_[9 * j];
                        const Vec3 f1(rest[0], rest[1], rest[2]), f2(rest[3], rest[4], rest[5]),
                            m(rest[6], rest[7], rest[8]);
                        if (m.squaredNorm() == 0) continue;  // degenerate frame: no normal term
                        const int32_t* nodes = &nodeFrameNodes_[k * j];
                        const double* plane = &nodeFramePlane_[2 * (k - 1) * j];
                        const Vec3 x0 = row(x, static_cast<size_t>(nodes[0]));
                        Vec3 g1 = Vec3::Zero(), g2 = Vec3::Zero();
                        for (size_t i = 1; i < k; ++i) {
                          const Vec3 e = row(x, static_cast<size_t>(nodes[i])) - x0;
                          g1 += plane[2 * (i - 1)] * e;
                          g2 += plane[2 * (i - 1) + 1] * e;
                        }
                        const Vec3 g3 = g1.cross(g2);
                        const double det = g3.squaredNorm();  // det [g1 g2 g3] > 0
                        if (!(det > 0) || !std::isfinite(det)) continue;
                        // M = G^-T F^T: columns of G^-T are the dual basis (g2 x g3, g3 x g1, g1 x
                        // g2) / det.
                        const Vec3 d1 = g2.cross(g3) / det, d2 = g3.cross(g1) / det, d3 = g3 / det;
                        Eigen::Map<Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> transform(out);
                        transform = d1 * f1.transpose() + d2 * f2.transpose() + d3 * m.transpose();
                      }
                    });
}

Vec3 SurfaceBinding::movedNormal(size_t v) const {
  const auto k = static_cast<size_t>(k_);
  const Vec3 n = row(restNormals_, v);
  const int32_t* nodes = &nodes_[k * v];
  const double* weights = &normalWeights_[k * v];
  Vec3 sum = Vec3::Zero();
  for (size_t i = 0; i < k; ++i) {
    if (weights[i] == 0) continue;
    const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> transform(
        &nodeTransforms_[9 * static_cast<size_t>(nodes[i])]);
    sum.noalias() += weights[i] * (transform * n);
  }
  const double length = sum.norm();
  return length > 0 && std::isfinite(length) ? Vec3(sum / length) : n;
}

void SurfaceBinding::deformPoints(std::span<const double> x, std::span<double> positions,
                                  std::span<double> normals) const {
  const size_t count = source_.size();
  if (x.size() != restNodes_.size()) {
    throw InputError(message("deform: x has " + std::to_string(x.size()) + " values, expected " +
                             std::to_string(restNodes_.size())));
  }
  if (positions.size() != 3 * count || (!normals.empty() && normals.size() != 3 * count) ||
      (!normals.empty() && !hasNormals_)) {
    throw InputError(message("deform: output arrays do not match the vertex count"));
  }
  const auto k = static_cast<size_t>(k_);
  const bool wantNormals = !normals.empty();
  if (wantNormals) computeNodeTransforms(x);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, count, kGrain),
                    [&](const tbb::blocked_range<size_t>& r) {
                      std::array<Vec3, kMaxNeighbours> e;
                      for (size_t v = r.begin(); v != r.end(); ++v) {
                        const int32_t* nodes = &nodes_[k * v];
                        const auto n0 = static_cast<size_t>(nodes[0]);
                        const Vec3 x0 = row(x, n0);
                        if (wantNormals) setRow(normals, v, movedNormal(v));
                        const size_t frames = frames_[v];
                        if (frames == 0) {  // translation
                          setRow(positions, v, row(restPositions_, v) + (x0 - row(restNodes_, n0)));
                          continue;
                        }
                        // N' from the least-squares map f (see the header).
                        const double* plane = &planeWeights_[2 * (k - 1) * v];
                        Vec3 f1 = Vec3::Zero(), f2 = Vec3::Zero();
                        for (size_t i = 1; i < k; ++i) {
                          e[i] = row(x, static_cast<size_t>(nodes[i])) - x0;
                          f1 += plane[2 * (i - 1)] * e[i];
                          f2 += plane[2 * (i - 1) + 1] * e[i];
                        }
                        const Vec3 m = f1.cross(f2);
                        const double mLength2 = m.squaredNorm();
                        const Vec3 normal = mLength2 > 0 && std::isfinite(mLength2)
                                                ? Vec3(m / std::sqrt(mLength2))
                                                : row(frameNormals_, v);
                        // Eq. (17), (19), (20) with D_i^k = W_i C_i^k, l = |e|, e = e_i^1',
                        // e^3 = e^2 x e / l = e (N.e) / l^2 - N, and e^2 carried by the
                        // least-squares map (bindVertex), e^2' = alpha_i f1' + beta_i f2':
                        //   sum_i W_i (c'_i - p'_0) = sum_i (D^1 + D^3 (N.e) / l^2) e
                        //     + (sum_i D^2 alpha_i) f1' + (sum_i D^2 beta_i) f2' - (sum_i D^3) N
                        // (a collapsed edge, l = 0, contributes D^1 e = 0 only). [ours] The
                        // paper's e^2' = N x e / l keeps its unit length: a point beside a
                        // chord kept its distance from it whatever the stretch, 0.6 node
                        // spacings off a sheet held at 1.8 times its length, and the edges of
                        // a pulled sheet went ragged. f' follows any affine motion of the
                        // nodes, so a flat sheet's surface now does too, exactly
                        // (SurfaceBinding.InPlaneAffineMotionIsExact); rigid motion as before.
                        const double* coords = &coords_[3 * (k - 1) * v];
                        const double* across = &across_[2 * v];
                        Vec3 along = Vec3::Zero();
                        double up = 0;
                        for (size_t i = 1; i <= frames; ++i) {
                          const double* d = coords + 3 * (i - 1);
                          const double length2 = e[i].squaredNorm();
                          if (!(length2 > 0)) continue;
                          along += (d[0] + d[2] * normal.dot(e[i]) / length2) * e[i];
                          up += d[2];
                        }
                        const Vec3 sum = along + across[0] * f1 + across[1] * f2 - up * normal;
                        setRow(positions, v, x0 + sum);
                      }
                    });
}

void SurfaceBinding::deform(std::span<const double> x, Geometry& out) const {
  const size_t count = source_.size();
  out.positions.resize(3 * count);
  if (hasNormals_) {
    out.normals.resize(3 * count);
  } else {
    out.normals.clear();
  }
  out.colors.assign(colors_.begin(), colors_.end());
  if (nodePiece_.empty()) {
    out.triangles.assign(triangles_.begin(), triangles_.end());
  } else {
    // A triangle whose corners follow different pieces would stretch between them as the
    // pieces drift apart: it is left out (separated, never stretched).
    out.triangles.clear();
    const auto k = static_cast<size_t>(k_);
    for (size_t t = 0; t + 2 < triangles_.size(); t += 3) {
      const auto piece = [&](size_t corner) {
        return nodePiece_[static_cast<size_t>(
            nodes_[k * static_cast<size_t>(triangles_[t + corner])])];
      };
      if (piece(0) == piece(1) && piece(1) == piece(2)) {
        out.triangles.insert(out.triangles.end(), &triangles_[t], &triangles_[t] + 3);
      }
    }
  }
  deformPoints(x, out.positions, out.normals);
  if (cracks_.empty() && nodePiece_.empty()) return;
  // Once the shell has torn, a tear can also open through broken fibers with no disc or
  // piece boundary across it yet (a bridge elsewhere still joins the two sides). A triangle
  // with an edge stretched beyond kTornStretch times its rest length spans such an opening
  // (the fibers around it broke long before: every fracture threshold of the scenes is a
  // far smaller stretch), so it is left out rather than drawn across the gap.
  size_t kept = 0;
  for (size_t t = 0; t + 2 < out.triangles.size(); t += 3) {
    bool intact = true;
    for (size_t c = 0; c < 3 && intact; ++c) {
      const auto a = static_cast<size_t>(out.triangles[t + c]);
      const auto b = static_cast<size_t>(out.triangles[t + (c + 1) % 3]);
      const double now = (row(out.positions, a) - row(out.positions, b)).squaredNorm();
      const double rest = (row(restPositions_, a) - row(restPositions_, b)).squaredNorm();
      intact = now <= kTornStretch * kTornStretch * rest;
    }
    if (!intact) continue;
    for (size_t c = 0; c < 3; ++c) out.triangles[kept + c] = out.triangles[t + c];
    kept += 3;
  }
  out.triangles.resize(kept);
}

Geometry SurfaceBinding::deform(std::span<const double> x) const {
  Geometry out;
  deform(x, out);
  return out;
}

std::span<const int32_t> SurfaceBinding::boundNodes(int32_t v) const {
  const auto k = static_cast<size_t>(k_);
  return std::span<const int32_t>(nodes_).subspan(k * static_cast<size_t>(v), k);
}

int32_t SurfaceBinding::translationCount() const {
  return static_cast<int32_t>(std::count(frames_.begin(), frames_.end(), uint8_t{0}));
}

size_t SurfaceBinding::memoryBytes() const {
  return bytes(restNodes_) + bytes(cracks_) + bytes(restPositions_) + bytes(restNormals_) +
         bytes(colors_) + bytes(source_) + bytes(origins_) + bytes(frames_) + bytes(nodes_) +
         bytes(reach_) + bytes(coords_) + bytes(weights_) + bytes(planeWeights_) + bytes(across_) +
         bytes(normalWeights_) + bytes(nodeFrameNodes_) + bytes(nodeFramePlane_) +
         bytes(nodeRestFrame_) + bytes(nodeTransforms_) + bytes(frameNormals_) + bytes(triangles_) +
         (tree_ ? tree_->size() * (sizeof(uint32_t) + 8) : 0);  // kd-tree, roughly
}

}  // namespace shellsim
