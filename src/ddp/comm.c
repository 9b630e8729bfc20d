/*
 * comm.c - a context's NCCL communicator: configuration checks, attaching the caller's, putting one on the context
 * with its stream, events and agreement buffers (the caller's, or one comm_init.c made), detaching and releasing
 * (bounded: finalize with a deadline, else abort), and polling for asynchronous errors. The warm-up that follows is in
 * warmup.c, the watchdog and aborting in watchdog.c.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "affinity.h"
#include "comm_internal.h"
#include "copy_engine.h"

static gg_status check_dist_config(gg_ctx *ctx, const char *fn, const gg_dist_config *c) {
    GG_TRY(gg_check_config_version(ctx, fn, c->struct_size, sizeof(gg_dist_config), c->version,
                                   GG_DIST_CONFIG_VERSION, "GG_DIST_CONFIG_INIT"));
    if ((int)c->op < 0 || (int)c->op > (int)GG_REDUCE_SUM)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->op = %d is not a gg_reduce_op value", fn,
                       (int)c->op);
    if ((int)c->sync < 0 || (int)c->sync > (int)GG_SYNC_REDUCE_SCATTER)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->sync = %d is not a gg_grad_sync value", fn,
                       (int)c->sync);
    if (c->bucket_bytes < 4096)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->bucket_bytes = %zu is below 4096", fn,
                       c->bucket_bytes);
    if (c->bucket_bytes > GG_DIST_MAX_BUCKET_BYTES) /* twice it is the copy engines' staging: no wrap-around */
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->bucket_bytes = %zu is above %zu (1 TiB)", fn,
                       c->bucket_bytes, GG_DIST_MAX_BUCKET_BYTES);
    if (c->comm_sms < 0 || c->comm_sms > ctx->sm_count / 2)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->comm_sms = %d is outside [0, %d] (half the SMs)",
                       fn, c->comm_sms, ctx->sm_count / 2);
    if (c->copy_engines < 0 || c->copy_engines > 1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->copy_engines = %d is not 0 or 1", fn,
                       c->copy_engines);
    return c->copy_engines == 1 ? gg_ce_check_supported(ctx, fn) : GG_SUCCESS;
}


gg_status gg_dist_fail_nccl(gg_ctx *ctx, int result, const char *what) {
    return gg_fail_call(ctx, GG_ERROR_NCCL, what, ncclGetErrorString((ncclResult_t)result), ncclGetLastError(NULL));
}

/* NVLink multicast stays off unless the user chose otherwise: it can take a shared host's GPUs out of service. NCCL
 * reads the variable when it makes a communicator, so this runs before gradgraph makes one (and at context
 * creation, before a user's own communicator, if the context comes first). */
void gg_process_defaults(void) { setenv("NCCL_NVLS_ENABLE", "0", 0); }

/* The communication stream runs at the device's highest priority: NCCL's kernels then get SMs as soon as any
 * free up, instead of queueing behind every CTA of a large GEMM launched before them. */
static cudaError_t create_comm_stream(cudaStream_t *stream) {
    int least = 0, greatest = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(stream, cudaStreamNonBlocking, greatest);
    return e;
}

/* The end of an owned communicator that cannot wait forever: ncclCommFinalize (non-blocking: it flushes what was
 * issued) polled until the communicator is quiescent, then ncclCommDestroy, which no longer waits; a finalize that
 * fails, does not end within the peer timeout or is interrupted by another thread's gg_dist_abort aborts it instead.
 * why: what happened, when it did not end well. Called holding d->lock; d->comm is NULL after it. */
