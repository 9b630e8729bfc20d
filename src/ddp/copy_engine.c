/*
 * copy_engine.c - the copy-engine all-reduce (copy_engine.h; its pieces' arithmetic is in ce_layout.c): the staging
 * and its window, the user's symmetric gradient buffers (gg_dist_alloc / gg_dist_free), and the enqueue of one
 * gradient's pieces.
 */
#include "copy_engine.h"

#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#include "comm_internal.h"
#include "kernels/gg_kernels.h"

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define GG_CE_BUILT 1
#else
#define GG_CE_BUILT 0
/* Every copy-engine entry point in a build against an older NCCL (config checks keep copy_engines off there). */
static gg_status not_built(gg_ctx *ctx, const char *fn) {
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED, "%s: copy-engine reductions need NCCL 2.28 or later", fn);
}
#endif

gg_status gg_ce_check_supported(gg_ctx *ctx, const char *fn) {
#if GG_CE_BUILT
    int version = 0;
    const ncclResult_t r = ncclGetVersion(&version);
    if (r != ncclSuccess) { /* NCCL's error, not a missing feature: the message names it */
        char what[128];
        snprintf(what, sizeof what, "%s: ncclGetVersion (whether NCCL has copy-engine collectives)", fn);
        return gg_dist_fail_nccl(ctx, r, what);
    }
    if (version >= NCCL_VERSION(2, 28, 0)) return GG_SUCCESS;
#endif
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                   "%s: config->copy_engines = 1, but the NCCL gradgraph runs with has no copy-engine collectives "
                   "(2.28 or later needed)",
                   fn);
}

gg_status gg_ce_alloc(gg_ctx *ctx, const char *fn) {
#if GG_CE_BUILT
    gg_dist *d = ctx->dist;
    d->ce_piece_bytes = d->config.bucket_bytes & ~(size_t)4095;
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, fn, &saved));
    const ncclResult_t r = ncclMemAlloc(&d->ce_staging, 2 * d->ce_piece_bytes);
    gg_device_leave(ctx, saved);
    if (r != ncclSuccess) {
        d->ce_staging = NULL;
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: ncclMemAlloc of the %zu MiB copy-engine staging: %s", fn,
                       (2 * d->ce_piece_bytes) >> 20, ncclGetErrorString(r));
    }
    return GG_SUCCESS;
#else
    return not_built(ctx, fn);
#endif
}

#if GG_CE_BUILT
/* The staging as one symmetric window on the communicator. Inside a group NCCL fills the window in at ncclGroupEnd:
 * it must be written where it is kept. */
static ncclResult_t register_staging(gg_dist *d) {
    d->ce_window = NULL;
    return ncclCommWindowRegister((ncclComm_t)d->comm, d->ce_staging, 2 * d->ce_piece_bytes,
                                  (ncclWindow_t *)&d->ce_window, NCCL_WIN_COLL_SYMMETRIC);
}

/* A small all-to-all, all-gather and all-reduce on the staging (both halves lie in its window). */
static ncclResult_t enqueue_warm_up(gg_dist *d) {
    enum { ELEMS = 4096 }; /* floats per rank, fewer when a piece is smaller */
    const ncclComm_t comm = (ncclComm_t)d->comm;
    const size_t fit = d->ce_piece_bytes / (2 * sizeof(float) * (size_t)d->size), n = fit < ELEMS ? fit : ELEMS;
    char *send = d->ce_staging, *recv = send + d->ce_piece_bytes / 2;
    ncclResult_t r = ncclAlltoAll(send, recv, n, ncclFloat32, comm, d->stream);
    if (r == ncclSuccess) r = ncclAllGather(send, recv, n, ncclFloat32, comm, d->stream);
    if (r == ncclSuccess) r = ncclAllReduce(recv, recv, n, ncclFloat32, ncclSum, comm, d->stream);
    return r;
}

/* step on every context, inside one NCCL group (collective calls for several ranks from one thread), each on its
 * device; the caller's device is restored. */
