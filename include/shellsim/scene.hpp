// Scene definitions: everything a run needs, validated, in SI units.
//
// A scene file is JSON; `parseScene` turns it into a SceneDef or throws an InputError
// listing every problem at once, each with the path of the value and the reason.
// docs/scene-reference.md lists every key with its unit, default and range; it is
// generated from the same field tables the parser uses (`shellsim scene-reference`).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "shellsim/model_options.hpp"

namespace shellsim {

using Vec3d = std::array<double, 3>;

enum class ObstacleType { kPlane, kSphere, kBox };

// How an obstacle pushes the nodes out (dynamics/contact.hpp).
enum class ObstacleResponse {
  kProjection,  // nodes inside are moved onto the surface, their velocity filtered
  kPenalty,     // a stiff spring within the body's half thickness (gingold2004 section 4.3)
};

struct ObstacleDef {
  ObstacleType type = ObstacleType::kPlane;
  Vec3d point{0, 0, 0};              // plane: a point on it, m
  Vec3d normal{0, 0, 1};             // plane: unit normal pointing into the free side
  Vec3d center{0, 0, 0};             // sphere, box: centre, m
  double radius = 0.5;               // sphere: radius, m
  Vec3d halfExtents{0.5, 0.5, 0.5};  // box: half side lengths, m
  double friction = 0.3;             // Coulomb coefficient, >= 0
  double restitution = 0.0;          // normal restitution, [0, 1]
  ObstacleResponse response = ObstacleResponse::kProjection;
  // A thrown obstacle: mass > 0 makes it free, moved by gravity and the penalty springs'
  // reactions (translation only), starting with `velocity`; 0 keeps it where its path puts
  // it. A free obstacle needs the penalty response and no path.
  double mass = 0;          // kg, >= 0
  Vec3d velocity{0, 0, 0};  // m/s, of a free obstacle at time 0
  // kappa of this penalty obstacle's springs, as ContactDef::stiffness (k = kappa m /
  // dt_s^2), > 0 (< 4 with an explicit integrator); 0: ContactDef::stiffness. A projectile
  // much heavier than the nodes it meets needs kappa of about its mass over theirs, which
  // would make the meshes' own contact needlessly stiff.
  double stiffness = 0;
  // Optional scripted motion of the whole obstacle (translation only).
  struct Keyframe {
    double time = 0;
    Vec3d offset{0, 0, 0};
    bool operator==(const Keyframe&) const = default;
  };
  std::vector<Keyframe> path;  // piecewise linear offset over time (s, m); empty: static

  bool operator==(const ObstacleDef&) const = default;
};

enum class PrimitiveType { kSheet, kSphere, kHemisphere, kCylinder, kBox };

struct PrimitiveDef {
  PrimitiveType type = PrimitiveType::kSheet;
  // sheet: size[0] x size[1] in the xy plane, centred at the origin.
  // box: size[0] x size[1] x size[2], centred. Other types ignore it.
  Vec3d size{1, 1, 1};      // m
  double radius = 0.5;      // sphere, hemisphere (open at z = 0, dome up), cylinder, m
  double height = 1.0;      // cylinder along z, centred, m
  bool caps = false;        // cylinder: closed by two flat discs (a can), else open ends
  int32_t resolution = 16;  // subdivisions along the largest dimension, >= 1

  bool operator==(const PrimitiveDef&) const = default;
};

struct TransformDef {
  Vec3d scale{1, 1, 1};
  Vec3d rotationDegrees{0, 0, 0};  // applied as Rz * Ry * Rx (x first), degrees
  Vec3d translation{0, 0, 0};      // m

  bool operator==(const TransformDef&) const = default;
};

enum class PinShape { kBox, kSphere, kVertices };

// Nodes held fixed, or moved along a scripted path, by the stepper.
struct PinDef {
  PinShape shape = PinShape::kBox;
  Vec3d center{0, 0, 0};                    // box, sphere: centre in world space after transform, m
  Vec3d halfExtents{0.05, 0.05, 0.05};      // box, m
  double radius = 0.05;                     // sphere, m
  std::vector<int32_t> vertices;            // vertices: indices into the body's nodes
  std::vector<ObstacleDef::Keyframe> path;  // offset of the pinned nodes over time
  std::optional<double> release;            // s: the pin lets go then; none: never

