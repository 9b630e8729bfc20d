/* gemm_f32w.cu - C = A @ B with A fp16 (activations) and B fp32 (a weight), B rounded to fp16 as it is read: the
 * GEMMs of blocks 2 and 3 that read a weight (G = dY @ W2, dX = R @ W1) at few tokens.
 *
 * Why: in fp16 mode cuBLASLt needs the weights in fp16, so each step first converts them (read 4 bytes, write 2, and
 * the GEMM reads 2 again). At few tokens those conversions are a third of the block's time (068 M = 256: ~40 us of
 * ~99, docs/perf-notes.md). Here the weight is read once, in fp32, straight into shared memory; each warp rounds the
 * elements of its mma fragments to fp16 on the way to the tensor cores (round to nearest: the same fp16 values the
 * conversion kernel writes).
 *
 * Tiles: 128 x 128 outputs per CTA, k-tiles of 32, 4 cp.async stages, 8 warps as 2 x 4 with 64 x 32 each (mma.sync
 * m16n8k16 f16 -> fp32). A's tile [128][32] fp16 is XOR-swizzled for ldmatrix; B's tile [32][128] fp32 rows are
 * padded to 132 floats, so the 32 lanes of a fragment load (8 columns x 4 k-rows two apart) hit 32 banks. With
 * few tiles, each tile is split over k across a thread-block cluster of up to 8 CTAs that add their partial tiles
 * through distributed shared memory in rank order (deterministic, no workspace), as in ssm_small.cu.
 * Requirements (gg_k_gemm_f32w_supported): N a multiple of 128, K of 32, 16-byte aligned tensors; M is arbitrary.
 */
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "gg_kernels.h"
#include "mma.cuh"

using namespace gg;
namespace cg = cooperative_groups;

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 4;
constexpr int kThreads = 256;         /* 8 warps, 2 (m) x 4 (n) */
constexpr int kMT = 4, kNT = 4;       /* a warp's 64 x 32: 4 x 4 mma tiles */
constexpr int kMaxSplit = 8;          /* the portable cluster size */
constexpr int kBPitch = kBN + 4;      /* floats per B row in shared memory: 528 bytes, a 16-byte multiple */
constexpr int kAElems = kBM * kBK;    /* halves */
constexpr int kBFloats = kBK * kBPitch;
constexpr size_t kStageBytes = kAElems * sizeof(__half) + kBFloats * sizeof(float);
constexpr size_t kSmemBytes = kStages * kStageBytes; /* 98 KiB: two CTAs per SM */
constexpr int kCPitch = kBN + 4;      /* the fp32 staging tile's row, floats */
static_assert((size_t)kBM * kCPitch * sizeof(float) <= kSmemBytes, "the staging tile fits in the pipeline's memory");

/* A's k-tile: row r's four 16-byte chunks XOR-swizzled by (r / 2) % 4, so the 8 rows an ldmatrix reads (64 bytes
 * apart) fall in 8 different bank groups. */
__device__ __forceinline__ int a_offset(int r, int chunk) { return r * kBK + ((chunk ^ ((r >> 1) & 3)) << 3); }

struct Args {
    const __half *a;
    const float *b;
    void *c;
    int64_t M, N, K;
    int tiles_m, k_split, c_half;
};

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi); /* .x (the lower k) in the low 16 bits, as mma expects */
    return *reinterpret_cast<const uint32_t *>(&h);
}

