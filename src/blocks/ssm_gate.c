/*
 * ssm_gate.c - block 4, SSM output projection with gate multiply (gg_ssm_gate_backward), bf16 I/O.
 *
 * Up to GG_SSM_SMALL_MAX_TOKENS tokens: everything in one launch of gradgraph's own kernel (gg_k_ssm_small).
 * From GG_SSM_FUSED_MIN_TOKENS tokens on an sm_90a device, unless the call syncs its gradients: g with the chain in
 * its epilogue, in a kernel of gradgraph's own (gg_k_ssm_fused, which also sums dY's rows per 128 for the bias), and
 * dW beside it (it needs none of its outputs).
 * Between the two (and for shapes those kernels do not take), unless the call syncs its gradients: the narrow schedule
 * (narrow_rows): g on every SM; then dW on the caller's stream on all SMs but a few (40 or 56, by M), and beside it,
 * on the side stream, the chain on those few SMs; the bias sum beside both (on the aux stream) or, from 32768
 * tokens, before g.
 * Otherwise (calls that sync, GPUs with too few SMs), fork-first: caller's stream: g = bf16(dY @ W), then the bf16
 * elementwise chain. Side stream, overlapping from the start: dW = dYᵀ @ gated and the column sums of dY (grad_bias).
 * Column-major view (row-major [r,c] = column-major c x r, ld = c):
 *   g  [M,E]: (E x M) = W'(E x H)      @ dY'(H x M)       m=E n=M k=H  A=W N lda=E      B=dY N ldb=H
 *   dW [H,E]: (E x H) = gated'(E x M)  @ dY'(H x M)ᵀ      m=E n=H k=M  A=gated N lda=E  B=dY T ldb=H
 */
#include "block.h"
#include "ddp.h"
#include "blocks.h"
#include "kernels/gg_kernels.h"
#include "streams.h"

enum { T_DY, T_SSM, T_GATE, T_W, T_GATE_ACT, T_GATED, T_GRAD_SSM, T_GRAD_GATE, T_DW, T_DB };
enum { GEMM_G, GEMM_DW };
enum { BUF_G, BUF_PARTIALS, BUF_BIAS_ROWS };
enum { ROUTE_SMALL = 1, ROUTE_FUSED }; /* the plan's route, if not cuBLASLt's */

/* The plan with the block's own launch parameters. */
typedef struct ssm_plan {
    gg_block_plan base;
    int route;       /* ROUTE_*, or 0: cuBLASLt's GEMMs */
    int narrow_ctas; /* > 0: the narrow schedule, the chain on this many SMs beside dW */
    int col_chunks;  /* row chunks of the bias's column sum */
} ssm_plan;

static const ssm_plan *own(const gg_block_plan *p) { return (const ssm_plan *)p; }

#define TENSOR(field, ...) GG_TENSOR(gg_ssm_gate_args, field, __VA_ARGS__)
static const gg_tensor_spec tensors[] = {
    [T_DY] = TENSOR(grad_output, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, 0),
    [T_SSM] = TENSOR(ssm_output, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, 0),
    [T_GATE] = TENSOR(gate, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, 1),
    [T_W] = TENSOR(weight, GG_EXT_DIM0, GG_EXT_DIM1, 2, 0, 0),
    [T_GATE_ACT] = TENSOR(gate_activated, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, 0),
    [T_GATED] = TENSOR(gated_output, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, 0),
    [T_GRAD_SSM] = TENSOR(grad_ssm_output, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 1, 0),
    [T_GRAD_GATE] = TENSOR(grad_gate, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 1, 0),
    [T_DW] = TENSOR(grad_weight, GG_EXT_DIM0, GG_EXT_DIM1, 2, 1, 0),
    [T_DB] = TENSOR(grad_bias, GG_EXT_ONE, GG_EXT_DIM0, 2, 1, 0),
};
#undef TENSOR
_Static_assert(sizeof(gg_ssm_gate_args) == sizeof tensors / sizeof tensors[0] * sizeof(void *), "one row a field");

