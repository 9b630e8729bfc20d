/*
 * blocks.h - the four blocks, each one table (gg_block_info, block.h) that the entry points hand to the generic
 * eager path (gg_block_eager) and graph machinery (graphs/graph.h); the forward passes' tables likewise.
 */
#ifndef GG_BLOCKS_H
#define GG_BLOCKS_H

#include "block.h"

extern const gg_block_info gg_tanh_gate_info; /* block 1, tanh_gate.c */
extern const gg_block_info gg_gelu_ffn_info;  /* block 2, ffn.c */
extern const gg_block_info gg_mlp_info;       /* block 3, ffn.c */
extern const gg_block_info gg_ssm_gate_info;  /* block 4, ssm_gate.c */

/* The forward passes (gg_*_forward), tables of the same kind run by the same eager path. */
extern const gg_block_info gg_tanh_gate_fwd_info; /* tanh_gate_forward.c */
extern const gg_block_info gg_gelu_ffn_fwd_info;  /* ffn_forward.c */
extern const gg_block_info gg_mlp_fwd_info;       /* ffn_forward.c */
extern const gg_block_info gg_ssm_gate_fwd_info;  /* ssm_gate_forward.c */

#endif
