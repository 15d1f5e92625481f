// Every reader on small files written here, and on the real models in SHELLSIM_DATA_DIR.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "io/io_test_util.hpp"

namespace shellsim::test {
namespace {

const std::filesystem::path kData = SHELLSIM_DATA_DIR;

// Triangles that fan triangulation makes of the `f` lines, counted straight from the
// text: a polygon with k corners gives k - 2 triangles.
int64_t objTrianglesFromText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  int64_t triangles = 0;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word;
    if (!(words >> word) || word != "f") continue;
    int64_t corners = 0;
    while (words >> word) ++corners;
    triangles += corners - 2;
  }
  return triangles;
}

int64_t objVertexLines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  int64_t count = 0;
  while (std::getline(in, line)) count += line.rfind("v ", 0) == 0 ? 1 : 0;
  return count;
}

struct ModelCase {
  const char* file;
  int32_t vertices;
  int64_t faces;  // as /work/shared/data/README.md lists them
};

class RealModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(RealModel, LoadsWithTheDocumentedCounts) {
  const ModelCase c = GetParam();
  const auto path = kData / c.file;
  const Geometry g = readGeometry(path);
  EXPECT_EQ(g.vertexCount(), c.vertices);
  EXPECT_EQ(g.vertexCount(), objVertexLines(path));
  // Triangle files: faces are triangles. Quads (suzanne): the count fan triangulation gives.
  EXPECT_EQ(g.triangleCount(), objTrianglesFromText(path));
  if (std::string(c.file) != "suzanne.obj") {
    EXPECT_EQ(g.triangleCount(), c.faces);
  }
  for (int32_t i : g.triangles) ASSERT_TRUE(i >= 0 && i < g.vertexCount());
}

INSTANTIATE_TEST_SUITE_P(
    Data, RealModel,
    ::testing::Values(ModelCase{"stanford-bunny.obj", 35947, 69451},
                      ModelCase{"cow.obj", 2903, 5804}, ModelCase{"spot.obj", 2930, 5856},
                      ModelCase{"teapot.obj", 3644, 6320}, ModelCase{"suzanne.obj", 507, 500}),
    [](const ::testing::TestParamInfo<ModelCase>& param) {
      std::string name = param.param.file;
      std::replace_if(
          name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
      return name;
    });

TEST(RealModels, SuzanneIsQuadsWithPerVertexNormals) {
  const Geometry g = readGeometry(kData / "suzanne.obj");
  // 500 faces, all quads or triangles: more than 500 triangles, at most 1000.
  EXPECT_GT(g.triangleCount(), 500);
  EXPECT_LE(g.triangleCount(), 1000);
  ASSERT_TRUE(g.hasNormals());
  for (size_t i = 0; i < g.normals.size(); i += 3) {
    EXPECT_NEAR(std::hypot(g.normals[i], g.normals[i + 1], g.normals[i + 2]), 1.0, 1e-12);
  }
}

TEST(RealModels, SpotHasTexcoordsButNoNormals) {
  const Geometry g = readGeometry(kData / "spot.obj");
  EXPECT_FALSE(g.hasNormals());
}

// The Igea triangle count, computed from the raw bytes without the PLY reader: after
// 134,345 float xyz triples comes one int32 list of strip indices where -1 ends a strip.
int64_t igeaTrianglesFromBytes(const std::string& bytes) {
  const size_t body = bytes.find("end_header\n") + 11;
  size_t at = body + 134345 * 12;
  auto readInt = [&](size_t offset) {
    int32_t v = 0;
    std::memcpy(&v, bytes.data() + offset, 4);
    return v;
  };
  const int32_t n = readInt(at);
  at += 4;
  int64_t triangles = 0;
  std::vector<int32_t> strip;
  auto flush = [&] {
    for (size_t i = 2; i < strip.size(); ++i) {
      const int32_t a = strip[i - 2], b = strip[i - 1], c = strip[i];
      if (a != b && b != c && a != c) ++triangles;
    }
    strip.clear();
  };
  for (int32_t i = 0; i < n; ++i) {
    const int32_t v = readInt(at + 4 * static_cast<size_t>(i));
    if (v == -1) {
      flush();
    } else {
      strip.push_back(v);
    }
  }
  flush();
  return triangles;
}

TEST(RealModels, IgeaTriangleStrips) {
  const auto path = kData / "igea.ply";
  const Geometry g = readGeometry(path);
  EXPECT_EQ(g.vertexCount(), 134345);
  EXPECT_EQ(g.triangleCount(), igeaTrianglesFromBytes(readFile(path)));
  EXPECT_GT(g.triangleCount(), 200000);  // a closed-ish scan has about twice as many triangles
  for (int32_t i : g.triangles) ASSERT_TRUE(i >= 0 && i < g.vertexCount());
}

TEST(RealModels, EveryFileInTheDataFolderLoads) {
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kData)) {
    if (entry.path().extension() == ".md") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW({
      const Geometry g = readGeometry(entry.path());
      EXPECT_GT(g.vertexCount(), 0);
    });
    ++loaded;
  }
  EXPECT_GE(loaded, 6);
}

