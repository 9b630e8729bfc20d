/* test_f32w_rules.c - the rules about gg_k_gemm_f32w's grid that need no GPU. Its k split: every cluster of a launch
 * must fit on the GPU at once (a second wave doubled 073's dX at 256 tokens: docs/decisions.md), and of the
 * splits that fit, the one that leaves each CTA the fewest k-tiles wins, the smaller on a tie. Its CTAs: tiles times
 * split, which the FFN route compares with the SM count (dX at 1024 tokens only where it fills the GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kernels/gg_kernels.h"

/* cudaOccupancyMaxActiveClusters on an H200 for clusters of 1..8 CTAs of the kernel (one CTA per SM). */
static const int h200[GG_F32W_MAX_SPLIT + 1] = {0, 132, 66, 39, 30, 22, 17, 15, 15};

static void splits_of_the_workload_shapes_on_an_h200(void **state) {
    (void)state;
    /* 073's dX at 256 tokens: 16 column tiles; clusters of 7 and 8 do not all fit (15), 6 do: 21-22 of 128 k-tiles */
    assert_int_equal(gg_k_gemm_f32w_split(256, 2048, 8192, h200), 6);
    /* 073's G at 256 tokens: 64 tiles, 66 clusters of 2 fit, 39 of 3 do not */
    assert_int_equal(gg_k_gemm_f32w_split(256, 8192, 2048, h200), 2);
    /* 073's dX at 512 tokens: 32 tiles, 30 clusters of 4 fit, so 3 */
    assert_int_equal(gg_k_gemm_f32w_split(512, 2048, 8192, h200), 3);
    /* 073's G at 512 tokens: 128 tiles, no cluster */
    assert_int_equal(gg_k_gemm_f32w_split(512, 8192, 2048, h200), 1);
    /* 068 at 256 tokens: G 48 tiles in clusters of 2, dX 12 tiles in clusters of 8 */
    assert_int_equal(gg_k_gemm_f32w_split(256, 6144, 1536, h200), 2);
    assert_int_equal(gg_k_gemm_f32w_split(256, 1536, 6144, h200), 8);
}

static void one_more_cluster_that_fits_changes_the_choice(void **state) {
    (void)state;
    int roomier[GG_F32W_MAX_SPLIT + 1];
    for (int s = 0; s <= GG_F32W_MAX_SPLIT; ++s) roomier[s] = h200[s];
    roomier[8] = 16; /* 073's dX at 256 tokens: all 16 clusters of 8 fit, 16 k-tiles each */
    assert_int_equal(gg_k_gemm_f32w_split(256, 2048, 8192, roomier), 8);
}

static void ties_and_short_k(void **state) {
    (void)state;
    /* the small-shape test's uneven split: 24 tiles over 10 k-tiles, 22 clusters of 5 do not fit: 4 (3, 2, 3, 2) */
    assert_int_equal(gg_k_gemm_f32w_split(64, 3072, 640, h200), 4);
    /* one tile over 10 k-tiles: 5 to 8 all leave 2 k-tiles per CTA, the smallest wins */
    assert_int_equal(gg_k_gemm_f32w_split(64, 128, 640, h200), 5);
    /* never more CTAs than k-tiles */
    assert_int_equal(gg_k_gemm_f32w_split(64, 128, 64, h200), 1);
    assert_int_equal(gg_k_gemm_f32w_split(64, 128, 192, h200), 3);
    /* no cluster fits at all: no split */
    const int none[GG_F32W_MAX_SPLIT + 1] = {0};
    assert_int_equal(gg_k_gemm_f32w_split(256, 2048, 8192, none), 1);
}

static void ctas_at_1024_tokens(void **state) {
    (void)state;
    /* dX: 073's 64 tiles in clusters of 2 fill 128 of 132 SMs; 068's 48 in clusters of 2 only 96 */
    assert_int_equal(gg_k_gemm_f32w_ctas(1024, 2048, 8192, h200), 128);
    assert_int_equal(gg_k_gemm_f32w_ctas(1024, 1536, 6144, h200), 96);
    /* G: 073's 256 tiles and 068's 192 are over the capacity of any cluster: no split, two waves */
    assert_int_equal(gg_k_gemm_f32w_ctas(1024, 8192, 2048, h200), 256);
    assert_int_equal(gg_k_gemm_f32w_ctas(1024, 6144, 1536, h200), 192);
    /* a partial token tile counts as a tile */
    assert_int_equal(gg_k_gemm_f32w_ctas(321, 128, 64, h200), 2);
}

/* The wide tile (256 + 64 tokens) where it makes fewer tiles than 256-token ones that all run at once: 257-320 tokens
 * one tile, 321-512 two of 256, 513-640 two wide ones, 641-768 three of 256, 769-960 three wide ones where they fit on
 * the SMs (not 068's G: 144 tiles, so 192 of 256 tokens). */
static void wide_tiles_where_they_save_one(void **state) {
    (void)state;
    static const struct { int64_t tokens, tiles; } cases[] = {{1, 1},   {256, 1}, {257, 1}, {320, 1}, {321, 2},
                                                               {512, 2}, {513, 2}, {640, 2}, {641, 3}, {768, 3},
                                                               {769, 3}, {960, 3}, {961, 4}, {1024, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        assert_int_equal(gg_k_gemm_f32w_ctas(cases[i].tokens, 128, 64, h200), cases[i].tiles); /* 1 k-tile: no split */
    /* 068's G and dX at 257 tokens split as at 256 (48 and 12 tiles), not as at 512 */
    assert_int_equal(gg_k_gemm_f32w_split(257, 6144, 1536, h200), 2);
    assert_int_equal(gg_k_gemm_f32w_split(257, 1536, 6144, h200), 8);
    assert_int_equal(gg_k_gemm_f32w_split(320, 6144, 1536, h200), 2);
    assert_int_equal(gg_k_gemm_f32w_split(321, 6144, 1536, h200), 1);
    /* 068 at 769 tokens: G's 144 wide tiles would take two waves, so 192 of 256 tokens; dX's 36 wide ones in
     * clusters of 3 */
    assert_int_equal(gg_k_gemm_f32w_ctas(769, 6144, 1536, h200), 192);
    assert_int_equal(gg_k_gemm_f32w_ctas(769, 1536, 6144, h200), 108);
    /* 073's G at 640 tokens: 128 wide tiles still fit */
    assert_int_equal(gg_k_gemm_f32w_ctas(640, 8192, 2048, h200), 128);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(splits_of_the_workload_shapes_on_an_h200),
        cmocka_unit_test(one_more_cluster_that_fits_changes_the_choice),
        cmocka_unit_test(ties_and_short_k),
        cmocka_unit_test(ctas_at_1024_tokens),
        cmocka_unit_test(wide_tiles_where_they_save_one),
    };
    return cmocka_run_group_tests_name("f32w_rules", tests, NULL, NULL);
}
