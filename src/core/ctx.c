/* ctx.c - the context: config validation, device resources (cuBLASLt handle, side stream, events, workspaces),
 * the scratch arena and teardown. */
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExtCudaRt.h>

#include "kernels/gg_kernels.h"
#include "internal.h"
#include "log_env.h"
#include "plan.h"
#include "tune_cache.h"

/* Checks a caller's config without touching CUDA, so that a bad config fails the same way on any machine. */
static gg_status validate_config(const gg_config *c) {
    GG_TRY(gg_check_config_version(NULL, "gg_ctx_create", c->struct_size, sizeof(gg_config), c->version,
                                   GG_CONFIG_VERSION, "GG_CONFIG_INIT"));
    if (c->device < 0)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_ctx_create: config->device = %d is negative",
                       c->device);
    if (c->precision == GG_PRECISION_BF16)
        return gg_fail(NULL, GG_ERROR_UNSUPPORTED,
                       "gg_ctx_create: config->precision = bf16: bf16 operands fail the tolerance of the fp32 "
                       "blocks; use GG_PRECISION_FP32, GG_PRECISION_TF32 or GG_PRECISION_FP16");
    if ((int)c->precision < (int)GG_PRECISION_DEFAULT || (int)c->precision > (int)GG_PRECISION_FP16)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT,
                       "gg_ctx_create: config->precision = %d is not a gg_precision value", (int)c->precision);
    if ((int)c->log_level < (int)GG_LOG_ERROR || (int)c->log_level > (int)GG_LOG_DEBUG)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT,
                       "gg_ctx_create: config->log_level = %d is not a gg_log_level value", (int)c->log_level);
    if ((int)c->overlap < (int)GG_OVERLAP_AUTO || (int)c->overlap > (int)GG_OVERLAP_NEVER)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_ctx_create: config->overlap = %d is not a gg_overlap value",
                       (int)c->overlap);
    return GG_SUCCESS;
}

gg_status gg_device_enter(gg_ctx *ctx, const char *fn, int *saved_device) {
    GG_TRY(gg_ctx_claim(ctx, fn));
    const char *what = "cudaGetDevice";
    cudaError_t err = cudaGetDevice(saved_device);
    if (err == cudaSuccess && *saved_device != ctx->config.device) {
        what = "cudaSetDevice";
        err = cudaSetDevice(ctx->config.device);
    }
    if (err == cudaSuccess) return GG_SUCCESS;
    const gg_status status = gg_fail_cuda(ctx, err, what); /* still claimed: the message names fn */
    gg_ctx_release(ctx);
    return status;
}

/* A launch into another device's stream fails (cudaErrorInvalidResourceHandle), an eager call's after part of its
 * work was enqueued: the stream's device is asked first. Never a stream being captured (the caller knows): the query
 * invalidates its capture (CUDA 13.0, measured: tests/gpu/test_graphs_gpu.c); and asked in relaxed capture mode, so
 * that another stream's capture in global mode does not take it for an unsafe call. A stream the runtime cannot say
 * is let through: its first launch reports what is wrong. */
static gg_status check_stream_device(gg_ctx *ctx, const char *fn, cudaStream_t stream) {
#if CUDART_VERSION >= 12080 /* cudaStreamGetDevice */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    int device = -1;
    const cudaError_t e = cudaStreamGetDevice(stream, &device);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) {
        gg_clear_own_cuda_error(ctx);
        return GG_SUCCESS;
    }
    if (device != ctx->config.device)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: stream (%p) is a stream of device %d, and the context is on device %d: enqueue on a stream "
                       "of the context's device; nothing was done",
                       fn, (void *)stream, device, ctx->config.device);
#else
    (void)ctx, (void)fn, (void)stream;
#endif
    return GG_SUCCESS;
}

