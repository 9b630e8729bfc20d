/*
 * gpu_ref.cu - float64 references of the four blocks, computed on the GPU; the same definitions as the CPU
 * reference (tests/ref/gg_ref.h), equal to it up to fp64 rounding (summation order of the GEMMs and sums, and
 * the last ulp of exp/tanh), which can flip a bf16 rounding only on an exact double tie.
 *
 * Inputs are converted to double in `work`, the GEMMs are cublasDgemm (default math: no TF32, no fixed-point
 * emulation), column sums are cublasDgemv against a vector of ones, elementwise steps are kernels in double.
 * The caller's cuBLAS handle is bound to `stream`, host pointer mode and CUBLAS_DEFAULT_MATH for the call, and
 * its previous stream, pointer mode and math mode are restored before returning.
 *
 * Layout of `work` (each region starts at a multiple of 32 doubles = 256 bytes; pad(n) = n rounded up to 32):
 *   tanh_gate: [ partial sums: GG_H_TANH_PARTIALS ]                                          (cuBLAS unused)
 *   gelu_ffn:  [ A: pad(M*D) | W: pad(F*D) | B: pad(M*F) ]
 *                A = grad_output, later hidden_states;  W = weight2, later weight1;
 *                B = gelu_out, then G = grad_output @ W2, then R (in place)
 *   mlp:       [ A: pad(M*D) | W: pad(F*D) | B: pad(M*F) | ones: pad(M) ]
 *                as gelu_ffn with B = intermediate_activated, then G, then R
 *   ssm_gate:  [ A: pad(M*H) | B: pad(M*E) | W: pad(H*E) | ones: pad(M) ]
 *                A = grad_output;  B = gated_output, then G = grad_output @ W (unrounded);  W = weight
 * Reusing a region is safe because everything runs in order on the one stream.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu_common.cuh"

/* Block 1's sum: a fixed grid of GG_H_TANH_PARTIALS blocks (whatever the GPU), each writing one partial, then
 * one block of GG_H_TANH_PARTIALS threads adds them in a fixed tree: the same bits on every run and GPU. */
#define GG_H_TANH_PARTIALS 1024

static inline size_t gg_h_pad(size_t n) { return (n + 31u) & ~(size_t)31u; }

/* ---- cuBLAS plumbing ---- */

