/*
 * test_optim_gpu.c - the fused optimizer on the GPU (label `gpu`; SKIPPED without one), against the float64
 * references of tests/ref/gg_ref_optim.c, over nine parameters of odd sizes (1, 3, 8, 777, 16384, 16385, 40000,
 * 40001, 1000003 elements: one chunk, a chunk and one element, many chunks), fp32 and bf16 gradients, fp16 and bf16
 * copies, tensors at 2- and 4-byte offsets from 16-byte alignment (the scalar path) and aligned ones (the vector
 * path with its tail), weight decay on and off per parameter, gradients from 1e-7 (eps dominates Adam's
 * denominator) to 100:
 *   - AdamW, several steps, the learning rate changed between steps, loss-scaled gradients; AdamW with clipping
 *     active and with a bound it never reaches (the norm checked too); SGD with momentum and Nesterov, with
 *     dampening, plain with clipping;
 *   - a non-finite gradient (NaN, bf16 Inf, a finite gradient that is Inf once unscaled) skips the whole step:
 *     weights unchanged bit for bit, copies still poisoned, step counts not advanced, found-inf read back as 1;
 *     the next finite step equals the reference's step that follows the last one taken;
 *   - a step captured in a CUDA graph and replayed 5 times (the learning rate set between replays) equals 5 eager
 *     steps bit for bit: weights, copies, step counts, norm;
 *   - steps of parameter ranges (gg_optim_step_params) equal whole steps bit for bit;
 *   - one parameter of more than 2^31 elements (adamw_past_32_bit_indices), where the GPU has the memory.
 * Fresh random data every run: the seed is printed (GG_OPTIM_SEED=n repeats one).
 *
 * The rule. After S steps every weight satisfies |p - p_ref| <= 32 S 2^-24 scale, where scale is the reference's
 * running error scale (gg_ref_optim_step's abs_p: the same recurrences on the terms' magnitudes) — each fp32
 * operation of the update rounds once, errors of the moments carry into later steps at most S-fold, and about
 * fifteen operations make a step; NaN never passes. The gradient norm is within 8 2^-24 of the reference's (in
 * relative terms). Copies are poisoned (all bits set: NaN in fp16 and bf16) before every step and must equal the
 * GPU's own updated fp32 weight rounded to nearest even, bit for bit.
 */
#include <time.h>

#include "gpu_test.h"

#include "gg_ref.h"
#include "gg_ref_optim.h"

enum { NO_COPY = -1, N_PARAMS = 9 };

typedef struct spec {
    int64_t count;
    int p_off;                 /* bytes past a 256-byte aligned allocation */
    gg_optim_dtype grad_dtype;
    int g_off;
    int copy; /* NO_COPY or a gg_optim_dtype */
    int c_off;
    int no_decay;
    double grad_scale; /* the gradients' standard deviation */
} spec;

static const spec specs[N_PARAMS] = {
    {1, 0, GG_OPTIM_FP32, 0, NO_COPY, 0, 0, 1.0},
    {3, 4, GG_OPTIM_BF16, 2, GG_OPTIM_BF16, 2, 1, 1.0},
    {1000003, 0, GG_OPTIM_FP32, 0, GG_OPTIM_FP16, 0, 0, 1.0},
    {16384, 0, GG_OPTIM_BF16, 0, GG_OPTIM_BF16, 0, 0, 1e-7},
    {16385, 4, GG_OPTIM_FP32, 4, GG_OPTIM_FP16, 2, 0, 100.0},
    {40001, 0, GG_OPTIM_FP32, 4, NO_COPY, 0, 1, 1.0},
    {8, 0, GG_OPTIM_FP32, 0, GG_OPTIM_BF16, 0, 0, 1.0},
    {777, 4, GG_OPTIM_BF16, 2, NO_COPY, 0, 0, 1.0},
    {40000, 0, GG_OPTIM_BF16, 0, GG_OPTIM_FP16, 8, 1, 1e-3},
};

typedef struct tensor {
    spec s;
    void *p_base, *g_base, *c_base; /* the allocations */
    float *p;                       /* at the offsets */
    void *g, *c;
    float *hg;                /* the gradient as the GPU holds it (bf16 values exactly) */
    float *hp;                /* the GPU's weights, read back */
    uint16_t *hc;             /* the GPU's copy, read back */
    double *rp, *rm, *rv;     /* the reference's weights and moments */
    double *ap, *am;          /* its error scale */
    double *geff;             /* the gradient the reference's update uses */
} tensor;

typedef struct model {
    tensor t[N_PARAMS];
    gg_optim *opt;
    gg_ref_optim h;
    double inv_scale;  /* what the optimizer's loss scale word holds, as a double */
    double max_norm;   /* 0: no clipping */
    double norm;       /* the reference's last norm */
} model;

