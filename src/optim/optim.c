/* optim.c - the fused optimizer's life cycle: create (the config's checks), add_param (each parameter's checks),
 * finalize (one device allocation: tables, step counts, device words, moments), destroy, and the size query. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"

/* The most elements one parameter may have: its moments' bytes stay far inside int64 and size_t. */
#define MAX_COUNT ((int64_t)1 << 52)

/* ---- create ---- */

static int nonnegative(float x) { return isfinite(x) && x >= 0.0f; }

static gg_status bad_field(gg_ctx *ctx, const char *field, float value, const char *rule) {
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "gg_optim_create: config->%s = %g %s", field, (double)value, rule);
}

static gg_status check_config(gg_ctx *ctx, const gg_optim_config *c) {
    GG_TRY(gg_check_config_version(ctx, "gg_optim_create", c->struct_size, sizeof(gg_optim_config), c->version,
                                   GG_OPTIM_CONFIG_VERSION, "GG_OPTIM_CONFIG_INIT"));
    if (c->kind != GG_OPTIM_ADAMW && c->kind != GG_OPTIM_SGD)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "gg_optim_create: config->kind = %d is not GG_OPTIM_ADAMW or GG_OPTIM_SGD", (int)c->kind);
    if (!nonnegative(c->lr)) return bad_field(ctx, "lr", c->lr, "must be finite and >= 0");
    if (!(nonnegative(c->weight_decay) || c->weight_decay == GG_OPTIM_DEFAULT_WEIGHT_DECAY))
        return bad_field(ctx, "weight_decay", c->weight_decay,
                         "must be finite and >= 0, or GG_OPTIM_DEFAULT_WEIGHT_DECAY");
    if (!nonnegative(c->max_grad_norm)) return bad_field(ctx, "max_grad_norm", c->max_grad_norm,
                                                         "must be finite and >= 0 (0: no clipping)");
    if (c->kind == GG_OPTIM_ADAMW) {
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f)) return bad_field(ctx, "beta1", c->beta1, "is not in [0, 1)");
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f)) return bad_field(ctx, "beta2", c->beta2, "is not in [0, 1)");
        if (!nonnegative(c->eps)) return bad_field(ctx, "eps", c->eps, "must be finite and >= 0");
    } else {
        if (!nonnegative(c->momentum)) return bad_field(ctx, "momentum", c->momentum, "must be finite and >= 0");
        if (!(c->dampening >= 0.0f && c->dampening <= 1.0f))
            return bad_field(ctx, "dampening", c->dampening, "is not in [0, 1]");
        if (c->nesterov && (c->momentum == 0.0f || c->dampening != 0.0f))
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "gg_optim_create: config->nesterov needs momentum > 0 and dampening 0 (momentum = %g, "
                           "dampening = %g)",
                           (double)c->momentum, (double)c->dampening);
    }
    return GG_SUCCESS;
}

void gg_optim_destroy(gg_optim *o) {
    if (!o) return;
    gg_ctx *ctx = o->ctx;
    if (gg_ctx_claim_teardown(ctx, "gg_optim_destroy") != GG_SUCCESS) return; /* as gg_ctx_destroy: nothing destroyed */
    if (o->held_by_steps > 0) { /* their graphs update through its device block and capture again through it */
        gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                "gg_optim_destroy: %d step graph%s hold%s the optimizer (gg_step_add_optimizer): gg_step_destroy "
                "them first; nothing was destroyed",
                o->held_by_steps, o->held_by_steps == 1 ? "" : "s", o->held_by_steps == 1 ? "s" : "");
        gg_ctx_release(ctx);
        return;
    }
    if (o->device) {
        int saved = 0;
        const int entered = gg_device_enter(o->ctx, "gg_optim_destroy", &saved) == GG_SUCCESS;
        (void)cudaDeviceSynchronize(); /* steps may still be running */
        (void)cudaFree(o->device);
        gg_clear_own_cuda_error(o->ctx);
        if (entered) gg_device_leave(o->ctx, saved);
    }
    gg_ctx_hook_remove(o->ctx, &o->hook);
    free(o->params);
    free(o->chunk_first);
    free(o);
    gg_ctx_release(ctx);
}

