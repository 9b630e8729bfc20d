/* launch.cuh - the cudaLaunchKernelEx configuration of a grid in thread-block clusters, for the kernels that split
 * a tile's k over a cluster and add the partials through distributed shared memory. */
#ifndef GG_LAUNCH_CUH
#define GG_LAUNCH_CUH

#include <cuda_runtime.h>

namespace gg {

/* `ctas` CTAs of `threads` threads and `smem` bytes of dynamic shared memory, in clusters of `cluster` CTAs along x
 * (`ctas` a multiple of it). The configuration points at `attr`, which must outlive the launch or query. */
inline cudaLaunchConfig_t cluster_launch(unsigned ctas, unsigned threads, size_t smem, int cluster,
                                         cudaStream_t stream, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(ctas);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)cluster;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = 1;
    return config;
}

} // namespace gg

#endif
