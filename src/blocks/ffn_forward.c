/*
 * ffn_forward.c - the forwards of blocks 2 (gg_gelu_ffn_forward) and 3 (gg_mlp_forward), fp32 I/O: the same two
 * GEMMs with GELU(tanh) between, block 3 with biases. One stream, in order; fp16 mode converts the operands first
 * (into the context's scratch, the overflow word set as in the backward) and the activation before the second GEMM;
 * the caller may give the weights' fp16 copies instead, and have the copies of hidden_states and the activation
 * written to its own buffers (for the backward's *_fp16 operands) instead of the scratch.
 *
 * The GELU runs in the first GEMM's epilogue (cuBLASLt's GELU_AUX, GELU_AUX_BIAS for block 3: the tanh
 * approximation, D = gelu(x + b) and the pre-activation x + b in the aux matrix, laid out as D), or, with
 * GG_FORWARD_GELU=kernel in the environment when the plan is made, in gradgraph's kernel after a GEMM that writes
 * the pre-activation (with a BIAS epilogue for block 3): a switch to measure both. Block 2's tanh_inner, when asked
 * for, comes from that kernel in either case (the epilogue has no output for it).
 * Column-major view (row-major [r,c] = column-major c x r, ld = c):
 *   x   [M,F]: (F x M) = W1'(D x F)ᵀ  @ X'(D x M)        m=F n=M k=D  A=W1 T lda=D  B=X N ldb=D    bias1: F
 *   out [M,D]: (D x M) = W2'(F x D)ᵀ  @ act'(F x M)      m=D n=M k=F  A=W2 T lda=F  B=act N ldb=F  bias2: D
 */
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "blocks.h"
#include "kernels/gg_kernels.h"

/* Tensor order: the common ones first, then block 2's tanh_inner or block 3's biases. */
enum { F_X, F_W1, F_W2, F_PRE, F_ACT, F_OUT, F_EXTRA0, F_EXTRA1 };
enum { F_TANH = F_EXTRA0 };                 /* block 2 (optional) */
enum { F_B1 = F_EXTRA0, F_B2 = F_EXTRA1 };  /* block 3 */
/* Then fp16 mode's optional copies: the weights' (read instead of converting), and where to write hidden_states' and
 * the activation's, which the forward makes anyway, and the pre-activation's (a conversion of its own), for the
 * backward (gg_*_args' *_fp16 inputs). */
enum { F16_W1, F16_W2, F16_X, F16_ACT, F16_PRE };
enum { F_F16_FFN = F_TANH + 1, F_F16_MLP = F_B2 + 1 };

enum { GEMM_1, GEMM_2 };
enum { BUF_X16, BUF_W1_16, BUF_W2_16, BUF_ACT16 }; /* fp16 mode's operands */

#define COMMON_TENSORS(args, pre, act)                                                                              \
    [F_X] = GG_TENSOR(args, hidden_states, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 0, 0),                                   \
    [F_W1] = GG_TENSOR(args, weight1, GG_EXT_DIM1, GG_EXT_DIM0, 4, 0, 0),                                          \
    [F_W2] = GG_TENSOR(args, weight2, GG_EXT_DIM0, GG_EXT_DIM1, 4, 0, 0),                                          \
    [F_PRE] = GG_TENSOR(args, pre, GG_EXT_TOKENS, GG_EXT_DIM1, 4, 1, 0),                                           \
    [F_ACT] = GG_TENSOR(args, act, GG_EXT_TOKENS, GG_EXT_DIM1, 4, 1, 0),                                           \
    [F_OUT] = GG_TENSOR(args, output, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 1, 0)

#define FP16_TENSORS(args, first, act16, pre16)                                                                     \
    [(first) + F16_W1] = GG_TENSOR(args, weight1_fp16, GG_EXT_DIM1, GG_EXT_DIM0, 2, 0, GG_TENSOR_FP16_ONLY),          \
    [(first) + F16_W2] = GG_TENSOR(args, weight2_fp16, GG_EXT_DIM0, GG_EXT_DIM1, 2, 0, GG_TENSOR_FP16_ONLY),          \
    [(first) + F16_X] = GG_TENSOR(args, hidden_states_fp16, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 1, GG_TENSOR_FP16_ONLY),   \
    [(first) + F16_ACT] = GG_TENSOR(args, act16, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 1, GG_TENSOR_FP16_ONLY),              \
    [(first) + F16_PRE] = GG_TENSOR(args, pre16, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 1, GG_TENSOR_FP16_ONLY)

