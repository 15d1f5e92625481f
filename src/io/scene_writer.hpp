// Scene definitions back to JSON, in the keys and words the scene reader takes
// (scene.cpp): parseScene(sceneToJson(s)) gives s again.
//
// Private to the library: nlohmann::json must not appear in public headers.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "shellsim/scene.hpp"

namespace shellsim::scene_writer {

using Json = nlohmann::json;

// Pieces the models' writers share (models/*/*_registration.cpp).
[[nodiscard]] Json vec(const Vec3d& v);
[[nodiscard]] std::string onOff(bool on);
// The word of an enum value: the names arrays list them in the order of the values.
template <class Enum, std::size_t N>
[[nodiscard]] std::string word(Enum value, const std::string_view (&names)[N]) {
  return std::string(names[static_cast<std::size_t>(value)]);
}

[[nodiscard]] Json toJson(const BodyDef& body);
[[nodiscard]] Json toJson(const ObstacleDef& obstacle);
[[nodiscard]] Json toJson(const TimeDef& time);
[[nodiscard]] Json toJson(const ContactDef& contact);
[[nodiscard]] Json toJson(const OutputDef& output);
[[nodiscard]] Json toJson(const SceneDef& scene);

}  // namespace shellsim::scene_writer