namespace {

/* Binds a caller's handle to the stream, host pointer mode and default math for one call; the destructor puts
 * back what it found (errors while restoring are ignored: the computation's status is what is returned). */
class CublasBinding {
  public:
    explicit CublasBinding(cublasHandle_t h) : h_(h) {}
    CublasBinding(const CublasBinding &) = delete;
    CublasBinding &operator=(const CublasBinding &) = delete;
    ~CublasBinding() {
        if (!saved_) return;
        (void)cublasSetStream(h_, old_stream_);
        (void)cublasSetPointerMode(h_, old_pointer_mode_);
        (void)cublasSetMathMode(h_, old_math_);
    }
    int bind(cudaStream_t s) {
        if (cublasGetStream(h_, &old_stream_) != CUBLAS_STATUS_SUCCESS ||
            cublasGetPointerMode(h_, &old_pointer_mode_) != CUBLAS_STATUS_SUCCESS ||
            cublasGetMathMode(h_, &old_math_) != CUBLAS_STATUS_SUCCESS)
            return (int)cudaErrorUnknown;
        saved_ = true;
        if (cublasSetStream(h_, s) != CUBLAS_STATUS_SUCCESS ||
            cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS ||
            cublasSetMathMode(h_, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
            return (int)cudaErrorUnknown;
        return 0;
    }

  private:
    cublasHandle_t h_;
    bool saved_ = false;
    cudaStream_t old_stream_ = NULL;
    cublasPointerMode_t old_pointer_mode_ = CUBLAS_POINTER_MODE_HOST;
    cublasMath_t old_math_ = CUBLAS_DEFAULT_MATH;
};

} // namespace

/* Row-major C[m,n] = op(A) @ op(B), all row-major: A is stored [m,k] (ta = 0) or [k,m] (ta = 1) with row length
 * lda, B is stored [k,n] (tb = 0) or [n,k] (tb = 1) with row length ldb, C is [m,n] with row length ldc.
 * cuBLAS is column-major, and a row-major matrix X stored [r,c] with row length c is, read column-major, Xᵀ [c,r]
 * with leading dimension c. So cuBLAS computes Cᵀ[n,m] = op(B)ᵀ[n,k] @ op(A)ᵀ[k,m]:
 *   first operand = B read column-major (Bᵀ, or B when tb), op = tb ? T : N, ld = ldb;
 *   second operand = A read column-major (Aᵀ, or A when ta), op = ta ? T : N, ld = lda;
 *   cublas m = n, cublas n = m, k = k, C read column-major = Cᵀ [n,m] with ld = ldc. */
static cudaError_t gg_h_gemm_rm(cublasHandle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k, const double *A,
                        int64_t lda, const double *B, int64_t ldb, double *C, int64_t ldc) {
    const double one = 1.0, zero = 0.0;
    cublasStatus_t st = cublasDgemm_64(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                       &one, B, ldb, A, lda, &zero, C, ldc);
    return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

/* y[cols] = Σ_rows A, A row-major [rows, cols]. Read column-major, A is Aᵀ [cols, rows] with ld = cols, so
 * y = Aᵀ @ ones[rows]: cublasDgemv(N, m = cols, n = rows, A, lda = cols, ones, 1, y, 1). */
static cudaError_t gg_h_colsum_rm(cublasHandle_t h, int64_t rows, int64_t cols, const double *A, const double *ones,
                          double *y) {
    const double one = 1.0, zero = 0.0;
    cublasStatus_t st = cublasDgemv_64(h, CUBLAS_OP_N, cols, rows, &one, A, cols, ones, 1, &zero, y, 1);
    return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

/* ---- elementwise kernels (64-bit grid-stride loops) ---- */

__global__ void gg_h_ref_fill(double *out, size_t n, double v) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) out[i] = v;
}

__global__ void gg_h_ref_round_bf16_inplace(double *x, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) x[i] = gg_h_round_bf16(x[i]);
}

/* Block 2: R = G ⊙ (0.5 (1 + T) + 0.5 x (1 − T²) c (1 + 0.134145 x²)), in place on G. */
__global__ void gg_h_ref_gelu_ffn_r(double *GR, const float *linear1_out, const float *tanh_inner, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) {
        double x = (double)linear1_out[i], t = (double)tanh_inner[i];
        double dgelu = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GG_H_GELU_C * (1.0 + 0.134145 * x * x);
        GR[i] = GR[i] * dgelu;
    }
}

/* Block 3: t = tanh(c (x + 0.044715 x³)), R = G ⊙ (0.5 (1 + t) + 0.5 x (1 − t²) c (1 + 3·0.044715 x²)). */
__global__ void gg_h_ref_mlp_r(double *GR, const float *intermediate, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) {
        double x = (double)intermediate[i];
        double t = tanh(GG_H_GELU_C * (x + 0.044715 * x * x * x));
        double dgelu = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GG_H_GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
        GR[i] = GR[i] * dgelu;
    }
}

