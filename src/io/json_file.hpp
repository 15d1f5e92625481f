// Reading a JSON file shellsim wrote itself (a run's summary.json, a sweep's sweep.json):
// no size or depth limits, unlike the scene reader's json_guard. Private to the library.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace shellsim {

// IoError when the file cannot be read, InputError (naming the file and where the parser
// stopped) when it is not JSON.
[[nodiscard]] nlohmann::json readJsonFile(const std::filesystem::path& path);

}  // namespace shellsim
