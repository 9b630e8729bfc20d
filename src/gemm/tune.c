/* tune.c - autotune of one GEMM's algorithm (see tune.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/gg_kernels.h"
#include "tune.h"
#include "tune_cache.h"

/* A GEMM planned with an SM target runs beside memory-bound work on the SMs it leaves (block 4's chain, the FFN
 * blocks' conversions, NCCL's kernels), and that changes which algorithm is fastest (two of block 4's dW candidates
 * equally fast alone differ by half beside its chain). Such GEMMs are timed beside a
 * neighbour: fp32 -> fp16 conversions on exactly those SMs (one CTA of 1024 threads each), passes over a buffer
 * larger than L2, queued to outlast the timed runs. */
#define NEIGHBOUR_ELEMS ((size_t)32 << 20) /* 128 MiB read, 64 MiB written per pass */
#define NEIGHBOUR_MAX_PASSES 256

/* The GPU, cuBLASLt and driver part of every key, made once per context. */
static const char *device_part(gg_ctx *ctx) {
    if (ctx->tune_device[0]) return ctx->tune_device;
    struct cudaDeviceProp prop;
    int driver = 0;
    if (cudaGetDeviceProperties(&prop, ctx->config.device) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(prop.name, sizeof prop.name, "unknown");
        prop.major = prop.minor = 0;
    }
    (void)cudaDriverGetVersion(&driver);
    char name[64]; /* a GPU's name is short; the key must fit GG_TUNE_KEY_BYTES */
    snprintf(name, sizeof name, "%.63s", prop.name);
    snprintf(ctx->tune_device, sizeof ctx->tune_device, "%s|sm%d%d|lt%zu|drv%d", name, prop.major, prop.minor,
             cublasLtGetVersion(), driver);
    for (char *p = ctx->tune_device; *p; ++p)
        if (*p == ' ' || *p == '\t') *p = '_';
    return ctx->tune_device;
}

/* The SMs a neighbour runs on while s is timed (0: s is timed alone). */
static int neighbour_ctas(const gg_ctx *ctx, const gg_gemm_shape *s) {
    return s->sm_count_target > 0 && s->sm_count_target < ctx->sm_count ? ctx->sm_count - s->sm_count_target : 0;
}

/* "ws<bytes>": the workspace the choice was made within (gg_matmul_workspace_limit: the context's, less a split
 * GEMM's fp32 sum, so that a split part and a whole GEMM of the same shape keep choices of their own). "sms<target>nb":
 * chosen beside a neighbour (keys without the suffix were timed alone: not reused). */
static void problem_key(gg_ctx *ctx, const gg_gemm_shape *s, const gg_matmul *mm, char *key, size_t size) {
    char epilogue[16] = ""; /* "ep<cublasLtEpilogue_t>": a fused epilogue (keys without one have none) */
    if (s->epilogue) snprintf(epilogue, sizeof epilogue, "|ep%d", s->epilogue);
    /* "cl<CTAs>": chosen among the algorithms GG_GEMM_MAX_CLUSTER_CTAS leaves (keys without it had them all) */
    char clusters[16] = "";
    if (ctx->gemm_max_cluster_ctas > 0) snprintf(clusters, sizeof clusters, "|cl%d", ctx->gemm_max_cluster_ctas);
    /* "mg<percent>": chosen under GG_AUTOTUNE_MARGIN (keys without it: the fastest candidate won) */
    char margin[16] = "";
    if (ctx->tune_margin_percent > 0) snprintf(margin, sizeof margin, "|mg%d", ctx->tune_margin_percent);
    snprintf(key, size, "%s|%c%c|%lldx%lldx%lld|ld%lld,%lld,%lld|ab%d|d%d|c%d|ws%zu|sms%d%s%s%s%s", device_part(ctx),
             s->trans_a ? 'T' : 'N', s->trans_b ? 'T' : 'N', (long long)s->m, (long long)s->n, (long long)s->k,
             (long long)s->lda, (long long)s->ldb, (long long)s->ldd, (int)s->ab_type, (int)s->d_type, (int)s->compute,
             gg_matmul_workspace_limit(ctx, mm), s->sm_count_target,
             neighbour_ctas(ctx, s) ? "nb" : "", epilogue, clusters, margin);
}