/* Block 4's bf16 chain from the unrounded G = grad_output @ W. Products of two bf16 values are exact in double. */
__global__ void gg_h_ref_ssm_gate_chain(const double *G, const uint16_t *ssm_output, const uint16_t *gate,
                                        const uint16_t *gate_activated, int use_silu_gate, double *grad_ssm_output,
                                        double *grad_gate, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) {
        double g = gg_h_round_bf16(G[i]);
        grad_ssm_output[i] = gg_h_round_bf16(g * gg_h_bf16_to_f64(gate_activated[i]));
        double a = gg_h_round_bf16(g * gg_h_bf16_to_f64(ssm_output[i]));
        if (use_silu_gate) {
            double x = gg_h_bf16_to_f64(gate[i]);
            double s = gg_h_round_bf16(1.0 / (1.0 + exp(-x)));
            double d = gg_h_round_bf16(s * gg_h_round_bf16(1.0 + gg_h_round_bf16(x * gg_h_round_bf16(1.0 - s))));
            grad_gate[i] = gg_h_round_bf16(a * d);
        } else {
            grad_gate[i] = a;
        }
    }
}

/* Block 1, pass 1 (grid = GG_H_TANH_PARTIALS blocks of GG_H_THREADS): t = tanh(double(float(gate))),
 * grad_residual = go, grad_hidden = bf16(bf16(go t) mask[row]); partials[block] = this block's part of
 * Σ go · bf16(hs · mask[row]), each thread summing its grid-stride elements in order, then a fixed tree. */
__global__ void __launch_bounds__(GG_H_THREADS)
    gg_h_ref_tanh_gate_main(int64_t H, size_t n, const uint16_t *grad_output, const uint16_t *gate,
                            const uint16_t *hidden_states, const uint16_t *mask, double *grad_residual,
                            double *grad_hidden_states, double *partials) {
    __shared__ double sh[GG_H_THREADS];
    const double t = tanh(gg_h_bf16_to_f64(*gate));
    double acc = 0.0;
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) {
        double m = gg_h_bf16_to_f64(mask[i / (size_t)H]);
        double go = gg_h_bf16_to_f64(grad_output[i]);
        grad_residual[i] = go;
        grad_hidden_states[i] = gg_h_round_bf16(gg_h_round_bf16(go * t) * m);
        acc += go * gg_h_round_bf16(gg_h_bf16_to_f64(hidden_states[i]) * m);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned w = GG_H_THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = sh[0];
}

/* Block 1, pass 2 (one block of GG_H_TANH_PARTIALS threads): S = Σ partials (fixed tree), then thread 0 writes
 * grad_gate = bf16((1 − t²) S). */
__global__ void __launch_bounds__(GG_H_TANH_PARTIALS)
    gg_h_ref_tanh_gate_finish(const double *partials, const uint16_t *gate, double *grad_gate) {
    __shared__ double sh[GG_H_TANH_PARTIALS];
    sh[threadIdx.x] = partials[threadIdx.x];
    __syncthreads();
    for (unsigned w = GG_H_TANH_PARTIALS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double t = tanh(gg_h_bf16_to_f64(*gate));
        *grad_gate = gg_h_round_bf16((1.0 - t * t) * sh[0]);
    }
}

/* ---- work sizes ---- */

extern "C" size_t gg_h_ref_tanh_gate_work_doubles(int64_t M, int64_t H) {
    (void)M;
    (void)H;
    return GG_H_TANH_PARTIALS;
}

extern "C" size_t gg_h_ref_gelu_ffn_work_doubles(int64_t M, int64_t D, int64_t F) {
    if (M < 1 || D < 1 || F < 1) return 0;
    return gg_h_pad((size_t)M * (size_t)D) + gg_h_pad((size_t)F * (size_t)D) + gg_h_pad((size_t)M * (size_t)F);
}

extern "C" size_t gg_h_ref_mlp_work_doubles(int64_t M, int64_t D, int64_t F) {
    if (M < 1 || D < 1 || F < 1) return 0;
    return gg_h_ref_gelu_ffn_work_doubles(M, D, F) + gg_h_pad((size_t)M);
}

extern "C" size_t gg_h_ref_ssm_gate_work_doubles(int64_t M, int64_t H, int64_t E) {
    if (M < 1 || H < 1 || E < 1) return 0;
    return gg_h_pad((size_t)M * (size_t)H) + gg_h_pad((size_t)M * (size_t)E) + gg_h_pad((size_t)H * (size_t)E) +
           gg_h_pad((size_t)M);
}

