/*
 * ssm_gate.c - block 4, SSM output projection with gate multiply (gg_ssm_gate_backward), bf16 I/O.
 *
 * Up to GG_SSM_SMALL_MAX_TOKENS tokens: everything in one launch of gradgraph's own kernel (gg_k_ssm_small).
 * From GG_SSM_FUSED_MIN_TOKENS tokens on an sm_90a device, unless the call syncs its gradients: g with the chain in
 * its epilogue, in a kernel of gradgraph's own (gg_k_ssm_fused, which also sums dY's rows per 128 for the bias), and
 * dW beside it (it needs none of its outputs).
 * Between the two (and for shapes those kernels do not take), unless the call syncs its gradients: the narrow schedule
 * (narrow_rows): g on every SM; then dW on the caller's stream on all SMs but a few (40 or 56, by M), and beside it,
 * on the side stream, the chain on those few SMs, then dW's tail where dW runs its k % 128 rows apart (src/gemm/
 * matmul.c); the bias sum beside both (on the aux stream) or, from 32768 tokens, before g.
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
    [T_GATE] = TENSOR(gate, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, GG_TENSOR_SILU_ONLY),
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

/* ---- Tuning: the thresholds of this block that came from measurement on an H200 (docs/decisions.md) ---- */

/* Up to this many tokens the one-launch kernel beats cuBLASLt's four dependent launches; above, its mma.sync main
 * loop, at about half cuBLAS's rate, loses. */
#define GG_SSM_SMALL_MAX_TOKENS 256

/* From this many tokens g and its chain run as one kernel of gradgraph's own (g is never written or read), dW beside
 * it; below, its main loop and epilogue slowing each other costs more than the traffic saved. */
#define GG_SSM_FUSED_MIN_TOKENS 32768

/* The chain discards g's lines from the L2 as it reads them while g fits in this fraction of the L2; larger, g's
 * early lines are gone from the L2 before the chain reads them and the discards only cost time. */
#define GG_SSM_DISCARD_L2_FRACTION (2.0 / 3)

/* Where the narrow schedule puts the bias sum (an M x H bf16 read). */
typedef enum {
    BIAS_BESIDE, /* on the aux stream after g, enqueued after dW: beside dW and the chain, on the SMs they leave */
    BIAS_FIRST,  /* on the side stream before g, on every SM */
} bias_place;

/* The narrow schedule (see the top), by tokens: the SMs the chain runs on (one CTA of 1024 threads each) beside dW
 * on the others, and the bias sum's place. Every plan above the one-launch kernel that does not sync takes it; a row
 * holds from its tokens to the next row's. The rows' reasons (against the fork-first schedule; numbers in
 * docs/decisions.md):
 * - dW's output (1536 x 768 in the measured shapes) is 96 tiles of cuBLASLt's: without split-k it never uses more
 *   than 96 SMs, and from 10000 tokens the whole chain on 40 SMs (12 bytes per element of g) takes about as long as
 *   dW on the rest.
 * - Below 10000 tokens the chain on 40 SMs outlasts dW; on 56 it does not, and dW on the rest still runs its tiles in
 *   one wave. Below 1500 tokens 56 SMs lose.
 * - The bias sum goes beside dW and the chain, enqueued after dW: at the aux stream's least priority its CTAs take
 *   what dW and the chain leave. Enqueued before the chain, its CTAs take the SMs first and hold dW back.
 * - From 32768 tokens the bias sum goes before g: it delays g's start by its whole time (g's persistent CTAs wait for
 *   every SM), yet beats both other places there, and loses below. */
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
        const gg_gemm_shape dw = {0, 1, E, H, M, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 0, 0};
        GG_TRY(gg_matmul_plan(ctx, &dw, &p->gemm[GEMM_DW]));
        const int64_t bias_rows = fused_bias_rows(M);
        sp->col_chunks = gg_k_col_sum_chunks(bias_rows, H, GG_DT_F32, ctx->sm_count);
        p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)sp->col_chunks * (size_t)H * sizeof(float));
        p->buffer[BUF_BIAS_ROWS] = gg_plan_take(p, (size_t)bias_rows * (size_t)H * sizeof(float));
        return GG_SUCCESS;
    }
    /* The narrow schedule only for calls that do not sync (those order the work for their reductions), and where the
     * chain has a stream of its own to run beside dW (not with overlap NEVER: one stream, nothing beside). */
    const int narrow_ctas = narrow_rows[narrow_row(M)].narrow_ctas;
    if (sm_target == 0 && !p->key.sync_grads && ctx->config.overlap != GG_OVERLAP_NEVER &&
        ctx->sm_count >= 2 * narrow_ctas)
        sp->narrow_ctas = narrow_ctas;
    const int dw_sm_target = sp->narrow_ctas ? ctx->sm_count - sp->narrow_ctas : sm_target;
    const gg_gemm_shape g = {0, 0, E, M, H, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, sm_target, 0};
    const gg_gemm_shape dw = {0, 1, E, H, M, E, H, E, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, dw_sm_target, 0};
    GG_TRY(gg_matmul_plan(ctx, &g, &p->gemm[GEMM_G]));
    p->buffer[BUF_G] = gg_plan_take(p, (size_t)(M * E) * 2);
    GG_TRY(gg_matmul_plan(ctx, &dw, &p->gemm[GEMM_DW]));
    sp->col_chunks = gg_k_col_sum_chunks(M, H, GG_DT_BF16, ctx->sm_count);
    p->buffer[BUF_PARTIALS] = gg_plan_take(p, (size_t)sp->col_chunks * (size_t)H * sizeof(float));
    return GG_SUCCESS;
}

