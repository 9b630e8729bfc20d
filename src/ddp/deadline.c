/*
 * deadline.c - the wait, with its deadline, for a communicator gradgraph made non-blocking (every NCCL call on it may
 * return ncclInProgress: the work goes on in NCCL's threads, and ncclCommGetAsyncError says when it is done).
 */
#include <stdio.h>

#include <nccl.h>

#include "comm_internal.h"

int gg_dist_wait_comm(void *comm, gg_dist_wait *w, gg_dist *d, int *expired) {
    *expired = 0;
    for (;;) {
        /* before every poll: an abort asked for, or made (by this thread's own log callback during a notice, which
         * the recursive lock lets through), has freed or will free comm */
        if (d && (atomic_load(&d->abort_requested) || d->comm != comm)) {
            *expired = 1;
            return ncclInProgress;
        }
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)comm, &state);
        if (r != ncclSuccess) return r;
        if (state != ncclInProgress) return state;
        if (gg_dist_wait_over(w)) {
            *expired = 1;
            return ncclInProgress;
        }
        gg_dist_pause();
    }
}

/* What a wait that never ended tells the caller: the communicator is aborted (for another thread that asked, with
 * its reason). */
static gg_status expired(gg_ctx *ctx, const char *what) {
    gg_dist *d = ctx->dist;
    const int asked = atomic_load(&d->abort_requested);
    char why[GG_MSG_BYTES];
    snprintf(why, sizeof why, "%s was still in progress after %d s (%s)", what, gg_dist_timeout_s(GG_DIST_TIMEOUT_PEER),
             gg_dist_timeout_env(GG_DIST_TIMEOUT_PEER));
    gg_dist_abort_now(ctx, asked ? NULL : why);
    const char *entry = gg_ctx_entry(ctx); /* the public call that waited, when there is one */
    const char *sep = entry ? ": " : "";
    if (!entry) entry = "";
    if (asked) /* d->failure: the other thread's reason */
        return gg_fail(ctx, GG_ERROR_NCCL, "%s%srank %d: %s: interrupted by an abort from another thread (%s): the "
                                           "communicator is aborted (an attached one too: do not destroy it)",
                       entry, sep, d->rank, what, d->failure);
    return gg_fail(ctx, GG_ERROR_NCCL,
                   "%s%srank %d: %s: the communicator is aborted (an attached one too: do not destroy it)", entry, sep,
                   d->rank, why);
}

gg_status gg_dist_nccl_done(gg_ctx *ctx, int result, const char *what) {
    ncclResult_t r = (ncclResult_t)result;
    if (r == ncclInProgress && ctx->dist && ctx->dist->comm) {
        int late = 0;
        gg_dist_wait w;
        gg_dist_wait_begin(&w, ctx, ctx->dist->rank, what, GG_DIST_TIMEOUT_PEER);
        r = (ncclResult_t)gg_dist_wait_comm(ctx->dist->comm, &w, ctx->dist, &late);
        if (late) return expired(ctx, what);
    }
    return r == ncclSuccess ? GG_SUCCESS : gg_dist_fail_nccl(ctx, r, what);
}

/* Aborts ctx's communicator after a failure of this rank that left the ranks out of step, and says so after the
 * failure's own message. */
static gg_status abort_out_of_step(gg_ctx *ctx, gg_status status) {
    gg_dist *d = ctx->dist;
    pthread_mutex_lock(&d->lock); /* recursive: the caller may hold it; another thread's abort may be freeing comm */
    const int alive = d->comm != NULL;
    char cause[GG_MSG_BYTES], why[GG_MSG_BYTES];
    snprintf(cause, sizeof cause, "%s", ctx->last_error);
    snprintf(why, sizeof why, "a call failed part way (%.400s)", cause); /* what later calls report */
    if (alive) gg_dist_abort_now(ctx, why);
    pthread_mutex_unlock(&d->lock);
    if (!alive) return status; /* aborted already, and the message says why */
    return gg_fail(ctx, status, "%s; rank %d: its part of the ranks' collectives is missing while the other ranks "
                                "wait for it: the communicator is aborted (an attached one too: do not destroy it)",
                   cause, d->rank);
}

gg_status gg_dist_nccl_done_or_abort(gg_ctx *ctx, int result, const char *what) {
    const gg_status status = gg_dist_nccl_done(ctx, result, what);
    return status != GG_SUCCESS && ctx->dist ? abort_out_of_step(ctx, status) : status;
}

gg_status gg_dist_settle(gg_ctx *ctx, gg_status status, const cudaStream_t *user_stream) {
    if (status == GG_SUCCESS || gg_status_is_refusal(status) || !ctx->dist) return status;
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (user_stream && cudaStreamIsCapturing(*user_stream, &capturing) != cudaSuccess) {
        (void)cudaGetLastError(); /* in doubt: as if open (an abort under an open capture is the worse mistake) */
        capturing = cudaStreamCaptureStatusActive;
    }
    if (capturing != cudaStreamCaptureStatusNone) return status;
    return abort_out_of_step(ctx, status);
}

gg_status gg_dist_group_done(gg_ctx *const *ctxs, int count, int result, const char *what) {
    if (result != ncclInProgress) return gg_dist_nccl_done(ctxs[0], result, what);
    for (int i = 0; i < count; ++i)
        GG_TRY(gg_dist_nccl_done(ctxs[i], ncclInProgress, what));
    return GG_SUCCESS;
}
