/*
 * internal.h - what every host source of gradgraph shares: the context, error reporting and the check macros.
 * Host C11 only; CUDA C lives in kernels/.
 */
#ifndef GG_INTERNAL_H
#define GG_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "gradgraph.h"
#include "guard.h"
#include "plan_cache.h"

#define GG_MSG_BYTES 512
#define GG_GEMM_STREAMS 2 /* GEMMs that may run at once: one per stream, each with its own workspace */
/* Slices of ctx->counter: block 1's reduction, and two column sums that may run at once (one per stream), together
 * GG_COUNTER_REDUCTION_WORDS words (what a step graph's slot gets of its own, gg_exec_res.counter); then the fp16
 * overflow word (gg_fp16_overflow_flag: nonzero once an fp16 operand was past fp16's range). There is one overflow
 * word per context, past every reduction slice: kernels are handed ctx->counter + GG_COUNTER_OVERFLOW, never
 * gg_exec_res.counter + GG_COUNTER_OVERFLOW (a step slot's counters end before it). */
enum { GG_COUNTER_TANH_GATE = 0, GG_COUNTER_SUM_A = 32, GG_COUNTER_SUM_B = 64, GG_COUNTER_REDUCTION_WORDS = 96,
       GG_COUNTER_OVERFLOW = GG_COUNTER_REDUCTION_WORDS, GG_COUNTER_WORDS = GG_COUNTER_OVERFLOW + 1 };

/* Something hanging off a context that must be destroyed with it (a graph, a communicator), linked into the context
 * through a hook the object embeds. The context runs the hooks without knowing what they destroy: GG_HOOK_EARLY ones
 * first, newest first (graphs and steps, which may hold work on the communicator and optimizers), then GG_HOOK_LATE
 * ones, oldest first (optimizers, the communicator). A hook's destroy unlinks it (gg_ctx_hook_remove) or leaves it to
 * the context, which unlinks each hook before it runs it. */
typedef struct gg_ctx_hook {
    void (*destroy)(void *obj);
    void *obj;
    struct gg_ctx_hook *next;
} gg_ctx_hook;

typedef enum gg_hook_order { GG_HOOK_EARLY, GG_HOOK_LATE } gg_hook_order;

void gg_ctx_hook_add(gg_ctx *ctx, gg_ctx_hook *hook, gg_hook_order order);
/* Unlinks hook from ctx (no-op when it is not linked). */
void gg_ctx_hook_remove(gg_ctx *ctx, gg_ctx_hook *hook);

/* Process-wide defaults of the optional dependencies, which gg_ctx_create sets first: declared here, defined where
 * the dependency lives (the data-parallel folder: NCCL's environment; a no-op without NCCL). */
void gg_process_defaults(void);

