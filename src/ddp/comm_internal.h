/*
 * comm_internal.h - what the NCCL-only files of src/ddp share among themselves (comm.c, warmup.c, agree.c,
 * deadline.c, watchdog.c); the deadlines are in waiting.h.
 */
#ifndef GG_COMM_INTERNAL_H
#define GG_COMM_INTERNAL_H

#include "ddp.h"
#include "waiting.h"

/* The agreements' buffers (agree.c), made with the communicator (comm.c): a header (a status word, or two
 * fingerprints), then one algorithm per GEMM of every plan of a graph. */
#define GG_DIST_AGREE_HEADER 256
#define GG_DIST_AGREE_BYTES                                                                                        \
    (GG_DIST_AGREE_HEADER + GG_DIST_MAX_AGREE_PLANS * GG_PLAN_MAX_GEMMS * sizeof(cublasLtMatmulAlgo_t))

/* The warm-up all-reduce on every context given, at once (warmup.c): connects NCCL before any capture and settles
 * whether the ranks use copy engines; on failure every communicator in ctxs is aborted. */
gg_status gg_dist_warm_up(gg_ctx *const *ctxs, int count, const char *fn);

/* Waits for ctx's communication stream with the peer timeout, aborting the communicator when a peer fails or never
 * joins (warmup.c). `what` names the step in messages. */
gg_status gg_dist_wait_comm_stream(gg_ctx *ctx, const char *what);

/* Polls comm (an ncclComm_t) until it leaves ncclInProgress; returns its state then (ncclSuccess or its error).
 * Gives up (*expired = 1, ncclInProgress) when w is over (its notices logged meanwhile), or at once when d (may be
 * NULL) has an abort requested. Aborts nothing. */
int gg_dist_wait_comm(void *comm, gg_dist_wait *w, gg_dist *d, int *expired);

/* gg_dist_nccl_done for the end of an NCCL group over several contexts' communicators (ncclGroupEnd's result). */
gg_status gg_dist_group_done(gg_ctx *const *ctxs, int count, int result, const char *what);

/* The watchdog of ctx's communicator (watchdog.c): started once the communicator is ready, stopped (the thread
 * joined) before it is released, never while the caller holds the lock. */
gg_status gg_watchdog_start(gg_ctx *ctx, const char *fn);
void gg_watchdog_stop(gg_dist *d);

#endif
