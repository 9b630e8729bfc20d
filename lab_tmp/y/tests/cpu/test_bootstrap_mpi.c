/* test_bootstrap_mpi.c - rank, size and NCCL's unique id through MPI (GG_WITH_MPI), on the CPU: no NCCL, no GPU.
 * CTest runs it as two MPI ranks; every rank runs the same tests, and mpiexec fails when any rank does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <mpi.h>

#include "bootstrap.h"

enum { ID_BYTES = 128 + sizeof(int32_t) }; /* NCCL's unique id and the status gg_dist_init_mpi sends with it */

/* Rank 0's bytes: a fresh random seed in byte 0 and a pattern derived from it, so every rank can check them. */
static unsigned char pattern(unsigned char seed, int i) { return (unsigned char)(seed * 31u + (unsigned)i * 7u + 1u); }

/* Every rank gathers its verdict first and all agree before asserting (as below), so a rank that failed alone
 * never leaves the others waiting in a collective. */
static int all_ranks_ok(int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

static void rank_and_size_are_the_communicators(void **state) {
    (void)state;
    int rank = -1, size = 0, mpi_rank = -2, mpi_size = -2;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    int ok = gg_bootstrap_mpi_rank_size(NULL, "t", NULL, &rank, &size) == GG_SUCCESS && rank == mpi_rank &&
             size == mpi_size && size >= 2; /* CTest launches two ranks: one rank would not test the broadcast */
    /* A communicator of one's own (split by rank): rank 0 of size 1 on every process. */
    MPI_Comm alone;
    MPI_Comm_split(MPI_COMM_WORLD, mpi_rank, 0, &alone);
    ok = ok && gg_bootstrap_mpi_rank_size(NULL, "t", &alone, &rank, &size) == GG_SUCCESS && rank == 0 && size == 1;
    MPI_Comm_free(&alone);
    assert_true(all_ranks_ok(ok));
}

static void rank0_bytes_reach_every_rank(void **state) {
    (void)state;
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int round = 0; round < 3; ++round) {
        unsigned char id[ID_BYTES];
        memset(id, 0, sizeof id); /* other ranks start from zeros: what arrives must be rank 0's */
        if (rank == 0) {
            id[0] = (unsigned char)(rand() % 255 + 1);
            for (int i = 1; i < ID_BYTES; ++i) id[i] = pattern(id[0], i);
        }
        int ok = gg_bootstrap_mpi_broadcast(NULL, "t", NULL, id, sizeof id) == GG_SUCCESS && id[0] != 0;
        for (int i = 1; i < ID_BYTES && ok; ++i) ok = id[i] == pattern(id[0], i);
        int seed = id[0], lo = 0, hi = 0;
        MPI_Allreduce(&seed, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&seed, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        assert_true(all_ranks_ok(ok));
        assert_int_equal(lo, hi); /* every rank holds the same seed */
    }
}

int main(int argc, char **argv) {
    /* Before MPI_Init and after MPI_Finalize the calls refuse, naming the problem. */
    int rank = -1, size = 0;
    unsigned char byte = 0;
    if (gg_bootstrap_mpi_rank_size(NULL, "gg_dist_init_mpi", NULL, &rank, &size) != GG_ERROR_INVALID_ARGUMENT ||
        !strstr(gg_last_error(NULL), "gg_dist_init_mpi: MPI is not initialized"))
        return 2;
    if (gg_bootstrap_mpi_broadcast(NULL, "t", NULL, &byte, 1) != GG_ERROR_INVALID_ARGUMENT) return 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    srand((unsigned)time(NULL) ^ (unsigned)rank * 7919u);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rank_and_size_are_the_communicators),
        cmocka_unit_test(rank0_bytes_reach_every_rank),
    };
    const int failed = cmocka_run_group_tests_name("bootstrap_mpi", tests, NULL, NULL);
    MPI_Finalize();
    if (gg_bootstrap_mpi_broadcast(NULL, "t", NULL, &byte, 1) != GG_ERROR_INVALID_ARGUMENT ||
        !strstr(gg_last_error(NULL), "MPI is already finalized"))
        return 4;
    return failed;
}