/* The cached choice, if cuBLASLt still accepts it for these descriptors, and its time. */
static int from_cache(gg_ctx *ctx, const gg_matmul *mm, const char *key, cublasLtMatmulHeuristicResult_t *chosen,
                      double *us) {
    const gg_tune_entry *e = gg_tune_cache_find(ctx->tune, key);
    if (!e) return 0;
    cublasLtMatmulAlgo_t algo;
    memcpy(&algo, e->algo, sizeof algo);
    size_t workspace = 0;
    if (!gg_matmul_algo_fits(ctx, mm, &algo, &workspace)) {
        gg_log(ctx, GG_LOG_WARN, "autotune cache entry %s is not valid here: tuning again", key);
        return 0;
    }
    memset(chosen, 0, sizeof *chosen);
    chosen->algo = algo;
    chosen->workspaceSize = workspace;
    *us = e->us;
    return 1;
}

typedef struct scratch {
    void *a, *b, *d;
    void *bias, *aux; /* a fused epilogue's operands (gg_gemm_shape.epilogue) */
    cudaEvent_t start, stop;
    /* the neighbour (n_ctas > 0): its buffers, stream and the measured time of one pass */
    int n_ctas;
    float *n_in;
    void *n_out;
    cudaStream_t n_stream;
    double pass_us;
} scratch;

static void scratch_free(scratch *x) {
    if (x->a) (void)cudaFree(x->a);
    if (x->b) (void)cudaFree(x->b);
    if (x->d) (void)cudaFree(x->d);
    if (x->bias) (void)cudaFree(x->bias);
    if (x->aux) (void)cudaFree(x->aux);
    if (x->n_in) (void)cudaFree(x->n_in);
    if (x->n_out) (void)cudaFree(x->n_out);
    if (x->n_stream) (void)cudaStreamDestroy(x->n_stream);
    if (x->start) (void)cudaEventDestroy(x->start);
    if (x->stop) (void)cudaEventDestroy(x->stop);
    (void)cudaGetLastError();
}

/* Operands of the problem's sizes, filled with small finite values (0x3c bytes: ~1.06 in fp16, ~0.012 in fp32).
 * The outputs (D, the epilogue's aux) are zeroed too: cuBLASLt stores its tiles by TMA, which compute-sanitizer's
 * initcheck does not track, and its split-k reduction then reads D (see mark_written in matmul.c); zeros keep the
 * timed runs from reading memory nothing wrote. */
static int scratch_alloc(const gg_gemm_shape *s, scratch *x, cudaStream_t stream) {
    const size_t ab = gg_gemm_type_bytes(s->ab_type);
    const size_t a_bytes = (size_t)s->lda * (size_t)(s->trans_a ? s->m : s->k) * ab;
    const size_t b_bytes = (size_t)s->ldb * (size_t)(s->trans_b ? s->k : s->n) * ab;
    const size_t d_bytes = (size_t)s->ldd * (size_t)s->n * gg_gemm_type_bytes(s->d_type);
    const size_t bias_bytes = (size_t)s->m * gg_gemm_type_bytes(s->d_type);
    if (s->epilogue &&
        (cudaMalloc(&x->bias, bias_bytes) != cudaSuccess || cudaMalloc(&x->aux, d_bytes) != cudaSuccess ||
         cudaMemsetAsync(x->bias, 0, bias_bytes, stream) != cudaSuccess ||
         cudaMemsetAsync(x->aux, 0, d_bytes, stream) != cudaSuccess))
        return 1;
    return cudaMalloc(&x->a, a_bytes) != cudaSuccess || cudaMalloc(&x->b, b_bytes) != cudaSuccess ||
           cudaMalloc(&x->d, d_bytes) != cudaSuccess || cudaMemsetAsync(x->a, 0x3c, a_bytes, stream) != cudaSuccess ||
           cudaMemsetAsync(x->b, 0x3c, b_bytes, stream) != cudaSuccess ||
           cudaMemsetAsync(x->d, 0, d_bytes, stream) != cudaSuccess ||
           cudaEventCreate(&x->start) != cudaSuccess || cudaEventCreate(&x->stop) != cudaSuccess;
}

/* Enqueues neighbour passes on x->n_stream for at least busy_us microseconds (nothing without a neighbour). */
static int enqueue_neighbour(gg_ctx *ctx, const scratch *x, double busy_us) {
    if (x->n_ctas <= 0) return 0;
    int passes = (int)ceil(busy_us / x->pass_us);
    passes = passes < 1 ? 1 : passes > NEIGHBOUR_MAX_PASSES ? NEIGHBOUR_MAX_PASSES : passes;
    for (int i = 0; i < passes; ++i)
        if (gg_k_f32_to_f16(x->n_in, x->n_out, NEIGHBOUR_ELEMS, ctx->sm_count, x->n_ctas, GG_PRIORITY_OF_STREAM,
                            NULL, x->n_stream) != cudaSuccess)
            return 1;
    return 0;
}

