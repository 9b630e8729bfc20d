/*
 * step.h - step graphs (the public gg_step): a model's backward, an ordered list of block calls and callbacks,
 * captured as one CUDA graph per bucket. The public gg_step_add_<block> (src/api) hand the block's table to
 * gg_step_add_block; the rest of the public gg_step_* live in step.c and the parts step_internal.h lists.
 */
#ifndef GG_STEP_H
#define GG_STEP_H

#include "block.h"

/* Appends a call of the block `info` (desc and args of its public structs); `fn` names the public entry point. */
gg_status gg_step_add_block(gg_step *step, const gg_block_info *info, const char *fn, const void *desc,
                            const void *args);

/* The step's context (for the public adds' checks). */
gg_ctx *gg_step_context(const gg_step *step);

/* Work that needs the step's gradients final (an optimizer), added as the step's call of kind "final":
 *   - run(user, stream) enqueues it on the step's main stream once every earlier call's deferred weight-gradient
 *     work and every reduction launched so far have joined it; its status ends the capture's enqueue;
 *   - begin(user) (may be NULL) is called when a capture of the step starts;
 *   - early (may be NULL), in a syncing step only: early(user, step, grad, stream) is called, while the step is
 *     captured, for each reduced gradient as soon as the bucket that completes it is launched, with `stream` the
 *     communication stream after that bucket (and after the main stream's work up to the gradient's producer, so the
 *     producer's reads of its weights are done, but beside every other call's work: gg_step_other_user says whether
 *     another block call touches what it would write): it may enqueue what needs only that gradient there, and run
 *     then does the rest;
 *   - whole_gradients: it needs every gradient whole and reduced (refused at finalize with reduce-scatter);
 *   - synced (may be NULL), in a syncing step only: synced(user, ctx, fn, grads, n) is called when the step is
 *     finalized, with every gradient the step reduces (so that what the final work reads beyond them can be said);
 *   - release(user) (may be NULL) frees user when the step is destroyed, or when the add fails. */
struct gg_reduce_grad;
typedef gg_status (*gg_step_final_fn)(void *user, cudaStream_t stream);
typedef gg_status (*gg_step_early_fn)(void *user, const gg_step *step, const struct gg_reduce_grad *grad,
                                      cudaStream_t stream);
typedef void (*gg_step_synced_fn)(void *user, gg_ctx *ctx, const char *fn, const struct gg_reduce_grad *grads,
                                  int n_grads);
typedef struct gg_step_final {
    gg_step_final_fn run;
    void (*begin)(void *user);
    gg_step_early_fn early;
    int whole_gradients;
    void (*release)(void *user);
    void *user;
    gg_step_synced_fn synced;
} gg_step_final;
/* `fn` names the public entry point that adds it (for messages). */
gg_status gg_step_add_final(gg_step *step, const char *fn, const gg_step_final *final);

/* The first block call of the step other than call `producer` with a tensor that shares a byte with [p, p + bytes)
 * (at the pointers the step holds now, the largest bucket's sizes), or -1: where an early update of a parameter
 * would run beside a call that reads it (weights tied between calls). */
int gg_step_other_user(const gg_step *step, int producer, const void *p, size_t bytes);

/* Test hooks, for tests/cpu/test_step_ring.c only (no public header names them; all are zero unless a test sets
 * them). before_block(block) is called while capturing, right before block call `block` enqueues its work, so that
 * a log of the enqueued work can be cut into calls. skip_slot_wait 1 drops the wait of a block call for the
 * deferred work of the call that used its scratch slot before it, and skip_callback_join 1 the wait of an eager call
 * inside a callback for the earlier calls' deferred work: the negative controls, whose graphs race. */
typedef struct gg_step_test_hooks {
    void (*before_block)(int block);
    int skip_slot_wait;
    int skip_callback_join;
} gg_step_test_hooks;
extern gg_step_test_hooks gg_step_test;

/* Scratch slot `slot` of a finalized step (for the test above): its scratch bytes and its reduction counters
 * (GG_COUNTER_REDUCTION_WORDS words), as op_res hands them to the block calls. Returns the number of slots (K). */
int gg_step_slot_region(const gg_step *step, int slot, void **scratch, size_t *scratch_bytes, void **counter,
                        size_t *counter_bytes);

#endif
