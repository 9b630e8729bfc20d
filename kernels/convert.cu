/* convert.cu - dtype conversions of operands (fp32 -> fp16 for the FP16 precision mode), the finite check, and the
 * rounding of a GEMM's fp32 sum into its 16-bit output (a GEMM run in two parts: src/gemm/matmul.c). */
#include "gg_kernels.h"
#include "launch.cuh"
#include "vec.cuh"

using namespace gg;

namespace {

/* The narrow launch (vec.cuh): each thread with kNarrowUnroll 16-byte loads in flight. */
constexpr int kNarrowUnroll = 8;

/* Grid-stride over n4 groups of four, U groups per thread in flight: every load of a round before its stores; the
 * last n % 4 elements (tail, past the groups) by thread 0. Values past fp16's range set *overflow (when given; a warp
 * vote at the end). */
template <int Threads, int U>
__global__ void __launch_bounds__(Threads) f32_to_f16_kernel(const float4 *__restrict__ in, uint2 *__restrict__ out,
                                                             int64_t n4, int tail, unsigned *overflow) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    bool past = false;
    if (U > 1)
        for (; i + (U - 1) * stride < n4; i += U * stride) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = __ldcs(in + i + u * stride); /* read once: evict-first (tma.cuh) */
#pragma unroll
            for (int u = 0; u < U; ++u) {
                past |= past_half(v[u]);
                out[i + u * stride] = pack_half4(v[u]);
            }
        }
    for (; i < n4; i += stride) {
        const float4 v = __ldcs(in + i);
        past |= past_half(v);
        out[i] = pack_half4(v);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int t = 0; t < tail; ++t) {
            const float v = reinterpret_cast<const float *>(in + n4)[t];
            past |= !(fabsf(v) <= kHalfMax);
            reinterpret_cast<__half *>(out + n4)[t] = __float2half_rn(v);
        }
    flag_overflow(overflow, past);
}

} // namespace

extern "C" cudaError_t gg_k_f32_to_f16(const float *in, void *out, size_t n, int sm_count, int narrow_ctas,
                                       int priority, unsigned *overflow, cudaStream_t stream) {
    const int64_t n4 = (int64_t)(n / 4);
    const int tail = (int)(n % 4); /* 0 for the blocks' tensors, whose rows are multiples of 8 */
    const float4 *src = reinterpret_cast<const float4 *>(in);
    uint2 *dst = static_cast<uint2 *>(out);
    LaunchAttrs attrs;
    if (narrow_ctas > 0) {
        const cudaLaunchConfig_t config =
            plain_launch(dim3((unsigned)narrow_ctas), kNarrowThreads, 0, priority, stream, &attrs);
        return cudaLaunchKernelEx(&config, f32_to_f16_kernel<kNarrowThreads, kNarrowUnroll>, src, dst, n4, tail,
                                  overflow);
    }
    const cudaLaunchConfig_t config =
        plain_launch(dim3(grid_for((size_t)n4, sm_count, 16)), kThreads, 0, priority, stream, &attrs);
    return cudaLaunchKernelEx(&config, f32_to_f16_kernel<kThreads, 1>, src, dst, n4, tail, overflow);
}

namespace {

/* Whether 32-bit word w holds a non-finite value: one fp32 (bf16 0), or two bf16 (bf16 1; either half). An
 * exponent of all ones is Inf or NaN in both formats. */
__device__ __forceinline__ bool non_finite_word(uint32_t w, bool bf16) {
    return bf16 ? ((w & 0x7f800000u) == 0x7f800000u) || ((w & 0x7f80u) == 0x7f80u) : (w & 0x7f800000u) == 0x7f800000u;
}

/* Grid-stride over n16 16-byte groups, then the `tail` bytes past them (a multiple of the element size) by thread 0;
 * sets *flag when any element is Inf or NaN (a warp vote at the end). */
__global__ void __launch_bounds__(kThreads) check_finite_kernel(const uint4 *__restrict__ data, int64_t n16, int tail,
                                                                bool bf16, unsigned *flag) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    bool bad = false;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
        const uint4 v = __ldcs(data + i); /* read once: evict-first */
        bad |= non_finite_word(v.x, bf16) | non_finite_word(v.y, bf16) | non_finite_word(v.z, bf16) |
               non_finite_word(v.w, bf16);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const uint16_t *rest = reinterpret_cast<const uint16_t *>(data + n16); /* tail: whole elements */
        for (int t = 0; t < tail / 2; t += bf16 ? 1 : 2) {
            const uint32_t w = bf16 ? (uint32_t)rest[t] : (uint32_t)rest[t] | (uint32_t)rest[t + 1] << 16;
            bad |= non_finite_word(w, bf16); /* a bf16 in the low half; the high half 0 */
        }
    }
    flag_overflow(flag, bad);
}

} // namespace

