/* chain_stream.cu - block 4's elementwise chain on the few SMs a GEMM leaves free, its inputs streamed into shared
 * memory by bulk asynchronous copies (sm_90's cp.async.bulk), so that far more bytes are in flight per SM than
 * registers hold.
 *
 * Why: beside dW the chain is bound by what each of its SMs has in flight. The register kernel
 * (activation_grad.cu's narrow launch) holds two vectors of each input per thread, 128 KiB per SM with the silu
 * gate, and under dW's traffic that came to ~65 GB/s per SM (074432 tokens: 1.1 GB in 420 us on 40 SMs). Here a
 * ring of kRingBytes of shared memory is in flight per SM, and the registers stay free for the math.
 *
 * One CTA per SM: a producer warp whose lane 0 issues, per stage, one bulk copy per input tensor (a chunk of
 * kChunkVecs vectors of eight bf16 each) completing on the stage's "full" mbarrier; kConsumerWarps warps that run
 * the chain from shared memory and store both outputs to global memory (16-byte stores), then release the stage
 * through its "empty" mbarrier. Chunk c goes to CTA c % gridDim.x, in order.
 * Requirements: 16-byte aligned tensors (the public API's), sm_90 or later. */
#include "gg_kernels.h"
#include "launch.cuh"
#include "mma.cuh"
#include "ssm_chain.cuh"
#include "tma.cuh"

using namespace gg;

namespace {

constexpr int kConsumerWarps = 8;
constexpr int kStreamThreads = 32 * (kConsumerWarps + 1);
constexpr int kChunkVecs = 512;                    /* vectors per tensor and stage: 8 KiB */
constexpr int kChunkBytes = kChunkVecs * 16;
constexpr int kRingBytes = 192 * 1024;             /* stages x tensors x chunks */
constexpr int kMaxStages = kRingBytes / (3 * kChunkBytes);
constexpr size_t kSmemBytes = kRingBytes + 2 * kMaxStages * sizeof(uint64_t);

struct StreamArgs {
    const bf16x8 *in[4]; /* g, gate_activated, ssm_output, gate (the last only with the silu gate) */
    bf16x8 *grad_ssm_output, *grad_gate;
    int64_t n_vec;
    int use_silu_gate;
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
/* `bytes` from global src into shared dst, completing on bar; the lines it brings into L2 are evicted first. */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, unsigned bytes, uint32_t bar,
                                          uint64_t policy) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
                 "[%3], %4;\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
}
#endif

__global__ void __launch_bounds__(kStreamThreads, 1) chain_stream_kernel(const StreamArgs a) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char smem[];
    const int n_in = a.use_silu_gate ? 4 : 3;
    const int stages = kRingBytes / (n_in * kChunkBytes);
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem + kRingBytes);
    const uint32_t ring = smem_addr(smem), full0 = smem_addr(bars), empty0 = smem_addr(bars + kMaxStages);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, kConsumerWarps);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int64_t chunks = (a.n_vec + kChunkVecs - 1) / kChunkVecs;
    if (warp == kConsumerWarps) { /* the producer */
        if (lane != 0) return;
        const uint64_t policy = l2_evict_first_policy();
        int i = 0;
        for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x, ++i) {
            const int s = i % stages;
            if (i >= stages) mbar_wait(empty0 + 8 * s, (unsigned)((i / stages - 1) & 1));
            const int64_t v0 = c * kChunkVecs;
            const unsigned bytes = (unsigned)(min((int64_t)kChunkVecs, a.n_vec - v0) * 16);
            mbar_expect_tx(full0 + 8 * s, bytes * (unsigned)n_in);
            for (int q = 0; q < n_in; ++q)
                bulk_load(ring + (uint32_t)((s * n_in + q) * kChunkBytes), a.in[q] + v0, bytes, full0 + 8 * s, policy);
        }
        return;
    }
    int i = 0;
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x, ++i) {
        const int s = i % stages;
        mbar_wait(full0 + 8 * s, (unsigned)((i / stages) & 1));
        const int64_t v0 = c * kChunkVecs;
        const int vecs = (int)min((int64_t)kChunkVecs, a.n_vec - v0);
        const bf16x8 *in = reinterpret_cast<const bf16x8 *>(smem + (size_t)s * n_in * kChunkBytes);
        for (int v = threadIdx.x; v < vecs; v += 32 * kConsumerWarps) {
            const bf16x8 g = in[v], ga = in[kChunkVecs + v], so = in[2 * kChunkVecs + v];
            bf16x8 gt, gs, gg;
            if (a.use_silu_gate) gt = in[3 * kChunkVecs + v];
            ssm_chain8(g, ga, so, gt, a.use_silu_gate != 0, gs, gg);
            a.grad_ssm_output[v0 + v] = gs;
            a.grad_gate[v0 + v] = gg;
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * s);
    }
#endif
}

} // namespace

extern "C" cudaError_t gg_k_ssm_gate_grad_stream(const uint16_t *g, const uint16_t *gate_activated,
                                                 const uint16_t *ssm_output, const uint16_t *gate,
                                                 uint16_t *grad_ssm_output, uint16_t *grad_gate, size_t n,
                                                 int use_silu_gate, int ctas, cudaStream_t stream) {
    StreamArgs a = {};
    a.in[0] = reinterpret_cast<const bf16x8 *>(g);
    a.in[1] = reinterpret_cast<const bf16x8 *>(gate_activated);
    a.in[2] = reinterpret_cast<const bf16x8 *>(ssm_output);
    a.in[3] = reinterpret_cast<const bf16x8 *>(gate);
    a.grad_ssm_output = reinterpret_cast<bf16x8 *>(grad_ssm_output);
    a.grad_gate = reinterpret_cast<bf16x8 *>(grad_gate);
    a.n_vec = (int64_t)(n / 8);
    a.use_silu_gate = use_silu_gate;
    cudaError_t e = cudaFuncSetAttribute(chain_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)kSmemBytes);
    if (e != cudaSuccess) return e;
    LaunchAttrs attrs;
    const cudaLaunchConfig_t config =
        plain_launch(dim3((unsigned)ctas), kStreamThreads, kSmemBytes, GG_PRIORITY_OF_STREAM, stream, &attrs);
    return cudaLaunchKernelEx(&config, chain_stream_kernel, a);
}
