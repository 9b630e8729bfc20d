#!/usr/bin/env python3
"""Collects the reliability checks of scripts/device.sh into docs/results/reliability-*.json.

Usage: collect_reliability.py [--merge BASE_JSON] OUT_DIR OUT_JSON COMMIT COMMAND GPU

With --merge (the stages that run after the tests stage, each in a call of its own): OUT_JSON is BASE_JSON (the tests
stage's) with the facts of each stage whose logs OUT_DIR holds set over it; every other field stays BASE_JSON's, with
its own commit and command:
- the multigpu stage's (two GPUs; test_dist.log or sanitizer-multigpu.log there): dead_rank_detected_s,
  multigpu_memcheck_errors (and multigpu_sanitizer_runs_cut) from sanitizer-multigpu.log, and multigpu_commit,
  multigpu_command, multigpu_gpu;
- the sanitizers stage's (sanitizer-kernels.log there): racecheck_hazards, synccheck_errors, initcheck_errors, those
  three tools' entries of sanitizer_runs_cut (memcheck's, the tests stage's, kept), and sanitizers_commit,
  sanitizers_command, sanitizers_gpu.
OUT_DIR holding neither stage's logs is an error.

Reads, from OUT_DIR: test_shapes_gpu-hopper1.log and -hopper0.log (the shape sweep's "SHAPES {json}" lines and
"SHAPE FAIL" lines), test_blocks_gpu-hopper0.log (the 64 cases with the sm_90a-only kernels off: its RESULT lines)
sanitizer.log (compute-sanitizer's "<tool> <test> exit <rc>" lines and error summaries: the tests stage runs memcheck,
so the other tools are null there), test_faults.log (its 'FAULTS {json}' line, with its 'FAULTS_RESOURCES',
'FAULTS_STEP', 'FAULTS_OPTIM', 'FAULTS_FORWARD' and 'FAULTS_ENTRY_RESOURCES' lines added to it), test_dist_faults.log
(its 'NCCL_FAULTS {json}' line: fault injection on the NCCL calls; its 'FAULTS_HOST_MEMORY', 'FAULTS_CUDA_RESOURCES'
and 'FAULTS_CUDA_CALLS' lines are added to the faults), test_soak_gpu.log ('SOAK {json}'), test_dist.log (the
multigpu stage's CTest log: test_dist_dead_rank's 'DEAD_RANK_DETECTED_S <s>' line) and, when present, fuzz.log
(scripts/test.sh's 'FUZZ {json}' line, or libFuzzer's stat::number_of_executed_units). A check that the run did not make is recorded as null, never as zero.
"""
import json
import os
import re
import sys

args = sys.argv[1:]
base = None
if args[:1] == ["--merge"]:
    base, args = args[1], args[2:]
out_dir, out, commit, command, gpu = args[:5]


def lines(name):
    path = os.path.join(out_dir, name)
    return open(path, errors="replace").read().splitlines() if os.path.exists(path) else None


# shape_failures: the sweep's failures, or, when more, the "SHAPE FAIL" lines (one per failed shape and mode): the
# shapes once found wrong (shapes_found_wrong) print those lines but no SHAPES line.
shapes, shape_failures, guard_bytes, seeds = {}, 0, 0, set()
fail_lines = 0
for hopper in (1, 0):
    log = lines(f"test_shapes_gpu-hopper{hopper}.log")
    if log is None:
        continue
    fail_lines += sum(1 for line in log if line.startswith("SHAPE FAIL "))
    for line in log:
        if line.startswith("SHAPES "):
            r = json.loads(line[len("SHAPES "):])
            key = f"{r['block']}" + ("" if hopper else "_no_hopper")
            shapes[key] = r["checked"]
            shape_failures += r["failures"]
            guard_bytes += r["guard_bytes_changed"]
            seeds.add(r["seed"])
shape_failures = max(shape_failures, fail_lines)

