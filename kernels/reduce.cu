/* reduce.cu - column sums (bias gradients): a deterministic reduction over the rows of an [M,N] matrix, one launch. */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

__device__ __forceinline__ float load(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }

__device__ __forceinline__ void store(float *p, int64_t i, float v, bool acc) { p[i] = acc ? p[i] + v : v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, int64_t i, float v, bool acc) {
    p[i] = __float2bfloat16_rn(acc ? __bfloat162float(p[i]) + v : v);
}

/* CTA (x, y) sums rows [y*rows, (y+1)*rows) of the column groups x, x + gridDim.x, ... (kThreads consecutive
 * columns each: a warp reads one row segment) into partials[y]; then the last CTA of column x (counters[x]) adds
 * the partials of its groups in chunk order and writes out. */
template <typename TIn, typename TOut>
__global__ void __launch_bounds__(kThreads) col_sum_kernel(const TIn *__restrict__ in, int64_t M, int64_t N,
                                                           int64_t rows_per_chunk, float *__restrict__ partials,
                                                           unsigned *__restrict__ counters, TOut *__restrict__ out,
                                                           bool accumulate) {
    __shared__ bool is_last;
    const int64_t groups = (N + kThreads - 1) / kThreads;
    const int64_t r0 = (int64_t)blockIdx.y * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const int64_t col = g * kThreads + threadIdx.x;
        if (col >= N) continue;
        float acc = 0.0f;
        for (int64_t r = r0; r < r1; ++r) acc += load(in, r * N + col);
        partials[(int64_t)blockIdx.y * N + col] = acc;
    }
    __threadfence(); /* this thread's partials are visible before the counter says so */
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const int64_t col = g * kThreads + threadIdx.x;
        if (col >= N) continue;
        float acc = 0.0f;
        for (unsigned c = 0; c < gridDim.y; ++c) acc += __ldcg(&partials[(int64_t)c * N + col]);
        store(out, col, acc, accumulate);
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0; /* ready for the next launch */
}

template <typename TIn, typename TOut>
cudaError_t launch_col_sum(const void *in, int64_t M, int64_t N, int chunks, float *partials, unsigned *counters,
                           void *out, bool accumulate, cudaStream_t stream) {
    const int64_t rows = (M + chunks - 1) / chunks, groups = (N + kThreads - 1) / kThreads;
    const dim3 grid((unsigned)(groups < GG_COL_SUM_COUNTERS ? groups : GG_COL_SUM_COUNTERS), (unsigned)chunks);
    col_sum_kernel<TIn, TOut><<<grid, kThreads, 0, stream>>>(static_cast<const TIn *>(in), M, N, rows, partials,
                                                             counters, static_cast<TOut *>(out), accumulate);
    return cudaGetLastError();
}

template <typename TOut>
cudaError_t dispatch_in(const void *in, gg_dtype in_type, int64_t M, int64_t N, int chunks, float *partials,
                        unsigned *counters, void *out, bool accumulate, cudaStream_t stream) {
    switch (in_type) {
    case GG_DT_F32: return launch_col_sum<float, TOut>(in, M, N, chunks, partials, counters, out, accumulate, stream);
    case GG_DT_F16: return launch_col_sum<__half, TOut>(in, M, N, chunks, partials, counters, out, accumulate, stream);
    case GG_DT_BF16:
        return launch_col_sum<__nv_bfloat16, TOut>(in, M, N, chunks, partials, counters, out, accumulate, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

extern "C" int gg_k_col_sum_chunks(int64_t M, int64_t N, int sm_count) {
    /* Enough blocks to fill the GPU a few times over, but never chunks of fewer than 16 rows, and at most 65535
     * (gridDim.y's limit). */
    const int64_t col_blocks = (N + kThreads - 1) / kThreads;
    int64_t chunks = (4 * (int64_t)(sm_count > 0 ? sm_count : 1) + col_blocks - 1) / col_blocks;
    const int64_t max_chunks = (M + 15) / 16;
    if (chunks > max_chunks) chunks = max_chunks;
    if (chunks > 65535) chunks = 65535;
    return chunks < 1 ? 1 : (int)chunks;
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
