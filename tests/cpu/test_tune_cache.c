/* test_tune_cache.c - the autotune cache file: round trip, merging between writers (the last writer of a key wins),
 * bad lines (kept verbatim by a save), bad paths, a file that cannot be read whole, a lock held too long or owned by
 * another user, symbolic links, permission bits, relative paths, large files and the default location (CPU only). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tune_cache.h"

static char dir[256];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/gg_tune_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static gg_tune_entry entry(const char *key, uint64_t seed) {
    gg_tune_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.key, sizeof e.key, "%s", key);
    for (int i = 0; i < GG_TUNE_ALGO_WORDS; ++i) e.algo[i] = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i;
    e.workspace_bytes = seed * 1024;
    e.us = 12.5 + (double)seed;
    return e;
}

static void path_in_dir(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void saves_and_loads_every_field(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "sub/dir/algos.txt"); /* missing directories are created */
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    assert_int_equal(c.count, 0);
    const gg_tune_entry a = entry("H200|sm90|NT|256x2048x8192", 1), b = entry("H200|sm90|NN|8x8x8", 2);
    assert_int_equal(gg_tune_cache_put(&c, &a), 0);
    assert_int_equal(gg_tune_cache_put(&c, &b), 0);
    assert_int_equal(gg_tune_cache_save(&c), 0);
    gg_tune_cache_close(&c);

    gg_tune_cache d;
    assert_int_equal(gg_tune_cache_open(&d, path), 0);
    assert_int_equal(d.count, 2);
    assert_int_equal(d.skipped, 0);
    const gg_tune_entry *got = gg_tune_cache_find(&d, a.key);
    assert_non_null(got);
    assert_memory_equal(got->algo, a.algo, sizeof a.algo);
    assert_int_equal(got->workspace_bytes, a.workspace_bytes);
    assert_true(got->us > 13.4 && got->us < 13.6);
    assert_null(gg_tune_cache_find(&d, "H200|sm90|NN|9x9x9"));
    gg_tune_cache_close(&d);
}

static void put_replaces_and_rejects_bad_keys(void **state) {
    (void)state;
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, NULL), 0); /* memory only */
    gg_tune_entry a = entry("k", 1);
    assert_int_equal(gg_tune_cache_put(&c, &a), 0);
    a.algo[0] = 77;
    assert_int_equal(gg_tune_cache_put(&c, &a), 0);
    assert_int_equal(c.count, 1);
    assert_int_equal(gg_tune_cache_find(&c, "k")->algo[0], 77);
    gg_tune_entry spaced = entry("a key", 1), empty = entry("", 1);
    assert_int_equal(gg_tune_cache_put(&c, &spaced), -1);
    assert_int_equal(gg_tune_cache_put(&c, &empty), -1);
    assert_int_equal(gg_tune_cache_save(&c), 0); /* no path: nothing to write, not an error */
    gg_tune_cache_close(&c);
}

static void two_writers_merge_instead_of_overwriting(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "shared.txt");
    gg_tune_cache p1, p2;
    assert_int_equal(gg_tune_cache_open(&p1, path), 0);
    assert_int_equal(gg_tune_cache_open(&p2, path), 0);
    const gg_tune_entry a = entry("from_p1", 1), b = entry("from_p2", 2), shared1 = entry("both", 3),
                        shared2 = entry("both", 4);
    assert_int_equal(gg_tune_cache_put(&p1, &a), 0);
    assert_int_equal(gg_tune_cache_put(&p1, &shared1), 0);
    assert_int_equal(gg_tune_cache_save(&p1), 0);
    assert_int_equal(gg_tune_cache_put(&p2, &b), 0);
    assert_int_equal(gg_tune_cache_put(&p2, &shared2), 0);
    assert_int_equal(gg_tune_cache_save(&p2), 0);
    gg_tune_cache_close(&p1);
    gg_tune_cache_close(&p2);
    gg_tune_cache r;
    assert_int_equal(gg_tune_cache_open(&r, path), 0);
    assert_int_equal(r.count, 3);
    assert_non_null(gg_tune_cache_find(&r, "from_p1"));
    assert_non_null(gg_tune_cache_find(&r, "from_p2"));
    assert_memory_equal(gg_tune_cache_find(&r, "both")->algo, shared2.algo, sizeof shared2.algo); /* last writer */
    gg_tune_cache_close(&r);
}

