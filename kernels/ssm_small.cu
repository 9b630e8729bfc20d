/* ssm_small.cu - block 4's whole backward for few tokens, in one launch: g = bf16(dY @ W) with the elementwise chain
 * in the epilogue (g never goes to memory), dW = bf16(dYᵀ @ gated), and grad_bias = bf16(Σ_rows dY).
 *
 * Why: at small M the cuBLASLt route is four dependent launches (dW, the bias sum, g, the chain) that each wait on
 * DRAM once and never overlap (at M = 128 ten times the speed-of-light time). Here every tile of both
 * GEMMs is a CTA of one grid, so the two GEMMs and the chain run side by side on all SMs.
 *
 * Tiles: 64 x 64 outputs per CTA, k-tiles of 64, 3 cp.async stages, 4 warps as 2 x 2 with 32 x 32 each (mma.sync
 * m16n8k16 bf16 -> fp32). A g tile reads dY rows [m0, m0+64) x H and W; a dW tile reads dY columns [h0, h0+64) and
 * gated columns [n0, n0+64) over all M rows (k = M, the tail zero-filled). The dW tiles of column block 0 also sum
 * their dY tile's columns in shared memory (grad_bias, fixed order: deterministic). With few tokens, g's tiles are
 * too few to fill the GPU and their k-loop (over H) is the long one: each is split over k across the CTAs of a
 * thread-block cluster (2 or 4), which add their partial tiles through distributed shared memory in rank order
 * (deterministic, no workspace). The longer kind of CTA is launched first, so it does not form the tail.
 * Requirements (gg_k_ssm_small_supported): H and E multiples of 64, 16-byte aligned tensors; M is arbitrary.
 */
#include <cooperative_groups.h>

#include "gg_kernels.h"
#include "launch.cuh"
#include "mma.cuh"
#include "ssm_chain.cuh"

using namespace gg;
namespace cg = cooperative_groups;

