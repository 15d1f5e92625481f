// Reading the real test models and writing a binary PLY frame, in bytes per second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "shellsim/io.hpp"

namespace {

const std::filesystem::path kData = SHELLSIM_DATA_DIR;

// The file is read into memory once, so that the benchmark measures parsing, not the disk.
std::vector<std::byte> slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

void parseModel(benchmark::State& state, shellsim::GeometryFormat format, const char* file) {
  const std::vector<std::byte> bytes = slurp(kData / file);
  if (bytes.empty()) {
    state.SkipWithError("model file missing");
    return;
  }
  for (auto _ : state) {
    shellsim::Geometry g = shellsim::parseGeometry(format, bytes, file);
    benchmark::DoNotOptimize(g.positions.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes.size()));
}

void BM_ReadBunnyObj(benchmark::State& state) {
  parseModel(state, shellsim::GeometryFormat::kObj, "stanford-bunny.obj");
}
BENCHMARK(BM_ReadBunnyObj)->Unit(benchmark::kMillisecond);

void BM_ReadIgeaPly(benchmark::State& state) {
  parseModel(state, shellsim::GeometryFormat::kPly, "igea.ply");
}
BENCHMARK(BM_ReadIgeaPly)->Unit(benchmark::kMillisecond);

// Writes the bunny as a binary PLY frame, including the atomic rename.
void BM_WriteBunnyPly(benchmark::State& state) {
  const shellsim::Geometry g = shellsim::readGeometry(kData / "stanford-bunny.obj");
  const auto path = std::filesystem::temp_directory_path() /
                    ("shellsim-bench-" + std::to_string(::getpid()) + ".ply");
  for (auto _ : state) shellsim::writePly(path, g);
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(std::filesystem::file_size(path)));
  std::filesystem::remove(path);
}
BENCHMARK(BM_WriteBunnyPly)->Unit(benchmark::kMillisecond);

}  // namespace