/* ---- random numbers: gpu_test.h's splitmix64 ---- */
static uint64_t rng_state;
static double uniform(void) { return ((double)(next_u64(&rng_state) >> 11) + 0.5) / 9007199254740992.0; }
static double normal(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static uint64_t test_seed;
static uint64_t seed_for(int test) { return test_seed * 1000003u + (uint64_t)test; }

/* ---- the model ---- */
static size_t elem_size(int dtype) { return dtype == GG_OPTIM_FP32 ? 4 : 2; }

static void *alloc_at(void **base, size_t bytes, int off) {
    CUDA_OK(cudaMalloc(base, bytes + 256));
    return (char *)*base + off;
}

static void *host_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) fail_msg("out of host memory");
    return p;
}

/* Allocates and fills the weights with U(-1, 1) from `seed`; moments zero. */
static void model_init(model *m, uint64_t seed) {
    memset(m, 0, sizeof *m);
    rng_state = seed;
    m->inv_scale = 1.0;
    for (int i = 0; i < N_PARAMS; ++i) {
        tensor *t = &m->t[i];
        t->s = specs[i];
        const size_t n = (size_t)t->s.count;
        t->p = alloc_at(&t->p_base, 4 * n, t->s.p_off);
        t->g = alloc_at(&t->g_base, elem_size(t->s.grad_dtype) * n, t->s.g_off);
        if (t->s.copy != NO_COPY) t->c = alloc_at(&t->c_base, 2 * n, t->s.c_off);
        t->hg = host_alloc(4 * n);
        t->hp = host_alloc(4 * n);
        t->hc = host_alloc(2 * n);
        t->rp = host_alloc(8 * n), t->rm = host_alloc(8 * n), t->rv = host_alloc(8 * n);
        t->ap = host_alloc(8 * n), t->am = host_alloc(8 * n), t->geff = host_alloc(8 * n);
        for (size_t j = 0; j < n; ++j) {
            t->hp[j] = (float)(2.0 * uniform() - 1.0);
            t->rp[j] = t->hp[j];
            t->ap[j] = fabs(t->rp[j]);
        }
        CUDA_OK(cudaMemcpy(t->p, t->hp, 4 * n, cudaMemcpyHostToDevice));
    }
}

static void model_free(model *m) {
    gg_optim_destroy(m->opt);
    for (int i = 0; i < N_PARAMS; ++i) {
        tensor *t = &m->t[i];
        cudaFree(t->p_base), cudaFree(t->g_base), cudaFree(t->c_base);
        free(t->hg), free(t->hp), free(t->hc), free(t->rp), free(t->rm), free(t->rv), free(t->ap), free(t->am);
        free(t->geff);
    }
}

/* The optimizer over the model's tensors; the reference's hyperparameters from the same config. */
static void model_attach(model *m, gg_ctx *ctx, const gg_optim_config *c) {
    GG_OK(ctx, gg_optim_create(ctx, c, &m->opt));
    for (int i = 0; i < N_PARAMS; ++i) {
        const tensor *t = &m->t[i];
        const gg_optim_param p = {.param = t->p, .grad = t->g, .grad_dtype = t->s.grad_dtype, .count = t->s.count,
                                  .copy = t->c, .copy_dtype = t->s.copy == NO_COPY ? GG_OPTIM_FP32
                                                                                   : (gg_optim_dtype)t->s.copy,
                                  .no_weight_decay = t->s.no_decay};
        GG_OK(ctx, gg_optim_add_param(m->opt, &p));
    }
    GG_OK(ctx, gg_optim_finalize(m->opt));
    const double wd = c->weight_decay == GG_OPTIM_DEFAULT_WEIGHT_DECAY ? (c->kind == GG_OPTIM_ADAMW ? 1e-2f : 0.0f)
                                                                       : c->weight_decay;
    m->h = (gg_ref_optim){.sgd = c->kind == GG_OPTIM_SGD, .lr = c->lr, .beta1 = c->beta1, .beta2 = c->beta2,
                          .eps = c->eps, .weight_decay = (double)(float)wd, .momentum = c->momentum,
                          .dampening = c->dampening, .nesterov = c->nesterov};
    m->max_norm = c->max_grad_norm;
}

/* Fresh gradients: N(0, grad_scale) × factor (the loss scale), rounded to the gradient's dtype; element `at` of
 * tensor `bad` (when >= 0) set to `value`. */
