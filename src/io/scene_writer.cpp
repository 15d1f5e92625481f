#include "io/scene_writer.hpp"

#include <string_view>

#include "io/scene_names.hpp"

namespace shellsim::scene_writer {
namespace {

// The word of an enum value: the names arrays list them in the order of the values.
template <class Enum, std::size_t N>
std::string word(Enum value, const std::string_view (&names)[N]) {
  return std::string(names[static_cast<std::size_t>(value)]);
}

Json vec(const Vec3d& v) {
  return Json::array({v[0], v[1], v[2]});
}

std::string onOff(bool on) {
  return on ? "on" : "off";
}

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
              {"damping", m.damping}};
  if (m.stiffness) out["stiffness"] = *m.stiffness;
  return out;
}

Json fiber(const FiberDef& f) {
  Json out = {{"node_count", f.nodeCount},
              {"node_spacing", f.nodeSpacing},
              {"neighbours", f.neighbours},
              {"arc_length_samples", f.arcLengthSamples},
              {"high_resolution_surface", onOff(f.highResolutionSurface)}};
  if (f.stretchStiffness) out["stretch_stiffness"] = *f.stretchStiffness;
  if (f.bendStiffness) out["bend_stiffness"] = *f.bendStiffness;
  if (f.plasticity) {
    const FiberPlasticityDef& p = *f.plasticity;
    out["plasticity"] = {{"yield_strain", p.yieldStrain},
                         {"yield_angle", p.yieldAngle},
                         {"stretch_creep", p.stretchCreep},
                         {"bend_creep", p.bendCreep},
                         {"weakening", p.weakening}};
  }
  if (f.fracture) {
    const FiberFractureDef& d = *f.fracture;
    out["fracture"] = {{"stretch_limit", d.stretchLimit},
                       {"bend_limit", d.bendLimit},
                       {"broken_ratio", d.brokenRatio},
                       {"cooldown_steps", d.cooldownSteps},
                       {"delay", d.delay}};
  }
  if (!f.regions.empty()) {
    Json regions = Json::array();
    for (const FiberRegionDef& r : f.regions) {
      Json region = {{"shape", word(r.shape, scene_names::kPinShapes)},
                     {"center", vec(r.center)},
                     {"stiffness_scale", r.stiffnessScale},
                     {"fracture_scale", r.fractureScale}};
      if (r.shape == PinShape::kSphere) {
        region["radius"] = r.radius;
      } else {
        region["half_extents"] = vec(r.halfExtents);
      }
      regions.push_back(std::move(region));
    }
    out["regions"] = std::move(regions);
  }
  if (f.anisotropy)
    out["anisotropy"] = {{"axis", vec(f.anisotropy->axis)}, {"ratio", f.anisotropy->ratio}};
  return out;
}

Json discreteShell(const DiscreteShellDef& d) {
  Json out = {{"hessian", d.projectHessian ? "projected" : "exact"}};
  if (d.stretchStiffness) out["stretch_stiffness"] = *d.stretchStiffness;
  if (d.areaStiffness) out["area_stiffness"] = *d.areaStiffness;
  if (d.bendStiffness) out["bend_stiffness"] = *d.bendStiffness;
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
              {"fiber", fiber(body.fiber)},
              {"discrete_shell", discreteShell(body.discreteShell)},
              {"initial_velocity", vec(body.initialVelocity)}};
  if (body.file) out["file"] = body.file->string();
  if (body.primitive) out["primitive"] = primitive(*body.primitive);
  Json pins = Json::array();
  for (const PinDef& pin : body.pins) {
    Json p = Json::object();
    addSelection(p, pin);
    p["path"] = path(pin.path);
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
  if (body.pressure) {
    out["pressure"] = {{"pressure", body.pressure->pressure},
                       {"ramp", ramp(body.pressure->ramp)},
                       {"release_on_fracture", onOff(body.pressure->releaseOnFracture)}};
  }
  return out;
}

Json toJson(const ObstacleDef& o) {
  Json out = {{"type", word(o.type, scene_names::kObstacleTypes)},
              {"friction", o.friction},
              {"restitution", o.restitution},
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
          {"integrator", word(t.integrator, scene_names::kIntegrators)},
          {"newmark_beta", t.newmarkBeta},
          {"newmark_gamma", t.newmarkGamma},
          {"newton_tolerance", t.newtonTolerance},
          {"newton_max_iterations", t.newtonMaxIterations},
          {"newton_hessian", t.newtonFrozenHessian ? "frozen" : "exact"},
          {"load_increments", t.loadIncrements}};
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
  return {{"gravity", vec(scene.gravity)},
          {"obstacles", std::move(obstacles)},
          {"bodies", std::move(bodies)},
          {"time", toJson(scene.time)},
          {"output", toJson(scene.output)}};
}

}  // namespace shellsim::scene_writer
