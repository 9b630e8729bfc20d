/* ssm_fused.cu - block 4's g = bf16(dY @ W) with the bf16 elementwise chain in the epilogue: g never goes to memory.
 *
 * STATUS: work in progress (branch wip/ssm-fused-gemm), written without a GPU; not yet run. The library uses it only
 * with GG_LAB_SSM_FUSED=1 until a GPU run has checked and timed it.
 *
 * A plain multistage tensor-core GEMM for sm_80+ (mma.sync m16n8k16 bf16 -> fp32, ldmatrix, cp.async):
 *   CTA tile 128 x 128 (tokens x E), k-tile 32, 3 stages, 8 warps as 2 x 4, each warp 64 x 32.
 *   Shared memory: A stage [128][32] and B stage [32][128] bf16, both XOR-swizzled by 16-byte chunk so ldmatrix
 *   reads are conflict-free; the epilogue reuses it as a [128][136] bf16 staging tile of g.
 *   Epilogue: accumulators rounded to bf16 (what cuBLAS's bf16 output does) into the staging tile; then every thread
 *   takes 16-byte vectors of a row, reads gate_activated / ssm_output / gate there, runs ssm_chain8, and writes
 *   grad_ssm_output and grad_gate, coalesced.
 * Requirements (checked by the caller): H % 32 == 0, E % 128 == 0, 16-byte aligned rows; M is arbitrary (rows past M
 * are zero-filled on load and skipped on store).
 */
#include "gg_kernels.h"
#include "ssm_chain.cuh"

using namespace gg;

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 3;
constexpr int kWarpsM = 2, kWarpsN = 4;               /* 8 warps */
constexpr int kFusedThreads = 32 * kWarpsM * kWarpsN; /* 256 */
constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN; /* 64 x 32 per warp */
constexpr int kMT = kWM / 16, kNT = kWN / 8;            /* 4 x 4 mma tiles per warp */
constexpr int kAStage = kBM * kBK, kBStage = kBK * kBN;   /* bf16 elements */
constexpr int kStageElems = kAStage + kBStage;
constexpr int kStagePitch = kBN + 8;                     /* staging row: 136 bf16 = 272 bytes (16-byte multiple) */
constexpr size_t kSmemBytes = (size_t)kStages * kStageElems * 2; /* 48 KiB */
static_assert((size_t)kBM * kStagePitch * 2 <= kSmemBytes, "the staging tile fits in the pipeline's memory");

/* Swizzled element offsets. A: row r (0..127), 16-byte chunk c (0..3) of a 64-byte row. B: row k (0..31), chunk c
 * (0..15) of a 256-byte row. */
__device__ __forceinline__ int a_offset(int r, int c) { return r * kBK + ((c ^ ((r >> 1) & 3)) << 3); }
__device__ __forceinline__ int b_offset(int k, int c) { return k * kBN + ((c ^ (k & 7)) << 3); }

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    const int src_bytes = valid ? 16 : 0; /* 0: zero-fill, nothing read */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Loads k-tile kt of A (dY rows m0.., columns kt*32..) and B (W rows kt*32.., columns n0..) into a stage: 512
 * 16-byte chunks each, two per thread. */
__device__ __forceinline__ void load_stage(__nv_bfloat16 *stage, const __nv_bfloat16 *__restrict__ dy,
                                           const __nv_bfloat16 *__restrict__ w, int64_t M, int64_t H, int64_t E,
                                           int64_t m0, int64_t n0, int kt) {
    __nv_bfloat16 *sa = stage, *sb = stage + kAStage;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int chunk = threadIdx.x + i * kFusedThreads; /* 0..511 */
        const int r = chunk >> 2, c = chunk & 3;
        const int64_t row = m0 + r;
        const bool valid = row < M;
        cp_async16(sa + a_offset(r, c), dy + (valid ? row : 0) * H + (int64_t)kt * kBK + c * 8, valid);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int chunk = threadIdx.x + i * kFusedThreads;
        const int k = chunk >> 4, c = chunk & 15;
        cp_async16(sb + b_offset(k, c), w + ((int64_t)kt * kBK + k) * E + n0 + c * 8, true);
    }
}