static void destroy_hook(void *o) { gg_optim_destroy(o); }

static gg_status optim_create(gg_ctx *ctx, const gg_optim_config *config, gg_optim **out) {
    if (!out) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "gg_optim_create: out is NULL");
    const gg_optim_config defaults = GG_OPTIM_CONFIG_INIT;
    if (!config) config = &defaults;
    GG_TRY(check_config(ctx, config));
    gg_optim *o = calloc(1, sizeof *o);
    if (!o) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "gg_optim_create: out of host memory");
    o->ctx = ctx;
    o->config = *config;
    if (o->config.weight_decay == GG_OPTIM_DEFAULT_WEIGHT_DECAY)
        o->config.weight_decay = config->kind == GG_OPTIM_ADAMW ? 1e-2f : 0.0f;
    o->hook = (gg_ctx_hook){.destroy = destroy_hook, .obj = o};
    gg_ctx_hook_add(ctx, &o->hook, GG_HOOK_LATE); /* after the steps that may hold it, at gg_ctx_destroy */
    *out = o;
    return GG_SUCCESS;
}

gg_status gg_optim_create(gg_ctx *ctx, const gg_optim_config *config, gg_optim **out) {
    if (out) *out = NULL;
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_optim_create: ctx is NULL");
    GG_TRY(gg_refuse_in_step_callback(ctx, "gg_optim_create"));
    GG_TRY(gg_ctx_claim(ctx, "gg_optim_create"));
    const gg_status status = optim_create(ctx, config, out);
    gg_ctx_release(ctx);
    return status;
}

/* ---- add_param ---- */

static size_t elem_bytes(gg_optim_dtype t) { return t == GG_OPTIM_FP32 ? 4 : 2; }

/* A parameter's three tensors: [0] the weights, [1] the gradient, [2] the copy (NULL when none). */
typedef struct span {
    const char *name;
    uintptr_t lo, hi;
    int written;
} span;

static void spans_of(const gg_optim_param *p, span s[3]) {
    const uintptr_t n = (uintptr_t)p->count;
    s[0] = (span){"param->param", (uintptr_t)p->param, (uintptr_t)p->param + n * 4, 1};
    s[1] = (span){"param->grad", (uintptr_t)p->grad, (uintptr_t)p->grad + n * elem_bytes(p->grad_dtype), 0};
    s[2] = (span){"param->copy", (uintptr_t)p->copy, p->copy ? (uintptr_t)p->copy + n * 2 : (uintptr_t)p->copy, 1};
}

static int overlap(const span *a, const span *b) {
    return a->lo < a->hi && b->lo < b->hi && a->lo < b->hi && b->lo < a->hi;
}

/* A tensor of n elements of align bytes each: aligned to its element, device memory to its last byte. */
static gg_status check_tensor(gg_optim *o, const char *where, const char *name, const void *p, size_t align,
                              size_t n) {
    if ((uintptr_t)p % align != 0)
        return gg_fail(o->ctx, GG_ERROR_MISALIGNED, "%s: %s (%p) is not %zu-byte aligned (its element size)", where,
                       name, p, align);
    return gg_check_device_buffer(o->ctx, where, name, p, n * align);
}

