/*
 * buckets.h - the token counts (M) a graph set is captured for, made from the user's policy, and the choice of
 * bucket for a call. Plain C, tested without a GPU.
 */
#ifndef GG_BUCKETS_H
#define GG_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

#include "gradgraph.h"

#define GG_MAX_BUCKETS 64

/* Expands config into ascending, distinct bucket sizes. Returns the count, or -1 with a message in err naming the
 * config field at fault. */
int gg_buckets_make(const gg_graph_config *config, int64_t *buckets, char *err, size_t err_bytes);

/* The index of the smallest bucket >= tokens, or -1 when tokens exceeds the largest. */
int gg_buckets_select(const int64_t *buckets, int count, int64_t tokens);

#endif
