#include "models/mls/mls_model.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <sstream>

#include "core/spatial.hpp"
#include "core/vec3.hpp"
#include "models/mls/mls_surface.hpp"
#include "models/stable_step.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

// h_i over the distance to the farthest stencil neighbour: that neighbour keeps the weight
// (1 - 0.8^2)^3 = 0.047 of the centre's, so every neighbour counts.
constexpr double kSupportOverReach = 1.25;
// Moment matrices with eigenvalues further apart than this are singular.
constexpr double kMaxMomentCondition = 1e8;

struct MlsWorkspace : ModelWorkspace {
  std::vector<double> energies;                     // (nPhyxels)
  std::vector<Eigen::Vector4d> stress;              // (nPhyxels, 3): v_p P_p's columns, N m
  std::vector<Eigen::Vector4d> paddedDisplacement;  // (nPhyxels): u, 0, m; one vector load
};

// The weighted least-squares fit of a displacement component over a stencil (muller2004
// eqs. 12-13 with the value at the phyxel fixed), in the monomials of y = x_ij / h: linear
// (y; the paper's) or quadratic (y and its 6 products). Both are linear in the offsets
// u_j - u_i: gradient = M_g (u_j - u_i)_j, and the fit's residual at the neighbours is
// R (u_j - u_i)_j.
struct StencilFit {
  Eigen::Matrix<double, 3, Eigen::Dynamic> gradient;  // (3, n - 1), 1/m: column j is d_j
  Eigen::MatrixXd residual;                           // R, (n - 1, n - 1)
  bool quadratic = false;
};

// thinDirection (unit), when given: the stencil is two layers of a sheet (MlsSolidParams::
// layers) across that direction n, which hold two distinct positions along n only, so the
// quadratic leaves out (y.n)^2 and keeps the other five products in a frame (a, b, n): the
// bending field u = -kappa (y.a)(y.n) a + kappa (y.a)^2 / 2 n stays exact.
// How far a fit trusts a stencil, in eigenvalues of its normal matrix relative to the
// largest: the quadratic needs the smallest above `quadratic`; a plane leaves out the
// directions below `plane` (a pseudo-inverse).
struct FitLimits {
  double quadratic = 1e-10;
  double plane = 1e-10;
};

// A melt's rebuilt stencils. One the flow squeezed thin (a slab one or two phyxels thick)
// would fit its thin direction from offsets of a fraction of the spacing, with shape
// vectors, stiffness and a stable step that scale with the inverse of its spread there: a
// melted cuboid's step fell 670 times, to 4e-7 s. With these limits a direction spread less
// than a tenth of the widest is left out (as a coplanar stencil's is) and the step falls at
// most about ten times.
constexpr FitLimits kMeltFitLimits{1e-4, 1e-2};

StencilFit fitStencil(std::span<const Vec3> offsets, std::span<const double> weights, double h,
                      bool quadratic, const Vec3* thinDirection, const FitLimits& limits) {
  const auto n = static_cast<Eigen::Index>(offsets.size());
  Vec3 axisA = Vec3::UnitX(), axisB = Vec3::UnitY(), axisN = Vec3::UnitZ();
  if (thinDirection != nullptr) {
    axisN = *thinDirection;
    axisA = axisN.unitOrthogonal();
    axisB = axisN.cross(axisA);
  }
  for (int attempt = quadratic ? 0 : 1; attempt < 2; ++attempt) {
    const Eigen::Index b = attempt == 1 ? 3 : (thinDirection != nullptr ? 8 : 9);
    Eigen::MatrixXd P(n, b);
    for (Eigen::Index j = 0; j < n; ++j) {
      const Vec3 y = offsets[static_cast<size_t>(j)] / h;
      P(j, 0) = y.x();
      P(j, 1) = y.y();
      P(j, 2) = y.z();
      if (b > 3) {
        const double ya = y.dot(axisA), yb = y.dot(axisB), yn = y.dot(axisN);
        P(j, 3) = ya * ya;
        P(j, 4) = yb * yb;
        P(j, 5) = ya * yb;
        P(j, 6) = yb * yn;
        P(j, 7) = yn * ya;
        if (b == 9) P(j, 8) = yn * yn;
      }
    }
    const Eigen::Map<const Eigen::VectorXd> w(weights.data(), n);
    const Eigen::MatrixXd PtW = P.transpose() * w.asDiagonal();
    const Eigen::MatrixXd G = PtW * P;
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(G);
    const double smallest = eigen.eigenvalues()(0), largest = eigen.eigenvalues()(b - 1);
    // A quadratic needs three distinct positions along every axis: where the stencil has not
    // got them (a slab two phyxels thick) the phyxel fits a plane, as the paper does.
    if (b > 3 && !(smallest > limits.quadratic * largest)) continue;
    // The pseudo-inverse: a melt may squeeze a neighbourhood flat (notes B6 d), and then the
    // gradient along the lost direction is left out rather than made up.
    Eigen::VectorXd inverse = eigen.eigenvalues();
    for (Eigen::Index e = 0; e < b; ++e) {
      inverse(e) = inverse(e) > (b > 3 ? 1e-10 : limits.plane) * largest ? 1.0 / inverse(e) : 0.0;
    }
    const Eigen::MatrixXd M =
        eigen.eigenvectors() * inverse.asDiagonal() * eigen.eigenvectors().transpose() * PtW;
    StencilFit fit;
    fit.gradient = M.topRows(3) / h;
    fit.residual = Eigen::MatrixXd::Identity(n, n) - P * M;
    fit.quadratic = b > 3;
    return fit;
  }
  return {};
}

std::string describePoint(std::span<const double> positions, size_t i) {
  std::ostringstream out;
  out << "(" << positions[3 * i] << ", " << positions[3 * i + 1] << ", " << positions[3 * i + 2]
      << ")";
  return out.str();
}

// Phyxels per chunk of the force loops. A phyxel's share of a gradient is about 120 ns, and
// waking a second thread costs more than a few hundred of them bring: on this project's
// 2-core machine the bunny's gradient took 22 us on one thread and 35 on two at 190
// phyxels (47 and 60-69 at 390) with chunks of 32; at 2,000 two threads gain 1.2 times.
constexpr size_t kPhyxelGrain = 512;

}  // namespace

