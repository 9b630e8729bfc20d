/*
 * ddp.h - data-parallel training: the context's NCCL communicator and the reduction of parameter gradients during a
 * block's backward (the hooks the blocks and the graph code call). One file per job: state.c (every build), comm.c (a
 * communicator on a context, attach and teardown), comm_init.c (making one), warmup.c (warm-up and peer timeouts),
 * grad_hooks.c (gradient hooks), pair_split.c (the two-rank split reduction), agree.c (agreements between ranks),
 * fingerprint.c (what the ranks compare when a syncing graph is made: every build), deadline.c (the wait for a
 * non-blocking communicator), waiting.c (the deadlines and a long wait's notices: every build), watchdog.c (the replay
 * watchdog, aborting, the lock around the communicator), copy_engine.c, step_layout.c and step_reduce.c (a step graph's
 * reduction across layers: step_reduce.h); a build without NCCL compiles nccl_stub.c instead of the NCCL ones
 * (src/ddp/sources.cmake), where every public gg_dist_* call is GG_ERROR_UNSUPPORTED and the hooks are no-ops (no
 * context has a communicator).
 */
#ifndef GG_DDP_H
#define GG_DDP_H

#include <pthread.h>
#include <stdatomic.h>

#include "block.h"
#include "plan.h"

/* A gradient buffer from gg_dist_alloc: NCCL memory in a symmetric window (copy engines on), else cudaMalloc's. */
typedef struct gg_dist_buffer {
    void *ptr;
    size_t bytes;
    int nccl_memory; /* ncclMemAlloc's (copy engines on), else cudaMalloc's */
    void *window;    /* ncclWindow_t; NULL when NCCL gave none (no symmetric support): then never reduced in place */
} gg_dist_buffer;

struct gg_watchdog;          /* watchdog.c */
struct gg_dist_fingerprint; /* below */

/* gg_dist_config.bucket_bytes' largest value (a bucket larger than any GPU's memory is no bucket). */
#define GG_DIST_MAX_BUCKET_BYTES ((size_t)1 << 40)

typedef struct gg_dist {
    void *comm;          /* ncclComm_t; NULL once aborted (no more collectives): `failure` says why */
    uint64_t generation; /* this attachment's number, unique in the process (an address may come again) */
    int owned;           /* gradgraph made it, so gradgraph destroys it */
    int rank, size;
    gg_dist_config config;
    cudaStream_t stream; /* the communication stream */
    cudaEvent_t ev_ready; /* a producer's stream -> the communication stream */
    cudaEvent_t ev_done;  /* the communication stream -> the caller's stream */
    void *agree_dev;      /* device and pinned host buffers of gg_dist_agree_algorithms (GG_DIST_AGREE_BYTES), */
    void *agree_host;     /* made with the communicator so that making a graph cannot fail half way through it */
    int ce_on;            /* large gradients go through copy_engine.c (every rank agreed at the warm-up) */
    /* The staging: two pieces of NCCL memory (ncclMemAlloc) in one symmetric window on comm, where the all-to-all
     * of a piece lands, or the two halves of the split reduction. */
    void *ce_staging;
    void *ce_window;       /* ncclWindow_t; released with the communicator */
    size_t ce_piece_bytes; /* a piece: bucket_bytes rounded down to 4 KiB */
    gg_dist_buffer *buffers; /* gg_dist_alloc's, until gg_dist_free (or the communicator goes) */
    int n_buffers;
    int graphs_holding; /* graphs whose executables hold NCCL work: gg_dist_detach refuses while there are any */
    gg_ctx_hook hook;   /* released with the context, after its graphs */
    /* Shared with the watchdog thread and gg_dist_abort from any thread (watchdog.c). The owner thread holds `lock`
     * (recursive) for every section that uses comm (gg_dist_enter / gg_dist_leave); whoever aborts first sets
     * abort_requested, so that a section's polls give up at once, then takes `lock`: comm is never freed under a
     * call that uses it. `failure` is written under `lock`, once, before comm becomes NULL. */
    pthread_mutex_t lock;
    int lock_made;
    atomic_int abort_requested; /* 0; 1 while the first thread to ask writes abort_why; 2 once it is written */
    char abort_why[GG_MSG_BYTES];
    char failure[GG_MSG_BYTES];
    struct gg_watchdog *watchdog; /* NULL until the communicator is ready, and again once it is stopped */
} gg_dist;

