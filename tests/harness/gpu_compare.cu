/*
 * gpu_compare.cu - the tolerance comparison of an output (fp32 or bf16) with its float64 reference, on the GPU.
 *
 * Per element, as the spec's rule says, in fp32: out_f = float(out) (exact for bf16), ref_f = float(ref)
 * (round to nearest), diff = |out_f − ref_f| computed in fp32. The right-hand side is computed in double,
 * tol = atol + rtol · |ref_f|, and the element matches when (double)diff <= tol. (A float right-hand side, as
 * torch.isclose computes it, can differ from this one by an fp32 ulp of tol: only elements within an ulp of the
 * bound could be judged differently.)
 *   - out NaN/Inf: counted in `nonfinite`, never matched, and left out of max_abs_err and worst_ratio.
 *   - out finite: max_abs_err = max diff, worst_ratio = max diff / tol (0 when diff == 0, +Inf when tol == 0 and
 *     diff > 0). A nonfinite diff (ref NaN/Inf, or an fp32 overflow of the difference) does not match and sets
 *     both maxima to +Inf.
 * Reduction: per thread, warp shuffles, per block through shared memory, then one atomicAdd (counts) or atomicMax
 * (maxima) per block into `scratch`. The maxima are non-negative doubles (never NaN), whose IEEE bit patterns
 * order like unsigned 64-bit integers, so atomicMax on the bits is a max on the values. The result is the same on
 * every run (sums of integers, maxima).
 */
#include <cuda_runtime.h>
#include <string.h>

#include "gpu_common.cuh"

namespace {

/* Layout of `scratch`. */
struct CompareAccum {
    unsigned long long matched;
    unsigned long long nonfinite;
    unsigned long long max_abs_err_bits; /* bits of a non-negative double */
    unsigned long long worst_ratio_bits; /* bits of a non-negative double */
};
static_assert(sizeof(CompareAccum) <= 256, "gg_h_compare_scratch_bytes() is too small");

static double gg_h_bits_to_double(unsigned long long bits) {
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

__device__ __forceinline__ float gg_h_load_f32(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float gg_h_load_f32(const uint16_t *p, size_t i) { return gg_h_bf16_to_f32(p[i]); }

} // namespace

template <typename T>
__global__ void __launch_bounds__(GG_H_THREADS)
    gg_h_compare_kernel(const T *out, const double *ref, size_t n, double atol, double rtol, CompareAccum *acc) {
    unsigned long long matched = 0, nonfinite = 0;
    double max_abs = 0.0, worst = 0.0;
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) {
        float o = gg_h_load_f32(out, i);
        if (!isfinite(o)) {
            ++nonfinite;
            continue;
        }
        float r = __double2float_rn(ref[i]);
        double diff = (double)fabsf(o - r);
        double tol = atol + rtol * (double)fabsf(r);
        double ratio;
        if (!(diff <= 1.7976931348623157e308)) { /* NaN or Inf */
            diff = INFINITY;
            ratio = INFINITY;
        } else {
            if (diff <= tol) ++matched;
            ratio = diff == 0.0 ? 0.0 : diff / tol; /* tol > 0, or tol == 0 -> +Inf */
        }
        max_abs = fmax(max_abs, diff);
        worst = fmax(worst, ratio);
    }

    for (int off = 16; off > 0; off >>= 1) {
        matched += __shfl_down_sync(0xFFFFFFFFu, matched, off);
        nonfinite += __shfl_down_sync(0xFFFFFFFFu, nonfinite, off);
        max_abs = fmax(max_abs, __shfl_down_sync(0xFFFFFFFFu, max_abs, off));
        worst = fmax(worst, __shfl_down_sync(0xFFFFFFFFu, worst, off));
    }
    __shared__ unsigned long long sh_matched[GG_H_THREADS / 32], sh_nonfinite[GG_H_THREADS / 32];
    __shared__ double sh_max_abs[GG_H_THREADS / 32], sh_worst[GG_H_THREADS / 32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sh_matched[warp] = matched;
        sh_nonfinite[warp] = nonfinite;
        sh_max_abs[warp] = max_abs;
        sh_worst[warp] = worst;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < GG_H_THREADS / 32; ++w) {
            matched += sh_matched[w];
            nonfinite += sh_nonfinite[w];
            max_abs = fmax(max_abs, sh_max_abs[w]);
            worst = fmax(worst, sh_worst[w]);
        }
        if (matched) atomicAdd(&acc->matched, matched);
        if (nonfinite) atomicAdd(&acc->nonfinite, nonfinite);
        /* Non-negative doubles, +0 ... +Inf: unsigned order of the bits is the order of the values. */
        atomicMax(&acc->max_abs_err_bits, (unsigned long long)__double_as_longlong(max_abs));
        atomicMax(&acc->worst_ratio_bits, (unsigned long long)__double_as_longlong(worst));
    }
}

