#include "geometry/volume_sampling.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "shellsim/errors.hpp"

namespace shellsim {

double windingNumber(const Geometry& mesh, const Vec3& p) {
  double sum = 0;
  const auto triangles = static_cast<size_t>(mesh.triangleCount());
  for (size_t t = 0; t < triangles; ++t) {
    const Vec3 a = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t])) - p;
    const Vec3 b = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 1])) - p;
    const Vec3 c = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 2])) - p;
    const double la = a.norm(), lb = b.norm(), lc = c.norm();
    const double numerator = a.dot(b.cross(c));
    const double denominator = la * lb * lc + a.dot(b) * lc + b.dot(c) * la + c.dot(a) * lb;
    sum += 2.0 * std::atan2(numerator, denominator);
  }
  return sum / (4.0 * std::numbers::pi);
}

double enclosedVolume(const Geometry& mesh) {
  double sum = 0;
  const auto triangles = static_cast<size_t>(mesh.triangleCount());
  for (size_t t = 0; t < triangles; ++t) {
    const Vec3 a = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t]));
    const Vec3 b = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 1]));
    const Vec3 c = row(mesh.positions, static_cast<size_t>(mesh.triangles[3 * t + 2]));
    sum += a.dot(b.cross(c));
  }
  return std::abs(sum) / 6.0;
}

VolumeSampling sampleVolume(const Geometry& mesh, double spacing) {
  if (mesh.isPointCloud()) {
    throw InputError(
        "sampling a volume needs a closed triangle mesh, but the geometry is a "
        "point cloud");
  }
  if (!(spacing > 0) || !std::isfinite(spacing)) {
    std::ostringstream msg;
    msg << "volume sampling: spacing " << spacing << " must be positive";
    throw InputError(msg.str());
  }
  const Bounds bounds = computeBounds(mesh);
  size_t counts[3];
  double origin[3];
  double cells = 1;
  for (int a = 0; a < 3; ++a) {
    // floor(extent / spacing) points centred in the bounds: a box whose sides are multiples
    // of the spacing gets one point at the centre of each cell, none on its faces (where the
    // winding number is 1/2 and rounding would decide).
    const double extent =
        std::max(1.0, std::floor((bounds.max[a] - bounds.min[a]) / spacing + 1e-9));
    cells *= extent;
    if (!(cells <= 2e7)) {
      std::ostringstream msg;
      msg << "volume sampling: spacing " << spacing
          << " m puts more than 2e7 lattice points in the mesh's bounds: choose a larger spacing";
      throw InputError(msg.str());
    }
    counts[a] = static_cast<size_t>(extent);
    origin[a] = 0.5 * (bounds.min[a] + bounds.max[a]) - 0.5 * spacing * (extent - 1);
  }
  const size_t total = counts[0] * counts[1] * counts[2];
  const auto latticePoint = [&](size_t i) {
    const size_t ix = i % counts[0];
    const size_t iy = (i / counts[0]) % counts[1];
    const size_t iz = i / (counts[0] * counts[1]);
    return Vec3(origin[0] + spacing * static_cast<double>(ix),
                origin[1] + spacing * static_cast<double>(iy),
                origin[2] + spacing * static_cast<double>(iz));
  };
  std::vector<char> inside(total, 0);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, total, 16),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t i = r.begin(); i != r.end(); ++i) {
                        inside[i] = std::abs(windingNumber(mesh, latticePoint(i))) > 0.5 ? 1 : 0;
                      }
                    });
  VolumeSampling out;
  out.spacing = spacing;
  for (size_t i = 0; i < total; ++i) {
    if (inside[i] == 0) continue;
    const Vec3 p = latticePoint(i);
    out.positions.insert(out.positions.end(), {p.x(), p.y(), p.z()});
  }
  return out;
}

VolumeSampling sampleVolumeByCount(const Geometry& mesh, int32_t count) {
  if (count <= 0) {
    std::ostringstream msg;
    msg << "volume sampling: count " << count << " must be positive";
    throw InputError(msg.str());
  }
  if (mesh.isPointCloud()) return sampleVolume(mesh, 1.0);  // throws the point-cloud error
  const double volume = enclosedVolume(mesh);
  if (!(volume > 0)) {
    throw InputError("volume sampling: the mesh encloses no volume (is it closed?)");
  }
  double spacing = std::cbrt(volume / count);
  VolumeSampling best = sampleVolume(mesh, spacing);
  for (int refinement = 0; refinement < 6; ++refinement) {
    const auto found = static_cast<double>(best.positions.size() / 3);
    if (std::abs(found - count) <= 0.1 * count) break;
    spacing *= std::cbrt(std::max(found, 1.0) / count);
    VolumeSampling next = sampleVolume(mesh, spacing);
    const auto nextFound = static_cast<double>(next.positions.size() / 3);
    if (std::abs(nextFound - count) < std::abs(found - count)) best = std::move(next);
  }
  return best;
}

}  // namespace shellsim