static void malformed_lines_are_skipped_and_counted(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "bad.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# a comment\n\n");
    fprintf(f, "good 64 1.5 1 2 3 4 5 6 7 8\n");
    fprintf(f, "short 64 1.5 1 2 3\n");         /* too few words */
    fprintf(f, "trailing 64 1.5 1 2 3 4 5 6 7 8 9\n"); /* too many */
    fprintf(f, "nonnumeric x 1.5 1 2 3 4 5 6 7 8\n");
    fprintf(f, "%0500d 64 1.5 1 2 3 4 5 6 7 8\n", 7); /* key too long */
    fprintf(f, "%03000d 64 1.5 1 2 3 4 5 6 7 8\n", 9); /* longer than the reader's buffer: skipped whole, as one */
    fprintf(f, "last 64 2.5 a b c d e f 10 11\n");
    fclose(f);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    assert_int_equal(c.count, 2);
    assert_int_equal(c.skipped, 5);
    assert_int_equal(gg_tune_cache_find(&c, "good")->algo[7], 8);
    assert_int_equal(gg_tune_cache_find(&c, "last")->algo[0], 0xa);
    gg_tune_cache_close(&c);
}

static void unwritable_path_fails_without_a_torn_file(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "file");
    FILE *f = fopen(path, "w"); /* a file where the cache wants a directory */
    assert_non_null(f);
    fclose(f);
    path_in_dir(path, sizeof path, "file/algos.txt");
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0); /* missing file: empty, fine */
    const gg_tune_entry a = entry("k", 1);
    assert_int_equal(gg_tune_cache_put(&c, &a), 0);
    assert_int_equal(gg_tune_cache_save(&c), -1);
    gg_tune_cache_close(&c);
}

/* The cache path is a directory: the save fails (reading it, before anything is written), leaving nothing beside
 * it. */
static void a_directory_at_the_path_fails_the_save(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "a-directory");
    assert_int_equal(mkdir(path, 0755), 0);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0); /* unreadable as a file: an empty cache */
    const gg_tune_entry a = entry("k", 1);
    assert_int_equal(gg_tune_cache_put(&c, &a), 0);
    assert_int_equal(gg_tune_cache_save(&c), -1);
    /* nothing named after the cache is left beside it, whatever the temporary file's name */
    DIR *listing = opendir(dir);
    assert_non_null(listing);
    for (const struct dirent *e; (e = readdir(listing));)
        if (!strncmp(e->d_name, "a-directory", strlen("a-directory")) && strcmp(e->d_name, "a-directory") &&
            strcmp(e->d_name, "a-directory.lock")) /* the lock file stays, by design */
            fail_msg("%s was left behind", e->d_name);
    closedir(listing);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode)); /* untouched */
    gg_tune_cache_close(&c);
}

/* Another saver holds the lock (another open file description of "<path>.lock", flocked) past the cache's wait: the
 * save fails with EWOULDBLOCK after about that wait, not longer, leaving the file as it was and no temporary file;
 * once the lock is released the same save succeeds. */
