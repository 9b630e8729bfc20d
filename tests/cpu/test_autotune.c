/* test_autotune.c - autotune (src/gemm/tune.c) on the CUDA fakes, which offer several cuBLASLt candidates, each with a
 * run time of its own on a fake device clock (fake_cuda.h): a plan keeps the fastest candidate and caches it; a later
 * context takes the cached choice without timing anything; a cached choice cuBLASLt no longer accepts is tuned again,
 * with a warning; a candidate that does not run is passed over; true fp32 GEMMs are never tuned; a GEMM planned to
 * leave SMs to other work is timed beside a neighbour on them and cached under a key of its own; a fault while tuning
 * fails the call cleanly or is passed by with a warning; block 3's choice between the gelu' pass and G's DGELU
 * epilogue weighs autotune's times against the pass's, timed once and cached. Block 3's eager call (four GEMMs,
 * every k a multiple of 128) drives each case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "block_calls.h"
#include "fake_cuda.h"
#include "gradgraph.h"
#include "tune_cache.h"

enum { CANDIDATES = 4 };

static char dir[64], cache_path[96], lock_path[104];
static char warnings[4096];

static void collect_warnings(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (level <= GG_LOG_WARN && strlen(warnings) + strlen(message) + 2 < sizeof warnings) {
        strcat(warnings, message);
        strcat(warnings, "\n");
    }
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/gg_autotune_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(cache_path, sizeof cache_path, "%s/tune.txt", dir);
    snprintf(lock_path, sizeof lock_path, "%s.lock", cache_path); /* a save's lock file (tune_cache.c) */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(cache_path);
    unlink(lock_path);
    return rmdir(dir);
}

/* A context with autotune on, its cache at cache_path, on fakes offering CANDIDATES candidates that run in us[i]. */
static gg_ctx *make_ctx(const double *us) {
    fake_reset(1);
    fake.plan_ok = 1;
    fake.algo_check_ok = 1;
    fake.heuristic_count = CANDIDATES;
    memcpy(fake.algo_us, us, CANDIDATES * sizeof *us);
    warnings[0] = '\0';
    gg_config config = GG_CONFIG_INIT;
    config.autotune = 1;
    config.tune_cache_path = cache_path;
    config.log_fn = collect_warnings;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&config, &ctx), GG_SUCCESS);
    return ctx;
}

static const block_case mlp = {.block = 3, .tokens = 256, .dim0 = 256, .dim1 = 512, .precision = GG_PRECISION_TF32};

static void runs_clear(void);

/* Faults while a plan tunes (fp16 mode's narrow schedule: scratch operands, a neighbour's buffers and passes, timing
 * events, the cache's entries and file): the k-th device allocation, host allocation, kernel launch or event record
 * fails, for every k the call reaches. The call either goes on without what failed and succeeds (autotune skipped
 * or the choice not saved, with a WARN; a candidate whose timing failed passed over, as one that does not run), or
 * fails with a status and a message that begin with its name; either way the next call succeeds and nothing is left
 * once the context is gone. */
static void faults_while_tuning_fail_cleanly_or_fall_back(void **state) {
    (void)state;
    static const fake_kind kinds[] = {FAKE_MALLOC, FAKE_HOST_MEMORY, FAKE_LAUNCH, FAKE_EVENT_RECORD};
    const double us[CANDIDATES] = {50, 40, 20, 30};
    block_case narrow = mlp;
    narrow.precision = GG_PRECISION_FP16;
    narrow.tokens = 4096;
    int injected = 0, fell_back = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i)
        for (int k = 1;; ++k) {
            unlink(cache_path); /* every plan tunes */
            gg_ctx *ctx = make_ctx(us);
            memset(fake.calls, 0, sizeof fake.calls);
            fake.fail_kind = kinds[i];
            fake.fail_at = k;
            const int before = fake.injected;
            const gg_status st = block_call_run(ctx, NULL, &narrow, 0, 0);
            const int hit = fake.injected > before;
            fake.fail_at = 0;
            injected += hit;
            if (st == GG_SUCCESS) {
                fell_back += hit && strstr(warnings, "autotune") != NULL;
            } else if (!hit || strncmp(gg_last_error(ctx), "gg_mlp_backward: ", 17) != 0) {
                fail_msg("%s #%d: %s: \"%s\"", fake_kind_names[kinds[i]], k, gg_status_string(st), gg_last_error(ctx));
            }
            assert_int_equal(fake.captures_open, 0);
            assert_int_equal(block_call_run(ctx, NULL, &narrow, 0, 0), GG_SUCCESS);
            gg_ctx_destroy(ctx);
            assert_int_equal(fake.live, 0);
            if (!hit) break;
        }
    print_message("%d faults while tuning, %d of them passed by with a WARN\n", injected, fell_back);
    assert_true(injected > 20 && fell_back > 0);
}

