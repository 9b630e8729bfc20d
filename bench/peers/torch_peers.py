#!/usr/bin/env python3
"""PyTorch peers of gradgraph's four blocks, timed the same way as bench/gg_bench.c.

For every case of tests/data/cases.csv (or --block N): inputs drawn as the spec says, a float64 reference, then the
spec's math in PyTorch, each variant captured in torch.cuda.CUDAGraphs so that no Python launch cost is timed,
replayed after writing 2x the L2 size (cold L2), timed with CUDA events; median of --iters after --warmup. Every
variant's outputs are checked with the benchmark's rule (>= 99 % of elements within atol + rtol |ref|, no NaN/Inf);
a variant that fails is reported with its time and "_correct": false (scripts/collect_bench.py never takes it as
the best peer).

Variants (each eager and, with --compile, torch.compile with dynamic shapes, or in max-autotune for each shape):
  torch_eager, torch_compile                   every block: blocks 1 and 4 in bf16 as the spec rounds them; blocks
                                               2 and 3 in fp32 with TF32 matmuls allowed
  torch_fp16_eager, torch_fp16_compile         blocks 2 and 3: every GEMM operand rounded to fp16, fp32 accumulation
                                               and fp32 GEMM outputs (torch.mm(..., out_dtype=torch.float32) where
                                               this PyTorch has it, else the fp16 product converted to fp32), every
                                               elementwise step and sum in fp32: what gradgraph's FP16 mode computes
  torch_autocast_eager, torch_autocast_compile blocks 2 and 3: the fp32 math under torch.autocast(dtype=float16)
                                               (fp16 GEMMs with fp16 results, elementwise in fp32 by type promotion),
                                               outputs converted to fp32 as autocast's autograd returns fp32 grads
  torch_autotune, torch_fp16_autotune,        torch.compile(mode="max-autotune-no-cudagraphs") of torch_eager,
  torch_autocast_autotune                      torch_fp16_eager and torch_autocast_eager, compiled for each case's
                                               shape (dynamic=False), each GEMM's kernel chosen by timing cuBLAS
                                               against Triton templates: PyTorch's fastest compiled form, at the
                                               cost of a compilation per shape (10-30 s each on an H200)
--variants selects among them (names, or the families base, fp16, autocast, autotune; default: all). Compile
variants run only with --compile (as before).

Time bounds: each torch.compile variant's warm-up calls (where it compiles, or recompiles) are stopped after
--compile-timeout seconds (default 90): that variant then has an "_error" on that case and is not tried again on the
block's later cases. With --budget S for the whole run, a compile variant not yet compiled is skipped once less than
its timeout is left, and every variant once the budget is spent (each with an "_error" saying so); the JSON is
rewritten after every case, so a run stopped from outside keeps the cases it finished.

--cases I,J,... runs only those case indices of each block.

--gemm-floor (blocks 2 and 3, on a GPU): also times the block's four GEMMs alone ("gemm_floor_us"), not a peer but a
floor: their operands already in fp16 (made outside the graph), one after another on one stream with nothing between
them, G written in fp16 and dX, dW1, dW2 in fp32 as gradgraph's FP16 mode writes them, under the same protocol. No
schedule of the block's math on cuBLAS's GEMMs runs faster, so best_peer_us over it is the most such a schedule can
lead the best peer by (scripts/collect_bench.py).

--device cpu (a check on a machine without a GPU, --max-tokens to keep it small): the same inputs, variants and
tolerance check, no CUDA graphs and no timing; autocast runs on the CPU's autocast.

Usage: torch_peers.py [--block N[,N...]] [--iters 50] [--warmup 10] [--compile] [--json FILE] [--variants LIST]
                      [--compile-timeout S] [--budget S] [--device cuda|cpu] [--max-tokens M] [--cases I,J,...]
                      [--gemm-floor]
"""
import argparse
import csv
import json
import math
import os
import statistics
import sys
import time

import torch

from bounded import CompileTimeout, within  # bench/peers/bounded.py: the script's folder is on sys.path

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


