#!/usr/bin/env bash
# Runs issue 24's corpus of awkward meshes (tests/dynamics/test_awkward_corpus.cpp) through
# the command line as a user would, and renders a contact sheet of every run: the scene, the
# frames and render/contact_sheet.png land in OUT/<mesh>_<model>/, and OUT/table.md lists
# how each run ended (exit code, status, warnings).
#   scripts/awkward-corpus.sh [OUT] [BUILD]     (default OUT=out/awkward, BUILD=build/ci)
# The meshes are the test's own (written by it with SHELLSIM_CORPUS_DIR), the material
# and drop the same: E = 5 MPa, nu = 0.35, 4 mm (0.04 mm tiny, 4 cm huge), 2/s damping,
# 10 cm onto a floor with friction 0.5, 1.5 s at 30 frames per second (20 s for the huge
# sphere). A run whose validation warns of millions of steps is validated but not run.
# Extra arguments after BUILD are mesh names: only those are run.
set -euo pipefail
out=${1:-out/awkward}
build=${2:-build/ci}
shellsim="$build/apps/shellsim/shellsim"
corpus_test="$build/tests/dynamics/test_awkward_corpus"
for tool in "$shellsim" "$corpus_test"; do
  [[ -x $tool ]] || { echo "awkward-corpus: $tool not built" >&2; exit 2; }
done
mkdir -p "$out/meshes"
out=$(cd "$out" && pwd)
# Any one case writes the whole corpus.
SHELLSIM_CORPUS_DIR="$out/meshes" "$corpus_test" --gtest_filter='*star_fan_mass_spring*' >/dev/null

if [[ ! -f $out/table.md ]]; then
  echo "| mesh | model | exit | status | warnings | first line of the error or warning |" >"$out/table.md"
  echo "|---|---|---|---|---|---|" >>"$out/table.md"
fi
only=("${@:3}")
for mesh_file in "$out"/meshes/*.obj; do
  mesh=$(basename "$mesh_file" .obj)
  if [[ ${#only[@]} -gt 0 && ! " ${only[*]} " =~ " $mesh " ]]; then continue; fi
  thickness=0.004
  duration=1.5
  [[ $mesh == tiny_sphere ]] && thickness=0.00004
  [[ $mesh == huge_sphere ]] && thickness=0.04 && duration=20
  for model in fiber discrete_shell mass_spring inelastic_shell; do
    run="$out/${mesh}_${model}"
    rm -rf "$run"
    mkdir -p "$run"
    cat >"$run/scene.json" <<EOF
{
  "obstacles": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1], "friction": 0.5}],
  "bodies": [
    {
      "name": "$mesh",
      "file": "$mesh_file",
      "model": "$model",
      "material": {"young_modulus": 5e6, "poisson": 0.35, "thickness": $thickness,
                   "density": 1000, "damping": 2}
    }
  ],
  "time": {"duration": $duration, "frame_rate": 30},
  "output": {"folder": "$run/frames", "formats": ["ply"]}
}
EOF
    code=0
    "$shellsim" validate "$run/scene.json" >"$run/validate.txt" 2>&1 || code=$?
    # A run that validation says takes millions of steps (the tiny sphere, the teapot's
    # slivers) is left out, as the test leaves it out after its first frame.
    skipped=no
    if [[ $code -eq 0 ]] && grep -q "the run takes about" "$run/validate.txt"; then
      skipped=yes
    elif [[ $code -eq 0 ]]; then
      "$shellsim" run "$run/scene.json" --quiet >"$run/run.txt" 2>&1 || code=$?
      if [[ -f $run/frames/summary.json ]]; then
        "$shellsim" render "$run/frames" --size 480x270 --no-video -q || true
      fi
    fi
    status=$( (grep -o '"status": *"[a-z]*"' "$run/frames/summary.json" 2>/dev/null || echo '-') |
      sed 's/.*: *"\(.*\)"/\1/')
    [[ $skipped == yes ]] && status="warned, not run"
    warnings=$(grep -c "warning:" "$run/validate.txt" || true)
    first=$( (grep -h -m1 -E "error|warning" "$run/run.txt" "$run/validate.txt" 2>/dev/null || true) |
      head -1 | cut -c1-200 | tr '|' '/')
    echo "| $mesh | $model | $code | $status | $warnings | $first |" >>"$out/table.md"
  done
done
cat "$out/table.md"
