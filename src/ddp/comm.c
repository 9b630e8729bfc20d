/*
 * comm.c - a context's NCCL communicator: configuration checks, attaching the caller's or making one (from the
 * environment, MPI or for this process's threads; non-blocking, waited for with the init deadline), its stream and
 * events, detaching and releasing (bounded: finalize with a deadline, else abort), and polling for asynchronous
 * errors. The warm-up that follows is in warmup.c, the watchdog and aborting in watchdog.c.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "affinity.h"
#include "bootstrap.h"
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

/* release_bounded with its trouble logged; returns *comm_back. */
static int release(gg_ctx *ctx) {
    char why[GG_MSG_BYTES] = "";
    int back = 1;
    if (!release_bounded(ctx, why, sizeof why, &back))
        gg_log(ctx, GG_LOG_WARN, "releasing the communicator: %s; it was aborted", why);
    return back;
}

/* The checks every entry point that puts a communicator on a context starts with: ctx, no communicator there yet
 * (checked before any collective, so one wrong rank cannot leave the others waiting), the config. */
static gg_status begin(gg_ctx *ctx, const char *fn, const gg_dist_config *config, gg_dist_config *out) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (ctx->dist) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the context already has a communicator", fn);
    const gg_dist_config defaults = GG_DIST_CONFIG_INIT;
    *out = config ? *config : defaults;
    return check_dist_config(ctx, fn, out);
}

static void release_hook(void *ctx) { (void)release(ctx); }

/* Puts comm on ctx with its stream and events (no collective). On failure ctx has no communicator state, and an
 * owned comm is left to the caller to destroy. The state is on ctx (where another thread's gg_dist_abort finds it)
 * before comm is in it: an abort that comes before comm is only asked for (abort_requested), and the warm-up gives
 * up on it, so that nothing can abort comm before this returns success. */
static gg_status make_dist(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, int rank, int size,
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
        release(ctx);
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
        release(ctx); /* d->owned is still 0: comm survives */
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

/* What a context's communicator ended up as, once it is ready (INFO). */
static void log_ready(gg_ctx *ctx, const char *fn) {
    const gg_dist *d = ctx->dist;
    gg_log(ctx, GG_LOG_INFO, "%s: rank %d of %d on device %d, %s, buckets of %zu MiB, copy engines %s", fn, d->rank,
           d->size, ctx->config.device, d->config.sync == GG_SYNC_ALL_REDUCE ? "all-reduce" : "reduce-scatter",
           d->config.bucket_bytes >> 20, d->ce_on ? "on" : "off");
}

/* Puts comm on ctx (streams, events), checks it is on ctx's device, runs the warm-up, binds the thread. On failure
 * ctx has no communicator state and an owned comm has been aborted (a warm-up that fails with GG_ERROR_NCCL aborts an
 * attached one too); an attached comm NCCL cannot query is refused as an argument, untouched. */
static gg_status install(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, const gg_dist_config *config) {
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
    GG_GOTO(make_dist(ctx, fn, comm, 0, rank, size, config), status, fail); /* owned only once the warm-up worked */
    status = gg_dist_warm_up(&ctx, 1, fn);
    if (status != GG_SUCCESS) {
        /* not owned yet: the comm survives this unless aborted (by the warm-up: a deadline, an asynchronous error;
         * or by another thread's gg_dist_abort) */
        if (!release(ctx)) return status;
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
        release(ctx); /* owned: destroyed (nothing in flight) */
        return status;
    }
    log_ready(ctx, fn);
    if (config->bind_cpus) gg_affinity_bind_if_asked(ctx);
    return GG_SUCCESS;
fail:
    if (owned) (void)ncclCommAbort(comm);
    return status;
}

/* What rank 0 broadcasts through MPI: whether it made NCCL's unique id, and the id. */
typedef struct id_message {
    int32_t ok;
    ncclUniqueId id;
} id_message;

/* A call refused before its own checks (ctx NULL, a CUDA error pending) that would have shared NCCL's id through MPI
 * takes part in the broadcast all the same, as a rank whose checks failed does (share_id_mpi): MPI_Bcast has no
 * deadline, so the other ranks would wait in it forever. The refusal's message is kept (the context was not claimed,
 * or is released: a broadcast's failure would go to this thread's buffer). Which refusals do: see claimed. */
static gg_status refused_but_broadcast(const char *fn, const void *mpi_comm, gg_status refused) {
    char message[GG_MSG_BYTES];
    snprintf(message, sizeof message, "%s", gg_last_error(NULL));
    id_message shared = {0}; /* from rank 0: "no id" */
    if (gg_bootstrap_mpi_broadcast(NULL, fn, mpi_comm, &shared, sizeof shared) != GG_SUCCESS)
        (void)gg_fail(NULL, refused, "%s", message);
    return refused;
}

/* A call that makes or attaches ctx's communicator, body(ctx, fn, arg, config), with ctx claimed for its whole length
 * (a second thread is refused, as by every other call). `broadcasts`: body shares NCCL's id through MPI (mpi_comm,
 * NULL for the world), which a call refused for a NULL ctx or a pending CUDA error takes part in too: this rank's
 * own call, its part in the bootstrap. Not one refused inside a callback (a step's runs once per capture, a log
 * callback maybe on the watchdog's thread) or because another thread is inside the context (that thread may be in
 * this very bootstrap, broadcasting: a second broadcast on this rank would wait forever). */
typedef gg_status (*comm_maker)(gg_ctx *ctx, const char *fn, const void *arg, const gg_dist_config *config);
static gg_status claimed(gg_ctx *ctx, const char *fn, comm_maker body, const void *arg, const gg_dist_config *config,
                         int broadcasts, const void *mpi_comm) {
    if (!ctx) {
        const gg_status refused = gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
        return broadcasts ? refused_but_broadcast(fn, mpi_comm, refused) : refused;
    }
    GG_TRY(gg_refuse_in_step_callback(ctx, fn));
    gg_status status = gg_ctx_claim(ctx, fn);
    /* GG_ERROR_CUDA from the claim: a CUDA error pending (in use elsewhere and inside a log callback are
     * GG_ERROR_INVALID_ARGUMENT) */
    if (status != GG_SUCCESS)
        return broadcasts && status == GG_ERROR_CUDA ? refused_but_broadcast(fn, mpi_comm, status) : status;
    status = body(ctx, fn, arg, config);
    gg_ctx_release(ctx);
    return status;
}

static gg_status attach(gg_ctx *ctx, const char *fn, const void *nccl_comm, const gg_dist_config *config) {
    gg_dist_config c;
    GG_TRY(begin(ctx, fn, config, &c));
    if (!nccl_comm) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: nccl_comm is NULL", fn);
    if (c.copy_engines == 1)
        return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                       "%s: config->copy_engines = 1 needs a communicator gradgraph makes (its CTA policy and windows "
                       "are set up with it); use gg_dist_init_env / _init_mpi / _init_threads, or copy_engines = 0",
                       fn);
    return install(ctx, fn, (ncclComm_t)nccl_comm, 0, &c);
}

