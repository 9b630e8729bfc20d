/* test_bootstrap.c - rank and size from a launcher's environment, NCCL's unique id shared through a file between
 * two processes, and what a wait on the other ranks logs while it lasts (waiting.h) (CPU only: no NCCL, no GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bootstrap.h"
#include "waiting.h"

static void clear_env(void) {
    const char *vars[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                          "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
}

static void rank_and_size_from_torchrun_style_env(void **state) {
    (void)state;
    clear_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    int rank, size;
    assert_int_equal(gg_bootstrap_rank_size(NULL, "t", &rank, &size), GG_SUCCESS);
    assert_int_equal(rank, 1);
    assert_int_equal(size, 2);
}

static void rank_and_size_from_mpi_or_slurm(void **state) {
    (void)state;
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    int rank, size;
    assert_int_equal(gg_bootstrap_rank_size(NULL, "t", &rank, &size), GG_SUCCESS);
    assert_int_equal(rank, 3);
    assert_int_equal(size, 8);
    clear_env();
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "4", 1);
    assert_int_equal(gg_bootstrap_rank_size(NULL, "t", &rank, &size), GG_SUCCESS);
    assert_int_equal(rank, 0);
    assert_int_equal(size, 4);
}

static void bad_rank_or_size_is_named(void **state) {
    (void)state;
    int rank, size;
    clear_env();
    assert_int_equal(gg_bootstrap_rank_size(NULL, "gg_dist_init_env", &rank, &size), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "gg_dist_init_env: no valid rank and world size"));
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "2", 1); /* rank out of range */
    assert_int_equal(gg_bootstrap_rank_size(NULL, "t", &rank, &size), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "RANK = 2, WORLD_SIZE = 2"));
    setenv("RANK", "one", 1); /* not a number */
    assert_int_equal(gg_bootstrap_rank_size(NULL, "t", &rank, &size), GG_ERROR_INVALID_ARGUMENT);
    /* a rank from one launcher never pairs with another launcher's size */
    clear_env();
    setenv("RANK", "1", 1);
    setenv("SLURM_NTASKS", "4", 1);
    assert_int_equal(gg_bootstrap_rank_size(NULL, "t", &rank, &size), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "RANK = 1, WORLD_SIZE = (unset)"));
    clear_env();
}

static void id_travels_from_rank0_to_rank1(void **state) {
    (void)state;
    char path[] = "/tmp/gg_bootstrap_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path); /* rank 1 must wait until rank 0 has written it */
    unsigned char id[128];
    for (size_t i = 0; i < sizeof id; ++i) id[i] = (unsigned char)(i * 7 + 3);
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* rank 1 */
        unsigned char got[128] = {0};
        const gg_status st = gg_bootstrap_share_id(NULL, "t", 1, path, got, sizeof got);
        _exit(st == GG_SUCCESS && memcmp(got, id, sizeof id) == 0 ? 0 : 1);
    }
    const struct timespec pause = {0, 200 * 1000 * 1000}; /* rank 0 is late */
    nanosleep(&pause, NULL);
    assert_int_equal(gg_bootstrap_share_id(NULL, "t", 0, path, id, sizeof id), GG_SUCCESS);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    unlink(path);
}

