/* activation_grad.cu - the elementwise gradient steps between the GEMMs: GELU(tanh)' for blocks 2 and 3, and the
 * gate-multiply chain of block 4 with its bf16 rounding after every op. */
#include <type_traits>

#include "col_sum.cuh"
#include "gelu.cuh"
#include "ssm_chain.cuh"

using namespace gg;

namespace {

/* The i-th four values of G, stored as fp32 or fp16 (the GEMMs' operand type in fp16 mode); `stream`: read once,
 * evict first (a ld.global.cs, not the read-only path: R is written over G). */
__device__ __forceinline__ float4 load4(const float *G, int64_t i, bool stream) {
    const float4 *p = reinterpret_cast<const float4 *>(G) + i;
    return stream ? __ldcs(p) : *p;
}
__device__ __forceinline__ float4 load4(const __half *G, int64_t i, bool stream) {
    const uint2 *p = reinterpret_cast<const uint2 *>(G) + i;
    const uint2 packed = stream ? __ldcs(p) : *p;
    const float2 lo = __half22float2(*reinterpret_cast<const __half2 *>(&packed.x));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2 *>(&packed.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ __forceinline__ void store4(float *R, int64_t i, float4 r) { reinterpret_cast<float4 *>(R)[i] = r; }
__device__ __forceinline__ void store4(__half *R, int64_t i, float4 r) {
    reinterpret_cast<uint2 *>(R)[i] = pack_half4(r);
}

/* R is the next GEMMs' operand (fp32, or fp16 in fp16 mode), usually written over G in place (G and R of one type);
 * so they are not __restrict__, and G is not read through the read-only cache path while R is written (each element
 * is read before the same thread writes it). G may also be fp32 with R an fp16 buffer of its own. x: fp32, or its
 * fp16 copy (TX). */
template <typename TG, typename TR, typename TX>
__global__ void __launch_bounds__(kThreads) gelu_grad_kernel(const TG *G, const TX *__restrict__ x, TR *R, int64_t n4,
                                                             unsigned *overflow) {
    bool past = false;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 g = load4(G, i, false), xv = load4(x, i, true); /* x read once (tma.cuh) */
        const float4 r = make_float4(g.x * gelu_grad<TR>(xv.x), g.y * gelu_grad<TR>(xv.y), g.z * gelu_grad<TR>(xv.z),
                                     g.w * gelu_grad<TR>(xv.w));
        if constexpr (std::is_same<TR, __half>::value) past |= past_half(r);
        store4(R, i, r);
    }
    if constexpr (std::is_same<TR, __half>::value) flag_overflow(overflow, past);
}

template <typename TG, typename TR, typename TX>
cudaError_t launch_gelu_grad(const TG *G, TR *R, const TX *x, size_t n, int sms, unsigned *overflow,
                             cudaStream_t stream) {
    const int64_t n4 = (int64_t)(n / 4); /* n is a multiple of 8: rows are */
    const int grid = grid_for((size_t)n4, sms, 16);
    gelu_grad_kernel<TG, TR, TX><<<grid, kThreads, 0, stream>>>(G, x, R, n4, overflow);
    return cudaGetLastError();
}

/* Block 3's GELU' as a column-sum row producer: computes R = G * gelu'(x) for four columns, stores it (over G, or
 * fp16 from an fp32 G) and hands the unrounded fp32 values to the column sum (grad_bias1), so R is never read back. */
template <typename TG, typename TR, typename TX>
struct GeluGradRow {
    static constexpr int V = 4;
    struct Raw {
        float4 g, x;
    };
    const TG *G;
    TR *R;
    const TX *x; /* fp32, or its fp16 copy */
    int64_t N;
    unsigned *overflow; /* set when an fp16 R is past fp16's range (col_sum's rows are not warp-uniform: no vote) */
    __device__ __forceinline__ Raw load(int64_t r, int64_t col) const {
        const int64_t i = r * N + col;
        /* In place: G read through R itself (one buffer for the compiler: read through a second pointer, which may
         * alias R, 073's kernel was 8 % slower when the rows' loads and stores were interleaved). */
        Raw a;
        if constexpr (std::is_same<TG, TR>::value) a.g = load4(R, i / 4, true);
        else a.g = load4(G, i / 4, true);
        a.x = load4(x, i / 4, true);
        return a;
    }
    __device__ __forceinline__ void use(int64_t r, int64_t col, const Raw &a, float (&v)[V]) const {
        const int64_t i = r * N + col;
        const float4 g = a.g, xv = a.x;
        const float xs[4] = {xv.x, xv.y, xv.z, xv.w}, gs[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = gs[j] * gelu_grad<TR>(xs[j]);
        const float4 out = make_float4(v[0], v[1], v[2], v[3]);
        if constexpr (std::is_same<TR, __half>::value)
            if (overflow && past_half(out)) atomicOr(overflow, 1u); /* a branch never taken while in range */
        store4(R, i / 4, out);
    }
};

/* On block 4's narrow launch two vectors a thread are in flight: eight 16-byte loads with the silu gate, as the
 * narrow conversion's (convert.cu). */
constexpr int kNarrowChainUnroll = 2;

/* Block 4's chain over n_vec vectors of eight elements. */
struct ChainArgs {
    const bf16x8 *g, *gate_activated, *ssm_output, *gate;
    bf16x8 *grad_ssm_output, *grad_gate;
    int64_t n_vec;
    int use_silu_gate;
    int discard_g; /* g is scratch that nothing reads after the chain: its L2 lines are dropped once read */
};

/* The chain on U vectors stride apart from v: every load of the U before the first store (16-byte loads into
 * registers: see ssm_chain8). `valid`: v is inside g (on the tail, a warp's last lanes may lie past its end).
 * Every lane of the warp calls this together (the callers' loops are warp-uniform), so that the discard below can
 * wait for all 32 lanes. */
template <int U>
__device__ __forceinline__ void chain_vectors(const ChainArgs &a, int64_t v, int64_t stride, bool valid) {
    bf16x8 g[U], ga[U], so[U], gt[U];
    if (valid) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t i = v + u * stride;
            g[u] = a.g[i];
            ga[u] = a.gate_activated[i];
            so[u] = a.ssm_output[i];
            if (a.use_silu_gate) gt[u] = a.gate[i];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            bf16x8 gs, gg;
            ssm_chain8(g[u], ga[u], so[u], gt[u], a.use_silu_gate != 0, gs, gg);
            a.grad_ssm_output[v + u * stride] = gs;
            a.grad_gate[v + u * stride] = gg;
        }
    }
    /* g's dirty lines, once read, are invalidated without their write-back (discard.global.L2): from a few thousand
     * tokens the phase after g allocates more than the L2 holds and is bound by the DRAM, so each write-back saved
     * is DRAM time. A discarded line's data is gone, so it may be dropped only once all eight lanes that read it
     * have their values: the whole warp waits here (every lane arrives: the loops are warp-uniform), then lane 8k
     * drops the 128-byte line of vectors 8k..8k+7, only whole lines inside g (the launcher checks g's 128-byte
     * alignment). A wait for the active lanes only is not enough: lanes of a diverged warp that have not loaded
     * their vectors yet would read a dropped line's stale DRAM bytes. */
    if (a.discard_g) {
        __syncwarp(0xffffffffu);
        if (valid) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int64_t i = v + u * stride;
                if ((i & 7) == 0 && i + 7 < a.n_vec)
                    asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(a.g + i) : "memory");
            }
        }
    }
}

