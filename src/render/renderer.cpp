// CPU ray casting of frames with Embree.
//
// Why Embree: it is the well-kept CPU ray tracing kernel (Intel, Apache-2.0, packaged by
// Debian as libembree-dev), it needs no display or GPU, it builds a BVH over a few hundred
// thousand primitives in milliseconds with TBB (the tasking system shellsim already uses)
// and it has what we need: triangles (smooth-shaded by interpolating vertex normals with
// the hit's barycentrics) and oriented discs, which make a point cloud read as a closed
// surface (surfel splatting by ray casting; Zwicker et al. 2001 for the idea of surfels).
// Discs are drawn as quads with a filter that keeps hits inside the inscribed circle, the
// same picture as Embree's RTC_GEOMETRY_TYPE_ORIENTED_DISC_POINT but with a BVH that Embree
// refits between frames, where its disc points rebuild theirs at every frame.
// A rasterizer would need OpenGL and a display or an EGL/OSMesa context, which headless CI
// machines lack. Embree types stay in this file: the public header shows none.
//
// Every pixel is a pure function of the scene and the camera (one primary ray, one shadow
// ray, no random sampling), so an image is the same bit for bit with any thread count.
#include <embree3/rtcore.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numbers>
#include <unordered_map>

#include "core/palette.hpp"
#include "core/spatial.hpp"
#include "core/surfel_radii.hpp"
#include "core/union_find.hpp"
#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/render.hpp"

namespace shellsim {

namespace {

using V3 = Eigen::Vector3d;
V3 v3(const Vec3d& a) {
  return {a[0], a[1], a[2]};
}

void checkDevice(RTCDevice device, const char* what) {
  const RTCError error = rtcGetDeviceError(device);
  if (error != RTC_ERROR_NONE) {
    throw std::runtime_error(std::string("Embree error ") + std::to_string(error) + " in " + what);
  }
}

// Bits 0..9 of v moved to bits 0, 3, 6, ..., 27.
uint64_t spreadBits(uint64_t v) {
  v &= 0x3FF;
  v = (v | (v << 16)) & 0x30000FF;
  v = (v | (v << 8)) & 0x300F00F;
  v = (v | (v << 4)) & 0x30C30C3;
  v = (v | (v << 2)) & 0x9249249;
  return v;
}

// The points in Morton (Z-curve) order of their cells in a 1024^3 grid over their bounds,
// ties by index. Surfel quads are stored in this order: quads near in space are near in
// memory, which is how Embree reads them when it refits or builds its BVH (the input order
// of a point cloud can be anything, e.g. a spiral that jumps around the sphere).
std::vector<uint32_t> mortonOrder(const std::vector<double>& positions) {
  const size_t n = positions.size() / 3;
  double lo[3], scale[3];
  for (int c = 0; c < 3; ++c) {
    double mn = std::numeric_limits<double>::infinity(), mx = -mn;
    for (size_t i = 0; i < n; ++i) {
      mn = std::min(mn, positions[3 * i + c]);
      mx = std::max(mx, positions[3 * i + c]);
    }
    lo[c] = mn;
    scale[c] = mx > mn ? 1023.0 / (mx - mn) : 0.0;
  }
  std::vector<std::pair<uint64_t, uint32_t>> keyed(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t code = 0;
    for (int c = 0; c < 3; ++c) {
      const double cell = std::clamp((positions[3 * i + c] - lo[c]) * scale[c], 0.0, 1023.0);
      code |= spreadBits(static_cast<uint64_t>(cell)) << c;
    }
    keyed[i] = {code, static_cast<uint32_t>(i)};
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = keyed[i].second;
  return order;
}

}  // namespace

std::vector<float> surfelRadii(const Geometry& cloud) {
  return surfelRadii(std::span<const double>(cloud.positions));
}

std::vector<float> componentColors(const Geometry& mesh, int32_t offset) {
  const size_t n = static_cast<size_t>(mesh.vertexCount());
  std::vector<int32_t> colourOf;
  if (mesh.pieces.size() == n) {
    // A run's frames carry piece ids that last (the recorder's persistentPieceIds): a piece
    // keeps its colour from frame to frame while it keeps its nodes, and the vertices of one
    // piece share it where no triangle joins them (a thick shell's outer and inner surfaces,
    // held together by springs).
    colourOf = mesh.pieces;
  } else {
    // Components by triangle edges, numbered by their lowest vertex.
    UnionFind components(n);
    for (size_t t = 0; t + 2 < mesh.triangles.size(); t += 3) {
      components.unite(mesh.triangles[t], mesh.triangles[t + 1]);
      components.unite(mesh.triangles[t + 1], mesh.triangles[t + 2]);
    }
    colourOf = components.labels();
  }
  std::vector<float> colors(3 * n);
  for (size_t i = 0; i < n; ++i) {
    const float* c = piecePaletteColor(colourOf[i] + offset);
    std::copy(c, c + 3, &colors[3 * i]);
  }
  return colors;
}

void tintPlasticFlow(Geometry& geometry) {
  const auto plastic =
      std::find_if(geometry.vertexScalars.begin(), geometry.vertexScalars.end(),
                   [](const VertexScalar& s) { return s.name == "plastic_strain"; });
  if (plastic == geometry.vertexScalars.end()) return;
  const size_t n = static_cast<size_t>(geometry.vertexCount());
  if (plastic->values.size() != n || geometry.colors.size() != 3 * n) return;
  constexpr float kDentColor[3] = {0.55F, 0.08F, 0.06F};
  for (size_t i = 0; i < n; ++i) {
    const float strain = plastic->values[i];
    if (!(strain > kPlasticTintFrom)) continue;
    const float t = std::min(1.0F, std::log10(strain / kPlasticTintFrom) /
                                       std::log10(kPlasticTintFull / kPlasticTintFrom));
    for (size_t c = 0; c < 3; ++c) {
      float& value = geometry.colors[3 * i + c];
      value += t * (kDentColor[c] - value);
    }
  }
}

std::array<float, 3> detail::paletteColor(int32_t index) {
  const float* c = piecePaletteColor(index);
  return {c[0], c[1], c[2]};
}

Camera fitCamera(const Bounds& bounds, const Vec3d& up, double aspect) {
  const V3 lo = v3({bounds.min[0], bounds.min[1], bounds.min[2]});
  const V3 hi = v3({bounds.max[0], bounds.max[1], bounds.max[2]});
  const V3 centre = 0.5 * (lo + hi);
  V3 u = v3(up).normalized();
  // A view from the front-right and 25 degrees above, like a photographer's three-quarter
  // view: depth reads from perspective and the shadow falls into view.
  V3 side = u.unitOrthogonal();
  if (std::abs(u.z()) > 0.5) side = V3(0, -1, 0);  // z up: look along +y, as in most tools
  side = (side - side.dot(u) * u).normalized();
  const V3 right = u.cross(side).normalized();
  const double elevation = 25.0 * std::numbers::pi / 180, azimuth = 30.0 * std::numbers::pi / 180;
  const V3 horizontal = std::cos(azimuth) * side + std::sin(azimuth) * right;
  const V3 dir = (std::cos(elevation) * horizontal + std::sin(elevation) * u).normalized();
  Camera camera;
  camera.fovDegrees = 35;
  // The nearest distance at which every corner of the box is inside the picture, with a
  // 10% margin: a corner at (x, y) across and z towards the camera from the centre needs
  // |x| <= (distance - z) tan(half horizontal fov), the same for y.
  const double tanV = 0.9 * std::tan(0.5 * camera.fovDegrees * std::numbers::pi / 180);
  const double tanH = tanV * aspect;
  const V3 forward = -dir;
  const V3 camRight = forward.cross(u).normalized();
  const V3 camUp = camRight.cross(forward);
  double distance = 1e-3;
  for (int corner = 0; corner < 8; ++corner) {
    V3 p;
    for (int c = 0; c < 3; ++c) p[c] = ((corner >> c) & 1) != 0 ? hi[c] : lo[c];
    const V3 rel = p - centre;
    const double z = rel.dot(dir);
    distance = std::max(
        {distance, z + std::abs(rel.dot(camRight)) / tanH, z + std::abs(rel.dot(camUp)) / tanV});
  }
  const V3 eye = centre + distance * dir;
  camera.eye = {eye.x(), eye.y(), eye.z()};
  camera.target = {centre.x(), centre.y(), centre.z()};
  camera.up = {u.x(), u.y(), u.z()};
  return camera;
}

namespace {

// What a hit on each Embree geometry means.
// Whether the hit at barycentrics (1 - u - v, u, v) of triangle `face` lies within
// kWireWidth pixels of one of its edges, for a pixel `footprint` wide (m) at the hit: the
// distance to the edge opposite corner c is w_c times the triangle's height over it,
// w_c |e_1 x e_2| / |edge|.
constexpr float kWireWidth = 0.6F;
constexpr float kWireShade = 0.3F;
bool onEdge(const Geometry& g, uint32_t face, float u, float v, float footprint) {
  const int32_t* tri = &g.triangles[3 * static_cast<size_t>(face)];
  V3 p[3];
  for (int c = 0; c < 3; ++c) {
    p[c] = V3(g.positions[3 * static_cast<size_t>(tri[c])],
              g.positions[3 * static_cast<size_t>(tri[c]) + 1],
              g.positions[3 * static_cast<size_t>(tri[c]) + 2]);
  }
  const double twiceArea = (p[1] - p[0]).cross(p[2] - p[0]).norm();
  const double w[3] = {1.0 - u - v, u, v};
  for (int c = 0; c < 3; ++c) {
    const double edge = (p[(c + 2) % 3] - p[(c + 1) % 3]).norm();
    if (edge > 0 && w[c] * twiceArea / edge < kWireWidth * footprint) return true;
  }
  return false;
}

struct GeometryInfo {
  enum Kind { kMesh, kSurfels, kSpheres, kBox } kind = kMesh;
  const Geometry* geometry = nullptr;  // kMesh: smooth normals; kMesh/kSurfels: colours
  const float* normals = nullptr;      // kMesh: (nVertices, 3) vertex normals
  const float* colors = nullptr;       // (nVertices, 3) or nullptr
  const float* radii = nullptr;        // kSurfels: (nVertices) disc radii
  const uint32_t* order = nullptr;     // kSurfels: (nVertices) the point of each quad
  std::array<float, 3> color{};
};

}  // namespace

struct Renderer::Impl {
  RenderSettings settings;
  RTCDevice device = nullptr;
  // Neighbour lists of point-cloud bodies from the first frame they appeared in, reused
  // while the point count stays the same: radii and normals then follow the deformation
  // at O(n) per frame instead of a kNN search (which costs more than the ray casting).
  struct CloudCache {
    size_t points = 0;
    std::vector<uint32_t> nbrs;   // (nPoints, kSurfelNeighbours)
    std::vector<uint32_t> order;  // (nPoints) the point drawn by each quad, in Morton order
    std::vector<uint32_t> quad;   // (nPoints) the quad of each point, inverse of order
    std::vector<float> radii;     // (nPoints), this frame's disc radii
  };
  std::vector<CloudCache> clouds;  // per body index
  // Per mesh body: the triangles around each vertex, kept while the topology stays the
  // same, for vertex normals of meshes that come without them; and this frame's normals.
  struct MeshCache {
    std::vector<int32_t> start;     // (nVertices + 1) offsets into `incident`; empty: not built
    std::vector<int32_t> incident;  // (3 nTriangles) triangle indices, ascending per vertex
    std::vector<float> normals;     // (nVertices, 3)
  };
  std::vector<MeshCache> meshes;  // per body index
  // Sky and ground depend only on the camera and the stage, which a run keeps for all its
  // frames: they are shaded once, lit and in shadow, and each frame only picks one of the
  // two per pixel after its shadow ray. (Shading the ground was half of a frame's time.)
  struct Background {
    std::vector<double> key;        // camera, stage and size it was made for
    std::vector<float> dirs;        // (height, width, 3), unit direction of the pixel's ray
    std::vector<float> tGround;     // (height, width), distance to the ground or +inf
    std::vector<uint8_t> lit;       // (height, width, 3), sRGB
    std::vector<uint8_t> shadowed;  // (height, width, 3), sRGB
  } background;

