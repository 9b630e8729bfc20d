/*
 * ffn.c - blocks 2 (GELU FFN, gg_gelu_ffn_backward) and 3 (MLP with biases, gg_mlp_backward): the same backward,
 * so one driver serves both; block 3 also reduces the two bias gradients. Both compute gelu' from the
 * pre-activation alone: block 2's saved tanh_inner is validated but not read (the tanh costs less than reading it).
 * The two tensor tables share the order of their common tensors.
 *
 * Order: on the caller's stream G = dY @ W2, then R = G * gelu'(x) and dX = R @ W1; on the side stream, once G
 * is done, dW2 = dYᵀ @ act and, once R is ready, dW1 = Rᵀ @ X (the measured best schedule: see enqueue). Block 3
 * sums grad_bias1 and grad_bias2 in the launch that writes R. Given x's fp16 copy, block 3's G may write R itself in
 * cuBLASLt's DGELU epilogue where its plan measured that faster (plan_dgelu, ffn_dgelu.h), grad_bias1 then a column
 * sum over R on the side stream.
 * Graphs that all-reduce the gradients during the backward run another order (enqueue_weights_first): dW2 first and
 * dW1 as soon as R exists, so each reduction has later work to hide behind, and dX last.
 * fp16 mode converts the GEMMs' operands to fp16 first, except at few tokens, where the weights (whose size does not
 * shrink with the tokens) are not all converted (route): on an sm_90a device G, and dX where it wins, read them in
 * fp32 in gradgraph's own GEMM (gg_k_gemm_f32w), which rounds them to fp16 as it loads them; elsewhere G runs in TF32
 * straight from the fp32 dY and W2, into an fp32 G, from which gelu' writes R in fp16, and only W1 is converted.
 * The critical chain's own kernels (W2's conversion, gg_k_gemm_f32w) launch at the greatest priority and the side
 * stream's conversions at the least, so that the former take the SMs first when both wait for them.
 *
 * Column-major view of the row-major tensors (a row-major [r,c] matrix is column-major c x r, ld = c):
 *   G   [M,F]: G'(F x M)   = W2'(F x D)     @ dY'(D x M)         m=F n=M k=D  A=W2 N lda=F  B=dY N ldb=D
 *   dW2 [D,F]: (F x D)     = act'(F x M)    @ dY'(D x M)ᵀ        m=F n=D k=M  A=act N lda=F B=dY T ldb=D
 *   dX  [M,D]: (D x M)     = W1'(D x F)     @ R'(F x M)          m=D n=M k=F  A=W1 N lda=D  B=R N ldb=F
 *   dW1 [F,D]: (D x F)     = X'(D x M)      @ R'(F x M)ᵀ         m=D n=F k=M  A=X N lda=D   B=R T ldb=F
 */
#include "block.h"
#include "ddp.h"
#include "blocks.h"
#include "ffn_dgelu.h"
#include "kernels/gg_kernels.h"
#include "streams.h"

/* Tensor order: the common ones first, then block 2's tanh_inner or block 3's bias gradients. */
enum { T_DY, T_X, T_W1, T_W2, T_PRE, T_ACT, T_DX, T_DW1, T_DW2, T_EXTRA0, T_EXTRA1 };
enum { T_TANH = T_EXTRA0, T_RES_FFN = T_EXTRA1 };            /* block 2 (tanh_inner: validated, not read) */
enum { T_DB1 = T_EXTRA0, T_DB2 = T_EXTRA1, T_RES_MLP = T_EXTRA1 + 1 }; /* block 3 */
/* Then the fp16 copies the caller may give (fp16 mode), in this order from the row after grad_residual. */
enum { F16_X, F16_W1, F16_W2, F16_ACT, F16_PRE };
enum { T_F16_FFN = T_RES_FFN + 1, T_F16_MLP = T_RES_MLP + 1 };

/* GEMM_G_FULL: G on every SM, for the calls of a narrow-schedule plan that have nothing to convert beside G.
 * GEMM_G_DGELU: block 3's G writing R = G * gelu'(x) itself, in cuBLASLt's DGELU epilogue from x's fp16 copy, on every
 * SM, planned only where the plan chose it (plan_dgelu), for the calls that give that copy (ffn_dgelu.h). */
enum { GEMM_G, GEMM_DW2, GEMM_DX, GEMM_DW1, GEMM_G_FULL, GEMM_G_DGELU };
/* Scratch: G, and R over it in place, in the GEMMs' operand type (fp16 in fp16 mode, else fp32); fp16 copies of the
 * operands in fp16 mode (not of the weights the few-token routes read in fp32; the TF32 G route's fp32 G in BUF_G32);
 * partial sums. */
enum { BUF_G, BUF_DY16, BUF_W2_16, BUF_ACT16, BUF_X16, BUF_W1_16, BUF_PARTIALS1, BUF_PARTIALS2, BUF_G32 };

#define COMMON_TENSORS(args, pre, act)                                                                              \
    [T_DY] = GG_TENSOR(args, grad_output, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 0, 0),                                    \
    [T_X] = GG_TENSOR(args, hidden_states, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 0, 0),                                   \
    [T_W1] = GG_TENSOR(args, weight1, GG_EXT_DIM1, GG_EXT_DIM0, 4, 0, 0),                                          \
    [T_W2] = GG_TENSOR(args, weight2, GG_EXT_DIM0, GG_EXT_DIM1, 4, 0, 0),                                          \
    [T_PRE] = GG_TENSOR(args, pre, GG_EXT_TOKENS, GG_EXT_DIM1, 4, 0, 0),                                           \
    [T_ACT] = GG_TENSOR(args, act, GG_EXT_TOKENS, GG_EXT_DIM1, 4, 0, 0),                                           \
    [T_DX] = GG_TENSOR(args, grad_hidden_states, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 1, 0),                             \
    [T_DW1] = GG_TENSOR(args, grad_weight1, GG_EXT_DIM1, GG_EXT_DIM0, 4, 1, 0),                                    \
    [T_DW2] = GG_TENSOR(args, grad_weight2, GG_EXT_DIM0, GG_EXT_DIM1, 4, 1, 0)