static const gg_tensor_spec gelu_ffn_tensors[] = {
    COMMON_TENSORS(gg_gelu_ffn_fwd_args, linear1_out, gelu_out),
    [F_TANH] = GG_TENSOR(gg_gelu_ffn_fwd_args, tanh_inner, GG_EXT_TOKENS, GG_EXT_DIM1, 4, 1, GG_TENSOR_OPTIONAL),
    FP16_TENSORS(gg_gelu_ffn_fwd_args, F_F16_FFN, gelu_out_fp16, linear1_out_fp16),
};
static const gg_tensor_spec mlp_tensors[] = {
    COMMON_TENSORS(gg_mlp_fwd_args, intermediate, intermediate_activated),
    [F_B1] = GG_TENSOR(gg_mlp_fwd_args, bias1, GG_EXT_ONE, GG_EXT_DIM1, 4, 0, 0),
    [F_B2] = GG_TENSOR(gg_mlp_fwd_args, bias2, GG_EXT_ONE, GG_EXT_DIM0, 4, 0, 0),
    FP16_TENSORS(gg_mlp_fwd_args, F_F16_MLP, intermediate_activated_fp16, intermediate_fp16),
};
#define N_TENSORS(table) (int)(sizeof table / sizeof table[0])
_Static_assert(sizeof(gg_gelu_ffn_fwd_args) == N_TENSORS(gelu_ffn_tensors) * sizeof(void *), "one row a field");
_Static_assert(sizeof(gg_mlp_fwd_args) == N_TENSORS(mlp_tensors) * sizeof(void *), "one row a field");

typedef struct ffn_fwd_plan {
    gg_block_plan base;
    int gelu_epilogue; /* the GELU in the first GEMM's epilogue (else gg_k_gelu_forward after it) */
} ffn_fwd_plan;

static int has_bias(const gg_block_plan *p) { return p->key.block == GG_BLOCK_MLP_FWD; }
static int has_bias_call(const gg_block_call *c) { return c->info->kind == GG_BLOCK_MLP_FWD; }

/* GG_FORWARD_GELU: "epilogue" (or unset) or "kernel"; anything else keeps the epilogue and says so. */
static int gelu_in_epilogue(const gg_ctx *ctx) {
    const char *v = getenv("GG_FORWARD_GELU");
    if (!v || !*v || strcmp(v, "epilogue") == 0) return 1;
    if (strcmp(v, "kernel") == 0) return 0;
    gg_log(ctx, GG_LOG_WARN, "GG_FORWARD_GELU=%s is neither \"epilogue\" nor \"kernel\": the epilogue runs the GELU",
           v);
    return 1;
}

static gg_status plan_gemm(gg_ctx *ctx, gg_matmul *mm, gg_precision precision, int epilogue, int64_t m, int64_t n,
                           int64_t k) {
    gg_gemm_shape s = {.trans_a = 1, .m = m, .n = n, .k = k, .lda = k, .ldb = k, .ldd = m, .d_type = CUDA_R_32F,
                       .epilogue = epilogue};
    gg_gemm_types_for(precision, &s.ab_type, &s.compute);
    return gg_matmul_plan(ctx, &s, mm);
}

