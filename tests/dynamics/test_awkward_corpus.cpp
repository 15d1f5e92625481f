// Awkward meshes dropped with every model (issue 24): a corpus of the meshes users bring
// (slivers, non-manifold junctions, open boundaries, stray components, seams, flipped
// triangles, flat fans, huge and tiny scales, and two of the shared models), each dropped
// 10 cm onto a floor with friction by every registered model, through the public API as a
// new user would (default step, default integrator, no tuning).
// Each run must end in one of two ways:
//   refused  the body is refused when it is added (InputError naming the body and what is
//            wrong), i.e. at validation time, before a frame is written;
//   rests    it runs to the end with no energy gain beyond the integrator's oscillation
//            (total energy never above its start by more than 2% of the drop's energy scale,
//            m g (drop + height)), its drawn surface never more than 1 mm below the floor,
//            and at the end a kinetic energy below 5% of the energy released (at least that
//            of the 10 cm fall, m g 0.1 m; a body that falls in on itself releases more),
//            within a step budget: more than 2e5 steps per simulated second
//            is a crawl unless the set-up warned that the run takes millions of steps or
//            that slivers set its step;
//   warned   over that budget, and warned so after the first frame, as `shellsim run`
//            does (the tiny sphere; the teapot's slivers): stopped there.
// A run that stops with a NumericalError mid-way, or one that breaks a bound, fails.
// Every run prints a row of the table that issue 24's note shows ("| corpus |" lines).
// SHELLSIM_CORPUS_DIR=folder also writes each mesh there as OBJ (for contact sheets).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

constexpr double kPi = std::numbers::pi;

void addTriangle(Geometry& g, int32_t a, int32_t b, int32_t c) {
  g.triangles.insert(g.triangles.end(), {a, b, c});
}

int32_t addVertex(Geometry& g, double x, double y, double z) {
  g.positions.insert(g.positions.end(), {x, y, z});
  return g.vertexCount() - 1;
}

// A UV sphere of `segments` longitudes and `rings` latitude bands, radius r. With many
// segments and few rings its triangles are long and thin (slivers); `seam` gives the first
// longitude its own copy of the vertices for the last column of triangles, as a UV-mapped
// mesh has.
Geometry uvSphere(double r, int segments, int rings, bool seam = false) {
  Geometry g;
  const int32_t top = addVertex(g, 0, 0, r);
  const int columns = seam ? segments + 1 : segments;
  for (int j = 1; j < rings; ++j) {
    const double theta = kPi * j / rings;
    for (int i = 0; i < columns; ++i) {
      const double phi = 2 * kPi * (i % segments) / segments;
      addVertex(g, r * std::sin(theta) * std::cos(phi), r * std::sin(theta) * std::sin(phi),
                r * std::cos(theta));
    }
  }
  const int32_t bottom = addVertex(g, 0, 0, -r);
  const auto v = [&](int j, int i) { return 1 + (j - 1) * columns + (seam ? i : i % segments); };
  for (int i = 0; i < segments; ++i) {
    addTriangle(g, top, v(1, i), v(1, i + 1));
    for (int j = 1; j + 1 < rings; ++j) {
      addTriangle(g, v(j, i), v(j + 1, i), v(j + 1, i + 1));
      addTriangle(g, v(j, i), v(j + 1, i + 1), v(j, i + 1));
    }
    addTriangle(g, bottom, v(rings - 1, i + 1), v(rings - 1, i));
  }
  return g;
}

// An n x n grid of cells, side `size`, in z = 0, centred; two triangles per cell.
Geometry sheet(int n, double size) {
  Geometry g;
  for (int j = 0; j <= n; ++j) {
    for (int i = 0; i <= n; ++i) {
      addVertex(g, size * (i / double(n) - 0.5), size * (j / double(n) - 0.5), 0);
    }
  }
  const auto v = [&](int i, int j) { return j * (n + 1) + i; };
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      addTriangle(g, v(i, j), v(i + 1, j), v(i + 1, j + 1));
      addTriangle(g, v(i, j), v(i + 1, j + 1), v(i, j + 1));
    }
  }
  return g;
}

struct AwkwardMesh {
  std::string name;
  std::string what;  // what makes it awkward
  Geometry geometry;
};

