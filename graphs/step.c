/*
 * step.c - step graphs: a model's backward (block calls and the caller's callbacks, in order) captured as one CUDA
 * graph per bucket and replayed with one launch.
 *
 *   add:       the block's own checks, at the largest bucket's rows; callbacks kept as given
 *   finalize:  the chain's checks (parameter gradients written once, activation gradients read whole), every call's
 *              plan at every bucket, the scratch ring's other slots, the side streams and their workspaces
 *   run:       pick the bucket; find the exec (bucket, accumulate, padded M, the id of the calls' whole pointer
 *              set) or capture on the context's capture stream: per block call i, main waits for the deferred work
 *              of call i - K (its slot's previous user) and of any earlier call whose inputs it overwrites, then the
 *              block's enqueue runs with slot i mod K, side stream i mod S and joins deferred; one join of
 *              everything at the end. The exec is updated in place or instantiated (gg_exec_install).
 *   device:    one graph: graph.c's selection kernel and SWITCH node (gg_switch_graph_build), each branch a bucket's
 *              whole step with its padding rows zeroed from M in device memory
 *   reduce:    a syncing step (a communicator at finalize) packs the parameter gradients into buckets at finalize
 *              (src/ddp/step_layout.c) and agrees with the other ranks; in the capture, right after the call that
 *              produces a bucket's last gradient, the bucket goes to the communication stream (src/ddp/step_reduce.c),
 *              joined once at the end
 */
#include "step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "buckets.h"
#include "graph.h"
#include "kernels/gg_kernels.h"
#include "step_reduce.h"

enum { KEY_ACCUMULATE = 1, KEY_PADDED = 2, KEY_DEVICE = 4, KEY_SYNC = 8 };

typedef enum { OP_BLOCK, OP_CALLBACK, OP_REDUCE, OP_FINAL } op_kind;

typedef struct step_op {
    op_kind kind;
    gg_block_call call; /* OP_BLOCK: dims, precision, pointers; tokens the largest bucket */
    int block;          /* OP_BLOCK: its index among the block calls (slot block % K, side stream block % S) */
    gg_step_callback_fn fn; /* OP_CALLBACK */
    gg_step_final final;    /* OP_FINAL */
    void *user;
    void *grad;        /* OP_REDUCE: count elements of elem_bytes */
    size_t count;
    int elem_bytes;
    cudaEvent_t ev_join, ev_aux_join; /* the ends of its deferred branches */
    unsigned deferred;                /* while capturing: GG_DEFERRED_* of its enqueue */
    int joined;                       /* while capturing: the main stream waits for its deferred work already */
} step_op;

struct gg_step {
    gg_ctx *ctx;
    gg_step_config config;
    int n_buckets;
    int64_t buckets[GG_MAX_BUCKETS]; /* ascending */
    step_op *ops;
    int n_ops, cap_ops, n_blocks;
    int finalized; /* 1: runnable; -1: finalize failed (destroy only) */
    int sides, slots;
    cudaStream_t side[GG_STEP_MAX_SIDE_STREAMS], aux[GG_STEP_MAX_SIDE_STREAMS];
    void *workspace[GG_STEP_MAX_SIDE_STREAMS]; /* side stream k's: the context's second for k = 0, else the step's */
    void *ring;         /* slots 1 .. K-1 (slot 0 is the context's arena) */
    unsigned *counters; /* their reduction counters, GG_COUNTER_REDUCTION_WORDS each, zero between kernels */
    size_t slot_bytes, own_bytes;
    gg_ptrset_table ptrsets;  /* ids of the pointer sets the block calls have had (made at finalize) */
    const void **ptrset_row;  /* the current set, laid out for gg_ptrset_id */
    uint64_t ptrset;          /* its id; 0: to look up (gg_step_set_args changed a pointer) */
    gg_exec_cache execs[GG_MAX_BUCKETS];
    gg_exec_cache device_execs; /* the device-selected graphs (every bucket behind one SWITCH node) */
    int64_t *device_buckets;    /* the bucket sizes, for the device-side selection */
    unsigned *device_errors;    /* device-selected runs that found no bucket */
    gg_ctx_hook hook;
    /* reduction across ranks (finalized with a communicator and config.sync_gradients) */
    int reduces;             /* the step has a layout and reduces on runs with sync_on */
    int sync_on;             /* gg_step_set_sync: 1 (default) or 0 */
    int holds_nccl;          /* an exec captured NCCL work (counted in gg_dist_graph_holds) */
    const void *comm;        /* the communicator finalize agreed on */
    gg_reduce_grad *grads;   /* every gradient to reduce, in production order (pointers refreshed at capture) */
    int n_grads;
    gg_reduce_layout layout;
};

/* ---- life cycle ---- */

/* Whether the step made anything on the device (only finalize does). */
static int has_device_state(const gg_step *s) { return s->finalized != 0; }

void gg_step_destroy(gg_step *s) {
    if (!s) return;
    gg_ctx *ctx = s->ctx;
    if (gg_ctx_claim(ctx, "gg_step_destroy") != GG_SUCCESS) return; /* as gg_ctx_destroy: nothing destroyed */
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
        (void)cudaGetLastError();
        gg_device_leave(s->ctx, saved);
    } else {
        for (int b = 0; b < GG_MAX_BUCKETS; ++b) gg_exec_cache_free(&s->execs[b]);
        gg_exec_cache_free(&s->device_execs);
    }
    if (s->holds_nccl) gg_dist_graph_released(s->ctx);
    gg_reduce_layout_free(&s->layout);
    free(s->grads);
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
    GG_TRY(gg_ctx_claim(ctx, "gg_step_create")); /* the whole call is this thread's, as every entry point's */
    const gg_status status = step_create(ctx, config, out);
    gg_ctx_release(ctx);
    return status;
}

/* ---- describing the backward ---- */

static int64_t max_tokens(const gg_step *s) { return s->buckets[s->n_buckets - 1]; }

