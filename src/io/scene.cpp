// Scene files: the parser that reads a JSON scene against the schema's field tables
// (scene_schema.hpp) and the models' registrations, and the checks of definitions made in
// code (validateBody, ...).
#include "shellsim/scene.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <system_error>

#include "io/json_fields.hpp"
#include "io/json_file.hpp"
#include "io/json_guard.hpp"
#include "io/scene_names.hpp"
#include "io/scene_schema.hpp"
#include "io/scene_writer.hpp"
#include "models/registry.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;
using json_fields::Json;
using json_fields::ObjectReader;
using json_fields::ObjectSpec;
using json_fields::Problems;
using json_guard::parseJson;
using scene_names::kFormats;
using scene_names::kIntegrators;
using scene_names::kObstacleResponses;
using scene_names::kObstacleTypes;
using scene_names::kPinShapes;
using scene_names::kPrimitiveTypes;
using scene_names::kRegionShapes;
using scene_names::toEnum;

using scene_schema::bodySpec;
using scene_schema::kCameraSpec;
using scene_schema::kContactSpec;
using scene_schema::kCropSpec;
using scene_schema::kDefaultSceneJson;
using scene_schema::kKeyframeSpec;
using scene_schema::kLoadSpec;
using scene_schema::kMaterialSpec;
using scene_schema::kObstacleSpec;
using scene_schema::kOutputSpec;
using scene_schema::kPinSpec;
using scene_schema::kPressureSpec;
using scene_schema::kPrimitiveSpec;
using scene_schema::kRampSpec;
using scene_schema::kRepairSpec;
using scene_schema::kRigidFragmentsSpec;
using scene_schema::kSceneSpec;
using scene_schema::kTimeSpec;
using scene_schema::kTransformSpec;
using scene_schema::modelNames;

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

// A penalty kappa (the "stiffness" of `r`, read as `kappa`) against the integrator of `time`:
// explicit steps bound it below 4, where the springs' own period still spans the stable step.
void boundPenaltyStiffness(ObjectReader& r, Problems& problems, const TimeDef& time, double kappa) {
  // A static solve has no steps to make unstable.
  const bool explicitSteps = !isImplicit(time) && time.integrator != Integrator::kStatic;
  if (explicitSteps && kappa >= 4 && r.has("stiffness")) {
    problems.add(r.pathOf("stiffness"), *r.find("stiffness"),
                 "must be < 4 with an explicit integrator (the penalty springs would be "
                 "unstable at the stable step); implicit integrators take any value");
  }
}

// `time`: the scene's, whose integrator bounds an own stiffness; null where the obstacle is
// read alone (parseObstacleDef), to be checked again when it is added to a simulation.
ObstacleDef readObstacle(const ObjectReader::Element& element, Problems& problems,
                         const TimeDef* time) {
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
  o.response = toEnum(r.choice("response"), kObstacleResponses, ObstacleResponse::kProjection);
  o.mass = r.number("mass");
  o.velocity = r.vec3("velocity");
  o.stiffness = r.number("stiffness");
  if (o.stiffness > 0 && o.response != ObstacleResponse::kPenalty) {
    problems.add(r.pathOf("stiffness"), *r.find("stiffness"),
                 "is the stiffness of penalty springs: it needs \"response\": \"penalty\"");
  }
  if (time != nullptr) boundPenaltyStiffness(r, problems, *time, o.stiffness);
  o.path = readPath(r, problems);
  if (o.mass > 0 && o.response != ObstacleResponse::kPenalty) {
    problems.add(r.pathOf("mass"), *r.find("mass"),
                 "a thrown obstacle (mass > 0) needs \"response\": \"penalty\"");
  }
  if (o.mass > 0 && !o.path.empty()) {
    problems.add(r.pathOf("mass"), *r.find("mass"),
                 "a thrown obstacle (mass > 0) cannot also follow a path");
  }
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
  p.caps = r.choice("caps") == "on";
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
  m.internalDamping = r.number("internal_damping");
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
  pin.release = r.tryNumber("release");
  r.finish(shape);
  return pin;
}

