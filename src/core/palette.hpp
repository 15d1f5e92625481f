// Colours for bodies and for the pieces of a torn body: light, saturated and far apart in
// hue, so that neighbouring fragments read as separate under shading (Okabe-Ito inspired).
// One palette for the renderer (body i and mesh component k of body i take entry i + k) and
// the recorder (piece k of a torn point-cloud body i, written as per-point colours).
#pragma once

#include <cstdint>

namespace shellsim {

inline constexpr float kPiecePalette[][3] = {
    {0.90f, 0.55f, 0.20f}, {0.25f, 0.55f, 0.85f}, {0.35f, 0.70f, 0.40f}, {0.85f, 0.35f, 0.45f},
    {0.60f, 0.45f, 0.80f}, {0.90f, 0.80f, 0.30f}, {0.30f, 0.75f, 0.75f}, {0.75f, 0.55f, 0.45f},
};
inline constexpr int32_t kPiecePaletteSize = sizeof(kPiecePalette) / sizeof(kPiecePalette[0]);

// RGB in [0, 1] of palette entry `index` >= 0 (wraps around).
inline const float* piecePaletteColor(int64_t index) {
  return kPiecePalette[index % kPiecePaletteSize];
}

}  // namespace shellsim
