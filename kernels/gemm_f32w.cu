/* gemm_f32w.cu - blocks 2/3's weight GEMMs at few tokens: C[M,N] = A[M,K] @ B[K,N] with A the activations in fp16
 * and B the fp32 weight, rounded to fp16 on its way into the tensor cores, so the weight needs no fp16 copy first.
 *
 * Why: at few tokens the cuBLASLt route converts both fp32 weights to fp16 (each read and written whatever M is)
 * before the GEMMs that read them, and that conversion is the largest item of 068 / 073 at M = 256
 * (docs/decisions.md). An mma.sync kernel doing this lost: each mma needed its A fragment from shared
 * memory (ldmatrix) and the weight shuffled into place, and the shared-memory pipe capped it. Here Hopper's wgmma
 * takes the weight as its register operand (A of wgmma) and the activations from shared memory (B of wgmma) through
 * a descriptor: per k16 step a thread reads four float2 of the weight from shared memory and nothing else.
 *
 * Tiles: a CTA is kGroups warpgroups, each making 64 columns of C (wgmma's m) for the same kTokens tokens (wgmma's
 * n), over a slice of k. The activations are read again by every CTA along N, so
 * wider CTAs move fewer bytes through L2: with 64 columns they were twice the weight's bytes. The weight is read
 * again by every token tile, so where it saves a tile a CTA takes kExtraTokens more tokens in a second wgmma
 * (n = 64) on the same weight fragment (the wide tile: tile_tokens).
 * - TMA brings both operands into a kStages-deep ring of k-tiles of 64 (with per-thread
 *   cp.async, ~300 instructions per warp and k-tile went to copies and their addresses, and the kernel was
 *   issue-bound): thread 0 issues, per k-tile, one box of the activations (kTokens rows of
 *   128 bytes) and four boxes of the fp32 weight (64 k rows x 32 columns each), all with the 128-byte swizzle, and
 *   the stage's "full" mbarrier counts their bytes. The consumers release a stage through its "empty" mbarrier.
 * - The activations' box is what wgmma's B descriptor names (K-major, 128-byte swizzle; rows past M zero-filled by
 *   the TMA). The weight's: row r of a box at r x 128 bytes, its 16-byte chunk c at chunk c ^ (r % 8); the swizzle
 *   also spreads a warp's fragment reads over the banks (two wavefronts per 256 bytes, the minimum).
 * - The fragment: row g of a warp's 16 is column 2g, row g + 8 is column 2g + 1, so a thread's two columns are one
 *   float2 per k row, packed to f16x2 (round to nearest even) in pairs of k rows.
 * - k split: the CTAs of a thread-block cluster share a tile, each a slice of k (the k-tiles dealt out as evenly as
 *   they go); each stages its partial tile in shared memory and then finishes a share of the tokens, adding the
 *   cluster's partials in rank order (deterministic, no workspace). The split is sized so that every cluster fits
 *   on the GPU at once (gg_k_gemm_f32w_split).
 * sm_90a only (wgmma); the host asks gg_k_gemm_f32w_supported and the context's has_wgmma first. */
#include <cooperative_groups.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>

#include "gg_kernels.h"
#include "launch.cuh"
#include "mma.cuh"
#include "tma.cuh"
#include "vec.cuh"
#include "wgmma.cuh"

using namespace gg;
namespace cg = cooperative_groups;

