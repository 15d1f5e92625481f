// PLY (Turk 1994): ascii, binary_little_endian and binary_big_endian.
//
// The header is parsed into elements and properties; the body is then read element by
// element through one of two value readers (text tokens or binary scalars) with the
// same code, so that every encoding supports the same elements. Before anything is
// reserved, each element's declared count is checked against the bytes that remain,
// so a 100-byte file cannot ask for gigabytes.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "io/reader_util.hpp"

namespace shellsim::io_detail {
namespace {

enum class Scalar { kInt8, kUint8, kInt16, kUint16, kInt32, kUint32, kFloat32, kFloat64 };

std::optional<Scalar> scalarFromName(std::string_view name) {
  if (name == "char" || name == "int8") return Scalar::kInt8;
  if (name == "uchar" || name == "uint8") return Scalar::kUint8;
  if (name == "short" || name == "int16") return Scalar::kInt16;
  if (name == "ushort" || name == "uint16") return Scalar::kUint16;
  if (name == "int" || name == "int32") return Scalar::kInt32;
  if (name == "uint" || name == "uint32") return Scalar::kUint32;
  if (name == "float" || name == "float32") return Scalar::kFloat32;
  if (name == "double" || name == "float64") return Scalar::kFloat64;
  return {};
}

size_t sizeOf(Scalar t) {
  switch (t) {
    case Scalar::kInt8:
    case Scalar::kUint8: return 1;
    case Scalar::kInt16:
    case Scalar::kUint16: return 2;
    case Scalar::kInt32:
    case Scalar::kUint32:
    case Scalar::kFloat32: return 4;
    case Scalar::kFloat64: return 8;
  }
  return 1;
}

bool isInteger(Scalar t) {
  return t != Scalar::kFloat32 && t != Scalar::kFloat64;
}

// The largest value of an integer type, used to scale integer colours to [0, 1].
double maxOf(Scalar t) {
  switch (t) {
    case Scalar::kInt8: return 127;
    case Scalar::kUint8: return 255;
    case Scalar::kInt16: return 32767;
    case Scalar::kUint16: return 65535;
    case Scalar::kInt32: return 2147483647.0;
    case Scalar::kUint32: return 4294967295.0;
    default: return 1;
  }
}

bool inRange(Scalar t, int64_t v) {
  switch (t) {
    case Scalar::kInt8: return v >= -128 && v <= 127;
    case Scalar::kUint8: return v >= 0 && v <= 255;
    case Scalar::kInt16: return v >= -32768 && v <= 32767;
    case Scalar::kUint16: return v >= 0 && v <= 65535;
    case Scalar::kInt32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case Scalar::kUint32: return v >= 0 && v <= std::numeric_limits<uint32_t>::max();
    default: return true;
  }
}

struct Property {
  std::string name;
  Scalar type = Scalar::kFloat32;  // the item type for a list
  bool isList = false;
  Scalar countType = Scalar::kUint8;
};

struct Element {
  std::string name;
  int64_t count = 0;
  int64_t line = 0;  // header line that declared it
  std::vector<Property> properties;
};

enum class Encoding { kAscii, kBinaryLittle, kBinaryBig };

struct Header {
  Encoding encoding = Encoding::kAscii;
  std::vector<Element> elements;
  size_t bodyOffset = 0;
  int64_t bodyLine = 0;  // lines before the body, for ascii line numbers
};

Header parseHeader(std::string_view text, const std::string& source) {
  LineCursor cursor(text);
  std::string_view line;
  std::vector<std::string_view> tokens;
  if (!cursor.next(line) || line != "ply") throwAtLine(source, 1, "not a PLY file (no 'ply' line)");

  Header header;
  bool sawFormat = false;
  while (true) {
    if (!cursor.next(line)) throwAtLine(source, cursor.line(), "the header has no end_header line");
    splitTokens(line, tokens);
    const int64_t at = cursor.line();
    if (tokens.empty()) continue;
    const std::string_view keyword = tokens[0];
    if (keyword == "end_header") break;
    if (keyword == "comment" || keyword == "obj_info") continue;
    if (keyword == "format") {
      if (tokens.size() != 3) throwAtLine(source, at, "expected 'format <encoding> 1.0'");
      if (tokens[1] == "ascii") {
        header.encoding = Encoding::kAscii;
      } else if (tokens[1] == "binary_little_endian") {
        header.encoding = Encoding::kBinaryLittle;
      } else if (tokens[1] == "binary_big_endian") {
        header.encoding = Encoding::kBinaryBig;
      } else {
        throwAtLine(source, at, "unknown encoding " + quoted(tokens[1]));
      }
      if (tokens[2] != "1.0") throwAtLine(source, at, "unsupported version " + quoted(tokens[2]));
      sawFormat = true;
    } else if (keyword == "element") {
      if (tokens.size() != 3) throwAtLine(source, at, "expected 'element <name> <count>'");
      const auto count = toInt(tokens[2]);
      if (!count || *count < 0) throwAtLine(source, at, "bad element count " + quoted(tokens[2]));
      // Indices are int32 (DESIGN.md, principle 3), so no element may count more.
      if (*count > std::numeric_limits<int32_t>::max()) {
        throwAtLine(source, at, "element count " + std::string(tokens[2]) + " is too large");
      }
      header.elements.push_back({std::string(tokens[1]), *count, at, {}});
    } else if (keyword == "property") {
      if (header.elements.empty()) throwAtLine(source, at, "property before any element");
      Property p;
      if (tokens.size() == 5 && tokens[1] == "list") {
        const auto countType = scalarFromName(tokens[2]);
        const auto itemType = scalarFromName(tokens[3]);
        if (!countType || !itemType) throwAtLine(source, at, "unknown property type");
        if (!isInteger(*countType))
          throwAtLine(source, at, "a list count must have an integer type");
        p = {std::string(tokens[4]), *itemType, true, *countType};
      } else if (tokens.size() == 3) {
        const auto type = scalarFromName(tokens[1]);
        if (!type) throwAtLine(source, at, "unknown property type " + quoted(tokens[1]));
        p = {std::string(tokens[2]), *type, false, Scalar::kUint8};
      } else {
        throwAtLine(
            source, at,
            "expected 'property <type> <name>' or 'property list <count type> <item type> <name>'");
      }
      header.elements.back().properties.push_back(std::move(p));
    } else {
      throwAtLine(source, at, "unknown header keyword " + quoted(keyword));
    }
  }
  if (!sawFormat) throwAtLine(source, cursor.line(), "the header has no format line");
  header.bodyOffset = cursor.position();
  header.bodyLine = cursor.line();
  return header;
}

// Binary body values, swapping bytes when the file's order is not the machine's.
class BinaryReader {
 public:
  BinaryReader(std::string_view text, size_t offset, bool bigEndian, const std::string& source)
      : data_(reinterpret_cast<const unsigned char*>(text.data())),
        size_(text.size()),
        pos_(offset),
        swap_(bigEndian != (std::endian::native == std::endian::big)),
        source_(source) {}

