// Scene files: the field tables (what each key means, its unit, default and valid range),
// the parser that reads a JSON scene against them, and the reference docs made from them.
#include "shellsim/scene.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include "io/json_fields.hpp"
#include "io/scene_names.hpp"
#include "io/scene_writer.hpp"
#include "models/registry.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;
using json_fields::FieldKind;
using json_fields::FieldSpec;
using json_fields::Json;
using json_fields::ObjectReader;
using json_fields::ObjectSpec;
using json_fields::Problems;
using json_fields::Range;

// Every model a body may name: the registry's (models/registry.hpp), in its order. The
// parser, its "did you mean" and the reference docs read this list.
std::span<const std::string_view> modelNames() {
  static std::vector<std::string_view> names;
  static uint64_t builtFor = 0;
  if (builtFor != modelRegistryVersion()) {
    names.clear();
    for (const ModelRegistration& model : modelRegistry()) names.push_back(model.name);
    builtFor = modelRegistryVersion();
  }
  return names;
}

// Scene files are a few kilobytes; the limits keep a hostile or corrupted file from
// exhausting memory or, through deep nesting, the stack of recursive JSON code.
constexpr std::size_t kMaxSceneBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxDepth = 64;

using scene_names::kFormats;
using scene_names::kIntegrators;
using scene_names::kNewtonHessians;
using scene_names::kObstacleTypes;
using scene_names::kOnOff;
using scene_names::kPinShapes;
using scene_names::kPrimitiveTypes;
using scene_names::toEnum;

// ---------------------------------------------------------------------------------------
// Field tables. The defaults here are the ones a scene gets; a test checks that they agree
// with the member initializers in scene.hpp.

// Each entry names only the members it sets, leaving the rest at their defaults on
// purpose; GCC 12 would warn about every one of those.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr FieldSpec kKeyframeFields[] = {
    {.key = "time",
     .unit = "s",
     .range = Range::atLeast(0),
     .required = true,
     .rule = "greater than the previous keyframe's",
     .meaning = "When the offset is reached, from the start of the run."},
    {.key = "offset",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .required = true,
     .meaning = "Displacement from the rest placement at `time`."},
};

constexpr FieldSpec kObstacleFields[] = {
    {.key = "type",
     .kind = FieldKind::kChoice,
     .choices = kObstacleTypes,
     .required = true,
     .meaning = "Shape of the obstacle."},
    {.key = "point",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "plane",
     .meaning = "A point on the plane."},
    {.key = "normal",
     .kind = FieldKind::kVec3,
     .vec = {0, 0, 1},
     .variants = "plane",
     .rule = "non-zero; normalised on reading",
     .meaning = "Normal of the plane, pointing into the free side."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "sphere box",
     .meaning = "Centre of the shape."},
    {.key = "radius",
     .unit = "m",
     .number = 0.5,
     .range = Range::above(0),
     .variants = "sphere",
     .meaning = "Radius of the sphere."},
    {.key = "half_extents",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0.5, 0.5, 0.5},
     .range = Range::above(0),
     .variants = "box",
     .meaning = "Half side lengths of the box."},
    {.key = "friction",
     .number = 0.3,
     .range = Range::atLeast(0),
     .meaning = "Coulomb friction coefficient of contacts with this obstacle."},
    {.key = "restitution",
     .number = 0.0,
     .range = Range::closed(0, 1),
     .meaning = "Share of the normal speed kept on impact: 0 inelastic, 1 elastic."},
    {.key = "path",
     .kind = FieldKind::kObjectList,
     .object = "keyframe",
     .rule = "times strictly increasing",
     .meaning = "Scripted translation, piecewise linear between keyframes and held outside "
                "them; empty: the obstacle does not move."},
};

constexpr FieldSpec kPrimitiveFields[] = {
    {.key = "type",
     .kind = FieldKind::kChoice,
     .choices = kPrimitiveTypes,
     .required = true,
     .meaning = "Generated shape: a sheet in the xy plane, a sphere, a hemisphere open at z = 0 "
                "(dome up), a cylinder along z with open ends, or a box; all centred at the "
                "origin."},
    {.key = "size",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {1, 1, 1},
     .range = Range::atLeast(0),
     .variants = "sheet box",
     .rule = "sheet: x, y > 0; box: x, y, z > 0",
     .meaning = "Side lengths; a sheet uses x and y."},
    {.key = "radius",
     .unit = "m",
     .number = 0.5,
     .range = Range::above(0),
     .variants = "sphere hemisphere cylinder",
     .meaning = "Radius."},
    {.key = "height",
     .unit = "m",
     .number = 1.0,
     .range = Range::above(0),
     .variants = "cylinder",
     .meaning = "Length along z."},
    {.key = "resolution",
     .kind = FieldKind::kInteger,
     .number = 16,
     .range = Range::closed(1, 2048),
     .meaning = "Subdivisions along the largest dimension."},
};

constexpr FieldSpec kTransformFields[] = {
    {.key = "scale",
     .kind = FieldKind::kNumberOrVec3,
     .vec = {1, 1, 1},
     .range = Range::above(0),
     .meaning = "Scale factors along x, y, z; one number scales uniformly. Applied first."},
    {.key = "rotation_degrees",
     .kind = FieldKind::kVec3,
     .unit = "deg",
     .vec = {0, 0, 0},
     .meaning = "Rotation about x, then y, then z (R = Rz Ry Rx). Applied after scaling."},
    {.key = "translation",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .meaning = "Translation, applied last."},
};

