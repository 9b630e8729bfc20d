/*
 * test_forward_gpu.c - the forward passes (gg_*_forward) on the GPU (label `gpu`; SKIPPED without a GPU).
 *
 *  - each forward against the CPU float64 reference (tests/ref) at M in {1, 7, 128, 333} and dims that are multiples
 *    of 8 (powers of two and not), outputs poisoned with NaN before every call, fresh random inputs per shape (the
 *    seed is printed; GG_TEST_SEED repeats a run): blocks 2 and 3 in FP32, TF32 and FP16, each with the GELU in
 *    cuBLASLt's epilogue and in gradgraph's kernel (GG_FORWARD_GELU); block 4 with and without silu; block 2 with
 *    and without tanh_inner (a NULL tanh_inner leaves its buffer untouched);
 *  - the backward fed with the forward's outputs against central finite differences of the CPU forward (blocks 2
 *    and 3, FP32 mode): the forward saves exactly what the backward needs;
 *  - a forward captured into a CUDA graph replays the eager call's bits; inside a capture an unplanned shape is
 *    refused (blocks 2-4) without breaking the capture, and block 1 plans inside it;
 *  - blocks 2 and 3 with tensors of more than 2^31 elements (forward_past_32_bit_indices), on GPUs with the memory.
 * Tolerance: an element matches when |got - ref| <= atol + rtol |ref|, and every output needs 99 % of its elements
 * matching and no NaN or Inf (the spec's rule). The bounds per mode are below (tol_for).
 */
#include <math.h>
#include <time.h>

#include "gg_ref.h"

#include "gpu_test.h"

