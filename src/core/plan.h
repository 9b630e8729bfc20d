/*
 * plan.h - a block plan: everything one (block, shape, precision) needs, made once and reused by every call:
 * its cuBLASLt GEMM plans, where its intermediates live in the context's scratch arena, and launch parameters.
 * Scratch is addressed by offset because the arena can move when a larger plan grows it.
 */
#ifndef GG_PLAN_H
#define GG_PLAN_H

#include "internal.h"
#include "matmul.h"

#define GG_PLAN_MAX_GEMMS 6
#define GG_PLAN_MAX_BUFFERS 10

typedef struct gg_block_plan {
    gg_plan_key key;
    gg_matmul gemm[GG_PLAN_MAX_GEMMS];  /* the block's GEMMs, indexed by the block's own enum */
    size_t buffer[GG_PLAN_MAX_BUFFERS]; /* byte offsets into ctx->scratch, indexed by the block's own enum */
    size_t scratch_bytes;               /* the arena this plan needs */
} gg_block_plan;
/* A block with launch parameters of its own keeps them in a struct of its own whose first member is the
 * gg_block_plan (its size: gg_block_info.plan_bytes); the block casts the plan it is handed back to it. */

/* Fills plan (whose key is set) for its block: GEMM plans, buffer offsets, scratch_bytes, launch parameters. */
typedef gg_status (*gg_plan_build_fn)(gg_ctx *ctx, gg_block_plan *plan);

/* The cached plan for key, building it with build (and growing the scratch arena) when it is new; a new plan is
 * plan_bytes of zeros (the block's own plan struct) before build. */
gg_status gg_plan_get(gg_ctx *ctx, const gg_plan_key *key, gg_plan_build_fn build, size_t plan_bytes,
                      gg_block_plan **out);

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
