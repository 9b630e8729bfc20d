/* app.c - a program built against gradgraph the ways a user builds one (tests/consumer/check.sh): it includes the
 * header, calls the CUDA runtime that gradgraph's package brings, runs one block on the GPU eagerly and as a graph,
 * and writes that graph as DOT. Without a GPU it prints "skipped" and returns 77. */
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
    /* The same as a one-bucket graph, replayed once and written out as DOT. */
    gg_graph *graph = NULL;
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = M;
    char dot[64] = "";
    if (st == GG_SUCCESS) st = gg_tanh_gate_graph_create(ctx, &desc, &gc, &graph);
    if (st == GG_SUCCESS) st = gg_tanh_gate_graph_run(graph, &desc, &args, NULL);
    if (st == GG_SUCCESS) st = gg_graph_debug_dot(graph, 0, "app_graph.dot", 0);
    FILE *f = st == GG_SUCCESS ? fopen("app_graph.dot", "r") : NULL;
    if (f) {
        if (!fgets(dot, sizeof dot, f)) dot[0] = 0;
        dot[strcspn(dot, "\n")] = 0; /* the first line: "digraph ..." */
        fclose(f);
        remove("app_graph.dot");
    }
    if (st != GG_SUCCESS) fprintf(stderr, "gradgraph: %s\n", gg_last_error(ctx));
    gg_graph_destroy(graph);
    gg_ctx_destroy(ctx);
    for (int i = 0; i < 7; ++i) cudaFree(t[i]);
    printf("gradgraph %s: grad_gate = 0x%04x, graph DOT: %s\n", gg_version_string(), grad_gate, dot);
    return st == GG_SUCCESS && grad_gate == 0 && strstr(dot, "digraph") ? 0 : 1;
}