static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    ffn_fwd_plan *fp = (ffn_fwd_plan *)p;
    const int64_t M = p->key.tokens, D = p->key.dim0, F = p->key.dim1;
    const gg_precision prec = (gg_precision)p->key.precision;
    const int bias = has_bias(p);
    fp->gelu_epilogue = gelu_in_epilogue(ctx);
    if (fp->gelu_epilogue) {
        const int fused = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        /* no algorithm with the epilogue for this shape and mode (GG_ERROR_CUBLAS): the kernel's GELU, and the call
         * succeeds with no ERROR line and no message left behind */
        char saved[GG_MSG_BYTES];
        gg_tentative_begin(ctx, saved);
        const gg_status st = plan_gemm(ctx, &p->gemm[GEMM_1], prec, fused, F, M, D);
        if (gg_tentative_end(ctx, saved, st, GG_ERROR_CUBLAS, "the GELU runs in gradgraph's kernel instead"))
            fp->gelu_epilogue = 0;
        else if (st != GG_SUCCESS)
            return st;
    }
    if (!fp->gelu_epilogue)
        GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_1], prec, bias ? CUBLASLT_EPILOGUE_BIAS : 0, F, M, D));
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_2], prec, bias ? CUBLASLT_EPILOGUE_BIAS : 0, D, M, F));
    if (prec == GG_PRECISION_FP16) {
        const size_t h = 2; /* sizeof(half) */
        p->buffer[BUF_X16] = gg_plan_take(p, (size_t)(M * D) * h);
        p->buffer[BUF_W1_16] = gg_plan_take(p, (size_t)(F * D) * h);
        p->buffer[BUF_W2_16] = gg_plan_take(p, (size_t)(D * F) * h);
        p->buffer[BUF_ACT16] = gg_plan_take(p, (size_t)(M * F) * h);
    }
    return GG_SUCCESS;
}

/* The table row of fp16 copy f16 (F16_*), and that copy when the call gives it (else NULL). */
static int f16_row(const gg_block_call *c, int f16) { return (has_bias_call(c) ? F_F16_MLP : F_F16_FFN) + f16; }
static void *given_fp16(const gg_block_call *c, int f16) {
    return gg_tensor_used(c, f16_row(c, f16)) ? c->t[f16_row(c, f16)] : NULL;
}

/* The operand of input `tensor`: the input itself, or in fp16 mode its fp16 copy: the caller's (f16, the copy's
 * F16_* row, given as an input), or made here into the caller's output copy or else the scratch buffer `buf`. */
static gg_status operand(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const gg_exec_res *r,
                         int tensor, int f16, int buf, const void **out, cudaStream_t s) {
    *out = c->t[tensor];
    if (c->precision != GG_PRECISION_FP16) return GG_SUCCESS;
    void *given = given_fp16(c, f16);
    if (given && !c->info->tensors[f16_row(c, f16)].is_output) { /* a weight's copy: read, not made */
        *out = given;
        return GG_SUCCESS;
    }
    void *copy = given ? given : gg_res_buffer(r, p, buf);
    GG_CUDA_TRY(ctx, gg_k_f32_to_f16(c->t[tensor], copy, gg_tensor_elems(c, tensor), ctx->sm_count, 0,
                                     GG_PRIORITY_OF_STREAM, ctx->counter + GG_COUNTER_OVERFLOW, s));
    *out = copy;
    return GG_SUCCESS;
}

/* After the first GEMM: what the epilogue did not write (act when the kernel runs the GELU, block 2's tanh_inner
 * when asked for) and, in fp16 mode, act's fp16 copy, the second GEMM's operand, made from the act just written, and
 * the pre-activation's when asked for. */