struct gg_ctx {
    gg_config config;
    int sm_count;
    int l2_bytes; /* the L2's size (cudaDevAttrL2CacheSize) */
    int has_wgmma; /* the device runs the build's sm_90a kernels (a 9.0 device, a build with 90a code) */
    /* gg_k_gemm_f32w_capacity's answer, when has_wgmma (GG_F32W_MAX_SPLIT = 8): blocks 2/3's, kept here because the
     * same probe decides has_wgmma for every sm_90a kernel (docs/design.md, "What the context keeps for one block") */
    int f32w_clusters[8 + 1];
    /* > 0: cuBLASLt algorithms whose thread-block clusters have at most this many CTAs (GG_GEMM_MAX_CLUSTER_CTAS,
     * for compute-sanitizer's racecheck, which fails with a hardware exception on cuBLASLt's 2-CTA clusters) */
    int gemm_max_cluster_ctas;
    /* > 0: autotune keeps cuBLASLt's heuristic first choice unless a candidate runs faster alone by more than this
     * many percent (GG_AUTOTUNE_MARGIN): a small win timed alone can turn into a loss at the power limit */
    int tune_margin_percent;
    cublasLtHandle_t lt;
    cudaStream_t side;  /* the context's second stream: the dW chain runs here, forked from the caller's */
    int priority_least, priority_greatest; /* the device's stream priorities (cudaDeviceGetStreamPriorityRange) */
    /* caller's stream -> side: what the caller's stream has made so far is ready (the inputs, G, R). Every
     * hand-off through it records and waits at once (gg_stream_handoff), and a wait keeps the record it was made
     * against, so one event serves all of a schedule's forks. */
    cudaEvent_t ev_fork;
    cudaEvent_t ev_join; /* side -> caller's stream: the side chain is done */
    cudaEvent_t ev_conv; /* side -> caller's stream: operands converted on the side stream are ready */
    cudaStream_t aux;        /* a third stream, for work beside both chains (block 4's bias sum) */
    cudaEvent_t ev_aux;      /* caller's stream -> aux */
    cudaEvent_t ev_aux_join; /* aux -> caller's stream */
    cudaStream_t capture; /* graphs are captured on this stream, never on the caller's */
    void *workspace[GG_GEMM_STREAMS];
    unsigned *counter; /* GG_COUNTER_WORDS device words, 0 between kernels: the "last CTA done" counters of the
                          one-launch reductions, one range per reduction that may run concurrently (GG_COUNTER_*) */
    /* block 1's per-CTA partial sums: gg_k_tanh_gate_slots words, 0xffffffff between kernels; set with the context,
     * so that the marker is in place before a kernel on any stream reads it (docs/design.md) */
    unsigned *tanh_partials;
    void *scratch; /* one arena shared by all plans; grown (never shrunk) to the largest plan's need */
    size_t scratch_bytes;
    /* Bumped whenever something captured graphs bake in changes: the scratch arena moves, or a gg_dist_alloc buffer
     * (a copy-engine window, whose gradients a syncing graph exchanges in place) is freed. Graphs captured before are
     * captured again at their next run. */
    uint64_t capture_generation;
    size_t device_bytes; /* everything above, for gg_ctx_device_bytes */
    gg_plan_cache plans;
    gg_ctx_hook *hooks;   /* what is destroyed with the context: live graphs, the communicator */
    struct gg_dist *dist; /* the data-parallel state (its communicator and stream; src/ddp), or NULL */
    /* Held while `dist` is set or cleared by the owner thread, and while gg_dist_abort (which other threads, and log
     * callbacks, may call at any time) pins it: a failing gg_dist_attach / _init_* or a gg_dist_detach never frees the
     * state under an abort that read it (src/ddp/watchdog.c). */
    pthread_mutex_t dist_publish;
    atomic_int dist_aborters; /* gg_dist_abort calls using `dist` (pinned under dist_publish): it is not freed before */
    /* Set by a step graph's capture while one of its callbacks runs (graphs/step_capture.c), NULL otherwise: an eager
     * call inside the callback first has its stream wait for the step's earlier calls' weight-gradient work still in
     * flight, which may be using the context's scratch arena (slot 0) and second workspace (side stream 0). */
    gg_status (*callback_join)(void *user, cudaStream_t stream);
    void *callback_join_user;
    gg_status callback_failure;  /* the first failure (gg_fail) inside a callback of this context's step (on any
                                    context: gg_step_callback_swap), which fails the step's capture */
    char callback_message[GG_MSG_BYTES]; /* ... and its message */
    struct gg_tune_cache *tune; /* autotuned GEMM algorithms (src/gemm/tune_cache.h), NULL without autotune */
    char tune_device[128];      /* the GPU, cuBLASLt and driver part of tune keys ("" until first needed) */
    gg_guard guard;             /* the thread inside a call, device pointers already checked (src/core/guard.c) */
    /* > 0 while a call tries something it has a fallback for: gg_fail still writes the message, but logs it at DEBUG
     * and fails no step capture (the caller decides whether it was a failure: gg_tentative_end) */
    int tentative;
    /* Set while a caller holds the communicator's lock around an eager call (graphs/graph.c, a syncing graph's call
     * past its largest bucket): a failed enqueue (GG_ERROR_PARTIAL) then leaves its wait for the forked work
     * (gg_block_wait_forked) to that caller, after the lock. That work may wait behind a collective stuck on a dead
     * peer, which only an abort ends, and an abort takes that lock. */
    int defer_fork_wait;
    char last_error[GG_MSG_BYTES];
};

/* Clean-up after a failure may fail too, and its message would replace the first one, which the status names:
 * gg_failure_save keeps ctx's message when status is a failure (else an empty one), gg_failure_restore puts it back
 * after the clean-up. */
void gg_failure_save(const gg_ctx *ctx, gg_status status, char saved[GG_MSG_BYTES]);
void gg_failure_restore(gg_ctx *ctx, const char saved[GG_MSG_BYTES]);

/* An attempt with a fallback: gg_tentative_begin keeps ctx's message in saved; gg_tentative_end(status), the attempt's
 * outcome, returns whether its failure is absorbed (`fallback`: the failure status the caller falls back from), and
 * then puts the message back (after logging the attempt's failure at INFO as `what`); any other failure is logged at
 * ERROR, as gg_fail would have, and its message kept. what NULL: the caller says it (no INFO line). */
void gg_tentative_begin(gg_ctx *ctx, char saved[GG_MSG_BYTES]);
int gg_tentative_end(gg_ctx *ctx, const char saved[GG_MSG_BYTES], gg_status status, gg_status fallback,
                     const char *what);