MlsSolidModel::MlsSolidModel(std::span<const double> phyxels, std::span<const double> volumes,
                             const MaterialDef& material, const MlsSolidParams& params,
                             const Geometry& surface) {
  const size_t count = phyxels.size() / 3;
  nodeCount_ = static_cast<int32_t>(count);
  if (params.neighbours < 4 || params.neighbours > 63) {
    throw InputError(
        "mls_solid: neighbours must be in [4, 63] (three of them off any plane; a stencil "
        "holds at most 64 phyxels)");
  }
  if (params.layers != 0 && params.layers != 2 && params.layers != 3) {
    throw InputError("mls_solid: layers must be 0, 2 or 3");
  }
  if (params.layers > 0 && count % static_cast<size_t>(params.layers) != 0) {
    throw InputError("mls_solid: a layered sheet has a multiple of its layer count of phyxels");
  }
  if (params.layers > 0) {
    const auto L = static_cast<size_t>(params.layers);
    const size_t needed = std::min((static_cast<size_t>(params.neighbours) + L) / L, 64 / L);
    if (count / L < needed) {
      std::ostringstream msg;
      msg << "mls_solid: a sheet of " << count / L << " vertices, but a stencil of "
          << params.neighbours << " neighbours in " << L << " layers spans " << needed
          << " vertices (refine the mesh or lower neighbours)";
      throw InputError(msg.str());
    }
  }
  if (count < static_cast<size_t>(params.neighbours) + 1) {
    std::ostringstream msg;
    msg << "mls_solid: " << count << " phyxels, but a stencil of " << params.neighbours
        << " neighbours needs at least " << params.neighbours + 1
        << " (sample more phyxels or lower neighbours)";
    throw InputError(msg.str());
  }
  if (!volumes.empty() && volumes.size() != count) {
    throw InputError("mls_solid: one volume per phyxel expected");
  }
  for (size_t i = 0; i < phyxels.size(); ++i) {
    if (!std::isfinite(phyxels[i])) {
      std::ostringstream msg;
      msg << "mls_solid: phyxel " << i / 3 << " has a non-finite coordinate";
      throw InputError(msg.str());
    }
  }
  rest_.assign(phyxels.begin(), phyxels.end());
  const double E = material.youngModulus;
  const double nu = material.poisson;
  elasticity_.mu = E / (2.0 * (1.0 + nu));
  elasticity_.lambda = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
  elasticity_.volumeStiffness = params.volumeStiffness;
  hourglassScale_ = params.hourglass * elasticity_.mu;
  materialMu_ = elasticity_.mu;
  materialLambda_ = elasticity_.lambda;
  materialHourglass_ = hourglassScale_;
  projectHessian_ = params.projectHessian;

  neighbours_ = params.neighbours;
  layers_ = params.layers;
  quadratic_ = params.quadraticBasis;
  volume_.assign(count, 0.0);
  if (!volumes.empty()) {
    for (size_t i = 0; i < count; ++i) {
      if (!(volumes[i] > 0) || !std::isfinite(volumes[i])) {
        std::ostringstream msg;
        msg << "mls_solid: phyxel " << i << " has volume " << volumes[i] << " (must be positive)";
        throw InputError(msg.str());
      }
    }
    volume_.assign(volumes.begin(), volumes.end());
  }
  buildStencils(true, volumes.empty());
  mass_.resize(count);
  for (size_t i = 0; i < count; ++i) mass_[i] = material.density * volume_[i];
  computeStableStep();
  bindSurface(surface);
  plasticity_ = params.plasticity;
  if (plasticity_) {
    plasticStrain_.assign(6 * count, 0.0);
    clock_.assign(plasticity_->melt ? 2 : 1, 0.0);
    if (plasticity_->movesReference()) volumeRatio_.assign(count, 1.0);
  }
  if (params.resampleSurface) startResampledSurface();
}

void MlsSolidModel::startResampledSurface() {
  if (!plasticity_ || !plasticity_->melt) {
    throw InputError("mls_solid: a resampled surface needs melting (plasticity.melt on)");
  }
  if (!restSurface_.isPointCloud() || !restSurface_.hasNormals() ||
      restSurface_.vertexCount() < 4) {
    throw InputError("mls_solid: a resampled surface needs surfels (points with normals)");
  }
  const auto surfels = static_cast<size_t>(restSurface_.vertexCount());
  // sigma of eq. (28): the mean distance from a phyxel to its nearest; the surfels' spacing
  // likewise.
  const auto meanNearest = [](std::span<const double> points) {
    const PointKdTree tree(points);
    std::vector<uint32_t> found;
    std::vector<double> squared;
    double sum = 0;
    for (size_t p = 0; p < points.size() / 3; ++p) {
      tree.nearest(&points[3 * p], 2, found, squared);
      sum += std::sqrt(squared.back());
    }
    return sum / static_cast<double>(points.size() / 3);
  };
  resampled_ = true;
  fieldWidth_ = meanNearest(rest_);
  surfelSpacing_ = meanNearest(restSurface_.positions);
  maxSurfels_ = 4 * surfels;
  const mls::ImplicitField field(rest_, fieldWidth_);
  surfelInitial_.resize(surfels);
  for (size_t s = 0; s < surfels; ++s) {
    surfelInitial_[s] = field.value(row(restSurface_.positions, s), nullptr);
  }
  // S: the median field value on the input surface, so L_I starts where it is.
  std::vector<double> sorted = surfelInitial_;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(surfels / 2),
                   sorted.end());
  isoValue_ = sorted[surfels / 2];
  surfelEstimate_ = surfelInitial_;
  surfelBlended_.assign(surfels, 0.0);
  boundaryBefore_ = mls::boundaryProbabilities(rest_, cutoff_);
}

void MlsSolidModel::updateResampledSurface() {
  mls::Surfels surfels{std::move(restSurface_.positions), std::move(restSurface_.normals),
                       std::move(surfelInitial_), std::move(surfelEstimate_),
                       std::move(surfelBlended_)};
  const mls::ImplicitField field(rest_, fieldWidth_);
  std::vector<double> boundary = mls::boundaryProbabilities(rest_, cutoff_);
  mls::updateSurfels(surfels, field, boundary, boundaryBefore_, bindOffsets_, bindPhyxels_,
                     {isoValue_, surfelSpacing_, maxSurfels_, static_cast<uint64_t>(absorptions_),
                      clock_[0] - clock_[1]});
  boundaryBefore_ = std::move(boundary);
  restSurface_.positions = std::move(surfels.positions);
  restSurface_.normals = std::move(surfels.normals);
  surfelInitial_ = std::move(surfels.initial);
  surfelEstimate_ = std::move(surfels.estimate);
  surfelBlended_ = std::move(surfels.blended);
  const Geometry carried = restSurface_;
  bindSurface(carried);
}

// Rebinding the surface to the moved reference is a kd-tree query per vertex: done every
// this many absorptions (between them the bindings stay, with their rest offsets updated).
constexpr int64_t kRebindEvery = 16;

