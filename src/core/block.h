/*
 * block.h - what the library knows about a block, in one table per block, and a call of it in one generic form.
 *
 * Every block describes its tensors once (gg_tensor_spec: name, shape in terms of the call's M and dims, element
 * size, input or output). From that one table come the argument checks, the eager path, and the graph machinery's
 * padding (which tensors have M rows) and rebinding (which pointers a graph captured). The table also says where
 * each pointer sits in the block's args struct (offsetof), and gg_desc_layout where the sizes sit in its desc, so
 * one generic gg_block_pack turns any block's public call into a gg_block_call.
 */
#ifndef GG_BLOCK_H
#define GG_BLOCK_H

#include "internal.h"
#include "plan.h"
#include "streams.h"

typedef enum gg_extent { GG_EXT_ONE = 0, GG_EXT_TOKENS, GG_EXT_DIM0, GG_EXT_DIM1 } gg_extent;

/* When a tensor is part of a call: always, only with use_silu_gate (NULL allowed otherwise), when its pointer is not
 * NULL (an optional input such as blocks 2/3's grad_residual), or when its pointer is not NULL in fp16 mode (an fp16
 * copy of an fp32 operand that the caller already has: given in another mode, the call is refused). An unread tensor
 * is required and validated like the first kind, but no kernel touches it (block 2's tanh_inner, which the API carries
 * for the forward's sake): graphs neither stage it nor key their executables on it. */
typedef enum gg_tensor_presence {
    GG_TENSOR_REQUIRED = 0,
    GG_TENSOR_SILU_ONLY = 1,
    GG_TENSOR_OPTIONAL = 2,
    GG_TENSOR_FP16_ONLY = 3,
    GG_TENSOR_UNREAD = 4
} gg_tensor_presence;

typedef struct gg_tensor_spec {
    const char *name; /* the args field, e.g. "grad_output" */
    gg_extent rows, cols;
    uint8_t elem_bytes;
    uint8_t is_output;
    uint8_t presence;  /* gg_tensor_presence: when the pointer may be NULL */
    size_t arg;        /* offsetof the pointer in the block's args struct */
} gg_tensor_spec;

