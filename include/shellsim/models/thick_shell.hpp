// Options of the thick-shell model (steinemann): a body's `"thick_shell": {...}` in a scene
// file, body.options<ThickShellDef>() in code. src/models/thick_shell/
// thick_shell_registration.cpp reads, writes and documents them. The material's thickness is
// the shell's depth epsilon (thicken.hpp), reached where the surface leaves room for it.
#pragma once

#include <cstdint>
#include <string_view>

namespace shellsim {

struct ThickShellDef {
  static constexpr std::string_view kModel = "thick_shell";
  int32_t layers = 2;            // 1: springs on S only; 2: S and S', internal and cross springs
  double extrusionFactor = 1;    // f: the physics' S' lies f times deeper than the drawn one
  bool frontPropagation = true;  // generation: front (true) or single-vertex propagation
  int32_t steps = 5;             // generation: k
  double areaStiffness = 1;      // area terms (two layers), relative to E A h / 2
  double volumeStiffness = 1;    // volume terms (two layers), relative to E V
  bool operator==(const ThickShellDef&) const = default;
};

}  // namespace shellsim
