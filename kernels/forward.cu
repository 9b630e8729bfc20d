/* forward.cu - the elementwise steps of the blocks' forward passes: block 1 whole, blocks 2/3's GELU(tanh) after
 * their first GEMM (when cuBLASLt's epilogue does not run it), block 4's gate and product before its GEMM. All
 * memory-bound grid-stride passes over 16-byte vectors. */
#include "gelu.cuh"
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

/* Block 1: output = bf16(residual + bf16(bf16(t * hs) * mask[row])), t = tanh(gate) in fp32. vec_per_row 16-byte
 * vectors a row; the row of vector i is one division (a memory-bound pass has the cycles). */
__global__ void __launch_bounds__(kThreads) tanh_gate_fwd_kernel(const bf16x8 *__restrict__ residual,
                                                                 const __nv_bfloat16 *__restrict__ gate,
                                                                 const bf16x8 *__restrict__ hidden_states,
                                                                 const __nv_bfloat16 *__restrict__ mask,
                                                                 bf16x8 *__restrict__ output, int64_t n_vec,
                                                                 int64_t vec_per_row) {
    const float t = tanhf(bf(*gate));
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
        const bf16x8 r = residual[i], h = hidden_states[i];
        const float m = bf(mask[i / vec_per_row]);
        bf16x8 o;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            o.v[j] = __float2bfloat16_rn(bf(r.v[j]) + rbf(rbf(t * bf(h.v[j])) * m));
        output[i] = o;
    }
}

/* Blocks 2/3: from the pre-activation x (fp32), any of act = gelu_tanh(x) (fp32), tanh_inner (fp32) and act's fp16
 * copy (fp16 mode's operand of the second GEMM; values past fp16's range set *overflow). tanhf, not the one-
 * instruction tanh of the backward's fp16 path: these are saved activations, read back by the backward as they are. */
__global__ void __launch_bounds__(kThreads) gelu_fwd_kernel(const float4 *__restrict__ x, float4 *__restrict__ act,
                                                            float4 *__restrict__ tanh_inner, uint2 *__restrict__ act16,
                                                            int64_t n4, unsigned *overflow) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    bool past = false;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = x[i];
        const float xs[4] = {v.x, v.y, v.z, v.w};
        float t[4], a[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            t[j] = tanhf(kGeluC * (xs[j] + kGeluA * xs[j] * xs[j] * xs[j]));
            a[j] = 0.5f * xs[j] * (1.0f + t[j]);
        }
        const float4 a4 = make_float4(a[0], a[1], a[2], a[3]);
        if (act) act[i] = a4;
        if (tanh_inner) tanh_inner[i] = make_float4(t[0], t[1], t[2], t[3]);
        if (act16) {
            past |= past_half(a4);
            act16[i] = pack_half4(a4);
        }
    }
    flag_overflow(overflow, past);
}

/* Block 4: gate_activated = bf16(silu(gate)) (fp32, one rounding) or gate; gated = bf16(ssm_output * gate_activated)
 * (the product of two bf16 values is exact in fp32: one rounding either way). */
__global__ void __launch_bounds__(kThreads) ssm_gate_fwd_kernel(const bf16x8 *__restrict__ ssm_output,
                                                                const bf16x8 *__restrict__ gate,
                                                                bf16x8 *__restrict__ gate_activated,
                                                                bf16x8 *__restrict__ gated_output, int64_t n_vec,
                                                                bool use_silu_gate) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
        const bf16x8 s = ssm_output[i], z = gate[i];
        bf16x8 a, g;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float zf = bf(z.v[j]);
            /* z / (1 + e^-z): for z below about -88 e^-z is Inf and the quotient -0, silu's limit */
            a.v[j] = use_silu_gate ? __float2bfloat16_rn(zf / (1.0f + expf(-zf))) : z.v[j];
            g.v[j] = __float2bfloat16_rn(bf(s.v[j]) * bf(a.v[j]));
        }
        gate_activated[i] = a;
        gated_output[i] = g;
    }
}

} // namespace

extern "C" cudaError_t gg_k_tanh_gate_forward(const uint16_t *residual, const uint16_t *gate,
                                              const uint16_t *hidden_states, const uint16_t *mask, uint16_t *output,
                                              int64_t M, int64_t H, int sm_count, cudaStream_t stream) {
    const int64_t vec_per_row = H / 8, n_vec = M * vec_per_row;
    const int grid = grid_for((size_t)n_vec, sm_count, 16);
    tanh_gate_fwd_kernel<<<grid, kThreads, 0, stream>>>(
        reinterpret_cast<const bf16x8 *>(residual), reinterpret_cast<const __nv_bfloat16 *>(gate),
        reinterpret_cast<const bf16x8 *>(hidden_states), reinterpret_cast<const __nv_bfloat16 *>(mask),
        reinterpret_cast<bf16x8 *>(output), n_vec, vec_per_row);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_gelu_forward(const float *x, float *act, float *tanh_inner, void *act16, size_t n,
                                         int sm_count, unsigned *overflow, cudaStream_t stream) {
    const int64_t n4 = (int64_t)(n / 4); /* n is a multiple of 8: rows are */
    const int grid = grid_for((size_t)n4, sm_count, 16);
    gelu_fwd_kernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const float4 *>(x), reinterpret_cast<float4 *>(act),
                                                   reinterpret_cast<float4 *>(tanh_inner), static_cast<uint2 *>(act16),
                                                   n4, act16 ? overflow : nullptr);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_ssm_gate_forward(const uint16_t *ssm_output, const uint16_t *gate,
                                             uint16_t *gate_activated, uint16_t *gated_output, size_t n,
                                             int use_silu_gate, int sm_count, cudaStream_t stream) {
    const int64_t n_vec = (int64_t)(n / 8); /* n is a multiple of 8: rows are */
    const int grid = grid_for((size_t)n_vec, sm_count, 16);
    ssm_gate_fwd_kernel<<<grid, kThreads, 0, stream>>>(
        reinterpret_cast<const bf16x8 *>(ssm_output), reinterpret_cast<const bf16x8 *>(gate),
        reinterpret_cast<bf16x8 *>(gate_activated), reinterpret_cast<bf16x8 *>(gated_output), n_vec,
        use_silu_gate != 0);
    return cudaGetLastError();
}