static void a_lock_held_too_long_fails_the_save(void **state) {
    (void)state;
    char path[300], lock[320];
    path_in_dir(path, sizeof path, "held.txt");
    snprintf(lock, sizeof lock, "%s.lock", path);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    const gg_tune_entry a = entry("first", 1), b = entry("second", 2);
    assert_int_equal(gg_tune_cache_put(&c, &a), 0);
    assert_int_equal(gg_tune_cache_save(&c), 0);
    const int holder = open(lock, O_RDWR | O_CLOEXEC);
    assert_true(holder >= 0);
    assert_int_equal(flock(holder, LOCK_EX | LOCK_NB), 0);
    c.lock_wait_ms = 50;
    assert_int_equal(gg_tune_cache_put(&c, &b), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    errno = 0;
    assert_int_equal(gg_tune_cache_save(&c), -1);
    assert_int_equal(errno, EWOULDBLOCK);
    assert_ptr_equal(c.failed_path, c.lock_path); /* what the warning names */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double waited_ms = 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (waited_ms < 45 || waited_ms > 2000) fail_msg("the save gave up after %.0f ms (its wait: 50)", waited_ms);
    gg_tune_cache on_disk;
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0); /* as it was: the first entry only */
    assert_int_equal(on_disk.count, 1);
    assert_non_null(gg_tune_cache_find(&on_disk, "first"));
    gg_tune_cache_close(&on_disk);
    DIR *listing = opendir(dir);
    assert_non_null(listing);
    for (const struct dirent *e; (e = readdir(listing));)
        if (strstr(e->d_name, ".tmp.")) fail_msg("%s was left behind", e->d_name);
    closedir(listing);
    close(holder); /* released: the same save goes through */
    assert_int_equal(gg_tune_cache_save(&c), 0);
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0);
    assert_int_equal(on_disk.count, 2);
    assert_non_null(gg_tune_cache_find(&on_disk, "second"));
    gg_tune_cache_close(&on_disk);
    gg_tune_cache_close(&c);
}

/* Concurrent savers: WRITER_PROCS processes of WRITER_THREADS threads, each saving WRITER_SAVES times a cache that
 * holds only its own new key. Every key must be in the file at the end: a save reads, merges and replaces the file
 * under the lock, and each writes its own temporary file (without the lock, savers overwrite each other's merges and
 * keys go missing). */
#define WRITER_PROCS 3
#define WRITER_THREADS 4
#define WRITER_SAVES 15
static char concurrent_path[300];

static void *writer(void *arg) {
    const long id = (long)(intptr_t)arg;
    for (int k = 0; k < WRITER_SAVES; ++k) {
        gg_tune_cache c;
        if (gg_tune_cache_open(&c, concurrent_path) != 0) return (void *)1;
        char key[64];
        snprintf(key, sizeof key, "w%ld-k%d", id, k);
        const gg_tune_entry e = entry(key, (uint64_t)(id * 100 + k));
        int rc = gg_tune_cache_put(&c, &e) != 0 || gg_tune_cache_save(&c) != 0;
        gg_tune_cache_close(&c);
        if (rc) return (void *)1;
    }
    return NULL;
}

static void concurrent_writers_lose_nothing(void **state) {
    (void)state;
    path_in_dir(concurrent_path, sizeof concurrent_path, "shared/gemm-algos.txt");
    pid_t pids[WRITER_PROCS];
    for (int p = 0; p < WRITER_PROCS; ++p) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            pthread_t t[WRITER_THREADS];
            int failed = 0;
            for (long i = 0; i < WRITER_THREADS; ++i)
                failed |= pthread_create(&t[i], NULL, writer, (void *)(intptr_t)(p * WRITER_THREADS + i)) != 0;
            for (int i = 0; i < WRITER_THREADS; ++i) {
                void *r = NULL;
                pthread_join(t[i], &r);
                failed |= r != NULL;
            }
            _exit(failed);
        }
    }
    for (int p = 0; p < WRITER_PROCS; ++p) {
        int status = 0;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, concurrent_path), 0);
    assert_int_equal(c.skipped, 0); /* no torn line */
    for (long id = 0; id < WRITER_PROCS * WRITER_THREADS; ++id)
        for (int k = 0; k < WRITER_SAVES; ++k) {
            char key[64];
            snprintf(key, sizeof key, "w%ld-k%d", id, k);
            const gg_tune_entry *e = gg_tune_cache_find(&c, key);
            if (!e) fail_msg("%s was lost", key);
            assert_int_equal(e->workspace_bytes, (uint64_t)(id * 100 + k) * 1024);
        }
    assert_int_equal(c.count, WRITER_PROCS * WRITER_THREADS * WRITER_SAVES);
    gg_tune_cache_close(&c);
}

