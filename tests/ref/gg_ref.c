/*
 * gg_ref.c - double-precision CPU references of the four blocks (see gg_ref.h and shared/spec/blocks.md).
 *
 * Plain C11. Everything is computed in double; where the spec rounds to bf16 (blocks 1 and 4) the value is
 * rounded with gg_ref_round_bf16 at exactly the points the spec names. GEMMs are plain triple loops (i-k-j) meant
 * for the small shapes of the tests, not for speed.
 */
#include "gg_ref.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GELU_K 0.044715 /* the cubic coefficient of the tanh approximation */

/* ------------------------------------------------------------------------------------------------------------ */
/* bf16                                                                                                           */
/* ------------------------------------------------------------------------------------------------------------ */

uint16_t gg_ref_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: truncating could turn it into Inf, so return a quiet NaN */
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7FC0u);
    /* Round to nearest, ties to even: add just under half an ulp, plus one if the kept part is odd. A carry out of
     * the mantissa increments the exponent, which is right (and turns values above the largest bf16 into Inf). */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float gg_ref_bf16_to_f32(uint16_t x) {
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

double gg_ref_round_bf16(double x) { return (double)gg_ref_bf16_to_f32(gg_ref_f32_to_bf16((float)x)); }

static double bf(uint16_t x) { return (double)gg_ref_bf16_to_f32(x); }

/* ------------------------------------------------------------------------------------------------------------ */
/* Helpers                                                                                                        */
/* ------------------------------------------------------------------------------------------------------------ */

/* The references return void, so an allocation failure cannot be reported; these are test-only shapes. */
static double *alloc_doubles(size_t n) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    return p;
}

static double *doubles_from_f32(const float *x, size_t n) {
    double *d = alloc_doubles(n);
    for (size_t i = 0; i < n; ++i) d[i] = (double)x[i];
    return d;
}

static double *doubles_from_bf16(const uint16_t *x, size_t n) {
    double *d = alloc_doubles(n);
    for (size_t i = 0; i < n; ++i) d[i] = bf(x[i]);
    return d;
}

/* C[m,n] = op(A) @ B with B [k,n] row-major; op(A) = A stored [m,k], or Aᵀ with A stored [k,m] (trans_a).
 * Loop order i-k-j: the inner loop walks rows of B and C contiguously. */
static void gemm(int trans_a, int64_t m, int64_t n, int64_t k, const double *A, const double *B, double *C) {
    for (int64_t i = 0; i < m; ++i) {
        double *c = C + i * n;
        for (int64_t j = 0; j < n; ++j) c[j] = 0.0;
        for (int64_t p = 0; p < k; ++p) {
            const double a = trans_a ? A[p * m + i] : A[i * k + p];
            const double *b = B + p * n;
            for (int64_t j = 0; j < n; ++j) c[j] += a * b[j];
        }
    }
}

/* out[j] = Σ_i X[i][j] for X [rows, cols]. */
static void column_sums(int64_t rows, int64_t cols, const double *X, double *out) {
    for (int64_t j = 0; j < cols; ++j) out[j] = 0.0;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[j] += X[i * cols + j];
}

/* tanh(c (x + k x³)), the inner tanh of GELU's tanh approximation. */
static double gelu_tanh_inner(double x) { return tanh(GG_REF_GELU_C * (x + GELU_K * x * x * x)); }

static double gelu_tanh(double x) { return 0.5 * x * (1.0 + gelu_tanh_inner(x)); }