  bool operator==(const PinDef&) const = default;
};

// Material in physical units; each model maps it to its own stiffnesses and documents how.
struct MaterialDef {
  double youngModulus = 1.0e6;  // Pa, > 0
  double poisson = 0.3;         // [0, 0.5)
  double thickness = 1.0e-3;    // m, > 0
  double density = 1000.0;      // kg/m^3, > 0
  double damping = 0.0;         // mass-proportional damping coefficient, 1/s, >= 0
  // Rate at which the nodes' velocities relative to the rigid motion of their piece decay,
  // 1/s, >= 0: internal friction that stills vibrations but not flight or spin.
  double internalDamping = 0.0;
  // Raw per-model stiffness override: mass_spring uses it as the spring constant, N/m.
  std::optional<double> stiffness;

  bool operator==(const MaterialDef&) const = default;
};

// One point of a piecewise-linear scalar ramp over time (constant outside the keys).
struct RampKey {
  double time = 0;   // s
  double value = 1;  // dimensionless factor
  bool operator==(const RampKey&) const = default;
};

// A force on the nodes selected like a pin's (shape box, sphere or vertices), spread over
// them in proportion to their masses (a uniform body force on the region).
struct LoadDef {
  PinDef select;              // which nodes; its path is unused
  Vec3d force{0, 0, 0};       // total force on the region, N
  std::vector<RampKey> ramp;  // factor over time; empty: 1
  bool operator==(const LoadDef&) const = default;
};

// How a cracked shell's gas leaves (PressureDef::vent).
enum class VentModel {
  kExponential,  // the pressure falls as exp(-t / ventTime) from the first crack
  kOrifice,      // the gas is sealed in at the first crack and flows out through the openings
};

// Gas pressure on a shell: force p dA along each node's outward normal (the side its
// triangles wind counter-clockwise around); an open surface keeps the net force.
struct PressureDef {
  double pressure = 0;            // over-pressure, Pa
  std::vector<RampKey> ramp;      // factor over time; empty: 1
  bool releaseOnFracture = true;  // the gas escapes once the shell has a crack
  VentModel vent = VentModel::kExponential;
  double ventTime = 0;                 // s: time constant of the exponential vent (0: at once)
  double ambientPressure = 101325;     // Pa, absolute, outside (orifice vent)
  double gasDensity = 1.2;             // kg/m^3, of the escaping gas (orifice vent)
  double dischargeCoefficient = 0.61;  // of the openings (orifice vent; sharp-edged: 0.61)
  bool operator==(const PressureDef&) const = default;
};

// The part of the input geometry a body is made of: the vertices inside a box or sphere, in
// the input's own coordinates (before the transform), and for a mesh the triangles whose three
// corners are inside (a mask cut from a scanned head).
struct CropDef {
  PinShape shape = PinShape::kBox;   // box or sphere
  Vec3d center{0, 0, 0};             // m, in the input's coordinates
  Vec3d halfExtents{0.5, 0.5, 0.5};  // box, m
  double radius = 0.5;               // sphere, m
  bool operator==(const CropDef&) const = default;
};

// Mesh repair before the body is made (shellsim::repairMesh, CGAL): always merges
// coincident vertices, drops degenerate triangles, orients consistently and splits
// non-manifold edges; then these.
struct RepairDef {
  int64_t minComponentFaces = 0;  // drop components of fewer triangles
  double remeshEdgeLength = 0;    // m, after the transform; > 0: remesh to it; 0: keep triangles
  bool operator==(const RepairDef&) const = default;
};

// Pieces that break off a body become rigid bodies, simulated by Bullet (steinemann section
// 4.3): they fall, tumble and collide with the floor, the obstacles and each other. A piece
// becomes rigid when the body has broken into more than one piece and it is not the largest
// (the first of equal ones), holds no pinned node, and has at most max_nodes nodes or deforms
// slower than still_speed.
struct RigidFragmentsDef {
  int64_t maxNodes = 64;  // pieces of at most this many nodes; 0: none by size
  double stillSpeed = 0;  // m/s, RMS speed of a piece's nodes relative to its rigid motion
                          // below which it becomes rigid whatever its size; 0: off
  // Bullet combines two bodies' coefficients by their product: a fragment on an obstacle
  // has friction friction * obstacle.friction and restitution restitution *
  // obstacle.restitution; two fragments, the squares.
  double friction = 1.0;     // Coulomb coefficient, >= 0
  double restitution = 0.0;  // normal restitution, [0, 1]
  bool operator==(const RigidFragmentsDef&) const = default;
};

struct BodyDef {
  std::string name;                           // unique; default "body<i>"
  std::optional<std::filesystem::path> file;  // geometry file, resolved against the scene folder
  std::optional<PrimitiveDef> primitive;      // exactly one of file / primitive
  TransformDef transform;
  std::string model = "mass_spring";  // the model that animates this body (a registered name)
  MaterialDef material;
  // The models' own options, e.g. body.options<FiberDef>() (shellsim/models/fiber.hpp); only
  // those of `model` are used.
  ModelOptions modelOptions;
  std::vector<PinDef> pins;
  std::vector<LoadDef> loads;
  std::optional<PressureDef> pressure;
  std::optional<CropDef> crop;                      // only a part of the input is used
  std::optional<RepairDef> repair;                  // a triangle mesh repaired before it is used
  std::optional<RigidFragmentsDef> rigidFragments;  // broken-off pieces become rigid bodies
  Vec3d initialVelocity{0, 0, 0};                   // m/s