/* The factor every rank's term of a reduced gradient gets: 1/W for the mean (op average), 1 for the sum. */
static inline float gg_dist_term_scale(const gg_dist *d) {
    return d->config.op == GG_REDUCE_AVERAGE ? 1.0f / (float)d->size : 1.0f;
}

/* The most contexts gg_dist_init_threads takes (one process's GPUs). */
#define GG_DIST_MAX_LOCAL_RANKS 64

/* gg_process_defaults (internal.h) sets NCCL_NVLS_ENABLE=0 in the process when it is unset (NVLink multicast can
 * take a shared host's GPUs out of service). NCCL reads it when a communicator is made: gg_ctx_create calls it, and
 * so does every gradgraph call that makes one. No-op without NCCL. */

/* Hands the data-parallel part of a call's plan key down to it (comm_sms, pair_split: block.h), as the context's
 * communicator says now: the graph code calls it on every syncing call before its plan is looked up. */
void gg_dist_hand_down(const gg_ctx *ctx, gg_block_call *call);

/* A graph's executable now holds NCCL work (its first syncing replay), or such a graph is destroyed. */
void gg_dist_graph_holds(gg_ctx *ctx);
void gg_dist_graph_released(gg_ctx *ctx);

/* A parameter gradient of a syncing call is final on `producer`: reduce it now (overlap on), else later. */
gg_status gg_dist_grad_ready(gg_ctx *ctx, const gg_block_call *call, cudaStream_t producer, int tensor);

/* The split reduction of two ranks (copy engines on): each rank owns one half of a weight gradient (rank r: the
 * rows [r n/2, (r+1) n/2)). It first computes the peer's half into its own slot of the staging and all-gathers the
 * staging in place (copy engines), so it receives the peer's partial of its own half; then it computes its own half
 * with that partial added in the GEMM's epilogue (scaled by gg_dist_term_scale: the mean or the sum of the two,
 * rounded once, the owner's bits) and all-gathers the gradient in place. No NCCL CTAs and no adding kernel, so the
 * GEMMs keep every SM. gg_dist_pair_split: whether a syncing call's plan splits the gradients in split_tensors (a
 * bit per tensor index) for it: two ranks, copy engines, all-reduce, overlap on, half of each split gradient within
 * one piece (bucket_bytes), every other parameter gradient under GG_CE_MIN_BYTES (NCCL's all-reduce, not the
 * copy-engine all-to-all, which would land in the same staging). Then, at capture, gg_dist_pair_exchanges says
 * whether a gradient is exchanged: its buffer is a gg_dist_alloc window (1 MiB or more) and the call does not
 * accumulate (accumulate is per call, the plan per shape). Otherwise its halves are computed in place (added to the
 * gradient when accumulating) and it is reduced as usual (gg_dist_grad_ready). Every rank must pass the same M,
 * accumulate and kind of buffers, or they enqueue different collectives. */
int gg_dist_pair_split(const gg_ctx *ctx, const gg_block_call *call, unsigned split_tensors);
int gg_dist_pair_exchanges(const gg_ctx *ctx, const gg_block_call *call, int tensor);

/* One weight gradient's GEMM for the two-rank split: the gradient (m x n, column-major) = A (m x k) @ op(B), B stored
 * transposed with ldb = n and b_elem bytes an element; mm is planned for n/2 columns (one half). */
typedef struct gg_dist_half_gemm {
    const gg_matmul *mm;
    const void *A, *B;
    size_t b_elem;
    int64_t m, n;
} gg_dist_half_gemm;

/* One half of the split reduction of gradient `tensor`, on stream s: the peer's half (own = 0), computed into this
 * rank's staging slot and all-gathered, or this rank's own (own = 1), computed with the peer's partial added and
 * all-gathered into the gradient (see pair_split.c). A block calls it for the peer's half first, then, with other
 * work between them, for its own. */