  // The Embree scene of the last frame. Frames of a run share their structure (bodies,
  // topology, pins, obstacles), so the next frame only rewrites vertex buffers and refits
  // the BVH instead of building it again, which took as long as tracing the rays. The BVH
  // is built afresh every kRebuildEvery frames, before refits loosen it too much.
  struct SceneCache {
    RTCScene scene = nullptr;
    std::vector<RTCGeometry> geometries;          // in attach order; the IDs are the indices
    std::vector<int64_t> signature;               // kinds and counts of the geometries
    std::vector<std::vector<int32_t>> triangles;  // per body, the topology the BVH has
    int32_t refits = 0;                           // since the last full build
    void reset() {
      for (RTCGeometry g : geometries) rtcReleaseGeometry(g);
      geometries.clear();
      if (scene != nullptr) rtcReleaseScene(scene);
      scene = nullptr;
      signature.clear();
      triangles.clear();
      refits = 0;
    }
  } sceneCache;
  static constexpr int32_t kRebuildEvery = 16;

  // A frame's Embree scene, built or refitted (buildScene), and what each geometry is.
  struct FrameScene {
    RTCScene scene = nullptr;         // owned by sceneCache
    std::vector<GeometryInfo> infos;  // by geometry ID
    RTCBounds bounds{};               // of everything in it, padded for the slab tests
    double extent = 1;                // the stage's size, m
  };
  // The Embree scene for `bodies` on `stage`: last frame's refitted when it holds the same
  // structure (prepareScene), else built anew; geometries in a fixed order (bodies, pins,
  // obstacles), so their IDs are the same every frame.
  FrameScene buildScene(const std::vector<RenderBody>& bodies, const Stage& stage);

 private:
  // A scene being filled: whether it is a refit, the next geometry ID, the infos so far.
  struct SceneBuild {
    bool reuse = false;
    size_t slot = 0;
    RTCScene scene = nullptr;
    std::vector<GeometryInfo> infos;
    double extent = 1;  // m
  };
  // Decides refit or rebuild (a new, empty scene in sceneCache); true for a refit.
  bool prepareScene(const std::vector<RenderBody>& bodies, const Stage& stage);
  // The next geometry: last frame's in this slot, or a new one.
  RTCGeometry acquire(SceneBuild& build, RTCGeometryType type);
  // A buffer to fill: last frame's (same size) or a new one.
  void* buffer(const SceneBuild& build, RTCGeometry g, RTCBufferType type, RTCFormat format,
               size_t stride, size_t count);
  // Commits the geometry last acquired and records what it is.
  void attach(SceneBuild& build, RTCGeometry geometry, const GeometryInfo& info);
  // Body b as smooth-shaded triangles, or as surfels (discs as quads in a circle filter).
  void addMesh(SceneBuild& build, size_t b, const Geometry& g, GeometryInfo info);
  void addSurfels(SceneBuild& build, size_t b, const Geometry& g, GeometryInfo info);
  // Spheres (nSpheres, 4): x, y, z, radius, in one colour; nothing when empty.
  void addSpheres(SceneBuild& build, const std::vector<float>& spheres, std::array<float, 3> color);
  // The stage's sphere and box obstacles in neutral grey.
  void addObstacles(SceneBuild& build, const std::vector<RenderBody>& bodies, const Stage& stage);

