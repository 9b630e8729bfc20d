#!/usr/bin/env bash
# scripts/file_run.sh - files an official run (scripts/official_run.sh's run-tests.tgz, run-sanitizers.tgz,
# run-bench.tgz and run-peers.tgz) under docs/results: run-<sha>/ gets the JSON, CSV and log archives, the stages'
# output as device-<stage>.log, the trace gzipped and the per-block plots; where the folder holds the bench run and
# peers stages' autotuned peers (one archive per set of blocks), bench-h200.json is collected again from all of them.
# bench-h200.json, graphs-h200.json, correctness-h200.json and reliability-h200.json are copied to docs/results/ (the
# current official figures).
# A sanitizers run's reliability-h200.json is the tests run's with racecheck, synccheck and initcheck merged in (it
# names the tests run's commit, and its own as sanitizers_commit): file the tests run first, and run the sanitizers
# stage after, on the tree with the tests run's JSON in docs/results/. Given with the tests archive in one call, the
# sanitizers' JSON, which holds the tests', is the one filed, whatever the order of the archives.
# docs/results keeps one run folder per kind: remove the previous run-<sha>/ in the same commit (git history keeps
# it), and update the numbers the docs quote (docs/results/README.md lists them). Each archive alone files what it
# holds.
# A step or train run (run-step.tgz, run-train.tgz) puts its JSON and plots in docs/results/, with no run folder.
# A multigpu run (official_run.sh's run-multigpu.tgz, two GPUs) is filed on its own: multigpu-<sha>/ gets its logs
# and ddp-h200x2.json, and reliability-h200.json, step-h200.json and ddp-h200x2.json go to docs/results/ (the first
# two are the official ones with the two-GPU facts merged in, each saying which commit made them). A stage spread over
# calls (GG_MULTIGPU_PARTS) is filed call by call: the later calls' logs are appended, their archives numbered.
#   [GG_FUZZ_LOG=test-sh.log] bash scripts/file_run.sh SHA RUN_TGZ...
set -euo pipefail
sha=${1:?commit} && shift
[ $# -ge 1 ] || { echo "usage: file_run.sh SHA RUN_TGZ..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
peers_runs=0 multigpu_runs=0
first=() last=() # the sanitizers archives are extracted last: their reliability-h200.json is the one filed
for tgz in "$@"; do
  members=$(tar tzf "$tgz")
  grep -q 'peers-autotune.json$' <<< "$members" && peers_runs=$((peers_runs + 1))
  grep -qE '(^|/)multigpu\.log$' <<< "$members" && multigpu_runs=$((multigpu_runs + 1))
  if grep -qE '(^|/)sanitizers\.log$' <<< "$members"; then last+=("$tgz"); else first+=("$tgz"); fi
done
# Each archive's tree.json (device.sh: the hash of the source files that ran, scripts/tree_hash.sh) must be the hash
# of its commit's files: SHA's, or, for the runs filed beside another commit's (a sanitizers run, an autotuned peers
# run), the commit their own JSON names (sanitizers_commit, the peers' commit). A run of uncommitted changes, or one
# given another commit, is refused, nothing filed.
declare -A tree_of # commit -> the hash of its source files
check_tree() { # check_tree TGZ
  local tgz=$1 ran commit want
  ran=$(tar xzf "$tgz" -O --wildcards '*tree.json' 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["tree"])' 2>/dev/null) ||
    { echo "file_run.sh: $(basename "$tgz") holds no tree.json (made before device.sh recorded one): its files" \
           "are taken as commit $sha's" >&2; return 0; }
  local members
  members=$(tar tzf "$tgz")
  commit=$sha
  if grep -qE '(^|/)sanitizers\.log$' <<< "$members"; then
    commit=$(tar xzf "$tgz" -O --wildcards '*reliability-h200.json' |
             python3 -c 'import json, sys; print(json.load(sys.stdin).get("sanitizers_commit") or "")') || commit=""
  elif grep -qE 'peers-autotune\.json$' <<< "$members"; then
    commit=$(tar xzf "$tgz" -O --wildcards '*peers-autotune.json' |
             python3 -c 'import json, sys; print(json.load(sys.stdin).get("commit") or "")') || commit=""
  fi
  [ -n "$commit" ] || { echo "file_run.sh: $(basename "$tgz"): its JSON names no commit: nothing filed" >&2; exit 2; }
  want=${tree_of[$commit]:-}
  if [ -z "$want" ]; then # each commit's files hashed once, whatever the number of its archives
    rm -rf "$tmp/tree" && mkdir -p "$tmp/tree"
    git -C "$root" archive "$commit" 2>/dev/null | tar -x -C "$tmp/tree" ||
      { echo "file_run.sh: $(basename "$tgz"): commit '$commit' is not in this repository: nothing filed" >&2; exit 2; }
    want=$(bash "$root/scripts/tree_hash.sh" "$tmp/tree")
    rm -rf "$tmp/tree"
    tree_of[$commit]=$want
  fi
  [ "$ran" = "$want" ] || {
    echo "file_run.sh: $(basename "$tgz") ran other files than commit $commit's (uncommitted changes, or another" \
         "commit): nothing filed" >&2
    exit 2
  }
}
for tgz in "$@"; do check_tree "$tgz"; done
for tgz in ${first[@]+"${first[@]}"} ${last[@]+"${last[@]}"}; do
  tar xzf "$tgz" -C "$tmp"
done
rm -f "$tmp/tree.json"
# Results named for an H200 (*h200*.json) come from one: the GPU machine may lend an H100 for a call that asked for an
# H200, and such a run's JSON ("gpu", or a stage's "<stage>_gpu") is refused here, nothing filed.
python3 - "$tmp" <<'PY' || exit 2
import glob, json, os, sys
bad = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*h200*.json"))):
    for key, gpu in json.load(open(path)).items():
        if (key == "gpu" or key.endswith("_gpu")) and isinstance(gpu, str) and "H200" not in gpu:
            bad.append(f"{os.path.basename(path)}: {key} {gpu}")
if bad:
    sys.exit("file_run.sh: results named for an H200 ran on another GPU, nothing filed:\n  " + "\n  ".join(bad))
PY
# each peers archive holds a peers-autotune.json of its own blocks: one extracted over another would lose it
[ "$peers_runs" -le 1 ] ||
  { echo "file_run.sh: $peers_runs peers archives: file each in a call of its own" >&2; exit 2; }
# likewise the multigpu stage's calls (GG_MULTIGPU_PARTS): each holds a multigpu.log and logs-multigpu.tgz
[ "$multigpu_runs" -le 1 ] ||
  { echo "file_run.sh: $multigpu_runs multigpu archives: file each in a call of its own" >&2; exit 2; }
if [ -f "$tmp/multigpu.log" ]; then
  d=$root/docs/results/multigpu-$sha
  mkdir -p "$d"
  # a stage spread over calls (GG_MULTIGPU_PARTS), filed in turn: each call's log appended, its archive numbered
  if [ -f "$d/device-multigpu.log" ]; then
    cat "$tmp/multigpu.log" >> "$d/device-multigpu.log"
    n=2; while [ -f "$d/logs-multigpu-$n.tgz" ]; do n=$((n + 1)); done
    [ -f "$tmp/logs-multigpu.tgz" ] && cp "$tmp/logs-multigpu.tgz" "$d/logs-multigpu-$n.tgz"
  else
    cp "$tmp/multigpu.log" "$d/device-multigpu.log"
    [ -f "$tmp/logs-multigpu.tgz" ] && cp "$tmp/logs-multigpu.tgz" "$d/"
  fi
  [ -f "$tmp/ddp-h200x2.json" ] && cp "$tmp/ddp-h200x2.json" "$d/"
  for f in reliability-h200.json step-h200.json ddp-h200x2.json; do
    [ -f "$tmp/$f" ] || continue
    cp "$tmp/$f" "$root/docs/results/"
    grep -q "$sha" "$tmp/$f" || echo "warning: $f does not name $sha" >&2
  done
  echo "filed in $d"
  for old in "$root"/docs/results/multigpu-* "$root"/docs/results/ddp-*; do
    [ -d "$old" ] && [ "$old" != "$d" ] || continue
    case $old in */ddp-*) [ -f "$d/ddp-h200x2.json" ] || continue ;; esac
    echo "older run folder of the same kind (remove it): $old"
  done
  exit 0
