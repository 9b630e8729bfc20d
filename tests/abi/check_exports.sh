#!/usr/bin/env bash
# check_exports.sh NM CC LIBRARY HEADER [INCLUDE_DIR...] - the ABI check: the dynamic symbols a shared libgradgraph
# defines are exactly the functions its header declares, and every one of those is marked GG_API. An internal
# function that leaks out (or an API function that does not) fails here with its name.
set -euo pipefail
nm=$1 cc=$2 library=$3 header=$4
shift 4
includes=()
for dir in "$@"; do includes+=("-I$dir"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The header without its comments and with GG_API visible as a word: every "gg_name(" left is a declared function
# (a function-pointer typedef reads "(*gg_name)(", a macro body is not expanded).
"$cc" -E -P -DGG_API=GG_API_MARK "${includes[@]}" -x c "$header" > "$work/header.i"
grep -oE '\bgg_[a-z0-9_]+ *\(' "$work/header.i" | tr -d ' (' | sort -u > "$work/declared"
grep -oE 'GG_API_MARK [^;(]*\bgg_[a-z0-9_]+ *\(' "$work/header.i" | grep -oE 'gg_[a-z0-9_]+ *\($' | tr -d ' (' |
  sort -u > "$work/marked"
"$nm" -D --defined-only "$library" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u > "$work/exported"

status=0
if ! diff -q "$work/declared" "$work/marked" > /dev/null; then
  echo "declared in $(basename "$header") without GG_API:"
  comm -23 "$work/declared" "$work/marked" | sed 's/^/  /'
  status=1
fi
if ! diff -q "$work/declared" "$work/exported" > /dev/null; then
  echo "exported by $(basename "$library") but not declared in the header:"
  comm -13 "$work/declared" "$work/exported" | sed 's/^/  /'
  echo "declared in the header but not exported:"
  comm -23 "$work/declared" "$work/exported" | sed 's/^/  /'
  status=1
fi
echo "$(wc -l < "$work/exported") symbols exported, $(wc -l < "$work/declared") functions declared"
exit $status