/* step non-NULL and still open for adds. */
static gg_status check_open(gg_step *s, const char *fn) {
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
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
    call->tokens = max_tokens(s);
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

static gg_status add_callback(gg_step *s, gg_step_callback_fn fn, void *user) {
    GG_TRY(check_open(s, "gg_step_add_callback"));
    if (!fn)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "gg_step_add_callback (call %d): fn is NULL", s->n_ops);
    const step_op op = {.kind = OP_CALLBACK, .fn = fn, .user = user};
    return append(s, "gg_step_add_callback", &op);
}

gg_status gg_step_add_callback(gg_step *s, gg_step_callback_fn fn, void *user) {
    if (!s) return check_open(s, "gg_step_add_callback");
    GG_TRY(gg_ctx_claim(s->ctx, "gg_step_add_callback"));
    const gg_status status = add_callback(s, fn, user);
    gg_ctx_release(s->ctx);
    return status;
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

gg_status gg_step_set_sync(gg_step *s, int sync) {
    const char *fn = "gg_step_set_sync";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    if (sync != 0 && sync != 1)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: sync = %d is not 0 or 1", fn, sync);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    s->sync_on = sync;
    gg_ctx_release(s->ctx);
    return GG_SUCCESS;
}

int gg_step_call_count(const gg_step *s) { return s ? s->n_ops : 0; }

/* ---- the chain's rules ---- */

static int is_param(const gg_block_call *c, int i) {
    return c->info->tensors[i].is_output && c->info->tensors[i].rows != GG_EXT_TOKENS;
}

static int is_act_grad(const gg_block_call *c, int i) {
    return c->info->tensors[i].is_output && c->info->tensors[i].rows == GG_EXT_TOKENS;
}

/* Whether tensors i of a and j of b share a byte (both used; sizes at the calls' tokens). */
static int overlap(const gg_block_call *a, int i, const gg_block_call *b, int j) {
    if (!gg_tensor_used(a, i) || !gg_tensor_used(b, j)) return 0;
    const uintptr_t a0 = (uintptr_t)a->t[i], a1 = a0 + gg_tensor_bytes(a, i);
    const uintptr_t b0 = (uintptr_t)b->t[j], b1 = b0 + gg_tensor_bytes(b, j);
    return a0 < b1 && b0 < a1;
}

/* Checks call `later` against every earlier block call: parameter gradients are written by one call only, and an
 * input that overlaps an earlier call's activation gradient is exactly that tensor. */
static gg_status check_against_earlier(gg_step *s, const char *fn, int later) {
    const gg_block_call *b = &s->ops[later].call;
    for (int e = 0; e < later; ++e) {
        if (s->ops[e].kind != OP_BLOCK) continue;
        const gg_block_call *a = &s->ops[e].call;
        for (int j = 0; j < b->info->n_tensors; ++j)
            for (int i = 0; i < a->info->n_tensors; ++i) {
                if (!overlap(a, i, b, j)) continue;
                const char *an = a->info->tensors[i].name, *bn = b->info->tensors[j].name;
                if (is_param(a, i) && b->info->tensors[j].is_output)
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's args->%s overlaps call %d's parameter gradient args->%s: the two "
                                   "writes would race (give each call its own gradient and add them in a callback)",
                                   fn, later, bn, e, an);
                if (is_act_grad(a, i) && !b->info->tensors[j].is_output &&
                    (a->t[i] != b->t[j] || gg_tensor_bytes(a, i) != gg_tensor_bytes(b, j)))
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's args->%s overlaps call %d's args->%s without being that tensor "
                                   "(same pointer and shape)",
                                   fn, later, bn, e, an);
            }
    }
    return GG_SUCCESS;
}

/* Whether block call b must wait for the deferred work of the earlier block call a: b writes what a's deferred work
 * reads (a's inputs), or touches a parameter gradient a's deferred work writes. a's activation gradients are complete
 * on the main stream when a's enqueue returns. */
static int hazard(const gg_block_call *a, const gg_block_call *b) {
    for (int i = 0; i < a->info->n_tensors; ++i)
        for (int j = 0; j < b->info->n_tensors; ++j) {
            if (!overlap(a, i, b, j)) continue;
            if (is_param(a, i)) return 1;
            if (!a->info->tensors[i].is_output && b->info->tensors[j].is_output) return 1;
        }
    return 0;
}

/* ---- the reduction across ranks ---- */

/* Whether [p, p + n) and [q, q + m) share a byte. */
static int bytes_overlap(const void *p, size_t n, const void *q, size_t m) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + m && b < a + n;
}

/* gg_step_add_reduce's entries must not overlap a block call's parameter gradient or each other (each would be
 * reduced twice, by collectives that race). */
static gg_status check_reduce_entries(gg_step *s, const char *fn) {
    for (int r = 0; r < s->n_ops; ++r) {
        const step_op *e = &s->ops[r];
        if (e->kind != OP_REDUCE) continue;
        const size_t bytes = e->count * (size_t)e->elem_bytes;
        for (int i = 0; i < s->n_ops; ++i) {
            const step_op *o = &s->ops[i];
            if (o->kind == OP_REDUCE && i < r &&
                bytes_overlap(e->grad, bytes, o->grad, o->count * (size_t)o->elem_bytes))
                return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                               "%s: call %d's gg_step_add_reduce buffer overlaps call %d's: it would be reduced twice",
                               fn, r, i);
            if (o->kind != OP_BLOCK) continue;
            for (int t = 0; t < o->call.info->n_tensors; ++t)
                if (is_param(&o->call, t) && gg_tensor_used(&o->call, t) &&
                    bytes_overlap(e->grad, bytes, o->call.t[t], gg_tensor_bytes(&o->call, t)))
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's gg_step_add_reduce buffer overlaps call %d's parameter gradient "
                                   "args->%s, which the step reduces already",
                                   fn, r, i, o->call.info->tensors[t].name);
        }
    }
    return GG_SUCCESS;
}

