#!/usr/bin/env python3
"""test_device_peers.py - scripts/device.sh's peers stage (PyTorch's autotuned peers), end to end on a machine without
GPUs: a scratch copy of the scripts with nvidia-smi and cmake faked on PATH and bench/peers/torch_peers.py faked in
the tree. The stage builds nothing; it times the default variant (torch_fp16_autotune) of blocks 2 and 3 with
torch.compile on, inside its budget, every case, or the variants, blocks and cases GG_PEERS_VARIANTS,
GG_PEERS_BLOCKS and GG_PEERS_CASES name; the JSON it leaves records the run's commit and command (file_run.sh
collects it with the bench run of that commit, and the bench JSON says which run made it); a peers run that fails
fails the stage. The stage runs only on the GPU machine:
this keeps it from breaking unseen. Usage: test_device_peers.py REPO_ROOT"""
import json
import os
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py
from fake_device import Machine, script  # tests/scripts/fake_device.py

root = sys.argv[1]

# logs its arguments, writes a peers JSON of one case where --json says, exits with FAKE_PEERS_RC (default 0)
TORCH_PEERS = ('echo "torch_peers $*" >> "$FAKE_LOG"\n'
               'json=; while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done\n'
               'echo \'{"torch": "2.11", "variants": {"torch_fp16_autotune": "max-autotune"}, "results": '
               '[{"block": "068", "index": 0, "M": 2048, "torch_fp16_autotune_us": 338.1, '
               '"torch_fp16_autotune_correct": true}]}\' > "$json"\nexit "${FAKE_PEERS_RC:-0}"\n')


def arg(calls, flag):
    """The value after `flag` in the logged torch_peers call, or None."""
    words = next((l.split() for l in calls.splitlines() if l.startswith("torch_peers ")), [])
    return words[words.index(flag) + 1] if flag in words[:-1] else None


with tempfile.TemporaryDirectory() as d:
    m = Machine(root, d)
    peers_py = os.path.join(m.tree, "bench", "peers", "torch_peers.py")
    script(peers_py, TORCH_PEERS)  # device.sh runs it as `python3 bench/peers/torch_peers.py`: python3 faked too
    script(os.path.join(m.bin, "python3"),
           f'if [ "$1" = bench/peers/torch_peers.py ]; then shift; exec bash {peers_py} "$@"; fi\n'
           f'exec {sys.executable} "$@"\n')

    out = os.path.join(d, "out-default")
    rc, text, calls = m.stage("peers", out, 1)
    check(rc == 0, "the peers stage passes", text + calls)
    check("cmake" not in calls and "== build" not in text, "it builds nothing", calls)
    check("torch_peers" in calls and "--compile" in calls.split(), "torch_peers.py runs with torch.compile on", calls)
    check(arg(calls, "--block") == "2,3" and arg(calls, "--variants") == "torch_fp16_autotune",
          "by default torch_fp16_autotune on blocks 2 and 3", calls)
    budget = arg(calls, "--budget")
    check(budget is not None and 400 < int(budget) <= 560, "the peers' budget inside the stage's 560 s", calls)
    check(arg(calls, "--cases") is None, "every case by default", calls)
    path = os.path.join(out, "peers-autotune.json")
    p = json.load(open(path)) if os.path.exists(path) else {}
    check(p.get("commit") == "abc1234" and "device.sh peers" in p.get("command", "") and
          p.get("results", [{}])[0].get("torch_fp16_autotune_us") == 338.1,
          "peers-autotune.json keeps the peers' results and records the commit and command", json.dumps(p))

    out = os.path.join(d, "out-chosen")
    rc, text, calls = m.stage("peers", out, 1, GG_PEERS_VARIANTS="autotune", GG_PEERS_BLOCKS="1,2,3,4",
                              GG_PEERS_BUDGET="300", GG_PEERS_CASES="11,12")
    p = json.load(open(os.path.join(out, "peers-autotune.json")))
    check(rc == 0 and arg(calls, "--variants") == "autotune" and arg(calls, "--block") == "1,2,3,4" and
          int(arg(calls, "--budget") or 0) <= 300 and arg(calls, "--cases") == "11,12",
          "GG_PEERS_VARIANTS, GG_PEERS_BLOCKS, GG_PEERS_BUDGET and GG_PEERS_CASES honoured", calls)
    check("GG_PEERS_BLOCKS=1,2,3,4" in p.get("command", "") and "GG_PEERS_BUDGET=300" in p.get("command", "") and
          "GG_PEERS_CASES=11,12" in p.get("command", ""),
          "the recorded command names the settings", json.dumps(p))

    out = os.path.join(d, "out-failing")
    rc, text, calls = m.stage("peers", out, 1, FAKE_PEERS_RC="1")
    check(rc != 0, "a peers run that fails fails the stage", text)

finish("DEVICE_PEERS")
