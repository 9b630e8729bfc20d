/*
 * tanh_gate.c - block 1, tanh-gated residual add (gg_tanh_gate_backward), bf16 I/O. Memory-bound: one kernel reads
 * grad_output and hidden_states once, writes both [M,H] outputs, and finishes the gate gradient in its last CTA
 * (partial sums added in a fixed order: the same bits every run).
 */
#include "block.h"
#include "ddp.h"
#include "blocks.h"
#include "kernels/gg_kernels.h"

enum { T_GRAD_OUTPUT, T_GATE, T_HIDDEN, T_MASK, T_GRAD_RESIDUAL, T_GRAD_HIDDEN, T_GRAD_GATE };

#define TENSOR(field, ...) GG_TENSOR(gg_tanh_gate_args, field, __VA_ARGS__)
static const gg_tensor_spec tensors[] = {
    [T_GRAD_OUTPUT] = TENSOR(grad_output, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0),
    [T_GATE] = TENSOR(gate, GG_EXT_ONE, GG_EXT_ONE, 2, 0, 0),
    [T_HIDDEN] = TENSOR(hidden_states, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0),
    [T_MASK] = TENSOR(mask, GG_EXT_TOKENS, GG_EXT_ONE, 2, 0, 0),
    [T_GRAD_RESIDUAL] = TENSOR(grad_residual, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, 0),
    [T_GRAD_HIDDEN] = TENSOR(grad_hidden_states, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, 0),
    [T_GRAD_GATE] = TENSOR(grad_gate, GG_EXT_ONE, GG_EXT_ONE, 2, 1, 0),
};
#undef TENSOR
_Static_assert(sizeof(gg_tanh_gate_args) == sizeof tensors / sizeof tensors[0] * sizeof(void *), "one row a field");

typedef struct tanh_gate_plan {
    gg_block_plan base;
    int reduce_blocks; /* the kernel's grid: one partial sum per CTA (ctx->tanh_partials) */
} tanh_gate_plan;

static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    ((tanh_gate_plan *)p)->reduce_blocks = gg_k_tanh_gate_grid(p->key.tokens, ctx->sm_count);
    return GG_SUCCESS;
}

static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    void *const *t = c->t;
    const int grid = ((const tanh_gate_plan *)p)->reduce_blocks;
    /* The partial-sum slots are the context's: the kernel runs on the caller's stream only, so no two at once. */
    const gg_exec_res r = gg_block_res(ctx, c, s);
    GG_CUDA_TRY(ctx, gg_k_tanh_gate(t[T_GRAD_OUTPUT], t[T_GATE], t[T_HIDDEN], t[T_MASK], t[T_GRAD_RESIDUAL],
                                    t[T_GRAD_HIDDEN], ctx->tanh_partials, r.counter + GG_COUNTER_TANH_GATE,
                                    t[T_GRAD_GATE], c->accumulate, grid, c->tokens, c->dim0, s));
    return gg_dist_grad_ready(ctx, c, s, T_GRAD_GATE);
}

const gg_block_info gg_tanh_gate_info = {
    .kind = GG_BLOCK_TANH_GATE,
    .fn = "gg_tanh_gate_backward",
    .dim0_name = "desc->hidden",
    .n_tensors = (int)(sizeof tensors / sizeof tensors[0]),
    .tensors = tensors,
    .desc = {.tokens = offsetof(gg_tanh_gate_desc, tokens), .dim0 = offsetof(gg_tanh_gate_desc, hidden),
             .dim1 = GG_NO_FIELD, .precision = GG_NO_FIELD, .use_silu_gate = GG_NO_FIELD,
             .accumulate = offsetof(gg_tanh_gate_desc, accumulate)},
    .build = build,
    .plan_bytes = sizeof(tanh_gate_plan),
    .enqueue = enqueue,
};
