/*
 * gpu_harness.h - device-side helpers for the GPU tests and the benchmark: random test data made on the GPU,
 * NaN poisoning, a float64 reference of each block computed on the GPU, and the tolerance comparison.
 * Implemented in CUDA (the .cu files in tests/harness) behind this C interface. All pointers are device pointers;
 * every function enqueues on `stream` and returns a cudaError_t value (0 = success) as int, except where noted.
 */
#ifndef GG_GPU_HARNESS_H
#define GG_GPU_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "gradgraph.h" /* gg_stream */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data ---- */
/* out[i] = scale * N(0,1), from a counter-based generator keyed by (seed, i): same seed, same data. */
int gg_h_fill_normal_f32(float *out, size_t n, float scale, uint64_t seed, gg_stream stream);
int gg_h_fill_normal_bf16(uint16_t *out, size_t n, float scale, uint64_t seed, gg_stream stream);
/* Every element NaN (fp32 quiet NaN / bf16 0x7FC0), so an unwritten output fails the comparison. */
int gg_h_poison_f32(float *out, size_t n, gg_stream stream);
int gg_h_poison_bf16(uint16_t *out, size_t n, gg_stream stream);
/* Block 2's consistent forward: linear1_out = hs @ W1ᵀ (computed in double, stored fp32), then elementwise
 * tanh_inner = tanh(c (x + 0.044715 x^3)), gelu_out = 0.5 x (1 + tanh_inner), from the stored fp32 x.
 * hs [M,D], w1 [F,D]; outputs [M,F]. Uses a cuBLAS handle created and destroyed inside (tests only). */
int gg_h_gelu_ffn_forward(int64_t M, int64_t D, int64_t F, const float *hs, const float *w1, float *linear1_out,
                          float *tanh_inner, float *gelu_out, gg_stream stream);

/* ---- float64 references on the GPU: the same definitions as tests/ref/gg_ref.h, outputs double on device. ----
 * Each needs a cuBLAS handle (cublasHandle_t, passed as void*) for its fp64 GEMMs, and double scratch `work` of at
 * least gg_h_ref_*_work_doubles(...) elements. */
size_t gg_h_ref_gelu_ffn_work_doubles(int64_t M, int64_t D, int64_t F);
size_t gg_h_ref_mlp_work_doubles(int64_t M, int64_t D, int64_t F);
size_t gg_h_ref_ssm_gate_work_doubles(int64_t M, int64_t H, int64_t E);
size_t gg_h_ref_tanh_gate_work_doubles(int64_t M, int64_t H);

int gg_h_ref_tanh_gate(void *cublas, int64_t M, int64_t H, const uint16_t *grad_output, const uint16_t *gate,
                       const uint16_t *hidden_states, const uint16_t *mask, double *grad_residual,
                       double *grad_hidden_states, double *grad_gate, double *work, gg_stream stream);
int gg_h_ref_gelu_ffn(void *cublas, int64_t M, int64_t D, int64_t F, const float *grad_output,
                      const float *hidden_states, const float *weight1, const float *weight2,
                      const float *linear1_out, const float *tanh_inner, const float *gelu_out,
                      double *grad_hidden_states, double *grad_weight1, double *grad_weight2, double *work,
                      gg_stream stream);
int gg_h_ref_mlp(void *cublas, int64_t M, int64_t D, int64_t F, const float *grad_output, const float *hidden_states,
                 const float *weight1, const float *weight2, const float *intermediate,
                 const float *intermediate_activated, double *grad_hidden_states, double *grad_weight1,
                 double *grad_bias1, double *grad_weight2, double *grad_bias2, double *work, gg_stream stream);
int gg_h_ref_ssm_gate(void *cublas, int64_t M, int64_t H, int64_t E, int use_silu_gate, const uint16_t *grad_output,
                      const uint16_t *ssm_output, const uint16_t *gate, const uint16_t *weight,
                      const uint16_t *gate_activated, const uint16_t *gated_output, double *grad_ssm_output,
                      double *grad_gate, double *grad_weight, double *grad_bias, double *work, gg_stream stream);

/* ---- comparison ---- */
typedef struct gg_h_compare_result {
    uint64_t n;           /* elements compared */
    uint64_t matched;     /* |out - ref| <= atol + rtol |ref| (compared in fp32 as the rule says) */
    uint64_t nonfinite;   /* NaN or Inf in out */
    double max_abs_err;   /* over finite elements */
    double worst_ratio;   /* max over elements of |out - ref| / (atol + rtol |ref|); > 1 means a mismatch */
} gg_h_compare_result;

/* Compares out (fp32 or bf16) with ref (double) element-wise; blocks until the result is on the host.
 * scratch: device memory of at least gg_h_compare_scratch_bytes() bytes. */
size_t gg_h_compare_scratch_bytes(void);
int gg_h_compare_f32(const float *out, const double *ref, size_t n, double atol, double rtol, void *scratch,
                     gg_stream stream, gg_h_compare_result *result);
int gg_h_compare_bf16(const uint16_t *out, const double *ref, size_t n, double atol, double rtol, void *scratch,
                      gg_stream stream, gg_h_compare_result *result);
/* *result = the sum of the squares of x (blocks until it is on the host); scratch as for the comparisons. */
int gg_h_sum_squares_f64(const double *x, size_t n, void *scratch, gg_stream stream, double *result);

#ifdef __cplusplus
}
#endif

#endif
