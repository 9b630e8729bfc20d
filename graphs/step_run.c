/* step_run.c - a finalized step's runs: gg_step_run (the bucket chosen on the host), gg_step_run_device (chosen on
 * the GPU), each launching the exec of its bucket and pointer set or capturing it first (step_capture.c); and what
 * a replay runs, written as DOT (gg_step_debug_dot), and the device-side selection's errors. */
#include "step_internal.h"

#include <string.h>

/* The id of the block calls' pointers as they are now (looked up once after each change). */
static uint64_t pointer_set(gg_step *s) {
    if (s->ptrset) return s->ptrset;
    const void **row = s->ptrset_row;
    for (int i = 0; i < s->n_ops; ++i) {
        if (s->ops[i].kind != OP_BLOCK) continue;
        const gg_block_call *c = &s->ops[i].call;
        for (int t = 0; t < GG_BLOCK_MAX_TENSORS; ++t)
            *row++ = t < c->info->n_tensors && gg_tensor_read(c, t) ? c->t[t] : NULL;
    }
    s->ptrset = gg_ptrset_id(&s->ptrsets, s->ptrset_row);
    return s->ptrset;
}

/* Launches the exec of key from cache, capturing it first when it is missing (gg_step_build_graph); a syncing run holds
 * the communicator as a per-block graph's replay does (gg_exec_replay). */
static gg_status replay(gg_step *s, const char *fn, gg_exec_cache *cache, const gg_exec_key *key, int b,
                        int64_t tokens, const int64_t *device_tokens, int accumulate, gg_stream stream) {
    gg_step_build x = {s, fn, key, b, tokens, device_tokens, accumulate};
    return gg_exec_replay(s->ctx, fn, cache, key, (key->flags & KEY_SYNC) != 0, &s->holds_nccl, gg_step_build_graph, &x,
                          (cudaStream_t)stream);
}

/* A syncing run needs the communicator the ranks agreed on at finalize, without an asynchronous error. */
static gg_status check_comm(gg_step *s, const char *fn) {
    gg_ctx *ctx = s->ctx;
    if (!ctx->dist || ctx->dist->generation != s->comm_generation)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: the step reduces gradients, but the communicator it was finalized with is gone "
                       "(detached): make a new step, or gg_step_set_sync(step, 0) for local gradients",
                       fn);
    /* aborted (the watchdog may clear the communicator at any time: read under its lock), or an asynchronous NCCL
     * error (aborted now): GG_ERROR_NCCL saying why, nothing enqueued */
    return gg_dist_check(ctx);
}

/* The exec key's flag for update off, on a step that has work to leave out (else the same graph under two keys). */
static unsigned no_update(const gg_step *s) { return !s->update_on && gg_step_has_final_work(s) ? KEY_NO_UPDATE : 0; }

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
                       fn, (long long)tokens, (long long)gg_step_max_tokens(s));
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
    key.flags = (accumulate ? KEY_ACCUMULATE : 0) | (padded ? KEY_PADDED : 0) | (sync ? KEY_SYNC : 0) | no_update(s);
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
    for (int i = 0; i < s->n_ops; ++i) {
        if (s->ops[i].kind != OP_BLOCK) continue;
        const gg_block_call *c = &s->ops[i].call;
        const int written = gg_block_output_overlapping(c, device_tokens, sizeof *device_tokens);
        if (written >= 0)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: device_tokens (%p) lies in output args->%s of call %d: the step would change M while "
                           "it runs",
                           fn, (const void *)device_tokens, c->info->tensors[written].name, i);
    }
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
    key.flags = KEY_DEVICE | (accumulate ? KEY_ACCUMULATE : 0) | no_update(s);
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
 * accumulate and sync, the device buffer of M), with the calls' current arguments: gg_step_build_graph, as a replay
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
    const gg_step_build x = {s, fn, key, b, key->tokens, b < 0 ? (const int64_t *)key->ptr[1] : NULL,
                          (key->flags & KEY_ACCUMULATE) != 0};
    const gg_status status = gg_step_build_graph((void *)&x, out);
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
    GG_TRY(gg_refuse_in_step_callback(s->ctx, fn)); /* a synchronous copy */
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
