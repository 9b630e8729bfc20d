/*
 * tune_cache.h - the persisted choice of cuBLASLt algorithm per GEMM problem: a text file of lines
 *   <key> <workspace bytes> <microseconds> <8 hex words of cublasLtMatmulAlgo_t>
 * (and the measured time of a pass that is not a GEMM, which a block weighs against GEMM times: a key with "|pass|",
 * workspace and algorithm words zero; gg_tune_pass_us)
 * where the key names the GPU, the cuBLASLt and driver versions and the problem (shape, layouts, types), so a
 * file can hold several machines and a library upgrade simply misses. Plain C with no CUDA: tested without a GPU.
 *
 * Saving merges: under a lock it re-reads the file, overlays the entries this process put and replaces the file
 * atomically and durably (write a temporary file, fsync, rename, fsync the directory), so concurrent processes never
 * leave a torn file, and a crash leaves the old file or the new one. The last writer of a key wins: an entry this
 * process only loaded never overwrites the file's (another process may have tuned it again since). A save that cannot
 * read the whole file fails rather than replace it with part of it. Lines this version does not parse (comments,
 * another version's entries) are skipped (and counted, comments aside), never fatal, and kept verbatim by a save, so
 * versions can share one file; a line is parsed only once its newline is there (a cut last line is dropped). The file
 * keeps its permission bits (a new one: 0666 less the umask). Never fatal either way: a cache is an optimization.
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
    double us;       /* the measured time of the chosen algorithm (informational) */
    int put_unsaved; /* put here (gg_tune_cache_put) and not yet saved: only these overwrite the file's entries */
} gg_tune_entry;

typedef struct gg_tune_cache {
    gg_tune_entry *entries;
    size_t count, capacity;
    size_t *index, index_size; /* open addressing over entries by key: slot = entry index + 1, 0 empty */
    char *path;                /* absolute, symbolic links resolved (gg_tune_cache_open); NULL: in memory only */
    char *lock_path;           /* "<path>.lock" */
    const char *failed_path;   /* after a failed save: the file it failed on (path or lock_path), else NULL */
    size_t skipped;            /* lines the last load did not parse (comments and blank lines aside) */
    int lock_wait_ms;          /* how long a save waits for another saver's lock; 0 (gg_tune_cache_open's): 10 s */
} gg_tune_cache;

/* Starts an empty cache bound to path (NULL or "": never touches a file) and loads the file if it exists. The path is
 * made absolute and its symbolic links resolved now (the file's, else its directory's), so a later chdir changes
 * nothing and a save replaces the link's target, not the link. Returns 0, or -1 when memory runs out. A missing or
 * unreadable file is an empty cache, not an error; a relative path whose working directory is gone (removed) binds no
 * file (path NULL: in memory only). */
int gg_tune_cache_open(gg_tune_cache *cache, const char *path);
void gg_tune_cache_close(gg_tune_cache *cache);

/* The entry under key, or NULL. */
const gg_tune_entry *gg_tune_cache_find(const gg_tune_cache *cache, const char *key);
/* Adds or replaces the entry with e's key, marked as this process's (the next save writes it over the file's).
 * Returns 0, or -1 (out of memory, or a key too long or with spaces). */
int gg_tune_cache_put(gg_tune_cache *cache, const gg_tune_entry *e);
/* Merges the cache into its file as described above (creating the file's directory if needed), under an exclusive
 * lock on "<path>.lock" (left beside the file; opened read-only, so users who share the file need only read it), so
 * that concurrent savers in threads or processes all keep their entries; the new file is written under a unique
 * temporary name and renamed over the old. Returns 0 (the entries put are then saved: no longer written over the
 * file's), or -1 with errno set and cache->failed_path naming the file that failed: the file cannot be read whole or
 * written, or the lock cannot be opened or is held past cache->lock_wait_ms (EWOULDBLOCK); the file is then as it was
 * and no temporary file is left. 0 without a path. */
int gg_tune_cache_save(gg_tune_cache *cache);

/* The default file: $GG_TUNE_CACHE, else $XDG_CACHE_HOME/gradgraph/gemm-algos.txt (an absolute XDG_CACHE_HOME only,
 * as the XDG specification says), else $HOME/.cache/gradgraph/gemm-algos.txt, else none. Writes into buf and returns
 * it, or returns NULL. */
const char *gg_tune_cache_default_path(char *buf, size_t size);

#endif
