// Fracture of a thick shell (steinemann section 4.2, after Müller and Gross 2004,
// "Interactive virtual materials"): a spring of S stretched past (1 + tau+) (or squeezed
// past (1 - tau-)) of its rest length splits one of its ends v along the plane through v
// normal to the spring. The triangles at v fall on the two sides of the plane by their
// centroids; the sides of v's triangles that lie between the two sides crack (they carry no
// spring from then on, and their far ends become crack tips), and every fan of triangles
// around a node that no uncracked side joins gets a node of its own: the plane's side
// keeps v or gets a copy, and a crack that reaches the boundary or another crack cuts its
// tip loose too, so no piece hangs by one node (the notes' bow-tie rule, A8 step 7).
//
// Choices the paper leaves open [ours]:
//   - the end to split: the crack tip when exactly one end is one, else a seeded coin;
//   - a spring whose both ends see all their triangles on one side cracks itself (its
//     sides), which opens the mesh where the edge lies on the boundary or a crack;
//   - coarse mode (section 4.2.2): once a node splits, it and its neighbours that are not
//     crack tips start no new crack; cracks then grow from their tips only; and at most one
//     new crack starts per step (an evenly loaded part otherwise starts many at once);
//   - material that is not quite even (scatter): each spring's thresholds scaled by a seeded
//     factor fixed by its rest position, so a strip pulled evenly breaks at its weakest spring;
//   - at most maxSplits splits per step, the most strained springs first; in coarse mode
//     those at crack tips before any other (a crack grows before a new one starts).
//   - local re-meshing (section 4.2.3, Fig. 5; the idea of O'Brien and Hodgins 1999): the
//     limits on the cut (remeshMinFraction, remeshMinAngle) hold at rest and in the current
//     shape, and the new springs must start within the thresholds; an extended crack keeps
//     the first split's plane, so a tip that missed it steers back.
// Two layers: the pass splits S as above (only the springs of S start cracks, "the length of
// a spring s on the shell surface must exceed some threshold"), with S' set aside; every node
// of S it makes gets its S' node, blended from the S' nodes of its sources with the same
// weights ("a new shell-vertex pair", A8 step 4), and the springs, areas and tets are rebuilt
// from the triangles: a cracked side loses its springs on S and S' and its cross springs
// until the crack opens there (sidesWithSprings), and each prism keeps its tets on the nodes
// its corners now have.
// Masses follow the triangles (each prism's mass to its corners), so a split conserves mass
// and, with the copies moving as their parent, momentum exactly. A node made on a side
// (re-meshing) blends its ends, p = (1 - tau) a + tau b in position, rest position, depth
// and velocity, and takes mass from them only: momentum stays exact, the kinetic energy
// falls, and the angular momentum changes by -tau (1 - tau) m/3 (x_b - x_a) x (v_b - v_a)
// (m the prism masses at the side): zero for a side in translation, of order m |e|^2 w for
// a spinning one (second order in the side's length e).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <tuple>

#include "core/union_find.hpp"
#include "models/thick_shell/thick_shell_model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A number in [-1, 1] fixed for the edge between rest positions p and q (either order) and
// the seed: the edge keeps it through splits (copies keep their parent's rest position).
double edgeScatter(const Vec3& p, const Vec3& q, uint64_t seed) {
  const Vec3& lo =
      std::lexicographical_compare(p.data(), p.data() + 3, q.data(), q.data() + 3) ? p : q;
  const Vec3& hi = &lo == &p ? q : p;
  uint64_t state = seed;
  for (const Vec3* v : {&lo, &hi}) {
    for (int k = 0; k < 3; ++k) {
      uint64_t bits = 0;
      const double value = (*v)[k];
      std::memcpy(&bits, &value, sizeof bits);
      state ^= bits;
      (void)splitmix64(state);
    }
  }
  return 2.0 * static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53 - 1.0;
}

}  // namespace