/* Every gradient the step reduces, in production order (block calls' parameter gradients in table order, then
 * where they were added, the caller's entries); grads NULL: only counts them. */
static int list_grads(const gg_step *s, gg_reduce_grad *grads) {
    int n = 0;
    for (int i = 0; i < s->n_ops; ++i) {
        const step_op *o = &s->ops[i];
        if (o->kind == OP_REDUCE) {
            if (grads) grads[n] = (gg_reduce_grad){o->grad, o->count, o->elem_bytes, i};
            ++n;
        }
        if (o->kind != OP_BLOCK) continue;
        for (int t = 0; t < o->call.info->n_tensors; ++t) {
            if (!is_param(&o->call, t) || !gg_tensor_used(&o->call, t)) continue;
            if (grads)
                grads[n] = (gg_reduce_grad){o->call.t[t], gg_tensor_elems(&o->call, t),
                                            o->call.info->tensors[t].elem_bytes, i};
            ++n;
        }
    }
    return n;
}

/* What must be equal on every rank: the calls (kinds, blocks, dims, precisions, reduce entries), the buckets, the
 * reduction's layout and the communicator's settings. Pointers differ between ranks and are left out. */
static uint64_t fingerprint(const gg_step *s) {
    uint64_t h = GG_FINGERPRINT_INIT;
    const gg_dist_config *dc = &s->ctx->dist->config;
    const uint64_t head[6] = {(uint64_t)s->n_ops, (uint64_t)s->n_buckets, (uint64_t)dc->op, (uint64_t)dc->sync,
                              dc->bucket_bytes, (uint64_t)s->ctx->dist->size};
    gg_fingerprint_add(&h, head, sizeof head);
    gg_fingerprint_add(&h, s->buckets, sizeof(int64_t) * (size_t)s->n_buckets);
    for (int i = 0; i < s->n_ops; ++i) {
        const step_op *o = &s->ops[i];
        uint64_t v[6] = {(uint64_t)o->kind, 0, 0, 0, 0, 0};
        if (o->kind == OP_BLOCK) {
            v[1] = (uint64_t)o->call.info->kind, v[2] = (uint64_t)o->call.dim0, v[3] = (uint64_t)o->call.dim1;
            v[4] = (uint64_t)o->call.precision, v[5] = (uint64_t)o->call.use_silu_gate;
        } else if (o->kind == OP_REDUCE) {
            v[1] = o->count, v[2] = (uint64_t)o->elem_bytes;
        }
        gg_fingerprint_add(&h, v, sizeof v);
    }
    gg_fingerprint_layout(&h, &s->layout);
    return h;
}

/* Work that needs every gradient final (an optimizer) comes after every call that makes one: a gradient made later
 * would miss the update it runs before. Callbacks may follow it. */
static gg_status check_final_last(gg_step *s, const char *fn) {
    int final = -1;
    for (int i = 0; i < s->n_ops; ++i) {
        const op_kind k = s->ops[i].kind;
        if (k == OP_FINAL && s->ops[i].final.whole_gradients && final < 0) final = i;
        if (final >= 0 && (k == OP_BLOCK || k == OP_REDUCE))
            return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s (call %d): a %s after the optimizer (call %d), whose update would run before its "
                           "gradients are made: add the optimizer last",
                           fn, i, k == OP_BLOCK ? "block call" : "gg_step_add_reduce", final);
    }
    return GG_SUCCESS;
}

/* The host half of a syncing step's finalize: the shape rules of the context's sync, the gradients and their
 * layout. */
static gg_status make_layout(gg_step *s, const char *fn) {
    gg_ctx *ctx = s->ctx;
    const int whole = ctx->dist->config.sync == GG_SYNC_REDUCE_SCATTER;
    for (int i = 0; i < s->n_ops; ++i) {
        const step_op *o = &s->ops[i];
        char where[96];
        snprintf(where, sizeof where, "%s (call %d)", fn, i);
        if (o->kind == OP_BLOCK) GG_TRY(gg_dist_check_shape(ctx, where, &o->call));
        if (o->kind == OP_REDUCE && whole && o->count % (size_t)ctx->dist->size)
            return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                           "%s: count = %zu is not divisible by the %d ranks: reduce-scatter cannot shard it", where,
                           o->count, ctx->dist->size);
        if (o->kind == OP_FINAL && o->final.whole_gradients && whole)
            return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                           "%s: an optimizer needs every gradient whole, and the communicator reduce-scatters "
                           "(gg_dist_config.sync): each rank would update every weight from its shard only",
                           where);
    }
    s->n_grads = list_grads(s, NULL);
    s->grads = calloc((size_t)(s->n_grads ? s->n_grads : 1), sizeof *s->grads);
    if (!s->grads) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    list_grads(s, s->grads);
    if (gg_reduce_layout_make(s->grads, s->n_grads, ctx->dist->config.bucket_bytes, whole, &s->layout) != 0)
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory (the reduction's buckets)", fn);
    return GG_SUCCESS;
}

static void drop_layout(gg_step *s) {
    gg_reduce_layout_free(&s->layout);
    free(s->grads);
    s->grads = NULL;
    s->n_grads = 0;
}

/* Every rank adopts rank 0's GEMM algorithms for the step's plans (each plan once), in agreements of at most
 * GG_DIST_MAX_AGREE_PLANS. made 0: this rank failed to make them (one agreement, so the others fail too). */
