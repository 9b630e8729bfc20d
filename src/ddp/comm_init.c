/*
 * comm_init.c - making a context's communicator (comm.c puts it on the context): NCCL's unique id shared through a
 * file or MPI for one process per GPU, or one communicator per device for this process's threads; the communicators
 * gradgraph makes are non-blocking and waited for with the init deadline. Also the entry wrapper of every call that
 * puts a communicator on a context (gg_dist_claimed), which takes part in an MPI bootstrap's broadcast even when the
 * call is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "bootstrap.h"
#include "comm_internal.h"

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

gg_status gg_dist_claimed(gg_ctx *ctx, const char *fn, gg_comm_maker body, const void *arg,
                          const gg_dist_config *config, int broadcasts, const void *mpi_comm) {
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

/* Waits for a communicator being made (non-blocking) with the init deadline, counted from `since` (a
 * gg_dist_now_s() time: the ranks of a group share one deadline); aborts it when it fails or is late. r: what
 * ncclCommInitRankConfig (or the group's end) returned. */
static gg_status wait_made(gg_ctx *ctx, const char *fn, ncclComm_t comm, ncclResult_t r, int rank, const char *what,
                           double since) {
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctx, rank, what, GG_DIST_TIMEOUT_INIT);
    gg_dist_wait_since(&w, since);
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
    const double since = gg_dist_now_s();
    const ncclResult_t r = ncclCommInitRankConfig(&comm, size, *id, rank, &config);
    const gg_status made = wait_made(ctx, fn, comm, r, rank, "ncclCommInitRankConfig", since);
    gg_device_leave(ctx, saved);
    GG_TRY(made);
    return gg_dist_install(ctx, fn, comm, 1, c); /* aborts comm on failure */
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
    GG_TRY(gg_dist_begin(ctx, fn, config, &c));
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
    gg_status checked = gg_dist_begin(ctx, fn, config, &c);
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
    return gg_dist_claimed(ctx, "gg_dist_init_env", init_env, id_path, config, id_path == NULL, NULL);
}

static gg_status init_mpi(gg_ctx *ctx, const char *fn, const void *mpi_comm, const gg_dist_config *config) {
    /* this rank's own checks, then the broadcast every rank takes part in, whatever they found: a rank 0 that
     * returned before it would leave the others in MPI_Bcast, which has no deadline */
    gg_dist_config c;
    const gg_status checked = gg_dist_begin(ctx, fn, config, &c);
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
    return gg_dist_claimed(ctx, "gg_dist_init_mpi", init_mpi, mpi_comm, config, 1, mpi_comm);
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
    const double since = gg_dist_now_s(); /* one deadline for the group: its ranks finish together */
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
        status = wait_made(ctx, fn, comms[i], r, i, "ncclCommInitRankConfig (one per device, grouped)", since);
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
        GG_TRY(gg_dist_begin(ctxs[i], fn, config, &c));
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
        status = gg_dist_make(ctxs[i], fn, comms[i], 0, i, count, &c);
    if (status == GG_SUCCESS) status = gg_dist_warm_up(ctxs, count, fn); /* all ranks together, from this thread */
    if (status != GG_SUCCESS) {
        /* Every communicator the warm-up left is aborted first: the ranks' collectives may wait for one another on
         * the GPU, and releasing them one by one would drain each stream in turn, each up to the peer deadline (8
         * ranks: 40 minutes at the default). An abort never blocks and ends NCCL's kernels. A context make_dist did
         * not reach has no state: its communicator, not owned yet, is aborted after. */
        for (int i = 0; i < count; ++i)
            if (ctxs[i]->dist) gg_dist_abort_now(ctxs[i], NULL);
        for (int i = 0; i < count; ++i)
            if (gg_dist_release(ctxs[i])) (void)ncclCommAbort(comms[i]);
        return status;
    }
    for (int i = 0; i < count; ++i) ctxs[i]->dist->owned = 1;
    for (int i = 0; i < count && status == GG_SUCCESS; ++i) status = gg_watchdog_start(ctxs[i], fn);
    if (status != GG_SUCCESS) {
        for (int i = 0; i < count; ++i) gg_dist_abort_now(ctxs[i], NULL); /* the others are in no collective */
        for (int i = 0; i < count; ++i) gg_dist_release(ctxs[i]);
        return status;
    }
    for (int i = 0; i < count; ++i) gg_dist_log_ready(ctxs[i], fn);
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

