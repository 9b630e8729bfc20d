#!/usr/bin/env python3
"""test_optim_state.py - examples/optim_state.py, the Python reader and writer of optimizer states: a state written
(AdamW, three parameters of 1, 3 and 5 elements; SGD with momentum; plain SGD) reads back the same, and is the size
docs/optimizer.md gives; the check word of a fixed pattern is the one src/optim's gg_optim_state_checksum gives
(tests/cpu/test_optim_api.c asserts the same value), with and without numpy where it imports; a state with one bit
flipped, cut short, of another format, or without its mark is refused with a message; the command line verifies and
describes a state, and fails on a damaged one.
Usage: test_optim_state.py REPO_ROOT"""
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "examples"))
import optim_state  # noqa: E402  (examples/optim_state.py)

PATTERN_CHECK = 0xA66E456581ABE4B8  # gg_optim_state_checksum of bytes i * 37 % 256, i < 101 (test_optim_api.c)
pattern = bytes(i * 37 % 256 for i in range(101))
check(optim_state.checksum(pattern, fast=False) == PATTERN_CHECK, "the check word is the C library's (pure Python)",
      hex(optim_state.checksum(pattern, fast=False)))
try:
    import numpy  # noqa: F401  (optional: the fast path)
    check(optim_state.checksum(pattern) == PATTERN_CHECK, "... and with numpy")
except ImportError:
    print("skipped: the check word with numpy (numpy does not import here)")

adamw = {"kind": "AdamW", "counts": [1, 3, 5], "lr": 1e-3, "inv_loss_scale": 1 / 1024, "grad_norm": 2.5,
         "clip": 1.0, "found_inf": 0, "steps": [7, 7, 6],
         "moments": [[[0.5], [0.25]], [[1.0, -2.0, 3.0], [1.0, 4.0, 9.0]], [[0.125] * 5, [0.0625] * 5]]}
data = optim_state.write(adamw)
check(len(data) == optim_state.size(3, 2, 9) == 96 + 16 * 3 + 4 * 2 * 9, "an AdamW state's size: 96 + 16 P + 8 E",
      str(len(data)))
back = optim_state.read(data)
same = back["counts"] == adamw["counts"] and back["steps"] == adamw["steps"] and back["kind"] == "AdamW" and \
    [[list(t) for t in p] for p in back["moments"]] == adamw["moments"] and back["lr"] == optim_state.WORDS.unpack(
        optim_state.WORDS.pack(1e-3, 0, 0, 0, 0))[0] and back["inv_loss_scale"] == 1 / 1024
check(same, "written and read back: the same counts, steps, words and moments", repr(back))
check(data[:8] == b"GGOPTIM\0" and data[64:72] == (1).to_bytes(8, "little"),
      "the mark at 0, parameter 0's count at 64 (the documented offsets)")
for kind, moments in (("SGD", 1), ("SGD", 0)):
    s = dict(adamw, kind=kind, moments=[[t[0]] * moments for t in adamw["moments"]])
    r = optim_state.read(optim_state.write(s))
    check(r["kind"] == kind and all(len(p) == moments for p in r["moments"]),
          f"SGD with {moments} moment tensors a parameter round trip")


def refused(data, text, what):
    try:
        optim_state.read(data)
        check(False, what, "read without an error")
    except ValueError as e:
        check(text in str(e), what, str(e))


flipped = bytearray(data)
flipped[-3] ^= 0x10  # a bit of the last parameter's exp_avg_sq
refused(bytes(flipped), "changed or damaged", "one flipped bit of a moment is refused")
refused(data[:-4], "cut short", "a state cut short is refused")
other = bytearray(data)
other[8] = 2
refused(bytes(other), "format 2", "another format is refused")
refused(b"\0" * len(data), "no GGOPTIM mark", "a failed save's zeros are refused")
refused(data[:10], "less than a state's header", "a few bytes are refused")

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "state.bin")
    open(path, "wb").write(data)
    script = os.path.join(root, "examples", "optim_state.py")
    p = subprocess.run([sys.executable, script, path], capture_output=True, text=True)
    check(p.returncode == 0 and "AdamW: 3 parameters, 9 elements, steps 6-7" in p.stdout and "verified" in p.stdout,
          "the command line describes a state", p.stdout + p.stderr)
    open(path, "wb").write(bytes(flipped))
    p = subprocess.run([sys.executable, script, path], capture_output=True, text=True)
    check(p.returncode == 1 and "changed or damaged" in p.stderr, "and fails on a damaged one", p.stdout + p.stderr)

finish("OPTIM_STATE")
