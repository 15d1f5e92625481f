// Fuzz target for the scene parser: any bytes must give a SceneDef or a shellsim::Error,
// never a crash, a hang, a sanitizer report or another exception type.
#include <cstddef>
#include <cstdint>
#include <string>

#include "shellsim/errors.hpp"
#include "shellsim/scene.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // "." as the scene folder: geometry paths are only checked for existence, never read.
    const shellsim::SceneDef scene = shellsim::parseScene(text, "fuzz", ".");
    (void)scene;
  } catch (const shellsim::Error&) {
    // Rejected input is the expected outcome for most bytes.
  }
  return 0;
}
