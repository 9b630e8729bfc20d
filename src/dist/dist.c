/*
 * dist.c - NCCL communicators on a context (attach, init from the environment or for threads, detach, async-error
 * polling) and the reduction of parameter gradients inside a block's backward.
 */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap.h"
#include "copy_engine.h"
#include "streams.h"

int gg_tensor_is_param(const gg_block_call *c, int i) {
    const gg_tensor_spec *s = &c->info->tensors[i];
    return s->is_output && s->rows != GG_EXT_TOKENS;
}

int gg_dist_rank(const gg_ctx *ctx) { return ctx && ctx->dist ? ctx->dist->rank : -1; }
int gg_dist_size(const gg_ctx *ctx) { return ctx && ctx->dist ? ctx->dist->size : 0; }
void *gg_dist_comm(const gg_ctx *ctx) { return ctx && ctx->dist ? ctx->dist->comm : NULL; }
int gg_dist_comm_sms(const gg_ctx *ctx) {
    return ctx->dist && ctx->dist->config.overlap ? ctx->dist->config.comm_sms : 0;
}
int gg_dist_overlaps(const gg_ctx *ctx, const gg_block_call *c) {
    return c->sync_grads && ctx->dist && ctx->dist->config.overlap;
}

void gg_dist_hand_down(const gg_ctx *ctx, gg_block_call *c) {
    c->comm_sms = gg_dist_comm_sms(ctx);
    c->pair_split = gg_dist_pair_split(ctx, c, c->info->split_tensors);
}

void gg_dist_graph_holds(gg_ctx *ctx) {
    if (ctx->dist) ctx->dist->graphs_holding++;
}

void gg_dist_graph_released(gg_ctx *ctx) {
    if (ctx->dist) ctx->dist->graphs_holding--;
}

#ifdef GG_HAVE_NCCL
#include <nccl.h>

/* gg_dist_agree_algorithms' buffers: a status word, then one algorithm per GEMM of every bucket of a graph. */
#define AGREE_HEADER 256
#define AGREE_BYTES (AGREE_HEADER + GG_DIST_MAX_AGREE_PLANS * GG_PLAN_MAX_GEMMS * sizeof(cublasLtMatmulAlgo_t))

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
    if (c->comm_sms < 0 || c->comm_sms > ctx->sm_count / 2)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->comm_sms = %d is outside [0, %d] (half the SMs)",
                       fn, c->comm_sms, ctx->sm_count / 2);
    if (c->copy_engines < 0 || c->copy_engines > 1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: config->copy_engines = %d is not 0 or 1", fn,
                       c->copy_engines);
    if (c->copy_engines == 1 && !gg_ce_supported())
        return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                       "%s: config->copy_engines = 1, but the NCCL gradgraph runs with has no copy-engine collectives "
                       "(2.28 or later needed)",
                       fn);
    return GG_SUCCESS;
}


gg_status gg_dist_fail_nccl(gg_ctx *ctx, int result, const char *what) {
    return gg_fail(ctx, GG_ERROR_NCCL, "%s failed: %s (%s)", what, ncclGetErrorString((ncclResult_t)result),
                   ncclGetLastError(NULL));
}

