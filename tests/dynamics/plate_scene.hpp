// Plates and strips for accuracy tests built as scenes (tests/dynamics): a grid written to
// an OBJ and the pin boxes that hold its edges.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace shellsim::plate_scene {

namespace fs = std::filesystem;

// The grid over the node coordinates xs x ys in z = 0, each cell split along alternating
// diagonals like the sheet primitive's, counter-clockwise about +z, written to an OBJ; with
// jitter > 0 every node with movable(x, y) moves by up to jitter times its cell's smaller
// side in a random direction of the plane (fixed seed). Returns the file.
template <class Movable>
fs::path writeGrid(const fs::path& folder, const std::string& name, const std::vector<double>& xs,
                   const std::vector<double>& ys, double jitter, const Movable& movable) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  const fs::path file = folder / (name + ".obj");
  std::ofstream out(file);
  out.precision(17);
  for (size_t j = 0; j < ys.size(); ++j) {
    for (size_t i = 0; i < xs.size(); ++i) {
      double x = xs[i], y = ys[j];
      const double r = std::sqrt(unit(rng)), angle = 2 * std::numbers::pi * unit(rng);
      if (jitter > 0 && movable(x, y)) {
        const double cell = std::min(xs[i + 1] - xs[i], ys[j + 1] - ys[j]);
        x += jitter * cell * r * std::cos(angle);
        y += jitter * cell * r * std::sin(angle);
      }
      out << "v " << x << ' ' << y << " 0\n";
    }
  }
  const auto id = [&](size_t i, size_t j) { return j * xs.size() + i + 1; };
  for (size_t j = 0; j + 1 < ys.size(); ++j) {
    for (size_t i = 0; i + 1 < xs.size(); ++i) {
      if ((i + j) % 2 == 0) {
        out << "f " << id(i, j) << ' ' << id(i + 1, j) << ' ' << id(i + 1, j + 1) << '\n';
        out << "f " << id(i, j) << ' ' << id(i + 1, j + 1) << ' ' << id(i, j + 1) << '\n';
      } else {
        out << "f " << id(i, j) << ' ' << id(i + 1, j) << ' ' << id(i, j + 1) << '\n';
        out << "f " << id(i + 1, j) << ' ' << id(i + 1, j + 1) << ' ' << id(i, j + 1) << '\n';
      }
    }
  }
  return file;
}

// n equal cells over [a, b], with an extra cell of width `ring` beyond each end when > 0.
inline std::vector<double> coordinates(double a, double b, int n, double ring = 0) {
  std::vector<double> c;
  if (ring > 0) c.push_back(a - ring);
  for (int i = 0; i <= n; ++i) c.push_back(a + (b - a) * i / n);
  if (ring > 0) c.push_back(b + ring);
  return c;
}

// A pin box centred at (cx, cy, 0) with half extents (hx, hy) in the plane and 0.001 m
// across it (or `across` when given).
inline std::string pinBox(double cx, double cy, double hx, double hy, double across = 0.001) {
  std::ostringstream s;
  s.precision(17);
  s << R"({"shape": "box", "center": [)" << cx << ", " << cy << R"(, 0], "half_extents": [)" << hx
    << ", " << hy << ", " << across << "]}";
  return s.str();
}

// A scene of one plate read from `mesh`, solved statically under gravity g (m/s^2, along
// -z), with every node at |x| or |y| >= 1/2 pinned: the unit plate's boundary and the ring of
// width `ring` around it (0: none), by boxes `across` high. bodyJson: the body's model,
// options and material keys.
inline std::string pinnedPlateScene(const fs::path& mesh, const std::string& bodyJson,
                                    double gravity, double ring, double across = 0.001) {
  const double edge = 0.5 - 1e-6;
  const double far = 0.5 + ring + 0.01;
  const double strip = (far - edge) / 2, middle = (far + edge) / 2;
  std::ostringstream scene;
  scene.precision(17);
  scene << R"({"gravity": [0, 0, )" << -gravity << R"(], "bodies": [{"name": "plate", "file": ")"
        << mesh.string() << R"(", )" << bodyJson << R"(, "pins": [)"
        << pinBox(-middle, 0, strip, far, across) << ", " << pinBox(middle, 0, strip, far, across)
        << ", " << pinBox(0, -middle, far, strip, across) << ", "
        << pinBox(0, middle, far, strip, across)
        << R"(]}], "time": {"duration": 1, "integrator": "static", "load_increments": 1,
           "newton_tolerance": 1e-10, "newton_max_iterations": 50},
           "output": {"folder": "out", "formats": ["ply"]}})";
  return scene.str();
}

}  // namespace shellsim::plate_scene