LoadDef readLoad(const ObjectReader::Element& element, Problems& problems) {
  ObjectReader lr(element.value, element.path, kLoadSpec, problems);
  LoadDef load;
  const std::string shape = lr.choice("shape");
  load.select.shape = toEnum(shape, kPinShapes, PinShape::kBox);
  load.select.center = lr.vec3("center");
  load.select.halfExtents = lr.vec3("half_extents");
  load.select.radius = lr.number("radius");
  load.select.vertices = lr.integerList("vertices");
  if (shape == "vertices" &&
      (!lr.has("vertices") || (lr.find("vertices")->is_array() && lr.find("vertices")->empty()))) {
    problems.add(lr.pathOf("vertices"), "must list at least one vertex when shape is 'vertices'");
  }
  load.force = lr.vec3("force");
  load.ramp = readRamp(lr, problems);
  lr.finish(shape);
  return load;
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
  for (const auto& load : r.objectList("loads")) body.loads.push_back(readLoad(load, problems));
  if (r.has("pressure")) {
    ObjectReader pr = r.object("pressure", kPressureSpec);
    PressureDef pressure;
    pressure.pressure = pr.tryNumber("pressure").value_or(0.0);
    pressure.ramp = readRamp(pr, problems);
    pressure.releaseOnFracture = pr.choice("release_on_fracture") == "on";
    const std::string vent = pr.choice("vent");
    pressure.vent = toEnum(vent, scene_names::kVentModels, VentModel::kExponential);
    pressure.ventTime = pr.number("vent_time");
    pressure.ambientPressure = pr.number("ambient_pressure");
    pressure.gasDensity = pr.number("gas_density");
    pressure.dischargeCoefficient = pr.number("discharge_coefficient");
    pr.finish(vent);
    body.pressure = std::move(pressure);
  }
  if (r.has("crop")) {
    ObjectReader cr = r.object("crop", kCropSpec);
    CropDef crop;
    const std::string shape = cr.choice("shape");
    crop.shape = toEnum(shape, kRegionShapes, PinShape::kBox);
    crop.center = cr.vec3("center");
    crop.halfExtents = cr.vec3("half_extents");
    crop.radius = cr.number("radius");
    cr.finish(shape);
    body.crop = crop;
  }
  if (r.has("repair")) {
    ObjectReader rr = r.object("repair", kRepairSpec);
    RepairDef repair;
    repair.minComponentFaces = rr.integer("min_component_faces");
    repair.remeshEdgeLength = rr.number("remesh_edge_length");
    rr.finish();
    body.repair = repair;
  }
  if (r.has("rigid_fragments")) {
    ObjectReader fr = r.object("rigid_fragments", kRigidFragmentsSpec);
    RigidFragmentsDef fragments;
    fragments.maxNodes = fr.integer("max_nodes");
    fragments.stillSpeed = fr.number("still_speed");
    fragments.friction = fr.number("friction");
    fragments.restitution = fr.number("restitution");
    fr.finish();
    body.rigidFragments = fragments;
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
  t.minTimeStep = r.number("min_time_step");
  t.integrator = toEnum(r.choice("integrator"), kIntegrators, Integrator::kVerlet);
  t.newmarkBeta = r.number("newmark_beta");
  t.newmarkGamma = r.number("newmark_gamma");
  t.newtonTolerance = r.number("newton_tolerance");
  t.newtonMaxIterations = static_cast<int>(r.integer("newton_max_iterations"));
  const std::string hessian = r.choice("newton_hessian");
  t.newtonFrozenHessian = hessian != "exact";
  t.newtonQuasiNewton = hessian == "quasi_newton";
  t.loadIncrements = r.integer("load_increments");
  // Against the default frame rate too, but not against a bad one, already reported.
  const bool frameRateUsable = frameRate.has_value() || !r.has("frame_rate");
  if (timeStep && frameRateUsable && *timeStep > 1.0 / t.frameRate) {
    problems.add(r.pathOf("time_step"), *r.find("time_step"),
                 "must be <= 1 / frame_rate = " + json_fields::formatNumber(1.0 / t.frameRate) +
                     " s, so that every frame is reached");
  }
  if (frameRateUsable && t.minTimeStep > 1.0 / t.frameRate) {
    problems.add(
        r.pathOf("min_time_step"), *r.find("min_time_step"),
        "must be <= 1 / frame_rate = " + json_fields::formatNumber(1.0 / t.frameRate) + " s");
  }
  r.finish();
  return t;
}

// `time`: the scene's, whose integrator bounds the stiffness.
ContactDef readContact(ObjectReader& r, Problems& problems, const TimeDef& time) {
  ContactDef c;
  c.enabled = r.choice("enabled") == "on";
  c.self = r.choice("self") == "on";
  c.thickness = r.number("thickness");
  c.stiffness = r.number("stiffness");
  boundPenaltyStiffness(r, problems, time, c.stiffness);
  c.rejectIntersections = r.choice("reject_intersections") == "on";
  r.finish();
  return c;
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
  {
    // First: it bounds the penalty stiffness of the contact and of the obstacles.
    ObjectReader tr = r.object("time", kTimeSpec);
    scene.time = readTime(tr, problems);
  }
  for (const auto& o : r.objectList("obstacles")) {
    scene.obstacles.push_back(readObstacle(o, problems, &scene.time));
  }

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
    ObjectReader cr = r.object("contact", kContactSpec);
    scene.contact = readContact(cr, problems, scene.time);
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
  const std::string text = readTextFile(path);
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  const fs::path absolute = fs::absolute(folder, ec);
  return parseScene(text, path.string(), ec ? folder : absolute.lexically_normal());
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

void validateObstacle(const ObstacleDef& obstacle, const std::string& path, const TimeDef& time) {
  Problems problems(kApiSource);
  const Json json = scene_writer::toJson(obstacle);
  const ObjectReader::Element element{&json, path, 0};
  (void)readObstacle(element, problems, &time);
  problems.throwIfAny();
}

void validateTime(const TimeDef& time, const std::string& path) {
  Problems problems(kApiSource);
  const Json json = scene_writer::toJson(time);
  ObjectReader reader(&json, path, kTimeSpec, problems);
  (void)readTime(reader, problems);
  problems.throwIfAny();
}

void validateContact(const ContactDef& contact, const std::string& path, const TimeDef& time) {
  Problems problems(kApiSource);
  const Json json = scene_writer::toJson(contact);
  ObjectReader reader(&json, path, kContactSpec, problems);
  (void)readContact(reader, problems, time);
  problems.throwIfAny();
}

namespace {

// The JSON object of a definition handed in as text; problems go to `problems`.
Json parseDefinition(const std::string& jsonText, const std::string& path, Problems& problems) {
  Json json = parseJson(jsonText, path, problems);
  if (!json.is_object()) {
    throw InputError(std::string(kApiSource) + ": " + path + " must be a JSON object {...}, not " +
                     std::string(json.type_name()));
  }
  return json;
}

}  // namespace

BodyDef parseBodyDef(const std::string& jsonText, const std::string& path, bool geometryGiven,
                     const std::filesystem::path& folder) {
  Problems problems(kApiSource);
  Json json = parseDefinition(jsonText, path, problems);
  problems.throwIfAny();
  if (geometryGiven) {
    for (const char* key : {"file", "primitive"}) {
      if (json.contains(key)) {
        problems.add(path + "." + key, json[key],
                     "the geometry is given as arrays: leave out 'file' and 'primitive'");
      }
    }
    json.erase("file");
    json["primitive"] = {{"type", "sheet"}};  // stands in for the arrays, as in validateBody
  }
  const ObjectReader::Element element{&json, path, 0};
  BodyDef body = readBody(element, 0, folder, problems);
  problems.throwIfAny();
  if (geometryGiven) body.primitive.reset();
  // Unnamed: the simulation names it by its place ("body<i>"), not as the first of a file.
  if (!json.contains("name")) body.name.clear();
  return body;
}

namespace {

// Parses `jsonText` as one object and reads it with read(json, problems); InputError with
// every problem, after the JSON and after the reading.
template <class Read>
auto parseWith(const std::string& jsonText, const std::string& path, const Read& read) {
  Problems problems(kApiSource);
  const Json json = parseDefinition(jsonText, path, problems);
  problems.throwIfAny();
  auto value = read(json, problems);
  problems.throwIfAny();
  return value;
}

}  // namespace

ObstacleDef parseObstacleDef(const std::string& jsonText, const std::string& path) {
  return parseWith(jsonText, path, [&](const Json& json, Problems& problems) {
    return readObstacle(ObjectReader::Element{&json, path, 0}, problems, nullptr);
  });
}

PinDef parsePinDef(const std::string& jsonText, const std::string& path) {
  return parseWith(jsonText, path, [&](const Json& json, Problems& problems) {
    return readPin(ObjectReader::Element{&json, path, 0}, problems);
  });
}

LoadDef parseLoadDef(const std::string& jsonText, const std::string& path) {
  return parseWith(jsonText, path, [&](const Json& json, Problems& problems) {
    return readLoad(ObjectReader::Element{&json, path, 0}, problems);
  });
}

TimeDef parseTimeDef(const std::string& jsonText, const std::string& path) {
  return parseWith(jsonText, path, [&](const Json& json, Problems& problems) {
    ObjectReader reader(&json, path, kTimeSpec, problems);
    return readTime(reader, problems);
  });
}

ContactDef parseContactDef(const std::string& jsonText, const std::string& path,
                           const TimeDef& time) {
  return parseWith(jsonText, path, [&](const Json& json, Problems& problems) {
    ObjectReader reader(&json, path, kContactSpec, problems);
    return readContact(reader, problems, time);
  });
}

std::string definitionToJson(const BodyDef& body) {
  return scene_writer::toJson(body).dump();
}
std::string definitionToJson(const ObstacleDef& obstacle) {
  return scene_writer::toJson(obstacle).dump();
}

}  // namespace shellsim
