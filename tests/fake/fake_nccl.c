/* fake_nccl.c - the fakes of fake_nccl.h: each __wrap_X stands in for X inside the library. */
#include "fake_nccl.h"

#include "fake_cuda.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fake_alloc.h"

fake_nccl_state fake_nccl;

const char *const fake_nccl_kind_names[FN_KINDS] = {
    "ncclCommInitRankConfig", "ncclCommCuDevice/UserRank/Count", "ncclGroupStart", "ncclGroupEnd", "ncclAllReduce",
    "ncclBroadcast",          "ncclCommFinalize",                 "ncclCommDestroy", "ncclGetVersion", "ncclMemAlloc",
    "ncclMemFree",            "ncclCommWindowRegister",           "ncclCommWindowDeregister", "ncclAlltoAll",
    "ncclAllGather",          "ncclGetUniqueId"};

/* A window (ncclCommWindowRegister), on its communicator's list. */
typedef struct fake_window {
    struct fake_window *next;
} fake_window;

/* A fake communicator: its state as ncclCommGetAsyncError reports it, and its windows. */
typedef struct fake_comm {
    unsigned magic;
    atomic_int state; /* ncclSuccess or ncclInProgress */
    int finalized;
    double ready_at; /* > 0: an init in progress until this monotonic time (first_init_ready_s) */
    fake_window *windows;
    struct fake_comm *next_gone; /* once destroyed or aborted: kept until the next reset (fake_nccl_is_live) */
} fake_comm;

/* Communicators destroyed or aborted since the last reset: their memory stays readable (magic 0), so that a test can
 * ask whether gradgraph aborted the one it attached (fake_nccl_is_live) before destroying it itself. */
static fake_comm *gone;
static pthread_mutex_t gone_lock = PTHREAD_MUTEX_INITIALIZER; /* the watchdog thread may abort one */
#define FAKE_COMM_MAGIC 0x6e63636cu

/* NCCL memory: address ranges in a reservation that nothing is mapped at (never dereferenced, but each as long as
 * asked for, so that ranges inside it can be told apart), handed out in order from the reset on; the live ones in a
 * table, so that a free of anything else is seen. */
enum { NCCL_SPACE_BITS = 38, FAKE_NCCL_ALLOCS = 64 };
static char *nccl_space, *nccl_next;
static struct {
    char *p;
    size_t bytes;
} allocs[FAKE_NCCL_ALLOCS];

static ncclComm_t group_comm; /* the last communicator issued to inside a group: its group end's ncclInProgress */
static int group_depth;

void fake_nccl_reset(int rank, int size) {
    memset(&fake_nccl, 0, sizeof fake_nccl);
    fake_nccl.rank = rank;
    fake_nccl.size = size;
    fake_nccl.version = NCCL_VERSION_CODE;
    fake_nccl.id_byte = 7;
    group_comm = NULL;
    group_depth = 0;
    pthread_mutex_lock(&gone_lock);
    while (gone) {
        fake_comm *c = gone;
        gone = c->next_gone;
        free(c);
    }
    pthread_mutex_unlock(&gone_lock);
    memset(allocs, 0, sizeof allocs); /* what a test left allocated (a failed free) is forgotten */
    nccl_next = nccl_space;
}

void fake_nccl_clear_log(void) { fake_nccl.logged = 0; }

/* The bytes of one element of `type`. */
static size_t type_bytes(ncclDataType_t type) {
    switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 4;
    }
}

/* Appends a call to the log, with where it stands among the CUDA fakes' work (a collective also to fake_log, with its
 * buffers' extents); returns its result. */
