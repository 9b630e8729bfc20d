/*
 * step.c - step graphs: a model's backward (block calls and the caller's callbacks, in order) captured as one CUDA
 * graph per bucket and replayed with one launch. This file: the step's life cycle, its description (the adds,
 * gg_step_set_args) and the queries; the other parts are listed in step_internal.h.
 *
 *   add:       the block's own checks, at the largest bucket's rows; callbacks kept as given
 *   finalize:  the chain's checks (parameter gradients written once, activation gradients read whole), every call's
 *              plan at every bucket, the scratch ring's other slots, the side streams and their workspaces
 *              (step_rules.c, step_finalize.c)
 *   run:       pick the bucket; find the exec (bucket, accumulate, padded M, the id of the calls' whole pointer
 *              set) or capture on the context's capture stream: per block call i, main waits for the deferred work
 *              of call i - K (its slot's previous user) and of any earlier call whose inputs it overwrites, then the
 *              block's enqueue runs with slot i mod K, side stream i mod S and joins deferred; one join of
 *              everything at the end. The exec is updated in place or instantiated (gg_exec_install).
 *              (step_run.c, step_capture.c)
 *   device:    one graph: exec.c's selection kernel and SWITCH node (gg_switch_graph_build), each branch a bucket's
 *              whole step with its padding rows zeroed from M in device memory
 *   reduce:    a syncing step (a communicator at finalize) packs the parameter gradients into buckets at finalize
 *              (src/ddp/step_layout.c) and agrees with the other ranks; in the capture, right after the call that
 *              produces a bucket's last gradient, the bucket goes to the communication stream (src/ddp/step_reduce.c),
 *              joined once at the end
 */
#include "step_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- life cycle ---- */

/* Whether the step made anything on the device (only finalize does). */
static int has_device_state(const gg_step *s) { return s->finalized != 0; }

void gg_step_destroy(gg_step *s) {
    if (!s) return;
    gg_ctx *ctx = s->ctx;
    if (gg_ctx_claim_teardown(ctx, "gg_step_destroy") != GG_SUCCESS) return; /* as gg_ctx_destroy: nothing destroyed */
    int saved = 0;
    const int entered = has_device_state(s) && gg_device_enter(s->ctx, "gg_step_destroy", &saved) == GG_SUCCESS;
    if (entered) {
        (void)cudaDeviceSynchronize(); /* runs of the step may still be going */
        for (int b = 0; b < GG_MAX_BUCKETS; ++b) gg_exec_destroy_all(&s->execs[b]);
        gg_exec_destroy_all(&s->device_execs);
        if (s->device_buckets) (void)cudaFree(s->device_buckets);
        if (s->device_errors) (void)cudaFree(s->device_errors);
        for (int i = 0; i < s->n_ops; ++i) {
            if (s->ops[i].ev_join) (void)cudaEventDestroy(s->ops[i].ev_join);
            if (s->ops[i].ev_aux_join) (void)cudaEventDestroy(s->ops[i].ev_aux_join);
        }
        for (int k = 0; k < GG_STEP_MAX_SIDE_STREAMS; ++k) {
            if (s->side[k]) (void)cudaStreamDestroy(s->side[k]);
            if (s->aux[k]) (void)cudaStreamDestroy(s->aux[k]);
            if (k > 0 && s->workspace[k]) (void)cudaFree(s->workspace[k]);
        }
        if (s->ring) (void)cudaFree(s->ring);
        if (s->counters) (void)cudaFree(s->counters);
        gg_clear_own_cuda_error(ctx);
        gg_device_leave(s->ctx, saved);
    } else {
        for (int b = 0; b < GG_MAX_BUCKETS; ++b) gg_exec_cache_free(&s->execs[b]);
        gg_exec_cache_free(&s->device_execs);
    }
    if (s->holds_nccl) gg_dist_graph_released(s->ctx);
    gg_reduce_layout_free(&s->layout);
    free(s->grads);
    free(s->bucket_waits);
    gg_ptrset_free(&s->ptrsets);
    free(s->ptrset_row);
    gg_ctx_hook_remove(s->ctx, &s->hook);
    for (int i = 0; i < s->n_ops; ++i)
        if (s->ops[i].kind == OP_FINAL && s->ops[i].final.release) s->ops[i].final.release(s->ops[i].final.user);
    free(s->ops);
    free(s);
    gg_ctx_release(ctx);
}

static void destroy_hook(void *s) { gg_step_destroy(s); }

/* The caller's config as this library's: a version-1 struct (built against an older header, without
 * sync_gradients) gets the later fields' values that keep its meaning (sync_gradients 0: such steps never reduced). */