non_hopper = None
log = lines("test_blocks_gpu-hopper0.log")
if log is not None:
    passed = set()
    for line in log:
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            if r.get("cases_passed") is not None:
                passed.add((r["block"], r["mode"], r["cases_passed"]))
    # a case counts once, when it passed in every mode of its block
    per_block = {}
    for block, mode, n in passed:
        per_block[block] = min(per_block.get(block, n), n)
    non_hopper = sum(per_block.values()) if per_block else 0

# each tool's field in the JSON
FIELDS = {"memcheck": "memcheck_errors", "racecheck": "racecheck_hazards", "synccheck": "synccheck_errors",
          "initcheck": "initcheck_errors"}
KERNEL_TOOLS = ("racecheck", "synccheck", "initcheck")  # the sanitizers stage's


# Each run's summary ("ERROR SUMMARY: N errors", racecheck's "RACECHECK SUMMARY: N hazards ...") comes before the
# "<tool> <test> exit <rc>" line device.sh writes after it; a run that failed without a summary counts as one, except
# one stopped by its time limit (exit 124) before any report: that run is counted as cut ("sanitizer_runs_cut").
def sanitizer_runs(name):
    """Per tool, the reports in log `name` (None: no run of that tool), and the runs cut, per tool."""
    tools = dict.fromkeys(FIELDS)
    cut = {}
    found = 0
    for line in lines(name) or []:
        m = re.search(r"(?:ERROR|RACECHECK) SUMMARY: (\d+)", line)
        if m:
            found += int(m.group(1))
        m = re.match(r"^(memcheck|racecheck|synccheck|initcheck) \S+ exit (\d+)$", line)
        if m:
            if m.group(2) == "124" and not found:
                cut[m.group(1)] = cut.get(m.group(1), 0) + 1
            else:
                count = found if found or m.group(2) == "0" else 1
                tools[m.group(1)] = (tools[m.group(1)] or 0) + count
            found = 0
    return tools, cut


tools, cut = sanitizer_runs("sanitizer.log")


def tagged(name, tag):
    """The JSON of the last line of `name` that starts with `tag `, or None."""
    found = None
    for line in lines(name) or []:
        if line.startswith(tag + " "):
            found = json.loads(line[len(tag) + 1:])
    return found


faults = tagged("test_faults.log", "FAULTS")
# the step graphs', optimizers' and forwards' faults count with the blocks' (same test, lines of their own)
# and the data-parallel path's host-memory, CUDA-resource and CUDA-call faults (test_dist_faults, lines of their own)
for log, tag in (("test_faults.log", "FAULTS_RESOURCES"), ("test_faults.log", "FAULTS_STEP"),
                 ("test_faults.log", "FAULTS_OPTIM"), ("test_faults.log", "FAULTS_ENTRY_RESOURCES"),
                 ("test_faults.log", "FAULTS_FORWARD"), ("test_dist_faults.log", "FAULTS_HOST_MEMORY"),
                 ("test_dist_faults.log", "FAULTS_CUDA_RESOURCES"), ("test_dist_faults.log", "FAULTS_CUDA_CALLS")):
    more = tagged(log, tag)
    if faults and more:
        faults = {"injected": faults["injected"] + more["injected"], "failures": faults["failures"] + more["failures"]}
nccl_faults = tagged("test_dist_faults.log", "NCCL_FAULTS")
dead_rank = None
for line in lines("test_dist.log") or []:
    m = re.search(r"DEAD_RANK_DETECTED_S ([0-9.]+)", line)
    if m:
        dead_rank = float(m.group(1))


