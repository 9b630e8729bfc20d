/*
 * tune.h - autotune: choose a GEMM's algorithm by timing cuBLASLt's best few candidates once, on scratch operands,
 * and remember the winner in the context's tune cache (and its file), keyed by GPU, cuBLASLt and driver versions
 * and the problem. A later plan of the same problem, in this process or the next, skips the timing.
 */
#ifndef GG_TUNE_H
#define GG_TUNE_H

#include "matmul.h"

/* Picks *chosen among candidates[0..count) for the GEMM whose descriptors mm already holds. Never fails the plan
 * for a tuning problem (no memory for the scratch operands, a candidate that does not launch, an unwritable cache
 * file): it logs a warning and keeps the heuristic's first choice. Synchronizes the device. */
gg_status gg_matmul_tune(gg_ctx *ctx, const gg_gemm_shape *s, const gg_matmul *mm,
                         const cublasLtMatmulHeuristicResult_t *candidates, int count,
                         cublasLtMatmulHeuristicResult_t *chosen);

#endif