// --- format detection -------------------------------------------------------------

TEST(FormatFromPath, ExtensionsAnyCase) {
  EXPECT_EQ(formatFromPath("a/b.obj"), GeometryFormat::kObj);
  EXPECT_EQ(formatFromPath("B.PLY"), GeometryFormat::kPly);
  EXPECT_EQ(formatFromPath("c.Off"), GeometryFormat::kOff);
  EXPECT_EQ(formatFromPath("d.stl"), GeometryFormat::kStl);
  EXPECT_EQ(formatFromPath("e.xyz"), GeometryFormat::kXyz);
  expectError<InputError>([] { (void)formatFromPath("mesh.fbx"); }, {"mesh.fbx", ".fbx"});
  expectError<InputError>([] { (void)formatFromPath("noext"); }, {"noext"});
}

// --- OBJ -----------------------------------------------------------------------------

Geometry obj(std::string_view text) {
  return parseText(GeometryFormat::kObj, text, "t.obj");
}

TEST(Obj, EveryIndexFormGivesTheSameMesh) {
  const std::string verts =
      "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 1 1\nvn 0 0 1\n";
  const std::vector<std::string> faces = {
      "f 1 2 3\nf 1 3 4\n",
      "f 1/1 2/2 3/3\nf 1/1 3/3 4/1\n",
      "f 1//1 2//1 3//1\nf 1//1 3//1 4//1\n",
      "f 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/3/1 4/2/1\n",
      "f -4 -3 -2\nf -4 -2 -1\n",
      "f -4/-3/-1 -3/-2/-1 -2/-1/-1\nf -4//-1 -2//-1 -1//-1\n",
  };
  const std::vector<int32_t> expected = {0, 1, 2, 0, 2, 3};
  for (const auto& f : faces) {
    SCOPED_TRACE(f);
    const Geometry g = obj(verts + f);
    EXPECT_EQ(g.vertexCount(), 4);
    EXPECT_EQ(g.triangles, expected);
  }
}