void MlsSolidModel::absorbReference(std::span<const double> x, double stiffening) {
  const auto count = static_cast<size_t>(nodeCount_);
  // The surface's new rest shape is where it is now (eq. 27 at x): with F = I after the
  // absorption, eq. (27) puts it exactly there.
  if (restSurface_.vertexCount() > 0) {
    std::vector<double> positions, normals;
    carrySurface(x, positions, restSurface_.hasNormals() ? &normals : nullptr);
    restSurface_.positions = std::move(positions);
    if (restSurface_.hasNormals()) restSurface_.normals = std::move(normals);
  }
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 256), [&](const tbb::blocked_range<size_t>& r) {
        mls::Mat3 storage;
        for (size_t p = r.begin(); p != r.end(); ++p) {
          const mls::Mat3 F = deformationGradient(p, x);
          const mls::Mat3 elastic =
              0.5 * (F.transpose() * F - mls::Mat3::Identity()) - *plasticAt(p, storage);
          // The new total strain is 0: the plastic strain is minus the stored elastic one.
          mls::Mat3 stored;
          if (stiffening > 0) {
            // k C(E') = F C(E_e) F^T with C(E) = 2 mu E + lambda tr(E) I, inverted as
            // C^-1(S) = (S - lambda / (3 lambda + 2 mu) tr(S) I) / (2 mu) (the material's
            // moduli; k scales both). F carries the rotation: no polar decomposition needed.
            const double mu = materialMu_, lambda = materialLambda_;
            const mls::Mat3 stress =
                2 * mu * elastic + lambda * elastic.trace() * mls::Mat3::Identity();
            const mls::Mat3 kirchhoff = F * stress * F.transpose();
            stored = (kirchhoff -
                      lambda / (3 * lambda + 2 * mu) * kirchhoff.trace() * mls::Mat3::Identity()) /
                     (2 * mu * stiffening);
          } else {
            // The elastic strain lives in the reference's axes: in the new reference (the
            // current shape) it is R E_e R^T, R the rotation of F (notes B6 a: without it a
            // spinning blob keeps its strain in world axes and meets a spurious torque).
            const Eigen::JacobiSVD<mls::Mat3> svd(F, Eigen::ComputeFullU | Eigen::ComputeFullV);
            mls::Mat3 U = svd.matrixU();
            if ((U * svd.matrixV().transpose()).determinant() < 0) U.col(2) *= -1;
            const mls::Mat3 R = U * svd.matrixV().transpose();
            stored = R * elastic * R.transpose();
          }
          setPlasticAt(p, -stored);
          volumeRatio_[p] *= std::max(F.determinant(), 1e-3);
        }
      });
  rest_.assign(x.begin(), x.end());
  buildStencils(false, false);
  computeStableStep();
  ++absorptions_;
  ++topologyVersion_;
  if (resampled_) {
    updateResampledSurface();
  } else if (restSurface_.vertexCount() > 0 && absorptions_ % kRebindEvery == 0) {
    const Geometry carried = restSurface_;
    bindSurface(carried);
  }
}

