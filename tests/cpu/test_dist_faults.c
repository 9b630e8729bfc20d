/*
 * test_dist_faults.c - the data-parallel path's failures on the CPU, with NCCL and the CUDA runtime faked at link time
 * (tests/fake): a communicator whose init never completes is aborted at the init deadline (every wait that runs to its
 * deadline logs one notice half-way, naming what it waits for); an asynchronous NCCL error and a replay past the step
 * deadline are caught by the watchdog thread, which aborts the communicator, after which calls that need it say why and
 * the rest of the context works; a finalize that never ends is aborted at the teardown deadline; gg_dist_abort from
 * another thread, also while the owner waits in a collective step; the fingerprint of a syncing graph, each field's
 * difference named (as a pure function and through the collective comparison); a rank whose syncing graph fails before
 * the ranks' agreement voting in it (failed), but not when refused, and another rank's failed vote failing the graph
 * here; and fault injection on every kind of NCCL call (fake_nccl.h) along attach or init, making a syncing graph,
 * replays, gg_dist_reduce and detach: each fault GG_ERROR_NCCL with NCCL's error in the message, nothing leaked (CUDA
 * resources and communicators), the context usable after; every failure of a replay or gg_dist_reduce (NCCL's, the CUDA
 * runtime's) aborting the communicator and saying so, as does a call past the largest bucket whose plan fails, while
 * refusals and a failure inside the caller's open capture do not. Then the same with copy engines on (NCCL 2.28+): two
 * ranks made from this thread (the staging, its window, the copy-engine warm-up), a gg_dist_alloc buffer each holding
 * an MLP's weight gradients (its syncing graph takes the two-rank split reduction, gg_dist_reduce the all-to-all path),
 * gg_dist_free, detach; NCCL memory's faults give their documented outcome (a failed staging leaves the ranks on SMs
 * with a WARN, gg_dist_alloc's is GG_ERROR_OUT_OF_MEMORY, a free at detach is a WARN and that memory lost), and no
 * window or NCCL allocation is left, no call made that NCCL would refuse. Prints `NCCL_FAULTS {"injected": n,
 * "failures": m}` over both paths.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ddp.h"
#include "fake_cuda.h"
#include "fake_nccl.h"
#include "fake_order.h"
#include "gradgraph.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits up to `seconds` for *value to reach `want`; returns the time it took, or -1. */
static double wait_for(atomic_int *value, int want, double seconds) {
    const double t0 = now_s();
    while (atomic_load(value) < want) {
        if (now_s() - t0 > seconds) return -1.0;
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return now_s() - t0;
}

/* The progress notices of waits on the other ranks (waiting.h) that the contexts below log, from the owner's thread
 * or the watchdog's: how many, and the last. */
static pthread_mutex_t notices_mu = PTHREAD_MUTEX_INITIALIZER;
static int n_notices;
static char last_notice[GG_MSG_BYTES];
static int not_watched; /* WARNs that a replay or collective goes unwatched (the watchdog could not record its event) */
static void notice_log(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (level == GG_LOG_WARN && strstr(message, "it is not watched")) {
        pthread_mutex_lock(&notices_mu);
        ++not_watched;
        pthread_mutex_unlock(&notices_mu);
    }
    if (level != GG_LOG_WARN || !strstr(message, "not finished after")) return;
    pthread_mutex_lock(&notices_mu);
    ++n_notices;
    snprintf(last_notice, sizeof last_notice, "%s", message);
    pthread_mutex_unlock(&notices_mu);
}

/* Starts counting notices afresh. */
static void notices_reset(void) {
    pthread_mutex_lock(&notices_mu);
    n_notices = 0;
    not_watched = 0;
    last_notice[0] = '\0';
    pthread_mutex_unlock(&notices_mu);
}

static int notices(void) {
    pthread_mutex_lock(&notices_mu);
    const int n = n_notices;
    pthread_mutex_unlock(&notices_mu);
    return n;
}

/* A wait bounded at 1 s said once, half-way, that it was still waiting: its notice names `what` and the variable. */
static void noticed_once(const char *what, const char *variable) {
    pthread_mutex_lock(&notices_mu);
    const int n = n_notices;
    char notice[GG_MSG_BYTES];
    snprintf(notice, sizeof notice, "%s", last_notice);
    pthread_mutex_unlock(&notices_mu);
    print_message("notice: %s\n", notice);
    assert_int_equal(n, 1);
    if (!strstr(notice, what) || !strstr(notice, variable) || !strstr(notice, "gradgraph gives up at 1 s"))
        fail_msg("the notice \"%s\" does not name \"%s\" and %s's 1 s", notice, what, variable);
}

static gg_ctx *make_ctx(void) {
    fake_reset(2);
    fake.plan_ok = 1;
    notices_reset();
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    c.log_fn = notice_log;
    c.log_level = GG_LOG_WARN;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    return ctx;
}

static gg_dist_config dist_config(void) {
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bind_cpus = 0;
    return dc;
}

/* A context with a fake two-rank communicator attached (the caller's: destroy it after the context). */
static gg_ctx *attached_ctx(ncclComm_t *comm) {
    gg_ctx *ctx = make_ctx();
    fake_nccl_reset(0, 2);
    const gg_dist_config dc = dist_config();
    *comm = fake_nccl_comm();
    assert_int_equal(gg_dist_attach(ctx, *comm, &dc), GG_SUCCESS);
    return ctx;
}

static const gg_tanh_gate_desc tanh_desc = {64, 4096, 0};

static gg_status tanh_eager(gg_ctx *ctx) {
    gg_tanh_gate_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6)};
    return gg_tanh_gate_backward(ctx, &tanh_desc, &a, NULL);
}

/* A graph config of one bucket of 64 tokens. */
static gg_graph_config bucket_of_64(void) {
    static const int64_t buckets[] = {64};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = buckets;
    gc.n_buckets = 1;
    return gc;
}

static gg_status tanh_graph(gg_ctx *ctx, gg_graph **g) {
    const gg_graph_config gc = bucket_of_64();
    return gg_tanh_gate_graph_create(ctx, &tanh_desc, &gc, g);
}

static gg_status tanh_run(gg_graph *g) {
    gg_tanh_gate_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6)};
    return gg_tanh_gate_graph_run(g, &tanh_desc, &a, NULL);
}

static void contains(const char *message, const char *part) {
    if (!strstr(message, part)) fail_msg("\"%s\" does not say \"%s\"", message, part);
}

static void no_leaks(void) {
    assert_int_equal(fake.live, 0);
    assert_int_equal(atomic_load(&fake_nccl.live), 0);
}

/* The end of a test with one context: detached (successfully, even after an abort), destroyed, then the caller's
 * attached communicator destroyed (NULL: none left, an abort freed it), and nothing left. */
static void detach_and_destroy(gg_ctx *ctx, ncclComm_t callers) {
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    if (callers) fake_nccl_destroy(callers);
    no_leaks();
}

/* A syncing MLP graph's call past its 64-token bucket (eager_beyond_max): its own plan, its gradients reduced
 * eagerly. */
typedef struct beyond_job {
    gg_graph *g;
    gg_status status;
} beyond_job;

static const gg_mlp_desc beyond_desc = {4096, 256, 1024, GG_PRECISION_FP32, 0}; /* past the graph's 64-token bucket */

static void *run_beyond_max(void *arg) {
    beyond_job *j = arg;
    gg_mlp_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7), FAKE(8), FAKE(9),
                     FAKE(10), NULL, NULL, NULL, NULL, NULL, NULL};
    j->status = gg_mlp_graph_run(j->g, &beyond_desc, &a, NULL);
    return NULL;
}

static gg_status beyond_graph(gg_ctx *ctx, gg_graph **g) {
    gg_graph_config gc = bucket_of_64();
    gc.eager_beyond_max = 1;
    gg_mlp_desc d = beyond_desc;
    d.tokens = 64;
    return gg_mlp_graph_create(ctx, &d, &gc, g);
}

/* A context with an attached communicator and, in job, a syncing graph whose calls past its bucket run eagerly. */
static gg_ctx *beyond_ctx(beyond_job *job) {
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    *job = (beyond_job){NULL, GG_ERROR_INTERNAL};
    assert_int_equal(beyond_graph(ctx, &job->g), GG_SUCCESS);
    return ctx;
}

/* Its end once the communicator was aborted (which freed the attached one): nothing left. */
static void beyond_end(gg_ctx *ctx, beyond_job *job) {
    gg_graph_destroy(job->g);
    detach_and_destroy(ctx, NULL);
}

/* ---- the fingerprint, as a pure function ---- */
static void fingerprint_difference_names_the_field(void **state) {
    (void)state;
    gg_dist_fingerprint lo = {{0}}, hi = {{0}};
    for (int i = 0; i < GG_FP_FIELDS; ++i) lo.field[i] = hi.field[i] = 100 + i;
    assert_int_equal(gg_dist_fp_first_difference(&lo, &hi), -1);
    for (int f = 0; f < GG_FP_FIELDS; ++f) {
        gg_dist_fingerprint h = hi;
        h.field[f] += 4096;
        assert_int_equal(gg_dist_fp_first_difference(&lo, &h), f);
        char msg[GG_MSG_BYTES], lo_s[32], hi_s[32];
        gg_dist_fp_describe(msg, sizeof msg, "gg_mlp_graph_create", f, &lo, &lo, &h);
        snprintf(lo_s, sizeof lo_s, "%lld", (long long)lo.field[f]);
        snprintf(hi_s, sizeof hi_s, "%lld", (long long)h.field[f]);
        contains(msg, "gg_mlp_graph_create");
        contains(msg, gg_dist_fp_names[f]);
        contains(msg, lo_s);
        contains(msg, hi_s);
        if (f + 1 < GG_FP_FIELDS) { /* the first difference is the one named */
            h.field[f + 1] -= 1;
            assert_int_equal(gg_dist_fp_first_difference(&lo, &h), f);
        }
    }
    assert_int_equal(gg_dist_hash(GG_DIST_HASH_SEED, "a", 1) == gg_dist_hash(GG_DIST_HASH_SEED, "b", 1), 0);
    assert_true(gg_dist_hash_field(~0ull) >= 0);
}

/* ---- the fingerprint through the comparison: another rank differs in one field ---- */
static int peer_field = -1;
static void peer_differs(void *dst, size_t bytes) {
    if (peer_field < 0 || bytes != 2 * GG_FP_FIELDS * sizeof(int64_t)) return;
    int64_t *v = dst, peer = v[peer_field] + 4096; /* min over {mine, peer} of each field and of its negation */
    if (peer < v[peer_field]) v[peer_field] = peer;
    if (-peer < v[GG_FP_FIELDS + peer_field]) v[GG_FP_FIELDS + peer_field] = -peer;
}

static void fingerprint_mismatch_refused_on_every_field(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    fake.on_copy_to_host = peer_differs;
    for (peer_field = 0; peer_field < GG_FP_FIELDS; ++peer_field) {
        gg_graph *g = NULL;
        const gg_status st = tanh_graph(ctx, &g);
        assert_int_equal(st, GG_ERROR_INVALID_ARGUMENT);
        assert_null(g);
        contains(gg_last_error(ctx), gg_dist_fp_names[peer_field]);
        contains(gg_last_error(ctx), "gg_tanh_gate_graph_create");
        assert_int_equal(gg_dist_check(ctx), GG_SUCCESS); /* the communicator stays */
    }
    peer_field = -1;
    fake.on_copy_to_host = NULL;
    gg_graph *g = NULL;
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    gg_graph_destroy(g);
    detach_and_destroy(ctx, comm); /* attached: the caller's */
}

/* ---- a syncing graph's creation: one collective step on every rank, whatever failed first ---- */
/* The ranks' all-ok step (gg_dist_all_ok: one int32) as this rank sent it; with peer_failed the other rank played here
 * failed to make its graph (the minimum is 0). */
static int votes, last_vote, peer_failed;
static void play_all_ok(void *dst, size_t bytes) {
    if (bytes != sizeof(int32_t)) return;
    ++votes;
    last_vote = *(int32_t *)dst;
    if (peer_failed) *(int32_t *)dst = 0;
}

/* A rank whose well-formed creation of a syncing graph fails before its plans are agreed (host memory, the device,
 * its plans) still takes part in the agreement, voting that it failed, so that the other ranks fail at once instead of
 * waiting for it to the peer deadline; the call keeps its own status and message, and the communicator stays. A
 * refused call (its arguments, a config of another version) enqueues nothing and votes nothing, nor does a graph that
 * does not sync. */