gg_status gg_dist_attach(gg_ctx *ctx, void *nccl_comm, const gg_dist_config *config) {
    return claimed(ctx, "gg_dist_attach", attach, nccl_comm, config, 0, NULL);
}

/* The configuration of the communicators gradgraph makes. With comm_sms > 0 (overlap on), NCCL runs on exactly
 * comm_sms CTAs: the SMs the syncing graphs' GEMMs leave free, so that its kernels fit beside them instead of
 * waiting for SMs or slowing the GEMMs (measured in docs/distributed.md, "SMs and channels"). */
static ncclConfig_t comm_config(const gg_dist_config *c) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    /* Non-blocking: no NCCL call waits inside NCCL for a peer (a blocking communicator's first collective connects
     * the ranks on the host, with no limit); gradgraph polls instead, with its deadlines (deadline.c).
     * GG_DIST_NCCL_BLOCKING=1 makes them blocking again: a way back should a platform's NCCL not take non-blocking
     * calls inside graph captures, at the cost of the init and finalize deadlines. */
    const char *blocking = getenv("GG_DIST_NCCL_BLOCKING");
    config.blocking = blocking && strcmp(blocking, "1") == 0;
    if (c->overlap && c->comm_sms > 0) config.minCTAs = config.maxCTAs = c->comm_sms;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
    /* Zero CTAs wherever NCCL can: its all-to-all and all-gather on the copy engines (copy_engine.h). */
    if (c->copy_engines == 1) config.CTAPolicy = NCCL_CTA_POLICY_ZERO;
#endif
    return config;
}

/* Waits for a communicator being made (non-blocking) with the init deadline; aborts it when it fails or is late.
 * r: what ncclCommInitRankConfig (or the group's end) returned. */
