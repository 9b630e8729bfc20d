#!/usr/bin/env python3
"""step_torch.py - the step graph example's residual GELU-MLP stack (examples/model_backward.c) in PyTorch: the whole
backward of L layers, timed as eager PyTorch ("torch_eager"), captured in one torch.cuda.CUDAGraph
("torch_cuda_graph"), and under torch.compile ("torch_compile"), in five forms:

  autograd_fp16  autograd's backward of the nn.Module (bench/peers/stack.py) whose forward ran under autocast to fp16:
                 fp16 GEMM operands, what a PyTorch user writes; its forward runs untimed before each backward
  autograd_tf32  the same without autocast, TF32 GEMMs on fp32
  fp16_saved     the backward written out (per layer dW2, db2, G = dY W2, R = G * gelu'(x), db1, dX = R W1, dW1, the
                 residual add) on saved tensors and weights already in fp16 (what autocast's forward saves), fp32
                 accumulation and outputs: the precision of gradgraph's FP16 mode with the caller's fp16 copies
  fp16           the same written out, casting the fp32 tensors to fp16 in the backward (gradgraph's FP16 mode
                 converting)
  tf32           the same written out, TF32 GEMMs on fp32 data

and one more, not a peer but a floor:

  gemms_fp16     fp16_saved's GEMMs alone (per layer dW2, G, dX, dW1: fp16 operands, G in fp16, the others in fp32, as
                 gradgraph's), nothing between them, in a CUDA graph ("torch_cuda_graph"): the time the step would
                 take if every other kernel were free, under the same power limit. Its outputs are not gradients.

Each variant's gradients (the input's and every parameter's) are compared with the same form's math in float64 on
the same data: "max_rel_err_fp64" is the largest |got - ref| over all gradients relative to the largest |ref| of
the same gradient. Eager and torch.compile autograd are the median of per-step CUDA-event spans around the backward
alone; the other variants the mean of back-to-back steps. Each variant first runs untimed for --warm seconds
(default 1; examples/model_backward warms its step alike): a step this size holds the GPU at its power limit, where
its clock settles within about 0.3 s, so a variant timed straight after an idle pause (a compilation, a capture)
would otherwise run its first steps at the boost clock that a training run never sees. Prints one JSON object: per
model, per form, microseconds per backward for each variant.

  python3 bench/peers/step_torch.py [--steps N] [--json FILE] [--models large,small] [--budget S]
                                    [--compile-timeout S] [--compile-mode MODE] [--warm S]
                                    [--forms autograd_fp16,fp16_saved,fp16,tf32,autograd_tf32,gemms_fp16]

Time bounds, so that it fits a fixed slot on the GPU machine: each torch.compile variant (compiling it and timing
it) is stopped after --compile-timeout seconds (default 90; its time is then null with a note), and once less than
that is left of --budget seconds (default: none) for the whole run, the remaining torch.compile variants are
skipped (null, with a note); eager and CUDA-graph variants always run. --json FILE is rewritten after every model, so
that a run stopped from outside (a compilation the time limit could not interrupt) keeps the models it finished.

--compile-mode MODE compiles with torch.compile(mode=MODE) instead of its default, e.g.
"max-autotune-no-cudagraphs" (each GEMM's kernel chosen by timing cuBLAS against Triton templates; the CUDA-graph
variant is this script's own); the JSON's "compile_mode" says which.
"""
import argparse
import copy
import json
import math
import statistics
import sys
import time

import torch

from bounded import CompileTimeout, within  # bench/peers/bounded.py: the script's folder is on sys.path
from stack import MODELS, Stack  # bench/peers/stack.py

FORMS = ("autograd_fp16", "fp16_saved", "fp16", "tf32", "autograd_tf32", "gemms_fp16")
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
    return [dy] + grads


def warm_up(fn, seconds):
    """Three untimed calls of fn (the first may compile it), then more for `seconds` of device time, counted from
    there (waited for every 4 calls, so that the host's clock follows the device's): a compilation's seconds on the
    host must not count as the GPU's warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    started, n = time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        fn()
        n += 1
        if n % 4 == 0:
            torch.cuda.synchronize()


def time_ms(fn, steps, warm):
    """Mean of `steps` calls of fn back to back, after `warm` seconds of untimed ones."""
    warm_up(fn, warm)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(steps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / steps


def backward_ms(forward, backward_of, steps, warm):
    """Median over `steps` steps (after `warm` seconds of untimed ones) of backward_of(forward()) between two CUDA
    events, the forward untimed before it; returns it and the last step's gradients."""
    warm_up(lambda: backward_of(forward()), warm)
    spans = []
    for _ in range(steps):
        out = forward()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        grads = backward_of(out)
        b.record()
        b.synchronize()
        spans.append(a.elapsed_time(b))
    return statistics.median(spans), grads