static gg_status on_every_rank(gg_ctx *const *ctxs, int count, const char *fn, const char *what,
                               ncclResult_t (*step)(gg_dist *)) {
    int caller_device = 0;
    (void)cudaGetDevice(&caller_device);
    const ncclResult_t started = ncclGroupStart();
    ncclResult_t r = started;
    for (int i = 0; i < count && r == ncclSuccess; ++i) {
        (void)cudaSetDevice(ctxs[i]->config.device);
        r = step(ctxs[i]->dist);
    }
    if (started == ncclSuccess) { /* only a group that started ends: NCCL refuses an end outside a group */
        const ncclResult_t ended = ncclGroupEnd();
        if (r == ncclSuccess) r = ended;
    }
    char where[160];
    snprintf(where, sizeof where, "%s: %s", fn, what);
    const gg_status status = gg_dist_group_done(ctxs, count, r, where);
    (void)cudaSetDevice(caller_device);
    return status;
}
#endif

gg_status gg_ce_setup(gg_ctx *const *ctxs, int count, const char *fn) {
#if GG_CE_BUILT
    GG_TRY(on_every_rank(ctxs, count, fn, "ncclCommWindowRegister (the copy-engine staging)", register_staging));
    return on_every_rank(ctxs, count, fn, "the copy-engine warm-up (ncclAlltoAll, ncclAllGather, ncclAllReduce)",
                         enqueue_warm_up);
#else
    (void)count;
    return not_built(ctxs[0], fn);
#endif
}

/* Releases a buffer from ncclMemAlloc (only made when GG_CE_BUILT) or cudaMalloc: NCCL's result (cudaFree's is not
 * one a caller can act on). */
static ncclResult_t release_memory(void *p, int nccl_memory) {
#if GG_CE_BUILT
    if (nccl_memory) return ncclMemFree(p);
#endif
    (void)nccl_memory;
    (void)cudaFree(p);
    return ncclSuccess;
}

/* release_memory for good: nobody holds the buffer after this, so a failed ncclMemFree can only be told (a WARN
 * naming NCCL's error), never retried. */
static void free_memory(gg_ctx *ctx, void *p, size_t bytes, int nccl_memory, const char *what) {
    const ncclResult_t r = release_memory(p, nccl_memory);
    if (r != ncclSuccess)
        gg_log(ctx, GG_LOG_WARN, "ncclMemFree of %s (%zu bytes at %p) failed: %s; the memory is lost", what, bytes, p,
               ncclGetErrorString(r));
}

void gg_ce_free(gg_ctx *ctx) {
    gg_dist *d = ctx->dist;
    if (d->ce_staging) free_memory(ctx, d->ce_staging, 2 * d->ce_piece_bytes, 1, "the copy-engine staging");
    d->ce_staging = NULL;
    d->ce_window = NULL;
    for (int i = 0; i < d->n_buffers; ++i) /* the user's, not freed before the communicator went */
        free_memory(ctx, d->buffers[i].ptr, d->buffers[i].bytes, d->buffers[i].nccl_memory, "a gg_dist_alloc buffer");
    free(d->buffers);
    d->buffers = NULL;
    d->n_buffers = 0;
}

int gg_ce_in_window(const gg_dist *d, const void *p, size_t bytes) {
    const char *c = p;
    for (int i = 0; i < d->n_buffers; ++i) {
        const char *lo = d->buffers[i].ptr;
        const size_t size = d->buffers[i].bytes;
        if (d->buffers[i].window && c >= lo && bytes <= size && (size_t)(c - lo) <= size - bytes) return 1;
    }
    return 0;
}

#if GG_CE_BUILT
/* A step that broke the surrounding capture (NCCL's copy-engine path inside CUDA graphs is young): name it, instead
 * of the next, innocent call. */
