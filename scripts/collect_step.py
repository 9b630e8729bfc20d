#!/usr/bin/env python3
"""collect_step.py OUT RESULT COMMIT COMMAND GPU - docs/results/step-h200.json from scripts/device.sh's step stage.
   collect_step.py --ddp RESULT [--commit SHA] [--torch TORCH_DDP_JSON] DDP_JSON... - fills the models' "ddp" in
   RESULT from the multigpu stage (each "ddp" records SHA as its "commit": RESULT's own commit is the step stage's),
   with PyTorch DDP's figures on the same model (bench/peers/step_ddp_torch.py) as "torch_ddp_speedup" and
   "torch_ddp" (its variant with the shorter backward: eager or CUDA-graphed), and both as "torch_ddp_variants".

Reads model_backward's JSON per model (OUT/step-<model>.json: the step configurations it swept, side streams x
scratch slots, each checked and timed in interleaved rounds; the fastest is the step graph's time), the timeline
summary of plot_step_timeline.py (OUT/step-timeline.json, where a step's time goes), and the PyTorch peers
(OUT/step-torch.json, at the model's precision: fp16 operands for gradgraph's FP16 mode) and their torch.compile in
max-autotune when the stage ran it (OUT/step-torch-autotune.json: each of its forms' torch.compile joins the others as
"<form>_autotune"); "torch_compile_mode" says which mode the fastest torch.compile ran in. step_torch.py's gemms_fp16
(the model's fp16 GEMMs alone, nothing between them, in a CUDA graph) is no peer: it becomes the fp16 models'
"gemm_floor_us", with "step_over_gemm_floor" (the step graph's time over it) and its share of SOL. "ddp" comes from
model_backward --gpus N (OUT/step-ddp-<model>.json, the multigpu stage): {"gpus", "speedup", "comm_hidden_fraction",
...} (defined in examples/model_ddp.c); null until a run on several GPUs. The multigpu stage runs in another call than
the step stage, so --ddp merges its files into an existing RESULT (a model the step stage did not run gets an entry with
its ddp only).

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

DEFAULT = "2:0"  # GG_STEP_CONFIG_INIT's side_streams and scratch_slots (0: side_streams + 1)


def load(path):
    with open(path) as f:
        return json.load(f)


def ddp_of(path):
    """(model name as in RESULT, its ddp) from one step-ddp-<model>.json."""
    m = re.fullmatch(r"step-ddp-(\w+)\.json", os.path.basename(path))
    run = load(path)
    ddp = dict(run["ddp"])
    ddp["precision"] = run["precision"]
    return f"{run['name']}_{m.group(1) if m else 'unknown'}", ddp


if len(sys.argv) > 2 and sys.argv[1] == "--ddp":
    result, paths = sys.argv[2], sys.argv[3:]
    ddp_commit = torch_ddp = None
    while paths[:1] in (["--commit"], ["--torch"]):
        if paths[0] == "--commit":
            ddp_commit = paths[1]
        else:
            torch_ddp = load(paths[1])
        paths = paths[2:]
    doc = load(result) if os.path.exists(result) else {"models": []}
    by_name = {m["name"]: m for m in doc["models"]}

    def model(name):
        """RESULT's model of that name; a model the step stage did not run gets an entry of its own."""
        if name not in by_name:
            by_name[name] = {"name": name}
            doc["models"].append(by_name[name])
        return by_name[name]

    for path in paths:
        name, ddp = ddp_of(path)
        if ddp_commit:
            ddp["commit"] = ddp_commit
        model(name)["ddp"] = ddp
        print(f"{result}: {name}: {ddp['gpus']} GPUs, speedup {ddp['speedup']:.2f}x, "
              f"{100 * ddp['comm_hidden_fraction']:.0f} % of the reduction hidden, correct {ddp['correct']}")
    for t in (torch_ddp or {}).get("models", []):
        m = model(t["name"])
        m["ddp"] = dict(m.get("ddp") or {}, torch_ddp_speedup=t["torch_ddp"]["speedup"],
                        torch_ddp=dict(t["torch_ddp"], torch=torch_ddp.get("torch")))
        if "torch_ddp_variants" in t:  # eager and CUDA-graphed; torch_ddp is the one with the shorter backward
            m["ddp"]["torch_ddp_variants"] = t["torch_ddp_variants"]
        print(f"{result}: {t['name']}: PyTorch DDP speedup {t['torch_ddp']['speedup']:.2f}x "
              f"({t['torch_ddp'].get('variant', 'eager')})")
    with open(result, "w") as f:
        json.dump(doc, f, indent=1)
    sys.exit(0)

out, result, commit, command, gpu = sys.argv[1:6]

