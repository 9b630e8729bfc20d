/*
 * tanh_gate_forward.c - block 1's forward (gg_tanh_gate_forward): output = residual + tanh(gate) * hidden_states *
 * mask in bf16, one memory-bound kernel. The backward reads only the forward's inputs, so output is all it writes.
 */
#include "block.h"
#include "blocks.h"
#include "kernels/gg_kernels.h"

enum { F_RESIDUAL, F_GATE, F_HIDDEN, F_MASK, F_OUTPUT };

#define TENSOR(field, ...) GG_TENSOR(gg_tanh_gate_fwd_args, field, __VA_ARGS__)
static const gg_tensor_spec tensors[] = {
    [F_RESIDUAL] = TENSOR(residual, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0),
    [F_GATE] = TENSOR(gate, GG_EXT_ONE, GG_EXT_ONE, 2, 0, 0),
    [F_HIDDEN] = TENSOR(hidden_states, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0),
    [F_MASK] = TENSOR(mask, GG_EXT_TOKENS, GG_EXT_ONE, 2, 0, 0),
    [F_OUTPUT] = TENSOR(output, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, 0),
};
#undef TENSOR
_Static_assert(sizeof(gg_tanh_gate_fwd_args) == sizeof tensors / sizeof tensors[0] * sizeof(void *),
               "one row a field");

/* Nothing to plan: the kernel's grid comes from the shape. */
static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    (void)ctx;
    (void)p;
    return GG_SUCCESS;
}

static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    (void)p;
    void *const *t = c->t;
    GG_CUDA_TRY(ctx, gg_k_tanh_gate_forward(t[F_RESIDUAL], t[F_GATE], t[F_HIDDEN], t[F_MASK], t[F_OUTPUT], c->tokens,
                                            c->dim0, ctx->sm_count, s));
    return GG_SUCCESS;
}

const gg_block_info gg_tanh_gate_fwd_info = {
    .kind = GG_BLOCK_TANH_GATE_FWD,
    .fn = "gg_tanh_gate_forward",
    .forward = 1,
    .plan_in_capture = 1,
    .dim0_name = "desc->hidden",
    .n_tensors = (int)(sizeof tensors / sizeof tensors[0]),
    .tensors = tensors,
    .desc = {.tokens = offsetof(gg_tanh_gate_desc, tokens), .dim0 = offsetof(gg_tanh_gate_desc, hidden),
             .dim1 = GG_NO_FIELD, .precision = GG_NO_FIELD, .use_silu_gate = GG_NO_FIELD, .accumulate = GG_NO_FIELD},
    .build = build,
    .enqueue = enqueue,
};