static gg_status wait_made(gg_ctx *ctx, const char *fn, ncclComm_t comm, ncclResult_t r, int rank,
                           const char *what) {
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctx, rank, what, GG_DIST_TIMEOUT_INIT);
    const int limit = w.limit_s;
    int late = 0;
    if (comm && (r == ncclSuccess || r == ncclInProgress)) r = (ncclResult_t)gg_dist_wait_comm(comm, &w, NULL, &late);
    if (r == ncclSuccess) return GG_SUCCESS;
    if (comm) (void)ncclCommAbort(comm);
    if (late)
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: %s: the communicator was not ready after %d s (%s; the other ranks did not join, or NCCL "
                       "could not connect them): it is aborted",
                       fn, what, limit, gg_dist_timeout_env(GG_DIST_TIMEOUT_INIT));
    return gg_dist_fail_nccl(ctx, r, what);
}

/* The end of a one-process-per-GPU bootstrap, once every rank holds NCCL's unique id: the communicator (gradgraph
 * owns it), the warm-up, the thread binding. */
static gg_status init_from_id(gg_ctx *ctx, const char *fn, int rank, int size, const ncclUniqueId *id,
                              const gg_dist_config *c) {
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, fn, &saved));
    ncclComm_t comm = NULL;
    ncclConfig_t config = comm_config(c);
    const ncclResult_t r = ncclCommInitRankConfig(&comm, size, *id, rank, &config);
    const gg_status made = wait_made(ctx, fn, comm, r, rank, "ncclCommInitRankConfig");
    gg_device_leave(ctx, saved);
    GG_TRY(made);
    return install(ctx, fn, comm, 1, c); /* aborts comm on failure */
}

/* NCCL's unique id from rank 0 of the MPI communicator (NULL: the world) to every rank, with rank 0's outcome: when
 * rank 0 refused its own arguments (checked: its status) or ncclGetUniqueId failed there, every rank returns instead
 * of waiting for a communicator that will not come. A rank whose own check failed still takes part in the broadcast
 * (rank 0 would wait in it), then returns its failure (the others give up at the init deadline). */
static gg_status share_id_mpi(gg_ctx *ctx, const char *fn, const void *mpi_comm, int rank, gg_status checked,
                              ncclUniqueId *id) {
    id_message shared = {0};
    if (checked != GG_SUCCESS) {
        char first[GG_MSG_BYTES];
        gg_failure_save(ctx, checked, first);
        /* rank 0 tells the others it will not make the id (shared.ok stays 0); any rank takes part */
        (void)gg_bootstrap_mpi_broadcast(ctx, fn, mpi_comm, &shared, sizeof shared);
        gg_failure_restore(ctx, first); /* the check's message, not the broadcast's */
        return checked;
    }
    ncclResult_t made = ncclSuccess;
    if (rank == 0) {
        made = ncclGetUniqueId(&shared.id);
        shared.ok = made == ncclSuccess;
    }
    GG_TRY(gg_bootstrap_mpi_broadcast(ctx, fn, mpi_comm, &shared, sizeof shared));
    if (made != ncclSuccess) return gg_dist_fail_nccl(ctx, made, "ncclGetUniqueId");
    if (!shared.ok)
        return gg_fail(ctx, GG_ERROR_PEER,
                       "%s: rank 0 refused its arguments or could not make NCCL's unique id (its status says why)", fn);
    *id = shared.id;
    return GG_SUCCESS;
}

/* first's failure (and its message) when there is one, else then's: the argument check is said before MPI's. */
static gg_status first_failure(gg_ctx *ctx, gg_status first, const char saved[GG_MSG_BYTES], gg_status then) {
    if (first == GG_SUCCESS) return then;
    gg_failure_restore(ctx, saved);
    return first;
}

/* The file path: rank 0 writes the id, the others read it within the init deadline (a rank that refuses its own
 * arguments never writes or reads: the others give up at the deadline). */
static gg_status init_env_file(gg_ctx *ctx, const char *fn, const char *id_path, const gg_dist_config *config) {
    gg_dist_config c;
    GG_TRY(begin(ctx, fn, config, &c));
    int rank = -1, size = 0;
    GG_TRY(gg_bootstrap_rank_size(ctx, fn, &rank, &size));
    gg_process_defaults();
    ncclUniqueId id;
    if (rank == 0) GG_NCCL_TRY(ctx, ncclGetUniqueId, (&id));
    GG_TRY(gg_bootstrap_share_id(ctx, fn, rank, id_path, &id, sizeof id));
    const gg_status made = init_from_id(ctx, fn, rank, size, &id, &c);
    /* Every rank has read the id (the communicator exists), or this launch failed: remove it either way, so that
     * the next launch's ranks cannot read this stale id before its rank 0 has written a new one. */
    if (rank == 0) (void)remove(id_path);
    return made;
}