extern "C" cudaError_t gg_k_check_finite(const void *data, size_t n, int bf16, unsigned *flag, int sm_count,
                                         cudaStream_t stream) {
    const size_t bytes = n * (bf16 ? 2 : 4);
    const int64_t n16 = (int64_t)(bytes / 16);
    const int tail = (int)(bytes % 16);
    LaunchAttrs attrs;
    const cudaLaunchConfig_t config = plain_launch(dim3(grid_for((size_t)n16, sm_count, 16)), kThreads, 0,
                                                   GG_PRIORITY_OF_STREAM, stream, &attrs);
    return cudaLaunchKernelEx(&config, check_finite_kernel, static_cast<const uint4 *>(data), n16, tail, bf16 != 0,
                              flag);
}

namespace {

/* d[j ldd + i] = round(sum[j m + i] (+ part[j m + i]) + beta c[j ldd + i]) over the m x n column-major matrix (part:
 * NULL or a second fp32 sum of the same layout; c of d's type; beta 0: not read): columns along y, four consecutive
 * rows per thread along x, both grid-stride, no division per element. The fp32 sums are read once (evict-first). */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    round_sum_kernel(const float *__restrict__ sum, const float *__restrict__ part, const T *c, float beta, T *d,
                     int64_t m, int64_t n, int64_t ldd) {
    const int64_t groups = m / 4, x_stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = blockIdx.y; j < n; j += gridDim.y)
        for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += x_stride) {
            const float4 f = __ldcs(reinterpret_cast<const float4 *>(sum + j * m) + g);
            float v[4] = {f.x, f.y, f.z, f.w};
            if (part) { /* the same fp32 add as a GEMM's beta-1 epilogue over sum */
                const float4 p = __ldcs(reinterpret_cast<const float4 *>(part + j * m) + g);
                v[0] += p.x, v[1] += p.y, v[2] += p.z, v[3] += p.w;
            }
            T *out = d + j * ldd + 4 * g;
            if (beta != 0.0f) { /* c may be d itself: read before the write */
                const T *add = c + j * ldd + 4 * g;
#pragma unroll
                for (int k = 0; k < 4; ++k) v[k] += beta * static_cast<float>(add[k]);
            }
#pragma unroll
            for (int k = 0; k < 4; ++k) out[k] = T(v[k]); /* nearest, ties to even */
        }
}

} // namespace

extern "C" cudaError_t gg_k_round_sum(const float *sum, const float *part, const void *c, float beta, void *d,
                                      gg_dtype d_type, int64_t m, int64_t n, int64_t ldd, int sm_count,
                                      cudaStream_t stream) {
    if (m <= 0 || n <= 0 || m % 4 || ldd < m || ldd % 4 || (uintptr_t)sum % 16 || (uintptr_t)part % 16 ||
        (d_type != GG_DT_F16 && d_type != GG_DT_BF16))
        return cudaErrorInvalidValue;
    const int64_t per_column = (m / 4 + kThreads - 1) / kThreads; /* the CTAs that cover a column */
    const int64_t x = per_column < 64 ? per_column : 64;
    int64_t y = (int64_t)sm_count * 8 / x; /* about 8 CTAs per SM in all */
    y = y < 1 ? 1 : y > n ? n : y > 65535 ? 65535 : y;
    LaunchAttrs attrs;
    const cudaLaunchConfig_t config =
        plain_launch(dim3((unsigned)x, (unsigned)y), kThreads, 0, GG_PRIORITY_OF_STREAM, stream, &attrs);
    if (d_type == GG_DT_BF16)
        return cudaLaunchKernelEx(&config, round_sum_kernel<__nv_bfloat16>, sum, part,
                                  static_cast<const __nv_bfloat16 *>(c), beta, static_cast<__nv_bfloat16 *>(d), m, n,
                                  ldd);
    return cudaLaunchKernelEx(&config, round_sum_kernel<__half>, sum, part, static_cast<const __half *>(c), beta,
                              static_cast<__half *>(d), m, n, ldd);
}
