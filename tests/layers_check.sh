#!/usr/bin/env bash
# tests/layers_check.sh ROOT - the include rules of docs/design.md ("Layers"): a folder includes no header of a layer
# above it or beside it; inside graphs/, per-block graphs and step graphs include nothing of each other. Prints every
# breach as `file: includes header (folder), which FOLDER may not include` and exits 1 if there is any. Headers are
# found by their name (unique across the tree) or by their path from ROOT.
set -euo pipefail
root=${1:?usage: layers_check.sh ROOT}
cd "$root"

# folder -> folders whose headers it may not include
declare -A forbidden=(
  [include]="src/api src/blocks graphs src/optim src/ddp src/core src/gemm kernels"
  [src/core]="src/api src/blocks graphs src/optim src/ddp"
  [src/gemm]="src/api src/blocks graphs src/optim src/ddp"
  [kernels]="include src/api src/blocks graphs src/optim src/ddp src/core src/gemm"
  [src/blocks]="src/api graphs src/optim"
  [src/ddp]="src/api src/blocks graphs src/optim"
  [graphs]="src/api src/optim"
  [src/optim]="src/api src/blocks graphs src/ddp"
)

# every header of the tree: name -> folder
declare -A home=()
while IFS= read -r h; do home[$(basename "$h")]=$(dirname "$h"); done \
  < <(find src graphs kernels include -type f \( -name '*.h' -o -name '*.cuh' \))

breaches=0
for folder in "${!forbidden[@]}"; do
  for f in $(find "$folder" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \)); do
    while IFS= read -r inc; do
      if [[ $inc == */* ]]; then dir=$(dirname "$inc"); else dir=${home[$inc]:-}; fi
      [[ -z $dir ]] && continue # a system or third-party header
      for bad in ${forbidden[$folder]}; do
        if [[ $dir == "$bad" ]]; then
          echo "$f: includes \"$inc\" ($dir), which $folder may not include"
          breaches=$((breaches + 1))
        fi
      done
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
  done
done
# Inside graphs/: per-block graphs and step graphs both build on exec.h and include nothing of each other.
inc_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"'
for f in graphs/step*.c graphs/step*.h; do
  if grep -qE "${inc_re}graph\.h\"" "$f"; then
    echo "$f: includes \"graph.h\" (per-block graphs), which a step graph's file may not include (exec.h is shared)"
    breaches=$((breaches + 1))
  fi
done
for f in graphs/graph.c graphs/graph.h graphs/debug_dot.c graphs/exec.c graphs/exec.h; do
  if grep -qE "${inc_re}step[^\"]*\.h\"" "$f"; then
    echo "$f: includes a step graph's header, which per-block graphs and exec.c may not include"
    breaches=$((breaches + 1))
  fi
done
if ((breaches)); then
  echo "layers_check: $breaches include(s) against the layers of docs/design.md" >&2
  exit 1
fi
echo "layers_check: every include follows the layers of docs/design.md"