std::vector<AwkwardMesh> awkwardMeshes() {
  std::vector<AwkwardMesh> meshes;
  meshes.push_back({"sliver_sphere", "closed, 160 x 5 UV sphere: triangles 30 x longer than high",
                    uvSphere(0.15, 160, 5)});
  {
    // A sheet with a fin standing on its middle line: 8 edges shared by 3 or 4 triangles.
    Geometry g = sheet(8, 0.3);
    const int32_t base = g.vertexCount();
    for (int k = 1; k <= 2; ++k) {
      for (int i = 0; i <= 8; ++i) addVertex(g, 0.3 * (i / 8.0 - 0.5), 0, 0.05 * k);
    }
    const auto finVertex = [&](int i, int k) {
      return k == 0 ? 4 * 9 + i : base + (k - 1) * 9 + i;
    };
    for (int k = 0; k < 2; ++k) {
      for (int i = 0; i < 8; ++i) {
        addTriangle(g, finVertex(i, k), finVertex(i + 1, k), finVertex(i + 1, k + 1));
        addTriangle(g, finVertex(i, k), finVertex(i + 1, k + 1), finVertex(i, k + 1));
      }
    }
    meshes.push_back({"fin_junction", "sheet with a fin on its middle line: 8 non-manifold edges",
                      std::move(g)});
  }
  {
    // The lower half of a 32 x 12 sphere: a bowl with an open rim.
    Geometry full = uvSphere(0.15, 32, 12);
    Geometry g;
    g.positions = full.positions;
    for (size_t t = 0; t < full.triangles.size(); t += 3) {
      double z = 0;
      for (size_t k = 0; k < 3; ++k) z += full.positions[3 * full.triangles[t + k] + 2];
      if (z < 0) g.triangles.insert(g.triangles.end(), &full.triangles[t], &full.triangles[t] + 3);
    }
    (void)removeUnreferencedVertices(g);
    meshes.push_back({"open_bowl", "hemisphere, open rim (boundary)", std::move(g)});
  }
  {
    // A sphere with a 6-vertex octahedron 5 mm across floating beside it.
    Geometry g = uvSphere(0.12, 24, 12);
    const int32_t c = g.vertexCount();
    const double s = 0.0025, x = 0.2;
    addVertex(g, x + s, 0, 0);
    addVertex(g, x - s, 0, 0);
    addVertex(g, x, s, 0);
    addVertex(g, x, -s, 0);
    addVertex(g, x, 0, s);
    addVertex(g, x, 0, -s);
    const int faces[8][3] = {{0, 2, 4}, {2, 1, 4}, {1, 3, 4}, {3, 0, 4},
                             {2, 0, 5}, {1, 2, 5}, {3, 1, 5}, {0, 3, 5}};
    for (const auto& f : faces) addTriangle(g, c + f[0], c + f[1], c + f[2]);
    meshes.push_back(
        {"sphere_and_debris", "closed sphere and a stray 6-vertex octahedron", std::move(g)});
  }
  {
    // A five-pointed star cut-out, flat, triangulated as a fan from one tip: slivers and a
    // boundary, no interior vertex.
    Geometry g;
    for (int k = 0; k < 10; ++k) {
      const double r = k % 2 == 0 ? 0.15 : 0.06;
      const double a = kPi / 2 + kPi * k / 5;
      addVertex(g, r * std::cos(a), r * std::sin(a), 0);
    }
    for (int k = 1; k + 1 < 10; ++k) addTriangle(g, 0, k, k + 1);
    meshes.push_back(
        {"star_fan", "flat star cut-out, fan-triangulated from one tip", std::move(g)});
  }
  meshes.push_back({"seamed_sphere", "24 x 12 sphere with a UV seam (11 duplicate vertices)",
                    uvSphere(0.15, 24, 12, true)});
  {
    // A sheet with a checkerboard of cells whose two triangles are wound the other way.
    Geometry g = sheet(8, 0.3);
    for (size_t t = 0; t < g.triangles.size(); t += 6) {
      const size_t cell = t / 6;
      if ((cell % 8 + cell / 8) % 2 == 0) {
        std::swap(g.triangles[t + 1], g.triangles[t + 2]);
        std::swap(g.triangles[t + 4], g.triangles[t + 5]);
      }
    }
    meshes.push_back({"flipped_cells", "sheet, half its cells wound the other way", std::move(g)});
  }
  {
    Geometry g = uvSphere(0.15, 24, 12);
    for (double& x : g.positions) x *= 100;
    meshes.push_back(
        {"huge_sphere", "24 x 12 sphere of radius 15 m (a model in cm read as m)", std::move(g)});
  }
  {
    Geometry g = uvSphere(0.15, 24, 12);
    for (double& x : g.positions) x *= 0.01;
    meshes.push_back(
        {"tiny_sphere", "24 x 12 sphere of radius 1.5 mm (a model in mm read as m)", std::move(g)});
  }
  for (const char* file : {"suzanne", "teapot"}) {
    // Y up in the files; 0.3 m across here.
    Geometry g = readGeometry(std::string(SHELLSIM_DATA_DIR) + "/" + file + ".obj");
    const Bounds b = computeBounds(g);
    double extent = 0;
    for (int c = 0; c < 3; ++c) extent = std::max(extent, b.max[c] - b.min[c]);
    for (size_t i = 0; i < g.positions.size(); i += 3) {
      const double x = g.positions[i], y = g.positions[i + 1], z = g.positions[i + 2];
      g.positions[i] = 0.3 * x / extent;
      g.positions[i + 1] = -0.3 * z / extent;
      g.positions[i + 2] = 0.3 * y / extent;
    }
    g.normals.clear();
    meshes.push_back({file, std::string("shared data: ") + file + ".obj, 0.3 m", std::move(g)});
  }
  // Each dropped from 10 cm: lowest point at z = 0.1, centred over the origin.
  for (AwkwardMesh& m : meshes) {
    const Bounds b = computeBounds(m.geometry);
    const double dx = -(b.min[0] + b.max[0]) / 2, dy = -(b.min[1] + b.max[1]) / 2;
    const double dz = 0.1 - b.min[2];
    for (size_t i = 0; i < m.geometry.positions.size(); i += 3) {
      m.geometry.positions[i] += dx;
      m.geometry.positions[i + 1] += dy;
      m.geometry.positions[i + 2] += dz;
    }
  }
  return meshes;
}

