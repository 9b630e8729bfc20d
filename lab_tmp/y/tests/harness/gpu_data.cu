/*
 * gpu_data.cu - test data made on the GPU: normal random numbers from a counter-based generator, NaN poisoning,
 * and block 2's consistent forward (gg_h_gelu_ffn_forward). See gpu_harness.h for the contracts.
 *
 * Generator. Element i of seed s is a pure function of (s, i), independent of the launch configuration:
 *   key = splitmix64_mix(s + GOLDEN)                    (on the host, once per call)
 *   h   = splitmix64_mix(key + (i + 1) * GOLDEN)        (i.e. the (i+1)-th output of splitmix64 seeded with key)
 *   u1  = (hi32(h) + 0.5) * 2^-32  in (0, 1)            u2 = lo32(h) * 2^-32  in [0, 1)
 *   z   = sqrt(-2 ln u1) * cos(2 pi u2)                 (Box-Muller, one normal per element, fp32 math)
 *   out = scale * z (fp32), for bf16 then rounded to nearest even.
 * |z| <= sqrt(2 * 33 ln 2) ~ 6.76. The fp32 math (logf, cospif; no fast math) makes the data identical on every
 * run and every GPU this code is built for.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu_common.cuh"

#define GG_H_GOLDEN 0x9E3779B97F4A7C15ull

__host__ __device__ static inline uint64_t gg_h_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ float gg_h_normal(uint64_t key, size_t i) {
    uint64_t h = gg_h_mix64(key + ((uint64_t)i + 1u) * GG_H_GOLDEN);
    /* (float)(uint32) rounds to nearest; hi32 + 0.5 keeps u1 > 0 (it may round up to exactly 1: then z = 0). */
    float u1 = ((float)(uint32_t)(h >> 32) + 0.5f) * 2.3283064365386963e-10f; /* 2^-32 */
    float u2 = (float)(uint32_t)h * 2.3283064365386963e-10f;
    float r = sqrtf(-2.0f * logf(u1));
    return r * cospif(2.0f * u2);
}

__global__ void gg_h_fill_normal_f32_kernel(float *out, size_t n, float scale, uint64_t key) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) out[i] = scale * gg_h_normal(key, i);
}

__global__ void gg_h_fill_normal_bf16_kernel(uint16_t *out, size_t n, float scale, uint64_t key) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) out[i] = gg_h_f32_to_bf16(scale * gg_h_normal(key, i));
}

__global__ void gg_h_poison_f32_kernel(float *out, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) out[i] = __uint_as_float(0x7FC00000u);
}

__global__ void gg_h_poison_bf16_kernel(uint16_t *out, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) out[i] = (uint16_t)0x7FC0u;
}

/* From the double GEMM result xd: x = fp32(xd) is stored, and the rest is computed from that stored x in double,
 * each output rounded once to fp32: tanh_inner = tanh(c (x + 0.044715 x^3)), gelu_out = 0.5 x (1 + tanh_inner)
 * (with the unrounded tanh). */
__global__ void gg_h_gelu_forward_kernel(const double *xd, float *linear1_out, float *tanh_inner, float *gelu_out,
                                         size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) {
        float xf = __double2float_rn(xd[i]);
        double x = (double)xf;
        double t = tanh(GG_H_GELU_C * (x + 0.044715 * x * x * x));
        linear1_out[i] = xf;
        tanh_inner[i] = __double2float_rn(t);
        gelu_out[i] = __double2float_rn(0.5 * x * (1.0 + t));
    }
}

extern "C" int gg_h_fill_normal_f32(float *out, size_t n, float scale, uint64_t seed, gg_stream stream) {
    GG_H_REQUIRE(out != NULL || n == 0);
    return (int)gg_h_launch(gg_h_fill_normal_f32_kernel, n, gg_h_stream(stream), out, n, scale,
                            gg_h_mix64(seed + GG_H_GOLDEN));
}

extern "C" int gg_h_fill_normal_bf16(uint16_t *out, size_t n, float scale, uint64_t seed, gg_stream stream) {
    GG_H_REQUIRE(out != NULL || n == 0);
    return (int)gg_h_launch(gg_h_fill_normal_bf16_kernel, n, gg_h_stream(stream), out, n, scale,
                            gg_h_mix64(seed + GG_H_GOLDEN));
}

