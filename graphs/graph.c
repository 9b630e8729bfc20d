/*
 * graph.c - plan -> capture -> replay of a block's backward per shape bucket.
 *
 *   create:  every bucket's plan (cuBLASLt algorithms, the shared scratch arena), staging for padding
 *   run:     pick the bucket; find the executable graph for this pointer set, or capture the eager path on the
 *            context's capture stream (ThreadLocal mode; the side stream joins through the fork/join events) and
 *            update the least recently used exec in place, or instantiate; then one cudaGraphLaunch (exec.c's
 *            gg_exec_replay, which step graphs share).
 *   device:  one graph: a selection kernel sets a SWITCH node's condition from M in device memory (exec.c's
 *            gg_switch_graph_build); each branch is a bucket's padded body, captured into the conditional node's body
 *            graph.
 */
#include "graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"
#include "kernels/gg_kernels.h"

_Static_assert(GG_EXEC_KEY_PTRS >= GG_BLOCK_MAX_TENSORS, "an exec's key holds every tensor of a call");

enum { KEY_ACCUMULATE = 1, KEY_SILU = 2, KEY_PADDED = 4, KEY_DEVICE = 8, KEY_SYNC = 16 };

/* "gg_mlp_graph_run" from "gg_mlp_backward" and "run". */
static const char *graph_fn(char *buf, size_t bytes, const gg_block_info *info, const char *verb) {
    const size_t len = strlen(info->fn) - strlen("_backward");
    snprintf(buf, bytes, "%.*s_graph_%s", (int)len, info->fn, verb);
    return buf;
}

/* Whether a graph of this shape stages tensor i when it pads (an [M, ...] tensor some call may read or write). */
static int is_staged(const gg_block_call *c, int i) {
    return c->info->tensors[i].rows == GG_EXT_TOKENS && gg_tensor_may_be_read(c, i);
}

static size_t row_bytes(const gg_block_call *c, int i) {
    const gg_tensor_spec *s = &c->info->tensors[i];
    return (size_t)gg_extent_value(c, s->cols) * s->elem_bytes;
}

/* ---- life cycle ---- */

void gg_graph_destroy(gg_graph *g) {
    if (!g) return;
    gg_ctx *ctx = g->ctx;
    if (gg_ctx_claim_teardown(ctx, "gg_graph_destroy") != GG_SUCCESS) return; /* as gg_ctx_destroy: nothing destroyed */
    int saved = 0;
    const int entered = gg_device_enter(g->ctx, "gg_graph_destroy", &saved) == GG_SUCCESS;
    (void)cudaDeviceSynchronize(); /* replays of these graphs may still be running */
    for (int b = 0; b < GG_MAX_BUCKETS; ++b) gg_exec_destroy_all(&g->execs[b]);
    gg_exec_destroy_all(&g->device_execs);
    if (g->staging) (void)cudaFree(g->staging);
    if (g->device_buckets) (void)cudaFree(g->device_buckets);
    if (g->device_errors) (void)cudaFree(g->device_errors);
    gg_clear_own_cuda_error(ctx);
    if (g->has_nccl) gg_dist_graph_released(g->ctx);
    gg_ctx_hook_remove(g->ctx, &g->hook);
    if (entered) gg_device_leave(g->ctx, saved);
    free(g);
    gg_ctx_release(ctx);
}

static void destroy_hook(void *g) { gg_graph_destroy(g); }

/* The call of bucket `tokens` with the data-parallel part of its plan key as the context's communicator says now. */
static gg_block_call bucket_call(const gg_graph *g, int64_t tokens) {
    gg_block_call c = g->shape;
    c.tokens = tokens;
    gg_dist_hand_down(g->ctx, &c);
    return c;
}

/* The local part of making a graph (device entered): its exec caches, every bucket's plan (into plans), staging and
 * device-side selection buffers. */
