/*
 * comm_internal.h - what the NCCL-only files of src/ddp share among themselves (comm.c, comm_init.c, warmup.c,
 * agree.c, deadline.c, watchdog.c); the deadlines are in waiting.h.
 */
#ifndef GG_COMM_INTERNAL_H
#define GG_COMM_INTERNAL_H

#include <nccl.h>

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

/* ---- a context's communicator (comm.c), for the calls that make one (comm_init.c) ---- */

/* The checks every entry point that puts a communicator on a context starts with: ctx, no communicator there yet
 * (checked before any collective, so one wrong rank cannot leave the others waiting), the config. */
gg_status gg_dist_begin(gg_ctx *ctx, const char *fn, const gg_dist_config *config, gg_dist_config *out);

/* Puts comm on ctx with its stream and events (no collective). On failure ctx has no communicator state, and an
 * owned comm is left to the caller to destroy. The state is on ctx (where another thread's gg_dist_abort finds it)
 * before comm is in it: an abort that comes before comm is only asked for (abort_requested), and the warm-up gives
 * up on it, so that nothing can abort comm before this returns success. */
gg_status gg_dist_make(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, int rank, int size,
                       const gg_dist_config *config);

/* Puts comm on ctx (streams, events), checks it is on ctx's device, runs the warm-up, binds the thread. On failure
 * ctx has no communicator state and an owned comm has been aborted (a warm-up that fails with GG_ERROR_NCCL aborts an
 * attached one too); an attached comm NCCL cannot query is refused as an argument, untouched. */
gg_status gg_dist_install(gg_ctx *ctx, const char *fn, ncclComm_t comm, int owned, const gg_dist_config *config);

/* What a context's communicator ended up as, once it is ready (INFO). */
void gg_dist_log_ready(gg_ctx *ctx, const char *fn);

/* Releases ctx's communicator state (bounded: finalize with the peer deadline, else abort), its trouble logged;
 * returns whether the communicator itself was left to the caller (not owned, not aborted). */
int gg_dist_release(gg_ctx *ctx);

/* A call that makes or attaches ctx's communicator, body(ctx, fn, arg, config), with ctx claimed for its whole length
 * (a second thread is refused, as by every other call). `broadcasts`: body shares NCCL's id through MPI (mpi_comm,
 * NULL for the world), which a call refused for a NULL ctx or a pending CUDA error takes part in too: this rank's
 * own call, its part in the bootstrap. Not one refused inside a callback (a step's runs once per capture, a log
 * callback maybe on the watchdog's thread) or because another thread is inside the context (that thread may be in
 * this very bootstrap, broadcasting: a second broadcast on this rank would wait forever). */
typedef gg_status (*gg_comm_maker)(gg_ctx *ctx, const char *fn, const void *arg, const gg_dist_config *config);
gg_status gg_dist_claimed(gg_ctx *ctx, const char *fn, gg_comm_maker body, const void *arg,
                          const gg_dist_config *config, int broadcasts, const void *mpi_comm);

#endif