static gg_status agree_plans(gg_step *s, const char *fn, int made) {
    gg_ctx *ctx = s->ctx;
    if (!made) return gg_dist_agree_algorithms(ctx, fn, NULL, 0, NULL);
    const size_t cap = (size_t)s->n_blocks * (size_t)s->n_buckets;
    gg_block_plan **plans = malloc(cap * sizeof *plans);
    int n = 0;
    gg_status status = plans ? GG_SUCCESS : gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int b = 0; b < s->n_buckets && status == GG_SUCCESS; ++b)
        for (int i = 0; i < s->n_ops && status == GG_SUCCESS; ++i) {
            if (s->ops[i].kind != OP_BLOCK) continue;
            gg_block_call c = s->ops[i].call;
            c.tokens = s->buckets[b];
            gg_block_plan *plan = NULL;
            status = gg_block_plan_for(ctx, &c, &plan); /* made by make_device_state: a lookup */
            int seen = 0;
            for (int k = 0; k < n && !seen; ++k) seen = plans[k] == plan;
            if (status == GG_SUCCESS && !seen) plans[n++] = plan;
        }
    if (status != GG_SUCCESS) {
        (void)gg_dist_agree_algorithms(ctx, fn, NULL, 0, NULL);
        free(plans);
        return status;
    }
    for (int at = 0; at < n && status == GG_SUCCESS; at += GG_DIST_MAX_AGREE_PLANS)
        status = gg_dist_agree_algorithms(ctx, fn, plans + at,
                                          n - at < GG_DIST_MAX_AGREE_PLANS ? n - at : GG_DIST_MAX_AGREE_PLANS, NULL);
    free(plans);
    return status;
}

/* ---- finalize ---- */

static gg_status make_device_state(gg_step *s) {
    gg_ctx *ctx = s->ctx;
    for (int b = s->n_buckets - 1; b >= 0; --b) /* largest first: the context's arena grows once */
        for (int i = 0; i < s->n_ops; ++i) {
            if (s->ops[i].kind != OP_BLOCK) continue;
            gg_block_call c = s->ops[i].call;
            c.tokens = s->buckets[b];
            gg_block_plan *plan = NULL;
            GG_TRY(gg_block_plan_for(ctx, &c, &plan));
            if (plan->scratch_bytes > s->slot_bytes) s->slot_bytes = plan->scratch_bytes;
        }
    s->slot_bytes = (s->slot_bytes + 255) & ~(size_t)255;
    GG_TRY(gg_ctx_reserve_scratch(ctx, s->slot_bytes)); /* slot 0 */
    if (s->slots > 1) {
        const size_t ring = s->slot_bytes * (size_t)(s->slots - 1);
        if (ring) GG_CUDA_TRY(ctx, cudaMalloc(&s->ring, ring));
        s->own_bytes += ring;
        const size_t words = sizeof(unsigned) * GG_COUNTER_REDUCTION_WORDS * (size_t)(s->slots - 1);
        GG_CUDA_TRY(ctx, cudaMalloc((void **)&s->counters, words));
        GG_CUDA_TRY(ctx, cudaMemset(s->counters, 0, words));
        s->own_bytes += words;
    }
    for (int k = 0; k < s->sides; ++k) {
        /* as the context's side and aux streams: dW at the greatest priority, the bias sums at the least */
        GG_CUDA_TRY(ctx, cudaStreamCreateWithPriority(&s->side[k], cudaStreamNonBlocking, ctx->priority_greatest));
        GG_CUDA_TRY(ctx, cudaStreamCreateWithPriority(&s->aux[k], cudaStreamNonBlocking, ctx->priority_least));
        /* side stream 0 shares the context's workspace; the others own one, stored only once allocated, so that a
         * failed allocation leaves nothing for gg_step_destroy to free that is not the step's */
        void *workspace = ctx->workspace[1];
        if (k > 0 && workspace) {
            GG_CUDA_TRY(ctx, cudaMalloc(&workspace, ctx->config.gemm_workspace_bytes));
            s->own_bytes += ctx->config.gemm_workspace_bytes;
        }
        s->workspace[k] = workspace;
    }
    for (int i = 0; i < s->n_ops; ++i) {
        if (s->ops[i].kind != OP_BLOCK) continue;
        GG_CUDA_TRY(ctx, cudaEventCreateWithFlags(&s->ops[i].ev_join, cudaEventDisableTiming));
        GG_CUDA_TRY(ctx, cudaEventCreateWithFlags(&s->ops[i].ev_aux_join, cudaEventDisableTiming));
    }
    /* for gg_step_run_device: a few bytes, so that its first run allocates nothing but its graph */
    const size_t bucket_bytes = sizeof(int64_t) * (size_t)s->n_buckets;
    GG_CUDA_TRY(ctx, cudaMalloc((void **)&s->device_buckets, bucket_bytes));
    GG_CUDA_TRY(ctx, cudaMemcpy(s->device_buckets, s->buckets, bucket_bytes, cudaMemcpyHostToDevice));
    GG_CUDA_TRY(ctx, cudaMalloc((void **)&s->device_errors, sizeof(unsigned)));
    GG_CUDA_TRY(ctx, cudaMemset(s->device_errors, 0, sizeof(unsigned)));
    s->own_bytes += bucket_bytes + sizeof(unsigned);
    return GG_SUCCESS;
}

/* The pointer-set table: as many sets as the buckets' execs can hold between them (at most 64), each every pointer
 * of every block call. */