static gg_status prepare(gg_graph *g, const char *fn, gg_block_plan **plans) {
    gg_ctx *ctx = g->ctx;
    const gg_graph_config *config = &g->config;
    for (int b = 0; b < g->n_buckets; ++b)
        if (gg_exec_cache_init(&g->execs[b], config->execs_per_bucket) != 0)
            return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (gg_exec_cache_init(&g->device_execs, config->execs_per_bucket) != 0)
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    /* largest bucket first: the scratch arena grows (moves) once, not once per bucket */
    for (int b = g->n_buckets - 1; b >= 0; --b) {
        const gg_block_call bucket = bucket_call(g, g->buckets[b]);
        GG_TRY(gg_block_plan_for(ctx, &bucket, &plans[b]));
    }
    if (config->allow_padding || config->device_select) {
        for (int i = 0; i < g->shape.info->n_tensors; ++i) {
            if (!is_staged(&g->shape, i)) continue;
            const size_t bytes = gg_tensor_bytes(&g->shape, i); /* < 2^63: gg_block_validate_shape */
            g->staging_offset[i] = (g->staging_bytes + 255) & ~(size_t)255;
            if (g->staging_bytes > SIZE_MAX - 255 || bytes > SIZE_MAX - g->staging_offset[i])
                return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                               "%s: the staging of the largest bucket (M = %lld) would take more than 2^64 bytes", fn,
                               (long long)g->shape.tokens);
            g->staging_bytes = g->staging_offset[i] + bytes;
        }
        GG_CUDA_TRY(ctx, cudaMalloc(&g->staging, g->staging_bytes));
    }
    if (config->device_select) {
        GG_CUDA_TRY(ctx, cudaMalloc((void **)&g->device_buckets, sizeof(int64_t) * (size_t)g->n_buckets));
        GG_CUDA_TRY(ctx, cudaMemcpy(g->device_buckets, g->buckets, sizeof(int64_t) * (size_t)g->n_buckets,
                                    cudaMemcpyHostToDevice));
        GG_CUDA_TRY(ctx, cudaMalloc((void **)&g->device_errors, sizeof(unsigned)));
        GG_CUDA_TRY(ctx, cudaMemset(g->device_errors, 0, sizeof(unsigned)));
    }
    return GG_SUCCESS;
}

/* What every rank must have made alike for this graph's collectives to match (ddp.h): compared at creation. */
static gg_dist_fingerprint fingerprint(const gg_graph *g) {
    gg_dist_fingerprint fp = {{0}};
    fp.field[GG_FP_BLOCK] = g->shape.info->kind;
    fp.field[GG_FP_DIM0] = g->shape.dim0;
    fp.field[GG_FP_DIM1] = g->shape.dim1;
    fp.field[GG_FP_PRECISION] = g->shape.precision;
    fp.field[GG_FP_N_BUCKETS] = g->n_buckets;
    fp.field[GG_FP_MAX_TOKENS] = g->buckets[g->n_buckets - 1];
    fp.field[GG_FP_BUCKETS] = gg_dist_hash_field(
        gg_dist_hash(GG_DIST_HASH_SEED, g->buckets, sizeof g->buckets[0] * (size_t)g->n_buckets));
    fp.field[GG_FP_GRAPH_FLAGS] = (g->config.allow_padding != 0) | (g->config.device_select != 0) << 1 |
                                  (g->config.eager_beyond_max != 0) << 2;
    return fp;
}

/* Makes the graph; *agreed says whether this rank took part in a syncing graph's agreement (gg_dist_agree_algorithms),
 * which happens only once the plans are made. */
