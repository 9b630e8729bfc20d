/* cases.h - the 64 benchmark cases from tests/data/cases.csv (made by scripts/gen_cases.py). Plain C. */
#ifndef GG_CASES_H
#define GG_CASES_H

#include <stddef.h>
#include <stdint.h>

#define GG_CASES_MAX 256

typedef struct gg_case {
    int block_id; /* 1..4, the order of gradgraph.h */
    char block[96]; /* the workload folder name, e.g. "073_feedforward_mlp_backward" */
    int index;    /* 0..15 within the block */
    int64_t batch_size, seq_len, tokens;
    int64_t dim0, dim1; /* H (block 1), D/F (2, 3), H/E (4) */
    double atol, rtol;
    int use_silu_gate;
    double sol_us_b200; /* the published B200 speed of light, for reference */
} gg_case;

/* Reads up to max cases from a CSV file. Returns the count, or -1 with a message in err. */
int gg_cases_load(const char *path, gg_case *cases, int max, char *err, size_t err_bytes);

/* The short name of a block id ("tanh_gate", "gelu_ffn", "mlp", "ssm_gate"). */
const char *gg_case_block_short(int block_id);

/* H200 speed of light of a case in microseconds, per the spec: max(GEMM FLOP / 989.4 TFLOP/s, bytes / 4.8 TB/s),
 * every tensor counted at 2 bytes per element, each input read once and each output written once. */
double gg_case_sol_us_h200(const gg_case *c);

#endif
