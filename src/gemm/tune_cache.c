/* tune_cache.c - the persisted cuBLASLt algorithm choices (see tune_cache.h). */
#define _DEFAULT_SOURCE /* flock, realpath, getline */
#include "tune_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEADER "# gradgraph cuBLASLt algorithm cache v1: key workspace_bytes us algo[8]"

static int valid_key(const char *key) {
    const size_t n = strlen(key);
    if (n == 0 || n >= GG_TUNE_KEY_BYTES) return 0;
    for (size_t i = 0; i < n; ++i)
        if (key[i] == ' ' || key[i] == '\t' || key[i] == '\n' || key[i] == '\r') return 0;
    return 1;
}

/* FNV-1a: the hash of the lookup tables (keys and kept lines). */
static size_t hash_bytes(const char *bytes, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)bytes[i]) * 1099511628211ull;
    return (size_t)h;
}

/* Open addressing tables (a linear scan made loading and saving 20 000 entries take seconds): slots hold an item's
 * index + 1 (0: empty), a power of two at least twice the items, so a probe always ends on an empty slot. */
static size_t *grown_table(size_t items, size_t *size) {
    size_t n = 64;
    while (n < 2 * (items + 1)) n *= 2;
    size_t *slots = calloc(n, sizeof *slots);
    if (slots) *size = n;
    return slots;
}

/* The slot of key in the entries' table: the entry's, or the empty one where it would go. */
static size_t key_slot(const gg_tune_cache *cache, const char *key) {
    const size_t mask = cache->index_size - 1;
    size_t s = hash_bytes(key, strlen(key)) & mask;
    while (cache->index[s] && strcmp(cache->entries[cache->index[s] - 1].key, key)) s = (s + 1) & mask;
    return s;
}

/* Makes room in the table for one more entry (rebuilt larger when half full). Returns 0, or -1 (out of memory). */
static int reserve_index(gg_tune_cache *cache) {
    if (cache->index && 2 * (cache->count + 1) <= cache->index_size) return 0;
    size_t size = 0;
    size_t *slots = grown_table(cache->count + 1, &size);
    if (!slots) return -1;
    free(cache->index);
    cache->index = slots;
    cache->index_size = size;
    for (size_t i = 0; i < cache->count; ++i) cache->index[key_slot(cache, cache->entries[i].key)] = i + 1;
    return 0;
}

const gg_tune_entry *gg_tune_cache_find(const gg_tune_cache *cache, const char *key) {
    if (!cache->index) return NULL;
    const size_t slot = cache->index[key_slot(cache, key)];
    return slot ? &cache->entries[slot - 1] : NULL;
}

/* Adds or replaces e (its put_unsaved mark as given). */
static int add_entry(gg_tune_cache *cache, const gg_tune_entry *e) {
    if (!valid_key(e->key)) return -1;
    gg_tune_entry *old = (gg_tune_entry *)gg_tune_cache_find(cache, e->key);
    if (old) {
        *old = *e;
        return 0;
    }
    if (reserve_index(cache) != 0) return -1;
    if (cache->count == cache->capacity) {
        const size_t cap = cache->capacity ? 2 * cache->capacity : 16;
        gg_tune_entry *grown = realloc(cache->entries, cap * sizeof *grown);
        if (!grown) return -1;
        cache->entries = grown;
        cache->capacity = cap;
    }
    cache->index[key_slot(cache, e->key)] = cache->count + 1;
    cache->entries[cache->count++] = *e;
    return 0;
}

int gg_tune_cache_put(gg_tune_cache *cache, const gg_tune_entry *e) {
    gg_tune_entry mine = *e;
    mine.put_unsaved = 1;
    return add_entry(cache, &mine);
}

/* The lines of the file a save keeps as they are (comments, other versions' entries), in the file's order, each
 * once. */