static gg_status create(gg_ctx *ctx, const char *fn, const gg_block_info *info, const void *desc,
                        const gg_graph_config *config, gg_graph **out, int *agreed) {
    if (!out) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    GG_TRY(gg_check_desc(ctx, fn, desc));
    if (config->execs_per_bucket < 1 || config->execs_per_bucket > 64)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->execs_per_bucket = %d is not in [1, 64]", fn,
                       config->execs_per_bucket);
    gg_graph *g = calloc(1, sizeof *g);
    if (!g) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    g->ctx = ctx;
    g->config = *config;
    gg_block_pack(&g->shape, info, desc, NULL);
    char err[256];
    g->n_buckets = gg_buckets_make(config, g->buckets, err, sizeof err);
    if (g->n_buckets < 0) {
        free(g);
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s", fn, err);
    }
    g->shape.tokens = g->buckets[g->n_buckets - 1];
    g->syncs = config->sync_gradients && ctx->dist != NULL;
    g->shape.sync_grads = g->syncs; /* the plans (their SM reserve for NCCL) are those of syncing calls */
    gg_status status = gg_block_validate_shape(ctx, fn, &g->shape, gg_block_requested_precision(info, desc));
    if (status == GG_SUCCESS && g->syncs) status = gg_dist_check_shape(ctx, fn, &g->shape);
    if (status != GG_SUCCESS) {
        free(g);
        return status;
    }
    /* linked first, so that gg_graph_destroy can undo a half-made graph */
    g->hook = (gg_ctx_hook){.destroy = destroy_hook, .obj = g};
    gg_ctx_hook_add(ctx, &g->hook, GG_HOOK_EARLY);
    int saved = 0;
    status = gg_device_enter(ctx, fn, &saved);
    if (status != GG_SUCCESS) {
        gg_graph_destroy(g);
        return status;
    }
    gg_block_plan *plans[GG_MAX_BUCKETS];
    _Static_assert(GG_MAX_BUCKETS <= GG_DIST_MAX_AGREE_PLANS, "gg_dist_agree_algorithms takes every bucket's plan");
    status = prepare(g, fn, plans);
    if (status == GG_SUCCESS && g->syncs) {
        gg_dist_fingerprint fp = fingerprint(g);
        *agreed = 1;
        status = gg_dist_agree_algorithms(ctx, fn, plans, g->n_buckets, &fp);
    }
    gg_device_leave(g->ctx, saved);
    if (status != GG_SUCCESS) {
        gg_graph_destroy(g);
        return status;
    }
    gg_log(ctx, GG_LOG_INFO, "%s: %d buckets from %lld to %lld tokens, %zu MiB staging", fn, g->n_buckets,
           (long long)g->buckets[0], (long long)g->buckets[g->n_buckets - 1], g->staging_bytes >> 20);
    *out = g;
    return GG_SUCCESS;
}

/* A syncing graph's creation ends with a collective step on every rank, so that one rank's failure ends the call
 * everywhere (GG_ERROR_PEER on the others) instead of leaving the others waiting for it to the peer deadline: a rank
 * whose well-formed call failed before that step (host memory, the device, its plans) still takes part, as a
 * failure. A refused call does not: it enqueues nothing, and may not be the collective call the other ranks make
 * (its vote would pair with another collective of theirs). The call keeps its own status and message. */
static gg_status fail_everywhere(gg_ctx *ctx, const char *fn, gg_status status) {
    int saved = 0;
    const int entered = gg_device_enter(ctx, fn, &saved) == GG_SUCCESS; /* else on the caller's device */
    (void)gg_dist_agree_algorithms(ctx, fn, NULL, 0, NULL); /* keeps this call's message */
    if (entered) gg_device_leave(ctx, saved);
    return status;
}

/* ---- capture ---- */

/* Enqueues one bucket's body on `stream`, which is capturing: staging in, the block, staging out. With stage,
 * the [M, ...] tensors are the graph's staging buffers; M comes from device_rows if given, else call->tokens. */
