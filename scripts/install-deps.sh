#!/usr/bin/env bash
# Installs every system package shellsim needs to build, test, fuzz and render.
# Non-interactive and idempotent: packages already present are left alone.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-dev            # libFuzzer + sanitizers for the fuzz build
  libeigen3-dev libnanoflann-dev libtbb-dev
  libcli11-dev nlohmann-json3-dev libtinyobjloader-dev
  libgmp-dev                       # exact rationals for the geometric predicates
  libcgal-dev libmpfr-dev          # mesh repair: CGAL's polygon-mesh processing
  libgtest-dev libgmock-dev libbenchmark-dev
  libpng-dev ffmpeg libembree-dev   # previews: PNG, H.264 video, CPU ray casting
  libbullet-dev                     # rigid fragments (double precision) and the soft-body benchmark
  libsuitesparse-dev libopenblas-serial-dev  # the benchmarks' CHOLMOD comparison (serial BLAS)
  python3-dev pybind11-dev python3-numpy  # the Python module (/usr/bin/python3)
  python3-matplotlib                # the Python example's plot
  blender                           # shellsim export-blend (Blender 3.4, run headless)
  slurm-wlm munge                   # shellsim sweep --slurm: its test runs a one-node cluster
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
