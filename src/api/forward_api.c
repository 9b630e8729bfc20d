/*
 * forward_api.c - the public forward passes of the four blocks (include/gradgraph.h): each hands its desc and args,
 * with the forward's table, to the same generic eager path as the backward (gg_block_eager, src/core/block.c).
 */
#include "blocks.h"

gg_status gg_tanh_gate_forward(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_tanh_gate_fwd_args *args,
                               gg_stream stream) {
    return gg_block_eager(ctx, &gg_tanh_gate_fwd_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_gelu_ffn_forward(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_fwd_args *args,
                              gg_stream stream) {
    return gg_block_eager(ctx, &gg_gelu_ffn_fwd_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_mlp_forward(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_mlp_fwd_args *args, gg_stream stream) {
    return gg_block_eager(ctx, &gg_mlp_fwd_info, desc, args, (cudaStream_t)stream);
}

gg_status gg_ssm_gate_forward(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_ssm_gate_fwd_args *args,
                              gg_stream stream) {
    return gg_block_eager(ctx, &gg_ssm_gate_fwd_info, desc, args, (cudaStream_t)stream);
}
