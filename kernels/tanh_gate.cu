/* tanh_gate.cu - block 1 (tanh-gated residual add, backward): one memory-bound pass over the [M,H] tensors that
 * also finishes the scalar gate gradient deterministically, in a single launch. */
#include "gg_kernels.h"
#include "vec.cuh"

#include <cuda/atomic>

using namespace gg;

namespace {

/* A partial sum no CTA has stored yet: a NaN bit pattern (a partial that happens to have it is stored as another
 * NaN), so the finishing CTA can tell a stored partial from an old slot without a memory fence. */
constexpr unsigned kUnwritten = 0xffffffffu;
constexpr int kFinishLoads = 8; /* partials each thread of the finishing CTA has in flight */

__device__ __forceinline__ unsigned load_slot(unsigned *slot) {
    return cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*slot).load(cuda::memory_order_relaxed);
}
__device__ __forceinline__ void store_slot(unsigned *slot, unsigned bits) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*slot).store(bits, cuda::memory_order_relaxed);
}

/* A thread's unit of work: two 16-byte vectors of each input (columns v and v + kThreads of one row, the second
 * only if the row has it) and the row's mask value, loaded together. */
struct RowSlice {
    bf16x8 go[2], hs[2];
    float mask;
    bool valid, second;
};

/* Issues the loads of the slice at (row, v); nothing waits for them until the slice is used. */
__device__ __forceinline__ RowSlice load_slice(const bf16x8 *__restrict__ grad_output,
                                               const bf16x8 *__restrict__ hidden_states,
                                               const __nv_bfloat16 *__restrict__ mask, int64_t rows,
                                               int64_t vec_per_row, int64_t row, int64_t v) {
    RowSlice s;
    s.valid = row < rows && v < vec_per_row;
    s.second = s.valid && v + kThreads < vec_per_row;
    if (!s.valid) return s;
    const int64_t i = row * vec_per_row + v;
    s.mask = bf(mask[row]);
    s.go[0] = grad_output[i];
    s.hs[0] = hidden_states[i];
    if (s.second) {
        s.go[1] = grad_output[i + kThreads];
        s.hs[1] = hidden_states[i + kThreads];
    }
    return s;
}

/* The slice after (row, v) in this thread's order: the next vector pair of the row, else the CTA's next row
 * (grid-stride, whole rows per CTA: the row's mask value is one broadcast load and no index is divided). */
__device__ __forceinline__ void next_slice(int64_t vec_per_row, int64_t &row, int64_t &v) {
    v += 2 * kThreads;
    if (v >= vec_per_row) {
        v = threadIdx.x;
        row += gridDim.x;
    }
}

/* One pass. Each thread keeps two slices in flight: the next slice's loads are issued before the current one is
 * computed and stored, and the first slice's loads before the gate's tanh, so no load waits for the scalar gate
 * (measured faster at every M: docs/decisions.md). The gate gradient's
 * partial sums go to partials[CTA]; the last CTA to count itself done (a counter it resets) adds them in a fixed
 * order and writes the scalar: one launch, the same bits on every run (each thread adds its slices in its fixed
 * order, rows ascending).
 * No fence between a CTA's partial and its count (a fence waits for all the CTA's output stores: measured 0.5 us
 * per launch, 10 % of the small cases): the last CTA instead waits until each slot holds a stored partial, which
 * every counted CTA has already issued, and marks the slots unwritten again for the next launch. */