/* The workspace ("ws<bytes>") in the keys of the cached GEMMs whose key has `shape` ("<m>x<n>x<k>|"), in ws[] (at
 * most `max`); returns how many. */
static int cached_workspaces(const char *shape, size_t *ws, int max) {
    gg_tune_cache cache;
    assert_int_equal(gg_tune_cache_open(&cache, cache_path), 0);
    int n = 0;
    for (size_t i = 0; i < cache.count; ++i) {
        const char *key = cache.entries[i].key, *w = strstr(key, "|ws");
        if (!strstr(key, shape)) continue;
        assert_non_null(w);
        assert_true(n < max);
        ws[n++] = (size_t)strtoull(w + 3, NULL, 10);
    }
    gg_tune_cache_close(&cache);
    return n;
}

/* A 16-bit dW whose k is run in two (block 4 at 10241 tokens: 10240 with split-k, then the last row) keeps the
 * parts' fp32 sum at the start of the workspace, so its first part chooses within less workspace than the same
 * GEMM run whole (block 4 at 10240 tokens): each is cached under its own workspace, the context's less the sum, and
 * neither takes the other's choice (which could need more workspace than the split part has). */
static void a_split_gemm_is_cached_under_its_own_workspace(void **state) {
    (void)state;
    unlink(cache_path);
    const double us[CANDIDATES] = {50, 40, 20, 30};
    gg_ctx *ctx = make_ctx(us);
    block_case ssm = {.block = 4, .tokens = 10240, .dim0 = 256, .dim1 = 512, .precision = GG_PRECISION_BF16};
    assert_int_equal(block_call_run(ctx, NULL, &ssm, 0, 0), GG_SUCCESS);
    size_t ws[4];
    const char *dw = "512x256x10240|"; /* dW = dY^T gated_output: H x E, k the tokens */
    assert_int_equal(cached_workspaces(dw, ws, 4), 1);
    const size_t whole = ws[0];
    assert_int_equal(whole, (size_t)32 << 20); /* the context's default */
    ssm.tokens = 10241;
    assert_int_equal(block_call_run(ctx, NULL, &ssm, 0, 0), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_workspaces(dw, ws, 4), 2);
    const size_t sum = 256 * 512 * sizeof(float); /* the parts' fp32 sum, 256-byte aligned already */
    assert_true((ws[0] == whole && ws[1] == whole - sum) || (ws[1] == whole && ws[0] == whole - sum));
    assert_string_equal(warnings, "");
}

static void runs_clear(void) {
    memset(fake.algo_runs, 0, sizeof fake.algo_runs);
    fake.algo_runs_untagged = 0;
    memset(fake.calls, 0, sizeof fake.calls);
}

/* The call planned and run once (the plan tunes, or reads the cache), then run again: every GEMM of the second run
 * must be candidate `expected`. */
static void call_and_expect(gg_ctx *ctx, const block_case *c, int expected) {
    runs_clear();
    assert_int_equal(block_call_run(ctx, NULL, c, 0, 0), GG_SUCCESS);
    runs_clear();
    assert_int_equal(block_call_run(ctx, NULL, c, 0, 0), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_MATMUL], 4);
    assert_int_equal(fake.algo_runs[expected], 4);
    assert_int_equal(fake.algo_runs_untagged, 0);
}

/* Every entry of the cache file chose candidate `expected`, timed at `us` a run; returns how many there are, and in
 * *beside (if not NULL) how many were timed beside a neighbour (their keys end in "nb"). */
static size_t cached_choices_beside(int expected, double us, size_t *beside) {
    gg_tune_cache cache;
    assert_int_equal(gg_tune_cache_open(&cache, cache_path), 0);
    if (beside) *beside = 0;
    for (size_t i = 0; i < cache.count; ++i) {
        if (beside) *beside += strstr(cache.entries[i].key, "nb") != NULL;
        cublasLtMatmulAlgo_t algo;
        memcpy(&algo, cache.entries[i].algo, sizeof algo);
        uint32_t tag = 0;
        size_t written = 0;
        assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &tag,
                                                              sizeof tag, &written),
                         CUBLAS_STATUS_SUCCESS);
        assert_int_equal(tag, FAKE_ALGO_TAG0 + expected);
        assert_true(cache.entries[i].us > 0.99 * us && cache.entries[i].us < 1.01 * us);
    }
    const size_t count = cache.count;
    gg_tune_cache_close(&cache);
    return count;
}

