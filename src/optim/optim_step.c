/* optim_step.c - what an optimizer enqueues: a step over every parameter or a range of them (the sum of squares,
 * the fixed-order total, the update: kernels/optim.cu), the setters of its device words, and their synchronous read.
 * Nothing here allocates or synchronizes but gg_optim_last_step, so every enqueuing call is capturable. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "optim.h"

gg_status gg_optim_check_ready(const gg_optim *o, const char *fn) {
    if (o->finalized == 1) return GG_SUCCESS;
    return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the optimizer is not finalized%s", fn,
                   o->finalized < 0 ? " (gg_optim_finalize failed: destroy it)" : " (call gg_optim_finalize)");
}

static gg_k_optim_hyper hyper(const gg_optim_config *c) {
    gg_k_optim_hyper h;
    memset(&h, 0, sizeof h);
    h.kind = c->kind == GG_OPTIM_ADAMW ? GG_K_OPTIM_ADAMW : GG_K_OPTIM_SGD;
    h.beta1 = c->beta1;
    h.beta2 = c->beta2;
    h.eps = c->eps;
    h.weight_decay = c->weight_decay;
    h.momentum = c->momentum;
    h.dampening = c->dampening;
    h.nesterov = c->nesterov != 0;
    h.clip = c->max_grad_norm > 0.0f;
    return h;
}

/* A refused launch: the CUDA error, named with the entry point and the kernel. */
static gg_status launch_failed(gg_ctx *ctx, const char *fn, const char *kernel, cudaError_t err) {
    char what[96];
    snprintf(what, sizeof what, "%s: %s", fn, kernel);
    return gg_fail_cuda(ctx, err, what);
}

/* Enqueues the step of parameters [first, first + count). The norm pass runs only for a step of every parameter
 * (step_params refuses the configs that need it). partial: what was enqueued before a failure runs (not so in a
 * capture that is discarded on failure). */
static gg_status enqueue(gg_optim *o, const char *fn, int first, int count, int partial, cudaStream_t stream) {
    gg_ctx *ctx = o->ctx;
    char *base = o->device;
    const gg_optim_layout *l = &o->layout;
    const gg_k_optim_param *params = (const gg_k_optim_param *)(base + l->params);
    const gg_k_optim_chunk *chunks = (const gg_k_optim_chunk *)(base + l->chunks) + o->chunk_first[first];
    const int n_chunks = o->chunk_first[first + count] - o->chunk_first[first];
    gg_k_optim_scalars *scalars = gg_optim_scalars(o);
    int64_t *steps = (int64_t *)(base + l->steps) + first;
    double *partials = (double *)(base + l->partials);
    const int reduce = o->config.max_grad_norm > 0.0f || o->config.check_finite;
    /* the first two launches change nothing the caller sees until the update runs: their failure is a plain one */
    if (reduce) {
        const cudaError_t err = gg_k_optim_sum_squares(params, chunks, n_chunks, scalars, partials, stream);
        if (err != cudaSuccess) return launch_failed(ctx, fn, "gg_k_optim_sum_squares", err);
    }
    cudaError_t err = gg_k_optim_finish(partials, reduce ? n_chunks : 0, o->config.max_grad_norm,
                                        o->config.check_finite != 0, scalars, steps, count, stream);
    if (err != cudaSuccess) return launch_failed(ctx, fn, "gg_k_optim_finish", err);
    err = gg_k_optim_update(params, chunks, n_chunks, scalars, steps - first, hyper(&o->config), stream);
    if (err != cudaSuccess && !partial) return launch_failed(ctx, fn, "gg_k_optim_update", err);
    if (err != cudaSuccess) {
        const gg_status cause = launch_failed(ctx, fn, "gg_k_optim_update", err);
        char message[GG_MSG_BYTES];
        snprintf(message, sizeof message, "%s", gg_after_entry(ctx->last_error, fn)); /* fn is said first */
        return gg_fail(ctx, GG_ERROR_PARTIAL,
                       "%s: failed after enqueueing part of the step: the step counts of parameters %d .. %d advance "
                       "(unless a gradient is not finite) without their update, which did not run: %s: %s",
                       fn, first, first + count - 1, gg_status_string(cause), message);
    }
    return GG_SUCCESS;
}