gg_status gg_dist_pair_half(gg_ctx *ctx, const gg_block_call *call, int tensor, const gg_dist_half_gemm *gemm,
                            int own, cudaStream_t s);

/* End of a syncing call's backward on `main` (the graph code calls it after the block's enqueue): reduce what was
 * deferred (overlap off), then make `main` wait for the communication stream. No-op for calls that do not sync. */
gg_status gg_dist_finish(gg_ctx *ctx, const gg_block_call *call, cudaStream_t main);

/* Makes `main` wait for the communication stream (no reductions issued): the error path of a syncing call's
 * enqueue. No-op for calls that do not sync. */
gg_status gg_dist_join(gg_ctx *ctx, const gg_block_call *call, cudaStream_t main);

/* SMs a gradient-syncing call's GEMMs leave to communication (0 without a communicator, or when the reductions do
 * not overlap the backward). */
int gg_dist_comm_sms(const gg_ctx *ctx);

/* Whether call reduces its parameter gradients while its backward runs (a syncing call, overlap on). */
int gg_dist_overlaps(const gg_ctx *ctx, const gg_block_call *call);

/* Whether a call's tensor is a parameter gradient (an output not shaped by M). */
int gg_tensor_is_param(const gg_block_call *call, int tensor);

/* Checks that a graph's parameter gradients can be synced with the context's settings (reduce-scatter needs
 * element counts divisible by the number of ranks; all-reduce's pieces of bucket_bytes at most
 * GG_DIST_MAX_COLLECTIVES). */
gg_status gg_dist_check_shape(gg_ctx *ctx, const char *fn, const gg_block_call *shape);

/* The collective end of making a syncing graph, so that every rank runs the same GEMM kernels: first every rank says
 * whether it made its plans (plans NULL: this rank failed, before or at its plans, and only votes so; the context
 * keeps its own failure's message), so that one rank's
 * failure ends the call on all of them instead of leaving them waiting; then rank 0's algorithm for each GEMM of
 * the plans is broadcast, and the other ranks adopt it. Autotuning on each rank alone can pick different algorithms
 * for the same GEMM (timings within noise), and ranks whose kernels differ wait for the slowest at every
 * reduction: on 2 H200s one such run of block 3 reached 1.81x against 1.92-1.99x (docs/distributed.md). Every
 * rank calls it for the same graphs in the same order (gg_block_graph_create of a syncing graph does), outside any
 * capture; count: the graph's buckets. GG_ERROR_PEER when another rank failed. fp: the graph's fingerprint, compared
 * (gg_dist_agree_fingerprint) once every rank made its plans, before the algorithms travel (their size depends on
 * the buckets), and again with GG_FP_ALGORITHMS set once they are adopted: GG_ERROR_INVALID_ARGUMENT on every rank
 * when the ranks differ. fp NULL: the caller has compared what it makes itself (a step graph: gg_dist_step_agree,
 * before its plans are agreed in pieces of GG_DIST_MAX_AGREE_PLANS), and nothing is compared here. */
gg_status gg_dist_agree_algorithms(gg_ctx *ctx, const char *fn, gg_block_plan *const *plans, int count,
                                   struct gg_dist_fingerprint *fp);
#define GG_DIST_MAX_AGREE_PLANS 64 /* the most plans one agreement takes (a graph's buckets: GG_MAX_BUCKETS) */

/* What every rank must have in common for a syncing object to issue the same collectives in the same order: one
 * int64 per field, compared across the ranks when the object is made. The caller fills the fields of what it makes
 * (block, dims, precision, buckets, graph flags; GG_FP_ALGORITHMS: gg_dist_hash of the GEMM algorithms, 0 before
 * they are agreed); gg_dist_agree_fingerprint fills the communicator's (op, sync, bucket_bytes, overlap, comm_sms,
 * copy engines). The pure parts are in fingerprint.c (every build, tested on the CPU). */
