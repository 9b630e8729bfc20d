/* tma_probe.cu - lab probe (session 20): how fast can gemm_f32w's load pattern stream the fp32 weight, with no math?
 *
 * gemm_f32w (kernels/gemm_f32w.cu) reads a 67 MB fp32 weight at ~2.1 TB/s at 256 tokens, and a variant that loaded
 * only the weight was no faster than the whole kernel (session 20, call 3). This probe keeps only the loads: one CTA
 * per (column tile of 128, k slice) as in the kernel, thread 0 issuing TMA boxes into a ring of `stages` with
 * full/empty mbarriers, every thread reading one word of each stage before releasing it. Variants: the kernel's four
 * 128B-swizzled boxes of 32 columns x 64 rows per k-tile, or one plain box of 128 columns x 64 rows (512-byte
 * rows); with or without the activations' box (256 rows x 128 bytes, the same box for every column tile); ring
 * depth; k split (CTAs per tile). Cold L2 before every run (a 120 MB memset); medians of 20 runs by CUDA events.
 * `/tmp/tma_probe l2` (session 23): the L2 policy for read-once data, see l2_mode.
 * `/tmp/tma_probe flush`: the kernel's own pattern only (four swizzled boxes, 3 stages, clusters of 2 CTAs per
 * tile), the L2 made cold three ways: the memset (dirty lines left to write back), a kernel that reads 120 MB (clean
 * lines), and not at all (the weight still in L2 as far as it fits).
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o /tmp/tma_probe scripts/lab/tma_probe.cu \
 *     -lcuda
 *   /tmp/tma_probe [flush | l2]
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "mma.cuh"
#include "tma.cuh"

#include "probe_check.h"

constexpr int kCols = 128, kBK = 64, kTokens = 256;
constexpr int kActBytes = kTokens * kBK * 2; /* 32 KiB */
constexpr int kWBytes = kCols * kBK * 4;     /* 32 KiB */

struct Args {
    int wide;    /* 1: one 128-column box per k-tile (no swizzle); 0: four 32-column boxes, 128B swizzle */
    int act;     /* 1: the activations' box too */
    int stages;  /* ring depth */
    int split;   /* CTAs per column tile, each k_tiles k-tiles */
    int k_tiles;
    int stage_bytes;
    int hint;    /* 1: the weight's boxes with an evict-first L2 policy (session 23) */
    unsigned *sink;
};

using gg::mbar_arrive;
using gg::mbar_expect_tx;
using gg::mbar_init;
using gg::mbar_wait;
#define saddr gg::smem_addr
#define tma_2d gg::tma_load_2d

