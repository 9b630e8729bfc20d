/* gemm_f32w.cu - C = A @ B with A fp16 (activations) and B fp32 (a weight), B rounded to fp16 as it is read: the
 * GEMMs of blocks 2 and 3 that read a weight (G = dY @ W2, dX = R @ W1) at few tokens.
 *
 * Why: in fp16 mode cuBLASLt needs the weights in fp16, so each step first converts them (read 4 bytes, write 2, and
 * the GEMM reads 2 again). At few tokens those conversions are a third of the block's time (068 M = 256: ~36 us of
 * ~99, docs/perf-notes.md). Here the weight is read once, in fp32, and rounded to fp16 in registers (round to
 * nearest: the values the conversion kernel writes).
 *
 * The weight never goes through shared memory: each warp owns 16 columns of B and loads them from global memory
 * straight into registers, 8 k16-steps ahead (a register ring), converts them, and transposes each 8 x 8 block with
 * movmatrix into the mma fragment layout. (A first version staged B in fp32 through shared memory: shared-memory
 * bandwidth capped it at ~120-200 TFLOP/s, slower than converting first.) A, shared by the CTA's 4 warps, comes
 * through a 4-stage cp.async ring and ldmatrix. Each warp computes all 128 rows of the CTA's tile, so every B element
 * is loaded by one warp only.
 *
 * Columns: a thread loads 4 adjacent fp32 columns (one 16-byte load) of a row; its first pair goes to one 8 x 8 block
 * and its second to the other, so the warp's two n8 tiles hold the columns {0,1,4,5,8,9,12,13} and
 * {2,3,6,7,10,11,14,15} of its 16. The accumulators come out in that order, which puts each thread's four columns
 * of a row back side by side.
 *
 * Tiles: 128 x 64 outputs per CTA (4 warps of 128 x 16), mma.sync m16n8k16 f16 -> fp32. With few tiles, each tile is
 * split over k across a thread-block cluster of up to 8 CTAs that add their partial tiles through distributed shared
 * memory in rank order (deterministic, no workspace), as in ssm_small.cu.
 * Requirements (gg_k_gemm_f32w_supported): N a multiple of 64, K of 128, 16-byte aligned tensors; M is arbitrary.
 */
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "gg_kernels.h"
#include "mma.cuh"

using namespace gg;
namespace cg = cooperative_groups;

namespace {

constexpr int kBM = 128, kBN = 64, kWarpN = 16;
constexpr int kThreads = 128;                /* 4 warps side by side in n */
constexpr int kCtasPerSm = 3;                /* the register budget: 65536 / (kThreads * kCtasPerSm) each */
constexpr int kMT = kBM / 16;                /* a warp's m16 tiles */
constexpr int kAhead = 8;                    /* k16-steps of B in flight per warp */
constexpr int kKStep = 16, kKUnit = kAhead * kKStep; /* K and each CTA's k range: multiples of kKUnit */
constexpr int kBK = 32, kStages = 4;         /* A's cp.async ring: k-tiles of 32 */
constexpr int kMaxSplit = 8;                 /* the portable cluster size */
constexpr int kAElems = kBM * kBK;           /* halves per stage */
constexpr int kCPitch = kBN + 4;             /* the fp32 staging tile's row, floats */
constexpr size_t kABytes = (size_t)kStages * kAElems * sizeof(__half);
constexpr size_t kCBytes = (size_t)kBM * kCPitch * sizeof(float);
constexpr size_t kSmemBytes = kABytes > kCBytes ? kABytes : kCBytes; /* under 48 KiB: no opt-in */
static_assert(kSmemBytes <= 48 * 1024, "dynamic shared memory beyond 48 KiB needs cudaFuncSetAttribute");
static_assert(kAhead % (kBK / kKStep) == 0, "the register ring covers whole A k-tiles");

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

/* 16 bytes of read-only global memory, issued where it stands: volatile, so the compiler keeps it ahead of the
 * tensor-core work it is meant to overlap instead of sinking it next to its use to save registers. */
__device__ __forceinline__ float4 load_early(const float *p) {
    float4 v;
    asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi); /* .x in the low 16 bits */
    return *reinterpret_cast<const uint32_t *>(&h);
}