/* Up to this many tokens the one-launch kernel beats cuBLASLt's route of four dependent launches. Measured on an
 * H200 (docs/perf-notes.md, "Session 15"): M = 128 0.58-0.74x the time; M = 422 1.03-1.15x; from M = 1172 on
 * 1.4-2.3x (its mma.sync main loop runs at about half cuBLAS's rate). */
#define GG_SSM_SMALL_MAX_TOKENS 256

/* From this many tokens g and its chain run as one kernel of gradgraph's own, dW beside it. Measured on an H200
 * (docs/perf-notes.md, "Session 29", calls 1, 3 and 4), against the narrow schedule: 0.93-0.97x at 34784-74432
 * tokens (g is never written or read: 0.46 GB less at 74432), 1.02-1.08x at 5692-17312, where the kernel's 1.8x the
 * time of cuBLASLt's g alone shows (its main loop and its epilogue slow each other on every SM: calls 8-12). */
#define GG_SSM_FUSED_MIN_TOKENS 32768

/* Where the narrow schedule puts the bias sum (an M x H bf16 read). */
typedef enum {
    BIAS_BESIDE, /* on the aux stream after g, enqueued after dW: beside dW and the chain, on the SMs they leave */
    BIAS_FIRST,  /* on the side stream before g, on every SM */
} bias_place;

/* The narrow schedule (see the top), by tokens: the SMs the chain runs on (one CTA of 1024 threads each) beside dW
 * on the others, and the bias sum's place. Every plan above the one-launch kernel that does not sync takes it; a row
 * holds from its tokens to the next row's. Measured on an H200 against the fork-first schedule (docs/perf-notes.md,
 * "Session 25" and "Session 26"):
 * - dW's output, 1536 x 768 here, is 96 tiles of cuBLASLt's 128 x 96 or 96 x 128: without split-k it never uses more
 *   than 96 SMs, and from 10000 tokens the whole chain on 40 SMs (12 bytes per element of g at ~88 GB/s per SM) takes
 *   about as long as dW on the other 92: 0.85-0.87x at 11912-17312 tokens, and 0.98-1.03x session 24's schedule with
 *   g in row chunks at 34784-74432 (which it replaces).
 * - Below 10000 tokens the chain on 40 SMs ran at 2.1-2.5 TB/s and outlasted dW; on 56 it does not, and dW on 76
 *   SMs runs 72 tiles of 128 x 128 in one wave: 0.95-0.97x at 1546 and 5692-8192 tokens, 0.96-0.99x at 2048-2984.
 *   Below 1500 tokens 56 SMs lost (1172 tokens 1.01-1.03x).
 * - The bias sum beside dW and the chain, enqueued after dW (at the aux stream's least priority its CTAs then take
 *   what dW and the chain leave), against after the chain on the side stream, where it ended after dW: 0.87-0.92x
 *   below 1500 tokens, 0.94-1.00x from 1500 to 10000, 0.98-0.99x at 11912-17312 (session 26, calls 7-9). Enqueued
 *   before the chain instead, its CTAs took the SMs first and held dW back (1.13-1.36x at 5692-17312, call 2).
 * - Before g from 32768 tokens: it takes every SM and delays g's start by its whole time (11-38 us: g's persistent
 *   CTAs wait for all SMs), yet beats both other places there (against after the chain 0.89-0.94x at 34784-74432,
 *   call 11 of session 25; against beside, 0.87-0.91x, call 10), and loses below (1.06-1.09x at 11912-17312). */
static const struct {
    int64_t min_tokens;
    int narrow_ctas;
    bias_place bias;
} narrow_rows[] = {
    {GG_SSM_SMALL_MAX_TOKENS + 1, 40, BIAS_BESIDE},
    {1500, 56, BIAS_BESIDE},
    {10000, 40, BIAS_BESIDE},
    {32768, 40, BIAS_FIRST},
};

/* The row for M tokens (the first row also below its tokens: shapes the one-launch kernel does not take). */
static int narrow_row(int64_t M) {
    int r = 0;
    while (r + 1 < (int)(sizeof narrow_rows / sizeof narrow_rows[0]) && M >= narrow_rows[r + 1].min_tokens) ++r;
    return r;
}

