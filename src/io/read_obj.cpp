// Wavefront OBJ through tinyobjloader's streaming (callback) interface.
//
// The callback interface is used rather than LoadObj because LoadObj stores the vertex
// count of a face in an unsigned char (a 256-gon silently corrupts the index stream),
// allocates whatever a `t` tag line asks for, and resolves relative indices without a
// range check. Here tinyobjloader splits the file into lines and dispatches them; the
// callbacks re-read each `v` line from the buffer (tinyobjloader turns an unparsable
// number into 0 without telling) and check every index against what was read so far.
#include <tiny_obj_loader.h>

#include <algorithm>
#include <istream>
#include <streambuf>

#include "io/reader_util.hpp"

namespace shellsim::io_detail {
namespace {

// An istream source over the bytes in memory, so that the callbacks can tell where in
// the file tinyobjloader is (for line numbers) and can stop it early on an error.
class SpanBuffer : public std::streambuf {
 public:
  explicit SpanBuffer(std::string_view text) {
    char* begin = const_cast<char*>(text.data());  // never written: the get area is read-only
    setg(begin, begin, begin + text.size());
  }
  [[nodiscard]] size_t position() const { return static_cast<size_t>(gptr() - eback()); }
  void stop() { setg(eback(), egptr(), egptr()); }
};

struct ObjState {
  std::string_view text;
  const std::string* source = nullptr;
  SpanBuffer* buffer = nullptr;

  // Line bookkeeping: `scanned` bytes have been looked at, holding `terminators` line ends.
  size_t scanned = 0;
  int64_t terminators = 0;

  Geometry geometry;
  std::vector<float> colors;  // (nVertices, 3) while every `v` line so far had r g b
  bool allColored = true;
  std::vector<double> normals;         // the `vn` records, (nNormals, 3)
  std::vector<int32_t> cornerNormals;  // normal of each triangle corner, (nTriangles, 3), -1 none
  bool everyCornerHasNormal = true;
  int64_t maxIndex = 0;  // largest positive vertex index and the line that used it
  int64_t maxIndexLine = 0;
  int64_t maxNormalIndex = 0;
  int64_t maxNormalIndexLine = 0;
  std::vector<std::string_view> tokens;

  std::optional<InputError> error;

  // The line tinyobjloader has just consumed and its number.
  std::string_view currentLine(int64_t& lineNumber) {
    const size_t end = buffer->position();
    for (; scanned < end; ++scanned) {
      const char c = text[scanned];
      if (c == '\n' || (c == '\r' && (scanned + 1 >= text.size() || text[scanned + 1] != '\n'))) {
        ++terminators;
      }
    }
    size_t stop = end;
    const bool terminated = stop > 0 && (text[stop - 1] == '\n' || text[stop - 1] == '\r');
    if (stop > 0 && text[stop - 1] == '\n') --stop;
    if (stop > 0 && text[stop - 1] == '\r') --stop;
    size_t start = stop;
    while (start > 0 && text[start - 1] != '\n' && text[start - 1] != '\r') --start;
    lineNumber = terminated ? terminators : terminators + 1;
    return text.substr(start, stop - start);
  }

  void fail(int64_t line, const std::string& reason) {
    if (error) return;
    error.emplace(*source + ":" + std::to_string(line) + ": " + reason);
    buffer->stop();
  }
};

void onVertex(void* user, tinyobj::real_t, tinyobj::real_t, tinyobj::real_t, tinyobj::real_t) {
  auto& s = *static_cast<ObjState*>(user);
  if (s.error) return;
  int64_t line = 0;
  std::string_view text = s.currentLine(line);
  text.remove_prefix(std::min(text.find('v'), text.size()) + 1);
  splitTokens(text, s.tokens);
  if (s.tokens.size() < 3) return s.fail(line, "a vertex needs x y z");
  double xyz[3];
  for (int k = 0; k < 3; ++k) {
    const auto value = toDouble(s.tokens[k]);
    if (!value) return s.fail(line, "not a number: " + quoted(s.tokens[k]));
    if (!std::isfinite(*value)) return s.fail(line, "coordinate is not finite");
    xyz[k] = *value;
  }
  s.geometry.positions.insert(s.geometry.positions.end(), xyz, xyz + 3);
  // The common extension `v x y z r g b` with colours in [0, 1]; anything else means no
  // colours for the whole file, since a partial colour array cannot be represented.
  if (s.allColored && s.tokens.size() == 6) {
    for (int k = 3; k < 6; ++k) {
      const auto value = toDouble(s.tokens[k]);
      if (!value || !(*value >= 0.0 && *value <= 1.0)) {
        s.allColored = false;
        break;
      }
      s.colors.push_back(static_cast<float>(*value));
    }
  } else {
    s.allColored = false;
  }
}

void onNormal(void* user, tinyobj::real_t x, tinyobj::real_t y, tinyobj::real_t z) {
  auto& s = *static_cast<ObjState*>(user);
  if (s.error) return;
  if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z)) {
    int64_t line = 0;
    s.currentLine(line);
    return s.fail(line, "normal is not finite");
  }
  s.normals.insert(s.normals.end(), {x, y, z});
}