static gg_status read_config(gg_ctx *ctx, const gg_step_config *in, gg_step_config *out) {
    const size_t v1_size = offsetof(gg_step_config, sync_gradients);
    const gg_step_config defaults = GG_STEP_CONFIG_INIT;
    *out = defaults;
    if (in->version == 1 && in->struct_size == v1_size) {
        memcpy(out, in, v1_size);
        out->struct_size = sizeof *out;
        out->version = GG_STEP_CONFIG_VERSION;
        out->sync_gradients = 0;
        return GG_SUCCESS;
    }
    GG_TRY(gg_check_config_version(ctx, "gg_step_create", in->struct_size, sizeof(gg_step_config), in->version,
                                   GG_STEP_CONFIG_VERSION, "GG_STEP_CONFIG_INIT"));
    *out = *in;
    return GG_SUCCESS;
}

static gg_status check_config(gg_ctx *ctx, const gg_step_config *c) {
    const char *fn = "gg_step_create";
    if (c->execs_per_bucket < 1 || c->execs_per_bucket > 64)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->execs_per_bucket = %d is not in [1, 64]", fn,
                       c->execs_per_bucket);
    if (c->side_streams < 1 || c->side_streams > GG_STEP_MAX_SIDE_STREAMS)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: config->side_streams = %d is not in [1, %d] (GG_STEP_MAX_SIDE_STREAMS)", fn,
                       c->side_streams, GG_STEP_MAX_SIDE_STREAMS);
    if (c->scratch_slots < 0 || c->scratch_slots > GG_STEP_MAX_SCRATCH_SLOTS)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: config->scratch_slots = %d is not in [0, %d] (GG_STEP_MAX_SCRATCH_SLOTS; 0: the default)",
                       fn, c->scratch_slots, GG_STEP_MAX_SCRATCH_SLOTS);
    if (c->sync_gradients != 0 && c->sync_gradients != 1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->sync_gradients = %d is not 0 or 1", fn,
                       c->sync_gradients);
    return GG_SUCCESS;
}

static gg_status step_create(gg_ctx *ctx, const gg_step_config *config, gg_step **out) {
    if (!out) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "gg_step_create: out is NULL");
    const gg_step_config defaults = GG_STEP_CONFIG_INIT;
    gg_step_config read;
    GG_TRY(read_config(ctx, config ? config : &defaults, &read));
    config = &read;
    GG_TRY(check_config(ctx, config));
    /* the bucket policy is gg_graph_config's: one expansion, one set of messages */
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.policy = config->policy;
    gc.bucket_tokens = config->bucket_tokens;
    gc.n_buckets = config->n_buckets;
    gc.min_tokens = config->min_tokens;
    gc.step = config->step;
    gc.max_tokens = config->max_tokens;
    int64_t buckets[GG_MAX_BUCKETS];
    char err[256];
    const int n = gg_buckets_make(&gc, buckets, err, sizeof err);
    if (n < 0) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "gg_step_create: %s", err);
    gg_step *s = calloc(1, sizeof *s);
    if (!s) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "gg_step_create: out of host memory");
    s->ctx = ctx;
    s->config = *config;
    s->sync_on = 1;
    s->update_on = 1;
    s->n_buckets = n;
    memcpy(s->buckets, buckets, sizeof(int64_t) * (size_t)n);
    s->sides = ctx->config.overlap == GG_OVERLAP_NEVER ? 0 : config->side_streams;
    s->slots = config->scratch_slots ? config->scratch_slots : config->side_streams + 1;
    for (int b = 0; b <= n; ++b)
        if (gg_exec_cache_init(b < n ? &s->execs[b] : &s->device_execs, config->execs_per_bucket) != 0) {
            gg_step_destroy(s);
            return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "gg_step_create: out of host memory");
        }
    s->hook = (gg_ctx_hook){.destroy = destroy_hook, .obj = s};
    gg_ctx_hook_add(ctx, &s->hook, GG_HOOK_EARLY);
    *out = s;
    return GG_SUCCESS;
}

gg_status gg_step_create(gg_ctx *ctx, const gg_step_config *config, gg_step **out) {
    if (out) *out = NULL;
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_step_create: ctx is NULL");
    GG_TRY(gg_refuse_in_step_callback(ctx, "gg_step_create"));
    GG_TRY(gg_ctx_claim(ctx, "gg_step_create")); /* the whole call is this thread's, as every entry point's */
    const gg_status status = step_create(ctx, config, out);
    gg_ctx_release(ctx);
    return status;
}

/* ---- describing the backward ---- */

/* step non-NULL and still open for adds. */
static gg_status check_open(gg_step *s, const char *fn) {
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_refuse_in_step_callback(s->ctx, fn));
    if (s->finalized)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): the step is finalized; make a new one", fn,
                       s->n_ops);
    return GG_SUCCESS;
}

