/*
 * test_dist_dead_rank.c - data-parallel failures end in errors on every rank, never in hangs (label `multigpu`;
 * SKIPPED with fewer than 2 GPUs). Two processes (fork), one GPU each, communicators made by gg_dist_init_env with
 * the file bootstrap, as a launcher's ranks would:
 *  - a rank that dies mid-training: both ranks replay a syncing MLP graph for a few steps, then rank 1 exits without
 *    a word while rank 0 goes on. With GG_DIST_STEP_TIMEOUT_S=5, rank 0's watchdog (or NCCL's own error) aborts
 *    the communicator: its cudaStreamSynchronize returns, its next replay returns GG_ERROR_NCCL saying why, within
 *    the deadline and a margin, and its eager calls still work; teardown is bounded. Rank 0 prints
 *    `DEAD_RANK_DETECTED_S <s>`, from the first replay rank 1 never joined to the error (scripts/collect_reliability.py
 *    keeps it as dead_rank_detected_s);
 *  - a rank with another bucket_bytes: making the syncing graph fails on both ranks with GG_ERROR_INVALID_ARGUMENT
 *    naming bucket_bytes; the communicators stay intact (gg_dist_check) and detach cleanly.
 * The parent never touches CUDA (a forked child could not use it then): a probe child counts the GPUs. Every
 * process has an alarm, so nothing here can hang.
 */
#define _POSIX_C_SOURCE 200809L
#include <sys/wait.h>
#include <time.h>

#include "gpu_test.h"

enum { M = 1024, D = 1024, F = 4096, STEP_TIMEOUT_S = 5 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CHECK(cond, ...)                                                                                           \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            printf("rank %d: FAILED %s: ", rank, #cond);                                                          \
            printf(__VA_ARGS__);                                                                                   \
            printf("\n");                                                                                          \
            fflush(stdout);                                                                                        \
            return 1;                                                                                              \
        }                                                                                                          \
    } while (0)

typedef enum { DEAD_RANK, OTHER_BUCKET_BYTES } scenario;

/* One MLP call's tensors (zeros: only what the ranks wait for matters here). */
static int mlp_tensors(gg_mlp_args *a) {
    const size_t sizes[] = {M * D, M * D, F * D, D * F, M * F, M * F, M * D, F * D, F, D * F, D};
    void *t[11];
    for (int i = 0; i < 11; ++i) {
        if (cudaMalloc(&t[i], sizes[i] * sizeof(float)) != cudaSuccess) return 0;
        if (cudaMemset(t[i], 0, sizes[i] * sizeof(float)) != cudaSuccess) return 0;
    }
    *a = (gg_mlp_args){.grad_output = t[0], .hidden_states = t[1], .weight1 = t[2], .weight2 = t[3],
                       .intermediate = t[4], .intermediate_activated = t[5], .grad_hidden_states = t[6],
                       .grad_weight1 = t[7], .grad_bias1 = t[8], .grad_weight2 = t[9], .grad_bias2 = t[10]};
    return cudaDeviceSynchronize() == cudaSuccess;
}

