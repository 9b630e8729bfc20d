/*
 * copy_engine.c - the copy-engine all-reduce (copy_engine.h): its pieces, the staging and its window, the user's
 * symmetric gradient buffers (gg_dist_alloc / gg_dist_free), and the enqueue of one gradient's pieces.
 */
#include "copy_engine.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/gg_kernels.h"

size_t gg_ce_share(size_t n, size_t at, int ranks, size_t piece_elems) {
    if (ranks < 1 || at >= n || n - at < (size_t)ranks) return 0;
    size_t q = (n - at) / (size_t)ranks, most = piece_elems / (size_t)ranks;
    if (most == 0) most = 1;
    return q < most ? q : most;
}

#ifdef GG_HAVE_NCCL
#include <nccl.h>

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define GG_CE_BUILT 1
#else
#define GG_CE_BUILT 0
#endif

int gg_ce_supported(void) {
    int version = 0;
    return GG_CE_BUILT && ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 28, 0);
}

static gg_status fail_ce(gg_ctx *ctx, ncclResult_t r, const char *what) {
    return gg_fail(ctx, GG_ERROR_NCCL, "%s failed: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(NULL));
}

#define CE_TRY(ctx, call)                                                                                          \
    do {                                                                                                           \
        const ncclResult_t r_ = (call);                                                                            \
        if (r_ != ncclSuccess) return fail_ce((ctx), r_, #call);                                                   \
    } while (0)

#if GG_CE_BUILT
/* NCCL memory of `bytes` on ctx's device, registered as one symmetric window on its communicator (collective). */
static gg_status alloc_window(gg_ctx *ctx, const char *fn, size_t bytes, void **ptr, void **window) {
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    ncclResult_t r = ncclMemAlloc(ptr, bytes);
    if (r != ncclSuccess) {
        gg_device_leave(saved);
        *ptr = NULL;
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: ncclMemAlloc of %zu bytes: %s", fn, bytes,
                       ncclGetErrorString(r));
    }
    ncclWindow_t win = NULL;
    r = ncclCommWindowRegister((ncclComm_t)ctx->dist->comm, *ptr, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess) (void)ncclMemFree(*ptr);
    gg_device_leave(saved);
    if (r != ncclSuccess) {
        *ptr = NULL;
        char what[160];
        snprintf(what, sizeof what, "%s: ncclCommWindowRegister", fn);
        return fail_ce(ctx, r, what);
    }
    *window = win;
    return GG_SUCCESS;
}
#endif

gg_status gg_ce_alloc(gg_ctx *ctx, const char *fn) {
    gg_dist *d = ctx->dist;
    d->ce_piece_bytes = d->config.bucket_bytes & ~(size_t)4095;
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    const ncclResult_t r = ncclMemAlloc(&d->ce_staging, d->ce_piece_bytes);
    gg_device_leave(saved);
    if (r != ncclSuccess) {
        d->ce_staging = NULL;
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: ncclMemAlloc of the %zu MiB copy-engine staging: %s", fn,
                       d->ce_piece_bytes >> 20, ncclGetErrorString(r));
    }
    return GG_SUCCESS;
}

#if GG_CE_BUILT
/* The staging as one symmetric window on the communicator. */
static ncclResult_t register_staging(gg_dist *d) {
    ncclWindow_t win = NULL;
    const ncclResult_t r = ncclCommWindowRegister((ncclComm_t)d->comm, d->ce_staging, d->ce_piece_bytes, &win,
                                                  NCCL_WIN_COLL_SYMMETRIC);
    d->ce_window = win;
    return r;
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
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < count && r == ncclSuccess; ++i) {
        (void)cudaSetDevice(ctxs[i]->config.device);
        r = step(ctxs[i]->dist);
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (r == ncclSuccess) r = ended;
    (void)cudaSetDevice(caller_device);
    if (r == ncclSuccess) return GG_SUCCESS;
    char where[160];
    snprintf(where, sizeof where, "%s: %s", fn, what);
    return fail_ce(ctxs[0], r, where);
}
#endif

gg_status gg_ce_setup(gg_ctx *const *ctxs, int count, const char *fn) {
#if GG_CE_BUILT
    GG_TRY(on_every_rank(ctxs, count, fn, "ncclCommWindowRegister (the copy-engine staging)", register_staging));
    return on_every_rank(ctxs, count, fn, "the copy-engine warm-up (ncclAlltoAll, ncclAllGather, ncclAllReduce)",
                         enqueue_warm_up);
#else
    return gg_fail(ctxs[0], GG_ERROR_UNSUPPORTED, "%s: copy-engine reductions need NCCL 2.28 or later", fn);
#endif
}

void gg_ce_free(gg_dist *d) {
    if (d->ce_staging) (void)ncclMemFree(d->ce_staging);
    d->ce_staging = NULL;
    d->ce_window = NULL;
    for (int i = 0; i < d->n_buffers; ++i) { /* the user's, not freed before the communicator went */
        if (d->buffers[i].window) (void)ncclMemFree(d->buffers[i].ptr);
        else (void)cudaFree(d->buffers[i].ptr);
    }
    free(d->buffers);
    d->buffers = NULL;
    d->n_buffers = 0;
}

int gg_ce_in_window(const gg_dist *d, const void *p, size_t bytes) {
    const char *c = p;
    for (int i = 0; i < d->n_buffers; ++i) {
        const char *lo = d->buffers[i].ptr;
        if (d->buffers[i].window && c >= lo && bytes <= d->buffers[i].bytes && c - lo <= (ptrdiff_t)(d->buffers[i].bytes - bytes))
            return 1;
    }
    return 0;
}

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

