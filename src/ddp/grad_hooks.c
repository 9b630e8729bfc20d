/*
 * grad_hooks.c - the reduction of parameter gradients: the hooks a block calls as each gradient is final
 * (gg_dist_grad_ready), the end of a syncing call (gg_dist_finish, gg_dist_join), the shape check of a syncing
 * graph, and the public gg_dist_reduce.
 */
#include <nccl.h>

#include "copy_engine.h"
#include "ddp.h"
#include "step_reduce.h"
#include "streams.h"

/* One reduction of count elements at p, on the communication stream. */
static gg_status reduce(gg_ctx *ctx, void *p, size_t count, size_t elem_bytes) {
    gg_dist *d = ctx->dist;
    const ncclDataType_t type = elem_bytes == 4 ? ncclFloat32 : ncclBfloat16;
    const ncclRedOp_t op = d->config.op == GG_REDUCE_AVERAGE ? ncclAvg : ncclSum;
    if (d->config.sync == GG_SYNC_REDUCE_SCATTER) {
        const size_t shard = count / (size_t)d->size; /* in place: this rank's shard of its own buffer */
        GG_NCCL_TRY(ctx, ncclReduceScatter, (p, (char *)p + (size_t)d->rank * shard * elem_bytes, shard, type, op,
                                             (ncclComm_t)d->comm, d->stream));
        return GG_SUCCESS;
    }
    GG_NCCL_TRY(ctx, ncclAllReduce, (p, p, count, type, op, (ncclComm_t)d->comm, d->stream));
    return GG_SUCCESS;
}

/* Whether n elements may be all-reduced through the copy engines (when their buffer is in a gg_dist_alloc window). */
static int ce_may_take(const gg_dist *d, size_t n, size_t elem) {
    return d->ce_on && d->size > 1 && d->config.sync == GG_SYNC_ALL_REDUCE && n * elem >= GG_CE_MIN_BYTES;
}

/* Reduces n elements at p in pieces of at most bucket_bytes (whole, for reduce-scatter): large ones in buffers from
 * gg_dist_alloc all-reduced through the copy engines when they are on. */
static gg_status reduce_buffer(gg_ctx *ctx, void *p, size_t n, size_t elem) {
    const gg_dist *d = ctx->dist;
    if (ce_may_take(d, n, elem) && gg_ce_in_window(d, p, n * elem)) {
        gg_log(ctx, GG_LOG_DEBUG, "all-reducing %zu elements at %p in place through the copy engines", n, p);
        return gg_ce_all_reduce(ctx, p, n, elem); /* in pieces of at most bucket_bytes */
    }
    if (d->config.sync == GG_SYNC_REDUCE_SCATTER) return reduce(ctx, p, n, elem);
    const size_t piece = d->config.bucket_bytes / elem;
    for (size_t at = 0; at < n; at += piece)
        GG_TRY(reduce(ctx, (char *)p + at * elem, n - at < piece ? n - at : piece, elem));
    return GG_SUCCESS;
}

static gg_status reduce_tensor(gg_ctx *ctx, const gg_block_call *c, int i) {
    return reduce_buffer(ctx, c->t[i], gg_tensor_elems(c, i), c->info->tensors[i].elem_bytes);
}

/* gg_dist_reduce with the context claimed: the checks read the communicator and the known device pointers, which are
 * the owner thread's. */
static gg_status reduce_claimed(gg_ctx *ctx, const char *fn, void *data, size_t count, int bf16, gg_stream stream) {
    gg_dist *d = ctx->dist;
    if (!d) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the context has no communicator", fn);
    if (!data) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    if (count == 0) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: count is 0", fn);
    const size_t elem = bf16 ? 2 : 4;
    if (count > SIZE_MAX / elem)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: count = %zu elements of %zu bytes overflows size_t", fn,
                       count, elem);
    if ((uintptr_t)data % elem)
        return gg_fail(ctx, GG_ERROR_MISALIGNED, "%s: data is not aligned to its %zu-byte elements", fn, elem);
    if (d->config.sync == GG_SYNC_REDUCE_SCATTER && count % (size_t)d->size)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: count = %zu is not divisible by the %d ranks: reduce-scatter cannot shard it", fn, count,
                       d->size);
    GG_TRY(gg_check_device_buffer(ctx, fn, "data", data, count * elem));
    GG_TRY(gg_dist_poll(ctx, fn)); /* aborted, or an asynchronous NCCL error (aborted now): nothing enqueued */
    GG_TRY(gg_dist_enter(ctx, fn));
    int saved = 0;
    const cudaStream_t s = (cudaStream_t)stream;
    gg_status status = gg_device_enter_stream(ctx, fn, s, &saved, NULL); /* never in a step's callback: refused above */
    if (status == GG_SUCCESS) {
        int watched = 0; /* like a replay: a peer that stalls must not leave the stream waiting forever */
        status = gg_dist_await_replay_slot(ctx, fn, s, &watched);
        if (status == GG_SUCCESS) status = gg_stream_handoff(ctx, s, d->ev_ready, d->stream);
        if (status == GG_SUCCESS)
            status = gg_stream_join(ctx, reduce_buffer(ctx, data, count, elem), s, d->stream, d->ev_done);
        if (status == GG_SUCCESS && watched) gg_dist_watch(ctx, s, GG_WATCH_REDUCE);
        status = gg_dist_settle(ctx, status, &s);
        gg_device_leave(ctx, saved);
    }
    gg_dist_leave(ctx);
    return status;
}

