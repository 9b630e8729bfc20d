/* block_calls.h - one block call on the CUDA fakes, shared by the tests that drive every block the same way
 * (test_faults, test_routes): a call's shape, the call itself (eager, a graph run, or a device-selected graph run) on
 * fixed fake device addresses, and a graph with the call's tokens as its one bucket. */
#ifndef GG_TEST_BLOCK_CALLS_H
#define GG_TEST_BLOCK_CALLS_H

#include <stdint.h>

#include "gradgraph.h"

/* Distinct, 16-byte aligned fake device addresses, far apart so that no two tensors overlap. */
#define BLOCK_CALL_FAKE(i) ((void *)(uintptr_t)(0x100000000000ull * (uint64_t)((i) + 1)))
/* Where a device-selected graph's run reads M (device memory, as far as the fakes are concerned). */
#define BLOCK_CALL_DEVICE_TOKENS ((const int64_t *)BLOCK_CALL_FAKE(60))

typedef struct block_case {
    int block; /* 1..4 */
    int64_t tokens, dim0, dim1;
    gg_precision precision;
    int silu, accumulate;
    int copies; /* blocks 2/3 in fp16: 1, the four fp16 copies of the operands given (BLOCK_CALL_FAKE(40..43)); 2, the
                 * pre-activation's too (BLOCK_CALL_FAKE(44)) */
} block_case;

/* The call: eager on ctx (g NULL) or a run of graph g (`device`: gg_*_graph_run_device, M read from
 * BLOCK_CALL_DEVICE_TOKENS); the inputs at BLOCK_CALL_FAKE(0..), the outputs after them shifted by 20 * `out` (a
 * second pointer set rebinds a graph). */
gg_status block_call_run(gg_ctx *ctx, gg_graph *g, const block_case *c, int out, int device);

/* A graph of the call's block with its tokens as the one bucket (`device`: device-selected, which pads), one exec per
 * bucket (a second pointer set updates it in place). */
gg_status block_call_graph(gg_ctx *ctx, const block_case *c, int device, gg_graph **g);

#endif
