/*
 * model_ddp.c - model_backward --gpus N (model_ddp.h). What it measures, per rank, in interleaved rounds (medians;
 * rank 0's are reported):
 *   step_us          the step graph with its gradients reduced across the ranks (gg_step_run, sync on)
 *   step_us_no_sync  the same step without the reduction (gg_step_set_sync(step, 0)): one GPU's backward
 *   allreduce_us     the reduction alone: gg_dist_reduce of every parameter gradient, one after another, with no
 *                    backward beside it
 *   speedup              gpus x step_us_no_sync / step_us: the throughput of N GPUs (each its own batch) against
 *                        one GPU running the same batches one after another
 *   comm_hidden_fraction 1 - (step_us - step_us_no_sync) / allreduce_us, clamped to [0, 1]: the share of the
 *                        reduction's time that the backward hides
 */
#include "model_ddp.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_GPUS = 8, MAX_PARAMS = 512 };

typedef struct rank_state {
    int rank;
    gg_ctx *ctx;
    const sm_config *c;
    int steps, rounds;
    void *local, *synced; /* host copies of the parameter gradients: eager, after a synced step */
    size_t param_bytes;
    double sync_ms[SM_MAX_ROUNDS], local_ms[SM_MAX_ROUNDS], comm_ms[SM_MAX_ROUNDS];
    int failed;
} rank_state;

static pthread_barrier_t barrier;

/* A failure on one rank leaves the others inside a collective: the example ends the process. */
static void die(rank_state *k, const char *what) {
    fprintf(stderr, "rank %d: %s: %s\n", k->rank, what, gg_last_error(k->ctx));
    exit(1);
}

typedef enum { RUN_SYNCED, RUN_LOCAL, RUN_REDUCE_ONLY } run_kind;