/* The neighbour's buffers and stream, and the time of one pass alone. */
static int neighbour_alloc(gg_ctx *ctx, int ctas, scratch *x) {
    x->n_ctas = ctas;
    x->pass_us = 1e9; /* one pass for the timing below */
    float ms = 0;
    if (cudaMalloc((void **)&x->n_in, NEIGHBOUR_ELEMS * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&x->n_out, NEIGHBOUR_ELEMS * 2) != cudaSuccess ||
        cudaStreamCreateWithFlags(&x->n_stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMemsetAsync(x->n_in, 0, NEIGHBOUR_ELEMS * sizeof(float), x->n_stream) != cudaSuccess ||
        enqueue_neighbour(ctx, x, 0) || cudaEventRecord(x->start, x->n_stream) != cudaSuccess ||
        enqueue_neighbour(ctx, x, 0) || cudaEventRecord(x->stop, x->n_stream) != cudaSuccess ||
        cudaEventSynchronize(x->stop) != cudaSuccess || cudaEventElapsedTime(&ms, x->start, x->stop) != cudaSuccess)
        return 1;
    x->pass_us = ms > 0 ? 1000.0 * (double)ms : 1.0;
    return 0;
}

/* Mean time of one candidate in microseconds (beside the neighbour, if any), or a negative value when it does not
 * run. */
static double time_candidate(gg_ctx *ctx, const gg_matmul *mm, const cublasLtMatmulHeuristicResult_t *c, scratch *x,
                             cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
#define RUN()                                                                                                      \
    cublasLtMatmul(ctx->lt, mm->op, &one, x->a, mm->a, x->b, mm->b, &zero, x->d, mm->d, x->d, mm->d, &c->algo,        \
                   ctx->workspace[0], c->workspaceSize, stream)
    /* A first run alone says how long one takes; then `reps` runs (beside the neighbour's passes), timed. */
    float ms = 0;
    if (RUN() != CUBLAS_STATUS_SUCCESS || cudaEventRecord(x->start, stream) != cudaSuccess ||
        RUN() != CUBLAS_STATUS_SUCCESS ||
        cudaEventRecord(x->stop, stream) != cudaSuccess || cudaEventSynchronize(x->stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, x->start, x->stop) != cudaSuccess)
        return -1.0;
    const int reps = ms > 1.0f ? 1 : 3;
    if (reps > 1 || x->n_ctas > 0) {
        /* the neighbour for three times the runs' time alone: they take longer beside it */
        if (enqueue_neighbour(ctx, x, 3000.0 * (double)ms * reps) || cudaEventRecord(x->start, stream) != cudaSuccess)
            return -1.0;
        for (int r = 0; r < reps; ++r)
            if (RUN() != CUBLAS_STATUS_SUCCESS) return -1.0;
        if (cudaEventRecord(x->stop, stream) != cudaSuccess || cudaEventSynchronize(x->stop) != cudaSuccess ||
            cudaEventElapsedTime(&ms, x->start, x->stop) != cudaSuccess || (x->n_stream &&
            cudaStreamSynchronize(x->n_stream) != cudaSuccess))
            return -1.0;
    }
#undef RUN
    return 1000.0 * (double)ms / reps;
}

/* Why the cache file was not written, naming the lock file when the lock is what failed (its owner or mode may
 * differ from the cache file's). */
static void log_unsaved(gg_ctx *ctx, int err) {
    const gg_tune_cache *c = ctx->tune;
    const int lock = c->failed_path && c->failed_path == c->lock_path;
    if (lock && err == EWOULDBLOCK)
        gg_log(ctx, GG_LOG_WARN, "autotune cache %s not written (another process held its lock %s too long): the "
               "choice lasts as long as the context", c->path, c->lock_path);
    else
        gg_log(ctx, GG_LOG_WARN, "autotune cache %s not written (%s%s%s): the choice lasts as long as the context",
               c->path, strerror(err), lock ? ", on its lock file " : "", lock ? c->lock_path : "");
}

/* Puts e into the cache and saves it (a failure leaves the choice for as long as the context, and says so). */
static void remember(gg_ctx *ctx, const gg_tune_entry *e) {
    if (gg_tune_cache_put(ctx->tune, e) != 0)
        gg_log(ctx, GG_LOG_WARN, "autotune cache %s: out of host memory for the entry: the choice lasts as long as "
               "the context", ctx->tune->path ? ctx->tune->path : "(memory)");
    else if (gg_tune_cache_save(ctx->tune) != 0)
        log_unsaved(ctx, errno);
}

gg_status gg_matmul_tune(gg_ctx *ctx, const gg_gemm_shape *s, const gg_matmul *mm,
                         const cublasLtMatmulHeuristicResult_t *candidates, int count,
                         cublasLtMatmulHeuristicResult_t *chosen, double *us) {
    *chosen = candidates[0];
    *us = 0;
    char key[GG_TUNE_KEY_BYTES];
    problem_key(ctx, s, mm, key, sizeof key);
    if (from_cache(ctx, mm, key, chosen, us)) return GG_SUCCESS;

    /* The workspace of the caller's stream may be in use by work enqueued earlier: wait for the device first. */
    scratch x = {0};
    cudaStream_t stream = ctx->side;
    const int ctas = neighbour_ctas(ctx, s);
    /* A fused epilogue runs with scratch operands too; a run sets its own pointers (gg_matmul_run_epilogue). */
    char why[GG_MSG_BYTES] = "";
    if (cudaDeviceSynchronize() != cudaSuccess || scratch_alloc(s, &x, stream) ||
        (ctas > 0 && neighbour_alloc(ctx, ctas, &x))) {
        snprintf(why, sizeof why, "%s", cudaGetErrorString(cudaGetLastError()));
    } else if (s->epilogue) { /* cuBLAS's failure: the plan goes on without tuning, no ERROR line, no message left */
        char saved[GG_MSG_BYTES];
        gg_tentative_begin(ctx, saved);
        const gg_status set = gg_matmul_set_epilogue_pointers(ctx, mm, x.bias, x.aux);
        if (set != GG_SUCCESS) memcpy(why, ctx->last_error, sizeof why);
        (void)gg_tentative_end(ctx, saved, set, set, NULL);
    }
    if (why[0]) {
        gg_log(ctx, GG_LOG_WARN, "autotune of %s skipped (%s): using the heuristic's first algorithm", key, why);
        scratch_free(&x);
        return GG_SUCCESS;
    }
    double best = -1.0, first = -1.0;
    int best_index = 0;
    for (int i = 0; i < count; ++i) {
        const double us = time_candidate(ctx, mm, &candidates[i], &x, stream);
        if (i == 0) first = us;
        if (us > 0 && (best < 0 || us < best)) {
            best = us;
            best_index = i;
        }
    }
    (void)cudaStreamSynchronize(stream);
    scratch_free(&x);
    if (best < 0) {
        gg_log(ctx, GG_LOG_WARN, "autotune of %s: no candidate ran; using the heuristic's first algorithm", key);
        return GG_SUCCESS;
    }
    if (best_index > 0 && first > 0 && first <= best * (1.0 + 0.01 * ctx->tune_margin_percent)) {
        gg_log(ctx, GG_LOG_INFO, "autotune %s: candidate %d, %.1f us, is within GG_AUTOTUNE_MARGIN=%d %% of the "
               "heuristic's first (%.1f us): keeping the first", key, best_index, best, ctx->tune_margin_percent,
               first);
        best_index = 0;
        best = first;
    }
    *chosen = candidates[best_index];
    *us = best;
    gg_log(ctx, GG_LOG_INFO, "autotune %s: candidate %d of %d, %.1f us (heuristic's first: %.1f us)", key, best_index,
           count, best, first);
    gg_tune_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.key, sizeof e.key, "%s", key);
    memcpy(e.algo, &chosen->algo, sizeof e.algo);
    e.workspace_bytes = chosen->workspaceSize;
    e.us = best;
    remember(ctx, &e);
    return GG_SUCCESS;
}