static int finalize(gg_ctx *ctx, char *why, size_t bytes) {
    gg_dist *d = ctx->dist;
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctx, d->rank, "ncclCommFinalize", GG_DIST_TIMEOUT_PEER);
    const int limit = w.limit_s;
    ncclResult_t r = ncclCommFinalize((ncclComm_t)d->comm);
    int late = 0;
    if (r == ncclInProgress || r == ncclSuccess) r = (ncclResult_t)gg_dist_wait_comm(d->comm, &w, d, &late);
    if (r == ncclSuccess) r = ncclCommDestroy((ncclComm_t)d->comm);
    if (r == ncclSuccess) {
        d->comm = NULL;
        return 1;
    }
    if (late && atomic_load(&d->abort_requested)) {
        gg_dist_abort_now(ctx, NULL); /* the other thread's reason */
        snprintf(why, bytes, "ncclCommFinalize was interrupted by an abort from another thread (%.256s)", d->failure);
        return 0;
    }
    if (late)
        snprintf(why, bytes, "ncclCommFinalize had not ended after %d s (%s)", limit,
                 gg_dist_timeout_env(GG_DIST_TIMEOUT_PEER));
    else
        snprintf(why, bytes, "ncclCommFinalize / ncclCommDestroy failed: %s", ncclGetErrorString(r));
    gg_dist_abort_now(ctx, why);
    return 0;
}

/* Waits for the communication stream, polling, for at most the peer timeout or until another thread's gg_dist_abort
 * asks: then the communicator is aborted, which ends NCCL's kernels still waiting for a peer. Called holding
 * d->lock. */
static int drain(gg_ctx *ctx, char *why, size_t bytes) {
    gg_dist *d = ctx->dist;
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctx, d->rank, "draining the communication stream", GG_DIST_TIMEOUT_PEER);
    const int limit = w.limit_s;
    cudaError_t e;
    while ((e = cudaStreamQuery(d->stream)) == cudaErrorNotReady && !atomic_load(&d->abort_requested) &&
           !gg_dist_wait_over(&w))
        gg_dist_pause();
    if (e == cudaSuccess) return 1;
    gg_clear_own_cuda_error(ctx);
    if (e == cudaErrorNotReady && atomic_load(&d->abort_requested)) {
        gg_dist_abort_now(ctx, NULL); /* the other thread's reason */
        snprintf(why, bytes,
                 "draining the communication stream was interrupted by an abort from another thread (%.256s)",
                 d->failure);
        (void)cudaStreamSynchronize(d->stream);
        return 0;
    }
    if (e == cudaErrorNotReady)
        snprintf(why, bytes, "the communication stream had not drained after %d s (%s)", limit,
                 gg_dist_timeout_env(GG_DIST_TIMEOUT_PEER));
    else
        snprintf(why, bytes, "the communication stream failed (%s)", cudaGetErrorName(e));
    gg_dist_abort_now(ctx, why);
    if (e == cudaErrorNotReady) (void)cudaStreamSynchronize(d->stream); /* the abort ends NCCL's kernels */
    return 0;
}

/* Sets or clears ctx's communicator state where gg_dist_abort, from another thread, looks for it: never cleared while
 * an abort is using the state (it pins it under the same mutex). */
static void publish(gg_ctx *ctx, gg_dist *d) {
    pthread_mutex_lock(&ctx->dist_publish);
    /* an abort that pinned the state finishes first: it needs no lock this thread holds here */
    while (!d && atomic_load(&ctx->dist_aborters) > 0) {
        pthread_mutex_unlock(&ctx->dist_publish);
        sched_yield();
        pthread_mutex_lock(&ctx->dist_publish);
    }
    ctx->dist = d;
    pthread_mutex_unlock(&ctx->dist_publish);
}

/* Destroys the context's communicator state (owned communicator included), also as the context's destroy hook,
 * which runs after the graphs are gone. Never waits past the deadlines: returns 0, with why, when the
 * communicator had to be aborted on the way. *comm_back (when not NULL): 1 when a communicator not owned yet was
 * neither aborted here nor before (by the warm-up, the watchdog, another thread's gg_dist_abort): the caller's again;
 * decided under the lock, so that no abort from another thread can come after it. Also 1 without a state. */
