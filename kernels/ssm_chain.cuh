/* ssm_chain.cuh - block 4's elementwise chain on eight values, every step rounded to bf16 (the spec's order): shared
 * by the stand-alone chain kernel (activation_grad.cu) and the small-M fused kernel's epilogue (ssm_small.cu). */
#ifndef GG_SSM_CHAIN_CUH
#define GG_SSM_CHAIN_CUH

#include "vec.cuh"

namespace gg {

/* Pair j (values 2j, 2j+1) of eight bf16 values. */
__device__ __forceinline__ __nv_bfloat162 pair(const bf16x8 &x, int j) {
    return reinterpret_cast<const __nv_bfloat162 *>(x.v)[j];
}
__device__ __forceinline__ void set_pair(bf16x8 &x, int j, __nv_bfloat162 p) {
    reinterpret_cast<__nv_bfloat162 *>(x.v)[j] = p;
}

/* sigmoid(z) in fp32 from the fast exponential and division. Rounded to bf16 it equals the exactly rounded sigmoid
 * for every bf16 z above -87.5 and is 0 below, where the sigmoid is subnormal (checked over all 65280 finite bf16
 * values; the accurate fp32 form is 0 from -89). */
__device__ __forceinline__ float fast_sigmoid(float z) { return __fdividef(1.0f, 1.0f + __expf(-z)); }

/* On a pair of values: grad_ssm_output = bf16(g * gate_activated); a = bf16(g * ssm_output); grad_gate = a, or
 * with the silu gate bf16(a * bf16(s * bf16(1 + bf16(gate * bf16(1 - s))))), s = bf16(sigmoid(gate)). gate is read
 * only with silu.
 * Each step is one bf16x2 multiply, add or subtract, rounded once to bf16 (nearest even): the spec's rounding,
 * since a product of two bf16 values is exact in fp32 and the sums here are too (or round to 1 both ways), so
 * rounding through fp32 first gives the same bf16. The _rn forms, because they are never contracted: plain __hmul2
 * and __hadd2 may fuse into one FMA that skips a rounding (then 1 % of grad_gate failed at atol 1e-5). About 10
 * instructions per element, where the fp32 form with accurate expf and division took ~45: few enough for the chain
 * to run at copy speed on the few SMs a GEMM leaves free.
 * Pass registers, not references into global memory: bound to g[v] directly, the compiler splits each 16-byte load
 * into 2-byte ones. */
__device__ __forceinline__ void ssm_chain2(__nv_bfloat162 g, __nv_bfloat162 gate_activated,
                                           __nv_bfloat162 ssm_output, __nv_bfloat162 gate, bool use_silu_gate,
                                           __nv_bfloat162 &grad_ssm_output, __nv_bfloat162 &grad_gate) {
    const __nv_bfloat162 one = __float2bfloat162_rn(1.0f);
    grad_ssm_output = __hmul2_rn(g, gate_activated);
    const __nv_bfloat162 a = __hmul2_rn(g, ssm_output);
    if (use_silu_gate) {
        const float2 zf = __bfloat1622float2(gate);
        const __nv_bfloat162 s = __floats2bfloat162_rn(fast_sigmoid(zf.x), fast_sigmoid(zf.y));
        const __nv_bfloat162 d = __hmul2_rn(s, __hadd2_rn(one, __hmul2_rn(gate, __hsub2_rn(one, s))));
        grad_gate = __hmul2_rn(a, d);
    } else {
        grad_gate = a;
    }
}

/* ssm_chain2 on eight values (four pairs). */
__device__ __forceinline__ void ssm_chain8(const bf16x8 &g, const bf16x8 &gate_activated, const bf16x8 &ssm_output,
                                           const bf16x8 &gate, bool use_silu_gate, bf16x8 &grad_ssm_output,
                                           bf16x8 &grad_gate) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        __nv_bfloat162 gs, gg;
        ssm_chain2(pair(g, j), pair(gate_activated, j), pair(ssm_output, j), pair(gate, j), use_silu_gate, gs, gg);
        set_pair(grad_ssm_output, j, gs);
        set_pair(grad_gate, j, gg);
    }
}

} // namespace gg

#endif
