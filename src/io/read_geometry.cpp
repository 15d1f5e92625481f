#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include "io/reader_util.hpp"
#include "shellsim/io.hpp"

namespace shellsim {

GeometryFormat formatFromPath(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".obj") return GeometryFormat::kObj;
  if (ext == ".ply") return GeometryFormat::kPly;
  if (ext == ".off") return GeometryFormat::kOff;
  if (ext == ".stl") return GeometryFormat::kStl;
  if (ext == ".xyz") return GeometryFormat::kXyz;
  throw InputError(path.string() + ": unknown geometry format '" + ext +
                   "' (expected .obj, .ply, .off, .stl or .xyz)");
}

Geometry readGeometry(const std::filesystem::path& path) {
  const std::string name = path.string();

  // Checked first because an ifstream opens a directory on Linux and then fails on
  // the first read with a message that says nothing useful.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw IoError(name + ": is a directory");

  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    throw IoError(name + ": cannot open: " + std::strerror(err));
  }
  // After the checks above, so that a missing file is reported as missing whatever its name.
  const GeometryFormat format = formatFromPath(path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0 || !in) throw IoError(name + ": cannot determine the file size");

  std::vector<std::byte> bytes(static_cast<size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw IoError(name + ": read failed after " + std::to_string(in.gcount()) + " of " +
                  std::to_string(size) + " bytes");
  }
  return parseGeometry(format, bytes, name);
}

Geometry parseGeometry(GeometryFormat format, std::span<const std::byte> bytes,
                       const std::string& sourceName) {
  if (bytes.empty()) throw InputError(sourceName + ": the file is empty");
  Geometry geometry;
  switch (format) {
    case GeometryFormat::kObj: geometry = io_detail::parseObj(bytes, sourceName); break;
    case GeometryFormat::kPly: geometry = io_detail::parsePly(bytes, sourceName); break;
    case GeometryFormat::kOff: geometry = io_detail::parseOff(bytes, sourceName); break;
    case GeometryFormat::kStl: geometry = io_detail::parseStl(bytes, sourceName); break;
    case GeometryFormat::kXyz: geometry = io_detail::parseXyz(bytes, sourceName); break;
    default: throw InputError(sourceName + ": unknown geometry format");
  }
  // Nothing downstream can simulate an empty shape; saying so here names the file.
  if (geometry.positions.empty()) throw InputError(sourceName + ": the file holds no vertices");
  return geometry;
}

}  // namespace shellsim