static void a_rank_failing_to_make_a_syncing_graph_still_votes(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    fake.on_copy_to_host = play_all_ok;
    enum { HOST_MEMORY, DEVICE, PLANS, OUT, DESC, EXECS, BUCKETS, SHAPE, VERSION, NOT_SYNCING, CASES };
    for (int c = 0; c < CASES; ++c) {
        gg_graph_config gc = bucket_of_64();
        gg_tanh_gate_desc d = tanh_desc;
        const gg_tanh_gate_desc *desc = &d;
        gg_graph *g = NULL, **out = &g;
        gg_status want = GG_ERROR_INVALID_ARGUMENT;
        const char *says = NULL;
        switch (c) {
        case OUT: out = NULL, says = "out is NULL"; break;
        case DESC: desc = NULL, says = "desc is NULL"; break;
        case EXECS: gc.execs_per_bucket = 0, says = "execs_per_bucket = 0"; break;
        case BUCKETS: gc.n_buckets = 0, says = "n_buckets"; break;
        case SHAPE: d.hidden = 0, says = "hidden"; break;
        case HOST_MEMORY:
            fake.fail_kind = FAKE_HOST_MEMORY, fake.fail_at = 1, fake.calls[FAKE_HOST_MEMORY] = 0;
            want = GG_ERROR_OUT_OF_MEMORY, says = "out of host memory";
            break;
        case DEVICE: fake.fail_get_device = 1, want = GG_ERROR_CUDA, says = "cudaGetDevice"; break;
        case PLANS: fake.plan_ok = 0, want = GG_ERROR_CUBLAS; break;
        case NOT_SYNCING:
            gc.sync_gradients = 0;
            fake.fail_kind = FAKE_HOST_MEMORY, fake.fail_at = 1, fake.calls[FAKE_HOST_MEMORY] = 0;
            want = GG_ERROR_OUT_OF_MEMORY, says = "out of host memory";
            break;
        case VERSION:
            gc.version = GG_GRAPH_CONFIG_VERSION + 1;
            want = GG_ERROR_VERSION, says = "GG_GRAPH_CONFIG_INIT";
            break;
        }
        votes = 0, last_vote = -1, fake.enqueued = 0;
        const char *fn = c == PLANS ? "gg_mlp_graph_create: " : "gg_tanh_gate_graph_create: ";
        gg_mlp_desc mlp = beyond_desc; /* block 1 plans no GEMM: an MLP's plans fail */
        mlp.tokens = 64;
        const gg_status st = c == PLANS ? gg_mlp_graph_create(ctx, &mlp, &gc, out)
                                        : gg_tanh_gate_graph_create(ctx, desc, &gc, out);
        fake.fail_at = 0, fake.fail_get_device = 0, fake.plan_ok = 1;
        (void)cudaGetLastError(); /* the failed cudaGetDevice's */
        const char *said = gg_last_error(ctx);
        print_message("case %d: %s: %s (votes %d)\n", c, gg_status_string(st), said, votes);
        assert_int_equal(st, want);
        assert_null(g);
        assert_int_equal(strncmp(said, fn, strlen(fn)), 0);
        if (says) contains(said, says);
        assert_null(strstr(said, "another rank")); /* its own failure, not the vote's */
        assert_int_equal(votes, c <= PLANS); /* the failures vote, the refusals do not */
        if (c <= PLANS) assert_int_equal(last_vote, 0);
        if (c > PLANS && c != NOT_SYNCING) assert_int_equal(fake.enqueued, 0); /* a refused call enqueues nothing */
        assert_int_equal(gg_dist_check(ctx), GG_SUCCESS); /* the communicator stays */
        assert_int_equal(atomic_load(&fake_nccl.aborts), 0);
    }
    /* and a graph made: one vote, that it did */
    gg_graph *g = NULL;
    votes = 0;
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    assert_int_equal(votes, 1);
    assert_int_equal(last_vote, 1);
    gg_graph_destroy(g);
    fake.on_copy_to_host = NULL;
    detach_and_destroy(ctx, comm);
}

/* Another rank failed to make its graph (its vote): this rank's call fails too, GG_ERROR_PEER, with nothing made and
 * nothing left; the communicator stays, and the next creation works. */
static void a_peer_failing_to_make_a_syncing_graph_fails_it_here(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    fake.on_copy_to_host = play_all_ok;
    peer_failed = 1;
    gg_graph *g = NULL;
    const gg_status st = tanh_graph(ctx, &g);
    peer_failed = 0;
    assert_int_equal(st, GG_ERROR_PEER);
    assert_null(g);
    contains(gg_last_error(ctx), "gg_tanh_gate_graph_create: another rank failed to make this graph");
    assert_int_equal(gg_dist_check(ctx), GG_SUCCESS);
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    gg_graph_destroy(g);
    fake.on_copy_to_host = NULL;
    detach_and_destroy(ctx, comm);
}

/* ---- deadlines ---- */
static void init_that_never_completes_is_aborted(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    fake_nccl_reset(0, 1);
    fake_nccl.init_in_progress = 1;
    setenv("GG_DIST_INIT_TIMEOUT_S", "1", 1);
    const gg_dist_config dc = dist_config();
    const double t0 = now_s();
    const gg_status st = gg_dist_init_threads(&ctx, 1, &dc);
    const double took = now_s() - t0;
    print_message("init never ready: %s after %.2f s: %s\n", gg_status_string(st), took, gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_true(took >= 1.0 && took < 15.0); /* bounded; the upper bound leaves a loaded CI machine room */
    contains(gg_last_error(ctx), "GG_DIST_INIT_TIMEOUT_S");
    contains(gg_last_error(ctx), "aborted");
    noticed_once("gg_dist_init_threads: rank 0: ncclCommInitRankConfig (one per device, grouped): not finished after",
                 "GG_DIST_INIT_TIMEOUT_S");
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    assert_int_equal(gg_dist_size(ctx), 0);
    /* usable: the next init works, and its teardown finalizes and destroys */
    fake_nccl.init_in_progress = 0;
    assert_int_equal(gg_dist_init_threads(&ctx, 1, &dc), GG_SUCCESS);
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    assert_int_equal(atomic_load(&fake_nccl.finalizes), 1);
    assert_int_equal(atomic_load(&fake_nccl.destroys), 1);
    unsetenv("GG_DIST_INIT_TIMEOUT_S");
    gg_ctx_destroy(ctx);
    no_leaks();
}

/* Starts a call bounded by the peer deadline, set to 1 s for it; returns when it started. */
static double peer_deadline_1s(void) {
    setenv("GG_DIST_PEER_TIMEOUT_S", "1", 1);
    notices_reset();
    return now_s();
}

/* Ends such a call (the deadline unset) and checks what it must show: GG_ERROR_NCCL with `text` in its message, at
 * least min_s and under 15 s after `start` (the upper bound leaves a loaded CI machine room), the communicator
 * aborted once; a call that waited out the deadline (notice not NULL) said half-way that it was still waiting, in a
 * notice that holds `notice`. */
static void expect_aborted_at_deadline(gg_ctx *ctx, const char *what, gg_status st, double start, double min_s,
                                       const char *text, const char *notice) {
    const double took = now_s() - start;
    unsetenv("GG_DIST_PEER_TIMEOUT_S");
    print_message("%s: %s after %.2f s: %s\n", what, gg_status_string(st), took, gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_true(took >= min_s && took < 15.0);
    contains(gg_last_error(ctx), text);
    contains(gg_last_error(ctx), "do not destroy it"); /* an aborted communicator, the caller's attached one too */
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    if (notice) noticed_once(notice, "GG_DIST_PEER_TIMEOUT_S");
}

static void finalize_that_never_ends_is_aborted(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    fake_nccl_reset(0, 1);
    const gg_dist_config dc = dist_config();
    assert_int_equal(gg_dist_init_threads(&ctx, 1, &dc), GG_SUCCESS);
    fake_nccl.finalize_in_progress = 1;
    const double start = peer_deadline_1s();
    const gg_status st = gg_dist_detach(ctx);
    expect_aborted_at_deadline(ctx, "finalize never ends", st, start, 1.0, "ncclCommFinalize had not ended",
                               "gg_dist_detach: rank 0: ncclCommFinalize: not finished after");
    assert_int_equal(atomic_load(&fake_nccl.destroys), 0);
    assert_int_equal(gg_dist_size(ctx), 0);
    gg_ctx_destroy(ctx);
    no_leaks();
}

/* One process per GPU from the launcher's environment and a file on a shared path (gg_dist_init_env), on the fakes:
 * without RANK and WORLD_SIZE the call is refused naming them; rank 0 of 1 writes NCCL's id, makes its communicator and
 * removes the file, and removes it too when its init fails; rank 1 of 2 reads the id that rank 0 left there and makes
 * its own; a rank 1 whose rank 0 never writes gives up at GG_DIST_INIT_TIMEOUT_S (1 s here), naming the file and the
 * variable, after one notice half-way, with no communicator and the context usable. */
static void init_env_through_an_id_file(void **state) {
    (void)state;
    static const char *const launchers[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                            "SLURM_PROCID", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; ++i) unsetenv(launchers[i]);
    char path[64];
    snprintf(path, sizeof path, "/tmp/gg_dist_faults_id_%d", (int)getpid());
    (void)remove(path);
    const gg_dist_config dc = dist_config();
    gg_ctx *ctx = make_ctx();
    fake_nccl_reset(0, 1);
    assert_int_equal(gg_dist_init_env(ctx, path, &dc), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_dist_init_env: no valid rank and world size in the environment");
    contains(gg_last_error(ctx), "RANK/WORLD_SIZE");

    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    assert_int_equal(gg_dist_init_env(ctx, path, &dc), GG_SUCCESS);
    assert_int_equal(gg_dist_size(ctx), 1);
    assert_int_equal(access(path, F_OK), -1); /* removed once the communicator exists */
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    assert_int_equal(atomic_load(&fake_nccl.destroys), 1); /* gradgraph's own: finalized and destroyed */
    fake_nccl_reset(0, 1); /* rank 0's init fails: the id it wrote goes too (a next launch must not read it) */
    fake_nccl.fail_kind = FN_INIT;
    fake_nccl.fail_at = 1;
    assert_int_equal(gg_dist_init_env(ctx, path, &dc), GG_ERROR_NCCL);
    assert_int_equal(fake_nccl.injected, 1);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(gg_dist_size(ctx), 0);

    fake_nccl_reset(1, 2);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    FILE *f = fopen(path, "wb"); /* what rank 0 would have written */
    assert_non_null(f);
    const ncclUniqueId id = {{7}};
    assert_int_equal(fwrite(&id, sizeof id, 1, f), 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gg_dist_init_env(ctx, path, &dc), GG_SUCCESS);
    assert_int_equal(gg_dist_size(ctx), 2);
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    assert_int_equal(remove(path), 0); /* rank 1 leaves it: rank 0 removes it */

    setenv("GG_DIST_INIT_TIMEOUT_S", "1", 1);
    notices_reset();
    const double t0 = now_s();
    const gg_status st = gg_dist_init_env(ctx, path, &dc);
    const double took = now_s() - t0;
    unsetenv("GG_DIST_INIT_TIMEOUT_S");
    print_message("rank 0 never writes: %s after %.2f s: %s\n", gg_status_string(st), took, gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_true(took >= 1.0 && took < 15.0);
    contains(gg_last_error(ctx), "gg_dist_init_env: rank 1 waited 1 s for rank 0 to write the NCCL id to");
    contains(gg_last_error(ctx), path);
    contains(gg_last_error(ctx), "(GG_DIST_INIT_TIMEOUT_S)");
    noticed_once("gg_dist_init_env: rank 1: the NCCL id from rank 0 in", "GG_DIST_INIT_TIMEOUT_S");
    assert_int_equal(gg_dist_size(ctx), 0);
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    gg_ctx_destroy(ctx);
    no_leaks();
}

/* A communicator on another device than the context's is refused, named, before anything is made: the caller's
 * communicator is left alone (not aborted), the context has none. */
static void attach_refuses_a_communicator_on_another_device(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    fake_nccl_reset(0, 2);
    fake_nccl.device = 1;
    const gg_dist_config dc = dist_config();
    ncclComm_t comm = fake_nccl_comm();
    assert_int_equal(gg_dist_attach(ctx, comm, &dc), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_dist_attach: the communicator is on device 1, the context on 0");
    assert_int_equal(gg_dist_size(ctx), 0);
    assert_true(fake_nccl_is_live(comm));
    assert_int_equal(atomic_load(&fake_nccl.aborts), 0);
    assert_int_equal(fake_nccl.logged, 0); /* no collective */
    gg_ctx_destroy(ctx);
    fake_nccl_destroy(comm);
    no_leaks();
}

/* The warm-up all-reduce at attach never completes (the other rank never attaches), fails on the GPU, or NCCL reports
 * an asynchronous error while it runs: bounded by the peer deadline, GG_ERROR_NCCL naming what happened (NCCL's error
 * in its words), the attached communicator aborted, the context without one. */
static void warm_up_that_never_completes_or_fails_is_aborted(void **state) {
    (void)state;
    static const char *const said[] = {"the warm-up all-reduce on rank 0 waited 1 s for the other ranks",
                                       "the warm-up all-reduce on rank 0 failed (unspecified launch failure)",
                                       "NCCL reported an error in the warm-up all-reduce on rank 0 ("}; /* and why */
    static const char *const what[] = {"warm-up never completes", "warm-up fails", "NCCL fails during the warm-up"};
    for (int outcome = 0; outcome < 3; ++outcome) { /* the peer never joins; the stream fails; NCCL reports an error */
        gg_ctx *ctx = make_ctx();
        fake_nccl_reset(0, 2);
        const gg_dist_config dc = dist_config();
        ncclComm_t comm = fake_nccl_comm();
        if (outcome == 1) atomic_store(&fake.streams_error, (int)cudaErrorLaunchFailure);
        else atomic_store(&fake.streams_busy, 1);
        if (outcome == 2) atomic_store(&fake_nccl.async_error, ncclRemoteError);
        const double start = peer_deadline_1s();
        const gg_status st = gg_dist_attach(ctx, comm, &dc);
        atomic_store(&fake.streams_busy, 0);
        atomic_store(&fake.streams_error, 0);
        atomic_store(&fake_nccl.async_error, ncclSuccess);
        expect_aborted_at_deadline(ctx, what[outcome], st, start, outcome == 0 ? 1.0 : 0.0, said[outcome],
                                   outcome == 0 ? "gg_dist_attach: rank 0: the warm-up all-reduce: not finished"
                                                : NULL);
        assert_int_equal(gg_dist_size(ctx), 0);
        gg_ctx_destroy(ctx);
        no_leaks();
    }
}

/* A non-blocking NCCL call that stays in progress (its peer never joins) is bounded by the peer deadline:
 * GG_ERROR_NCCL naming the call, the communicator aborted; eager calls that do not need it work. */
static void call_that_stays_in_progress_is_aborted(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    fake_nccl.in_progress_calls = 1;
    fake_nccl.calls_stay_in_progress = 1;
    const double start = peer_deadline_1s();
    const gg_status st = gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL);
    fake_nccl.in_progress_calls = fake_nccl.calls_stay_in_progress = 0;
    expect_aborted_at_deadline(ctx, "call stays in progress", st, start, 1.0,
                               "rank 0: ncclAllReduce was still in progress after 1 s (GG_DIST_PEER_TIMEOUT_S)",
                               "gg_dist_reduce: rank 0: ncclAllReduce: not finished after");
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    detach_and_destroy(ctx, NULL);
}

/* A detach whose communication stream never drains (a peer that never joins its collective) is bounded: aborted at
 * the peer timeout, the attached communicator aborted rather than left for the caller to destroy. */
static void stream_that_never_drains_is_aborted_at_detach(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    atomic_store(&fake.streams_busy, 1);
    const double start = peer_deadline_1s();
    const gg_status st = gg_dist_detach(ctx);
    atomic_store(&fake.streams_busy, 0);
    expect_aborted_at_deadline(ctx, "stream never drains", st, start, 1.0,
                               "the communication stream had not drained after 1 s",
                               "gg_dist_detach: rank 0: draining the communication stream: not finished after");
    assert_int_equal(gg_dist_size(ctx), 0);
    gg_ctx_destroy(ctx);
    no_leaks(); /* the aborted communicator is gone: the caller must not destroy it */
}

/* A context destroyed with its communicator still attached releases it (its destroy hook): the caller's attached
 * communicator survives for the caller to destroy, nothing else is left. */
static void context_destroyed_with_its_communicator(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
    assert_true(fake_nccl_is_live(comm));
    assert_int_equal(atomic_load(&fake_nccl.aborts), 0);
    fake_nccl_destroy(comm);
    no_leaks();
}

/* The watchdog: an asynchronous error, then a replay past the step deadline. */
static void async_error_is_aborted_by_the_watchdog(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    gg_graph *g = NULL;
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    assert_int_equal(tanh_run(g), GG_SUCCESS);
    char dot[64];
    snprintf(dot, sizeof dot, "/tmp/gg_dist_faults_%d.dot", (int)getpid());
    assert_int_equal(gg_graph_debug_dot(g, 0, dot, 0), GG_SUCCESS); /* captured again, NCCL calls included */
    atomic_store(&fake_nccl.async_error, ncclRemoteError);
    assert_true(wait_for(&fake_nccl.aborts, 1, 10.0) >= 0);
    assert_int_equal(gg_graph_debug_dot(g, 0, dot, 0), GG_ERROR_NCCL); /* no capture on an aborted communicator */
    contains(gg_last_error(ctx), "gg_graph_debug_dot");
    remove(dot);
    gg_graph_destroy(g);
    assert_int_equal(gg_dist_check(ctx), GG_ERROR_NCCL);
    contains(gg_last_error(ctx), "asynchronous error");
    contains(gg_last_error(ctx), "rank 0");
    assert_null(gg_dist_comm(ctx));
    assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL), GG_ERROR_NCCL);
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    detach_and_destroy(ctx, NULL); /* the abort freed the attached communicator */
}

/* gg_dist_reduce refuses host memory by name, before any NCCL call, and the communicator stays usable. */
static void reduce_refuses_host_memory(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    fake.host_lo = (uintptr_t)FAKE(9);
    fake.host_hi = fake.host_lo + 4096;
    const int collectives = atomic_load(&fake_nccl.collectives);
    fake.enqueued = 0;
    assert_int_equal(gg_dist_reduce(ctx, FAKE(9), 1024, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_dist_reduce: data (");
    contains(gg_last_error(ctx), "is host memory; gradgraph needs device memory");
    assert_int_equal(atomic_load(&fake_nccl.collectives), collectives);
    assert_int_equal(fake.enqueued, 0);
    /* a count larger than the buffer: its last byte is no device memory (here the host range just past FAKE(8)'s
     * 1024 floats' first 4095 bytes) */
    fake.host_lo = (uintptr_t)FAKE(8) + 4095;
    fake.host_hi = fake.host_lo + 1;
    assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1023, 0, NULL), GG_SUCCESS); /* 4092 bytes: within */
    assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_dist_reduce: the last byte of data's 4096 bytes (");
    contains(gg_last_error(ctx), "is not device memory: the buffer is smaller than the call says");
    const int before = atomic_load(&fake_nccl.collectives);
    fake.enqueued = 0;
    assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL), GG_ERROR_INVALID_ARGUMENT); /* never remembered */
    assert_int_equal(atomic_load(&fake_nccl.collectives), before);
    assert_int_equal(fake.enqueued, 0);
    fake.host_lo = fake.host_hi = 0;
    assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL), GG_SUCCESS);
    detach_and_destroy(ctx, comm); /* attached: the caller's */
}

