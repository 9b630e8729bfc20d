#!/usr/bin/env python3
"""test_bounded.py - bench/peers/bounded.py's time limit, which the PyTorch peers put around each torch.compile: a
call that ends in time returns its value and leaves no alarm behind; a call that swallows the first CompileTimeout
(as torch.compile's autotuning did) is stopped by the repeated alarm; an exception that wraps it counts as the
timeout; an error of the call's own before the limit passes through; no limit without seconds.
Usage: test_bounded.py REPO_ROOT"""
import os
import sys
import time

from checks import check, finish  # tests/scripts/checks.py

sys.path.insert(0, os.path.join(sys.argv[1], "bench", "peers"))
from bounded import CompileTimeout, within  # noqa: E402


def outcome(fn, seconds=1, repeat_s=0.5):
    """(what within returned or the exception's type name, seconds it took)."""
    t0 = time.time()
    try:
        got = within(seconds, fn, repeat_s)
    except Exception as e:  # the verdict is the exception's type
        got = type(e).__name__
    return got, time.time() - t0


got, took = outcome(lambda: 42)
time.sleep(1.6)  # past the limit and a repeat: an alarm left behind would kill the test here
check(got == 42 and took < 0.5, "a call that ends in time returns its value, no alarm left behind", f"{got} {took}")

swallowed = []


def stubborn():
    try:
        time.sleep(3)  # the alarm at 1 s lands here and is swallowed, as in a compiler's worker loop
    except CompileTimeout:
        swallowed.append(True)
    time.sleep(10)  # the repeat lands here
    return "finished"


got, took = outcome(stubborn)
check(got == "CompileTimeout" and swallowed and took < 2.5,
      "a call that swallows the first CompileTimeout is stopped by the next", f"{got} {took} {swallowed}")


def wrapping():
    try:
        time.sleep(3)
    except CompileTimeout as e:
        raise RuntimeError("backend compiler failed") from e


got, took = outcome(wrapping)
check(got == "CompileTimeout" and took < 1.5, "an exception wrapping the timeout counts as the timeout", f"{got}")


def failing():
    raise ValueError("not a timeout")


got, took = outcome(failing)
check(got == "ValueError", "the call's own error before the limit passes through", f"{got}")

got, took = outcome(lambda: time.sleep(1.2) or "slow", seconds=None)
check(got == "slow", "no limit without seconds", f"{got} {took}")

finish("BOUNDED")
