/* gelu.cuh - GELU(tanh)'s constants and derivative, one definition for every kernel that computes them (the
 * forward's GELU, block 2's gelu' pass and block 3's gelu' with its column sums). */
#ifndef GG_GELU_CUH
#define GG_GELU_CUH

#include <cuda_fp16.h>
#include <type_traits>

namespace gg {

constexpr float kGeluC = 0.7978845608028654f; /* sqrt(2/pi) */
constexpr float kGeluA = 0.044715f;

/* tanh in one instruction (tanh.approx.f32: relative error about 2^-11, the size of an fp16 rounding). */
__device__ __forceinline__ float tanh_approx(float u) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return t;
}

/* d gelu_tanh(x) / dx, with T = tanh(c (x + a x^3)) computed here: block 2's saved tanh_inner is the same value
 * (the forward computed it so), and reading it costs more than the tanh (068 3 % faster recomputed).
 * TR: the type R is written in. In fp16 (fp16 mode), whose rounding is as coarse as tanh_approx's error, the tanh
 * is tanh_approx (073 -1.2 %, 068 -0.5 %; the tests' worst err/tol in 068's fp16 mode 1.037 -> 1.065:
 * docs/decisions.md); else tanhf. */
template <typename TR>
__device__ __forceinline__ float gelu_grad(float x) {
    const float u = kGeluC * (x + kGeluA * x * x * x);
    const float T = std::is_same<TR, __half>::value ? tanh_approx(u) : tanhf(u);
    return 0.5f * (1.0f + T) + 0.5f * x * (1.0f - T * T) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

} // namespace gg

#endif
