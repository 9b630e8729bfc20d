/*
 * gradgraph.h - the public C API of gradgraph.
 *
 * gradgraph runs the backward pass of neural-network blocks on NVIDIA GPUs. Each block's backward is a short
 * chain of cuBLASLt GEMMs and fused elementwise / activation-gradient / reduction kernels. This header is the
 * whole public surface: it is C99, includes no CUDA header, and can be used from C or C++.
 *
 * Life cycle
 *   1. Fill a gg_config (start from GG_CONFIG_INIT) and make a context with gg_ctx_create(). A context belongs to
 *      one device and owns cuBLASLt handles, GEMM workspaces, scratch memory and a cache of per-shape plans.
 *   2. Per block, fill a descriptor (shapes, precision) and an args struct (device pointers) and call the block's
 *      entry point, e.g. gg_mlp_backward(). It validates everything, then enqueues all work on the caller's stream
 *      (internally it may fork onto the context's own stream and always joins back before returning) and returns
 *      without waiting for the GPU.
 *   3. gg_ctx_destroy() releases everything.
 *
 * Plans. The first call with a new shape (block, tokens, dims, precision) builds a plan: cuBLASLt descriptors,
 * the algorithm of each GEMM (with autotune, the fastest of cuBLASLt's best candidates, timed once and remembered
 * in a cache file), and scratch memory. That first call allocates device memory and synchronizes the device; every
 * later call with the same shape reuses the plan, allocates nothing and queries no heuristic. Call each shape once
 * before timing it or capturing it into a CUDA graph (gg_*_graph_create builds its plans before capturing): a call
 * on a stream you are capturing, with a shape no call has planned yet, is refused (GG_ERROR_INVALID_ARGUMENT,
 * nothing allocated or enqueued) instead of invalidating your capture.
 *
 * Errors. Every function that can fail returns a gg_status; gg_last_error(ctx) returns a message that names the
 * call, the argument and the problem, e.g. "gg_mlp_backward: args->grad_output (0x7f..04) is not 16-byte aligned",
 * or the call, the CUDA, cuBLASLt or NCCL function that failed and its error, e.g. "gg_mlp_graph_run:
 * cudaGraphInstantiate failed: cudaErrorInvalidValue (invalid argument)". A call checks its
 * arguments, finds or builds its plan (cuBLASLt heuristics, scratch memory) and only then enqueues: on every
 * failure of those steps nothing has been enqueued and no output has been written. What can fail after that is
 * the CUDA runtime or cuBLASLt refusing to enqueue one piece of work (a launch, a GEMM, an event): an eager call
 * then returns GG_ERROR_PARTIAL: work enqueued before the failure may run, so every output of the call is
 * undefined, and gradients accumulated into (accumulate = 1) must be recomputed from the last point they were known
 * (zeroed, or a copy); the call has waited for the context's own streams, and the context is usable. A graph run
 * captures and instantiates before it launches, so its failures (capture, instantiate, update, launch) enqueue
 * nothing and write nothing: it never returns GG_ERROR_PARTIAL (except past its largest bucket with
 * eager_beyond_max, which is an eager call). The library never prints (unless given a log callback or GG_LOG_LEVEL,
 * see gg_log_level), never calls exit() or abort(), and frees everything it allocated on every error path.
 * A CUDA error your own code left pending on the calling thread (one cudaGetLastError would return: a launch or
 * a runtime call of yours that failed and was not checked) is yours, not gradgraph's: every call that works on a
 * context, and gg_ctx_create, refuses to run over it (GG_ERROR_CUDA, "a CUDA error is pending on this thread from
 * earlier work that was not this call's: cudaErrorInvalidConfiguration ...", nothing done) and leaves it pending for
 * you to read; cudaErrorNotReady, a query's answer, is not an error. The calls that free (the destroy functions,
 * gg_dist_detach, gg_dist_free) run regardless and leave yours pending (unless one of their own CUDA calls fails,
 * whose error then takes its place: the runtime keeps one); gg_dist_abort, gg_last_error and the getters never look.
 * Otherwise a call never leaves an error of its own pending: its status reports it. In a step's callback, an error your work leaves pending fails the step's capture (its
 * status and message name it; it is then cleared, having been reported).
 *
 * Threads. A context serves one host thread at a time (one context per thread is fine). Every call that uses a
 * context claims it for its length; a call from a second thread meanwhile is refused with
 * GG_ERROR_INVALID_ARGUMENT and does nothing: its message is in gg_last_error(NULL) of the refused thread (the
 * context's message belongs to the thread inside it). The destroy functions (gg_ctx_destroy, gg_graph_destroy,
 * gg_step_destroy, gg_optim_destroy) are refused the same way: they destroy nothing (a leak rather than memory freed
 * under the other thread) and say so in gg_last_error(NULL). Concurrent use is detected, never waited for: serialize
 * calls yourself if several threads share a context.
 * Streams. The work a context enqueues (eager calls and graph replays) must not run concurrently with other work of
 * the same context on the GPU: it shares the context's scratch memory and reduction counters. Calls on one stream,
 * or streams ordered with events, are fine; work that must overlap needs one context each. A stream of another device
 * than the context's is refused (GG_ERROR_INVALID_ARGUMENT, nothing enqueued; built with CUDA 12.8 or later, which
 * can say a stream's device; a stream being captured is not asked, since asking invalidates its capture).
 *
 * Memory layout. Every tensor is row-major and contiguous. "tokens" is M = batch_size * seq_len; a tensor
 * described as [M, H] is the activation of all tokens viewed as a matrix. Tensors named bf16 hold IEEE bfloat16
 * bit patterns (uint16_t); tensors named fp32 hold float. Outputs must not alias inputs or each other.
 * Every pointer must be a device pointer aligned to GG_ALIGNMENT bytes. Device memory of the context's device
 * (cudaMalloc, stream-ordered pools) and managed memory are accepted; another device's memory is refused (its kernels
 * would fault), and so is host memory, pageable or pinned, with GG_ERROR_INVALID_ARGUMENT
 * ("args->weight (0x...) is host memory; gradgraph needs device memory"), and so is a tensor whose last byte is not
 * device memory (a buffer smaller than the call says). A context asks the driver about the first and last byte of
 * each tensor once (cudaPointerGetAttributes) and remembers up to 1536 such addresses found to be device memory
 * (forgetting them all at once when full), so repeated calls and replays cost a lookup. What it remembers is not
 * asked again: memory freed and then allocated again at the same address as host memory, or as a smaller buffer,
 * passes those checks until the context forgets it.
 */
#ifndef GRADGRAPH_H
#define GRADGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "gradgraph_version.h" /* GG_VERSION_MAJOR, _MINOR, _PATCH, GG_VERSION_STRING, GG_VERSION */

/* Marks the library's exported functions: the shared library is built with every other symbol hidden, so its
 * dynamic symbols are exactly the functions below. The same in a static build (the attribute is harmless there).
 * Define GG_API before including this header to override it, e.g. as empty to keep a static gradgraph's functions
 * out of your own shared library's exports. */
#ifndef GG_API
#if defined(__GNUC__) || defined(__clang__)
#define GG_API __attribute__((visibility("default")))
#else
#define GG_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Required alignment, in bytes, of every tensor pointer passed to gradgraph (16-byte vector loads and stores). */
#define GG_ALIGNMENT 16

/* Every hidden dimension must be a multiple of this, so that every row of every tensor stays GG_ALIGNMENT-aligned. */
#define GG_DIM_MULTIPLE 8

/* A CUDA stream. Binary-compatible with cudaStream_t and CUstream; NULL means the legacy default stream. */
struct CUstream_st;
typedef struct CUstream_st *gg_stream;

/* ---------------------------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------------------------- */
typedef enum gg_status {
    GG_SUCCESS = 0,
    GG_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, a bad size, aliasing outputs ... (message names which) */
    GG_ERROR_MISALIGNED = 2,       /* a pointer is not GG_ALIGNMENT-byte aligned */
    GG_ERROR_UNSUPPORTED = 3,      /* valid in general but not for this block (e.g. a precision mode) */
    GG_ERROR_VERSION = 4,          /* gg_config has a struct_size or version this library does not know */
    GG_ERROR_OUT_OF_MEMORY = 5,    /* a host or device allocation failed */
    GG_ERROR_NO_DEVICE = 6,        /* no CUDA device, or the configured device does not exist */
    GG_ERROR_CUDA = 7,             /* the CUDA runtime reported an error (message has its name) */
    GG_ERROR_CUBLAS = 8,           /* cuBLASLt reported an error or found no algorithm */
    GG_ERROR_INTERNAL = 9,         /* a bug in gradgraph; please report it with the message */
    GG_ERROR_NCCL = 10,            /* NCCL reported an error; where the message says the communicator is aborted,
                                      make a new one (an attached one was freed by the abort: do not destroy it) */
    GG_ERROR_PEER = 11,            /* another rank failed the same collective call (its own status says why);
                                      nothing was made on any rank, the communicator is intact */
    GG_ERROR_PARTIAL = 12          /* an eager call failed after it began to enqueue (a kernel launch, a GEMM or an
                                      event the CUDA runtime or cuBLASLt refused; the message names it): part of
                                      its work may run. Every output of the call is undefined, and with accumulate
                                      the parameter gradients hold an unknown part of this call's sum: recompute
                                      them (see "Errors"). The context stays usable. (gg_optim_load_state: a copy
                                      failed after the first began; the optimizer's state is undefined) */
} gg_status;

/* A static, human-readable name for a status ("GG_ERROR_MISALIGNED: pointer not aligned"). Never NULL; unknown
 * values give "unknown gg_status". */
GG_API const char *gg_status_string(gg_status status);

/* The library's version as "MAJOR.MINOR.PATCH". */
GG_API const char *gg_version_string(void);

/* ---------------------------------------------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------------------------------------------- */

/* How the GEMMs of the fp32-I/O blocks (gelu_ffn, mlp) compute. The bf16-I/O blocks always use bf16 operands
 * with fp32 accumulation (GG_PRECISION_BF16). Every offered mode passes the benchmark's tolerance on every case. */
typedef enum gg_precision {
    GG_PRECISION_DEFAULT = 0, /* in a descriptor: the context's precision (fp32 blocks) or BF16 (bf16 blocks) */
    GG_PRECISION_FP32 = 1,    /* true fp32 GEMMs: exact, slowest */
    GG_PRECISION_TF32 = 2,    /* fp32 data, TF32 tensor-core math, fp32 accumulation */
    GG_PRECISION_FP16 = 3,    /* operands converted to fp16, fp32 accumulation, fp32 outputs: fastest (at few
                               * tokens some weights are not converted: on an H100/H200, up to 1024 tokens,
                               * gradgraph's own GEMMs round them to fp16 as they load them; elsewhere, up to 512,
                               * the first GEMM runs in TF32) */
    GG_PRECISION_BF16 = 4     /* bf16 operands, fp32 accumulation: only for the bf16-I/O blocks */
} gg_precision;

/* The name of a precision mode ("fp32", "tf32", "fp16", "bf16", "default"); "unknown" otherwise. */
GG_API const char *gg_precision_string(gg_precision precision);

/* Log levels. The environment variable GG_LOG_LEVEL (ERROR, WARN, INFO, DEBUG, or TRACE meaning DEBUG as in
 * NCCL_DEBUG; any case), read by gg_ctx_create, replaces config->log_level for the context it makes, and with
 * config->log_fn NULL sends the context's messages to stderr, one line each ("gradgraph[<pid>] INFO: ..."). Any
 * other non-empty value fails gg_ctx_create with GG_ERROR_INVALID_ARGUMENT. */
typedef enum gg_log_level { GG_LOG_ERROR = 0, GG_LOG_WARN = 1, GG_LOG_INFO = 2, GG_LOG_DEBUG = 3 } gg_log_level;

/* Receives every message at or above the configured level. Called on the thread that called gradgraph (and, for a
 * data-parallel context, from its watchdog's thread: see gg_dist_attach). gradgraph calls that take a context made
 * from inside it are refused (GG_ERROR_INVALID_ARGUMENT, the message in that thread's gg_last_error(NULL)): the call
 * that logged is still running, and a destroy there would free what it uses. gg_last_error and gg_dist_abort work.
 * It must return: leaving it by longjmp (or a C++ exception) abandons the call that logged half way (locks held,
 * streams forked) and leaves the thread marked as inside the callback, so that its later calls are refused. */
typedef void (*gg_log_fn)(void *user_data, gg_log_level level, const char *message);

/* Whether a block's independent chains (dX and dW) run concurrently on two streams. AUTO (the default) overlaps:
 * measured on the H200, overlap wins or ties in every block and precision mode (docs/decisions.md); NEVER runs
 * everything on the caller's stream, for profiling or for sharing the GPU with other work. */
typedef enum gg_overlap { GG_OVERLAP_AUTO = 0, GG_OVERLAP_ALWAYS = 1, GG_OVERLAP_NEVER = 2 } gg_overlap;

#define GG_CONFIG_VERSION 1

/* Context configuration. Always start from GG_CONFIG_INIT so that fields added by later versions get their
 * defaults; struct_size and version let the library reject a struct from an incompatible header. */
