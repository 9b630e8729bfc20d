#!/usr/bin/env bash
# check.sh STEP - gradgraph as its users get it, one CTest per step (tests/package.cmake registers them):
#   install        cmake --install of the build tree into a fresh prefix (what the other steps use);
#   find_package   this directory's CMake project against the installed package;
#   pkg_config     app.c compiled and linked with the README's pkg-config command against the installed library;
#   subdirectory   this directory's project with gradgraph's source tree as a subdirectory (FetchContent's way);
#   run            the three programs (on a machine without a GPU they report skipped: exit 77).
# install also lists the installed shared library's dependencies as the dynamic loader resolves them with its cache
# ignored (ld.so --inhibit-cache --list), as on a machine where ldconfig does not know the CUDA toolkit's directory:
# its run path must find cuBLASLt and the rest.
# Settings come from the environment: GG_BUILD_DIR, GG_SOURCE_DIR, GG_WORK_DIR, GG_CMAKE, GG_GENERATOR,
# GG_MAKE_PROGRAM, CC, GG_CUDA_COMPILER, GG_CUDA_ROOT, GG_CUDA_ARCHITECTURES, GG_C_LAUNCHER, GG_CUDA_LAUNCHER.
set -euo pipefail
step=$1
here=$(cd "$(dirname "$0")" && pwd)
prefix=$GG_WORK_DIR/prefix
mkdir -p "$GG_WORK_DIR"

# The README's lines are the ones tested here: they must not drift apart.
readme_has() {
  grep -qF -- "$1" "$GG_SOURCE_DIR/README.md" || { echo "README.md no longer shows: $1" >&2; exit 1; }
}

configure() { # build-dir, then extra cache settings
  local dir=$1
  shift
  rm -rf "$dir"
  "$GG_CMAKE" -S "$here" -B "$dir" -G "$GG_GENERATOR" ${GG_MAKE_PROGRAM:+-DCMAKE_MAKE_PROGRAM="$GG_MAKE_PROGRAM"} \
    -DCMAKE_C_COMPILER="$CC" -DCUDAToolkit_ROOT="$GG_CUDA_ROOT" "$@"
  "$GG_CMAKE" --build "$dir"
}

case $step in
install)
  rm -rf "$prefix"
  "$GG_CMAKE" --install "$GG_BUILD_DIR" --prefix "$prefix"
  loader=/lib64/ld-linux-x86-64.so.2
  lib=$(find "$prefix" -name 'libgradgraph.so.*' -type f | head -1)
  if [ -n "$lib" ] && [ -x "$loader" ] && "$loader" --help 2>/dev/null | grep -q -- --inhibit-cache; then
    listed=0
    deps=$("$loader" --inhibit-cache --list "$lib" 2>&1) || listed=$?
    echo "$deps"
    if [ $listed != 0 ] || grep -qE 'not found|cannot open shared object' <<< "$deps"; then
      echo "the installed library's run path does not find every library above (without ldconfig's cache)" >&2
      exit 1
    fi
  fi
  ;;
find_package)
  readme_has "find_package(gradgraph 0.1 REQUIRED)"
  readme_has "target_link_libraries(app PRIVATE gradgraph::gradgraph)"
  configure "$GG_WORK_DIR/find_package" -DGRADGRAPH_USE=find_package -DCMAKE_PREFIX_PATH="$prefix"
  ;;
pkg_config)
  command -v pkg-config > /dev/null || { echo "[  SKIPPED ] pkg-config is not installed"; exit 77; }
  readme_has 'cc app.c $(pkg-config --cflags --libs gradgraph)'
  dir=$GG_WORK_DIR/pkg_config
  rm -rf "$dir" && mkdir -p "$dir" && cp "$here/app.c" "$dir/" && cd "$dir"
  PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name gradgraph.pc)")
  export PKG_CONFIG_PATH
  # The README's command, with the library's directory recorded so that the program runs from this prefix.
  set -x
  "$CC" app.c $(pkg-config --cflags --libs gradgraph) -o app -Wl,-rpath,"$(pkg-config --variable=libdir gradgraph)"
  ;;
subdirectory)
  configure "$GG_WORK_DIR/subdirectory" -DGRADGRAPH_USE=subdirectory -DGRADGRAPH_SOURCE_DIR="$GG_SOURCE_DIR" \
    -DCMAKE_CUDA_COMPILER="$GG_CUDA_COMPILER" -DCMAKE_CUDA_ARCHITECTURES="$GG_CUDA_ARCHITECTURES" \
    ${GG_C_LAUNCHER:+-DCMAKE_C_COMPILER_LAUNCHER="$GG_C_LAUNCHER"} \
    ${GG_CUDA_LAUNCHER:+-DCMAKE_CUDA_COMPILER_LAUNCHER="$GG_CUDA_LAUNCHER"}
  ;;
run)
  ran=0 passed=0 skipped=0
  for way in find_package pkg_config subdirectory; do
    [ -x "$GG_WORK_DIR/$way/app" ] || continue # a way that was skipped (no pkg-config); a failed build stops CTest
    ran=$((ran + 1))
    set +e
    "$GG_WORK_DIR/$way/app"
    code=$?
    set -e
    echo "$way: exit $code"
    case $code in 0) passed=$((passed + 1)) ;; 77) skipped=$((skipped + 1)) ;; esac
  done
  [ $ran -gt 0 ] || { echo "no program was built" >&2; exit 1; }
  [ $skipped = $ran ] && exit 77
  [ $passed = $ran ]
  ;;
*)
  echo "usage: $0 install|find_package|pkg_config|subdirectory|run" >&2
  exit 2
  ;;
esac
