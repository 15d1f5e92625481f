// The meshless volume model's registration (models/registry.hpp): its scene options
// (MlsSolidDef, shellsim/models/mls_solid.hpp) and the discretization of a body (muller2004
// section 3.2: phyxels on a lattice inside a closed mesh, which they then carry, or the
// points of a point cloud).
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/spatial.hpp"
#include "geometry/sampling.hpp"
#include "geometry/volume_sampling.hpp"
#include "io/json_fields.hpp"
#include "io/scene_names.hpp"
#include "models/mls/mls_model.hpp"
#include "models/registry.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/models/mls_solid.hpp"

namespace shellsim {
namespace {

using json_fields::FieldKind;
using json_fields::FieldSpec;
using json_fields::Json;
using json_fields::ObjectReader;
using json_fields::ObjectSpec;
using json_fields::Problems;
using json_fields::Range;
using scene_names::kHessianKinds;

constexpr std::string_view kBasisKinds[] = {"quadratic", "linear"};
constexpr std::string_view kSurfaceKinds[] = {"carried", "resampled"};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr FieldSpec kMlsSolidFields[] = {
    {.key = "phyxel_count",
     .kind = FieldKind::kInteger,
     .number = 400,
     .range = Range::closed(0, 1000000),
     .rule = "exactly one of `phyxel_count`, `phyxel_spacing` non-zero for a mesh",
     .meaning = "Phyxels on a cubic lattice inside the closed mesh, about this many (the "
                "spacing refined until the count is within 10 %); 0: by spacing. Unused for a "
                "point cloud, whose points are the phyxels, and for a layered sheet."},
    {.key = "phyxel_spacing",
     .unit = "m",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "The lattice spacing of the phyxels inside the mesh; 0: by count."},
    {.key = "neighbours",
     .kind = FieldKind::kInteger,
     .number = 26,
     .range = Range::closed(4, 63),
     .meaning = "Phyxels in each phyxel's MLS stencil besides itself, the nearest at rest; the "
                "support h_i is 1.25 times the farthest one's distance. 26 is the 3 x 3 x 3 "
                "block of the lattice: full rank at faces, edges and corners; the cost grows "
                "with its square."},
    {.key = "basis",
     .kind = FieldKind::kChoice,
     .text = "quadratic",
     .choices = kBasisKinds,
     .meaning = "The fit that gives each phyxel's deformation gradient. `quadratic`: a "
                "quadratic in the neighbours' offsets (the same gradient as the paper's inside a "
                "body, right at its faces: a cantilever of 6 phyxels across within 5 % of the "
                "beam); `linear`: the paper's plane (eqs. 12-13), which makes bent bodies soft "
                "at their faces (the same cantilever 29 % soft)."},
    {.key = "hourglass",
     .number = 0.1,
     .range = Range::atLeast(0),
     .meaning = "Stiffness of the penalty on the MLS fit's misfit, relative to the shear "
                "modulus: suppresses the zero-energy (checkerboard) modes of nodal integration "
                "that the paper does not mention; zero for every affine motion. 0: off."},
    {.key = "volume_stiffness",
     .unit = "Pa",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "k_v of muller2004's volume term 1/2 k_v (det F - 1)^2 per rest volume, on top "
                "of St Venant-Kirchhoff: resists collapse under strong compression (it adds k_v "
                "to the small-strain bulk response). 0: off, the material exactly (E, nu)."},
    {.key = "layers",
     .kind = FieldKind::kInteger,
     .number = 0,
     .range = Range::closed(0, 3),
     .rule = "0, 2 or 3",
     .meaning = "0: the phyxels fill the closed mesh's volume. 2 or 3: the mesh is the "
                "mid-surface of a sheet of the material's thickness t, and every vertex carries "
                "that many phyxels across it along its normal, at the Gauss points of the "
                "thickness (2: +-t / (2 sqrt 3); 3: 0 and +-t sqrt(3/5) / 2), with the vertex's "
                "area times t shared by the Gauss weights: the plate's bending stiffness "
                "exactly (one layer is not a volume: muller2004 section 7). Two layers cannot "
                "show a thickness strain that varies across the sheet, so their phyxels take "
                "plane stress in the sheet (no Poisson coupling through the thickness, which "
                "would stiffen bending up to 1.35 times at nu = 0.3); three keep the isotropic "
                "law. Thin sheets lock in shear unless the mesh's edges are within about 3 t: "
                "a clamped plate of a / t = 100 at 16 / 32 / 64 cells deflects 0.65 / 0.97 / "
                "1.03 of plate theory with 3 layers. The stable step shrinks with t. Pins by "
                "vertex hold the vertex's first layer (a hinge); box and sphere pins hold every "
                "phyxel inside them."},
    {.key = "surface",
     .kind = FieldKind::kChoice,
     .text = "carried",
     .choices = kSurfaceKinds,
     .rule = "`resampled` needs plasticity.melt on and a mesh",
     .meaning = "What the frames show. `carried`: the input mesh moved by the phyxels "
                "(muller2004 eq. 27), its detail kept under any deformation but unable to come "
                "apart. `resampled`: surfels (a point cloud with normals, drawn as discs) that "
                "follow eq. 27 while the phyxels' boundary stays and blend onto the phyxels' "
                "implicit surface where it changes, resampled as they stretch and crowd "
                "(section 5.2): the surface splits when the melt does and merges where its "
                "parts meet."},
    {.key = "surfels",
     .kind = FieldKind::kInteger,
     .number = 0,
     .range = Range::closed(0, 10000000),
     .meaning = "With a resampled surface: about this many surfels, evenly spread over the "
                "mesh (clustered from its vertices); 0: one per vertex."},
    {.key = "plasticity",
     .kind = FieldKind::kObject,
     .object = "mls_plasticity",
     .optional = true,
     .meaning = "Strain-state plasticity of the phyxels (muller2004 section 4.1); absent: "
                "elastic."},
    {.key = "hessian",
     .kind = FieldKind::kChoice,
     .text = "exact",
     .choices = kHessianKinds,
     .meaning = "`projected` clamps each phyxel's material tangent dP/dF to positive "
                "semi-definite for the implicit integrators' Newton steps; `exact` keeps it."},
};

constexpr std::string_view kFlowKinds[] = {"deviatoric", "full"};
constexpr std::string_view kOnOff[] = {"off", "on"};

constexpr FieldSpec kPlasticityFields[] = {
    {.key = "yield_strain",
     .number = 0.01,
     .range = Range::above(0),
     .meaning = "c_yield: a phyxel flows while the Frobenius norm of its elastic Green strain "
                "(its deviator with `flow` deviatoric) exceeds this. The paper's strain is twice "
                "the Green strain: its values are twice these."},
    {.key = "creep",
     .unit = "1/s",
     .number = 10,
     .range = Range::above(0),
     .meaning = "c_creep: while yielding, the plastic strain moves by min(1, c_creep dt) of the "
                "elastic strain per step."},
    {.key = "max_strain",
     .number = 1,
     .range = Range::above(0),
     .meaning = "c_max: the Frobenius norm of the plastic strain is capped at this."},
    {.key = "flow",
     .kind = FieldKind::kChoice,
     .text = "deviatoric",
     .choices = kFlowKinds,
     .meaning = "`deviatoric`: the plastic strain follows the deviator of the elastic strain and "
                "keeps the volume (O'Brien et al. 2002); `full`: the whole elastic strain, as "
                "the paper writes it."},
    {.key = "from",
     .unit = "s",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "Plastic from this time on; elastic before (muller2004 Fig. 3 makes a head "
                "plastic between bounces)."},
    {.key = "until",
     .unit = "s",
     .range = Range::atLeast(0),
     .optional = true,
     .rule = "> from",
     .meaning = "Elastic again after this time, keeping its plastic strain; absent: to the end."},
    {.key = "solid_stiffness",
     .number = 1,
     .range = Range::above(0),
     .rule = "other than 1 needs `until`",
     .meaning = "Young's modulus times this after `until` (muller2004 Fig. 3: \"we switch back "
                "to a stiff elastic material\"). At `until` the shape the body is in becomes its "
                "reference (as a melt's absorption does), storing the elastic strain whose "
                "stress under the stiffer material is the (Kirchhoff) stress it had, so the "
                "stress does not jump: the locked-in strain of a dent does not kick the body "
                "when it stiffens. An explicit run's step shrinks by the factor's square root "
                "from then on."},
    {.key = "melt",
     .kind = FieldKind::kChoice,
     .text = "off",
     .choices = kOnOff,
     .meaning = "`on`: melting (muller2004 section 4.2): every step while plastic, the current "
                "shape becomes the reference (neighbours, fits and supports rebuilt; the elastic "
                "strain kept, turned with the material), so the body flows for good; each "
                "phyxel's volume is measured against its original one, so `volume_stiffness` "
                "keeps the melt from collapsing. With yield_strain small and creep high a melt "
                "forgets its shape; after `until` it is elastic in the shape it flowed into. "
                "A rebuilt stencil reaches only as far as the phyxel's first support, so a melt "
                "splits where its parts flow apart and merges where they meet (the carried "
                "mesh stretches across a split; a resampled surface follows it)."},
    {.key = "melt_interval",
     .unit = "s",
     .number = 0.005,
     .range = Range::atLeast(0),
     .meaning = "A melt absorbs its shape at most this often (0: every step, as the paper); "
                "each absorption rebuilds the stencils, about the cost of tens of explicit "
                "steps, and the plastic creep carries the flow in between."},
};

constexpr ObjectSpec kPlasticitySpec{
    "mls_plasticity", "Strain-state plasticity of an mls_solid (muller2004 section 4.1).",
    kPlasticityFields};

constexpr ObjectSpec kMlsSolidSpec{
    "mls_solid",
    "Options of the meshless volume model (muller2004): phyxels sampled inside a closed mesh "
    "(or the points of a point cloud), the moving-least-squares deformation gradient over each "
    "phyxel's nearest neighbours, St Venant-Kirchhoff elasticity of the material's Young's "
    "modulus, Poisson ratio and density; the mesh is carried by the phyxels (eq. 27).",
    kMlsSolidFields};
#pragma GCC diagnostic pop

constexpr const ObjectSpec* kNestedSpecs[] = {&kPlasticitySpec};

void readMlsSolid(ObjectReader& r, Problems& problems, BodyDef& body) {
  MlsSolidDef& options = body.options<MlsSolidDef>();
  options.phyxelCount = r.integer("phyxel_count");
  options.phyxelSpacing = r.number("phyxel_spacing");
  if (options.phyxelCount > 0 && options.phyxelSpacing > 0) {
    problems.add(r.path(), "give at most one of 'phyxel_count' and 'phyxel_spacing'");
  }
  options.neighbours = r.integer("neighbours");
  options.quadraticBasis = r.choice("basis") == "quadratic";
  options.hourglass = r.number("hourglass");
  options.volumeStiffness = r.number("volume_stiffness");
  options.projectHessian = r.choice("hessian") == "projected";
  options.layers = r.integer("layers");
  if (options.layers == 1) {
    problems.add(r.path() + ".layers",
                 "one layer of phyxels is not a volume (its moment matrices are singular, "
                 "muller2004 section 7): use 2 or 3, or a shell model");
  }
  options.resampledSurface = r.choice("surface") == "resampled";
  options.surfelCount = r.integer("surfels");
  if (r.has("plasticity")) {
    ObjectReader pr = r.object("plasticity", kPlasticitySpec);
    MlsPlasticityDef p;
    p.yieldStrain = pr.number("yield_strain");
    p.creep = pr.number("creep");
    p.maxStrain = pr.number("max_strain");
    p.deviatoric = pr.choice("flow") == "deviatoric";
    p.from = pr.number("from");
    p.until = pr.tryNumber("until");
    p.melt = pr.choice("melt") == "on";
    p.meltInterval = pr.number("melt_interval");
    p.solidStiffness = pr.number("solid_stiffness");
    if (p.until && !(*p.until > p.from)) {
      problems.add(pr.path() + ".until", "must be later than 'from'");
    }
    if (p.solidStiffness != 1 && !p.until) {
      problems.add(pr.path() + ".solid_stiffness",
                   "stiffens the body after 'until': set 'until' (the end of the plastic window)");
    }
    pr.finish();
    options.plasticity = p;
  }
  if (options.resampledSurface && !(options.plasticity && options.plasticity->melt)) {
    problems.add(r.path() + ".surface",
                 "a resampled surface follows a melt's topology changes: set plasticity.melt "
                 "to \"on\" (or keep the carried surface)");
  }
  if (options.resampledSurface && options.layers > 0) {
    problems.add(r.path() + ".surface", "a layered sheet carries its mesh: use `carried`");
  }
  r.finish();
}

Json writeMlsSolid(const BodyDef& body) {
  const MlsSolidDef& d = body.options<MlsSolidDef>();
  Json out = {{"phyxel_count", d.phyxelCount},
              {"phyxel_spacing", d.phyxelSpacing},
              {"neighbours", d.neighbours},
              {"basis", d.quadraticBasis ? "quadratic" : "linear"},
              {"hourglass", d.hourglass},
              {"volume_stiffness", d.volumeStiffness},
              {"hessian", d.projectHessian ? "projected" : "exact"},
              {"layers", d.layers},
              {"surface", d.resampledSurface ? "resampled" : "carried"},
              {"surfels", d.surfelCount}};
  if (d.plasticity) {
    const MlsPlasticityDef& p = *d.plasticity;
    out["plasticity"] = {{"yield_strain", p.yieldStrain},
                         {"creep", p.creep},
                         {"max_strain", p.maxStrain},
                         {"flow", p.deviatoric ? "deviatoric" : "full"},
                         {"from", p.from},
                         {"melt", p.melt ? "on" : "off"},
                         {"melt_interval", p.meltInterval},
                         {"solid_stiffness", p.solidStiffness}};
    if (p.until) out["plasticity"]["until"] = *p.until;
  }
  return out;
}

// A sheet of layered phyxels on the mesh (its mid-surface; notes B8).
Discretization layeredSheet(const BodyDef& def, Geometry geometry, const MlsSolidParams& params,
                            std::vector<std::string>& warnings, const std::string& label) {
  if (geometry.isPointCloud()) {
    throw InputError(
        "mls_solid: layers need a triangle mesh (the sheet's mid-surface), not a point cloud");
  }
  (void)dropUnreferencedVertices(geometry, warnings, label);
  const auto layers = static_cast<size_t>(params.layers);
  VolumeSampling sheet = sampleSheetLayers(geometry, def.material.thickness, params.layers);
  Discretization d;
  d.model = std::make_unique<MlsSolidModel>(sheet.positions, sheet.volumes, def.material, params,
                                            geometry);
  d.nodePositions = std::move(sheet.positions);
  d.nodeOfVertex.resize(static_cast<size_t>(geometry.vertexCount()));
  for (size_t v = 0; v < d.nodeOfVertex.size(); ++v) {
    d.nodeOfVertex[v] = static_cast<int32_t>(v * layers);
  }
  return d;
}

Discretization discretizeMlsSolid(const BodyDef& def, Geometry geometry,
                                  std::vector<std::string>& warnings, const std::string& label) {
  const MlsSolidDef& options = def.options<MlsSolidDef>();
  MlsSolidParams params;
  params.neighbours = options.neighbours;
  params.quadraticBasis = options.quadraticBasis;
  params.hourglass = options.hourglass;
  params.volumeStiffness = options.volumeStiffness;
  params.projectHessian = options.projectHessian;
  if (options.plasticity) {
    const MlsPlasticityDef& p = *options.plasticity;
    params.plasticity = MlsPlasticity{
        p.yieldStrain, p.creep,        p.maxStrain,
        p.deviatoric,  p.from,         p.until.value_or(std::numeric_limits<double>::infinity()),
        p.melt,        p.meltInterval, p.solidStiffness};
  }
  params.layers = options.layers;
  params.resampleSurface = options.resampledSurface;
  Discretization d;
  if (options.layers > 0) return layeredSheet(def, std::move(geometry), params, warnings, label);
  if (geometry.isPointCloud()) {
    if (params.resampleSurface) {
      throw InputError(
          "mls_solid: a resampled surface starts from a closed mesh's surface; a point cloud's "
          "points are the phyxels (use the carried surface)");
    }
    d.model = std::make_unique<MlsSolidModel>(geometry.positions, std::span<const double>{},
                                              def.material, params, Geometry{});
    d.nodePositions = geometry.positions;
    d.nodeOfVertex = identityMap(geometry.vertexCount());
    return d;
  }
  (void)dropUnreferencedVertices(geometry, warnings, label);
  if (options.phyxelCount <= 0 && !(options.phyxelSpacing > 0)) {
    throw InputError("mls_solid: give phyxel_count or phyxel_spacing for a mesh");
  }
  const VolumeSampling sampling = options.phyxelSpacing > 0
                                      ? sampleVolume(geometry, options.phyxelSpacing)
                                      : sampleVolumeByCount(geometry, options.phyxelCount);
  const size_t count = sampling.positions.size() / 3;
  const double volume = enclosedVolume(geometry);
  if (count == 0) {
    std::ostringstream msg;
    msg << "mls_solid: no lattice point of spacing " << sampling.spacing
        << " m lies inside the mesh (is it closed? it encloses " << volume
        << " m^3): choose a smaller phyxel_spacing";
    throw InputError(msg.str());
  }
  // Volumes that sum to the mesh's (notes B2b: no boundary inflation).
  const std::vector<double> volumes(count, volume / static_cast<double>(count));
  const double latticeVolume = static_cast<double>(count) * std::pow(sampling.spacing, 3);
  if (std::abs(latticeVolume / volume - 1.0) > 0.25) {
    std::ostringstream msg;
    msg << label << ": mls_solid: the " << count << " phyxels' lattice cells fill " << latticeVolume
        << " m^3 of the mesh's " << volume
        << " m^3; the sampling is coarse for this shape (or the mesh is not closed)";
    warnings.push_back(msg.str());
  }
  // A resampled surface starts as surfels: the mesh's vertices with their normals, or that
  // many clustered from them (evenly spread, geometry/sampling.hpp).
  Geometry surfels;
  if (params.resampleSurface) {
    Geometry oriented = geometry;
    computeVertexNormals(oriented);
    if (options.surfelCount > 0 && options.surfelCount < oriented.vertexCount()) {
      SamplingParams sampling_params;
      sampling_params.targetNodeCount = options.surfelCount;
      const NodeSampling chosen = clusterSurface(oriented, sampling_params);
      surfels.positions = chosen.positions;
      surfels.normals = chosen.normals;
    } else {
      surfels.positions = oriented.positions;
      surfels.normals = oriented.normals;
    }
  }
  d.model = std::make_unique<MlsSolidModel>(sampling.positions, volumes, def.material, params,
                                            params.resampleSurface ? surfels : geometry);
  d.nodePositions = sampling.positions;
  // A vertex (pins and loads by vertex) stands for its nearest phyxel.
  const PointKdTree tree(d.nodePositions);
  d.nodeOfVertex.resize(static_cast<size_t>(geometry.vertexCount()));
  std::vector<uint32_t> found;
  std::vector<double> squared;
  for (size_t v = 0; v < d.nodeOfVertex.size(); ++v) {
    tree.nearest(&geometry.positions[3 * v], 1, found, squared);
    d.nodeOfVertex[v] = static_cast<int32_t>(found[0]);
  }
  return d;
}

}  // namespace

ModelRegistration mlsSolidRegistration() {
  return {.name = MlsSolidDef::kModel,
          .meaning = "Options of a body whose model is `mls_solid`.",
          .options = &kMlsSolidSpec,
          .nestedOptions = kNestedSpecs,
          .readOptions = readMlsSolid,
          .writeOptions = writeMlsSolid,
          .discretize = discretizeMlsSolid};
}

}  // namespace shellsim