static gg_status enqueue_body(gg_graph *g, const gg_block_call *call, const gg_block_plan *plan, int64_t bucket,
                              int stage, const int64_t *device_rows, cudaStream_t stream) {
    gg_ctx *ctx = g->ctx;
    gg_block_call body = *call;
    body.tokens = bucket;
    const int64_t rows = device_rows ? bucket : call->tokens; /* host M, or the grid bound for device M */
    if (stage) {
        for (int i = 0; i < call->info->n_tensors; ++i) {
            if (!is_staged(call, i) || !gg_tensor_read(call, i)) continue;
            body.t[i] = (char *)g->staging + g->staging_offset[i];
            if (!call->info->tensors[i].is_output)
                GG_CUDA_TRY(ctx, gg_k_stage(body.t[i], call->t[i], (int64_t)row_bytes(call, i), device_rows, rows,
                                            bucket, ctx->sm_count, stream));
        }
    }
    const gg_status enqueued = call->info->enqueue(ctx, plan, &body, stream);
    /* Once the block has run, the communication stream may be part of the capture: from here on it rejoins the
     * caller's stream on every path, or the capture could not end cleanly. */
    if (enqueued != GG_SUCCESS) return (void)gg_dist_join(ctx, &body, stream), enqueued;
    cudaError_t staged = cudaSuccess;
    if (stage)
        for (int i = 0; i < call->info->n_tensors && staged == cudaSuccess; ++i)
            if (is_staged(call, i) && gg_tensor_read(call, i) && call->info->tensors[i].is_output)
                staged = gg_k_stage(call->t[i], body.t[i], (int64_t)row_bytes(call, i), device_rows, rows, 0,
                                    ctx->sm_count, stream);
    if (staged != cudaSuccess) return (void)gg_dist_join(ctx, &body, stream), gg_fail_cuda(ctx, staged, "staging out");
    /* A syncing graph's reductions (issued by the block as its gradients finish, or here with overlap off) join the
     * caller's stream last, so the staged-out activation gradients overlap their tail. Parameter gradients are
     * never staged. (Eager calls sync only past a syncing graph's largest bucket: run_eager_beyond_max.) */
    return gg_dist_finish(ctx, &body, stream);
}

static gg_status bucket_plan(gg_graph *g, int64_t bucket, gg_block_plan **plan) {
    const gg_block_call c = bucket_call(g, bucket);
    return gg_block_plan_for(g->ctx, &c, plan); /* built at create: a lookup */
}

typedef struct bucket_body {
    gg_graph *g;
    const gg_block_call *call;
    const gg_block_plan *plan;
    int64_t bucket;
    int stage;
    const int64_t *device_rows;
} bucket_body;

static gg_status enqueue_bucket_body(void *user, cudaStream_t stream) {
    const bucket_body *d = user;
    return enqueue_body(d->g, d->call, d->plan, d->bucket, d->stage, d->device_rows, stream);
}

/* Captures bucket b's backward into *graph (gg_capture), its plan made first: planning never happens inside a
 * capture. */
static gg_status capture(gg_graph *g, const gg_block_call *call, int b, int stage, const int64_t *device_rows,
                         cudaGraph_t *graph) {
    gg_block_plan *plan;
    GG_TRY(bucket_plan(g, g->buckets[b], &plan));
    bucket_body d = {g, call, plan, g->buckets[b], stage, device_rows};
    return gg_capture(g->ctx, enqueue_bucket_body, &d, graph);
}

static gg_exec_key make_key(const gg_block_call *c, int flags) {
    gg_exec_key key;
    memset(&key, 0, sizeof key);
    for (int i = 0; i < c->info->n_tensors; ++i) key.ptr[i] = gg_tensor_read(c, i) ? c->t[i] : NULL;
    key.tokens = c->tokens;
    key.flags = flags | (c->accumulate ? KEY_ACCUMULATE : 0) | (c->use_silu_gate ? KEY_SILU : 0) |
                (c->sync_grads ? KEY_SYNC : 0);
    return key;
}

/* The call must match the graph's dims and precision; then the usual argument checks. */
static gg_status check_run(gg_graph *g, const char *fn, gg_block_call *call, gg_precision requested) {
    gg_ctx *ctx = g->ctx;
    GG_TRY(gg_block_validate(ctx, fn, call, requested));
    if (g->syncs) {
        if (!ctx->dist)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: the graph syncs gradients but its context's communicator was detached", fn);
        GG_TRY(gg_dist_poll(ctx, fn)); /* aborted, or an asynchronous NCCL error (aborted now): never waited on */
        GG_TRY(gg_dist_check_shape(ctx, fn, &g->shape)); /* a communicator attached since may shard differently */
    }
    call->sync_grads = g->shape.sync_grads;
    gg_dist_hand_down(ctx, call);
    if (call->dim0 != g->shape.dim0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %lld, but the graph was created for %lld", fn,
                       call->info->dim0_name, (long long)call->dim0, (long long)g->shape.dim0);
    if (call->info->dim1_name && call->dim1 != g->shape.dim1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s = %lld, but the graph was created for %lld", fn,
                       call->info->dim1_name, (long long)call->dim1, (long long)g->shape.dim1);
    if (call->precision != g->shape.precision)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: desc->precision = %s, but the graph was created for %s",
                       fn, gg_precision_string(call->precision), gg_precision_string(g->shape.precision));
    return GG_SUCCESS;
}

