#!/usr/bin/env python3
"""optim_state.py - read and write gradgraph optimizer states (gg_optim_save_state / gg_optim_load_state) in Python,
by the format docs/optimizer.md describes (#checkpoints): to look into a checkpoint, or to carry moments between
gradgraph and another trainer (AdamW's exp_avg and exp_avg_sq are torch.optim.AdamW's state of the same names,
parameter by parameter, flattened). The standard library only.

    python3 examples/optim_state.py STATE       # what a state holds, its check word verified

    import optim_state
    s = optim_state.read(open("state.bin", "rb").read())   # ValueError, naming the problem, if it is not one
    s["moments"][3][0]                                     # parameter 3's exp_avg (array of float)
    open("state.bin", "wb").write(optim_state.write(s))    # with the check word made anew

Little-endian hosts only (every CUDA host): the state is in the host's byte order.
"""
import struct
import sys
from array import array

MARK = b"GGOPTIM\0"
FORMAT = 1
KINDS = {0: "AdamW", 1: "SGD"}
HEADER = struct.Struct("<8sIIIIQQQ16x")  # mark, format, kind, moments, params, elements, bytes, check: 64 bytes
WORDS = struct.Struct("<ffffI12x")  # lr, inverse loss scale, last norm, last clipping coefficient, found-inf: 32 bytes
CHECK_AT = 40  # the check word's offset in the header


def checksum(data, fast=True):
    """The check word: the sum modulo 2^64 of w_i * (2i + 1) over the 8-byte words w_i (the last padded with zero
    bytes), the header's check word taken as 0. With numpy (when it imports, and fast) at memory speed; without,
    about a second per 10 MB."""
    data = bytes(data) + b"\0" * (-len(data) % 8)
    try:
        import numpy as np  # optional
    except ImportError:
        np = None
    if np is not None and fast:
        words = np.frombuffer(data, dtype="<u8").copy()
        if len(words) > CHECK_AT // 8:
            words[CHECK_AT // 8] = 0
        odd = 2 * np.arange(len(words), dtype=np.uint64) + np.uint64(1)
        return int((words * odd).sum(dtype=np.uint64))  # uint64 arithmetic wraps modulo 2^64
    words = array("Q", data)
    if len(words) > CHECK_AT // 8:
        words[CHECK_AT // 8] = 0
    total = 0
    for i, w in enumerate(words):
        total += w * (2 * i + 1)
    return total & 0xFFFFFFFFFFFFFFFF


def size(params, moments, elements):
    """A state's size in bytes: 96 + 16 P + 4 x moments x elements."""
    return HEADER.size + 8 * params + WORDS.size + 8 * params + 4 * moments * elements


def read(data):
    """The state in `data` as a dict: kind ("AdamW" or "SGD"), counts, lr, inv_loss_scale, grad_norm, clip,
    found_inf, steps, moments (per parameter, a list of its moment tensors: AdamW exp_avg and exp_avg_sq, SGD with
    momentum its buffer; each an array of float). ValueError when it is not a whole, undamaged state."""
    if len(data) < HEADER.size:
        raise ValueError(f"{len(data)} bytes is less than a state's header ({HEADER.size})")
    mark, fmt, kind, moments, params, elements, nbytes, check = HEADER.unpack_from(data, 0)
    if mark != MARK:
        raise ValueError("no GGOPTIM mark: not an optimizer state, or a save that failed")
    if fmt != FORMAT:
        raise ValueError(f"format {fmt}; this reads format {FORMAT}")
    if kind not in KINDS or moments > 2:
        raise ValueError(f"kind {kind} with {moments} moment tensors a parameter")
    if nbytes != len(data) or nbytes != size(params, moments, elements):
        raise ValueError(f"{len(data)} bytes, the header says {nbytes}, its counts make "
                         f"{size(params, moments, elements)}: cut short or not a state")
    if checksum(data) != check:
        raise ValueError("the check word does not match the bytes: changed or damaged since it was saved")
    at = HEADER.size
    counts = list(struct.unpack_from(f"<{params}Q", data, at))
    at += 8 * params
    lr, inv_scale, grad_norm, clip, found_inf = WORDS.unpack_from(data, at)
    at += WORDS.size
    steps = list(struct.unpack_from(f"<{params}q", data, at))
    at += 8 * params
    if sum(counts) != elements:
        raise ValueError(f"the counts add up to {sum(counts)}, the header says {elements}")
    tensors = []
    for count in counts:
        mine = []
        for _ in range(moments):
            mine.append(array("f", data[at:at + 4 * count]))
            at += 4 * count
        tensors.append(mine)
    return {"kind": KINDS[kind], "counts": counts, "lr": lr, "inv_loss_scale": inv_scale, "grad_norm": grad_norm,
            "clip": clip, "found_inf": found_inf, "steps": steps, "moments": tensors}


def write(state):
    """The bytes of a state given as read() returns it (moments as arrays or lists of floats), its check word made
    anew. gg_optim_load_state loads it into an optimizer of that kind and those parameters."""
    kind = {v: k for k, v in KINDS.items()}[state["kind"]]
    counts, steps, tensors = state["counts"], state["steps"], state["moments"]
    params = len(counts)
    moments = len(tensors[0]) if tensors else 0
    if len(steps) != params or len(tensors) != params or any(len(t) != moments for t in tensors):
        raise ValueError("counts, steps and moments must have one entry a parameter, each the same moment tensors")
    elements = sum(counts)
    out = bytearray(HEADER.pack(MARK, FORMAT, kind, moments, params, elements, size(params, moments, elements), 0))
    out += struct.pack(f"<{params}Q", *counts)
    out += WORDS.pack(state["lr"], state["inv_loss_scale"], state.get("grad_norm", 0.0), state.get("clip", 1.0),
                      state.get("found_inf", 0))
    out += struct.pack(f"<{params}q", *steps)
    for count, mine in zip(counts, tensors):
        for values in mine:
            if len(values) != count:
                raise ValueError(f"a moment tensor of {len(values)} values for a parameter of {count}")
            out += array("f", values).tobytes()
    struct.pack_into("<Q", out, CHECK_AT, checksum(out))
    return bytes(out)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        s = read(open(argv[1], "rb").read())
    except (OSError, ValueError) as e:
        print(f"optim_state.py: {argv[1]}: {e}", file=sys.stderr)
        return 1
    moments = len(s["moments"][0]) if s["moments"] else 0
    print(f"{s['kind']}{' with momentum' if s['kind'] == 'SGD' and moments else ''}: {len(s['counts'])} parameters, "
          f"{sum(s['counts'])} elements, steps {min(s['steps'])}-{max(s['steps'])}, lr {s['lr']:g}, "
          f"loss scale {1 / s['inv_loss_scale']:g}, last norm {s['grad_norm']:g}, found-inf {s['found_inf']}; "
          f"check word verified")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