TEST(Obj, NormalsPerVertexWhenEveryCornerHasOne) {
  const Geometry g = obj("v 0 0 0\nv 1 0 0\nv 0 1 0\nvn 0 0 2\nvn 0 0 1\nf 1//1 2//2 3//2\n");
  ASSERT_TRUE(g.hasNormals());
  EXPECT_EQ(g.normals, (std::vector<double>{0, 0, 1, 0, 0, 1, 0, 0, 1}));
  // The two corner normals of vertex 1 average (and normalise) to the diagonal.
  const Geometry h =
      obj("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nvn 1 0 0\nvn 0 1 0\n"
          "f 1//1 2//1 3//1\nf 2//2 4//2 3//2\n");
  ASSERT_TRUE(h.hasNormals());
  EXPECT_NEAR(h.normals[3], std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(h.normals[4], std::sqrt(0.5), 1e-15);
  // One corner without a normal: none at all.
  EXPECT_FALSE(obj("v 0 0 0\nv 1 0 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3\n").hasNormals());
}

TEST(Obj, PolygonsAreFanTriangulated) {
  const Geometry g = obj("v 0 0 0\nv 1 0 0\nv 2 1 0\nv 1 2 0\nv 0 1 0\nf 1 2 3 4 5\n");
  EXPECT_EQ(g.triangles, (std::vector<int32_t>{0, 1, 2, 0, 2, 3, 0, 3, 4}));
  // More than 255 corners (tinyobjloader's LoadObj would wrap the count).
  std::string big;
  std::string face = "f";
  for (int i = 0; i < 300; ++i) {
    big += "v " + std::to_string(std::cos(i * 0.02)) + " " + std::to_string(std::sin(i * 0.02)) +
           " 0\n";
    face += " " + std::to_string(i + 1);
  }
  EXPECT_EQ(obj(big + face + "\n").triangleCount(), 298);
}

TEST(Obj, CommentsGroupsCrLfWeightsAndColors) {
  const Geometry g =
      obj("# c\r\ng part\r\no thing\r\nusemtl red\r\ns 1\r\nv 0 0 0 1\r\nv 1 0 0 1\r\n"
          "v 0 1 0 1\r\n\r\nf 1 2 3\r\nl 1 2\r\n");
  EXPECT_EQ(g.vertexCount(), 3);
  EXPECT_EQ(g.triangleCount(), 1);
  EXPECT_TRUE(g.colors.empty());
  const Geometry c = obj("v 0 0 0 1 0 0\nv 1 0 0 0 1 0\nv 0 1 0 0 0 0.5\nf 1 2 3\n");
  EXPECT_EQ(c.colors, (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 0.5f}));
  EXPECT_EQ(c.positions[3], 1.0);
}

TEST(Obj, PointCloudWithOneNormalPerVertex) {
  const Geometry g = obj("v 0 0 0\nv 1 0 0\nvn 0 0 3\nvn 0 4 0\n");
  EXPECT_TRUE(g.isPointCloud());
  EXPECT_EQ(g.normals, (std::vector<double>{0, 0, 3, 0, 4, 0}));
}

TEST(Obj, CoordinatesKeepFullDoublePrecision) {
  const Geometry g = obj("v 0.1 1e-300 -123456789.123456789\n");
  EXPECT_EQ(g.positions[0], 0.1);
  EXPECT_EQ(g.positions[1], 1e-300);
  EXPECT_EQ(g.positions[2], -123456789.123456789);
}

// --- PLY -----------------------------------------------------------------------------