 public:
  ~Impl() {
    sceneCache.reset();
    if (device != nullptr) rtcReleaseDevice(device);
  }
};

Renderer::Renderer(RenderSettings settings) : impl_(std::make_unique<Impl>()) {
  if (settings.width < 16 || settings.height < 16 || settings.width > 16384 ||
      settings.height > 16384) {
    throw InputError("image size " + std::to_string(settings.width) + "x" +
                     std::to_string(settings.height) + ": each side must be in [16, 16384]");
  }
  impl_->settings = settings;
  impl_->device = rtcNewDevice(nullptr);
  if (impl_->device == nullptr) throw std::runtime_error("Embree: cannot create a device");
}

Renderer::~Renderer() = default;

const RenderSettings& Renderer::settings() const {
  return impl_->settings;
}

namespace {

struct Vec3f {
  float x, y, z;
};

float dot(const Vec3f& a, const Vec3f& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
Vec3f normalize(Vec3f a) {
  const float l = std::sqrt(dot(a, a));
  return l > 0 ? Vec3f{a.x / l, a.y / l, a.z / l} : Vec3f{0, 0, 1};
}
Vec3f toF(const V3& a) {
  return {static_cast<float>(a.x()), static_cast<float>(a.y()), static_cast<float>(a.z())};
}

// Linear to 8-bit with gamma 2.2 (close enough to sRGB for previews), through a table:
// powf per channel was a tenth of the frame time. 4096 steps are finer than 8-bit output
// needs in the darks (the steepest part of the curve).
class GammaTable {
 public:
  GammaTable() {
    for (int i = 0; i < kSize; ++i) {
      const double c = static_cast<double>(i) / (kSize - 1);
      table_[i] = static_cast<uint8_t>(std::lround(255.0 * std::pow(c, 1.0 / 2.2)));
    }
  }
  [[nodiscard]] uint8_t operator()(float linear) const {
    const float c = std::clamp(linear, 0.0f, 1.0f);
    return table_[static_cast<int>(c * (kSize - 1) + 0.5f)];
  }

 private:
  static constexpr int kSize = 4096;
  uint8_t table_[kSize];
};

// Slab test of rays that share a direction (the shadow rays) against a box.
struct SlabTest {
  float inv[3];
  bool zero[3];
  explicit SlabTest(const float dir[3]) {
    for (int c = 0; c < 3; ++c) {
      zero[c] = dir[c] == 0;
      inv[c] = zero[c] ? 0.0f : 1.0f / dir[c];
    }
  }
  [[nodiscard]] bool hits(const float org[3], const RTCBounds& b) const {
    const float lo[3] = {b.lower_x, b.lower_y, b.lower_z};
    const float hi[3] = {b.upper_x, b.upper_y, b.upper_z};
    float t0 = 0, t1 = std::numeric_limits<float>::infinity();
    for (int c = 0; c < 3; ++c) {
      if (zero[c]) {
        if (org[c] < lo[c] || org[c] > hi[c]) return false;
        continue;
      }
      float a = (lo[c] - org[c]) * inv[c], bb = (hi[c] - org[c]) * inv[c];
      if (a > bb) std::swap(a, bb);
      t0 = std::max(t0, a);
      t1 = std::min(t1, bb);
    }
    return t0 <= t1;
  }
};

// The triangles around each vertex of `mesh`: those of vertex i are
// incident[start[i] .. start[i + 1]), in ascending order. Throws InputError for a
// triangle with a vertex index out of range.
void vertexTriangles(const Geometry& mesh, std::vector<int32_t>& start,
                     std::vector<int32_t>& incident) {
  const size_t n = static_cast<size_t>(mesh.vertexCount());
  const std::vector<int32_t>& t = mesh.triangles;
  start.assign(n + 1, 0);
  for (const int32_t v : t) {
    if (v < 0 || static_cast<size_t>(v) >= n) {
      throw InputError("render: triangle vertex " + std::to_string(v) + " out of range [0, " +
                       std::to_string(n) + ")");
    }
    ++start[static_cast<size_t>(v) + 1];
  }
  for (size_t i = 0; i < n; ++i) start[i + 1] += start[i];
  incident.assign(t.size(), 0);
  std::vector<int32_t> next(start.begin(), start.end() - 1);
  for (size_t i = 0; i < t.size(); ++i) {
    incident[static_cast<size_t>(next[static_cast<size_t>(t[i])]++)] = static_cast<int32_t>(i / 3);
  }
}

// The normal of vertex i: the sum of the cross products of the edges of its triangles
// (area-weighted), normalised; (0, 0, 1) when that sum vanishes. The same sums in the
// same order as computeVertexNormals, so the same bits, one vertex at a time.
void vertexNormal(const Geometry& mesh, const std::vector<int32_t>& start,
                  const std::vector<int32_t>& incident, size_t i, double normal[3]) {
  normal[0] = normal[1] = normal[2] = 0;
  const double* p = mesh.positions.data();
  for (int32_t k = start[i]; k < start[i + 1]; ++k) {
    const int32_t* tri = &mesh.triangles[3 * static_cast<size_t>(incident[k])];
    const double* pa = p + 3 * static_cast<size_t>(tri[0]);
    const double* pb = p + 3 * static_cast<size_t>(tri[1]);
    const double* pc = p + 3 * static_cast<size_t>(tri[2]);
    const double e1[3] = {pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]};
    const double e2[3] = {pc[0] - pa[0], pc[1] - pa[1], pc[2] - pa[2]};
    normal[0] += e1[1] * e2[2] - e1[2] * e2[1];
    normal[1] += e1[2] * e2[0] - e1[0] * e2[2];
    normal[2] += e1[0] * e2[1] - e1[1] * e2[0];
  }
  const double length =
      std::sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]);
  if (length > 0 && std::isfinite(length)) {
    for (int c = 0; c < 3; ++c) normal[c] /= length;
  } else {
    normal[0] = normal[1] = 0;
    normal[2] = 1;
  }
}

// Mean length of a mesh's triangle edges (shared edges counted twice), m; 0 without
// triangles.
double meanEdgeLength(const Geometry& g) {
  const size_t nt = static_cast<size_t>(g.triangleCount());
  if (nt == 0) return 0;
  double edgeSum = 0;
  for (size_t i = 0; i < 3 * nt; ++i) {
    const size_t a = static_cast<size_t>(g.triangles[i]);
    const size_t b = static_cast<size_t>(g.triangles[i % 3 == 2 ? i - 2 : i + 1]);
    edgeSum += std::hypot(g.positions[3 * a] - g.positions[3 * b],
                          g.positions[3 * a + 1] - g.positions[3 * b + 1],
                          g.positions[3 * a + 2] - g.positions[3 * b + 2]);
  }
  return edgeSum / static_cast<double>(3 * nt);
}

// Filter of the quads that carry surfels: a hit counts only inside the disc inscribed in
// the quad, (2u - 1)^2 + (2v - 1)^2 <= 1 in the quad's coordinates.
void insideDisc(const RTCFilterFunctionNArguments* args) {
  for (unsigned i = 0; i < args->N; ++i) {
    if (args->valid[i] == 0) continue;
    const float u = 2 * RTCHitN_u(args->hit, args->N, i) - 1;
    const float v = 2 * RTCHitN_v(args->hit, args->N, i) - 1;
    if (u * u + v * v > 1) args->valid[i] = 0;
  }
}

// A "nice" grid spacing (1, 2 or 5 times a power of ten) near extent / 10.
double gridSpacing(double extent) {
  const double raw = std::max(extent, 1e-6) / 10;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

// Coverage in [0, 1] of a grid line of half width `halfWidth` at distance `d` from the
// line, for a pixel whose footprint on the ground is `footprint` wide (box filter).
float lineCoverage(float d, float halfWidth, float footprint) {
  const float w = std::max(footprint, 1e-12f);
  return std::clamp((halfWidth + 0.5f * w - d) / w, 0.0f, 1.0f) * std::min(1.0f, 2 * halfWidth / w);
}

}  // namespace

// ---- The Embree scene of a frame (Renderer::Impl::buildScene) ----

Renderer::Impl::FrameScene Renderer::Impl::buildScene(const std::vector<RenderBody>& bodies,
                                                      const Stage& stage) {
  SceneBuild build;
  build.reuse = prepareScene(bodies, stage);
  build.scene = sceneCache.scene;
  build.extent = std::max(stage.extent, 1e-6);
  if (clouds.size() < bodies.size()) clouds.resize(bodies.size());
  if (meshes.size() < bodies.size()) meshes.resize(bodies.size());
  if (!build.reuse) {
    for (MeshCache& m : meshes) m.start.clear();
  }
  std::vector<float> pinSpheres;  // (nPins, 4): x, y, z, radius
  for (size_t b = 0; b < bodies.size(); ++b) {
    const Geometry& g = bodies[b].geometry;
    const size_t n = static_cast<size_t>(g.vertexCount());
    if (n == 0) continue;
    GeometryInfo info;
    info.geometry = &g;
    info.color = bodies[b].color;
    info.colors = g.colors.size() == 3 * n ? g.colors.data() : nullptr;
    if (g.isPointCloud()) {
      addSurfels(build, b, g, info);
    } else {
      addMesh(build, b, g, info);
    }
    if (settings.showPins) {
      for (const int32_t p : bodies[b].pinned) {
        if (p < 0 || static_cast<size_t>(p) >= n) continue;
        for (int c = 0; c < 3; ++c)
          pinSpheres.push_back(static_cast<float>(g.positions[3 * p + c]));
        pinSpheres.push_back(static_cast<float>(0.01 * build.extent));
      }
    }
  }
  addSpheres(build, pinSpheres, {0.85f, 0.1f, 0.1f});
  addObstacles(build, bodies, stage);
  rtcCommitScene(build.scene);
  checkDevice(device, "building the scene");
  FrameScene frame;
  frame.scene = build.scene;
  frame.infos = std::move(build.infos);
  frame.extent = build.extent;
  rtcGetSceneBounds(build.scene, &frame.bounds);
  // Grown a little: the slab test must never reject a ray that Embree would hit.
  const float pad = static_cast<float>(1e-3 * build.extent);
  frame.bounds.lower_x -= pad;
  frame.bounds.lower_y -= pad;
  frame.bounds.lower_z -= pad;
  frame.bounds.upper_x += pad;
  frame.bounds.upper_y += pad;
  frame.bounds.upper_z += pad;
  return frame;
}

bool Renderer::Impl::prepareScene(const std::vector<RenderBody>& bodies, const Stage& stage) {
  // What this frame holds, to decide whether last frame's scene can be refitted.
  std::vector<int64_t> signature;
  for (const RenderBody& body : bodies) {
    const Geometry& g = body.geometry;
    signature.insert(signature.end(),
                     {g.isPointCloud() ? 1 : 0, g.vertexCount(), g.triangleCount()});
    int64_t pins = 0;
    for (const int32_t p : body.pinned) pins += settings.showPins && p >= 0 && p < g.vertexCount();
    signature.push_back(pins);
  }
  for (const StageObstacle& o : stage.obstacles) signature.push_back(static_cast<int64_t>(o.type));
  bool reuse = sceneCache.scene != nullptr && signature == sceneCache.signature &&
               sceneCache.refits < kRebuildEvery;
  for (size_t b = 0; reuse && b < bodies.size(); ++b) {
    reuse = bodies[b].geometry.triangles == sceneCache.triangles[b];
  }
  if (reuse) {
    ++sceneCache.refits;
    return true;
  }
  sceneCache.reset();
  sceneCache.scene = rtcNewScene(device);
  sceneCache.signature = signature;
  for (const RenderBody& body : bodies) sceneCache.triangles.push_back(body.geometry.triangles);
  rtcSetSceneFlags(sceneCache.scene, RTC_SCENE_FLAG_DYNAMIC);
  // A fast build (Morton codes): the tree is refitted for the next frames and rebuilt
  // often, so build time counts more than the last bit of tree quality.
  rtcSetSceneBuildQuality(sceneCache.scene, RTC_BUILD_QUALITY_LOW);
  return false;
}

RTCGeometry Renderer::Impl::acquire(SceneBuild& build, RTCGeometryType type) {
  if (build.reuse) return sceneCache.geometries[build.slot++];
  RTCGeometry g = rtcNewGeometry(device, type);
  rtcSetGeometryBuildQuality(g, RTC_BUILD_QUALITY_REFIT);
  sceneCache.geometries.push_back(g);
  ++build.slot;
  return g;
}

void* Renderer::Impl::buffer(const SceneBuild& build, RTCGeometry g, RTCBufferType type,
                             RTCFormat format, size_t stride, size_t count) {
  if (build.reuse) return rtcGetGeometryBufferData(g, type, 0);
  return rtcSetNewGeometryBuffer(g, type, 0, format, stride, count);
}

void Renderer::Impl::attach(SceneBuild& build, RTCGeometry geometry, const GeometryInfo& info) {
  const auto id = static_cast<unsigned>(build.slot - 1);
  // Index buffers are rewritten with the same content on a refit and need no update.
  if (build.reuse) {
    rtcUpdateGeometryBuffer(geometry, RTC_BUFFER_TYPE_VERTEX, 0);
    rtcCommitGeometry(geometry);
  } else {
    rtcCommitGeometry(geometry);
    rtcAttachGeometryByID(build.scene, geometry, id);
  }
  if (build.infos.size() <= id) build.infos.resize(id + 1);
  build.infos[id] = info;
}

void Renderer::Impl::addMesh(SceneBuild& build, size_t b, const Geometry& g, GeometryInfo info) {
  const size_t n = static_cast<size_t>(g.vertexCount());
  RTCGeometry geom = acquire(build, RTC_GEOMETRY_TYPE_TRIANGLE);
  auto* v = static_cast<float*>(
      buffer(build, geom, RTC_BUFFER_TYPE_VERTEX, RTC_FORMAT_FLOAT3, 3 * sizeof(float), n));
  const size_t nt = static_cast<size_t>(g.triangleCount());
  if (!build.reuse) {  // a refit keeps the index buffer, which holds the same triangles
    auto* t = static_cast<uint32_t*>(
        buffer(build, geom, RTC_BUFFER_TYPE_INDEX, RTC_FORMAT_UINT3, 3 * sizeof(uint32_t), nt));
    for (size_t i = 0; i < 3 * nt; ++i) t[i] = static_cast<uint32_t>(g.triangles[i]);
  }
  // Smooth shading needs vertex normals; frames from shellsim carry them.
  MeshCache& mesh = meshes[b];
  mesh.normals.resize(3 * n);
  const bool haveNormals = g.normals.size() == 3 * n;
  if (!haveNormals && mesh.start.empty()) vertexTriangles(g, mesh.start, mesh.incident);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4096), [&](const auto& range) {
    for (size_t i = range.begin(); i < range.end(); ++i) {
      for (int c = 0; c < 3; ++c) v[3 * i + c] = static_cast<float>(g.positions[3 * i + c]);
      double normal[3];
      if (haveNormals) {
        std::copy(&g.normals[3 * i], &g.normals[3 * i] + 3, normal);
      } else {
        vertexNormal(g, mesh.start, mesh.incident, i, normal);
      }
      for (int c = 0; c < 3; ++c) mesh.normals[3 * i + c] = static_cast<float>(normal[c]);
    }
  });
  info.normals = mesh.normals.data();
  info.kind = GeometryInfo::kMesh;
  attach(build, geom, info);
}

