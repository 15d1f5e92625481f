// Fuzz target for the STL reader: any input must either parse or raise a shellsim::Error;
// any other exception, crash, sanitizer report, hang or huge allocation is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto geometry = shellsim::parseGeometry(shellsim::GeometryFormat::kStl,
                                                  std::as_bytes(std::span(data, size)), "fuzz");
    // What a reader hands out must be usable without further checks.
    const size_t n = geometry.positions.size();
    if (n % 3 != 0 || geometry.triangles.size() % 3 != 0) __builtin_trap();
    if (!geometry.normals.empty() && geometry.normals.size() != n) __builtin_trap();
    if (!geometry.colors.empty() && geometry.colors.size() != n) __builtin_trap();
    for (const double x : geometry.positions) {
      if (!std::isfinite(x)) __builtin_trap();
    }
    for (const int32_t index : geometry.triangles) {
      if (index < 0 || index >= geometry.vertexCount()) __builtin_trap();
    }
  } catch (const shellsim::Error&) {
  }
  return 0;
}