namespace {

typedef __nv_bfloat16 bf16;

constexpr int kTile = 64, kBK = 64, kStages = 3; /* BK 64: 079 M = 128 11.2 -> 10.2 us against BK 32 with 4 stages */
constexpr int kSmallThreads = 128;          /* 4 warps, 2 x 2 */
constexpr int kMaxSplit = 4;                /* g's k-split: CTAs per cluster */
constexpr int kMT = 2, kNT = 4;             /* a warp's 32 x 32: 2 x 4 mma tiles */
constexpr int kOperandElems = kTile * kBK;  /* one operand's k-tile: [64][kBK] or [kBK][64] bf16 */
constexpr int kStageElems = 2 * kOperandElems;
constexpr int kPitch = kTile + 8; /* fp32 staging row, 288 bytes: rows 8 banks apart, so that a warp's float2 stores
                                     (4 rows of 8 floats per half-warp) and a quarter-warp's float4 reads are
                                     conflict-free (a pitch of 68 had ncu count 16 % of the shared wavefronts excess) */
constexpr int kKChunks = kBK / 8;           /* 16-byte chunks in a row of kBK k */
constexpr size_t kStagingBytes = (size_t)kTile * kPitch * sizeof(float);
constexpr size_t kSmemBytes = (size_t)kStages * kStageElems * sizeof(bf16); /* 48 KiB: no opt-in needed */
static_assert(kStagingBytes + kSmallThreads * sizeof(float) <= kSmemBytes,
              "the staging tile and the bias halves fit in the pipeline's memory");
static_assert(kKChunks == 4 || kKChunks == 8, "rows_k_offset swizzles rows of 64 or 128 bytes");

/* Element offsets in a k-tile, 16-byte chunks XOR-swizzled so that the 8 rows an ldmatrix reads fall in 8 different
 * bank groups. rows_k: 64 rows of kBK contiguous k (dY as g's A). k_rows: kBK rows of one k each, 64 contiguous
 * columns (128 bytes, 8 chunks; W, gated, and dY as dW's A). */
__device__ __forceinline__ int rows_k_offset(int r, int c) {
    return r * kBK + ((c ^ ((r / (8 / kKChunks)) & (kKChunks - 1))) << 3);
}
__device__ __forceinline__ int k_rows_offset(int k, int c) { return k * kTile + ((c ^ (k & 7)) << 3); }

/* [64 rows][kBK k] from src (row-major, ld elements) rows r0.. (rows >= r_end zero-filled), columns k0.. */
__device__ __forceinline__ void load_rows_k(bf16 *tile, const bf16 *__restrict__ src, int64_t ld, int64_t r0,
                                            int64_t r_end, int64_t k0) {
#pragma unroll
    for (int i = 0; i < kTile * kKChunks / kSmallThreads; ++i) {
        const int chunk = threadIdx.x + i * kSmallThreads, r = chunk / kKChunks, c = chunk % kKChunks;
        const bool valid = r0 + r < r_end;
        cp_async16(tile + rows_k_offset(r, c), src + (valid ? r0 + r : 0) * ld + k0 + c * 8, valid);
    }
}

/* [kBK k][64 columns] from src (row-major, ld elements) rows k0.. (rows >= k_end zero-filled), columns col0.. */
__device__ __forceinline__ void load_k_rows(bf16 *tile, const bf16 *__restrict__ src, int64_t ld, int64_t k0,
                                            int64_t k_end, int64_t col0) {
#pragma unroll
    for (int i = 0; i < kBK * 8 / kSmallThreads; ++i) {
        const int chunk = threadIdx.x + i * kSmallThreads, k = chunk >> 3, c = chunk & 7;
        const bool valid = k0 + k < k_end;
        cp_async16(tile + k_rows_offset(k, c), src + (valid ? k0 + k : 0) * ld + col0 + c * 8, valid);
    }
}

struct SmallArgs {
    const bf16 *dy, *w, *gated;
    const bf16x8 *gate_activated, *ssm_output, *gate;
    bf16x8 *grad_ssm_output, *grad_gate;
    bf16 *dw, *db;
    int64_t M, H, E;
    int g_tiles, k_split;   /* g: tiles, and CTAs per tile (a cluster, each a slice of k) */
    int dw_tiles;           /* dW: tiles, a CTA each (k_split divides H / kBK, hence dw_tiles: whole clusters) */
    int dw_first, use_silu_gate, accumulate;
};

/* One 64 x 64 tile's k-loop over k-tiles [kt_begin, kt_begin + k_tiles). kWeightGrad: dW's tile (A = dY's columns
 * h0.. transposed, B = gated, k over M; with `bias`, also this thread's half-column sum of dY for grad_bias); else
 * g's (A = dY rows m0.., B = W, k over H). */
template <bool kWeightGrad>
__device__ __forceinline__ void tile_mainloop(const SmallArgs &a, bf16 *smem, int64_t row0, int64_t n0, int kt_begin,
                                              int k_tiles, float (&acc)[kMT][kNT][4], bool bias, float &bias_sum) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 1, wn = warp & 1;
    auto load_stage = [&](int kt) {
        bf16 *sa = smem + (kt % kStages) * kStageElems, *sb = sa + kOperandElems;
        const int64_t k0 = (int64_t)(kt_begin + kt) * kBK;
        if (kWeightGrad) {
            load_k_rows(sa, a.dy, a.H, k0, a.M, row0);
            load_k_rows(sb, a.gated, a.E, k0, a.M, n0);
        } else {
            load_rows_k(sa, a.dy, a.H, row0, a.M, k0);
            load_k_rows(sb, a.w, a.E, k0, a.H, n0);
        }
    };
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
        const bf16 *sa = smem + (kt % kStages) * kStageElems, *sb = sa + kOperandElems;
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) {
            uint32_t fa[kMT][4], fb[kNT][2];
#pragma unroll
            for (int i = 0; i < kMT; ++i) {
                const int m = wm * 32 + i * 16;
                if (kWeightGrad) /* stored [k][m]: matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), ... */
                    ldmatrix_x4_trans(fa[i], sa + k_rows_offset(ks * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                                 m / 8 + ((lane >> 3) & 1)));
                else /* stored [m][k]: rows lane % 16, k chunk 2 ks + lane / 16 */
                    ldmatrix_x4(fa[i], sa + rows_k_offset(m + (lane & 15), ks * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int j = 0; j < kNT; j += 2) { /* stored [k][n]: k rows lane % 16, the n chunks of tiles j, j + 1 */
                uint32_t r[4];
                ldmatrix_x4_trans(r, sb + k_rows_offset(ks * 16 + (lane & 15), (wn * 32 + j * 8) / 8 + (lane >> 4)));
                fb[j][0] = r[0];
                fb[j][1] = r[1];
                fb[j + 1][0] = r[2];
                fb[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < kMT; ++i)
#pragma unroll
                for (int j = 0; j < kNT; ++j) mma_bf16(acc[i][j], fa[i], fb[j][0], fb[j][1]);
        }
        if (kWeightGrad && bias) { /* column threadIdx % 64 of the dY tile, its half threadIdx / 64 of the rows */
            const int h = threadIdx.x & 63, k_first = (threadIdx.x >> 6) * (kBK / 2);
#pragma unroll
            for (int k = 0; k < kBK / 2; ++k)
                bias_sum += __bfloat162float(sa[k_rows_offset(k_first + k, h >> 3) + (h & 7)]);
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the pipeline's memory becomes the staging tile */
}

/* The accumulators into the fp32 staging tile [64][kPitch]. Fragment: c0, c1 at (row lane / 4, columns
 * 2 (lane % 4) + {0, 1}), c2, c3 eight rows below. */
__device__ __forceinline__ void stage_tile(float *tile, const float (&acc)[kMT][kNT][4]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 1, wn = warp & 1;
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
            const int r = wm * 32 + i * 16 + (lane >> 2), c = wn * 32 + j * 8 + 2 * (lane & 3);
            *reinterpret_cast<float2 *>(tile + r * kPitch + c) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2 *>(tile + (r + 8) * kPitch + c) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
    __syncthreads();
}

/* Eight staged values of row r, columns 8 cv..: the sum of the n_parts tiles part(0), part(1), ... (fixed order),
 * plus `add` (the old gradient when accumulating), rounded to bf16. The eight threads of a row read its two halves in
 * opposite orders (cv >= 4 the upper half first), so that each quarter-warp's 16-byte reads cover all 32 banks once.
 * `part` maps an index to a tile (a function, not an array of pointers: that array went to local memory). */
template <typename Part>
__device__ __forceinline__ bf16x8 staged_bf16(Part part, int n_parts, int r, int cv, const bf16x8 *add) {
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int first = cv & 4, second = 4 - first;
    for (int q = 0; q < n_parts; ++q) {
        const float *row = part(q) + r * kPitch + cv * 8;
        const float4 x = *reinterpret_cast<const float4 *>(row + first);
        const float4 y = *reinterpret_cast<const float4 *>(row + second);
        const float4 lo = first ? y : x, hi = first ? x : y;
        v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w, v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
    }
    bf16x8 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = __float2bfloat16_rn(add ? v[j] + bf(add->v[j]) : v[j]);
    return out;
}

/* The cluster barrier's two halves, split so that work goes between them: arrive (release: this thread's shared
 * memory writes, and its reads of the others' partials, come before it) and wait (acquire). Each of g's cluster
 * barriers is split: the first has the chain's loads issued inside it, the second arrives as soon as the partial
 * reads are done and waits only at the end, so it does not wait for the chain's global stores, as a cluster.sync()
 * after them would (ncu at 128 tokens: 12 % of the warps' stall samples on membar). */
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

/* At most 128 registers (4 CTAs per SM, as many as the shared memory allows): the chain's operands are held across
 * the cluster barrier. */
__global__ void __launch_bounds__(kSmallThreads, 4) ssm_small_kernel(const SmallArgs a) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
    float *tile = reinterpret_cast<float *>(smem_raw);                           /* after the k-loop */
    float *bias_halves = reinterpret_cast<float *>(smem_raw + kStagingBytes); /* after the k-loop */
    const int n_tiles = (int)(a.E / kTile);
    const int g_ctas = a.g_tiles * a.k_split;
    const int first = a.dw_first ? a.dw_tiles : g_ctas;
    const bool weight_grad = a.dw_first ? (int)blockIdx.x < first : (int)blockIdx.x >= first;
    const int cta = (int)blockIdx.x < first ? (int)blockIdx.x : (int)blockIdx.x - first;

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    const int64_t e_vec = a.E / 8;
    if (weight_grad) {
        const int64_t row0 = (int64_t)(cta / n_tiles) * kTile, n0 = (int64_t)(cta % n_tiles) * kTile;
        const bool bias = n0 == 0; /* column block 0 also sums grad_bias over its dY columns */
        float bias_sum = 0.0f;
        tile_mainloop<true>(a, smem, row0, n0, 0, (int)((a.M + kBK - 1) / kBK), acc, bias, bias_sum);
        stage_tile(tile, acc);
        for (int v = threadIdx.x; v < kTile * (kTile / 8); v += kSmallThreads) {
            const int r = v >> 3, cv = v & 7;
            bf16x8 *out = reinterpret_cast<bf16x8 *>(a.dw) + (row0 + r) * e_vec + n0 / 8 + cv;
            bf16x8 old;
            if (a.accumulate) old = *out;
            *out = staged_bf16([&](int) { return (const float *)tile; }, 1, r, cv, a.accumulate ? &old : nullptr);
        }
        if (bias) {
            bias_halves[threadIdx.x] = bias_sum;
            __syncthreads();
            if (threadIdx.x < kTile) {
                const float s = bias_halves[threadIdx.x] + bias_halves[threadIdx.x + kTile];
                bf16 *db = a.db + row0 + threadIdx.x;
                *db = __float2bfloat16_rn(a.accumulate ? __bfloat162float(*db) + s : s);
            }
        }
        return;
    }
    /* g: the k_split CTAs of a cluster share a tile, each a slice of k; each stages its partial tile, then each
     * finishes 64 / k_split of the rows, adding the partials from the cluster's shared memory in rank order. */
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank(), t = cta / a.k_split;
    const int64_t row0 = (int64_t)(t / n_tiles) * kTile, n0 = (int64_t)(t % n_tiles) * kTile;
    const int k_tiles = (int)(a.H / kBK) / a.k_split;
    float unused = 0.0f;
    tile_mainloop<false>(a, smem, row0, n0, rank * k_tiles, k_tiles, acc, false, unused);
    stage_tile(tile, acc);
    /* This thread's vectors of g: 64 / k_split rows of 8 vectors (8 threads cover a 128-byte row), over the CTA's
     * threads, at most kMaxVecs each; vec(u, gi) says whether the u-th exists (inside M) and where it is. */
    constexpr int kMaxVecs = kTile * (kTile / 8) / kSmallThreads;
    const int rows = kTile / a.k_split, n_vecs = rows * (kTile / 8);
    auto vec = [&](int u, int64_t &gi) {
        const int v = (int)threadIdx.x + u * kSmallThreads;
        const int64_t row = row0 + rank * rows + (v >> 3);
        gi = row * e_vec + n0 / 8 + (v & 7);
        return v < n_vecs && row < a.M;
    };
    cluster_arrive(); /* this CTA's partial is staged */
    /* The chain's operands, loaded while the cluster's other partials are staged: their DRAM round trip does not
     * follow the barrier (loaded before the k-loop instead, they would delay its loads). 16-byte loads into
     * registers (see ssm_chain8). */
    bf16x8 ga[kMaxVecs], so[kMaxVecs], gt[kMaxVecs];
#pragma unroll
    for (int u = 0; u < kMaxVecs; ++u) {
        int64_t gi;
        if (!vec(u, gi)) continue;
        ga[u] = a.gate_activated[gi], so[u] = a.ssm_output[gi];
        if (a.use_silu_gate) gt[u] = a.gate[gi];
    }
    cluster_wait(); /* every partial is staged */
    bf16x8 g[kMaxVecs]; /* summed from the cluster's partials first, so that the cluster can be released early */
#pragma unroll
    for (int u = 0; u < kMaxVecs; ++u) {
        int64_t gi;
        if (!vec(u, gi)) continue;
        const int v = (int)threadIdx.x + u * kSmallThreads;
        g[u] = staged_bf16([&](int q) { return (const float *)cluster.map_shared_rank(tile, q); }, a.k_split,
                           rank * rows + (v >> 3), v & 7, nullptr);
    }
    cluster_arrive(); /* this CTA has read the others' partials */
#pragma unroll
    for (int u = 0; u < kMaxVecs; ++u) {
        int64_t gi;
        if (!vec(u, gi)) continue;
        bf16x8 gs, gg;
        ssm_chain8(g[u], ga[u], so[u], gt[u], a.use_silu_gate != 0, gs, gg);
        a.grad_ssm_output[gi] = gs;
        a.grad_gate[gi] = gg;
    }
    cluster_wait(); /* no CTA leaves while the others read its shared memory */
}

} // namespace

extern "C" int gg_k_ssm_small_supported(int64_t M, int64_t H, int64_t E) {
    if (M <= 0 || H <= 0 || E <= 0 || H % kTile != 0 || E % kTile != 0) return 0;
    const int64_t ctas = (M + kTile - 1) / kTile * (E / kTile) * kMaxSplit + (H / kTile) * (E / kTile);
    return ctas <= INT32_MAX;
}

extern "C" cudaError_t gg_k_ssm_small(const uint16_t *grad_output, const uint16_t *weight, const uint16_t *gated_output,
                                      const uint16_t *gate_activated, const uint16_t *ssm_output, const uint16_t *gate,
                                      uint16_t *grad_ssm_output, uint16_t *grad_gate, uint16_t *grad_weight,
                                      uint16_t *grad_bias, int64_t M, int64_t H, int64_t E, int use_silu_gate,
                                      int accumulate, int sm_count, cudaStream_t stream) {
    SmallArgs a;
    a.dy = reinterpret_cast<const bf16 *>(grad_output);
    a.w = reinterpret_cast<const bf16 *>(weight);
    a.gated = reinterpret_cast<const bf16 *>(gated_output);
    a.gate_activated = reinterpret_cast<const bf16x8 *>(gate_activated);
    a.ssm_output = reinterpret_cast<const bf16x8 *>(ssm_output);
    a.gate = reinterpret_cast<const bf16x8 *>(gate);
    a.grad_ssm_output = reinterpret_cast<bf16x8 *>(grad_ssm_output);
    a.grad_gate = reinterpret_cast<bf16x8 *>(grad_gate);
    a.dw = reinterpret_cast<bf16 *>(grad_weight);
    a.db = reinterpret_cast<bf16 *>(grad_bias);
    a.M = M;
    a.H = H;
    a.E = E;
    a.g_tiles = (int)((M + kTile - 1) / kTile * (E / kTile));
    /* Few g tiles (few tokens): split each over k so that g's CTAs fill about four per SM (g's k-loop is the long
     * one) */
    a.k_split = 1;
    while (a.k_split < kMaxSplit && (int64_t)a.g_tiles * a.k_split * 2 <= 4 * (int64_t)(sm_count > 0 ? sm_count : 1) &&
           (H / kBK) % (a.k_split * 2) == 0) /* whole k-tiles per CTA */
        a.k_split *= 2;
    a.dw_tiles = (int)((H / kTile) * (E / kTile));
    a.dw_first = M > H / a.k_split; /* the CTAs with the longer k-loop first */
    a.use_silu_gate = use_silu_gate;
    a.accumulate = accumulate;

    LaunchAttrs attrs;
    const cudaLaunchConfig_t config = cluster_launch((unsigned)(a.g_tiles * a.k_split + a.dw_tiles), kSmallThreads,
                                                     kSmemBytes, a.k_split, GG_PRIORITY_OF_STREAM, stream, &attrs);
    return cudaLaunchKernelEx(&config, ssm_small_kernel, a);
}