/* ---- data ---- */
typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_normal(rng *r) {
    const double u1 = ((double)(rng_next(r) >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = (double)(rng_next(r) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The run's base seed: GG_TEST_SEED, or the time; printed so that a failure can be repeated. */
static uint64_t base_seed(void) {
    static uint64_t seed = 0;
    if (seed) return seed;
    const char *env = getenv("GG_TEST_SEED");
    seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    if (!seed) seed = 1;
    printf("test_forward_gpu: seed %llu (GG_TEST_SEED=%llu repeats it)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    return seed;
}

static float *host_f32(rng *r, size_t n, double scale) {
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n; ++i) h[i] = (float)(scale * rng_normal(r));
    return h;
}

static uint16_t *host_bf16(rng *r, size_t n, double scale) {
    uint16_t *h = malloc(n * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n; ++i) h[i] = gg_ref_f32_to_bf16((float)(scale * rng_normal(r)));
    return h;
}

static double *host_doubles(const float *x, size_t n) {
    double *d = malloc((n ? n : 1) * sizeof *d);
    assert_non_null(d);
    for (size_t i = 0; i < n; ++i) d[i] = x[i];
    return d;
}

static void *dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes));
    if (h) CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* All bits set: a NaN in fp32 and in bf16, so an element the call does not write fails the comparison. */
static void poison(void *d, size_t bytes) { CUDA_OK(cudaMemset(d, 0xff, bytes)); }

static void *to_host(const void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    assert_non_null(h);
    CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* ---- comparison ---- */
typedef struct tol {
    double atol, rtol;
} tol;

/* fp32 blocks. FP32: a dot product of K <= 520 terms accumulated in fp32 is off by about sqrt(K) 2^-24 times the
 * terms' size (~1e-6 here: inputs N(0,1), weights N(0,1)/sqrt(fan_in)), 2e-5 leaves room for any summation order,
 * while a GELU that is not fp32-accurate (an approximate tanh, ~5e-4) fails it. TF32 and FP16 round every operand to
 * 10 mantissa bits (2^-11 relative): the sum of K such errors is about 2^-11 times the output's size, ~5e-4 here; 5e-3
 * is ten times that. bf16 blocks: both sides round the same values at the same steps, so they differ only where a
 * value sits on a bf16 rounding boundary (the GPU's fp32 order or expf against the double reference): one bf16 ulp,
 * 2^-7 relative at most, atol 1e-5 as the spec's for values near 0. */
static tol tol_for(gg_precision p) {
    switch (p) {
    case GG_PRECISION_FP32: return (tol){2e-5, 2e-5};
    case GG_PRECISION_TF32:
    case GG_PRECISION_FP16: return (tol){5e-3, 5e-3};
    default: return (tol){1e-5, 1.0 / 128};
    }
}

/* got (fp32 or bf16 on the device) against ref: the spec's rule. */
static void expect_match(const char *what, const void *dev, int bf16, const double *ref, size_t n, tol t) {
    void *h = to_host(dev, n * (bf16 ? 2 : 4));
    size_t ok = 0, nonfinite = 0, worst = 0;
    double worst_ratio = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double g = bf16 ? (double)gg_ref_bf16_to_f32(((uint16_t *)h)[i]) : (double)((float *)h)[i];
        if (!isfinite(g)) {
            ++nonfinite;
            continue;
        }
        const double ratio = fabs(g - ref[i]) / (t.atol + t.rtol * fabs(ref[i]));
        ok += ratio <= 1.0;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    free(h);
    if (nonfinite || (double)ok < 0.99 * (double)n)
        fail_msg("%s: %zu of %zu elements match, %zu not finite; worst [%zu] ref %.9g err/tol %.3g", what, ok, n,
                 nonfinite, worst, ref[worst], worst_ratio);
}

static const int64_t tokens_list[] = {1, 7, 128, 333};
#define N_TOKENS (sizeof tokens_list / sizeof tokens_list[0])

/* ---- block 1 ---- */
static void tanh_gate_matches_reference(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    const int64_t hiddens[] = {8, 200, 4096};
    for (size_t k = 0; k < N_TOKENS * 3; ++k) {
        const int64_t M = tokens_list[k % N_TOKENS], H = hiddens[k / N_TOKENS];
        const size_t n = (size_t)(M * H);
        rng r = {base_seed() + 100 + k};
        uint16_t *res = host_bf16(&r, n, 1), *hs = host_bf16(&r, n, 1), *mask = host_bf16(&r, (size_t)M, 1),
                 *gate = host_bf16(&r, 1, 1);
        const gg_tanh_gate_fwd_args a = {dev_copy(res, n * 2), dev_copy(gate, 2), dev_copy(hs, n * 2),
                                         dev_copy(mask, (size_t)M * 2), dev_copy(NULL, n * 2)};
        poison(a.output, n * 2);
        const gg_tanh_gate_desc d = {.tokens = M, .hidden = H};
        GG_OK(ctx, gg_tanh_gate_forward(ctx, &d, &a, NULL));
        double *ref = malloc(n * sizeof *ref);
        gg_ref_tanh_gate_forward(M, H, res, gate[0], hs, mask, ref);
        char what[96];
        snprintf(what, sizeof what, "tanh_gate M=%lld H=%lld output", (long long)M, (long long)H);
        expect_match(what, a.output, 1, ref, n, tol_for(GG_PRECISION_BF16));
        free(ref), free(res), free(hs), free(mask), free(gate);
        void *all[] = {(void *)a.residual, (void *)a.gate, (void *)a.hidden_states, (void *)a.mask, a.output};
        for (size_t i = 0; i < 5; ++i) CUDA_OK(cudaFree(all[i]));
    }
    gg_ctx_destroy(ctx);
}

/* ---- blocks 2 and 3 ---- */
typedef struct ffn_io {
    int64_t M, D, F;
    int mlp;
    float *x, *w1, *b1, *w2, *b2;            /* host inputs */
    void *dx, *dw1, *db1, *dw2, *db2;        /* device inputs */
    void *pre, *act, *tanh_inner, *out;      /* device outputs */
} ffn_io;

static void ffn_make(ffn_io *io, int mlp, int64_t M, int64_t D, int64_t F, uint64_t seed) {
    rng r = {seed};
    memset(io, 0, sizeof *io);
    io->M = M, io->D = D, io->F = F, io->mlp = mlp;
    const size_t MD = (size_t)(M * D), FD = (size_t)(F * D), MF = (size_t)(M * F);
    io->x = host_f32(&r, MD, 1), io->w1 = host_f32(&r, FD, 1 / sqrt((double)D));
    io->w2 = host_f32(&r, FD, 1 / sqrt((double)F));
    io->b1 = host_f32(&r, (size_t)F, mlp ? 1 : 0), io->b2 = host_f32(&r, (size_t)D, mlp ? 1 : 0);
    io->dx = dev_copy(io->x, MD * 4), io->dw1 = dev_copy(io->w1, FD * 4), io->dw2 = dev_copy(io->w2, FD * 4);
    io->db1 = dev_copy(io->b1, (size_t)F * 4), io->db2 = dev_copy(io->b2, (size_t)D * 4);
    io->pre = dev_copy(NULL, MF * 4), io->act = dev_copy(NULL, MF * 4), io->tanh_inner = dev_copy(NULL, MF * 4);
    io->out = dev_copy(NULL, MD * 4);
}

static void ffn_free(ffn_io *io) {
    float *h[] = {io->x, io->w1, io->b1, io->w2, io->b2};
    void *d[] = {io->dx, io->dw1, io->db1, io->dw2, io->db2, io->pre, io->act, io->tanh_inner, io->out};
    for (size_t i = 0; i < 5; ++i) free(h[i]);
    for (size_t i = 0; i < 9; ++i) CUDA_OK(cudaFree(d[i]));
}

/* Poisons the outputs and runs the forward (with_tanh: block 2 writes tanh_inner). */
static gg_status ffn_forward(gg_ctx *ctx, const ffn_io *io, gg_precision p, int with_tanh, gg_stream s) {
    const size_t MF = (size_t)(io->M * io->F);
    poison(io->pre, MF * 4), poison(io->act, MF * 4), poison(io->tanh_inner, MF * 4);
    poison(io->out, (size_t)(io->M * io->D) * 4);
    if (io->mlp) {
        const gg_mlp_desc d = {.tokens = io->M, .hidden = io->D, .ffn = io->F, .precision = p};
        const gg_mlp_fwd_args a = {io->dx,  io->dw1, io->db1, io->dw2, io->db2, io->pre,
                                   io->act, io->out, NULL,    NULL,    NULL,    NULL, NULL};
        return gg_mlp_forward(ctx, &d, &a, s);
    }
    const gg_gelu_ffn_desc d = {.tokens = io->M, .hidden = io->D, .ffn = io->F, .precision = p};
    const gg_gelu_ffn_fwd_args a = {io->dx, io->dw1, io->dw2, io->pre, io->act, with_tanh ? io->tanh_inner : NULL,
                                    io->out, NULL,    NULL,    NULL, NULL, NULL};
    return gg_gelu_ffn_forward(ctx, &d, &a, s);
}

/* Every byte of a device buffer is still 0xff. */
static void expect_untouched(const char *what, const void *dev, size_t bytes) {
    unsigned char *h = to_host(dev, bytes);
    for (size_t i = 0; i < bytes; ++i)
        if (h[i] != 0xff) fail_msg("%s: byte %zu written (0x%02x)", what, i, h[i]);
    free(h);
}

static void ffn_check(gg_ctx *ctx, int mlp, const char *gelu_path) {
    static const int64_t dims[][2] = {{64, 256}, {136, 520}};
    static const gg_precision modes[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
    for (size_t k = 0; k < N_TOKENS * 2; ++k) {
        const int64_t M = tokens_list[k % N_TOKENS], D = dims[k / N_TOKENS][0], F = dims[k / N_TOKENS][1];
        ffn_io io;
        ffn_make(&io, mlp, M, D, F, base_seed() + 200 + k + (uint64_t)mlp * 1000);
        const size_t MD = (size_t)(M * D), MF = (size_t)(M * F), FD = (size_t)(F * D);
        double *x = host_doubles(io.x, MD), *w1 = host_doubles(io.w1, FD), *w2 = host_doubles(io.w2, FD);
        double *b1 = host_doubles(io.b1, (size_t)F), *b2 = host_doubles(io.b2, (size_t)D);
        double *pre = malloc(MF * 8), *act = malloc(MF * 8), *t = malloc(MF * 8), *out = malloc(MD * 8);
        if (mlp) gg_ref_mlp_forward(M, D, F, x, w1, b1, w2, b2, pre, act, out);
        else gg_ref_gelu_ffn_forward(M, D, F, x, w1, w2, pre, act, t, out);
        for (size_t m = 0; m < 3; ++m) {
            const tol tl = tol_for(modes[m]);
            for (int with_tanh = mlp ? 0 : 1; with_tanh >= 0; --with_tanh) {
                GG_OK(ctx, ffn_forward(ctx, &io, modes[m], with_tanh, NULL));
                char what[160];
                snprintf(what, sizeof what, "%s (GELU in the %s) %s M=%lld D=%lld F=%lld", mlp ? "mlp" : "gelu_ffn",
                         gelu_path, gg_precision_string(modes[m]), (long long)M, (long long)D, (long long)F);
                char name[200];
                snprintf(name, sizeof name, "%s: pre-activation", what);
                expect_match(name, io.pre, 0, pre, MF, tl);
                snprintf(name, sizeof name, "%s: activation", what);
                expect_match(name, io.act, 0, act, MF, tl);
                snprintf(name, sizeof name, "%s: output", what);
                expect_match(name, io.out, 0, out, MD, tl);
                snprintf(name, sizeof name, "%s: tanh_inner", what);
                if (with_tanh) expect_match(name, io.tanh_inner, 0, t, MF, tl);
                else expect_untouched(name, io.tanh_inner, MF * 4);
            }
        }
        double *all[] = {x, w1, w2, b1, b2, pre, act, t, out};
        for (size_t i = 0; i < 9; ++i) free(all[i]);
        ffn_free(&io);
    }
}

/* Both GELU paths: the choice is read when a plan is made, so each gets a context of its own. */
static void ffn_blocks_match_reference(void **state) {
    (void)state;
    REQUIRE_GPU();
    const char *paths[] = {"epilogue", "kernel"};
    for (int p = 0; p < 2; ++p) {
        setenv("GG_FORWARD_GELU", paths[p], 1);
        gg_ctx *ctx = new_ctx();
        ffn_check(ctx, 0, paths[p]);
        ffn_check(ctx, 1, paths[p]);
        gg_ctx_destroy(ctx);
    }
    unsetenv("GG_FORWARD_GELU");
}

/* ---- block 4 ---- */
static void ssm_gate_matches_reference(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    static const int64_t dims[][2] = {{64, 128}, {200, 392}};
    for (size_t k = 0; k < N_TOKENS * 2; ++k) {
        const int64_t M = tokens_list[k % N_TOKENS], H = dims[k / N_TOKENS][0], E = dims[k / N_TOKENS][1];
        const size_t ME = (size_t)(M * E), HE = (size_t)(H * E), MH = (size_t)(M * H);
        rng r = {base_seed() + 300 + k};
        uint16_t *ssm = host_bf16(&r, ME, 1), *gate = host_bf16(&r, ME, 1), *w = host_bf16(&r, HE, 1 / sqrt((double)E));
        uint16_t *bias = host_bf16(&r, (size_t)H, 1);
        const gg_ssm_gate_fwd_args a = {dev_copy(ssm, ME * 2), dev_copy(gate, ME * 2), dev_copy(w, HE * 2),
                                        dev_copy(bias, (size_t)H * 2), dev_copy(NULL, ME * 2), dev_copy(NULL, ME * 2),
                                        dev_copy(NULL, MH * 2)};
        double *ga = malloc(ME * 8), *gated = malloc(ME * 8), *out = malloc(MH * 8);
        for (int silu = 0; silu <= 1; ++silu) {
            poison(a.gate_activated, ME * 2), poison(a.gated_output, ME * 2), poison(a.output, MH * 2);
            const gg_ssm_gate_desc d = {.tokens = M, .hidden = H, .expanded = E, .use_silu_gate = silu};
            GG_OK(ctx, gg_ssm_gate_forward(ctx, &d, &a, NULL));
            gg_ref_ssm_gate_forward(M, H, E, silu, ssm, gate, w, bias, ga, gated, out);
            char what[128];
            const tol tl = tol_for(GG_PRECISION_BF16);
            snprintf(what, sizeof what, "ssm_gate silu=%d M=%lld H=%lld E=%lld gate_activated", silu, (long long)M,
                     (long long)H, (long long)E);
            expect_match(what, a.gate_activated, 1, ga, ME, tl);
            snprintf(what, sizeof what, "ssm_gate silu=%d M=%lld gated_output", silu, (long long)M);
            expect_match(what, a.gated_output, 1, gated, ME, tl);
            snprintf(what, sizeof what, "ssm_gate silu=%d M=%lld output", silu, (long long)M);
            expect_match(what, a.output, 1, out, MH, tl);
        }
        free(ga), free(gated), free(out), free(ssm), free(gate), free(w), free(bias);
        void *all[] = {(void *)a.ssm_output, (void *)a.gate, (void *)a.weight, (void *)a.bias, a.gate_activated,
                       a.gated_output, a.output};
        for (size_t i = 0; i < 7; ++i) CUDA_OK(cudaFree(all[i]));
    }
    gg_ctx_destroy(ctx);
}

/* ---- the backward of the forward against finite differences ---- */
typedef struct fd_problem {
    const ffn_io *io;
    double *x, *w1, *b1, *w2, *b2, *dy;
    double *pre, *act, *out; /* scratch of the forward */
} fd_problem;

/* L = sum(dY * output(θ)) in double: its gradient is what the backward computes from dY. */
static double fd_loss(const fd_problem *p) {
    const int64_t M = p->io->M, D = p->io->D, F = p->io->F;
    if (p->io->mlp) gg_ref_mlp_forward(M, D, F, p->x, p->w1, p->b1, p->w2, p->b2, p->pre, p->act, p->out);
    else gg_ref_gelu_ffn_forward(M, D, F, p->x, p->w1, p->w2, p->pre, p->act, NULL, p->out);
    double L = 0.0;
    for (size_t i = 0; i < (size_t)(M * D); ++i) L += p->dy[i] * p->out[i];
    return L;
}

/* Central differences of fd_loss over every element of param, against got (the backward's gradient, on the device).
 * Step 1e-3 on O(1) values: the truncation error h^2/6 L''' is ~1e-7 of the gradient's size, double rounding
 * ~1e-13; the backward runs in FP32 on fp32-rounded saved activations, ~1e-6 relative with k <= 32. A gradient that
 * cancels keeps the absolute error of its terms, which is that of the largest terms: a few fp32 ulps of the
 * tensor's largest gradient (seen: 1.6e-5 on an element of 6e-3 whose tensor's largest is 13, about 1.2e-6 of it),
 * hence the floor of 1e-1 of the largest gradient. So 1e-4 (|fd| + 1e-1 max|fd|) passes a right chain and fails a
 * wrong saved tensor (a bias left out, the erf GELU in place of the tanh one: 1e-3 and more of most elements). */
static void fd_check(const char *what, fd_problem *p, double *param, size_t n, const void *got_dev) {
    const double h = 1e-3;
    double *fd = malloc(n * sizeof *fd), biggest = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double v = param[i];
        param[i] = v + h;
        const double lp = fd_loss(p);
        param[i] = v - h;
        const double lm = fd_loss(p);
        param[i] = v;
        fd[i] = (lp - lm) / (2 * h);
        biggest = fmax(biggest, fabs(fd[i]));
    }
    float *got = to_host(got_dev, n * 4);
    for (size_t i = 0; i < n; ++i) {
        const double tol = 1e-4 * (fabs(fd[i]) + 1e-1 * biggest);
        if (!(fabs((double)got[i] - fd[i]) <= tol))
            fail_msg("%s[%zu]: backward %.9g, finite differences %.9g (tolerance %.3g)", what, i, (double)got[i],
                     fd[i], tol);
    }
    free(got), free(fd);
}

static void ffn_backward_of_forward(gg_ctx *ctx, int mlp) {
    const int64_t M = 7, D = 16, F = 32;
    ffn_io io;
    ffn_make(&io, mlp, M, D, F, base_seed() + 400 + (uint64_t)mlp);
    const size_t MD = (size_t)(M * D), FD = (size_t)(F * D), MF = (size_t)(M * F);
    rng r = {base_seed() + 450 + (uint64_t)mlp};
    float *dy = host_f32(&r, MD, 1);
    void *ddy = dev_copy(dy, MD * 4), *gx = dev_copy(NULL, MD * 4), *gw1 = dev_copy(NULL, FD * 4);
    void *gw2 = dev_copy(NULL, FD * 4), *gb1 = dev_copy(NULL, (size_t)F * 4), *gb2 = dev_copy(NULL, (size_t)D * 4);
    GG_OK(ctx, ffn_forward(ctx, &io, GG_PRECISION_FP32, 1, NULL));
    if (mlp) {
        const gg_mlp_desc d = {.tokens = M, .hidden = D, .ffn = F, .precision = GG_PRECISION_FP32};
        const gg_mlp_args a = {ddy, io.dx, io.dw1, io.dw2, io.pre, io.act, gx, gw1, gb1, gw2, gb2,
                               NULL, NULL, NULL, NULL, NULL, NULL};
        GG_OK(ctx, gg_mlp_backward(ctx, &d, &a, NULL));
    } else {
        const gg_gelu_ffn_desc d = {.tokens = M, .hidden = D, .ffn = F, .precision = GG_PRECISION_FP32};
        const gg_gelu_ffn_args a = {ddy, io.dx, io.dw1, io.dw2, io.pre, io.tanh_inner, io.act, gx, gw1, gw2, NULL,
                                    NULL, NULL, NULL, NULL, NULL};
        GG_OK(ctx, gg_gelu_ffn_backward(ctx, &d, &a, NULL));
    }
    CUDA_OK(cudaDeviceSynchronize());
    fd_problem p = {&io, host_doubles(io.x, MD), host_doubles(io.w1, FD), host_doubles(io.b1, (size_t)F),
                    host_doubles(io.w2, FD), host_doubles(io.b2, (size_t)D), host_doubles(dy, MD),
                    malloc(MF * 8), malloc(MF * 8), malloc(MD * 8)};
    const char *block = mlp ? "mlp" : "gelu_ffn";
    char what[64];
    snprintf(what, sizeof what, "%s grad_hidden_states", block);
    fd_check(what, &p, p.x, MD, gx);
    snprintf(what, sizeof what, "%s grad_weight1", block);
    fd_check(what, &p, p.w1, FD, gw1);
    snprintf(what, sizeof what, "%s grad_weight2", block);
    fd_check(what, &p, p.w2, FD, gw2);
    if (mlp) {
        fd_check("mlp grad_bias1", &p, p.b1, (size_t)F, gb1);
        fd_check("mlp grad_bias2", &p, p.b2, (size_t)D, gb2);
    }
    double *all[] = {p.x, p.w1, p.b1, p.w2, p.b2, p.dy, p.pre, p.act, p.out};
    for (size_t i = 0; i < 9; ++i) free(all[i]);
    void *dev[] = {ddy, gx, gw1, gw2, gb1, gb2};
    for (size_t i = 0; i < 6; ++i) CUDA_OK(cudaFree(dev[i]));
    free(dy);
    ffn_free(&io);
}

static void backward_of_forward_matches_finite_differences(void **state) {
    (void)state;
    REQUIRE_GPU();
    const char *paths[] = {"epilogue", "kernel"};
    for (int p = 0; p < 2; ++p) {
        setenv("GG_FORWARD_GELU", paths[p], 1);
        gg_ctx *ctx = new_ctx();
        ffn_backward_of_forward(ctx, 0);
        ffn_backward_of_forward(ctx, 1);
        gg_ctx_destroy(ctx);
    }
    unsetenv("GG_FORWARD_GELU");
}

/* ---- captures ---- */

/* Runs fn once eagerly (into outputs it then copies to `eager`) and once as a captured graph, whose outputs must
 * equal the eager ones bitwise. */
typedef gg_status (*run_fn)(gg_ctx *ctx, void *user, gg_stream s);

static void expect_capture_equals_eager(gg_ctx *ctx, const char *what, run_fn run, void *user, void *const *outs,
                                        const size_t *bytes, int n_out) {
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    GG_OK(ctx, run(ctx, user, (gg_stream)s));
    CUDA_OK(cudaStreamSynchronize(s));
    void *eager[8];
    for (int i = 0; i < n_out; ++i) eager[i] = to_host(outs[i], bytes[i]);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const gg_status st = run(ctx, user, (gg_stream)s);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    if (st != GG_SUCCESS) fail_msg("%s in a capture: %s", what, gg_last_error(ctx));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < n_out; ++i) poison(outs[i], bytes[i]);
    CUDA_OK(cudaDeviceSynchronize()); /* the memsets ran on the legacy stream, which s is not ordered after */
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (int i = 0; i < n_out; ++i) {
        void *replayed = to_host(outs[i], bytes[i]);
        if (memcmp(replayed, eager[i], bytes[i]) != 0) fail_msg("%s: output %d of the replay differs", what, i);
        free(replayed), free(eager[i]);
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(s));
}

typedef struct ffn_run {
    const ffn_io *io;
    gg_precision precision;
} ffn_run;

/* The forward without ffn_forward's poisoning (a memset is capturable, but the comparison poisons itself). */
static gg_status run_ffn(gg_ctx *ctx, void *user, gg_stream s) {
    const ffn_run *f = user;
    const ffn_io *io = f->io;
    if (io->mlp) {
        const gg_mlp_desc d = {.tokens = io->M, .hidden = io->D, .ffn = io->F, .precision = f->precision};
        const gg_mlp_fwd_args a = {io->dx,  io->dw1, io->db1, io->dw2, io->db2, io->pre,
                                   io->act, io->out, NULL,    NULL,    NULL,    NULL, NULL};
        return gg_mlp_forward(ctx, &d, &a, s);
    }
    const gg_gelu_ffn_desc d = {.tokens = io->M, .hidden = io->D, .ffn = io->F, .precision = f->precision};
    const gg_gelu_ffn_fwd_args a = {io->dx,  io->dw1, io->dw2, io->pre, io->act, io->tanh_inner,
                                    io->out, NULL,    NULL,    NULL,    NULL, NULL};
    return gg_gelu_ffn_forward(ctx, &d, &a, s);
}

typedef struct ssm_run {
    gg_ssm_gate_desc d;
    gg_ssm_gate_fwd_args a;
} ssm_run;
static gg_status run_ssm(gg_ctx *ctx, void *user, gg_stream s) {
    const ssm_run *r = user;
    return gg_ssm_gate_forward(ctx, &r->d, &r->a, s);
}

typedef struct tanh_run {
    gg_tanh_gate_desc d;
    gg_tanh_gate_fwd_args a;
} tanh_run;
static gg_status run_tanh(gg_ctx *ctx, void *user, gg_stream s) {
    const tanh_run *r = user;
    return gg_tanh_gate_forward(ctx, &r->d, &r->a, s);
}

static void captured_forward_replays_eager_bits(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    static const gg_precision modes[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
    for (int mlp = 0; mlp <= 1; ++mlp)
        for (int m = 0; m < 3; ++m) {
            ffn_io io;
            ffn_make(&io, mlp, 333, 136, 520, base_seed() + 500 + (uint64_t)(mlp * 3 + m));
            ffn_run f = {&io, modes[m]};
            void *outs[] = {io.pre, io.act, io.out, io.tanh_inner};
            const size_t MF = (size_t)(io.M * io.F) * 4, bytes[] = {MF, MF, (size_t)(io.M * io.D) * 4, MF};
            char what[64];
            snprintf(what, sizeof what, "%s %s", mlp ? "gg_mlp_forward" : "gg_gelu_ffn_forward",
                     gg_precision_string(modes[m]));
            expect_capture_equals_eager(ctx, what, run_ffn, &f, outs, bytes, mlp ? 3 : 4);
            ffn_free(&io);
        }
    rng r = {base_seed() + 600};
    const int64_t M = 128, H = 200, E = 392;
    uint16_t *h[4] = {host_bf16(&r, (size_t)(M * E), 1), host_bf16(&r, (size_t)(M * E), 1),
                      host_bf16(&r, (size_t)(H * E), 0.05), host_bf16(&r, (size_t)H, 1)};
    ssm_run sr = {{.tokens = M, .hidden = H, .expanded = E, .use_silu_gate = 1},
                  {dev_copy(h[0], (size_t)(M * E) * 2), dev_copy(h[1], (size_t)(M * E) * 2),
                   dev_copy(h[2], (size_t)(H * E) * 2), dev_copy(h[3], (size_t)H * 2),
                   dev_copy(NULL, (size_t)(M * E) * 2), dev_copy(NULL, (size_t)(M * E) * 2),
                   dev_copy(NULL, (size_t)(M * H) * 2)}};
    void *souts[] = {sr.a.gate_activated, sr.a.gated_output, sr.a.output};
    const size_t sbytes[] = {(size_t)(M * E) * 2, (size_t)(M * E) * 2, (size_t)(M * H) * 2};
    expect_capture_equals_eager(ctx, "gg_ssm_gate_forward", run_ssm, &sr, souts, sbytes, 3);
    /* block 1 on the same buffers: residual, hidden_states [M,E]; the gate and the mask [M] read from the front of
     * the bias and the weight; output over gated_output */
    tanh_run tr = {{.tokens = M, .hidden = E},
                   {sr.a.ssm_output, sr.a.bias, sr.a.gate, sr.a.weight, sr.a.gated_output}};
    void *touts[] = {sr.a.gated_output};
    const size_t tbytes[] = {(size_t)(M * E) * 2};
    expect_capture_equals_eager(ctx, "gg_tanh_gate_forward", run_tanh, &tr, touts, tbytes, 1);
    for (int i = 0; i < 4; ++i) free(h[i]);
    void *all[] = {(void *)sr.a.ssm_output, (void *)sr.a.gate, (void *)sr.a.weight, (void *)sr.a.bias,
                   sr.a.gate_activated, sr.a.gated_output, sr.a.output};
    for (size_t i = 0; i < 7; ++i) CUDA_OK(cudaFree(all[i]));
    gg_ctx_destroy(ctx);
}

/* Inside a capture, a shape no forward has planned is refused with nothing enqueued, and the capture goes on: the
 * graph still instantiates and runs what else was captured. Block 1's forward has nothing to plan and runs. */
static void capture_refuses_an_unplanned_shape(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    ffn_io io;
    ffn_make(&io, 1, 7, 64, 256, base_seed() + 700);
    ffn_run f = {&io, GG_PRECISION_TF32};
    rng r = {base_seed() + 701};
    const int64_t M = 7, H = 64;
    uint16_t *res = host_bf16(&r, (size_t)(M * H), 1), *hs = host_bf16(&r, (size_t)(M * H), 1);
    uint16_t *mask = host_bf16(&r, (size_t)M, 1), *gate = host_bf16(&r, 1, 1);
    tanh_run tr = {{.tokens = M, .hidden = H},
                   {dev_copy(res, (size_t)(M * H) * 2), dev_copy(gate, 2), dev_copy(hs, (size_t)(M * H) * 2),
                    dev_copy(mask, (size_t)M * 2), dev_copy(NULL, (size_t)(M * H) * 2)}};
    poison(tr.a.output, (size_t)(M * H) * 2);
    CUDA_OK(cudaDeviceSynchronize()); /* the memset ran on the legacy stream, which s is not ordered after */
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const gg_status refused = run_ffn(ctx, &f, (gg_stream)s);
    const gg_status planned = run_tanh(ctx, &tr, (gg_stream)s);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    assert_int_equal(refused, GG_ERROR_INVALID_ARGUMENT);
    if (planned != GG_SUCCESS) fail_msg("gg_tanh_gate_forward in a capture: %s", gg_last_error(ctx));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    double *ref = malloc((size_t)(M * H) * 8);
    gg_ref_tanh_gate_forward(M, H, res, gate[0], hs, mask, ref);
    expect_match("gg_tanh_gate_forward planned in a capture", tr.a.output, 1, ref, (size_t)(M * H),
                 tol_for(GG_PRECISION_BF16));
    GG_OK(ctx, run_ffn(ctx, &f, (gg_stream)s)); /* eagerly: plans */
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(s));
    free(ref), free(res), free(hs), free(mask), free(gate);
    void *all[] = {(void *)tr.a.residual, (void *)tr.a.gate, (void *)tr.a.hidden_states, (void *)tr.a.mask,
                   tr.a.output};
    for (size_t i = 0; i < 5; ++i) CUDA_OK(cudaFree(all[i]));
    ffn_free(&io);
    gg_ctx_destroy(ctx);
}

/* ---- tensors past 2^31 elements ---- */
/* Blocks 2 and 3's forwards write the pre-activation, the activation and tanh_inner, [M, F] each: at 262144 tokens
 * and F = 8320 that is 2.18e9 elements (8.7 GB in fp32), so an element index or a byte offset held in 32 bits
 * anywhere (the GELU kernel, cuBLASLt's epilogue, a launch's size) would write wrong elements or leave some
 * poisoned. The tokens repeat one block of LARGE_P rows, so the CPU float64 reference of those rows is every row's:
 * tiled over the M rows on the GPU and compared there (the rule above, and no element past 10 tol). Needs ~45 GB of
 * GPU memory: skipped, saying so, with less than LARGE_MIN_GIB free. */
enum { LARGE_P = 256, LARGE_D = 64, LARGE_F = 8320, LARGE_MIN_GIB = 64 };
#define LARGE_M ((int64_t)262144)

/* dst (count bytes) filled with copies of its first `block` bytes, doubling what is filled with each copy. */
static void tile_in_place(void *dst, size_t block, size_t count) {
    for (size_t filled = block; filled < count; filled *= 2)
        CUDA_OK(cudaMemcpy((char *)dst + filled, dst, filled < count - filled ? filled : count - filled,
                           cudaMemcpyDeviceToDevice));
}

/* The device output `got` ([M, cols] fp32) against the reference of the first LARGE_P rows `ref` (host, double),
 * tiled into `tiled` (M x cols doubles on the device). */
static void expect_tiled_match(const char *what, const void *got, const double *ref, int64_t cols, double *tiled,
                               void *scratch, tol t) {
    const size_t block = (size_t)(LARGE_P * cols) * sizeof(double), n = (size_t)(LARGE_M * cols);
    CUDA_OK(cudaMemcpy(tiled, ref, block, cudaMemcpyHostToDevice));
    tile_in_place(tiled, block, n * sizeof(double));
    gg_h_compare_result r;
    CUDA_OK(gg_h_compare_f32(got, tiled, n, t.atol, t.rtol, scratch, NULL, &r));
    if (r.nonfinite || (double)r.matched < 0.99 * (double)r.n || r.worst_ratio > 10)
        fail_msg("%s: %llu of %llu elements match, %llu not finite, worst err/tol %.3g", what,
                 (unsigned long long)r.matched, (unsigned long long)r.n, (unsigned long long)r.nonfinite,
                 r.worst_ratio);
}

static void forward_past_32_bit_indices(void **state) {
    (void)state;
    REQUIRE_GPU();
    REQUIRE_FREE_GPU_GIB(LARGE_MIN_GIB);
    static const gg_precision modes[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
    const char *paths[] = {"epilogue", "kernel"};
    const int64_t M = LARGE_M, P = LARGE_P, D = LARGE_D, F = LARGE_F;
    assert_true(M * F > INT32_MAX); /* what this test is for */
    double *tiled = dev_copy(NULL, (size_t)(M * F) * sizeof(double));
    void *scratch = dev_copy(NULL, gg_h_compare_scratch_bytes());
    int runs = 0;
    for (int mlp = 0; mlp <= 1; ++mlp) {
        /* the first P rows made as the small tests make theirs, then repeated down the M rows */
        ffn_io small;
        ffn_make(&small, mlp, P, D, F, base_seed() + 300 + (uint64_t)mlp);
        ffn_io io = small;
        io.M = M;
        io.dx = dev_copy(NULL, (size_t)(M * D) * 4);
        CUDA_OK(cudaMemcpy(io.dx, small.x, (size_t)(P * D) * 4, cudaMemcpyHostToDevice));
        tile_in_place(io.dx, (size_t)(P * D) * 4, (size_t)(M * D) * 4);
        const size_t MF = (size_t)(M * F) * 4;
        io.pre = dev_copy(NULL, MF), io.act = dev_copy(NULL, MF), io.tanh_inner = dev_copy(NULL, MF);
        io.out = dev_copy(NULL, (size_t)(M * D) * 4);
        const size_t PD = (size_t)(P * D), PF = (size_t)(P * F), FD = (size_t)(F * D);
        double *x = host_doubles(small.x, PD), *w1 = host_doubles(small.w1, FD), *w2 = host_doubles(small.w2, FD);
        double *b1 = host_doubles(small.b1, (size_t)F), *b2 = host_doubles(small.b2, (size_t)D);
        double *pre = malloc(PF * 8), *act = malloc(PF * 8), *t = malloc(PF * 8), *out = malloc(PD * 8);
        assert_true(pre && act && t && out);
        if (mlp) gg_ref_mlp_forward(P, D, F, x, w1, b1, w2, b2, pre, act, out);
        else gg_ref_gelu_ffn_forward(P, D, F, x, w1, w2, pre, act, t, out);
        for (int p = 0; p < 2; ++p) {
            setenv("GG_FORWARD_GELU", paths[p], 1);
            gg_ctx *ctx = new_ctx(); /* the GELU's place is read when a plan is made */
            for (size_t m = 0; m < 3; ++m) {
                GG_OK(ctx, ffn_forward(ctx, &io, modes[m], !mlp, NULL));
                CUDA_OK(cudaDeviceSynchronize());
                char what[160], name[200];
                snprintf(what, sizeof what, "%s (GELU in the %s) %s M=%lld D=%lld F=%lld", mlp ? "mlp" : "gelu_ffn",
                         paths[p], gg_precision_string(modes[m]), (long long)M, (long long)D, (long long)F);
                const tol tl = tol_for(modes[m]);
                snprintf(name, sizeof name, "%s: pre-activation", what);
                expect_tiled_match(name, io.pre, pre, F, tiled, scratch, tl);
                snprintf(name, sizeof name, "%s: activation", what);
                expect_tiled_match(name, io.act, act, F, tiled, scratch, tl);
                snprintf(name, sizeof name, "%s: output", what);
                expect_tiled_match(name, io.out, out, D, tiled, scratch, tl);
                if (!mlp) {
                    snprintf(name, sizeof name, "%s: tanh_inner", what);
                    expect_tiled_match(name, io.tanh_inner, t, F, tiled, scratch, tl);
                }
                ++runs;
            }
            gg_ctx_destroy(ctx);
        }
        unsetenv("GG_FORWARD_GELU");
        double *all[] = {x, w1, w2, b1, b2, pre, act, t, out};
        for (size_t i = 0; i < 9; ++i) free(all[i]);
        void *big[] = {io.dx, io.pre, io.act, io.tanh_inner, io.out};
        for (size_t i = 0; i < 5; ++i) CUDA_OK(cudaFree(big[i]));
        ffn_free(&small);
    }
    CUDA_OK(cudaFree(tiled));
    CUDA_OK(cudaFree(scratch));
    printf("LARGE_FORWARD {\"runs\": %d, \"tokens\": %lld, \"ffn\": %lld}\n", runs, (long long)M, (long long)F);
}

int main(void) {
    apply_test_filter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tanh_gate_matches_reference),
        cmocka_unit_test(ffn_blocks_match_reference),
        cmocka_unit_test(ssm_gate_matches_reference),
        cmocka_unit_test(backward_of_forward_matches_finite_differences),
        cmocka_unit_test(captured_forward_replays_eager_bits),
        cmocka_unit_test(capture_refuses_an_unplanned_shape),
        cmocka_unit_test(forward_past_32_bit_indices),
    };
    return cmocka_run_group_tests_name("forward_gpu", tests, NULL, NULL);
}