void gg_dist_abort(gg_ctx *ctx) {
    if (ctx->dist->comm) (void)ncclCommAbort((ncclComm_t)ctx->dist->comm);
    ctx->dist->comm = NULL;
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

void gg_dist_release(gg_ctx *ctx) {
    gg_dist *d = ctx->dist;
    if (!d) return;
    if (d->stream) (void)cudaStreamSynchronize(d->stream);
    if (d->owned && d->comm) (void)ncclCommDestroy((ncclComm_t)d->comm); /* NULL once aborted: nothing to free */
    gg_ce_free(d); /* after the communicator, which took the window with it */
    gg_ctx_hook_remove(ctx, &d->hook);
    if (d->ev_ready) (void)cudaEventDestroy(d->ev_ready);
    if (d->ev_done) (void)cudaEventDestroy(d->ev_done);
    if (d->agree_dev) (void)cudaFree(d->agree_dev);
    if (d->agree_host) (void)cudaFreeHost(d->agree_host);
    if (d->stream) (void)cudaStreamDestroy(d->stream);
    (void)cudaGetLastError();
    free(d);
    ctx->dist = NULL;
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

static void release_hook(void *ctx) { gg_dist_release(ctx); }

/* Puts comm on ctx with its stream and events (no collective). On failure ctx has no communicator state, and an
 * owned comm is left to the caller to destroy. */
static gg_status make_dist(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, int rank, int size,
                           const gg_dist_config *config) {
    gg_dist *d = calloc(1, sizeof *d);
    if (!d) return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    *d = (gg_dist){.comm = comm, .rank = rank, .size = size, .config = *config};
    ctx->dist = d;
    d->hook = (gg_ctx_hook){.destroy = release_hook, .obj = ctx};
    gg_ctx_hook_add(ctx, &d->hook, GG_HOOK_LATE);
    int saved = 0;
    gg_status status = gg_device_enter(ctx, &saved);
    if (status != GG_SUCCESS) {
        gg_dist_release(ctx);
        return status;
    }
    cudaError_t e = create_comm_stream(&d->stream);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->ev_ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->ev_done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc(&d->agree_dev, AGREE_BYTES);
    if (e == cudaSuccess) e = cudaMallocHost(&d->agree_host, AGREE_BYTES);
    gg_device_leave(saved);
    if (e != cudaSuccess) {
        status = gg_fail_cuda(ctx, e, "the communication stream, events and buffers");
        gg_dist_release(ctx); /* d->owned is still 0: comm survives */
        return status;
    }
    /* Not fatal: the warm-up tells every rank, and all of them then reduce on SMs (the ranks must agree). */
    if (config->copy_engines == 1) {
        d->ce_on = gg_ce_alloc(ctx, fn) == GG_SUCCESS;
        if (!d->ce_on) gg_log(ctx, GG_LOG_WARN, "%s; gradients will be all-reduced on SMs", gg_last_error(ctx));
    }
    d->owned = owned;
    return GG_SUCCESS;
}

/* How long a rank waits for the others in a collective step that must finish before it returns (the warm-up, the
 * algorithm agreement): NCCL reports nothing for a rank that never joins, so without a limit the others would wait
 * forever. GG_DIST_PEER_TIMEOUT_S overrides the default (in whole seconds, at least 1). */
#define PEER_TIMEOUT_DEFAULT_S 300
static int peer_timeout_s(void) {
    const char *v = getenv("GG_DIST_PEER_TIMEOUT_S");
    const long s = v ? strtol(v, NULL, 10) : 0;
    return s >= 1 && s <= 86400 ? (int)s : PEER_TIMEOUT_DEFAULT_S;
}

typedef enum { POLL_DONE, POLL_CUDA_ERROR, POLL_NCCL_ERROR, POLL_TIMEOUT } poll_outcome;

/* Polls the communication streams of ctxs until every one is idle, without blocking in the driver: stops at the
 * first CUDA error or asynchronous NCCL error (*which: that context's index, *cuda: the CUDA error), or after
 * peer_timeout_s(). Aborts nothing: the caller decides what the outcome means for its communicators. */
static poll_outcome poll_comm_streams(gg_ctx *const *ctxs, int count, int *which, cudaError_t *cuda) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    const int timeout = peer_timeout_s();
    for (;;) {
        int busy = -1; /* the first context still waiting */
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
            if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) return POLL_NCCL_ERROR;
        }
        if (busy < 0) return POLL_DONE;
        *which = busy;
        clock_gettime(CLOCK_MONOTONIC, &now);
        const double waited = (double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec);
        if (waited >= timeout) return POLL_TIMEOUT;
        const struct timespec pause = {0, 100000}; /* 0.1 ms */
        nanosleep(&pause, NULL);
    }
}

/* Waits for ctx's communication stream without hanging on a failed peer: an asynchronous NCCL error, a CUDA error
 * on the stream, or a peer that has not joined in peer_timeout_s() aborts the communicator (a collective may still
 * be in flight, and nothing could be freed after it) and returns GG_ERROR_NCCL. */
static gg_status wait_comm_stream(gg_ctx *ctx, const char *what) {
    int which = 0;
    cudaError_t cuda = cudaSuccess;
    const poll_outcome outcome = poll_comm_streams(&ctx, 1, &which, &cuda);
    if (outcome == POLL_DONE) return GG_SUCCESS;
    if (outcome == POLL_NCCL_ERROR) return gg_dist_check(ctx); /* aborts, with NCCL's message */
    gg_dist_abort(ctx); /* releases this rank's stream; the others time out too */
    if (outcome == POLL_CUDA_ERROR)
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: rank %d: the communication stream failed (%s): the communicator is aborted (an attached "
                       "one too: do not destroy it)",
                       what, ctx->dist->rank, cudaGetErrorString(cuda));
    return gg_fail(ctx, GG_ERROR_NCCL,
                   "%s: rank %d waited %d s for the other ranks, which did not join: the communicator is aborted (an "
                   "attached one too: do not destroy it)",
                   what, ctx->dist->rank, peer_timeout_s());
}

