#!/usr/bin/env bash
# A run killed with SIGKILL in the middle and resumed with --resume writes the same frames,
# byte for byte, and the same simulated quantities in its summary as a run never stopped.
#   resume_after_kill.sh SHELLSIM SCENE FRAMES KILL_AFTER_FRAME WORKDIR
# The killed run uses 2 threads, the resumed and the whole run 1.
set -euo pipefail
cli=$1 scene=$2 frames=$3 kill_after=$4 work=$5
whole=$work/whole
killed=$work/killed
rm -rf "$whole" "$killed"

"$cli" run "$scene" --frames "$frames" --out "$whole" --threads 1 --quiet

set +e
SHELLSIM_KILL_AFTER_FRAME=$kill_after "$cli" run "$scene" --frames "$frames" --out "$killed" \
  --threads 2 --quiet
code=$?
set -e
if [[ $code -ne 137 ]]; then
  echo "the run was to be killed after frame $kill_after (exit 137), it exited with $code"
  exit 1
fi
grep -q '"status": "running"' "$killed/summary.json" || {
  echo "the killed run's summary does not say it was running"
  exit 1
}
last=$(printf '%05d' "$((frames - 1))")
if compgen -G "$killed/frames/*_$last.*" > /dev/null; then
  echo "the killed run already wrote its last frame"
  exit 1
fi

"$cli" run "$scene" --frames "$frames" --out "$killed" --threads 1 --quiet --resume

count=0
for file in "$whole"/frames/*; do
  cmp "$file" "$killed/frames/$(basename "$file")"
  count=$((count + 1))
done
if [[ $count -lt $frames ]]; then
  echo "only $count frame files"
  exit 1
fi
# The summaries, less what depends on the wall clock.
strip() {
  grep -v -E '"(wall_seconds|forces|integrate|contact|checks|output|inelastic|surface)":' "$1"
}
diff <(strip "$whole/summary.json") <(strip "$killed/summary.json")
echo "resumed after a kill at frame $kill_after: $count frame files and the summary identical"