gg_status gg_dist_reduce(gg_ctx *ctx, void *data, size_t count, int bf16, gg_stream stream) {
    static const char fn[] = "gg_dist_reduce";
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    /* Inside a step's callback the collective would go into the step's graph, which would then hold NCCL work that
     * the step does not know of: not counted against gg_dist_detach, not watched, and captured with sync off too. */
    if (gg_in_step_callback())
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: called inside a step graph's callback: nothing was done (the step's graph would hold a "
                       "collective it does not account for); reduce the buffer inside the step with "
                       "gg_step_add_reduce after the callback that writes it, or with gg_dist_reduce after the run",
                       fn);
    GG_TRY(gg_ctx_claim(ctx, fn)); /* before anything reads the context: another thread may be inside it */
    const gg_status status = reduce_claimed(ctx, fn, data, count, bf16, stream);
    gg_ctx_release(ctx);
    return status;
}

gg_status gg_dist_grad_ready(gg_ctx *ctx, const gg_block_call *c, cudaStream_t producer, int tensor) {
    if (!gg_dist_overlaps(ctx, c)) return GG_SUCCESS;
    GG_TRY(gg_stream_handoff(ctx, producer, ctx->dist->ev_ready, ctx->dist->stream));
    return reduce_tensor(ctx, c, tensor);
}

gg_status gg_dist_join(gg_ctx *ctx, const gg_block_call *c, cudaStream_t main) {
    if (!c->sync_grads) return GG_SUCCESS;
    return gg_stream_handoff(ctx, ctx->dist->stream, ctx->dist->ev_done, main);
}

gg_status gg_dist_finish(gg_ctx *ctx, const gg_block_call *c, cudaStream_t main) {
    if (!c->sync_grads) return GG_SUCCESS;
    gg_dist *d = ctx->dist;
    gg_status status = GG_SUCCESS;
    if (!d->config.overlap) {
        status = gg_stream_handoff(ctx, main, d->ev_ready, d->stream);
        for (int i = 0; i < c->info->n_tensors && status == GG_SUCCESS; ++i)
            if (gg_tensor_is_param(c, i)) status = reduce_tensor(ctx, c, i);
    }
    return gg_stream_join(ctx, status, main, d->stream, d->ev_done); /* also after a failed reduction */
}

gg_status gg_dist_check_shape(gg_ctx *ctx, const char *fn, const gg_block_call *c) {
    if (!ctx->dist) return GG_SUCCESS;
    const gg_dist *d = ctx->dist;
    if (d->config.sync != GG_SYNC_REDUCE_SCATTER) { /* all-reduce: pieces of at most bucket_bytes */
        size_t pieces = 0;
        for (int i = 0; i < c->info->n_tensors; ++i) {
            if (!gg_tensor_is_param(c, i)) continue;
            const size_t n = gg_tensor_elems(c, i), elem = c->info->tensors[i].elem_bytes;
            const size_t per = d->config.bucket_bytes / elem;
            /* the buffers are not known yet: where the copy engines may take it, their count (two a piece) */
            pieces += ce_may_take(d, n, elem) ? gg_ce_collectives(n, d->size, d->ce_piece_bytes / elem)
                                              : (n + per - 1) / per;
        }
        if (pieces > GG_DIST_MAX_COLLECTIVES)
            return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                           "%s: the call's gradients in pieces of at most gg_dist_config.bucket_bytes = %zu take %zu "
                           "collectives%s, more than the %d one graph may hold: raise bucket_bytes",
                           fn, d->config.bucket_bytes, pieces,
                           d->ce_on ? " (two a piece where the copy engines may take a gradient)" : "",
                           GG_DIST_MAX_COLLECTIVES);
        return GG_SUCCESS;
    }
    for (int i = 0; i < c->info->n_tensors; ++i)
        if (gg_tensor_is_param(c, i) && gg_tensor_elems(c, i) % (size_t)ctx->dist->size != 0)
            return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                           "%s: %s has %zu elements, not divisible by the %d ranks: reduce-scatter cannot shard it", fn,
                           c->info->tensors[i].name, gg_tensor_elems(c, i), ctx->dist->size);
    return GG_SUCCESS;
}
