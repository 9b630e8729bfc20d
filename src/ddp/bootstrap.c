/* bootstrap.c - rank, size and NCCL's unique id for one-process-per-GPU launches (see bootstrap.h). */
#include "bootstrap.h"
#include "waiting.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* An environment variable that is set and a whole number in [0, 2^24], or -1 (unset: -2). */
static int env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return -2;
    char *end = NULL;
    const long x = strtol(v, &end, 10);
    return *end == '\0' && x >= 0 && x <= 1 << 24 ? (int)x : -1;
}

gg_status gg_bootstrap_rank_size(gg_ctx *ctx, const char *fn, int *rank, int *size) {
    /* One launcher's pair at a time (torchrun-style, Open MPI, Slurm), never a rank from one and a size from
     * another: the first pair whose rank variable is set decides. */
    static const char *const pairs[][2] = {
        {"RANK", "WORLD_SIZE"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; ++p) {
        *rank = env_int(pairs[p][0]);
        if (*rank == -2) continue;
        *size = env_int(pairs[p][1]);
        if (*rank < 0 || *size < 1 || *rank >= *size)
            return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s: no valid rank and world size in the environment (%s = %s, %s = %s)",
                           fn, pairs[p][0], getenv(pairs[p][0]), pairs[p][1],
                           getenv(pairs[p][1]) ? getenv(pairs[p][1]) : "(unset)");
        return GG_SUCCESS;
    }
    *rank = -1, *size = 0;
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                   "%s: no valid rank and world size in the environment (none of RANK/WORLD_SIZE, "
                   "OMPI_COMM_WORLD_RANK/_SIZE, SLURM_PROCID/SLURM_NTASKS is set)",
                   fn);
}

gg_status gg_bootstrap_share_id(gg_ctx *ctx, const char *fn, int rank, const char *path, void *id, size_t bytes) {
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
    char what[4200];
    snprintf(what, sizeof what, "the NCCL id from rank 0 in %s", path);
    gg_dist_wait w;
    gg_dist_wait_begin(&w, ctx, rank, what, GG_DIST_TIMEOUT_INIT);
    do {
        FILE *f = fopen(path, "rb");
        if (f) {
            const size_t got = fread(id, bytes, 1, f);
            fclose(f);
            if (got == 1) return GG_SUCCESS;
        }
        const struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    } while (!gg_dist_wait_over(&w));
    return gg_fail(ctx, GG_ERROR_NCCL, "%s: rank %d waited %d s for rank 0 to write the NCCL id to %s (%s)", fn, rank,
                   w.limit_s, path, gg_dist_timeout_env(GG_DIST_TIMEOUT_INIT));
}
