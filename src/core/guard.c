/* guard.c - misuse a context detects before it touches the GPU: host pointers where device memory is needed, buffers
 * that end before the call says (their last byte in no allocation), and a second thread inside a context another
 * thread is using. */
#include <stdio.h>
#include <string.h>

#include "block.h"

/* A token per thread: the address of a thread-local object is unique among the live threads. */
static _Thread_local char g_thread_token;

cudaError_t gg_pending_cuda_error(void) {
    const cudaError_t e = cudaPeekAtLastError();
    return e == cudaErrorNotReady ? cudaSuccess : e;
}

static gg_status claim(gg_ctx *ctx, const char *fn, int teardown);

gg_status gg_ctx_claim(gg_ctx *ctx, const char *fn) { return claim(ctx, fn, 0); }

gg_status gg_ctx_claim_teardown(gg_ctx *ctx, const char *fn) {
    /* A teardown synchronizes, or frees what a step being captured may hold: never inside a step's callback. */
    GG_TRY(gg_refuse_in_step_callback(ctx, fn));
    return claim(ctx, fn, 1);
}

gg_status gg_refuse_pending_cuda_error(gg_ctx *ctx, const char *fn) {
    const cudaError_t e = gg_pending_cuda_error();
    if (e == cudaSuccess) return GG_SUCCESS;
    /* Every launch of gradgraph's reads the runtime's last error, so the call would report this one as its own
     * failure, part of its work enqueued; and clearing it would hide the application's. Not cleared. */
    return gg_fail(ctx, GG_ERROR_CUDA,
                   "%s: a CUDA error is pending on this thread from earlier work that was not this call's: %s (%s); "
                   "read it with cudaGetLastError() (which clears it) and call again; if it stays (a sticky error: "
                   "an illegal address, a kernel that faulted), the process's CUDA context is unusable; nothing was "
                   "done",
                   fn, cudaGetErrorName(e), cudaGetErrorString(e));
}

void gg_clear_own_cuda_error(const gg_ctx *ctx) {
    if (!ctx->guard.entry_cuda_error) (void)cudaGetLastError();
}

static gg_status claim(gg_ctx *ctx, const char *fn, int teardown) {
    /* The call that logged may be half way through (a plan being built, a context about to be used again): a call
     * from the log callback could destroy or change what it is using. */
    if (gg_in_log_callback())
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT,
                       "%s: called from inside a gradgraph log callback: gradgraph calls are refused there (the call "
                       "that logged is still running); nothing was done",
                       fn);
    const uintptr_t self = (uintptr_t)&g_thread_token;
    uintptr_t owner = 0;
    if (atomic_compare_exchange_strong(&ctx->guard.owner, &owner, self)) {
        ctx->guard.depth = 1;
        ctx->guard.fn = fn;
        ctx->guard.entry_cuda_error = gg_pending_cuda_error() != cudaSuccess;
        if (!ctx->guard.entry_cuda_error || teardown) return GG_SUCCESS; /* a teardown frees what it can regardless */
        const gg_status status = gg_refuse_pending_cuda_error(ctx, fn); /* claimed: the context's message */
        gg_ctx_release(ctx);
        return status;
    }
    if (owner == self) {
        ctx->guard.depth++;
        return GG_SUCCESS;
    }
    /* The context's message belongs to the thread inside it: this one goes to the calling thread's own buffer. */
    return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT,
                   "%s: the context is in use by another thread (a context serves one thread at a time: make one "
                   "context per thread); nothing was done",
                   fn);
}

void gg_ctx_release(gg_ctx *ctx) {
    if (--ctx->guard.depth > 0) return;
    /* The call began with no error pending: one pending now is gradgraph's own, a CUDA call whose failure it
     * handled (or reported in its status), so the application's next call does not see it. A step's callbacks are
     * checked as they return (step_capture.c), so none of theirs reaches here. */
    gg_clear_own_cuda_error(ctx);
    atomic_store(&ctx->guard.owner, 0);
}

const char *gg_ctx_entry(const gg_ctx *ctx) {
    return atomic_load(&ctx->guard.owner) == (uintptr_t)&g_thread_token ? ctx->guard.fn : NULL;
}

int gg_ctx_claimed_elsewhere(const gg_ctx *ctx) {
    const uintptr_t owner = atomic_load(&ctx->guard.owner);
    return owner != 0 && owner != (uintptr_t)&g_thread_token;
}

/* p's first slot in the set: a 64-bit mix of the address (allocations are aligned: the low bits alone would
 * collide). */
static unsigned slot_of(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (unsigned)x & (GG_KNOWN_DEVICE_PTRS - 1);
}

static int known_device(const gg_guard *g, const void *p) {
    for (unsigned i = slot_of(p);; i = (i + 1) & (GG_KNOWN_DEVICE_PTRS - 1)) { /* ends: a quarter stays empty */
        if (g->known[i] == p) return 1;
        if (!g->known[i]) return 0;
    }
}

/* What memory p points into, and on which device (one driver query). */
static struct cudaPointerAttributes pointer_attributes(const void *p) {
    struct cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) { /* before CUDA 11 an unregistered pointer was an error */
        (void)cudaGetLastError();
        memset(&attr, 0, sizeof attr);
        attr.type = cudaMemoryTypeUnregistered;
    }
    return attr;
}

enum cudaMemoryType gg_memory_type(const void *p) { return pointer_attributes(p).type; }

