/*
 * test_optim_ref.c - the optimizer's float64 references (tests/ref/gg_ref_optim.c) against values computed by hand
 * from torch.optim's formulas: the first two AdamW steps (decay on and off, a gradient so small that eps dominates
 * the denominator, a zero first gradient), SGD's first two steps with momentum, Nesterov, dampening and plain,
 * the clipping coefficient, the error-bound scale, and fp16 rounding at its edges.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gg_ref_optim.h"

/* |got - want| <= 1e-14 |want|: the hand values have 20 significant digits; double keeps 16, of which 1 - 0.999
 * loses 3. */
static void assert_close(double got, double want) {
    if (!(fabs(got - want) <= 1e-14 * fabs(want) + 1e-300))
        fail_msg("got %.17g, want %.17g", got, want);
}

static const gg_ref_optim adamw = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};

/* Element 0: p = 1, g = 0.5 then -1, decay on.
 *   step 1: p = 1 (1 - 1e-5) = 0.99999; m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25 = 0.00025;
 *           step_size = 1e-3 / (1 - 0.9) = 0.01; denom = sqrt(0.00025) / sqrt(0.001) + 1e-8 = 0.5 + 1e-8;
 *           p = 0.99999 - 0.01 * 0.05 / 0.50000001 = 0.99999 - 0.00099999998 = 0.99899000002
 *   step 2: p = 0.99899000002 (1 - 1e-5); m = 0.05 + 0.1 (-1 - 0.05) = -0.055;
 *           v = 0.999 * 0.00025 + 0.001 = 0.00124975; step_size = 1e-3 / 0.19;
 *           denom = sqrt(0.00124975) / sqrt(0.001999) + 1e-8; p = 0.99934611364240545603
 * Element 1: p = -2, g = 1e-9 then 3: eps is 10 times sqrt(v̂) at step 1, so its place in the denominator shows:
 *   step 1: m = 1e-10, v = 1e-21, denom = 1e-9 + 1e-8, p = -2 (1 - 1e-5) - 0.01 * 1e-10 / 1.1e-8 = -2.0000709090909...
 *   step 2: m = 0.30000000009, v = 0.009000000000000000001, p = -2.0007950452021013927
 * Element 2: p = 0.5, g = 0 then 0.25, no decay: step 1 leaves p (m = 0); step 2: m = 0.025, v = 0.0000625,
 *   p = 0.4992558632185172208. */
static void adamw_two_steps_by_hand(void **state) {
    (void)state;
    double p[3] = {1.0, -2.0, 0.5}, m[3] = {0}, v[3] = {0};
    const double g1[3] = {0.5, 1e-9, 0.0}, g2[3] = {-1.0, 3.0, 0.25};
    gg_ref_optim_step(&adamw, 2, p, m, v, g1, 1, 1, NULL, NULL);
    gg_ref_optim_step(&adamw, 1, p + 2, m + 2, v + 2, g1 + 2, 1, 0, NULL, NULL);
    assert_close(p[0], 0.9989900000199999996);
    assert_close(m[0], 0.05);
    assert_close(v[0], 0.00025);
    assert_close(p[1], -2.0000709090909090909);
    assert_close(m[1], 1e-10);
    assert_close(v[1], 1e-21);
    assert_close(p[2], 0.5);
    gg_ref_optim_step(&adamw, 2, p, m, v, g2, 2, 1, NULL, NULL);
    gg_ref_optim_step(&adamw, 1, p + 2, m + 2, v + 2, g2 + 2, 2, 0, NULL, NULL);
    assert_close(p[0], 0.99934611364240545603);
    assert_close(m[0], -0.055);
    assert_close(v[0], 0.00124975);
    assert_close(p[1], -2.0007950452021013927);
    assert_close(m[1], 0.30000000009);
    assert_close(v[1], 0.009000000000000000001);
    assert_close(p[2], 0.4992558632185172208);
    assert_close(m[2], 0.025);
    assert_close(v[2], 0.0000625);
}

/* p = 1, g = 0.5 then -1, lr 0.1, L2 weight decay 0.01 (so g becomes 0.51, then -1 + 0.01 p).
 *   momentum 0.9:        buf = 0.51, p = 0.949; then g = -0.99051, buf = 0.459 - 0.99051 = -0.53151, p = 1.002151
 *   Nesterov:            g = 0.51 + 0.9 * 0.51 = 0.969, p = 0.9031; then g = -0.990969, buf = -0.531969,
 *                        g = -0.990969 - 0.4787721 = -1.4697411, p = 1.05007411
 *   dampening 0.5:       buf = 0.51 (the first step takes g whole), p = 0.949; then buf = 0.459 - 0.495255,
 *                        p = 0.9526255
 *   plain, no decay:     p = 1 - 0.05 = 0.95, then 1.05 */
