/* bootstrap.c - rank, size and NCCL's unique id for one-process-per-GPU launches (see bootstrap.h). */
#include "bootstrap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The first of several environment variables that is set and a whole number, or -1. */
static int env_int(const char *const *names) {
    for (; *names; ++names) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end = NULL;
        const long x = strtol(v, &end, 10);
        return *end == '\0' && x >= 0 && x <= 1 << 24 ? (int)x : -1;
    }
    return -1;
}

gg_status gg_bootstrap_rank_size(gg_ctx *ctx, const char *fn, int *rank, int *size) {
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", NULL};
    *rank = env_int(rank_vars);
    *size = env_int(size_vars);
    if (*rank < 0 || *size < 1 || *rank >= *size)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: no valid rank and world size in the environment (RANK = %d, WORLD_SIZE = %d; also read: "
                       "OMPI_COMM_WORLD_RANK/_SIZE, SLURM_PROCID/SLURM_NTASKS)",
                       fn, *rank, *size);
    return GG_SUCCESS;
}

gg_status gg_bootstrap_share_id(gg_ctx *ctx, const char *fn, int rank, const char *path, void *id, size_t bytes,
                                int timeout_ms) {
    if (rank == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        const int written = f && fwrite(id, bytes, 1, f) == 1;
        if (f && fclose(f) != 0) f = NULL;
        if (!f || !written) {
            (void)remove(tmp);
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: cannot write the NCCL id to %s: %s", fn, tmp,
                           strerror(errno));
        }
        if (rename(tmp, path) != 0) { /* readers never see a half-written id */
            (void)remove(tmp);
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: cannot rename %s to %s: %s", fn, tmp, path,
                           strerror(errno));
        }
        return GG_SUCCESS;
    }
    for (int waited_ms = 0; waited_ms <= timeout_ms; waited_ms += 50) {
        FILE *f = fopen(path, "rb");
        if (f) {
            const size_t got = fread(id, bytes, 1, f);
            fclose(f);
            if (got == 1) return GG_SUCCESS;
        }
        const struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return gg_fail(ctx, GG_ERROR_NCCL, "%s: rank %d waited %d ms for rank 0 to write the NCCL id to %s", fn, rank,
                   timeout_ms, path);
}
