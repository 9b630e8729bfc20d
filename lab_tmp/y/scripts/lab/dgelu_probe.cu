/* dgelu_probe.cu - lab probe (session 22): cuBLASLt's DGELU epilogue for the FFN blocks' G GEMM with fp16 operands
 * and output. The issue asks for the activation gradient in a GEMM epilogue wherever cuBLASLt runs it fused; the
 * brief measured DGELU fused for bf16 on an H200, never for fp16 (bf16 operands fail blocks 2/3's tolerance).
 * Questions, per shape of 068 (D 1536, F 6144) and 073 (D 2048, F 8192):
 *   1. Is R = (dY @ W2) * gelu'(x) one kernel (the graph of one call has one kernel node) with fp16 x as the aux?
 *   2. What does it cost over the plain G GEMM with fp16 output (best of the heuristic's first 8 algorithms each,
 *      cold L2 before every run as the bench does, median of 20 by CUDA events)?
 *   3. Which GELU does it differentiate: the tanh approximation (the blocks' spec) or erf? Checked against a float64
 *      reference on the fp16 inputs for the first 16 tokens, both forms, and against the spec's fp32 x.
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/dgelu_probe scripts/lab/dgelu_probe.cu -lcublasLt
 *   /tmp/dgelu_probe
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <cublasLt.h>
#include <cuda_fp16.h>

#include "probe_check.h"
#include "probe_lt.h"

/* N(0, sd) from a hash of (seed, i): Box-Muller on two 32-bit uniforms. Both the fp16 value and its fp32 source. */
__global__ void fill_normal(__half *h, float *f, size_t n, float sd, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u1 = ((uint32_t)z + 1.0f) / 4294967297.0f, u2 = (uint32_t)(z >> 32) / 4294967296.0f;
        const float v = sd * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
        h[i] = __float2half_rn(v);
        if (f) f[i] = v;
    }
}

static double gelu_grad_tanh(double x) {
    const double c = 0.7978845608028654, t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}
static double gelu_grad_erf(double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

struct Plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    std::vector<cublasLtMatmulHeuristicResult_t> algos;
};

/* G'(F x M) = W2'(F x D) @ dY'(D x M), column-major views of the row-major tensors (as src/blocks/ffn.c). */
static Plan plan(cublasLtHandle_t lt, int64_t M, int64_t D, int64_t F, bool dgelu, const void *aux, size_t ws) {
    Plan p;
    LK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (dgelu) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DGELU;
        const int64_t ld = F;
        LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    LK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16F, F, D, F));
    LK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16F, D, M, D));
    LK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16F, F, M, F));
    p.algos = lt_candidates(lt, p.op, p.a, p.b, p.d, ws, 8);
    return p;
}

static void run(cublasLtHandle_t lt, const Plan &p, int i, const void *w2, const void *dy, void *g, void *ws,
                size_t ws_bytes, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    LK(cublasLtMatmul(lt, p.op, &one, w2, p.a, dy, p.b, &zero, g, p.d, g, p.d, &p.algos[i].algo, ws, ws_bytes, s));
}

