#!/usr/bin/env python3
"""collect_train.py GRAPH_JSON EAGER_JSON TORCH_JSON RESULT COMMIT COMMAND GPU - docs/results/train-h200.json from
scripts/device.sh's train stage: examples/train's step-graph run and its --eager run (--json), and the PyTorch twin
(bench/peers/train_torch.py --json), all with the same model, initial weights, batches and steps.

"loss_last" is the mean of the last 50 steps' losses (one batch's loss is noisy), the twin's the same over its eager
variant. max_rel_diff_vs_eager: the largest |graph - eager| / |eager| over the per-step losses. "done" checks the
issue's conditions: the loss within 10 % of the twin's (or down 5x), the eager match (1e-4 in fp32), one launch per
step, and a step graph faster than every PyTorch variant that ran.
"""
import json
import sys

graph_path, eager_path, torch_path, out, commit, command, gpu = sys.argv[1:8]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"collect_train.py: {path}: {e}", file=sys.stderr)
        return None


g, e, t = load(graph_path), load(eager_path), load(torch_path)
if not g:
    sys.exit("collect_train.py: no step-graph run")
variants = (t or {}).get("variants", {})
torch_us = {k: variants.get(v, {}).get("step_us") for k, v in
            (("torch_eager", "eager"), ("torch_cuda_graph", "graph"), ("torch_compile", "compile"))}
torch_last = variants.get("eager", {}).get("loss_last")
diff = None
if e and len(e["losses"]) == len(g["losses"]):
    diff = max(abs(a - b) / abs(b) if b == b and b != 0 else float("inf") for a, b in zip(g["losses"], e["losses"]))
tol = 1e-4 if g["precision"] == "fp32" else 1e-3
ran = [v for v in torch_us.values() if v]
done = {
    "loss_within_10pct_of_torch_or_5x": bool(torch_last and g["loss_last"] <= 1.1 * torch_last)
    or g["loss_last"] * 5 <= g["loss_first"],
    "eager_match": diff is not None and diff <= tol,
    "one_launch_per_step": g["graph_launches_per_step"] == 1,
    "faster_than_every_torch_variant": bool(ran) and all(g["step_us"] < v for v in ran),
}
result = {
    "commit": commit, "command": command, "gpu": gpu,
    "precision": g["precision"], "layers": g["layers"], "context": g["context"], "embed": g["embed"],
    "hidden": g["hidden"], "ffn": g["ffn"], "vocab": g["vocab"], "batch": g["batch"], "steps": g["steps"],
    "loss_first": g["loss_first"], "loss_last": g["loss_last"], "torch_loss_last": torch_last,
    "max_rel_diff_vs_eager": diff,
    "step_us": {"gg_graph": g["step_us"], "gg_eager": e["step_us"] if e else None, **torch_us},
    "tokens_per_s": g["tokens_per_s"],
    "graph_launches_per_step": g["graph_launches_per_step"],
    "torch": {"version": (t or {}).get("torch"),
              "notes": {k: v["note"] for k, v in variants.items() if "note" in v},
              "loss_last": {k: v.get("loss_last") for k, v in variants.items()}},
    "done": done,
}
with open(out, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
print(json.dumps({k: result[k] for k in ("loss_first", "loss_last", "torch_loss_last", "max_rel_diff_vs_eager",
                                         "step_us", "graph_launches_per_step", "done")}))
