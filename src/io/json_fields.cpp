#include "io/json_fields.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "shellsim/errors.hpp"

namespace shellsim::json_fields {
namespace {

constexpr std::size_t kMaxShownValue = 60;  // bytes of a value shown in a problem line

std::string indexPath(std::string_view base, std::size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

// "must be > 0" / "must be in [0, 0.5)".
std::string mustBe(const Range& range) {
  const std::string d = range.describe();
  if (!d.empty() && (d.front() == '[' || d.front() == '(')) return "must be in " + d;
  return "must be " + d;
}

std::string quotedList(std::span<const std::string_view> words, std::string_view quote) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += ", ";
    out += quote;
    out += words[i];
    out += quote;
  }
  return out;
}

std::vector<std::string_view> splitWords(std::string_view s) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) words.push_back(s.substr(i, j - i));
    i = j;
  }
  return words;
}

std::string normalizeKey(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 4);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0 && ((s[i - 1] >= 'a' && s[i - 1] <= 'z') || (s[i - 1] >= '0' && s[i - 1] <= '9')))
        out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else if (c == '-' || c == ' ') {
      out += '_';
    } else {
      out += c;
    }
  }
  return out;
}

std::string escapeTableCell(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string formatVec(const Vec3& v) {
  return "[" + formatNumber(v[0]) + ", " + formatNumber(v[1]) + ", " + formatNumber(v[2]) + "]";
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Paths

std::string childPath(std::string_view base, std::string_view key) {
  const bool plain =
      !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
      });
  std::string out(base);
  if (plain) {
    if (!out.empty()) out += '.';
    out += key;
  } else {
    // Quoted, escaped and shortened, so a key with a newline or a megabyte of text still
    // gives a one-line, readable problem.
    out += "[" + showValue(Json(std::string(key))) + "]";
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Range

bool Range::contains(double v) const {
  if (!std::isfinite(v)) return false;
  if (loOpen ? !(v > lo) : !(v >= lo)) return false;
  if (hiOpen ? !(v < hi) : !(v <= hi)) return false;
  return true;
}

std::string Range::describe() const {
  const bool hasLo = lo != -kInf;
  const bool hasHi = hi != kInf;
  if (hasLo && hasHi) {
    return std::string(loOpen ? "(" : "[") + formatNumber(lo) + ", " + formatNumber(hi) +
           (hiOpen ? ")" : "]");
  }
  if (hasLo) return std::string(loOpen ? "> " : ">= ") + formatNumber(lo);
  if (hasHi) return std::string(hiOpen ? "< " : "<= ") + formatNumber(hi);
  return {};
}

// ---------------------------------------------------------------------------------------
// Formatting

std::string formatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e7) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, result.ptr);
}

std::string showValue(const Json& v) {
  if (v.is_number_float()) return formatNumber(v.get<double>());
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > kMaxShownValue) {
    std::size_t n = kMaxShownValue;
    // Cut at a character boundary, not inside a UTF-8 sequence.
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0U) == 0x80U) --n;
    s.resize(n);
    s += "...";
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// Edit distance and suggestions

