/*
 * gg_ref.h - double-precision CPU references of the four blocks (tests only, plain C11, no CUDA).
 *
 * Inputs are given exactly as the GPU receives them (bf16 bit patterns as uint16_t, fp32 as float); every
 * reference output is a double. Where the spec rounds to bf16 (blocks 1 and 4) the reference rounds too, with
 * gg_ref_round_bf16, and the output double holds that bf16 value; everything else is computed in double.
 * Layouts are row-major [rows, cols] as in include/gradgraph.h.
 */
#ifndef GG_REF_H
#define GG_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GG_REF_GELU_C 0.7978845608028654 /* sqrt(2/pi) */

/* bf16 helpers: round-to-nearest-even, NaN stays NaN, overflow goes to Inf. */
uint16_t gg_ref_f32_to_bf16(float x);
float gg_ref_bf16_to_f32(uint16_t x);
double gg_ref_round_bf16(double x); /* the bf16 value nearest to x (through fp32 then bf16) */

/* Block 1: tanh-gated residual add. mask has M elements; gate and grad_gate are scalars. */
void gg_ref_tanh_gate(int64_t M, int64_t H, const uint16_t *grad_output, uint16_t gate,
                      const uint16_t *hidden_states, const uint16_t *mask, double *grad_residual,
                      double *grad_hidden_states, double *grad_gate);

/* Block 2: GELU(tanh) FFN without biases (see gradgraph.h for the formulas). */
void gg_ref_gelu_ffn(int64_t M, int64_t D, int64_t F, const float *grad_output, const float *hidden_states,
                     const float *weight1, const float *weight2, const float *linear1_out,
                     const float *tanh_inner, const float *gelu_out, double *grad_hidden_states,
                     double *grad_weight1, double *grad_weight2);

/* Block 3: GELU(tanh) MLP with biases. */
void gg_ref_mlp(int64_t M, int64_t D, int64_t F, const float *grad_output, const float *hidden_states,
                const float *weight1, const float *weight2, const float *intermediate,
                const float *intermediate_activated, double *grad_hidden_states, double *grad_weight1,
                double *grad_bias1, double *grad_weight2, double *grad_bias2);

/* Block 4: SSM output projection with gate multiply (every elementwise step rounded to bf16). gate may be NULL
 * when use_silu_gate is 0. */
void gg_ref_ssm_gate(int64_t M, int64_t H, int64_t E, int use_silu_gate, const uint16_t *grad_output,
                     const uint16_t *ssm_output, const uint16_t *gate, const uint16_t *weight,
                     const uint16_t *gate_activated, const uint16_t *gated_output, double *grad_ssm_output,
                     double *grad_gate, double *grad_weight, double *grad_bias);

/* Forward passes in double, unrounded, for finite-difference checks of the backward formulas. Each returns the
 * scalar loss L = sum(grad_output * out) for the forward's output out, so dL/d(input) is what the backward gives. */
double gg_ref_loss_tanh_gate(int64_t M, int64_t H, const double *grad_output, double gate,
                             const double *hidden_states, const double *mask);
/* Block 2 forward from hidden_states: x = hs @ W1ᵀ, gelu_tanh(x) @ W2ᵀ. */
double gg_ref_loss_gelu_ffn(int64_t M, int64_t D, int64_t F, const double *grad_output,
                            const double *hidden_states, const double *weight1, const double *weight2);
/* Block 4 forward: out = (ssm_output * act(gate)) @ Wᵀ, act = silu or identity. */
double gg_ref_loss_ssm_gate(int64_t M, int64_t H, int64_t E, int use_silu_gate, const double *grad_output,
                            const double *ssm_output, const double *gate, const double *weight);

/* Forward passes (gg_*_forward), outputs as the backward reads them. Blocks 1 and 4 round to bf16 where the header
 * says; blocks 2 and 3 are exact in double, from double inputs (so finite differences can perturb them): x the
 * pre-activation, act = gelu_tanh(x), output = act @ W2ᵀ (+ bias2). tanh_inner may be NULL. */
void gg_ref_tanh_gate_forward(int64_t M, int64_t H, const uint16_t *residual, uint16_t gate,
                              const uint16_t *hidden_states, const uint16_t *mask, double *output);
void gg_ref_gelu_ffn_forward(int64_t M, int64_t D, int64_t F, const double *hidden_states, const double *weight1,
                             const double *weight2, double *linear1_out, double *gelu_out, double *tanh_inner,
                             double *output);
void gg_ref_mlp_forward(int64_t M, int64_t D, int64_t F, const double *hidden_states, const double *weight1,
                        const double *bias1, const double *weight2, const double *bias2, double *intermediate,
                        double *intermediate_activated, double *output);
/* gate_activated = bf16(silu(gate)) or gate; gated_output = bf16(ssm_output * gate_activated);
 * output = bf16(gated_output @ Wᵀ + bias), the sum exact. */
void gg_ref_ssm_gate_forward(int64_t M, int64_t H, int64_t E, int use_silu_gate, const uint16_t *ssm_output,
                             const uint16_t *gate, const uint16_t *weight, const uint16_t *bias,
                             double *gate_activated, double *gated_output, double *output);

#ifdef __cplusplus
}
#endif

#endif
