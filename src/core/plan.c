/* plan.c - building, caching and destroying block plans. */
#include <stdint.h>
#include <stdlib.h>

#include "plan.h"

size_t gg_plan_take(gg_block_plan *plan, size_t bytes) {
    /* saturating: a plan whose scratch would not fit in size_t asks for SIZE_MAX bytes, which no allocation gives
     * (its offsets are never used) */
    if (plan->scratch_bytes > SIZE_MAX - 255) return 0;
    const size_t offset = (plan->scratch_bytes + 255) & ~(size_t)255;
    plan->scratch_bytes = bytes > SIZE_MAX - offset ? SIZE_MAX : offset + bytes;
    return offset;
}

void gg_block_plan_destroy(gg_block_plan *plan, void *ctx) {
    (void)ctx;
    if (!plan) return;
    for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i) gg_matmul_destroy(&plan->gemm[i]);
    free(plan);
}

gg_status gg_plan_get(gg_ctx *ctx, const gg_plan_key *key, gg_plan_build_fn build, size_t plan_bytes,
                      gg_block_plan **out) {
    gg_block_plan *plan = gg_plan_cache_find(&ctx->plans, key);
    if (plan) { /* the arena may have been lost to a failed growth since: a compare when it was not */
        GG_TRY(gg_ctx_reserve_scratch(ctx, plan->scratch_bytes));
        *out = plan;
        return GG_SUCCESS;
    }
    plan = calloc(1, plan_bytes > sizeof *plan ? plan_bytes : sizeof *plan);
    const char *fn = gg_ctx_entry(ctx); /* the public call planning (always one: every call claims its context) */
    if (!fn) fn = "gradgraph";
    if (!plan) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a plan", fn);
    plan->key = *key;
    gg_status status;
    GG_GOTO(build(ctx, plan), status, fail);
    GG_GOTO(gg_ctx_reserve_scratch(ctx, plan->scratch_bytes), status, fail);
    if (gg_plan_cache_insert(&ctx->plans, key, plan) != 0) {
        status = gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the plan cache", fn);
        goto fail;
    }
    gg_log(ctx, GG_LOG_INFO, "plan: block %d, M=%lld, dims %lld/%lld, %s, %zu KiB scratch", (int)key->block,
           (long long)key->tokens, (long long)key->dim0, (long long)key->dim1,
           gg_precision_string((gg_precision)key->precision), plan->scratch_bytes >> 10);
    *out = plan;
    return GG_SUCCESS;
fail:
    gg_block_plan_destroy(plan, ctx);
    return status;
}
