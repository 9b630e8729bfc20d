/*
 * numerics_api.c - the numerics helpers of include/gradgraph.h: gg_to_fp16 (fp16 mode's conversion of an operand,
 * for copies the caller makes itself and hands to blocks 2 and 3 as their *_fp16 operands: the same kernel and
 * overflow word as the blocks' own conversions, so a copy made here is bitwise the one the block would have made) and
 * gg_check_finite (the gradients' Inf/NaN check for a loop without gradgraph's optimizer). Both validate their
 * buffers the same way, then enqueue one kernel.
 */
#include <stdint.h>

#include "internal.h"
#include "kernels/gg_kernels.h"

/* A buffer argument: named, its size (count elements of `elem` bytes; elem 0: `bytes` whatever the count), the
 * alignment it needs. */
typedef struct span {
    const char *name;
    const void *p;
    size_t elem, bytes;
    size_t align;
} span;

/* Each span non-NULL, within memory, aligned and device (or managed) memory; no two overlapping. Fills in the
 * counted spans' bytes. */
static gg_status check_spans(gg_ctx *ctx, const char *fn, span *s, int n, size_t count) {
    for (int i = 0; i < n; ++i) {
        if (!s[i].p) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, s[i].name);
        if (s[i].elem && count > SIZE_MAX / s[i].elem)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: count = %zu elements run past the end of memory", fn,
                           count);
        if (s[i].elem) s[i].bytes = count * s[i].elem;
        if ((uintptr_t)s[i].p > UINTPTR_MAX - s[i].bytes)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s (%p) and its %zu bytes run past the end of memory",
                           fn, s[i].name, s[i].p, s[i].bytes);
        if ((uintptr_t)s[i].p % s[i].align != 0)
            return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: %s (%p) is not %zu-byte aligned", fn, s[i].name, s[i].p,
                           s[i].align);
    }
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) {
            const uintptr_t a0 = (uintptr_t)s[i].p, a1 = a0 + s[i].bytes, b0 = (uintptr_t)s[j].p, b1 = b0 + s[j].bytes;
            if (s[i].bytes && s[j].bytes && a0 < b1 && b0 < a1)
                return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s overlaps %s", fn, s[j].name, s[i].name);
        }
    for (int i = 0; i < n; ++i) GG_TRY(gg_check_device_buffer(ctx, fn, s[i].name, s[i].p, s[i].bytes));
    return GG_SUCCESS;
}

/* Checks the spans, then (count > 0) launches: the public call's frame, on ctx's device and claim. */
typedef cudaError_t (*launch_fn)(gg_ctx *ctx, const span *s, size_t count, int flag, cudaStream_t stream);

static gg_status run(gg_ctx *ctx, const char *fn, span *s, int n, size_t count, int flag, launch_fn launch,
                     const char *what, gg_stream stream) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    int saved = 0;
    /* claims ctx: the checks below write its message */
    GG_TRY(gg_device_enter_stream(ctx, fn, (cudaStream_t)stream, &saved, NULL));
    gg_status status = check_spans(ctx, fn, s, n, count);
    if (status == GG_SUCCESS && count) {
        const cudaError_t err = launch(ctx, s, count, flag, (cudaStream_t)stream);
        if (err != cudaSuccess) status = gg_fail_cuda(ctx, err, what);
    }
    gg_device_leave(ctx, saved);
    return status;
}

static cudaError_t launch_to_fp16(gg_ctx *ctx, const span *s, size_t count, int flag, cudaStream_t stream) {
    (void)flag;
    return gg_k_f32_to_f16((const float *)s[0].p, (void *)s[1].p, count, ctx->sm_count, 0, GG_PRIORITY_OF_STREAM,
                           ctx->counter + GG_COUNTER_OVERFLOW, stream);
}

gg_status gg_to_fp16(gg_ctx *ctx, const float *src, void *dst, size_t count, gg_stream stream) {
    span s[2] = {{"src", src, 4, 0, GG_ALIGNMENT}, {"dst", dst, 2, 0, GG_ALIGNMENT}};
    return run(ctx, "gg_to_fp16", s, 2, count, 0, launch_to_fp16, "gg_to_fp16: launching the conversion kernel",
               stream);
}

static cudaError_t launch_check_finite(gg_ctx *ctx, const span *s, size_t count, int bf16, cudaStream_t stream) {
    return gg_k_check_finite(s[0].p, count, bf16, (unsigned *)s[1].p, ctx->sm_count, stream);
}

gg_status gg_check_finite(gg_ctx *ctx, const void *data, size_t count, int bf16, unsigned *device_flag,
                          gg_stream stream) {
    span s[2] = {{"data", data, bf16 ? 2 : 4, 0, GG_ALIGNMENT}, {"device_flag", device_flag, 0, sizeof(unsigned), 4}};
    return run(ctx, "gg_check_finite", s, 2, count, bf16 != 0, launch_check_finite,
               "gg_check_finite: launching the check", stream);
}