/* The file's bytes (at most size - 1, NUL-terminated); returns how many. */
static size_t read_all(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    const size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

static void write_all(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void save_one(const char *path, const char *key, uint64_t seed) {
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    const gg_tune_entry e = entry(key, seed);
    assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    assert_int_equal(gg_tune_cache_save(&c), 0);
    gg_tune_cache_close(&c);
}

static void assert_no_temporary_file(void) {
    DIR *listing = opendir(dir);
    assert_non_null(listing);
    for (const struct dirent *e; (e = readdir(listing));)
        if (strstr(e->d_name, ".tmp.")) fail_msg("%s was left behind", e->d_name);
    closedir(listing);
}

static size_t occurrences(const char *text, const char *word) {
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) ++n;
    return n;
}

/* Saves a cache holding only key (seed) at path as another user: nobody, in a child process, when these tests run as
 * root (root may open anything); else this user, whom the caller's modes then treat as another (a file made 0200 is
 * as unreadable to its owner as another user's 0600 file). Returns 0, or the errno of the failed save. */
static int save_as_another_user(const char *path, const char *key, uint64_t seed) {
    if (geteuid() != 0) {
        gg_tune_cache c;
        assert_int_equal(gg_tune_cache_open(&c, path), 0);
        const gg_tune_entry e = entry(key, seed);
        assert_int_equal(gg_tune_cache_put(&c, &e), 0);
        const int rc = gg_tune_cache_save(&c) != 0 ? errno : 0;
        gg_tune_cache_close(&c);
        return rc;
    }
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(chmod(dir, 0711), 0); /* mkdtemp's 0700 would stop nobody at the door */
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* no cmocka assertion in the child: it would go on with the parent's tests */
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(200);
        gg_tune_cache c;
        if (gg_tune_cache_open(&c, path) != 0) _exit(201);
        const gg_tune_entry e = entry(key, seed);
        _exit(gg_tune_cache_put(&c, &e) != 0 ? 202 : gg_tune_cache_save(&c) != 0 ? errno : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(chmod(dir, st.st_mode & 07777), 0);
    assert_true(WIFEXITED(status));
    assert_true(WEXITSTATUS(status) < 200);
    return WEXITSTATUS(status);
}

/* A directory every user may write, for the tests of several users. */
static void shared_dir(char *buf, size_t size, const char *name) {
    path_in_dir(buf, size, name);
    assert_int_equal(mkdir(buf, 0777), 0);
    assert_int_equal(chmod(buf, 0777), 0); /* whatever the umask */
}

/* A user who cannot read the file (another's 0600 file in a shared directory) saves into it: the save fails with
 * EACCES and the file keeps its entries (the save used to take the file for empty and replace it). */
static void a_save_that_cannot_read_the_file_keeps_it(void **state) {
    (void)state;
    char shared[300], path[320];
    shared_dir(shared, sizeof shared, "unread");
    snprintf(path, sizeof path, "%s/algos.txt", shared);
    save_one(path, "owners", 1);
    char lock[330];
    snprintf(lock, sizeof lock, "%s.lock", path);
    assert_int_equal(chmod(lock, 0666), 0); /* the lock is not what stops the other user here */
    assert_int_equal(chmod(path, geteuid() == 0 ? 0600 : 0200), 0);
    assert_int_equal(save_as_another_user(path, "mine", 2), EACCES);
    assert_int_equal(chmod(path, 0600), 0);
    gg_tune_cache on_disk;
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0);
    assert_int_equal(on_disk.count, 1);
    assert_non_null(gg_tune_cache_find(&on_disk, "owners"));
    gg_tune_cache_close(&on_disk);
    assert_no_temporary_file();
}

/* Writing the temporary file fails (the file size limit: EFBIG): the save fails, the file is as it was and the
 * temporary file is removed. */
static void a_failed_write_leaves_no_temporary_file(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "big.txt");
    save_one(path, "small", 1);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    for (int i = 0; i < 64; ++i) {
        char key[32];
        snprintf(key, sizeof key, "key%d", i);
        const gg_tune_entry e = entry(key, (uint64_t)i);
        assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    }
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit small = {4096, old.rlim_max}; /* 64 entries take about 10 KiB */
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    errno = 0;
    const int rc = gg_tune_cache_save(&c);
    const int err = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(rc, -1);
    assert_int_equal(err, EFBIG);
    assert_no_temporary_file();
    gg_tune_cache on_disk;
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0);
    assert_int_equal(on_disk.count, 1);
    gg_tune_cache_close(&on_disk);
    gg_tune_cache_close(&c);
}

