/*
 * guard.h - misuse a context detects: host memory passed as a device pointer, or a buffer that ends before the call
 * says (one cudaPointerGetAttributes per new address, a tensor's first and last byte, then a lookup in the context's
 * set of addresses known to be device memory), and two threads using one context at once (the context is claimed by
 * a thread for the length of each public call).
 */
#ifndef GG_GUARD_H
#define GG_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

/* Addresses a context remembers as device memory: the first and last bytes of every tensor of a few dozen layers'
 * calls and graphs, looked up in constant time. A power of two. */
#define GG_KNOWN_DEVICE_PTRS 2048

typedef struct gg_guard {
    /* addresses cudaPointerGetAttributes found to be device or managed memory: an open-addressing set (NULL: an
     * empty slot), emptied when three quarters full (a program that keeps making new buffers starts over) */
    const void *known[GG_KNOWN_DEVICE_PTRS];
    unsigned n_known;
    _Atomic uintptr_t owner;                 /* the thread inside a public call of the context, 0 when none */
    int depth;                               /* the owner's nested claims (written by the owner only) */
    const char *fn;                          /* the public call the owner is in (its outermost claim's) */
    int entry_cuda_error;                    /* a CUDA error was pending on the owner's thread at its outermost
                                              * claim (a teardown's: any other call is refused then): the
                                              * application's, which gradgraph leaves for it to read */
} gg_guard;

#endif