static int rank_main(int rank, scenario sc, const char *id_path) {
    start_watchdog(150, "test_dist_dead_rank: a rank hung (150 s alarm)\n");
    char env[16];
    snprintf(env, sizeof env, "%d", rank);
    setenv("RANK", env, 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("GG_DIST_STEP_TIMEOUT_S", "5", 1);
    setenv("GG_DIST_PEER_TIMEOUT_S", "30", 1); /* graph creation's agreement and teardown */
    setenv("GG_DIST_INIT_TIMEOUT_S", "60", 1);
    gg_config cfg = GG_CONFIG_INIT;
    cfg.device = rank;
    cfg.precision = GG_PRECISION_TF32;
    gg_ctx *ctx = NULL;
    CHECK(gg_ctx_create(&cfg, &ctx) == GG_SUCCESS, "%s", gg_last_error(NULL));
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bind_cpus = 0;
    if (sc == OTHER_BUCKET_BYTES && rank == 1) dc.bucket_bytes = (size_t)8 << 20;
    CHECK(gg_dist_init_env(ctx, id_path, &dc) == GG_SUCCESS, "%s", gg_last_error(ctx));
    gg_mlp_args args;
    CHECK(mlp_tensors(&args), "cudaMalloc/cudaMemset failed");
    const gg_mlp_desc desc = {.tokens = M, .hidden = D, .ffn = F};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    static const int64_t buckets[] = {M};
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = buckets;
    gc.n_buckets = 1;
    gg_graph *g = NULL;
    const gg_status made = gg_mlp_graph_create(ctx, &desc, &gc, &g);
    if (sc == OTHER_BUCKET_BYTES) {
        printf("rank %d: gg_mlp_graph_create: %s: %s\n", rank, gg_status_string(made), gg_last_error(ctx));
        CHECK(made == GG_ERROR_INVALID_ARGUMENT, "expected GG_ERROR_INVALID_ARGUMENT");
        CHECK(strstr(gg_last_error(ctx), "bucket_bytes") != NULL, "the message names no bucket_bytes");
        CHECK(gg_dist_check(ctx) == GG_SUCCESS, "the communicator should be intact: %s", gg_last_error(ctx));
        CHECK(gg_dist_detach(ctx) == GG_SUCCESS, "%s", gg_last_error(ctx));
        gg_ctx_destroy(ctx);
        return 0;
    }
    CHECK(made == GG_SUCCESS, "%s", gg_last_error(ctx));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
    for (int step = 0; step < 5; ++step) {
        CHECK(gg_mlp_graph_run(g, &desc, &args, stream) == GG_SUCCESS, "step %d: %s", step, gg_last_error(ctx));
        CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "step %d: cudaStreamSynchronize", step);
    }
    printf("rank %d: 5 synced steps done\n", rank);
    fflush(stdout);
    if (rank == 1) _exit(0); /* dies mid-training: no detach, no destroy, no word to rank 0 */
    const double t0 = now_s();
    gg_status st = GG_SUCCESS;
    int steps = 0;
    while (st == GG_SUCCESS && now_s() - t0 < 60.0) {
        st = gg_mlp_graph_run(g, &desc, &args, stream);
        if (st != GG_SUCCESS) break;
        ++steps;
        const cudaError_t e = cudaStreamSynchronize(stream); /* waits for the peer until the abort ends it */
        CHECK(e == cudaSuccess, "cudaStreamSynchronize after the peer died: %s", cudaGetErrorString(e));
    }
    const double detected = now_s() - t0;
    printf("rank 0: after %d more replays: %s: %s\n", steps, gg_status_string(st), gg_last_error(ctx));
    printf("DEAD_RANK_DETECTED_S %.2f\n", detected);
    fflush(stdout);
    CHECK(st == GG_ERROR_NCCL, "expected GG_ERROR_NCCL");
    CHECK(detected < STEP_TIMEOUT_S + 5.0, "detected after %.2f s, past the deadline of %d s", detected,
          STEP_TIMEOUT_S);
    CHECK(strstr(gg_last_error(ctx), "rank 0") != NULL, "the message names no rank");
    CHECK(gg_dist_check(ctx) == GG_ERROR_NCCL, "gg_dist_check should report the abort");
    /* the context still works for eager calls */
    CHECK(gg_mlp_backward(ctx, &desc, &args, stream) == GG_SUCCESS, "eager after the abort: %s", gg_last_error(ctx));
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "eager after the abort: cudaStreamSynchronize");
    const double t1 = now_s();
    gg_graph_destroy(g);
    CHECK(gg_dist_detach(ctx) == GG_SUCCESS, "%s", gg_last_error(ctx));
    gg_ctx_destroy(ctx);
    printf("rank 0: teardown took %.2f s\n", now_s() - t1);
    return 0;
}

/* Runs both ranks, each in its own process; returns how many failed (a rank's exit code, or a signal). */
static int run_ranks(scenario sc) {
    char id_path[64];
    snprintf(id_path, sizeof id_path, "/tmp/gg_dead_rank_%d.id", (int)getpid());
    (void)remove(id_path);
    fflush(stdout);
    pid_t pids[2];
    for (int r = 0; r < 2; ++r) {
        pids[r] = fork();
        if (pids[r] == 0) {
            setvbuf(stdout, NULL, _IOLBF, 0);
            _exit(rank_main(r, sc, id_path));
        }
    }
    int failed = 0;
    for (int r = 0; r < 2; ++r) {
        int status = 0;
        if (pids[r] < 0 || waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_message("rank %d failed (status 0x%x)\n", r, status);
            ++failed;
        }
    }
    (void)remove(id_path);
    return failed;
}

static int gpus;

static void dead_rank_is_detected(void **state) {
    (void)state;
    if (gpus < 2) skip();
    assert_int_equal(run_ranks(DEAD_RANK), 0);
}

static void other_bucket_bytes_is_refused(void **state) {
    (void)state;
    if (gpus < 2) skip();
    assert_int_equal(run_ranks(OTHER_BUCKET_BYTES), 0);
}

int main(void) {
    start_watchdog(300, "test_dist_dead_rank: the run hung (300 s watchdog)\n");
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const pid_t probe = fork(); /* CUDA in the parent would leave the forked ranks unable to use it */
    if (probe == 0) _exit(gpu_count() > 100 ? 100 : gpu_count());
    int status = 0;
    gpus = probe > 0 && waitpid(probe, &status, 0) > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(other_bucket_bytes_is_refused),
        cmocka_unit_test(dead_rank_is_detected),
    };
    return cmocka_run_group_tests_name("dist_dead_rank", tests, NULL, NULL);
}
