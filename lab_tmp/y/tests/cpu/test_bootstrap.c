/* test_bootstrap.c - rank and size from a launcher's environment, and NCCL's unique id shared through a file
 * between two processes (CPU only: no NCCL, no GPU). */
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
        const gg_status st = gg_bootstrap_share_id(NULL, "t", 1, path, got, sizeof got, 5000);
        _exit(st == GG_SUCCESS && memcmp(got, id, sizeof id) == 0 ? 0 : 1);
    }
    const struct timespec pause = {0, 200 * 1000 * 1000}; /* rank 0 is late */
    nanosleep(&pause, NULL);
    assert_int_equal(gg_bootstrap_share_id(NULL, "t", 0, path, id, sizeof id, 5000), GG_SUCCESS);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    unlink(path);
}

static void waiting_rank_gives_up_with_a_message(void **state) {
    (void)state;
    unsigned char id[128];
    assert_int_equal(gg_bootstrap_share_id(NULL, "gg_dist_init_env", 1, "/tmp/gg_no_such_id_file", id, sizeof id, 100),
                     GG_ERROR_NCCL);
    assert_non_null(strstr(gg_last_error(NULL), "rank 1 waited 100 ms for rank 0"));
}

static void unwritable_path_is_reported(void **state) {
    (void)state;
    unsigned char id[16] = {1};
    assert_int_equal(gg_bootstrap_share_id(NULL, "t", 0, "/nonexistent-dir/id", id, sizeof id, 100),
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
        cmocka_unit_test(unwritable_path_is_reported),
    };
    return cmocka_run_group_tests_name("bootstrap", tests, NULL, NULL);
}