static void set_grads(model *m, double factor, int bad, size_t at, float value) {
    for (int i = 0; i < N_PARAMS; ++i) {
        tensor *t = &m->t[i];
        const size_t n = (size_t)t->s.count;
        for (size_t j = 0; j < n; ++j) {
            float g = (float)(normal() * t->s.grad_scale * factor);
            if (i == bad && j == at) g = value;
            t->hg[j] = t->s.grad_dtype == GG_OPTIM_BF16 ? gg_ref_bf16_to_f32(gg_ref_f32_to_bf16(g)) : g;
        }
        if (t->s.grad_dtype == GG_OPTIM_FP32) {
            CUDA_OK(cudaMemcpy(t->g, t->hg, 4 * n, cudaMemcpyHostToDevice));
        } else {
            uint16_t *bits = host_alloc(2 * n);
            for (size_t j = 0; j < n; ++j) bits[j] = gg_ref_f32_to_bf16(t->hg[j]);
            CUDA_OK(cudaMemcpy(t->g, bits, 2 * n, cudaMemcpyHostToDevice));
            free(bits);
        }
    }
}

/* Copies' bits all set: NaN in fp16 and bf16, so that an element the step does not write fails. */
static void poison_copies(model *m) {
    for (int i = 0; i < N_PARAMS; ++i)
        if (m->t[i].c) CUDA_OK(cudaMemset(m->t[i].c, 0xff, 2 * (size_t)m->t[i].s.count));
}

/* The reference's step t on the current gradients: unscale, the global norm, clip, update. */
static void ref_step(model *m, int64_t t) {
    double sum = 0.0;
    for (int i = 0; i < N_PARAMS; ++i)
        for (int64_t j = 0; j < m->t[i].s.count; ++j) {
            const double u = (double)m->t[i].hg[j] * m->inv_scale;
            sum += u * u;
        }
    m->norm = sqrt(sum);
    const double coef = m->max_norm > 0.0 ? gg_ref_clip_coef(m->norm, m->max_norm) : 1.0;
    for (int i = 0; i < N_PARAMS; ++i) {
        tensor *x = &m->t[i];
        for (int64_t j = 0; j < x->s.count; ++j) x->geff[j] = (double)x->hg[j] * m->inv_scale * coef;
        gg_ref_optim_step(&m->h, (size_t)x->s.count, x->rp, x->rm, x->rv, x->geff, t, !x->s.no_decay, x->ap, x->am);
    }
}

static void read_back(model *m) {
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < N_PARAMS; ++i) {
        tensor *t = &m->t[i];
        CUDA_OK(cudaMemcpy(t->hp, t->p, 4 * (size_t)t->s.count, cudaMemcpyDeviceToHost));
        if (t->c) CUDA_OK(cudaMemcpy(t->hc, t->c, 2 * (size_t)t->s.count, cudaMemcpyDeviceToHost));
    }
}

static uint16_t rounded(float x, int dtype) {
    return dtype == GG_OPTIM_BF16 ? gg_ref_f32_to_bf16(x) : gg_ref_f32_to_f16(x);
}

/* The rule of the header comment after `steps` steps; prints the first failures and fails. */
static void check_against_reference(model *m, int steps, const char *what) {
    read_back(m);
    const double u = 0x1p-24;
    int bad = 0;
    double worst = 0.0;
    for (int i = 0; i < N_PARAMS; ++i) {
        const tensor *t = &m->t[i];
        for (int64_t j = 0; j < t->s.count; ++j) {
            const double tol = 32.0 * steps * u * t->ap[j], err = fabs((double)t->hp[j] - t->rp[j]);
            if (tol > 0 && err / tol > worst) worst = err / tol;
            if (!(err <= tol) && bad++ < 5)
                fprintf(stderr, "  %s, step %d: param %d [%lld]: gpu %.9g, ref %.12g, |diff| %.3g > tol %.3g\n", what,
                        steps, i, (long long)j, (double)t->hp[j], t->rp[j], err, tol);
            if (t->c && t->hc[j] != rounded(t->hp[j], t->s.copy) && bad++ < 5)
                fprintf(stderr, "  %s, step %d: param %d [%lld]: copy 0x%04x, the weight %.9g rounds to 0x%04x\n",
                        what, steps, i, (long long)j, t->hc[j], (double)t->hp[j], rounded(t->hp[j], t->s.copy));
        }
    }
    printf("  %s, step %d: worst |diff| / tol = %.3f\n", what, steps, worst);
    if (bad) fail_msg("%s, step %d: %d elements outside the rule (seed %llu)", what, steps, bad,
                      (unsigned long long)test_seed);
}

static void check_norm(model *m, gg_ctx *ctx, const char *what) {
    int found = -1;
    float norm = 0.0f;
    GG_OK(ctx, gg_optim_last_step(m->opt, &found, &norm));
    assert_int_equal(found, 0);
    if (!(fabs((double)norm - m->norm) <= 8 * 0x1p-24 * m->norm))
        fail_msg("%s: grad norm %.9g, reference %.12g (seed %llu)", what, (double)norm, m->norm,
                 (unsigned long long)test_seed);
}