static int gpu_addressable(enum cudaMemoryType type) {
    return type == cudaMemoryTypeDevice || type == cudaMemoryTypeManaged;
}

static void remember(gg_guard *g, const void *p) {
    if (g->n_known >= GG_KNOWN_DEVICE_PTRS / 4 * 3) {
        memset(g->known, 0, sizeof g->known);
        g->n_known = 0;
    }
    unsigned i = slot_of(p);
    while (g->known[i]) {
        if (g->known[i] == p) return;
        i = (i + 1) & (GG_KNOWN_DEVICE_PTRS - 1);
    }
    g->known[i] = p;
    ++g->n_known;
}

/* Whether p is memory the GPU can address as a kernel operand: managed memory, or device memory of the context's own
 * device (another device's faults in the kernels, a sticky error that ends the process's use of the GPU) (one driver
 * query). The message names it as prefix + name ("args->weight2"). */
static gg_status check_pointer(gg_ctx *ctx, const char *fn, const char *prefix, const char *name, const void *p) {
    const struct cudaPointerAttributes attr = pointer_attributes(p);
    const enum cudaMemoryType type = attr.type;
    if (type == cudaMemoryTypeDevice && attr.device >= 0 && attr.device != ctx->config.device)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: %s%s (%p) is memory of device %d, and the context is on device %d: gradgraph needs the "
                       "context's own device memory (or managed memory)",
                       fn, prefix, name, p, attr.device, ctx->config.device);
    if (gpu_addressable(type)) return GG_SUCCESS;
    return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s%s (%p) is %s memory; gradgraph needs device memory", fn,
                   prefix, name, p, type == cudaMemoryTypeHost ? "pinned host" : "host");
}

/* check_pointer once per pointer: the pointers found to be device memory are remembered. */
static gg_status check_remembered(gg_ctx *ctx, const char *fn, const char *prefix, const char *name, const void *p) {
    gg_guard *g = &ctx->guard;
    if (known_device(g, p)) return GG_SUCCESS;
    GG_TRY(check_pointer(ctx, fn, prefix, name, p));
    remember(g, p);
    return GG_SUCCESS;
}

/* check_remembered for the first and the last byte of [p, p + bytes); the message names it as prefix + name. */
static gg_status check_buffer(gg_ctx *ctx, const char *fn, const char *prefix, const char *name, const void *p,
                              size_t bytes) {
    GG_TRY(check_remembered(ctx, fn, prefix, name, p));
    if (bytes <= 1) return GG_SUCCESS;
    if ((uintptr_t)p > UINTPTR_MAX - (bytes - 1))
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s: %s%s (%p) and its %zu bytes run past the end of memory",
                       fn, prefix, name, p, bytes);
    const void *last = (const char *)p + (bytes - 1);
    gg_guard *g = &ctx->guard;
    if (known_device(g, last)) return GG_SUCCESS;
    if (!gpu_addressable(gg_memory_type(last)))
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s: the last byte of %s%s's %zu bytes (%p) is not device memory: the buffer is smaller than "
                       "the call says",
                       fn, prefix, name, bytes, last);
    remember(g, last);
    return GG_SUCCESS;
}

gg_status gg_check_device_pointers(gg_ctx *ctx, const char *fn, const gg_block_call *c) {
    for (int i = 0; i < c->info->n_tensors; ++i) {
        if (!gg_tensor_used(c, i)) continue;
        GG_TRY(check_buffer(ctx, fn, "args->", c->info->tensors[i].name, c->t[i], gg_tensor_bytes(c, i)));
    }
    return GG_SUCCESS;
}

gg_status gg_check_device_buffer(gg_ctx *ctx, const char *fn, const char *name, const void *p, size_t bytes) {
    return check_buffer(ctx, fn, "", name, p, bytes);
}

void gg_block_wait_forked(gg_ctx *ctx) {
    if (ctx->side) (void)cudaStreamSynchronize(ctx->side);
    if (ctx->aux) (void)cudaStreamSynchronize(ctx->aux);
    (void)cudaGetLastError();
}

gg_status gg_block_enqueue_failed(gg_ctx *ctx, const gg_block_call *c, gg_status status) {
    if (ctx->defer_fork_wait) (void)cudaGetLastError(); /* the caller waits, seeing GG_ERROR_PARTIAL */
    else gg_block_wait_forked(ctx);
    char grads[256] = "";
    size_t used = 0;
    int n_grads = 0;
    for (int i = 0; i < c->info->n_tensors && c->accumulate; ++i) {
        const gg_tensor_spec *s = &c->info->tensors[i];
        if (!s->is_output || s->rows == GG_EXT_TOKENS || used >= sizeof grads) continue;
        used += (size_t)snprintf(grads + used, sizeof grads - used, "%sargs->%s", used ? ", " : "", s->name);
        ++n_grads;
    }
    char cause[GG_MSG_BYTES]; /* what failed, without the name of the call it failed in (said first) */
    snprintf(cause, sizeof cause, "%s", gg_after_entry(ctx->last_error, gg_ctx_entry(ctx)));
    return gg_fail(ctx, GG_ERROR_PARTIAL,
                   "%s: failed after enqueueing part of its work, every output is undefined%s%s%s: %s: %s", c->info->fn,
                   used ? "; the accumulated " : "", grads,
                   !used ? "" : n_grads > 1 ? " hold an unknown part of this call: recompute them"
                                            : " holds an unknown part of this call: recompute it",
                   gg_status_string(status), cause);
}