/* Kernel nodes in a graph of one call. */
static size_t kernels_of(cublasLtHandle_t lt, const Plan &p, int i, const void *w2, const void *dy, void *g,
                         void *ws, size_t ws_bytes, cudaStream_t s) {
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    run(lt, p, i, w2, dy, g, ws, ws_bytes, s);
    CK(cudaStreamEndCapture(s, &graph));
    size_t n = 0;
    CK(cudaGraphGetNodes(graph, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    CK(cudaGraphGetNodes(graph, nodes.data(), &n));
    size_t kernels = 0;
    for (auto node : nodes) {
        cudaGraphNodeType t;
        CK(cudaGraphNodeGetType(node, &t));
        kernels += t == cudaGraphNodeTypeKernel;
    }
    CK(cudaGraphDestroy(graph));
    return kernels;
}

int main() {
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    const size_t flush_bytes = 120u << 20, ws_bytes = 64u << 20;
    void *flush, *ws;
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMalloc(&ws, ws_bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    struct Block {
        const char *name;
        int64_t D, F;
        float w_sd, x_sd;
    } blocks[] = {{"068", 1536, 6144, 0.02f, 0.78f}, {"073", 2048, 8192, 1.0f / sqrtf(8192.0f), 1.0f}};
    const int64_t Ms[] = {1024, 2048, 4096, 8192};
    printf("%-4s %6s %-6s %5s %7s %10s %8s %10s\n", "blk", "M", "mode", "algos", "kernels", "best_us", "TFLOP/s",
           "vs_plain");
    for (const Block &b : blocks) {
        const int64_t D = b.D, F = b.F, Mmax = 8192;
        __half *dy, *w2, *x16, *g;
        float *x32;
        CK(cudaMalloc(&dy, Mmax * D * 2));
        CK(cudaMalloc(&w2, D * F * 2));
        CK(cudaMalloc(&x16, Mmax * F * 2));
        CK(cudaMalloc(&x32, Mmax * F * 4));
        CK(cudaMalloc(&g, Mmax * F * 2));
        fill_normal<<<1024, 256, 0, s>>>(dy, nullptr, Mmax * D, 1.0f, 1);
        fill_normal<<<1024, 256, 0, s>>>(w2, nullptr, D * F, b.w_sd, 2);
        fill_normal<<<1024, 256, 0, s>>>(x16, x32, Mmax * F, b.x_sd, 3);
        CK(cudaStreamSynchronize(s));

        /* 3: which GELU, on the first 16 tokens of an M = 1024 run */
        {
            const int64_t M = 1024, T = 16;
            Plan p = plan(lt, M, D, F, true, x16, ws_bytes);
            if (p.algos.empty()) {
                printf("%s: no DGELU algorithm for fp16\n", b.name);
            } else {
                CK(cudaMemsetAsync(g, 0xff, M * F * 2, s)); /* NaN: an unwritten element fails */
                run(lt, p, 0, w2, dy, g, ws, ws_bytes, s);
                CK(cudaStreamSynchronize(s));
                std::vector<__half> hdy(T * D), hw2(D * F), hx(T * F), hg(T * F);
                std::vector<float> fx(T * F);
                CK(cudaMemcpy(hdy.data(), dy, T * D * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hw2.data(), w2, D * F * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hx.data(), x16, T * F * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(fx.data(), x32, T * F * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hg.data(), g, T * F * 2, cudaMemcpyDeviceToHost));
                double err_tanh = 0, err_erf = 0, err_x32 = 0, ref_max = 0;
                int64_t nans = 0;
                std::vector<double> w(D * F);
                for (int64_t i = 0; i < D * F; ++i) w[i] = __half2float(hw2[i]);
                for (int64_t m = 0; m < T; ++m) {
                    std::vector<double> acc(F, 0.0);
                    for (int64_t k = 0; k < D; ++k) {
                        const double a = __half2float(hdy[m * D + k]);
                        for (int64_t f = 0; f < F; ++f) acc[f] += a * w[k * F + f];
                    }
                    for (int64_t f = 0; f < F; ++f) {
                        const double xv = __half2float(hx[m * F + f]), out = __half2float(hg[m * F + f]);
                        const double rt = acc[f] * gelu_grad_tanh(xv), re = acc[f] * gelu_grad_erf(xv);
                        const double rx = acc[f] * gelu_grad_tanh(fx[m * F + f]);
                        if (std::isnan(out)) ++nans;
                        err_tanh = std::max(err_tanh, std::fabs(out - rt));
                        err_erf = std::max(err_erf, std::fabs(out - re));
                        err_x32 = std::max(err_x32, std::fabs(out - rx));
                        ref_max = std::max(ref_max, std::fabs(rt));
                    }
                }
                printf("%s check (16 tokens x %lld, max|ref| %.3f): NaN %lld, max|err| vs tanh form %.3g, vs erf "
                       "form %.3g, vs tanh form on fp32 x %.3g (fp16 half-ulp at max|ref|: %.3g)\n",
                       b.name, (long long)F, ref_max, (long long)nans, err_tanh, err_erf, err_x32,
                       ref_max * 0x1p-11);
            }
        }

        /* 1, 2: kernels and time */
        for (int64_t M : Ms) {
            float plain_us = 0;
            for (int dgelu = 0; dgelu < 2; ++dgelu) {
                Plan p = plan(lt, M, D, F, dgelu, x16, ws_bytes);
                float best = 1e30f;
                int best_i = -1;
                for (int i = 0; i < (int)p.algos.size(); ++i) {
                    std::vector<float> t;
                    for (int r = 0; r < 21; ++r) {
                        CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, s));
                        CK(cudaEventRecord(e0, s));
                        run(lt, p, i, w2, dy, g, ws, ws_bytes, s);
                        CK(cudaEventRecord(e1, s));
                        CK(cudaEventSynchronize(e1));
                        float ms;
                        CK(cudaEventElapsedTime(&ms, e0, e1));
                        if (r > 0) t.push_back(ms * 1000.f);
                    }
                    std::sort(t.begin(), t.end());
                    if (t[t.size() / 2] < best) best = t[t.size() / 2], best_i = i;
                }
                if (best_i < 0) {
                    printf("%-4s %6lld %-6s %5d (none)\n", b.name, (long long)M, dgelu ? "dgelu" : "plain", 0);
                    continue;
                }
                const size_t k = kernels_of(lt, p, best_i, w2, dy, g, ws, ws_bytes, s);
                if (!dgelu) plain_us = best;
                printf("%-4s %6lld %-6s %5zu %7zu %10.2f %8.1f %10.3f\n", b.name, (long long)M,
                       dgelu ? "dgelu" : "plain", p.algos.size(), k, best, 2.0 * M * D * F / (best * 1e-6) / 1e12,
                       plain_us > 0 ? best / plain_us : 0.0);
            }
        }
        CK(cudaFree(dy));
        CK(cudaFree(w2));
        CK(cudaFree(x16));
        CK(cudaFree(x32));
        CK(cudaFree(g));
    }
    CK(cudaGetLastError());
    return 0;
}