static gg_status append(gg_step *s, const char *fn, const step_op *op) {
    if (s->n_ops == s->cap_ops) {
        const int cap = s->cap_ops ? 2 * s->cap_ops : 16;
        step_op *ops = realloc(s->ops, sizeof *ops * (size_t)cap);
        if (!ops) return gg_fail(s->ctx, GG_ERROR_OUT_OF_MEMORY, "%s (call %d): out of host memory", fn, s->n_ops);
        s->ops = ops;
        s->cap_ops = cap;
    }
    s->ops[s->n_ops++] = *op;
    return GG_SUCCESS;
}

/* The block's own checks of a call at the largest bucket's rows, messages prefixed with "fn (call i)". */
static gg_status validate_call(gg_step *s, const char *fn, int index, gg_block_call *call, gg_precision requested) {
    char where[96];
    snprintf(where, sizeof where, "%s (call %d)", fn, index);
    call->tokens = gg_step_max_tokens(s);
    call->accumulate = 0;
    return gg_block_validate(s->ctx, where, call, requested);
}

static gg_status add_block(gg_step *s, const gg_block_info *info, const char *fn, const void *desc,
                           const void *args) {
    GG_TRY(check_open(s, fn));
    if (!desc) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): desc is NULL", fn, s->n_ops);
    if (!args) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): args is NULL", fn, s->n_ops);
    step_op op = {.kind = OP_BLOCK, .block = s->n_blocks};
    gg_block_pack(&op.call, info, desc, args);
    GG_TRY(validate_call(s, fn, s->n_ops, &op.call, gg_block_requested_precision(info, desc)));
    GG_TRY(append(s, fn, &op));
    s->n_blocks++;
    return GG_SUCCESS;
}

gg_status gg_step_add_block(gg_step *s, const gg_block_info *info, const char *fn, const void *desc,
                            const void *args) {
    if (!s) return check_open(s, fn);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    const gg_status status = add_block(s, info, fn, desc, args);
    gg_ctx_release(s->ctx);
    return status;
}

static gg_status add_callback(gg_step *s, const char *name, gg_step_callback_fn fn, void *user,
                              int after_gradients) {
    GG_TRY(check_open(s, name));
    if (!fn) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): fn is NULL", name, s->n_ops);
    const step_op op = {.kind = OP_CALLBACK, .fn = fn, .user = user, .after_gradients = after_gradients};
    return append(s, name, &op);
}

static gg_status claim_add_callback(gg_step *s, const char *name, gg_step_callback_fn fn, void *user,
                                    int after_gradients) {
    if (!s) return check_open(s, name);
    GG_TRY(gg_ctx_claim(s->ctx, name));
    const gg_status status = add_callback(s, name, fn, user, after_gradients);
    gg_ctx_release(s->ctx);
    return status;
}

gg_status gg_step_add_callback(gg_step *s, gg_step_callback_fn fn, void *user) {
    return claim_add_callback(s, "gg_step_add_callback", fn, user, 0);
}

gg_status gg_step_add_gradient_callback(gg_step *s, gg_step_callback_fn fn, void *user) {
    return claim_add_callback(s, "gg_step_add_gradient_callback", fn, user, 1);
}

gg_ctx *gg_step_context(const gg_step *s) { return s->ctx; }

gg_status gg_step_add_final(gg_step *s, const char *fn, const gg_step_final *final) {
    gg_status status = s ? gg_ctx_claim(s->ctx, fn) : check_open(s, fn);
    if (status != GG_SUCCESS) {
        if (final->release) final->release(final->user);
        return status;
    }
    status = check_open(s, fn);
    if (status == GG_SUCCESS) {
        const step_op op = {.kind = OP_FINAL, .final = *final};
        status = append(s, fn, &op);
    }
    if (status != GG_SUCCESS && final->release) final->release(final->user);
    gg_ctx_release(s->ctx);
    return status;
}

static gg_status add_reduce(gg_step *s, void *grad, size_t count, int bf16) {
    const char *fn = "gg_step_add_reduce";
    GG_TRY(check_open(s, fn));
    const size_t elem = bf16 ? 2 : 4;
    if (!grad) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): grad is NULL", fn, s->n_ops);
    if (count == 0) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): count is 0", fn, s->n_ops);
    if (count > (SIZE_MAX - (uintptr_t)grad) / elem)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s (call %d): count = %zu elements of %zu bytes run past the address space", fn, s->n_ops,
                       count, elem);
    if ((uintptr_t)grad % elem)
        return gg_fail(s->ctx, GG_ERROR_MISALIGNED, "%s (call %d): grad (%p) is not aligned to its %zu-byte elements",
                       fn, s->n_ops, grad, elem);
    GG_TRY(gg_check_device_buffer(s->ctx, fn, "grad", grad, count * elem));
    const step_op op = {.kind = OP_REDUCE, .grad = grad, .count = count, .elem_bytes = (int)elem};
    return append(s, fn, &op);
}