constexpr FieldSpec kMaterialFields[] = {
    {.key = "young_modulus",
     .unit = "Pa",
     .number = 1.0e6,
     .range = Range::above(0),
     .meaning = "Young's modulus E of the shell material."},
    {.key = "poisson",
     .number = 0.3,
     .range = Range::halfOpen(0, 0.5),
     .meaning = "Poisson ratio."},
    {.key = "thickness",
     .unit = "m",
     .number = 1.0e-3,
     .range = Range::above(0),
     .meaning = "Shell thickness."},
    {.key = "density",
     .unit = "kg/m^3",
     .number = 1000.0,
     .range = Range::above(0),
     .meaning = "Volumetric mass density of the material."},
    {.key = "damping",
     .unit = "1/s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .meaning = "Mass-proportional damping coefficient."},
    {.key = "stiffness",
     .unit = "N/m",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Raw stiffness that overrides the one derived from the material; "
                "mass_spring uses it as the spring constant."},
};

constexpr FieldSpec kRampFields[] = {
    {.key = "time",
     .unit = "s",
     .range = Range::atLeast(0),
     .required = true,
     .rule = "greater than the previous key's",
     .meaning = "When the factor is reached."},
    {.key = "value",
     .range = Range::any(),
     .required = true,
     .meaning = "Factor on the load at `time`; linear in between, constant outside."},
};

constexpr FieldSpec kLoadFields[] = {
    {.key = "shape",
     .kind = FieldKind::kChoice,
     .choices = kPinShapes,
     .required = true,
     .meaning = "Which nodes carry the load, chosen like a pin's."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "box sphere",
     .meaning = "Centre of the selecting shape."},
    {.key = "half_extents",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0.05, 0.05, 0.05},
     .range = Range::above(0),
     .variants = "box",
     .meaning = "Half side lengths of the box."},
    {.key = "radius",
     .unit = "m",
     .number = 0.05,
     .range = Range::above(0),
     .variants = "sphere",
     .meaning = "Radius of the sphere."},
    {.key = "vertices",
     .kind = FieldKind::kIntegerList,
     .range = Range::closed(0, 2147483647.0),
     .variants = "vertices",
     .rule = "non-empty when shape is `vertices`",
     .meaning = "Indices of the loaded nodes."},
    {.key = "force",
     .kind = FieldKind::kVec3,
     .unit = "N",
     .vec = {0, 0, 0},
     .meaning = "Total force on the selected nodes, spread in proportion to their masses."},
    {.key = "ramp",
     .kind = FieldKind::kObjectList,
     .object = "ramp",
     .rule = "times strictly increasing",
     .meaning = "Factor on the force over time; empty: 1."},
};

constexpr FieldSpec kPressureFields[] = {
    {.key = "pressure",
     .unit = "Pa",
     .range = Range::any(),
     .required = true,
     .meaning = "Over-pressure of the gas inside a closed shell: force p dA along each node's "
                "outward normal (negative: suction)."},
    {.key = "ramp",
     .kind = FieldKind::kObjectList,
     .object = "ramp",
     .rule = "times strictly increasing",
     .meaning = "Factor on the pressure over time; empty: 1."},
    {.key = "release_on_fracture",
     .kind = FieldKind::kChoice,
     .text = "on",
     .choices = kOnOff,
     .meaning = "`on`: the gas escapes (the pressure drops to 0) once a crack has formed."},
};

constexpr FieldSpec kPinFields[] = {
    {.key = "shape",
     .kind = FieldKind::kChoice,
     .choices = kPinShapes,
     .required = true,
     .meaning = "How the pinned nodes are chosen: those inside a box or sphere (in world space, "
                "after the body's transform), or a list of node indices."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "box sphere",
     .meaning = "Centre of the selecting shape."},
    {.key = "half_extents",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0.05, 0.05, 0.05},
     .range = Range::above(0),
     .variants = "box",
     .meaning = "Half side lengths of the box."},
    {.key = "radius",
     .unit = "m",
     .number = 0.05,
     .range = Range::above(0),
     .variants = "sphere",
     .meaning = "Radius of the sphere."},
    {.key = "vertices",
     .kind = FieldKind::kIntegerList,
     .range = Range::closed(0, 2147483647.0),
     .variants = "vertices",
     .rule = "non-empty when shape is `vertices`",
     .meaning = "Indices of the pinned nodes."},
    {.key = "path",
     .kind = FieldKind::kObjectList,
     .object = "keyframe",
     .rule = "times strictly increasing",
     .meaning = "Scripted offset of the pinned nodes; empty: they stay where they start."},
};

constexpr FieldSpec kBodyFields[] = {
    {.key = "name",
     .kind = FieldKind::kString,
     .text = "body<i>",
     .rule = "distinct; letters, digits, `_`, `-`, `.`; at most 64",
     .meaning = "Name used in messages and output file names; `<i>` is the body's index."},
    {.key = "file",
     .kind = FieldKind::kString,
     .optional = true,
     .rule = "exactly one of `file`, `primitive`; the file must exist",
     .meaning = "Geometry file (.obj, .ply, .off, .stl, .xyz); relative paths start at the "
                "scene file's folder."},
    {.key = "primitive",
     .kind = FieldKind::kObject,
     .object = "primitive",
     .optional = true,
     .meaning = "Generated geometry instead of a file."},
    {.key = "transform",
     .kind = FieldKind::kObject,
     .object = "transform",
     .meaning = "Placement of the geometry in the world."},
    {.key = "model",
     .kind = FieldKind::kChoice,
     .text = "mass_spring",
     .meaning = "The model that animates the body."},  // choices: modelNames()
    {.key = "material",
     .kind = FieldKind::kObject,
     .object = "material",
     .meaning = "Physical parameters."},
    // here: one options object per registered model (bodySpec())
    {.key = "pins",
     .kind = FieldKind::kObjectList,
     .object = "pin",
     .meaning = "Nodes held fixed or moved along a path."},
    {.key = "loads",
     .kind = FieldKind::kObjectList,
     .object = "load",
     .meaning = "Forces on regions of the body, possibly ramped over time."},
    {.key = "pressure",
     .kind = FieldKind::kObject,
     .object = "pressure",
     .optional = true,
     .meaning = "Gas pressure inside a closed shell (a balloon)."},
    {.key = "initial_velocity",
     .kind = FieldKind::kVec3,
     .unit = "m/s",
     .vec = {0, 0, 0},
     .meaning = "Velocity of every node at the start."},
};