/* Runs `steps` steps of config c from fresh data, checking each; lr_after: the learning rate set after step 2 (0:
 * unchanged); loss: the loss scale from step 2 on (1: none). */
static void run_against_reference(gg_ctx *ctx, const gg_optim_config *c, int steps, float lr_after, float loss,
                                  int test, const char *what) {
    model m;
    model_init(&m, seed_for(test));
    model_attach(&m, ctx, c);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int s = 1; s <= steps; ++s) {
        if (s == 3 && lr_after > 0.0f) {
            GG_OK(ctx, gg_optim_set_lr(m.opt, lr_after, stream));
            m.h.lr = lr_after;
        }
        if (s == 2 && loss != 1.0f) {
            GG_OK(ctx, gg_optim_set_loss_scale(m.opt, loss, stream));
            m.inv_scale = (double)(float)(1.0 / (double)loss);
        }
        set_grads(&m, s >= 2 ? loss : 1.0, -1, 0, 0.0f);
        poison_copies(&m);
        CUDA_OK(cudaDeviceSynchronize()); /* the copies above ran on the legacy stream */
        GG_OK(ctx, gg_optim_step(m.opt, stream));
        ref_step(&m, s);
        check_against_reference(&m, s, what);
        if (c->max_grad_norm > 0.0f || c->check_finite) check_norm(&m, ctx, what);
    }
    CUDA_OK(cudaStreamDestroy(stream));
    model_free(&m);
}

static void adamw_matches_reference(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.lr = 1e-2f;
    run_against_reference(ctx, &c, 5, 5e-3f, 1024.0f, 1, "AdamW, lr changed, loss scale 1024");
    c.lr = 1e-3f;
    c.beta1 = 0.5f; /* lerp's other form (weight 0.5) */
    c.beta2 = 0.99f;
    c.weight_decay = 0.1f;
    run_against_reference(ctx, &c, 3, 0.0f, 1000.0f, 2, "AdamW, beta1 0.5, loss scale 1000");
    gg_ctx_destroy(ctx);
}

static void adamw_clipped(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.lr = 1e-2f;
    c.max_grad_norm = 1.0f; /* the gradients' norm is in the thousands: every step clips */
    run_against_reference(ctx, &c, 3, 0.0f, 1.0f, 3, "AdamW, clipped to norm 1");
    c.max_grad_norm = 1e9f; /* never reached: the coefficient is 1 */
    c.check_finite = 0;
    run_against_reference(ctx, &c, 2, 0.0f, 1.0f, 4, "AdamW, clipping bound not reached, no finite check");
    gg_ctx_destroy(ctx);
}

static void sgd_matches_reference(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.kind = GG_OPTIM_SGD;
    c.lr = 1e-2f;
    c.momentum = 0.9f;
    c.nesterov = 1;
    c.weight_decay = 1e-2f;
    run_against_reference(ctx, &c, 4, 2e-2f, 1.0f, 5, "SGD, Nesterov momentum, L2 decay");
    c.nesterov = 0;
    c.dampening = 0.1f;
    c.weight_decay = 0.0f;
    run_against_reference(ctx, &c, 3, 0.0f, 512.0f, 6, "SGD, momentum with dampening, loss scale 512");
    c.momentum = 0.0f;
    c.dampening = 0.0f;
    c.weight_decay = 1e-2f;
    c.max_grad_norm = 10.0f;
    run_against_reference(ctx, &c, 3, 0.0f, 1.0f, 7, "SGD plain, clipped to norm 10");
    gg_ctx_destroy(ctx);
}

/* The step counts of every parameter, read back. */
static void read_steps(gg_ctx *ctx, model *m, int64_t *steps) {
    gg_optim_device_ptrs ptrs;
    GG_OK(ctx, gg_optim_device_pointers(m->opt, &ptrs));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(steps, ptrs.steps, sizeof(int64_t) * N_PARAMS, cudaMemcpyDeviceToHost));
}

