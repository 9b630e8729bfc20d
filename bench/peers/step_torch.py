#!/usr/bin/env python3
"""step_torch.py - the step graph example's residual GELU-MLP stack (examples/model_backward.c) in PyTorch: the whole
backward of L layers (per layer dW2, db2, G = dY W2, R = G * gelu'(x), db1, dX = R W1, dW1, then the residual add),
timed as eager PyTorch, captured in one torch.cuda.CUDAGraph, and under torch.compile; each with TF32 GEMMs on fp32
data ("tf32"), with fp16 operands (fp32 accumulation and outputs: the precision of gradgraph's FP16 mode) cast from
the fp32 tensors in the backward ("fp16"), and with the saved tensors and weights already in fp16 ("fp16_saved": what
autocast's forward saves for its backward, the counterpart of gradgraph's fp16 copies, model_backward
--fp16-copies). Prints one JSON object: per model, microseconds per backward for each variant.

  python3 bench/peers/step_torch.py [--steps N] [--json FILE] [--models large,small] [--budget S]
                                    [--compile-timeout S] [--precisions tf32,fp16,fp16_saved]

Time bounds, so that it fits a fixed slot on the GPU machine: each torch.compile variant (compiling it and timing
it) is stopped after --compile-timeout seconds (default 90; its time is then null with a note), and once less than
that is left of --budget seconds (default: none) for the whole run, the remaining torch.compile variants are
skipped (null, with a note); eager and CUDA-graph variants always run.
"""
import argparse
import json
import math
import sys
import time

import torch

from bounded import CompileTimeout, within  # bench/peers/bounded.py: the script's folder is on sys.path

MODELS = {"large": (8, 2048, 8192, 8192), "small": (8, 1024, 4096, 2048)}  # layers, D, F, tokens
C = math.sqrt(2 / math.pi)


def gelu_grad(x):
    t = torch.tanh(C * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C * (1 + 3 * 0.044715 * x * x)


def backward(layers, dy, half):
    """The explicit backward of the stack, last layer first; returns the input's gradient and every gradient. With
    half, the GEMMs' operands are cast to fp16 (a no-op for the tensors that are fp16 already: fp16_saved)."""
    grads = []
    mm = (lambda a, b: (a.half() @ b.half()).float()) if half else (lambda a, b: a @ b)
    for x, w1, w2, pre, act in reversed(layers):
        dw2 = mm(dy.t(), act)
        db2 = dy.sum(0)
        r = mm(dy, w2) * gelu_grad(pre)
        db1 = r.sum(0)
        dx = mm(r, w1)
        dw1 = mm(r.t(), x)
        grads += [dw1, db1, dw2, db2]
        dy = dx + dy
    return dy, grads


def time_ms(fn, steps):
    for _ in range(3):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(steps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / steps


def compile_seconds(a, started):
    """The time a torch.compile variant may take now: --compile-timeout, less when the budget is nearly spent; 0:
    skip it."""
    if a.budget is None:
        return a.compile_timeout
    left = a.budget - (time.time() - started) - 10
    return min(a.compile_timeout, left) if left >= 20 else 0


def run_model(name, steps, a, started):
    L, D, F, M = MODELS[name]
    g = torch.Generator(device="cuda").manual_seed(1)
    r = lambda *s, scale=1.0: (torch.rand(*s, device="cuda", generator=g) * 2 - 1) * scale
    layers = [(r(M, D), r(F, D, scale=D ** -0.5), r(D, F, scale=F ** -0.5), r(M, F), r(M, F)) for _ in range(L)]
    dy = r(M, D)
    out = {"name": "residual_mlp_" + name, "layers": L, "hidden": D, "ffn": F, "tokens": M}
    # fp16_saved: x, W1, W2 and act in fp16 (pre stays fp32: gelu' reads it in fp32, as gradgraph's does)
    saved = [(x.half(), w1.half(), w2.half(), pre, act.half()) for x, w1, w2, pre, act in layers]
    for prec in a.precisions.split(","):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        half = prec != "tf32"
        stack = saved if prec == "fp16_saved" else layers
        fn = lambda: backward(stack, dy, half)
        res = {"torch_eager": time_ms(fn, steps)}
        ref = fn()[0]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = fn()
        res["torch_cuda_graph"] = time_ms(graph.replay, steps)
        seconds = compile_seconds(a, started)
        res["torch_compile"] = None
        if not seconds:
            res["torch_compile_note"] = "skipped: the run's time budget was spent"
        else:
            try:
                compiled = torch.compile(fn)
                res["torch_compile"] = within(seconds, lambda: time_ms(compiled, steps))
            except CompileTimeout:
                res["torch_compile_note"] = f"stopped after {seconds:.0f} s (--compile-timeout)"
                torch._dynamo.reset()
            except Exception as e:  # an environment without a working compiler: say so, keep the rest
                res["torch_compile_note"] = f"failed: {str(e)[:200]}"
            if res["torch_compile"] is None:
                print(f"{name} {prec}: torch.compile {res['torch_compile_note']}", file=sys.stderr)
        res["check_max_rel_diff"] = float((static[0] - ref).abs().max() / ref.abs().max())
        out[prec] = {k: (v * 1e3 if isinstance(v, float) and k.startswith("torch") else v) for k, v in res.items()}
        print(f"{name} {prec}: " + ", ".join(f"{k} {v:.1f} us" for k, v in out[prec].items()
                                             if k.startswith("torch") and isinstance(v, float)), flush=True)
        del graph, static
        torch.cuda.empty_cache()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json")
    p.add_argument("--models", default="large,small")
    p.add_argument("--budget", type=float, help="seconds for the whole run (torch.compile variants are skipped "
                   "once it is nearly spent)")
    p.add_argument("--compile-timeout", type=float, default=90, help="seconds for one torch.compile variant")
    p.add_argument("--precisions", default="tf32,fp16,fp16_saved", help="the variants to time, in this order")
    a = p.parse_args()
    unknown = set(a.precisions.split(",")) - {"tf32", "fp16", "fp16_saved"}
    if unknown:
        p.error(f"--precisions: unknown {sorted(unknown)}")
    started = time.time()
    result = {"torch": torch.__version__, "models": [run_model(m, a.steps, a, started) for m in a.models.split(",")]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
