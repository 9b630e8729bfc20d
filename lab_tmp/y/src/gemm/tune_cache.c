/* tune_cache.c - the persisted cuBLASLt algorithm choices (see tune_cache.h). */
#define _POSIX_C_SOURCE 200809L
#include "tune_cache.h"

#include <errno.h>
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

int gg_tune_cache_save(const gg_tune_cache *cache) {
    if (!cache->path) return 0;
    gg_tune_cache merged = {0};
    size_t skipped = 0;
    for (size_t i = 0; i < cache->count; ++i)
        if (gg_tune_cache_put(&merged, &cache->entries[i]) != 0) goto nomem;
    if (load_file(&merged, cache->path, 1, &skipped) != 0) goto nomem;
    make_parent_dirs(cache->path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", cache->path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        gg_tune_cache_close(&merged);
        return -1;
    }
    int bad = fprintf(f, "%s\n", HEADER) < 0;
    for (size_t i = 0; i < merged.count && !bad; ++i) {
        const gg_tune_entry *e = &merged.entries[i];
        bad |= fprintf(f, "%s %" PRIu64 " %.2f", e->key, e->workspace_bytes, e->us) < 0;
        for (int w = 0; w < GG_TUNE_ALGO_WORDS; ++w) bad |= fprintf(f, " %" PRIx64, e->algo[w]) < 0;
        bad |= fputc('\n', f) == EOF;
    }
    bad |= fclose(f) != 0;
    gg_tune_cache_close(&merged);
    if (bad || rename(tmp, cache->path) != 0) {
        const int saved = errno;
        (void)unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
nomem:
    gg_tune_cache_close(&merged);
    errno = ENOMEM;
    return -1;
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
