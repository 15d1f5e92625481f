#!/usr/bin/env bash
# Installs what shellsim needs, builds it (Release) and runs the built-in default scene.
# Frames and summary.json land in out/default/ (or the folder given as the first argument),
# then the run is rendered there: render/frame_*.png, video.mp4, contact_sheet.png and
# energy.png.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/default}"

./scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --parallel "$(nproc)"
./build/release/apps/shellsim/shellsim run --out "$out"
./build/release/apps/shellsim/shellsim render "$out"
echo "frames: $out/frames   summary: $out/summary.json"
echo "video: $out/video.mp4   contact sheet: $out/contact_sheet.png   energy: $out/energy.png"
# The Python module, built for the system's python3 (docs/python.md).
PYTHONPATH=build/release/python /usr/bin/python3 -c \
  'import shellsim; print("python: import shellsim works (models:", ", ".join(shellsim.model_names()) + ")")'
echo "python: PYTHONPATH=build/release/python /usr/bin/python3, or cmake --install build/release --component python"
