/* layout.c - the arithmetic of an optimizer's device memory: chunk counts, the offsets of its parts, and the host
 * images of the tables the kernels read. No CUDA here: the CPU tests check it. */
#include <string.h>

#include "optim.h"

int gg_optim_moments(gg_optim_kind kind, float momentum) {
    if (kind == GG_OPTIM_ADAMW) return 2;
    return momentum != 0.0f ? 1 : 0;
}

int64_t gg_optim_chunk_count(int64_t count) { return (count + GG_K_OPTIM_CHUNK - 1) / GG_K_OPTIM_CHUNK; }

int64_t gg_optim_moment_words(int64_t count) { return (count + 3) / 4 * 4; }

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

void gg_optim_layout_make(const gg_optim_param *params, int n, int64_t n_chunks, int moments, gg_optim_layout *out) {
    memset(out, 0, sizeof *out);
    size_t at = 0;
    out->scalars = at;
    at = align256(at + sizeof(gg_k_optim_scalars));
    out->steps = at;
    at = align256(at + sizeof(int64_t) * (size_t)n);
    out->partials = at;
    at = align256(at + sizeof(double) * (size_t)n_chunks);
    out->params = at;
    at = align256(at + sizeof(gg_k_optim_param) * (size_t)n);
    out->chunks = at;
    at = align256(at + sizeof(gg_k_optim_chunk) * (size_t)n_chunks);
    out->state = out->table_bytes = at;
    for (int i = 0; i < n; ++i)
        out->state_bytes += sizeof(float) * (size_t)moments * (size_t)gg_optim_moment_words(params[i].count);
    out->total = out->state + out->state_bytes;
}

static int aligned(const void *p, uintptr_t bytes) { return (uintptr_t)p % bytes == 0; }

/* Whether every tensor of the parameter allows the update's 4-element vectors (the moments always do). */
static int vector_ok(const gg_optim_param *p) {
    const uintptr_t grad_vec = p->grad_dtype == GG_OPTIM_BF16 ? 8 : 16;
    return aligned(p->param, 16) && aligned(p->grad, grad_vec) && (!p->copy || aligned(p->copy, 8));
}

static int32_t kernel_dtype(gg_optim_dtype t) {
    return t == GG_OPTIM_BF16 ? GG_DT_BF16 : t == GG_OPTIM_FP16 ? GG_DT_F16 : GG_DT_F32;
}

void gg_optim_tables_fill(const gg_optim_param *params, int n, int moments, uintptr_t base, const gg_optim_layout *l,
                          gg_k_optim_param *out_params, gg_k_optim_chunk *out_chunks, int *chunk_first) {
    uintptr_t state = base + l->state;
    int chunk = 0;
    for (int i = 0; i < n; ++i) {
        const gg_optim_param *p = &params[i];
        const uintptr_t words = (uintptr_t)gg_optim_moment_words(p->count) * sizeof(float);
        gg_k_optim_param k;
        memset(&k, 0, sizeof k);
        k.param = p->param;
        k.grad = p->grad;
        k.copy = p->copy;
        k.m = moments >= 1 ? (float *)state : NULL;
        k.v = moments >= 2 ? (float *)(state + words) : NULL;
        state += words * (uintptr_t)moments;
        k.count = p->count;
        k.grad_type = kernel_dtype(p->grad_dtype);
        k.copy_type = p->copy ? kernel_dtype(p->copy_dtype) : GG_DT_F32;
        k.decay = !p->no_weight_decay;
        k.vec = vector_ok(p);
        out_params[i] = k;
        chunk_first[i] = chunk;
        const int64_t chunks = gg_optim_chunk_count(p->count);
        for (int64_t c = 0; c < chunks; ++c) out_chunks[chunk++] = (gg_k_optim_chunk){.param = i, .index = (int32_t)c};
    }
    chunk_first[n] = chunk;
}

static size_t align8(size_t x) { return (x + 7) & ~(size_t)7; }

/* Where the parts after the header and the counts begin. */
static size_t state_scalars_at(int n) { return sizeof(gg_optim_state_header) + sizeof(uint64_t) * (size_t)n; }

size_t gg_optim_state_size_of(int n, int moments, int64_t elements) {
    return state_scalars_at(n) + align8(sizeof(gg_k_optim_scalars)) + sizeof(int64_t) * (size_t)n +
           sizeof(float) * (size_t)moments * (size_t)elements;
}

int gg_optim_state_pieces(const gg_optim_param *params, int n, int moments, const gg_optim_layout *l,
                          gg_optim_state_piece *out) {
    int k = 0;
    size_t saved = state_scalars_at(n), device = l->state;
#define PIECE(dev, len)                                                                                            \
    do {                                                                                                           \
        if (out) out[k] = (gg_optim_state_piece){(dev), saved, (len)};                                             \
        ++k;                                                                                                       \
        saved += (len);                                                                                            \
    } while (0)
    PIECE(l->scalars, sizeof(gg_k_optim_scalars));
    saved = align8(saved);
    PIECE(l->steps, sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < n; ++i) {
        /* the device keeps each moment tensor 16-byte aligned (gg_optim_moment_words); the state keeps count values */
        const size_t words = sizeof(float) * (size_t)gg_optim_moment_words(params[i].count);
        for (int j = 0; j < moments; ++j) PIECE(device + (size_t)j * words, sizeof(float) * (size_t)params[i].count);
        device += words * (size_t)moments;
    }
#undef PIECE
    return k;
}
