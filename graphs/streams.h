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

/* The same in two steps, when `to` must wait later than the point `from` has reached now: mark `from` now
 * (gg_stream_mark), and make `to` wait for that mark when it needs it (gg_stream_wait). Both are no-ops when the
 * streams are one. */
gg_status gg_stream_mark(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);
gg_status gg_stream_wait(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);

#endif