static void found_inf_skips_the_step(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.lr = 1e-2f;
    c.max_grad_norm = 5.0f;
    const struct {
        int param;
        size_t at;
        float value;
        float loss_scale; /* set before the bad step (the inverse multiplies the gradients) */
        const char *what;
    } bad[] = {
        {2, 999999, NAN, 1.0f, "a NaN in an fp32 gradient"},
        {3, 16383, INFINITY, 1.0f, "an Inf in a bf16 gradient"},
        {7, 5, -INFINITY, 1.0f, "-Inf in a misaligned bf16 gradient"},
        {0, 0, 1e30f, 1e-20f, "a finite gradient that is Inf once unscaled"},
    };
    for (int b = 0; b < 4; ++b) {
        model m;
        model_init(&m, seed_for(10 + b));
        model_attach(&m, ctx, &c);
        cudaStream_t stream;
        CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        set_grads(&m, 1.0, -1, 0, 0.0f);
        poison_copies(&m);
        CUDA_OK(cudaDeviceSynchronize()); /* the copies above ran on the legacy stream */
        GG_OK(ctx, gg_optim_step(m.opt, stream));
        ref_step(&m, 1);
        check_against_reference(&m, 1, bad[b].what);

        /* the bad step: nothing changes */
        float *before[N_PARAMS];
        for (int i = 0; i < N_PARAMS; ++i) {
            before[i] = host_alloc(4 * (size_t)m.t[i].s.count);
            memcpy(before[i], m.t[i].hp, 4 * (size_t)m.t[i].s.count);
        }
        if (bad[b].loss_scale != 1.0f) GG_OK(ctx, gg_optim_set_loss_scale(m.opt, bad[b].loss_scale, stream));
        set_grads(&m, 1.0, bad[b].param, bad[b].at, bad[b].value);
        poison_copies(&m);
        CUDA_OK(cudaDeviceSynchronize());
        GG_OK(ctx, gg_optim_step(m.opt, stream));
        int found = -1;
        GG_OK(ctx, gg_optim_last_step(m.opt, &found, NULL));
        if (found != 1) fail_msg("%s: found_inf = %d, want 1 (seed %llu)", bad[b].what, found,
                                 (unsigned long long)test_seed);
        read_back(&m);
        int64_t steps[N_PARAMS];
        read_steps(ctx, &m, steps);
        for (int i = 0; i < N_PARAMS; ++i) {
            if (memcmp(before[i], m.t[i].hp, 4 * (size_t)m.t[i].s.count) != 0)
                fail_msg("%s: param %d's weights changed in a skipped step", bad[b].what, i);
            for (int64_t j = 0; m.t[i].c && j < m.t[i].s.count; ++j)
                if (m.t[i].hc[j] != 0xffff)
                    fail_msg("%s: param %d's copy was written in a skipped step", bad[b].what, i);
            assert_int_equal(steps[i], 1);
            free(before[i]);
        }

        /* the next finite step is the reference's step 2 */
        if (bad[b].loss_scale != 1.0f) GG_OK(ctx, gg_optim_set_loss_scale(m.opt, 1.0f, stream));
        set_grads(&m, 1.0, -1, 0, 0.0f);
        poison_copies(&m);
        CUDA_OK(cudaDeviceSynchronize());
        GG_OK(ctx, gg_optim_step(m.opt, stream));
        ref_step(&m, 2);
        check_against_reference(&m, 2, bad[b].what);
        check_norm(&m, ctx, bad[b].what); /* found_inf back to 0 */
        read_steps(ctx, &m, steps);
        for (int i = 0; i < N_PARAMS; ++i) assert_int_equal(steps[i], 2);
        CUDA_OK(cudaStreamDestroy(stream));
        model_free(&m);
    }
    gg_ctx_destroy(ctx);
}

/* Every device-side result of two models, bit for bit: weights, copies, step counts, the norm and found-inf. */
static void assert_same_bits(gg_ctx *ctx, model *a, model *b, const char *what) {
    read_back(a);
    read_back(b);
    for (int i = 0; i < N_PARAMS; ++i) {
        const size_t n = (size_t)a->t[i].s.count;
        if (memcmp(a->t[i].hp, b->t[i].hp, 4 * n) != 0) fail_msg("%s: param %d's weights differ", what, i);
        if (a->t[i].c && memcmp(a->t[i].hc, b->t[i].hc, 2 * n) != 0) fail_msg("%s: param %d's copies differ", what, i);
    }
    int64_t sa[N_PARAMS], sb[N_PARAMS];
    read_steps(ctx, a, sa);
    read_steps(ctx, b, sb);
    assert_memory_equal(sa, sb, sizeof sa);
    gg_optim_device_ptrs pa, pb;
    GG_OK(ctx, gg_optim_device_pointers(a->opt, &pa));
    GG_OK(ctx, gg_optim_device_pointers(b->opt, &pb));
    float na = 0, nb = 0;
    unsigned fa = 7, fb = 8;
    CUDA_OK(cudaMemcpy(&na, pa.grad_norm, sizeof na, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&nb, pb.grad_norm, sizeof nb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&fa, pa.found_inf, sizeof fa, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&fb, pb.found_inf, sizeof fb, cudaMemcpyDeviceToHost));
    assert_memory_equal(&na, &nb, sizeof na);
    assert_int_equal(fa, fb);
}

