/* bootstrap_mpi.c - rank, size and NCCL's unique id through MPI (see bootstrap.h). With GG_WITH_MPI=OFF CMake
 * compiles bootstrap_mpi_stub.c instead. */
#include "bootstrap.h"

#include <limits.h>

#include <mpi.h>

/* MPI must be usable: initialized by the caller (gradgraph never initializes or finalizes it) and not finalized. */
static gg_status check_mpi(gg_ctx *ctx, const char *fn) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: MPI is %s: call MPI_Init before and MPI_Finalize after", fn,
                       finalized ? "already finalized" : "not initialized");
    return GG_SUCCESS;
}

static MPI_Comm comm_of(const void *comm) { return comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD; }

static gg_status fail_mpi(gg_ctx *ctx, const char *fn, const char *what, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s failed: %s", fn, what, len ? text : "unknown MPI error");
}

gg_status gg_bootstrap_mpi_rank_size(gg_ctx *ctx, const char *fn, const void *comm, int *rank, int *size) {
    GG_TRY(check_mpi(ctx, fn));
    int err = MPI_Comm_rank(comm_of(comm), rank);
    if (err != MPI_SUCCESS) return fail_mpi(ctx, fn, "MPI_Comm_rank", err);
    err = MPI_Comm_size(comm_of(comm), size);
    if (err != MPI_SUCCESS) return fail_mpi(ctx, fn, "MPI_Comm_size", err);
    return GG_SUCCESS;
}

gg_status gg_bootstrap_mpi_broadcast(gg_ctx *ctx, const char *fn, const void *comm, void *data, size_t bytes) {
    GG_TRY(check_mpi(ctx, fn));
    if (bytes > INT_MAX) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %zu bytes to broadcast", fn, bytes);
    const int err = MPI_Bcast(data, (int)bytes, MPI_BYTE, 0, comm_of(comm));
    return err == MPI_SUCCESS ? GG_SUCCESS : fail_mpi(ctx, fn, "MPI_Bcast", err);
}
