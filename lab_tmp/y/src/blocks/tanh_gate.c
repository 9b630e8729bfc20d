/*
 * tanh_gate.c - block 1, tanh-gated residual add (gg_tanh_gate_backward), bf16 I/O. Memory-bound: one kernel reads
 * grad_output and hidden_states once, writes both [M,H] outputs, and finishes the gate gradient in its last CTA
 * (partial sums added in a fixed order: the same bits every run).
 */
#include "block.h"
#include "dist.h"
#include "graph.h"
#include "kernels/gg_kernels.h"

enum { T_GRAD_OUTPUT, T_GATE, T_HIDDEN, T_MASK, T_GRAD_RESIDUAL, T_GRAD_HIDDEN, T_GRAD_GATE };

static const gg_tensor_spec tensors[] = {
    [T_GRAD_OUTPUT] = {"grad_output", GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0},
    [T_GATE] = {"gate", GG_EXT_ONE, GG_EXT_ONE, 2, 0, 0},
    [T_HIDDEN] = {"hidden_states", GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0},
    [T_MASK] = {"mask", GG_EXT_TOKENS, GG_EXT_ONE, 2, 0, 0},
    [T_GRAD_RESIDUAL] = {"grad_residual", GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, 0},
    [T_GRAD_HIDDEN] = {"grad_hidden_states", GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, 0},
    [T_GRAD_GATE] = {"grad_gate", GG_EXT_ONE, GG_EXT_ONE, 2, 1, 0},
};

static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    p->reduce_blocks = gg_k_tanh_gate_grid(p->key.tokens, ctx->sm_count); /* partial sums: ctx->tanh_partials */
    return GG_SUCCESS;
}

static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    void *const *t = c->t;
    GG_CUDA_TRY(ctx, gg_k_tanh_gate(t[T_GRAD_OUTPUT], t[T_GATE], t[T_HIDDEN], t[T_MASK], t[T_GRAD_RESIDUAL],
                                    t[T_GRAD_HIDDEN], ctx->tanh_partials, ctx->counter + GG_COUNTER_TANH_GATE,
                                    t[T_GRAD_GATE], c->accumulate, p->reduce_blocks, c->tokens, c->dim0, s));
    return gg_dist_grad_ready(ctx, c, s, T_GRAD_GATE);
}

const gg_block_info gg_tanh_gate_info = {GG_BLOCK_TANH_GATE, "gg_tanh_gate_backward", "desc->hidden", NULL, 0,
                                         (int)(sizeof tensors / sizeof tensors[0]), tensors, build, enqueue, 0u};

/* The generic form of a public call (shared by the eager and graph entry points). */
void gg_tanh_gate_pack(gg_block_call *c, const gg_tanh_gate_desc *d, const gg_tanh_gate_args *a) {
    *c = (gg_block_call){.info = &gg_tanh_gate_info, .tokens = d->tokens, .dim0 = d->hidden,
                         .accumulate = d->accumulate};
    c->t[T_GRAD_OUTPUT] = (void *)a->grad_output;
    c->t[T_GATE] = (void *)a->gate;
    c->t[T_HIDDEN] = (void *)a->hidden_states;
    c->t[T_MASK] = (void *)a->mask;
    c->t[T_GRAD_RESIDUAL] = a->grad_residual;
    c->t[T_GRAD_HIDDEN] = a->grad_hidden_states;
    c->t[T_GRAD_GATE] = a->grad_gate;
}

GG_BLOCK_ENTRY_POINTS(tanh_gate, GG_PRECISION_DEFAULT)
