// Built-in primitive meshes and the body transform (private to the library).
#pragma once

#include "shellsim/geometry.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// A triangle mesh of the primitive with unit vertex normals, triangles counter-clockwise
// seen from outside (sheet: seen from +z). Shapes, all centred at the origin:
//   sheet       size[0] x size[1] in the xy plane, normal +z; `resolution` cells along
//               the longer side, square-ish cells, diagonals alternating as a checkerboard
//   sphere      closed geodesic icosphere of `radius`: each icosahedron face split into
//               f^2 triangles, f = max(1, round(resolution / 5)), projected on the sphere;
//               about `resolution` edges around the equator, no poles, no slivers
//   hemisphere  dome z >= 0 of `radius`, open at z = 0: the four upper faces of an
//               octahedron split the same way, f = max(1, round(resolution / 4)), so its
//               rim is exactly on z = 0 with 4 f edges
//   cylinder    `radius`, `height` along z, open ends; `resolution` cells along the longer
//               of circumference and height, square-ish cells, alternating diagonals
//   box         size[0] x size[1] x size[2], closed; `resolution` cells along the longest
//               side, square-ish cells on every face; area-weighted vertex normals
// Closed shapes have no boundary edge, no non-manifold edge, one component and no
// duplicated vertex. Throws InputError for non-finite or non-positive sizes and a
// resolution outside [1, 2048].
[[nodiscard]] Geometry makePrimitive(const PrimitiveDef& primitive);

// An equilateral triangular lattice of rows x cols points of spacing `spacing` in z = 0
// (odd rows shifted by half a spacing), triangles counter-clockwise seen from +z: the
// regular mesh that tests and benchmarks use where the sheet primitive's right triangles
// would bias a result. No normals.
[[nodiscard]] Geometry makeEquilateralLattice(int rows, int cols, double spacing);

// Applies scale, then the rotation Rz * Ry * Rx (degrees, x first), then translation to
// the positions; normals are mapped by the inverse transpose (R S^-1) and renormalised.
// A transform with an odd number of negative scale factors mirrors the mesh, so the
// triangles' winding is reversed to keep them counter-clockwise seen from outside.
// Throws InputError for a zero or non-finite scale or a non-finite rotation/translation.
void applyTransform(Geometry& geometry, const TransformDef& transform);

}  // namespace shellsim
