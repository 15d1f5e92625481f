// The surface of a melting meshless volume through topology changes (muller2004 section 5.2;
// notes specs/muller2004.md B7): surfels carried by the phyxels (eq. 27, the detail surface
// L_D) are blended onto the phyxels' implicit surface L_I where the phyxel cloud's boundary
// changes, then resampled, so the surface splits where the body does and merges where its
// parts meet. Zombies (section 5.2.5) and the contact surface (5.2.3) are not built: surfels
// carry no colour, and L_D keeps the detail wherever the boundary does not change.
//
// Implicit surface (eq. 28): F(x) = sum_i exp(-|x - x_i|^2 / sigma^2) over the phyxels within
// kFieldReach sigma of x, L_I = {F = S}. This is the paper's f_i = b exp(-a r^2) with
// a = 1 / sigma^2 and b = 1 (S absorbs b); sigma is the phyxel spacing and S the median of F
// over the initial surfels, so L_I starts where the input surface is.
//
// Boundary probability of a phyxel (eq. 29): P = 1 - det C / (tr C / 3)^3 in [0, 1], C the
// covariance of the phyxels within its first support radius (0 for an isotropic
// neighbourhood, towards 1 at a face).
//
// Blending (eq. 30): a surfel bound to n phyxels accumulates
//   Delta_Sigma += lambda / n |sum P^t - sum P^(t-1)|  (capped at 1)
// in the updates where that mean change of P is faster than kBoundaryRate: a body that
// deforms without coming apart changes P slowly, and summed over a melt's hundreds of updates
// that alone wiped out the detail of every surface that moved (the paper sums every change).
// It estimates its field value s^t = s^0 + Delta_Sigma (S - s^0) and moves the fraction
// b = (s^t - s^(t-1)) / (S - s^(t-1)) of the way to its projection on L_I (b = 1 once
// there), normals likewise.
//
// Resampling (section 5.2.4): with k the surfels within the radius rho of a surfel, one with
// k > kMaxNeighbours is deleted with probability k / (2 kMaxNeighbours), one with
// k < kMinNeighbours is split kMinNeighbours - k times into its tangent plane at rho / 2; then
// kRepulsionSweeps sweeps of repulsion in the tangent planes [PGK02] even out the spacing of
// the surfels on L_I (the detail surface stays where eq. 27 carries it).
// The random choices hash the surfel's index and the update's count (the same on any thread
// count). Surfels whose projection fails (no phyxel within reach: the gap of a split) are
// deleted.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/spatial.hpp"
#include "core/vec3.hpp"

namespace shellsim::mls {

inline constexpr double kFieldReach = 2.5;      // sigma: exp(-6.25) = 0.002 of a phyxel's peak
inline constexpr double kBlendWeight = 4;       // lambda of eq. 30
inline constexpr double kBoundaryRate = 2;      // 1/s: slower mean changes of P are deformation
inline constexpr int kMinNeighbours = 4;        // surfels within rho, below which one splits
inline constexpr int kMaxNeighbours = 12;       // ... above which one may be deleted
inline constexpr double kResampleRadius = 1.6;  // rho over the initial surfel spacing
inline constexpr int kRepulsionSweeps = 2;

// Eq. (28) over a set of phyxels (kept by reference: they must outlive the field).
class ImplicitField {
 public:
  ImplicitField(std::span<const double> phyxels, double sigma);
  // F(x), and its gradient when asked.
  double value(const Vec3& x, Vec3* gradient) const;
  // Moves x onto F = iso along the gradient (Newton, steps of at most sigma / 2) and sets
  // normal to -grad F / |grad F|; false when it does not get there (no phyxel near).
  bool project(Vec3& x, double iso, Vec3& normal) const;

 private:
  // F and its gradient at x over the phyxels among `candidates` within reach of x.
  double valueOver(std::span<const uint32_t> candidates, const Vec3& x, Vec3* gradient) const;
  std::span<const double> phyxels_;
  PointKdTree tree_;
  double sigma_;
};

// Eq. (29) for every phyxel over the phyxels within its radius (radii (nPhyxels), m; the
// paper's support radius, fixed), at positions (nPhyxels, 3); fewer than 4 of them: 1.
std::vector<double> boundaryProbabilities(std::span<const double> positions,
                                          std::span<const double> radii);

// The surfels of section 5.2 and their blending state, one row each.
struct Surfels {
  std::vector<double> positions;  // (nSurfels, 3), m
  std::vector<double> normals;    // (nSurfels, 3), unit
  std::vector<double> initial;    // s^0, (nSurfels)
  std::vector<double> estimate;   // s^(t-1), (nSurfels)
  std::vector<double> blended;    // Delta_Sigma, (nSurfels), in [0, 1]
  [[nodiscard]] size_t size() const { return initial.size(); }
};

struct SurfelUpdate {
  double iso = 1;         // S
  double spacing = 0;     // the initial surfel spacing, m
  size_t maxSurfels = 0;  // no splits past this many
  uint64_t seed = 0;      // the update's count
  double interval = 0;    // s since the last update
};

// One update of the surfels after the phyxels moved (their current positions are the field's):
// blending (eq. 30) with each surfel's bound phyxels (bindOffsets (nSurfels + 1) into
// bindPhyxels), then resampling. Returns the surfels kept, split and repelled.
void updateSurfels(Surfels& surfels, const ImplicitField& field,
                   std::span<const double> boundaryNow, std::span<const double> boundaryBefore,
                   std::span<const int32_t> bindOffsets, std::span<const int32_t> bindPhyxels,
                   const SurfelUpdate& update);

}  // namespace shellsim::mls
