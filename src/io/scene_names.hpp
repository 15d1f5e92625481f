// The words a scene file uses for each enumeration, in the order of the enum's values:
// shared by the scene reader (scene.cpp) and the writer (scene_writer.cpp).
#pragma once

#include <string_view>

namespace shellsim::scene_names {

inline constexpr std::string_view kObstacleTypes[] = {"plane", "sphere", "box"};
inline constexpr std::string_view kPrimitiveTypes[] = {"sheet", "sphere", "hemisphere", "cylinder",
                                                       "box"};
inline constexpr std::string_view kPinShapes[] = {"box", "sphere", "vertices"};
inline constexpr std::string_view kFormats[] = {"ply", "obj", "vtp"};
inline constexpr std::string_view kIntegrators[] = {"verlet", "newmark", "backward_euler",
                                                    "static"};
inline constexpr std::string_view kNewtonHessians[] = {"frozen", "exact"};
inline constexpr std::string_view kHessianKinds[] = {"exact", "projected"};
inline constexpr std::string_view kRegionShapes[] = {"box", "sphere"};
inline constexpr std::string_view kOnOff[] = {"on", "off"};

}  // namespace shellsim::scene_names
