/*
 * agree.c - the collective agreements of the ranks: whether every rank succeeded at a step (gg_dist_all_ok), whether
 * they made the same thing (gg_dist_agree_fingerprint), and the GEMM algorithms of a syncing graph (rank 0's,
 * adopted by the others: gg_dist_agree_algorithms).
 */
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "comm_internal.h"

typedef enum { MIN_INT32, MIN_INT64, BROADCAST } agree_kind;

/* Runs one collective on `bytes` of the context's agreement buffers: pinned host -> device, the collective, device
 * -> pinned host, then waits (polling for NCCL errors, never blocking in a copy). Inside the section (the lock). */
static gg_status agree_step(gg_ctx *ctx, size_t offset, size_t bytes, agree_kind kind, const char *what) {
    gg_dist *d = ctx->dist;
    char *dev = (char *)d->agree_dev + offset, *host = (char *)d->agree_host + offset;
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, d->stream));
    const ncclComm_t comm = (ncclComm_t)d->comm;
    const ncclResult_t r =
        kind == BROADCAST   ? ncclBroadcast(dev, dev, bytes, ncclUint8, 0, comm, d->stream)
        : kind == MIN_INT64 ? ncclAllReduce(dev, dev, bytes / sizeof(int64_t), ncclInt64, ncclMin, comm, d->stream)
                            : ncclAllReduce(dev, dev, bytes / sizeof(int32_t), ncclInt32, ncclMin, comm, d->stream);
    char call[160];
    snprintf(call, sizeof call, "%s (%s)", kind == BROADCAST ? "ncclBroadcast" : "ncclAllReduce", what);
    GG_TRY(gg_dist_nccl_done_or_abort(ctx, r, call)); /* this rank's part never ran: the ranks are out of step */
    GG_CUDA_TRY(ctx, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, d->stream));
    return gg_dist_wait_comm_stream(ctx, what);
}

gg_status gg_dist_all_ok(gg_ctx *ctx, int ok, const char *what, int *all_ok) {
    GG_TRY(gg_dist_enter(ctx, what));
    int32_t *flag = ctx->dist->agree_host;
    *flag = ok != 0;
    const gg_status status = agree_step(ctx, 0, sizeof *flag, MIN_INT32, what);
    *all_ok = *flag == 1;
    gg_dist_leave(ctx);
    return status;
}

void gg_dist_all_ok_failed(gg_ctx *ctx, const char *what) {
    char first[GG_MSG_BYTES];
    gg_failure_save(ctx, GG_ERROR_INTERNAL, first); /* whatever the step says, the call's own failure is what counts */
    int all_ok = 0;
    (void)gg_dist_all_ok(ctx, 0, what, &all_ok);
    gg_failure_restore(ctx, first);
}

/* The communicator's part of a fingerprint. */
static void config_fields(const gg_dist *d, gg_dist_fingerprint *fp) {
    fp->field[GG_FP_OP] = d->config.op;
    fp->field[GG_FP_SYNC] = d->config.sync;
    fp->field[GG_FP_BUCKET_BYTES] = (int64_t)d->config.bucket_bytes;
    fp->field[GG_FP_OVERLAP] = d->config.overlap;
    fp->field[GG_FP_COMM_SMS] = d->config.comm_sms;
    fp->field[GG_FP_COPY_ENGINES] = d->ce_on;
}

