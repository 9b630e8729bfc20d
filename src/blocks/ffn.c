/*
 * ffn.c - blocks 2 (GELU FFN, gg_gelu_ffn_backward) and 3 (MLP with biases, gg_mlp_backward): the same backward
 * with two differences, so one driver serves both: block 2 reads the saved tanh_inner, block 3 recomputes it and
 * also reduces the two bias gradients.
 *
 * Order (apex's linear_gelu_linear_backward): on the caller's stream G = dY @ W2, R = G * gelu'(x), dX = R @ W1;
 * on the side stream, overlapping, dW2 = dYᵀ @ act and, once R is ready, dW1 = Rᵀ @ X.
 *
 * Column-major view of the row-major tensors (a row-major [r,c] matrix is column-major c x r, ld = c):
 *   G   [M,F]: G'(F x M)   = W2'(F x D)     @ dY'(D x M)         m=F n=M k=D  A=W2 N lda=F  B=dY N ldb=D
 *   dW2 [D,F]: (F x D)     = act'(F x M)    @ dY'(D x M)ᵀ        m=F n=D k=M  A=act N lda=F B=dY T ldb=D
 *   dX  [M,D]: (D x M)     = W1'(D x F)     @ R'(F x M)          m=D n=M k=F  A=W1 N lda=D  B=R N ldb=F
 *   dW1 [F,D]: (D x F)     = X'(D x M)      @ R'(F x M)ᵀ         m=D n=F k=M  A=X N lda=D   B=R T ldb=F
 */
#include "kernels/gg_kernels.h"
#include "plan.h"
#include "streams.h"
#include "validate.h"

enum { GEMM_G, GEMM_DW2, GEMM_DX, GEMM_DW1 };
/* Scratch: G (fp32, and R in place in fp32/tf32 modes); fp16 copies of the operands in fp16 mode; partial sums. */
enum { BUF_G, BUF_R16, BUF_DY16, BUF_W2_16, BUF_ACT16, BUF_X16, BUF_W1_16, BUF_PARTIALS };

/* One call of either block, in the driver's terms. tanh_inner is NULL for block 3; the bias gradients NULL for 2. */
typedef struct ffn_call {
    const char *fn;
    gg_block_kind kind;
    int64_t M, D, F;
    gg_precision precision;
    const float *dy, *x_in, *w1, *w2, *pre, *tanh_inner, *act;
    float *dx, *dw1, *dw2, *db1, *db2;
} ffn_call;

static gg_status plan_gemm(gg_ctx *ctx, gg_matmul *mm, gg_precision precision, int trans_b, int64_t m, int64_t n,
                           int64_t k, int64_t lda, int64_t ldb, int64_t ldd) {
    gg_gemm_shape s = {0, trans_b, m, n, k, lda, ldb, ldd, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    gg_gemm_types_for(precision, &s.ab_type, &s.compute);
    return gg_matmul_plan(ctx, &s, mm);
}

static gg_status build_ffn_plan(gg_ctx *ctx, gg_block_plan *p) {
    const int64_t M = p->key.tokens, D = p->key.dim0, F = p->key.dim1;
    const gg_precision prec = (gg_precision)p->key.precision;
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_G], prec, 0, F, M, D, F, D, F));
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_DW2], prec, 1, F, D, M, F, D, F));
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_DX], prec, 0, D, M, F, D, F, D));
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_DW1], prec, 1, D, F, M, D, F, D));
    p->buffer[BUF_G] = gg_plan_take(p, (size_t)(M * F) * sizeof(float));
    if (prec == GG_PRECISION_FP16) {
        const size_t h = 2; /* sizeof(half) */
        p->buffer[BUF_R16] = gg_plan_take(p, (size_t)(M * F) * h);
        p->buffer[BUF_DY16] = gg_plan_take(p, (size_t)(M * D) * h);
        p->buffer[BUF_W2_16] = gg_plan_take(p, (size_t)(D * F) * h);
        p->buffer[BUF_ACT16] = gg_plan_take(p, (size_t)(M * F) * h);
        p->buffer[BUF_X16] = gg_plan_take(p, (size_t)(M * D) * h);
        p->buffer[BUF_W1_16] = gg_plan_take(p, (size_t)(F * D) * h);
    }
    if (p->key.block == GG_BLOCK_MLP) {
        p->col_chunks[0] = gg_k_col_sum_chunks(M, D, ctx->sm_count); /* grad_bias2 over dY */
        p->col_chunks[1] = gg_k_col_sum_chunks(M, F, ctx->sm_count); /* grad_bias1 over R */
        const int64_t a = (int64_t)p->col_chunks[0] * D, b = (int64_t)p->col_chunks[1] * F;
        p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)(a > b ? a : b) * sizeof(float));
    }
    return GG_SUCCESS;
}

