#include "models/mls/mls_surface.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/LU>
#include <algorithm>
#include <cmath>
#include <numbers>

namespace shellsim::mls {
namespace {

// A uniform number in [0, 1) from (seed, index): splitmix64.
double hashUnit(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + index + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// Two unit vectors spanning the plane normal to n.
void tangentFrame(const Vec3& n, Vec3& t1, Vec3& t2) {
  t1 = n.unitOrthogonal();
  t2 = n.cross(t1);
}

}  // namespace

ImplicitField::ImplicitField(std::span<const double> phyxels, double sigma)
    : phyxels_(phyxels), tree_(phyxels), sigma_(sigma) {}

double ImplicitField::value(const Vec3& x, Vec3* gradient) const {
  std::vector<uint32_t> near;
  tree_.withinRadius(x.data(), kFieldReach * sigma_, near);
  return valueOver(near, x, gradient);
}

double ImplicitField::valueOver(std::span<const uint32_t> candidates, const Vec3& x,
                                Vec3* gradient) const {
  const double inverse2 = 1.0 / (sigma_ * sigma_);
  const double reach2 = kFieldReach * kFieldReach * sigma_ * sigma_;
  double sum = 0;
  Vec3 g = Vec3::Zero();
  for (const uint32_t i : candidates) {
    const Vec3 d = x - row(phyxels_, i);
    const double r2 = d.squaredNorm();
    if (r2 > reach2) continue;
    const double f = std::exp(-r2 * inverse2);  // muller2004 eq. (28)
    sum += f;
    g -= 2.0 * inverse2 * f * d;
  }
  if (gradient != nullptr) *gradient = g;
  return sum;
}

bool ImplicitField::project(Vec3& x, double iso, Vec3& normal) const {
  // The phyxels within reach of every point within sigma of `centre`: the Newton steps
  // evaluate F over them (the same F as value()) until they leave that ball.
  std::vector<uint32_t> near;
  Vec3 centre = x;
  tree_.withinRadius(centre.data(), (kFieldReach + 1) * sigma_, near);
  Vec3 y = x, g;
  for (int iteration = 0; iteration < 12; ++iteration) {
    if ((y - centre).squaredNorm() > sigma_ * sigma_) {
      centre = y;
      tree_.withinRadius(centre.data(), (kFieldReach + 1) * sigma_, near);
    }
    const double f = valueOver(near, y, &g);
    const double g2 = g.squaredNorm();
    if (!(f > 1e-3 * iso) || !(g2 > 0)) return false;
    if (std::abs(f - iso) < 1e-4 * iso) {
      x = y;
      normal = -g / std::sqrt(g2);
      return true;
    }
    Vec3 step = -(f - iso) / g2 * g;
    const double length = step.norm();
    if (length > 0.5 * sigma_) step *= 0.5 * sigma_ / length;
    y += step;
  }
  return false;
}

std::vector<double> boundaryProbabilities(std::span<const double> positions,
                                          std::span<const double> radii) {
  const size_t count = radii.size();
  std::vector<double> probability(count, 1.0);
  const PointKdTree tree(positions);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 256), [&](const tbb::blocked_range<size_t>& r) {
        std::vector<uint32_t> near;
        for (size_t p = r.begin(); p != r.end(); ++p) {
          tree.withinRadius(&positions[3 * p], radii[p], near);
          if (near.size() < 4) continue;
          Vec3 mean = Vec3::Zero();
          for (const uint32_t q : near) mean += row(positions, q);
          mean /= static_cast<double>(near.size());
          Eigen::Matrix3d C = Eigen::Matrix3d::Zero();
          for (const uint32_t q : near) {
            const Vec3 d = row(positions, q) - mean;
            C += d * d.transpose();
          }
          const double third = C.trace() / 3.0;
          if (!(third > 0)) continue;
          // muller2004 eq. (29): det over the cube of the mean eigenvalue.
          probability[p] = std::clamp(1.0 - C.determinant() / (third * third * third), 0.0, 1.0);
        }
      });
  return probability;
}