def capture(fn, stream):
    """fn captured in a CUDA graph on `stream` after one warm-up run there: (graph, fn's outputs in the graph)."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            static = fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph, static


def rel_err(got, ref):
    return max(float((g.double() - r).abs().max() / r.abs().max().clamp_min(1e-300)) for g, r in zip(got, ref))


def compile_seconds(a, started):
    """The time a torch.compile variant may take now: --compile-timeout, less when the budget is nearly spent; 0:
    skip it."""
    if a.budget is None:
        return a.compile_timeout
    left = a.budget - (time.time() - started) - 10
    return min(a.compile_timeout, left) if left >= 20 else 0


def compiled_variant(res, a, started, run):
    """run() -> (ms, gradients) under the torch.compile bounds; the time in res["torch_compile"] (null with a note
    when skipped, stopped or failing); returns the gradients or None."""
    res["torch_compile"] = None
    seconds = compile_seconds(a, started)
    if not seconds:
        res["torch_compile_note"] = "skipped: the run's time budget was spent"
        return None
    try:
        res["torch_compile"], grads = within(seconds, run)
        return grads
    except CompileTimeout:
        res["torch_compile_note"] = f"stopped after {seconds:.0f} s (--compile-timeout)"
        torch._dynamo.reset()
    except Exception as e:  # an environment without a working compiler: say so, keep the rest
        res["torch_compile_note"] = f"failed: {str(e)[:200]}"
    return None


def written_out(form, data, dy, steps, a, started):
    """The written-out backward in `form` (fp16_saved, fp16, tf32): its three variants' times and errors."""
    if form == "fp16_saved":  # x, W1, W2 and act in fp16 (pre stays fp32: gelu' reads it in fp32, as gradgraph's)
        data = [(x.half(), w1.half(), w2.half(), pre, act.half()) for x, w1, w2, pre, act in data]
    fn = lambda: backward(data, dy, form != "tf32")
    res = {"torch_eager": time_ms(fn, steps, a.warm)}
    got = {"torch_eager": fn()}
    graph, got["torch_cuda_graph"] = capture(fn, torch.cuda.Stream())
    res["torch_cuda_graph"] = time_ms(graph.replay, steps, a.warm)
    compiled = torch.compile(fn, mode=a.compile_mode)
    got["torch_compile"] = compiled_variant(res, a, started, lambda: (time_ms(compiled, steps, a.warm), compiled()))
    del graph
    return res, got


def autograd(form, model, x, dy, steps, a, started):
    """autograd's backward of `model` in `form` (autograd_fp16, autograd_tf32): its three variants' times and
    gradients (the input's, then every parameter's)."""
    x = x.detach().requires_grad_()
    inputs = [x, *model.parameters()]

    def forward_of(m):
        with torch.autocast("cuda", dtype=torch.float16, enabled=form == "autograd_fp16"):
            return m(x)
    grad = lambda out: torch.autograd.grad(out, inputs, dy)
    res, got = {}, {}
    res["torch_eager"], got["torch_eager"] = backward_ms(lambda: forward_of(model), grad, steps, a.warm)
    # each backward op runs on its forward op's stream: the forward runs on the capture stream, the backward
    # captured there, keeping its saved tensors for every replay
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = forward_of(model)
    graph, got["torch_cuda_graph"] = capture(lambda: torch.autograd.grad(out, inputs, dy, retain_graph=True), stream)
    res["torch_cuda_graph"] = time_ms(graph.replay, steps, a.warm)
    compiled = torch.compile(model, mode=a.compile_mode)
    got["torch_compile"] = compiled_variant(res, a, started,
                                            lambda: backward_ms(lambda: forward_of(compiled), grad, steps, a.warm))
    del graph, out
    return res, got


