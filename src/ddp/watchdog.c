/*
 * watchdog.c - a data-parallel context that fails loudly instead of hanging: the lock around every use of the
 * communicator, aborting it (from the owner thread, the watchdog or any thread through the public gg_dist_abort),
 * and the watchdog, one host thread per communicator, that aborts it when a replay of a syncing graph, or a
 * collective gradgraph enqueued outside a graph, has not finished within the step deadline or NCCL reports an
 * asynchronous error.
 *
 * Why a lock: ncclCommAbort frees the communicator, and NCCL's kernels in a graph captured on it read its device
 * state. The owner thread holds the lock from the check that the communicator is alive to the last NCCL call or
 * graph launch of its call; whoever aborts takes the lock first. The owner's own waits poll abort_requested, so an
 * abort waits at most for a section's CPU work, never for the GPU. The lock is recursive because the owner's
 * sections nest (a syncing replay reduces through gg_dist_grad_ready; a failed wait aborts inside its section).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <nccl.h>

#include "comm_internal.h"

/* The replays of syncing graphs (and collectives outside graphs) in flight at most: a ring of events, each recorded
 * after one. A further launch first waits for the oldest to finish (gg_dist_await_replay_slot), so every replay in
 * flight is timed on its own, and the launch, made holding the communicator's lock, never waits inside CUDA's launch
 * queue behind replays stuck on a dead peer, where no abort could reach it. 16 replays queued ahead hide any launch
 * latency. */
#define WATCH_SLOTS 16

/* Between the owner thread (gg_dist_watch) and the watchdog thread, under `mu`. */
typedef struct gg_watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stop;
    cudaEvent_t ev[WATCH_SLOTS];
    double since[WATCH_SLOTS];     /* when slot's work began: enqueued, or the one before it seen complete */
    const char *what[WATCH_SLOTS]; /* the slot's work, for messages (GG_WATCH_*) */
    int oldest, pending;           /* the ring: `pending` slots from `oldest` recorded and not yet seen complete */
    int events;                    /* events created */
    gg_ctx *ctx;
} gg_watchdog;

#define WATCH_PERIOD_NS 10000000L /* 10 ms between checks: an abort comes at most that late after the deadline */

void gg_dist_abort_now(gg_ctx *ctx, const char *why) {
    gg_dist *d = ctx->dist;
    pthread_mutex_lock(&d->lock);
    if (!why && atomic_load(&d->abort_requested)) { /* the owner gave up for another thread: that thread's reason */
        /* it may still be writing it (state 1): a few stores, never a wait on anything, and not under this lock */
        while (atomic_load(&d->abort_requested) != 2) sched_yield();
        why = d->abort_why;
    }
    if (d->comm) {
        snprintf(d->failure, sizeof d->failure, "%s", why ? why : "the communicator was aborted after an NCCL error");
        (void)ncclCommAbort((ncclComm_t)d->comm);
        d->comm = NULL;
    }
    pthread_mutex_unlock(&d->lock);
}

gg_status gg_dist_enter(gg_ctx *ctx, const char *fn) {
    gg_dist *d = ctx->dist;
    pthread_mutex_lock(&d->lock);
    if (d->comm) return GG_SUCCESS;
    const gg_status st = gg_fail(ctx, GG_ERROR_NCCL,
                                 "%s: rank %d: the communicator was aborted: %s. Destroy the syncing graphs, "
                                 "gg_dist_detach, then make a new communicator; eager calls and local graphs work",
                                 fn, d->rank, d->failure[0] ? d->failure : "after an NCCL error");
    pthread_mutex_unlock(&d->lock);
    return st;
}

void gg_dist_leave(gg_ctx *ctx) { pthread_mutex_unlock(&ctx->dist->lock); }

/* The abort of another thread than the owner (or of the owner's own log callback): tell the owner's waits to stop,
 * then take the lock. Returns whether this call aborted the communicator: its ERROR line is the caller's to log, with
 * no lock held (the log callback may call gg_dist_abort itself). */
static int abort_from_outside(gg_ctx *ctx, const char *why) {
    gg_dist *d = ctx->dist;
    int none = 0;
    if (atomic_compare_exchange_strong(&d->abort_requested, &none, 1)) {
        snprintf(d->abort_why, sizeof d->abort_why, "%s", why);
        atomic_store(&d->abort_requested, 2);
    }
    pthread_mutex_lock(&d->lock);
    const int alive = d->comm != NULL;
    gg_dist_abort_now(ctx, why);
    pthread_mutex_unlock(&d->lock);
    return alive;
}

