/*
 * comm_internal.h - what the NCCL-only files of src/ddp share among themselves (comm.c, warmup.c, agree.c).
 */
#ifndef GG_COMM_INTERNAL_H
#define GG_COMM_INTERNAL_H

#include "ddp.h"

/* gg_dist_agree_algorithms' buffers, made with the communicator (comm.c): a status word, then one algorithm per GEMM
 * of every plan of a graph. */
#define GG_DIST_AGREE_HEADER 256
#define GG_DIST_AGREE_BYTES                                                                                        \
    (GG_DIST_AGREE_HEADER + GG_DIST_MAX_AGREE_PLANS * GG_PLAN_MAX_GEMMS * sizeof(cublasLtMatmulAlgo_t))

/* The warm-up all-reduce on every context given, at once (warmup.c): connects NCCL before any capture and settles
 * whether the ranks use copy engines; on failure every communicator in ctxs is aborted. */
gg_status gg_dist_warm_up(gg_ctx *const *ctxs, int count, const char *fn);

/* Waits for ctx's communication stream with the peer timeout, aborting the communicator when a peer fails or never
 * joins (warmup.c). `what` names the step in messages. */
gg_status gg_dist_wait_comm_stream(gg_ctx *ctx, const char *what);

#endif