typedef struct kept_lines {
    char **lines;
    size_t *lengths; /* with the newline */
    size_t count, capacity;
    size_t *index, index_size; /* as gg_tune_cache's */
} kept_lines;

static size_t line_slot(const kept_lines *k, const char *line, size_t n) {
    const size_t mask = k->index_size - 1;
    size_t s = hash_bytes(line, n) & mask;
    while (k->index[s] && (k->lengths[k->index[s] - 1] != n || memcmp(k->lines[k->index[s] - 1], line, n)))
        s = (s + 1) & mask;
    return s;
}

static int keep_line(kept_lines *k, const char *line, size_t n) {
    if (k->index && k->index[line_slot(k, line, n)]) return 0; /* a duplicate: once is enough */
    if (!k->index || 2 * (k->count + 1) > k->index_size) {
        size_t size = 0;
        size_t *slots = grown_table(k->count + 1, &size);
        if (!slots) return -1;
        free(k->index);
        k->index = slots;
        k->index_size = size;
        for (size_t i = 0; i < k->count; ++i) k->index[line_slot(k, k->lines[i], k->lengths[i])] = i + 1;
    }
    if (k->count == k->capacity) {
        const size_t cap = k->capacity ? 2 * k->capacity : 16;
        char **lines = realloc(k->lines, cap * sizeof *lines);
        if (!lines) return -1;
        k->lines = lines;
        size_t *lengths = realloc(k->lengths, cap * sizeof *lengths);
        if (!lengths) return -1;
        k->lengths = lengths;
        k->capacity = cap;
    }
    char *copy = malloc(n);
    if (!copy) return -1;
    memcpy(copy, line, n);
    k->index[line_slot(k, line, n)] = k->count + 1;
    k->lines[k->count] = copy;
    k->lengths[k->count++] = n;
    return 0;
}

static void free_kept(kept_lines *k) {
    for (size_t i = 0; i < k->count; ++i) free(k->lines[i]);
    free(k->lines);
    free(k->lengths);
    free(k->index);
    memset(k, 0, sizeof *k);
}

/* One line (NUL-terminated, without its newline) into e; 0 on success. */
static int parse_line(const char *line, gg_tune_entry *e) {
    char key[GG_TUNE_KEY_BYTES + 1];
    int used = 0;
    memset(e, 0, sizeof *e);
    if (sscanf(line, "%256s %" SCNu64 " %lf%n", key, &e->workspace_bytes, &e->us, &used) != 3) return -1;
    if (strlen(key) >= GG_TUNE_KEY_BYTES) return -1;
    memcpy(e->key, key, strlen(key) + 1);
    const char *p = line + used;
    for (int i = 0; i < GG_TUNE_ALGO_WORDS; ++i) {
        int n = 0;
        if (sscanf(p, "%" SCNx64 "%n", &e->algo[i], &n) != 1) return -1;
        p += n;
    }
    while (*p == ' ' || *p == '\t' || *p == '\r') ++p;
    return *p ? -1 : 0; /* trailing garbage: not a line this version wrote */
}

/* What reading a file found besides its entries. */
typedef struct file_read {
    size_t skipped;   /* lines not parsed (comments and blank lines aside) */
    kept_lines *kept; /* where those to keep go (NULL: nowhere) */
    mode_t mode;      /* the file's permission bits, if it exists */
    int exists;
} file_read;

/* One line of n bytes, its newline included if it has one. Returns 0, or -1 (out of memory). */
static int take_line(gg_tune_cache *cache, char *line, size_t n, file_read *r) {
    if (n == 0 || line[n - 1] != '\n') { /* cut short (a writer that died, an editor): its last word may be too */
        ++r->skipped;
        return 0;
    }
    if (n == 1 || (n == sizeof HEADER && !memcmp(line, HEADER, n - 1))) return 0; /* blank, or ours: rewritten */
    gg_tune_entry e;
    line[n - 1] = '\0';
    const int parsed = !memchr(line, '\0', n - 1) && parse_line(line, &e) == 0; /* a NUL: not text we wrote */
    line[n - 1] = '\n';
    if (parsed) return add_entry(cache, &e);
    if (line[0] != '#') ++r->skipped;
    return r->kept ? keep_line(r->kept, line, n) : 0;
}