gg_status gg_dist_abort(gg_ctx *ctx) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_abort: ctx is NULL");
    /* The owner thread may be making or releasing the state at this moment (a failing attach, a detach): the state is
     * pinned under dist_publish, which is not held while this waits for the communicator's lock (the owner may be
     * holding that lock in a log callback that calls gg_dist_abort too). */
    static const char why[] = "gg_dist_abort was called";
    pthread_mutex_lock(&ctx->dist_publish);
    const gg_dist *d = ctx->dist;
    if (d) atomic_fetch_add(&ctx->dist_aborters, 1);
    pthread_mutex_unlock(&ctx->dist_publish);
    if (!d) return GG_SUCCESS;
    const int rank = d->rank;
    const int aborted = abort_from_outside(ctx, why);
    atomic_fetch_sub(&ctx->dist_aborters, 1); /* d may be freed from here on */
    if (aborted) gg_log(ctx, GG_LOG_ERROR, "rank %d: %s: the communicator is aborted", rank, why);
    return GG_SUCCESS;
}

/* The asynchronous error of the communicator, written into why, when the owner is not using it (else its own
 * calls see the error). */
static void check_async(gg_dist *d, char *why, size_t bytes) {
    if (pthread_mutex_trylock(&d->lock) != 0) return;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = d->comm ? ncclCommGetAsyncError((ncclComm_t)d->comm, &state) : ncclSuccess;
    const ncclResult_t err = r != ncclSuccess ? r : state;
    if (err != ncclSuccess && err != ncclInProgress)
        snprintf(why, bytes, "NCCL reported an asynchronous error (%s)", ncclGetErrorString(err));
    pthread_mutex_unlock(&d->lock);
}

/* The replays watched, oldest first: complete (dropped), failed on the GPU, or past the deadline (why set); else
 * *running_since: when the oldest replay still running began (-1: none). A replay begins when it was launched or,
 * queued behind earlier ones, when the one before it was seen complete: a host that runs far ahead of the GPU
 * queues replays whose launch is long past by the time they run, and those are not late. Called with w->mu held. */
/* Drops the replays seen complete, oldest first; returns the query of the oldest one left (cudaSuccess: none left).
 * Called with w->mu held. */
static cudaError_t drop_complete(gg_watchdog *w) {
    cudaError_t e = cudaSuccess;
    int dropped = 0;
    while (w->pending > 0 && (e = cudaEventQuery(w->ev[w->oldest])) == cudaSuccess) {
        w->oldest = (w->oldest + 1) % WATCH_SLOTS;
        --w->pending;
        dropped = 1;
    }
    if (dropped && w->pending > 0) { /* the next one runs from now at the latest */
        const double now = gg_dist_now_s();
        if (w->since[w->oldest] < now) w->since[w->oldest] = now;
    }
    return w->pending > 0 ? e : cudaSuccess;
}

static void check_replays(gg_watchdog *w, char *why, size_t bytes, double *running_since) {
    *running_since = -1.0;
    const cudaError_t e = drop_complete(w);
    if (w->pending == 0) return;
    if (e != cudaErrorNotReady) {
        snprintf(why, bytes, "%s failed on the GPU (%s)", w->what[w->oldest], cudaGetErrorName(e));
        return;
    }
    const int limit = gg_dist_timeout_s(GG_DIST_TIMEOUT_STEP);
    if (gg_dist_now_s() - w->since[w->oldest] >= limit)
        snprintf(why, bytes, "%s had not finished after %d s (%s): another rank stopped, or is stuck",
                 w->what[w->oldest], limit, gg_dist_timeout_env(GG_DIST_TIMEOUT_STEP));
    else
        *running_since = w->since[w->oldest];
}

static void *watch(void *arg) {
    gg_watchdog *w = arg;
    gg_ctx *ctx = w->ctx;
    (void)cudaSetDevice(ctx->config.device); /* this thread's queries are on the context's device */
    /* Relaxed: this thread's event queries must never invalidate a capture another thread has begun in the global
     * mode (the application's own, say). */
    enum cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&relaxed);
    gg_dist_wait replay; /* the notices of the oldest replay still running, which began at `watched` */
    double watched = -1.0;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += WATCH_PERIOD_NS;
        if (until.tv_nsec >= 1000000000L) until.tv_sec += 1, until.tv_nsec -= 1000000000L;
        (void)pthread_cond_timedwait(&w->wake, &w->mu, &until);
        if (w->stop) break;
        char why[GG_MSG_BYTES] = "";
        double running_since = -1.0;
        check_replays(w, why, sizeof why, &running_since);
        const char *running = running_since >= 0.0 ? w->what[w->oldest] : NULL;
        pthread_mutex_unlock(&w->mu);
        if (running_since >= 0.0) { /* a notice when one is due (outside w->mu: the callback is the user's) */
            if (running_since != watched) {
                gg_dist_wait_begin(&replay, ctx, ctx->dist->rank, running, GG_DIST_TIMEOUT_STEP);
                gg_dist_wait_since(&replay, running_since);
                watched = running_since;
            }
            (void)gg_dist_wait_over(&replay); /* the deadline itself is check_replays' */
        }
        if (!why[0]) check_async(ctx->dist, why, sizeof why);
        if (why[0]) {
            if (abort_from_outside(ctx, why))
                gg_log(ctx, GG_LOG_ERROR, "rank %d: %s: the communicator is aborted", ctx->dist->rank, why);
            pthread_mutex_lock(&w->mu);
            break; /* nothing left to watch */
        }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void destroy_events(gg_watchdog *w) {
    for (int i = 0; i < w->events; ++i) (void)cudaEventDestroy(w->ev[i]);
}