int32_t ThickShellModel::otherTriangleAt(int32_t v, int32_t w, int32_t t) const {
  for (const int32_t u : trianglesAt_[static_cast<size_t>(v)]) {
    if (u == t) continue;
    for (size_t k = 0; k < 3; ++k) {
      if (triangles_[3 * static_cast<size_t>(u) + k] == w) return u;
    }
  }
  return -1;
}

int32_t ThickShellModel::copyNode(int32_t v, std::vector<double>& x) {
  return blendNode(v, v, 0.0, x);
}

int32_t ThickShellModel::blendNode(int32_t a, int32_t b, double tau, std::vector<double>& x) {
  const auto sa = static_cast<size_t>(a), sb = static_cast<size_t>(b);
  const auto made = static_cast<int32_t>(rest_.size() / 3);
  // The old nodes (before the pass) behind a node, with their weights.
  const auto before = static_cast<int32_t>(passSources_.size());
  const auto sourcesOf = [&](int32_t v) {
    return v < made - before ? std::vector<std::pair<int32_t, double>>{{v, 1.0}}
                             : passSources_[static_cast<size_t>(v - (made - before))];
  };
  std::vector<std::pair<int32_t, double>> sources;
  if (a == b) {
    sources = sourcesOf(a);
  } else {
    for (auto [node, weight] : sourcesOf(a)) sources.emplace_back(node, (1 - tau) * weight);
    for (auto [node, weight] : sourcesOf(b)) {
      const auto same = std::find_if(sources.begin(), sources.end(),
                                     [node = node](const auto& s) { return s.first == node; });
      if (same != sources.end()) {
        same->second += tau * weight;
      } else {
        sources.emplace_back(node, tau * weight);
      }
    }
  }
  for (size_t k = 0; k < 3; ++k) {
    rest_.push_back((1 - tau) * rest_[3 * sa + k] + tau * rest_[3 * sb + k]);
    x.push_back((1 - tau) * x[3 * sa + k] + tau * x[3 * sb + k]);
  }
  depth_.push_back((1 - tau) * depth_[sa] + tau * depth_[sb]);
  crackTip_.push_back(0);
  mayStart_.push_back(std::min(mayStart_[sa], mayStart_[sb]));
  splitKey_.push_back(a == b ? splitKey_[sa] : made);
  trianglesAt_.emplace_back();
  passSources_.push_back(std::move(sources));
  return made;
}

int32_t ThickShellModel::addTriangle(const std::array<int32_t, 3>& corners,
                                     const std::array<uint8_t, 3>& cracked, double prismMass) {
  const auto t = static_cast<int32_t>(triangles_.size() / 3);
  for (size_t k = 0; k < 3; ++k) {
    triangles_.push_back(corners[k]);
    crackedSide_.push_back(cracked[k]);
    trianglesAt_[static_cast<size_t>(corners[k])].push_back(t);
  }
  prismMass_.push_back(prismMass);
  return t;
}

namespace {

// The angle at corner c of the triangle (c, p, q), radians.
double cornerAngle(const Vec3& c, const Vec3& p, const Vec3& q) {
  const Vec3 u = p - c, w = q - c;
  return std::atan2(u.cross(w).norm(), u.dot(w));
}

}  // namespace

