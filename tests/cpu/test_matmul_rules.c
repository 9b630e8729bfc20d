/* test_matmul_rules.c - the rules that pick cuBLASLt algorithms and need no GPU: the CTA count of each cluster
 * shape (GEMMs that leave SMs to communication keep only small clusters), the k at which split-k is not trusted, and
 * the GEMMs of an odd k that run their last row apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "matmul.h"

/* Every AxBx1 shape cublasLt.h names, with A*B CTAs: the table in matmul.c must agree with the header's values. */
static void cluster_ctas_match_the_shape_names(void **state) {
    (void)state;
    static const struct {
        int id, ctas;
    } shapes[] = {
        {CUBLASLT_CLUSTER_SHAPE_10x1x1, 10},
        {CUBLASLT_CLUSTER_SHAPE_11x1x1, 11},
        {CUBLASLT_CLUSTER_SHAPE_12x1x1, 12},
        {CUBLASLT_CLUSTER_SHAPE_13x1x1, 13},
        {CUBLASLT_CLUSTER_SHAPE_14x1x1, 14},
        {CUBLASLT_CLUSTER_SHAPE_15x1x1, 15},
        {CUBLASLT_CLUSTER_SHAPE_16x1x1, 16},
        {CUBLASLT_CLUSTER_SHAPE_1x10x1, 10},
        {CUBLASLT_CLUSTER_SHAPE_1x11x1, 11},
        {CUBLASLT_CLUSTER_SHAPE_1x12x1, 12},
        {CUBLASLT_CLUSTER_SHAPE_1x13x1, 13},
        {CUBLASLT_CLUSTER_SHAPE_1x14x1, 14},
        {CUBLASLT_CLUSTER_SHAPE_1x15x1, 15},
        {CUBLASLT_CLUSTER_SHAPE_1x16x1, 16},
        {CUBLASLT_CLUSTER_SHAPE_1x1x1, 1},
        {CUBLASLT_CLUSTER_SHAPE_1x2x1, 2},
        {CUBLASLT_CLUSTER_SHAPE_1x3x1, 3},
        {CUBLASLT_CLUSTER_SHAPE_1x4x1, 4},
        {CUBLASLT_CLUSTER_SHAPE_1x5x1, 5},
        {CUBLASLT_CLUSTER_SHAPE_1x6x1, 6},
        {CUBLASLT_CLUSTER_SHAPE_1x7x1, 7},
        {CUBLASLT_CLUSTER_SHAPE_1x8x1, 8},
        {CUBLASLT_CLUSTER_SHAPE_1x9x1, 9},
        {CUBLASLT_CLUSTER_SHAPE_2x1x1, 2},
        {CUBLASLT_CLUSTER_SHAPE_2x2x1, 4},
        {CUBLASLT_CLUSTER_SHAPE_2x3x1, 6},
        {CUBLASLT_CLUSTER_SHAPE_2x4x1, 8},
        {CUBLASLT_CLUSTER_SHAPE_2x5x1, 10},
        {CUBLASLT_CLUSTER_SHAPE_2x6x1, 12},
        {CUBLASLT_CLUSTER_SHAPE_2x7x1, 14},
        {CUBLASLT_CLUSTER_SHAPE_2x8x1, 16},
        {CUBLASLT_CLUSTER_SHAPE_3x1x1, 3},
        {CUBLASLT_CLUSTER_SHAPE_3x2x1, 6},
        {CUBLASLT_CLUSTER_SHAPE_3x3x1, 9},
        {CUBLASLT_CLUSTER_SHAPE_3x4x1, 12},
        {CUBLASLT_CLUSTER_SHAPE_3x5x1, 15},
        {CUBLASLT_CLUSTER_SHAPE_4x1x1, 4},
        {CUBLASLT_CLUSTER_SHAPE_4x2x1, 8},
        {CUBLASLT_CLUSTER_SHAPE_4x3x1, 12},
        {CUBLASLT_CLUSTER_SHAPE_4x4x1, 16},
        {CUBLASLT_CLUSTER_SHAPE_5x1x1, 5},
        {CUBLASLT_CLUSTER_SHAPE_5x2x1, 10},
        {CUBLASLT_CLUSTER_SHAPE_5x3x1, 15},
        {CUBLASLT_CLUSTER_SHAPE_6x1x1, 6},
        {CUBLASLT_CLUSTER_SHAPE_6x2x1, 12},
        {CUBLASLT_CLUSTER_SHAPE_7x1x1, 7},
        {CUBLASLT_CLUSTER_SHAPE_7x2x1, 14},
        {CUBLASLT_CLUSTER_SHAPE_8x1x1, 8},
        {CUBLASLT_CLUSTER_SHAPE_8x2x1, 16},
        {CUBLASLT_CLUSTER_SHAPE_9x1x1, 9},    };
    const size_t n = sizeof shapes / sizeof shapes[0];
    assert_true(n >= 50); /* every shape of CUDA 13.0's header */
    for (size_t i = 0; i < n; ++i) {
        if (gg_cluster_shape_ctas(shapes[i].id) != shapes[i].ctas)
            fail_msg("cluster shape %d: %d CTAs, expected %d", shapes[i].id, gg_cluster_shape_ctas(shapes[i].id),
                     shapes[i].ctas);
    }
}

