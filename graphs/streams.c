/* streams.c - event hand-off between streams (the fork and join edges of a block's backward). */
#include "streams.h"

cudaStream_t gg_side_stream(const gg_ctx *ctx, cudaStream_t main, gg_precision precision) {
    switch (ctx->config.overlap) {
    case GG_OVERLAP_ALWAYS: return ctx->side;
    case GG_OVERLAP_NEVER: return main;
    case GG_OVERLAP_AUTO: break;
    }
    return precision == GG_PRECISION_FP32 || precision == GG_PRECISION_TF32 ? main : ctx->side;
}

gg_status gg_stream_handoff(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to) {
    if (from == to) return GG_SUCCESS;
    GG_CUDA_TRY(ctx, cudaEventRecord(event, from));
    GG_CUDA_TRY(ctx, cudaStreamWaitEvent(to, event, 0));
    return GG_SUCCESS;
}