constexpr FieldSpec kTimeFields[] = {
    {.key = "duration",
     .unit = "s",
     .number = 2.0,
     .range = Range::openClosed(0, 1e6),
     .meaning = "Simulated time."},
    {.key = "frame_rate",
     .unit = "1/s",
     .number = 30.0,
     .range = Range::openClosed(0, 10000),
     .meaning = "Frames written per simulated second."},
    {.key = "time_step",
     .unit = "s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .rule = "<= 1 / frame_rate",
     .meaning = "Integration step; 0 chooses a step automatically (half the stable explicit "
                "step for `verlet` and explicit `newmark`, 20 times it for the implicit "
                "integrators, at most the frame interval)."},
    {.key = "integrator",
     .kind = FieldKind::kChoice,
     .text = "verlet",
     .choices = kIntegrators,
     .meaning = "`verlet`: explicit velocity Verlet (wicke2005). `newmark`: Newmark with "
                "`newmark_beta`, `newmark_gamma` (beta = 0 is explicit; 1/4, 1/2 the implicit "
                "average-acceleration rule). `backward_euler`: implicit Euler, dissipative. "
                "The implicit ones solve each step by Newton's method with the models' "
                "Hessians. `static`: equilibrium under gravity and the loads, raised in "
                "`load_increments` equal steps (a frame each), no inertia."},
    {.key = "load_increments",
     .kind = FieldKind::kInteger,
     .number = 10,
     .range = Range::closed(1, 100000),
     .meaning = "`static`: the load factor goes from 0 to 1 in this many increments, one frame "
                "each (frame i at time i / n of `duration`, where pins and ramps stand; "
                "`frame_rate` is not used). An increment whose Newton solve fails is split "
                "into halves, down to 1/64 of it."},
    {.key = "newmark_beta",
     .number = 0.25,
     .range = Range::closed(0, 0.5),
     .meaning = "Newmark beta."},
    {.key = "newmark_gamma",
     .number = 0.5,
     .range = Range::closed(0.5, 1),
     .meaning = "Newmark gamma; above 1/2 adds numerical damping."},
    {.key = "newton_tolerance",
     .number = 1e-6,
     .range = Range::openClosed(0, 1),
     .meaning = "Newton's method stops when the residual falls below this fraction of the "
                "step's force scale."},
    {.key = "newton_max_iterations",
     .kind = FieldKind::kInteger,
     .number = 30,
     .range = Range::closed(1, 1000),
     .meaning = "Newton iterations per step before the step counts as failed (and is "
                "retried with half the step)."},
    {.key = "newton_hessian",
     .kind = FieldKind::kChoice,
     .text = "frozen",
     .choices = kNewtonHessians,
     .meaning = "`frozen`: iterate with the last factorized Hessian, kept across steps, "
                "while each iteration at least halves the residual; after one that does not, "
                "the step continues with exact iterations (modified Newton: several times "
                "cheaper per step on stiff sheets, a little slower where the Hessian changes "
                "fast, as in a crushed can). `exact`: the current Hessian at every iteration "
                "(quadratic convergence)."},
};

constexpr FieldSpec kOutputFields[] = {
    {.key = "folder",
     .kind = FieldKind::kString,
     .text = "out",
     .rule = "non-empty",
     .meaning = "Where frames are written; relative paths start at the working directory."},
    {.key = "formats",
     .kind = FieldKind::kChoiceList,
     .text = "[\"ply\"]",
     .choices = kFormats,
     .meaning = "Frame file formats."},
    {.key = "checkpoint_every",
     .kind = FieldKind::kInteger,
     .number = 1,
     .range = Range::closed(0, 1000000),
     .meaning = "Write `checkpoint.bin` (the state, atomically) after every this many frames, "
                "so that `shellsim run --resume` continues a killed run from the last one with "
                "byte-identical frames; 0: never."},
    {.key = "camera",
     .kind = FieldKind::kObject,
     .object = "camera",
     .optional = true,
     .meaning = "Camera of rendered previews (`shellsim render`, `run --preview`); absent: "
                "fitted to the bounds of the whole run."},
};

constexpr FieldSpec kCameraFields[] = {
    {.key = "eye",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .required = true,
     .meaning = "Where the camera is."},
    {.key = "target",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .required = true,
     .rule = "differs from `eye`",
     .meaning = "The point at the centre of the picture."},
    {.key = "up",
     .kind = FieldKind::kVec3,
     .vec = {0, 0, 1},
     .rule = "not parallel to `target - eye`",
     .meaning = "Direction that points up in the picture."},
    {.key = "fov",
     .unit = "deg",
     .number = 40.0,
     .range = Range::closed(1, 179),
     .meaning = "Vertical field of view."},
};