/* Adds the entries of the file at path to cache (replacing those with the same keys, marked as not put here). A
 * missing file is an empty one. Returns 0, or -1 with errno: the file could not be opened or read whole (ENOMEM when
 * memory ran out), and then what it holds must not replace the file. */
static int read_file(gg_tune_cache *cache, const char *path, file_read *r) {
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        r->exists = 1;
        r->mode = st.st_mode & 0777;
    }
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &size, f)) >= 0)
        if (take_line(cache, line, (size_t)n, r) != 0) {
            errno = ENOMEM;
            rc = -1;
        }
    if (rc == 0 && (ferror(f) || !feof(f))) rc = -1; /* a read error, or out of memory: getline set errno */
    const int saved = errno;
    free(line);
    fclose(f);
    errno = saved;
    return rc;
}

/* path as an absolute one, or NULL (out of memory, or the working directory of a relative path is gone:
 * gg_tune_cache_open checks that first). */
static char *absolute_path(const char *path) {
    char cwd[PATH_MAX];
    if (path[0] == '/') return strdup(path);
    if (!getcwd(cwd, sizeof cwd)) return NULL;
    char *full = malloc(strlen(cwd) + strlen(path) + 2);
    if (full) sprintf(full, "%s/%s", cwd, path);
    return full;
}

/* Follows the symbolic links of an absolute path's last component, and resolves its directory's, so that a save
 * replaces what the path names rather than the link: realpath if the file exists; else (a file to create, perhaps
 * through a dangling link) the directory resolved, plus the name. Returns a new string, or NULL (out of memory). */
#define MAX_LINK_HOPS 40 /* the kernel's own limit (ELOOP) */
static char *resolved_path(const char *path) {
    char buf[PATH_MAX];
    if (realpath(path, buf)) return strdup(buf);
    char *p = absolute_path(path);
    if (!p) return NULL;
    for (int hop = 0; hop < MAX_LINK_HOPS; ++hop) {
        const ssize_t n = readlink(p, buf, sizeof buf - 1);
        if (n < 0) break; /* not a link (or gone): p names the file */
        buf[n] = '\0';
        const size_t dir = buf[0] == '/' ? 0 : (size_t)(strrchr(p, '/') - p) + 1; /* a relative target: beside p */
        char *next = malloc(dir + (size_t)n + 1);
        if (!next) {
            free(p);
            return NULL;
        }
        memcpy(next, p, dir);
        memcpy(next + dir, buf, (size_t)n + 1);
        free(p);
        p = next;
    }
    char *slash = strrchr(p, '/');
    *slash = '\0';
    const int resolved = realpath(*p ? p : "/", buf) != NULL;
    *slash = '/';
    if (!resolved) return p; /* the directory does not exist yet (a save makes it) */
    char *full = malloc(strlen(buf) + strlen(slash) + 1);
    if (full) sprintf(full, "%s%s", strcmp(buf, "/") ? buf : "", slash);
    free(p);
    return full;
}

static char *with_suffix(const char *path, const char *suffix) {
    char *s = malloc(strlen(path) + strlen(suffix) + 1);
    if (s) sprintf(s, "%s%s", path, suffix);
    return s;
}

int gg_tune_cache_open(gg_tune_cache *cache, const char *path) {
    memset(cache, 0, sizeof *cache);
    if (!path || !*path) return 0;
    char cwd[PATH_MAX];
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) return 0; /* a relative path without a working directory: no file */
    cache->path = resolved_path(path);
    if (!cache->path) return -1;
    cache->lock_path = with_suffix(cache->path, ".lock");
    if (!cache->lock_path) return -1;
    file_read r = {0};
    const int rc = read_file(cache, cache->path, &r);
    cache->skipped = r.skipped;
    return rc != 0 && errno == ENOMEM ? -1 : 0; /* an unreadable file: no cache this time */
}