static size_t cached_choices(int expected, double us) { return cached_choices_beside(expected, us, NULL); }

static void picks_the_fastest_and_caches_it(void **state) {
    (void)state;
    unlink(cache_path);
    const double us[CANDIDATES] = {50, 40, 20, 30};
    gg_ctx *ctx = make_ctx(us);
    runs_clear();
    assert_int_equal(block_call_run(ctx, NULL, &mlp, 0, 0), GG_SUCCESS);
    for (int i = 0; i < CANDIDATES; ++i) assert_true(fake.algo_runs[i] > (i == 2 ? 1 : 0)); /* each one timed */
    call_and_expect(ctx, &mlp, 2);
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_choices(2, 20.0), 4); /* the four GEMM shapes */
    assert_string_equal(warnings, "");
}

static void reuses_the_cached_choice(void **state) {
    (void)state;
    unlink(cache_path);
    const double first[CANDIDATES] = {50, 40, 20, 30}, now[CANDIDATES] = {20, 30, 40, 50};
    gg_ctx *ctx = make_ctx(first);
    assert_int_equal(block_call_run(ctx, NULL, &mlp, 0, 0), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    ctx = make_ctx(now); /* candidate 0 is now the fastest, but nothing is timed again */
    runs_clear();
    assert_int_equal(block_call_run(ctx, NULL, &mlp, 0, 0), GG_SUCCESS); /* plans from the cache */
    for (int i = 0; i < CANDIDATES; ++i) assert_int_equal(fake.algo_runs[i], i == 2 ? 4 : 0);
    call_and_expect(ctx, &mlp, 2);
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_choices(2, 20.0), 4);
    assert_string_equal(warnings, "");
}

static void tunes_again_when_the_cached_choice_is_refused(void **state) {
    (void)state;
    unlink(cache_path);
    const double first[CANDIDATES] = {50, 40, 20, 30}, now[CANDIDATES] = {20, 30, 40, 50};
    gg_ctx *ctx = make_ctx(first);
    assert_int_equal(block_call_run(ctx, NULL, &mlp, 0, 0), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    ctx = make_ctx(now);
    fake.algo_check_ok = 0; /* cuBLASLt (another version, say) no longer takes the cached algorithms */
    call_and_expect(ctx, &mlp, 0);
    assert_non_null(strstr(warnings, "is not valid here: tuning again"));
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_choices(0, 20.0), 4); /* replaced, not added beside */
}

/* GG_AUTOTUNE_MARGIN=M: a candidate replaces the heuristic's first only when the first takes more than M % longer;
 * the choices are cached under keys of their own ("|mgM"), so a context without the margin tunes again; a value
 * that is not a whole percent from 0 to 100 is refused by gg_ctx_create, naming it. */
static void a_margin_keeps_the_heuristics_first_unless_a_candidate_wins_by_more(void **state) {
    (void)state;
    unlink(cache_path);
    setenv("GG_AUTOTUNE_MARGIN", "30", 1);
    const double close[CANDIDATES] = {50, 40, 45, 60}; /* 50 / 40: 25 % longer, within the margin */
    gg_ctx *ctx = make_ctx(close);
    call_and_expect(ctx, &mlp, 0);
    gg_ctx_destroy(ctx);
    gg_tune_cache cache;
    assert_int_equal(gg_tune_cache_open(&cache, cache_path), 0);
    assert_int_equal(cache.count, 4);
    for (size_t i = 0; i < cache.count; ++i) assert_non_null(strstr(cache.entries[i].key, "|mg30"));
    gg_tune_cache_close(&cache);
    assert_int_equal(cached_choices(0, 50.0), 4);

    unlink(cache_path);
    const double far[CANDIDATES] = {50, 40, 20, 30}; /* 50 / 20: 150 % longer, beyond it */
    ctx = make_ctx(far);
    call_and_expect(ctx, &mlp, 2);
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_choices(2, 20.0), 4);

    unsetenv("GG_AUTOTUNE_MARGIN"); /* without the margin: other keys, tuned again, the fastest wins */
    ctx = make_ctx(close);
    call_and_expect(ctx, &mlp, 1);
    gg_ctx_destroy(ctx);
    assert_string_equal(warnings, "");

    static const char *const refused[] = {"-1", "101", "5%", "x"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; ++i) {
        setenv("GG_AUTOTUNE_MARGIN", refused[i], 1);
        gg_config config = GG_CONFIG_INIT;
        gg_ctx *none = NULL;
        assert_int_equal(gg_ctx_create(&config, &none), GG_ERROR_INVALID_ARGUMENT);
        assert_null(none);
        assert_non_null(strstr(gg_last_error(NULL), "GG_AUTOTUNE_MARGIN"));
    }
    unsetenv("GG_AUTOTUNE_MARGIN");
}

