/* streams.c - event hand-off between streams (the fork and join edges of a block's backward). */
#include "streams.h"

cudaStream_t gg_side_stream(const gg_ctx *ctx, cudaStream_t main) {
    return ctx->config.overlap == GG_OVERLAP_NEVER ? main : ctx->side;
}

cudaStream_t gg_aux_stream(const gg_ctx *ctx, cudaStream_t main) {
    return ctx->config.overlap == GG_OVERLAP_NEVER ? main : ctx->aux;
}

gg_status gg_stream_mark(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to) {
    if (from == to) return GG_SUCCESS;
    GG_CUDA_TRY(ctx, cudaEventRecord(event, from));
    return GG_SUCCESS;
}

gg_status gg_stream_wait(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to) {
    if (from == to) return GG_SUCCESS;
    GG_CUDA_TRY(ctx, cudaStreamWaitEvent(to, event, 0));
    return GG_SUCCESS;
}

gg_status gg_stream_handoff(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to) {
    GG_TRY(gg_stream_mark(ctx, from, event, to));
    return gg_stream_wait(ctx, from, event, to);
}

gg_status gg_stream_join_all(gg_ctx *ctx, gg_status status, cudaStream_t main, const gg_branch *branches, int n) {
    char first[GG_MSG_BYTES];
    gg_failure_save(ctx, status, first); /* a failing join after a failure keeps the first's message */
    for (int i = 0; i < n; ++i) {
        const gg_status joined = gg_stream_handoff(ctx, branches[i].stream, branches[i].join, main);
        if (status == GG_SUCCESS) status = joined;
    }
    gg_failure_restore(ctx, first);
    return status;
}

gg_status gg_stream_join(gg_ctx *ctx, gg_status status, cudaStream_t main, cudaStream_t branch, cudaEvent_t join) {
    const gg_branch one = {branch, join};
    return gg_stream_join_all(ctx, status, main, &one, 1);
}

gg_exec_res gg_exec_res_ctx(const gg_ctx *ctx, cudaStream_t main) {
    return (gg_exec_res){.side = gg_side_stream(ctx, main),
                         .aux = gg_aux_stream(ctx, main),
                         .ev_fork = ctx->ev_fork,
                         .ev_join = ctx->ev_join,
                         .ev_conv = ctx->ev_conv,
                         .ev_aux = ctx->ev_aux,
                         .ev_aux_join = ctx->ev_aux_join,
                         .scratch = ctx->scratch,
                         .counter = ctx->counter,
                         .workspace = {ctx->workspace[0], ctx->workspace[1]}};
}

gg_status gg_stream_join_res(gg_ctx *ctx, const gg_exec_res *r, gg_status status, cudaStream_t main,
                             const gg_branch *branches, int n, unsigned deferrable) {
    if (!r->defer_join || status != GG_SUCCESS) return gg_stream_join_all(ctx, status, main, branches, n);
    for (int i = 0; i < n && status == GG_SUCCESS; ++i) {
        const gg_branch *b = &branches[i];
        if (!(deferrable >> i & 1u) || b->stream == main) {
            status = gg_stream_handoff(ctx, b->stream, b->join, main);
            continue;
        }
        status = gg_stream_mark(ctx, b->stream, b->join, main);
        if (status == GG_SUCCESS && r->deferred) *r->deferred |= b->join == r->ev_aux_join ? GG_DEFERRED_AUX
                                                                                            : GG_DEFERRED_SIDE;
    }
    /* A failed mark or hand-off left this branch and the later ones forked: every branch rejoins now (again, for
     * those already marked), as gg_stream_join_all promises; inside a capture a forked stream keeps it from ending. */
    return status == GG_SUCCESS ? status : gg_stream_join_all(ctx, status, main, branches, n);
}