#define FP16_TENSORS(args, first, act16, pre16)                                                                     \
    [(first) + F16_X] = GG_TENSOR(args, hidden_states_fp16, GG_EXT_TOKENS, GG_EXT_DIM0, 2, 0, GG_TENSOR_FP16_ONLY),   \
    [(first) + F16_W1] = GG_TENSOR(args, weight1_fp16, GG_EXT_DIM1, GG_EXT_DIM0, 2, 0, GG_TENSOR_FP16_ONLY),          \
    [(first) + F16_W2] = GG_TENSOR(args, weight2_fp16, GG_EXT_DIM0, GG_EXT_DIM1, 2, 0, GG_TENSOR_FP16_ONLY),          \
    [(first) + F16_ACT] = GG_TENSOR(args, act16, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, GG_TENSOR_FP16_ONLY),              \
    [(first) + F16_PRE] = GG_TENSOR(args, pre16, GG_EXT_TOKENS, GG_EXT_DIM1, 2, 0, GG_TENSOR_FP16_ONLY)

static const gg_tensor_spec gelu_ffn_tensors[] = {
    COMMON_TENSORS(gg_gelu_ffn_args, linear1_out, gelu_out),
    [T_TANH] = GG_TENSOR(gg_gelu_ffn_args, tanh_inner, GG_EXT_TOKENS, GG_EXT_DIM1, 4, 0, GG_TENSOR_UNREAD),
    [T_RES_FFN] = GG_TENSOR(gg_gelu_ffn_args, grad_residual, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 0, GG_TENSOR_OPTIONAL),
    FP16_TENSORS(gg_gelu_ffn_args, T_F16_FFN, gelu_out_fp16, linear1_out_fp16),
};
static const gg_tensor_spec mlp_tensors[] = {
    COMMON_TENSORS(gg_mlp_args, intermediate, intermediate_activated),
    [T_DB1] = GG_TENSOR(gg_mlp_args, grad_bias1, GG_EXT_ONE, GG_EXT_DIM1, 4, 1, 0),
    [T_DB2] = GG_TENSOR(gg_mlp_args, grad_bias2, GG_EXT_ONE, GG_EXT_DIM0, 4, 1, 0),
    [T_RES_MLP] = GG_TENSOR(gg_mlp_args, grad_residual, GG_EXT_TOKENS, GG_EXT_DIM0, 4, 0, GG_TENSOR_OPTIONAL),
    FP16_TENSORS(gg_mlp_args, T_F16_MLP, intermediate_activated_fp16, intermediate_fp16),
};
#define N_TENSORS(table) (int)(sizeof table / sizeof table[0])
_Static_assert(sizeof(gg_gelu_ffn_args) == N_TENSORS(gelu_ffn_tensors) * sizeof(void *), "one row a field");
_Static_assert(sizeof(gg_mlp_args) == N_TENSORS(mlp_tensors) * sizeof(void *), "one row a field");
_Static_assert(N_TENSORS(mlp_tensors) <= GG_BLOCK_MAX_TENSORS, "a call holds every tensor");

/* fp16 mode's route (the plan's route): which GEMMs read an fp32 weight themselves instead of its fp16 copy.
 * None (ROUTE_CONVERT): every operand converted to fp16 first. On an sm_90a device, G and, at fewer tokens, dX in
 * gg_k_gemm_f32w, which rounds the weight to fp16 as it loads it; elsewhere, at few tokens, G in TF32 from the fp32
 * dY and W2. */
enum { ROUTE_CONVERT = 0, ROUTE_G_F32W = 1, ROUTE_DX_F32W = 2, ROUTE_G_TF32 = 4 };

/* Whether G reads W2's fp16 copy: on neither of its fp32-weight routes (dX may still take its own, when gemm_f32w
 * takes dX's shape but not G's). */
static int g_reads_w2_copy(int route) { return !(route & (ROUTE_G_F32W | ROUTE_G_TF32)); }

/* The plan with the blocks' own launch parameters. */
typedef struct ffn_plan {
    gg_block_plan base;
    int route;         /* fp16 mode's route: ROUTE_* bits */
    int narrow_ctas;   /* > 0: the narrow schedule, the fp16 copies of act, X and W1 on this many SMs beside G */
    int col_chunks[3]; /* block 3: row chunks of the column sums of grad_bias1 over R (in the gelu' pass), of
                        * grad_bias2 over dY, and of grad_bias1 over the fp16 R of G's DGELU epilogue */
} ffn_plan;

static const ffn_plan *own(const gg_block_plan *p) { return (const ffn_plan *)p; }

/* ---- Tuning: the thresholds of this block that came from measurement on an H200 (docs/decisions.md) ---- */
enum {
    /* G reads W2 in fp32 in gg_k_gemm_f32w up to here; beyond, its tiles run in four waves and converting wins. */
    GG_FFN_G_F32W_MAX_TOKENS = 1024,
    /* dX reads W1 in fp32 in gg_k_gemm_f32w up to here, where it is bound by reading W1 ... */
    GG_FFN_DX_F32W_MAX_TOKENS = 512,
    /* ... and up to GG_FFN_G_F32W_MAX_TOKENS where its grid fills at least FILL_NUM/FILL_DEN of the SMs (on fewer,
     * converting W1 for cuBLASLt wins). */
    GG_FFN_DX_FILL_NUM = 7,
    GG_FFN_DX_FILL_DEN = 8,
    /* Without gg_k_gemm_f32w, G runs in TF32 from the fp32 inputs up to here: converting W2 costs more. */
    GG_FFN_G_TF32_MAX_TOKENS = 512,
    /* The narrow schedule's SMs for the fp16 copies beside G: fewer or more slows G more than the copies gain. */
    GG_FFN_NARROW_CTAS = 24,
    /* The narrow schedule only on GPUs with at least this many times GG_FFN_NARROW_CTAS SMs. */
    GG_FFN_NARROW_MIN_SM_RATIO = 4,
};

