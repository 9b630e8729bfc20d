/* ffn_dgelu.c - the choice between the gelu' pass and G's DGELU epilogue (see ffn_dgelu.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffn_dgelu.h"
#include "kernels/gg_kernels.h"
#include "tune.h"

gg_dgelu_mode gg_ffn_dgelu_mode(const gg_ctx *ctx) {
    const char *v = getenv("GG_FFN_DGELU");
    if (!v || !*v || strcmp(v, "auto") == 0) return GG_DGELU_AUTO;
    if (strcmp(v, "epilogue") == 0) return GG_DGELU_EPILOGUE;
    if (strcmp(v, "pass") == 0) return GG_DGELU_PASS;
    gg_log(ctx, GG_LOG_WARN, "GG_FFN_DGELU=%.32s is none of \"auto\", \"epilogue\" and \"pass\": the faster is chosen",
           v);
    return GG_DGELU_AUTO;
}

typedef struct pass_shape {
    int64_t M, F;
} pass_shape;

/* The gelu' pass as block 3 runs it with x's fp16 copy (R over an fp16 G in place, grad_bias1 summed in the same
 * pass) on scratch of the shape, filled with small finite values (0x3c bytes: ~1.06 in fp16): its mean time over a
 * few runs after a first, in microseconds, or -1 when it cannot run. */
static double measure_pass(gg_ctx *ctx, void *arg) {
    const pass_shape *s = arg;
    const size_t elems = (size_t)s->M * (size_t)s->F;
    const int chunks = gg_k_col_sum_chunks(s->M, s->F, GG_DT_F32, ctx->sm_count);
    const size_t partial_bytes = (size_t)chunks * (size_t)s->F * sizeof(float);
    const size_t word_bytes = (GG_COL_SUM_COUNTERS + 1) * sizeof(unsigned); /* the sum's counters, the overflow word */
    cudaStream_t st = ctx->side;
    void *g = NULL, *x = NULL;
    float *partials = NULL, *sums = NULL;
    unsigned *words = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    double us = -1.0;
    enum { REPS = 3 };
    if (cudaMalloc(&g, elems * 2) != cudaSuccess || cudaMalloc(&x, elems * 2) != cudaSuccess ||
        cudaMalloc((void **)&partials, partial_bytes) != cudaSuccess ||
        cudaMalloc((void **)&sums, (size_t)s->F * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&words, word_bytes) != cudaSuccess || cudaMemsetAsync(g, 0x3c, elems * 2, st) ||
        cudaMemsetAsync(x, 0x3c, elems * 2, st) || cudaMemsetAsync(words, 0, word_bytes, st) ||
        cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
        goto done;
#define RUN()                                                                                                      \
    gg_k_gelu_grad_col_sum(g, GG_DT_F16, g, GG_DT_F16, x, GG_DT_F16, s->M, s->F, chunks, partials, words, sums, 0,  \
                           words + GG_COL_SUM_COUNTERS, st)
    if (RUN() != cudaSuccess || cudaEventRecord(start, st) != cudaSuccess) goto done;
    for (int r = 0; r < REPS; ++r)
        if (RUN() != cudaSuccess) goto done;
#undef RUN
    float ms = 0;
    if (cudaEventRecord(stop, st) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && ms > 0)
        us = 1000.0 * (double)ms / REPS;
done:
    (void)cudaStreamSynchronize(st);
    if (g) (void)cudaFree(g);
    if (x) (void)cudaFree(x);
    if (partials) (void)cudaFree(partials);
    if (sums) (void)cudaFree(sums);
    if (words) (void)cudaFree(words);
    if (start) (void)cudaEventDestroy(start);
    if (stop) (void)cudaEventDestroy(stop);
    return us;
}

int gg_ffn_dgelu_wins(gg_ctx *ctx, int64_t M, int64_t F, double g_us, double dgelu_us) {
    if (g_us <= 0 || dgelu_us <= 0) return 0;
    char problem[64];
    snprintf(problem, sizeof problem, "gelu_grad_col_sum_f16|%lldx%lld", (long long)M, (long long)F);
    pass_shape shape = {M, F};
    const double pass_us = gg_tune_pass_us(ctx, problem, measure_pass, &shape);
    if (pass_us <= 0) return 0;
    /* Timed alone, the epilogue's cost on G (dgelu_us - g_us) came out at about half of what it costs in a step, where
     * G runs beside the weight gradients of the layer before and reads x's copy from HBM: the epilogue must save at
     * least twice its cost alone (docs/decisions.md, "Block 3: R in G's epilogue"). */
    const int wins = 2.0 * (dgelu_us - g_us) < pass_us;
    gg_log(ctx, GG_LOG_INFO, "M=%lld F=%lld: R = G * gelu'(x) %s (G with the DGELU epilogue %.1f us, G %.1f us and "
           "the pass %.1f us)", (long long)M, (long long)F, wins ? "in G's epilogue" : "in the gelu' pass", dgelu_us,
           g_us, pass_us);
    return wins;
}
