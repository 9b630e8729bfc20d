/* reduce.cu - column sums (bias gradients): deterministic two-pass reduction over the rows of an [M,N] matrix. */
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

/* Block (x, y) sums rows [y*rows, (y+1)*rows) of kThreads consecutive columns: a warp reads one row segment. */
template <typename TIn>
__global__ void __launch_bounds__(kThreads) col_partial_kernel(const TIn *__restrict__ in, int64_t M, int64_t N,
                                                               int64_t rows_per_chunk, float *__restrict__ partials) {
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    const int64_t r0 = (int64_t)blockIdx.y * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r) acc += load(in, r * N + col);
    partials[(int64_t)blockIdx.y * N + col] = acc;
}

template <typename TOut>
__global__ void __launch_bounds__(kThreads) col_finish_kernel(const float *__restrict__ partials, int chunks, int64_t N,
                                                              TOut *__restrict__ out, bool accumulate) {
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    float acc = 0.0f;
    for (int c = 0; c < chunks; ++c) acc += partials[(int64_t)c * N + col];
    store(out, col, acc, accumulate);
}

template <typename TIn>
cudaError_t launch_partial(const void *in, int64_t M, int64_t N, int chunks, float *partials, cudaStream_t stream) {
    const int64_t rows = (M + chunks - 1) / chunks;
    const dim3 grid((unsigned)((N + kThreads - 1) / kThreads), (unsigned)chunks);
    col_partial_kernel<TIn><<<grid, kThreads, 0, stream>>>(static_cast<const TIn *>(in), M, N, rows, partials);
    return cudaGetLastError();
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
                                    float *partials, void *out, gg_dtype out_type, int accumulate,
                                    cudaStream_t stream) {
    cudaError_t err;
    switch (in_type) {
    case GG_DT_F32: err = launch_partial<float>(in, M, N, chunks, partials, stream); break;
    case GG_DT_F16: err = launch_partial<__half>(in, M, N, chunks, partials, stream); break;
    case GG_DT_BF16: err = launch_partial<__nv_bfloat16>(in, M, N, chunks, partials, stream); break;
    default: return cudaErrorInvalidValue;
    }
    if (err != cudaSuccess) return err;
    const unsigned grid = (unsigned)((N + kThreads - 1) / kThreads);
    if (out_type == GG_DT_F32)
        col_finish_kernel<float><<<grid, kThreads, 0, stream>>>(partials, chunks, N, static_cast<float *>(out),
                                                                accumulate != 0);
    else if (out_type == GG_DT_BF16)
        col_finish_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(
            partials, chunks, N, static_cast<__nv_bfloat16 *>(out), accumulate != 0);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}
