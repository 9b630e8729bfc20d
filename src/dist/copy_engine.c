/*
 * copy_engine.c - the copy-engine gradient reduction (copy_engine.h): layout, staging buffers and their window,
 * and the enqueue of one gradient's rounds.
 */
#include "copy_engine.h"

#include <stdio.h>

#include "kernels/gg_kernels.h"

gg_ce_layout gg_ce_layout_make(size_t n, int ranks, size_t piece_elems) {
    gg_ce_layout l = {0, 0, 0, n};
    if (ranks < 1) return l;
    l.shard = n / (size_t)ranks;
    l.tail = n - l.shard * (size_t)ranks;
    if (l.shard == 0) return l;
    l.round = piece_elems / (size_t)ranks;
    if (l.round == 0) l.round = 1;
    if (l.round > l.shard) l.round = l.shard;
    l.rounds = (l.shard + l.round - 1) / l.round;
    return l;
}

size_t gg_ce_round_len(const gg_ce_layout *l, size_t k) {
    if (k >= l->rounds) return 0;
    const size_t at = k * l->round;
    return l->shard - at < l->round ? l->shard - at : l->round;
}

gg_ce_round gg_ce_round_at(const gg_ce_layout *l, size_t k, size_t elem, int rank) {
    gg_ce_round r;
    r.elems = gg_ce_round_len(l, k);
    r.width = r.elems * elem;
    r.src = k * l->round * elem;
    r.pitch = l->shard * elem;
    r.mine = (size_t)rank * r.width;
    r.owned = (size_t)rank * r.pitch + r.src;
    return r;
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

gg_status gg_ce_alloc(gg_ctx *ctx, const char *fn) {
    gg_dist *d = ctx->dist;
    d->ce_piece_bytes = d->config.bucket_bytes & ~(size_t)4095; /* keeps the second buffer 4 KiB aligned */
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    const ncclResult_t r = ncclMemAlloc(&d->ce_staging, 2 * d->ce_piece_bytes);
    gg_device_leave(saved);
    if (r != ncclSuccess) {
        d->ce_staging = NULL;
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: ncclMemAlloc of the %zu MiB copy-engine staging: %s", fn,
                       (2 * d->ce_piece_bytes) >> 20, ncclGetErrorString(r));
    }
    return GG_SUCCESS;
}

void gg_ce_free(gg_dist *d) {
    if (d->ce_staging) (void)ncclMemFree(d->ce_staging);
    d->ce_staging = NULL;
    d->ce_window = NULL;
}

gg_status gg_ce_register(gg_ctx *const *ctxs, int count, const char *fn) {
#if GG_CE_BUILT
    int caller_device = 0;
    (void)cudaGetDevice(&caller_device);
    ncclResult_t r = count > 1 ? ncclGroupStart() : ncclSuccess;
    for (int i = 0; i < count && r == ncclSuccess; ++i) {
        gg_dist *d = ctxs[i]->dist;
        (void)cudaSetDevice(ctxs[i]->config.device);
        ncclWindow_t win = NULL;
        r = ncclCommWindowRegister((ncclComm_t)d->comm, d->ce_staging, 2 * d->ce_piece_bytes, &win,
                                   NCCL_WIN_COLL_SYMMETRIC);
        d->ce_window = win;
    }
    if (count > 1) {
        const ncclResult_t ended = ncclGroupEnd();
        if (r == ncclSuccess) r = ended;
    }
    (void)cudaSetDevice(caller_device);
    if (r != ncclSuccess) {
        char what[160];
        snprintf(what, sizeof what, "%s: ncclCommWindowRegister (the copy-engine staging)", fn);
        return fail_ce(ctxs[0], r, what);
    }
    return GG_SUCCESS;
#else
    return gg_fail(ctxs[0], GG_ERROR_UNSUPPORTED, "%s: copy-engine reductions need NCCL 2.28 or later", fn);
#endif
}

