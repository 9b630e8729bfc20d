/*
 * ffn_dgelu.h - block 3's two ways to R = G * gelu'(x) when the caller gives x's fp16 copy: G's GEMM and then the
 * gelu' pass, which also sums grad_bias1 over the fp32 R; or G's GEMM with cuBLASLt's DGELU epilogue, which writes R
 * itself from x's copy (no pass: the [M, F] tensors G, x and R are not read or written again), grad_bias1 then a
 * column sum over the fp16 R on the side stream. Which of the two a plan runs is chosen by time
 * (docs/decisions.md, "Block 3: R in G's epilogue").
 */
#ifndef GG_FFN_DGELU_H
#define GG_FFN_DGELU_H

#include "internal.h"

typedef enum {
    GG_DGELU_AUTO,     /* the faster, by time (with autotune; without it, the pass) */
    GG_DGELU_EPILOGUE, /* the epilogue wherever cuBLASLt has an algorithm for it */
    GG_DGELU_PASS,     /* the pass always */
} gg_dgelu_mode;

/* GG_FFN_DGELU, read when a plan is built: "auto" (or unset), "epilogue" or "pass" (either forced, to test and measure
 * both); anything else is auto, and says so. */
gg_dgelu_mode gg_ffn_dgelu_mode(const gg_ctx *ctx);

/* Whether the epilogue is faster at M tokens and F = ffn on the caller's stream's path: what it adds to G (dgelu_us,
 * autotune's time of G with it, less g_us, G's without it), counted twice (timed alone it costs about half of what it
 * costs in a step), against the gelu' pass it saves (timed once per shape and remembered in the tune cache). The
 * column sum over R is not counted: it runs on the side stream, beside the GEMMs that follow. 0 when a time is not
 * known (no autotune, or a timing failed). */
int gg_ffn_dgelu_wins(gg_ctx *ctx, int64_t M, int64_t F, double g_us, double dgelu_us);

#endif
