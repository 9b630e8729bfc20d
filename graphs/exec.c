/*
 * exec.c - the capture, install and replay of executable graphs, and the device-side bucket selection, for per-block
 * graphs and step graphs alike (exec.h).
 */
#include "exec.h"

#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "ddp.h"
#include "internal.h"
#include "kernels/gg_kernels.h"

void gg_exec_destroy_all(gg_exec_cache *cache) {
    for (int i = 0; i < cache->capacity; ++i)
        if (cache->entries[i].exec) (void)cudaGraphExecDestroy((cudaGraphExec_t)cache->entries[i].exec);
    gg_exec_cache_free(cache);
}

gg_status gg_capture(gg_ctx *ctx, gg_enqueue_fn enqueue, void *user, cudaGraph_t *graph) {
    const int into_existing = *graph != NULL;
    if (into_existing)
        GG_CUDA_TRY(ctx, cudaStreamBeginCaptureToGraph(ctx->capture, *graph, NULL, NULL, 0,
                                                       cudaStreamCaptureModeThreadLocal));
    else
        GG_CUDA_TRY(ctx, cudaStreamBeginCapture(ctx->capture, cudaStreamCaptureModeThreadLocal));
    gg_status status = enqueue(user, ctx->capture);
    cudaGraph_t captured = NULL;
    const cudaError_t end = cudaStreamEndCapture(ctx->capture, &captured);
    if (status == GG_SUCCESS && end != cudaSuccess) status = gg_fail_cuda(ctx, end, "cudaStreamEndCapture");
    if (status != GG_SUCCESS) {
        if (captured && !into_existing) (void)cudaGraphDestroy(captured);
        (void)cudaGetLastError();
        return status;
    }
    if (!into_existing) *graph = captured;
    return GG_SUCCESS;
}

/* Puts a captured graph into the cache: updates the least recently used exec in place when the topology allows,
 * else instantiates. Consumes graph. */
gg_status gg_exec_install(gg_ctx *ctx, gg_exec_cache *cache, const gg_exec_key *key, cudaGraph_t graph,
                          gg_exec_entry **out) {
    gg_exec_entry *slot = gg_exec_cache_slot(cache, key, ctx->capture_generation);
    gg_status status = GG_SUCCESS;
    if (slot->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate((cudaGraphExec_t)slot->exec, graph, &info) == cudaSuccess) goto done;
        (void)cudaGetLastError(); /* topology or node kinds changed: instantiate afresh */
        (void)cudaGraphExecDestroy((cudaGraphExec_t)slot->exec);
        slot->exec = NULL;
        slot->bytes = 0;
    }
    size_t free_before = 0, free_after = 0, total = 0;
    (void)cudaMemGetInfo(&free_before, &total);
    cudaGraphExec_t exec = NULL;
    /* Node priorities (the side stream's, recorded at capture) are ignored at launch unless asked for. */
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    if (err != cudaSuccess) {
        memset(&slot->key, 0, sizeof slot->key);
        status = gg_fail_cuda(ctx, err, "cudaGraphInstantiate");
        goto done;
    }
    (void)cudaMemGetInfo(&free_after, &total);
    slot->exec = exec;
    slot->bytes = free_before > free_after ? free_before - free_after : 0;
done:
    (void)cudaGraphDestroy(graph);
    *out = status == GG_SUCCESS ? slot : NULL;
    return status;
}