namespace {

constexpr int kGroups = 2;    /* consumer warpgroups: each 64 columns, all sharing the activations' tile */
constexpr int kCols = 64 * kGroups; /* C columns per CTA (64 = wgmma's m per warpgroup) */
constexpr int kTokens = 256;  /* tokens per CTA: wgmma's n */
constexpr int kExtraTokens = 64; /* a wide tile's tokens past kTokens: a second wgmma (n = 64) with the same weight
                                    fragment, so that 257-320 tokens are one tile, not two (tile_tokens) */
constexpr int kBK = 64;       /* k per tile: a 128-byte row of fp16 */
constexpr int kStages = 3;    /* the ring of k-tiles (both operands) */
constexpr int kPerSm = 1;     /* CTAs per SM the shared memory allows */
constexpr int kMaxSplit = GG_F32W_MAX_SPLIT; /* CTAs per cluster (the portable limit) */
constexpr int kF32wThreads = 128 * kGroups;          /* thread 0 also issues the TMA boxes: a producer warp of its
                                                         own makes ptxas allocate registers for three warpgroups, and
                                                         then the accumulators do not fit (wgmma serialized, spills) */
constexpr int kWBoxCols = 32;                         /* a weight box: 32 fp32 columns = one 128-byte swizzle row */
constexpr int kWBoxBytes = kBK * kWBoxCols * 4;       /* 8 KiB */
constexpr int kWBytes = kCols / kWBoxCols * kWBoxBytes; /* a stage's weight: 32 KiB */
constexpr int kPitch = kCols + 4;                     /* staging row, floats */
/* A stage: the activations' kTokens rows (32 KiB), a wide tile's kExtraTokens more (8 KiB), then the weight; every
 * part 1024-byte aligned for the swizzle. Extra: 0 or kExtraTokens. */
template <int Extra> struct Stage {
    static constexpr int kTok = kTokens * kBK * 2, kExtraTok = Extra * kBK * 2, kBytes = kTok + kExtraTok + kWBytes;
    static constexpr size_t kRing = (size_t)kStages * kBytes, kSmem = kRing + 1024; /* + slack for the alignment */
    static_assert((size_t)(kTokens + Extra) * kPitch * sizeof(float) <= kRing, "staging fits the ring");
    static_assert(kSmem <= 227 * 1024, "one CTA's shared memory");
};
static_assert(kTokens <= 256 && kExtraTokens <= 256 && kBK * 2 == 128, "TMA boxes: at most 256 rows of 128 bytes");

/* The launch's scalars; A and B reach the kernel as its tensor maps (A's twice: its wide tile's extra rows). */
struct F32wArgs {
    void *c; /* [M, N], fp32 or fp16 */
    const float *addend; /* NULL, or [M, N] fp32 (16-byte aligned: N is a multiple of kCols), added before c is
                            written */
    int c_half;
    int64_t M, N;
    int split;      /* CTAs per cluster; rank r takes k-tiles [r k_tiles / split, (r + 1) k_tiles / split) */
    int k_tiles;    /* of the whole K */
    int tok_tiles;  /* of kTokens tokens, or kTokens + kExtraTokens for the wide kernel */
};

#ifdef GG_HAS_WGMMA
/* d += a (64 x 16, this thread's fragment in registers) @ b (16 x 256 tokens, K-major in shared memory). */
__device__ __forceinline__ void wgmma_tile(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                 "{%128, %129, %130, %131}, %132, p, 1, 1, 0;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                   "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
                   "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
                   "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
                   "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                   "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
                   "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
                   "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
                   "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),
                   "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
                   "+f"(d[126]), "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1)); /* scale-d = 1: accumulate */
}

/* d += a (64 x 16, the same fragment) @ b (16 x 64 tokens, K-major in shared memory): a wide tile's extra tokens. */
__device__ __forceinline__ void wgmma_tile_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

__device__ __forceinline__ float2 lds_float2(uint32_t addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
}
#endif

/* Extra: 0, or kExtraTokens for the wide tile (kTokens + kExtraTokens tokens; map_extra's boxes are its last
 * kExtraTokens rows, read only where some of them are below M). */
template <int Extra>
__global__ void __launch_bounds__(kF32wThreads, kPerSm)
    gemm_f32w_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_extra,
                     const __grid_constant__ CUtensorMap map_b, const F32wArgs p) {
#ifdef GG_HAS_WGMMA
    using St = Stage<Extra>;
    constexpr int kTile = kTokens + Extra; /* tokens per tile */
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem =
        reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~(uintptr_t)1023);
    __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
    const int rank = (int)(blockIdx.x % (unsigned)p.split), tile = (int)(blockIdx.x / (unsigned)p.split);
    const int64_t m0 = (int64_t)(tile % p.tok_tiles) * kTile, c0 = (int64_t)(tile / p.tok_tiles) * kCols;
    const bool extra_live = Extra > 0 && m0 + kTokens < p.M; /* some of the extra rows are tokens */
    const int kt_lo = (int)((int64_t)rank * p.k_tiles / p.split);
    const int k_tiles = (int)((int64_t)(rank + 1) * p.k_tiles / p.split) - kt_lo, k_first = kt_lo * kBK;
    const int t = threadIdx.x, warp = t >> 5, lane = t & 31, g = lane >> 2, q = lane & 3;
    const uint32_t ring = smem_addr(smem); /* stage s at s St::kBytes: activations (extra rows too), then the weight */
    const uint32_t full0 = smem_addr(&full[0]), empty0 = smem_addr(&empty[0]);
    if (t == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, kF32wThreads);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    /* Thread 0 issues k-tile kt's boxes into stage kt % kStages, once every thread has released that stage's
     * previous k-tile (its "empty" phase). The weight is read once (by the token tiles together): evict-first, see
     * tma.cuh (it pays where one tile reads each box; where four tiles share a box it is neutral). */
    const uint64_t read_once = l2_evict_first_policy();
    const unsigned stage_tx = (unsigned)(St::kBytes - (extra_live ? 0 : St::kExtraTok));
    auto issue = [&](int kt) {
        const int s = kt % kStages;
        if (kt >= kStages) mbar_wait(empty0 + 8 * s, ((kt / kStages) & 1) ^ 1);
        const uint32_t stage = ring + s * St::kBytes, bar = full0 + 8 * s;
        const int k = k_first + kt * kBK;
        mbar_expect_tx(bar, stage_tx);
        tma_load_2d(stage, &map_a, k, (int)m0, bar);
        if (extra_live) tma_load_2d(stage + St::kTok, &map_extra, k, (int)(m0 + kTokens), bar);
#pragma unroll
        for (int j = 0; j < kCols / kWBoxCols; ++j)
            tma_load_2d_hint(stage + St::kTok + St::kExtraTok + j * kWBoxBytes, &map_b, (int)c0 + j * kWBoxCols, k,
                             bar, read_once);
    };
    if (t == 0)
        for (int kt = 0; kt < kStages - 1 && kt < k_tiles; ++kt) issue(kt);

    float acc[kTokens / 2];