/* The warm-up's wait: every rank's collective finished, or the status and message of the first that failed. After
 * a failure a collective may still be in flight, and freeing anything would wait for it forever: every communicator
 * in ctxs is aborted (NULL in ctx->dist; an attached one too, as gg_dist_check does). */
static gg_status warm_up_wait(gg_ctx *const *ctxs, int count, const char *fn) {
    int which = 0;
    cudaError_t cuda = cudaSuccess;
    const poll_outcome outcome = poll_comm_streams(ctxs, count, &which, &cuda);
    if (outcome == POLL_DONE) return GG_SUCCESS;
    gg_ctx *ctx = ctxs[which];
    for (int i = 0; i < count; ++i) gg_dist_abort(ctxs[i]);
    if (outcome == POLL_CUDA_ERROR) /* GG_ERROR_NCCL: the status that says "aborted, do not destroy" */
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: the warm-up all-reduce on rank %d failed (%s): the communicator is aborted (an attached "
                       "one too: do not destroy it)",
                       fn, ctx->dist->rank, cudaGetErrorString(cuda));
    if (outcome == POLL_NCCL_ERROR)
        return gg_fail(ctx, GG_ERROR_NCCL,
                       "%s: NCCL reported an error in the warm-up all-reduce on rank %d: the communicator is aborted "
                       "(an attached one too: do not destroy it)",
                       fn, ctx->dist->rank);
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
            gg_ce_free(d);
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
        gg_ce_free(d); /* never registered */
        d->ce_on = 0;
    }
    if (status == GG_SUCCESS) return GG_SUCCESS;
    for (int i = 0; i < count; ++i) gg_dist_abort(ctxs[i]); /* failed half way: as a failed warm-up does */
    return status;
}

/* The warm-up all-reduce on every context at once (one NCCL group, from this thread): NCCL connects lazily on the
 * first collective, which must not happen inside a capture. Its value is each rank's copy-engine readiness, reduced
 * with min (settle_copy_engines). The buffers are all allocated before the group, so a failure cannot launch the
 * collective on some ranks only. The caller's current device is restored. */