static gg_status build_device_graph(gg_graph *g, const gg_block_call *call, const int64_t *device_tokens,
                                    cudaGraph_t *out);

/* What a per-block graph's replay builds when its exec is missing: bucket b's body (host-selected; stage: padded),
 * or, with device_rows, every bucket behind a device-side selection. */
typedef struct block_build {
    gg_graph *g;
    const gg_block_call *call;
    int b, stage;
    const int64_t *device_rows;
} block_build;

static gg_status build_block_graph(void *user, cudaGraph_t *graph) {
    const block_build *x = user;
    return x->device_rows ? build_device_graph(x->g, x->call, x->device_rows, graph)
                          : capture(x->g, x->call, x->b, x->stage, NULL, graph);
}

/* Replays the executable graph of `key` from `cache`, making it first when it is missing (build_block_graph). */
static gg_status replay(gg_graph *g, const char *fn, gg_exec_cache *cache, const gg_exec_key *key,
                        const gg_block_call *call, int b, int stage, const int64_t *device_rows, cudaStream_t stream) {
    block_build x = {g, call, b, stage, device_rows};
    return gg_exec_replay(g->ctx, fn, cache, key, call->sync_grads, &g->has_nccl, build_block_graph, &x, stream);
}

/* Past the largest bucket with eager_beyond_max: the eager path, and for a syncing graph the end a replay has too:
 * what overlap off deferred is reduced, and the caller's stream waits for the communication stream. */
static gg_status run_eager_beyond_max(gg_ctx *ctx, const char *fn, const gg_block_call *call, cudaStream_t stream) {
    if (!call->sync_grads) return gg_block_run_eager(ctx, call, stream);
    /* The plan first, outside the communicator's lock: a new one may free the scratch arena or time GEMMs, which waits
     * for the device, and a replay stuck on a dead peer would keep it waiting while the watchdog and gg_dist_abort,
     * which take the lock to abort that replay, waited for it: nothing would ever end. */
    const gg_status planned = gg_block_plan_ahead(ctx, call, stream);
    if (planned != GG_SUCCESS) return gg_dist_settle(ctx, planned, &stream); /* the others' calls wait for this one */
    GG_TRY(gg_dist_enter(ctx, fn)); /* as a replay: the communicator is not aborted under the enqueue */
    int watched = 0; /* and watched as one */
    gg_status ran = gg_dist_await_replay_slot(ctx, fn, stream, &watched);
    if (ran != GG_SUCCESS) {
        gg_dist_leave(ctx);
        return ran;
    }
    ctx->defer_fork_wait = 1; /* a failed enqueue's wait comes after the lock: see below */
    ran = gg_block_run_eager(ctx, call, stream);
    ctx->defer_fork_wait = 0;
    int saved = 0;
    gg_status ended = gg_device_enter(ctx, fn, &saved);
    if (ended == GG_SUCCESS) {
        ended = ran == GG_SUCCESS ? gg_dist_finish(ctx, call, stream) : gg_dist_join(ctx, call, stream);
        if (ran == GG_SUCCESS && ended == GG_SUCCESS && watched) gg_dist_watch(ctx, stream, GG_WATCH_BEYOND_MAX);
        gg_device_leave(ctx, saved);
    }
    const gg_status status = gg_dist_settle(ctx, ran == GG_SUCCESS ? ended : ran, &stream);
    gg_dist_leave(ctx);
    /* The forked work of a failed enqueue may wait behind a replay stuck on a dead peer: waited for under the lock,
     * the watchdog and gg_dist_abort, which take it to abort that replay, would wait too, and nothing would end. */
    if (ran == GG_ERROR_PARTIAL) gg_block_wait_forked(ctx); /* only a failed enqueue says PARTIAL */
    return status;
}