void updateSurfels(Surfels& surfels, const ImplicitField& field,
                   std::span<const double> boundaryNow, std::span<const double> boundaryBefore,
                   std::span<const int32_t> bindOffsets, std::span<const int32_t> bindPhyxels,
                   const SurfelUpdate& update) {
  const size_t count = surfels.size();
  const double S = update.iso;
  // 1. Blending onto L_I (eq. 30).
  std::vector<char> keep(count, 1);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, 256), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t s = r.begin(); s != r.end(); ++s) {
          const auto begin = static_cast<size_t>(bindOffsets[s]);
          const auto end = static_cast<size_t>(bindOffsets[s + 1]);
          double now = 0, before = 0;
          for (size_t b = begin; b < end; ++b) {
            now += boundaryNow[static_cast<size_t>(bindPhyxels[b])];
            before += boundaryBefore[static_cast<size_t>(bindPhyxels[b])];
          }
          const double n = std::max<double>(1.0, static_cast<double>(end - begin));
          double& blended = surfels.blended[s];
          const double mean = std::abs(now - before) / n;
          // Slow changes are deformation, not topology (and rounding, as a rigid turn gives,
          // is neither).
          if (mean > 1e-9 && mean > kBoundaryRate * update.interval) {
            blended = std::min(1.0, blended + kBlendWeight * mean);
          }
          if (!(blended > 0)) continue;
          const double previous = surfels.estimate[s];
          const double next = surfels.initial[s] + blended * (S - surfels.initial[s]);
          const double b =
              std::abs(S - previous) > 1e-12 * S ? (next - previous) / (S - previous) : 1.0;
          surfels.estimate[s] = next;
          Vec3 x = row(surfels.positions, s), normal;
          if (!field.project(x, S, normal)) {
            keep[s] = 0;  // nothing to stand on: the gap of a split
            continue;
          }
          const double w = std::clamp(b, 0.0, 1.0);
          setRow(surfels.positions, s, w * x + (1 - w) * row(surfels.positions, s));
          const Vec3 mixed = w * normal + (1 - w) * row(surfels.normals, s);
          setRow(surfels.normals, s, mixed.norm() > 0 ? Vec3(mixed.normalized()) : normal);
        }
      });
  // 2. Resampling (section 5.2.4): neighbour counts on the blended surfels.
  const double radius = kResampleRadius * update.spacing;
  std::vector<int32_t> neighbours(count, 0);
  {
    const PointKdTree tree(surfels.positions);
    tbb::parallel_for(tbb::blocked_range<size_t>(0, count, 256),
                      [&](const tbb::blocked_range<size_t>& r) {
                        std::vector<uint32_t> near;
                        for (size_t s = r.begin(); s != r.end(); ++s) {
                          if (!keep[s]) continue;
                          tree.withinRadius(&surfels.positions[3 * s], radius, near);
                          int32_t k = 0;
                          for (const uint32_t q : near) k += (q != s && keep[q]) ? 1 : 0;
                          neighbours[s] = k;
                        }
                      });
  }
  Surfels next;
  const auto push = [&](const Vec3& x, const Vec3& n, size_t from) {
    for (int a = 0; a < 3; ++a) {
      next.positions.push_back(x[a]);
      next.normals.push_back(n[a]);
    }
    next.initial.push_back(surfels.initial[from]);
    next.estimate.push_back(surfels.estimate[from]);
    next.blended.push_back(surfels.blended[from]);
  };
  for (size_t s = 0; s < count; ++s) {
    if (!keep[s]) continue;
    const int32_t k = neighbours[s];
    if (k > kMaxNeighbours &&
        hashUnit(update.seed, s) < static_cast<double>(k) / (2.0 * kMaxNeighbours)) {
      continue;
    }
    const Vec3 x = row(surfels.positions, s), n = row(surfels.normals, s);
    push(x, n, s);
    if (k >= kMinNeighbours || next.size() >= update.maxSurfels) continue;
    // Split into the tangent plane, evenly around from a hashed angle.
    Vec3 t1, t2;
    tangentFrame(n, t1, t2);
    const int splits = kMinNeighbours - k;
    const double start = 2 * std::numbers::pi * hashUnit(update.seed + 1, s);
    for (int j = 0; j < splits; ++j) {
      const double angle = start + 2 * std::numbers::pi * j / splits;
      Vec3 y = x + 0.5 * radius * (std::cos(angle) * t1 + std::sin(angle) * t2);
      Vec3 normal = n;
      if (surfels.blended[s] > 0 && !field.project(y, S, normal)) continue;
      push(y, normal, s);
    }
  }
  surfels = std::move(next);
  // 3. Repulsion in the tangent planes of the surfels on L_I (Jacobi sweeps: every surfel
  // moves from the same snapshot), back onto L_I.
  for (int sweep = 0; sweep < kRepulsionSweeps; ++sweep) {
    const std::vector<double> snapshot = surfels.positions;
    const PointKdTree tree(snapshot);
    tbb::parallel_for(tbb::blocked_range<size_t>(0, surfels.size(), 256),
                      [&](const tbb::blocked_range<size_t>& r) {
                        std::vector<uint32_t> near;
                        for (size_t s = r.begin(); s != r.end(); ++s) {
                          // Only surfels on L_I: the detail stays where eq. 27 carries it.
                          if (!(surfels.blended[s] > 0)) continue;
                          const Vec3 x = row(snapshot, s);
                          tree.withinRadius(&snapshot[3 * s], radius, near);
                          Vec3 repel = Vec3::Zero();
                          for (const uint32_t q : near) {
                            if (q == s) continue;
                            const Vec3 d = x - row(snapshot, q);
                            const double length = d.norm();
                            if (!(length > 0)) continue;
                            repel += (1.0 - length / radius) * d / length;
                          }
                          const Vec3 n = row(surfels.normals, s);
                          repel -= repel.dot(n) * n;
                          const double size = repel.norm();
                          if (!(size > 0)) continue;
                          Vec3 y = x + std::min(0.25 * radius * size, 0.25 * radius) * repel / size;
                          Vec3 normal = n;
                          if (!field.project(y, S, normal)) continue;
                          setRow(surfels.positions, s, y);
                          setRow(surfels.normals, s, normal);
                        }
                      });
  }
}

}  // namespace shellsim::mls