static void replay_past_the_step_deadline_is_aborted(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    fake_nccl_reset(0, 2);
    setenv("GG_DIST_STEP_TIMEOUT_S", "1", 1);
    const gg_dist_config dc = dist_config();
    ncclComm_t comm = fake_nccl_comm();
    assert_int_equal(gg_dist_attach(ctx, comm, &dc), GG_SUCCESS);
    gg_graph *g = NULL;
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    /* replays that finish are never aborted, however long the run */
    notices_reset();
    for (int i = 0; i < 40; ++i) assert_int_equal(tanh_run(g), GG_SUCCESS);
    const struct timespec wait = {1, 300000000};
    nanosleep(&wait, NULL);
    assert_int_equal(atomic_load(&fake_nccl.aborts), 0);
    assert_int_equal(notices(), 0); /* nor do they say they are waiting */
    /* replays queued far ahead, each 0.4 s of GPU work after the one before (2.4 s in all, more than the deadline):
     * each is timed from when it can run, so none is late */
    fake.events_apart_s = 0.4;
    fake.events_last_done_s = 0;
    for (int i = 0; i < 6; ++i) assert_int_equal(tanh_run(g), GG_SUCCESS);
    const struct timespec queue = {3, 0};
    nanosleep(&queue, NULL);
    fake.events_apart_s = 0;
    print_message("6 replays queued ahead, 2.4 s of work against a 1 s deadline: %d aborts\n",
                  atomic_load(&fake_nccl.aborts));
    assert_int_equal(atomic_load(&fake_nccl.aborts), 0);
    /* a replay that never finishes (its peer is gone) */
    notices_reset();
    fake.events_busy = 1;
    assert_int_equal(tanh_run(g), GG_SUCCESS);
    const double took = wait_for(&fake_nccl.aborts, 1, 15.0);
    print_message("replay never finishes: aborted after %.2f s\n", took);
    assert_true(took >= 0.9 && took < 15.0); /* bounded; the upper bound leaves a loaded CI machine room */
    noticed_once("rank 0: a replay of a syncing graph: not finished after", "GG_DIST_STEP_TIMEOUT_S");
    assert_int_equal(tanh_run(g), GG_ERROR_NCCL);
    contains(gg_last_error(ctx), "gg_tanh_gate_graph_run");
    contains(gg_last_error(ctx), "had not finished after 1 s");
    contains(gg_last_error(ctx), "GG_DIST_STEP_TIMEOUT_S");
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS); /* eager calls work */
    fake.events_busy = 0;
    gg_graph_destroy(g);
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    unsetenv("GG_DIST_STEP_TIMEOUT_S");
    gg_ctx_destroy(ctx);
    no_leaks();
}

/* At most 16 replays of syncing graphs in flight: a further run waits for the oldest to finish before its launch,
 * which is made holding the communicator's lock, so that the launch never blocks in CUDA's launch queue behind
 * replays stuck on a dead peer, out of the watchdog's reach. Replays of 20 ms each, 40 queued: all run, the host
 * held back to 16 ahead. Replays that never finish: the 17th run waits without launching, and the watchdog's abort
 * at the step deadline (1 s) ends the wait with GG_ERROR_NCCL. */
static void runs_wait_for_a_replay_slot(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    gg_graph *g = NULL;
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    assert_int_equal(tanh_run(g), GG_SUCCESS); /* captured */
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    fake.events_apart_s = 0.02;
    fake.events_last_done_s = 0;
    double t0 = now_s();
    for (int i = 0; i < 40; ++i) assert_int_equal(tanh_run(g), GG_SUCCESS);
    const double queued = now_s() - t0;
    nanosleep(&(struct timespec){1, 0}, NULL);
    fake.events_apart_s = 0;
    print_message("40 replays of 20 ms: the host returned after %.2f s (24 waited for a slot)\n", queued);
    assert_true(queued >= 24 * 0.02 * 0.9); /* held back: 24 runs each waited for the oldest replay */
    assert_int_equal(atomic_load(&fake_nccl.aborts), 0);

    setenv("GG_DIST_STEP_TIMEOUT_S", "1", 1);
    fake.events_busy = 1;
    for (int i = 0; i < 16; ++i) assert_int_equal(tanh_run(g), GG_SUCCESS);
    const int launches = fake.calls[FAKE_GRAPH_LAUNCH];
    t0 = now_s();
    const gg_status st = tanh_run(g);
    const double took = now_s() - t0;
    print_message("17th replay behind 16 that never finish: %s after %.2f s: %s\n", gg_status_string(st), took,
                  gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], launches); /* never launched */
    assert_true(took >= 0.9 && took < 15.0);                    /* the step deadline's abort ended the wait */
    contains(gg_last_error(ctx), "waiting for the oldest of 16 replays of syncing graphs in flight was interrupted");
    contains(gg_last_error(ctx), "had not finished after 1 s (GG_DIST_STEP_TIMEOUT_S)");
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    fake.events_busy = 0;
    unsetenv("GG_DIST_STEP_TIMEOUT_S");
    gg_graph_destroy(g);
    detach_and_destroy(ctx, NULL); /* aborted: the attached communicator is gone too */
}

/* Collectives gradgraph enqueues outside a graph are watched like replays: gg_dist_reduce's, and a syncing graph's
 * call past its largest bucket (eager_beyond_max), whose gradients are reduced eagerly. One that never finishes (its
 * peer is gone, with no NCCL error) is aborted at the step deadline, with a notice half-way naming it, and the next
 * call says why; before, nothing watched them and a stalled peer left the application's next sync waiting forever. */
static void eager_collectives_past_the_step_deadline_are_aborted(void **state) {
    (void)state;
    static const char *const what[] = {"gg_dist_reduce's collective",
                                       "the gradient reduction of a call past a syncing graph's largest bucket"};
    for (int which = 0; which < 2; ++which) {
        ncclComm_t comm = NULL;
        gg_ctx *ctx = attached_ctx(&comm);
        setenv("GG_DIST_STEP_TIMEOUT_S", "1", 1);
        gg_graph *g = NULL;
        if (which == 1) assert_int_equal(beyond_graph(ctx, &g), GG_SUCCESS);
        notices_reset();
        fake.events_busy = 1; /* the work never finishes */
        beyond_job job = {g, GG_ERROR_INTERNAL};
        if (which == 0) assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL), GG_SUCCESS);
        else (void)run_beyond_max(&job), assert_int_equal(job.status, GG_SUCCESS);
        const double took = wait_for(&fake_nccl.aborts, 1, 15.0);
        print_message("%s never finishes: aborted after %.2f s\n", what[which], took);
        assert_true(took >= 0.9 && took < 15.0);
        noticed_once(what[which], "GG_DIST_STEP_TIMEOUT_S");
        assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL), GG_ERROR_NCCL);
        contains(gg_last_error(ctx), what[which]);
        contains(gg_last_error(ctx), "had not finished after 1 s (GG_DIST_STEP_TIMEOUT_S)");
        assert_int_equal(tanh_eager(ctx), GG_SUCCESS); /* eager calls work */
        fake.events_busy = 0;
        unsetenv("GG_DIST_STEP_TIMEOUT_S");
        gg_graph_destroy(g);
        detach_and_destroy(ctx, NULL); /* aborted: the attached communicator is gone too */
    }
}

/* A replay that fails on the GPU (its event reports a sticky error) is caught by the watchdog, which aborts the
 * communicator; the next run names the error, eager calls work. */
static void replay_failed_on_the_gpu_is_aborted(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    gg_graph *g = NULL;
    assert_int_equal(tanh_graph(ctx, &g), GG_SUCCESS);
    assert_int_equal(tanh_run(g), GG_SUCCESS);
    atomic_store(&fake.events_error, (int)cudaErrorIllegalAddress);
    assert_int_equal(tanh_run(g), GG_SUCCESS);
    const double took = wait_for(&fake_nccl.aborts, 1, 15.0);
    print_message("replay failed on the GPU: aborted after %.2f s\n", took);
    assert_true(took < 15.0);
    atomic_store(&fake.events_error, 0);
    assert_int_equal(tanh_run(g), GG_ERROR_NCCL);
    contains(gg_last_error(ctx), "a replay of a syncing graph failed on the GPU (cudaErrorIllegalAddress)");
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    gg_graph_destroy(g);
    detach_and_destroy(ctx, NULL); /* aborted: the attached communicator is gone too */
}

/* The communication stream fails (a sticky error on it) while a syncing graph's creation waits for the ranks'
 * agreement, then in an attach's warm-up: each call returns GG_ERROR_NCCL naming itself and the stream's error, the
 * communicator is aborted (the attached one with it), and eager calls work. */
