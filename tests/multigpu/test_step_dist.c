/*
 * test_step_dist.c - data-parallel step graphs on several GPUs (label `multigpu`; SKIPPED with fewer than 2 GPUs).
 * One process, one thread and one context per GPU (gg_dist_init_threads); every rank builds the same 8-layer
 * residual MLP step (examples/step_model.c) with its own random inputs (seed printed), plus a gradient of the
 * caller's own (gg_step_add_reduce, written by a callback):
 *  - after a step, every rank's parameter gradients equal the mean of the ranks' eager gradients (each rank's data
 *    run eagerly on its own GPU, averaged on the host in double) within the tolerance rule of test_dist.c, and are
 *    bitwise equal across the ranks; the caller's gradient is the exact mean;
 *  - small buckets (many per layer, large gradients cut into pieces) and the default 25 MiB give the same;
 *  - no_sync: a run with gg_step_set_sync(step, 0) leaves the local gradients (bitwise the eager ones, which run
 *    after finalize: with the GEMM algorithms every rank adopted from rank 0), and the next
 *    run with sync on and accumulate 1 reduces the accumulated sums (the mean of twice the local gradients);
 *  - a gradient callback (gg_step_add_gradient_callback) that copies every parameter gradient sees them reduced: its
 *    copies equal the gradients the synced run leaves, bit for bit;
 *  - gg_step_run_device refuses a syncing step; gg_dist_detach refuses while the step holds NCCL work;
 *  - ranks that build different steps are refused at finalize, on every rank.
 * Every gradient buffer is poisoned (NaN bytes) before each run, so an unwritten element fails.
 */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "gpu_test.h"
#include "step_model.h"

#define MAX_RANKS 8
enum { LAYERS = 8, HIDDEN = 256, FFN = 1024, TOKENS = 512, EXTRA = 1001 };

static int world;
static unsigned base_seed;

typedef struct job {
    int rank;
    gg_ctx *ctx;
    size_t bucket_bytes;
    int differ;                       /* build a step that differs on rank 1 (the fingerprint test) */
    void *local, *synced, *no_sync, *accumulated; /* host copies of the parameter gradients */
    size_t callback_differ, callback_compared;    /* the gradient callback's copies against the synced run's */
    float extra_synced[EXTRA];
    size_t bytes;
    gg_status finalize_status;
    char error[512];
} job;

typedef struct extra_grad {
    float *grad, *source;
} extra_grad;

