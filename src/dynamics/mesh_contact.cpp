#include "dynamics/mesh_contact.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/predicates.hpp"
#include "core/proximity.hpp"
#include "dynamics/world.hpp"
#include "shellsim/world.hpp"

namespace shellsim {

namespace {

Vec3 nodeAt(std::span<const double> x, int32_t node) {
  return row(x, static_cast<size_t>(node));
}

int64_t key(int32_t body, int32_t node) {
  return (static_cast<int64_t>(body) << 32) | static_cast<uint32_t>(node);
}

uint64_t pairKey(int32_t first, int32_t second) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(first)) << 32) |
         static_cast<uint32_t>(second);
}

bool sharesNode(std::span<const int32_t> a, std::span<const int32_t> b) {
  return std::any_of(a.begin(), a.end(),
                     [&](int32_t u) { return std::find(b.begin(), b.end(), u) != b.end(); });
}

// Boxes (n, 6) of the n = nodes.size() / corners primitives of `corners` nodes each (node
// lists `nodes`) at positions x, each grown by `inflate` (m) on every side.
void primitiveBoxes(std::span<const double> x, std::span<const int32_t> nodes, size_t corners,
                    double inflate, std::vector<double>& boxes) {
  const size_t count = nodes.size() / corners;
  boxes.resize(6 * count);
  for (size_t i = 0; i < count; ++i) {
    Vec3 lo = nodeAt(x, nodes[corners * i]), hi = lo;
    for (size_t k = 1; k < corners; ++k) {
      const Vec3 p = nodeAt(x, nodes[corners * i + k]);
      lo = lo.cwiseMin(p);
      hi = hi.cwiseMax(p);
    }
    for (int k = 0; k < 3; ++k) {
      boxes[6 * i + static_cast<size_t>(k)] = lo[k] - inflate;
      boxes[6 * i + 3 + static_cast<size_t>(k)] = hi[k] + inflate;
    }
  }
}

}  // namespace

MeshContact::MeshContact(const ContactDef& def, double stableStep)
    : def_(def), stableStepSquared_(stableStep * stableStep) {}

double MeshContact::touching(const Body& a, const Body& b) const {
  return def_.thickness > 0 ? def_.thickness : 0.5 * (a.thickness + b.thickness);
}

double MeshContact::obstacleClearance(const Body& body) const {
  return 0.5 * (def_.thickness > 0 ? def_.thickness : body.thickness);
}

double MeshContact::widestTouching(std::span<const Body> bodies) const {
  double widest = def_.thickness;
  for (const Body& body : bodies) widest = std::max(widest, body.thickness);
  return widest;
}

bool MeshContact::stale(const BodyMesh& mesh, const Body& body) {
  return !mesh.valid || mesh.topology != body.model->topologyVersion() ||
         mesh.nodeCount != body.nodeCount() ||
         mesh.triangles.size() != body.model->contactMesh().triangles.size();
}

bool MeshContact::closeAtRest(const Body& body, std::span<const int32_t> a,
                              std::span<const int32_t> b, double reach, double bound) {
  if (sharesNode(a, b)) return true;
  const std::span<const double> rest = body.model->contactMesh().restPositions;
  if (rest.size() != 3 * static_cast<size_t>(body.nodeCount())) return false;
  // Every point of a primitive lies within its longest edge of one of its nodes, so nodes
  // farther apart than reach + bound leave the primitives farther apart than reach.
  double nearest = std::numeric_limits<double>::infinity();
  for (const int32_t u : a) {
    for (const int32_t w : b) {
      nearest = std::min(nearest, (nodeAt(rest, u) - nodeAt(rest, w)).squaredNorm());
    }
  }
  if (nearest >= (reach + bound) * (reach + bound)) return false;
  const auto at = [&](int32_t node) { return nodeAt(rest, node); };
  const auto pointTriangle = [&](int32_t p, std::span<const int32_t> t) {
    const TrianglePoint c = closestOnTriangle(at(p), at(t[0]), at(t[1]), at(t[2]));
    return (at(p) - (c.w[0] * at(t[0]) + c.w[1] * at(t[1]) + c.w[2] * at(t[2]))).squaredNorm();
  };
  const auto segments = [&](int32_t p0, int32_t p1, int32_t q0, int32_t q1) {
    const SegmentPoints st = closestBetweenSegments(at(p0), at(p1), at(q0), at(q1));
    return ((at(p0) + st.s * (at(p1) - at(p0))) - (at(q0) + st.t * (at(q1) - at(q0))))
        .squaredNorm();
  };
  double squared = 0;
  if (a.size() == 1 && b.size() == 3) {
    squared = pointTriangle(a[0], b);
  } else if (a.size() == 2 && b.size() == 2) {
    squared = segments(a[0], a[1], b[0], b[1]);
  } else if (a.size() == 3 && b.size() == 3) {
    if (trianglesIntersect(at(a[0]), at(a[1]), at(a[2]), at(b[0]), at(b[1]), at(b[2]))) return true;
    squared = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < 3; ++k) {
      squared = std::min({squared, pointTriangle(a[k], b), pointTriangle(b[k], a)});
      for (size_t l = 0; l < 3; ++l) {
        squared = std::min(squared, segments(a[k], a[(k + 1) % 3], b[l], b[(l + 1) % 3]));
      }
    }
  } else {
    return nearest < reach * reach;  // not a primitive pair of this file: nodes only
  }
  return squared < reach * reach;
}

