/* test_dist_mpi.c - one MPI process per GPU end to end (CTest runs `mpiexec -n 2`): each process makes its context
 * on the GPU of its rank and gets its NCCL communicator through MPI (gg_dist_init_mpi, or gg_dist_init_env without
 * an id file), then runs
 *  - an MLP backward graph whose weight and bias gradients are summed across the ranks inside the graph;
 *  - a step graph of three chained MLP layers (each layer's grad_output the next one's dX), its parameter gradients
 *    packed into buckets across the layers (small ones: the larger gradients in pieces) and summed inside the graph.
 * Checked against the ranks' eager (local) gradients summed on the host in double, activation gradients against the
 * local ones, and every rank must hold the same bits of every summed gradient; outputs start as NaN, so an unwritten
 * element fails. Fewer than 2 GPUs: SKIPPED. Each rank's verdict is agreed over MPI before asserting, so a failing
 * rank cannot leave the other waiting. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <mpi.h>

#include "gradgraph.h"

enum { M = 256, D = 128, F = 256 };
enum { DY, X, W1, W2, PRE, ACT, N_IN };
enum { DX, DW1, DB1, DW2, DB2, N_OUT };
static const size_t in_elems[N_IN] = {M * D, M * D, F * D, D * F, M * F, M * F};
static const size_t out_elems[N_OUT] = {M * D, F * D, F, D * F, D};

static int rank = -1, size = 0;

/* All ranks agree: the test fails on every rank when it fails on one. */
static int all_ok(int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

static float frand(uint64_t *s) { /* xorshift, N(0,1)-ish by summing uniforms */
    float acc = 0.0f;
    for (int i = 0; i < 4; ++i) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        acc += (float)((*s >> 11) * (1.0 / 9007199254740992.0)) - 0.5f;
    }
    return acc * 1.7320508f;
}

static void run_mlp(gg_ctx *ctx, float *const in[], float *const out[], gg_graph *graph, cudaStream_t stream,
                    int *ok) {
    const gg_mlp_desc desc = {.tokens = M, .hidden = D, .ffn = F, .precision = GG_PRECISION_FP32};
    const gg_mlp_args a = {in[DY], in[X], in[W1], in[W2], in[PRE], in[ACT],
                           out[DX], out[DW1], out[DB1], out[DW2], out[DB2], NULL, NULL, NULL, NULL, NULL, NULL};
    const gg_status st = graph ? gg_mlp_graph_run(graph, &desc, &a, stream) : gg_mlp_backward(ctx, &desc, &a, stream);
    if (st != GG_SUCCESS || cudaStreamSynchronize(stream) != cudaSuccess) *ok = 0;
}

/* A context on this rank's GPU with a communicator of every rank, summing (dc's other fields as given):
 * gg_dist_init_mpi, or gg_dist_init_env without a path (rank and size from mpiexec's environment, the id through
 * MPI's world communicator). Every rank skips together with fewer GPUs than ranks or a single rank. */
static gg_ctx *dist_ctx(int via_env, gg_dist_config dc) {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    if (!all_ok(gpus >= size && size >= 2)) skip();
    int ok = cudaSetDevice(rank) == cudaSuccess;
    gg_config cfg = GG_CONFIG_INIT;
    cfg.device = rank;
    gg_ctx *ctx = NULL;
    ok = ok && gg_ctx_create(&cfg, &ctx) == GG_SUCCESS;
    dc.op = GG_REDUCE_SUM;
    ok = ok && (via_env ? gg_dist_init_env(ctx, NULL, &dc) : gg_dist_init_mpi(ctx, NULL, &dc)) == GG_SUCCESS;
    ok = ok && gg_dist_rank(ctx) == rank && gg_dist_size(ctx) == size;
    assert_true(all_ok(ok));
    return ctx;
}

/* n floats on the device: random (scaled) from *seed, or NaN bytes (seed NULL) so that an unwritten element fails. */
static float *device_floats(size_t n, uint64_t *seed, float scale, int *ok) {
    float *d = NULL;
    if (!*ok) return NULL;
    if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess) {
        *ok = 0;
        return NULL;
    }
    if (!seed) {
        *ok = cudaMemset(d, 0xff, n * sizeof(float)) == cudaSuccess;
        return d;
    }
    float *h = malloc(n * sizeof(float));
    for (size_t j = 0; h && j < n; ++j) h[j] = frand(seed) * scale;
    *ok = h && cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess;
    free(h);
    return d;
}

/* This rank's seed for a test (salt), different on every rank. */
static uint64_t rank_seed(int salt) {
    return 0x9E3779B97F4A7C15ull ^ (uint64_t)(rank + 1 + 16 * salt) * 0x2545F4914F6CDD1Dull;
}