static gg_status warm_up(gg_ctx *const *ctxs, int count, const char *fn) {
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
    if (status == GG_SUCCESS) {
        ncclResult_t r = ncclGroupStart();
        for (int i = 0; i < count && r == ncclSuccess; ++i)
            r = ncclAllReduce(one[i], one[i], 1, ncclFloat32, ncclMin, (ncclComm_t)ctxs[i]->dist->comm,
                              ctxs[i]->dist->stream);
        const ncclResult_t ended = ncclGroupEnd();
        if (r == ncclSuccess) r = ended;
        if (r != ncclSuccess) status = gg_dist_fail_nccl(ctxs[0], r, "warm-up ncclAllReduce");
        else status = warm_up_wait(ctxs, count, fn);
        for (int i = 0; i < count && status == GG_SUCCESS; ++i) {
            (void)cudaSetDevice(ctxs[i]->config.device);
            if (cudaMemcpy(&ready[i], one[i], sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
                status = gg_fail(ctxs[i], GG_ERROR_CUDA, "%s: reading the warm-up result back", fn);
        }
        if (status == GG_SUCCESS) status = settle_copy_engines(ctxs, count, ready, fn);
    }
    for (int i = 0; i < count; ++i)
        if (one[i]) {
            (void)cudaSetDevice(ctxs[i]->config.device);
            (void)cudaFree(one[i]);
        }
    (void)cudaSetDevice(caller_device);
    return status;
}

/* What a context's communicator ended up as, once it is ready (INFO). */
static void log_ready(gg_ctx *ctx, const char *fn) {
    const gg_dist *d = ctx->dist;
    gg_log(ctx, GG_LOG_INFO, "%s: rank %d of %d on device %d, %s, buckets of %zu MiB, copy engines %s", fn, d->rank,
           d->size, ctx->config.device, d->config.sync == GG_SYNC_ALL_REDUCE ? "all-reduce" : "reduce-scatter",
           d->config.bucket_bytes >> 20, d->ce_on ? "on" : "off");
}

/* Binds the calling thread near the GPU when asked to; in a build without hwloc, says so at INFO level (the
 * default config asks for it, so this is no error). */
static void bind_if_asked(gg_ctx *ctx, const gg_dist_config *c) {
    if (!c->bind_cpus) return;
#ifdef GG_HAVE_HWLOC
    (void)gg_dist_bind_thread(ctx); /* logs why when it leaves the binding alone */
#else
    gg_log(ctx, GG_LOG_INFO, "thread binding skipped: gradgraph was built without hwloc (GG_WITH_HWLOC=OFF)");
#endif
}

/* Puts comm on ctx (streams, events), checks it is on ctx's device, runs the warm-up, binds the thread. On failure
 * ctx has no communicator state and an owned comm has been aborted (a failed warm-up aborts an attached one too). */
static gg_status install(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, const gg_dist_config *config) {
    int device = -1, rank = -1, size = 0;
    gg_status status = GG_SUCCESS;
    ncclResult_t r = ncclCommCuDevice(comm, &device);
    if (r == ncclSuccess) r = ncclCommUserRank(comm, &rank);
    if (r == ncclSuccess) r = ncclCommCount(comm, &size);
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
    status = warm_up(&ctx, 1, fn);
    if (status != GG_SUCCESS) {
        if (!ctx->dist->comm) owned = 0; /* the warm-up aborted it */
        gg_dist_release(ctx);            /* not owned yet: the comm survives this */
        goto fail;
    }
    ctx->dist->owned = owned;
    log_ready(ctx, fn);
    bind_if_asked(ctx, config);
    return GG_SUCCESS;
fail:
    if (owned) (void)ncclCommAbort(comm);
    return status;
}

gg_status gg_dist_attach(gg_ctx *ctx, void *nccl_comm, const gg_dist_config *config) {
    static const char fn[] = "gg_dist_attach";
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

/* The configuration of the communicators gradgraph makes. With comm_sms > 0 (overlap on), NCCL runs on exactly
 * comm_sms CTAs: the SMs the syncing graphs' GEMMs leave free, so that its kernels fit beside them instead of
 * waiting for SMs or slowing the GEMMs (measured in docs/distributed.md, "SMs and channels"). */
static ncclConfig_t comm_config(const gg_dist_config *c) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (c->overlap && c->comm_sms > 0) config.minCTAs = config.maxCTAs = c->comm_sms;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
    /* Zero CTAs wherever NCCL can: its all-to-all and all-gather on the copy engines (copy_engine.h). */
    if (c->copy_engines == 1) config.CTAPolicy = NCCL_CTA_POLICY_ZERO;
#endif
    return config;
}

/* The end of a one-process-per-GPU bootstrap, once every rank holds NCCL's unique id: the communicator (gradgraph
 * owns it), the warm-up, the thread binding. */
static gg_status init_from_id(gg_ctx *ctx, const char *fn, int rank, int size, const ncclUniqueId *id,
                              const gg_dist_config *c) {
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    ncclComm_t comm = NULL;
    ncclConfig_t config = comm_config(c);
    const ncclResult_t r = ncclCommInitRankConfig(&comm, size, *id, rank, &config);
    gg_device_leave(saved);
    if (r != ncclSuccess) return gg_dist_fail_nccl(ctx, r, "ncclCommInitRankConfig");
    return install(ctx, fn, comm, 1, c); /* aborts comm on failure */
}

/* NCCL's unique id from rank 0 of the MPI communicator (NULL: the world) to every rank, with rank 0's outcome: when
 * ncclGetUniqueId fails there, every rank returns instead of waiting for a communicator that will not come. */
static gg_status share_id_mpi(gg_ctx *ctx, const char *fn, const void *mpi_comm, int rank, ncclUniqueId *id) {
    struct {
        int32_t ok;
        ncclUniqueId id;
    } shared = {0};
    ncclResult_t made = ncclSuccess;
    if (rank == 0) {
        made = ncclGetUniqueId(&shared.id);
        shared.ok = made == ncclSuccess;
    }
    GG_TRY(gg_bootstrap_mpi_broadcast(ctx, fn, mpi_comm, &shared, sizeof shared));
    if (made != ncclSuccess) return gg_dist_fail_nccl(ctx, made, "ncclGetUniqueId");
    if (!shared.ok)
        return gg_fail(ctx, GG_ERROR_NCCL, "%s: rank 0 could not make NCCL's unique id (its status says why)", fn);
    *id = shared.id;
    return GG_SUCCESS;
}

gg_status gg_dist_init_env(gg_ctx *ctx, const char *id_path, const gg_dist_config *config) {
    static const char fn[] = "gg_dist_init_env";
    gg_dist_config c;
    GG_TRY(begin(ctx, fn, config, &c));
    int rank = -1, size = 0;
    GG_TRY(gg_bootstrap_rank_size(ctx, fn, &rank, &size));
    gg_process_defaults();
    ncclUniqueId id;
    if (id_path) {
        if (rank == 0) GG_NCCL_TRY(ctx, ncclGetUniqueId(&id));
        GG_TRY(gg_bootstrap_share_id(ctx, fn, rank, id_path, &id, sizeof id, 120000));
        GG_TRY(init_from_id(ctx, fn, rank, size, &id, &c));
        /* Every rank has read the id (the communicator exists): remove it, so that the next launch's ranks cannot
         * read this stale id before its rank 0 has written a new one. */
        if (rank == 0) (void)remove(id_path);
        return GG_SUCCESS;
    }
    /* No file: the id travels through MPI's world communicator, whose ranks must be the environment's. */
    int mpi_rank = -1, mpi_size = 0;
    const gg_status mpi = gg_bootstrap_mpi_rank_size(ctx, fn, NULL, &mpi_rank, &mpi_size);
    if (mpi == GG_ERROR_UNSUPPORTED)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: id_path is NULL and gradgraph was built without MPI (GG_WITH_MPI=OFF): pass a file path "
                       "every rank can read",
                       fn);
    if (mpi != GG_SUCCESS) return mpi;
    if (mpi_rank != rank || mpi_size != size)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: id_path is NULL, but MPI's world (rank %d of %d) is not the environment's (rank %d of %d)",
                       fn, mpi_rank, mpi_size, rank, size);
    GG_TRY(share_id_mpi(ctx, fn, NULL, rank, &id));
    return init_from_id(ctx, fn, rank, size, &id, &c);
}

