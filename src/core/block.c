/* block.c - the generic parts of a block call: sizes from the tensor table, validation, plan lookup, eager run. */
#include <limits.h>
#include <string.h>

#include "block.h"

#include <nvtx3/nvToolsExt.h>

int64_t gg_extent_value(const gg_block_call *c, gg_extent e) {
    switch (e) {
    case GG_EXT_TOKENS: return c->tokens;
    case GG_EXT_DIM0: return c->dim0;
    case GG_EXT_DIM1: return c->dim1;
    case GG_EXT_ONE: break;
    }
    return 1;
}

size_t gg_tensor_elems(const gg_block_call *c, int i) {
    const gg_tensor_spec *s = &c->info->tensors[i];
    return (size_t)gg_extent_value(c, s->rows) * (size_t)gg_extent_value(c, s->cols);
}

size_t gg_tensor_bytes(const gg_block_call *c, int i) { return gg_tensor_elems(c, i) * c->info->tensors[i].elem_bytes; }

int gg_tensor_used(const gg_block_call *c, int i) {
    switch ((gg_tensor_presence)c->info->tensors[i].presence) {
    case GG_TENSOR_SILU_ONLY: return c->use_silu_gate;
    case GG_TENSOR_OPTIONAL: return c->t[i] != NULL;
    case GG_TENSOR_FP16_ONLY: return c->t[i] != NULL && c->precision == GG_PRECISION_FP16;
    default: return 1;
    }
}

int gg_tensor_read(const gg_block_call *c, int i) {
    return c->info->tensors[i].presence != GG_TENSOR_UNREAD && gg_tensor_used(c, i);
}

int gg_tensor_may_be_read(const gg_block_call *c, int i) {
    switch ((gg_tensor_presence)c->info->tensors[i].presence) {
    case GG_TENSOR_FP16_ONLY: return c->precision == GG_PRECISION_FP16;
    case GG_TENSOR_UNREAD: return 0;
    default: return 1;
    }
}

static gg_status check_tokens(gg_ctx *ctx, const char *fn, int64_t value) {
    if (value == 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: desc->tokens = 0: an empty batch has nothing to compute (its weight gradients are zero; "
                       "clear them yourself if you need them)",
                       fn);
    if (value < 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: desc->tokens = %lld is negative", fn, (long long)value);
    if (value > INT32_MAX)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: desc->tokens = %lld exceeds the limit of %d (INT32_MAX)",
                       fn, (long long)value, INT32_MAX);
    return GG_SUCCESS;
}

static gg_status check_dim(gg_ctx *ctx, const char *fn, const char *name, int64_t value) {
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

static gg_status resolve_precision(gg_ctx *ctx, const char *fn, gg_precision requested, gg_precision *resolved) {
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

/* The tensor's size in bytes, or -1 when it does not fit in int64 (dims are already <= INT32_MAX). */
static int64_t checked_bytes(const gg_block_call *c, int i) {
    const gg_tensor_spec *s = &c->info->tensors[i];
    int64_t elems, bytes;
    if (__builtin_mul_overflow(gg_extent_value(c, s->rows), gg_extent_value(c, s->cols), &elems) ||
        __builtin_mul_overflow(elems, (int64_t)s->elem_bytes, &bytes))
        return -1;
    return bytes;
}

static gg_status check_tensors(gg_ctx *ctx, const char *fn, const gg_block_call *c) {
    const gg_tensor_spec *s = c->info->tensors;
    const int n = c->info->n_tensors;
    for (int i = 0; i < n; ++i) {
        if (s[i].presence == GG_TENSOR_FP16_ONLY && c->t[i] && c->precision != GG_PRECISION_FP16)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s is given, but the call's precision is %s: fp16 copies of the operands are "
                           "read only in fp16 mode (pass NULL)",
                           fn, s[i].name, gg_precision_string(c->precision));
        if (!gg_tensor_used(c, i)) continue;
        if (!c->t[i]) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: args->%s is NULL", fn, s[i].name);
        if ((uintptr_t)c->t[i] % GG_ALIGNMENT != 0)
            return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: args->%s (%p) is not %d-byte aligned", fn, s[i].name, c->t[i],
                           GG_ALIGNMENT);
    }
    /* Outputs never alias inputs or each other. */
    for (int i = 0; i < n; ++i) {
        if (!s[i].is_output || !gg_tensor_used(c, i)) continue;
        const uintptr_t a0 = (uintptr_t)c->t[i], a1 = a0 + (uintptr_t)checked_bytes(c, i);
        for (int j = 0; j < n; ++j) {
            if (j == i || !gg_tensor_used(c, j)) continue;
            const uintptr_t b0 = (uintptr_t)c->t[j], b1 = b0 + (uintptr_t)checked_bytes(c, j);
            if (a0 < b1 && b0 < a1)
                return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: output args->%s overlaps %s args->%s", fn,
                               s[i].name, s[j].is_output ? "output" : "input", s[j].name);
        }
    }
    return GG_SUCCESS;
}

