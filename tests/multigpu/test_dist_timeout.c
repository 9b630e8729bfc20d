/*
 * test_dist_timeout.c - a rank whose peer never joins gets an error, not a hang (label `multigpu`; SKIPPED with fewer
 * than 2 GPUs). Two communicators are made in this process; only rank 0's is attached, so its warm-up all-reduce
 * waits for rank 1, which never calls. With GG_DIST_PEER_TIMEOUT_S=2, gg_dist_attach must return GG_ERROR_NCCL
 * within seconds, say why, abort the communicator and leave the context usable without one. A watchdog ends the run
 * after 120 s if anything hangs.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "gpu_test.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void attach_without_the_peer_times_out(void **state) {
    (void)state;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        (void)cudaGetLastError();
        skip();
    }
    assert_int_equal(setenv("NCCL_NVLS_ENABLE", "0", 0), 0); /* before NCCL reads it: no context exists yet */
    assert_int_equal(setenv("GG_DIST_PEER_TIMEOUT_S", "2", 1), 0);
    ncclComm_t comms[2] = {NULL, NULL};
    const int devices[2] = {0, 1};
    assert_int_equal(ncclCommInitAll(comms, 2, devices), ncclSuccess);

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
    assert_true(waited >= 1.5 && waited < 60.0);
    assert_non_null(strstr(gg_last_error(ctx), "did not join"));
    assert_non_null(strstr(gg_last_error(ctx), "aborted"));
    assert_int_equal(gg_dist_size(ctx), 0); /* no communicator left on the context */
    assert_int_equal(gg_dist_check(ctx), GG_SUCCESS);

    /* comms[0] is aborted (freed) by gradgraph; rank 1's was never used */
    assert_int_equal(ncclCommAbort(comms[1]), ncclSuccess);
    gg_ctx_destroy(ctx);
    unsetenv("GG_DIST_PEER_TIMEOUT_S");
}

static void on_watchdog(int sig) {
    (void)sig;
    static const char msg[] = "test_dist_timeout: the run hung (120 s watchdog)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(3);
}

int main(void) {
    signal(SIGALRM, on_watchdog);
    alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attach_without_the_peer_times_out),
    };
    return cmocka_run_group_tests_name("dist_timeout", tests, NULL, NULL);
}