static void capture_replays_equal_eager(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.lr = 1e-2f;
    c.max_grad_norm = 1.0f;
    model eager, graphed;
    model_init(&eager, seed_for(20));
    model_init(&graphed, seed_for(20));
    model_attach(&eager, ctx, &c);
    model_attach(&graphed, ctx, &c);
    rng_state = seed_for(21);
    set_grads(&eager, 1.0, -1, 0, 0.0f);
    rng_state = seed_for(21);
    set_grads(&graphed, 1.0, -1, 0, 0.0f);
    CUDA_OK(cudaDeviceSynchronize()); /* the copies above ran on the legacy stream */
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    GG_OK(ctx, gg_optim_step(graphed.opt, stream));
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    const float lrs[5] = {1e-2f, 8e-3f, 6e-3f, 4e-3f, 2e-3f};
    for (int k = 0; k < 5; ++k) {
        GG_OK(ctx, gg_optim_set_lr(eager.opt, lrs[k], stream));
        GG_OK(ctx, gg_optim_step(eager.opt, stream));
        GG_OK(ctx, gg_optim_set_lr(graphed.opt, lrs[k], stream));
        CUDA_OK(cudaGraphLaunch(exec, stream));
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    assert_same_bits(ctx, &eager, &graphed, "5 replays against 5 eager steps");
    int64_t steps[N_PARAMS];
    read_steps(ctx, &graphed, steps);
    for (int i = 0; i < N_PARAMS; ++i) assert_int_equal(steps[i], 5);
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(stream));
    model_free(&eager);
    model_free(&graphed);
    gg_ctx_destroy(ctx);
}

/* kind 0: AdamW; 1: SGD with momentum 0.9; PyTorch's defaults otherwise. */
static gg_optim_config adamw_or_sgd(int kind) {
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.kind = kind ? GG_OPTIM_SGD : GG_OPTIM_ADAMW;
    c.momentum = kind ? 0.9f : 0.0f;
    return c;
}

static void step_params_equals_step(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int kind = 0; kind < 2; ++kind) {
        gg_optim_config c = adamw_or_sgd(kind);
        c.check_finite = 0;
        model whole, parts;
        model_init(&whole, seed_for(30 + kind));
        model_init(&parts, seed_for(30 + kind));
        model_attach(&whole, ctx, &c);
        model_attach(&parts, ctx, &c);
        for (int s = 0; s < 3; ++s) {
            rng_state = seed_for(40 + s);
            set_grads(&whole, 1.0, -1, 0, 0.0f);
            rng_state = seed_for(40 + s);
            set_grads(&parts, 1.0, -1, 0, 0.0f);
            GG_OK(ctx, gg_optim_step(whole.opt, NULL));
            GG_OK(ctx, gg_optim_step_params(parts.opt, 5, 4, NULL)); /* in any order, each range once */
            GG_OK(ctx, gg_optim_step_params(parts.opt, 0, 2, NULL));
            GG_OK(ctx, gg_optim_step_params(parts.opt, 2, 3, NULL));
        }
        assert_same_bits(ctx, &whole, &parts, kind ? "SGD, ranges" : "AdamW, ranges");
        model_free(&whole);
        model_free(&parts);
    }
    gg_ctx_destroy(ctx);
}

/* b's weights and copies := a's (the same specs). */
static void copy_weights(const model *a, model *b) {
    for (int i = 0; i < N_PARAMS; ++i) {
        const size_t n = (size_t)a->t[i].s.count;
        CUDA_OK(cudaMemcpy(b->t[i].p, a->t[i].p, 4 * n, cudaMemcpyDeviceToDevice));
        if (a->t[i].c) CUDA_OK(cudaMemcpy(b->t[i].c, a->t[i].c, 2 * n, cudaMemcpyDeviceToDevice));
    }
}

/* A checkpoint resumes bit for bit: a takes 3 steps and a new learning rate, and its state is saved; b, over a copy
 * of a's weights, loads it, and saves the same bytes again; then a and b take the same 2 steps, and every result is
 * the same bits. A third optimizer over the same copy without the load ends elsewhere, so the check can fail. AdamW
 * with clipping, and SGD with momentum. */
