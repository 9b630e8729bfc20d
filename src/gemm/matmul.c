/* matmul.c - cuBLASLt plans: descriptors, layouts and the algorithm (the heuristic's first, or the fastest of
 * its best few, timed once and remembered), made once per shape. */
#include <string.h>

#include <nvtx3/nvToolsExtMemCudaRt.h>

#include "kernels/gg_kernels.h"
#include "matmul.h"
#include "streams.h"
#include "tune.h"

#define TUNE_CANDIDATES 8 /* how many of the heuristic's algorithms autotune times */
#define HEURISTIC_MAX 16  /* how many the heuristic is asked for when some are filtered out */
#define SPLIT_K_MULTIPLE 128 /* split-k only where k is a multiple of this (gg_matmul_split_k_untrusted) */

/* A GEMM that leaves SMs to communication (sm_count_target) runs beside NCCL's kernels, whose CTAs sit on SMs
 * spread over the GPCs. A thread-block cluster must be placed whole on free SMs of one GPC, so every SM NCCL holds
 * can cost a kernel with large clusters a whole cluster's slot. Measured on 2 H200s (073, M = 16384, dX with 8 SMs
 * left, docs/decisions.md): the 8 cuBLASLt candidates of dX gave 1.92-1.98x and 85-90 % of the all-reduce hidden
 * with 2-CTA clusters, 1.78-1.85x and 54-65 % with 4- and 8-CTA clusters (which autotune, timing alone, preferred). */
#define SHARED_SM_MAX_CLUSTER_CTAS 2

int gg_cluster_shape_ctas(int id) {
    /* cublasLtClusterShape_t in the order cublasLt.h lists it: 0 AUTO, 1 unused, then 1x1x1 ... 1x15x1 */
    static const unsigned char ctas[] = {0,  0,  1,  2,  4,  2,  4,  8,  4,  8,  16, 8,  8,  16, 16, 16, 16, 3,
                                         5,  6,  7,  9,  10, 11, 12, 13, 14, 15, 6,  10, 12, 14, 3,  6,  9,  12,
                                         15, 12, 5,  10, 15, 6,  12, 7,  14, 9,  10, 11, 12, 13, 14, 15};
    return id >= 0 && id < (int)sizeof ctas ? ctas[id] : 0;
}

/* One attribute of algo's configuration (an unsigned integer of 1-4 bytes, read at its own size), or -1. */
static long algo_attribute(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    size_t size = 0;
    union {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
    } v = {0};
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, attr, NULL, 0, &size) != CUBLAS_STATUS_SUCCESS ||
        (size != 1 && size != 2 && size != 4) ||
        cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &v, size, &size) != CUBLAS_STATUS_SUCCESS)
        return -1;
    return size == 1 ? (long)v.u8 : size == 2 ? (long)v.u16 : (long)v.u32;
}

size_t gg_matmul_workspace_limit(const gg_ctx *ctx, const gg_matmul *mm) {
    const size_t all = ctx->workspace[0] ? ctx->config.gemm_workspace_bytes : 0, sum = mm ? mm->sum_bytes : 0;
    return all > sum ? all - sum : 0;
}

/* Whether algo's clusters have at most mm->max_cluster_ctas CTAs (always, without that limit). */
static int cluster_fits(const gg_matmul *mm, const cublasLtMatmulAlgo_t *algo) {
    if (mm->max_cluster_ctas <= 0) return 1;
    const int n = gg_cluster_shape_ctas((int)algo_attribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
    return n > 0 && n <= mm->max_cluster_ctas;
}

/* Logs (debug) the algorithm a plan runs: which kernel family, tile, stages, split-k and cluster cuBLASLt reports. */
static void log_choice(gg_ctx *ctx, const gg_gemm_shape *s, const cublasLtMatmulAlgo_t *algo) {
    if (!ctx->config.log_fn || ctx->config.log_level < GG_LOG_DEBUG) return; /* spare the attribute queries */
    const long cluster = algo_attribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
    gg_log(ctx, GG_LOG_DEBUG,
           "GEMM %lldx%lldx%lld (SM target %d): algo %ld, tile %ld, stages %ld, split-k %ld, cluster shape %ld "
           "(%d CTAs)",
           (long long)s->m, (long long)s->n, (long long)s->k, s->sm_count_target,
           algo_attribute(algo, CUBLASLT_ALGO_CONFIG_ID), algo_attribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
           algo_attribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), algo_attribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
           cluster, gg_cluster_shape_ctas((int)cluster));
}

