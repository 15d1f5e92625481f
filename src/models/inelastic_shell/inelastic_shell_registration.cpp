// The inelastic thin shells model's registration (models/registry.hpp): its scene options
// (InelasticShellDef, shellsim/models/inelastic_shell.hpp) and the discretization of a body
// (gingold2004: the mesh's vertices are the nodes, its faces the six-node stencils).
#include <string>
#include <vector>

#include "io/json_fields.hpp"
#include "io/scene_names.hpp"
#include "models/inelastic_shell/inelastic_shell_model.hpp"
#include "models/registry.hpp"
#include "shellsim/models/inelastic_shell.hpp"

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

constexpr std::string_view kFractureStrainKinds[] = {"tensile", "absolute"};
constexpr std::string_view kCrackPacingKinds[] = {"count", "wave"};
constexpr std::string_view kBendingKinds[] = {"quadratic_patch", "shape_operator"};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr FieldSpec kInelasticShellFields[] = {
    {.key = "bending",
     .kind = FieldKind::kChoice,
     .text = "quadratic_patch",
     .choices = kBendingKinds,
     .meaning = "How a face measures its bending strain. `quadratic_patch`: the curvature of the "
                "quadratic fitted by least squares over the nodes of the faces within two edges "
                "of it (more near a boundary, never across a crack), its misfit penalized: "
                "consistent on any mesh (plates within 2 % of Kirchhoff on jittered meshes), a "
                "12-node stencil. "
                "`shape_operator`: the paper's difference of shape operators from the three "
                "dihedral angles, consistent only on regular meshes (flaps the parallelogram "
                "completions of their faces) and blind to curvature across a boundary edge."},
    {.key = "yield_strain",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Plasticity (gingold2004 section 3.3): the yield strain eps0, the root mean "
                "square through the thickness of the deviatoric elastic strain at which a face "
                "yields (von Mises; uniaxial stress yields at sqrt(3/2) eps0 / (1 + nu)). "
                "Absent: elastic."},
    {.key = "hardening",
     .range = Range::atLeast(0),
     .meaning = "Kinematic hardening gamma = h_kin / (2 mu) of the plasticity: past yield the "
                "plastic strain grows at 1 / (1 + gamma) of the strain; 0 is ideal plasticity."},
    {.key = "hardening_limit",
     .range = Range::above(0),
     .optional = true,
     .meaning = "[ours] Saturating kinematic hardening: the back strain (gamma times the plastic "
                "strain while small) never passes this norm, in strain like `yield_strain` "
                "(Armstrong-Frederick-like). Below `yield_strain`, a face whose load is taken "
                "off never yields back: with linear hardening, faces that flowed past "
                "yield_strain / gamma flow back when unloaded (a crushed can springs back). "
                "Absent: linear, the paper's."},
    {.key = "strain_limit",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Fracture (gingold2004 section 3.4): a face breaks when an eigenvalue of its "
                "elastic strain at the top or bottom surface passes this limit; the crack runs "
                "across it perpendicular to that principal direction. Absent: no fracture."},
    {.key = "fracture_strain",
     .kind = FieldKind::kChoice,
     .text = "tensile",
     .choices = kFractureStrainKinds,
     .meaning = "`tensile`: only stretching eigenvalues break a face; `absolute`: compression "
                "beyond the limit breaks it too."},
    {.key = "absorption",
     .number = 0.5,
     .range = Range::closed(0, 1),
     .meaning = "Share of the broken face's elastic strain its two halves take as plastic strain "
                "(stress relief against runaway cracking)."},
    {.key = "refractory_steps",
     .kind = FieldKind::kInteger,
     .number = 10,
     .range = Range::closed(0, 1000000),
     .meaning = "Steps during which the faces a crack made cannot break again, counted in "
                "the run's full time step: a step the step search splits counts for its share."},
    {.key = "minimum_split",
     .number = 0.15,
     .range = Range::closed(0.01, 0.45),
     .meaning = "The crack meets the opposite edge at t in [minimum_split, 1 - minimum_split] "
                "along it (no slivers), where it is not budged."},
    {.key = "budge_limit",
     .number = 0.2,
     .range = Range::closed(0, 0.45),
     .meaning = "Vertex budging (gingold2004 section 3.4, Fig. 7): where a crack would meet the "
                "opposite edge within this fraction of its length from a vertex, that vertex "
                "moves onto the crack line instead (rest and current position; the strain "
                "change is absorbed plastically, so strains do not jump) and the crack runs along "
                "the existing edge: smooth crack fringes without slivers. Where the vertex may not "
                "move (it would flip a face or leave an angle under 10 degrees, or pull a boundary "
                "vertex inwards) the crack runs along that edge unmoved; where the edge cannot "
                "open (both ends inside, or it is on the boundary) the face is split at least "
                "this far from the vertex. 0: never budge (every crack splits its face, at least "
                "minimum_split from a vertex)."},
    {.key = "toughness",
     .unit = "Pa m^1/2",
     .number = 0,
     .range = Range::atLeast(0),
     .meaning = "Fracture toughness K_c [ours, beyond the paper]: at a crack's end (a boundary "
                "node whose faces turn more than 3/4 of a full turn around it: a cut's last node, "
                "or a notch) the crack runs on once the mean strain of the faces around the node "
                "reaches what the tip field of linear fracture mechanics at K_c puts there, "
                "K_c (3.2 (3 - 2 nu) / (3 pi)) / (E sqrt(2 pi l)) with l the radius of a disc of "
                "their area, perpendicular to that mean strain's principal direction (where that "
                "is below strain_limit). A face's strain at a crack tip is O(K / sqrt(edge)), "
                "far below the tip's, so without it a crack runs only where the load alone "
                "breaks faces. The crack advances from an end once per refractory_steps. Glass "
                "about 0.75e6, aluminium 2.4e7. 0: off (the paper)."},
    {.key = "max_cracks_per_step",
     .kind = FieldKind::kInteger,
     .number = 1,
     .range = Range::closed(1, 1000000),
     .meaning = "The most faces a step cuts, the most overstrained first (a uniformly strained "
                "sheet would otherwise shatter where the first crack's relief has not arrived)."},
    {.key = "crack_pacing",
     .kind = FieldKind::kChoice,
     .text = "count",
     .choices = kCrackPacingKinds,
     .meaning = "`count`: a step cuts up to max_cracks_per_step faces, the most overstrained "
                "first, wherever they are. `wave`: besides, the faces cut in one step lie "
                "farther apart (rest centroids) than the membrane wave travels in the step, "
                "c dt with c = sqrt(E / (density (1 - poisson^2))): a crack's stress relief "
                "cannot reach a face beyond that within the step, so a fast impact cracks in "
                "many places at once while a large step cuts one face per region (set "
                "max_cracks_per_step high to leave the pace to the wave)."},
    {.key = "step_search",
     .range = Range::above(1),
     .optional = true,
     .meaning = "The time-step search (gingold2004 sections 4.1-4.2): a step is retried in halves "
                "(at most 6 times) when the largest node force grows by more than this factor "
                "(the paper's 1.1) or when a face would break within it, so that fracture happens "
                "at the narrowed step. Absent: every step accepted."},
    {.key = "plastic_step",
     .range = Range::above(0),
     .optional = true,
     .meaning = "[ours] The time-step search for plasticity: a step is retried in halves (at most "
                "6 times) when the return mapping at its end would move some face's plastic "
                "strain by more than this many yield strains. The paper's plastic update after "
                "each step (section 3.3) lets a long step answer an impact elastically and then "
                "take the whole overstress plastically, so a dent grows with the step: the "
                "tube of Fig. 12 kept 5 times the converged plastic strain at 20 us steps. "
                "0.25 narrows the steps only while a face flows: the following steps keep the "
                "split and take one level coarser after every 8 accepted. Needs yield_strain; "
                "works with or without step_search. Absent: every step's flow accepted."},
    {.key = "hessian",
     .kind = FieldKind::kChoice,
     .text = "exact",
     .choices = kHessianKinds,
     .meaning = "`projected` clamps each face's Hessian to positive semi-definite for the "
                "implicit integrators' Newton steps; `exact` keeps it."},
};