gg_status gg_dist_init_mpi(gg_ctx *ctx, const void *mpi_comm, const gg_dist_config *config) {
    static const char fn[] = "gg_dist_init_mpi";
    gg_dist_config c;
    GG_TRY(begin(ctx, fn, config, &c));
    int rank = -1, size = 0;
    GG_TRY(gg_bootstrap_mpi_rank_size(ctx, fn, mpi_comm, &rank, &size));
    gg_process_defaults();
    ncclUniqueId id;
    GG_TRY(share_id_mpi(ctx, fn, mpi_comm, rank, &id));
    return init_from_id(ctx, fn, rank, size, &id, &c);
}

/* One communicator per device, all in this process (what ncclCommInitAll does, with gradgraph's configuration): every
 * rank is issued inside one NCCL group, even after a failure (a missing rank would leave the others waiting), and on
 * failure every communicator made is aborted. The caller's device is restored. */
static gg_status init_local_comms(gg_ctx *ctx, int count, const int *devices, const gg_dist_config *c,
                                  ncclComm_t *comms) {
    ncclUniqueId id;
    GG_NCCL_TRY(ctx, ncclGetUniqueId(&id));
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
    if (r != ncclSuccess)
        for (int i = 0; i < count; ++i)
            if (comms[i]) (void)ncclCommAbort(comms[i]);
    (void)cudaSetDevice(saved);
    if (r != ncclSuccess) return gg_dist_fail_nccl(ctx, r, "ncclCommInitRankConfig (one per device, grouped)");
    return GG_SUCCESS;
}

gg_status gg_dist_init_threads(gg_ctx *const *ctxs, int count, const gg_dist_config *config) {
    static const char fn[] = "gg_dist_init_threads";
    if (!ctxs) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctxs is NULL", fn);
    if (count < 1 || count > GG_DIST_MAX_LOCAL_RANKS)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: count = %d is outside [1, %d]", fn, count,
                       GG_DIST_MAX_LOCAL_RANKS);
    int devices[GG_DIST_MAX_LOCAL_RANKS];
    gg_dist_config c;
    for (int i = 0; i < count; ++i) {
        if (!ctxs[i]) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctxs[%d] is NULL", fn, i);
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
    GG_TRY(init_local_comms(ctxs[0], count, devices, &c, comms));
    gg_status status = GG_SUCCESS;
    for (int i = 0; i < count && status == GG_SUCCESS; ++i)
        status = make_dist(ctxs[i], fn, comms[i], 0, i, count, &c);
    if (status == GG_SUCCESS) status = warm_up(ctxs, count, fn); /* all ranks together, from this thread */
    if (status != GG_SUCCESS) {
        for (int i = 0; i < count; ++i) {
            const int aborted = ctxs[i]->dist && !ctxs[i]->dist->comm; /* by the warm-up */
            gg_dist_release(ctxs[i]);                 /* not owned yet: the communicators are destroyed here */
            if (!aborted) (void)ncclCommAbort(comms[i]); /* never blocks, unlike destroy after a failed warm-up */
        }
        return status;
    }
    for (int i = 0; i < count; ++i) {
        ctxs[i]->dist->owned = 1;
        log_ready(ctxs[i], fn);
    }
    return GG_SUCCESS;
}

gg_status gg_dist_detach(gg_ctx *ctx) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_detach: ctx is NULL");
    if (!ctx->dist) return GG_SUCCESS;
    if (ctx->dist->graphs_holding > 0)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "gg_dist_detach: graphs that captured NCCL work still exist; gg_graph_destroy them first "
                       "(ncclCommDestroy would wait for them forever)");
    int saved = 0;
    const int entered = gg_device_enter(ctx, &saved) == GG_SUCCESS;
    gg_dist_release(ctx);
    if (entered) gg_device_leave(saved);
    return GG_SUCCESS;
}