/* The parameter's own checks, then against every earlier parameter: no write races, no read of a written tensor. */
static gg_status check_param(gg_optim *o, const char *where, const gg_optim_param *p) {
    gg_ctx *ctx = o->ctx;
    if (!p->param) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: param->param is NULL", where);
    if (!p->grad) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: param->grad is NULL", where);
    if (p->count < 1 || p->count > MAX_COUNT)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: param->count = %lld is not in [1, 2^52]", where,
                       (long long)p->count);
    if (p->grad_dtype != GG_OPTIM_FP32 && p->grad_dtype != GG_OPTIM_BF16)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: param->grad_dtype = %d is not GG_OPTIM_FP32 or GG_OPTIM_BF16", where, (int)p->grad_dtype);
    if (p->copy && p->copy_dtype != GG_OPTIM_FP16 && p->copy_dtype != GG_OPTIM_BF16)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: param->copy_dtype = %d: a copy is GG_OPTIM_FP16 or GG_OPTIM_BF16", where,
                       (int)p->copy_dtype);
    const size_t n = (size_t)p->count; /* <= 2^52: no tensor's bytes overflow */
    GG_TRY(check_tensor(o, where, "param->param", p->param, 4, n));
    GG_TRY(check_tensor(o, where, "param->grad", p->grad, elem_bytes(p->grad_dtype), n));
    if (p->copy) GG_TRY(check_tensor(o, where, "param->copy", p->copy, 2, n));
    span mine[3], theirs[3];
    spans_of(p, mine);
    for (int a = 0; a < 3; ++a)
        for (int b = a + 1; b < 3; ++b)
            if (overlap(&mine[a], &mine[b]))
                return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s overlaps %s", where, mine[a].name,
                               mine[b].name);
    for (int j = 0; j < o->n_params; ++j) {
        spans_of(&o->params[j], theirs);
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b)
                if ((mine[a].written || theirs[b].written) && overlap(&mine[a], &theirs[b]))
                    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s overlaps param %d's %s", where,
                                   mine[a].name, j, theirs[b].name);
    }
    if (o->n_chunks + gg_optim_chunk_count(p->count) > INT32_MAX)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: param->count = %lld: the parameters would need more than 2^31 - 1 chunks of %d elements",
                       where, (long long)p->count, GG_K_OPTIM_CHUNK);
    return GG_SUCCESS;
}