/* Fills results with variants of the heuristic's algorithms (in its order) re-shaped to the fitting clusters,
 * largest first, that cuBLASLt accepts for mm's descriptors and the workspace; the count. The heuristic can offer
 * no fitting shape at all for a GEMM that leaves SMs free (block 4's GEMMs on 108 SMs: only 4- and 8-CTA clusters
 * among its 16), though the same kernels run with smaller clusters. */
static int reshape_to_fitting_clusters(gg_ctx *ctx, const gg_matmul *mm, const cublasLtMatmulHeuristicResult_t *from,
                                       int found, cublasLtMatmulHeuristicResult_t results[HEURISTIC_MAX]) {
    static const uint16_t shapes[] = {CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x1x1};
    const size_t workspace = gg_matmul_workspace_limit(ctx, mm);
    int kept = 0;
    for (int i = 0; i < found && kept < HEURISTIC_MAX; ++i)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0] && kept < HEURISTIC_MAX; ++j) {
            if (gg_cluster_shape_ctas(shapes[j]) > mm->max_cluster_ctas) continue;
            cublasLtMatmulHeuristicResult_t r = from[i];
            cublasLtMatmulHeuristicResult_t check;
            memset(&check, 0, sizeof check);
            if (cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shapes[j],
                                                     sizeof shapes[j]) != CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoCheck(ctx->lt, mm->op, mm->a, mm->b, mm->d, mm->d, &r.algo, &check) !=
                    CUBLAS_STATUS_SUCCESS ||
                check.workspaceSize > workspace)
                continue;
            r.workspaceSize = check.workspaceSize;
            results[kept++] = r;
        }
    return kept;
}

/* Keeps, in the heuristic's order, the results whose clusters fit; the new count. When none does, re-shapes them
 * (above) if `reshape`; when that fails too, keeps them all and lifts mm's limit, so that the fit check (cache,
 * another rank's algorithm) accepts what the plan runs. */
static int keep_fitting_clusters(gg_ctx *ctx, gg_matmul *mm, cublasLtMatmulHeuristicResult_t *results, int found,
                                 int reshape) {
    int kept = 0;
    for (int i = 0; i < found; ++i)
        if (cluster_fits(mm, &results[i].algo)) results[kept++] = results[i];
    if (kept > 0) return kept;
    cublasLtMatmulHeuristicResult_t reshaped[HEURISTIC_MAX];
    if (reshape) kept = reshape_to_fitting_clusters(ctx, mm, results, found, reshaped);
    if (kept > 0) {
        memcpy(results, reshaped, (size_t)kept * sizeof *results);
        return kept;
    }
    gg_log(ctx, GG_LOG_WARN, "no GEMM algorithm with clusters of at most %d CTAs: any cluster size allowed",
           mm->max_cluster_ctas);
    mm->max_cluster_ctas = 0;
    return found;
}

/* A GEMM whose k is not a multiple of 128 (gg_matmul_split_k_untrusted) runs without split-k: with CUDA 13.0's
 * cuBLASLt on an H200, split-k algorithms wrote wrong results at such k, deterministically, on both GPU paths
 * (test_shapes_gpu; docs/decisions.md). With the heuristic's first algorithm, at k = 4097, 4225, 4353, 8193, 11905,
 * 27137, 32769 and 65537 (each 1 more than a multiple of 128), with SM targets and without: 1 % to 40 % of the
 * output off by up to 46x the tolerance, the size of one row of k lost; with autotune's choices at k = 32392 and
 * 86404 (8 and 4 more than a multiple of 64): 24-57 % of dW off by up to 27x, the size of those 8 and 4 rows lost.
 * No k from a multiple of 128 was ever found wrong. Keeps the unsplit results in the heuristic's order; when the
 * heuristic offers none (at 1344 x 768 and 2880 x 1408 with k = 32769 and 65537 it offered only split-k (2) ones
 * among those with small clusters), the same algorithms re-configured to split-k 1 that cuBLASLt accepts. The new
 * count: 0 when neither exists, and the plan fails (never runs an algorithm known to be wrong there). Where split-k
 * matters, the GEMM runs its multiple of 128 apart (tail_apart, below). */