gg_status gg_exec_replay(gg_ctx *ctx, const char *fn, gg_exec_cache *cache, const gg_exec_key *key, int sync,
                         int *holds_nccl, gg_build_fn build, void *user, cudaStream_t stream) {
    GG_TRY(gg_refuse_in_step_callback(ctx, fn));
    int saved = 0;
    GG_TRY(gg_device_enter_stream(ctx, fn, stream, &saved, NULL));
    gg_status status = sync ? gg_dist_enter(ctx, fn) : GG_SUCCESS;
    if (status != GG_SUCCESS) {
        gg_device_leave(ctx, saved);
        return status;
    }
    nvtxRangePushA(fn);
    gg_exec_entry *e = gg_exec_cache_find(cache, key, ctx->capture_generation);
    if (!e) {
        /* A build whose plan lookups grew the scratch arena (one lost to a failed growth is made again, bucket by
         * bucket) captured its earlier work on an arena freed since: built again, on the arena as it is now. */
        cudaGraph_t graph = NULL;
        for (int attempt = 0; status == GG_SUCCESS; ++attempt) {
            const uint64_t generation = ctx->capture_generation;
            status = build(user, &graph);
            if (status != GG_SUCCESS || ctx->capture_generation == generation) break;
            (void)cudaGraphDestroy(graph);
            graph = NULL;
            if (attempt == 2)
                status = gg_fail(ctx, GG_ERROR_CUDA, "%s: the scratch arena moved at every capture; nothing ran", fn);
        }
        if (status == GG_SUCCESS) status = gg_exec_install(ctx, cache, key, graph, &e);
    }
    if (status == GG_SUCCESS && sync && !*holds_nccl) {
        *holds_nccl = 1;
        gg_dist_graph_holds(ctx);
    }
    int watched = 0;
    if (status == GG_SUCCESS && sync) status = gg_dist_await_replay_slot(ctx, fn, stream, &watched);
    if (status == GG_SUCCESS) {
        const cudaError_t err = cudaGraphLaunch((cudaGraphExec_t)e->exec, stream);
        if (err != cudaSuccess) status = gg_fail_cuda(ctx, err, "cudaGraphLaunch");
        else if (watched) gg_dist_watch(ctx, stream, GG_WATCH_REPLAY); /* watched from now */
    }
    nvtxRangePop();
    if (sync) {
        status = gg_dist_settle(ctx, status, &stream); /* the capture (if any) has ended */
        gg_dist_leave(ctx);
    }
    gg_device_leave(ctx, saved);
    return status;
}

/* ---- device-side bucket selection ---- */

/* selection kernel -> SWITCH(condition) -> body[b], each body captured by branch() into the graph the node made. */
gg_status gg_switch_graph_build(gg_ctx *ctx, const int64_t *device_tokens, const int64_t *device_buckets,
                                int n_buckets, int64_t capacity, unsigned *device_errors, gg_branch_fn branch,
                                void *user, cudaGraph_t *out) {
    gg_status status = GG_SUCCESS;
    cudaGraph_t graph = NULL;
    GG_CUDA_TRY(ctx, cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    /* Reset to "no bucket" at every launch, so a selection that failed to run leaves nothing to execute. */
    GG_CUDA_GOTO(ctx, cudaGraphConditionalHandleCreate(&handle, graph, (unsigned)n_buckets, cudaGraphCondAssignDefault),
                 status, fail);
    GG_CUDA_GOTO(ctx,
                 cudaStreamBeginCaptureToGraph(ctx->capture, graph, NULL, NULL, 0, cudaStreamCaptureModeThreadLocal),
                 status, fail);
    const cudaError_t launched = gg_k_select_bucket(device_tokens, device_buckets, n_buckets, capacity, handle,
                                                    device_errors, ctx->capture);
    cudaGraph_t same = NULL;
    const cudaError_t ended = cudaStreamEndCapture(ctx->capture, &same);
    /* named here: GG_CUDA_GOTO would name the variables */
    if (launched != cudaSuccess || ended != cudaSuccess) {
        status = launched != cudaSuccess ? gg_fail_cuda(ctx, launched, "gg_k_select_bucket")
                                         : gg_fail_cuda(ctx, ended, "cudaStreamEndCapture");
        goto fail;
    }
    cudaGraphNode_t select = NULL;
    size_t count = 1;
    GG_CUDA_GOTO(ctx, cudaGraphGetNodes(graph, &select, &count), status, fail);
    struct cudaGraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeSwitch;
    params.conditional.size = (unsigned)n_buckets;
    cudaGraphNode_t cond = NULL;
    GG_CUDA_GOTO(ctx, cudaGraphAddNode(&cond, graph, &select, NULL, 1, &params), status, fail);
    for (int b = 0; b < n_buckets; ++b) GG_GOTO(branch(user, b, params.conditional.phGraph_out[b]), status, fail);
    *out = graph;
    return GG_SUCCESS;
fail:
    (void)cudaGraphDestroy(graph);
    return status;
}