/* What gg_device_enter_stream checks once the device is current; *capturing: the stream's capture status. */
static gg_status check_stream(gg_ctx *ctx, const char *fn, cudaStream_t stream,
                              enum cudaStreamCaptureStatus *capturing) {
    /* Inside a step's callback, first the callback's own failed launch, pending: the step's claim of ctx came before
     * it, so the outermost claim did not see it (the step's capture fails with this call). */
    if (gg_in_step_callback()) GG_TRY(gg_refuse_pending_cuda_error(ctx, fn));
    GG_CUDA_TRY(ctx, cudaStreamIsCapturing(stream, capturing));
    if (*capturing == cudaStreamCaptureStatusNone) GG_TRY(check_stream_device(ctx, fn, stream));
    if (gg_in_step_callback() && *capturing != cudaStreamCaptureStatusActive)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: called inside a step graph's callback on a stream that is not part of the step's capture: "
                       "enqueue on the stream the callback is handed, or on one forked from it (an event recorded "
                       "there and waited for)",
                       fn);
    return GG_SUCCESS;
}

gg_status gg_device_enter_stream(gg_ctx *ctx, const char *fn, cudaStream_t stream, int *saved_device,
                                 enum cudaStreamCaptureStatus *capturing) {
    GG_TRY(gg_device_enter(ctx, fn, saved_device));
    enum cudaStreamCaptureStatus status_of_stream = cudaStreamCaptureStatusNone;
    const gg_status checked = check_stream(ctx, fn, stream, &status_of_stream);
    if (checked != GG_SUCCESS) {
        gg_device_leave(ctx, *saved_device);
        return checked;
    }
    if (capturing) *capturing = status_of_stream;
    return GG_SUCCESS;
}

void gg_device_leave(gg_ctx *ctx, int saved_device) {
    (void)cudaSetDevice(saved_device);
    gg_ctx_release(ctx);
}

static void destroy_plan_entry(void *plan, void *user_data) { gg_block_plan_destroy((gg_block_plan *)plan, user_data); }

void gg_ctx_hook_add(gg_ctx *ctx, gg_ctx_hook *hook, gg_hook_order order) {
    gg_ctx_hook **at = &ctx->hooks; /* EARLY: at the front (newest first), LATE: at the end (oldest first) */
    if (order == GG_HOOK_LATE)
        while (*at) at = &(*at)->next;
    hook->next = *at;
    *at = hook;
}

void gg_ctx_hook_remove(gg_ctx *ctx, gg_ctx_hook *hook) {
    for (gg_ctx_hook **at = &ctx->hooks; *at; at = &(*at)->next)
        if (*at == hook) {
            *at = hook->next;
            hook->next = NULL;
            return;
        }
}

/* Releases whatever a (possibly half-made) context holds. */
static void release(gg_ctx *ctx) {
    while (ctx->hooks) { /* first what hangs off the context, in hook order (graphs before the communicator) */
        gg_ctx_hook *hook = ctx->hooks;
        ctx->hooks = hook->next;
        hook->next = NULL;
        hook->destroy(hook->obj);
    }
    if (ctx->side) (void)cudaStreamSynchronize(ctx->side);
    if (ctx->aux) (void)cudaStreamSynchronize(ctx->aux);
    gg_plan_cache_clear(&ctx->plans);
    for (int i = 0; i < GG_GEMM_STREAMS; ++i)
        if (ctx->workspace[i]) (void)cudaFree(ctx->workspace[i]);
    if (ctx->scratch) (void)cudaFree(ctx->scratch);
    if (ctx->counter) (void)cudaFree(ctx->counter);
    if (ctx->tanh_partials) (void)cudaFree(ctx->tanh_partials);
    if (ctx->ev_fork) (void)cudaEventDestroy(ctx->ev_fork);
    if (ctx->ev_join) (void)cudaEventDestroy(ctx->ev_join);
    if (ctx->ev_conv) (void)cudaEventDestroy(ctx->ev_conv);
    if (ctx->ev_aux) (void)cudaEventDestroy(ctx->ev_aux);
    if (ctx->ev_aux_join) (void)cudaEventDestroy(ctx->ev_aux_join);
    if (ctx->side) (void)cudaStreamDestroy(ctx->side);
    if (ctx->aux) (void)cudaStreamDestroy(ctx->aux);
    if (ctx->capture) (void)cudaStreamDestroy(ctx->capture);
    if (ctx->lt) (void)cublasLtDestroy(ctx->lt);
    if (ctx->tune) gg_tune_cache_close(ctx->tune);
    free(ctx->tune);
    ctx->tune = NULL;
    gg_clear_own_cuda_error(ctx);
}

