// The scalar reference of the fiber energies: eqs. (4)-(8) as fiber_model.hpp writes them,
// one node at a time, each fiber's arc length and angle by the scalar kernels
// (fiber::fiberArcLength, fiber::fiberTangentAngle) about the node's normal N_j
// (patchFrame). No SIMD lanes, no evaluation plan, no shared scratch: slow and plain on
// purpose, so that the tests can hold the batched pass (fiber_model_eval.cpp) against it.
#include <cmath>
#include <numbers>

#include "models/fiber/fiber_kernel.hpp"
#include "models/fiber/fiber_model.hpp"

namespace shellsim {

EnergyParts FiberModel::referenceEnergy(std::span<const double> x, std::span<double> stretching,
                                        std::span<double> bending) const {
  constexpr double kPi = std::numbers::pi;
  const double alpha = meanAngleWeight_;
  EnergyParts total;
  for (size_t j = 0; j < static_cast<size_t>(network_.nodeCount); ++j) {
    const Vec3 normal = patchFrame(x, j).normal;
    int count = 0;
    double sumAreaChange = 0, sumAreaChange2 = 0;    // sum (A_k - A_k0), sum s_k (A_k - A_k0)^2
    double sumAngleChange = 0, sumAngleChange2 = 0;  // sum dtheta_k, sum s_k w_k^2 dtheta_k^2
    for (auto k = static_cast<size_t>(network_.centreOffsets[j]);
         k < static_cast<size_t>(network_.centreOffsets[j + 1]); ++k) {
      if ((network_.flags[k] & kFiberActive) == 0) continue;
      const Vec3 ends[3] = {row(x, static_cast<size_t>(network_.fiberNodes[3 * k])),
                            row(x, static_cast<size_t>(network_.fiberNodes[3 * k + 1])),
                            row(x, static_cast<size_t>(network_.fiberNodes[3 * k + 2]))};
      const double length = fiber::fiberArcLength(ends, samples_);
      const double angle = fiber::fiberTangentAngle(ends, normal);
      const double restLength = network_.restLength[k];
      const double areaChange = kPi / 4 * (length * length - restLength * restLength);  // eq. (4)
      const double angleChange = angle - network_.restAngle[k];
      const double stretchWeight = fiberStretchWeight_.empty() ? 1.0 : fiberStretchWeight_[k];
      ++count;
      sumAreaChange += areaChange;
      sumAreaChange2 += stretchWeight * areaChange * areaChange;
      sumAngleChange += angleChange;
      sumAngleChange2 += fiberBendWeight_[k] * angleChange * angleChange;
    }
    double nodeStretching = 0, nodeBending = 0;
    if (count > 0) {
      const double n = count;
      const double areaError = sumAreaChange / n;    // A_j - A_j0, eq. (4)
      const double angleError = sumAngleChange / n;  // H_j - H_j0, eq. (7)
      nodeStretching = 0.5 * stretchK_[j] * (areaError * areaError + sumAreaChange2 / n);  // (5)
      nodeBending =
          0.5 * bendK_[j] * restArea_[j] *
          (alpha * angleError * angleError + (1 - alpha) * sumAngleChange2 / n);  // (6), (8)
    }
    if (!stretching.empty()) stretching[j] = nodeStretching;
    if (!bending.empty()) bending[j] = nodeBending;
    total.stretching += nodeStretching;
    total.bending += nodeBending;
  }
  return total;
}

}  // namespace shellsim