/* Milliseconds per run, averaged over k->steps after two warm-up runs, every rank starting together. */
static double time_runs(rank_state *k, gg_step *step, sm_model *m, run_kind what, cudaStream_t s) {
    void *ptrs[MAX_PARAMS];
    size_t counts[MAX_PARAMS];
    const int n = sm_param_grads(m, ptrs, counts, MAX_PARAMS);
    if (gg_step_set_sync(step, what != RUN_LOCAL) != GG_SUCCESS) die(k, "gg_step_set_sync");
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    pthread_barrier_wait(&barrier);
    for (int i = -2; i < k->steps; ++i) {
        if (i == 0) cudaEventRecord(a, s);
        if (what != RUN_REDUCE_ONLY) {
            if (gg_step_run(step, k->c->max_tokens, 0, (gg_stream)s) != GG_SUCCESS) die(k, "gg_step_run");
        } else {
            for (int p = 0; p < n; ++p)
                if (gg_dist_reduce(k->ctx, ptrs[p], counts[p], k->c->gated, (gg_stream)s) != GG_SUCCESS)
                    die(k, "gg_dist_reduce");
        }
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / k->steps;
}

/* The parameter gradients after one run (step NULL: eager calls), every gradient poisoned first. */
static void *param_grads(rank_state *k, sm_model *m, gg_step *step, cudaStream_t s) {
    sm_clear(m, 0x7f);
    const gg_status st = step ? gg_step_run(step, k->c->max_tokens, 0, (gg_stream)s)
                              : sm_run_eager(m, k->c->max_tokens, 0, s);
    if (st != GG_SUCCESS) die(k, step ? "gg_step_run" : "sm_run_eager");
    cudaStreamSynchronize(s);
    size_t bytes = 0;
    int elem = 0;
    void *h = sm_gradients(m, k->c->max_tokens, &bytes, &elem);
    if (!h) die(k, "sm_gradients");
    k->param_bytes = sm_param_bytes(m);
    return h;
}

static void *rank_main(void *arg) {
    rank_state *k = arg;
    cudaSetDevice(k->rank);
    (void)gg_dist_bind_thread(k->ctx); /* best effort: without hwloc it says so */
    sm_config c = *k->c;
    c.seed += (unsigned)k->rank;
    sm_model *m = NULL;
    if (sm_create(k->ctx, &c, &m) != 0) die(k, "sm_create");
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.min_tokens = c.max_tokens;
    sc.max_tokens = c.max_tokens;
    gg_step *step = NULL;
    if (gg_step_create(k->ctx, &sc, &step) != GG_SUCCESS || sm_add_to_step(m, step) != GG_SUCCESS)
        die(k, "making the step");
    if (gg_step_finalize(step) != GG_SUCCESS) die(k, "gg_step_finalize"); /* collective */
    k->local = param_grads(k, m, NULL, s); /* after finalize: the GEMM algorithms every rank adopted */
    pthread_barrier_wait(&barrier);
    k->synced = param_grads(k, m, step, s);
    for (int r = 0; r < k->rounds; ++r) {
        k->sync_ms[r] = time_runs(k, step, m, RUN_SYNCED, s);
        k->local_ms[r] = time_runs(k, step, m, RUN_LOCAL, s);
        k->comm_ms[r] = time_runs(k, step, m, RUN_REDUCE_ONLY, s);
    }
    gg_step_destroy(step);
    sm_destroy(m);
    cudaStreamDestroy(s);
    return NULL;
}

static double element(const void *p, size_t i, int elem) {
    if (elem == 4) return ((const float *)p)[i];
    const uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Every rank's synced gradients against the mean of the ranks' eager ones (in double), relative to the largest mean
 * element: within 1e-5 in fp32 mode (the same kernels; the reduction's own rounding), else 1e-3 (as model_backward's
 * checks); and the same bits on every rank. */
static int check(const rank_state *k, int gpus, int elem, int fp32) {
    const size_t n = k[0].param_bytes / (size_t)elem;
    double *mean = calloc(n ? n : 1, sizeof *mean);
    if (!mean) return 0;
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; ++i) {
        for (int r = 0; r < gpus; ++r) mean[i] += element(k[r].local, i, elem);
        mean[i] /= gpus;
        scale = fmax(scale, fabs(mean[i]));
    }
    int same = 1;
    for (int r = 0; r < gpus; ++r) {
        for (size_t i = 0; i < n; ++i) {
            const double d = fabs(element(k[r].synced, i, elem) - mean[i]);
            worst = isnan(d) ? INFINITY : fmax(worst, d);
        }
        same &= memcmp(k[r].synced, k[0].synced, k[0].param_bytes) == 0;
    }
    free(mean);
    const double rel = scale > 0 ? worst / scale : worst, bound = fp32 ? 1e-5 : 1e-3;
    const int pass = same && rel <= bound;
    printf("check %d GPUs: parameter gradients vs the mean of the ranks' eager ones: max rel diff %.3g (bound %.0e), "
           "%s across ranks: %s\n",
           gpus, rel, bound, same ? "bitwise equal" : "NOT equal", pass ? "ok" : "FAILED");
    return pass;
}

int md_run(const sm_config *c, int gpus, int steps, int rounds, const char *json) {
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess || have < gpus || gpus < 2 || gpus > MAX_GPUS) {
        printf("model_backward --gpus %d: %d GPUs here (2 to %d needed), skipped\n", gpus, have, MAX_GPUS);
        return 77;
    }
    if (rounds > SM_MAX_ROUNDS) rounds = SM_MAX_ROUNDS;
    gg_ctx *ctxs[MAX_GPUS];
    for (int r = 0; r < gpus; ++r) {
        gg_config cfg = GG_CONFIG_INIT;
        cfg.device = r;
        if (gg_ctx_create(&cfg, &ctxs[r]) != GG_SUCCESS) {
            fprintf(stderr, "gg_ctx_create: %s\n", gg_last_error(NULL));
            return 1;
        }
    }
    const gg_dist_config dc = GG_DIST_CONFIG_INIT;
    const gg_status st = gg_dist_init_threads(ctxs, gpus, &dc);
    if (st != GG_SUCCESS) {
        printf("gg_dist_init_threads: %s\n", gg_last_error(ctxs[0]));
        for (int r = 0; r < gpus; ++r) gg_ctx_destroy(ctxs[r]);
        return st == GG_ERROR_UNSUPPORTED ? 77 : 1;
    }
    rank_state k[MAX_GPUS];
    pthread_t threads[MAX_GPUS];
    pthread_barrier_init(&barrier, NULL, (unsigned)gpus);
    for (int r = 0; r < gpus; ++r) {
        k[r] = (rank_state){.rank = r, .ctx = ctxs[r], .c = c, .steps = steps, .rounds = rounds};
        pthread_create(&threads[r], NULL, rank_main, &k[r]);
    }
    for (int r = 0; r < gpus; ++r) pthread_join(threads[r], NULL);
    pthread_barrier_destroy(&barrier);
    const int elem = c->gated ? 2 : 4;
    const int ok = check(k, gpus, elem, !c->gated && c->precision == GG_PRECISION_FP32);
    const double sync_ms = sm_median(k[0].sync_ms, rounds), local_ms = sm_median(k[0].local_ms, rounds);
    const double comm_ms = sm_median(k[0].comm_ms, rounds);
    const double speedup = gpus * local_ms / sync_ms;
    double hidden = comm_ms > 0 ? 1 - (sync_ms - local_ms) / comm_ms : 0;
    hidden = hidden < 0 ? 0 : hidden > 1 ? 1 : hidden;
    const char *name = c->gated ? "gated_bf16" : "residual_mlp";
    printf("%s, %d layers, D = %lld, F = %lld, %lld tokens per GPU, %d GPUs: step %.1f us with the reduction, %.1f us "
           "without, the reduction alone %.1f us: speedup %.2fx over 1 GPU, %.0f %% of the reduction hidden\n",
           name, c->layers, (long long)c->hidden, (long long)c->ffn, (long long)c->max_tokens, gpus, sync_ms * 1e3,
           local_ms * 1e3, comm_ms * 1e3, speedup, hidden * 100);
    if (json) {
        FILE *f = fopen(json, "w");
        if (f) {
            fprintf(f,
                    "{\"name\": \"%s\", \"layers\": %d, \"hidden\": %lld, \"ffn\": %lld, \"tokens\": %lld, "
                    "\"precision\": \"%s\", \"ddp\": {\"gpus\": %d, \"speedup\": %.4f, \"comm_hidden_fraction\": "
                    "%.4f, \"step_us\": %.2f, \"step_us_no_sync\": %.2f, \"allreduce_us\": %.2f, "
                    "\"bucket_bytes\": %zu, \"rounds\": %d, \"steps_per_round\": %d, \"correct\": %s}}\n",
                    name, c->layers, (long long)c->hidden, (long long)c->ffn, (long long)c->max_tokens,
                    gg_precision_string(c->precision), gpus, speedup, hidden, sync_ms * 1e3, local_ms * 1e3,
                    comm_ms * 1e3, dc.bucket_bytes, rounds, steps, ok ? "true" : "false");
            fclose(f);
        }
    }
    for (int r = 0; r < gpus; ++r) free(k[r].local), free(k[r].synced);
    for (int r = 0; r < gpus; ++r) gg_ctx_destroy(ctxs[r]);
    return ok ? 0 : 1;
}
