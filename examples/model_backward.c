/*
 * model_backward.c - a model's whole backward as one step graph (gg_step_*): a stack of residual GELU-MLP layers
 * (block 3, the residual add in a callback) or of gated bf16 layers (blocks 1 and 4), checked against the same
 * layers run as separate eager calls, then timed per step against per-block graphs and eager calls.
 *
 *   model_backward [--small] [--gated] [--layers L] [--hidden D] [--ffn F] [--tokens M] [--precision fp32|tf32|fp16]
 *                  [--side-streams S] [--steps N] [--json FILE]
 *
 * Defaults: 8 layers, D = 2048, F = 8192, 8192 tokens, fp16 (--small: D = 1024, F = 4096, 2048 tokens). Exit 0 when
 * the step graph matches the eager path (bitwise in fp32 mode and for the bf16 blocks, else within 1e-3 of the
 * largest gradient), 1 otherwise, 77 without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step_model.h"

#define CHECK(call)                                                                                                \
    do {                                                                                                           \
        gg_status st_ = (call);                                                                                    \
        if (st_ != GG_SUCCESS) {                                                                                   \
            fprintf(stderr, "%s: %s\n", #call, gg_last_error(ctx));                                                \
            return 1;                                                                                              \
        }                                                                                                          \
    } while (0)

typedef enum { MODE_STEP, MODE_BLOCK_GRAPHS, MODE_EAGER } mode;

/* Milliseconds per backward, averaged over `steps` after two warm-up steps. */
static double time_steps(gg_ctx *ctx, gg_step *step, sm_model *m, mode md, int64_t tokens, int steps,
                         cudaStream_t s) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    gg_status st = GG_SUCCESS;
    for (int i = -2; i < steps && st == GG_SUCCESS; ++i) {
        if (i == 0) cudaEventRecord(a, s);
        st = md == MODE_STEP           ? gg_step_run(step, tokens, 0, (gg_stream)s)
             : md == MODE_BLOCK_GRAPHS ? sm_run_block_graphs(m, NULL, tokens, 0, s)
                                       : sm_run_eager(m, tokens, 0, s);
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (st != GG_SUCCESS) fprintf(stderr, "timing: %s\n", gg_last_error(ctx));
    return st == GG_SUCCESS ? ms / steps : -1;
}

