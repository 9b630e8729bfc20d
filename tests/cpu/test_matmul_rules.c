/* test_matmul_rules.c - the rules that pick cuBLASLt algorithms and need no GPU: the CTA count of each cluster
 * shape (GEMMs that leave SMs to communication keep only small clusters), the k at which split-k is not trusted, and
 * the GEMMs that run their k in two. */
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

/* The k that were wrong with split-k (4097 ... 86404) and every other k that is not a multiple of 128 are refused
 * it; multiples of 128 keep it. */
static void split_k_untrusted_off_multiples_of_128(void **state) {
    (void)state;
    static const int64_t untrusted[] = {4097, 4225, 4353, 8193, 11905, 27137, 32769, 65537, 32392, 86404,
                                        1,    2,    64,   333,  11912, 17312, 34784, 74432, 39232, 100000};
    static const int64_t trusted[] = {128, 256, 2048, 4224, 8192, 16384, 32768, 65536, 32384, 86400};
    for (size_t i = 0; i < sizeof untrusted / sizeof untrusted[0]; ++i)
        assert_true(gg_matmul_split_k_untrusted(untrusted[i]));
    for (size_t i = 0; i < sizeof trusted / sizeof trusted[0]; ++i)
        assert_false(gg_matmul_split_k_untrusted(trusted[i]));
}

/* Block 4's dW (E x H = 1536 x 768 over k = the tokens, A as is, B transposed, bf16) under the narrow schedule's SM
 * target runs its tail apart at a k from 10240 that is not a multiple of 128; not at a multiple of 128, below 10240,
 * with an epilogue, with k the contiguous dimension of either operand, or with as many 128 x 128 tiles as SMs. */
static void tail_apart_for_small_outputs(void **state) {
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
    assert_true(gg_matmul_tail_apart(&dw, 132)); /* 72 tiles, 92 SMs */
    gg_gemm_shape s = dw;
    s.sm_count_target = 0;
    assert_true(gg_matmul_tail_apart(&s, 132));
    assert_false(gg_matmul_tail_apart(&s, 72)); /* as many tiles as SMs */
    s.sm_count_target = 40;
    assert_false(gg_matmul_tail_apart(&s, 132));
    static const int64_t apart[] = {10241, 11905, 11912, 17312, 32769, 34784, 65537, 74432, 99999};
    static const int64_t whole[] = {1, 3, 513, 4225, 10239, 10240, 11904, 32768, 65536};
    for (size_t i = 0; i < sizeof apart / sizeof apart[0]; ++i) {
        s = dw;
        s.k = apart[i];
        assert_true(gg_matmul_tail_apart(&s, 132));
    }
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; ++i) {
        s = dw;
        s.k = whole[i];
        assert_false(gg_matmul_tail_apart(&s, 132));
    }
    s = dw;
    s.m = s.n = s.lda = s.ldb = s.ldd = 4096; /* 1024 tiles */
    assert_false(gg_matmul_tail_apart(&s, 132));
    s = dw;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    assert_false(gg_matmul_tail_apart(&s, 132));
    s = dw;
    s.trans_a = 1;
    assert_false(gg_matmul_tail_apart(&s, 132));
    s = dw;
    s.trans_b = 0;
    assert_false(gg_matmul_tail_apart(&s, 132));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_ctas_match_the_shape_names),
        cmocka_unit_test(unknown_cluster_shapes_have_no_count),
        cmocka_unit_test(split_k_untrusted_off_multiples_of_128),
        cmocka_unit_test(tail_apart_for_small_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