typedef struct gg_config {
    size_t struct_size;          /* sizeof(gg_config) as the caller compiled it */
    uint32_t version;            /* GG_CONFIG_VERSION */
    int device;                  /* CUDA device ordinal; default 0 */
    size_t gemm_workspace_bytes; /* cuBLASLt workspace per concurrently running GEMM; default 32 MiB, 0 allowed */
    gg_precision precision;      /* GEMM mode of the fp32-I/O blocks; default GG_PRECISION_FP32 */
    gg_log_fn log_fn;            /* NULL: the library never prints (unless GG_LOG_LEVEL is set: stderr) */
    void *log_user_data;         /* passed to log_fn */
    gg_log_level log_level;      /* default GG_LOG_WARN */
    gg_overlap overlap;          /* default GG_OVERLAP_AUTO */
    int autotune;                /* nonzero (default): the first plan of each GEMM shape times cuBLASLt's best few
                                    candidates once and keeps the fastest (docs/performance.md; GG_AUTOTUNE_MARGIN=M
                                    in the environment keeps the heuristic's first unless one is over M % faster),
                                    and block 3's fp16 plans time where R is written (docs/blocks.md); 0: the
                                    heuristic's first choice, no timing at plan time */
    const char *tune_cache_path; /* where autotune choices persist between runs, keyed by GPU, cuBLASLt and driver
                                    versions. NULL (default): $GG_TUNE_CACHE if set, else
                                    $XDG_CACHE_HOME/gradgraph/gemm-algos.txt or ~/.cache/gradgraph/gemm-algos.txt;
                                    "": none (choices live as long as the context). Copied at gg_ctx_create, made
                                    absolute and its symbolic links resolved there. A save merges under a lock
                                    ("<file>.lock"): the last writer of a key wins, other lines are kept, the file
                                    keeps its mode (src/gemm/tune_cache.h). */
} gg_config;

#define GG_CONFIG_INIT                                                                                             \
    { sizeof(gg_config), GG_CONFIG_VERSION, 0, (size_t)32 << 20, GG_PRECISION_FP32, NULL, NULL, GG_LOG_WARN,        \
      GG_OVERLAP_AUTO, 1, NULL }

/* ---------------------------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------------------------- */
typedef struct gg_ctx gg_ctx;

/* Creates a context on config->device.
 *   config  NULL for all defaults, else a struct initialized with GG_CONFIG_INIT.
 *   out     receives the context; set to NULL on failure.
 * Returns GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (out is NULL, a field out of range), GG_ERROR_VERSION (wrong
 * struct_size/version), GG_ERROR_NO_DEVICE, GG_ERROR_OUT_OF_MEMORY, GG_ERROR_CUDA or GG_ERROR_CUBLAS. The message of
 * a failed create is read with gg_last_error(NULL).
 * Environment, read here: GG_HOPPER_KERNELS=0 turns off gradgraph's sm_90a-only kernels (wgmma and TMA GEMMs) on
 * an H100/H200, so that the context takes the path of every other GPU, a B200's included (cuBLASLt and the portable
 * kernels): for testing that path, or as a workaround. */
GG_API gg_status gg_ctx_create(const gg_config *config, gg_ctx **out);

/* Destroys a context: waits for the work it enqueued on its own streams, frees all device memory and handles.
 * NULL is a no-op. Work the caller enqueued on other streams that still uses the context must be complete. */
GG_API void gg_ctx_destroy(gg_ctx *ctx);

/* The message of the most recent failure of a call on ctx ("" if none). With ctx NULL: the message of the most
 * recent failure on this thread of a call that had no context (gg_ctx_create, a NULL ctx or graph) or that was
 * refused because another thread was using the context. Valid until the next call. */
GG_API const char *gg_last_error(const gg_ctx *ctx);

/* Device memory held by the context (workspaces, scratch, plans), in bytes. */
GG_API size_t gg_ctx_device_bytes(const gg_ctx *ctx);

/* fp16 overflow. In GG_PRECISION_FP16 mode the fp32 operands of the GEMMs are converted to fp16, whose range is
 * much narrower than fp32's: the largest finite value is 65504, the smallest normal 6.1e-5 (2^-14), the smallest
 * subnormal 6e-8 (2^-24); below that a value becomes 0. Values past ±65504 become Inf (and then NaN in what they
 * touch). gradgraph sets a word of the context in device memory whenever an fp16 operand it makes holds a value
 * past ±65504, an Inf or a NaN: the conversions of grad_output, hidden_states, the weights and the activations, and
 * R = G * gelu'(x) written in fp16 (so an fp16 G that overflowed in its GEMM is caught there, as are Inf or NaN
 * already in the inputs), and the fp16 operands of the forwards (hidden_states, the weights, the activation). Loss
 * of small values to subnormals or 0 is not flagged. The word stays set until cleared: like AMP's found_inf, check
 * it after a step and skip the update (and lower the loss scale) when it is set. The weights that fp16 mode's
 * few-token route rounds inside gradgraph's own GEMM (H100/H200, up to 1024 tokens) are not checked; the other
 * precision modes never set it. */

/* The device address of ctx's overflow word (an unsigned, nonzero once set), for kernels of your own, e.g. an
 * optimizer inside a CUDA graph that skips its update when it is set (and clears it). Valid until gg_ctx_destroy. */
GG_API gg_status gg_fp16_overflow_flag(gg_ctx *ctx, unsigned **device_flag);

/* Waits for the device (cudaDeviceSynchronize: every stream's work enqueued before), then *found = whether the
 * overflow word is set; clear nonzero also clears it. On failure *found is 0 (a found pointer given) and the word is
 * left as it was: treat the step as unchecked, not as clean. */
GG_API gg_status gg_fp16_overflow(gg_ctx *ctx, int *found, int clear);

/* Writes count fp32 elements at src to dst in fp16, rounded to nearest even, exactly as fp16 mode rounds the GEMMs'
 * operands, and sets the overflow word above for a value past ±65504, an Inf or a NaN: the copies blocks 2 and 3 take
 * as their *_fp16 operands, made from tensors of your own (activations your kernels produce). Enqueued on stream,
 * no host sync: it may be captured. src and dst device (or managed) memory, their last elements too (a count larger
 * than a buffer is refused where it runs past every allocation), GG_ALIGNMENT-aligned, not overlapping; count 0
 * enqueues nothing. */
GG_API gg_status gg_to_fp16(gg_ctx *ctx, const float *src, void *dst, size_t count, gg_stream stream);

/* The gradients' Inf/NaN check, for a training loop without gradgraph's optimizer (gg_optim checks its gradients
 * itself: check_finite): sets the unsigned at device_flag to 1 when any of count elements at data (fp32; bf16 when
 * bf16 is nonzero) is Inf or NaN, and leaves it as it is otherwise (clear it yourself, like the overflow word, whose
 * address gg_fp16_overflow_flag gives: passing it makes one found-inf word for both, as AMP's). Enqueued on stream,
 * no host sync: it may be captured; after a backward, on the stream the backward ran on (a step graph or a block
 * call has joined its gradients by then). data (its last element too) and device_flag device (or managed) memory,
 * data GG_ALIGNMENT-aligned and device_flag 4-byte aligned, not overlapping; count 0 enqueues nothing. */
GG_API gg_status gg_check_finite(gg_ctx *ctx, const void *data, size_t count, int bf16, unsigned *device_flag,
                                 gg_stream stream);

/* ---------------------------------------------------------------------------------------------------------------
 * Blocks. Shapes: M = tokens (batch_size * seq_len). Limits, each checked with a message naming the field:
 *   - M >= 1. M = 0 (an empty batch) is rejected with GG_ERROR_INVALID_ARGUMENT: its weight gradients are zero,
 *     and clearing them is the caller's choice (overwrite or keep accumulated values), not the library's.
 *   - every hidden dimension >= GG_DIM_MULTIPLE and a multiple of it (keeps every row 16-byte aligned);
 *   - every dimension, M included, <= INT32_MAX (cuBLASLt's leading dimensions and the kernels' grids);
 *   - every tensor's size in bytes fits in int64_t.
 *   Negative values are rejected, never wrapped.
 * ------------------------------------------------------------------------------------------------------------- */

/* 1. Tanh-gated residual add, backward. Forward: out = residual + tanh(gate) * hidden_states * mask.
 *    bf16 tensors; t = tanh(gate) in fp32.
 *      grad_residual      [M,H] = grad_output (a copy)
 *      grad_hidden_states [M,H] = bf16(bf16(grad_output * t) * mask)
 *      grad_gate          []    = bf16((1 - t^2) * sum(grad_output * bf16(hidden_states * mask)))
 *    The sum is accumulated in fp32 in a fixed order: the same bits on every run. */
typedef struct gg_tanh_gate_desc {
    int64_t tokens; /* M */
    int64_t hidden; /* H */
    int accumulate; /* 0: overwrite grad_gate; nonzero: grad_gate += this call's (accumulation over micro-batches) */
} gg_tanh_gate_desc;

typedef struct gg_tanh_gate_args {
    const void *grad_output;   /* bf16 [M,H] */
    const void *gate;          /* bf16 scalar (one element) */
    const void *hidden_states; /* bf16 [M,H] */
    const void *mask;          /* bf16 [M] (one value per token, any real value) */
    void *grad_residual;       /* bf16 [M,H] */
    void *grad_hidden_states;  /* bf16 [M,H] */
    void *grad_gate;           /* bf16 scalar */
} gg_tanh_gate_args;

/* Enqueues block 1's backward on stream. Returns GG_SUCCESS or an error as described under "Errors". */
GG_API gg_status gg_tanh_gate_backward(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args,
                                       gg_stream stream);

/* Block 1's forward: output = residual + tanh(gate) * hidden_states * mask, rounded as a bf16 framework evaluates
 * it from left to right, with t = tanh(gate) in fp32 as in the backward:
 *      output [M,H] = bf16(residual + bf16(bf16(t * hidden_states) * mask))
 * The backward reads only this forward's inputs (gate, hidden_states, mask), so output is all it writes. desc is
 * the backward's (accumulate is ignored). Forward calls follow the rules under "Forward passes" below. */
typedef struct gg_tanh_gate_fwd_args {
    const void *residual;      /* bf16 [M,H] */
    const void *gate;          /* bf16 scalar (one element) */
    const void *hidden_states; /* bf16 [M,H] */
    const void *mask;          /* bf16 [M] (one value per token) */
    void *output;              /* bf16 [M,H] */
} gg_tanh_gate_fwd_args;

GG_API gg_status gg_tanh_gate_forward(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_tanh_gate_fwd_args *args,
                                      gg_stream stream);

/* 2. GELU(tanh) feed-forward without biases, backward. fp32 tensors, D = hidden, F = ffn.
 *      G = grad_output @ W2                 [M,F]      grad_weight2 = grad_outputᵀ @ gelu_out    [D,F]
 *      R = G * gelu'(linear1_out), gelu' of the tanh approximation (tanh recomputed from linear1_out)
 *      grad_hidden_states = R @ W1          [M,D]      grad_weight1 = Rᵀ @ hidden_states         [F,D]
 *    Residual connections (blocks 2 and 3): with args->grad_residual non-NULL, grad_hidden_states = R @ W1 +
 *    grad_residual, the sum rounded once in the GEMM's epilogue: the gradient of x + block(x) with respect to x when
 *    grad_residual is the block's grad_output (it may be the same pointer), without a separate add kernel. It must
 *    not overlap grad_hidden_states (use another buffer: ping-pong the residual stream's gradient). Rows past M of a
 *    padded graph run are staged as for every [M, ...] input.
 *    fp16 copies of the operands (blocks 2 and 3, fp16 mode). fp16 mode rounds the GEMMs' fp32 operands to fp16
 *    (nearest even) before it multiplies them; the *_fp16 fields let the caller hand over copies it has already, so
 *    that the backward reads them instead of converting again, as PyTorch's autocast saves fp16 copies for its
 *    backward: the forward writes hidden_states_fp16 and the activation's copy when asked (gg_*_fwd_args), the
 *    optimizer the weights' (gg_optim_param.copy, GG_OPTIM_FP16), gg_to_fp16 any tensor. Each must hold exactly its
 *    fp32 tensor rounded to fp16 (not checked). The results are then those of the call without them: bitwise, but
 *    where giving the copies of X, W1 and the activation lets G take every SM (more than 1024 tokens, a call that does
 *    not sync), which may sum in another order (docs/blocks.md). The fp32 tensors stay required. A given copy is read
 *    where fp16 mode reads that operand in fp16; where a route reads the fp32 weight itself (few tokens:
 *    docs/blocks.md) it is not read. In the other precision modes give NULL (a copy
 *    given there is refused). Rows past M of a padded graph run are staged like the fp32 tensors'.
 *    The pre-activation's copy (linear1_out_fp16, intermediate_fp16) is the one copy that changes the result: gelu'
 *    is then computed from x rounded to fp16, as PyTorch's autocast computes it from the fp16 x its forward saves,
 *    and reads half the bytes (docs/decisions.md); R differs from the call without it by about one fp16 rounding
 *    of x times x * gelu''(x) / gelu'(x) (tested against float64: tests/gpu/test_fp16_gpu.c). Given it, gg_mlp_backward
 *    may write R in G's own GEMM (cuBLASLt's DGELU epilogue: no gelu' pass; grad_bias1 then summed over the fp16 R),
 *    where its plan measured that faster (with autotune; GG_FFN_DGELU=epilogue|pass in the environment, read as a
 *    plan is built, forces either): G is then rounded once with gelu'(x), not before it. Eager calls and graphs
 *    choose alike (docs/blocks.md). */
typedef struct gg_gelu_ffn_desc {
    int64_t tokens;         /* M */
    int64_t hidden;         /* D */
    int64_t ffn;            /* F */
    gg_precision precision; /* DEFAULT (the context's), FP32, TF32 or FP16 */
    int accumulate;         /* 0: overwrite grad_weight1/2; nonzero: add to them (accumulation over micro-batches) */
} gg_gelu_ffn_desc;