/* ---- block 1 ---- */

extern "C" int gg_h_ref_tanh_gate(void *cublas, int64_t M, int64_t H, const uint16_t *grad_output,
                                  const uint16_t *gate, const uint16_t *hidden_states, const uint16_t *mask,
                                  double *grad_residual, double *grad_hidden_states, double *grad_gate, double *work,
                                  gg_stream stream) {
    (void)cublas; /* no GEMM: may be NULL */
    GG_H_REQUIRE(M >= 1 && H >= 1);
    GG_H_REQUIRE(grad_output && gate && hidden_states && mask && grad_residual && grad_hidden_states && grad_gate &&
                 work);
    cudaStream_t s = gg_h_stream(stream);
    size_t n = (size_t)M * (size_t)H;
    gg_h_ref_tanh_gate_main<<<GG_H_TANH_PARTIALS, GG_H_THREADS, 0, s>>>(
        H, n, grad_output, gate, hidden_states, mask, grad_residual, grad_hidden_states, work);
    GG_H_CHECK_LAUNCH();
    gg_h_ref_tanh_gate_finish<<<1, GG_H_TANH_PARTIALS, 0, s>>>(work, gate, grad_gate);
    GG_H_CHECK_LAUNCH();
    return 0;
}

/* ---- blocks 2 and 3 (shared body) ---- */

/* G = go @ W2, grad_weight2 = goᵀ @ act, R = G ⊙ gelu', grad_hidden = R @ W1, grad_weight1 = Rᵀ @ hs, and for
 * block 3 (with_bias) grad_bias2 = Σ_rows go, grad_bias1 = Σ_rows R. act = gelu_out (block 2) or
 * intermediate_activated (block 3); gelu' from (x, tanh_inner) for block 2 (tanh_inner != NULL) or from x alone
 * for block 3. */
static int gg_h_ref_ffn_common(cublasHandle_t h, int64_t M, int64_t D, int64_t F, const float *grad_output,
                               const float *hidden_states, const float *weight1, const float *weight2,
                               const float *x, const float *tanh_inner, const float *act, double *grad_hidden_states,
                               double *grad_weight1, double *grad_weight2, double *grad_bias1, double *grad_bias2,
                               double *work, int with_bias, cudaStream_t s) {
    const size_t nmd = (size_t)M * (size_t)D, nfd = (size_t)F * (size_t)D, nmf = (size_t)M * (size_t)F;
    double *A = work;                 /* [M,D]: grad_output, later hidden_states */
    double *W = A + gg_h_pad(nmd);    /* weight2 [D,F], later weight1 [F,D] */
    double *B = W + gg_h_pad(nfd);    /* [M,F]: act, then G, then R */
    double *ones = B + gg_h_pad(nmf); /* [M], block 3 only */

    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nmd, s, grad_output, A, nmd));
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nfd, s, weight2, W, nfd));
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nmf, s, act, B, nmf));

    /* grad_weight2[D,F] = goᵀ[D,M] @ act[M,F]: A = go stored [M,D] (ta), B = act stored [M,F].
     * -> cublasDgemm(N, T, m=F, n=D, k=M, act (ld F), go (ld D), grad_weight2 (ld F)). */
    GG_H_CHECK(gg_h_gemm_rm(h, 1, 0, D, F, M, A, D, B, F, grad_weight2, F));
    if (with_bias) {
        GG_H_CHECK(gg_h_launch(gg_h_ref_fill, (size_t)M, s, ones, (size_t)M, 1.0));
        /* grad_bias2[D] = Σ_rows go[M,D] -> cublasDgemv(N, m=D, n=M, go (ld D), ones). */
        GG_H_CHECK(gg_h_colsum_rm(h, M, D, A, ones, grad_bias2));
    }
    /* G[M,F] = go[M,D] @ W2[D,F] -> cublasDgemm(N, N, m=F, n=M, k=D, W2 (ld F), go (ld D), G (ld F)). B held act,
     * which the GEMM above has finished reading (same stream). */
    GG_H_CHECK(gg_h_gemm_rm(h, 0, 0, M, F, D, A, D, W, F, B, F));
    if (tanh_inner != NULL)
        GG_H_CHECK(gg_h_launch(gg_h_ref_gelu_ffn_r, nmf, s, B, x, tanh_inner, nmf));
    else
        GG_H_CHECK(gg_h_launch(gg_h_ref_mlp_r, nmf, s, B, x, nmf));
    /* grad_bias1[F] = Σ_rows R[M,F] -> cublasDgemv(N, m=F, n=M, R (ld F), ones). */
    if (with_bias) GG_H_CHECK(gg_h_colsum_rm(h, M, F, B, ones, grad_bias1));

    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nmd, s, hidden_states, A, nmd));
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nfd, s, weight1, W, nfd));
    /* grad_hidden[M,D] = R[M,F] @ W1[F,D] -> cublasDgemm(N, N, m=D, n=M, k=F, W1 (ld D), R (ld F), gh (ld D)). */
    GG_H_CHECK(gg_h_gemm_rm(h, 0, 0, M, D, F, B, F, W, D, grad_hidden_states, D));
    /* grad_weight1[F,D] = Rᵀ[F,M] @ hs[M,D]: R stored [M,F] (ta), hs stored [M,D].
     * -> cublasDgemm(N, T, m=D, n=F, k=M, hs (ld D), R (ld F), grad_weight1 (ld D)). */
    GG_H_CHECK(gg_h_gemm_rm(h, 1, 0, F, D, M, B, F, A, D, grad_weight1, D));
    return 0;
}

