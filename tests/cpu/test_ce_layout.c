/* test_ce_layout.c - the pieces of the copy-engine all-reduce (src/ddp/ce_layout.c), run on the CPU: W simulated
 * ranks follow gg_ce_share step by step (all-to-all of a piece into a staging buffer of the piece size, adding in
 * rank order into this rank's share, in-place all-gather, then NCCL's all-reduce for the tail), and every element
 * must come out as the rank-order sum, the same bits on every rank. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "copy_engine.h"

enum { MAX_RANKS = 8 };

/* One gradient of n floats on `ranks` simulated ranks, in pieces of at most piece_elems. */
static void simulate(size_t n, int ranks, size_t piece_elems) {
    float *data[MAX_RANKS], *orig[MAX_RANKS], *staging[MAX_RANKS];
    for (int r = 0; r < ranks; ++r) {
        data[r] = malloc(n * sizeof(float)), orig[r] = malloc(n * sizeof(float));
        staging[r] = malloc(piece_elems * sizeof(float)); /* exactly one piece, as in the library */
        assert_true(data[r] && orig[r] && staging[r]);
        for (size_t i = 0; i < n; ++i) orig[r][i] = data[r][i] = (float)(rand() % 2001 - 1000) / 64.0f;
    }
    size_t at = 0, pieces = 0;
    for (size_t q; (q = gg_ce_share(n, at, ranks, piece_elems)) != 0; at += q * (size_t)ranks, ++pieces) {
        assert_true(q * (size_t)ranks <= piece_elems); /* a piece fits the staging */
        assert_true(at + q * (size_t)ranks <= n);
        for (int r = 0; r < ranks; ++r) /* all-to-all: rank j's share r of the piece -> rank r's staging row j */
            for (int j = 0; j < ranks; ++j) memcpy(staging[r] + j * q, data[j] + at + (size_t)r * q, q * sizeof(float));
        for (int r = 0; r < ranks; ++r) /* the adding kernel: into this rank's own share, in place */
            for (size_t i = 0; i < q; ++i) {
                float acc = 0.0f;
                for (int j = 0; j < ranks; ++j) acc += staging[r][j * q + i];
                data[r][at + (size_t)r * q + i] = acc;
            }
        for (int r = 0; r < ranks; ++r) /* in-place all-gather: rank j's share from rank j */
            for (int j = 0; j < ranks; ++j)
                if (j != r) memcpy(data[r] + at + (size_t)j * q, data[j] + at + (size_t)j * q, q * sizeof(float));
    }
    assert_true(n - at < (size_t)ranks || piece_elems < (size_t)ranks); /* what is left is the tail */
    assert_true(pieces <= n / (size_t)ranks);
    /* the count the graphs' collective limit uses: two per piece, one for a tail */
    assert_int_equal(gg_ce_collectives(n, ranks, piece_elems), 2 * pieces + (at < n));
    for (size_t i = at; i < n; ++i) { /* the tail: NCCL's all-reduce */
        float acc = 0.0f;
        for (int j = 0; j < ranks; ++j) acc += orig[j][i];
        for (int r = 0; r < ranks; ++r) data[r][i] = acc;
    }
    for (int r = 0; r < ranks; ++r)
        for (size_t i = 0; i < n; ++i) {
            float want = 0.0f;
            for (int j = 0; j < ranks; ++j) want += orig[j][i];
            if (data[r][i] != want)
                fail_msg("n %zu, %d ranks, pieces of %zu: rank %d element %zu is %g, want %g", n, ranks, piece_elems,
                         r, i, (double)data[r][i], (double)want);
        }
    for (int r = 0; r < ranks; ++r) free(data[r]), free(orig[r]), free(staging[r]);
}

static void every_element_is_summed_once(void **state) {
    (void)state;
    srand(7);
    const size_t sizes[] = {1, 2, 3, 7, 64, 1000, 4099, 65536 + 5};
    const int ranks[] = {1, 2, 3, 4, 8};
    const size_t pieces[] = {1, 5, 64, 4096, 1 << 20};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; ++a)
        for (size_t b = 0; b < sizeof ranks / sizeof *ranks; ++b)
            for (size_t c = 0; c < sizeof pieces / sizeof *pieces; ++c) simulate(sizes[a], ranks[b], pieces[c]);
}

/* The shapes that matter: block 2's and 3's weight gradients with 25 MiB pieces on 2 ranks, and the edges. */
static void ffn_gradients_take_the_expected_pieces(void **state) {
    (void)state;
    const size_t piece = ((size_t)25 << 20) / 4, dw068 = 6144u * 1536u, dw073 = 8192u * 2048u;
    assert_int_equal(gg_ce_share(dw068, 0, 2, piece), piece / 2); /* 36 MiB: a full piece, then the rest */
    assert_int_equal(gg_ce_share(dw068, piece, 2, piece), (dw068 - piece) / 2);
    assert_int_equal(gg_ce_share(dw068, dw068, 2, piece), 0);
    assert_int_equal(gg_ce_share(dw073, 2 * piece, 2, piece), (dw073 - 2 * piece) / 2); /* 64 MiB: 3 pieces */
    assert_int_equal(gg_ce_share(5, 4, 2, 16), 0); /* one element left on two ranks: tail */
    assert_int_equal(gg_ce_share(5, 0, 0, 16), 0); /* no ranks */
    assert_int_equal(gg_ce_share(100, 0, 4, 2), 0); /* a piece cannot hold one element per rank: all tail */
    assert_int_equal(gg_ce_collectives(dw073, 2, piece), 6); /* 3 pieces, no tail */
    assert_int_equal(gg_ce_collectives(5, 2, 16), 3);        /* one piece of 2 x 2, a tail of 1 */
    assert_int_equal(gg_ce_collectives(100, 4, 2), 1);       /* all tail */
    assert_int_equal(gg_ce_collectives(0, 2, 16), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_element_is_summed_once),
        cmocka_unit_test(ffn_gradients_take_the_expected_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
