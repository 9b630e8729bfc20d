/*
 * training_loop.c - gradgraph in a training loop: one MLP block's backward as CUDA graphs, replayed every step.
 *
 * Shows what a loop needs: graphs planned once before the loop (power-of-two buckets up to the largest batch),
 * a token count that changes every step (padded to its bucket), two micro-batches per step with the weight
 * gradients accumulated, double-buffered activations (two pointer sets: each captured once, then replayed),
 * the memory report, and teardown. At the end one step is recomputed eagerly as a check.
 * Exit status: 0 on success, 77 without a GPU (CTest reports it as skipped), 1 on an error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "gradgraph.h"

enum { D = 512, F = 2048, MAX_TOKENS = 2048, STEPS = 8, MICRO = 2 };

/* The per-micro-batch tensors of the block (inputs and activation gradient). */
typedef struct activations {
    float *grad_output, *hidden_states, *intermediate, *intermediate_activated, *grad_hidden_states;
} activations;

static float *device_random(size_t n, float scale) {
    float *host = malloc(n * sizeof *host), *dev = NULL;
    for (size_t i = 0; i < n; ++i) host[i] = scale * ((float)rand() / (float)RAND_MAX - 0.5f);
    if (!host || cudaMalloc((void **)&dev, n * sizeof *dev) != cudaSuccess) exit(1);
    cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice);
    free(host);
    return dev;
}

#define CHECK(ctx, call)                                                                                           \
    do {                                                                                                           \
        gg_status st_ = (call);                                                                                    \
        if (st_ != GG_SUCCESS) {                                                                                   \
            fprintf(stderr, "%s: %s\n", #call, gg_last_error(ctx));                                                \
            return 1;                                                                                              \
        }                                                                                                          \
    } while (0)

int main(void) {
    gg_config config = GG_CONFIG_INIT;
    config.precision = GG_PRECISION_FP16; /* fp16 operands, fp32 accumulation and outputs */
    gg_ctx *ctx = NULL;
    gg_status st = gg_ctx_create(&config, &ctx);
    if (st == GG_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", gg_last_error(NULL));
        return 77;
    }
    CHECK(NULL, st);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

    /* Parameters and their gradients live for the whole run. */
    float *w1 = device_random((size_t)F * D, 0.05f), *w2 = device_random((size_t)D * F, 0.05f);
    float *dw1, *dw2, *db1, *db2;
    cudaMalloc((void **)&dw1, sizeof(float) * F * D);
    cudaMalloc((void **)&dw2, sizeof(float) * D * F);
    cudaMalloc((void **)&db1, sizeof(float) * F);
    cudaMalloc((void **)&db2, sizeof(float) * D);
    /* Two activation buffers of the largest batch, used alternately (double buffering). */
    activations act[2];
    for (int k = 0; k < 2; ++k) {
        act[k].grad_output = device_random((size_t)MAX_TOKENS * D, 2.0f);
        act[k].hidden_states = device_random((size_t)MAX_TOKENS * D, 2.0f);
        act[k].intermediate = device_random((size_t)MAX_TOKENS * F, 2.0f);
        act[k].intermediate_activated = device_random((size_t)MAX_TOKENS * F, 2.0f);
        act[k].grad_hidden_states = device_random((size_t)MAX_TOKENS * D, 0.0f);
    }

    /* Plan once, before the loop: buckets 256, 512, 1024, 2048. */
    gg_mlp_desc desc = {.hidden = D, .ffn = F};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.min_tokens = 256;
    gc.max_tokens = MAX_TOKENS;
    gg_graph *graph = NULL;
    CHECK(ctx, gg_mlp_graph_create(ctx, &desc, &gc, &graph));

    const int64_t tokens[STEPS] = {2048, 1500, 777, 2048, 1024, 1500, 300, 2048};
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    float step_ms[STEPS];
    for (int step = 0; step < STEPS; ++step) {
        cudaEventRecord(start, stream);
        for (int micro = 0; micro < MICRO; ++micro) {
            const activations *a = &act[micro]; /* micro-batch 0 and 1 use the two buffer sets */
            desc.tokens = tokens[step];
            desc.accumulate = micro > 0; /* the first micro-batch overwrites, the others add */
            const gg_mlp_args args = {.grad_output = a->grad_output, .hidden_states = a->hidden_states,
                                      .weight1 = w1, .weight2 = w2, .intermediate = a->intermediate,
                                      .intermediate_activated = a->intermediate_activated,
                                      .grad_hidden_states = a->grad_hidden_states, .grad_weight1 = dw1,
                                      .grad_bias1 = db1, .grad_weight2 = dw2, .grad_bias2 = db2};
            CHECK(ctx, gg_mlp_graph_run(graph, &desc, &args, stream));
        }
        cudaEventRecord(stop, stream);
        cudaEventSynchronize(stop); /* an optimizer step would run here */
        cudaEventElapsedTime(&step_ms[step], start, stop);
        printf("step %d: M = %4lld x %d micro-batches: %8.1f us\n", step, (long long)tokens[step], MICRO,
               1000.0 * step_ms[step]);
    }

    gg_graph_memory mem;
    CHECK(ctx, gg_graph_memory_info(graph, -1, &mem));
    printf("graphs: %d buckets, %d executable graphs, %.1f MiB staging; context: %.1f MiB\n", mem.buckets, mem.execs,
           mem.staging_bytes / 1048576.0, gg_ctx_device_bytes(ctx) / 1048576.0);

    /* Check: the last step's accumulated grad_weight2, recomputed eagerly, agrees within fp16-operand rounding. */
    float *dw2_graph = malloc(sizeof(float) * D * F), *dw2_eager = malloc(sizeof(float) * D * F);
    cudaMemcpy(dw2_graph, dw2, sizeof(float) * D * F, cudaMemcpyDeviceToHost);
    for (int micro = 0; micro < MICRO; ++micro) {
        const activations *a = &act[micro];
        desc.tokens = tokens[STEPS - 1];
        desc.accumulate = micro > 0;
        const gg_mlp_args args = {.grad_output = a->grad_output, .hidden_states = a->hidden_states, .weight1 = w1,
                                  .weight2 = w2, .intermediate = a->intermediate,
                                  .intermediate_activated = a->intermediate_activated,
                                  .grad_hidden_states = a->grad_hidden_states, .grad_weight1 = dw1, .grad_bias1 = db1,
                                  .grad_weight2 = dw2, .grad_bias2 = db2};
        CHECK(ctx, gg_mlp_backward(ctx, &desc, &args, stream));
    }
    cudaStreamSynchronize(stream);
    cudaMemcpy(dw2_eager, dw2, sizeof(float) * D * F, cudaMemcpyDeviceToHost);
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < (size_t)D * F; ++i) {
        max_err = fmax(max_err, fabs((double)dw2_graph[i] - dw2_eager[i]));
        max_ref = fmax(max_ref, fabs((double)dw2_eager[i]));
    }
    printf("grad_weight2, graph vs eager: max |diff| %.3g (max |value| %.3g)\n", max_err, max_ref);
    const int ok = isfinite(max_err) && max_err <= 1e-3 * max_ref + 1e-6;

    /* Teardown: graphs before the context. */
    gg_graph_destroy(graph);
    gg_ctx_destroy(ctx);
    free(dw2_graph);
    free(dw2_eager);
    return ok ? 0 : 1;
}
