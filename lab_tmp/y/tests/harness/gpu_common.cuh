/*
 * gpu_common.cuh - private helpers shared by the GPU test harness (the .cu files here): error-check macros,
 * bit-exact bf16 conversions identical to the CPU reference (tests/ref/gg_ref.h), and launch sizing.
 * Not part of any public interface.
 */
#ifndef GG_GPU_COMMON_CUH
#define GG_GPU_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_harness.h"

/* The bf16 rounding below and the float64 references must see IEEE results with subnormals intact. */
#ifdef __USE_FAST_MATH__
#error "tests/harness must be compiled without --use_fast_math (the references need IEEE math and subnormals)"
#endif

/* Every function of the harness returns a cudaError_t as int; these return early on the first failure. */
#define GG_H_CHECK(call)                                                                                         \
    do {                                                                                                         \
        cudaError_t gg_h_err_ = (call);                                                                          \
        if (gg_h_err_ != cudaSuccess) return (int)gg_h_err_;                                                     \
    } while (0)

/* After a kernel launch: a bad configuration is reported by cudaGetLastError. */
#define GG_H_CHECK_LAUNCH() GG_H_CHECK(cudaGetLastError())

/* An invalid argument (NULL pointer, bad size) is reported as cudaErrorInvalidValue. */
#define GG_H_REQUIRE(cond)                                                                                       \
    do {                                                                                                         \
        if (!(cond)) return (int)cudaErrorInvalidValue;                                                          \
    } while (0)

static inline cudaStream_t gg_h_stream(gg_stream s) { return (cudaStream_t)s; }

/* ---- bf16, bit-exact with gg_ref_f32_to_bf16 / gg_ref_bf16_to_f32 / gg_ref_round_bf16 ---- */

/* float -> bf16 bits, round-to-nearest-even on the bit pattern; NaN -> quiet NaN 0x7FC0 keeping the sign;
 * overflow rounds to Inf. Integer arithmetic only, so no FTZ or intrinsic semantics are involved. */
__device__ __forceinline__ uint16_t gg_h_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7FC0u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ __forceinline__ float gg_h_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ double gg_h_bf16_to_f64(uint16_t h) { return (double)gg_h_bf16_to_f32(h); }

/* The bf16 value nearest to x, through fp32: bf16(float(x)), each step round-to-nearest-even. */
__device__ __forceinline__ double gg_h_round_bf16(double x) {
    return gg_h_bf16_to_f64(gg_h_f32_to_bf16(__double2float_rn(x)));
}

#define GG_H_GELU_C 0.7978845608028654 /* sqrt(2/pi), as GG_REF_GELU_C */

/* ---- conversion to double (a template, so every .cu may instantiate it without clashing symbols) ---- */

__device__ __forceinline__ double gg_h_load_f64(const float *p, size_t i) { return (double)p[i]; }
__device__ __forceinline__ double gg_h_load_f64(const uint16_t *p, size_t i) { return gg_h_bf16_to_f64(p[i]); }

template <typename T> __global__ void gg_h_to_f64_kernel(const T *in, double *out, size_t n);

/* ---- launch sizing ---- */

#define GG_H_THREADS 256

/* Blocks for a grid-stride loop over n elements: enough to fill the device (blocks_per_sm per SM), never more
 * than the elements need. n must be > 0. Results do not depend on the grid size except where noted. */
static inline cudaError_t gg_h_grid(size_t n, int blocks_per_sm, int *grid) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    if (sms < 1) sms = 1;
    size_t want = (n + GG_H_THREADS - 1) / GG_H_THREADS;
    size_t cap = (size_t)sms * (size_t)blocks_per_sm;
    *grid = (int)(want < cap ? want : cap);
    return cudaSuccess;
}

/* Launches kernel<<<grid, GG_H_THREADS, 0, s>>>(args...) for a grid-stride loop over n elements (nothing when
 * n == 0) and returns the launch's cudaGetLastError(). */
template <typename... KArgs, typename... Args>
static inline cudaError_t gg_h_launch(void (*kernel)(KArgs...), size_t n, cudaStream_t s, Args... args) {
    if (n == 0) return cudaSuccess;
    int grid = 0;
    cudaError_t e = gg_h_grid(n, 16, &grid);
    if (e != cudaSuccess) return e;
    kernel<<<grid, GG_H_THREADS, 0, s>>>(args...);
    return cudaGetLastError();
}

/* Index of this thread and the grid stride for 64-bit grid-stride loops. */
__device__ __forceinline__ size_t gg_h_tid() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t gg_h_stride() { return (size_t)gridDim.x * blockDim.x; }

/* out[i] = (double)in[i], in fp32 or bf16 bits. */
template <typename T> __global__ void gg_h_to_f64_kernel(const T *in, double *out, size_t n) {
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) out[i] = gg_h_load_f64(in, i);
}

#endif /* GG_GPU_COMMON_CUH */
