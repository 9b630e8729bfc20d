/* test_step_layout.c - the packing of a step's parameter gradients into reduction buckets (src/ddp/step_layout.c),
 * on the CPU: buckets follow the production order (the step's call order, the backward's) across layer boundaries,
 * none exceeds bucket_bytes, a gradient larger than a bucket is cut into 256-byte aligned bucket-sized pieces, every
 * element of every gradient is covered exactly once, a bucket is ready after its last piece's producer, reduce-
 * scatter keeps gradients whole, and the fingerprint sees every change of the layout. Random layouts use a printed
 * seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "step_reduce.h"

#define MiB ((size_t)1 << 20)

/* The invariants of any layout of grads: coverage once, in order, bucket sizes, readiness, piece alignment. */
static void check_layout(const gg_reduce_grad *g, int n, size_t bucket_bytes, int whole, const gg_reduce_layout *l) {
    int piece = 0;
    for (int i = 0; i < n; ++i) { /* every gradient's pieces, in order, contiguous, covering it once */
        size_t at = 0;
        for (; piece < l->n_pieces && l->pieces[piece].grad == i; ++piece) {
            const gg_reduce_piece *p = &l->pieces[piece];
            assert_int_equal(p->offset, at);
            assert_true(p->count >= 1);
            if (whole) assert_int_equal(p->count, g[i].count);
            else assert_int_equal(p->offset * (size_t)g[i].elem_bytes % 256, 0); /* pieces after the first: aligned */
            at += p->count;
        }
        assert_int_equal(at, g[i].count);
    }
    assert_int_equal(piece, l->n_pieces);
    int next = 0, last_ready = -1;
    for (int b = 0; b < l->n_buckets; ++b) {
        const gg_reduce_bucket *k = &l->buckets[b];
        assert_int_equal(k->first, next); /* buckets take the pieces in order */
        assert_true(k->n >= 1);
        size_t bytes = 0;
        int producer = -1;
        for (int i = k->first; i < k->first + k->n; ++i) {
            const gg_reduce_grad *gi = &g[l->pieces[i].grad];
            bytes += l->pieces[i].count * (size_t)gi->elem_bytes;
            producer = gi->producer;
        }
        assert_int_equal(k->bytes, bytes);
        if (!whole || k->n > 1) assert_true(bytes <= bucket_bytes); /* only a whole gradient may exceed a bucket */
        assert_int_equal(k->ready, producer);
        assert_true(k->ready >= last_ready); /* launched in the order the backward produces them */
        last_ready = k->ready;
        if (b + 1 < l->n_buckets) { /* a bucket closes only when the next piece would not fit */
            const gg_reduce_piece *p = &l->pieces[k->first + k->n];
            assert_true(bytes + p->count * (size_t)g[p->grad].elem_bytes > bucket_bytes);
        }
        next += k->n;
    }
    assert_int_equal(next, l->n_pieces);
}

/* Eight residual MLP layers (hidden 1024, ffn 4096, fp32), backward order: each call's dW1, db1, dW2, db2. */
static void mlp_layers_pack_across_layers(void **state) {
    (void)state;
    gg_reduce_grad g[32];
    static float base[1]; /* the pointers are never dereferenced */
    for (int l = 0; l < 8; ++l) {
        const size_t sizes[4] = {4096 * 1024, 4096, 1024 * 4096, 1024};
        for (int t = 0; t < 4; ++t) g[4 * l + t] = (gg_reduce_grad){base, sizes[t], 4, 2 * l};
    }
    gg_reduce_layout l;
    assert_int_equal(gg_reduce_layout_make(g, 32, 25 * MiB, 0, &l), 0);
    check_layout(g, 32, 25 * MiB, 0, &l);
    /* 16 MiB per weight gradient: a 25 MiB bucket holds one weight gradient and the bias gradient after it */
    assert_int_equal(l.n_pieces, 32);
    assert_int_equal(l.n_buckets, 16);
    for (int b = 0; b < 16; ++b) assert_int_equal(l.buckets[b].ready, 2 * (b / 2));
    gg_reduce_layout_free(&l);
    assert_null(l.pieces);

    /* 50 MiB buckets: three weight gradients each, so buckets span two layers' calls */
    assert_int_equal(gg_reduce_layout_make(g, 32, 50 * MiB, 0, &l), 0);
    check_layout(g, 32, 50 * MiB, 0, &l);
    assert_int_equal(l.n_buckets, 6); /* 16 weight gradients, 3 per bucket */
    int crosses = 0;
    for (int b = 0; b < l.n_buckets; ++b)
        crosses += g[l.pieces[l.buckets[b].first].grad].producer != l.buckets[b].ready;
    assert_true(crosses > 0);
    assert_int_equal(l.buckets[0].ready, 2); /* layer 0 and the first half of layer 1: after the second call */
    gg_reduce_layout_free(&l);
}