__global__ void __launch_bounds__(kThreads, 2) gemm_f32w_kernel(const Args p) {
    extern __shared__ __align__(128) unsigned char smem[];
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int tile = (int)blockIdx.x / p.k_split; /* m-blocks fastest: CTAs that read the same B strip run together */
    const int64_t m0 = (int64_t)(tile % p.tiles_m) * kBM, n0 = (int64_t)(tile / p.tiles_m) * kBN;
    const int k_tiles = (int)(p.K / kBK) / p.k_split, kt_begin = rank * k_tiles;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 2, wn = warp & 3;

    auto load_stage = [&](int kt) {
        __half *sa = reinterpret_cast<__half *>(smem + (kt % kStages) * kStageBytes);
        float *sb = reinterpret_cast<float *>(sa + kAElems);
        const int64_t k0 = (int64_t)(kt_begin + kt) * kBK;
#pragma unroll
        for (int i = 0; i < kBM * (kBK / 8) / kThreads; ++i) { /* A: 128 rows x 4 chunks of 8 halves */
            const int chunk = threadIdx.x + i * kThreads, r = chunk >> 2, c = chunk & 3;
            const bool valid = m0 + r < p.M;
            cp_async16(sa + a_offset(r, c), p.a + (valid ? m0 + r : 0) * p.K + k0 + c * 8, valid);
        }
#pragma unroll
        for (int i = 0; i < kBK * (kBN / 4) / kThreads; ++i) { /* B: 32 rows x 32 chunks of 4 floats */
            const int chunk = threadIdx.x + i * kThreads, k = chunk >> 5, c = chunk & 31;
            cp_async16(sb + k * kBPitch + c * 4, p.b + (k0 + k) * p.N + n0 + c * 4, true);
        }
    };

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s);
        cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<kStages - 2>(); /* k-tile kt has landed (this thread's chunks) */
        __syncthreads();              /* ... everyone's; and the stage read in kt - 1 may be refilled */
        if (kt + kStages - 1 < k_tiles) load_stage(kt + kStages - 1);
        cp_async_commit();
        const __half *sa = reinterpret_cast<const __half *>(smem + (kt % kStages) * kStageBytes);
        const float *sb = reinterpret_cast<const float *>(sa + kAElems);
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) {
            uint32_t fa[kMT][4], fb[kNT][2];
#pragma unroll
            for (int i = 0; i < kMT; ++i) /* rows lane % 16, k chunk 2 ks + lane / 16 */
                ldmatrix_x4(fa[i], sa + a_offset(wm * 64 + i * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
            for (int j = 0; j < kNT; ++j) { /* column lane / 4, k rows 2 (lane % 4) + {0, 1} and 8 below */
                const float *q = sb + (ks * 16 + 2 * (lane & 3)) * kBPitch + wn * 32 + j * 8 + (lane >> 2);
                fb[j][0] = half2_bits(q[0], q[kBPitch]);
                fb[j][1] = half2_bits(q[8 * kBPitch], q[9 * kBPitch]);
            }
#pragma unroll
            for (int i = 0; i < kMT; ++i)
#pragma unroll
                for (int j = 0; j < kNT; ++j) mma_f16(acc[i][j], fa[i], fb[j][0], fb[j][1]);
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the pipeline's memory becomes the staging tile */

    /* Stage the partial tile (fragment: c0, c1 at row lane / 4, columns 2 (lane % 4) + {0, 1}; c2, c3 8 rows
     * below), then each CTA of the cluster finishes 128 / k_split rows, adding the partials in rank order. */
    float *staged = reinterpret_cast<float *>(smem);
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
            const int r = wm * 64 + i * 16 + (lane >> 2), c = wn * 32 + j * 8 + 2 * (lane & 3);
            *reinterpret_cast<float2 *>(staged + r * kCPitch + c) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2 *>(staged + (r + 8) * kCPitch + c) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
    cluster.sync(); /* every partial is staged (a cluster of one: a barrier of the CTA) */
    const int rows = kBM / p.k_split;
    for (int v = threadIdx.x; v < rows * (kBN / 8); v += kThreads) { /* 8 columns a thread, 16 threads a row */
        const int r = rank * rows + v / (kBN / 8), c = (v % (kBN / 8)) * 8;
        const int64_t row = m0 + r;
        if (row >= p.M) continue;
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int q = 0; q < p.k_split; ++q) {
            const float *part = cluster.map_shared_rank(staged, q) + r * kCPitch + c;
            const float4 lo = *reinterpret_cast<const float4 *>(part);
            const float4 hi = *reinterpret_cast<const float4 *>(part + 4);
            s[0] += lo.x, s[1] += lo.y, s[2] += lo.z, s[3] += lo.w, s[4] += hi.x, s[5] += hi.y, s[6] += hi.z, s[7] += hi.w;
        }
        const int64_t at = row * p.N + n0 + c;
        if (p.c_half) {
            uint4 h;
            h.x = half2_bits(s[0], s[1]), h.y = half2_bits(s[2], s[3]), h.z = half2_bits(s[4], s[5]);
            h.w = half2_bits(s[6], s[7]);
            *reinterpret_cast<uint4 *>(static_cast<__half *>(p.c) + at) = h;
        } else {
            float *out = static_cast<float *>(p.c) + at;
            *reinterpret_cast<float4 *>(out) = make_float4(s[0], s[1], s[2], s[3]);
            *reinterpret_cast<float4 *>(out + 4) = make_float4(s[4], s[5], s[6], s[7]);
        }
    }
    cluster.sync(); /* no CTA leaves while the others read its shared memory */
}

} // namespace

extern "C" int gg_k_gemm_f32w_supported(int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0 || N % kBN != 0 || K % kBK != 0) return 0;
    return (M + kBM - 1) / kBM * (N / kBN) * kMaxSplit <= INT32_MAX;
}

extern "C" cudaError_t gg_k_gemm_f32w_prepare(void) {
    return cudaFuncSetAttribute(gemm_f32w_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes);
}

extern "C" cudaError_t gg_k_gemm_f32w(const void *A, const float *B, void *C, gg_dtype c_type, int64_t M, int64_t N,
                                      int64_t K, int sm_count, cudaStream_t stream) {
    Args p;
    p.a = static_cast<const __half *>(A);
    p.b = B;
    p.c = C;
    p.M = M;
    p.N = N;
    p.K = K;
    p.c_half = c_type == GG_DT_F16;
    p.tiles_m = (int)((M + kBM - 1) / kBM);
    const int64_t tiles = (int64_t)p.tiles_m * (N / kBN), k_tiles = K / kBK;
    /* Few tiles (few tokens): split each over k while the grid still fits in one wave of two CTAs per SM and every
     * CTA keeps whole k-tiles. */
    p.k_split = 1;
    while (p.k_split < kMaxSplit && tiles * p.k_split * 2 <= 2 * (int64_t)(sm_count > 0 ? sm_count : 1) &&
           k_tiles % (p.k_split * 2) == 0)
        p.k_split *= 2;

    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)(tiles * p.k_split));
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSmemBytes;
    config.stream = stream;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = (unsigned)p.k_split;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, gemm_f32w_kernel, p);
}
