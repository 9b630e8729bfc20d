/* validate.c - the argument checks every entry point runs before it touches the GPU. */
#include <limits.h>

#include "validate.h"

gg_status gg_check_call(gg_ctx *ctx, const char *fn, const void *desc, const void *args) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!desc) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", fn);
    if (!args) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    return GG_SUCCESS;
}

gg_status gg_check_tokens(gg_ctx *ctx, const char *fn, const char *name, int64_t value) {
    if (value == 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: %s = 0: an empty batch has nothing to compute (its weight gradients are zero; clear "
                       "them yourself if you need them)",
                       fn, name);
    if (value < 0) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %lld is negative", fn, name, (long long)value);
    if (value > INT32_MAX)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %lld exceeds the limit of %d (INT32_MAX)", fn, name,
                       (long long)value, INT32_MAX);
    return GG_SUCCESS;
}

gg_status gg_check_dim(gg_ctx *ctx, const char *fn, const char *name, int64_t value) {
    if (value <= 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %lld must be positive", fn, name, (long long)value);
    if (value > INT32_MAX)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %lld exceeds the limit of %d (INT32_MAX)", fn, name,
                       (long long)value, INT32_MAX);
    if (value % GG_DIM_MULTIPLE != 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: %s = %lld is not a multiple of %d (GG_DIM_MULTIPLE keeps rows 16-byte aligned)", fn, name,
                       (long long)value, GG_DIM_MULTIPLE);
    return GG_SUCCESS;
}

/* The tensor's size in bytes, or -1 when it does not fit in int64. */
static int64_t tensor_bytes(const gg_tensor_check *t) {
    int64_t elems, bytes;
    if (__builtin_mul_overflow(t->rows, t->cols, &elems) || __builtin_mul_overflow(elems, (int64_t)t->elem_bytes, &bytes))
        return -1;
    return bytes;
}

gg_status gg_check_tensors(gg_ctx *ctx, const char *fn, const gg_tensor_check *t, int count) {
    for (int i = 0; i < count; ++i) {
        if (!t[i].ptr) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, t[i].name);
        if ((uintptr_t)t[i].ptr % GG_ALIGNMENT != 0)
            return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: %s (%p) is not %d-byte aligned", fn, t[i].name, t[i].ptr,
                           GG_ALIGNMENT);
        if (tensor_bytes(&t[i]) < 0)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: %s of %lld x %lld elements does not fit in 2^63 bytes", fn, t[i].name,
                           (long long)t[i].rows, (long long)t[i].cols);
    }
    for (int i = 0; i < count; ++i) {
        if (!t[i].is_output) continue;
        const uintptr_t a0 = (uintptr_t)t[i].ptr, a1 = a0 + (uintptr_t)tensor_bytes(&t[i]);
        for (int j = 0; j < count; ++j) {
            if (j == i) continue;
            const uintptr_t b0 = (uintptr_t)t[j].ptr, b1 = b0 + (uintptr_t)tensor_bytes(&t[j]);
            if (a0 < b1 && b0 < a1)
                return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: output %s overlaps %s %s", fn, t[i].name,
                               t[j].is_output ? "output" : "input", t[j].name);
        }
    }
    return GG_SUCCESS;
}

gg_status gg_resolve_precision(gg_ctx *ctx, const char *fn, gg_precision requested, gg_precision *resolved) {
    if ((int)requested < (int)GG_PRECISION_DEFAULT || (int)requested > (int)GG_PRECISION_BF16)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: desc->precision = %d is not a gg_precision value", fn,
                       (int)requested);
    if (requested == GG_PRECISION_DEFAULT) requested = ctx->config.precision;
    if (requested == GG_PRECISION_BF16)
        return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                       "%s: desc->precision = bf16 is not supported: bf16 operands fail the tolerance of this fp32 "
                       "block; use fp32, tf32 or fp16",
                       fn);
    *resolved = requested;
    return GG_SUCCESS;
}
