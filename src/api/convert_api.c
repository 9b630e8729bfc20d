/*
 * convert_api.c - gg_to_fp16 (include/gradgraph.h): fp16 mode's conversion of an operand, for copies the caller
 * makes itself and hands to blocks 2 and 3 as their *_fp16 operands. The same kernel and overflow word as the
 * blocks' own conversions, so a copy made here is bitwise the one the block would have made.
 */
#include <stdint.h>

#include "internal.h"
#include "kernels/gg_kernels.h"

static gg_status check(gg_ctx *ctx, const char *fn, const float *src, const void *dst, size_t count) {
    if (!src) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: src is NULL", fn);
    if (!dst) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (count > SIZE_MAX / sizeof(float) || (uintptr_t)src > UINTPTR_MAX - count * sizeof(float) ||
        (uintptr_t)dst > UINTPTR_MAX - count * 2)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: count = %zu elements run past the end of memory", fn,
                       count);
    if ((uintptr_t)src % GG_ALIGNMENT != 0)
        return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: src (%p) is not %d-byte aligned", fn, (const void *)src,
                       GG_ALIGNMENT);
    if ((uintptr_t)dst % GG_ALIGNMENT != 0)
        return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: dst (%p) is not %d-byte aligned", fn, dst, GG_ALIGNMENT);
    const uintptr_t s0 = (uintptr_t)src, s1 = s0 + count * sizeof(float);
    const uintptr_t d0 = (uintptr_t)dst, d1 = d0 + count * 2;
    if (count && s0 < d1 && d0 < s1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: dst overlaps src (%zu elements)", fn, count);
    /* remembered after the first check: a training loop converts the same buffers every step */
    GG_TRY(gg_check_device_pointer_known(ctx, fn, "src", src));
    return gg_check_device_pointer_known(ctx, fn, "dst", dst);
}

gg_status gg_to_fp16(gg_ctx *ctx, const float *src, void *dst, size_t count, gg_stream stream) {
    static const char fn[] = "gg_to_fp16";
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved)); /* claims ctx: the checks below write its message */
    gg_status status = check(ctx, fn, src, dst, count);
    if (status == GG_SUCCESS && count) {
        const cudaError_t err = gg_k_f32_to_f16(src, dst, count, ctx->sm_count, 0, GG_PRIORITY_OF_STREAM,
                                                ctx->counter + GG_COUNTER_OVERFLOW, (cudaStream_t)stream);
        if (err != cudaSuccess) status = gg_fail_cuda(ctx, err, "gg_to_fp16: launching the conversion kernel");
    }
    gg_device_leave(ctx, saved);
    return status;
}
