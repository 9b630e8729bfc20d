/*
 * blocks_api.c - the public entry points of the four blocks (include/gradgraph.h): the eager backward and the
 * graph's create, run and run_device. Each hands its desc and args, with the block's table, to the generic path:
 * gg_block_eager (src/core/block.c) or gg_block_graph_* (graphs/graph.c).
 */
#include "blocks.h"
#include "graph.h"

/* ---- 1. tanh-gated residual add ---- */

gg_status gg_tanh_gate_backward(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args,
                                gg_stream stream) {
    return gg_block_eager(ctx, &gg_tanh_gate_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_tanh_gate_graph_create(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_graph_config *config,
                                    gg_graph **out) {
    return gg_block_graph_create(ctx, &gg_tanh_gate_info, desc, config, out);
}

gg_status gg_tanh_gate_graph_run(gg_graph *graph, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args,
                                 gg_stream stream) {
    return gg_block_graph_run(graph, &gg_tanh_gate_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_tanh_gate_graph_run_device(gg_graph *graph, const gg_tanh_gate_desc *desc, const int64_t *device_tokens,
                                        const gg_tanh_gate_args *args, gg_stream stream) {
    return gg_block_graph_run_device(graph, &gg_tanh_gate_info, desc, device_tokens, args, (cudaStream_t)stream);
}

/* ---- 2. GELU feed-forward ---- */

gg_status gg_gelu_ffn_backward(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args,
                               gg_stream stream) {
    return gg_block_eager(ctx, &gg_gelu_ffn_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_gelu_ffn_graph_create(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_graph_config *config,
                                   gg_graph **out) {
    return gg_block_graph_create(ctx, &gg_gelu_ffn_info, desc, config, out);
}

gg_status gg_gelu_ffn_graph_run(gg_graph *graph, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args,
                                gg_stream stream) {
    return gg_block_graph_run(graph, &gg_gelu_ffn_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_gelu_ffn_graph_run_device(gg_graph *graph, const gg_gelu_ffn_desc *desc, const int64_t *device_tokens,
                                       const gg_gelu_ffn_args *args, gg_stream stream) {
    return gg_block_graph_run_device(graph, &gg_gelu_ffn_info, desc, device_tokens, args, (cudaStream_t)stream);
}

/* ---- 3. MLP with biases ---- */

gg_status gg_mlp_backward(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_mlp_args *args, gg_stream stream) {
    return gg_block_eager(ctx, &gg_mlp_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_mlp_graph_create(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_graph_config *config, gg_graph **out) {
    return gg_block_graph_create(ctx, &gg_mlp_info, desc, config, out);
}

gg_status gg_mlp_graph_run(gg_graph *graph, const gg_mlp_desc *desc, const gg_mlp_args *args, gg_stream stream) {
    return gg_block_graph_run(graph, &gg_mlp_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_mlp_graph_run_device(gg_graph *graph, const gg_mlp_desc *desc, const int64_t *device_tokens,
                                  const gg_mlp_args *args, gg_stream stream) {
    return gg_block_graph_run_device(graph, &gg_mlp_info, desc, device_tokens, args, (cudaStream_t)stream);
}

/* ---- 4. SSM output projection with gate ---- */

gg_status gg_ssm_gate_backward(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args,
                               gg_stream stream) {
    return gg_block_eager(ctx, &gg_ssm_gate_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_ssm_gate_graph_create(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_graph_config *config,
                                   gg_graph **out) {
    return gg_block_graph_create(ctx, &gg_ssm_gate_info, desc, config, out);
}

gg_status gg_ssm_gate_graph_run(gg_graph *graph, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args,
                                gg_stream stream) {
    return gg_block_graph_run(graph, &gg_ssm_gate_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_ssm_gate_graph_run_device(gg_graph *graph, const gg_ssm_gate_desc *desc, const int64_t *device_tokens,
                                       const gg_ssm_gate_args *args, gg_stream stream) {
    return gg_block_graph_run_device(graph, &gg_ssm_gate_info, desc, device_tokens, args, (cudaStream_t)stream);
}