void MeshContact::findCloseAtRest(const Body& body, BodyMesh& mesh, double reach) {
  mesh.closeReach = reach;
  mesh.closeVertexFaces.clear();
  mesh.closeEdgePairs.clear();
  mesh.closeTrianglePairs.clear();
  const std::span<const double> rest = body.model->contactMesh().restPositions;
  if (rest.size() != 3 * static_cast<size_t>(body.nodeCount())) return;
  // Primitives closer than reach have boxes closer than reach: grown by half of it (and a
  // hair, so that rounding cannot lose a pair), their boxes overlap.
  const double inflate = 0.5 * reach * (1 + 1e-6);
  std::vector<double> boxes;
  AabbTree faces, points, edges;
  primitiveBoxes(rest, mesh.triangles, 3, inflate, boxes);
  faces.build(boxes);
  primitiveBoxes(rest, mesh.vertices, 1, inflate, boxes);
  points.build(boxes);
  primitiveBoxes(rest, mesh.edges, 2, inflate, boxes);
  edges.build(boxes);
  const auto triangle = [&](int32_t t) {
    return std::span<const int32_t>(&mesh.triangles[3 * static_cast<size_t>(t)], 3);
  };
  const auto edge = [&](int32_t e) {
    return std::span<const int32_t>(&mesh.edges[2 * static_cast<size_t>(e)], 2);
  };
  // The pairs whose boxes overlap, then the exact test on each in parallel (a flag per
  // pair, so the lists do not depend on the thread count), kept in ascending order.
  const auto first = [](uint64_t pair) { return static_cast<int32_t>(pair >> 32); };
  const auto second = [](uint64_t pair) { return static_cast<int32_t>(pair & 0xffffffffU); };
  const auto keepClose = [&](std::vector<uint64_t>& pairs, const auto& close) {
    std::vector<uint8_t> kept(pairs.size());
    tbb::parallel_for(tbb::blocked_range<size_t>(0, pairs.size(), 256),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i < r.end(); ++i) {
                          kept[i] = close(first(pairs[i]), second(pairs[i])) ? 1 : 0;
                        }
                      });
    size_t count = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (kept[i] != 0) pairs[count++] = pairs[i];
    }
    pairs.resize(count);
    std::sort(pairs.begin(), pairs.end());
  };
  points.forEachPairWith(faces, [&](int32_t v, int32_t t) {
    const int32_t node = mesh.vertices[static_cast<size_t>(v)];
    if (!sharesNode({&node, 1}, triangle(t))) mesh.closeVertexFaces.push_back(pairKey(node, t));
  });
  keepClose(mesh.closeVertexFaces, [&](int32_t node, int32_t t) {
    return closeAtRest(body, {&node, 1}, triangle(t), reach, mesh.restEdge[static_cast<size_t>(t)]);
  });
  edges.forEachSelfPair([&](int32_t ea, int32_t eb) {
    if (!sharesNode(edge(ea), edge(eb))) mesh.closeEdgePairs.push_back(pairKey(ea, eb));
  });
  keepClose(mesh.closeEdgePairs, [&](int32_t ea, int32_t eb) {
    return closeAtRest(body, edge(ea), edge(eb), reach,
                       mesh.edgeRestLength[static_cast<size_t>(ea)] +
                           mesh.edgeRestLength[static_cast<size_t>(eb)]);
  });
  faces.forEachSelfPair([&](int32_t ta, int32_t tb) {
    if (!sharesNode(triangle(ta), triangle(tb))) mesh.closeTrianglePairs.push_back(pairKey(ta, tb));
  });
  keepClose(mesh.closeTrianglePairs, [&](int32_t ta, int32_t tb) {
    return closeAtRest(
        body, triangle(ta), triangle(tb), reach,
        mesh.restEdge[static_cast<size_t>(ta)] + mesh.restEdge[static_cast<size_t>(tb)]);
  });
}

