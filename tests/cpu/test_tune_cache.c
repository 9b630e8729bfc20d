/* test_tune_cache.c - the autotune cache file: round trip, merging between writers, bad lines, bad paths, a lock
 * held too long, and the default location (CPU only). */
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
#include <sys/file.h>
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
    fprintf(f, "last 64 2.5 a b c d e f 10 11"); /* no final newline */
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

/* The temporary file is written, but renaming it over the cache path fails (the path is a directory): the save
 * fails, and the temporary file is removed (nothing left behind beside the cache). */
static void failed_rename_leaves_no_temporary_file(void **state) {
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
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
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
        cmocka_unit_test(failed_rename_leaves_no_temporary_file),
        cmocka_unit_test(a_lock_held_too_long_fails_the_save),
        cmocka_unit_test(concurrent_writers_lose_nothing),
        cmocka_unit_test(default_path_follows_the_environment),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
