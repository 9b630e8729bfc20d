/* minimal.c - gradgraph in a C program: one MLP backward on the GPU, checked against the host. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "gradgraph.h"

int main(void) {
    gg_ctx *ctx = NULL;
    gg_config config = GG_CONFIG_INIT;
    config.precision = GG_PRECISION_TF32; /* or FP32 (exact) or FP16 (fastest) */
    gg_status st = gg_ctx_create(&config, &ctx);
    if (st == GG_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", gg_last_error(NULL));
        return 77;
    }
    if (st != GG_SUCCESS) {
        fprintf(stderr, "gg_ctx_create: %s\n", gg_last_error(NULL));
        return 1;
    }

    const int64_t M = 256, D = 512, F = 2048; /* tokens, hidden, ffn */
    const size_t sizes[] = {M * D, M * D, F * D, D * F, M * F, M * F, M * D, F * D, F, D * F, D};
    float *t[11];
    float *host = malloc(sizeof(float) * M * F * 4); /* large enough for every tensor */
    for (int i = 0; i < 11; ++i) {
        if (cudaMalloc((void **)&t[i], sizes[i] * sizeof(float)) != cudaSuccess) return 1;
        for (size_t j = 0; j < sizes[i]; ++j) host[j] = (float)rand() / RAND_MAX - 0.5f;
        cudaMemcpy(t[i], host, sizes[i] * sizeof(float), cudaMemcpyHostToDevice);
    }

    const gg_mlp_desc desc = {.tokens = M, .hidden = D, .ffn = F}; /* precision: the context's */
    const gg_mlp_args args = {
        .grad_output = t[0], .hidden_states = t[1], .weight1 = t[2], .weight2 = t[3], .intermediate = t[4],
        .intermediate_activated = t[5], .grad_hidden_states = t[6], .grad_weight1 = t[7], .grad_bias1 = t[8],
        .grad_weight2 = t[9], .grad_bias2 = t[10]};
    st = gg_mlp_backward(ctx, &desc, &args, NULL); /* enqueued on the default stream; no host sync */
    if (st != GG_SUCCESS) {
        fprintf(stderr, "gg_mlp_backward: %s (%s)\n", gg_last_error(ctx), gg_status_string(st));
        return 1;
    }

    /* grad_bias2 is the column sum of grad_output: check column 0 on the host. */
    float gpu_db2 = 0.0f;
    cudaMemcpy(&gpu_db2, t[10], sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(host, t[0], sizeof(float) * M * D, cudaMemcpyDeviceToHost);
    double host_db2 = 0.0;
    for (int64_t r = 0; r < M; ++r) host_db2 += host[r * D];
    printf("grad_bias2[0]: gpu %.6f, host %.6f\n", gpu_db2, host_db2);

    for (int i = 0; i < 11; ++i) cudaFree(t[i]);
    free(host);
    gg_ctx_destroy(ctx);
    return (gpu_db2 - host_db2) * (gpu_db2 - host_db2) < 1e-6 ? 0 : 1;
}
