/* stage.cu - graph padding and bucket selection: copy the first M rows of a tensor into (or out of) a bucket-sized
 * buffer and zero the padding rows; pick a bucket on the GPU from a token count in device memory. */
#include "gg_kernels.h"
#include "vec.cuh"

using namespace gg;

namespace {

/* The row count: from device memory when given (read when the graph runs), else the host value. */
__device__ __forceinline__ int64_t rows_of(const int64_t *device_rows, int64_t rows) {
    return device_rows ? *device_rows : rows;
}

/* dst[0, rows*rb) = src[0, rows*rb); dst[rows*rb, zero_rows*rb) = 0. Byte counts are even; both pointers 16-byte
 * aligned, so whole 16-byte vectors move in the bulk and 2-byte elements at the tail. */
__global__ void __launch_bounds__(kThreads) stage_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src,
                                                         int64_t row_bytes, const int64_t *device_rows, int64_t rows,
                                                         int64_t zero_rows) {
    const int64_t m = rows_of(device_rows, rows);
    const int64_t copy = m * row_bytes, end = (zero_rows > m ? zero_rows : m) * row_bytes;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t v = tid; v * 16 + 16 <= end; v += stride) {
        const int64_t b = v * 16;
        uint4 out = make_uint4(0, 0, 0, 0);
        if (b + 16 <= copy) {
            out = reinterpret_cast<const uint4 *>(src)[v];
        } else if (b < copy) { /* the vector straddles the end of the copied rows */
            union {
                uint4 v;
                uint16_t h[8];
            } part;
            for (int j = 0; j < 8; ++j)
                part.h[j] = b + 2 * j < copy ? reinterpret_cast<const uint16_t *>(src + b)[j] : 0;
            out = part.v;
        }
        reinterpret_cast<uint4 *>(dst)[v] = out;
    }
    for (int64_t b = (end / 16) * 16 + 2 * tid; b < end; b += 2 * stride) /* tail of fewer than 16 bytes */
        *reinterpret_cast<uint16_t *>(dst + b) = b < copy ? *reinterpret_cast<const uint16_t *>(src + b) : 0;
}

/* dst[M*rb, zero_rows*rb) = 0: 2-byte stores up to the first 16-byte boundary and after the last, 16-byte ones
 * between. */
__global__ void __launch_bounds__(kThreads) zero_rows_kernel(uint8_t *__restrict__ dst, int64_t row_bytes,
                                                             const int64_t *device_rows, int64_t zero_rows) {
    int64_t m = *device_rows;
    m = m < 0 ? 0 : m > zero_rows ? zero_rows : m;
    const int64_t begin = m * row_bytes, end = zero_rows * row_bytes;
    int64_t head = (int64_t)((16 - (reinterpret_cast<uintptr_t>(dst + begin) & 15)) & 15);
    if (head > end - begin) head = end - begin;
    const int64_t vbegin = begin + head, n_vec = (end - vbegin) / 16, vend = vbegin + 16 * n_vec;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t v = tid; v < n_vec; v += stride)
        reinterpret_cast<uint4 *>(dst + vbegin)[v] = make_uint4(0, 0, 0, 0);
    for (int64_t b = begin + 2 * tid; b < vbegin; b += 2 * stride) *reinterpret_cast<uint16_t *>(dst + b) = 0;
    for (int64_t b = vend + 2 * tid; b < end; b += 2 * stride) *reinterpret_cast<uint16_t *>(dst + b) = 0;
}

/* index = the first bucket >= M, or n_buckets (no body runs) when M < 1, M > capacity or M > the last bucket. */
__global__ void select_kernel(const int64_t *device_rows, const int64_t *buckets, int n_buckets, int64_t capacity,
                              cudaGraphConditionalHandle handle, unsigned int *errors) {
    const int64_t m = *device_rows;
    int index = n_buckets;
    if (m >= 1 && m <= capacity)
        for (int i = 0; i < n_buckets; ++i)
            if (buckets[i] >= m) {
                index = i;
                break;
            }
    if (index == n_buckets) atomicAdd(errors, 1u);
    cudaGraphSetConditional(handle, (unsigned int)index);
}

} // namespace

extern "C" cudaError_t gg_k_stage(void *dst, const void *src, int64_t row_bytes, const int64_t *device_rows,
                                  int64_t rows, int64_t zero_rows, int sm_count, cudaStream_t stream) {
    const int64_t max_rows = zero_rows > rows ? zero_rows : rows;
    stage_kernel<<<grid_for((size_t)(max_rows * row_bytes / 16 + 1), sm_count, 8), kThreads, 0, stream>>>(
        static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), row_bytes, device_rows, rows, zero_rows);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_zero_rows(void *dst, int64_t row_bytes, const int64_t *device_rows, int64_t zero_rows,
                                      int sm_count, cudaStream_t stream) {
    zero_rows_kernel<<<grid_for((size_t)(zero_rows * row_bytes / 16 + 1), sm_count, 8), kThreads, 0, stream>>>(
        static_cast<uint8_t *>(dst), row_bytes, device_rows, zero_rows);
    return cudaGetLastError();
}

extern "C" cudaError_t gg_k_select_bucket(const int64_t *device_rows, const int64_t *device_buckets, int n_buckets,
                                          int64_t capacity, cudaGraphConditionalHandle handle, unsigned int *errors,
                                          cudaStream_t stream) {
    select_kernel<<<1, 1, 0, stream>>>(device_rows, device_buckets, n_buckets, capacity, handle, errors);
    return cudaGetLastError();
}
