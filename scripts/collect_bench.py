#!/usr/bin/env python3
"""docs/results/bench-*.json, per block and case against SOL and the PyTorch peers, from one run's gg_bench JSON
and peers JSON. The case latency is gradgraph's graph replay as a CUPTI kernel span (the published protocol), in the
block's fast mode (fp16 for the fp32-I/O blocks); when the bench ran without CUPTI, the CUDA-event time, and "timing"
says so.

Peers: every variant bench/peers/torch_peers.py ran (torch_eager and torch_compile; for blocks 2 and 3 also the
fp16-operand variants torch_fp16_eager/_compile and torch_autocast_eager/_compile), per case its time
("<variant>_us") and whether it passed the tolerance. The case's best peer ("best_peer", "best_peer_us") is the
fastest variant that ran there and passed; a variant that failed is listed in "peers_failing" and never counts as
the best; a case where none passed has best_peer null and does not count as faster than it. "peers_correct" (kept
from before): every variant that ran on the case passed. Per block: each variant's geomean (over the cases it timed,
with how many), the best peer's geomean, how often each variant was the best, and the smallest best-peer/gradgraph
ratio. A peers JSON from before the fp16 variants (torch_eager and torch_compile only) still collects. Several peers
JSONs (comma-separated: the bench stage's and the peers stage's autotuned variants, made on one machine at one
commit) are merged case by case.

The floor: where the peers ran with --gemm-floor (blocks 2 and 3), a case also has "gemm_floor_us", the block's four
GEMMs alone on fp16 operands through cuBLAS, never a peer; "over_gemm_floor", gradgraph's time over it, and
"best_peer_over_gemm_floor", the most a schedule of the block's math on those GEMMs could lead the best peer by. Per
block, where every case has one: the floor's geomean, gradgraph's geomean over it, the smallest
best_peer_over_gemm_floor, and "gemm_floor_sol_fraction", the fraction of SOL the GEMMs alone reach (SOL's geomean
over the floor's): the most the block's sol_fraction could be on cuBLAS's GEMMs, its target's ceiling.

Usage: collect_bench.py BENCH_JSON PEERS_JSON[,PEERS_JSON...] OUT_JSON COMMIT COMMAND
"""
import json
import math
import sys

bench_path, peers_paths, out, commit, command = sys.argv[1:6]
FLOOR = "gemm_floor"  # torch_peers.py --gemm-floor's field: a bound, not a peer
bench = json.load(open(bench_path))


def merge_row(row, r):
    """A case's fields from a later file into row: the later file's where both have one, except that a variant
    measured in one file and not run in another ("<v>_error" and no "<v>_us", or a null one: skipped, say, when its
    budget ran out) keeps its measurement, and a measurement drops an earlier file's error for that variant."""
    for k, value in r.items():
        if k.endswith("_error") and row.get(k[: -len("_error")] + "_us") is not None:
            continue
        if k.endswith("_us") and value is None and row.get(k) is not None:
            continue
        if k.endswith("_us") and value is not None:
            row.pop(k[: -len("_us")] + "_error", None)
        row[k] = value


def merged(paths):
    """The peers JSONs as one: each case's fields from every file (merge_row), the variants in the order the files
    list them."""
    first, rows, runs = None, {}, []
    for path in paths:
        p = json.load(open(path))
        if first is None:
            first = p
        else:
            first["variants"] = {**(first.get("variants") or {}), **(p.get("variants") or {})}
        for r in p["results"]:
            merge_row(rows.setdefault((r["block"], r["index"]), {}), r)
        if p.get("command"):  # a run of its own (the peers stage's): which commit and command made it
            runs.append({"commit": p.get("commit"), "command": p["command"], "variants": list(p.get("variants") or [])})
    first["results"], first["runs"] = list(rows.values()), runs
    return first


peers = merged([p for p in peers_paths.split(",") if p])
peer = {(r["block"], r["index"]): r for r in peers["results"]}
geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs and all(x for x in xs) else None
fast = [r for r in bench["results"] if r["mode"] in ("fp16", "bf16")]
spans = all(r["graph_span_us"] > 0 for r in fast)  # -1 without CUPTI
latency = "graph_span_us" if spans else "graph_us"
timing = "CUPTI kernel span" if spans else "CUDA events (no CUPTI)"
# the variants, in the peers' order (their JSON lists them since the fp16 variants; before, the two in every row)
variants = list(peers.get("variants") or ["torch_eager", "torch_compile"])
for r in peers["results"]:
    for k in r:
        if k.endswith("_us") and k[:-3] not in variants and k[:-3] != FLOOR:
            variants.append(k[:-3])


def peer_fields(p):
    """Per case: each variant's time, the variants that failed, and the fastest that passed."""
    ran = [v for v in variants if p.get(v + "_us")]
    failing = [v for v in ran if not p.get(v + "_correct")]
    passing = [v for v in ran if p.get(v + "_correct")]
    best = min(passing, key=lambda v: p[v + "_us"]) if passing else None
    f = {v + "_us": p.get(v + "_us") for v in variants}
    f.update({"best_peer": best, "best_peer_us": p[best + "_us"] if best else None, "peers_failing": failing,
              "peers_correct": bool(ran) and not failing})
    errors = {v: p[v + "_error"] for v in variants if p.get(v + "_error")}
    if errors:
        f["peers_errors"] = errors
    return f


