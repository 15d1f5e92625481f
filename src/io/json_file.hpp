// Reading whole files: any file as text, and a JSON file shellsim wrote itself (a run's
// summary.json, a sweep's sweep.json), without the size or depth limits of the scene
// reader's json_guard. Private to the library.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace shellsim {

// The whole file as bytes; IoError naming it when it cannot be opened or read.
[[nodiscard]] std::string readTextFile(const std::filesystem::path& path);

// IoError when the file cannot be read, InputError (naming the file and where the parser
// stopped) when it is not JSON.
[[nodiscard]] nlohmann::json readJsonFile(const std::filesystem::path& path);

}  // namespace shellsim
