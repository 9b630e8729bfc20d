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
    for (int i = 0; i < n; ++i) {
        const gg_status joined = gg_stream_handoff(ctx, branches[i].stream, branches[i].join, main);
        if (status == GG_SUCCESS) status = joined;
    }
    return status;
}

gg_status gg_stream_join(gg_ctx *ctx, gg_status status, cudaStream_t main, cudaStream_t branch, cudaEvent_t join) {
    const gg_branch one = {branch, join};
    return gg_stream_join_all(ctx, status, main, &one, 1);
}