int main(int argc, char **argv) {
    sm_config c = {.layers = 8, .hidden = 2048, .ffn = 8192, .max_tokens = 8192, .precision = GG_PRECISION_FP16};
    int steps = 20, sides = 2;
    const char *json = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--small")) c.hidden = 1024, c.ffn = 4096, c.max_tokens = 2048;
        else if (!strcmp(a, "--gated")) c.gated = 1, c.hidden = 768, c.ffn = 1536, c.precision = GG_PRECISION_BF16;
        else if (!strcmp(a, "--layers")) c.layers = atoi(v), ++i;
        else if (!strcmp(a, "--hidden")) c.hidden = atoll(v), ++i;
        else if (!strcmp(a, "--ffn")) c.ffn = atoll(v), ++i;
        else if (!strcmp(a, "--tokens")) c.max_tokens = atoll(v), ++i;
        else if (!strcmp(a, "--side-streams")) sides = atoi(v), ++i;
        else if (!strcmp(a, "--steps")) steps = atoi(v), ++i;
        else if (!strcmp(a, "--json")) json = v, ++i;
        else if (!strcmp(a, "--precision")) {
            c.precision = !strcmp(v, "fp32") ? GG_PRECISION_FP32 : !strcmp(v, "tf32") ? GG_PRECISION_TF32
                                                                                      : GG_PRECISION_FP16;
            ++i;
        } else {
            fprintf(stderr, "usage: see the top of examples/model_backward.c\n");
            return 2;
        }
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("model_backward: no GPU, skipped\n");
        return 77;
    }
    gg_ctx *ctx = NULL;
    CHECK(gg_ctx_create(NULL, &ctx));
    sm_model *m = NULL;
    if (sm_create(ctx, &c, &m) != 0) return 1;
    gg_step *step = NULL;
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.policy = GG_BUCKETS_LIST;
    const int64_t buckets[2] = {c.max_tokens / 2, c.max_tokens};
    sc.bucket_tokens = buckets;
    sc.n_buckets = 2;
    sc.side_streams = sides;
    CHECK(gg_step_create(ctx, &sc, &step));
    CHECK(sm_add_to_step(m, step));
    CHECK(gg_step_finalize(step));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

    /* the check: eager per-layer calls against the step graph, at the largest bucket and padded */
    int ok = 1;
    const int64_t checks[2] = {c.max_tokens, c.max_tokens / 2 + c.max_tokens / 8};
    for (int k = 0; k < 2; ++k) {
        const int64_t M = checks[k];
        size_t bytes = 0, bytes2 = 0;
        int elem = 0, bitwise = 0;
        sm_clear(m, 0x7f);
        CHECK(sm_run_eager(m, M, 0, s));
        cudaStreamSynchronize(s);
        void *ref = sm_gradients(m, M, &bytes, &elem);
        sm_clear(m, 0x7f);
        CHECK(gg_step_run(step, M, 0, (gg_stream)s));
        cudaStreamSynchronize(s);
        void *got = sm_gradients(m, M, &bytes2, &elem);
        const double rel = ref && got ? sm_max_rel_diff(got, ref, bytes, elem, &bitwise) : 1e30;
        const int exact_kernels = M == c.max_tokens && (c.gated || c.precision == GG_PRECISION_FP32);
        const int pass = exact_kernels ? bitwise : rel <= 1e-3;
        printf("check %lld tokens%s: step graph vs eager: %s, max rel diff %.3g: %s\n", (long long)M,
               M == c.max_tokens ? "" : " (padded)", bitwise ? "bitwise equal" : "not bitwise", rel,
               pass ? "ok" : "FAILED");
        ok &= pass;
        free(ref);
        free(got);
    }

    const double step_ms = time_steps(ctx, step, m, MODE_STEP, c.max_tokens, steps, s);
    const double graphs_ms = time_steps(ctx, step, m, MODE_BLOCK_GRAPHS, c.max_tokens, steps, s);
    const double eager_ms = time_steps(ctx, step, m, MODE_EAGER, c.max_tokens, steps, s);
    const double sol_us = sm_flop(m, c.max_tokens) / 989.4e12 * 1e6;
    gg_step_memory mem;
    CHECK(gg_step_memory_info(step, &mem));
    printf("%d layers, D = %lld, F = %lld, %lld tokens, %s: step graph %.1f us (%.0f %% of SOL %.1f us), per-block "
           "graphs %.1f us, eager %.1f us; scratch %zu MiB (%zu per slot), exec %zu MiB\n",
           c.layers, (long long)c.hidden, (long long)c.ffn, (long long)c.max_tokens,
           gg_precision_string(c.precision), step_ms * 1e3, sol_us / (step_ms * 1e3) * 100, sol_us, graphs_ms * 1e3,
           eager_ms * 1e3, mem.scratch_bytes >> 20, mem.slot_bytes >> 20, mem.exec_bytes >> 20);
    if (json) {
        FILE *f = fopen(json, "w");
        if (f) {
            fprintf(f,
                    "{\"name\": \"%s\", \"layers\": %d, \"hidden\": %lld, \"ffn\": %lld, \"tokens\": %lld, "
                    "\"precision\": \"%s\", \"side_streams\": %d, \"graph_launches_per_step\": 1, \"sol_us\": %.2f, "
                    "\"step_us\": {\"gg_step_graph\": %.2f, \"gg_block_graphs\": %.2f, \"gg_eager\": %.2f}, "
                    "\"memory\": {\"scratch_bytes\": %zu, \"slot_bytes\": %zu, \"exec_bytes\": %zu, "
                    "\"staging_bytes\": 0}, \"correct\": %s}\n",
                    c.gated ? "gated_bf16" : "residual_mlp", c.layers, (long long)c.hidden, (long long)c.ffn,
                    (long long)c.max_tokens, gg_precision_string(c.precision), sides, sol_us, step_ms * 1e3,
                    graphs_ms * 1e3, eager_ms * 1e3, mem.scratch_bytes, mem.slot_bytes, mem.exec_bytes,
                    ok ? "true" : "false");
            fclose(f);
        }
    }
    gg_step_destroy(step);
    sm_destroy(m);
    cudaStreamDestroy(s);
    gg_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