/* The caller's own gradient: written on the step's stream (a copy of this rank's values), then reduced. */
static void write_extra(void *user, gg_stream stream, int64_t tokens) {
    (void)tokens;
    const extra_grad *e = user;
    cudaMemcpyAsync(e->grad, e->source, sizeof(float) * EXTRA, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
}

static float extra_value(int rank, int i) { return (float)((rank + 1) * (i % 97) - 40) / 8.0f; }

#define CHECK(call)                                                                                                \
    do {                                                                                                           \
        const gg_status s_ = (call);                                                                               \
        if (s_ != GG_SUCCESS) {                                                                                    \
            snprintf(j->error, sizeof j->error, "%s: %s", #call, gg_last_error(j->ctx));                           \
            goto out;                                                                                              \
        }                                                                                                          \
    } while (0)
#define CHECK_CUDA(call)                                                                                           \
    do {                                                                                                           \
        const cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                                   \
            snprintf(j->error, sizeof j->error, "%s: %s", #call, cudaGetErrorString(e_));                          \
            goto out;                                                                                              \
        }                                                                                                          \
    } while (0)

/* The parameter gradients after `runs` runs (step NULL: eager), every gradient poisoned first. */
static int param_grads(job *j, sm_model *m, gg_step *step, int runs, int first_accumulates, cudaStream_t st,
                       void **out) {
    if (!first_accumulates) sm_clear(m, 0xff); /* NaN bytes: an element no run writes fails */
    for (int r = 0; r < runs; ++r) {
        const int acc = r > 0 || first_accumulates;
        const gg_status s = step ? gg_step_run(step, TOKENS, acc, (gg_stream)st) : sm_run_eager(m, TOKENS, acc, st);
        if (s != GG_SUCCESS) {
            snprintf(j->error, sizeof j->error, "run: %s", gg_last_error(j->ctx));
            return -1;
        }
    }
    if (cudaStreamSynchronize(st) != cudaSuccess) return -1;
    size_t bytes = 0;
    int elem = 0;
    void *all = sm_gradients(m, TOKENS, &bytes, &elem);
    if (!all) return -1;
    j->bytes = sm_param_bytes(m);
    *out = all; /* the parameter gradients come first */
    return 0;
}

static void *rank_main(void *arg) {
    job *j = arg;
    cudaSetDevice(j->rank);
    sm_model *m = NULL;
    gg_step *step = NULL;
    cudaStream_t st = NULL;
    extra_grad extra = {NULL, NULL};
    grad_copies copies = {0};
    const sm_config mc = {.layers = LAYERS, .hidden = HIDDEN, .ffn = FFN, .max_tokens = TOKENS,
                          .precision = GG_PRECISION_FP32, .seed = base_seed + (unsigned)j->rank};
    if (sm_create(j->ctx, &mc, &m) != 0) {
        snprintf(j->error, sizeof j->error, "sm_create failed");
        return NULL;
    }
    CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc((void **)&extra.grad, sizeof(float) * EXTRA));
    CHECK_CUDA(cudaMalloc((void **)&extra.source, sizeof(float) * EXTRA));
    float host[EXTRA];
    for (int i = 0; i < EXTRA; ++i) host[i] = extra_value(j->rank, i);
    CHECK_CUDA(cudaMemcpy(extra.source, host, sizeof host, cudaMemcpyHostToDevice));

    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.min_tokens = TOKENS;
    sc.max_tokens = TOKENS;
    CHECK(gg_step_create(j->ctx, &sc, &step));
    CHECK(sm_add_to_step(m, step));
    CHECK(gg_step_add_callback(step, write_extra, &extra));
    const size_t extra_count = j->differ && j->rank == 1 ? EXTRA - 1 : EXTRA;
    CHECK(gg_step_add_reduce(step, extra.grad, extra_count, 0));
    void *grads[GRAD_COPIES_MAX];
    size_t counts[GRAD_COPIES_MAX], bytes[GRAD_COPIES_MAX];
    const int n_grads = sm_param_grads(m, grads, counts, GRAD_COPIES_MAX);
    for (int i = 0; i < n_grads; ++i) bytes[i] = counts[i] * sizeof(float);
    if (grad_copies_make(&copies, grads, bytes, n_grads) != 0) {
        snprintf(j->error, sizeof j->error, "grad_copies_make failed");
        goto out;
    }
    CHECK(gg_step_add_gradient_callback(step, grad_copies_take, &copies));
    j->finalize_status = gg_step_finalize(step);
    if (j->differ) {
        snprintf(j->error, sizeof j->error, "%s", gg_last_error(j->ctx));
        goto out;
    }
    CHECK(j->finalize_status);
    /* the local gradients, eagerly: after finalize, so that they run the GEMM algorithms the step adopted from
     * rank 0 (shared plans), and a step without reduction must give their bits */
    if (param_grads(j, m, NULL, 1, 0, st, &j->local) != 0) goto out;

    if (grad_copies_poison(&copies) != 0) {
        snprintf(j->error, sizeof j->error, "grad_copies_poison failed");
        goto out;
    }
    if (param_grads(j, m, step, 1, 0, st, &j->synced) != 0) goto out;
    j->callback_differ = grad_copies_differ(&copies, sizeof(float), &j->callback_compared);
    CHECK_CUDA(cudaMemcpy(j->extra_synced, extra.grad, sizeof host, cudaMemcpyDeviceToHost));
    /* the device-selected run cannot hold NCCL; the communicator cannot go while the step holds NCCL work */
    if (gg_step_run_device(step, (const int64_t *)extra.source, 0, (gg_stream)st) != GG_ERROR_UNSUPPORTED ||
        !strstr(gg_last_error(j->ctx), "gg_step_run_device: the step reduces gradients across ranks")) {
        snprintf(j->error, sizeof j->error, "gg_step_run_device on a syncing step: %s", gg_last_error(j->ctx));
        goto out;
    }
    if (gg_dist_detach(j->ctx) != GG_ERROR_INVALID_ARGUMENT) {
        snprintf(j->error, sizeof j->error, "gg_dist_detach while a step holds NCCL work was not refused");
        goto out;
    }
    /* micro-batches: the first without reduction, the last with */
    CHECK(gg_step_set_sync(step, 0));
    if (param_grads(j, m, step, 1, 0, st, &j->no_sync) != 0) goto out;
    CHECK(gg_step_set_sync(step, 1));
    if (param_grads(j, m, step, 1, 1, st, &j->accumulated) != 0) goto out;
out:
    gg_step_destroy(step);
    grad_copies_free(&copies);
    if (extra.grad) cudaFree(extra.grad);
    if (extra.source) cudaFree(extra.source);
    if (st) cudaStreamDestroy(st);
    sm_destroy(m);
    return NULL;
}

static void run_ranks(job *jobs, size_t bucket_bytes, int differ) {
    gg_ctx *ctxs[MAX_RANKS];
    for (int r = 0; r < world; ++r) {
        gg_config cfg = GG_CONFIG_INIT;
        cfg.device = r;
        if (gg_ctx_create(&cfg, &ctxs[r]) != GG_SUCCESS) fail_msg("gg_ctx_create: %s", gg_last_error(NULL));
    }
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bucket_bytes = bucket_bytes;
    GG_OK(ctxs[0], gg_dist_init_threads(ctxs, world, &dc));
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < world; ++r) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].rank = r, jobs[r].ctx = ctxs[r], jobs[r].bucket_bytes = bucket_bytes, jobs[r].differ = differ;
        pthread_create(&threads[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < world; ++r) pthread_join(threads[r], NULL);
    for (int r = 0; r < world; ++r) gg_ctx_destroy(ctxs[r]);
}

static void free_jobs(job *jobs) {
    for (int r = 0; r < world; ++r) {
        free(jobs[r].local), free(jobs[r].synced), free(jobs[r].no_sync), free(jobs[r].accumulated);
    }
}