__global__ void __launch_bounds__(kThreads) tanh_gate_kernel(const bf16x8 *__restrict__ grad_output,
                                                             const __nv_bfloat16 *__restrict__ gate,
                                                             const bf16x8 *__restrict__ hidden_states,
                                                             const __nv_bfloat16 *__restrict__ mask,
                                                             bf16x8 *__restrict__ grad_residual,
                                                             bf16x8 *__restrict__ grad_hidden_states,
                                                             unsigned *__restrict__ partials,
                                                             unsigned *__restrict__ counter,
                                                             __nv_bfloat16 *__restrict__ grad_gate, int64_t rows,
                                                             int64_t vec_per_row, bool accumulate) {
    __shared__ float shared[kThreads / 32];
    __shared__ bool is_last;
    const __nv_bfloat16 gate_value = *gate;
    int64_t row = blockIdx.x, v = threadIdx.x;
    RowSlice cur = load_slice(grad_output, hidden_states, mask, rows, vec_per_row, row, v);
    const float t = tanhf(bf(gate_value));
    float acc = 0.0f;
    while (cur.valid) {
        const int64_t base = row * vec_per_row + v;
        next_slice(vec_per_row, row, v);
        const RowSlice next = load_slice(grad_output, hidden_states, mask, rows, vec_per_row, row, v);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            if (k == 1 && !cur.second) break;
            bf16x8 gh;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float g = bf(cur.go[k].v[j]);
                gh.v[j] = __float2bfloat16_rn(rbf(g * t) * cur.mask);
                acc += g * rbf(bf(cur.hs[k].v[j]) * cur.mask);
            }
            grad_residual[base + k * kThreads] = cur.go[k];
            grad_hidden_states[base + k * kThreads] = gh;
        }
        cur = next;
    }
    const float block_total = block_sum(acc, shared);
    if (threadIdx.x == 0) {
        const unsigned bits = __float_as_uint(block_total);
        store_slot(&partials[blockIdx.x], bits == kUnwritten ? 0x7fffffffu : bits); /* a NaN, never the marker */
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    /* The last CTA: per thread a fixed strided subset of the slots in index order (kFinishLoads loads in flight),
     * added in double, then a fixed tree. */
    const int n = (int)gridDim.x;
    double sum = 0.0;
    for (int first = threadIdx.x; first < n; first += kFinishLoads * kThreads) {
        unsigned bits[kFinishLoads];
#pragma unroll
        for (int k = 0; k < kFinishLoads; ++k) {
            const int i = first + k * kThreads;
            bits[k] = i < n ? load_slot(&partials[i]) : 0u;
        }
#pragma unroll
        for (int k = 0; k < kFinishLoads; ++k) {
            const int i = first + k * kThreads;
            if (i >= n) break;
            while (bits[k] == kUnwritten) { /* stored by a counted CTA, still on its way */
                __nanosleep(32);
                bits[k] = load_slot(&partials[i]);
            }
            sum += (double)__uint_as_float(bits[k]);
            store_slot(&partials[i], kUnwritten);
        }
    }
    const float total = block_sum((float)sum, shared);
    if (threadIdx.x == 0) {
        const float value = (1.0f - t * t) * total;
        *grad_gate = __float2bfloat16_rn(accumulate ? bf(*grad_gate) + value : value);
        *counter = 0; /* ready for the next launch (stream order: no other launch of this context runs meanwhile) */
    }
}

} // namespace

/* CTAs per SM at most: an SM holds 2048 threads (sm_80 to sm_100). */
constexpr int kMaxPerSm = 2048 / kThreads;

extern "C" int gg_k_tanh_gate_slots(int sm_count) { return kMaxPerSm * (sm_count > 0 ? sm_count : 1); }

extern "C" int gg_k_tanh_gate_grid(int64_t M, int sm_count) {
    /* One wave of resident CTAs (a second, partial wave would leave SMs idle at the end), at most one per row. */
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tanh_gate_kernel, kThreads, 0) != cudaSuccess) {
        (void)cudaGetLastError(); /* handled here: the launch's check after it must not take it for its own */
        per_sm = 0;
    }
    if (per_sm < 1) per_sm = 4;
    if (per_sm > kMaxPerSm) per_sm = kMaxPerSm; /* within gg_k_tanh_gate_slots */
    const int64_t cap = (int64_t)per_sm * (sm_count > 0 ? sm_count : 1);
    return (int)(M < cap ? M : cap);
}

extern "C" cudaError_t gg_k_tanh_gate(const uint16_t *grad_output, const uint16_t *gate, const uint16_t *hidden_states,
                                      const uint16_t *mask, uint16_t *grad_residual, uint16_t *grad_hidden_states,
                                      unsigned *partials, unsigned *counter, uint16_t *grad_gate, int accumulate,
                                      int grid_blocks, int64_t M, int64_t H, cudaStream_t stream) {
    tanh_gate_kernel<<<grid_blocks, kThreads, 0, stream>>>(
        reinterpret_cast<const bf16x8 *>(grad_output), reinterpret_cast<const __nv_bfloat16 *>(gate),
        reinterpret_cast<const bf16x8 *>(hidden_states), reinterpret_cast<const __nv_bfloat16 *>(mask),
        reinterpret_cast<bf16x8 *>(grad_residual), reinterpret_cast<bf16x8 *>(grad_hidden_states), partials, counter,
        reinterpret_cast<__nv_bfloat16 *>(grad_gate), M, H / 8, accumulate != 0);
    return cudaGetLastError();
}