/* Another user saves into a cache whose lock file the first user made (mode 0644, or 0444 when these tests do not
 * run as root): the lock opens read-only, enough for flock, so the save succeeds (it used to fail with EACCES). */
static void a_lock_file_owned_by_another_user_still_locks(void **state) {
    (void)state;
    char shared[300], path[320], lock[330];
    shared_dir(shared, sizeof shared, "users");
    snprintf(path, sizeof path, "%s/algos.txt", shared);
    snprintf(lock, sizeof lock, "%s.lock", path);
    save_one(path, "first_user", 1);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(chmod(lock, geteuid() == 0 ? 0644 : 0444), 0);
    assert_int_equal(save_as_another_user(path, "second_user", 2), 0);
    gg_tune_cache on_disk;
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0);
    assert_non_null(gg_tune_cache_find(&on_disk, "first_user"));
    assert_non_null(gg_tune_cache_find(&on_disk, "second_user"));
    gg_tune_cache_close(&on_disk);
}

/* A lock file this user cannot open at all: the save fails, and failed_path names the lock (what the warning names),
 * not the cache file. */
static void a_lock_that_cannot_be_opened_is_named(void **state) {
    (void)state;
    char shared[300], path[320], lock[330];
    shared_dir(shared, sizeof shared, "nolock");
    snprintf(path, sizeof path, "%s/algos.txt", shared);
    snprintf(lock, sizeof lock, "%s.lock", path);
    assert_int_equal(symlink("missing-dir/x.lock", lock), 0); /* a link into nowhere: open(O_CREAT) cannot make it */
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    const gg_tune_entry e = entry("k", 1);
    assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    errno = 0;
    assert_int_equal(gg_tune_cache_save(&c), -1);
    assert_int_equal(errno, ENOENT);
    assert_ptr_equal(c.failed_path, c.lock_path);
    assert_string_equal(c.lock_path, lock);
    gg_tune_cache_close(&c);
}

/* A cache path that is a symbolic link (to a shared file, or to one not made yet) stays a link: the save replaces its
 * target, locking beside the target. */
