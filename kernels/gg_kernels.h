/*
 * gg_kernels.h - the C interface of gradgraph's own CUDA kernels. Each launcher enqueues on `stream`, checks the
 * launch and returns its cudaError_t. Launchers allocate nothing: every buffer comes from the caller's plan.
 * sm_count sizes grid-stride grids (a plan passes the context's). Vectorized kernels need 16-byte aligned
 * pointers and row lengths that are multiples of 8 elements (the public
 * API guarantees both).
 */
#ifndef GG_KERNELS_H
#define GG_KERNELS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A launch's priority, for the launchers that take one: a value of cudaDeviceGetStreamPriorityRange's range (lower
 * is dispatched first when SMs free up), or this for the stream's own. Graphs keep it (gradgraph instantiates them
 * with node priorities). */
#define GG_PRIORITY_OF_STREAM INT_MIN

/* Element types a kernel can read or write. */
typedef enum gg_dtype { GG_DT_F32 = 0, GG_DT_F16 = 1, GG_DT_BF16 = 2 } gg_dtype;

/* Block 1, in one launch: grad_residual = grad_output; grad_hidden = bf16(bf16(go * t) * mask[row]); per CTA the fp32
 * partial sum of go * bf16(hs * mask[row]) into a slot of partials; the last CTA to finish adds the partials in a
 * fixed order and writes grad_gate = bf16((1 - t^2) * sum) (bf16(grad_gate + that) with accumulate). partials:
 * gg_k_tanh_gate_slots(sm_count) device words, all 0xffffffff between launches; counter: a device word that is 0
 * between launches (the kernel restores both). All tensors bf16 [M,H]. */
cudaError_t gg_k_tanh_gate(const uint16_t *grad_output, const uint16_t *gate, const uint16_t *hidden_states,
                           const uint16_t *mask, uint16_t *grad_residual, uint16_t *grad_hidden_states,
                           unsigned *partials, unsigned *counter, uint16_t *grad_gate, int accumulate, int grid_blocks,
                           int64_t M, int64_t H, cudaStream_t stream);
/* The grid gg_k_tanh_gate uses for M rows on a device with sm_count SMs (at most gg_k_tanh_gate_slots). */
int gg_k_tanh_gate_grid(int64_t M, int sm_count);
/* The partial-sum slots gg_k_tanh_gate needs on a device with sm_count SMs, for any M. */
int gg_k_tanh_gate_slots(int sm_count);

/* Forward passes (forward.cu), grid-stride passes over 16-byte vectors (n and H multiples of 8).
 * Block 1: output = bf16(residual + bf16(bf16(t * hidden_states) * mask[row])), t = tanh(gate) in fp32; [M,H]. */
cudaError_t gg_k_tanh_gate_forward(const uint16_t *residual, const uint16_t *gate, const uint16_t *hidden_states,
                                   const uint16_t *mask, uint16_t *output, int64_t M, int64_t H, int sm_count,
                                   cudaStream_t stream);
/* Blocks 2/3: from the fp32 pre-activation x (n elements), each output that is not NULL: act = gelu_tanh(x) (fp32),
 * tanh_inner = tanh(c (x + 0.044715 x^3)) (fp32), act16 = act in fp16 (with overflow as gg_k_f32_to_f16's). */
cudaError_t gg_k_gelu_forward(const float *x, float *act, float *tanh_inner, void *act16, size_t n, int sm_count,
                              unsigned *overflow, cudaStream_t stream);
/* Block 4: gate_activated = bf16(silu(gate)) (use_silu_gate; fp32 math, one rounding) or gate, and gated_output =
 * bf16(ssm_output * gate_activated); n elements. */
cudaError_t gg_k_ssm_gate_forward(const uint16_t *ssm_output, const uint16_t *gate, uint16_t *gate_activated,
                                  uint16_t *gated_output, size_t n, int use_silu_gate, int sm_count,
                                  cudaStream_t stream);

