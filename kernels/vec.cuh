/* vec.cuh - helpers shared by the kernels: 16-byte vectors of bf16, conversions, launch geometry. */
#ifndef GG_VEC_CUH
#define GG_VEC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace gg {

constexpr int kThreads = 256;

/* A narrow launch runs beside a GEMM on the few SMs its SM target leaves free: one CTA of kNarrowThreads per SM,
 * each thread with several 16-byte loads in flight: ~115 GB/s per SM (16 SMs: 1.8 TB/s alone; docs/decisions.md,
 * "the narrow schedule"), where the wide grid (one load in flight per thread) needs the whole GPU for its rate. */
constexpr int kNarrowThreads = 1024;

/* Eight bf16 values, the unit of a 16-byte load or store. */
struct alignas(16) bf16x8 {
    __nv_bfloat16 v[8];
};

__device__ __forceinline__ float bf(__nv_bfloat16 x) { return __bfloat162float(x); }
/* Round to bf16 (nearest, ties to even) and back: what a bf16 framework does after every elementwise op. */
__device__ __forceinline__ float rbf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/* Two floats rounded to fp16 (nearest even), packed as one 32-bit word (lo in the low half). */
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

/* Four floats rounded to fp16 (nearest even), packed as one 8-byte store. */
__device__ __forceinline__ uint2 pack_half4(float4 v) { return make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w)); }

/* fp16's largest finite value: an fp32 value past it (or not finite) has no fp16 counterpart. */
constexpr float kHalfMax = 65504.0f;
__device__ __forceinline__ bool past_half(float4 v) {
    return !(fabsf(v.x) <= kHalfMax && fabsf(v.y) <= kHalfMax && fabsf(v.z) <= kHalfMax && fabsf(v.w) <= kHalfMax);
}

/* Sets *flag (when given) if any lane of the warp saw a value past fp16's range: one vote per warp, one atomic per
 * warp that found one. Every lane of the warp must call it (at the end of a kernel whose threads all get there). */
__device__ __forceinline__ void flag_overflow(unsigned *flag, bool seen) {
    if (flag && __any_sync(0xffffffffu, seen) && (threadIdx.x & 31) == 0) atomicOr(flag, 1u);
}

/* A grid that covers n_items with kThreads threads each, capped at `per_sm` blocks per SM (grid-stride loops). */
inline int grid_for(size_t n_items, int sm_count, int per_sm) {
    size_t blocks = (n_items + kThreads - 1) / kThreads;
    size_t cap = (size_t)(sm_count > 0 ? sm_count : 1) * (size_t)per_sm;
    if (blocks > cap) blocks = cap;
    return blocks ? (int)blocks : 1;
}

/* Sum of v over the block, valid in thread 0; `shared` holds blockDim.x / 32 values. Fixed order: deterministic.
 * Every thread of the block must call it. */
template <typename T> __device__ __forceinline__ T block_sum(T v, T *shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = T(0);
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? shared[lane] : T(0);
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

} // namespace gg

#endif
