/*
 * pair_split.c - the two-rank split reduction (ddp.h, gg_dist_pair_split): whether a call takes it, and each weight
 * gradient's part of it (gg_dist_pair_half) between the block's GEMMs.
 */
#include "copy_engine.h"
#include "ddp.h"
#include "streams.h"

int gg_dist_pair_split(const gg_ctx *ctx, const gg_block_call *c, unsigned split_tensors) {
    const gg_dist *d = ctx->dist;
    if (!gg_dist_overlaps(ctx, c) || !d->ce_on || d->size != 2 || d->config.sync != GG_SYNC_ALL_REDUCE) return 0;
    for (int i = 0; i < c->info->n_tensors; ++i) {
        if (!gg_tensor_is_param(c, i)) continue;
        const size_t bytes = gg_tensor_bytes(c, i);
        if (split_tensors >> i & 1u) {
            if (bytes > 2 * d->ce_piece_bytes) return 0; /* half of it in one piece: both halves in the staging */
        } else if (bytes >= GG_CE_MIN_BYTES) {
            return 0; /* would go through gg_ce_all_reduce, whose all-to-all lands in the same staging */
        }
    }
    return 1;
}

int gg_dist_pair_exchanges(const gg_ctx *ctx, const gg_block_call *c, int tensor) {
    const size_t bytes = gg_tensor_bytes(c, tensor);
    return !c->accumulate && bytes >= GG_CE_MIN_BYTES && gg_ce_in_window(ctx->dist, c->t[tensor], bytes);
}

/* After `producer` has written this rank's slot (count elements at base + rank * count): the in-place all-gather of
 * the two slots on the communication stream. */
static gg_status pair_gather(gg_ctx *ctx, cudaStream_t producer, void *base, size_t count) {
    GG_TRY(gg_stream_handoff(ctx, producer, ctx->dist->ev_ready, ctx->dist->stream));
    return gg_ce_all_gather(ctx, base, count, sizeof(float));
}

/* Half h of the gradient is the n/2 columns from h n/2: B's rows and the gradient's columns from there. Exchanged
 * (gg_dist_pair_exchanges): the peer's half goes to this rank's slot of the staging and is all-gathered there; this
 * rank's own half gets the peer's partial from the other slot added in the epilogue (after the wait), then the
 * gradient's halves are all-gathered in place. Not exchanged (not a window, or an accumulating call): both halves go
 * to (or are added to) the gradient, which is reduced as usual after the second. */
gg_status gg_dist_pair_half(gg_ctx *ctx, const gg_block_call *c, int tensor, const gg_dist_half_gemm *g, int own,
                            cudaStream_t s) {
    const int rank = ctx->dist->rank, half = own ? rank : 1 - rank;
    const size_t cols = (size_t)(g->n / 2), count = cols * (size_t)g->m;
    const char *b = (const char *)g->B + (size_t)half * cols * g->b_elem;
    float *grad = c->t[tensor], *staging = ctx->dist->ce_staging;
    if (!gg_dist_pair_exchanges(ctx, c, tensor)) {
        if (!own && !c->accumulate)
            gg_log(ctx, GG_LOG_WARN,
                   "copy_engines = 1, but %s is not exchanged (not in a gg_dist_alloc buffer, or under 1 MiB): it is "
                   "reduced as usual beside GEMMs that leave the reduction no SMs (slower); allocate parameter "
                   "gradients with gg_dist_alloc", c->info->tensors[tensor].name);
        GG_TRY(gg_matmul_run(ctx, g->mm, g->A, b, grad + (size_t)half * count, c->accumulate, 1, s));
        return own ? gg_dist_grad_ready(ctx, c, s, tensor) : GG_SUCCESS;
    }
    if (!own) {
        GG_TRY(gg_matmul_run(ctx, g->mm, g->A, b, staging + (size_t)rank * count, 0, 1, s));
        return pair_gather(ctx, s, staging, count);
    }
    const float scale = gg_dist_term_scale(ctx->dist);
    GG_TRY(gg_dist_join(ctx, c, s)); /* the peer's partial has arrived */
    GG_TRY(gg_matmul_run_scaled(ctx, g->mm, g->A, b, staging + (size_t)(1 - rank) * count,
                                grad + (size_t)rank * count, scale, scale, 1, s));
    return pair_gather(ctx, s, grad, count);
}