/* The plan's route, the same on every path (the data-parallel ones too, so that a rank's synced gradients are the
 * mean of what its local calls compute). */
static int route(const gg_ctx *ctx, const gg_block_plan *p) {
    const int64_t M = p->key.tokens, D = p->key.dim0, F = p->key.dim1;
    if (p->key.precision != GG_PRECISION_FP16) return ROUTE_CONVERT;
    int r = ROUTE_CONVERT;
    if (ctx->has_wgmma && M <= GG_FFN_G_F32W_MAX_TOKENS) {
        if (gg_k_gemm_f32w_supported(M, F, D)) r |= ROUTE_G_F32W;
        const int dx_fills = GG_FFN_DX_FILL_DEN * gg_k_gemm_f32w_ctas(M, D, F, ctx->f32w_clusters) >=
                             GG_FFN_DX_FILL_NUM * (int64_t)ctx->sm_count;
        if (gg_k_gemm_f32w_supported(M, D, F) && (M <= GG_FFN_DX_F32W_MAX_TOKENS || dx_fills)) r |= ROUTE_DX_F32W;
    }
    if (!(r & ROUTE_G_F32W) && M <= GG_FFN_G_TF32_MAX_TOKENS) r |= ROUTE_G_TF32;
    return r;
}

/* The narrow schedule (fp16 mode above the few-token route, calls that do not sync, a context whose chains run on
 * two streams): G runs on all SMs but GG_FFN_NARROW_CTAS, and the fp16 copies of act, X and W1 (needed only by the
 * later GEMMs) run on those, one CTA of 1024 threads per SM, instead of before G on every SM. A cuBLASLt GEMM holds
 * every SM it may use to its end, so without the SM target nothing runs beside it; with overlap NEVER nothing does
 * anyway (one stream), and the narrow copies would only run one after another on a few SMs. */
static int narrow_ctas(const gg_ctx *ctx, const gg_block_plan *p) {
    const int on = p->key.precision == GG_PRECISION_FP16 && !own(p)->route && !p->key.sync_grads &&
                   ctx->config.overlap != GG_OVERLAP_NEVER &&
                   ctx->sm_count >= GG_FFN_NARROW_MIN_SM_RATIO * GG_FFN_NARROW_CTAS;
    return on ? GG_FFN_NARROW_CTAS : 0;
}

/* Block 3's plans that may write R in G's DGELU epilogue: fp16 mode, G in cuBLASLt on the fp16 W2 (not the few-token
 * routes), the two-stream schedule (not the syncing orders, whose ranks must all run the same kernels). */
static int dgelu_candidate(const gg_block_plan *p) {
    return p->key.block == GG_BLOCK_MLP && p->key.precision == GG_PRECISION_FP16 && g_reads_w2_copy(own(p)->route) &&
           !p->key.sync_grads && !p->key.pair_split;
}

/* Whether the plan writes R in G's DGELU epilogue (for the calls that give x's fp16 copy): it holds GEMM_G_DGELU. */
static int has_dgelu(const gg_block_plan *p) { return p->gemm[GEMM_G_DGELU].op != NULL; }

/* GEMM_G_DGELU for a candidate plan: planned when GG_FFN_DGELU is not "pass", kept where it is forced or wins by
 * time (ffn_dgelu.h), else destroyed (the plan writes R in G's epilogue exactly when it holds it: has_dgelu).
 * cuBLASLt without an algorithm for the epilogue at this shape: the pass, with no ERROR line and no message left
 * behind. */
static gg_status plan_dgelu(gg_ctx *ctx, gg_block_plan *p) {
    const int64_t M = p->key.tokens, D = p->key.dim0, F = p->key.dim1;
    if (!dgelu_candidate(p)) return GG_SUCCESS;
    const gg_dgelu_mode mode = gg_ffn_dgelu_mode(ctx); /* read here: a bad value is named only where it matters */
    if (mode == GG_DGELU_PASS || (mode == GG_DGELU_AUTO && !ctx->tune)) return GG_SUCCESS;
    gg_gemm_shape s = {0, 0, F, M, D, F, D, F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 0, CUBLASLT_EPILOGUE_DGELU};
    char saved[GG_MSG_BYTES];
    gg_tentative_begin(ctx, saved);
    const gg_status st = gg_matmul_plan(ctx, &s, &p->gemm[GEMM_G_DGELU]);
    if (gg_tentative_end(ctx, saved, st, GG_ERROR_CUBLAS, "R in the gelu' pass instead")) return GG_SUCCESS;
    GG_TRY(st);
    const gg_matmul *g = &p->gemm[own(p)->narrow_ctas ? GEMM_G_FULL : GEMM_G]; /* G as the DGELU path runs it */
    const int kept = mode == GG_DGELU_EPILOGUE ||
                     gg_ffn_dgelu_wins(ctx, M, F, g->tuned_us, p->gemm[GEMM_G_DGELU].tuned_us);
    if (!kept) gg_matmul_destroy(&p->gemm[GEMM_G_DGELU]);
    gg_log(ctx, GG_LOG_DEBUG, "M=%lld: R in %s where the call gives x's fp16 copy", (long long)M,
           kept ? "G's DGELU epilogue" : "the gelu' pass");
    return GG_SUCCESS;
}

/* A GEMM of the precision mode; its output is fp32 unless `out_is_operand` (G: written in the operand type, so R,
 * over it in place, is ready for the next GEMMs). */
static gg_status plan_gemm(gg_ctx *ctx, gg_matmul *mm, gg_precision precision, int out_is_operand, int sm_target,
                           int trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldd) {
    gg_gemm_shape s = {0, trans_b, m, n, k, lda, ldb, ldd, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, sm_target, 0};
    gg_gemm_types_for(precision, &s.ab_type, &s.compute);
    if (out_is_operand) s.d_type = s.ab_type;
    return gg_matmul_plan(ctx, &s, mm);
}