constexpr FieldSpec kSceneFields[] = {
    {.key = "gravity",
     .kind = FieldKind::kVec3,
     .unit = "m/s^2",
     .vec = {0, 0, -9.81},
     .meaning = "Uniform gravitational acceleration."},
    {.key = "obstacles",
     .kind = FieldKind::kObjectList,
     .object = "obstacle",
     .meaning = "Collision shapes the bodies cannot pass."},
    {.key = "bodies",
     .kind = FieldKind::kObjectList,
     .object = "body",
     .required = true,
     .rule = "at least one",
     .meaning = "The simulated shells."},
    {.key = "time",
     .kind = FieldKind::kObject,
     .object = "time",
     .meaning = "Run length and steps."},
    {.key = "output",
     .kind = FieldKind::kObject,
     .object = "output",
     .meaning = "What is written and where."},
};

constexpr ObjectSpec kSceneSpec{"scene", "The top-level object of a scene file.", kSceneFields};
constexpr ObjectSpec kObstacleSpec{"obstacle",
                                   "A rigid collision shape, at rest or moving along a path.",
                                   kObstacleFields, "type"};
constexpr ObjectSpec kKeyframeSpec{"keyframe", "One point of a scripted path.", kKeyframeFields};
constexpr ObjectSpec kPrimitiveSpec{"primitive", "A generated surface mesh.", kPrimitiveFields,
                                    "type"};
constexpr ObjectSpec kTransformSpec{"transform", "Scale, then rotate, then translate.",
                                    kTransformFields};
constexpr ObjectSpec kMaterialSpec{"material",
                                   "Physical parameters in SI units; each model "
                                   "documents how it maps them to its own stiffnesses.",
                                   kMaterialFields};
constexpr ObjectSpec kPinSpec{"pin", "Nodes held fixed, or moved along a scripted path.",
                              kPinFields, "shape"};
constexpr ObjectSpec kLoadSpec{"load", "A force on a region of a body.", kLoadFields, "shape"};
constexpr ObjectSpec kPressureSpec{"pressure", "Gas pressure inside a closed shell.",
                                   kPressureFields};
constexpr ObjectSpec kRampSpec{"ramp", "One key of a factor ramped over time.", kRampFields};
constexpr ObjectSpec kTimeSpec{"time", "How long to simulate and how often to write a frame.",
                               kTimeFields};
constexpr ObjectSpec kOutputSpec{"output", "Frame files.", kOutputFields};
constexpr ObjectSpec kCameraSpec{"camera", "A pinhole camera for rendered previews.",
                                 kCameraFields};
#pragma GCC diagnostic pop

// The body's table: kBodyFields with the model's choices from the registry and, after
// "material", one options object per registered model that has options.
const ObjectSpec& bodySpec() {
  static std::vector<FieldSpec> fields;
  static ObjectSpec spec{"body", "One simulated shell: its geometry, model and material.", {}, {}};
  static uint64_t builtFor = 0;
  if (builtFor == modelRegistryVersion()) return spec;
  fields.clear();
  for (const FieldSpec& field : kBodyFields) {
    fields.push_back(field);
    if (field.key == "model") fields.back().choices = modelNames();
    if (field.key != "material") continue;
    for (const ModelRegistration& model : modelRegistry()) {
      if (model.options == nullptr) continue;
      FieldSpec options;
      options.key = model.name;
      options.kind = FieldKind::kObject;
      options.object = model.options->name;
      options.meaning = model.meaning;
      fields.push_back(options);
    }
  }
  spec.fields = fields;
  builtFor = modelRegistryVersion();
  return spec;
}

// Document order: top-down, as a reader meets them in a file; each model's options after
// the material.
std::vector<const ObjectSpec*> allSpecs() {
  std::vector<const ObjectSpec*> specs = {&kSceneSpec, &bodySpec(), &kPrimitiveSpec,
                                          &kTransformSpec, &kMaterialSpec};
  for (const ModelRegistration& model : modelRegistry()) {
    if (model.options == nullptr) continue;
    specs.push_back(model.options);
    specs.insert(specs.end(), model.nestedOptions.begin(), model.nestedOptions.end());
  }
  specs.insert(specs.end(), {&kPinSpec, &kLoadSpec, &kPressureSpec, &kRampSpec, &kObstacleSpec,
                             &kKeyframeSpec, &kTimeSpec, &kOutputSpec, &kCameraSpec});
  return specs;
}

// The scene of `shellsim run` without a scene file; scenes/default.json holds the same.
constexpr std::string_view kDefaultSceneJson = R"({
  "gravity": [0, 0, -9.81],
  "obstacles": [
    {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1], "friction": 0.5},
    {"type": "sphere", "center": [0, 0, 0.35], "radius": 0.3, "friction": 0.4}
  ],
  "bodies": [
    {
      "name": "sheet",
      "primitive": {"type": "sheet", "size": [1, 1, 0], "resolution": 24},
      "transform": {"translation": [0, 0, 0.8]},
      "model": "fiber",
      "material": {
        "young_modulus": 1e6,
        "poisson": 0.3,
        "thickness": 0.001,
        "density": 300,
        "damping": 0.5
      }
    }
  ],
  "time": {"duration": 3, "frame_rate": 30, "time_step": 0},
  "output": {"folder": "out/default", "formats": ["ply"]}
}
)";

// ---------------------------------------------------------------------------------------
// JSON text: size, nesting, duplicate keys and syntax, before any field is read.