extern "C" int gg_h_ref_gelu_ffn(void *cublas, int64_t M, int64_t D, int64_t F, const float *grad_output,
                                 const float *hidden_states, const float *weight1, const float *weight2,
                                 const float *linear1_out, const float *tanh_inner, const float *gelu_out,
                                 double *grad_hidden_states, double *grad_weight1, double *grad_weight2, double *work,
                                 gg_stream stream) {
    GG_H_REQUIRE(cublas != NULL && M >= 1 && D >= 1 && F >= 1);
    GG_H_REQUIRE(grad_output && hidden_states && weight1 && weight2 && linear1_out && tanh_inner && gelu_out &&
                 grad_hidden_states && grad_weight1 && grad_weight2 && work);
    CublasBinding bound((cublasHandle_t)cublas);
    int err = bound.bind(gg_h_stream(stream));
    if (err != 0) return err;
    return gg_h_ref_ffn_common((cublasHandle_t)cublas, M, D, F, grad_output, hidden_states, weight1, weight2,
                               linear1_out, tanh_inner, gelu_out, grad_hidden_states, grad_weight1, grad_weight2,
                               NULL, NULL, work, 0, gg_h_stream(stream));
}

extern "C" int gg_h_ref_mlp(void *cublas, int64_t M, int64_t D, int64_t F, const float *grad_output,
                            const float *hidden_states, const float *weight1, const float *weight2,
                            const float *intermediate, const float *intermediate_activated,
                            double *grad_hidden_states, double *grad_weight1, double *grad_bias1,
                            double *grad_weight2, double *grad_bias2, double *work, gg_stream stream) {
    GG_H_REQUIRE(cublas != NULL && M >= 1 && D >= 1 && F >= 1);
    GG_H_REQUIRE(grad_output && hidden_states && weight1 && weight2 && intermediate && intermediate_activated &&
                 grad_hidden_states && grad_weight1 && grad_bias1 && grad_weight2 && grad_bias2 && work);
    CublasBinding bound((cublasHandle_t)cublas);
    int err = bound.bind(gg_h_stream(stream));
    if (err != 0) return err;
    return gg_h_ref_ffn_common((cublasHandle_t)cublas, M, D, F, grad_output, hidden_states, weight1, weight2,
                               intermediate, NULL, intermediate_activated, grad_hidden_states, grad_weight1,
                               grad_weight2, grad_bias1, grad_bias2, work, 1, gg_h_stream(stream));
}

