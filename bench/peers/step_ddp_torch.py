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
Medians over --rounds rounds of --steps steps, rank 0's. DDP is not captured in a CUDA graph here (eager DDP);
torch.compile is not applied (DDP's graph breaks at every bucket).

  python3 bench/peers/step_ddp_torch.py [--gpus N] [--models large,small] [--steps N] [--rounds N]
                                        [--precision fp16|tf32] [--json FILE]
Prints one JSON object: {"torch", "gpus", "precision", "models": [{"name", ..., "torch_ddp": {...}}]}.
"""
import argparse
import json
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

from stack import MODELS, Stack  # bench/peers/stack.py: the script's folder is on sys.path


def backward_ms(module, x, dy, precision, steps):
    """Per step: zeroed gradients and the forward untimed, then the backward between two CUDA events."""
    times = []
    for _ in range(steps):
        module.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.float16, enabled=precision == "fp16"):
            out = module(x)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out.backward(dy)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


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
        sync, local = [], []
        for _ in range(a.rounds):  # interleaved, so that both see the same clocks
            dist.barrier()
            local.append(backward_ms(plain, x, dy, a.precision, a.steps))
            dist.barrier()
            sync.append(backward_ms(ddp, x, dy, a.precision, a.steps))
        # the reduced gradients are the same bits on every rank (a reduction that did not happen would differ)
        g = torch.cat([p.grad.flatten() for p in model.parameters()])
        ref = g.clone()
        dist.broadcast(ref, 0)
        same = bool(torch.equal(g, ref))
        step_us, local_us = statistics.median(sync) * 1e3, statistics.median(local) * 1e3
        results.append({"name": "residual_mlp_" + name, "layers": L, "hidden": D, "ffn": F, "tokens": M,
                        "torch_ddp": {"gpus": gpus, "precision": a.precision, "step_us": step_us,
                                      "step_us_no_sync": local_us, "speedup": gpus * local_us / step_us,
                                      "gradients_equal_across_ranks": same, "cuda_graph": False,
                                      "bucket_view": True, "static_graph": True}})
        if rank == 0:
            r = results[-1]["torch_ddp"]
            print(f"{name}: DDP on {gpus} GPU(s), {a.precision}: backward {step_us:.1f} us, without the reduction "
                  f"{local_us:.1f} us: speedup {r['speedup']:.3f}x, gradients equal on every rank: {same}",
                  flush=True)
        del ddp, model, plain
        torch.cuda.empty_cache()
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


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
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
