/* step_capture.c - one bucket's backward enqueued on the capturing stream: per block call its scratch slot and side
 * stream, the waits for earlier calls' deferred work, the padding rows zeroed, the reductions launched as gradients
 * become final, every branch joined at the end; and the graph a replay builds from it (one bucket, or every bucket
 * behind the device-side selection). */
#include "step_internal.h"

#include <nvtx3/nvToolsExt.h>

#include "kernels/gg_kernels.h"

/* `stream` waits for op's deferred branches (their join events). */
static gg_status wait_deferred(gg_ctx *ctx, const step_op *op, cudaStream_t stream) {
    if (op->deferred & GG_DEFERRED_SIDE) GG_CUDA_TRY(ctx, cudaStreamWaitEvent(stream, op->ev_join, 0));
    if (op->deferred & GG_DEFERRED_AUX) GG_CUDA_TRY(ctx, cudaStreamWaitEvent(stream, op->ev_aux_join, 0));
    return GG_SUCCESS;
}

/* The main stream waits for op's deferred branches (once per capture). */
static gg_status join_op(gg_ctx *ctx, step_op *op, cudaStream_t main) {
    if (op->joined) return GG_SUCCESS;
    op->joined = 1;
    return wait_deferred(ctx, op, main);
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

/* Bucket b is launched: every gradient it completes (its last piece) goes to the final calls' early hooks, on the
 * communication stream behind the bucket; not to those after a gradient callback, which may change the gradients
 * first. */
static gg_status gradients_reduced(gg_step *s, int b) {
    const gg_reduce_bucket *k = &s->layout.buckets[b];
    for (int p = k->first; p < k->first + k->n; ++p) {
        const gg_reduce_piece *piece = &s->layout.pieces[p];
        const gg_reduce_grad *g = &s->grads[piece->grad];
        if (piece->offset + piece->count != g->count) continue; /* not its last piece */
        for (int i = 0; i < s->n_ops && !(s->ops[i].kind == OP_CALLBACK && s->ops[i].after_gradients); ++i)
            if (s->ops[i].kind == OP_FINAL && s->ops[i].final.early)
                GG_TRY(s->ops[i].final.early(s->ops[i].final.user, s, g, s->ctx->dist->stream));
    }
    return GG_SUCCESS;
}

/* What bucket b waits for beside the main stream, into events (room for two per call): the deferred weight-gradient
 * branches of every call that produced one of its pieces and that main does not wait for yet. Not only the last
 * producer's: a bucket spans calls, and an earlier call's branch on another side stream may still be writing its
 * gradient. Returns how many. */
static int bucket_waits(const gg_step *s, int b, cudaEvent_t *events) {
    const gg_reduce_bucket *k = &s->layout.buckets[b];
    int n = 0, last = -1;
    for (int p = k->first; p < k->first + k->n; ++p) {
        const int producer = s->grads[s->layout.pieces[p].grad].producer;
        if (producer == last) continue; /* pieces in production order: one producer's are adjacent */
        last = producer;
        const step_op *op = &s->ops[producer];
        if (op->kind != OP_BLOCK || op->joined) continue; /* its gradients are final on main */
        if (op->deferred & GG_DEFERRED_SIDE) events[n++] = op->ev_join;
        if (op->deferred & GG_DEFERRED_AUX) events[n++] = op->ev_aux_join;
    }
    return n;
}

/* The buckets whose last gradient call i produced (*next: the first bucket not launched yet) go to the
 * communication stream, after the work on main so far and the deferred branches of each bucket's producers; with
 * update, the final work's early hooks follow each. */
static gg_status launch_ready(gg_step *s, int i, cudaStream_t main, int update, int *next, int *forked) {
    for (; *next < s->layout.n_buckets && s->layout.buckets[*next].ready == i; ++*next) {
        *forked = 1;
        const int n = bucket_waits(s, *next, s->bucket_waits);
        GG_TRY(gg_dist_step_bucket(s->ctx, &s->layout, s->grads, *next, main, s->bucket_waits, n));
        if (update) GG_TRY(gradients_reduced(s, *next));
    }
    return GG_SUCCESS;
}

/* A callback being captured: the step, its call index, the main stream. */
typedef struct callback_scope {
    gg_step *s;
    int at;
    cudaStream_t main;
} callback_scope;

/* The context's callback_join while a callback runs: an eager gradgraph call inside it uses the context's scratch
 * and counters (slot 0) and its second workspace (side stream 0's), so its stream waits for the deferred work of the
 * earlier calls that use them (on main: joined for good; on a stream the callback forked, only that stream waits).
 * The other calls' deferred work goes on beside it. (A stream outside the capture was refused before:
 * gg_device_enter_stream.) */
static gg_status join_before_eager(void *user, cudaStream_t stream) {
    const callback_scope *c = user;
    const gg_step *s = c->s;
    for (int e = 0; e < c->at; ++e) {
        step_op *op = &s->ops[e];
        const int shares = op->block % s->slots == 0 || (s->sides && op->block % s->sides == 0);
        if (op->kind == OP_BLOCK && shares)
            GG_TRY(stream == c->main ? join_op(s->ctx, op, stream) : wait_deferred(s->ctx, op, stream));
    }
    return GG_SUCCESS;
}

/* Captures callback i on main with the bucket's rows: gradgraph's eager calls inside it wait for the earlier
 * calls' deferred work (join_before_eager), and a gradgraph call that fails inside it, or a callback that breaks the
 * capture, fails the step's capture. The context's callback state is saved and restored around it. */
static gg_status run_callback(gg_step *s, int i, cudaStream_t main, int64_t bucket) {
    gg_ctx *ctx = s->ctx;
    const step_op *op = &s->ops[i];
    callback_scope scope = {s, i, main};
    /* restored after: scopes nest */
    gg_status (*const outer)(void *, cudaStream_t) = ctx->callback_join;
    void *const outer_user = ctx->callback_join_user;
    const gg_status outer_failure = ctx->callback_failure;
    if (!gg_step_test.skip_callback_join) ctx->callback_join = join_before_eager, ctx->callback_join_user = &scope;
    ctx->callback_failure = GG_SUCCESS;
    gg_ctx *const outer_ctx = gg_step_callback_swap(ctx); /* calls on any context belong to this capture */
    op->fn(op->user, (gg_stream)main, bucket);
    (void)gg_step_callback_swap(outer_ctx);
    const gg_status failed = ctx->callback_failure;
    ctx->callback_failure = outer_failure;
    ctx->callback_join = outer, ctx->callback_join_user = outer_user;
    const char *entry = gg_ctx_entry(ctx), *fn = entry ? entry : "gg_step_run";
    /* An error left pending is the callback's own (a gradgraph call inside it leaves none, or was refused for it):
     * reported here, so cleared; named also beside a gradgraph call's failure, which the status stays. */
    const cudaError_t left = gg_pending_cuda_error();
    const int left_one = left != cudaSuccess;
    if (left_one) (void)cudaGetLastError();
    if (failed != GG_SUCCESS) /* the callback's work is incomplete: nothing of this capture may run */
        return gg_fail(ctx, failed,
                       "%s: a gradgraph call inside the callback of call %d failed, so the step is not captured "
                       "(nothing runs): %s%s%s%s",
                       fn, i, ctx->callback_message, /* the first failure's, as its status */
                       left_one ? "; the callback also left a CUDA error pending: " : "",
                       left_one ? cudaGetErrorName(left) : "", left_one ? " (cleared)" : "");
    if (left_one)
        return gg_fail(ctx, GG_ERROR_CUDA,
                       "%s: the callback of call %d left a CUDA error pending, %s (%s): a launch or CUDA call of its "
                       "own failed, so the step is not captured (nothing runs)",
                       fn, i, cudaGetErrorName(left), cudaGetErrorString(left));
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(main, &cs);
    if (err != cudaSuccess || cs != cudaStreamCaptureStatusActive)
        return gg_fail(ctx, GG_ERROR_CUDA,
                       "%s: the callback of call %d broke the capture (%s): a callback may only enqueue capturable "
                       "work on the stream it is handed",
                       fn, i, err != cudaSuccess ? cudaGetErrorName(err) : "capture invalidated");
    return GG_SUCCESS;
}

/* Enqueues the whole backward at `bucket` rows on main (capturing); the real rows are tokens, or with device_rows
 * the M the GPU reads there; sync: the gradients are reduced across the ranks as they are final; update 0: the work
 * on the final gradients (the optimizer, gradient callbacks) is left out. */
static gg_status enqueue_step(gg_step *s, int64_t tokens, const int64_t *device_rows, int64_t bucket, int accumulate,
                              int sync, int update, cudaStream_t main) {
    gg_ctx *ctx = s->ctx;
    gg_status status = GG_SUCCESS;
    int first_block = 1, next_bucket = 0, forked = 0;
    if (sync) gg_step_list_grads(s, s->grads); /* the pointers as they are now (gg_step_set_args) */
    for (int i = 0; i < s->n_ops; ++i) {
        s->ops[i].deferred = 0, s->ops[i].joined = 0;
        if (s->ops[i].kind == OP_FINAL && s->ops[i].final.begin) s->ops[i].final.begin(s->ops[i].final.user);
    }
    for (int i = 0; i < s->n_ops && status == GG_SUCCESS; ++i) {
        step_op *op = &s->ops[i];
        if (sync && op->kind == OP_REDUCE) status = launch_ready(s, i, main, update, &next_bucket, &forked);
        if (op->kind == OP_REDUCE) continue; /* final on main here: launched above */
        if (!update && (op->kind == OP_FINAL || gg_step_needs_gradients(op))) continue;
        /* every earlier gradient final on main first: computed, and reduced */
        if (op->kind == OP_FINAL || gg_step_needs_gradients(op)) {
            for (int e = 0; e < i && status == GG_SUCCESS; ++e)
                if (s->ops[e].kind == OP_BLOCK) status = join_op(ctx, &s->ops[e], main);
            if (status == GG_SUCCESS && forked) status = gg_dist_step_join(ctx, main);
        }
        if (op->kind == OP_FINAL) {
            if (status == GG_SUCCESS) status = op->final.run(op->final.user, main);
            continue;
        }
        if (op->kind == OP_CALLBACK) {
            if (status == GG_SUCCESS) status = run_callback(s, i, main, bucket);
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
            if (slot_wait || gg_step_hazard(&a->call, &op->call)) status = join_op(ctx, a, main);
        }
        if (status != GG_SUCCESS) break;
        const gg_exec_res r = op_res(s, op, main);
        c.res = &r;
        if (gg_step_test.before_block) gg_step_test.before_block(op->block);
        nvtxRangePushA(c.info->fn);
        status = c.info->enqueue(ctx, plan, &c, main);
        nvtxRangePop();
        if (status == GG_SUCCESS && sync) status = launch_ready(s, i, main, update, &next_bucket, &forked);
    }
    char first[GG_MSG_BYTES];
    gg_failure_save(ctx, status, first); /* a failing join below keeps the first failure's message */
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
    gg_failure_restore(ctx, first);
    return status;
}

typedef struct step_body {
    gg_step *s;
    int64_t tokens;
    const int64_t *device_rows;
    int64_t bucket;
    int accumulate, sync, update;
} step_body;

static gg_status enqueue_step_body(void *user, cudaStream_t stream) {
    const step_body *d = user;
    return enqueue_step(d->s, d->tokens, d->device_rows, d->bucket, d->accumulate, d->sync, d->update, stream);
}

/* Captures bucket b's step into *graph (gg_capture: a new graph, or a SWITCH node's body). */
static gg_status capture(gg_step *s, int64_t tokens, const int64_t *device_rows, int b, int accumulate, int sync,
                         int update, cudaGraph_t *graph) {
    step_body d = {s, tokens, device_rows, s->buckets[b], accumulate, sync, update};
    return gg_capture(s->ctx, enqueue_step_body, &d, graph);
}

typedef struct device_branch {
    gg_step *s;
    const int64_t *device_tokens;
    int accumulate, update;
} device_branch;

static gg_status capture_branch(void *user, int b, cudaGraph_t body) {
    const device_branch *d = user;
    /* never syncs: run_device refuses */
    return capture(d->s, 0, d->device_tokens, b, d->accumulate, 0, d->update, &body);
}

/* A syncing step captured without reduction but with its optimizer: each rank's weights from its own gradients (once
 * until gg_step_set_sync or gg_step_set_update is called again). */
static void warn_local_update(gg_step *s, const char *fn, unsigned flags) {
    if (!s->reduces || (flags & (KEY_SYNC | KEY_NO_UPDATE)) || s->warned_local_update) return;
    for (int i = 0; i < s->n_ops; ++i)
        if (s->ops[i].kind == OP_FINAL && s->ops[i].final.whole_gradients) {
            gg_log(s->ctx, GG_LOG_WARN,
                   "%s: a run with sync off on a step with an optimizer updates each rank's weights from that rank's "
                   "own gradients, and the ranks' weights drift apart; for micro-batches, leave the update out of "
                   "such runs (gg_step_set_update(step, 0))",
                   fn);
            s->warned_local_update = 1;
            return;
        }
}

/* ---- the graph a replay builds ---- */

gg_status gg_step_build_graph(void *user, cudaGraph_t *graph) {
    const gg_step_build *x = user;
    gg_step *s = x->s;
    gg_ctx *ctx = s->ctx;
    /* slot 0 is the context's arena: it holds a slot unless a failed allocation lost it since finalize */
    GG_TRY(gg_ctx_reserve_scratch(ctx, s->slot_bytes));
    gg_status status;
    const int update = !(x->key->flags & KEY_NO_UPDATE);
    if (x->device_tokens) {
        device_branch d = {s, x->device_tokens, x->accumulate, update};
        status = gg_switch_graph_build(ctx, x->device_tokens, s->device_buckets, s->n_buckets, gg_step_max_tokens(s),
                                       s->device_errors, capture_branch, &d, graph);
    } else {
        status = capture(s, x->tokens, NULL, x->b, x->accumulate, (x->key->flags & KEY_SYNC) != 0, update, graph);
    }
    if (status == GG_SUCCESS) warn_local_update(s, x->fn, x->key->flags); /* once a capture of the setting succeeds */
    if (status == GG_SUCCESS)
        gg_log(ctx, GG_LOG_DEBUG, "%s: captured %s (pointer set %llu, accumulate %d%s%s)", x->fn,
               x->device_tokens ? "every bucket, device-selected" : "a bucket",
               (unsigned long long)(uintptr_t)x->key->ptr[0], x->accumulate,
               x->key->flags & KEY_PADDED ? ", padded" : "", update ? "" : ", no update");
    return status;
}