static gg_status build(gg_ctx *ctx, gg_block_plan *p) {
    ffn_plan *fp = (ffn_plan *)p;
    const int64_t M = p->key.tokens, D = p->key.dim0, F = p->key.dim1;
    const gg_precision prec = (gg_precision)p->key.precision;
    /* Syncing graphs (weights-first order, comm_sms > 0): dX, the last GEMM, leaves SMs to dW1's reduction; the
     * others run on every SM (G and dW1 leaving SMs too measured slower: docs/distributed.md). */
    const int sm_target = gg_plan_sm_target(ctx, p);
    /* The two-rank split reduction (enqueue_pair) runs dW2, dW1 and dX in halves (of their n: rows of the gradient,
     * tokens of dX); every GEMM keeps all SMs. */
    const int64_t halves = p->key.pair_split ? 2 : 1;
    fp->route = route(ctx, p);
    if (fp->route & ROUTE_G_F32W)
        gg_log(ctx, GG_LOG_DEBUG, "M=%lld: G in gg_k_gemm_f32w, k split over clusters of %d", (long long)M,
               gg_k_gemm_f32w_split(M, F, D, ctx->f32w_clusters));
    if (fp->route & ROUTE_DX_F32W)
        gg_log(ctx, GG_LOG_DEBUG, "M=%lld: dX in gg_k_gemm_f32w, k split over clusters of %d", (long long)M,
               gg_k_gemm_f32w_split(M, D, F, ctx->f32w_clusters));
    fp->narrow_ctas = narrow_ctas(ctx, p);
    const int beside_narrow = fp->narrow_ctas ? ctx->sm_count - fp->narrow_ctas : 0;
    if (fp->route & ROUTE_G_TF32)
        GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_G], GG_PRECISION_TF32, 0, 0, 0, F, M, D, F, D, F));
    else if (g_reads_w2_copy(fp->route))
        GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_G], prec, 1, beside_narrow, 0, F, M, D, F, D, F));
    if (fp->narrow_ctas) GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_G_FULL], prec, 1, 0, 0, F, M, D, F, D, F));
    GG_TRY(plan_dgelu(ctx, p));
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_DW2], prec, 0, 0, 1, F, D / halves, M, F, D, F));
    if (!(fp->route & ROUTE_DX_F32W))
        GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_DX], prec, 0, sm_target, 0, D, M / halves, F, D, F, D));
    GG_TRY(plan_gemm(ctx, &p->gemm[GEMM_DW1], prec, 0, 0, 1, D, F / halves, M, D, F, D));
    const size_t h = 2; /* sizeof(half) */
    p->buffer[BUF_G] = gg_plan_take(p, (size_t)(M * F) * (prec == GG_PRECISION_FP16 ? h : sizeof(float)));
    if (prec == GG_PRECISION_FP16) {
        p->buffer[BUF_DY16] = gg_plan_take(p, (size_t)(M * D) * h);
        if (fp->route & ROUTE_G_TF32) p->buffer[BUF_G32] = gg_plan_take(p, (size_t)(M * F) * sizeof(float));
        if (g_reads_w2_copy(fp->route)) p->buffer[BUF_W2_16] = gg_plan_take(p, (size_t)(D * F) * h);
        p->buffer[BUF_ACT16] = gg_plan_take(p, (size_t)(M * F) * h);
        p->buffer[BUF_X16] = gg_plan_take(p, (size_t)(M * D) * h);
        if (!(fp->route & ROUTE_DX_F32W)) p->buffer[BUF_W1_16] = gg_plan_take(p, (size_t)(F * D) * h);
    }
    if (p->key.block == GG_BLOCK_MLP) {
        fp->col_chunks[0] = gg_k_col_sum_chunks(M, F, GG_DT_F32, ctx->sm_count); /* grad_bias1 over R, with gelu' */
        fp->col_chunks[1] = gg_k_col_sum_chunks(M, D, GG_DT_F32, ctx->sm_count); /* grad_bias2 over dY */
        fp->col_chunks[2] = gg_k_col_sum_chunks(M, F, GG_DT_F16, ctx->sm_count); /* grad_bias1 over DGELU's R */
        /* each sum its own partials (and counters: GG_COUNTER_SUM_A, _B); grad_bias1's, either way of summing it */
        const int chunks1 =
            has_dgelu(p) && fp->col_chunks[2] > fp->col_chunks[0] ? fp->col_chunks[2] : fp->col_chunks[0];
        p->buffer[BUF_PARTIALS1] = gg_plan_take(p, (size_t)chunks1 * (size_t)F * sizeof(float));
        p->buffer[BUF_PARTIALS2] = gg_plan_take(p, (size_t)fp->col_chunks[1] * (size_t)D * sizeof(float));
    }
    return GG_SUCCESS;
}

/* The operands of the four GEMMs (the caller's fp32 tensors, or in fp16 mode their fp16 copies: the caller's, or
 * made into the scratch), and G. */
typedef struct ffn_operands {
    const void *dy, *w2, *act, *x, *w1;
    int g_full; /* G on every SM (GEMM_G_FULL): a narrow-schedule plan, and act, X and W1 all given in fp16 */
    void *G; /* G = dY @ W2, then R = G * gelu'(x) over it in place: an operand of dX and dW1 */
    gg_dtype g_type;
    void *g_out; /* where the G GEMM writes: G, or on the TF32 G route an fp32 G that gelu' reads into R */
    gg_dtype g_out_type;
    gg_exec_res r; /* the streams, events, scratch, counters and workspaces the call runs with */
} ffn_operands;

/* The caller's fp16 copy of input `tensor` (X, W1, W2, act or the pre-activation x) when the call gives one (fp16
 * mode), else NULL. */
static const void *given_fp16(const gg_block_call *c, int tensor) {
    int copy;
    switch (tensor) {
    case T_X: copy = F16_X; break;
    case T_W1: copy = F16_W1; break;
    case T_W2: copy = F16_W2; break;
    case T_PRE: copy = F16_PRE; break;
    default: copy = F16_ACT; break;
    }
    const int row = (c->info->kind == GG_BLOCK_MLP ? T_F16_MLP : T_F16_FFN) + copy;
    return gg_tensor_used(c, row) ? c->t[row] : NULL;
}

