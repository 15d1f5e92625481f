// Points inside a closed triangle mesh (private to the library): the phyxels of a meshless
// volume (muller2004 section 3.2, "phyxels sampled from the object's volume").
//
// windingNumber is the generalized winding number (Jacobson et al. 2013): the sum over
// the triangles of their signed solid angles seen from the point, divided by 4 pi. It is 1
// inside a closed, outward-oriented mesh and 0 outside; on a mesh with small holes (the
// Stanford bunny's base) it degrades smoothly instead of flipping whole rays as a parity
// test does, so |w| > 1/2 is a robust inside test for meshes of either orientation; it
// costs a pass over the triangles per point, so sampleVolume counts signed crossings along
// lattice columns with a vote of the three axes, and the tests hold it to the winding number.
#pragma once

#include <cstdint>
#include <vector>

#include "core/vec3.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {

// Winding number of `mesh` around p: sum over triangles of Omega_t(p) / (4 pi), with the
// solid angle of triangle (a, b, c) from the van Oosterom-Strackee formula
//   tan(Omega / 2) = a.(b x c) / (|a||b||c| + (a.b)|c| + (b.c)|a| + (c.a)|b|),
// a, b, c the corners relative to p.
[[nodiscard]] double windingNumber(const Geometry& mesh, const Vec3& p);

// |sum over triangles of a.(b x c)| / 6: the volume a closed mesh encloses, m^3.
[[nodiscard]] double enclosedVolume(const Geometry& mesh);

struct VolumeSampling {
  std::vector<double> positions;  // lattice points inside, (nPoints, 3), m
  double spacing = 0;             // the cubic lattice's spacing, m
  std::vector<double> volumes;    // (nPoints), m^3, where each point stands for its own
};

// The points of a cubic lattice of spacing `spacing` that lie inside `mesh`: where the
// winding number of a ray along the lattice's column (its signed crossings) is not 0, in
// two of the three axis directions (on a closed mesh, the same as |winding| > 1/2, overlaps
// and inverted parts included; a small hole is outvoted):
// floor(extent / spacing) points along each axis, centred on the mesh's bounding box (a box
// with sides that are multiples of the spacing gets the centres of its cells), in
// lexicographic (z, y, x) order.
// Throws InputError for a point cloud or a non-positive spacing.
[[nodiscard]] VolumeSampling sampleVolume(const Geometry& mesh, double spacing);

// The same with the spacing chosen so that about `count` points lie inside (within 10 %
// where the mesh allows; a few refinements of (V / count)^(1/3)).
[[nodiscard]] VolumeSampling sampleVolumeByCount(const Geometry& mesh, int32_t count);

// A sheet of thickness t as `layers` (2 or 3) layers of points on its mid-surface `mesh`,
// vertex-major, (nVertices, layers, 3): vertex v's point l at X_v + zeta_l t / 2 n_v, n_v
// the area-weighted normal, standing for the volume A_v t w_l / 2 (A_v a third of the areas
// of v's triangles), zeta and w the Gauss-Legendre points and weights on [-1, 1] (2:
// +-1/sqrt 3, 1 and 1; 3: 0, +-sqrt(3/5), 8/9 and 5/9). They integrate a density quadratic
// across the sheet (the bending energy's) exactly: two layers at the faces +-t/2 would give
// 3 times the bending stiffness (specs/muller2004.md B8). spacing: unused (0).
// Throws InputError for a point cloud, a thickness that is not positive, a layer count other
// than 2 or 3, or a vertex without area or normal (naming it).
[[nodiscard]] VolumeSampling sampleSheetLayers(const Geometry& mesh, double thickness,
                                               int32_t layers);

}  // namespace shellsim