bool ThickShellModel::cutTriangle(int32_t t, size_t corner, double tau, std::vector<double>& x) {
  // Triangle t = (v, a, b) in its order from `corner`; across (a, b) lies u = (b, a, c) in
  // its order (the shared side runs the other way). The cut at p = a + tau (b - a) makes
  // (v, a, p), (v, p, b) and (b, p, c), (p, a, c): the same orientation, no T-junction.
  const auto st = static_cast<size_t>(t);
  const int32_t v = triangles_[3 * st + corner];
  const int32_t a = triangles_[3 * st + (corner + 1) % 3];
  const int32_t b = triangles_[3 * st + (corner + 2) % 3];
  const size_t sideAB = 3 * st + (corner + 1) % 3, sideBV = 3 * st + (corner + 2) % 3;
  if (crackedSide_[sideAB] != 0) return false;
  const int32_t u = otherTriangleAt(a, b, t);
  int32_t c = -1;
  size_t cornerB = 0;
  if (u >= 0) {
    const auto su = static_cast<size_t>(u);
    for (size_t k = 0; k < 3; ++k) {
      if (triangles_[3 * su + k] == b) cornerB = k;
    }
    if (triangles_[3 * su + (cornerB + 1) % 3] != a) return false;  // not an oriented pair
    c = triangles_[3 * su + (cornerB + 2) % 3];
    if (c == v) return false;
  }
  // Shape quality: the angles the cut makes at v, at p and at c (those at a and b are the
  // triangles' own), at rest (the springs' rest lengths and the masses come from there) and
  // now ([ours]: a cut through a squashed triangle would make a spring squeezed far past
  // its rest length, whose sideways stiffness, k (L/l - 1), no step can follow).
  const double minAngle = fracture_->remeshMinAngle * std::numbers::pi / 180;
  // Where the new node p lies in `at` (rest_ or x).
  const auto pAt = [&](std::span<const double> at) {
    return Vec3((1 - tau) * row(at, static_cast<size_t>(a)) +
                tau * row(at, static_cast<size_t>(b)));
  };
  const auto wellShaped = [&](std::span<const double> at) {
    const Vec3 pv = row(at, static_cast<size_t>(v)), pa = row(at, static_cast<size_t>(a)),
               pb = row(at, static_cast<size_t>(b)), pp = pAt(at);
    double smallest = std::min({cornerAngle(pv, pa, pp), cornerAngle(pv, pp, pb),
                                cornerAngle(pp, pa, pv), cornerAngle(pp, pv, pb)});
    if (c >= 0) {
      const Vec3 pc = row(at, static_cast<size_t>(c));
      smallest = std::min({smallest, cornerAngle(pc, pa, pp), cornerAngle(pc, pp, pb),
                           cornerAngle(pp, pa, pc), cornerAngle(pp, pc, pb)});
    }
    return smallest >= minAngle;
  };
  if (!wellShaped(rest_) || !wellShaped(x)) return false;
  // The new springs, (v, p) and (p, c), start within the thresholds: not broken at birth.
  const double squeeze = std::max(fracture_->compress, fracture_->stretch);
  const auto unbroken = [&](int32_t end) {
    const auto se = static_cast<size_t>(end);
    const double rest = (row(rest_, se) - pAt(rest_)).norm();
    const double strain = ((row(x, se) - pAt(x)).norm() - rest) / rest;
    return strain <= fracture_->stretch && strain >= -squeeze;
  };
  if (!unbroken(v) || (c >= 0 && !unbroken(c))) return false;

  const int32_t p = blendNode(a, b, tau, x);
  // The corner that the cut moves to the new triangle no longer has the old one.
  const auto leaves = [this](int32_t node, int32_t triangle) {
    auto& at = trianglesAt_[static_cast<size_t>(node)];
    at.erase(std::remove(at.begin(), at.end(), triangle), at.end());
  };
  // (v, a, b) -> (v, a, p), keeping t, and (v, p, b); the prism masses split as the areas.
  const double massT = prismMass_[st];
  const uint8_t crackedBV = crackedSide_[sideBV];
  triangles_[3 * st + (corner + 2) % 3] = p;
  crackedSide_[sideBV] = 0;  // (p, v) lies inside the old triangle
  prismMass_[st] = tau * massT;
  trianglesAt_[static_cast<size_t>(p)].push_back(t);
  (void)addTriangle({v, p, b}, {0, 0, crackedBV}, massT - tau * massT);
  leaves(b, t);
  if (u >= 0) {
    // (b, a, c) -> (b, p, c), keeping u, and (p, a, c).
    const auto su = static_cast<size_t>(u);
    const double massU = prismMass_[su];
    const size_t sideAC = 3 * su + (cornerB + 1) % 3;
    const uint8_t crackedAC = crackedSide_[sideAC];
    triangles_[3 * su + (cornerB + 1) % 3] = p;
    crackedSide_[sideAC] = 0;  // (p, c) lies inside the old triangle
    prismMass_[su] = (1 - tau) * massU;
    trianglesAt_[static_cast<size_t>(p)].push_back(u);
    (void)addTriangle({p, a, c}, {0, crackedAC, 0}, massU - (1 - tau) * massU);
    leaves(a, u);
  }
  return true;
}