/* Per-rank inputs of one MLP (each rank its own shard of tokens; the weights too, which is fine for a sum). */
static void mlp_inputs(float *in[N_IN], uint64_t *seed, int *ok) {
    for (int i = 0; i < N_IN; ++i) in[i] = device_floats(in_elems[i], seed, i == W1 || i == W2 ? 0.05f : 1.0f, ok);
}

/* Output o of n floats: `synced` against `local` on this rank (an activation gradient, summed 0) or against the sum
 * of every rank's `local` in double (summed 1), and then the same bits as rank 0's. Collective: every rank calls it
 * for every output, whatever it found. Keeps the worst relative error in *worst. */
static void check_output(const float *local, const float *synced, size_t n, int summed, double *worst, int *ok) {
    float *l = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float)), *s0 = malloc(n * sizeof(float));
    double *ld = malloc(n * sizeof(double)), *sum = malloc(n * sizeof(double));
    const int copied = l && s && s0 && ld && sum &&
                       cudaMemcpy(l, local, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
                       cudaMemcpy(s, synced, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
    if (!copied) MPI_Abort(MPI_COMM_WORLD, 3); /* host memory or a copy failed mid-collective: end every rank */
    for (size_t j = 0; j < n; ++j) ld[j] = l[j];
    MPI_Allreduce(ld, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    memcpy(s0, s, n * sizeof(float));
    MPI_Bcast(s0, (int)(n * sizeof(float)), MPI_BYTE, 0, MPI_COMM_WORLD);
    for (size_t j = 0; j < n; ++j) {
        const double want = summed ? sum[j] : (double)l[j];
        const double err = fabs((double)s[j] - want) / (fabs(want) + 1e-3);
        if (!(err <= 1e-5)) *ok = 0; /* NaN fails too */
        if (err > *worst) *worst = err;
    }
    if (summed && memcmp(s, s0, n * sizeof(float)) != 0) *ok = 0; /* every rank: rank 0's bits */
    free(l), free(s), free(s0), free(ld), free(sum);
}

/* bootstrap: gg_dist_init_mpi (via_env 0) or gg_dist_init_env without a path (1). */
static void gradients_are_summed_across_ranks(int via_env) {
    gg_ctx *ctx = dist_ctx(via_env, (gg_dist_config)GG_DIST_CONFIG_INIT);
    cudaStream_t stream = NULL;
    int ok = cudaStreamCreate(&stream) == cudaSuccess;
    float *in[N_IN] = {0}, *local[N_OUT] = {0}, *synced[N_OUT] = {0};
    uint64_t seed = rank_seed(0);
    mlp_inputs(in, &seed, &ok);
    for (int i = 0; i < N_OUT; ++i) {
        local[i] = device_floats(out_elems[i], NULL, 0.0f, &ok);
        synced[i] = device_floats(out_elems[i], NULL, 0.0f, &ok);
    }
    if (ok) run_mlp(ctx, in, local, NULL, stream, &ok); /* eager: never communicates */
    gg_graph *graph = NULL;
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    const int64_t bucket = M;
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = &bucket;
    gc.n_buckets = 1;
    const gg_mlp_desc desc = {.tokens = M, .hidden = D, .ffn = F, .precision = GG_PRECISION_FP32};
    ok = ok && gg_mlp_graph_create(ctx, &desc, &gc, &graph) == GG_SUCCESS;
    assert_true(all_ok(ok)); /* both ranks ready, else one would wait in the other's all-reduce */
    run_mlp(ctx, in, synced, graph, stream, &ok);
    assert_true(all_ok(ok));

    /* parameter gradients: synced == Σ_ranks local (in double), the same bits on every rank; dX stays local */
    double worst = 0.0;
    for (int o = 0; o < N_OUT; ++o) check_output(local[o], synced[o], out_elems[o], o != DX, &worst, &ok);
    print_message("rank %d: worst relative error against the host sum %.3g\n", rank, worst);

    /* teardown in the documented order: graphs, then the communicator (with the context) */
    gg_graph_destroy(graph);
    for (int i = 0; i < N_IN; ++i) cudaFree(in[i]);
    for (int i = 0; i < N_OUT; ++i) cudaFree(local[i]), cudaFree(synced[i]);
    cudaStreamDestroy(stream);
    gg_ctx_destroy(ctx);
    assert_true(all_ok(ok));
}

/* A step graph of LAYERS chained MLP calls (layer l's grad_output is layer l + 1's dX; the step adds them top layer
 * first, as a backward runs), its parameter gradients summed across the ranks inside the graph in buckets of
 * 64 KiB across the layers (W1's and W2's gradients, 128 KiB each, in pieces), against the same calls run eagerly
 * on each rank and summed on the host. */
enum { LAYERS = 3 };
static void step_gradients_are_summed_across_ranks(void **state) {
    (void)state;
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bucket_bytes = 64 << 10;
    gg_ctx *ctx = dist_ctx(0, dc);
    cudaStream_t stream = NULL;
    int ok = cudaStreamCreate(&stream) == cudaSuccess;
    float *in[LAYERS][N_IN] = {{0}}, *local[LAYERS][N_OUT] = {{0}}, *synced[LAYERS][N_OUT] = {{0}};
    uint64_t seed = rank_seed(1);
    for (int l = 0; l < LAYERS; ++l) {
        mlp_inputs(in[l], &seed, &ok);
        for (int i = 0; i < N_OUT; ++i) {
            local[l][i] = device_floats(out_elems[i], NULL, 0.0f, &ok);
            synced[l][i] = device_floats(out_elems[i], NULL, 0.0f, &ok);
        }
    }
    const gg_mlp_desc desc = {.tokens = M, .hidden = D, .ffn = F, .precision = GG_PRECISION_FP32};
    const int64_t bucket = M;
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.policy = GG_BUCKETS_LIST;
    sc.bucket_tokens = &bucket;
    sc.n_buckets = 1;
    gg_step *step = NULL;
    ok = ok && gg_step_create(ctx, &sc, &step) == GG_SUCCESS;
    for (int l = LAYERS - 1; l >= 0 && ok; --l) {
        float *const *i = in[l];
        /* the top layer's grad_output is its own input; below, the layer above's dX (eager and step chains apart) */
        float *dy_local = l == LAYERS - 1 ? i[DY] : local[l + 1][DX];
        float *dy_synced = l == LAYERS - 1 ? i[DY] : synced[l + 1][DX];
        float *const *o = local[l], *const *s = synced[l];
        const gg_mlp_args eager = {dy_local, i[X], i[W1], i[W2], i[PRE], i[ACT], o[DX], o[DW1], o[DB1], o[DW2], o[DB2],
                                   NULL, NULL, NULL, NULL, NULL, NULL};
        const gg_mlp_args stepped = {dy_synced, i[X], i[W1], i[W2], i[PRE], i[ACT], s[DX], s[DW1], s[DB1], s[DW2],
                                     s[DB2], NULL, NULL, NULL, NULL, NULL, NULL};
        ok = gg_mlp_backward(ctx, &desc, &eager, (gg_stream)stream) == GG_SUCCESS &&
             gg_step_add_mlp(step, &desc, &stepped) == GG_SUCCESS;
    }
    ok = ok && cudaStreamSynchronize(stream) == cudaSuccess;
    assert_true(all_ok(ok)); /* both ranks ready: finalizing a syncing step is collective */
    const gg_status finalized = gg_step_finalize(step);
    if (finalized != GG_SUCCESS) print_message("rank %d: %s\n", rank, gg_last_error(ctx));
    assert_true(all_ok(finalized == GG_SUCCESS));
    ok = gg_step_run(step, M, 0, (gg_stream)stream) == GG_SUCCESS && cudaStreamSynchronize(stream) == cudaSuccess;
    if (!ok) print_message("rank %d: gg_step_run: %s\n", rank, gg_last_error(ctx));
    assert_true(all_ok(ok));

    double worst = 0.0;
    for (int l = 0; l < LAYERS; ++l)
        for (int o = 0; o < N_OUT; ++o) check_output(local[l][o], synced[l][o], out_elems[o], o != DX, &worst, &ok);
    print_message("rank %d: step of %d layers: worst relative error against the host sum %.3g\n", rank, LAYERS,
                  worst);

    gg_step_destroy(step); /* before the communicator: it holds NCCL work */
    for (int l = 0; l < LAYERS; ++l) {
        for (int i = 0; i < N_IN; ++i) cudaFree(in[l][i]);
        for (int i = 0; i < N_OUT; ++i) cudaFree(local[l][i]), cudaFree(synced[l][i]);
    }
    cudaStreamDestroy(stream);
    gg_ctx_destroy(ctx);
    assert_true(all_ok(ok));
}

static void bootstrap_through_init_mpi(void **state) {
    (void)state;
    gradients_are_summed_across_ranks(0);
}

static void bootstrap_through_init_env_without_a_file(void **state) {
    (void)state;
    gradients_are_summed_across_ranks(1);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const struct CMUnitTest tests[] = {cmocka_unit_test(bootstrap_through_init_mpi),
                                       cmocka_unit_test(bootstrap_through_init_env_without_a_file),
                                       cmocka_unit_test(step_gradients_are_summed_across_ranks)};
    const int failed = cmocka_run_group_tests_name("dist_mpi", tests, NULL, NULL);
    MPI_Finalize();
    return failed;
}
