/* optim.cu - the fused optimizer step (optim_kernels.h): per chunk the sum of the squares of the unscaled
 * gradients; one CTA that adds those sums in a fixed order and sets the found-inf flag, the norm, the clipping
 * coefficient and the step counts; and the AdamW / SGD update of every chunk, one CTA each.
 *
 * Every fp32 operation of the update is an explicitly rounded intrinsic (__fmul_rn, __fadd_rn, ...), which the
 * compiler never contracts into a fused multiply-add: each step of docs/optimizer.md's formulas rounds once, in the
 * order written, whatever the compiler's flags. */
#include <math.h>

#include "optim_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

constexpr int kFinishThreads = 1024;
constexpr int kChunk = GG_K_OPTIM_CHUNK;

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) { return __uint_as_float(bits << 16); }

/* Gradient element i as fp32. */
__device__ __forceinline__ float load_grad(const void *g, int type, int64_t i) {
    if (type == GG_DT_BF16) return bf16_bits_to_float(static_cast<const uint16_t *>(g)[i]);
    return static_cast<const float *>(g)[i];
}

/* Gradient elements i .. i + 3 as fp32 (the vector path: i a multiple of 4, the pointer aligned for it). */
__device__ __forceinline__ float4 load_grad4(const void *g, int type, int64_t i) {
    if (type == GG_DT_BF16) {
        const uint2 raw = *reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(g) + i);
        return make_float4(bf16_bits_to_float(raw.x & 0xffffu), bf16_bits_to_float(raw.x >> 16),
                           bf16_bits_to_float(raw.y & 0xffffu), bf16_bits_to_float(raw.y >> 16));
    }
    return *reinterpret_cast<const float4 *>(static_cast<const float *>(g) + i);
}

