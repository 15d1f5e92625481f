#include "core/surfel_radii.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "core/spatial.hpp"

namespace shellsim {

std::vector<uint32_t> nearestNeighbours(std::span<const double> positions, int k) {
  const size_t n = positions.size() / 3;
  const auto width = static_cast<size_t>(k);
  std::vector<uint32_t> result(n * width, 0);
  if (n < 2) return result;
  const PointKdTree tree(positions);
  const size_t want = std::min(width + 1, n);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1024), [&](const auto& range) {
    std::vector<uint32_t> idx(want);
    std::vector<double> d2(want);
    for (size_t i = range.begin(); i < range.end(); ++i) {
      const size_t found = tree.nearest(&positions[3 * i], want, idx.data(), d2.data());
      size_t out = 0;
      for (size_t j = 0; j < found && out < width; ++j) {
        if (idx[j] != i) result[i * width + out++] = idx[j];
      }
      for (; out < width; ++out) result[i * width + out] = result[i * width + out - 1];
    }
  });
  return result;
}

void radiiFromNeighbours(std::span<const double> positions, std::span<const uint32_t> nbrs, int k,
                         std::vector<float>& radii) {
  const size_t n = positions.size() / 3;
  const auto width = static_cast<size_t>(k);
  radii.assign(n, 0.0f);
  if (n < 2) {
    if (n == 1) radii[0] = 0.01f;
    return;
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4096), [&](const auto& range) {
    for (size_t i = range.begin(); i < range.end(); ++i) {
      double sum = 0;
      for (size_t j = 0; j < width; ++j) {
        const size_t o = nbrs[i * width + j];
        const double dx = positions[3 * o] - positions[3 * i];
        const double dy = positions[3 * o + 1] - positions[3 * i + 1];
        const double dz = positions[3 * o + 2] - positions[3 * i + 2];
        sum += std::sqrt(dx * dx + dy * dy + dz * dz);
      }
      radii[i] = static_cast<float>(kSurfelRadiusFactor * sum / k);
    }
  });
}

std::vector<float> surfelRadii(std::span<const double> positions) {
  std::vector<float> radii;
  radiiFromNeighbours(positions, nearestNeighbours(positions, kSurfelNeighbours), kSurfelNeighbours,
                      radii);
  return radii;
}

}  // namespace shellsim
