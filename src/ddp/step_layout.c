/*
 * step_layout.c - the packing of a step's parameter gradients into reduction buckets (the rule: step_reduce.h), and
 * the fingerprint the ranks compare. Plain C, no device: tested on the CPU (tests/cpu/test_step_layout.c).
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "step_reduce.h"

void gg_reduce_layout_free(gg_reduce_layout *l) {
    free(l->pieces);
    free(l->buckets);
    memset(l, 0, sizeof *l);
}

/* The elements of one piece of a gradient that does not fit a bucket: bucket_bytes rounded down to 256 bytes, so
 * that every piece after the first starts 256-byte aligned when the gradient does. */
static size_t piece_elems(size_t bucket_bytes, int elem_bytes) {
    return (bucket_bytes & ~(size_t)255) / (size_t)elem_bytes;
}

/* Upper bounds of the pieces and buckets, so that both arrays are allocated once. */
static int count_pieces(const gg_reduce_grad *g, int n, size_t bucket_bytes, int whole, size_t *pieces) {
    size_t total = 0;
    for (int i = 0; i < n; ++i) {
        const size_t per = whole ? g[i].count : piece_elems(bucket_bytes, g[i].elem_bytes);
        total += (g[i].count + per - 1) / per;
        if (total > INT_MAX) return -1;
    }
    *pieces = total;
    return 0;
}

size_t gg_reduce_layout_pieces(const gg_reduce_grad *g, int n, size_t bucket_bytes, int whole) {
    size_t pieces = 0;
    if (n < 0 || bucket_bytes < 256 || count_pieces(g, n, bucket_bytes, whole, &pieces) != 0) return SIZE_MAX;
    return pieces;
}

int gg_reduce_layout_make(const gg_reduce_grad *g, int n, size_t bucket_bytes, int whole, gg_reduce_layout *out) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    if (n < 0 || bucket_bytes < 256 || count_pieces(g, n, bucket_bytes, whole, &cap) != 0) return -1;
    if (cap == 0) return 0;
    out->pieces = malloc(cap * sizeof *out->pieces);
    out->buckets = malloc(cap * sizeof *out->buckets);
    if (!out->pieces || !out->buckets) {
        gg_reduce_layout_free(out);
        return -1;
    }
    gg_reduce_bucket *open = NULL;
    for (int i = 0; i < n; ++i) {
        const size_t elem = (size_t)g[i].elem_bytes;
        const size_t per = whole ? g[i].count : piece_elems(bucket_bytes, g[i].elem_bytes);
        for (size_t at = 0; at < g[i].count; at += per) {
            const size_t count = g[i].count - at < per ? g[i].count - at : per;
            const size_t bytes = count * elem;
            if (open && open->bytes + bytes > bucket_bytes) open = NULL;
            if (!open) {
                open = &out->buckets[out->n_buckets++];
                *open = (gg_reduce_bucket){.first = out->n_pieces, .n = 0, .bytes = 0, .ready = g[i].producer};
            }
            out->pieces[out->n_pieces++] = (gg_reduce_piece){.grad = i, .offset = at, .count = count};
            open->n++;
            open->bytes += bytes;
            open->ready = g[i].producer;
        }
    }
    return 0;
}

void gg_fingerprint_add(uint64_t *hash, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    uint64_t h = *hash;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    *hash = h;
}

void gg_fingerprint_layout(uint64_t *hash, const gg_reduce_layout *l) {
    gg_fingerprint_add(hash, &l->n_buckets, sizeof l->n_buckets);
    for (int b = 0; b < l->n_buckets; ++b) {
        const gg_reduce_bucket *k = &l->buckets[b];
        gg_fingerprint_add(hash, &k->ready, sizeof k->ready);
        gg_fingerprint_add(hash, &k->n, sizeof k->n);
        for (int i = k->first; i < k->first + k->n; ++i) {
            const gg_reduce_piece *p = &l->pieces[i];
            const uint64_t v[3] = {(uint64_t)p->grad, p->offset, p->count};
            gg_fingerprint_add(hash, v, sizeof v);
        }
    }
}