#pragma unroll
    for (int i = 0; i < kTokens / 2; ++i) acc[i] = 0.0f;
    float acc_extra[Extra > 0 ? 32 : 1]; /* the extra tokens' m64n64 accumulators */
#pragma unroll
    for (int i = 0; i < (Extra > 0 ? 32 : 1); ++i) acc_extra[i] = 0.0f;
    /* The weight fragment: per k16 step s, rows k = 16s + 2q (+1, +8, +9) of columns col, col + 1 (col = 16 warp +
     * 2g); fragment row g is column 2g and row g + 8 is column 2g + 1, so each read is one float2. In the swizzled
     * box of column col, row r's 16-byte chunk c sits at chunk c ^ (r % 8): rows 2q (+8) and 2q + 1 (+9) take two
     * chunk offsets, fixed per thread. */
    const int col = 16 * warp + 2 * g, x = col % kWBoxCols, c = x / 4;
    const uint32_t box = (uint32_t)(St::kTok + St::kExtraTok + col / kWBoxCols * kWBoxBytes + (x % 4) * 4);
    const uint32_t even = box + 2 * q * 128 + ((c ^ (2 * q)) << 4);
    const uint32_t odd = box + (2 * q + 1) * 128 + ((c ^ (2 * q + 1)) << 4);
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (t == 0 && kt + kStages - 1 < k_tiles) issue(kt + kStages - 1); /* into the stage k-tile kt - 1 used */
        const int s = kt % kStages;
        mbar_wait(full0 + 8 * s, (kt / kStages) & 1);
        const uint32_t stage = ring + s * St::kBytes;
        uint32_t frag[4][4];
#pragma unroll
        for (int k16 = 0; k16 < 4; ++k16) {
            const uint32_t rows = stage + k16 * 16 * 128;
            const float2 r0 = lds_float2(rows + even), r1 = lds_float2(rows + odd);
            const float2 r8 = lds_float2(rows + 8 * 128 + even), r9 = lds_float2(rows + 8 * 128 + odd);
            frag[k16][0] = pack_half2(r0.x, r1.x); /* column 2g: k, k+1 */
            frag[k16][1] = pack_half2(r0.y, r1.y); /* column 2g+1 (fragment row g+8) */
            frag[k16][2] = pack_half2(r8.x, r9.x); /* k+8, k+9 */
            frag[k16][3] = pack_half2(r8.y, r9.y);
        }
        const unsigned char *tokens = smem + s * St::kBytes;
        __syncwarp(); /* thread 0's issue diverged from its warp: wgmma's .aligned needs the warp converged */
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int k16 = 0; k16 < 4; ++k16) /* 16 k */
            wgmma_tile(acc, frag[k16], smem_desc(smem_addr(tokens + 32 * k16)));
        if constexpr (Extra > 0) { /* where !extra_live, on rows no box filled: tokens past M, never stored (a branch
                                      here makes ptxas fence the accumulators) */
#pragma unroll
            for (int k16 = 0; k16 < 4; ++k16)
                wgmma_tile_n64(acc_extra, frag[k16], smem_desc(smem_addr(tokens + St::kTok + 32 * k16)));
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        mbar_arrive(empty0 + 8 * s); /* this thread's reads of the stage are done */
    }
    __syncthreads(); /* every box landed and was read: the ring becomes the staging tile */

    /* Partial tile -> staging [token][column] (fp32, kPitch per row). Accumulator layout of m64nNk16: value 4j + v
     * at fragment row 16 warp + g + 8 (v / 2), token 8j + 2q + (v % 2); fragment row g is column 2g, g + 8 is
     * 2g + 1. The extra tokens follow the first kTokens. */
    float *staging = reinterpret_cast<float *>(smem);