static void checkpoint_resumes_bit_for_bit(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int kind = 0; kind < 2; ++kind) {
        gg_optim_config c = adamw_or_sgd(kind);
        c.lr = 1e-2f;
        c.max_grad_norm = kind ? 0.0f : 1.0f;
        model a, b, fresh;
        model_init(&a, seed_for(60 + kind));
        model_attach(&a, ctx, &c);
        for (int s = 0; s < 3; ++s) {
            rng_state = seed_for(70 + s);
            set_grads(&a, 1.0, -1, 0, 0.0f);
            GG_OK(ctx, gg_optim_step(a.opt, NULL));
        }
        GG_OK(ctx, gg_optim_set_lr(a.opt, 5e-3f, NULL));
        size_t n = 0;
        GG_OK(ctx, gg_optim_state_size(a.opt, &n));
        char *saved = host_alloc(n), *again = host_alloc(n);
        GG_OK(ctx, gg_optim_save_state(a.opt, saved, n));
        model_init(&b, seed_for(80 + kind));
        model_init(&fresh, seed_for(80 + kind));
        copy_weights(&a, &b);
        copy_weights(&a, &fresh);
        model_attach(&b, ctx, &c);
        model_attach(&fresh, ctx, &c);
        GG_OK(ctx, gg_optim_load_state(b.opt, saved, n));
        GG_OK(ctx, gg_optim_save_state(b.opt, again, n));
        if (memcmp(saved, again, n) != 0) fail_msg("%s: the loaded state saves other bytes", kind ? "SGD" : "AdamW");
        for (int s = 0; s < 2; ++s) {
            model *ms[3] = {&a, &b, &fresh};
            for (int k = 0; k < 3; ++k) {
                rng_state = seed_for(90 + s);
                set_grads(ms[k], 1.0, -1, 0, 0.0f);
                GG_OK(ctx, gg_optim_step(ms[k]->opt, NULL));
            }
        }
        assert_same_bits(ctx, &a, &b, kind ? "SGD, resumed from a checkpoint" : "AdamW, resumed from a checkpoint");
        read_back(&fresh);
        int differ = 0;
        for (int i = 0; i < N_PARAMS; ++i)
            differ += memcmp(a.t[i].hp, fresh.t[i].hp, 4 * (size_t)a.t[i].s.count) != 0;
        if (2 * differ < N_PARAMS)
            fail_msg("without the load, only %d of %d parameters end elsewhere", differ, N_PARAMS);
        printf("  %s: %zu bytes of state; resumed bit for bit, %d of %d parameters elsewhere without it\n",
               kind ? "SGD with momentum" : "AdamW", n, differ, N_PARAMS);
        free(saved), free(again);
        model_free(&a), model_free(&b), model_free(&fresh);
    }
    gg_ctx_destroy(ctx);
}

/* One parameter of more than 2^31 elements (an embedding of 262144 x 8192 has as many), where an element's chunk
 * offset or a count held in 32 bits would update the wrong elements or none: AdamW with clipping active (the global
 * norm summed over its 131136 chunks), an fp16 copy. Weights and gradients repeat a block of PERIOD random
 * elements, so the float64 reference of that block (and the norm, from the block's sum of squares times the number
 * of repeats) is every element's; every weight is checked by the rule and every copy bit for bit, the norm too. */