/* gg_device_enter, then the step, in an NVTX range named after the entry point. */
static gg_status run_step(gg_optim *o, const char *fn, int first, int count, int partial, gg_stream stream) {
    int saved = 0;
    GG_TRY(gg_device_enter_stream(o->ctx, fn, (cudaStream_t)stream, &saved, NULL));
    nvtxRangePushA(fn);
    const gg_status status = enqueue(o, fn, first, count, partial, (cudaStream_t)stream);
    nvtxRangePop();
    gg_device_leave(o->ctx, saved);
    return status;
}

static gg_status step_all(gg_optim *o, int partial, gg_stream stream) {
    const char *fn = "gg_optim_step";
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    GG_TRY(gg_ctx_claim(o->ctx, fn));
    gg_status status = gg_optim_check_ready(o, fn);
    if (status == GG_SUCCESS) status = run_step(o, fn, 0, o->n_params, partial, stream);
    gg_ctx_release(o->ctx);
    return status;
}

gg_status gg_optim_step(gg_optim *o, gg_stream stream) { return step_all(o, 1, stream); }

gg_status gg_optim_step_captured(gg_optim *o, cudaStream_t stream) { return step_all(o, 0, (gg_stream)stream); }

gg_status gg_optim_step_range_captured(gg_optim *o, int first, int count, cudaStream_t stream) {
    return run_step(o, "gg_optim_step_params (in a step graph)", first, count, 0, (gg_stream)stream);
}

int gg_optim_updates_apart(const gg_optim *o) { return !(o->config.max_grad_norm > 0.0f) && !o->config.check_finite; }

int gg_optim_param_of(const gg_optim *o, const void *grad, size_t count, int elem_bytes) {
    for (int i = 0; i < o->n_params; ++i) {
        const gg_optim_param *p = &o->params[i];
        const int elem = p->grad_dtype == GG_OPTIM_FP32 ? 4 : 2;
        if (p->grad == grad && (size_t)p->count == count && elem == elem_bytes) return i;
    }
    return -1;
}

static gg_status check_range(gg_optim *o, const char *fn, int first, int count) {
    GG_TRY(gg_optim_check_ready(o, fn));
    if (o->config.max_grad_norm > 0.0f || o->config.check_finite)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: refused with %s on: the %s needs every gradient before any parameter is updated (use "
                       "gg_optim_step)",
                       fn, o->config.max_grad_norm > 0.0f ? "clipping (config->max_grad_norm > 0)"
                                                          : "the finite check (config->check_finite)",
                       o->config.max_grad_norm > 0.0f ? "global norm" : "decision to skip a step");
    if (first < 0 || first >= o->n_params)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: first = %d is not in [0, %d)", fn, first,
                       o->n_params);
    if (count < 1 || count > o->n_params - first)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: count = %d is not in [1, %d] (parameters %d ..)", fn,
                       count, o->n_params - first, first);
    return GG_SUCCESS;
}

gg_status gg_optim_step_params(gg_optim *o, int first, int count, gg_stream stream) {
    const char *fn = "gg_optim_step_params";
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    GG_TRY(gg_ctx_claim(o->ctx, fn));
    gg_status status = check_range(o, fn, first, count);
    if (status == GG_SUCCESS) status = run_step(o, fn, first, count, 1, stream);
    gg_ctx_release(o->ctx);
    return status;
}

/* ---- the device words ---- */

/* Enqueues *word = value on stream. */
static gg_status set_word(gg_optim *o, const char *fn, float *word, float value, gg_stream stream) {
    int saved = 0;
    GG_TRY(gg_device_enter_stream(o->ctx, fn, (cudaStream_t)stream, &saved, NULL));
    const cudaError_t err = gg_k_optim_set_word(word, value, (cudaStream_t)stream);
    gg_device_leave(o->ctx, saved);
    if (err != cudaSuccess) return launch_failed(o->ctx, fn, "gg_k_optim_set_word", err);
    return GG_SUCCESS;
}

