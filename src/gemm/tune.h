/*
 * tune.h - autotune: choose a GEMM's algorithm by timing cuBLASLt's best few candidates once, on scratch operands,
 * and remember the winner in the context's tune cache (and its file), keyed by GPU, cuBLASLt and driver versions
 * and the problem. A later plan of the same problem, in this process or the next, skips the timing.
 */
#ifndef GG_TUNE_H
#define GG_TUNE_H

#include "matmul.h"

/* Picks *chosen among candidates[0..count) for the GEMM whose descriptors mm already holds, and sets *us to its time
 * in microseconds (0 when it was not timed). Never fails the plan for a tuning problem (no memory for the scratch
 * operands, a candidate that does not launch, an unwritable cache file): it logs a warning and keeps the heuristic's
 * first choice. Synchronizes the device. */
gg_status gg_matmul_tune(gg_ctx *ctx, const gg_gemm_shape *s, const gg_matmul *mm,
                         const cublasLtMatmulHeuristicResult_t *candidates, int count,
                         cublasLtMatmulHeuristicResult_t *chosen, double *us);

/* The time in microseconds of a pass that is not a GEMM (a block's kernel that a choice of schedule weighs against
 * GEMM times), named by `problem` (no spaces: the kernel and its sizes; the GPU, cuBLASLt and driver part is added):
 * the tune cache's figure, else measure(ctx, arg) now (it returns microseconds, or a negative value when it cannot
 * run), remembered in the cache and its file as a GEMM's choice is, so that later plans, in this process or the
 * next, choose alike. Negative without autotune or when the measurement failed (logged). Synchronizes the device
 * when it measures. */
double gg_tune_pass_us(gg_ctx *ctx, const char *problem, double (*measure)(gg_ctx *ctx, void *arg), void *arg);

#endif
