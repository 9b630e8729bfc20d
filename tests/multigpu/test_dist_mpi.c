/* test_dist_mpi.c - the MPI bootstraps end to end: one MPI process per GPU (CTest runs `mpiexec -n 2`), each makes
 * its context on the GPU of its rank, gets its NCCL communicator through MPI (gg_dist_init_mpi, then
 * gg_dist_init_env without an id file), and runs an MLP backward graph whose
 * weight and bias gradients are summed across the ranks inside the graph. Checked against the ranks' eager (local)
 * gradients summed on the host in double, and every rank must hold the same bits. Fewer than 2 GPUs: SKIPPED.
 * Each rank's verdict is agreed over MPI before asserting, so a failing rank cannot leave the other waiting. */
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

/* bootstrap: gg_dist_init_mpi, or gg_dist_init_env without a path (rank and size from mpiexec's environment, the
 * id through MPI's world communicator). */
static void gradients_are_summed_across_ranks(int via_env) {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    if (!all_ok(gpus >= size && size >= 2)) skip(); /* every rank skips together */
    int ok = cudaSetDevice(rank) == cudaSuccess;
    gg_config cfg = GG_CONFIG_INIT;
    cfg.device = rank;
    gg_ctx *ctx = NULL;
    ok = ok && gg_ctx_create(&cfg, &ctx) == GG_SUCCESS;
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.op = GG_REDUCE_SUM;
    ok = ok && (via_env ? gg_dist_init_env(ctx, NULL, &dc) : gg_dist_init_mpi(ctx, NULL, &dc)) == GG_SUCCESS;
    ok = ok && gg_dist_rank(ctx) == rank && gg_dist_size(ctx) == size;
    assert_true(all_ok(ok));

    /* per-rank inputs (each rank its own shard of tokens; the weights too, which is fine for a sum) */
    cudaStream_t stream = NULL;
    ok = cudaStreamCreate(&stream) == cudaSuccess;
    float *in[N_IN] = {0}, *local[N_OUT] = {0}, *synced[N_OUT] = {0};
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(rank + 1) * 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < N_IN && ok; ++i) {
        float *h = malloc(in_elems[i] * sizeof(float));
        for (size_t j = 0; j < in_elems[i]; ++j) h[j] = frand(&seed) * (i == W1 || i == W2 ? 0.05f : 1.0f);
        ok = h && cudaMalloc((void **)&in[i], in_elems[i] * sizeof(float)) == cudaSuccess &&
             cudaMemcpy(in[i], h, in_elems[i] * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess;
        free(h);
    }
    for (int i = 0; i < N_OUT && ok; ++i)
        ok = cudaMalloc((void **)&local[i], out_elems[i] * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&synced[i], out_elems[i] * sizeof(float)) == cudaSuccess &&
             cudaMemset(synced[i], 0xff, out_elems[i] * sizeof(float)) == cudaSuccess; /* NaN: unwritten fails */
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
    for (int o = 0; o < N_OUT; ++o) { /* every rank runs every collective, whatever it found */
        const size_t n = out_elems[o];
        float *l = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float)), *s0 = malloc(n * sizeof(float));
        double *ld = malloc(n * sizeof(double)), *sum = malloc(n * sizeof(double));
        const int copied = l && s && s0 && ld && sum &&
                           cudaMemcpy(l, local[o], n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
                           cudaMemcpy(s, synced[o], n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
        if (copied) {
            for (size_t j = 0; j < n; ++j) ld[j] = l[j];
            MPI_Allreduce(ld, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            memcpy(s0, s, n * sizeof(float));
            MPI_Bcast(s0, (int)(n * sizeof(float)), MPI_BYTE, 0, MPI_COMM_WORLD);
            for (size_t j = 0; j < n; ++j) {
                const double want = o == DX ? (double)l[j] : sum[j];
                const double err = fabs((double)s[j] - want) / (fabs(want) + 1e-3);
                if (!(err <= 1e-5)) ok = 0; /* NaN fails too */
                if (err > worst) worst = err;
            }
            if (o != DX && memcmp(s, s0, n * sizeof(float)) != 0) ok = 0; /* every rank: rank 0's bits */
        } else {
            MPI_Abort(MPI_COMM_WORLD, 3); /* host memory or a copy failed mid-collective: end every rank */
        }
        free(l), free(s), free(s0), free(ld), free(sum);
    }
    print_message("rank %d: worst relative error against the host sum %.3g\n", rank, worst);

    /* teardown in the documented order: graphs, then the communicator (with the context) */
    gg_graph_destroy(graph);
    for (int i = 0; i < N_IN; ++i) cudaFree(in[i]);
    for (int i = 0; i < N_OUT; ++i) cudaFree(local[i]), cudaFree(synced[i]);
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
                                       cmocka_unit_test(bootstrap_through_init_env_without_a_file)};
    const int failed = cmocka_run_group_tests_name("dist_mpi", tests, NULL, NULL);
    MPI_Finalize();
    return failed;
}
