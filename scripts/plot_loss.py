#!/usr/bin/env python3
"""plot_loss.py PNG RUN_JSON [RUN_JSON ...] - the loss curves of examples/train (--json) and its PyTorch twin
(bench/peers/train_torch.py --json: one curve per variant) on one plot: loss per step, with a running mean over 20
steps drawn over each run's raw losses."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def curves(path):
    with open(path) as f:
        run = json.load(f)
    if "variants" in run:  # the twin
        return [(f"PyTorch {name} ({run['precision']})", v["losses"]) for name, v in run["variants"].items()
                if "losses" in v]
    return [(f"gradgraph {'step graph' if run['mode'] == 'graph' else 'eager'} ({run['precision']})", run["losses"])]


def running_mean(xs, k=20):
    out, s = [], 0.0
    for i, x in enumerate(xs):
        s += x
        if i >= k:
            s -= xs[i - k]
        out.append(s / min(i + 1, k))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fig, ax = plt.subplots(figsize=(8, 5))
    for path in sys.argv[2:]:
        for label, losses in curves(path):
            line, = ax.plot(running_mean(losses), label=label, linewidth=1.2)
            ax.plot(losses, color=line.get_color(), alpha=0.15, linewidth=0.5)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss (nats per character)")
    ax.set_title("examples/train on tinyshakespeare: gradgraph and its PyTorch twin")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=120)


if __name__ == "__main__":
    main()
