/*
 * copy_engine.h - reducing a gradient through NCCL's copy-engine collectives (NCCL >= 2.28, ranks in one NVLink
 * domain): an all-to-all puts every rank's share of each piece on the rank that owns it, gg_k_sum_ranks adds the
 * shares on SMs, and an all-gather hands the sums back (reduce-scatter stops after the adding). NCCL runs the
 * all-to-all and the all-gather on the GPUs' copy engines (zero CTAs) when the communicator's CTA policy is
 * NCCL_CTA_POLICY_ZERO and both buffers lie in symmetric windows: so the reduction takes no SMs from the GEMMs
 * it hides behind, except for the adding. Why: docs/distributed.md, "Copy engines".
 */
#ifndef GG_COPY_ENGINE_H
#define GG_COPY_ENGINE_H

#include <stddef.h>

#include "dist.h"

/* How a gradient of n elements is cut: rank j owns the shard [j * shard, (j + 1) * shard); round k moves, for every
 * rank j, the elements [j * shard + k * round, + gg_ce_round_len(k)) (so each round fits the staging buffers of
 * piece_elems elements), and the tail [ranks * shard, n) (fewer than `ranks` elements) is left to NCCL's
 * all-reduce. Pure arithmetic, tested on the CPU. */
typedef struct gg_ce_layout {
    size_t shard;  /* elements each rank owns */
    size_t round;  /* elements per rank in every round but maybe the last */
    size_t rounds; /* 0 when shard is 0 (then everything is tail) */
    size_t tail;   /* n - ranks * shard */
} gg_ce_layout;

gg_ce_layout gg_ce_layout_make(size_t n, int ranks, size_t piece_elems);
size_t gg_ce_round_len(const gg_ce_layout *layout, size_t k);

/* Round k in bytes, as gg_ce_reduce enqueues it on `rank` (elements of elem bytes):
 *   copy in    rows j < ranks of `width` bytes: gradient + src + j * pitch -> send + j * width
 *   all-to-all send -> recv (`elems` per rank); add the ranks' rows of recv into
 *   all-reduce: send + mine, all-gather send + mine -> recv, copy out recv + j * width -> gradient + src + j * pitch
 *   reduce-scatter: gradient + owned (this rank's shard) */
typedef struct gg_ce_round {
    size_t elems, width, src, pitch, mine, owned;
} gg_ce_round;
gg_ce_round gg_ce_round_at(const gg_ce_layout *layout, size_t k, size_t elem, int rank);

/* Gradients smaller than this go through NCCL's all-reduce or reduce-scatter (biases, block 1's grad_gate): for
 * them the fixed cost of three steps outweighs the SMs saved. */
#define GG_CE_MIN_BYTES ((size_t)1 << 20)

#ifdef GG_HAVE_NCCL
/* Whether this build and the NCCL it runs with have copy-engine collectives and symmetric windows (2.28+). */
int gg_ce_supported(void);

/* Allocates the context's staging buffers (two pieces of d->config.bucket_bytes, NCCL memory) on its device:
 * local, no collective. */
gg_status gg_ce_alloc(gg_ctx *ctx, const char *fn);

/* Registers each context's staging buffers as one symmetric window on its communicator: collective (every rank,
 * grouped when this thread drives several). */
gg_status gg_ce_register(gg_ctx *const *ctxs, int count, const char *fn);

/* Enqueues, on every context's communication stream (one NCCL group), one small all-to-all, all-gather and
 * all-reduce on the registered staging: NCCL sets up its copy-engine and symmetric-memory machinery lazily, on the
 * first such collectives, and that setup fails inside a stream capture (measured: "operation not permitted when
 * stream is capturing"). The caller waits for the streams. Collective. */
gg_status gg_ce_enqueue_warm_up(gg_ctx *const *ctxs, int count, const char *fn);

/* Frees the staging buffers; the window went with the communicator (destroyed or aborted before this). */
void gg_ce_free(gg_dist *d);

/* Enqueues the reduction of the n elements (elem_bytes 4: fp32, 2: bf16) at p on the communication stream,
 * following d->config (op, all-reduce or reduce-scatter). */
gg_status gg_ce_reduce(gg_ctx *ctx, void *p, size_t n, size_t elem_bytes);
#endif

#endif
