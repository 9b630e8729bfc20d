/*
 * optim_kernels.h - the fused optimizer's kernels (optim.cu) and the device tables they read: what src/optim lays
 * out in device memory and hands to the launchers. Plain C, shared by the host code and the kernels.
 *
 * A step is three launches on one stream, every one over a range of whole parameters:
 *   1. gg_k_optim_sum_squares (only with clipping or the finite check): one CTA per chunk of GG_K_OPTIM_CHUNK
 *      elements writes the sum of the squares of its unscaled gradients, in double, to its slot of `partials`;
 *   2. gg_k_optim_finish: one CTA adds the partial sums in a fixed order (the same bits on every run) and sets the
 *      found-inf flag, the gradient norm and the clipping coefficient; unless it found an Inf or NaN, it advances
 *      the step count of every parameter of the range;
 *   3. gg_k_optim_update: one CTA per chunk updates its elements (nothing when the flag is set).
 */
#ifndef GG_OPTIM_KERNELS_H
#define GG_OPTIM_KERNELS_H

#include <stdint.h>

#include "gg_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per chunk, one CTA's work: a multiple of 8, so that every chunk of a parameter starts as aligned as the
 * parameter itself in every dtype. */
#define GG_K_OPTIM_CHUNK 16384

/* gg_k_optim_hyper.kind. */
enum { GG_K_OPTIM_ADAMW = 0, GG_K_OPTIM_SGD = 1 };

/* One parameter, as the kernels see it (a device table, one entry per parameter). */
typedef struct gg_k_optim_param {
    float *param;      /* fp32 weights, updated in place */
    const void *grad;  /* grad_type */
    void *copy;        /* NULL, or copy_type: the updated weights rounded to nearest even */
    float *m;          /* AdamW's exp_avg, SGD's momentum buffer; NULL for plain SGD */
    float *v;          /* AdamW's exp_avg_sq; NULL otherwise */
    int64_t count;     /* elements */
    int32_t grad_type; /* gg_dtype: GG_DT_F32 or GG_DT_BF16 */
    int32_t copy_type; /* gg_dtype: GG_DT_F16 or GG_DT_BF16 (with copy) */
    int32_t decay;     /* 1: weight decay applies */
    int32_t vec;       /* 1: param, m, v are 16-byte aligned, grad 16 (fp32) or 8 (bf16), copy 8: 4-element vectors */
} gg_k_optim_param;

/* One chunk: elements [index * GG_K_OPTIM_CHUNK, min(count, (index + 1) * GG_K_OPTIM_CHUNK)) of a parameter. A
 * parameter's chunks are consecutive in the chunk table, parameters in their order. */
typedef struct gg_k_optim_chunk {
    int32_t param; /* the parameter's index in the parameter table */
    int32_t index; /* the chunk's index within the parameter */
} gg_k_optim_chunk;

/* The words a step reads and writes on the device (one per optimizer). */
typedef struct gg_k_optim_scalars {
    float lr;           /* the learning rate */
    float inv_scale;    /* gradients are multiplied by this first: 1 / the loss scale */
    float grad_norm;    /* the last norm computed: of the unscaled gradients, before clipping */
    float clip;         /* the last clipping coefficient, min(1, max_norm / (grad_norm + 1e-6)) */
    unsigned found_inf; /* 1: the last checked step found an Inf or NaN and updated nothing; else 0 */
    unsigned reserved[3];
} gg_k_optim_scalars;

/* The hyperparameters that never change during an optimizer's life, passed by value to every update launch. */
typedef struct gg_k_optim_hyper {
    int32_t kind; /* GG_K_OPTIM_ADAMW or GG_K_OPTIM_SGD */
    float beta1, beta2, eps;
    float weight_decay;
    float momentum, dampening;
    int32_t nesterov;
    int32_t clip; /* 1: multiply the gradients by scalars->clip */
} gg_k_optim_hyper;

/* partials[c] = sum over chunk c's elements of (double)(fp32(grad × scalars->inv_scale))², c < n_chunks, in a fixed
 * order per CTA: a chunk with an Inf or NaN (once unscaled) gives a non-finite sum. One CTA per chunk. */
cudaError_t gg_k_optim_sum_squares(const gg_k_optim_param *params, const gg_k_optim_chunk *chunks, int n_chunks,
                                   const gg_k_optim_scalars *scalars, double *partials, cudaStream_t stream);

/* One CTA. With n_partials > 0: total = the sum of partials[0 .. n_partials) in a fixed order; grad_norm =
 * fp32(sqrt(total)); with max_norm > 0, clip = min(1, max_norm / (grad_norm + 1e-6)) in fp32 (NaN stays NaN); with
 * check_finite, found_inf = total is not finite, else 0. With n_partials = 0, found_inf = 0 and the rest is left.
 * Then, unless found_inf, steps[i] += 1 for i < n_steps. */
cudaError_t gg_k_optim_finish(const double *partials, int n_partials, float max_norm, int check_finite,
                              gg_k_optim_scalars *scalars, int64_t *steps, int n_steps, cudaStream_t stream);

/* The update of chunks[0 .. n_chunks) (one CTA each) unless scalars->found_inf: per element, in fp32,
 * g = grad × inv_scale (× clip), then AdamW or SGD as docs/optimizer.md writes them, each operation rounded once
 * (no fused multiply-add); the step number t is steps[param] (already advanced by gg_k_optim_finish); the copy, when
 * given, is written from the updated weight. */
cudaError_t gg_k_optim_update(const gg_k_optim_param *params, const gg_k_optim_chunk *chunks, int n_chunks,
                              const gg_k_optim_scalars *scalars, const int64_t *steps, gg_k_optim_hyper hyper,
                              cudaStream_t stream);

/* *dst = value, one thread: a device word set in stream order (capturable: the value is a kernel parameter). */
cudaError_t gg_k_optim_set_word(float *dst, float value, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
