/* ssm_chain.cuh - block 4's elementwise chain on eight values, every step rounded to bf16 (the spec's order): shared
 * by the stand-alone chain kernel (activation_grad.cu) and the small-M fused kernel's epilogue (ssm_small.cu). */
#ifndef GG_SSM_CHAIN_CUH
#define GG_SSM_CHAIN_CUH

#include "vec.cuh"

namespace gg {

/* grad_ssm_output = bf16(g * gate_activated); a = bf16(g * ssm_output); grad_gate = a, or with the silu gate
 * bf16(a * bf16(s * bf16(1 + bf16(gate * bf16(1 - s))))), s = bf16(sigmoid(gate)). gate is read only with silu.
 * Pass registers, not references into global memory: bound to g[v] directly, the compiler split each 16-byte load
 * into 2-byte ones (the chain kernel 1.3x slower at M = 74432, session 15). */
__device__ __forceinline__ void ssm_chain8(const bf16x8 &g, const bf16x8 &gate_activated, const bf16x8 &ssm_output,
                                           const bf16x8 &gate, bool use_silu_gate, bf16x8 &grad_ssm_output,
                                           bf16x8 &grad_gate) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float gj = bf(g.v[j]);
        grad_ssm_output.v[j] = __float2bfloat16_rn(gj * bf(gate_activated.v[j]));
        const float a = rbf(gj * bf(ssm_output.v[j]));
        if (use_silu_gate) {
            const float z = bf(gate.v[j]);
            const float s = rbf(1.0f / (1.0f + expf(-z)));
            const float d = rbf(s * rbf(1.0f + rbf(z * rbf(1.0f - s))));
            grad_gate.v[j] = __float2bfloat16_rn(a * d);
        } else {
            grad_gate.v[j] = __float2bfloat16_rn(a);
        }
    }
}

} // namespace gg

#endif
