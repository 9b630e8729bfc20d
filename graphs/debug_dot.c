/* debug_dot.c - gg_graph_debug_dot and the core gg_step_debug_dot shares: a bucket's CUDA graph as Graphviz DOT, for
 * users to see what a replay runs. */
#include <stdint.h>

#include "graph.h"

gg_status gg_debug_dot(gg_ctx *ctx, const char *fn, int n_buckets, int device_select, gg_capture_again_fn again,
                       void *owner, int bucket, const char *path, int verbose) {
    if (!path) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: path is NULL", fn);
    if (!*path) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: path is empty", fn);
    if (bucket < -1 || bucket >= n_buckets)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: bucket = %d is not in [-1, %d)", fn, bucket, n_buckets);
    if (bucket == -1 && !device_select)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: bucket = -1 is the device-selected graph, but the graph was created with "
                       "config->device_select = 0",
                       fn);
    GG_TRY(gg_refuse_in_step_callback(ctx, fn));
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, fn, &saved));
    cudaGraph_t graph = NULL;
    gg_status status = again(owner, fn, bucket, &graph);
    if (status == GG_SUCCESS) {
        const cudaError_t err = cudaGraphDebugDotPrint(graph, path, verbose ? cudaGraphDebugDotFlagsVerbose : 0);
        if (err == cudaErrorOperatingSystem) { /* the file could not be opened or written */
            (void)cudaGetLastError();
            status = gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: path \"%s\" cannot be written", fn, path);
        } else if (err != cudaSuccess) {
            status = gg_fail_cuda(ctx, err, "cudaGraphDebugDotPrint");
        }
    }
    if (graph) (void)cudaGraphDestroy(graph);
    gg_device_leave(ctx, saved);
    return status;
}

static gg_status graph_again(void *graph, const char *fn, int b, cudaGraph_t *out) {
    return gg_graph_capture_again(graph, fn, b, out);
}

gg_status gg_graph_debug_dot(gg_graph *g, int bucket, const char *path, int verbose) {
    static const char fn[] = "gg_graph_debug_dot";
    if (!g) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    GG_TRY(gg_ctx_claim(g->ctx, fn)); /* the whole call, its checks included, is this thread's */
    const gg_status status =
        gg_debug_dot(g->ctx, fn, g->n_buckets, g->config.device_select, graph_again, g, bucket, path, verbose);
    gg_ctx_release(g->ctx);
    return status;
}
