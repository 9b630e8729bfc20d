#!/usr/bin/env bash
# scripts/test.sh - configure, build (kernels for sm_90a and sm_100a) and run every test; then build the host code
# again with AddressSanitizer + UBSan and run the CPU tests under them. On a machine without a GPU the `gpu` and
# `multigpu` tests report SKIPPED. When something is missing it stops and prints the command that installs it.
#
#   scripts/test.sh [build-dir]        (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

missing() {
  echo "scripts/test.sh: $1 is missing. Install it with:" >&2
  echo "    $2" >&2
  exit 1
}

command -v cmake >/dev/null || missing cmake "sudo apt-get install -y cmake"
if ! command -v nvcc >/dev/null; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH
  else missing "the CUDA toolkit (nvcc)" "see https://developer.nvidia.com/cuda-downloads (CUDA 12.8 or newer for sm_100a)"; fi
fi
[ -f /usr/include/cmocka.h ] || [ -n "${CMAKE_PREFIX_PATH:-}" ] || missing cmocka "sudo apt-get install -y libcmocka-dev"
command -v pkg-config >/dev/null || missing pkg-config "sudo apt-get install -y pkg-config"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGG_WERROR=ON
cmake --build "$build" --parallel "$(nproc)"
ctest --test-dir "$build" --output-on-failure

echo "== CPU tests under AddressSanitizer and UBSan"
sanitize=$build-sanitize
mkdir -p "$sanitize"
cmake -S "$root" -B "$sanitize" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DGG_WERROR=ON -DGG_SANITIZE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DGG_BUILD_BENCH=OFF > "$sanitize/build.log" || { cat "$sanitize/build.log"; exit 1; }
cmake --build "$sanitize" --parallel "$(nproc)" >> "$sanitize/build.log" || { tail -40 "$sanitize/build.log"; exit 1; }
ctest --test-dir "$sanitize" --output-on-failure -L cpu
