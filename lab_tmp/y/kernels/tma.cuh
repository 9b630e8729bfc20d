/* tma.cuh - Hopper's asynchronous copies (sm_90): mbarriers that count a stage's bytes in and its readers out, and
 * the TMA's 2-D box load that completes on one. Shared-memory operands are 32-bit shared addresses (smem_addr). */
#ifndef GG_TMA_CUH
#define GG_TMA_CUH

#include <cuda.h>
#include <stdint.h>

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
namespace gg {

__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
/* Arrives once and adds `bytes` to the transaction count the phase waits for. */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* Spins until the phase of the given parity has completed. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* The box at (c0 = inner coordinate, c1 = row) of a 2-D tensor map into shared memory, completing on bar. */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3}], [%4];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* An L2 policy that makes the lines a load brings in the first to be evicted: for data read once. After the timing
 * protocol's flush the L2 is full of dirty lines, and every line a load allocates at normal priority evicts one of
 * them, a write-back that shares the DRAM with the load; evict-first lines instead evict each other. Measured on an
 * H200 (scripts/lab/tma_probe.cu `l2`): 67 MB of weight streamed in 22.5 us instead of 25.9 after a memset flush
 * (20.3 after a flush that leaves clean lines); docs/perf-notes.md, "Session 23". */
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    return policy;
}
/* tma_load_2d with an L2 policy (l2_evict_first_policy) for the lines it brings in. */
__device__ __forceinline__ void tma_load_2d_hint(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar,
                                                 uint64_t policy) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "l"(policy)
                 : "memory");
}

} // namespace gg
#endif

#endif
