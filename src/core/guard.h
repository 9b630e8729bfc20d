/*
 * guard.h - misuse a context detects: host memory passed as a device pointer (one cudaPointerGetAttributes per new
 * pointer, then a lookup in the context's cache of pointers known to be device memory) and two threads using one
 * context at once (the context is claimed by a thread for the length of each public call).
 */
#ifndef GG_GUARD_H
#define GG_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

#define GG_KNOWN_DEVICE_PTRS 128 /* device pointers a context remembers (enough for several graphs' pointer sets) */

typedef struct gg_guard {
    const void *known[GG_KNOWN_DEVICE_PTRS]; /* pointers cudaPointerGetAttributes found to be device or managed */
    unsigned next;                           /* the slot the next new pointer takes (a ring: the oldest goes) */
    _Atomic uintptr_t owner;                 /* the thread inside a public call of the context, 0 when none */
    int depth;                               /* the owner's nested claims (written by the owner only) */
    const char *fn;                          /* the public call the owner is in (its outermost claim's) */
} gg_guard;

#endif
