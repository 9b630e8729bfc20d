/* train_kernels.cu - the character model's own kernels (train_kernels.h). */
#include "train_kernels.h"

#include <math.h>

namespace {

constexpr int kThreads = 256;
constexpr int kEmbedChunks = 256; /* (row, position) chunks of the embedding gradient's partial sums */
constexpr size_t kMaxSmem = 48 << 10;

unsigned blocks_for(int64_t n, int threads) {
    const int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b); /* grid-stride loops cover the rest */
}

__device__ uint64_t splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__global__ void batch_kernel(const uint8_t *text, int64_t n, int context, int64_t rows, uint64_t seed, int world,
                             int rank, const int64_t *step, int32_t *tokens) {
    const uint64_t first = ((uint64_t)*step * (uint64_t)world + (uint64_t)rank) * (uint64_t)rows;
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t i = first + (uint64_t)r;
        const uint64_t p = splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15ull) % (uint64_t)(n - context);
        for (int c = 0; c <= context; ++c) tokens[r * (context + 1) + c] = text[p + c];
    }
}

__global__ void embed_kernel(const float *table, const int32_t *tokens, int context, int embed, int64_t rows,
                             float *x) {
    const int64_t d = (int64_t)context * embed, n = rows * d;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / d, k = i % d;
        const int c = (int)(k / embed), j = (int)(k % embed);
        x[i] = table[(int64_t)tokens[r * (context + 1) + c] * embed + j];
    }
}

/* One CTA of `embed` threads per chunk of (row, position) pairs: thread j adds column j of each pair's gradient
 * into its vocabulary row in shared memory, in pair order. Only thread j touches column j, so no two threads
 * share a word and the order is fixed. */
__global__ void embed_partials_kernel(const float *grad_x, const int32_t *tokens, int context, int embed, int vocab,
                                      int64_t pairs, int64_t per_chunk, float *partials) {
    extern __shared__ float sums[];
    const int j = threadIdx.x;
    for (int v = 0; v < vocab; ++v) sums[v * embed + j] = 0.0f;
    const int64_t begin = blockIdx.x * per_chunk, end = min(pairs, begin + per_chunk);
    for (int64_t k = begin; k < end; ++k) {
        const int64_t r = k / context, c = k % context;
        sums[tokens[r * (context + 1) + c] * embed + j] += grad_x[k * embed + j];
    }
    float *out = partials + (int64_t)blockIdx.x * vocab * embed;
    for (int v = 0; v < vocab; ++v) out[v * embed + j] = sums[v * embed + j];
}

__global__ void embed_sum_kernel(const float *partials, int n, float *grad_table) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < kEmbedChunks; ++b) s += partials[(int64_t)b * n + i];
        grad_table[i] = s;
    }
}

/* One warp per row; the warp's sums are butterfly shuffles, the same order on every run. */
__global__ void cross_entropy_kernel(const float *logits, const float *bias, const int32_t *tokens, int context,
                                     int vocab, int64_t rows, float scale, float *row_loss, float *grad_logits) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
        const float *z = logits + r * vocab;
        float mx = -INFINITY;
        for (int v = lane; v < vocab; v += 32) mx = fmaxf(mx, z[v] + bias[v]);
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.0f;
        for (int v = lane; v < vocab; v += 32) sum += expf(z[v] + bias[v] - mx);
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const int target = tokens[r * (context + 1) + context];
        for (int v = lane; v < vocab; v += 32) {
            const float p = expf(z[v] + bias[v] - mx) / sum;
            grad_logits[r * vocab + v] = (p - (v == target ? 1.0f : 0.0f)) * scale;
        }
        if (lane == 0) row_loss[r] = logf(sum) + mx - (z[target] + bias[target]);
    }
}