/* Loads the autotune cache (the caller's path string is copied: the config keeps no pointer to it). */
static gg_status open_tune_cache(gg_ctx *ctx, const gg_config *config) {
    ctx->config.tune_cache_path = NULL;
    if (!config->autotune) return GG_SUCCESS;
    char buf[4096];
    const char *path = config->tune_cache_path ? config->tune_cache_path : gg_tune_cache_default_path(buf, sizeof buf);
    ctx->tune = malloc(sizeof *ctx->tune);
    if (!ctx->tune || gg_tune_cache_open(ctx->tune, path) != 0)
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "gg_ctx_create: out of host memory loading the autotune cache");
    if (ctx->tune->skipped) /* INFO: a file shared with another version of gradgraph always has some */
        gg_log(ctx, GG_LOG_INFO,
               "autotune cache %s: %zu lines this version does not read (another version's entries, or damaged "
               "lines) are kept as they are",
               ctx->tune->path, ctx->tune->skipped);
    gg_log(ctx, GG_LOG_INFO, "autotune cache: %s (%zu entries)", ctx->tune->path ? ctx->tune->path : "none",
           ctx->tune->count);
    return GG_SUCCESS;
}

/* A switch in the environment read at gg_ctx_create: unset or empty leaves *value 0 (0 given is a value, not "unset"),
 * else a whole number from lo to hi; `what` names the kind in the refusal. GG_GEMM_MAX_CLUSTER_CTAS: a CTA count from
 * 1 to 16; GG_AUTOTUNE_MARGIN: a percent from 0 to 100. */
static gg_status whole_from_env(const char *name, long lo, long hi, const char *what, int *value) {
    *value = 0;
    const char *text = getenv(name);
    if (!text || !*text) return GG_SUCCESS;
    char *end = NULL;
    const long n = strtol(text, &end, 10);
    if (*end || n < lo || n > hi)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_ctx_create: %s=\"%.32s\" is not %s from %ld to %ld", name,
                       text, what, lo, hi);
    *value = (int)n;
    return GG_SUCCESS;
}

gg_status gg_ctx_create(const gg_config *config, gg_ctx **out) {
    if (!out) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_ctx_create: out is NULL");
    *out = NULL;
    GG_TRY(gg_refuse_in_step_callback(NULL, "gg_ctx_create"));
    const gg_config defaults = GG_CONFIG_INIT;
    if (!config) config = &defaults;
    GG_TRY(validate_config(config));
    gg_config with_env = *config;
    GG_TRY(gg_log_env_apply(&with_env)); /* GG_LOG_LEVEL */
    config = &with_env;
    int cluster_limit = 0, tune_margin = 0;
    GG_TRY(whole_from_env("GG_GEMM_MAX_CLUSTER_CTAS", 1, 16, "a CTA count", &cluster_limit));
    GG_TRY(whole_from_env("GG_AUTOTUNE_MARGIN", 0, 100, "a whole percent", &tune_margin));
    gg_process_defaults(); /* before any communicator the caller may make after this */

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return gg_fail(NULL, GG_ERROR_NO_DEVICE, "gg_ctx_create: no CUDA device is visible (%s)",
                       err == cudaSuccess ? "device count is 0" : cudaGetErrorName(err));
    }
    if (config->device >= count)
        return gg_fail(NULL, GG_ERROR_NO_DEVICE, "gg_ctx_create: config->device = %d but only %d device(s) are visible",
                       config->device, count);
    /* the application's (see gg_ctx_claim); after the device count, whose failure (no driver, no device) the runtime
     * also holds as the thread's last error, and which is GG_ERROR_NO_DEVICE */
    GG_TRY(gg_refuse_pending_cuda_error(NULL, "gg_ctx_create"));

    gg_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return gg_fail(NULL, GG_ERROR_OUT_OF_MEMORY, "gg_ctx_create: out of host memory");
    const int made = pthread_mutex_init(&ctx->dist_publish, NULL);
    if (made != 0) {
        free(ctx);
        return gg_fail(NULL, GG_ERROR_OUT_OF_MEMORY, "gg_ctx_create: a mutex could not be made (error %d)", made);
    }
    ctx->config = *config;
    ctx->gemm_max_cluster_ctas = cluster_limit;
    ctx->tune_margin_percent = tune_margin;
    if (ctx->config.precision == GG_PRECISION_DEFAULT) ctx->config.precision = GG_PRECISION_FP32;
    gg_plan_cache_init(&ctx->plans, destroy_plan_entry, ctx);

    gg_status status = GG_SUCCESS;
    int saved = 0;
    GG_GOTO(gg_device_enter(ctx, "gg_ctx_create", &saved), status, fail_no_device);
    GG_CUDA_GOTO(ctx, cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, config->device),
                 status, fail);
    GG_CUDA_GOTO(ctx, cudaDeviceGetAttribute(&ctx->l2_bytes, cudaDevAttrL2CacheSize, config->device), status, fail);
