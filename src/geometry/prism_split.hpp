// A shell element's prism (triangle t = (c0, c1, c2) of S and its copy t' on S') split into
// three tetrahedra by the smallest-index rule (Dompierre et al.): with the corners sorted by
// node number v0 < v1 < v2, the tets (v0 v1 v2 v0'), (v1 v2 v0' v1'), (v2 v0' v1' v2'). The
// side quad of an edge (a < b) is then cut along b a' in both prisms that share it, so
// neighbouring prisms fit. Used by thick-shell generation (inversion check) and the
// thick-shell model (volume terms).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace shellsim {

struct PrismSplit {
  // Local corners of each tet: 0..2 the triangle's corners in its own order, 3..5 their
  // copies on S'.
  std::array<std::array<int, 4>, 3> tets;
  // +1 when the sorted order is a cyclic turn of the triangle's, -1 otherwise: for an inward
  // extrusion of a counter-clockwise triangle every tet's orient3d has the sign -parity.
  int parity;
};

[[nodiscard]] inline PrismSplit prismSplit(const std::array<int32_t, 3>& nodes) {
  std::array<int, 3> order{0, 1, 2};
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return nodes[static_cast<size_t>(a)] < nodes[static_cast<size_t>(b)];
  });
  const int v0 = order[0], v1 = order[1], v2 = order[2];
  return {{{{v0, v1, v2, v0 + 3}, {v1, v2, v0 + 3, v1 + 3}, {v2, v0 + 3, v1 + 3, v2 + 3}}},
          order[1] == (order[0] + 1) % 3 ? 1 : -1};
}

}  // namespace shellsim
