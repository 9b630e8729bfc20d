/* tune_cache.c - the persisted cuBLASLt algorithm choices (see tune_cache.h). */
#define _DEFAULT_SOURCE /* flock */
#include "tune_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER "# gradgraph cuBLASLt algorithm cache v1: key workspace_bytes us algo[8]"

static int valid_key(const char *key) {
    const size_t n = strlen(key);
    if (n == 0 || n >= GG_TUNE_KEY_BYTES) return 0;
    for (size_t i = 0; i < n; ++i)
        if (key[i] == ' ' || key[i] == '\t' || key[i] == '\n' || key[i] == '\r') return 0;
    return 1;
}

const gg_tune_entry *gg_tune_cache_find(const gg_tune_cache *cache, const char *key) {
    for (size_t i = 0; i < cache->count; ++i)
        if (!strcmp(cache->entries[i].key, key)) return &cache->entries[i];
    return NULL;
}

int gg_tune_cache_put(gg_tune_cache *cache, const gg_tune_entry *e) {
    if (!valid_key(e->key)) return -1;
    gg_tune_entry *old = (gg_tune_entry *)gg_tune_cache_find(cache, e->key);
    if (old) {
        *old = *e;
        return 0;
    }
    if (cache->count == cache->capacity) {
        const size_t cap = cache->capacity ? 2 * cache->capacity : 16;
        gg_tune_entry *grown = realloc(cache->entries, cap * sizeof *grown);
        if (!grown) return -1;
        cache->entries = grown;
        cache->capacity = cap;
    }
    cache->entries[cache->count++] = *e;
    return 0;
}

/* One line into e; 0 on success. */
static int parse_line(const char *line, gg_tune_entry *e) {
    char key[GG_TUNE_KEY_BYTES + 1];
    int used = 0;
    memset(e, 0, sizeof *e);
    if (sscanf(line, "%256s %" SCNu64 " %lf%n", key, &e->workspace_bytes, &e->us, &used) != 3) return -1;
    if (strlen(key) >= GG_TUNE_KEY_BYTES) return -1;
    strcpy(e->key, key);
    const char *p = line + used;
    for (int i = 0; i < GG_TUNE_ALGO_WORDS; ++i) {
        int n = 0;
        if (sscanf(p, "%" SCNx64 "%n", &e->algo[i], &n) != 1) return -1;
        p += n;
    }
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') ++p;
    return *p ? -1 : 0; /* trailing garbage: not a line this version wrote */
}

/* Adds the file's entries to cache, keeping entries already present when keep_existing. */
static int load_file(gg_tune_cache *cache, const char *path, int keep_existing, size_t *skipped) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        gg_tune_entry e;
        if (!strchr(line, '\n') && !feof(f)) { /* longer than any line we write: skip the rest of it */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n') {
            }
            ++*skipped;
            continue;
        }
        if (parse_line(line, &e) != 0) {
            ++*skipped;
            continue;
        }
        if (keep_existing && gg_tune_cache_find(cache, e.key)) continue;
        if (gg_tune_cache_put(cache, &e) != 0) {
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

int gg_tune_cache_open(gg_tune_cache *cache, const char *path) {
    memset(cache, 0, sizeof *cache);
    if (!path || !*path) return 0;
    cache->path = strdup(path);
    if (!cache->path) return -1;
    return load_file(cache, path, 0, &cache->skipped);
}

void gg_tune_cache_close(gg_tune_cache *cache) {
    free(cache->entries);
    free(cache->path);
    memset(cache, 0, sizeof *cache);
}

/* mkdir -p of path's directory. */
static void make_parent_dirs(const char *path) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return;
    for (char *p = dir + 1; *p; ++p) {
        if (*p != '/') continue;
        *p = 0;
        (void)mkdir(dir, 0755); /* EEXIST is fine; any real failure shows when the file is opened */
        *p = '/';
    }
}

/* An exclusive flock on "<path>.lock", held while a save reads the file, merges and replaces it: concurrent savers
 * (threads or processes) then never overwrite each other's entries. Waits up to wait_ms (0: GG_TUNE_LOCK_WAIT_MS) for
 * a holder (the cache is an optimization: a save that cannot lock fails rather than waits without limit). Returns the
 * lock's file descriptor (close it to unlock), or -1. */
#define GG_TUNE_LOCK_WAIT_MS 10000
static int lock_cache(const char *path, int wait_ms) {
    if (wait_ms <= 0) wait_ms = GG_TUNE_LOCK_WAIT_MS;
    char lock[4200];
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock) return -1;
    const int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    for (int waited_ms = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; waited_ms += 5) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || waited_ms >= wait_ms) {
            const int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return fd;
}

/* Writes the merged entries to a new temporary file beside path (a unique name per call: mkstemp) and renames it
 * over path. Returns 0, or -1 with errno and no temporary file left behind. */
static int replace_file(const gg_tune_cache *merged, const char *path) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const int fd = mkstemp(tmp);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        const int saved = errno;
        close(fd);
        (void)unlink(tmp);
        errno = saved;
        return -1;
    }
    int bad = fchmod(fd, 0644) != 0 || fprintf(f, "%s\n", HEADER) < 0;
    for (size_t i = 0; i < merged->count && !bad; ++i) {
        const gg_tune_entry *e = &merged->entries[i];
        bad |= fprintf(f, "%s %" PRIu64 " %.2f", e->key, e->workspace_bytes, e->us) < 0;
        for (int w = 0; w < GG_TUNE_ALGO_WORDS; ++w) bad |= fprintf(f, " %" PRIx64, e->algo[w]) < 0;
        bad |= fputc('\n', f) == EOF;
    }
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        const int saved = errno;
        (void)unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

int gg_tune_cache_save(const gg_tune_cache *cache) {
    if (!cache->path) return 0;
    make_parent_dirs(cache->path);
    const int lock = lock_cache(cache->path, cache->lock_wait_ms);
    if (lock < 0) return -1;
    gg_tune_cache merged = {0};
    size_t skipped = 0;
    int rc = 0;
    for (size_t i = 0; i < cache->count && rc == 0; ++i) rc = gg_tune_cache_put(&merged, &cache->entries[i]);
    if (rc == 0) rc = load_file(&merged, cache->path, 1, &skipped);
    if (rc != 0) errno = ENOMEM;
    else rc = replace_file(&merged, cache->path);
    const int saved = errno;
    gg_tune_cache_close(&merged);
    close(lock);
    errno = saved;
    return rc;
}

const char *gg_tune_cache_default_path(char *buf, size_t size) {
    const char *env = getenv("GG_TUNE_CACHE");
    int n = -1;
    if (env) return snprintf(buf, size, "%s", env) < (int)size ? buf : NULL; /* "" means: no file */
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        n = snprintf(buf, size, "%s/gradgraph/gemm-algos.txt", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/gradgraph/gemm-algos.txt", home);
    return n > 0 && n < (int)size ? buf : NULL;
}