double gg_tune_pass_us(gg_ctx *ctx, const char *problem, double (*measure)(gg_ctx *ctx, void *arg), void *arg) {
    if (!ctx->tune) return -1.0;
    char key[GG_TUNE_KEY_BYTES];
    snprintf(key, sizeof key, "%s|pass|%s", device_part(ctx), problem);
    const gg_tune_entry *cached = gg_tune_cache_find(ctx->tune, key);
    if (cached && cached->us > 0) return cached->us;
    if (cudaDeviceSynchronize() != cudaSuccess) { /* work enqueued earlier may hold the scratch's memory */
        gg_log(ctx, GG_LOG_WARN, "timing of %s skipped (%s)", key, cudaGetErrorString(cudaGetLastError()));
        return -1.0;
    }
    const double us = measure(ctx, arg);
    (void)cudaGetLastError(); /* a failed measurement's error is not sticky: it leaves none behind */
    if (us <= 0) {
        gg_log(ctx, GG_LOG_WARN, "timing of %s failed: the choices that weigh it keep their default", key);
        return -1.0;
    }
    gg_log(ctx, GG_LOG_INFO, "timed %s: %.1f us", key, us);
    gg_tune_entry e;
    memset(&e, 0, sizeof e); /* no algorithm: the key says it is a pass */
    snprintf(e.key, sizeof e.key, "%s", key);
    e.us = us;
    remember(ctx, &e);
    return us;
}