void ThickShellModel::remeshAt(int32_t v, const Vec3& planePoint, const Vec3& normal,
                               std::vector<double>& x) {
  const double margin = fracture_->remeshMinFraction;
  const std::vector<int32_t> fan = trianglesAt_[static_cast<size_t>(v)];
  for (const int32_t t : fan) {
    const auto st = static_cast<size_t>(t);
    size_t corner = 0;
    while (triangles_[3 * st + corner] != v) ++corner;
    const int32_t a = triangles_[3 * st + (corner + 1) % 3];
    const int32_t b = triangles_[3 * st + (corner + 2) % 3];
    const double sa = (row(x, static_cast<size_t>(a)) - planePoint).dot(normal);
    const double sb = (row(x, static_cast<size_t>(b)) - planePoint).dot(normal);
    if (!((sa > 0 && sb < 0) || (sa < 0 && sb > 0))) continue;
    const double tau = sa / (sa - sb);  // where the plane crosses (a, b)
    if (tau < margin || tau > 1 - margin) continue;
    (void)cutTriangle(t, corner, tau, x);
  }
}

void ThickShellModel::separateFans(int32_t v, std::vector<double>& x) {
  std::vector<int32_t> fan = trianglesAt_[static_cast<size_t>(v)];
  std::sort(fan.begin(), fan.end());
  if (fan.size() < 2) return;
  // Two triangles at v are one fan when they share an uncracked side (v, w).
  UnionFind joined(fan.size());
  for (size_t p = 0; p < fan.size(); ++p) {
    const auto tp = static_cast<size_t>(fan[p]);
    for (size_t k = 0; k < 3; ++k) {
      const int32_t a = triangles_[3 * tp + k], b = triangles_[3 * tp + (k + 1) % 3];
      if ((a != v && b != v) || crackedSide_[3 * tp + k] != 0) continue;
      const int32_t w = a == v ? b : a;
      const int32_t u = otherTriangleAt(v, w, fan[p]);
      if (u < 0) continue;
      const auto q = static_cast<size_t>(std::lower_bound(fan.begin(), fan.end(), u) - fan.begin());
      joined.unite(static_cast<int32_t>(p), static_cast<int32_t>(q));
    }
  }
  const std::vector<int32_t> label = joined.labels();
  const int32_t fans = *std::max_element(label.begin(), label.end()) + 1;
  if (fans < 2) return;
  // Fan 0 (the one with the smallest triangle) keeps v; fan l > 0 gets a copy.
  std::vector<int32_t> nodeOfFan(static_cast<size_t>(fans), v);
  for (int32_t l = 1; l < fans; ++l) nodeOfFan[static_cast<size_t>(l)] = copyNode(v, x);
  std::vector<int32_t> keep;
  for (size_t p = 0; p < fan.size(); ++p) {
    const int32_t node = nodeOfFan[static_cast<size_t>(label[p])];
    if (node == v) {
      keep.push_back(fan[p]);
      continue;
    }
    const auto t = static_cast<size_t>(fan[p]);
    for (size_t k = 0; k < 3; ++k) {
      if (triangles_[3 * t + k] == v) triangles_[3 * t + k] = node;
    }
    trianglesAt_[static_cast<size_t>(node)].push_back(fan[p]);
  }
  trianglesAt_[static_cast<size_t>(v)] = keep;
}

