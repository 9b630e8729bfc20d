/*
 * optim.h - the fused optimizer (the public gg_optim): its host state and the layout of its device memory.
 *   optim.c       create (the config's checks), add_param (the parameter's checks), finalize, destroy, queries
 *   optim_step.c  what is enqueued: step, step_params, the setters; the device words and their synchronous read
 *   layout.c      chunk counts, the device block's layout and the host images of its tables, and where a saved
 *                 state's parts lie in that block (no CUDA: tested on the CPU)
 *   checkpoint.c  checkpoints: the saved state's format, its checks, save and load
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

/* A saved state (gg_optim_save_state), in this order, the parts before the moments 8-byte aligned:
 *   the header below;
 *   uint64_t counts[params]: each parameter's elements;
 *   gg_k_optim_scalars: the learning rate, 1 / the loss scale, the last norm, clipping coefficient and found-inf;
 *   int64_t steps[params]: each parameter's step count;
 *   the moments: parameter 0's exp_avg (count fp32 values) then its exp_avg_sq (AdamW) or its momentum buffer (SGD
 *   with momentum), then parameter 1's, ...
 * Host byte order. The format's number changes whenever this layout does. */
#define GG_OPTIM_STATE_MARK "GGOPTIM"
#define GG_OPTIM_STATE_FORMAT 1u
typedef struct gg_optim_state_header {
    char mark[8];         /* GG_OPTIM_STATE_MARK and a NUL, written last: a save that failed holds zeros here */
    uint32_t format;      /* GG_OPTIM_STATE_FORMAT */
    uint32_t kind;        /* gg_optim_kind */
    uint32_t moments;     /* moment tensors a parameter: 2, 1 or 0 (gg_optim_moments) */
    uint32_t params;      /* parameters */
    uint64_t elements;    /* their elements, summed */
    uint64_t bytes;       /* the whole state's size */
    uint64_t check;       /* gg_optim_state_checksum of the whole state */
    uint64_t reserved[2]; /* zero */
} gg_optim_state_header;

/* The check word of a state of `bytes` bytes: the sum, modulo 2^64, of w_i * (2 i + 1) over its 8-byte words w_i in
 * host byte order (i from 0; the last word padded with zero bytes), the header's `check` taken as 0. Any change of
 * one word changes it (2 i + 1 is odd), so a state damaged on its way through files and networks is refused. */
uint64_t gg_optim_state_checksum(const void *state, size_t bytes);

/* One part of a saved state as a copy: `bytes` between the device block's offset `device` and the state's offset
 * `saved`. */
typedef struct gg_optim_state_piece {
    size_t device, saved, bytes;
} gg_optim_state_piece;

/* The size of the state of n parameters with `moments` moment tensors each, `elements` elements in all. */
size_t gg_optim_state_size_of(int n, int moments, int64_t elements);

/* The pieces of such a state for the device block laid out as l (gg_optim_layout_make's, with the same params, n and
 * moments), in the state's order: the scalars, the step counts, then every moment tensor. Fills out (NULL: only
 * counts) and returns how many: 2 + n * moments. The header and the counts are not pieces: the host writes them. */
int gg_optim_state_pieces(const gg_optim_param *params, int n, int moments, const gg_optim_layout *l,
                          gg_optim_state_piece *out);

/* Whether the `bytes` bytes at buffer hold a state opt can load: 1; else the reason in why, and -1 for a state of
 * another format (GG_ERROR_VERSION), 0 for anything else. Reads the buffer only (host memory). */
int gg_optim_state_check(const gg_optim *opt, const void *buffer, size_t bytes, char *why, size_t why_bytes);

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

/* The start of the entries that may not run inside a step's callback (they allocate, or wait for the device): opt not
 * NULL, not inside a callback, its context claimed (the caller releases it: gg_ctx_release). Else the refusal,
 * naming fn, and nothing claimed. */
gg_status gg_optim_enter(gg_optim *opt, const char *fn);

/* GG_SUCCESS for a finalized optimizer; else GG_ERROR_INVALID_ARGUMENT, naming fn and what to do. */
gg_status gg_optim_check_ready(const gg_optim *opt, const char *fn);

/* opt's moment tensors a parameter (gg_optim_moments of its config). */
int gg_optim_moments_of(const gg_optim *opt);

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
