#!/usr/bin/env bash
# Installs what shellsim needs, builds everything with warnings as errors and runs the
# whole test suite: unit and end-to-end tests (ctest, fast tests; slow ones are labelled
# "slow" and run with `ctest --preset ci -L slow`), then every libFuzzer target for
# SHELLSIM_FUZZ_SECONDS seconds each (default 20) under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
fuzz_seconds="${SHELLSIM_FUZZ_SECONDS:-20}"

./scripts/install-deps.sh

cmake --preset ci
cmake --build --preset ci --parallel "$jobs"
ctest --preset ci --parallel "$jobs"

cmake --preset fuzz -DSHELLSIM_FUZZ_SECONDS="$fuzz_seconds"
cmake --build --preset fuzz --parallel "$jobs"
ctest --preset fuzz --parallel "$jobs"
