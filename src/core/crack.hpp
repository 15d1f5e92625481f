// Crack planes of wicke2005 section 7.2 (Fig. 5): a small disc placed in the REST
// configuration at the centre node of the fiber that broke, normal to that fiber's tangent
// there, with the average node distance of the neighbourhood as radius. Two rest points
// are separated when the segment between them passes through a disc; neighbourhoods of
// simulation nodes (fibers) and of surface points (the high-resolution surface binding)
// only join points that no disc separates.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/byte_stream.hpp"
#include "core/vec3.hpp"

namespace shellsim {

struct CrackDisc {
  Vec3 centre = Vec3::Zero();   // rest position of the fiber's centre node, m
  Vec3 normal = Vec3::UnitX();  // unit: the fiber's rest tangent at the centre
  double radius = 0;            // m, > 0
};

// True when a and b lie on different sides of the disc's plane and the segment [a, b]
// meets the plane inside the disc (closed). A point on the plane counts on the side the
// normal points to: the node a crack is placed at stays with that side, and a segment
// lying in the plane (along the crack) is not separated.
inline bool segmentCrossesDisc(const Vec3& a, const Vec3& b, const CrackDisc& disc) {
  const double da = (a - disc.centre).dot(disc.normal);
  const double db = (b - disc.centre).dot(disc.normal);
  if ((da >= 0) == (db >= 0)) return false;
  const double t = da / (da - db);  // in [0, 1]: where the segment meets the plane
  const Vec3 hit = a + t * (b - a);
  return (hit - disc.centre).squaredNorm() <= disc.radius * disc.radius;
}

// True when any disc separates a and b.
inline bool separatedByCracks(const Vec3& a, const Vec3& b, std::span<const CrackDisc> discs) {
  for (const CrackDisc& disc : discs) {
    if (segmentCrossesDisc(a, b, disc)) return true;
  }
  return false;
}

// Discs in a checkpoint: their count, then centre, normal and radius of each (7 doubles).
inline void writeCrackDiscs(ByteWriter& out, std::span<const CrackDisc> discs) {
  out.value<uint64_t>(discs.size());
  for (const CrackDisc& disc : discs) {
    for (int c = 0; c < 3; ++c) out.value(disc.centre[c]);
    for (int c = 0; c < 3; ++c) out.value(disc.normal[c]);
    out.value(disc.radius);
  }
}

// Reads what writeCrackDiscs wrote, at most `limit` discs, each checked (finite centre,
// unit normal, positive finite radius); fails through `in` naming disc i as "<what> i".
inline std::vector<CrackDisc> readCrackDiscs(ByteReader& in, const std::string& what,
                                             uint64_t limit) {
  const std::string countName = what + " count";
  const auto count = in.value<uint64_t>(countName.c_str());
  if (count > limit) {
    in.fail(countName + " " + std::to_string(count) + " is more than " + std::to_string(limit));
  }
  std::vector<CrackDisc> discs;
  for (uint64_t i = 0; i < count; ++i) {
    CrackDisc& disc = discs.emplace_back();
    for (int c = 0; c < 3; ++c) disc.centre[c] = in.value<double>(what.c_str());
    for (int c = 0; c < 3; ++c) disc.normal[c] = in.value<double>(what.c_str());
    disc.radius = in.value<double>(what.c_str());
    if (!disc.centre.allFinite() || !(std::abs(disc.normal.norm() - 1) < 1e-9) ||
        !(disc.radius > 0) || !std::isfinite(disc.radius)) {
      in.fail(what + " " + std::to_string(i) + " is not a valid disc");
    }
  }
  return discs;
}

}  // namespace shellsim
