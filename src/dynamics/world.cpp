#include "dynamics/world.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "core/palette.hpp"
#include "core/surfel_radii.hpp"
#include "dynamics/contact.hpp"
#include "dynamics/step_pipeline.hpp"
#include "geometry/primitives.hpp"
#include "geometry/sampling.hpp"
#include "io/scene_shapes.hpp"
#include "models/registry.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/io.hpp"

namespace shellsim {

KinematicPath::KinematicPath(std::vector<ObstacleDef::Keyframe> keyframes)
    : keyframes_(std::move(keyframes)) {}

namespace {

Vec3 toVec3(const Vec3d& v) {
  return {v[0], v[1], v[2]};
}

// Index of the segment [k, k+1] containing time, or -1 outside the keyframes.
int activeSegment(const std::vector<ObstacleDef::Keyframe>& keys, double time) {
  if (keys.size() < 2 || time < keys.front().time || time >= keys.back().time) return -1;
  const auto it =
      std::upper_bound(keys.begin(), keys.end(), time,
                       [](double t, const ObstacleDef::Keyframe& k) { return t < k.time; });
  return static_cast<int>(it - keys.begin()) - 1;
}

}  // namespace

Vec3 KinematicPath::offset(double time) const {
  if (keyframes_.empty()) return Vec3::Zero();
  if (time <= keyframes_.front().time) return toVec3(keyframes_.front().offset);
  if (time >= keyframes_.back().time) return toVec3(keyframes_.back().offset);
  const int k = activeSegment(keyframes_, time);
  const auto& a = keyframes_[static_cast<size_t>(k)];
  const auto& b = keyframes_[static_cast<size_t>(k) + 1];
  const double s = (time - a.time) / (b.time - a.time);
  return (1.0 - s) * toVec3(a.offset) + s * toVec3(b.offset);
}

double Ramp::value(double time) const {
  if (keys_.empty()) return 1.0;
  if (time <= keys_.front().time) return keys_.front().value;
  if (time >= keys_.back().time) return keys_.back().value;
  const auto it = std::upper_bound(keys_.begin(), keys_.end(), time,
                                   [](double t, const RampKey& k) { return t < k.time; });
  const RampKey& b = *it;
  const RampKey& a = *(it - 1);
  const double s = (time - a.time) / (b.time - a.time);
  return (1.0 - s) * a.value + s * b.value;
}

Vec3 KinematicPath::velocity(double time) const {
  const int k = activeSegment(keyframes_, time);
  if (k < 0) return Vec3::Zero();
  const auto& a = keyframes_[static_cast<size_t>(k)];
  const auto& b = keyframes_[static_cast<size_t>(k) + 1];
  return (toVec3(b.offset) - toVec3(a.offset)) / (b.time - a.time);
}

std::string bodyLabel(size_t index, const BodyDef& def) {
  std::ostringstream label;
  label << "bodies[" << index << "] '" << def.name << "'";
  return label.str();
}

namespace {

Discretization discretize(const BodyDef& def, Geometry geometry, std::vector<std::string>& warnings,
                          const std::string& label) {
  const ModelRegistration* model = findModel(def.model);
  if (model == nullptr) throw InputError(label + ": unknown model '" + def.model + "'");
  try {
    return model->discretize(def, std::move(geometry), warnings, label);
  } catch (const InputError& e) {
    throw InputError(label + ": " + e.what());
  }
}

std::vector<int32_t> selectPinnedNodes(const PinDef& pin, std::span<const double> x,
                                       const std::vector<int32_t>& remap,
                                       const std::string& label) {
  std::vector<int32_t> nodes;
  const size_t nodeCount = x.size() / 3;
  if (pin.shape == PinShape::kVertices) {
    for (int32_t v : pin.vertices) {
      if (v < 0 || static_cast<size_t>(v) >= remap.size()) {
        std::ostringstream msg;
        msg << label << ": vertex " << v << " out of range [0, " << remap.size() << ")";
        throw InputError(msg.str());
      }
      if (remap[static_cast<size_t>(v)] < 0) {
        std::ostringstream msg;
        msg << label << ": vertex " << v << " belongs to no triangle and was dropped";
        throw InputError(msg.str());
      }
      nodes.push_back(remap[static_cast<size_t>(v)]);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  } else {
    for (size_t n = 0; n < nodeCount; ++n) {
      if (insideShape(pin.shape, pin.center, pin.halfExtents, pin.radius, &x[3 * n])) {
        nodes.push_back(static_cast<int32_t>(n));
      }
    }
  }
  if (nodes.empty()) throw InputError(label + ": selects no node");
  return nodes;
}

}  // namespace

Geometry loadBodyGeometry(const BodyDef& def, const std::string& label) {
  if (def.file) return readGeometry(*def.file);
  if (def.primitive) {
    try {
      return makePrimitive(*def.primitive);
    } catch (const InputError& e) {
      throw InputError(label + ".primitive: " + e.what());
    }
  }
  throw InputError(label + ": needs a file or a primitive");
}

void addPin(World& world, size_t bodyIndex, const PinDef& pin, const std::string& label) {
  Body& body = world.bodies.at(bodyIndex);
  PinGroup group;
  group.nodes = selectPinnedNodes(pin, body.positions, body.nodeOfInputVertex, label);
  group.path = KinematicPath(pin.path);
  if (pin.release) group.release = *pin.release;
  for (int32_t node : group.nodes) {
    body.pinned[static_cast<size_t>(node)] = 1;
    for (int c = 0; c < 3; ++c) {
      group.restPositions.push_back(body.positions[3 * static_cast<size_t>(node) + c]);
    }
  }
  body.pins.push_back(std::move(group));
}

void addLoad(World& world, size_t bodyIndex, const LoadDef& load, const std::string& label) {
  Body& body = world.bodies.at(bodyIndex);
  const auto mass = body.model->nodeMasses();
  LoadGroup group;
  group.nodes = selectPinnedNodes(load.select, body.positions, body.nodeOfInputVertex, label);
  double total = 0;
  for (const int32_t node : group.nodes) total += mass[static_cast<size_t>(node)];
  for (const int32_t node : group.nodes) {
    group.shares.push_back(mass[static_cast<size_t>(node)] / total);
  }
  group.force = toVec3(load.force);
  group.ramp = Ramp(load.ramp);
  body.loads.push_back(std::move(group));
  body.externalForces.assign(body.positions.size(), 0.0);
}

size_t addBody(World& world, const BodyDef& def, Geometry geometry, const std::string& label) {
  if (def.crop) {
    const CropDef& crop = *def.crop;
    const auto inside = [&](const double* x) {
      return insideShape(crop.shape, crop.center, crop.halfExtents, crop.radius, x);
    };
    const int32_t before = geometry.vertexCount();
    geometry = cropGeometry(geometry, inside);
    if (geometry.vertexCount() == 0) {
      throw InputError(label + ".crop: keeps none of the " + std::to_string(before) +
                       (geometry.isPointCloud() ? " vertices" : " vertices in a whole triangle") +
                       " of the input (the crop is in the input's own coordinates, before the "
                       "transform)");
    }
    std::ostringstream msg;
    msg << label << ": cropped: " << before << " -> " << geometry.vertexCount() << " vertices, "
        << geometry.triangleCount() << " triangles (vertex indices now refer to the part kept)";
    world.warnings.push_back(msg.str());
  }
  applyTransform(geometry, def.transform);
  // In the body's units (after the transform): its slivers, seams and debris, told before a
  // run crawls or comes apart (the repaired mesh's, where it is repaired).
  std::optional<MeshTopology> meshTopology;
  if (def.repair) {
    if (geometry.isPointCloud()) {
      throw InputError(label +
                       ".repair: the body is a point cloud: only triangle meshes are "
                       "repaired");
    }
    RepairOptions options;
    options.minComponentFaces = def.repair->minComponentFaces;
    options.targetEdgeLength = def.repair->remeshEdgeLength;
    const int32_t trianglesBefore = geometry.triangleCount();
    try {
      const RepairReport report = repairMesh(geometry, options);
      std::ostringstream msg;
      msg << label << ": repaired: " << trianglesBefore << " -> " << geometry.triangleCount()
          << " triangles, " << report.before.nonManifoldEdgeCount << " -> "
          << report.after.nonManifoldEdgeCount << " non-manifold edges, "
          << report.before.sliverTriangleCount << " -> " << report.after.sliverTriangleCount
          << " slivers, " << report.componentsRemoved
          << " components dropped (vertex indices now refer to the repaired mesh)";
      world.warnings.push_back(msg.str());
      meshTopology = report.after;
    } catch (const InputError& e) {
      throw InputError(label + ".repair: " + e.what());
    }
  } else if (!geometry.isPointCloud()) {
    meshTopology = analyzeTopology(geometry);
  }
  // Said only where the mesh's vertices are the nodes (clustered fiber nodes smooth them
  // away; a fiber body welds vertices at one place into one node); what a model refuses,
  // it says itself by refusing.
  const int64_t vertexCount = geometry.vertexCount();
  Discretization discretization = discretize(def, std::move(geometry), world.warnings, label);
  if (meshTopology) {
    const int64_t meshVertices = vertexCount - meshTopology->unreferencedVertexCount;
    const int64_t nodes = discretization.model->nodeCount();
    if (nodes >= meshVertices - meshTopology->duplicateVertexCount) {
      MeshTopology told = *meshTopology;
      if (nodes < meshVertices) told.duplicateVertexCount = 0;  // welded: no cut to tell of
      for (const std::string& warning : meshWarnings(told)) {
        world.warnings.push_back(label + ": " + warning);
      }
    }
  }

  Body body;
  body.name = def.name;
  body.model = std::move(discretization.model);
  body.positions = std::move(discretization.nodePositions);
  body.nodeOfInputVertex = std::move(discretization.nodeOfVertex);
  body.damping = def.material.damping;
  body.internalDamping = def.material.internalDamping;
  body.thickness = def.material.thickness;
  body.rigidFragments = def.rigidFragments;
  if (discretization.dense) {
    try {
      body.embedded = std::make_unique<SurfaceBinding>(body.positions, *discretization.dense);
    } catch (const InputError& e) {
      throw InputError(label + ": high-resolution surface: " + e.what());
    }
    body.embeddedRest = discretization.dense;
    body.embeddedFirstNodes = body.positions;
  }
  const size_t n = static_cast<size_t>(body.model->nodeCount());
  body.velocities.resize(3 * n);
  for (size_t i = 0; i < n; ++i) {
    for (int c = 0; c < 3; ++c) body.velocities[3 * i + c] = def.initialVelocity[c];
  }
  body.accelerations.assign(3 * n, 0.0);
  body.pinned.assign(n, 0);
  if (def.pressure) {
    body.pressure.emplace();
    body.pressure->pressure = def.pressure->pressure;
    body.pressure->ramp = Ramp(def.pressure->ramp);
    body.pressure->releaseOnFracture = def.pressure->releaseOnFracture;
    body.pressure->vent = def.pressure->vent;
    body.pressure->ventTime = def.pressure->ventTime;
    body.pressure->ambientPressure = def.pressure->ambientPressure;
    body.pressure->gasDensity = def.pressure->gasDensity;
    body.pressure->dischargeCoefficient = def.pressure->dischargeCoefficient;
    std::vector<double> probe(3 * n);
    Geometry surface = body.model->surface(body.positions);
    const bool areaVectors = body.model->nodeAreaVectors(body.positions, probe);
    if (!areaVectors &&
        (surface.isPointCloud() || surface.vertexCount() != body.model->nodeCount())) {
      throw InputError(label + ".pressure: the model '" + body.model->name() +
                       "' has no surface normals to push along");
    }
    // A closed surface's area vectors sum to zero up to the sampling's error (under 2 % of
    // their lengths on a 16-ring sphere); an open one's to its projected area (a
    // hemisphere: half).
    Vec3 sum = Vec3::Zero();
    double lengths = 0;
    for (size_t i = 0; areaVectors && i < n; ++i) {
      const Vec3 a(probe[3 * i], probe[3 * i + 1], probe[3 * i + 2]);
      sum += a;
      lengths += a.norm();
    }
    if (surface.isPointCloud()) {
      body.pressure->closed = sum.norm() < PressureLoad::kClosedAreaRatio * lengths;
    } else {
      body.pressure->closed = analyzeTopology(surface).boundaryEdgeCount == 0;
    }
    if (body.pressure->closed && lengths > 0) body.pressure->closedResidue = sum.norm() / lengths;
    if (!body.pressure->closed && body.pressure->releaseOnFracture &&
        body.pressure->vent == VentModel::kOrifice) {
      throw InputError(label +
                       ".pressure.vent: 'orifice' seals in the gas the surface encloses, and "
                       "this surface is open (" +
                       (surface.isPointCloud() ? std::string("its area vectors do not cancel")
                                               : std::string("it has boundary edges")) +
                       "): use the exponential vent, or release_on_fracture 'off'");
    }
    if (!areaVectors) body.pressure->triangles = std::move(surface.triangles);
    body.externalForces.assign(3 * n, 0.0);
  }
  world.bodies.push_back(std::move(body));
  const size_t index = world.bodies.size() - 1;
  try {
    for (size_t p = 0; p < def.pins.size(); ++p) {
      std::ostringstream pinLabel;
      pinLabel << label << ".pins[" << p << "]";
      addPin(world, index, def.pins[p], pinLabel.str());
    }
    for (size_t l = 0; l < def.loads.size(); ++l) {
      std::ostringstream loadLabel;
      loadLabel << label << ".loads[" << l << "]";
      addLoad(world, index, def.loads[l], loadLabel.str());
    }
  } catch (...) {
    world.bodies.pop_back();
    throw;
  }
  return index;
}

Obstacle::Obstacle(const ObstacleDef& definition) : def(definition), path(definition.path) {
  free.velocity = toVec3(definition.velocity);
}

World buildWorld(const SceneDef& scene) {
  World world;
  world.gravity = toVec3(scene.gravity);
  for (const auto& o : scene.obstacles) world.obstacles.emplace_back(o);
  for (size_t b = 0; b < scene.bodies.size(); ++b) {
    const BodyDef& def = scene.bodies[b];
    const std::string label = bodyLabel(b, def);
    (void)addBody(world, def, loadBodyGeometry(def, label), label);
  }
  world.contact =
      MeshContact(scene.contact, contactReferenceStep(scene.time, stableTimeStep(world)));
  return world;
}

void saveKinematics(const Body& body, BodyKinematics& out) {
  out.positions.assign(body.positions.begin(), body.positions.end());
  out.velocities.assign(body.velocities.begin(), body.velocities.end());
  out.accelerations.assign(body.accelerations.begin(), body.accelerations.end());
  out.externalForces.assign(body.externalForces.begin(), body.externalForces.end());
  out.elastic = body.elastic;
  out.pinPower = body.pinPower;
}

void restoreKinematics(Body& body, const BodyKinematics& saved) {
  body.positions.assign(saved.positions.begin(), saved.positions.end());
  body.velocities.assign(saved.velocities.begin(), saved.velocities.end());
  body.accelerations.assign(saved.accelerations.begin(), saved.accelerations.end());
  body.externalForces.assign(saved.externalForces.begin(), saved.externalForces.end());
  body.elastic = saved.elastic;
  body.pinPower = saved.pinPower;
  (void)body.model->prepare(body.positions);
}

std::vector<uint8_t> worldMovedNodes(const Body& body) {
  std::vector<uint8_t> moved = body.pinned;
  for (size_t i = 0; i < body.rigidFragment.size() && i < moved.size(); ++i) {
    if (body.rigidFragment[i] >= 0) moved[i] = 1;
  }
  return moved;
}

void refreshPinned(Body& body) {
  std::fill(body.pinned.begin(), body.pinned.end(), 0);
  for (const PinGroup& pin : body.pins) {
    if (!pin.holding) continue;
    for (const int32_t node : pin.nodes) body.pinned[static_cast<size_t>(node)] = 1;
  }
  for (size_t i = 0; i < body.rigidFragment.size(); ++i) {
    if (body.rigidFragment[i] >= 0) body.pinned[i] = 1;
  }
}

ModelWorkspace* workspaceOf(Body& body) {
  if (body.workspaceModel != body.model.get()) {
    body.workspace = body.model->makeWorkspace();
    body.workspaceModel = body.model.get();
  }
  return body.workspace.get();
}

BodyNodeSets saveNodeSets(const Body& body) {
  BodyNodeSets sets;
  sets.pinned = body.pinned;
  for (const PinGroup& pin : body.pins) {
    sets.pinNodes.push_back(pin.nodes);
    sets.pinRestPositions.push_back(pin.restPositions);
  }
  for (const LoadGroup& load : body.loads) {
    sets.loadNodes.push_back(load.nodes);
    sets.loadShares.push_back(load.shares);
  }
  sets.nodeOfInputVertex = body.nodeOfInputVertex;
  if (body.pressure) sets.pressureTriangles = body.pressure->triangles;
  sets.contactObstacle = body.contactObstacle;
  sets.contactNormal = body.contactNormal;
  return sets;
}

void restoreNodeSets(Body& body, const BodyNodeSets& sets) {
  if (sets.pinNodes.size() != body.pins.size() || sets.loadNodes.size() != body.loads.size()) {
    throw InputError(body.name + ": the saved state has " + std::to_string(sets.pinNodes.size()) +
                     " pins and " + std::to_string(sets.loadNodes.size()) + " loads, the body " +
                     std::to_string(body.pins.size()) + " and " +
                     std::to_string(body.loads.size()));
  }
  body.pinned = sets.pinned;
  for (size_t p = 0; p < body.pins.size(); ++p) {
    body.pins[p].nodes = sets.pinNodes[p];
    body.pins[p].restPositions = sets.pinRestPositions[p];
  }
  for (size_t l = 0; l < body.loads.size(); ++l) {
    body.loads[l].nodes = sets.loadNodes[l];
    body.loads[l].shares = sets.loadShares[l];
  }
  body.nodeOfInputVertex = sets.nodeOfInputVertex;
  if (body.pressure) body.pressure->triangles = sets.pressureTriangles;
  body.contactObstacle = sets.contactObstacle;
  body.contactNormal = sets.contactNormal;
}

namespace {

// Checks a node edit against the model that made it (TopologyEdit's contract).
void checkNodeEdit(const Body& body, const TopologyEdit& edit, size_t oldCount) {
  const auto fail = [&](const std::string& what) {
    throw NumericalError(body.name + ": the model '" + body.model->name() +
                         "' made a malformed topology edit: " + what);
  };
  const auto newCount = static_cast<size_t>(edit.nodeCount());
  if (edit.nodeCount() != body.model->nodeCount()) {
    fail("it makes " + std::to_string(newCount) + " nodes, the model has " +
         std::to_string(body.model->nodeCount()));
  }
  if (edit.sourceOffsets.front() != 0 ||
      static_cast<size_t>(edit.sourceOffsets.back()) != edit.sourceNodes.size() ||
      edit.sourceWeights.size() != edit.sourceNodes.size()) {
    fail("its source lists do not match their offsets");
  }
  for (size_t i = 0; i < newCount; ++i) {
    const int32_t begin = edit.sourceOffsets[i];
    const int32_t end = edit.sourceOffsets[i + 1];
    if (end <= begin) fail("new node " + std::to_string(i) + " has no source");
    double sum = 0;
    for (auto k = static_cast<size_t>(begin); k < static_cast<size_t>(end); ++k) {
      if (edit.sourceNodes[k] < 0 || static_cast<size_t>(edit.sourceNodes[k]) >= oldCount) {
        fail("new node " + std::to_string(i) + " names old node " +
             std::to_string(edit.sourceNodes[k]) + " of " + std::to_string(oldCount));
      }
      if (!(edit.sourceWeights[k] > 0) || !std::isfinite(edit.sourceWeights[k])) {
        fail("new node " + std::to_string(i) + " has a weight that is not positive");
      }
      sum += edit.sourceWeights[k];
    }
    if (std::abs(sum - 1) > 1e-12) {
      fail("the weights of new node " + std::to_string(i) + " sum to " + std::to_string(sum));
    }
  }
  if (!edit.displacements.empty() && edit.displacements.size() != 3 * newCount) {
    fail("it moves " + std::to_string(edit.displacements.size()) + " coordinates of " +
         std::to_string(3 * newCount));
  }
  if (!std::all_of(edit.displacements.begin(), edit.displacements.end(),
                   [](double d) { return std::isfinite(d); })) {
    fail("a displacement is not finite");
  }
}

// values (oldCount, width) -> (newCount, width), each new row the weighted sum of its
// sources' rows.
std::vector<double> blendRows(std::span<const double> values, const TopologyEdit& edit,
                              size_t width) {
  const auto newCount = static_cast<size_t>(edit.nodeCount());
  std::vector<double> out(width * newCount, 0.0);
  for (size_t i = 0; i < newCount; ++i) {
    for (auto k = static_cast<size_t>(edit.sourceOffsets[i]);
         k < static_cast<size_t>(edit.sourceOffsets[i + 1]); ++k) {
      const auto source = static_cast<size_t>(edit.sourceNodes[k]);
      for (size_t c = 0; c < width; ++c) {
        out[width * i + c] += edit.sourceWeights[k] * values[width * source + c];
      }
    }
  }
  return out;
}

// The embedded surface bound anew as a binding event says (Body::BindingEvent::bindsAnew):
// to its rest nodes with `cracks`, then separated into its pieces. The run and a replayed
// history both go through here, so they make the same binding.
void bindAnew(Body& body, const Body::BindingEvent& event, std::span<const CrackDisc> cracks) {
  body.embedded = std::make_unique<SurfaceBinding>(event.restNodes, *body.embeddedRest,
                                                   SurfaceBindingParams{}, cracks);
  body.embeddedPieces = 1;
  if (!event.pieces.empty()) {
    body.embedded->separatePieces(event.pieces);
    body.embeddedPieces = pieceCount(event.pieces);
  }
}

// A set of old nodes (sorted or not) -> the new nodes all of whose sources are in it
// (sorted): a copy of a member, or a blend of members (a node made on an edge between a
// pinned and a free node is free: pinned, it would be held at the pinned end); for each,
// the weighted mean of `rows` (width per old node in the set, in set order) over its
// sources, into newRows when rows is not empty.
std::vector<int32_t> remapNodeSet(const std::vector<int32_t>& nodes, const TopologyEdit& edit,
                                  size_t oldCount, const std::vector<double>& rows, size_t width,
                                  std::vector<double>& newRows) {
  std::vector<int32_t> slot(oldCount, -1);
  for (size_t k = 0; k < nodes.size(); ++k)
    slot[static_cast<size_t>(nodes[k])] = static_cast<int32_t>(k);
  std::vector<int32_t> out;
  newRows.clear();
  for (size_t i = 0; i < static_cast<size_t>(edit.nodeCount()); ++i) {
    double weight = 0;
    std::vector<double> row(width, 0.0);
    bool all = true;
    for (auto k = static_cast<size_t>(edit.sourceOffsets[i]);
         k < static_cast<size_t>(edit.sourceOffsets[i + 1]); ++k) {
      const int32_t s = slot[static_cast<size_t>(edit.sourceNodes[k])];
      if (s < 0) {
        all = false;
        break;
      }
      weight += edit.sourceWeights[k];
      for (size_t c = 0; c < width && !rows.empty(); ++c) {
        row[c] += edit.sourceWeights[k] * rows[width * static_cast<size_t>(s) + c];
      }
    }
    if (!all || weight == 0) continue;
    out.push_back(static_cast<int32_t>(i));
    for (size_t c = 0; c < width && !rows.empty(); ++c) newRows.push_back(row[c] / weight);
  }
  return out;
}

void applyNodeEdit(Body& body, const TopologyEdit& edit) {
  const auto oldCount = body.positions.size() / 3;
  checkNodeEdit(body, edit, oldCount);
  const auto newCount = static_cast<size_t>(edit.nodeCount());
  body.positions = blendRows(body.positions, edit, 3);
  body.velocities = blendRows(body.velocities, edit, 3);
  body.accelerations.assign(3 * newCount, 0.0);
  if (!body.externalForces.empty()) body.externalForces.assign(3 * newCount, 0.0);

  // The first new node made from each old node, -1 for a removed one.
  std::vector<int32_t> firstChild(oldCount, -1);
  for (size_t i = newCount; i-- > 0;) {
    for (auto k = static_cast<size_t>(edit.sourceOffsets[i]);
         k < static_cast<size_t>(edit.sourceOffsets[i + 1]); ++k) {
      firstChild[static_cast<size_t>(edit.sourceNodes[k])] = static_cast<int32_t>(i);
    }
  }
  for (PinGroup& pin : body.pins) {
    std::vector<double> rest;
    pin.nodes = remapNodeSet(pin.nodes, edit, oldCount, pin.restPositions, 3, rest);
    pin.restPositions = std::move(rest);
  }
  if (!body.rigidFragment.empty()) {
    // A node made from a rigid node moves with its fragment, at the weighted place of its
    // sources there (a split copies a node: the same place).
    std::vector<int32_t> fragment(newCount, -1);
    std::vector<double> local(3 * newCount, 0.0);
    for (size_t i = 0; i < newCount; ++i) {
      const auto first = static_cast<size_t>(edit.sourceOffsets[i]);
      const auto end = static_cast<size_t>(edit.sourceOffsets[i + 1]);
      const int32_t k = body.rigidFragment[static_cast<size_t>(edit.sourceNodes[first])];
      if (k < 0) continue;
      double weight = 0;
      Vec3 place = Vec3::Zero();
      for (size_t s = first; s < end; ++s) {
        const auto source = static_cast<size_t>(edit.sourceNodes[s]);
        if (body.rigidFragment[source] != k) continue;
        weight += edit.sourceWeights[s];
        place += edit.sourceWeights[s] * row(body.rigidLocal, source);
      }
      fragment[i] = k;
      setRow(local, i, place / weight);
    }
    body.rigidFragment = std::move(fragment);
    body.rigidLocal = std::move(local);
  }
  body.pinned.assign(newCount, 0);
  refreshPinned(body);
  if (!edit.displacements.empty()) {
    const std::vector<uint8_t> held = worldMovedNodes(body);
    for (size_t i = 0; i < newCount; ++i) {
      if (held[i] == 0) {
        setRow(body.positions, i, row(body.positions, i) + row(edit.displacements, i));
      }
    }
  }
  const auto mass = body.model->nodeMasses();
  for (LoadGroup& load : body.loads) {
    std::vector<double> unused;
    load.nodes = remapNodeSet(load.nodes, edit, oldCount, {}, 0, unused);
    double total = 0;
    for (const int32_t node : load.nodes) total += mass[static_cast<size_t>(node)];
    load.shares.clear();
    for (const int32_t node : load.nodes)
      load.shares.push_back(mass[static_cast<size_t>(node)] / total);
  }
  for (int32_t& node : body.nodeOfInputVertex) {
    if (node >= 0) node = firstChild[static_cast<size_t>(node)];
  }
  if (body.pressure && !body.pressure->triangles.empty()) {
    std::vector<int32_t> kept;
    const std::vector<int32_t>& triangles = body.pressure->triangles;
    for (size_t t = 0; t + 2 < triangles.size(); t += 3) {
      const int32_t a = firstChild[static_cast<size_t>(triangles[t])];
      const int32_t b = firstChild[static_cast<size_t>(triangles[t + 1])];
      const int32_t c = firstChild[static_cast<size_t>(triangles[t + 2])];
      if (a >= 0 && b >= 0 && c >= 0) kept.insert(kept.end(), {a, b, c});
    }
    body.pressure->triangles = std::move(kept);
  }
  if (!body.contactObstacle.empty()) {
    std::vector<int32_t> obstacle(newCount);
    std::vector<double> normal(3 * newCount);
    for (size_t i = 0; i < newCount; ++i) {
      const auto source =
          static_cast<size_t>(edit.sourceNodes[static_cast<size_t>(edit.sourceOffsets[i])]);
      obstacle[i] = body.contactObstacle[source];
      for (size_t c = 0; c < 3; ++c) normal[3 * i + c] = body.contactNormal[3 * source + c];
    }
    body.contactObstacle = std::move(obstacle);
    body.contactNormal = std::move(normal);
  }
  ++body.nodeEdits;
}

}  // namespace

// The embedded surface bound anew to the body's nodes after they changed: every passive
// point's K nearest visible nodes change near a new node, so the whole binding is made again
// (with every crack so far), at rest nodes that follow the edit's weights from the old ones (a
// fiber body's new node sits at the midpoint of its pair at rest as now), and separated into
// the model's pieces. The surface moves at the event only by the difference of the two
// interpolations (measured in ResampledSurface.*), not by any jump of the nodes.
void bindEmbeddedAnew(Body& body, const TopologyEdit& edit) {
  Body::BindingEvent event;
  event.crackCount = body.crackCount();
  event.restNodes = blendRows(body.embedded->restNodes(), edit, 3);
  const std::vector<int32_t> pieces = body.model->nodePieces();
  if (pieceCount(pieces) > 1) event.pieces = pieces;
  bindAnew(body, event, body.cuts);
  body.bindingEvents.push_back(std::move(event));
}

void applyTopologyEdit(Body& body, const TopologyEdit& edit) {
  if (edit.changesNodes()) {
    applyNodeEdit(body, edit);
    if (body.embedded) {
      body.cuts.insert(body.cuts.end(), edit.cuts.begin(), edit.cuts.end());
      bindEmbeddedAnew(body, edit);
      return;
    }
  }
  if (!edit.cuts.empty()) {
    body.cuts.insert(body.cuts.end(), edit.cuts.begin(), edit.cuts.end());
    if (body.embedded) {
      // wicke2005 sec. 7.2: "For surface points in the vicinity of a new crack, the
      // neighborhoods and coordinates for the high resolution surface have to be
      // recomputed as well."
      const std::span<const CrackDisc> all = body.cuts;
      const auto added = static_cast<int32_t>(edit.cuts.size());
      body.embedded->rebind(all, all.last(edit.cuts.size()));
      body.bindingEvents.push_back({body.crackCount(), added, {}, {}});
    }
  }
}

void separateEmbeddedPieces(Body& body) {
  if (!body.embedded) return;
  const std::vector<int32_t> pieces = body.model->nodePieces();
  const int32_t count = pieceCount(pieces);
  if (count == body.embeddedPieces) return;
  body.embedded->separatePieces(pieces);
  body.embeddedPieces = count;
  body.bindingEvents.push_back({0, 0, pieces, {}});
}

void replayBinding(Body& body, const std::vector<Body::BindingEvent>& events) {
  if (!body.embedded) return;
  body.embedded = std::make_unique<SurfaceBinding>(body.embeddedFirstNodes, *body.embeddedRest);
  body.embeddedPieces = 1;
  const std::span<const CrackDisc> cracks = body.cuts;
  for (const Body::BindingEvent& event : events) {
    if (event.bindsAnew()) {
      const auto count = static_cast<size_t>(event.crackCount);
      const size_t nodes = event.restNodes.size() / 3;
      if (count > cracks.size() || event.restNodes.size() % 3 != 0 || nodes < 3 ||
          (!event.pieces.empty() && event.pieces.size() != nodes)) {
        throw InputError(body.name + ": the surface binding's history has a new binding with " +
                         std::to_string(count) + " cracks (the body has " +
                         std::to_string(cracks.size()) + ") and " +
                         std::to_string(event.restNodes.size()) + " rest node values for " +
                         std::to_string(event.pieces.size()) + " piece labels");
      }
      if (!event.pieces.empty()) {
        const auto [lowest, highest] =
            std::minmax_element(event.pieces.begin(), event.pieces.end());
        if (*lowest < 0 || *highest >= static_cast<int32_t>(nodes)) {
          throw InputError(body.name + ": the surface binding's history has piece labels " +
                           "out of range");
        }
      }
      bindAnew(body, event, cracks.first(count));
    } else if (event.rebinds()) {
      const auto count = static_cast<size_t>(event.crackCount);
      if (count > cracks.size() || event.newCracks > event.crackCount) {
        throw InputError(body.name + ": the surface binding's history names crack " +
                         std::to_string(count) + ", the body has " + std::to_string(cracks.size()));
      }
      body.embedded->rebind(cracks.first(count),
                            cracks.subspan(count - static_cast<size_t>(event.newCracks),
                                           static_cast<size_t>(event.newCracks)));
    } else {
      const auto [lowest, highest] = std::minmax_element(event.pieces.begin(), event.pieces.end());
      const int32_t nodes = body.embedded->nodeCount();
      if (event.pieces.size() != static_cast<size_t>(nodes) || *lowest < 0 || *highest >= nodes) {
        throw InputError(body.name + ": the surface binding's history has pieces of " +
                         std::to_string(event.pieces.size()) + " nodes or labels out of range; " +
                         "the surface is bound to " + std::to_string(nodes) + " nodes");
      }
      body.embedded->separatePieces(event.pieces);
      body.embeddedPieces = *highest + 1;
    }
  }
  if (body.embedded->nodeCount() != body.nodeCount()) {
    throw InputError(body.name + ": the surface binding's history ends bound to " +
                     std::to_string(body.embedded->nodeCount()) + " nodes; the body has " +
                     std::to_string(body.nodeCount()));
  }
  body.bindingEvents = events;
}

int32_t pieceCount(std::span<const int32_t> pieces) {
  return pieces.empty() ? 1 : *std::max_element(pieces.begin(), pieces.end()) + 1;
}

int32_t pieceCount(const Body& body) {
  return pieceCount(body.model->nodePieces());
}

Geometry bodySurface(const World& world, size_t bodyIndex, std::span<const int32_t> pieces) {
  const Body& body = world.bodies[bodyIndex];
  const std::vector<Model::NodeScalar> scalars = body.model->nodeScalars();
  if (body.embedded) {
    Geometry surface = body.embedded->deform(body.positions);
    keepOutOfObstacles(world, surface.positions);
    // A vertex takes the piece and the node quantities of its nearest bound node
    // (separatePieces keeps every vertex's nodes in one piece).
    const auto vertices = static_cast<size_t>(surface.vertexCount());
    std::vector<int32_t> nearest(vertices);
    for (size_t v = 0; v < vertices; ++v) {
      nearest[v] = body.embedded->boundNodes(static_cast<int32_t>(v))[0];
    }
    if (!pieces.empty()) {
      surface.pieces.resize(vertices);
      for (size_t v = 0; v < vertices; ++v) {
        surface.pieces[v] = pieces[static_cast<size_t>(nearest[v])];
      }
    }
    for (const Model::NodeScalar& scalar : scalars) {
      VertexScalar& out = surface.vertexScalars.emplace_back();
      out.name = scalar.name;
      out.values.resize(vertices);
      for (size_t v = 0; v < vertices; ++v) {
        out.values[v] = static_cast<float>(scalar.values[static_cast<size_t>(nearest[v])]);
      }
    }
    if (surface.isPointCloud() && surface.vertexCount() > 0) {
      surface.vertexScalars.push_back({"radius", surfelRadii(surface.positions)});
    }
    return surface;
  }
  Geometry surface = body.model->surface(body.positions);
  if (surface.vertexCount() == body.nodeCount()) {  // the nodes are the vertices
    if (surface.vertexCount() == std::ssize(pieces)) {
      surface.pieces.assign(pieces.begin(), pieces.end());
    }
  } else {
    // A surface the nodes carry (the mls_solid's mesh around its phyxels) reaches past
    // them, where contact does not look: drawn outside the obstacles, as embedded ones.
    keepOutOfObstacles(world, surface.positions);
  }
  for (const Model::NodeScalar& scalar : scalars) {
    if (std::ssize(scalar.values) != surface.vertexCount()) continue;
    surface.vertexScalars.push_back(
        {scalar.name, std::vector<float>(scalar.values.begin(), scalar.values.end())});
  }
  // A point cloud's frames carry each point's disc radius (a PLY property `radius`, as
  // splat renderers and Blender's point clouds read it): the renderer's rule, so that any
  // tool draws the same closed surface.
  if (surface.isPointCloud() && surface.vertexCount() > 0) {
    surface.vertexScalars.push_back({"radius", surfelRadii(surface.positions)});
  }
  // A torn point cloud has no connectivity for the renderer to find its pieces in: each
  // point (a node) carries its piece's colour once there is more than one piece.
  if (pieceCount(pieces) > 1 && surface.isPointCloud() &&
      surface.vertexCount() == std::ssize(pieces)) {
    surface.colors.resize(3 * pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
      const float* c = piecePaletteColor(static_cast<int64_t>(bodyIndex) + pieces[i]);
      std::copy(c, c + 3, &surface.colors[3 * i]);
    }
  }
  return surface;
}

double stableTimeStep(const World& world) {
  double dt = std::numeric_limits<double>::infinity();
  for (const auto& body : world.bodies) dt = std::min(dt, body.model->stableTimeStep());
  return dt;
}

}  // namespace shellsim