typedef struct gg_gelu_ffn_args {
    const float *grad_output;   /* [M,D] */
    const float *hidden_states; /* [M,D] */
    const float *weight1;       /* [F,D] */
    const float *weight2;       /* [D,F] */
    const float *linear1_out;   /* [M,F] pre-activation x */
    const float *tanh_inner;    /* [M,F] tanh(c * (x + 0.044715 x^3)) saved by the forward: validated, not read
                                   (recomputing it from linear1_out is faster than reading it) */
    const float *gelu_out;      /* [M,F] */
    float *grad_hidden_states;  /* [M,D] */
    float *grad_weight1;        /* [F,D] */
    float *grad_weight2;        /* [D,F] */
    const float *grad_residual; /* [M,D] or NULL: added to grad_hidden_states in the dX GEMM's epilogue (see below) */
    /* fp16 mode's operands, each optional (see "fp16 copies of the operands" above) */
    const void *hidden_states_fp16; /* fp16 [M,D] or NULL */
    const void *weight1_fp16;       /* fp16 [F,D] or NULL */
    const void *weight2_fp16;       /* fp16 [D,F] or NULL */
    const void *gelu_out_fp16;      /* fp16 [M,F] or NULL */
    const void *linear1_out_fp16;   /* fp16 [M,F] or NULL: x's copy, which changes the result (see above) */
} gg_gelu_ffn_args;

GG_API gg_status gg_gelu_ffn_backward(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args,
                                      gg_stream stream);

/* Block 2's forward, writing what gg_gelu_ffn_backward reads, named as there. fp32 tensors; desc->precision selects
 * the GEMMs' mode as for the backward (FP32, TF32, or FP16 operands with fp32 accumulation and fp32 outputs);
 * accumulate is ignored.
 *      linear1_out = hidden_states @ W1ᵀ         [M,F]
 *      gelu_out    = 0.5 x (1 + tanh(c (x + 0.044715 x^3))), x = linear1_out, c = sqrt(2/pi)   [M,F]
 *      tanh_inner  = tanh(c (x + 0.044715 x^3))  [M,F]   (only when the pointer is not NULL)
 *      output      = gelu_out @ W2ᵀ              [M,D]
 * gelu_out is computed in fp32 from the GEMM's fp32 result (in cuBLASLt's GELU epilogue, docs/forward.md); in FP16
 * mode output's GEMM reads gelu_out rounded to fp16, like the backward's operands. */
typedef struct gg_gelu_ffn_fwd_args {
    const float *hidden_states; /* [M,D] */
    const float *weight1;       /* [F,D] */
    const float *weight2;       /* [D,F] */
    float *linear1_out;         /* [M,F] pre-activation x */
    float *gelu_out;            /* [M,F] */
    float *tanh_inner;          /* [M,F], or NULL: not written (the backward validates but never reads it) */
    float *output;              /* [M,D] */
    /* fp16 mode only, each optional: the weights' fp16 copies, read instead of converting the weights; and where
     * to write the fp16 copies of hidden_states and gelu_out (the forward makes them anyway) and of linear1_out for
     * the backward */
    const void *weight1_fp16;  /* fp16 [F,D] or NULL */
    const void *weight2_fp16;  /* fp16 [D,F] or NULL */
    void *hidden_states_fp16;  /* fp16 [M,D] or NULL */
    void *gelu_out_fp16;       /* fp16 [M,F] or NULL */
    void *linear1_out_fp16;    /* fp16 [M,F] or NULL: where to write x's copy (a conversion pass of its own) */
} gg_gelu_ffn_fwd_args;

GG_API gg_status gg_gelu_ffn_forward(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_fwd_args *args,
                                     gg_stream stream);

/* 3. GELU(tanh) MLP with biases, backward. fp32 tensors, D = hidden, F = ffn. The biases do not enter any
 *    gradient, so they are not arguments. gelu' is recomputed from the pre-activation (tanh approximation).
 *      G = grad_output @ W2    grad_weight2 = grad_outputᵀ @ intermediate_activated    grad_bias2 = Σ_rows grad_output
 *      R = G * gelu'(intermediate)
 *      grad_hidden_states = R @ W1    grad_weight1 = Rᵀ @ hidden_states    grad_bias1 = Σ_rows R */
typedef struct gg_mlp_desc {
    int64_t tokens;         /* M */
    int64_t hidden;         /* D */
    int64_t ffn;            /* F */
    gg_precision precision; /* DEFAULT (the context's), FP32, TF32 or FP16 */
    int accumulate;         /* 0: overwrite grad_weight1/2 and grad_bias1/2; nonzero: add to them */
} gg_mlp_desc;

typedef struct gg_mlp_args {
    const float *grad_output;            /* [M,D] */
    const float *hidden_states;          /* [M,D] */
    const float *weight1;                /* [F,D] */
    const float *weight2;                /* [D,F] */
    const float *intermediate;           /* [M,F] pre-activation x */
    const float *intermediate_activated; /* [M,F] gelu(x) as saved by the forward (read, never recomputed) */
    float *grad_hidden_states;           /* [M,D] */
    float *grad_weight1;                 /* [F,D] */
    float *grad_bias1;                   /* [F] */
    float *grad_weight2;                 /* [D,F] */
    float *grad_bias2;                   /* [D] */
    const float *grad_residual;          /* [M,D] or NULL: added to grad_hidden_states in the dX GEMM's epilogue */
    /* fp16 mode's operands, each optional (see "fp16 copies of the operands" above) */
    const void *hidden_states_fp16;          /* fp16 [M,D] or NULL */
    const void *weight1_fp16;                /* fp16 [F,D] or NULL */
    const void *weight2_fp16;                /* fp16 [D,F] or NULL */
    const void *intermediate_activated_fp16; /* fp16 [M,F] or NULL */
    const void *intermediate_fp16;           /* fp16 [M,F] or NULL: x's copy, which changes the result (see above) */
} gg_mlp_args;

GG_API gg_status gg_mlp_backward(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_mlp_args *args, gg_stream stream);

/* Block 3's forward, writing what gg_mlp_backward reads, named as there. fp32 tensors; precision as for block 2's
 * forward; accumulate is ignored.
 *      intermediate           = hidden_states @ W1ᵀ + bias1      [M,F]   pre-activation x
 *      intermediate_activated = gelu_tanh(x)                     [M,F]
 *      output                 = intermediate_activated @ W2ᵀ + bias2   [M,D] */
typedef struct gg_mlp_fwd_args {
    const float *hidden_states;    /* [M,D] */
    const float *weight1;          /* [F,D] */
    const float *bias1;            /* [F] */
    const float *weight2;          /* [D,F] */
    const float *bias2;            /* [D] */
    float *intermediate;           /* [M,F] */
    float *intermediate_activated; /* [M,F] */
    float *output;                 /* [M,D] */
    /* fp16 mode only, each optional: as gg_gelu_ffn_fwd_args' */
    const void *weight1_fp16;          /* fp16 [F,D] or NULL */
    const void *weight2_fp16;          /* fp16 [D,F] or NULL */
    void *hidden_states_fp16;          /* fp16 [M,D] or NULL */
    void *intermediate_activated_fp16; /* fp16 [M,F] or NULL */
    void *intermediate_fp16;           /* fp16 [M,F] or NULL: as gg_gelu_ffn_fwd_args' linear1_out_fp16 */
} gg_mlp_fwd_args;

GG_API gg_status gg_mlp_forward(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_mlp_fwd_args *args, gg_stream stream);

/* 4. SSM output projection with gate multiply, backward. Forward: out = (ssm_output * gate_activated) @ Wᵀ + bias,
 *    gate_activated = silu(gate) or gate. bf16 tensors, H = hidden, E = expanded. Every elementwise step rounds to
 *    bf16, exactly as a bf16 framework would:
 *      grad_weight = bf16(grad_outputᵀ @ gated_output)  [H,E]    grad_bias = bf16(Σ_rows grad_output)  [H]
 *      g = bf16(grad_output @ W)  [M,E];  grad_ssm_output = bf16(g * gate_activated);  a = bf16(g * ssm_output)
 *      silu: s = bf16(sigmoid(gate)); d = bf16(s * bf16(1 + bf16(gate * bf16(1 - s)))); grad_gate = bf16(a * d)
 *      else: grad_gate = a
 *    (sigmoid in fast fp32 arithmetic: s is the exactly rounded bf16 for every gate above -87.5, 0 below; see
 *    docs/blocks.md) */
typedef struct gg_ssm_gate_desc {
    int64_t tokens;    /* M */
    int64_t hidden;    /* H (output features of the projection) */
    int64_t expanded;  /* E (input features) */
    int use_silu_gate; /* nonzero: gate_activated = silu(gate) */
    int accumulate;    /* 0: overwrite grad_weight and grad_bias; nonzero: add to them (bf16(old + new), one
                          rounding) */
} gg_ssm_gate_desc;

typedef struct gg_ssm_gate_args {
    const void *grad_output;    /* bf16 [M,H] */
    const void *ssm_output;     /* bf16 [M,E] */
    const void *gate;           /* bf16 [M,E] (read only when use_silu_gate) */
    const void *weight;         /* bf16 [H,E] */
    const void *gate_activated; /* bf16 [M,E] */
    const void *gated_output;   /* bf16 [M,E] */
    void *grad_ssm_output;      /* bf16 [M,E] */
    void *grad_gate;            /* bf16 [M,E] */
    void *grad_weight;          /* bf16 [H,E] */
    void *grad_bias;            /* bf16 [H] */
} gg_ssm_gate_args;

GG_API gg_status gg_ssm_gate_backward(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args,
                                      gg_stream stream);

/* Block 4's forward, writing what gg_ssm_gate_backward reads, named as there. bf16 tensors, every step rounded to
 * bf16 (silu in fp32, one rounding, as a bf16 framework's silu); accumulate is ignored.
 *      gate_activated = bf16(gate * sigmoid(gate)) with use_silu_gate, else a copy of gate     [M,E]
 *      gated_output   = bf16(ssm_output * gate_activated)                                       [M,E]
 *      output         = bf16(gated_output @ Wᵀ + bias)   (bf16 operands, fp32 accumulation and bias, one rounding)
 * gate is read in both modes. */
typedef struct gg_ssm_gate_fwd_args {
    const void *ssm_output; /* bf16 [M,E] */
    const void *gate;       /* bf16 [M,E] */
    const void *weight;     /* bf16 [H,E] */
    const void *bias;       /* bf16 [H] */
    void *gate_activated;   /* bf16 [M,E] */
    void *gated_output;     /* bf16 [M,E] */
    void *output;           /* bf16 [M,H] */
} gg_ssm_gate_fwd_args;

GG_API gg_status gg_ssm_gate_forward(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_ssm_gate_fwd_args *args,
                                     gg_stream stream);

/* Forward passes (gg_*_forward). Each writes exactly the tensors its block's backward reads, in the layout it reads
 * them, so a training step is forward, loss, backward on the same buffers. A forward checks its arguments as the
 * backward does (sizes, NULL, alignment, no output overlapping another tensor, host memory refused; the message
 * names the forward and the field), plans once per shape (its plan is its own, not the backward's), and enqueues
 * everything on the caller's stream: no fork, no host synchronization, nothing allocated after the first call of a
 * shape. Inside a capture (cudaStreamBeginCapture, or a gg_step_add_callback callback) a forward only enqueues, so
 * its shape must have been planned by an earlier forward call outside any capture: otherwise it is refused with
 * GG_ERROR_INVALID_ARGUMENT and nothing is enqueued (a step callback runs at the bucket's token count: run the
 * forward once eagerly at each bucket first). Captured, a forward replays bitwise what the eager call computes.
 * Inside a step graph's callback a forward (or any eager block call) shares the context's scratch memory with the
 * weight-gradient work of the step's earlier calls, which may still be running: it first makes its stream wait for
 * that work (see "Callbacks" below), so every precision is safe there. */

/* ---------------------------------------------------------------------------------------------------------------
 * Graphs: each block's backward captured once per shape bucket as a CUDA graph and replayed with one launch.
 *
 *   gg_graph *g;  gg_graph_config gc = GG_GRAPH_CONFIG_INIT;  gc.max_tokens = 8192;   (powers of two up to 8192)
 *   gg_mlp_graph_create(ctx, &desc, &gc, &g);     plans every bucket (may allocate; never inside a capture)
 *   every step:  desc.tokens = M;  gg_mlp_graph_run(g, &desc, &args, stream);   one cudaGraphLaunch
 *   gg_graph_destroy(g);
 *
 * Buckets. A call runs in the smallest bucket >= M. When M is not a bucket, its [M, ...] tensors are copied into
 * the graph's staging buffers with the padding rows zeroed (zero rows change no gradient) and its [M, ...] outputs
 * copied back: exact buckets are faster. Past the largest bucket: GG_ERROR_INVALID_ARGUMENT, or the eager path
 * with eager_beyond_max. All buckets share the context's scratch arena and one staging area sized for the
 * largest bucket.
 *
 * Rebinding. A graph captures the pointers it was called with. A call with another pointer set (double-buffered
 * activations, say) captures again and updates an executable graph in place (cudaGraphExecUpdate), or
 * instantiates one when the update is refused; each bucket keeps execs_per_bucket pointer sets, so alternating
 * between a few sets costs nothing after the first call of each. The same holds for accumulate, use_silu_gate and,
 * for padded calls, M: each is part of what a graph captured.
 *
 * Rules. A graph belongs to its context: replay a context's graphs and eager calls in one stream order (they share
 * the context's scratch and workspaces); destroy graphs before the context (gg_ctx_destroy destroys any left).
 * First calls of a new pointer set capture, instantiate and may take ~100 us on the host; replays allocate
 * nothing, query no heuristic and never synchronize the host.
 * ------------------------------------------------------------------------------------------------------------- */