std::size_t editDistance(std::string_view aRaw, std::string_view bRaw) {
  const std::string a = normalizeKey(aRaw);
  const std::string b = normalizeKey(bRaw);
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  // Three rolling rows of the optimal-string-alignment table: O(m) memory, so a huge
  // fuzzed key against a short candidate stays cheap.
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::string_view closest(std::string_view word, std::span<const std::string_view> candidates) {
  // Keys longer than any candidate by this much cannot be a typo of one.
  constexpr std::size_t kMaxDistance = 3;
  std::string_view best;
  std::size_t bestDistance = kMaxDistance + 1;
  for (const std::string_view candidate : candidates) {
    if (word.size() > candidate.size() + 2 * kMaxDistance) continue;
    const std::size_t allowed = std::clamp<std::size_t>(candidate.size() / 3, 1, kMaxDistance);
    const std::size_t d = editDistance(word, candidate);
    if (d <= allowed && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

std::string suggestion(std::string_view word, std::span<const std::string_view> candidates) {
  const std::string_view best = closest(word, candidates);
  if (!best.empty()) return "did you mean '" + std::string(best) + "'?";
  return "expected one of " + quotedList(candidates, "'");
}

// ---------------------------------------------------------------------------------------
// Problems

void Problems::add(std::string_view path, const Json& value, std::string_view reason) {
  if (full()) {
    ++dropped_;
    return;
  }
  std::string line = source_ + ": ";
  if (!path.empty()) {
    line += path;
    line += " = ";
  }
  line += showValue(value);
  line += ": ";
  line += reason;
  lines_.push_back(std::move(line));
}

void Problems::add(std::string_view path, std::string_view reason) {
  if (full()) {
    ++dropped_;
    return;
  }
  std::string line = source_ + ": ";
  if (!path.empty()) {
    line += path;
    line += ": ";
  }
  line += reason;
  lines_.push_back(std::move(line));
}

void Problems::throwIfAny() const {
  if (lines_.empty()) return;
  std::string message;
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    if (i > 0) message += '\n';
    message += lines_[i];
  }
  if (dropped_ > 0) {
    message += '\n' + source_ + ": ... and " + std::to_string(dropped_) + " more problems";
  }
  throw InputError(message);
}

// ---------------------------------------------------------------------------------------
// ObjectReader

ObjectReader::ObjectReader(const Json* value, std::string path, const ObjectSpec& spec,
                           Problems& problems)
    : path_(std::move(path)), spec_(spec), problems_(problems) {
  if (value == nullptr) return;
  if (value->is_object()) {
    object_ = value;
  } else {
    problems_.add(path_, *value, "must be an object");
  }
}

std::string ObjectReader::pathOf(std::string_view key) const {
  return childPath(path_, key);
}

const Json* ObjectReader::find(std::string_view key) const {
  if (object_ == nullptr) return nullptr;
  const auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

const FieldSpec& ObjectReader::spec(std::string_view key,
                                    std::initializer_list<FieldKind> kinds) const {
  for (const FieldSpec& field : spec_.fields) {
    if (field.key != key) continue;
    if (std::find(kinds.begin(), kinds.end(), field.kind) == kinds.end()) break;
    return field;
  }
  // A mismatch between the parser and its own tables: a bug, not bad input.
  throw std::logic_error("json_fields: no field '" + std::string(key) + "' of that kind in '" +
                         std::string(spec_.name) + "'");
}

bool ObjectReader::checkNumber(const std::string& path, const Json& v, const Range& range,
                               bool integer) {
  if (!v.is_number()) {
    problems_.add(path, v, integer ? "must be an integer" : "must be a number");
    return false;
  }
  const double d = v.get<double>();
  if (!std::isfinite(d)) {
    problems_.add(path, v, "must be a finite number");
    return false;
  }
  if (integer && (v.is_number_float() && d != std::trunc(d))) {
    problems_.add(path, v, "must be an integer");
    return false;
  }
  if (!range.contains(d)) {
    problems_.add(path, v, mustBe(range));
    return false;
  }
  return true;
}

std::optional<double> ObjectReader::tryNumber(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kNumber});
  const Json* v = find(key);
  if (v == nullptr) {
    if (field.required) problems_.add(pathOf(key), "is required");
    return std::nullopt;
  }
  if (!checkNumber(pathOf(key), *v, field.range, false)) return std::nullopt;
  return v->get<double>();
}

double ObjectReader::number(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kNumber});
  return tryNumber(key).value_or(field.number);
}

int32_t ObjectReader::integer(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kInteger});
  const Json* v = find(key);
  if (v == nullptr) {
    if (field.required) problems_.add(pathOf(key), "is required");
    return static_cast<int32_t>(field.number);
  }
  // Integer fields have ranges inside int32, so the cast below is exact.
  if (!checkNumber(pathOf(key), *v, field.range, true)) return static_cast<int32_t>(field.number);
  return static_cast<int32_t>(v->get<double>());
}

std::optional<Vec3> ObjectReader::tryVec3(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kVec3, FieldKind::kNumberOrVec3});
  const Json* v = find(key);
  const std::string path = pathOf(key);
  if (v == nullptr) {
    if (field.required) problems_.add(path, "is required");
    return std::nullopt;
  }
  if (field.kind == FieldKind::kNumberOrVec3 && v->is_number()) {
    if (!checkNumber(path, *v, field.range, false)) return std::nullopt;
    const double d = v->get<double>();
    return Vec3{d, d, d};
  }
  if (!v->is_array() || v->size() != 3) {
    problems_.add(path, *v,
                  field.kind == FieldKind::kNumberOrVec3 ? "must be a number or [x, y, z]"
                                                         : "must be [x, y, z]");
    return std::nullopt;
  }
  Vec3 out{};
  bool ok = true;
  for (std::size_t i = 0; i < 3; ++i) {
    if (checkNumber(indexPath(path, i), (*v)[i], field.range, false)) {
      out[i] = (*v)[i].get<double>();
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

Vec3 ObjectReader::vec3(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kVec3, FieldKind::kNumberOrVec3});
  return tryVec3(key).value_or(field.vec);
}