  double read(Scalar t) {
    switch (t) {
      case Scalar::kInt8: return static_cast<double>(get<int8_t>());
      case Scalar::kUint8: return static_cast<double>(get<uint8_t>());
      case Scalar::kInt16: return static_cast<double>(get<int16_t>());
      case Scalar::kUint16: return static_cast<double>(get<uint16_t>());
      case Scalar::kInt32: return static_cast<double>(get<int32_t>());
      case Scalar::kUint32: return static_cast<double>(get<uint32_t>());
      case Scalar::kFloat32: return static_cast<double>(get<float>());
      case Scalar::kFloat64: return get<double>();
    }
    return 0;
  }

  int64_t readInt(Scalar t) {
    switch (t) {
      case Scalar::kInt8: return get<int8_t>();
      case Scalar::kUint8: return get<uint8_t>();
      case Scalar::kInt16: return get<int16_t>();
      case Scalar::kUint16: return get<uint16_t>();
      case Scalar::kInt32: return get<int32_t>();
      case Scalar::kUint32: return get<uint32_t>();
      default: fail("expected an integer");
    }
  }

  void skip(Scalar t, int64_t n) {
    const uint64_t bytes = static_cast<uint64_t>(n) * sizeOf(t);
    if (bytes > size_ - pos_) fail("unexpected end of file");
    pos_ += bytes;
  }

  // Whether `n` values of at least `minBytes` bytes each can still follow.
  [[nodiscard]] bool fits(int64_t n, size_t minBytes) const {
    return minBytes == 0 || static_cast<uint64_t>(n) <= (size_ - pos_) / minBytes;
  }
  static size_t minBytes(Scalar t) { return sizeOf(t); }

