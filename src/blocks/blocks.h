/*
 * blocks.h - the four blocks, each one table (gg_block_info, block.h) that the entry points hand to the generic
 * eager path (gg_block_backward) and graph machinery (graphs/graph.h).
 */
#ifndef GG_BLOCKS_H
#define GG_BLOCKS_H

#include "block.h"

extern const gg_block_info gg_tanh_gate_info; /* block 1, tanh_gate.c */
extern const gg_block_info gg_gelu_ffn_info;  /* block 2, ffn.c */
extern const gg_block_info gg_mlp_info;       /* block 3, ffn.c */
extern const gg_block_info gg_ssm_gate_info;  /* block 4, ssm_gate.c */

#endif