/* d gelu_tanh / dx at x, given t = gelu_tanh_inner(x) (saved by the forward or recomputed). 3k = 0.134145. */
static double gelu_tanh_grad(double x, double t) {
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GG_REF_GELU_C * (1.0 + 3.0 * GELU_K * x * x);
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* ------------------------------------------------------------------------------------------------------------ */
/* Block 1: tanh-gated residual add                                                                               */
/* ------------------------------------------------------------------------------------------------------------ */

void gg_ref_tanh_gate(int64_t M, int64_t H, const uint16_t *grad_output, uint16_t gate,
                      const uint16_t *hidden_states, const uint16_t *mask, double *grad_residual,
                      double *grad_hidden_states, double *grad_gate) {
    const double t = tanh(bf(gate));
    const double t32 = (double)(float)t; /* the framework's fp32 t */
    double sum = 0.0;
    for (int64_t m = 0; m < M; ++m) {
        const double mk = bf(mask[m]);
        for (int64_t h = 0; h < H; ++h) {
            const size_t i = (size_t)(m * H + h);
            const double go = bf(grad_output[i]);
            grad_residual[i] = go;
            /* go * t32 (bf16 times fp32) is exact in double, so rounding it through fp32 is the fp32 product. */
            grad_hidden_states[i] = gg_ref_round_bf16(gg_ref_round_bf16(go * t32) * mk);
            sum += go * gg_ref_round_bf16(bf(hidden_states[i]) * mk);
        }
    }
    *grad_gate = gg_ref_round_bf16((1.0 - t * t) * sum);
}

double gg_ref_loss_tanh_gate(int64_t M, int64_t H, const double *grad_output, double gate,
                             const double *hidden_states, const double *mask) {
    /* out = residual + tanh(gate) * hs * mask; the residual term does not depend on these inputs. */
    const double t = tanh(gate);
    double L = 0.0;
    for (int64_t m = 0; m < M; ++m)
        for (int64_t h = 0; h < H; ++h) L += grad_output[m * H + h] * t * hidden_states[m * H + h] * mask[m];
    return L;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Blocks 2 and 3: GELU(tanh) feed-forward                                                                         */
/* ------------------------------------------------------------------------------------------------------------ */

/* The backward shared by blocks 2 and 3. x = pre-activation [M,F], act = activation [M,F]; tanh_inner [M,F] is the
 * saved inner tanh (block 2) or NULL to recompute it from x (block 3). grad_bias1 may be NULL (block 2). */
static void ffn_backward(int64_t M, int64_t D, int64_t F, const float *grad_output, const float *hidden_states,
                         const float *weight1, const float *weight2, const float *x, const float *tanh_inner,
                         const float *act, double *grad_hidden_states, double *grad_weight1, double *grad_bias1,
                         double *grad_weight2) {
    const size_t MD = (size_t)(M * D), MF = (size_t)(M * F), FD = (size_t)(F * D);
    double *go = doubles_from_f32(grad_output, MD);
    double *hs = doubles_from_f32(hidden_states, MD);
    double *w1 = doubles_from_f32(weight1, FD);
    double *w2 = doubles_from_f32(weight2, FD);
    double *a = doubles_from_f32(act, MF);
    double *R = alloc_doubles(MF);

    gemm(0, M, F, D, go, w2, R);           /* G = go @ W2            [M,F] */
    gemm(1, D, F, M, go, a, grad_weight2); /* grad_weight2 = goᵀ @ a [D,F] */
    for (size_t i = 0; i < MF; ++i) {      /* R = G ⊙ gelu'(x) */
        const double xi = (double)x[i];
        const double t = tanh_inner ? (double)tanh_inner[i] : gelu_tanh_inner(xi);
        R[i] *= gelu_tanh_grad(xi, t);
    }
    gemm(0, M, D, F, R, w1, grad_hidden_states); /* R @ W1   [M,D] */
    gemm(1, F, D, M, R, hs, grad_weight1);       /* Rᵀ @ hs  [F,D] */
    if (grad_bias1) column_sums(M, F, R, grad_bias1);

    free(go);
    free(hs);
    free(w1);
    free(w2);
    free(a);
    free(R);
}

void gg_ref_gelu_ffn(int64_t M, int64_t D, int64_t F, const float *grad_output, const float *hidden_states,
                     const float *weight1, const float *weight2, const float *linear1_out,
                     const float *tanh_inner, const float *gelu_out, double *grad_hidden_states,
                     double *grad_weight1, double *grad_weight2) {
    ffn_backward(M, D, F, grad_output, hidden_states, weight1, weight2, linear1_out, tanh_inner, gelu_out,
                 grad_hidden_states, grad_weight1, NULL, grad_weight2);
}

void gg_ref_mlp(int64_t M, int64_t D, int64_t F, const float *grad_output, const float *hidden_states,
                const float *weight1, const float *weight2, const float *intermediate,
                const float *intermediate_activated, double *grad_hidden_states, double *grad_weight1,
                double *grad_bias1, double *grad_weight2, double *grad_bias2) {
    ffn_backward(M, D, F, grad_output, hidden_states, weight1, weight2, intermediate, NULL,
                 intermediate_activated, grad_hidden_states, grad_weight1, grad_bias1, grad_weight2);
    double *go = doubles_from_f32(grad_output, (size_t)(M * D));
    column_sums(M, D, go, grad_bias2);
    free(go);
}

double gg_ref_loss_gelu_ffn(int64_t M, int64_t D, int64_t F, const double *grad_output,
                            const double *hidden_states, const double *weight1, const double *weight2) {
    /* L = Σ go ⊙ (gelu(hs @ W1ᵀ) @ W2ᵀ) = Σ_{m,f} gelu(x)[m][f] · (go @ W2)[m][f]. */
    double *x = alloc_doubles((size_t)(M * F));
    double *G = alloc_doubles((size_t)(M * F));
    for (int64_t m = 0; m < M; ++m)
        for (int64_t f = 0; f < F; ++f) {
            double s = 0.0;
            for (int64_t d = 0; d < D; ++d) s += hidden_states[m * D + d] * weight1[f * D + d];
            x[m * F + f] = s;
        }
    gemm(0, M, F, D, grad_output, weight2, G);
    double L = 0.0;
    for (size_t i = 0; i < (size_t)(M * F); ++i) L += gelu_tanh(x[i]) * G[i];
    free(x);
    free(G);
    return L;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Block 4: SSM output projection with gate multiply                                                              */
/* ------------------------------------------------------------------------------------------------------------ */

void gg_ref_ssm_gate(int64_t M, int64_t H, int64_t E, int use_silu_gate, const uint16_t *grad_output,
                     const uint16_t *ssm_output, const uint16_t *gate, const uint16_t *weight,
                     const uint16_t *gate_activated, const uint16_t *gated_output, double *grad_ssm_output,
                     double *grad_gate, double *grad_weight, double *grad_bias) {
    const size_t MH = (size_t)(M * H), ME = (size_t)(M * E), HE = (size_t)(H * E);
    double *go = doubles_from_bf16(grad_output, MH);
    double *w = doubles_from_bf16(weight, HE);
    double *gated = doubles_from_bf16(gated_output, ME);
    double *g = alloc_doubles(ME);

    gemm(1, H, E, M, go, gated, grad_weight); /* goᵀ @ gated [H,E] */
    for (size_t i = 0; i < HE; ++i) grad_weight[i] = gg_ref_round_bf16(grad_weight[i]);
    column_sums(M, H, go, grad_bias);
    for (int64_t h = 0; h < H; ++h) grad_bias[h] = gg_ref_round_bf16(grad_bias[h]);

    gemm(0, M, E, H, go, w, g); /* go @ W [M,E] */
    for (size_t i = 0; i < ME; ++i) {
        const double gi = gg_ref_round_bf16(g[i]);
        grad_ssm_output[i] = gg_ref_round_bf16(gi * bf(gate_activated[i]));
        const double a = gg_ref_round_bf16(gi * bf(ssm_output[i]));
        if (use_silu_gate) { /* silu'(z) = s (1 + z (1 - s)), every step rounded as a bf16 framework does */
            const double z = bf(gate[i]);
            const double s = gg_ref_round_bf16(1.0 / (1.0 + exp(-z)));
            const double d =
                gg_ref_round_bf16(s * gg_ref_round_bf16(1.0 + gg_ref_round_bf16(z * gg_ref_round_bf16(1.0 - s))));
            grad_gate[i] = gg_ref_round_bf16(a * d);
        } else {
            grad_gate[i] = a;
        }
    }
    free(go);
    free(w);
    free(gated);
    free(g);
}

double gg_ref_loss_ssm_gate(int64_t M, int64_t H, int64_t E, int use_silu_gate, const double *grad_output,
                            const double *ssm_output, const double *gate, const double *weight) {
    /* L = Σ go ⊙ ((ssm ⊙ act(gate)) @ Wᵀ) = Σ_{m,e} ssm·act(gate)[m][e] · (go @ W)[m][e]. */
    double *G = alloc_doubles((size_t)(M * E));
    gemm(0, M, E, H, grad_output, weight, G);
    double L = 0.0;
    for (size_t i = 0; i < (size_t)(M * E); ++i)
        L += ssm_output[i] * (use_silu_gate ? silu(gate[i]) : gate[i]) * G[i];
    free(G);
    return L;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Forward passes (gg_*_forward)                                                                                 */
/* ------------------------------------------------------------------------------------------------------------ */

void gg_ref_tanh_gate_forward(int64_t M, int64_t H, const uint16_t *residual, uint16_t gate,
                              const uint16_t *hidden_states, const uint16_t *mask, double *output) {
    const double t = (double)tanhf(gg_ref_bf16_to_f32(gate)); /* fp32, as the spec's backward */
    for (int64_t m = 0; m < M; ++m)
        for (int64_t h = 0; h < H; ++h) {
            const size_t i = (size_t)(m * H + h);
            const double p = gg_ref_round_bf16(gg_ref_round_bf16(t * bf(hidden_states[i])) * bf(mask[m]));
            output[i] = gg_ref_round_bf16(bf(residual[i]) + p);
        }
}

/* x = X @ W1ᵀ (+ b1), act = gelu_tanh(x), out = act @ W2ᵀ (+ b2): blocks 2 and 3. */
static void ffn_forward(int64_t M, int64_t D, int64_t F, const double *X, const double *W1, const double *b1,
                        const double *W2, const double *b2, double *x, double *act, double *tanh_inner, double *out) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t f = 0; f < F; ++f) {
            double s = b1 ? b1[f] : 0.0;
            for (int64_t d = 0; d < D; ++d) s += X[m * D + d] * W1[f * D + d];
            const size_t i = (size_t)(m * F + f);
            x[i] = s;
            act[i] = gelu_tanh(s);
            if (tanh_inner) tanh_inner[i] = gelu_tanh_inner(s);
        }
    for (int64_t m = 0; m < M; ++m)
        for (int64_t d = 0; d < D; ++d) {
            double s = b2 ? b2[d] : 0.0;
            for (int64_t f = 0; f < F; ++f) s += act[m * F + f] * W2[d * F + f];
            out[m * D + d] = s;
        }
}

void gg_ref_gelu_ffn_forward(int64_t M, int64_t D, int64_t F, const double *hidden_states, const double *weight1,
                             const double *weight2, double *linear1_out, double *gelu_out, double *tanh_inner,
                             double *output) {
    ffn_forward(M, D, F, hidden_states, weight1, NULL, weight2, NULL, linear1_out, gelu_out, tanh_inner, output);
}

void gg_ref_mlp_forward(int64_t M, int64_t D, int64_t F, const double *hidden_states, const double *weight1,
                        const double *bias1, const double *weight2, const double *bias2, double *intermediate,
                        double *intermediate_activated, double *output) {
    ffn_forward(M, D, F, hidden_states, weight1, bias1, weight2, bias2, intermediate, intermediate_activated, NULL,
                output);
}

void gg_ref_ssm_gate_forward(int64_t M, int64_t H, int64_t E, int use_silu_gate, const uint16_t *ssm_output,
                             const uint16_t *gate, const uint16_t *weight, const uint16_t *bias,
                             double *gate_activated, double *gated_output, double *output) {
    const size_t ME = (size_t)(M * E);
    for (size_t i = 0; i < ME; ++i) {
        const double z = bf(gate[i]);
        gate_activated[i] = use_silu_gate ? gg_ref_round_bf16(silu(z)) : z;
        gated_output[i] = gg_ref_round_bf16(bf(ssm_output[i]) * gate_activated[i]);
    }
    for (int64_t m = 0; m < M; ++m)
        for (int64_t h = 0; h < H; ++h) {
            double s = bf(bias[h]);
            for (int64_t e = 0; e < E; ++e) s += gated_output[m * E + e] * bf(weight[h * E + e]);
            output[m * H + h] = gg_ref_round_bf16(s);
        }
}
