#!/usr/bin/env python3
"""test_step_torch_warm.py - bench/peers/step_torch.py's warm-up, on a stand-in for torch (the CI machine has no
torch): three calls first, then more for the given seconds counted from after them, so that a first call that
compiles for longer than the warm-up still leaves a full warm-up of calls after it; at least three calls with no
warm-up; the device waited for after the first three calls and then at least every fourth, so that the host's clock
follows the device's.
Usage: test_step_torch_warm.py REPO_ROOT"""
import importlib.util
import os
import sys
import time
import types

from checks import check, finish  # tests/scripts/checks.py

events = []  # "call" and "sync", in the order the warm-up made them
sys.modules["torch"] = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: events.append("sync")))
sys.modules["bounded"] = types.SimpleNamespace(CompileTimeout=Exception, within=None)
sys.modules["stack"] = types.SimpleNamespace(MODELS={}, Stack=None)
path = os.path.join(sys.argv[1], "bench", "peers", "step_torch.py")
spec = importlib.util.spec_from_file_location("step_torch", path)
step_torch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(step_torch)


def calls_of(seconds, first_s, each_s=0.005):
    """The times of each call of a function whose first call takes first_s (a compilation), warmed for seconds."""
    calls = []

    def fn():
        time.sleep(first_s if not calls else each_s)
        calls.append(time.perf_counter())
        events.append("call")
    step_torch.warm_up(fn, seconds)
    return calls


def longest_run_of_calls(evs):
    run = best = 0
    for e in evs:
        run = run + 1 if e == "call" else 0
        best = max(best, run)
    return best


events.clear()
calls = calls_of(0.2, first_s=0.5)
after_three = calls[-1] - calls[2]
check(after_three >= 0.2 - 0.01 and len(calls) > 10,
      "a first call longer than the warm-up still leaves the warm-up's seconds of calls after three",
      f"{len(calls)} calls, {after_three:.3f} s after the third")
check(events[:4] == ["call"] * 3 + ["sync"], "the device is waited for after the first three calls, before the "
      "warm-up's clock starts", " ".join(events[:8]))
check(longest_run_of_calls(events[4:]) <= 4, "then at least every fourth call", " ".join(events[:40]))
calls = calls_of(0, first_s=0)
check(len(calls) == 3, "no warm-up: three calls", f"{len(calls)} calls")
finish("STEP_TORCH_WARM")