  [[noreturn]] void fail(const std::string& reason) const { throwAtByte(source_, pos_, reason); }
  // Where the value just read began, for errors about its meaning.
  [[noreturn]] void failValue(Scalar t, const std::string& reason) const {
    throwAtByte(source_, pos_ - sizeOf(t), reason);
  }

 private:
  template <class T>
  T get() {
    if (sizeof(T) > size_ - pos_) fail("unexpected end of file");
    std::array<unsigned char, sizeof(T)> raw;
    std::memcpy(raw.data(), data_ + pos_, sizeof(T));
    if (swap_) std::reverse(raw.begin(), raw.end());
    pos_ += sizeof(T);
    return std::bit_cast<T>(raw);
  }

  const unsigned char* data_;
  size_t size_;
  size_t pos_;
  bool swap_;
  const std::string& source_;
};

// Ascii body values: whitespace-separated tokens, lines counted for errors.
class AsciiReader {
 public:
  AsciiReader(std::string_view text, size_t offset, int64_t linesBefore, const std::string& source)
      : text_(text), pos_(offset), line_(linesBefore + 1), source_(source) {}

  double read(Scalar t) {
    const std::string_view token = next();
    if (isInteger(t)) return static_cast<double>(toInteger(t, token));
    const auto value = toDouble(token);
    if (!value) fail("not a number: " + quoted(token));
    return *value;
  }

  int64_t readInt(Scalar t) { return toInteger(t, next()); }

  void skip(Scalar, int64_t n) {
    for (int64_t i = 0; i < n; ++i) next();
  }

  // Every ascii value takes at least one character and one separator.
  [[nodiscard]] bool fits(int64_t n, size_t minBytes) const {
    return minBytes == 0 || static_cast<uint64_t>(n) <= (text_.size() - pos_) / minBytes;
  }
  static size_t minBytes(Scalar) { return 2; }

  [[noreturn]] void fail(const std::string& reason) const { throwAtLine(source_, line_, reason); }
  [[noreturn]] void failValue(Scalar, const std::string& reason) const { fail(reason); }

 private:
  std::string_view next() {
    while (pos_ < text_.size() && (isBlank(text_[pos_]) || text_[pos_] == '\n')) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    // Reported at the last line that held a value, not at the empty line after it.
    if (pos_ >= text_.size()) throwAtLine(source_, lastTokenLine_, "unexpected end of file");
    lastTokenLine_ = line_;
    const size_t start = pos_;
    while (pos_ < text_.size() && !isBlank(text_[pos_]) && text_[pos_] != '\n') ++pos_;
    return text_.substr(start, pos_ - start);
  }

  int64_t toInteger(Scalar t, std::string_view token) const {
    const auto value = toInt(token);
    if (!value) fail("not an integer: " + quoted(token));
    if (!inRange(t, *value)) fail("value " + std::string(token) + " is out of range for its type");
    return *value;
  }

  std::string_view text_;
  size_t pos_;
  int64_t line_;
  int64_t lastTokenLine_ = line_;
  const std::string& source_;
};

// What a vertex property means to us.
enum class Slot { kNone, kX, kY, kZ, kNx, kNy, kNz, kRed, kGreen, kBlue, kPiece };

Slot slotOf(const std::string& name) {
  if (name == "x") return Slot::kX;
  if (name == "y") return Slot::kY;
  if (name == "z") return Slot::kZ;
  if (name == "nx") return Slot::kNx;
  if (name == "ny") return Slot::kNy;
  if (name == "nz") return Slot::kNz;
  if (name == "red" || name == "diffuse_red") return Slot::kRed;
  if (name == "green" || name == "diffuse_green") return Slot::kGreen;
  if (name == "blue" || name == "diffuse_blue") return Slot::kBlue;
  if (name == "piece") return Slot::kPiece;  // shellsim's frames: the fragment of a vertex
  return Slot::kNone;
}

const Property* findIndexList(const Element& e) {
  for (const Property& p : e.properties) {
    if (p.isList && (p.name == "vertex_indices" || p.name == "vertex_index")) return &p;
  }
  return nullptr;
}

class PlyParser {
 public:
  PlyParser(const Header& header, const std::string& source) : header_(header), source_(source) {
    for (const Element& e : header.elements) {
      if (e.name == "vertex") vertexCount_ = e.count;
    }
  }