#ifdef GG_BUILT_SM90A
    int cc_major = 0, cc_minor = 0;
    GG_CUDA_GOTO(ctx, cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, config->device), status,
                 fail);
    GG_CUDA_GOTO(ctx, cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, config->device), status,
                 fail);
    ctx->has_wgmma = cc_major == 9 && cc_minor == 0;
    /* GG_HOPPER_KERNELS=0 turns the sm_90a-only kernels off, so that an H100/H200 runs the path every other GPU
     * (a B200) takes: cuBLASLt and the portable kernels. */
    const char *hopper = getenv("GG_HOPPER_KERNELS");
    if (ctx->has_wgmma && hopper && strcmp(hopper, "0") == 0) {
        ctx->has_wgmma = 0;
        gg_log(ctx, GG_LOG_INFO, "GG_HOPPER_KERNELS=0: device %d runs without the sm_90a-only kernels",
               config->device);
    }
    _Static_assert(sizeof ctx->f32w_clusters / sizeof ctx->f32w_clusters[0] == GG_F32W_MAX_SPLIT + 1, "one per size");
    if (ctx->has_wgmma && gg_k_gemm_f32w_capacity(ctx->f32w_clusters) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: blocks 2/3 take their other few-token route */
        gg_log(ctx, GG_LOG_WARN, "gg_k_gemm_f32w cannot launch on device %d; few-token FFNs use TF32",
               config->device);
        ctx->has_wgmma = 0;
    }
#endif
    /* The side stream (the dW chain) gets the highest priority: its GEMM takes the SMs first and the caller's
     * stream's GEMM fills in as the first one drains, instead of both sharing the GPU for their whole length. */
    GG_CUDA_GOTO(ctx, cudaDeviceGetStreamPriorityRange(&ctx->priority_least, &ctx->priority_greatest), status, fail);
    GG_CUDA_GOTO(ctx, cudaStreamCreateWithPriority(&ctx->side, cudaStreamNonBlocking, ctx->priority_greatest), status,
                 fail);
    /* The third stream at the least priority: what runs there fills the SMs the two chains leave. */
    GG_CUDA_GOTO(ctx, cudaStreamCreateWithPriority(&ctx->aux, cudaStreamNonBlocking, ctx->priority_least), status,
                 fail);
    GG_CUDA_GOTO(ctx, cudaStreamCreateWithFlags(&ctx->capture, cudaStreamNonBlocking), status, fail);
    GG_CUDA_GOTO(ctx, cudaEventCreateWithFlags(&ctx->ev_fork, cudaEventDisableTiming), status, fail);
    GG_CUDA_GOTO(ctx, cudaEventCreateWithFlags(&ctx->ev_join, cudaEventDisableTiming), status, fail);
    GG_CUDA_GOTO(ctx, cudaEventCreateWithFlags(&ctx->ev_conv, cudaEventDisableTiming), status, fail);
    GG_CUDA_GOTO(ctx, cudaEventCreateWithFlags(&ctx->ev_aux, cudaEventDisableTiming), status, fail);
    GG_CUDA_GOTO(ctx, cudaEventCreateWithFlags(&ctx->ev_aux_join, cudaEventDisableTiming), status, fail);
    nvtxNameCudaStreamA(ctx->side, "gradgraph side (dW chain)");
    nvtxNameCudaStreamA(ctx->aux, "gradgraph aux");
    nvtxNameCudaStreamA(ctx->capture, "gradgraph capture");
    GG_CUBLAS_GOTO(ctx, cublasLtCreate(&ctx->lt), status, fail);
    if (config->gemm_workspace_bytes) {
        for (int i = 0; i < GG_GEMM_STREAMS; ++i) {
            GG_CUDA_GOTO(ctx, cudaMalloc(&ctx->workspace[i], config->gemm_workspace_bytes), status, fail);
            /* cuBLASLt's kernels may read workspace they have not written (initcheck reports it): zeros once, so
             * that no GEMM ever reads memory nothing wrote. */
            GG_CUDA_GOTO(ctx, cudaMemset(ctx->workspace[i], 0, config->gemm_workspace_bytes), status, fail);
            ctx->device_bytes += config->gemm_workspace_bytes;
        }
    }
    GG_CUDA_GOTO(ctx, cudaMalloc((void **)&ctx->counter, GG_COUNTER_WORDS * sizeof *ctx->counter), status, fail);
    GG_CUDA_GOTO(ctx, cudaMemset(ctx->counter, 0, GG_COUNTER_WORDS * sizeof *ctx->counter), status, fail);
    ctx->device_bytes += GG_COUNTER_WORDS * sizeof *ctx->counter;
    const size_t slots = (size_t)gg_k_tanh_gate_slots(ctx->sm_count) * sizeof *ctx->tanh_partials;
    GG_CUDA_GOTO(ctx, cudaMalloc((void **)&ctx->tanh_partials, slots), status, fail);
    GG_CUDA_GOTO(ctx, cudaMemset(ctx->tanh_partials, 0xff, slots), status, fail); /* "unwritten" */
    ctx->device_bytes += slots;
    /* cudaMemset runs on the legacy stream, asynchronously to the host: the counters' zeros and the slots' markers
     * must have landed before a kernel on the caller's (possibly non-blocking) stream reads them. */
    GG_CUDA_GOTO(ctx, cudaDeviceSynchronize(), status, fail);
    GG_GOTO(open_tune_cache(ctx, config), status, fail);
    gg_device_leave(ctx, saved);
    gg_log(ctx, GG_LOG_INFO, "gradgraph %s: context on device %d (%d SMs), %zu MiB of GEMM workspace",
           gg_version_string(), config->device, ctx->sm_count, ctx->device_bytes >> 20);
    *out = ctx;
    return GG_SUCCESS;

