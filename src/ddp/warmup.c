/*
 * warmup.c - the collective steps a rank must not wait on forever: the warm-up all-reduce that connects NCCL before
 * any capture (and settles the copy engines), and the polling wait with the peer timeout that both it and the
 * algorithm agreement use.
 */
#include <nccl.h>

#include "comm_internal.h"
#include "copy_engine.h"

/* How long a rank waits for the others in a collective step that must finish before it returns (the warm-up, the
 * algorithm agreement): NCCL reports nothing for a rank that never joins, so without a limit the others would wait
 * forever (GG_DIST_PEER_TIMEOUT_S: deadline.c). */
static int peer_timeout_s(void) { return gg_dist_timeout_s(GG_DIST_TIMEOUT_PEER); }

typedef enum { POLL_DONE, POLL_CUDA_ERROR, POLL_NCCL_ERROR, POLL_TIMEOUT, POLL_ABORTED } poll_outcome;

/* Polls the communication streams of ctxs until every one is idle, without blocking in the driver: stops at the
 * first CUDA error or asynchronous NCCL error (*which: that context's index, *cuda: the CUDA error, *nccl: NCCL's),
 * after peer_timeout_s(), or at once when another thread asks to abort. Aborts nothing: the caller decides what the
 * outcome means for its communicators. what: the step, for the wait's notices (in the log of the context waited
 * for). */
static poll_outcome poll_comm_streams(gg_ctx *const *ctxs, int count, int *which, cudaError_t *cuda,
                                      ncclResult_t *nccl, const char *what) {
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctxs[0], ctxs[0]->dist->rank, what, GG_DIST_TIMEOUT_PEER);
    for (;;) {
        int busy = -1; /* the first context still waiting */
        for (int i = 0; i < count; ++i) { /* asked before its stream drained or after: an abort was asked for */
            *which = i;
            if (atomic_load(&ctxs[i]->dist->abort_requested)) return POLL_ABORTED;
        }
        for (int i = 0; i < count; ++i) {
            *which = i;
            const cudaError_t e = cudaStreamQuery(ctxs[i]->dist->stream);
            if (e == cudaSuccess) continue;
            if (e != cudaErrorNotReady) {
                *cuda = e;
                return POLL_CUDA_ERROR;
            }
            if (busy < 0) busy = i;
            ncclResult_t async = ncclSuccess;
            const ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)ctxs[i]->dist->comm, &async);
            if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
                *nccl = r != ncclSuccess ? r : async;
                return POLL_NCCL_ERROR;
            }
        }
        if (busy < 0) return POLL_DONE;
        *which = busy;
        w.ctx = ctxs[busy];
        w.rank = ctxs[busy]->dist->rank;
        if (gg_dist_wait_over(&w)) return POLL_TIMEOUT;
        gg_dist_pause();
    }
}

/* Waits for ctx's communication stream without hanging on a failed peer: an asynchronous NCCL error, a CUDA error
 * on the stream, or a peer that has not joined in peer_timeout_s() aborts the communicator (a collective may still
 * be in flight, and nothing could be freed after it) and returns GG_ERROR_NCCL. */
gg_status gg_dist_wait_comm_stream(gg_ctx *ctx, const char *what) {
    int which = 0;
    cudaError_t cuda = cudaSuccess;
    ncclResult_t nccl = ncclSuccess;
    const poll_outcome outcome = poll_comm_streams(&ctx, 1, &which, &cuda, &nccl, what);
    if (outcome == POLL_DONE) return GG_SUCCESS;
    if (outcome == POLL_NCCL_ERROR) return gg_dist_poll(ctx, what); /* aborts, with NCCL's message */
    gg_dist_abort_now(ctx, NULL); /* releases this rank's stream; the others time out too */
    if (outcome == POLL_ABORTED)
        return gg_fail(ctx, GG_ERROR_NCCL, "%s: rank %d: interrupted by an abort from another thread (%s)", what,
                       ctx->dist->rank, ctx->dist->failure);
    if (outcome == POLL_CUDA_ERROR)
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: rank %d: the communication stream failed (%s): the communicator is aborted (an attached "
                       "one too: do not destroy it)",
                       what, ctx->dist->rank, cudaGetErrorString(cuda));
    return gg_fail(ctx, GG_ERROR_NCCL,
                   "%s: rank %d waited %d s for the other ranks, which did not join (GG_DIST_PEER_TIMEOUT_S sets the "
                   "wait): the communicator is aborted (an attached one too: do not destroy it)",
                   what, ctx->dist->rank, peer_timeout_s());
}