typedef enum gg_bucket_policy {
    GG_BUCKETS_LIST = 0, /* exactly the token counts in bucket_tokens */
    GG_BUCKETS_POW2 = 1, /* powers of two from min_tokens (rounded up) below max_tokens, and max_tokens itself */
    GG_BUCKETS_STEP = 2  /* multiples of step below max_tokens, and max_tokens itself */
} gg_bucket_policy;

#define GG_GRAPH_CONFIG_VERSION 1

typedef struct gg_graph_config {
    size_t struct_size;             /* sizeof(gg_graph_config) */
    uint32_t version;               /* GG_GRAPH_CONFIG_VERSION */
    gg_bucket_policy policy;        /* default GG_BUCKETS_POW2 */
    const int64_t *bucket_tokens;   /* GG_BUCKETS_LIST: the bucket sizes (any order) */
    int n_buckets;                  /* GG_BUCKETS_LIST: their count, 1..64 */
    int64_t min_tokens;             /* GG_BUCKETS_POW2: the smallest bucket; default 128 */
    int64_t step;                   /* GG_BUCKETS_STEP: the bucket spacing */
    int64_t max_tokens;             /* POW2/STEP: the largest bucket (the cap); default 16384 */
    int allow_padding;              /* default 1; 0: a call whose M is not a bucket fails (and no staging memory) */
    int eager_beyond_max;           /* default 0: M past the largest bucket fails; 1: it runs on the eager path
                                       (a gradient-syncing graph still reduces the gradients, joined before the call
                                       returns; its plan for that M is not agreed across ranks) */
    int device_select;              /* default 0; 1: also build the device-selected graph (gg_*_graph_run_device) */
    int execs_per_bucket;           /* pointer sets kept per bucket; default 4 */
    int sync_gradients;             /* default 1: with a communicator on the context (gg_dist_*), the graph also
                                       reduces the parameter gradients across ranks, and making it is collective
                                       (every rank at once: they agree on the GEMM algorithms); 0: local
                                       gradients only */
} gg_graph_config;

#define GG_GRAPH_CONFIG_INIT                                                                                       \
    { sizeof(gg_graph_config), GG_GRAPH_CONFIG_VERSION, GG_BUCKETS_POW2, NULL, 0, 128, 0, 16384, 1, 0, 0, 4, 1 }

typedef struct gg_graph gg_graph;

/* Creating: desc gives the dims, precision (and, for block 4, nothing else: use_silu_gate is per call); its tokens and
 * accumulate are ignored. Plans every bucket (cuBLASLt heuristics, scratch, staging): allocates, may synchronize the
 * device, never inside a stream capture. config NULL: GG_GRAPH_CONFIG_INIT. Running: desc->tokens selects the bucket,
 * desc->accumulate and use_silu_gate apply per call; desc's dims and precision must equal the graph's. Arguments are
 * checked exactly as by the eager entry point. Running on the device (needs config->device_select): the GPU reads M
 * from device_tokens (an int64 in device memory; host memory and an address inside one of the call's outputs are
 * refused) when the graph runs and picks the bucket itself, so the host never needs M; desc->tokens is then the
 * capacity, the rows the [M, ...] tensors can hold. Every call stages (pads), since M is unknown on the host. An M < 1,
 * > capacity or > the largest bucket runs nothing and is counted (gg_graph_device_errors). */
GG_API gg_status gg_tanh_gate_graph_create(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_graph_config *config,
                                           gg_graph **out);
GG_API gg_status gg_tanh_gate_graph_run(gg_graph *graph, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args,
                                        gg_stream stream);
GG_API gg_status gg_tanh_gate_graph_run_device(gg_graph *graph, const gg_tanh_gate_desc *desc,
                                               const int64_t *device_tokens, const gg_tanh_gate_args *args,
                                               gg_stream stream);
GG_API gg_status gg_gelu_ffn_graph_create(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_graph_config *config,
                                          gg_graph **out);
GG_API gg_status gg_gelu_ffn_graph_run(gg_graph *graph, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args,
                                       gg_stream stream);
GG_API gg_status gg_gelu_ffn_graph_run_device(gg_graph *graph, const gg_gelu_ffn_desc *desc,
                                              const int64_t *device_tokens, const gg_gelu_ffn_args *args,
                                              gg_stream stream);
GG_API gg_status gg_mlp_graph_create(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_graph_config *config,
                                     gg_graph **out);
GG_API gg_status gg_mlp_graph_run(gg_graph *graph, const gg_mlp_desc *desc, const gg_mlp_args *args, gg_stream stream);
GG_API gg_status gg_mlp_graph_run_device(gg_graph *graph, const gg_mlp_desc *desc, const int64_t *device_tokens,
                                         const gg_mlp_args *args, gg_stream stream);
GG_API gg_status gg_ssm_gate_graph_create(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_graph_config *config,
                                          gg_graph **out);
GG_API gg_status gg_ssm_gate_graph_run(gg_graph *graph, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args,
                                       gg_stream stream);
GG_API gg_status gg_ssm_gate_graph_run_device(gg_graph *graph, const gg_ssm_gate_desc *desc,
                                              const int64_t *device_tokens, const gg_ssm_gate_args *args,
                                              gg_stream stream);

/* Destroys the graph's executable graphs and staging memory (waits for its replays to finish). NULL is a no-op. */
GG_API void gg_graph_destroy(gg_graph *graph);

/* The graph's buckets: their count, and the token count of bucket i (0 for a bad graph or index). */
GG_API int gg_graph_bucket_count(const gg_graph *graph);
GG_API int64_t gg_graph_bucket_tokens(const gg_graph *graph, int i);

/* Device memory of a graph set. exec_bytes is measured (cudaMemGetInfo around each instantiation, 2 MiB
 * granularity). The scratch the plans use belongs to the context (gg_ctx_device_bytes) and is shared by all
 * buckets and graphs: scratch_bytes says how much of it this graph needs. */
typedef struct gg_graph_memory {
    int buckets;          /* buckets (bucket = -1) or 1 */
    int execs;            /* executable graphs alive */
    size_t exec_bytes;    /* device memory taken by their instantiation */
    size_t staging_bytes; /* padding buffers (whole graph; 0 for one bucket) */
    size_t scratch_bytes; /* of the context's arena, for the largest bucket (or this bucket) */
    size_t total_bytes;   /* exec_bytes + staging_bytes: what destroying the graph gives back */
} gg_graph_memory;

/* bucket: an index for one bucket, or -1 for the whole graph. */
GG_API gg_status gg_graph_memory_info(const gg_graph *graph, int bucket, gg_graph_memory *out);

/* How many device-selected runs found no bucket for their M (reads device memory: synchronizes the device). */
GG_API gg_status gg_graph_device_errors(gg_graph *graph, unsigned *count);

/* Writes what a replay of one bucket runs as a Graphviz DOT file (cudaGraphDebugDotPrint), to look at: kernels,
 * GEMMs, copies and the edges between the streams (render with `dot -Tsvg file.dot -o file.svg`). The bucket's
 * graph is captured again for this, with the pointers, M and flags of its most recent run; nothing is launched.
 *   bucket   a bucket index, or -1 for the device-selected graph (gg_*_graph_run_device; needs device_select);
 *   path     the file to write (replaced if it exists);
 *   verbose  nonzero: every node's parameters too (launch shapes, addresses).
 * Returns GG_ERROR_INVALID_ARGUMENT for a NULL graph or path, a bucket out of range, a bucket that has not run yet
 * or a path that cannot be written; GG_ERROR_CUDA if the capture fails. A syncing graph's capture includes its
 * NCCL calls: call this on every rank for the same bucket at the same point, as its runs are. */
GG_API gg_status gg_graph_debug_dot(gg_graph *graph, int bucket, const char *path, int verbose);

/* ---------------------------------------------------------------------------------------------------------------
 * Step graphs: a whole model's backward captured as one CUDA graph per shape bucket, replayed with one launch.
 *
 *   gg_step *step;  gg_step_config sc = GG_STEP_CONFIG_INIT;  sc.max_tokens = 4096;
 *   gg_step_create(ctx, &sc, &step);
 *   gg_step_add_callback(step, loss_grad, &model);          the caller's kernels, enqueued on the stream handed over
 *   for (l = layers - 1; l >= 0; --l) {
 *       gg_step_add_mlp(step, &desc[l], &args[l]);           args[l].grad_output: the previous call's output, say
 *       gg_step_add_callback(step, residual_add, &layer[l]);
 *   }
 *   gg_step_finalize(step);                                  checks the chain, plans every call at every bucket
 *   every step:  gg_step_run(step, tokens, accumulate, stream);   one cudaGraphLaunch after a bucket's first run
 *   gg_step_destroy(step);
 *
 * Calls run in the order added. Inside the graph each block call's dX chain runs on the step's main stream, and its
 * weight-gradient work (dW, bias sums) on one of config->side_streams side streams (call i: side stream i mod
 * side_streams), where it is joined only at the end of the step: it overlaps the following calls' dX chains. The
 * calls' intermediates live in a ring of scratch_slots slots (call i: slot i mod scratch_slots), each as large as
 * the largest call's plan; a call waits for the weight-gradient work of the call that used its slot before it, so
 * the memory does not grow with the number of calls. Calls that write a buffer an earlier call's weight-gradient
 * work still reads (ping-pong activation-gradient buffers) wait for that work first.
 *
 * Buffers. The step captures the pointers given to the adds. Every [M, ...] tensor must hold rows for the largest
 * bucket (desc->tokens of the adds is ignored; the step checks every tensor at max_tokens rows). A run of
 * `tokens` rows runs the smallest bucket >= tokens in place on those buffers, no copies: rows tokens .. bucket-1
 * are padding. The step zeroes the padding rows of the first block call's grad_output right before that call (so a
 * loss callback may leave them as they are); the saved activations' padding rows (hidden_states, intermediates,
 * gates ...) must hold finite values (zeros, or what a forward pass over zero rows gives), and every callback must
 * keep the padding rows of what it writes zero when those of its inputs are (a row-wise kernel over all `tokens`
 * rows it is handed does); a block call's grad_residual must have zero padding rows too (an earlier call's
 * activation gradient, or the first call's grad_output, has). Zero rows of grad_output then give zero rows of every
 * activation gradient and add nothing to any parameter gradient, so padded runs equal exact ones on the real rows.
 *
 * Rebinding. A step's executable graphs are keyed by every pointer of every block call (gg_step_set_args changes
 * them), the accumulate flag and, padded, the token count; each bucket keeps execs_per_bucket of them, the least
 * recently used updated in place (cudaGraphExecUpdate) or replaced when another is needed. Alternating between two
 * pointer sets (double-buffered activations: set_args on the calls, run, set_args back, run ...) captures twice
 * per bucket, then only launches. What a callback enqueues is captured with the pointer set that was current: a
 * callback's own buffers must be the same whenever the block calls' pointers are (derive both from the same
 * choice of buffer).
 *
 * Device-side selection. gg_step_run_device reads the token count from device memory when the graph runs: one
 * graph holds every bucket behind a SWITCH node (a selection kernel picks the smallest bucket >= M), so the host
 * never needs M. Padding is as above (in place; the first block call's grad_output rows M .. bucket-1 are zeroed
 * on the GPU), whatever config->allow_padding says. Callbacks are captured once per bucket, inside the SWITCH
 * node's branch: they may only enqueue work a conditional node's body accepts (kernels, memset and memcpy between
 * device buffers; no event or host nodes, no NCCL).
 *
 * Callbacks. fn(user, stream, tokens) is called while the step is captured (at the first run of a bucket and pointer
 * set, not at every run): it must only enqueue capturable work on `stream` (kernels, cudaMemsetAsync, cudaMemcpyAsync
 * between device buffers; no allocation, no synchronization, no other stream unless forked from and joined back to
 * `stream` with events), and `tokens` is the bucket's row count. It runs after the activation gradients of every
 * earlier call are complete; the weight-gradient work of earlier calls may still be running beside it, so a
 * callback must not write a tensor an earlier call reads (its grad_output, saved activations, weights) nor read an
 * earlier call's parameter gradients (a gradient callback may: gg_step_add_gradient_callback). gradgraph's eager
 * calls on the step's context (a forward, a backward the step does not hold) may run inside a callback, on `stream`
 * or a stream forked from it (on any other stream they are refused), once their shape has been planned outside any
 * capture: each first makes its stream wait for the weight-gradient work of the earlier calls that share
 * the context's scratch memory and workspaces with it (on `stream`, that work is then joined for the rest of the
 * step: less overlap, never a race). Every call that makes, changes, finalizes, runs, waits for or destroys a
 * context, graph, step, optimizer or communicator is refused inside a callback, on any context (gg_ctx_create and
 * _destroy, gg_*_graph_create / _run, gg_step_create / _add_* / _finalize / _run / _set_* / _destroy, gg_optim_create /
 * _add_param / _finalize / _last_step / _destroy, gg_dist_attach / _init_* / _detach / _alloc / _free,
 * gg_fp16_overflow, the *_device_errors queries): they allocate or synchronize, which breaks the capture, or change
 * what it holds. So is gg_dist_reduce: reduce what a callback writes with gg_step_add_reduce. When a
 * gradgraph call inside a callback fails (on any context), the step's run fails too (the first failure's status, its
 * message quoted) and nothing of that capture runs: the callback's work would be missing from the graph. All work
 * is complete when the step's work on the run's stream is.
 *
 * Errors. Every function checks its arguments and, on failure, returns a status with a message (gg_last_error(ctx))
 * that names the function, the call index ("gg_step_add_mlp (call 3): args->grad_output is NULL") and the field; a
 * failed add or finalize enqueues nothing and leaves the step as it was (a failed add adds nothing). Rules as for
 * per-block graphs: run a context's steps, graphs and eager calls in one stream order; destroy steps before the
 * context (gg_ctx_destroy destroys any left).
 *
 * Data parallelism. A step finalized with config->sync_gradients (the default) on a context with a communicator
 * (gg_dist_*) reduces its parameter gradients across the ranks inside its graph: every block call's dW, db and
 * grad_gate, and the buffers registered with gg_step_add_reduce. At finalize they are packed, in the order they are
 * produced (the step's call order, which is backward order), into buckets of at most gg_dist_config.bucket_bytes
 * across layer boundaries (a gradient larger than a bucket is split into bucket-sized pieces; with reduce-scatter it
 * is reduced whole; a layout of more than 65536 collectives -- bucket_bytes small against the gradients -- is
 * refused with GG_ERROR_UNSUPPORTED). Each bucket is one NCCL group of in-place collectives per gradient (no copies),
 * launched on the context's communication stream as soon as the calls that produce its gradients have finished
 * (their weight-gradient streams' events), so it overlaps the rest of the backward; the step's stream waits for the
 * communication stream once, at the step's end. op (mean or sum) and sync (all-reduce or reduce-scatter) are
 * gg_dist_config's; copy_engines and comm_sms do not apply to steps (NCCL's own collectives, on SMs). Activation
 * gradients stay local.
 * Finalizing a syncing step is collective: every rank finalizes at the same time, a rank that fails makes it fail on
 * every rank (GG_ERROR_PEER on the others), the ranks compare a fingerprint of their steps (calls, blocks, dims,
 * precisions, reduce entries, buckets, bucket layout, op, sync, bucket_bytes: GG_ERROR_INVALID_ARGUMENT on every rank
 * when they differ) and adopt rank 0's GEMM algorithms. Every rank must then run the step with the same bucket and
 * sync setting at the same point; a syncing step holds NCCL work once it has run (destroy it before gg_dist_detach).
 * Micro-batches: gg_step_set_sync(step, 0) makes the following runs accumulate locally without reducing (PyTorch
 * DDP's no_sync), gg_step_set_sync(step, 1) makes the next run (the last micro-batch) reduce the accumulated sums.
 * gg_step_run_device refuses a step that would reduce (a conditional node cannot hold NCCL work). Without a
 * communicator (or with sync_gradients 0) nothing is reduced and gg_step_add_reduce's buffers are left alone, so one
 * description serves one GPU and many.
 * ------------------------------------------------------------------------------------------------------------- */
