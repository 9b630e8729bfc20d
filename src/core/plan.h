/*
 * plan.h - a block plan: everything one (block, shape, precision) needs, made once and reused by every call:
 * its cuBLASLt GEMM plans, where its intermediates live in the context's scratch arena, and launch parameters.
 * Scratch is addressed by offset because the arena can move when a larger plan grows it.
 */
#ifndef GG_PLAN_H
#define GG_PLAN_H

#include "internal.h"
#include "matmul.h"

#define GG_PLAN_MAX_GEMMS 4
#define GG_PLAN_MAX_BUFFERS 10

typedef struct gg_block_plan {
    gg_plan_key key;
    gg_matmul gemm[GG_PLAN_MAX_GEMMS];  /* the block's GEMMs, indexed by the block's own enum */
    size_t buffer[GG_PLAN_MAX_BUFFERS]; /* byte offsets into ctx->scratch, indexed by the block's own enum */
    size_t scratch_bytes;               /* the arena this plan needs */
    int reduce_blocks;                  /* grid of the block's scalar reduction, if any */
    int col_chunks[2];                  /* row chunks of the block's column sums, if any */
    int route;                          /* > 0: a route through kernels of the block's own (each block says which) */
    int narrow_ctas;                    /* > 0: a narrow schedule: memory-bound work on this many SMs beside
                                           GEMMs that leave them free (the FFN blocks' fp16 conversions, block
                                           4's chain) */
} gg_block_plan;

/* Fills plan (whose key is set) for its block: GEMM plans, buffer offsets, scratch_bytes, launch parameters. */
typedef gg_status (*gg_plan_build_fn)(gg_ctx *ctx, gg_block_plan *plan);

/* The cached plan for key, building it with build (and growing the scratch arena) when it is new. */
gg_status gg_plan_get(gg_ctx *ctx, const gg_plan_key *key, gg_plan_build_fn build, gg_block_plan **out);

void gg_block_plan_destroy(gg_block_plan *plan, void *ctx);

/* Reserves `bytes` at the end of a plan's scratch layout (256-byte aligned) and returns its offset. */
size_t gg_plan_take(gg_block_plan *plan, size_t bytes);

/* The SM count a plan's GEMMs that may overlap communication run on: 0 (all) unless the plan reserves SMs. */
static inline int gg_plan_sm_target(const gg_ctx *ctx, const gg_block_plan *plan) {
    return plan->key.sm_reserve > 0 ? ctx->sm_count - plan->key.sm_reserve : 0;
}

/* The device address of one of the plan's buffers in the context's current arena. */
static inline void *gg_plan_buffer(const gg_ctx *ctx, const gg_block_plan *plan, int index) {
    return (char *)ctx->scratch + plan->buffer[index];
}

#endif
