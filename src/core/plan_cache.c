/* plan_cache.c - the per-context cache of block plans (see plan_cache.h): plain C, tested without a GPU. */
#include "plan_cache.h"

#include <stdlib.h>
#include <string.h>

gg_plan_key gg_plan_key_make(gg_block_kind block, int precision, int64_t tokens, int64_t dim0, int64_t dim1) {
    gg_plan_key key;
    memset(&key, 0, sizeof key);
    key.block = (int32_t)block;
    key.precision = (int32_t)precision;
    key.tokens = tokens;
    key.dim0 = dim0;
    key.dim1 = dim1;
    return key;
}

uint64_t gg_plan_key_hash(const gg_plan_key *key) {
    /* FNV-1a over the fields' values (not the struct's bytes: a copied key's padding is not guaranteed to stay zero),
     * the same fields gg_plan_key_equal compares. */
    const int64_t fields[] = {key->block, key->precision, key->tokens, key->dim0, key->dim1, key->sm_reserve,
                              key->pair_split, key->sync_grads};
    uint64_t h = 1469598103934665603ull;
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; ++f)
        for (int b = 0; b < 8; ++b) {
            h ^= (uint64_t)(fields[f] >> (8 * b)) & 0xffu;
            h *= 1099511628211ull;
        }
    return h;
}

int gg_plan_key_equal(const gg_plan_key *a, const gg_plan_key *b) {
    return a->block == b->block && a->precision == b->precision && a->tokens == b->tokens && a->dim0 == b->dim0 &&
           a->dim1 == b->dim1 && a->sm_reserve == b->sm_reserve && a->pair_split == b->pair_split &&
           a->sync_grads == b->sync_grads;
}

void gg_plan_cache_init(gg_plan_cache *cache, gg_plan_destroy_fn destroy, void *user_data) {
    memset(cache, 0, sizeof *cache);
    cache->destroy = destroy;
    cache->user_data = user_data;
}

void *gg_plan_cache_find(const gg_plan_cache *cache, const gg_plan_key *key) {
    uint64_t h = gg_plan_key_hash(key);
    for (size_t i = 0; i < cache->count; ++i)
        if (cache->entries[i].hash == h && gg_plan_key_equal(&cache->entries[i].key, key))
            return cache->entries[i].plan;
    return NULL;
}

int gg_plan_cache_insert(gg_plan_cache *cache, const gg_plan_key *key, void *plan) {
    if (cache->count == cache->capacity) {
        size_t capacity = cache->capacity ? 2 * cache->capacity : 8;
        gg_plan_entry *grown = realloc(cache->entries, capacity * sizeof *grown);
        if (!grown) return -1;
        cache->entries = grown;
        cache->capacity = capacity;
    }
    gg_plan_entry *e = &cache->entries[cache->count++];
    e->key = *key;
    e->hash = gg_plan_key_hash(key);
    e->plan = plan;
    return 0;
}

void gg_plan_cache_clear(gg_plan_cache *cache) {
    for (size_t i = 0; i < cache->count; ++i)
        if (cache->destroy) cache->destroy(cache->entries[i].plan, cache->user_data);
    free(cache->entries);
    cache->entries = NULL;
    cache->count = cache->capacity = 0;
}