static gg_status make_ptrsets(gg_step *s, const char *fn) {
    int capacity = s->config.execs_per_bucket * s->n_buckets;
    if (capacity > 64) capacity = 64;
    const int width = s->n_blocks * GG_BLOCK_MAX_TENSORS;
    s->ptrset_row = calloc((size_t)width, sizeof *s->ptrset_row);
    if (!s->ptrset_row || gg_ptrset_init(&s->ptrsets, capacity, width) != 0)
        return gg_fail(s->ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    s->ptrset = 0;
    return GG_SUCCESS;
}

/* The id of the block calls' pointers as they are now (looked up once after each change). */
static uint64_t pointer_set(gg_step *s) {
    if (s->ptrset) return s->ptrset;
    const void **row = s->ptrset_row;
    for (int i = 0; i < s->n_ops; ++i) {
        if (s->ops[i].kind != OP_BLOCK) continue;
        const gg_block_call *c = &s->ops[i].call;
        for (int t = 0; t < GG_BLOCK_MAX_TENSORS; ++t)
            *row++ = t < c->info->n_tensors && gg_tensor_used(c, t) ? c->t[t] : NULL;
    }
    s->ptrset = gg_ptrset_id(&s->ptrsets, s->ptrset_row);
    return s->ptrset;
}

static gg_status finalize(gg_step *s, const char *fn) {
    if (s->finalized)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the step is finalized already%s", fn,
                       s->finalized < 0 ? " (and failed: destroy it)" : "");
    if (s->n_blocks == 0)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the step has no block call (add one with "
                                                          "gg_step_add_<block>)", fn);
    gg_ctx *ctx = s->ctx;
    const int syncs = s->config.sync_gradients && ctx->dist;
    gg_status status = GG_SUCCESS;
    for (int i = 0; i < s->n_ops && status == GG_SUCCESS; ++i)
        if (s->ops[i].kind == OP_BLOCK) status = check_against_earlier(s, fn, i);
    if (status == GG_SUCCESS) status = check_reduce_entries(s, fn);
    if (status == GG_SUCCESS) status = check_final_last(s, fn);
    if (status == GG_SUCCESS && syncs) status = make_layout(s, fn);
    if (syncs) { /* collective: every rank's checks passed, and the ranks built the same step */
        const gg_status agreed = gg_dist_step_agree(ctx, fn, status == GG_SUCCESS, status == GG_SUCCESS ?
                                                    fingerprint(s) : 0);
        if (status == GG_SUCCESS) status = agreed;
    }
    if (status != GG_SUCCESS) {
        drop_layout(s); /* the step stays open */
        return status;
    }
    /* from here on the device is touched: a failure leaves a step that can only be destroyed */
    s->finalized = -1;
    status = make_ptrsets(s, fn);
    int saved = 0;
    if (status == GG_SUCCESS) status = gg_device_enter(ctx, fn, &saved);
    if (status == GG_SUCCESS) {
        status = make_device_state(s);
        if (syncs) {
            const gg_status agreed = agree_plans(s, fn, status == GG_SUCCESS);
            if (status == GG_SUCCESS) status = agreed;
        }
        gg_device_leave(ctx, saved);
    } else if (syncs) {
        (void)gg_dist_agree_algorithms(ctx, fn, NULL, 0, NULL); /* the other ranks must not wait for this one */
    }
    if (status != GG_SUCCESS) return status;
    s->finalized = 1;
    s->reduces = syncs;
    s->comm = syncs ? ctx->dist->comm : NULL;
    gg_log(ctx, GG_LOG_INFO, "%s: %d calls (%d blocks), %d buckets up to %lld tokens, %d side streams, %d scratch "
                             "slots of %zu MiB", fn, s->n_ops, s->n_blocks, s->n_buckets,
           (long long)max_tokens(s), s->sides, s->slots, s->slot_bytes >> 20);
    if (syncs)
        gg_log(ctx, GG_LOG_INFO, "%s: rank %d of %d reduces %d gradients in %d buckets of at most %zu bytes", fn,
               ctx->dist->rank, ctx->dist->size, s->n_grads, s->layout.n_buckets, ctx->dist->config.bucket_bytes);
    return GG_SUCCESS;
}

gg_status gg_step_finalize(gg_step *s) {
    const char *fn = "gg_step_finalize";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    const gg_status status = finalize(s, fn);
    gg_ctx_release(s->ctx);
    return status;
}

/* ---- capture ---- */

/* The main stream waits for op's deferred branches (once per capture). */
static gg_status join_op(gg_ctx *ctx, step_op *op, cudaStream_t main) {
    if (op->joined) return GG_SUCCESS;
    op->joined = 1;
    if (op->deferred & GG_DEFERRED_SIDE) GG_CUDA_TRY(ctx, cudaStreamWaitEvent(main, op->ev_join, 0));
    if (op->deferred & GG_DEFERRED_AUX) GG_CUDA_TRY(ctx, cudaStreamWaitEvent(main, op->ev_aux_join, 0));
    return GG_SUCCESS;
}

/* Test hooks (step.h): read here, set only by tests/cpu/test_step_ring.c; zero, they change nothing. */
gg_step_test_hooks gg_step_test;

/* Slot slot's (> 0) scratch in the ring; NULL when the step's calls need no scratch (no ring). */
static void *slot_scratch(const gg_step *s, int slot) {
    return s->ring ? (char *)s->ring + s->slot_bytes * (size_t)(slot - 1) : NULL;
}

int gg_step_slot_region(const gg_step *s, int slot, void **scratch, size_t *scratch_bytes, void **counter,
                        size_t *counter_bytes) {
    *scratch = slot > 0 ? slot_scratch(s, slot) : s->ctx->scratch;
    *counter = slot > 0 ? s->counters + (size_t)GG_COUNTER_REDUCTION_WORDS * (size_t)(slot - 1) : s->ctx->counter;
    *scratch_bytes = s->slot_bytes;
    *counter_bytes = sizeof(unsigned) * GG_COUNTER_REDUCTION_WORDS;
    return s->slots;
}

/* What block call `op` runs with: slot block % K, side stream block % S (none: the main stream). */
static gg_exec_res op_res(const gg_step *s, step_op *op, cudaStream_t main) {
    const gg_ctx *ctx = s->ctx;
    gg_exec_res r = gg_exec_res_ctx(ctx, main);
    const int slot = op->block % s->slots;
    if (slot > 0) {
        r.scratch = slot_scratch(s, slot);
        r.counter = s->counters + (size_t)GG_COUNTER_REDUCTION_WORDS * (size_t)(slot - 1);
    }
    const int k = s->sides ? op->block % s->sides : 0;
    r.side = s->sides ? s->side[k] : main;
    r.aux = s->sides ? s->aux[k] : main;
    r.workspace[1] = s->sides ? s->workspace[k] : ctx->workspace[1];
    r.ev_join = op->ev_join;
    r.ev_aux_join = op->ev_aux_join;
    r.defer_join = 1;
    r.deferred = &op->deferred;
    return r;
}