gg_status gg_dist_agree_fingerprint(gg_ctx *ctx, const char *fn, const gg_dist_fingerprint *fp) {
    gg_dist *d = ctx->dist;
    if (!d || d->size < 2) return GG_SUCCESS;
    gg_dist_fingerprint mine = *fp, lo, hi;
    config_fields(d, &mine);
    _Static_assert(2 * sizeof mine.field <= GG_DIST_AGREE_HEADER, "the agreement header holds two fingerprints");
    GG_TRY(gg_dist_enter(ctx, fn));
    int64_t *v = d->agree_host; /* every field, then every field negated: one minimum gives both ends */
    for (int i = 0; i < GG_FP_FIELDS; ++i) v[i] = mine.field[i], v[GG_FP_FIELDS + i] = -mine.field[i];
    char what[160];
    snprintf(what, sizeof what, "%s: comparing the ranks' fingerprints", fn);
    const gg_status status = agree_step(ctx, 0, 2 * sizeof mine.field, MIN_INT64, what);
    for (int i = 0; i < GG_FP_FIELDS; ++i) lo.field[i] = v[i], hi.field[i] = -v[GG_FP_FIELDS + i];
    gg_dist_leave(ctx);
    GG_TRY(status);
    const int field = gg_dist_fp_first_difference(&lo, &hi);
    if (field < 0) return GG_SUCCESS;
    char message[GG_MSG_BYTES];
    gg_dist_fp_describe(message, sizeof message, fn, field, &mine, &lo, &hi);
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s", message);
}

/* The hash of the GEMM algorithms of plans, in order (GG_FP_ALGORITHMS). */
static int64_t algorithms_hash(gg_block_plan *const *plans, int count) {
    uint64_t h = GG_DIST_HASH_SEED;
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i)
            if (plans[p]->gemm[i].op) h = gg_dist_hash(h, &plans[p]->gemm[i].algo, sizeof plans[p]->gemm[i].algo);
    return gg_dist_hash_field(h);
}

gg_status gg_dist_agree_algorithms(gg_ctx *ctx, const char *fn, gg_block_plan *const *plans, int count,
                                   gg_dist_fingerprint *fp) {
    gg_dist *d = ctx->dist;
    if (!d || d->size < 2) return GG_SUCCESS;
    GG_TRY(gg_dist_enter(ctx, fn));
    gg_dist_leave(ctx); /* each step below takes the section again: another thread's abort may come between */
    const int valid = count >= 1 && count <= GG_DIST_MAX_AGREE_PLANS;
    int all_made = 0;
    char what[160];
    snprintf(what, sizeof what, "%s: whether every rank made its plans", fn);
    if (!plans) { /* this rank failed: its caller keeps its own error */
        gg_dist_all_ok_failed(ctx, what);
        return GG_SUCCESS;
    }
    GG_TRY(gg_dist_all_ok(ctx, valid, what, &all_made));
    if (!valid)
        return gg_fail(ctx, GG_ERROR_INTERNAL, "%s: %d plans to agree on (1 to %d)", fn, count,
                       GG_DIST_MAX_AGREE_PLANS);
    if (!all_made)
        return gg_fail(ctx, GG_ERROR_PEER,
                       "%s: another rank failed to make this graph (its own status says why); no rank made it", fn);
    /* The same graph on every rank before anything of its size travels: else the broadcast below would differ in
     * length between the ranks. The algorithms are compared once adopted. */
    if (fp) {
        fp->field[GG_FP_ALGORITHMS] = 0;
        GG_TRY(gg_dist_agree_fingerprint(ctx, fn, fp));
    }
    GG_TRY(gg_dist_enter(ctx, fn));
    cublasLtMatmulAlgo_t *algos = (cublasLtMatmulAlgo_t *)((char *)d->agree_host + GG_DIST_AGREE_HEADER);
    const size_t n = (size_t)count * GG_PLAN_MAX_GEMMS;
    memset(algos, 0, n * sizeof *algos);
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < GG_PLAN_MAX_GEMMS; ++i)
            if (plans[p]->gemm[i].op) algos[p * GG_PLAN_MAX_GEMMS + i] = plans[p]->gemm[i].algo;
    snprintf(what, sizeof what, "%s: rank 0's GEMM algorithms", fn);
    const gg_status sent = agree_step(ctx, GG_DIST_AGREE_HEADER, n * sizeof *algos, BROADCAST, what);
    gg_dist_leave(ctx);
    GG_TRY(sent);
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
    if (!fp) return GG_SUCCESS;
    fp->field[GG_FP_ALGORITHMS] = algorithms_hash(plans, count);
    return gg_dist_agree_fingerprint(ctx, fn, fp);
}
