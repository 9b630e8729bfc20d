/*
 * agree.c - the collective agreements of the ranks: whether every rank succeeded at a step (gg_dist_all_ok), and the
 * GEMM algorithms of a syncing graph (rank 0's, adopted by the others: gg_dist_agree_algorithms).
 */
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "comm_internal.h"

/* Runs one collective on `bytes` of the context's agreement buffers: pinned host -> device, the collective, device
 * -> pinned host, then waits (polling for NCCL errors, never blocking in a copy). */
static gg_status agree_step(gg_ctx *ctx, size_t offset, size_t bytes, int broadcast, const char *what) {
    gg_dist *d = ctx->dist;
    char *dev = (char *)d->agree_dev + offset, *host = (char *)d->agree_host + offset;
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, d->stream));
    const ncclResult_t r =
        broadcast ? ncclBroadcast(dev, dev, bytes, ncclUint8, 0, (ncclComm_t)d->comm, d->stream)
                  : ncclAllReduce(dev, dev, bytes / sizeof(int32_t), ncclInt32, ncclMin, (ncclComm_t)d->comm,
                                  d->stream);
    if (r != ncclSuccess) {
        char call[160];
        snprintf(call, sizeof call, "%s (%s)", broadcast ? "ncclBroadcast" : "ncclAllReduce", what);
        return gg_dist_fail_nccl(ctx, r, call);
    }
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, d->stream));
    return gg_dist_wait_comm_stream(ctx, what);
}

gg_status gg_dist_all_ok(gg_ctx *ctx, int ok, const char *what, int *all_ok) {
    int32_t *flag = ctx->dist->agree_host;
    *flag = ok != 0;
    GG_TRY(agree_step(ctx, 0, sizeof *flag, 0, what));
    *all_ok = *flag == 1;
    return GG_SUCCESS;
}

gg_status gg_dist_agree_algorithms(gg_ctx *ctx, const char *fn, gg_block_plan *const *plans, int count) {
    gg_dist *d = ctx->dist;
    if (!d || d->size < 2) return GG_SUCCESS;
    if (!d->comm) return gg_fail(ctx, GG_ERROR_NCCL, "%s: the communicator was aborted after an error", fn);
    const int valid = count >= 1 && count <= GG_DIST_MAX_AGREE_PLANS;
    int all_made = 0;
    const gg_status step = gg_dist_all_ok(ctx, plans != NULL && valid, "whether every rank made its plans", &all_made);
    if (!plans) return GG_SUCCESS; /* this rank failed: its caller keeps its own error */
    GG_TRY(step);
    if (!valid)
        return gg_fail(ctx, GG_ERROR_INTERNAL, "%s: %d plans to agree on (1 to %d)", fn, count,
                       GG_DIST_MAX_AGREE_PLANS);
    if (!all_made)
        return gg_fail(ctx, GG_ERROR_PEER,
                       "%s: another rank failed to make this graph (its own status says why); no rank made it", fn);
    cublasLtMatmulAlgo_t *algos = (cublasLtMatmulAlgo_t *)((char *)d->agree_host + GG_DIST_AGREE_HEADER);
    const size_t n = (size_t)count * GG_PLAN_MAX_GEMMS;
    memset(algos, 0, n * sizeof *algos);
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i)
            if (plans[p]->gemm[i].op) algos[p * GG_PLAN_MAX_GEMMS + i] = plans[p]->gemm[i].algo;
    GG_TRY(agree_step(ctx, GG_DIST_AGREE_HEADER, n * sizeof *algos, 1, "rank 0's GEMM algorithms"));
    int differed = 0, adopted = 0;
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i) {
            gg_matmul *mm = &plans[p]->gemm[i];
            const cublasLtMatmulAlgo_t *theirs = &algos[p * GG_PLAN_MAX_GEMMS + i];
            if (!mm->op || !memcmp(&mm->algo, theirs, sizeof *theirs)) continue;
            ++differed;
            adopted += gg_matmul_adopt(ctx, mm, theirs);
        }
    if (differed)
        gg_log(ctx, differed == adopted ? GG_LOG_INFO : GG_LOG_WARN,
               "%s: rank %d: %d of its GEMM algorithms differed from rank 0's; %d adopted%s", fn, d->rank, differed,
               adopted, differed == adopted ? "" : " (the others are not valid here: the ranks' kernels differ)");
    return GG_SUCCESS;
}
