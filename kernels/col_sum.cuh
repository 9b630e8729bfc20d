/* col_sum.cuh - the deterministic one-launch column sum over an [M,N] matrix, templated on how a row segment is
 * produced, so the same kernel sums a stored tensor (bias gradients of dY) or an elementwise result it computes
 * and stores on the way (GELU' then grad_bias1 = column sums of R, without reading R back).
 *
 * Geometry: a thread owns V consecutive columns (one 16-byte load of the input); a CTA covers a group of kThreads
 * columns with kThreads / V threads per row and V row lanes; blockIdx.y picks a chunk of rows. Each thread keeps
 * 4 rows of loads in flight. Per chunk the lanes are added in a fixed order into partials[chunk, N]; the last chunk
 * to finish a column group (counters[blockIdx.x]) adds the chunks in order, one column per thread, up to 32 loads
 * in flight, and writes the result: the same bits on every run. Groups of kThreads columns keep that finish short
 * (measured: groups of up to 2048 columns made the finish a serial tail of up to 200 us).
 *
 * Op: struct with `static constexpr int V`, a type `Raw` (what a row segment loads), `__device__ Raw load(int64_t r,
 * int64_t col) const` (only loads) and `__device__ void use(int64_t r, int64_t col, const Raw &raw, float (&v)[V])
 * const`, producing the V values of row r, columns col..col+V-1 (and storing whatever else it computes). Two steps,
 * so that the four rows' loads are issued before the first row's stores: a store waits for its row's data, and a
 * load behind it in program order (which the compiler cannot move above a store through another pointer) would
 * wait with it. */
#ifndef GG_COL_SUM_CUH
#define GG_COL_SUM_CUH

#include "gg_kernels.h"
#include "vec.cuh"

