#!/usr/bin/env python3
"""train_torch.py - the PyTorch twin of examples/train.c: the same character model (the previous C characters
embedded and side by side, L residual layers x + fc2(gelu_tanh(fc1(x))), an output layer, softmax cross-entropy),
the same initial weights (read from `train --dump-init FILE`), the same batches (the same splitmix64 positions as
examples/train_kernels.cu's tk_batch) and AdamW with the same settings (weight decay on the matrices and the
embedding, not on the biases). Trains --steps steps per variant and prints, per variant, the per-step losses and
the time per step as one JSON object (--json FILE too):

  eager    PyTorch eager, AdamW fused (one kernel for every parameter)
  graph    the whole step (batch, forward, loss, backward, AdamW capturable) captured in one torch.cuda.CUDAGraph
  compile  forward and loss under torch.compile (backward by AOTAutograd), AdamW fused

  python3 bench/peers/train_torch.py --init FILE [--text FILE] [--steps N] [--batch M] [--precision fp32|tf32|fp16]
                                     [--variants eager,graph,compile] [--lr LR] [--weight-decay WD] [--seed S]
                                     [--warmup N] [--log-every N] [--json FILE] [--compile-timeout S] [--budget S]
                                     [--device cuda|cpu]

fp32: fp32 matmuls (TF32 off), as train --precision fp32; tf32: TF32 matmuls; fp16: autocast to fp16 (no loss
scaling, as train's fp16 mode). The batch of step s is computed on the GPU from a step counter the step advances,
so the graph variant replays with no host work, like train's step graph. Times: CUDA events from step --warmup
(default 10) to the end, with a synchronization for the progress line every --log-every steps, as train does.
Each torch.compile variant is stopped after --compile-timeout seconds (default 120; null with a note) and skipped
when less than that is left of --budget. --device cpu (a smoke test where there is no GPU; eager only, the graph
variant needs CUDA): add --init random and a small model (--layers 2 --batch 64 --steps 5), torch's own
initialization then.
"""
import argparse
import json
import math
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from bounded import CompileTimeout, within  # bench/peers/bounded.py: the script's folder is on sys.path

GAMMA = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1


def splitmix_positions(seed, steps, rows, n, context):
    """Position of row r of step s (train_kernels.cu, tk_batch, one GPU): splitmix64(seed + (i + 1) * gamma) mod
    (n - context), i = s * rows + r; uint64 arithmetic wraps in numpy as in C."""
    with np.errstate(over="ignore"):
        i = np.arange(steps * rows, dtype=np.uint64) + np.uint64(1)
        z = np.uint64(seed & MASK) + i * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(n - context)).astype(np.int64).reshape(steps, rows)


def read_text(path):
    """The text as ids into its sorted distinct bytes (train.c's read_corpus)."""
    raw = np.fromfile(path, dtype=np.uint8)
    vocab = np.unique(raw)
    lut = np.full(256, -1, dtype=np.int64)
    lut[vocab] = np.arange(len(vocab))
    return lut[raw], len(vocab)


def read_init(path):
    """train --dump-init's file: header, then the tensors in canonical order."""
    with open(path, "rb") as f:
        if f.read(8) != b"GGTRAIN1":
            sys.exit(f"{path}: not a train --dump-init file")
        vocab, context, embed, layers, hidden, ffn = struct.unpack("<6i", f.read(24))
        data = np.fromfile(f, dtype=np.float32)
    shapes = [(vocab, embed)]
    for _ in range(layers):
        shapes += [(ffn, hidden), (ffn,), (hidden, ffn), (hidden,)]
    shapes += [(vocab, hidden), (vocab,)]
    need = sum(math.prod(s) for s in shapes)
    if data.size != need:
        sys.exit(f"{path}: {data.size} floats, expected {need}")
    tensors, at = [], 0
    for s in shapes:
        k = math.prod(s)
        tensors.append(torch.from_numpy(data[at:at + k].copy()).reshape(s))
        at += k
    return dict(vocab=vocab, context=context, embed=embed, layers=layers, hidden=hidden, ffn=ffn), tensors