fi
# A step run and a train run (run-step.tgz, run-train.tgz) keep no run folder: their JSON and plots go to results/
# (the step timelines of the `_fused_copies` models as step-timeline-large.png and -small.png).
if [ -f "$tmp/step.log" ] || [ -f "$tmp/train.log" ]; then
  for f in step-h200.json train-h200.json train-loss-h200.png; do
    [ -f "$tmp/$f" ] || continue
    cp "$tmp/$f" "$root/docs/results/"
    case $f in *.json) grep -q "\"commit\": \"$sha" "$tmp/$f" || echo "warning: $f names another commit" >&2 ;; esac
  done
  if [ -f "$tmp/logs-step.tgz" ]; then
    mkdir -p "$tmp/logs" && tar xzf "$tmp/logs-step.tgz" -C "$tmp/logs"
    for size in large:2048x8192_8192 small:1024x4096_2048; do
      png=$(find "$tmp/logs" -name "step-timeline-residual_mlp_fused_copies_${size#*:}.png" | head -1)
      if [ -n "$png" ]; then cp "$png" "$root/docs/results/step-timeline-${size%%:*}.png"
      else echo "warning: no timeline of the ${size%%:*} _fused_copies model" >&2; fi
    done
  fi
  echo "filed in $root/docs/results"
  [ -f "$tmp/tests.log" ] || [ -f "$tmp/sanitizers.log" ] || [ -f "$tmp/bench.log" ] || exit 0
