#include "io/json_guard.hpp"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shellsim/errors.hpp"

namespace shellsim::json_guard {
namespace {

using json_fields::Json;
using json_fields::Problems;

// Checks the structure in one SAX pass: nlohmann's SAX parser is iterative, so depth can
// be capped here before the DOM parse and the recursive code after it see the input.
// Duplicate keys matter because nlohmann keeps the last silently.
class StructureCheck {
 public:
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(Json::number_integer_t) { return value(); }
  bool number_unsigned(Json::number_unsigned_t) { return value(); }
  bool number_float(Json::number_float_t, const std::string&) { return value(); }
  bool string(std::string&) { return value(); }
  bool binary(Json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(true); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    Frame& top = frames_.back();
    top.key = k;
    if (!top.keys.insert(k).second) duplicates.push_back(childPath());
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    errorPosition = position;
    errorMessage = e.what();
    return false;
  }

  bool tooDeep = false;
  std::size_t errorPosition = 0;
  std::string errorMessage;
  std::vector<std::string> duplicates;  // paths of keys given twice in one object

 private:
  struct Frame {
    bool array = false;
    std::string path;
    std::size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };

  std::string childPath() const {
    if (frames_.empty()) return {};
    const Frame& top = frames_.back();
    if (top.array) return top.path + "[" + std::to_string(top.index) + "]";
    return json_fields::childPath(top.path, top.key);
  }
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool open(bool array) {
    if (frames_.size() >= kMaxDepth) {
      tooDeep = true;
      return false;
    }
    Frame frame;
    frame.array = array;
    frame.path = childPath();
    frames_.push_back(std::move(frame));
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }

  std::vector<Frame> frames_;
};

// "scene.json:3:14:" for the byte nlohmann stopped at (1-based position of the last read).
std::string location(const std::string& text, std::size_t position) {
  const std::size_t at = std::min(position > 0 ? position - 1 : 0, text.size());
  std::size_t line = 1;
  std::size_t lineStart = 0;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  }
  return std::to_string(line) + ":" + std::to_string(at - lineStart + 1);
}

// nlohmann's message without its "[json.exception...] parse error at line l, column c: "
// prefix, which would repeat the location, and on one line.
std::string syntaxReason(const std::string& what) {
  std::string reason = what;
  if (!reason.empty() && reason.front() == '[') {
    const std::size_t close = reason.find("] ");
    if (close != std::string::npos) reason = reason.substr(close + 2);
  }
  if (reason.rfind("parse error", 0) == 0) {
    const std::size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
  }
  for (char& c : reason) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return reason;
}

}  // namespace

Json parseJson(const std::string& text, const std::string& source, Problems& problems) {
  if (text.size() > kMaxSceneBytes) {
    throw InputError(source + ": " + std::to_string(text.size()) +
                     " bytes is too large for a scene file (at most " +
                     std::to_string(kMaxSceneBytes) + ")");
  }
  StructureCheck check;
  const bool ok = Json::sax_parse(text, &check);
  if (check.tooDeep) {
    throw InputError(source + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (!ok) {
    throw InputError(source + ":" + location(text, check.errorPosition) +
                     ": invalid JSON: " + syntaxReason(check.errorMessage));
  }
  for (const std::string& path : check.duplicates) {
    problems.add(path, "key given more than once (only one may be given)");
  }
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    // The SAX pass accepted the same text, so this is not expected; still an input error.
    throw InputError(source + ": invalid JSON: " + syntaxReason(e.what()));
  }
}

}  // namespace shellsim::json_guard
