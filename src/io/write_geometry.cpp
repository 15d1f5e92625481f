// Frame writers. Every file is written through writeFileAtomically, so a reader (or a
// run killed midway) never sees half a frame.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>

#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

namespace shellsim {
namespace {

// A geometry whose arrays disagree is a bug in the caller; writing it would produce a
// file that no reader accepts, so it is refused with the path it was meant for.
void checkShape(const std::filesystem::path& path, const Geometry& g) {
  const size_t n = g.positions.size();
  auto fail = [&](const std::string& reason) {
    throw InputError(path.string() + ": cannot write: " + reason);
  };
  if (n % 3 != 0) fail("positions must hold 3 values per vertex");
  if (!g.normals.empty() && g.normals.size() != n) fail("normals must be empty or match positions");
  if (!g.colors.empty() && g.colors.size() != n) fail("colors must be empty or match positions");
  if (g.triangles.size() % 3 != 0) fail("triangles must hold 3 indices each");
  if (!g.pieces.empty() && 3 * g.pieces.size() != n) fail("pieces must be empty or one per vertex");
  for (const VertexScalar& scalar : g.vertexScalars) {
    if (!isVertexScalarName(scalar.name)) {
      fail("vertex scalar '" + scalar.name + "': a name is letters, digits and '_'");
    }
    if (3 * scalar.values.size() != n)
      fail("vertex scalar '" + scalar.name + "' must have one value per vertex");
  }
  const auto nVertices = static_cast<int64_t>(n / 3);
  if (nVertices > std::numeric_limits<int32_t>::max()) fail("too many vertices");
  for (int32_t index : g.triangles) {
    if (index < 0 || index >= nVertices)
      fail("triangle index " + std::to_string(index) + " is out of range");
  }
}

template <class T>
void putLE(std::ostream& out, T value) {
  auto raw = std::bit_cast<std::array<char, sizeof(T)>>(value);
  if constexpr (std::endian::native == std::endian::big) std::reverse(raw.begin(), raw.end());
  out.write(raw.data(), raw.size());
}

unsigned char colorByte(float c) {
  const float clamped = std::isfinite(c) ? std::clamp(c, 0.0f, 1.0f) : 0.0f;
  return static_cast<unsigned char>(std::lround(clamped * 255.0f));
}

// The flush of an ofstream only reaches the kernel; fsync makes the rename below
// publish data that is on disk, not just a name.
bool syncFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

}  // namespace

void writeFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write) {
  // Appended piece by piece: `"." + string` trips a false -Wrestrict in GCC 12 at -O2.
  std::string tempName = ".";
  tempName += path.filename().string();
  tempName += ".tmp.";
  tempName += std::to_string(::getpid());
  const std::filesystem::path temp = path.parent_path() / tempName;
  auto fail = [&](const std::string& reason) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw IoError(path.string() + ": " + reason);
  };
  if (path.filename().empty()) throw IoError(path.string() + ": not a file path");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      const int err = errno;
      fail(std::string("cannot create a temporary file beside it: ") + std::strerror(err));
    }
    try {
      write(out);
    } catch (...) {
      // The caller's error says more than ours would; only the temporary file is ours.
      out.close();
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw;
    }
    out.flush();
    if (!out) fail("write failed (disk full?)");
    out.close();
    if (!out) fail("closing the file failed");
  }
  if (!syncFile(temp)) {
    const int err = errno;
    fail(std::string("fsync failed: ") + std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) fail("cannot rename the temporary file into place: " + ec.message());
}

void writePly(const std::filesystem::path& path, const Geometry& geometry) {
  checkShape(path, geometry);
  writeFileAtomically(path, [&](std::ostream& out) {
    const size_t n = geometry.positions.size() / 3;
    const bool normals = geometry.hasNormals();
    const bool colors = !geometry.colors.empty();
    out << "ply\nformat binary_little_endian 1.0\ncomment written by shellsim\n";
    out << "element vertex " << n << "\nproperty float x\nproperty float y\nproperty float z\n";
    if (normals) out << "property float nx\nproperty float ny\nproperty float nz\n";
    if (colors) out << "property uchar red\nproperty uchar green\nproperty uchar blue\n";
    const bool pieces = !geometry.pieces.empty();
    if (pieces) out << "property int piece\n";
    for (const VertexScalar& scalar : geometry.vertexScalars) {
      out << "property float " << scalar.name << '\n';
    }
    if (!geometry.isPointCloud()) {
      out << "element face " << geometry.triangleCount()
          << "\nproperty list uchar int vertex_indices\n";
    }
    out << "end_header\n";
    for (size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) putLE(out, static_cast<float>(geometry.positions[3 * i + k]));
      if (normals) {
        for (int k = 0; k < 3; ++k) putLE(out, static_cast<float>(geometry.normals[3 * i + k]));
      }
      if (colors) {
        for (int k = 0; k < 3; ++k) putLE(out, colorByte(geometry.colors[3 * i + k]));
      }
      if (pieces) putLE(out, geometry.pieces[i]);
      for (const VertexScalar& scalar : geometry.vertexScalars) putLE(out, scalar.values[i]);
    }
    for (size_t t = 0; t < geometry.triangles.size(); t += 3) {
      putLE(out, static_cast<unsigned char>(3));
      for (int k = 0; k < 3; ++k) putLE(out, geometry.triangles[t + k]);
    }
  });
}

