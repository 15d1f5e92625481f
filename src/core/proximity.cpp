#include "core/proximity.hpp"

#include <algorithm>

namespace shellsim {

TrianglePoint closestOnTriangle(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const Vec3 ab = b - a, ac = c - a, ap = p - a;
  const double d1 = ab.dot(ap), d2 = ac.dot(ap);
  if (d1 <= 0 && d2 <= 0) return {{1, 0, 0}, 0};
  const Vec3 bp = p - b;
  const double d3 = ab.dot(bp), d4 = ac.dot(bp);
  if (d3 >= 0 && d4 <= d3) return {{0, 1, 0}, 1};
  const double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0 && d1 - d3 > 0) {
    const double v = d1 / (d1 - d3);
    return {{1 - v, v, 0}, 5};  // edge ab, opposite c
  }
  const Vec3 cp = p - c;
  const double d5 = ab.dot(cp), d6 = ac.dot(cp);
  if (d6 >= 0 && d5 <= d6) return {{0, 0, 1}, 2};
  const double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0 && d2 - d6 > 0) {
    const double w = d2 / (d2 - d6);
    return {{1 - w, 0, w}, 4};  // edge ac, opposite b
  }
  const double va = d3 * d6 - d5 * d4;
  if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0 && (d4 - d3) + (d5 - d6) > 0) {
    const double w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    return {{0, 1 - w, w}, 3};  // edge bc, opposite a
  }
  const double sum = va + vb + vc;
  if (!(sum > 0)) return {{1, 0, 0}, 0};  // degenerate: a point of the closure
  const double v = vb / sum, w = vc / sum;
  return {{1 - v - w, v, w}, 6};
}

SegmentPoints closestBetweenSegments(const Vec3& p0, const Vec3& p1, const Vec3& q0,
                                     const Vec3& q1) {
  // Ericson 5.1.9: minimize |p0 + s d1 - q0 - t d2|^2 over the unit square.
  const Vec3 d1 = p1 - p0, d2 = q1 - q0, r = p0 - q0;
  const double a = d1.squaredNorm(), e = d2.squaredNorm(), f = d2.dot(r);
  const double tiny = 1e-30;
  if (a <= tiny && e <= tiny) return {0, 0};
  if (a <= tiny) return {0, std::clamp(f / e, 0.0, 1.0)};
  const double c = d1.dot(r);
  if (e <= tiny) return {std::clamp(-c / a, 0.0, 1.0), 0};
  const double b = d1.dot(d2);
  const double denom = a * e - b * b;
  double s = denom > 1e-14 * a * e ? std::clamp((b * f - c * e) / denom, 0.0, 1.0) : 0.0;
  double t = (b * s + f) / e;
  if (t < 0) {
    t = 0;
    s = std::clamp(-c / a, 0.0, 1.0);
  } else if (t > 1) {
    t = 1;
    s = std::clamp((b - c) / a, 0.0, 1.0);
  }
  return {s, t};
}

}  // namespace shellsim
