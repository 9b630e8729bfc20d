/* fake_nccl.c - the fakes of fake_nccl.h: each __wrap_X stands in for X inside the library. */
#include "fake_nccl.h"

#include "fake_cuda.h"

#include <stdlib.h>
#include <string.h>

fake_nccl_state fake_nccl;

const char *const fake_nccl_kind_names[FN_KINDS] = {
    "ncclCommInitRankConfig", "ncclCommCuDevice/UserRank/Count", "ncclGroupStart", "ncclGroupEnd", "ncclAllReduce",
    "ncclBroadcast",          "ncclCommFinalize",                 "ncclCommDestroy"};

/* A fake communicator: its state as ncclCommGetAsyncError reports it. */
typedef struct fake_comm {
    unsigned magic;
    atomic_int state; /* ncclSuccess or ncclInProgress */
    int finalized;
} fake_comm;
#define FAKE_COMM_MAGIC 0x6e63636cu

static ncclComm_t group_comm; /* the last communicator issued to inside a group (one rank per test) */
static int group_depth;

void fake_nccl_reset(int rank, int size) {
    memset(&fake_nccl, 0, sizeof fake_nccl);
    fake_nccl.rank = rank;
    fake_nccl.size = size;
    group_comm = NULL;
    group_depth = 0;
}

void fake_nccl_clear_log(void) { fake_nccl.logged = 0; }

/* Appends a call to the log, with where it stands among the CUDA fakes' work; returns its result. */
static ncclResult_t logged(fake_nccl_call call, ncclResult_t result) {
    call.depth = group_depth;
    call.captures_open = fake.captures_open;
    call.captures = fake.captures;
    call.launches = fake.calls[FAKE_LAUNCH];
    call.enqueued = fake.enqueued;
    call.result = result;
    if (fake_nccl.logged < FAKE_NCCL_LOG) fake_nccl.log[fake_nccl.logged] = call;
    ++fake_nccl.logged;
    return result;
}

static int fault(fake_nccl_kind kind) {
    if (++fake_nccl.calls[kind] != fake_nccl.fail_at || fake_nccl.fail_kind != kind) return 0;
    ++fake_nccl.injected;
    return 1;
}

static fake_comm *make(int in_progress) {
    fake_comm *c = calloc(1, sizeof *c);
    c->magic = FAKE_COMM_MAGIC;
    atomic_store(&c->state, in_progress ? ncclInProgress : ncclSuccess);
    atomic_fetch_add(&fake_nccl.live, 1);
    return c;
}

static void drop(fake_comm *c) {
    c->magic = 0;
    atomic_fetch_sub(&fake_nccl.live, 1);
    free(c);
}

ncclComm_t fake_nccl_comm(void) { return (ncclComm_t)make(0); }
void fake_nccl_destroy(ncclComm_t comm) { drop((fake_comm *)comm); }
int fake_nccl_is_live(ncclComm_t comm) { return ((fake_comm *)comm)->magic == FAKE_COMM_MAGIC; }

/* What a collective or group end returns: a fault, ncclInProgress (done at the next poll), or success. */
static ncclResult_t issue(fake_nccl_kind kind, ncclComm_t comm) {
    if (fault(kind)) return ncclSystemError;
    if (fake_nccl.in_progress_calls && comm) {
        atomic_store(&((fake_comm *)comm)->state, ncclInProgress);
        return ncclInProgress;
    }
    return ncclSuccess;
}

