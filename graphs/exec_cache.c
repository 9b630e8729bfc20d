/* exec_cache.c - per-bucket LRU of executable graphs keyed by pointer set, and the ids of wide pointer sets. */
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

const gg_exec_entry *gg_exec_cache_latest(const gg_exec_cache *c) {
    const gg_exec_entry *last = NULL;
    for (int i = 0; i < c->capacity; ++i) {
        const gg_exec_entry *e = &c->entries[i];
        if (e->exec && (!last || e->last_used > last->last_used)) last = e;
    }
    return last;
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

int gg_ptrset_init(gg_ptrset_table *t, int capacity, int width) {
    memset(t, 0, sizeof *t);
    t->ptrs = calloc((size_t)capacity * (size_t)width, sizeof *t->ptrs);
    t->id = calloc((size_t)capacity, sizeof *t->id);
    t->last_used = calloc((size_t)capacity, sizeof *t->last_used);
    if (!t->ptrs || !t->id || !t->last_used) {
        gg_ptrset_free(t);
        return -1;
    }
    t->capacity = capacity;
    t->width = width;
    return 0;
}

void gg_ptrset_free(gg_ptrset_table *t) {
    free(t->ptrs);
    free(t->id);
    free(t->last_used);
    memset(t, 0, sizeof *t);
}

uint64_t gg_ptrset_id(gg_ptrset_table *t, const void *const *ptrs) {
    const size_t row_bytes = sizeof *t->ptrs * (size_t)t->width;
    int slot = -1;
    for (int r = 0; r < t->capacity; ++r) {
        if (t->id[r] && memcmp(t->ptrs + (size_t)r * (size_t)t->width, ptrs, row_bytes) == 0) {
            t->last_used[r] = ++t->clock;
            return t->id[r];
        }
        /* the row a new set takes: the first free one, else the least recently used */
        if (slot < 0 || (t->id[slot] && (!t->id[r] || t->last_used[r] < t->last_used[slot]))) slot = r;
    }
    memcpy(t->ptrs + (size_t)slot * (size_t)t->width, ptrs, row_bytes);
    t->id[slot] = ++t->next_id;
    t->last_used[slot] = ++t->clock;
    return t->id[slot];
}