/* The context whose step callback the calling thread runs from now (NULL: none); returns the one before (callbacks
 * nest). While it is set, a failure on any context fails that step's capture (gg_fail), and an eager call on any
 * context refuses a stream outside the capture (gg_device_enter_stream). */
gg_ctx *gg_step_callback_swap(gg_ctx *ctx);
/* Whether the calling thread runs inside a step graph's callback (any context's step). */
int gg_in_step_callback(void);
/* GG_ERROR_INVALID_ARGUMENT, naming fn, inside a step graph's callback: what may not happen there (a graph's run or
 * capture would capture into, or launch onto, the step's capture; a step's rebinding or setting would change the
 * capture under way; making, finalizing, waiting for or destroying anything allocates or synchronizes, which breaks
 * the capture, and the step may hold what is destroyed); GG_SUCCESS otherwise. Every public call that is not an
 * eager enqueue or a query calls it first. */
gg_status gg_refuse_in_step_callback(gg_ctx *ctx, const char *fn);

/* Records a failure: formats the message into ctx->last_error (or the thread's own buffer when ctx is NULL),
 * sends it to the log callback, and returns status so callers can write `return gg_fail(...)`. */
gg_status gg_fail(gg_ctx *ctx, gg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A failed call (CUDA's, cuBLASLt's, NCCL's): "<entry>: <what> failed: <name> (<text>)", entry the public call the
 * thread is in (gg_ctx_entry; left out outside a call, or when what names it already), no parentheses for an empty
 * text. gg_fail_cuda and gg_fail_cublas fill in the error's name and description, and gg_fail_cuda clears CUDA's
 * last error so the next call starts clean. */
gg_status gg_fail_call(gg_ctx *ctx, gg_status status, const char *what, const char *name, const char *text);
gg_status gg_fail_cuda(gg_ctx *ctx, cudaError_t err, const char *what);
gg_status gg_fail_cublas(gg_ctx *ctx, cublasStatus_t st, const char *what);
/* The same for the check macros below, given a call's source text: the message names the function called, not its
 * arguments (gradgraph's own expressions mean nothing to the caller). */
gg_status gg_fail_cuda_call(gg_ctx *ctx, cudaError_t err, const char *call_text);
gg_status gg_fail_cublas_call(gg_ctx *ctx, cublasStatus_t st, const char *call_text);

/* Whether a failure is a refusal of the call's arguments (or of what it cannot do): such a call enqueued nothing and
 * took part in no collective. */
static inline int gg_status_is_refusal(gg_status status) {
    return status == GG_ERROR_INVALID_ARGUMENT || status == GG_ERROR_MISALIGNED || status == GG_ERROR_UNSUPPORTED ||
           status == GG_ERROR_VERSION;
}

/* The common check of a versioned config struct (gg_config, gg_graph_config, gg_dist_config): struct_size and version
 * must be this library's, else GG_ERROR_VERSION with a message naming the field and the initializer to use. */
gg_status gg_check_config_version(gg_ctx *ctx, const char *fn, size_t struct_size, size_t expected_size,
                                  uint32_t version, uint32_t expected_version, const char *initializer);

/* Log at a level (no-op without a callback or below the configured level). */
void gg_log(const gg_ctx *ctx, gg_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Check macros: evaluate a call, and on failure record it and return (TRY) or jump to a cleanup label (GOTO)
 * with `status` set. They never abort. */
#define GG_CUDA_TRY(ctx, call)                                                                                     \
    do {                                                                                                           \
        cudaError_t gg_e_ = (call);                                                                                \
        if (gg_e_ != cudaSuccess) return gg_fail_cuda_call((ctx), gg_e_, #call);                                    \
    } while (0)

#define GG_CUDA_GOTO(ctx, call, status, label)                                                                     \
    do {                                                                                                           \
        cudaError_t gg_e_ = (call);                                                                                \
        if (gg_e_ != cudaSuccess) {                                                                                \
            (status) = gg_fail_cuda_call((ctx), gg_e_, #call);                                                     \
            goto label;                                                                                            \
        }                                                                                                          \
    } while (0)

#define GG_CUBLAS_GOTO(ctx, call, status, label)                                                                   \
    do {                                                                                                           \
        cublasStatus_t gg_s_ = (call);                                                                             \
        if (gg_s_ != CUBLAS_STATUS_SUCCESS) {                                                                      \
            (status) = gg_fail_cublas_call((ctx), gg_s_, #call);                                                   \
            goto label;                                                                                            \
        }                                                                                                          \
    } while (0)

#define GG_TRY(call)                                                                                               \
    do {                                                                                                           \
        gg_status gg_t_ = (call);                                                                                  \
        if (gg_t_ != GG_SUCCESS) return gg_t_;                                                                     \
    } while (0)

#define GG_GOTO(call, status, label)                                                                               \
    do {                                                                                                           \
        (status) = (call);                                                                                         \
        if ((status) != GG_SUCCESS) goto label;                                                                    \
    } while (0)

/* Makes sure the context's scratch arena holds at least `bytes` (256-byte aligned sub-buffers are carved by the
 * caller). Growing frees the old arena, which synchronizes the device: only ever called while building a plan. */
gg_status gg_ctx_reserve_scratch(gg_ctx *ctx, size_t bytes);

/* Makes ctx's device current for the duration of a call, claiming ctx for the calling thread (gg_ctx_claim, for fn);
 * gg_device_leave restores the caller's device and releases the claim. */
gg_status gg_device_enter(gg_ctx *ctx, const char *fn, int *saved_device);
void gg_device_leave(gg_ctx *ctx, int saved_device);
/* gg_device_enter for a call that enqueues on the caller's `stream`: a stream of another device than the context's is
 * refused, and inside a step graph's callback a stream the step's capture does not hold (the work would run once,
 * now, instead of in the step). *capturing (NULL: not wanted): the stream's capture status, asked once here. */
gg_status gg_device_enter_stream(gg_ctx *ctx, const char *fn, cudaStream_t stream, int *saved_device,
                                 enum cudaStreamCaptureStatus *capturing);

/* Claims ctx for the calling thread for the length of a public call (nested claims by the same thread count):
 * GG_ERROR_INVALID_ARGUMENT while another thread holds it, with the message in that thread's own buffer
 * (gg_last_error(NULL)), since the context's belongs to the other thread. gg_ctx_release ends one claim. */
gg_status gg_ctx_claim(gg_ctx *ctx, const char *fn);
void gg_ctx_release(gg_ctx *ctx);
/* A CUDA error pending on the calling thread (cudaPeekAtLastError) when a call begins is the application's: the
 * outermost gg_ctx_claim refuses the call then (GG_ERROR_CUDA, via gg_refuse_pending_cuda_error, leaving the error
 * pending), and its release clears what gradgraph's own CUDA calls left pending. The destroy calls claim with
 * gg_ctx_claim_teardown instead: never refused for it, and what was pending stays (gg_clear_own_cuda_error, their
 * way to clear their own failures, leaves it). */
gg_status gg_ctx_claim_teardown(gg_ctx *ctx, const char *fn); /* also refused inside a step's callback */
/* The error the CUDA runtime holds for this thread (what cudaGetLastError would return), cudaSuccess when none;
 * cudaErrorNotReady is a query's answer, not a failure: never taken for one. */
cudaError_t gg_pending_cuda_error(void);
gg_status gg_refuse_pending_cuda_error(gg_ctx *ctx, const char *fn);
void gg_clear_own_cuda_error(const gg_ctx *ctx);
/* Whether another thread than the caller is inside a public call of ctx (gg_fail then leaves ctx's message alone). */
int gg_ctx_claimed_elsewhere(const gg_ctx *ctx);
/* The public call the calling thread is in on ctx ("gg_mlp_backward"), NULL when it holds no claim: the name
 * gg_fail_cuda and gg_fail_cublas put in front of a failed call's ("gg_mlp_backward: cudaMalloc failed: ..."). */
const char *gg_ctx_entry(const gg_ctx *ctx);
/* Whether this thread is running a context's log callback (gg_ctx_claim refuses every call from there). */
int gg_in_log_callback(void);
/* msg past its leading "fn: ", or msg when it does not begin so (or fn is NULL): for a message quoted inside another
 * of fn's. */
const char *gg_after_entry(const char *msg, const char *fn);

/* GG_ERROR_INVALID_ARGUMENT, naming `name` ("param->grad"), unless the `bytes` bytes at p (at least 1) are device or
 * managed memory as far as their first and last byte show: one driver query for each address the context has not
 * seen, then a lookup in its set (src/core/guard.c), so a program that passes the same buffers every step makes no
 * driver call. Host memory is refused, and so is a buffer smaller than the call says where it runs past every
 * allocation (one query cannot see into a neighbouring one): no kernel or collective over memory that is not there,
 * and for gg_dist_reduce no billions of NCCL calls for a garbage count. The blocks' tensors are checked the same way
 * (gg_check_device_pointers). */
gg_status gg_check_device_buffer(gg_ctx *ctx, const char *fn, const char *name, const void *p, size_t bytes);

/* What memory p points into (one driver query; cudaMemoryTypeUnregistered where the query fails, as it did for host
 * memory before CUDA 11): for calls that take host buffers and refuse device memory. */
enum cudaMemoryType gg_memory_type(const void *p);

#endif