#pragma unroll
    for (int j = 0; j < kTokens / 8; ++j) {
        const int n = 8 * j + 2 * q;
        *reinterpret_cast<float2 *>(staging + n * kPitch + col) = make_float2(acc[4 * j], acc[4 * j + 2]);
        *reinterpret_cast<float2 *>(staging + (n + 1) * kPitch + col) = make_float2(acc[4 * j + 1], acc[4 * j + 3]);
    }
#pragma unroll
    for (int j = 0; j < Extra / 8; ++j) { /* none in the kTokens kernel */
        const int n = kTokens + 8 * j + 2 * q;
        *reinterpret_cast<float2 *>(staging + n * kPitch + col) = make_float2(acc_extra[4 * j], acc_extra[4 * j + 2]);
        *reinterpret_cast<float2 *>(staging + (n + 1) * kPitch + col) =
            make_float2(acc_extra[4 * j + 1], acc_extra[4 * j + 3]);
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync(); /* every partial is staged (a cluster of one: the CTA's barrier) */
    /* This CTA's share of the tokens, 16 float4 per row, the split's partials added in rank order. */
    const int share = (kTile + p.split - 1) / p.split, n_lo = rank * share;
    const int n_hi = n_lo + share < kTile ? n_lo + share : kTile;
    for (int i = t; i < (n_hi - n_lo) * (kCols / 4); i += kF32wThreads) {
        const int n = n_lo + i / (kCols / 4), c4 = i % (kCols / 4);
        const int64_t token = m0 + n;
        if (token >= p.M) break; /* rows grow with i */
        float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int r = 0; r < p.split; ++r) {
            const float *part = cluster.map_shared_rank(staging, r);
            const float4 v = *reinterpret_cast<const float4 *>(part + n * kPitch + 4 * c4);
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        const int64_t at = token * p.N + c0 + 4 * c4;
        if (p.addend) {
            const float4 r = *reinterpret_cast<const float4 *>(p.addend + at);
            s.x += r.x, s.y += r.y, s.z += r.z, s.w += r.w;
        }
        if (p.c_half) reinterpret_cast<uint2 *>(static_cast<__half *>(p.c) + at)[0] = pack_half4(s);
        else *reinterpret_cast<float4 *>(static_cast<float *>(p.c) + at) = s;
    }
    cluster.sync(); /* no CTA leaves while the others read its shared memory */
#else
    __trap(); /* the host launches this kernel only on a 9.0 device of a build with sm_90a code (has_wgmma) */
#endif
}

} // namespace

/* The tokens of a launch's tiles: kTokens, or the wide tile where it makes fewer tiles (257-320 tokens one tile, not
 * two; 513-640 two, not three) that all run at once, one CTA per SM (capacity[1]): the weight is read once per token
 * tile, and fewer tiles leave room to split k; in two waves either way its larger tile costs more than the tile it
 * saves (068's G at 769-900 tokens: the block 3.1-4.4 % slower). */
static int64_t tile_tokens(int64_t M, int64_t N, const int *capacity) {
    const int64_t wide = kTokens + kExtraTokens, wide_tiles = (M + wide - 1) / wide;
    return wide_tiles < (M + kTokens - 1) / kTokens && wide_tiles * (N / kCols) <= capacity[1] ? wide : kTokens;
}

/* The tiles of a launch: token tiles times column tiles. */
static int64_t tiles_of(int64_t M, int64_t N, const int *capacity) {
    const int64_t tokens = tile_tokens(M, N, capacity);
    return (M + tokens - 1) / tokens * (N / kCols);
}

extern "C" int gg_k_gemm_f32w_supported(int64_t M, int64_t N, int64_t K) {
    return M > 0 && N > 0 && K > 0 && N % kCols == 0 && K % kBK == 0 && K <= INT32_MAX && N <= INT32_MAX &&
           M <= INT32_MAX && (M + kTokens - 1) / kTokens * (N / kCols) * kMaxSplit <= INT32_MAX && encode_fn();
}