/* fp16 mode's operand of input `tensor`: the caller's copy, or the scratch buffer `buf` to make it in. */
static const void *fp16_operand(const gg_block_call *c, const gg_exec_res *r, const gg_block_plan *p, int tensor,
                                int buf) {
    const void *given = given_fp16(c, tensor);
    return given ? given : gg_res_buffer(r, p, buf);
}

static ffn_operands operands(const gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t main) {
    void *const *t = c->t;
    const gg_exec_res r = gg_block_res(ctx, c, main);
    ffn_operands o = {t[T_DY], t[T_W2], t[T_ACT], t[T_X], t[T_W1], 0, gg_res_buffer(&r, p, BUF_G), GG_DT_F32,
                      gg_res_buffer(&r, p, BUF_G), GG_DT_F32, r};
    if (c->precision == GG_PRECISION_FP16) {
        o.dy = gg_res_buffer(&r, p, BUF_DY16);
        if (g_reads_w2_copy(own(p)->route)) o.w2 = fp16_operand(c, &r, p, T_W2, BUF_W2_16);
        o.act = fp16_operand(c, &r, p, T_ACT, BUF_ACT16);
        o.x = fp16_operand(c, &r, p, T_X, BUF_X16);
        if (!(own(p)->route & ROUTE_DX_F32W)) o.w1 = fp16_operand(c, &r, p, T_W1, BUF_W1_16);
        o.g_full = own(p)->narrow_ctas && given_fp16(c, T_ACT) && given_fp16(c, T_X) && given_fp16(c, T_W1);
        o.g_type = GG_DT_F16;
        if (own(p)->route & ROUTE_G_TF32) o.g_out = gg_res_buffer(&r, p, BUF_G32);
        else o.g_out_type = GG_DT_F16;
    }
    return o;
}

/* The index of the call's grad_residual in its tensor table (the last row of either block's). */
static int residual(const gg_block_call *c) { return c->info->kind == GG_BLOCK_MLP ? T_RES_MLP : T_RES_FFN; }

/* Whether an operand is an fp16 copy to make: operands() points it at a copy only in fp16 mode, and not for the
 * weights the route reads in fp32 (there, and in the other modes, the operand is the input itself), and it is made
 * only where the caller gave none. */
static int is_copy(const gg_block_call *c, int tensor, const void *operand) {
    return operand != c->t[tensor] && operand != given_fp16(c, tensor);
}

/* The fp16 copy of input `tensor` into `copy`, its operand (a no-op when the operand is the input: is_copy), on
 * narrow_ctas SMs (gg_k_f32_to_f16; 0: every SM), at `priority` (GG_PRIORITY_OF_STREAM: the stream's). */
static gg_status to_f16_on(gg_ctx *ctx, const gg_block_call *c, int tensor, const void *copy, int narrow_ctas,
                           int priority, cudaStream_t s) {
    if (!is_copy(c, tensor, copy)) return GG_SUCCESS;
    GG_CUDA_TRY(ctx, gg_k_f32_to_f16(c->t[tensor], (void *)copy, gg_tensor_elems(c, tensor), ctx->sm_count,
                                     narrow_ctas, priority, ctx->counter + GG_COUNTER_OVERFLOW, s));
    return GG_SUCCESS;
}

/* to_f16_on on every SM, at the stream's priority. */
static gg_status to_f16(gg_ctx *ctx, const gg_block_call *c, int tensor, const void *copy, cudaStream_t s) {
    return to_f16_on(ctx, c, tensor, copy, 0, GG_PRIORITY_OF_STREAM, s);
}

/* In fp16 mode, the fp16 copies of `n` inputs (act, X, W1, W2) on `side` (on the SMs G leaves free when the plan
 * has the narrow schedule) at `priority`, then a mark `main` waits for before it reads them (gg_stream_wait with
 * ev_conv). */
static gg_status to_f16_beside(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                               const int *tensors, int n, int priority, cudaStream_t side, cudaStream_t main) {
    if (c->precision != GG_PRECISION_FP16) return GG_SUCCESS;
    for (int i = 0; i < n; ++i) {
        const int t = tensors[i];
        const void *copy = t == T_ACT ? o->act : t == T_X ? o->x : t == T_W1 ? o->w1 : o->w2;
        GG_TRY(to_f16_on(ctx, c, t, copy, own(p)->narrow_ctas, priority, side));
    }
    return gg_stream_mark(ctx, side, o->r.ev_conv, main);
}

/* dY's fp16 copy (fp16 mode); block 3 also sums grad_bias2 = Σ_rows dY in the same pass, so the sum costs no read
 * of its own and is done before the GEMMs (on the side stream beside G it delays dW2). */
static gg_status dy_first(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                          cudaStream_t s) {
    if (c->info->kind != GG_BLOCK_MLP) return to_f16(ctx, c, T_DY, o->dy, s);
    void *copy = c->precision == GG_PRECISION_FP16 ? (void *)o->dy : NULL;
    GG_CUDA_TRY(ctx, gg_k_col_sum(c->t[T_DY], GG_DT_F32, c->tokens, c->dim0, own(p)->col_chunks[1],
                                  gg_res_buffer(&o->r, p, BUF_PARTIALS2), o->r.counter + GG_COUNTER_SUM_B, c->t[T_DB2],
                                  GG_DT_F32, c->accumulate, copy, ctx->counter + GG_COUNTER_OVERFLOW, s));
    return gg_dist_grad_ready(ctx, c, s, T_DB2);
}

/* G = dY @ W2 into o->g_out (on the few-token routes from the fp32 W2: in gg_k_gemm_f32w at `priority`, or in TF32
 * from the fp32 dY too). */