/* ---- block 4 ---- */

extern "C" int gg_h_ref_ssm_gate(void *cublas, int64_t M, int64_t H, int64_t E, int use_silu_gate,
                                 const uint16_t *grad_output, const uint16_t *ssm_output, const uint16_t *gate,
                                 const uint16_t *weight, const uint16_t *gate_activated,
                                 const uint16_t *gated_output, double *grad_ssm_output, double *grad_gate,
                                 double *grad_weight, double *grad_bias, double *work, gg_stream stream) {
    GG_H_REQUIRE(cublas != NULL && M >= 1 && H >= 1 && E >= 1);
    GG_H_REQUIRE(grad_output && ssm_output && (gate || !use_silu_gate) && weight && gate_activated &&
                 gated_output && grad_ssm_output && grad_gate && grad_weight && grad_bias && work);
    cublasHandle_t h = (cublasHandle_t)cublas;
    cudaStream_t s = gg_h_stream(stream);
    CublasBinding bound(h);
    int err = bound.bind(s);
    if (err != 0) return err;

    const size_t nmh = (size_t)M * (size_t)H, nme = (size_t)M * (size_t)E, nhe = (size_t)H * (size_t)E;
    double *A = work;                 /* grad_output [M,H] */
    double *B = A + gg_h_pad(nmh);    /* gated_output [M,E], then G [M,E] */
    double *W = B + gg_h_pad(nme);    /* weight [H,E] */
    double *ones = W + gg_h_pad(nhe); /* [M] */

    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<uint16_t>, nmh, s, grad_output, A, nmh));
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<uint16_t>, nme, s, gated_output, B, nme));
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<uint16_t>, nhe, s, weight, W, nhe));
    GG_H_CHECK(gg_h_launch(gg_h_ref_fill, (size_t)M, s, ones, (size_t)M, 1.0));

    /* grad_weight[H,E] = goᵀ[H,M] @ gated[M,E]: go stored [M,H] (ta), gated stored [M,E].
     * -> cublasDgemm(N, T, m=E, n=H, k=M, gated (ld E), go (ld H), grad_weight (ld E)); then bf16. */
    GG_H_CHECK(gg_h_gemm_rm(h, 1, 0, H, E, M, A, H, B, E, grad_weight, E));
    GG_H_CHECK(gg_h_launch(gg_h_ref_round_bf16_inplace, nhe, s, grad_weight, nhe));
    /* grad_bias[H] = Σ_rows go[M,H] -> cublasDgemv(N, m=H, n=M, go (ld H), ones); then bf16. */
    GG_H_CHECK(gg_h_colsum_rm(h, M, H, A, ones, grad_bias));
    GG_H_CHECK(gg_h_launch(gg_h_ref_round_bf16_inplace, (size_t)H, s, grad_bias, (size_t)H));
    /* G[M,E] = go[M,H] @ W[H,E] -> cublasDgemm(N, N, m=E, n=M, k=H, W (ld E), go (ld H), G (ld E)), into B
     * (whose gated_output the GEMM above has finished reading: same stream). */
    GG_H_CHECK(gg_h_gemm_rm(h, 0, 0, M, E, H, A, H, W, E, B, E));
    GG_H_CHECK(gg_h_launch(gg_h_ref_ssm_gate_chain, nme, s, (const double *)B, ssm_output, gate, gate_activated,
                           use_silu_gate, grad_ssm_output, grad_gate, nme));
    return 0;
}
