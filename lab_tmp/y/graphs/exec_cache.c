/* exec_cache.c - per-bucket LRU of executable graphs keyed by pointer set. */
#include "exec_cache.h"

#include <stdlib.h>
#include <string.h>

int gg_exec_cache_init(gg_exec_cache *c, int capacity) {
    memset(c, 0, sizeof *c);
    c->entries = calloc((size_t)capacity, sizeof *c->entries);
    if (!c->entries) return -1;
    c->capacity = capacity;
    return 0;
}

void gg_exec_cache_free(gg_exec_cache *c) {
    free(c->entries);
    memset(c, 0, sizeof *c);
}

int gg_exec_key_equal(const gg_exec_key *a, const gg_exec_key *b) { return memcmp(a, b, sizeof *a) == 0; }

gg_exec_entry *gg_exec_cache_find(gg_exec_cache *c, const gg_exec_key *key, uint64_t generation) {
    for (int i = 0; i < c->capacity; ++i) {
        gg_exec_entry *e = &c->entries[i];
        if (e->exec && e->generation == generation && gg_exec_key_equal(&e->key, key)) {
            e->last_used = ++c->clock;
            return e;
        }
    }
    return NULL;
}

gg_exec_entry *gg_exec_cache_slot(gg_exec_cache *c, const gg_exec_key *key, uint64_t generation) {
    gg_exec_entry *slot = NULL;
    for (int i = 0; i < c->capacity && !slot; ++i)
        if (!c->entries[i].exec) slot = &c->entries[i];
    if (!slot) { /* none free: the least recently used */
        slot = &c->entries[0];
        for (int i = 1; i < c->capacity; ++i)
            if (c->entries[i].last_used < slot->last_used) slot = &c->entries[i];
    }
    slot->key = *key;
    slot->generation = generation;
    slot->last_used = ++c->clock;
    return slot;
}