class CharMLP(torch.nn.Module):
    def __init__(self, vocab, context, embed, layers, ffn):
        super().__init__()
        hidden = context * embed
        self.emb = torch.nn.Embedding(vocab, embed)
        self.fc1 = torch.nn.ModuleList(torch.nn.Linear(hidden, ffn) for _ in range(layers))
        self.fc2 = torch.nn.ModuleList(torch.nn.Linear(ffn, hidden) for _ in range(layers))
        self.out = torch.nn.Linear(hidden, vocab)

    def canonical(self):
        """The parameters in the dump's order."""
        p = [self.emb.weight]
        for f1, f2 in zip(self.fc1, self.fc2):
            p += [f1.weight, f1.bias, f2.weight, f2.bias]
        return p + [self.out.weight, self.out.bias]

    def forward(self, tok):
        x = self.emb(tok).reshape(tok.shape[0], -1)
        for f1, f2 in zip(self.fc1, self.fc2):
            x = x + f2(F.gelu(f1(x), approximate="tanh"))
        return self.out(x)


class Trainer:
    """One variant's model, optimizer and on-device data, from the same initial weights."""

    def __init__(self, a, cfg, init, text, positions, variant):
        dev = torch.device(a.device)
        self.a, self.dev, self.variant = a, dev, variant
        self.context = cfg["context"]
        self.model = CharMLP(cfg["vocab"], cfg["context"], cfg["embed"], cfg["layers"], cfg["ffn"]).to(dev)
        if init is not None:
            with torch.no_grad():
                for p, t in zip(self.model.canonical(), init):
                    p.copy_(t)
        decay = [p for p in self.model.parameters() if p.dim() == 2]
        other = [p for p in self.model.parameters() if p.dim() != 2]
        cuda = dev.type == "cuda"
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                                      {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999),
                                     eps=1e-8, fused=cuda, foreach=False if not cuda else None,
                                     capturable=cuda and variant == "graph")
        self.text = torch.as_tensor(text, device=dev)
        self.positions = torch.as_tensor(positions, device=dev)
        self.offsets = torch.arange(cfg["context"] + 1, device=dev)
        self.step_t = torch.zeros(1, dtype=torch.int64, device=dev)
        self.losses = torch.full((a.steps,), float("nan"), device=dev)
        self.loss_fn = self.forward_loss
        if variant == "compile":
            self.loss_fn = torch.compile(self.forward_loss)

    def forward_loss(self, tok):
        with torch.autocast(self.dev.type, dtype=torch.float16, enabled=self.a.precision == "fp16"):
            logits = self.model(tok[:, :self.context])
        return F.cross_entropy(logits.float(), tok[:, self.context])

    def step(self):
        """One training step, all on the device: batch from the step counter, loss recorded, counter advanced."""
        pos = self.positions.index_select(0, self.step_t).reshape(-1)
        tok = self.text[pos[:, None] + self.offsets[None, :]]
        loss = self.loss_fn(tok)
        loss.backward()
        self.opt.step()
        self.losses.index_copy_(0, self.step_t, loss.detach().reshape(1))
        self.step_t += 1

    def capture(self):
        """The whole step in one CUDA graph. Warm-up steps on a side stream (as PyTorch's recipe asks) change the
        weights, AdamW's state and the counter: they are put back to the initial state afterwards, in place."""
        saved = [p.detach().clone() for p in self.model.parameters()]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.opt.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()
        with torch.no_grad():
            for p, v in zip(self.model.parameters(), saved):
                p.copy_(v)
            for state in self.opt.state.values():
                for v in state.values():
                    if torch.is_tensor(v):
                        v.zero_()
        self.step_t.zero_()
        self.losses.fill_(float("nan"))

    def train(self):
        a, cuda = self.a, self.dev.type == "cuda"
        run = self.graph.replay if self.variant == "graph" else self.eager_step
        start = end = None
        t0 = t_last = time.perf_counter()
        last = 0
        for i in range(a.steps):
            if i == a.warmup:
                if cuda:
                    start = torch.cuda.Event(enable_timing=True)
                    start.record()
                t0 = time.perf_counter()
            run()
            if (i + 1) % a.log_every == 0 or i + 1 == a.steps:
                loss = self.losses[i].item()  # synchronizes, as train's progress line does
                t = time.perf_counter()
                print(f"{self.variant} step {i + 1:6d}  loss {loss:.4f}  "
                      f"{(i + 1 - last) * a.batch / (t - t_last):.0f} tokens/s", file=sys.stderr)
                t_last, last = t, i + 1
        if cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            torch.cuda.synchronize()
            us = 1e3 * start.elapsed_time(end) / (a.steps - a.warmup)
        else:
            us = 1e6 * (time.perf_counter() - t0) / (a.steps - a.warmup)
        return us, self.losses.cpu().tolist()

    def eager_step(self):
        self.opt.zero_grad(set_to_none=True)
        self.step()


