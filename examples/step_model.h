/*
 * step_model.h - a stack of layers for the step graph example, bench and test: residual GELU-MLP layers (block 3,
 * the residual add in a callback) or gated bf16 layers (blocks 1 and 4), every buffer sized for max_tokens rows and
 * filled with random values. The same backward runs as one step graph, as eager calls or as per-block graphs.
 */
#ifndef GG_STEP_MODEL_H
#define GG_STEP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gradgraph.h"

typedef struct sm_config {
    int layers;
    int gated;              /* 0: residual MLPs (hidden, ffn); 1: tanh gate + SSM gate per layer (hidden, ffn = E) */
    int64_t hidden, ffn, max_tokens;
    gg_precision precision; /* the MLPs' */
    int fused_residual;     /* residual MLPs: the residual's gradient added in each MLP's dX GEMM (args.grad_residual)
                               instead of by a callback after it */
    int fp16_copies;        /* residual MLPs in fp16 mode: hand every MLP the fp16 copies of its hidden states,
                               weights, activation and pre-activation (gg_mlp_args' *_fp16, made once with
                               gg_to_fp16, as a forward and an optimizer would keep them, the set PyTorch's autocast
                               saves), so the backward converts only grad_output and gelu' reads x in fp16 */
    unsigned seed;
} sm_config;

typedef struct sm_model sm_model;

/* 0, or -1 with a message on stderr. */
int sm_create(gg_ctx *ctx, const sm_config *config, sm_model **out);
void sm_destroy(sm_model *m);

/* With fp16_copies: hands every MLP its fp16 copies (use 1, as sm_create leaves it) or not (0: the backward
 * converts the fp32 tensors itself), for the calls made after it (a step made before keeps what it was given). */
void sm_use_copies(sm_model *m, int use);

/* The backward into a step (every layer, last first, with its callbacks). */
gg_status sm_add_to_step(sm_model *m, gg_step *step);
/* Double-buffered activations (residual MLP stacks only; GG_ERROR_UNSUPPORTED otherwise): points every layer at
 * activation set 0 (the one made by sm_create) or 1 (hidden states and intermediates with other random values,
 * made on first use) and, with a step that sm_add_to_step filled, rebinds its calls (gg_step_set_args). The
 * callbacks' buffers (the residual stream's gradients) are the same for both sets. */
gg_status sm_use_activations(sm_model *m, int set, gg_step *step);

/* The same backward as separate eager calls (and the callbacks' work) on stream, for `tokens` rows. */
gg_status sm_run_eager(sm_model *m, int64_t tokens, int accumulate, cudaStream_t stream);
/* The same as per-block graphs (made on first use with config), one launch per block call. */
gg_status sm_run_block_graphs(sm_model *m, const gg_graph_config *config, int64_t tokens, int accumulate,
                              cudaStream_t stream);

/* Every gradient the backward writes (parameter gradients, then the activation gradients of `tokens` rows), copied
 * to the host in one buffer of *bytes (malloc'd; the caller frees it). elem_bytes: 4 (fp32) or 2 (bf16). */
void *sm_gradients(sm_model *m, int64_t tokens, size_t *bytes, int *elem_bytes);
/* The bytes of the parameter gradients at the start of an sm_gradients buffer (the part data-parallel steps
 * reduce). */
size_t sm_param_bytes(const sm_model *m);
/* The parameter gradients' buffers and element counts (at most max; returns how many): what a data-parallel step
 * reduces, for timing their reduction alone. */
int sm_param_grads(const sm_model *m, void **ptrs, size_t *counts, int max);
/* Residual MLP stacks: every layer's weights (weight1, weight2: fp32, trainable in place) with their gradients,
 * element counts and, with fp16_copies, their fp16 copies (for gg_optim_param.copy, so that an optimizer keeps them
 * current; NULL otherwise), at most max; returns how many (0 for gated stacks). */
typedef struct sm_param {
    float *weight;
    const float *grad;
    size_t count;
    void *copy;
} sm_param;
int sm_params(const sm_model *m, sm_param *out, int max);
/* Sets every gradient buffer to `byte` (bytes), so that a run must write all of them, and restores the loss's
 * gradient as sm_create made it (a padded step run zeroes its padding rows in place). */
void sm_clear(sm_model *m, int byte);

/* Largest |a - b| / (max |b| over the buffer) of two sm_gradients buffers, and whether they are bitwise equal. */
double sm_max_rel_diff(const void *a, const void *b, size_t bytes, int elem_bytes, int *bitwise);

/* GEMM FLOP of one backward at `tokens` rows (the speed of light's numerator). */
double sm_flop(const sm_model *m, int64_t tokens);

/* The most timing rounds a run keeps; sm_median: the median of n of them (1 <= n <= SM_MAX_ROUNDS), v left as it
 * is. */
enum { SM_MAX_ROUNDS = 16 };
double sm_median(const double *v, int n);

#endif
