/*
 * optim.h - the fused optimizer (the public gg_optim): its host state and the layout of its device memory.
 *   optim.c       create (the config's checks), add_param (the parameter's checks), finalize, destroy, queries
 *   optim_step.c  what is enqueued: step, step_params, the setters; the device words and their synchronous read
 *   layout.c      chunk counts, the device block's layout and the host images of its tables (no CUDA: tested on
 *                 the CPU)
 */
#ifndef GG_OPTIM_H
#define GG_OPTIM_H

#include "internal.h"
#include "kernels/optim_kernels.h"

/* An optimizer's device memory, one allocation: byte offsets of its parts, each 256-byte aligned, and sizes. */
typedef struct gg_optim_layout {
    size_t scalars;     /* gg_k_optim_scalars */
    size_t steps;       /* int64_t per parameter */
    size_t partials;    /* double per chunk: the sums of squares */
    size_t params;      /* gg_k_optim_param per parameter */
    size_t chunks;      /* gg_k_optim_chunk per chunk */
    size_t state;       /* the moments, to the end */
    size_t table_bytes; /* [0, state): what finalize copies from the host */
    size_t state_bytes; /* [state, total): what finalize zeroes */
    size_t total;
} gg_optim_layout;

/* Moment tensors per parameter: AdamW 2 (exp_avg, exp_avg_sq), SGD with momentum 1 (the buffer), plain SGD 0. */
int gg_optim_moments(gg_optim_kind kind, float momentum);

/* Chunks of a parameter of count elements (GG_K_OPTIM_CHUNK each, the last one shorter). */
int64_t gg_optim_chunk_count(int64_t count);

/* fp32 words of one moment tensor of count elements: count rounded up to 4, so that each starts 16-byte aligned. */
int64_t gg_optim_moment_words(int64_t count);

/* The layout for n parameters (n_chunks chunks in all) with `moments` moment tensors each. */
void gg_optim_layout_make(const gg_optim_param *params, int n, int64_t n_chunks, int moments, gg_optim_layout *out);

/* The parameter and chunk tables (n and n_chunks entries) for a device block at `base` laid out as l: parameter i's
 * moments follow parameter i-1's (exp_avg then exp_avg_sq), its `vec` says whether every pointer allows 4-element
 * vectors, and its chunks follow the earlier parameters'. chunk_first (n + 1 entries): parameter i's chunks are
 * [chunk_first[i], chunk_first[i + 1]). */
void gg_optim_tables_fill(const gg_optim_param *params, int n, int moments, uintptr_t base, const gg_optim_layout *l,
                          gg_k_optim_param *out_params, gg_k_optim_chunk *out_chunks, int *chunk_first);

struct gg_optim {
    gg_ctx *ctx;
    gg_optim_config config; /* weight_decay resolved (never GG_OPTIM_DEFAULT_WEIGHT_DECAY) */
    gg_optim_param *params;
    int n_params, cap_params;
    int64_t elements, n_chunks;
    int *chunk_first;       /* n_params + 1 entries, made at finalize */
    int finalized;          /* 1: ready; -1: finalize failed (destroy only) */
    void *device;           /* the one allocation, laid out as `layout` */
    gg_optim_layout layout;
    int held_by_steps;      /* steps it was added to (gg_step_add_optimizer) that still exist */
    gg_ctx_hook hook;
};

/* The device words of a finalized optimizer. */
gg_k_optim_scalars *gg_optim_scalars(const gg_optim *opt);

/* gg_optim_step inside a step graph's capture (gg_step_add_optimizer): a refused launch fails the capture, which the
 * step discards, so nothing of the step runs and the failure is the launch's own status, never GG_ERROR_PARTIAL. */
gg_status gg_optim_step_captured(gg_optim *opt, cudaStream_t stream);

/* The same for parameters [first, first + count) (no claim; the range's rules are gg_optim_step_params'). */
gg_status gg_optim_step_range_captured(gg_optim *opt, int first, int count, cudaStream_t stream);

/* Whether parameters may be updated apart (neither clipping nor the finite check needs every gradient first). */
int gg_optim_updates_apart(const gg_optim *opt);

/* The parameter whose gradient is exactly `count` elements of elem_bytes at grad, or -1. */
int gg_optim_param_of(const gg_optim *opt, const void *grad, size_t count, int elem_bytes);

#endif
