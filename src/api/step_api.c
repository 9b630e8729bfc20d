/*
 * step_api.c - the public adds of step graphs that join a step with another part of the library (include/gradgraph.h,
 * "Step graphs"): each block add hands its desc and args, with the block's table, to gg_step_add_block
 * (graphs/step.c), where the other gg_step_* entry points live; gg_step_add_optimizer hands an optimizer's step to
 * gg_step_add_final.
 */
#include "blocks.h"
#include "src/optim/optim.h"
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

/* The optimizer's step, enqueued where the step graph's gradients are final (in the step's capture: a failure there
 * enqueues nothing that runs). */
static gg_status optimizer_stage(void *user, cudaStream_t stream) { return gg_optim_step_captured(user, stream); }

gg_status gg_step_add_optimizer(gg_step *step, gg_optim *opt) {
    const char *fn = "gg_step_add_optimizer";
    if (!step) return gg_step_add_final(step, fn, optimizer_stage, opt); /* its message: step is NULL */
    gg_ctx *ctx = gg_step_context(step);
    if (!opt) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): opt is NULL", fn, gg_step_call_count(step));
    if (opt->ctx != ctx)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s (call %d): opt was made on another context than the step (one context: one stream order)",
                       fn, gg_step_call_count(step));
    if (opt->finalized != 1)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): opt is not finalized (call gg_optim_finalize)",
                       fn, gg_step_call_count(step));
    return gg_step_add_final(step, fn, optimizer_stage, opt);
}
