// Uses an installed shellsim through its public headers only:
//  1. drops a sheet made in memory onto the ground through the C++ API (shellsim/world.hpp)
//     and checks that it lands and comes to rest, with no scene file;
//  2. runs three frames of the default scene and renders them when shellsim::render is
//     installed.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <shellsim/run.hpp>
#include <shellsim/scene.hpp>
#include <shellsim/world.hpp>
#ifdef CONSUMER_RENDER
#include <shellsim/render.hpp>
#endif

namespace {

// A 0.4 m square sheet of 12 x 12 cells at height z.
shellsim::Geometry sheet(double z) {
  constexpr int kCells = 12;
  shellsim::Geometry mesh;
  for (int j = 0; j <= kCells; ++j) {
    for (int i = 0; i <= kCells; ++i) {
      mesh.positions.insert(mesh.positions.end(),
                            {0.4 * i / kCells - 0.2, 0.4 * j / kCells - 0.2, z});
    }
  }
  for (int j = 0; j < kCells; ++j) {
    for (int i = 0; i < kCells; ++i) {
      const int a = j * (kCells + 1) + i, b = a + 1, c = a + kCells + 2, d = a + kCells + 1;
      mesh.triangles.insert(mesh.triangles.end(), {a, b, c, a, c, d});
    }
  }
  return mesh;
}

int dropSheet() {
  shellsim::Simulation sim;  // gravity -9.81 m/s^2 along z, velocity Verlet
  shellsim::BodyDef cloth;
  cloth.name = "cloth";
  cloth.model = "discrete_shell";
  cloth.material.youngModulus = 2e5;  // Pa
  cloth.material.thickness = 2e-3;    // m
  cloth.material.density = 300;       // kg/m^3
  cloth.material.damping = 2;         // 1/s
  const int body = sim.addBody(sheet(0.3), cloth);
  sim.addObstacle(shellsim::ObstacleDef{});  // the plane z = 0
  sim.advance(2.0);
  const auto x = sim.positions(body);
  double lowest = INFINITY, highest = -INFINITY;
  for (size_t i = 2; i < x.size(); i += 3) {
    lowest = std::min(lowest, x[i]);
    highest = std::max(highest, x[i]);
  }
  const double kinetic = sim.energies(body).kinetic;
  std::cout << "consumer dropped a sheet: z in [" << lowest << ", " << highest
            << "] m, kinetic energy " << kinetic << " J after " << sim.statistics().steps
            << " steps\n";
  const bool landed = lowest > -1e-6 && highest < 0.01;
  const bool atRest = kinetic < 1e-6;
  return landed && atRest ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  if (dropSheet() != 0) return 1;
  shellsim::RunOptions options;
  options.outputFolder = std::filesystem::path(argv[1]);
  options.maxFrames = 3;
  const shellsim::RunReport report = shellsim::runScene(shellsim::defaultScene(), options);
  std::cout << "consumer wrote " << report.framesWritten << " frames\n";
  if (report.framesWritten != 3) return 1;
#ifdef CONSUMER_RENDER
  shellsim::RenderOptions render;
  render.settings.width = 160;
  render.settings.height = 90;
  render.video = false;
  const shellsim::RenderReport rendered = shellsim::renderRun(argv[1], render);
  std::cout << "consumer rendered " << rendered.framesRendered << " frames\n";
  if (rendered.framesRendered != 3) return 1;
#endif
  return 0;
}
