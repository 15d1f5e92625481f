#include "models/inelastic_shell/inelastic_shell_plasticity.hpp"

#include <cmath>

namespace shellsim::inelastic_shell {

namespace {

using Mat2 = Eigen::Matrix2d;

// A = eps - a tr(eps) I - gamma P.
Mat2 direction(const Mat2& elastic, const Mat2& plastic, const YieldParams& params) {
  const double a = (1 - 2 * params.poisson) / (3 * (1 - params.poisson));
  return elastic - a * elastic.trace() * Mat2::Identity() - params.hardening * plastic;
}

// N(A) = tr A^2 + (tr A)^2.
double squaredNorm(const Mat2& a) {
  return a.squaredNorm() + a.trace() * a.trace();
}

}  // namespace

double yieldNorm(const Mat2& em, const Mat2& ec, const Mat2& pm, const Mat2& pc,
                 const YieldParams& params) {
  const double h = params.thickness;
  return std::sqrt(squaredNorm(direction(em, pm, params)) +
                   h * h / 12 * squaredNorm(direction(ec, pc, params)));
}

int returnMap(const Mat2& totalM, const Mat2& totalC, Mat2& pm, Mat2& pc, const YieldParams& params,
              const std::function<void(Mat2&)>& projectBending) {
  const double h = params.thickness;
  const double eps0 = params.yieldStrain;
  constexpr int kMaxPasses = 50;
  int passes = 0;
  for (; passes < kMaxPasses; ++passes) {
    const Mat2 am = direction(totalM - pm, pm, params);
    const Mat2 ac = direction(totalC - pc, pc, params);
    const double norm = std::sqrt(squaredNorm(am) + h * h / 12 * squaredNorm(ac));
    const double overstress = norm - eps0;
    if (!(overstress > 1e-12 * eps0)) break;
    const double step = overstress / ((1 + params.hardening) * norm);
    pm += step * am;
    pc += step * ac;
    if (projectBending) projectBending(pc);
  }
  return passes;
}

}  // namespace shellsim::inelastic_shell
