/*
 * comm_internal.h - what the NCCL-only files of src/ddp share among themselves (comm.c, warmup.c, agree.c,
 * deadline.c, watchdog.c).
 */
#ifndef GG_COMM_INTERNAL_H
#define GG_COMM_INTERNAL_H

#include "ddp.h"

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

/* The deadlines (deadline.c), each in whole seconds from its environment variable (1 to 86400; default 300):
 * making a communicator (GG_DIST_INIT_TIMEOUT_S), a collective step gradgraph waits for itself and the end of a
 * non-blocking NCCL call or of teardown (GG_DIST_PEER_TIMEOUT_S), a replay of a syncing graph
 * (GG_DIST_STEP_TIMEOUT_S, the watchdog's). Read when used, so a test may set them at any time. */
typedef enum gg_dist_timeout {
    GG_DIST_TIMEOUT_INIT,
    GG_DIST_TIMEOUT_PEER,
    GG_DIST_TIMEOUT_STEP,
    GG_DIST_TIMEOUTS
} gg_dist_timeout;
int gg_dist_timeout_s(gg_dist_timeout which);
const char *gg_dist_timeout_env(gg_dist_timeout which);
double gg_dist_now_s(void); /* a monotonic clock, in seconds */
void gg_dist_pause(void);   /* the pause between two polls */

/* Polls comm (an ncclComm_t) until it leaves ncclInProgress; returns its state then (ncclSuccess or its error).
 * Gives up (*expired = 1, ncclInProgress) after timeout_s, or at once when d (may be NULL) has an abort requested.
 * Aborts nothing. */
int gg_dist_wait_comm(void *comm, int timeout_s, gg_dist *d, int *expired);

/* gg_dist_nccl_done for the end of an NCCL group over several contexts' communicators (ncclGroupEnd's result). */
gg_status gg_dist_group_done(gg_ctx *const *ctxs, int count, int result, const char *what);

/* The watchdog of ctx's communicator (watchdog.c): started once the communicator is ready, stopped (the thread
 * joined) before it is released, never while the caller holds the lock. */
gg_status gg_watchdog_start(gg_ctx *ctx, const char *fn);
void gg_watchdog_stop(gg_dist *d);

#endif
