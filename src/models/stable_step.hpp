// The stable explicit step of a model from its Hessian at rest, for models whose stencils
// are too irregular for a closed-form bound (mls_solid, thick_shell).
//
// Velocity Verlet is stable for dt < 2 / omega_max, omega_max^2 the largest eigenvalue of
// M^-1 K at rest. Gershgorin's bound (row sums of |K| over the masses) is safe but, over
// large or mixed stencils, several times too large; the estimate is Lanczos on
// M^-1/2 K M^-1/2 (40 steps, from below) with the fiber model's margin 0.7, never below
// Gershgorin's step.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "core/lanczos.hpp"
#include "models/model.hpp"

namespace shellsim {

struct StableStep {
  double gershgorin = 0;  // s, 2 / sqrt(Gershgorin's bound): always stable
  double estimate = 0;    // s, the Lanczos estimate, never below gershgorin
};

// rest: (nNodes, 3), m; masses: (nNodes), kg, > 0. Infinity for a model without stiffness.
// lanczos false: Gershgorin's step only (estimate = gershgorin), a fraction of the cost.
inline StableStep stableStepEstimate(const Model& model, std::span<const double> rest,
                                     std::span<const double> masses, bool lanczos = true) {
  const std::vector<int32_t> pairs = model.hessianBlockNodes();
  std::vector<double> blocks(pairs.size() / 2 * 9);
  model.hessianBlocks(rest, blocks);
  const size_t count = masses.size();
  std::vector<double> rowSums(3 * count, 0.0);
  for (size_t b = 0; b < pairs.size() / 2; ++b) {
    const auto node = static_cast<size_t>(pairs[2 * b]);
    for (size_t a = 0; a < 3; ++a) {
      for (size_t c = 0; c < 3; ++c) rowSums[3 * node + a] += std::abs(blocks[9 * b + 3 * a + c]);
    }
  }
  double gershgorin = 0;
  for (size_t i = 0; i < 3 * count; ++i)
    gershgorin = std::max(gershgorin, rowSums[i] / masses[i / 3]);
  const double safe =
      gershgorin > 0 ? 2.0 / std::sqrt(gershgorin) : std::numeric_limits<double>::infinity();
  if (!lanczos) return {safe, safe};
  std::vector<double> invSqrtMass(count);
  for (size_t i = 0; i < count; ++i) invSqrtMass[i] = 1.0 / std::sqrt(masses[i]);
  const double largest =
      largestEigenvalueLanczos(3 * count, 40, [&](std::span<const double> v, std::span<double> w) {
        std::fill(w.begin(), w.end(), 0.0);
        for (size_t b = 0; b < pairs.size() / 2; ++b) {
          const auto r = static_cast<size_t>(pairs[2 * b]);
          const auto c = static_cast<size_t>(pairs[2 * b + 1]);
          const double* h = &blocks[9 * b];
          for (size_t a = 0; a < 3; ++a) {
            w[3 * r + a] +=
                invSqrtMass[r] * invSqrtMass[c] *
                (h[3 * a] * v[3 * c] + h[3 * a + 1] * v[3 * c + 1] + h[3 * a + 2] * v[3 * c + 2]);
          }
        }
      });
  const double estimate =
      largest > 0 ? 0.7 * 2.0 / std::sqrt(largest) : std::numeric_limits<double>::infinity();
  return {safe, std::max(safe, estimate)};
}

inline double stableStepFromHessian(const Model& model, std::span<const double> rest,
                                    std::span<const double> masses) {
  return stableStepEstimate(model, rest, masses).estimate;
}

}  // namespace shellsim
