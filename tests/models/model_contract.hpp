// The energy contract tests every model must pass (DESIGN.md principle 1):
// finite-difference gradient and Hessian, zero force at rest, invariance under rigid
// motion, zero net force and torque. Each check returns a failure that names the worst
// entry, so a test using it can fail.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <Eigen/SparseCore>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "models/model.hpp"

namespace shellsim::testing {

inline std::vector<double> perturbed(std::span<const double> x, double amplitude, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-amplitude, amplitude);
  std::vector<double> y(x.begin(), x.end());
  for (double& v : y) v += uniform(rng);
  return y;
}

inline std::vector<double> gradientAt(const Model& model, std::span<const double> x) {
  std::vector<double> g(x.size(), 0.0);
  model.addGradient(x, g);
  return g;
}

// Central differences of the energy along random directions d:
// (E(x + h d) - E(x - h d)) / 2h must equal g . d to the relative tolerance.
inline ::testing::AssertionResult gradientMatchesFiniteDifferences(const Model& model,
                                                                   std::span<const double> x,
                                                                   double step, double tolerance,
                                                                   int directions = 8) {
  const std::vector<double> g = gradientAt(model, x);
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  for (int k = 0; k < directions; ++k) {
    std::vector<double> d(x.size());
    for (double& v : d) v = normal(rng);
    std::vector<double> plus(x.begin(), x.end()), minus(x.begin(), x.end());
    double analytic = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      plus[i] += step * d[i];
      minus[i] -= step * d[i];
      analytic += g[i] * d[i];
    }
    const double numeric = (model.energy(plus).total() - model.energy(minus).total()) / (2 * step);
    const double scale = std::max({std::abs(analytic), std::abs(numeric), 1e-12});
    if (std::abs(analytic - numeric) > tolerance * scale) {
      return ::testing::AssertionFailure() << "direction " << k << ": analytic " << analytic
                                           << " vs finite difference " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

// Columns of the Hessian against central differences of the gradient.
inline ::testing::AssertionResult hessianMatchesFiniteDifferences(const Model& model,
                                                                  std::span<const double> x,
                                                                  double step, double tolerance,
                                                                  int columns = 12) {
  std::vector<Eigen::Triplet<double>> triplets;
  if (!model.addHessian(x, triplets)) return ::testing::AssertionSuccess();
  const Eigen::Index n = static_cast<Eigen::Index>(x.size());
  Eigen::SparseMatrix<double> h(n, n);
  h.setFromTriplets(triplets.begin(), triplets.end());
  std::mt19937 rng(11);
  std::uniform_int_distribution<Eigen::Index> pick(0, n - 1);
  double maxEntry = 0;
  for (int k = 0; k < h.outerSize(); ++k) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(h, k); it; ++it) {
      maxEntry = std::max(maxEntry, std::abs(it.value()));
    }
  }
  for (int c = 0; c < columns; ++c) {
    const Eigen::Index col = pick(rng);
    std::vector<double> plus(x.begin(), x.end()), minus(x.begin(), x.end());
    plus[static_cast<size_t>(col)] += step;
    minus[static_cast<size_t>(col)] -= step;
    const std::vector<double> gp = gradientAt(model, plus);
    const std::vector<double> gm = gradientAt(model, minus);
    const Eigen::VectorXd column = h.col(col);
    for (Eigen::Index r = 0; r < n; ++r) {
      const double numeric = (gp[static_cast<size_t>(r)] - gm[static_cast<size_t>(r)]) / (2 * step);
      if (std::abs(numeric - column[r]) > tolerance * std::max(maxEntry, 1e-12)) {
        return ::testing::AssertionFailure() << "H(" << r << ", " << col << ") = " << column[r]
                                             << " vs finite difference " << numeric;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Sum of forces and of torques about the origin; both vanish for internal forces.
inline ::testing::AssertionResult zeroNetForceAndTorque(const Model& model,
                                                        std::span<const double> x,
                                                        double tolerance) {
  const std::vector<double> g = gradientAt(model, x);
  Eigen::Vector3d force = Eigen::Vector3d::Zero(), torque = Eigen::Vector3d::Zero();
  double scale = 0;
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const Eigen::Vector3d gi(g[3 * i], g[3 * i + 1], g[3 * i + 2]);
    const Eigen::Vector3d xi(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
    force += gi;
    torque += xi.cross(gi);
    scale += gi.norm() * std::max(1.0, xi.norm());
  }
  if (force.norm() > tolerance * scale || torque.norm() > tolerance * scale) {
    return ::testing::AssertionFailure() << "net force " << force.transpose() << ", net torque "
                                         << torque.transpose() << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// Energy unchanged by a rotation R and translation t applied to every node. The model is
// prepared for each configuration, as the stepper does before evaluating it.
inline ::testing::AssertionResult rigidMotionInvariant(Model& model, std::span<const double> x,
                                                       double tolerance) {
  const Eigen::Matrix3d r =
      (Eigen::AngleAxisd(0.7, Eigen::Vector3d(1, 2, 3).normalized())).toRotationMatrix();
  const Eigen::Vector3d t(0.3, -1.2, 2.5);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size() / 3; ++i) {
    const Eigen::Vector3d p = r * Eigen::Vector3d(x[3 * i], x[3 * i + 1], x[3 * i + 2]) + t;
    for (int c = 0; c < 3; ++c) y[3 * i + c] = p[c];
  }
  model.prepare(x);
  const double e0 = model.energy(x).total();
  model.prepare(y);
  const double e1 = model.energy(y).total();
  if (std::abs(e0 - e1) > tolerance * std::max(std::abs(e0), 1e-12)) {
    return ::testing::AssertionFailure() << "energy " << e0 << " before, " << e1 << " after";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace shellsim::testing