static gg_status step_ok(gg_ctx *ctx, cudaStream_t s, const char *step) {
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(s, &status);
    if (e == cudaSuccess && status != cudaStreamCaptureStatusInvalidated) return GG_SUCCESS;
    return gg_fail(ctx, GG_ERROR_CUDA, "copy-engine all-reduce: %s %s (%s)", step,
                   e == cudaSuccess ? "invalidated the stream capture" : "left the stream unusable",
                   cudaGetErrorString(cudaPeekAtLastError()));
}
#endif

gg_status gg_ce_all_reduce(gg_ctx *ctx, void *p, size_t n, size_t elem) {
#if GG_CE_BUILT
    gg_dist *d = ctx->dist;
    const ncclComm_t comm = (ncclComm_t)d->comm;
    const ncclDataType_t type = elem == 4 ? ncclFloat32 : ncclBfloat16;
    const gg_dtype dtype = elem == 4 ? GG_DT_F32 : GG_DT_BF16;
    const float scale = gg_dist_term_scale(d);
    const size_t ranks = (size_t)d->size, piece = d->ce_piece_bytes / elem;
    char *data = p, *shares = d->ce_staging;
    size_t at = 0;
    for (size_t q; (q = gg_ce_share(n, at, d->size, piece)) != 0; at += q * ranks) {
        char *first = data + at * elem, *mine = first + (size_t)d->rank * q * elem;
        GG_NCCL_TRY(ctx, ncclAlltoAll, (first, shares, q, type, comm, d->stream)); /* rank j's share of mine -> row j */
        GG_TRY(step_ok(ctx, d->stream, "ncclAlltoAll"));
        GG_CUDA_TRY(ctx, gg_k_sum_ranks(shares, mine, dtype, q, d->size, scale, ctx->sm_count, d->stream));
        GG_NCCL_TRY(ctx, ncclAllGather, (mine, first, q, type, comm, d->stream)); /* in place */
        GG_TRY(step_ok(ctx, d->stream, "ncclAllGather"));
    }
    if (at < n) /* fewer than `ranks` elements */
        GG_NCCL_TRY(ctx, ncclAllReduce, (data + at * elem, data + at * elem, n - at, type,
                                         d->config.op == GG_REDUCE_AVERAGE ? ncclAvg : ncclSum, comm, d->stream));
    return GG_SUCCESS;
#else
    (void)p, (void)n, (void)elem;
    return not_built(ctx, "gg_ce_all_reduce");
#endif
}

gg_status gg_ce_all_gather(gg_ctx *ctx, void *base, size_t count, size_t elem) {
#if GG_CE_BUILT
    gg_dist *d = ctx->dist;
    char *mine = (char *)base + (size_t)d->rank * count * elem;
    GG_NCCL_TRY(ctx, ncclAllGather, (mine, base, count, elem == 4 ? ncclFloat32 : ncclBfloat16, (ncclComm_t)d->comm,
                                     d->stream));
    return step_ok(ctx, d->stream, "ncclAllGather");
#else
    (void)base, (void)count, (void)elem;
    return not_built(ctx, "gg_ce_all_gather");
#endif
}

/* gg_dist_alloc's agreement with copy engines on (the step for messages). */
#define ALLOCATED "whether every rank allocated its gg_dist_alloc buffer"

/* gg_dist_alloc with copy engines on (device entered): local allocation (host_ok: the list could grow), the
 * ranks' agreement, the collective registration. A local failure never leaves the others waiting in it. */
