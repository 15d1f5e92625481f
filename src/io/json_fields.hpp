// Reading JSON objects against field tables: one description per key (type, unit, default,
// valid range, meaning) drives both the parser's checks and the generated reference docs,
// so the two cannot drift apart.
//
// Private to the library: nlohmann::json must not appear in public headers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shellsim::json_fields {

using Json = nlohmann::json;
using Vec3 = std::array<double, 3>;

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A closed, open or half-open interval of allowed numbers; infinite ends are unbounded.
// Every number must also be finite, whatever the range.
struct Range {
  double lo = -kInf;
  double hi = kInf;
  bool loOpen = false;  // true: lo itself is not allowed
  bool hiOpen = false;

  [[nodiscard]] static constexpr Range any() { return {}; }
  [[nodiscard]] static constexpr Range above(double v) { return {v, kInf, true, false}; }
  [[nodiscard]] static constexpr Range atLeast(double v) { return {v, kInf, false, false}; }
  [[nodiscard]] static constexpr Range closed(double a, double b) { return {a, b, false, false}; }
  [[nodiscard]] static constexpr Range halfOpen(double a, double b) { return {a, b, false, true}; }
  [[nodiscard]] static constexpr Range openClosed(double a, double b) {
    return {a, b, true, false};
  }

  [[nodiscard]] bool contains(double v) const;
  [[nodiscard]] bool unbounded() const { return lo == -kInf && hi == kInf; }
  // "> 0", ">= 0", "[0, 0.5)", "(0, 1e+06]"; empty when unbounded.
  [[nodiscard]] std::string describe() const;
};

enum class FieldKind {
  kNumber,        // a finite number checked against `range`
  kInteger,       // an integer checked against `range`
  kVec3,          // [x, y, z], each component checked against `range`
  kNumberOrVec3,  // a number (used for all three components) or [x, y, z]
  kString,        // free text
  kChoice,        // one of `choices`
  kChoiceList,    // list of distinct entries of `choices`
  kIntegerList,   // list of integers, each checked against `range`
  kObject,        // a nested object described by the table named `object`
  kObjectList,    // a list of such objects
};

// One key of a JSON object. Designated initializers keep the tables readable.
struct FieldSpec {
  std::string_view key;
  FieldKind kind = FieldKind::kNumber;
  std::string_view unit;  // SI unit, e.g. "Pa", "m/s^2"; empty for dimensionless
  double number = 0;      // default of kNumber / kInteger
  Vec3 vec{0, 0, 0};      // default of kVec3 / kNumberOrVec3
  std::string_view text;  // default of kString / kChoice (for kChoiceList: as shown)
  Range range;            // numbers, integers, vector components
  std::span<const std::string_view> choices;  // kChoice, kChoiceList
  std::string_view object;                    // kObject, kObjectList: name of the nested table
  std::string_view variants;  // space separated values of the object's `type`/`shape`
                              // that use this key; empty: all of them
  bool required = false;      // no default: the key must be given
  bool optional = false;      // no default: absent means "not set"
  std::string_view rule;      // extra checks made by the caller, for the docs
  std::string_view meaning;
};

// A JSON object kind: its fields and what it is for.
struct ObjectSpec {
  std::string_view name;         // heading and anchor in the docs, e.g. "material"
  std::string_view description;  // paragraph under the heading
  std::span<const FieldSpec> fields;
  std::string_view variantKey;  // key whose value selects `FieldSpec::variants`, if any
};

// Collects problems, each rendered as one line "<source>: <path> = <value>: <reason>".
class Problems {
 public:
  explicit Problems(std::string sourceName) : source_(std::move(sourceName)) {}

  void add(std::string_view path, const Json& value, std::string_view reason);
  void add(std::string_view path, std::string_view reason);

  [[nodiscard]] bool empty() const { return lines_.empty(); }
  // True once further problems are only counted; callers may skip costly messages.
  [[nodiscard]] bool full() const { return lines_.size() >= kMaxLines; }
  [[nodiscard]] const std::vector<std::string>& lines() const { return lines_; }
  [[nodiscard]] const std::string& source() const { return source_; }
  // Throws InputError with one line per problem when there are any.
  void throwIfAny() const;