/* x rounded to the copy's type (nearest even), as its bits. */
__device__ __forceinline__ uint16_t round_bits(float x, int type) {
    if (type == GG_DT_F16) return __half_as_ushort(__float2half_rn(x));
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ __forceinline__ void store_copy(void *copy, int type, int64_t i, float x) {
    static_cast<uint16_t *>(copy)[i] = round_bits(x, type);
}

__device__ __forceinline__ void store_copy4(void *copy, int type, int64_t i, float4 x) {
    const uint2 packed = make_uint2((uint32_t)round_bits(x.x, type) | (uint32_t)round_bits(x.y, type) << 16,
                                    (uint32_t)round_bits(x.z, type) | (uint32_t)round_bits(x.w, type) << 16);
    *reinterpret_cast<uint2 *>(static_cast<uint16_t *>(copy) + i) = packed;
}

/* A chunk's place: its parameter (and that parameter's index), first element and length. */
struct ChunkView {
    gg_k_optim_param p;
    int param;
    int64_t start;
    int len;
};

__device__ __forceinline__ ChunkView chunk_view(const gg_k_optim_param *params, const gg_k_optim_chunk *chunks) {
    const gg_k_optim_chunk c = chunks[blockIdx.x];
    ChunkView v;
    v.p = params[c.param];
    v.param = c.param;
    v.start = (int64_t)c.index * kChunk;
    const int64_t rest = v.p.count - v.start;
    v.len = rest < kChunk ? (int)rest : kChunk;
    return v;
}

/* The pointer to element `start` of a tensor of 2- or 4-byte elements. */
__device__ __forceinline__ const void *at(const void *base, int type, int64_t start) {
    return static_cast<const char *>(base) + start * (type == GG_DT_F32 ? 4 : 2);
}

__device__ __forceinline__ float unscale(float g, float inv_scale, float clip, bool clipping) {
    g = __fmul_rn(g, inv_scale);
    return clipping ? __fmul_rn(g, clip) : g;
}

/* ---- the gradients' sum of squares ---- */

__global__ void __launch_bounds__(kThreads) sum_squares_kernel(const gg_k_optim_param *__restrict__ params,
                                                               const gg_k_optim_chunk *__restrict__ chunks,
                                                               const gg_k_optim_scalars *__restrict__ s,
                                                               double *__restrict__ partials) {
    __shared__ double shared[kThreads / 32];
    const ChunkView c = chunk_view(params, chunks);
    const float inv = s->inv_scale;
    const void *g = at(c.p.grad, c.p.grad_type, c.start);
    double acc = 0.0;
    int done = 0;
    if (c.p.vec) {
        const int n4 = c.len / 4;
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 v = load_grad4(g, c.p.grad_type, 4 * (int64_t)i);
            const float u[4] = {__fmul_rn(v.x, inv), __fmul_rn(v.y, inv), __fmul_rn(v.z, inv), __fmul_rn(v.w, inv)};
#pragma unroll
            for (int k = 0; k < 4; ++k) acc += (double)u[k] * (double)u[k];
        }
        done = 4 * n4;
    }
    for (int i = done + threadIdx.x; i < c.len; i += blockDim.x) {
        const double u = __fmul_rn(load_grad(g, c.p.grad_type, i), inv);
        acc += u * u;
    }
    const double total = block_sum(acc, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

/* ---- the total, the flag, the coefficient, the step counts ---- */

__global__ void __launch_bounds__(kFinishThreads) finish_kernel(const double *__restrict__ partials, int n_partials,
                                                                float max_norm, int check_finite,
                                                                gg_k_optim_scalars *__restrict__ s,
                                                                int64_t *__restrict__ steps, int n_steps) {
    __shared__ double shared[kFinishThreads / 32];
    __shared__ unsigned found;
    if (n_partials > 0) {
        double acc = 0.0;
        for (int i = threadIdx.x; i < n_partials; i += blockDim.x) acc += partials[i];
        const double total = block_sum(acc, shared);
        if (threadIdx.x == 0) {
            const float norm = (float)sqrt(total);
            s->grad_norm = norm;
            if (max_norm > 0.0f) {
                const float coef = __fdiv_rn(max_norm, __fadd_rn(norm, 1e-6f));
                s->clip = coef > 1.0f ? 1.0f : coef; /* a NaN coefficient stays NaN, as torch's clamp keeps it */
            }
            found = check_finite && !isfinite(total);
        }
    } else if (threadIdx.x == 0) {
        found = 0;
    }
    if (threadIdx.x == 0) s->found_inf = found;
    __syncthreads();
    if (found) return;
    for (int i = threadIdx.x; i < n_steps; i += blockDim.x) steps[i] += 1;
}

/* ---- the update ---- */

/* AdamW's per-step constants, from the step number t (torch.optim.AdamW computes them in double on the host, then
 * hands them to its fp32 kernels). */
struct AdamW {
    float decay;         /* 1 - lr * weight_decay */
    float w, one_minus_w; /* lerp's weight 1 - beta1, and 1 - w for its second form */
    float beta2, one_minus_beta2;
    float bc2_sqrt;      /* sqrt(1 - beta2^t) */
    float eps;
    float neg_step_size; /* -lr / (1 - beta1^t) */
    bool decays;

    __device__ AdamW(const gg_k_optim_hyper &h, float lr, int64_t t, bool decays_) : decays(decays_) {
        const double b1 = h.beta1, b2 = h.beta2, td = (double)t;
        decay = (float)(1.0 - (double)lr * (double)h.weight_decay);
        w = (float)(1.0 - b1);
        one_minus_w = __fsub_rn(1.0f, w);
        beta2 = h.beta2;
        one_minus_beta2 = (float)(1.0 - b2);
        bc2_sqrt = (float)sqrt(1.0 - pow(b2, td));
        eps = h.eps;
        neg_step_size = (float)(-((double)lr / (1.0 - pow(b1, td))));
    }

    /* torch.optim.AdamW (foreach=False, amsgrad off): p *= 1 - lr wd; m = lerp(m, g, 1 - beta1);
     * v = v beta2 + (1 - beta2) g g; p += -step_size * m / (sqrt(v) / bc2_sqrt + eps). */
    __device__ __forceinline__ void operator()(float &p, float &m, float &v, float g) const {
        if (decays) p = __fmul_rn(p, decay);
        const float diff = __fsub_rn(g, m); /* torch's lerp: its two forms, by the weight */
        m = w < 0.5f ? __fadd_rn(m, __fmul_rn(w, diff)) : __fsub_rn(g, __fmul_rn(diff, one_minus_w));
        v = __fmul_rn(v, beta2);
        v = __fadd_rn(v, __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), bc2_sqrt), eps);
        p = __fadd_rn(p, __fmul_rn(neg_step_size, __fdiv_rn(m, denom)));
    }
};

/* SGD's per-step constants. */
struct Sgd {
    float weight_decay, momentum, one_minus_dampening, neg_lr;
    bool decays, has_momentum, nesterov, first;

    __device__ Sgd(const gg_k_optim_hyper &h, float lr, int64_t t, bool decays_) {
        weight_decay = h.weight_decay;
        momentum = h.momentum;
        one_minus_dampening = (float)(1.0 - (double)h.dampening);
        neg_lr = -lr;
        decays = decays_ && h.weight_decay != 0.0f;
        has_momentum = h.momentum != 0.0f;
        nesterov = h.nesterov != 0;
        first = t == 1;
    }

    /* torch.optim.SGD (foreach=False): g += wd p; buf = g on the first step, else buf = buf momentum +
     * (1 - dampening) g; g = g + momentum buf (Nesterov) or buf; p += -lr g. v is unused. */
    __device__ __forceinline__ void operator()(float &p, float &buf, float &v, float g) const {
        (void)v;
        if (decays) g = __fadd_rn(g, __fmul_rn(weight_decay, p));
        if (has_momentum) {
            buf = first ? g : __fadd_rn(__fmul_rn(buf, momentum), __fmul_rn(one_minus_dampening, g));
            g = nesterov ? __fadd_rn(g, __fmul_rn(momentum, buf)) : buf;
        }
        p = __fadd_rn(p, __fmul_rn(neg_lr, g));
    }
};