void writeObj(const std::filesystem::path& path, const Geometry& geometry) {
  checkShape(path, geometry);
  writeFileAtomically(path, [&](std::ostream& out) {
    // max_digits10 digits make the text round-trip to the same doubles.
    out.precision(std::numeric_limits<double>::max_digits10);
    const size_t n = geometry.positions.size() / 3;
    const bool normals = geometry.hasNormals();
    const bool colors = !geometry.colors.empty();
    out << "# written by shellsim\n";
    for (size_t i = 0; i < n; ++i) {
      out << "v " << geometry.positions[3 * i] << ' ' << geometry.positions[3 * i + 1] << ' '
          << geometry.positions[3 * i + 2];
      if (colors) {
        // The widespread `v x y z r g b` extension (MeshLab, tinyobjloader).
        out << ' ' << geometry.colors[3 * i] << ' ' << geometry.colors[3 * i + 1] << ' '
            << geometry.colors[3 * i + 2];
      }
      out << '\n';
    }
    if (normals) {
      for (size_t i = 0; i < n; ++i) {
        out << "vn " << geometry.normals[3 * i] << ' ' << geometry.normals[3 * i + 1] << ' '
            << geometry.normals[3 * i + 2] << '\n';
      }
    }
    int32_t group = -1;  // the piece of the faces written last
    for (size_t t = 0; t < geometry.triangles.size(); t += 3) {
      // Faces go into the group of their first corner's piece, so that an importer can
      // separate the fragments (Blender: split by group).
      if (!geometry.pieces.empty()) {
        const int32_t piece = geometry.pieces[static_cast<size_t>(geometry.triangles[t])];
        if (piece != group) out << "g piece_" << piece << '\n';
        group = piece;
      }
      out << 'f';
      for (int k = 0; k < 3; ++k) {
        const int64_t index = static_cast<int64_t>(geometry.triangles[t + k]) + 1;
        out << ' ' << index;
        if (normals) out << "//" << index;
      }
      out << '\n';
    }
  });
}

void writeVtp(const std::filesystem::path& path, const Geometry& geometry) {
  checkShape(path, geometry);
  writeFileAtomically(path, [&](std::ostream& out) {
    out.precision(std::numeric_limits<double>::max_digits10);
    const size_t n = geometry.positions.size() / 3;
    const size_t m = geometry.triangles.size() / 3;
    const bool points = geometry.isPointCloud();
    auto values = [&](const auto& array) {
      for (size_t i = 0; i < array.size(); ++i)
        out << (i % 3 == 0 ? (i == 0 ? "" : "\n") : " ") << array[i];
      out << '\n';
    };
    out << "<?xml version=\"1.0\"?>\n"
        << "<VTKFile type=\"PolyData\" version=\"1.0\" byte_order=\"LittleEndian\" "
           "header_type=\"UInt64\">\n"
        << "<PolyData>\n"
        << "<Piece NumberOfPoints=\"" << n << "\" NumberOfVerts=\"" << (points ? n : 0)
        << "\" NumberOfLines=\"0\" NumberOfStrips=\"0\" NumberOfPolys=\"" << (points ? 0 : m)
        << "\">\n";
    const bool pieces = !geometry.pieces.empty();
    auto pieceArray = [&](const auto& value, size_t count) {
      out << "<DataArray type=\"Int32\" Name=\"Piece\" format=\"ascii\">\n";
      for (size_t i = 0; i < count; ++i) out << value(i) << (i + 1 == count ? "\n" : " ");
      out << "</DataArray>\n";
    };
    if (geometry.hasNormals() || !geometry.colors.empty() || pieces ||
        !geometry.vertexScalars.empty()) {
      out << "<PointData" << (geometry.hasNormals() ? " Normals=\"Normals\"" : "") << ">\n";
      if (geometry.hasNormals()) {
        out << "<DataArray type=\"Float64\" Name=\"Normals\" NumberOfComponents=\"3\" "
               "format=\"ascii\">\n";
        values(geometry.normals);
        out << "</DataArray>\n";
      }
      if (!geometry.colors.empty()) {
        out << "<DataArray type=\"Float32\" Name=\"Colors\" NumberOfComponents=\"3\" "
               "format=\"ascii\">\n";
        values(geometry.colors);
        out << "</DataArray>\n";
      }
      if (pieces) pieceArray([&](size_t i) { return geometry.pieces[i]; }, n);
      for (const VertexScalar& scalar : geometry.vertexScalars) {
        out << "<DataArray type=\"Float32\" Name=\"" << scalar.name << "\" format=\"ascii\">\n";
        for (size_t i = 0; i < n; ++i) out << scalar.values[i] << (i + 1 == n ? "\n" : " ");
        out << "</DataArray>\n";
      }
      out << "</PointData>\n";
    }
    if (pieces) {  // a cell's piece: its first point's (a vertex cell's, its point's)
      out << "<CellData>\n";
      pieceArray(
          [&](size_t c) {
            return geometry.pieces[points ? c : static_cast<size_t>(geometry.triangles[3 * c])];
          },
          points ? n : m);
      out << "</CellData>\n";
    }
    out << "<Points>\n<DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">\n";
    values(geometry.positions);
    out << "</DataArray>\n</Points>\n";
    // A cell array is connectivity (every cell's point ids) plus offsets (where each
    // cell ends in connectivity).
    out << (points ? "<Verts>\n" : "<Polys>\n");
    out << "<DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">\n";
    if (points) {
      for (size_t i = 0; i < n; ++i) out << i << (i + 1 == n ? "\n" : " ");
    } else {
      values(geometry.triangles);
    }
    out << "</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">\n";
    const size_t cells = points ? n : m;
    const size_t stride = points ? 1 : 3;
    for (size_t i = 0; i < cells; ++i) out << (i + 1) * stride << (i + 1 == cells ? "\n" : " ");
    out << "</DataArray>\n" << (points ? "</Verts>\n" : "</Polys>\n");
    out << "</Piece>\n</PolyData>\n</VTKFile>\n";
  });
}

}  // namespace shellsim