void Renderer::Impl::addSurfels(SceneBuild& build, size_t b, const Geometry& g, GeometryInfo info) {
  const size_t n = static_cast<size_t>(g.vertexCount());
  CloudCache& cache = clouds[b];
  if (cache.points != n) {
    cache.nbrs = nearestNeighbours(g.positions, kSurfelNeighbours);
    cache.order = mortonOrder(g.positions);
    cache.quad.resize(n);
    for (size_t j = 0; j < n; ++j) cache.quad[cache.order[j]] = static_cast<uint32_t>(j);
    cache.points = n;
  }
  // The frame's own radii (recorder.cpp writes a point cloud's `radius`), else the same
  // rule from the neighbours.
  std::vector<float>& radii = cache.radii;
  const auto written = std::find_if(
      g.vertexScalars.begin(), g.vertexScalars.end(),
      [&](const VertexScalar& s) { return s.name == "radius" && s.values.size() == n; });
  if (written != g.vertexScalars.end()) {
    radii = written->values;
  } else {
    radiiFromNeighbours(g.positions, cache.nbrs, kSurfelNeighbours, radii);
  }
  // Each disc is the circle inscribed in a square quad of side 2r in its plane; the
  // filter drops quad hits outside the circle. Embree refits a quad BVH when only the
  // vertices move, where its own oriented-disc points rebuild the BVH at every commit
  // (that build was half of a 240k-surfel frame).
  RTCGeometry geom = acquire(build, RTC_GEOMETRY_TYPE_QUAD);
  auto* v = static_cast<float*>(
      buffer(build, geom, RTC_BUFFER_TYPE_VERTEX, RTC_FORMAT_FLOAT3, 3 * sizeof(float), 4 * n));
  if (!build.reuse) {
    auto* q = static_cast<uint32_t*>(
        buffer(build, geom, RTC_BUFFER_TYPE_INDEX, RTC_FORMAT_UINT4, 4 * sizeof(uint32_t), n));
    for (size_t i = 0; i < 4 * n; ++i) q[i] = static_cast<uint32_t>(i);
    rtcSetGeometryIntersectFilterFunction(geom, insideDisc);
    rtcSetGeometryOccludedFilterFunction(geom, insideDisc);
  }
  const bool haveNormals = g.normals.size() == 3 * n;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4096), [&](const auto& range) {
    for (size_t i = range.begin(); i < range.end(); ++i) {
      const size_t quadIndex = cache.quad[i];
      V3 normal;
      if (haveNormals) {
        normal = v3({g.normals[3 * i], g.normals[3 * i + 1], g.normals[3 * i + 2]});
      } else {
        // Plane fit to the point and its neighbours; the sign does not matter because
        // shading is two-sided.
        const V3 p = v3({g.positions[3 * i], g.positions[3 * i + 1], g.positions[3 * i + 2]});
        Eigen::Matrix3d cov = Eigen::Matrix3d::Zero();
        for (int j = 0; j < kSurfelNeighbours; ++j) {
          const size_t o = cache.nbrs[i * kSurfelNeighbours + j];
          const V3 d = v3({g.positions[3 * o], g.positions[3 * o + 1], g.positions[3 * o + 2]}) - p;
          cov += d * d.transpose();
        }
        Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eig;
        eig.computeDirect(cov);
        normal = eig.eigenvectors().col(0);
      }
      if (!(normal.squaredNorm() > 0)) normal = V3(0, 0, 1);
      normal.normalize();
      // Corners c + r (-+t1 -+t2), in the order that makes Embree's quad (u, v) the
      // coordinates along t1 and t2, from 0 to 1.
      const V3 t1 = normal.unitOrthogonal(), t2 = normal.cross(t1);
      const V3 centre = v3({g.positions[3 * i], g.positions[3 * i + 1], g.positions[3 * i + 2]});
      const double r = radii[i];
      const V3 corners[4] = {centre - r * t1 - r * t2, centre + r * t1 - r * t2,
                             centre + r * t1 + r * t2, centre - r * t1 + r * t2};
      for (int k = 0; k < 4; ++k) {
        for (int c = 0; c < 3; ++c) {
          v[12 * quadIndex + 3 * k + c] = static_cast<float>(corners[k][c]);
        }
      }
    }
  });
  info.kind = GeometryInfo::kSurfels;
  info.radii = radii.data();
  info.order = cache.order.data();
  attach(build, geom, info);
}