static gg_status add_param(gg_optim *o, const char *fn, const gg_optim_param *p) {
    char where[64];
    snprintf(where, sizeof where, "%s (param %d)", fn, o->n_params);
    if (o->finalized)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: the optimizer is finalized; add every parameter before gg_optim_finalize", where);
    if (!p) return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: param is NULL", where);
    GG_TRY(check_param(o, where, p));
    if (o->n_params == INT32_MAX - 1)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: too many parameters", where);
    if (o->n_params == o->cap_params) {
        const int cap = o->cap_params ? (o->cap_params > INT32_MAX / 2 ? INT32_MAX - 1 : 2 * o->cap_params) : 64;
        gg_optim_param *params = realloc(o->params, sizeof *params * (size_t)cap);
        if (!params) return gg_fail(o->ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", where);
        o->params = params;
        o->cap_params = cap;
    }
    o->params[o->n_params++] = *p;
    o->elements += p->count;
    o->n_chunks += gg_optim_chunk_count(p->count);
    return GG_SUCCESS;
}

gg_status gg_optim_enter(gg_optim *o, const char *fn) {
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    GG_TRY(gg_refuse_in_step_callback(o->ctx, fn));
    return gg_ctx_claim(o->ctx, fn);
}

gg_status gg_optim_add_param(gg_optim *o, const gg_optim_param *param) {
    const char *fn = "gg_optim_add_param";
    GG_TRY(gg_optim_enter(o, fn));
    const gg_status status = add_param(o, fn, param);
    gg_ctx_release(o->ctx);
    return status;
}

/* ---- finalize ---- */

int gg_optim_moments_of(const gg_optim *o) { return gg_optim_moments(o->config.kind, o->config.momentum); }

static void make_layout(const gg_optim *o, gg_optim_layout *l) {
    gg_optim_layout_make(o->params, o->n_params, o->n_chunks, gg_optim_moments_of(o), l);
}

/* The device block: the host image of its tables copied in, the moments zeroed. */
static gg_status make_device_state(gg_optim *o, const char *fn) {
    gg_ctx *ctx = o->ctx;
    const gg_optim_layout *l = &o->layout;
    char *image = calloc(1, l->table_bytes);
    if (!image) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    gg_status status = GG_SUCCESS;
    GG_CUDA_GOTO(ctx, cudaMalloc(&o->device, l->total), status, done);
    gg_k_optim_scalars *scalars = (gg_k_optim_scalars *)(image + l->scalars);
    scalars->lr = o->config.lr;
    scalars->inv_scale = 1.0f;
    scalars->clip = 1.0f;
    gg_optim_tables_fill(o->params, o->n_params, gg_optim_moments_of(o),
                         (uintptr_t)o->device, l, (gg_k_optim_param *)(image + l->params),
                         (gg_k_optim_chunk *)(image + l->chunks), o->chunk_first);
    GG_CUDA_GOTO(ctx, cudaMemcpy(o->device, image, l->table_bytes, cudaMemcpyHostToDevice), status, done);
    if (l->state_bytes) GG_CUDA_GOTO(ctx, cudaMemset((char *)o->device + l->state, 0, l->state_bytes), status, done);
    /* the copy and the zeros run on the legacy stream: they must have landed before a step on any stream reads them */
    GG_CUDA_GOTO(ctx, cudaDeviceSynchronize(), status, done);
done:
    free(image);
    return status;
}

static gg_status finalize(gg_optim *o, const char *fn) {
    if (o->finalized)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the optimizer is finalized already%s", fn,
                       o->finalized < 0 ? " (and failed: destroy it)" : "");
    if (o->n_params == 0)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: the optimizer has no parameter (add them with gg_optim_add_param)", fn);
    /* from here on a failure leaves an optimizer that can only be destroyed */
    o->finalized = -1;
    o->chunk_first = malloc(sizeof *o->chunk_first * ((size_t)o->n_params + 1));
    if (!o->chunk_first) return gg_fail(o->ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    make_layout(o, &o->layout);
    int saved = 0;
    GG_TRY(gg_device_enter(o->ctx, fn, &saved));
    const gg_status status = make_device_state(o, fn);
    gg_device_leave(o->ctx, saved);
    if (status != GG_SUCCESS) return status;
    o->finalized = 1;
    gg_log(o->ctx, GG_LOG_INFO, "%s: %s, %d parameters, %lld elements in %lld chunks, %zu MiB of device memory", fn,
           o->config.kind == GG_OPTIM_ADAMW ? "AdamW" : "SGD", o->n_params, (long long)o->elements,
           (long long)o->n_chunks, o->layout.total >> 20);
    return GG_SUCCESS;
}

gg_status gg_optim_finalize(gg_optim *o) {
    const char *fn = "gg_optim_finalize";
    GG_TRY(gg_optim_enter(o, fn));
    const gg_status status = finalize(o, fn);
    gg_ctx_release(o->ctx);
    return status;
}

/* ---- queries ---- */

static gg_status optim_memory_info(const gg_optim *o, gg_optim_memory *out) {
    if (!out) return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "gg_optim_memory_info: out is NULL");
    gg_optim_layout l;
    if (o->finalized == 1)
        l = o->layout;
    else
        make_layout(o, &l);
    memset(out, 0, sizeof *out);
    out->params = o->n_params;
    out->elements = o->elements;
    out->state_bytes = l.state_bytes;
    out->table_bytes = l.table_bytes;
    out->total_bytes = l.total;
    return GG_SUCCESS;
}

/* A query claims the context as every call does: another thread inside it (adding parameters) is refused. */
gg_status gg_optim_memory_info(const gg_optim *o, gg_optim_memory *out) {
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_optim_memory_info: opt is NULL");
    GG_TRY(gg_ctx_claim(o->ctx, "gg_optim_memory_info"));
    const gg_status status = optim_memory_info(o, out);
    gg_ctx_release(o->ctx);
    return status;
}

gg_k_optim_scalars *gg_optim_scalars(const gg_optim *o) {
    return (gg_k_optim_scalars *)((char *)o->device + o->layout.scalars);
}
