/*
 * step_internal.h - what the parts of a step graph share: the step itself (struct gg_step, its calls) and the
 * functions one part calls in another. The parts, in the order of a step's life:
 *   step.c           create, describe (the adds, gg_step_set_args), queries, destroy
 *   step_rules.c     what the calls may be (the chain's rules, the reduce entries, the optimizer last) and which
 *                    earlier call's deferred work a call must wait for
 *   step_finalize.c  the checks, a syncing step's reduction layout and agreement, the device state
 *   step_capture.c   one bucket's backward enqueued while capturing (the scratch ring, the side streams, the
 *                    reductions as gradients become final), and the graph a replay builds
 *   step_run.c       gg_step_run, gg_step_run_device, gg_step_debug_dot, gg_step_device_errors
 */
#ifndef GG_STEP_INTERNAL_H
#define GG_STEP_INTERNAL_H

#include "step.h"

#include "block.h"
#include "buckets.h"
#include "exec.h"
#include "step_reduce.h"

enum { KEY_ACCUMULATE = 1, KEY_PADDED = 2, KEY_DEVICE = 4, KEY_SYNC = 8, KEY_NO_UPDATE = 16 };

typedef enum { OP_BLOCK, OP_CALLBACK, OP_REDUCE, OP_FINAL } op_kind;

typedef struct step_op {
    op_kind kind;
    gg_block_call call; /* OP_BLOCK: dims, precision, pointers; tokens the largest bucket */
    int block;          /* OP_BLOCK: its index among the block calls (slot block % K, side stream block % S) */
    gg_step_callback_fn fn; /* OP_CALLBACK */
    int after_gradients;    /* OP_CALLBACK: runs once every gradient is final (gg_step_add_gradient_callback) */
    gg_step_final final;    /* OP_FINAL */
    void *user;
    void *grad;        /* OP_REDUCE: count elements of elem_bytes */
    size_t count;
    int elem_bytes;
    cudaEvent_t ev_join, ev_aux_join; /* the ends of its deferred branches */
    unsigned deferred;                /* while capturing: GG_DEFERRED_* of its enqueue */
    int joined;                       /* while capturing: the main stream waits for its deferred work already */
} step_op;

struct gg_step {
    gg_ctx *ctx;
    gg_step_config config;
    int n_buckets;
    int64_t buckets[GG_MAX_BUCKETS]; /* ascending */
    step_op *ops;
    int n_ops, cap_ops, n_blocks;
    int finalized; /* 1: runnable; -1: finalize failed (destroy only) */
    int sides, slots;
    cudaStream_t side[GG_STEP_MAX_SIDE_STREAMS], aux[GG_STEP_MAX_SIDE_STREAMS];
    void *workspace[GG_STEP_MAX_SIDE_STREAMS]; /* side stream k's: the context's second for k = 0, else the step's */
    void *ring;         /* slots 1 .. K-1 (slot 0 is the context's arena) */
    unsigned *counters; /* their reduction counters, GG_COUNTER_REDUCTION_WORDS each, zero between kernels */
    size_t slot_bytes, own_bytes;
    gg_ptrset_table ptrsets;  /* ids of the pointer sets the block calls have had (made at finalize) */
    const void **ptrset_row;  /* the current set, laid out for gg_ptrset_id */
    uint64_t ptrset;          /* its id; 0: to look up (gg_step_set_args changed a pointer) */
    gg_exec_cache execs[GG_MAX_BUCKETS];
    gg_exec_cache device_execs; /* the device-selected graphs (every bucket behind one SWITCH node) */
    int64_t *device_buckets;    /* the bucket sizes, for the device-side selection */
    unsigned *device_errors;    /* device-selected runs that found no bucket */
    gg_ctx_hook hook;
    /* reduction across ranks (finalized with a communicator and config.sync_gradients) */
    int reduces;             /* the step has a layout and reduces on runs with sync_on */
    int sync_on;             /* gg_step_set_sync: 1 (default) or 0 */
    int update_on;           /* gg_step_set_update: 1 (default) or 0 (the final work left out) */
    int warned_local_update; /* the WARN about an optimizer's update with sync off, said once per setting */
    int holds_nccl;          /* an exec captured NCCL work (counted in gg_dist_graph_holds) */
    uint64_t comm_generation; /* the attachment of the communicator finalize agreed on (gg_dist.generation) */
    gg_reduce_grad *grads;   /* every gradient to reduce, in production order (pointers refreshed at capture) */
    int n_grads;
    gg_reduce_layout layout;
    cudaEvent_t *bucket_waits; /* room for the events one bucket waits for: two per call (step_capture.c) */
};

/* The largest bucket's tokens: the rows every buffer of the step holds. */
static inline int64_t gg_step_max_tokens(const gg_step *s) { return s->buckets[s->n_buckets - 1]; }

/* ---- step_rules.c ---- */

/* Block call `later` against every earlier block call: parameter gradients written by one call only, an input that
 * overlaps an earlier call's activation gradient exactly that tensor. */
gg_status gg_step_check_chain(gg_step *s, const char *fn, int later);
/* gg_step_add_reduce's entries overlap neither a block call's parameter gradient nor each other. */
gg_status gg_step_check_reduce_entries(gg_step *s, const char *fn);
/* Whether op needs every gradient of the step final (an optimizer, a gradient callback). */
int gg_step_needs_gradients(const step_op *op);
/* Whether the step has work on the final gradients (an optimizer's step, a gradient callback): what update 0 leaves
 * out (gg_step_set_update). */
int gg_step_has_final_work(const gg_step *s);
/* A syncing step's block calls read or write no gradient an earlier call reduces. */
gg_status gg_step_check_reduced_uses(gg_step *s, const char *fn);
/* Work that needs every gradient final comes after every call that makes one. */
gg_status gg_step_check_final_last(gg_step *s, const char *fn);
/* Whether block call b must wait for the deferred work of the earlier block call a. */
int gg_step_hazard(const gg_block_call *a, const gg_block_call *b);
/* Every gradient the step reduces, in production order, into grads (NULL: only counts them); returns how many. */
int gg_step_list_grads(const gg_step *s, gg_reduce_grad *grads);

/* ---- step_capture.c ---- */

/* What a replay builds when its exec is missing: bucket b's step for `tokens` rows, or with device_tokens (b unused)
 * every bucket behind the device-side selection. */
typedef struct gg_step_build {
    gg_step *s;
    const char *fn;
    const gg_exec_key *key;
    int b;
    int64_t tokens;
    const int64_t *device_tokens;
    int accumulate;
} gg_step_build;
/* gg_exec_replay's build function: user is a gg_step_build. */
gg_status gg_step_build_graph(void *user, cudaGraph_t *graph);

#endif
