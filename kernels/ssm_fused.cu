/* ssm_fused.cu - block 4's g = bf16(dY @ W) with the bf16 elementwise chain in the GEMM's epilogue, so that g is
 * never written or read, and dY's row sums per 128-row tile for the bias gradient on the way (the host routes
 * block 4 here from GG_SSM_FUSED_MIN_TOKENS tokens, where it wins: src/blocks/ssm_gate.c).
 *
 * Persistent, one CTA per SM, 384 threads:
 * - warpgroup 2 produces. Its warp 0 (one thread) feeds a ring of 4 k-tile stages by TMA: per k-tile a box of dY
 *   [128 rows x 64 k] (K-major) and W's [64 k x 128 n] as two boxes of 64 n (W as it is: wgmma's MN-major B),
 *   128-byte swizzle. Its warp 1 (one thread) loads each tile's epilogue operands (gate_activated, ssm_output and,
 *   with the silu gate, gate: 128 x 128 each) into a buffer of two halves of 64 rows (boxes of 64 columns), each half
 *   once the previous tile has released that half: the next tile's first half loads while this tile's second half
 *   is in the chain. Its warps 2-3 sum, for tile (m, n), dY's k-tiles kt with kt % n_tiles == n over the tile's 128
 *   rows (bias_rows), releasing every stage too.
 * - warpgroups 0 and 1 consume the CTA's tiles in turn (local tile j goes to warpgroup j % 2), kept in the ring's
 *   order by the mainloop_done and epi_empty barriers, so one's main loop overlaps the other's epilogue. Per k-tile
 *   2 x 4 wgmma.m64n128k16 (bf16 -> fp32) from shared memory, one group in flight. The epilogue rounds the
 *   accumulators to bf16 pairs, then per half reads the operands by ldmatrix (the accumulators' layout), runs
 *   ssm_chain2, writes both outputs over the half's first two operands by stmatrix and stores them by TMA.
 * Shared memory: the ring 4 x 32 KiB + the buffer 2 x 48 KiB + alignment = 225 KiB.
 * Its barrier protocol is model-checked on the CPU by tests/model/fused_protocol_sim.py (a ctest).
 * Requirements (gg_k_ssm_fused_supported): H % 64 == 0, E % 128 == 0, a 9.0 device running sm_90a code. */
#include <cuda_bf16.h>

#include "gg_kernels.h"
#include "mma.cuh"
#include "ssm_chain.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

using namespace gg;

namespace {

constexpr int kBM = GG_SSM_FUSED_ROWS, kBN = 128, kBK = 64, kStages = 4;
constexpr int kFusedThreads = 384;           /* consumers: warpgroups 0, 1; producers: warpgroup 2 */
constexpr int kABytes = kBM * kBK * 2;       /* a dY box: 16 KiB */
constexpr int kBBytes = kBN * kBK * 2;       /* W's two boxes: 16 KiB */
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kHalfRows = kBM / 2;                /* the epilogue buffer's halves */
constexpr int kBoxBytes = kHalfRows * 64 * 2;     /* an operand box, 64 columns x 64 rows: 8 KiB */
constexpr int kOperandBytes = 2 * kBoxBytes;      /* one operand's half tile, 64 x 128 */
constexpr int kHalfBytes = 3 * kOperandBytes;     /* a half of the buffer: (at most) 3 operands */
/* The ring of stages, the buffer's two halves, alignment slack for the swizzle. */
constexpr size_t kSmemBytes = (size_t)kStages * kStageBytes + 2 * (size_t)kHalfBytes + 1024;
static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM");

/* Tensor maps (param space: TMA reads them there). */
struct FusedMaps {
    CUtensorMap dy, w, op[3], out[2]; /* w: W [H, E] (MN-major B); op: gate_activated, ssm_output, gate;
                                       * out: grad_ssm_output, grad_gate */
};

struct FusedArgs {
    float *bias_rows; /* [m-tiles, H]: row r = Σ of dY's rows 128 r .. 128 r + 127 */
    int64_t H;
    int k_tiles, n_tiles, tiles, use_silu_gate;
};

#ifdef GG_HAS_WGMMA
__device__ __forceinline__ uint32_t bf162_bits(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t *>(&v); }
__device__ __forceinline__ __nv_bfloat162 as_bf162(uint32_t v) { return *reinterpret_cast<__nv_bfloat162 *>(&v); }

/* Byte offset of element (r, c) of an operand's half tile (64 x 128) stored as two boxes of 64 columns, 128-byte rows
 * with the 128-byte swizzle (16-byte chunk k of row r at chunk k ^ (r % 8)). */
__device__ __forceinline__ uint32_t operand_offset(int r, int c) {
    const int box = c >> 6, cc = c & 63;
    return (uint32_t)(box * kBoxBytes + r * 128 + ((((cc >> 3) ^ (r & 7))) << 4) + (cc & 7) * 2);
}

/* Four 8 x 8 bf16 matrices from shared memory, and back: lane l gives the address of row l % 8 of matrix l / 8, and
 * thread t holds (row t / 4, columns 2 (t % 4) + {0, 1}) of matrix i in v[i], the accumulators' layout. */
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t *v) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(addr));
}
__device__ __forceinline__ void stsm_x4(uint32_t addr, const uint32_t *v) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v[0]),
                 "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
}
#endif

