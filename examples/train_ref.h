/*
 * train_ref.h - a float64 CPU reference of one training step of the character model (train_model.h): the loss and
 * every parameter gradient, for train --check on small shapes. Plain C, no CUDA.
 */
#ifndef GG_TRAIN_REF_H
#define GG_TRAIN_REF_H

#include <stdint.h>

typedef struct tr_shape {
    int layers, context, embed, vocab;
    int64_t ffn, rows;
} tr_shape;

/* The number of parameter tensors (canonical order: embedding [V,e]; per layer W1 [F,D], b1 [F], W2 [D,F],
 * b2 [D]; Wout [V,D], bout [V]) and the element count of tensor t. */
int tr_tensors(const tr_shape *s);
int64_t tr_count(const tr_shape *s, int t);

/* The mean cross-entropy of the batch (tokens [rows, context + 1]: the inputs, then the target) at the parameters
 * params (the tensors in canonical order, back to back), and its gradient with respect to every parameter into
 * grads (the same layout). Returns the loss; NaN when memory runs out. */
double tr_step(const tr_shape *s, const float *params, const int32_t *tokens, double *grads);

#endif
