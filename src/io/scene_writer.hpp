// Scene definitions back to JSON, in the keys and words the scene reader takes
// (scene.cpp): parseScene(sceneToJson(s)) gives s again.
//
// Private to the library: nlohmann::json must not appear in public headers.
#pragma once

#include <nlohmann/json.hpp>

#include "shellsim/scene.hpp"

namespace shellsim::scene_writer {

using Json = nlohmann::json;

[[nodiscard]] Json toJson(const BodyDef& body);
[[nodiscard]] Json toJson(const ObstacleDef& obstacle);
[[nodiscard]] Json toJson(const TimeDef& time);
[[nodiscard]] Json toJson(const OutputDef& output);
[[nodiscard]] Json toJson(const SceneDef& scene);

}  // namespace shellsim::scene_writer