bool ThickShellModel::splitAt(int32_t v, const Vec3& normal, std::vector<double>& x,
                              std::vector<int32_t>* madeTips, const Vec3* planePoint) {
  const Vec3 origin = planePoint != nullptr ? *planePoint : row(x, static_cast<size_t>(v));
  if (fracture_->remesh) remeshAt(v, origin, normal, x);
  const std::vector<int32_t> fan = trianglesAt_[static_cast<size_t>(v)];
  const auto side = [&](int32_t t) {
    const auto st = static_cast<size_t>(t);
    const Vec3 centroid = (row(x, static_cast<size_t>(triangles_[3 * st])) +
                           row(x, static_cast<size_t>(triangles_[3 * st + 1])) +
                           row(x, static_cast<size_t>(triangles_[3 * st + 2]))) /
                          3.0;
    return (centroid - origin).dot(normal) > 0;  // ties go to the negative side
  };
  // Crack every side (v, w) between a triangle on one side of the plane and one on the other.
  std::vector<int32_t> tips;
  for (const int32_t t : fan) {
    const auto st = static_cast<size_t>(t);
    for (size_t k = 0; k < 3; ++k) {
      const int32_t a = triangles_[3 * st + k], b = triangles_[3 * st + (k + 1) % 3];
      if ((a != v && b != v) || crackedSide_[3 * st + k] != 0) continue;
      const int32_t w = a == v ? b : a;
      const int32_t u = otherTriangleAt(v, w, t);
      if (u < 0 || side(u) == side(t)) continue;
      crackedSide_[3 * st + k] = 1;
      const auto su = static_cast<size_t>(u);
      for (size_t j = 0; j < 3; ++j) {
        const int32_t c = triangles_[3 * su + j], d = triangles_[3 * su + (j + 1) % 3];
        if ((c == v && d == w) || (c == w && d == v)) crackedSide_[3 * su + j] = 1;
      }
      tips.push_back(w);
    }
  }
  if (tips.empty()) return false;
  const auto before = static_cast<int32_t>(rest_.size() / 3);
  separateFans(v, x);
  std::sort(tips.begin(), tips.end());
  tips.erase(std::unique(tips.begin(), tips.end()), tips.end());
  for (const int32_t w : tips) {
    // A tip whose fan the crack cut apart (it reached the boundary or another crack) is
    // where the crack ends, not a tip to grow from.
    const size_t nodes = rest_.size() / 3;
    separateFans(w, x);
    crackTip_[static_cast<size_t>(w)] = rest_.size() / 3 == nodes ? 1 : 0;
  }
  if (madeTips != nullptr) madeTips->insert(madeTips->end(), tips.begin(), tips.end());
  crackTip_[static_cast<size_t>(v)] = 0;
  for (auto made = static_cast<size_t>(before); made < rest_.size() / 3; ++made)
    crackTip_[made] = 0;
  if (fracture_->coarse) {
    // v, its copies and its neighbours that are not crack tips start no new crack.
    mayStart_[static_cast<size_t>(v)] = 0;
    for (auto made = static_cast<size_t>(before); made < rest_.size() / 3; ++made)
      mayStart_[made] = 0;
    for (const int32_t t : fan) {
      for (size_t k = 0; k < 3; ++k) {
        const int32_t w = triangles_[3 * static_cast<size_t>(t) + k];
        if (crackTip_[static_cast<size_t>(w)] == 0) mayStart_[static_cast<size_t>(w)] = 0;
      }
    }
  }
  return true;
}