static void stream_failed_in_an_agreement_is_aborted(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    atomic_store(&fake.streams_error, (int)cudaErrorIllegalAddress);
    gg_graph *g = NULL;
    const gg_status st = tanh_graph(ctx, &g);
    atomic_store(&fake.streams_error, 0);
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_null(g);
    const char *said = gg_last_error(ctx);
    if (strncmp(said, "gg_tanh_gate_graph_create: ", 27) != 0 ||
        !strstr(said, "the communication stream failed (an illegal memory access was encountered): the communicator "
                      "is aborted"))
        fail_msg("message: \"%s\"", said);
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    /* the same in the warm-up of an attach: refused, the communicator aborted, the context without one */
    comm = fake_nccl_comm();
    const gg_dist_config dc = dist_config();
    atomic_store(&fake.streams_error, (int)cudaErrorIllegalAddress);
    const gg_status attached = gg_dist_attach(ctx, comm, &dc);
    atomic_store(&fake.streams_error, 0);
    assert_int_equal(attached, GG_ERROR_NCCL);
    said = gg_last_error(ctx);
    if (strncmp(said, "gg_dist_attach: ", 16) != 0 || !strstr(said, "the warm-up all-reduce on rank 0 failed"))
        fail_msg("message: \"%s\"", said);
    assert_int_equal(atomic_load(&fake_nccl.aborts), 2);
    assert_int_equal(gg_dist_size(ctx), 0);
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    no_leaks(); /* aborted: the attached communicators are gone too */
}

/* The other ranks never join a syncing graph's agreement (its collective stays in flight): bounded by the peer
 * deadline, GG_ERROR_NCCL naming the creation and the wait, the communicator aborted, eager calls working. */
static void agreement_the_peers_never_join_is_aborted(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    atomic_store(&fake.streams_busy, 1);
    const double start = peer_deadline_1s();
    gg_graph *g = NULL;
    const gg_status st = tanh_graph(ctx, &g);
    atomic_store(&fake.streams_busy, 0);
    expect_aborted_at_deadline(ctx, "agreement never joined", st, start, 1.0,
                               "rank 0 waited 1 s for the other ranks, which did not join (GG_DIST_PEER_TIMEOUT_S",
                               "gg_tanh_gate_graph_create: rank 0:");
    assert_null(g);
    if (strncmp(gg_last_error(ctx), "gg_tanh_gate_graph_create: ", 27) != 0)
        fail_msg("message: \"%s\"", gg_last_error(ctx));
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    detach_and_destroy(ctx, NULL);
}

/* A step of the ranks' agreement whose NCCL call fails at once (not in progress): this rank's part never ran, so the
 * others would wait for it; the communicator is aborted (as GG_ERROR_NCCL promises, and as NCCL then tells the
 * others), the next call says so, eager calls work. */
static void agreement_that_fails_at_once_is_aborted(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    fake_nccl.fail_kind = FN_ALL_REDUCE;
    fake_nccl.fail_at = fake_nccl.calls[FN_ALL_REDUCE] + 1; /* the graph's first agreement step */
    gg_graph *g = NULL;
    const gg_status st = tanh_graph(ctx, &g);
    fake_nccl.fail_at = 0;
    print_message("agreement fails at once: %s: %s\n", gg_status_string(st), gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_null(g);
    contains(gg_last_error(ctx), "gg_tanh_gate_graph_create");
    contains(gg_last_error(ctx), "ncclAllReduce");
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    assert_int_equal(gg_dist_check(ctx), GG_ERROR_NCCL);
    contains(gg_last_error(ctx), "aborted");
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    detach_and_destroy(ctx, NULL); /* aborted: the attached communicator is gone too */
}

/* ---- gg_dist_abort from another thread ---- */
typedef struct abort_job {
    gg_ctx *ctx;
    double delay_s;
    gg_status status;
} abort_job;

static void *abort_later(void *arg) {
    abort_job *j = arg;
    const struct timespec d = {(time_t)j->delay_s, (long)((j->delay_s - (double)(time_t)j->delay_s) * 1e9)};
    nanosleep(&d, NULL);
    j->status = gg_dist_abort(j->ctx);
    return NULL;
}

static void abort_from_another_thread(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    /* the owner waits in a collective step that never ends (its stream stays busy): the abort ends the wait */
    fake.streams_busy = 1;
    abort_job job = {ctx, 0.2, GG_ERROR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, abort_later, &job), 0);
    gg_graph *g = NULL;
    const double t0 = now_s();
    const gg_status st = tanh_graph(ctx, &g);
    const double took = now_s() - t0;
    pthread_join(t, NULL);
    fake.streams_busy = 0;
    print_message("aborted while making a graph: %s after %.2f s: %s\n", gg_status_string(st), took,
                  gg_last_error(ctx));
    assert_int_equal(job.status, GG_SUCCESS);
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_true(took < 10.0); /* the abort at 0.2 s ends the wait (a loaded CI machine may take longer) */
    assert_null(g);
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    assert_int_equal(gg_dist_check(ctx), GG_ERROR_NCCL);
    contains(gg_last_error(ctx), "gg_dist_abort was called");
    assert_int_equal(gg_dist_abort(ctx), GG_SUCCESS); /* again: nothing left to abort */
    assert_int_equal(gg_dist_abort(NULL), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(NULL), "gg_dist_abort: ctx is NULL");
    assert_int_equal(tanh_eager(ctx), GG_SUCCESS);
    detach_and_destroy(ctx, NULL);
}

/* Fails the k-th call of one kind of CUDA work from now on; returns what disarm_call_fault compares with. */
static int arm_call_fault(fake_kind kind, int k) {
    fake.fail_kind = kind;
    fake.calls[kind] = 0;
    fake.fail_at = k;
    return fake.injected;
}
/* Disarms it; returns how many faults it injected. */
static int disarm_call_fault(int armed) {
    fake.fail_at = 0;
    return fake.injected - armed;
}

/* gg_dist_free's cudaFree waits for the device, which a replay stuck on a dead peer keeps busy: the free must not hold
 * the communicator's lock meanwhile, or the watchdog and gg_dist_abort, which take it to abort that replay, would
 * wait for the free, and nothing would ever end. Here the free's cudaFree blocks until the abort returned. */
static atomic_int held_entered, held_may_end;
static void hold_until_aborted(void) {
    atomic_store(&held_entered, 1);
    const double t0 = now_s(); /* bounded: without the fix the abort never comes, and the test fails, not hangs */
    while (!atomic_load(&held_may_end) && now_s() - t0 < 5.0) nanosleep(&(struct timespec){0, 1000000}, NULL);
}
static void free_waits(void *ptr) {
    (void)ptr;
    hold_until_aborted();
}
/* A failed call's wait for the work it forked (once a fault was injected): behind a replay stuck on a dead peer. */
static void failed_call_sync_waits(cudaStream_t stream) {
    (void)stream;
    if (fake.injected) hold_until_aborted();
}

typedef struct free_job {
    gg_ctx *ctx;
    void *ptr;
    gg_status status;
} free_job;

static void *free_in_thread(void *arg) {
    free_job *j = arg;
    j->status = gg_dist_free(j->ctx, j->ptr);
    return NULL;
}

/* Runs call(job) on another thread, whose wait in the fakes' hook that the caller set is held (hold_until_aborted)
 * until this thread has aborted the communicator, which it does as soon as the wait is entered; returns how long
 * gg_dist_abort took. */
static double abort_while_held(gg_ctx *ctx, void *(*call)(void *), void *job) {
    atomic_store(&held_entered, 0);
    atomic_store(&held_may_end, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call, job), 0);
    while (!atomic_load(&held_entered)) nanosleep(&(struct timespec){0, 1000000}, NULL);
    const double t0 = now_s();
    const gg_status aborted = gg_dist_abort(ctx); /* what the watchdog does at the step deadline */
    const double took = now_s() - t0;
    atomic_store(&held_may_end, 1);
    pthread_join(t, NULL);
    assert_int_equal(aborted, GG_SUCCESS);
    return took;
}

/* abort_while_held with the call's cudaFree held. */
static double abort_while_a_free_waits(gg_ctx *ctx, void *(*call)(void *), void *job) {
    fake.on_free = free_waits;
    const double took = abort_while_held(ctx, call, job);
    fake.on_free = NULL;
    return took;
}

static void abort_during_a_free_that_waits(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = attached_ctx(&comm);
    void *buffer = NULL;
    assert_int_equal(gg_dist_alloc(ctx, 1 << 20, &buffer), GG_SUCCESS);
    free_job job = {ctx, buffer, GG_ERROR_INTERNAL};
    const double took = abort_while_a_free_waits(ctx, free_in_thread, &job);
    print_message("gg_dist_abort during a free waiting for the device: after %.3f s\n", took);
    assert_true(took < 2.0); /* not behind the free (5 s) */
    assert_int_equal(job.status, GG_SUCCESS);
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    detach_and_destroy(ctx, NULL);
}

/* The same for a syncing graph's call past its largest bucket (eager_beyond_max): its eager path makes a plan for the
 * new token count, which grows the scratch arena, and the old arena's cudaFree waits for the device. The plan is made
 * before the call takes the communicator's lock, so the abort goes through at once. */
static void abort_during_a_run_past_the_buckets_that_plans(void **state) {
    (void)state;
    beyond_job job;
    gg_ctx *ctx = beyond_ctx(&job);
    const double took = abort_while_a_free_waits(ctx, run_beyond_max, &job);
    print_message("gg_dist_abort during a run past the buckets whose plan frees the arena: after %.3f s; the run: "
                  "%s: %s\n", took, gg_status_string(job.status), gg_last_error(ctx));
    assert_true(took < 2.0); /* not behind the plan's free (5 s) */
    assert_int_equal(job.status, GG_ERROR_NCCL); /* aborted before it reduced anything */
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    beyond_end(ctx, &job);
}

/* A syncing graph's call past its largest bucket whose enqueue fails waits for the work it forked (gradgraph's side
 * stream), which may wait behind a replay stuck on a dead peer: that wait comes after the call has released the
 * communicator's lock, so the abort goes through at once. Here a kernel launch of the call fails and the wait is held
 * until the abort returned. */
static void abort_during_a_failed_run_past_the_buckets(void **state) {
    (void)state;
    beyond_job job;
    gg_ctx *ctx = beyond_ctx(&job);
    (void)run_beyond_max(&job); /* its plan made: the run below fails in its enqueue */
    assert_int_equal(job.status, GG_SUCCESS);
    const int armed = arm_call_fault(FAKE_LAUNCH, 1);
    fake.on_stream_sync = failed_call_sync_waits;
    const double took = abort_while_held(ctx, run_beyond_max, &job);
    fake.on_stream_sync = NULL;
    const int injected_faults = disarm_call_fault(armed);
    print_message("gg_dist_abort during a failed run past the buckets waiting for its forked work: after %.3f s; the "
                  "run: %s: %s\n", took, gg_status_string(job.status), gg_last_error(ctx));
    assert_int_equal(injected_faults, 1);
    assert_true(took < 2.0); /* not behind the wait (5 s) */
    assert_int_equal(job.status, GG_ERROR_PARTIAL);
    contains(gg_last_error(ctx), "the communicator is aborted"); /* by the failed call: its collectives are missing */
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    beyond_end(ctx, &job);
}

/* The edges of "a syncing call that fails after its checks aborts the communicator": a call past the largest bucket
 * whose plan fails (before the communicator's lock: the other ranks' calls wait for this one's collectives all the
 * same) aborts it, keeping OUT_OF_MEMORY; a refused one (gg_dist_reduce of count 0) and gg_dist_reduce's
 * NCCL failure on a stream whose capture is still open (NCCL's abort would free what that capture holds) leave it
 * alive, saying nothing of an abort. */