__global__ void __launch_bounds__(kFusedThreads) ssm_fused_kernel(
    const __nv_bfloat16 *__restrict__ dy, const __nv_bfloat16 *__restrict__ w, const bf16x8 *__restrict__ gate_activated,
    const bf16x8 *__restrict__ ssm_output, const bf16x8 *__restrict__ gate, bf16x8 *__restrict__ grad_ssm_output,
    bf16x8 *__restrict__ grad_gate, int64_t M, int64_t H, int64_t E, int use_silu_gate) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __nv_bfloat16 *smem = reinterpret_cast<__nv_bfloat16 *>(smem_raw);
    const int64_t n0 = (int64_t)blockIdx.x * kBN, m0 = (int64_t)blockIdx.y * kBM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN; /* warp's 64 x 32 sub-tile */
    const int k_tiles = (int)(H / kBK);

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(smem + s * kStageElems, dy, w, M, H, E, m0, n0, s);
        cp_async_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<kStages - 2>(); /* k-tile kt has landed (this thread's part) */
        __syncthreads();              /* ... everyone's; and stage (kt - 1) % kStages is free to refill */
        const int next = kt + kStages - 1;
        if (next < k_tiles) load_stage(smem + (next % kStages) * kStageElems, dy, w, M, H, E, m0, n0, next);
        cp_async_commit();

        const __nv_bfloat16 *sa = smem + (kt % kStages) * kStageElems, *sb = sa + kAStage;
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) {
            uint32_t a[kMT][4], b[kNT][2];
#pragma unroll
            for (int i = 0; i < kMT; ++i) { /* rows lane % 16, k chunk 2*ks + lane / 16 */
                const int r = wm * kWM + i * 16 + (lane & 15);
                ldmatrix_x4(a[i], sa + a_offset(r, ks * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int j = 0; j < kNT; j += 2) { /* k rows lane % 16, n chunk of n-tiles j, j+1 */
                const int k = ks * 16 + (lane & 15);
                const int c = (wn * kWN + j * 8) / 8 + (lane >> 4);
                uint32_t r[4];
                ldmatrix_x4_trans(r, sb + b_offset(k, c));
                b[j][0] = r[0];
                b[j][1] = r[1];
                b[j + 1][0] = r[2];
                b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < kMT; ++i)
#pragma unroll
                for (int j = 0; j < kNT; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the pipeline's memory becomes the staging tile */

    /* g = bf16(acc) into the staging tile. Fragment: c0, c1 at (row lane/4, cols 2*(lane%4) + {0,1}), c2, c3 at
     * row + 8. */
    __nv_bfloat16 *tile = smem;
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
            const int r = wm * kWM + i * 16 + (lane >> 2), c = wn * kWN + j * 8 + 2 * (lane & 3);
            *reinterpret_cast<__nv_bfloat162 *>(tile + r * kStagePitch + c) =
                __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<__nv_bfloat162 *>(tile + (r + 8) * kStagePitch + c) =
                __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
        }
    __syncthreads();

    /* The chain: 128 rows x 16 vectors; 16 consecutive threads cover a row (256 contiguous bytes). */
    const int64_t e_vec = E / 8;
#pragma unroll 2
    for (int v = threadIdx.x; v < kBM * (kBN / 8); v += kFusedThreads) {
        const int r = v >> 4, cv = v & 15;
        const int64_t row = m0 + r;
        if (row >= M) continue;
        const int64_t gi = row * e_vec + n0 / 8 + cv;
        const bf16x8 g = *reinterpret_cast<const bf16x8 *>(tile + r * kStagePitch + cv * 8);
        const bf16x8 ga = gate_activated[gi], so = ssm_output[gi];
        bf16x8 gt, gs, gg;
        if (use_silu_gate) gt = gate[gi];
        ssm_chain8(g, ga, so, gt, use_silu_gate != 0, gs, gg);
        grad_ssm_output[gi] = gs;
        grad_gate[gi] = gg;
    }
}

} // namespace

extern "C" int gg_k_ssm_fused_supported(int64_t M, int64_t H, int64_t E) {
    return H > 0 && H % kBK == 0 && E % kBN == 0 && E / kBN <= 65535 && (M + kBM - 1) / kBM <= 65535;
}

extern "C" cudaError_t gg_k_ssm_fused(const uint16_t *grad_output, const uint16_t *weight, const uint16_t *gate_activated,
                                      const uint16_t *ssm_output, const uint16_t *gate, uint16_t *grad_ssm_output,
                                      uint16_t *grad_gate, int64_t M, int64_t H, int64_t E, int use_silu_gate,
                                      cudaStream_t stream) {
    /* x: the column tiles, so the CTAs that share a block of dY rows run together and read it from L2 */
    const dim3 grid((unsigned)(E / kBN), (unsigned)((M + kBM - 1) / kBM));
    ssm_fused_kernel<<<grid, kFusedThreads, kSmemBytes, stream>>>(
        reinterpret_cast<const __nv_bfloat16 *>(grad_output), reinterpret_cast<const __nv_bfloat16 *>(weight),
        reinterpret_cast<const bf16x8 *>(gate_activated), reinterpret_cast<const bf16x8 *>(ssm_output),
        reinterpret_cast<const bf16x8 *>(gate), reinterpret_cast<bf16x8 *>(grad_ssm_output),
        reinterpret_cast<bf16x8 *>(grad_gate), M, H, E, use_silu_gate);
    return cudaGetLastError();
}