static gg_status init_env(gg_ctx *ctx, const char *fn, const void *path, const gg_dist_config *config) {
    if (path) return init_env_file(ctx, fn, path, config);
    /* No file: the id travels through MPI's world communicator, whose ranks must be the environment's. Every rank
     * takes part in its broadcast whatever its own checks found (share_id_mpi): MPI_Bcast has no deadline. */
    gg_dist_config c;
    int rank = -1, size = 0;
    gg_status checked = begin(ctx, fn, config, &c);
    if (checked == GG_SUCCESS) checked = gg_bootstrap_rank_size(ctx, fn, &rank, &size);
    char saved[GG_MSG_BYTES];
    gg_failure_save(ctx, checked, saved);
    int mpi_rank = -1, mpi_size = 0;
    gg_status mpi = gg_bootstrap_mpi_rank_size(ctx, fn, NULL, &mpi_rank, &mpi_size);
    if (mpi == GG_ERROR_UNSUPPORTED)
        mpi = gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                      "%s: id_path is NULL and gradgraph was built without MPI (GG_WITH_MPI=OFF): pass a file path "
                      "every rank can read",
                      fn);
    if (mpi != GG_SUCCESS) return first_failure(ctx, checked, saved, mpi); /* no broadcast without MPI */
    if (checked == GG_SUCCESS && (mpi_rank != rank || mpi_size != size))
        checked = gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                          "%s: id_path is NULL, but MPI's world (rank %d of %d) is not the environment's (rank %d of "
                          "%d)",
                          fn, mpi_rank, mpi_size, rank, size);
    if (checked == GG_SUCCESS) gg_process_defaults();
    ncclUniqueId id;
    GG_TRY(share_id_mpi(ctx, fn, NULL, mpi_rank, checked, &id));
    return init_from_id(ctx, fn, rank, size, &id, &c);
}

gg_status gg_dist_init_env(gg_ctx *ctx, const char *id_path, const gg_dist_config *config) {
    return claimed(ctx, "gg_dist_init_env", init_env, id_path, config, id_path == NULL, NULL);
}

static gg_status init_mpi(gg_ctx *ctx, const char *fn, const void *mpi_comm, const gg_dist_config *config) {
    /* this rank's own checks, then the broadcast every rank takes part in, whatever they found: a rank 0 that
     * returned before it would leave the others in MPI_Bcast, which has no deadline */
    gg_dist_config c;
    const gg_status checked = begin(ctx, fn, config, &c);
    char saved[GG_MSG_BYTES];
    gg_failure_save(ctx, checked, saved);
    int rank = -1, size = 0;
    const gg_status mpi = gg_bootstrap_mpi_rank_size(ctx, fn, mpi_comm, &rank, &size);
    if (mpi != GG_SUCCESS) return first_failure(ctx, checked, saved, mpi); /* no broadcast without MPI */
    if (checked == GG_SUCCESS) gg_process_defaults();
    ncclUniqueId id;
    GG_TRY(share_id_mpi(ctx, fn, mpi_comm, rank, checked, &id));
    return init_from_id(ctx, fn, rank, size, &id, &c);
}

gg_status gg_dist_init_mpi(gg_ctx *ctx, const void *mpi_comm, const gg_dist_config *config) {
    return claimed(ctx, "gg_dist_init_mpi", init_mpi, mpi_comm, config, 1, mpi_comm);
}

/* One communicator per device, all in this process (what ncclCommInitAll does, with gradgraph's configuration): every
 * rank is issued inside one NCCL group, even after a failure (a missing rank would leave the others waiting), and on
 * failure every communicator made is aborted. The caller's device is restored. */