/* The warm-up's wait: every rank's collective finished, or the status and message of the first that failed. After
 * a failure a collective may still be in flight, and freeing anything would wait for it forever: every communicator
 * in ctxs is aborted (NULL in ctx->dist; an attached one too, as gg_dist_check does). */
static gg_status warm_up_wait(gg_ctx *const *ctxs, int count, const char *fn) {
    int which = 0;
    cudaError_t cuda = cudaSuccess;
    ncclResult_t nccl = ncclSuccess;
    const poll_outcome outcome = poll_comm_streams(ctxs, count, &which, &cuda, &nccl, "the warm-up all-reduce");
    if (outcome == POLL_DONE) return GG_SUCCESS;
    gg_ctx *ctx = ctxs[which];
    for (int i = 0; i < count; ++i) gg_dist_abort_now(ctxs[i], NULL);
    if (outcome == POLL_CUDA_ERROR) /* GG_ERROR_NCCL: the status that says "aborted, do not destroy" */
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: the warm-up all-reduce on rank %d failed (%s): the communicator is aborted (an attached "
                       "one too: do not destroy it)",
                       fn, ctx->dist->rank, cudaGetErrorString(cuda));
    if (outcome == POLL_NCCL_ERROR)
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: NCCL reported an error in the warm-up all-reduce on rank %d (%s): the communicator is "
                       "aborted (an attached one too: do not destroy it)",
                       fn, ctx->dist->rank, ncclGetErrorString(nccl));
    if (outcome == POLL_ABORTED)
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: the warm-up all-reduce on rank %d was interrupted by an abort from another thread (%s): "
                       "the communicator is aborted (an attached one too: do not destroy it)",
                       fn, ctx->dist->rank, ctx->dist->failure);
    return gg_fail(ctx, GG_ERROR_NCCL,
                   "%s: the warm-up all-reduce on rank %d waited %d s for the other ranks, which did not join (every "
                   "rank attaches or inits at the same time; GG_DIST_PEER_TIMEOUT_S sets the wait): the communicator "
                   "is aborted (an attached one too: do not destroy it)",
                   fn, ctx->dist->rank, peer_timeout_s());
}

/* After a warm-up whose minimum said whether every rank has its copy-engine staging: all ranks use copy engines,
 * or none does. Registering the window is collective, so it happens here, with every rank. */
static gg_status settle_copy_engines(gg_ctx *const *ctxs, int count, const float *all_ready, const char *fn) {
    int on = 0;
    for (int i = 0; i < count; ++i) {
        gg_dist *d = ctxs[i]->dist;
        if (d->ce_on && all_ready[i] < 1.0f) {
            gg_log(ctxs[i], GG_LOG_WARN, "%s: another rank has no copy-engine staging; gradients will be all-reduced "
                                         "on SMs", fn);
            gg_ce_free(ctxs[i]);
            d->ce_on = 0;
        }
        on += d->ce_on;
    }
    if (!on) return GG_SUCCESS; /* all ranks or none: the minimum is the same everywhere */
    gg_status status = gg_ce_setup(ctxs, count, fn);
    if (status == GG_SUCCESS) status = warm_up_wait(ctxs, count, fn); /* aborts every communicator on failure */
    for (int i = 0; i < count && status == GG_SUCCESS; ++i) {
        gg_dist *d = ctxs[i]->dist;
        if (d->ce_window) continue;
        /* NCCL registers no window where the ranks lack symmetric-memory support (a communicator-wide property: the
         * same on every rank), and then has no copy-engine path either. */
        gg_log(ctxs[i], GG_LOG_WARN, "%s: NCCL made no symmetric window on rank %d (no copy-engine support between "
                                     "these GPUs); gradients are all-reduced on SMs", fn, d->rank);
        gg_ce_free(ctxs[i]); /* never registered */
        d->ce_on = 0;
    }
    if (status == GG_SUCCESS) return GG_SUCCESS;
    for (int i = 0; i < count; ++i) gg_dist_abort_now(ctxs[i], NULL); /* failed half way: as a failed warm-up does */
    return status;
}