// Checks the structure in one SAX pass: nlohmann's SAX parser is iterative, so depth can
// be capped here before the DOM parse and the recursive code after it see the input.
// Duplicate keys matter because nlohmann keeps the last silently.
class StructureCheck {
 public:
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(Json::number_integer_t) { return value(); }
  bool number_unsigned(Json::number_unsigned_t) { return value(); }
  bool number_float(Json::number_float_t, const std::string&) { return value(); }
  bool string(std::string&) { return value(); }
  bool binary(Json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(true); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    Frame& top = frames_.back();
    top.key = k;
    if (!top.keys.insert(k).second) duplicates.push_back(childPath());
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    errorPosition = position;
    errorMessage = e.what();
    return false;
  }

  bool tooDeep = false;
  std::size_t errorPosition = 0;
  std::string errorMessage;
  std::vector<std::string> duplicates;  // paths of keys given twice in one object

 private:
  struct Frame {
    bool array = false;
    std::string path;
    std::size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };

  std::string childPath() const {
    if (frames_.empty()) return {};
    const Frame& top = frames_.back();
    if (top.array) return top.path + "[" + std::to_string(top.index) + "]";
    return json_fields::childPath(top.path, top.key);
  }
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool open(bool array) {
    if (frames_.size() >= kMaxDepth) {
      tooDeep = true;
      return false;
    }
    Frame frame;
    frame.array = array;
    frame.path = childPath();
    frames_.push_back(std::move(frame));
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }

  std::vector<Frame> frames_;
};

// "scene.json:3:14:" for the byte nlohmann stopped at (1-based position of the last read).
std::string location(const std::string& text, std::size_t position) {
  const std::size_t at = std::min(position > 0 ? position - 1 : 0, text.size());
  std::size_t line = 1;
  std::size_t lineStart = 0;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  }
  return std::to_string(line) + ":" + std::to_string(at - lineStart + 1);
}

// nlohmann's message without its "[json.exception...] parse error at line l, column c: "
// prefix, which would repeat the location, and on one line.
std::string syntaxReason(const std::string& what) {
  std::string reason = what;
  if (!reason.empty() && reason.front() == '[') {
    const std::size_t close = reason.find("] ");
    if (close != std::string::npos) reason = reason.substr(close + 2);
  }
  if (reason.rfind("parse error", 0) == 0) {
    const std::size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
  }
  for (char& c : reason) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return reason;
}