def merge_multigpu(result):
    """The multigpu stage's two-GPU facts over `result`."""
    result["dead_rank_detected_s"] = dead_rank  # this run's (null when its test did not print it), never an older one
    mg_tools, mg_cut = sanitizer_runs("sanitizer-multigpu.log")
    result["multigpu_memcheck_errors"] = mg_tools["memcheck"]
    result.pop("multigpu_sanitizer_runs_cut", None)
    if mg_cut:
        result["multigpu_sanitizer_runs_cut"] = mg_cut
    result.update({"multigpu_commit": commit, "multigpu_command": command, "multigpu_gpu": gpu})
    return (f"dead_rank_detected_s {dead_rank}, multigpu memcheck {mg_tools['memcheck']} reports, "
            f"{sum(mg_cut.values())} runs cut")


def merge_sanitizers(result):
    """The sanitizers stage's racecheck, synccheck and initcheck over `result`: this run's counts (null for a tool
    none of whose runs finished) and runs cut replace the base's for those tools; memcheck's (the tests stage's)
    stay."""
    k_tools, k_cut = sanitizer_runs("sanitizer-kernels.log")
    for tool in KERNEL_TOOLS:
        result[FIELDS[tool]] = k_tools[tool]
    runs_cut = {t: n for t, n in (result.get("sanitizer_runs_cut") or {}).items() if t not in KERNEL_TOOLS}
    runs_cut.update({t: n for t, n in k_cut.items() if t in KERNEL_TOOLS})
    if runs_cut:
        result["sanitizer_runs_cut"] = runs_cut
    else:
        result.pop("sanitizer_runs_cut", None)
    result.update({"sanitizers_commit": commit, "sanitizers_command": command, "sanitizers_gpu": gpu})
    return ", ".join(f"{t} {k_tools[t]} reports" for t in KERNEL_TOOLS) + \
        f", {sum(n for t, n in k_cut.items() if t in KERNEL_TOOLS)} runs cut"


if base is not None:  # a later stage's facts over the tests stage's JSON, which keeps everything else
    result = json.load(open(base))
    merged = []
    if lines("test_dist.log") is not None or lines("sanitizer-multigpu.log") is not None:
        merged.append(merge_multigpu(result))
    if lines("sanitizer-kernels.log") is not None:
        merged.append(merge_sanitizers(result))
    if not merged:
        sys.exit(f"collect_reliability.py --merge: {out_dir} holds no multigpu (test_dist.log, "
                 "sanitizer-multigpu.log) nor sanitizers (sanitizer-kernels.log) logs")
    json.dump(result, open(out, "w"), indent=2)
    print(f"{out}: {base} with " + "; ".join(merged))
    sys.exit(0)

soak = tagged("test_soak_gpu.log", "SOAK")
fuzz = tagged("fuzz.log", "FUZZ")
if fuzz is None:
    for line in lines("fuzz.log") or []:
        if line.startswith("stat::number_of_executed_units:"):
            fuzz = {"execs": int(line.split(":")[1])}

result = {
    "commit": commit, "command": command, "gpu": gpu,
    "shapes_checked": shapes, "shapes_seeds": sorted(seeds),
    "shape_failures": shape_failures if shapes else None,
    "guard_violations": guard_bytes if shapes else None,
    "faults_injected": faults["injected"] if faults else None,
    "fault_failures": faults["failures"] if faults else None,
    **{FIELDS[t]: tools[t] for t in FIELDS},
    "soak_replays": soak["replays"] if soak else None, "soak_failures": soak["failures"] if soak else None,
    "soak_memory_drift_bytes": soak["memory_drift_bytes"] if soak else None,
    "fuzz_execs": fuzz["execs"] if fuzz else None,
    "non_hopper_cases_correct": non_hopper, "dead_rank_detected_s": dead_rank,
    "nccl_faults_injected": nccl_faults["injected"] if nccl_faults else None,
    "nccl_fault_failures": nccl_faults["failures"] if nccl_faults else None,
}
if cut:
    result["sanitizer_runs_cut"] = cut
json.dump(result, open(out, "w"), indent=2)
print(f"{out}: {sum(shapes.values())} shape runs, {shape_failures} failures, {guard_bytes} guard bytes changed")
