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