// A quad with normals and uchar colours, plus an unknown element with a list before the
// vertices and after the faces, in the given encoding.
std::string quadPly(PlyEncoding e) {
  std::string header =
      plyHeader(e,
                "comment a test\nelement material 1\nproperty list uchar float weights\n"
                "property uchar id\n"
                "element vertex 4\nproperty uchar red\nproperty float z\nproperty double x\n"
                "property list ushort int junk\nproperty float y\nproperty float nx\n"
                "property float ny\nproperty float nz\nproperty uchar green\n"
                "property uchar blue\n"
                "element face 1\nproperty uchar flags\nproperty list uchar uint vertex_indices\n"
                "element edge 2\nproperty list int int vertex_pair\nproperty float crease\n");
  PlyBody b(e);
  b.put<uint8_t>(2).put(0.5f).put(1.5f).put<uint8_t>(7).endLine();
  const double xy[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
  for (int i = 0; i < 4; ++i) {
    b.put<uint8_t>(255).put(2.0f).put(xy[i][0]).put<uint16_t>(1).put<int32_t>(i).put(
        static_cast<float>(xy[i][1]));
    b.put(0.0f).put(0.0f).put(2.0f).put<uint8_t>(0).put<uint8_t>(51).endLine();
  }
  b.put<uint8_t>(9)
      .put<uint8_t>(4)
      .put<uint32_t>(0)
      .put<uint32_t>(1)
      .put<uint32_t>(2)
      .put<uint32_t>(3)
      .endLine();
  for (int i = 0; i < 2; ++i)
    b.put<int32_t>(2).put<int32_t>(i).put<int32_t>(i + 1).put(0.25f).endLine();
  return header + b.bytes();
}

TEST(Ply, EveryEncodingReadsTheSame) {
  for (PlyEncoding e : {PlyEncoding::kAscii, PlyEncoding::kLittle, PlyEncoding::kBig}) {
    SCOPED_TRACE(encodingName(e));
    const Geometry g = parseText(GeometryFormat::kPly, quadPly(e), "quad.ply");
    EXPECT_EQ(g.positions, (std::vector<double>{0, 0, 2, 1, 0, 2, 1, 1, 2, 0, 1, 2}));
    EXPECT_EQ(g.triangles, (std::vector<int32_t>{0, 1, 2, 0, 2, 3}));
    ASSERT_TRUE(g.hasNormals());
    EXPECT_EQ(g.normals[2], 1.0);  // normalised from (0, 0, 2)
    ASSERT_EQ(g.colors.size(), 12u);
    EXPECT_EQ(g.colors[0], 1.0f);
    EXPECT_EQ(g.colors[1], 0.0f);
    EXPECT_FLOAT_EQ(g.colors[2], 0.2f);
  }
}

TEST(Ply, VertexIndexNameFloatColoursAndPointClouds) {
  const std::string text =
      plyHeader(PlyEncoding::kAscii,
                "element vertex 3\nproperty float x\nproperty float y\nproperty float z\n"
                "property float red\nproperty float green\nproperty float blue\n"
                "element face 1\nproperty list int short vertex_index\n") +
      "0 0 0 0.5 0.25 1\n1 0 0 0 0 0\n0 1 0 1 1 1\n3 2 1 0\n";
  const Geometry g = parseText(GeometryFormat::kPly, text, "c.ply");
  EXPECT_EQ(g.triangles, (std::vector<int32_t>{2, 1, 0}));
  EXPECT_EQ(g.colors[1], 0.25f);
  const Geometry cloud = parseText(
      GeometryFormat::kPly,
      plyHeader(PlyEncoding::kAscii,
                "element vertex 2\nproperty float x\nproperty float y\nproperty float z\n") +
          "1 2 3\n4 5 6\n",
      "p.ply");
  EXPECT_TRUE(cloud.isPointCloud());
  EXPECT_EQ(cloud.vertexCount(), 2);
}

TEST(Ply, TriangleStripsAlternateWindingAndRestartAtMinusOne) {
  for (PlyEncoding e : {PlyEncoding::kAscii, PlyEncoding::kLittle, PlyEncoding::kBig}) {
    SCOPED_TRACE(encodingName(e));
    PlyBody b(e);
    for (int i = 0; i < 6; ++i)
      b.put(static_cast<float>(i)).put(static_cast<float>(i % 2)).put(0.0f).endLine();
    // Strip 0 1 2 3 4, restart, strip 5 5 4 3 whose first triangle is degenerate.
    const int32_t strip[] = {0, 1, 2, 3, 4, -1, 5, 5, 4, 3};
    b.put<int32_t>(10);
    for (int32_t v : strip) b.put(v);
    b.endLine();
    const std::string text =
        plyHeader(e,
                  "element vertex 6\nproperty float x\nproperty float y\nproperty float z\n"
                  "element tristrips 1\nproperty list int int vertex_indices\n") +
        b.bytes();
    const Geometry g = parseText(GeometryFormat::kPly, text, "s.ply");
    EXPECT_EQ(g.triangles, (std::vector<int32_t>{0, 1, 2, 2, 1, 3, 2, 3, 4, 4, 5, 3}));
  }
}

TEST(Ply, BigEndianDoublesAndCrLfHeader) {
  PlyBody b(PlyEncoding::kBig);
  b.put(1.25).put(-2.5).put(1e100);
  std::string header =
      "ply\r\nformat binary_big_endian 1.0\r\nelement vertex 1\r\nproperty double x\r\n"
      "property double y\r\nproperty double z\r\nend_header\r\n";
  const Geometry g = parseText(GeometryFormat::kPly, header + b.bytes(), "d.ply");
  EXPECT_EQ(g.positions, (std::vector<double>{1.25, -2.5, 1e100}));
}

// --- OFF -----------------------------------------------------------------------------

TEST(Off, TrianglesQuadsAndComments) {
  const Geometry g =
      parseText(GeometryFormat::kOff,
                "OFF\n# a comment\n5 2 0\n0 0 0\n1 0 0\n1 1 0 # trailing\n0 1 0\n\n2 2 2\n"
                "3 0 1 2\n4 0 1 4 3 255 0 0\n",
                "m.off");
  EXPECT_EQ(g.vertexCount(), 5);
  EXPECT_EQ(g.triangles, (std::vector<int32_t>{0, 1, 2, 0, 1, 4, 0, 4, 3}));
}

TEST(Off, CountsOnTheKeywordLineAndVariants) {
  EXPECT_EQ(parseText(GeometryFormat::kOff, "OFF 3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", "a.off")
                .triangleCount(),
            1);
  const Geometry c = parseText(
      GeometryFormat::kOff,
      "COFF\n3 1 0\n0 0 0 255 0 0 255\n1 0 0 0 255 0 255\n0 1 0 0 0 255 255\n3 0 1 2\n", "c.off");
  EXPECT_EQ(c.colors, (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  const Geometry n =
      parseText(GeometryFormat::kOff,
                "NOFF\n3 1 0\n0 0 0 0 0 2\n1 0 0 0 0 1\n0 1 0 0 0 1\n3 0 1 2\n", "n.off");
  EXPECT_EQ(n.normals, (std::vector<double>{0, 0, 1, 0, 0, 1, 0, 0, 1}));
}

// --- STL -----------------------------------------------------------------------------

const float kTetra[4][3][3] = {{{0, 0, 0}, {0, 1, 0}, {1, 0, 0}},
                               {{0, 0, 0}, {1, 0, 0}, {0, 0, 1}},
                               {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}},
                               {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};

std::string binaryStl(const std::string& headerText) {
  std::string out(80, '\0');
  std::copy(headerText.begin(), headerText.end(), out.begin());
  PlyBody b(PlyEncoding::kLittle);  // the same little-endian packing
  b.put<uint32_t>(4);
  for (const auto& tri : kTetra) {
    b.put(0.0f).put(0.0f).put(0.0f);
    for (const auto& p : tri) b.put(p[0]).put(p[1]).put(p[2]);
    b.put<uint16_t>(0);
  }
  return out + b.bytes();
}

TEST(Stl, BinaryEvenWhenTheHeaderSaysSolidAndCornersMerge) {
  for (const std::string header : {"binary", "solid but binary"}) {
    const Geometry g = parseText(GeometryFormat::kStl, binaryStl(header), "t.stl");
    EXPECT_EQ(g.vertexCount(), 4);
    EXPECT_EQ(g.triangleCount(), 4);
    EXPECT_EQ(g.triangles[0], 0);
    EXPECT_EQ(g.triangles[3], 0);  // the same corner again
  }
}

TEST(Stl, AsciiMergesIdenticalPositionsIncludingNegativeZero) {
  const std::string text =
      "solid t\n facet normal 0 0 -1\n  outer loop\n   vertex 0 0 0\n   vertex 0 1 0\n   vertex 1 "
      "0 0\n"
      "  endloop\n endfacet\n facet normal 0 0 1\n  outer loop\n   vertex -0.0 0 0\n   vertex 1 0 "
      "0\n"
      "   vertex 0 0 1.0e0\n  endloop\n endfacet\nendsolid t\n";
  const Geometry g = parseText(GeometryFormat::kStl, text, "a.stl");
  EXPECT_EQ(g.vertexCount(), 4);
  EXPECT_EQ(g.triangles, (std::vector<int32_t>{0, 1, 2, 0, 2, 3}));
}

// --- XYZ -----------------------------------------------------------------------------

TEST(Xyz, PointsWithAndWithoutNormals) {
  const Geometry a = parseText(GeometryFormat::kXyz, "# scan\n\n1 2 3\n4 5 6 # x\n\n", "a.xyz");
  EXPECT_EQ(a.positions, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_FALSE(a.hasNormals());
  const Geometry b = parseText(GeometryFormat::kXyz, "1 2 3 0 0 5\r\n4 5 6 3 0 0\r\n", "b.xyz");
  EXPECT_EQ(b.normals, (std::vector<double>{0, 0, 1, 1, 0, 0}));
  EXPECT_TRUE(b.isPointCloud());
}

TEST(ReadGeometry, ReadsFromDiskByExtension) {
  ScratchDir dir;
  const auto p = dir.write("pts.XYZ", "0 0 0\n1 1 1\n");
  EXPECT_EQ(readGeometry(p).vertexCount(), 2);
}

}  // namespace
}  // namespace shellsim::test
