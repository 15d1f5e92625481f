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

namespace shellsim {

using Vec3d = std::array<double, 3>;

enum class ObstacleType { kPlane, kSphere, kBox };

struct ObstacleDef {
  ObstacleType type = ObstacleType::kPlane;
  Vec3d point{0, 0, 0};              // plane: a point on it, m
  Vec3d normal{0, 0, 1};             // plane: unit normal pointing into the free side
  Vec3d center{0, 0, 0};             // sphere, box: centre, m
  double radius = 0.5;               // sphere: radius, m
  Vec3d halfExtents{0.5, 0.5, 0.5};  // box: half side lengths, m
  double friction = 0.3;             // Coulomb coefficient, >= 0
  double restitution = 0.0;          // normal restitution, [0, 1]
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
  double height = 1.0;      // cylinder along z, open ends, centred, m
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

  bool operator==(const PinDef&) const = default;
};

// Material in physical units; each model maps it to its own stiffnesses and documents how.
struct MaterialDef {
  double youngModulus = 1.0e6;  // Pa, > 0
  double poisson = 0.3;         // [0, 0.5)
  double thickness = 1.0e-3;    // m, > 0
  double density = 1000.0;      // kg/m^3, > 0
  double damping = 0.0;         // mass-proportional damping coefficient, 1/s, >= 0
  // Raw per-model stiffness override: mass_spring uses it as the spring constant, N/m.
  std::optional<double> stiffness;

  bool operator==(const MaterialDef&) const = default;
};

// How a fiber-model body is discretized (wicke2005 section 5).
struct FiberDef {
  int32_t nodeCount = 0;                   // > 0: cluster the surface into about this many nodes
  double nodeSpacing = 0;                  // > 0: cluster into nodes about this far apart, m
                                           // (both 0: every vertex or point is a node)
  int32_t neighbours = 8;                  // k nearest neighbours per node, one fiber each
  int32_t arcLengthSamples = 4;            // samples of the arc-length quadrature per spline piece
  std::optional<double> stretchStiffness;  // raw K_s, N/m^3, overrides the material map
  std::optional<double> bendStiffness;     // raw K_b, N/m, overrides the material map
  bool operator==(const FiberDef&) const = default;
};

// Options of a discrete-shell body (grinspun2003); the material map is the default.
struct DiscreteShellDef {
  std::optional<double> stretchStiffness;  // raw k_L of every edge, N
  std::optional<double> areaStiffness;     // raw k_A of every triangle, N/m
  std::optional<double> bendStiffness;     // raw k_B of every hinge, N m
  bool projectHessian = false;             // clamp each stencil Hessian to PSD
  bool operator==(const DiscreteShellDef&) const = default;
};

struct BodyDef {
  std::string name;                           // unique; default "body<i>"
  std::optional<std::filesystem::path> file;  // geometry file, resolved against the scene folder
  std::optional<PrimitiveDef> primitive;      // exactly one of file / primitive
  TransformDef transform;
  std::string model = "mass_spring";  // the model that animates this body
  MaterialDef material;
  FiberDef fiber;                  // used when model == "fiber"
  DiscreteShellDef discreteShell;  // used when model == "discrete_shell"
  std::vector<PinDef> pins;
  Vec3d initialVelocity{0, 0, 0};  // m/s

  bool operator==(const BodyDef&) const = default;
};

enum class OutputFormat { kPly, kObj, kVtp };

enum class Integrator {
  kVerlet,         // explicit velocity Verlet (wicke2005 section 8)
  kNewmark,        // Newmark (beta, gamma), implicit for beta > 0, solved by Newton
  kBackwardEuler,  // implicit Euler, solved by Newton
};

struct TimeDef {
  double duration = 2.0;    // s, > 0
  double frameRate = 30.0;  // frames per second, > 0
  double timeStep = 0.0;    // s; 0 means "choose a stable step"
  Integrator integrator = Integrator::kVerlet;
  double newmarkBeta = 0.25;      // [0, 0.5]
  double newmarkGamma = 0.5;      // [0.5, 1]
  double newtonTolerance = 1e-6;  // relative residual, (0, 1)
  int newtonMaxIterations = 30;   // >= 1

  bool operator==(const TimeDef&) const = default;
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
  std::optional<CameraDef> camera;

  bool operator==(const OutputDef&) const = default;
};

struct SceneDef {
  Vec3d gravity{0, 0, -9.81};  // m/s^2
  std::vector<ObstacleDef> obstacles;
  std::vector<BodyDef> bodies;  // at least one
  TimeDef time;
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

// Markdown reference of every scene key with unit, default, range and meaning.
[[nodiscard]] std::string sceneReferenceMarkdown();

}  // namespace shellsim
