/* test_ce_layout.c - the geometry of the copy-engine gradient reduction (src/dist/copy_engine.c), run on the CPU:
 * W simulated ranks follow gg_ce_round_at's byte offsets step by step (strided copy in, all-to-all, adding in rank
 * order, all-gather, strided copy out; reduce-scatter stops after the adding), with staging buffers of the piece
 * size, and every element must come out as the rank-order sum, in every rank, or in its owner's shard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "copy_engine.h"

enum { MAX_RANKS = 8 };

/* cudaMemcpy2D on the host: `rows` rows of `width` bytes. */
static void copy_2d(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width, size_t rows) {
    for (size_t j = 0; j < rows; ++j) memcpy(dst + j * dpitch, src + j * spitch, width);
}

/* One gradient of n floats on `ranks` simulated ranks, through the layout with staging pieces of piece_elems. */
static void simulate(size_t n, int ranks, size_t piece_elems, int all_reduce) {
    const size_t elem = sizeof(float), piece = piece_elems * elem;
    float *data[MAX_RANKS], *orig[MAX_RANKS];
    char *send[MAX_RANKS], *recv[MAX_RANKS];
    for (int r = 0; r < ranks; ++r) {
        data[r] = malloc(n * elem), orig[r] = malloc(n * elem);
        send[r] = malloc(piece), recv[r] = malloc(piece);
        assert_true(data[r] && orig[r] && send[r] && recv[r]);
        for (size_t i = 0; i < n; ++i) orig[r][i] = data[r][i] = (float)(rand() % 2001 - 1000) / 64.0f;
    }
    const gg_ce_layout l = gg_ce_layout_make(n, ranks, piece_elems);
    assert_int_equal(l.shard * (size_t)ranks + l.tail, n);
    assert_true(l.tail < (size_t)ranks);
    for (size_t k = 0; k < l.rounds; ++k) {
        gg_ce_round rd[MAX_RANKS];
        for (int r = 0; r < ranks; ++r) {
            rd[r] = gg_ce_round_at(&l, k, elem, r);
            assert_true(rd[r].elems >= 1);
            assert_true(rd[r].width * (size_t)ranks <= piece); /* a round fits the staging */
            copy_2d(send[r], rd[r].width, (char *)data[r] + rd[r].src, rd[r].pitch, rd[r].width, (size_t)ranks);
        }
        for (int r = 0; r < ranks; ++r) /* all-to-all: rank j's row r lands in rank r's row j */
            for (int j = 0; j < ranks; ++j) memcpy(recv[r] + j * rd[r].width, send[j] + r * rd[j].width, rd[r].width);
        for (int r = 0; r < ranks; ++r) {
            float *sums = (float *)(all_reduce ? send[r] + rd[r].mine : (char *)data[r] + rd[r].owned);
            for (size_t i = 0; i < rd[r].elems; ++i) {
                float acc = 0.0f;
                for (int j = 0; j < ranks; ++j) acc += ((const float *)(recv[r] + j * rd[r].width))[i];
                sums[i] = acc;
            }
        }
        if (!all_reduce) continue;
        for (int r = 0; r < ranks; ++r) /* all-gather: rank j's sums land in every rank's row j */
            for (int j = 0; j < ranks; ++j) memcpy(recv[r] + j * rd[r].width, send[j] + rd[j].mine, rd[r].width);
        for (int r = 0; r < ranks; ++r)
            copy_2d((char *)data[r] + rd[r].src, rd[r].pitch, recv[r], rd[r].width, rd[r].width, (size_t)ranks);
    }
    for (size_t i = l.shard * (size_t)ranks; i < n && all_reduce; ++i) { /* the tail: NCCL's all-reduce */
        float acc = 0.0f;
        for (int j = 0; j < ranks; ++j) acc += orig[j][i];
        for (int r = 0; r < ranks; ++r) data[r][i] = acc;
    }
    for (int r = 0; r < ranks; ++r)
        for (size_t i = 0; i < n; ++i) {
            const int owned = i >= (size_t)r * l.shard && i < (size_t)(r + 1) * l.shard;
            if (!all_reduce && !owned) continue; /* reduce-scatter: the rest is undefined */
            float want = 0.0f;
            for (int j = 0; j < ranks; ++j) want += orig[j][i];
            if (data[r][i] != want)
                fail_msg("n %zu, %d ranks, pieces of %zu, %s: rank %d element %zu is %g, want %g", n, ranks,
                         piece_elems, all_reduce ? "all-reduce" : "reduce-scatter", r, i, (double)data[r][i],
                         (double)want);
        }
    for (int r = 0; r < ranks; ++r) free(data[r]), free(orig[r]), free(send[r]), free(recv[r]);
}

static void every_element_is_summed_once(void **state) {
    (void)state;
    srand(7);
    const size_t sizes[] = {1, 2, 3, 7, 64, 1000, 4099, 65536 + 5};
    const int ranks[] = {1, 2, 3, 4, 8};
    const size_t pieces[] = {1, 5, 64, 4096, 1 << 20};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; ++a)
        for (size_t b = 0; b < sizeof ranks / sizeof *ranks; ++b)
            for (size_t c = 0; c < sizeof pieces / sizeof *pieces; ++c) {
                if (pieces[c] < (size_t)ranks[b]) continue; /* a piece holds at least one element per rank */
                simulate(sizes[a], ranks[b], pieces[c], 1);
                if (sizes[a] % (size_t)ranks[b] == 0) simulate(sizes[a], ranks[b], pieces[c], 0);
            }
}

/* The shapes that matter: block 2's and 3's weight gradients with 25 MiB pieces on 2 ranks. */
static void ffn_gradients_take_the_expected_rounds(void **state) {
    (void)state;
    const size_t piece = ((size_t)25 << 20) / 4;
    gg_ce_layout l = gg_ce_layout_make(6144u * 1536u, 2, piece); /* 068's dW: 36 MiB */
    assert_int_equal(l.shard, 6144u * 1536u / 2);
    assert_int_equal(l.rounds, 2);
    assert_int_equal(l.tail, 0);
    assert_int_equal(gg_ce_round_len(&l, 0) + gg_ce_round_len(&l, 1), l.shard);
    assert_int_equal(gg_ce_round_len(&l, 2), 0);
    l = gg_ce_layout_make(8192u * 2048u, 2, piece); /* 073's dW: 64 MiB */
    assert_int_equal(l.rounds, 3);
    const gg_ce_round r = gg_ce_round_at(&l, 1, 4, 1);
    assert_int_equal(r.src, l.round * 4);
    assert_int_equal(r.pitch, l.shard * 4);
    assert_int_equal(r.mine, r.width);
    assert_int_equal(r.owned, l.shard * 4 + l.round * 4);
    l = gg_ce_layout_make(5, 0, 16); /* no ranks: nothing to cut, everything is tail */
    assert_int_equal(l.rounds, 0);
    assert_int_equal(l.tail, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_element_is_summed_once),
        cmocka_unit_test(ffn_gradients_take_the_expected_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