static void sgd_two_steps_by_hand(void **state) {
    (void)state;
    const gg_ref_optim kinds[4] = {
        {.sgd = 1, .lr = 0.1, .weight_decay = 0.01, .momentum = 0.9},
        {.sgd = 1, .lr = 0.1, .weight_decay = 0.01, .momentum = 0.9, .nesterov = 1},
        {.sgd = 1, .lr = 0.1, .weight_decay = 0.01, .momentum = 0.9, .dampening = 0.5},
        {.sgd = 1, .lr = 0.1},
    };
    const double after1[4] = {0.949, 0.9031, 0.949, 0.95}, after2[4] = {1.002151, 1.05007411, 0.9526255, 1.05};
    const double buf2[4] = {-0.53151, -0.531969, -0.036255, 0.0};
    for (int k = 0; k < 4; ++k) {
        double p = 1.0, buf = 12345.0; /* the first step must not read the buffer */
        const double g1 = 0.5, g2 = -1.0;
        gg_ref_optim_step(&kinds[k], 1, &p, &buf, NULL, &g1, 1, 1, NULL, NULL);
        assert_close(p, after1[k]);
        if (k == 3) buf = 0.0; /* plain SGD keeps no buffer */
        gg_ref_optim_step(&kinds[k], 1, &p, &buf, NULL, &g2, 2, 1, NULL, NULL);
        assert_close(p, after2[k]);
        assert_close(buf, buf2[k]);
    }
}

/* max_norm / (norm + 1e-6), at most 1: gradients (3, 4) have norm 5. */
static void clip_coefficient(void **state) {
    (void)state;
    assert_close(gg_ref_clip_coef(5.0, 1.0), 1.0 / 5.000001);
    assert_close(gg_ref_clip_coef(5.0, 10.0), 1.0);
    assert_close(gg_ref_clip_coef(0.0, 1.0), 1.0);
}

/* The error scale: equal to |p| and m when nothing cancels (positive weights and gradients, no decay), larger when
 * something does. */
static void error_scale_bounds_the_terms(void **state) {
    (void)state;
    gg_ref_optim h = adamw;
    h.weight_decay = 0.0;
    double p[2] = {1.0, 1.0}, m[2] = {0}, v[2] = {0}, ap[2] = {1.0, 1.0}, am[2] = {0};
    const double pos[2] = {0.5, 0.5}, mixed[2] = {-0.5, 0.25};
    gg_ref_optim_step(&h, 2, p, m, v, pos, 1, 0, ap, am);
    gg_ref_optim_step(&h, 1, p, m, v, pos, 2, 0, ap, am);
    assert_close(am[0], m[0]);
    assert_close(ap[0], 1.0 + (1.0 - p[0])); /* the weight fell by the steps' sum: the scale rose by it */
    gg_ref_optim_step(&h, 1, p + 1, m + 1, v + 1, mixed, 2, 0, ap + 1, am + 1);
    assert_true(am[1] > fabs(m[1]));
    const gg_ref_optim s = {.sgd = 1, .lr = 0.1, .weight_decay = 0.01, .momentum = 0.9, .nesterov = 1};
    double q = -1.0, buf = 0.0, aq = 1.0, ab = 0.0;
    const double g = 0.5;
    gg_ref_optim_step(&s, 1, &q, &buf, NULL, &g, 1, 1, &aq, &ab);
    assert_close(ab, 0.5 + 0.01);             /* |g| + wd |p| */
    assert_close(aq, 1.0 + 0.1 * 0.51 * 1.9); /* |p| + lr (|g| + momentum buf) */
}

static void f16_rounding(void **state) {
    (void)state;
    const struct {
        float x;
        uint16_t bits;
    } cases[] = {
        {1.0f, 0x3c00},           {-2.0f, 0xc000},          {65504.0f, 0x7bff},          {65519.99f, 0x7bff},
        {65520.0f, 0x7c00},       {1e10f, 0x7c00},          {-INFINITY, 0xfc00},         {0.1f, 0x2e66},
        {0x1p-14f, 0x0400},       {0x1p-24f, 0x0001},       {0x1p-25f, 0x0000},          {0x3p-25f, 0x0002},
        {0x1.ff8p-15f, 0x03ff},   {0x1.ffcp-15f, 0x0400},   {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},          {0x1p-30f, 0x0000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        if (gg_ref_f32_to_f16(cases[i].x) != cases[i].bits)
            fail_msg("%a: got 0x%04x, want 0x%04x", (double)cases[i].x, gg_ref_f32_to_f16(cases[i].x), cases[i].bits);
    const uint16_t nan = gg_ref_f32_to_f16(NAN);
    assert_true((nan & 0x7c00) == 0x7c00 && (nan & 0x03ff) != 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adamw_two_steps_by_hand), cmocka_unit_test(sgd_two_steps_by_hand),
        cmocka_unit_test(clip_coefficient),        cmocka_unit_test(error_scale_bounds_the_terms),
        cmocka_unit_test(f16_rounding),
    };
    return cmocka_run_group_tests_name("optim_ref", tests, NULL, NULL);
}
