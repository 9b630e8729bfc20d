/*
 * fuzz_api.c - libFuzzer over the public API's validation, on the CUDA fakes (tests/fake): no GPU needed. Each input is
 * read as a sequence of choices: which entry point (a block's eager call or forward, a graph's create and run, a step's
 * life (create, adds, finalize, runs, its DOT), an optimizer's (create, parameters, finalize, setters, steps, a
 * checkpoint saved, changed and loaded), a context's create with a config, gg_to_fp16, gg_check_finite), its desc
 * fields (any int64, including negative and huge), its pointers (NULL, misaligned, device, host, pinned, managed, overlapping), the configs' fields and floats
 * (NaN, Inf, out of range), and in a quarter of the inputs which call of the CUDA fakes fails (the k-th of a kind,
 * host memory among them; in an eighth, the k-th CUDA resource made; in one of 32, every cudaGetDevice). Every call
 * must return a gg_status, a message on failure that begins with the public call's name, and a rejected argument
 * must enqueue nothing; ASan (leaks included) and UBSan watch the host code.
 *   scripts/test.sh runs it for GG_FUZZ_SECONDS (default 60); a crash input is written to the fuzz build folder.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "gradgraph.h"
#include "optim.h" /* a saved state's check word */
#ifdef GG_FUZZ_DIST
#include "fake_nccl.h"
#endif

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
    const char *said = msg[0] ? msg : gg_last_error(NULL);
    if (strncmp(said, "gg_", 3) != 0) { /* ... beginning with the public call that failed */
        fprintf(stderr, "a message that does not name its call: %s\n", said);
        abort();
    }
    const int rejected = st == GG_ERROR_INVALID_ARGUMENT || st == GG_ERROR_MISALIGNED || st == GG_ERROR_UNSUPPORTED ||
                         st == GG_ERROR_VERSION;
    if (rejected && fake.enqueued) { /* a rejected call enqueues nothing */
        fprintf(stderr, "enqueued %d by a call that failed: %s\n", fake.enqueued, msg[0] ? msg : gg_last_error(NULL));
        abort();
    }
}

/* One block's desc and args, fuzzed: sizes, precision, flags and pointers (the same for an eager call, a graph and a
 * step's call). */
typedef struct fuzz_block {
    int block; /* 1..4 */
    gg_tanh_gate_desc d1;
    gg_tanh_gate_args a1;
    gg_gelu_ffn_desc d2;
    gg_gelu_ffn_args a2;
    gg_mlp_desc d3;
    gg_mlp_args a3;
    gg_ssm_gate_desc d4;
    gg_ssm_gate_args a4;
} fuzz_block;

static void take_block(reader *r, fuzz_block *b) {
    void *p[16]; /* blocks 2 and 3: the fp16 copies last, NULL half the time (any mode refuses them but fp16) */
    for (int i = 0; i < 16; ++i) p[i] = i >= 11 && take(r, 1) % 2 ? NULL : pointer_of(r, i);
    b->block = (int)(take(r, 1) % 4) + 1;
    const int64_t tokens = size_of(r), d0 = size_of(r), d1 = size_of(r);
    const gg_precision precision = (gg_precision)(int)(take(r, 1) % 7) - 1;
    const int accumulate = (int)(take(r, 1) % 3), silu = (int)(take(r, 1) % 2);
    b->d1 = (gg_tanh_gate_desc){tokens, d0, accumulate};
    b->a1 = (gg_tanh_gate_args){p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
    b->d2 = (gg_gelu_ffn_desc){tokens, d0, d1, precision, accumulate};
    b->a2 = (gg_gelu_ffn_args){p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6], p[7],
                               p[8], p[9], p[10], p[12], p[13], p[14], p[15]};
    b->d3 = (gg_mlp_desc){tokens, d0, d1, precision, accumulate};
    b->a3 = (gg_mlp_args){p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6],  p[7],
                          p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]};
    b->d4 = (gg_ssm_gate_desc){tokens, d0, d1, silu, accumulate};
    b->a4 = (gg_ssm_gate_args){p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
}

/* Bucket fields shared by gg_graph_config and gg_step_config, fuzzed; list holds the n_buckets entries the config
 * says (the caller's side of the contract). */
