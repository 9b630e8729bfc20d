/*
 * step_api.c - the public block adds of step graphs (include/gradgraph.h, "Step graphs"): each hands its desc and
 * args, with the block's table, to gg_step_add_block (graphs/step.c), where the other gg_step_* entry points live.
 */
#include "blocks.h"
#include "step.h"

gg_status gg_step_add_tanh_gate(gg_step *step, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args) {
    return gg_step_add_block(step, &gg_tanh_gate_info, "gg_step_add_tanh_gate", desc, args);
}

gg_status gg_step_add_gelu_ffn(gg_step *step, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args) {
    return gg_step_add_block(step, &gg_gelu_ffn_info, "gg_step_add_gelu_ffn", desc, args);
}

gg_status gg_step_add_mlp(gg_step *step, const gg_mlp_desc *desc, const gg_mlp_args *args) {
    return gg_step_add_block(step, &gg_mlp_info, "gg_step_add_mlp", desc, args);
}

gg_status gg_step_add_ssm_gate(gg_step *step, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args) {
    return gg_step_add_block(step, &gg_ssm_gate_info, "gg_step_add_ssm_gate", desc, args);
}