typedef enum gg_dist_fp_field {
    GG_FP_BLOCK,        /* gg_block_kind */
    GG_FP_DIM0,         /* the block's first hidden dimension */
    GG_FP_DIM1,         /* its second (0 when it has one) */
    GG_FP_PRECISION,    /* the resolved gg_precision */
    GG_FP_N_BUCKETS,    /* how many buckets */
    GG_FP_MAX_TOKENS,   /* the largest bucket */
    GG_FP_BUCKETS,      /* gg_dist_hash of the bucket list */
    GG_FP_GRAPH_FLAGS,  /* allow_padding | device_select << 1 | eager_beyond_max << 2 */
    GG_FP_OP,           /* gg_dist_config.op */
    GG_FP_SYNC,         /* gg_dist_config.sync */
    GG_FP_BUCKET_BYTES, /* gg_dist_config.bucket_bytes */
    GG_FP_OVERLAP,      /* gg_dist_config.overlap */
    GG_FP_COMM_SMS,     /* gg_dist_config.comm_sms */
    GG_FP_COPY_ENGINES, /* whether copy engines are on (after the warm-up's agreement) */
    GG_FP_ALGORITHMS,   /* gg_dist_hash of the GEMM algorithms */
    GG_FP_FIELDS
} gg_dist_fp_field;

typedef struct gg_dist_fingerprint {
    int64_t field[GG_FP_FIELDS];
} gg_dist_fingerprint;

/* "bucket_bytes", ...: the name a message gives each field (the config's or the graph's own name). */
extern const char *const gg_dist_fp_names[GG_FP_FIELDS];

/* FNV-1a over n bytes, continuing from h (start with GG_DIST_HASH_SEED), folded to 63 bits by the caller's use:
 * gg_dist_hash_field gives a non-negative int64 for a fingerprint field. */
#define GG_DIST_HASH_SEED 1469598103934665603ull
uint64_t gg_dist_hash(uint64_t h, const void *p, size_t n);
int64_t gg_dist_hash_field(uint64_t h);

/* The first field in which lo and hi (the ranks' smallest and largest values of each field) differ, or -1 when
 * every rank has the same fingerprint. */
int gg_dist_fp_first_difference(const gg_dist_fingerprint *lo, const gg_dist_fingerprint *hi);

/* The message of a difference in `field`: what this rank has and the range of the ranks' values. */
void gg_dist_fp_describe(char *out, size_t bytes, const char *fn, int field, const gg_dist_fingerprint *mine,
                         const gg_dist_fingerprint *lo, const gg_dist_fingerprint *hi);

/* Compares fp (with the communicator's fields filled in here) across the ranks: an all-reduce of every field's
 * minimum and maximum, waited for with the peer timeout. Every rank that called it gets the same answer: equal
 * (GG_SUCCESS), or GG_ERROR_INVALID_ARGUMENT on every rank naming the first differing field, this rank's value and
 * the ranks' smallest and largest (the communicator stays usable). Collective; outside any capture; a
 * communicator of one rank compares nothing. Other statuses: NCCL's, as gg_dist_all_ok. */
gg_status gg_dist_agree_fingerprint(gg_ctx *ctx, const char *fn, const gg_dist_fingerprint *fp);

/* GG_ERROR_NCCL naming what failed, with NCCL's strings (result: an ncclResult_t); and the same as a statement
 * that returns from the caller. Built without NCCL, never called. */
gg_status gg_dist_fail_nccl(gg_ctx *ctx, int result, const char *what);

/* The end of one NCCL call on ctx's communicator, which gradgraph makes non-blocking: ncclInProgress is waited out
 * (ncclCommGetAsyncError polled, with the peer timeout; past it the communicator is aborted); then GG_SUCCESS, or
 * GG_ERROR_NCCL naming `what`. GG_NCCL_TRY(ctx, fn, (args)) calls fn args and is the same as a statement that returns
 * from the caller, naming the call by fn alone (messages carry NCCL's function, not gradgraph's source text). */
gg_status gg_dist_nccl_done(gg_ctx *ctx, int result, const char *what);
#define GG_NCCL_TRY(ctx, fn, args) GG_TRY(gg_dist_nccl_done((ctx), (int)(fn args), #fn))
/* gg_dist_nccl_done for a call that leaves the ranks out of step when it fails (a step of their agreement, a window's
 * registration): the communicator is aborted then (the others, waiting for this rank's part, are released as NCCL
 * sees it go, or at their deadline), as GG_ERROR_NCCL promises. */
