// scripts/lab/ce_probe.cu - lab: can NCCL's copy-engine (zero-CTA) collectives carry a data-parallel gradient
// all-reduce beside GEMMs better than NCCL's SM all-reduce? One thread per GPU, everything captured in CUDA graphs.
//   all-reduce on SMs : ncclAllReduce on a communicator with minCTAs = maxCTAs = 8 (gradgraph's default)
//   copy engines      : ncclAlltoAll (CE) -> a sum kernel on SMS blocks -> in-place ncclAllGather (CE), on a
//                       CTAPolicy ZERO communicator with both buffers in NCCL_WIN_COLL_SYMMETRIC windows
// Each variant alone and beside a chain of FFN-shaped fp16 GEMMs (cuBLAS, all SMs or 124); prints the median graph
// span of 20 replays (slowest rank) and checks the copy-engine sum bit for bit against the host.
//   nvcc -O2 -arch=sm_90a ce_probe.cu -lnccl -lcublas -o ce_probe && NCCL_DEBUG=INFO ./ce_probe [floats]
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_check.h"

#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); exit(1); } } while (0)

enum { W = 2, REPS = 20, NGEMM = 4 };
static size_t n_floats = 6144ull * 1536; // 068's dW1 (37.7 MB)
static ncclComm_t comm8[W], commz[W], commd[W];
static pthread_barrier_t bar;
static double result[W][32];

__global__ void sum_halves(const float4 *t, float4 *out, size_t half4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < half4; i += (size_t)gridDim.x * blockDim.x) {
        float4 a = t[i], b = t[half4 + i];
        out[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
}
__global__ void fill(float *p, size_t n, int r) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)((i * 2654435761u + 977u * (r + 1)) % 100003) * 1e-3f - 50.f;
}

struct rank_state {
    int r;
    cudaStream_t main, side;
    cudaEvent_t fork, join, t0, t1;
    cublasHandle_t blas;
    __half *a, *b, *c;
    float *s, *t, *plain;
    void *ws;
};

static void gemms(rank_state *st, cudaStream_t s, int sms) {
    LK(cublasSetStream(st->blas, s));
    LK(cublasSetSmCountTarget(st->blas, sms));
    const float one = 1.f, zero = 0.f;
    for (int g = 0; g < NGEMM; g++) // [8192 x 1536] = [8192 x 6144] x [6144 x 1536]: one of 068's GEMMs
        LK(cublasGemmEx(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, 1536, 8192, 6144, &one, st->b, CUDA_R_16F, 1536, st->a,
                        CUDA_R_16F, 6144, &zero, st->c, CUDA_R_16F, 1536, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// comm: 0 none, 1 all-reduce on 8 CTAs, 2 copy engines (sum on sum_blocks blocks), 3 all-reduce NCCL's own CTAs
static void comm_ops(rank_state *st, cudaStream_t s, int comm, int sum_blocks) {
    size_t half = n_floats / W;
    if (comm == 1) NK(ncclAllReduce(st->plain, st->plain, n_floats, ncclFloat32, ncclSum, comm8[st->r], s));
    if (comm == 3) NK(ncclAllReduce(st->plain, st->plain, n_floats, ncclFloat32, ncclSum, commd[st->r], s));
    if (comm == 2) {
        NK(ncclAlltoAll(st->s, st->t, half, ncclFloat32, commz[st->r], s));
        sum_halves<<<sum_blocks, 512, 0, s>>>((const float4 *)st->t, (float4 *)(st->s + st->r * half), half / 4);
        CK(cudaGetLastError());
        NK(ncclAllGather(st->s + st->r * half, st->s, half, ncclFloat32, commz[st->r], s));
    }
}

static cudaGraphExec_t capture(rank_state *st, int gemm_sms, int comm, int sum_blocks) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st->main, cudaStreamCaptureModeThreadLocal));
    CK(cudaEventRecord(st->fork, st->main));
    CK(cudaStreamWaitEvent(st->side, st->fork, 0));
    if (gemm_sms) gemms(st, st->main, gemm_sms);
    if (comm) comm_ops(st, st->side, comm, sum_blocks);
    CK(cudaEventRecord(st->join, st->side));
    CK(cudaStreamWaitEvent(st->main, st->join, 0));
    CK(cudaStreamEndCapture(st->main, &g));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphDestroy(g));
    return e;
}