constexpr ObjectSpec kInelasticShellSpec{
    "inelastic_shell",
    "Options of the inelastic thin shells model (gingold2004) on a triangle mesh: Green "
    "membrane strain and quadratic-patch (or the paper's shape-operator) bending per face, the "
    "Koiter energy of the material's "
    "Young's modulus, Poisson ratio and thickness.",
    kInelasticShellFields};
#pragma GCC diagnostic pop

void readInelasticShell(ObjectReader& r, Problems& problems, BodyDef& body) {
  InelasticShellDef& options = body.options<InelasticShellDef>();
  options.shapeOperatorBending = r.choice("bending") == "shape_operator";
  options.yieldStrain = r.tryNumber("yield_strain");
  options.hardening = r.number("hardening");
  options.hardeningLimit = r.tryNumber("hardening_limit");
  if (options.hardeningLimit && !options.yieldStrain) {
    problems.add(r.pathOf("hardening_limit"), *r.find("hardening_limit"),
                 "bounds the hardening of the plasticity: it needs \"yield_strain\"");
  }
  options.strainLimit = r.tryNumber("strain_limit");
  options.tensileOnly = r.choice("fracture_strain") == "tensile";
  options.absorption = r.number("absorption");
  options.refractorySteps = r.integer("refractory_steps");
  options.minimumSplit = r.number("minimum_split");
  options.maxCracksPerStep = r.integer("max_cracks_per_step");
  options.waveSpacing = r.choice("crack_pacing") == "wave";
  options.budgeLimit = r.number("budge_limit");
  options.toughness = r.number("toughness");
  options.stepSearch = r.tryNumber("step_search");
  options.plasticStep = r.tryNumber("plastic_step");
  if (options.plasticStep && !options.yieldStrain) {
    problems.add(r.pathOf("plastic_step"), *r.find("plastic_step"),
                 "bounds the plastic flow of a step: it needs \"yield_strain\"");
  }
  options.projectHessian = r.choice("hessian") == "projected";
  r.finish();
}