static gg_status run(gg_graph *g, const char *fn, gg_block_call *call, gg_precision requested,
                     cudaStream_t stream) {
    gg_ctx *ctx = g->ctx;
    GG_TRY(check_run(g, fn, call, requested));
    GG_TRY(gg_refuse_in_step_callback(ctx, fn)); /* its eager path past the buckets too */
    const int b = gg_buckets_select(g->buckets, g->n_buckets, call->tokens);
    if (b < 0) {
        if (g->config.eager_beyond_max) return run_eager_beyond_max(ctx, fn, call, stream);
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: desc->tokens = %lld exceeds the largest bucket (%lld); raise config->max_tokens or set "
                       "config->eager_beyond_max",
                       fn, (long long)call->tokens, (long long)g->buckets[g->n_buckets - 1]);
    }
    const int padded = call->tokens != g->buckets[b];
    if (padded && !g->config.allow_padding)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: desc->tokens = %lld is not a bucket (next: %lld) and config->allow_padding is 0", fn,
                       (long long)call->tokens, (long long)g->buckets[b]);
    const gg_exec_key key = make_key(call, padded ? KEY_PADDED : 0);
    return replay(g, fn, &g->execs[b], &key, call, b, padded, NULL, stream);
}

/* ---- device-side bucket selection ---- */

typedef struct device_branch {
    gg_graph *g;
    const gg_block_call *call;
    const int64_t *device_tokens;
} device_branch;

/* Branch b: bucket b's padded backward, M read from device_tokens. */
static gg_status capture_branch(void *user, int b, cudaGraph_t body) {
    const device_branch *d = user;
    return capture(d->g, d->call, b, 1, d->device_tokens, &body);
}

static gg_status build_device_graph(gg_graph *g, const gg_block_call *call, const int64_t *device_tokens,
                                    cudaGraph_t *out) {
    device_branch d = {g, call, device_tokens};
    return gg_switch_graph_build(g->ctx, device_tokens, g->device_buckets, g->n_buckets, call->tokens,
                                 g->device_errors, capture_branch, &d, out);
}

static gg_status run_device(gg_graph *g, const char *fn, gg_block_call *call, gg_precision requested,
                            const int64_t *device_tokens, cudaStream_t stream) {
    gg_ctx *ctx = g->ctx;
    if (!g->config.device_select)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: the graph was created with config->device_select = 0; set it to 1 to run on the device",
                       fn);
    if (!device_tokens) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: device_tokens is NULL", fn);
    if ((uintptr_t)device_tokens % sizeof(int64_t) != 0)
        return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: device_tokens (%p) is not 8-byte aligned", fn,
                       (const void *)device_tokens);
    GG_TRY(gg_check_device_buffer(ctx, fn, "device_tokens", device_tokens, sizeof *device_tokens));
    GG_TRY(check_run(g, fn, call, requested)); /* desc->tokens is the capacity */
    const int written = gg_block_output_overlapping(call, device_tokens, sizeof *device_tokens);
    if (written >= 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: device_tokens (%p) lies in output args->%s: the graph would change M while it runs", fn,
                       (const void *)device_tokens, call->info->tensors[written].name);
    gg_exec_key key = make_key(call, KEY_DEVICE);
    key.device_tokens = device_tokens;
    return replay(g, fn, &g->device_execs, &key, call, -1, 1, device_tokens, stream);
}

/* ---- what a replay runs, for gg_graph_debug_dot ---- */

