/* write_probe.cu - lab probe (session 21): how fast can an H200 write a weight gradient's bytes, under the bench's
 * cold-L2 protocol? At few tokens the FFN blocks' dW GEMMs (K = tokens) are bound by writing their fp32 output:
 * cuBLASLt's dW2 writes 068's 37.7 MB in ~16 us (~2.4 TB/s, session 21 traces). This probe times the floor a GEMM
 * of its own could approach: a grid-stride kernel of 16-byte stores (one CTA of 256 threads per SM and per
 * `ctas_per_sm`), and cudaMemsetAsync, of 068's (37.7 MB) and 073's (67.1 MB) dW sizes. Before every run the L2 is
 * made cold as the bench does (a 120 MB memset: dirty lines left to write back) or by a 120 MB read (clean lines).
 * Medians of 20 runs by CUDA events.
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/write_probe scripts/lab/write_probe.cu
 *   /tmp/write_probe
 */
#include <algorithm>
#include <vector>

#include "probe_check.h"

__global__ void store_kernel(float4 *out, size_t n4) {
    const float4 v = make_float4(1.f, 2.f, 3.f, 4.f);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        out[i] = v;
}

__global__ void read_kernel(const float4 *in, size_t n4, float *sink) {
    float s = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        s += in[i].x;
    if (s == 12345.f) *sink = s; /* keeps the loads */
}

int main() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t flush_bytes = 120u << 20;
    void *flush, *out;
    float *sink;
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMalloc(&out, 80u << 20));
    CK(cudaMalloc(&sink, sizeof(float)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const size_t sizes[] = {6144ull * 1536 * 4, 8192ull * 2048 * 4};
    const char *names[] = {"068 dW (37.7 MB)", "073 dW (67.1 MB)"};
    printf("%-18s %-12s %-10s %10s %8s\n", "size", "flush", "writer", "median_us", "TB/s");
    for (int si = 0; si < 2; ++si)
        for (int flush_by_read = 0; flush_by_read < 2; ++flush_by_read)
            for (int w = 0; w < 5; ++w) { /* 0: memset; 1-4: store kernel with 1, 2, 4, 8 CTAs per SM */
                const int per_sm = w == 0 ? 0 : 1 << (w - 1);
                std::vector<float> t;
                for (int r = 0; r < 21; ++r) {
                    if (flush_by_read)
                        read_kernel<<<sms * 4, 256>>>((const float4 *)flush, flush_bytes / 16, sink);
                    else
                        CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
                    CK(cudaEventRecord(e0));
                    if (w == 0)
                        CK(cudaMemsetAsync(out, 0, sizes[si]));
                    else
                        store_kernel<<<sms * per_sm, 256>>>((float4 *)out, sizes[si] / 16);
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    if (r > 0) t.push_back(ms * 1000.f);
                }
                std::sort(t.begin(), t.end());
                const float us = t[t.size() / 2];
                char writer[16];
                snprintf(writer, sizeof writer, w == 0 ? "memset" : "store x%d", per_sm);
                printf("%-18s %-12s %-10s %10.2f %8.2f\n", names[si], flush_by_read ? "read" : "memset", writer, us,
                       sizes[si] / (us * 1e-6) / 1e12);
            }
    CK(cudaGetLastError());
    return 0;
}
