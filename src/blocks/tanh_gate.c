/*
 * tanh_gate.c - block 1, tanh-gated residual add (gg_tanh_gate_backward), bf16 I/O. Memory-bound: one pass over
 * grad_output and hidden_states writes both [M,H] outputs and per-block partial sums of the gate gradient; a
 * one-block kernel adds the partials in a fixed order (the same bits every run) and writes the scalar.
 */
#include "kernels/gg_kernels.h"
#include "plan.h"
#include "validate.h"

enum { BUF_PARTIALS };

static gg_status build_tanh_gate_plan(gg_ctx *ctx, gg_block_plan *p) {
    p->reduce_blocks = gg_k_tanh_gate_grid(p->key.tokens, p->key.dim0, ctx->sm_count);
    p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)p->reduce_blocks * sizeof(float));
    return GG_SUCCESS;
}

gg_status gg_tanh_gate_backward(gg_ctx *ctx, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args,
                                gg_stream stream) {
    static const char fn[] = "gg_tanh_gate_backward";
    GG_TRY(gg_check_call(ctx, fn, desc, args));
    const int64_t M = desc->tokens, H = desc->hidden;
    GG_TRY(gg_check_tokens(ctx, fn, "desc->tokens", M));
    GG_TRY(gg_check_dim(ctx, fn, "desc->hidden", H));
    const gg_tensor_check t[] = {
        {"args->grad_output", args->grad_output, M, H, 2, 0},
        {"args->gate", args->gate, 1, 1, 2, 0},
        {"args->hidden_states", args->hidden_states, M, H, 2, 0},
        {"args->mask", args->mask, M, 1, 2, 0},
        {"args->grad_residual", args->grad_residual, M, H, 2, 1},
        {"args->grad_hidden_states", args->grad_hidden_states, M, H, 2, 1},
        {"args->grad_gate", args->grad_gate, 1, 1, 2, 1},
    };
    GG_TRY(gg_check_tensors(ctx, fn, t, (int)(sizeof t / sizeof t[0])));

    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    const gg_plan_key key = gg_plan_key_make(GG_BLOCK_TANH_GATE, GG_PRECISION_BF16, M, H, 0);
    gg_block_plan *plan = NULL;
    gg_status status = gg_plan_get(ctx, &key, build_tanh_gate_plan, &plan);
    if (status == GG_SUCCESS) {
        cudaStream_t s = (cudaStream_t)stream;
        float *partials = gg_plan_buffer(ctx, plan, BUF_PARTIALS);
        cudaError_t err = gg_k_tanh_gate(args->grad_output, args->gate, args->hidden_states, args->mask,
                                         args->grad_residual, args->grad_hidden_states, partials,
                                         plan->reduce_blocks, M, H, s);
        if (err == cudaSuccess) err = gg_k_tanh_gate_finish(partials, plan->reduce_blocks, args->gate, args->grad_gate, s);
        if (err != cudaSuccess) status = gg_fail_cuda(ctx, err, "tanh_gate kernels");
    }
    gg_device_leave(saved);
    return status;
}