void MeshContact::update(const Body& body, size_t index, double search) {
  if (meshes_.size() <= index) meshes_.resize(index + 1);
  BodyMesh& mesh = meshes_[index];
  const Model::ContactMesh source = body.model->contactMesh();
  const bool rebuild = stale(mesh, body);
  const size_t nTriangles = source.triangles.size() / 3;
  if (rebuild) {
    candidatesValid_ = false;  // the list holds this mesh's old triangle and edge indices
    mesh.closeReach = -1;
    mesh.valid = true;
    mesh.topology = body.model->topologyVersion();
    mesh.nodeCount = body.nodeCount();
    mesh.triangles.assign(source.triangles.begin(), source.triangles.end());
    mesh.vertices = mesh.triangles;
    std::sort(mesh.vertices.begin(), mesh.vertices.end());
    mesh.vertices.erase(std::unique(mesh.vertices.begin(), mesh.vertices.end()),
                        mesh.vertices.end());
    // Unique edges, numbered in order of their sorted node pairs.
    std::vector<std::tuple<int32_t, int32_t, int32_t>> halfEdges;  // (lo, hi, 3 t + k)
    halfEdges.reserve(3 * nTriangles);
    for (size_t t = 0; t < nTriangles; ++t) {
      for (size_t k = 0; k < 3; ++k) {
        const int32_t u = mesh.triangles[3 * t + (k + 1) % 3];
        const int32_t v = mesh.triangles[3 * t + (k + 2) % 3];
        halfEdges.emplace_back(std::min(u, v), std::max(u, v), static_cast<int32_t>(3 * t + k));
      }
    }
    std::sort(halfEdges.begin(), halfEdges.end());
    mesh.edges.clear();
    mesh.triangleEdges.assign(3 * nTriangles, -1);
    for (size_t h = 0; h < halfEdges.size(); ++h) {
      const auto [u, v, slot] = halfEdges[h];
      if (h == 0 || std::get<0>(halfEdges[h - 1]) != u || std::get<1>(halfEdges[h - 1]) != v) {
        mesh.edges.push_back(u);
        mesh.edges.push_back(v);
      }
      mesh.triangleEdges[static_cast<size_t>(slot)] =
          static_cast<int32_t>(mesh.edges.size() / 2 - 1);
    }
    mesh.edgeFaces =
        buildIncidence(mesh.triangleEdges, static_cast<int32_t>(mesh.edges.size() / 2));
    const std::span<const double> rest = source.restPositions;
    const bool haveRest = rest.size() == 3 * static_cast<size_t>(body.nodeCount());
    mesh.edgeRestLength.assign(mesh.edges.size() / 2, 0.0);
    if (haveRest) {
      for (size_t e = 0; e < mesh.edgeRestLength.size(); ++e) {
        mesh.edgeRestLength[e] =
            (nodeAt(rest, mesh.edges[2 * e]) - nodeAt(rest, mesh.edges[2 * e + 1])).norm();
      }
    }
    mesh.restEdge.assign(nTriangles, 0.0);
    for (size_t t = 0; t < nTriangles; ++t) {
      for (size_t k = 0; k < 3; ++k) {
        const auto e = static_cast<size_t>(mesh.triangleEdges[3 * t + k]);
        mesh.restEdge[t] = std::max(mesh.restEdge[t], mesh.edgeRestLength[e]);
      }
    }
  }
  const std::span<const double> x = body.positions;
  const auto refresh = [&](AabbTree& tree, std::span<const int32_t> nodes, size_t corners,
                           double inflate) {
    primitiveBoxes(x, nodes, corners, inflate, mesh.boxes);
    const size_t count = nodes.size() / corners;
    if (rebuild || tree.size() != static_cast<int32_t>(count)) {
      tree.build(mesh.boxes);
    } else {
      tree.refit(mesh.boxes);
    }
  };
  refresh(mesh.faces, mesh.triangles, 3, 0.5 * search);
  refresh(mesh.points, mesh.vertices, 1, 0.5 * search);
  refresh(mesh.edgeBoxes, mesh.edges, 2, 0.5 * search);
}

