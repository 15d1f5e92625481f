// CPU ray casting of frames with Embree.
//
// Why Embree: it is the well-kept CPU ray tracing kernel (Intel, Apache-2.0, packaged by
// Debian as libembree-dev), it needs no display or GPU, it builds a BVH over a few hundred
// thousand primitives in milliseconds with TBB (the tasking system shellsim already uses)
// and it has the two primitives we need natively: triangles (smooth-shaded by interpolating
// vertex normals with the hit's barycentrics) and oriented discs
// (RTC_GEOMETRY_TYPE_ORIENTED_DISC_POINT), which make a point cloud read as a closed
// surface (surfel splatting by ray casting; Zwicker et al. 2001 for the idea of surfels).
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

#include "core/spatial.hpp"
#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/render.hpp"

namespace shellsim {

namespace {

using V3 = Eigen::Vector3d;
V3 v3(const Vec3d& a) { return {a[0], a[1], a[2]}; }

// Neighbours per point for surfel radii and normals: 6 is the ring of a regular
// triangulation and enough for a stable plane fit.
constexpr int kSurfelNeighbours = 6;
// Radius = factor x mean distance to those neighbours. On a square grid of spacing h the
// mean is ~1.14 h, so discs get ~0.9 h: they overlap and cover the holes between points.
constexpr double kSurfelRadiusFactor = 0.8;

// Palette for bodies and pieces: light, saturated and far apart in hue, so that
// neighbouring fragments read as separate under shading (Okabe-Ito inspired).
constexpr float kPalette[][3] = {
    {0.90f, 0.55f, 0.20f}, {0.25f, 0.55f, 0.85f}, {0.35f, 0.70f, 0.40f}, {0.85f, 0.35f, 0.45f},
    {0.60f, 0.45f, 0.80f}, {0.90f, 0.80f, 0.30f}, {0.30f, 0.75f, 0.75f}, {0.75f, 0.55f, 0.45f},
};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

void checkDevice(RTCDevice device, const char* what) {
  const RTCError error = rtcGetDeviceError(device);
  if (error != RTC_ERROR_NONE) {
    throw std::runtime_error(std::string("Embree error ") + std::to_string(error) + " in " + what);
  }
}

// The k nearest neighbours of every point (excluding itself), (nPoints, k).
std::vector<uint32_t> nearestNeighbours(const std::vector<double>& positions, int k) {
  const size_t n = positions.size() / 3;
  std::vector<uint32_t> result(n * static_cast<size_t>(k), 0);
  if (n < 2) return result;
  const PointKdTree tree(positions);
  const size_t want = std::min<size_t>(static_cast<size_t>(k) + 1, n);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1024), [&](const auto& range) {
    std::vector<uint32_t> idx(want);
    std::vector<double> d2(want);
    for (size_t i = range.begin(); i < range.end(); ++i) {
      const size_t found = tree.nearest(&positions[3 * i], want, idx.data(), d2.data());
      size_t out = 0;
      for (size_t j = 0; j < found && out < static_cast<size_t>(k); ++j) {
        if (idx[j] != i) result[i * k + out++] = idx[j];
      }
      // Fewer points than k+1: repeat the last neighbour found.
      for (; out < static_cast<size_t>(k); ++out) result[i * k + out] = result[i * k + out - 1];
    }
  });
  return result;
}

}  // namespace

std::vector<float> surfelRadii(const Geometry& cloud) {
  const std::vector<uint32_t> nbrs = nearestNeighbours(cloud.positions, kSurfelNeighbours);
  std::vector<float> radii(static_cast<size_t>(cloud.vertexCount()), 0.0f);
  detail::radiiFromNeighbours(cloud.positions, nbrs, kSurfelNeighbours, radii);
  return radii;
}