void Renderer::Impl::addSpheres(SceneBuild& build, const std::vector<float>& spheres,
                                std::array<float, 3> color) {
  if (spheres.empty()) return;
  RTCGeometry geom = acquire(build, RTC_GEOMETRY_TYPE_SPHERE_POINT);
  auto* v = static_cast<float*>(buffer(build, geom, RTC_BUFFER_TYPE_VERTEX, RTC_FORMAT_FLOAT4,
                                       4 * sizeof(float), spheres.size() / 4));
  std::copy(spheres.begin(), spheres.end(), v);
  GeometryInfo info;
  info.kind = GeometryInfo::kSpheres;
  info.color = color;
  attach(build, geom, info);
}

void Renderer::Impl::addObstacles(SceneBuild& build, const std::vector<RenderBody>& bodies,
                                  const Stage& stage) {
  // Obstacles are drawn in neutral grey, so the bodies stand out.
  std::vector<float> spheres;
  // Over mesh bodies, m; only sphere obstacles need it.
  double longestMeanEdge = 0;
  const bool anySphere =
      std::any_of(stage.obstacles.begin(), stage.obstacles.end(),
                  [](const StageObstacle& o) { return o.type == ObstacleType::kSphere; });
  for (size_t b = 0; anySphere && b < bodies.size(); ++b) {
    if (!bodies[b].geometry.isPointCloud()) {
      longestMeanEdge = std::max(longestMeanEdge, meanEdgeLength(bodies[b].geometry));
    }
  }
  for (const StageObstacle& o : stage.obstacles) {
    if (o.type == ObstacleType::kSphere) {
      // A mesh resting on a sphere has its nodes on the surface and its flat triangles a
      // chord below it, by the sagitta L^2 / (8 R) for edges of length L: drawn exactly,
      // the sphere pokes through the middle of every triangle in contact. It is drawn
      // inset by twice the sagitta of the meshes' mean edge (at most 5% of its radius).
      const double sagitta = longestMeanEdge * longestMeanEdge / (8 * o.radius);
      const double inset = std::min(2 * sagitta, 0.05 * o.radius);
      for (int c = 0; c < 3; ++c) spheres.push_back(static_cast<float>(o.center[c]));
      spheres.push_back(static_cast<float>(o.radius - inset));
    } else if (o.type == ObstacleType::kBox) {
      RTCGeometry geom = acquire(build, RTC_GEOMETRY_TYPE_QUAD);
      auto* v = static_cast<float*>(
          buffer(build, geom, RTC_BUFFER_TYPE_VERTEX, RTC_FORMAT_FLOAT3, 3 * sizeof(float), 8));
      for (int i = 0; i < 8; ++i) {
        for (int c = 0; c < 3; ++c) {
          const double sign = ((i >> c) & 1) != 0 ? 1.0 : -1.0;
          v[3 * i + c] = static_cast<float>(o.center[c] + sign * o.halfExtents[c]);
        }
      }
      constexpr uint32_t kFaces[6][4] = {{0, 2, 3, 1}, {4, 5, 7, 6}, {0, 1, 5, 4},
                                         {2, 6, 7, 3}, {0, 4, 6, 2}, {1, 3, 7, 5}};
      auto* q = static_cast<uint32_t*>(
          buffer(build, geom, RTC_BUFFER_TYPE_INDEX, RTC_FORMAT_UINT4, 4 * sizeof(uint32_t), 6));
      for (int f = 0; f < 6; ++f) std::copy(kFaces[f], kFaces[f] + 4, q + 4 * f);
      GeometryInfo info;
      info.kind = GeometryInfo::kBox;
      info.color = {0.55f, 0.55f, 0.58f};
      attach(build, geom, info);
    }
  }
  addSpheres(build, spheres, {0.55f, 0.55f, 0.58f});
}

