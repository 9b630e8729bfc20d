/*
 * gg_ref_optim.h - float64 references of the fused optimizer (tests only, plain C11, no CUDA): one step of
 * torch.optim.AdamW and of torch.optim.SGD (their foreach=False formulas, in their order), the clipping coefficient
 * of a global gradient norm, and fp32 -> fp16 rounding for checking fp16 weight copies.
 */
#ifndef GG_REF_OPTIM_H
#define GG_REF_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gg_ref_optim {
    int sgd; /* 0: AdamW (amsgrad off); 1: SGD */
    double lr;
    double beta1, beta2, eps;   /* AdamW */
    double weight_decay;        /* AdamW: decoupled (p *= 1 - lr wd); SGD: L2 (g += wd p) */
    double momentum, dampening; /* SGD */
    int nesterov;               /* SGD */
} gg_ref_optim;

/* One step of n elements, in double:
 *   AdamW: p *= 1 - lr wd (decay only); m += (1 - beta1)(g - m); v = beta2 v + (1 - beta2) g²;
 *          p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *   SGD:   g += wd p (decay only); with momentum: buf = g at t = 1, else buf = momentum buf + (1 - dampening) g,
 *          g = g + momentum buf (nesterov) or buf; p -= lr g
 * p: the weights; m, v: AdamW's exp_avg and exp_avg_sq, or SGD's momentum buffer in m (v unused, may be NULL; both
 * unused by plain SGD); g: the gradient the update uses (unscaled and clipped already); t: this step's number, 1 for
 * the first. abs_p, abs_m (both NULL, or both given): the scale of a running error bound, updated alongside — the
 * same recurrences with every term replaced by its magnitude (start them at |p| and 0). An implementation whose
 * every operation rounds once to a precision with unit roundoff u stays within a small multiple of
 * steps · u · abs_p of p. */
void gg_ref_optim_step(const gg_ref_optim *h, size_t n, double *p, double *m, double *v, const double *g, int64_t t,
                       int decay, double *abs_p, double *abs_m);

/* Clipping by the global norm: min(1, max_norm / (norm + 1e-6)). */
double gg_ref_clip_coef(double norm, double max_norm);

/* fp32 -> IEEE fp16 bits, round to nearest even: overflow (from 65520 on) to Inf, subnormals kept, NaN stays NaN. */
uint16_t gg_ref_f32_to_f16(float x);

#ifdef __cplusplus
}
#endif

#endif