const std::vector<AwkwardMesh>& corpus() {
  static const std::vector<AwkwardMesh> meshes = [] {
    std::vector<AwkwardMesh> made = awkwardMeshes();
    if (const char* dir = std::getenv("SHELLSIM_CORPUS_DIR")) {
      std::filesystem::create_directories(dir);
      for (const AwkwardMesh& m : made) {
        writeObj(std::filesystem::path(dir) / (m.name + ".obj"), m.geometry);
      }
    }
    return made;
  }();
  return meshes;
}

const char* const kModels[] = {"fiber", "discrete_shell", "mass_spring", "inelastic_shell"};

struct CorpusCase {
  std::string mesh;
  std::string model;
};

void PrintTo(const CorpusCase& c, std::ostream* out) {
  *out << c.mesh << " with " << c.model;
}

std::string caseName(const ::testing::TestParamInfo<CorpusCase>& info) {
  return info.param.mesh + "_" + info.param.model;
}

// The meshes whose every run takes a few seconds at most run by default; the rest (the
// slivers, the debris and the shared models set steps of 1e-5 s and take up to 40 s a run,
// the tiny sphere stops after its first frame) carry the slow label.
bool isQuick(const std::string& mesh) {
  for (const char* quick :
       {"fin_junction", "open_bowl", "star_fan", "seamed_sphere", "flipped_cells", "huge_sphere"}) {
    if (mesh == quick) return true;
  }
  return false;
}

std::vector<CorpusCase> cases(bool quick) {
  std::vector<CorpusCase> chosen;
  for (const AwkwardMesh& m : awkwardMeshes()) {
    if (isQuick(m.name) != quick) continue;
    for (const char* model : kModels) chosen.push_back({m.name, model});
  }
  return chosen;
}

// The material: E = 5 MPa, nu = 0.35, 4 mm (0.04 mm on the tiny sphere, 4 cm on
// the huge one, so that the shell stays thin), 1000 kg/m^3, and mass-proportional damping
// of 2/s so that an elastic shell, which would ring for ever, settles within the run.
constexpr double kDamping = 2.0;
BodyDef bodyDef(const std::string& mesh, const std::string& model) {
  BodyDef def;
  def.name = mesh;
  def.model = model;
  def.material.youngModulus = 5e6;
  def.material.poisson = 0.35;
  def.material.thickness = mesh == "tiny_sphere" ? 4e-5 : mesh == "huge_sphere" ? 0.04 : 4e-3;
  def.material.density = 1000;
  def.material.damping = kDamping;
  return def;
}

// The steps a simulated second may take before a run counts as crawling.
constexpr double kStepBudgetPerSecond = 2e5;

