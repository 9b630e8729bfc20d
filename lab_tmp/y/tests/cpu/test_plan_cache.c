/* test_plan_cache.c - plan-cache keys and the cache itself, and the project's case table (CPU only). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include "plan_cache.h"

static void key_equal_for_same_fields(void **state) {
    (void)state;
    gg_plan_key a = gg_plan_key_make(GG_BLOCK_MLP, 3, 4096, 2048, 8192);
    gg_plan_key b = gg_plan_key_make(GG_BLOCK_MLP, 3, 4096, 2048, 8192);
    assert_true(gg_plan_key_equal(&a, &b));
    assert_int_equal(gg_plan_key_hash(&a), gg_plan_key_hash(&b));
    /* the hash reads fields, not bytes: garbage in the padding changes nothing */
    gg_plan_key c;
    memset(&c, 0xA5, sizeof c);
    c.block = a.block, c.precision = a.precision, c.tokens = a.tokens, c.dim0 = a.dim0, c.dim1 = a.dim1;
    c.sm_reserve = a.sm_reserve;
    c.pair_split = a.pair_split;
    c.sync_grads = a.sync_grads;
    assert_true(gg_plan_key_equal(&a, &c));
    assert_int_equal(gg_plan_key_hash(&a), gg_plan_key_hash(&c));
}

static void key_differs_in_every_field(void **state) {
    (void)state;
    const gg_plan_key base = gg_plan_key_make(GG_BLOCK_MLP, 3, 4096, 2048, 8192);
    gg_plan_key reserving = base; /* a syncing graph's plan leaves SMs to communication: a different plan */
    reserving.sm_reserve = 16;
    gg_plan_key pair = base; /* the two-rank split reduction: GEMMs in halves */
    pair.pair_split = 1;
    gg_plan_key syncing = base; /* a syncing call without SMs left to communication: no narrow schedule */
    syncing.sync_grads = 1;
    const gg_plan_key other[] = {
        gg_plan_key_make(GG_BLOCK_GELU_FFN, 3, 4096, 2048, 8192), gg_plan_key_make(GG_BLOCK_MLP, 2, 4096, 2048, 8192),
        gg_plan_key_make(GG_BLOCK_MLP, 3, 4097, 2048, 8192),      gg_plan_key_make(GG_BLOCK_MLP, 3, 4096, 2056, 8192),
        gg_plan_key_make(GG_BLOCK_MLP, 3, 4096, 2048, 8200),      reserving,
        pair,                                                     syncing,
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; ++i) {
        assert_false(gg_plan_key_equal(&base, &other[i]));
        assert_int_not_equal(gg_plan_key_hash(&base), gg_plan_key_hash(&other[i]));
    }
}

static int destroyed;
static void count_destroy(void *plan, void *user) {
    (void)plan;
    assert_ptr_equal(user, &destroyed);
    ++destroyed;
}

static void cache_finds_what_it_stored(void **state) {
    (void)state;
    gg_plan_cache cache;
    gg_plan_cache_init(&cache, count_destroy, &destroyed);
    int plans[40];
    for (int i = 0; i < 40; ++i) { /* past the first growth of the array */
        gg_plan_key k = gg_plan_key_make(GG_BLOCK_SSM_GATE, 4, 100 + i, 768, 1536);
        assert_null(gg_plan_cache_find(&cache, &k));
        assert_int_equal(gg_plan_cache_insert(&cache, &k, &plans[i]), 0);
    }
    for (int i = 0; i < 40; ++i) {
        gg_plan_key k = gg_plan_key_make(GG_BLOCK_SSM_GATE, 4, 100 + i, 768, 1536);
        assert_ptr_equal(gg_plan_cache_find(&cache, &k), &plans[i]);
    }
    gg_plan_key missing = gg_plan_key_make(GG_BLOCK_SSM_GATE, 4, 99, 768, 1536);
    assert_null(gg_plan_cache_find(&cache, &missing));
    destroyed = 0;
    gg_plan_cache_clear(&cache);
    assert_int_equal(destroyed, 40);
    assert_int_equal(cache.count, 0);
    gg_plan_key k = gg_plan_key_make(GG_BLOCK_SSM_GATE, 4, 100, 768, 1536);
    assert_null(gg_plan_cache_find(&cache, &k)); /* usable again after clear */
    gg_plan_cache_clear(&cache);
}

static gg_case cases[GG_CASES_MAX];

static int load(void) {
    char err[256];
    int n = gg_cases_load(GG_CASES_FILE, cases, GG_CASES_MAX, err, sizeof err);
    if (n < 0) fail_msg("%s", err);
    return n;
}

static void case_table_has_16_per_block(void **state) {
    (void)state;
    assert_int_equal(load(), 64);
    int per_block[5] = {0};
    for (int i = 0; i < 64; ++i) {
        per_block[cases[i].block_id]++;
        assert_int_equal(cases[i].tokens, cases[i].batch_size * cases[i].seq_len);
        assert_true(cases[i].atol > 0 && cases[i].rtol > 0);
    }
    for (int b = 1; b <= 4; ++b) assert_int_equal(per_block[b], 16);
}

static void case_table_silu_pattern_matches_spec(void **state) {
    (void)state;
    load();
    const char *expected = "TFTFTFTTTTFFTTTT"; /* blocks.md, block 4, in file order */
    for (int i = 0; i < 64; ++i)
        if (cases[i].block_id == 4) assert_int_equal(cases[i].use_silu_gate, expected[cases[i].index] == 'T');
}

static void case_table_sol_geomeans_match_spec(void **state) {
    (void)state;
    load();
    const double spec_us[5] = {0, 8.70, 148.9, 340.2, 24.85}; /* blocks.md, "Geometric-mean T_SOL ... on H200" */
    double log_sum[5] = {0};
    for (int i = 0; i < 64; ++i) log_sum[cases[i].block_id] += log(gg_case_sol_us_h200(&cases[i]));
    for (int b = 1; b <= 4; ++b) {
        const double geomean = exp(log_sum[b] / 16);
        if (fabs(geomean / spec_us[b] - 1) > 0.01)
            fail_msg("block %d: SOL geomean %.2f us, spec says %.2f us", b, geomean, spec_us[b]);
    }
}

static void case_loader_rejects_missing_file(void **state) {
    (void)state;
    char err[256] = "";
    assert_int_equal(gg_cases_load("/nonexistent/cases.csv", cases, GG_CASES_MAX, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_equal_for_same_fields),
        cmocka_unit_test(key_differs_in_every_field),
        cmocka_unit_test(cache_finds_what_it_stored),
        cmocka_unit_test(case_table_has_16_per_block),
        cmocka_unit_test(case_table_silu_pattern_matches_spec),
        cmocka_unit_test(case_table_sol_geomeans_match_spec),
        cmocka_unit_test(case_loader_rejects_missing_file),
    };
    return cmocka_run_group_tests_name("plan_cache_and_cases", tests, NULL, NULL);
}