static gg_status alloc_window(gg_ctx *ctx, const char *fn, int host_ok, gg_dist_buffer *b) {
#if GG_CE_BUILT
    const ncclResult_t made = host_ok ? ncclMemAlloc(&b->ptr, b->bytes) : ncclSuccess;
    if (made != ncclSuccess) b->ptr = NULL;
    int all = 0;
    const gg_status agreed = gg_dist_all_ok(ctx, host_ok && made == ncclSuccess, ALLOCATED, &all);
    if (agreed != GG_SUCCESS) { /* the buffer is listed nowhere yet: freed here, or never */
        if (b->ptr) free_memory(ctx, b->ptr, b->bytes, 1, "a gg_dist_alloc buffer the ranks could not agree on");
        return agreed;
    }
    if (!all) {
        if (b->ptr) free_memory(ctx, b->ptr, b->bytes, 1, "a gg_dist_alloc buffer another rank could not match");
        if (!host_ok) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        return made != ncclSuccess
                   ? gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: ncclMemAlloc of %zu bytes: %s", fn, b->bytes,
                             ncclGetErrorString(made))
                   : gg_fail(ctx, GG_ERROR_PEER, "%s: another rank could not allocate its buffer; none was made", fn);
    }
    b->nccl_memory = 1;
    const ncclResult_t r = ncclCommWindowRegister((ncclComm_t)ctx->dist->comm, b->ptr, b->bytes,
                                                  (ncclWindow_t *)&b->window, NCCL_WIN_COLL_SYMMETRIC);
    const gg_status status = gg_dist_nccl_done_or_abort(ctx, r, "gg_dist_alloc: ncclCommWindowRegister");
    if (status != GG_SUCCESS) /* after the abort, which released the window */
        free_memory(ctx, b->ptr, b->bytes, 1, "a gg_dist_alloc buffer whose window failed");
    return status;
#else
    (void)host_ok, (void)b;
    return not_built(ctx, fn);
#endif
}

/* gg_dist_alloc with the context claimed: the communicator's state is the owner thread's. */
static gg_status alloc_claimed(gg_ctx *ctx, const char *fn, size_t bytes, void **out) {
    gg_dist *d = ctx->dist;
    if (!d) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the context has no communicator", fn);
    GG_TRY(gg_dist_enter(ctx, fn));
    gg_dist_buffer *grown = realloc(d->buffers, (size_t)(d->n_buffers + 1) * sizeof *grown);
    if (grown) d->buffers = grown;
    int saved = 0;
    const gg_status entered = gg_device_enter(ctx, fn, &saved);
    if (entered != GG_SUCCESS) {
        if (d->ce_on) gg_dist_all_ok_failed(ctx, ALLOCATED); /* collective: the others must not wait for this rank */
        gg_dist_leave(ctx);
        return entered;
    }
    gg_dist_buffer b = {NULL, bytes, 0, NULL};
    gg_status status = GG_SUCCESS;
    if (d->ce_on) { /* collective: the ranks agree first, so a local failure (host memory too) fails them all */
        status = alloc_window(ctx, fn, grown != NULL, &b);
    } else if (!grown) {
        status = gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    } else {
        const cudaError_t e = cudaMalloc(&b.ptr, bytes);
        if (e != cudaSuccess)
            status = gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: cudaMalloc of %zu bytes: %s", fn, bytes,
                             cudaGetErrorString(e));
    }
    gg_device_leave(ctx, saved);
    gg_dist_leave(ctx);
    if (status != GG_SUCCESS) return status;
    d->buffers[d->n_buffers++] = b;
    *out = b.ptr;
    return GG_SUCCESS;
}

gg_status gg_dist_alloc(gg_ctx *ctx, size_t bytes, void **out) {
    static const char fn[] = "gg_dist_alloc";
    if (out) *out = NULL;
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    GG_TRY(gg_refuse_in_step_callback(ctx, fn));
    if (!out) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (bytes == 0) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: bytes is 0", fn);
    GG_TRY(gg_ctx_claim(ctx, fn)); /* before the communicator's state is read: another thread may be inside */
    const gg_status status = alloc_claimed(ctx, fn, bytes, out);
    gg_ctx_release(ctx);
    return status;
}

/* gg_dist_free's end, with the communicator's lock released: frees buffer b (unlisted, its window released). cudaFree
 * waits for the device, and a replay stuck on a dead peer would keep it waiting: under the lock, the watchdog (and
 * gg_dist_abort) could not take it to abort that replay, and nothing would ever end. A failed ncclMemFree lists the
 * buffer again, so that the communicator's release tries again instead of losing it, and fails the call: the driver
 * refused to release NCCL memory, the device is in doubt, and GG_ERROR_NCCL promises an aborted communicator (the
 * ranks are in step: the collective part is over). */
