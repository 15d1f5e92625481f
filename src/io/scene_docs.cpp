// `shellsim scene-reference`: docs/scene-reference.md from the schema's field tables and the
// models' registrations (a test fails when the file drifts from it).
#include <string>

#include "io/scene_schema.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

using scene_schema::allSpecs;
using scene_schema::kDefaultSceneJson;
using scene_schema::modelNames;

std::string sceneReferenceMarkdown() {
  std::string out =
      "# Scene file reference\n"
      "\n"
      "<!-- Generated from the field tables in src/io/scene.cpp and the models' registrations\n"
      "     (src/models/*/*_registration.cpp) by `shellsim scene-reference >\n"
      "     docs/scene-reference.md`; do not edit by hand. A test fails when it drifts. -->\n"
      "\n"
      "A scene file is a JSON object. Keys are snake_case; every value is in SI units (angles\n"
      "in degrees) and every key has a default unless it is marked *required*. Before a run,\n"
      "the whole file is checked and every problem is reported at once, one per line, with\n"
      "the path of the value and the reason:\n"
      "\n"
      "```\n"
      "scene.json: bodies[0].material.poisson = 0.7: must be in [0, 0.5)\n"
      "scene.json: bodies[0].materal: unknown key; did you mean 'material'?\n"
      "```\n"
      "\n"
      "Unknown keys, keys given twice, keys that the chosen `type` or `shape` does not use,\n"
      "wrong types and non-finite numbers are errors. Models: " +
      [] {
        std::string models;
        for (const std::string_view name : modelNames()) {
          if (!models.empty()) models += ", ";
          models += "`" + std::string(name) + "`";
        }
        return models;
      }() +
      ".\n"
      "\n"
      "## Example\n"
      "\n"
      "The built-in default scene (`scenes/default.json`), a fiber-shell sheet dropped onto a "
      "sphere:\n"
      "\n"
      "```json\n" +
      std::string(kDefaultSceneJson) + "```\n";
  for (const json_fields::ObjectSpec* spec : allSpecs())
    out += "\n" + json_fields::markdownSection(*spec);
  return out;
}

}  // namespace shellsim