def gemms_alone(data, dy, steps, a):
    """gemms_fp16: fp16_saved's GEMMs with nothing between them, in a CUDA graph, into buffers allocated once (G is
    every layer's dX and dW1 operand, as R is in the step); the CUDA graph's microseconds per step."""
    M, D, F = dy.shape[0], dy.shape[1], data[0][3].shape[1]
    half = lambda t: t.half().contiguous()
    ops = [(half(x), half(w1), half(w2), half(act)) for x, w1, w2, _, act in data]
    dy16, g = half(dy), torch.empty(M, F, device="cuda", dtype=torch.half)
    dx = torch.empty(M, D, device="cuda")
    dws = [(torch.empty(D, F, device="cuda"), torch.empty(F, D, device="cuda")) for _ in data]

    def fn():
        for (x, w1, w2, act), (dw2, dw1) in zip(reversed(ops), reversed(dws)):
            torch.mm(dy16.t(), act, out_dtype=torch.float32, out=dw2)
            torch.mm(dy16, w2, out=g)
            torch.mm(g, w1, out_dtype=torch.float32, out=dx)
            torch.mm(g.t(), x, out_dtype=torch.float32, out=dw1)
    graph, _ = capture(fn, torch.cuda.Stream())
    us = time_ms(graph.replay, steps, a.warm) * 1e3
    del graph
    return us


def run_model(name, a, started):
    L, D, F, M = MODELS[name]
    g = torch.Generator(device="cuda").manual_seed(1)
    r = lambda *s, scale=1.0: (torch.rand(*s, device="cuda", generator=g) * 2 - 1) * scale
    data = [(r(M, D), r(F, D, scale=D ** -0.5), r(D, F, scale=F ** -0.5), r(M, F), r(M, F)) for _ in range(L)]
    dy = r(M, D)
    torch.manual_seed(1)
    model = Stack(L, D, F).cuda()
    x = r(M, D)
    forms = a.forms.split(",")
    refs = {}  # float64 gradients on the GPU, per formulation
    if any(not f.startswith(("autograd", "gemms")) for f in forms):
        refs["written_out"] = backward([[t.double() for t in layer] for layer in data], dy.double(), False)
    if any(f.startswith("autograd") for f in forms):
        model64, x64 = copy.deepcopy(model).double(), x.double().requires_grad_()
        refs["autograd"] = torch.autograd.grad(model64(x64), [x64, *model64.parameters()], dy.double())
        del model64, x64
    torch.cuda.empty_cache()
    out = {"name": "residual_mlp_" + name, "layers": L, "hidden": D, "ffn": F, "tokens": M}
    for form in forms:
        torch.backends.cuda.matmul.allow_tf32 = form.endswith("tf32")
        if form == "gemms_fp16":
            out[form] = {"torch_cuda_graph": gemms_alone(data, dy, a.steps, a)}
            print(f"{name} {form}: torch_cuda_graph {out[form]['torch_cuda_graph']:.1f} us (a floor, not a peer)",
                  flush=True)
            continue
        if form.startswith("autograd"):
            res, got = autograd(form, model, x, dy, a.steps, a, started)
            ref = refs["autograd"]
        else:
            res, got = written_out(form, data, dy, a.steps, a, started)
            ref = refs["written_out"]
        res["max_rel_err_fp64"] = {k: rel_err(v, ref) for k, v in got.items() if v is not None}
        del got
        torch.cuda.empty_cache()
        if res["torch_compile"] is None:
            print(f"{name} {form}: torch.compile {res['torch_compile_note']}", file=sys.stderr)
        out[form] = {k: v * 1e3 if k.startswith("torch") and isinstance(v, float) else v for k, v in res.items()}
        print(f"{name} {form}: " + ", ".join(f"{k} {v:.1f} us (err {out[form]['max_rel_err_fp64'].get(k, 0):.1e})"
                                             for k, v in out[form].items()
                                             if k.startswith("torch") and isinstance(v, float)), flush=True)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json")
    p.add_argument("--models", default="large,small")
    p.add_argument("--budget", type=float, help="seconds for the whole run (torch.compile variants are skipped "
                   "once it is nearly spent)")
    p.add_argument("--compile-timeout", type=float, default=90, help="seconds for one torch.compile variant")
    p.add_argument("--forms", default=",".join(FORMS), help="the forms to time, in this order")
    p.add_argument("--compile-mode", help="torch.compile's mode (default: its default)")
    p.add_argument("--warm", type=float, default=1.0, help="seconds each variant runs untimed before it is timed")
    a = p.parse_args()
    if not 0 <= a.warm <= 600:
        p.error("--warm: seconds in [0, 600]")
    for flag, given, known in (("--forms", a.forms, FORMS), ("--models", a.models, MODELS)):
        unknown = set(given.split(",")) - set(known)
        if unknown:
            p.error(f"{flag}: unknown {sorted(unknown)}")
    started = time.time()
    result = {"torch": torch.__version__, "compile_mode": a.compile_mode or "default", "models": []}
    for m in a.models.split(","):
        result["models"].append(run_model(m, a, started))
        if a.json:  # after every model: a run stopped from outside keeps the models it finished
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