static void a_symbolic_link_stays_a_link(void **state) {
    (void)state;
    char target_dir[300], target[320], link[300], dangling[300], created[320], lock[330];
    path_in_dir(target_dir, sizeof target_dir, "linked");
    assert_int_equal(mkdir(target_dir, 0755), 0);
    snprintf(target, sizeof target, "%s/real.txt", target_dir);
    snprintf(created, sizeof created, "%s/later.txt", target_dir);
    path_in_dir(link, sizeof link, "link.txt");
    path_in_dir(dangling, sizeof dangling, "dangling.txt");
    save_one(target, "before", 1);
    assert_int_equal(symlink("linked/real.txt", link), 0); /* relative, as users make them */
    assert_int_equal(symlink("linked/later.txt", dangling), 0);
    save_one(link, "through_link", 2);
    save_one(dangling, "through_dangling", 3);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(dangling, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    gg_tune_cache on_disk;
    assert_int_equal(gg_tune_cache_open(&on_disk, target), 0);
    assert_int_equal(on_disk.count, 2);
    assert_non_null(gg_tune_cache_find(&on_disk, "through_link"));
    gg_tune_cache_close(&on_disk);
    assert_int_equal(gg_tune_cache_open(&on_disk, created), 0);
    assert_non_null(gg_tune_cache_find(&on_disk, "through_dangling"));
    gg_tune_cache_close(&on_disk);
    snprintf(lock, sizeof lock, "%s.lock", target);
    assert_int_equal(stat(lock, &st), 0);
}

/* A save keeps the file's permission bits (a user's 0600 stays private); a new file gets 0666 less the umask. */
static void a_save_keeps_the_file_mode(void **state) {
    (void)state;
    char path[300], fresh[300];
    path_in_dir(path, sizeof path, "private.txt");
    path_in_dir(fresh, sizeof fresh, "fresh.txt");
    save_one(path, "a", 1);
    assert_int_equal(chmod(path, 0600), 0);
    save_one(path, "b", 2);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    const mode_t old = umask(027);
    save_one(fresh, "a", 1);
    umask(old);
    assert_int_equal(stat(fresh, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
}

/* Process A loads key K; B tunes K again and saves; A saves an unrelated key: B's K stays (A only loaded its K). And
 * once A has saved its own K, a later re-tune by B wins over it too: the last writer of a key wins. */
static void an_entry_only_loaded_never_reverts_a_newer_one(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "writers.txt");
    save_one(path, "K", 1);
    gg_tune_cache a;
    assert_int_equal(gg_tune_cache_open(&a, path), 0);
    save_one(path, "K", 2); /* B */
    const gg_tune_entry l = entry("L", 3), m = entry("M", 5);
    assert_int_equal(gg_tune_cache_put(&a, &l), 0);
    assert_int_equal(gg_tune_cache_save(&a), 0);
    gg_tune_cache on_disk;
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0);
    assert_int_equal(gg_tune_cache_find(&on_disk, "K")->workspace_bytes, 2 * 1024);
    assert_non_null(gg_tune_cache_find(&on_disk, "L"));
    gg_tune_cache_close(&on_disk);
    save_one(path, "L", 4); /* B again, over A's saved L */
    assert_int_equal(gg_tune_cache_put(&a, &m), 0);
    assert_int_equal(gg_tune_cache_save(&a), 0);
    assert_int_equal(gg_tune_cache_open(&on_disk, path), 0);
    assert_int_equal(gg_tune_cache_find(&on_disk, "L")->workspace_bytes, 4 * 1024);
    assert_int_equal(on_disk.count, 3);
    gg_tune_cache_close(&on_disk);
    gg_tune_cache_close(&a);
}

/* Lines this version does not parse (comments, another version's entries) survive a save as they were, once each, so
 * that versions can share the file; our header is written once. */
static void lines_not_parsed_are_kept_by_a_save(void **state) {
    (void)state;
    char path[300], text[4096];
    path_in_dir(path, sizeof path, "versions.txt");
    const char *future = "FUTURE|key 1 2.00 1 2 3 4 5 6 7 8 9 a b c d e f 10\n";
    save_one(path, "ours", 1);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "# my note\n%s%s", future, future);
    fclose(f);
    save_one(path, "ours2", 2);
    save_one(path, "ours3", 3);
    read_all(path, text, sizeof text);
    assert_int_equal(occurrences(text, "# my note\n"), 1);
    assert_int_equal(occurrences(text, future), 1);
    assert_int_equal(occurrences(text, "# gradgraph cuBLASLt algorithm cache v1"), 1);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    assert_int_equal(c.count, 3);
    assert_int_equal(c.skipped, 1); /* the other version's line; comments are not counted */
    gg_tune_cache_close(&c);
}

/* A NUL byte inside a line spoils that line only (the next, valid, lines are read). */
static void a_nul_byte_spoils_its_line_only(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "nul.txt");
    static const char bytes[] = "bad 1 1.00 1 2\0 3\ngood 1 1.00 1 2 3 4 5 6 7 8\ngood2 1 1.00 1 2 3 4 5 6 7 8\n"
                                "spoilt 1 1.00 1 2 3 4 5 6 7 8\0 9\n"; /* whole before its NUL: still not ours */
    write_all(path, bytes, sizeof bytes - 1);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    assert_non_null(gg_tune_cache_find(&c, "good"));
    assert_non_null(gg_tune_cache_find(&c, "good2"));
    assert_null(gg_tune_cache_find(&c, "spoilt"));
    assert_int_equal(c.count, 2);
    assert_int_equal(c.skipped, 2);
    gg_tune_cache_close(&c);
}

