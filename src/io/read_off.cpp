// Object File Format (Geomview): OFF, with the NOFF (normals), COFF (colours) and
// CNOFF variants. One vertex or face per line; '#' starts a comment.
#include <limits>

#include "io/reader_util.hpp"

namespace shellsim::io_detail {

Geometry parseOff(Bytes bytes, const std::string& source) {
  LineCursor cursor(asText(bytes));
  std::string_view line;
  std::vector<std::string_view> tokens;

  if (!cursor.nextNonBlank(line, '#'))
    throwAtLine(source, cursor.line(), "the file has no OFF header");
  splitTokens(line, tokens);
  const std::string_view keyword = tokens[0];
  bool hasColors = false, hasNormals = false;
  if (keyword == "OFF") {
  } else if (keyword == "COFF") {
    hasColors = true;
  } else if (keyword == "NOFF") {
    hasNormals = true;
  } else if (keyword == "CNOFF") {
    hasColors = hasNormals = true;
  } else {
    throwAtLine(source, cursor.line(),
                "expected OFF, COFF, NOFF or CNOFF, found " + quoted(keyword));
  }
  // The counts may follow the keyword on the same line.
  if (tokens.size() == 1) {
    if (!cursor.nextNonBlank(line, '#'))
      throwAtLine(source, cursor.line(), "missing vertex and face counts");
    splitTokens(line, tokens);
  } else {
    tokens.erase(tokens.begin());
  }
  const int64_t countsLine = cursor.line();
  if (tokens.size() < 2) throwAtLine(source, countsLine, "expected '<vertices> <faces> [<edges>]'");
  const auto nv = toInt(tokens[0]);
  const auto nf = toInt(tokens[1]);
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (!nv || !nf || *nv < 0 || *nf < 0 || *nv > kMax || *nf > kMax) {
    throwAtLine(source, countsLine, "bad vertex or face count");
  }
  // A vertex line takes at least 6 bytes ("0 0 0\n"), a face line 8 ("3 0 1 2\n").
  const uint64_t needed = 6 * static_cast<uint64_t>(*nv) + 8 * static_cast<uint64_t>(*nf);
  if (needed > cursor.remaining()) {
    throwAtLine(source, countsLine,
                "declares " + std::to_string(*nv) + " vertices and " + std::to_string(*nf) +
                    " faces, more than the rest of the file can hold");
  }

  Geometry g;
  const auto nVertices = static_cast<size_t>(*nv);
  g.positions.reserve(3 * nVertices);
  if (hasNormals) g.normals.reserve(3 * nVertices);
  if (hasColors) g.colors.reserve(3 * nVertices);
  const size_t expected = 3 + (hasNormals ? 3 : 0) + (hasColors ? 3 : 0);

  for (size_t i = 0; i < nVertices; ++i) {
    if (!cursor.nextNonBlank(line, '#')) {
      throwAtLine(source, cursor.line(),
                  "unexpected end of file after " + std::to_string(i) + " of " +
                      std::to_string(nVertices) + " vertices");
    }
    splitTokens(line, tokens);
    if (tokens.size() < expected) {
      throwAtLine(source, cursor.line(),
                  "expected " + std::to_string(expected) + " numbers on a vertex line");
    }
    double values[9];
    for (size_t k = 0; k < expected; ++k) {
      const auto value = toDouble(tokens[k]);
      if (!value) throwAtLine(source, cursor.line(), "not a number: " + quoted(tokens[k]));
      if (!std::isfinite(*value)) throwAtLine(source, cursor.line(), "value is not finite");
      values[k] = *value;
    }
    g.positions.insert(g.positions.end(), values, values + 3);
    if (hasNormals) g.normals.insert(g.normals.end(), values + 3, values + 6);
    if (hasColors) {
      const size_t c = hasNormals ? 6 : 3;
      // Colours are integers in [0, 255] or reals in [0, 1]; integers tell which.
      const bool integers = toInt(tokens[c]) && toInt(tokens[c + 1]) && toInt(tokens[c + 2]);
      for (size_t k = c; k < c + 3; ++k) {
        const double value = integers ? values[k] / 255.0 : values[k];
        if (!(value >= 0.0 && value <= 1.0))
          throwAtLine(source, cursor.line(), "colour is out of range");
        g.colors.push_back(static_cast<float>(value));
      }
    }
  }

  for (int64_t f = 0; f < *nf; ++f) {
    if (!cursor.nextNonBlank(line, '#')) {
      throwAtLine(source, cursor.line(),
                  "unexpected end of file after " + std::to_string(f) + " of " +
                      std::to_string(*nf) + " faces");
    }
    splitTokens(line, tokens);
    const auto n = toInt(tokens[0]);
    if (!n || *n < 3)
      throwAtLine(source, cursor.line(), "a face needs a vertex count of at least 3");
    if (static_cast<int64_t>(tokens.size()) - 1 < *n) {
      throwAtLine(source, cursor.line(),
                  "the face lists fewer than " + std::to_string(*n) + " vertices");
    }
    int32_t first = 0, prev = 0;
    for (int64_t k = 0; k < *n; ++k) {
      const std::string_view token = tokens[static_cast<size_t>(k) + 1];
      const auto index = toInt(token);
      if (!index) throwAtLine(source, cursor.line(), "not a vertex index: " + quoted(token));
      if (*index < 0 || *index >= *nv) {
        throwAtLine(source, cursor.line(),
                    "vertex index " + std::to_string(*index) + " is out of range (the file has " +
                        std::to_string(*nv) + " vertices)");
      }
      const auto v = static_cast<int32_t>(*index);
      if (k == 0) first = v;
      if (k >= 2) g.triangles.insert(g.triangles.end(), {first, prev, v});
      prev = v;
    }
  }
  if (hasNormals) normalizeNormals(g.normals);
  return g;
}

}  // namespace shellsim::io_detail