gg_status gg_dist_check(gg_ctx *ctx) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_check: ctx is NULL");
    gg_dist *d = ctx->dist;
    if (!d) return GG_SUCCESS;
    if (!d->comm) return gg_fail(ctx, GG_ERROR_NCCL, "gg_dist_check: the communicator was aborted after an error");
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)d->comm, &async);
    if (r == ncclSuccess && (async == ncclSuccess || async == ncclInProgress)) return GG_SUCCESS;
    const ncclResult_t err = r != ncclSuccess ? r : async;
    gg_dist_abort(ctx);
    return gg_fail(ctx, GG_ERROR_NCCL,
                   "gg_dist_check: NCCL reported an asynchronous error on rank %d: %s; the communicator is aborted (an "
                   "attached one too: do not destroy it)",
                   d->rank, ncclGetErrorString(err));
}

/* One reduction of count elements at p, on the communication stream. */
static gg_status reduce(gg_ctx *ctx, void *p, size_t count, size_t elem_bytes) {
    gg_dist *d = ctx->dist;
    const ncclDataType_t type = elem_bytes == 4 ? ncclFloat32 : ncclBfloat16;
    const ncclRedOp_t op = d->config.op == GG_REDUCE_AVERAGE ? ncclAvg : ncclSum;
    if (d->config.sync == GG_SYNC_REDUCE_SCATTER) {
        const size_t shard = count / (size_t)d->size; /* in place: this rank's shard of its own buffer */
        GG_NCCL_TRY(ctx, ncclReduceScatter(p, (char *)p + (size_t)d->rank * shard * elem_bytes, shard, type, op,
                                        (ncclComm_t)d->comm, d->stream));
        return GG_SUCCESS;
    }
    GG_NCCL_TRY(ctx, ncclAllReduce(p, p, count, type, op, (ncclComm_t)d->comm, d->stream));
    return GG_SUCCESS;
}

/* Reduces n elements at p in pieces of at most bucket_bytes (whole, for reduce-scatter): large ones in buffers from
 * gg_dist_alloc all-reduced through the copy engines when they are on. */
static gg_status reduce_buffer(gg_ctx *ctx, void *p, size_t n, size_t elem) {
    const gg_dist *d = ctx->dist;
    if (d->ce_on && d->size > 1 && d->config.sync == GG_SYNC_ALL_REDUCE && n * elem >= GG_CE_MIN_BYTES &&
        gg_ce_in_window(d, p, n * elem)) {
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

gg_status gg_dist_reduce(gg_ctx *ctx, void *data, size_t count, int bf16, gg_stream stream) {
    static const char fn[] = "gg_dist_reduce";
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    gg_dist *d = ctx->dist;
    if (!d) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: the context has no communicator", fn);
    if (!d->comm) return gg_fail(ctx, GG_ERROR_NCCL, "%s: the communicator was aborted after an error", fn);
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
    GG_TRY(gg_dist_check(ctx)); /* an asynchronous NCCL error: aborted, nothing enqueued */
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    gg_status status = gg_stream_handoff(ctx, (cudaStream_t)stream, d->ev_ready, d->stream);
    if (status == GG_SUCCESS)
        status = gg_stream_join(ctx, reduce_buffer(ctx, data, count, elem), (cudaStream_t)stream, d->stream,
                                d->ev_done);
    gg_device_leave(saved);
    return status;
}

gg_status gg_dist_grad_ready(gg_ctx *ctx, const gg_block_call *c, cudaStream_t producer, int tensor) {
    if (!gg_dist_overlaps(ctx, c)) return GG_SUCCESS;
    GG_TRY(gg_stream_handoff(ctx, producer, ctx->dist->ev_ready, ctx->dist->stream));
    return reduce_tensor(ctx, c, tensor);
}

int gg_dist_pair_split(const gg_ctx *ctx, const gg_block_call *c, unsigned split_tensors) {
    const gg_dist *d = ctx->dist;
    if (!gg_dist_overlaps(ctx, c) || !d->ce_on || d->size != 2 || d->config.sync != GG_SYNC_ALL_REDUCE) return 0;
    for (int i = 0; i < c->info->n_tensors; ++i) {
        if (!gg_tensor_is_param(c, i)) continue;
        const size_t bytes = gg_tensor_bytes(c, i);
        if (split_tensors >> i & 1u) {
            if (bytes > 2 * d->ce_piece_bytes) return 0; /* half of it in one piece: both halves in the staging */
        } else if (bytes >= GG_CE_MIN_BYTES) {
            return 0; /* would go through gg_ce_all_reduce, whose all-to-all lands in the same staging */
        }
    }
    return 1;
}

int gg_dist_pair_exchanges(const gg_ctx *ctx, const gg_block_call *c, int tensor) {
    const size_t bytes = gg_tensor_bytes(c, tensor);
    return !c->accumulate && bytes >= GG_CE_MIN_BYTES && gg_ce_in_window(ctx->dist, c->t[tensor], bytes);
}

void *gg_dist_pair_staging(const gg_ctx *ctx) { return ctx->dist->ce_staging; }

gg_status gg_dist_pair_gather(gg_ctx *ctx, cudaStream_t producer, void *base, size_t count) {
    GG_TRY(gg_stream_handoff(ctx, producer, ctx->dist->ev_ready, ctx->dist->stream));
    return gg_ce_all_gather(ctx, base, count, sizeof(float));
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

/* Runs one collective on `bytes` of the context's agreement buffers: pinned host -> device, the collective, device
 * -> pinned host, then waits (polling for NCCL errors, never blocking in a copy). */
static gg_status agree_step(gg_ctx *ctx, size_t offset, size_t bytes, int broadcast, const char *what) {
    gg_dist *d = ctx->dist;
    char *dev = (char *)d->agree_dev + offset, *host = (char *)d->agree_host + offset;
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, d->stream));
    const ncclResult_t r =
        broadcast ? ncclBroadcast(dev, dev, bytes, ncclUint8, 0, (ncclComm_t)d->comm, d->stream)
                  : ncclAllReduce(dev, dev, bytes / sizeof(int32_t), ncclInt32, ncclMin, (ncclComm_t)d->comm,
                                  d->stream);
    if (r != ncclSuccess) {
        char call[160];
        snprintf(call, sizeof call, "%s (%s)", broadcast ? "ncclBroadcast" : "ncclAllReduce", what);
        return gg_dist_fail_nccl(ctx, r, call);
    }
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, d->stream));
    return wait_comm_stream(ctx, what);
}

