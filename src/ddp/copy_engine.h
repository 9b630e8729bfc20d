/*
 * copy_engine.h - all-reducing a gradient through NCCL's copy-engine collectives (NCCL >= 2.28, ranks in one NVLink
 * domain), in place in a buffer from gg_dist_alloc: per piece, an all-to-all puts every rank's share of the piece
 * on the rank that owns it, gg_k_sum_ranks adds the shares on SMs, and an in-place all-gather hands the sums back.
 * NCCL runs the all-to-all and the all-gather on the GPUs' copy engines (zero CTAs) when the communicator's CTA
 * policy is NCCL_CTA_POLICY_ZERO and every buffer lies in a symmetric window: so the reduction takes no SMs from the
 * GEMMs it hides behind, except for the adding. Why, and what lost: docs/distributed.md, "Copy engines".
 */
#ifndef GG_COPY_ENGINE_H
#define GG_COPY_ENGINE_H

#include <stddef.h>

#include "ddp.h"

/* The pieces of an n-element gradient on `ranks` ranks: the piece starting at element `at` has `ranks` shares of
 * the returned count each (rank j's share: [at + j * q, at + (j + 1) * q)), at most piece_elems / ranks; 0 once
 * fewer than `ranks` elements are left, or when a piece cannot hold one element per rank (what is left, the tail,
 * is all-reduced by NCCL). Pure arithmetic, tested on the CPU (tests/cpu/test_ce_layout.c). */
size_t gg_ce_share(size_t n, size_t at, int ranks, size_t piece_elems);

/* The collectives such an all-reduce issues: an all-to-all and an all-gather per piece, and one all-reduce for a
 * tail; counted without walking the pieces. */
size_t gg_ce_collectives(size_t n, int ranks, size_t piece_elems);

/* Gradients smaller than this go through NCCL's all-reduce (biases, block 1's grad_gate): for them the fixed cost of
 * three steps outweighs the SMs saved. */
#define GG_CE_MIN_BYTES ((size_t)1 << 20)

/* GG_SUCCESS when this build and the NCCL it runs with have copy-engine collectives and symmetric windows (2.28+);
 * else GG_ERROR_UNSUPPORTED naming fn, or GG_ERROR_NCCL with NCCL's error when ncclGetVersion fails. */
gg_status gg_ce_check_supported(gg_ctx *ctx, const char *fn);

/* The context's staging (two pieces of d->config.bucket_bytes, NCCL memory: where the all-to-all lands, or the
 * halves of the two-rank split reduction), allocated locally (no collective). */
gg_status gg_ce_alloc(gg_ctx *ctx, const char *fn);

/* Collective, on every context given (one NCCL group, from this thread): registers each staging as a symmetric
 * window, then enqueues one small all-to-all, all-gather and all-reduce on it on the communication stream: NCCL
 * sets up its copy-engine and symmetric-memory machinery lazily, on the first such collectives, and that setup fails
 * inside a stream capture (measured on the H200s: "operation not permitted when stream is capturing"). The caller
 * waits for the streams. */
gg_status gg_ce_setup(gg_ctx *const *ctxs, int count, const char *fn);

/* Frees the staging and the gg_dist_alloc buffers left; their windows went with the communicator (destroyed or
 * aborted before this). A failed ncclMemFree is logged (WARN): the memory is lost. */
void gg_ce_free(gg_ctx *ctx);

/* gg_dist_alloc's buffers: whether [p, p + bytes) lies inside one of them (then copy engines can reduce it). */
int gg_ce_in_window(const gg_dist *d, const void *p, size_t bytes);

/* Enqueues an in-place all-gather of `count` elements per rank at base (rank j's at base + j * count), which lie in
 * a symmetric window (the staging or a gg_dist_alloc buffer), on the communication stream. */
gg_status gg_ce_all_gather(gg_ctx *ctx, void *base, size_t count, size_t elem_bytes);

/* Enqueues the in-place all-reduce of the n elements (elem_bytes 4: fp32, 2: bf16) at p, which lie in a buffer
 * from gg_dist_alloc, on the communication stream, with d->config.op. */
gg_status gg_ce_all_reduce(gg_ctx *ctx, void *p, size_t n, size_t elem_bytes);
#endif