void MlsSolidModel::buildStencils(bool firstBuild, bool shepardVolumes) {
  const auto count = static_cast<size_t>(nodeCount_);
  // Stencils: the phyxel first, then its neighbours nearest first.
  const auto layers = static_cast<size_t>(layers_);
  // A layered sheet's stencil: every layer of the m vertices nearest on the mid-surface
  // (itself first), m L >= neighbours + 1, at most 64 phyxels.
  const size_t stencilVertices =
      layers > 0 ? std::min((static_cast<size_t>(neighbours_) + layers) / layers, 64 / layers) : 0;
  const size_t fullStencil =
      layers > 0 ? stencilVertices * layers : static_cast<size_t>(neighbours_) + 1;
  std::vector<double> midSurface;  // (nVertices, 3), m: the mean of each vertex's layers
  if (layers > 0) {
    midSurface.assign(3 * (count / layers), 0.0);
    for (size_t p = 0; p < count; ++p) {
      for (size_t a = 0; a < 3; ++a) {
        midSurface[3 * (p / layers) + a] += rest_[3 * p + a] / static_cast<double>(layers);
      }
    }
  }
  const PointKdTree tree(layers > 0 ? std::span<const double>(midSurface)
                                    : std::span<const double>(rest_));
  // Pass 1: the stencils. A melt's rebuild keeps only neighbours within the phyxel's first
  // support radius (muller2004 section 4.2 keeps h_i), so parts that flowed apart stop
  // interacting (a split) and parts that flowed together start (a merge); a phyxel left with
  // no neighbour in reach is loose: it stores its energy at F = I and feels no force.
  std::vector<std::vector<int32_t>> lists(count);
  std::vector<std::string> errors(count);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 64), [&](const tbb::blocked_range<size_t>& r) {
        std::vector<uint32_t> found;
        std::vector<double> squared;
        for (size_t i = r.begin(); i != r.end(); ++i) {
          std::vector<int32_t>& nodes = lists[i];
          nodes.reserve(fullStencil);
          nodes.push_back(static_cast<int32_t>(i));
          if (layers > 0) {
            const size_t vertex = i / layers;
            tree.nearest(&midSurface[3 * vertex], stencilVertices + 1, found, squared);
            // The vertex itself first (a tie at distance 0 may list it later), then the
            // nearest others.
            std::erase(found, static_cast<uint32_t>(vertex));
            found.insert(found.begin(), static_cast<uint32_t>(vertex));
            found.resize(stencilVertices);
            for (const uint32_t v : found) {
              for (size_t l = 0; l < layers; ++l) {
                const size_t p = v * layers + l;
                if (p != i) nodes.push_back(static_cast<int32_t>(p));
              }
            }
            for (size_t j = 1; j < nodes.size() && firstBuild; ++j) {
              if (!((row(rest_, static_cast<size_t>(nodes[j])) - row(rest_, i)).squaredNorm() >
                    0)) {
                errors[i] = "mls_solid: phyxels " + std::to_string(i) + " and " +
                            std::to_string(nodes[j]) + " coincide at " + describePoint(rest_, i);
                break;
              }
            }
            continue;
          }
          const double reach2 =
              firstBuild ? std::numeric_limits<double>::infinity() : cutoff_[i] * cutoff_[i];
          tree.nearest(&rest_[3 * i], fullStencil + 1, found, squared);
          for (size_t f = 0; f < found.size() && nodes.size() < fullStencil; ++f) {
            if (found[f] == i) continue;
            if (!(squared[f] > 0) && firstBuild) {
              errors[i] = "mls_solid: phyxels " + std::to_string(i) + " and " +
                          std::to_string(found[f]) + " coincide at " + describePoint(rest_, i);
              break;
            }
            if (!(squared[f] < reach2)) break;  // nearest first: the rest are farther
            nodes.push_back(static_cast<int32_t>(found[f]));
          }
        }
      });
  for (const std::string& e : errors) {
    if (!e.empty()) throw InputError(e);
  }
  stencilOffsets_.assign(count + 1, 0);
  squareOffsets_.assign(count + 1, 0);
  for (size_t i = 0; i < count; ++i) {
    const auto n = static_cast<int64_t>(lists[i].size());
    stencilOffsets_[i + 1] = stencilOffsets_[i] + static_cast<int32_t>(n);
    squareOffsets_[i + 1] = squareOffsets_[i] + n * n;
  }
  stencilNodes_.resize(static_cast<size_t>(stencilOffsets_[count]));
  for (size_t i = 0; i < count; ++i) {
    std::copy(lists[i].begin(), lists[i].end(), stencilNodes_.begin() + stencilOffsets_[i]);
  }
  lists = {};
  misfit_.assign(static_cast<size_t>(squareOffsets_[count]), 0.0);
  shape_.assign(3 * stencilNodes_.size(), 0.0);
  support_.resize(count);
  std::vector<double> worstCondition(count, 0.0);
  std::vector<char> quadraticFits(count, 0);
  const bool quadratic = quadratic_;
  sheetNormal_.assign(layers == 2 ? 3 * count : 0, 0.0);
  volume_.resize(count);
  // Pass 2: supports, fits, shape vectors and misfit penalties.
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 64), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) {
          const auto first = static_cast<size_t>(stencilOffsets_[i]);
          const size_t k = static_cast<size_t>(stencilOffsets_[i + 1]) - first;
          const int32_t* nodes = &stencilNodes_[first];
          if (k == 1) {  // loose (a melt's rebuild only): F = I, no fit
            support_[i] = cutoff_[i];
            continue;
          }
          const Vec3 xi = row(rest_, i);
          double reach = 0;
          for (size_t j = 1; j < k; ++j) {
            reach = std::max(reach, (row(rest_, static_cast<size_t>(nodes[j])) - xi).norm());
          }
          const double h = kSupportOverReach * reach;
          support_[i] = h;
          // Moment matrix, muller2004 eq. (14).
          Eigen::Matrix3d A = Eigen::Matrix3d::Zero();
          double weightSum = 1.0;  // W(0) = 1 in the unnormalised shape
          std::vector<double> weights(k, 0.0);
          for (size_t j = 1; j < k; ++j) {
            const Vec3 xij = row(rest_, static_cast<size_t>(nodes[j])) - xi;
            weights[j] = mls::poly6Shape(xij.squaredNorm(), h * h);
            weightSum += weights[j];
            A += weights[j] * xij * xij.transpose();
          }
          const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eigen(A);
          const double largest = eigen.eigenvalues()(2);
          const double smallest = eigen.eigenvalues()(0);
          const double condition =
              smallest > 0 ? largest / smallest : std::numeric_limits<double>::infinity();
          worstCondition[i] = condition;
          if (!(condition < kMaxMomentCondition) && firstBuild) {
            std::ostringstream msg;
            msg << "mls_solid: phyxel " << i << " at " << describePoint(rest_, i) << ": its "
                << neighbours_
                << " nearest neighbours lie in a plane or on a line (moment matrix condition "
                << condition
                << "): MLS needs phyxels spread in three dimensions around each one, and one "
                   "layer of phyxels is not a volume (muller2004 section 7); sample a volume, or "
                   "use a shell model for a sheet";
            errors[i] = msg.str();
            continue;
          }
          std::vector<Vec3> offsets(k - 1);
          for (size_t j = 1; j < k; ++j) {
            offsets[j - 1] = row(rest_, static_cast<size_t>(nodes[j])) - xi;
          }
          // Two layers: the direction across them at this phyxel's vertex.
          std::optional<Vec3> across;
          if (layers == 2) {
            const size_t bottom = (i / 2) * 2;
            across = (row(rest_, bottom + 1) - row(rest_, bottom)).normalized();
            setRow(sheetNormal_, i, *across);
          }
          const StencilFit fit =
              fitStencil(offsets, std::span<const double>(weights).subspan(1), h, quadratic,
                         across ? &*across : nullptr, firstBuild ? FitLimits{} : kMeltFitLimits);
          quadraticFits[i] = fit.quadratic ? 1 : 0;
          Vec3 selfShape = Vec3::Zero();
          for (size_t j = 1; j < k; ++j) {
            const Vec3 d = fit.gradient.col(static_cast<Eigen::Index>(j - 1));  // eq. (21)
            selfShape -= d;                                                     // eq. (20)
            setRow(shape_, first + j, d);
          }
          setRow(shape_, first, selfShape);
          // Shepard volume 1 / sum_j W_ij with the normalised poly6, 315 / (64 pi h^3) W-shape.
          if (shepardVolumes) {
            volume_[i] = 64.0 * std::numbers::pi * h * h * h / (315.0 * weightSum);
          }
          // The misfit penalty's constant Hessian Q_i, n x n: the fit's residual at neighbour
          // j is r_j = sum_m R_jm (u_m - u_i) = sum_k alpha_jk u_k (alpha_j0 = -sum_m R_jm),
          //   Q_i = sum_j c_ij alpha_j alpha_j^T,  c_ij = c_hg mu v_i wbar_ij / |x_ij|^2,
          // wbar_ij = w_ij / sum_{j != i} w_ij.
          if (hourglassScale_ > 0) {
            const double neighbourWeight = weightSum - 1.0;
            Eigen::Map<Eigen::MatrixXd> Q(&misfit_[static_cast<size_t>(squareOffsets_[i])],
                                          static_cast<Eigen::Index>(k),
                                          static_cast<Eigen::Index>(k));
            Eigen::VectorXd alpha(static_cast<Eigen::Index>(k));
            for (size_t j = 1; j < k; ++j) {
              const auto jj = static_cast<Eigen::Index>(j - 1);
              const double r2 = offsets[j - 1].squaredNorm();
              if (!(r2 > 0)) continue;  // a coincident neighbour (a melt) has no misfit
              const double c = hourglassScale_ * volume_[i] * weights[j] / neighbourWeight / r2;
              alpha.tail(static_cast<Eigen::Index>(k - 1)) = fit.residual.row(jj).transpose();
              alpha(0) = -fit.residual.row(jj).sum();
              Q.noalias() += c * alpha * alpha.transpose();
            }
          }
        }
      });
  for (const std::string& e : errors) {
    if (!e.empty()) throw InputError(e);
  }
  if (firstBuild) cutoff_ = support_;
  worstCondition_ = *std::max_element(worstCondition.begin(), worstCondition.end());
  quadraticCount_ = std::count(quadraticFits.begin(), quadraticFits.end(), 1);
  incidence_ = buildIncidence(stencilNodes_, nodeCount_);
  entryStencil_.resize(stencilNodes_.size());
  for (size_t i = 0; i < count; ++i) {
    std::fill(entryStencil_.begin() + stencilOffsets_[i],
              entryStencil_.begin() + stencilOffsets_[i + 1], static_cast<int32_t>(i));
  }
  incidenceStencil_.resize(incidence_.entries.size());
  incidenceShape_.resize(3 * incidence_.entries.size());
  for (size_t k = 0; k < incidence_.entries.size(); ++k) {
    const auto entry = static_cast<size_t>(incidence_.entries[k]);
    incidenceStencil_[k] = entryStencil_[entry];
    std::copy_n(&shape_[3 * entry], 3, &incidenceShape_[3 * k]);
  }
  assembleMisfit();
}