void dropAndCheck(const CorpusCase& c, double duration) {
  const AwkwardMesh* mesh = nullptr;
  for (const AwkwardMesh& m : corpus()) {
    if (m.name == c.mesh) mesh = &m;
  }
  ASSERT_NE(mesh, nullptr);
  std::ostringstream row;
  row << "| corpus | " << c.mesh << " | " << c.model << " | ";
  const auto start = std::chrono::steady_clock::now();
  SimulationSettings settings;
  settings.time.frameRate = 30;
  settings.time.duration = duration;  // as a scene gives it: the set-up warns of a long run
  Simulation sim(settings);
  ObstacleDef floor;
  floor.type = ObstacleType::kPlane;
  floor.friction = 0.5;
  sim.addObstacle(floor);
  int32_t body = -1;
  try {
    body = sim.addBody(mesh->geometry, bodyDef(c.mesh, c.model));
  } catch (const InputError& e) {
    const std::string message = e.what();
    row << "refused | | | | | | | | " << message << " |";
    std::cout << row.str() << '\n';
    // A refusal says which body and why, in words.
    EXPECT_NE(message.find(c.mesh), std::string::npos) << message;
    EXPECT_GT(message.size(), c.mesh.size() + 20) << message;
    return;
  }
  const double stable = sim.stableTimeStep(body);
  double mass = 0;
  for (const double m : sim.masses(body)) mass += m;
  const Geometry rest = sim.surface(body);
  const Bounds bounds = computeBounds(rest);
  const double g = 9.81;
  const double scale = mass * g * bounds.max[2];  // m g (drop + height): all it could release
  const double dropEnergy = mass * g * 0.1;       // released by the 10 cm fall alone
  const double startEnergy = sim.energies(body).total();
  double highestRise = 0, deepest = 0;
  const int frames = static_cast<int>(std::lround(duration * 30));
  std::string stopped;
  std::vector<std::string> warnings;
  bool warnedOfSteps = false;
  try {
    for (int frame = 0; frame < frames; ++frame) {
      sim.advanceFrames(1);
      highestRise = std::max(highestRise, sim.energies(body).total() - startEnergy);
      const Geometry surface = sim.surface(body);
      for (size_t i = 2; i < surface.positions.size(); i += 3) {
        deepest = std::min(deepest, surface.positions[i]);
      }
      if (frame > 0) continue;
      // The step is planned at the first advance, which warns of a run of millions of steps
      // (as `shellsim run` does before its first frame).
      warnings = sim.warnings();
      for (const std::string& w : warnings) {
        std::cout << "| warning | " << c.mesh << " | " << c.model << " | " << w << '\n';
      }
      // Told of a long run, or that slivers set the step (with the remedy).
      warnedOfSteps = std::any_of(warnings.begin(), warnings.end(), [](const auto& w) {
        return w.find("the run takes about") != std::string::npos ||
               w.find("the stable explicit step may follow the lowest triangles") !=
                   std::string::npos;
      });
      if (warnedOfSteps && 1.0 / sim.timeStep() > kStepBudgetPerSecond) {
        row << "warned, stopped | " << sim.nodeCount(body) << " | " << std::setprecision(2)
            << stable << " | " << std::lround(1.0 / sim.timeStep()) << " | | | | "
            << warnings.size() << " | |";
        std::cout << row.str() << '\n';
        return;
      }
    }
  } catch (const NumericalError& e) {
    stopped = e.what();
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double kinetic = sim.energies(body).kinetic;
  const double stepsPerSecond = static_cast<double>(sim.statistics().steps) / sim.time();
  row << (stopped.empty() ? "ran" : "STOPPED") << " | " << sim.nodeCount(body) << " | "
      << std::setprecision(2) << stable << " | " << std::lround(stepsPerSecond) << " | "
      << std::setprecision(2) << 100 * highestRise / scale << "% | " << 1000 * deepest << " mm | "
      << 100 * kinetic / dropEnergy << "% | " << warnings.size() << " | " << std::setprecision(3)
      << wall << " s |";
  std::cout << row.str() << '\n';
  ASSERT_TRUE(stopped.empty()) << stopped;
  EXPECT_LE(highestRise, 0.02 * scale) << "energy gained";
  EXPECT_GE(deepest, -1e-3) << "the surface sank into the floor";
  EXPECT_LE(kinetic, 0.05 * std::max(dropEnergy, startEnergy - sim.energies(body).total()))
      << "not at rest";
  if (!warnedOfSteps) {
    EXPECT_LE(stepsPerSecond, kStepBudgetPerSecond) << "crawls without a word";
  }
}

// The huge sphere, 30 m tall, takes longer to fall in on itself and settle.
double durationOf(const CorpusCase& c) {
  return c.mesh == "huge_sphere" ? 20.0 : 1.5;
}

class AwkwardCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(AwkwardCorpus, DroppedItRestsOrIsRefusedWhenAdded) {
  dropAndCheck(GetParam(), durationOf(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(EveryModel, AwkwardCorpus, ::testing::ValuesIn(cases(true)), caseName);

class AwkwardCorpusSlow : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(AwkwardCorpusSlow, DroppedItRestsOrIsRefusedWhenAdded) {
  dropAndCheck(GetParam(), durationOf(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(EveryModel, AwkwardCorpusSlow, ::testing::ValuesIn(cases(false)),
                         caseName);

}  // namespace
}  // namespace shellsim