/* dW = dYᵀ @ gated on stream s (`workspace`: s's cuBLASLt workspace in r, 0: the caller's, 1: the side stream's),
 * handed to the all-reduce as soon as it is final. Where dW runs its k % 128 rows apart (its 16-bit sum:
 * src/gemm/matmul.c), that tail runs on tail_stream after what is enqueued there (with the side stream's workspace),
 * or after the first part where tail_stream is s. The narrow schedule puts it behind the chain, which ends before
 * dW's first part and its split-k reduction: 079 at 17312 tokens ran the tail after them, 4.7 us and a launch on the
 * block's last path. */
static gg_status enqueue_weight_grad(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                                     int workspace, cudaStream_t s, cudaStream_t tail_stream) {
    void *const *t = c->t;
    GG_TRY(gg_matmul_run_split_in(ctx, &p->gemm[GEMM_DW], t[T_GATED], t[T_DY], t[T_DW], c->accumulate,
                                  r->workspace[workspace], s, tail_stream, r->workspace[1], r->ev_conv));
    return gg_dist_grad_ready(ctx, c, s, T_DW);
}

/* grad_bias = Σ of the rows of `in` ([rows, H]: dY itself, bf16, or the fused kernel's fp32 bias rows), handed to
 * the all-reduce as soon as it is final. */
static gg_status sum_bias(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                          const void *in, gg_dtype in_type, int64_t rows, cudaStream_t s) {
    GG_CUDA_TRY(ctx, gg_k_col_sum(in, in_type, rows, c->dim0, own(p)->col_chunks, gg_res_buffer(r, p, BUF_PARTIALS),
                                  r->counter + GG_COUNTER_SUM_A, c->t[T_DB], GG_DT_BF16, c->accumulate, NULL, NULL,
                                  s));
    return gg_dist_grad_ready(ctx, c, s, T_DB);
}

/* grad_bias = Σ_rows dY. */
static gg_status enqueue_bias_grad(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                                   cudaStream_t s) {
    return sum_bias(ctx, r, p, c, c->t[T_DY], GG_DT_BF16, c->tokens, s);
}

/* Both weight gradients, in that order, on the side stream s (its cuBLASLt workspace). */
static gg_status enqueue_weight_grads(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p,
                                      const gg_block_call *c, cudaStream_t s) {
    GG_TRY(enqueue_weight_grad(ctx, r, p, c, 1, s, s));
    return enqueue_bias_grad(ctx, r, p, c, s);
}

/* The chain from g to grad_ssm_output and grad_gate, on narrow_ctas SMs (0: all). It is g's only reader, so while g
 * fits in GG_SSM_DISCARD_L2_FRACTION of the L2 it drops g's lines as it reads them (no write-back of a dead
 * buffer). */
static gg_status chain(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                       int narrow_ctas, cudaStream_t s) {
    void *const *t = c->t;
    const int discard = (double)c->tokens * (double)c->dim1 * 2 <= ctx->l2_bytes * GG_SSM_DISCARD_L2_FRACTION;
    GG_CUDA_TRY(ctx, gg_k_ssm_gate_grad(gg_res_buffer(r, p, BUF_G), t[T_GATE_ACT], t[T_SSM], t[T_GATE],
                                        t[T_GRAD_SSM], t[T_GRAD_GATE], (size_t)(c->tokens * c->dim1),
                                        c->use_silu_gate, ctx->sm_count, narrow_ctas, discard, s));
    return GG_SUCCESS;
}

/* g = bf16(dY @ W) into the plan's g buffer. */
static gg_status gemm_g(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                        cudaStream_t s) {
    void *const *t = c->t;
    return gg_matmul_run_in(ctx, &p->gemm[GEMM_G], t[T_W], t[T_DY], gg_res_buffer(r, p, BUF_G), 0, r->workspace[0], s);
}