void MlsSolidModel::assembleMisfit() {
  const auto count = static_cast<size_t>(nodeCount_);
  misfitRowOffsets_.assign(count + 1, 0);
  misfitColumns_.clear();
  misfitValues_.clear();
  if (!(hourglassScale_ > 0)) return;
  // Row r sums Q_i(m, k) over the stencils i holding r in slot m, in the incidence's order (the
  // stencils ascending), so the values do not depend on the thread count.
  std::vector<std::vector<std::pair<int32_t, double>>> rows(count);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 64), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t row = r.begin(); row != r.end(); ++row) {
          std::vector<std::pair<int32_t, double>>& terms = rows[row];
          for (int32_t e = incidence_.offsets[row]; e < incidence_.offsets[row + 1]; ++e) {
            const auto entry = incidence_.entries[static_cast<size_t>(e)];
            const auto stencil = static_cast<size_t>(entryStencil_[static_cast<size_t>(entry)]);
            const auto begin = static_cast<size_t>(stencilOffsets_[stencil]);
            const auto n = static_cast<size_t>(stencilOffsets_[stencil + 1]) - begin;
            const auto m = static_cast<size_t>(entry) - begin;
            const double* Q = &misfit_[static_cast<size_t>(squareOffsets_[stencil])];
            for (size_t k = 0; k < n; ++k)
              terms.emplace_back(stencilNodes_[begin + k], Q[m + k * n]);
          }
          std::stable_sort(terms.begin(), terms.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
          size_t kept = 0;
          for (size_t t = 0; t < terms.size(); ++t) {
            if (kept > 0 && terms[kept - 1].first == terms[t].first) {
              terms[kept - 1].second += terms[t].second;
            } else {
              terms[kept++] = terms[t];
            }
          }
          terms.resize(kept);
        }
      });
  for (size_t row = 0; row < count; ++row) {
    misfitRowOffsets_[row + 1] = misfitRowOffsets_[row] + static_cast<int32_t>(rows[row].size());
  }
  misfitColumns_.resize(static_cast<size_t>(misfitRowOffsets_[count]));
  misfitValues_.resize(misfitColumns_.size());
  for (size_t row = 0; row < count; ++row) {
    auto at = static_cast<size_t>(misfitRowOffsets_[row]);
    for (const auto& [column, value] : rows[row]) {
      misfitColumns_[at] = column;
      misfitValues_[at++] = value;
    }
  }
}

void MlsSolidModel::computeStableStep() {
  // Over stencils of 27 nodes Gershgorin's bound is several times too large: Lanczos
  // (stable_step.hpp).
  stableStep_ = stableStepFromHessian(*this, rest_, mass_);
}

const mls::Mat3* MlsSolidModel::plasticAt(size_t p, mls::Mat3& storage) const {
  if (plasticStrain_.empty()) return nullptr;
  const double* e = &plasticStrain_[6 * p];
  storage << e[0], e[3], e[5], e[3], e[1], e[4], e[5], e[4], e[2];
  return &storage;
}

void MlsSolidModel::setPlasticAt(size_t p, const mls::Mat3& strain) {
  double* e = &plasticStrain_[6 * p];
  e[0] = strain(0, 0);
  e[1] = strain(1, 1);
  e[2] = strain(2, 2);
  e[3] = 0.5 * (strain(0, 1) + strain(1, 0));
  e[4] = 0.5 * (strain(1, 2) + strain(2, 1));
  e[5] = 0.5 * (strain(2, 0) + strain(0, 2));
}

InelasticReport MlsSolidModel::updateInelastic(std::span<const double> x, double dt,
                                               ModelWorkspace* workspace) {
  (void)workspace;
  InelasticReport report;
  if (!plasticity_) return report;
  clock_[0] += dt;
  const MlsPlasticity& plastic = *plasticity_;
  if (plastic.stiffens() && solidified_ == 0 && clock_[0] > plastic.until) {
    // "Stiff again" (muller2004 Fig. 3): the moduli go up by k and the dented shape becomes
    // the reference, storing the elastic strain whose stress under them is the Kirchhoff
    // stress before (absorbReference), so nothing is kicked by the strain the plastic flow
    // locked in (with the old reference it was: a dented bunny's 1.6 J at rest, times k, made
    // 2 J of motion). The hourglass misfit starts from zero on the new stencils; the volume
    // term keeps measuring against the original volumes.
    solidified_ = 1;
    applyStiffness();
    absorbReference(x, plastic.solidStiffness);
    return report;
  }
  if (clock_[0] < plastic.from || clock_[0] > plastic.until) return report;
  const auto count = static_cast<size_t>(nodeCount_);
  std::vector<uint8_t> yielded(count, 0);
  const double rate = std::min(1.0, plastic.creep * dt);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, count, 256),
                    [&](const tbb::blocked_range<size_t>& r) {
                      mls::Mat3 storage;
                      for (size_t p = r.begin(); p != r.end(); ++p) {
                        const mls::Mat3 F = deformationGradient(p, x);
                        const mls::Mat3 Ep = *plasticAt(p, storage);
                        mls::Mat3 elastic = 0.5 * (F.transpose() * F - mls::Mat3::Identity()) - Ep;
                        if (plastic.deviatoric) {
                          elastic -= elastic.trace() / 3.0 * mls::Mat3::Identity();
                        }
                        if (!(elastic.norm() > plastic.yieldStrain)) continue;
                        // muller2004 section 4.1 (O'Brien 2002): creep toward the strain.
                        mls::Mat3 next = Ep + rate * elastic;
                        const double size = next.norm();
                        if (size > plastic.maxStrain) next *= plastic.maxStrain / size;
                        setPlasticAt(p, next);
                        yielded[p] = 1;
                      }
                    });
  report.yieldingElements = std::count(yielded.begin(), yielded.end(), 1);
  // clock_[1]: when the reference was last absorbed.
  if (plastic.melt && clock_[0] - clock_[1] >= plastic.meltInterval * (1 - 1e-9)) {
    absorbReference(x);
    clock_[1] = clock_[0];
  }
  return report;
}

