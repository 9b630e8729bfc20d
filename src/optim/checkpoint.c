/* checkpoint.c - checkpoints of an optimizer: its state (the moments, the step counts and the device words) saved
 * to host memory and loaded back, in the format optim.h describes. Everything a load reads from the buffer is checked
 * before anything reaches the device: the state of another optimizer, of another format, cut short, or holding values
 * no step writes is refused with a message, and the optimizer keeps its own state. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"

/* The offsets docs/optimizer.md's table gives, which programs that read or write states themselves rely on. */
_Static_assert(sizeof(gg_optim_state_header) == 64 && offsetof(gg_optim_state_header, params) == 20 &&
                   offsetof(gg_optim_state_header, check) == 40,
               "the state's header as documented");
_Static_assert(sizeof(gg_k_optim_scalars) == 32 && offsetof(gg_k_optim_scalars, found_inf) == 16,
               "the state's device words as documented");

static size_t state_size(const gg_optim *o) {
    return gg_optim_state_size_of(o->n_params, gg_optim_moments_of(o), o->elements);
}

static const char *kind_name(uint32_t kind, uint32_t moments) {
    if (kind == GG_OPTIM_ADAMW) return "AdamW";
    if (kind == GG_OPTIM_SGD) return moments ? "SGD with momentum" : "plain SGD";
    return "an unknown kind";
}

/* The buffer is host memory (pageable, pinned or managed): the host writes and reads its header and counts, so
 * device memory is refused. */
static gg_status check_host_buffer(gg_optim *o, const char *fn, const void *buffer) {
    if (!buffer) return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: buffer is NULL", fn);
    if (gg_memory_type(buffer) == cudaMemoryTypeDevice)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: buffer (%p) is device memory; a state is saved to and loaded from host memory", fn, buffer);
    return GG_SUCCESS;
}

/* What each piece holds, for a failed copy's message. */
static void piece_name(const gg_optim *o, int k, char *out, size_t bytes) {
    const int moments = gg_optim_moments_of(o);
    if (k == 0) {
        snprintf(out, bytes, "the device words");
    } else if (k == 1) {
        snprintf(out, bytes, "the step counts");
    } else {
        const int param = (k - 2) / moments, j = (k - 2) % moments;
        snprintf(out, bytes, "param %d's %s", param, moments == 1 ? "momentum buffer" : j ? "exp_avg_sq" : "exp_avg");
    }
}

/* The state's pieces (gg_optim_state_pieces), *n of them; NULL (and the message) when host memory runs out. */
static gg_optim_state_piece *make_pieces(gg_optim *o, const char *fn, int *n) {
    const int moments = gg_optim_moments_of(o);
    *n = gg_optim_state_pieces(o->params, o->n_params, moments, &o->layout, NULL);
    gg_optim_state_piece *pieces = malloc(sizeof *pieces * (size_t)*n);
    if (!pieces) {
        (void)gg_fail(o->ctx, GG_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        return NULL;
    }
    (void)gg_optim_state_pieces(o->params, o->n_params, moments, &o->layout, pieces);
    return pieces;
}

/* Copies the n pieces between the device block and the state at `state`: to the host, or to the device. */
static gg_status copy_pieces(gg_optim *o, const char *fn, const gg_optim_state_piece *pieces, int n, char *state,
                             int to_host) {
    char *device = o->device;
    for (int k = 0; k < n; ++k) {
        const gg_optim_state_piece *p = &pieces[k];
        const cudaError_t err = to_host ? cudaMemcpy(state + p->saved, device + p->device, p->bytes,
                                                     cudaMemcpyDeviceToHost)
                                        : cudaMemcpy(device + p->device, state + p->saved, p->bytes,
                                                     cudaMemcpyHostToDevice);
        if (err != cudaSuccess) {
            char what[160], name[64];
            piece_name(o, k, name, sizeof name);
            snprintf(what, sizeof what, "%s: cudaMemcpy of %s %s the device", fn, name, to_host ? "from" : "to");
            return gg_fail_cuda(o->ctx, err, what);
        }
    }
    return GG_SUCCESS;
}

uint64_t gg_optim_state_checksum(const void *state, size_t bytes) {
    const unsigned char *p = state;
    const size_t skip = offsetof(gg_optim_state_header, check);
    uint64_t sum = 0, i = 0;
    size_t at = 0;
    for (; at + 8 <= bytes; at += 8, ++i) {
        uint64_t w;
        memcpy(&w, p + at, sizeof w);
        sum += (at == skip ? 0 : w) * (2 * i + 1);
    }
    if (at < bytes) {
        uint64_t w = 0;
        memcpy(&w, p + at, bytes - at);
        sum += w * (2 * i + 1);
    }
    return sum;
}

/* ---- the size ---- */

gg_status gg_optim_state_size(const gg_optim *o, size_t *bytes) {
    const char *fn = "gg_optim_state_size";
    if (!o) return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT, "%s: opt is NULL", fn);
    GG_TRY(gg_ctx_claim(o->ctx, fn));
    gg_status status = bytes ? gg_optim_check_ready(o, fn)
                             : gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
    if (status == GG_SUCCESS) *bytes = state_size(o);
    gg_ctx_release(o->ctx);
    return status;
}