bool MeshContact::refreshCandidates(std::span<const Body> bodies, double reach) {
  // Still valid when no body changed its topology and every node moved less than half the
  // skin the list was built with beyond what `reach` needs: a primitive pair now within
  // reach was within builtReach_ then.
  bool valid = candidatesValid_ && builtPositions_.size() == bodies.size();
  double moved = 0;
  for (size_t b = 0; valid && b < bodies.size(); ++b) {
    const Body& body = bodies[b];
    const bool colliding = !body.model->contactMesh().triangles.empty();
    if (!colliding) continue;
    if (b >= meshes_.size() || stale(meshes_[b], body) ||
        builtPositions_[b].size() != body.positions.size()) {
      valid = false;
      break;
    }
    for (size_t k = 0; k < body.positions.size(); k += 3) {
      const double dx = body.positions[k] - builtPositions_[b][k];
      const double dy = body.positions[k + 1] - builtPositions_[b][k + 1];
      const double dz = body.positions[k + 2] - builtPositions_[b][k + 2];
      moved = std::max(moved, dx * dx + dy * dy + dz * dz);
    }
  }
  if (valid && reach + 2 * std::sqrt(moved) <= builtReach_) return false;

  // Rebuild with a skin of one touching distance (measured on two stacked sheets: a skin
  // of half of it rebuilds too often, a quarter edge length keeps too many edge pairs).
  const double skin = widestTouching(bodies);
  builtReach_ = reach + skin;
  candidatesValid_ = true;
  builtPositions_.resize(bodies.size());
  vertexFaceCandidates_.clear();
  edgeEdgeCandidates_.clear();
  trianglePairCandidates_.clear();
  // Pairs of one body left out for good (until the topology changes): sharing a node, or
  // closer than twice the touching distance d in the rest shape. A fold brings two points of
  // a sheet within d of each other only with at least pi d / 2 of sheet between them (a U of
  // diameter d); pairs closer at rest meet only by squeezing the sheet within its plane, as
  // a fresh crack's cut vertices at d from a face of the other side did. Farther pairs
  // collide, the neighbours of a crease too (the exemption was once a whole rest edge wider:
  // a crushed can's creases then folded faces one ring apart through each other).
  const auto restReach = [&](const Body& body) { return 2 * touching(body, body); };
  std::vector<size_t> colliding;
  for (size_t b = 0; b < bodies.size(); ++b) {
    builtPositions_[b].assign(bodies[b].positions.begin(), bodies[b].positions.end());
    if (bodies[b].model->contactMesh().triangles.empty()) continue;
    update(bodies[b], b, builtReach_);
    if (meshes_[b].closeReach != restReach(bodies[b])) {
      findCloseAtRest(bodies[b], meshes_[b], restReach(bodies[b]));
    }
    colliding.push_back(b);
  }
  const auto leftOut = [](std::span<const int32_t> a, std::span<const int32_t> b,
                          const std::vector<uint64_t>& close, uint64_t pair) {
    return sharesNode(a, b) || std::binary_search(close.begin(), close.end(), pair);
  };
  const auto vertexFaceKept = [&](size_t b, int32_t v, int32_t t) {
    const BodyMesh& mesh = meshes_[b];
    const std::span<const int32_t> corners(&mesh.triangles[3 * static_cast<size_t>(t)], 3);
    return !leftOut({&v, 1}, corners, mesh.closeVertexFaces, pairKey(v, t));
  };
  // An edge pair is left out also when an end of one edge is left out against every face at
  // the other: its contact takes over from the end's contact with that edge (a closest point
  // leaving the end for the interior), and kept alone it would start at whatever distance
  // the end, unopposed, had come to: up to the full penalty 1/2 k delta^2 at once (a
  // fractured thick wall hit by a ball gained 12 kJ in one step that way). One face kept is
  // enough: its contact with the end covers the edge (closestOnTriangle finds the edge for an
  // end beyond it, on the other face's side too). Until 2026-12-03 one face left out was
  // enough to leave the pair out: the ends of a crack's one side, left out against the faces
  // they touched at rest on the other side, then passed their edges through that side's
  // next faces unopposed (a glass bulb's shards crossed at 4.7 ms, edge pair 0.12 mm apart
  // and closing, no contact between them).
  const auto endsLeftOut = [&](size_t b, std::span<const int32_t> ends, int32_t edge) {
    const BodyMesh& mesh = meshes_[b];
    const Incidence& faces = mesh.edgeFaces;
    const auto first = static_cast<size_t>(faces.offsets[static_cast<size_t>(edge)]);
    const auto last = static_cast<size_t>(faces.offsets[static_cast<size_t>(edge) + 1]);
    return std::any_of(ends.begin(), ends.end(), [&](int32_t end) {
      for (size_t f = first; f < last; ++f) {
        if (vertexFaceKept(b, end, faces.entries[f] / 3)) return false;
      }
      return true;
    });
  };
  const auto edgeEdgeKept = [&](size_t b, int32_t ea, int32_t eb) {
    const BodyMesh& mesh = meshes_[b];
    const std::span<const int32_t> p(&mesh.edges[2 * static_cast<size_t>(ea)], 2);
    const std::span<const int32_t> q(&mesh.edges[2 * static_cast<size_t>(eb)], 2);
    return !leftOut(p, q, mesh.closeEdgePairs, pairKey(std::min(ea, eb), std::max(ea, eb))) &&
           !endsLeftOut(b, p, eb) && !endsLeftOut(b, q, ea);
  };
  const auto trianglesKept = [&](size_t b, int32_t ta, int32_t tb) {
    const BodyMesh& mesh = meshes_[b];
    const std::span<const int32_t> p(&mesh.triangles[3 * static_cast<size_t>(ta)], 3);
    const std::span<const int32_t> q(&mesh.triangles[3 * static_cast<size_t>(tb)], 3);
    return !leftOut(p, q, mesh.closeTrianglePairs, pairKey(std::min(ta, tb), std::max(ta, tb)));
  };
  for (size_t i = 0; i < colliding.size(); ++i) {
    const size_t bi = colliding[i];
    const BodyMesh& mi = meshes_[bi];
    const auto ii = static_cast<int32_t>(bi);
    if (def_.self) {
      mi.points.forEachPairWith(mi.faces, [&](int32_t v, int32_t t) {
        const int32_t node = mi.vertices[static_cast<size_t>(v)];
        if (vertexFaceKept(bi, node, t)) vertexFaceCandidates_.push_back({ii, node, ii, t});
      });
      mi.edgeBoxes.forEachSelfPair([&](int32_t ea, int32_t eb) {
        if (edgeEdgeKept(bi, ea, eb)) edgeEdgeCandidates_.push_back({ii, ea, ii, eb});
      });
    }
    // Triangle pairs for the intersection test, a body against itself always.
    mi.faces.forEachSelfPair([&](int32_t ta, int32_t tb) {
      if (trianglesKept(bi, ta, tb)) {
        trianglePairCandidates_.push_back({ii, ta, ii, tb});
      }
    });
    for (size_t j = 0; j < colliding.size(); ++j) {
      if (j == i) continue;
      const size_t bj = colliding[j];
      const BodyMesh& mj = meshes_[bj];
      const auto ij = static_cast<int32_t>(bj);
      mi.points.forEachPairWith(mj.faces, [&](int32_t v, int32_t t) {
        vertexFaceCandidates_.push_back({ii, mi.vertices[static_cast<size_t>(v)], ij, t});
      });
      if (j > i) {
        mi.edgeBoxes.forEachPairWith(mj.edgeBoxes, [&](int32_t ea, int32_t eb) {
          edgeEdgeCandidates_.push_back({ii, ea, ij, eb});
        });
        mi.faces.forEachPairWith(mj.faces, [&](int32_t ta, int32_t tb) {
          trianglePairCandidates_.push_back({ii, ta, ij, tb});
        });
      }
    }
  }
  return true;
}

