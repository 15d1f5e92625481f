// Exact geometric predicates on double coordinates and the triangle-pair intersection
// test built on them (gingold2004 section 4.3: "never accept a state in which there are
// intersections"; the issue's frame test counts intersecting triangle pairs).
//
// orient3d(a, b, c, d) is the sign of det[b - a, c - a, d - a]: positive when d lies on
// the side of the plane (a, b, c) that (b - a) x (c - a) points to. It is evaluated in
// floating point first; when the result is within the rounding error bound of that
// evaluation (a semi-static filter, |det| <= 1e-14 of the permanent, far wider than the
// true bound of about 8 ulp), or overflowed, it is recomputed exactly in GMP's integers
// (every double is an integer times a power of two). The sign is therefore exact for any
// finite input; a point with a coordinate that is not finite gives 0.
#pragma once

#include "core/vec3.hpp"

namespace shellsim {

// -1, 0 or +1, exactly.
[[nodiscard]] int orient3d(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d);

// Whether the closed segment pq and the triangle abc cross properly: p and q strictly on
// opposite sides of the triangle's plane and the crossing point strictly inside the
// triangle. Touching (a zero orientation anywhere) does not count.
[[nodiscard]] bool segmentCrossesTriangle(const Vec3& p, const Vec3& q, const Vec3& a,
                                          const Vec3& b, const Vec3& c);

// Whether two triangles intersect properly: an edge of one crosses the other's interior
// (segmentCrossesTriangle). Two non-coplanar triangles whose interiors intersect always
// have such an edge; triangles that only touch (along a shared edge or vertex, or an edge
// lying in the other's plane) and coplanar overlaps (a set of measure zero for simulated
// surfaces) are not counted.
[[nodiscard]] bool trianglesIntersect(const Vec3& a0, const Vec3& a1, const Vec3& a2,
                                      const Vec3& b0, const Vec3& b1, const Vec3& b2);

}  // namespace shellsim