static gg_status init_local_comms(gg_ctx *ctx, const char *fn, int count, const int *devices,
                                  const gg_dist_config *c, ncclComm_t *comms) {
    ncclUniqueId id;
    GG_NCCL_TRY(ctx, ncclGetUniqueId, (&id));
    int saved = 0;
    GG_CUDA_TRY(ctx, cudaGetDevice(&saved));
    ncclConfig_t config = comm_config(c);
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return gg_dist_fail_nccl(ctx, r, "ncclGroupStart");
    for (int i = 0; i < count; ++i) {
        comms[i] = NULL;
        const cudaError_t e = cudaSetDevice(devices[i]); /* the contexts' devices: they exist */
        const ncclResult_t ri = ncclCommInitRankConfig(&comms[i], count, id, i, &config);
        if (r == ncclSuccess) r = e == cudaSuccess ? ri : ncclUnhandledCudaError;
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (r == ncclSuccess) r = ended;
    gg_status status = GG_SUCCESS;
    for (int i = 0; i < count && status == GG_SUCCESS; ++i) { /* wait_made aborts the one that failed */
        (void)cudaSetDevice(devices[i]);
        status = wait_made(ctx, fn, comms[i], r, i, "ncclCommInitRankConfig (one per device, grouped)");
        if (status != GG_SUCCESS) comms[i] = NULL;
    }
    if (status != GG_SUCCESS)
        for (int i = 0; i < count; ++i)
            if (comms[i]) (void)ncclCommAbort(comms[i]);
    (void)cudaSetDevice(saved);
    return status;
}

static gg_status init_threads(gg_ctx *const *ctxs, int count, const gg_dist_config *config, const char *fn) {
    int devices[GG_DIST_MAX_LOCAL_RANKS];
    gg_dist_config c;
    for (int i = 0; i < count; ++i) {
        GG_TRY(begin(ctxs[i], fn, config, &c));
        devices[i] = ctxs[i]->config.device;
        for (int j = 0; j < i; ++j)
            if (devices[j] == devices[i])
                return gg_fail(ctxs[i], GG_ERROR_INVALID_ARGUMENT, "%s: ctxs[%d] and ctxs[%d] share device %d", fn, j,
                               i, devices[i]);
    }
    c.bind_cpus = 0; /* each worker thread binds itself (gg_dist_bind_thread) */
    gg_process_defaults();
    ncclComm_t comms[GG_DIST_MAX_LOCAL_RANKS];
    GG_TRY(init_local_comms(ctxs[0], fn, count, devices, &c, comms));
    gg_status status = GG_SUCCESS;
    for (int i = 0; i < count && status == GG_SUCCESS; ++i)
        status = make_dist(ctxs[i], fn, comms[i], 0, i, count, &c);
    if (status == GG_SUCCESS) status = gg_dist_warm_up(ctxs, count, fn); /* all ranks together, from this thread */
    if (status != GG_SUCCESS) {
        /* Every communicator the warm-up left is aborted first: the ranks' collectives may wait for one another on
         * the GPU, and releasing them one by one would drain each stream in turn, each up to the peer deadline (8
         * ranks: 40 minutes at the default). An abort never blocks and ends NCCL's kernels. A context make_dist did
         * not reach has no state: its communicator, not owned yet, is aborted after. */
        for (int i = 0; i < count; ++i)
            if (ctxs[i]->dist) gg_dist_abort_now(ctxs[i], NULL);
        for (int i = 0; i < count; ++i)
            if (release(ctxs[i])) (void)ncclCommAbort(comms[i]);
        return status;
    }
    for (int i = 0; i < count; ++i) ctxs[i]->dist->owned = 1;
    for (int i = 0; i < count && status == GG_SUCCESS; ++i) status = gg_watchdog_start(ctxs[i], fn);
    if (status != GG_SUCCESS) {
        for (int i = 0; i < count; ++i) gg_dist_abort_now(ctxs[i], NULL); /* the others are in no collective */
        for (int i = 0; i < count; ++i) release(ctxs[i]);
        return status;
    }
    for (int i = 0; i < count; ++i) log_ready(ctxs[i], fn);
    return GG_SUCCESS;
}

gg_status gg_dist_init_threads(gg_ctx *const *ctxs, int count, const gg_dist_config *config) {
    static const char fn[] = "gg_dist_init_threads";
    if (!ctxs) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctxs is NULL", fn);
    if (count < 1 || count > GG_DIST_MAX_LOCAL_RANKS)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: count = %d is outside [1, %d]", fn, count,
                       GG_DIST_MAX_LOCAL_RANKS);
    for (int i = 0; i < count; ++i)
        if (!ctxs[i]) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctxs[%d] is NULL", fn, i);
    GG_TRY(gg_refuse_in_step_callback(NULL, fn));
    /* every context claimed for the whole call: none may be in use by a worker thread meanwhile */
    gg_status status = GG_SUCCESS;
    int claimed_n = 0;
    while (claimed_n < count && (status = gg_ctx_claim(ctxs[claimed_n], fn)) == GG_SUCCESS) ++claimed_n;
    if (status == GG_SUCCESS) status = init_threads(ctxs, count, config, fn);
    while (claimed_n > 0) gg_ctx_release(ctxs[--claimed_n]);
    return status;
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