void ThickShellModel::extendCrack(const Vec3& start, const Vec3& planePoint, const Vec3& normal,
                                  std::vector<int32_t> tips, std::vector<double>& x) {
  // Each tip within reach splits along the plane it inherited and hands on the tips it makes;
  // a tip is split once. Without re-meshing the plane passes through the tip (the crack
  // follows the mesh, bumpy rather than straight); with it, through the crack's first node,
  // so the cuts land on one plane (a tip that missed it by less than the re-meshing margin
  // steers back). With `bump` each new tip's plane is its parent's turned about the surface
  // normal there by a seeded angle within +-bump, through the tip: a crack that wanders.
  const double bump = fracture_->bump * std::numbers::pi / 180;
  struct Plane {
    Vec3 normal;
    Vec3 point;
  };
  const auto turned = [&](const Plane& parent, int32_t tip) {
    Vec3 axis = Vec3::Zero();
    for (const int32_t t : trianglesAt_[static_cast<size_t>(tip)]) {
      const auto st = static_cast<size_t>(t);
      const Vec3 a = row(x, static_cast<size_t>(triangles_[3 * st]));
      axis += (row(x, static_cast<size_t>(triangles_[3 * st + 1])) - a)
                  .cross(row(x, static_cast<size_t>(triangles_[3 * st + 2])) - a);
    }
    const double angle =
        bump * (2.0 * static_cast<double>(splitmix64(rng_) >> 11) * 0x1.0p-53 - 1.0);
    Plane plane{parent.normal, row(x, static_cast<size_t>(tip))};
    if (!(axis.norm() > 0)) return plane;
    axis.normalize();
    const Vec3& n = parent.normal;
    plane.normal = n * std::cos(angle) + axis.cross(n) * std::sin(angle) +
                   axis * (axis.dot(n) * (1 - std::cos(angle)));  // Rodrigues
    return plane;
  };
  std::vector<Plane> planes;
  const auto inherit = [&](const Plane& parent) {
    while (planes.size() < tips.size()) {
      planes.push_back(bump > 0 ? turned(parent, tips[planes.size()]) : parent);
    }
  };
  inherit({normal, planePoint});
  std::vector<int32_t> done;
  const auto limit = static_cast<size_t>(4 * (triangles_.size() / 3) + 16);  // a safe bound
  for (size_t k = 0; k < tips.size() && k < limit; ++k) {
    const int32_t w = tips[k];
    if (std::find(done.begin(), done.end(), w) != done.end()) continue;
    done.push_back(w);
    const Vec3 offset = row(x, static_cast<size_t>(w)) - start;
    const double along = (offset - offset.dot(normal) * normal).norm();
    if (along >= fracture_->extension) continue;
    const Plane plane = planes[k];
    const bool throughPoint = fracture_->remesh || bump > 0;
    (void)splitAt(w, plane.normal, x, &tips, throughPoint ? &plane.point : nullptr);
    inherit(plane);
  }
}

