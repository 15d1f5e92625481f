#include "io/scene_schema.hpp"

#include <string_view>
#include <vector>

#include "io/scene_names.hpp"
#include "models/registry.hpp"

namespace shellsim::scene_schema {
namespace {

using json_fields::FieldKind;
using json_fields::FieldSpec;
using json_fields::ObjectSpec;
using json_fields::Range;
using scene_names::kFormats;
using scene_names::kIntegrators;
using scene_names::kNewtonHessians;
using scene_names::kObstacleResponses;
using scene_names::kObstacleTypes;
using scene_names::kOnOff;
using scene_names::kPinShapes;
using scene_names::kPrimitiveTypes;
using scene_names::kRegionShapes;
using scene_names::kVentModels;

// ---------------------------------------------------------------------------------------
// Field tables. The defaults here are the ones a scene gets; a test checks that they agree
// with the member initializers in scene.hpp.

// Each entry names only the members it sets, leaving the rest at their defaults on
// purpose; GCC 12 would warn about every one of those.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

constexpr FieldSpec kKeyframeFields[] = {
    {.key = "time",
     .unit = "s",
     .range = Range::atLeast(0),
     .required = true,
     .rule = "greater than the previous keyframe's",
     .meaning = "When the offset is reached, from the start of the run."},
    {.key = "offset",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .required = true,
     .meaning = "Displacement from the rest placement at `time`."},
};

constexpr FieldSpec kObstacleFields[] = {
    {.key = "type",
     .kind = FieldKind::kChoice,
     .choices = kObstacleTypes,
     .required = true,
     .meaning = "Shape of the obstacle."},
    {.key = "point",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "plane",
     .meaning = "A point on the plane."},
    {.key = "normal",
     .kind = FieldKind::kVec3,
     .vec = {0, 0, 1},
     .variants = "plane",
     .rule = "non-zero; normalised on reading",
     .meaning = "Normal of the plane, pointing into the free side."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "sphere box",
     .meaning = "Centre of the shape."},
    {.key = "radius",
     .unit = "m",
     .number = 0.5,
     .range = Range::above(0),
     .variants = "sphere",
     .meaning = "Radius of the sphere."},
    {.key = "half_extents",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0.5, 0.5, 0.5},
     .range = Range::above(0),
     .variants = "box",
     .meaning = "Half side lengths of the box."},
    {.key = "friction",
     .number = 0.3,
     .range = Range::atLeast(0),
     .meaning = "Coulomb friction coefficient of contacts with this obstacle."},
    {.key = "restitution",
     .number = 0.0,
     .range = Range::closed(0, 1),
     .meaning = "Share of the normal speed kept on impact: 0 inelastic, 1 elastic."},
    {.key = "response",
     .kind = FieldKind::kChoice,
     .text = "projection",
     .choices = kObstacleResponses,
     .meaning = "How nodes are kept out. `projection`: a node found inside is moved onto the "
                "surface and its velocity filtered by restitution and friction (cheap, exact "
                "at rest, but the jump strains a stiff shell). `penalty`: a spring "
                "1/2 k (delta - d)^2 on each node closer than delta = half the contact "
                "thickness (contact.thickness, else the body's material thickness), "
                "k = kappa m / dt_s^2 with kappa the obstacle's `stiffness` or else "
                "contact.stiffness, as for mesh contact (gingold2004 section "
                "4.3: floor, boxes and projectiles share the meshes' penalty); restitution "
                "becomes a normal damper of ratio -ln e / sqrt(pi^2 + ln^2 e), friction a "
                "Coulomb limit on the spring's impulse. Use it for stiff shells (metal, "
                "glass) and with implicit integration."},
    {.key = "mass",
     .unit = "kg",
     .number = 0.0,
     .range = Range::atLeast(0),
     .rule = "> 0 needs response penalty and no path",
     .meaning = "0: the obstacle goes where its path puts it, whatever pushes it. > 0: a thrown "
                "obstacle (a projectile), free to translate under gravity and the reactions "
                "of the penalty springs that push the bodies, from `velocity` at time 0; it "
                "does not rotate (a box stays axis-aligned). It lands on, bounces off and "
                "slides on the other obstacles (impulses with the larger restitution and the "
                "geometric mean of the frictions of the two; two planes never meet)."},
    {.key = "velocity",
     .kind = FieldKind::kVec3,
     .unit = "m/s",
     .vec = {0, 0, 0},
     .meaning = "Velocity of a thrown obstacle (mass > 0) at time 0."},
    {.key = "stiffness",
     .number = 0.0,
     .range = Range::atLeast(0),
     .rule = "> 0 needs response penalty; < 4 with an explicit integrator",
     .meaning = "Penalty stiffness kappa of this obstacle's springs, in the units of "
                "contact.stiffness (k = kappa m / dt_s^2); 0: contact.stiffness. A projectile "
                "much heavier than the nodes it meets needs kappa of about its mass over "
                "theirs to be stopped, which would make the meshes' own contact (and the "
                "floor) needlessly stiff for Newton's method."},
    {.key = "path",
     .kind = FieldKind::kObjectList,
     .object = "keyframe",
     .rule = "times strictly increasing",
     .meaning = "Scripted translation, piecewise linear between keyframes and held outside "
                "them; empty: the obstacle does not move."},
};

constexpr FieldSpec kPrimitiveFields[] = {
    {.key = "type",
     .kind = FieldKind::kChoice,
     .choices = kPrimitiveTypes,
     .required = true,
     .meaning = "Generated shape: a sheet in the xy plane, a sphere, a hemisphere open at z = 0 "
                "(dome up), a cylinder along z with open ends, or a box; all centred at the "
                "origin."},
    {.key = "size",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {1, 1, 1},
     .range = Range::atLeast(0),
     .variants = "sheet box",
     .rule = "sheet: x, y > 0; box: x, y, z > 0",
     .meaning = "Side lengths; a sheet uses x and y."},
    {.key = "radius",
     .unit = "m",
     .number = 0.5,
     .range = Range::above(0),
     .variants = "sphere hemisphere cylinder",
     .meaning = "Radius."},
    {.key = "height",
     .unit = "m",
     .number = 1.0,
     .range = Range::above(0),
     .variants = "cylinder",
     .meaning = "Length along z."},
    {.key = "caps",
     .kind = FieldKind::kChoice,
     .text = "off",
     .choices = kOnOff,
     .variants = "cylinder",
     .meaning = "`on`: both ends closed by flat discs meshed in rings of about the side's cell "
                "size (a closed can); `off`: open ends (a tube)."},
    {.key = "resolution",
     .kind = FieldKind::kInteger,
     .number = 16,
     .range = Range::closed(1, 2048),
     .meaning = "Subdivisions along the largest dimension."},
};

constexpr FieldSpec kTransformFields[] = {
    {.key = "scale",
     .kind = FieldKind::kNumberOrVec3,
     .vec = {1, 1, 1},
     .range = Range::above(0),
     .meaning = "Scale factors along x, y, z; one number scales uniformly. Applied first."},
    {.key = "rotation_degrees",
     .kind = FieldKind::kVec3,
     .unit = "deg",
     .vec = {0, 0, 0},
     .meaning = "Rotation about x, then y, then z (R = Rz Ry Rx). Applied after scaling."},
    {.key = "translation",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .meaning = "Translation, applied last."},
};

constexpr FieldSpec kMaterialFields[] = {
    {.key = "young_modulus",
     .unit = "Pa",
     .number = 1.0e6,
     .range = Range::above(0),
     .meaning = "Young's modulus E of the shell material."},
    {.key = "poisson",
     .number = 0.3,
     .range = Range::halfOpen(0, 0.5),
     .meaning = "Poisson ratio."},
    {.key = "thickness",
     .unit = "m",
     .number = 1.0e-3,
     .range = Range::above(0),
     .meaning = "Shell thickness."},
    {.key = "density",
     .unit = "kg/m^3",
     .number = 1000.0,
     .range = Range::above(0),
     .meaning = "Volumetric mass density of the material."},
    {.key = "damping",
     .unit = "1/s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .meaning = "Mass-proportional damping coefficient."},
    {.key = "internal_damping",
     .unit = "1/s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .meaning = "Internal friction: after every step the free nodes' velocities relative to the "
                "rigid motion of their piece (its momentum and angular momentum, fitted by mass) "
                "decay by exp(-internal_damping dt), so vibrations die out while flight, spin and "
                "bounces are kept (Muller et al. 2007, Position Based Dynamics, section 3.5); "
                "momentum and angular momentum are conserved. A solid hit hard rings without it."},
    {.key = "stiffness",
     .unit = "N/m",
     .range = Range::above(0),
     .optional = true,
     .meaning = "Raw stiffness that overrides the one derived from the material; "
                "mass_spring uses it as the spring constant."},
};

constexpr FieldSpec kRampFields[] = {
    {.key = "time",
     .unit = "s",
     .range = Range::atLeast(0),
     .required = true,
     .rule = "greater than the previous key's",
     .meaning = "When the factor is reached."},
    {.key = "value",
     .range = Range::any(),
     .required = true,
     .meaning = "Factor on the load at `time`; linear in between, constant outside."},
};

constexpr FieldSpec kLoadFields[] = {
    {.key = "shape",
     .kind = FieldKind::kChoice,
     .choices = kPinShapes,
     .required = true,
     .meaning = "Which nodes carry the load, chosen like a pin's."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "box sphere",
     .meaning = "Centre of the selecting shape."},
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
    {.key = "vertices",
     .kind = FieldKind::kIntegerList,
     .range = Range::closed(0, 2147483647.0),
     .variants = "vertices",
     .rule = "non-empty when shape is `vertices`",
     .meaning = "Indices of the loaded nodes."},
    {.key = "force",
     .kind = FieldKind::kVec3,
     .unit = "N",
     .vec = {0, 0, 0},
     .meaning = "Total force on the selected nodes, spread in proportion to their masses."},
    {.key = "ramp",
     .kind = FieldKind::kObjectList,
     .object = "ramp",
     .rule = "times strictly increasing",
     .meaning = "Factor on the force over time; empty: 1."},
};

constexpr FieldSpec kPressureFields[] = {
    {.key = "pressure",
     .unit = "Pa",
     .range = Range::any(),
     .required = true,
     .meaning = "Over-pressure: force p dA along each node's outward normal (of an open "
                "surface, the side its triangles wind counter-clockwise around; negative: "
                "suction)."},
    {.key = "ramp",
     .kind = FieldKind::kObjectList,
     .object = "ramp",
     .rule = "times strictly increasing",
     .meaning = "Factor on the pressure over time; empty: 1."},
    {.key = "release_on_fracture",
     .kind = FieldKind::kChoice,
     .text = "on",
     .choices = kOnOff,
     .meaning = "`on`: the gas escapes once a crack has formed (see `vent`)."},
    {.key = "vent",
     .kind = FieldKind::kChoice,
     .text = "exponential",
     .choices = kVentModels,
     .meaning = "How the gas escapes from the first crack on. `exponential`: the pressure "
                "falls as exp(-t / vent_time), whatever the crack. `orifice`: the gas (an "
                "ideal gas at constant temperature, p V constant but for what leaves) is sealed "
                "in at the first crack and its pressure follows the enclosed volume; it flows "
                "out through the openings at Q = C_d A sqrt(2 p / rho) (Bernoulli), A the "
                "area of the openings measured from the surface's area vectors (a closed "
                "surface's sum to zero; a torn one's to the openings' projected area): a tear "
                "that opens wide lets the gas out at once and the shell relaxes; through an "
                "opening the gas only leaves, so a torn skin that crumples does not compress "
                "it (the over-pressure stays at or under its lowest since sealing). The pump "
                "stops at the first crack, and p V = const softens the load as soon as the "
                "shell gives: a fiber balloon's first crack runs only with a crack-tip "
                "concentration (fracture.crack_tip_scale; without it fiber_balloon kept one "
                "crack and leaked at 5 of 6 samplings). Closed surfaces only (an open one "
                "encloses no gas of its own)."},
    {.key = "vent_time",
     .unit = "s",
     .number = 0.0,
     .range = Range::atLeast(0.0),
     .variants = "exponential",
     .meaning = "Time constant of the exponential vent: a balloon's tear opens while the gas "
                "is still pushing; 0: at once."},
    {.key = "ambient_pressure",
     .unit = "Pa",
     .number = 101325.0,
     .range = Range::above(0.0),
     .variants = "orifice",
     .meaning = "Absolute pressure outside; the gas inside is at ambient plus the over-pressure "
                "when it is sealed in."},
    {.key = "gas_density",
     .unit = "kg/m^3",
     .number = 1.2,
     .range = Range::above(0.0),
     .variants = "orifice",
     .meaning = "Density of the gas flowing out (air: 1.2; helium: 0.17)."},
    {.key = "discharge_coefficient",
     .number = 0.61,
     .range = Range::openClosed(0.0, 1.0),
     .variants = "orifice",
     .meaning = "C_d of the openings: the jet's contraction (a sharp-edged hole: 0.61)."},
};

constexpr FieldSpec kCropFields[] = {
    {.key = "shape",
     .kind = FieldKind::kChoice,
     .choices = kRegionShapes,
     .required = true,
     .meaning = "The part kept: inside a box or a sphere, in the input file's own coordinates "
                "(before the body's transform), so that it stays the same part wherever the "
                "body is placed."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .meaning = "Centre of the shape, in the input's coordinates."},
    {.key = "half_extents",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0.5, 0.5, 0.5},
     .range = Range::above(0),
     .variants = "box",
     .meaning = "Half side lengths of the box."},
    {.key = "radius",
     .unit = "m",
     .number = 0.5,
     .range = Range::above(0),
     .variants = "sphere",
     .meaning = "Radius of the sphere."},
};

constexpr FieldSpec kRepairFields[] = {
    {.key = "min_component_faces",
     .kind = FieldKind::kInteger,
     .number = 0,
     .range = Range::closed(0, 1e9),
     .meaning = "Drop connected components of fewer triangles (stray parts)."},
    {.key = "remesh_edge_length",
     .unit = "m",
     .number = 0.0,
     .range = Range::atLeast(0),
     .meaning = "Remesh isotropically to triangles of about this edge, in the body's size "
                "after its transform (slivers gone: the stable step follows the material and "
                "this size); 0 keeps the triangles."},
};

constexpr FieldSpec kRigidFragmentsFields[] = {
    {.key = "max_nodes",
     .kind = FieldKind::kInteger,
     .number = 64,
     .range = Range::closed(0, 1e9),
     .meaning = "A piece that broke off with at most this many nodes becomes rigid (not the "
                "body's largest piece, none with a pinned node); 0: none by size."},
    {.key = "still_speed",
     .unit = "m/s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .meaning = "A piece that broke off and deforms slower than this (the RMS speed of its "
                "nodes relative to its rigid motion) becomes rigid whatever its size; 0: off."},
    {.key = "friction",
     .number = 1.0,
     .range = Range::atLeast(0),
     .meaning = "Coulomb friction of the fragments. Bullet multiplies the coefficients of the "
                "two bodies in contact: on an obstacle, this times the obstacle's friction."},
    {.key = "restitution",
     .number = 0.0,
     .range = Range::closed(0, 1),
     .meaning = "Normal restitution of the fragments, multiplied by the obstacle's (Bullet)."},
};

constexpr FieldSpec kPinFields[] = {
    {.key = "shape",
     .kind = FieldKind::kChoice,
     .choices = kPinShapes,
     .required = true,
     .meaning = "How the pinned nodes are chosen: those inside a box or sphere (in world space, "
                "after the body's transform), or a list of node indices."},
    {.key = "center",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .vec = {0, 0, 0},
     .variants = "box sphere",
     .meaning = "Centre of the selecting shape."},
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
    {.key = "vertices",
     .kind = FieldKind::kIntegerList,
     .range = Range::closed(0, 2147483647.0),
     .variants = "vertices",
     .rule = "non-empty when shape is `vertices`",
     .meaning = "Indices of the pinned nodes."},
    {.key = "path",
     .kind = FieldKind::kObjectList,
     .object = "keyframe",
     .rule = "times strictly increasing",
     .meaning = "Scripted offset of the pinned nodes; empty: they stay where they start."},
    {.key = "release",
     .unit = "s",
     .range = Range::atLeast(0),
     .optional = true,
     .meaning = "The pin lets go of its nodes at this time (they keep the velocity they had, "
                "and a node another pin holds stays held); absent: it holds to the end."},
};

constexpr FieldSpec kBodyFields[] = {
    {.key = "name",
     .kind = FieldKind::kString,
     .text = "body<i>",
     .rule = "distinct; letters, digits, `_`, `-`, `.`; at most 64",
     .meaning = "Name used in messages and output file names; `<i>` is the body's index."},
    {.key = "file",
     .kind = FieldKind::kString,
     .optional = true,
     .rule = "exactly one of `file`, `primitive`; the file must exist",
     .meaning = "Geometry file (.obj, .ply, .off, .stl, .xyz); relative paths start at the "
                "scene file's folder."},
    {.key = "primitive",
     .kind = FieldKind::kObject,
     .object = "primitive",
     .optional = true,
     .meaning = "Generated geometry instead of a file."},
    {.key = "transform",
     .kind = FieldKind::kObject,
     .object = "transform",
     .meaning = "Placement of the geometry in the world."},
    {.key = "model",
     .kind = FieldKind::kChoice,
     .text = "mass_spring",
     .meaning = "The model that animates the body."},  // choices: modelNames()
    {.key = "material",
     .kind = FieldKind::kObject,
     .object = "material",
     .meaning = "Physical parameters."},
    // here: one options object per registered model (bodySpec())
    {.key = "pins",
     .kind = FieldKind::kObjectList,
     .object = "pin",
     .meaning = "Nodes held fixed or moved along a path."},
    {.key = "loads",
     .kind = FieldKind::kObjectList,
     .object = "load",
     .meaning = "Forces on regions of the body, possibly ramped over time."},
    {.key = "pressure",
     .kind = FieldKind::kObject,
     .object = "pressure",
     .optional = true,
     .meaning = "Gas pressure on the shell: inside a closed one (a balloon), or on one side of "
                "an open one (a sail, a sheet blown against a frame)."},
    {.key = "crop",
     .kind = FieldKind::kObject,
     .object = "crop",
     .optional = true,
     .meaning = "Make the body of a part of its input only: the vertices inside a box or "
                "sphere and, of a mesh, the triangles with all three corners inside (a mask cut "
                "from a scanned head). Before the repair and the transform; vertex indices "
                "then refer to the part."},
    {.key = "repair",
     .kind = FieldKind::kObject,
     .object = "repair",
     .optional = true,
     .meaning = "Repair the triangle mesh before the body is made (CGAL, as `shellsim "
                "repair`): coincident vertices merged, degenerate triangles dropped, "
                "orientation made consistent, non-manifold edges split; then these."},
    {.key = "rigid_fragments",
     .kind = FieldKind::kObject,
     .object = "rigid_fragments",
     .optional = true,
     .meaning = "Pieces that break off become rigid bodies in Bullet (steinemann section 4.3): "
                "they keep the piece's mass, momentum and angular momentum, and collide with "
                "the floor, the obstacles and each other on the piece's surface. They stay "
                "part of the body's frames, one colour per piece."},
    {.key = "initial_velocity",
     .kind = FieldKind::kVec3,
     .unit = "m/s",
     .vec = {0, 0, 0},
     .meaning = "Velocity of every node at the start."},
};

constexpr FieldSpec kTimeFields[] = {
    {.key = "duration",
     .unit = "s",
     .number = 2.0,
     .range = Range::openClosed(0, 1e6),
     .meaning = "Simulated time."},
    {.key = "frame_rate",
     .unit = "1/s",
     .number = 30.0,
     .range = Range::openClosed(0, 10000),
     .meaning = "Frames written per simulated second."},
    {.key = "time_step",
     .unit = "s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .rule = "<= 1 / frame_rate",
     .meaning = "Integration step; 0 chooses a step automatically (half the stable explicit "
                "step for `verlet` and explicit `newmark`, 20 times it for the implicit "
                "integrators, at most the frame interval)."},
    {.key = "min_time_step",
     .unit = "s",
     .number = 0.0,
     .range = Range::atLeast(0),
     .rule = "<= 1 / frame_rate",
     .meaning = "The smallest step the run may fall to: a frame that blows up is recomputed "
                "with half the step (up to 4 times), and a run whose step would fall below "
                "this stops with exit code 3 and the likely cause, rather than crawl. 0: 1e-5 "
                "of the frame interval (0.33 us at 30 fps)."},
    {.key = "integrator",
     .kind = FieldKind::kChoice,
     .text = "verlet",
     .choices = kIntegrators,
     .meaning = "`verlet`: explicit velocity Verlet (wicke2005). `newmark`: Newmark with "
                "`newmark_beta`, `newmark_gamma` (beta = 0 is explicit; 1/4, 1/2 the implicit "
                "average-acceleration rule). `backward_euler`: implicit Euler, dissipative. "
                "The implicit ones solve each step by Newton's method with the models' "
                "Hessians. `static`: equilibrium under gravity and the loads, raised in "
                "`load_increments` equal steps (a frame each), no inertia."},
    {.key = "load_increments",
     .kind = FieldKind::kInteger,
     .number = 10,
     .range = Range::closed(1, 100000),
     .meaning = "`static`: the load factor goes from 0 to 1 in this many increments, one frame "
                "each (frame i at time i / n of `duration`, where pins and ramps stand; "
                "`frame_rate` is not used). An increment whose Newton solve fails is split "
                "into halves, down to 1/64 of it."},
    {.key = "newmark_beta",
     .number = 0.25,
     .range = Range::closed(0, 0.5),
     .meaning = "Newmark beta."},
    {.key = "newmark_gamma",
     .number = 0.5,
     .range = Range::closed(0.5, 1),
     .meaning = "Newmark gamma; above 1/2 adds numerical damping."},
    {.key = "newton_tolerance",
     .number = 1e-6,
     .range = Range::openClosed(0, 1),
     .meaning = "Newton's method stops when the residual falls below this fraction of the "
                "step's force scale."},
    {.key = "newton_max_iterations",
     .kind = FieldKind::kInteger,
     .number = 30,
     .range = Range::closed(1, 1000),
     .meaning = "Newton iterations per step before the step counts as failed (and is "
                "retried with half the step)."},
    {.key = "newton_hessian",
     .kind = FieldKind::kChoice,
     .text = "frozen",
     .choices = kNewtonHessians,
     .meaning = "`frozen`: iterate with the last factorized Hessian, kept across steps, "
                "while each iteration at least halves the residual; after one that does not, "
                "the step continues with exact iterations, from the iterate before it if it "
                "raised the residual after a shortened line search (modified Newton: several "
                "times cheaper per step on stiff sheets, a little slower where the Hessian "
                "changes fast, as in a crushed can or a shattering sheet). `exact`: the current "
                "Hessian at every iteration "
                "(quadratic convergence). `quasi_newton`: first L-BFGS iterations on a fixed, "
                "rotation-invariant stand-in of the Hessian (a weighted graph Laplacian of the "
                "node couplings, factorized once), then `frozen` if those do not converge in "
                "15 (and later steps skip them while they keep failing): for bodies that swing "
                "or tumble while stretching dominates bending, with a loose "
                "`newton_tolerance` such as 1e-3. On bench_bullet's soft hanging sheet "
                "(backward Euler, 1/240 s) that is 4.7 times fewer ms per simulated second "
                "than `frozen` at the default 1e-6, the nodes within 0.3 mm of exact Newton "
                "(a fiber sheet's soft free corners within 1 cm). Stiff plates gain nothing: "
                "bending, which the stand-in lacks, dominates them."},
};

constexpr FieldSpec kOutputFields[] = {
    {.key = "folder",
     .kind = FieldKind::kString,
     .text = "out",
     .rule = "non-empty",
     .meaning = "Where frames are written; relative paths start at the working directory."},
    {.key = "formats",
     .kind = FieldKind::kChoiceList,
     .text = "[\"ply\"]",
     .choices = kFormats,
     .meaning = "Frame file formats: `ply`, `obj` and `vtp` write frames/<body>_<frame>.<ext>; "
                "`pc2` writes one point cache per body, cache/<body>.pc2 (float32 positions "
                "per frame, which Blender's Mesh Cache modifier, Houdini and Maya read onto "
                "the first frame's mesh), for as long as the body's surface keeps its "
                "topology: a body that breaks ends its cache there (the summary's "
                "`point_caches` says at which frame)."},
    {.key = "checkpoint_every",
     .kind = FieldKind::kInteger,
     .number = 1,
     .range = Range::closed(0, 1000000),
     .meaning = "Write `checkpoint.bin` (the state, atomically) after every this many frames, "
                "so that `shellsim run --resume` continues a killed run from the last one with "
                "byte-identical frames; 0: never."},
    {.key = "camera",
     .kind = FieldKind::kObject,
     .object = "camera",
     .optional = true,
     .meaning = "Camera of rendered previews (`shellsim render`, `run --preview`); absent: "
                "fitted to the bounds of the whole run."},
};

constexpr FieldSpec kCameraFields[] = {
    {.key = "eye",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .required = true,
     .meaning = "Where the camera is."},
    {.key = "target",
     .kind = FieldKind::kVec3,
     .unit = "m",
     .required = true,
     .rule = "differs from `eye`",
     .meaning = "The point at the centre of the picture."},
    {.key = "up",
     .kind = FieldKind::kVec3,
     .vec = {0, 0, 1},
     .rule = "not parallel to `target - eye`",
     .meaning = "Direction that points up in the picture."},
    {.key = "fov",
     .unit = "deg",
     .number = 40.0,
     .range = Range::closed(1, 179),
     .meaning = "Vertical field of view."},
};

constexpr FieldSpec kContactFields[] = {
    {.key = "enabled",
     .kind = FieldKind::kChoice,
     .text = "off",
     .choices = kOnOff,
     .meaning = "`on`: the triangle meshes of the bodies (inelastic_shell, discrete_shell, "
                "mass_spring, thick_shell) repel each other and themselves with penalty forces "
                "(gingold2004 section 4.3): vertex-face and edge-edge pairs closer than "
                "`thickness`, found with a bounding-volume hierarchy refit every step. Pairs "
                "of one body that share a node or lie within one edge length plus "
                "`thickness` of each other in the rest shape are left out (freshly cracked "
                "neighbours feel nothing). The fiber model's nodes do not take part, nor do rigid "
                "fragments (Bullet collides them with the obstacles and each other; they pass "
                "through the rest of the shell)."},
    {.key = "self",
     .kind = FieldKind::kChoice,
     .text = "on",
     .choices = kOnOff,
     .meaning = "`on`: each surface also collides with itself (folds, stacked layers)."},
    {.key = "thickness",
     .unit = "m",
     .number = 0.0,
     .range = Range::atLeast(0),
     .meaning = "Distance at which two surfaces touch; 0: for each pair, the mean of the two "
                "bodies' material thicknesses (mid-surfaces touch at h)."},
    {.key = "stiffness",
     .number = 0.25,
     .range = Range::above(0),
     .rule = "< 4 with an explicit integrator",
     .meaning = "Penalty stiffness as a fraction kappa of the explicit limit: a pair's spring is "
                "k = kappa m / dt_s^2, m the mass of its lighter side, dt_s the stable explicit "
                "step at the start (below 4 the penalty never limits an explicit step), or the "
                "planned step of an implicit integrator where it is larger. The energy "
                "1/2 k (thickness - d)^2 enters the implicit solves too; there kappa may be "
                "larger: a node then sags g dt^2 / kappa into what holds it, and a projectile "
                "much heavier than the nodes it meets needs kappa of about its mass over "
                "theirs to be stopped rather than plough through."},
    {.key = "reject_intersections",
     .kind = FieldKind::kChoice,
     .text = "on",
     .choices = kOnOff,
     .meaning = "`on`: a step that ends with intersecting triangles (exact predicates) is "
                "undone and retried in halves, down to 1/64 (gingold2004 section 4.2); at the "
                "deepest split it is accepted with a warning. A step that starts with "
                "intersections (so accepted, or given) is not rejected for them, since no split "
                "can undo them; the rule holds again once contact has pushed them apart."},
};

constexpr FieldSpec kSceneFields[] = {
    {.key = "gravity",
     .kind = FieldKind::kVec3,
     .unit = "m/s^2",
     .vec = {0, 0, -9.81},
     .meaning = "Uniform gravitational acceleration."},
    {.key = "obstacles",
     .kind = FieldKind::kObjectList,
     .object = "obstacle",
     .meaning = "Collision shapes the bodies cannot pass."},
    {.key = "bodies",
     .kind = FieldKind::kObjectList,
     .object = "body",
     .required = true,
     .rule = "at least one",
     .meaning = "The simulated shells."},
    {.key = "time",
     .kind = FieldKind::kObject,
     .object = "time",
     .meaning = "Run length and steps."},
    {.key = "contact",
     .kind = FieldKind::kObject,
     .object = "contact",
     .meaning = "Collisions between the bodies' surfaces."},
    {.key = "output",
     .kind = FieldKind::kObject,
     .object = "output",
     .meaning = "What is written and where."},
};

}  // namespace

constexpr ObjectSpec kSceneSpec{"scene", "The top-level object of a scene file.", kSceneFields};
constexpr ObjectSpec kObstacleSpec{"obstacle",
                                   "A rigid collision shape, at rest or moving along a path.",
                                   kObstacleFields, "type"};
constexpr ObjectSpec kKeyframeSpec{"keyframe", "One point of a scripted path.", kKeyframeFields};
constexpr ObjectSpec kPrimitiveSpec{"primitive", "A generated surface mesh.", kPrimitiveFields,
                                    "type"};
constexpr ObjectSpec kTransformSpec{"transform", "Scale, then rotate, then translate.",
                                    kTransformFields};
constexpr ObjectSpec kMaterialSpec{"material",
                                   "Physical parameters in SI units; each model "
                                   "documents how it maps them to its own stiffnesses.",
                                   kMaterialFields};
constexpr ObjectSpec kPinSpec{"pin", "Nodes held fixed, or moved along a scripted path.",
                              kPinFields, "shape"};
constexpr ObjectSpec kLoadSpec{"load", "A force on a region of a body.", kLoadFields, "shape"};
constexpr ObjectSpec kPressureSpec{"pressure",
                                   "Gas pressure on a shell, a follower load along its normals. "
                                   "On a closed shell (no boundary edge; a point cloud whose "
                                   "area vectors cancel to 5 %) the net force is zero, and what "
                                   "the sampling leaves is taken off in proportion to mass. An "
                                   "open surface keeps its net force: it is pushed as a whole.",
                                   kPressureFields, "vent"};
constexpr ObjectSpec kCropSpec{"crop", "The part of the input a body is made of.", kCropFields,
                               "shape"};
constexpr ObjectSpec kRepairSpec{"repair", "Mesh repair before a body is made.", kRepairFields};
constexpr ObjectSpec kRigidFragmentsSpec{
    "rigid_fragments", "Broken-off pieces as rigid bodies (Bullet).", kRigidFragmentsFields};
constexpr ObjectSpec kRampSpec{"ramp", "One key of a factor ramped over time.", kRampFields};
constexpr ObjectSpec kTimeSpec{"time", "How long to simulate and how often to write a frame.",
                               kTimeFields};
constexpr ObjectSpec kContactSpec{
    "contact", "Penalty contact between and within the bodies' meshes.", kContactFields};
constexpr ObjectSpec kOutputSpec{"output", "Frame files.", kOutputFields};
constexpr ObjectSpec kCameraSpec{"camera", "A pinhole camera for rendered previews.",
                                 kCameraFields};
#pragma GCC diagnostic pop

// Every model a body may name: the registry's (models/registry.hpp), in its order. The
// parser, its "did you mean" and the reference docs read this list.
std::span<const std::string_view> modelNames() {
  static std::vector<std::string_view> names;
  static uint64_t builtFor = 0;
  if (builtFor != modelRegistryVersion()) {
    names.clear();
    for (const ModelRegistration& model : modelRegistry()) names.push_back(model.name);
    builtFor = modelRegistryVersion();
  }
  return names;
}

// The body's table: kBodyFields with the model's choices from the registry and, after
// "material", one options object per registered model that has options.
const ObjectSpec& bodySpec() {
  static std::vector<FieldSpec> fields;
  static ObjectSpec spec{"body", "One simulated shell: its geometry, model and material.", {}, {}};
  static uint64_t builtFor = 0;
  if (builtFor == modelRegistryVersion()) return spec;
  fields.clear();
  for (const FieldSpec& field : kBodyFields) {
    fields.push_back(field);
    if (field.key == "model") fields.back().choices = modelNames();
    if (field.key != "material") continue;
    for (const ModelRegistration& model : modelRegistry()) {
      if (model.options == nullptr) continue;
      FieldSpec options;
      options.key = model.name;
      options.kind = FieldKind::kObject;
      options.object = model.options->name;
      options.meaning = model.meaning;
      fields.push_back(options);
    }
  }
  spec.fields = fields;
  builtFor = modelRegistryVersion();
  return spec;
}

// Document order: top-down, as a reader meets them in a file; each model's options after
// the material.
std::vector<const ObjectSpec*> allSpecs() {
  std::vector<const ObjectSpec*> specs = {&kSceneSpec, &bodySpec(), &kPrimitiveSpec,
                                          &kTransformSpec, &kMaterialSpec};
  for (const ModelRegistration& model : modelRegistry()) {
    if (model.options == nullptr) continue;
    specs.push_back(model.options);
    specs.insert(specs.end(), model.nestedOptions.begin(), model.nestedOptions.end());
  }
  specs.insert(specs.end(), {&kPinSpec, &kLoadSpec, &kPressureSpec, &kCropSpec, &kRepairSpec,
                             &kRigidFragmentsSpec, &kRampSpec, &kObstacleSpec, &kKeyframeSpec,
                             &kTimeSpec, &kContactSpec, &kOutputSpec, &kCameraSpec});
  return specs;
}

// The scene of `shellsim run` without a scene file; scenes/default.json holds the same.
const std::string_view kDefaultSceneJson = R"({
  "gravity": [0, 0, -9.81],
  "obstacles": [
    {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1], "friction": 0.5},
    {"type": "sphere", "center": [0, 0, 0.35], "radius": 0.3, "friction": 0.4}
  ],
  "bodies": [
    {
      "name": "sheet",
      "primitive": {"type": "sheet", "size": [1, 1, 0], "resolution": 24},
      "transform": {"translation": [0, 0, 0.8]},
      "model": "fiber",
      "material": {
        "young_modulus": 1e6,
        "poisson": 0.3,
        "thickness": 0.001,
        "density": 300,
        "damping": 0.5
      }
    }
  ],
  "time": {"duration": 3, "frame_rate": 30, "time_step": 0},
  "output": {"folder": "out/default", "formats": ["ply"]}
}
)";

}  // namespace shellsim::scene_schema