/* The capacity of one kernel (its ring is over the 48 KiB default; the attribute is the current device's). */
template <int Extra> static cudaError_t capacity_of(int capacity[GG_F32W_MAX_SPLIT + 1]) {
    cudaError_t e = cudaFuncSetAttribute(gemm_f32w_kernel<Extra>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)Stage<Extra>::kSmem);
    capacity[0] = 0;
    for (int s = 1; s <= kMaxSplit && e == cudaSuccess; ++s) {
        LaunchAttrs attrs;
        const cudaLaunchConfig_t config =
            cluster_launch((unsigned)s, kF32wThreads, Stage<Extra>::kSmem, s, GG_PRIORITY_OF_STREAM, 0, &attrs);
        e = cudaOccupancyMaxActiveClusters(&capacity[s], gemm_f32w_kernel<Extra>, &config);
    }
    return e;
}

/* The clusters of each size that fit at once, for both tiles' kernels (one CTA per SM either way: the smaller). */
extern "C" cudaError_t gg_k_gemm_f32w_capacity(int capacity[GG_F32W_MAX_SPLIT + 1]) {
    int wide[GG_F32W_MAX_SPLIT + 1];
    cudaError_t e = capacity_of<0>(capacity);
    if (e == cudaSuccess) e = capacity_of<kExtraTokens>(wide);
    for (int s = 1; s <= kMaxSplit && e == cudaSuccess; ++s)
        if (wide[s] < capacity[s]) capacity[s] = wide[s];
    return e;
}

/* Of the splits whose clusters (one per tile) all fit on the GPU at once (capacity[s], from
 * gg_k_gemm_f32w_capacity: a cluster's CTAs must share a GPC, so fewer clusters of 8 fit than SMs / 8, 15 rather
 * than 16 on an H200), the one whose CTAs each take the fewest k-tiles; the smaller on a tie (less to add up). A
 * grid of two waves takes twice as long. */
extern "C" int gg_k_gemm_f32w_split(int64_t M, int64_t N, int64_t K, const int *capacity) {
    const int64_t tiles = tiles_of(M, N, capacity), k_tiles = K / kBK;
    int split = 1;
    for (int s = 2; s <= kMaxSplit && s <= k_tiles; ++s)
        if (tiles <= capacity[s] && (k_tiles + s - 1) / s < (k_tiles + split - 1) / split) split = s;
    return split;
}

extern "C" int64_t gg_k_gemm_f32w_ctas(int64_t M, int64_t N, int64_t K, const int *capacity) {
    return tiles_of(M, N, capacity) * gg_k_gemm_f32w_split(M, N, K, capacity);
}

extern "C" cudaError_t gg_k_gemm_f32w(const void *A, const float *B, void *C, gg_dtype c_type, const float *addend,
                                      int64_t M, int64_t N, int64_t K, const int *capacity, int priority,
                                      cudaStream_t stream) {
    if (!gg_k_gemm_f32w_supported(M, N, K) || (c_type != GG_DT_F32 && c_type != GG_DT_F16) || !capacity ||
        (addend && c_type != GG_DT_F32))
        return cudaErrorInvalidValue;
    F32wArgs a;
    a.c = C;
    a.addend = addend;
    a.c_half = c_type == GG_DT_F16;
    a.M = M;
    a.N = N;
    const int64_t tokens = tile_tokens(M, N, capacity);
    a.tok_tiles = (int)((M + tokens - 1) / tokens);
    a.k_tiles = (int)(K / kBK);
    a.split = gg_k_gemm_f32w_split(M, N, K, capacity);
    const bool wide = tokens > kTokens;

    /* kernel parameters: a captured launch keeps this call's pointers; map_extra, the wide tile's last rows, is
     * map_a for the other kernel, which never reads it */
    CUtensorMap map_a, map_extra, map_b;
    if (!encode_swizzled(&map_a, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, A, M, K, kBK, kTokens) ||
        !encode_swizzled(&map_extra, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, A, M, K, kBK,
                         wide ? kExtraTokens : kTokens) ||
        !encode_swizzled(&map_b, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, B, K, N, kWBoxCols, kBK))
        return cudaErrorInvalidValue;

    LaunchAttrs attrs;
    const cudaLaunchConfig_t config =
        cluster_launch((unsigned)(a.tok_tiles * (N / kCols) * a.split), kF32wThreads,
                       wide ? Stage<kExtraTokens>::kSmem : Stage<0>::kSmem, a.split, priority, stream, &attrs);
    if (wide) return cudaLaunchKernelEx(&config, gemm_f32w_kernel<kExtraTokens>, map_a, map_extra, map_b, a);
    return cudaLaunchKernelEx(&config, gemm_f32w_kernel<0>, map_a, map_extra, map_b, a);
}