gg_status gg_ce_enqueue_warm_up(gg_ctx *const *ctxs, int count, const char *fn) {
#if GG_CE_BUILT
    enum { ELEMS = 4096 }; /* floats per rank, fewer when a piece is smaller (>= 4096 bytes: at least 16) */
    int caller_device = 0;
    (void)cudaGetDevice(&caller_device);
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < count && r == ncclSuccess; ++i) {
        gg_dist *d = ctxs[i]->dist;
        const ncclComm_t comm = (ncclComm_t)d->comm;
        const size_t n = d->ce_piece_bytes / (sizeof(float) * (size_t)d->size) < ELEMS
                             ? d->ce_piece_bytes / (sizeof(float) * (size_t)d->size)
                             : ELEMS;
        char *send = d->ce_staging, *recv = send + d->ce_piece_bytes;
        (void)cudaSetDevice(ctxs[i]->config.device);
        r = ncclAlltoAll(send, recv, n, ncclFloat32, comm, d->stream);
        if (r == ncclSuccess) r = ncclAllGather(send, recv, n, ncclFloat32, comm, d->stream);
        if (r == ncclSuccess) r = ncclAllReduce(recv, recv, n, ncclFloat32, ncclSum, comm, d->stream);
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (r == ncclSuccess) r = ended;
    (void)cudaSetDevice(caller_device);
    if (r != ncclSuccess) {
        char what[160];
        snprintf(what, sizeof what, "%s: the copy-engine warm-up (ncclAlltoAll, ncclAllGather, ncclAllReduce)", fn);
        return fail_ce(ctxs[0], r, what);
    }
    return GG_SUCCESS;
#else
    return gg_fail(ctxs[0], GG_ERROR_UNSUPPORTED, "%s: copy-engine reductions need NCCL 2.28 or later", fn);
#endif
}

/* A step that broke the surrounding capture (NCCL's copy-engine path inside CUDA graphs is young): name it, instead
 * of the next, innocent call. */
static gg_status step_ok(gg_ctx *ctx, cudaStream_t s, const char *step) {
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(s, &status);
    if (e == cudaSuccess && status != cudaStreamCaptureStatusInvalidated) return GG_SUCCESS;
    return gg_fail(ctx, GG_ERROR_CUDA, "copy-engine reduction: %s %s (%s)", step,
                   e == cudaSuccess ? "invalidated the stream capture" : "left the stream unusable",
                   cudaGetErrorString(cudaPeekAtLastError()));
}

gg_status gg_ce_reduce(gg_ctx *ctx, void *p, size_t n, size_t elem) {
#if GG_CE_BUILT
    gg_dist *d = ctx->dist;
    const ncclComm_t comm = (ncclComm_t)d->comm;
    const ncclDataType_t type = elem == 4 ? ncclFloat32 : ncclBfloat16;
    const gg_dtype dtype = elem == 4 ? GG_DT_F32 : GG_DT_BF16;
    const int all_reduce = d->config.sync == GG_SYNC_ALL_REDUCE;
    const float scale = d->config.op == GG_REDUCE_AVERAGE ? 1.0f / (float)d->size : 1.0f;
    const gg_ce_layout l = gg_ce_layout_make(n, d->size, d->ce_piece_bytes / elem);
    char *send = d->ce_staging, *recv = send + d->ce_piece_bytes, *data = p;
    const size_t ranks = (size_t)d->size;
    for (size_t k = 0; k < l.rounds; ++k) {
        const gg_ce_round r = gg_ce_round_at(&l, k, elem, d->rank);
        /* Every rank's share of this round side by side (a strided copy: copy engine). */
        GG_CUDA_TRY(ctx, cudaMemcpy2DAsync(send, r.width, data + r.src, r.pitch, r.width, ranks,
                                           cudaMemcpyDeviceToDevice, d->stream));
        GG_TRY(step_ok(ctx, d->stream, "the copy into the staging"));
        CE_TRY(ctx, ncclAlltoAll(send, recv, r.elems, type, comm, d->stream));
        GG_TRY(step_ok(ctx, d->stream, "ncclAlltoAll"));
        void *sums = all_reduce ? send + r.mine : data + r.owned; /* all-reduce: the all-gather's send buffer */
        GG_CUDA_TRY(ctx, gg_k_sum_ranks(recv, sums, dtype, r.elems, d->size, scale, ctx->sm_count, d->stream));
        GG_TRY(step_ok(ctx, d->stream, "the adding kernel"));
        if (!all_reduce) continue;
        CE_TRY(ctx, ncclAllGather(send + r.mine, recv, r.elems, type, comm, d->stream));
        GG_TRY(step_ok(ctx, d->stream, "ncclAllGather"));
        GG_CUDA_TRY(ctx, cudaMemcpy2DAsync(data + r.src, r.pitch, recv, r.width, r.width, ranks,
                                           cudaMemcpyDeviceToDevice, d->stream));
        GG_TRY(step_ok(ctx, d->stream, "the copy out of the staging"));
    }
    char *tail = data + l.shard * ranks * elem; /* fewer than `ranks` elements */
    if (all_reduce && l.tail)
        CE_TRY(ctx, ncclAllReduce(tail, tail, l.tail, type, d->config.op == GG_REDUCE_AVERAGE ? ncclAvg : ncclSum,
                                  comm, d->stream));
    return GG_SUCCESS;
#else
    (void)p, (void)n, (void)elem;
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED, "copy-engine reductions need NCCL 2.28 or later");
#endif
}
#endif
