#!/usr/bin/env python3
"""test_plot.py - bench/plot.py on a made-up bench run and peers run, with a stand-in for matplotlib that records
what is drawn (the CI machine has no matplotlib): the GEMMs alone (torch_peers.py --gemm-floor) are drawn as a line
of their own, named a floor, and never as a peer (no peer line, no "failing the tolerance" mark: the floor has no
tolerance check); a peer that failed the tolerance is still marked; one PNG per block.
Usage: test_plot.py REPO_ROOT"""
import json
import os
import runpy
import sys
import tempfile
import types

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]
drawn = []  # (label, x, y) of every plot call
crosses = []  # the points drawn as red x's: peers failing the tolerance
saved = []


class Axes:
    def plot(self, *args, label=None, **kw):
        drawn.append((label, list(args[0]) if args else [], list(args[1]) if len(args) > 1 else []))
        if len(args) > 2 and args[2] == "x" and kw.get("color") == "red":
            crosses.extend(zip(args[0], args[1]))

    def __getattr__(self, name):  # set_xscale, legend, grid, ...: nothing to record
        return lambda *a, **k: None


class Figure:
    def tight_layout(self):
        pass

    def savefig(self, path, **kw):
        saved.append(os.path.basename(path))


pyplot = types.ModuleType("matplotlib.pyplot")
pyplot.subplots = lambda **kw: (Figure(), Axes())
matplotlib = types.ModuleType("matplotlib")
matplotlib.use = lambda name: None
matplotlib.pyplot = pyplot
sys.modules.update({"matplotlib": matplotlib, "matplotlib.pyplot": pyplot})

MLP = "073_feedforward_mlp_backward"
case = lambda i, m, us: {"block": MLP, "mode": "fp16", "index": i, "M": m, "graph_span_us": us, "graph_us": us + 5,
                         "sol_us": us / 2}
peer = lambda i, m, us, ok: {"block": MLP, "index": i, "M": m, "torch_fp16_compile_us": us,
                             "torch_fp16_compile_correct": ok, "gemm_floor_us": us / 1.5}
with tempfile.TemporaryDirectory() as d:
    bench, peers, out = (os.path.join(d, n) for n in ("bench.json", "peers.json", "plots"))
    json.dump({"results": [case(0, 2048, 500.0), case(1, 8192, 1800.0)]}, open(bench, "w"))
    json.dump({"variants": {"torch_fp16_compile": "torch.compile"},
               "results": [peer(0, 2048, 600.0, True), peer(1, 8192, 2200.0, False)]}, open(peers, "w"))
    sys.argv = [os.path.join(root, "bench", "plot.py"), bench, peers, out]
    runpy.run_path(sys.argv[0], run_name="__main__")
labels = [l for l, _, _ in drawn]
floor = [(x, y) for l, x, y in drawn if l and "floor" in l]
check(floor == [([2048, 8192], [400.0, 2200.0 / 1.5])], "the GEMMs alone: one line of their own, named a floor",
      json.dumps(drawn))
check(not any(l and "gemm" in l.lower() and "floor" not in l for l in labels),
      "the floor is no peer line", json.dumps(labels))
check(crosses == [(8192, 2200.0)] and "peer failing the tolerance" in labels,
      "only the peer that failed is marked failing", json.dumps(crosses))
check(saved == ["073.png"], "one PNG per block", str(saved))
finish("PLOT")
