#!/usr/bin/env python3
"""plot_step_timeline.py TRACE.csv OUTDIR [--json SUMMARY.json] - where a step's time goes.

TRACE.csv is what `gg_example_model_backward --trace` appends (CUPTI kernel records of one replay of the step graph
and of one step as per-block graphs): model, mode, side_streams, scratch_slots, stream, start_us, duration_us,
kernel, ctas, threads. For each model this writes OUTDIR/step-timeline-<model>.png: one panel per mode, streams x
time, every kernel a bar coloured by what it does (GEMM, GELU/activation gradient, bias sums, the caller's callback,
padding, other). CUPTI may report every kernel of a graph on the stream the graph was launched on, so kernels that
overlap in time on one stream are spread over lanes of that stream: the lanes show the concurrency either way.

It prints, and with --json writes, a summary per model and mode: the span, the time some kernel is running (busy),
the summed kernel time over the span (mean concurrency), and the time per kind. Without matplotlib it still writes
the summary and says that it drew nothing.
"""
import argparse
import csv
import json
import os
import re
import sys

KINDS = [  # (kind, colour, pattern on the mangled kernel name), first match wins
    ("callback (axpy)", "#dd8452", re.compile(r"axpy", re.I)),  # cuBLAS's axpy: model_backward's residual add
    ("GEMM", "#4c72b0", re.compile(r"nvjet|gemm|cutlass|xmma|f32w", re.I)),
    ("activation grad", "#55a868", re.compile(r"gelu|activation|tanh|silu|ssm|gate", re.I)),
    ("bias / column sums", "#c44e52", re.compile(r"col_sum|colsum|bias|reduce", re.I)),
    ("padding / staging", "#8172b3", re.compile(r"zero_rows|stage|select", re.I)),
    ("conversion", "#937860", re.compile(r"f32_to|to_f16|convert|cast", re.I)),
]
OTHER = ("other", "#8c8c8c")


def kind_of(name):
    for kind, colour, pattern in KINDS:
        if pattern.search(name):
            return kind, colour
    return OTHER


def read(path):
    """{model: {mode: [kernel dict]}} in file order."""
    runs = {}
    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if not header or header[0] != "model":
            sys.exit(f"{path}: not a model_backward --trace file")
        for r in rows:
            if len(r) < 10:
                continue
            # a kernel name with commas in it spreads over several fields: the last two are ctas and threads
            name = ",".join(r[7:-2])
            k = {"stream": int(r[4]), "start": float(r[5]), "dur": float(r[6]), "name": name,
                 "sides": int(r[2]), "slots": int(r[3])}
            runs.setdefault(r[0], {}).setdefault(r[1], []).append(k)
    return runs


def lanes(kernels):
    """Rows for the plot: per stream (in order of first use), kernels that overlap in time go to separate lanes.
    Returns [(label, [kernel])]."""
    order = []
    for k in sorted(kernels, key=lambda k: k["start"]):
        if k["stream"] not in order:
            order.append(k["stream"])
    rows = []
    for stream in order:
        ends, members = [], []
        for k in sorted((k for k in kernels if k["stream"] == stream), key=lambda k: k["start"]):
            for i, end in enumerate(ends):
                if k["start"] >= end - 1e-3:
                    ends[i] = k["start"] + k["dur"]
                    members[i].append(k)
                    break
            else:
                ends.append(k["start"] + k["dur"])
                members.append([k])
        for i, m in enumerate(members):
            rows.append((f"stream {stream}" + (f" / {i + 1}" if len(members) > 1 else ""), m))
    return rows


def summary(kernels):
    span = max(k["start"] + k["dur"] for k in kernels) - min(k["start"] for k in kernels)
    busy, cur_start, cur_end = 0.0, None, None
    for k in sorted(kernels, key=lambda k: k["start"]):
        s, e = k["start"], k["start"] + k["dur"]
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                busy += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    busy += cur_end - cur_start
    total = sum(k["dur"] for k in kernels)
    per_kind = {}
    for k in kernels:
        kind = kind_of(k["name"])[0]
        per_kind[kind] = round(per_kind.get(kind, 0.0) + k["dur"], 2)
    return {"kernels": len(kernels), "streams": len({k["stream"] for k in kernels}), "span_us": round(span, 2),
            "busy_us": round(busy, 2), "idle_us": round(span - busy, 2),
            "mean_concurrency": round(total / span, 3) if span > 0 else None, "kernel_us_by_kind": per_kind,
            "side_streams": kernels[0]["sides"], "scratch_slots": kernels[0]["slots"]}


def plot(model, by_mode, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return None
    modes = list(by_mode)
    panels = [(mode, lanes(by_mode[mode])) for mode in modes]
    heights = [max(2, len(rows)) for _, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(14, 1.2 + 0.38 * sum(heights) + 0.6 * len(panels)),
                             gridspec_kw={"height_ratios": heights}, sharex=True, squeeze=False)
    end = max(k["start"] + k["dur"] for ks in by_mode.values() for k in ks)
    for ax, (mode, rows) in zip(axes[:, 0], panels):
        for y, (_, members) in enumerate(rows):
            for colour in {kind_of(k["name"])[1] for k in members}:
                bars = [(k["start"], max(k["dur"], end * 1e-4)) for k in members if kind_of(k["name"])[1] == colour]
                ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=colour, edgecolors="none")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([label for label, _ in rows], fontsize=8)
        ax.invert_yaxis()
        s = summary(by_mode[mode])
        config = (f"; {s['side_streams']} side streams, {s['scratch_slots'] or 'default'} scratch slots"
                  if mode == "step_graph" else "")
        ax.set_title(f"{mode.replace('_', ' ')}: {s['span_us']:.0f} us, busy {s['busy_us']:.0f} us, "
                     f"mean concurrency {s['mean_concurrency']:.2f} ({s['kernels']} kernels{config})", fontsize=9,
                     loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("microseconds from the step's first kernel")
    axes[-1, 0].set_xlim(0, end * 1.01)
    fig.legend(handles=[Patch(color=c, label=k) for k, c, _ in KINDS] + [Patch(color=OTHER[1], label=OTHER[0])],
               loc="upper right", ncol=len(KINDS) + 1, fontsize=8, frameon=False)
    fig.suptitle(f"{model}: one backward, CUPTI kernel records", x=0.01, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path = os.path.join(out_dir, f"step-timeline-{model}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("out_dir")
    p.add_argument("--json", help="write the summary here")
    a = p.parse_args()
    runs = read(a.trace)
    os.makedirs(a.out_dir, exist_ok=True)
    result = {}
    for model, by_mode in runs.items():
        result[model] = {mode: summary(ks) for mode, ks in by_mode.items()}
        for mode, s in result[model].items():
            kinds = ", ".join(f"{k} {v:.0f}" for k, v in sorted(s["kernel_us_by_kind"].items(), key=lambda x: -x[1]))
            print(f"{model} {mode}: span {s['span_us']:.1f} us, busy {s['busy_us']:.1f} us, idle {s['idle_us']:.1f} "
                  f"us, mean concurrency {s['mean_concurrency']}, {s['kernels']} kernels on {s['streams']} streams; "
                  f"kernel us by kind: {kinds}")
        path = plot(model, by_mode, a.out_dir)
        print(f"{model}: {path}" if path else f"{model}: matplotlib is not installed, nothing drawn")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