// ---- Shading ----

Image Renderer::render(const std::vector<RenderBody>& bodies, const Stage& stage,
                       const Camera& camera) {
  const RenderSettings& s = impl_->settings;
  const Impl::FrameScene frame = impl_->buildScene(bodies, stage);
  const double extent = frame.extent;
  const std::vector<GeometryInfo>& infos = frame.infos;
  RTCScene scene = frame.scene;
  const bool sceneEmpty = infos.empty();
  const RTCBounds& sceneBounds = frame.bounds;
  static const GammaTable encode;

  // Camera frame.
  const V3 eye = v3(camera.eye);
  V3 forward = v3(camera.target) - eye;
  if (!(forward.norm() > 0)) throw InputError("camera: eye and target coincide");
  forward.normalize();
  V3 right = forward.cross(v3(camera.up));
  if (!(right.norm() > 1e-9)) right = forward.unitOrthogonal();
  right.normalize();
  const V3 camUp = right.cross(forward);
  const double tanHalf = std::tan(0.5 * camera.fovDegrees * std::numbers::pi / 180);
  const double aspect = static_cast<double>(s.width) / s.height;
  const double pixelAngle = 2 * tanHalf / s.height;

  // Key light from above, behind the camera's left shoulder: shadows fall back and to the
  // right of the bodies, onto ground the camera sees.
  const V3 up = v3(stage.up).normalized();
  V3 horizontalForward = forward - forward.dot(up) * up;
  if (horizontalForward.norm() < 1e-6) horizontalForward = up.unitOrthogonal();
  horizontalForward.normalize();
  const V3 lightD = (2.2 * up - 0.7 * right.normalized() - 0.5 * horizontalForward).normalized();
  const Vec3f light = toF(lightD);
  const Vec3f upF = toF(up);
  const V3 halfway = (lightD - forward).normalized();
  const Vec3f halfF = toF(halfway);

  const V3 groundN = v3(stage.groundNormal).normalized();
  const V3 groundP = v3(stage.groundPoint);
  V3 e1 = V3::UnitX() - V3::UnitX().dot(groundN) * groundN;
  if (e1.norm() < 0.3) e1 = V3::UnitY() - V3::UnitY().dot(groundN) * groundN;
  e1.normalize();
  const V3 e2 = groundN.cross(e1);
  const double spacing = gridSpacing(extent);
  const float lineHalfWidth = static_cast<float>(0.012 * spacing);
  const float eps = static_cast<float>(2e-4 * extent);

  // Rays go to Embree in packets of 16 (4x4 pixel tiles), which share BVH traversal work
  // between coherent rays: several times faster than one ray at a time. Each pixel is
  // still computed alone from the same inputs, whatever tile or thread it lands in.
  constexpr int32_t kTile = 4, kLanes = kTile * kTile;
  const int32_t tilesX = (s.width + kTile - 1) / kTile, tilesY = (s.height + kTile - 1) / kTile;
  const Vec3f eyeF = toF(eye), forwardF = toF(forward), rightF = toF(right), camUpF = toF(camUp);
  const float tanHalfF = static_cast<float>(tanHalf), aspectF = static_cast<float>(aspect);
  const float widthF = static_cast<float>(s.width), heightF = static_cast<float>(s.height);
  const float l[3] = {light.x, light.y, light.z};
  const SlabTest shadowSlab(l);
  // Ground quantities in float: shading precision, not geometry.
  const Vec3f groundNF = toF(groundN), e1F = toF(e1), e2F = toF(e2), eyeRelF = toF(eye - groundP);
  const float groundHeightF = static_cast<float>((groundP - eye).dot(groundN));
  const float groundLight = std::max(static_cast<float>(groundN.dot(lightD)), 0.0f);
  const float pixelAngleF = static_cast<float>(pixelAngle);
  const float spacingF = static_cast<float>(spacing), invSpacing = 1.0f / spacingF;
  const float groundTie = static_cast<float>(1e-4 * extent);
  const float invHazeDistance = static_cast<float>(1.0 / (6 * extent));
  const auto rayDir = [&](int32_t x, int32_t y) {
    const float sx = (2 * (static_cast<float>(x) + 0.5f) / widthF - 1) * tanHalfF * aspectF;
    const float sy = (1 - 2 * (static_cast<float>(y) + 0.5f) / heightF) * tanHalfF;
    return normalize({forwardF.x + sx * rightF.x + sy * camUpF.x,
                      forwardF.y + sx * rightF.y + sy * camUpF.y,
                      forwardF.z + sx * rightF.z + sy * camUpF.z});
  };
  Impl::Background& bg = impl_->background;
  {
    std::vector<double> key = {camera.eye[0],
                               camera.eye[1],
                               camera.eye[2],
                               camera.target[0],
                               camera.target[1],
                               camera.target[2],
                               camera.up[0],
                               camera.up[1],
                               camera.up[2],
                               camera.fovDegrees,
                               stage.up[0],
                               stage.up[1],
                               stage.up[2],
                               stage.groundPoint[0],
                               stage.groundPoint[1],
                               stage.groundPoint[2],
                               stage.groundNormal[0],
                               stage.groundNormal[1],
                               stage.groundNormal[2],
                               extent,
                               static_cast<double>(s.width),
                               static_cast<double>(s.height)};
    if (key != bg.key) {
      const size_t pixels = static_cast<size_t>(s.width) * s.height;
      bg.dirs.assign(3 * pixels, 0);
      bg.tGround.assign(pixels, 0);
      bg.lit.assign(3 * pixels, 0);
      bg.shadowed.assign(3 * pixels, 0);
      tbb::parallel_for(tbb::blocked_range<int32_t>(0, s.height), [&](const auto& rows) {
        for (int32_t y = rows.begin(); y < rows.end(); ++y) {
          for (int32_t x = 0; x < s.width; ++x) {
            const Vec3f dir = rayDir(x, y);
            const size_t i = static_cast<size_t>(y) * s.width + x;
            bg.dirs[3 * i] = dir.x;
            bg.dirs[3 * i + 1] = dir.y;
            bg.dirs[3 * i + 2] = dir.z;
            // Sky: a soft vertical gradient.
            const float h = std::clamp(dot(dir, upF), -1.0f, 1.0f);
            const float skyTop[3] = {0.42f, 0.55f, 0.72f}, skyHorizon[3] = {0.82f, 0.85f, 0.88f};
            const float m = std::sqrt(std::max(h, 0.0f));
            float lit[3], dark[3];
            for (int ch = 0; ch < 3; ++ch) {
              lit[ch] = dark[ch] = skyHorizon[ch] + m * (skyTop[ch] - skyHorizon[ch]);
            }
            const float denom = dot(dir, groundNF);
            float tg = std::numeric_limits<float>::infinity();
            if (denom < -1e-9f) tg = groundHeightF / denom;
            bg.tGround[i] = tg;
            if (std::isfinite(tg)) {
              const Vec3f q{eyeRelF.x + tg * dir.x, eyeRelF.y + tg * dir.y, eyeRelF.z + tg * dir.z};
              const float a = dot(q, e1F), c = dot(q, e2F);
              const float footprint = tg * pixelAngleF / std::max(std::abs(denom), 0.02f);
              const auto distToLine = [&](float coord) {
                const float f = coord * invSpacing - std::floor(coord * invSpacing);
                return std::min(f, 1 - f) * spacingF;
              };
              const float line = std::max(lineCoverage(distToLine(a), lineHalfWidth, footprint),
                                          lineCoverage(distToLine(c), lineHalfWidth, footprint));
              // Past a few hundred lines the grid would alias into moiré; it fades out.
              const float fade = 1.0f / (1.0f + 4.0f * footprint * invSpacing);
              const float albedo = 0.78f - 0.38f * line * fade;
              // Far ground melts into the horizon haze, hiding the plane's edge.
              const float haze = std::exp(-tg * invHazeDistance);
              const float tint[3] = {0.98f, 0.97f, 0.94f};
              for (int ch = 0; ch < 3; ++ch) {
                const float litShade = albedo * (0.32f + 0.68f * groundLight) * tint[ch];
                const float darkShade = albedo * 0.32f * tint[ch];
                lit[ch] = haze * litShade + (1 - haze) * lit[ch];
                dark[ch] = haze * darkShade + (1 - haze) * dark[ch];
              }
            }
            for (int ch = 0; ch < 3; ++ch) {
              bg.lit[3 * i + ch] = encode(lit[ch]);
              bg.shadowed[3 * i + ch] = encode(dark[ch]);
            }
          }
        }
      });
      bg.key = std::move(key);
    }
  }
  // The pixel rectangle that the screen projection of `points` covers (all of the picture
  // when one is behind the camera), grown by `margin` pixels.
  struct PixelRect {
    int32_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // [x0, x1) x [y0, y1)
    [[nodiscard]] bool contains(int32_t x, int32_t y) const {
      return x >= x0 && x < x1 && y >= y0 && y < y1;
    }
    [[nodiscard]] bool overlaps(int32_t x, int32_t y, int32_t w, int32_t h) const {
      return x < x1 && x + w > x0 && y < y1 && y + h > y0;
    }
  };
  const auto screenRect = [&](const V3(&points)[8], double margin) {
    double minX = std::numeric_limits<double>::infinity(), minY = minX, maxX = -minX, maxY = -minX;
    for (const V3& p : points) {
      const V3 rel = p - eye;
      const double z = rel.dot(forward);
      if (!(z > 1e-9)) return PixelRect{0, 0, s.width, s.height};
      const double px = (rel.dot(right) / (z * tanHalf * aspect) + 1) * 0.5 * s.width;
      const double py = (1 - rel.dot(camUp) / (z * tanHalf)) * 0.5 * s.height;
      minX = std::min(minX, px);
      maxX = std::max(maxX, px);
      minY = std::min(minY, py);
      maxY = std::max(maxY, py);
    }
    const auto clampTo = [](double v, int32_t hi) {
      return static_cast<int32_t>(std::clamp(v, 0.0, static_cast<double>(hi)));
    };
    return PixelRect{
        clampTo(std::floor(minX - margin), s.width), clampTo(std::floor(minY - margin), s.height),
        clampTo(std::ceil(maxX + margin), s.width), clampTo(std::ceil(maxY + margin), s.height)};
  };
  const auto boxCorners = [&](double pad, V3(&corners)[8]) {
    for (int corner = 0; corner < 8; ++corner) {
      corners[corner] =
          V3((corner & 1) != 0 ? sceneBounds.upper_x + pad : sceneBounds.lower_x - pad,
             (corner & 2) != 0 ? sceneBounds.upper_y + pad : sceneBounds.lower_y - pad,
             (corner & 4) != 0 ? sceneBounds.upper_z + pad : sceneBounds.lower_z - pad);
    }
  };
  // Primary rays outside the rectangle of the scene's bounds cannot hit anything: a pixel
  // whose centre ray can enter the box lies within a pixel of its projection.
  PixelRect objectRect;
  // Shadow rays from the ground can only be blocked where the ground sees the bounds
  // along the light: inside the shadow of the box on the ground, the parallel projection of
  // its corners (grown by the lift of the rays' origins), and a pixel around it.
  PixelRect shadowRect;
  if (!sceneEmpty) {
    V3 corners[8];
    boxCorners(0, corners);
    objectRect = screenRect(corners, 1);
    if (groundLight > 0) {
      boxCorners(2e-4 * extent, corners);
      const double lightN = lightD.dot(groundN);
      for (V3& p : corners) p -= ((p - groundP).dot(groundN) / lightN) * lightD;
      shadowRect = screenRect(corners, 2);
    }
  }
  // Pixels outside both rectangles show the lit background; the tiles that touch either
  // are traced.
  Image image;
  image.width = s.width;
  image.height = s.height;
  image.rgb = bg.lit;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, tilesY), [&](const auto& tileRows) {
    alignas(64) RTCRayHit16 rh;
    alignas(64) RTCRay16 shadow;
    alignas(64) int valid[kLanes];
    alignas(64) int shadowValid[kLanes];
    Vec3f dirs[kLanes], normals[kLanes];
    float tGround[kLanes];
    bool objectFirst[kLanes];
    for (int32_t ty = tileRows.begin(); ty < tileRows.end(); ++ty) {
      for (int32_t tx = 0; tx < tilesX; ++tx) {
        if (!objectRect.overlaps(tx * kTile, ty * kTile, kTile, kTile) &&
            !shadowRect.overlaps(tx * kTile, ty * kTile, kTile, kTile)) {
          continue;
        }
        bool anyPrimary = false;
        for (int k = 0; k < kLanes; ++k) {
          const int32_t x = tx * kTile + k % kTile, y = ty * kTile + k / kTile;
          const bool inside = x < s.width && y < s.height;
          const size_t pixel = inside ? static_cast<size_t>(y) * s.width + x : 0;
          const Vec3f dir =
              inside ? Vec3f{bg.dirs[3 * pixel], bg.dirs[3 * pixel + 1], bg.dirs[3 * pixel + 2]}
                     : Vec3f{0, 0, 1};
          dirs[k] = dir;
          valid[k] = inside && objectRect.contains(x, y) ? -1 : 0;
          anyPrimary = anyPrimary || valid[k] != 0;
          rh.ray.org_x[k] = eyeF.x;
          rh.ray.org_y[k] = eyeF.y;
          rh.ray.org_z[k] = eyeF.z;
          rh.ray.dir_x[k] = dir.x;
          rh.ray.dir_y[k] = dir.y;
          rh.ray.dir_z[k] = dir.z;
          rh.ray.tnear[k] = 0;
          rh.ray.tfar[k] = std::numeric_limits<float>::infinity();
          rh.ray.mask[k] = 0xFFFFFFFF;
          rh.ray.time[k] = 0;
          rh.ray.flags[k] = 0;
          rh.hit.geomID[k] = RTC_INVALID_GEOMETRY_ID;
          rh.hit.instID[0][k] = RTC_INVALID_GEOMETRY_ID;
        }
        if (anyPrimary) {
          RTCIntersectContext context;
          rtcInitIntersectContext(&context);
          context.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
          rtcIntersect16(valid, scene, &context, &rh);
        }
        // Shading inputs, and the shadow ray of each lane that needs one.
        bool anyShadow = false;
        for (int k = 0; k < kLanes; ++k) {
          const Vec3f& dir = dirs[k];
          const int32_t x = tx * kTile + k % kTile, y = ty * kTile + k / kTile;
          const bool inside = x < s.width && y < s.height;
          tGround[k] = inside ? bg.tGround[static_cast<size_t>(y) * s.width + x]
                              : std::numeric_limits<float>::infinity();
          const bool hitObject = valid[k] != 0 && rh.hit.geomID[k] != RTC_INVALID_GEOMETRY_ID;
          // A body lying on the ground wins the tie with it.
          objectFirst[k] = hitObject && rh.ray.tfar[k] < tGround[k] + groundTie;
          Vec3f origin{0, 0, 0};
          bool needShadow = false;
          if (objectFirst[k]) {
            const GeometryInfo& info = infos[rh.hit.geomID[k]];
            Vec3f n = normalize({rh.hit.Ng_x[k], rh.hit.Ng_y[k], rh.hit.Ng_z[k]});
            if (info.kind == GeometryInfo::kMesh) {
              const int32_t* tri =
                  &info.geometry->triangles[3 * static_cast<size_t>(rh.hit.primID[k])];
              const float w[3] = {1 - rh.hit.u[k] - rh.hit.v[k], rh.hit.u[k], rh.hit.v[k]};
              Vec3f sn{0, 0, 0};
              for (int c = 0; c < 3; ++c) {
                const float* vn = info.normals + 3 * static_cast<size_t>(tri[c]);
                sn = {sn.x + w[c] * vn[0], sn.y + w[c] * vn[1], sn.z + w[c] * vn[2]};
              }
              if (dot(sn, sn) > 0) {
                // Keep the geometric side: interpolated normals may point away on thin folds.
                sn = normalize(sn);
                if (dot(sn, n) < 0) sn = {-sn.x, -sn.y, -sn.z};
                n = sn;
              }
            }
            // Thin shells are seen from both sides: light the side facing the camera.
            if (dot(n, dir) > 0) n = {-n.x, -n.y, -n.z};
            normals[k] = n;
            const float t = rh.ray.tfar[k];
            // Overlapping neighbour discs would shadow a surfel (dark speckles): its shadow
            // ray starts half a disc radius off the surface.
            const float lift = info.radii != nullptr
                                   ? std::max(eps, 0.5f * info.radii[info.order[rh.hit.primID[k]]])
                                   : eps;
            origin = {eyeF.x + t * dir.x + lift * n.x, eyeF.y + t * dir.y + lift * n.y,
                      eyeF.z + t * dir.z + lift * n.z};
            needShadow = dot(n, light) > 0;
          } else if (std::isfinite(tGround[k])) {
            const float t = tGround[k], lift = static_cast<float>(1e-4 * extent);
            origin = {eyeF.x + t * dir.x + lift * groundNF.x,
                      eyeF.y + t * dir.y + lift * groundNF.y,
                      eyeF.z + t * dir.z + lift * groundNF.z};
            needShadow = groundLight > 0;
          }
          const float o[3] = {origin.x, origin.y, origin.z};
          needShadow = needShadow && !sceneEmpty && shadowSlab.hits(o, sceneBounds);
          shadowValid[k] = needShadow ? -1 : 0;
          anyShadow = anyShadow || needShadow;
          shadow.org_x[k] = origin.x;
          shadow.org_y[k] = origin.y;
          shadow.org_z[k] = origin.z;
          shadow.dir_x[k] = light.x;
          shadow.dir_y[k] = light.y;
          shadow.dir_z[k] = light.z;
          shadow.tnear[k] = 0;
          shadow.tfar[k] = std::numeric_limits<float>::infinity();
          shadow.mask[k] = 0xFFFFFFFF;
          shadow.time[k] = 0;
          shadow.flags[k] = 0;
        }
        if (anyShadow) {
          RTCIntersectContext context;
          rtcInitIntersectContext(&context);
          // Shadow rays share their direction and start near each other: coherent too
          // (15% faster than the default incoherent traversal).
          context.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
          rtcOccluded16(shadowValid, scene, &context, &shadow);
        }
        for (int k = 0; k < kLanes; ++k) {
          const int32_t x = tx * kTile + k % kTile, y = ty * kTile + k / kTile;
          if (x >= s.width || y >= s.height) continue;
          // Lit when facing the light and the shadow ray (if cast) was not blocked; Embree
          // sets tfar to -inf on a hit.
          const bool blocked = shadowValid[k] != 0 && shadow.tfar[k] < 0;
          if (objectFirst[k]) {
            const GeometryInfo& info = infos[rh.hit.geomID[k]];
            const Vec3f& n = normals[k];
            float rgb[3];
            float color[3] = {info.color[0], info.color[1], info.color[2]};
            // The triangle (mesh) or the point (surfels) hit.
            const uint32_t prim =
                info.order != nullptr ? info.order[rh.hit.primID[k]] : rh.hit.primID[k];
            if (info.kind == GeometryInfo::kMesh && info.colors != nullptr) {
              const int32_t* tri = &info.geometry->triangles[3 * static_cast<size_t>(prim)];
              const float w[3] = {1 - rh.hit.u[k] - rh.hit.v[k], rh.hit.u[k], rh.hit.v[k]};
              for (int ch = 0; ch < 3; ++ch) {
                color[ch] = w[0] * info.colors[3 * tri[0] + ch] +
                            w[1] * info.colors[3 * tri[1] + ch] +
                            w[2] * info.colors[3 * tri[2] + ch];
              }
            } else if (info.kind == GeometryInfo::kSurfels && info.colors != nullptr) {
              std::copy(info.colors + 3 * static_cast<size_t>(prim),
                        info.colors + 3 * static_cast<size_t>(prim) + 3, color);
            }
            if (info.kind == GeometryInfo::kMesh && s.wireframe &&
                onEdge(*info.geometry, prim, rh.hit.u[k], rh.hit.v[k],
                       rh.ray.tfar[k] * pixelAngleF)) {
              for (float& ch : color) ch *= kWireShade;
            }
            const float ndl = dot(n, light);
            const float lit = ndl > 0 && !blocked ? 1.0f : 0.0f;
            const float sky = 0.5f + 0.5f * dot(n, upF);
            const float diffuse = 0.12f + 0.16f * sky + 0.78f * lit * std::max(ndl, 0.0f);
            const float nh = std::max(dot(n, halfF), 0.0f);
            // nh^48 by repeated squaring (powf per pixel was measurable).
            const float nh2 = nh * nh, nh4 = nh2 * nh2, nh8 = nh4 * nh4, nh16 = nh8 * nh8;
            const float specular = lit * 0.18f * nh16 * nh16 * nh16;
            for (int ch = 0; ch < 3; ++ch) rgb[ch] = color[ch] * diffuse + specular;
            uint8_t* px = image.at(x, y);
            for (int ch = 0; ch < 3; ++ch) px[ch] = encode(rgb[ch]);
          } else if (blocked) {  // unblocked: the lit background is there already
            const uint8_t* from = &bg.shadowed[3 * (static_cast<size_t>(y) * s.width + x)];
            uint8_t* px = image.at(x, y);
            px[0] = from[0];
            px[1] = from[1];
            px[2] = from[2];
          }
        }
      }
    }
  });
  checkDevice(impl_->device, "ray casting");
  return image;
}

}  // namespace shellsim
