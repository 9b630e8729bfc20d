/*
 * test_train_ref.c - unit tests of the float64 reference of examples/train's training step (examples/train_ref.c),
 * which `train --check` holds the GPU's loss and gradients to:
 *   - all parameters zero: the loss is log(V) and the output bias's gradient is 1/V minus each token's share of
 *     the targets, worked out by hand; every other gradient is zero;
 *   - random parameters (multiples of 2^-10, so that p +- 2^-12 is exact in float) against central finite
 *     differences of the loss, every parameter of a tiny model.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "train_ref.h"

static uint64_t next(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static int64_t total(const tr_shape *s) {
    int64_t n = 0;
    for (int t = 0; t < tr_tensors(s); ++t) n += tr_count(s, t);
    return n;
}

static void random_tokens(const tr_shape *s, uint64_t *state, int32_t *tokens) {
    for (int64_t i = 0; i < s->rows * (s->context + 1); ++i) tokens[i] = (int32_t)(next(state) % (uint64_t)s->vocab);
}

static void zero_parameters_by_hand(void **unused) {
    (void)unused;
    const tr_shape s = {.layers = 2, .context = 2, .embed = 4, .vocab = 5, .ffn = 16, .rows = 7};
    const int64_t n = total(&s);
    float *p = calloc((size_t)n, sizeof(float));
    double *g = malloc((size_t)n * sizeof(double));
    int32_t tokens[7 * 3];
    uint64_t state = 99;
    assert_non_null(p);
    assert_non_null(g);
    random_tokens(&s, &state, tokens);
    /* zero logits: softmax 1/V everywhere, loss log V; dz[r,v] = (1/V - [v = target_r]) / M */
    const double loss = tr_step(&s, p, tokens, g);
    assert_true(fabs(loss - log(5.0)) < 1e-12);
    double share[5] = {0};
    for (int r = 0; r < 7; ++r) share[tokens[r * 3 + 2]] += 1.0 / 7;
    const int64_t bout = n - 5;
    for (int v = 0; v < 5; ++v) assert_true(fabs(g[bout + v] - (0.2 - share[v])) < 1e-12);
    /* with every weight zero, nothing else receives a gradient (Wout's is dzᵀ x with x = 0; the rest see W = 0) */
    for (int64_t i = 0; i < bout; ++i) assert_true(g[i] == 0.0);
    free(p);
    free(g);
}

static void gradients_match_finite_differences(void **unused) {
    (void)unused;
    const tr_shape s = {.layers = 2, .context = 2, .embed = 4, .vocab = 5, .ffn = 16, .rows = 6};
    const int64_t n = total(&s);
    const uint64_t seed = (uint64_t)time(NULL);
    printf("test_train_ref: seed %llu\n", (unsigned long long)seed);
    uint64_t state = seed | 1;
    float *p = malloc((size_t)n * sizeof(float));
    double *g = malloc((size_t)n * sizeof(double)), *scratch = malloc((size_t)n * sizeof(double));
    int32_t tokens[6 * 3];
    assert_non_null(p);
    assert_non_null(g);
    assert_non_null(scratch);
    for (int64_t i = 0; i < n; ++i) p[i] = (float)((int)(next(&state) % 1025) - 512) / 1024.0f;
    random_tokens(&s, &state, tokens);
    tr_step(&s, p, tokens, g);
    const double h = 1.0 / 4096; /* exact in float for these p */
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float keep = p[i];
        p[i] = keep + (float)h;
        const double up = tr_step(&s, p, tokens, scratch);
        p[i] = keep - (float)h;
        const double down = tr_step(&s, p, tokens, scratch);
        p[i] = keep;
        const double fd = (up - down) / (2 * h), err = fabs(fd - g[i]);
        worst = fmax(worst, err / (1e-6 + 1e-4 * fabs(g[i])));
        if (!(err <= 1e-6 + 1e-4 * fabs(g[i])))
            fail_msg("parameter %lld: analytic %.9g, finite difference %.9g (seed %llu)", (long long)i, g[i], fd,
                     (unsigned long long)seed);
    }
    printf("test_train_ref: %lld parameters, worst error %.3f of the tolerance\n", (long long)n, worst);
    free(p);
    free(g);
    free(scratch);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_parameters_by_hand),
        cmocka_unit_test(gradients_match_finite_differences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
