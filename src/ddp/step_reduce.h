/*
 * step_reduce.h - the reduction of a step graph's parameter gradients across the ranks (graphs/step.c calls it):
 * the packing of the gradients into buckets in the order they are produced (step_layout.c, plain C, every build) and
 * the collectives (step_reduce.c; nccl_stub.c without NCCL, where no context has a communicator).
 *
 * Rule: walk the gradients in production order; a gradient joins the open bucket while the bucket stays within
 * bucket_bytes, else the bucket closes and a new one opens. A gradient larger than bucket_bytes is cut into pieces
 * of bucket_bytes rounded down to 256 bytes (every piece but the last of a gradient fills a bucket of its own; its
 * last piece opens the next bucket), unless whole is set (reduce-scatter shards a gradient whole). A bucket is ready
 * once its last piece's producer has run: it is launched right after that call.
 */
#ifndef GG_STEP_REDUCE_H
#define GG_STEP_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"

/* A gradient to reduce: count elements of elem_bytes (4: fp32, 2: bf16) at ptr, final once the step's call
 * `producer` has run. */
typedef struct gg_reduce_grad {
    void *ptr;
    size_t count;
    int elem_bytes;
    int producer;
} gg_reduce_grad;

/* Elements [offset, offset + count) of gradient `grad`: one collective. */
typedef struct gg_reduce_piece {
    int grad;
    size_t offset, count;
} gg_reduce_piece;

/* pieces [first, first + n) of the layout, bytes in all, launched after call `ready`. */
typedef struct gg_reduce_bucket {
    int first, n;
    size_t bytes;
    int ready;
} gg_reduce_bucket;

typedef struct gg_reduce_layout {
    gg_reduce_piece *pieces;
    gg_reduce_bucket *buckets;
    int n_pieces, n_buckets;
} gg_reduce_layout;

/* Packs n gradients (producers non-decreasing, counts >= 1) into *out by the rule above. bucket_bytes >= 256.
 * Returns 0, or -1 when host memory ran out or the pieces would exceed INT_MAX (*out then empty). */
int gg_reduce_layout_make(const gg_reduce_grad *grads, int n, size_t bucket_bytes, int whole, gg_reduce_layout *out);
/* The pieces (collectives) such a layout holds, counted without making it; SIZE_MAX past INT_MAX. */
size_t gg_reduce_layout_pieces(const gg_reduce_grad *grads, int n, size_t bucket_bytes, int whole);
/* The most collectives one graph holds (a step's, or a syncing block graph's): more -- bucket_bytes small against the
 * gradients -- are refused, such a graph would take minutes to capture and instantiate. */
#define GG_DIST_MAX_COLLECTIVES 65536
void gg_reduce_layout_free(gg_reduce_layout *layout);

/* FNV-1a over bytes, continuing from *hash (start from GG_FINGERPRINT_INIT): the fingerprint the ranks compare. */
#define GG_FINGERPRINT_INIT 0xcbf29ce484222325ull
void gg_fingerprint_add(uint64_t *hash, const void *bytes, size_t n);
/* The layout's share of a fingerprint: every bucket's pieces (gradient, offset, count) and ready call. */
void gg_fingerprint_layout(uint64_t *hash, const gg_reduce_layout *layout);

/* The collective end of finalizing a syncing step, before its device state is made: every rank says whether its
 * checks passed (ok), then the ranks compare their fingerprints. GG_ERROR_PEER when another rank's checks failed
 * (returns GG_SUCCESS when this rank's did, !ok: its caller keeps its own error), GG_ERROR_INVALID_ARGUMENT when the
 * fingerprints differ, GG_ERROR_NCCL when the agreement failed. Outside any capture. */
gg_status gg_dist_step_agree(gg_ctx *ctx, const char *fn, int ok, uint64_t fingerprint);

/* Launches bucket b of layout on the communication stream (capturing): it waits for everything on main so far and
 * for the n events (the weight-gradient branches of the bucket's producers), then one NCCL group with one in-place
 * collective per piece (the context's op and sync). The communication stream is left forked from main:
 * gg_dist_step_join ends it. */
gg_status gg_dist_step_bucket(gg_ctx *ctx, const gg_reduce_layout *layout, const gg_reduce_grad *grads, int b,
                              cudaStream_t main, const cudaEvent_t *events, int n);

/* main waits for the communication stream (the end of a step that launched buckets, on every path). */
gg_status gg_dist_step_join(gg_ctx *ctx, cudaStream_t main);

#endif