Json parseJson(const std::string& text, const std::string& source, Problems& problems) {
  if (text.size() > kMaxSceneBytes) {
    throw InputError(source + ": " + std::to_string(text.size()) +
                     " bytes is too large for a scene file (at most " +
                     std::to_string(kMaxSceneBytes) + ")");
  }
  StructureCheck check;
  const bool ok = Json::sax_parse(text, &check);
  if (check.tooDeep) {
    throw InputError(source + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (!ok) {
    throw InputError(source + ":" + location(text, check.errorPosition) +
                     ": invalid JSON: " + syntaxReason(check.errorMessage));
  }
  for (const std::string& path : check.duplicates) {
    problems.add(path, "key given more than once (only one may be given)");
  }
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    // The SAX pass accepted the same text, so this is not expected; still an input error.
    throw InputError(source + ": invalid JSON: " + syntaxReason(e.what()));
  }
}

// ---------------------------------------------------------------------------------------
// Reading the objects

bool isPositiveFiniteNorm(const Vec3d& v, double& norm) {
  norm = std::hypot(v[0], v[1], v[2]);
  return norm > 0 && std::isfinite(norm);
}

// The objects of the list `listKey` of `parent`, each with a `time` greater than the one
// before (else a problem naming it) and a value read by `readValue(reader, key)`.
template <class Key, class ReadValue>
std::vector<Key> readTimedKeys(ObjectReader& parent, Problems& problems, std::string_view listKey,
                               const ObjectSpec& spec, const std::string& noun,
                               const ReadValue& readValue) {
  std::vector<Key> keys;
  std::optional<double> previous;
  for (const auto& element : parent.objectList(listKey)) {
    ObjectReader r(element.value, element.path, spec, problems);
    Key key;
    const std::optional<double> time = r.tryNumber("time");
    readValue(r, key);
    r.finish();
    if (time) {
      key.time = *time;
      if (previous && !(*time > *previous)) {
        problems.add(r.pathOf("time"), *r.find("time"),
                     "must be greater than the previous " + noun + "'s time (" +
                         json_fields::formatNumber(*previous) + ")");
      }
      previous = time;
    }
    keys.push_back(key);
  }
  return keys;
}

std::vector<ObstacleDef::Keyframe> readPath(ObjectReader& parent, Problems& problems) {
  return readTimedKeys<ObstacleDef::Keyframe>(
      parent, problems, "path", kKeyframeSpec, "keyframe",
      [](ObjectReader& r, ObstacleDef::Keyframe& key) { key.offset = r.vec3("offset"); });
}

ObstacleDef readObstacle(const ObjectReader::Element& element, Problems& problems) {
  ObjectReader r(element.value, element.path, kObstacleSpec, problems);
  ObstacleDef o;
  const std::string type = r.choice("type");
  o.type = toEnum(type, kObstacleTypes, ObstacleType::kPlane);
  o.point = r.vec3("point");
  if (const auto normal = r.tryVec3("normal")) {
    double norm = 0;
    if (isPositiveFiniteNorm(*normal, norm)) {
      o.normal = {(*normal)[0] / norm, (*normal)[1] / norm, (*normal)[2] / norm};
    } else {
      problems.add(r.pathOf("normal"), *r.find("normal"), "must be a non-zero vector");
    }
  }
  o.center = r.vec3("center");
  o.radius = r.number("radius");
  o.halfExtents = r.vec3("half_extents");
  o.friction = r.number("friction");
  o.restitution = r.number("restitution");
  o.path = readPath(r, problems);
  r.finish(type);
  return o;
}

PrimitiveDef readPrimitive(ObjectReader& r, Problems& problems) {
  PrimitiveDef p;
  const std::string type = r.choice("type");
  p.type = toEnum(type, kPrimitiveTypes, PrimitiveType::kSheet);
  if (const auto size = r.tryVec3("size")) {
    p.size = *size;
    const std::size_t needed = p.type == PrimitiveType::kSheet ? 2 : 3;
    for (std::size_t i = 0; i < needed; ++i) {
      if (!(p.size[i] > 0)) {
        problems.add(r.pathOf("size") + "[" + std::to_string(i) + "]", (*r.find("size"))[i],
                     "must be > 0 for a " + type);
      }
    }
  }
  p.radius = r.number("radius");
  p.height = r.number("height");
  p.resolution = r.integer("resolution");
  r.finish(type);
  return p;
}

TransformDef readTransform(ObjectReader& r) {
  TransformDef t;
  t.scale = r.vec3("scale");
  t.rotationDegrees = r.vec3("rotation_degrees");
  t.translation = r.vec3("translation");
  r.finish();
  return t;
}

MaterialDef readMaterial(ObjectReader& r) {
  MaterialDef m;
  m.youngModulus = r.number("young_modulus");
  m.poisson = r.number("poisson");
  m.thickness = r.number("thickness");
  m.density = r.number("density");
  m.damping = r.number("damping");
  m.stiffness = r.tryNumber("stiffness");
  r.finish();
  return m;
}

std::vector<RampKey> readRamp(ObjectReader& parent, Problems& problems) {
  return readTimedKeys<RampKey>(
      parent, problems, "ramp", kRampSpec, "key",
      [](ObjectReader& r, RampKey& key) { key.value = r.tryNumber("value").value_or(1.0); });
}

PinDef readPin(const ObjectReader::Element& element, Problems& problems) {
  ObjectReader r(element.value, element.path, kPinSpec, problems);
  PinDef pin;
  const std::string shape = r.choice("shape");
  pin.shape = toEnum(shape, kPinShapes, PinShape::kBox);
  pin.center = r.vec3("center");
  pin.halfExtents = r.vec3("half_extents");
  pin.radius = r.number("radius");
  pin.vertices = r.integerList("vertices");
  if (shape == "vertices") {
    if (!r.has("vertices")) {
      problems.add(r.pathOf("vertices"), "is required when shape is 'vertices'");
    } else if (r.find("vertices")->is_array() && r.find("vertices")->empty()) {
      problems.add(r.pathOf("vertices"), *r.find("vertices"), "must list at least one vertex");
    }
  }
  pin.path = readPath(r, problems);
  r.finish(shape);
  return pin;
}

bool isValidName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

void readFile(ObjectReader& r, const fs::path& sceneFolder, BodyDef& body, Problems& problems) {
  const std::optional<std::string> file = r.tryString("file");
  if (!file) return;
  const std::string path = r.pathOf("file");
  const Json& value = *r.find("file");
  if (file->empty()) {
    problems.add(path, value, "must not be empty");
    return;
  }
  if (file->find('\0') != std::string::npos) {
    problems.add(path, value, "must not contain a NUL character");
    return;
  }
  const fs::path given(*file);
  const fs::path resolved = given.is_absolute() ? given : (sceneFolder / given).lexically_normal();
  body.file = resolved;
  try {
    (void)formatFromPath(resolved);
  } catch (const InputError&) {
    problems.add(path, value,
                 "unsupported geometry format: expected .obj, .ply, .off, .stl or .xyz");
    return;
  }
  std::error_code ec;
  const fs::file_status status = fs::status(resolved, ec);
  if (!fs::exists(status)) {
    problems.add(path, value, "no such file (resolved to '" + resolved.string() + "')");
  } else if (fs::is_directory(status)) {
    problems.add(path, value,
                 "is a directory, not a file (resolved to '" + resolved.string() + "')");
  }
}

BodyDef readBody(const ObjectReader::Element& element, std::size_t index,
                 const fs::path& sceneFolder, Problems& problems) {
  ObjectReader r(element.value, element.path, bodySpec(), problems);
  BodyDef body;
  body.name = "body" + std::to_string(index);
  if (const auto name = r.tryString("name")) {
    if (isValidName(*name)) {
      body.name = *name;
    } else {
      problems.add(r.pathOf("name"), *r.find("name"),
                   "must be 1 to 64 letters, digits, '_', '-' or '.', not starting with '.'");
    }
  }
  const bool hasFile = r.has("file");
  const bool hasPrimitive = r.has("primitive");
  if (hasFile && hasPrimitive) {
    problems.add(r.path(), "give either 'file' or 'primitive', not both");
  } else if (!hasFile && !hasPrimitive) {
    problems.add(r.path(), "needs a geometry: give 'file' or 'primitive'");
  }
  readFile(r, sceneFolder, body, problems);
  {
    ObjectReader pr = r.object("primitive", kPrimitiveSpec);
    if (hasPrimitive && r.find("primitive")->is_object()) {
      body.primitive = readPrimitive(pr, problems);
    }
  }
  {
    ObjectReader tr = r.object("transform", kTransformSpec);
    body.transform = readTransform(tr);
  }
  body.model = r.choice("model");
  {
    ObjectReader mr = r.object("material", kMaterialSpec);
    body.material = readMaterial(mr);
  }
  for (const ModelRegistration& model : modelRegistry()) {
    if (model.options == nullptr || !r.has(model.name)) continue;  // absent: defaults
    ObjectReader mr = r.object(model.name, *model.options);
    model.readOptions(mr, problems, body);
  }
  for (const auto& pin : r.objectList("pins")) body.pins.push_back(readPin(pin, problems));
  for (const auto& loadElement : r.objectList("loads")) {
    ObjectReader lr(loadElement.value, loadElement.path, kLoadSpec, problems);
    LoadDef load;
    const std::string shape = lr.choice("shape");
    load.select.shape = toEnum(shape, kPinShapes, PinShape::kBox);
    load.select.center = lr.vec3("center");
    load.select.halfExtents = lr.vec3("half_extents");
    load.select.radius = lr.number("radius");
    load.select.vertices = lr.integerList("vertices");
    if (shape == "vertices" && (!lr.has("vertices") || (lr.find("vertices")->is_array() &&
                                                        lr.find("vertices")->empty()))) {
      problems.add(lr.pathOf("vertices"), "must list at least one vertex when shape is 'vertices'");
    }
    load.force = lr.vec3("force");
    load.ramp = readRamp(lr, problems);
    lr.finish(shape);
    body.loads.push_back(std::move(load));
  }
  if (r.has("pressure")) {
    ObjectReader pr = r.object("pressure", kPressureSpec);
    PressureDef pressure;
    pressure.pressure = pr.tryNumber("pressure").value_or(0.0);
    pressure.ramp = readRamp(pr, problems);
    pressure.releaseOnFracture = pr.choice("release_on_fracture") == "on";
    pr.finish();
    body.pressure = std::move(pressure);
  }
  body.initialVelocity = r.vec3("initial_velocity");
  r.finish();
  return body;
}

TimeDef readTime(ObjectReader& r, Problems& problems) {
  TimeDef t;
  const std::optional<double> frameRate = r.tryNumber("frame_rate");
  const std::optional<double> timeStep = r.tryNumber("time_step");
  t.duration = r.number("duration");
  t.frameRate = frameRate.value_or(t.frameRate);
  t.timeStep = timeStep.value_or(t.timeStep);
  t.integrator = toEnum(r.choice("integrator"), kIntegrators, Integrator::kVerlet);
  t.newmarkBeta = r.number("newmark_beta");
  t.newmarkGamma = r.number("newmark_gamma");
  t.newtonTolerance = r.number("newton_tolerance");
  t.newtonMaxIterations = static_cast<int>(r.integer("newton_max_iterations"));
  t.newtonFrozenHessian = r.choice("newton_hessian") == "frozen";
  t.loadIncrements = r.integer("load_increments");
  // Against the default frame rate too, but not against a bad one, already reported.
  const bool frameRateUsable = frameRate.has_value() || !r.has("frame_rate");
  if (timeStep && frameRateUsable && *timeStep > 1.0 / t.frameRate) {
    problems.add(r.pathOf("time_step"), *r.find("time_step"),
                 "must be <= 1 / frame_rate = " + json_fields::formatNumber(1.0 / t.frameRate) +
                     " s, so that every frame is reached");
  }
  r.finish();
  return t;
}

OutputDef readOutput(ObjectReader& r, Problems& problems) {
  OutputDef o;
  o.checkpointEvery = r.integer("checkpoint_every");
  if (const auto folder = r.tryString("folder")) {
    if (folder->empty() || folder->find('\0') != std::string::npos) {
      problems.add(r.pathOf("folder"), *r.find("folder"), "must be a non-empty path");
    } else {
      o.folder = *folder;
    }
  }
  if (r.has("formats")) {
    std::vector<OutputFormat> formats;
    for (const std::string& f : r.choiceList("formats")) {
      formats.push_back(toEnum(f, kFormats, OutputFormat::kPly));
    }
    if (!formats.empty()) o.formats = std::move(formats);
  }
  if (r.has("camera")) {
    ObjectReader cr = r.object("camera", kCameraSpec);
    CameraDef camera;
    const std::optional<Vec3d> eye = cr.tryVec3("eye");
    const std::optional<Vec3d> target = cr.tryVec3("target");
    camera.up = cr.vec3("up");
    camera.fovDegrees = cr.number("fov");
    if (eye && target) {
      camera.eye = *eye;
      camera.target = *target;
      const Vec3d d{(*target)[0] - (*eye)[0], (*target)[1] - (*eye)[1], (*target)[2] - (*eye)[2]};
      const Vec3d& u = camera.up;
      const Vec3d c{d[1] * u[2] - d[2] * u[1], d[2] * u[0] - d[0] * u[2],
                    d[0] * u[1] - d[1] * u[0]};
      const double dn = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      const double un = std::sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
      const double cn = std::sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
      if (!(dn > 0)) {
        problems.add(cr.pathOf("target"), *cr.find("target"), "must differ from camera.eye");
      } else if (!(cn > 1e-6 * dn * un)) {
        problems.add(cr.pathOf("up"), cr.has("up") ? *cr.find("up") : Json::array({0, 0, 1}),
                     "must not be parallel to target - eye");
      }
    }
    cr.finish();
    o.camera = camera;
  }
  r.finish();
  return o;
}

SceneDef readScene(const Json& root, const fs::path& sceneFolder, Problems& problems) {
  SceneDef scene;
  scene.sceneFolder = sceneFolder;
  ObjectReader r(&root, "", kSceneSpec, problems);
  scene.gravity = r.vec3("gravity");
  for (const auto& o : r.objectList("obstacles"))
    scene.obstacles.push_back(readObstacle(o, problems));

  const auto bodies = r.objectList("bodies");
  if (const Json* list = r.find("bodies"); list != nullptr && list->is_array() && list->empty()) {
    problems.add("bodies", *list, "must list at least one body");
  }
  std::map<std::string, std::size_t> names;  // name -> index of the first body with it
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    // The default name uses the position in the list, even if earlier entries were bad.
    const std::size_t index = bodies[i].index;
    BodyDef body = readBody(bodies[i], index, sceneFolder, problems);
    const auto [it, inserted] = names.emplace(body.name, index);
    if (!inserted) {
      problems.add(
          bodies[i].path + ".name", Json(body.name),
          "already names bodies[" + std::to_string(it->second) + "]; names must be distinct");
    }
    scene.bodies.push_back(std::move(body));
  }
  {
    ObjectReader tr = r.object("time", kTimeSpec);
    scene.time = readTime(tr, problems);
  }
  {
    ObjectReader outr = r.object("output", kOutputSpec);
    scene.output = readOutput(outr, problems);
  }
  r.finish();
  return scene;
}

}  // namespace