static const char *type_name(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return "fp32";
    case CUDA_R_16F: return "fp16";
    case CUDA_R_16BF: return "bf16";
    default: return "another type";
    }
}

static const char *compute_name(cublasComputeType_t c) {
    switch (c) {
    case CUBLAS_COMPUTE_32F: return "fp32";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "tf32";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "fp16";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "bf16";
    default: return "another type";
    }
}

static int split_k(const cublasLtMatmulAlgo_t *algo) {
    return (int)algo_attribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
}
int gg_matmul_split_k_untrusted(int64_t k) { return k % SPLIT_K_MULTIPLE != 0; }
static int keep_unsplit(gg_ctx *ctx, gg_matmul *mm, cublasLtMatmulHeuristicResult_t *results, int found) {
    int kept = 0;
    for (int i = 0; i < found; ++i)
        if (split_k(&results[i].algo) <= 1) results[kept++] = results[i];
    const int none_unsplit = kept == 0;
    for (int i = 0; none_unsplit && i < found; ++i) { /* re-configure them, in place (kept <= i) */
        cublasLtMatmulHeuristicResult_t r = results[i];
        const uint32_t one = 1, no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
        size_t workspace = 0;
        if (cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof one) !=
                CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
                                                 sizeof no_reduction) != CUBLAS_STATUS_SUCCESS ||
            !gg_matmul_algo_fits(ctx, mm, &r.algo, &workspace))
            continue;
        r.workspaceSize = workspace;
        results[kept++] = r;
    }
    mm->unsplit = 1; /* also for algorithms from the tune cache or another rank (gg_matmul_algo_fits) */
    return kept;
}

/* A GEMM that split-k serves, with a k split-k is not trusted at (gg_matmul_tail_apart), runs as two: the largest
 * multiple of 128 rows of k, which keeps split-k, then the other k % 128 rows (beta 1, without split-k) over the same
 * D, which costs one more pass over D. A 16-bit D is not rounded between the two: both add up in fp32 in the workspace
 * and gg_k_round_sum rounds the sum into D once (rounding the first part alone put block 4's dW elements near 0 off by
 * up to 19x the tolerance: the first part can be far larger than the result). Without split-k such a GEMM has too few
 * tiles for the SMs: block 4's dW (768 x 1536, under the narrow schedule's SM target) at 11913 tokens ran on 30 CTAs,
 * 197.8 us a call against 126.1 apart, at 17313 275.9 against 165.9, at 74433 761.5 against 648.2; from 8193 down the
 * split-k it lost cost less than the second pass (8193: 90.7 us against 95.9 apart; 1173: 18.8 against 23.6). Taken
 * where the output has fewer 128 x 128 tiles than the SMs it may use (the heuristic's split-k shapes), k is at least
 * TAIL_APART_MIN_K, there is no epilogue, and k is the stored column of both operands (A as is, B transposed: the dW
 * GEMMs), so that the tail starts aligned. Decided by the shape alone (and, for a 16-bit D, whether its sum fits the
 * GEMM workspace), so that every rank and every autotune choice plans the same GEMMs (docs/decisions.md). */
#define TAIL_APART_TILE 128
#define TAIL_APART_MIN_K 10240

