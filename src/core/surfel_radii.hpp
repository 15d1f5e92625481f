// Disc radii for the points of a point cloud (surfels): frames write them (a vertex property
// `radius`) and the renderer draws discs of them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace shellsim {

// Neighbours per point for surfel radii and normals: 6 is the ring of a regular
// triangulation and enough for a stable plane fit.
inline constexpr int kSurfelNeighbours = 6;
// Radius = factor x mean distance to those neighbours. On a square grid of spacing h the
// mean is ~1.14 h, so discs get ~0.9 h: they overlap and cover the holes between points.
inline constexpr double kSurfelRadiusFactor = 0.8;

// The k nearest neighbours of every point (itself excluded), (nPoints, k); with fewer than
// k other points the last one found repeats. positions (nPoints, 3).
[[nodiscard]] std::vector<uint32_t> nearestNeighbours(std::span<const double> positions, int k);

// Radii (nPoints), m, from neighbour lists `nbrs` (nPoints, k): kSurfelRadiusFactor times the
// mean distance to them (a lone point: 1 cm).
void radiiFromNeighbours(std::span<const double> positions, std::span<const uint32_t> nbrs, int k,
                         std::vector<float>& radii);

// Both: the radii of a cloud's surfels, (nPoints), m.
[[nodiscard]] std::vector<float> surfelRadii(std::span<const double> positions);

}  // namespace shellsim
