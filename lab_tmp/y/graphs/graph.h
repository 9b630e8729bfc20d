/*
 * graph.h - per-bucket CUDA graphs of a block (the public gg_graph), generic over blocks: a block's public graph
 * entry points pack their desc/args into a gg_block_call and call these.
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
    struct gg_graph *next;            /* the context's list */
};

gg_status gg_graph_create_call(gg_ctx *ctx, const gg_block_call *shape, gg_precision requested,
                               const gg_graph_config *config, gg_graph **out);
gg_status gg_graph_run_call(gg_graph *graph, gg_block_call *call, gg_precision requested, cudaStream_t stream);
gg_status gg_graph_run_device_call(gg_graph *graph, gg_block_call *call, gg_precision requested,
                                   const int64_t *device_tokens, cudaStream_t stream);

/* graph, desc and args non-NULL, and the graph made for this block. */
gg_status gg_check_graph_call(gg_graph *graph, const gg_block_info *info, const char *fn, const void *desc,
                              const void *args);

/* The four public entry points of a block, from its pack function and its gg_<block>_info: the eager
 * gg_<block>_backward and gg_<block>_graph_create/_run/_run_device. PRECISION is the desc's precision request (an
 * expression of `desc`). */
#define GG_BLOCK_ENTRY_POINTS(block, PRECISION)                                                                    \
    gg_status gg_##block##_backward(gg_ctx *ctx, const gg_##block##_desc *desc, const gg_##block##_args *args,     \
                                    gg_stream stream) {                                                            \
        GG_TRY(gg_check_call(ctx, gg_##block##_info.fn, desc, args));                                              \
        gg_block_call call;                                                                                        \
        gg_##block##_pack(&call, desc, args);                                                                      \
        GG_TRY(gg_block_validate(ctx, gg_##block##_info.fn, &call, PRECISION));                                    \
        return gg_block_run_eager(ctx, &call, (cudaStream_t)stream);                                               \
    }                                                                                                              \
    gg_status gg_##block##_graph_create(gg_ctx *ctx, const gg_##block##_desc *desc, const gg_graph_config *config, \
                                        gg_graph **out) {                                                          \
        if (out) *out = NULL;                                                                                      \
        const gg_##block##_args none = {0};                                                                        \
        GG_TRY(gg_check_call(ctx, "gg_" #block "_graph_create", desc, &none));                                     \
        gg_block_call call;                                                                                        \
        gg_##block##_pack(&call, desc, &none);                                                                     \
        return gg_graph_create_call(ctx, &call, PRECISION, config, out);                                           \
    }                                                                                                              \
    gg_status gg_##block##_graph_run(gg_graph *graph, const gg_##block##_desc *desc, const gg_##block##_args *args, \
                                     gg_stream stream) {                                                           \
        GG_TRY(gg_check_graph_call(graph, &gg_##block##_info, "gg_" #block "_graph_run", desc, args));            \
        gg_block_call call;                                                                                        \
        gg_##block##_pack(&call, desc, args);                                                                      \
        return gg_graph_run_call(graph, &call, PRECISION, (cudaStream_t)stream);                                   \
    }                                                                                                              \
    gg_status gg_##block##_graph_run_device(gg_graph *graph, const gg_##block##_desc *desc,                        \
                                            const int64_t *device_tokens, const gg_##block##_args *args,           \
                                            gg_stream stream) {                                                    \
        GG_TRY(gg_check_graph_call(graph, &gg_##block##_info, "gg_" #block "_graph_run_device", desc, args));     \
        gg_block_call call;                                                                                        \
        gg_##block##_pack(&call, desc, args);                                                                      \
        return gg_graph_run_device_call(graph, &call, PRECISION, device_tokens, (cudaStream_t)stream);             \
    }

#endif