/* The chain on one half of a tile (m-half m of the accumulators: 64 rows): for each of this thread's bf16 pairs of g
 * there (gp = the accumulators' pairs of that half: pair 2g + h at row 16 warp + lane / 4 + 8 h of the half, columns
 * 8 g + 2 (lane % 4) + {0, 1}), its operands from the half buffer at `half`, and grad_ssm_output and grad_gate
 * written over gate_activated and ssm_output there. Per group of 8 rows, ldmatrix.x4 reads four column groups of an
 * operand, and stmatrix.x4 writes four of a result: a quarter of the shared-memory instructions of 4-byte
 * accesses. */
template <bool kSilu>
__device__ __forceinline__ void chain_half(const uint32_t (&gp)[32], uint32_t half, int warp, int lane) {
#ifdef GG_HAS_WGMMA
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        /* all of a row group's operands first, then the chain and the stores: 16 pairs in flight at once */
        const int r = warp * 16 + 8 * h + (lane & 7); /* the row this lane addresses */
        uint32_t ga[kBN / 8], so[kBN / 8], gt[kBN / 8], gs[kBN / 8], gg[kBN / 8];
#pragma unroll
        for (int g4 = 0; g4 < kBN / 8; g4 += 4) { /* column groups g4 .. g4 + 3 */
            const uint32_t off = half + operand_offset(r, 8 * (g4 + (lane >> 3)));
            ldsm_x4(off, &ga[g4]);
            ldsm_x4(off + kOperandBytes, &so[g4]);
            if (kSilu) ldsm_x4(off + 2 * kOperandBytes, &gt[g4]);
        }
#pragma unroll
        for (int g = 0; g < kBN / 8; ++g) {
            __nv_bfloat162 s2, g2;
            ssm_chain2(as_bf162(gp[2 * g + h]), as_bf162(ga[g]), as_bf162(so[g]),
                       as_bf162(kSilu ? gt[g] : gp[2 * g + h]), kSilu, s2, g2);
            gs[g] = bf162_bits(s2);
            gg[g] = bf162_bits(g2);
        }
#pragma unroll
        for (int g4 = 0; g4 < kBN / 8; g4 += 4) {
            const uint32_t off = half + operand_offset(r, 8 * (g4 + (lane >> 3)));
            stsm_x4(off, &gs[g4]);
            stsm_x4(off + kOperandBytes, &gg[g4]);
        }
    }
#endif
}

/* bias_rows[m_tile, 64 kt .. 64 kt + 63] = Σ over the stage's 128 dY rows (its A box: 128 rows x 64 k, 128-byte
 * rows with the 128-byte swizzle), by kThreads threads (t: 0 .. kThreads - 1; named barrier kBar), in a fixed
 * order: per thread 1024 / kThreads rows of one 16-byte chunk, then the warp's lanes of that chunk (xor 8, 16), then
 * the warps in order. Tile (m, n) sums the k-tiles kt with kt % n_tiles == n, so each (m-tile, k-tile) is summed
 * once and every tile does little. */
