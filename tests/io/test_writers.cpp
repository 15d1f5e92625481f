// Frame writers: round trips through the readers, VTK structure, atomic replacement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "io/io_test_util.hpp"

namespace shellsim::test {
namespace {

// Two triangles with normals and colours that are exact in 8 bits.
Geometry sample(bool withExtras) {
  Geometry g;
  g.positions = {0, 0, 0, 1, 0, 0, 1, 1, 0.5, 0, 1, -0.25};
  g.triangles = {0, 1, 2, 0, 2, 3};
  if (withExtras) {
    g.normals = {0, 0, 1, 0, 0, 1, 0, 0.6, 0.8, 0, 1, 0};
    g.colors = {1, 0, 0, 0, 1, 0, 0, 0, 1, 51.0f / 255, 102.0f / 255, 1};
  }
  return g;
}

void expectNear(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << "at " << i;
}

TEST(WritePly, RoundTripsMeshesWithNormalsAndColours) {
  ScratchDir dir;
  for (bool extras : {false, true}) {
    const Geometry g = sample(extras);
    const auto p = dir.file(extras ? "full.ply" : "plain.ply");
    writePly(p, g);
    EXPECT_NE(readFile(p).find("format binary_little_endian 1.0"), std::string::npos);
    const Geometry r = readGeometry(p);
    expectNear(r.positions, g.positions, 1e-7);  // float32 on disk
    EXPECT_EQ(r.triangles, g.triangles);
    expectNear(r.normals, g.normals, 1e-7);
    EXPECT_EQ(r.colors, g.colors);
  }
}

// The frames' piece of each vertex comes back from PLY (the renderer colours pieces by it).
TEST(WritePly, RoundTripsPieces) {
  ScratchDir dir;
  Geometry g = sample(true);
  g.pieces = {0, 0, 3, 1};
  const auto p = dir.file("pieces.ply");
  writePly(p, g);
  EXPECT_EQ(readGeometry(p).pieces, g.pieces);
  g.pieces.clear();
  writePly(p, g);
  EXPECT_TRUE(readGeometry(p).pieces.empty());
}

TEST(WritePly, PointCloudsHaveNoFaceElement) {
  ScratchDir dir;
  Geometry g = sample(true);
  g.triangles.clear();
  const auto p = dir.file("cloud.ply");
  writePly(p, g);
  EXPECT_EQ(readFile(p).find("element face"), std::string::npos);
  const Geometry r = readGeometry(p);
  EXPECT_TRUE(r.isPointCloud());
  EXPECT_EQ(r.vertexCount(), 4);
}

TEST(WriteObj, RoundTripsExactly) {
  ScratchDir dir;
  Geometry g = sample(true);
  g.positions[0] = 0.1;  // not exact in binary: the text must carry all 17 digits
  g.positions[1] = 1.0 / 3.0;
  const auto p = dir.file("mesh.obj");
  writeObj(p, g);
  const Geometry r = readGeometry(p);
  EXPECT_EQ(r.positions, g.positions);
  EXPECT_EQ(r.triangles, g.triangles);
  expectNear(r.normals, g.normals, 1e-15);
  EXPECT_EQ(r.colors, g.colors);
  Geometry plain = sample(false);
  writeObj(p, plain);
  const Geometry q = readGeometry(p);
  EXPECT_EQ(q.positions, plain.positions);
  EXPECT_FALSE(q.hasNormals());
}

TEST(WriteVtp, MeshesAsPolysAndCloudsAsVerts) {
  ScratchDir dir;
  const auto mesh = dir.file("mesh.vtp");
  writeVtp(mesh, sample(true));
  const std::string text = readFile(mesh);
  EXPECT_NE(text.find("<VTKFile type=\"PolyData\""), std::string::npos);
  EXPECT_NE(text.find("NumberOfPoints=\"4\""), std::string::npos);
  EXPECT_NE(text.find("NumberOfPolys=\"2\""), std::string::npos);
  EXPECT_NE(text.find("<Polys>"), std::string::npos);
  EXPECT_NE(text.find("Name=\"Normals\""), std::string::npos);
  EXPECT_NE(text.find("0 1 2\n0 2 3\n"), std::string::npos);
  EXPECT_NE(text.find("3 6\n"), std::string::npos);  // offsets
  EXPECT_NE(text.find("</VTKFile>"), std::string::npos);

  Geometry cloud = sample(false);
  cloud.triangles.clear();
  const auto points = dir.file("cloud.vtp");
  writeVtp(points, cloud);
  const std::string c = readFile(points);
  EXPECT_NE(c.find("NumberOfVerts=\"4\""), std::string::npos);
  EXPECT_NE(c.find("<Verts>"), std::string::npos);
  EXPECT_EQ(c.find("<PointData"), std::string::npos);
  EXPECT_NE(c.find("0 1 2 3\n"), std::string::npos);
  EXPECT_NE(c.find("1 2 3 4\n"), std::string::npos);
}

TEST(WriteFileAtomically, ReplacesTheOldFileAndLeavesNoTemporary) {
  ScratchDir dir;
  const auto p = dir.write("frame.txt", "old");
  writeFileAtomically(p, [](std::ostream& out) { out << "new"; });
  EXPECT_EQ(readFile(p), "new");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileAtomically, AFailingWriterKeepsTheOldFile) {
  ScratchDir dir;
  const auto p = dir.write("frame.txt", "old");
  EXPECT_THROW(writeFileAtomically(p,
                                   [](std::ostream& out) {
                                     out << "half a fra";
                                     throw std::runtime_error("killed");
                                   }),
               std::runtime_error);
  EXPECT_EQ(readFile(p), "old");
  EXPECT_FALSE(std::filesystem::exists(dir.file(".frame.txt.tmp." + std::to_string(::getpid()))));
}

TEST(WriteFileAtomically, UnwritablePlacesAreIoErrorsNamingThePath) {
  ScratchDir dir;
  expectError<IoError>([&] { writePly(dir.file("missing/folder/f.ply"), sample(false)); },
                       {"missing/folder/f.ply"});
  // The target is a folder: the rename cannot replace it.
  std::filesystem::create_directories(dir.file("taken.obj/inner"));
  expectError<IoError>([&] { writeObj(dir.file("taken.obj"), sample(false)); },
                       {"taken.obj", "rename"});
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary left behind
}

TEST(WriteFileAtomically, AFailedStreamIsAnIoErrorAndKeepsTheOldFile) {
  // A write that fails (disk full, quota) leaves the stream bad; simulated here, since
  // a real full disk cannot be arranged in a test without touching device files.
  ScratchDir dir;
  const auto p = dir.write("frame.ply", "old");
  expectError<IoError>(
      [&] { writeFileAtomically(p, [](std::ostream& out) { out.setstate(std::ios::badbit); }); },
      {"frame.ply", "write failed"});
  EXPECT_EQ(readFile(p), "old");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Writers, InconsistentGeometryIsRefused) {
  ScratchDir dir;
  Geometry g = sample(false);
  g.triangles.push_back(0);
  expectError<InputError>([&] { writePly(dir.file("bad.ply"), g); }, {"bad.ply"});
  g = sample(false);
  g.triangles[2] = 9;
  expectError<InputError>([&] { writeObj(dir.file("bad.obj"), g); }, {"bad.obj", "9"});
  g = sample(false);
  g.normals = {0, 0, 1};
  expectError<InputError>([&] { writeVtp(dir.file("bad.vtp"), g); }, {"bad.vtp", "normals"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.ply")));
  g = sample(false);
  g.vertexScalars.push_back({"damage", {0.5f}});
  expectError<InputError>([&] { writePly(dir.file("bad.ply"), g); }, {"bad.ply", "damage"});
  g.vertexScalars.back() = {"two words", std::vector<float>(g.positions.size() / 3, 0.0f)};
  expectError<InputError>([&] { writeVtp(dir.file("bad.vtp"), g); }, {"bad.vtp", "two words"});
}

// Per-vertex quantities (a torn body's damage) are PLY vertex properties the reader skips
// and VTP point arrays, with one value per vertex.
TEST(Writers, VertexScalarsArePlyPropertiesAndVtpPointArrays) {
  ScratchDir dir;
  Geometry g = sample(true);
  const auto n = static_cast<size_t>(g.vertexCount());
  std::vector<float> damage(n);
  for (size_t i = 0; i < n; ++i) damage[i] = 0.25f * static_cast<float>(i);
  g.vertexScalars.push_back({"damage", damage});
  writePly(dir.file("s.ply"), g);
  writeVtp(dir.file("s.vtp"), g);
  const Geometry back = readGeometry(dir.file("s.ply"));
  EXPECT_EQ(back.vertexCount(), g.vertexCount());
  EXPECT_EQ(back.triangles, g.triangles);
  expectNear(back.positions, g.positions, 1e-6);
  // The PLY reader gives them back (the renderer tints plastic strain with them).
  ASSERT_EQ(back.vertexScalars.size(), 1U);
  EXPECT_EQ(back.vertexScalars[0], g.vertexScalars[0]);
  std::ifstream vtp(dir.file("s.vtp"));
  const std::string text(std::istreambuf_iterator<char>(vtp), {});
  const size_t array = text.find("<DataArray type=\"Float32\" Name=\"damage\" format=\"ascii\">\n");
  ASSERT_NE(array, std::string::npos);
  std::istringstream values(text.substr(text.find('\n', array) + 1));
  for (size_t i = 0; i < n; ++i) {
    float v = -1;
    values >> v;
    EXPECT_EQ(v, damage[i]) << i;
  }
}

}  // namespace
}  // namespace shellsim::test