static void unknown_cluster_shapes_have_no_count(void **state) {
    (void)state;
    assert_int_equal(gg_cluster_shape_ctas(CUBLASLT_CLUSTER_SHAPE_AUTO), 0);
    assert_int_equal(gg_cluster_shape_ctas(1), 0); /* no enumerator */
    assert_int_equal(gg_cluster_shape_ctas(CUBLASLT_CLUSTER_SHAPE_END), 0);
    assert_int_equal(gg_cluster_shape_ctas(-1), 0);
    assert_int_equal(gg_cluster_shape_ctas(1000), 0);
}

/* The k that were wrong with split-k (4097 ... 65537) and every other odd k are refused it; even k (the benchmark's
 * token counts among them) keep it. */
static void split_k_untrusted_at_odd_k(void **state) {
    (void)state;
    static const int64_t untrusted[] = {4097, 4225, 4353, 8193, 11905, 27137, 32769, 65537, 1,
                                        3,    333,  4227, 16383, 32771, 99999, 32767};
    static const int64_t trusted[] = {2, 4224, 4226, 11912, 16384, 32768, 65536, 65538, 74432, 39232, 34784, 100000};
    for (size_t i = 0; i < sizeof untrusted / sizeof untrusted[0]; ++i)
        assert_true(gg_matmul_split_k_untrusted(untrusted[i]));
    for (size_t i = 0; i < sizeof trusted / sizeof trusted[0]; ++i)
        assert_false(gg_matmul_split_k_untrusted(trusted[i]));
}

/* Block 4's dW (E x H = 1536 x 768 over k = the tokens, A as is, B transposed, bf16) under the narrow schedule's SM
 * target runs its last row apart at an odd k from 1024; not at an even k, below 1024, with an epilogue, with k the
 * contiguous dimension of either operand, with as many 128 x 128 tiles as SMs, or where the last row would start
 * off GG_ALIGNMENT. */
static void last_row_apart_for_small_outputs_at_odd_k(void **state) {
    (void)state;
    const gg_gemm_shape dw = {.trans_a = 0,
                              .trans_b = 1,
                              .m = 1536,
                              .n = 768,
                              .k = 11913,
                              .lda = 1536,
                              .ldb = 768,
                              .ldd = 1536,
                              .ab_type = CUDA_R_16BF,
                              .d_type = CUDA_R_16BF,
                              .compute = CUBLAS_COMPUTE_32F,
                              .sm_count_target = 92};
    assert_true(gg_matmul_last_row_apart(&dw, 132)); /* 72 tiles, 92 SMs */
    gg_gemm_shape s = dw;
    s.sm_count_target = 0;
    assert_true(gg_matmul_last_row_apart(&s, 132));
    assert_false(gg_matmul_last_row_apart(&s, 72)); /* as many tiles as SMs */
    s.sm_count_target = 40;
    assert_false(gg_matmul_last_row_apart(&s, 132));
    static const int64_t apart[] = {1025, 4225, 11905, 32769, 65537, 99999};
    static const int64_t whole[] = {1, 3, 513, 1023, 1024, 11912, 32768, 65536};
    for (size_t i = 0; i < sizeof apart / sizeof apart[0]; ++i) {
        s = dw;
        s.k = apart[i];
        assert_true(gg_matmul_last_row_apart(&s, 132));
    }
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; ++i) {
        s = dw;
        s.k = whole[i];
        assert_false(gg_matmul_last_row_apart(&s, 132));
    }
    s = dw;
    s.m = s.n = s.lda = s.ldb = s.ldd = 4096; /* 1024 tiles */
    assert_false(gg_matmul_last_row_apart(&s, 132));
    s = dw;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    assert_false(gg_matmul_last_row_apart(&s, 132));
    s = dw;
    s.trans_a = 1;
    assert_false(gg_matmul_last_row_apart(&s, 132));
    s = dw;
    s.trans_b = 0;
    assert_false(gg_matmul_last_row_apart(&s, 132));
    s = dw;
    s.k = 1027;
    s.lda = 1539; /* the last row 1026 x 1539 x 2 bytes in: off a 16-byte boundary */
    assert_false(gg_matmul_last_row_apart(&s, 132));
    s.lda = 1536;
    assert_true(gg_matmul_last_row_apart(&s, 132));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_ctas_match_the_shape_names),
        cmocka_unit_test(unknown_cluster_shapes_have_no_count),
        cmocka_unit_test(split_k_untrusted_at_odd_k),
        cmocka_unit_test(last_row_apart_for_small_outputs_at_odd_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