static gg_status gemm_g(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                        int priority, cudaStream_t s) {
    if (own(p)->route & ROUTE_G_F32W) {
        GG_CUDA_TRY(ctx, gg_k_gemm_f32w(o->dy, (const float *)o->w2, o->g_out, GG_DT_F16, NULL, c->tokens, c->dim1,
                                        c->dim0, ctx->f32w_clusters, priority, s));
        return GG_SUCCESS;
    }
    const void *dy = own(p)->route & ROUTE_G_TF32 ? c->t[T_DY] : o->dy;
    return gg_matmul_run_in(ctx, &p->gemm[o->g_full ? GEMM_G_FULL : GEMM_G], o->w2, dy, o->g_out, 0,
                            o->r.workspace[0], s);
}

/* dX = R @ W1 for `tokens` tokens from token `first` (the two-rank split reduction runs it in halves); `priority` as
 * gemm_g's. */
static gg_status gemm_dx(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                         int64_t first, int64_t tokens, int priority, cudaStream_t s) {
    const size_t g_elem = o->g_type == GG_DT_F16 ? 2 : 4;
    const void *r = (const char *)o->G + (size_t)first * (size_t)c->dim1 * g_elem;
    const size_t offset = (size_t)first * (size_t)c->dim0;
    float *dx = (float *)c->t[T_DX] + offset;
    const float *res = c->t[residual(c)] ? (const float *)c->t[residual(c)] + offset : NULL; /* added in the epilogue */
    if (!(own(p)->route & ROUTE_DX_F32W))
        return gg_matmul_run_scaled_in(ctx, &p->gemm[GEMM_DX], o->w1, r, res, dx, 1.0f, res ? 1.0f : 0.0f,
                                       o->r.workspace[0], s);
    GG_CUDA_TRY(ctx, gg_k_gemm_f32w(r, (const float *)o->w1, dx, GG_DT_F32, res, tokens, c->dim0, c->dim1,
                                    ctx->f32w_clusters, priority, s));
    return GG_SUCCESS;
}

/* The weight gradients, in the side stream's workspace (s: the stream they run on): dW2 = dYᵀ·act, dW1 = Rᵀ·X. */
static gg_status gemm_dw2(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                          cudaStream_t s) {
    return gg_matmul_run_in(ctx, &p->gemm[GEMM_DW2], o->act, o->dy, c->t[T_DW2], c->accumulate, o->r.workspace[1], s);
}
static gg_status gemm_dw1(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                          cudaStream_t s) {
    return gg_matmul_run_in(ctx, &p->gemm[GEMM_DW1], o->x, o->G, c->t[T_DW1], c->accumulate, o->r.workspace[1], s);
}

/* R = G * gelu'(x), over G (from the fp32 G on the TF32 G route), x read from the caller's fp16 copy of it where
 * given (half the bytes; gelu' then of x rounded to fp16, as autocast's backward computes it); block 3 also sums
 * grad_bias1 in the same pass (R is not read back). */
static gg_status activation_grad(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                                 cudaStream_t s) {
    void *const *t = c->t;
    const void *x16 = c->precision == GG_PRECISION_FP16 ? given_fp16(c, T_PRE) : NULL;
    const void *x = x16 ? x16 : t[T_PRE];
    const gg_dtype x_type = x16 ? GG_DT_F16 : GG_DT_F32;
    if (c->info->kind != GG_BLOCK_MLP) {
        GG_CUDA_TRY(ctx, gg_k_gelu_grad(o->g_out, o->g_out_type, o->G, o->g_type, x, x_type,
                                        (size_t)(c->tokens * c->dim1), ctx->sm_count,
                                        ctx->counter + GG_COUNTER_OVERFLOW, s));
        return GG_SUCCESS;
    }
    GG_CUDA_TRY(ctx, gg_k_gelu_grad_col_sum(o->g_out, o->g_out_type, o->G, o->g_type, x, x_type, c->tokens, c->dim1,
                                            own(p)->col_chunks[0], gg_res_buffer(&o->r, p, BUF_PARTIALS1),
                                            o->r.counter + GG_COUNTER_SUM_A, t[T_DB1], c->accumulate,
                                            ctx->counter + GG_COUNTER_OVERFLOW, s));
    return gg_dist_grad_ready(ctx, c, s, T_DB1);
}

/* grad_bias1 = Σ_rows R over the fp16 R that G's DGELU epilogue wrote (a value that is not finite sets the overflow
 * word, as the gelu' pass's check does). */
static gg_status bias1_over_r(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o,
                              cudaStream_t s) {
    GG_CUDA_TRY(ctx, gg_k_col_sum(o->G, GG_DT_F16, c->tokens, c->dim1, own(p)->col_chunks[2],
                                  gg_res_buffer(&o->r, p, BUF_PARTIALS1), o->r.counter + GG_COUNTER_SUM_A, c->t[T_DB1],
                                  GG_DT_F32, c->accumulate, NULL, ctx->counter + GG_COUNTER_OVERFLOW, s));
    return gg_dist_grad_ready(ctx, c, s, T_DB1);
}

/* Whether this call's G writes R in its DGELU epilogue instead of the gelu' pass: the plan chose it, the call gives
 * x's fp16 copy, and G runs on every SM (not beside the narrow schedule's copies). Eager calls and graphs alike, so a
 * step graph and the eager calls it replaces write the same bits. */
static int dgelu_in_g(const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o) {
    return has_dgelu(p) && given_fp16(c, T_PRE) && (o->g_full || !own(p)->narrow_ctas);
}

/* The two-stream schedule: every call that does not reduce its gradients during the backward (a syncing call with
 * overlap off reduces them all in gg_dist_finish). On an error after the fork, the side stream is still joined. */