/* The fused kernel's bias rows: one per row tile of M tokens. */
static int64_t fused_bias_rows(int64_t M) { return (M + GG_SSM_FUSED_ROWS - 1) / GG_SSM_FUSED_ROWS; }

static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    ssm_plan *sp = (ssm_plan *)p;
    const int64_t M = p->key.tokens, H = p->key.dim0, E = p->key.dim1;
    /* Not for plans that leave SMs to communication: the kernel takes whatever SMs are free. */
    if (M <= GG_SSM_SMALL_MAX_TOKENS && p->key.sm_reserve == 0 && gg_k_ssm_small_supported(M, H, E)) {
        sp->route = ROUTE_SMALL;
        return GG_SUCCESS;
    }
    const int sm_target = gg_plan_sm_target(ctx, p); /* syncing graphs: SMs left to the reductions */
    if (M >= GG_SSM_FUSED_MIN_TOKENS && sm_target == 0 && !p->key.sync_grads && ctx->has_wgmma &&
        gg_k_ssm_fused_supported(M, H, E)) {
        sp->route = ROUTE_FUSED;
        const gg_gemm_shape dw = {0, 1, E, H, M, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 0};
        GG_TRY(gg_matmul_plan(ctx, &dw, &p->gemm[GEMM_DW]));
        const int64_t bias_rows = fused_bias_rows(M);
        sp->col_chunks = gg_k_col_sum_chunks(bias_rows, H, GG_DT_F32, ctx->sm_count);
        p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)sp->col_chunks * (size_t)H * sizeof(float));
        p->buffer[BUF_BIAS_ROWS] = gg_plan_take(p, (size_t)bias_rows * (size_t)H * sizeof(float));
        return GG_SUCCESS;
    }
    /* The narrow schedule only for calls that do not sync (those order the work for their reductions). */
    const int narrow_ctas = narrow_rows[narrow_row(M)].narrow_ctas;
    if (sm_target == 0 && !p->key.sync_grads && ctx->sm_count >= 2 * narrow_ctas) sp->narrow_ctas = narrow_ctas;
    const int dw_sm_target = sp->narrow_ctas ? ctx->sm_count - sp->narrow_ctas : sm_target;
    const gg_gemm_shape g = {0, 0, E, M, H, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, sm_target};
    const gg_gemm_shape dw = {0, 1, E, H, M, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, dw_sm_target};
    GG_TRY(gg_matmul_plan(ctx, &g, &p->gemm[GEMM_G]));
    p->buffer[BUF_G] = gg_plan_take(p, (size_t)(M * E) * 2);
    GG_TRY(gg_matmul_plan(ctx, &dw, &p->gemm[GEMM_DW]));
    sp->col_chunks = gg_k_col_sum_chunks(M, H, GG_DT_BF16, ctx->sm_count);
    p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)sp->col_chunks * (size_t)H * sizeof(float));
    return GG_SUCCESS;
}

/* dW = dYᵀ @ gated, handed to the all-reduce as soon as it is final. `workspace`: the cuBLASLt workspace of stream s
 * (0: the caller's, 1: the side stream's). */
static gg_status enqueue_weight_grad(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, int workspace,
                                     cudaStream_t s) {
    void *const *t = c->t;
    GG_TRY(gg_matmul_run(ctx, &p->gemm[GEMM_DW], t[T_GATED], t[T_DY], t[T_DW], c->accumulate, workspace, s));
    return gg_dist_grad_ready(ctx, c, s, T_DW);
}

/* grad_bias = Σ of the rows of `in` ([rows, H]: dY itself, bf16, or the fused kernel's fp32 bias rows), handed to
 * the all-reduce as soon as it is final. */
static gg_status sum_bias(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const void *in,
                          gg_dtype in_type, int64_t rows, cudaStream_t s) {
    GG_CUDA_TRY(ctx, gg_k_col_sum(in, in_type, rows, c->dim0, own(p)->col_chunks, gg_plan_buffer(ctx, p, BUF_PARTIALS),
                                  ctx->counter + GG_COUNTER_SUM_A, c->t[T_DB], GG_DT_BF16, c->accumulate, NULL, s));
    return gg_dist_grad_ready(ctx, c, s, T_DB);
}