/* Which of the epilogue's pointers it reads or writes (gg_gemm_shape.epilogue). */
static int epilogue_has_bias(int e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
static int epilogue_writes_aux(int e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static int epilogue_has_aux(int e) { return epilogue_writes_aux(e) || e == CUBLASLT_EPILOGUE_DGELU; /* DGELU: reads */ }

void gg_gemm_types_for(gg_precision precision, cudaDataType_t *ab_type, cublasComputeType_t *compute) {
    *ab_type = precision == GG_PRECISION_FP16 ? CUDA_R_16F : CUDA_R_32F;
    *compute = precision == GG_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

void gg_matmul_destroy(gg_matmul *mm) {
    if (mm->tail_a) (void)cublasLtMatrixLayoutDestroy(mm->tail_a);
    if (mm->tail_b) (void)cublasLtMatrixLayoutDestroy(mm->tail_b);
    if (mm->op) (void)cublasLtMatmulDescDestroy(mm->op);
    if (mm->a) (void)cublasLtMatrixLayoutDestroy(mm->a);
    if (mm->b) (void)cublasLtMatrixLayoutDestroy(mm->b);
    if (mm->d) (void)cublasLtMatrixLayoutDestroy(mm->d);
    memset(mm, 0, sizeof *mm);
}

/* One GEMM: descriptors and algorithm, the algorithm within the workspace past its first sum_bytes
 * (gg_matmul.sum_bytes). */
static gg_status plan_one(gg_ctx *ctx, const gg_gemm_shape *s, size_t sum_bytes, gg_matmul *mm) {
    memset(mm, 0, sizeof *mm);
    mm->sum_bytes = sum_bytes;
    gg_status status = GG_SUCCESS;
    cublasLtMatmulPreference_t pref = NULL;
    const cublasOperation_t op_a = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;

    GG_CUBLAS_GOTO(ctx, cublasLtMatmulDescCreate(&mm->op, s->compute, CUDA_R_32F), status, fail);
    GG_CUBLAS_GOTO(ctx, cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
                   status, fail);
    GG_CUBLAS_GOTO(ctx, cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
                   status, fail);
    if (s->epilogue) {
        const cublasLtEpilogue_t epilogue = (cublasLtEpilogue_t)s->epilogue;
        GG_CUBLAS_GOTO(
            ctx, cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            status, fail);
        if (epilogue_has_aux(s->epilogue)) {
            const int64_t aux_ld = s->ldd; /* the pre-activation is laid out as D */
            GG_CUBLAS_GOTO(ctx,
                           cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                          sizeof aux_ld),
                           status, fail);
        }
        mm->epilogue = s->epilogue;
        /* The heuristic reads the epilogue's pointers for their alignment only: give it the API's guarantee (the
         * runs set the real ones), as the A/B/C/D alignments below. */
        void *aligned = (void *)(uintptr_t)GG_ALIGNMENT;
        GG_GOTO(gg_matmul_set_epilogue_pointers(ctx, mm, aligned, aligned), status, fail);
    }
    if (s->sm_count_target > 0)
        GG_CUBLAS_GOTO(ctx,
                       cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &s->sm_count_target,
                                                      sizeof s->sm_count_target),
                       status, fail);
    /* Stored shapes: A is [m,k] or, transposed, [k,m]; B is [k,n] or [n,k]. */
    GG_CUBLAS_GOTO(ctx,
                   cublasLtMatrixLayoutCreate(&mm->a, s->ab_type, (uint64_t)(s->trans_a ? s->k : s->m),
                                              (uint64_t)(s->trans_a ? s->m : s->k), s->lda),
                   status, fail);
    GG_CUBLAS_GOTO(ctx,
                   cublasLtMatrixLayoutCreate(&mm->b, s->ab_type, (uint64_t)(s->trans_b ? s->n : s->k),
                                              (uint64_t)(s->trans_b ? s->k : s->n), s->ldb),
                   status, fail);
    GG_CUBLAS_GOTO(ctx, cublasLtMatrixLayoutCreate(&mm->d, s->d_type, (uint64_t)s->m, (uint64_t)s->n, s->ldd), status,
                   fail);
    mm->d_span_bytes = (size_t)((s->n - 1) * s->ldd + s->m) * gg_gemm_type_bytes(s->d_type);

    GG_CUBLAS_GOTO(ctx, cublasLtMatmulPreferenceCreate(&pref), status, fail);
    const uint64_t ws = (uint64_t)gg_matmul_workspace_limit(ctx, mm);
    GG_CUBLAS_GOTO(ctx,
                   cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                   status, fail);
    /* The API requires GG_ALIGNMENT for every pointer: tell the heuristic, so it may pick vectorized kernels. */
    const uint32_t align = GG_ALIGNMENT;
    const cublasLtMatmulPreferenceAttributes_t align_attrs[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < sizeof align_attrs / sizeof align_attrs[0]; ++i)
        GG_CUBLAS_GOTO(ctx, cublasLtMatmulPreferenceSetAttribute(pref, align_attrs[i], &align, sizeof align), status,
                       fail);

    mm->max_cluster_ctas = s->sm_count_target > 0 ? SHARED_SM_MAX_CLUSTER_CTAS : 0;
    if (ctx->gemm_max_cluster_ctas > 0 &&
        (mm->max_cluster_ctas == 0 || ctx->gemm_max_cluster_ctas < mm->max_cluster_ctas))
        mm->max_cluster_ctas = ctx->gemm_max_cluster_ctas;
    cublasLtMatmulHeuristicResult_t results[HEURISTIC_MAX];
    int found = 0;
    GG_CUBLAS_GOTO(ctx,
                   cublasLtMatmulAlgoGetHeuristic(ctx->lt, mm->op, mm->a, mm->b, mm->d, mm->d, pref,
                                                  mm->max_cluster_ctas ? HEURISTIC_MAX : TUNE_CANDIDATES, results,
                                                  &found),
                   status, fail);
    /* True fp32 GEMMs (the exact mode) are not re-shaped: they keep the algorithm, and so the rounding, of the same
     * GEMM planned without a limit (a data-parallel plan sums what the eager path computes, test_dist_mpi). */
    const int exact = s->ab_type == CUDA_R_32F && s->compute == CUBLAS_COMPUTE_32F;
    if (found > 0 && mm->max_cluster_ctas) found = keep_fitting_clusters(ctx, mm, results, found, !exact);
    const int offered = found;
    if (found > 0 && gg_matmul_split_k_untrusted(s->k)) found = keep_unsplit(ctx, mm, results, found);
    if (found > TUNE_CANDIDATES) found = TUNE_CANDIDATES;
    if (found < 1) {
        const char *fn = gg_ctx_entry(ctx);
        status = gg_fail(ctx, GG_ERROR_CUBLAS,
                         "%s%scuBLASLt offers %s for the %lld x %lld x %lld GEMM (%s operands, %s output, compute %s) "
                         "with a %llu-byte workspace%s",
                         fn ? fn : "", fn ? ": " : "",
                         offered ? "only split-k algorithms, which it cannot re-configure without," : "no algorithm",
                         (long long)s->m, (long long)s->n, (long long)s->k, type_name(s->ab_type),
                         type_name(s->d_type), compute_name(s->compute), (unsigned long long)ws,
                         offered ? "; split-k writes wrong results at a k that is not a multiple of 128 with this "
                                   "cuBLASLt (docs/decisions.md), so nothing runs"
                                 : "");
        goto fail;
    }
    cublasLtMatmulHeuristicResult_t result = results[0];
    /* True fp32 GEMMs (the exact mode, no tensor cores) are not tuned: few candidates, and each run is long. */
    const int tunable = ctx->tune && found > 1 && !exact;
    if (tunable) GG_GOTO(gg_matmul_tune(ctx, s, mm, results, found, &result, &mm->tuned_us), status, fail);
    mm->algo = result.algo;
    mm->workspace_bytes = result.workspaceSize;
    log_choice(ctx, s, &mm->algo);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    return GG_SUCCESS;

fail:
    if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
    gg_matmul_destroy(mm);
    return status;
}

/* The rows of k a GEMM run in two takes with split-k: its largest multiple of SPLIT_K_MULTIPLE. */
static size_t split_k_head(int64_t k) { return (size_t)(k - k % SPLIT_K_MULTIPLE); }

int gg_matmul_tail_apart(const gg_gemm_shape *s, int sm_count) {
    const int sms = s->sm_count_target > 0 && s->sm_count_target < sm_count ? s->sm_count_target : sm_count;
    const int64_t tiles =
        ((s->m + TAIL_APART_TILE - 1) / TAIL_APART_TILE) * ((s->n + TAIL_APART_TILE - 1) / TAIL_APART_TILE);
    const size_t ab = gg_gemm_type_bytes(s->ab_type), head = split_k_head(s->k);
    return gg_matmul_split_k_untrusted(s->k) && s->k >= TAIL_APART_MIN_K && !s->epilogue && !s->trans_a &&
           s->trans_b && tiles < sms && head * (size_t)s->lda * ab % GG_ALIGNMENT == 0 &&
           head * (size_t)s->ldb * ab % GG_ALIGNMENT == 0;
}

gg_status gg_matmul_plan(gg_ctx *ctx, const gg_gemm_shape *s, gg_matmul *mm) {
    if (!gg_matmul_tail_apart(s, ctx->sm_count)) return plan_one(ctx, s, 0, mm);
    const size_t head = split_k_head(s->k);
    gg_gemm_shape part = *s;
    size_t sum_bytes = 0;
    if (gg_gemm_type_bytes(s->d_type) == 2) { /* the parts add up in fp32 in the workspace, rounded into D once */
        /* gg_k_round_sum takes rows of four (every block's dimensions are multiples of 8) */
        if (s->m % 4 || s->ldd % 4) return plan_one(ctx, s, 0, mm);
        /* past the sum, the algorithms' workspace stays 256-byte aligned */
        sum_bytes = ((size_t)(s->m * s->n) * sizeof(float) + 255) & ~(size_t)255;
        if (sum_bytes > gg_matmul_workspace_limit(ctx, NULL)) {
            gg_log(ctx, GG_LOG_DEBUG, "%lldx%lldx%lld GEMM: its fp32 sum does not fit the GEMM workspace, so it "
                   "runs in one, without split-k", (long long)s->m, (long long)s->n, (long long)s->k);
            return plan_one(ctx, s, 0, mm);
        }
        part.d_type = CUDA_R_32F;
        part.ldd = s->m;
    }
    part.k = (int64_t)head;
    GG_TRY(plan_one(ctx, &part, sum_bytes, mm));
    part.k = s->k - (int64_t)head;
    gg_matmul tail;
    const gg_status status = plan_one(ctx, &part, sum_bytes, &tail);
    if (status != GG_SUCCESS) {
        gg_matmul_destroy(mm);
        return status;
    }
    /* the tail's layouts and algorithm; its descriptor is mm's own twin (the same shape but k), so mm's serves */
    mm->tail_a = tail.a;
    mm->tail_b = tail.b;
    tail.a = tail.b = NULL;
    mm->tail_algo = tail.algo;
    mm->tail_workspace_bytes = tail.workspace_bytes;
    const size_t ab = gg_gemm_type_bytes(s->ab_type);
    mm->tail_a_offset = head * (size_t)s->lda * ab;
    mm->tail_b_offset = head * (size_t)s->ldb * ab;
    mm->out_type = s->d_type;
    mm->out_m = s->m;
    mm->out_n = s->n;
    mm->out_ldd = s->ldd;
    mm->d_span_bytes = (size_t)((s->n - 1) * s->ldd + s->m) * gg_gemm_type_bytes(s->d_type); /* D's, not the sum's */
    gg_matmul_destroy(&tail);
    return GG_SUCCESS;
}

int gg_matmul_algo_fits(gg_ctx *ctx, const gg_matmul *mm, const cublasLtMatmulAlgo_t *algo, size_t *workspace_bytes) {
    cublasLtMatmulHeuristicResult_t check;
    memset(&check, 0, sizeof check);
    if (!cluster_fits(mm, algo) || (mm->unsplit && split_k(algo) > 1) ||
        cublasLtMatmulAlgoCheck(ctx->lt, mm->op, mm->a, mm->b, mm->d, mm->d, algo, &check) != CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > gg_matmul_workspace_limit(ctx, mm))
        return 0;
    *workspace_bytes = check.workspaceSize;
    return 1;
}

int gg_matmul_adopt(gg_ctx *ctx, gg_matmul *mm, const cublasLtMatmulAlgo_t *algo) {
    const cublasLtMatmulAlgo_t copy = *algo; /* algo may point into mm */
    size_t workspace = 0;
    if (!gg_matmul_algo_fits(ctx, mm, &copy, &workspace)) return 0;
    mm->algo = copy;
    mm->workspace_bytes = workspace;
    return 1;
}

/* Tells compute-sanitizer's initcheck (a no-op without a tool attached) that the GEMM about to be enqueued on stream
 * writes [ptr, ptr + bytes): cuBLASLt's kernels store their tiles by TMA, which initcheck does not track, so without
 * this every later read of a GEMM's output is reported as a read of uninitialized memory, among them the reads of
 * cuBLASLt's own second kernel (the split-k reduction with a fused epilogue reads D after the main kernel stored
 * it): hence marked in stream order before the GEMM, not after. */
static void mark_written(cudaStream_t stream, const void *ptr, size_t bytes) {
    const nvtxMemVirtualRangeDesc_t range = {bytes, ptr};
    nvtxMemMarkInitializedBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.regionDescCount = 1;
    batch.regionDescElementSize = sizeof range;
    batch.regionDescElements = &range;
    nvtxMemCudaMarkInitialized(NULL, stream, 0, &batch);
}

/* Where a GEMM's tail runs beside its first part (gg_matmul_run_split_in); stream NULL: after it, on its stream. */
typedef struct tail_place {
    cudaStream_t stream;
    void *workspace;
    cudaEvent_t done;
} tail_place;

/* The last k % 128 rows of a GEMM run in two (mm->tail_a): out = alpha tail(A) @ tail(B) + beta out, on stream, with
 * the tail algorithm's workspace at algo_workspace. */
static gg_status run_tail(gg_ctx *ctx, const gg_matmul *mm, const float *alpha, const void *A, const void *B,
                          const float *beta, void *out, void *algo_workspace, cudaStream_t stream) {
    const cublasStatus_t st = cublasLtMatmul(ctx->lt, mm->op, alpha, (const char *)A + mm->tail_a_offset, mm->tail_a,
                                             (const char *)B + mm->tail_b_offset, mm->tail_b, beta, out, mm->d, out,
                                             mm->d, &mm->tail_algo, algo_workspace, mm->tail_workspace_bytes, stream);
    return st == CUBLAS_STATUS_SUCCESS ? GG_SUCCESS : gg_fail_cublas(ctx, st, "cublasLtMatmul (the last k % 128 rows)");
}

/* The body of every run function. A tail beside the first part writes its own fp32 sum at the start of its
 * workspace (beta 0), which gg_k_round_sum adds to the first part's: the same fp32 add as the tail's beta-1 epilogue
 * over the first part's sum on one stream, so the same bits either way. */
static gg_status run_parts(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, const void *C, void *D,
                           float alpha, float beta, void *workspace, cudaStream_t stream, const tail_place *beside) {
    /* A route that runs a GEMM its plan did not make would hand cuBLASLt empty descriptors: say so instead. */
    if (!mm->op) return gg_fail(ctx, GG_ERROR_INTERNAL, "a GEMM runs that its plan did not make");
    /* Host scalars: read when the call is enqueued (or captured), so a graph keeps the scalars it was captured with. */
    gg_status status = GG_SUCCESS;
    /* A 16-bit D run in two adds up in fp32 at the workspace's start (gg_matmul.sum_bytes), then is rounded once. */
    void *sum = mm->sum_bytes ? workspace : D;
    void *algo_workspace = (char *)workspace + mm->sum_bytes;
    const int apart = beside && beside->stream && mm->tail_a && mm->sum_bytes; /* the tail beside the first part */
    float *part = apart ? (float *)beside->workspace : NULL;
    mark_written(stream, D, mm->d_span_bytes);
    if (mm->sum_bytes) mark_written(stream, sum, mm->sum_bytes);
    const float zero = 0.0f, one = 1.0f;
    if (apart) { /* first: the tail's stream may have room before the first part's ends */
        mark_written(beside->stream, part, mm->sum_bytes);
        GG_GOTO(run_tail(ctx, mm, &alpha, A, B, &zero, part, (char *)beside->workspace + mm->sum_bytes, beside->stream),
                status, done);
        GG_GOTO(gg_stream_mark(ctx, beside->stream, beside->done, stream), status, done);
    }
    GG_CUBLAS_GOTO(ctx,
                   cublasLtMatmul(ctx->lt, mm->op, &alpha, A, mm->a, B, mm->b, mm->sum_bytes ? &zero : &beta,
                                  mm->sum_bytes ? sum : C ? C : D, mm->d, sum, mm->d, &mm->algo, algo_workspace,
                                  mm->workspace_bytes, stream),
                   status, done);
    if (mm->tail_a && !apart) /* the last k % 128 rows, added to what the others wrote */
        GG_GOTO(run_tail(ctx, mm, &alpha, A, B, &one, sum, algo_workspace, stream), status, done);
    if (apart) GG_GOTO(gg_stream_wait(ctx, beside->stream, beside->done, stream), status, done);
    if (mm->sum_bytes)
        GG_CUDA_GOTO(ctx,
                     gg_k_round_sum((const float *)sum, part, C ? C : D, beta, D,
                                    mm->out_type == CUDA_R_16BF ? GG_DT_BF16 : GG_DT_F16, mm->out_m, mm->out_n,
                                    mm->out_ldd, ctx->sm_count, stream),
                     status, done);
done:
    return status;
}

gg_status gg_matmul_run_scaled_in(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, const void *C,
                                  void *D, float alpha, float beta, void *workspace, cudaStream_t stream) {
    return run_parts(ctx, mm, A, B, C, D, alpha, beta, workspace, stream, NULL);
}

gg_status gg_matmul_run_split_in(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D,
                                 int accumulate, void *workspace, cudaStream_t stream, cudaStream_t tail_stream,
                                 void *tail_workspace, cudaEvent_t tail_done) {
    const tail_place beside = {tail_stream != stream ? tail_stream : NULL, tail_workspace, tail_done};
    return run_parts(ctx, mm, A, B, NULL, D, 1.0f, accumulate ? 1.0f : 0.0f, workspace, stream, &beside);
}

gg_status gg_matmul_set_epilogue_pointers(gg_ctx *ctx, const gg_matmul *mm, const void *bias, const void *aux) {
    gg_status status = GG_SUCCESS;
    if (bias && epilogue_has_bias(mm->epilogue))
        GG_CUBLAS_GOTO(
            ctx, cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), status,
            done);
    if (aux && epilogue_has_aux(mm->epilogue))
        GG_CUBLAS_GOTO(
            ctx, cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux),
            status, done);
