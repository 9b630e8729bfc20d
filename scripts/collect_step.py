#!/usr/bin/env python3
"""collect_step.py OUT RESULT COMMIT COMMAND GPU - docs/results/step-h200.json from scripts/device.sh's step stage:
model_backward's JSON per model and side-stream count (OUT/step-<model>-s<S>.json, the fastest S kept as the step
graph's time, all of them under side_streams_us) and the PyTorch peers (OUT/step-torch.json, at the model's
precision: fp16 operands for gradgraph's FP16 mode). ddp stays null: it needs two GPUs."""
import glob
import json
import os
import re
import sys

out, result, commit, command, gpu = sys.argv[1:6]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "step-*-s*.json"))):
    m = re.match(r"step-(\w+)-s(\d)\.json", os.path.basename(path))
    with open(path) as f:
        runs.setdefault(m.group(1), {})[int(m.group(2))] = json.load(f)
torch = {}
if os.path.exists(os.path.join(out, "step-torch.json")):
    with open(os.path.join(out, "step-torch.json")) as f:
        torch = {m["name"]: m for m in json.load(f)["models"]}
models = []
for name, by_s in sorted(runs.items()):
    best_s = min(by_s, key=lambda s: by_s[s]["step_us"]["gg_step_graph"])
    m = dict(by_s[best_s])
    m["name"] = f"{m['name']}_{name}"
    m["side_streams"] = best_s
    m["side_streams_us"] = {str(s): r["step_us"]["gg_step_graph"] for s, r in sorted(by_s.items())}
    m["correct"] = all(r["correct"] for r in by_s.values())
    peer = torch.get(f"residual_mlp_{name}")
    prec = "fp16" if m["precision"] == "fp16" else "tf32"
    for k in ("torch_eager", "torch_cuda_graph", "torch_compile"):
        m["step_us"][k] = peer[prec][k] if peer and prec in peer else None
    m["torch_precision"] = prec if peer else None
    m["ddp"] = None
    models.append(m)
with open(result, "w") as f:
    json.dump({"commit": commit, "command": command, "gpu": gpu, "models": models}, f, indent=1)
print(f"{result}: {len(models)} models")