/* Grid-stride over the vectors, U per thread in flight (the narrow launch's unroll; 1 on the wide grid). The loops
 * step a whole warp at a time (their conditions are the same on every lane), so no warp splits between the two. */
template <int Threads, int U>
__global__ void __launch_bounds__(Threads) ssm_gate_grad_kernel(ChainArgs a) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int lane = (int)(threadIdx.x & 31);
    int64_t warp_v = (int64_t)blockIdx.x * blockDim.x + (threadIdx.x - lane); /* the warp's lane 0 */
    if (U > 1)
        for (; warp_v + 31 + (U - 1) * stride < a.n_vec; warp_v += U * stride)
            chain_vectors<U>(a, warp_v + lane, stride, true);
    for (; warp_v < a.n_vec; warp_v += stride) chain_vectors<1>(a, warp_v + lane, stride, warp_v + lane < a.n_vec);
}

} // namespace

namespace {

/* The (G, R) type pairs gg_k_gelu_grad takes, x in fp32 or, where R is fp16 (fp16 mode), in fp16 too: fn(G, R, x)
 * with the typed pointers (only these combinations are instantiated). */
template <typename Fn>
cudaError_t by_types(const void *G, gg_dtype g_type, void *R, gg_dtype r_type, const void *x, gg_dtype x_type,
                     Fn fn) {
    const float *x32 = x_type == GG_DT_F32 ? static_cast<const float *>(x) : nullptr;
    const __half *x16 = x_type == GG_DT_F16 ? static_cast<const __half *>(x) : nullptr;
    const auto to_half = [&](auto g) {
        __half *r = static_cast<__half *>(R);
        return x16 ? fn(g, r, x16) : x32 ? fn(g, r, x32) : cudaErrorInvalidValue;
    };
    if (g_type == GG_DT_F16 && r_type == GG_DT_F16) return to_half(static_cast<const __half *>(G));
    if (g_type == GG_DT_F32 && r_type == GG_DT_F16) return to_half(static_cast<const float *>(G));
    if (g_type == GG_DT_F32 && r_type == GG_DT_F32 && x32)
        return fn(static_cast<const float *>(G), static_cast<float *>(R), x32);
    return cudaErrorInvalidValue;
}

} // namespace