static void adamw_past_32_bit_indices(void **state) {
    (void)state;
    REQUIRE_GPU();
    REQUIRE_FREE_GPU_GIB(48); /* weights, gradient, copy and moments: 39 GB */
    enum { PERIOD = 4096 };
    const size_t n = ((size_t)1 << 31) + ((size_t)1 << 20) + 3, part = (size_t)1 << 26;
    rng_state = seed_for(9);
    float hp[PERIOD], hg[PERIOD];
    double rp[PERIOD], rm[PERIOD] = {0}, rv[PERIOD] = {0}, ap[PERIOD], am[PERIOD] = {0}, geff[PERIOD];
    double block_sum = 0.0, head_sum = 0.0; /* the block's sum of squares, and of its first n % PERIOD elements */
    for (int j = 0; j < PERIOD; ++j) {
        hp[j] = (float)normal(), hg[j] = (float)normal();
        rp[j] = hp[j], ap[j] = fabs((double)hp[j]);
        block_sum += (double)hg[j] * hg[j];
        if ((size_t)j < n % PERIOD) head_sum += (double)hg[j] * hg[j];
    }
    const double norm = sqrt(block_sum * (double)(n / PERIOD) + head_sum);
    gg_optim_config c = GG_OPTIM_CONFIG_INIT;
    c.lr = 1e-2f;
    c.max_grad_norm = (float)(norm / 4); /* clipping active */
    const double coef = gg_ref_clip_coef(norm, (double)c.max_grad_norm);
    for (int j = 0; j < PERIOD; ++j) geff[j] = (double)hg[j] * coef;
    const gg_ref_optim h = {.lr = c.lr, .beta1 = c.beta1, .beta2 = c.beta2, .eps = c.eps,
                            .weight_decay = (double)(float)1e-2f};
    gg_ref_optim_step(&h, PERIOD, rp, rm, rv, geff, 1, 1, ap, am);

    float *p = NULL, *g = NULL;
    uint16_t *copy = NULL;
    CUDA_OK(cudaMalloc((void **)&p, n * 4));
    CUDA_OK(cudaMalloc((void **)&g, n * 4));
    CUDA_OK(cudaMalloc((void **)&copy, n * 2));
    CUDA_OK(cudaMemcpy(p, hp, sizeof hp, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(g, hg, sizeof hg, cudaMemcpyHostToDevice));
    for (size_t filled = PERIOD; filled < n; filled *= 2) { /* element i = element i % PERIOD */
        const size_t k = filled < n - filled ? filled : n - filled;
        CUDA_OK(cudaMemcpy(p + filled, p, k * 4, cudaMemcpyDeviceToDevice));
        CUDA_OK(cudaMemcpy(g + filled, g, k * 4, cudaMemcpyDeviceToDevice));
    }
    CUDA_OK(cudaMemset(copy, 0xff, n * 2));
    gg_ctx *ctx = new_ctx();
    gg_optim *opt = NULL;
    GG_OK(ctx, gg_optim_create(ctx, &c, &opt));
    const gg_optim_param param = {.param = p, .grad = g, .count = (int64_t)n, .copy = copy,
                                  .copy_dtype = GG_OPTIM_FP16};
    GG_OK(ctx, gg_optim_add_param(opt, &param));
    GG_OK(ctx, gg_optim_finalize(opt));
    GG_OK(ctx, gg_optim_step(opt, NULL));
    int found = -1;
    float got_norm = 0.0f;
    GG_OK(ctx, gg_optim_last_step(opt, &found, &got_norm));
    assert_int_equal(found, 0);
    if (!(fabs((double)got_norm - norm) <= 8 * 0x1p-24 * norm))
        fail_msg("grad norm %.9g, reference %.12g (seed %llu)", (double)got_norm, norm, (unsigned long long)test_seed);
    /* A block of PERIOD elements bit for bit the first block's needs no more; any other is checked element by
     * element (the first block, and a block whose bits differ: the vector path's tail, or a wrong element). */
    float *wp = host_alloc(part * 4), first_p[PERIOD];
    uint16_t *wc = host_alloc(part * 2), first_c[PERIOD];
    double worst = 0.0;
    size_t checked = 0;
    for (size_t at = 0; at < n; at += part) { /* part is a multiple of PERIOD: element at + i is i % PERIOD's */
        const size_t k = part < n - at ? part : n - at;
        CUDA_OK(cudaMemcpy(wp, p + at, k * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(wc, copy + at, k * 2, cudaMemcpyDeviceToHost));
        if (!at) memcpy(first_p, wp, sizeof first_p), memcpy(first_c, wc, sizeof first_c);
        for (size_t b = 0; b < k; b += PERIOD) {
            const size_t len = PERIOD < k - b ? PERIOD : k - b;
            if (at + b && !memcmp(wp + b, first_p, len * 4) && !memcmp(wc + b, first_c, len * 2)) continue;
            for (size_t i = b; i < b + len; ++i) {
                const size_t j = i - b;
                const double tol = 32.0 * 0x1p-24 * ap[j], err = fabs((double)wp[i] - rp[j]);
                if (tol > 0 && err / tol > worst) worst = err / tol;
                if (!(err <= tol))
                    fail_msg("weight %zu of %zu: gpu %.9g, ref %.12g, |diff| %.3g > tol %.3g (seed %llu)", at + i, n,
                             (double)wp[i], rp[j], err, tol, (unsigned long long)test_seed);
                if (wc[i] != gg_ref_f32_to_f16(wp[i]))
                    fail_msg("copy %zu of %zu: 0x%04x, the weight %.9g rounds to 0x%04x", at + i, n, wc[i],
                             (double)wp[i], gg_ref_f32_to_f16(wp[i]));
                ++checked;
            }
        }
    }
    printf("  AdamW over %zu elements: %zu checked one by one, the rest bit for bit the first %d's; worst |diff| / "
           "tol = %.3f, norm %.9g\n", n, checked, PERIOD, worst, (double)got_norm);
    free(wp), free(wc);
    gg_optim_destroy(opt);
    cudaFree(p), cudaFree(g), cudaFree(copy);
    gg_ctx_destroy(ctx);
}

int main(void) {
    const char *env = getenv("GG_OPTIM_SEED");
    test_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_optim_gpu: seed %llu (GG_OPTIM_SEED=%llu repeats this run)\n", (unsigned long long)test_seed,
           (unsigned long long)test_seed);
    apply_test_filter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adamw_matches_reference), cmocka_unit_test(adamw_clipped),
        cmocka_unit_test(sgd_matches_reference),   cmocka_unit_test(found_inf_skips_the_step),
        cmocka_unit_test(capture_replays_equal_eager), cmocka_unit_test(step_params_equals_step),
        cmocka_unit_test(checkpoint_resumes_bit_for_bit), cmocka_unit_test(adamw_past_32_bit_indices),
    };
    return cmocka_run_group_tests_name("optim_gpu", tests, NULL, NULL);
}
