/* test_graph_parts.c - the graph machinery's plain-C parts: bucket policies and selection, the exec cache and the
 * pointer-set ids of step graphs (CPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buckets.h"
#include "exec_cache.h"

static int make(gg_graph_config *c, int64_t *b, char *err) { return gg_buckets_make(c, b, err, 256); }

static void pow2_policy(void **state) {
    (void)state;
    gg_graph_config c = GG_GRAPH_CONFIG_INIT;
    c.min_tokens = 100; /* rounded up to 128 */
    c.max_tokens = 3000; /* not a power of two: the cap is a bucket of its own */
    int64_t b[GG_MAX_BUCKETS];
    char err[256];
    assert_int_equal(make(&c, b, err), 6);
    const int64_t expected[] = {128, 256, 512, 1024, 2048, 3000};
    assert_memory_equal(b, expected, sizeof expected);
}

static void step_policy(void **state) {
    (void)state;
    gg_graph_config c = GG_GRAPH_CONFIG_INIT;
    c.policy = GG_BUCKETS_STEP;
    c.step = 512;
    c.max_tokens = 2048;
    int64_t b[GG_MAX_BUCKETS];
    char err[256];
    assert_int_equal(make(&c, b, err), 4);
    const int64_t expected[] = {512, 1024, 1536, 2048};
    assert_memory_equal(b, expected, sizeof expected);
    c.step = 1; /* 2048 buckets: too many */
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "config->step = 1 makes more than 64 buckets"));
    c.step = 0;
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "config->step = 0 must be positive"));
    c.step = INT64_MAX; /* past max_tokens: the cap alone (the bucket count must not overflow: the fuzzer found it) */
    assert_int_equal(make(&c, b, err), 1);
    assert_int_equal(b[0], 2048);
}

static void list_policy_sorts_and_dedups(void **state) {
    (void)state;
    const int64_t tokens[] = {4096, 131, 997, 131, 4096};
    gg_graph_config c = GG_GRAPH_CONFIG_INIT;
    c.policy = GG_BUCKETS_LIST;
    c.bucket_tokens = tokens;
    c.n_buckets = 5;
    int64_t b[GG_MAX_BUCKETS];
    char err[256];
    assert_int_equal(make(&c, b, err), 3);
    const int64_t expected[] = {131, 997, 4096};
    assert_memory_equal(b, expected, sizeof expected);
    const int64_t bad[] = {64, -3};
    c.bucket_tokens = bad;
    c.n_buckets = 2;
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "config->bucket_tokens[1] = -3"));
    c.bucket_tokens = NULL;
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "GG_BUCKETS_LIST needs"));
}

static void bad_policy_fields(void **state) {
    (void)state;
    int64_t b[GG_MAX_BUCKETS];
    char err[256];
    gg_graph_config c = GG_GRAPH_CONFIG_INIT;
    c.max_tokens = 0;
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "config->max_tokens = 0"));
    c = (gg_graph_config)GG_GRAPH_CONFIG_INIT;
    c.min_tokens = 1 << 20; /* above max_tokens */
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "config->min_tokens = 1048576"));
    c = (gg_graph_config)GG_GRAPH_CONFIG_INIT;
    c.policy = (gg_bucket_policy)7;
    assert_int_equal(make(&c, b, err), -1);
    assert_non_null(strstr(err, "config->policy = 7"));
}

static void selection_picks_smallest_bucket_that_fits(void **state) {
    (void)state;
    const int64_t b[] = {128, 256, 512};
    assert_int_equal(gg_buckets_select(b, 3, 1), 0);
    assert_int_equal(gg_buckets_select(b, 3, 128), 0);
    assert_int_equal(gg_buckets_select(b, 3, 129), 1);
    assert_int_equal(gg_buckets_select(b, 3, 512), 2);
    assert_int_equal(gg_buckets_select(b, 3, 513), -1);
}

static gg_exec_key key_with(int tag, int flags) {
    gg_exec_key k;
    memset(&k, 0, sizeof k);
    k.ptr[0] = (const void *)(uintptr_t)(0x1000 * tag);
    k.tokens = 1024;
    k.flags = flags;
    return k;
}

