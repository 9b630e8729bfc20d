#!/usr/bin/env python3
"""Writes tests/data/cases.csv, gradgraph's own copy of the 64 benchmark cases, from the workload files.

Usage: scripts/gen_cases.py [WORKLOADS_DIR]   (default ../shared/workloads)
Run it only when the workloads change; the CSV is committed so the project stands alone.
"""
import json
import os
import sys

# Hidden dims per block (fixed by the spec): dim0, dim1 in the order of gradgraph.h's descriptors.
BLOCKS = {
    "061_tanh_gated_residual_add_backward": (1, 4096, 0),
    "068_gelu_approximate_feedforward_backward": (2, 1536, 6144),
    "073_feedforward_mlp_backward": (3, 2048, 8192),
    "079_ImageNet_83.6_ssm_output_projection_gate_multiply_backward": (4, 768, 1536),
}

def main():
    default = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "workloads")
    root = sys.argv[1] if len(sys.argv) > 1 else default
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "cases.csv")
    rows = ["block_id,block,index,batch_size,seq_len,tokens,dim0,dim1,atol,rtol,use_silu_gate,sol_us_b200"]
    for name, (block_id, dim0, dim1) in BLOCKS.items():
        meta = json.load(open(os.path.join(root, name, "metadata.json")))
        sol = {w["index"]: w["sol_ms"] * 1000.0 for w in meta["sol"]["per_workload"]}
        for i, line in enumerate(open(os.path.join(root, name, "workload.jsonl"))):
            w = json.loads(line)
            b, s = w["axes"]["batch_size"], w["axes"]["seq_len"]
            tol = w["tolerance"]
            silu = int(bool(w["inputs"].get("use_silu_gate", {}).get("value", False)))
            rows.append(f"{block_id},{name},{i},{b},{s},{b * s},{dim0},{dim1},"
                        f"{tol['max_atol']!r},{tol['max_rtol']!r},{silu},{sol[i]:.4f}")
    with open(out, "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"wrote {len(rows) - 1} cases to {out}")

if __name__ == "__main__":
    main()