/* The narrow schedule: g on every SM; then dW on the caller's stream, and beside it on the side stream the chain on
 * the SMs dW leaves; the bias sum where narrow_rows puts it. */
static gg_status enqueue_narrow(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                                cudaStream_t main) {
    cudaStream_t side = r->side, aux = r->aux;
    const bias_place bias = narrow_rows[narrow_row(p->key.tokens)].bias; /* the plan's M, as build() decides */
    gg_status status = GG_SUCCESS;
    if (bias == BIAS_FIRST) {
        GG_TRY(gg_stream_handoff(ctx, main, r->ev_fork, side));
        status = enqueue_bias_grad(ctx, r, p, c, side);
    }
    if (status == GG_SUCCESS) status = gemm_g(ctx, r, p, c, main);
    if (status == GG_SUCCESS) status = gg_stream_handoff(ctx, main, r->ev_fork, side); /* g is ready */
    if (status == GG_SUCCESS && bias == BIAS_BESIDE) status = gg_stream_handoff(ctx, main, r->ev_aux, aux);
    if (status == GG_SUCCESS) status = chain(ctx, r, p, c, own(p)->narrow_ctas, side);
    if (status == GG_SUCCESS) status = enqueue_weight_grad(ctx, r, p, c, 0, main, side);
    /* last: so enqueued, its CTAs were measured to reach the SMs after dW's and the chain's (see narrow_rows) */
    if (status == GG_SUCCESS && bias == BIAS_BESIDE) status = enqueue_bias_grad(ctx, r, p, c, aux);
    gg_branch joins[2];
    int n = 0;
    if (bias == BIAS_BESIDE) joins[n++] = (gg_branch){aux, r->ev_aux_join};
    joins[n++] = (gg_branch){side, r->ev_join};
    /* The aux stream carries only the bias sum (deferrable in a step graph); the side stream has the chain. */
    return gg_stream_join_res(ctx, r, status, main, joins, n, bias == BIAS_BESIDE ? 1u : 0u);
}

/* g and its chain in one kernel on the side stream (high priority), then the bias as the column sum of the rows it
 * summed per 128 tokens; dW beside them on the caller's stream, so that its CTAs take the SMs of the kernel's last
 * wave as they free instead of waiting for the whole kernel. */
static gg_status enqueue_fused(gg_ctx *ctx, const gg_exec_res *r, const gg_block_plan *p, const gg_block_call *c,
                               cudaStream_t main) {
    void *const *t = c->t;
    cudaStream_t side = r->side;
    GG_TRY(gg_stream_handoff(ctx, main, r->ev_fork, side));
    float *bias_rows = gg_res_buffer(r, p, BUF_BIAS_ROWS);
    gg_status status = GG_SUCCESS;
    GG_CUDA_GOTO(ctx,
                 gg_k_ssm_fused(t[T_DY], t[T_W], t[T_GATE_ACT], t[T_SSM], t[T_GATE], t[T_GRAD_SSM], t[T_GRAD_GATE],
                                bias_rows, c->tokens, c->dim0, c->dim1, c->use_silu_gate, ctx->sm_count, side),
                 status, join);
    status = sum_bias(ctx, r, p, c, bias_rows, GG_DT_F32, fused_bias_rows(c->tokens), side);
    if (status == GG_SUCCESS) status = enqueue_weight_grad(ctx, r, p, c, 0, main, main);
join:
    return gg_stream_join(ctx, status, main, side, r->ev_join);
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
    const gg_exec_res r = gg_block_res(ctx, c, main);
    if (own(p)->route == ROUTE_FUSED) return enqueue_fused(ctx, &r, p, c, main);
    if (own(p)->narrow_ctas > 0) return enqueue_narrow(ctx, &r, p, c, main);
    cudaStream_t side = r.side;
    /* Fork first: dW and the bias sum start with g (unlike the FFN blocks, forking after g is slower here; the
     * alternatives are in docs/decisions.md). Calls that do not sync take the narrow schedule instead (above). */
    GG_TRY(gg_stream_handoff(ctx, main, r.ev_fork, side));
    gg_status status = enqueue_weight_grads(ctx, &r, p, c, side);
    if (status == GG_SUCCESS) status = gemm_g(ctx, &r, p, c, main);
    if (status == GG_SUCCESS) status = chain(ctx, &r, p, c, 0, main);
    /* The side stream carries only dW and the bias sum: deferrable in a step graph. */
    return gg_stream_join_res(ctx, &r, status, main, &(gg_branch){side, r.ev_join}, 1, 1u);
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
