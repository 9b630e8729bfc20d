/*
 * fuzz_api.c - libFuzzer over the public API's validation, on the CUDA fakes (tests/fake): no GPU needed. Each input
 * is read as a sequence of choices: which entry point (a block's eager call or forward, a graph's create and run, a
 * context's create with a config, gg_to_fp16, gg_check_finite), its desc fields (any int64, including negative and huge), its pointers (NULL,
 * misaligned, device, host, pinned, managed, overlapping) and the graph config's fields. Every call must return a gg_status, a
 * message on failure, and a rejected argument must enqueue nothing; ASan and UBSan watch the host code.
 *   scripts/test.sh runs it for GG_FUZZ_SECONDS (default 60); a crash input is written to the fuzz build folder.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "gradgraph.h"

typedef struct reader {
    const uint8_t *data;
    size_t size, at;
} reader;

static uint64_t take(reader *r, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = v << 8 | (r->at < r->size ? r->data[r->at++] : 0);
    return v;
}

/* A size: mostly small multiples of 8, sometimes anything. */
static int64_t size_of(reader *r) {
    const unsigned kind = (unsigned)take(r, 1) % 8;
    if (kind < 5) return (int64_t)(take(r, 1) + 1) * 8;
    if (kind == 5) return (int64_t)take(r, 2);
    return (int64_t)take(r, 8);
}

#define BASE(i) ((uintptr_t)0x100000000000ull * (uint64_t)((i) + 1))

/* A pointer for tensor slot i: device memory far from the others, or one of the bad kinds. */
static void *pointer_of(reader *r, int i) {
    switch ((unsigned)take(r, 1) % 16) {
    case 0: return NULL;
    case 1: return (void *)(BASE(i) + 4);                    /* misaligned */
    case 2: return (void *)(BASE(40) + 16 * (take(r, 1) % 4)); /* host memory */
    case 3: return (void *)(BASE(41) + 16 * (take(r, 1) % 4)); /* managed memory */
    case 4: return (void *)BASE(take(r, 1) % 16);            /* maybe another tensor's: overlap */
    default: return (void *)BASE(i);
    }
}

static gg_ctx *ctx;
static unsigned calls;

static void check_result(gg_status st, const gg_ctx *c) {
    if ((int)st < 0 || (int)st > (int)GG_ERROR_PARTIAL) abort();
    if (st == GG_SUCCESS) return;
    const char *msg = gg_last_error(c);
    if (!msg[0] && !gg_last_error(NULL)[0]) abort(); /* a failure always says why */
    const int rejected = st == GG_ERROR_INVALID_ARGUMENT || st == GG_ERROR_MISALIGNED || st == GG_ERROR_UNSUPPORTED ||
                         st == GG_ERROR_VERSION;
    if (rejected && fake.enqueued) { /* a rejected call enqueues nothing */
        fprintf(stderr, "enqueued %d by a call that failed: %s\n", fake.enqueued, msg[0] ? msg : gg_last_error(NULL));
        abort();
    }
}