/* Rows tokens .. bucket-1 of the first block call's grad_output (tensor 0 of every block) are zeroed; with
 * device_rows, rows M .. bucket-1 for the M the GPU reads there when the graph runs. */
static gg_status zero_padding(gg_ctx *ctx, const gg_block_call *c, int64_t tokens, const int64_t *device_rows,
                              int64_t bucket, cudaStream_t st) {
    const size_t row = (size_t)gg_extent_value(c, c->info->tensors[0].cols) * c->info->tensors[0].elem_bytes;
    if (device_rows)
        GG_CUDA_TRY(ctx, gg_k_zero_rows(c->t[0], (int64_t)row, device_rows, bucket, ctx->sm_count, st));
    else if (tokens < bucket)
        GG_CUDA_TRY(ctx, cudaMemsetAsync((char *)c->t[0] + row * (size_t)tokens, 0, row * (size_t)(bucket - tokens),
                                         st));
    return GG_SUCCESS;
}

/* The buckets whose last gradient call i produced (*next: the first bucket not launched yet) go to the
 * communication stream, after call i's work on main and its deferred weight-gradient branches. */
/* Bucket b is launched: every gradient it completes (its last piece) goes to the final calls' early hooks, on the
 * communication stream behind the bucket. */
static gg_status gradients_reduced(gg_step *s, int b) {
    const gg_reduce_bucket *k = &s->layout.buckets[b];
    for (int p = k->first; p < k->first + k->n; ++p) {
        const gg_reduce_piece *piece = &s->layout.pieces[p];
        const gg_reduce_grad *g = &s->grads[piece->grad];
        if (piece->offset + piece->count != g->count) continue; /* not its last piece */
        for (int i = 0; i < s->n_ops; ++i)
            if (s->ops[i].kind == OP_FINAL && s->ops[i].final.early)
                GG_TRY(s->ops[i].final.early(s->ops[i].final.user, g->ptr, g->count, g->elem_bytes,
                                             s->ctx->dist->stream));
    }
    return GG_SUCCESS;
}

static gg_status launch_ready(gg_step *s, int i, cudaStream_t main, int *next, int *forked) {
    const step_op *op = &s->ops[i];
    cudaEvent_t events[2];
    int n = 0;
    if (op->kind == OP_BLOCK && (op->deferred & GG_DEFERRED_SIDE)) events[n++] = op->ev_join;
    if (op->kind == OP_BLOCK && (op->deferred & GG_DEFERRED_AUX)) events[n++] = op->ev_aux_join;
    for (; *next < s->layout.n_buckets && s->layout.buckets[*next].ready == i; ++*next) {
        *forked = 1;
        GG_TRY(gg_dist_step_bucket(s->ctx, &s->layout, s->grads, *next, main, events, n));
        GG_TRY(gradients_reduced(s, *next));
    }
    return GG_SUCCESS;
}

/* Enqueues the whole backward at `bucket` rows on main (capturing); the real rows are tokens, or with device_rows
 * the M the GPU reads there; sync: the gradients are reduced across the ranks as they are final. */
static gg_status enqueue_step(gg_step *s, int64_t tokens, const int64_t *device_rows, int64_t bucket, int accumulate,
                              int sync, cudaStream_t main) {
    gg_ctx *ctx = s->ctx;
    gg_status status = GG_SUCCESS;
    int first_block = 1, next_bucket = 0, forked = 0;
    if (sync) list_grads(s, s->grads); /* the pointers as they are now (gg_step_set_args) */
    for (int i = 0; i < s->n_ops; ++i) {
        s->ops[i].deferred = 0, s->ops[i].joined = 0;
        if (s->ops[i].kind == OP_FINAL && s->ops[i].final.begin) s->ops[i].final.begin(s->ops[i].final.user);
    }
    for (int i = 0; i < s->n_ops && status == GG_SUCCESS; ++i) {
        step_op *op = &s->ops[i];
        if (sync && op->kind == OP_REDUCE) status = launch_ready(s, i, main, &next_bucket, &forked);
        if (op->kind == OP_REDUCE) continue; /* final on main here: launched above */
        if (op->kind == OP_FINAL) { /* every earlier gradient final on main first: computed, and reduced */
            for (int e = 0; e < i && status == GG_SUCCESS; ++e)
                if (s->ops[e].kind == OP_BLOCK) status = join_op(ctx, &s->ops[e], main);
            if (status == GG_SUCCESS && forked) status = gg_dist_step_join(ctx, main);
            if (status == GG_SUCCESS) status = op->final.run(op->final.user, main);
            continue;
        }
        if (op->kind == OP_CALLBACK) {
            op->fn(op->user, (gg_stream)main, bucket);
            enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
            const cudaError_t err = cudaStreamIsCapturing(main, &cs);
            if (err != cudaSuccess || cs != cudaStreamCaptureStatusActive)
                status = gg_fail(ctx, GG_ERROR_CUDA,
                                 "gg_step_run: the callback of call %d broke the capture (%s): a callback may only "
                                 "enqueue capturable work on the stream it is handed",
                                 i, err != cudaSuccess ? cudaGetErrorName(err) : "capture invalidated");
            continue;
        }
        gg_block_call c = op->call;
        c.tokens = bucket;
        c.accumulate = accumulate;
        gg_block_plan *plan = NULL;
        status = gg_block_plan_for(ctx, &c, &plan); /* made at finalize: a lookup */
        if (status == GG_SUCCESS && first_block) status = zero_padding(ctx, &c, tokens, device_rows, bucket, main);
        first_block = 0;
        /* the slot's previous user, and every earlier call whose deferred work this one would disturb */
        for (int e = 0; e < i && status == GG_SUCCESS; ++e) {
            step_op *a = &s->ops[e];
            if (a->kind != OP_BLOCK || a->joined || !a->deferred) continue;
            const int slot_wait = a->block == op->block - s->slots && !gg_step_test.skip_slot_wait;
            if (slot_wait || hazard(&a->call, &op->call)) status = join_op(ctx, a, main);
        }
        if (status != GG_SUCCESS) break;
        const gg_exec_res r = op_res(s, op, main);
        c.res = &r;
        if (gg_step_test.before_block) gg_step_test.before_block(op->block);
        nvtxRangePushA(c.info->fn);
        status = c.info->enqueue(ctx, plan, &c, main);
        nvtxRangePop();
        if (status == GG_SUCCESS && sync) status = launch_ready(s, i, main, &next_bucket, &forked);
    }
    if (forked) { /* the communication stream rejoins main, on every path */
        const gg_status joined = gg_dist_step_join(ctx, main);
        if (status == GG_SUCCESS) status = joined;
    }
    /* every forked stream rejoins main, or the capture could not end */
    for (int i = 0; i < s->n_ops; ++i) {
        if (s->ops[i].kind != OP_BLOCK) continue;
        const gg_status joined = join_op(ctx, &s->ops[i], main);
        if (status == GG_SUCCESS) status = joined;
    }
    return status;
}