static void exec_cache_finds_by_pointer_set_and_generation(void **state) {
    (void)state;
    gg_exec_cache c;
    assert_int_equal(gg_exec_cache_init(&c, 2), 0);
    const gg_exec_key a = key_with(1, 0), a_acc = key_with(1, 1), z = key_with(2, 0);
    int exec_a, exec_z;
    assert_null(gg_exec_cache_find(&c, &a, 0));
    gg_exec_entry *e = gg_exec_cache_slot(&c, &a, 0);
    assert_null(e->exec); /* a free slot */
    e->exec = &exec_a;
    e = gg_exec_cache_slot(&c, &z, 0);
    assert_null(e->exec);
    e->exec = &exec_z;
    assert_ptr_equal(gg_exec_cache_find(&c, &a, 0)->exec, &exec_a);
    assert_ptr_equal(gg_exec_cache_find(&c, &z, 0)->exec, &exec_z);
    assert_null(gg_exec_cache_find(&c, &a_acc, 0)); /* the flags are part of the key */
    assert_null(gg_exec_cache_find(&c, &a, 1));     /* captured against an older scratch arena */
    gg_exec_cache_free(&c);
}

static void exec_cache_reuses_least_recently_used(void **state) {
    (void)state;
    gg_exec_cache c;
    assert_int_equal(gg_exec_cache_init(&c, 2), 0);
    const gg_exec_key a = key_with(1, 0), z = key_with(2, 0), n = key_with(3, 0);
    int ea, ez;
    gg_exec_cache_slot(&c, &a, 0)->exec = &ea;
    gg_exec_cache_slot(&c, &z, 0)->exec = &ez;
    assert_non_null(gg_exec_cache_find(&c, &a, 0)); /* a used last: z is the LRU */
    gg_exec_entry *e = gg_exec_cache_slot(&c, &n, 0);
    assert_ptr_equal(e->exec, &ez); /* the caller updates this exec in place */
    assert_non_null(gg_exec_cache_find(&c, &n, 0));
    assert_null(gg_exec_cache_find(&c, &z, 0));
    assert_non_null(gg_exec_cache_find(&c, &a, 0));
    gg_exec_cache_free(&c);
}

/* Two sets asked for in turn keep their ids; a third evicts the least recently asked for, which comes back with a
 * new id (its old execs are never found again); ids are never reused. */
static void ptrset_ids_are_stable_and_never_reused(void **state) {
    (void)state;
    gg_ptrset_table t;
    assert_int_equal(gg_ptrset_init(&t, 2, 3), 0);
    int x[6];
    const void *a[3] = {&x[0], &x[1], &x[2]}, *b[3] = {&x[3], &x[1], &x[2]}, *c[3] = {&x[0], &x[1], &x[5]};
    const uint64_t ia = gg_ptrset_id(&t, a), ib = gg_ptrset_id(&t, b);
    assert_true(ia != 0 && ib != 0 && ia != ib);
    for (int i = 0; i < 4; ++i) { /* double buffering: A, B, A, B ... */
        assert_int_equal(gg_ptrset_id(&t, a), ia);
        assert_int_equal(gg_ptrset_id(&t, b), ib);
    }
    const uint64_t ic = gg_ptrset_id(&t, c); /* b was asked for last: a goes */
    assert_true(ic != ia && ic != ib);
    assert_int_equal(gg_ptrset_id(&t, b), ib);
    const uint64_t ia2 = gg_ptrset_id(&t, a); /* c is now the least recently used */
    assert_true(ia2 != ia && ia2 != ib && ia2 != ic);
    assert_int_equal(gg_ptrset_id(&t, b), ib);
    assert_int_equal(gg_ptrset_id(&t, a), ia2);
    gg_ptrset_free(&t);
    gg_ptrset_free(&t); /* a freed (zeroed) table again */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pow2_policy),
        cmocka_unit_test(step_policy),
        cmocka_unit_test(list_policy_sorts_and_dedups),
        cmocka_unit_test(bad_policy_fields),
        cmocka_unit_test(selection_picks_smallest_bucket_that_fits),
        cmocka_unit_test(exec_cache_finds_by_pointer_set_and_generation),
        cmocka_unit_test(exec_cache_reuses_least_recently_used),
        cmocka_unit_test(ptrset_ids_are_stable_and_never_reused),
    };
    return cmocka_run_group_tests_name("graph_parts", tests, NULL, NULL);
}