static void failed_syncing_calls_abort_but_refusals_and_open_captures_do_not(void **state) {
    (void)state;
    beyond_job job;
    gg_ctx *ctx = beyond_ctx(&job);
    const int armed = arm_call_fault(FAKE_MALLOC, 1); /* the new plan's scratch arena */
    (void)run_beyond_max(&job);
    const int hit = disarm_call_fault(armed);
    print_message("a run past the buckets whose plan fails: %s: %s\n", gg_status_string(job.status),
                  gg_last_error(ctx));
    assert_true(hit > 0);
    assert_int_equal(job.status, GG_ERROR_OUT_OF_MEMORY);
    contains(gg_last_error(ctx), "the communicator is aborted");
    assert_null(gg_dist_comm(ctx));
    assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
    beyond_end(ctx, &job);

    ncclComm_t comm = NULL;
    ctx = attached_ctx(&comm);
    assert_int_equal(gg_dist_reduce(ctx, FAKE(8), 0, 0, NULL), GG_ERROR_INVALID_ARGUMENT); /* a refusal */
    assert_non_null(gg_dist_comm(ctx));
    cudaStream_t s = NULL;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    fake_nccl.fail_kind = FN_ALL_REDUCE;
    fake_nccl.fail_at = fake_nccl.calls[FN_ALL_REDUCE] + 1;
    const gg_status st = gg_dist_reduce(ctx, FAKE(8), 1024, 0, (gg_stream)s);
    fake_nccl.fail_at = 0;
    cudaGraph_t graph = NULL;
    assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
    if (graph) assert_int_equal(cudaGraphDestroy(graph), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    print_message("gg_dist_reduce failing in the caller's open capture: %s: %s\n", gg_status_string(st),
                  gg_last_error(ctx));
    assert_int_equal(st, GG_ERROR_NCCL);
    assert_null(strstr(gg_last_error(ctx), "is aborted"));
    assert_non_null(gg_dist_comm(ctx)); /* the caller aborts once the capture has ended (gradgraph.h) */
    assert_int_equal(atomic_load(&fake_nccl.aborts), 0);
    detach_and_destroy(ctx, comm); /* alive: the caller's to destroy */
}

/* gg_dist_abort from another thread while gg_dist_detach waits on the communicator: the drain of its stream (an
 * attached communicator whose stream stays busy) or ncclCommFinalize (an owned one that stays in progress). The wait
 * gives up at once, the communicator is aborted exactly once (aborted twice, the fake's count of live communicators
 * goes below zero) and the detach says that the abort interrupted it. The peer deadline is 30 s: a wait the abort
 * does not end fails the time check. */
static void abort_during_a_detach_that_waits(void **state) {
    (void)state;
    static const char *const waits[] = {"draining the communication stream", "ncclCommFinalize"};
    for (int owned = 0; owned < 2; ++owned) {
        gg_ctx *ctx = make_ctx();
        fake_nccl_reset(0, owned ? 1 : 2);
        const gg_dist_config dc = dist_config();
        ncclComm_t comm = owned ? NULL : fake_nccl_comm();
        assert_int_equal(owned ? gg_dist_init_threads(&ctx, 1, &dc) : gg_dist_attach(ctx, comm, &dc), GG_SUCCESS);
        if (owned) fake_nccl.finalize_in_progress = 1;
        else fake.streams_busy = 1;
        setenv("GG_DIST_PEER_TIMEOUT_S", "30", 1);
        abort_job job = {ctx, 0.2, GG_ERROR_INTERNAL};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, abort_later, &job), 0);
        const double t0 = now_s();
        const gg_status st = gg_dist_detach(ctx);
        const double took = now_s() - t0;
        pthread_join(t, NULL);
        unsetenv("GG_DIST_PEER_TIMEOUT_S");
        fake.streams_busy = 0;
        fake_nccl.finalize_in_progress = 0;
        print_message("gg_dist_abort during %s: gg_dist_detach %s after %.2f s: %s\n", waits[owned],
                      gg_status_string(st), took, gg_last_error(ctx));
        assert_int_equal(job.status, GG_SUCCESS);
        assert_int_equal(st, GG_ERROR_NCCL);
        assert_true(took < 15.0); /* the abort at 0.2 s, not the 30 s deadline (a loaded CI machine may be slow) */
        contains(gg_last_error(ctx), waits[owned]);
        contains(gg_last_error(ctx), "interrupted by an abort from another thread (gg_dist_abort was called)");
        assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
        assert_int_equal(atomic_load(&fake_nccl.destroys), 0);
        assert_int_equal(gg_dist_size(ctx), 0);
        gg_ctx_destroy(ctx);
        no_leaks(); /* the attached communicator too: the abort freed it */
    }
}

/* gg_dist_abort called over and over from another thread while the owner makes and releases the communicator state:
 * attaches whose warm-up fails, attaches then detaches, owned communicators made then detached. The abort must find
 * the state whole or not at all (ThreadSanitizer and AddressSanitizer builds run this test: a state freed under the
 * abort, or read while it is set, is a report there), abort each communicator at most once, and never leave one
 * alive: whatever each call returned, the context ends without a communicator and nothing leaks. */
typedef struct abort_loop_job {
    gg_ctx *ctx;
    atomic_int stop;
    long calls;
} abort_loop_job;

static void *abort_in_a_loop(void *arg) {
    abort_loop_job *j = arg;
    while (!atomic_load(&j->stop)) {
        if (gg_dist_abort(j->ctx) != GG_SUCCESS) return NULL;
        ++j->calls;
    }
    return NULL;
}

static void abort_while_the_communicator_comes_and_goes(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    abort_loop_job job = {.ctx = ctx};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, abort_in_a_loop, &job), 0);
    int outcomes[3][2] = {{0}}; /* per kind: made, refused or aborted */
    for (int i = 0; i < 300; ++i) {
        const int kind = i % 3; /* 0: warm-up fails; 1: attach, detach; 2: owned, detach */
        fake_nccl_reset(0, kind == 2 ? 1 : 2);
        const gg_dist_config dc = dist_config();
        ncclComm_t comm = kind == 2 ? NULL : fake_nccl_comm();
        if (kind == 0) atomic_store(&fake.streams_error, (int)cudaErrorLaunchFailure);
        gg_status st = kind == 2 ? gg_dist_init_threads(&ctx, 1, &dc) : gg_dist_attach(ctx, comm, &dc);
        atomic_store(&fake.streams_error, 0);
        if (kind == 0) assert_int_not_equal(st, GG_SUCCESS);
        if (st == GG_SUCCESS) st = gg_dist_detach(ctx);
        ++outcomes[kind][st == GG_SUCCESS];
        assert_int_equal(gg_dist_size(ctx), 0);
        assert_int_equal(atomic_load(&fake_nccl.misuse), 0);
        /* an attached communicator nobody aborted is the caller's again; aborted, it is gone (once) */
        assert_true(atomic_load(&fake_nccl.aborts) <= 1);
        if (comm && atomic_load(&fake_nccl.aborts) == 0) fake_nccl_destroy(comm);
        assert_int_equal(atomic_load(&fake_nccl.live), 0);
    }
    atomic_store(&job.stop, 1);
    pthread_join(t, NULL);
    print_message("%ld aborts from another thread; warm-up failing: %d failed; attach/detach: %d clean, %d aborted; "
                  "owned/detach: %d clean, %d aborted\n",
                  job.calls, outcomes[0][0], outcomes[1][1], outcomes[1][0], outcomes[2][1], outcomes[2][0]);
    assert_true(job.calls > 0);
    gg_ctx_destroy(ctx);
    no_leaks();
}

/* gg_dist_abort from inside a log callback (the header allows it): on the abort's own ERROR line (a nested abort,
 * nothing left to abort), and on a wait's notice, on the owner thread inside its section (the wait then stops before
 * polling the freed communicator). Each run in a thread of its own, joined within 10 s: a deadlock fails the test
 * instead of hanging it. */
static gg_ctx *aborting_ctx;
static atomic_int callback_aborts;
static void abort_in_callback(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (level == GG_LOG_ERROR || (level == GG_LOG_WARN && strstr(message, "not finished after"))) {
        atomic_fetch_add(&callback_aborts, 1);
        (void)gg_dist_abort(aborting_ctx);
    }
}

typedef struct callback_case {
    int notice; /* 0: gg_dist_abort's own ERROR line; 1: a reduce's wait notice */
    gg_status status;
    atomic_int done;
    char message[GG_MSG_BYTES];
} callback_case;

static void *run_callback_case(void *arg) {
    callback_case *k = arg;
    fake_reset(2);
    fake.plan_ok = 1;
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    c.log_fn = abort_in_callback;
    c.log_level = GG_LOG_WARN;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    fake_nccl_reset(0, 2);
    const gg_dist_config dc = dist_config();
    assert_int_equal(gg_dist_attach(ctx, fake_nccl_comm(), &dc), GG_SUCCESS);
    aborting_ctx = ctx;
    if (k->notice) {
        setenv("GG_DIST_PEER_TIMEOUT_S", "4", 1); /* the notice at 2 s */
        fake_nccl.in_progress_calls = fake_nccl.calls_stay_in_progress = 1;
        k->status = gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL);
        fake_nccl.in_progress_calls = fake_nccl.calls_stay_in_progress = 0;
        unsetenv("GG_DIST_PEER_TIMEOUT_S");
    } else {
        k->status = gg_dist_abort(ctx);
    }
    snprintf(k->message, sizeof k->message, "%s", gg_last_error(ctx));
    aborting_ctx = NULL;
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    atomic_store(&k->done, 1);
    return NULL;
}

static void abort_from_a_log_callback(void **state) {
    (void)state;
    for (int notice = 0; notice < 2; ++notice) {
        callback_case k = {.notice = notice};
        atomic_store(&callback_aborts, 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, run_callback_case, &k), 0);
        const double t0 = now_s();
        while (!atomic_load(&k.done) && now_s() - t0 < 10.0) nanosleep(&(struct timespec){0, 10000000}, NULL);
        if (!atomic_load(&k.done)) fail_msg("gg_dist_abort from a log callback (%s) did not return in 10 s",
                                            notice ? "a wait's notice" : "its own ERROR line");
        pthread_join(t, NULL);
        print_message("%s: %s, %d aborts from the callback, %d of the communicator: %s\n",
                      notice ? "notice" : "ERROR line", gg_status_string(k.status), atomic_load(&callback_aborts),
                      atomic_load(&fake_nccl.aborts), k.message);
        assert_int_equal(atomic_load(&fake_nccl.aborts), 1);
        assert_true(atomic_load(&callback_aborts) >= 1);
        if (notice) {
            assert_int_equal(k.status, GG_ERROR_NCCL);
            contains(k.message, "interrupted by an abort from another thread (gg_dist_abort was called)");
        } else {
            assert_int_equal(k.status, GG_SUCCESS);
        }
        no_leaks();
    }
}

/* ---- fault injection on every kind of NCCL call ---- */
static int injected, failures;

static void check(int ok, fake_nccl_kind kind, int k, const char *path, const char *fmt, ...) {
    if (ok) return;
    ++failures;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("NCCL FAULT FAIL %s %s #%d: %s\n", path, fake_nccl_kind_names[kind], k, what);
}

/* What every fault loop's run must leave once its contexts are destroyed: no CUDA resource, communicator or window,
 * `memory_left` NCCL allocations (what a failed free at detach loses), no call NCCL would refuse. */
static void check_nothing_left(fake_nccl_kind kind, int k, const char *path, int memory_left) {
    check(fake.live == 0, kind, k, path, "%d CUDA resources leaked", fake.live);
    check(atomic_load(&fake_nccl.live) == 0, kind, k, path, "%d communicators leaked", atomic_load(&fake_nccl.live));
    check(atomic_load(&fake_nccl.windows) == 0, kind, k, path, "%d windows leaked", atomic_load(&fake_nccl.windows));
    check(atomic_load(&fake_nccl.memory) == memory_left, kind, k, path, "%d NCCL allocations left, %d expected",
          atomic_load(&fake_nccl.memory), memory_left);
    check(atomic_load(&fake_nccl.misuse) == 0, kind, k, path,
          "%d calls NCCL would refuse (a free or window of memory it never handed out, a group ended outside a group)",
          atomic_load(&fake_nccl.misuse));
}

/* Whether the last life's gg_dist_attach returned GG_ERROR_NCCL with the communicator still alive, or without saying
 * it was aborted: the header says attach's GG_ERROR_NCCL means gradgraph aborted it (a caller who follows it would
 * leak it otherwise). */
static int attached_alive_after_nccl_error;
/* Whether a later call of that life returned GG_ERROR_NCCL, or a run or gg_dist_reduce failed, with the communicator
 * still alive or without saying it was aborted: this rank's part of the ranks' collectives is missing then, and a
 * later one would pair with the other ranks' wrong collectives. */
static int out_of_step_left_alive;

/* One data-parallel life: a communicator (made: owned = 1; else attached, two ranks), a syncing graph made and
 * replayed twice, gg_dist_reduce, the graph destroyed, detach. Stops at the first failure (returned, its message
 * in *message). *comm: the attached communicator. */
static gg_status life(gg_ctx *ctx, int owned, ncclComm_t *comm, char *message, size_t bytes) {
    const gg_dist_config dc = dist_config();
    gg_status st;
    attached_alive_after_nccl_error = out_of_step_left_alive = 0;
    if (owned) {
        st = gg_dist_init_threads(&ctx, 1, &dc);
    } else {
        *comm = fake_nccl_comm();
        st = gg_dist_attach(ctx, *comm, &dc);
        const int says_aborted = strstr(gg_last_error(ctx), "communicator is aborted") != NULL;
        attached_alive_after_nccl_error = st == GG_ERROR_NCCL && (fake_nccl_is_live(*comm) || !says_aborted);
    }
    const int made = st == GG_SUCCESS;
    gg_graph *g = NULL;
    if (st == GG_SUCCESS) st = tanh_graph(ctx, &g);
    const int graph_made = st == GG_SUCCESS;
    if (st == GG_SUCCESS) st = tanh_run(g);
    if (st == GG_SUCCESS) st = tanh_run(g);
    if (st == GG_SUCCESS) st = gg_dist_reduce(ctx, FAKE(8), 1024, 0, NULL);
    if (st != GG_SUCCESS) snprintf(message, bytes, "%s", gg_last_error(ctx));
    /* every NCCL error once the communicator works (a graph's agreement, a run, gg_dist_reduce), and every failure
     * of a run or gg_dist_reduce, left the ranks out of step: aborted, and said */
    const int out_of_step = made && (st == GG_ERROR_NCCL || (graph_made && st != GG_SUCCESS));
    out_of_step_left_alive = out_of_step && (gg_dist_comm(ctx) || !strstr(message, "is aborted"));
    gg_graph_destroy(g);
    const gg_status detached = gg_dist_detach(ctx);
    if (st == GG_SUCCESS && detached != GG_SUCCESS) {
        st = detached;
        snprintf(message, bytes, "%s", gg_last_error(ctx));
    }
    if (!owned && fake_nccl_is_live(*comm)) fake_nccl_destroy(*comm); /* the caller's, unless gradgraph aborted it */
    return st;
}

