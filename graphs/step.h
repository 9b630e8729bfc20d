/*
 * step.h - step graphs (the public gg_step): a model's backward, an ordered list of block calls and callbacks,
 * captured as one CUDA graph per bucket. The public gg_step_add_<block> (src/api) hand the block's table to
 * gg_step_add_block; the rest of the public gg_step_* live in step.c.
 */
#ifndef GG_STEP_H
#define GG_STEP_H

#include "block.h"

/* Appends a call of the block `info` (desc and args of its public structs); `fn` names the public entry point. */
gg_status gg_step_add_block(gg_step *step, const gg_block_info *info, const char *fn, const void *desc,
                            const void *args);

/* Work that needs every earlier gradient final (an optimizer): run(user, stream) enqueues it on the step's main
 * stream once every earlier call's deferred weight-gradient work and every reduction launched so far have joined
 * it; its status ends the capture's enqueue. `fn` names the public entry point that adds it (for messages). */
/* The step's context (for the public adds' checks). */
gg_ctx *gg_step_context(const gg_step *step);

typedef gg_status (*gg_step_final_fn)(void *user, cudaStream_t stream);
gg_status gg_step_add_final(gg_step *step, const char *fn, gg_step_final_fn run, void *user);

#endif
