/* sum_ranks.cu - the arithmetic of the copy-engine gradient reduction (src/ddp/copy_engine.c): NCCL's copy
 * engines move the ranks' pieces (all-to-all), this kernel adds them. */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

/* out[i] = (T)(scale * sum_j in[j * chunk + i]), the terms added in fp32 in rank order (every rank's result for a
 * chunk is the bits of the one rank that computed it, so the order only has to be fixed): the form for any
 * alignment. */
template <typename T>
__global__ void sum_ranks_kernel(const T *__restrict__ in, T *__restrict__ out, size_t chunk, int ranks, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < chunk; i += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < ranks; ++j) acc += static_cast<float>(__ldcs(in + (size_t)j * chunk + i));
        out[i] = static_cast<T>(acc * scale);
    }
}

/* The 16-byte form: one vector load per rank and one store. */
template <typename T, typename Vec, int V>
__global__ void sum_ranks_vec_kernel(const Vec *__restrict__ in, Vec *__restrict__ out, size_t chunk_vecs, int ranks,
                                     float scale) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t s = (size_t)blockIdx.x * blockDim.x + threadIdx.x; s < chunk_vecs; s += stride) {
        float acc[V];
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = 0.0f;
        for (int j = 0; j < ranks; ++j) {
            Vec x = __ldcs(in + (size_t)j * chunk_vecs + s);
            const T *e = reinterpret_cast<const T *>(&x);
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] += static_cast<float>(e[v]);
        }
        Vec y;
        T *e = reinterpret_cast<T *>(&y);
#pragma unroll
        for (int v = 0; v < V; ++v) e[v] = static_cast<T>(acc[v] * scale);
        out[s] = y;
    }
}

template <typename T, typename Vec>
cudaError_t launch(const void *in, void *out, size_t chunk, int ranks, float scale, int sm_count, cudaStream_t stream) {
    constexpr int V = 16 / sizeof(T);
    const bool aligned = ((uintptr_t)in % 16 == 0) && ((uintptr_t)out % 16 == 0) && chunk % V == 0;
    if (aligned) {
        const size_t vecs = chunk / V;
        sum_ranks_vec_kernel<T, Vec, V><<<grid_for(vecs, sm_count, 4), kThreads, 0, stream>>>(
            static_cast<const Vec *>(in), static_cast<Vec *>(out), vecs, ranks, scale);
    } else {
        sum_ranks_kernel<T><<<grid_for(chunk, sm_count, 4), kThreads, 0, stream>>>(
            static_cast<const T *>(in), static_cast<T *>(out), chunk, ranks, scale);
    }
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t gg_k_sum_ranks(const void *in, void *out, gg_dtype type, size_t chunk, int ranks, float scale,
                                      int sm_count, cudaStream_t stream) {
    if (ranks < 1 || chunk == 0) return cudaErrorInvalidValue;
    switch (type) {
    case GG_DT_F32: return launch<float, float4>(in, out, chunk, ranks, scale, sm_count, stream);
    case GG_DT_BF16: return launch<__nv_bfloat16, uint4>(in, out, chunk, ranks, scale, sm_count, stream);
    default: return cudaErrorInvalidValue;
    }
}