extern "C" cudaError_t gg_k_gelu_grad(const void *G, gg_dtype g_type, void *R, gg_dtype r_type, const void *x,
                                      gg_dtype x_type, size_t n, int sm_count, unsigned *overflow,
                                      cudaStream_t stream) {
    return by_types(G, g_type, R, r_type, x, x_type, [&](auto g, auto r, auto xs) {
        return launch_gelu_grad(g, r, xs, n, sm_count, overflow, stream);
    });
}

extern "C" cudaError_t gg_k_gelu_grad_col_sum(const void *G, gg_dtype g_type, void *R, gg_dtype r_type,
                                              const void *x, gg_dtype x_type, int64_t M, int64_t N, int chunks,
                                              float *partials, unsigned *counters, float *col_sums, int accumulate,
                                              unsigned *overflow, cudaStream_t stream) {
    return by_types(G, g_type, R, r_type, x, x_type, [&](auto g, auto r, auto xs) {
        using TG = std::remove_const_t<std::remove_pointer_t<decltype(g)>>;
        using TR = std::remove_pointer_t<decltype(r)>;
        using TX = std::remove_const_t<std::remove_pointer_t<decltype(xs)>>;
        const GeluGradRow<TG, TR, TX> op{g, r, xs, N, overflow};
        return launch_col_sum(op, M, N, chunks, partials, counters, col_sums, accumulate != 0, stream);
    });
}

extern "C" cudaError_t gg_k_ssm_gate_grad(const uint16_t *g, const uint16_t *gate_activated,
                                          const uint16_t *ssm_output, const uint16_t *gate, uint16_t *grad_ssm_output,
                                          uint16_t *grad_gate, size_t n, int use_silu_gate, int sm_count,
                                          int narrow_ctas, int discard_g, cudaStream_t stream) {
    const ChainArgs a = {reinterpret_cast<const bf16x8 *>(g), reinterpret_cast<const bf16x8 *>(gate_activated),
                         reinterpret_cast<const bf16x8 *>(ssm_output), reinterpret_cast<const bf16x8 *>(gate),
                         reinterpret_cast<bf16x8 *>(grad_ssm_output), reinterpret_cast<bf16x8 *>(grad_gate),
                         (int64_t)(n / 8), use_silu_gate,
                         discard_g && reinterpret_cast<uintptr_t>(g) % 128 == 0};
    if (narrow_ctas > 0)
        ssm_gate_grad_kernel<kNarrowThreads, kNarrowChainUnroll><<<narrow_ctas, kNarrowThreads, 0, stream>>>(a);
    else
        ssm_gate_grad_kernel<kThreads, 1><<<grid_for((size_t)a.n_vec, sm_count, 16), kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}