#define GG_STEP_CONFIG_VERSION 2
#define GG_STEP_MAX_SIDE_STREAMS 4
#define GG_STEP_MAX_SCRATCH_SLOTS 8

typedef struct gg_step_config {
    size_t struct_size;           /* sizeof(gg_step_config) */
    uint32_t version;             /* GG_STEP_CONFIG_VERSION */
    gg_bucket_policy policy;      /* buckets as in gg_graph_config: default GG_BUCKETS_POW2 */
    const int64_t *bucket_tokens; /* GG_BUCKETS_LIST: the bucket sizes (any order) */
    int n_buckets;                /* GG_BUCKETS_LIST: their count, 1..64 */
    int64_t min_tokens;           /* GG_BUCKETS_POW2: the smallest bucket; default 128 */
    int64_t step;                 /* GG_BUCKETS_STEP: the bucket spacing */
    int64_t max_tokens;           /* POW2/STEP: the largest bucket, the rows every [M, ...] buffer holds; default
                                     4096 */
    int allow_padding;            /* default 1; 0: a run whose tokens is not a bucket fails */
    int execs_per_bucket;         /* executable graphs kept per bucket (pointer sets, accumulate on/off, padded
                                     token counts, the sync and update settings); default 4, 1..64 */
    int side_streams;             /* streams for the calls' weight-gradient work, 1..GG_STEP_MAX_SIDE_STREAMS;
                                     default 2. The context's overlap = GG_OVERLAP_NEVER runs everything on one */
    int scratch_slots;            /* the scratch ring's slots, 1..GG_STEP_MAX_SCRATCH_SLOTS; 0 (default):
                                     side_streams + 1. Fewer slots: less memory, less overlap */
    /* version 2 */
    int sync_gradients;           /* default 1: with a communicator on the context at gg_step_finalize, the step
                                     reduces its parameter gradients across the ranks (see "Data parallelism"
                                     above) and finalizing it is collective; 0: local gradients only. A version-1
                                     struct (an older header) means 0, as such steps never reduced */
} gg_step_config;

#define GG_STEP_CONFIG_INIT                                                                                        \
    { sizeof(gg_step_config), GG_STEP_CONFIG_VERSION, GG_BUCKETS_POW2, NULL, 0, 128, 0, 4096, 1, 4, 2, 0, 1 }

typedef struct gg_step gg_step;

/* The caller's own work in a step: enqueue it on stream (see "Callbacks" above). */
typedef void (*gg_step_callback_fn)(void *user, gg_stream stream, int64_t tokens);

/* Makes an empty step on ctx. config NULL: GG_STEP_CONFIG_INIT. Allocates nothing on the device yet.
 * Returns GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (ctx or out NULL, a config field out of range: named),
 * GG_ERROR_VERSION or GG_ERROR_OUT_OF_MEMORY; *out is NULL on failure. */
GG_API gg_status gg_step_create(gg_ctx *ctx, const gg_step_config *config, gg_step **out);

/* Appends one block call: desc (dims, precision, use_silu_gate; tokens and accumulate are ignored: gg_step_run
 * sets them) and args (every pointer, each buffer with rows for max_tokens) are copied; the block's argument
 * checks run here, at max_tokens rows. Refused after gg_step_finalize. Returns GG_SUCCESS or an error as the eager
 * entry point's, its message prefixed with the function and call index. */
GG_API gg_status gg_step_add_tanh_gate(gg_step *step, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args);
GG_API gg_status gg_step_add_gelu_ffn(gg_step *step, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args);
GG_API gg_status gg_step_add_mlp(gg_step *step, const gg_mlp_desc *desc, const gg_mlp_args *args);
GG_API gg_status gg_step_add_ssm_gate(gg_step *step, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args);

/* Appends a callback (fn non-NULL; user is passed through). Refused after gg_step_finalize. */
GG_API gg_status gg_step_add_callback(gg_step *step, gg_step_callback_fn fn, void *user);

/* Appends a gradient callback: a callback (see "Callbacks") that runs once every parameter gradient of the step is
 * final -- every earlier call's weight-gradient work joined and, in a data-parallel step, every reduction complete
 * (with reduce-scatter, each gradient's shard of this rank; with gg_step_set_sync 0, none: the local gradients) -- so
 * it may read and write the gradients and the weights: an optimizer of your own, clipping or scaling of your own, the
 * sum of the gradients of weights tied between calls. Like gg_step_add_optimizer it must follow every block call and
 * gg_step_add_reduce (gg_step_finalize refuses one after it); callbacks, gradient callbacks and an optimizer may
 * follow. An optimizer added after it updates every parameter there (no parameter is updated as its bucket is
 * reduced: the callback may change the gradients first). Every run of the step runs it unless the update is off: for
 * accumulation over micro-batches, as with the optimizer, turn it off for all but the last micro-batch
 * (gg_step_set_update). The cost: nothing of the backward overlaps it. Returns as gg_step_add_callback. */
GG_API gg_status gg_step_add_gradient_callback(gg_step *step, gg_step_callback_fn fn, void *user);

typedef struct gg_optim gg_optim; /* "Optimizer" below */

/* Appends an optimizer's step (gg_optim_step, see "Optimizer" below): it runs once every earlier call's parameter
 * gradients are final (their weight-gradient work on the side streams and, in a data-parallel step, their
 * reductions joined), so the whole training step -- forward (in callbacks), backward, reduction, update -- is one
 * graph launch. Every run of the step then updates the parameters: for accumulation over micro-batches, turn the
 * update off for all but the last micro-batch (gg_step_set_update). In a data-parallel step with an optimizer
 * that updates parameters apart (max_grad_norm 0 and check_finite 0: nothing waits for every gradient), each
 * parameter whose gradient is exactly a reduced gradient of the step (same pointer, count and type) is updated on
 * the communication stream as soon as the bucket completing that gradient is reduced, overlapping the rest of the
 * backward (the usual case: a layer's weights are read by its own call only, before its gradient is final). A
 * parameter whose weights or copy another block call of the step uses too (weights tied between calls) is updated
 * at the end instead, as are the others; a callback after that point must not read the weights (callbacks are not
 * looked into). A parameter whose gradient
 * lies in no gradient the data-parallel step reduces (no block call makes it, no gg_step_add_reduce buffer holds
 * it) would be updated on each rank from its own gradient: gg_step_finalize logs a WARN naming it. With reduce-scatter
 * (gg_dist_config.sync) gg_step_finalize refuses a step with an optimizer: each rank would hold only a shard of
 * each reduced gradient. Add it after every block call and gg_step_add_reduce (gg_step_finalize refuses one that
 * follows it: its gradients would miss the update); callbacks may follow. opt must be finalized and made on the
 * step's context. Refused after gg_step_finalize. */
GG_API gg_status gg_step_add_optimizer(gg_step *step, gg_optim *opt);

/* Appends a gradient the caller computes itself (an embedding's, a layer of its own) to the step's reduction: count
 * elements at grad (fp32; bf16 when bf16 is nonzero), device memory aligned to its elements, final on the step's
 * stream at this point of the call order (add it right after the callback that writes it). A syncing step reduces
 * it in place with the block calls' gradients (see "Data parallelism"); other steps leave it alone. After this
 * point no callback may read or write it (the reduction may still run). It must not overlap a block call's
 * parameter gradient or another entry (checked at gg_step_finalize); with reduce-scatter count must be divisible
 * by the number of ranks (checked there too). grad and its last byte must be device (or managed) memory. Refused
 * after gg_step_finalize. Returns GG_SUCCESS or GG_ERROR_INVALID_ARGUMENT / GG_ERROR_MISALIGNED naming the argument
 * (nothing added). */
GG_API gg_status gg_step_add_reduce(gg_step *step, void *grad, size_t count, int bf16);

/* Ends the description: checks what only the whole chain shows (at least one block call; no two calls write
 * overlapping parameter gradients; an input that overlaps an earlier call's activation gradient is exactly that
 * tensor; in a syncing step, no tensor of a call overlaps a gradient an earlier call reduces -- a parameter gradient
 * or a gg_step_add_reduce buffer -- whose reduction may still run: use reduced gradients in a gradient callback),
 * plans every block call at every bucket (cuBLASLt, autotune: allocates and synchronizes the device, never inside a
 * capture), and allocates the scratch ring's other slots, the side streams and their workspaces. Nothing
 * is captured yet. Returns GG_SUCCESS or an error naming the call. A failed check leaves the step open (fix the call
 * with gg_step_set_args and finalize again); a failure after the checks (planning, allocation) leaves a step that
 * can only be destroyed. A syncing step (see "Data parallelism") also packs its gradients into buckets and agrees
 * with the other ranks: GG_ERROR_PEER when another rank failed (the step stays open when this rank had not touched
 * the device yet), GG_ERROR_INVALID_ARGUMENT when the ranks' steps differ, GG_ERROR_NCCL from the agreement. */
GG_API gg_status gg_step_finalize(gg_step *step);

/* Runs the backward for `tokens` rows on stream: the smallest bucket >= tokens (padding: see "Buffers" above).
 * accumulate 0: every call overwrites its parameter gradients; nonzero: adds to them (micro-batches). The first
 * run of a bucket with a new accumulate flag (or, padded, a new token count) captures the whole step and
 * instantiates it (or updates an exec in place); every later one is one cudaGraphLaunch.
 * Returns GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (not finalized, tokens < 1 or past the largest bucket, padding off and
 * tokens not a bucket), or a CUDA/cuBLAS error from the capture (a callback that broke the capture is named); a
 * gradgraph call inside a callback that failed fails the run with that call's status, its message quoted (nothing of
 * the capture runs); a syncing run also GG_ERROR_NCCL (an asynchronous NCCL error: gg_dist_check) or
 * GG_ERROR_INVALID_ARGUMENT when the communicator the step was finalized with is gone; a syncing run that fails after
 * its checks aborts the communicator (the other ranks' runs wait for this one's collectives: see the rules of "Data
 * parallelism (NCCL)" below). */
GG_API gg_status gg_step_run(gg_step *step, int64_t tokens, int accumulate, gg_stream stream);

/* Whether the following runs of a syncing step reduce their gradients across the ranks (sync 1, the default)
 * or only accumulate them locally (0: PyTorch DDP's no_sync; run every micro-batch but the last so, then the last
 * with sync on and accumulate 1). Each setting has its own executable graphs (captured at its first run). Every
 * rank must use the same setting for the same run. On a step that does not reduce it changes nothing. A run with
 * sync off on a step with an optimizer whose update is on (gg_step_set_update) logs a WARN when it is captured: it
 * would update each rank's weights from that rank's own gradients. Allowed before and after gg_step_finalize.
 * Returns GG_SUCCESS or GG_ERROR_INVALID_ARGUMENT (step NULL, sync not 0 or 1). */
GG_API gg_status gg_step_set_sync(gg_step *step, int sync);

