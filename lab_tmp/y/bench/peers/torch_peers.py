#!/usr/bin/env python3
"""PyTorch peers of gradgraph's four blocks, timed the same way as bench/gg_bench.c.

For every case of tests/data/cases.csv (or --block N): inputs drawn as the spec says, a float64 reference, then the
spec's math in PyTorch eager and (with --compile) torch.compile, each captured in a torch.cuda.CUDAGraph so that no
Python launch cost is timed, replayed after writing 2x the L2 size (cold L2), timed with CUDA events; median of
--iters after --warmup. Every peer's outputs are checked with the benchmark's rule (>= 99 % of elements within
atol + rtol |ref|, no NaN/Inf). The fp32 blocks run with TF32 matmuls allowed: the strongest setting a PyTorch user
would pick that still passes the tolerance.

Usage: torch_peers.py [--block N] [--iters 50] [--warmup 10] [--compile] [--json FILE]
"""
import argparse
import csv
import json
import math
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "..", "tests", "data", "cases.csv")
C = 0.7978845608028654

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


def rbf(x):  # the bf16 value of a float64 tensor, as float64 (the spec's rounding, through fp32)
    return x.float().to(torch.bfloat16).double()


# ---- the spec's math, as a PyTorch user writes it ----
def block1(go, gate, hs, mask):
    t = torch.tanh(gate.float())
    grad_hidden = (go * t) * mask  # bf16 results: each product rounded
    grad_gate = ((1 - t * t) * (go.float() * (hs * mask).float()).sum()).to(torch.bfloat16)
    return go.clone(), grad_hidden, grad_gate


def block2(go, hs, w1, w2, x, tanh_inner, gelu_out):
    D, F = w2.shape
    go2, hs2 = go.reshape(-1, D), hs.reshape(-1, D)
    G = go2 @ w2
    dw2 = go2.t() @ gelu_out.reshape(-1, F)
    x2, T = x.reshape(-1, F), tanh_inner.reshape(-1, F)
    R = G * (0.5 * (1 + T) + 0.5 * x2 * (1 - T * T) * C * (1 + 0.134145 * x2 * x2))
    return R @ w1, R.t() @ hs2, dw2


def block3(go, hs, w1, w2, x, act):
    D, F = w2.shape
    go2, hs2, x2 = go.reshape(-1, D), hs.reshape(-1, D), x.reshape(-1, F)
    G = go2 @ w2
    dw2 = go2.t() @ act.reshape(-1, F)
    db2 = go2.sum(0)
    t = torch.tanh(C * (x2 + 0.044715 * x2 ** 3))
    R = G * (0.5 * (1 + t) + 0.5 * x2 * (1 - t * t) * C * (1 + 3 * 0.044715 * x2 * x2))
    return R @ w1, R.t() @ hs2, R.sum(0), dw2, db2


def make_block4(silu):
    def block4(go, ssm, gate, w, gate_act, gated):
        H, E = w.shape
        go2 = go.reshape(-1, H)
        dw = go2.t() @ gated.reshape(-1, E)
        db = go2.sum(0)
        g = go2 @ w
        gs = g * gate_act.reshape(-1, E)
        a = g * ssm.reshape(-1, E)
        if silu:
            z = gate.reshape(-1, E)
            s = torch.sigmoid(z)
            a = a * (s * (1 + z * (1 - s)))
        return gs, a, dw, db
    return block4


# ---- float64 references (the spec's roundings where it has them) ----
def ref1(go, gate, hs, mask):
    t = torch.tanh(gate.double())
    go, hs, mask = go.double(), hs.double(), mask.double()
    gh = rbf(rbf(go * t) * mask)
    gg = rbf((1 - t * t) * (go * rbf(hs * mask)).sum())
    return go, gh, gg


def ref2(go, hs, w1, w2, x, tanh_inner, gelu_out):
    return block2(*(a.double() for a in (go, hs, w1, w2, x, tanh_inner, gelu_out)))


def ref3(go, hs, w1, w2, x, act):
    return block3(*(a.double() for a in (go, hs, w1, w2, x, act)))


def make_ref4(silu):
    def ref4(go, ssm, gate, w, gate_act, gated):
        H, E = w.shape
        go2 = go.double().reshape(-1, H)
        dw = rbf(go2.t() @ gated.double().reshape(-1, E))
        db = rbf(go2.sum(0))
        g = rbf(go2 @ w.double())
        gs = rbf(g * gate_act.double().reshape(-1, E))
        a = rbf(g * ssm.double().reshape(-1, E))
        if silu:
            z = gate.double().reshape(-1, E)
            s = rbf(torch.sigmoid(z))
            d = rbf(s * rbf(1 + rbf(z * rbf(1 - s))))
            a = rbf(a * d)
        return gs, a, dw, db
    return ref4