fail:
    gg_device_leave(ctx, saved);
fail_no_device:
    /* The context's message is the one to keep: it moves to the thread's buffer before the context goes. */
    gg_fail(NULL, status, "gg_ctx_create: %s", gg_after_entry(ctx->last_error, "gg_ctx_create"));
    release(ctx);
    (void)pthread_mutex_destroy(&ctx->dist_publish);
    free(ctx);
    return status;
}

void gg_ctx_destroy(gg_ctx *ctx) {
    if (!ctx) return;
    /* Never inside a step's callback (its graphs would go under the capture, and the capturing context with them),
     * nor while another thread is inside the context: nothing is destroyed (a leak, not a use after free), and the
     * refusal's message is in this thread's gg_last_error(NULL). */
    if (gg_ctx_claim_teardown(ctx, "gg_ctx_destroy") != GG_SUCCESS) return;
    int saved = 0;
    int entered = gg_device_enter(ctx, "gg_ctx_destroy", &saved) == GG_SUCCESS;
    release(ctx);
    if (entered) gg_device_leave(ctx, saved);
    (void)pthread_mutex_destroy(&ctx->dist_publish);
    free(ctx);
}

size_t gg_ctx_device_bytes(const gg_ctx *ctx) { return ctx ? ctx->device_bytes : 0; }

gg_status gg_ctx_reserve_scratch(gg_ctx *ctx, size_t bytes) {
    if (bytes <= ctx->scratch_bytes) return GG_SUCCESS;
    if (ctx->scratch) {
        /* Work already enqueued may still read the old arena: cudaFree waits for the device to be idle. */
        GG_CUDA_TRY(ctx, cudaFree(ctx->scratch));
        ctx->device_bytes -= ctx->scratch_bytes;
        ctx->scratch = NULL;
        ctx->scratch_bytes = 0;
        ctx->capture_generation++; /* graphs captured on the old arena must not replay, even if the malloc fails */
    }
    GG_CUDA_TRY(ctx, cudaMalloc(&ctx->scratch, bytes));
    ctx->scratch_bytes = bytes;
    ctx->capture_generation++;
    ctx->device_bytes += bytes;
    gg_log(ctx, GG_LOG_DEBUG, "scratch arena grown to %zu MiB", bytes >> 20);
    return GG_SUCCESS;
}