/* A last line without its newline (a file cut short: its last word may be too) is not parsed, and a save drops it
 * (written back with a newline, it would be read as a whole line). */
static void a_cut_last_line_is_not_read(void **state) {
    (void)state;
    char path[300], text[4096];
    path_in_dir(path, sizeof path, "cut.txt");
    const char bytes[] = "whole 1 1.00 1 2 3 4 5 6 7 8\ncut 1 1.00 1 2 3 4 5 6 7 12"; /* was ... 7 1234abcd */
    write_all(path, bytes, sizeof bytes - 1);
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    assert_non_null(gg_tune_cache_find(&c, "whole"));
    assert_null(gg_tune_cache_find(&c, "cut"));
    assert_int_equal(c.skipped, 1);
    const gg_tune_entry e = entry("new", 1);
    assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    assert_int_equal(gg_tune_cache_save(&c), 0);
    gg_tune_cache_close(&c);
    read_all(path, text, sizeof text);
    assert_null(strstr(text, "cut"));
}

/* A relative path names the file in the working directory at open, not at save (the program may chdir between). */
static void a_relative_path_is_fixed_at_open(void **state) {
    (void)state;
    char a[300], b[300], cwd[1024], in_a[320], in_b[320];
    path_in_dir(a, sizeof a, "cwd_a");
    path_in_dir(b, sizeof b, "cwd_b");
    assert_int_equal(mkdir(a, 0755), 0);
    assert_int_equal(mkdir(b, 0755), 0);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(a), 0);
    gg_tune_cache c;
    const int opened = gg_tune_cache_open(&c, "rel.txt");
    const int moved = chdir(b);
    const gg_tune_entry e = entry("k", 1);
    const int saved = opened == 0 && moved == 0 && gg_tune_cache_put(&c, &e) == 0 ? gg_tune_cache_save(&c) : -2;
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(saved, 0);
    assert_int_equal(c.path[0], '/');
    gg_tune_cache_close(&c);
    snprintf(in_a, sizeof in_a, "%s/rel.txt", a);
    snprintf(in_b, sizeof in_b, "%s/rel.txt", b);
    assert_int_equal(access(in_a, F_OK), 0);
    assert_int_equal(access(in_b, F_OK), -1);
}

/* A relative path whose working directory was removed binds no file (it used to crash on the path without a slash):
 * the cache works in memory, a save writes nothing. */
static void a_relative_path_without_a_working_directory(void **state) {
    (void)state;
    char gone[300], cwd[1024];
    path_in_dir(gone, sizeof gone, "cwd_gone");
    assert_int_equal(mkdir(gone, 0755), 0);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(gone), 0);
    assert_int_equal(rmdir(gone), 0);
    gg_tune_cache c;
    const int opened = gg_tune_cache_open(&c, "rel.txt");
    const gg_tune_entry e = entry("k", 1);
    const int put = opened == 0 ? gg_tune_cache_put(&c, &e) : -2;
    const int saved = opened == 0 ? gg_tune_cache_save(&c) : -2;
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(opened, 0);
    assert_null(c.path);
    assert_int_equal(put, 0);
    assert_int_equal(saved, 0); /* nothing to write */
    assert_non_null(gg_tune_cache_find(&c, "k"));
    gg_tune_cache_close(&c);
}

