/* errors.c - status names, the last-error message of a context (or of the thread), and the log callback. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The message of the last failed call that had no context (gg_ctx_create), per thread. */
static _Thread_local char g_thread_error[GG_MSG_BYTES];

/* The context whose step graph's callback this thread is running, NULL outside one: a gradgraph call there on any
 * context (the step's or another) belongs to the capture. */
static _Thread_local gg_ctx *g_step_callback_ctx;

gg_ctx *gg_step_callback_swap(gg_ctx *ctx) {
    gg_ctx *const outer = g_step_callback_ctx;
    g_step_callback_ctx = ctx;
    return outer;
}

int gg_in_step_callback(void) { return g_step_callback_ctx != NULL; }

gg_status gg_refuse_in_step_callback(gg_ctx *ctx, const char *fn) {
    if (!gg_in_step_callback()) return GG_SUCCESS;
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                   "%s: called inside a step graph's callback, while the step is being captured: nothing was done (a "
                   "callback may enqueue kernels, copies and gradgraph's eager calls; contexts, graphs, steps, "
                   "optimizers and communicators are not made, changed, run, waited for or destroyed there)",
                   fn);
}

const char *gg_status_string(gg_status status) {
    switch (status) {
    case GG_SUCCESS: return "GG_SUCCESS: no error";
    case GG_ERROR_INVALID_ARGUMENT: return "GG_ERROR_INVALID_ARGUMENT: invalid argument";
    case GG_ERROR_MISALIGNED: return "GG_ERROR_MISALIGNED: pointer not aligned";
    case GG_ERROR_UNSUPPORTED: return "GG_ERROR_UNSUPPORTED: not supported for this block";
    case GG_ERROR_VERSION: return "GG_ERROR_VERSION: config struct size or version mismatch";
    case GG_ERROR_OUT_OF_MEMORY: return "GG_ERROR_OUT_OF_MEMORY: out of memory";
    case GG_ERROR_NO_DEVICE: return "GG_ERROR_NO_DEVICE: no usable CUDA device";
    case GG_ERROR_CUDA: return "GG_ERROR_CUDA: CUDA runtime error";
    case GG_ERROR_CUBLAS: return "GG_ERROR_CUBLAS: cuBLASLt error";
    case GG_ERROR_INTERNAL: return "GG_ERROR_INTERNAL: internal error";
    case GG_ERROR_NCCL: return "GG_ERROR_NCCL: NCCL error";
    case GG_ERROR_PEER: return "GG_ERROR_PEER: another rank failed";
    case GG_ERROR_PARTIAL: return "GG_ERROR_PARTIAL: failed after enqueueing part of the work; outputs undefined";
    }
    return "unknown gg_status";
}

const char *gg_precision_string(gg_precision precision) {
    switch (precision) {
    case GG_PRECISION_DEFAULT: return "default";
    case GG_PRECISION_FP32: return "fp32";
    case GG_PRECISION_TF32: return "tf32";
    case GG_PRECISION_FP16: return "fp16";
    case GG_PRECISION_BF16: return "bf16";
    }
    return "unknown";
}

const char *gg_version_string(void) {
#define GG_STR2(x) #x
#define GG_STR(x) GG_STR2(x)
    return GG_STR(GG_VERSION_MAJOR) "." GG_STR(GG_VERSION_MINOR) "." GG_STR(GG_VERSION_PATCH);
}

const char *gg_last_error(const gg_ctx *ctx) { return ctx ? ctx->last_error : g_thread_error; }

/* Nonzero while this thread runs a log callback: gradgraph calls made from it are refused (gg_ctx_claim). */
static _Thread_local int g_in_log_callback;

int gg_in_log_callback(void) { return g_in_log_callback; }

static void log_message(const gg_ctx *ctx, gg_log_level level, const char *message) {
    if (!ctx || !ctx->config.log_fn || level > ctx->config.log_level) return;
    ++g_in_log_callback;
    ctx->config.log_fn(ctx->config.log_user_data, level, message);
    --g_in_log_callback;
}

void gg_log(const gg_ctx *ctx, gg_log_level level, const char *fmt, ...) {
    if (!ctx || !ctx->config.log_fn || level > ctx->config.log_level) return;
    char message[GG_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    log_message(ctx, level, message);
}

/* Inside a step's callback (a call on any context from the callback's thread): the work the callback meant to capture
 * is incomplete, so the step's run fails too, with the first failure's status and message. */
static void fail_step_capture(gg_status status, const char *message) {
    gg_ctx *const capturing = g_step_callback_ctx;
    if (capturing && capturing->callback_failure == GG_SUCCESS) {
        capturing->callback_failure = status;
        memcpy(capturing->callback_message, message, GG_MSG_BYTES);
    }
}

gg_status gg_fail(gg_ctx *ctx, gg_status status, const char *fmt, ...) {
    /* A call refused before it claimed ctx (its arguments checked first) while another thread is inside ctx: the
     * message is this thread's, as the refusal of the claim itself is; the other thread's stays whole. */
    if (ctx && gg_ctx_claimed_elsewhere(ctx)) ctx = NULL;
    char *buffer = ctx ? ctx->last_error : g_thread_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buffer, GG_MSG_BYTES, fmt, ap);
    va_end(ap);
    /* an attempt with a fallback: its caller decides whether this was a failure (gg_tentative_end) */
    const int tentative = ctx && ctx->tentative > 0;
    if (!tentative) fail_step_capture(status, buffer);
    log_message(ctx, tentative ? GG_LOG_DEBUG : GG_LOG_ERROR, buffer);
    return status;
}