/* Block 2's R = G * gelu'(x), gelu' of the tanh approximation (tanh computed from x); n elements. G and R of one
 * type (GG_DT_F32 or GG_DT_F16; R may be G: in place), or G fp32 and R fp16 (R a buffer of its own). x: x_type
 * GG_DT_F32, or GG_DT_F16 (the pre-activation's fp16 copy, where R is fp16). */
cudaError_t gg_k_gelu_grad(const void *G, gg_dtype g_type, void *R, gg_dtype r_type, const void *x, gg_dtype x_type,
                           size_t n, int sm_count, unsigned *overflow, cudaStream_t stream);

/* Both: overflow NULL, or a device word set to 1 when R is fp16 and a value of R is past fp16's range (|R| > 65504,
 * Inf or NaN: an fp16 G that overflowed in its GEMM shows here too). */
/* Block 3's R = G * gelu'(x) (G, R, x and their types as for gg_k_gelu_grad) and, in the same pass, col_sums[c] =
 * sum over rows of the fp32 R (grad_bias1; += with accumulate), deterministic as gg_k_col_sum, whose counters and
 * partials rules apply; chunks from gg_k_col_sum_chunks(M, N, GG_DT_F32, ...). */
cudaError_t gg_k_gelu_grad_col_sum(const void *G, gg_dtype g_type, void *R, gg_dtype r_type, const void *x,
                                   gg_dtype x_type, int64_t M, int64_t N, int chunks, float *partials,
                                   unsigned *counters, float *col_sums, int accumulate, unsigned *overflow,
                                   cudaStream_t stream);

/* Block 4's elementwise chain, bf16 in and out, rounding after every step (see gradgraph.h). n elements (a multiple
 * of 8). narrow_ctas > 0: on that many CTAs of 1024 threads, one per SM that a GEMM beside it leaves free; 0: a grid
 * over the whole GPU. discard_g: g is scratch that nothing reads afterwards, and its L2 lines are dropped without
 * being written back once read (its contents are then undefined); with a g not 128-byte aligned, ignored. */
cudaError_t gg_k_ssm_gate_grad(const uint16_t *g, const uint16_t *gate_activated, const uint16_t *ssm_output,
                               const uint16_t *gate, uint16_t *grad_ssm_output, uint16_t *grad_gate, size_t n,
                               int use_silu_gate, int sm_count, int narrow_ctas, int discard_g, cudaStream_t stream);

/* Block 4's g = bf16(dY @ weight) with the chain above in the GEMM's epilogue (ssm_fused.cu): grad_ssm_output and
 * grad_gate, g never stored. bias_rows: [ceil(M / GG_SSM_FUSED_ROWS), H] fp32, row r gets the column sums of dY's
 * rows of the kernel's row tile r (grad_bias is their column sum). gate is read only with use_silu_gate. sm_90a on
 * a 9.0 device only (the caller checks has_wgmma), shapes per gg_k_ssm_fused_supported. */
#define GG_SSM_FUSED_ROWS 128 /* the kernel's row tile */
int gg_k_ssm_fused_supported(int64_t M, int64_t H, int64_t E);
cudaError_t gg_k_ssm_fused(const uint16_t *grad_output, const uint16_t *weight, const uint16_t *gate_activated,
                           const uint16_t *ssm_output, const uint16_t *gate, uint16_t *grad_ssm_output,
                           uint16_t *grad_gate, float *bias_rows, int64_t M, int64_t H, int64_t E, int use_silu_gate,
                           int sm_count, cudaStream_t stream);

/* Block 4's whole backward for few tokens in one launch (ssm_small.cu): grad_weight = bf16(dYᵀ @ gated_output),
 * grad_bias = bf16(Σ_rows dY) (each bf16(old + ...) with accumulate), and g = bf16(dY @ weight) with the chain above
 * applied in the GEMM's epilogue (g is never stored). dY [M,H], weight [H,E], the rest [M,E]; gate is read only
 * with use_silu_gate. gg_k_ssm_small_supported: whether the shape is one it handles (H, E multiples of 64). */
