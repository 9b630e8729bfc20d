#!/usr/bin/env python3
"""step_ddp_torch.py - PyTorch DistributedDataParallel on the step graph example's residual GELU-MLP stack
(examples/model_backward.c, the models of step_torch.py), the peer of model_backward --gpus N.

One process per GPU (NCCL), each with its own batch of the model's tokens. The stack is an nn.Module (per layer
x + W2 gelu_tanh(W1 x + b1) + b2), its forward under autocast to fp16 (fp16 GEMM operands, fp32 parameters,
gradients and reduction: the precision of gradgraph's FP16 mode; --precision tf32 for TF32 GEMMs on fp32), wrapped
in DDP as its documentation recommends for speed: gradient_as_bucket_view, static_graph, the default 25 MiB buckets.
Timed per step with CUDA events around the backward alone (out.backward(dy); the forward runs untimed before it), as
model_backward times its backward:
  step_us          DDP's backward, its reduction included (the backward's end waits for the last bucket)
  step_us_no_sync  the same backward of the plain module on the same GPUs at the same time, nothing reduced
  speedup          gpus x step_us_no_sync / step_us, as model_backward defines its own
Medians over --rounds rounds of --steps steps, rank 0's. Each model runs eagerly and then, unless --no-cuda-graph,
CUDA-graphed as PyTorch's notes on CUDA graphs describe for DDP: eager warm-up steps on a side stream (DDP settles
its buckets in them), then the forward (with the gradients' zeroing) and the backward each captured in a graph of one
memory pool, autocast without its cache; a step replays the forward graph untimed and the backward graph between the
events, the reducer's all-reduces captured inside it. A graphed variant that fails records its error and leaves the
eager one standing. "torch_ddp" is the variant with the shorter DDP backward ("variant": "eager" or "cuda_graph"),
"torch_ddp_variants" both. torch.compile is not applied (DDP's graph breaks at every bucket). With --json the file
is rewritten after each model and variant, so a run cut short keeps what finished.

  python3 bench/peers/step_ddp_torch.py [--gpus N] [--models large,small] [--steps N] [--rounds N]
                                        [--precision fp16|tf32] [--no-cuda-graph] [--json FILE]
Prints one JSON object: {"torch", "gpus", "precision", "models": [{"name", ..., "torch_ddp": {...},
"torch_ddp_variants": [...]}]}.
"""
import argparse
import json
import os
import socket
import statistics
import sys
from functools import partial

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

from stack import MODELS, Stack  # bench/peers/stack.py: the script's folder is on sys.path

# Eager DDP steps before a capture: PyTorch's notes on CUDA graphs ask for at least 11 with DDP (its reducer settles
# its buckets and hooks in the first steps).
WARMUPS_BEFORE_CAPTURE = 11


def autocast(precision, cache=True):
    return torch.autocast("cuda", dtype=torch.float16, enabled=precision == "fp16", cache_enabled=cache)


def backward_ms(module, x, dy, precision, steps):
    """Per step: zeroed gradients and the forward untimed, then the backward between two CUDA events."""
    times = []
    for _ in range(steps):
        module.zero_grad(set_to_none=False)
        with autocast(precision):
            out = module(x)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out.backward(dy)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def capture_step(module, x, dy, precision, warmups=WARMUPS_BEFORE_CAPTURE):
    """The forward (zeroing the gradients first) and the backward, each a CUDA graph of one memory pool, after
    `warmups` eager steps on a side stream. Returns (forward graph, backward graph)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            module.zero_grad(set_to_none=False)
            with autocast(precision, cache=False):
                out = module(x)
            out.backward(dy)
    torch.cuda.current_stream().wait_stream(side)
    # both captured on one stream: autograd runs each backward op on its forward op's stream
    forward, backward = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(forward, stream=side):
        module.zero_grad(set_to_none=False)
        with autocast(precision, cache=False):
            out = module(x)
    with torch.cuda.graph(backward, pool=forward.pool(), stream=side):
        out.backward(dy)
    return forward, backward


def graphed_backward_ms(graphs, steps):
    """Per step: the forward graph untimed, then the backward graph's replay between two CUDA events."""
    forward, backward = graphs
    times = []
    for _ in range(steps):
        forward.replay()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        backward.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def gradients_equal_across_ranks(module):
    """Whether the reduced gradients are the same bits on every rank (a reduction that did not happen would differ)."""
    g = torch.cat([p.grad.flatten() for p in module.parameters()])
    ref = g.clone()
    dist.broadcast(ref, 0)
    return bool(torch.equal(g, ref))


def timed_rounds(time_plain, time_ddp, rounds):
    """Interleaved rounds, so that both see the same clocks: medians (ms) of the plain module's and DDP's backward."""
    sync, local = [], []
    for _ in range(rounds):
        dist.barrier()
        local.append(time_plain())
        dist.barrier()
        sync.append(time_ddp())
    return statistics.median(local), statistics.median(sync)