template <int kThreads, int kBar>
__device__ __forceinline__ void bias_rows_of_k_tile(const FusedArgs &a, uint32_t sa, int m_tile, int kt, int t,
                                                    float (&red)[4][kBK]) {
#ifdef GG_HAS_WGMMA
    constexpr int kWarps = kThreads / 32, kRowsPerThread = kBM * 8 / kThreads;
    const int chunk = t & 7, warp = t >> 5, lane = t & 31;
    float sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sum[e] = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = (t >> 3) + (kThreads / 8) * i;
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(sa + (uint32_t)(r * 128 + ((chunk ^ (r & 7)) << 4))));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            sum[2 * e] += __uint_as_float(w[e] << 16);
            sum[2 * e + 1] += __uint_as_float(w[e] & 0xFFFF0000u);
        }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        sum[e] += __shfl_xor_sync(0xFFFFFFFFu, sum[e], 8);
        sum[e] += __shfl_xor_sync(0xFFFFFFFFu, sum[e], 16);
    }
    if (lane < 8)
#pragma unroll
        for (int e = 0; e < 8; ++e) red[warp][8 * lane + e] = sum[e];
    asm volatile("bar.sync %0, %1;\n" ::"n"(kBar), "n"(kThreads) : "memory");
    if (t < kBK) {
        float total = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) total += red[w][t];
        a.bias_rows[(int64_t)m_tile * a.H + (int64_t)kt * kBK + t] = total;
    }
    asm volatile("bar.sync %0, %1;\n" ::"n"(kBar), "n"(kThreads) : "memory"); /* red is free again */
#endif
}

#ifdef GG_HAS_WGMMA
/* Local tile j of this CTA: its global index (m-tile x n_tiles + n-tile), or -1 past the end. */
__device__ __forceinline__ int tile_of(const FusedArgs &a, int j) {
    const int t = (int)blockIdx.x + j * (int)gridDim.x;
    return t < a.tiles ? t : -1;
}
#endif

