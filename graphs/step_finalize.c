/* step_finalize.c - gg_step_finalize: the chain's checks; with a communicator the reduction's layout and the
 * ranks' agreement (the same step everywhere, rank 0's GEMM algorithms); the plans at every bucket, the scratch ring,
 * the side streams and their workspaces, the join events and the device-side selection's words. */
#include "step_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- a syncing step: layout and agreement ---- */

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
        } else if (o->kind == OP_CALLBACK) {
            v[1] = (uint64_t)o->after_gradients; /* where the step joins its gradients */
        }
        gg_fingerprint_add(&h, v, sizeof v);
    }
    gg_fingerprint_layout(&h, &s->layout);
    return h;
}

/* The host half of a syncing step's finalize: the shape rules of the context's sync, the gradients and their
 * layout. */
static gg_status make_layout(gg_step *s, const char *fn) {
    gg_ctx *ctx = s->ctx;
    const int whole = ctx->dist->config.sync == GG_SYNC_REDUCE_SCATTER;
    GG_TRY(gg_step_check_reduced_uses(s, fn));
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
    s->n_grads = gg_step_list_grads(s, NULL);
    s->grads = calloc((size_t)(s->n_grads ? s->n_grads : 1), sizeof *s->grads);
    if (!s->grads) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    gg_step_list_grads(s, s->grads);
    const size_t bucket_bytes = ctx->dist->config.bucket_bytes;
    const size_t pieces = gg_reduce_layout_pieces(s->grads, s->n_grads, bucket_bytes, whole);
    if (pieces > GG_DIST_MAX_COLLECTIVES)
        return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                       "%s: the step's gradients in pieces of at most gg_dist_config.bucket_bytes = %zu take %s%zu "
                       "collectives a step, more than the %d one graph may hold: raise bucket_bytes",
                       fn, bucket_bytes, pieces == SIZE_MAX ? "over " : "",
                       pieces == SIZE_MAX ? (size_t)INT_MAX : pieces, GG_DIST_MAX_COLLECTIVES);
    if (gg_reduce_layout_make(s->grads, s->n_grads, bucket_bytes, whole, &s->layout) != 0)
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory (the reduction's buckets)", fn);
    s->bucket_waits = calloc((size_t)2 * (size_t)s->n_ops, sizeof *s->bucket_waits);
    if (!s->bucket_waits) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return GG_SUCCESS;
}

static void drop_layout(gg_step *s) {
    gg_reduce_layout_free(&s->layout);
    free(s->grads);
    free(s->bucket_waits);
    s->grads = NULL;
    s->bucket_waits = NULL;
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

static gg_status finalize(gg_step *s, const char *fn) {
    if (s->finalized)
        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the step is finalized already%s", fn,
                       s->finalized < 0 ? " (and failed: destroy it)" : "");
    gg_ctx *ctx = s->ctx;
    const int syncs = s->config.sync_gradients && ctx->dist;
    gg_status status = s->n_blocks ? GG_SUCCESS
                                   : gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the step has no block call (add "
                                                                             "one with gg_step_add_<block>)", fn);
    for (int i = 0; i < s->n_ops && status == GG_SUCCESS; ++i)
        if (s->ops[i].kind == OP_BLOCK) status = gg_step_check_chain(s, fn, i);
    if (status == GG_SUCCESS) status = gg_step_check_reduce_entries(s, fn);
    if (status == GG_SUCCESS) status = gg_step_check_final_last(s, fn);
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
    s->comm_generation = syncs ? ctx->dist->generation : 0;
    gg_log(ctx, GG_LOG_INFO, "%s: %d calls (%d blocks), %d buckets up to %lld tokens, %d side streams, %d scratch "
                             "slots of %zu MiB", fn, s->n_ops, s->n_blocks, s->n_buckets,
           (long long)gg_step_max_tokens(s), s->sides, s->slots, s->slot_bytes >> 20);
    if (syncs)
        gg_log(ctx, GG_LOG_INFO, "%s: rank %d of %d reduces %d gradients in %d buckets of at most %zu bytes", fn,
               ctx->dist->rank, ctx->dist->size, s->n_grads, s->layout.n_buckets, ctx->dist->config.bucket_bytes);
    for (int i = 0; i < s->n_ops && syncs; ++i)
        if (s->ops[i].kind == OP_FINAL && s->ops[i].final.synced)
            s->ops[i].final.synced(s->ops[i].final.user, ctx, fn, s->grads, s->n_grads);
    return GG_SUCCESS;
}

gg_status gg_step_finalize(gg_step *s) {
    const char *fn = "gg_step_finalize";
    if (!s) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: step is NULL", fn);
    GG_TRY(gg_refuse_in_step_callback(s->ctx, fn));
    GG_TRY(gg_ctx_claim(s->ctx, fn));
    const gg_status status = finalize(s, fn);
    gg_ctx_release(s->ctx);
    return status;
}
