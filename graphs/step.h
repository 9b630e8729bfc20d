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

#endif