# ---- blocks 2 and 3 at gradgraph's FP16-mode precision ----
def mm_out_dtype(a, b):  # fp16 operands, fp32 accumulation and output, in one GEMM
    return torch.mm(a, b, out_dtype=torch.float32)


def mm_cast(a, b):  # the fp16 GEMM's result (fp32 accumulation, rounded to fp16), converted to fp32
    return (a @ b).float()


def fp16_blocks(mm):
    """Blocks 2 and 3 with every GEMM operand rounded to fp16 once (as gradgraph does), GEMMs through mm(fp16, fp16)
    -> fp32, everything else in fp32."""
    def block2_fp16(go, hs, w1, w2, x, tanh_inner, gelu_out):
        D, F = w2.shape
        go2 = go.reshape(-1, D).half()
        G = mm(go2, w2.half())
        dw2 = mm(go2.t(), gelu_out.reshape(-1, F).half())
        x2, T = x.reshape(-1, F), tanh_inner.reshape(-1, F)
        R = G * (0.5 * (1 + T) + 0.5 * x2 * (1 - T * T) * C * (1 + 0.134145 * x2 * x2))
        Rh = R.half()
        return mm(Rh, w1.half()), mm(Rh.t(), hs.reshape(-1, D).half()), dw2

    def block3_fp16(go, hs, w1, w2, x, act):
        D, F = w2.shape
        go2, x2 = go.reshape(-1, D), x.reshape(-1, F)
        go2h = go2.half()
        G = mm(go2h, w2.half())
        dw2 = mm(go2h.t(), act.reshape(-1, F).half())
        db2 = go2.sum(0)
        t = torch.tanh(C * (x2 + 0.044715 * x2 ** 3))
        R = G * (0.5 * (1 + t) + 0.5 * x2 * (1 - t * t) * C * (1 + 3 * 0.044715 * x2 * x2))
        Rh = R.half()
        return mm(Rh, w1.half()), mm(Rh.t(), hs.reshape(-1, D).half()), R.sum(0), dw2, db2

    return block2_fp16, block3_fp16


def gemm_floor_of(mm):
    """--gemm-floor: blocks 2 and 3's four GEMMs alone on fp16 operands (G in fp16, the others through mm in fp32),
    and the fp16 operands they read, made from a case's inputs (not timed)."""
    def gemms(go, w2, w1, hs, act):
        G = go @ w2
        return G, mm(G, w1), mm(G.t(), hs), mm(go.t(), act)

    def operands(go, hs, w1, w2, x, *rest):  # act: block 2's gelu_out (its last input), block 3's act
        return tuple(t.reshape(-1, t.shape[-1]).half().contiguous() for t in (go, w2, w1, hs, rest[-1]))
    return gemms, operands


def block2_autocast(*args):
    with torch.autocast(args[0].device.type, dtype=torch.float16):
        outs = block2(*args)
    return tuple(o.float() for o in outs)


def block3_autocast(*args):
    with torch.autocast(args[0].device.type, dtype=torch.float16):
        outs = block3(*args)
    return tuple(o.float() for o in outs)


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


def inputs(case, gen, device="cuda"):
    B, S, M, a, b = case["batch_size"], case["seq_len"], case["tokens"], case["dim0"], case["dim1"]
    n = lambda *shape, dt=torch.float32, scale=1.0: (torch.randn(*shape, generator=gen, device=device) * scale).to(dt)
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


