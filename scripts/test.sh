#!/usr/bin/env bash
# scripts/test.sh - configure, build (kernels for sm_90a and sm_100a) and run every test; then build the host code
# again with AddressSanitizer + UBSan and run the CPU tests under them, and with ThreadSanitizer for the CPU tests that
# run threads; then fuzz the API's validation with libFuzzer (clang) for GG_FUZZ_SECONDS (default 60). On a machine
# without a GPU the `gpu` and `multigpu` tests report SKIPPED.
# When something is missing it stops and prints the command that installs it.
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
  else
    missing "the CUDA toolkit (nvcc)" "see https://developer.nvidia.com/cuda-downloads (CUDA 12.8 or newer for sm_100a)"
  fi
fi
[ -f /usr/include/cmocka.h ] || [ -n "${CMAKE_PREFIX_PATH:-}" ] ||
  missing cmocka "sudo apt-get install -y libcmocka-dev"
command -v pkg-config >/dev/null || missing pkg-config "sudo apt-get install -y pkg-config"
command -v clang >/dev/null && [ -f "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ] ||
  missing "clang with libFuzzer" "sudo apt-get install -y clang libclang-rt-14-dev   (Debian 12)"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# configure DIR ARGS...: the tree configured into DIR, with Ninja where it is installed, unless DIR was configured
# before: it keeps its generator (CMake refuses another, e.g. after docs/building.md's step-by-step build in build/)
configure() {
  local dir=$1
  shift
  if [ -f "$dir/CMakeCache.txt" ]; then cmake -S "$root" -B "$dir" "$@"
  else cmake -S "$root" -B "$dir" "${generator[@]}" "$@"; fi
}
configure "$build" -DCMAKE_BUILD_TYPE=Release -DGG_WERROR=ON
cmake --build "$build" --parallel "$(nproc)"
ctest --test-dir "$build" --output-on-failure

# variant DIR TARGET CMAKE_ARGS...: the tree configured into DIR with those arguments (sm_90a kernels, no bench) and
# TARGET built (all when empty); the log in DIR/build.log, shown when a step fails.
variant() {
  local dir=$1 target=$2
  shift 2
  mkdir -p "$dir"
  configure "$dir" -DCMAKE_CUDA_ARCHITECTURES=90a -DGG_BUILD_BENCH=OFF "$@" > "$dir/build.log" ||
    { cat "$dir/build.log"; exit 1; }
  cmake --build "$dir" --parallel "$(nproc)" ${target:+--target "$target"} >> "$dir/build.log" ||
    { tail -40 "$dir/build.log"; exit 1; }
}

echo "== CPU tests under AddressSanitizer and UBSan"
sanitize=$build-sanitize
variant "$sanitize" "" -DCMAKE_BUILD_TYPE=Debug -DGG_WERROR=ON -DGG_SANITIZE=ON
ctest --test-dir "$sanitize" --output-on-failure -L cpu

echo "== the CPU tests that run threads (label threads) under ThreadSanitizer"
# A second thread inside a claimed context, the data-parallel watchdog thread, the tune cache's concurrent savers.
tsan=$build-tsan
variant "$tsan" gg_threads_tests -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DGG_TSAN=ON -DGG_BUILD_EXAMPLES=OFF
ctest --test-dir "$tsan" --output-on-failure -L threads

echo "== libFuzzer over the API's validation, on the CUDA fakes (${GG_FUZZ_SECONDS:-60} s)"
# tests/fuzz/fuzz_api.c: the host code built by clang with coverage, ASan and UBSan; a crash fails the run and leaves
# its input in $fuzz/. The last line, FUZZ {...}, is what scripts/collect_reliability.py reads.
fuzz=$build-fuzz
variant "$fuzz" fuzz_api -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DGG_FUZZ=ON -DGG_BUILD_EXAMPLES=OFF
mkdir -p "$fuzz/corpus"
t0=$(date +%s)
"$fuzz/tests/fuzz_api" -max_total_time="${GG_FUZZ_SECONDS:-60}" -print_final_stats=1 -artifact_prefix="$fuzz/" \
  "$fuzz/corpus" > "$fuzz/fuzz.log" 2>&1 || { tail -60 "$fuzz/fuzz.log"; exit 1; }
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$fuzz/fuzz.log")
echo "FUZZ {\"execs\": ${execs:-0}, \"seconds\": $(( $(date +%s) - t0 ))}"
