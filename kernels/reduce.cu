/* reduce.cu - column sums of a stored [M,N] matrix (bias gradients), through the one-launch kernel of col_sum.cuh. */
#include "col_sum.cuh"

using namespace gg;

namespace {

/* Row segments of a stored matrix: one 16-byte load of V elements. */
template <typename T>
struct LoadRow;

template <>
struct LoadRow<float> {
    static constexpr int V = 4;
    const float *in;
    int64_t N;
    __device__ __forceinline__ void row(int64_t r, int64_t col, float (&v)[V]) const {
        const float4 x = __ldcs(reinterpret_cast<const float4 *>(in + r * N + col)); /* read once: stream it */
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    }
};

template <typename H> /* __half or __nv_bfloat16 */
struct LoadRow16 {
    static constexpr int V = 8;
    const H *in;
    int64_t N;
    __device__ __forceinline__ void row(int64_t r, int64_t col, float (&v)[V]) const {
        const uint4 x = __ldcs(reinterpret_cast<const uint4 *>(in + r * N + col));
        const H *h = reinterpret_cast<const H *>(&x);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = (float)h[j];
    }
};
template <>
struct LoadRow<__half> : LoadRow16<__half> {};
template <>
struct LoadRow<__nv_bfloat16> : LoadRow16<__nv_bfloat16> {};

template <typename TIn, typename TOut>
cudaError_t sum(const void *in, int64_t M, int64_t N, int chunks, float *partials, unsigned *counters, void *out,
                bool accumulate, cudaStream_t stream) {
    LoadRow<TIn> op;
    op.in = static_cast<const TIn *>(in);
    op.N = N;
    return launch_col_sum(op, M, N, chunks, partials, counters, static_cast<TOut *>(out), accumulate, stream);
}

template <typename TOut>
cudaError_t dispatch_in(const void *in, gg_dtype in_type, int64_t M, int64_t N, int chunks, float *partials,
                        unsigned *counters, void *out, bool accumulate, cudaStream_t stream) {
    switch (in_type) {
    case GG_DT_F32: return sum<float, TOut>(in, M, N, chunks, partials, counters, out, accumulate, stream);
    case GG_DT_F16: return sum<__half, TOut>(in, M, N, chunks, partials, counters, out, accumulate, stream);
    case GG_DT_BF16: return sum<__nv_bfloat16, TOut>(in, M, N, chunks, partials, counters, out, accumulate, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

extern "C" int gg_k_col_sum_chunks(int64_t M, int64_t N, gg_dtype in_type, int sm_count) {
    return col_sum_chunks(M, N, in_type == GG_DT_F32 ? 4 : 8, sm_count);
}

extern "C" cudaError_t gg_k_col_sum(const void *in, gg_dtype in_type, int64_t M, int64_t N, int chunks,
                                    float *partials, unsigned *counters, void *out, gg_dtype out_type, int accumulate,
                                    cudaStream_t stream) {
    if (out_type == GG_DT_F32)
        return dispatch_in<float>(in, in_type, M, N, chunks, partials, counters, out, accumulate != 0, stream);
    if (out_type == GG_DT_BF16)
        return dispatch_in<__nv_bfloat16>(in, in_type, M, N, chunks, partials, counters, out, accumulate != 0, stream);
    return cudaErrorInvalidValue;
}