static gg_status activation(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const gg_exec_res *r,
                            const void **act_operand, cudaStream_t s) {
    void *const *t = c->t;
    const int epilogue = ((const ffn_fwd_plan *)p)->gelu_epilogue;
    const int fp16 = c->precision == GG_PRECISION_FP16;
    float *tanh_inner = !has_bias(p) && gg_tensor_used(c, F_TANH) ? t[F_TANH] : NULL;
    void *act16 = !fp16 ? NULL : given_fp16(c, F16_ACT) ? given_fp16(c, F16_ACT) : gg_res_buffer(r, p, BUF_ACT16);
    *act_operand = fp16 ? act16 : t[F_ACT];
    const size_t n = gg_tensor_elems(c, F_ACT);
    unsigned *overflow = ctx->counter + GG_COUNTER_OVERFLOW;
    void *pre16 = fp16 ? given_fp16(c, F16_PRE) : NULL;
    if (pre16)
        GG_CUDA_TRY(ctx, gg_k_f32_to_f16(t[F_PRE], pre16, n, ctx->sm_count, 0, GG_PRIORITY_OF_STREAM, overflow, s));
    if (!epilogue) {
        GG_CUDA_TRY(ctx, gg_k_gelu_forward(t[F_PRE], t[F_ACT], tanh_inner, act16, n, ctx->sm_count, overflow, s));
        return GG_SUCCESS;
    }
    if (tanh_inner)
        GG_CUDA_TRY(ctx, gg_k_gelu_forward(t[F_PRE], NULL, tanh_inner, NULL, n, ctx->sm_count, overflow, s));
    if (fp16)
        GG_CUDA_TRY(ctx, gg_k_f32_to_f16(t[F_ACT], act16, n, ctx->sm_count, 0, GG_PRIORITY_OF_STREAM, overflow, s));
    return GG_SUCCESS;
}

static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    void *const *t = c->t;
    const gg_exec_res r = gg_block_res(ctx, c, s);
    const int bias = has_bias(p);
    const void *x, *w1, *w2, *act;
    GG_TRY(operand(ctx, p, c, &r, F_X, F16_X, BUF_X16, &x, s));
    GG_TRY(operand(ctx, p, c, &r, F_W1, F16_W1, BUF_W1_16, &w1, s));
    if (((const ffn_fwd_plan *)p)->gelu_epilogue) /* D = gelu(x), aux = x */
        GG_TRY(gg_matmul_run_epilogue(ctx, &p->gemm[GEMM_1], w1, x, t[F_ACT], bias ? t[F_B1] : NULL, t[F_PRE],
                                      r.workspace[0], s));
    else /* D = x */
        GG_TRY(gg_matmul_run_epilogue(ctx, &p->gemm[GEMM_1], w1, x, t[F_PRE], bias ? t[F_B1] : NULL, NULL,
                                      r.workspace[0], s));
    GG_TRY(activation(ctx, p, c, &r, &act, s));
    GG_TRY(operand(ctx, p, c, &r, F_W2, F16_W2, BUF_W2_16, &w2, s));
    return gg_matmul_run_epilogue(ctx, &p->gemm[GEMM_2], w2, act, t[F_OUT], bias ? t[F_B2] : NULL, NULL,
                                  r.workspace[0], s);
}

/* Both blocks' desc structs: tokens, hidden, ffn, precision (accumulate: a forward has none). */
#define FFN_DESC(type)                                                                                             \
    {.tokens = offsetof(type, tokens), .dim0 = offsetof(type, hidden), .dim1 = offsetof(type, ffn),               \
     .precision = offsetof(type, precision), .use_silu_gate = GG_NO_FIELD, .accumulate = GG_NO_FIELD}

const gg_block_info gg_gelu_ffn_fwd_info = {
    .kind = GG_BLOCK_GELU_FFN_FWD,
    .fn = "gg_gelu_ffn_forward",
    .forward = 1,
    .dim0_name = "desc->hidden",
    .dim1_name = "desc->ffn",
    .fp32_io = 1,
    .n_tensors = N_TENSORS(gelu_ffn_tensors),
    .tensors = gelu_ffn_tensors,
    .desc = FFN_DESC(gg_gelu_ffn_desc),
    .build = build,
    .plan_bytes = sizeof(ffn_fwd_plan),
    .enqueue = enqueue,
};
const gg_block_info gg_mlp_fwd_info = {
    .kind = GG_BLOCK_MLP_FWD,
    .fn = "gg_mlp_forward",
    .forward = 1,
    .dim0_name = "desc->hidden",
    .dim1_name = "desc->ffn",
    .fp32_io = 1,
    .n_tensors = N_TENSORS(mlp_tensors),
    .tensors = mlp_tensors,
    .desc = FFN_DESC(gg_mlp_desc),
    .build = build,
    .plan_bytes = sizeof(ffn_fwd_plan),
    .enqueue = enqueue,
};
