/*
 * ssm_gate_forward.c - block 4's forward (gg_ssm_gate_forward), bf16 I/O: one elementwise pass writes
 * gate_activated (silu or a copy of the gate) and gated_output, then one cuBLASLt GEMM with its bias epilogue
 * writes output = bf16(gated_output @ Wᵀ + bias) (fp32 accumulation, the bias added in fp32, one rounding).
 * Column-major view (row-major [r,c] = column-major c x r, ld = c):
 *   out [M,H]: (H x M) = W'(E x H)ᵀ @ gated'(E x M)      m=H n=M k=E  A=W T lda=E  B=gated N ldb=E  bias: H
 */
#include "block.h"
#include "blocks.h"
#include "kernels/gg_kernels.h"

enum { F_SSM, F_GATE, F_W, F_BIAS, F_GATE_ACT, F_GATED, F_OUTPUT };

#define TENSOR(field, ...) GG_TENSOR(gg_ssm_gate_fwd_args, field, __VA_ARGS__)
static const gg_tensor_spec tensors[] = {
    [F_SSM] = TENSOR(ssm_output, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, 0),
    [F_GATE] = TENSOR(gate, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, 0),
    [F_W] = TENSOR(weight, GG_EXT_DIM0, GG_EXT_DIM1, 2, 0, 0),
    [F_BIAS] = TENSOR(bias, GG_EXT_ONE, GG_EXT_DIM0, 2, 0, 0),
    [F_GATE_ACT] = TENSOR(gate_activated, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 1, 0),
    [F_GATED] = TENSOR(gated_output, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 1, 0),
    [F_OUTPUT] = TENSOR(output, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, 0),
};
#undef TENSOR
_Static_assert(sizeof(gg_ssm_gate_fwd_args) == sizeof tensors / sizeof tensors[0] * sizeof(void *),
               "one row a field");

enum { GEMM_OUT };

static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    const int64_t M = p->key.tokens, H = p->key.dim0, E = p->key.dim1;
    const gg_gemm_shape s = {.trans_a = 1, .m = H, .n = M, .k = E, .lda = E, .ldb = E, .ldd = H,
                             .ab_type = CUDA_R_16BF, .d_type = CUDA_R_16BF, .compute = CUBLAS_COMPUTE_32F,
                             .epilogue = CUBLASLT_EPILOGUE_BIAS};
    return gg_matmul_plan(ctx, &s, &p->gemm[GEMM_OUT]);
}

static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    void *const *t = c->t;
    const gg_exec_res r = gg_block_res(ctx, c, s);
    GG_CUDA_TRY(ctx, gg_k_ssm_gate_forward(t[F_SSM], t[F_GATE], t[F_GATE_ACT], t[F_GATED], gg_tensor_elems(c, F_GATED),
                                           c->use_silu_gate, ctx->sm_count, s));
    return gg_matmul_run_epilogue(ctx, &p->gemm[GEMM_OUT], t[F_W], t[F_GATED], t[F_OUTPUT], t[F_BIAS], NULL,
                                  r.workspace[0], s);
}

const gg_block_info gg_ssm_gate_fwd_info = {
    .kind = GG_BLOCK_SSM_GATE_FWD,
    .fn = "gg_ssm_gate_forward",
    .forward = 1,
    .dim0_name = "desc->hidden",
    .dim1_name = "desc->expanded",
    .n_tensors = (int)(sizeof tensors / sizeof tensors[0]),
    .tensors = tensors,
    .desc = {.tokens = offsetof(gg_ssm_gate_desc, tokens), .dim0 = offsetof(gg_ssm_gate_desc, hidden),
             .dim1 = offsetof(gg_ssm_gate_desc, expanded), .precision = GG_NO_FIELD,
             .use_silu_gate = offsetof(gg_ssm_gate_desc, use_silu_gate), .accumulate = GG_NO_FIELD},
    .build = build,
    .enqueue = enqueue,
};
