// The scene file's schema: the field tables of every object (what each key means, its unit,
// default and valid range), read by the parser (scene.cpp) and the reference docs
// (scene_docs.cpp), so the two cannot drift apart. Each model's own options are in its
// registration (models/registry.hpp). Private to the library.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "io/json_fields.hpp"

namespace shellsim::scene_schema {

extern const json_fields::ObjectSpec kSceneSpec;
extern const json_fields::ObjectSpec kObstacleSpec;
extern const json_fields::ObjectSpec kKeyframeSpec;
extern const json_fields::ObjectSpec kPrimitiveSpec;
extern const json_fields::ObjectSpec kTransformSpec;
extern const json_fields::ObjectSpec kMaterialSpec;
extern const json_fields::ObjectSpec kPinSpec;
extern const json_fields::ObjectSpec kLoadSpec;
extern const json_fields::ObjectSpec kPressureSpec;
extern const json_fields::ObjectSpec kCropSpec;
extern const json_fields::ObjectSpec kRepairSpec;
extern const json_fields::ObjectSpec kRigidFragmentsSpec;
extern const json_fields::ObjectSpec kRampSpec;
extern const json_fields::ObjectSpec kTimeSpec;
extern const json_fields::ObjectSpec kContactSpec;
extern const json_fields::ObjectSpec kOutputSpec;
extern const json_fields::ObjectSpec kCameraSpec;
// The body's table: with the model choices and one options object per registered model
// (rebuilt when the registry changed).
[[nodiscard]] const json_fields::ObjectSpec& bodySpec();
// Every registered model's name, in registration order.
[[nodiscard]] std::span<const std::string_view> modelNames();
// Every object's table in document order (top-down, as a reader meets them in a file).
[[nodiscard]] std::vector<const json_fields::ObjectSpec*> allSpecs();
// The scene of `shellsim run` without a scene file; scenes/default.json holds the same.
extern const std::string_view kDefaultSceneJson;

}  // namespace shellsim::scene_schema