namespace gg {

struct ColSumGeometry {
    int64_t vectors;     /* N / V */
    int threads_per_row; /* kThreads / V: the vectors of one group */
    int lanes;           /* V: rows a CTA reads at once */
    int64_t groups;      /* column groups of kThreads columns */
};

__host__ __device__ inline ColSumGeometry col_sum_geometry(int64_t N, int V) {
    ColSumGeometry g;
    g.vectors = N / V;
    g.threads_per_row = kThreads / V;
    g.lanes = V;
    g.groups = (g.vectors + g.threads_per_row - 1) / g.threads_per_row;
    return g;
}

__device__ __forceinline__ void store_sum(float *p, int64_t i, float v, bool acc) { p[i] = acc ? p[i] + v : v; }
__device__ __forceinline__ void store_sum(__nv_bfloat16 *p, int64_t i, float v, bool acc) {
    p[i] = __float2bfloat16_rn(acc ? __bfloat162float(p[i]) + v : v);
}

template <typename Op, typename TOut>
__global__ void __launch_bounds__(kThreads) col_sum_kernel(Op op, int64_t M, int64_t N, int64_t rows_per_chunk,
                                                           float *__restrict__ partials,
                                                           unsigned *__restrict__ counters, TOut *__restrict__ out,
                                                           bool accumulate) {
    constexpr int V = Op::V;
    __shared__ float lane_sums[kThreads * V];
    __shared__ bool is_last;
    const ColSumGeometry geo = col_sum_geometry(N, V);
    const int lane = threadIdx.x / geo.threads_per_row, column = threadIdx.x % geo.threads_per_row;
    const int64_t r0 = (int64_t)blockIdx.y * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    const int64_t step = geo.lanes;
    for (int64_t g = blockIdx.x; g < geo.groups; g += gridDim.x) {
        const int64_t vec = g * geo.threads_per_row + column;
        float acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = 0.0f;
        if (vec < geo.vectors) {
            const int64_t col = vec * V;
            int64_t r = r0 + lane;
            for (; r + 3 * step < r1; r += 4 * step) { /* four rows of loads in flight, added in row order */
                const typename Op::Raw a0 = op.load(r, col), a1 = op.load(r + step, col),
                                       a2 = op.load(r + 2 * step, col), a3 = op.load(r + 3 * step, col);
                float v0[V], v1[V], v2[V], v3[V];
                op.use(r, col, a0, v0);
                op.use(r + step, col, a1, v1);
                op.use(r + 2 * step, col, a2, v2);
                op.use(r + 3 * step, col, a3, v3);
#pragma unroll
                for (int j = 0; j < V; ++j) acc[j] += ((v0[j] + v1[j]) + (v2[j] + v3[j]));
            }
            for (; r < r1; r += step) {
                float v[V];
                op.use(r, col, op.load(r, col), v);
#pragma unroll
                for (int j = 0; j < V; ++j) acc[j] += v[j];
            }
        }
#pragma unroll
        for (int j = 0; j < V; ++j) lane_sums[threadIdx.x * V + j] = acc[j];
        __syncthreads();
        if (lane == 0 && vec < geo.vectors) {
#pragma unroll
            for (int j = 0; j < V; ++j) {
                float s = 0.0f;
                for (int l = 0; l < geo.lanes; ++l) s += lane_sums[(l * geo.threads_per_row + column) * V + j];
                partials[(int64_t)blockIdx.y * N + vec * V + j] = s;
            }
        }
        __syncthreads(); /* lane_sums is reused by the next group */
    }
    __threadfence(); /* this thread's partials are visible before the counter says so */
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const unsigned chunks = gridDim.y;
    for (int64_t g = blockIdx.x; g < geo.groups; g += gridDim.x) {
        const int64_t col = g * kThreads + threadIdx.x; /* a group is kThreads columns: one per thread */
        if (col >= N) continue;
        float s = 0.0f;
        unsigned c = 0;
        for (; c + 32 <= chunks; c += 32) { /* the finish is a serial tail on few SMs: many loads in flight */
            float p[32];
#pragma unroll
            for (int k = 0; k < 32; ++k) p[k] = __ldcg(&partials[(int64_t)(c + k) * N + col]);
#pragma unroll
            for (int k = 0; k < 32; ++k) s += p[k];
        }
        for (; c + 8 <= chunks; c += 8) {
            float p[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) p[k] = __ldcg(&partials[(int64_t)(c + k) * N + col]);
#pragma unroll
            for (int k = 0; k < 8; ++k) s += p[k];
        }
        for (; c < chunks; ++c) s += __ldcg(&partials[(int64_t)c * N + col]);
        store_sum(out, col, s, accumulate);
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0; /* ready for the next launch */
}

/* Row chunks for an [M,N] sum with V columns per thread: about four CTAs per SM in all, at least 8 rows per lane,
 * at most 128 (the finish reads every chunk's partial). */
inline int col_sum_chunks(int64_t M, int64_t N, int V, int sm_count) {
    const ColSumGeometry geo = col_sum_geometry(N, V);
    const int64_t x = geo.groups < GG_COL_SUM_COUNTERS ? geo.groups : GG_COL_SUM_COUNTERS;
    int64_t chunks = (4 * (int64_t)(sm_count > 0 ? sm_count : 1) + x - 1) / x;
    const int64_t rows_min = 8 * (int64_t)geo.lanes;
    const int64_t max_chunks = (M + rows_min - 1) / rows_min;
    if (chunks > max_chunks) chunks = max_chunks;
    if (chunks > 128) chunks = 128;
    return chunks < 1 ? 1 : (int)chunks;
}

template <typename Op, typename TOut>
cudaError_t launch_col_sum(const Op &op, int64_t M, int64_t N, int chunks, float *partials, unsigned *counters,
                           TOut *out, bool accumulate, cudaStream_t stream) {
    const ColSumGeometry geo = col_sum_geometry(N, Op::V);
    const int64_t rows = (M + chunks - 1) / chunks;
    const dim3 grid((unsigned)(geo.groups < GG_COL_SUM_COUNTERS ? geo.groups : GG_COL_SUM_COUNTERS), (unsigned)chunks);
    col_sum_kernel<Op, TOut><<<grid, kThreads, 0, stream>>>(op, M, N, rows, partials, counters, out, accumulate);
    return cudaGetLastError();
}

} // namespace gg

#endif
