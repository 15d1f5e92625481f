// Decisions that rounding must not make (private to the library).
//
// Builds with and without -march=native round differently (fused multiply-adds, vector
// widths), and symmetric inputs (a primitive sphere, a grid sheet) are full of exact ties:
// which of two equal clusters splits first, which way a square cluster is cut, which of two
// equidistant nodes is a fiber's neighbour. Decided on the rounded values, such ties go either
// way, and a scene started from different nodes or fibers in each build (fiber_balloon's 1,170
// nodes differed in all but 51 between the native and the portable build). Discrete choices
// that pick between points therefore compare values on a grid kTieTolerance times their scale,
// where values equal but for rounding share a cell, and break ties by index. A value near a
// cell's edge can still go either way: a rounding error of 1e-16 of the scale lands there once
// in about 1e10 ties.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace shellsim {

inline constexpr double kTieTolerance = 1e-6;

// `value` on the grid of cells kTieTolerance * scale wide; 0 for every value when the scale
// is not positive (all tie), and for a NaN.
inline int64_t tieKey(double value, double scale) {
  if (!(scale > 0) || std::isnan(value)) return 0;
  constexpr double kLargest = 9.0e18;  // within int64_t
  return std::llround(std::clamp(value / (kTieTolerance * scale), -kLargest, kLargest));
}

}  // namespace shellsim
