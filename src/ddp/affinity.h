/*
 * affinity.h - where a GPU's host thread should run: the CPUs near the GPU's PCI device, from hwloc's topology.
 * The decision is a pure function of a topology, so it is tested on XML fixtures (tests/data/topology/).
 */
#ifndef GG_AFFINITY_H
#define GG_AFFINITY_H

#include <stddef.h>

#include "internal.h"

/* Binds the calling thread near ctx's GPU (gg_dist_bind_thread) when a communicator is put on ctx with bind_cpus;
 * in a build without hwloc, says so at INFO level (the default config asks for it, so this is no error). */
void gg_affinity_bind_if_asked(gg_ctx *ctx);

#ifdef GG_HAVE_HWLOC
#include <hwloc.h>

/* Sets `out` to the CPUs of the closest non-I/O ancestor of PCI device pci_bus_id ("0000:17:00.0"), within the
 * topology's allowed CPUs, and returns 1 when the thread should be bound there. Returns 0, with the reason in
 * why, when the binding is better left alone: the device is not in the topology, it has no CPU locality, or
 * every allowed CPU is local to it (binding would change nothing). */
int gg_affinity_gpu_cpuset(hwloc_topology_t topology, const char *pci_bus_id, hwloc_bitmap_t out, char *why,
                           size_t why_bytes);
#endif

#endif