static gg_status free_unlisted(gg_ctx *ctx, gg_dist_buffer b) {
    gg_dist *d = ctx->dist;
    const ncclResult_t r = release_memory(b.ptr, b.nccl_memory);
    if (r == ncclSuccess) return GG_SUCCESS;
    pthread_mutex_lock(&d->lock);
    d->buffers[d->n_buffers++] = b; /* its slot is still there: it was the last taken */
    pthread_mutex_unlock(&d->lock);
    return gg_dist_nccl_done_or_abort(ctx, r, "gg_dist_free: ncclMemFree");
}

/* gg_dist_free with the context claimed. */
static gg_status free_claimed(gg_ctx *ctx, const char *fn, void *ptr) {
    gg_dist *d = ctx->dist;
    if (!d)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: ptr was not allocated by gg_dist_alloc on this context (or was freed already)", fn);
    pthread_mutex_lock(&d->lock); /* not gg_dist_enter: after an abort the memory is still freed here */
    int i = 0;
    while (i < d->n_buffers && d->buffers[i].ptr != ptr) ++i;
    const int found = i < d->n_buffers;
    int saved = 0;
    gg_status status = !found && !(d->ce_on && d->comm) /* nothing collective to join */
                           ? gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                                     "%s: ptr was not allocated by gg_dist_alloc on this context (or was freed "
                                     "already)", fn)
                           : gg_device_enter(ctx, fn, &saved);
    if (status != GG_SUCCESS) {
        pthread_mutex_unlock(&d->lock);
        return status;
    }
    if (d->ce_on && d->comm) { /* the release of a window is collective: agree first */
        int all = 0;
        status = gg_dist_all_ok(ctx, found, "whether every rank frees a gg_dist_alloc buffer", &all);
        if (status == GG_SUCCESS && !all)
            status = found ? gg_fail(ctx, GG_ERROR_PEER, "%s: another rank passed a pointer it does not own; "
                                                         "nothing was freed", fn)
                           : gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: ptr was not allocated by gg_dist_alloc on "
                                                                    "this context (or was freed already)", fn);
#if GG_CE_BUILT
        if (status == GG_SUCCESS && found && d->buffers[i].window) {
            const ncclResult_t r = ncclCommWindowDeregister((ncclComm_t)d->comm, (ncclWindow_t)d->buffers[i].window);
            status = gg_dist_nccl_done_or_abort(ctx, r, "gg_dist_free: ncclCommWindowDeregister");
            if (status == GG_SUCCESS) d->buffers[i].window = NULL; /* released, whatever the free below does */
        }
#endif
    }
    gg_dist_buffer unlisted = {0}; /* else it stays listed: freed when the communicator goes */
    if (status == GG_SUCCESS) {
        unlisted = d->buffers[i];
        d->buffers[i] = d->buffers[--d->n_buffers];
        /* a window's gradients were exchanged in place by the graphs captured on it: memory allocated later at the
         * same address is no window, and a replay keyed on the address alone would exchange it all the same */
        if (d->ce_on) ctx->capture_generation++;
    }
    pthread_mutex_unlock(&d->lock);
    if (status == GG_SUCCESS) status = free_unlisted(ctx, unlisted);
    gg_device_leave(ctx, saved);
    return status;
}

gg_status gg_dist_free(gg_ctx *ctx, void *ptr) {
    static const char fn[] = "gg_dist_free";
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!ptr) return gg_refuse_in_step_callback(ctx, fn); /* as gg_ctx_claim_teardown refuses the others there */
    /* before the communicator's state is read (another thread may be inside); a release, run with an application's
     * CUDA error pending too: with copy engines on it is collective, and a refused rank would leave the others
     * waiting for it */
    GG_TRY(gg_ctx_claim_teardown(ctx, fn));
    const gg_status status = free_claimed(ctx, fn, ptr);
    gg_ctx_release(ctx);
    return status;
}