#define TAKE_BUCKETS(r, c, list)                                                                                   \
    do {                                                                                                           \
        for (int i_ = 0; i_ < 70; ++i_)                                                                            \
            (list)[i_] = i_ < 4 ? size_of(r) : (int64_t)((uint64_t)(list)[i_ % 4] + (uint64_t)i_);                 \
        (c).policy = (gg_bucket_policy)(int)(take(r, 1) % 4);                                                      \
        (c).bucket_tokens = take(r, 1) % 8 ? (list) : NULL;                                                        \
        (c).n_buckets = (int)(take(r, 1) % 71) - 1;                                                                \
        (c).min_tokens = size_of(r);                                                                               \
        (c).step = size_of(r);                                                                                     \
        (c).max_tokens = size_of(r) % 100000;                                                                      \
        (c).allow_padding = (int)(take(r, 1) % 2);                                                                 \
        (c).execs_per_bucket = (int)(take(r, 1) % 6);                                                              \
    } while (0)

/* The rest of a made graph's life after its run: a device-selected run (any device_tokens pointer), and the
 * queries (any bucket: memory, DOT to a path that is NULL, empty, writable or not, the device-side errors, the
 * buckets); every call checked as it returns. */
static void graph_life(reader *r, gg_graph *g, const fuzz_block *b) {
    const int64_t *device_tokens = (const int64_t *)pointer_of(r, 30);
    fake.enqueued = 0;
    const gg_status st = b->block == 1   ? gg_tanh_gate_graph_run_device(g, &b->d1, device_tokens, &b->a1, NULL)
                         : b->block == 2 ? gg_gelu_ffn_graph_run_device(g, &b->d2, device_tokens, &b->a2, NULL)
                         : b->block == 3 ? gg_mlp_graph_run_device(g, &b->d3, device_tokens, &b->a3, NULL)
                                         : gg_ssm_gate_graph_run_device(g, &b->d4, device_tokens, &b->a4, NULL);
    check_result(st, ctx);
    const int bucket = (int)(take(r, 1) % 8) - 2;
    gg_graph_memory mem;
    fake.enqueued = 0;
    check_result(gg_graph_memory_info(g, bucket, take(r, 1) % 8 ? &mem : NULL), ctx);
    static const char *const paths[] = {NULL, "", "/tmp/gg_fuzz_graph.dot", "/nonexistent-gg-dir/graph.dot"};
    fake.enqueued = 0;
    gg_status dot = gg_graph_debug_dot(g, bucket, paths[take(r, 1) % 4], (int)(take(r, 1) % 2));
    /* a path found unwritable only after the capture: the captured graph is discarded, nothing launched */
    if (dot == GG_ERROR_INVALID_ARGUMENT && strstr(gg_last_error(ctx), "cannot be written")) fake.enqueued = 0;
    check_result(dot, ctx);
    unsigned errors = 0;
    fake.enqueued = 0;
    check_result(gg_graph_device_errors(g, take(r, 1) % 8 ? &errors : NULL), ctx);
    for (int i = -1; i <= gg_graph_bucket_count(g); ++i) (void)gg_graph_bucket_tokens(g, i);
}