extern "C" int gg_h_poison_f32(float *out, size_t n, gg_stream stream) {
    GG_H_REQUIRE(out != NULL || n == 0);
    return (int)gg_h_launch(gg_h_poison_f32_kernel, n, gg_h_stream(stream), out, n);
}

extern "C" int gg_h_poison_bf16(uint16_t *out, size_t n, gg_stream stream) {
    GG_H_REQUIRE(out != NULL || n == 0);
    return (int)gg_h_launch(gg_h_poison_bf16_kernel, n, gg_h_stream(stream), out, n);
}

/* The forward's body, given a handle already bound to stream s and scratch buf of (M*D + F*D + M*F) doubles:
 *   buf = [ hs_d: M*D | w1_d: F*D | x_d: M*F ].
 * x[M,F] = hs[M,D] @ W1[F,D]ᵀ. cuBLAS is column-major: a row-major [r,c] matrix with row length c is the
 * column-major [c,r] matrix (its transpose) with leading dimension c. So compute xᵀ[F,M] = W1[F,D] @ hsᵀ[D,M]:
 *   A = w1_d seen column-major as [D,F] (ld D), op T -> [F,D];  B = hs_d seen column-major as [D,M] (ld D), op N;
 *   C = x_d column-major [F,M] (ld F) = row-major [M,F].
 *   cublasDgemm(T, N, m=F, n=M, k=D, W1 (ld D), hs (ld D), x (ld F)). */
static int gg_h_gelu_ffn_forward_body(cublasHandle_t h, int64_t M, int64_t D, int64_t F, const float *hs,
                                      const float *w1, float *linear1_out, float *tanh_inner, float *gelu_out,
                                      double *buf, cudaStream_t s) {
    size_t nmd = (size_t)M * (size_t)D, nfd = (size_t)F * (size_t)D, nmf = (size_t)M * (size_t)F;
    double *hs_d = buf, *w1_d = buf + nmd, *x_d = buf + nmd + nfd;
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nmd, s, hs, hs_d, nmd));
    GG_H_CHECK(gg_h_launch(gg_h_to_f64_kernel<float>, nfd, s, w1, w1_d, nfd));
    const double one = 1.0, zero = 0.0;
    if (cublasDgemm_64(h, CUBLAS_OP_T, CUBLAS_OP_N, F, M, D, &one, w1_d, D, hs_d, D, &zero, x_d, F) !=
        CUBLAS_STATUS_SUCCESS)
        return (int)cudaErrorUnknown;
    return (int)gg_h_launch(gg_h_gelu_forward_kernel, nmf, s, x_d, linear1_out, tanh_inner, gelu_out, nmf);
}

/* Allocates its scratch stream-ordered (cudaMallocAsync), creates and destroys its own cuBLAS handle, and waits
 * for the stream before returning (so the handle is never destroyed under running work). */
extern "C" int gg_h_gelu_ffn_forward(int64_t M, int64_t D, int64_t F, const float *hs, const float *w1,
                                     float *linear1_out, float *tanh_inner, float *gelu_out, gg_stream stream) {
    GG_H_REQUIRE(M >= 1 && D >= 1 && F >= 1);
    GG_H_REQUIRE(hs != NULL && w1 != NULL && linear1_out != NULL && tanh_inner != NULL && gelu_out != NULL);
    cudaStream_t s = gg_h_stream(stream);
    size_t doubles = (size_t)M * (size_t)D + (size_t)F * (size_t)D + (size_t)M * (size_t)F;

    cublasHandle_t h = NULL;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return (int)cudaErrorUnknown;
    int err = 0;
    if (cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
        err = (int)cudaErrorUnknown;

    double *buf = NULL;
    if (err == 0) err = (int)cudaMallocAsync((void **)&buf, doubles * sizeof(double), s);
    if (err == 0) err = gg_h_gelu_ffn_forward_body(h, M, D, F, hs, w1, linear1_out, tanh_inner, gelu_out, buf, s);
    if (buf != NULL) {
        int e = (int)cudaFreeAsync(buf, s);
        if (err == 0) err = e;
    }
    int e = (int)cudaStreamSynchronize(s);
    if (err == 0) err = e;
    if (cublasDestroy(h) != CUBLAS_STATUS_SUCCESS && err == 0) err = (int)cudaErrorUnknown;
    return err;
}
