/* test_dist_init_mpi.c - gg_dist_init_mpi, and gg_dist_init_env without an id file, across real MPI processes on the
 * CPU: CTest launches two ranks, each a context on the CUDA fakes with NCCL's fakes (tests/fake), so MPI's part of
 * the bootstrap is real and NCCL's is not (each process's fake collectives are its own). Every rank makes its
 * communicator from rank 0's unique id, with MPI's rank and size; rank 0's failure to make the id fails every rank
 * at once (none waits for a communicator that will not come); without an id file, MPI's world must be the
 * environment's, else nothing is made. Each rank agrees with the others before asserting, so a rank that failed
 * alone never leaves the others waiting in a collective, and mpiexec fails when any rank does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <mpi.h>

#include "fake_cuda.h"
#include "fake_nccl.h"
#include "held_call.h"
#include "gradgraph.h"

static int mpi_rank, mpi_size;

/* gradgraph's MPI_Bcast calls (linked with --wrap=MPI_Bcast), each passed on to MPI's. */
static int broadcasts;
int __real_MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm);
int __wrap_MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    ++broadcasts;
    return __real_MPI_Bcast(buffer, count, type, root, comm);
}

static int all_ranks_ok(int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* A context on the fakes; NCCL's fakes say this process is MPI's rank of MPI's size. */
static gg_ctx *fake_ctx(void) {
    fake_reset(1);
    fake.plan_ok = 1;
    fake_nccl_reset(mpi_rank, mpi_size);
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    return ctx;
}

static gg_dist_config dist_config(void) {
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bind_cpus = 0;
    return dc;
}

/* Destroys the context; 1 when it left no CUDA resource and no communicator behind. */
static int destroyed_cleanly(gg_ctx *ctx) {
    gg_ctx_destroy(ctx);
    return fake.live == 0 && atomic_load(&fake_nccl.live) == 0;
}

/* Every rank's communicator comes from rank 0's id (each process's fake makes ids of its own bytes, so an id that did
 * not travel shows), with MPI's rank and size. */
static int made_from_rank_0s_id(gg_ctx *ctx, gg_status st) {
    ncclUniqueId expect;
    memset(&expect, 17, sizeof expect); /* rank 0's id_byte */
    const int ok = st == GG_SUCCESS && gg_dist_rank(ctx) == mpi_rank && gg_dist_size(ctx) == mpi_size &&
                   fake_nccl.calls[FN_INIT] == 1 && memcmp(&fake_nccl.init_id, &expect, sizeof expect) == 0;
    if (!ok)
        print_message("rank %d: status %s (%s), rank %d of %d, %d inits\n", mpi_rank, gg_status_string(st),
                      gg_last_error(ctx), gg_dist_rank(ctx), gg_dist_size(ctx), fake_nccl.calls[FN_INIT]);
    return ok;
}

static void init_mpi_makes_every_rank_from_rank_0s_id(void **state) {
    (void)state;
    gg_ctx *ctx = fake_ctx();
    fake_nccl.id_byte = (unsigned char)(17 + mpi_rank);
    const gg_dist_config dc = dist_config();
    int ok = made_from_rank_0s_id(ctx, gg_dist_init_mpi(ctx, NULL, &dc));
    ok = destroyed_cleanly(ctx) && ok;
    assert_true(all_ranks_ok(ok));
}

/* Rank 0's ncclGetUniqueId fails: rank 0 says so, every other rank that rank 0 could not make the id; no rank makes a
 * communicator, and each context is still usable (attached to nothing) and destroyed cleanly. */
static void rank_0_without_an_id_fails_every_rank(void **state) {
    (void)state;
    gg_ctx *ctx = fake_ctx();
    if (mpi_rank == 0) fake_nccl.fail_kind = FN_UNIQUE_ID, fake_nccl.fail_at = 1;
    const gg_dist_config dc = dist_config();
    const gg_status st = gg_dist_init_mpi(ctx, NULL, &dc);
    const char *said = gg_last_error(ctx);
    const char *expect = mpi_rank == 0 ? "ncclGetUniqueId"
                                       : "gg_dist_init_mpi: rank 0 refused its arguments or could not make NCCL's "
                                         "unique id";
    const gg_status want = mpi_rank == 0 ? GG_ERROR_NCCL : GG_ERROR_PEER;
    int ok = st == want && strstr(said, expect) && strncmp(said, "gg_dist_init_mpi: ", 18) == 0 &&
             fake_nccl.calls[FN_INIT] == 0 && gg_dist_size(ctx) == 0 && gg_dist_rank(ctx) == -1;
    if (!ok) print_message("rank %d: status %s: %s\n", mpi_rank, gg_status_string(st), said);
    ok = destroyed_cleanly(ctx) && ok;
    assert_true(all_ranks_ok(ok));
}

/* Rank 0 alone refuses its arguments (its bucket_bytes): it still takes part in the id's broadcast, so every rank
 * returns at once (before, the others waited in MPI_Bcast forever): rank 0 naming its argument, the others that rank 0
 * refused; no rank makes a communicator. */
static void rank_0_refusing_its_arguments_fails_every_rank(void **state) {
    (void)state;
    gg_ctx *ctx = fake_ctx();
    gg_dist_config dc = dist_config();
    if (mpi_rank == 0) dc.bucket_bytes = 100;
    const gg_status st = gg_dist_init_mpi(ctx, NULL, &dc);
    const char *said = gg_last_error(ctx);
    const char *expect = mpi_rank == 0 ? "gg_dist_init_mpi: config->bucket_bytes = 100 is below 4096"
                                       : "gg_dist_init_mpi: rank 0 refused its arguments";
    int ok = st == (mpi_rank == 0 ? GG_ERROR_INVALID_ARGUMENT : GG_ERROR_PEER) && strstr(said, expect) &&
             fake_nccl.calls[FN_INIT] == 0 && gg_dist_size(ctx) == 0;
    if (!ok) print_message("rank %d: status %s: %s\n", mpi_rank, gg_status_string(st), said);
    ok = destroyed_cleanly(ctx) && ok;
    assert_true(all_ranks_ok(ok));
}

/* Rank 0's call refused before its own checks: a CUDA error its application left pending (the refusal leaves it
 * pending), or no context at all; gg_dist_init_mpi and gg_dist_init_env without an id file. Rank 0 still takes part
 * in the id's broadcast (before, the others waited in MPI_Bcast forever): it says why it refused, the others that
 * rank 0 refused; no rank makes a communicator. */
static void rank_0_refused_before_its_checks_fails_every_rank(void **state) {
    (void)state;
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    const gg_dist_config dc = dist_config();
    for (int how = 0; how < 4; ++how) { /* bit 0: no context (else an error pending); bit 1: init_env */
        gg_ctx *ctx = fake_ctx();
        const int no_ctx = how & 1, env = how & 2;
        gg_ctx *const given = mpi_rank == 0 && no_ctx ? NULL : ctx;
        if (mpi_rank == 0 && !no_ctx) fake_pending = cudaErrorInvalidConfiguration;
        const gg_status st = env ? gg_dist_init_env(given, NULL, &dc) : gg_dist_init_mpi(given, NULL, &dc);
        const char *said = gg_last_error(given);
        const char *fn = env ? "gg_dist_init_env" : "gg_dist_init_mpi";
        const char *expect = mpi_rank != 0 ? "rank 0 refused its arguments"
                             : no_ctx      ? "ctx is NULL"
                                           : "a CUDA error is pending on this thread from earlier work that was not "
                                             "this call's: cudaErrorInvalidConfiguration";
        const gg_status want = mpi_rank != 0 ? GG_ERROR_PEER : no_ctx ? GG_ERROR_INVALID_ARGUMENT : GG_ERROR_CUDA;
        int ok = st == want && strncmp(said, fn, strlen(fn)) == 0 && strstr(said, expect) &&
                 fake_nccl.calls[FN_INIT] == 0 && gg_dist_size(ctx) == 0;
        if (mpi_rank == 0 && !no_ctx) ok = ok && cudaGetLastError() == cudaErrorInvalidConfiguration;
        if (!ok) print_message("rank %d, %s%s: status %s: %s\n", mpi_rank, fn, no_ctx ? " without a context" : "",
                               gg_status_string(st), said);
        ok = destroyed_cleanly(ctx) && ok;
        assert_true(all_ranks_ok(ok));
    }
}

/* gg_dist_init_env(ctx, NULL, ...): the id travels through MPI's world when the environment's rank and size are
 * MPI's (mpiexec's OMPI_COMM_WORLD_* here, RANK/WORLD_SIZE unset); with RANK naming another rank, every rank refuses
 * before making anything. */
static void init_env_without_a_file_takes_mpis_world(void **state) {
    (void)state;
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    gg_ctx *ctx = fake_ctx();
    fake_nccl.id_byte = (unsigned char)(17 + mpi_rank);
    const gg_dist_config dc = dist_config();
    int ok = made_from_rank_0s_id(ctx, gg_dist_init_env(ctx, NULL, &dc));
    ok = destroyed_cleanly(ctx) && ok;

    char other[16], size[16];
    snprintf(other, sizeof other, "%d", (mpi_rank + 1) % mpi_size);
    snprintf(size, sizeof size, "%d", mpi_size);
    setenv("RANK", other, 1);
    setenv("WORLD_SIZE", size, 1);
    ctx = fake_ctx();
    const gg_status st = gg_dist_init_env(ctx, NULL, &dc);
    char expect[128];
    snprintf(expect, sizeof expect, "MPI's world (rank %d of %d) is not the environment's (rank %s of %d)", mpi_rank,
             mpi_size, other, mpi_size);
    const int refused = st == GG_ERROR_INVALID_ARGUMENT && strstr(gg_last_error(ctx), expect) &&
                        fake_nccl.calls[FN_INIT] == 0;
    if (!refused) print_message("rank %d: status %s: %s\n", mpi_rank, gg_status_string(st), gg_last_error(ctx));
    ok = destroyed_cleanly(ctx) && refused && ok;
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    assert_true(all_ranks_ok(ok));
}

/* A bootstrap refused because another thread is inside the context takes no part in the id's broadcast, unlike one
 * refused for a NULL context or a pending CUDA error: that thread may itself be in this very bootstrap, broadcasting,
 * and a second broadcast on this rank would wait forever. Every rank is refused alike here, so none waits; each
 * bootstraps afterwards as usual, from rank 0's id (so no rank left a broadcast unmatched). */
static void a_context_in_use_is_refused_without_a_broadcast(void **state) {
    (void)state;
    const gg_dist_config dc = dist_config();
    setenv("RANK", mpi_rank ? "1" : "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    int ok = 1;
    for (int env = 0; env < 2; ++env) {
        gg_ctx *ctx = fake_ctx();
        fake_nccl.id_byte = (unsigned char)(17 + mpi_rank);
        held_call_begin(ctx);
        const int before = broadcasts;
        const char *fn = env ? "gg_dist_init_env" : "gg_dist_init_mpi";
        const gg_status st = env ? gg_dist_init_env(ctx, NULL, &dc) : gg_dist_init_mpi(ctx, NULL, &dc);
        char said[512];
        snprintf(said, sizeof said, "%s", gg_last_error(NULL));
        char expect[128];
        snprintf(expect, sizeof expect, "%s: the context is in use by another thread", fn);
        const int refused = st == GG_ERROR_INVALID_ARGUMENT && strstr(said, expect) && broadcasts == before &&
                            fake_nccl.calls[FN_INIT] == 0 && gg_dist_size(ctx) == 0;
        if (!refused)
            print_message("rank %d %s: status %s, %d broadcasts: %s\n", mpi_rank, fn, gg_status_string(st),
                          broadcasts - before, said);

        const gg_status held_status = held_call_end();
        const gg_status again = env ? gg_dist_init_env(ctx, NULL, &dc) : gg_dist_init_mpi(ctx, NULL, &dc);
        ok = refused && held_status == GG_SUCCESS && made_from_rank_0s_id(ctx, again) && broadcasts == before + 1 &&
             destroyed_cleanly(ctx) && ok;
    }
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    assert_true(all_ranks_ok(ok));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_mpi_makes_every_rank_from_rank_0s_id),
        cmocka_unit_test(rank_0_without_an_id_fails_every_rank),
        cmocka_unit_test(rank_0_refusing_its_arguments_fails_every_rank),
        cmocka_unit_test(init_env_without_a_file_takes_mpis_world),
        cmocka_unit_test(rank_0_refused_before_its_checks_fails_every_rank),
        cmocka_unit_test(a_context_in_use_is_refused_without_a_broadcast),
    };
    int failed = mpi_size >= 2 ? cmocka_run_group_tests(tests, NULL, NULL) : 1; /* one rank tests no sharing */
    MPI_Finalize();
    return failed;
}