void detail::radiiFromNeighbours(const std::vector<double>& positions,
                                 const std::vector<uint32_t>& nbrs, int k,
                                 std::vector<float>& radii) {
  const size_t n = positions.size() / 3;
  radii.assign(n, 0.0f);
  if (n < 2) {
    if (n == 1) radii[0] = 0.01f;
    return;
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4096), [&](const auto& range) {
    for (size_t i = range.begin(); i < range.end(); ++i) {
      double sum = 0;
      for (int j = 0; j < k; ++j) {
        const size_t o = nbrs[i * k + j];
        const double dx = positions[3 * o] - positions[3 * i];
        const double dy = positions[3 * o + 1] - positions[3 * i + 1];
        const double dz = positions[3 * o + 2] - positions[3 * i + 2];
        sum += std::sqrt(dx * dx + dy * dy + dz * dz);
      }
      radii[i] = static_cast<float>(kSurfelRadiusFactor * sum / k);
    }
  });
}

std::vector<float> componentColors(const Geometry& mesh, int32_t offset) {
  const size_t n = static_cast<size_t>(mesh.vertexCount());
  // Union-find over triangle edges; the root of a set is its lowest vertex index.
  std::vector<int32_t> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = static_cast<int32_t>(i);
  const auto find = [&](int32_t a) {
    while (parent[a] != a) a = parent[a] = parent[parent[a]];
    return a;
  };
  for (size_t t = 0; t + 2 < mesh.triangles.size(); t += 3) {
    for (int e = 0; e < 2; ++e) {
      const int32_t a = find(mesh.triangles[t + e]), b = find(mesh.triangles[t + e + 1]);
      if (a < b) parent[b] = a;
      if (b < a) parent[a] = b;
    }
  }
  std::vector<int32_t> componentOf(n, -1);
  int32_t count = 0;
  std::vector<float> colors(3 * n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t root = find(static_cast<int32_t>(i));
    if (componentOf[root] < 0) componentOf[root] = count++;
    const float* c = kPalette[(componentOf[root] + offset) % kPaletteSize];
    std::copy(c, c + 3, &colors[3 * i]);
  }
  return colors;
}

std::array<float, 3> detail::paletteColor(int32_t index) {
  const float* c = kPalette[index % kPaletteSize];
  return {c[0], c[1], c[2]};
}

Camera fitCamera(const Bounds& bounds, const Vec3d& up, double aspect) {
  const V3 lo = v3({bounds.min[0], bounds.min[1], bounds.min[2]});
  const V3 hi = v3({bounds.max[0], bounds.max[1], bounds.max[2]});
  const V3 centre = 0.5 * (lo + hi);
  const double radius = std::max(0.5 * (hi - lo).norm(), 1e-3);
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
    distance = std::max({distance, z + std::abs(rel.dot(camRight)) / tanH,
                         z + std::abs(rel.dot(camUp)) / tanV});
  }
  (void)radius;
  const V3 eye = centre + distance * dir;
  camera.eye = {eye.x(), eye.y(), eye.z()};
  camera.target = {centre.x(), centre.y(), centre.z()};
  camera.up = {u.x(), u.y(), u.z()};
  return camera;
}

struct Renderer::Impl {
  RenderSettings settings;
  RTCDevice device = nullptr;
  // Neighbour lists of point-cloud bodies from the first frame they appeared in, reused
  // while the point count stays the same: radii and normals then follow the deformation
  // at O(n) per frame instead of a kNN search (which costs more than the ray casting).
  struct CloudCache {
    size_t points = 0;
    std::vector<uint32_t> nbrs;  // (nPoints, kSurfelNeighbours)
  };
  std::vector<CloudCache> clouds;  // per body index