  template <class Reader>
  Geometry read(Reader& r) {
    bool sawVertex = false;
    for (const Element& e : header_.elements) {
      size_t minBytes = 0;
      for (const Property& p : e.properties) {
        minBytes += Reader::minBytes(p.isList ? p.countType : p.type);
      }
      if (!r.fits(e.count, minBytes)) {
        throwAtLine(source_, e.line,
                    "element '" + e.name + "' declares " + std::to_string(e.count) +
                        " entries, more than the rest of the file can hold");
      }
      if (e.name == "vertex") {
        if (sawVertex) throwAtLine(source_, e.line, "a second vertex element");
        sawVertex = true;
        readVertices(r, e);
      } else if ((e.name == "face" || e.name == "tristrips") && findIndexList(e) != nullptr) {
        const Property& list = *findIndexList(e);
        if (!isInteger(list.type))
          throwAtLine(source_, e.line, "vertex indices must have an integer type");
        readFaces(r, e, list, e.name == "tristrips");
      } else {
        for (int64_t i = 0; i < e.count; ++i) {
          for (const Property& p : e.properties) skipProperty(r, p);
        }
      }
    }
    if (!sawVertex) throwAtLine(source_, header_.bodyLine, "the header declares no vertex element");
    return std::move(geometry_);
  }

 private:
  template <class Reader>
  void skipProperty(Reader& r, const Property& p) {
    if (!p.isList) {
      r.skip(p.type, 1);
      return;
    }
    const int64_t n = r.readInt(p.countType);
    if (n < 0) r.failValue(p.countType, "negative list length");
    if (!r.fits(n, Reader::minBytes(p.type)))
      r.failValue(p.countType, "list runs past the end of the file");
    r.skip(p.type, n);
  }

  template <class Reader>
  void readVertices(Reader& r, const Element& e) {
    std::vector<Slot> slots;
    bool has[11] = {};
    // Other floating-point vertex properties are named per-vertex quantities (shellsim's
    // frames write `plastic_strain`, `damage`): kept as vertex scalars, per property, or -1.
    std::vector<int> scalarOf;
    for (const Property& p : e.properties) {
      const Slot s = p.isList ? Slot::kNone : slotOf(p.name);
      const bool scalar =
          s == Slot::kNone && !p.isList && !isInteger(p.type) && isVertexScalarName(p.name);
      scalarOf.push_back(scalar ? static_cast<int>(geometry_.vertexScalars.size()) : -1);
      if (scalar) geometry_.vertexScalars.push_back({p.name, {}});
      slots.push_back(s);
      has[static_cast<int>(s)] = true;
    }
    if (!has[int(Slot::kX)] || !has[int(Slot::kY)] || !has[int(Slot::kZ)]) {
      throwAtLine(source_, e.line, "the vertex element needs x, y and z properties");
    }
    const bool normals = has[int(Slot::kNx)] && has[int(Slot::kNy)] && has[int(Slot::kNz)];
    const bool colors = has[int(Slot::kRed)] && has[int(Slot::kGreen)] && has[int(Slot::kBlue)];
    const bool pieces = has[int(Slot::kPiece)];
    const auto n = static_cast<size_t>(e.count);
    geometry_.positions.resize(3 * n);
    if (normals) geometry_.normals.resize(3 * n);
    if (colors) geometry_.colors.resize(3 * n);
    if (pieces) geometry_.pieces.resize(n);
    for (VertexScalar& scalar : geometry_.vertexScalars) scalar.values.resize(n);

    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < slots.size(); ++k) {
        const Property& p = e.properties[k];
        if (p.isList) {
          skipProperty(r, p);
          continue;
        }
        const Slot s = slots[k];
        if (scalarOf[k] >= 0) {
          const double value = r.read(p.type);
          if (!(std::abs(value) <= std::numeric_limits<float>::max())) {
            r.failValue(p.type, "vertex " + std::to_string(i) + ": '" + p.name +
                                    "' is not a finite single-precision number");
          }
          geometry_.vertexScalars[static_cast<size_t>(scalarOf[k])].values[i] =
              static_cast<float>(value);
          continue;
        }
        if (s == Slot::kNone) {
          r.skip(p.type, 1);
          continue;
        }
        const double value = r.read(p.type);
        if (!std::isfinite(value))
          r.failValue(p.type, "vertex " + std::to_string(i) + ": '" + p.name + "' is not finite");
        switch (s) {
          case Slot::kX:
          case Slot::kY:
          case Slot::kZ: geometry_.positions[3 * i + (int(s) - int(Slot::kX))] = value; break;
          case Slot::kNx:
          case Slot::kNy:
          case Slot::kNz:
            if (normals) geometry_.normals[3 * i + (int(s) - int(Slot::kNx))] = value;
            break;
          case Slot::kRed:
          case Slot::kGreen:
          case Slot::kBlue: {
            if (!colors) break;
            // Integer colours span their type's range; float colours are already in [0, 1].
            const double c = isInteger(p.type) ? value / maxOf(p.type) : value;
            if (!(c >= 0.0 && c <= 1.0))
              r.failValue(p.type, "vertex " + std::to_string(i) + ": colour is outside [0, 1]");
            geometry_.colors[3 * i + (int(s) - int(Slot::kRed))] = static_cast<float>(c);
            break;
          }
          case Slot::kPiece:
            if (!(value >= 0 && value <= std::numeric_limits<int32_t>::max() &&
                  value == std::floor(value)))
              r.failValue(p.type, "vertex " + std::to_string(i) + ": piece is not an index >= 0");
            geometry_.pieces[i] = static_cast<int32_t>(value);
            break;
          case Slot::kNone: break;
        }
      }
    }
    if (normals) normalizeNormals(geometry_.normals);
  }