void MeshContact::findPairs(std::span<const Body> bodies, double margin,
                            std::vector<ContactPair>& pairs) {
  pairs.clear();
  if (!def_.enabled) return;
  (void)refreshCandidates(bodies, widestTouching(bodies) + margin);
  std::vector<std::pair<FeatureKey, ContactPair>>& found = found_;
  found.clear();

  // Vertex v of body bp against triangle t of body bt.
  using Found = std::vector<std::pair<FeatureKey, ContactPair>>;
  const auto vertexFace = [&](Found& out, size_t bp, int32_t v, size_t bt, int32_t t) {
    const Body& bodyP = bodies[bp];
    const Body& bodyT = bodies[bt];
    const BodyMesh& mt = meshes_[bt];
    const int32_t* corners = &mt.triangles[3 * static_cast<size_t>(t)];
    if (bodyP.isRigid(static_cast<size_t>(v)) || bodyT.isRigid(static_cast<size_t>(corners[0])))
      return;  // a rigid fragment (a face's corners are one piece): Bullet's business
    const double gap = touching(bodyP, bodyT);
    const Vec3 p = nodeAt(bodyP.positions, v);
    const Vec3 q0 = nodeAt(bodyT.positions, corners[0]);
    const Vec3 q1 = nodeAt(bodyT.positions, corners[1]);
    const Vec3 q2 = nodeAt(bodyT.positions, corners[2]);
    {
      const double within = gap + margin;
      if (((p.array() - within) > q0.cwiseMax(q1).cwiseMax(q2).array()).any() ||
          ((p.array() + within) < q0.cwiseMin(q1).cwiseMin(q2).array()).any()) {
        return;
      }
    }
    const TrianglePoint closest = closestOnTriangle(p, q0, q1, q2);
    const Vec3 offset = p - (closest.w[0] * q0 + closest.w[1] * q1 + closest.w[2] * q2);
    const double d = offset.norm();
    if (!(d < gap + margin)) return;
    const auto ip = static_cast<int32_t>(bp), it = static_cast<int32_t>(bt);
    ContactPair pair{{ip, it, it, it},
                     {v, corners[0], corners[1], corners[2]},
                     {1.0, -closest.w[0], -closest.w[1], -closest.w[2]},
                     Vec3::Zero(),
                     gap,
                     0.0};
    const Vec3 faceNormal = (q1 - q0).cross(q2 - q0);
    if (d > 1e-9 * gap || !(faceNormal.norm() > 0)) {
      pair.normal = d > 0 ? Vec3(offset / d) : Vec3(0, 0, 1);
    } else {
      pair.normal = faceNormal.normalized();
      if (pair.normal.dot(offset) < 0) pair.normal = -pair.normal;
    }
    const std::span<const double> massP = bodyP.model->nodeMasses();
    const std::span<const double> massT = bodyT.model->nodeMasses();
    const double faceMass =
        (massT[static_cast<size_t>(corners[0])] + massT[static_cast<size_t>(corners[1])] +
         massT[static_cast<size_t>(corners[2])]) /
        3.0;
    pair.stiffness =
        def_.stiffness * std::min(massP[static_cast<size_t>(v)], faceMass) / stableStepSquared_;
    const int64_t vertex = key(ip, v);
    FeatureKey feature{};
    if (closest.feature == 6) {
      feature = {0, {vertex, key(it, t), 0, 0}};
    } else if (closest.feature >= 3) {
      const int k = closest.feature - 3;
      const int64_t u = key(it, corners[(k + 1) % 3]), w = key(it, corners[(k + 2) % 3]);
      feature = {1, {vertex, std::min(u, w), std::max(u, w), 0}};
    } else {
      const int64_t u = key(it, corners[closest.feature]);
      feature = {2, {std::min(vertex, u), std::max(vertex, u), 0, 0}};
    }
    out.emplace_back(feature, pair);
  };

  // Edge ea of body ba against edge eb of body bb.
  const auto edgeEdge = [&](Found& out, size_t ba, int32_t ea, size_t bb, int32_t eb) {
    const Body& bodyA = bodies[ba];
    const Body& bodyB = bodies[bb];
    const BodyMesh& ma = meshes_[ba];
    const BodyMesh& mb = meshes_[bb];
    const int32_t p0 = ma.edges[2 * static_cast<size_t>(ea)];
    const int32_t p1 = ma.edges[2 * static_cast<size_t>(ea) + 1];
    const int32_t q0 = mb.edges[2 * static_cast<size_t>(eb)];
    const int32_t q1 = mb.edges[2 * static_cast<size_t>(eb) + 1];
    if (bodyA.isRigid(static_cast<size_t>(p0)) || bodyB.isRigid(static_cast<size_t>(q0))) return;
    const double gap = touching(bodyA, bodyB);
    const Vec3 xp0 = nodeAt(bodyA.positions, p0), xp1 = nodeAt(bodyA.positions, p1);
    const Vec3 xq0 = nodeAt(bodyB.positions, q0), xq1 = nodeAt(bodyB.positions, q1);
    // Most candidates of a resting contact lie within the skin but beyond reach: their
    // boxes, grown by the reach, do not overlap.
    const double within = gap + margin;
    if (((xp0.cwiseMin(xp1).array() - within) > xq0.cwiseMax(xq1).array()).any() ||
        ((xq0.cwiseMin(xq1).array() - within) > xp0.cwiseMax(xp1).array()).any()) {
      return;
    }
    const SegmentPoints st = closestBetweenSegments(xp0, xp1, xq0, xq1);
    // End points belong to the vertex's contacts.
    if (!(st.s > 0 && st.s < 1 && st.t > 0 && st.t < 1)) return;
    const Vec3 offset = (xp0 + st.s * (xp1 - xp0)) - (xq0 + st.t * (xq1 - xq0));
    const double d = offset.norm();
    if (!(d < gap + margin)) return;
    const auto ia = static_cast<int32_t>(ba), ib = static_cast<int32_t>(bb);
    ContactPair pair{{ia, ia, ib, ib},
                     {p0, p1, q0, q1},
                     {1.0 - st.s, st.s, -(1.0 - st.t), -st.t},
                     Vec3::Zero(),
                     gap,
                     0.0};
    const Vec3 normal = (xp1 - xp0).cross(xq1 - xq0);
    if (d > 1e-9 * gap || !(normal.norm() > 0)) {
      pair.normal = d > 0 ? Vec3(offset / d) : Vec3(0, 0, 1);
    } else {
      pair.normal = normal.normalized();
    }
    const auto mass = [](const Body& body, int32_t u, int32_t w) {
      const std::span<const double> m = body.model->nodeMasses();
      return 0.5 * (m[static_cast<size_t>(u)] + m[static_cast<size_t>(w)]);
    };
    pair.stiffness =
        def_.stiffness * std::min(mass(bodyA, p0, p1), mass(bodyB, q0, q1)) / stableStepSquared_;
    const int64_t ka = key(ia, ea), kb = key(ib, eb);
    out.emplace_back(FeatureKey{3, {std::min(ka, kb), std::max(ka, kb), 0, 0}}, pair);
  };

  // In parallel, each thread into its own list: the sort below orders the contacts
  // totally, so the result does not depend on which thread found what.
  tbb::enumerable_thread_specific<Found> local;
  const auto evaluate = [&](const std::vector<PrimitivePair>& candidates, const auto& kind) {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, candidates.size(), 512),
                      [&](const tbb::blocked_range<size_t>& r) {
                        Found& out = local.local();
                        for (size_t i = r.begin(); i != r.end(); ++i) {
                          const PrimitivePair& c = candidates[i];
                          kind(out, static_cast<size_t>(c.bodyA), c.a, static_cast<size_t>(c.bodyB),
                               c.b);
                        }
                      });
  };
  evaluate(vertexFaceCandidates_, vertexFace);
  evaluate(edgeEdgeCandidates_, edgeEdge);
  for (const Found& part : local) found.insert(found.end(), part.begin(), part.end());
  // One contact per feature pair (a vertex near the edge two faces share finds it from
  // both), the first in an order of the features and the pairs' nodes, whatever the order
  // the candidates came in.
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
    return std::tie(x.first, x.second.body, x.second.node) <
           std::tie(y.first, y.second.body, y.second.node);
  });
  for (size_t i = 0; i < found.size(); ++i) {
    if (i > 0 && found[i].first == found[i - 1].first) continue;
    pairs.push_back(found[i].second);
  }
}