/* Whether the following runs include the step's work on the final gradients -- its optimizer and gradient callbacks
 * (update 1, the default) -- or leave it out (0), so that one step serves every micro-batch of an accumulation: the
 * micro-batches but the last with update 0 (and, in a data-parallel step, sync 0), the last with update 1, sync 1
 * and accumulate 1. With update 0 a run only computes (and, with sync on, reduces) its gradients; no parameter is
 * updated; plain callbacks after the final work still run, without the join it made. Each setting has its own
 * executable graphs (captured at its first run; on a step without final work the setting changes nothing), which
 * share the bucket's execs_per_bucket: that recipe takes three a pointer set (accumulate 0 and 1 with update 0,
 * accumulate 1 with update 1), so with double-buffered activations set execs_per_bucket to 6 or more, or every
 * micro-batch captures again. Allowed before and after gg_step_finalize. Returns GG_SUCCESS or
 * GG_ERROR_INVALID_ARGUMENT (step NULL, update not 0 or 1). */
GG_API gg_status gg_step_set_update(gg_step *step, int update);

/* Runs the backward with the token count M read from device memory when the graph runs (an int64 the GPU writes,
 * say, so the host never waits for it): the smallest bucket >= M, chosen on the GPU (see "Device-side selection").
 * device_tokens must stay valid while the step's graphs may run; accumulate as for gg_step_run. The first run of a
 * pointer set and accumulate flag captures every bucket into one graph (every callback once per bucket) and
 * instantiates it; later runs are one cudaGraphLaunch. An M < 1 or past the largest bucket runs nothing and is
 * counted (gg_step_device_errors). Returns GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (step NULL or not finalized,
 * device_tokens NULL, or inside an output of one of the step's block calls), GG_ERROR_MISALIGNED (device_tokens not 8-byte aligned), GG_ERROR_UNSUPPORTED (a syncing
 * step with sync on: NCCL cannot run inside the conditional node; turn sync off with gg_step_set_sync and reduce
 * after the run with gg_dist_reduce, or use gg_step_run), or a CUDA/cuBLAS error from the capture. */
GG_API gg_status gg_step_run_device(gg_step *step, const int64_t *device_tokens, int accumulate, gg_stream stream);

/* How many device-selected runs of the step found no bucket for their M (reads device memory: synchronizes the
 * device). 0 for a step that never ran. Returns GG_SUCCESS or GG_ERROR_INVALID_ARGUMENT (step or count NULL). */
GG_API gg_status gg_step_device_errors(gg_step *step, unsigned *count);

/* Replaces the pointers of block call `index` (0-based among all adds, callbacks included) with args (the block's
 * args struct: a gg_mlp_args for an mlp call, ...), checked as by the add and against the chain's rules. The next
 * run looks the calls' whole pointer set up among those the step has executable graphs for (see "Rebinding"): a set
 * seen before replays its graph, a new one captures (and updates the least recently used exec in place). */
GG_API gg_status gg_step_set_args(gg_step *step, int index, const void *args);

/* The step's device memory. exec_bytes is measured as for graphs. scratch_bytes: the ring, scratch_slots slots of
 * slot_bytes, of which the first is the context's own arena (shared with its eager calls and graphs) and the others
 * the step's; own_bytes: what destroying the step gives back (the other slots, their counters, the side streams'
 * workspaces, exec_bytes). A step has no staging: staging_bytes is 0. */
typedef struct gg_step_memory {
    int buckets;          /* the step's buckets */
    int execs;            /* executable graphs alive */
    size_t exec_bytes;    /* device memory taken by their instantiation */
    size_t staging_bytes; /* always 0: padding runs in place */
    size_t slot_bytes;    /* one scratch slot: the largest call's plan at the largest bucket */
    size_t scratch_bytes; /* scratch_slots * slot_bytes */
    size_t own_bytes;     /* device memory the step holds itself */
} gg_step_memory;

GG_API gg_status gg_step_memory_info(const gg_step *step, gg_step_memory *out);

/* Writes what a replay of one bucket of the step runs as a Graphviz DOT file, as gg_graph_debug_dot does for a
 * block's graph: every block call's kernels and GEMMs, the callbacks' work, the side streams and the reductions, and
 * the edges between them. The bucket's step is captured again for this, with the tokens, accumulate and sync of its
 * most recent run and the calls' current arguments; nothing is launched.
 *   bucket   a bucket index, or -1 for the device-selected graph (gg_step_run_device);
 *   path     the file to write (replaced if it exists);
 *   verbose  nonzero: every node's parameters too (launch shapes, addresses).
 * Returns GG_ERROR_INVALID_ARGUMENT for a NULL step or path, a step not finalized, a bucket out of range, a bucket
 * that has not run yet or a path that cannot be written; GG_ERROR_CUDA if the capture fails. A syncing step's
 * capture includes its NCCL calls: call this on every rank for the same bucket at the same point, as its runs are. */
GG_API gg_status gg_step_debug_dot(gg_step *step, int bucket, const char *path, int verbose);

/* The number of calls added (block calls and callbacks); 0 for NULL. */
GG_API int gg_step_call_count(const gg_step *step);

/* Destroys the step's executable graphs, streams and memory (waits for its runs to finish). NULL is a no-op. */
GG_API void gg_step_destroy(gg_step *step);

/* ---------------------------------------------------------------------------------------------------------------
 * Optimizer: one fused AdamW or SGD step over every parameter of a model, enqueued on a stream with no host sync,
 * so that it runs in the same CUDA graph as the backward (inside a step graph with gg_step_add_optimizer, or in a
 * capture of your own) and is replayed with it.
 *
 *   gg_optim *opt;  gg_optim_config oc = GG_OPTIM_CONFIG_INIT;  oc.lr = 3e-4f;  oc.max_grad_norm = 1.0f;
 *   gg_optim_create(ctx, &oc, &opt);
 *   per parameter:  gg_optim_param p = {.param = w, .grad = dw, .count = n};  gg_optim_add_param(opt, &p);
 *   gg_optim_finalize(opt);                        the moments (zeroed), the launch tables, the device words
 *   every step, eager or captured:  gg_optim_step(opt, stream);
 *   checkpoints:  gg_optim_save_state / gg_optim_load_state (the moments and step counts, in host memory)
 *   gg_optim_destroy(opt);
 *
 * A step, in stream order on the GPU (docs/optimizer.md has the formulas, rounding and memory):
 *   1. with max_grad_norm > 0 or check_finite: the sum of the squares of every unscaled gradient (gradient × the
 *      inverse loss scale, in fp32; squares added in double), per chunk, then the chunks' sums added in a fixed
 *      order by one CTA: the global norm, the same bits on every run, and the found-inf flag;
 *   2. unless the flag is set: every parameter's step count advances, then one launch updates every parameter:
 *      g = gradient × inverse loss scale (× min(1, max_grad_norm / (norm + 1e-6)) when clipping), then
 *      torch.optim.AdamW's or torch.optim.SGD's update in fp32, in their order of operations, each operation
 *      rounded once; the fp32 weights are written in place and, when asked, their fp16 or bf16 copy in the same
 *      pass.
 *
 * Device state. The learning rate, the inverse loss scale, each parameter's step count (Adam's t), the found-inf
 * flag and the last gradient norm are words in device memory that the kernels read and write when they run, so a
 * replayed graph uses the values of the moment it runs and advances the step counts itself. Change them with
 * gg_optim_set_lr / gg_optim_set_loss_scale (enqueued on a stream: eager, or captured) or from kernels of your own
 * (gg_optim_device_pointers).
 *
 * Loss scaling and found-inf (torch.cuda.amp.GradScaler's contract). The gradients of a loss multiplied by S are
 * multiplied by 1/S (gg_optim_set_loss_scale) before anything else. With check_finite on (the default) a step that
 * finds any gradient element Inf or NaN (or Inf once unscaled) updates nothing: weights, copies, moments and step
 * counts keep their values, and the found-inf flag is set to 1; every other checked step sets it to 0. Read it with
 * gg_optim_last_step (synchronizing) to lower the loss scale, or on the device. With check_finite off nothing is
 * checked, and non-finite gradients reach the weights (as in torch without a GradScaler).
 *
 * Rules. Run an optimizer's steps and setters in one stream order (they share its device words); while a step may
 * run, the parameters, gradients and copies are its. Parameters are numbered in the order they are added, from 0.
 * Destroy optimizers before the context (gg_ctx_destroy destroys any left). A refused call enqueues nothing and
 * changes nothing; its message names the function, the parameter's index and the field
 * ("gg_optim_add_param (param 3): param->grad (0x7f..01) is not 2-byte aligned").
 * ------------------------------------------------------------------------------------------------------------- */
typedef enum gg_optim_kind {
    GG_OPTIM_ADAMW = 0, /* torch.optim.AdamW, amsgrad off: decoupled weight decay, bias-corrected moments */
    GG_OPTIM_SGD = 1    /* torch.optim.SGD: L2 weight decay added to the gradient, momentum (0: plain SGD, no state),
                           dampening, Nesterov */
} gg_optim_kind;

/* gg_optim_config.weight_decay's default: the kind's own PyTorch default, 1e-2 for AdamW and 0 for SGD. */
#define GG_OPTIM_DEFAULT_WEIGHT_DECAY (-1.0f)

#define GG_OPTIM_CONFIG_VERSION 1

/* Optimizer configuration (defaults: PyTorch's). Always start from GG_OPTIM_CONFIG_INIT. Fields of the other kind
 * are ignored. */
typedef struct gg_optim_config {
    size_t struct_size;  /* sizeof(gg_optim_config) */
    uint32_t version;    /* GG_OPTIM_CONFIG_VERSION */
    gg_optim_kind kind;  /* default GG_OPTIM_ADAMW */
    float lr;            /* the learning rate, finite and >= 0; default 1e-3 (gg_optim_set_lr changes it) */
    float beta1, beta2;  /* AdamW: the moments' decay rates, each in [0, 1); default 0.9 and 0.999 */
    float eps;           /* AdamW: added to the denominator, finite and >= 0; default 1e-8 */
    float weight_decay;  /* finite and >= 0, or GG_OPTIM_DEFAULT_WEIGHT_DECAY (the default). AdamW: decoupled,
                            p *= 1 - lr * weight_decay before the update; SGD: L2, g += weight_decay * p. Parameters
                            added with no_weight_decay skip it */
    float momentum;      /* SGD: finite and >= 0; default 0 */
    float dampening;     /* SGD: in [0, 1]; default 0 */
    int nesterov;        /* SGD: nonzero for Nesterov momentum (needs momentum > 0 and dampening 0); default 0 */
    float max_grad_norm; /* finite and >= 0. > 0: clip by the global norm of all gradients (unscaled); 0 (default):
                            no clipping */
    int check_finite;    /* default 1: a step with an Inf or NaN gradient updates nothing ("Loss scaling" above);
                            0: no check, and with max_grad_norm 0 no pass over the gradients before the update */
} gg_optim_config;

#define GG_OPTIM_CONFIG_INIT                                                                                       \
    { sizeof(gg_optim_config), GG_OPTIM_CONFIG_VERSION, GG_OPTIM_ADAMW, 1e-3f, 0.9f, 0.999f, 1e-8f,                 \
      GG_OPTIM_DEFAULT_WEIGHT_DECAY, 0.0f, 0.0f, 0, 0.0f, 1 }

/* Element types of the tensors an optimizer reads and writes. */
typedef enum gg_optim_dtype { GG_OPTIM_FP32 = 0, GG_OPTIM_FP16 = 1, GG_OPTIM_BF16 = 2 } gg_optim_dtype;

/* One parameter tensor: count contiguous elements at addresses aligned to their element size (no GG_ALIGNMENT
 * rule here: sub-tensors of a larger buffer are fine; 16-byte aligned tensors take the vector path). Device or
 * managed memory. */
typedef struct gg_optim_param {
    float *param;              /* the fp32 master weights, updated in place */
    const void *grad;          /* the gradient, grad_dtype: read, never written */
    gg_optim_dtype grad_dtype; /* GG_OPTIM_FP32 (default) or GG_OPTIM_BF16 */
    int64_t count;             /* elements, >= 1 */
    void *copy;                /* NULL, or where the updated weights are written again, rounded to copy_dtype
                                  (nearest even): block 4's bf16 weight, an fp16 weight for fp16 GEMMs */
    gg_optim_dtype copy_dtype; /* with copy: GG_OPTIM_FP16 or GG_OPTIM_BF16 */
    int no_weight_decay;       /* nonzero: weight decay skips this parameter (biases, norms); default 0 */
} gg_optim_param;

/* Makes an optimizer on ctx, with no parameters yet. config NULL: GG_OPTIM_CONFIG_INIT. Allocates nothing on the
 * device. Returns GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (ctx or out NULL, a config field out of range: named),
 * GG_ERROR_VERSION or GG_ERROR_OUT_OF_MEMORY; *out is NULL on failure. */
GG_API gg_status gg_optim_create(gg_ctx *ctx, const gg_optim_config *config, gg_optim **out);

/* Appends a parameter (*param is copied; its index is the number of parameters added before it). Checked: param
 * and grad non-NULL; count >= 1; the dtypes; every pointer device or managed memory (each tensor's last element too)
 * and aligned to its element (else GG_ERROR_MISALIGNED); no two of the parameter's tensors overlapping; its weights
 * and copy overlapping no tensor of an earlier parameter, and its gradient no earlier parameter's weights or copy.
 * Refused after gg_optim_finalize. A refused add adds nothing. */
GG_API gg_status gg_optim_add_param(gg_optim *opt, const gg_optim_param *param);

/* Ends the description and makes the device state, in one allocation: the moments, zeroed (AdamW two fp32 words
 * per element, SGD with momentum one, plain SGD none), every step count 0, lr from the config, the loss scale 1,
 * found-inf 0, the launch tables. Synchronizes the device; never call it on a stream being captured. Refused
 * without parameters and when finalized already; a failure after the checks (allocation) leaves an optimizer that
 * can only be destroyed. */
GG_API gg_status gg_optim_finalize(gg_optim *opt);

