/* train_ref.c - the float64 reference of train_ref.h, written out loop by loop for clarity, not speed. */
#include "train_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */

int tr_tensors(const tr_shape *s) { return 3 + 4 * s->layers; }

int64_t tr_count(const tr_shape *s, int t) {
    const int64_t D = (int64_t)s->context * s->embed, F = s->ffn, V = s->vocab;
    if (t == 0) return V * s->embed;
    if (t == 1 + 4 * s->layers) return V * D;
    if (t == 2 + 4 * s->layers) return V;
    const int64_t k = (t - 1) % 4;
    return k == 0 ? F * D : k == 1 ? F : k == 2 ? D * F : D;
}

/* y[M,N] = x[M,K] wᵀ + b (w [N,K] float, b [N] float) */
static void linear(const double *x, const float *w, const float *b, int64_t M, int64_t N, int64_t K, double *y) {
    for (int64_t r = 0; r < M; ++r)
        for (int64_t n = 0; n < N; ++n) {
            double acc = b[n];
            for (int64_t k = 0; k < K; ++k) acc += x[r * K + k] * w[n * K + k];
            y[r * N + n] = acc;
        }
}

/* The backward of linear: gw [N,K] = gyᵀ x, gb [N] = Σ_rows gy, and gx [M,K] += gy w (when gx is not NULL). */
static void linear_backward(const double *x, const float *w, const double *gy, int64_t M, int64_t N, int64_t K,
                            double *gw, double *gb, double *gx) {
    for (int64_t n = 0; n < N; ++n) {
        gb[n] = 0;
        for (int64_t k = 0; k < K; ++k) gw[n * K + k] = 0;
    }
    for (int64_t r = 0; r < M; ++r)
        for (int64_t n = 0; n < N; ++n) {
            const double g = gy[r * N + n];
            gb[n] += g;
            for (int64_t k = 0; k < K; ++k) {
                gw[n * K + k] += g * x[r * K + k];
                if (gx) gx[r * K + k] += g * w[n * K + k];
            }
        }
}

static double gelu(double x) { return 0.5 * x * (1 + tanh(GELU_C * (x + 0.044715 * x * x * x))); }

static double gelu_grad(double x) {
    const double t = tanh(GELU_C * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x);
}

double tr_step(const tr_shape *s, const float *params, const int32_t *tokens, double *grads) {
    const int L = s->layers, C = s->context, e = s->embed, V = s->vocab;
    const int64_t M = s->rows, D = (int64_t)C * e, F = s->ffn;
    const float *p[3 + 4 * 64];
    double *g[3 + 4 * 64];
    if (L > 64) return NAN;
    int64_t at = 0;
    for (int t = 0; t < tr_tensors(s); ++t) {
        p[t] = params + at;
        g[t] = grads + at;
        at += tr_count(s, t);
    }
    double *x = malloc(sizeof(double) * (size_t)((L + 1) * M * D)), *h = malloc(sizeof(double) * (size_t)(L * M * F)),
           *a = malloc(sizeof(double) * (size_t)(L * M * F)), *z = malloc(sizeof(double) * (size_t)(M * V)),
           *gx = calloc((size_t)(M * D), sizeof(double)), *gh = malloc(sizeof(double) * (size_t)(M * F)),
           *o = malloc(sizeof(double) * (size_t)(M * D));
    double loss = NAN;
    if (!x || !h || !a || !z || !gx || !gh || !o) goto out;

    for (int64_t r = 0; r < M; ++r) /* the embedding */
        for (int c = 0; c < C; ++c)
            for (int j = 0; j < e; ++j) x[r * D + c * e + j] = p[0][(int64_t)tokens[r * (C + 1) + c] * e + j];
    for (int l = 0; l < L; ++l) { /* x[l+1] = x[l] + W2 gelu(W1 x[l] + b1) + b2 */
        double *xl = x + l * M * D, *hl = h + l * M * F, *al = a + l * M * F;
        linear(xl, p[1 + 4 * l], p[2 + 4 * l], M, F, D, hl);
        for (int64_t i = 0; i < M * F; ++i) al[i] = gelu(hl[i]);
        linear(al, p[3 + 4 * l], p[4 + 4 * l], M, D, F, o);
        for (int64_t i = 0; i < M * D; ++i) xl[M * D + i] = xl[i] + o[i];
    }
    const double *xL = x + L * M * D;
    linear(xL, p[1 + 4 * L], p[2 + 4 * L], M, V, D, z);
    loss = 0;
    for (int64_t r = 0; r < M; ++r) { /* softmax cross-entropy; z becomes its gradient */
        double *zr = z + r * V, mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; ++v) mx = fmax(mx, zr[v]);
        for (int v = 0; v < V; ++v) sum += exp(zr[v] - mx);
        const int target = tokens[r * (C + 1) + C];
        loss += log(sum) + mx - zr[target];
        for (int v = 0; v < V; ++v) zr[v] = (exp(zr[v] - mx) / sum - (v == target)) / (double)M;
    }
    loss /= (double)M;
    linear_backward(xL, p[1 + 4 * L], z, M, V, D, g[1 + 4 * L], g[2 + 4 * L], gx);
    for (int l = L - 1; l >= 0; --l) { /* gx: the gradient of x[l+1], then of x[l] (the residual path kept) */
        const double *xl = x + l * M * D, *hl = h + l * M * F, *al = a + l * M * F;
        memset(gh, 0, sizeof(double) * (size_t)(M * F));
        linear_backward(al, p[3 + 4 * l], gx, M, D, F, g[3 + 4 * l], g[4 + 4 * l], gh);
        for (int64_t i = 0; i < M * F; ++i) gh[i] *= gelu_grad(hl[i]);
        linear_backward(xl, p[1 + 4 * l], gh, M, F, D, g[1 + 4 * l], g[2 + 4 * l], gx);
    }
    memset(g[0], 0, sizeof(double) * (size_t)(V * e));
    for (int64_t r = 0; r < M; ++r)
        for (int c = 0; c < C; ++c)
            for (int j = 0; j < e; ++j) g[0][(int64_t)tokens[r * (C + 1) + c] * e + j] += gx[r * D + c * e + j];
out:
    free(x), free(h), free(a), free(z), free(gx), free(gh), free(o);
    return loss;
}