void MlsSolidModel::applyStiffness() {
  const double factor = plasticity_ && solidified_ != 0 ? plasticity_->solidStiffness : 1.0;
  elasticity_.mu = factor * materialMu_;
  elasticity_.lambda = factor * materialLambda_;
  hourglassScale_ = factor * materialHourglass_;
}

std::vector<Model::NodeScalar> MlsSolidModel::nodeScalars() const {
  if (plasticStrain_.empty()) return {};
  NodeScalar out{"plastic_strain", std::vector<double>(static_cast<size_t>(nodeCount_))};
  mls::Mat3 storage;
  for (size_t p = 0; p < out.values.size(); ++p) out.values[p] = plasticAt(p, storage)->norm();
  return {out};
}

void MlsSolidModel::listStateFields(StateFields& fields) {
  if (!plasticity_) return;
  fields.add("plastic_strain", &plasticStrain_, StateShape::kPerNode, 6);
  fields.add("clock", &clock_);
  if (plasticity_->stiffens()) fields.add("solidified", &solidified_);
  if (!plasticity_->movesReference()) return;
  fields.add("reference", &rest_, StateShape::kPerNode, 3);
  fields.add("volume_ratio", &volumeRatio_, StateShape::kPerNode);
  fields.add("absorptions", &absorptions_);
  fields.add("topology_version", &topologyVersion_);
  fields.add("surface_rest", &restSurface_.positions);
  fields.add("surface_rest_normals", &restSurface_.normals);
  fields.add("binding_offsets", &bindOffsets_);
  fields.add("binding_phyxels", &bindPhyxels_);
  fields.add("binding_weights", &bindWeights_);
  if (!resampled_) return;
  fields.add("surfel_initial_field", &surfelInitial_);
  fields.add("surfel_field_estimate", &surfelEstimate_);
  fields.add("surfel_blended", &surfelBlended_);
  fields.add("boundary_probability", &boundaryBefore_, StateShape::kPerNode);
}

void MlsSolidModel::stateAssigned() {
  if (plasticity_ && clock_.size() != (plasticity_->melt ? 2u : 1u)) {
    throw InputError("mls_solid state: 'clock' must hold " +
                     std::string(plasticity_->melt ? "two values" : "one value"));
  }
  for (const double e : plasticStrain_) {
    if (!std::isfinite(e)) throw InputError("mls_solid state: a plastic strain is not finite");
  }
  if (plasticity_ && (solidified_ < 0 || solidified_ > 1)) {
    throw InputError("mls_solid state: 'solidified' must be 0 or 1");
  }
  applyStiffness();
  if (!plasticity_ || !plasticity_->movesReference()) return;
  for (const double v : rest_) {
    if (!std::isfinite(v)) throw InputError("mls_solid state: a reference position is not finite");
  }
  for (const double a : volumeRatio_) {
    if (!(a > 0) || !std::isfinite(a)) {
      throw InputError("mls_solid state: a volume ratio is not positive");
    }
  }
  // The binding must fit the surface and the phyxels.
  const auto vertices = restSurface_.positions.size() / 3;
  bool consistent = restSurface_.positions.size() % 3 == 0 &&
                    (restSurface_.normals.empty() ||
                     restSurface_.normals.size() == restSurface_.positions.size()) &&
                    bindPhyxels_.size() == bindWeights_.size() &&
                    (vertices == 0 ? bindOffsets_.empty()
                                   : bindOffsets_.size() == vertices + 1 && bindOffsets_[0] == 0);
  for (size_t v = 0; consistent && v < vertices; ++v) {
    consistent = bindOffsets_[v] <= bindOffsets_[v + 1] &&
                 static_cast<size_t>(bindOffsets_[v + 1]) <= bindPhyxels_.size();
  }
  for (const int32_t p : bindPhyxels_) consistent = consistent && p >= 0 && p < nodeCount_;
  if (resampled_) {
    consistent = consistent && restSurface_.normals.size() == 3 * vertices &&
                 surfelInitial_.size() == vertices && surfelEstimate_.size() == vertices &&
                 surfelBlended_.size() == vertices;
  }
  if (!consistent) throw InputError("mls_solid state: the surface binding does not fit");
  buildStencils(false, false);
  computeStableStep();
}

mls::Mat3 MlsSolidModel::deformationGradient(size_t p, std::span<const double> x) const {
  const auto begin = static_cast<size_t>(stencilOffsets_[p]);
  const auto n = static_cast<size_t>(stencilOffsets_[p + 1]) - begin;
  const Vec3 centre = displacement(x, static_cast<size_t>(stencilNodes_[begin]));
  mls::Mat3 F = mls::Mat3::Identity();
  for (size_t m = 1; m < n; ++m) {
    F.noalias() += (displacement(x, static_cast<size_t>(stencilNodes_[begin + m])) - centre) *
                   row(shape_, begin + m).transpose();
  }
  return F;
}

std::unique_ptr<ModelWorkspace> MlsSolidModel::makeWorkspace() const {
  return std::make_unique<MlsWorkspace>();
}