bool MeshContact::candidateIntersects(std::span<const Body> bodies, size_t i) const {
  const PrimitivePair& c = trianglePairCandidates_[i];
  const Body& a = bodies[static_cast<size_t>(c.bodyA)];
  const Body& b = bodies[static_cast<size_t>(c.bodyB)];
  const int32_t* na =
      &meshes_[static_cast<size_t>(c.bodyA)].triangles[3 * static_cast<size_t>(c.a)];
  const int32_t* nb =
      &meshes_[static_cast<size_t>(c.bodyB)].triangles[3 * static_cast<size_t>(c.b)];
  if (a.isRigid(static_cast<size_t>(na[0])) || b.isRigid(static_cast<size_t>(nb[0]))) return false;
  return trianglesIntersect(nodeAt(a.positions, na[0]), nodeAt(a.positions, na[1]),
                            nodeAt(a.positions, na[2]), nodeAt(b.positions, nb[0]),
                            nodeAt(b.positions, nb[1]), nodeAt(b.positions, nb[2]));
}

int64_t MeshContact::countIntersections(std::span<const Body> bodies) {
  // The candidate list holds every triangle pair (not left out) within its reach; an
  // intersecting pair is at distance 0.
  (void)refreshCandidates(bodies, 0.0);
  // An integer sum: the same for any split among threads.
  return tbb::parallel_reduce(
      tbb::blocked_range<size_t>(0, trianglePairCandidates_.size(), 256), int64_t{0},
      [&](const tbb::blocked_range<size_t>& r, int64_t count) {
        for (size_t i = r.begin(); i != r.end(); ++i)
          count += candidateIntersects(bodies, i) ? 1 : 0;
        return count;
      },
      [](int64_t x, int64_t y) { return x + y; });
}

