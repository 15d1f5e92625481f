// Shared pieces of the geometry readers: error messages, number parsing, a line cursor
// for the text formats and the per-format entry points that parseGeometry dispatches to.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim::io_detail {

using Bytes = std::span<const std::byte>;

Geometry parseObj(Bytes bytes, const std::string& source);
Geometry parsePly(Bytes bytes, const std::string& source);
Geometry parseOff(Bytes bytes, const std::string& source);
Geometry parseStl(Bytes bytes, const std::string& source);
Geometry parseXyz(Bytes bytes, const std::string& source);

inline std::string_view asText(Bytes bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// `<file>:<line>: <reason>`, the form every text-format error takes.
[[noreturn]] inline void throwAtLine(const std::string& source, int64_t line,
                                     const std::string& reason) {
  throw InputError(source + ":" + std::to_string(line) + ": " + reason);
}

// `<file>: byte <offset>: <reason>`, the form every binary-format error takes.
[[noreturn]] inline void throwAtByte(const std::string& source, uint64_t offset,
                                     const std::string& reason) {
  throw InputError(source + ": byte " + std::to_string(offset) + ": " + reason);
}

// Quotes at most a few dozen characters of a token so that a hostile file cannot make
// an error message as long as itself.
inline std::string quoted(std::string_view token) {
  constexpr size_t kMax = 32;
  std::string out = "'";
  for (char c : token.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (token.size() > kMax) out += "...";
  out += "'";
  return out;
}

// A whole token as a number, or nothing. from_chars is locale-independent and does not
// accept a leading '+', which writers of OBJ and PLY files sometimes emit.
inline std::optional<double> toDouble(std::string_view token) {
  if (!token.empty() && token.front() == '+') token.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty()) return {};
  return value;
}

inline std::optional<int64_t> toInt(std::string_view token) {
  if (!token.empty() && token.front() == '+') token.remove_prefix(1);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty()) return {};
  return value;
}

inline bool isBlank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Splits text into lines ('\n', "\r\n" or a lone '\r') and lines into whitespace-separated
// tokens, counting lines from 1 for error messages.
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}

  // The next line without its terminator and, if `comment` is given, without anything
  // from that character on; false at the end of the text.
  bool next(std::string_view& line, char comment = '\0') {
    if (pos_ >= text_.size()) return false;
    ++line_;
    const size_t start = pos_;
    size_t end = start;
    while (end < text_.size() && text_[end] != '\n' && text_[end] != '\r') ++end;
    pos_ = end;
    if (pos_ < text_.size()) {
      if (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
      ++pos_;
    }
    line = text_.substr(start, end - start);
    if (comment != '\0') {
      const size_t hash = line.find(comment);
      if (hash != std::string_view::npos) line = line.substr(0, hash);
    }
    return true;
  }

  // The next line that holds a token after comments are removed.
  bool nextNonBlank(std::string_view& line, char comment) {
    while (next(line, comment)) {
      for (char c : line) {
        if (!isBlank(c)) return true;
      }
    }
    return false;
  }

  [[nodiscard]] int64_t line() const { return line_; }
  [[nodiscard]] size_t remaining() const { return text_.size() - pos_; }
  [[nodiscard]] size_t position() const { return pos_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

// Whitespace-separated tokens of one line, appended to `tokens` (cleared first).
inline void splitTokens(std::string_view line, std::vector<std::string_view>& tokens) {
  tokens.clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && isBlank(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !isBlank(line[i])) ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
}

// Normalises the normals in place. A non-finite normal is malformed input; a zero one
// (some exporters write 0 0 0 for unreferenced vertices) cannot be made unit, and a
// partial array cannot be represented, so the normals are dropped. Returns false when
// they were dropped.
inline bool normalizeNormals(std::vector<double>& normals) {
  for (size_t i = 0; i + 2 < normals.size(); i += 3) {
    const double length = std::sqrt(normals[i] * normals[i] + normals[i + 1] * normals[i + 1] +
                                    normals[i + 2] * normals[i + 2]);
    if (!(length > 1e-300) || !std::isfinite(length)) {
      normals.clear();
      return false;
    }
    normals[i] /= length;
    normals[i + 1] /= length;
    normals[i + 2] /= length;
  }
  return true;
}

}  // namespace shellsim::io_detail