int gg_block_output_overlapping(const gg_block_call *c, const void *p, size_t bytes) {
    const uintptr_t a0 = (uintptr_t)p, a1 = a0 + bytes;
    for (int i = 0; i < c->info->n_tensors; ++i) {
        if (!c->info->tensors[i].is_output || !gg_tensor_used(c, i)) continue;
        const uintptr_t b0 = (uintptr_t)c->t[i], b1 = b0 + gg_tensor_bytes(c, i);
        if (a0 < b1 && b0 < a1) return i;
    }
    return -1;
}

gg_status gg_block_validate_shape(gg_ctx *ctx, const char *fn, gg_block_call *c, gg_precision requested) {
    const gg_block_info *info = c->info;
    GG_TRY(check_tokens(ctx, fn, c->tokens));
    GG_TRY(check_dim(ctx, fn, info->dim0_name, c->dim0));
    if (info->dim1_name) GG_TRY(check_dim(ctx, fn, info->dim1_name, c->dim1));
    if (info->fp32_io)
        GG_TRY(resolve_precision(ctx, fn, requested, &c->precision));
    else
        c->precision = GG_PRECISION_BF16;
    /* every tensor of the table, used or not: a graph's staging and a plan's scratch hold them at this M */
    for (int i = 0; i < info->n_tensors; ++i)
        if (checked_bytes(c, i) < 0)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s of %lld x %lld elements does not fit in 2^63 bytes", fn, info->tensors[i].name,
                           (long long)gg_extent_value(c, info->tensors[i].rows),
                           (long long)gg_extent_value(c, info->tensors[i].cols));
    return GG_SUCCESS;
}

gg_status gg_block_validate(gg_ctx *ctx, const char *fn, gg_block_call *c, gg_precision requested) {
    GG_TRY(gg_block_validate_shape(ctx, fn, c, requested));
    GG_TRY(check_tensors(ctx, fn, c));
    return gg_check_device_pointers(ctx, fn, c);
}

gg_plan_key gg_block_plan_key(const gg_block_call *c) {
    gg_plan_key key = gg_plan_key_make(c->info->kind, c->precision, c->tokens, c->dim0, c->dim1);
    key.sm_reserve = c->sync_grads ? c->comm_sms : 0;
    key.sync_grads = c->sync_grads != 0;
    /* Halves at 16-byte aligned offsets in every operand (fp16 rows of D/2 or F/2 elements; the plans promise
     * cuBLASLt 16-byte pointers), M even for dX's halves. */
    if (c->info->split_tensors && c->tokens % 2 == 0 && c->dim0 % 16 == 0 && c->dim1 % 16 == 0 && c->pair_split) {
        key.pair_split = 1;
        key.sm_reserve = 0; /* nothing of the reduction runs on SMs */
    }
    return key;
}

gg_status gg_block_plan_for(gg_ctx *ctx, const gg_block_call *c, gg_block_plan **out) {
    const gg_plan_key key = gg_block_plan_key(c);
    return gg_plan_get(ctx, &key, c->info->build, c->info->plan_bytes, out);
}

/* Inside the caller's own stream capture an eager call may only enqueue: making a plan allocates scratch memory and
 * times GEMM candidates (synchronizing), which would invalidate the capture with an obscure CUDA error. So a call
 * on a capturing stream needs the plan an earlier call of the same shape made outside any capture. */
static gg_status check_capture(gg_ctx *ctx, const gg_block_call *c, enum cudaStreamCaptureStatus capturing) {
    if (capturing == cudaStreamCaptureStatusNone || c->info->plan_in_capture) return GG_SUCCESS;
    const gg_plan_key key = gg_block_plan_key(c);
    const gg_block_plan *plan = gg_plan_cache_find(&ctx->plans, &key);
    if (plan && plan->scratch_bytes <= ctx->scratch_bytes) return GG_SUCCESS;
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                   "%s: stream is being captured, and this shape (M = %lld) has no plan ready: %s. A plan (scratch "
                   "memory, GEMM autotuning) cannot be made inside a capture: call it once outside the capture first%s",
                   c->info->fn, (long long)c->tokens,
                   plan ? "its scratch memory was lost to a failed allocation since" : "no call with it ran before",
                   c->info->forward ? "" : ", or use a gradgraph graph (gg_*_graph_create), which plans at creation");
}