/* Enqueues one step of every parameter on stream (see above): up to three kernel launches, no allocation, no
 * synchronization, no host state a replay would miss, so it may be captured into a CUDA graph. Returns
 * GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (NULL or not finalized), GG_ERROR_CUDA (a launch refused before the update
 * was enqueued: nothing changed) or GG_ERROR_PARTIAL (the update's launch refused after the launch that advances the
 * step counts: they advance, unless a gradient is not finite, and the weights, copies and moments stay as they
 * were). */
GG_API gg_status gg_optim_step(gg_optim *opt, gg_stream stream);

/* The step of parameters first .. first + count - 1 only: for updates that start as soon as a bucket of gradients
 * is reduced, each range once per step (their step counts advance on their own). Refused (GG_ERROR_INVALID_ARGUMENT)
 * with max_grad_norm > 0 or check_finite: the norm and the found-inf decision need every gradient before any update;
 * use gg_optim_step there. Otherwise as gg_optim_step. */
GG_API gg_status gg_optim_step_params(gg_optim *opt, int first, int count, gg_stream stream);

/* Enqueues a write of the device-side learning rate (finite, >= 0) on stream. Captured, the value is part of the
 * graph: every replay writes it. For a schedule with a replayed step, call this on the stream before each replay
 * (outside the capture), or write the word from a kernel of your own (gg_optim_device_pointers). */
GG_API gg_status gg_optim_set_lr(gg_optim *opt, float lr, gg_stream stream);

/* The same for the loss scale S (finite, > 0, with 1/S a normal fp32 number): the device word holds 1/S, which
 * every step multiplies the gradients by before anything else. */
GG_API gg_status gg_optim_set_loss_scale(gg_optim *opt, float scale, gg_stream stream);

/* The optimizer's device words, for kernels of your own (dynamic loss scaling, schedules, logging inside a graph).
 * Valid until gg_optim_destroy. */
typedef struct gg_optim_device_ptrs {
    float *lr;             /* the learning rate every step reads */
    float *inv_loss_scale; /* 1 / the loss scale: every step multiplies the gradients by it */
    int64_t *steps;        /* [parameters]: the steps each parameter has taken (Adam's t after its next step is
                              this + 1) */
    unsigned *found_inf;   /* 1: the last checked step found an Inf or NaN and updated nothing; else 0 */
    float *grad_norm;      /* the norm of all unscaled gradients, before clipping, from the last step that computed
                              it (max_grad_norm > 0 or check_finite); 0 before the first */
} gg_optim_device_ptrs;

/* Fills *out. Refused before gg_optim_finalize. */
GG_API gg_status gg_optim_device_pointers(gg_optim *opt, gg_optim_device_ptrs *out);

/* Waits for the device (cudaDeviceSynchronize: every stream's work enqueued before), then reads the found-inf flag
 * (*found_inf 1 or 0) and the last gradient norm; either pointer may be NULL, not both. For a host loop's dynamic
 * loss scaling. Refused before gg_optim_finalize. */
GG_API gg_status gg_optim_last_step(gg_optim *opt, int *found_inf, float *grad_norm);

/* An optimizer's sizes, before or after finalize (what finalize allocates, or has allocated). */
typedef struct gg_optim_memory {
    int params;          /* parameters added */
    int64_t elements;    /* their elements, summed */
    size_t state_bytes;  /* the moments: 8 bytes per element for AdamW, 4 for SGD with momentum, 0 for plain SGD,
                            each tensor's rounded up to 16 bytes */
    size_t table_bytes;  /* the launch tables, step counts, the norm's partial sums and the device words */
    size_t total_bytes;  /* state_bytes + table_bytes: what gg_optim_destroy gives back */
} gg_optim_memory;

GG_API gg_status gg_optim_memory_info(const gg_optim *opt, gg_optim_memory *out);

/* Checkpoints. An optimizer's state is what a restarted run needs to continue as if it had not stopped: every
 * parameter's moments (AdamW's exp_avg and exp_avg_sq, SGD's momentum buffer) and step count, the learning rate and
 * loss scale words, the last norm and found-inf. The weights and their copies are yours: save them beside it.
 *
 *   size_t n;  gg_optim_state_size(opt, &n);  void *state = malloc(n);
 *   gg_optim_save_state(opt, state, n);        ... write the n bytes to a file ...
 *   later, in a new process: the same parameters added in the same order, gg_optim_finalize, then
 *   gg_optim_load_state(opt, state, n);        before the first step
 *
 * The state is n bytes of host memory in a format docs/optimizer.md describes (a header, then plain arrays, in the
 * host's byte order), so that a program may also read the moments or write them (from PyTorch's state_dict, say). A
 * load checks the whole header, every parameter's element count, a check word over every byte, the words and the step
 * counts before it writes anything: a state saved by an optimizer of another kind, with other parameters, cut short,
 * changed or damaged since it was saved, or holding a learning rate, loss scale or step count that no step writes is
 * refused with a message naming the difference, and the optimizer keeps its state. The hyperparameters of the config (betas, eps, weight decay, clipping, ...) are not in
 * the state: they are the new optimizer's. Data-parallel ranks each hold the same state: save one rank's, load it on
 * every rank.
 *
 * Both calls wait for the device first (cudaDeviceSynchronize: the steps enqueued before, on any stream, are in the
 * state saved or replaced by the state loaded) and copy synchronously: never call them while a stream of the device is
 * being captured, nor from a step's callback. A step graph that holds the optimizer (gg_step_add_optimizer) replays
 * the loaded state: its pointers do not change. */

/* *bytes = the size of opt's state. Refused before gg_optim_finalize. */
GG_API gg_status gg_optim_state_size(const gg_optim *opt, size_t *bytes);

/* Writes opt's state to buffer (host memory, any alignment, at least gg_optim_state_size's bytes; only those are
 * written). Returns GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (opt or buffer NULL, buffer device memory, bytes too small,
 * opt not finalized: nothing written), GG_ERROR_OUT_OF_MEMORY (host memory for the list of copies: nothing written)
 * or GG_ERROR_CUDA (a copy failed: the buffer holds no state, gg_optim_load_state refuses it). */
GG_API gg_status gg_optim_save_state(gg_optim *opt, void *buffer, size_t bytes);

/* Replaces opt's state by the one in buffer (host memory, any alignment, bytes exactly the state's size). Returns
 * GG_SUCCESS, GG_ERROR_INVALID_ARGUMENT (NULL, device memory, not finalized, or the state does not fit opt or holds
 * values no step writes: named; nothing written), GG_ERROR_VERSION (a state of a format this library does not read;
 * nothing written), GG_ERROR_OUT_OF_MEMORY (host memory for the list of copies) or GG_ERROR_CUDA (waiting for the
 * device failed; both: nothing written), or GG_ERROR_PARTIAL (a copy to the device failed: opt's state is part old,
 * part new; load a state again before stepping). */
GG_API gg_status gg_optim_load_state(gg_optim *opt, const void *buffer, size_t bytes);

/* Waits for the device, then frees the optimizer's device memory and the optimizer. NULL is a no-op. Refused (nothing
 * destroyed, the message in gg_last_error) while a step it was added to (gg_step_add_optimizer) still exists:
 * destroy the step first (gg_ctx_destroy destroys steps before optimizers). */
GG_API void gg_optim_destroy(gg_optim *opt);

/* ---------------------------------------------------------------------------------------------------------------
 * Data parallelism (NCCL). With a communicator on the context, every graph made with sync_gradients reduces its
 * parameter gradients (dW, db, block 1's grad_gate) across the ranks inside the same CUDA graph: each gradient is
 * handed to a communication stream as soon as the GEMM or reduction that makes it has finished, in pieces of at
 * most bucket_bytes, overlapping the rest of the backward, and joined before the graph ends. Activation gradients
 * (dX) stay local. Step graphs reduce in buckets across layers instead (see "Step graphs", "Data parallelism").
 * The eager entry points never communicate.
 *
 * Built without NCCL (GG_WITH_NCCL=OFF) these functions return GG_ERROR_UNSUPPORTED; without hwloc,
 * gg_dist_bind_thread does. docs/distributed.md has the launch recipes and the rules below.
 *
 * Rules, enforced where the API can:
 *   - the communicator is ready (a warm-up all-reduce has run) before any graph is captured;
 *   - every rank makes the same graphs and calls them in the same order with the same bucket for each step;
 *     making a syncing graph is collective (from each rank's own thread or process, at the same time): every rank
 *     adopts rank 0's GEMM algorithms, so that no rank's autotuning leaves it with slower kernels than the others,
 *     and a rank that fails to make it (host memory, the device, its plans) makes it fail on every rank
 *     (GG_ERROR_PEER on the others) while keeping its own status; a call refused for its arguments enqueues nothing
 *     and takes no part (the others wait for it to the peer timeout). The ranks also compare a fingerprint of the
 *     graph (block, dims, precision, buckets, graph flags, op, sync, bucket_bytes, overlap, comm_sms, copy engines,
 *     the GEMM algorithms once agreed): a difference fails the call on every rank
 *     with GG_ERROR_INVALID_ARGUMENT naming the first differing field, this rank's value and the ranks' range (the
 *     communicator stays usable). Any other error from making a syncing graph (a CUDA or NCCL failure during that
 *     step, or ranks not joining within the peer timeout, which aborts the communicator) can leave the ranks
 *     disagreeing: treat it as fatal for the communicator on every rank (abort it, make a new one);
 *   - a syncing call that fails on one rank after its checks (a replay's capture, instantiation or launch; past
 *     the largest bucket, its plan or enqueue; gg_dist_reduce's collectives; an NCCL error in any of them) leaves
 *     this rank's collectives missing while the other ranks' call waits for them, and a later collective of this
 *     rank would pair with theirs, mixing two calls' gradients: gradgraph aborts the communicator then, keeping the
 *     call's status, and the message says so (gg_dist_comm returns NULL: make a new communicator). Refusals
 *     (GG_ERROR_INVALID_ARGUMENT, GG_ERROR_MISALIGNED, GG_ERROR_UNSUPPORTED) enqueue nothing and abort nothing, and
 *     nothing is aborted while the call's work sits in a capture of yours still open (see gg_dist_reduce);
 *   - graphs that captured NCCL work must be destroyed before the communicator: gg_dist_detach refuses while
 *     such graphs exist, and gg_ctx_destroy destroys graphs first (ncclCommDestroy would block forever otherwise);
 *   - NCCL_NVLS_ENABLE is set to 0 in the process when unset (NVLink multicast stays off);
 *   - no hangs: nothing gradgraph does waits on the other ranks without a deadline, each in whole seconds from an
 *     environment variable read when it applies (1 to 86400; default 300): making a communicator
 *     (GG_DIST_INIT_TIMEOUT_S; the communicators gradgraph makes are non-blocking), a collective step gradgraph
 *     waits for itself, the end of a non-blocking NCCL call and teardown (GG_DIST_PEER_TIMEOUT_S), and a replay of
 *     a syncing graph or a collective gradgraph enqueues outside a graph (gg_dist_reduce's, a syncing graph's call
 *     past its largest bucket: GG_DIST_STEP_TIMEOUT_S). A watchdog thread per communicator (started with it, stopped
 *     at gg_dist_detach / gg_ctx_destroy) aborts the communicator (ncclCommAbort, which ends NCCL's kernels still
 *     waiting, so a cudaStreamSynchronize of yours returns) when such work has not finished by its deadline (counted
 *     from when it can run: its launch, or for one queued behind earlier ones the end of the one before) or NCCL
 *     reports an asynchronous error; gg_dist_check (also called by every graph run) does the latter on demand. At
 *     most 16 of them are in flight per communicator: a further one waits for the oldest to finish before it is
 *     enqueued (the host stays at most 16 steps ahead), and that wait ends with the abort too.
 *     Afterwards every call that needs the communicator returns GG_ERROR_NCCL saying what happened (the deadline,
 *     NCCL's error, gg_dist_abort) and on which rank; eager calls and local graphs keep working. A wait on the
 *     other ranks that lasts logs a WARN line through the context's log callback after 10 s (half the limit, when
 *     that is shorter) and every 30 s after, naming the call, the rank, what it waits for and when it gives up. The
 *     watchdog may call the log callback from its own thread (those lines for a replay, one ERROR line when it
 *     aborts).
 * ------------------------------------------------------------------------------------------------------------- */
typedef enum gg_reduce_op { GG_REDUCE_AVERAGE = 0, GG_REDUCE_SUM = 1 } gg_reduce_op;

typedef enum gg_grad_sync {
    GG_SYNC_ALL_REDUCE = 0,    /* every rank gets the whole reduced gradient */
    GG_SYNC_REDUCE_SCATTER = 1 /* rank r gets elements [r n/W, (r+1) n/W) of each gradient (n divisible by W);
                                  the rest of its buffer is left undefined (sharded optimizers) */
} gg_grad_sync;

#define GG_DIST_CONFIG_VERSION 2

