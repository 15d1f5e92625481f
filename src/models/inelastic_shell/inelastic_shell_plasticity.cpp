#include "models/inelastic_shell/inelastic_shell_plasticity.hpp"

#include <cmath>

namespace shellsim::inelastic_shell {

namespace {

using Mat2 = Eigen::Matrix2d;

// N(A) = tr A^2 + (tr A)^2.
double squaredNorm(const Mat2& a) {
  return a.squaredNorm() + a.trace() * a.trace();
}

// The back strain's factor g(s) (back_i = g P_i) and its tangent slope d|back| / ds at the
// plastic strains (pm, pc): gamma and gamma when linear.
struct BackStrain {
  double factor = 0;
  double slope = 0;
};

BackStrain backStrain(const Mat2& pm, const Mat2& pc, const YieldParams& params) {
  const double gamma = params.hardening;
  const double limit = params.hardeningLimit;
  if (!(limit > 0) || gamma == 0) return {gamma, gamma};
  const double h = params.thickness;
  const double s = std::sqrt(squaredNorm(pm) + h * h / 12 * squaredNorm(pc));
  const double x = gamma * s / limit;
  const double sech = 1 / std::cosh(x);
  // tanh(x) / x = 1 - x^2 / 3 + ...: below 1e-8 the series' first term is exact in doubles.
  const double factor = x < 1e-8 ? gamma : limit * std::tanh(x) / s;
  return {factor, gamma * sech * sech};
}

// A = eps - a tr(eps) I - back, back = g P.
Mat2 direction(const Mat2& elastic, const Mat2& plastic, double backFactor,
               const YieldParams& params) {
  const double a = (1 - 2 * params.poisson) / (3 * (1 - params.poisson));
  return elastic - a * elastic.trace() * Mat2::Identity() - backFactor * plastic;
}

}  // namespace

double yieldNorm(const Mat2& em, const Mat2& ec, const Mat2& pm, const Mat2& pc,
                 const YieldParams& params) {
  const double h = params.thickness;
  const double back = backStrain(pm, pc, params).factor;
  return std::sqrt(squaredNorm(direction(em, pm, back, params)) +
                   h * h / 12 * squaredNorm(direction(ec, pc, back, params)));
}

int returnMap(const Mat2& totalM, const Mat2& totalC, Mat2& pm, Mat2& pc, const YieldParams& params,
              const std::function<void(Mat2&)>& projectBending) {
  const double h = params.thickness;
  const double eps0 = params.yieldStrain;
  constexpr int kMaxPasses = 50;
  int passes = 0;
  for (; passes < kMaxPasses; ++passes) {
    const BackStrain back = backStrain(pm, pc, params);
    const Mat2 am = direction(totalM - pm, pm, back.factor, params);
    const Mat2 ac = direction(totalC - pc, pc, back.factor, params);
    const double norm = std::sqrt(squaredNorm(am) + h * h / 12 * squaredNorm(ac));
    const double overstress = norm - eps0;
    if (!(overstress > 1e-12 * eps0)) break;
    // Newton on the overstress along A (the tangent slope: saturation only slows the back
    // strain, so the overstress stays convex in the step and the passes never overshoot).
    const double step = overstress / ((1 + back.slope) * norm);
    pm += step * am;
    pc += step * ac;
    if (projectBending) projectBending(pc);
  }
  return passes;
}

}  // namespace shellsim::inelastic_shell