__global__ void __launch_bounds__(256) stream_kernel(const __grid_constant__ CUtensorMap map_a,
                                                     const __grid_constant__ CUtensorMap map_w, const Args a) {
    extern __shared__ unsigned char raw[];
    unsigned char *smem =
        reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~(uintptr_t)1023);
    __shared__ __align__(8) uint64_t full[8], empty[8];
    const int rank = blockIdx.x % a.split, tile = blockIdx.x / a.split, c0 = tile * kCols;
    const int k_first = rank * a.k_tiles * kBK, t = threadIdx.x;
    if (t == 0) {
        for (int s = 0; s < a.stages; ++s) {
            mbar_init(saddr(&full[s]), 1);
            mbar_init(saddr(&empty[s]), blockDim.x);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const uint32_t ring = saddr(smem);
    auto issue = [&](int kt) {
        const int s = kt % a.stages;
        if (kt >= a.stages) mbar_wait(saddr(&empty[s]), ((kt / a.stages) & 1) ^ 1);
        const uint32_t stage = ring + s * a.stage_bytes, bar = saddr(&full[s]);
        const int k = k_first + kt * kBK;
        mbar_expect_tx(bar, a.stage_bytes);
        uint32_t w = stage;
        if (a.act) {
            tma_2d(stage, &map_a, k, 0, bar);
            w += kActBytes;
        }
        if (a.wide) tma_2d(w, &map_w, c0, k, bar);
        else if (a.hint)
            for (int j = 0; j < 4; ++j)
                gg::tma_load_2d_hint(w + j * (kWBytes / 4), &map_w, c0 + 32 * j, k, bar, gg::l2_evict_first_policy());
        else
            for (int j = 0; j < 4; ++j) tma_2d(w + j * (kWBytes / 4), &map_w, c0 + 32 * j, k, bar);
    };
    if (t == 0)
        for (int kt = 0; kt < a.stages - 1 && kt < a.k_tiles; ++kt) issue(kt);
    unsigned acc = 0;
    for (int kt = 0; kt < a.k_tiles; ++kt) {
        if (t == 0 && kt + a.stages - 1 < a.k_tiles) issue(kt + a.stages - 1);
        const int s = kt % a.stages;
        mbar_wait(saddr(&full[s]), (kt / a.stages) & 1);
        acc += reinterpret_cast<const unsigned *>(smem + s * a.stage_bytes)[t * 8];
        __syncwarp();
        mbar_arrive(saddr(&empty[s]));
    }
    if (acc == 0x12345678u) a.sink[0] = acc; /* keeps the reads */
}

/* Reads n uint4 (the read flush: the L2 ends full of clean lines). */
__global__ void read_kernel(const uint4 *__restrict__ in, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(in + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

/* The few-token route's other memory traffic, for `l2` mode: n uint4 read (plain or ld.global.cs, evict-first),
 * written (plain or st.global.cs), or both at once by the two halves of the grid. */
__global__ void rw_kernel(const uint4 *__restrict__ in, uint4 *__restrict__ out, size_t n, int read_cs, int write_cs,
                          int what, unsigned *sink) { /* what: 1 read, 2 write, 3 both (half the CTAs each) */
    int b = blockIdx.x, nb = gridDim.x;
    bool reader = what == 1;
    if (what == 3) {
        nb /= 2;
        reader = b < nb;
        if (!reader) b -= nb;
    }
    unsigned acc = 0;
    for (size_t i = b * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)nb * blockDim.x) {
        if (reader) {
            const uint4 v = read_cs ? __ldcs(in + i) : in[i];
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        } else {
            const uint4 v = make_uint4((unsigned)i, 1u, 2u, 3u);
            if (write_cs) __stcs(out + i, v);
            else out[i] = v;
        }
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

static PFN_cuTensorMapEncodeTiled_v12000 encode() {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
}

static void make_map(CUtensorMap *m, CUtensorMapDataType type, size_t elem, void *base, int64_t rows, int64_t cols,
                     unsigned box_cols, unsigned box_rows, CUtensorMapSwizzle swizzle) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * elem};
    const cuuint32_t box[2] = {box_cols, box_rows}, es[2] = {1, 1};
    if (encode()(m, type, 2, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        fprintf(stderr, "tensor map\n");
        exit(1);
    }
}

/* Median of 20 CUDA-event times (µs) of launch() after the L2 made cold: fm 0 by a memset (dirty lines), 1 by a
 * read (clean lines), 2 not at all. */
template <typename F>
static double median_us(int fm, void *flush, size_t flush_bytes, int sms, unsigned *sink, F launch) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < 21; ++r) {
        if (fm == 0) CK(cudaMemsetAsync(flush, r, flush_bytes));
        if (fm == 1) read_kernel<<<4 * sms, 512>>>(static_cast<const uint4 *>(flush), flush_bytes / 16, sink);
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (r) ms.push_back(t);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e3;
}

/* `l2` mode (session 23): does an evict-first L2 policy on read-once data save the write-back of the flush's dirty
 * lines? The kernel's TMA pattern (four swizzled boxes, 3 stages, split 2, activations too) with and without the
 * policy on the weight, then plain reads, writes and both at once with and without ld/st.global.cs. */
static void l2_mode(int sms, void *flush, size_t flush_bytes, void *act, void *w, unsigned *sink) {
    const char *flush_names[] = {"write", "read"};
    printf("%-28s %6s %9s %8s\n", "what", "flush", "us", "TB/s");
    struct Shape { const char *name; int K, N; };
    const Shape shapes[] = {{"073 G", 2048, 8192}, {"068 G", 1536, 6144}};
    for (const Shape &sh : shapes) {
        CUtensorMap map_a, map_w;
        make_map(&map_a, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, act, kTokens, sh.K, kBK, kTokens,
                 CU_TENSOR_MAP_SWIZZLE_128B);
        make_map(&map_w, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, w, sh.K, sh.N, 32, kBK, CU_TENSOR_MAP_SWIZZLE_128B);
        Args a = {};
        a.act = 1;
        a.stages = 3;
        a.split = 2;
        a.k_tiles = sh.K / kBK / 2;
        a.stage_bytes = kWBytes + kActBytes;
        a.sink = sink;
        const int ctas = sh.N / kCols * a.split;
        const size_t smem = (size_t)a.stages * a.stage_bytes + 1024;
        for (int hint = 0; hint <= 1; ++hint)
            for (int fm = 0; fm < 2; ++fm) {
                a.hint = hint;
                const double us = median_us(fm, flush, flush_bytes, sms, sink,
                                            [&] { stream_kernel<<<ctas, 256, smem>>>(map_a, map_w, a); });
                char what[64];
                snprintf(what, sizeof what, "%s tma%s", sh.name, hint ? " evict-first" : "");
                printf("%-28s %6s %9.2f %8.2f\n", what, flush_names[fm], us, (double)sh.K * sh.N * 4 / us * 1e-6);
            }
        const size_t bytes = (size_t)sh.K * sh.N * 4, n = bytes / 16;
        const char *whats[] = {"", "read", "write", "read+write"};
        for (int what = 1; what <= 3; ++what)
            for (int rc = 0; rc <= (what != 2); ++rc)
                for (int wc = 0; wc <= (what != 1); ++wc)
                    for (int fm = 0; fm < 2; ++fm) {
                        const double us = median_us(fm, flush, flush_bytes, sms, sink, [&] {
                            rw_kernel<<<8 * sms, 256>>>(static_cast<const uint4 *>(w), static_cast<uint4 *>(flush),
                                                        n, rc, wc, what, sink);
                        });
                        char name[64];
                        snprintf(name, sizeof name, "%s %s%s%s", sh.name, whats[what], rc ? " ld.cs" : "",
                                 wc ? " st.cs" : "");
                        printf("%-28s %6s %9.2f %8.2f\n", name, flush_names[fm], us,
                               (double)bytes * (what == 3 ? 2 : 1) / us * 1e-6);
                    }
    }
}

int main(int argc, char **argv) {
    const bool flush_modes = argc > 1 && argv[1][0] == 'f';
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    struct Shape { const char *name; int K, N; };
    const Shape shapes[] = {{"073 G (K 2048, N 8192)", 2048, 8192}, {"068 G (K 1536, N 6144)", 1536, 6144}};
    void *flush, *act, *w;
    unsigned *sink;
    const size_t flush_bytes = 120u << 20;
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMalloc(&act, (size_t)kTokens * 2048 * 2));
    CK(cudaMalloc(&w, (size_t)2048 * 8192 * 4));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(act, 0, (size_t)kTokens * 2048 * 2));
    CK(cudaMemset(w, 0, (size_t)2048 * 8192 * 4));
    if (argc > 1 && argv[1][0] == 'l') {
        l2_mode(sms, flush, flush_bytes, act, w, sink);
        return 0;
    }
    printf("%-24s %5s %4s %6s %5s %5s %6s %9s %10s %10s\n", "shape", "wide", "act", "stages", "split", "ctas", "flush",
           "us", "weight TB/s", "all TB/s");
    const char *flush_names[] = {"write", "read", "none"};
    for (const Shape &sh : shapes) {
        CUtensorMap map_a, map_w32, map_w128;
        make_map(&map_a, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, act, kTokens, sh.K, kBK, kTokens,
                 CU_TENSOR_MAP_SWIZZLE_128B);
        make_map(&map_w32, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, w, sh.K, sh.N, 32, kBK, CU_TENSOR_MAP_SWIZZLE_128B);
        make_map(&map_w128, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, w, sh.K, sh.N, 128, kBK, CU_TENSOR_MAP_SWIZZLE_NONE);
        const int tiles = sh.N / kCols, kt_all = sh.K / kBK;
        for (int act_on = 0; act_on <= 1; ++act_on)
            for (int wide = 0; wide <= (flush_modes ? 0 : 1); ++wide)
                for (int stages : {2, 3, 4, 6})
                    for (int split : {1, 2, 4})
                        for (int fm = 0; fm < (flush_modes ? 3 : 1); ++fm) {
                        if (flush_modes && (stages != 3 || split != 2)) continue;
                        Args a = {};
                        a.wide = wide;
                        a.act = act_on;
                        a.stages = stages;
                        a.split = split;
                        a.k_tiles = kt_all / split;
                        a.stage_bytes = kWBytes + (act_on ? kActBytes : 0);
                        a.sink = sink;
                        const size_t smem = (size_t)stages * a.stage_bytes + 1024;
                        if (smem > 200 * 1024 || stages > 8) continue;
                        const double us = median_us(fm, flush, flush_bytes, sms, sink, [&] {
                            stream_kernel<<<tiles * split, 256, smem>>>(map_a, wide ? map_w128 : map_w32, a);
                        });
                        const double wb = (double)sh.K * sh.N * 4;
                        const double ab = act_on ? (double)tiles * kTokens * sh.K * 2 : 0;
                        printf("%-24s %5d %4d %6d %5d %5d %6s %9.2f %10.2f %10.2f\n", sh.name, wide, act_on, stages,
                               split, tiles * split, flush_names[fm], us, wb / us * 1e-6, (wb + ab) / us * 1e-6);
                    }
    }
    return 0;
}
