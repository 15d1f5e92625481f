#include "io/scene_writer.hpp"

#include <string_view>

#include "io/scene_names.hpp"
#include "models/registry.hpp"

namespace shellsim::scene_writer {

Json vec(const Vec3d& v) {
  return Json::array({v[0], v[1], v[2]});
}

std::string onOff(bool on) {
  return on ? "on" : "off";
}

namespace {

Json path(const std::vector<ObstacleDef::Keyframe>& keys) {
  Json list = Json::array();
  for (const auto& key : keys) list.push_back({{"time", key.time}, {"offset", vec(key.offset)}});
  return list;
}

Json ramp(const std::vector<RampKey>& keys) {
  Json list = Json::array();
  for (const auto& key : keys) list.push_back({{"time", key.time}, {"value", key.value}});
  return list;
}

// The keys of a node selection (pin, load) that its shape uses, as the reader expects.
void addSelection(Json& out, const PinDef& select) {
  out["shape"] = word(select.shape, scene_names::kPinShapes);
  switch (select.shape) {
    case PinShape::kBox:
      out["center"] = vec(select.center);
      out["half_extents"] = vec(select.halfExtents);
      break;
    case PinShape::kSphere:
      out["center"] = vec(select.center);
      out["radius"] = select.radius;
      break;
    case PinShape::kVertices: out["vertices"] = select.vertices; break;
  }
}

Json primitive(const PrimitiveDef& p) {
  Json out = {{"type", word(p.type, scene_names::kPrimitiveTypes)}, {"resolution", p.resolution}};
  switch (p.type) {
    case PrimitiveType::kSheet:
    case PrimitiveType::kBox: out["size"] = vec(p.size); break;
    case PrimitiveType::kCylinder:
      out["height"] = p.height;
      out["caps"] = p.caps ? "on" : "off";
      out["radius"] = p.radius;
      break;
    case PrimitiveType::kSphere:
    case PrimitiveType::kHemisphere: out["radius"] = p.radius; break;
  }
  return out;
}

Json material(const MaterialDef& m) {
  Json out = {{"young_modulus", m.youngModulus},
              {"poisson", m.poisson},
              {"thickness", m.thickness},
              {"density", m.density},
              {"damping", m.damping},
              {"internal_damping", m.internalDamping}};
  if (m.stiffness) out["stiffness"] = *m.stiffness;
  return out;
}

}  // namespace

Json toJson(const BodyDef& body) {
  Json out = {{"name", body.name},
              {"model", body.model},
              {"transform",
               {{"scale", vec(body.transform.scale)},
                {"rotation_degrees", vec(body.transform.rotationDegrees)},
                {"translation", vec(body.transform.translation)}}},
              {"material", material(body.material)},
              {"initial_velocity", vec(body.initialVelocity)}};
  // The options each model was given (absent ones read back as their defaults).
  for (const ModelRegistration& model : modelRegistry()) {
    if (model.writeOptions != nullptr && body.modelOptions.has(model.name)) {
      out[std::string(model.name)] = model.writeOptions(body);
    }
  }
  if (body.file) out["file"] = body.file->string();
  if (body.primitive) out["primitive"] = primitive(*body.primitive);
  Json pins = Json::array();
  for (const PinDef& pin : body.pins) {
    Json p = Json::object();
    addSelection(p, pin);
    p["path"] = path(pin.path);
    if (pin.release) p["release"] = *pin.release;
    pins.push_back(std::move(p));
  }
  out["pins"] = std::move(pins);
  Json loads = Json::array();
  for (const LoadDef& load : body.loads) {
    Json l = Json::object();
    addSelection(l, load.select);
    l["force"] = vec(load.force);
    l["ramp"] = ramp(load.ramp);
    loads.push_back(std::move(l));
  }
  out["loads"] = std::move(loads);
  if (body.crop) {
    // The same keys as a box or sphere selection of a pin.
    const CropDef& c = *body.crop;
    PinDef shape;
    shape.shape = c.shape;
    shape.center = c.center;
    shape.halfExtents = c.halfExtents;
    shape.radius = c.radius;
    Json crop = Json::object();
    addSelection(crop, shape);
    out["crop"] = crop;
  }
  if (body.repair) {
    out["repair"] = {{"min_component_faces", body.repair->minComponentFaces},
                     {"remesh_edge_length", body.repair->remeshEdgeLength}};
  }
  if (body.rigidFragments) {
    out["rigid_fragments"] = {{"max_nodes", body.rigidFragments->maxNodes},
                              {"still_speed", body.rigidFragments->stillSpeed},
                              {"friction", body.rigidFragments->friction},
                              {"restitution", body.rigidFragments->restitution}};
  }
  if (body.pressure) {
    out["pressure"] = {{"pressure", body.pressure->pressure},
                       {"ramp", ramp(body.pressure->ramp)},
                       {"release_on_fracture", onOff(body.pressure->releaseOnFracture)},
                       {"vent", word(body.pressure->vent, scene_names::kVentModels)}};
    if (body.pressure->vent == VentModel::kExponential) {
      out["pressure"]["vent_time"] = body.pressure->ventTime;
    } else {
      out["pressure"]["ambient_pressure"] = body.pressure->ambientPressure;
      out["pressure"]["gas_density"] = body.pressure->gasDensity;
      out["pressure"]["discharge_coefficient"] = body.pressure->dischargeCoefficient;
    }
  }
  return out;
}

Json toJson(const ObstacleDef& o) {
  Json out = {{"type", word(o.type, scene_names::kObstacleTypes)},
              {"friction", o.friction},
              {"restitution", o.restitution},
              {"response", word(o.response, scene_names::kObstacleResponses)},
              {"mass", o.mass},
              {"velocity", vec(o.velocity)},
              {"stiffness", o.stiffness},
              {"path", path(o.path)}};
  switch (o.type) {
    case ObstacleType::kPlane:
      out["point"] = vec(o.point);
      out["normal"] = vec(o.normal);
      break;
    case ObstacleType::kSphere:
      out["center"] = vec(o.center);
      out["radius"] = o.radius;
      break;
    case ObstacleType::kBox:
      out["center"] = vec(o.center);
      out["half_extents"] = vec(o.halfExtents);
      break;
  }
  return out;
}

Json toJson(const TimeDef& t) {
  return {{"duration", t.duration},
          {"frame_rate", t.frameRate},
          {"time_step", t.timeStep},
          {"min_time_step", t.minTimeStep},
          {"integrator", word(t.integrator, scene_names::kIntegrators)},
          {"newmark_beta", t.newmarkBeta},
          {"newmark_gamma", t.newmarkGamma},
          {"newton_tolerance", t.newtonTolerance},
          {"newton_max_iterations", t.newtonMaxIterations},
          {"newton_hessian", t.newtonQuasiNewton     ? "quasi_newton"
                             : t.newtonFrozenHessian ? "frozen"
                                                     : "exact"},
          {"load_increments", t.loadIncrements}};
}

Json toJson(const ContactDef& c) {
  return {{"enabled", c.enabled ? "on" : "off"},
          {"self", c.self ? "on" : "off"},
          {"thickness", c.thickness},
          {"stiffness", c.stiffness},
          {"reject_intersections", c.rejectIntersections ? "on" : "off"}};
}

Json toJson(const OutputDef& o) {
  Json formats = Json::array();
  for (const OutputFormat f : o.formats) formats.push_back(word(f, scene_names::kFormats));
  Json out = {{"folder", o.folder.string()},
              {"formats", std::move(formats)},
              {"checkpoint_every", o.checkpointEvery}};
  if (o.camera) {
    out["camera"] = {{"eye", vec(o.camera->eye)},
                     {"target", vec(o.camera->target)},
                     {"up", vec(o.camera->up)},
                     {"fov", o.camera->fovDegrees}};
  }
  return out;
}

Json toJson(const SceneDef& scene) {
  Json obstacles = Json::array();
  for (const ObstacleDef& o : scene.obstacles) obstacles.push_back(toJson(o));
  Json bodies = Json::array();
  for (const BodyDef& b : scene.bodies) bodies.push_back(toJson(b));
  return {{"gravity", vec(scene.gravity)},    {"obstacles", std::move(obstacles)},
          {"bodies", std::move(bodies)},      {"time", toJson(scene.time)},
          {"contact", toJson(scene.contact)}, {"output", toJson(scene.output)}};
}

}  // namespace shellsim::scene_writer