  // The options of the model whose definition type is T (made with its defaults at first
  // use); const: the defaults when none were set.
  template <class T>
  T& options() {
    return modelOptions.get<T>();
  }
  template <class T>
  [[nodiscard]] const T& options() const {
    return modelOptions.get<T>();
  }

  bool operator==(const BodyDef&) const = default;
};

// kPc2: one point cache per body (cache/<body>.pc2, Blender's Mesh Cache modifier, Houdini
// and Maya read it): float32 positions per frame while the surface keeps its topology.
enum class OutputFormat { kPly, kObj, kVtp, kPc2 };

enum class Integrator {
  kVerlet,         // explicit velocity Verlet (wicke2005 section 8)
  kNewmark,        // Newmark (beta, gamma), implicit for beta > 0, solved by Newton
  kBackwardEuler,  // implicit Euler, solved by Newton
  kStatic,         // equilibrium under the loads, raised in increments; no inertia
};

struct TimeDef {
  double duration = 2.0;    // s, > 0
  double frameRate = 30.0;  // frames per second, > 0
  double timeStep = 0.0;    // s; 0 means "choose a stable step"
  // s; the smallest step a recomputation may halve down to before the run stops with a
  // NumericalError instead of crawling; 0: 1e-5 of the frame interval (kMinStepPerFrame).
  double minTimeStep = 0.0;
  Integrator integrator = Integrator::kVerlet;
  double newmarkBeta = 0.25;        // [0, 0.5]
  double newmarkGamma = 0.5;        // [0.5, 1]
  double newtonTolerance = 1e-6;    // relative residual, (0, 1)
  int newtonMaxIterations = 30;     // >= 1
  bool newtonFrozenHessian = true;  // newton_hessian: "frozen" (modified Newton) or "exact"
  bool newtonQuasiNewton = false;   // newton_hessian: "quasi_newton" (frozen too)
  int32_t loadIncrements = 10;      // static: frames from load factor 0 to 1, >= 1

  bool operator==(const TimeDef&) const = default;
};

// The default floor of the step, as a fraction of the frame interval: 100,000 steps per
// frame (0.33 us at 30 fps) is hours per simulated second for any body worth simulating.
inline constexpr double kMinStepPerFrame = 1e-5;
// The floor in effect, s: time.min_time_step, or kMinStepPerFrame of the frame interval.
[[nodiscard]] inline double minimumTimeStep(const TimeDef& time) {
  return time.minTimeStep > 0 ? time.minTimeStep : kMinStepPerFrame / time.frameRate;
}

// Whether the settings integrate implicitly (need a Newton solve per step): backward Euler,
// or Newmark with beta > 0.
[[nodiscard]] inline bool isImplicit(const TimeDef& time) {
  return time.integrator == Integrator::kBackwardEuler ||
         (time.integrator == Integrator::kNewmark && time.newmarkBeta > 0);
}

// Penalty contact between the triangle meshes of the bodies, each against itself and
// against the others (gingold2004 section 4.3; dynamics/mesh_contact.hpp). The analytic
// obstacles keep their own contact either way.
struct ContactDef {
  bool enabled = false;
  bool self = true;         // a body's surface against itself too
  double thickness = 0;     // m, >= 0: the distance at which two surfaces touch; 0: per pair,
                            // the mean of the two bodies' material thicknesses
  double stiffness = 0.25;  // kappa, (0, 4): penalty k = kappa m / dt_s^2 (m the lighter
                            // side's mass, dt_s the stable explicit step at the start, or the
                            // planned step of an implicit integrator when larger)
  bool rejectIntersections = true;  // a step ending with intersecting triangles is retried
                                    // in halves (gingold2004 section 4.2)

  bool operator==(const ContactDef&) const = default;
};

// The camera of rendered previews (output.camera); without one, the renderer fits a camera
// to the bounds of the whole run.
struct CameraDef {
  Vec3d eye{0, 0, 0};      // m
  Vec3d target{0, 0, 0};   // m, differs from eye
  Vec3d up{0, 0, 1};       // not parallel to target - eye
  double fovDegrees = 40;  // vertical field of view, (0, 180)