std::vector<IntersectingTriangles> MeshContact::listIntersections(std::span<const Body> bodies) {
  (void)refreshCandidates(bodies, 0.0);
  // Flags per candidate, then gathered in the candidates' order: the same list for any
  // split among threads.
  std::vector<uint8_t> crossing(trianglePairCandidates_.size(), 0);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, crossing.size(), 256),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t i = r.begin(); i != r.end(); ++i)
                        crossing[i] = candidateIntersects(bodies, i) ? 1 : 0;
                    });
  const auto corners = [&](int32_t body, int32_t triangle) {
    const int32_t* n =
        &meshes_[static_cast<size_t>(body)].triangles[3 * static_cast<size_t>(triangle)];
    return std::array<int32_t, 3>{n[0], n[1], n[2]};
  };
  std::vector<IntersectingTriangles> list;
  for (size_t i = 0; i < crossing.size(); ++i) {
    if (crossing[i] == 0) continue;
    const PrimitivePair& c = trianglePairCandidates_[i];
    list.push_back({c.bodyA, corners(c.bodyA, c.a), c.bodyB, corners(c.bodyB, c.b)});
  }
  return list;
}

namespace {

double pairDistance(const ContactPair& pair, std::span<const Body> bodies, size_t b,
                    std::span<const double> x) {
  Vec3 sum = Vec3::Zero();
  for (int k = 0; k < 4; ++k) {
    const auto owner = static_cast<size_t>(pair.body[k]);
    const std::span<const double> positions =
        owner == b ? x : std::span<const double>(bodies[owner].positions);
    sum += pair.weight[k] * nodeAt(positions, pair.node[k]);
  }
  return pair.normal.dot(sum);
}

bool involves(const ContactPair& pair, size_t b) {
  return std::any_of(pair.body.begin(), pair.body.end(),
                     [&](int32_t owner) { return static_cast<size_t>(owner) == b; });
}

}  // namespace