gg_status gg_dist_nccl_done_or_abort(gg_ctx *ctx, int result, const char *what);
/* The end of a syncing call (a replay of a syncing graph or step, a syncing graph's call past its largest bucket,
 * gg_dist_reduce) with status, from the point where it passed its checks: a failure there (a capture, instantiation
 * or launch; a plan; an enqueue, its collectives' included) leaves this rank's collectives missing while the other
 * ranks' wait for them, and a later collective of this rank would pair with theirs, mixing calls. So the
 * communicator is aborted, and the message says so (status kept). Refusals (gg_status_is_refusal) enqueue nothing
 * and abort nothing. Not while the call's work sits in a
 * capture still open (user_stream non-NULL and capturing: NCCL's abort must not free what that capture holds; the
 * caller's graph must not be launched, as gradgraph.h says). Takes the communicator's lock. */
gg_status gg_dist_settle(gg_ctx *ctx, gg_status status, const cudaStream_t *user_stream);

/* Aborts ctx's communicator, if it still has one, and forgets it: every rank blocked on it is released, and
 * nobody destroys or uses it again (an attached one is freed too: its owner must not destroy it). why (NULL: "an
 * NCCL error") is what later calls that need the communicator report. Takes the lock (the owner thread may hold it
 * already); the public gg_dist_abort, for other threads, is in watchdog.c. */
void gg_dist_abort_now(gg_ctx *ctx, const char *why);

/* gg_dist_check for a call named fn: GG_ERROR_NCCL (naming fn, the rank and why) when the communicator is
 * aborted, or NCCL reports an asynchronous error (then it is aborted now). GG_SUCCESS without a communicator. */
gg_status gg_dist_poll(gg_ctx *ctx, const char *fn);

/* The section of a call that uses ctx's communicator: takes the lock, and refuses (GG_ERROR_NCCL, naming fn, the
 * rank and why the communicator was aborted) when it is gone; gg_dist_leave ends the section. Recursive. */
gg_status gg_dist_enter(gg_ctx *ctx, const char *fn);
void gg_dist_leave(gg_ctx *ctx);

/* Before work that waits on the other ranks is enqueued on `stream` (inside the section): a replay of a syncing graph,
 * or a collective enqueued outside a graph (gg_dist_reduce's, a syncing graph's call past its largest bucket). While
 * 16 such are in flight, waits for the oldest to finish, polling; an abort asked meanwhile (the watchdog's, at the
 * step deadline, or gg_dist_abort's) ends the wait with GG_ERROR_NCCL, the communicator aborted. *watched: whether the
 * work is to be watched (a watchdog, and a stream not being captured: nothing to wait for then either). */
gg_status gg_dist_await_replay_slot(gg_ctx *ctx, const char *fn, cudaStream_t stream, int *watched);

/* That work was enqueued on `stream` (inside the section, after gg_dist_await_replay_slot said it is watched): the
 * watchdog waits for it with the step deadline (an event recorded after it). what: the work, for messages ("a replay
 * of a syncing graph"; a string that lives as long as the context). */
void gg_dist_watch(gg_ctx *ctx, cudaStream_t stream, const char *what);
#define GG_WATCH_REPLAY "a replay of a syncing graph"
#define GG_WATCH_REDUCE "gg_dist_reduce's collective"
#define GG_WATCH_BEYOND_MAX "the gradient reduction of a call past a syncing graph's largest bucket"

/* Whether every rank says ok (an all-reduce of the flag with min, waited for with the peer timeout): the agreement
 * before a collective step that a local failure could otherwise leave the other ranks waiting in. what: the
 * step, for messages. Collective; outside any capture. */
gg_status gg_dist_all_ok(gg_ctx *ctx, int ok, const char *what, int *all_ok);
/* gg_dist_all_ok for a rank whose call failed before that step (ok 0), so that the others fail at once instead of
 * waiting for it: the context keeps its own failure's message. */
void gg_dist_all_ok_failed(gg_ctx *ctx, const char *what);

#endif
