/*
 * plan_cache.h - the per-context cache of block plans, keyed by everything that changes a plan: the block, its
 * shape, its precision, the SMs it leaves to communication and whether it runs the two-rank split reduction. Plain
 * C with no CUDA, so the keys and the cache are tested on machines without a GPU.
 * Lookups are a hash compare then a full key compare over a small array: a context holds a handful of shapes.
 */
#ifndef GG_PLAN_CACHE_H
#define GG_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef enum gg_block_kind {
    GG_BLOCK_TANH_GATE = 1,
    GG_BLOCK_GELU_FFN = 2,
    GG_BLOCK_MLP = 3,
    GG_BLOCK_SSM_GATE = 4,
    /* the forward passes: plans of their own (other GEMMs, other scratch) */
    GG_BLOCK_TANH_GATE_FWD = 5,
    GG_BLOCK_GELU_FFN_FWD = 6,
    GG_BLOCK_MLP_FWD = 7,
    GG_BLOCK_SSM_GATE_FWD = 8
} gg_block_kind;

typedef struct gg_plan_key {
    int32_t block;     /* gg_block_kind */
    int32_t precision; /* resolved gg_precision (never GG_PRECISION_DEFAULT) */
    int64_t tokens;    /* M */
    int64_t dim0;      /* the block's first hidden dim (H or D) */
    int64_t dim1;      /* the second (F or E), 0 when the block has one */
    int32_t sm_reserve; /* SMs the block's GEMMs leave free for communication (0: none) */
    int32_t pair_split; /* 1: the two-rank split reduction (gg_dist_pair_split): the FFNs' GEMMs in halves */
    int32_t sync_grads; /* 1: the call syncs its gradients (the FFNs' narrow schedule is for local calls only) */
} gg_plan_key;

gg_plan_key gg_plan_key_make(gg_block_kind block, int precision, int64_t tokens, int64_t dim0, int64_t dim1);
uint64_t gg_plan_key_hash(const gg_plan_key *key);
int gg_plan_key_equal(const gg_plan_key *a, const gg_plan_key *b);

typedef void (*gg_plan_destroy_fn)(void *plan, void *user_data);

typedef struct gg_plan_entry {
    gg_plan_key key;
    uint64_t hash;
    void *plan;
} gg_plan_entry;

typedef struct gg_plan_cache {
    gg_plan_entry *entries;
    size_t count;
    size_t capacity;
    gg_plan_destroy_fn destroy; /* called on every plan by gg_plan_cache_clear */
    void *user_data;
} gg_plan_cache;

void gg_plan_cache_init(gg_plan_cache *cache, gg_plan_destroy_fn destroy, void *user_data);
/* The plan stored under key, or NULL. */
void *gg_plan_cache_find(const gg_plan_cache *cache, const gg_plan_key *key);
/* Stores plan under key (which must not be present). Returns 0, or -1 when memory runs out (plan not stored). */
int gg_plan_cache_insert(gg_plan_cache *cache, const gg_plan_key *key, void *plan);
/* Destroys every plan and frees the cache's memory; the cache can be used again afterwards. */
void gg_plan_cache_clear(gg_plan_cache *cache);

#endif