__global__ void __launch_bounds__(kFusedThreads, 1)
    ssm_fused_kernel(const __grid_constant__ FusedMaps maps, const FusedArgs a) {
#ifdef GG_HAS_WGMMA
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem =
        reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~(uintptr_t)1023);
    __shared__ __align__(8) uint64_t full[kStages], empty[kStages], epi_full[2], epi_empty[2], mainloop_done;
    __shared__ float bias_red[4][kBK]; /* the bias warps' partial sums */
    const uint32_t ring = smem_addr(smem), epi = ring + (uint32_t)(kStages * kStageBytes);
    const uint32_t full0 = smem_addr(&full[0]), empty0 = smem_addr(&empty[0]);
    const uint32_t epi_full0 = smem_addr(&epi_full[0]), epi_empty0 = smem_addr(&epi_empty[0]); /* per half, 8 B */
    const uint32_t mainloop_bar = smem_addr(&mainloop_done);
    const int wg = (int)threadIdx.x >> 7, warp = ((int)threadIdx.x >> 5) & 3, lane = (int)threadIdx.x & 31;
    const int n_in = a.use_silu_gate ? 3 : 2;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full0 + 8 * s, 1);
            /* a stage is free once every thread of the consuming warpgroup and of the two bias warps released it */
            mbar_init(empty0 + 8 * s, 128 + 64);
        }
        for (int h = 0; h < 2; ++h) {
            mbar_init(epi_full0 + 8 * h, 1);
            mbar_init(epi_empty0 + 8 * h, 1); /* the consumer thread that stores the half */
        }
        mbar_init(mainloop_bar, 128);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 2) { /* producers */
        if (warp >= 2) { /* the bias rows, from every stage's dY box (each stage released by these 64 threads too) */
            int q = 0;
            for (int j = 0, t; (t = tile_of(a, j)) >= 0; ++j)
                for (int kt = 0; kt < a.k_tiles; ++kt, ++q) {
                    const int s = q % kStages;
                    mbar_wait(full0 + 8 * s, (unsigned)((q / kStages) & 1));
                    if (kt % a.n_tiles == t % a.n_tiles)
                        bias_rows_of_k_tile<64, 3>(a, ring + (uint32_t)(s * kStageBytes), t / a.n_tiles, kt,
                                                   (int)threadIdx.x - 320, bias_red);
                    mbar_arrive(empty0 + 8 * s);
                }
            return;
        }
        if (lane == 0) { /* one thread per producer warp; the warp waits for it */
            if (warp == 0) { /* the ring: every k-tile of the CTA's tiles, in order */
                int q = 0;
                for (int j = 0, t; (t = tile_of(a, j)) >= 0; ++j) {
                    const int m0 = (t / a.n_tiles) * kBM, n0 = (t % a.n_tiles) * kBN;
                    for (int kt = 0; kt < a.k_tiles; ++kt, ++q) {
                        const int s = q % kStages;
                        if (q >= kStages) mbar_wait(empty0 + 8 * s, (unsigned)((q / kStages - 1) & 1));
                        const uint32_t stage = ring + (uint32_t)(s * kStageBytes);
                        mbar_expect_tx(full0 + 8 * s, kStageBytes);
                        tma_load_2d(stage, &maps.dy, kt * kBK, m0, full0 + 8 * s);
                        for (int b = 0; b < 2; ++b) /* W's two boxes: 64 k rows x 64 n */
                            tma_load_2d(stage + kABytes + (uint32_t)(b * kBBytes / 2), &maps.w, n0 + 64 * b,
                                        kt * kBK, full0 + 8 * s);
                    }
                }
            } else if (warp == 1) { /* the epilogue buffer: each tile's operands once the previous tile released it */
                const uint64_t policy = l2_evict_first_policy(); /* read once */
                for (int j = 0, t; (t = tile_of(a, j)) >= 0; ++j) {
                    const int m0 = (t / a.n_tiles) * kBM, n0 = (t % a.n_tiles) * kBN;
                    for (int h = 0; h < 2; ++h) { /* rows m0 + 64 h .. m0 + 64 h + 63 */
                        const uint32_t half = epi + (uint32_t)(h * kHalfBytes), full_bar = epi_full0 + 8 * h;
                        if (j >= 1) mbar_wait(epi_empty0 + 8 * h, (unsigned)((j - 1) & 1));
                        mbar_expect_tx(full_bar, (unsigned)(n_in * kOperandBytes));
                        for (int o = 0; o < n_in; ++o)
                            for (int b = 0; b < 2; ++b)
                                tma_load_2d_hint(half + (uint32_t)(o * kOperandBytes + b * kBoxBytes), &maps.op[o],
                                                 n0 + 64 * b, m0 + kHalfRows * h, full_bar, policy);
                    }
                }
            }
        }
        __syncwarp();
        return;
    }

    /* Consumers: warpgroup wg takes local tiles wg, wg + 2, ... Tile j's main loop starts once tile j - 1's has
     * ended (mainloop_done, one phase per tile), and each half of its epilogue once tile j - 1's has released that
     * half of the buffer (epi_empty, per half). Both keep the two warpgroups in the ring's order, which the parity
     * waits need: without the first, a warpgroup could wait on a stage whose previous use (the other warpgroup's)
     * has not landed yet, see that earlier phase's parity as done and read stale data; without the second, the same
     * on a half's epi_full. A waiter's own previous tile completed the phase before the one it waits for, so no wait
     * is two phases behind. */
    float acc[2][64];
    for (int j = wg, t; (t = tile_of(a, j)) >= 0; j += 2) {
        const int m0 = (t / a.n_tiles) * kBM, n0 = (t % a.n_tiles) * kBN;
        if (j >= 1) mbar_wait(mainloop_bar, (unsigned)((j - 1) & 1));
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[m][i] = 0.0f;
        /* One k-tile's wgmma group stays in flight while the next is issued; a stage is released once the group that
         * read it has completed (wait_group 1 after the next commit). */
        int prev = -1;
        for (int kt = 0; kt < a.k_tiles; ++kt) {
            const int q = j * a.k_tiles + kt, s = q % kStages;
            mbar_wait(full0 + 8 * s, (unsigned)((q / kStages) & 1));
            const uint32_t sa = ring + (uint32_t)(s * kStageBytes), sb = sa + kABytes;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int k = 0; k < kBK / 16; ++k) /* 16 k = 32 bytes further along A's swizzled rows, 16 of B's */
                    wgmma_m64n128k16_bf16(acc[m], smem_desc(sa + m * 64 * 128 + k * 32),
                                          smem_desc_mn(sb + k * 16 * 128, kBBytes / 2));
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            if (prev >= 0) {
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                mbar_arrive(empty0 + 8 * prev);
            }
            prev = s;
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (prev >= 0) mbar_arrive(empty0 + 8 * prev);
        mbar_arrive(mainloop_bar);
        /* The epilogue. Accumulator layout of m64nNk16: pair 4g + 2h + {0, 1} of a warp's 16 rows is at (row
         * 16 warp + lane / 4 + 8 h, columns 8 g + 2 (lane % 4) + {0, 1}). */
        /* The accumulators rounded to bf16 pairs first (what a bf16 GEMM output is): that frees half of their
         * registers for the chain's loads and arithmetic in flight. */
        uint32_t gp[2][32];
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int i = 0; i < 32; ++i)
                gp[m][i] = bf162_bits(__floats2bfloat162_rn(acc[m][2 * i], acc[m][2 * i + 1]));
        /* Per half (m-half m of the accumulators): its operands, the chain, then one thread stores the half's four
         * output boxes (rows past M are not written) and releases the half once the TMA has read it, so that the
         * next tile's first half loads while this tile's second is in the chain (without the halves the next tile's
         * operands would wait for the whole epilogue). */
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            const uint32_t half = epi + (uint32_t)(m * kHalfBytes);
            if (j >= 1) mbar_wait(epi_empty0 + 8 * m, (unsigned)((j - 1) & 1));
            mbar_wait(epi_full0 + 8 * m, (unsigned)(j & 1));
            if (a.use_silu_gate)
                chain_half<true>(gp[m], half, warp, lane);
            else
                chain_half<false>(gp[m], half, warp, lane);
            fence_proxy_async(); /* the warpgroup's shared writes, before the TMA reads them */
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
            if ((threadIdx.x & 127) == 0) {
                for (int o = 0; o < 2; ++o)
                    for (int b = 0; b < 2; ++b)
                        tma_store_2d(&maps.out[o], n0 + 64 * b, m0 + kHalfRows * m,
                                     half + (uint32_t)(o * kOperandBytes + b * kBoxBytes));
                bulk_commit();
                bulk_wait_read_all();
                mbar_arrive(epi_empty0 + 8 * m);
            }
        }
    }
    if ((threadIdx.x & 127) == 0) bulk_wait_all(); /* the last stores' global writes */