typedef struct step_body {
    gg_step *s;
    int64_t tokens;
    const int64_t *device_rows;
    int64_t bucket;
    int accumulate, sync;
} step_body;

static gg_status enqueue_step_body(void *user, cudaStream_t stream) {
    const step_body *d = user;
    return enqueue_step(d->s, d->tokens, d->device_rows, d->bucket, d->accumulate, d->sync, stream);
}

/* Captures bucket b's step into *graph (gg_capture: a new graph, or a SWITCH node's body). */
static gg_status capture(gg_step *s, int64_t tokens, const int64_t *device_rows, int b, int accumulate, int sync,
                         cudaGraph_t *graph) {
    step_body d = {s, tokens, device_rows, s->buckets[b], accumulate, sync};
    return gg_capture(s->ctx, enqueue_step_body, &d, graph);
}

typedef struct device_branch {
    gg_step *s;
    const int64_t *device_tokens;
    int accumulate;
} device_branch;

static gg_status capture_branch(void *user, int b, cudaGraph_t body) {
    const device_branch *d = user;
    return capture(d->s, 0, d->device_tokens, b, d->accumulate, 0, &body); /* never syncs: run_device refuses */
}

/* ---- run ---- */

/* What a step's replay builds when its exec is missing: bucket b's step for tokens rows, or with device_tokens (b
 * unused) every bucket behind the device-side selection. */
typedef struct step_build {
    gg_step *s;
    const char *fn;
    const gg_exec_key *key;
    int b;
    int64_t tokens;
    const int64_t *device_tokens;
    int accumulate;
} step_build;

static gg_status build_step_graph(void *user, cudaGraph_t *graph) {
    const step_build *x = user;
    gg_step *s = x->s;
    gg_ctx *ctx = s->ctx;
    /* slot 0 is the context's arena: it holds a slot unless a failed allocation lost it since finalize */
    GG_TRY(gg_ctx_reserve_scratch(ctx, s->slot_bytes));
    gg_status status;
    if (x->device_tokens) {
        device_branch d = {s, x->device_tokens, x->accumulate};
        status = gg_switch_graph_build(ctx, x->device_tokens, s->device_buckets, s->n_buckets, max_tokens(s),
                                       s->device_errors, capture_branch, &d, graph);
    } else {
        status = capture(s, x->tokens, NULL, x->b, x->accumulate, (x->key->flags & KEY_SYNC) != 0, graph);
    }
    if (status == GG_SUCCESS)
        gg_log(ctx, GG_LOG_DEBUG, "%s: captured %s (pointer set %llu, accumulate %d%s)", x->fn,
               x->device_tokens ? "every bucket, device-selected" : "a bucket",
               (unsigned long long)(uintptr_t)x->key->ptr[0], x->accumulate,
               x->key->flags & KEY_PADDED ? ", padded" : "");
    return status;
}

/* Launches the exec of key from cache, capturing it first when it is missing (build_step_graph); a syncing run holds
 * the communicator as a per-block graph's replay does (gg_exec_replay). */
static gg_status replay(gg_step *s, const char *fn, gg_exec_cache *cache, const gg_exec_key *key, int b,
                        int64_t tokens, const int64_t *device_tokens, int accumulate, gg_stream stream) {
    step_build x = {s, fn, key, b, tokens, device_tokens, accumulate};
    return gg_exec_replay(s->ctx, fn, cache, key, (key->flags & KEY_SYNC) != 0, &s->holds_nccl, build_step_graph, &x,
                          (cudaStream_t)stream);
}

/* A syncing run needs the communicator the ranks agreed on at finalize, without an asynchronous error. */
static gg_status check_comm(gg_step *s, const char *fn) {
    gg_ctx *ctx = s->ctx;
    if (!ctx->dist || ctx->dist->comm != s->comm)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: the step reduces gradients, but the communicator it was finalized with is gone (detached "
                       "or aborted): make a new step, or gg_step_set_sync(step, 0) for local gradients",
                       fn);
    return gg_dist_check(ctx); /* an asynchronous NCCL error: aborted, nothing enqueued */
}

/* A run (or a capture again) needs a finalized step. */
static gg_status check_finalized(gg_step *s, const char *fn) {
    if (s->finalized == 1) return GG_SUCCESS;
    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the step is not finalized%s", fn,
                   s->finalized < 0 ? " (gg_step_finalize failed: destroy it)" : " (call gg_step_finalize)");
}