blocks = {}
for r in fast:
    p = peer.get((r["block"], r["index"]), {})
    case = {"index": r["index"], "M": r["M"], "median_us": r[latency], "sol_us": r["sol_us"],
            "correct": r["correct"] and r["bitwise_equal"], "events_us": r["graph_us"]}
    case.update(peer_fields(p))
    floor = p.get(FLOOR + "_us")
    if floor:  # what the block's GEMMs alone take: no schedule on them runs faster
        case[FLOOR + "_us"] = floor
        case["over_gemm_floor"] = round(case["median_us"] / floor, 3)
        case["best_peer_over_gemm_floor"] = round(case["best_peer_us"] / floor, 3) if case["best_peer_us"] else None
    blocks.setdefault(r["block"], {"mode": r["mode"], "cases": []})["cases"].append(case)
for b, s in blocks.items():
    cs = sorted(s["cases"], key=lambda c: c["index"])
    s["cases"] = cs
    s["geomean_us"] = round(geo([c["median_us"] for c in cs]), 2)
    s["sol_geomean_us"] = round(geo([c["sol_us"] for c in cs]), 2)
    s["sol_fraction"] = round(s["sol_geomean_us"] / s["geomean_us"], 4)
    s["peer_variants"] = {}
    for v in variants:
        timed = [c for c in cs if c[v + "_us"]]
        if not timed:
            continue
        g = geo([c[v + "_us"] for c in timed])
        s["peer_variants"][v] = {
            "geomean_us": round(g, 2), "cases_timed": len(timed),
            "cases_correct": sum(1 for c in timed if v not in c["peers_failing"]),
            "faster_than": sum(1 for c in timed if c["median_us"] < c[v + "_us"]),
            # over gradgraph's geomean over the same cases
            "over_gradgraph": round(g / round(geo([c["median_us"] for c in timed]), 2), 3)}
    for v in ("torch_eager", "torch_compile"):  # the fields from before the fp16 variants
        pv = s["peer_variants"].get(v)
        full = pv and pv["cases_timed"] == len(cs)
        s[v + "_geomean_us"] = pv["geomean_us"] if full else None
        s["faster_than_" + v] = pv["faster_than"] if pv else 0
        s[v + "_over_gradgraph"] = pv["over_gradgraph"] if full else None
    best = [c for c in cs if c["best_peer_us"]]
    bg = geo([c["best_peer_us"] for c in best]) if len(best) == len(cs) else None
    s["best_peer_geomean_us"] = round(bg, 2) if bg else None
    s["best_peer_over_gradgraph"] = round(bg / s["geomean_us"], 3) if bg else None
    s["best_peer_over_gradgraph_min"] = (round(min(c["best_peer_us"] / c["median_us"] for c in best), 3)
                                         if best else None)
    s["best_peer_variants"] = {v: sum(1 for c in best if c["best_peer"] == v)
                               for v in variants if any(c["best_peer"] == v for c in best)}
    s["cases_without_passing_peer"] = [c["index"] for c in cs if not c["best_peer_us"]]
    s["faster_than_best_peer"] = sum(1 for c in best if c["median_us"] < c["best_peer_us"])
    s["peers_correct"] = all(c["peers_correct"] for c in cs)
    if all(c.get(FLOOR + "_us") for c in cs):
        fg = geo([c[FLOOR + "_us"] for c in cs])
        s["gemm_floor_geomean_us"] = round(fg, 2)
        s["over_gemm_floor"] = round(s["geomean_us"] / fg, 3)
        led = [c["best_peer_over_gemm_floor"] for c in cs if c["best_peer_over_gemm_floor"]]
        s["best_peer_over_gemm_floor_min"] = min(led) if led else None
        s["gemm_floor_sol_fraction"] = round(s["sol_geomean_us"] / fg, 4)
json.dump({"commit": commit, "command": command, "gpu": bench["gpu"], "timing": timing + ", graph replay, cold L2",
           "peers": {"torch": peers.get("torch"), "fp16_mm": peers.get("fp16_mm"),
                     "variants": peers.get("variants") or {v: None for v in variants},
                     "best_peer": "per case, the fastest variant that passed the tolerance",
                     **({FLOOR: "per case, the block's four GEMMs alone on fp16 operands: a floor, not a peer"}
                        if any(FLOOR + "_us" in r for r in peers["results"]) else {}),
                     **({"other_runs": peers["runs"]} if peers["runs"] else {})},
           "blocks": blocks}, open(out, "w"), indent=1)
for b, s in blocks.items():
    def variant_text(v, x):
        text = f"{v[6:]} {x['geomean_us']} us"
        if x["cases_timed"] < len(s["cases"]):
            text += f" ({x['cases_timed']} cases)"
        if x["cases_correct"] < x["cases_timed"]:
            text += f" [fails {x['cases_timed'] - x['cases_correct']}]"
        return text
    pv = ", ".join(variant_text(v, x) for v, x in s["peer_variants"].items())
    print(f"{b[:12]} {s['mode']}: {s['geomean_us']} us, SOL {100 * s['sol_fraction']:.1f} %; peers: {pv}; best peer "
          f"{s['best_peer_geomean_us']} us ({', '.join(f'{v[6:]} {n}' for v, n in s['best_peer_variants'].items())}), "
          f"faster than the best peer on {s['faster_than_best_peer']}/{len(s['cases'])}"
          + (f", at least {s['best_peer_over_gradgraph_min']}x" if s["best_peer_over_gradgraph_min"] else "")
          + (f"; GEMMs alone {s['gemm_floor_geomean_us']} us, SOL {100 * s['gemm_floor_sol_fraction']:.1f} % "
             f"(gradgraph {s['over_gemm_floor']}x their time, the best peer at least "
             f"{s['best_peer_over_gemm_floor_min']}x)"
             if s.get("gemm_floor_geomean_us") else ""))