static int release_bounded(gg_ctx *ctx, char *why, size_t bytes, int *comm_back) {
    gg_dist *d = ctx->dist;
    if (comm_back) *comm_back = 1;
    if (!d) return 1;
    gg_watchdog_stop(d);
    /* Another thread's gg_dist_abort may still come: it asks the waits below to give up, then waits for the lock. */
    pthread_mutex_lock(&d->lock);
    int clean = 1;
    if (d->stream && d->comm) clean = drain(ctx, why, bytes);
    else if (d->stream) (void)cudaStreamSynchronize(d->stream); /* aborted: nothing of NCCL's waits any more */
    if (d->owned && d->comm) clean = finalize(ctx, why, bytes) && clean; /* NULL once aborted: nothing to free */
    if (comm_back) *comm_back = d->comm != NULL;
    d->comm = NULL; /* destroyed, aborted, or the caller's again: no later abort touches it */
    pthread_mutex_unlock(&d->lock);
    gg_ce_free(ctx); /* after the communicator, which took the windows with it */
    gg_ctx_hook_remove(ctx, &d->hook);
    if (d->ev_ready) (void)cudaEventDestroy(d->ev_ready);
    if (d->ev_done) (void)cudaEventDestroy(d->ev_done);
    if (d->agree_dev) (void)cudaFree(d->agree_dev);
    if (d->agree_host) (void)cudaFreeHost(d->agree_host);
    if (d->stream) (void)cudaStreamDestroy(d->stream);
    gg_clear_own_cuda_error(ctx);
    publish(ctx, NULL); /* after it, no gg_dist_abort can be using d */
    if (d->lock_made) pthread_mutex_destroy(&d->lock);
    free(d);
    return clean;
}

int gg_dist_release(gg_ctx *ctx) {
    char why[GG_MSG_BYTES] = "";
    int back = 1;
    if (!release_bounded(ctx, why, sizeof why, &back))
        gg_log(ctx, GG_LOG_WARN, "releasing the communicator: %s; it was aborted", why);
    return back;
}

gg_status gg_dist_begin(gg_ctx *ctx, const char *fn, const gg_dist_config *config, gg_dist_config *out) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (ctx->dist) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the context already has a communicator", fn);
    const gg_dist_config defaults = GG_DIST_CONFIG_INIT;
    *out = config ? *config : defaults;
    return check_dist_config(ctx, fn, out);
}

static void release_hook(void *ctx) { (void)gg_dist_release(ctx); }

gg_status gg_dist_make(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, int rank, int size,
                       const gg_dist_config *config) {
    gg_dist *d = calloc(1, sizeof *d);
    if (!d) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    static _Atomic uint64_t attachments; /* what steps finalized on a communicator compare: the same address may be
                                           * handed out again after a detach, to a communicator agreed otherwise */
    *d = (gg_dist){.generation = atomic_fetch_add(&attachments, 1) + 1, .rank = rank, .size = size,
                   .config = *config};
    pthread_mutexattr_t attr;
    int made = pthread_mutexattr_init(&attr);
    if (made == 0) made = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    if (made == 0) made = pthread_mutex_init(&d->lock, &attr);
    (void)pthread_mutexattr_destroy(&attr);
    if (made != 0) {
        free(d);
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: the communicator's lock could not be made (error %d)", fn,
                       made);
    }
    d->lock_made = 1;
    publish(ctx, d);
    d->hook = (gg_ctx_hook){.destroy = release_hook, .obj = ctx};
    gg_ctx_hook_add(ctx, &d->hook, GG_HOOK_LATE);
    int saved = 0;
    gg_status status = gg_device_enter(ctx, fn, &saved);
    if (status != GG_SUCCESS) {
        gg_dist_release(ctx);
        return status;
    }
    cudaError_t e = create_comm_stream(&d->stream);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->ev_ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->ev_done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc(&d->agree_dev, GG_DIST_AGREE_BYTES);
    if (e == cudaSuccess) e = cudaMallocHost(&d->agree_host, GG_DIST_AGREE_BYTES);
    gg_device_leave(ctx, saved);
    if (e != cudaSuccess) {
        status = gg_fail_cuda(ctx, e, "the communication stream, events and buffers");
        gg_dist_release(ctx); /* d->owned is still 0: comm survives */
        return status;
    }
    pthread_mutex_lock(&d->lock);
    d->comm = comm;
    pthread_mutex_unlock(&d->lock);
    /* Not fatal: the warm-up tells every rank, and all of them then reduce on SMs (the ranks must agree). */
    if (config->copy_engines == 1) {
        d->ce_on = gg_ce_alloc(ctx, fn) == GG_SUCCESS;
        if (!d->ce_on) gg_log(ctx, GG_LOG_WARN, "%s; gradients will be all-reduced on SMs", gg_last_error(ctx));
    }
    d->owned = owned;
    return GG_SUCCESS;
}

