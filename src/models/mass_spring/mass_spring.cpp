#include "models/mass_spring/mass_spring.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "shellsim/errors.hpp"

namespace shellsim {

double springEnergyGradient(double stiffness, double restLength, const Vec3 x[2], Vec3 gradient[2],
                            Eigen::Matrix<double, 6, 6>* hessian) {
  const Vec3 d = x[1] - x[0];
  const double length = d.norm();
  const double stretch = length - restLength;
  if (length == 0.0) {
    gradient[0].setZero();
    gradient[1].setZero();
    if (hessian != nullptr) hessian->setZero();
    return 0.5 * stiffness * stretch * stretch;
  }
  const Vec3 u = d / length;
  gradient[1] = stiffness * stretch * u;
  gradient[0] = -gradient[1];
  if (hessian != nullptr) {
    const Eigen::Matrix3d uu = u * u.transpose();
    const Eigen::Matrix3d h =
        stiffness * (uu + (1.0 - restLength / length) * (Eigen::Matrix3d::Identity() - uu));
    hessian->topLeftCorner<3, 3>() = h;
    hessian->bottomRightCorner<3, 3>() = h;
    hessian->topRightCorner<3, 3>() = -h;
    hessian->bottomLeftCorner<3, 3>() = -h;
  }
  return 0.5 * stiffness * stretch * stretch;
}

namespace {

Vec3 vertex(std::span<const double> positions, int32_t i) {
  const size_t o = 3 * static_cast<size_t>(i);
  return {positions[o], positions[o + 1], positions[o + 2]};
}

}  // namespace

MassSpringModel::MassSpringModel(const Geometry& mesh, const MaterialDef& material,
                                 MassSpringSetup* setup) {
  if (mesh.isPointCloud()) {
    throw InputError("model mass_spring needs a triangle mesh, but the geometry is a point cloud");
  }
  nodeCount_ = mesh.vertexCount();
  triangles_ = mesh.triangles;
  restPositions_ = mesh.positions;
  mass_.assign(static_cast<size_t>(nodeCount_), 0.0);

  // Unique edges with the summed area of their incident triangles.
  std::unordered_map<uint64_t, size_t> edgeIndex;
  std::vector<double> edgeArea;
  edgeIndex.reserve(mesh.triangles.size());
  const double arealDensity = material.density * material.thickness;  // kg/m^2
  for (int32_t t = 0; t < mesh.triangleCount(); ++t) {
    const int32_t* tri = &mesh.triangles[3 * static_cast<size_t>(t)];
    for (int c = 0; c < 3; ++c) {
      if (tri[c] < 0 || tri[c] >= nodeCount_) {
        std::ostringstream msg;
        msg << "triangle " << t << ": vertex index " << tri[c] << " out of range [0, " << nodeCount_
            << ")";
        throw InputError(msg.str());
      }
    }
    const Vec3 a = vertex(mesh.positions, tri[0]);
    const Vec3 b = vertex(mesh.positions, tri[1]);
    const Vec3 c = vertex(mesh.positions, tri[2]);
    const double area = 0.5 * (b - a).cross(c - a).norm();
    for (int k = 0; k < 3; ++k) {
      mass_[static_cast<size_t>(tri[k])] += arealDensity * area / 3.0;
      int32_t i = tri[k];
      int32_t j = tri[(k + 1) % 3];
      if (i == j) continue;
      if (i > j) std::swap(i, j);
      const uint64_t key = (static_cast<uint64_t>(i) << 32) | static_cast<uint32_t>(j);
      auto [it, inserted] = edgeIndex.try_emplace(key, edgeArea.size());
      if (inserted) {
        springNodes_.push_back(i);
        springNodes_.push_back(j);
        edgeArea.push_back(0.0);
      }
      edgeArea[it->second] += area;
    }
  }

  const size_t springCount = edgeArea.size();
  restLength_.resize(springCount);
  stiffness_.resize(springCount);
  for (size_t s = 0; s < springCount; ++s) {
    const Vec3 d = vertex(mesh.positions, springNodes_[2 * s + 1]) -
                   vertex(mesh.positions, springNodes_[2 * s]);
    const double length = d.norm();
    if (!(length > 0.0)) {
      std::ostringstream msg;
      msg << "edge between vertices " << springNodes_[2 * s] << " and " << springNodes_[2 * s + 1]
          << ": zero length (coincident vertices)";
      throw InputError(msg.str());
    }
    restLength_[s] = length;
    // Van Gelder 1998: k_e = E h sum A_T / |e|^2.
    stiffness_[s] = material.stiffness ? *material.stiffness
                                       : material.youngModulus * material.thickness * edgeArea[s] /
                                             (length * length);
  }
  for (int32_t i = 0; i < nodeCount_; ++i) {
    if (!(mass_[static_cast<size_t>(i)] > 0.0)) {
      std::ostringstream msg;
      msg << "vertex " << i
          << ": has no mass (it belongs to no triangle of non-zero area); mass_spring needs "
             "every vertex in a proper triangle";
      throw InputError(msg.str());
    }
  }

  incidence_ = buildIncidence(springNodes_, nodeCount_);

  if (setup != nullptr && !material.stiffness && std::abs(material.poisson - 1.0 / 3.0) > 0.05) {
    std::ostringstream msg;
    msg << "mass_spring: a spring network has Poisson ratio 1/3; material.poisson = "
        << material.poisson << " is not represented";
    setup->warnings.push_back(msg.str());
  }
}

namespace {

// The assembler's per-element buffers.
struct MassSpringWorkspace : ModelWorkspace {
  AssemblyScratch assembly;
};

}  // namespace

std::unique_ptr<ModelWorkspace> MassSpringModel::makeWorkspace() const {
  return std::make_unique<MassSpringWorkspace>();
}

EnergyParts MassSpringModel::energy(std::span<const double> x, ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::energy(x);
  return addGradient(x, {}, workspace);
}

EnergyParts MassSpringModel::addGradient(std::span<const double> x, std::span<double> gradient,
                                         ModelWorkspace* workspace) const {
  if (workspace == nullptr) return Model::addGradient(x, gradient);
  EnergyParts parts;
  parts.stretching =
      assembleEnergyGradient<2>(springNodes_, incidence_, x, gradient,
                                dynamic_cast<MassSpringWorkspace&>(*workspace).assembly,
                                [this](size_t s, const Vec3(&xs)[2], Vec3(&g)[2]) {
                                  return springEnergyGradient(stiffness_[s], restLength_[s], xs, g);
                                });
  return parts;
}

std::vector<int32_t> MassSpringModel::hessianBlockNodes() const {
  std::vector<int32_t> pairs;
  stencilBlockNodes<2>(springNodes_, pairs);
  return pairs;
}

bool MassSpringModel::hessianBlocks(std::span<const double> x, std::span<double> values) const {
  stencilHessianBlocks<2>(
      springNodes_, x, values,
      [this](size_t s, const Vec3(&xs)[2], Vec3(&g)[2], Eigen::Matrix<double, 6, 6>& h) {
        springEnergyGradient(stiffness_[s], restLength_[s], xs, g, &h);
      });
  return true;
}

double MassSpringModel::stableTimeStep() const {
  // Velocity Verlet is stable for dt < 2 / omega_max. Gershgorin's bound on the largest
  // eigenvalue of M^-1 K at rest (each spring's block is k u u^T, row sum <= 2k) gives
  // omega_max^2 <= max_i 2 sum_{s contains i} k_s / m_i.
  double omegaSquared = 0.0;
  for (int32_t n = 0; n < nodeCount_; ++n) {
    double rowSum = 0.0;
    for (int32_t i = incidence_.offsets[static_cast<size_t>(n)];
         i < incidence_.offsets[static_cast<size_t>(n) + 1]; ++i) {
      rowSum +=
          2.0 * stiffness_[static_cast<size_t>(incidence_.entries[static_cast<size_t>(i)] / 2)];
    }
    omegaSquared = std::max(omegaSquared, rowSum / mass_[static_cast<size_t>(n)]);
  }
  if (omegaSquared <= 0.0) return std::numeric_limits<double>::infinity();
  return 2.0 / std::sqrt(omegaSquared);
}

Geometry MassSpringModel::surface(std::span<const double> x) const {
  Geometry g;
  g.positions.assign(x.begin(), x.end());
  g.triangles = triangles_;
  computeVertexNormals(g);
  return g;
}

}  // namespace shellsim