Json writeInelasticShell(const BodyDef& body) {
  const InelasticShellDef& d = body.options<InelasticShellDef>();
  Json out = {{"bending", d.shapeOperatorBending ? "shape_operator" : "quadratic_patch"},
              {"hessian", d.projectHessian ? "projected" : "exact"},
              {"hardening", d.hardening}};
  if (d.yieldStrain) out["yield_strain"] = *d.yieldStrain;
  if (d.hardeningLimit) out["hardening_limit"] = *d.hardeningLimit;
  if (d.strainLimit) out["strain_limit"] = *d.strainLimit;
  out["fracture_strain"] = d.tensileOnly ? "tensile" : "absolute";
  out["absorption"] = d.absorption;
  out["refractory_steps"] = d.refractorySteps;
  out["minimum_split"] = d.minimumSplit;
  out["max_cracks_per_step"] = d.maxCracksPerStep;
  out["crack_pacing"] = d.waveSpacing ? "wave" : "count";
  out["budge_limit"] = d.budgeLimit;
  out["toughness"] = d.toughness;
  if (d.stepSearch) out["step_search"] = *d.stepSearch;
  if (d.plasticStep) out["plastic_step"] = *d.plasticStep;
  return out;
}

Discretization discretizeInelasticShell(const BodyDef& def, Geometry geometry,
                                        std::vector<std::string>& warnings,
                                        const std::string& label) {
  Discretization d = meshDiscretization("inelastic_shell", geometry, warnings, label);
  InelasticShellParams params;
  const InelasticShellDef& options = def.options<InelasticShellDef>();
  params.projectHessian = options.projectHessian;
  params.bending = options.shapeOperatorBending ? InelasticShellBending::kShapeOperator
                                                : InelasticShellBending::kQuadraticPatch;
  if (options.yieldStrain) {
    params.plasticity = InelasticShellPlasticity{*options.yieldStrain, options.hardening,
                                                 options.plasticStep.value_or(0.0),
                                                 options.hardeningLimit.value_or(0.0)};
  }
  if (options.stepSearch) params.stepSearch = InelasticShellStepSearch{*options.stepSearch, true};
  if (options.strainLimit) {
    params.fracture = InelasticShellFracture{
        *options.strainLimit,    options.tensileOnly,  options.absorption,
        options.refractorySteps, options.minimumSplit, options.maxCracksPerStep,
        options.waveSpacing,     options.budgeLimit,   options.toughness};
  }
  d.model = std::make_unique<InelasticShellModel>(geometry, def.material, params);
  d.nodePositions = std::move(geometry.positions);
  return d;
}

}  // namespace

ModelRegistration inelasticShellRegistration() {
  return {.name = InelasticShellDef::kModel,
          .meaning = "Options of a body whose model is `inelastic_shell`.",
          .options = &kInelasticShellSpec,
          .nestedOptions = {},
          .readOptions = readInelasticShell,
          .writeOptions = writeInelasticShell,
          .discretize = discretizeInelasticShell};
}

}  // namespace shellsim
