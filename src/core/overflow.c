/* overflow.c - the context's fp16 overflow word: set on the device by the fp16 conversions and by gelu' writing an
 * fp16 R (kernels/convert.cu, activation_grad.cu), read and cleared here. */
#include "internal.h"

gg_status gg_fp16_overflow_flag(gg_ctx *ctx, unsigned **device_flag) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_fp16_overflow_flag: ctx is NULL");
    if (!device_flag) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "gg_fp16_overflow_flag: device_flag is NULL");
    *device_flag = ctx->counter + GG_COUNTER_OVERFLOW;
    return GG_SUCCESS;
}

gg_status gg_fp16_overflow(gg_ctx *ctx, int *found, int clear) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_fp16_overflow: ctx is NULL");
    if (!found) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "gg_fp16_overflow: found is NULL");
    *found = 0;
    GG_TRY(gg_refuse_in_step_callback(ctx, "gg_fp16_overflow")); /* it synchronizes the device */
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, "gg_fp16_overflow", &saved));
    unsigned word = 0;
    gg_status status = GG_SUCCESS;
    GG_CUDA_GOTO(ctx, cudaDeviceSynchronize(), status, done); /* the work enqueued before, on any stream */
    GG_CUDA_GOTO(ctx, cudaMemcpy(&word, ctx->counter + GG_COUNTER_OVERFLOW, sizeof word, cudaMemcpyDeviceToHost),
                 status, done);
    if (clear && word) GG_CUDA_GOTO(ctx, cudaMemset(ctx->counter + GG_COUNTER_OVERFLOW, 0, sizeof word), status, done);
    *found = word != 0;
done:
    gg_device_leave(ctx, saved);
    return status;
}