std::optional<std::string> ObjectReader::tryString(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kString});
  const Json* v = find(key);
  if (v == nullptr) {
    if (field.required) problems_.add(pathOf(key), "is required");
    return std::nullopt;
  }
  if (!v->is_string()) {
    problems_.add(pathOf(key), *v, "must be a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::string ObjectReader::string(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kString});
  return tryString(key).value_or(std::string(field.text));
}

std::string ObjectReader::choice(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kChoice});
  const Json* v = find(key);
  if (v == nullptr) {
    if (field.required) {
      problems_.add(pathOf(key), "is required: one of " + quotedList(field.choices, "'"));
    }
    return std::string(field.text);
  }
  if (!v->is_string()) {
    problems_.add(pathOf(key), *v, "must be a string, one of " + quotedList(field.choices, "'"));
    return std::string(field.text);
  }
  const auto& s = v->get_ref<const std::string&>();
  if (std::find(field.choices.begin(), field.choices.end(), s) != field.choices.end()) return s;
  const std::string_view best = closest(s, field.choices);
  std::string reason = "must be one of " + quotedList(field.choices, "'");
  if (!best.empty()) reason += "; did you mean '" + std::string(best) + "'?";
  problems_.add(pathOf(key), *v, reason);
  return std::string(field.text);
}

std::vector<std::string> ObjectReader::choiceList(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kChoiceList});
  const Json* v = find(key);
  std::vector<std::string> out;
  const std::string path = pathOf(key);
  if (v == nullptr) {
    if (field.required) problems_.add(path, "is required");
    return out;
  }
  if (!v->is_array()) {
    problems_.add(path, *v, "must be a list of strings, from " + quotedList(field.choices, "'"));
    return out;
  }
  if (v->empty()) {
    problems_.add(path, *v, "must list at least one of " + quotedList(field.choices, "'"));
    return out;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    const std::string itemPath = indexPath(path, i);
    if (!item.is_string()) {
      problems_.add(itemPath, item, "must be a string, one of " + quotedList(field.choices, "'"));
      continue;
    }
    const auto& s = item.get_ref<const std::string&>();
    if (std::find(field.choices.begin(), field.choices.end(), s) == field.choices.end()) {
      const std::string_view best = closest(s, field.choices);
      std::string reason = "must be one of " + quotedList(field.choices, "'");
      if (!best.empty()) reason += "; did you mean '" + std::string(best) + "'?";
      problems_.add(itemPath, item, reason);
      continue;
    }
    if (std::find(out.begin(), out.end(), s) != out.end()) {
      problems_.add(itemPath, item, "is listed twice");
      continue;
    }
    out.push_back(s);
  }
  return out;
}

std::vector<int32_t> ObjectReader::integerList(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kIntegerList});
  const Json* v = find(key);
  std::vector<int32_t> out;
  const std::string path = pathOf(key);
  if (v == nullptr) {
    if (field.required) problems_.add(path, "is required");
    return out;
  }
  if (!v->is_array()) {
    problems_.add(path, *v, "must be a list of integers");
    return out;
  }
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (checkNumber(indexPath(path, i), item, field.range, true)) {
      out.push_back(static_cast<int32_t>(item.get<double>()));
    }
  }
  return out;
}

std::vector<ObjectReader::Element> ObjectReader::objectList(std::string_view key) {
  const FieldSpec& field = spec(key, {FieldKind::kObjectList});
  const Json* v = find(key);
  std::vector<Element> out;
  const std::string path = pathOf(key);
  if (v == nullptr) {
    if (field.required) problems_.add(path, "is required");
    return out;
  }
  if (!v->is_array()) {
    problems_.add(path, *v, "must be a list of objects");
    return out;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (!item.is_object()) {
      problems_.add(indexPath(path, i), item, "must be an object");
      continue;
    }
    out.push_back({&item, indexPath(path, i), i});
  }
  return out;
}

ObjectReader ObjectReader::object(std::string_view key, const ObjectSpec& nested) {
  const FieldSpec& field = spec(key, {FieldKind::kObject});
  if (field.required && find(key) == nullptr) problems_.add(pathOf(key), "is required");
  return ObjectReader(find(key), pathOf(key), nested, problems_);
}