typedef struct gg_dist_config {
    size_t struct_size;  /* sizeof(gg_dist_config) */
    uint32_t version;    /* GG_DIST_CONFIG_VERSION */
    gg_reduce_op op;     /* default GG_REDUCE_AVERAGE (data-parallel mean of the ranks' gradients) */
    gg_grad_sync sync;   /* default GG_SYNC_ALL_REDUCE */
    size_t bucket_bytes; /* the largest piece of a gradient reduced in one NCCL call; default 25 MiB, 4096 to 2^40;
                            a graph or step whose gradients take more than 65536 pieces is refused */
    int overlap;         /* default 1: reduce each gradient as soon as it is final; 0: all after the backward */
    int bind_cpus;       /* default 1: gg_dist_attach / _init_env / _init_mpi bind the calling thread near the GPU */
    int comm_sms;        /* SMs that a gradient-syncing graph's GEMMs running beside a reduction (blocks 2/3:
                            dX; block 4: both) leave free for NCCL's kernels, at most half the GPU's SMs; the
                            communicators gradgraph makes run NCCL on that many CTAs (minCTAs = maxCTAs, which
                            NCCL caps at its channel limit; make an attached one likewise, e.g. NCCL_MIN_CTAS =
                            NCCL_MAX_CTAS). 0: no SMs left
                            free, NCCL's own CTA count. Ignored with overlap off. Default GG_DIST_COMM_SMS_DEFAULT
                            = 8, which hides most of the reduction of long backward passes; short backward passes
                            with large gradients want more (measurements: docs/distributed.md) */
    int copy_engines;    /* 0 (default) or 1: parameter gradients of 1 MiB or more that live in gg_dist_alloc buffers
                            are all-reduced in place through NCCL's copy-engine collectives (no NCCL CTAs), bitwise
                            equal on every rank. With two ranks the FFN blocks split each weight gradient's GEMM in
                            halves: a rank computes the peer's half first and sends it (an all-gather), then its own
                            half with the peer's partial added in the GEMM's epilogue, then all-gathers the result;
                            no adding kernel, every GEMM on all SMs (needs half of each gradient within one piece,
                            bucket_bytes; accumulating calls add the halves and use NCCL's all-reduce). Otherwise,
                            per piece: an all-to-all, gradgraph's adding kernel (fp32 sums in rank order, then
                            x 1/W for the mean) and an all-gather. Other buffers, and
                            reduce-scatter, keep NCCL's collectives (a WARN says so when a split plan's gradient is
                            not in a gg_dist_alloc buffer). Needs NCCL 2.28+ and a communicator gradgraph makes
                            (GG_ERROR_UNSUPPORTED otherwise); where NCCL makes no symmetric window (GPUs without
                            copy-engine paths between them) it logs a WARN and everything stays on SMs. Costs
                            2 x bucket_bytes of device memory per context. It pays where the reduction is large
                            against the backward (block 2); where the backward hides the reduction anyway (block 3),
                            SMs are as fast or faster (measurements: docs/distributed.md) */
} gg_dist_config;

#define GG_DIST_COMM_SMS_DEFAULT 8

#define GG_DIST_CONFIG_INIT                                                                                        \
    { sizeof(gg_dist_config), GG_DIST_CONFIG_VERSION, GG_REDUCE_AVERAGE, GG_SYNC_ALL_REDUCE, (size_t)25 << 20, 1, 1,  \
      GG_DIST_COMM_SMS_DEFAULT, 0 }

/* Uses a communicator the caller made (an ncclComm_t, passed as void*) on ctx's device. The caller keeps owning it
 * and destroys it after gg_dist_detach / gg_ctx_destroy — unless gradgraph returned GG_ERROR_NCCL (an asynchronous
 * NCCL error, a failed warm-up, or a warm-up the other ranks did not join within GG_DIST_PEER_TIMEOUT_S seconds,
 * default 300; on a communicator never used before, NCCL itself may instead wait for them inside its first
 * collective): then it has aborted the communicator (so that no rank hangs), which frees it, and the message says
 * so. A communicator NCCL cannot query (ncclCommCuDevice and the like fail) is refused as GG_ERROR_INVALID_ARGUMENT
 * and left alone. Runs the warm-up
 * all-reduce, so every rank must call this at the same time. Make the communicator after gg_ctx_create, or set
 * NCCL_NVLS_ENABLE yourself: gradgraph sets it to 0 when unset, and NCCL reads it when a communicator is made.
 * config NULL: GG_DIST_CONFIG_INIT. */
GG_API gg_status gg_dist_attach(gg_ctx *ctx, void *nccl_comm, const gg_dist_config *config);

/* One process per GPU: rank and world size from the environment (RANK, WORLD_SIZE; or OMPI_COMM_WORLD_RANK/_SIZE,
 * or SLURM_PROCID/SLURM_NTASKS; one launcher's pair, never mixed). Rank 0 writes NCCL's unique id to id_path (a
 * file on a path every rank can read; rank 0 removes it once the communicator exists or the init failed; a killed
 * launch leaves it, and the next launch's ranks could read that stale id before its rank 0 writes a new one: use a
 * path per launch, e.g. with the job's id in it, or remove the file first), the others wait for it
 * (within GG_DIST_INIT_TIMEOUT_S). id_path NULL: the id is broadcast over MPI's world communicator instead
 * (GG_WITH_MPI builds; MPI initialized by the caller; its ranks must be the environment's). ctx must be on the GPU
 * of the process's node-local rank (the caller picks it, e.g. config->device = LOCAL_RANK). gradgraph owns the
 * communicator it makes. */
GG_API gg_status gg_dist_init_env(gg_ctx *ctx, const char *id_path, const gg_dist_config *config);

/* One process per GPU under MPI (builds with GG_WITH_MPI): rank and world size are those of *mpi_comm (mpi_comm
 * points at an MPI_Comm; NULL: MPI_COMM_WORLD); rank 0 makes NCCL's unique id and broadcasts it over that
 * communicator. The caller initializes and finalizes MPI (MPI_Init before, MPI_Finalize after gg_ctx_destroy) and
 * puts ctx on the GPU of its node-local rank. Every rank of the communicator must call this at the same time.
 * A rank that refuses its own arguments (or is refused before them: ctx NULL, a CUDA error pending; not a context in
 * use by another thread, which may be in this very broadcast) still takes part in the broadcast: when rank 0 refuses, every other rank
 * returns GG_ERROR_PEER at once; when another rank refuses, the rest give up at GG_DIST_INIT_TIMEOUT_S.
 * gradgraph owns the NCCL communicator it makes. Built without MPI (or NCCL): GG_ERROR_UNSUPPORTED. */
GG_API gg_status gg_dist_init_mpi(gg_ctx *ctx, const void *mpi_comm, const gg_dist_config *config);

/* One process, one context per GPU (ctxs[i] on its own device, rank i; count <= 64): makes the communicators together
 * (ncclCommInitAll) and runs the warm-up. Afterwards use each context from its own thread, and call
 * gg_dist_bind_thread from that thread. gradgraph owns these communicators. They share one GG_DIST_INIT_TIMEOUT_S,
 * counted from the start of the call's NCCL group: when one is late, the call gives up then, not a deadline after
 * the one made before it. */
GG_API gg_status gg_dist_init_threads(gg_ctx *const *ctxs, int count, const gg_dist_config *config);

/* Removes the communicator from ctx (destroying it when gradgraph made it). Refused with GG_ERROR_INVALID_ARGUMENT
 * while graphs that captured NCCL work exist: destroy them first. No-op without a communicator. Never waits
 * forever: the watchdog is stopped, the communication stream drained and a communicator gradgraph made finalized
 * (ncclCommFinalize, non-blocking) each within GG_DIST_PEER_TIMEOUT_S; past it, or when NCCL fails there, the
 * communicator is aborted instead and GG_ERROR_NCCL says so: the context has no communicator either way (an
 * attached one was freed by the abort: do not destroy it). gg_ctx_destroy does the same, and logs a WARN. */
GG_API gg_status gg_dist_detach(gg_ctx *ctx);

/* Aborts ctx's communicator now, from any thread (a thread that handles signals with sigwait, your own watchdog;
 * not from inside a signal handler): ncclCommAbort, which ends NCCL's kernels still running or waiting on this
 * rank, so every wait on them returns. If the owner thread is inside a gradgraph call that uses the communicator,
 * the abort waits for that call to stop using it (its waits give up at once; a capture finishes, at CPU speed).
 * Afterwards the context is as after an asynchronous NCCL error: every call that needs the communicator returns
 * GG_ERROR_NCCL ("gg_dist_abort was called"), gg_dist_comm returns NULL, eager calls and local graphs work, and to
 * go on: destroy the syncing graphs, gg_dist_detach, then make a new communicator. An attached communicator is
 * freed by the abort: do not destroy it. The other ranks are not told: their own deadlines or NCCL's errors end
 * their waits. May come while the owner thread attaches, makes or detaches the communicator: an abort during
 * gg_dist_attach / _init_* fails that call with GG_ERROR_NCCL (the communicator aborted, an attached one too), an
 * abort before the communicator exists is kept for its warm-up, and one during gg_dist_detach ends its waits (the
 * detach returns GG_ERROR_NCCL saying the abort interrupted it). Must not race with gg_ctx_destroy of the same
 * context (the context itself is freed). Returns GG_SUCCESS (also without a communicator, or once it is aborted), GG_ERROR_INVALID_ARGUMENT for ctx NULL (message in
 * gg_last_error(NULL) of the calling thread: the context's message belongs to its owner thread). */
GG_API gg_status gg_dist_abort(gg_ctx *ctx);

/* Polls NCCL's asynchronous error state (every run of a syncing graph does too). On an error: aborts the
 * communicator (no rank hangs on it; an attached one is freed by the abort: do not destroy it) and returns
 * GG_ERROR_NCCL, as do later runs of syncing graphs; once the communicator was aborted (an error, the watchdog,
 * gg_dist_abort) it returns GG_ERROR_NCCL saying why. To go on: destroy those graphs, gg_dist_detach, then attach or
 * make a new communicator; eager calls and local graphs keep working meanwhile. Like every call on the context, from
 * one thread at a time (another thread is refused: gg_dist_abort is the call for other threads). */
GG_API gg_status gg_dist_check(gg_ctx *ctx);

/* Reduces count elements at data (fp32; bf16 when bf16 is nonzero) across the ranks exactly as syncing graphs
 * reduce their parameter gradients (the context's op, sync, bucket pieces; with copy_engines = 1 and data of 1 MiB
 * or more inside a gg_dist_alloc buffer, in place through the copy engines), enqueued on stream, which may be
 * capturing a CUDA graph: for gradients gradgraph does not compute (an embedding's, your own layer's), or to time
 * the reduction alone (examples/ddp_scaling). Collective: every rank calls it with the same count, on the same kind
 * of buffer at the same offset (all from gg_dist_alloc, or none: else the ranks issue different collectives), in
 * the same order relative to graph replays and other collectives. It shares the context's staging with its
 * syncing graphs: keep them in one stream order. A graph that captured it holds NCCL work: destroy it before
 * gg_dist_detach / gg_ctx_destroy. Reduce-scatter needs count divisible by the number of ranks. Argument errors
 * enqueue nothing; a failure after them (its collectives' NCCL errors, a CUDA error between the copy engines'
 * collectives) leaves the ranks out of step and aborts the communicator, the message saying so, except on a stream
 * whose capture is still open (NCCL's abort would free what the capture holds): then do not launch that graph and abort
 * the communicator yourself (gg_dist_abort) once the capture has ended. data must be device (or managed) memory: host
 * memory is refused, one query per new pointer, and so is a count whose last byte is not device memory (a count larger
 * than the buffer, where it runs past every allocation). Refused inside a step graph's callback: the step's graph would
 * hold a collective it does not account for (gg_step_add_reduce reduces a buffer inside the step). */
GG_API gg_status gg_dist_reduce(gg_ctx *ctx, void *data, size_t count, int bf16, gg_stream stream);

/* Device memory for parameter gradients that syncing graphs (and gg_dist_reduce) all-reduce in place through the copy
 * engines (gg_dist_config.copy_engines = 1): NCCL memory registered as a symmetric window on ctx's communicator. With
 * copy engines off it is plain cudaMalloc memory, so the same code runs with them on or off (ctx needs a communicator
 * either way; GG_ERROR_UNSUPPORTED in builds without NCCL). Collective, like making a syncing graph: every rank
 * allocates the same sizes in the same order, each from its own thread or process; with copy engines on the ranks agree
 * first, so one rank's failure fails the call on all of them (GG_ERROR_PEER on the others) instead of leaving them
 * waiting (off, nothing collective happens: each rank's call is its own). Free with gg_dist_free (collective too; NULL
 * is a no-op) before gg_dist_detach / gg_ctx_destroy, which free what is left (the pointers are then invalid). With
 * copy engines on, a free makes every graph and step of the context capture again at its next run (a graph captured
 * on a window exchanges its gradients there in place; memory later allocated at the same address is no window). */
GG_API gg_status gg_dist_alloc(gg_ctx *ctx, size_t bytes, void **out);
GG_API gg_status gg_dist_free(gg_ctx *ctx, void *ptr);

/* This rank and the number of ranks; -1 and 0 without a communicator. */
GG_API int gg_dist_rank(const gg_ctx *ctx);
GG_API int gg_dist_size(const gg_ctx *ctx);

/* ctx's NCCL communicator (an ncclComm_t), or NULL without one (or once gradgraph aborted it after an error): for
 * the caller's own collectives on its own streams — a loss or metric all-reduce, a bare all-reduce to time. When
 * gradgraph made it, it stays gradgraph's: never destroy or abort it. Valid until gg_dist_detach / gg_ctx_destroy.
 * NCCL's rule holds for these calls too: every rank issues the same collectives in the same order, counting the ones
 * inside graph replays, and none while another thread of the same rank issues some. The watchdog (or gg_dist_abort)
 * may abort the communicator at any time, which frees it: call gg_dist_check right before using it, and keep your
 * own collectives on it short (their ncclInProgress, on a communicator gradgraph made, is yours to wait out). */
GG_API void *gg_dist_comm(const gg_ctx *ctx);

/* Binds the calling thread to the CPUs near ctx's GPU (hwloc), within the CPUs the process may use. Leaves the
 * binding alone, and logs why, when the GPU's locality is unknown or every allowed CPU is local to it. */
GG_API gg_status gg_dist_bind_thread(gg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* GRADGRAPH_H */
