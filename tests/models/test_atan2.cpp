// atan2Poly (core/atan2.hpp), the branch-free atan2 of the batched hinge kernel, against
// std::atan2: at most 2 ulp apart over a dense sweep of directions in all four quadrants at
// several magnitudes, random pairs, ratios from 2^-1074 to 2^1023, and the same value for
// signed zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <random>

#include "core/atan2.hpp"

namespace shellsim {
namespace {

// Distance in units in the last place: the number of doubles between a and b.
double ulpDistance(double a, double b) {
  const auto ordered = [](double v) {
    int64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    return bits < 0 ? INT64_MIN - bits : bits;  // monotone in v, -0 and +0 adjacent
  };
  return std::abs(static_cast<double>(ordered(a) - ordered(b)));
}

struct Worst {
  double ulps = 0, y = 0, x = 0;
  void check(double yy, double xx) {
    const double d = ulpDistance(atan2Poly(yy, xx), std::atan2(yy, xx));
    if (d > ulps) *this = {d, yy, xx};
  }
};

constexpr double kMaxUlps = 2;

TEST(Atan2Poly, DenseSweepOfDirectionsAtManyMagnitudes) {
  Worst worst;
  constexpr int kSteps = 100000;
  for (double radius : {1.0, 3.7, 1e-300, 1e300, 1e-310}) {
    for (int i = 0; i < kSteps; ++i) {
      const double angle = -std::numbers::pi + 2 * std::numbers::pi * (i + 0.5) / kSteps;
      worst.check(radius * std::sin(angle), radius * std::cos(angle));
    }
  }
  EXPECT_LE(worst.ulps, kMaxUlps) << "at y = " << worst.y << ", x = " << worst.x;
}

TEST(Atan2Poly, RandomPairs) {
  Worst worst;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> exponent(-60, 60);
  for (int i = 0; i < 1000000; ++i) {
    worst.check(std::ldexp(u(rng), exponent(rng)), std::ldexp(u(rng), exponent(rng)));
  }
  EXPECT_LE(worst.ulps, kMaxUlps) << "at y = " << worst.y << ", x = " << worst.x;
}

TEST(Atan2Poly, HugeAndTinyRatiosInEveryQuadrant) {
  Worst worst;
  for (int e = -1074; e <= 1023; ++e) {
    const double v = std::ldexp(1.0, e);
    for (double w : {1.0, 1.5, 1e-300, 1e300}) {
      for (double sy : {1.0, -1.0}) {
        for (double sx : {1.0, -1.0}) {
          worst.check(sy * v, sx * w);
          worst.check(sy * w, sx * v);
        }
      }
    }
  }
  EXPECT_LE(worst.ulps, kMaxUlps) << "at y = " << worst.y << ", x = " << worst.x;
}

TEST(Atan2Poly, SignedZerosAndAxesAreExact) {
  // +-0, +-pi/2, +-pi exactly as std::atan2, sign of zero included.
  for (double y : {0.0, -0.0, 1.0, -1.0, 1e-320, -1e300}) {
    for (double x : {0.0, -0.0, 2.0, -2.0, 1e-320, -1e300}) {
      if (y != 0 && x != 0) continue;
      const double ours = atan2Poly(y, x);
      const double exact = std::atan2(y, x);
      EXPECT_EQ(std::memcmp(&ours, &exact, sizeof ours), 0)
          << "atan2(" << y << ", " << x << ") = " << ours << ", std: " << exact;
    }
  }
}

}  // namespace
}  // namespace shellsim
