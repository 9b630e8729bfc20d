/*
 * validate.h - argument checks shared by every entry point. Each check names the argument and the problem in the
 * context's last error and returns a status; they run before anything touches the GPU, so a rejected call
 * enqueues nothing and writes nothing.
 */
#ifndef GG_VALIDATE_H
#define GG_VALIDATE_H

#include "internal.h"

/* One tensor argument: its name as the caller writes it ("args->weight1"), pointer, shape and element size. */
typedef struct gg_tensor_check {
    const char *name;
    const void *ptr;
    int64_t rows, cols;
    size_t elem_bytes;
    int is_output;
} gg_tensor_check;

/* ctx, desc and args must be non-NULL (ctx NULL: message in gg_last_error(NULL)). */
gg_status gg_check_call(gg_ctx *ctx, const char *fn, const void *desc, const void *args);

/* A token count: 1 <= value <= INT32_MAX (0 and negatives get their own messages). */
gg_status gg_check_tokens(gg_ctx *ctx, const char *fn, const char *name, int64_t value);

/* A hidden dimension: GG_DIM_MULTIPLE <= value <= INT32_MAX and a multiple of GG_DIM_MULTIPLE. */
gg_status gg_check_dim(gg_ctx *ctx, const char *fn, const char *name, int64_t value);

/* Pointers non-NULL and GG_ALIGNMENT-aligned, sizes within int64 bytes, and no output overlapping any other
 * tensor (outputs never alias inputs or each other). */
gg_status gg_check_tensors(gg_ctx *ctx, const char *fn, const gg_tensor_check *tensors, int count);

/* The GEMM precision an fp32-I/O block runs with: requested, or the context's when GG_PRECISION_DEFAULT; FP32,
 * TF32 and FP16 are valid, BF16 is GG_ERROR_UNSUPPORTED (it fails these blocks' tolerance). The bf16-I/O blocks
 * have no precision field: their I/O fixes it. */
gg_status gg_resolve_precision(gg_ctx *ctx, const char *fn, gg_precision requested, gg_precision *resolved);

#endif