/* Updates one chunk with `step` (AdamW or Sgd). m and v may be NULL when the step does not use them. */
template <class Step>
__device__ __forceinline__ void update_chunk(const ChunkView &c, const Step &step, float inv, float clip,
                                             bool clipping) {
    float *p = c.p.param + c.start;
    float *m = c.p.m ? c.p.m + c.start : nullptr;
    float *v = c.p.v ? c.p.v + c.start : nullptr;
    const void *g = at(c.p.grad, c.p.grad_type, c.start);
    void *copy = c.p.copy ? static_cast<uint16_t *>(c.p.copy) + c.start : nullptr;
    int done = 0;
    if (c.p.vec) {
        const int n4 = c.len / 4;
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 pv = reinterpret_cast<const float4 *>(p)[i];
            float4 mv = m ? reinterpret_cast<const float4 *>(m)[i] : make_float4(0.f, 0.f, 0.f, 0.f);
            float4 vv = v ? reinterpret_cast<const float4 *>(v)[i] : make_float4(0.f, 0.f, 0.f, 0.f);
            const float4 gv = load_grad4(g, c.p.grad_type, 4 * (int64_t)i);
            step(pv.x, mv.x, vv.x, unscale(gv.x, inv, clip, clipping));
            step(pv.y, mv.y, vv.y, unscale(gv.y, inv, clip, clipping));
            step(pv.z, mv.z, vv.z, unscale(gv.z, inv, clip, clipping));
            step(pv.w, mv.w, vv.w, unscale(gv.w, inv, clip, clipping));
            reinterpret_cast<float4 *>(p)[i] = pv;
            if (m) reinterpret_cast<float4 *>(m)[i] = mv;
            if (v) reinterpret_cast<float4 *>(v)[i] = vv;
            if (copy) store_copy4(copy, c.p.copy_type, 4 * (int64_t)i, pv);
        }
        done = 4 * n4;
    }
    for (int i = done + threadIdx.x; i < c.len; i += blockDim.x) {
        float pe = p[i], me = m ? m[i] : 0.0f, ve = v ? v[i] : 0.0f;
        step(pe, me, ve, unscale(load_grad(g, c.p.grad_type, i), inv, clip, clipping));
        p[i] = pe;
        if (m) m[i] = me;
        if (v) v[i] = ve;
        if (copy) store_copy(copy, c.p.copy_type, i, pe);
    }
}

template <int Kind>
__global__ void __launch_bounds__(kThreads) update_kernel(const gg_k_optim_param *__restrict__ params,
                                                          const gg_k_optim_chunk *__restrict__ chunks,
                                                          const gg_k_optim_scalars *__restrict__ s,
                                                          const int64_t *__restrict__ steps, gg_k_optim_hyper h) {
    if (s->found_inf) return; /* a non-finite gradient somewhere: the whole step is skipped */
    const ChunkView c = chunk_view(params, chunks);
    const int64_t t = steps[c.param];
    const float lr = s->lr, inv = s->inv_scale, clip = s->clip;
    const bool clipping = h.clip != 0, decays = c.p.decay != 0;
    if (Kind == GG_K_OPTIM_ADAMW)
        update_chunk(c, AdamW(h, lr, t, decays), inv, clip, clipping);
    else
        update_chunk(c, Sgd(h, lr, t, decays), inv, clip, clipping);
}

__global__ void set_word_kernel(float *dst, float value) { *dst = value; }

} // namespace

extern "C" cudaError_t gg_k_optim_sum_squares(const gg_k_optim_param *params, const gg_k_optim_chunk *chunks,
                                              int n_chunks, const gg_k_optim_scalars *scalars, double *partials,
                                              cudaStream_t stream) {
    if (n_chunks < 1) return cudaErrorInvalidValue;
    sum_squares_kernel<<<(unsigned)n_chunks, kThreads, 0, stream>>>(params, chunks, scalars, partials);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_optim_finish(const double *partials, int n_partials, float max_norm, int check_finite,
                                         gg_k_optim_scalars *scalars, int64_t *steps, int n_steps,
                                         cudaStream_t stream) {
    finish_kernel<<<1, kFinishThreads, 0, stream>>>(partials, n_partials, max_norm, check_finite, scalars, steps,
                                                    n_steps);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_optim_update(const gg_k_optim_param *params, const gg_k_optim_chunk *chunks, int n_chunks,
                                         const gg_k_optim_scalars *scalars, const int64_t *steps,
                                         gg_k_optim_hyper hyper, cudaStream_t stream) {
    if (n_chunks < 1) return cudaErrorInvalidValue;
    if (hyper.kind == GG_K_OPTIM_ADAMW)
        update_kernel<GG_K_OPTIM_ADAMW><<<(unsigned)n_chunks, kThreads, 0, stream>>>(params, chunks, scalars, steps,
                                                                                     hyper);
    else
        update_kernel<GG_K_OPTIM_SGD><<<(unsigned)n_chunks, kThreads, 0, stream>>>(params, chunks, scalars, steps,
                                                                                   hyper);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_optim_set_word(float *dst, float value, cudaStream_t stream) {
    set_word_kernel<<<1, 1, 0, stream>>>(dst, value);
    return cudaGetLastError();
}