static gg_status block_call(reader *r, int graph) {
    fuzz_block b;
    take_block(r, &b);
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    int64_t list[70];
    TAKE_BUCKETS(r, gc, list);
    gc.eager_beyond_max = (int)(take(r, 1) % 2);
    gc.device_select = (int)(take(r, 1) % 3) - (take(r, 1) % 8 == 0); /* mostly 0 or 1, sometimes out of range */
    if (take(r, 1) % 16 == 0) gc.version = 99;
    gg_graph *g = NULL;
    gg_status st;
    fake.enqueued = 0;
    switch (b.block) {
    case 1:
        if (!graph) return gg_tanh_gate_backward(ctx, &b.d1, &b.a1, NULL);
        st = gg_tanh_gate_graph_create(ctx, &b.d1, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_tanh_gate_graph_run(g, &b.d1, &b.a1, NULL);
        break;
    case 2:
        if (!graph) return gg_gelu_ffn_backward(ctx, &b.d2, &b.a2, NULL);
        st = gg_gelu_ffn_graph_create(ctx, &b.d2, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_gelu_ffn_graph_run(g, &b.d2, &b.a2, NULL);
        break;
    case 3:
        if (!graph) return gg_mlp_backward(ctx, &b.d3, &b.a3, NULL);
        st = gg_mlp_graph_create(ctx, &b.d3, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_mlp_graph_run(g, &b.d3, &b.a3, NULL);
        break;
    default:
        if (!graph) return gg_ssm_gate_backward(ctx, &b.d4, &b.a4, NULL);
        st = gg_ssm_gate_graph_create(ctx, &b.d4, &gc, &g);
        check_result(st, ctx);
        if (st == GG_SUCCESS) fake.enqueued = 0, st = gg_ssm_gate_graph_run(g, &b.d4, &b.a4, NULL);
        break;
    }
    if (g) { /* the run checked here: the caller's check of st must not see the life's work */
        check_result(st, ctx);
        graph_life(r, g, &b);
        fake.enqueued = 0;
    }
    gg_graph_destroy(g);
    return st;
}

/* A float: mostly a plausible value (or one just outside the range), sometimes any bits. */
static float float_of(reader *r) {
    static const float plausible[] = {0.0f, 1e-8f, 1e-3f, 0.1f, 0.5f, 0.9f, 0.999f, 1.0f, 2.0f, -0.5f, -1.0f, 65504.0f};
    const unsigned kind = (unsigned)take(r, 1);
    if (kind % 4) return plausible[kind % (sizeof plausible / sizeof plausible[0])];
    const uint32_t bits = (uint32_t)take(r, 4);
    float f;
    memcpy(&f, &bits, sizeof f); /* NaN, Inf, subnormals, anything */
    return f;
}

/* A fuzzed optimizer on context `on`: its config, up to three fuzzed parameters, finalized (every call checked as it
 * returns); *out NULL when its creation failed (the status returned then). */
static gg_status fuzzed_optim(reader *r, gg_ctx *on, gg_optim **out) {
    gg_optim_config oc = GG_OPTIM_CONFIG_INIT;
    oc.kind = (gg_optim_kind)(int)(take(r, 1) % 4) - 1;
    if (take(r, 1) % 2) oc.lr = float_of(r);
    if (take(r, 1) % 4 == 0) oc.beta1 = float_of(r), oc.beta2 = float_of(r), oc.eps = float_of(r);
    if (take(r, 1) % 4 == 0) oc.weight_decay = float_of(r);
    if (take(r, 1) % 4 == 0) oc.momentum = float_of(r), oc.dampening = float_of(r), oc.nesterov = (int)take(r, 1) % 2;
    if (take(r, 1) % 4 == 0) oc.max_grad_norm = float_of(r);
    oc.check_finite = (int)(take(r, 1) % 3);
    if (take(r, 1) % 16 == 0) oc.version = 99;
    gg_optim *opt = NULL;
    fake.enqueued = 0;
    gg_status st = gg_optim_create(on, take(r, 1) % 8 ? &oc : NULL, &opt);
    if ((st == GG_SUCCESS) != (opt != NULL)) abort();
    *out = opt;
    if (st != GG_SUCCESS) return st;
    for (int n = (int)(take(r, 1) % 4), i = 0; i < n; ++i) {
        gg_optim_param p = {0};
        p.param = (float *)pointer_of(r, 3 * i);
        p.grad = pointer_of(r, 3 * i + 1);
        p.grad_dtype = (gg_optim_dtype)(int)(take(r, 1) % 4) - 1;
        /* counts a device could hold, or the extremes (larger valid ones only grow the host tables: test_optim_api) */
        static const int64_t extremes[] = {INT64_MAX, INT64_MIN, -1, (int64_t)1 << 62};
        p.count = take(r, 1) % 8 ? (int64_t)take(r, 3) - 8 : extremes[take(r, 1) % 4];
        p.copy = take(r, 1) % 2 ? pointer_of(r, 3 * i + 2) : NULL;
        p.copy_dtype = (gg_optim_dtype)(int)(take(r, 1) % 4) - 1;
        p.no_weight_decay = (int)(take(r, 1) % 2);
        fake.enqueued = 0;
        check_result(gg_optim_add_param(opt, take(r, 1) % 16 ? &p : NULL), on);
    }
    fake.enqueued = 0;
    check_result(gg_optim_finalize(opt), on);
    return GG_SUCCESS;
}

static void no_work(void *user, gg_stream stream, int64_t tokens) { (void)user, (void)stream, (void)tokens; }

/* A callback that runs one of gradgraph's eager calls on its stream (block 1's forward, which plans nothing and so
 * runs in a capture at any shape): the step makes it wait for the earlier calls' weight-gradient work first. Its
 * fuzzed hidden size and tensors; the call's status is the callback's business. */
typedef struct eager_in_callback {
    gg_ctx *ctx; /* the step's */
    int64_t hidden;
    gg_tanh_gate_fwd_args args;
} eager_in_callback;
static eager_in_callback callback_calls[4];

static void eager_work(void *user, gg_stream stream, int64_t tokens) {
    const eager_in_callback *e = user;
    const gg_tanh_gate_desc d = {tokens, e->hidden, 0};
    (void)gg_tanh_gate_forward(e->ctx, &d, &e->args, stream);
}

/* A step run (or capture again) that a callback's failed gradgraph call failed: its capture held the work before the
 * callback and is discarded, nothing launched; what the fakes counted as enqueued there never ran. */
static void discarded_capture(gg_status st, const gg_ctx *on) {
    if (st != GG_SUCCESS && strstr(gg_last_error(on), "inside the callback of call")) fake.enqueued = 0;
}

/* A step's life on context `on` with fuzzed pieces: its config, up to four adds (block calls, callbacks, gradient
 * callbacks, reductions, an optimizer), finalize, a host- and a device-selected run; every call checked as it
 * returns. On a context with a communicator the step may reduce its gradients (dist_call). */
static gg_status step_life(reader *r, gg_ctx *on) {
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    int64_t list[70];
    TAKE_BUCKETS(r, sc, list);
    sc.side_streams = (int)(take(r, 1) % 7) - 1;
    sc.scratch_slots = (int)(take(r, 1) % 11) - 1;
    sc.sync_gradients = (int)(take(r, 1) % 3);
    if (take(r, 1) % 16 == 0) sc.version = 99;
    gg_step *step = (gg_step *)&list; /* must be NULL after a failed create */
    fake.enqueued = 0;
    gg_status st = gg_step_create(on, take(r, 1) % 8 ? &sc : NULL, &step);
    if ((st == GG_SUCCESS) != (step != NULL)) abort();
    if (st != GG_SUCCESS) return st;
    int kinds[4] = {0}; /* the block of each call added (0: a callback or a reduction), for gg_step_set_args */
    gg_optim *step_opts[4] = {NULL}; /* the optimizers made for the adds, destroyed after the step */
    int n_calls = 0;
    for (int n = (int)(take(r, 1) % 5), i = 0; i < n; ++i) {
        fake.enqueued = 0;
        int kind = 0;
        switch ((unsigned)take(r, 1) % 5) {
        case 4: { /* an optimizer's step, or none (NULL); the optimizer outlives the step */
            gg_optim *opt = NULL;
            check_result(fuzzed_optim(r, on, &opt), on);
            step_opts[i] = opt;
            fake.enqueued = 0;
            st = gg_step_add_optimizer(step, take(r, 1) % 8 ? opt : NULL);
            break;
        }
        case 0: {
            const unsigned which = (unsigned)take(r, 1) % 6; /* 4, 5: a gradient callback */
            eager_in_callback *e = &callback_calls[i];
            if (which % 4 == 1) /* tensors of their own (at or near slots 24-28), or bad ones */
                *e = (eager_in_callback){on, size_of(r), {pointer_of(r, 24), pointer_of(r, 25), pointer_of(r, 26),
                                                          pointer_of(r, 27), pointer_of(r, 28)}};
            gg_step_callback_fn fn = which == 0 ? NULL : which % 4 == 1 ? eager_work : no_work;
            st = (which >= 4 ? gg_step_add_gradient_callback : gg_step_add_callback)(step, fn, e);
            break;
        }
        case 1: {
            void *grad = pointer_of(r, 20 + i);
            const size_t count = take(r, 1) % 4 ? (size_t)take(r, 2) : (size_t)take(r, 8);
            st = gg_step_add_reduce(step, grad, count, (int)(take(r, 1) % 2));
            break;
        }
        default: {
            fuzz_block b;
            take_block(r, &b);
            st = b.block == 1   ? gg_step_add_tanh_gate(step, &b.d1, &b.a1)
                 : b.block == 2 ? gg_step_add_gelu_ffn(step, &b.d2, &b.a2)
                 : b.block == 3 ? gg_step_add_mlp(step, &b.d3, &b.a3)
                                : gg_step_add_ssm_gate(step, &b.d4, &b.a4);
            kind = b.block;
            break;
        }
        }
        check_result(st, on);
        if (st == GG_SUCCESS) kinds[n_calls++] = kind; /* a refused reduction is no call; an added one is */
    }
    fake.enqueued = 0;
    st = gg_step_finalize(step);
    /* A syncing step's finalize is collective: refused by its own checks it still takes part in the ranks' agreement,
     * so that the others learn of the failure instead of waiting (gg_dist_all_ok, and with the checks passed the
     * fingerprints: two copies of gradgraph's own words each, on its communication stream, waited for). */
    if (st != GG_SUCCESS && gg_dist_comm(on) && fake.enqueued <= 4) fake.enqueued = 0;
    check_result(st, on);
    gg_step_memory mem;
    fake.enqueued = 0;
    check_result(gg_step_memory_info(step, take(r, 1) % 8 ? &mem : NULL), on);
    fake.enqueued = 0;
    check_result(gg_step_set_sync(step, (int)(take(r, 1) % 3)), on);
    fake.enqueued = 0;
    check_result(gg_step_set_update(take(r, 1) % 16 ? step : NULL, (int)(take(r, 1) % 3)), on);
    { /* new pointers for one call: its own block's args (the contract), or NULL, or an index out of range */
        const int index = (int)(take(r, 1) % 6) - 1;
        fuzz_block b;
        take_block(r, &b);
        const int kind = index >= 0 && index < n_calls ? kinds[index] : 0;
        const void *args = kind == 1 ? (const void *)&b.a1 : kind == 2 ? (const void *)&b.a2
                           : kind == 3 ? (const void *)&b.a3 : kind == 4 ? (const void *)&b.a4 : NULL;
        fake.enqueued = 0;
        if (kind || take(r, 1) % 2) check_result(gg_step_set_args(step, index, take(r, 1) % 8 ? args : NULL), on);
    }
    const int64_t tokens = take(r, 1) % 4 ? size_of(r) % 5000 : (int64_t)take(r, 8);
    const int accumulate = (int)(take(r, 1) % 3);
    fake.enqueued = 0;
    st = gg_step_run(step, tokens, accumulate, NULL);
    discarded_capture(st, on);
    check_result(st, on);
    fake.enqueued = 0;
    st = gg_step_run_device(step, (const int64_t *)pointer_of(r, 30), accumulate, NULL);
    discarded_capture(st, on);
    check_result(st, on);
    { /* what a bucket's replay runs, as DOT: any bucket, a path that is NULL, empty, writable or not */
        static const char *const paths[] = {NULL, "", "/tmp/gg_fuzz_step.dot", "/nonexistent-gg-dir/step.dot"};
        const int bucket = (int)(take(r, 1) % 8) - 2;
        fake.enqueued = 0;
        st = gg_step_debug_dot(step, bucket, paths[take(r, 1) % 4], (int)(take(r, 1) % 2));
        /* a path found unwritable only after the capture: the captured graph is discarded, nothing launched */
        if (st == GG_ERROR_INVALID_ARGUMENT && strstr(gg_last_error(on), "cannot be written")) fake.enqueued = 0;
        discarded_capture(st, on);
        check_result(st, on);
    }
    unsigned errors = 0;
    fake.enqueued = 0;
    st = gg_step_device_errors(step, take(r, 1) % 8 ? &errors : NULL);
    gg_step_destroy(step);
    for (int i = 0; i < 4; ++i) gg_optim_destroy(step_opts[i]);
    return st;
}

static gg_status step_call(reader *r) { return step_life(r, ctx); }

/* A checkpoint of a finalized optimizer: its state saved to host memory, a few bytes (or its length) changed by the
 * input, half the time with the check word made anew, loaded back. The fakes' copies to the host write zeros, so the
 * device words (docs/optimizer.md's format: after the 64-byte header and a count per parameter) are first set to what
 * a step leaves there. A refused load must
 * copy nothing; no input may crash it or make it read past the state. */
static void checkpoint(reader *r, gg_optim *opt) {
    size_t bytes = 0;
    if (gg_optim_state_size(opt, &bytes) != GG_SUCCESS || bytes > ((size_t)1 << 20)) return;
    char *state = calloc(1, bytes + 16);
    if (!state) return;
    const uintptr_t host_lo = fake.host_lo, host_hi = fake.host_hi;
    fake.host_lo = (uintptr_t)state, fake.host_hi = (uintptr_t)state + bytes + 16;
    fake.enqueued = 0;
    gg_status st = gg_optim_save_state(opt, state, bytes);
    check_result(st, ctx);
    uint32_t params = 0;
    memcpy(&params, state + 20, sizeof params);
    const float words[2] = {1e-3f, 1.0f}; /* the learning rate, 1 / the loss scale */
    if (st == GG_SUCCESS) memcpy(state + 64 + 8 * (size_t)params, words, sizeof words);
    for (int n = (int)(take(r, 1) % 8), i = 0; i < n; ++i) state[take(r, 3) % bytes] = (char)take(r, 1);
    if (take(r, 1) % 2) { /* the check word made anew (at offset 40), so that the checks after it are reached too */
        const uint64_t check = gg_optim_state_checksum(state, bytes);
        memcpy(state + 40, &check, sizeof check);
    }
    const size_t length = take(r, 1) % 8 ? bytes : bytes - 16 + (size_t)(take(r, 1) % 33); /* within the buffer */
    const int copies = fake.calls[FAKE_MEMCPY];
    fake.enqueued = 0;
    st = gg_optim_load_state(opt, state, length);
    check_result(st, ctx);
    const int refused = st == GG_ERROR_INVALID_ARGUMENT || st == GG_ERROR_VERSION;
    if (refused && fake.calls[FAKE_MEMCPY] != copies) {
        fprintf(stderr, "a refused load copied: %s\n", gg_last_error(ctx));
        abort();
    }
    fake.host_lo = host_lo, fake.host_hi = host_hi;
    free(state);
}

/* An optimizer's life with fuzzed pieces: its config, up to three parameters, finalize, steps, the setters. */
static gg_status optim_call(reader *r) {
    gg_optim *opt = NULL;
    gg_status st = fuzzed_optim(r, ctx, &opt);
    if (!opt) return st;
    fake.enqueued = 0;
    check_result(gg_optim_set_lr(opt, float_of(r), NULL), ctx);
    fake.enqueued = 0;
    check_result(gg_optim_set_loss_scale(opt, float_of(r), NULL), ctx);
    fake.enqueued = 0;
    check_result(gg_optim_step_params(opt, (int)(int8_t)take(r, 1), (int)(int8_t)take(r, 1), NULL), ctx);
    fake.enqueued = 0;
    check_result(gg_optim_step(opt, NULL), ctx);
    gg_optim_memory mem;
    fake.enqueued = 0;
    check_result(gg_optim_memory_info(opt, take(r, 1) % 8 ? &mem : NULL), ctx);
    gg_optim_device_ptrs ptrs;
    fake.enqueued = 0;
    check_result(gg_optim_device_pointers(opt, take(r, 1) % 8 ? &ptrs : NULL), ctx);
    int found_inf = 0;
    float grad_norm = 0.0f;
    const unsigned outs = (unsigned)take(r, 1);
    fake.enqueued = 0;
    st = gg_optim_last_step(opt, outs & 1 ? &found_inf : NULL, outs & 2 ? &grad_norm : NULL);
    if (take(r, 1) % 2) checkpoint(r, opt);
    gg_optim_destroy(opt);
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
/* The numerics: a conversion or a finite check over fuzzed buffers, or the fp16 overflow word read (found or its
 * pointer NULL, cleared or not) or its device address asked for; the context's queries and the strings beside. */
static gg_status numerics_call(reader *r) {
    void *a = pointer_of(r, 0), *b = pointer_of(r, 1);
    const size_t count = take(r, 1) % 4 ? (size_t)take(r, 2) : (size_t)take(r, 8);
    fake.enqueued = 0;
    (void)gg_ctx_device_bytes(take(r, 1) % 8 ? ctx : NULL);
    (void)gg_status_string((gg_status)(int)take(r, 1));
    (void)gg_precision_string((gg_precision)(int)take(r, 1));
    switch ((unsigned)take(r, 1) % 4) {
    case 0: return gg_to_fp16(ctx, a, b, count, NULL);
    case 1: return gg_check_finite(ctx, a, count, (int)(take(r, 1) % 2), b, NULL);
    case 2: {
        int found = 0;
        return gg_fp16_overflow(take(r, 1) % 8 ? ctx : NULL, take(r, 1) % 8 ? &found : NULL, (int)(take(r, 1) % 3));
    }
    default: {
        unsigned *flag = NULL;
        return gg_fp16_overflow_flag(take(r, 1) % 8 ? ctx : NULL, take(r, 1) % 8 ? &flag : NULL);
    }
    }
}

#ifdef GG_FUZZ_DIST
/* A context of its own with a fake communicator of 1-3 ranks attached by a fuzzed config, then what a data-parallel
 * loop calls: gg_dist_reduce, gg_dist_alloc / _free, a syncing graph of block 1 (planned without cuBLASLt), a step's
 * life (step_life: syncing unless its config says not), and gg_dist_detach. The fake collectives complete at once; the
 * deadlines are 1 s (main) so nothing can wait longer. */
static gg_status dist_call(reader *r) {
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    gg_ctx *dctx = NULL;
    const gg_status made = gg_ctx_create(&c, &dctx);
    if (made != GG_SUCCESS) { /* only an injected fault may stop it */
        if (!fake.fail_at && !fake.fail_create_at && !fake.fail_get_device) abort();
        return made;
    }
    fake_nccl_reset((int)(take(r, 1) % 2), (int)(take(r, 1) % 3) + 1);
    ncclComm_t comm = fake_nccl_comm();
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bind_cpus = 0; /* no thread binding in a fuzzer */
    dc.op = (gg_reduce_op)(int)(take(r, 1) % 4) - 1;
    dc.sync = (gg_grad_sync)(int)(take(r, 1) % 4) - 1;
    dc.bucket_bytes = take(r, 1) % 4 ? (size_t)take(r, 1) << (take(r, 1) % 28) : (size_t)take(r, 8);
    dc.overlap = (int)(take(r, 1) % 3) - 1;
    dc.comm_sms = (int)(int8_t)take(r, 1);
    dc.copy_engines = (int)(take(r, 1) % 3);
    if (take(r, 1) % 16 == 0) dc.version = 99;
    fake.enqueued = 0;
    gg_status st = gg_dist_attach(dctx, take(r, 1) % 16 ? (void *)comm : NULL, take(r, 1) % 8 ? &dc : NULL);
    check_result(st, dctx);
    if (st == GG_SUCCESS) {
        for (int n = (int)(take(r, 1) % 4), i = 0; i < n; ++i) {
            fake.enqueued = 0;
            switch ((unsigned)take(r, 1) % 6) {
            case 5: /* a step on the data-parallel context: its reduction's layout, rules and captured collectives */
                check_result(step_life(r, dctx), dctx);
                break;
            case 3: /* the queries, on the context or NULL */
                (void)gg_dist_rank(take(r, 1) % 8 ? dctx : NULL);
                (void)gg_dist_size(take(r, 1) % 8 ? dctx : NULL);
                (void)gg_dist_comm(take(r, 1) % 8 ? dctx : NULL);
                check_result(gg_dist_check(take(r, 1) % 8 ? dctx : NULL), dctx);
                break;
            case 4: /* an abort (the context then has no communicator: later calls are refused, detach works) */
                check_result(gg_dist_abort(take(r, 1) % 8 ? dctx : NULL), dctx);
                break;
            case 0: {
                void *data = pointer_of(r, i);
                /* small counts, or extremes: the fakes call all memory outside the host ranges device memory, so a
                 * count of terabytes that a GPU's driver would refuse (its last byte in no allocation) passes here,
                 * and only loops over its billion pieces (one NCCL call per bucket_bytes) */
                static const size_t extremes[] = {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 2 + 1, 0};
                const size_t count = take(r, 1) % 8 ? (size_t)take(r, 2) : extremes[take(r, 1) % 4];
                check_result(gg_dist_reduce(dctx, data, count, (int)(take(r, 1) % 2), NULL), dctx);
                break;
            }
            case 1: {
                void *buffer = NULL;
                const size_t bytes = take(r, 1) % 8 ? (size_t)take(r, 3) : SIZE_MAX >> (take(r, 1) % 4);
                st = gg_dist_alloc(dctx, bytes, take(r, 1) % 16 ? &buffer : NULL);
                check_result(st, dctx);
                if ((st == GG_SUCCESS) != (buffer != NULL)) abort();
                fake.enqueued = 0;
                check_result(gg_dist_free(dctx, take(r, 1) % 16 ? buffer : (void *)BASE(7)), dctx);
                if (buffer) (void)gg_dist_free(dctx, buffer); /* after a refused free */
                break;
            }
            default: {
                fuzz_block b;
                take_block(r, &b);
                b.d1.tokens = take(r, 1) % 4 ? 64 : b.d1.tokens;
                b.d1.hidden = take(r, 1) % 4 ? 4096 : b.d1.hidden;
                gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
                gc.max_tokens = 128;
                gc.sync_gradients = 1;
                gg_graph *g = NULL;
                st = gg_tanh_gate_graph_create(dctx, &b.d1, &gc, &g);
                check_result(st, dctx);
                fake.enqueued = 0;
                if (st == GG_SUCCESS) check_result(gg_tanh_gate_graph_run(g, &b.d1, &b.a1, NULL), dctx);
                gg_graph_destroy(g);
                break;
            }
            }
        }
        fake.enqueued = 0;
        check_result(gg_dist_detach(dctx), dctx);
    }
    gg_ctx_destroy(dctx);
    if (fake_nccl_is_live(comm)) fake_nccl_destroy(comm); /* an abort ends the attached communicator itself */
    return GG_SUCCESS;
}
#endif

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
    if (!ctx) { /* nothing may wait on another rank for long (the fake collectives never leave one waiting) */
        setenv("GG_DIST_PEER_TIMEOUT_S", "1", 1);
        setenv("GG_DIST_STEP_TIMEOUT_S", "1", 1);
        setenv("GG_DIST_INIT_TIMEOUT_S", "1", 1);
    }
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
    fake.plan_ok = (int)(take(&r, 1) % 2); /* cuBLASLt plans (deeper: planning, captures) or refuses them */
    fake.enqueued = 0;
    /* A quarter of the inputs also fail one call the library makes: the k-th of a kind of fake_cuda.h (host memory
     * among them), counted from here. Any status may come back then, but with a message, and ASan sees what leaks. */
    const unsigned fault = (unsigned)take(&r, 1);
    memset(fake.calls, 0, sizeof fake.calls);
    if (fault % 4 == 0) {
        fake.fail_kind = (fake_kind)(fault / 4 % FAKE_KINDS);
        fake.fail_at = (int)(take(&r, 1) % 16) + 1;
    } else if (fault % 8 == 2) { /* or the k-th CUDA or cuBLASLt resource made from here */
        fake.fail_create_at = fake.creates + (int)(take(&r, 1) % 32) + 1;
    }
    fake.fail_get_device = fault % 32 == 1; /* and now and then the device cannot be made current */
    switch ((unsigned)take(&r, 1) % 9) {
#ifdef GG_FUZZ_DIST
    case 8: check_result(dist_call(&r), NULL); break;
#endif
    case 0: check_result(ctx_create(&r), NULL); break;
    case 5: check_result(numerics_call(&r), ctx); break;
    case 1: check_result(block_call(&r, 1), ctx); break;
    case 4: check_result(forward_call(&r), ctx); break;
    case 6: check_result(step_call(&r), ctx); break;
    case 7: check_result(optim_call(&r), ctx); break;
    default: check_result(block_call(&r, 0), ctx); break;
    }
    fake.fail_at = fake.fail_create_at = 0;
    fake.fail_get_device = 0;
    return 0;
}