/* A table row for the args field `field` of `args_type`: the field names the tensor in messages. */
#define GG_TENSOR(args_type, field, rows, cols, elem_bytes, is_output, presence)                                   \
    {#field, rows, cols, elem_bytes, is_output, presence, offsetof(args_type, field)}

/* Where a block's desc struct keeps what a call needs (offsetof each field; GG_NO_FIELD where the block has none). */
#define GG_NO_FIELD ((size_t)-1)
typedef struct gg_desc_layout {
    size_t tokens, dim0, dim1; /* int64_t fields; dim1 GG_NO_FIELD for a block with one hidden dim */
    size_t precision;          /* gg_precision; GG_NO_FIELD: GG_PRECISION_DEFAULT */
    size_t use_silu_gate;      /* int; GG_NO_FIELD: 0 */
    size_t accumulate;         /* int; GG_NO_FIELD: 0 (a forward pass, which has nothing to accumulate) */
} gg_desc_layout;

#define GG_BLOCK_MAX_TENSORS 17

typedef struct gg_block_call gg_block_call;

typedef gg_status (*gg_block_enqueue_fn)(gg_ctx *ctx, const gg_block_plan *plan, const gg_block_call *call,
                                         cudaStream_t stream);

typedef struct gg_block_info {
    gg_block_kind kind;
    const char *fn;        /* the eager entry point, for messages */
    int forward;           /* a forward pass: no graph of its own, never reduces gradients */
    int plan_in_capture;   /* build allocates, synchronizes and times nothing: a plan may be made inside a capture */
    const char *dim0_name; /* "desc->hidden" */
    const char *dim1_name; /* "desc->ffn"; NULL when the block has one hidden dim */
    int fp32_io;           /* the block has a precision mode (fp32 I/O) */
    int n_tensors;
    const gg_tensor_spec *tensors;
    gg_desc_layout desc;
    gg_plan_build_fn build;
    size_t plan_bytes; /* the block's plan struct (a gg_block_plan first: plan.h); 0: a plain gg_block_plan */
    gg_block_enqueue_fn enqueue;
    unsigned split_tensors; /* bit i: tensor i is a weight gradient the enqueue splits for the two-rank split
                               reduction when the plan says so (pair_split); 0: the block never splits */
} gg_block_info;

struct gg_block_call {
    const gg_block_info *info;
    int64_t tokens, dim0, dim1;
    gg_precision precision; /* resolved by gg_block_validate */
    int use_silu_gate;
    int accumulate; /* add the parameter gradients to the outputs instead of overwriting them */
    int sync_grads; /* reduce the parameter gradients across the context's ranks (graphs with a communicator) */
    /* The data-parallel part of a syncing call's plan key, handed down by its caller (the graph code asks the
     * communicator: gg_dist_hand_down); 0 for calls that do not sync. */
    int comm_sms;   /* SMs the GEMMs leave to communication */
    int pair_split; /* the communicator takes the two-rank split reduction of info->split_tensors */
    void *t[GG_BLOCK_MAX_TENSORS]; /* device pointers in the order of info->tensors; inputs are only read */
    const gg_exec_res *res; /* what the enqueue runs with (a step graph's call); NULL: the context's own */
};

/* The resources a call's enqueue runs with on `main`: *call->res, or the context's (gg_exec_res_ctx). */
static inline gg_exec_res gg_block_res(const gg_ctx *ctx, const gg_block_call *call, cudaStream_t main) {
    return call->res ? *call->res : gg_exec_res_ctx(ctx, main);
}

/* The device address of one of the plan's buffers in the scratch r runs with (gg_plan_buffer for the context's). */
static inline void *gg_res_buffer(const gg_exec_res *r, const gg_block_plan *plan, int index) {
    return (char *)r->scratch + plan->buffer[index];
}

/* ctx, desc and args of a public call must be non-NULL (with ctx NULL the message is in gg_last_error(NULL));
 * gg_check_desc checks ctx and desc only. */
gg_status gg_check_call(gg_ctx *ctx, const char *fn, const void *desc, const void *args);
gg_status gg_check_desc(gg_ctx *ctx, const char *fn, const void *desc);

/* A public call in generic form, from the block's desc and args structs (args NULL: every pointer NULL, a graph's
 * shape). No checks. */
void gg_block_pack(gg_block_call *call, const gg_block_info *info, const void *desc, const void *args);
/* The precision the desc asks for (GG_PRECISION_DEFAULT for blocks without the field). */
gg_precision gg_block_requested_precision(const gg_block_info *info, const void *desc);

/* The eager entry point of every block call, backward or forward: checks, packs, validates and runs the call on
 * stream. */
gg_status gg_block_eager(gg_ctx *ctx, const gg_block_info *info, const void *desc, const void *args,
                            cudaStream_t stream);

/* The size an extent stands for in a call. */
int64_t gg_extent_value(const gg_block_call *call, gg_extent extent);
/* A tensor's element count and byte size in a call. */
size_t gg_tensor_elems(const gg_block_call *call, int index);
size_t gg_tensor_bytes(const gg_block_call *call, int index);
/* Whether the call reads/writes tensor `index` (gg_tensor_presence: block 4's gate only with the silu gate, an
 * optional tensor when given, an fp16 copy when given in fp16 mode). */
int gg_tensor_used(const gg_block_call *call, int index);
/* Whether the call's kernels touch tensor `index`: used, and not GG_TENSOR_UNREAD. */
int gg_tensor_read(const gg_block_call *call, int index);
/* Whether tensor `index` may be read or written by some call of this shape and precision, whatever its pointers and
 * flags (use_silu_gate may change from call to call): not an fp16 copy outside fp16 mode, not GG_TENSOR_UNREAD. */
int gg_tensor_may_be_read(const gg_block_call *call, int index);

/* Checks the call's sizes, precision (requested: the desc's field) and every tensor (NULL, alignment, overlaps, and
 * device memory: gg_check_device_pointers); resolves precision. Nothing is enqueued. `fn` names the entry point in
 * messages. */
gg_status gg_block_validate(gg_ctx *ctx, const char *fn, gg_block_call *call, gg_precision requested);
/* The same without the tensors: sizes and precision only (a graph's shape). */
gg_status gg_block_validate_shape(gg_ctx *ctx, const char *fn, gg_block_call *call, gg_precision requested);
/* The output of the call that [p, p + bytes) overlaps (its table index), or -1: a device-side token count must not
 * lie in what the call writes, or kernels after the write would read another M. */
int gg_block_output_overlapping(const gg_block_call *call, const void *p, size_t bytes);

/* The cached plan for the call's shape, built on first use (never call this inside a stream capture). */
gg_status gg_block_plan_for(gg_ctx *ctx, const gg_block_call *call, gg_block_plan **out);
/* The key of a call's plan: its block, shape and precision, and its data-parallel part (comm_sms, pair_split). */
gg_plan_key gg_block_plan_key(const gg_block_call *call);

/* Every used tensor of the call is device (or managed) memory: one cudaPointerGetAttributes per pointer the context
 * has not seen before, a lookup in its cache otherwise (src/core/guard.c). */
gg_status gg_check_device_pointers(gg_ctx *ctx, const char *fn, const gg_block_call *call);

/* An eager call's enqueue failed with status (its message in ctx): waits for the context's own streams
 * (gg_block_wait_forked; with ctx->defer_fork_wait set, leaves that to the caller), and returns
 * GG_ERROR_PARTIAL with a message naming the cause and, for an accumulating call, the gradients to recompute. */
gg_status gg_block_enqueue_failed(gg_ctx *ctx, const gg_block_call *call, gg_status status);
/* Waits for the context's own streams (side, aux): whatever a failed eager call forked ends before it returns, so
 * that the next call cannot overlap it. */
void gg_block_wait_forked(gg_ctx *ctx);

/* The eager path: select the device, find the plan, enqueue on stream. The call is already validated. */
gg_status gg_block_run_eager(gg_ctx *ctx, const gg_block_call *call, cudaStream_t stream);
/* The eager path's plan made now, when it is new and stream is not being captured (a capturing stream is left to
 * gg_block_run_eager's own refusal), so that the run only looks it up: for a caller about to hold a lock that an
 * abort needs, since a new plan may free the scratch arena or time GEMMs, either of which waits for the device. */
gg_status gg_block_plan_ahead(gg_ctx *ctx, const gg_block_call *call, cudaStream_t stream);

#endif
