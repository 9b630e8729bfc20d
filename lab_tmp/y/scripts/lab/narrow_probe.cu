/* narrow_probe.cu - lab probe (session 19): can memory-bound work run on a few SMs beside a cuBLASLt GEMM that
 * leaves those SMs free (SM_COUNT_TARGET), so that the FFN blocks' conversions and gelu' overlap their GEMMs?
 *
 * For each N (SMs left to the streaming kernel): the fp16 GEMM alone on 132 - N SMs, a streaming fp32 -> fp16
 * conversion alone on a grid of N CTAs (1024 threads, 8 float4 loads in flight per thread), and both at once
 * (launched in either order). Cold L2 before every run; medians of REPS runs by CUDA events.
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/narrow_probe scripts/lab/narrow_probe.cu \
 *     -lcublasLt && /tmp/narrow_probe [m n k]
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "probe_check.h"
#include "probe_lt.h"

constexpr int kUnroll = 8;

__global__ void __launch_bounds__(1024) narrow_convert(const float4 *__restrict__ in, uint2 *__restrict__ out,
                                                       int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
        float4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(in + i + u * stride);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            __half2 a = __floats2half2_rn(v[u].x, v[u].y), b = __floats2half2_rn(v[u].z, v[u].w);
            uint2 o;
            o.x = *reinterpret_cast<uint32_t *>(&a);
            o.y = *reinterpret_cast<uint32_t *>(&b);
            out[i + u * stride] = o;
        }
    }
    for (; i < n4; i += stride) {
        const float4 v = in[i];
        __half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
        uint2 o;
        o.x = *reinterpret_cast<uint32_t *>(&a);
        o.y = *reinterpret_cast<uint32_t *>(&b);
        out[i] = o;
    }
}

static const unsigned char kClusterCtas[] = {0, 0, 1, 2, 4, 2, 4, 8, 4, 8, 16, 8, 8, 16, 16, 16, 16};

struct Gemm {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
};

static Gemm plan(cublasLtHandle_t lt, int64_t m, int64_t n, int64_t k, int sm_target, size_t ws_max) {
    Gemm g{};
    LK(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t tn = CUBLAS_OP_N;
    LK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &tn, sizeof tn));
    LK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tn, sizeof tn));
    if (sm_target > 0) LK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target,
                                                         sizeof sm_target));
    LK(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_16F, m, k, m));
    LK(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_16F, k, n, k));
    LK(cublasLtMatrixLayoutCreate(&g.d, CUDA_R_32F, m, n, m));
    const std::vector<cublasLtMatmulHeuristicResult_t> r = lt_candidates(lt, g.op, g.a, g.b, g.d, ws_max, 16);
    const int found = (int)r.size();
    int pick = 0;
    if (sm_target > 0) /* clusters of at most 2 CTAs, as gradgraph's plans beside communication */
        for (int i = 0; i < found; ++i) {
            uint16_t shape = 0;
            size_t w = 0;
            cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shape,
                                                 sizeof shape, &w);
            const int c = shape < sizeof kClusterCtas ? kClusterCtas[shape] : 0;
            if (c > 0 && c <= 2) {
                pick = i;
                break;
            }
        }
    g.algo = r[pick].algo;
    g.ws = r[pick].workspaceSize;
    return g;
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    int64_t m = 6144, n = 1536, k = 8192; /* 068's dW2 at 8192 tokens: 155 GFLOP (or m n k from the arguments) */
    if (argc == 4) m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
    const int64_t conv_elems = 8192LL * 6144;   /* 068's act at 8192 tokens: 201 MB fp32 in, 101 MB fp16 out */
    const int REPS = 7;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    const size_t ws_max = 32u << 20;
    void *A, *B, *D, *ws, *in, *out, *flush;
    const size_t flush_bytes = 2 * 60u << 20;
    CK(cudaMalloc(&A, m * k * 2));
    CK(cudaMalloc(&B, k * n * 2));
    CK(cudaMalloc(&D, m * n * 4));
    CK(cudaMalloc(&ws, ws_max));
    CK(cudaMalloc(&in, conv_elems * 4));
    CK(cudaMalloc(&out, conv_elems * 2));
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(A, 0x3c, m * k * 2));
    CK(cudaMemset(B, 0x3c, k * n * 2));
    CK(cudaMemset(in, 0x3c, conv_elems * 4));
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t e0, g1, c1, ready;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&g1));
    CK(cudaEventCreate(&c1));
    CK(cudaEventCreate(&ready));
    const float one = 1.0f, zero = 0.0f;
    const double gflop = 2.0 * m * n * k / 1e9, conv_gb = conv_elems * 6.0 / 1e9;
    printf("GEMM %lldx%lldx%lld fp16->fp32 (%.0f GFLOP); conversion %.0f MB moved; %d SMs\n", (long long)m,
           (long long)n, (long long)k, gflop, conv_gb * 1e3, sms);
    printf("%4s %10s %10s %10s | %10s %10s %10s | %10s %10s %10s\n", "N", "gemm_us", "conv_us", "conv_TB/s",
           "c1st_gemm", "c1st_conv", "c1st_all", "g1st_gemm", "g1st_conv", "g1st_all");
    const int Ns[] = {0, 8, 16, 24, 32, 48};
    for (int N : Ns) {
        const Gemm g = plan(lt, m, n, k, N > 0 ? sms - N : 0, ws_max);
        const int conv_grid = N > 0 ? N : sms;
        auto gemm = [&](cudaStream_t s) {
            LK(cublasLtMatmul(lt, g.op, &one, A, g.a, B, g.b, &zero, D, g.d, D, g.d, &g.algo, ws, g.ws, s));
        };
        auto conv = [&](cudaStream_t s) {
            narrow_convert<<<conv_grid, 1024, 0, s>>>((const float4 *)in, (uint2 *)out, conv_elems / 4);
        };
        auto alone = [&](int r, auto work) { /* cold L2, then work on s1 alone: microseconds */
            float ms;
            CK(cudaMemsetAsync(flush, r, flush_bytes, s1));
            CK(cudaEventRecord(e0, s1));
            work(s1);
            CK(cudaEventRecord(g1, s1));
            CK(cudaEventSynchronize(g1));
            CK(cudaEventElapsedTime(&ms, e0, g1));
            return ms * 1e3f;
        };
        std::vector<float> tg, tc, both[2][3];
        for (int r = 0; r < REPS + 1; ++r) {
            const float t_gemm = alone(r, gemm), t_conv = alone(r, conv);
            if (r) tg.push_back(t_gemm), tc.push_back(t_conv); /* run 0 warms up */
            if (N == 0) continue;
            for (int order = 0; order < 2; ++order) {
                CK(cudaMemsetAsync(flush, r, flush_bytes, s1));
                CK(cudaEventRecord(e0, s1));
                CK(cudaStreamWaitEvent(s2, e0, 0));
                if (order == 0) {
                    conv(s2);
                    gemm(s1);
                } else {
                    gemm(s1);
                    conv(s2);
                }
                CK(cudaEventRecord(g1, s1));
                CK(cudaEventRecord(c1, s2));
                CK(cudaEventSynchronize(g1));
                CK(cudaEventSynchronize(c1));
                float mg, mc;
                CK(cudaEventElapsedTime(&mg, e0, g1));
                CK(cudaEventElapsedTime(&mc, e0, c1));
                if (r) {
                    both[order][0].push_back(mg * 1e3f);
                    both[order][1].push_back(mc * 1e3f);
                    both[order][2].push_back(std::max(mg, mc) * 1e3f);
                }
            }
        }
        const float gm = median(tg), cm = median(tc);
        printf("%4d %10.1f %10.1f %10.2f", N, gm, cm, conv_gb / (cm * 1e-6) / 1e3);
        for (int order = 0; order < 2; ++order)
            if (N > 0)
                printf(" | %10.1f %10.1f %10.1f", median(both[order][0]), median(both[order][1]),
                       median(both[order][2]));
        printf("\n");
        cublasLtMatmulDescDestroy(g.op);
        cublasLtMatrixLayoutDestroy(g.a);
        cublasLtMatrixLayoutDestroy(g.b);
        cublasLtMatrixLayoutDestroy(g.d);
    }
    CK(cudaDeviceSynchronize());
    printf("(c1st: the conversion launched first; g1st: the GEMM first; *_all: the later of the two ends)\n");
    return 0;
}