/* A gradient larger than a bucket: bucket-sized pieces, each a bucket of its own, its tail joining what follows. */
static void large_gradient_is_cut_into_pieces(void **state) {
    (void)state;
    static float base[1];
    const gg_reduce_grad g[3] = {{base, 1000, 4, 0}, {base, 10000, 4, 1}, {base, 100, 2, 1}};
    const size_t bucket = 4096 + 100; /* rounded down to 4096 bytes for a piece: 1024 floats */
    gg_reduce_layout l;
    assert_int_equal(gg_reduce_layout_make(g, 3, bucket, 0, &l), 0);
    check_layout(g, 3, bucket, 0, &l);
    assert_int_equal(l.n_pieces, 1 + 10 + 1); /* 10000 floats: 9 full pieces of 1024 and a tail of 784 */
    assert_int_equal(l.pieces[1].count, 1024);
    assert_int_equal(l.pieces[10].count, 10000 - 9 * 1024);
    assert_int_equal(l.buckets[0].n, 1); /* 4000 bytes, then a 4096-byte piece does not fit */
    assert_int_equal(l.buckets[l.n_buckets - 1].n, 2); /* the tail (3136 bytes) and the bf16 gradient (200) */
    assert_int_equal(l.buckets[l.n_buckets - 1].ready, 1);
    gg_reduce_layout_free(&l);

    /* reduce-scatter: whole gradients, the large one alone in a bucket past bucket_bytes */
    assert_int_equal(gg_reduce_layout_make(g, 3, bucket, 1, &l), 0);
    check_layout(g, 3, bucket, 1, &l);
    assert_int_equal(l.n_pieces, 3);
    assert_int_equal(l.n_buckets, 3);
    gg_reduce_layout_free(&l);
}

/* No gradients, bad bucket sizes. */
static void edge_cases(void **state) {
    (void)state;
    gg_reduce_layout l;
    assert_int_equal(gg_reduce_layout_make(NULL, 0, 4096, 0, &l), 0);
    assert_int_equal(l.n_buckets, 0);
    gg_reduce_layout_free(&l);
    static float base[1];
    const gg_reduce_grad g = {base, 10, 4, 0};
    assert_int_equal(gg_reduce_layout_make(&g, 1, 255, 0, &l), -1);
    assert_int_equal(l.n_buckets, 0);
    assert_int_equal(gg_reduce_layout_make(&g, -1, 4096, 0, &l), -1);
}

/* Random gradients (sizes from 1 element to several buckets, fp32 and bf16, several per call) against the
 * invariants, and the fingerprint: equal for equal layouts, different when one size changes. */
static void random_layouts(void **state) {
    (void)state;
    const unsigned seed = (unsigned)time(NULL);
    printf("test_step_layout: seed %u\n", seed);
    srand(seed);
    static float base[1];
    for (int round = 0; round < 300; ++round) {
        gg_reduce_grad g[64];
        const int n = 1 + rand() % 64;
        int producer = 0;
        const size_t bucket = 4096 + (size_t)(rand() % 65536);
        for (int i = 0; i < n; ++i) {
            producer += rand() % 3 == 0;
            const size_t count = 1 + (size_t)(rand() % 3 == 0 ? rand() % 100000 : rand() % 2000);
            g[i] = (gg_reduce_grad){base, count, rand() % 2 ? 4 : 2, producer};
        }
        const int whole = rand() % 4 == 0;
        gg_reduce_layout a, b;
        assert_int_equal(gg_reduce_layout_make(g, n, bucket, whole, &a), 0);
        check_layout(g, n, bucket, whole, &a);
        assert_int_equal(gg_reduce_layout_make(g, n, bucket, whole, &b), 0);
        uint64_t ha = GG_FINGERPRINT_INIT, hb = GG_FINGERPRINT_INIT;
        gg_fingerprint_layout(&ha, &a);
        gg_fingerprint_layout(&hb, &b);
        assert_true(ha == hb);
        gg_reduce_layout_free(&b);
        g[rand() % n].count += 1; /* one element more somewhere */
        assert_int_equal(gg_reduce_layout_make(g, n, bucket, whole, &b), 0);
        hb = GG_FINGERPRINT_INIT;
        gg_fingerprint_layout(&hb, &b);
        assert_true(ha != hb);
        gg_reduce_layout_free(&a);
        gg_reduce_layout_free(&b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_layers_pack_across_layers),
        cmocka_unit_test(large_gradient_is_cut_into_pieces),
        cmocka_unit_test(edge_cases),
        cmocka_unit_test(random_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
