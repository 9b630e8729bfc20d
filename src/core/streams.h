/*
 * streams.h - fork/join between the caller's stream and the context's side (and aux) stream, with events, so
 * that independent chains of a block (dX and dW) overlap. Only stream-ordered calls: valid inside a CUDA graph
 * capture, where the same calls become graph edges.
 */
#ifndef GG_STREAMS_H
#define GG_STREAMS_H

#include "internal.h"

/* The stream a block's second chain runs on: the context's side stream unless config.overlap is NEVER (measured:
 * with the side stream at high priority, overlap pays or ties in every mode), else the caller's stream itself. */
cudaStream_t gg_side_stream(const gg_ctx *ctx, cudaStream_t main);

/* The stream for a third branch, beside both chains: the context's aux stream, or the caller's when config.overlap
 * is NEVER. */
cudaStream_t gg_aux_stream(const gg_ctx *ctx, cudaStream_t main);

/* Makes `to` wait for everything enqueued on `from` so far, through `event`; nothing when they are one stream. */
gg_status gg_stream_handoff(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);

/* A stream forked from a schedule's main stream, and the event it rejoins main through. */
typedef struct gg_branch {
    cudaStream_t stream;
    cudaEvent_t join;
} gg_branch;

/* The end of every forked schedule: each of the n branches rejoins `main` (gg_stream_handoff, in the order given)
 * whether or not the schedule's work succeeded, so that no stream is left forked from the caller's (inside a capture
 * the capture could not end). Returns `status`, the work's, unless it is GG_SUCCESS: then the first failed join's. */
gg_status gg_stream_join_all(gg_ctx *ctx, gg_status status, cudaStream_t main, const gg_branch *branches, int n);
/* gg_stream_join_all of one branch. */
gg_status gg_stream_join(gg_ctx *ctx, gg_status status, cudaStream_t main, cudaStream_t branch, cudaEvent_t join);

/* The same in two steps, when `to` must wait later than the point `from` has reached now: mark `from` now
 * (gg_stream_mark), and make `to` wait for that mark when it needs it (gg_stream_wait). Both are no-ops when the
 * streams are one. */
gg_status gg_stream_mark(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);
gg_status gg_stream_wait(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);

#endif