gg_status gg_dist_all_ok(gg_ctx *ctx, int ok, const char *what, int *all_ok) {
    int32_t *flag = ctx->dist->agree_host;
    *flag = ok != 0;
    GG_TRY(agree_step(ctx, 0, sizeof *flag, 0, what));
    *all_ok = *flag == 1;
    return GG_SUCCESS;
}

gg_status gg_dist_agree_algorithms(gg_ctx *ctx, const char *fn, gg_block_plan *const *plans, int count) {
    gg_dist *d = ctx->dist;
    if (!d || d->size < 2) return GG_SUCCESS;
    if (!d->comm) return gg_fail(ctx, GG_ERROR_NCCL, "%s: the communicator was aborted after an error", fn);
    const int valid = count >= 1 && count <= GG_DIST_MAX_AGREE_PLANS;
    int all_made = 0;
    const gg_status step = gg_dist_all_ok(ctx, plans != NULL && valid, "whether every rank made its plans", &all_made);
    if (!plans) return GG_SUCCESS; /* this rank failed: its caller keeps its own error */
    GG_TRY(step);
    if (!valid)
        return gg_fail(ctx, GG_ERROR_INTERNAL, "%s: %d plans to agree on (1 to %d)", fn, count,
                       GG_DIST_MAX_AGREE_PLANS);
    if (!all_made)
        return gg_fail(ctx, GG_ERROR_PEER,
                       "%s: another rank failed to make this graph (its own status says why); no rank made it", fn);
    cublasLtMatmulAlgo_t *algos = (cublasLtMatmulAlgo_t *)((char *)d->agree_host + AGREE_HEADER);
    const size_t n = (size_t)count * GG_PLAN_MAX_GEMMS;
    memset(algos, 0, n * sizeof *algos);
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i)
            if (plans[p]->gemm[i].op) algos[p * GG_PLAN_MAX_GEMMS + i] = plans[p]->gemm[i].algo;
    GG_TRY(agree_step(ctx, AGREE_HEADER, n * sizeof *algos, 1, "rank 0's GEMM algorithms"));
    int differed = 0, adopted = 0;
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i) {
            gg_matmul *mm = &plans[p]->gemm[i];
            const cublasLtMatmulAlgo_t *theirs = &algos[p * GG_PLAN_MAX_GEMMS + i];
            if (!mm->op || !memcmp(&mm->algo, theirs, sizeof *theirs)) continue;
            ++differed;
            adopted += gg_matmul_adopt(ctx, mm, theirs);
        }
    if (differed)
        gg_log(ctx, differed == adopted ? GG_LOG_INFO : GG_LOG_WARN,
               "%s: rank %d: %d of its GEMM algorithms differed from rank 0's; %d adopted%s", fn, d->rank, differed,
               adopted, differed == adopted ? "" : " (the others are not valid here: the ranks' kernels differ)");
    return GG_SUCCESS;
}