  bool operator==(const CameraDef&) const = default;
};

struct OutputDef {
  std::filesystem::path folder = "out";  // relative paths resolve against the working directory
  std::vector<OutputFormat> formats{OutputFormat::kPly};
  int32_t checkpointEvery = 1;  // frames between checkpoints (checkpoint.bin); 0: none
  std::optional<CameraDef> camera;

  bool operator==(const OutputDef&) const = default;
};

struct SceneDef {
  Vec3d gravity{0, 0, -9.81};  // m/s^2
  std::vector<ObstacleDef> obstacles;
  std::vector<BodyDef> bodies;  // at least one
  TimeDef time;
  ContactDef contact;
  OutputDef output;
  std::filesystem::path sceneFolder;  // where relative geometry paths were resolved

  bool operator==(const SceneDef&) const = default;
};

// The models a body may name. Parsing rejects any other name with a "did you mean".
[[nodiscard]] const std::vector<std::string>& knownModelNames();

// Parses and validates a scene from JSON text. `sourceName` names the file in errors;
// `sceneFolder` is where relative geometry paths resolve. Throws InputError whose
// message lists every problem found, one per line, e.g.
//   scene.json: bodies[0].material.poisson = 0.7: must be in [0, 0.5)
// Unknown keys are errors with a "did you mean" hint. Checks that geometry files exist.
[[nodiscard]] SceneDef parseScene(const std::string& jsonText, const std::string& sourceName,
                                  const std::filesystem::path& sceneFolder);

// Reads and parses a scene file; relative paths resolve against its folder.
[[nodiscard]] SceneDef loadScene(const std::filesystem::path& path);

// The built-in default scene of `shellsim run` with no scene file.
[[nodiscard]] SceneDef defaultScene();

// The scene as JSON text (indented by two spaces) that parseScene reads back to the same
// SceneDef: every key written, file paths as they are in the definition.
[[nodiscard]] std::string sceneToJson(const SceneDef& scene);

// Definitions made in code (the C++ API, shellsim/world.hpp) checked exactly as the scene
// reader checks a file's: throws InputError listing every problem, one per line, each
// with `path` and the key, e.g. "shellsim: bodies[2].material.poisson = 0.7: must be in
// [0, 0.5)". validateBody skips the geometry keys when `geometryGiven` (a mesh in memory
// takes the place of file / primitive); otherwise the body needs exactly one of them.
void validateBody(const BodyDef& body, const std::string& path, bool geometryGiven);
void validateTime(const TimeDef& time, const std::string& path);
// `time`: the integrator, which bounds a penalty stiffness (below 4 for explicit ones).
void validateObstacle(const ObstacleDef& obstacle, const std::string& path,
                      const TimeDef& time = {});
void validateContact(const ContactDef& contact, const std::string& path, const TimeDef& time = {});

// One definition from JSON text in the scene file's format, an object each
// (docs/scene-reference.md), for bindings that hand over dictionaries (the Python module):
// read and checked exactly as the scene reader reads a file's. InputError lists every
// problem, one per line, each named by `path` and the key, e.g. "shellsim:
// add_body.material.poisson = 0.7: must be in [0, 0.5)". parseBodyDef: with `geometryGiven`
// the body's mesh comes as arrays, and 'file' or 'primitive' is a problem; relative file
// paths resolve against `folder`; without a "name" the body's name is left empty (the
// Simulation names it "body<i>" by its index).
[[nodiscard]] BodyDef parseBodyDef(const std::string& json, const std::string& path,
                                   bool geometryGiven, const std::filesystem::path& folder = ".");
[[nodiscard]] ObstacleDef parseObstacleDef(const std::string& json, const std::string& path);
[[nodiscard]] PinDef parsePinDef(const std::string& json, const std::string& path);
[[nodiscard]] LoadDef parseLoadDef(const std::string& json, const std::string& path);
[[nodiscard]] TimeDef parseTimeDef(const std::string& json, const std::string& path);
// `time`: the integrator, which bounds the stiffness (as validateContact).
[[nodiscard]] ContactDef parseContactDef(const std::string& json, const std::string& path,
                                         const TimeDef& time);
// A definition as compact JSON text that the parsers above read back to the same value.
[[nodiscard]] std::string definitionToJson(const BodyDef& body);
[[nodiscard]] std::string definitionToJson(const ObstacleDef& obstacle);

// Markdown reference of every scene key with unit, default, range and meaning.
[[nodiscard]] std::string sceneReferenceMarkdown();

}  // namespace shellsim