gg_status gg_step_add_reduce(gg_step *s, void *grad, size_t count, int bf16) {
    if (!s) return check_open(s, "gg_step_add_reduce");
    GG_TRY(gg_ctx_claim(s->ctx, "gg_step_add_reduce"));
    const gg_status status = add_reduce(s, grad, count, bf16);
    gg_ctx_release(s->ctx);
    return status;
}

/* A setting of the following runs, 0 or 1, each value with executable graphs of its own (sync, update). A run with
 * sync off and the update on WARNs when it is captured (step_capture.c): again after any change. */
static gg_status set_run_setting(gg_step *s, const char *fn, const char *name, int value, int *setting) {
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_refuse_in_step_callback(s->ctx, fn)); /* the capture under way has its setting from its key */
    if (value != 0 && value != 1)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %d is not 0 or 1", fn, name, value);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    *setting = value;
    s->warned_local_update = 0;
    gg_ctx_release(s->ctx);
    return GG_SUCCESS;
}

gg_status gg_step_set_sync(gg_step *s, int sync) {
    return set_run_setting(s, "gg_step_set_sync", "sync", sync, s ? &s->sync_on : NULL);
}

gg_status gg_step_set_update(gg_step *s, int update) {
    return set_run_setting(s, "gg_step_set_update", "update", update, s ? &s->update_on : NULL);
}

int gg_step_call_count(const gg_step *s) { return s ? s->n_ops : 0; }

/* ---- rebinding ---- */

static gg_status set_args(gg_step *s, const char *fn, int index, const void *args) {
    /* inside a callback the capture under way would be kept under the old pointers' key with some of the new ones */
    GG_TRY(gg_refuse_in_step_callback(s->ctx, fn));
    if (index < 0 || index >= s->n_ops)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: index = %d is not in [0, %d)", fn, index, s->n_ops);
    step_op *op = &s->ops[index];
    if (op->kind != OP_BLOCK)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): the call is a callback, not a block call", fn,
                       index);
    if (!args) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): args is NULL", fn, index);
    gg_block_call c = op->call;
    for (int i = 0; i < c.info->n_tensors; ++i)
        memcpy(&c.t[i], (const char *)args + c.info->tensors[i].arg, sizeof c.t[i]);
    GG_TRY(validate_call(s, fn, index, &c, c.precision));
    const gg_block_call old = op->call;
    op->call = c;
    /* the chain's rules against every other call (a step that reduces: finalize's reads rule too) */
    gg_status st = GG_SUCCESS;
    for (int i = 0; i < s->n_ops && st == GG_SUCCESS; ++i)
        if (s->ops[i].kind == OP_BLOCK) st = gg_step_check_chain(s, fn, i);
    if (st == GG_SUCCESS) st = gg_step_check_reduce_entries(s, fn);
    if (st == GG_SUCCESS && s->finalized == 1 && s->reduces) st = gg_step_check_reduced_uses(s, fn);
    if (st != GG_SUCCESS) {
        op->call = old;
        return st;
    }
    s->ptrset = 0; /* looked up at the next run: a set seen before finds its execs again */
    return GG_SUCCESS;
}

gg_status gg_step_set_args(gg_step *s, int index, const void *args) {
    const char *fn = "gg_step_set_args";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    const gg_status status = set_args(s, fn, index, args);
    gg_ctx_release(s->ctx);
    return status;
}

/* ---- queries ---- */

static gg_status step_memory_info(const gg_step *s, gg_step_memory *out) {
    if (!out) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "gg_step_memory_info: out is NULL");
    memset(out, 0, sizeof *out);
    out->buckets = s->n_buckets;
    for (int b = 0; b <= s->n_buckets; ++b) {
        const gg_exec_cache *cache = b < s->n_buckets ? &s->execs[b] : &s->device_execs;
        for (int i = 0; i < cache->capacity; ++i)
            if (cache->entries[i].exec) {
                out->execs++;
                out->exec_bytes += cache->entries[i].bytes;
            }
    }
    out->slot_bytes = s->slot_bytes;
    out->scratch_bytes = s->slot_bytes * (size_t)s->slots;
    out->own_bytes = s->own_bytes + out->exec_bytes;
    return GG_SUCCESS;
}

/* A query claims the context as every call does: another thread inside it (changing the exec caches) is refused. */
gg_status gg_step_memory_info(const gg_step *s, gg_step_memory *out) {
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_step_memory_info: step is NULL");
    GG_TRY(gg_ctx_claim(s->ctx, "gg_step_memory_info"));
    const gg_status status = step_memory_info(s, out);
    gg_ctx_release(s->ctx);
    return status;
}