/* A path too long for the lock file's name fails the save with ENAMETOOLONG (it used to fail with errno unset). */
static void a_path_too_long_says_so(void **state) {
    (void)state;
    const size_t n = strlen(dir) + 5000;
    char *path = malloc(n + 16);
    assert_non_null(path);
    int at = snprintf(path, n + 16, "%s/", dir);
    memset(path + at, 'a', n - (size_t)at);
    strcpy(path + n, ".txt");
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    free(path);
    const gg_tune_entry e = entry("k", 1);
    assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    errno = 0;
    assert_int_equal(gg_tune_cache_save(&c), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    gg_tune_cache_close(&c);
}

/* 40 000 entries put, saved, loaded and saved again: every one comes back (keys are hashed; the time is printed). */
#define MANY_ENTRIES 40000
static void many_entries_round_trip(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "many.txt");
    gg_tune_cache c;
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < MANY_ENTRIES; ++i) {
        char key[32];
        snprintf(key, sizeof key, "H100|sm90|key%d", i);
        const gg_tune_entry e = entry(key, (uint64_t)i);
        assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    }
    assert_int_equal(gg_tune_cache_save(&c), 0);
    gg_tune_cache_close(&c);
    assert_int_equal(gg_tune_cache_open(&c, path), 0);
    assert_int_equal(c.count, MANY_ENTRIES);
    const gg_tune_entry e = entry("one_more", 1);
    assert_int_equal(gg_tune_cache_put(&c, &e), 0);
    assert_int_equal(gg_tune_cache_save(&c), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(gg_tune_cache_find(&c, "H100|sm90|key12345")->workspace_bytes, 12345 * 1024);
    gg_tune_cache_close(&c);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    /* printed, not asserted: speed is for benchmarks, never for timed tests (the hashed keys took it from 16 s) */
    print_message("putting, saving, loading and saving %d entries: %.2f s\n", MANY_ENTRIES, s);
}

static void default_path_follows_the_environment(void **state) {
    (void)state;
    char buf[512];
    setenv("GG_TUNE_CACHE", "/x/y.txt", 1);
    assert_string_equal(gg_tune_cache_default_path(buf, sizeof buf), "/x/y.txt");
    setenv("GG_TUNE_CACHE", "", 1); /* set but empty: no file */
    assert_string_equal(gg_tune_cache_default_path(buf, sizeof buf), "");
    unsetenv("GG_TUNE_CACHE");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    assert_string_equal(gg_tune_cache_default_path(buf, sizeof buf), "/xdg/gradgraph/gemm-algos.txt");
    setenv("HOME", "/home/u", 1);
    setenv("XDG_CACHE_HOME", "rel", 1); /* relative: invalid, ignored (the XDG specification) */
    assert_string_equal(gg_tune_cache_default_path(buf, sizeof buf), "/home/u/.cache/gradgraph/gemm-algos.txt");
    unsetenv("XDG_CACHE_HOME");
    assert_string_equal(gg_tune_cache_default_path(buf, sizeof buf), "/home/u/.cache/gradgraph/gemm-algos.txt");
    unsetenv("HOME");
    assert_null(gg_tune_cache_default_path(buf, sizeof buf));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(saves_and_loads_every_field),
        cmocka_unit_test(put_replaces_and_rejects_bad_keys),
        cmocka_unit_test(two_writers_merge_instead_of_overwriting),
        cmocka_unit_test(malformed_lines_are_skipped_and_counted),
        cmocka_unit_test(unwritable_path_fails_without_a_torn_file),
        cmocka_unit_test(a_directory_at_the_path_fails_the_save),
        cmocka_unit_test(a_lock_held_too_long_fails_the_save),
        cmocka_unit_test(concurrent_writers_lose_nothing),
        cmocka_unit_test(a_save_that_cannot_read_the_file_keeps_it),
        cmocka_unit_test(a_failed_write_leaves_no_temporary_file),
        cmocka_unit_test(a_lock_file_owned_by_another_user_still_locks),
        cmocka_unit_test(a_lock_that_cannot_be_opened_is_named),
        cmocka_unit_test(a_symbolic_link_stays_a_link),
        cmocka_unit_test(a_save_keeps_the_file_mode),
        cmocka_unit_test(an_entry_only_loaded_never_reverts_a_newer_one),
        cmocka_unit_test(lines_not_parsed_are_kept_by_a_save),
        cmocka_unit_test(a_nul_byte_spoils_its_line_only),
        cmocka_unit_test(a_cut_last_line_is_not_read),
        cmocka_unit_test(a_relative_path_is_fixed_at_open),
        cmocka_unit_test(a_relative_path_without_a_working_directory),
        cmocka_unit_test(a_path_too_long_says_so),
        cmocka_unit_test(many_entries_round_trip),
        cmocka_unit_test(default_path_follows_the_environment),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