gg_status gg_ce_all_reduce(gg_ctx *ctx, void *p, size_t n, size_t elem) {
#if GG_CE_BUILT
    gg_dist *d = ctx->dist;
    const ncclComm_t comm = (ncclComm_t)d->comm;
    const ncclDataType_t type = elem == 4 ? ncclFloat32 : ncclBfloat16;
    const gg_dtype dtype = elem == 4 ? GG_DT_F32 : GG_DT_BF16;
    const float scale = d->config.op == GG_REDUCE_AVERAGE ? 1.0f / (float)d->size : 1.0f;
    const size_t ranks = (size_t)d->size, piece = d->ce_piece_bytes / elem;
    char *data = p, *shares = d->ce_staging;
    size_t at = 0;
    for (size_t q; (q = gg_ce_share(n, at, d->size, piece)) != 0; at += q * ranks) {
        char *first = data + at * elem, *mine = first + (size_t)d->rank * q * elem;
        CE_TRY(ctx, ncclAlltoAll(first, shares, q, type, comm, d->stream)); /* rank j's share of mine -> row j */
        GG_TRY(step_ok(ctx, d->stream, "ncclAlltoAll"));
        GG_CUDA_TRY(ctx, gg_k_sum_ranks(shares, mine, dtype, q, d->size, scale, ctx->sm_count, d->stream));
        CE_TRY(ctx, ncclAllGather(mine, first, q, type, comm, d->stream)); /* in place */
        GG_TRY(step_ok(ctx, d->stream, "ncclAllGather"));
    }
    if (at < n) /* fewer than `ranks` elements */
        CE_TRY(ctx, ncclAllReduce(data + at * elem, data + at * elem, n - at, type,
                                  d->config.op == GG_REDUCE_AVERAGE ? ncclAvg : ncclSum, comm, d->stream));
    return GG_SUCCESS;
#else
    (void)p, (void)n, (void)elem;
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED, "copy-engine reductions need NCCL 2.28 or later");
#endif
}

gg_status gg_dist_alloc(gg_ctx *ctx, size_t bytes, void **out) {
    static const char fn[] = "gg_dist_alloc";
    if (out) *out = NULL;
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!out) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (bytes == 0) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: bytes is 0", fn);
    gg_dist *d = ctx->dist;
    if (!d) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the context has no communicator", fn);
    if (!d->comm) return gg_fail(ctx, GG_ERROR_NCCL, "%s: the communicator was aborted after an error", fn);
    gg_dist_buffer *grown = realloc(d->buffers, (size_t)(d->n_buffers + 1) * sizeof *grown);
    if (!grown) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    d->buffers = grown;
    gg_dist_buffer b = {NULL, bytes, NULL};
    if (d->ce_on) {
#if GG_CE_BUILT
        GG_TRY(alloc_window(ctx, fn, bytes, &b.ptr, &b.window));
#endif
    } else {
        int saved = 0;
        GG_TRY(gg_device_enter(ctx, &saved));
        const cudaError_t e = cudaMalloc(&b.ptr, bytes);
        gg_device_leave(saved);
        if (e != cudaSuccess) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: cudaMalloc of %zu bytes: %s", fn,
                                             bytes, cudaGetErrorString(e));
    }
    d->buffers[d->n_buffers++] = b;
    *out = b.ptr;
    return GG_SUCCESS;
}

gg_status gg_dist_free(gg_ctx *ctx, void *ptr) {
    static const char fn[] = "gg_dist_free";
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!ptr) return GG_SUCCESS;
    gg_dist *d = ctx->dist;
    int i = 0;
    while (d && i < d->n_buffers && d->buffers[i].ptr != ptr) ++i;
    if (!d || i == d->n_buffers)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: ptr was not allocated by gg_dist_alloc on this context "
                                                       "(or was freed already)", fn);
    const gg_dist_buffer b = d->buffers[i];
    d->buffers[i] = d->buffers[--d->n_buffers];
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    gg_status status = GG_SUCCESS;
    if (b.window) {
#if GG_CE_BUILT
        const ncclResult_t r = d->comm ? ncclCommWindowDeregister((ncclComm_t)d->comm, (ncclWindow_t)b.window)
                                       : ncclSuccess; /* an aborted communicator took its windows with it */
        if (r != ncclSuccess) status = fail_ce(ctx, r, "gg_dist_free: ncclCommWindowDeregister");
#endif
        (void)ncclMemFree(b.ptr);
    } else {
        (void)cudaFree(b.ptr);
    }
    gg_device_leave(saved);
    return status;
}
#else /* built without NCCL */

gg_status gg_dist_alloc(gg_ctx *ctx, size_t bytes, void **out) {
    (void)ctx, (void)bytes;
    if (out) *out = NULL;
    return gg_fail(NULL, GG_ERROR_UNSUPPORTED, "gg_dist_alloc: gradgraph was built without NCCL (GG_WITH_NCCL=OFF)");
}
gg_status gg_dist_free(gg_ctx *ctx, void *ptr) {
    (void)ctx, (void)ptr;
    return gg_fail(NULL, GG_ERROR_UNSUPPORTED, "gg_dist_free: gradgraph was built without NCCL (GG_WITH_NCCL=OFF)");
}
#endif