int gg_k_ssm_small_supported(int64_t M, int64_t H, int64_t E);
cudaError_t gg_k_ssm_small(const uint16_t *grad_output, const uint16_t *weight, const uint16_t *gated_output,
                           const uint16_t *gate_activated, const uint16_t *ssm_output, const uint16_t *gate,
                           uint16_t *grad_ssm_output, uint16_t *grad_gate, uint16_t *grad_weight, uint16_t *grad_bias,
                           int64_t M, int64_t H, int64_t E, int use_silu_gate, int accumulate, int sm_count,
                           cudaStream_t stream);

/* out[c] = sum over rows r of in[r, c] for an [M,N] matrix (out[c] += ... with accumulate), in fp32 in a fixed
 * order, in one launch: `chunks` row chunks each write a partial row into partials [chunks, N]; per column group the
 * last chunk to finish adds the partials in order. counters: GG_COL_SUM_COUNTERS device words, 0 between launches
 * (the kernel resets them); reductions that may run at the same time need their own. Types: fp32 -> fp32,
 * fp16 -> fp32, bf16 -> bf16 and fp32 -> bf16 (cudaErrorInvalidValue otherwise). f16_copy: NULL, or (fp32 input)
 * where the same pass writes the input converted to fp16, [M,N]; overflow (with it, or with an fp16 input; else
 * NULL): a word set when a value of the copy is past fp16's range, as gg_k_f32_to_f16's, or a value of the fp16
 * input is not finite. */
#define GG_COL_SUM_COUNTERS 32
cudaError_t gg_k_col_sum(const void *in, gg_dtype in_type, int64_t M, int64_t N, int chunks, float *partials,
                         unsigned *counters, void *out, gg_dtype out_type, int accumulate, void *f16_copy,
                         unsigned *overflow, cudaStream_t stream);
/* The chunk count gg_k_col_sum should use for an [M,N] input of in_type (a plan stores it: same shape, same bits). */
int gg_k_col_sum_chunks(int64_t M, int64_t N, gg_dtype in_type, int sm_count);

/* out[i] = scale * sum over j < ranks of in[j * chunk + i] (fp32 sums in rank order, then the scale, then type), for
 * i < chunk: the adding step of the copy-engine gradient reduction. type GG_DT_F32 or GG_DT_BF16; any alignment
 * (16-byte vectors when the pointers and chunk allow). */
cudaError_t gg_k_sum_ranks(const void *in, void *out, gg_dtype type, size_t chunk, int ranks, float scale,
                           int sm_count, cudaStream_t stream);

/* Blocks 2/3's weight GEMMs at few tokens (gemm_f32w.cu, sm_90a): C[M,N] = A[M,K] @ B[K,N], A fp16, B fp32 rounded to
 * fp16 (nearest even) as it is loaded, fp32 accumulation, C of c_type (GG_DT_F16 or GG_DT_F32); all row-major and
 * dense. addend: NULL, or (c_type GG_DT_F32 only) an fp32 [M,N] added to the product before C is written (one
 * rounding: a residual connection's gradient). Deterministic. gg_k_gemm_f32w_supported: whether it handles the shape
 * (N a multiple of 128, K of 64); the caller also checks that the device runs sm_90a code (gg_ctx's has_wgmma).
 * gg_k_gemm_f32w_capacity, once per device before the first launch: how many clusters of s CTAs (capacity[s], s =
 * 1..GG_F32W_MAX_SPLIT) fit on it at once, which bounds how far each launch splits k. */
