/*
 * exec_cache.h - the executable graphs a bucket keeps, one per pointer set (rebinding without copies): a small
 * LRU keyed by every pointer the graph captured plus the flags that change what was captured. Plain C; the
 * graph code owns the execs, this only finds them and picks the slot to reuse.
 */
#ifndef GG_EXEC_CACHE_H
#define GG_EXEC_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define GG_EXEC_KEY_PTRS 12

typedef struct gg_exec_key {
    const void *ptr[GG_EXEC_KEY_PTRS]; /* the call's tensors */
    int64_t tokens;                    /* the call's M (padded graphs copy exactly M rows) */
    int32_t flags;                     /* accumulate, silu, padded, device-selected */
    int32_t unused;                    /* keeps the key free of padding bytes */
} gg_exec_key;

typedef struct gg_exec_entry {
    gg_exec_key key;
    uint64_t generation; /* the context's scratch generation the graph was captured against */
    uint64_t last_used;
    void *exec;          /* cudaGraphExec_t, or NULL while the slot is free */
    size_t bytes;        /* device memory the instantiation took */
} gg_exec_entry;

typedef struct gg_exec_cache {
    gg_exec_entry *entries;
    int capacity;
    uint64_t clock;
} gg_exec_cache;

/* Returns 0, or -1 when out of host memory. capacity >= 1. */
int gg_exec_cache_init(gg_exec_cache *cache, int capacity);
void gg_exec_cache_free(gg_exec_cache *cache); /* the caller destroys the execs first */

/* The entry for key captured against generation, marked as just used; NULL if none. */
gg_exec_entry *gg_exec_cache_find(gg_exec_cache *cache, const gg_exec_key *key, uint64_t generation);

/* The slot a new graph goes to: a free one if any (exec NULL), else the least recently used (exec set: update or
 * replace it). The slot's key, generation and last_used are set for the new graph. */
gg_exec_entry *gg_exec_cache_slot(gg_exec_cache *cache, const gg_exec_key *key, uint64_t generation);

int gg_exec_key_equal(const gg_exec_key *a, const gg_exec_key *b);

#endif
