// The fiber model's registration (models/registry.hpp): its scene options (FiberDef,
// shellsim/models/fiber.hpp) read, written and documented, and the discretization of a body
// into fiber nodes (wicke2005 section 5).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/vec3.hpp"
#include "geometry/sampling.hpp"
#include "io/json_fields.hpp"
#include "io/scene_names.hpp"
#include "io/scene_shapes.hpp"
#include "io/scene_writer.hpp"
#include "models/fiber/fiber_model.hpp"
#include "models/registry.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/models/fiber.hpp"

namespace shellsim {
namespace {

using json_fields::FieldKind;
using json_fields::FieldSpec;
using json_fields::Json;
using json_fields::ObjectReader;
using json_fields::ObjectSpec;
using json_fields::Problems;
using json_fields::Range;
using scene_names::kOnOff;
using scene_names::kPinShapes;
using scene_names::kRegionShapes;
using scene_names::toEnum;

// Each entry names only the members it sets, leaving the rest at their defaults on
// purpose; GCC 12 would warn about every one of those.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr FieldSpec kFiberFields[] = {
    {.key = "node_count",
     .kind = FieldKind::kInteger,
     .number = 0,
     .range = Range::closed(0, 10000000),
     .rule = "at most one of `node_count`, `node_spacing` non-zero",
     .meaning = "Cluster the surface into about this many simulation nodes; 0: not by count."},
    {.key = "node_spacing",
     .unit = "m",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "Cluster the surface into nodes about this far apart; 0: not by spacing. "
                "With both 0 every vertex or point is a node."},
    {.key = "neighbours",
     .kind = FieldKind::kInteger,
     .number = 8,
     .range = Range::closed(4, 32),
     .meaning = "Nearest neighbours of each node; each gives one fiber (wicke2005 eq. 16)."},
    {.key = "arc_length_samples",
     .kind = FieldKind::kInteger,
     .number = 4,
     .range = Range::closed(1, 64),
     .meaning = "Samples per spline piece of the arc-length quadrature (wicke2005 eq. 33)."},
    {.key = "stretch_stiffness",
     .unit = "N/m^3",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Raw stretching stiffness K_s of every node; overrides the material map."},
    {.key = "bend_stiffness",
     .unit = "N/m",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Raw bending stiffness K_b of every node; overrides the material map."},
    {.key = "plasticity",
     .kind = FieldKind::kObject,
     .object = "plasticity",
     .optional = true,
     .meaning = "Plastic flow of the fibers' rest lengths and angles; absent: elastic."},
    {.key = "fracture",
     .kind = FieldKind::kObject,
     .object = "fracture",
     .optional = true,
     .meaning = "Fibers break and crack planes form; absent: the shell never tears."},
    {.key = "regions",
     .kind = FieldKind::kObjectList,
     .object = "region",
     .meaning = "Regions with their own stiffness or fracture thresholds (weak points)."},
    {.key = "anisotropy",
     .kind = FieldKind::kObject,
     .object = "anisotropy",
     .optional = true,
     .meaning = "Fibers along an axis stiffer (or softer) than across it."},
    {.key = "resample",
     .kind = FieldKind::kObject,
     .object = "resample",
     .optional = true,
     .meaning = "Nodes added where the surface stretches far; absent: the nodes never change."},
    {.key = "high_resolution_surface",
     .kind = FieldKind::kChoice,
     .text = "on",
     .choices = kOnOff,
     .meaning = "With clustered nodes, frames show the dense input surface moved by the nodes "
                "(wicke2005 section 6); `off`: the nodes as a point cloud."},
};

constexpr std::string_view kPlasticFlows[] = {"creep", "perfect"};

constexpr FieldSpec kPlasticityFields[] = {
    {.key = "flow",
     .kind = FieldKind::kChoice,
     .text = "creep",
     .choices = kPlasticFlows,
     .meaning =
         "`creep`: a yielding fiber's rest value moves by eta dt of its whole deviation per "
         "step (wicke2005 eq. (25), (26)), so how far it yields in an impact depends on the "
         "step and eta. `perfect`: rate independent (elastic-perfectly plastic); after every "
         "step the rest value moves just enough that the deviation sits on the yield "
         "threshold, whatever the step; it has no creep rates (giving one is an error)."},
    {.key = "yield_strain",
     .number = 0.02,
     .range = Range::above(0),
     .meaning = "beta_l of wicke2005 eq. (23) as a strain: a fiber's rest length creeps while "
                "|l - l0| / l0 exceeds it."},
    {.key = "yield_angle",
     .unit = "rad",
     .number = 0.05,
     .range = Range::above(0),
     .meaning = "beta_theta of eq. (24): the rest angle creeps while |theta - theta0| exceeds "
                "it."},
    {.key = "stretch_creep",
     .unit = "1/s",
     .number = 20,
     .range = Range::atLeast(0),
     .meaning = "eta_l of eq. (25): l0 moves by eta_l (l - l0) dt per step while yielding."},
    {.key = "bend_creep",
     .unit = "1/s",
     .number = 20,
     .range = Range::atLeast(0),
     .meaning = "eta_theta of eq. (26): theta0 moves by eta_theta (theta - theta0) dt per step "
                "while yielding."},
    {.key = "weakening",
     .unit = "1/rad",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "alpha of eq. (29): each plastic bend lowers the bending fracture threshold by "
                "alpha gamma_theta |dtheta_plastic|."},
};

constexpr std::string_view kCrackNormals[] = {"fiber", "principal"};

constexpr FieldSpec kFractureFields[] = {
    {.key = "stretch_limit",
     .number = 1.5,
     .range = Range::above(1),
     .meaning = "gamma_l of wicke2005 eq. (27): a fiber breaks when l / l0 exceeds it."},
    {.key = "bend_limit",
     .unit = "rad",
     .number = 1.0,
     .range = Range::above(0),
     .meaning = "gamma_theta of eq. (27): a fiber breaks when |theta - theta0| exceeds it."},
    {.key = "broken_ratio",
     .number = 0.25,
     .range = Range::openClosed(0, 1),
     .meaning = "A crack plane forms at a node once this share of its fibers is broken "
                "(microcracks below it, section 7.2)."},
    {.key = "cooldown_steps",
     .kind = FieldKind::kInteger,
     .number = 20,
     .range = Range::closed(0, 1000000),
     .meaning = "Steps after a crack before the next one may form (one crack per step at most)."},
    {.key = "delay",
     .unit = "s",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "A fiber breaks once it has been past a threshold this long, net of the time "
                "it spent below: a stress wave overshooting for a moment breaks nothing, a "
                "sustained load does. 0 breaks at once (the paper); a few milliseconds keep "
                "torn sheets from crumbling under their own vibrations."},
    {.key = "min_piece_nodes",
     .kind = FieldKind::kInteger,
     .number = 0,
     .range = Range::closed(0, 1000),
     .meaning = "A crack that would cut a piece of fewer nodes off a larger one is not placed "
                "(unless it also parts two larger pieces), and its node seeds no crack again; "
                "its broken fibers stay broken, so a tear goes on around it. And a node that "
                "broken fibers would leave with none keeps the least overloaded one, which "
                "then never breaks: no single node flies off. Such specks are "
                "below the sampling's resolution: fiber_poster_tear ends as 25 pieces without "
                "it, as its two halves alone with 4 here. 0: every crack is placed (the "
                "paper). On coarse bodies it can leave a tear bridged: a 13 x 13 sheet pulled "
                "apart stayed whole."},
    {.key = "crack_normal",
     .kind = FieldKind::kChoice,
     .text = "fiber",
     .choices = kCrackNormals,
     .meaning = "Which way a crack disc faces. `fiber`: along the broken fiber (wicke2005 "
                "Fig. 5); with a few fibers per node it is off the pull by up to half the angle "
                "between them. `principal`: along the node's largest stretch, fitted to "
                "the stretches of all its fibers, so a tear runs across the pull (mode I); "
                "broken by bending (eq. (27)'s bending term the larger), across the fold: the "
                "direction of the larger principal curvature (fitted to the heights of the "
                "nodes around it), or, next to a node that cracked already, across the line "
                "from it. Either way a crack that runs on "
                "from a disc nearby opens on the same side, and a bending one continues its "
                "plane (a fold is straight): fiber_plate_snap's scored plate snaps into its "
                "two parts with one crack a row and no node lost (it creased into a hinge, or "
                "parted with lone nodes along the edge, with the broken fiber's own "
                "direction). With `fiber` only bending cracks run on. Measured on "
                "fiber_poster_tear at 2,900 / 3,000 / 3,100 nodes: the torn edges' spikes "
                "(dense triangles stretched past 1.5 times) about as many as with `fiber`, "
                "within the spread between samplings."},
    {.key = "crack_tip_scale",
     .number = 1.0,
     .range = Range::openClosed(0, 1),
     .meaning = "Scales the fracture thresholds (gamma_l - 1 and gamma_theta, as a region's "
                "`fracture_scale` does) of the fibers centred within twice a crack disc's "
                "radius of its centre: the stress concentration at a crack's end. A disc is "
                "the size of the sampling and the rebuilt network's fibers pass around it, so "
                "by itself a one-disc crack concentrates little: held at the pressure that "
                "made it, fiber_balloon's first crack stayed a leaking slit at 5 of 6 "
                "samplings (1,100-1,210 nodes); at 0.6 all six burst (19-24 cracks), and "
                "with the clustering's ties decided alike in every build (session 40) 11-28 "
                "cracks, 16-33 at 0.5 (the scene's). 1: none (the paper)."},
};

constexpr FieldSpec kRegionFields[] = {
    {.key = "shape",
     .kind = FieldKind::kChoice,
     .choices = kRegionShapes,
     .required = true,
     .meaning = "Box or sphere, in world space after the body's transform; it holds the fibers "
                "whose centre node lies inside."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .meaning = "Centre of the shape."},
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
    {.key = "stiffness_scale",
     .number = 1,
     .range = Range::above(0),
     .meaning = "Multiplies the stretching and bending stiffness of the fibers inside."},
    {.key = "fracture_scale",
     .number = 1,
     .range = Range::above(0),
     .meaning = "Multiplies the fracture thresholds inside (gamma_l - 1 and gamma_theta): "
                "below 1, a weak point where tears start."},
};

constexpr FieldSpec kResampleFields[] = {
    {.key = "max_spacing",
     .number = 1.5,
     .range = Range::closed(1.5, 100),
     .meaning = "A pair of neighbouring nodes (a mesh edge, or a fiber's leg to one of its "
                "centre's nearest neighbours) that moves farther apart than this times its "
                "nodes' spacing at the start gets a node between them, at their midpoint and "
                "mean velocity, with equal shares of mass and area from the two (mass and "
                "momentum are kept exactly). A pair splits at most twice. A mesh's triangles "
                "are re-triangulated by edge flips as the surface deforms, so the frames' "
                "connectivity is no longer the input's. The finer fibers measure strain the "
                "coarser ones missed, so an event would raise the stored energy: the nodes near "
                "it slide within the surface until it is no more than before (moves of up to a "
                "third of a spacing). Events may still crumple a stretched sheet run "
                "explicitly, and an explicitly inflated balloon refines into a blow-up near "
                "twice its radius: use `backward_euler`."},
};

constexpr FieldSpec kAnisotropyFields[] = {
    {.key = "axis",
     .kind = FieldKind::kVec3,
     .vec = {1, 0, 0},
     .rule = "non-zero",
     .meaning = "Direction, in world space, whose fibers get `ratio` times the stiffness of "
                "fibers across it."},
    {.key = "ratio",
     .number = 1,
     .range = Range::above(0),
     .meaning = "Stiffness along the axis over stiffness across it; a fiber at angle phi to the "
                "axis gets 1 + (ratio - 1) cos^2 phi of the across value."},
};

constexpr ObjectSpec kFiberSpec{"fiber",
                                "Simulation nodes and fibers of the point-sampled shell model "
                                "(wicke2005 sections 3 and 5).",
                                kFiberFields};
constexpr ObjectSpec kPlasticitySpec{
    "plasticity", "Plastic flow of the fiber rest state (wicke2005 section 7.1, 7.4).",
    kPlasticityFields};
constexpr ObjectSpec kFractureSpec{
    "fracture", "Fiber breaking and crack planes (wicke2005 section 7.2).", kFractureFields};
constexpr ObjectSpec kRegionSpec{"region",
                                 "A part of a fiber body with its own stiffness or fracture "
                                 "thresholds (wicke2005 sections 7.2, 7.3).",
                                 kRegionFields, "shape"};
constexpr ObjectSpec kAnisotropySpec{"anisotropy",
                                     "Direction-dependent fiber stiffness (wicke2005 section 7.3).",
                                     kAnisotropyFields};

constexpr ObjectSpec kResampleSpec{
    "resample",
    "Nodes added where a fiber body stretches far (wicke2005 sections 8, 9: future work), so "
    "that its surface stays smooth and its fibers short; a new fiber of a plastic body starts "
    "with the elastic strain its centre's fibers have. With clustered nodes, the "
    "high-resolution surface is bound anew to the nodes at each event.",
    kResampleFields};
#pragma GCC diagnostic pop

constexpr const ObjectSpec* kNestedSpecs[] = {&kPlasticitySpec, &kFractureSpec, &kRegionSpec,
                                              &kAnisotropySpec, &kResampleSpec};

FiberRegionDef readRegion(const ObjectReader::Element& element, Problems& problems) {
  ObjectReader r(element.value, element.path, kRegionSpec, problems);
  FiberRegionDef region;
  const std::string shape = r.choice("shape");
  region.shape = toEnum(shape, kPinShapes, PinShape::kBox);
  region.center = r.vec3("center");
  region.halfExtents = r.vec3("half_extents");
  region.radius = r.number("radius");
  region.stiffnessScale = r.number("stiffness_scale");
  region.fractureScale = r.number("fracture_scale");
  r.finish(shape);
  return region;
}

void readFiber(ObjectReader& r, Problems& problems, BodyDef& body) {
  FiberDef& f = body.options<FiberDef>();
  f.nodeCount = r.integer("node_count");
  f.nodeSpacing = r.number("node_spacing");
  if (f.nodeCount > 0 && f.nodeSpacing > 0) {
    problems.add(r.path(), "give at most one of 'node_count' and 'node_spacing'");
  }
  f.neighbours = r.integer("neighbours");
  f.arcLengthSamples = r.integer("arc_length_samples");
  f.stretchStiffness = r.tryNumber("stretch_stiffness");
  f.bendStiffness = r.tryNumber("bend_stiffness");
  if (r.has("plasticity")) {
    ObjectReader pr = r.object("plasticity", kPlasticitySpec);
    FiberPlasticityDef p;
    p.flow = toEnum(pr.choice("flow"), kPlasticFlows, FiberPlasticFlow::kCreep);
    p.yieldStrain = pr.number("yield_strain");
    p.yieldAngle = pr.number("yield_angle");
    p.stretchCreep = pr.number("stretch_creep");
    p.bendCreep = pr.number("bend_creep");
    p.weakening = pr.number("weakening");
    if (p.flow == FiberPlasticFlow::kPerfect && (pr.has("stretch_creep") || pr.has("bend_creep"))) {
      problems.add(pr.path(),
                   "'stretch_creep' and 'bend_creep' are rates of the creep flow; the perfect flow "
                   "has none: remove them or set flow 'creep'");
    }
    pr.finish();
    f.plasticity = p;
  }
  if (r.has("fracture")) {
    ObjectReader fr = r.object("fracture", kFractureSpec);
    FiberFractureDef d;
    d.stretchLimit = fr.number("stretch_limit");
    d.bendLimit = fr.number("bend_limit");
    d.brokenRatio = fr.number("broken_ratio");
    d.cooldownSteps = fr.integer("cooldown_steps");
    d.delay = fr.number("delay");
    d.minPieceNodes = fr.integer("min_piece_nodes");
    d.crackNormal = toEnum(fr.choice("crack_normal"), kCrackNormals, FiberCrackNormal::kFiber);
    d.crackTipScale = fr.number("crack_tip_scale");
    fr.finish();
    f.fracture = d;
  }
  for (const auto& region : r.objectList("regions")) {
    f.regions.push_back(readRegion(region, problems));
  }
  if (r.has("anisotropy")) {
    ObjectReader ar = r.object("anisotropy", kAnisotropySpec);
    FiberAnisotropyDef a;
    a.axis = ar.vec3("axis");
    a.ratio = ar.number("ratio");
    if (a.axis[0] == 0 && a.axis[1] == 0 && a.axis[2] == 0 && ar.has("axis")) {
      problems.add(ar.pathOf("axis"), *ar.find("axis"), "must not be zero");
    }
    ar.finish();
    f.anisotropy = a;
  }
  f.highResolutionSurface = r.choice("high_resolution_surface") == "on";
  if (r.has("resample")) {
    ObjectReader rr = r.object("resample", kResampleSpec);
    FiberResampleDef resample;
    resample.maxSpacing = rr.number("max_spacing");
    rr.finish();
    f.resample = resample;
  }
  r.finish();
}

Json writeFiber(const BodyDef& body) {
  using scene_writer::onOff;
  using scene_writer::vec;
  using scene_writer::word;
  const FiberDef& f = body.options<FiberDef>();
  Json out = {{"node_count", f.nodeCount},
              {"node_spacing", f.nodeSpacing},
              {"neighbours", f.neighbours},
              {"arc_length_samples", f.arcLengthSamples},
              {"high_resolution_surface", onOff(f.highResolutionSurface)}};
  if (f.stretchStiffness) out["stretch_stiffness"] = *f.stretchStiffness;
  if (f.bendStiffness) out["bend_stiffness"] = *f.bendStiffness;
  if (f.plasticity) {
    const FiberPlasticityDef& p = *f.plasticity;
    out["plasticity"] = {{"flow", kPlasticFlows[static_cast<size_t>(p.flow)]},
                         {"yield_strain", p.yieldStrain},
                         {"yield_angle", p.yieldAngle},
                         {"weakening", p.weakening}};
    if (p.flow == FiberPlasticFlow::kCreep) {
      out["plasticity"]["stretch_creep"] = p.stretchCreep;
      out["plasticity"]["bend_creep"] = p.bendCreep;
    }
  }
  if (f.fracture) {
    const FiberFractureDef& d = *f.fracture;
    out["fracture"] = {{"stretch_limit", d.stretchLimit},
                       {"bend_limit", d.bendLimit},
                       {"broken_ratio", d.brokenRatio},
                       {"cooldown_steps", d.cooldownSteps},
                       {"delay", d.delay},
                       {"min_piece_nodes", d.minPieceNodes},
                       {"crack_normal", kCrackNormals[static_cast<size_t>(d.crackNormal)]},
                       {"crack_tip_scale", d.crackTipScale}};
  }
  if (!f.regions.empty()) {
    Json regions = Json::array();
    for (const FiberRegionDef& r : f.regions) {
      Json region = {{"shape", word(r.shape, kPinShapes)},
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
  if (f.anisotropy) {
    out["anisotropy"] = {{"axis", vec(f.anisotropy->axis)}, {"ratio", f.anisotropy->ratio}};
  }
  if (f.resample) out["resample"] = {{"max_spacing", f.resample->maxSpacing}};
  return out;
}

// wicke2005 section 5: nodes are the surface's vertices or points, or the centres of
// clusters of them (PGK02), each carrying the area it represents. A mesh's vertices in no
// triangle represent no area and are dropped first (with a warning), as for the mesh models.
Discretization discretizeFiber(const BodyDef& def, Geometry geometry,
                               std::vector<std::string>& warnings, const std::string& label) {
  std::vector<int32_t> keptOfVertex;  // input vertex -> vertex of `geometry` (-1: dropped)
  const bool pointCloud = geometry.isPointCloud();
  if (!pointCloud) keptOfVertex = dropUnreferencedVertices(geometry, warnings, label);
  FiberNodes nodes;
  std::vector<int32_t> outputTriangles;
  Discretization d;
  const FiberDef& fiber = def.options<FiberDef>();
  const bool clustered = fiber.nodeCount != 0 || fiber.nodeSpacing != 0;
  if (clustered && fiber.highResolutionSurface) {
    // Drawn as given: its seams stay (split normals, texture coordinates of the user's
    // file), only the nodes are welded.
    Geometry dense = geometry;
    if (pointCloud) {
      if (!dense.hasNormals()) estimateNormals(dense);
    } else {
      computeVertexNormals(dense);
    }
    d.dense = std::make_shared<const Geometry>(std::move(dense));
  }
  // Meshless nodes at one place are one node (a mesh's seams, a scan's repeated points):
  // kept apart they would make a zero-length fiber.
  const int32_t beforeWeld = geometry.vertexCount();
  std::vector<int32_t> weldedOfKept = weldCoincidentVertices(geometry);
  if (geometry.vertexCount() != beforeWeld) {
    if (!pointCloud && geometry.isPointCloud()) {
      throw InputError(label + ": every triangle has two corners at one position");
    }
    // Told where the nodes are the vertices, whose count the frames show; clusters merge
    // points anyway.
    if (!clustered) {
      warnings.push_back(label + ": merged " + std::to_string(beforeWeld - geometry.vertexCount()) +
                         (pointCloud ? " points" : " vertices") +
                         " that lie on another one into one node each");
    }
    if (keptOfVertex.empty()) {
      keptOfVertex = std::move(weldedOfKept);
    } else {
      for (int32_t& kept : keptOfVertex) {
        if (kept >= 0) kept = weldedOfKept[static_cast<size_t>(kept)];
      }
    }
  }
  if (pointCloud) {
    if (!geometry.hasNormals()) estimateNormals(geometry);
  } else {
    computeVertexNormals(geometry);  // area-weighted, consistent with the triangles
  }
  if (!clustered) {
    nodes.areas = voronoiAreas(geometry);
    nodes.positions = geometry.positions;
    nodes.normals = geometry.normals;
    outputTriangles = geometry.triangles;  // every vertex is a node: the mesh itself moves
    d.nodeOfVertex = identityMap(geometry.vertexCount());
  } else {
    SamplingParams sampling;
    sampling.targetNodeCount = fiber.nodeCount;
    sampling.spacing = fiber.nodeSpacing;
    NodeSampling clusters = clusterSurface(geometry, sampling);
    // Clustering merges the surface's points, it never adds any: a count above what the
    // surface holds gives fewer nodes than asked, which the user must hear of.
    if (fiber.nodeCount > geometry.vertexCount()) {
      warnings.push_back(label + ": node_count " + std::to_string(fiber.nodeCount) +
                         " is more than the surface's " + std::to_string(geometry.vertexCount()) +
                         (geometry.isPointCloud() ? " points" : " vertices") + ": the body has " +
                         std::to_string(clusters.areas.size()) +
                         " nodes (clusters merge points and never add any; refine the input "
                         "for more)");
    }
    nodes.positions = std::move(clusters.positions);
    nodes.normals = std::move(clusters.normals);
    nodes.areas = std::move(clusters.areas);
    d.nodeOfVertex = std::move(clusters.clusterOfPoint);
  }
  if (!keptOfVertex.empty()) {  // from the kept vertices back to the input's
    for (int32_t& kept : keptOfVertex) {
      if (kept >= 0) kept = d.nodeOfVertex[static_cast<size_t>(kept)];
    }
    d.nodeOfVertex = std::move(keptOfVertex);
  }
  FiberParams params;
  params.neighbourCount = fiber.neighbours;
  params.samples = fiber.arcLengthSamples;
  params.stretchStiffness = fiber.stretchStiffness;
  params.bendStiffness = fiber.bendStiffness;
  params.plasticity = fiber.plasticity;
  params.fracture = fiber.fracture;
  params.anisotropy = fiber.anisotropy;
  params.resample = fiber.resample;
  if (!fiber.regions.empty()) {
    const size_t n = nodes.areas.size();
    params.nodeStiffnessScale.assign(n, 1.0);
    params.nodeFractureScale.assign(n, 1.0);
    for (const FiberRegionDef& region : fiber.regions) {
      for (size_t i = 0; i < n; ++i) {
        if (!insideShape(region.shape, region.center, region.halfExtents, region.radius,
                         &nodes.positions[3 * i])) {
          continue;
        }
        params.nodeStiffnessScale[i] = region.stiffnessScale;
        params.nodeFractureScale[i] = region.fractureScale;
      }
    }
  }
  std::vector<std::string> modelWarnings;
  d.model = std::make_unique<FiberModel>(nodes, def.material, params, std::move(outputTriangles),
                                         &modelWarnings);
  for (const auto& w : modelWarnings) warnings.push_back(label + ": " + w);
  d.nodePositions = std::move(nodes.positions);
  return d;
}

}  // namespace

ModelRegistration fiberRegistration() {
  return {.name = FiberDef::kModel,
          .meaning = "Discretization and options of a body whose model is `fiber`.",
          .options = &kFiberSpec,
          .nestedOptions = kNestedSpecs,
          .readOptions = readFiber,
          .writeOptions = writeFiber,
          .discretize = discretizeFiber};
}

}  // namespace shellsim
