/* gg_ref_optim.c - float64 references of the fused optimizer (see gg_ref_optim.h and docs/optimizer.md). */
#include "gg_ref_optim.h"

#include <math.h>
#include <string.h>

static void adamw(const gg_ref_optim *h, size_t n, double *p, double *m, double *v, const double *g, int64_t t,
                  int decay, double *abs_p, double *abs_m) {
    const double bc1 = 1.0 - pow(h->beta1, (double)t), bc2_sqrt = sqrt(1.0 - pow(h->beta2, (double)t));
    const double step_size = h->lr / bc1, shrink = decay ? 1.0 - h->lr * h->weight_decay : 1.0;
    for (size_t i = 0; i < n; ++i) {
        p[i] *= shrink;
        m[i] += (1.0 - h->beta1) * (g[i] - m[i]);
        v[i] = h->beta2 * v[i] + (1.0 - h->beta2) * g[i] * g[i];
        const double denom = sqrt(v[i]) / bc2_sqrt + h->eps;
        p[i] -= step_size * m[i] / denom;
        if (abs_p) {
            abs_m[i] = h->beta1 * abs_m[i] + (1.0 - h->beta1) * fabs(g[i]);
            abs_p[i] = abs_p[i] * shrink + step_size * abs_m[i] / denom;
        }
    }
}

static void sgd(const gg_ref_optim *h, size_t n, double *p, double *buf, const double *g_in, int64_t t, int decay,
                double *abs_p, double *abs_buf) {
    const double wd = decay ? h->weight_decay : 0.0;
    for (size_t i = 0; i < n; ++i) {
        double g = g_in[i] + wd * p[i];
        double g_abs = fabs(g_in[i]) + (abs_p ? wd * abs_p[i] : 0.0);
        if (h->momentum != 0.0) {
            buf[i] = t == 1 ? g : h->momentum * buf[i] + (1.0 - h->dampening) * g;
            g = h->nesterov ? g + h->momentum * buf[i] : buf[i];
            if (abs_p) {
                abs_buf[i] = t == 1 ? g_abs : h->momentum * abs_buf[i] + (1.0 - h->dampening) * g_abs;
                g_abs = h->nesterov ? g_abs + h->momentum * abs_buf[i] : abs_buf[i];
            }
        }
        p[i] -= h->lr * g;
        if (abs_p) abs_p[i] += h->lr * g_abs;
    }
}

void gg_ref_optim_step(const gg_ref_optim *h, size_t n, double *p, double *m, double *v, const double *g, int64_t t,
                       int decay, double *abs_p, double *abs_m) {
    if (h->sgd)
        sgd(h, n, p, m, g, t, decay, abs_p, abs_m);
    else
        adamw(h, n, p, m, v, g, t, decay, abs_p, abs_m);
}

double gg_ref_clip_coef(double norm, double max_norm) {
    const double coef = max_norm / (norm + 1e-6);
    return coef < 1.0 ? coef : 1.0;
}

uint16_t gg_ref_f32_to_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u; /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* from 65520 (the tie above 65504, to even): Inf */
    if (a < 0x38800000u) {                        /* below 2^-14: a subnormal (or zero) in units of 2^-24 */
        const float units = fabsf(x) * 16777216.0f; /* exact: a power of two */
        return sign | (uint16_t)rintf(units);       /* nearest even; 1024 units is the smallest normal's bits */
    }
    const uint32_t mantissa = a & 0x7fffffu;
    uint32_t h = ((a >> 23) - 112u) << 10 | mantissa >> 13; /* exponent rebiased from 127 to 15 */
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; /* a carry into the exponent is right */
    return sign | (uint16_t)h;
}
