/*
 * fake_nccl.h - NCCL as the CPU tests see it: the calls gradgraph makes on a communicator are replaced at link time
 * (-Wl,--wrap; the list is GG_FAKED_NCCL in tests/CMakeLists.txt) by fakes that hand out fake communicators, count
 * the live ones, record aborts, finalizes and destroys, stay ncclInProgress or report an asynchronous error on
 * request, and fail the k-th call of a kind (fault injection). Collectives enqueue nothing (the fake CUDA streams
 * are always idle) and leave the data as it is: one rank's values are everybody's. The copy-engine path's calls
 * (NCCL 2.28+) are faked too: ncclMemAlloc hands out address ranges that nothing is mapped at (the CUDA fakes call
 * every address outside the test's host ranges device memory) and counts the live ones; ncclCommWindowRegister
 * makes a window on a communicator, over NCCL memory only, counted live until deregistered or until its
 * communicator goes (NCCL releases a communicator's windows with it); a free or deregistration of something the
 * fakes never handed out, and a group end outside a group, are refused and counted in `misuse`. ncclGetVersion
 * reports `version` (the header's, at least 2.28). Every group start, group end and collective is logged with its
 * arguments and where it stood among the CUDA fakes' work (fake_nccl.log), so that a test can check what was
 * issued, on which stream, inside which capture and before or after which launches. Used by test_dist_faults and
 * test_step_sync, always with the CUDA fakes (fake_cuda.h).
 */
#ifndef GG_FAKE_NCCL_H
#define GG_FAKE_NCCL_H

#include <stdatomic.h>

#include <stddef.h>

#include <nccl.h>

/* The calls fault injection can fail, each counted on its own. */
typedef enum fake_nccl_kind {
    FN_INIT,        /* ncclCommInitRankConfig */
    FN_QUERY,       /* ncclCommCuDevice, ncclCommUserRank, ncclCommCount */
    FN_GROUP_START, /* ncclGroupStart */
    FN_GROUP_END,   /* ncclGroupEnd */
    FN_ALL_REDUCE,  /* ncclAllReduce */
    FN_BROADCAST,   /* ncclBroadcast */
    FN_FINALIZE,    /* ncclCommFinalize */
    FN_DESTROY,     /* ncclCommDestroy */
    FN_VERSION,     /* ncclGetVersion */
    FN_MEM_ALLOC,   /* ncclMemAlloc */
    FN_MEM_FREE,    /* ncclMemFree (a failed one frees nothing) */
    FN_WIN_REGISTER,   /* ncclCommWindowRegister */
    FN_WIN_DEREGISTER, /* ncclCommWindowDeregister (a failed one leaves the window) */
    FN_ALL_TO_ALL,  /* ncclAlltoAll */
    FN_ALL_GATHER,  /* ncclAllGather */
    FN_UNIQUE_ID,   /* ncclGetUniqueId */
    FN_KINDS
} fake_nccl_kind;

extern const char *const fake_nccl_kind_names[FN_KINDS];

/* What a logged call was. */
typedef enum fake_nccl_op {
    FNC_GROUP_START,
    FNC_GROUP_END,
    FNC_ALL_REDUCE,
    FNC_REDUCE_SCATTER,
    FNC_BROADCAST,
    FNC_ALL_TO_ALL,
    FNC_ALL_GATHER
} fake_nccl_op;

/* One call as the fakes saw it. Group starts and ends have only depth, the positions and result. */
typedef struct fake_nccl_call {
    fake_nccl_op what;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;             /* ncclBroadcast */
    ncclComm_t comm;
    cudaStream_t stream;
    int depth;            /* the group nesting after the call: a collective inside a group sees >= 1 */
    int captures_open;    /* fake.captures_open at the call: > 0 inside a stream capture */
    int captures;         /* fake.captures at the call: which capture (the count of captures begun) */
    int launches;         /* fake.calls[FAKE_LAUNCH] at the call: the kernel launches before it */
    int enqueued;         /* fake.enqueued at the call: the stream work before it */
    ncclResult_t result;  /* what the fake returned */
} fake_nccl_call;

#define FAKE_NCCL_LOG 1024

typedef struct fake_nccl_state {
    int rank, size;               /* what a fake communicator says it is (ncclCommUserRank, ncclCommCount) */
    atomic_int live;              /* communicators made and neither destroyed nor aborted */
    atomic_int aborts, finalizes, destroys;
    atomic_int async_error;       /* what ncclCommGetAsyncError reports (ncclSuccess: the pending state below) */
    int init_in_progress;         /* a new communicator stays ncclInProgress (the init never completes) */
    /* > 0: the first communicator made after the reset is ready this many seconds after it was made, whatever
     * init_in_progress says (which still holds the others: one rank of a group ready, late, and the next never) */
    double first_init_ready_s;
    int inits;                    /* communicators made since the reset (ncclCommInitRankConfig) */
    int finalize_in_progress;     /* a finalized communicator stays ncclInProgress */
    int in_progress_calls;        /* collectives and group ends return ncclInProgress, done at the next poll */
    int calls_stay_in_progress;   /* ... and never done (a peer that never joins a non-blocking call) */
    fake_nccl_kind fail_kind;     /* with fail_at: the fail_at-th call of this kind fails */
    int fail_at;                  /* 0: no fault */
    int injected;
    int calls[FN_KINDS];
    atomic_int collectives;       /* collectives issued */
    atomic_int memory;            /* ncclMemAlloc allocations not freed */
    atomic_int windows;           /* windows registered, neither deregistered nor gone with their communicator */
    atomic_int misuse;            /* ncclMemFree of no live allocation, a window over other memory, a deregistration
                                     of no live window of that communicator, ncclGroupEnd outside a group */
    int version;                  /* what ncclGetVersion reports */
    int device;                   /* what ncclCommCuDevice reports (fake_nccl_reset: 0) */
    unsigned char id_byte;        /* ncclGetUniqueId's id: every byte this (fake_nccl_reset: 7) */
    ncclUniqueId init_id;         /* the id the last ncclCommInitRankConfig was given */
    int logged;                   /* calls logged since the reset or the last fake_nccl_clear_log; the first
                                     FAKE_NCCL_LOG are in log */
    fake_nccl_call log[FAKE_NCCL_LOG];
} fake_nccl_state;

extern fake_nccl_state fake_nccl;

/* Clears everything: communicators of rank `rank` of `size`, every call succeeding at once. */
void fake_nccl_reset(int rank, int size);

/* Empties the log (the rest of the state stays). */
void fake_nccl_clear_log(void);

/* A communicator as a caller's own (for gg_dist_attach), counted live; and its destruction by the caller. */
ncclComm_t fake_nccl_comm(void);
void fake_nccl_destroy(ncclComm_t comm);
int fake_nccl_is_live(ncclComm_t comm);

#endif