/* A cache file that cannot be written (its directory is a regular file): the call succeeds with the fastest choice,
 * and a WARN names the file and why it was not written. */
static void an_unwritable_cache_warns_and_keeps_the_choice(void **state) {
    (void)state;
    char blocker[96], saved[sizeof cache_path];
    snprintf(blocker, sizeof blocker, "%s/not-a-dir", dir);
    FILE *f = fopen(blocker, "w");
    assert_non_null(f);
    fclose(f);
    memcpy(saved, cache_path, sizeof saved);
    snprintf(cache_path, sizeof cache_path, "%s/not-a-dir/tune.txt", dir);
    const double us[CANDIDATES] = {50, 40, 20, 30};
    gg_ctx *ctx = make_ctx(us);
    call_and_expect(ctx, &mlp, 2);
    const int said = strstr(warnings, "not written (Not a directory): the choice lasts as long as the context") &&
                     strstr(warnings, cache_path);
    gg_ctx_destroy(ctx);
    memcpy(cache_path, saved, sizeof saved); /* the other tests' file, before anything can fail */
    unlink(blocker);
    if (!said) fail_msg("warnings: %s", warnings);
}

static void passes_over_a_candidate_that_does_not_run(void **state) {
    (void)state;
    unlink(cache_path);
    const double us[CANDIDATES] = {50, 40, 30, 20};
    gg_ctx *ctx = make_ctx(us);
    fake.algo_fail_mask = 1u << 3; /* the fastest on paper, timed last, does not launch */
    call_and_expect(ctx, &mlp, 2);
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_choices(2, 30.0), 4);
}

static void true_fp32_is_not_tuned(void **state) {
    (void)state;
    unlink(cache_path);
    const double us[CANDIDATES] = {50, 40, 20, 30};
    gg_ctx *ctx = make_ctx(us);
    block_case exact = mlp;
    exact.precision = GG_PRECISION_FP32;
    runs_clear();
    assert_int_equal(block_call_run(ctx, NULL, &exact, 0, 0), GG_SUCCESS);
    assert_int_equal(fake.algo_runs[0], 4); /* the heuristic's first, each GEMM once: nothing timed */
    for (int i = 1; i < CANDIDATES; ++i) assert_int_equal(fake.algo_runs[i], 0);
    gg_ctx_destroy(ctx);
    assert_int_equal(cached_choices(0, 0.0), 0);
}

/* fp16 mode's narrow schedule plans G on the SMs the copies leave (an SM target): it is timed beside a neighbour,
 * fp32 -> fp16 passes on the other SMs, and cached under a key of its own ("sms<target>nb"). */
static void a_gemm_with_an_sm_target_is_timed_beside_a_neighbour(void **state) {
    (void)state;
    unlink(cache_path);
    const double us[CANDIDATES] = {50, 40, 20, 30};
    gg_ctx *ctx = make_ctx(us);
    block_case narrow = mlp;
    narrow.precision = GG_PRECISION_FP16;
    narrow.tokens = 4096; /* above the few-token routes */
    const int before = fake_kernel_launches("f32_to_f16");
    call_and_expect(ctx, &narrow, 2);
    const int second = fake_kernel_launches("f32_to_f16"); /* the first call's conversions and the neighbour's */
    assert_int_equal(block_call_run(ctx, NULL, &narrow, 0, 0), GG_SUCCESS);
    const int per_call = fake_kernel_launches("f32_to_f16") - second;
    assert_true(second - before - 2 * per_call >= CANDIDATES); /* each candidate timed beside passes */
    gg_ctx_destroy(ctx);
    size_t beside = 0;
    /* G beside the copies and G on every SM, G with the DGELU epilogue (block 3's choice against the gelu' pass,
     * whose timing the fakes' clock cannot give without launch_us: no entry), dW2, dX and dW1 */
    assert_int_equal(cached_choices_beside(2, 20.0, &beside), 6);
    assert_int_equal(beside, 1); /* G; the others run on every SM */
}