void onFace(void* user, tinyobj::index_t* indices, int count) {
  auto& s = *static_cast<ObjState*>(user);
  if (s.error) return;
  int64_t line = 0;
  s.currentLine(line);
  if (count < 3) return s.fail(line, "a face needs at least 3 vertices");
  const int64_t nVertices = s.geometry.vertexCount();
  const int64_t nNormals = static_cast<int64_t>(s.normals.size() / 3);

  // OBJ indices are 1-based; negative ones count back from the last record read (0 is
  // what tinyobjloader reports for a missing or unparsable index).
  auto resolveVertex = [&](int raw, int32_t& out) {
    if (raw == 0) {
      s.fail(line, "vertex index is missing or 0");
      return false;
    }
    if (raw < 0) {
      if (-static_cast<int64_t>(raw) > nVertices) {
        s.fail(line,
               "relative vertex index " + std::to_string(raw) + " points before the first vertex");
        return false;
      }
      out = static_cast<int32_t>(nVertices + raw);
      return true;
    }
    if (raw > s.maxIndex) {
      s.maxIndex = raw;
      s.maxIndexLine = line;
    }
    out = raw - 1;
    return true;
  };
  auto resolveNormal = [&](int raw, int32_t& out) {
    out = -1;
    if (raw == 0) return true;
    if (raw < 0) {
      if (-static_cast<int64_t>(raw) > nNormals) {
        s.fail(line,
               "relative normal index " + std::to_string(raw) + " points before the first normal");
        return false;
      }
      out = static_cast<int32_t>(nNormals + raw);
      return true;
    }
    if (raw > s.maxNormalIndex) {
      s.maxNormalIndex = raw;
      s.maxNormalIndexLine = line;
    }
    out = raw - 1;
    return true;
  };

  int32_t v0 = 0, n0 = 0, vPrev = 0, nPrev = 0;
  if (!resolveVertex(indices[0].vertex_index, v0) || !resolveNormal(indices[0].normal_index, n0) ||
      !resolveVertex(indices[1].vertex_index, vPrev) ||
      !resolveNormal(indices[1].normal_index, nPrev)) {
    return;
  }
  // Fan triangulation (0, k-1, k), as io.hpp promises for every polygon.
  for (int k = 2; k < count; ++k) {
    int32_t v = 0, n = 0;
    if (!resolveVertex(indices[k].vertex_index, v) || !resolveNormal(indices[k].normal_index, n)) {
      return;
    }
    s.geometry.triangles.insert(s.geometry.triangles.end(), {v0, vPrev, v});
    if (n0 < 0 || nPrev < 0 || n < 0) s.everyCornerHasNormal = false;
    if (s.everyCornerHasNormal) s.cornerNormals.insert(s.cornerNormals.end(), {n0, nPrev, n});
    vPrev = v;
    nPrev = n;
  }
}

// Per-vertex normals from the per-corner `vn` references: the normalised sum of the
// normals of the corners at each vertex, when every vertex has at least one.
std::vector<double> vertexNormals(const ObjState& s) {
  const size_t nVertices = s.geometry.positions.size() / 3;
  if (s.normals.empty()) return {};
  if (s.geometry.triangles.empty()) {
    // A point cloud written with one `vn` per `v`.
    return s.normals.size() == s.geometry.positions.size() ? s.normals : std::vector<double>{};
  }
  if (!s.everyCornerHasNormal) return {};
  std::vector<double> sum(3 * nVertices, 0.0);
  std::vector<char> seen(nVertices, 0);
  for (size_t c = 0; c < s.geometry.triangles.size(); ++c) {
    const auto v = static_cast<size_t>(s.geometry.triangles[c]);
    const auto n = static_cast<size_t>(s.cornerNormals[c]);
    for (int k = 0; k < 3; ++k) sum[3 * v + k] += s.normals[3 * n + k];
    seen[v] = 1;
  }
  if (std::find(seen.begin(), seen.end(), 0) != seen.end()) return {};
  normalizeNormals(sum);
  return sum;
}

}  // namespace

Geometry parseObj(Bytes bytes, const std::string& source) {
  ObjState s;
  s.text = asText(bytes);
  s.source = &source;
  SpanBuffer buffer(s.text);
  s.buffer = &buffer;
  std::istream in(&buffer);

  tinyobj::callback_t callbacks;
  callbacks.vertex_cb = onVertex;
  callbacks.normal_cb = onNormal;
  callbacks.index_cb = onFace;
  std::string warn, err;
  const bool ok = tinyobj::LoadObjWithCallback(in, callbacks, &s, nullptr, &warn, &err);
  if (s.error) throw *s.error;
  if (!ok) throw InputError(source + ": " + (err.empty() ? "not a valid OBJ file" : err));

  const int64_t nVertices = s.geometry.vertexCount();
  if (s.maxIndex > nVertices) {
    throwAtLine(source, s.maxIndexLine,
                "vertex index " + std::to_string(s.maxIndex) + " is out of range (the file has " +
                    std::to_string(nVertices) + " vertices)");
  }
  if (s.maxNormalIndex > static_cast<int64_t>(s.normals.size() / 3)) {
    throwAtLine(source, s.maxNormalIndexLine,
                "normal index " + std::to_string(s.maxNormalIndex) +
                    " is out of range (the file has " + std::to_string(s.normals.size() / 3) +
                    " normals)");
  }
  s.geometry.normals = vertexNormals(s);
  if (s.allColored && s.colors.size() == s.geometry.positions.size()) {
    s.geometry.colors = std::move(s.colors);
  }
  return std::move(s.geometry);
}

}  // namespace shellsim::io_detail