double MlsSolidModel::phyxelEnergy(size_t p, const Eigen::Vector4d* u,
                                   Eigen::Vector4d* stress) const {
  const auto begin = static_cast<size_t>(stencilOffsets_[p]);
  const auto n = static_cast<size_t>(stencilOffsets_[p + 1]) - begin;
  const int32_t* nodes = &stencilNodes_[begin];
  // Displacements relative to the phyxel's, u_m - u_i: F = I + sum_m (u_m - u_i) d_m^T
  // (eq. 14), exactly I at rest. Column c of F - I sums (u_m - u_i) d_m[c]; two partial sums
  // per column keep the multiply-adds from waiting on each other.
  const Eigen::Vector4d centre = u[nodes[0]];
  std::array<Eigen::Vector4d, 6> columns;
  for (auto& column : columns) column.setZero();
  size_t entry = 1;
  const auto accumulate = [&](size_t slot, size_t half) {
    const Eigen::Vector4d du = u[nodes[slot]] - centre;
    const double* d = &shape_[3 * (begin + slot)];
    columns[half] += du * d[0];
    columns[half + 2] += du * d[1];
    columns[half + 4] += du * d[2];
  };
  for (; entry + 1 < n; entry += 2) {
    accumulate(entry, 0);
    accumulate(entry + 1, 1);
  }
  if (entry < n) accumulate(entry, 0);
  mls::Mat3 F;
  for (int c = 0; c < 3; ++c) {
    const Eigen::Vector4d column =
        columns[2 * static_cast<size_t>(c)] + columns[2 * static_cast<size_t>(c) + 1];
    F.col(c) = column.head<3>();
    F(c, c) += 1.0;
  }
  mls::Mat3 P, plastic;
  Eigen::Vector3d normal;
  const double v = volume_[p];
  const Eigen::Vector3d* sheetNormal = sheetNormalAt(p, normal);
  mls::Mat3* wantStress = stress != nullptr ? &P : nullptr;
  const double energy =
      v * (sheetNormal == nullptr
               ? mls::isotropicDensity(F, elasticity_, plasticAt(p, plastic), wantStress,
                                       volumeScale(p))
               : mls::strainEnergyDensity(F, elasticity_, plasticAt(p, plastic), wantStress,
                                          nullptr, volumeScale(p), sheetNormal));
  if (stress != nullptr) {
    for (int c = 0; c < 3; ++c) stress[c] << v * P.col(c), 0.0;
  }
  return energy;
}

Eigen::Vector4d MlsSolidModel::misfitForce(size_t p, const Eigen::Vector4d* u) const {
  // Four partial sums keep the multiply-adds from waiting on each other; their order is fixed.
  std::array<Eigen::Vector4d, 4> partial;
  for (auto& sum : partial) sum.setZero();
  auto at = static_cast<size_t>(misfitRowOffsets_[p]);
  const auto end = static_cast<size_t>(misfitRowOffsets_[p + 1]);
  for (; at + 3 < end; at += 4) {
    for (size_t lane = 0; lane < 4; ++lane) {
      partial[lane] += misfitValues_[at + lane] * u[static_cast<size_t>(misfitColumns_[at + lane])];
    }
  }
  for (size_t lane = 0; at < end; ++at, ++lane) {
    partial[lane] += misfitValues_[at] * u[static_cast<size_t>(misfitColumns_[at])];
  }
  return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

EnergyParts MlsSolidModel::energy(std::span<const double> x, ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::energy(x);
  return addGradient(x, {}, workspace);
}

EnergyParts MlsSolidModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                       ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::addGradient(x, gradient);
  auto& w = dynamic_cast<MlsWorkspace&>(*workspace);
  const auto count = static_cast<size_t>(nodeCount_);
  const bool wantGradient = !gradient.empty();
  w.energies.resize(count);
  if (wantGradient) w.stress.resize(3 * count);
  const bool misfit = !misfitValues_.empty();
  w.paddedDisplacement.resize(count);
  for (size_t p = 0; p < count; ++p) w.paddedDisplacement[p] << displacement(x, p), 0.0;
  const Eigen::Vector4d* u = w.paddedDisplacement.data();
  // Each phyxel's elastic energy and stress v_p P_p.
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, kPhyxelGrain), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t p = r.begin(); p != r.end(); ++p) {
          w.energies[p] = phyxelEnergy(p, u, wantGradient ? &w.stress[3 * p] : nullptr);
        }
      });
  // Each phyxel's gradient: sum over the stencils i holding it in slot m of v_i P_i d_im (in
  // the incidence's order), and its row of the misfit penalties with its share of their
  // energy.
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, kPhyxelGrain), [&](const tbb::blocked_range<size_t>& r) {
        const Eigen::Vector4d* stress = w.stress.data();
        for (size_t p = r.begin(); p != r.end(); ++p) {
          Eigen::Vector4d force = Eigen::Vector4d::Zero();
          if (misfit) {
            force = misfitForce(p, u);
            w.energies[p] += 0.5 * u[p].dot(force);
          }
          if (!wantGradient) continue;
          // sum_k (v P)_k d_k column by column: six independent sums (three columns, even and
          // odd terms) keep the multiply-adds from waiting on each other.
          std::array<Eigen::Vector4d, 6> sums;
          for (auto& sum : sums) sum.setZero();
          auto k = static_cast<size_t>(incidence_.offsets[p]);
          const auto end = static_cast<size_t>(incidence_.offsets[p + 1]);
          const auto accumulate = [&](size_t at, size_t half) {
            const Eigen::Vector4d* vP = stress + 3 * static_cast<size_t>(incidenceStencil_[at]);
            const double* d = &incidenceShape_[3 * at];
            sums[half] += vP[0] * d[0];
            sums[half + 2] += vP[1] * d[1];
            sums[half + 4] += vP[2] * d[2];
          };
          for (; k + 1 < end; k += 2) {
            accumulate(k, 0);
            accumulate(k + 1, 1);
          }
          if (k < end) accumulate(k, 0);
          force += ((sums[0] + sums[1]) + (sums[2] + sums[3])) + (sums[4] + sums[5]);
          for (int c = 0; c < 3; ++c) gradient[3 * p + static_cast<size_t>(c)] += force(c);
        }
      });
  EnergyParts parts;
  parts.stretching = deterministicSum(w.energies);
  return parts;
}

std::vector<int32_t> MlsSolidModel::hessianBlockNodes() const {
  std::vector<int32_t> pairs;
  pairs.reserve(2 * static_cast<size_t>(squareOffsets_.back()));
  for (size_t p = 0; p < static_cast<size_t>(nodeCount_); ++p) {
    appendNodePairs(stencil(static_cast<int32_t>(p)), pairs);
  }
  return pairs;
}