__global__ void __launch_bounds__(kThreads, kCtasPerSm) gemm_f32w_kernel(const Args p) {
    extern __shared__ __align__(128) unsigned char smem[];
    __half *sa_ring = reinterpret_cast<__half *>(smem);
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int tile = (int)blockIdx.x / p.k_split; /* m-blocks fastest: CTAs that read the same B strip run together */
    const int64_t m0 = (int64_t)(tile % p.tiles_m) * kBM, n0 = (int64_t)(tile / p.tiles_m) * kBN;
    const int64_t k_len = p.K / p.k_split, k_begin = rank * k_len;
    const int steps = (int)(k_len / kKStep), k_tiles = (int)(k_len / kBK);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    auto load_a = [&](int kt) { /* A k-tile kt: 128 rows x 4 chunks of 8 halves */
        __half *sa = sa_ring + (kt % kStages) * kAElems;
        const int64_t k0 = k_begin + (int64_t)kt * kBK;
#pragma unroll
        for (int i = 0; i < kBM * (kBK / 8) / kThreads; ++i) {
            const int chunk = threadIdx.x + i * kThreads, r = chunk >> 2, c = chunk & 3;
            const bool valid = m0 + r < p.M;
            cp_async16(sa + a_offset(r, c), p.a + (valid ? m0 + r : 0) * p.K + k0 + c * 8, valid);
        }
    };
    /* This thread's B: rows k + lane / 4 and 8 below, columns 4 (lane % 4) .. + 3 of the warp's 16 */
    const float *b_lane = p.b + (k_begin + (lane >> 2)) * p.N + n0 + warp * kWarpN + 4 * (lane & 3);
    const int64_t b_step = (int64_t)kKStep * p.N;
    auto load_b = [&](int s, float4(&w)[2]) {
        const float *q = b_lane + (int64_t)s * b_step;
        w[0] = load_early(q);
        w[1] = load_early(q + 8 * p.N);
    };

    float acc[kMT][2][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    float4 ring[kAhead][2];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) load_b(u, ring[u]); /* steps is a multiple of kAhead */
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_a(s);
        cp_async_commit();
    }
    for (int s0 = 0; s0 < steps; s0 += kAhead) {
#pragma unroll
        for (int u = 0; u < kAhead; ++u) {
            const int s = s0 + u, kt = s / (kBK / kKStep);
            if (u % (kBK / kKStep) == 0) { /* a new A k-tile */
                cp_async_wait<kStages - 2>(); /* k-tile kt has landed (this thread's chunks) */
                __syncthreads();              /* ... everyone's; and the stage read in kt - 1 may be refilled */
                if (kt + kStages - 1 < k_tiles) load_a(kt + kStages - 1);
                cp_async_commit();
            }
            /* Every operand of the step first (B's fragments of both n8 tiles from this step's registers, A's from
             * shared memory), so their latencies overlap instead of each stalling the mma right behind it; then the
             * step kAhead ahead into the freed registers, then the mma's. */
            uint32_t fb[2][2], fa[kMT][4];
            fb[0][0] = movmatrix_trans(half2_bits(ring[u][0].x, ring[u][0].y));
            fb[1][0] = movmatrix_trans(half2_bits(ring[u][0].z, ring[u][0].w));
            fb[0][1] = movmatrix_trans(half2_bits(ring[u][1].x, ring[u][1].y));
            fb[1][1] = movmatrix_trans(half2_bits(ring[u][1].z, ring[u][1].w));
            const __half *sa = sa_ring + (kt % kStages) * kAElems;
            const int chunk = (s % (kBK / kKStep)) * 2 + (lane >> 4);
#pragma unroll
            for (int i = 0; i < kMT; ++i) /* rows lane % 16 of m16 tile i, k chunk 2 step + lane / 16 */
                ldmatrix_x4(fa[i], sa + a_offset(i * 16 + (lane & 15), chunk));
            if (s + kAhead < steps) load_b(s + kAhead, ring[u]);
#pragma unroll
            for (int i = 0; i < kMT; ++i) {
                mma_f16(acc[i][0], fa[i], fb[0][0], fb[0][1]);
                mma_f16(acc[i][1], fa[i], fb[1][0], fb[1][1]);
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the A ring becomes the staging tile */

    /* Stage the partial tile: row lane / 4 (+ 8) of each m16 tile; columns 4 (lane % 4) .. + 3 of the warp's 16 (tile
     * 0 holds the first pair, tile 1 the second), then each CTA of the cluster finishes 128 / k_split rows, adding
     * the partials in rank order. */
    float *staged = reinterpret_cast<float *>(smem);
    const int col = warp * kWarpN + 4 * (lane & 3);
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
        const int r = i * 16 + (lane >> 2);
        *reinterpret_cast<float4 *>(staged + r * kCPitch + col) =
            make_float4(acc[i][0][0], acc[i][0][1], acc[i][1][0], acc[i][1][1]);
        *reinterpret_cast<float4 *>(staged + (r + 8) * kCPitch + col) =
            make_float4(acc[i][0][2], acc[i][0][3], acc[i][1][2], acc[i][1][3]);
    }
    cluster.sync(); /* every partial is staged (a cluster of one: a barrier of the CTA) */
    const int rows = kBM / p.k_split;
    for (int v = threadIdx.x; v < rows * (kBN / 8); v += kThreads) { /* 8 columns a thread, 8 threads a row */
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
    if (M <= 0 || N <= 0 || K <= 0 || N % kBN != 0 || K % kKUnit != 0) return 0;
    return (M + kBM - 1) / kBM * (N / kBN) * kMaxSplit <= INT32_MAX;
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
    const int64_t tiles = (int64_t)p.tiles_m * (N / kBN);
    /* Few tiles (few tokens): split each over k while the grid still fits in one wave of resident CTAs and every
     * CTA's k range stays a multiple of kKUnit. */
    p.k_split = 1;
    while (p.k_split < kMaxSplit && tiles * p.k_split * 2 <= kCtasPerSm * (int64_t)(sm_count > 0 ? sm_count : 1) &&
           K % (kKUnit * p.k_split * 2) == 0)
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