void gg_dist_log_ready(gg_ctx *ctx, const char *fn) {
    const gg_dist *d = ctx->dist;
    gg_log(ctx, GG_LOG_INFO, "%s: rank %d of %d on device %d, %s, buckets of %zu MiB, copy engines %s", fn, d->rank,
           d->size, ctx->config.device, d->config.sync == GG_SYNC_ALL_REDUCE ? "all-reduce" : "reduce-scatter",
           d->config.bucket_bytes >> 20, d->ce_on ? "on" : "off");
}

gg_status gg_dist_install(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, const gg_dist_config *config) {
    int device = -1, rank = -1, size = 0;
    gg_status status = GG_SUCCESS;
    ncclResult_t r = ncclCommCuDevice(comm, &device);
    if (r == ncclSuccess) r = ncclCommUserRank(comm, &rank);
    if (r == ncclSuccess) r = ncclCommCount(comm, &size);
    if (r != ncclSuccess && !owned) /* the caller's: perhaps no communicator at all, so never aborted */
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: nccl_comm is not a usable communicator: ncclCommCuDevice/UserRank/Count failed: %s; "
                       "nothing was done",
                       fn, ncclGetErrorString(r));
    if (r != ncclSuccess) {
        status = gg_dist_fail_nccl(ctx, r, "ncclCommCuDevice/UserRank/Count");
        goto fail;
    }
    if (device != ctx->config.device) {
        status = gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the communicator is on device %d, the context on %d", fn,
                         device, ctx->config.device);
        goto fail;
    }
    GG_GOTO(gg_dist_make(ctx, fn, comm, 0, rank, size, config), status, fail); /* owned only once the warm-up worked */
    status = gg_dist_warm_up(&ctx, 1, fn);
    if (status != GG_SUCCESS) {
        /* not owned yet: the comm survives this unless aborted (by the warm-up: a deadline, an asynchronous error;
         * or by another thread's gg_dist_abort) */
        if (!gg_dist_release(ctx)) return status;
        /* NCCL's own failure (a call that returned an error): aborted, an attached one too, as the header says of
         * GG_ERROR_NCCL, so that no rank waits on it; other failures leave an attached one to its caller */
        if (status == GG_ERROR_NCCL) {
            char first[GG_MSG_BYTES];
            snprintf(first, sizeof first, "%s", ctx->last_error);
            status = gg_fail(ctx, GG_ERROR_NCCL, "%s: the communicator is aborted (an attached one too: do not "
                                                 "destroy it)", first);
            owned = 1;
        }
        goto fail;
    }
    ctx->dist->owned = owned;
    status = gg_watchdog_start(ctx, fn);
    if (status != GG_SUCCESS) {
        gg_dist_release(ctx); /* owned: destroyed (nothing in flight) */
        return status;
    }
    gg_dist_log_ready(ctx, fn);
    if (config->bind_cpus) gg_affinity_bind_if_asked(ctx);
    return GG_SUCCESS;
