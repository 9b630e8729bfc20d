/* affinity.c - binding a GPU's host thread to the CPUs near the GPU (hwloc; without it, affinity_stub.c). */
#include "affinity.h"

#include <stdio.h>

#include "internal.h"

int gg_affinity_gpu_cpuset(hwloc_topology_t topology, const char *pci_bus_id, hwloc_bitmap_t out, char *why,
                           size_t why_bytes) {
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topology, pci_bus_id);
    if (!pci) {
        snprintf(why, why_bytes, "PCI device %s is not in the hwloc topology", pci_bus_id);
        return 0;
    }
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topology, pci);
    if (!near || !near->cpuset || hwloc_bitmap_iszero(near->cpuset)) {
        snprintf(why, why_bytes, "PCI device %s has no CPU locality in the topology", pci_bus_id);
        return 0;
    }
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topology);
    hwloc_bitmap_and(out, near->cpuset, allowed);
    if (hwloc_bitmap_iszero(out)) {
        snprintf(why, why_bytes, "none of the CPUs near %s may be used by this process", pci_bus_id);
        return 0;
    }
    if (hwloc_bitmap_isequal(out, allowed)) {
        snprintf(why, why_bytes, "every allowed CPU is local to %s", pci_bus_id);
        return 0;
    }
    return 1;
}

static gg_status bind_thread(gg_ctx *ctx) {
    char bus_id[32];
    GG_CUDA_TRY(ctx, cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, ctx->config.device));
    hwloc_topology_t topology;
    if (hwloc_topology_init(&topology) != 0)
        return gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "gg_dist_bind_thread: hwloc_topology_init failed");
    hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* Only the PCI devices' locality is needed, which Linux's sysfs gives (hwloc's linux component): the components
     * that open GPU, OpenCL and display libraries stay off, and libpciaccess's (pci) too; they cost time and memory
     * in a training process for nothing, and some never free theirs (LeakSanitizer sees libpciaccess's). */
    static const char *const unneeded[] = {"cuda", "nvml", "opencl", "gl", "rsmi", "levelzero", "pci"};
    for (size_t i = 0; i < sizeof unneeded / sizeof unneeded[0]; ++i)
        (void)hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unneeded[i]);
    gg_status status = GG_SUCCESS;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    char why[256];
    if (hwloc_topology_load(topology) != 0) {
        gg_log(ctx, GG_LOG_INFO, "gg_dist_bind_thread: binding left alone: hwloc could not load the topology");
    } else if (!gg_affinity_gpu_cpuset(topology, bus_id, set, why, sizeof why)) {
        gg_log(ctx, GG_LOG_INFO, "gg_dist_bind_thread: binding left alone: %s", why);
    } else if (hwloc_set_cpubind(topology, set, HWLOC_CPUBIND_THREAD) != 0) {
        gg_log(ctx, GG_LOG_WARN, "gg_dist_bind_thread: hwloc_set_cpubind failed; binding left alone");
    } else {
        char list[256];
        hwloc_bitmap_list_snprintf(list, sizeof list, set);
        gg_log(ctx, GG_LOG_INFO, "gg_dist_bind_thread: thread bound to CPUs %s near GPU %s", list, bus_id);
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topology);
    return status;
}

/* The call holds the context (nested inside gg_dist_attach / _init_*, which bind when asked): its failures name it,
 * and a second thread is refused rather than logging through a context another thread is using. */
gg_status gg_dist_bind_thread(gg_ctx *ctx) {
    static const char fn[] = "gg_dist_bind_thread";
    if (!ctx) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    GG_TRY(gg_ctx_claim(ctx, fn));
    const gg_status status = bind_thread(ctx);
    gg_ctx_release(ctx);
    return status;
}

void gg_affinity_bind_if_asked(gg_ctx *ctx) {
    (void)gg_dist_bind_thread(ctx); /* logs why when it leaves the binding alone */
}
