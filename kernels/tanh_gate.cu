/* tanh_gate.cu - block 1 (tanh-gated residual add, backward): one memory-bound pass over the [M,H] tensors plus a
 * deterministic finish of the scalar gate gradient. */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

__global__ void __launch_bounds__(kThreads) tanh_gate_kernel(const bf16x8 *__restrict__ grad_output,
                                                             const __nv_bfloat16 *__restrict__ gate,
                                                             const bf16x8 *__restrict__ hidden_states,
                                                             const __nv_bfloat16 *__restrict__ mask,
                                                             bf16x8 *__restrict__ grad_residual,
                                                             bf16x8 *__restrict__ grad_hidden_states,
                                                             float *__restrict__ partials, int64_t n_vec,
                                                             int64_t vec_per_row) {
    __shared__ float shared[kThreads / 32];
    const float t = tanhf(bf(*gate));
    float acc = 0.0f;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < n_vec; v += (int64_t)gridDim.x * blockDim.x) {
        const bf16x8 go = grad_output[v];
        const bf16x8 hs = hidden_states[v];
        const float m = bf(mask[v / vec_per_row]);
        bf16x8 gh;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float g = bf(go.v[j]);
            gh.v[j] = __float2bfloat16_rn(rbf(g * t) * m);
            acc += g * rbf(bf(hs.v[j]) * m);
        }
        grad_residual[v] = go;
        grad_hidden_states[v] = gh;
    }
    const float block_total = block_sum(acc, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

__global__ void __launch_bounds__(kThreads) tanh_gate_finish_kernel(const float *__restrict__ partials, int count,
                                                                    const __nv_bfloat16 *__restrict__ gate,
                                                                    __nv_bfloat16 *__restrict__ grad_gate,
                                                                    bool accumulate) {
    __shared__ float shared[kThreads / 32];
    /* Each thread adds a fixed strided subset in double, then a fixed tree: the same bits on every run. */
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    const float total = block_sum((float)acc, shared);
    if (threadIdx.x == 0) {
        const float t = tanhf(bf(*gate));
        const float value = (1.0f - t * t) * total;
        *grad_gate = __float2bfloat16_rn(accumulate ? bf(*grad_gate) + value : value);
    }
}

} // namespace

extern "C" int gg_k_tanh_gate_grid(int64_t M, int64_t H, int sm_count) {
    return grid_for((size_t)(M * H / 8), sm_count, 8);
}

extern "C" cudaError_t gg_k_tanh_gate(const uint16_t *grad_output, const uint16_t *gate, const uint16_t *hidden_states,
                                      const uint16_t *mask, uint16_t *grad_residual, uint16_t *grad_hidden_states,
                                      float *partials, int grid_blocks, int64_t M, int64_t H, cudaStream_t stream) {
    tanh_gate_kernel<<<grid_blocks, kThreads, 0, stream>>>(
        reinterpret_cast<const bf16x8 *>(grad_output), reinterpret_cast<const __nv_bfloat16 *>(gate),
        reinterpret_cast<const bf16x8 *>(hidden_states), reinterpret_cast<const __nv_bfloat16 *>(mask),
        reinterpret_cast<bf16x8 *>(grad_residual), reinterpret_cast<bf16x8 *>(grad_hidden_states), partials,
        M * H / 8, H / 8);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_tanh_gate_finish(const float *partials, int count, const uint16_t *gate,
                                             uint16_t *grad_gate, int accumulate, cudaStream_t stream) {
    tanh_gate_finish_kernel<<<1, kThreads, 0, stream>>>(partials, count,
                                                        reinterpret_cast<const __nv_bfloat16 *>(gate),
                                                        reinterpret_cast<__nv_bfloat16 *>(grad_gate),
                                                        accumulate != 0);
    return cudaGetLastError();
}
