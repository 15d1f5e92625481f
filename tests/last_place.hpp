// Moving values by a few units in the last place: what another build's rounding (fused
// multiply-adds, other vector widths) does to a computed coordinate. For the tests that
// check a discrete choice does not hang on rounding (core/tie_grid.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace shellsim::testing {

// Moves each value by a whole number of units in the last place in [-units, units], drawn
// from a small linear congruential sequence started at `seed` (the same on every platform,
// unlike std::rand).
inline void moveByUnitsInTheLastPlace(std::span<double> values, int units, uint64_t seed) {
  uint64_t state = seed;
  for (double& x : values) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const int steps =
        static_cast<int>((state >> 33) % static_cast<uint64_t>(2 * units + 1)) - units;
    for (int k = 0; k < std::abs(steps); ++k) x = std::nextafter(x, steps > 0 ? 1.0 : -1.0);
  }
}

}  // namespace shellsim::testing