double addContactGradient(std::span<const ContactPair> pairs, std::span<const Body> bodies,
                          std::span<const std::span<double>> gradients) {
  double energy = 0;
  for (const ContactPair& pair : pairs) {
    const double d = pairDistance(pair, bodies, bodies.size(), {});
    if (!(d < pair.gap)) continue;
    const double depth = pair.gap - d;
    energy += 0.5 * pair.stiffness * depth * depth;
    for (int k = 0; k < 4; ++k) {
      const std::span<double> g = gradients[static_cast<size_t>(pair.body[k])];
      if (g.empty()) continue;
      const Vec3 force = -pair.stiffness * depth * pair.weight[k] * pair.normal;
      for (int c = 0; c < 3; ++c)
        g[3 * static_cast<size_t>(pair.node[k]) + static_cast<size_t>(c)] += force[c];
    }
  }
  return energy;
}

double addBodyContactGradient(std::span<const ContactPair> pairs, std::span<const Body> bodies,
                              size_t b, std::span<const double> x, std::span<double> gradient) {
  double energy = 0;
  for (const ContactPair& pair : pairs) {
    if (!involves(pair, b)) continue;
    const double d = pairDistance(pair, bodies, b, x);
    if (!(d < pair.gap)) continue;
    const double depth = pair.gap - d;
    energy += 0.5 * pair.stiffness * depth * depth;
    if (gradient.empty()) continue;
    for (int k = 0; k < 4; ++k) {
      if (static_cast<size_t>(pair.body[k]) != b) continue;
      const Vec3 force = -pair.stiffness * depth * pair.weight[k] * pair.normal;
      for (int c = 0; c < 3; ++c)
        gradient[3 * static_cast<size_t>(pair.node[k]) + static_cast<size_t>(c)] += force[c];
    }
  }
  return energy;
}

void addBodyContactDiagonal(std::span<const ContactPair> pairs, std::span<const Body> bodies,
                            size_t b, std::span<const double> x, std::span<double> diagonal) {
  for (const ContactPair& pair : pairs) {
    if (!involves(pair, b) || !(pairDistance(pair, bodies, b, x) < pair.gap)) continue;
    for (int k = 0; k < 4; ++k) {
      if (static_cast<size_t>(pair.body[k]) != b) continue;
      const double s = pair.stiffness * pair.weight[k] * pair.weight[k];
      double* block = &diagonal[9 * static_cast<size_t>(pair.node[k])];
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) block[3 * r + c] += s * pair.normal[r] * pair.normal[c];
      }
    }
  }
}

}  // namespace shellsim
