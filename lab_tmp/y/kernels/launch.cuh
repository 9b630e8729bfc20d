/* launch.cuh - cudaLaunchKernelEx configurations: a launch at a chosen priority, and a grid in thread-block clusters
 * (the kernels that split a tile's k over a cluster and add the partials through distributed shared memory). */
#ifndef GG_LAUNCH_CUH
#define GG_LAUNCH_CUH

#include <cuda_runtime.h>

#include "gg_kernels.h"

namespace gg {

/* A launch's attributes: its priority and, for cluster launches, the cluster's shape. */
struct LaunchAttrs {
    cudaLaunchAttribute attr[2];
};

/* `grid` CTAs of `threads` threads and `smem` bytes of dynamic shared memory at `priority` (GG_PRIORITY_OF_STREAM:
 * the stream's). The configuration points into `attrs`, which must outlive the launch or query. */
inline cudaLaunchConfig_t plain_launch(dim3 grid, unsigned threads, size_t smem, int priority, cudaStream_t stream,
                                       LaunchAttrs *attrs) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attrs->attr;
    config.numAttrs = 0;
    if (priority != GG_PRIORITY_OF_STREAM) {
        attrs->attr[0].id = cudaLaunchAttributePriority;
        attrs->attr[0].val.priority = priority;
        config.numAttrs = 1;
    }
    return config;
}

/* plain_launch's grid of `ctas` CTAs in clusters of `cluster` CTAs along x (`ctas` a multiple of it). */
inline cudaLaunchConfig_t cluster_launch(unsigned ctas, unsigned threads, size_t smem, int cluster, int priority,
                                         cudaStream_t stream, LaunchAttrs *attrs) {
    cudaLaunchConfig_t config = plain_launch(dim3(ctas), threads, smem, priority, stream, attrs);
    cudaLaunchAttribute *a = &attrs->attr[config.numAttrs++];
    a->id = cudaLaunchAttributeClusterDimension;
    a->val.clusterDim.x = (unsigned)cluster;
    a->val.clusterDim.y = 1;
    a->val.clusterDim.z = 1;
    return config;
}

} // namespace gg

#endif
