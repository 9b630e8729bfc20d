#!/usr/bin/env python3
"""test_collect_bench.py - scripts/collect_bench.py on a bench run and peers runs made up here: the block's GEMMs
alone (torch_peers.py --gemm-floor) land per case as gemm_floor_us with gradgraph's time and the best peer's over
them, never as a peer though they are the fastest time of the case; a peers run without the floor (the autotuned
peers, merged after) keeps the first run's floor and adds its variant as the best peer where it is faster; a block
where some case has no floor gets no per-block floor figures; a block with the floor everywhere gets the fraction of
SOL the GEMMs alone reach.
Usage: test_collect_bench.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]
MLP, FFN = "073_feedforward_mlp_backward", "068_gelu_approximate_feedforward_backward"


def case(block, i, m, us):
    return {"block": block, "mode": "fp16", "index": i, "M": m, "graph_span_us": us, "graph_us": us + 5,
            "sol_us": us / 2, "correct": True, "bitwise_equal": True}


bench = {"gpu": "NVIDIA H200", "results": [case(MLP, 0, 2048, 500.0), case(MLP, 1, 8192, 1800.0),
                                           case(FFN, 0, 2048, 290.0), case(FFN, 1, 8192, 1040.0)]}
peer = lambda block, i, m, us, **kw: {"block": block, "index": i, "M": m, "torch_fp16_compile_us": us,
                                      "torch_fp16_compile_correct": True, **kw}
peers = {"torch": "2.11", "gemm_floor": True, "variants": {"torch_fp16_compile": "torch.compile"},
         "results": [peer(MLP, 0, 2048, 600.0, gemm_floor_us=400.0), peer(MLP, 1, 8192, 2200.0, gemm_floor_us=1500.0),
                     peer(FFN, 0, 2048, 340.0, gemm_floor_us=200.0), peer(FFN, 1, 8192, 1200.0)]}
autotuned = {"commit": "abc1234", "command": "peers", "variants": {"torch_fp16_autotune": "max-autotune"},
             "results": [{"block": MLP, "index": 1, "M": 8192, "torch_fp16_autotune_us": 2000.0,
                          "torch_fp16_autotune_correct": True}]}
with tempfile.TemporaryDirectory() as d:
    paths = {}
    for name, doc in (("bench", bench), ("peers", peers), ("autotune", autotuned)):
        paths[name] = os.path.join(d, name + ".json")
        json.dump(doc, open(paths[name], "w"))
    out = os.path.join(d, "bench-h200.json")
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "collect_bench.py"), paths["bench"],
                        paths["peers"] + "," + paths["autotune"], out, "abc1234", "the command"],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"collect_bench.py exits 0 ({p.returncode})", p.stderr)
    doc = json.load(open(out)) if p.returncode == 0 else {"blocks": {}, "peers": {}}
    mlp, ffn = doc["blocks"].get(MLP, {}), doc["blocks"].get(FFN, {})
    c0, c1 = (mlp.get("cases") or [{}, {}])[:2]
    check(c0.get("best_peer") == "torch_fp16_compile" and c0.get("best_peer_us") == 600.0,
          "the floor, the case's fastest time, is not its best peer", json.dumps(c0))
    check("gemm_floor" not in mlp.get("peer_variants", {}) and "gemm_floor_us" not in (doc["peers"]["variants"] or {})
          and "gemm_floor" not in c0.get("peers_failing", ["gemm_floor"]),
          "the floor is no peer variant, passing or failing", json.dumps(mlp.get("peer_variants")))
    check(c0.get("gemm_floor_us") == 400.0 and c0.get("over_gemm_floor") == 1.25 and
          c0.get("best_peer_over_gemm_floor") == 1.5, "per case: the floor, gradgraph's and the best peer's over it",
          json.dumps(c0))
    check(c1.get("best_peer") == "torch_fp16_autotune" and c1.get("gemm_floor_us") == 1500.0 and
          c1.get("best_peer_over_gemm_floor") == round(2000.0 / 1500.0, 3),
          "a later peers run without the floor keeps it, its faster variant the best peer", json.dumps(c1))
    check(mlp.get("gemm_floor_geomean_us") == round((400.0 * 1500.0) ** 0.5, 2) and
          mlp.get("best_peer_over_gemm_floor_min") == round(2000.0 / 1500.0, 3) and
          mlp.get("over_gemm_floor") == round(mlp["geomean_us"] / mlp["gemm_floor_geomean_us"], 3),
          "per block: the floor's geomean, gradgraph's over it, the smallest lead it leaves", json.dumps(mlp)[:600])
    # SOL is half of each case's time here (250 and 900 us): over the floor's 400 and 1500 us
    check(mlp.get("gemm_floor_sol_fraction") == round((250.0 * 900.0) ** 0.5 / (400.0 * 1500.0) ** 0.5, 4) and
          "gemm_floor_sol_fraction" not in ffn, "per block: the fraction of SOL the GEMMs alone reach",
          json.dumps(mlp)[:600])
    check("gemm_floor_geomean_us" not in ffn and ffn.get("cases", [{}])[0].get("gemm_floor_us") == 200.0 and
          "gemm_floor_us" not in ffn.get("cases", [{}, {}])[1],
          "a block with a case without the floor: per case only", json.dumps(ffn)[:600])
    check("gemm_floor" in doc["peers"] and "GEMMs alone" in p.stdout, "the JSON says what the floor is, the summary "
          "line gives it", p.stdout)
finish("COLLECT_BENCH")