/* grad_bias = Σ_rows dY. */
static gg_status enqueue_bias_grad(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    return sum_bias(ctx, p, c, c->t[T_DY], GG_DT_BF16, c->tokens, s);
}

/* Both weight gradients, in that order, on the side stream s (its cuBLASLt workspace). */
static gg_status enqueue_weight_grads(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    GG_TRY(enqueue_weight_grad(ctx, p, c, 1, s));
    return enqueue_bias_grad(ctx, p, c, s);
}

/* The chain from g to grad_ssm_output and grad_gate, on narrow_ctas SMs (0: all). It is g's only reader, so while g
 * fits in two thirds of the L2 it drops g's lines as it reads them (no write-back of a dead buffer: 0.98-0.99x up to
 * 11912 tokens, 36.6 MB); larger, g's early lines are gone from the L2 when the chain reads them, and the discards
 * cost time (34784-74432 tokens 1.03-1.06x, 17312 0.99-1.01x: docs/perf-notes.md, "Session 27", calls 4 and 9). */
static gg_status chain(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, int narrow_ctas, cudaStream_t s) {
    void *const *t = c->t;
    GG_CUDA_TRY(ctx, gg_k_ssm_gate_grad(gg_plan_buffer(ctx, p, BUF_G), t[T_GATE_ACT], t[T_SSM], t[T_GATE],
                                        t[T_GRAD_SSM], t[T_GRAD_GATE], (size_t)(c->tokens * c->dim1),
                                        c->use_silu_gate, ctx->sm_count, narrow_ctas,
                                        (double)c->tokens * (double)c->dim1 * 2 <= ctx->l2_bytes * (2.0 / 3), s));
    return GG_SUCCESS;
}

/* g = bf16(dY @ W) into the plan's g buffer. */
static gg_status gemm_g(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    void *const *t = c->t;
    return gg_matmul_run(ctx, &p->gemm[GEMM_G], t[T_W], t[T_DY], gg_plan_buffer(ctx, p, BUF_G), 0, 0, s);
}

/* The narrow schedule: g on every SM; then dW on the caller's stream, and beside it on the side stream the chain on
 * the SMs dW leaves; the bias sum where narrow_rows puts it. */
static gg_status enqueue_narrow(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t main) {
    cudaStream_t side = gg_side_stream(ctx, main), aux = gg_aux_stream(ctx, main);
    const bias_place bias = narrow_rows[narrow_row(p->key.tokens)].bias; /* the plan's M, as build() decides */
    gg_status status = GG_SUCCESS;
    if (bias == BIAS_FIRST) {
        GG_TRY(gg_stream_handoff(ctx, main, ctx->ev_fork, side));
        status = enqueue_bias_grad(ctx, p, c, side);
    }
    if (status == GG_SUCCESS) status = gemm_g(ctx, p, c, main);
    if (status == GG_SUCCESS) status = gg_stream_handoff(ctx, main, ctx->ev_mid, side);
    if (status == GG_SUCCESS && bias == BIAS_BESIDE) status = gg_stream_handoff(ctx, main, ctx->ev_aux, aux);
    if (status == GG_SUCCESS) status = chain(ctx, p, c, own(p)->narrow_ctas, side);
    if (status == GG_SUCCESS) status = enqueue_weight_grad(ctx, p, c, 0, main);
    /* last: so enqueued, its CTAs were measured to reach the SMs after dW's and the chain's (see narrow_rows) */
    if (status == GG_SUCCESS && bias == BIAS_BESIDE) status = enqueue_bias_grad(ctx, p, c, aux);
    gg_branch joins[2];
    int n = 0;
    if (bias == BIAS_BESIDE) joins[n++] = (gg_branch){aux, ctx->ev_aux_join};
    joins[n++] = (gg_branch){side, ctx->ev_join};
    return gg_stream_join_all(ctx, status, main, joins, n);
}

/* g and its chain in one kernel on the side stream (high priority), then the bias as the column sum of the rows it
 * summed per 128 tokens; dW beside them on the caller's stream, so that its CTAs take the SMs of the kernel's last
 * wave as they free instead of waiting for the whole kernel (0.97-0.99x against dW after the kernel at 34784-74432
 * tokens: docs/perf-notes.md, "Session 29", call 1). */
