#!/usr/bin/env python3
"""test_file_run.py - scripts/file_run.sh on a made-up tests run, in a scratch copy of the tree's docs/results: the
run's JSON and logs land in run-<sha>/ and the JSON in results/; GG_FUZZ_LOG merges the fuzzer's figures (execs,
seconds, where they came from) into the reliability JSON and files the log; an older run folder of the same kind is
named for removal, one of the other kind (a bench run's) is not; a log without a FUZZ line fails the filing.
Usage: test_file_run.py REPO_ROOT"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

root = sys.argv[1]
failures = 0


def check(ok, what, detail=""):
    global failures
    print(f"{'ok' if ok else 'FAILED'}: {what}")
    if not ok:
        print(detail)
        failures += 1


def tgz(path, files):
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "scripts"))
    shutil.copy(os.path.join(root, "scripts", "file_run.sh"), os.path.join(d, "scripts"))
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

print("FILE_RUN", json.dumps({"failures": failures}))
sys.exit(1 if failures else 0)
