/*
 * test_dist_timeout.c - a rank whose peer never joins gets an error, not a hang (label `multigpu`; SKIPPED with fewer
 * than 2 GPUs). Two communicators are made in this process and used once together; then only rank 0's is attached,
 * so its warm-up all-reduce waits for rank 1, which never calls. With GG_DIST_PEER_TIMEOUT_S=2, gg_dist_attach must
 * return GG_ERROR_NCCL after 2 s, say why, abort the communicator and leave the context usable without one. A
 * watchdog ends the run after 60 s if anything hangs.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include <nccl.h>

#include "gpu_test.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void attach_without_the_peer_times_out(void **state) {
    (void)state;
    if (gpu_count() < 2) skip();
    assert_int_equal(setenv("NCCL_NVLS_ENABLE", "0", 0), 0); /* before NCCL reads it: no context exists yet */
    assert_int_equal(setenv("GG_DIST_PEER_TIMEOUT_S", "2", 1), 0);
    ncclComm_t comms[2] = {NULL, NULL};
    const int devices[2] = {0, 1};
    assert_int_equal(ncclCommInitAll(comms, 2, devices), ncclSuccess);
    /* One collective on both first, as a user's communicator that has been in use: NCCL connects the ranks on the
     * host during the first collective, and that handshake blocks inside NCCL while a peer is missing (its
     * blocking mode); gradgraph's timeout covers the wait for a collective that is already enqueued. */
    float *one[2] = {NULL, NULL};
    for (int r = 0; r < 2; ++r) {
        CUDA_OK(cudaSetDevice(r));
        CUDA_OK(cudaMalloc((void **)&one[r], sizeof(float)));
    }
    assert_int_equal(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r)
        assert_int_equal(ncclAllReduce(one[r], one[r], 1, ncclFloat32, ncclSum, comms[r], NULL), ncclSuccess);
    assert_int_equal(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
        CUDA_OK(cudaSetDevice(r));
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaFree(one[r]));
    }
    CUDA_OK(cudaSetDevice(0));

    gg_config cfg = GG_CONFIG_INIT;
    cfg.device = 0;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&cfg, &ctx), GG_SUCCESS);
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bind_cpus = 0;
    const double t0 = now_s();
    const gg_status st = gg_dist_attach(ctx, comms[0], &dc); /* rank 1 never joins */
    const double waited = now_s() - t0;
    print_message("gg_dist_attach returned %s after %.1f s: %s\n", gg_status_string(st), waited, gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_true(waited >= 2.0 && waited < 30.0);
    assert_non_null(strstr(gg_last_error(ctx), "did not join"));
    assert_non_null(strstr(gg_last_error(ctx), "aborted"));
    assert_int_equal(gg_dist_size(ctx), 0); /* no communicator left on the context */
    assert_int_equal(gg_dist_check(ctx), GG_SUCCESS);

    /* comms[0] is aborted (freed) by gradgraph; rank 1's has nothing in flight */
    assert_int_equal(ncclCommAbort(comms[1]), ncclSuccess);
    gg_ctx_destroy(ctx);
    unsetenv("GG_DIST_PEER_TIMEOUT_S");
}

int main(void) {
    start_watchdog(60, "test_dist_timeout: the run hung (60 s watchdog)\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attach_without_the_peer_times_out),
    };
    return cmocka_run_group_tests_name("dist_timeout", tests, NULL, NULL);
}