/* Enqueues the backward; the plan exists. On an error after the fork, the side stream is still joined. */
static gg_status enqueue_ffn(gg_ctx *ctx, const gg_block_plan *p, const ffn_call *c, cudaStream_t main) {
    const int64_t M = c->M, D = c->D, F = c->F;
    const int sms = ctx->sm_count;
    cudaStream_t side = ctx->side;
    float *G = gg_plan_buffer(ctx, p, BUF_G);
    /* The GEMM operands: the caller's fp32 tensors, or their fp16 copies in fp16 mode. */
    const void *dy = c->dy, *w2 = c->w2, *act = c->act, *x = c->x_in, *w1 = c->w1;
    void *R = G; /* R overwrites G in place unless it is written as fp16 */
    gg_dtype r_type = GG_DT_F32;
    if (c->precision == GG_PRECISION_FP16) {
        const struct {
            const float *src;
            int buffer;
            size_t n;
            const void **operand;
        } conv[] = {{c->dy, BUF_DY16, (size_t)(M * D), &dy},   {c->w2, BUF_W2_16, (size_t)(D * F), &w2},
                    {c->act, BUF_ACT16, (size_t)(M * F), &act}, {c->x_in, BUF_X16, (size_t)(M * D), &x},
                    {c->w1, BUF_W1_16, (size_t)(F * D), &w1}};
        for (size_t i = 0; i < sizeof conv / sizeof conv[0]; ++i) {
            void *dst = gg_plan_buffer(ctx, p, conv[i].buffer);
            GG_CUDA_TRY(ctx, gg_k_f32_to_f16(conv[i].src, dst, conv[i].n, sms, main));
            *conv[i].operand = dst;
        }
        R = gg_plan_buffer(ctx, p, BUF_R16);
        r_type = GG_DT_F16;
    }

    GG_TRY(gg_stream_handoff(ctx, main, ctx->ev_fork, side));
    gg_status status = GG_SUCCESS;
    GG_GOTO(gg_matmul_run(ctx, &p->gemm[GEMM_DW2], act, dy, c->dw2, 1, side), status, join);
    GG_GOTO(gg_matmul_run(ctx, &p->gemm[GEMM_G], w2, dy, G, 0, main), status, join);
    GG_CUDA_GOTO(ctx, gg_k_gelu_grad(G, c->pre, c->tanh_inner, R, r_type, (size_t)(M * F), sms, main), status, join);
    if (c->kind == GG_BLOCK_MLP) {
        float *partials = gg_plan_buffer(ctx, p, BUF_PARTIALS);
        GG_CUDA_GOTO(ctx, gg_k_col_sum(c->dy, GG_DT_F32, M, D, p->col_chunks[0], partials, c->db2, GG_DT_F32, main),
                     status, join);
        GG_CUDA_GOTO(ctx, gg_k_col_sum(R, r_type, M, F, p->col_chunks[1], partials, c->db1, GG_DT_F32, main), status,
                     join);
    }
    GG_GOTO(gg_stream_handoff(ctx, main, ctx->ev_mid, side), status, join);
    GG_GOTO(gg_matmul_run(ctx, &p->gemm[GEMM_DW1], x, R, c->dw1, 1, side), status, join);
    GG_GOTO(gg_matmul_run(ctx, &p->gemm[GEMM_DX], w1, R, c->dx, 0, main), status, join);
join:;
    const gg_status joined = gg_stream_handoff(ctx, side, ctx->ev_join, main);
    return status != GG_SUCCESS ? status : joined;
}