ncclResult_t __wrap_ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 7, sizeof *id);
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommInitRankConfig(ncclComm_t *comm, int n, ncclUniqueId id, int rank, ncclConfig_t *config) {
    (void)n, (void)id, (void)rank, (void)config;
    *comm = NULL;
    if (fault(FN_INIT)) return ncclSystemError;
    *comm = (ncclComm_t)make(fake_nccl.init_in_progress);
    return fake_nccl.init_in_progress ? ncclInProgress : ncclSuccess;
}
ncclResult_t __wrap_ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
    fake_comm *c = (fake_comm *)comm;
    if (!c || c->magic != FAKE_COMM_MAGIC) return ncclInvalidArgument;
    const ncclResult_t async = (ncclResult_t)atomic_load(&fake_nccl.async_error);
    if (async != ncclSuccess) {
        *state = async;
        return ncclSuccess;
    }
    *state = (ncclResult_t)atomic_load(&c->state);
    /* an in-progress call completes once polled; an init or finalize told to stay in progress never does */
    const int stuck = c->finalized ? fake_nccl.finalize_in_progress : fake_nccl.init_in_progress;
    if (*state == ncclInProgress && !stuck) atomic_store(&c->state, ncclSuccess);
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    atomic_fetch_add(&fake_nccl.aborts, 1);
    drop((fake_comm *)comm);
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommFinalize(ncclComm_t comm) {
    fake_comm *c = (fake_comm *)comm;
    atomic_fetch_add(&fake_nccl.finalizes, 1);
    if (fault(FN_FINALIZE)) return ncclSystemError;
    c->finalized = 1;
    atomic_store(&c->state, ncclInProgress);
    return ncclInProgress;
}
ncclResult_t __wrap_ncclCommDestroy(ncclComm_t comm) {
    if (fault(FN_DESTROY)) return ncclSystemError; /* the communicator is still there */
    atomic_fetch_add(&fake_nccl.destroys, 1);
    drop((fake_comm *)comm);
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommCuDevice(const ncclComm_t comm, int *device) {
    (void)comm;
    if (fault(FN_QUERY)) return ncclInvalidUsage;
    *device = 0;
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommUserRank(const ncclComm_t comm, int *rank) {
    (void)comm;
    if (fault(FN_QUERY)) return ncclInvalidUsage;
    *rank = fake_nccl.rank;
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommCount(const ncclComm_t comm, int *count) {
    (void)comm;
    if (fault(FN_QUERY)) return ncclInvalidUsage;
    *count = fake_nccl.size;
    return ncclSuccess;
}
ncclResult_t __wrap_ncclGroupStart(void) {
    if (fault(FN_GROUP_START)) return logged((fake_nccl_call){.what = FNC_GROUP_START}, ncclSystemError);
    ++group_depth;
    group_comm = NULL;
    return logged((fake_nccl_call){.what = FNC_GROUP_START}, ncclSuccess);
}
ncclResult_t __wrap_ncclGroupEnd(void) {
    --group_depth;
    return logged((fake_nccl_call){.what = FNC_GROUP_END}, issue(FN_GROUP_END, group_comm));
}
/* A collective inside a group completes at the group's end. */
static ncclResult_t collective(fake_nccl_kind kind, ncclComm_t comm) {
    atomic_fetch_add(&fake_nccl.collectives, 1);
    if (group_depth > 0) {
        group_comm = comm;
        return fault(kind) ? ncclSystemError : ncclSuccess;
    }
    return issue(kind, comm);
}
ncclResult_t __wrap_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream) {
    const fake_nccl_call call = {.what = FNC_ALL_REDUCE, .send = send, .recv = recv, .count = count, .type = type,
                                 .op = op, .comm = comm, .stream = stream};
    return logged(call, collective(FN_ALL_REDUCE, comm));
}
ncclResult_t __wrap_ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                      ncclComm_t comm, cudaStream_t stream) {
    const fake_nccl_call call = {.what = FNC_REDUCE_SCATTER, .send = send, .recv = recv, .count = count, .type = type,
                                 .op = op, .comm = comm, .stream = stream};
    return logged(call, collective(FN_ALL_REDUCE, comm));
}
ncclResult_t __wrap_ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
    const fake_nccl_call call = {.what = FNC_BROADCAST, .send = send, .recv = recv, .count = count, .type = type,
                                 .root = root, .comm = comm, .stream = stream};
    return logged(call, collective(FN_BROADCAST, comm));
}
