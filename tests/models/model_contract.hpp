// The energy contract tests every model must pass (DESIGN.md principle 1):
// finite-difference gradient and Hessian, zero force at rest, invariance under rigid
// motion, zero net force and torque. Each check returns a failure that names the worst
// entry, so a test using it can fail.
//
// The checks run on every model from ONE test template, the value-parameterised suite
// ModelContract (test_model_contract.cpp); each model's test file instantiates it with its
// ContractCases (a model on a mesh, with the finite-difference steps and tolerances it
// needs):
//   INSTANTIATE_TEST_SUITE_P(Fiber, ModelContract, ::testing::Values(...), contractCaseName);
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace shellsim::testing {

// Rows of three values per node (positions, velocities) blended by an edit's node sources, as
// the world does (dynamics/world.hpp, applyTopologyEdit); unchanged when the nodes stay.
inline std::vector<double> blended(std::span<const double> rows, const TopologyEdit& edit) {
  if (!edit.changesNodes()) return {rows.begin(), rows.end()};
  std::vector<double> out(3 * static_cast<size_t>(edit.nodeCount()), 0.0);
  for (size_t i = 0; i + 1 < edit.sourceOffsets.size(); ++i) {
    for (auto k = static_cast<size_t>(edit.sourceOffsets[i]);
         k < static_cast<size_t>(edit.sourceOffsets[i + 1]); ++k) {
      for (size_t c = 0; c < 3; ++c) {
        out[3 * i + c] +=
            edit.sourceWeights[k] * rows[3 * static_cast<size_t>(edit.sourceNodes[k]) + c];
      }
    }
  }
  return out;
}

inline std::vector<double> perturbed(std::span<const double> x, double amplitude, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-amplitude, amplitude);
  std::vector<double> y(x.begin(), x.end());
  for (double& v : y) v += uniform(rng);
  return y;
}

// Velocity Verlet from x with velocity zero; returns max total energy / initial energy
// (infinity if it became non-finite), for stable-step tests.
inline double verletEnergyGrowth(const Model& model, std::vector<double> x, double dt, int steps) {
  const auto m = model.nodeMasses();
  std::vector<double> v(x.size(), 0.0), g(x.size(), 0.0);
  const double initial = model.addGradient(x, g).total();
  double worst = 1;
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < x.size(); ++i) {
      v[i] -= 0.5 * dt * g[i] / m[i / 3];
      x[i] += dt * v[i];
    }
    std::fill(g.begin(), g.end(), 0.0);
    const double potential = model.addGradient(x, g).total();
    double kinetic = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      v[i] -= 0.5 * dt * g[i] / m[i / 3];
      kinetic += 0.5 * m[i / 3] * v[i] * v[i];
    }
    const double total = potential + kinetic;
    if (!std::isfinite(total)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, total / initial);
    if (worst > 1e6) break;
  }
  return worst;
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

// Columns of the Hessian against central differences of the gradient; fails for a model
// without a Hessian.
inline ::testing::AssertionResult hessianMatchesFiniteDifferences(const Model& model,
                                                                  std::span<const double> x,
                                                                  double step, double tolerance,
                                                                  int columns = 12) {
  std::vector<Eigen::Triplet<double>> triplets;
  if (!model.addHessian(x, triplets)) {
    // A model without a Hessian cannot take implicit steps or static solves: the contract
    // says so by failing, not by passing a check it never made.
    return ::testing::AssertionFailure()
           << "the model '" << model.name() << "' has no Hessian (Model::hessianBlockNodes)";
  }
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

// Sum of forces and of torques about the origin; both vanish for internal forces. The
// torque tolerance defaults to the force tolerance.
inline ::testing::AssertionResult zeroNetForceAndTorque(const Model& model,
                                                        std::span<const double> x, double tolerance,
                                                        double torqueTolerance = -1) {
  if (torqueTolerance < 0) torqueTolerance = tolerance;
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
  if (force.norm() > tolerance * scale || torque.norm() > torqueTolerance * scale) {
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

// ---------------------------------------------------------------------------------------
// The contract template.

// A model at rest, as one contract case builds it.
struct ContractSetup {
  std::unique_ptr<Model> model;
  std::vector<double> rest;  // rest positions, (nNodes, 3), m
  double scale = 1;          // length scale (typical element size), m
  // False for a model whose rest shape flowed plastically: the rest positions then store
  // energy (and the contract checks that they do).
  bool restIsRelaxed = true;
};

// One model on one configuration. Lengths are relative to ContractSetup::scale.
struct ContractCase {
  std::string name;                      // test-name suffix, [A-Za-z0-9_]
  std::function<ContractSetup()> setup;  // builds the model (lazily: only tests that run pay)
  double perturbation = 0.05;            // amplitude of the random deformations
  double gradientStep = 1e-7;            // finite-difference step of the gradient check
  double gradientTolerance = 1e-6;       // its relative tolerance
  double hessianStep = 1e-6;             // finite-difference step of the Hessian check
  double hessianTolerance = 1e-6;        // its tolerance, relative to the largest entry
  double forceTolerance = 1e-12;         // |net force| / sum |g_i| max(1, |x_i|)
  double torqueTolerance = 1e-12;        // |net torque| / the same
  double rigidTolerance = 1e-9;          // relative energy change under a rigid motion
  bool expectStretching = false;         // the deformed state has stretching energy > 0
  bool expectBending = false;            // ... and bending energy > 0
};

inline void PrintTo(const ContractCase& c, std::ostream* os) {
  *os << c.name;
}

inline std::string contractCaseName(const ::testing::TestParamInfo<ContractCase>& info) {
  return info.param.name;
}

class ModelContract : public ::testing::TestWithParam<ContractCase> {};

}  // namespace shellsim::testing
