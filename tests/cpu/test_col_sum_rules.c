/* test_col_sum_rules.c - the rules about the one-launch column sum's row chunks that need no GPU
 * (gg_k_col_sum_chunks: a plan sizes its partials buffer, chunks x N floats, with it, and the finish reads every
 * chunk's partial). About four CTAs of 256 threads per SM in all (a CTA per chunk and group of 256 columns, at most
 * GG_COL_SUM_COUNTERS groups side by side); at least 8 rows per lane (a CTA reads V rows at once, V = 4 for fp32
 * and 8 for bf16); at most 128 chunks (docs/decisions.md, "Column sums"); at least one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kernels/gg_kernels.h"

static void chunks_of_the_workload_sums_on_an_h200(void **state) {
    (void)state;
    /* block 3's grad_bias2 over dY [M, 2048] fp32: 8 groups, so 66 chunks (528 CTAs) once M allows them */
    assert_int_equal(gg_k_col_sum_chunks(8192, 2048, GG_DT_F32, 132), 66);
    assert_int_equal(gg_k_col_sum_chunks(2048, 2048, GG_DT_F32, 132), 64); /* 32 rows per chunk: 8 per lane */
    assert_int_equal(gg_k_col_sum_chunks(256, 2048, GG_DT_F32, 132), 8);
    /* block 3's grad_bias1 over R [M, 8192] fp32: 32 groups, 17 chunks (544 CTAs) */
    assert_int_equal(gg_k_col_sum_chunks(8192, 8192, GG_DT_F32, 132), 17);
    /* block 4's grad_bias over dY [M, 768] bf16: 3 groups; at 422 tokens 7 chunks of 64 rows, from ~11000 the cap */
    assert_int_equal(gg_k_col_sum_chunks(422, 768, GG_DT_BF16, 132), 7);
    assert_int_equal(gg_k_col_sum_chunks(74432, 768, GG_DT_BF16, 132), 128);
    /* its fused route's bias rows [ceil(74432 / 128), 768] fp32 */
    assert_int_equal(gg_k_col_sum_chunks(582, 768, GG_DT_F32, 132), 19);
}

static void few_rows_many_columns_and_no_sms(void **state) {
    (void)state;
    assert_int_equal(gg_k_col_sum_chunks(1, 2048, GG_DT_F32, 132), 1);
    assert_int_equal(gg_k_col_sum_chunks(1, 24, GG_DT_BF16, 132), 1);
    /* more groups than counters: GG_COL_SUM_COUNTERS CTAs side by side walk the groups */
    assert_int_equal(gg_k_col_sum_chunks(1 << 20, 1 << 20, GG_DT_F32, 132), (4 * 132 + GG_COL_SUM_COUNTERS - 1) /
                                                                               GG_COL_SUM_COUNTERS);
    /* an SM count of 0 counts as 1 */
    assert_int_equal(gg_k_col_sum_chunks(4096, 256, GG_DT_F32, 0), 4);
}

/* The bounds over a sweep of shapes and devices. */
static void bounds_hold_everywhere(void **state) {
    (void)state;
    const int64_t rows[] = {1, 7, 8, 31, 32, 33, 256, 422, 1000, 4096, 74432, 1 << 20};
    const int64_t cols[] = {8, 24, 256, 768, 2048, 8192, 65536};
    const int sms[] = {1, 16, 132, 148};
    const gg_dtype types[] = {GG_DT_F32, GG_DT_BF16};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; ++r)
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; ++c)
            for (size_t s = 0; s < sizeof sms / sizeof sms[0]; ++s)
                for (size_t t = 0; t < 2; ++t) {
                    const int chunks = gg_k_col_sum_chunks(rows[r], cols[c], types[t], sms[s]);
                    const int64_t lanes = types[t] == GG_DT_F32 ? 4 : 8, min_rows = 8 * lanes;
                    assert_in_range(chunks, 1, 128);
                    /* at least 8 rows per lane, unless one chunk holds them all */
                    if (chunks > 1) assert_true(rows[r] >= (int64_t)(chunks - 1) * min_rows + 1);
                    /* never more CTAs than about four per SM in all */
                    const int64_t groups = (cols[c] + 255) / 256;
                    const int64_t side = groups < GG_COL_SUM_COUNTERS ? groups : GG_COL_SUM_COUNTERS;
                    assert_true((int64_t)(chunks - 1) * side < 4 * (int64_t)sms[s]);
                }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunks_of_the_workload_sums_on_an_h200),
        cmocka_unit_test(few_rows_many_columns_and_no_sms),
        cmocka_unit_test(bounds_hold_everywhere),
    };
    return cmocka_run_group_tests_name("col_sum_rules", tests, NULL, NULL);
}