def write_json(path, result):
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def worker(rank, gpus, port, a, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=gpus, device_id=torch.device("cuda", rank))
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    results = []
    for name in a.models.split(","):
        L, D, F, M = MODELS[name]
        torch.manual_seed(1)  # the same initial weights on every rank; each rank its own batch
        model = Stack(L, D, F).cuda()
        torch.manual_seed(1)
        plain = Stack(L, D, F).cuda()  # its own copy: DDP's hooks sit on model's parameters
        gen = torch.Generator(device="cuda").manual_seed(100 + rank)
        x = torch.randn(M, D, device="cuda", generator=gen)
        dy = torch.randn(M, D, device="cuda", generator=gen)
        ddp = DDP(model, device_ids=[rank], gradient_as_bucket_view=True, static_graph=True)
        for module in (plain, ddp):  # warm-up: cuBLAS's plans, DDP's buckets (static_graph learns in its first step)
            backward_ms(module, x, dy, a.precision, 3)
        local, sync = timed_rounds(partial(backward_ms, plain, x, dy, a.precision, a.steps),
                                   partial(backward_ms, ddp, x, dy, a.precision, a.steps), a.rounds)
        variants = [ddp_figures(gpus, a.precision, "eager", local, sync, gradients_equal_across_ranks(model))]
        entry = {"name": "residual_mlp_" + name, "layers": L, "hidden": D, "ffn": F, "tokens": M,
                 "torch_ddp": variants[0], "torch_ddp_variants": variants}
        results.append(entry)
        report(rank, a, name, results, variants[-1])
        if a.cuda_graph:
            graphs, error = [], None
            try:
                graphs = [capture_step(plain, x, dy, a.precision), capture_step(ddp, x, dy, a.precision)]
            except Exception as e:  # noqa: BLE001 - any failure of the graphed form leaves the eager one standing
                error = f"{type(e).__name__}: {e}"
            # every rank goes on only if every rank captured: a rank that replays a graph holding NCCL work while
            # another does not would wait for ever (NCCL's watchdog does not see captured collectives)
            captured = torch.tensor([0 if error else 1], device="cuda")
            dist.all_reduce(captured, op=dist.ReduceOp.MIN)
            if captured.item() == 1:
                local, sync = timed_rounds(partial(graphed_backward_ms, graphs[0], a.steps),
                                           partial(graphed_backward_ms, graphs[1], a.steps), a.rounds)
                variants.append(ddp_figures(gpus, a.precision, "cuda_graph", local, sync,
                                            gradients_equal_across_ranks(model)))
            else:
                variants.append({"variant": "cuda_graph", "error": error or "another rank's capture failed"})
            torch.cuda.synchronize()
            del graphs  # before the process group goes: a graph holding NCCL work blocks the communicator's end
            best = [v for v in variants if "step_us" in v]
            entry["torch_ddp"] = min(best, key=lambda v: v["step_us"])
            report(rank, a, name, results, variants[-1])
        del ddp, model, plain
        torch.cuda.empty_cache()
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def ddp_figures(gpus, precision, variant, local_ms, sync_ms, same):
    step_us, local_us = sync_ms * 1e3, local_ms * 1e3
    return {"gpus": gpus, "precision": precision, "variant": variant, "step_us": step_us,
            "step_us_no_sync": local_us, "speedup": gpus * local_us / step_us, "gradients_equal_across_ranks": same,
            "cuda_graph": variant == "cuda_graph", "bucket_view": True, "static_graph": True}


def report(rank, a, name, results, v):
    """Rank 0 prints a variant's line and, with --json, rewrites the file with everything finished so far."""
    if rank != 0:
        return
    if "error" in v:
        print(f"{name}: DDP on {a.gpus} GPU(s), {v['variant']}: failed ({v['error']}); the eager figures stand",
              flush=True)
    else:
        print(f"{name}: DDP on {a.gpus} GPU(s), {a.precision}, {v['variant']}: backward {v['step_us']:.1f} us, "
              f"without the reduction {v['step_us_no_sync']:.1f} us: speedup {v['speedup']:.3f}x, gradients equal "
              f"on every rank: {v['gradients_equal_across_ranks']}", flush=True)
    if a.json:
        write_json(a.json, {"torch": torch.__version__, "gpus": a.gpus, "precision": a.precision, "models": results})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--models", default="large,small")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", default="fp16", choices=["fp16", "tf32"])
    p.add_argument("--no-cuda-graph", dest="cuda_graph", action="store_false",
                   help="time eager DDP only (no CUDA-graphed variant)")
    p.add_argument("--json")
    a = p.parse_args()
    unknown = set(a.models.split(",")) - set(MODELS)
    if unknown:
        p.error(f"--models: unknown {sorted(unknown)}")
    if not 1 <= a.gpus <= torch.cuda.device_count():
        p.error(f"--gpus {a.gpus}: this machine has {torch.cuda.device_count()} GPU(s)")
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(a.gpus, free_port(), a, queue), nprocs=a.gpus, join=True)
    result = {"torch": torch.__version__, "gpus": a.gpus, "precision": a.precision, "models": queue.get()}
    if a.json:
        write_json(a.json, result)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
