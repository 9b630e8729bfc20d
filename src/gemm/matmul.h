/*
 * matmul.h - one cuBLASLt GEMM, planned once and run many times.
 *
 * gradgraph's tensors are row-major; cuBLASLt is column-major. A row-major [r, c] matrix is a column-major
 * [c, r] one with leading dimension c, so each block writes its GEMMs in column-major terms (see the blocks).
 * Planning creates the descriptors and asks the heuristic once; running only calls cublasLtMatmul.
 */
#ifndef GG_MATMUL_H
#define GG_MATMUL_H

#include "internal.h"

/* Column-major problem D[m,n] = op(A)[m,k] @ op(B)[k,n] (+ beta * D). */
typedef struct gg_gemm_shape {
    int trans_a, trans_b;           /* nonzero: A (B) is stored transposed, i.e. as [k,m] ([n,k]) */
    int64_t m, n, k;
    int64_t lda, ldb, ldd;
    cudaDataType_t ab_type;         /* A and B element type */
    cudaDataType_t d_type;          /* D element type */
    cublasComputeType_t compute;    /* CUBLAS_COMPUTE_32F or CUBLAS_COMPUTE_32F_FAST_TF32 */
    int sm_count_target;            /* > 0: run on at most this many SMs (the rest left to communication) */
    /* A fused epilogue (a cublasLtEpilogue_t; 0: none): BIAS adds a vector of m elements of D's type to every
     * column; GELU_AUX(_BIAS) writes gelu_tanh(x) to D and x (after the bias) to an aux matrix of D's type and
     * layout (ld = ldd); DGELU writes (A @ B) * gelu_tanh'(x) to D, x read from such an aux matrix. Its pointers are
     * given per run (gg_matmul_run_epilogue). */
    int epilogue;
} gg_gemm_shape;

typedef struct gg_matmul {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    size_t workspace_bytes; /* what the chosen algorithm needs (<= the context's workspace) */
    double tuned_us;        /* autotune's time of the chosen algorithm in us (its timing, or the tune cache's); 0: not
                             * timed (no autotune, one candidate, or tuning skipped) */
    int max_cluster_ctas;   /* > 0: only algorithms whose thread-block clusters have at most this many CTAs */
    int unsplit;            /* only algorithms without split-k (a k not a multiple of 128: matmul.c) */
    int epilogue;           /* the shape's epilogue (0: none) */
    size_t d_span_bytes;    /* D's bytes from its first element to its last (and the aux matrix's, laid out as D) */
    /* A k run as two GEMMs (matmul.c, tail_apart): the descriptors above are the largest multiple of 128 rows of k
     * (split-k allowed); the other k % 128 rows are a second GEMM over these layouts, its A and B that many bytes
     * into the run's: after the first, with beta 1, or beside it on another stream into a sum of its own
     * (gg_matmul_run_split_in). tail_a NULL: one GEMM. */
    cublasLtMatrixLayout_t tail_a, tail_b;
    cublasLtMatmulAlgo_t tail_algo;
    size_t tail_workspace_bytes;
    size_t tail_a_offset, tail_b_offset;
    /* A 16-bit D run in two (sum_bytes > 0): both parts add up in fp32 at the start of the workspace (d above is that
     * m x n fp32 matrix, ld m; the algorithms get the workspace past it), then gg_k_round_sum rounds it into D once,
     * as one GEMM would: rounding the first part to 16 bits and adding the rest put elements near 0 off by up to 19x
     * the tolerance (block 4's dW). out_type, out_m, out_n, out_ldd: D's. */
    size_t sum_bytes;
    cudaDataType_t out_type;
    int64_t out_m, out_n, out_ldd;
} gg_matmul;

/* Bytes per element of the GEMM types gradgraph uses (fp32, fp16, bf16). */
static inline size_t gg_gemm_type_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

/* CTAs in one thread-block cluster of a cublasLtClusterShape_t value; 0 when not known (AUTO, or a value newer
 * than this code). */
int gg_cluster_shape_ctas(int cluster_shape_id);

/* Whether cuBLASLt's split-k is not trusted at this k (a k not a multiple of 128: matmul.c says why); such a GEMM
 * runs an algorithm without split-k, or runs its multiple of 128 apart (gg_matmul_tail_apart). */
int gg_matmul_split_k_untrusted(int64_t k);

/* Whether gg_matmul_plan runs this shape as two GEMMs, the largest multiple of 128 rows of k then the rest (a k
 * split-k is not trusted at, where split-k matters: matmul.c), on a device of sm_count SMs. */
int gg_matmul_tail_apart(const gg_gemm_shape *shape, int sm_count);