static void every_nccl_fault(void **state) {
    (void)state;
    for (int owned = 0; owned < 2; ++owned)
        for (int kind = 0; kind < FN_KINDS; ++kind)
            for (int k = 1;; ++k) {
                const char *path = owned ? "made" : "attached";
                gg_ctx *ctx = make_ctx();
                fake_nccl_reset(0, owned ? 1 : 2);
                fake_nccl.in_progress_calls = k % 2; /* every other run, each call goes through ncclInProgress */
                fake_nccl.fail_kind = (fake_nccl_kind)kind;
                fake_nccl.fail_at = k;
                ncclComm_t comm = NULL;
                char message[GG_MSG_BYTES] = "";
                const gg_status st = life(ctx, owned, &comm, message, sizeof message);
                const int hit = fake_nccl.injected > 0;
                fake_nccl.fail_at = 0;
                if (hit) {
                    ++injected;
                    const ncclResult_t err = kind == FN_QUERY ? ncclInvalidUsage : ncclSystemError;
                    /* an attached communicator NCCL cannot query is a bad argument, left to its caller */
                    const gg_status want = kind == FN_QUERY && !owned ? GG_ERROR_INVALID_ARGUMENT : GG_ERROR_NCCL;
                    check(st == want, kind, k, path, "status %s: %s", gg_status_string(st), message);
                    check(strstr(message, ncclGetErrorString(err)) != NULL, kind, k, path,
                          "\"%s\" does not name NCCL's error", message);
                    check(!attached_alive_after_nccl_error, kind, k, path,
                          "gg_dist_attach: GG_ERROR_NCCL, but the communicator was not aborted, or the message "
                          "does not say so: %s",
                          message);
                    check(!out_of_step_left_alive, kind, k, path,
                          "GG_ERROR_NCCL, but the communicator was not aborted, or the message does not say so: %s",
                          message);
                } else {
                    check(st == GG_SUCCESS, kind, k, path, "no fault, status %s: %s", gg_status_string(st), message);
                }
                check(fake.captures_open == 0, kind, k, path, "a stream is left capturing");
                /* usable after: eager calls, and a whole data-parallel life again */
                check(tanh_eager(ctx) == GG_SUCCESS, kind, k, path, "eager after the fault: %s", gg_last_error(ctx));
                const gg_status again = life(ctx, owned, &comm, message, sizeof message);
                check(again == GG_SUCCESS, kind, k, path, "again after the fault: %s", message);
                gg_ctx_destroy(ctx);
                check_nothing_left(kind, k, path, 0);
                if (!hit) break;
            }
    printf("NCCL faults on the SM path: %d injected, %d failures\n", injected, failures);
    assert_true(injected >= 15);
    assert_int_equal(failures, 0);
}

/* The faults a data-parallel life meets besides NCCL's: the k-th host allocation (fake.fail_kind FAKE_HOST_MEMORY),
 * the k-th CUDA resource made from now on (fake.fail_create_at: streams, events, device and pinned memory,
 * cuBLASLt handles and descriptors), or the k-th call of one kind of CUDA work (life_kind: launches, event records
 * and waits, allocations, GEMMs, captures, graph launches, synchronous copies). */
typedef enum { LIFE_HOST_MEMORY, LIFE_CUDA_RESOURCE, LIFE_CUDA_CALL, LIFE_FAULTS } life_fault;
static const char *const life_fault_names[LIFE_FAULTS] = {"host memory", "CUDA resource", "CUDA call"};
/* FAULTS_HOST_MEMORY, FAULTS_CUDA_RESOURCES, FAULTS_CUDA_CALLS */
static int life_hits[LIFE_FAULTS], life_failures[LIFE_FAULTS];
static const fake_kind life_cuda_kinds[] = {FAKE_MATMUL,        FAKE_LAUNCH,      FAKE_EVENT_RECORD, FAKE_WAIT_EVENT,
                                            FAKE_MALLOC,        FAKE_HEURISTIC,   FAKE_BEGIN_CAPTURE, FAKE_END_CAPTURE,
                                            FAKE_INSTANTIATE,   FAKE_EXEC_UPDATE, FAKE_GRAPH_LAUNCH, FAKE_MEMCPY};
static fake_kind life_kind; /* LIFE_CUDA_CALL's kind under test */

/* Arms fault f at k; returns what life_fault_hit compares with. */
static int arm_life_fault(life_fault f, int k) {
    if (f == LIFE_HOST_MEMORY || f == LIFE_CUDA_CALL) {
        /* counted from here: the context's making is past */
        return arm_call_fault(f == LIFE_HOST_MEMORY ? FAKE_HOST_MEMORY : life_kind, k);
    }
    fake.fail_create_at = fake.creates + k;
    return fake.fail_create_at;
}

/* Whether the armed fault was met (and disarms it). */
static int life_fault_hit(life_fault f, int armed) {
    const int hit = f != LIFE_CUDA_RESOURCE ? fake.injected > armed : fake.creates >= armed;
    fake.fail_at = 0;
    fake.fail_create_at = 0;
    return hit;
}

/* What a call that met fault f must say: a failure (GG_ERROR_OUT_OF_MEMORY for host memory; a CUDA, cuBLAS or
 * out-of-memory status for a CUDA resource), its message beginning with the public call's name (and, for host
 * memory, saying so). */
static void check_life_fault(life_fault f, gg_status st, const char *message, int k, const char *path) {
    if (f == LIFE_HOST_MEMORY) {
        check(st == GG_ERROR_OUT_OF_MEMORY, 0, k, path, "status %s: %s", gg_status_string(st), message);
        check(strstr(message, ": out of host memory") != NULL, 0, k, path, "\"%s\" does not say host memory", message);
    } else if (f == LIFE_CUDA_RESOURCE) {
        check(st == GG_ERROR_CUDA || st == GG_ERROR_OUT_OF_MEMORY || st == GG_ERROR_CUBLAS, 0, k, path, "status %s: %s",
              gg_status_string(st), message);
    } else { /* CUDA work failing inside NCCL's part (the communication stream) aborts the communicator */
        check(st == GG_ERROR_CUDA || st == GG_ERROR_OUT_OF_MEMORY || st == GG_ERROR_CUBLAS || st == GG_ERROR_NCCL ||
                  st == GG_ERROR_PARTIAL,
              0, k, path, "status %s: %s", gg_status_string(st), message);
    }
    check(strncmp(message, "gg_", 3) == 0, 0, k, path, "\"%s\" does not begin with the call's name", message);
}

/* The end of a fault loop that began with `misses` failures: its faults and failures move from the NCCL calls'
 * counts to fault f's line; it must have injected some and failed none. */
static void life_fault_totals(life_fault f, const char *what, int hits, int misses) {
    printf("%s faults %s: %d injected, %d failures\n", life_fault_names[f], what, hits, failures - misses);
    life_hits[f] += hits;
    life_failures[f] += failures - misses;
    failures = misses;
    assert_true(hits >= 4);
    assert_int_equal(life_failures[f], 0);
}

/* Fault f at every k a data-parallel life reaches, made and attached: the call that meets it fails as
 * check_life_fault says, nothing leaks (CUDA resources and communicators here, host memory under the sanitizers),
 * the context is usable after (an eager call, a whole life again). */
static void every_life_fault(life_fault f) {
    int hits = 0, misses = failures;
    const int kinds = f == LIFE_CUDA_CALL ? (int)(sizeof life_cuda_kinds / sizeof life_cuda_kinds[0]) : 1;
    for (int kind = 0; kind < kinds; ++kind) {
        life_kind = life_cuda_kinds[kind]; /* used by LIFE_CUDA_CALL only */
        for (int owned = 0; owned < 2; ++owned)
            for (int k = 1;; ++k) {
                char path[96];
                snprintf(path, sizeof path, "%s, %s%s%s", owned ? "made" : "attached", life_fault_names[f],
                         f == LIFE_CUDA_CALL ? ": " : "", f == LIFE_CUDA_CALL ? fake_kind_names[life_kind] : "");
                gg_ctx *ctx = make_ctx();
                fake_nccl_reset(0, owned ? 1 : 2);
                const int armed = arm_life_fault(f, k);
                ncclComm_t comm = NULL;
                char message[GG_MSG_BYTES] = "";
                const gg_status st = life(ctx, owned, &comm, message, sizeof message);
                const int hit = life_fault_hit(f, armed);
                hits += hit;
                /* the one fault a life goes on through: the watchdog's record after a replay or gg_dist_reduce's
                 * collective, which leaves it unwatched and says so */
                const int unwatched = f == LIFE_CUDA_CALL && life_kind == FAKE_EVENT_RECORD && st == GG_SUCCESS &&
                                      not_watched > 0;
                if (!hit)
                    check(st == GG_SUCCESS, 0, k, path, "no fault, status %s: %s", gg_status_string(st), message);
                else if (!unwatched)
                    check_life_fault(f, st, message, k, path);
                check(!out_of_step_left_alive, 0, k, path,
                      "a run or gg_dist_reduce failed, but the communicator was not aborted, or the message does not "
                      "say so: %s", message);
                check(tanh_eager(ctx) == GG_SUCCESS, 0, k, path, "eager after the fault: %s", gg_last_error(ctx));
                check(life(ctx, owned, &comm, message, sizeof message) == GG_SUCCESS, 0, k, path,
                      "again after the fault: %s", message);
                gg_ctx_destroy(ctx);
                check_nothing_left(0, k, path, 0);
                if (!hit) break;
            }
    }
    life_fault_totals(f, "along a data-parallel life", hits, misses);
}

static void every_host_memory_fault(void **state) {
    (void)state;
    every_life_fault(LIFE_HOST_MEMORY);
}

static void every_cuda_resource_fault(void **state) {
    (void)state;
    every_life_fault(LIFE_CUDA_RESOURCE);
}

static void every_cuda_call_fault(void **state) {
    (void)state;
    every_life_fault(LIFE_CUDA_CALL);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
/* ---- the copy-engine path: two ranks from this thread (gg_dist_init_threads, copy_engines = 1), the MLP's weight
 * gradients in gg_dist_alloc memory: the split reduction in its graph, gg_dist_reduce through the all-to-all ---- */
enum { CE_RANKS = 2 };
static const gg_mlp_desc ce_mlp = {64, 256, 1024, GG_PRECISION_FP32, 0}; /* dW1, dW2: 1 MiB each */
#define CE_GRAD_BYTES ((size_t)1 << 20)

/* What the contexts logged: every WARN (appended) and the last ERROR, which is the failed call's message. */
static char ce_warnings[8192], ce_error[GG_MSG_BYTES];

static void ce_log(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (level == GG_LOG_ERROR) snprintf(ce_error, sizeof ce_error, "%s", message);
    const size_t used = strlen(ce_warnings);
    if (level == GG_LOG_WARN && used + 2 < sizeof ce_warnings)
        snprintf(ce_warnings + used, sizeof ce_warnings - used, "%s\n", message);
}

/* The warm-up's all-reduce (min) of each rank's copy-engine readiness, which the fakes cannot compute (device
 * memory is a token, a collective leaves the data as it is): 1 when every rank has its staging. */
static gg_ctx *ce_ranks[CE_RANKS];
static void ce_readiness(void *dst, size_t bytes) {
    if (bytes != sizeof(float)) return;
    float all = 1.0f;
    for (int i = 0; i < CE_RANKS; ++i)
        if (!ce_ranks[i]->dist || !ce_ranks[i]->dist->ce_on) all = 0.0f;
    memcpy(dst, &all, sizeof all);
}

static void make_ce_ctxs(gg_ctx *ctxs[CE_RANKS]) {
    fake_reset(CE_RANKS);
    fake.plan_ok = 1;
    fake.on_sync_copy_to_host = ce_readiness;
    ce_warnings[0] = ce_error[0] = '\0';
    for (int i = 0; i < CE_RANKS; ++i) {
        gg_config c = GG_CONFIG_INIT;
        c.autotune = 0;
        c.device = i;
        c.log_fn = ce_log;
        c.log_level = GG_LOG_WARN;
        ctxs[i] = NULL;
        assert_int_equal(gg_ctx_create(&c, &ctxs[i]), GG_SUCCESS);
        ce_ranks[i] = ctxs[i];
    }
}

/* Rank i's MLP arguments: dW1 and dW2 in its gg_dist_alloc buffer, the rest fake device addresses. */
static gg_mlp_args ce_args(int i, char *grads) {
    const int b = 12 * i;
    return (gg_mlp_args){FAKE(b), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4), FAKE(b + 5), FAKE(b + 6),
                         (float *)grads, FAKE(b + 7), (float *)(grads + CE_GRAD_BYTES), FAKE(b + 8), NULL,
                         NULL, NULL, NULL, NULL, NULL};
}

/* What one copy-engine life did: its first failure (status, message, the step it came in) and whether the ranks
 * had the copy engines on once the communicators were made. */
typedef struct ce_outcome {
    gg_status status;
    char message[GG_MSG_BYTES];
    const char *step;
    int ce_on;
    int left_alive; /* the first failure was a syncing call's, its communicator not aborted or not said */
} ce_outcome;

/* Records the result of `step`, the first failure only (its message: the last ERROR the contexts logged). */
static int ce_step(ce_outcome *o, const char *step, gg_status st) {
    if (o->status != GG_SUCCESS) return 0;
    if (st != GG_SUCCESS) {
        o->status = st;
        o->step = step;
        snprintf(o->message, sizeof o->message, "%s", ce_error);
    }
    return st == GG_SUCCESS;
}

/* ce_step for a syncing call of ctx (a run, gg_dist_reduce): its failure means its part of the ranks' collectives is
 * missing, so ctx's communicator must be aborted (a later collective would pair with the other ranks' wrong ones),
 * and the message must say so. */
static void ce_collective_step(ce_outcome *o, const char *step, gg_ctx *ctx, gg_status st) {
    const int first = o->status == GG_SUCCESS;
    ce_step(o, step, st);
    if (first && st != GG_SUCCESS) o->left_alive = gg_dist_comm(ctx) != NULL || !strstr(o->message, "is aborted");
}

/* One copy-engine life on both ranks: communicators made (owned), a gg_dist_alloc buffer each, a syncing MLP graph
 * each replayed twice, gg_dist_reduce of the buffer, gg_dist_free, the graphs destroyed, detach. Stops at the first
 * failure; the buffers left go with the communicators. */
