// The Python module `shellsim._core`, wrapped by python/shellsim/__init__.py: the public C++
// API (shellsim/world.hpp, run.hpp, render.hpp) with numpy arrays for the flat arrays and
// Python dictionaries in the scene file's format for the definitions.
//
// Arrays. Everything handed out is a copy: a fracturing model re-allocates its node arrays
// when it splits, so a view into them could outlive its memory. Pass `out=` to reuse an
// array of the right shape and dtype instead of allocating one per call. Arrays handed in
// are converted to C-contiguous float64 / int32 when they are not already.
//
// Threads and signals. Long calls (advance, run, render, compare) release the GIL; Python
// callbacks (progress, warnings) take it back. While one of them runs in the main thread,
// SIGINT (Ctrl-C) sets the library's stop flag instead of Python's handler, so the call
// stops cleanly between two steps (the frames written are kept) and raises
// KeyboardInterrupt; Python's handler is put back when the call returns.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"
#include "shellsim/parallel.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/thicken.hpp"
#include "shellsim/world.hpp"
#ifdef SHELLSIM_PYTHON_RENDER
#include "shellsim/render.hpp"
#endif

namespace py = pybind11;

namespace shellsim {
namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

// ---- Ctrl-C ------------------------------------------------------------------------------

std::atomic<bool> stopRequested{false};

extern "C" void onSigint(int /*signal*/) {
  stopRequested.store(true);
}

bool inMainThread() {
  const py::object threading = py::module_::import("threading");
  return threading.attr("current_thread")().is(threading.attr("main_thread")());
}

// Routes SIGINT to the stop flag for the lifetime of a long call made from the main thread
// (Python runs its own handler only between bytecodes, never inside a C++ call).
class StopOnSigint {
 public:
  StopOnSigint() {
    stopRequested.store(false);
    if (inMainThread()) {
      previous_ = std::signal(SIGINT, onSigint);
      installed_ = previous_ != SIG_ERR;
    }
  }
  ~StopOnSigint() {
    if (installed_) std::signal(SIGINT, previous_);
  }
  StopOnSigint(const StopOnSigint&) = delete;
  StopOnSigint& operator=(const StopOnSigint&) = delete;