static gg_status block_call(reader *r, int graph) {
    void *p[16]; /* blocks 2 and 3: the fp16 copies last, NULL half the time (any mode refuses them but fp16) */
    for (int i = 0; i < 16; ++i) p[i] = i >= 11 && take(r, 1) % 2 ? NULL : pointer_of(r, i);
    const int block = (int)(take(r, 1) % 4) + 1;
    const int64_t tokens = size_of(r), d0 = size_of(r), d1 = size_of(r);
    const gg_precision precision = (gg_precision)(int)(take(r, 1) % 7) - 1;
    const int accumulate = (int)(take(r, 1) % 3), silu = (int)(take(r, 1) % 2);
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    int64_t list[70]; /* a list holds the n_buckets entries the config says (the caller's side of the contract) */
    for (int i = 0; i < 70; ++i) list[i] = i < 4 ? size_of(r) : (int64_t)((uint64_t)list[i % 4] + (uint64_t)i);
    gc.policy = (gg_bucket_policy)(int)(take(r, 1) % 4);
    gc.bucket_tokens = take(r, 1) % 8 ? list : NULL;
    gc.n_buckets = (int)(take(r, 1) % 71) - 1;
    gc.min_tokens = size_of(r);
    gc.step = size_of(r);
    gc.max_tokens = size_of(r) % 100000;
    gc.allow_padding = (int)(take(r, 1) % 2);
    gc.execs_per_bucket = (int)(take(r, 1) % 6);
    gc.eager_beyond_max = (int)(take(r, 1) % 2);
    if (take(r, 1) % 16 == 0) gc.version = 99;
    gg_graph *g = NULL;
    gg_status st;
    fake.enqueued = 0;
    switch (block) {
    case 1: {
        gg_tanh_gate_desc d = {tokens, d0, accumulate};
        gg_tanh_gate_args a = {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
        if (!graph) return gg_tanh_gate_backward(ctx, &d, &a, NULL);
        st = gg_tanh_gate_graph_create(ctx, &d, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_tanh_gate_graph_run(g, &d, &a, NULL);
        break;
    }
    case 2: {
        gg_gelu_ffn_desc d = {tokens, d0, d1, precision, accumulate};
        gg_gelu_ffn_args a = {p[0], p[1], p[2], p[3], p[4],  p[5],  p[6],  p[7],
                              p[8], p[9], p[10], p[12], p[13], p[14], p[15]};
        if (!graph) return gg_gelu_ffn_backward(ctx, &d, &a, NULL);
        st = gg_gelu_ffn_graph_create(ctx, &d, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_gelu_ffn_graph_run(g, &d, &a, NULL);
        break;
    }
    case 3: {
        gg_mlp_desc d = {tokens, d0, d1, precision, accumulate};
        gg_mlp_args a = {p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6],  p[7],
                         p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]};
        if (!graph) return gg_mlp_backward(ctx, &d, &a, NULL);
        st = gg_mlp_graph_create(ctx, &d, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_mlp_graph_run(g, &d, &a, NULL);
        break;
    }
    default: {
        gg_ssm_gate_desc d = {tokens, d0, d1, silu, accumulate};
        gg_ssm_gate_args a = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
        if (!graph) return gg_ssm_gate_backward(ctx, &d, &a, NULL);
        st = gg_ssm_gate_graph_create(ctx, &d, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_ssm_gate_graph_run(g, &d, &a, NULL);
        break;
    }
    }
    gg_graph_destroy(g);
    return st;
}

/* A forward call (gg_*_forward) with fuzzed sizes, precision and pointers. */
static gg_status forward_call(reader *r) {
    void *p[12]; /* blocks 2 and 3: the fp16 copies last, NULL half the time */
    for (int i = 0; i < 12; ++i) p[i] = i >= 8 && take(r, 1) % 2 ? NULL : pointer_of(r, i);
    const int block = (int)(take(r, 1) % 4) + 1;
    const int64_t tokens = size_of(r), d0 = size_of(r), d1 = size_of(r);
    const gg_precision precision = (gg_precision)(int)(take(r, 1) % 7) - 1;
    const int silu = (int)(take(r, 1) % 2);
    fake.enqueued = 0;
    switch (block) {
    case 1: {
        const gg_tanh_gate_desc d = {tokens, d0, 0};
        const gg_tanh_gate_fwd_args a = {p[0], p[1], p[2], p[3], p[4]};
        return gg_tanh_gate_forward(ctx, &d, &a, NULL);
    }
    case 2: {
        const gg_gelu_ffn_desc d = {tokens, d0, d1, precision, 0};
        const gg_gelu_ffn_fwd_args a = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[8], p[9], p[10], p[11]};
        return gg_gelu_ffn_forward(ctx, &d, &a, NULL);
    }
    case 3: {
        const gg_mlp_desc d = {tokens, d0, d1, precision, 0};
        const gg_mlp_fwd_args a = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
        return gg_mlp_forward(ctx, &d, &a, NULL);
    }
    default: {
        const gg_ssm_gate_desc d = {tokens, d0, d1, silu, 0};
        const gg_ssm_gate_fwd_args a = {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
        return gg_ssm_gate_forward(ctx, &d, &a, NULL);
    }
    }
}

/* gg_to_fp16 or gg_check_finite with fuzzed pointers and counts (any size_t). */
static gg_status numerics_call(reader *r) {
    void *a = pointer_of(r, 0), *b = pointer_of(r, 1);
    const size_t count = take(r, 1) % 4 ? (size_t)take(r, 2) : (size_t)take(r, 8);
    fake.enqueued = 0;
    if (take(r, 1) % 2) return gg_to_fp16(ctx, a, b, count, NULL);
    return gg_check_finite(ctx, a, count, (int)(take(r, 1) % 2), b, NULL);
}

static gg_status ctx_create(reader *r) {
    gg_config c = GG_CONFIG_INIT;
    c.device = (int)(int8_t)take(r, 1) % 3;
    c.precision = (gg_precision)(int)(take(r, 1) % 7) - 1;
    c.log_level = (gg_log_level)(int)(take(r, 1) % 6) - 1;
    c.overlap = (gg_overlap)(int)(take(r, 1) % 5) - 1;
    c.gemm_workspace_bytes = (size_t)take(r, 1) << 12;
    c.autotune = 0;
    if (take(r, 1) % 16 == 0) c.struct_size = (size_t)take(r, 2);
    if (take(r, 1) % 16 == 0) c.version = (uint32_t)take(r, 1);
    gg_ctx *made = NULL;
    const gg_status st = gg_ctx_create(&c, &made);
    if ((st == GG_SUCCESS) != (made != NULL)) abort();
    gg_ctx_destroy(made);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    if (!ctx || ++calls % 1000 == 0) { /* a fresh context now and then: plans of new shapes accumulate */
        gg_ctx_destroy(ctx);
        fake_reset(2);
        gg_config c = GG_CONFIG_INIT;
        c.autotune = 0;
        if (gg_ctx_create(&c, &ctx) != GG_SUCCESS) abort();
    }
    fake.host_lo = BASE(40);
    fake.host_hi = BASE(40) + 64;
    fake.managed_lo = BASE(41);
    fake.managed_hi = BASE(41) + 64;
    fake.host_pinned = (int)(take(&r, 1) % 2);
    fake.enqueued = 0;
    switch ((unsigned)take(&r, 1) % 6) {
    case 0: check_result(ctx_create(&r), NULL); break;
    case 5: check_result(numerics_call(&r), ctx); break;
    case 1: check_result(block_call(&r, 1), ctx); break;
    case 4: check_result(forward_call(&r), ctx); break;
    default: check_result(block_call(&r, 0), ctx); break;
    }
    return 0;
}
