#!/usr/bin/env python3
"""test_file_run.py - scripts/file_run.sh on a made-up tests run, in a scratch copy of the tree's docs/results: the
run's JSON and logs land in run-<sha>/ and the JSON in results/; GG_FUZZ_LOG merges the fuzzer's figures (execs,
seconds, where they came from) into the reliability JSON and files the log; an older run folder of the same kind is
named for removal, one of the other kind (a bench run's) is not; a log without a FUZZ line fails the filing. A
multigpu run is filed on its own: multigpu-<sha>/ gets its stage log and logs, results/ the merged reliability and step
JSON and ddp-h200x2.json, and the older multigpu and ddp folders are named for removal, the run folders not. A peers
run (the autotuned PyTorch peers) filed after the bench run of its commit has bench-h200.json collected again from
both (scripts/collect_bench.py: the faster autotuned variant becomes the best peer where it passed, never where it
failed; the bench's command kept, the peers run's recorded beside it); a run of some cases only (GG_PEERS_CASES) is
filed under them, and its measurements count over another run's skips; filed where no bench run is, a peers run is
kept and not collected, with a warning. A sanitizers run (racecheck, synccheck, initcheck merged into the tests run's
reliability JSON) is filed into the run folder of its commit (its output as device-sanitizers.log, its logs), and its
JSON in run-<sha>/ and results/ is the one filed: after the tests run's in a call of its own, or given with it in
one call, before it or after; a sanitizers JSON that names no sanitizers run of the commit filed warns. A run whose
JSON is named for an H200 but ran on another GPU (its "gpu") is refused, nothing filed. A run whose source files
(tree.json) are not its commit's, or whose commit the repository lacks, is refused, nothing filed.
Usage: test_file_run.py REPO_ROOT"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]


def tgz(path, files):
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text if isinstance(text, bytes) else text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "scripts"))
    for script in ("file_run.sh", "collect_bench.py"):
        shutil.copy(os.path.join(root, "scripts", script), os.path.join(d, "scripts"))
    results = os.path.join(d, "docs", "results")
    os.makedirs(os.path.join(results, "run-aaaaaaa"))  # an older tests run
    os.makedirs(os.path.join(results, "run-bbbbbbb"))  # a bench run
    json.dump({"commit": "aaaaaaa"}, open(os.path.join(results, "run-aaaaaaa", "reliability-h200.json"), "w"))
    json.dump({"commit": "bbbbbbb"}, open(os.path.join(results, "run-bbbbbbb", "bench-h200.json"), "w"))
    sha = "1234567"
    reliability = {"commit": sha, "command": "GG_COMMIT=<sha> bash scripts/device.sh tests", "fuzz_execs": None,
                   "shape_failures": 0}
    run = os.path.join(d, "run-tests.tgz")
    tgz(run, {"reliability-h200.json": json.dumps(reliability), "correctness-h200.json": json.dumps({"commit": sha}),
              "logs-tests.tgz": "not a real archive"})
    fuzz_log = os.path.join(d, "test-sh.log")
    open(fuzz_log, "w").write("100% tests passed\nFUZZ {\"execs\": 12345, \"seconds\": 61}\n")

    env = dict(os.environ, GG_FUZZ_LOG=fuzz_log)
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), sha, run], capture_output=True, text=True,
                       env=env)
    out = p.stdout + p.stderr
    check(p.returncode == 0, "filing succeeds", out)
    filed = os.path.join(results, f"run-{sha}")
    for name in ("reliability-h200.json", "correctness-h200.json", "logs-tests.tgz", "test-sh.log"):
        check(os.path.exists(os.path.join(filed, name)), f"run-{sha}/{name} filed")
    r = json.load(open(os.path.join(results, "reliability-h200.json")))
    check(r.get("commit") == sha and r.get("fuzz_execs") == 12345 and r.get("fuzz_seconds") == 61 and
          "scripts/test.sh" in r.get("fuzz_command", ""), "the fuzzer's figures merged into results/", json.dumps(r))
    check(r.get("shape_failures") == 0, "the run's own figures kept")
    check("run-aaaaaaa" in out and "run-bbbbbbb" not in out,
          "only the older run folder of the same kind is named for removal", out)

    open(fuzz_log, "w").write("no fuzzer here\n")
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), sha, run], capture_output=True, text=True,
                       env=env)
    check(p.returncode != 0 and "no FUZZ line" in p.stdout + p.stderr, "a log without a FUZZ line fails the filing",
          p.stdout + p.stderr)

    # a multigpu run: the official JSON with the two-GPU facts merged (their own commit), ddp-h200x2.json, the logs
    os.makedirs(os.path.join(results, "multigpu-ccccccc"))
    os.makedirs(os.path.join(results, "ddp-ddddddd"))
    mg = os.path.join(d, "run-multigpu.tgz")
    merged = dict(reliability, dead_rank_detected_s=3.25, multigpu_commit="7654321")
    step = {"commit": "eeeeeee", "models": [{"name": "residual_mlp_large", "ddp": {"speedup": 1.95,
                                                                                 "commit": "7654321"}}]}
    tgz(mg, {"multigpu.log": "== multigpu (2 GPUs)\n", "reliability-h200.json": json.dumps(merged),
             "step-h200.json": json.dumps(step), "ddp-h200x2.json": json.dumps({"commit": "7654321"}),
             "logs-multigpu.tgz": "not a real archive"})
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "7654321", mg], capture_output=True,
                       text=True)
    out = p.stdout + p.stderr
    check(p.returncode == 0, "a multigpu run is filed", out)
    filed = os.path.join(results, "multigpu-7654321")
    for name in ("device-multigpu.log", "logs-multigpu.tgz", "ddp-h200x2.json"):
        check(os.path.exists(os.path.join(filed, name)), f"multigpu-7654321/{name} filed")
    check(not os.path.exists(os.path.join(results, "run-7654321")), "no run-<sha>/ folder for a multigpu run")
    r = json.load(open(os.path.join(results, "reliability-h200.json")))
    check(r.get("dead_rank_detected_s") == 3.25 and r.get("commit") == sha, "the merged reliability JSON in results/")
    s = json.load(open(os.path.join(results, "step-h200.json")))
    check(s["models"][0]["ddp"]["speedup"] == 1.95, "the merged step JSON in results/")
    check(os.path.exists(os.path.join(results, "ddp-h200x2.json")), "ddp-h200x2.json in results/")
    check("multigpu-ccccccc" in out and "ddp-ddddddd" in out and "run-aaaaaaa" not in out and "warning" not in out,
          "the older multigpu and ddp folders are named for removal, nothing else", out)
    # two multigpu archives in one call would overwrite each other's log: refused, nothing filed
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "7654321", mg, mg], capture_output=True,
                       text=True)
    check(p.returncode != 0 and "2 multigpu archives: file each in a call of its own" in p.stderr,
          "two multigpu archives in one call are refused", p.stdout + p.stderr)
    # the same stage's second call (GG_MULTIGPU_PARTS): its log appended, its archive numbered, the first kept
    mg2 = os.path.join(d, "run-multigpu-2.tgz")
    tgz(mg2, {"multigpu.log": "== multigpu (2 GPUs), parts step\n", "logs-multigpu.tgz": "the second archive"})
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "7654321", mg2], capture_output=True,
                       text=True)
    log = open(os.path.join(filed, "device-multigpu.log")).read()
    check(p.returncode == 0 and log == "== multigpu (2 GPUs)\n== multigpu (2 GPUs), parts step\n" and
          open(os.path.join(filed, "logs-multigpu-2.tgz")).read() == "the second archive" and
          open(os.path.join(filed, "logs-multigpu.tgz")).read() == "not a real archive",
          "a second call of the stage: its log appended, its archive numbered", p.stdout + p.stderr + log)

    # a step run and a train run: their JSON and plots in results/, the fused_copies models' timelines renamed
    logs = os.path.join(d, "logs-step.tgz")
    tgz(logs, {"plots/step-timeline-residual_mlp_fused_copies_2048x8192_8192.png": "large png",
               "plots/step-timeline-residual_mlp_fused_copies_1024x4096_2048.png": "small png",
               "plots/step-timeline-residual_mlp_1024x4096_2048.png": "another model's png"})
    step_run, train_run = os.path.join(d, "run-step.tgz"), os.path.join(d, "run-train.tgz")
    tgz(step_run, {"step.log": "== step graphs\n", "step-h200.json": json.dumps({"commit": "5555555", "models": []}),
                   "logs-step.tgz": open(logs, "rb").read()})
    tgz(train_run, {"train.log": "== train\n", "train-h200.json": json.dumps({"commit": "5555555"}),
                    "train-loss-h200.png": "loss png"})
    before = set(os.listdir(results))
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "5555555", step_run, train_run],
                       capture_output=True, text=True)
    out = p.stdout + p.stderr
    check(p.returncode == 0 and "warning" not in out, "a step run and a train run are filed", out)
    read = lambda name: open(os.path.join(results, name)).read() if os.path.exists(os.path.join(results, name)) else ""
    check('"5555555"' in read("step-h200.json") and '"5555555"' in read("train-h200.json") and
          read("train-loss-h200.png") == "loss png",
          "their JSON and the loss plot in results/")
    check(read("step-timeline-large.png") == "large png" and read("step-timeline-small.png") == "small png",
          "the fused_copies models' timelines as step-timeline-large.png and -small.png")
    check(not [n for n in set(os.listdir(results)) - before if n.startswith("run-")], "no run folder for them")

    # a run on another GPU than its JSON's name says (an H100 lent for an H200 call): refused, nothing filed
    h100_run = os.path.join(d, "run-train-h100.tgz")
    tgz(h100_run, {"train.log": "== train\n", "train-loss-h200.png": "another loss png",
                   "train-h200.json": json.dumps({"commit": "6666666", "gpu": "NVIDIA H100 80GB HBM3"})})
    before = {n: read(n) for n in ("train-h200.json", "train-loss-h200.png")}
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "6666666", h100_run], capture_output=True,
                       text=True)
    check(p.returncode == 2 and "train-h200.json: gpu NVIDIA H100 80GB HBM3" in p.stderr and
          all(read(n) == t for n, t in before.items()), "a run on an H100 is not filed as an H200's",
          p.stdout + p.stderr)
    h200_run = os.path.join(d, "run-train-h200.tgz")
    tgz(h200_run, {"train.log": "== train\n", "train-h200.json": json.dumps({"commit": "6666666",
                                                                              "gpu": "NVIDIA H200"})})
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "6666666", h200_run], capture_output=True,
                       text=True)
    check(p.returncode == 0 and '"6666666"' in read("train-h200.json"), "a run on an H200 is filed",
          p.stdout + p.stderr)

    # a bench run, then the peers run of the same commit: bench-h200.json collected again from both
    sha = "9999999"
    block = "068_gelu_approximate_feedforward_backward"
    case = lambda i, m, us: {"block": block, "mode": "fp16", "index": i, "M": m, "graph_span_us": us,
                             "graph_us": us + 5, "sol_us": us / 2, "correct": True, "bitwise_equal": True}
    bench = {"gpu": "NVIDIA H200", "results": [case(0, 2048, 100.0), case(1, 4096, 200.0)]}
    peers = {"torch": "2.11", "variants": {"torch_fp16_compile": "torch.compile"},
             "results": [{"block": block, "index": i, "M": m, "torch_fp16_compile_us": us,
                          "torch_fp16_compile_correct": True} for i, m, us in ((0, 2048, 130.0), (1, 4096, 260.0))]}
    bench_cmd = "GG_COMMIT=<sha> GG_PEERS_COMPILE=1 bash scripts/device.sh bench"
    bench_run = os.path.join(d, "run-bench.tgz")
    bench_logs = os.path.join(d, "logs-bench.tgz")
    tgz(bench_logs, {"./bench-compare.txt": "every block within noise\n", "./plots/068.png": "068 png"})
    tgz(bench_run, {"bench.log": "== timing\n", "bench.json": json.dumps(bench), "peers.json": json.dumps(peers),
                    "bench-h200.json": json.dumps({"commit": sha, "command": bench_cmd, "blocks": {}}),
                    "logs-bench.tgz": open(bench_logs, "rb").read()})
    peers_cmd = "GG_COMMIT=<sha> GG_PEERS_BUDGET=560 bash scripts/device.sh peers"
    autotuned = {"commit": sha, "command": peers_cmd, "variants": {"torch_fp16_autotune": "max-autotune"},
                 "results": [{"block": block, "index": 0, "M": 2048, "torch_fp16_autotune_us": 120.0,
                              "torch_fp16_autotune_correct": True},
                             {"block": block, "index": 1, "M": 4096, "torch_fp16_autotune_us": 190.0,
                              "torch_fp16_autotune_correct": False}]}
    peers_run = os.path.join(d, "run-peers.tgz")
    tgz(peers_run, {"peers.log": "== PyTorch's autotuned peers\n", "peers-autotune.json": json.dumps(autotuned)})
    file_run = lambda *runs: subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), *runs],
                                            capture_output=True, text=True)
    p = file_run(sha, bench_run)
    p2 = file_run(sha, peers_run)
    out = p.stdout + p.stderr + p2.stdout + p2.stderr
    check(p.returncode == 0 and p2.returncode == 0 and "warning" not in out, "a bench run, then its peers run filed",
          out)
    filed = os.path.join(results, f"run-{sha}")
    check(os.path.exists(os.path.join(filed, "device-peers-068.log")) and
          os.path.exists(os.path.join(filed, "peers-autotune-068.json")),
          "the peers run's log and JSON in run-<sha>/, under the blocks it ran")
    compare = os.path.join(filed, "bench-compare.txt")
    check(os.path.exists(os.path.join(filed, "068.png")) and os.path.exists(compare) and
          open(compare).read() == "every block within noise\n",
          "the bench's plots and its comparison with the previous run, out of its logs, in run-<sha>/")
    b = json.load(open(os.path.join(results, "bench-h200.json")))
    cs = b.get("blocks", {}).get(block, {}).get("cases", [])
    check(len(cs) == 2 and cs[0]["best_peer"] == "torch_fp16_autotune" and cs[0]["best_peer_us"] == 120.0,
          "the autotuned variant, faster and passing, is case 0's best peer", json.dumps(cs))
    check(len(cs) == 2 and cs[1]["best_peer"] == "torch_fp16_compile" and
          "torch_fp16_autotune" in cs[1]["peers_failing"], "where it failed it is not the best peer", json.dumps(cs))
    check(b.get("command") == bench_cmd and b.get("commit") == sha and
          [r["command"] for r in b["peers"].get("other_runs", [])] == [peers_cmd],
          "the bench's command kept, the peers run's recorded beside it", json.dumps(b.get("peers")))

    # a second peers run, of other blocks: filed beside the first, bench-h200.json collected from all three
    gate = "061_tanh_gated_residual_add_backward"
    for i, m, us in ((0, 512, 10.0), (1, 1024, 20.0)):
        bench["results"].append(dict(case(i, m, us), block=gate, mode="bf16"))
        peers["results"].append({"block": gate, "index": i, "M": m, "torch_compile_us": 4 * us,
                                 "torch_compile_correct": True})
    tgz(bench_run, {"bench.log": "== timing\n", "bench.json": json.dumps(bench), "peers.json": json.dumps(peers),
                    "bench-h200.json": json.dumps({"commit": sha, "command": bench_cmd, "blocks": {}})})
    gate_cmd = "GG_COMMIT=<sha> GG_PEERS_BLOCKS=1 GG_PEERS_VARIANTS=torch_autotune bash scripts/device.sh peers"
    gate_tuned = {"commit": sha, "command": gate_cmd, "variants": {"torch_autotune": "max-autotune"},
                  "results": [{"block": gate, "index": 0, "M": 512, "torch_autotune_us": 20.0,
                               "torch_autotune_correct": True},
                              {"block": gate, "index": 1, "M": 1024, "torch_autotune_us": None,
                               "torch_autotune_error": "skipped: budget"}]}
    gate_run = os.path.join(d, "run-peers-061.tgz")
    tgz(gate_run, {"peers.log": "== blocks 1\n", "peers-autotune.json": json.dumps(gate_tuned)})
    p = file_run(sha, bench_run, gate_run)
    out = p.stdout + p.stderr
    check(p.returncode == 0 and "warning" not in out and
          all(os.path.exists(os.path.join(filed, f)) for f in ("peers-autotune-061.json", "device-peers-061.log",
                                                                 "peers-autotune-068.json", "device-peers-068.log")),
          "a peers run of other blocks filed beside the first", out)
    p = file_run(sha, peers_run, gate_run)
    check(p.returncode == 2 and "in a call of its own" in p.stderr, "two peers archives in one call refused",
          p.stdout + p.stderr)
    b = json.load(open(os.path.join(results, "bench-h200.json")))
    best = {k: [c["best_peer"] for c in v["cases"]] for k, v in b.get("blocks", {}).items()}
    check(best.get(gate) == ["torch_autotune", "torch_compile"] and
          best.get(block) == ["torch_fp16_autotune", "torch_fp16_compile"],
          "each block's best peer from the peers run that timed it", json.dumps(best))
    check(sorted(r["command"] for r in b["peers"].get("other_runs", [])) == sorted([peers_cmd, gate_cmd]),
          "both peers runs recorded", json.dumps(b.get("peers")))

    # the case the budget skipped, run alone (GG_PEERS_CASES): filed under its cases beside the first, its measurement
    # kept over the first run's "skipped" (whichever file is read last)
    rest_cmd = "GG_COMMIT=<sha> GG_PEERS_BLOCKS=1 GG_PEERS_CASES=1 bash scripts/device.sh peers"
    rest = {"commit": sha, "command": rest_cmd, "variants": {"torch_autotune": "max-autotune"}, "cases": [1],
            "results": [{"block": gate, "index": 1, "M": 1024, "torch_autotune_us": 30.0,
                         "torch_autotune_correct": True}]}
    rest_run = os.path.join(d, "run-peers-061-1.tgz")
    tgz(rest_run, {"peers.log": "== blocks 1, case 1\n", "peers-autotune.json": json.dumps(rest)})
    p = file_run(sha, rest_run)
    out = p.stdout + p.stderr
    check(p.returncode == 0 and "warning" not in out and
          all(os.path.exists(os.path.join(filed, f)) for f in ("peers-autotune-061-cases-1.json",
                                                                 "peers-autotune-061.json")),
          "a run of some cases filed under them, beside the run of the whole block", out)
    b = json.load(open(os.path.join(results, "bench-h200.json")))
    gate_cases = b.get("blocks", {}).get(gate, {}).get("cases", [])
    check([c["best_peer"] for c in gate_cases] == ["torch_autotune", "torch_autotune"] and
          gate_cases[1]["best_peer_us"] == 30.0 and "peers_errors" not in gate_cases[1],
          "the skipped case's measurement counts, the earlier run's skip is dropped", json.dumps(gate_cases))

    # the peers run alone, where no bench run of its commit is filed: kept, not collected
    before = open(os.path.join(results, "bench-h200.json")).read()
    autotuned["commit"] = "8888888"
    tgz(peers_run, {"peers.log": "== PyTorch's autotuned peers\n", "peers-autotune.json": json.dumps(autotuned)})
    p = file_run("8888888", peers_run)
    out = p.stdout + p.stderr
    check(p.returncode == 0 and "holds no bench run" in out and
          os.path.exists(os.path.join(results, "run-8888888", "peers-autotune-068.json")) and
          open(os.path.join(results, "bench-h200.json")).read() == before,
          "a peers run without its bench run: filed with a warning, results/bench-h200.json untouched", out)

    # a tests run and the sanitizers run of the same commit: the sanitizers' JSON (the tests' with the three tools
    # merged in) filed, in one call whatever the order, or after the tests run's in a call of its own
    sha = "2222222"
    tests_json = {"commit": sha, "command": "GG_COMMIT=<sha> bash scripts/device.sh tests", "memcheck_errors": 0,
                  "racecheck_hazards": None, "synccheck_errors": None, "initcheck_errors": None}
    san_json = dict(tests_json, racecheck_hazards=0, synccheck_errors=0, initcheck_errors=0, sanitizers_commit=sha,
                    sanitizers_command="GG_COMMIT=<sha> GG_SANITIZER_TIMEOUT=300 bash scripts/device.sh sanitizers")
    tests_run, san_run = os.path.join(d, "run-tests-2.tgz"), os.path.join(d, "run-sanitizers.tgz")
    tgz(tests_run, {"./tests.log": "== tests\n", "./reliability-h200.json": json.dumps(tests_json),
                    "./correctness-h200.json": json.dumps({"commit": sha}), "./logs-tests.tgz": "tests logs"})
    tgz(san_run, {"./sanitizers.log": "== compute-sanitizer\n", "./reliability-h200.json": json.dumps(san_json),
                  "./logs-sanitizers.tgz": "sanitizers logs"})
    filed = os.path.join(results, f"run-{sha}")
    rel = lambda path: json.load(open(path)) if os.path.exists(path) else {}
    for order in ((san_run, tests_run), (tests_run, san_run)):
        shutil.rmtree(filed, ignore_errors=True)
        p = file_run(sha, *order)
        out = p.stdout + p.stderr
        first = "sanitizers" if order[0] == san_run else "tests"
        check(p.returncode == 0 and "warning" not in out and
              all(os.path.exists(os.path.join(filed, f)) for f in ("device-tests.log", "device-sanitizers.log",
                                                                     "logs-tests.tgz", "logs-sanitizers.tgz",
                                                                     "correctness-h200.json")),
              f"a tests and a sanitizers run in one call ({first} first): both filed in run-<sha>/", out)
        check(rel(os.path.join(filed, "reliability-h200.json")).get("sanitizers_commit") == sha and
              rel(os.path.join(results, "reliability-h200.json")) == san_json,
              f"({first} first) the sanitizers' JSON, which holds the tests', is the one in run-<sha>/ and results/",
              json.dumps(rel(os.path.join(results, "reliability-h200.json"))))
    shutil.rmtree(filed)
    p, p2 = file_run(sha, tests_run), file_run(sha, san_run)
    out = p.stdout + p.stderr + p2.stdout + p2.stderr
    check(p.returncode == 0 and p2.returncode == 0 and "warning" not in out and
          rel(os.path.join(results, "reliability-h200.json")) == san_json and
          rel(os.path.join(filed, "reliability-h200.json")) == san_json and
          os.path.exists(os.path.join(filed, "device-sanitizers.log")) and
          os.path.exists(os.path.join(filed, "device-tests.log")),
          "the sanitizers run filed after the tests run's: its JSON replaces the tests', in run-<sha>/ and results/",
          out)
    tgz(san_run, {"./sanitizers.log": "== compute-sanitizer\n", "./reliability-h200.json": json.dumps(tests_json)})
    p = file_run(sha, san_run)
    check(p.returncode == 0 and "holds no sanitizers run of 2222222" in p.stderr,
          "a sanitizers JSON without this commit's sanitizers run warns", p.stdout + p.stderr)

    # the source files a run used (device.sh's tree.json, scripts/tree_hash.sh) against its commit's: in a git
    # repository of the scratch tree, a run of the commit's files is filed, one of other files (uncommitted changes)
    # or of a commit the repository lacks is refused, nothing filed
    shutil.copy(os.path.join(root, "scripts", "tree_hash.sh"), os.path.join(d, "scripts"))
    os.makedirs(os.path.join(d, "src"))
    open(os.path.join(d, "src", "block.c"), "w").write("int block;\n")
    git = lambda *a: subprocess.run(["git", "-C", d, "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                    capture_output=True, text=True, check=True).stdout.strip()
    git("init", "-q")
    git("add", "scripts", "src")
    git("commit", "-q", "-m", "the tree")
    commit = git("rev-parse", "HEAD")
    tree = subprocess.run(["bash", os.path.join(d, "scripts", "tree_hash.sh"), d], capture_output=True, text=True,
                          check=True).stdout.strip()
    def run_of(name, tree_hash):
        tgz(os.path.join(d, name), {"./train.log": "== train\n", "./tree.json": json.dumps({"tree": tree_hash}),
                                    "./train-h200.json": json.dumps({"commit": commit, "gpu": "NVIDIA H200"})})
        return os.path.join(d, name)
    p = file_run(commit, run_of("run-train-tree.tgz", tree))
    check(p.returncode == 0 and commit in read("train-h200.json") and "tree.json" not in p.stderr,
          "a run of its commit's files is filed", p.stdout + p.stderr)
    json.dump({"commit": "before"}, open(os.path.join(results, "train-h200.json"), "w"))
    open(os.path.join(d, "src", "block.c"), "a").write("int uncommitted;\n")
    changed = subprocess.run(["bash", os.path.join(d, "scripts", "tree_hash.sh"), d], capture_output=True, text=True,
                             check=True).stdout.strip()
    p = file_run(commit, run_of("run-train-changed.tgz", changed))
    check(p.returncode == 2 and "ran other files than commit" in p.stderr and "before" in read("train-h200.json"),
          "a run of uncommitted changes is refused, nothing filed", p.stdout + p.stderr)
    p = file_run("feedface", run_of("run-train-unknown.tgz", tree))
    check(p.returncode == 2 and "is not in this repository" in p.stderr and "before" in read("train-h200.json"),
          "a run filed under a commit the repository lacks is refused", p.stdout + p.stderr)
    # an autotuned peers run is checked against the commit its JSON names, not the bench run's it is filed beside
    tuned = {"commit": commit, "command": "GG_COMMIT=<sha> bash scripts/device.sh peers", "variants": {},
             "results": [{"block": block, "index": 0, "M": 2048}]}
    peers_tree = os.path.join(d, "run-peers-tree.tgz")
    for tree_hash, ok in ((tree, True), (changed, False)):
        tgz(peers_tree, {"./peers.log": "== PyTorch's autotuned peers\n",
                         "./tree.json": json.dumps({"tree": tree_hash}), "./peers-autotune.json": json.dumps(tuned)})
        p = file_run("7777777", peers_tree)
        check((p.returncode == 0) == ok and (ok or "ran other files than commit " + commit in p.stderr),
              "a peers run of its own commit's files is filed beside another commit's" if ok else
              "a peers run of other files than its own commit's is refused", p.stdout + p.stderr)

finish("FILE_RUN")