#else
    __trap(); /* the host launches this kernel only on a 9.0 device of a build with sm_90a code */
#endif
}

} // namespace

extern "C" int gg_k_ssm_fused_supported(int64_t M, int64_t H, int64_t E) {
    return M > 0 && H > 0 && E > 0 && H % kBK == 0 && E % kBN == 0 && H <= INT32_MAX && E <= INT32_MAX &&
           (M + kBM - 1) / kBM * (E / kBN) <= INT32_MAX && encode_fn() != nullptr;
}

extern "C" cudaError_t gg_k_ssm_fused(const uint16_t *grad_output, const uint16_t *weight,
                                      const uint16_t *gate_activated, const uint16_t *ssm_output, const uint16_t *gate,
                                      uint16_t *grad_ssm_output, uint16_t *grad_gate, float *bias_rows, int64_t M,
                                      int64_t H, int64_t E, int use_silu_gate, int sm_count, cudaStream_t stream) {
    cudaError_t e =
        cudaFuncSetAttribute(ssm_fused_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes);
    if (e != cudaSuccess) return e;
    FusedMaps maps;
    const CUtensorMapDataType bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const void *ops[3] = {gate_activated, ssm_output, gate};
    bool ok = encode_swizzled(&maps.dy, bf16, 2, grad_output, M, H, kBK, kBM) &&
              encode_swizzled(&maps.w, bf16, 2, weight, H, E, 64, kBK);
    for (int o = 0; o < (use_silu_gate ? 3 : 2) && ok; ++o)
        ok = encode_swizzled(&maps.op[o], bf16, 2, ops[o], M, E, 64, kHalfRows);
    ok = ok && encode_swizzled(&maps.out[0], bf16, 2, grad_ssm_output, M, E, 64, kHalfRows) &&
         encode_swizzled(&maps.out[1], bf16, 2, grad_gate, M, E, 64, kHalfRows);
    if (!ok) return cudaErrorInvalidValue;
    FusedArgs a;
    a.bias_rows = bias_rows;
    a.H = H;
    a.k_tiles = (int)(H / kBK);
    a.n_tiles = (int)(E / kBN);
    a.tiles = (int)((M + kBM - 1) / kBM) * a.n_tiles;
    a.use_silu_gate = use_silu_gate;
    const int grid = a.tiles < sm_count ? a.tiles : (sm_count > 0 ? sm_count : 1);
    ssm_fused_kernel<<<grid, kFusedThreads, kSmemBytes, stream>>>(maps, a);
    return cudaGetLastError();
}