runs = {}
for path in sorted(glob.glob(os.path.join(out, "step-*.json"))):
    m = re.fullmatch(r"step-(\w+)\.json", os.path.basename(path))
    if m and m.group(1) not in ("torch", "timeline", "h200") and not m.group(1).startswith("ddp"):
        runs[m.group(1)] = load(path)
ddps = dict(ddp_of(p) for p in sorted(glob.glob(os.path.join(out, "step-ddp-*.json"))))
timeline_path = os.path.join(out, "step-timeline.json")
timeline = load(timeline_path) if os.path.exists(timeline_path) else {}
torch_path = os.path.join(out, "step-torch.json")
torch_run = load(torch_path) if os.path.exists(torch_path) else {"models": []}
torch = {m["name"]: m for m in torch_run["models"]}
torch_compile_mode = torch_run.get("compile_mode", "default")  # torch.compile's mode (step_torch.py --compile-mode)
# the same forms compiled in another mode (the stage's max-autotune pass): their torch.compile only, as
# "<form>_autotune" (their eager and CUDA-graph runs repeat the first pass's)
autotune_path = os.path.join(out, "step-torch-autotune.json")
autotune_run = load(autotune_path) if os.path.exists(autotune_path) else {"models": []}
autotuned = {m["name"]: m for m in autotune_run["models"]}
autotune_mode = autotune_run.get("compile_mode", "default")
SUFFIX = "_autotune"
FLOOR = "gemms_fp16"  # step_torch.py's form that is a bound, not a peer


def compiled_only(v):
    """A form's torch.compile time, note and error against float64, without its eager and CUDA-graph runs."""
    kept = {k: x for k, x in v.items() if k in ("torch_compile", "torch_compile_note")}
    err = (v.get("max_rel_err_fp64") or {}).get("torch_compile")
    if err is not None:
        kept["max_rel_err_fp64"] = {"torch_compile": err}
    return kept


models = []
for name, run in sorted(runs.items()):
    m = dict(run)
    size = name.split("_")[0]  # large_fused(_copies): the large model, residual in the dX GEMM (and fp16 copies)
    m["name"] = f"{run['name']}_{size}"
    configs = m.get("configs", [])
    m["side_streams_us"] = {str(c["side_streams"]): c["step_us"] for c in configs if c["scratch_slots"] == 0}
    m["correct"] = run["correct"] and all(c["correct"] for c in configs)
    peer = torch.get(f"residual_mlp_{size}")  # the same model's math either way
    # each variant's fastest of PyTorch's forms at the model's precision, whichever form gradgraph's run took: every
    # form step_torch.py timed (an object under the model) is TF32 when its name ends so, else fp16 operands
    # (autograd under autocast, or the backward written out casting in it or on fp16 saved tensors)
    precision = "fp16" if m["precision"] == "fp16" else "tf32"
    forms = {p: v for p, v in (peer or {}).items() if isinstance(v, dict) and p != FLOOR}
    floor = ((peer or {}).get(FLOOR) or {}).get("torch_cuda_graph") if precision == "fp16" else None
    if floor:  # what the step's GEMMs alone take through cuBLAS at the same power limit: no step runs faster
        m["gemm_floor_us"] = floor
        m["gemm_floor_sol_fraction"] = round(m["sol_us"] / floor, 4)
        m["step_over_gemm_floor"] = round(m["step_us"]["gg_step_graph"] / floor, 4)
    forms.update({p + SUFFIX: compiled_only(v) for p, v in (autotuned.get(f"residual_mlp_{size}") or {}).items()
                  if isinstance(v, dict)})
    timed = {p: v for p, v in forms.items()
             if ("tf32" if p.removesuffix(SUFFIX).endswith("tf32") else "fp16") == precision}
    m["torch_variant"] = {}
    for k in ("torch_eager", "torch_cuda_graph", "torch_compile"):
        best = min(((v[k], p) for p, v in timed.items() if v.get(k)), default=None)
        m["step_us"][k] = best[0] if best else None
        if best:
            m["torch_variant"][k] = best[1]
    notes = [f"{p}: {v['torch_compile_note']}" for p, v in timed.items() if v.get("torch_compile_note")]
    if notes:
        m["torch_compile_note"] = "; ".join(notes)
    m["torch_precision"] = precision if timed else None
    chosen = m["torch_variant"].get("torch_compile", "")
    m["torch_compile_mode"] = (autotune_mode if chosen.endswith(SUFFIX) else torch_compile_mode) if timed else None
    # every form PyTorch was timed in, microseconds per backward and errors against float64, for the record
    m["torch_by_form"] = {p: {k: x for k, x in v.items() if k.startswith(("torch", "max_rel"))}
                          for p, v in forms.items()}
    m["timeline"] = timeline.get(f"{run['name']}_{run['hidden']}x{run['ffn']}_{run['tokens']}")
    m["ddp"] = ddps.get(m["name"])
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