/* The warm-up all-reduce on every context at once (one NCCL group, from this thread): NCCL connects lazily on the
 * first collective, which must not happen inside a capture. Its value is each rank's copy-engine readiness, reduced
 * with min (settle_copy_engines). The buffers are all allocated before the group, so a failure cannot launch the
 * collective on some ranks only. The caller's current device is restored. Runs inside every context's section
 * (gg_dist_enter): another thread's gg_dist_abort may come while the communicators are being made; it waits for the
 * sections, and the waits here give up as soon as it asks. */
gg_status gg_dist_warm_up(gg_ctx *const *ctxs, int count, const char *fn) {
    int caller_device = 0;
    (void)cudaGetDevice(&caller_device);
    float *one[GG_DIST_MAX_LOCAL_RANKS] = {0}, ready[GG_DIST_MAX_LOCAL_RANKS];
    gg_status status = GG_SUCCESS;
    for (int i = 0; i < count && status == GG_SUCCESS; ++i) {
        ready[i] = (float)ctxs[i]->dist->ce_on;
        cudaError_t e = cudaSetDevice(ctxs[i]->config.device);
        if (e == cudaSuccess) e = cudaMalloc((void **)&one[i], sizeof(float));
        if (e == cudaSuccess) e = cudaMemcpy(one[i], &ready[i], sizeof(float), cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            status = gg_fail(ctxs[i], GG_ERROR_CUDA, "%s: the warm-up buffer on device %d", fn, ctxs[i]->config.device);
    }
    int entered = 0;
    while (status == GG_SUCCESS && entered < count && (status = gg_dist_enter(ctxs[entered], fn)) == GG_SUCCESS)
        ++entered;
    if (status == GG_SUCCESS) {
        const ncclResult_t started = ncclGroupStart();
        ncclResult_t r = started;
        for (int i = 0; i < count && r == ncclSuccess; ++i)
            r = ncclAllReduce(one[i], one[i], 1, ncclFloat32, ncclMin, (ncclComm_t)ctxs[i]->dist->comm,
                              ctxs[i]->dist->stream);
        if (started == ncclSuccess) { /* only a group that started ends: NCCL refuses an end outside a group */
            const ncclResult_t ended = ncclGroupEnd();
            if (r == ncclSuccess) r = ended;
        }
        status = gg_dist_group_done(ctxs, count, r, "warm-up ncclAllReduce");
        if (status == GG_SUCCESS) status = warm_up_wait(ctxs, count, fn);
        for (int i = 0; i < count && status == GG_SUCCESS; ++i) {
            (void)cudaSetDevice(ctxs[i]->config.device);
            if (cudaMemcpy(&ready[i], one[i], sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
                status = gg_fail(ctxs[i], GG_ERROR_CUDA, "%s: reading the warm-up result back", fn);
        }
        if (status == GG_SUCCESS) status = settle_copy_engines(ctxs, count, ready, fn);
    }
    while (entered > 0) gg_dist_leave(ctxs[--entered]);
    for (int i = 0; i < count; ++i)
        if (one[i]) {
            (void)cudaSetDevice(ctxs[i]->config.device);
            (void)cudaFree(one[i]);
        }
    (void)cudaSetDevice(caller_device);
    return status;
}
