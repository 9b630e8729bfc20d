#!/usr/bin/env bash
# scripts/test.sh - configure, build (kernels for sm_90a and sm_100a) and run every test; then build the host code
# again with AddressSanitizer + UBSan and run the CPU tests under them, and with ThreadSanitizer for the CPU tests that
# run threads; then fuzz the API's validation with libFuzzer (clang) for GG_FUZZ_SECONDS (default 60). On a machine without a GPU the `gpu` and `multigpu` tests report SKIPPED.
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
  else missing "the CUDA toolkit (nvcc)" "see https://developer.nvidia.com/cuda-downloads (CUDA 12.8 or newer for sm_100a)"; fi
fi
[ -f /usr/include/cmocka.h ] || [ -n "${CMAKE_PREFIX_PATH:-}" ] || missing cmocka "sudo apt-get install -y libcmocka-dev"
command -v pkg-config >/dev/null || missing pkg-config "sudo apt-get install -y pkg-config"
command -v clang >/dev/null && [ -f "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ] ||
  missing "clang with libFuzzer" "sudo apt-get install -y clang libclang-rt-14-dev   (Debian 12)"

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

echo "== the CPU tests that run threads (label threads) under ThreadSanitizer"
# A second thread inside a claimed context, the data-parallel watchdog thread, the tune cache's concurrent savers.
tsan=$build-tsan
mkdir -p "$tsan"
cmake -S "$root" -B "$tsan" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DGG_TSAN=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DGG_BUILD_BENCH=OFF -DGG_BUILD_EXAMPLES=OFF > "$tsan/build.log" ||
  { cat "$tsan/build.log"; exit 1; }
cmake --build "$tsan" --parallel "$(nproc)" --target gg_threads_tests >> "$tsan/build.log" ||
  { tail -40 "$tsan/build.log"; exit 1; }
ctest --test-dir "$tsan" --output-on-failure -L threads

echo "== libFuzzer over the API's validation, on the CUDA fakes (${GG_FUZZ_SECONDS:-60} s)"
# tests/fuzz/fuzz_api.c: the host code built by clang with coverage, ASan and UBSan; a crash fails the run and leaves
# its input in $fuzz/. The last line, FUZZ {...}, is what scripts/collect_reliability.py reads.
fuzz=$build-fuzz
mkdir -p "$fuzz/corpus"
cmake -S "$root" -B "$fuzz" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DGG_FUZZ=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DGG_BUILD_BENCH=OFF -DGG_BUILD_EXAMPLES=OFF > "$fuzz/build.log" ||
  { cat "$fuzz/build.log"; exit 1; }
cmake --build "$fuzz" --parallel "$(nproc)" --target fuzz_api >> "$fuzz/build.log" ||
  { tail -40 "$fuzz/build.log"; exit 1; }
t0=$(date +%s)
"$fuzz/tests/fuzz_api" -max_total_time="${GG_FUZZ_SECONDS:-60}" -print_final_stats=1 -artifact_prefix="$fuzz/" \
  "$fuzz/corpus" > "$fuzz/fuzz.log" 2>&1 || { tail -60 "$fuzz/fuzz.log"; exit 1; }
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$fuzz/fuzz.log")
echo "FUZZ {\"execs\": ${execs:-0}, \"seconds\": $(( $(date +%s) - t0 ))}"
