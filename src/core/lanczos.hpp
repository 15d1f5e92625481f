// The largest eigenvalue of a symmetric operator by the Lanczos iteration, for stable-step
// estimates (the fiber and meshless volume models).
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace shellsim {

// At most `maxSteps` Lanczos steps (no reorthogonalisation) on the symmetric n x n operator
// `apply(v, w)`: w = A v (w is overwritten), from a fixed random start (seed 12345), then
// the largest eigenvalue of the tridiagonal. Lanczos approaches lambda_max from below:
// callers keep a margin. Stops early when the Krylov space is exhausted.
template <class Apply>
double largestEigenvalueLanczos(size_t n, int maxSteps, const Apply& apply) {
  std::vector<double> v(n), previous(n, 0.0), w(n);
  std::mt19937 rng(12345);
  std::normal_distribution<double> normal;
  double norm = 0;
  for (double& value : v) {
    value = normal(rng);
    norm += value * value;
  }
  for (double& value : v) value /= std::sqrt(norm);
  const int steps = static_cast<int>(std::min<size_t>(static_cast<size_t>(maxSteps), n));
  std::vector<double> alpha, beta;
  double betaPrevious = 0;
  for (int step = 0; step < steps; ++step) {
    apply(std::span<const double>(v), std::span<double>(w));
    double a = 0;
    for (size_t i = 0; i < n; ++i) {
      w[i] = w[i] - betaPrevious * previous[i];
      a += w[i] * v[i];
    }
    double b = 0;
    for (size_t i = 0; i < n; ++i) {
      w[i] -= a * v[i];
      b += w[i] * w[i];
    }
    b = std::sqrt(b);
    alpha.push_back(a);
    if (!(b > 1e-12 * std::abs(a)) || step + 1 == steps) break;
    beta.push_back(b);
    previous = v;
    for (size_t i = 0; i < n; ++i) v[i] = w[i] / b;
    betaPrevious = b;
  }
  const auto m = static_cast<Eigen::Index>(alpha.size());
  Eigen::MatrixXd tridiagonal = Eigen::MatrixXd::Zero(m, m);
  for (Eigen::Index i = 0; i < m; ++i) {
    tridiagonal(i, i) = alpha[static_cast<size_t>(i)];
    if (i + 1 < m) tridiagonal(i, i + 1) = tridiagonal(i + 1, i) = beta[static_cast<size_t>(i)];
  }
  return Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(tridiagonal, Eigen::EigenvaluesOnly)
      .eigenvalues()
      .maxCoeff();
}

}  // namespace shellsim
