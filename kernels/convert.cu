/* convert.cu - dtype conversions of operands (fp32 -> fp16 for the FP16 precision mode): any number of tensors in
 * one launch, so a block's conversions are one memory-bound pass with no launch gaps between tensors. */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

constexpr int kLoads = 4; /* 16-byte loads in flight per thread */

struct Copies {
    const float4 *in[GG_F16_COPIES_MAX];
    uint2 *out[GG_F16_COPIES_MAX];
    int64_t end[GG_F16_COPIES_MAX]; /* cumulative float4 counts: tensor k holds vectors [end[k-1], end[k]) */
    int count;
};

/* The tensor that global vector i belongs to, and i's index in it. */
__device__ __forceinline__ int locate(const Copies &c, int64_t &i) {
    int k = 0;
    while (k + 1 < c.count && i >= c.end[k]) ++k;
    if (k > 0) i -= c.end[k - 1];
    return k;
}

__global__ void __launch_bounds__(kThreads) f32_to_f16_kernel(Copies c) {
    const int64_t total = c.end[c.count - 1], stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; first < total; first += kLoads * stride) {
        float4 v[kLoads];
        uint2 *dst[kLoads];
#pragma unroll
        for (int j = 0; j < kLoads; ++j) {
            int64_t i = first + j * stride;
            dst[j] = nullptr;
            if (i >= total) continue;
            const int k = locate(c, i);
            v[j] = c.in[k][i];
            dst[j] = c.out[k] + i;
        }
#pragma unroll
        for (int j = 0; j < kLoads; ++j) {
            if (!dst[j]) continue;
            const __half2 lo = __floats2half2_rn(v[j].x, v[j].y), hi = __floats2half2_rn(v[j].z, v[j].w);
            uint2 packed;
            packed.x = *reinterpret_cast<const uint32_t *>(&lo);
            packed.y = *reinterpret_cast<const uint32_t *>(&hi);
            *dst[j] = packed;
        }
    }
}

} // namespace

extern "C" cudaError_t gg_k_f32_to_f16_many(const float *const *in, void *const *out, const size_t *n, int count,
                                            int sm_count, cudaStream_t stream) {
    if (count < 1 || count > GG_F16_COPIES_MAX) return cudaErrorInvalidValue;
    Copies c = {};
    c.count = count;
    int64_t total = 0;
    for (int k = 0; k < count; ++k) {
        c.in[k] = reinterpret_cast<const float4 *>(in[k]);
        c.out[k] = static_cast<uint2 *>(out[k]);
        total += (int64_t)(n[k] / 4); /* n is a multiple of 8: every tensor's rows are */
        c.end[k] = total;
    }
    f32_to_f16_kernel<<<grid_for((size_t)total, sm_count, 16), kThreads, 0, stream>>>(c);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_f32_to_f16(const float *in, void *out, size_t n, int sm_count, cudaStream_t stream) {
    return gg_k_f32_to_f16_many(&in, &out, &n, 1, sm_count, stream);
}
