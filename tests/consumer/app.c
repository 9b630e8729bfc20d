/* app.c - a program built against gradgraph the ways a user builds one (tests/consumer/check.sh): it includes the
 * header, calls the CUDA runtime that gradgraph's package brings, and runs one block on the GPU. Without a GPU it
 * prints "skipped" and returns 77. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <gradgraph.h>

int main(void) {
    if (strcmp(gg_version_string(), GG_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s: built against another gradgraph\n", GG_VERSION_STRING,
                gg_version_string());
        return 1;
    }
    gg_config config = GG_CONFIG_INIT;
    config.tune_cache_path = ""; /* leave the user's autotune cache alone */
    gg_ctx *ctx = NULL;
    gg_status st = gg_ctx_create(&config, &ctx);
    if (st == GG_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", gg_last_error(NULL));
        return 77;
    }
    if (st != GG_SUCCESS) {
        fprintf(stderr, "gg_ctx_create: %s\n", gg_last_error(NULL));
        return 1;
    }
    /* Block 1 on zeros: every gradient is zero, grad_gate included. */
    enum { M = 128, H = 64 };
    void *t[7] = {NULL};
    const size_t bytes[7] = {2 * M * H, 2, 2 * M * H, 2 * M, 2 * M * H, 2 * M * H, 2};
    for (int i = 0; i < 7; ++i)
        if (cudaMalloc(&t[i], bytes[i]) != cudaSuccess || cudaMemset(t[i], 0, bytes[i]) != cudaSuccess) return 1;
    const gg_tanh_gate_desc desc = {.tokens = M, .hidden = H};
    const gg_tanh_gate_args args = {.grad_output = t[0], .gate = t[1], .hidden_states = t[2], .mask = t[3],
                                    .grad_residual = t[4], .grad_hidden_states = t[5], .grad_gate = t[6]};
    unsigned short grad_gate = 0xffff;
    st = gg_tanh_gate_backward(ctx, &desc, &args, NULL);
    if (st == GG_SUCCESS && cudaMemcpy(&grad_gate, t[6], 2, cudaMemcpyDeviceToHost) != cudaSuccess) st = GG_ERROR_CUDA;
    for (int i = 0; i < 7; ++i) cudaFree(t[i]);
    if (st != GG_SUCCESS) fprintf(stderr, "gg_tanh_gate_backward: %s\n", gg_last_error(ctx));
    gg_ctx_destroy(ctx);
    printf("gradgraph %s: grad_gate = 0x%04x\n", gg_version_string(), grad_gate);
    return st == GG_SUCCESS && grad_gate == 0 ? 0 : 1;
}
