/*
 * nccl_stub.c - the data-parallel entry points in a build without NCCL (GG_WITH_NCCL=OFF: CMake compiles this file
 * instead of comm.c, warmup.c, grad_hooks.c, pair_split.c, agree.c, copy_engine.c and step_reduce.c). The public
 * calls return GG_ERROR_UNSUPPORTED; the hooks the blocks and graphs call are no-ops (no context has a
 * communicator).
 */
#include "step_reduce.h"

void gg_process_defaults(void) {}

#define UNSUPPORTED(fn)                                                                                            \
    gg_fail(NULL, GG_ERROR_UNSUPPORTED, "%s: gradgraph was built without NCCL (GG_WITH_NCCL=OFF)", fn)

gg_status gg_dist_attach(gg_ctx *ctx, void *comm, const gg_dist_config *config) {
    (void)ctx, (void)comm, (void)config;
    return UNSUPPORTED("gg_dist_attach");
}
gg_status gg_dist_init_env(gg_ctx *ctx, const char *id_path, const gg_dist_config *config) {
    (void)ctx, (void)id_path, (void)config;
    return UNSUPPORTED("gg_dist_init_env");
}
gg_status gg_dist_init_threads(gg_ctx *const *ctxs, int count, const gg_dist_config *config) {
    (void)ctxs, (void)count, (void)config;
    return UNSUPPORTED("gg_dist_init_threads");
}
gg_status gg_dist_init_mpi(gg_ctx *ctx, const void *mpi_comm, const gg_dist_config *config) {
    (void)ctx, (void)mpi_comm, (void)config;
    return UNSUPPORTED("gg_dist_init_mpi");
}
gg_status gg_dist_detach(gg_ctx *ctx) { /* nothing to detach, but refused as the real one is */
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_detach: ctx is NULL");
    GG_TRY(gg_ctx_claim_teardown(ctx, "gg_dist_detach"));
    gg_ctx_release(ctx);
    return GG_SUCCESS;
}
gg_status gg_dist_check(gg_ctx *ctx) {
    return ctx ? GG_SUCCESS : gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_check: ctx is NULL");
}
gg_status gg_dist_reduce(gg_ctx *ctx, void *data, size_t count, int bf16, gg_stream stream) {
    (void)ctx, (void)data, (void)count, (void)bf16, (void)stream;
    return UNSUPPORTED("gg_dist_reduce");
}
gg_status gg_dist_grad_ready(gg_ctx *ctx, const gg_block_call *c, cudaStream_t producer, int tensor) {
    (void)ctx, (void)c, (void)producer, (void)tensor;
    return GG_SUCCESS;
}
gg_status gg_dist_finish(gg_ctx *ctx, const gg_block_call *c, cudaStream_t main) {
    (void)ctx, (void)c, (void)main;
    return GG_SUCCESS;
}
int gg_dist_pair_split(const gg_ctx *ctx, const gg_block_call *c, unsigned split_tensors) {
    (void)ctx, (void)c, (void)split_tensors;
    return 0;
}
int gg_dist_pair_exchanges(const gg_ctx *ctx, const gg_block_call *c, int tensor) {
    (void)ctx, (void)c, (void)tensor;
    return 0;
}
gg_status gg_dist_pair_half(gg_ctx *ctx, const gg_block_call *c, int tensor, const gg_dist_half_gemm *g, int own,
                            cudaStream_t s) {
    (void)ctx, (void)c, (void)tensor, (void)g, (void)own, (void)s;
    return UNSUPPORTED("gg_dist_pair_half");
}
gg_status gg_dist_join(gg_ctx *ctx, const gg_block_call *c, cudaStream_t main) {
    (void)ctx, (void)c, (void)main;
    return GG_SUCCESS;
}
gg_status gg_dist_check_shape(gg_ctx *ctx, const char *fn, const gg_block_call *c) {
    (void)ctx, (void)fn, (void)c;
    return GG_SUCCESS;
}
gg_status gg_dist_agree_algorithms(gg_ctx *ctx, const char *fn, gg_block_plan *const *plans, int count,
                                   gg_dist_fingerprint *fp) {
    (void)ctx, (void)fn, (void)plans, (void)count, (void)fp;
    return GG_SUCCESS;
}
gg_status gg_dist_agree_fingerprint(gg_ctx *ctx, const char *fn, const gg_dist_fingerprint *fp) {
    (void)ctx, (void)fn, (void)fp;
    return GG_SUCCESS;
}
gg_status gg_dist_poll(gg_ctx *ctx, const char *fn) {
    (void)ctx, (void)fn;
    return GG_SUCCESS;
}
gg_status gg_dist_enter(gg_ctx *ctx, const char *fn) {
    (void)ctx, (void)fn;
    return GG_SUCCESS;
}
void gg_dist_leave(gg_ctx *ctx) { (void)ctx; }
gg_status gg_dist_await_replay_slot(gg_ctx *ctx, const char *fn, cudaStream_t stream, int *watched) {
    (void)ctx, (void)fn, (void)stream;
    *watched = 0;
    return GG_SUCCESS;
}
void gg_dist_watch(gg_ctx *ctx, cudaStream_t stream, const char *what) { (void)ctx, (void)stream, (void)what; }
gg_status gg_dist_abort(gg_ctx *ctx) {
    return ctx ? GG_SUCCESS : gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_abort: ctx is NULL");
}

gg_status gg_dist_step_agree(gg_ctx *ctx, const char *fn, int ok, uint64_t fingerprint) {
    (void)ctx, (void)ok, (void)fingerprint;
    return UNSUPPORTED(fn);
}
gg_status gg_dist_settle(gg_ctx *ctx, gg_status status, const cudaStream_t *user_stream) {
    (void)ctx, (void)user_stream;
    return status;
}
gg_status gg_dist_step_bucket(gg_ctx *ctx, const gg_reduce_layout *l, const gg_reduce_grad *g, int b,
                              cudaStream_t main, const cudaEvent_t *events, int n) {
    (void)ctx, (void)l, (void)g, (void)b, (void)main, (void)events, (void)n;
    return UNSUPPORTED("gg_step_run");
}
gg_status gg_dist_step_join(gg_ctx *ctx, cudaStream_t main) {
    (void)ctx, (void)main;
    return GG_SUCCESS;
}

gg_status gg_dist_alloc(gg_ctx *ctx, size_t bytes, void **out) {
    (void)ctx, (void)bytes;
    if (out) *out = NULL;
    return gg_fail(NULL, GG_ERROR_UNSUPPORTED, "gg_dist_alloc: gradgraph was built without NCCL (GG_WITH_NCCL=OFF)");
}
gg_status gg_dist_free(gg_ctx *ctx, void *ptr) {
    (void)ctx, (void)ptr;
    return gg_fail(NULL, GG_ERROR_UNSUPPORTED, "gg_dist_free: gradgraph was built without NCCL (GG_WITH_NCCL=OFF)");
}