void gg_tune_cache_close(gg_tune_cache *cache) {
    free(cache->entries);
    free(cache->index);
    free(cache->path);
    free(cache->lock_path);
    memset(cache, 0, sizeof *cache);
}

/* mkdir -p of path's directory. Returns 0 once it exists, or -1 with errno. */
static int make_parent_dirs(const char *path) {
    char *dir = strdup(path);
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    *strrchr(dir, '/') = '\0';
    for (char *p = dir + 1; *p; ++p) {
        if (*p != '/') continue;
        *p = 0;
        (void)mkdir(dir, 0777); /* EEXIST is fine; a real failure shows in the check below */
        *p = '/';
    }
    int rc = 0;
    struct stat st;
    if (*dir && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        rc = -1; /* why it cannot be made (EACCES, ENOTDIR: a parent is a file, ...) */
    } else if (*dir && stat(dir, &st) != 0) {
        rc = -1;
    } else if (*dir && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        rc = -1;
    }
    const int saved = errno;
    free(dir);
    errno = saved;
    return rc;
}

/* The lock file's descriptor: read-write where this user may (an exclusive flock on NFS, which emulates it with
 * fcntl locks, needs a descriptor open for writing), else read-only (enough for a local flock), so that users who
 * share a cache file but not the lock file's ownership can all lock it; write-only for a lock file only its owner may
 * read. */
static int open_lock(const char *lock) {
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 && (errno == EACCES || errno == EROFS)) fd = open(lock, O_RDONLY | O_CLOEXEC);
    return fd >= 0 || errno != EACCES ? fd : open(lock, O_WRONLY | O_CLOEXEC);
}

/* An exclusive flock on the cache's lock file, held while a save reads the file, merges and replaces it: concurrent
 * savers (threads or processes) then never overwrite each other's entries. Waits up to wait_ms (0:
 * GG_TUNE_LOCK_WAIT_MS) for a holder (the cache is an optimization: a save that cannot lock fails rather than waits
 * without limit). Returns the lock's file descriptor (close it to unlock), or -1 with errno. */
#define GG_TUNE_LOCK_WAIT_MS 10000
static int lock_cache(const char *lock, int wait_ms) {
    if (wait_ms <= 0) wait_ms = GG_TUNE_LOCK_WAIT_MS;
    const int fd = open_lock(lock);
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

/* A new temporary file beside path, "<path>.tmp.<pid>.<n>", created with O_EXCL and mode 0666 so that the umask (and
 * a default ACL) applies as to any new file. Returns its descriptor and name (*tmp, to free), or -1 with errno. */
#define MAX_TMP_TRIES 100
static int create_temporary(const char *path, char **tmp) {
    static unsigned counter; /* distinct names for the threads of a process; collisions are retried */
    *tmp = malloc(strlen(path) + 64);
    if (!*tmp) {
        errno = ENOMEM;
        return -1;
    }
    for (int tries = 0; tries < MAX_TMP_TRIES; ++tries) {
        const unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        sprintf(*tmp, "%s.tmp.%ld.%u", path, (long)getpid(), n);
        const int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) {
            if (fd < 0) {
                const int saved = errno;
                free(*tmp);
                *tmp = NULL;
                errno = saved;
            }
            return fd;
        }
    }
    free(*tmp);
    *tmp = NULL;
    errno = EEXIST;
    return -1;
}