const std::vector<std::string>& knownModelNames() {
  static std::vector<std::string> names;
  names.assign(modelNames().begin(), modelNames().end());
  return names;
}

SceneDef parseScene(const std::string& jsonText, const std::string& sourceName,
                    const std::filesystem::path& sceneFolder) {
  Problems problems(sourceName);
  const Json root = parseJson(jsonText, sourceName, problems);
  if (!root.is_object()) {
    throw InputError(sourceName + ": the top level must be a JSON object {...}, not " +
                     std::string(root.type_name()));
  }
  SceneDef scene = readScene(root, sceneFolder, problems);
  problems.throwIfAny();
  return scene;
}

SceneDef loadScene(const std::filesystem::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw IoError(path.string() + ": no such file");
  if (fs::is_directory(status)) throw IoError(path.string() + ": is a directory, not a scene file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(path.string() + ": read failed");
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  const fs::path absolute = fs::absolute(folder, ec);
  return parseScene(text.str(), path.string(), ec ? folder : absolute.lexically_normal());
}

SceneDef defaultScene() {
  std::error_code ec;
  fs::path here = fs::current_path(ec);
  if (ec) here = ".";
  return parseScene(std::string(kDefaultSceneJson), "default scene", here);
}

std::string sceneToJson(const SceneDef& scene) {
  return scene_writer::toJson(scene).dump(2) + "\n";
}

namespace {

// The source name of problems found in definitions made in code.
constexpr const char* kApiSource = "shellsim";

}  // namespace

void validateBody(const BodyDef& body, const std::string& path, bool geometryGiven) {
  Problems problems(kApiSource);
  Json json = scene_writer::toJson(body);
  if (geometryGiven) {
    // Stands in for the mesh given in memory, which the reader cannot see: the default
    // primitive, valid by construction, so only the other keys are judged.
    json.erase("file");
    json["primitive"] = {{"type", "sheet"}};
  }
  const ObjectReader::Element element{&json, path, 0};
  (void)readBody(element, 0, fs::path("."), problems);
  problems.throwIfAny();
}

void validateObstacle(const ObstacleDef& obstacle, const std::string& path) {
  Problems problems(kApiSource);
  const Json json = scene_writer::toJson(obstacle);
  const ObjectReader::Element element{&json, path, 0};
  (void)readObstacle(element, problems);
  problems.throwIfAny();
}

void validateTime(const TimeDef& time, const std::string& path) {
  Problems problems(kApiSource);
  const Json json = scene_writer::toJson(time);
  ObjectReader reader(&json, path, kTimeSpec, problems);
  (void)readTime(reader, problems);
  problems.throwIfAny();
}

std::string sceneReferenceMarkdown() {
  std::string out =
      "# Scene file reference\n"
      "\n"
      "<!-- Generated from the field tables in src/io/scene.cpp and the models' registrations\n"
      "     (src/models/*/*_registration.cpp) by `shellsim scene-reference >\n"
      "     docs/scene-reference.md`; do not edit by hand. A test fails when it drifts. -->\n"
      "\n"
      "A scene file is a JSON object. Keys are snake_case; every value is in SI units (angles\n"
      "in degrees) and every key has a default unless it is marked *required*. Before a run,\n"
      "the whole file is checked and every problem is reported at once, one per line, with\n"
      "the path of the value and the reason:\n"
      "\n"
      "```\n"
      "scene.json: bodies[0].material.poisson = 0.7: must be in [0, 0.5)\n"
      "scene.json: bodies[0].materal: unknown key; did you mean 'material'?\n"
      "```\n"
      "\n"
      "Unknown keys, keys given twice, keys that the chosen `type` or `shape` does not use,\n"
      "wrong types and non-finite numbers are errors. Models: " +
      [] {
        std::string models;
        for (const std::string_view name : modelNames()) {
          if (!models.empty()) models += ", ";
          models += "`" + std::string(name) + "`";
        }
        return models;
      }() +
      ".\n"
      "\n"
      "## Example\n"
      "\n"
      "The built-in default scene (`scenes/default.json`), a fiber-shell sheet dropped onto a "
      "sphere:\n"
      "\n"
      "```json\n" +
      std::string(kDefaultSceneJson) + "```\n";
  for (const ObjectSpec* spec : allSpecs()) out += "\n" + json_fields::markdownSection(*spec);
  return out;
}

}  // namespace shellsim
