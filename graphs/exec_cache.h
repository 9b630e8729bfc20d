/*
 * exec_cache.h - the executable graphs a bucket keeps, one per pointer set (rebinding without copies): a small
 * LRU keyed by every pointer the graph captured plus the flags that change what was captured. Plain C; the
 * graph code owns the execs, this only finds them and picks the slot to reuse.
 */
#ifndef GG_EXEC_CACHE_H
#define GG_EXEC_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define GG_EXEC_KEY_PTRS 17 /* GG_BLOCK_MAX_TENSORS */

typedef struct gg_exec_key {
    const void *ptr[GG_EXEC_KEY_PTRS]; /* the call's tensors */
    const void *device_tokens;         /* a device-selected graph's token count's address; NULL otherwise */
    int64_t tokens;                    /* the call's M (padded graphs copy exactly M rows) */
    int32_t flags;                     /* accumulate, silu, padded, device-selected */
    int32_t unused;                    /* keeps the key free of padding bytes */
} gg_exec_key;

typedef struct gg_exec_entry {
    gg_exec_key key;
    uint64_t generation; /* the context's capture generation the graph was captured against */
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

/* The most recently used entry that holds an exec (what the bucket's last run launched); NULL if none. */
const gg_exec_entry *gg_exec_cache_latest(const gg_exec_cache *cache);

/* The slot a new graph goes to: a free one if any (exec NULL), else the least recently used (exec set: update or
 * replace it). The slot's key, generation and last_used are set for the new graph. */
gg_exec_entry *gg_exec_cache_slot(gg_exec_cache *cache, const gg_exec_key *key, uint64_t generation);

int gg_exec_key_equal(const gg_exec_key *a, const gg_exec_key *b);

/* Pointer sets wider than a key (a step graph's: every pointer of every block call), each named by an id that is
 * never given to another set, so that a key can hold the id instead of the pointers. The table remembers `capacity`
 * sets of `width` pointers, the least recently asked for forgotten first; a forgotten set asked for again gets a new
 * id (its old execs are then never found again, and their slots are reused as the least recently used). */
typedef struct gg_ptrset_table {
    const void **ptrs;   /* capacity rows of width pointers */
    uint64_t *id;        /* per row: the set's id, 0 while the row is free */
    uint64_t *last_used; /* per row */
    int capacity, width;
    uint64_t next_id, clock;
} gg_ptrset_table;

/* Returns 0, or -1 when out of host memory. capacity >= 1, width >= 1. */
int gg_ptrset_init(gg_ptrset_table *table, int capacity, int width);
void gg_ptrset_free(gg_ptrset_table *table); /* a zeroed table too */

/* The id of the set ptrs[0 .. width-1] (ids start at 1): the one it has if the table remembers it, else a new one
 * (the set takes a free row or the least recently used one). */
uint64_t gg_ptrset_id(gg_ptrset_table *table, const void *const *ptrs);

#endif