/* The GEMM types of a precision mode for the fp32-I/O blocks (operands fp32/fp16, output fp32). */
void gg_gemm_types_for(gg_precision precision, cudaDataType_t *ab_type, cublasComputeType_t *compute);

/* Creates descriptors and picks an algorithm; two of each where the GEMM runs its k in two (gg_matmul_tail_apart).
 * On failure *mm is left empty (safe to destroy). */
gg_status gg_matmul_plan(gg_ctx *ctx, const gg_gemm_shape *shape, gg_matmul *mm);

/* D = A @ B, or D += A @ B when accumulate (beta 1, D read in its own type, one rounding), on stream with the
 * context's workspace number `workspace` (one per stream). */
gg_status gg_matmul_run(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D, int accumulate,
                        int workspace, cudaStream_t stream);

/* gg_matmul_run with the workspace itself (the context's gemm_workspace_bytes large, used by no GEMM that may run at
 * the same time): a step graph hands each of its streams its own. */
gg_status gg_matmul_run_in(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D, int accumulate,
                           void *workspace, cudaStream_t stream);

/* D = alpha * A @ B + beta * C (C NULL: D itself; C has D's layout, the sum is rounded once), otherwise as
 * gg_matmul_run; _in: with the workspace itself, as gg_matmul_run_in. */
gg_status gg_matmul_run_scaled(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, const void *C, void *D,
                               float alpha, float beta, int workspace, cudaStream_t stream);
gg_status gg_matmul_run_scaled_in(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, const void *C,
                                  void *D, float alpha, float beta, void *workspace, cudaStream_t stream);

/* gg_matmul_run_in, except that a GEMM run in two parts into a 16-bit D (gg_matmul_tail_apart: its k % 128 rows
 * apart, the parts added in an fp32 sum) runs its tail on tail_stream instead of after the first part: into an fp32
 * sum of its own at the start of tail_workspace (a gemm_workspace_bytes one that no GEMM running at the same time
 * uses), recorded in tail_done, which stream waits for before gg_k_round_sum adds both sums and rounds once. The tail
 * (one short pass) then leaves the end of the call where tail_stream has room for it earlier; the result is the same
 * bits. tail_stream is forked already (or stream itself: as gg_matmul_run_in). Any other GEMM: as gg_matmul_run_in. */
gg_status gg_matmul_run_split_in(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D,
                                 int accumulate, void *workspace, cudaStream_t stream, cudaStream_t tail_stream,
                                 void *tail_workspace, cudaEvent_t tail_done);

/* D = epilogue(A @ B) for a GEMM planned with an epilogue (or none: a plain GEMM): bias (m elements; NULL for
 * GELU_AUX) and aux (the pre-activation, D's layout; NULL for BIAS) are set on the plan's descriptor, then the GEMM
 * is enqueued on stream with `workspace` (as gg_matmul_run_in). Host-only descriptor writes: valid inside a stream
 * capture, which keeps the pointers it was captured with. */
gg_status gg_matmul_run_epilogue(gg_ctx *ctx, const gg_matmul *mm, const void *A, const void *B, void *D,
                                 const void *bias, void *aux, void *workspace, cudaStream_t stream);

/* Sets the epilogue's bias and aux pointers on mm's descriptor (autotune's scratch ones, or a run's): each only when
 * the epilogue uses it and it is not NULL. */
gg_status gg_matmul_set_epilogue_pointers(gg_ctx *ctx, const gg_matmul *mm, const void *bias, const void *aux);

/* The workspace bytes mm's algorithms may use: the context's, less the fp32 sum a 16-bit D run in two keeps at its
 * start (gg_matmul.sum_bytes); mm NULL: the context's. Part of an autotune key: a choice is made within it. */
size_t gg_matmul_workspace_limit(const gg_ctx *ctx, const gg_matmul *mm);

/* Whether cuBLASLt accepts algo for mm's descriptors within gg_matmul_workspace_limit and its clusters fit
 * mm->max_cluster_ctas (and it has no split-k when mm->unsplit); if so, *workspace_bytes is what it needs. */
int gg_matmul_algo_fits(gg_ctx *ctx, const gg_matmul *mm, const cublasLtMatmulAlgo_t *algo, size_t *workspace_bytes);

/* Runs mm with algo from now on (another rank's choice, say) if it fits (gg_matmul_algo_fits); 1 if adopted. */
int gg_matmul_adopt(gg_ctx *ctx, gg_matmul *mm, const cublasLtMatmulAlgo_t *algo);

/* Destroys the descriptors; a zeroed gg_matmul is fine. */
void gg_matmul_destroy(gg_matmul *mm);

#endif
