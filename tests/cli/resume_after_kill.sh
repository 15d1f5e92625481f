#!/usr/bin/env bash
# A run killed with SIGKILL in the middle and resumed with --resume writes the same frames,
# byte for byte, and the same simulated quantities in its summary as a run never stopped.
# With SIGNAL INT or TERM (Ctrl-C, a batch system's stop) the run stops by itself between
# two steps: exit 130 or 143 and `status: interrupted` in its summary, then the same.
#   resume_after_kill.sh SHELLSIM SCENE FRAMES KILL_AFTER_FRAME WORKDIR [SIGNAL]
# The killed run uses 2 threads, the resumed and the whole run 1.
set -euo pipefail
cli=$1 scene=$2 frames=$3 kill_after=$4 work=$5 signal=${6:-KILL}
case $signal in
  KILL) expected_code=137 expected_status=running ;;
  INT) expected_code=130 expected_status=interrupted ;;
  TERM) expected_code=143 expected_status=interrupted ;;
  *) echo "unknown signal $signal"; exit 1 ;;
esac
whole=$work/whole
killed=$work/killed
rm -rf "$whole" "$killed"

"$cli" run "$scene" --frames "$frames" --out "$whole" --threads 1 --quiet

set +e
SHELLSIM_KILL_AFTER_FRAME=$kill_after SHELLSIM_KILL_SIGNAL=$signal "$cli" run "$scene" \
  --frames "$frames" --out "$killed" --threads 2 --quiet
code=$?
set -e
if [[ $code -ne $expected_code ]]; then
  echo "the run was to get SIG$signal after frame $kill_after (exit $expected_code), it exited with $code"
  exit 1
fi
grep -q "\"status\": \"$expected_status\"" "$killed/summary.json" || {
  echo "the stopped run's summary does not say $expected_status"
  exit 1
}
# `info` tells a killed run (its summary still says running) from a live one.
info=$("$cli" info "$killed")
if [[ $signal == KILL && $info != *"stopped without finishing"*"--resume"* ]]; then
  echo "info does not say the killed run stopped: $info"
  exit 1
fi
if [[ $signal != KILL && $info != *"interrupted"* ]]; then
  echo "info does not say the run was interrupted: $info"
  exit 1
fi
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
  grep -v -E '"(wall_seconds|forces|integrate|contact|checks|output|inelastic|surface|pid|host)":' "$1"
}
diff <(strip "$whole/summary.json") <(strip "$killed/summary.json")
echo "resumed after SIG$signal at frame $kill_after: $count frame files and the summary identical"
