#include "core/predicates.hpp"

#include <gmpxx.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace shellsim {

namespace {

// Every finite double is an integer m times 2^e (|m| < 2^53); with e0 the smallest such e
// among the twelve coordinates, each coordinate is the integer m 2^(e - e0) times 2^e0, so
// the determinant is an integer times 2^(3 e0) > 0 and has that integer's sign. GMP's
// integers compute it exactly without the gcd a rational pays at every operation (GMP's
// rationals took a quarter of the crushed can's run, in its intersection checks). Out of
// line, so that orient3d's filtered path, which decides nearly every call, stays small.
[[gnu::noinline]] int exactOrient3d(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  constexpr int kMantissaBits = std::numeric_limits<double>::digits;  // 53
  const std::array<const Vec3*, 4> points{&a, &b, &c, &d};
  int smallest = std::numeric_limits<int>::max();
  for (const Vec3* p : points) {
    for (int k = 0; k < 3; ++k) {
      if ((*p)[k] == 0) continue;
      int exponent = 0;
      (void)std::frexp((*p)[k], &exponent);
      smallest = std::min(smallest, exponent - kMantissaBits);
    }
  }
  if (smallest == std::numeric_limits<int>::max()) return 0;  // four points at the origin
  std::array<std::array<mpz_class, 3>, 4> integer;
  for (size_t i = 0; i < points.size(); ++i) {
    for (int k = 0; k < 3; ++k) {
      const double x = (*points[i])[k];
      if (x == 0) continue;
      int exponent = 0;
      // frexp's fraction times 2^53 is the integer m, exactly representable.
      integer[i][static_cast<size_t>(k)] =
          mpz_class(std::ldexp(std::frexp(x, &exponent), kMantissaBits));
      mpz_mul_2exp(integer[i][static_cast<size_t>(k)].get_mpz_t(),
                   integer[i][static_cast<size_t>(k)].get_mpz_t(),
                   static_cast<mp_bitcnt_t>(exponent - kMantissaBits - smallest));
    }
  }
  std::array<std::array<mpz_class, 3>, 3> m;
  for (size_t r = 0; r < 3; ++r) {
    for (size_t k = 0; k < 3; ++k) m[r][k] = integer[r + 1][k] - integer[0][k];
  }
  const mpz_class det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                        m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                        m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  return sgn(det);
}

}  // namespace

int orient3d(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  const Vec3 u = b - a, v = c - a, w = d - a;
  const double m0 = v.y() * w.z() - v.z() * w.y();
  const double m1 = v.x() * w.z() - v.z() * w.x();
  const double m2 = v.x() * w.y() - v.y() * w.x();
  const double det = u.x() * m0 - u.y() * m1 + u.z() * m2;
  // The permanent bounds every product's magnitude; the differences above carry their own
  // rounding, which the generous factor covers.
  const double permanent = std::abs(u.x()) * (std::abs(v.y() * w.z()) + std::abs(v.z() * w.y())) +
                           std::abs(u.y()) * (std::abs(v.x() * w.z()) + std::abs(v.z() * w.x())) +
                           std::abs(u.z()) * (std::abs(v.x() * w.y()) + std::abs(v.y() * w.x()));
  // Below 1e-250 the products may have lost digits to underflow (subnormals round in
  // absolute steps of 2^-1075), which the relative bound does not cover.
  const double bound = 1e-14 * permanent;
  if (permanent > 1e-250) {
    if (det > bound) return 1;
    if (det < -bound) return -1;
  }
  if (!std::isfinite(det)) {
    // A coordinate that is not finite has no orientation; finite ones whose products
    // overflowed have one, which the integers find.
    for (const Vec3* p : {&a, &b, &c, &d}) {
      if (!p->allFinite()) return 0;
    }
    return exactOrient3d(a, b, c, d);
  }
  // Exactly zero in one coordinate for all three (a flat sheet in a coordinate plane): the
  // determinant is 0 exactly, without GMP.
  for (int k = 0; k < 3; ++k) {
    if (u[k] == 0 && v[k] == 0 && w[k] == 0) return 0;
  }
  // Two of the points the same (neighbouring triangles tested against each other share
  // corners): the determinant is 0 exactly.
  if (a == b || a == c || a == d || b == c || b == d || c == d) return 0;
  return exactOrient3d(a, b, c, d);
}

bool segmentCrossesTriangle(const Vec3& p, const Vec3& q, const Vec3& a, const Vec3& b,
                            const Vec3& c) {
  const int sp = orient3d(a, b, c, p);
  const int sq = orient3d(a, b, c, q);
  if (sp == 0 || sq == 0 || sp == sq) return false;
  // The line pq passes inside the triangle when it turns the same way around all three
  // edges.
  const int s0 = orient3d(p, q, a, b);
  const int s1 = orient3d(p, q, b, c);
  const int s2 = orient3d(p, q, c, a);
  return s0 != 0 && s0 == s1 && s1 == s2;
}

bool trianglesIntersect(const Vec3& a0, const Vec3& a1, const Vec3& a2, const Vec3& b0,
                        const Vec3& b1, const Vec3& b2) {
  // A proper crossing is a point inside both triangles on the line where their planes meet:
  // each triangle then has corners strictly on both sides of the other's plane. One
  // triangle on one side, or touching the other's plane at a shared vertex or edge (every
  // pair of neighbours), decides it with these orientations.
  const int sb0 = orient3d(a0, a1, a2, b0), sb1 = orient3d(a0, a1, a2, b1),
            sb2 = orient3d(a0, a1, a2, b2);
  if (!((sb0 > 0 || sb1 > 0 || sb2 > 0) && (sb0 < 0 || sb1 < 0 || sb2 < 0))) return false;
  const int sa0 = orient3d(b0, b1, b2, a0), sa1 = orient3d(b0, b1, b2, a1),
            sa2 = orient3d(b0, b1, b2, a2);
  if (!((sa0 > 0 || sa1 > 0 || sa2 > 0) && (sa0 < 0 || sa1 < 0 || sa2 < 0))) return false;
  return segmentCrossesTriangle(a0, a1, b0, b1, b2) || segmentCrossesTriangle(a1, a2, b0, b1, b2) ||
         segmentCrossesTriangle(a2, a0, b0, b1, b2) || segmentCrossesTriangle(b0, b1, a0, a1, a2) ||
         segmentCrossesTriangle(b1, b2, a0, a1, a2) || segmentCrossesTriangle(b2, b0, a0, a1, a2);
}

}  // namespace shellsim