/* ---- save ---- */

static gg_status save_state(gg_optim *o, const char *fn, void *buffer, size_t bytes) {
    GG_TRY(gg_optim_check_ready(o, fn));
    GG_TRY(check_host_buffer(o, fn, buffer));
    const size_t size = state_size(o);
    if (bytes < size)
        return gg_fail(o->ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: bytes = %zu, but the state takes %zu bytes (gg_optim_state_size)", fn, bytes, size);
    int n = 0, saved = 0;
    gg_optim_state_piece *pieces = make_pieces(o, fn, &n);
    if (!pieces) return GG_ERROR_OUT_OF_MEMORY;
    gg_status status = gg_device_enter(o->ctx, fn, &saved);
    char *state = buffer;
    gg_optim_state_header h;
    memset(&h, 0, sizeof h);
    if (status == GG_SUCCESS) {
        memset(state, 0, sizeof h); /* no mark until every part is in: a save that fails cannot be loaded */
        for (int i = 0; i < o->n_params; ++i) { /* the buffer need not be 8-byte aligned */
            const uint64_t count = (uint64_t)o->params[i].count;
            memcpy(state + sizeof h + sizeof count * (size_t)i, &count, sizeof count);
        }
        const cudaError_t err = cudaDeviceSynchronize(); /* the steps enqueued before, on any stream */
        if (err != cudaSuccess)
            status = gg_fail_cuda(o->ctx, err, "gg_optim_save_state: waiting for the device");
        else
            status = copy_pieces(o, fn, pieces, n, state, 1);
        gg_device_leave(o->ctx, saved);
    }
    free(pieces);
    if (status != GG_SUCCESS) return status;
    memcpy(h.mark, GG_OPTIM_STATE_MARK, sizeof GG_OPTIM_STATE_MARK);
    h.format = GG_OPTIM_STATE_FORMAT;
    h.kind = (uint32_t)o->config.kind;
    h.moments = (uint32_t)gg_optim_moments_of(o);
    h.params = (uint32_t)o->n_params;
    h.elements = (uint64_t)o->elements;
    h.bytes = size;
    memcpy(state, &h, sizeof h);
    h.check = gg_optim_state_checksum(state, size);
    memcpy(state + offsetof(gg_optim_state_header, check), &h.check, sizeof h.check);
    return GG_SUCCESS;
}

gg_status gg_optim_save_state(gg_optim *o, void *buffer, size_t bytes) {
    const char *fn = "gg_optim_save_state";
    GG_TRY(gg_optim_enter(o, fn)); /* it synchronizes the device */
    const gg_status status = save_state(o, fn, buffer, bytes);
    gg_ctx_release(o->ctx);
    return status;
}

/* ---- load ---- */

int gg_optim_state_check(const gg_optim *o, const void *buffer, size_t bytes, char *why, size_t why_bytes) {
    gg_optim_state_header h;
    if (bytes < sizeof h) {
        snprintf(why, why_bytes, "bytes = %zu is less than a state's header (%zu bytes)", bytes, sizeof h);
        return 0;
    }
    memcpy(&h, buffer, sizeof h);
    if (memcmp(h.mark, GG_OPTIM_STATE_MARK, sizeof GG_OPTIM_STATE_MARK) != 0) {
        snprintf(why, why_bytes, "buffer holds no optimizer state (no \"%s\" mark at its start: not a state, or a save "
                 "that failed)", GG_OPTIM_STATE_MARK);
        return 0;
    }
    if (h.format != GG_OPTIM_STATE_FORMAT) {
        snprintf(why, why_bytes, "buffer holds a state of format %u; this gradgraph reads format %u", h.format,
                 GG_OPTIM_STATE_FORMAT);
        return -1;
    }
    const int moments = gg_optim_moments_of(o);
    if (h.kind != (uint32_t)o->config.kind || h.moments != (uint32_t)moments) {
        snprintf(why, why_bytes, "buffer holds the state of %s (%u moment tensors a parameter); opt is %s (%d)",
                 kind_name(h.kind, h.moments), h.moments, kind_name((uint32_t)o->config.kind, (uint32_t)moments),
                 moments);
        return 0;
    }
    if (h.params != (uint32_t)o->n_params) {
        snprintf(why, why_bytes, "buffer holds the state of %u parameters; opt has %d", h.params, o->n_params);
        return 0;
    }
    const size_t size = state_size(o);
    if (h.bytes != bytes || bytes != size) {
        snprintf(why, why_bytes, "bytes = %zu, the state says it takes %llu and opt's takes %zu (cut short, or not "
                 "this optimizer's)", bytes, (unsigned long long)h.bytes, size);
        return 0;
    }
    const char *state = buffer;
    for (int i = 0; i < o->n_params; ++i) {
        uint64_t count;
        memcpy(&count, state + sizeof h + sizeof count * (size_t)i, sizeof count);
        if (count != (uint64_t)o->params[i].count) {
            snprintf(why, why_bytes, "param %d has %llu elements in the state and %lld in opt", i,
                     (unsigned long long)count, (long long)o->params[i].count);
            return 0;
        }
    }
    if (gg_optim_state_checksum(buffer, bytes) != h.check) {
        snprintf(why, why_bytes, "the state's check word does not match its bytes: it was changed or damaged since it "
                 "was saved");
        return 0;
    }
    gg_optim_state_piece pieces[2]; /* the device words and the step counts come first */
    (void)gg_optim_state_pieces(o->params, o->n_params, 0, &o->layout, pieces);
    gg_k_optim_scalars s;
    memcpy(&s, state + pieces[0].saved, sizeof s);
    if (!(isfinite(s.lr) && s.lr >= 0.0f)) {
        snprintf(why, why_bytes, "the state's learning rate %g is not finite and >= 0", (double)s.lr);
        return 0;
    }
    if (!(isnormal(s.inv_scale) && s.inv_scale > 0.0f)) {
        snprintf(why, why_bytes, "the state's inverse loss scale %g is not a normal fp32 number > 0",
                 (double)s.inv_scale);
        return 0;
    }
    if (s.found_inf > 1) {
        snprintf(why, why_bytes, "the state's found-inf flag is %u, not 0 or 1", s.found_inf);
        return 0;
    }
    for (int i = 0; i < o->n_params; ++i) {
        int64_t steps;
        memcpy(&steps, state + pieces[1].saved + sizeof steps * (size_t)i, sizeof steps);
        if (steps < 0) {
            snprintf(why, why_bytes, "param %d's step count in the state is %lld, less than 0", i, (long long)steps);
            return 0;
        }
    }
    return 1;
}

static gg_status load_state(gg_optim *o, const char *fn, const void *buffer, size_t bytes) {
    GG_TRY(gg_optim_check_ready(o, fn));
    GG_TRY(check_host_buffer(o, fn, buffer));
    char why[256];
    const int ok = gg_optim_state_check(o, buffer, bytes, why, sizeof why);
    if (ok != 1) return gg_fail(o->ctx, ok < 0 ? GG_ERROR_VERSION : GG_ERROR_INVALID_ARGUMENT, "%s: %s", fn, why);
    int n = 0, saved = 0;
    gg_optim_state_piece *pieces = make_pieces(o, fn, &n);
    if (!pieces) return GG_ERROR_OUT_OF_MEMORY;
    gg_status status = gg_device_enter(o->ctx, fn, &saved);
    if (status != GG_SUCCESS) {
        free(pieces);
        return status;
    }
    cudaError_t err = cudaDeviceSynchronize(); /* the steps enqueued before, on any stream, end first */
    if (err != cudaSuccess) {
        status = gg_fail_cuda(o->ctx, err, "gg_optim_load_state: waiting for the device");
    } else {
        status = copy_pieces(o, fn, pieces, n, (char *)buffer, 0);
        /* a copy from pageable memory may return before it lands: the next step, on any stream, must see it */
        err = cudaDeviceSynchronize();
        if (status == GG_SUCCESS && err != cudaSuccess)
            status = gg_fail_cuda(o->ctx, err, "gg_optim_load_state: waiting for the copies");
        if (status != GG_SUCCESS) {
            char cause[GG_MSG_BYTES];
            snprintf(cause, sizeof cause, "%s", gg_after_entry(o->ctx->last_error, fn));
            status = gg_fail(o->ctx, GG_ERROR_PARTIAL,
                             "%s: failed after it began to write the state, which is now partly the buffer's and "
                             "partly the optimizer's own: load a state again before the next step: %s: %s", fn,
                             gg_status_string(status), cause);
        }
    }
    gg_device_leave(o->ctx, saved);
    free(pieces);
    return status;
}

gg_status gg_optim_load_state(gg_optim *o, const void *buffer, size_t bytes) {
    const char *fn = "gg_optim_load_state";
    GG_TRY(gg_optim_enter(o, fn)); /* it synchronizes the device */
    const gg_status status = load_state(o, fn, buffer, bytes);
    gg_ctx_release(o->ctx);
    return status;
}
