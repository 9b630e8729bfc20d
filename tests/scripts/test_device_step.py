#!/usr/bin/env python3
"""test_device_step.py - scripts/device.sh's step stage, end to end on a machine without GPUs: a scratch copy of the
scripts with nvidia-smi and cmake faked on PATH, the step tests and examples/model_backward faked in the build folder
and bench/peers/step_torch.py faked in the tree. PyTorch's peers run twice: every form in torch.compile's default
mode, then the fastest fp16 form (autograd under autocast) in max-autotune, whose torch.compile counts beside the
default mode's in step-h200.json; GG_STEP_TORCH_AUTOTUNE= (empty) skips the second pass, and so does a first pass
already compiled in another mode (GG_STEP_TORCH_COMPILE_MODE); a pass stopped by its time limit fails the stage,
and the models it wrote (step_torch.py writes its JSON after every model) still count. The stage runs only on the GPU
machine: this keeps it from breaking unseen. Usage: test_device_step.py REPO_ROOT"""
import json
import os
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py
from fake_device import Machine, script  # tests/scripts/fake_device.py

root = sys.argv[1]

# model_backward: writes the run's JSON where --json says (the small model, fp16)
MODEL_BACKWARD = ('json=; while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done\n'
                  'echo \'{"name": "residual_mlp_fused_copies", "layers": 8, "hidden": 1024, "ffn": 4096, '
                  '"tokens": 2048, "precision": "fp16", "sol_us": 555.6, "step_us": {"gg_step_graph": 1140.0, '
                  '"gg_block_graphs": 1232.7, "gg_eager": 1194.1}, "correct": true, "configs": [{"side_streams": 2, '
                  '"scratch_slots": 0, "step_us": 1140.0, "correct": true}]}\' > "$json"\n'
                  'echo "step graph, 2 side streams, 0 scratch slots: 1140.0 us"\n')
# step_torch.py: logs its arguments; torch.compile takes 1600 us in the default mode, 1450 in max-autotune, whose
# pass then exits with FAKE_AUTOTUNE_RC (as when the time limit stops it after the models it wrote)
STEP_TORCH = ('echo "step_torch $*" >> "$FAKE_LOG"\n'
              'json=; mode=default; while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2\n'
              '  [ "$1" = --compile-mode ] && mode=$2; shift; done\n'
              'us=1600.0; [ "$mode" = max-autotune-no-cudagraphs ] && us=1450.0\n'
              'echo "{\\"torch\\": \\"2.11\\", \\"compile_mode\\": \\"$mode\\", \\"models\\": [{\\"name\\": '
              '\\"residual_mlp_small\\", \\"autograd_fp16\\": {\\"torch_eager\\": 3000.0, '
              '\\"torch_cuda_graph\\": 1519.4, \\"torch_compile\\": $us}}]}" > "$json"\n'
              '[ "$mode" = default ] || exit "${FAKE_AUTOTUNE_RC:-0}"\n')


def torch_calls(calls):
    """The logged step_torch calls, each as its words."""
    return [l.split()[1:] for l in calls.splitlines() if l.startswith("step_torch ")]


def value(words, flag):
    return words[words.index(flag) + 1] if flag in words[:-1] else None


with tempfile.TemporaryDirectory() as d:
    m = Machine(root, d, programs={"tests/test_step_gpu": "echo '[  PASSED  ] 1 test(s).'\n",
                                   "tests/test_residual_gpu": "echo '[  PASSED  ] 1 test(s).'\n",
                                   "examples/gg_example_model_backward": MODEL_BACKWARD})
    step_py = os.path.join(m.tree, "bench", "peers", "step_torch.py")
    script(step_py, STEP_TORCH)  # device.sh runs it as `python3 bench/peers/step_torch.py`: python3 faked too
    script(os.path.join(m.bin, "python3"),
           f'if [ "$1" = bench/peers/step_torch.py ]; then shift; exec bash {step_py} "$@"; fi\n'
           f'exec {sys.executable} "$@"\n')
    models = {"GG_STEP_MODELS": "small_fused_copies"}

    out = os.path.join(d, "out-default")
    rc, text, calls = m.stage("step", out, 1, **models)
    runs = torch_calls(calls)
    check(rc == 0, "the step stage passes", text + calls)
    check(len(runs) == 2 and value(runs[0], "--compile-mode") is None and
          value(runs[1], "--compile-mode") == "max-autotune-no-cudagraphs" and
          value(runs[1], "--forms") == "autograd_fp16" and
          (value(runs[1], "--json") or "").endswith("step-torch-autotune.json"),
          "PyTorch's peers in the default mode, then autograd under autocast in max-autotune", calls)
    path = os.path.join(out, "step-h200.json")
    doc = json.load(open(path)) if os.path.exists(path) else {"models": []}
    small = {x["name"]: x for x in doc["models"]}.get("residual_mlp_fused_copies_small", {})
    check(small.get("step_us", {}).get("torch_compile") == 1450.0 and
          small.get("torch_variant", {}).get("torch_compile") == "autograd_fp16_autotune" and
          small.get("torch_compile_mode") == "max-autotune-no-cudagraphs",
          "the faster max-autotune compile counts as PyTorch's torch.compile, its mode recorded", json.dumps(small))
    check(set(small.get("torch_by_form", {})) == {"autograd_fp16", "autograd_fp16_autotune"},
          "both passes' forms recorded", json.dumps(small.get("torch_by_form")))
    check(not os.path.exists(os.path.join(out, "step-torch-autotune.json")),
          "the pass's JSON folded into step-h200.json, not left beside it")

    out = os.path.join(d, "out-stopped")
    rc, text, calls = m.stage("step", out, 1, FAKE_AUTOTUNE_RC="124", **models)
    doc = json.load(open(os.path.join(out, "step-h200.json")))
    small = {x["name"]: x for x in doc["models"]}.get("residual_mlp_fused_copies_small", {})
    check(rc != 0 and small.get("step_us", {}).get("torch_compile") == 1450.0,
          "a max-autotune pass stopped by its limit fails the stage, and the models it wrote still count",
          text + json.dumps(small))

    out = os.path.join(d, "out-none")
    rc, text, calls = m.stage("step", out, 1, GG_STEP_TORCH_AUTOTUNE="", **models)
    doc = json.load(open(os.path.join(out, "step-h200.json")))
    check(rc == 0 and len(torch_calls(calls)) == 1 and "GG_STEP_TORCH_AUTOTUNE= " in doc.get("command", ""),
          "GG_STEP_TORCH_AUTOTUNE empty: one pass, and the command says so", calls + json.dumps(doc.get("command")))

    out = os.path.join(d, "out-mode")
    rc, text, calls = m.stage("step", out, 1, GG_STEP_TORCH_COMPILE_MODE="max-autotune-no-cudagraphs", **models)
    runs = torch_calls(calls)
    check(rc == 0 and len(runs) == 1 and value(runs[0], "--compile-mode") == "max-autotune-no-cudagraphs",
          "a first pass in another mode: no second pass", calls)

finish("DEVICE_STEP")