/* got (every rank's) against factor x the mean of the ranks' local gradients: fp32, each element within the rule
 * of test_dist.c (1e-5 of the mean magnitude of its terms, + 1e-5: the step's GEMMs may run rank 0's algorithms,
 * not those of the eager calls), and the same bits on every rank. */
static void check_mean(job *jobs, size_t offset_of_got, double factor, const char *what) {
    const size_t n = jobs[0].bytes / sizeof(float);
    for (int r = 0; r < world; ++r) {
        const float *got = *(float **)((char *)&jobs[r] + offset_of_got);
        size_t bad = 0;
        double bad_got = 0, bad_want = 0;
        for (size_t i = 0; i < n; ++i) {
            double mean = 0, magnitude = 0;
            for (int q = 0; q < world; ++q) {
                const double x = ((const float *)jobs[q].local)[i];
                mean += x, magnitude += fabs(x);
            }
            mean *= factor / world, magnitude *= factor / world;
            if (!(fabs(got[i] - mean) <= 1e-5 * magnitude + 1e-5) && bad++ == 0) bad_got = got[i], bad_want = mean;
        }
        if (bad) fail_msg("%s: rank %d: %zu of %zu parameter gradient elements differ from the mean (the first: %.8g "
                          "against %.8g)", what, r, bad, n, bad_got, bad_want);
        const float *first = *(float **)((char *)&jobs[0] + offset_of_got);
        if (memcmp(got, first, jobs[0].bytes) != 0) fail_msg("%s: rank %d's gradients differ from rank 0's", what, r);
    }
    printf("RESULT %s: %zu parameter gradient elements on %d ranks: the mean, bitwise equal across ranks\n", what, n,
           world);
}

static void step_gradients_are_the_mean(size_t bucket_bytes) {
    job jobs[MAX_RANKS];
    run_ranks(jobs, bucket_bytes, 0);
    for (int r = 0; r < world; ++r)
        if (jobs[r].error[0]) fail_msg("rank %d: %s", r, jobs[r].error);
    printf("RESULT bucket_bytes %zu:\n", bucket_bytes);
    check_mean(jobs, offsetof(job, synced), 1, "synced step");
    check_mean(jobs, offsetof(job, accumulated), 2, "no_sync run, then a synced accumulating run");
    for (int r = 0; r < world; ++r) {
        if (jobs[r].callback_differ != 0 || jobs[r].callback_compared == 0)
            fail_msg("rank %d: %zu of %zu elements of the gradient callback's copies differ from the reduced "
                     "gradients", r, jobs[r].callback_differ, jobs[r].callback_compared);
        if (r == 0)
            printf("RESULT the gradient callback's copies: the reduced gradients bit for bit (%zu elements a rank)\n",
                   jobs[r].callback_compared);
        if (memcmp(jobs[r].no_sync, jobs[r].local, jobs[r].bytes) != 0)
            fail_msg("rank %d: a run with sync off changed the local gradients (not the eager bits)", r);
        for (int i = 0; i < EXTRA; ++i) { /* small integers / 8: the mean is exact */
            double mean = 0;
            for (int q = 0; q < world; ++q) mean += extra_value(q, i);
            mean /= world;
            if (jobs[r].extra_synced[i] != (float)mean)
                fail_msg("rank %d: the gg_step_add_reduce gradient's element %d is %.8g, not the mean %.8g", r, i,
                         jobs[r].extra_synced[i], mean);
        }
    }
    free_jobs(jobs);
}

static void default_buckets(void **state) {
    (void)state;
    if (world < 2) skip();
    step_gradients_are_the_mean((size_t)25 << 20); /* one layer's 2 MiB of gradients many times over */
}

static void small_buckets(void **state) {
    (void)state;
    if (world < 2) skip();
    step_gradients_are_the_mean((size_t)256 << 10); /* 1 MiB weight gradients in 4 pieces each */
}

static void ranks_with_different_steps_are_refused(void **state) {
    (void)state;
    if (world < 2) skip();
    job jobs[MAX_RANKS];
    run_ranks(jobs, (size_t)25 << 20, 1);
    for (int r = 0; r < world; ++r) {
        if (jobs[r].finalize_status != GG_ERROR_INVALID_ARGUMENT || !strstr(jobs[r].error, "differs from another rank"))
            fail_msg("rank %d: finalize of differing steps gave %d (%s)", r, (int)jobs[r].finalize_status,
                     jobs[r].error);
    }
    free_jobs(jobs);
}

int main(void) {
    world = gpu_count();
    if (world > MAX_RANKS) world = MAX_RANKS;
    base_seed = (unsigned)time(NULL);
    printf("test_step_dist: seed %u, %d GPUs\n", base_seed, world);
    start_watchdog(600, "test_step_dist: the run hung (600 s watchdog)\n");
    apply_test_filter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_buckets),
        cmocka_unit_test(small_buckets),
        cmocka_unit_test(ranks_with_different_steps_are_refused),
    };
    return cmocka_run_group_tests_name("step_dist_multigpu", tests, NULL, NULL);
}