void gg_tentative_begin(gg_ctx *ctx, char saved[GG_MSG_BYTES]) {
    memcpy(saved, ctx->last_error, GG_MSG_BYTES);
    ++ctx->tentative;
}

int gg_tentative_end(gg_ctx *ctx, const char saved[GG_MSG_BYTES], gg_status status, gg_status fallback,
                     const char *what) {
    --ctx->tentative;
    if (status == GG_SUCCESS) return 0;
    if (status != fallback) { /* a real failure: as gg_fail would have recorded and logged it */
        fail_step_capture(status, ctx->last_error);
        log_message(ctx, GG_LOG_ERROR, ctx->last_error);
        return 0;
    }
    if (what) gg_log(ctx, GG_LOG_INFO, "%s: %s", what, ctx->last_error);
    memcpy(ctx->last_error, saved, GG_MSG_BYTES);
    return 1;
}

void gg_failure_save(const gg_ctx *ctx, gg_status status, char saved[GG_MSG_BYTES]) {
    saved[0] = '\0';
    if (status != GG_SUCCESS) memcpy(saved, ctx->last_error, GG_MSG_BYTES);
}

void gg_failure_restore(gg_ctx *ctx, const char saved[GG_MSG_BYTES]) {
    if (saved[0]) memcpy(ctx->last_error, saved, GG_MSG_BYTES);
}

const char *gg_after_entry(const char *msg, const char *fn) {
    if (!fn) return msg;
    const size_t n = strlen(fn);
    return strncmp(msg, fn, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

gg_status gg_fail_call(gg_ctx *ctx, gg_status status, const char *what, const char *name, const char *text) {
    const char *entry = ctx ? gg_ctx_entry(ctx) : NULL;
    if (entry && strstr(what, entry)) entry = NULL; /* what names it already */
    return gg_fail(ctx, status, "%s%s%s failed: %s%s%s%s", entry ? entry : "", entry ? ": " : "", what, name,
                   text && *text ? " (" : "", text ? text : "", text && *text ? ")" : "");
}

gg_status gg_fail_cuda(gg_ctx *ctx, cudaError_t err, const char *what) {
    (void)cudaGetLastError(); /* clear the non-sticky error so the next call starts clean */
    gg_status status = GG_ERROR_CUDA;
    if (err == cudaErrorMemoryAllocation) status = GG_ERROR_OUT_OF_MEMORY;
    if (err == cudaErrorNoDevice || err == cudaErrorInvalidDevice || err == cudaErrorInsufficientDriver)
        status = GG_ERROR_NO_DEVICE;
    return gg_fail_call(ctx, status, what, cudaGetErrorName(err), cudaGetErrorString(err));
}

gg_status gg_fail_cublas(gg_ctx *ctx, cublasStatus_t st, const char *what) {
    const gg_status status = st == CUBLAS_STATUS_ALLOC_FAILED ? GG_ERROR_OUT_OF_MEMORY : GG_ERROR_CUBLAS;
    return gg_fail_call(ctx, status, what, cublasLtGetStatusName(st), cublasLtGetStatusString(st));
}

/* The function a call's source text calls: "cudaMemcpyAsync(dst, src, ...)" -> "cudaMemcpyAsync". */
static const char *called_function(const char *call_text, char *name, size_t size) {
    while (*call_text == ' ') ++call_text;
    snprintf(name, size, "%.*s", (int)strcspn(call_text, "( "), call_text);
    return name;
}

gg_status gg_fail_cuda_call(gg_ctx *ctx, cudaError_t err, const char *call_text) {
    char name[96];
    return gg_fail_cuda(ctx, err, called_function(call_text, name, sizeof name));
}

gg_status gg_fail_cublas_call(gg_ctx *ctx, cublasStatus_t st, const char *call_text) {
    char name[96];
    return gg_fail_cublas(ctx, st, called_function(call_text, name, sizeof name));
}

gg_status gg_check_config_version(gg_ctx *ctx, const char *fn, size_t struct_size, size_t expected_size,
                                  uint32_t version, uint32_t expected_version, const char *initializer) {
    if (struct_size != expected_size)
        return gg_fail(ctx, GG_ERROR_VERSION,
                       "%s: config->struct_size = %zu, this library expects %zu (initialize the config with %s and "
                       "build against this library's gradgraph.h)",
                       fn, struct_size, expected_size, initializer);
    if (version != expected_version)
        return gg_fail(ctx, GG_ERROR_VERSION, "%s: config->version = %u, this library expects %u (%s)", fn,
                       (unsigned)version, (unsigned)expected_version, initializer);
    return GG_SUCCESS;
}