static ce_outcome ce_life(gg_ctx *ctxs[CE_RANKS]) {
    ce_outcome o = {GG_SUCCESS, "", "", 0, 0};
    gg_dist_config dc = dist_config();
    dc.copy_engines = 1;
    void *buf[CE_RANKS] = {NULL};
    gg_graph *g[CE_RANKS] = {NULL};
    ce_error[0] = '\0';
    if (ce_step(&o, "init", gg_dist_init_threads(ctxs, CE_RANKS, &dc)))
        o.ce_on = ctxs[0]->dist->ce_on && ctxs[1]->dist->ce_on;
    for (int i = 0; i < CE_RANKS && o.status == GG_SUCCESS; ++i)
        ce_step(&o, "gg_dist_alloc", gg_dist_alloc(ctxs[i], 2 * CE_GRAD_BYTES, &buf[i]));
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    for (int i = 0; i < CE_RANKS && o.status == GG_SUCCESS; ++i)
        ce_step(&o, "graph create", gg_mlp_graph_create(ctxs[i], &ce_mlp, &gc, &g[i]));
    for (int run = 0; run < 2; ++run)
        for (int i = 0; i < CE_RANKS && o.status == GG_SUCCESS; ++i) {
            const gg_mlp_args a = ce_args(i, buf[i]);
            ce_collective_step(&o, "graph run", ctxs[i], gg_mlp_graph_run(g[i], &ce_mlp, &a, NULL));
        }
    for (int i = 0; i < CE_RANKS && o.status == GG_SUCCESS; ++i)
        ce_collective_step(&o, "gg_dist_reduce", ctxs[i],
                           gg_dist_reduce(ctxs[i], buf[i], 2 * CE_GRAD_BYTES / sizeof(float), 0, NULL));
    for (int i = 0; i < CE_RANKS && o.status == GG_SUCCESS; ++i) {
        const gg_status st = gg_dist_free(ctxs[i], buf[i]);
        if (ce_step(&o, "gg_dist_free", st)) buf[i] = NULL;
    }
    for (int i = 0; i < CE_RANKS; ++i) gg_graph_destroy(g[i]);
    for (int i = 0; i < CE_RANKS; ++i) ce_step(&o, "detach", gg_dist_detach(ctxs[i]));
    return o;
}

/* What the k-th call of `kind` failing must give: NCCL's error as GG_ERROR_NCCL, except for NCCL memory. The first
 * CE_RANKS ncclMemAlloc calls are the stagings (made with the communicators): one failing leaves every rank on SMs,
 * with a WARN, and the life goes on; a later one is gg_dist_alloc's, out of memory. The first CE_RANKS ncclMemFree
 * calls are gg_dist_free's (GG_ERROR_NCCL); a later one is the staging's at detach, where nothing is left to retry
 * it: a WARN, and the memory is lost. Returns how many NCCL allocations the fault leaves behind. */
static int ce_expect(fake_nccl_kind kind, int k, const ce_outcome *o) {
    const char *err = ncclGetErrorString(ncclSystemError), *path = "copy engines";
    if (kind == FN_MEM_ALLOC && k <= CE_RANKS) {
        check(o->status == GG_SUCCESS && !o->ce_on, kind, k, path, "%s: status %s, copy engines %s: %s", o->step,
              gg_status_string(o->status), o->ce_on ? "on" : "off", o->message);
        check(strstr(ce_warnings, "copy-engine staging") && strstr(ce_warnings, err), kind, k, path,
              "no WARN names the staging's ncclMemAlloc and NCCL's error: %s", ce_warnings);
        return 0;
    }
    if (kind == FN_MEM_FREE && k > CE_RANKS) {
        check(o->status == GG_SUCCESS, kind, k, path, "%s: status %s: %s", o->step, gg_status_string(o->status),
              o->message);
        check(strstr(ce_warnings, "ncclMemFree of the copy-engine staging") && strstr(ce_warnings, err), kind, k, path,
              "no WARN names the failed ncclMemFree and NCCL's error: %s", ce_warnings);
        return 1;
    }
    const gg_status want = kind == FN_MEM_ALLOC ? GG_ERROR_OUT_OF_MEMORY : GG_ERROR_NCCL;
    check(o->status == want, kind, k, path, "%s: status %s, not %s: %s", o->step, gg_status_string(o->status),
          gg_status_string(want), o->message);
    check(strstr(o->message, err) != NULL, kind, k, path, "%s: \"%s\" does not name NCCL's error", o->step, o->message);
    check(!o->left_alive, kind, k, path, "%s: GG_ERROR_NCCL, but the communicator was not aborted, or the message "
                                         "does not say so: %s", o->step, o->message);
    return 0;
}

static void every_nccl_fault_copy_engines(void **state) {
    (void)state;
    int ce_injected = 0, ce_failures = failures;
    for (int kind = 0; kind < FN_KINDS; ++kind)
        for (int k = 1;; ++k) {
            const char *path = "copy engines";
            gg_ctx *ctxs[CE_RANKS];
            make_ce_ctxs(ctxs);
            fake_nccl_reset(0, CE_RANKS);
            fake_nccl.in_progress_calls = k % 2; /* every other run, each call goes through ncclInProgress */
            fake_nccl.fail_kind = (fake_nccl_kind)kind;
            fake_nccl.fail_at = k;
            const ce_outcome o = ce_life(ctxs);
            const int hit = fake_nccl.injected > 0;
            fake_nccl.fail_at = 0;
            int lost = 0;
            if (hit) {
                ++ce_injected;
                lost = ce_expect((fake_nccl_kind)kind, k, &o);
            } else {
                check(o.status == GG_SUCCESS && o.ce_on, kind, k, path, "no fault: %s in %s, copy engines %s: %s",
                      gg_status_string(o.status), o.step, o.ce_on ? "on" : "off", o.message);
                /* the split reduction's and gg_dist_reduce's collectives, past the warm-up's one each per rank */
                check(fake_nccl.calls[FN_ALL_TO_ALL] > CE_RANKS && fake_nccl.calls[FN_ALL_GATHER] > CE_RANKS, kind,
                      k, path, "the copy engines were not used: %d all-to-alls, %d all-gathers",
                      fake_nccl.calls[FN_ALL_TO_ALL], fake_nccl.calls[FN_ALL_GATHER]);
            }
            check(fake.captures_open == 0, kind, k, path, "a stream is left capturing");
            /* usable after: eager calls, and a whole copy-engine life again */
            for (int i = 0; i < CE_RANKS; ++i)
                check(tanh_eager(ctxs[i]) == GG_SUCCESS, kind, k, path, "eager after the fault: %s",
                      gg_last_error(ctxs[i]));
            const ce_outcome again = ce_life(ctxs);
            check(again.status == GG_SUCCESS && again.ce_on, kind, k, path, "again after the fault: %s in %s: %s",
                  gg_status_string(again.status), again.step, again.message);
            for (int i = 0; i < CE_RANKS; ++i) gg_ctx_destroy(ctxs[i]);
            check_nothing_left(kind, k, path, lost);
            if (!hit) break;
        }
    injected += ce_injected;
    ce_failures = failures - ce_failures;
    printf("NCCL faults on the copy-engine path: %d injected, %d failures\n", ce_injected, ce_failures);
    assert_true(ce_injected >= 30);
    assert_int_equal(ce_failures, 0);
}

/* Fault f at every k the copy-engine life reaches (gg_dist_alloc and gg_dist_free too): as every_life_fault, and no
 * window or NCCL allocation is left. */
static void every_life_fault_copy_engines(life_fault f) {
    int hits = 0, misses = failures;
    for (int k = 1;; ++k) {
        char path[64];
        snprintf(path, sizeof path, "copy engines, %s", life_fault_names[f]);
        gg_ctx *ctxs[CE_RANKS];
        make_ce_ctxs(ctxs);
        fake_nccl_reset(0, CE_RANKS);
        const int armed = arm_life_fault(f, k);
        const ce_outcome o = ce_life(ctxs);
        const int hit = life_fault_hit(f, armed);
        hits += hit;
        if (hit) {
            check_life_fault(f, o.status, o.message, k, path);
            check(!o.left_alive, 0, k, path, "%s failed, but the communicator was not aborted, or the message does "
                                             "not say so: %s", o.step, o.message);
        } else
            check(o.status == GG_SUCCESS && o.ce_on, 0, k, path, "no fault: %s in %s: %s",
                  gg_status_string(o.status), o.step, o.message);
        for (int i = 0; i < CE_RANKS; ++i)
            check(tanh_eager(ctxs[i]) == GG_SUCCESS, 0, k, path, "eager after the fault: %s", gg_last_error(ctxs[i]));
        const ce_outcome again = ce_life(ctxs);
        check(again.status == GG_SUCCESS && again.ce_on, 0, k, path, "again after the fault: %s in %s: %s",
              gg_status_string(again.status), again.step, again.message);
        for (int i = 0; i < CE_RANKS; ++i) gg_ctx_destroy(ctxs[i]);
        check_nothing_left(0, k, path, 0);
        if (!hit) break;
    }
    life_fault_totals(f, "on the copy-engine path", hits, misses);
}

/* Both ranks with copy engines on (device memory at addresses as far apart as its sizes, so that a capture's ranges
 * are real), a gg_dist_alloc buffer each for the MLP's weight gradients, and a syncing MLP graph each. */
static void ce_graph_pair(gg_ctx *ctxs[CE_RANKS], void *buf[CE_RANKS], gg_graph *g[CE_RANKS]) {
    make_ce_ctxs(ctxs);
    fake.device_space = 1;
    gg_dist_config dc = dist_config();
    dc.copy_engines = 1;
    assert_int_equal(gg_dist_init_threads(ctxs, CE_RANKS, &dc), GG_SUCCESS);
    assert_true(ctxs[0]->dist->ce_on && ctxs[1]->dist->ce_on);
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    for (int i = 0; i < CE_RANKS; ++i) {
        assert_int_equal(gg_dist_alloc(ctxs[i], 2 * CE_GRAD_BYTES, &buf[i]), GG_SUCCESS);
        assert_int_equal(gg_mlp_graph_create(ctxs[i], &ce_mlp, &gc, &g[i]), GG_SUCCESS);
    }
}

/* The ranks' contexts detached and destroyed, nothing left. */
static void ce_ctxs_end(gg_ctx *ctxs[CE_RANKS]) {
    for (int i = 0; i < CE_RANKS; ++i) assert_int_equal(gg_dist_detach(ctxs[i]), GG_SUCCESS);
    for (int i = 0; i < CE_RANKS; ++i) gg_ctx_destroy(ctxs[i]);
    no_leaks();
}

/* gg_dist_init_threads whose warm-up fails as a group (its ncclGroupEnd) while the all-reduce it enqueued never
 * finishes on the GPU (the communication streams stay busy): every communicator is aborted at once, so the call
 * returns without draining one rank's stream after another, each up to the peer deadline (with the drain first, two
 * ranks took two deadlines); no rank keeps a communicator, nothing is left. */
static void a_failed_warm_up_releases_every_rank_at_once(void **state) {
    (void)state;
    gg_ctx *ctxs[CE_RANKS];
    make_ce_ctxs(ctxs);
    fake_nccl_reset(0, CE_RANKS);
    setenv("GG_DIST_PEER_TIMEOUT_S", "1", 1);
    fake_nccl.fail_kind = FN_GROUP_END;
    fake_nccl.fail_at = 2; /* the first group makes the communicators, the second is the warm-up's */
    atomic_store(&fake.streams_busy, 1);
    const gg_dist_config dc = dist_config();
    const double t0 = now_s();
    const gg_status st = gg_dist_init_threads(ctxs, CE_RANKS, &dc);
    const double took = now_s() - t0;
    atomic_store(&fake.streams_busy, 0);
    fake_nccl.fail_at = 0;
    unsetenv("GG_DIST_PEER_TIMEOUT_S");
    print_message("failed warm-up: %s after %.2f s: %s\n", gg_status_string(st), took, gg_last_error(ctxs[0]));
    assert_int_equal(st, GG_ERROR_NCCL);
    contains(gg_last_error(ctxs[0]), "warm-up");
    assert_true(took < 0.9); /* no drain reached the peer deadline */
    for (int i = 0; i < CE_RANKS; ++i) assert_int_equal(gg_dist_size(ctxs[i]), 0);
    assert_int_equal(atomic_load(&fake_nccl.live), 0);
    for (int i = 0; i < CE_RANKS; ++i) gg_ctx_destroy(ctxs[i]);
    no_leaks();
}

/* The communicators gg_dist_init_threads makes in one NCCL group share one init deadline, counted from the group's
 * start: with rank 0 ready 2.5 s into a 3 s deadline and rank 1 never, the call gives up at 3 s, not 3 s after rank 0
 * (5.5 s: checked by mutation; the bound leaves a loaded CI machine 1.5 s), and aborts both. */
static void a_group_shares_one_init_deadline(void **state) {
    (void)state;
    gg_ctx *ctxs[CE_RANKS];
    make_ce_ctxs(ctxs);
    fake_nccl_reset(0, CE_RANKS);
    fake_nccl.init_in_progress = 1;
    fake_nccl.first_init_ready_s = 2.5;
    setenv("GG_DIST_INIT_TIMEOUT_S", "3", 1);
    const gg_dist_config dc = dist_config();
    const double t0 = now_s();
    const gg_status st = gg_dist_init_threads(ctxs, CE_RANKS, &dc);
    const double took = now_s() - t0;
    unsetenv("GG_DIST_INIT_TIMEOUT_S");
    print_message("rank 0 late, rank 1 never: %s after %.2f s: %s\n", gg_status_string(st), took,
                  gg_last_error(ctxs[0]));
    assert_int_equal(st, GG_ERROR_NCCL);
    contains(gg_last_error(ctxs[0]), "not ready after 3 s");
    assert_true(took >= 3.0 && took < 4.5);
    assert_int_equal(atomic_load(&fake_nccl.aborts), CE_RANKS);
    assert_int_equal(atomic_load(&fake_nccl.live), 0);
    for (int i = 0; i < CE_RANKS; ++i) {
        assert_int_equal(gg_dist_size(ctxs[i]), 0);
        gg_ctx_destroy(ctxs[i]);
    }
    no_leaks();
}

