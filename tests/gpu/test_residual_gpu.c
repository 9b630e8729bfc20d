/*
 * test_residual_gpu.c - blocks 2 and 3 with grad_residual (label `gpu`; SKIPPED without a GPU): grad_hidden_states
 * must be the same call's without it plus grad_residual, rounded once in fp32, on every route of the dX GEMM
 * (cuBLASLt, and gradgraph's own fp32-weight GEMM at few tokens in fp16 mode on an H200), eager and as a graph at a
 * padded bucket (the residual's rows are staged like every [M, ...] input). Fresh random inputs; the seed is printed.
 * grad_hidden_states is poisoned with NaN before every run, so an unwritten element fails.
 */
#include "gpu_test.h"

#include <time.h>

enum { D = 256, F = 1024, MAX_M = 2048 };

typedef struct buffers {
    float *dy, *x, *w1, *w2, *pre, *act, *tanh, *dx, *dw1, *dw2, *db1, *db2, *res;
} buffers;

static uint64_t rng;
static float uniform(void) { /* [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *random_buffer(size_t n, float scale) {
    float *host = malloc(n * sizeof *host), *dev = NULL;
    assert_non_null(host);
    for (size_t i = 0; i < n; ++i) host[i] = scale * uniform();
    CUDA_OK(cudaMalloc((void **)&dev, n * sizeof *dev));
    CUDA_OK(cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice));
    free(host);
    return dev;
}

static buffers make_buffers(void) {
    const size_t md = (size_t)MAX_M * D, mf = (size_t)MAX_M * F, fd = (size_t)F * D;
    buffers b = {random_buffer(md, 1), random_buffer(md, 1),    random_buffer(fd, 0.05f), random_buffer(fd, 0.05f),
                 random_buffer(mf, 1), random_buffer(mf, 1),    random_buffer(mf, 1),     random_buffer(md, 0),
                 random_buffer(fd, 0), random_buffer(fd, 0),    random_buffer(F, 0),      random_buffer(D, 0),
                 random_buffer(md, 2)};
    return b;
}

static void free_buffers(buffers *b) {
    float **all = (float **)b;
    for (size_t i = 0; i < sizeof *b / sizeof(float *); ++i) cudaFree(all[i]);
}

/* One backward of `tokens` rows, eager or through graph (made by the caller), with or without the residual; returns
 * grad_hidden_states on the host (malloc'd), after poisoning it with NaN. */
static float *run(gg_ctx *ctx, const buffers *b, int block, gg_precision precision, int64_t tokens, int with_res,
                  gg_graph *graph) {
    const size_t n = (size_t)tokens * D;
    CUDA_OK(cudaMemset(b->dx, 0xff, (size_t)MAX_M * D * sizeof(float))); /* NaN */
    const float *res = with_res ? b->res : NULL;
    if (block == 2) {
        const gg_gelu_ffn_desc d = {tokens, D, F, precision, 0};
        const gg_gelu_ffn_args a = {b->dy, b->x, b->w1, b->w2, b->pre, b->act, b->tanh, b->dx, b->dw1, b->dw2, res,
                                    NULL,  NULL,   NULL,   NULL, NULL};
        GG_OK(ctx, graph ? gg_gelu_ffn_graph_run(graph, &d, &a, NULL) : gg_gelu_ffn_backward(ctx, &d, &a, NULL));
    } else {
        const gg_mlp_desc d = {tokens, D, F, precision, 0};
        const gg_mlp_args a = {b->dy, b->x, b->w1, b->w2, b->pre, b->act, b->dx, b->dw1, b->db1, b->dw2, b->db2, res,
                               NULL,  NULL,   NULL,   NULL, NULL};
        GG_OK(ctx, graph ? gg_mlp_graph_run(graph, &d, &a, NULL) : gg_mlp_backward(ctx, &d, &a, NULL));
    }
    CUDA_OK(cudaDeviceSynchronize());
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    CUDA_OK(cudaMemcpy(h, b->dx, n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

/* got = plain + res with one fp32 rounding of the GEMM's fp32 result plus res: within an ulp of the exact sum. */
static void expect_sum(const float *got, const float *plain, const float *res, size_t n, const char *what) {
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        const double want = (double)plain[i] + (double)res[i];
        const double tol = 0x1p-22 * (fabs((double)plain[i]) + fabs((double)res[i])) + 1e-30;
        const double err = fabs((double)got[i] - want);
        if (!(err <= tol)) ++bad; /* NaN fails */
        if (err / tol > worst || err != err) worst = err != err ? INFINITY : err / tol;
    }
    printf("RESULT %s: %zu of %zu elements off, worst |err|/tol %.3g\n", what, bad, n, worst);
    if (bad) fail_msg("%s: %zu elements are not grad_hidden_states + grad_residual", what, bad);
}

static void residual_is_added(void **state) {
    (void)state;
    REQUIRE_GPU();
    const char *env = getenv("GG_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("RESULT seed %llu (GG_TEST_SEED reproduces it)\n", (unsigned long long)seed);
    rng = seed;
    gg_ctx *ctx = new_ctx();
    buffers b = make_buffers();
    float *res = malloc((size_t)MAX_M * D * sizeof *res);
    assert_non_null(res);
    CUDA_OK(cudaMemcpy(res, b.res, (size_t)MAX_M * D * sizeof *res, cudaMemcpyDeviceToHost));
    const gg_precision precisions[3] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
    const int64_t counts[3] = {1, 333, MAX_M}; /* 333 in fp16 mode: gradgraph's own dX GEMM on an H200 */
    char what[160];
    for (int block = 2; block <= 3; ++block)
        for (int p = 0; p < 3; ++p)
            for (int k = 0; k < 3; ++k) {
                float *plain = run(ctx, &b, block, precisions[p], counts[k], 0, NULL);
                float *got = run(ctx, &b, block, precisions[p], counts[k], 1, NULL);
                snprintf(what, sizeof what, "block %d, %s, %lld tokens, eager", block,
                         gg_precision_string(precisions[p]), (long long)counts[k]);
                expect_sum(got, plain, res, (size_t)counts[k] * D, what);
                free(plain);
                free(got);
            }
    /* A graph at a padded bucket: 333 rows of the 512-row bucket; the residual's rows are staged too. */
    for (int block = 2; block <= 3; ++block) {
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        gc.max_tokens = 512;
        gg_graph *g = NULL;
        if (block == 2) {
            const gg_gelu_ffn_desc d = {333, D, F, GG_PRECISION_FP16, 0};
            GG_OK(ctx, gg_gelu_ffn_graph_create(ctx, &d, &gc, &g));
        } else {
            const gg_mlp_desc d = {333, D, F, GG_PRECISION_FP16, 0};
            GG_OK(ctx, gg_mlp_graph_create(ctx, &d, &gc, &g));
        }
        float *plain = run(ctx, &b, block, GG_PRECISION_FP16, 333, 0, g);
        float *got = run(ctx, &b, block, GG_PRECISION_FP16, 333, 1, g);
        snprintf(what, sizeof what, "block %d, fp16, 333 tokens, graph (512-row bucket)", block);
        expect_sum(got, plain, res, (size_t)333 * D, what);
        free(plain);
        free(got);
        gg_graph_destroy(g);
    }
    free(res);
    free_buffers(&b);
    gg_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(residual_is_added)};
    return cmocka_run_group_tests_name("residual_gpu", tests, NULL, NULL);
}