  ~Impl() {
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

const RenderSettings& Renderer::settings() const { return impl_->settings; }

namespace {

// What a hit on each Embree geometry means.
struct GeometryInfo {
  enum Kind { kMesh, kSurfels, kSpheres, kBox } kind = kMesh;
  const Geometry* geometry = nullptr;  // kMesh: smooth normals; kMesh/kSurfels: colours
  const float* normals = nullptr;      // kMesh: (nVertices, 3) vertex normals
  const float* colors = nullptr;       // (nVertices, 3) or nullptr
  std::array<float, 3> color{};
};

struct Vec3f {
  float x, y, z;
};

float dot(const Vec3f& a, const Vec3f& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
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

// Slab test of a ray against a box: rays that miss the bounds of every body and obstacle
// (most of the sky and ground) skip Embree, whose per-call overhead dominated there.
bool hitsBox(const float org[3], const float dir[3], const RTCBounds& b) {
  const float lo[3] = {b.lower_x, b.lower_y, b.lower_z}, hi[3] = {b.upper_x, b.upper_y, b.upper_z};
  float t0 = 0, t1 = std::numeric_limits<float>::infinity();
  for (int c = 0; c < 3; ++c) {
    if (dir[c] == 0) {
      if (org[c] < lo[c] || org[c] > hi[c]) return false;
      continue;
    }
    const float inv = 1.0f / dir[c];
    float a = (lo[c] - org[c]) * inv, bb = (hi[c] - org[c]) * inv;
    if (a > bb) std::swap(a, bb);
    t0 = std::max(t0, a);
    t1 = std::min(t1, bb);
    if (t0 > t1) return false;
  }
  return true;
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
float lineCoverage(double d, double halfWidth, double footprint) {
  const double w = std::max(footprint, 1e-12);
  return static_cast<float>(std::clamp((halfWidth + 0.5 * w - d) / w, 0.0, 1.0) *
                            std::min(1.0, 2 * halfWidth / w));
}

}  // namespace

Image Renderer::render(const std::vector<RenderBody>& bodies, const Stage& stage,
                       const Camera& camera) {
  const RenderSettings& s = impl_->settings;
  RTCDevice device = impl_->device;
  RTCScene scene = rtcNewScene(device);
  struct SceneGuard {
    RTCScene scene;
    ~SceneGuard() { rtcReleaseScene(scene); }
  } guard{scene};
  rtcSetSceneFlags(scene, RTC_SCENE_FLAG_NONE);

  const double extent = std::max(stage.extent, 1e-6);
  std::vector<GeometryInfo> infos;
  std::vector<std::vector<float>> ownedFloats;  // per-frame arrays the infos point into
  ownedFloats.reserve(4 * bodies.size() + 4);
  if (impl_->clouds.size() < bodies.size()) impl_->clouds.resize(bodies.size());

  const auto attach = [&](RTCGeometry geometry, GeometryInfo info) {
    rtcCommitGeometry(geometry);
    const unsigned id = rtcAttachGeometry(scene, geometry);
    rtcReleaseGeometry(geometry);
    if (infos.size() <= id) infos.resize(id + 1);
    infos[id] = info;
  };

  std::vector<float> pinSpheres;  // (nPins, 4): x, y, z, radius
  for (size_t b = 0; b < bodies.size(); ++b) {
    const Geometry& g = bodies[b].geometry;
    const size_t n = static_cast<size_t>(g.vertexCount());
    if (n == 0) continue;
    GeometryInfo info;
    info.geometry = &g;
    info.color = bodies[b].color;
    info.colors = g.colors.size() == 3 * n ? g.colors.data() : nullptr;
    if (!g.isPointCloud()) {
      RTCGeometry geom = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_TRIANGLE);
      auto* v = static_cast<float*>(rtcSetNewGeometryBuffer(
          geom, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 3 * sizeof(float), n));
      for (size_t i = 0; i < 3 * n; ++i) v[i] = static_cast<float>(g.positions[i]);
      const size_t nt = static_cast<size_t>(g.triangleCount());
      auto* t = static_cast<uint32_t*>(rtcSetNewGeometryBuffer(
          geom, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3, 3 * sizeof(uint32_t), nt));
      for (size_t i = 0; i < 3 * nt; ++i) t[i] = static_cast<uint32_t>(g.triangles[i]);
      // Smooth shading needs vertex normals; frames from shellsim carry them.
      std::vector<float>& normals = ownedFloats.emplace_back(3 * n);
      if (g.normals.size() == 3 * n) {
        for (size_t i = 0; i < 3 * n; ++i) normals[i] = static_cast<float>(g.normals[i]);
      } else {
        Geometry copy;
        copy.positions = g.positions;
        copy.triangles = g.triangles;
        computeVertexNormals(copy);
        for (size_t i = 0; i < 3 * n; ++i) normals[i] = static_cast<float>(copy.normals[i]);
      }
      info.normals = normals.data();
      info.kind = GeometryInfo::kMesh;
      attach(geom, info);
    } else {
      Impl::CloudCache& cache = impl_->clouds[b];
      if (cache.points != n) {
        cache.nbrs = nearestNeighbours(g.positions, kSurfelNeighbours);
        cache.points = n;
      }
      std::vector<float> radii;
      detail::radiiFromNeighbours(g.positions, cache.nbrs, kSurfelNeighbours, radii);
      RTCGeometry geom = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_ORIENTED_DISC_POINT);
      auto* v = static_cast<float*>(rtcSetNewGeometryBuffer(
          geom, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT4, 4 * sizeof(float), n));
      auto* nv = static_cast<float*>(rtcSetNewGeometryBuffer(
          geom, RTC_BUFFER_TYPE_NORMAL, 0, RTC_FORMAT_FLOAT3, 3 * sizeof(float), n));
      const bool haveNormals = g.normals.size() == 3 * n;
      tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 4096), [&](const auto& range) {
        for (size_t i = range.begin(); i < range.end(); ++i) {
          for (int c = 0; c < 3; ++c) v[4 * i + c] = static_cast<float>(g.positions[3 * i + c]);
          v[4 * i + 3] = radii[i];
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
          for (int c = 0; c < 3; ++c) nv[3 * i + c] = static_cast<float>(normal[c]);
        }
      });
      info.kind = GeometryInfo::kSurfels;
      attach(geom, info);
    }
    if (s.showPins) {
      for (const int32_t p : bodies[b].pinned) {
        if (p < 0 || static_cast<size_t>(p) >= n) continue;
        for (int c = 0; c < 3; ++c) pinSpheres.push_back(static_cast<float>(g.positions[3 * p + c]));
        pinSpheres.push_back(static_cast<float>(0.006 * extent));
      }
    }
  }
  const auto addSpheres = [&](const std::vector<float>& spheres, std::array<float, 3> color) {
    if (spheres.empty()) return;
    RTCGeometry geom = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_SPHERE_POINT);
    auto* v = static_cast<float*>(rtcSetNewGeometryBuffer(
        geom, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT4, 4 * sizeof(float), spheres.size() / 4));
    std::copy(spheres.begin(), spheres.end(), v);
    GeometryInfo info;
    info.kind = GeometryInfo::kSpheres;
    info.color = color;
    attach(geom, info);
  };
  addSpheres(pinSpheres, {0.85f, 0.1f, 0.1f});
  {
    // Obstacles are drawn in neutral grey, so the bodies stand out.
    std::vector<float> spheres;
    for (const StageObstacle& o : stage.obstacles) {
      if (o.type == ObstacleType::kSphere) {
        for (int c = 0; c < 3; ++c) spheres.push_back(static_cast<float>(o.center[c]));
        spheres.push_back(static_cast<float>(o.radius));
      } else if (o.type == ObstacleType::kBox) {
        RTCGeometry geom = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_QUAD);
        auto* v = static_cast<float*>(rtcSetNewGeometryBuffer(
            geom, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 3 * sizeof(float), 8));
        for (int i = 0; i < 8; ++i) {
          for (int c = 0; c < 3; ++c) {
            const double sign = ((i >> c) & 1) != 0 ? 1.0 : -1.0;
            v[3 * i + c] = static_cast<float>(o.center[c] + sign * o.halfExtents[c]);
          }
        }
        constexpr uint32_t kFaces[6][4] = {{0, 2, 3, 1}, {4, 5, 7, 6}, {0, 1, 5, 4},
                                           {2, 6, 7, 3}, {0, 4, 6, 2}, {1, 3, 7, 5}};
        auto* q = static_cast<uint32_t*>(rtcSetNewGeometryBuffer(
            geom, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT4, 4 * sizeof(uint32_t), 6));
        for (int f = 0; f < 6; ++f) std::copy(kFaces[f], kFaces[f] + 4, q + 4 * f);
        GeometryInfo info;
        info.kind = GeometryInfo::kBox;
        info.color = {0.55f, 0.55f, 0.58f};
        attach(geom, info);
      }
    }
    addSpheres(spheres, {0.55f, 0.55f, 0.58f});
  }
  rtcCommitScene(scene);
  checkDevice(device, "building the scene");
  const bool sceneEmpty = infos.empty();
  RTCBounds sceneBounds;
  rtcGetSceneBounds(scene, &sceneBounds);
  {
    // Grown a little: the slab test must never reject a ray that Embree would hit.
    const float pad = static_cast<float>(1e-3 * extent);
    sceneBounds.lower_x -= pad;
    sceneBounds.lower_y -= pad;
    sceneBounds.lower_z -= pad;
    sceneBounds.upper_x += pad;
    sceneBounds.upper_y += pad;
    sceneBounds.upper_z += pad;
  }
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
  const double lineHalfWidth = 0.012 * spacing;
  const float eps = static_cast<float>(2e-4 * extent);

  Image image(s.width, s.height);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, s.height, 4), [&](const auto& rows) {
    RTCIntersectContext context;
    for (int32_t y = rows.begin(); y < rows.end(); ++y) {
      for (int32_t x = 0; x < s.width; ++x) {
        const double sx = (2 * (x + 0.5) / s.width - 1) * tanHalf * aspect;
        const double sy = (1 - 2 * (y + 0.5) / s.height) * tanHalf;
        const V3 dirD = (forward + sx * right + sy * camUp).normalized();
        const Vec3f dir = toF(dirD);

        RTCRayHit rh;
        rh.ray.org_x = static_cast<float>(eye.x());
        rh.ray.org_y = static_cast<float>(eye.y());
        rh.ray.org_z = static_cast<float>(eye.z());
        rh.ray.dir_x = dir.x;
        rh.ray.dir_y = dir.y;
        rh.ray.dir_z = dir.z;
        rh.ray.tnear = 0;
        rh.ray.tfar = std::numeric_limits<float>::infinity();
        rh.ray.mask = 0xFFFFFFFF;
        rh.ray.time = 0;
        rh.ray.flags = 0;
        rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
        rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
        const float org[3] = {rh.ray.org_x, rh.ray.org_y, rh.ray.org_z};
        const float dirA[3] = {dir.x, dir.y, dir.z};
        if (!sceneEmpty && hitsBox(org, dirA, sceneBounds)) {
          rtcInitIntersectContext(&context);
          context.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
          rtcIntersect1(scene, &context, &rh);
        }

        // Ground plane hit, analytically (an infinite plane is no BVH primitive).
        const double denom = dirD.dot(groundN);
        double tGround = std::numeric_limits<double>::infinity();
        if (denom < -1e-9) tGround = (groundP - eye).dot(groundN) / denom;
        const bool hitObject = rh.hit.geomID != RTC_INVALID_GEOMETRY_ID;
        const bool objectFirst = hitObject && rh.ray.tfar < tGround;

        const auto shadowed = [&](const Vec3f& origin) {
          const float o[3] = {origin.x, origin.y, origin.z};
          const float l[3] = {light.x, light.y, light.z};
          if (sceneEmpty || !hitsBox(o, l, sceneBounds)) return false;
          RTCRay ray;
          ray.org_x = origin.x;
          ray.org_y = origin.y;
          ray.org_z = origin.z;
          ray.dir_x = light.x;
          ray.dir_y = light.y;
          ray.dir_z = light.z;
          ray.tnear = 0;
          ray.tfar = std::numeric_limits<float>::infinity();
          ray.mask = 0xFFFFFFFF;
          ray.time = 0;
          ray.flags = 0;
          RTCIntersectContext shadowContext;
          rtcInitIntersectContext(&shadowContext);
          rtcOccluded1(scene, &shadowContext, &ray);
          return ray.tfar < 0;  // Embree sets tfar = -inf on a hit
        };

        float rgb[3];
        if (objectFirst) {
          const GeometryInfo& info = infos[rh.hit.geomID];
          Vec3f n = normalize({rh.hit.Ng_x, rh.hit.Ng_y, rh.hit.Ng_z});
          float color[3] = {info.color[0], info.color[1], info.color[2]};
          if (info.kind == GeometryInfo::kMesh) {
            const int32_t* tri = &info.geometry->triangles[3 * static_cast<size_t>(rh.hit.primID)];
            const float w[3] = {1 - rh.hit.u - rh.hit.v, rh.hit.u, rh.hit.v};
            Vec3f sn{0, 0, 0};
            float c[3] = {0, 0, 0};
            for (int k = 0; k < 3; ++k) {
              const float* vn = info.normals + 3 * static_cast<size_t>(tri[k]);
              sn = {sn.x + w[k] * vn[0], sn.y + w[k] * vn[1], sn.z + w[k] * vn[2]};
              if (info.colors != nullptr) {
                for (int ch = 0; ch < 3; ++ch) c[ch] += w[k] * info.colors[3 * tri[k] + ch];
              }
            }
            if (dot(sn, sn) > 0) {
              // Keep the geometric side: interpolated normals may point away on thin folds.
              sn = normalize(sn);
              if (dot(sn, n) < 0) sn = {-sn.x, -sn.y, -sn.z};
              n = sn;
            }
            if (info.colors != nullptr) std::copy(c, c + 3, color);
          } else if (info.kind == GeometryInfo::kSurfels && info.colors != nullptr) {
            std::copy(info.colors + 3 * static_cast<size_t>(rh.hit.primID),
                      info.colors + 3 * static_cast<size_t>(rh.hit.primID) + 3, color);
          }
          // Thin shells are seen from both sides: light the side facing the camera.
          if (dot(n, dir) > 0) n = {-n.x, -n.y, -n.z};
          const float t = rh.ray.tfar;
          const Vec3f p{rh.ray.org_x + t * dir.x + eps * n.x, rh.ray.org_y + t * dir.y + eps * n.y,
                        rh.ray.org_z + t * dir.z + eps * n.z};
          const float ndl = dot(n, light);
          const float lit = ndl > 0 && !shadowed(p) ? 1.0f : 0.0f;
          const float sky = 0.5f + 0.5f * dot(n, upF);
          const float diffuse = 0.12f + 0.16f * sky + 0.78f * lit * std::max(ndl, 0.0f);
          const float nh = std::max(dot(n, halfF), 0.0f);
          const float specular = lit * 0.18f * std::pow(nh, 48.0f);
          for (int ch = 0; ch < 3; ++ch) rgb[ch] = color[ch] * diffuse + specular;
        } else {
          // Sky: a soft vertical gradient.
          const float h = std::clamp(dot(dir, upF), -1.0f, 1.0f);
          const float skyTop[3] = {0.42f, 0.55f, 0.72f}, skyHorizon[3] = {0.82f, 0.85f, 0.88f};
          const float m = std::sqrt(std::max(h, 0.0f));
          for (int ch = 0; ch < 3; ++ch) rgb[ch] = skyHorizon[ch] + m * (skyTop[ch] - skyHorizon[ch]);
          if (std::isfinite(tGround)) {
            const V3 q = eye + tGround * dirD;
            const double a = (q - groundP).dot(e1), c = (q - groundP).dot(e2);
            const double footprint = tGround * pixelAngle / std::max(std::abs(denom), 0.02);
            const auto distToLine = [&](double coord) {
              const double f = coord / spacing - std::floor(coord / spacing);
              return std::min(f, 1 - f) * spacing;
            };
            const float line = std::max(lineCoverage(distToLine(a), lineHalfWidth, footprint),
                                        lineCoverage(distToLine(c), lineHalfWidth, footprint));
            // Past a few hundred lines the grid would alias into moiré; it fades out.
            const float fade = static_cast<float>(1.0 / (1.0 + 4.0 * footprint / spacing));
            const float albedo = 0.78f - 0.38f * line * fade;
            const Vec3f gp = toF(q + 1e-4 * extent * groundN);
            const float ndl = std::max(static_cast<float>(groundN.dot(lightD)), 0.0f);
            const float lit = shadowed(gp) ? 0.0f : 1.0f;
            const float shade = albedo * (0.32f + 0.68f * lit * ndl);
            // Far ground melts into the horizon haze, hiding the plane's edge.
            const float haze = static_cast<float>(std::exp(-tGround / (6 * extent)));
            const float ground[3] = {shade * 0.98f, shade * 0.97f, shade * 0.94f};
            for (int ch = 0; ch < 3; ++ch) rgb[ch] = haze * ground[ch] + (1 - haze) * rgb[ch];
          }
        }
        uint8_t* px = image.at(x, y);
        for (int ch = 0; ch < 3; ++ch) px[ch] = encode(rgb[ch]);
      }
    }
  });
  checkDevice(device, "ray casting");
  return image;
}

}  // namespace shellsim