template <typename T>
static int gg_h_compare(const T *out, const double *ref, size_t n, double atol, double rtol, void *scratch,
                        gg_stream stream, gg_h_compare_result *result) {
    GG_H_REQUIRE(result != NULL);
    result->n = n;
    result->matched = 0;
    result->nonfinite = 0;
    result->max_abs_err = 0.0;
    result->worst_ratio = 0.0;
    GG_H_REQUIRE(atol >= 0.0 && rtol >= 0.0); /* also rejects NaN */
    if (n == 0) return 0;
    GG_H_REQUIRE(out != NULL && ref != NULL && scratch != NULL);

    cudaStream_t s = gg_h_stream(stream);
    CompareAccum *acc = (CompareAccum *)scratch;
    GG_H_CHECK(cudaMemsetAsync(acc, 0, sizeof(CompareAccum), s));
    int grid = 0;
    GG_H_CHECK(gg_h_grid(n, 8, &grid));
    gg_h_compare_kernel<T><<<grid, GG_H_THREADS, 0, s>>>(out, ref, n, atol, rtol, acc);
    GG_H_CHECK_LAUNCH();
    CompareAccum host;
    GG_H_CHECK(cudaMemcpyAsync(&host, acc, sizeof(host), cudaMemcpyDeviceToHost, s));
    GG_H_CHECK(cudaStreamSynchronize(s));

    result->matched = host.matched;
    result->nonfinite = host.nonfinite;
    result->max_abs_err = gg_h_bits_to_double(host.max_abs_err_bits);
    result->worst_ratio = gg_h_bits_to_double(host.worst_ratio_bits);
    return 0;
}

extern "C" size_t gg_h_compare_scratch_bytes(void) { return 256; }

extern "C" int gg_h_compare_f32(const float *out, const double *ref, size_t n, double atol, double rtol,
                                void *scratch, gg_stream stream, gg_h_compare_result *result) {
    return gg_h_compare(out, ref, n, atol, rtol, scratch, stream, result);
}

extern "C" int gg_h_compare_bf16(const uint16_t *out, const double *ref, size_t n, double atol, double rtol,
                                 void *scratch, gg_stream stream, gg_h_compare_result *result) {
    return gg_h_compare(out, ref, n, atol, rtol, scratch, stream, result);
}

/* Σ x² of a float64 tensor, for a tolerance that scales with the tensor's root mean square (the shape sweep's rule).
 * Summed with atomicAdd: the order, and so the last bits, may differ between runs. */
__global__ void __launch_bounds__(GG_H_THREADS) gg_h_sum_squares_kernel(const double *x, size_t n, double *acc) {
    double s = 0.0;
    for (size_t i = gg_h_tid(); i < n; i += gg_h_stride()) s += x[i] * x[i];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xFFFFFFFFu, s, off);
    if ((threadIdx.x & 31u) == 0) atomicAdd(acc, s);
}

extern "C" int gg_h_sum_squares_f64(const double *x, size_t n, void *scratch, gg_stream stream, double *result) {
    GG_H_REQUIRE(result != NULL);
    *result = 0.0;
    if (n == 0) return 0;
    GG_H_REQUIRE(x != NULL && scratch != NULL);
    cudaStream_t s = gg_h_stream(stream);
    double *acc = (double *)scratch;
    GG_H_CHECK(cudaMemsetAsync(acc, 0, sizeof *acc, s));
    int grid = 0;
    GG_H_CHECK(gg_h_grid(n, 8, &grid));
    gg_h_sum_squares_kernel<<<grid, GG_H_THREADS, 0, s>>>(x, n, acc);
    GG_H_CHECK_LAUNCH();
    GG_H_CHECK(cudaMemcpyAsync(result, acc, sizeof *result, cudaMemcpyDeviceToHost, s));
    GG_H_CHECK(cudaStreamSynchronize(s));
    return 0;
}
