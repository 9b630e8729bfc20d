/* buckets.c - bucket sizes from a policy, and bucket selection. */
#include "buckets.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int gg_buckets_make(const gg_graph_config *c, int64_t *out, char *err, size_t err_bytes) {
    int n = 0;
    switch (c->policy) {
    case GG_BUCKETS_LIST:
        if (!c->bucket_tokens || c->n_buckets < 1 || c->n_buckets > GG_MAX_BUCKETS) {
            snprintf(err, err_bytes, "config->bucket_tokens/n_buckets: GG_BUCKETS_LIST needs 1 to %d token counts",
                     GG_MAX_BUCKETS);
            return -1;
        }
        for (int i = 0; i < c->n_buckets; ++i) {
            if (c->bucket_tokens[i] < 1 || c->bucket_tokens[i] > INT32_MAX) {
                snprintf(err, err_bytes, "config->bucket_tokens[%d] = %lld is not in [1, INT32_MAX]", i,
                         (long long)c->bucket_tokens[i]);
                return -1;
            }
            out[n++] = c->bucket_tokens[i];
        }
        break;
    case GG_BUCKETS_POW2:
    case GG_BUCKETS_STEP: {
        if (c->max_tokens < 1 || c->max_tokens > INT32_MAX) {
            snprintf(err, err_bytes, "config->max_tokens = %lld is not in [1, INT32_MAX]", (long long)c->max_tokens);
            return -1;
        }
        if (c->policy == GG_BUCKETS_STEP) {
            if (c->step < 1) {
                snprintf(err, err_bytes, "config->step = %lld must be positive for GG_BUCKETS_STEP",
                         (long long)c->step);
                return -1;
            }
            if ((c->max_tokens - 1) / c->step + 1 > GG_MAX_BUCKETS) { /* ceil(max / step), without overflow */
                snprintf(err, err_bytes, "config->step = %lld makes more than %d buckets up to max_tokens = %lld",
                         (long long)c->step, GG_MAX_BUCKETS, (long long)c->max_tokens);
                return -1;
            }
            for (int64_t m = c->step; m < c->max_tokens; m += c->step) out[n++] = m;
        } else {
            if (c->min_tokens < 1 || c->min_tokens > c->max_tokens) {
                snprintf(err, err_bytes, "config->min_tokens = %lld is not in [1, max_tokens = %lld]",
                         (long long)c->min_tokens, (long long)c->max_tokens);
                return -1;
            }
            int64_t m = 1;
            while (m < c->min_tokens) m *= 2;
            for (; m < c->max_tokens; m *= 2) out[n++] = m;
        }
        out[n++] = c->max_tokens; /* the cap is always a bucket, so the largest call fits exactly */
        break;
    }
    default:
        snprintf(err, err_bytes, "config->policy = %d is not a gg_bucket_policy value", (int)c->policy);
        return -1;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_i64);
    int distinct = 0;
    for (int i = 0; i < n; ++i)
        if (distinct == 0 || out[i] != out[distinct - 1]) out[distinct++] = out[i];
    return distinct;
}

int gg_buckets_select(const int64_t *buckets, int count, int64_t tokens) {
    for (int i = 0; i < count; ++i)
        if (buckets[i] >= tokens) return i;
    return -1;
}