def summary(us, losses):
    tail = losses[-min(50, len(losses)):]
    return {"step_us": us, "loss_first": losses[0], "loss_last": sum(tail) / len(tail),
            "loss_last_steps": len(tail), "losses": losses}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="train --dump-init's file, or 'random' (torch's initialization)")
    p.add_argument("--text", default="examples/data/tinyshakespeare.txt")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8, help="with --init random (else the file's)")
    p.add_argument("--context", type=int, default=16, help="with --init random (else the file's)")
    p.add_argument("--embed", type=int, default=32, help="with --init random (else the file's)")
    p.add_argument("--precision", choices=("fp32", "tf32", "fp16"), default="fp32")
    p.add_argument("--variants", default="eager,graph,compile")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--json")
    p.add_argument("--compile-timeout", type=float, default=120)
    p.add_argument("--budget", type=float, help="seconds for the whole run (torch.compile skipped past it)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    a = p.parse_args()
    started = time.time()
    a.warmup = min(a.warmup, a.steps - 1)
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    text, vocab = read_text(a.text)
    if a.init == "random":
        torch.manual_seed(0)
        cfg = dict(vocab=vocab, context=a.context, embed=a.embed, layers=a.layers, hidden=a.context * a.embed,
                   ffn=4 * a.context * a.embed)
        init = None
    else:
        cfg, init = read_init(a.init)
        if cfg["vocab"] != vocab:
            sys.exit(f"{a.init} has a vocabulary of {cfg['vocab']}, {a.text} of {vocab}")
    positions = splitmix_positions(a.seed, a.steps, a.batch, len(text), cfg["context"])
    result = {"device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu", "torch": torch.__version__,
              "precision": a.precision, "steps": a.steps, "batch": a.batch, "warmup": a.warmup, **cfg,
              "variants": {}}
    for variant in a.variants.split(","):
        if variant not in ("eager", "graph", "compile"):
            sys.exit(f"unknown variant {variant}")
        if variant == "graph" and a.device != "cuda":
            result["variants"][variant] = {"note": "skipped: CUDA graphs need --device cuda"}
            continue
        if variant == "compile":
            left = a.budget - (time.time() - started) if a.budget else a.compile_timeout
            if left < 20:
                result["variants"][variant] = {"note": "skipped: the run's time budget was spent"}
                continue
        t = Trainer(a, cfg, init, text, positions, variant)
        try:
            if variant == "graph":
                t.capture()
            if variant == "compile":
                seconds = min(a.compile_timeout, a.budget - (time.time() - started)) if a.budget \
                    else a.compile_timeout
                us, losses = within(seconds, t.train)
            else:
                us, losses = t.train()
            result["variants"][variant] = summary(us, losses)
        except CompileTimeout:
            result["variants"][variant] = {"note": "stopped by --compile-timeout"}
        except Exception as e:  # an environment without a working compiler: say so, keep the rest
            result["variants"][variant] = {"note": f"failed: {str(e)[:300]}"}
        v = result["variants"][variant]
        print(f"{variant}: " + (f"{v['step_us']:.1f} us per step, loss {v['loss_first']:.4f} -> "
                                f"{v['loss_last']:.4f}" if "step_us" in v else v["note"]), file=sys.stderr)
        del t
    text_out = json.dumps(result)
    print(text_out)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text_out + "\n")


if __name__ == "__main__":
    main()