/* A context that only logs: what the waits below need of one (its log callback and its last error). */
static char logged[8][GG_MSG_BYTES];
static int n_logged;
static void record_log(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (level == GG_LOG_WARN && n_logged < 8) snprintf(logged[n_logged++], GG_MSG_BYTES, "%s", message);
}
static gg_ctx *logging_ctx(void) {
    gg_ctx *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    ctx->config.log_fn = record_log;
    ctx->config.log_level = GG_LOG_WARN;
    n_logged = 0;
    return ctx;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rank 0 never writes the id: rank 1 gives up at the init deadline (1 s here) with a message naming the wait and
 * the variable, and said once before that it was still waiting (half the limit, as the limit is under 20 s). */
static void waiting_rank_gives_up_with_a_message(void **state) {
    (void)state;
    gg_ctx *ctx = logging_ctx();
    setenv("GG_DIST_INIT_TIMEOUT_S", "1", 1);
    unsigned char id[128];
    const double t0 = now_s();
    const gg_status st = gg_bootstrap_share_id(ctx, "gg_dist_init_env", 1, "/tmp/gg_no_such_id_file", id, sizeof id);
    const double took = now_s() - t0;
    unsetenv("GG_DIST_INIT_TIMEOUT_S");
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_true(took >= 1.0 && took < 15.0);
    assert_non_null(strstr(gg_last_error(ctx), "gg_dist_init_env: rank 1 waited 1 s for rank 0 to write the NCCL id "
                                               "to /tmp/gg_no_such_id_file (GG_DIST_INIT_TIMEOUT_S)"));
    assert_int_equal(n_logged, 1);
    print_message("notice: %s\n", logged[0]);
    assert_non_null(strstr(logged[0], "rank 1: the NCCL id from rank 0 in /tmp/gg_no_such_id_file: not finished "
                                      "after "));
    assert_non_null(strstr(logged[0], "waiting for the other ranks; gradgraph gives up at 1 s "
                                      "(GG_DIST_INIT_TIMEOUT_S)"));
    free(ctx);
}

/* The notices' schedule at the default limit (300 s), by moving a wait's start back: none before 10 s, one at 10 s
 * (and not again at once), the next 30 s after the last, each saying how long it has waited and when it gives up;
 * over at the limit. Without a context nothing is logged, and the wait still ends. */
static void long_wait_notices_come_at_10_s_then_every_30_s(void **state) {
    (void)state;
    gg_ctx *ctx = logging_ctx();
    unsetenv("GG_DIST_PEER_TIMEOUT_S");
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctx, 3, "the warm-up all-reduce", GG_DIST_TIMEOUT_PEER);
    assert_int_equal(w.limit_s, 300);
    gg_dist_wait_since(&w, now_s() - 9.5);
    assert_int_equal(gg_dist_wait_over(&w), 0);
    assert_int_equal(n_logged, 0);
    gg_dist_wait_since(&w, now_s() - 10.5);
    assert_int_equal(gg_dist_wait_over(&w), 0);
    assert_int_equal(gg_dist_wait_over(&w), 0);
    assert_int_equal(n_logged, 1);
    assert_string_equal(logged[0], "rank 3: the warm-up all-reduce: not finished after 10 s, waiting for the other "
                                   "ranks; gradgraph gives up at 300 s (GG_DIST_PEER_TIMEOUT_S)");
    w.start -= 29.0; /* 39.5 s, 29 s after the notice */
    assert_int_equal(gg_dist_wait_over(&w), 0);
    assert_int_equal(n_logged, 1);
    w.start -= 1.5; /* 41 s */
    assert_int_equal(gg_dist_wait_over(&w), 0);
    assert_int_equal(n_logged, 2);
    assert_non_null(strstr(logged[1], "not finished after 41 s"));
    w.start -= 300.0;
    assert_int_equal(gg_dist_wait_over(&w), 1);
    assert_int_equal(n_logged, 2);
    gg_dist_wait_begin(&w, NULL, 0, "nobody's", GG_DIST_TIMEOUT_PEER);
    gg_dist_wait_since(&w, now_s() - 20.0);
    assert_int_equal(gg_dist_wait_over(&w), 0);
    gg_dist_wait_since(&w, now_s() - 300.0);
    assert_int_equal(gg_dist_wait_over(&w), 1);
    free(ctx);
}

static void unwritable_path_is_reported(void **state) {
    (void)state;
    unsigned char id[16] = {1};
    assert_int_equal(gg_bootstrap_share_id(NULL, "t", 0, "/nonexistent-dir/id", id, sizeof id),
                     GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "cannot write the NCCL id"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rank_and_size_from_torchrun_style_env),
        cmocka_unit_test(rank_and_size_from_mpi_or_slurm),
        cmocka_unit_test(bad_rank_or_size_is_named),
        cmocka_unit_test(id_travels_from_rank0_to_rank1),
        cmocka_unit_test(waiting_rank_gives_up_with_a_message),
        cmocka_unit_test(long_wait_notices_come_at_10_s_then_every_30_s),
        cmocka_unit_test(unwritable_path_is_reported),
    };
    return cmocka_run_group_tests_name("bootstrap", tests, NULL, NULL);
}