 private:
  void (*previous_)(int) = SIG_DFL;
  bool installed_ = false;
};

// ---- dictionaries <-> JSON text ----------------------------------------------------------

std::string toJsonText(const py::handle& value) {
  return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}
py::object fromJsonText(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

// ---- arrays ------------------------------------------------------------------------------

// A (rows, columns) float64 array holding `values`, written into `out` when one is given.
// `out` is taken as any array and checked, not converted: a float32 or strided array would
// otherwise be copied, filled, and leave the caller's array as it was.
py::array_t<double> doubles(std::span<const double> values, py::ssize_t columns,
                            const std::optional<py::array>& out = std::nullopt) {
  const auto rows = static_cast<py::ssize_t>(values.size()) / columns;
  py::array_t<double> result;
  if (out) {
    const py::array& given = *out;
    const bool fits = given.dtype().is(py::dtype::of<double>()) &&
                      given.ndim() == (columns == 1 ? 1 : 2) && given.shape(0) == rows &&
                      (columns == 1 || given.shape(1) == columns) &&
                      (given.flags() & py::array::c_style) != 0 && given.writeable();
    if (fits) result = py::reinterpret_borrow<py::array_t<double>>(given);
    if (!fits) {
      throw InputError("shellsim: out must be a writeable C-contiguous float64 array of shape (" +
                       std::to_string(rows) + (columns == 1 ? "" : ", " + std::to_string(columns)) +
                       ")");
    }
  } else if (columns == 1) {
    result = py::array_t<double>(rows);
  } else {
    result = py::array_t<double>({rows, columns});
  }
  if (!values.empty()) std::memcpy(result.mutable_data(), values.data(), values.size_bytes());
  return result;
}

template <class T>
py::array_t<T> vector1d(std::span<const T> values) {
  py::array_t<T> result(static_cast<py::ssize_t>(values.size()));
  if (!values.empty()) std::memcpy(result.mutable_data(), values.data(), values.size_bytes());
  return result;
}

py::array_t<int32_t> indexRows(std::span<const int32_t> values) {
  py::array_t<int32_t> result({static_cast<py::ssize_t>(values.size() / 3), py::ssize_t{3}});
  if (!values.empty()) std::memcpy(result.mutable_data(), values.data(), values.size_bytes());
  return result;
}

// The values of an (n, 3) array, checked: `what` names it in the error.
std::vector<double> rowsOf3(const DoubleArray& array, const std::string& what) {
  if (array.ndim() != 2 || array.shape(1) != 3) {
    throw InputError("shellsim: " + what + " must have shape (n, 3), not " +
                     py::str(py::tuple(py::cast(std::vector<py::ssize_t>(
                                 array.shape(), array.shape() + array.ndim()))))
                         .cast<std::string>());
  }
  return {array.data(), array.data() + array.size()};
}

Vec3d vec3(const py::handle& value, const std::string& what) {
  const auto values = value.cast<std::vector<double>>();
  if (values.size() != 3) throw InputError("shellsim: " + what + " must have 3 components");
  return {values[0], values[1], values[2]};
}

py::dict geometryDict(const Geometry& geometry) {
  py::dict out;
  out["vertices"] = doubles(geometry.positions, 3);
  out["triangles"] = indexRows(geometry.triangles);
  out["normals"] =
      geometry.normals.empty() ? py::object(py::none()) : py::object(doubles(geometry.normals, 3));
  return out;
}

Geometry geometryFrom(const DoubleArray& vertices, const std::optional<IndexArray>& triangles,
                      const std::optional<DoubleArray>& normals) {
  Geometry geometry;
  geometry.positions = rowsOf3(vertices, "vertices");
  const auto n = static_cast<int64_t>(geometry.positions.size() / 3);
  if (triangles) {
    if (triangles->ndim() != 2 || triangles->shape(1) != 3) {
      throw InputError("shellsim: triangles must have shape (m, 3)");
    }
    geometry.triangles.assign(triangles->data(), triangles->data() + triangles->size());
    for (size_t k = 0; k < geometry.triangles.size(); ++k) {
      if (geometry.triangles[k] < 0 || geometry.triangles[k] >= n) {
        throw InputError("shellsim: triangles[" + std::to_string(k / 3) + "] names vertex " +
                         std::to_string(geometry.triangles[k]) + ", not in [0, " +
                         std::to_string(n) + ")");
      }
    }
  }
  if (normals) {
    geometry.normals = rowsOf3(*normals, "normals");
    if (geometry.normals.size() != geometry.positions.size()) {
      throw InputError("shellsim: normals must have one row per vertex");
    }
  }
  return geometry;
}

// ---- the simulation ----------------------------------------------------------------------

// A Simulation whose stop flag is the module's, and whose warnings reach a Python callable.
struct PySimulation {
  Simulation simulation;
  std::optional<py::function> warningHandler;

  explicit PySimulation(Simulation s) : simulation(std::move(s)) {
    simulation.setStopFlag(&stopRequested);
    simulation.onWarning([this](const std::string& message) {
      if (!warningHandler) return;
      const py::gil_scoped_acquire gil;
      (*warningHandler)(message);
    });
  }
};

SimulationSettings settingsFrom(const py::handle& gravity, const py::object& time,
                                const py::object& contact) {
  SimulationSettings settings;
  settings.gravity = vec3(gravity, "gravity");
  if (!time.is_none()) settings.time = parseTimeDef(toJsonText(time), "time");
  if (!contact.is_none())
    settings.contact = parseContactDef(toJsonText(contact), "contact", settings.time);
  return settings;
}

py::dict energiesDict(const BodyEnergies& e) {
  py::dict out;
  out["kinetic"] = e.kinetic;
  out["stretching"] = e.stretching;
  out["bending"] = e.bending;
  out["gravitational"] = e.gravitational;
  out["total"] = e.total();
  return out;
}

py::dict statisticsDict(const StepStatistics& s) {
  py::dict out;
  out["steps"] = s.steps;
  out["rejected_steps"] = s.rejectedSteps;
  out["recomputations"] = s.recomputations;
  out["newton_iterations"] = s.newtonIterations;
  out["factorizations"] = s.factorizations;
  return out;
}

py::dict runReportDict(const RunReport& report) {
  py::dict out;
  out["frames_written"] = report.framesWritten;
  out["steps"] = report.steps;
  out["time_step"] = report.timeStep;
  out["stable_time_step"] = report.stableTimeStep;
  out["output_folder"] = report.outputFolder;
  out["summary"] = report.summaryPath;
  out["warnings"] = report.warnings;
  return out;
}

py::dict progressDict(const RunProgress& p) {
  py::dict out;
  out["frame"] = p.frame;
  out["frame_count"] = p.frameCount;
  out["time"] = p.simulatedTime;
  out["steps"] = p.steps;
  out["wall_seconds"] = p.wallSeconds;
  return out;
}

#ifdef SHELLSIM_PYTHON_RENDER
py::dict renderReportDict(const RenderReport& report) {
  py::dict out;
  out["frames_rendered"] = report.framesRendered;
  out["frames_folder"] = report.framesFolder;
  out["contact_sheet"] = report.contactSheet;
  out["energy_plot"] =
      report.energyPlot.empty() ? py::object(py::none()) : py::object(py::cast(report.energyPlot));
  out["video"] = report.video ? py::object(py::cast(*report.video)) : py::object(py::none());
  out["messages"] = report.messages;
  return out;
}

RenderOptions renderOptions(int32_t width, int32_t height, bool video, bool wireframe,
                            bool showPins, int32_t contactSheetFrames,
                            const std::optional<py::function>& progress) {
  RenderOptions options;
  options.settings.width = width;
  options.settings.height = height;
  options.settings.wireframe = wireframe;
  options.settings.showPins = showPins;
  options.video = video;
  options.contactSheetFrames = contactSheetFrames;
  if (width < 16 || height < 16 || width > 8192 || height > 8192) {
    throw InputError("shellsim: the image size must be within 16 to 8192 pixels a side (got " +
                     std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  if (contactSheetFrames < 1) throw InputError("shellsim: contact_sheet_frames must be >= 1");
  if (progress) {
    options.onFrame = [progress](int32_t frame, int32_t frameCount) {
      const py::gil_scoped_acquire gil;
      (*progress)(frame, frameCount);
    };
  }
  return options;
}
#endif

void translateErrors(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const Interrupted& e) {
    PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
  } catch (const Error& e) {
    const char* name = "Error";
    switch (e.kind()) {
      case ErrorKind::kBadInput: name = "InputError"; break;
      case ErrorKind::kNumerical: name = "NumericalError"; break;
      case ErrorKind::kIo: name = "IoError"; break;
      case ErrorKind::kInterrupted: name = "Error"; break;
    }
    const py::object type = py::module_::import("shellsim").attr(name);
    PyErr_SetString(type.ptr(), e.what());
  }
}

}  // namespace
}  // namespace shellsim

PYBIND11_MODULE(_core, m) {
  using namespace shellsim;
  m.doc() = "shellsim's compiled core; import shellsim, not this module.";
  py::register_exception_translator(translateErrors);

  m.def(
      "set_threads",
      [](int threads) {
        static std::unique_ptr<ThreadLimit> limit;
        if (threads < 0) throw InputError("shellsim: threads must be >= 0 (0: all cores)");
        limit.reset();
        if (threads > 0) limit = std::make_unique<ThreadLimit>(threads);
      },
      py::arg("threads"));
  m.def("threads", &ThreadLimit::current);

  // ---- scenes ----
  py::class_<SceneDef>(m, "SceneDef")
      .def("to_json", [](const SceneDef& scene) { return sceneToJson(scene); })
      .def_property_readonly("folder", [](const SceneDef& scene) { return scene.sceneFolder; })
      .def_property_readonly("duration", [](const SceneDef& scene) { return scene.time.duration; })
      .def_property_readonly("body_count",
                             [](const SceneDef& scene) { return scene.bodies.size(); });
  m.def("load_scene", &loadScene, py::arg("path"));
  m.def("parse_scene", &parseScene, py::arg("text"), py::arg("source"), py::arg("folder"));
  m.def("default_scene", &defaultScene);
  m.def("model_names", &knownModelNames);

  m.def(
      "run_scene",
      [](const SceneDef& scene, const std::string& name, std::optional<std::filesystem::path> out,
         std::optional<int32_t> maxFrames, bool resume, std::optional<py::function> progress,
         std::optional<py::function> warning) {
        RunOptions options;
        options.sceneName = name;
        options.outputFolder = std::move(out);
        options.maxFrames = maxFrames;
        options.resume = resume;
        options.stopFlag = &stopRequested;
        if (progress) {
          options.onProgress = [progress](const RunProgress& p) {
            const py::gil_scoped_acquire gil;
            (*progress)(progressDict(p));
          };
        }
        if (warning) {
          options.onWarning = [warning](const std::string& message) {
            const py::gil_scoped_acquire gil;
            (*warning)(message);
          };
        }
        if (maxFrames && *maxFrames < 1) throw InputError("shellsim: max_frames must be >= 1");
        const StopOnSigint sigint;
        RunReport report;
        {
          const py::gil_scoped_release release;
          report = runScene(scene, options);
        }
        return runReportDict(report);
      },
      py::arg("scene"), py::arg("name"), py::arg("out"), py::arg("max_frames"), py::arg("resume"),
      py::arg("progress"), py::arg("warning"));

  m.def(
      "run_status",
      [](const std::filesystem::path& folder) {
        const RunStatus s = readRunStatus(folder);
        py::dict out;
        out["status"] = s.status;
        out["error"] = s.error;
        out["scene"] = s.scene;
        out["frames_written"] = s.framesWritten;
        out["time"] = s.time;
        out["stale"] = s.stale;
        out["description"] = s.description;
        return out;
      },
      py::arg("folder"));

#ifdef SHELLSIM_PYTHON_RENDER
  m.def(
      "render_run",
      [](const std::filesystem::path& folder, int32_t width, int32_t height, bool video,
         bool wireframe, bool showPins, int32_t contactSheetFrames,
         std::optional<py::function> progress) {
        const RenderOptions options =
            renderOptions(width, height, video, wireframe, showPins, contactSheetFrames, progress);
        const StopOnSigint sigint;
        RenderReport report;
        {
          const py::gil_scoped_release release;
          report = renderRun(folder, options);
        }
        return renderReportDict(report);
      },
      py::arg("folder"), py::arg("width"), py::arg("height"), py::arg("video"),
      py::arg("wireframe"), py::arg("show_pins"), py::arg("contact_sheet_frames"),
      py::arg("progress"));
  m.def(
      "compare_runs",
      [](const std::filesystem::path& a, const std::filesystem::path& b,
         const std::filesystem::path& out, int32_t width, int32_t height, bool video,
         std::optional<py::function> progress) {
        const RenderOptions options =
            renderOptions(width, height, video, false, false, 12, progress);
        RenderReport report;
        {
          const py::gil_scoped_release release;
          report = compareRuns(a, b, out, options);
        }
        return renderReportDict(report);
      },
      py::arg("run_a"), py::arg("run_b"), py::arg("out"), py::arg("width"), py::arg("height"),
      py::arg("video"), py::arg("progress"));
  m.def(
      "export_blend",
      [](const std::filesystem::path& folder, const std::filesystem::path& blend,
         const std::string& blender) {
        BlendExportOptions options;
        options.blender = blender;
        BlendExport made;
        {
          const py::gil_scoped_release release;
          made = exportBlend(folder, blend, options);
        }
        py::dict out;
        out["blend"] = made.blendFile;
        out["objects"] = made.objects;
        out["frame_start"] = made.frameStart;
        out["frame_end"] = made.frameEnd;
        out["fps"] = made.frameRate;
        out["messages"] = made.messages;
        return out;
      },
      py::arg("folder"), py::arg("blend"), py::arg("blender"));
  m.def("plot_energy", &plotEnergy, py::arg("summary"), py::arg("png"), py::arg("width") = 1280,
        py::arg("height") = 720);
  m.attr("has_render") = true;
#else
  m.attr("has_render") = false;
#endif

  // ---- geometry ----
  m.def(
      "read_geometry",
      [](const std::filesystem::path& path) { return geometryDict(readGeometry(path)); },
      py::arg("path"));
  m.def(
      "write_geometry",
      [](const std::filesystem::path& path, const DoubleArray& vertices,
         const std::optional<IndexArray>& triangles) {
        const Geometry geometry = geometryFrom(vertices, triangles, std::nullopt);
        switch (formatFromPath(path)) {
          case GeometryFormat::kPly: writePly(path, geometry); break;
          case GeometryFormat::kObj: writeObj(path, geometry); break;
          default: throw InputError(path.string() + ": write .ply or .obj");
        }
      },
      py::arg("path"), py::arg("vertices"), py::arg("triangles") = py::none());

  m.def(
      "mesh_info",
      [](const DoubleArray& vertices, const std::optional<IndexArray>& triangles) {
        const Geometry mesh = geometryFrom(vertices, triangles, std::nullopt);
        const MeshTopology t = analyzeTopology(mesh);
        py::dict out;
        out["vertices"] = mesh.vertexCount();
        out["triangles"] = mesh.triangleCount();
        out["edges"] = t.edgeCount;
        out["boundary_edges"] = t.boundaryEdgeCount;
        out["non_manifold_edges"] = t.nonManifoldEdgeCount;
        out["degenerate_triangles"] = t.degenerateTriangleCount;
        out["components"] = t.connectedComponentCount;
        out["unreferenced_vertices"] = t.unreferencedVertexCount;
        out["duplicate_vertices"] = t.duplicateVertexCount;
        out["inconsistent_edges"] = t.inconsistentEdgeCount;
        out["median_edge_length"] = t.medianEdgeLength;
        out["smallest_height"] = t.smallestHeight;
        out["sliver_triangles"] = t.sliverTriangleCount;
        out["refusals"] = meshRefusals(t);
        out["warnings"] = meshWarnings(t);
        return out;
      },
      py::arg("vertices"), py::arg("triangles"));
  m.def(
      "repair",
      [](const DoubleArray& vertices, const IndexArray& triangles, int64_t minComponentFaces,
         double remeshEdge, bool remeshAtMedian) {
        Geometry mesh = geometryFrom(vertices, triangles, std::nullopt);
        RepairOptions options;
        options.minComponentFaces = minComponentFaces;
        options.targetEdgeLength = remeshEdge;
        options.remeshAtMedianEdge = remeshAtMedian;
        RepairReport report;
        {
          const py::gil_scoped_release release;
          report = repairMesh(mesh, options);
        }
        py::dict out = geometryDict(mesh);
        out["components_removed"] = report.componentsRemoved;
        out["remesh_edge_length"] = report.remeshEdgeLength;
        return out;
      },
      py::arg("vertices"), py::arg("triangles"), py::arg("min_component_faces"),
      py::arg("remesh_edge"), py::arg("remesh_at_median"));
  m.def(
      "thicken",
      [](const DoubleArray& vertices, const IndexArray& triangles, double depth,
         const std::string& method, int32_t steps, double minStep) {
        const Geometry mesh = geometryFrom(vertices, triangles, std::nullopt);
        ThickenOptions options;
        options.depth = depth;
        if (method != "front" && method != "vertex") {
          throw InputError("shellsim: method must be 'front' or 'vertex', not '" + method + "'");
        }
        options.method = method == "front" ? ThickenMethod::kFront : ThickenMethod::kSingleVertex;
        options.stepsPerDepth = steps;
        options.minStepFraction = minStep;
        ThickShell shell;
        {
          const py::gil_scoped_release release;
          shell = thickenMesh(mesh, options);
        }
        py::dict out;
        out["inner"] = doubles(shell.inner, 3);
        out["depth"] = doubles(shell.depth, 1);
        out["seconds"] = shell.seconds;
        out["collisions"] = shell.collisions;
        out["passes"] = shell.iterations;
        out["min_depth"] = shell.minDepth;
        out["mean_depth"] = shell.meanDepth;
        out["thin_vertices"] = shell.thinVertices;
        py::list regions;
        for (const ThickShell::ThinRegion& r : shell.thinRegions) {
          py::dict region;
          region["vertices"] = r.vertices;
          region["centre"] = r.centre;
          region["thinnest"] = r.thinnest;
          regions.append(region);
        }
        out["thin_regions"] = regions;
        out["intersecting_pairs"] = shell.intersectingPairs;
        out["inverted_elements"] = shell.invertedElements;
        return out;
      },
      py::arg("vertices"), py::arg("triangles"), py::arg("depth"), py::arg("method"),
      py::arg("steps"), py::arg("min_step"));

  // ---- states ----
  py::class_<SimulationState>(m, "State")
      .def_property_readonly("time", &SimulationState::time)
      .def_property_readonly("empty", &SimulationState::empty);

  // ---- the simulation ----
  py::class_<PySimulation>(m, "Simulation")
      .def(
          py::init([](const py::object& gravity, const py::object& time,
                      const py::object& contact) {
            return std::make_unique<PySimulation>(Simulation(settingsFrom(gravity, time, contact)));
          }),
          py::arg("gravity"), py::arg("time"), py::arg("contact"))
      .def_static(
          "from_scene",
          [](const SceneDef& scene) { return std::make_unique<PySimulation>(Simulation(scene)); },
          py::arg("scene"))
      .def(
          "add_body",
          [](PySimulation& self, const DoubleArray& vertices,
             const std::optional<IndexArray>& triangles, const py::object& definition,
             const std::optional<DoubleArray>& normals) {
            const BodyDef def = parseBodyDef(definition.is_none() ? "{}" : toJsonText(definition),
                                             "add_body", true);
            return self.simulation.addBody(geometryFrom(vertices, triangles, normals), def);
          },
          py::arg("vertices"), py::arg("triangles"), py::arg("definition"), py::arg("normals"))
      .def(
          "add_body_from",
          [](PySimulation& self, const py::object& definition,
             const std::filesystem::path& folder) {
            return self.simulation.addBody(
                parseBodyDef(toJsonText(definition), "add_body_from", false, folder));
          },
          py::arg("definition"), py::arg("folder"))
      .def(
          "add_obstacle",
          [](PySimulation& self, const py::object& definition) {
            return self.simulation.addObstacle(
                parseObstacleDef(toJsonText(definition), "add_obstacle"));
          },
          py::arg("definition"))
      .def(
          "add_pin",
          [](PySimulation& self, int32_t body, const py::object& definition) {
            self.simulation.addPin(body, parsePinDef(toJsonText(definition), "add_pin"));
          },
          py::arg("body"), py::arg("definition"))
      .def(
          "add_load",
          [](PySimulation& self, int32_t body, const py::object& definition) {
            self.simulation.addLoad(body, parseLoadDef(toJsonText(definition), "add_load"));
          },
          py::arg("body"), py::arg("definition"))
      .def(
          "advance",
          [](PySimulation& self, double seconds) {
            const StopOnSigint sigint;
            const py::gil_scoped_release release;
            self.simulation.advance(seconds);
          },
          py::arg("seconds"))
      .def(
          "advance_frames",
          [](PySimulation& self, int32_t frames) {
            const StopOnSigint sigint;
            const py::gil_scoped_release release;
            self.simulation.advanceFrames(frames);
          },
          py::arg("frames"))
      .def_property_readonly("time", [](const PySimulation& s) { return s.simulation.time(); })
      .def_property_readonly("time_step",
                             [](const PySimulation& s) { return s.simulation.timeStep(); })
      .def(
          "stable_time_step",
          [](const PySimulation& s, std::optional<int32_t> body) {
            return body ? s.simulation.stableTimeStep(*body) : s.simulation.stableTimeStep();
          },
          py::arg("body"))
      .def_property_readonly(
          "statistics",
          [](const PySimulation& s) { return statisticsDict(s.simulation.statistics()); })
      .def_property_readonly("body_count",
                             [](const PySimulation& s) { return s.simulation.bodyCount(); })
      .def_property_readonly("obstacle_count",
                             [](const PySimulation& s) { return s.simulation.obstacleCount(); })
      .def_property_readonly("warnings",
                             [](const PySimulation& s) { return s.simulation.warnings(); })
      .def(
          "on_warning",
          [](PySimulation& s, std::optional<py::function> handler) {
            s.warningHandler = std::move(handler);
          },
          py::arg("handler"))
      .def(
          "obstacle_offset",
          [](const PySimulation& s, int32_t o) { return s.simulation.obstacleOffset(o); },
          py::arg("obstacle"))
      .def(
          "obstacle_velocity",
          [](const PySimulation& s, int32_t o) { return s.simulation.obstacleVelocity(o); },
          py::arg("obstacle"))
      .def(
          "body_index",
          [](const PySimulation& s, const std::string& name) {
            return s.simulation.bodyIndex(name);
          },
          py::arg("name"))
      .def(
          "body_name", [](const PySimulation& s, int32_t b) { return s.simulation.bodyName(b); },
          py::arg("body"))
      .def(
          "model_name", [](const PySimulation& s, int32_t b) { return s.simulation.modelName(b); },
          py::arg("body"))
      .def(
          "node_count", [](const PySimulation& s, int32_t b) { return s.simulation.nodeCount(b); },
          py::arg("body"))
      .def(
          "element_count",
          [](const PySimulation& s, int32_t b) { return s.simulation.elementCount(b); },
          py::arg("body"))
      .def(
          "positions",
          [](const PySimulation& s, int32_t b, std::optional<py::array> out) {
            return doubles(s.simulation.positions(b), 3, out);
          },
          py::arg("body"), py::arg("out"))
      .def(
          "velocities",
          [](const PySimulation& s, int32_t b, std::optional<py::array> out) {
            return doubles(s.simulation.velocities(b), 3, out);
          },
          py::arg("body"), py::arg("out"))
      .def(
          "masses",
          [](const PySimulation& s, int32_t b) { return doubles(s.simulation.masses(b), 1); },
          py::arg("body"))
      .def(
          "set_positions",
          [](PySimulation& s, int32_t b, const DoubleArray& x) {
            s.simulation.setPositions(b, rowsOf3(x, "positions"));
          },
          py::arg("body"), py::arg("positions"))
      .def(
          "set_velocities",
          [](PySimulation& s, int32_t b, const DoubleArray& v) {
            s.simulation.setVelocities(b, rowsOf3(v, "velocities"));
          },
          py::arg("body"), py::arg("velocities"))
      .def(
          "node_of_vertex",
          [](const PySimulation& s, int32_t b) {
            return vector1d<int32_t>(s.simulation.nodeOfVertex(b));
          },
          py::arg("body"))
      .def(
          "pinned_nodes",
          [](const PySimulation& s, int32_t b) {
            const std::span<const uint8_t> pinned = s.simulation.pinnedNodes(b);
            py::array_t<bool> out(static_cast<py::ssize_t>(pinned.size()));
            for (size_t i = 0; i < pinned.size(); ++i)
              out.mutable_at(static_cast<py::ssize_t>(i)) = pinned[i] != 0;
            return out;
          },
          py::arg("body"))
      .def(
          "surface",
          [](const PySimulation& s, int32_t b) { return geometryDict(s.simulation.surface(b)); },
          py::arg("body"))
      .def(
          "energies",
          [](const PySimulation& s, int32_t b) { return energiesDict(s.simulation.energies(b)); },
          py::arg("body"))
      .def(
          "node_pieces",
          [](const PySimulation& s, int32_t b) {
            const std::vector<int32_t> pieces = s.simulation.nodePieces(b);
            return vector1d<int32_t>(pieces);
          },
          py::arg("body"))
      .def(
          "piece_count",
          [](const PySimulation& s, int32_t b) { return s.simulation.pieceCount(b); },
          py::arg("body"))
      .def(
          "broken_elements",
          [](const PySimulation& s, int32_t b) { return s.simulation.brokenElements(b); },
          py::arg("body"))
      .def(
          "cracks", [](const PySimulation& s, int32_t b) { return s.simulation.cracks(b); },
          py::arg("body"))
      .def(
          "intersecting_triangle_pairs",
          [](const PySimulation& s) {
            const py::gil_scoped_release release;
            return s.simulation.intersectingTrianglePairs();
          },
          "Triangle pairs of the bodies' surfaces that intersect now (exact predicates), "
          "self and between bodies, without pairs sharing a node or neighbours in the rest "
          "shape.")
      .def(
          "intersecting_triangles",
          [](const PySimulation& s) {
            std::vector<IntersectingTriangles> pairs;
            {
              const py::gil_scoped_release release;
              pairs = s.simulation.intersectingTriangles();
            }
            py::array_t<int32_t> rows({static_cast<py::ssize_t>(pairs.size()), py::ssize_t{8}});
            auto r = rows.mutable_unchecked<2>();
            for (size_t i = 0; i < pairs.size(); ++i) {
              const auto k = static_cast<py::ssize_t>(i);
              r(k, 0) = pairs[i].bodyA;
              r(k, 4) = pairs[i].bodyB;
              for (py::ssize_t c = 0; c < 3; ++c) {
                r(k, 1 + c) = pairs[i].nodesA[static_cast<size_t>(c)];
                r(k, 5 + c) = pairs[i].nodesB[static_cast<size_t>(c)];
              }
            }
            return rows;
          },
          "The intersecting pairs as rows (body a, its three nodes, body b, its three nodes), "
          "(k, 8) int32.")
      .def(
          "gas_pressure",
          [](const PySimulation& s, int32_t b) { return s.simulation.gasPressure(b); },
          py::arg("body"), "The gas over-pressure pushing on the body now, Pa.")
      .def(
          "rigid_fragment_count",
          [](const PySimulation& s, int32_t b) { return s.simulation.rigidFragmentCount(b); },
          py::arg("body"))
      .def(
          "rigid_fragment_of_node",
          [](const PySimulation& s, int32_t b) {
            return vector1d<int32_t>(s.simulation.rigidFragmentOfNode(b));
          },
          py::arg("body"))
      .def("save_state", [](const PySimulation& s) { return s.simulation.saveState(); })
      .def(
          "restore_state",
          [](PySimulation& s, const SimulationState& state) { s.simulation.restoreState(state); },
          py::arg("state"))
      .def(
          "write_state",
          [](const PySimulation& s, const SimulationState& state,
             const std::filesystem::path& path) { s.simulation.writeStateFile(state, path); },
          py::arg("state"), py::arg("path"))
      .def(
          "read_state",
          [](const PySimulation& s, const std::filesystem::path& path) {
            return s.simulation.readStateFile(path);
          },
          py::arg("path"));

  m.def("_json_loads", &fromJsonText);
}
