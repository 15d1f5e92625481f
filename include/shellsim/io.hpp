// Reading geometry files and writing frames, summaries and other outputs.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "shellsim/geometry.hpp"

namespace shellsim {

enum class GeometryFormat { kObj, kPly, kOff, kStl, kXyz };

// The format named by a path's extension (case-insensitive: .obj .ply .off .stl .xyz);
// throws InputError naming the path when the extension is none of these.
[[nodiscard]] GeometryFormat formatFromPath(const std::filesystem::path& path);

// Reads a mesh or point cloud. Polygons are fan-triangulated. Every error is an
// InputError (malformed content: names the file and the line or byte offset) or an
// IoError (missing, unreadable, a directory); no input crashes, hangs or makes an
// allocation larger than a small multiple of the file size.
[[nodiscard]] Geometry readGeometry(const std::filesystem::path& path);

// The same, from bytes in memory; `sourceName` is used in error messages. The
// fuzz targets call this.
[[nodiscard]] Geometry parseGeometry(GeometryFormat format, std::span<const std::byte> bytes,
                                     const std::string& sourceName);

// Writes `path` atomically: `write` fills a temporary file beside `path`, which is then
// flushed and renamed over `path`. A run killed midway leaves either the old file or
// the new one, never half a file. Throws IoError naming the path.
void writeFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write);

// Frame writers, all atomic. A geometry without triangles is written as points.
void writePly(const std::filesystem::path& path, const Geometry& geometry);  // binary LE
void writeObj(const std::filesystem::path& path, const Geometry& geometry);
void writeVtp(const std::filesystem::path& path, const Geometry& geometry);  // VTK XML PolyData

}  // namespace shellsim
