/* tanh_gate.cu - block 1 (tanh-gated residual add, backward): one memory-bound pass over the [M,H] tensors that
 * also finishes the scalar gate gradient deterministically, in a single launch. */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

/* One pass: each CTA takes whole rows (grid-stride), so the row's mask value is one broadcast load and no index is
 * divided; each thread loads two 16-byte vectors of each input before computing (4 loads in flight). The gate
 * gradient's partial sums go to partials[CTA]; the last CTA to finish (a counter, reset by that CTA) adds them in a
 * fixed order and writes the scalar: one launch, the same bits on every run. */
__global__ void __launch_bounds__(kThreads) tanh_gate_kernel(const bf16x8 *__restrict__ grad_output,
                                                             const __nv_bfloat16 *__restrict__ gate,
                                                             const bf16x8 *__restrict__ hidden_states,
                                                             const __nv_bfloat16 *__restrict__ mask,
                                                             bf16x8 *__restrict__ grad_residual,
                                                             bf16x8 *__restrict__ grad_hidden_states,
                                                             float *__restrict__ partials, unsigned *__restrict__ counter,
                                                             __nv_bfloat16 *__restrict__ grad_gate, int64_t rows,
                                                             int64_t vec_per_row, bool accumulate) {
    __shared__ float shared[kThreads / 32];
    __shared__ bool is_last;
    const float t = tanhf(bf(*gate));
    float acc = 0.0f;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float m = bf(mask[row]);
        const int64_t base = row * vec_per_row;
        for (int64_t v = threadIdx.x; v < vec_per_row; v += 2 * kThreads) {
            const bool second = v + kThreads < vec_per_row;
            bf16x8 go[2], hs[2];
            go[0] = grad_output[base + v];
            hs[0] = hidden_states[base + v];
            if (second) {
                go[1] = grad_output[base + v + kThreads];
                hs[1] = hidden_states[base + v + kThreads];
            }
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                if (k == 1 && !second) break;
                bf16x8 gh;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const float g = bf(go[k].v[j]);
                    gh.v[j] = __float2bfloat16_rn(rbf(g * t) * m);
                    acc += g * rbf(bf(hs[k].v[j]) * m);
                }
                grad_residual[base + v + k * kThreads] = go[k];
                grad_hidden_states[base + v + k * kThreads] = gh;
            }
        }
    }
    const float block_total = block_sum(acc, shared);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = block_total;
        __threadfence(); /* the partial is visible before the counter says so */
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    /* The last CTA: a fixed strided subset per thread in double, then a fixed tree. */
    double sum = 0.0;
    for (int i = threadIdx.x; i < (int)gridDim.x; i += kThreads) sum += __ldcg(&partials[i]);
    __syncthreads(); /* `shared` is reused */
    const float total = block_sum((float)sum, shared);
    if (threadIdx.x == 0) {
        const float value = (1.0f - t * t) * total;
        *grad_gate = __float2bfloat16_rn(accumulate ? bf(*grad_gate) + value : value);
        *counter = 0; /* ready for the next launch (stream order: no other launch of this context runs meanwhile) */
    }
}

} // namespace

extern "C" int gg_k_tanh_gate_grid(int64_t M, int sm_count) {
    /* One wave of resident CTAs (a second, partial wave would leave SMs idle at the end), at most one per row. */
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tanh_gate_kernel, kThreads, 0) != cudaSuccess || per_sm < 1)
        per_sm = 4;
    const int64_t cap = (int64_t)per_sm * (sm_count > 0 ? sm_count : 1);
    return (int)(M < cap ? M : cap);
}

extern "C" cudaError_t gg_k_tanh_gate(const uint16_t *grad_output, const uint16_t *gate, const uint16_t *hidden_states,
                                      const uint16_t *mask, uint16_t *grad_residual, uint16_t *grad_hidden_states,
                                      float *partials, unsigned *counter, uint16_t *grad_gate, int accumulate,
                                      int grid_blocks, int64_t M, int64_t H, cudaStream_t stream) {
    tanh_gate_kernel<<<grid_blocks, kThreads, 0, stream>>>(
        reinterpret_cast<const bf16x8 *>(grad_output), reinterpret_cast<const __nv_bfloat16 *>(gate),
        reinterpret_cast<const bf16x8 *>(hidden_states), reinterpret_cast<const __nv_bfloat16 *>(mask),
        reinterpret_cast<bf16x8 *>(grad_residual), reinterpret_cast<bf16x8 *>(grad_hidden_states), partials, counter,
        reinterpret_cast<__nv_bfloat16 *>(grad_gate), M, H / 8, accumulate != 0);
    return cudaGetLastError();
}