fi
d=$root/docs/results/run-$sha
mkdir -p "$d"
for f in bench-h200.json bench.csv bench.json correctness-h200.json graphs-h200.json reliability-h200.json \
  logs-bench.tgz logs-tests.tgz logs-sanitizers.tgz peers.json; do
  [ -f "$tmp/$f" ] && cp "$tmp/$f" "$d/"
done
for stage in tests sanitizers bench; do [ -f "$tmp/$stage.log" ] && cp "$tmp/$stage.log" "$d/device-$stage.log"; done
# a sanitizers run's facts name their own commit
if [ -f "$tmp/sanitizers.log" ] &&
   ! grep -q "\"sanitizers_commit\": \"$sha" "$d/reliability-h200.json" 2>/dev/null; then
  echo "warning: reliability-h200.json holds no sanitizers run of $sha" >&2
fi
# A peers stage runs the blocks GG_PEERS_BLOCKS names (one 10-minute call does not hold all four): its JSON, output
# and logs are filed under those blocks (peers-autotune-068-073.json, device-peers-068-073.log, ...), so that the
# runs of other blocks sit beside it.
if [ -f "$tmp/peers-autotune.json" ]; then
  # a run of some cases only (GG_PEERS_CASES: its JSON's "cases") also names them: cases-11-12-...
  blocks=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