void ObjectReader::finish(std::string_view variant) {
  if (object_ == nullptr) return;
  std::vector<std::string_view> keys;
  keys.reserve(spec_.fields.size());
  for (const FieldSpec& field : spec_.fields) keys.push_back(field.key);
  for (const auto& item : object_->items()) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& key = item.key();
    const auto it = std::find_if(spec_.fields.begin(), spec_.fields.end(),
                                 [&](const FieldSpec& f) { return f.key == key; });
    if (it == spec_.fields.end()) {
      // Past the shown lines the problem is only counted: skip the edit distances.
      problems_.add(pathOf(key), problems_.full() ? "" : "unknown key; " + suggestion(key, keys));
      continue;
    }
    if (variant.empty() || it->variants.empty()) continue;
    const auto users = splitWords(it->variants);
    if (std::find(users.begin(), users.end(), variant) == users.end()) {
      problems_.add(pathOf(key), "is not used when " + std::string(spec_.variantKey) + " is '" +
                                     std::string(variant) + "' (only for " +
                                     quotedList(users, "'") + ")");
    }
  }
}

// ---------------------------------------------------------------------------------------
// Markdown

namespace {

std::string typeText(const FieldSpec& f) {
  switch (f.kind) {
    case FieldKind::kNumber: return "number";
    case FieldKind::kInteger: return "integer";
    case FieldKind::kVec3: return "[x, y, z]";
    case FieldKind::kNumberOrVec3: return "number or [x, y, z]";
    case FieldKind::kString: return "string";
    case FieldKind::kChoice: return "string";
    case FieldKind::kChoiceList: return "list of strings";
    case FieldKind::kIntegerList: return "list of integers";
    case FieldKind::kObject:
      return "[" + std::string(f.object) + "](#" + std::string(f.object) + ")";
    case FieldKind::kObjectList:
      return "list of [" + std::string(f.object) + "](#" + std::string(f.object) + ")";
  }
  return {};
}

std::string defaultText(const FieldSpec& f) {
  if (f.required) return "required";
  if (f.optional) return "not set";
  switch (f.kind) {
    case FieldKind::kNumber:
    case FieldKind::kInteger: return formatNumber(f.number);
    case FieldKind::kVec3: return formatVec(f.vec);
    case FieldKind::kNumberOrVec3:
      if (f.vec[0] == f.vec[1] && f.vec[1] == f.vec[2]) return formatNumber(f.vec[0]);
      return formatVec(f.vec);
    case FieldKind::kString:
    case FieldKind::kChoice:
    case FieldKind::kChoiceList: return "`" + std::string(f.text) + "`";
    case FieldKind::kIntegerList:
    case FieldKind::kObjectList: return f.text.empty() ? "`[]`" : std::string(f.text);
    case FieldKind::kObject: return f.text.empty() ? "all defaults" : std::string(f.text);
  }
  return {};
}

std::string validText(const FieldSpec& f) {
  std::string out;
  switch (f.kind) {
    case FieldKind::kNumber:
    case FieldKind::kInteger: out = f.range.unbounded() ? "finite" : f.range.describe(); break;
    case FieldKind::kVec3:
    case FieldKind::kNumberOrVec3:
      out = f.range.unbounded() ? "finite" : "each " + f.range.describe();
      break;
    case FieldKind::kChoice: out = quotedList(f.choices, "`"); break;
    case FieldKind::kChoiceList:
      out = "non-empty, distinct, from " + quotedList(f.choices, "`");
      break;
    case FieldKind::kIntegerList: out = "each " + f.range.describe(); break;
    case FieldKind::kString:
    case FieldKind::kObject:
    case FieldKind::kObjectList: break;
  }
  if (!f.rule.empty()) {
    if (!out.empty()) out += "; ";
    out += f.rule;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string markdownSection(const ObjectSpec& spec) {
  std::string out = "## " + std::string(spec.name) + "\n\n";
  if (!spec.description.empty()) out += std::string(spec.description) + "\n\n";
  out += "| key | type | unit | default | valid | meaning |\n";
  out += "|---|---|---|---|---|---|\n";
  for (const FieldSpec& f : spec.fields) {
    std::string meaning(f.meaning);
    if (!f.variants.empty()) {
      meaning += " Only for " + std::string(spec.variantKey) + " " +
                 quotedList(splitWords(f.variants), "`") + ".";
    }
    out += "| `" + std::string(f.key) + "` | " + escapeTableCell(typeText(f)) + " | " +
           (f.unit.empty() ? std::string("-") : escapeTableCell(f.unit)) + " | " +
           escapeTableCell(defaultText(f)) + " | " + escapeTableCell(validText(f)) + " | " +
           escapeTableCell(meaning) + " |\n";
  }
  return out;
}

}  // namespace shellsim::json_fields
