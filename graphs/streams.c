/* streams.c - event hand-off between streams (the fork and join edges of a block's backward). */
#include "streams.h"

gg_status gg_stream_handoff(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to) {
    GG_CUDA_TRY(ctx, cudaEventRecord(event, from));
    GG_CUDA_TRY(ctx, cudaStreamWaitEvent(to, event, 0));
    return GG_SUCCESS;
}