gg_status gg_watchdog_start(gg_ctx *ctx, const char *fn) {
    gg_dist *d = ctx->dist;
    gg_watchdog *w = calloc(1, sizeof *w);
    if (!w) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    w->ctx = ctx;
    int saved = 0;
    gg_status status = gg_device_enter(ctx, fn, &saved);
    if (status != GG_SUCCESS) {
        free(w);
        return status;
    }
    cudaError_t e = cudaSuccess;
    for (; w->events < WATCH_SLOTS && e == cudaSuccess; ++w->events)
        e = cudaEventCreateWithFlags(&w->ev[w->events], cudaEventDisableTiming);
    if (e != cudaSuccess) --w->events; /* the one that failed */
    gg_device_leave(ctx, saved);
    if (e != cudaSuccess) {
        destroy_events(w);
        free(w);
        return gg_fail_cuda(ctx, e, "the watchdog's events");
    }
    pthread_condattr_t attr;
    int made = pthread_condattr_init(&attr);
    if (made == 0) made = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (made == 0) made = pthread_cond_init(&w->wake, &attr);
    (void)pthread_condattr_destroy(&attr);
    const int cond_made = made == 0;
    if (made == 0) made = pthread_mutex_init(&w->mu, NULL);
    const int mu_made = made == 0;
    if (made == 0) made = pthread_create(&w->thread, NULL, watch, w);
    if (made != 0) {
        if (mu_made) pthread_mutex_destroy(&w->mu);
        if (cond_made) pthread_cond_destroy(&w->wake);
        destroy_events(w);
        free(w);
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: the watchdog thread could not be started (error %d)", fn,
                       made);
    }
    d->watchdog = w;
    return GG_SUCCESS;
}

void gg_watchdog_stop(gg_dist *d) {
    gg_watchdog *w = d->watchdog;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    destroy_events(w);
    free(w);
    d->watchdog = NULL;
}

/* Launched into a stream being captured (the application's own graph): nothing runs yet, and an event recorded
 * there cannot be queried. Watched when that graph runs is beyond gradgraph's view. */
static int into_capture(cudaStream_t stream) {
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) == cudaSuccess && capturing == cudaStreamCaptureStatusNone) return 0;
    (void)cudaGetLastError();
    return 1;
}

gg_status gg_dist_await_replay_slot(gg_ctx *ctx, const char *fn, cudaStream_t stream, int *watched) {
    gg_dist *d = ctx->dist;
    gg_watchdog *w = d->watchdog;
    *watched = w && !into_capture(stream);
    if (!*watched) return GG_SUCCESS;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int full = w->pending == WATCH_SLOTS;
        if (full) { /* only then: no event query on the launch path otherwise */
            (void)drop_complete(w); /* a replay that failed stays: the watchdog aborts on it */
            full = w->pending == WATCH_SLOTS;
        }
        pthread_mutex_unlock(&w->mu);
        if (!full) return GG_SUCCESS;
        if (atomic_load(&d->abort_requested)) { /* the watchdog's (a replay past the deadline), or gg_dist_abort */
            gg_dist_abort_now(ctx, NULL);
            return gg_fail(ctx, GG_ERROR_NCCL,
                           "%s: rank %d: waiting for the oldest of %d replays of syncing graphs in flight was "
                           "interrupted by an abort (%s): the communicator is aborted (an attached one too: do not "
                           "destroy it)",
                           fn, d->rank, WATCH_SLOTS, d->failure);
        }
        gg_dist_pause();
    }
}

void gg_dist_watch(gg_ctx *ctx, cudaStream_t stream, const char *what) {
    gg_watchdog *w = ctx->dist->watchdog;
    pthread_mutex_lock(&w->mu);
    /* gg_dist_await_replay_slot made room before the enqueue, in the same section (the watchdog only drops) */
    const int slot = (w->oldest + w->pending) % WATCH_SLOTS;
    const cudaError_t e = w->pending < WATCH_SLOTS ? cudaEventRecord(w->ev[slot], stream) : cudaErrorNotReady;
    if (e == cudaSuccess) {
        w->since[slot] = gg_dist_now_s();
        w->what[slot] = what;
        ++w->pending;
    }
    pthread_mutex_unlock(&w->mu);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        gg_log(ctx, GG_LOG_WARN, "the watchdog could not record its event after %s (%s): it is not watched", what,
               cudaGetErrorName(e));
    }
}