done:
    return status;
}

gg_status gg_matmul_run_epilogue(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D,
                                 const void *bias, void *aux, void *workspace, cudaStream_t stream) {
    GG_TRY(gg_matmul_set_epilogue_pointers(ctx, mm, bias, aux));
    if (aux && epilogue_writes_aux(mm->epilogue)) mark_written(stream, aux, mm->d_span_bytes); /* as D: before */
    return gg_matmul_run_scaled_in(ctx, mm, A, B, NULL, D, 1.0f, 0.0f, workspace, stream);
}

gg_status gg_matmul_run_scaled(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, const void *C, void *D,
                               float alpha, float beta, int workspace, cudaStream_t stream) {
    return gg_matmul_run_scaled_in(ctx, mm, A, B, C, D, alpha, beta, ctx->workspace[workspace], stream);
}

gg_status gg_matmul_run_in(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D, int accumulate,
                           void *workspace, cudaStream_t stream) {
    return gg_matmul_run_scaled_in(ctx, mm, A, B, NULL, D, 1.0f, accumulate ? 1.0f : 0.0f, workspace, stream);
}

gg_status gg_matmul_run(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D, int accumulate,
                        int workspace, cudaStream_t stream) {
    return gg_matmul_run_scaled(ctx, mm, A, B, NULL, D, 1.0f, accumulate ? 1.0f : 0.0f, workspace, stream);
}