gg_status gg_graph_capture_again(gg_graph *g, const char *fn, int b, cudaGraph_t *out) {
    *out = NULL;
    const gg_exec_entry *last = gg_exec_cache_latest(b < 0 ? &g->device_execs : &g->execs[b]);
    if (!last)
        return gg_fail(g->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: bucket = %d has not run yet (its graph is captured by its first run)", fn, b);
    /* The call that made that graph, from its key (make_key): the graph's shape, the pointers, M and the flags. */
    gg_block_call call = g->shape;
    call.tokens = last->key.tokens;
    for (int i = 0; i < call.info->n_tensors; ++i) call.t[i] = (void *)last->key.ptr[i];
    call.accumulate = (last->key.flags & KEY_ACCUMULATE) != 0;
    call.use_silu_gate = (last->key.flags & KEY_SILU) != 0;
    call.sync_grads = (last->key.flags & KEY_SYNC) != 0;
    gg_dist_hand_down(g->ctx, &call); /* as check_run does */
    if (call.sync_grads) { /* the capture issues NCCL calls: as a replay, inside the communicator's section */
        if (!g->ctx->dist)
            return gg_fail(g->ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: the graph syncs gradients but its context's communicator was detached", fn);
        GG_TRY(gg_dist_enter(g->ctx, fn));
    }
    const gg_status status =
        b < 0 ? build_device_graph(g, &call, (const int64_t *)last->key.device_tokens, out)
              : capture(g, &call, b, (last->key.flags & KEY_PADDED) != 0, NULL, out);
    if (call.sync_grads) gg_dist_leave(g->ctx);
    return status;
}

/* ---- entry points ---- */

/* desc and args non-NULL, and the graph made for this block. */
static gg_status check_graph_call(gg_graph *g, const gg_block_info *info, const char *fn, const void *desc,
                                  const void *args) {
    GG_TRY(gg_check_call(g->ctx, fn, desc, args));
    if (g->shape.info != info)
        return gg_fail(g->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the graph was made by %.*s_graph_create", fn,
                       (int)(strlen(g->shape.info->fn) - strlen("_backward")), g->shape.info->fn);
    return GG_SUCCESS;
}

static gg_status graph_create(gg_ctx *ctx, const gg_block_info *info, const char *fn, const void *desc,
                              const gg_graph_config *config, gg_graph **out) {
    const gg_graph_config defaults = GG_GRAPH_CONFIG_INIT;
    if (!config) config = &defaults;
    /* a config of another version: its fields, sync_gradients among them, cannot be read */
    GG_TRY(gg_check_config_version(ctx, fn, config->struct_size, sizeof(gg_graph_config), config->version,
                                   GG_GRAPH_CONFIG_VERSION, "GG_GRAPH_CONFIG_INIT"));
    int agreed = 0;
    const gg_status status = create(ctx, fn, info, desc, config, out, &agreed);
    if (status == GG_SUCCESS || agreed || gg_status_is_refusal(status) || !config->sync_gradients || !ctx->dist)
        return status;
    return fail_everywhere(ctx, fn, status);
}

gg_status gg_block_graph_create(gg_ctx *ctx, const gg_block_info *info, const void *desc,
                                const gg_graph_config *config, gg_graph **out) {
    char fn[64];
    graph_fn(fn, sizeof fn, info, "create");
    if (out) *out = NULL;
    if (!ctx) return gg_check_desc(ctx, fn, desc);
    GG_TRY(gg_refuse_in_step_callback(ctx, fn));
    GG_TRY(gg_ctx_claim(ctx, fn)); /* the whole call is this thread's */
    const gg_status status = graph_create(ctx, info, fn, desc, config, out);
    gg_ctx_release(ctx);
    return status;
}

/* A graph call (run, or run on the device: device_tokens non-NULL or required) with the context claimed. */
static gg_status graph_call(gg_graph *g, const gg_block_info *info, const char *fn, const void *desc,
                            const int64_t *device_tokens, int on_device, const void *args, cudaStream_t stream) {
    GG_TRY(check_graph_call(g, info, fn, desc, args));
    gg_block_call call;
    gg_block_pack(&call, info, desc, args);
    const gg_precision requested = gg_block_requested_precision(info, desc);
    if (on_device) return run_device(g, fn, &call, requested, device_tokens, stream);
    return run(g, fn, &call, requested, stream);
}

static gg_status claimed_graph_call(gg_graph *g, const gg_block_info *info, const char *verb, const void *desc,
                                    const int64_t *device_tokens, int on_device, const void *args,
                                    cudaStream_t stream) {
    char fn[64];
    graph_fn(fn, sizeof fn, info, verb);
    if (!g) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    GG_TRY(gg_ctx_claim(g->ctx, fn));
    const gg_status status = graph_call(g, info, fn, desc, device_tokens, on_device, args, stream);
    gg_ctx_release(g->ctx);
    return status;
}

gg_status gg_block_graph_run(gg_graph *g, const gg_block_info *info, const void *desc, const void *args,
                             cudaStream_t stream) {
    return claimed_graph_call(g, info, "run", desc, NULL, 0, args, stream);
}

gg_status gg_block_graph_run_device(gg_graph *g, const gg_block_info *info, const void *desc,
                                    const int64_t *device_tokens, const void *args, cudaStream_t stream) {
    return claimed_graph_call(g, info, "run_device", desc, device_tokens, 1, args, stream);
}

/* ---- queries ---- */

int gg_graph_bucket_count(const gg_graph *g) { return g ? g->n_buckets : 0; }

int64_t gg_graph_bucket_tokens(const gg_graph *g, int i) {
    return g && i >= 0 && i < g->n_buckets ? g->buckets[i] : 0;
}

static void add_execs(const gg_exec_cache *cache, gg_graph_memory *m) {
    for (int i = 0; i < cache->capacity; ++i)
        if (cache->entries[i].exec) {
            m->execs++;
            m->exec_bytes += cache->entries[i].bytes;
        }
}

static gg_status graph_memory_info(const gg_graph *g, int bucket, gg_graph_memory *out) {
    if (!out) return gg_fail(g->ctx, GG_ERROR_INVALID_ARGUMENT, "gg_graph_memory_info: out is NULL");
    if (bucket < -1 || bucket >= g->n_buckets)
        return gg_fail(g->ctx, GG_ERROR_INVALID_ARGUMENT, "gg_graph_memory_info: bucket = %d is not in [-1, %d)",
                       bucket, g->n_buckets);
    memset(out, 0, sizeof *out);
    out->buckets = bucket < 0 ? g->n_buckets : 1;
    for (int b = 0; b < g->n_buckets; ++b) {
        if (bucket >= 0 && b != bucket) continue;
        add_execs(&g->execs[b], out);
        const gg_block_call c = bucket_call(g, g->buckets[b]);
        const gg_plan_key key = gg_block_plan_key(&c);
        const gg_block_plan *plan = gg_plan_cache_find(&g->ctx->plans, &key);
        if (plan && plan->scratch_bytes > out->scratch_bytes) out->scratch_bytes = plan->scratch_bytes;
    }
    if (bucket < 0) {
        add_execs(&g->device_execs, out);
        out->staging_bytes = g->staging_bytes;
    }
    out->total_bytes = out->exec_bytes + out->staging_bytes;
    return GG_SUCCESS;
}

/* A query claims the context as every call does: another thread inside it (changing the exec caches) is refused. */
gg_status gg_graph_memory_info(const gg_graph *g, int bucket, gg_graph_memory *out) {
    if (!g) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_graph_memory_info: graph is NULL");
    GG_TRY(gg_ctx_claim(g->ctx, "gg_graph_memory_info"));
    const gg_status status = graph_memory_info(g, bucket, out);
    gg_ctx_release(g->ctx);
    return status;
}

gg_status gg_graph_device_errors(gg_graph *g, unsigned *count) {
    if (!g) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_graph_device_errors: graph is NULL");
    if (!count) return gg_fail(g->ctx, GG_ERROR_INVALID_ARGUMENT, "gg_graph_device_errors: count is NULL");
    GG_TRY(gg_refuse_in_step_callback(g->ctx, "gg_graph_device_errors")); /* a synchronous copy */
    *count = 0;
    if (!g->device_errors) return GG_SUCCESS;
    int saved = 0;
    GG_TRY(gg_device_enter(g->ctx, "gg_graph_device_errors", &saved));
    const cudaError_t err = cudaMemcpy(count, g->device_errors, sizeof *count, cudaMemcpyDeviceToHost);
    /* failed while the call still holds the context: the message names it */
    const gg_status status = err == cudaSuccess ? GG_SUCCESS : gg_fail_cuda(g->ctx, err, "cudaMemcpy(device_errors)");
    gg_device_leave(g->ctx, saved);
    return status;
}