name = "-".join(sorted({r["block"][:3] for r in p["results"]})) or "none"
print(name + ("-cases-" + "-".join(str(i) for i in p["cases"]) if p.get("cases") else ""))' \
    "$tmp/peers-autotune.json")
  grep -q "\"commit\": \"$sha" "$tmp/peers-autotune.json" ||
    echo "warning: peers-autotune.json names another commit" >&2
  cp "$tmp/peers-autotune.json" "$d/peers-autotune-$blocks.json"
  [ -f "$tmp/peers.log" ] && cp "$tmp/peers.log" "$d/device-peers-$blocks.log"
  [ -f "$tmp/logs-peers.tgz" ] && cp "$tmp/logs-peers.tgz" "$d/logs-peers-$blocks.tgz"
fi
# Every peers stage filed with the bench run joins its peers: bench-h200.json is collected again from all of them
# (a peers archive may come with the bench's or after it, into the run folder that holds the bench's).
autotuned=$(find "$d" -maxdepth 1 -name 'peers-autotune-*.json' | sort | paste -sd, -)
if [ -n "$autotuned" ]; then
  if [ -f "$d/bench.json" ] && [ -f "$d/peers.json" ] && [ -f "$d/bench-h200.json" ]; then
    cmd=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["command"])' "$d/bench-h200.json")
    python3 "$root/scripts/collect_bench.py" "$d/bench.json" "$d/peers.json,$autotuned" \
      "$d/bench-h200.json" "$sha" "$cmd" > /dev/null
  else
    echo "warning: run-$sha/ holds no bench run: the autotuned peers are filed, not collected" \
      "(file $sha's bench run)" >&2
  fi
fi
[ -f "$tmp/trace.csv" ] && gzip -c "$tmp/trace.csv" > "$d/trace.csv.gz"
if [ -f "$tmp/logs-bench.tgz" ]; then
  mkdir -p "$tmp/logs" && tar xzf "$tmp/logs-bench.tgz" -C "$tmp/logs"
  find "$tmp/logs" -name '*.png' -exec cp {} "$d/" \;
  # the comparison with the previous official run, which performance.md quotes
  [ -f "$tmp/logs/bench-compare.txt" ] && cp "$tmp/logs/bench-compare.txt" "$d/"
fi
# The fuzzer runs on the CUDA fakes, not on the GPU machine (no clang there): GG_FUZZ_LOG names the output of
# scripts/test.sh at the same commit (its last line FUZZ {...}), whose figures go into the reliability JSON with
# where they came from (the log itself as test-sh.log).
if [ -n "${GG_FUZZ_LOG:-}" ] && [ -f "$d/reliability-h200.json" ]; then
  python3 - "$d/reliability-h200.json" "$GG_FUZZ_LOG" <<'PY'
import json, sys
path, log = sys.argv[1:3]
fuzz = [l for l in open(log, errors="replace") if l.startswith("FUZZ {")]
if not fuzz:
    sys.exit(f"GG_FUZZ_LOG={log}: no FUZZ line")
r, f = json.load(open(path)), json.loads(fuzz[-1][len("FUZZ "):])
r["fuzz_execs"], r["fuzz_seconds"] = f["execs"], f["seconds"]
r["fuzz_command"] = "scripts/test.sh (.ci/run) on a CPU machine at the same commit"
json.dump(r, open(path, "w"), indent=2)
PY
  cp "$GG_FUZZ_LOG" "$d/test-sh.log"
fi
for f in bench-h200.json graphs-h200.json correctness-h200.json reliability-h200.json; do
  [ -f "$d/$f" ] || continue
  cp "$d/$f" "$root/docs/results/"
  grep -q "\"commit\": \"$sha" "$d/$f" || echo "warning: $f names another commit" >&2
done
echo "filed in $d"
# an older folder of the same kind (a bench run's holds bench-h200.json, a tests run's reliability-h200.json) is
# superseded; one of the other kind still backs the JSON files this run did not make
for old in "$root"/docs/results/run-*; do
  [ "$old" = "$d" ] && continue
  for f in bench-h200.json reliability-h200.json; do
    [ -f "$d/$f" ] && [ -f "$old/$f" ] && echo "older run folder of the same kind (remove it): $old"
  done
done
true