InelasticReport ThickShellModel::updateInelastic(std::span<const double> x, double dt,
                                                 ModelWorkspace* workspace) {
  (void)dt;
  (void)workspace;
  InelasticReport report;
  if (!fracture_) return report;
  const ThickShellFractureDef& f = *fracture_;
  // Candidates: the most strained springs first (ties by nodes: deterministic); in coarse
  // mode those at crack tips before any other.
  std::vector<std::tuple<int, double, int32_t, int32_t>> candidates;
  for (size_t s = 0; s < springRest_.size(); ++s) {
    const int32_t a = springNodes_[2 * s], b = springNodes_[2 * s + 1];
    if (a >= vertexCount_ || b >= vertexCount_) continue;  // not on S
    const double strain =
        ((row(x, static_cast<size_t>(b)) - row(x, static_cast<size_t>(a))).norm() -
         springRest_[s]) /
        springRest_[s];
    const double strength =
        f.scatter > 0 ? 1 + f.scatter * edgeScatter(row(rest_, static_cast<size_t>(a)),
                                                    row(rest_, static_cast<size_t>(b)), f.seed)
                      : 1.0;
    const bool breaks =
        strain > f.stretch * strength || (f.compress > 0 && strain < -f.compress * strength);
    if (!breaks) continue;
    const bool tip =
        crackTip_[static_cast<size_t>(a)] != 0 || crackTip_[static_cast<size_t>(b)] != 0;
    const bool allowed =
        mayStart_[static_cast<size_t>(a)] != 0 && mayStart_[static_cast<size_t>(b)] != 0;
    if (f.coarse && !tip && !allowed) continue;
    candidates.emplace_back(f.coarse && tip ? 0 : 1, -std::abs(strain), a, b);
  }
  if (candidates.empty()) return report;
  std::sort(candidates.begin(), candidates.end());

  // The pass works on a copy of the positions of S that grows with the new nodes; with two
  // layers the rest positions of S' are set aside until it ends.
  const int32_t nodesBefore = vertexCount_;
  const auto rowsOfS = 3 * static_cast<size_t>(nodesBefore);
  std::vector<double> xs(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(rowsOfS));
  const std::vector<double> innerRest(rest_.begin() + static_cast<std::ptrdiff_t>(rowsOfS),
                                      rest_.end());
  rest_.resize(rowsOfS);
  trianglesAt_.assign(static_cast<size_t>(nodesBefore), {});
  for (size_t t = 0; t < triangles_.size() / 3; ++t) {
    for (size_t k = 0; k < 3; ++k)
      trianglesAt_[static_cast<size_t>(triangles_[3 * t + k])].push_back(static_cast<int32_t>(t));
  }
  passSources_.clear();
  const auto trianglesBefore = static_cast<int64_t>(triangles_.size() / 3);
  int64_t splits = 0;
  bool startedThisPass = false;
  for (const auto& [order, negativeStrain, a, b] : candidates) {
    if (splits >= f.maxSplits) break;
    // Still an edge (an earlier split this pass may have moved it to a copy)?
    if (otherTriangleAt(a, b, -1) < 0) continue;
    const bool tipA = crackTip_[static_cast<size_t>(a)] != 0,
               tipB = crackTip_[static_cast<size_t>(b)] != 0;
    // Coarse: one new crack per step at most, and a split earlier in this pass may have taken
    // the right to start here.
    const bool start = !tipA && !tipB;
    if (f.coarse && start &&
        (startedThisPass || mayStart_[static_cast<size_t>(a)] == 0 ||
         mayStart_[static_cast<size_t>(b)] == 0)) {
      continue;
    }
    int32_t v = a;
    if (tipA != tipB) {
      v = tipA ? a : b;
    } else if ((splitmix64(rng_) & 1U) != 0) {
      v = b;
    }
    const int32_t other = v == a ? b : a;
    const Vec3 direction = row(xs, static_cast<size_t>(other)) - row(xs, static_cast<size_t>(v));
    if (!(direction.norm() > 0)) continue;
    const Vec3 normal = direction.normalized();
    std::vector<int32_t> tips;
    const Vec3 middle = 0.5 * (row(xs, static_cast<size_t>(a)) + row(xs, static_cast<size_t>(b)));
    const Vec3 atV = row(xs, static_cast<size_t>(v)), atOther = row(xs, static_cast<size_t>(other));
    const bool splitV = splitAt(v, normal, xs, &tips);
    if (splitV || splitAt(other, -normal, xs, &tips)) {
      ++splits;
      startedThisPass = startedThisPass || start;
      if (f.extension > 0) extendCrack(middle, splitV ? atV : atOther, normal, tips, xs);
      continue;
    }
    // Neither end sees the plane cut its triangles: the spring's own sides crack. (With two
    // layers a crack's opened face keeps its springs, and one of them stretched on a piece
    // too small to split cracks nothing more: not counted.)
    bool cracked = false;
    for (const int32_t t : trianglesAt_[static_cast<size_t>(a)]) {
      const auto st = static_cast<size_t>(t);
      for (size_t k = 0; k < 3; ++k) {
        const int32_t c = triangles_[3 * st + k], d = triangles_[3 * st + (k + 1) % 3];
        if (((c == a && d == b) || (c == b && d == a)) && crackedSide_[3 * st + k] == 0) {
          crackedSide_[3 * st + k] = 1;
          cracked = true;
        }
      }
    }
    if (!cracked) continue;
    separateFans(a, xs);
    separateFans(b, xs);
    ++splits;
  }
  trianglesAt_.clear();
  const auto nodesAfter = static_cast<int32_t>(rest_.size() / 3);
  // S' at rest: the old nodes', then each new node's blended from its sources'.
  rest_.insert(rest_.end(), innerRest.begin(), innerRest.end());
  if (layers_ == 2) {
    for (const auto& sources : passSources_) {
      Vec3 inner = Vec3::Zero();
      for (const auto& [node, weight] : sources)
        inner += weight * row(innerRest, static_cast<size_t>(node));
      rest_.insert(rest_.end(), {inner.x(), inner.y(), inner.z()});
    }
  }
  if (splits == 0) return report;
  report.brokenElements = splits;
  report.edit.elementsAdded = static_cast<int64_t>(triangles_.size() / 3) - trianglesBefore;
  if (nodesAfter > nodesBefore) {
    // Node i of layer l (l n + i, n the layer's node count) comes from the same nodes of
    // layer l before the pass.
    TopologyEdit& edit = report.edit;
    edit.sourceOffsets.reserve(static_cast<size_t>(layers_ * nodesAfter) + 1);
    edit.sourceOffsets.push_back(0);
    for (int32_t layer = 0; layer < layers_; ++layer) {
      const int32_t offset = layer * nodesBefore;
      for (int32_t i = 0; i < nodesAfter; ++i) {
        if (i < nodesBefore) {
          edit.sourceNodes.push_back(offset + i);
          edit.sourceWeights.push_back(1.0);
        } else {
          for (const auto& [node, weight] : passSources_[static_cast<size_t>(i - nodesBefore)]) {
            edit.sourceNodes.push_back(offset + node);
            edit.sourceWeights.push_back(weight);
          }
        }
        edit.sourceOffsets.push_back(static_cast<int32_t>(edit.sourceNodes.size()));
      }
    }
  }
  passSources_.clear();
  rebuild();
  followStableStep();
  ++topologyVersion_;
  return report;
}