#define GG_F32W_MAX_SPLIT 8
int gg_k_gemm_f32w_supported(int64_t M, int64_t N, int64_t K);
cudaError_t gg_k_gemm_f32w_capacity(int capacity[GG_F32W_MAX_SPLIT + 1]);
/* The CTAs per cluster a launch of this shape splits k over, given the capacity (needs no GPU): of the splits whose
 * clusters all fit at once, the one that leaves each CTA the fewest k-tiles of 64, the smaller on a tie. */
int gg_k_gemm_f32w_split(int64_t M, int64_t N, int64_t K, const int *capacity);
/* The CTAs a launch of this shape runs (its tiles times its split; needs no GPU). */
int64_t gg_k_gemm_f32w_ctas(int64_t M, int64_t N, int64_t K, const int *capacity);
cudaError_t gg_k_gemm_f32w(const void *A, const float *B, void *C, gg_dtype c_type, const float *addend, int64_t M,
                           int64_t N, int64_t K, const int *capacity, int priority, cudaStream_t stream);

/* out = (half)in, n elements (any n; in 16-byte and out 8-byte aligned). narrow_ctas > 0: on that many CTAs of 1024
 * threads, one per SM that a GEMM beside it leaves free; 0: a grid over the whole GPU. overflow: NULL, or a device
 * word set to 1 when a value is past fp16's range (|v| > 65504, Inf or NaN). */
cudaError_t gg_k_f32_to_f16(const float *in, void *out, size_t n, int sm_count, int narrow_ctas, int priority,
                            unsigned *overflow, cudaStream_t stream);

/* d = round(sum + part + beta c) into d's type (GG_DT_F16 or GG_DT_BF16), one rounding: sum the m x n column-major
 * fp32 matrix (ld m, 16-byte aligned) that a GEMM run in parts added up, part NULL or a second such matrix (the parts
 * that ran on another stream: sum + part is added in fp32 first), c (d's type and layout; may be d itself; not read
 * when beta is 0) and d m x n column-major with leading dimension ldd >= m; m and ldd multiples of 4. */
cudaError_t gg_k_round_sum(const float *sum, const float *part, const void *c, float beta, void *d, gg_dtype d_type,
                           int64_t m, int64_t n, int64_t ldd, int sm_count, cudaStream_t stream);

/* Sets *flag (a device word) to 1 when any of the n elements at data (fp32, or bf16 when bf16 is nonzero; 16-byte
 * aligned) is Inf or NaN; leaves it otherwise. */
cudaError_t gg_k_check_finite(const void *data, size_t n, int bf16, unsigned *flag, int sm_count,
                              cudaStream_t stream);

/* Graph padding. Copies the first M rows (M = *device_rows when device_rows is not NULL, read when the kernel
 * runs; else `rows`) of row_bytes each from src to dst and zeroes dst's rows [M, zero_rows). With zero_rows <= M it
 * only copies (staging out). The grid covers max(rows, zero_rows) rows: with device_rows, pass the capacity. */
cudaError_t gg_k_stage(void *dst, const void *src, int64_t row_bytes, const int64_t *device_rows, int64_t rows,
                       int64_t zero_rows, int sm_count, cudaStream_t stream);

/* Padding in place (step graphs run on the device): zeroes dst's rows [M, zero_rows), M = *device_rows read when
 * the kernel runs (clamped to [0, zero_rows]). row_bytes even, dst 2-byte aligned; the grid covers zero_rows rows. */
cudaError_t gg_k_zero_rows(void *dst, int64_t row_bytes, const int64_t *device_rows, int64_t zero_rows, int sm_count,
                           cudaStream_t stream);

/* Device-side bucket selection: sets the SWITCH node's condition to the first of n_buckets ascending bucket sizes
 * (device memory) that holds M = *device_rows, or to n_buckets (nothing runs, *errors += 1) when M < 1,
 * M > capacity or M > every bucket. One thread. */
cudaError_t gg_k_select_bucket(const int64_t *device_rows, const int64_t *device_buckets, int n_buckets,
                               int64_t capacity, cudaGraphConditionalHandle handle, unsigned int *errors,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