def time_graph(fn, args, flush, iters, warmup, compile_limit=None):
    """Captures fn(*args) in CUDA graphs (after warming it up, which also compiles: within compile_limit seconds, else
    CompileTimeout), one per copy of the inputs at its own addresses, and times their replays in rotation. Returns
    the median and the first graph's outputs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())

    def warm():
        with torch.cuda.stream(side):
            for _ in range(3):
                fn(*args)
        torch.cuda.synchronize()
    within(compile_limit, warm)
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


def run_once(fn, args, compile_limit=None):
    """--device cpu: fn(*args) once (compiling it within compile_limit seconds); its outputs, no time."""
    return None, within(compile_limit, lambda: fn(*args))


# torch.compile's modes: DYNAMIC compiles once for every shape (dynamic=True); AUTOTUNE tunes each GEMM's kernel
# (cuBLAS against Triton templates) for one shape, so it compiles every case's shape on its own (dynamic=False),
# without torch.compile's own CUDA graphs (the variants are captured in CUDA graphs here already).
DYNAMIC, AUTOTUNE = "default", "max-autotune-no-cudagraphs"

# name: (family, compile mode or None for eager, blocks it applies to, what it computes)
VARIANTS = {
    "torch_eager": ("base", None, (1, 2, 3, 4), "eager; blocks 2, 3: fp32 with TF32 matmuls; blocks 1, 4: bf16"),
    "torch_compile": ("base", DYNAMIC, (1, 2, 3, 4), "torch.compile of torch_eager"),
    "torch_fp16_eager": ("fp16", None, (2, 3), "eager; GEMM operands rounded to fp16, fp32 accumulation and GEMM "
                         "outputs, elementwise and sums in fp32"),
    "torch_fp16_compile": ("fp16", DYNAMIC, (2, 3), "torch.compile of torch_fp16_eager"),
    "torch_autocast_eager": ("autocast", None, (2, 3), "eager; the fp32 math under torch.autocast(dtype=float16), "
                             "outputs converted to fp32"),
    "torch_autocast_compile": ("autocast", DYNAMIC, (2, 3), "torch.compile of torch_autocast_eager"),
    "torch_autotune": ("autotune", AUTOTUNE, (1, 2, 3, 4), f"torch.compile(mode={AUTOTUNE!r}) of torch_eager, "
                       "compiled for each shape"),
    "torch_fp16_autotune": ("autotune", AUTOTUNE, (2, 3), f"torch.compile(mode={AUTOTUNE!r}) of torch_fp16_eager, "
                            "compiled for each shape"),
    "torch_autocast_autotune": ("autotune", AUTOTUNE, (2, 3), f"torch.compile(mode={AUTOTUNE!r}) of "
                                "torch_autocast_eager, compiled for each shape"),
}


def allow_recompiles(n):
    """The AUTOTUNE variants compile each block's function once per shape; beyond dynamo's per-function limit (8 by
    default: its name changed across PyTorch versions) the later shapes would run uncompiled, timed as if compiled."""
    cfg = torch._dynamo.config
    attr = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    setattr(cfg, attr, max(getattr(cfg, attr), n))


def eager_of(name):
    """The eager variant a compiled one compiles (its form: base, fp16 or autocast)."""
    return name.replace("_compile", "_eager").replace("_autotune", "_eager")


def select_variants(spec, with_compile):
    names = []
    for tok in (t.strip() for t in spec.split(",") if t.strip()):
        if tok == "all":
            hits = list(VARIANTS)
        else:
            hits = [n for n, v in VARIANTS.items() if n == tok or v[0] == tok]
        if not hits:
            sys.exit(f"torch_peers.py: unknown variant {tok!r} (names: {', '.join(VARIANTS)}; families: base, fp16, "
                     "autocast, autotune, all)")
        names += [n for n in hits if n not in names]
    return [n for n in VARIANTS if n in names and (with_compile or not VARIANTS[n][1])]


def fp16_mm(device):
    """The fp16 GEMM the fp16 variants use: torch.mm(..., out_dtype=torch.float32) where this PyTorch runs it on this
    device, else the fp16 product converted to fp32."""
    try:
        a = torch.ones(16, 16, dtype=torch.float16, device=device)
        if mm_out_dtype(a, a).dtype == torch.float32:
            return mm_out_dtype, "torch.mm(out_dtype=torch.float32)"
    except (TypeError, RuntimeError, NotImplementedError):
        pass
    return mm_cast, "fp16 product, then .float()"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", default="0", help="a block id, or several comma-separated (default: all)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="also time the torch.compile variants (dynamic shapes)")
    ap.add_argument("--json")
    ap.add_argument("--variants", default="all", help="comma-separated variant names or families (base, fp16, "
                    "autocast, all); default all")
    ap.add_argument("--compile-timeout", type=float, default=90, help="seconds for one torch.compile variant's "
                    "compilation (default 90)")
    ap.add_argument("--budget", type=float, help="seconds for the whole run (default: none)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: check the numerics only")
    ap.add_argument("--max-tokens", type=int, default=0, help="only the cases with at most this many tokens")
    ap.add_argument("--cases", default="", help="only these case indices (comma-separated) of each block")
    ap.add_argument("--gemm-floor", action="store_true", help="blocks 2 and 3 on a GPU: also time the four GEMMs "
                    "alone on fp16 operands (gemm_floor_us: a floor, not a peer)")
    opt = ap.parse_args()
    only = {int(i) for i in opt.cases.split(",") if i.strip()}
    started = time.time()
    names = select_variants(opt.variants, opt.compile)
    if any(VARIANTS[n][1] == AUTOTUNE for n in names):
        allow_recompiles(64)
    want = {int(b) for b in opt.block.split(",") if int(b)}
    cases = []
    for r in csv.DictReader(open(CASES)):
        c = {k: (float(v) if k in ("atol", "rtol", "sol_us_b200") else v if k == "block" else int(v))
             for k, v in r.items()}
        if (not want or c["block_id"] in want) and (not opt.max_tokens or c["tokens"] <= opt.max_tokens) and \
                (not only or c["index"] in only):
            cases.append(c)
    cuda = opt.device == "cuda"
    flush = None
    if cuda:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    mm16, mm16_name = fp16_mm(opt.device)
    eager = {"torch_eager": {1: block1, 2: block2, 3: block3},
             "torch_fp16_eager": dict(zip((2, 3), fp16_blocks(mm16))),
             "torch_autocast_eager": {2: block2_autocast, 3: block3_autocast}}  # block 4: make_block4(silu)
    cast_fp16 = dict(zip((2, 3), fp16_blocks(mm_cast)))
    fp16_cast_for = {}  # fp16 variant -> why it fell back from out_dtype to the fp16 product converted to fp32
    compiled = {}  # (variant, block, silu, fp16 GEMM form) -> its torch.compile
    dead = {}  # (variant, block) -> why it no longer runs (its compilation was stopped)
    results = []
    out = {"gpu": torch.cuda.get_device_name(0) if cuda else "cpu (numerics only)", "torch": torch.__version__,
           "iters": opt.iters, "warmup": opt.warmup, "tf32": True, "fp16_mm": mm16_name,
           # PyTorch's default (True): cuBLAS may reduce split-k partial sums of fp16-output GEMMs in fp16; the
           # tolerance check says whether that still passes
           "fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
           "gemm_floor": bool(opt.gemm_floor and cuda), "fp16_mm_fallbacks": fp16_cast_for,
           "compile_timeout_s": opt.compile_timeout, "budget_s": opt.budget,
           "variants": {n: VARIANTS[n][3] for n in names}, "results": results,
           **({"cases": sorted(only)} if only else {})}  # --cases: the run covers these of each block only

    def left():
        return math.inf if opt.budget is None else opt.budget - (time.time() - started)

    def function(name, bid, silu, tokens):
        """The function variant `name` runs on block bid (compiled if it is a compile variant; an AUTOTUNE one for
        this many tokens), or a str: why not."""
        mode = VARIANTS[name][1]
        base = eager_of(name)
        cast = name in fp16_cast_for
        fn = (cast_fp16 if cast else eager[base]).get(bid) or make_block4(silu)
        if mode is None:
            return fn if left() >= 5 else "skipped: the run's time budget (--budget) was spent"
        if (name, bid) in dead:
            return dead[(name, bid)]
        key = (name, bid, silu, cast, None if mode == DYNAMIC else tokens)
        if key not in compiled:
            if left() < opt.compile_timeout + 10:
                return "skipped: the run's time budget (--budget) was nearly spent"
            compiled[key] = (torch.compile(fn, dynamic=True) if mode == DYNAMIC else
                             torch.compile(fn, dynamic=False, mode=mode))
        return compiled[key]

    for c in cases:
        bid = c["block_id"]
        gen = torch.Generator(device=opt.device).manual_seed(1000 + bid * 100 + c["index"])
        args = inputs(c, gen, opt.device)
        silu = bool(c["use_silu_gate"])
        ref = {1: ref1, 2: ref2, 3: ref3}.get(bid) or make_ref4(silu)
        refs = ref(*args)
        row = {"block": c["block"], "index": c["index"], "M": c["tokens"]}
        for name in names:
            if bid not in VARIANTS[name][2]:
                continue
            while True:
                fn = function(name, bid, silu, c["tokens"])
                if isinstance(fn, str):
                    row[name + "_error"] = fn
                    break
                # a compiled function compiles in its first calls, and may recompile on a new shape: bounded
                limit = opt.compile_timeout if VARIANTS[name][1] else None
                try:
                    if cuda:
                        us, outs = time_graph(fn, args, flush, opt.iters, opt.warmup, limit)
                    else:
                        us, outs = run_once(fn, args, limit)
                    ok, worst = check(outs, refs, c["atol"], c["rtol"])
                    if us is not None:
                        row[name + "_us"] = round(us, 2)
                    row[name + "_correct"], row[name + "_worst_matched"] = ok, round(worst, 6)
                    row.pop(name + "_error", None)
                    if name in fp16_cast_for:
                        row[name + "_note"] = "GEMMs as the fp16 product converted to fp32 (out_dtype failed)"
                except CompileTimeout:
                    dead[(name, bid)] = f"torch.compile stopped after {opt.compile_timeout:.0f} s (--compile-timeout)"
                    row[name + "_error"] = dead[(name, bid)]
                except Exception as e:  # a peer that fails is reported, not fatal
                    row[name + "_error"] = str(e)[:200]
                    if cuda:
                        torch.cuda.synchronize()
                    if VARIANTS[eager_of(name)][0] == "fp16" and mm16 is mm_out_dtype and name not in fp16_cast_for:
                        fp16_cast_for[name] = str(e)[:200]  # once more, with the fp16 product converted to fp32
                        continue
                break
        if opt.gemm_floor and cuda and bid in (2, 3) and left() >= 5:
            gemms, operands = gemm_floor_of(mm16)
            row["gemm_floor_us"] = round(time_graph(gemms, operands(*args), flush, opt.iters, opt.warmup)[0], 2)
        results.append(row)
        print(f"[{c['block'][:3]}] case {c['index']:2d} M={c['tokens']:6d}: " +
              "  ".join(f"{k} {v}" for k, v in row.items() if k.endswith(("_us", "_correct", "_error"))),
              file=sys.stderr, flush=True)
        if opt.json:  # after every case: a run stopped from outside keeps what it finished
            with open(opt.json + ".tmp", "w") as f:
                json.dump(out, f, indent=1)
            os.replace(opt.json + ".tmp", opt.json)
    out["seconds"] = round(time.time() - started, 1)
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump(out, f, indent=1)
    by = {}
    for r in results:
        by.setdefault(r["block"], []).append(r)
    for b, rs in by.items():
        for name in names:
            xs = [r[name + "_us"] for r in rs if name + "_us" in r]
            ran = [r for r in rs if name + "_correct" in r]
            if xs:
                g = math.exp(sum(math.log(x) for x in xs) / len(xs))
                ok = sum(bool(r.get(name + "_correct")) for r in rs)
                print(f"{b[:40]:40s} {name:22s} geomean {g:9.1f} us  correct {ok}/{len(rs)}")
            elif ran:
                ok = sum(bool(r.get(name + "_correct")) for r in rs)
                print(f"{b[:40]:40s} {name:22s} (not timed)         correct {ok}/{len(rs)}  worst matched "
                      f"{min(r[name + '_worst_matched'] for r in ran):.6f}")
    print(f"peers: {out['seconds']} s, fp16 GEMMs: {mm16_name}", file=sys.stderr)


if __name__ == "__main__":
    main()
