/* bootstrap_mpi_stub.c - the MPI bootstrap in a build without MPI (GG_WITH_MPI=OFF: CMake compiles this instead of
 * bootstrap_mpi.c). */
#include "bootstrap.h"

gg_status gg_bootstrap_mpi_rank_size(gg_ctx *ctx, const char *fn, const void *comm, int *rank, int *size) {
    (void)comm, (void)rank, (void)size;
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED, "%s: gradgraph was built without MPI (GG_WITH_MPI=OFF)", fn);
}

gg_status gg_bootstrap_mpi_broadcast(gg_ctx *ctx, const char *fn, const void *comm, void *data, size_t bytes) {
    (void)comm, (void)data, (void)bytes;
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED, "%s: gradgraph was built without MPI (GG_WITH_MPI=OFF)", fn);
}