gg_status gg_block_plan_ahead(gg_ctx *ctx, const gg_block_call *c, cudaStream_t stream) {
    int saved = 0;
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    GG_TRY(gg_device_enter_stream(ctx, c->info->fn, stream, &saved, &capturing));
    gg_block_plan *plan = NULL;
    const gg_status status = capturing == cudaStreamCaptureStatusNone ? gg_block_plan_for(ctx, c, &plan) : GG_SUCCESS;
    gg_device_leave(ctx, saved);
    return status;
}

gg_status gg_block_run_eager(gg_ctx *ctx, const gg_block_call *c, cudaStream_t stream) {
    int saved = 0;
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    GG_TRY(gg_device_enter_stream(ctx, c->info->fn, stream, &saved, &capturing));
    gg_status status = check_capture(ctx, c, capturing);
    if (status == GG_SUCCESS && ctx->callback_join)
        status = ctx->callback_join(ctx->callback_join_user, stream);
    if (status != GG_SUCCESS) {
        gg_device_leave(ctx, saved);
        return status;
    }
    nvtxRangePushA(c->info->fn); /* a named range per call in Nsight Systems */
    gg_block_plan *plan = NULL;
    status = gg_block_plan_for(ctx, c, &plan);
    if (status == GG_SUCCESS) {
        status = c->info->enqueue(ctx, plan, c, stream);
        if (status != GG_SUCCESS) status = gg_block_enqueue_failed(ctx, c, status);
    }
    nvtxRangePop();
    gg_device_leave(ctx, saved);
    return status;
}

gg_status gg_check_desc(gg_ctx *ctx, const char *fn, const void *desc) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!desc) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", fn);
    return GG_SUCCESS;
}

gg_status gg_check_call(gg_ctx *ctx, const char *fn, const void *desc, const void *args) {
    GG_TRY(gg_check_desc(ctx, fn, desc));
    if (!args) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    return GG_SUCCESS;
}

static int64_t desc_i64(const void *desc, size_t at) {
    int64_t v;
    memcpy(&v, (const char *)desc + at, sizeof v);
    return v;
}

static int desc_int(const void *desc, size_t at) {
    int v;
    memcpy(&v, (const char *)desc + at, sizeof v);
    return v;
}

void gg_block_pack(gg_block_call *c, const gg_block_info *info, const void *desc, const void *args) {
    const gg_desc_layout *d = &info->desc;
    *c = (gg_block_call){.info = info,
                         .tokens = desc_i64(desc, d->tokens),
                         .dim0 = desc_i64(desc, d->dim0),
                         .dim1 = d->dim1 == GG_NO_FIELD ? 0 : desc_i64(desc, d->dim1),
                         .use_silu_gate = d->use_silu_gate != GG_NO_FIELD && desc_int(desc, d->use_silu_gate) != 0,
                         .accumulate = d->accumulate == GG_NO_FIELD ? 0 : desc_int(desc, d->accumulate)};
    if (!args) return;
    for (int i = 0; i < info->n_tensors; ++i)
        memcpy(&c->t[i], (const char *)args + info->tensors[i].arg, sizeof c->t[i]);
}

gg_precision gg_block_requested_precision(const gg_block_info *info, const void *desc) {
    if (info->desc.precision == GG_NO_FIELD) return GG_PRECISION_DEFAULT;
    gg_precision p;
    memcpy(&p, (const char *)desc + info->desc.precision, sizeof p);
    return p;
}

static gg_status eager(gg_ctx *ctx, const gg_block_info *info, const void *desc, const void *args,
                          cudaStream_t stream) {
    GG_TRY(gg_check_call(ctx, info->fn, desc, args));
    gg_block_call call;
    gg_block_pack(&call, info, desc, args);
    GG_TRY(gg_block_validate(ctx, info->fn, &call, gg_block_requested_precision(info, desc)));
    return gg_block_run_eager(ctx, &call, stream);
}

gg_status gg_block_eager(gg_ctx *ctx, const gg_block_info *info, const void *desc, const void *args,
                         cudaStream_t stream) {
    if (!ctx) return gg_check_call(ctx, info->fn, desc, args);
    GG_TRY(gg_ctx_claim(ctx, info->fn)); /* the whole call, validation included, is this thread's */
    const gg_status status = eager(ctx, info, desc, args, stream);
    gg_ctx_release(ctx);
    return status;
}
