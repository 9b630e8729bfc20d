/*
 * train_model.h - the character model of examples/train.c: the previous `context` characters embedded (embed each)
 * and put side by side, x of width D = context * embed; `layers` residual layers x <- x + MLP(x) (gradgraph's block
 * 3: GELU(tanh) MLP with biases, F = ffn); logits = x Woutᵀ + bout over the vocabulary; softmax cross-entropy
 * against the next character; AdamW.
 *
 * One training step is forward, loss, backward and update. As a step graph (tm_build_step) it is one gg_step,
 * replayed with one launch: a callback for the forward (the batch, the embedding, every layer's gg_mlp_forward and
 * residual add, the logits), a callback for the loss and its gradient (and the output layer's gradients), then per
 * layer, last first, gradgraph's MLP backward with the residual stream's gradient added in its dX GEMM
 * (grad_residual), a last callback for the embedding's gradient, and gradgraph's AdamW (gg_step_add_optimizer);
 * with a communicator the step also reduces every gradient across the GPUs. Eagerly (tm_train_step with no step)
 * the same functions run one after the other on the stream: the same kernels (train --check compares the two
 * ways' losses).
 *
 * Every parameter lives in one buffer (and its gradient in another, at the same offsets): the eager path's
 * all-reduce is one call. The step counter, the batch and the per-step losses live on the GPU, so a
 * replayed graph needs nothing from the host.
 */
#ifndef GG_TRAIN_MODEL_H
#define GG_TRAIN_MODEL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gradgraph.h"

typedef struct tm_config {
    int layers, context, embed; /* L, C, e: D = C * e (a multiple of 8) */
    int64_t ffn;                /* F (a multiple of 8) */
    int64_t batch;              /* rows (characters predicted) per step and GPU */
    gg_precision precision;     /* the MLPs' GEMMs; the model's own GEMMs use TF32 unless this is FP32 */
    uint64_t data_seed;         /* the batches (train_kernels.h: tk_batch) */
    unsigned init_seed;         /* the initial weights */
    float lr, beta1, beta2, eps, weight_decay; /* AdamW; weight decay on the matrices and the embedding only */
    int64_t steps;              /* the per-step losses kept on the GPU */
    int world, rank;            /* data parallelism: this GPU's batch is rank `rank` of `world` */
} tm_config;

typedef struct tm_model tm_model;

/* Builds the model on ctx's device: text holds n vocabulary ids (< vocab <= 256). 0, or -1 with a message on stderr
 * (which names what failed). */
int tm_create(gg_ctx *ctx, const tm_config *config, const uint8_t *text, int64_t n, int vocab, tm_model **out);
void tm_destroy(tm_model *m);

/* Writes the initial weights for the PyTorch twin (bench/peers/train_torch.py): "GGTRAIN1", int32 vocab, context,
 * embed, layers, hidden, ffn, then float32 tensors, row-major: embedding [V,e]; per layer W1 [F,D], b1 [F],
 * W2 [D,F], b2 [D]; Wout [V,D], bout [V]. 0, or -1 with a message on stderr. */
int tm_dump_init(tm_model *m, const char *path);

/* The parameters' element count, and host copies for checking (each NULL to skip): the parameters and their
 * gradients as tensors back to back in the canonical order above (tm_param_count floats each), and the last
 * step's batch (batch x (context + 1) ids: the inputs, then the target). Waits for the device. 0, or -1. */
int64_t tm_param_count(const tm_model *m);
int tm_snapshot(tm_model *m, float *params, float *grads, int32_t *tokens);
/* Fills the gradient buffer with NaN, so that a gradient a step does not write shows. 0, or -1. */
int tm_poison_gradients(tm_model *m);

/* The whole training step as one gg_step, finalized (plans every call; allocates). */
gg_status tm_build_step(tm_model *m, gg_step **out);

/* One training step on stream: the step graph's one launch (step non-NULL), or the same work as eager calls
 * followed by the gradients' all-reduce (world > 1) and the update. */
gg_status tm_train_step(tm_model *m, gg_step *step, cudaStream_t stream);

/* Copies the losses of steps [0, count) to host (waits for the device). 0, or -1. */
int tm_losses(tm_model *m, float *host, int64_t count);

/* Checkpoints: the step counter, the parameters and AdamW's state (gg_optim_save_state) in one file, written beside
 * path and renamed over it (a run stopped while writing keeps the previous one). Loading one into a model of the same
 * shape resumes training exactly where it stopped (the same batches, weights and moments): *step is the step to run
 * next. Each waits for the device. 0, or -1 with a message on stderr. */
int tm_save_checkpoint(tm_model *m, const char *path);
int tm_load_checkpoint(tm_model *m, const char *path, int64_t *step);

/* The first error a callback met (callbacks return nothing), or NULL. */
const char *tm_callback_error(const tm_model *m);

#endif
