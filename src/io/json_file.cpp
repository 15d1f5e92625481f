#include "io/json_file.hpp"

#include <fstream>
#include <sstream>

#include "shellsim/errors.hpp"

namespace shellsim {

std::string readTextFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(path.string() + ": read failed");
  return text.str();
}

nlohmann::json readJsonFile(const std::filesystem::path& path) {
  const std::string text = readTextFile(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path.string() + ": not JSON: " + e.what());
  }
}

}  // namespace shellsim
