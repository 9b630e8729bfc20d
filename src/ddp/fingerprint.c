/*
 * fingerprint.c - the pure part of comparing what the ranks made (ddp.h, gg_dist_fingerprint): the fields' names,
 * the hash that folds a list into one field, the first field the ranks disagree on, and its message. Every build;
 * the collective comparison is gg_dist_agree_fingerprint (agree.c). Tested on the CPU (tests/cpu/test_dist_faults.c).
 */
#include <stdio.h>

#include "ddp.h"

const char *const gg_dist_fp_names[GG_FP_FIELDS] = {
    [GG_FP_BLOCK] = "the block",
    [GG_FP_DIM0] = "the first hidden dimension",
    [GG_FP_DIM1] = "the second hidden dimension",
    [GG_FP_PRECISION] = "the precision mode",
    [GG_FP_N_BUCKETS] = "the number of buckets",
    [GG_FP_MAX_TOKENS] = "the largest bucket (tokens)",
    [GG_FP_BUCKETS] = "the bucket list (hash)",
    [GG_FP_GRAPH_FLAGS] = "the graph flags (allow_padding | device_select << 1 | eager_beyond_max << 2)",
    [GG_FP_OP] = "op",
    [GG_FP_SYNC] = "sync",
    [GG_FP_BUCKET_BYTES] = "bucket_bytes",
    [GG_FP_OVERLAP] = "overlap",
    [GG_FP_COMM_SMS] = "comm_sms",
    [GG_FP_COPY_ENGINES] = "copy engines (on after the warm-up)",
    [GG_FP_ALGORITHMS] = "the GEMM algorithms (hash)",
};

uint64_t gg_dist_hash(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* 63 bits, so that the comparison's negated copy of every field cannot overflow. */
int64_t gg_dist_hash_field(uint64_t h) { return (int64_t)(h >> 1); }

int gg_dist_fp_first_difference(const gg_dist_fingerprint *lo, const gg_dist_fingerprint *hi) {
    for (int i = 0; i < GG_FP_FIELDS; ++i)
        if (lo->field[i] != hi->field[i]) return i;
    return -1;
}

void gg_dist_fp_describe(char *out, size_t bytes, const char *fn, int field, const gg_dist_fingerprint *mine,
                         const gg_dist_fingerprint *lo, const gg_dist_fingerprint *hi) {
    snprintf(out, bytes,
             "%s: the ranks disagree on %s: this rank has %lld, the ranks' values range from %lld to %lld; every rank "
             "must make the same syncing graphs with the same data-parallel config (no rank made this one)",
             fn, gg_dist_fp_names[field], (long long)mine->field[field], (long long)lo->field[field],
             (long long)hi->field[field]);
}