static gg_status step_run(gg_step *s, const char *fn, int64_t tokens, int accumulate, gg_stream stream) {
    gg_ctx *ctx = s->ctx;
    GG_TRY(check_finalized(s, fn));
    if (tokens < 1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: tokens = %lld must be at least 1", fn, (long long)tokens);
    const int b = gg_buckets_select(s->buckets, s->n_buckets, tokens);
    if (b < 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: tokens = %lld exceeds the largest bucket (%lld, config->max_tokens): the buffers hold no "
                       "more rows",
                       fn, (long long)tokens, (long long)max_tokens(s));
    const int padded = tokens != s->buckets[b];
    if (padded && !s->config.allow_padding)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: tokens = %lld is not a bucket (next: %lld) and config->allow_padding is 0", fn,
                       (long long)tokens, (long long)s->buckets[b]);
    const int sync = s->reduces && s->sync_on;
    if (sync) GG_TRY(check_comm(s, fn));
    gg_exec_key key;
    memset(&key, 0, sizeof key);
    key.ptr[0] = (const void *)(uintptr_t)pointer_set(s);
    key.tokens = tokens;
    key.flags = (accumulate ? KEY_ACCUMULATE : 0) | (padded ? KEY_PADDED : 0) | (sync ? KEY_SYNC : 0);
    return replay(s, fn, &s->execs[b], &key, b, tokens, NULL, accumulate != 0, stream);
}

gg_status gg_step_run(gg_step *s, int64_t tokens, int accumulate, gg_stream stream) {
    const char *fn = "gg_step_run";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    const gg_status status = step_run(s, fn, tokens, accumulate, stream);
    gg_ctx_release(s->ctx);
    return status;
}

static gg_status step_run_device(gg_step *s, const char *fn, const int64_t *device_tokens, int accumulate,
                                 gg_stream stream) {
    gg_ctx *ctx = s->ctx;
    GG_TRY(check_finalized(s, fn));
    if (!device_tokens) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: device_tokens is NULL", fn);
    if ((uintptr_t)device_tokens % sizeof(int64_t) != 0)
        return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: device_tokens (%p) is not 8-byte aligned", fn,
                       (const void *)device_tokens);
    GG_TRY(gg_check_device_buffer(ctx, fn, "device_tokens", device_tokens, sizeof *device_tokens));
    if (s->reduces && s->sync_on)
        return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                       "%s: the step reduces gradients across ranks, and NCCL cannot run inside the conditional node "
                       "that selects the bucket: use gg_step_run, or gg_step_set_sync(step, 0) and reduce after the "
                       "run (gg_dist_reduce)",
                       fn);
    gg_exec_key key;
    memset(&key, 0, sizeof key);
    key.ptr[0] = (const void *)(uintptr_t)pointer_set(s);
    key.ptr[1] = device_tokens;
    key.flags = KEY_DEVICE | (accumulate ? KEY_ACCUMULATE : 0);
    return replay(s, fn, &s->device_execs, &key, -1, 0, device_tokens, accumulate != 0, stream);
}

gg_status gg_step_run_device(gg_step *s, const int64_t *device_tokens, int accumulate, gg_stream stream) {
    const char *fn = "gg_step_run_device";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    const gg_status status = step_run_device(s, fn, device_tokens, accumulate, stream);
    gg_ctx_release(s->ctx);
    return status;
}

/* ---- what a replay runs, for gg_step_debug_dot ---- */

/* Bucket b's graph (b = -1: the device-selected one) captured again as its most recent run captured it (its tokens,
 * accumulate and sync, the device buffer of M), with the calls' current arguments: build_step_graph, as a replay
 * would, without instantiating or launching. A syncing capture issues NCCL calls, inside the communicator's section
 * as a replay's are. */
static gg_status capture_again(void *step, const char *fn, int b, cudaGraph_t *out) {
    gg_step *s = step;
    *out = NULL;
    const gg_exec_entry *last = gg_exec_cache_latest(b < 0 ? &s->device_execs : &s->execs[b]);
    if (!last)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: bucket = %d has not run yet (its graph is captured by its first run)", fn, b);
    const gg_exec_key *key = &last->key;
    const int sync = (key->flags & KEY_SYNC) != 0;
    if (sync) {
        GG_TRY(check_comm(s, fn));
        GG_TRY(gg_dist_enter(s->ctx, fn));
    }
    const step_build x = {s, fn, key, b, key->tokens, b < 0 ? (const int64_t *)key->ptr[1] : NULL,
                          (key->flags & KEY_ACCUMULATE) != 0};
    const gg_status status = build_step_graph((void *)&x, out);
    if (sync) gg_dist_leave(s->ctx);
    return status;
}

gg_status gg_step_debug_dot(gg_step *s, int bucket, const char *path, int verbose) {
    static const char fn[] = "gg_step_debug_dot";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    gg_status status = check_finalized(s, fn);
    if (status == GG_SUCCESS)
        status = gg_debug_dot(s->ctx, fn, s->n_buckets, 1, capture_again, s, bucket, path, verbose);
    gg_ctx_release(s->ctx);
    return status;
}

gg_status gg_step_device_errors(gg_step *s, unsigned *count) {
    const char *fn = "gg_step_device_errors";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    if (!count) return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: count is NULL", fn);
    *count = 0;
    if (!s->device_errors) return GG_SUCCESS; /* not finalized: nothing ran */
    int saved = 0;
    GG_TRY(gg_device_enter(s->ctx, fn, &saved));
    const cudaError_t err = cudaMemcpy(count, s->device_errors, sizeof *count, cudaMemcpyDeviceToHost);
    /* failed while the call still holds the context: the message names it */
    const gg_status status = err == cudaSuccess ? GG_SUCCESS : gg_fail_cuda(s->ctx, err, "cudaMemcpy(device_errors)");
    gg_device_leave(s->ctx, saved);
    return status;
}

static gg_status set_args(gg_step *s, const char *fn, int index, const void *args) {
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
    /* the chain's rules against every other call */
    for (int i = 0; i <= s->n_ops; ++i) {
        if (i < s->n_ops && s->ops[i].kind != OP_BLOCK) continue;
        const gg_status st = i < s->n_ops ? check_against_earlier(s, fn, i) : check_reduce_entries(s, fn);
        if (st != GG_SUCCESS) {
            op->call = old;
            return st;
        }
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

gg_status gg_step_memory_info(const gg_step *s, gg_step_memory *out) {
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_step_memory_info: step is NULL");
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