fail:
    if (owned) (void)ncclCommAbort(comm);
    return status;
}

static gg_status attach(gg_ctx *ctx, const char *fn, const void *nccl_comm, const gg_dist_config *config) {
    gg_dist_config c;
    GG_TRY(gg_dist_begin(ctx, fn, config, &c));
    if (!nccl_comm) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: nccl_comm is NULL", fn);
    if (c.copy_engines == 1)
        return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                       "%s: config->copy_engines = 1 needs a communicator gradgraph makes (its CTA policy and windows "
                       "are set up with it); use gg_dist_init_env / _init_mpi / _init_threads, or copy_engines = 0",
                       fn);
    return gg_dist_install(ctx, fn, (ncclComm_t)nccl_comm, 0, &c);
}

gg_status gg_dist_attach(gg_ctx *ctx, void *nccl_comm, const gg_dist_config *config) {
    return gg_dist_claimed(ctx, "gg_dist_attach", attach, nccl_comm, config, 0, NULL);
}

static gg_status detach(gg_ctx *ctx) {
    if (!ctx->dist) return GG_SUCCESS;
    if (ctx->dist->graphs_holding > 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "gg_dist_detach: graphs or steps that captured NCCL work still exist; gg_graph_destroy / "
                       "gg_step_destroy them first (ncclCommDestroy would wait for them forever)");
    int saved = 0;
    const int entered = gg_device_enter(ctx, "gg_dist_detach", &saved) == GG_SUCCESS;
    const int rank = ctx->dist->rank;
    char why[GG_MSG_BYTES] = "";
    const int clean = release_bounded(ctx, why, sizeof why, NULL);
    if (entered) gg_device_leave(ctx, saved);
    if (clean) return GG_SUCCESS;
    return gg_fail(ctx, GG_ERROR_NCCL,
                   "gg_dist_detach: rank %d: %s: the communicator was aborted instead (an attached one too: do not "
                   "destroy it); the context has no communicator now",
                   rank, why);
}

gg_status gg_dist_detach(gg_ctx *ctx) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_detach: ctx is NULL");
    /* never inside a step's callback (a step being captured may hold the communicator without having counted it
     * yet), nor while another thread is inside the context */
    GG_TRY(gg_ctx_claim_teardown(ctx, "gg_dist_detach"));
    const gg_status status = detach(ctx);
    gg_ctx_release(ctx);
    return status;
}

gg_status gg_dist_check(gg_ctx *ctx) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_check: ctx is NULL");
    GG_TRY(gg_ctx_claim(ctx, "gg_dist_check")); /* before the communicator's state is read (another thread's abort
                                                   is gg_dist_abort) */
    const gg_status status = gg_dist_poll(ctx, "gg_dist_check");
    gg_ctx_release(ctx);
    return status;
}

gg_status gg_dist_poll(gg_ctx *ctx, const char *fn) {
    gg_dist *d = ctx->dist;
    if (!d) return GG_SUCCESS;
    GG_TRY(gg_dist_enter(ctx, fn)); /* aborted before (by the watchdog, gg_dist_abort or an error): says why */
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)d->comm, &async);
    const ncclResult_t err = r != ncclSuccess ? r : async;
    gg_status status = GG_SUCCESS;
    if (err != ncclSuccess && err != ncclInProgress) {
        char why[GG_MSG_BYTES];
        snprintf(why, sizeof why, "NCCL reported an asynchronous error (%s)", ncclGetErrorString(err));
        gg_dist_abort_now(ctx, why);
        status = gg_fail(ctx, GG_ERROR_NCCL,
                         "%s: rank %d: %s; the communicator is aborted (an attached one too: do not destroy it)", fn,
                         d->rank, why);
    }
    gg_dist_leave(ctx);
    return status;
}
