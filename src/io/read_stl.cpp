// STL, ASCII and binary. STL stores every triangle with its own three corners; corners
// with bit-identical positions are merged so that the result is an indexed mesh whose
// topology (edges, boundaries) can be analysed.
//
// A binary file is recognised by its size (84 + 50 n bytes for the n triangles its
// header declares), not by the word "solid": many binary exporters begin their 80-byte
// header with it.
#include <bit>
#include <cstring>
#include <unordered_map>

#include "io/reader_util.hpp"

namespace shellsim::io_detail {
namespace {

struct PositionKey {
  uint64_t bits[3];
  bool operator==(const PositionKey&) const = default;
};

struct PositionHash {
  size_t operator()(const PositionKey& k) const {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t b : k.bits) h = (h ^ b) * 0x100000001b3ull + (h >> 29);
    return static_cast<size_t>(h);
  }
};

class VertexMerger {
 public:
  explicit VertexMerger(Geometry& g) : g_(g) {}

  int32_t add(const double p[3]) {
    PositionKey key{};
    // +0.0 turns -0.0 into 0.0: the same point must not become two vertices.
    for (int k = 0; k < 3; ++k) key.bits[k] = std::bit_cast<uint64_t>(p[k] + 0.0);
    const auto next = static_cast<int32_t>(g_.positions.size() / 3);
    const auto [it, inserted] = index_.try_emplace(key, next);
    if (inserted) g_.positions.insert(g_.positions.end(), p, p + 3);
    return it->second;
  }

 private:
  Geometry& g_;
  std::unordered_map<PositionKey, int32_t, PositionHash> index_;
};

float readFloatLE(const unsigned char* p) {
  uint32_t bits = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                  static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  return std::bit_cast<float>(bits);
}

Geometry parseBinary(std::string_view text, const std::string& source) {
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  const uint64_t n = static_cast<uint64_t>(data[80]) | static_cast<uint64_t>(data[81]) << 8 |
                     static_cast<uint64_t>(data[82]) << 16 | static_cast<uint64_t>(data[83]) << 24;
  if (84 + 50 * n != text.size()) {
    throwAtByte(source, 80,
                "binary STL declares " + std::to_string(n) + " triangles, which need " +
                    std::to_string(84 + 50 * n) + " bytes, but the file has " +
                    std::to_string(text.size()));
  }
  Geometry g;
  g.triangles.reserve(3 * n);
  VertexMerger merger(g);
  for (uint64_t t = 0; t < n; ++t) {
    const size_t offset = 84 + 50 * t;
    for (int c = 0; c < 3; ++c) {
      // Each record: normal (3 float), three corners (3 float each), 2 attribute bytes.
      const size_t at = offset + 12 + 12 * static_cast<size_t>(c);
      double p[3];
      for (int k = 0; k < 3; ++k) {
        p[k] = readFloatLE(data + at + 4 * k);
        if (!std::isfinite(p[k])) throwAtByte(source, at + 4 * k, "coordinate is not finite");
      }
      g.triangles.push_back(merger.add(p));
    }
  }
  return g;
}

Geometry parseAscii(std::string_view text, const std::string& source) {
  LineCursor cursor(text);
  std::string_view line;
  std::vector<std::string_view> tokens;
  Geometry g;
  VertexMerger merger(g);
  std::vector<int32_t> loop;  // corners of the current facet
  enum class State { kStart, kSolid, kFacet, kLoop, kEndLoop, kDone } state = State::kStart;

  while (cursor.nextNonBlank(line, '\0')) {
    splitTokens(line, tokens);
    const std::string_view word = tokens[0];
    const int64_t at = cursor.line();
    if (state == State::kStart || state == State::kDone) {
      // Some exporters write one solid per part into the same file.
      if (word != "solid") throwAtLine(source, at, "expected 'solid'");
      state = State::kSolid;
    } else if (state == State::kSolid) {
      if (word == "endsolid") {
        state = State::kDone;
        continue;
      }
      if (word != "facet")
        throwAtLine(source, at, "expected 'facet' or 'endsolid', found " + quoted(word));
      state = State::kFacet;
    } else if (state == State::kFacet) {
      if (tokens.size() != 2 || word != "outer" || tokens[1] != "loop")
        throwAtLine(source, at, "expected 'outer loop'");
      loop.clear();
      state = State::kLoop;
    } else if (state == State::kLoop) {
      if (word == "endloop") {
        if (loop.size() < 3) throwAtLine(source, at, "a facet needs at least 3 vertices");
        // Fan triangulation: some old exporters write polygons.
        for (size_t k = 2; k < loop.size(); ++k) {
          g.triangles.insert(g.triangles.end(), {loop[0], loop[k - 1], loop[k]});
        }
        state = State::kEndLoop;
        continue;
      }
      if (word != "vertex" || tokens.size() != 4)
        throwAtLine(source, at, "expected 'vertex x y z' or 'endloop'");
      double p[3];
      for (int k = 0; k < 3; ++k) {
        const auto value = toDouble(tokens[static_cast<size_t>(k) + 1]);
        if (!value)
          throwAtLine(source, at, "not a number: " + quoted(tokens[static_cast<size_t>(k) + 1]));
        if (!std::isfinite(*value)) throwAtLine(source, at, "coordinate is not finite");
        p[k] = *value;
      }
      loop.push_back(merger.add(p));
    } else if (state == State::kEndLoop) {
      if (word != "endfacet") throwAtLine(source, at, "expected 'endfacet'");
      state = State::kSolid;
    }
  }
  if (state != State::kDone)
    throwAtLine(source, cursor.line(), "unexpected end of file (no 'endsolid')");
  return g;
}

}  // namespace

Geometry parseStl(Bytes bytes, const std::string& source) {
  const std::string_view text = asText(bytes);
  if (text.size() >= 84) {
    const auto* data = reinterpret_cast<const unsigned char*>(text.data());
    const uint64_t n = static_cast<uint64_t>(data[80]) | static_cast<uint64_t>(data[81]) << 8 |
                       static_cast<uint64_t>(data[82]) << 16 |
                       static_cast<uint64_t>(data[83]) << 24;
    if (84 + 50 * n == text.size()) return parseBinary(text, source);
  }
  size_t start = 0;
  while (start < text.size() && (isBlank(text[start]) || text[start] == '\n')) ++start;
  // A NUL byte in the first kilobyte means a binary file whose header starts with "solid".
  const bool hasNul = text.substr(0, 1024).find('\0') != std::string_view::npos;
  if (text.substr(start, 5) == "solid" && !hasNul) return parseAscii(text, source);
  if (text.size() >= 84) return parseBinary(text, source);  // reports the size mismatch
  throwAtByte(source, 0,
              "neither an ASCII STL (no 'solid') nor a binary one (shorter than 84 bytes)");
}

}  // namespace shellsim::io_detail
