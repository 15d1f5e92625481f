// The thick-shell model's registration (models/registry.hpp): its scene options
// (ThickShellDef, shellsim/models/thick_shell.hpp) and the discretization of a body: the
// shell generated from the mesh (steinemann section 3, shellsim/thicken.hpp) to the
// material's thickness, then the layered mass-spring model on it (section 4.1).
#include <sstream>
#include <string>
#include <vector>

#include "io/json_fields.hpp"
#include "io/scene_names.hpp"
#include "models/registry.hpp"
#include "models/thick_shell/thick_shell_model.hpp"
#include "shellsim/models/thick_shell.hpp"
#include "shellsim/thicken.hpp"

namespace shellsim {
namespace {

using json_fields::FieldKind;
using json_fields::FieldSpec;
using json_fields::Json;
using json_fields::ObjectReader;
using json_fields::ObjectSpec;
using json_fields::Problems;
using json_fields::Range;

constexpr std::string_view kMethods[] = {"front", "vertex"};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr std::string_view kDrawnChoices[] = {"deformed", "brittle"};

constexpr FieldSpec kThickShellFields[] = {
    {.key = "layers",
     .kind = FieldKind::kInteger,
     .number = 2,
     .range = Range::closed(1, 2),
     .meaning = "1: springs on the edges of the surface only (no bending resistance: brittle "
                "fracture, the paper's fast mode); 2: springs on the outer and the inner surface, "
                "internal springs between them, both diagonals of every side quad, and area and "
                "volume terms (Fig. 2)."},
    {.key = "extrusion_factor",
     .number = 1,
     .range = Range::closed(1, 100),
     .meaning = "f: the dynamics' inner surface lies f times deeper than the drawn one (section "
                "4.1: prisms about as deep as their edges are long keep the volume terms "
                "stable); the frames draw the generated depth."},
    {.key = "method",
     .kind = FieldKind::kChoice,
     .text = "front",
     .choices = kMethods,
     .meaning = "How the inner surface is grown (as `shellsim thicken --method`): `front`, every "
                "vertex a step per pass; `vertex`, one vertex at a time."},
    {.key = "steps",
     .kind = FieldKind::kInteger,
     .number = 5,
     .range = Range::closed(1, 1000),
     .meaning = "k: steps in which a vertex reaches its depth."},
    {.key = "area_stiffness",
     .number = 1,
     .range = Range::atLeast(0),
     .meaning = "Stiffness of the area terms 1/2 k ((A - A0)/A0)^2 on the triangles of both "
                "surfaces (two layers), relative to E A0 h / 2 (h the local depth); 0: off."},
    {.key = "volume_stiffness",
     .number = 1,
     .range = Range::atLeast(0),
     .meaning = "Stiffness of the volume terms 1/2 k ((V - V0)/V0)^2 on the three tets of every "
                "prism (two layers), relative to E V0; V is signed, so a tet pushed inside out "
                "is pushed back. 0: off."},
    {.key = "drawn",
     .kind = FieldKind::kChoice,
     .text = "deformed",
     .choices = kDrawnChoices,
     .meaning = "How the frames draw the shell (section 4.2.4): `deformed`, as the springs move "
                "it (ductile look); `brittle`, every piece at the rigid motion that best fits its "
                "nodes (Muller 2005 shape matching: the polar part of sum m (x - c)(p - p0)^T), so "
                "a stiff material such as porcelain or brick is never drawn bent: it only breaks, "
                "its pieces moving as wholes. The physics is the same."},
    {.key = "fracture",
     .kind = FieldKind::kObject,
     .object = "thick_shell_fracture",
     .optional = true,
     .meaning = "Brittle fracture; absent: the shell never breaks. With two layers the springs "
                "of the outer surface start cracks and each split node of S takes its S' node "
                "with it."},
};

constexpr std::string_view kModes[] = {"fine", "coarse"};

constexpr FieldSpec kFractureFields[] = {
    {.key = "stretch",
     .number = 0.1,
     .range = Range::above(0),
     .meaning = "tau+: a spring of the surface longer than (1 + tau+) times its rest length "
                "splits one of its ends along the plane normal to it (section 4.2.1)."},
    {.key = "compress",
     .number = 0,
     .range = Range::closed(0, 1),
     .meaning = "tau-: the same for a spring shorter than (1 - tau-) times its rest length; 0: "
                "squeezing never breaks."},
    {.key = "mode",
     .kind = FieldKind::kChoice,
     .text = "fine",
     .choices = kModes,
     .meaning = "`fine`: any overstretched spring starts a crack (many small pieces); `coarse`: "
                "once a node has split, it and its neighbours start no new crack, so cracks grow "
                "from their tips and the pieces stay large (section 4.2.2)."},
    {.key = "max_splits",
     .kind = FieldKind::kInteger,
     .number = 8,
     .range = Range::closed(1, 100000),
     .meaning = "Vertex splits per step at most, the most strained springs first (crack "
                "frequency)."},
    {.key = "extension",
     .unit = "m",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "Large-fragment fracture (section 4.2.3): a crack that starts runs on along its "
                "splitting plane, ignoring the thresholds, until this far from where it started "
                "(from tip to tip, so it follows the mesh); 0: cracks grow only as springs "
                "break. With a small `max_splits`, hard shells break into a few large shards."},
    {.key = "scatter",
     .number = 0,
     .range = Range::closed(0, 0.9),
     .meaning = "Uneven material: each spring's thresholds times 1 + scatter u, u in [-1, 1] "
                "fixed by the spring's rest position and the seed, so that an evenly loaded "
                "shell breaks at its weakest spot rather than everywhere at once; 0: even."},
    {.key = "seed",
     .kind = FieldKind::kInteger,
     .number = 1,
     .range = Range::closed(0, 2147483647),
     .meaning = "Seed of the coin that picks the end to split when neither or both ends of "
                "the spring are crack tips: the same seed, the same pieces."},
    {.key = "remesh",
     .kind = FieldKind::kChoice,
     .text = "off",
     .choices = scene_names::kOnOff,
     .meaning = "Local re-meshing (section 4.2.3, Fig. 5): before a vertex splits, every "
                "triangle whose far side its plane crosses is cut in two along the plane (with "
                "the triangle across that side, so no T-junction), so the crack runs along the "
                "plane: straight cracks (with `extension`, one plane across the shell) and "
                "smooth crack edges instead of the mesh's zigzag. New nodes take their rest "
                "position, depth and velocity from the side's ends; masses follow the areas."},
    {.key = "remesh_min_angle",
     .unit = "degrees",
     .number = 20,
     .range = Range::closed(0, 60),
     .meaning = "Re-meshing cuts a triangle only where every angle the cut makes is at least "
                "this, at rest and now, and the new springs start unbroken: slivers would "
                "shorten the stable time step (the cow scene: 1.5x the steps at the default, "
                "2.2x at 15 degrees and 0.2)."},
    {.key = "remesh_min_fraction",
     .number = 0.25,
     .range = Range::closed(0, 0.5),
     .meaning = "Re-meshing cuts a side only where the plane crosses it at least this "
                "fraction of its length from both ends; nearer an end, the crack takes the "
                "existing edge to it."},
    {.key = "bump",
     .unit = "degrees",
     .number = 0,
     .range = Range::closed(0, 45),
     .meaning = "With `extension`: each tip a crack runs through turns its plane by a seeded "
                "angle within +-bump about the surface normal there (section 4.2.3: \"bumpy, "
                "but not jagged cracks\"), so a long crack wanders; best with `remesh`. 0: "
                "one plane."},
};

constexpr ObjectSpec kFractureSpec{
    "thick_shell_fracture",
    "Brittle fracture of a thick shell (steinemann section 4.2): vertex splits at "
    "overstretched springs, cracks that run from their tips, pieces that part whole (a node "
    "the crack reaches from two sides is split, so no piece hangs by one node).",
    kFractureFields};

constexpr ObjectSpec kThickShellSpec{
    "thick_shell",
    "Options of the thick-shell model (steinemann): the body's mesh is the outer surface S; an "
    "inner surface S' is grown inwards to the material's thickness without ever crossing S or "
    "itself (thinner where the mesh leaves no room: ears, legs, horns), and the shell is a "
    "mass-spring model of one or two layers whose stiffness follows the local depth (E and "
    "the depth for each spring, Van Gelder's map). The frames draw S, S' and walls at holes.",
    kThickShellFields};
#pragma GCC diagnostic pop

constexpr const ObjectSpec* kNestedSpecs[] = {&kFractureSpec};

void readThickShell(ObjectReader& r, Problems& /*problems*/, BodyDef& body) {
  ThickShellDef& options = body.options<ThickShellDef>();
  options.layers = r.integer("layers");
  options.extrusionFactor = r.number("extrusion_factor");
  options.frontPropagation = r.choice("method") == "front";
  options.steps = r.integer("steps");
  options.areaStiffness = r.number("area_stiffness");
  options.volumeStiffness = r.number("volume_stiffness");
  options.brittle = r.choice("drawn") == "brittle";
  if (r.has("fracture")) {
    ObjectReader fr = r.object("fracture", kFractureSpec);
    ThickShellFractureDef f;
    f.stretch = fr.number("stretch");
    f.compress = fr.number("compress");
    f.coarse = fr.choice("mode") == "coarse";
    f.maxSplits = fr.integer("max_splits");
    f.extension = fr.number("extension");
    f.scatter = fr.number("scatter");
    f.seed = static_cast<uint64_t>(fr.integer("seed"));
    f.remesh = fr.choice("remesh") == "on";
    f.remeshMinAngle = fr.number("remesh_min_angle");
    f.remeshMinFraction = fr.number("remesh_min_fraction");
    f.bump = fr.number("bump");
    fr.finish();
    options.fracture = f;
  }
  r.finish();
}

Json writeThickShell(const BodyDef& body) {
  const ThickShellDef& d = body.options<ThickShellDef>();
  Json out = {{"layers", d.layers},
              {"extrusion_factor", d.extrusionFactor},
              {"method", d.frontPropagation ? "front" : "vertex"},
              {"steps", d.steps},
              {"area_stiffness", d.areaStiffness},
              {"volume_stiffness", d.volumeStiffness},
              {"drawn", d.brittle ? "brittle" : "deformed"}};
  if (d.fracture) {
    out["fracture"] = {{"stretch", d.fracture->stretch},
                       {"compress", d.fracture->compress},
                       {"mode", d.fracture->coarse ? "coarse" : "fine"},
                       {"max_splits", d.fracture->maxSplits},
                       {"extension", d.fracture->extension},
                       {"scatter", d.fracture->scatter},
                       {"seed", d.fracture->seed},
                       {"remesh", d.fracture->remesh ? "on" : "off"},
                       {"remesh_min_angle", d.fracture->remeshMinAngle},
                       {"remesh_min_fraction", d.fracture->remeshMinFraction},
                       {"bump", d.fracture->bump}};
  }
  return out;
}

Discretization discretizeThickShell(const BodyDef& def, Geometry geometry,
                                    std::vector<std::string>& warnings, const std::string& label) {
  Discretization d = meshDiscretization(ThickShellDef::kModel, geometry, warnings, label);
  const ThickShellDef& options = def.options<ThickShellDef>();
  ThickenOptions thicken;
  thicken.depth = def.material.thickness;
  thicken.method = options.frontPropagation ? ThickenMethod::kFront : ThickenMethod::kSingleVertex;
  thicken.stepsPerDepth = options.steps;
  thicken.verify = false;
  geometry.normals.clear();
  const ThickShell shell = thickenMesh(geometry, thicken);
  if (shell.thinVertices > 0) {
    std::ostringstream msg;
    msg << label << ": " << shell.thinVertices << " of " << geometry.vertexCount()
        << " vertices end thinner than the thickness " << thicken.depth
        << " m (the surface is closer than twice it there; the thinnest " << shell.minDepth
        << " m): stiffness and mass follow the depth, at least "
        << ThickShellModel::kMinDepthFraction << " of the thickness";
    warnings.push_back(msg.str());
  }
  auto model = std::make_unique<ThickShellModel>(geometry, shell, def.material, options);
  d.nodePositions.assign(model->restPositions().begin(), model->restPositions().end());
  d.model = std::move(model);
  return d;
}

}  // namespace

ModelRegistration thickShellRegistration() {
  return {.name = ThickShellDef::kModel,
          .meaning = "Options of a body whose model is `thick_shell`.",
          .options = &kThickShellSpec,
          .nestedOptions = kNestedSpecs,
          .readOptions = readThickShell,
          .writeOptions = writeThickShell,
          .discretize = discretizeThickShell};
}

}  // namespace shellsim
