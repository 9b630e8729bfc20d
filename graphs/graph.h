/*
 * graph.h - per-bucket CUDA graphs of a block (the public gg_graph), generic over blocks: the public graph entry
 * points (src/api) hand the block's table, desc and args to gg_block_graph_*.
 */
#ifndef GG_GRAPH_H
#define GG_GRAPH_H

#include "block.h"
#include "buckets.h"
#include "exec_cache.h"

struct gg_graph {
    gg_ctx *ctx;
    gg_block_call shape;              /* info, dims, precision of every call */
    gg_graph_config config;
    int n_buckets;
    int64_t buckets[GG_MAX_BUCKETS];  /* ascending */
    gg_exec_cache execs[GG_MAX_BUCKETS];
    gg_exec_cache device_execs;       /* the device-selected graphs (all buckets in one) */
    void *staging;                    /* [largest bucket, ...] copies of the block's [M, ...] tensors */
    size_t staging_bytes;
    size_t staging_offset[GG_BLOCK_MAX_TENSORS];
    int64_t *device_buckets;          /* the bucket sizes, for the device-side selection */
    unsigned *device_errors;          /* device-selected runs that found no bucket */
    int syncs;                        /* reduces parameter gradients across the context's ranks */
    int has_nccl;                     /* an executable graph holds NCCL work: destroy before the communicator */
    gg_ctx_hook hook;                 /* destroyed with the context, before its communicator */
};

/* The graph entry points of every block (the public gg_<block>_graph_* call them with the block's gg_block_info):
 * they check and pack the desc and args (gg_block_pack), then make, run or run on the device the block's graph. */
gg_status gg_block_graph_create(gg_ctx *ctx, const gg_block_info *info, const void *desc,
                                const gg_graph_config *config, gg_graph **out);
gg_status gg_block_graph_run(gg_graph *graph, const gg_block_info *info, const void *desc, const void *args,
                             cudaStream_t stream);
gg_status gg_block_graph_run_device(gg_graph *graph, const gg_block_info *info, const void *desc,
                                    const int64_t *device_tokens, const void *args, cudaStream_t stream);

/* The graph a replay of bucket b runs (b = -1: the device-selected graph), captured again from the call of the
 * bucket's most recently used executable graph into *out, which the caller destroys. Nothing is launched. The
 * device is entered by the caller; `fn` names the entry point in messages. */
gg_status gg_graph_capture_again(gg_graph *graph, const char *fn, int b, cudaGraph_t *out);

/* What gg_graph_debug_dot and gg_step_debug_dot share: checks path and bucket (in [-1, n_buckets); -1 only with
 * device_select), enters the device, has again(owner, fn, bucket, &graph) capture the bucket's graph, writes it as
 * DOT (verbose: every node's parameters) and destroys it. Nothing is launched. */
typedef gg_status (*gg_capture_again_fn)(void *owner, const char *fn, int bucket, cudaGraph_t *out);
gg_status gg_debug_dot(gg_ctx *ctx, const char *fn, int n_buckets, int device_select, gg_capture_again_fn again,
                       void *owner, int bucket, const char *path, int verbose);

/* Puts a captured graph into cache under key (captured against the context's scratch generation): updates the least
 * recently used exec in place when the topology allows, else instantiates (with node priorities). Consumes graph.
 * Shared by per-block graphs and step graphs. */
gg_status gg_exec_install(gg_ctx *ctx, gg_exec_cache *cache, const gg_exec_key *key, cudaGraph_t graph,
                          gg_exec_entry **out);
/* Device-side bucket selection, shared by per-block and step graphs: a new graph (into *out) whose first node, a
 * kernel, reads M from device_tokens and sets a SWITCH node's condition to the first of n_buckets ascending
 * device_buckets >= M (none: M < 1, M > capacity or past the last bucket, counted in *device_errors); branch(user,
 * b, body) then captures bucket b's work into the SWITCH node's body graph b (with cudaStreamBeginCaptureToGraph on
 * the context's capture stream). The device is entered by the caller. On failure nothing is left. */
typedef gg_status (*gg_branch_fn)(void *user, int b, cudaGraph_t body);
gg_status gg_switch_graph_build(gg_ctx *ctx, const int64_t *device_tokens, const int64_t *device_buckets,
                                int n_buckets, int64_t capacity, unsigned *device_errors, gg_branch_fn branch,
                                void *user, cudaGraph_t *out);

/* Captures what enqueue(user, stream) puts on the context's capture stream into *graph: a new graph when *graph is
 * NULL, else into that one (a SWITCH node's body, which its parent owns). Whatever happens, the stream leaves capture
 * mode; on failure a graph made here is destroyed. Shared by per-block graphs and step graphs. */
typedef gg_status (*gg_enqueue_fn)(void *user, cudaStream_t stream);
gg_status gg_capture(gg_ctx *ctx, gg_enqueue_fn enqueue, void *user, cudaGraph_t *graph);

/* The replay shared by per-block graphs and step graphs: in the context's device and, when `sync`, holding the
 * communicator from before a capture to the launch (it is never aborted under the capture or between the check and
 * the launch of a graph whose NCCL kernels use it), finds key's exec in cache or, missing, has build(user, &graph)
 * make its graph and installs it (gg_exec_install), then launches it on stream (refused inside a step's callback).
 * The first syncing exec sets *holds_nccl and tells the communicator (gg_dist_graph_holds: it is not destroyed under
 * an exec that holds NCCL work); a syncing launch is watched from then (gg_dist_watch). `fn` names the
 * entry point. */
typedef gg_status (*gg_build_fn)(void *user, cudaGraph_t *graph);
gg_status gg_exec_replay(gg_ctx *ctx, const char *fn, gg_exec_cache *cache, const gg_exec_key *key, int sync,
                         int *holds_nccl, gg_build_fn build, void *user, cudaStream_t stream);

/* Destroys every exec of cache and frees it. */
void gg_exec_destroy_all(gg_exec_cache *cache);

#endif