__global__ void loss_finish_kernel(const float *row_loss, int64_t rows, float scale, float *losses, int64_t capacity,
                                   int64_t *step) {
    __shared__ float part[1024];
    float s = 0.0f;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += row_loss[r];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const int64_t t = *step;
        if (t >= 0 && t < capacity) losses[t] = part[0] * scale;
        *step = t + 1;
    }
}

/* One CTA per column: its threads add rows in a strided order, then a tree in shared memory. */
__global__ void col_sum_kernel(const float *in, int64_t rows, int64_t cols, float *out) {
    __shared__ float part[kThreads];
    for (int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
        float s = 0.0f;
        for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += in[r * cols + c];
        part[threadIdx.x] = s;
        __syncthreads();
        for (int w = kThreads / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) out[c] = part[0];
        __syncthreads();
    }
}

__global__ void add_kernel(const float *a, const float *b, int64_t n, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = a[i] + b[i];
}

} // namespace

extern "C" {

cudaError_t tk_batch(const uint8_t *text, int64_t n, int context, int64_t rows, uint64_t seed, int world, int rank,
                     const int64_t *step, int32_t *tokens, cudaStream_t stream) {
    batch_kernel<<<blocks_for(rows, kThreads), kThreads, 0, stream>>>(text, n, context, rows, seed, world, rank, step,
                                                                      tokens);
    return cudaGetLastError();
}

cudaError_t tk_embed(const float *table, const int32_t *tokens, int context, int embed, int64_t rows, float *x,
                     cudaStream_t stream) {
    embed_kernel<<<blocks_for(rows * context * embed, kThreads), kThreads, 0, stream>>>(table, tokens, context, embed,
                                                                                        rows, x);
    return cudaGetLastError();
}

size_t tk_embed_partials_count(int vocab, int embed) { return (size_t)kEmbedChunks * vocab * embed; }

cudaError_t tk_embed_backward(const float *grad_x, const int32_t *tokens, int context, int embed, int vocab,
                              int64_t rows, float *partials, float *grad_table, cudaStream_t stream) {
    const size_t smem = (size_t)vocab * embed * sizeof(float);
    if (embed < 1 || embed > 1024 || smem > kMaxSmem) return cudaErrorInvalidValue;
    const int64_t pairs = rows * context, per_chunk = (pairs + kEmbedChunks - 1) / kEmbedChunks;
    embed_partials_kernel<<<kEmbedChunks, embed, smem, stream>>>(grad_x, tokens, context, embed, vocab, pairs,
                                                                 per_chunk, partials);
    const int n = vocab * embed;
    embed_sum_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(partials, n, grad_table);
    return cudaGetLastError();
}

cudaError_t tk_cross_entropy(const float *logits, const float *bias, const int32_t *tokens, int context, int vocab,
                             int64_t rows, float scale, float *row_loss, float *grad_logits, cudaStream_t stream) {
    cross_entropy_kernel<<<blocks_for(rows * 32, kThreads), kThreads, 0, stream>>>(logits, bias, tokens, context, vocab,
                                                                                   rows, scale, row_loss, grad_logits);
    return cudaGetLastError();
}

cudaError_t tk_loss_finish(const float *row_loss, int64_t rows, float scale, float *losses, int64_t capacity,
                           int64_t *step, cudaStream_t stream) {
    loss_finish_kernel<<<1, 1024, 0, stream>>>(row_loss, rows, scale, losses, capacity, step);
    return cudaGetLastError();
}

cudaError_t tk_col_sum(const float *in, int64_t rows, int64_t cols, float *out, cudaStream_t stream) {
    col_sum_kernel<<<(unsigned)(cols < 65535 ? cols : 65535), kThreads, 0, stream>>>(in, rows, cols, out);
    return cudaGetLastError();
}

cudaError_t tk_add(const float *a, const float *b, int64_t rows, int64_t cols, float *y, cudaStream_t stream) {
    add_kernel<<<blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(a, b, rows * cols, y);
    return cudaGetLastError();
}

} // extern "C"
