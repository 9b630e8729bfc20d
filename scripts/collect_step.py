#!/usr/bin/env python3
"""collect_step.py OUT RESULT COMMIT COMMAND GPU - docs/results/step-h200.json from scripts/device.sh's step stage.

Reads model_backward's JSON per model (OUT/step-<model>.json: the step configurations it swept, side streams x
scratch slots, each checked and timed in interleaved rounds; the fastest is the step graph's time), the timeline
summary of plot_step_timeline.py (OUT/step-timeline.json, where a step's time goes), and the PyTorch peers
(OUT/step-torch.json, at the model's precision: fp16 operands for gradgraph's FP16 mode). ddp stays null: it needs
two GPUs.

For choosing the defaults from data, "config_sweep" holds, per configuration "S:K" (K = 0: the default S + 1
slots), each model's step time relative to the library's current default configuration and their geometric mean,
plus the configuration with the lowest mean: set GG_STEP_CONFIG_INIT from it when the margin is beyond the rounds'
spread (each model's "configs" keeps every round).
"""
import glob
import json
import math
import os
import re
import sys

out, result, commit, command, gpu = sys.argv[1:6]
DEFAULT = "2:0"  # GG_STEP_CONFIG_INIT's side_streams and scratch_slots (0: side_streams + 1)


def load(path):
    with open(path) as f:
        return json.load(f)


runs = {}
for path in sorted(glob.glob(os.path.join(out, "step-*.json"))):
    m = re.fullmatch(r"step-(\w+)\.json", os.path.basename(path))
    if m and m.group(1) not in ("torch", "timeline", "h200"):
        runs[m.group(1)] = load(path)
timeline_path = os.path.join(out, "step-timeline.json")
timeline = load(timeline_path) if os.path.exists(timeline_path) else {}
torch_path = os.path.join(out, "step-torch.json")
torch = {m["name"]: m for m in load(torch_path)["models"]} if os.path.exists(torch_path) else {}

models = []
for name, run in sorted(runs.items()):
    m = dict(run)
    size = name.removesuffix("_fused")  # large_fused: the large model with the residual added in the dX GEMM
    m["name"] = f"{run['name']}_{size}"
    configs = m.get("configs", [])
    m["side_streams_us"] = {str(c["side_streams"]): c["step_us"] for c in configs if c["scratch_slots"] == 0}
    m["correct"] = run["correct"] and all(c["correct"] for c in configs)
    peer = torch.get(f"residual_mlp_{size}")  # the same model's math either way
    prec = "fp16" if m["precision"] == "fp16" else "tf32"
    for k in ("torch_eager", "torch_cuda_graph", "torch_compile"):
        m["step_us"][k] = peer[prec].get(k) if peer and prec in peer else None
    if peer and prec in peer and peer[prec].get("torch_compile_note"):
        m["torch_compile_note"] = peer[prec]["torch_compile_note"]
    m["torch_precision"] = prec if peer else None
    m["timeline"] = timeline.get(f"{run['name']}_{run['hidden']}x{run['ffn']}_{run['tokens']}")
    m["ddp"] = None
    models.append(m)

# every configuration against the default, per model, and the geometric mean over the models that ran both
sweep = {}
for m in models:
    by_key = {f"{c['side_streams']}:{c['scratch_slots']}": c["step_us"] for c in m.get("configs", [])}
    base = by_key.get(DEFAULT)
    if not base or base <= 0:
        continue
    for key, us in by_key.items():
        if us > 0:
            sweep.setdefault(key, {})[m["name"]] = round(us / base, 4)
config_sweep = {"default": DEFAULT, "relative_to_default": sweep, "geomean": {}}
for key, ratios in sweep.items():
    config_sweep["geomean"][key] = round(math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios)), 4)
if config_sweep["geomean"]:
    config_sweep["fastest"] = min(config_sweep["geomean"], key=config_sweep["geomean"].get)

with open(result, "w") as f:
    json.dump({"commit": commit, "command": command, "gpu": gpu, "models": models, "config_sweep": config_sweep},
              f, indent=1)
print(f"{result}: {len(models)} models" + (f"; fastest step configuration over them {config_sweep['fastest']} "
                                            f"({config_sweep['geomean'][config_sweep['fastest']]:.3f} of the default "
                                            f"{DEFAULT})" if config_sweep.get("fastest") else ""))
