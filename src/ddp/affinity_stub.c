/* affinity_stub.c - thread binding in a build without hwloc (GG_WITH_HWLOC=OFF: CMake compiles this instead of
 * affinity.c). */
#include "affinity.h"

gg_status gg_dist_bind_thread(gg_ctx *ctx) {
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "gg_dist_bind_thread: ctx is NULL");
    return gg_fail(ctx, GG_ERROR_UNSUPPORTED,
                   "gg_dist_bind_thread: gradgraph was built without hwloc (GG_WITH_HWLOC=OFF)");
}

void gg_affinity_bind_if_asked(gg_ctx *ctx) {
    gg_log(ctx, GG_LOG_INFO, "thread binding skipped: gradgraph was built without hwloc (GG_WITH_HWLOC=OFF)");
}
