/* wgmma.cuh - Hopper's warpgroup MMA (sm_90a) with operands in shared memory: the descriptors of 128-byte-swizzled
 * tiles as TMA boxes leave them (gemm_f32w.cu's activations, ssm_fused.cu's dY and W), and the bf16 m64n128k16 that
 * ssm_fused.cu runs on them (A K-major, B MN-major: a row-major weight [K, N] as it is). */
#ifndef GG_WGMMA_CUH
#define GG_WGMMA_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GG_HAS_WGMMA 1
#endif

#ifdef GG_HAS_WGMMA
namespace gg {

/* Shared-memory matrix descriptor of a K-major tile with 128-byte rows and the 128-byte swizzle: start address,
 * leading offset 16 B (unused with this swizzle), 1024 B between groups of 8 rows, swizzle mode 1. */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
    return ((uint64_t)(addr & 0x3FFFF) >> 4) | ((uint64_t)(16 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}

/* The same for an MN-major B tile (k rows of 128 bytes = 64 n), 128-byte swizzle, as TMA boxes of 64 k rows x 64 n
 * leave it: box_bytes between the two 64-wide halves of n (leading offset), 1024 B between groups of 8 k rows
 * (stride offset). With the two offsets the other way round the tests fail. */
__device__ __forceinline__ uint64_t smem_desc_mn(uint32_t addr, uint32_t box_bytes) {
    return ((uint64_t)(addr & 0x3FFFF) >> 4) | ((uint64_t)(box_bytes >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}

/* d += A[64 x 16] * B[16 x 128], bf16 (A K-major, B MN-major, both in shared memory). d: this thread's 64 fp32
 * accumulators. */
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t da, uint64_t db) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1, 0, 1;\n" /* scale-a, scale-b 1; A K-major, B transposed */
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                   "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                   "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                   "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
                   "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(1)); /* scale-d = 1: accumulate */
}

} // namespace gg
#endif

#endif