  // Faces are fan-triangulated; triangle strips alternate their winding so that every
  // triangle keeps the orientation of the first, and a -1 index starts a new strip.
  template <class Reader>
  void readFaces(Reader& r, const Element& e, const Property& list, bool strips) {
    for (int64_t f = 0; f < e.count; ++f) {
      for (const Property& p : e.properties) {
        if (&p != &list) {
          skipProperty(r, p);
          continue;
        }
        const int64_t n = r.readInt(p.countType);
        if (n < 0) r.failValue(p.countType, "negative list length");
        if (!r.fits(n, Reader::minBytes(p.type)))
          r.failValue(p.countType, "list runs past the end of the file");
        if (!strips && n < 3)
          r.failValue(p.countType, e.name + " " + std::to_string(f) + " has fewer than 3 vertices");
        int32_t first = -1, prev = -1, prevPrev = -1;
        int64_t inStrip = 0;
        for (int64_t k = 0; k < n; ++k) {
          const int64_t index = r.readInt(p.type);
          if (strips && index == -1) {
            inStrip = 0;
            continue;
          }
          if (index < 0 || index >= vertexCount_) {
            r.failValue(p.type, "vertex index " + std::to_string(index) +
                                    " is out of range (the file has " +
                                    std::to_string(vertexCount_) + " vertices)");
          }
          const auto v = static_cast<int32_t>(index);
          if (strips) {
            if (inStrip >= 2 && prevPrev != prev && prev != v && prevPrev != v) {
              if (inStrip % 2 == 0) {
                geometry_.triangles.insert(geometry_.triangles.end(), {prevPrev, prev, v});
              } else {
                geometry_.triangles.insert(geometry_.triangles.end(), {prev, prevPrev, v});
              }
            }
            prevPrev = prev;
            prev = v;
            ++inStrip;
          } else {
            if (k == 0) first = v;
            if (k >= 2) geometry_.triangles.insert(geometry_.triangles.end(), {first, prev, v});
            prev = v;
          }
        }
      }
    }
  }

  const Header& header_;
  const std::string& source_;
  int64_t vertexCount_ = 0;
  Geometry geometry_;
};

}  // namespace

Geometry parsePly(Bytes bytes, const std::string& source) {
  const std::string_view text = asText(bytes);
  const Header header = parseHeader(text, source);
  PlyParser parser(header, source);
  if (header.encoding == Encoding::kAscii) {
    AsciiReader reader(text, header.bodyOffset, header.bodyLine, source);
    return parser.read(reader);
  }
  BinaryReader reader(text, header.bodyOffset, header.encoding == Encoding::kBinaryBig, source);
  return parser.read(reader);
}

}  // namespace shellsim::io_detail
