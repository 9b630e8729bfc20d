/*
 * step_reduce.c - the collectives of a step graph's gradient reduction (step_reduce.h): the ranks' agreement at
 * finalize, one NCCL group per bucket on the communication stream, and the join at the step's end.
 */
#include <string.h>

#include <nccl.h>

#include "comm_internal.h"
#include "step_reduce.h"
#include "streams.h"

/* Where the fingerprint sits in the agreement buffers: inside their header, after gg_dist_all_ok's flag. */
#define FINGERPRINT_OFFSET 64

/* Whether every rank holds the same 64-bit value: one all-reduce (min) of its halves and their complements. The
 * complement reverses the order, so min(~x) = ~max(x): a rank sees min(x) = x and min(~x) = ~x only when x is both
 * the least and the greatest value. */
static gg_status same_everywhere(gg_ctx *ctx, uint64_t value, const char *what, int *same) {
    gg_dist *d = ctx->dist;
    int32_t words[4] = {(int32_t)(uint32_t)value, (int32_t)(uint32_t)(value >> 32)};
    words[2] = ~words[0];
    words[3] = ~words[1];
    char *host = (char *)d->agree_host + FINGERPRINT_OFFSET, *dev = (char *)d->agree_dev + FINGERPRINT_OFFSET;
    memcpy(host, words, sizeof words);
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(dev, host, sizeof words, cudaMemcpyHostToDevice, d->stream));
    const ncclResult_t r = ncclAllReduce(dev, dev, 4, ncclInt32, ncclMin, (ncclComm_t)d->comm, d->stream);
    GG_TRY(gg_dist_nccl_done_or_abort(ctx, r, "ncclAllReduce")); /* an agreement step, as agree.c's */
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(host, dev, sizeof words, cudaMemcpyDeviceToHost, d->stream));
    GG_TRY(gg_dist_wait_comm_stream(ctx, what));
    *same = memcmp(host, words, sizeof words) == 0;
    return GG_SUCCESS;
}

gg_status gg_dist_step_agree(gg_ctx *ctx, const char *fn, int ok, uint64_t fingerprint) {
    gg_dist *d = ctx->dist;
    if (!d->comm) return gg_fail(ctx, GG_ERROR_NCCL, "%s: the communicator was aborted after an error", fn);
    int all_ok = 0;
    GG_TRY(gg_dist_all_ok(ctx, ok, "whether every rank's step passed its checks", &all_ok));
    if (!ok) return GG_SUCCESS; /* the caller keeps its own error */
    if (!all_ok)
        return gg_fail(ctx, GG_ERROR_PEER,
                       "%s: another rank's step failed its checks (its own status says why); no rank finalized it", fn);
    int same = 0;
    GG_TRY(same_everywhere(ctx, fingerprint, "the ranks' step fingerprints", &same));
    if (!same)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: rank %d's step differs from another rank's (fingerprint %016llx: the calls, blocks, dims, "
                       "precisions, reduce entries, buckets or gg_dist_config differ); every rank must build the same "
                       "step, or their collectives would not match",
                       fn, d->rank, (unsigned long long)fingerprint);
    return GG_SUCCESS;
}

/* One piece's in-place collective: all-reduce, or reduce-scatter into this rank's shard of the same buffer. */
static ncclResult_t collective(const gg_dist *d, const gg_reduce_grad *g, const gg_reduce_piece *p) {
    const ncclDataType_t type = g->elem_bytes == 4 ? ncclFloat32 : ncclBfloat16;
    const ncclRedOp_t op = d->config.op == GG_REDUCE_AVERAGE ? ncclAvg : ncclSum;
    char *at = (char *)g->ptr + p->offset * (size_t)g->elem_bytes;
    if (d->config.sync == GG_SYNC_REDUCE_SCATTER) {
        const size_t shard = p->count / (size_t)d->size;
        return ncclReduceScatter(at, at + (size_t)d->rank * shard * (size_t)g->elem_bytes, shard, type, op,
                                 (ncclComm_t)d->comm, d->stream);
    }
    return ncclAllReduce(at, at, p->count, type, op, (ncclComm_t)d->comm, d->stream);
}

gg_status gg_dist_step_bucket(gg_ctx *ctx, const gg_reduce_layout *l, const gg_reduce_grad *grads, int b,
                              cudaStream_t main, const cudaEvent_t *events, int n) {
    gg_dist *d = ctx->dist;
    GG_TRY(gg_stream_handoff(ctx, main, d->ev_ready, d->stream));
    for (int i = 0; i < n; ++i) GG_CUDA_TRY(ctx, cudaStreamWaitEvent(d->stream, events[i], 0));
    const gg_reduce_bucket *k = &l->buckets[b];
    /* one group: NCCL launches the bucket's collectives as one kernel, without copying them into a flat buffer */
    GG_NCCL_TRY(ctx, ncclGroupStart, ());
    ncclResult_t first = ncclSuccess;
    for (int i = k->first; i < k->first + k->n && first == ncclSuccess; ++i)
        first = collective(d, &grads[l->pieces[i].grad], &l->pieces[i]);
    const ncclResult_t end = ncclGroupEnd(); /* always closed, also after a failed call */
    if (first != ncclSuccess)
        return gg_dist_fail_nccl(ctx, first, d->config.sync == GG_SYNC_REDUCE_SCATTER
                                                 ? "ncclReduceScatter (a step bucket)"
                                                 : "ncclAllReduce (a step bucket)");
    /* a non-blocking communicator (the ones gradgraph makes) ends the group with ncclInProgress: wait for it */
    return gg_dist_nccl_done(ctx, end, "ncclGroupEnd (a step bucket)");
}

gg_status gg_dist_step_join(gg_ctx *ctx, cudaStream_t main) {
    return gg_stream_handoff(ctx, ctx->dist->stream, ctx->dist->ev_done, main);
}
