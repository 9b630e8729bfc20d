/*
 * ssm_gate.c - block 4, SSM output projection with gate multiply (gg_ssm_gate_backward), bf16 I/O.
 *
 * Caller's stream: g = bf16(dY @ W), then the bf16 elementwise chain. Side stream, overlapping: dW = dYᵀ @ gated
 * and the column sums of dY (grad_bias). Column-major view (row-major [r,c] = column-major c x r, ld = c):
 *   g  [M,E]: (E x M) = W'(E x H)      @ dY'(H x M)       m=E n=M k=H  A=W N lda=E      B=dY N ldb=H
 *   dW [H,E]: (E x H) = gated'(E x M)  @ dY'(H x M)ᵀ      m=E n=H k=M  A=gated N lda=E  B=dY T ldb=H
 */
#include "kernels/gg_kernels.h"
#include "plan.h"
#include "streams.h"
#include "validate.h"

enum { GEMM_G, GEMM_DW };
enum { BUF_G, BUF_PARTIALS };

static gg_status build_ssm_plan(gg_ctx *ctx, gg_block_plan *p) {
    const int64_t M = p->key.tokens, H = p->key.dim0, E = p->key.dim1;
    const gg_gemm_shape g = {0, 0, E, M, H, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    const gg_gemm_shape dw = {0, 1, E, H, M, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    GG_TRY(gg_matmul_plan(ctx, &g, &p->gemm[GEMM_G]));
    GG_TRY(gg_matmul_plan(ctx, &dw, &p->gemm[GEMM_DW]));
    p->buffer[BUF_G] = gg_plan_take(p, (size_t)(M * E) * 2);
    p->col_chunks[0] = gg_k_col_sum_chunks(M, H, ctx->sm_count);
    p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)p->col_chunks[0] * (size_t)H * sizeof(float));
    return GG_SUCCESS;
}

static gg_status enqueue_ssm(gg_ctx *ctx, const gg_block_plan *p, const gg_ssm_gate_desc *d,
                             const gg_ssm_gate_args *a, cudaStream_t main) {
    cudaStream_t side = ctx->side;
    uint16_t *g = gg_plan_buffer(ctx, p, BUF_G);
    GG_TRY(gg_stream_handoff(ctx, main, ctx->ev_fork, side));
    gg_status status = GG_SUCCESS;
    GG_GOTO(gg_matmul_run(ctx, &p->gemm[GEMM_DW], a->gated_output, a->grad_output, a->grad_weight, 1, side), status,
            join);
    GG_CUDA_GOTO(ctx,
                 gg_k_col_sum(a->grad_output, GG_DT_BF16, d->tokens, d->hidden, p->col_chunks[0],
                              gg_plan_buffer(ctx, p, BUF_PARTIALS), a->grad_bias, GG_DT_BF16, side),
                 status, join);
    GG_GOTO(gg_matmul_run(ctx, &p->gemm[GEMM_G], a->weight, a->grad_output, g, 0, main), status, join);
    GG_CUDA_GOTO(ctx,
                 gg_k_ssm_gate_grad(g, a->gate_activated, a->ssm_output, a->gate, a->grad_ssm_output, a->grad_gate,
                                    (size_t)(d->tokens * d->expanded), d->use_silu_gate, ctx->sm_count, main),
                 status, join);
join:;
    const gg_status joined = gg_stream_handoff(ctx, side, ctx->ev_join, main);
    return status != GG_SUCCESS ? status : joined;
}

gg_status gg_ssm_gate_backward(gg_ctx *ctx, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args,
                               gg_stream stream) {
    static const char fn[] = "gg_ssm_gate_backward";
    GG_TRY(gg_check_call(ctx, fn, desc, args));
    const int64_t M = desc->tokens, H = desc->hidden, E = desc->expanded;
    GG_TRY(gg_check_tokens(ctx, fn, "desc->tokens", M));
    GG_TRY(gg_check_dim(ctx, fn, "desc->hidden", H));
    GG_TRY(gg_check_dim(ctx, fn, "desc->expanded", E));
    gg_tensor_check t[10] = {
        {"args->grad_output", args->grad_output, M, H, 2, 0},
        {"args->ssm_output", args->ssm_output, M, E, 2, 0},
        {"args->weight", args->weight, H, E, 2, 0},
        {"args->gate_activated", args->gate_activated, M, E, 2, 0},
        {"args->gated_output", args->gated_output, M, E, 2, 0},
        {"args->grad_ssm_output", args->grad_ssm_output, M, E, 2, 1},
        {"args->grad_gate", args->grad_gate, M, E, 2, 1},
        {"args->grad_weight", args->grad_weight, H, E, 2, 1},
        {"args->grad_bias", args->grad_bias, 1, H, 2, 1},
    };
    int n = 9;
    if (desc->use_silu_gate) t[n++] = (gg_tensor_check){"args->gate", args->gate, M, E, 2, 0};
    GG_TRY(gg_check_tensors(ctx, fn, t, n));

    int saved = 0;
    GG_TRY(gg_device_enter(ctx, &saved));
    const gg_plan_key key = gg_plan_key_make(GG_BLOCK_SSM_GATE, GG_PRECISION_BF16, M, H, E);
    gg_block_plan *plan = NULL;
    gg_status status = gg_plan_get(ctx, &key, build_ssm_plan, &plan);
    if (status == GG_SUCCESS) status = enqueue_ssm(ctx, plan, desc, args, (cudaStream_t)stream);
    gg_device_leave(saved);
    return status;
}
