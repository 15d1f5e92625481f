// Options of the thick-shell model (steinemann): a body's `"thick_shell": {...}` in a scene
// file, body.options<ThickShellDef>() in code. src/models/thick_shell/
// thick_shell_registration.cpp reads, writes and documents them. The material's thickness is
// the shell's depth epsilon (thicken.hpp), reached where the surface leaves room for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shellsim {

// Fracture (steinemann section 4.2) of a thick shell: a spring of the outer surface S
// stretched past (1 + stretch) or squeezed past (1 - compress) of its rest length splits one
// of its ends along the plane normal to it (a vertex split; with two layers the vertex's node
// on S' splits with it).
struct ThickShellFractureDef {
  double stretch = 0.1;   // tau+, > 0
  double compress = 0;    // tau-, >= 0; 0: squeezing never breaks
  bool coarse = false;    // coarse-grained: new cracks only at crack tips once one has split
  int32_t maxSplits = 8;  // vertex splits per step at most (crack frequency)
  double extension = 0;   // m: a new crack runs on along its plane this far (0: off)
  double scatter = 0;     // each spring's thresholds times 1 + scatter u, u in [-1, 1] (seeded)
  uint64_t seed = 1;      // the endpoint to split when neither or both are crack tips
  // Local re-meshing (section 4.2.3, Fig. 5): a split cuts the triangles its plane crosses,
  // so cracks run along the plane instead of along the mesh's edges; only where the cut
  // lands at least remeshMinFraction of a side from its ends and makes no angle below
  // remeshMinAngle (degrees).
  bool remesh = false;
  double remeshMinAngle = 20;
  double remeshMinFraction = 0.25;
  // Extended cracks: each new tip's plane turned by a seeded angle within +-bump degrees
  // about the surface normal (section 4.2.3: "bumpy, but not jagged cracks"); 0: straight.
  double bump = 0;
  bool operator==(const ThickShellFractureDef&) const = default;
};

struct ThickShellDef {
  static constexpr std::string_view kModel = "thick_shell";
  int32_t layers = 2;            // 1: springs on S only; 2: S and S', internal and cross springs
  double extrusionFactor = 1;    // f: the physics' S' lies f times deeper than the drawn one
  bool frontPropagation = true;  // generation: front (true) or single-vertex propagation
  int32_t steps = 5;             // generation: k
  double areaStiffness = 1;      // area terms (two layers), relative to E A h / 2
  double volumeStiffness = 1;    // volume terms (two layers), relative to E V
  // Frames: each piece drawn at the rigid motion best fitting its nodes (brittle look)
  // instead of deformed.
  bool brittle = false;
  std::optional<ThickShellFractureDef> fracture;  // none: never breaks
  bool operator==(const ThickShellDef&) const = default;
};

}  // namespace shellsim
