/*
 * train_kernels.h - the character model's own kernels (examples/train.c): the batch, the embedding and its
 * gradient, the loss and its gradient, the bias gradient of the output layer and the residual adds. Every
 * launcher enqueues one or two kernels on `stream` and returns the launch's cudaError_t; none allocates or
 * synchronizes, so all of them can be captured (they run inside the step graph's callbacks). Every reduction is in
 * a fixed order: the same inputs give the same bits on every run, eager or replayed.
 */
#ifndef GG_TRAIN_KERNELS_H
#define GG_TRAIN_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The batch of step *step (read on the GPU): for row r < rows, tokens[r, 0..context] = text[p .. p + context] with
 * p = splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15) mod (n - context), i = (*step * world + rank) * rows + r:
 * the first `context` ids are the input, the last one the target. text holds vocabulary ids. */
cudaError_t tk_batch(const uint8_t *text, int64_t n, int context, int64_t rows, uint64_t seed, int world, int rank,
                     const int64_t *step, int32_t *tokens, cudaStream_t stream);

/* x[r, c*embed + j] = table[tokens[r, c], j] for c < context: the context's embeddings side by side. */
cudaError_t tk_embed(const float *table, const int32_t *tokens, int context, int embed, int64_t rows, float *x,
                     cudaStream_t stream);

/* The embedding table's gradient: grad_table[v, j] = sum over rows r and positions c with tokens[r, c] = v of
 * grad_x[r, c*embed + j]. Partial sums per chunk of (row, position) pairs in `partials` (tk_embed_partials_count
 * floats), then added in chunk order. vocab * embed * 4 bytes must fit in 48 KiB of shared memory. */
size_t tk_embed_partials_count(int vocab, int embed);
cudaError_t tk_embed_backward(const float *grad_x, const int32_t *tokens, int context, int embed, int vocab,
                              int64_t rows, float *partials, float *grad_table, cudaStream_t stream);

/* Softmax cross-entropy of rows x vocab logits (+ bias) against the target tokens[r, context]: row_loss[r], and the
 * logits' gradient grad_logits = (softmax - onehot) * scale (scale: 1 / the rows the loss averages over). */
cudaError_t tk_cross_entropy(const float *logits, const float *bias, const int32_t *tokens, int context, int vocab,
                             int64_t rows, float scale, float *row_loss, float *grad_logits, cudaStream_t stream);

/* losses[*step] = sum(row_loss) * scale when *step < capacity, then ++*step (the step counter the batch reads). */
cudaError_t tk_loss_finish(const float *row_loss, int64_t rows, float scale, float *losses, int64_t capacity,
                           int64_t *step, cudaStream_t stream);

/* out[c] = sum over r < rows of in[r * cols + c] (a bias's gradient). */
cudaError_t tk_col_sum(const float *in, int64_t rows, int64_t cols, float *out, cudaStream_t stream);

/* y[i] = a[i] + b[i] for i < rows * cols; y may be a or b. */
cudaError_t tk_add(const float *a, const float *b, int64_t rows, int64_t cols, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
