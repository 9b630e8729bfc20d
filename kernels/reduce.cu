/* reduce.cu - column sums of a stored [M,N] matrix (bias gradients), through the one-launch kernel of col_sum.cuh;
 * an fp32 input can be converted to fp16 in the same pass (block 3's dY: its sum costs no read of its own). */
#include "col_sum.cuh"

using namespace gg;

namespace {

/* Row segments of a stored matrix: one 16-byte load of V elements. */
template <typename T>
struct LoadRow;

template <>
struct LoadRow<float> {
    static constexpr int V = 4;
    using Raw = float4;
    const float *in;
    int64_t N;
    __half *copy;       /* NULL, or where the fp16 copy of the input goes */
    unsigned *overflow; /* with copy: set when a value is past fp16's range (col_sum's rows are not warp-uniform: no
                         * vote, as GeluGradRow) */
    __device__ __forceinline__ Raw load(int64_t r, int64_t col) const {
        return __ldcs(reinterpret_cast<const float4 *>(in + r * N + col)); /* read once: stream it */
    }
    __device__ __forceinline__ void use(int64_t r, int64_t col, const Raw &x, float (&v)[V]) const {
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
        if (!copy) return;
        *reinterpret_cast<uint2 *>(copy + r * N + col) = pack_half4(x);
        if (overflow && past_half(x)) atomicOr(overflow, 1u); /* a branch never taken while in range */
    }
};

/* The 16-bit types: bf16, and fp16 (block 3's R written by G's DGELU epilogue), whose overflow (NULL, or a word) is
 * set when a value is not finite (a product past fp16's range rounds to infinity). */
template <typename T>
struct LoadRow16 {
    static constexpr int V = 8;
    using Raw = uint4;
    const T *in;
    int64_t N;
    unsigned *overflow; /* fp16 only */
    __device__ __forceinline__ Raw load(int64_t r, int64_t col) const {
        return __ldcs(reinterpret_cast<const uint4 *>(in + r * N + col));
    }
    __device__ __forceinline__ void use(int64_t, int64_t, const Raw &x, float (&v)[V]) const {
        const T *h = reinterpret_cast<const T *>(&x);
        bool past = false;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            v[j] = static_cast<float>(h[j]);
            if constexpr (std::is_same<T, __half>::value) past |= !(fabsf(v[j]) <= kHalfMax);
        }
        if (overflow && past) atomicOr(overflow, 1u); /* a branch never taken while in range */
    }
};
template <>
struct LoadRow<__nv_bfloat16> : LoadRow16<__nv_bfloat16> {};
template <>
struct LoadRow<__half> : LoadRow16<__half> {};

template <typename TOut, typename Op>
cudaError_t sum(const Op &op, int64_t M, int64_t N, int chunks, float *partials, unsigned *counters, void *out,
                bool accumulate, cudaStream_t stream) {
    return launch_col_sum(op, M, N, chunks, partials, counters, static_cast<TOut *>(out), accumulate, stream);
}

} // namespace

extern "C" int gg_k_col_sum_chunks(int64_t M, int64_t N, gg_dtype in_type, int sm_count) {
    return col_sum_chunks(M, N, in_type == GG_DT_F32 ? 4 : 8, sm_count);
}

extern "C" cudaError_t gg_k_col_sum(const void *in, gg_dtype in_type, int64_t M, int64_t N, int chunks,
                                    float *partials, unsigned *counters, void *out, gg_dtype out_type, int accumulate,
                                    void *f16_copy, unsigned *overflow, cudaStream_t stream) {
    /* The pairs the blocks use (each a kernel instantiation): fp32 -> fp32 (block 3's grad_bias2), bf16 -> bf16
     * (block 4's grad_bias). */
    if (in_type == GG_DT_F32 && out_type == GG_DT_F32) {
        const LoadRow<float> op{static_cast<const float *>(in), N, static_cast<__half *>(f16_copy), overflow};
        return sum<float>(op, M, N, chunks, partials, counters, out, accumulate != 0, stream);
    }
    if (in_type == GG_DT_F32 && out_type == GG_DT_BF16 && !f16_copy) { /* block 4's grad_bias from row sums */
        const LoadRow<float> op{static_cast<const float *>(in), N, nullptr, nullptr};
        return sum<__nv_bfloat16>(op, M, N, chunks, partials, counters, out, accumulate != 0, stream);
    }
    if (in_type == GG_DT_F16 && out_type == GG_DT_F32 && !f16_copy) { /* block 3's grad_bias1 over an fp16 R */
        const LoadRow<__half> op{{static_cast<const __half *>(in), N, overflow}};
        return sum<float>(op, M, N, chunks, partials, counters, out, accumulate != 0, stream);
    }
    if (in_type == GG_DT_BF16 && out_type == GG_DT_BF16 && !f16_copy) {
        const LoadRow<__nv_bfloat16> op{{static_cast<const __nv_bfloat16 *>(in), N, nullptr}};
        return sum<__nv_bfloat16>(op, M, N, chunks, partials, counters, out, accumulate != 0, stream);
    }
    return cudaErrorInvalidValue;
}
