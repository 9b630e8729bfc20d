#!/usr/bin/env python3
"""test_collect_step.py - scripts/collect_step.py on a step stage's output made up here: an fp16 model takes, per
PyTorch variant, the fastest of its fp16 forms (autograd under autocast, the backward written out casting or on fp16
saved tensors) and names it; an fp32/tf32 model compares with the TF32 forms only; every form timed lands in
torch_by_form with its errors against float64, and torch.compile's mode with it; the stage's max-autotune pass joins the
forms as "<form>_autotune" (its torch.compile only, at the form's own precision); the fp16 GEMMs alone become the fp16
model's floor, never a peer; the model's name carries its size, and a configuration that failed its check makes the
model incorrect; --ddp merges a two-GPU run's "ddp" into an existing result with the run's commit and PyTorch DDP's
speedup on the same model, keeping the rest.
Usage: test_collect_step.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]


def run(name, precision, correct=True):
    return {"name": name, "layers": 8, "hidden": 1024, "ffn": 4096, "tokens": 2048, "precision": precision,
            "sol_us": 555.6, "step_us": {"gg_step_graph": 1136.0, "gg_block_graphs": 1256.9, "gg_eager": 1228.0},
            "correct": True, "configs": [{"side_streams": 2, "scratch_slots": 0, "step_us": 1136.0, "correct": True},
                                         {"side_streams": 3, "scratch_slots": 0, "step_us": 1150.0,
                                          "correct": correct}]}


torch = {"torch": "2.11", "compile_mode": "max-autotune-no-cudagraphs", "models": [{"name": "residual_mlp_small",
                                      "tf32": {"torch_eager": 5527.9, "torch_cuda_graph": 5154.5,
                                               "torch_compile": 2579.8},
                                      "fp16": {"torch_eager": 5206.7, "torch_cuda_graph": 4797.5,
                                               "torch_compile": 1500.0},
                                      "fp16_saved": {"torch_eager": 4882.8, "torch_cuda_graph": 4515.1,
                                                     "torch_compile": 1630.1},
                                      "autograd_fp16": {"torch_eager": 3570.0, "torch_cuda_graph": 3300.0,
                                                        "torch_compile": 1700.0,
                                                        "max_rel_err_fp64": {"torch_eager": 1e-3}},
                                      "autograd_tf32": {"torch_eager": 2500.0, "torch_cuda_graph": 2400.0,
                                                        "torch_compile": 2600.0},
                                      "gemms_fp16": {"torch_cuda_graph": 900.0}}]}
with tempfile.TemporaryDirectory() as d:
    json.dump(run("residual_mlp_fused_copies", "fp16"), open(os.path.join(d, "step-small_fused_copies.json"), "w"))
    json.dump(run("residual_mlp", "tf32", correct=False), open(os.path.join(d, "step-small.json"), "w"))
    json.dump(torch, open(os.path.join(d, "step-torch.json"), "w"))
    out = os.path.join(d, "step-h200.json")
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "collect_step.py"), d, out, "abc1234",
                        "the command", "NVIDIA H200"], capture_output=True, text=True)
    check(p.returncode == 0, f"collect_step.py exits 0 ({p.returncode}: {p.stderr.strip()[:200]})")
    doc = json.load(open(out))
    ddp_run = {"name": "residual_mlp", "precision": "fp16",
               "ddp": {"gpus": 2, "speedup": 1.93, "comm_hidden_fraction": 0.91, "correct": True}}
    json.dump(ddp_run, open(os.path.join(d, "step-ddp-small.json"), "w"))
    merged = os.path.join(d, "merged.json")
    json.dump(doc, open(merged, "w"))
    graphed = {"gpus": 2, "variant": "cuda_graph", "speedup": 1.71, "step_us": 2100.0, "step_us_no_sync": 1795.5}
    eager = {"gpus": 2, "variant": "eager", "speedup": 1.64, "step_us": 2250.0, "step_us_no_sync": 1845.0}
    torch_ddp = {"torch": "2.11", "gpus": 2, "models": [{"name": "residual_mlp_small", "torch_ddp": graphed,
                                                         "torch_ddp_variants": [eager, graphed]}]}
    json.dump(torch_ddp, open(os.path.join(d, "step-ddp-torch.json"), "w"))
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "collect_step.py"), "--ddp", merged, "--commit",
                        "def5678", "--torch", os.path.join(d, "step-ddp-torch.json"),
                        os.path.join(d, "step-ddp-small.json")], capture_output=True, text=True)
    check(p.returncode == 0, f"collect_step.py --ddp exits 0 ({p.returncode}: {p.stderr.strip()[:200]})")
    after = json.load(open(merged))
merged_models = {m["name"]: m for m in after["models"]}
ddp = merged_models.get("residual_mlp_small", {}).get("ddp") or {}
check(ddp.get("speedup") == 1.93 and ddp.get("commit") == "def5678" and ddp.get("precision") == "fp16",
      "--ddp: the two-GPU figures and their commit in the model's ddp")
check(ddp.get("torch_ddp_speedup") == 1.71 and ddp.get("torch_ddp", {}).get("step_us") == 2100.0,
      "--ddp --torch: PyTorch DDP's speedup beside gradgraph's")
check([v.get("variant") for v in ddp.get("torch_ddp_variants", [])] == ["eager", "cuda_graph"],
      "--ddp --torch: both of PyTorch DDP's variants kept")
check(after["commit"] == "abc1234" and merged_models["residual_mlp_small"]["step_us"] ==
      {m["name"]: m for m in doc["models"]}["residual_mlp_small"]["step_us"],
      "--ddp: the step stage's commit and figures kept")
models = {m["name"]: m for m in doc["models"]}
check(doc["commit"] == "abc1234" and doc["command"] == "the command", "commit and command recorded")
copies = models.get("residual_mlp_fused_copies_small", {})
check(copies.get("step_us", {}).get("torch_compile") == 1500.0 and
      copies.get("torch_variant", {}).get("torch_compile") == "fp16", "fp16 model: the faster compile form (cast)")
check(copies.get("step_us", {}).get("torch_eager") == 3570.0 and
      copies.get("torch_variant", {}).get("torch_eager") == "autograd_fp16", "fp16 model: the fastest eager form "
      "(autograd), not the faster TF32 one")
check(set(copies.get("torch_by_form", {})) == {"tf32", "fp16", "fp16_saved", "autograd_fp16", "autograd_tf32"},
      "every form recorded")
check(copies.get("gemm_floor_us") == 900.0 and copies.get("step_over_gemm_floor") == round(1136.0 / 900.0, 4) and
      copies.get("gemm_floor_sol_fraction") == round(555.6 / 900.0, 4) and
      copies["step_us"]["torch_cuda_graph"] == 3300.0,
      "the GEMMs-alone floor recorded beside the step, and never taken as a peer", json.dumps(copies.get("step_us")))
check(copies.get("torch_by_form", {}).get("autograd_fp16", {}).get("max_rel_err_fp64") == {"torch_eager": 1e-3},
      "a form's errors against float64 recorded")
check(copies.get("correct") is True, "a model whose configurations all passed is correct")
plain = models.get("residual_mlp_small", {})
check(plain.get("step_us", {}).get("torch_compile") == 2579.8 and plain.get("torch_precision") == "tf32" and
      plain["step_us"].get("torch_eager") == 2500.0 and plain.get("torch_variant", {}).get("torch_eager") ==
      "autograd_tf32", "tf32 model: compared with the TF32 forms only")
check(plain.get("correct") is False, "a configuration that failed its check makes the model incorrect")
check("gemm_floor_us" not in plain, "no fp16 GEMM floor for a TF32 model")
check(plain.get("torch_compile_mode") == "max-autotune-no-cudagraphs" and
      copies.get("torch_compile_mode") == "max-autotune-no-cudagraphs", "torch.compile's mode recorded per model")

# the stage's max-autotune pass: each form's torch.compile joins the others as "<form>_autotune", counted at its own
# precision; the chosen torch.compile's mode recorded
torch["compile_mode"] = "default"
autotune = {"torch": "2.11", "compile_mode": "max-autotune-no-cudagraphs", "models": [{"name": "residual_mlp_small",
            "autograd_fp16": {"torch_eager": 3580.0, "torch_cuda_graph": 1000.0, "torch_compile": 1400.0,
                              "max_rel_err_fp64": {"torch_eager": 1e-3, "torch_compile": 2e-3}},
            "autograd_tf32": {"torch_eager": 2510.0, "torch_cuda_graph": 2390.0, "torch_compile": 2000.0}}]}
with tempfile.TemporaryDirectory() as d:
    json.dump(run("residual_mlp_fused_copies", "fp16"), open(os.path.join(d, "step-small_fused_copies.json"), "w"))
    json.dump(run("residual_mlp", "tf32"), open(os.path.join(d, "step-small.json"), "w"))
    json.dump(torch, open(os.path.join(d, "step-torch.json"), "w"))
    json.dump(autotune, open(os.path.join(d, "step-torch-autotune.json"), "w"))
    out = os.path.join(d, "step-h200.json")
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "collect_step.py"), d, out, "abc1234",
                        "the command", "NVIDIA H200"], capture_output=True, text=True)
    check(p.returncode == 0, f"collect_step.py with an autotune pass exits 0 ({p.stderr.strip()[:200]})")
    tuned = {m["name"]: m for m in json.load(open(out))["models"]}
copies, plain = tuned.get("residual_mlp_fused_copies_small", {}), tuned.get("residual_mlp_small", {})
check(copies.get("step_us", {}).get("torch_compile") == 1400.0 and
      copies.get("torch_variant", {}).get("torch_compile") == "autograd_fp16_autotune" and
      copies.get("torch_compile_mode") == "max-autotune-no-cudagraphs",
      "fp16 model: the max-autotune compile, faster, chosen and its mode recorded", json.dumps(copies.get("step_us")))
check(copies.get("step_us", {}).get("torch_cuda_graph") == 3300.0,
      "the autotune pass's eager and CUDA-graph runs do not count (they repeat the first pass's)")
check(copies.get("torch_by_form", {}).get("autograd_fp16_autotune") ==
      {"torch_compile": 1400.0, "max_rel_err_fp64": {"torch_compile": 2e-3}},
      "the autotuned form recorded with its torch.compile only", json.dumps(copies.get("torch_by_form")))
check(plain.get("step_us", {}).get("torch_compile") == 2000.0 and
      plain.get("torch_variant", {}).get("torch_compile") == "autograd_tf32_autotune",
      "tf32 model: the TF32 form's autotuned compile, not an fp16 one")
finish("COLLECT_STEP")