def inputs(case, gen):
    B, S, M, a, b = case["batch_size"], case["seq_len"], case["tokens"], case["dim0"], case["dim1"]
    n = lambda *shape, dt=torch.float32, scale=1.0: (torch.randn(*shape, generator=gen, device="cuda") * scale).to(dt)
    bf = torch.bfloat16
    if case["block_id"] == 1:
        return n(B, S, a, dt=bf), n((), dt=bf), n(B, S, a, dt=bf), n(B, S, 1, dt=bf)
    if case["block_id"] == 2:
        go, hs, w1, w2 = n(B, S, a), n(B, S, a), n(b, a, scale=0.02), n(a, b, scale=0.02)
        x = hs @ w1.t()
        T = torch.tanh(C * (x + 0.044715 * x ** 3))
        return go, hs, w1, w2, x, T, 0.5 * x * (1 + T)
    if case["block_id"] == 3:
        return n(B, S, a), n(B, S, a), n(b, a, scale=a ** -0.5), n(a, b, scale=b ** -0.5), n(B, S, b), n(B, S, b)
    return (n(B, S, a, dt=bf), n(B, S, b, dt=bf), n(B, S, b, dt=bf), n(a, b, dt=bf, scale=b ** -0.5),
            n(B, S, b, dt=bf), n(B, S, b, dt=bf))


def check(outs, refs, atol, rtol):
    worst = 1.0
    for o, r in zip(outs, refs):
        o, r = o.float().reshape(-1), r.float().reshape(-1)
        if not torch.isfinite(o).all():
            return False, 0.0
        ratio = ((o - r).abs() <= atol + rtol * r.abs()).float().mean().item()
        worst = min(worst, ratio)
    return worst >= 0.99, worst


INPUT_COPIES = 3  # input sets rotated between timed replays: inputs at a fresh address each time (as gg_bench)


def time_graph(fn, args, flush, iters, warmup):
    """Captures fn(*args) in CUDA graphs (after warming it up, which also compiles), one per copy of the inputs at
    its own addresses, and times their replays in rotation. Returns the median and the first graph's outputs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graphs, outs = [], None
    for k in range(INPUT_COPIES):
        a = args if k == 0 else tuple(x.clone() if torch.is_tensor(x) else x for x in args)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = fn(*a)
        graphs.append((graph, a))
        outs = o if k == 0 else outs
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for i in range(warmup + iters):
        flush.fill_(i & 0xff)  # cold L2
        start.record()
        graphs[i % INPUT_COPIES][0].replay()
        end.record()
        end.synchronize()
        if i >= warmup:
            samples.append(1000.0 * start.elapsed_time(end))
    return statistics.median(samples), outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", type=int, default=0)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile (dynamic shapes)")
    ap.add_argument("--json")
    opt = ap.parse_args()
    cases = []
    for r in csv.DictReader(open(CASES)):
        c = {k: (float(v) if k in ("atol", "rtol", "sol_us_b200") else v if k == "block" else int(v)) for k, v in r.items()}
        if not opt.block or c["block_id"] == opt.block:
            cases.append(c)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    compiled = {}
    results = []
    for c in cases:
        gen = torch.Generator(device="cuda").manual_seed(1000 + c["block_id"] * 100 + c["index"])
        args = inputs(c, gen)
        silu = bool(c["use_silu_gate"])
        fn, ref = {1: (block1, ref1), 2: (block2, ref2), 3: (block3, ref3)}.get(
            c["block_id"], (make_block4(silu), make_ref4(silu)))
        refs = ref(*args)
        row = {"block": c["block"], "index": c["index"], "M": c["tokens"]}
        variants = [("torch_eager", fn)]
        if opt.compile:
            key = (c["block_id"], silu)
            if key not in compiled:
                compiled[key] = torch.compile(fn, dynamic=True)
            variants.append(("torch_compile", compiled[key]))
        for name, f in variants:
            try:
                us, outs = time_graph(f, args, flush, opt.iters, opt.warmup)
                ok, worst = check(outs, refs, c["atol"], c["rtol"])
                row[name + "_us"], row[name + "_correct"], row[name + "_worst_matched"] = round(us, 2), ok, round(worst, 6)
            except Exception as e:  # a peer that fails is reported, not fatal
                row[name + "_error"] = str(e)[:200]
        results.append(row)
        print(f"[{c['block'][:3]}] case {c['index']:2d} M={c['tokens']:6d}: " +
              "  ".join(f"{k} {v}" for k, v in row.items() if k.endswith("_us") or k.endswith("_correct")),
              file=sys.stderr, flush=True)
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "iters": opt.iters,
           "warmup": opt.warmup, "tf32": True, "results": results}
    if opt.json:
        json.dump(out, open(opt.json, "w"), indent=1)
    by = {}
    for r in results:
        by.setdefault(r["block"], []).append(r)
    for b, rs in by.items():
        for name in ("torch_eager", "torch_compile"):
            xs = [r[name + "_us"] for r in rs if name + "_us" in r]
            if xs:
                g = math.exp(sum(math.log(x) for x in xs) / len(xs))
                ok = sum(bool(r.get(name + "_correct")) for r in rs)
                print(f"{b[:40]:40s} {name:14s} geomean {g:9.1f} us  correct {ok}/{len(rs)}")


if __name__ == "__main__":
    main()