std::vector<int32_t> ThickShellModel::nodePieces() const {
  if (!fracture_) return {};
  // S' node n + i is in vertex i's piece.
  std::vector<int32_t> pieces = surfacePieces();
  if (layers_ == 2) pieces.insert(pieces.end(), surfacePieces().begin(), surfacePieces().end());
  return pieces;
}

bool ThickShellModel::nodeSolidExtents(std::span<double> below, std::span<double> above) const {
  std::fill(below.begin(), below.end(), 0.0);
  std::fill(above.begin(), above.end(), 0.0);
  std::copy(depth_.begin(), depth_.end(), below.begin());
  return true;
}

void ThickShellModel::listStateFields(StateFields& fields) {
  if (!fracture_) return;
  fields.add("rest_positions", &rest_, StateShape::kPerNode, 3);
  // Per vertex of S: per node with one layer, half of them with two (checked on assignment).
  const StateShape perVertex = layers_ == 1 ? StateShape::kPerNode : StateShape::kFree;
  fields.add("depth", &depth_, perVertex);
  fields.add("crack_tip", &crackTip_, perVertex);
  fields.add("may_start", &mayStart_, perVertex);
  fields.add("split_key", &splitKey_, perVertex);
  fields.add("triangles", &triangles_, StateShape::kPerElement, 3);
  fields.add("cracked_sides", &crackedSide_, StateShape::kPerElement, 3);
  fields.add("prism_mass", &prismMass_, StateShape::kPerElement);
  fields.add("rng", &rng_);
  fields.add("stable_step", &stableStepState_);
}

void ThickShellModel::stateAssigned() {
  if (!fracture_) return;
  const auto n = static_cast<int64_t>(rest_.size() / 3) / layers_;
  if (static_cast<int64_t>(rest_.size()) != 3 * layers_ * n || std::ssize(depth_) != n ||
      std::ssize(crackTip_) != n || std::ssize(mayStart_) != n || std::ssize(splitKey_) != n) {
    throw InputError("thick_shell: the state's per-node arrays disagree in length");
  }
  for (const int32_t v : triangles_) {
    if (v < 0 || v >= n)
      throw InputError("thick_shell: a triangle of the state names a node out of range");
  }
  if (!std::all_of(rest_.begin(), rest_.end(), [](double v) { return std::isfinite(v); }) ||
      !std::all_of(prismMass_.begin(), prismMass_.end(),
                   [](double m) { return m > 0 && std::isfinite(m); })) {
    throw InputError("thick_shell: a rest position or prism mass of the state is not finite");
  }
  rebuild();
  if (stableStepState_.size() != 3 || !std::all_of(stableStepState_.begin(), stableStepState_.end(),
                                                   [](double v) { return v > 0; })) {
    throw InputError("thick_shell: the state's stable step is not three positive numbers");
  }
  stableStep_ = stableStepState_[0];
  ++topologyVersion_;
}

}  // namespace shellsim
