// The words a scene file uses for each enumeration, in the order of the enum's values:
// shared by the scene reader (scene.cpp) and the writer (scene_writer.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shellsim::scene_names {

inline constexpr std::string_view kObstacleTypes[] = {"plane", "sphere", "box"};
inline constexpr std::string_view kObstacleResponses[] = {"projection", "penalty"};
inline constexpr std::string_view kPrimitiveTypes[] = {"sheet", "sphere", "hemisphere", "cylinder",
                                                       "box"};
inline constexpr std::string_view kPinShapes[] = {"box", "sphere", "vertices"};
inline constexpr std::string_view kFormats[] = {"ply", "obj", "vtp", "pc2"};
inline constexpr std::string_view kIntegrators[] = {"verlet", "newmark", "backward_euler",
                                                    "static"};
inline constexpr std::string_view kNewtonHessians[] = {"frozen", "exact", "quasi_newton"};
inline constexpr std::string_view kHessianKinds[] = {"exact", "projected"};
inline constexpr std::string_view kRegionShapes[] = {"box", "sphere"};
inline constexpr std::string_view kOnOff[] = {"on", "off"};
inline constexpr std::string_view kVentModels[] = {"exponential", "orifice"};

// The enum value whose word is `s`, or `fallback` (the reader has already reported a word
// that is not one of `names`).
template <class Enum, std::size_t N>
Enum toEnum(const std::string& s, const std::string_view (&names)[N], Enum fallback) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<Enum>(i);
  }
  return fallback;
}

}  // namespace shellsim::scene_names