static gg_status enqueue_fused(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t main) {
    void *const *t = c->t;
    cudaStream_t side = gg_side_stream(ctx, main);
    GG_TRY(gg_stream_handoff(ctx, main, ctx->ev_fork, side));
    float *bias_rows = gg_plan_buffer(ctx, p, BUF_BIAS_ROWS);
    gg_status status = GG_SUCCESS;
    GG_CUDA_GOTO(ctx,
                 gg_k_ssm_fused(t[T_DY], t[T_W], t[T_GATE_ACT], t[T_SSM], t[T_GATE], t[T_GRAD_SSM], t[T_GRAD_GATE],
                                bias_rows, c->tokens, c->dim0, c->dim1, c->use_silu_gate, ctx->sm_count, side),
                 status, join);
    status = sum_bias(ctx, p, c, bias_rows, GG_DT_F32, fused_bias_rows(c->tokens), side);
    if (status == GG_SUCCESS) status = enqueue_weight_grad(ctx, p, c, 0, main);
join:
    return gg_stream_join(ctx, status, main, side, ctx->ev_join);
}

/* The one-launch kernel: both gradients are final when it ends. */
static gg_status enqueue_small(gg_ctx *ctx, const gg_block_call *c, cudaStream_t s) {
    void *const *t = c->t;
    GG_CUDA_TRY(ctx, gg_k_ssm_small(t[T_DY], t[T_W], t[T_GATED], t[T_GATE_ACT], t[T_SSM], t[T_GATE], t[T_GRAD_SSM],
                                    t[T_GRAD_GATE], t[T_DW], t[T_DB], c->tokens, c->dim0, c->dim1, c->use_silu_gate,
                                    c->accumulate, ctx->sm_count, s));
    GG_TRY(gg_dist_grad_ready(ctx, c, s, T_DW));
    return gg_dist_grad_ready(ctx, c, s, T_DB);
}

static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t main) {
    if (own(p)->route == ROUTE_SMALL) return enqueue_small(ctx, c, main);
    if (own(p)->route == ROUTE_FUSED) return enqueue_fused(ctx, p, c, main);
    if (own(p)->narrow_ctas > 0) return enqueue_narrow(ctx, p, c, main);
    cudaStream_t side = gg_side_stream(ctx, main);
    /* Fork first: dW and the bias sum start with g. Unlike the FFN blocks, forking after g was measured slower
     * here (079 graph geomean 80.5 -> 83.0 us). Measured and dropped (docs/perf-notes.md, "block 4 schedules"):
     * g and its chain on the high-priority stream; the SMs split between the two GEMMs. Calls that do not sync
     * take the narrow schedule instead (above). */
    GG_TRY(gg_stream_handoff(ctx, main, ctx->ev_fork, side));
    gg_status status = enqueue_weight_grads(ctx, p, c, side);
    if (status == GG_SUCCESS) status = gemm_g(ctx, p, c, main);
    if (status == GG_SUCCESS) status = chain(ctx, p, c, 0, main);
    return gg_stream_join(ctx, status, main, side, ctx->ev_join);
}

const gg_block_info gg_ssm_gate_info = {
    .kind = GG_BLOCK_SSM_GATE,
    .fn = "gg_ssm_gate_backward",
    .dim0_name = "desc->hidden",
    .dim1_name = "desc->expanded",
    .n_tensors = (int)(sizeof tensors / sizeof tensors[0]),
    .tensors = tensors,
    .desc = {.tokens = offsetof(gg_ssm_gate_desc, tokens), .dim0 = offsetof(gg_ssm_gate_desc, hidden),
             .dim1 = offsetof(gg_ssm_gate_desc, expanded), .precision = GG_NO_FIELD,
             .use_silu_gate = offsetof(gg_ssm_gate_desc, use_silu_gate),
             .accumulate = offsetof(gg_ssm_gate_desc, accumulate)},
    .build = build,
    .plan_bytes = sizeof(ssm_plan),
    .enqueue = enqueue,
};
