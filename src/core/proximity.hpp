// Closest points between the primitives of triangle meshes, for penalty contact
// (gingold2004 section 4.3): a point and a triangle, two segments.
#pragma once

#include "core/vec3.hpp"

namespace shellsim {

// The point of triangle abc closest to p, as barycentric weights (w[0] a + w[1] b + w[2] c,
// each >= 0, summing to 1). Region by region (Ericson, Real-Time Collision Detection,
// 5.1.5): a vertex, an edge or the interior. A degenerate triangle gives a point of its
// closure.
struct TrianglePoint {
  double w[3];
  // Which feature holds it: 0..2 the vertex w[k] = 1, 3..5 the edge opposite vertex
  // (k - 3) (the edge (k-2, k-1) mod 3), 6 the interior.
  int feature;
};
[[nodiscard]] TrianglePoint closestOnTriangle(const Vec3& p, const Vec3& a, const Vec3& b,
                                              const Vec3& c);

// Parameters s, t in [0, 1] of the closest points p0 + s (p1 - p0) and q0 + t (q1 - q0) of
// two segments; for parallel segments one of the closest pairs. Degenerate segments are
// points.
struct SegmentPoints {
  double s, t;
};
[[nodiscard]] SegmentPoints closestBetweenSegments(const Vec3& p0, const Vec3& p1, const Vec3& q0,
                                                   const Vec3& q1);

}  // namespace shellsim