static int cmp(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

static double time_graph(rank_state *st, cudaGraphExec_t e) {
    float ms[REPS];
    for (int i = 0; i < REPS + 3; i++) {
        pthread_barrier_wait(&bar);
        CK(cudaEventRecord(st->t0, st->main));
        CK(cudaGraphLaunch(e, st->main));
        CK(cudaEventRecord(st->t1, st->main));
        CK(cudaStreamSynchronize(st->main));
        if (i >= 3) CK(cudaEventElapsedTime(&ms[i - 3], st->t0, st->t1));
    }
    qsort(ms, REPS, sizeof(float), cmp);
    return ms[REPS / 2] * 1e3;
}

static const char *names[] = {"gemms (132 SMs) alone", "gemms (124 SMs) alone", "all-reduce 8 CTAs alone",
                              "all-reduce NCCL's CTAs alone", "copy engines, sum on 8 blocks, alone",
                              "copy engines, sum on 132 blocks, alone", "gemms132 + all-reduce 8 CTAs",
                              "gemms124 + all-reduce 8 CTAs", "gemms132 + copy engines (sum 132 blocks)",
                              "gemms124 + copy engines (sum 8 blocks)", "gemms132 + copy engines (sum 8 blocks)",
                              "gemms132 + all-reduce NCCL's CTAs"};
static const int cfg[][3] = {{132, 0, 0}, {124, 0, 0}, {0, 1, 0}, {0, 3, 0}, {0, 2, 8}, {0, 2, 132},
                             {132, 1, 0}, {124, 1, 0}, {132, 2, 132}, {124, 2, 8}, {132, 2, 8}, {132, 3, 0}};
enum { NCFG = sizeof(cfg) / sizeof(cfg[0]) };

static void *rank_main(void *arg) {
    rank_state st = {};
    st.r = (int)(size_t)arg;
    CK(cudaSetDevice(st.r));
    CK(cudaStreamCreateWithFlags(&st.main, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&st.side, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&st.fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&st.join, cudaEventDisableTiming));
    CK(cudaEventCreate(&st.t0));
    CK(cudaEventCreate(&st.t1));
    LK(cublasCreate(&st.blas));
    CK(cudaMalloc(&st.ws, 64 << 20));
    LK(cublasSetWorkspace(st.blas, st.ws, 64 << 20));
    CK(cudaMalloc(&st.a, 8192ull * 6144 * 2));
    CK(cudaMalloc(&st.b, 6144ull * 1536 * 2));
    CK(cudaMalloc(&st.c, 8192ull * 1536 * 2));
    CK(cudaMemset(st.a, 0, 8192ull * 6144 * 2));
    CK(cudaMemset(st.b, 0, 6144ull * 1536 * 2));
    CK(cudaMalloc(&st.plain, n_floats * 4));
    fill<<<264, 512>>>(st.plain, n_floats, st.r);
    size_t bytes = n_floats * 4;
    NK(ncclMemAlloc((void **)&st.s, bytes));
    NK(ncclMemAlloc((void **)&st.t, bytes));
    ncclWindow_t ws, wt;
    NK(ncclCommWindowRegister(commz[st.r], st.s, bytes, &ws, NCCL_WIN_COLL_SYMMETRIC));
    NK(ncclCommWindowRegister(commz[st.r], st.t, bytes, &wt, NCCL_WIN_COLL_SYMMETRIC));
    // warm-up of each communicator (outside capture), then the copy-engine sum checked bit for bit
    comm_ops(&st, st.main, 1, 0);
    comm_ops(&st, st.main, 3, 0);
    fill<<<264, 512>>>(st.s, n_floats, st.r);
    comm_ops(&st, st.main, 2, 132);
    CK(cudaStreamSynchronize(st.main));
    float *host = (float *)malloc(bytes);
    CK(cudaMemcpy(host, st.s, bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n_floats; i++) {
        float e = 0.f;
        for (int q = 0; q < W; q++) e += (float)((i * 2654435761u + 977u * (q + 1)) % 100003) * 1e-3f - 50.f;
        if (memcmp(&e, &host[i], 4)) bad++;
    }
    printf("rank %d: copy-engine all-reduce of %zu floats (eager): %zu elements differ from the host sum\n", st.r,
           n_floats, bad);
    // the same, replayed from a graph
    fill<<<264, 512>>>(st.s, n_floats, st.r);
    cudaGraphExec_t ce = capture(&st, 0, 2, 8);
    pthread_barrier_wait(&bar);
    CK(cudaGraphLaunch(ce, st.main));
    CK(cudaStreamSynchronize(st.main));
    CK(cudaMemcpy(host, st.s, bytes, cudaMemcpyDeviceToHost));
    bad = 0;
    for (size_t i = 0; i < n_floats; i++) {
        float e = 0.f;
        for (int q = 0; q < W; q++) e += (float)((i * 2654435761u + 977u * (q + 1)) % 100003) * 1e-3f - 50.f;
        if (memcmp(&e, &host[i], 4)) bad++;
    }
    printf("rank %d: copy-engine all-reduce from a graph: %zu elements differ\n", st.r, bad);
    CK(cudaGraphExecDestroy(ce));
    free(host);
    for (int k = 0; k < NCFG; k++) {
        fill<<<264, 512>>>(st.s, n_floats, st.r); // keep values finite: each replay doubles them
        cudaGraphExec_t e = capture(&st, cfg[k][0], cfg[k][1], cfg[k][2]);
        pthread_barrier_wait(&bar);
        result[st.r][k] = time_graph(&st, e);
        CK(cudaGraphExecDestroy(e));
    }
    pthread_barrier_wait(&bar);
    NK(ncclCommWindowDeregister(commz[st.r], ws));
    NK(ncclCommWindowDeregister(commz[st.r], wt));
    NK(ncclMemFree(st.s));
    NK(ncclMemFree(st.t));
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) n_floats = strtoull(argv[1], NULL, 10);
    n_floats &= ~(size_t)(4 * W - 1);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    int devs[W] = {0, 1};
    ncclUniqueId id8, idz, idd;
    NK(ncclGetUniqueId(&id8));
    NK(ncclGetUniqueId(&idz));
    NK(ncclGetUniqueId(&idd));
    ncclConfig_t c8 = NCCL_CONFIG_INITIALIZER, cz = NCCL_CONFIG_INITIALIZER, cd = NCCL_CONFIG_INITIALIZER;
    c8.minCTAs = c8.maxCTAs = 8;
    cz.CTAPolicy = NCCL_CTA_POLICY_ZERO;
    NK(ncclGroupStart());
    for (int r = 0; r < W; r++) {
        CK(cudaSetDevice(devs[r]));
        NK(ncclCommInitRankConfig(&comm8[r], W, id8, r, &c8));
        NK(ncclCommInitRankConfig(&commz[r], W, idz, r, &cz));
        NK(ncclCommInitRankConfig(&commd[r], W, idd, r, &cd));
    }
    NK(ncclGroupEnd());
    pthread_barrier_init(&bar, NULL, W);
    pthread_t th[W];
    for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, rank_main, (void *)(size_t)r);
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    printf("%zu floats (%.1f MB) per rank; median graph span of %d replays, slowest rank\n", n_floats,
           n_floats * 4 / 1e6, REPS);
    for (int k = 0; k < NCFG; k++) {
        double m = result[0][k] > result[1][k] ? result[0][k] : result[1][k];
        printf("  %-44s %9.1f us   (ranks %.1f / %.1f)\n", names[k], m, result[0][k], result[1][k]);
    }
    for (int r = 0; r < W; r++) { ncclCommDestroy(comm8[r]); ncclCommDestroy(commz[r]); ncclCommDestroy(commd[r]); }
    return 0;
}
