/*
 * tune_cache.h - the persisted choice of cuBLASLt algorithm per GEMM problem: a text file of lines
 *   <key> <workspace bytes> <microseconds> <16 hex words of cublasLtMatmulAlgo_t>
 * where the key names the GPU, the cuBLASLt and driver versions and the problem (shape, layouts, types), so a
 * file can hold several machines and a library upgrade simply misses. Plain C with no CUDA: tested without a GPU.
 *
 * Saving merges: it re-reads the file, overlays this process's entries and replaces the file atomically
 * (write a temporary file, rename), so concurrent processes never leave a torn file; the last writer of a key wins.
 * Malformed lines are skipped (and counted), never fatal: a cache is an optimization.
 */
#ifndef GG_TUNE_CACHE_H
#define GG_TUNE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define GG_TUNE_KEY_BYTES 256
#define GG_TUNE_ALGO_WORDS 8 /* sizeof(cublasLtMatmulAlgo_t) / 8 */

typedef struct gg_tune_entry {
    char key[GG_TUNE_KEY_BYTES];
    uint64_t algo[GG_TUNE_ALGO_WORDS];
    uint64_t workspace_bytes;
    double us; /* the measured time of the chosen algorithm (informational) */
} gg_tune_entry;

typedef struct gg_tune_cache {
    gg_tune_entry *entries;
    size_t count, capacity;
    char *path;       /* NULL: in memory only */
    size_t skipped;   /* malformed lines seen by the last load */
    int lock_wait_ms; /* how long a save waits for another saver's lock; 0 (gg_tune_cache_open's): 10 s */
} gg_tune_cache;

/* Starts an empty cache bound to path (NULL or "": never touches a file) and loads the file if it exists.
 * Returns 0, or -1 when memory runs out. A missing or unreadable file is an empty cache, not an error. */
int gg_tune_cache_open(gg_tune_cache *cache, const char *path);
void gg_tune_cache_close(gg_tune_cache *cache);

/* The entry under key, or NULL. */
const gg_tune_entry *gg_tune_cache_find(const gg_tune_cache *cache, const char *key);
/* Adds or replaces the entry with e's key. Returns 0, or -1 (out of memory, or a key too long or with spaces). */
int gg_tune_cache_put(gg_tune_cache *cache, const gg_tune_entry *e);
/* Merges the cache into its file as described above (creating the file's directory if needed), under an exclusive
 * lock on "<path>.lock" (left beside the file), so that concurrent savers in threads or processes all keep their
 * entries; the new file is written under a unique temporary name and renamed over the old. Returns 0, or -1 with
 * errno set when the file cannot be written or the lock is held past cache->lock_wait_ms (EWOULDBLOCK); 0 without a
 * path. */
int gg_tune_cache_save(const gg_tune_cache *cache);

/* The default file: $GG_TUNE_CACHE, else $XDG_CACHE_HOME/gradgraph/gemm-algos.txt, else
 * $HOME/.cache/gradgraph/gemm-algos.txt, else none. Writes into buf and returns it, or returns NULL. */
const char *gg_tune_cache_default_path(char *buf, size_t size);

#endif
