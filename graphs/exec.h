/*
 * exec.h - what per-block graphs (graph.c) and step graphs (step*.c) share: capturing on the context's capture
 * stream, installing a captured graph into a bucket's exec cache (update in place or instantiate), the replay with the
 * communicator's rules, the device-side bucket selection (a SWITCH node), and a bucket's graph written as DOT
 * (debug_dot.c). Neither kind of graph calls into the other.
 */
#ifndef GG_EXEC_H
#define GG_EXEC_H

#include <cuda_runtime_api.h>

#include "exec_cache.h"
#include "gradgraph.h"

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