static gg_status enqueue_overlapped(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t main) {
    const ffn_operands o = operands(ctx, p, c, main);
    cudaStream_t side = o.r.side;
    /* fp16: dY first (both chains read it), then W2 on the caller's stream: G's operands (W2 not on the few-token
     * routes, whose G reads it in fp32 and starts at once). The operands needed later (act, X, W1) are converted on the
     * side stream: on the narrow schedule on the SMs G leaves free, else in whatever SMs the caller's stream leaves
     * (then they do not run underneath G: a cuBLASLt GEMM holds every SM to its end). They launch at the least
     * priority (the side stream's own is the greatest, for its GEMMs), W2's conversion and gg_k_gemm_f32w at the
     * greatest, so that G is not queued behind them (otherwise G starts microseconds late, which the few-token cases
     * feel). */
    GG_TRY(dy_first(ctx, p, c, &o, main));
    /* The side stream forks after W2's copy: its copies and G then become ready together and G, of the greater
     * priority, takes its SMs first (forked before, the copies took SMs while W2's copy drained and G started ~2 us
     * later: 068 -0.6 to -1.1 %, docs/decisions.md). */
    GG_TRY(to_f16_on(ctx, c, T_W2, o.w2, 0, ctx->priority_greatest, main));
    GG_TRY(gg_stream_handoff(ctx, main, o.r.ev_fork, side)); /* the side stream reads inputs */
    gg_status status = GG_SUCCESS; /* from here on, errors still join the side stream */
    GG_GOTO(to_f16_beside(ctx, p, c, &o, (const int[]){T_ACT, T_X, T_W1}, 3, ctx->priority_least, side, main), status,
            join);
    /* G runs alone first; then the side chain (dW2, and dW1 once R exists) overlaps the caller's (gelu', bias sums,
     * dX). Forking before G, so that dW2 and G start together, is slower: the two GEMMs share the SMs for their
     * whole length (docs/decisions.md). In a step graph (its join deferred) dW2 forks once R exists, with dW1: gelu'
     * then runs with the SMs to itself, and both weight gradients overlap dX and the next calls, which a block call
     * alone does not have (docs/decisions.md, "Step graphs: the weight gradients after R"). */
    const int dw2_after_r = o.r.defer_join, dgelu = dgelu_in_g(p, c, &o);
    if (dgelu) /* G writes R; its grad_bias1 sum waits on the side stream, before the weight gradients */
        GG_GOTO(gg_matmul_run_epilogue(ctx, &p->gemm[GEMM_G_DGELU], o.w2, o.dy, o.G, NULL,
                                       (void *)given_fp16(c, T_PRE), o.r.workspace[0], main),
                status, join);
    else
        GG_GOTO(gemm_g(ctx, p, c, &o, ctx->priority_greatest, main), status, join);
    if (!dw2_after_r) {
        GG_GOTO(gg_stream_handoff(ctx, main, o.r.ev_fork, side), status, join);
        GG_GOTO(gemm_dw2(ctx, p, c, &o, side), status, join);
    }
    if (!dgelu) GG_GOTO(activation_grad(ctx, p, c, &o, main), status, join);
    GG_GOTO(gg_stream_handoff(ctx, main, o.r.ev_fork, side), status, join); /* R is ready */
    if (dgelu) GG_GOTO(bias1_over_r(ctx, p, c, &o, side), status, join);
    if (dw2_after_r) GG_GOTO(gemm_dw2(ctx, p, c, &o, side), status, join);
    GG_GOTO(gemm_dw1(ctx, p, c, &o, side), status, join);
    if (is_copy(c, T_W1, o.w1)) GG_GOTO(gg_stream_wait(ctx, side, o.r.ev_conv, main), status, join); /* W1's copy */
    GG_GOTO(gemm_dx(ctx, p, c, &o, 0, c->tokens, ctx->priority_greatest, main), status, join);
join:
    /* The side stream carries only dW2 and dW1: a step graph joins it at its end (deferrable). */
    return gg_stream_join_res(ctx, &o.r, status, main, &(gg_branch){side, o.r.ev_join}, 1, 1u);
}

/* Calls that reduce the gradients during the backward: one stream, weight gradients first. dW2 (it needs only dY
 * and act) runs before G, so its reduction overlaps G, gelu' and the rest; dW1 runs as soon as R exists, so its
 * reduction overlaps dX, which nothing waits for (dX leaves comm_sms SMs to it). Measured on 2 H200s against the
 * two-stream schedule with the reductions issued as the gradients finish, and against two-stream variants with dW1
 * before dX: this order hides the most (docs/distributed.md). */
static gg_status enqueue_weights_first(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    const ffn_operands o = operands(ctx, p, c, s);
    GG_TRY(dy_first(ctx, p, c, &o, s));
    GG_TRY(to_f16(ctx, c, T_ACT, o.act, s));
    GG_TRY(gemm_dw2(ctx, p, c, &o, s));
    GG_TRY(gg_dist_grad_ready(ctx, c, s, T_DW2));
    GG_TRY(to_f16(ctx, c, T_W2, o.w2, s));
    GG_TRY(gemm_g(ctx, p, c, &o, GG_PRIORITY_OF_STREAM, s));
    GG_TRY(activation_grad(ctx, p, c, &o, s));
    GG_TRY(to_f16(ctx, c, T_X, o.x, s));
    GG_TRY(gemm_dw1(ctx, p, c, &o, s));
    GG_TRY(gg_dist_grad_ready(ctx, c, s, T_DW1));
    GG_TRY(to_f16(ctx, c, T_W1, o.w1, s));
    return gemm_dx(ctx, p, c, &o, 0, c->tokens, GG_PRIORITY_OF_STREAM, s);
}

/* One half of a weight gradient in the two-rank split reduction: the gradient (m x n, column-major) = A @ op(B)
 * with mm, B stored transposed (ldb = n, b_elem bytes an element); the data-parallel code computes and exchanges it. */
static gg_status pair_half(gg_ctx *ctx, const gg_block_call *c, const gg_matmul *mm, const void *A, const void *B,
                           size_t b_elem, int tensor, int64_t m, int64_t n, int own, cudaStream_t s) {
    const gg_dist_half_gemm gemm = {mm, A, B, b_elem, m, n};
    return gg_dist_pair_half(ctx, c, tensor, &gemm, own, s);
}

/* dX's half h (tokens [h M/2, (h+1) M/2)). */
static gg_status dx_half(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, const ffn_operands *o, int h,
                         cudaStream_t s) {
    return gemm_dx(ctx, p, c, o, c->tokens / 2 * h, c->tokens / 2, GG_PRIORITY_OF_STREAM, s);
}