/* gg_dist_alloc with copy engines is collective: a rank whose call fails before the ranks' agreement (here its
 * device) still takes part in it, voting that it failed, so that the others fail at once (GG_ERROR_PEER) instead of
 * waiting for it to the peer deadline; each keeps its own message and the communicator, and the next allocation works
 * (checked by mutation: without the vote nothing was issued). */
static void a_rank_failing_gg_dist_alloc_still_votes(void **state) {
    (void)state;
    gg_ctx *ctxs[CE_RANKS];
    make_ce_ctxs(ctxs);
    gg_dist_config dc = dist_config();
    dc.copy_engines = 1;
    assert_int_equal(gg_dist_init_threads(ctxs, CE_RANKS, &dc), GG_SUCCESS);
    assert_true(ctxs[0]->dist->ce_on && ctxs[1]->dist->ce_on);
    fake.on_copy_to_host = play_all_ok;
    void *buf[CE_RANKS] = {NULL, NULL};
    votes = 0, last_vote = -1;
    fake.fail_get_device = 1; /* rank 0's device entry fails */
    gg_status st = gg_dist_alloc(ctxs[0], CE_GRAD_BYTES, &buf[0]);
    fake.fail_get_device = 0;
    (void)cudaGetLastError();
    assert_int_equal(st, GG_ERROR_CUDA);
    contains(gg_last_error(ctxs[0]), "gg_dist_alloc: cudaGetDevice failed");
    assert_int_equal(votes, 1);
    assert_int_equal(last_vote, 0);
    peer_failed = 1; /* rank 1 hears of it */
    st = gg_dist_alloc(ctxs[1], CE_GRAD_BYTES, &buf[1]);
    peer_failed = 0;
    assert_int_equal(st, GG_ERROR_PEER);
    contains(gg_last_error(ctxs[1]), "another rank could not allocate its buffer; none was made");
    assert_null(buf[0]);
    assert_null(buf[1]);
    for (int i = 0; i < CE_RANKS; ++i) {
        assert_int_equal(gg_dist_check(ctxs[i]), GG_SUCCESS);
        assert_int_equal(gg_dist_alloc(ctxs[i], CE_GRAD_BYTES, &buf[i]), GG_SUCCESS);
    }
    fake.on_copy_to_host = NULL;
    for (int i = 0; i < CE_RANKS; ++i) assert_int_equal(gg_dist_free(ctxs[i], buf[i]), GG_SUCCESS);
    ce_ctxs_end(ctxs);
}

/* Its end: the graphs destroyed, the buffers freed (buf NULL: freed already), detached, nothing left. */
static void ce_graph_pair_end(gg_ctx *ctxs[CE_RANKS], void *buf[CE_RANKS], gg_graph *g[CE_RANKS]) {
    for (int i = 0; i < CE_RANKS; ++i) {
        gg_graph_destroy(g[i]);
        if (buf) assert_int_equal(gg_dist_free(ctxs[i], buf[i]), GG_SUCCESS);
    }
    ce_ctxs_end(ctxs);
}

/* The copy-engine path's graphs ordered: rank 0's syncing MLP graph with its weight gradients in gg_dist_alloc memory
 * (each GEMM split in halves between the two ranks, the peer's half sent by all-gather and added in the GEMM's
 * epilogue, then the result all-gathered) captured with the CUDA work and the collectives logged: every pair of
 * operations on shared bytes ordered by the capture's streams and events (fake_order.h), the collectives among them. */
static void copy_engine_graph_is_ordered(void **state) {
    (void)state;
    gg_ctx *ctxs[CE_RANKS];
    void *buf[CE_RANKS];
    gg_graph *g[CE_RANKS];
    ce_graph_pair(ctxs, buf, g);
    const gg_mlp_args a = ce_args(0, buf[0]);
    fake_log_start();
    assert_int_equal(gg_mlp_graph_run(g[0], &ce_mlp, &a, NULL), GG_SUCCESS);
    fake_log_stop();
    assert_int_equal(fake_log.truncated, 0);
    const fake_races r = fake_check_races(0, 5);
    fake_log_free();
    print_message("copy-engine graph: %d operations, %d collectives, %d pairs on shared bytes, %d unordered\n", r.ops,
                  r.collectives, r.pairs, r.races);
    assert_true(r.collectives >= 2 && r.pairs >= r.collectives);
    assert_int_equal(r.races, 0);
    ce_graph_pair_end(ctxs, buf, g);
}

/* The most collectives a graph may hold, counted as the copy engines issue them where they may take a gradient (an
 * all-to-all and an all-gather a piece): an MLP with 24 Mi-element weight gradients in 4 KiB pieces takes 49 162 NCCL
 * all-reduces (accepted with copy engines off) but 98 314 collectives through the copy engines (refused with them
 * on, naming the count, before anything is captured). */
static void collective_limit_counts_the_copy_engines(void **state) {
    (void)state;
    static const gg_mlp_desc big = {64, 4096, 6144, GG_PRECISION_FP32, 0};
    for (int ce = 1; ce >= 0; --ce) {
        gg_ctx *ctxs[CE_RANKS];
        make_ce_ctxs(ctxs);
        gg_dist_config dc = dist_config();
        dc.copy_engines = ce;
        dc.bucket_bytes = 4096;
        assert_int_equal(gg_dist_init_threads(ctxs, CE_RANKS, &dc), GG_SUCCESS);
        assert_int_equal(ctxs[0]->dist->ce_on, ce);
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        gg_graph *g = NULL;
        const int captures = fake.calls[FAKE_BEGIN_CAPTURE];
        const gg_status st = gg_mlp_graph_create(ctxs[0], &big, &gc, &g);
        print_message("copy engines %s: %s %s\n", ce ? "on" : "off", gg_status_string(st),
                      st ? gg_last_error(ctxs[0]) : "");
        if (ce) {
            assert_int_equal(st, GG_ERROR_UNSUPPORTED);
            contains(gg_last_error(ctxs[0]), "take 98314 collectives (two a piece where the copy engines may take a "
                                             "gradient), more than the 65536 one graph may hold");
            assert_null(g);
            assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], captures);
        } else {
            assert_int_equal(st, GG_SUCCESS);
            gg_graph_destroy(g);
        }
        ce_ctxs_end(ctxs);
    }
}

/* A syncing graph captured on gg_dist_alloc windows exchanges their gradients in place through the copy engines (the
 * split reduction's all-gathers). Once the windows are freed, memory at the same addresses is no window: the next run
 * with the same pointers captures again (no exchange, NCCL's all-reduce) instead of replaying the exchange. */
static void freed_window_captures_again(void **state) {
    (void)state;
    gg_ctx *ctxs[CE_RANKS];
    void *buf[CE_RANKS];
    gg_graph *g[CE_RANKS];
    ce_graph_pair(ctxs, buf, g);
    int captures[3], gathers[3];
    for (int phase = 0; phase < 3; ++phase) { /* captured; replayed; the windows freed, the same pointers */
        if (phase == 2) { /* a release: it runs with an application's CUDA error pending, which it leaves */
            fake_pending = cudaErrorInvalidConfiguration;
            for (int i = 0; i < CE_RANKS; ++i) assert_int_equal(gg_dist_free(ctxs[i], buf[i]), GG_SUCCESS);
            assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration);
        }
        const int c0 = fake.calls[FAKE_BEGIN_CAPTURE], a0 = fake_nccl.calls[FN_ALL_GATHER];
        for (int i = 0; i < CE_RANKS; ++i) {
            const gg_mlp_args a = ce_args(i, buf[i]);
            assert_int_equal(gg_mlp_graph_run(g[i], &ce_mlp, &a, NULL), GG_SUCCESS);
        }
        captures[phase] = fake.calls[FAKE_BEGIN_CAPTURE] - c0;
        gathers[phase] = fake_nccl.calls[FN_ALL_GATHER] - a0;
    }
    print_message("captures per phase %d %d %d, all-gathers %d %d %d\n", captures[0], captures[1], captures[2],
                  gathers[0], gathers[1], gathers[2]);
    assert_int_equal(captures[0], CE_RANKS);
    assert_true(gathers[0] > 0); /* the exchange */
    assert_int_equal(captures[1], 0);
    assert_int_equal(captures[2], CE_RANKS); /* captured again on plain memory */
    assert_int_equal(gathers[2], 0);
    ce_graph_pair_end(ctxs, NULL, g);
}

static void every_host_memory_fault_copy_engines(void **state) {
    (void)state;
    every_life_fault_copy_engines(LIFE_HOST_MEMORY);
}

static void every_cuda_resource_fault_copy_engines(void **state) {
    (void)state;
    every_life_fault_copy_engines(LIFE_CUDA_RESOURCE);
}
#endif

/* After the fault loops: the lines scripts/collect_reliability.py reads (the NCCL calls' faults; the host-memory
 * faults, which it adds to test_faults' totals). */
static void nccl_fault_totals(void **state) {
    (void)state;
    printf("NCCL_FAULTS {\"injected\": %d, \"failures\": %d}\n", injected, failures);
    printf("FAULTS_HOST_MEMORY {\"injected\": %d, \"failures\": %d}\n", life_hits[LIFE_HOST_MEMORY],
           life_failures[LIFE_HOST_MEMORY]);
    printf("FAULTS_CUDA_RESOURCES {\"injected\": %d, \"failures\": %d}\n", life_hits[LIFE_CUDA_RESOURCE],
           life_failures[LIFE_CUDA_RESOURCE]);
    printf("FAULTS_CUDA_CALLS {\"injected\": %d, \"failures\": %d}\n", life_hits[LIFE_CUDA_CALL],
           life_failures[LIFE_CUDA_CALL]);
    assert_int_equal(failures, 0);
    assert_int_equal(life_failures[LIFE_HOST_MEMORY] + life_failures[LIFE_CUDA_RESOURCE] +
                         life_failures[LIFE_CUDA_CALL],
                     0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fingerprint_difference_names_the_field),
        cmocka_unit_test(fingerprint_mismatch_refused_on_every_field),
        cmocka_unit_test(a_rank_failing_to_make_a_syncing_graph_still_votes),
        cmocka_unit_test(a_peer_failing_to_make_a_syncing_graph_fails_it_here),
        cmocka_unit_test(init_that_never_completes_is_aborted),
        cmocka_unit_test(a_group_shares_one_init_deadline),
        cmocka_unit_test(finalize_that_never_ends_is_aborted),
        cmocka_unit_test(init_env_through_an_id_file),
        cmocka_unit_test(attach_refuses_a_communicator_on_another_device),
        cmocka_unit_test(warm_up_that_never_completes_or_fails_is_aborted),
        cmocka_unit_test(call_that_stays_in_progress_is_aborted),
        cmocka_unit_test(stream_that_never_drains_is_aborted_at_detach),
        cmocka_unit_test(context_destroyed_with_its_communicator),
        cmocka_unit_test(async_error_is_aborted_by_the_watchdog),
        cmocka_unit_test(reduce_refuses_host_memory),
        cmocka_unit_test(replay_past_the_step_deadline_is_aborted),
        cmocka_unit_test(runs_wait_for_a_replay_slot),
        cmocka_unit_test(replay_failed_on_the_gpu_is_aborted),
        cmocka_unit_test(eager_collectives_past_the_step_deadline_are_aborted),
        cmocka_unit_test(stream_failed_in_an_agreement_is_aborted),
        cmocka_unit_test(agreement_the_peers_never_join_is_aborted),
        cmocka_unit_test(agreement_that_fails_at_once_is_aborted),
        cmocka_unit_test(abort_from_another_thread),
        cmocka_unit_test(abort_during_a_free_that_waits),
        cmocka_unit_test(abort_during_a_run_past_the_buckets_that_plans),
        cmocka_unit_test(abort_during_a_failed_run_past_the_buckets),
        cmocka_unit_test(failed_syncing_calls_abort_but_refusals_and_open_captures_do_not),
        cmocka_unit_test(abort_during_a_detach_that_waits),
        cmocka_unit_test(abort_while_the_communicator_comes_and_goes),
        cmocka_unit_test(abort_from_a_log_callback),
        cmocka_unit_test(every_nccl_fault),
        cmocka_unit_test(every_host_memory_fault),
        cmocka_unit_test(every_cuda_resource_fault),
        cmocka_unit_test(every_cuda_call_fault),
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
        cmocka_unit_test(copy_engine_graph_is_ordered),
        cmocka_unit_test(collective_limit_counts_the_copy_engines),
        cmocka_unit_test(freed_window_captures_again),
        cmocka_unit_test(a_failed_warm_up_releases_every_rank_at_once),
        cmocka_unit_test(a_rank_failing_gg_dist_alloc_still_votes),
        cmocka_unit_test(every_nccl_fault_copy_engines),
        cmocka_unit_test(every_host_memory_fault_copy_engines),
        cmocka_unit_test(every_cuda_resource_fault_copy_engines),
#endif
        cmocka_unit_test(nccl_fault_totals),
    };
    return cmocka_run_group_tests_name("dist_faults", tests, NULL, NULL);
}