/* The file's contents: our header, the kept lines, then the entries. */
static int write_contents(FILE *f, const gg_tune_cache *merged, const kept_lines *kept) {
    int bad = fprintf(f, "%s\n", HEADER) < 0;
    for (size_t i = 0; i < kept->count && !bad; ++i)
        bad |= fwrite(kept->lines[i], 1, kept->lengths[i], f) != kept->lengths[i];
    for (size_t i = 0; i < merged->count && !bad; ++i) {
        const gg_tune_entry *e = &merged->entries[i];
        bad |= fprintf(f, "%s %" PRIu64 " %.2f", e->key, e->workspace_bytes, e->us) < 0;
        for (int w = 0; w < GG_TUNE_ALGO_WORDS; ++w) bad |= fprintf(f, " %" PRIx64, e->algo[w]) < 0;
        bad |= fputc('\n', f) == EOF;
    }
    return bad ? -1 : 0;
}

/* fsync of path's directory, so that the rename survives a crash (best effort: not every file system allows it). */
static void sync_parent_dir(const char *path) {
    char *dir = strdup(path);
    if (!dir) return;
    *strrchr(dir, '/') = '\0';
    const int fd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Writes the merged entries and kept lines to a new temporary file beside path, with the old file's permission bits
 * (r->exists) or a new file's, flushes it to the disk and renames it over path (a crash then leaves the old file or
 * the new one, never an empty one). Returns 0, or -1 with errno and no temporary file left behind. */
static int replace_file(const gg_tune_cache *merged, const kept_lines *kept, const file_read *r, const char *path) {
    char *tmp = NULL;
    const int fd = create_temporary(path, &tmp);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    int bad = !f || (r->exists && fchmod(fd, r->mode) != 0) || write_contents(f, merged, kept) != 0 ||
              fflush(f) != 0 || fsync(fd) != 0;
    int saved = bad ? errno : 0; /* the first failure's */
    if ((f ? fclose(f) : close(fd)) != 0 && !bad) {
        saved = errno;
        bad = 1;
    }
    if (!bad && rename(tmp, path) != 0) {
        saved = errno;
        bad = 1;
    }
    if (bad) (void)unlink(tmp);
    free(tmp);
    if (bad) {
        errno = saved ? saved : EIO;
        return -1;
    }
    sync_parent_dir(path);
    return 0;
}

int gg_tune_cache_save(gg_tune_cache *cache) {
    cache->failed_path = NULL;
    if (!cache->path) return 0;
    cache->failed_path = cache->path;
    if (make_parent_dirs(cache->path) != 0) return -1;
    const int lock = lock_cache(cache->lock_path, cache->lock_wait_ms);
    if (lock < 0) {
        cache->failed_path = cache->lock_path;
        return -1;
    }
    /* The file as it is now, then the entries put here over it: an entry only loaded may be older than the file's. */
    gg_tune_cache merged = {0};
    kept_lines kept = {0};
    file_read r = {.kept = &kept};
    int rc = read_file(&merged, cache->path, &r);
    for (size_t i = 0; i < cache->count && rc == 0; ++i)
        if (cache->entries[i].put_unsaved && add_entry(&merged, &cache->entries[i]) != 0) {
            errno = ENOMEM;
            rc = -1;
        }
    if (rc == 0) rc = replace_file(&merged, &kept, &r, cache->path);
    const int saved = errno;
    gg_tune_cache_close(&merged);
    free_kept(&kept);
    close(lock);
    if (rc == 0) {
        for (size_t i = 0; i < cache->count; ++i) cache->entries[i].put_unsaved = 0;
        cache->failed_path = NULL;
    }
    errno = saved;
    return rc;
}

const char *gg_tune_cache_default_path(char *buf, size_t size) {
    const char *env = getenv("GG_TUNE_CACHE");
    int n = -1;
    if (env) return snprintf(buf, size, "%s", env) < (int)size ? buf : NULL; /* "" means: no file */
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') /* the XDG specification: a relative path is invalid, to be ignored */
        n = snprintf(buf, size, "%s/gradgraph/gemm-algos.txt", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/gradgraph/gemm-algos.txt", home);
    return n > 0 && n < (int)size ? buf : NULL;
}
