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

/* Makes `to` wait for everything enqueued on `from` so far, through `event`; nothing when they are one stream. The
 * wait is made against the record just made (a later record of the event does not move it), so an event used only
 * for hand-offs serves any number of them. */
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

/* What one block call runs with: the streams it forks onto, the events of its fork and join edges, the scratch its
 * plan's buffer offsets address, its reduction counters (GG_COUNTER_REDUCTION_WORDS words; the fp16
 * overflow word is the context's alone, ctx->counter + GG_COUNTER_OVERFLOW) and a cuBLASLt workspace per stream
 * (0: the caller's, 1: the side stream's). Eager calls and per-block graphs run with the context's own
 * (gg_exec_res_ctx); a step graph hands each call its own side streams, scratch slot, counters and join events. */
typedef struct gg_exec_res {
    cudaStream_t side, aux; /* the second and third stream (the caller's own when config.overlap is NEVER) */
    cudaEvent_t ev_fork, ev_join, ev_conv, ev_aux, ev_aux_join; /* as the context's (internal.h) */
    void *scratch;
    unsigned *counter;
    void *workspace[GG_GEMM_STREAMS];
    /* Nonzero: a branch that carries only parameter-gradient work ends in a mark (its join event recorded on it)
     * instead of a join, and *deferred says which (GG_DEFERRED_*): the step joins it later, once. */
    int defer_join;
    unsigned *deferred;
} gg_exec_res;

enum { GG_DEFERRED_SIDE = 1, GG_DEFERRED_AUX = 2 }; /* ev_join, ev_aux_join recorded and not waited for */

/* The context's resources for a schedule on `main`. */
gg_exec_res gg_exec_res_ctx(const gg_ctx *ctx, cudaStream_t main);

/* The end of a forked schedule run with r: gg_stream_join_all, except that with r->defer_join and no error the
 * branches whose bit is set in `deferrable` (branch i: bit i) end in a mark and are noted in *r->deferred. */
gg_status gg_stream_join_res(gg_ctx *ctx, const gg_exec_res *r, gg_status status, cudaStream_t main,
                             const gg_branch *branches, int n, unsigned deferrable);

/* The same in two steps, when `to` must wait later than the point `from` has reached now: mark `from` now
 * (gg_stream_mark), and make `to` wait for that mark when it needs it (gg_stream_wait). Both are no-ops when the
 * streams are one. */
gg_status gg_stream_mark(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);
gg_status gg_stream_wait(gg_ctx *ctx, cudaStream_t from, cudaEvent_t event, cudaStream_t to);

#endif
