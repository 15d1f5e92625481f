// XYZ point clouds: `x y z` or `x y z nx ny nz` per line, '#' comments, blank lines.
// Every line must have the same shape as the first, since normals cannot be partial.
#include "io/reader_util.hpp"

namespace shellsim::io_detail {

Geometry parseXyz(Bytes bytes, const std::string& source) {
  LineCursor cursor(asText(bytes));
  std::string_view line;
  std::vector<std::string_view> tokens;
  Geometry g;
  size_t width = 0;  // numbers per line, fixed by the first point
  while (cursor.nextNonBlank(line, '#')) {
    splitTokens(line, tokens);
    const int64_t at = cursor.line();
    if (tokens.size() != 3 && tokens.size() != 6) {
      throwAtLine(source, at,
                  "expected 3 numbers (x y z) or 6 (x y z nx ny nz), found " +
                      std::to_string(tokens.size()));
    }
    if (width == 0) width = tokens.size();
    if (tokens.size() != width) {
      throwAtLine(source, at,
                  "expected " + std::to_string(width) + " numbers like the first point, found " +
                      std::to_string(tokens.size()));
    }
    double values[6];
    for (size_t k = 0; k < width; ++k) {
      const auto value = toDouble(tokens[k]);
      if (!value) throwAtLine(source, at, "not a number: " + quoted(tokens[k]));
      if (!std::isfinite(*value)) throwAtLine(source, at, "value is not finite");
      values[k] = *value;
    }
    g.positions.insert(g.positions.end(), values, values + 3);
    if (width == 6) g.normals.insert(g.normals.end(), values + 3, values + 6);
  }
  normalizeNormals(g.normals);
  return g;
}

}  // namespace shellsim::io_detail