static gg_status set_lr(gg_optim *o, const char *fn, float lr, gg_stream stream) {
    GG_TRY(gg_optim_check_ready(o, fn));
    if (!(isfinite(lr) && lr >= 0.0f))
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: lr = %g must be finite and >= 0", fn, (double)lr);
    return set_word(o, fn, &gg_optim_scalars(o)->lr, lr, stream);
}

gg_status gg_optim_set_lr(gg_optim *o, float lr, gg_stream stream) {
    const char *fn = "gg_optim_set_lr";
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    GG_TRY(gg_ctx_claim(o->ctx, fn));
    const gg_status status = set_lr(o, fn, lr, stream);
    gg_ctx_release(o->ctx);
    return status;
}

static gg_status set_loss_scale(gg_optim *o, const char *fn, float scale, gg_stream stream) {
    GG_TRY(gg_optim_check_ready(o, fn));
    if (!(isfinite(scale) && scale > 0.0f))
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: scale = %g must be finite and > 0", fn,
                       (double)scale);
    const float inv = (float)(1.0 / (double)scale); /* as GradScaler: the reciprocal in double, then fp32 */
    if (!isnormal(inv))
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: scale = %g: its inverse is not a normal fp32 number",
                       fn, (double)scale);
    return set_word(o, fn, &gg_optim_scalars(o)->inv_scale, inv, stream);
}

gg_status gg_optim_set_loss_scale(gg_optim *o, float scale, gg_stream stream) {
    const char *fn = "gg_optim_set_loss_scale";
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    GG_TRY(gg_ctx_claim(o->ctx, fn));
    const gg_status status = set_loss_scale(o, fn, scale, stream);
    gg_ctx_release(o->ctx);
    return status;
}

gg_status gg_optim_device_pointers(gg_optim *o, gg_optim_device_ptrs *out) {
    const char *fn = "gg_optim_device_pointers";
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    if (!out) return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    GG_TRY(gg_optim_check_ready(o, fn)); /* refused: *out as it was */
    memset(out, 0, sizeof *out);
    gg_k_optim_scalars *s = gg_optim_scalars(o);
    out->lr = &s->lr;
    out->inv_loss_scale = &s->inv_scale;
    out->steps = (int64_t *)((char *)o->device + o->layout.steps);
    out->found_inf = &s->found_inf;
    out->grad_norm = &s->grad_norm;
    return GG_SUCCESS;
}

static gg_status last_step(gg_optim *o, const char *fn, int *found_inf, float *grad_norm) {
    GG_TRY(gg_optim_check_ready(o, fn));
    if (!found_inf && !grad_norm)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: found_inf and grad_norm are both NULL", fn);
    int saved = 0;
    GG_TRY(gg_device_enter(o->ctx, fn, &saved));
    gg_k_optim_scalars s;
    gg_status status = GG_SUCCESS;
    GG_CUDA_GOTO(o->ctx, cudaDeviceSynchronize(), status, done); /* the steps enqueued before, on any stream */
    GG_CUDA_GOTO(o->ctx, cudaMemcpy(&s, gg_optim_scalars(o), sizeof s, cudaMemcpyDeviceToHost), status, done);
    if (found_inf) *found_inf = s.found_inf != 0;
    if (grad_norm) *grad_norm = s.grad_norm;
done:
    gg_device_leave(o->ctx, saved);
    return status;
}

gg_status gg_optim_last_step(gg_optim *o, int *found_inf, float *grad_norm) {
    const char *fn = "gg_optim_last_step";
    GG_TRY(gg_optim_enter(o, fn)); /* it synchronizes the device */
    const gg_status status = last_step(o, fn, found_inf, grad_norm);
    gg_ctx_release(o->ctx);
    return status;
}