/* How many of the cache file's entries are timed passes (their keys name "|pass|"), and the time of the last. */
static size_t cached_passes(double *us) {
    gg_tune_cache cache;
    assert_int_equal(gg_tune_cache_open(&cache, cache_path), 0);
    size_t n = 0;
    for (size_t i = 0; i < cache.count; ++i)
        if (strstr(cache.entries[i].key, "|pass|gelu_grad_col_sum_f16|4096x512")) ++n, *us = cache.entries[i].us;
    gg_tune_cache_close(&cache);
    return n;
}

/* Block 3's call twice on a fresh context (the first plans); returns the gelu' pass's launches over both (the plan's
 * timing included) and sets *dgelu to the DGELU GEMMs the second call ran. */
static int call_twice(const double *us, double launch_us, const block_case *c, int *dgelu) {
    gg_ctx *ctx = make_ctx(us);
    fake.launch_us = launch_us;
    const int before = fake_kernel_launches("GeluGradRow");
    assert_int_equal(block_call_run(ctx, NULL, c, 0, 0), GG_SUCCESS);
    fake.dgelu_matmuls = 0;
    assert_int_equal(block_call_run(ctx, NULL, c, 0, 0), GG_SUCCESS);
    *dgelu = fake.dgelu_matmuls;
    const int passes = fake_kernel_launches("GeluGradRow") - before;
    gg_ctx_destroy(ctx);
    return passes;
}

/* Block 3 in fp16 mode given x's fp16 copy: its plan also tunes G with cuBLASLt's DGELU epilogue, and times the gelu'
 * pass once, cached under a key of its own. Here G with the epilogue is as fast as G and the pass costs 5 us, so the
 * calls write R in G's epilogue and run no pass; a later context chooses alike from the cache, timing nothing.
 * GG_FFN_DGELU=pass keeps the pass, a value that is no mode is auto with a WARN naming it; a pass whose timing fails
 * (a clock that does not move) keeps the pass, with a WARN. */
static void block3_weighs_r_in_g_epilogue_against_the_pass(void **state) {
    (void)state;
    unlink(cache_path);
    const double us[CANDIDATES] = {50, 40, 20, 30};
    block_case c = mlp;
    c.precision = GG_PRECISION_FP16;
    c.tokens = 4096; /* above the few-token routes: G in cuBLASLt, on every SM once every copy is given */
    c.copies = 2;
    int dgelu = 0;
    assert_true(call_twice(us, 5.0, &c, &dgelu) >= 2); /* timed: a first run and the timed ones, none in the calls */
    assert_int_equal(dgelu, 1);
    assert_string_equal(warnings, "");
    double pass_us = 0;
    assert_int_equal(cached_passes(&pass_us), 1);
    assert_true(pass_us > 4.99 && pass_us < 5.01);
    assert_int_equal(call_twice(us, 5.0, &c, &dgelu), 0); /* the cache's times: nothing timed */
    assert_int_equal(dgelu, 1);

    setenv("GG_FFN_DGELU", "pass", 1);
    assert_int_equal(call_twice(us, 5.0, &c, &dgelu), 2); /* one pass a call */
    assert_int_equal(dgelu, 0);
    unsetenv("GG_FFN_DGELU");
    setenv("GG_FFN_DGELU", "fast", 1); /* not a mode: auto, and a WARN that names it */
    assert_int_equal(call_twice(us, 5.0, &c, &dgelu), 0);
    assert_int_equal(dgelu, 1);
    assert_non_null(strstr(warnings, "GG_FFN_DGELU=fast is none of"));
    unsetenv("GG_FFN_DGELU");

    unlink(cache_path);
    assert_true(call_twice(us, 0.0, &c, &dgelu) >= 2 + 2);
    assert_int_equal(dgelu, 0);
    assert_non_null(strstr(warnings, "timing of"));
    assert_int_equal(cached_passes(&pass_us), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(picks_the_fastest_and_caches_it),
        cmocka_unit_test(reuses_the_cached_choice),
        cmocka_unit_test(a_margin_keeps_the_heuristics_first_unless_a_candidate_wins_by_more),
        cmocka_unit_test(tunes_again_when_the_cached_choice_is_refused),
        cmocka_unit_test(an_unwritable_cache_warns_and_keeps_the_choice),
        cmocka_unit_test(passes_over_a_candidate_that_does_not_run),
        cmocka_unit_test(true_fp32_is_not_tuned),
        cmocka_unit_test(a_gemm_with_an_sm_target_is_timed_beside_a_neighbour),
        cmocka_unit_test(a_split_gemm_is_cached_under_its_own_workspace),
        cmocka_unit_test(faults_while_tuning_fail_cleanly_or_fall_back),
        cmocka_unit_test(block3_weighs_r_in_g_epilogue_against_the_pass),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
