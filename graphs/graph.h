/*
 * graph.h - per-bucket CUDA graphs of a block (the public gg_graph), generic over blocks: the public graph entry
 * points (src/api) hand the block's table, desc and args to gg_block_graph_*.
 */
#ifndef GG_GRAPH_H
#define GG_GRAPH_H

#include "block.h"
#include "buckets.h"
#include "exec.h"

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

#endif