static gg_status run_ffn(gg_ctx *ctx, const ffn_call *c, cudaStream_t stream) {
    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    const gg_plan_key key = gg_plan_key_make(c->kind, c->precision, c->M, c->D, c->F);
    gg_block_plan *plan = NULL;
    gg_status status = gg_plan_get(ctx, &key, build_ffn_plan, &plan);
    if (status == GG_SUCCESS) status = enqueue_ffn(ctx, plan, c, stream);
    gg_device_leave(saved);
    return status;
}

/* Shapes, precision and every tensor of a call, checked before anything is enqueued. */
static gg_status validate_ffn(gg_ctx *ctx, ffn_call *c, gg_precision requested) {
    GG_TRY(gg_check_tokens(ctx, c->fn, "desc->tokens", c->M));
    GG_TRY(gg_check_dim(ctx, c->fn, "desc->hidden", c->D));
    GG_TRY(gg_check_dim(ctx, c->fn, "desc->ffn", c->F));
    GG_TRY(gg_resolve_precision(ctx, c->fn, requested, &c->precision));
    const int64_t M = c->M, D = c->D, F = c->F;
    const size_t f4 = sizeof(float);
    const int is_mlp = c->kind == GG_BLOCK_MLP;
    gg_tensor_check t[12] = {
        {"args->grad_output", c->dy, M, D, f4, 0},
        {"args->hidden_states", c->x_in, M, D, f4, 0},
        {"args->weight1", c->w1, F, D, f4, 0},
        {"args->weight2", c->w2, D, F, f4, 0},
        {is_mlp ? "args->intermediate" : "args->linear1_out", c->pre, M, F, f4, 0},
        {is_mlp ? "args->intermediate_activated" : "args->gelu_out", c->act, M, F, f4, 0},
        {"args->grad_hidden_states", c->dx, M, D, f4, 1},
        {"args->grad_weight1", c->dw1, F, D, f4, 1},
        {"args->grad_weight2", c->dw2, D, F, f4, 1},
    };
    int n = 9;
    if (is_mlp) {
        t[n++] = (gg_tensor_check){"args->grad_bias1", c->db1, 1, F, f4, 1};
        t[n++] = (gg_tensor_check){"args->grad_bias2", c->db2, 1, D, f4, 1};
    } else {
        t[n++] = (gg_tensor_check){"args->tanh_inner", c->tanh_inner, M, F, f4, 0};
    }
    return gg_check_tensors(ctx, c->fn, t, n);
}

gg_status gg_gelu_ffn_backward(gg_ctx *ctx, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args,
                               gg_stream stream) {
    GG_TRY(gg_check_call(ctx, "gg_gelu_ffn_backward", desc, args));
    ffn_call c = {"gg_gelu_ffn_backward", GG_BLOCK_GELU_FFN, desc->tokens, desc->hidden, desc->ffn,
                  GG_PRECISION_DEFAULT, args->grad_output, args->hidden_states, args->weight1, args->weight2,
                  args->linear1_out, args->tanh_inner, args->gelu_out, args->grad_hidden_states,
                  args->grad_weight1, args->grad_weight2, NULL, NULL};
    GG_TRY(validate_ffn(ctx, &c, desc->precision));
    return run_ffn(ctx, &c, (cudaStream_t)stream);
}

gg_status gg_mlp_backward(gg_ctx *ctx, const gg_mlp_desc *desc, const gg_mlp_args *args, gg_stream stream) {
    GG_TRY(gg_check_call(ctx, "gg_mlp_backward", desc, args));
    ffn_call c = {"gg_mlp_backward", GG_BLOCK_MLP, desc->tokens, desc->hidden, desc->ffn, GG_PRECISION_DEFAULT,
                  args->grad_output, args->hidden_states, args->weight1, args->weight2, args->intermediate, NULL,
                  args->intermediate_activated, args->grad_hidden_states, args->grad_weight1, args->grad_weight2,
                  args->grad_bias1, args->grad_bias2};
    GG_TRY(validate_ffn(ctx, &c, desc->precision));
    return run_ffn(ctx, &c, (cudaStream_t)stream);
}