bool MlsSolidModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  const auto count = static_cast<size_t>(nodeCount_);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 16), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t p = r.begin(); p != r.end(); ++p) {
          const auto begin = static_cast<size_t>(stencilOffsets_[p]);
          const auto n = static_cast<size_t>(stencilOffsets_[p + 1]) - begin;
          const mls::Mat3 F = deformationGradient(p, x);
          mls::Tangent C;
          mls::Mat3 P, plastic;
          Eigen::Vector3d normal;
          mls::strainEnergyDensity(F, elasticity_, plasticAt(p, plastic), &P, &C, volumeScale(p),
                                   sheetNormalAt(p, normal));
          C *= volume_[p];
          if (projectHessian_) {
            const Eigen::SelfAdjointEigenSolver<mls::Tangent> eigen(0.5 * (C + C.transpose()));
            C = eigen.eigenvectors() * eigen.eigenvalues().cwiseMax(0.0).asDiagonal() *
                eigen.eigenvectors().transpose();
          }
          // G_l = C B_l, (9, 3): column e is sum_d C(:, 3 e + d) d_l[d].
          std::vector<Eigen::Matrix<double, 9, 3>> G(n);
          for (size_t l = 0; l < n; ++l) {
            const Vec3 dl = row(shape_, begin + l);
            for (int e = 0; e < 3; ++e) {
              G[l].col(e) =
                  C.col(3 * e) * dl.x() + C.col(3 * e + 1) * dl.y() + C.col(3 * e + 2) * dl.z();
            }
          }
          const double* Q = &misfit_[static_cast<size_t>(squareOffsets_[p])];
          double* out = &values[9 * static_cast<size_t>(squareOffsets_[p])];
          for (size_t kk = 0; kk < n; ++kk) {
            const Vec3 dk = row(shape_, begin + kk);
            for (size_t l = 0; l < n; ++l) {
              // H_kl[a][e] = sum_c d_k[c] G_l(3 a + c, e) + Q_kl delta_ae.
              const double q = Q[kk + l * n];  // Q is symmetric; column-major map above
              for (int a = 0; a < 3; ++a) {
                for (int e = 0; e < 3; ++e) {
                  out[3 * a + e] = dk.x() * G[l](3 * a, e) + dk.y() * G[l](3 * a + 1, e) +
                                   dk.z() * G[l](3 * a + 2, e) + (a == e ? q : 0.0);
                }
              }
              out += 9;
            }
          }
        }
      });
  return true;
}

std::vector<double> MlsSolidModel::deformationGradients(std::span<const double> x) const {
  const auto count = static_cast<size_t>(nodeCount_);
  std::vector<double> out(9 * count);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 256), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t p = r.begin(); p != r.end(); ++p) {
          const mls::Mat3 F = deformationGradient(p, x);
          for (int a = 0; a < 3; ++a) {
            for (int c = 0; c < 3; ++c)
              out[9 * p + 3 * static_cast<size_t>(a) + static_cast<size_t>(c)] = F(a, c);
          }
        }
      });
  return out;
}

void MlsSolidModel::bindSurface(const Geometry& surface) {
  restSurface_ = Geometry{};
  bindOffsets_.clear();
  bindPhyxels_.clear();
  bindWeights_.clear();
  if (surface.vertexCount() == 0) return;  // the frames show the phyxels
  restSurface_.positions = surface.positions;
  restSurface_.triangles = surface.triangles;
  if (surface.isPointCloud()) restSurface_.normals = surface.normals;
  const PointKdTree tree(rest_);
  const double widest = *std::max_element(support_.begin(), support_.end());
  const auto vertices = static_cast<size_t>(surface.vertexCount());
  bindOffsets_.assign(vertices + 1, 0);
  std::vector<uint32_t> found;
  std::vector<double> squared;
  for (size_t v = 0; v < vertices; ++v) {
    const Vec3 xs = row(surface.positions, v);
    tree.withinRadius(&surface.positions[3 * v], widest, found);
    const size_t start = bindPhyxels_.size();
    double sum = 0;
    for (const uint32_t p : found) {
      const double h = support_[p];
      // muller2004 eq. (27) weights, bound at rest (notes B7: rebinding as phyxels move
      // makes the surface pop).
      const double w = mls::poly6Shape((row(rest_, p) - xs).squaredNorm(), h * h);
      if (w <= 0) continue;
      bindPhyxels_.push_back(static_cast<int32_t>(p));
      bindWeights_.push_back(w);
      sum += w;
    }
    if (bindPhyxels_.size() == start) {
      tree.nearest(&surface.positions[3 * v], 1, found, squared);
      bindPhyxels_.push_back(static_cast<int32_t>(found[0]));
      bindWeights_.push_back(1.0);
      sum = 1.0;
    }
    for (size_t b = start; b < bindWeights_.size(); ++b) bindWeights_[b] /= sum;
    bindOffsets_[v + 1] = static_cast<int32_t>(bindPhyxels_.size());
  }
}

void MlsSolidModel::carrySurface(std::span<const double> x, std::vector<double>& positions,
                                 std::vector<double>* normals) const {
  const std::vector<double> F = deformationGradients(x);
  // muller2004 eq. (27), x_s = sum_i w_i (x_i + F_i (X_s - X_i)), regrouped as
  // sum_i w_i a_i + (sum_i w_i F_i) X_s with a_i = x_i - F_i X_i per phyxel: a binding costs
  // 12 multiply-adds instead of 24, and the blended F is the normals' anyway.
  const auto count = static_cast<size_t>(nodeCount_);
  std::vector<double> offset(3 * count);  // a_i, (nPhyxels, 3), m
  for (size_t p = 0; p < count; ++p) {
    const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> Fp(&F[9 * p]);
    setRow(offset, p, row(x, p) - Fp * row(rest_, p));
  }
  const auto vertices = static_cast<size_t>(restSurface_.vertexCount());
  positions.resize(3 * vertices);
  if (normals != nullptr) normals->resize(3 * vertices);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, vertices, 256), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t v = r.begin(); v != r.end(); ++v) {
          Vec3 sum = Vec3::Zero();
          Eigen::Matrix<double, 3, 3, Eigen::RowMajor> blended =
              Eigen::Matrix<double, 3, 3, Eigen::RowMajor>::Zero();
          for (auto b = static_cast<size_t>(bindOffsets_[v]);
               b < static_cast<size_t>(bindOffsets_[v + 1]); ++b) {
            const auto p = static_cast<size_t>(bindPhyxels_[b]);
            const double w = bindWeights_[b];
            sum += w * row(offset, p);
            blended +=
                w * Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(&F[9 * p]);
          }
          setRow(positions, v, sum + blended * row(restSurface_.positions, v));
          if (normals != nullptr) {
            // A surfel's tangent axes t map to blended F t (section 5.1), so its normal
            // t1' x t2' is along cof(F) n = det(F) F^-T n.
            const Vec3 n = mls::cofactor(blended) * row(restSurface_.normals, v);
            const double length = n.norm();
            setRow(*normals, v, length > 0 ? Vec3(n / length) : row(restSurface_.normals, v));
          }
        }
      });
}

Geometry MlsSolidModel::surface(std::span<const double> x) const {
  Geometry g;
  if (restSurface_.vertexCount() == 0) {
    g.positions.assign(x.begin(), x.end());
    return g;
  }
  const bool surfels = restSurface_.hasNormals();  // a point cloud with normals
  carrySurface(x, g.positions, surfels ? &g.normals : nullptr);
  g.triangles = restSurface_.triangles;
  if (!surfels && !g.triangles.empty()) computeVertexNormals(g);
  return g;
}

}  // namespace shellsim