/* The weights-first order with the two-rank split reduction: each weight gradient's peer half first, work that does
 * not need the exchange while the copy engines move it, then the own half with the peer's partial added, whose
 * all-gather hides behind what follows (G and gelu' after dW2's exchange, dX's first half after dW1's, its second
 * half after dW1's all-gather). The GEMMs on one stream, on purpose: the wait before dW2's own half also guarantees
 * that dW2's partial has left this rank's staging slot before dW1's partial overwrites it. (dW2's own half on the
 * side stream beside gelu' gained nothing and, without that wait on the caller's stream, raced:
 * docs/distributed.md.) Only the conversions of the inputs run on the side stream. */
static gg_status enqueue_pair(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t s) {
    const ffn_operands o = operands(ctx, p, c, s);
    const size_t in_elem = c->precision == GG_PRECISION_FP16 ? 2 : 4, g_elem = o.g_type == GG_DT_F16 ? 2 : 4;
    const int64_t D = c->dim0, F = c->dim1;
    gg_log(ctx, GG_LOG_DEBUG, "M=%lld: dW2 %s, dW1 %s the two-rank split reduction", (long long)c->tokens,
           gg_dist_pair_exchanges(ctx, c, T_DW2) ? "through" : "not through",
           gg_dist_pair_exchanges(ctx, c, T_DW1) ? "through" : "not through");
    GG_TRY(dy_first(ctx, p, c, &o, s));
    /* fp16: W2, X and W1 are converted on the side stream beside dY's and act's conversions and dW2's first half
     * (measured: 21 us less a step at 068, docs/distributed.md) */
    const int conv_side = c->precision == GG_PRECISION_FP16;
    cudaStream_t side = o.r.side;
    if (conv_side) GG_TRY(gg_stream_handoff(ctx, s, o.r.ev_fork, side)); /* the side stream reads inputs */
    gg_status status = GG_SUCCESS; /* from here on, errors still join the side stream */
    if (conv_side)
        GG_GOTO(to_f16_beside(ctx, p, c, &o, (const int[]){T_W2, T_X, T_W1}, 3, GG_PRIORITY_OF_STREAM, side, s), status,
                join);
    GG_GOTO(to_f16(ctx, c, T_ACT, o.act, s), status, join);
    GG_GOTO(pair_half(ctx, c, &p->gemm[GEMM_DW2], o.act, o.dy, in_elem, T_DW2, F, D, 0, s), status, join);
    if (conv_side) GG_GOTO(gg_stream_wait(ctx, side, o.r.ev_conv, s), status, join);
    else GG_GOTO(to_f16(ctx, c, T_W2, o.w2, s), status, join);
    GG_GOTO(gemm_g(ctx, p, c, &o, GG_PRIORITY_OF_STREAM, s), status, join);
    GG_GOTO(activation_grad(ctx, p, c, &o, s), status, join);
    GG_GOTO(pair_half(ctx, c, &p->gemm[GEMM_DW2], o.act, o.dy, in_elem, T_DW2, F, D, 1, s), status, join);
    if (!conv_side) GG_GOTO(to_f16(ctx, c, T_X, o.x, s), status, join);
    GG_GOTO(pair_half(ctx, c, &p->gemm[GEMM_DW1], o.x, o.G, g_elem, T_DW1, D, F, 0, s), status, join);
    if (!conv_side) GG_GOTO(to_f16(ctx, c, T_W1, o.w1, s), status, join);
    GG_GOTO(dx_half(ctx, p, c, &o, 0, s), status, join);
    GG_GOTO(pair_half(ctx, c, &p->gemm[GEMM_DW1], o.x, o.G, g_elem, T_DW1, D, F, 1, s), status, join);
    GG_GOTO(dx_half(ctx, p, c, &o, 1, s), status, join);
join:
    return conv_side ? gg_stream_join(ctx, status, s, side, o.r.ev_join) : status; /* forked only when conv_side */
}

/* Enqueues the backward; the plan exists. */
static gg_status enqueue(gg_ctx *ctx, const gg_block_plan *p, const gg_block_call *c, cudaStream_t main) {
    if (p->key.pair_split) return enqueue_pair(ctx, p, c, main);
    return gg_dist_overlaps(ctx, c) ? enqueue_weights_first(ctx, p, c, main) : enqueue_overlapped(ctx, p, c, main);
}

/* Both blocks' desc structs: tokens, hidden, ffn, precision, accumulate. */
#define FFN_DESC(type)                                                                                             \
    {.tokens = offsetof(type, tokens), .dim0 = offsetof(type, hidden), .dim1 = offsetof(type, ffn),               \
     .precision = offsetof(type, precision), .use_silu_gate = GG_NO_FIELD, .accumulate = offsetof(type, accumulate)}

const gg_block_info gg_gelu_ffn_info = {
    .kind = GG_BLOCK_GELU_FFN,
    .fn = "gg_gelu_ffn_backward",
    .dim0_name = "desc->hidden",
    .dim1_name = "desc->ffn",
    .fp32_io = 1,
    .n_tensors = N_TENSORS(gelu_ffn_tensors),
    .tensors = gelu_ffn_tensors,
    .desc = FFN_DESC(gg_gelu_ffn_desc),
    .build = build,
    .plan_bytes = sizeof(ffn_plan),
    .enqueue = enqueue,
    .split_tensors = 1u << T_DW1 | 1u << T_DW2,
};
const gg_block_info gg_mlp_info = {
    .kind = GG_BLOCK_MLP,
    .fn = "gg_mlp_backward",
    .dim0_name = "desc->hidden",
    .dim1_name = "desc->ffn",
    .fp32_io = 1,
    .n_tensors = N_TENSORS(mlp_tensors),
    .tensors = mlp_tensors,
    .desc = FFN_DESC(gg_mlp_desc),
    .build = build,
    .plan_bytes = sizeof(ffn_plan),
    .enqueue = enqueue,
    .split_tensors = 1u << T_DW1 | 1u << T_DW2,
};