static ncclResult_t logged(fake_nccl_call call, ncclResult_t result) {
    if (call.what >= FNC_ALL_REDUCE && (result == ncclSuccess || result == ncclInProgress)) {
        /* the buffers' extents: a reduce-scatter sends, an all-gather receives, an all-to-all both, `size` counts */
        const size_t one = call.count * type_bytes(call.type), all = one * (size_t)fake_nccl.size;
        const size_t send = call.what == FNC_REDUCE_SCATTER || call.what == FNC_ALL_TO_ALL ? all : one;
        const size_t recv = call.what == FNC_ALL_GATHER || call.what == FNC_ALL_TO_ALL ? all : one;
        fake_log_collective(call.stream, call.send, send, call.recv, recv);
    }
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

static double monotonic_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static fake_comm *make(int in_progress) {
    fake_comm *c = calloc(1, sizeof *c);
    c->magic = FAKE_COMM_MAGIC;
    atomic_store(&c->state, in_progress ? ncclInProgress : ncclSuccess);
    atomic_fetch_add(&fake_nccl.live, 1);
    return c;
}

/* A communicator's windows go with it. */
static void drop(fake_comm *c) {
    while (c->windows) {
        fake_window *w = c->windows;
        c->windows = w->next;
        free(w);
        atomic_fetch_sub(&fake_nccl.windows, 1);
    }
    c->magic = 0;
    atomic_fetch_sub(&fake_nccl.live, 1);
    pthread_mutex_lock(&gone_lock);
    c->next_gone = gone;
    gone = c;
    pthread_mutex_unlock(&gone_lock);
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
    if (fault(FN_UNIQUE_ID)) return ncclSystemError;
    memset(id, fake_nccl.id_byte, sizeof *id);
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommInitRankConfig(ncclComm_t *comm, int n, ncclUniqueId id, int rank, ncclConfig_t *config) {
    (void)n, (void)rank, (void)config;
    fake_nccl.init_id = id;
    *comm = NULL;
    if (fault(FN_INIT)) return ncclSystemError;
    const int first = fake_nccl.inits++ == 0 && fake_nccl.first_init_ready_s > 0;
    fake_comm *c = make(fake_nccl.init_in_progress || first);
    if (first) c->ready_at = monotonic_s() + fake_nccl.first_init_ready_s;
    *comm = (ncclComm_t)c;
    return fake_nccl.init_in_progress || first ? ncclInProgress : ncclSuccess;
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
    /* an in-progress call completes once polled; an init, a finalize or calls told to stay in progress never do */
    const int stuck = c->finalized    ? fake_nccl.finalize_in_progress
                      : c->ready_at > 0 ? monotonic_s() < c->ready_at
                                        : fake_nccl.init_in_progress || fake_nccl.calls_stay_in_progress;
    if (*state == ncclInProgress && !stuck) {
        atomic_store(&c->state, ncclSuccess);
        c->ready_at = 0; /* its init is done: later calls follow the flags */
    }
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
    *device = fake_nccl.device;
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
    if (group_depth == 0) { /* as NCCL: an end outside a group is refused (and counted: gradgraph must not) */
        atomic_fetch_add(&fake_nccl.misuse, 1);
        return logged((fake_nccl_call){.what = FNC_GROUP_END}, ncclInvalidUsage);
    }
    --group_depth;
    return logged((fake_nccl_call){.what = FNC_GROUP_END}, issue(FN_GROUP_END, group_comm));
}
/* A call on a communicator inside a group completes at the group's end. */
static ncclResult_t on_comm(fake_nccl_kind kind, ncclComm_t comm) {
    if (group_depth > 0) {
        group_comm = comm;
        return fault(kind) ? ncclSystemError : ncclSuccess;
    }
    return issue(kind, comm);
}
static ncclResult_t collective(fake_nccl_kind kind, ncclComm_t comm) {
    atomic_fetch_add(&fake_nccl.collectives, 1);
    return on_comm(kind, comm);
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
ncclResult_t __wrap_ncclGetVersion(int *version) {
    if (fault(FN_VERSION)) return ncclSystemError;
    *version = fake_nccl.version;
    return ncclSuccess;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0) /* the copy-engine path's calls (src/ddp/copy_engine.c) */
/* The slot of the live allocation at p, or with p NULL a free slot; -1 if none. */
static int find_alloc(const void *p) {
    for (int i = 0; i < FAKE_NCCL_ALLOCS; ++i)
        if (allocs[i].p == p) return i;
    return -1;
}

/* Whether [p, p + bytes) lies inside one live allocation. */
static int in_alloc(const char *p, size_t bytes) {
    for (int i = 0; i < FAKE_NCCL_ALLOCS; ++i)
        if (allocs[i].p && p >= allocs[i].p && bytes <= allocs[i].bytes &&
            (size_t)(p - allocs[i].p) <= allocs[i].bytes - bytes)
            return 1;
    return 0;
}

ncclResult_t __wrap_ncclMemAlloc(void **ptr, size_t bytes) {
    if (fault(FN_MEM_ALLOC)) return ncclSystemError;
    if (!nccl_space) {
        void *m = mmap(NULL, (size_t)1 << NCCL_SPACE_BITS, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (m == MAP_FAILED) return ncclSystemError;
        nccl_space = nccl_next = m;
    }
    const size_t rounded = (bytes + 4095) & ~(size_t)4095; /* NCCL hands out whole granules */
    const int slot = find_alloc(NULL);
    if (slot < 0 || rounded == 0 || (size_t)(nccl_space + ((size_t)1 << NCCL_SPACE_BITS) - nccl_next) < rounded)
        return ncclSystemError;
    allocs[slot].p = nccl_next;
    allocs[slot].bytes = bytes;
    nccl_next += rounded;
    atomic_fetch_add(&fake_nccl.memory, 1);
    *ptr = allocs[slot].p;
    return ncclSuccess;
}
ncclResult_t __wrap_ncclMemFree(void *ptr) {
    if (!ptr) return ncclSuccess;
    const int slot = find_alloc(ptr);
    if (slot < 0) {
        atomic_fetch_add(&fake_nccl.misuse, 1);
        return ncclInvalidArgument;
    }
    if (fault(FN_MEM_FREE)) return ncclSystemError;
    allocs[slot].p = NULL;
    atomic_fetch_sub(&fake_nccl.memory, 1);
    return ncclSuccess;
}
ncclResult_t __wrap_ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int flags) {
    (void)flags;
    fake_comm *c = (fake_comm *)comm;
    if (!c || c->magic != FAKE_COMM_MAGIC || !in_alloc(buff, size)) { /* symmetric windows need NCCL memory */
        atomic_fetch_add(&fake_nccl.misuse, 1);
        return ncclInvalidArgument;
    }
    const ncclResult_t r = on_comm(FN_WIN_REGISTER, comm);
    if (r != ncclSuccess && r != ncclInProgress) return r;
    fake_window *w = calloc(1, sizeof *w);
    w->next = c->windows;
    c->windows = w;
    atomic_fetch_add(&fake_nccl.windows, 1);
    *win = (ncclWindow_t)w;
    return r;
}
ncclResult_t __wrap_ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
    fake_comm *c = (fake_comm *)comm;
    fake_window **at = c && c->magic == FAKE_COMM_MAGIC ? &c->windows : NULL;
    while (at && *at && *at != (fake_window *)win) at = &(*at)->next;
    if (!at || !*at) {
        atomic_fetch_add(&fake_nccl.misuse, 1);
        return ncclInvalidArgument;
    }
    const ncclResult_t r = on_comm(FN_WIN_DEREGISTER, comm);
    if (r != ncclSuccess && r != ncclInProgress) return r; /* the window is still there */
    fake_window *w = *at;
    *at = w->next;
    free(w);
    atomic_fetch_sub(&fake_nccl.windows, 1);
    return r;
}
ncclResult_t __wrap_ncclAlltoAll(const void *send, void *recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                                 cudaStream_t stream) {
    const fake_nccl_call call = {.what = FNC_ALL_TO_ALL, .send = send, .recv = recv, .count = count, .type = type,
                                 .comm = comm, .stream = stream};
    return logged(call, collective(FN_ALL_TO_ALL, comm));
}
ncclResult_t __wrap_ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                                  cudaStream_t stream) {
    const fake_nccl_call call = {.what = FNC_ALL_GATHER, .send = send, .recv = recv, .count = count, .type = type,
                                 .comm = comm, .stream = stream};
    return logged(call, collective(FN_ALL_GATHER, comm));
}
#endif