gg_status gg_dist_check_shape(gg_ctx *ctx, const char *fn, const gg_block_call *c) {
    if (!ctx->dist || ctx->dist->config.sync != GG_SYNC_REDUCE_SCATTER) return GG_SUCCESS;
    for (int i = 0; i < c->info->n_tensors; ++i)
        if (gg_tensor_is_param(c, i) && gg_tensor_elems(c, i) % (size_t)ctx->dist->size != 0)
            return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                           "%s: %s has %zu elements, not divisible by the %d ranks: reduce-scatter cannot shard it", fn,
                           c->info->tensors[i].name, gg_tensor_elems(c, i), ctx->dist->size);
    return GG_SUCCESS;
}

#else /* built without NCCL */

void gg_process_defaults(void) {}

#define UNSUPPORTED(fn)                                                                                            \
    gg_fail(NULL, GG_ERROR_UNSUPPORTED, "%s: gradgraph was built without NCCL (GG_WITH_NCCL=OFF)", fn)

void gg_dist_release(gg_ctx *ctx) { (void)ctx; }
gg_status gg_dist_attach(gg_ctx *ctx, void *comm, const gg_dist_config *config) {
    (void)ctx, (void)comm, (void)config;
    return UNSUPPORTED("gg_dist_attach");
}
gg_status gg_dist_init_env(gg_ctx *ctx, const char *id_path, const gg_dist_config *config) {
    (void)ctx, (void)id_path, (void)config;
    return UNSUPPORTED("gg_dist_init_env");
}
gg_status gg_dist_init_threads(gg_ctx *const *ctxs, int count, const gg_dist_config *config) {
    (void)ctxs, (void)count, (void)config;
    return UNSUPPORTED("gg_dist_init_threads");
}
gg_status gg_dist_init_mpi(gg_ctx *ctx, const void *mpi_comm, const gg_dist_config *config) {
    (void)ctx, (void)mpi_comm, (void)config;
    return UNSUPPORTED("gg_dist_init_mpi");
}
gg_status gg_dist_detach(gg_ctx *ctx) {
    (void)ctx;
    return GG_SUCCESS;
}
gg_status gg_dist_check(gg_ctx *ctx) {
    (void)ctx;
    return GG_SUCCESS;
}
gg_status gg_dist_reduce(gg_ctx *ctx, void *data, size_t count, int bf16, gg_stream stream) {
    (void)ctx, (void)data, (void)count, (void)bf16, (void)stream;
    return UNSUPPORTED("gg_dist_reduce");
}
gg_status gg_dist_grad_ready(gg_ctx *ctx, const gg_block_call *c, cudaStream_t producer, int tensor) {
    (void)ctx, (void)c, (void)producer, (void)tensor;
    return GG_SUCCESS;
}
gg_status gg_dist_finish(gg_ctx *ctx, const gg_block_call *c, cudaStream_t main) {
    (void)ctx, (void)c, (void)main;
    return GG_SUCCESS;
}
int gg_dist_pair_split(const gg_ctx *ctx, const gg_block_call *c, unsigned split_tensors) {
    (void)ctx, (void)c, (void)split_tensors;
    return 0;
}
int gg_dist_pair_exchanges(const gg_ctx *ctx, const gg_block_call *c, int tensor) {
    (void)ctx, (void)c, (void)tensor;
    return 0;
}
void *gg_dist_pair_staging(const gg_ctx *ctx) {
    (void)ctx;
    return NULL;
}
gg_status gg_dist_pair_gather(gg_ctx *ctx, cudaStream_t producer, void *base, size_t count) {
    (void)ctx, (void)producer, (void)base, (void)count;
    return UNSUPPORTED("gg_dist_pair_gather");
}
gg_status gg_dist_join(gg_ctx *ctx, const gg_block_call *c, cudaStream_t main) {
    (void)ctx, (void)c, (void)main;
    return GG_SUCCESS;
}
gg_status gg_dist_check_shape(gg_ctx *ctx, const char *fn, const gg_block_call *c) {
    (void)ctx, (void)fn, (void)c;
    return GG_SUCCESS;
}
gg_status gg_dist_agree_algorithms(gg_ctx *ctx, const char *fn, gg_block_plan *const *plans, int count) {
    (void)ctx, (void)fn, (void)plans, (void)count;
    return GG_SUCCESS;
}
#endif