 private:
  // A fuzzed or badly broken file can hold thousands of problems; past this many, the
  // message only counts them, so it stays readable.
  static constexpr std::size_t kMaxLines = 50;

  std::string source_;
  std::vector<std::string> lines_;
  std::size_t dropped_ = 0;  // beyond kMaxLines, counted but not rendered
};

// Reads one JSON object against its ObjectSpec. Each getter returns the value or, when the
// key is absent or bad, the default from the table (recording a problem if bad); callers
// therefore always get something usable and go on checking the rest of the scene.
class ObjectReader {
 public:
  // `value` may be null (the key holding this object was absent): all getters give defaults.
  // A non-object value is reported once and treated as absent.
  ObjectReader(const Json* value, std::string path, const ObjectSpec& spec, Problems& problems);
  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;

  [[nodiscard]] bool has(std::string_view key) const { return find(key) != nullptr; }
  [[nodiscard]] std::string pathOf(std::string_view key) const;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const Json* find(std::string_view key) const;

  // The try* getters return nothing when the key is absent or its value is bad (and then
  // reported); the others fall back to the table's default.
  std::optional<double> tryNumber(std::string_view key);
  double number(std::string_view key);
  int32_t integer(std::string_view key);
  std::optional<Vec3> tryVec3(std::string_view key);
  Vec3 vec3(std::string_view key);  // kVec3 and kNumberOrVec3
  std::optional<std::string> tryString(std::string_view key);
  std::string string(std::string_view key);
  std::string choice(std::string_view key);  // one of the spec's choices
  std::vector<std::string> choiceList(std::string_view key);
  std::vector<int32_t> integerList(std::string_view key);
  // The elements of a list of objects with their paths; non-objects are reported and skipped.
  struct Element {
    const Json* value;
    std::string path;
    std::size_t index;  // position in the list
  };
  std::vector<Element> objectList(std::string_view key);
  // A reader for the nested object under `key` (absent: all defaults).
  [[nodiscard]] ObjectReader object(std::string_view key, const ObjectSpec& spec);

  // Reports keys the spec does not know (with a "did you mean") and keys that the chosen
  // variant (e.g. obstacle type "sphere") does not use. Call once, after reading.
  void finish(std::string_view variant = {});

  [[nodiscard]] Problems& problems() { return problems_; }

 private:
  const FieldSpec& spec(std::string_view key, std::initializer_list<FieldKind> kinds) const;
  bool checkNumber(const std::string& path, const Json& v, const Range& range, bool integer);

  const Json* object_ = nullptr;
  std::string path_;
  const ObjectSpec& spec_;
  Problems& problems_;
};

// Damerau-Levenshtein (optimal string alignment) distance after folding case and
// camelCase to snake_case, so "youngModulus" is close to "young_modulus".
[[nodiscard]] std::size_t editDistance(std::string_view a, std::string_view b);
// The closest candidate within a small distance of `word`, or empty.
[[nodiscard]] std::string_view closest(std::string_view word,
                                       std::span<const std::string_view> candidates);
// " (did you mean 'x'?)"-style suffix or a list of the candidates when none is close.
[[nodiscard]] std::string suggestion(std::string_view word,
                                     std::span<const std::string_view> candidates);

// `base.key`, or `base["odd key"]` for a key that is not a plain snake_case word.
[[nodiscard]] std::string childPath(std::string_view base, std::string_view key);

// Shortest text that reads back as `v`; integers up to 1e7 without exponent.
[[nodiscard]] std::string formatNumber(double v);
// A JSON value as shown in a problem line: compact, at most ~60 bytes.
[[nodiscard]] std::string showValue(const Json& v);

// Markdown section for one object: heading, description, table of fields.
[[nodiscard]] std::string markdownSection(const ObjectSpec& spec);

}  // namespace shellsim::json_fields
