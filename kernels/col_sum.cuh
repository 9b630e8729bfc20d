/* col_sum.cuh - the deterministic one-launch column sum over an [M,N] matrix, templated on how a row segment is
 * produced, so the same kernel sums a stored tensor (bias gradients of dY) or an elementwise result it computes
 * and stores on the way (GELU' then grad_bias1 = column sums of R, without reading R back).
 *
 * Geometry: a thread owns V consecutive columns (one 16-byte load of the input); a CTA covers a group of kThreads
 * columns with kThreads / V threads per row and V row lanes; its second index picks a chunk of rows. Each thread keeps
 * 4 rows of loads in flight. Per chunk the lanes are added in a fixed order into partials[chunk, N]; the last chunk
 * to finish a column group (counters[first index]) adds the chunks in order, one column per thread, 8 loads in
 * flight, and writes the result: the same bits on every run. Groups of kThreads columns keep that finish short
 * (measured: groups of up to 2048 columns made the finish a serial tail of up to 200 us).
 *
 * Op: struct with `static constexpr int V` and `__device__ void row(int64_t r, int64_t col, float (&v)[V]) const`
 * producing the V values of row r, columns col..col+V-1 (and storing whatever else it computes). A sum runs as its
 * own launch or in the first CTAs of another kernel (ColSumJob), so a small sum does not wait for SMs of its own. */
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

/* Row segments of a stored matrix: one 16-byte load of V elements, read once (streamed). */
template <typename T>
struct LoadRow;

template <>
struct LoadRow<float> {
    static constexpr int V = 4;
    const float *in;
    int64_t N;
    __device__ __forceinline__ void row(int64_t r, int64_t col, float (&v)[V]) const {
        const float4 x = __ldcs(reinterpret_cast<const float4 *>(in + r * N + col));
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    }
};

template <>
struct LoadRow<__nv_bfloat16> {
    static constexpr int V = 8;
    const __nv_bfloat16 *in;
    int64_t N;
    __device__ __forceinline__ void row(int64_t r, int64_t col, float (&v)[V]) const {
        const uint4 x = __ldcs(reinterpret_cast<const uint4 *>(in + r * N + col));
        const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&x);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = __bfloat162float(h[j]);
    }
};

__device__ __forceinline__ void store_sum(float *p, int64_t i, float v, bool acc) { p[i] = acc ? p[i] + v : v; }
__device__ __forceinline__ void store_sum(__nv_bfloat16 *p, int64_t i, float v, bool acc) {
    p[i] = __float2bfloat16_rn(acc ? __bfloat162float(p[i]) + v : v);
}

/* One column sum: op's rows summed into out by blocks() CTAs, gx column groups by gy row chunks. A job runs as its
 * own launch (col_sum_kernel) or rides along another kernel, whose first blocks() CTAs run it (col_sum_block). */
template <typename Op, typename TOut>
struct ColSumJob {
    Op op;
    int64_t M, N, rows_per_chunk;
    float *partials;
    unsigned *counters;
    TOut *out;
    bool accumulate;
    unsigned gx, gy;
    __host__ __device__ unsigned blocks() const { return gx * gy; }
};

template <typename Op, typename TOut>
ColSumJob<Op, TOut> col_sum_job(const Op &op, int64_t M, int64_t N, int chunks, float *partials, unsigned *counters,
                                TOut *out, bool accumulate) {
    const ColSumGeometry geo = col_sum_geometry(N, Op::V);
    const unsigned gx = (unsigned)(geo.groups < GG_COL_SUM_COUNTERS ? geo.groups : GG_COL_SUM_COUNTERS);
    return ColSumJob<Op, TOut>{op, M, N, (M + chunks - 1) / chunks, partials, counters, out, accumulate, gx,
                               (unsigned)chunks};
}

/* CTA (bx, by) of a job: column groups from bx (strided by gx), rows of chunk by. */
template <typename Op, typename TOut>
__device__ __forceinline__ void col_sum_block(const ColSumJob<Op, TOut> &job, unsigned bx, unsigned by) {
    constexpr int V = Op::V;
    __shared__ float lane_sums[kThreads * V];
    __shared__ bool is_last;
    const Op &op = job.op;
    const int64_t M = job.M, N = job.N;
    const ColSumGeometry geo = col_sum_geometry(N, V);
    const int lane = threadIdx.x / geo.threads_per_row, column = threadIdx.x % geo.threads_per_row;
    const int64_t r0 = (int64_t)by * job.rows_per_chunk;
    const int64_t r1 = r0 + job.rows_per_chunk < M ? r0 + job.rows_per_chunk : M;
    const int64_t step = geo.lanes;
    for (int64_t g = bx; g < geo.groups; g += job.gx) {
        const int64_t vec = g * geo.threads_per_row + column;
        float acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = 0.0f;
        if (vec < geo.vectors) {
            const int64_t col = vec * V;
            int64_t r = r0 + lane;
            for (; r + 3 * step < r1; r += 4 * step) { /* four rows of loads in flight, added in row order */
                float v0[V], v1[V], v2[V], v3[V];
                op.row(r, col, v0);
                op.row(r + step, col, v1);
                op.row(r + 2 * step, col, v2);
                op.row(r + 3 * step, col, v3);
#pragma unroll
                for (int j = 0; j < V; ++j) acc[j] += ((v0[j] + v1[j]) + (v2[j] + v3[j]));
            }
            for (; r < r1; r += step) {
                float v[V];
                op.row(r, col, v);
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
                job.partials[(int64_t)by * N + vec * V + j] = s;
            }
        }
        __syncthreads(); /* lane_sums is reused by the next group */
    }
    __threadfence(); /* this thread's partials are visible before the counter says so */
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&job.counters[bx], 1u) == job.gy - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const unsigned chunks = job.gy;
    for (int64_t g = bx; g < geo.groups; g += job.gx) {
        const int64_t col = g * kThreads + threadIdx.x; /* a group is kThreads columns: one per thread */
        if (col >= N) continue;
        float s = 0.0f;
        unsigned c = 0;
        for (; c + 8 <= chunks; c += 8) {
            float p[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) p[k] = __ldcg(&job.partials[(int64_t)(c + k) * N + col]);
#pragma unroll
            for (int k = 0; k < 8; ++k) s += p[k];
        }
        for (; c < chunks; ++c) s += __ldcg(&job.partials[(int64_t)c * N + col]);
        store_sum(job.out, col, s, job.accumulate);
    }
    if (threadIdx.x == 0) job.counters[bx] = 0; /* ready for the next launch */
}

template <typename Op, typename TOut>
__global__ void __launch_bounds__(kThreads) col_sum_kernel(ColSumJob<Op, TOut> job) {
    col_sum_block(job, blockIdx.x, blockIdx.y);
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

/* Two sums in one launch: the first b.blocks() CTAs run b, the rest a. */
template <typename OpA, typename TA, typename OpB, typename TB>
__global__ void __launch_bounds__(kThreads) col_sum_pair_kernel(ColSumJob<OpA, TA> a, ColSumJob<OpB, TB> b) {
    const unsigned i = blockIdx.x, nb = b.blocks();
    if (i < nb) col_sum_block(b, i % b.gx, i / b.gx);
    else col_sum_block(a, (i - nb) % a.gx, (i - nb) / a.gx);
}

template <typename Op, typename TOut>
cudaError_t launch_col_sum(const ColSumJob<Op, TOut> &job, cudaStream_t stream) {
    col_sum_kernel<Op, TOut><<<dim3(job.gx, job.gy), kThreads, 0, stream>>>(job);
    return cudaGetLastError();
}

} // namespace gg

#endif
