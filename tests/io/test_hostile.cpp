// Broken and hostile files: every one must give an InputError or IoError that names the
// file and the line or byte, quickly and without a large allocation.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <random>

#include "io/io_test_util.hpp"

// The largest single allocation while `gTrackAllocations` is set, to prove that a
// header declaring billions of elements is rejected before anything is reserved.
namespace {
std::atomic<bool> gTrackAllocations{false};
std::atomic<size_t> gLargestAllocation{0};

void* allocate(size_t size) {
  if (gTrackAllocations.load(std::memory_order_relaxed)) {
    size_t seen = gLargestAllocation.load(std::memory_order_relaxed);
    while (size > seen && !gLargestAllocation.compare_exchange_weak(seen, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(size_t size) {
  return allocate(size);
}
void* operator new[](size_t size) {
  return allocate(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}

namespace shellsim::test {
namespace {

// Parses `text`, expecting an InputError whose message holds every part, within a
// second, allocating at most 64 times the input size plus a few kilobytes.
void expectRejected(GeometryFormat format, std::string_view text, const std::string& name,
                    const std::vector<std::string>& parts) {
  gLargestAllocation = 0;
  const auto start = std::chrono::steady_clock::now();
  gTrackAllocations = true;
  expectError<InputError>([&] { (void)parseText(format, text, name); }, parts);
  gTrackAllocations = false;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  EXPECT_LE(gLargestAllocation.load(), 64 * text.size() + 16384) << "for " << name;
}

const std::string kPlyXyz = "property float x\nproperty float y\nproperty float z\n";

// --- filesystem ----------------------------------------------------------------------

TEST(HostileFiles, MissingPathIsAnIoErrorNamingIt) {
  expectError<IoError>([] { (void)readGeometry("/nonexistent/folder/mesh.obj"); },
                       {"/nonexistent/folder/mesh.obj"});
}

TEST(HostileFiles, DirectoryIsAnIoError) {
  ScratchDir dir;
  std::filesystem::create_directory(dir.file("folder.ply"));
  expectError<IoError>([&] { (void)readGeometry(dir.file("folder.ply")); },
                       {"folder.ply", "directory"});
}

TEST(HostileFiles, UnreadableFileIsAnIoError) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: chmod 000 does not stop root from reading";
  ScratchDir dir;
  const auto p = dir.write("secret.obj", "v 0 0 0\n");
  std::filesystem::permissions(p, std::filesystem::perms::none);
  expectError<IoError>([&] { (void)readGeometry(p); }, {"secret.obj"});
}

TEST(HostileFiles, EmptyFilesOfEveryFormat) {
  ScratchDir dir;
  for (const char* name : {"e.obj", "e.ply", "e.off", "e.stl", "e.xyz"}) {
    const auto p = dir.write(name, "");
    expectError<InputError>([&] { (void)readGeometry(p); }, {name, "empty"});
  }
  // Not empty, but nothing in it.
  expectRejected(GeometryFormat::kObj, "# only a comment\n", "c.obj", {"c.obj", "no vertices"});
  expectRejected(GeometryFormat::kXyz, "\n# nothing\n\n", "c.xyz", {"c.xyz", "no vertices"});
}

TEST(HostileFiles, BinaryGarbageInEveryFormat) {
  std::mt19937 random(1234);
  for (int round = 0; round < 20; ++round) {
    std::string bytes(static_cast<size_t>(50 + 37 * round), '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    for (auto [format, name] : {std::pair{GeometryFormat::kObj, "g.obj"},
                                {GeometryFormat::kPly, "g.ply"},
                                {GeometryFormat::kOff, "g.off"},
                                {GeometryFormat::kStl, "g.stl"},
                                {GeometryFormat::kXyz, "g.xyz"}}) {
      SCOPED_TRACE(name);
      expectRejected(format, bytes, name, {name});
    }
  }
}

// --- truncation ------------------------------------------------------------------------

TEST(HostileFiles, TruncatedTextFiles) {
  expectRejected(GeometryFormat::kObj, "v 0 0 0\nv 1 0 0\nv 0 1", "t.obj", {"t.obj:3:", "x y z"});
  expectRejected(GeometryFormat::kObj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2", "t.obj",
                 {"t.obj:4:", "3 vertices"});
  // Padded numbers, so that the counts fit the bytes and the reader gets to the cut.
  expectRejected(GeometryFormat::kOff, "OFF\n3 1 0\n0.00 0.00 0.00\n1.00 0.00 0.00\n", "t.off",
                 {"t.off:4:", "end of file"});
  expectRejected(GeometryFormat::kOff, "OFF\n3 1 0\n0.0 0.0 0.0\n1.0 0.0 0.0\n0.0 1.0 0.0\n3 0 1",
                 "t.off", {"t.off:6:"});
  // Without padding the declared counts cannot fit, which is caught at the counts line.
  expectRejected(GeometryFormat::kOff, "OFF\n3 1 0\n0 0 0\n1 0 0\n", "t.off",
                 {"t.off:2:", "3 vertices"});
  expectRejected(GeometryFormat::kXyz, "0 0 0\n1 1", "t.xyz", {"t.xyz:2:", "found 2"});
  expectRejected(GeometryFormat::kStl, "solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\n",
                 "t.stl", {"t.stl:4:", "end of file"});
  expectRejected(GeometryFormat::kPly, "ply\nformat ascii 1.0\nelement vertex 2\n" + kPlyXyz,
                 "t.ply", {"t.ply:6:", "end_header"});
  expectRejected(
      GeometryFormat::kPly,
      "ply\nformat ascii 1.0\nelement vertex 2\n" + kPlyXyz + "end_header\n0.0 0.0 0.0\n1.0 1.0\n",
      "t.ply", {"t.ply:9:", "end of file"});
}

TEST(HostileFiles, BinaryPlyCutMidVertex) {
  for (PlyEncoding e : {PlyEncoding::kLittle, PlyEncoding::kBig}) {
    const std::string header = plyHeader(e, "element vertex 2\n" + kPlyXyz);
    PlyBody b(e);
    b.put(0.0f).put(0.0f).put(0.0f).put(1.0f).put(2.0f);  // 5 of 6 floats
    const std::string bytes = header + b.bytes();
    // The element is rejected up front: 2 vertices of 12 bytes do not fit in 20.
    expectRejected(GeometryFormat::kPly, bytes, "cut.ply", {"cut.ply:3:", "vertex"});
    // With the count fitting but a face list cut short, the error is a byte offset.
    const std::string faceHeader =
        plyHeader(e, "element vertex 3\n" + kPlyXyz +
                         "element face 1\nproperty list uchar int vertex_indices\n");
    PlyBody f(e);
    for (int i = 0; i < 9; ++i) f.put(0.0f);
    f.put<uint8_t>(3).put<int32_t>(0).put<int32_t>(1);
    const std::string cutFace = faceHeader + f.bytes();
    expectRejected(GeometryFormat::kPly, cutFace, "cut.ply",
                   {"cut.ply: byte " + std::to_string(faceHeader.size() + 36)});
    // Cut in the middle of the second of three vertices, with no face to catch it up front.
    const std::string three =
        plyHeader(e,
                  "element vertex 3\nproperty float x\nproperty float y\nproperty float z\n"
                  "element junk 1\nproperty uchar a\n");
    PlyBody v(e);
    for (int i = 0; i < 8; ++i) v.put(0.0f);
    v.put<uint8_t>(1);  // 33 bytes: fits 3 x 12 bytes? no, so the header check fires
    expectRejected(GeometryFormat::kPly, three + v.bytes(), "cut.ply", {"cut.ply:3:"});
  }
}

TEST(HostileFiles, BinaryStlWithAWrongSize) {
  std::string bytes(84 + 50 + 7, '\0');
  bytes[80] = 1;
  expectRejected(GeometryFormat::kStl, bytes, "s.stl", {"s.stl: byte 80", "1 triangles"});
  std::string solid = "solid header" + std::string(72, '\0');
  solid[80] = 2;
  solid += std::string(60, '\0');
  expectRejected(GeometryFormat::kStl, solid, "s.stl", {"s.stl: byte 80"});
}

// --- wrong counts and huge counts --------------------------------------------------------

TEST(HostileFiles, HugeCountsInTinyHeadersFailFast) {
  for (PlyEncoding e : {PlyEncoding::kAscii, PlyEncoding::kLittle, PlyEncoding::kBig}) {
    const std::string text = plyHeader(e, "element vertex 2000000000\n" + kPlyXyz) + "0 0 0 1 1 1";
    EXPECT_LT(text.size(), 150u);
    expectRejected(GeometryFormat::kPly, text, "huge.ply", {"huge.ply:3:", "2000000000"});
    const std::string faces =
        plyHeader(e, "element vertex 1\n" + kPlyXyz +
                         "element face 2000000000\nproperty list uchar int vertex_indices\n") +
        (e == PlyEncoding::kAscii ? std::string("0 0 0\n") : std::string(12, '\0'));
    expectRejected(GeometryFormat::kPly, faces, "huge.ply", {"huge.ply:7:", "2000000000"});
  }
  // A list length of 4 billion in a binary face.
  const std::string header = plyHeader(
      PlyEncoding::kLittle,
      "element vertex 3\n" + kPlyXyz + "element face 1\nproperty list uint int vertex_indices\n");
  PlyBody b(PlyEncoding::kLittle);
  for (int i = 0; i < 9; ++i) b.put(0.0f);
  b.put<uint32_t>(4000000000u).put<int32_t>(0);
  expectRejected(GeometryFormat::kPly, header + b.bytes(), "list.ply",
                 {"list.ply: byte " + std::to_string(header.size() + 36), "past the end"});
  // Counts beyond int32 and negative counts.
  expectRejected(GeometryFormat::kPly, "ply\nformat ascii 1.0\nelement vertex 99999999999\n",
                 "big.ply", {"big.ply:3:"});
  expectRejected(GeometryFormat::kPly, "ply\nformat ascii 1.0\nelement vertex -1\n", "neg.ply",
                 {"neg.ply:3:"});
  expectRejected(GeometryFormat::kOff, "OFF\n2000000000 1 0\n0 0 0\n", "huge.off",
                 {"huge.off:2:", "2000000000"});
  expectRejected(GeometryFormat::kOff, "OFF\n3 2000000000 0\n0 0 0\n", "huge.off", {"huge.off:2:"});
  std::string stl(84, '\0');
  stl[80] = stl[81] = stl[82] = '\x77';
  expectRejected(GeometryFormat::kStl, stl, "huge.stl", {"huge.stl: byte 80"});
}

TEST(HostileFiles, WrongCounts) {
  expectRejected(GeometryFormat::kOff, "OFF\n4 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", "w.off",
                 {"w.off:"});
  expectRejected(GeometryFormat::kOff, "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n4 0 1 2\n", "w.off",
                 {"w.off:6:", "fewer"});
  expectRejected(GeometryFormat::kPly,
                 "ply\nformat ascii 1.0\nelement vertex 3\n" + kPlyXyz +
                     "element face 2\nproperty list uchar int vertex_indices\nend_header\n"
                     "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n",
                 "w.ply", {"w.ply:", "end of file"});
  expectRejected(GeometryFormat::kPly,
                 "ply\nformat ascii 1.0\nelement vertex 3\n" + kPlyXyz +
                     "element face 1\nproperty list uchar int vertex_indices\nend_header\n"
                     "0 0 0\n1 0 0\n0 1 0\n2 0 1\n",
                 "w.ply", {"w.ply:13:", "fewer than 3"});
  expectRejected(GeometryFormat::kXyz, "0 0 0\n0 0 0 0 0 1\n", "w.xyz", {"w.xyz:2:"});
  expectRejected(GeometryFormat::kXyz, "0 0 0 0\n", "w.xyz", {"w.xyz:1:", "found 4"});
}

// --- values --------------------------------------------------------------------------

TEST(HostileFiles, NonFiniteCoordinates) {
  expectRejected(GeometryFormat::kObj, "v 0 0 0\nv nan 0 0\n", "n.obj", {"n.obj:2:", "finite"});
  expectRejected(GeometryFormat::kObj, "v 0 0 0\nv 0 inf 0\n", "n.obj", {"n.obj:2:", "finite"});
  expectRejected(GeometryFormat::kObj, "v 0 0 0\nv 0 zero 0\n", "n.obj",
                 {"n.obj:2:", "not a number"});
  expectRejected(GeometryFormat::kOff, "OFF\n1 0 0\n0 -inf 0\n", "n.off", {"n.off:3:", "finite"});
  expectRejected(GeometryFormat::kXyz, "0 0 0\n1e999 0 0\n", "n.xyz", {"n.xyz:2:"});
  expectRejected(GeometryFormat::kXyz, "0 0 0\nNaN 0 0\n", "n.xyz", {"n.xyz:2:", "finite"});
  expectRejected(GeometryFormat::kStl, "solid\nfacet normal 0 0 0\nouter loop\nvertex 0 0 nan\n",
                 "n.stl", {"n.stl:4:", "finite"});
  expectRejected(GeometryFormat::kPly,
                 "ply\nformat ascii 1.0\nelement vertex 1\n" + kPlyXyz + "end_header\n0 nan 0\n",
                 "n.ply", {"n.ply:8:", "finite"});
  for (PlyEncoding e : {PlyEncoding::kLittle, PlyEncoding::kBig}) {
    const std::string header = plyHeader(e, "element vertex 2\n" + kPlyXyz);
    PlyBody b(e);
    b.put(0.0f)
        .put(0.0f)
        .put(0.0f)
        .put(1.0f)
        .put(std::numeric_limits<float>::quiet_NaN())
        .put(0.0f);
    expectRejected(GeometryFormat::kPly, header + b.bytes(), "n.ply",
                   {"n.ply: byte " + std::to_string(header.size() + 16), "finite"});
  }
  std::string stl(84 + 50, '\0');
  stl[80] = 1;
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(stl.data() + 84 + 12 + 4, &inf, 4);
  expectRejected(GeometryFormat::kStl, stl, "n.stl", {"n.stl: byte 100", "finite"});
}

TEST(HostileFiles, IndicesOutOfRange) {
  const std::string tri = "v 0 0 0\nv 1 0 0\nv 0 1 0\n";
  expectRejected(GeometryFormat::kObj, tri + "f 1 2 4\n", "i.obj", {"i.obj:4:", "out of range"});
  expectRejected(GeometryFormat::kObj, tri + "f 1 2 0\n", "i.obj", {"i.obj:4:"});
  expectRejected(GeometryFormat::kObj, tri + "f -1 -2 -4\n", "i.obj", {"i.obj:4:", "-4"});
  expectRejected(GeometryFormat::kObj, tri + "f -2147483648 1 2\n", "i.obj", {"i.obj:4:"});
  expectRejected(GeometryFormat::kObj, tri + "vn 0 0 1\nf 1//1 2//2 3//1\n", "i.obj",
                 {"i.obj:5:", "normal"});
  expectRejected(GeometryFormat::kObj, tri + "f 1 2 3\nf 1 2 99999999999\n", "i.obj", {"i.obj:5:"});
  expectRejected(GeometryFormat::kOff, "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n", "i.off",
                 {"i.off:6:", "out of range"});
  expectRejected(GeometryFormat::kOff, "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 -1 2\n", "i.off",
                 {"i.off:6:"});
  for (PlyEncoding e : {PlyEncoding::kAscii, PlyEncoding::kLittle, PlyEncoding::kBig}) {
    const std::string header =
        plyHeader(e, "element vertex 3\n" + kPlyXyz +
                         "element face 1\nproperty list uchar int vertex_indices\n");
    PlyBody b(e);
    for (int i = 0; i < 9; ++i) b.put(0.0f);
    b.endLine().put<uint8_t>(3).put<int32_t>(0).put<int32_t>(1).put<int32_t>(-3);
    const std::string where = e == PlyEncoding::kAscii
                                  ? "i.ply:11:"
                                  : "i.ply: byte " + std::to_string(header.size() + 45);
    expectRejected(GeometryFormat::kPly, header + b.bytes(), "i.ply", {where, "out of range"});
  }
}

TEST(HostileFiles, MalformedHeaders) {
  expectRejected(GeometryFormat::kPly, "plx\n", "h.ply", {"h.ply:1:"});
  expectRejected(GeometryFormat::kPly, "ply\nformat xml 1.0\nend_header\n", "h.ply", {"h.ply:2:"});
  expectRejected(GeometryFormat::kPly, "ply\nformat ascii 1.0\nproperty float x\nend_header\n",
                 "h.ply", {"h.ply:3:"});
  expectRejected(GeometryFormat::kPly,
                 "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n0\n",
                 "h.ply", {"h.ply:3:", "x, y and z"});
  expectRejected(GeometryFormat::kPly,
                 "ply\nformat ascii 1.0\nelement vertex 1\nproperty list float int x\n", "h.ply",
                 {"h.ply:4:"});
  expectRejected(GeometryFormat::kPly, "ply\nelement vertex 0\nend_header\n", "h.ply",
                 {"h.ply:", "format"});
  expectRejected(GeometryFormat::kOff, "PFF\n", "h.off", {"h.off:1:"});
  expectRejected(GeometryFormat::kStl, "solid\nfacet\nouter loop\nvertex 0 0\n", "h.stl",
                 {"h.stl:4:"});
  expectRejected(GeometryFormat::kStl, "hello", "h.stl", {"h.stl: byte 0"});
}

}  // namespace
}  // namespace shellsim::test
