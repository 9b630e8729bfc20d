/* convert.cu - dtype conversions of operands (fp32 -> fp16 for the FP16 precision mode). */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

__global__ void __launch_bounds__(kThreads) f32_to_f16_kernel(const float4 *__restrict__ in, uint2 *__restrict__ out,
                                                              int64_t n4) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        out[i] = pack_half4(in[i]);
    }
}

} // namespace

extern "C" cudaError_t gg_k_f32_to_f16(const float *in, void *out, size_t n, int sm_count, cudaStream_t stream) {
    const int64_t n4 = (int64_t)(n / 4); /* n is a multiple of 8: every tensor's rows are */
    f32_to_f16_kernel<<<grid_for((size_t)n4, sm_count, 16), kThreads, 0, stream>>>(
        reinterpret_cast<const float4 *>(in), static_cast<uint2 *>(out), n4);
    return cudaGetLastError();
}
