/*
 * test_fp16_copies.c - blocks 2 and 3's fp16 copies of their operands (the *_fp16 fields of gg_gelu_ffn_args,
 * gg_mlp_args and of their forwards' args, include/gradgraph.h) and gg_to_fp16 (src/api/convert_api.c), on the CUDA
 * fakes (tests/fake/fake_cuda.h) as the default device and as a 9.0 one (fake.compute_capability = 90: the
 * gemm_f32w routes of src/blocks/ffn.c, where G and dX read the fp32 weights themselves at few tokens).
 *
 * What it proves:
 *   - validation: a copy is refused outside fp16 mode (naming the field and the precision), misaligned, as host
 *     memory, or overlapping an output, with nothing planned or enqueued; the same for the forwards, graph runs and
 *     step calls;
 *   - conversions skipped: over token counts around every route threshold and two pairs of dims, each copy given
 *     removes exactly its own conversion (f32_to_f16_kernel) where the call would have made it, all four leave only
 *     block 2's dY conversion, and the same GEMMs run;
 *   - the copies are really read: in the log of a graph's capture (fake_log, real address ranges with
 *     fake.device_space) some GEMM reads each given copy whole, no conversion touches it, and a weight's copy on a
 *     route that reads the fp32 weight is read by no cuBLASLt GEMM and written by no conversion;
 *   - without copies, the narrow schedule's side stream (act's, X's and W1's conversions) forks after W2's conversion;
 *   - dW2 forks beside the gelu' pass in a per-block graph and after it in a step graph, with and without copies;
 *   - padded graph runs stage the [M, ...] copies, graphs run with and without copies and leak nothing, step graphs
 *     with copies finalize and run;
 *   - gg_to_fp16's checks, its one launch, and a failed launch that leaves the context usable;
 *   - the forwards read the weights' copies (two conversions fewer) and write the copies of hidden_states and the
 *     activation instead of their scratch (as many conversions);
 *   - the pre-activation's copy (which changes the result, so it is not one of the four above): validated the same,
 *     read by gelu' in place of the fp32 pre-activation, converted by nothing in the backward; the forward writes it
 *     when asked (one conversion more, from the fp32 pre-activation) and refuses it outside fp16 mode.
 * Prints `FP16_COPIES {...}` with what it checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_cuda.h"
#include "fake_order.h"
#include "gradgraph.h"
#include "internal.h" /* gg_ctx's has_wgmma: whether the 9.0 device's routes are on */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* What cudaPointerGetAttributes calls host memory (fake.host_lo .. host_hi): below every FAKE(i). */
#define HOST_LO ((uintptr_t)0x080000000000ull)
#define HOST_HI ((uintptr_t)0x090000000000ull)
#define HOST_PTR ((void *)HOST_LO)
/* The fake devices: the default one (no sm_90a route) and an H100/H200 (9.0). */
static const int devices[] = {0, 90};

#define assert_message_has(ctx, text)                                                                              \
    do {                                                                                                           \
        const char *msg_ = gg_last_error(ctx);                                                                     \
        if (!strstr(msg_, (text))) fail_msg("%s: message \"%s\" does not contain \"%s\"", where, msg_, (text));  \
    } while (0)

/* The case being checked, named in every failure. */
static char where[256];
#define EXPECT_EQ(a, b)                                                                                            \
    do {                                                                                                           \
        const long long a_ = (long long)(a), b_ = (long long)(b);                                                  \
        if (a_ != b_) fail_msg("%s: %s = %lld, expected %s = %lld", where, #a, a_, #b, b_);                        \
    } while (0)
#define EXPECT(cond)                                                                                               \
    do {                                                                                                           \
        if (!(cond)) fail_msg("%s: %s is false", where, #cond);                                                    \
    } while (0)

static struct {
    int refusals;        /* calls refused as expected */
    int eager_calls;     /* eager calls whose conversions and GEMMs were counted */
    int logged_reads;    /* copies found read whole by a GEMM in a capture's log */
    int unread_weights;  /* weight copies found untouched on a route that reads the fp32 weight */
    int graph_runs, step_runs, to_fp16_calls;
    long race_pairs;     /* pairs of operations on shared bytes, one writing, found ordered in the captures */
} totals;

/* A context on the fakes: device cc (0 or 90), cuBLASLt plans succeed, no autotuning nor tune cache;
 * device_space: cudaMalloc hands out real, comparable address ranges. */
static gg_ctx *make_ctx_prec(int cc, int device_space, gg_precision precision) {
    fake_reset(1);
    fake.plan_ok = 1;
    fake.compute_capability = cc;
    fake.device_space = device_space;
    fake.host_lo = HOST_LO;
    fake.host_hi = HOST_HI;
    gg_config config = GG_CONFIG_INIT;
    config.autotune = 0;
    config.tune_cache_path = "";
    config.precision = precision;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&config, &ctx), GG_SUCCESS);
    assert_int_equal(ctx->has_wgmma, cc == 90);
    return ctx;
}
static gg_ctx *make_ctx(int cc, int device_space) { return make_ctx_prec(cc, device_space, GG_PRECISION_FP32); }

static void destroy_ctx(gg_ctx *ctx) {
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
    assert_int_equal(fake.captures_open, 0);
}

/* ---- a backward call of block 2 or 3, its copies by index ---- */

enum { CP_X, CP_W1, CP_W2, CP_ACT, N_COPIES };
static const char *const copy_names[2][N_COPIES] = {
    {"hidden_states_fp16", "weight1_fp16", "weight2_fp16", "gelu_out_fp16"},
    {"hidden_states_fp16", "weight1_fp16", "weight2_fp16", "intermediate_activated_fp16"}};
static const char *copy_name(int block, int k) { return copy_names[block - 2][k]; }

typedef struct bw {
    int block;          /* 2: gg_gelu_ffn_*, 3: gg_mlp_* */
    gg_gelu_ffn_desc d; /* block 3's desc has the same fields (mlp_desc_of) */
    gg_gelu_ffn_args a2;
    gg_mlp_args a3;
} bw;

static gg_mlp_desc mlp_desc_of(const gg_gelu_ffn_desc *d) {
    return (gg_mlp_desc){d->tokens, d->hidden, d->ffn, d->precision, d->accumulate};
}

/* Every tensor a distinct FAKE address, no residual, no copies. */
static bw bw_fake(int block, gg_precision precision, int64_t M, int64_t D, int64_t F) {
    bw b;
    memset(&b, 0, sizeof b);
    b.block = block;
    b.d = (gg_gelu_ffn_desc){M, D, F, precision, 0};
    b.a2 = (gg_gelu_ffn_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7),
                              FAKE(8), FAKE(9), NULL,    NULL,    NULL,    NULL,    NULL, NULL};
    b.a3 = (gg_mlp_args){FAKE(0), FAKE(1), FAKE(2),  FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7),
                         FAKE(8), FAKE(9), FAKE(10), NULL,    NULL,    NULL,    NULL,    NULL, NULL};
    return b;
}

static void bw_set_copy(bw *b, int k, const void *p) {
    const void **slot2[N_COPIES] = {&b->a2.hidden_states_fp16, &b->a2.weight1_fp16, &b->a2.weight2_fp16,
                                    &b->a2.gelu_out_fp16};
    const void **slot3[N_COPIES] = {&b->a3.hidden_states_fp16, &b->a3.weight1_fp16, &b->a3.weight2_fp16,
                                    &b->a3.intermediate_activated_fp16};
    *(b->block == 2 ? slot2 : slot3)[k] = p;
}
static const void *bw_copy(const bw *b, int k) {
    const void *const c2[N_COPIES] = {b->a2.hidden_states_fp16, b->a2.weight1_fp16, b->a2.weight2_fp16,
                                      b->a2.gelu_out_fp16};
    const void *const c3[N_COPIES] = {b->a3.hidden_states_fp16, b->a3.weight1_fp16, b->a3.weight2_fp16,
                                      b->a3.intermediate_activated_fp16};
    return (b->block == 2 ? c2 : c3)[k];
}
/* The fp32 tensor copy k stands for. */
static const float *bw_source(const bw *b, int k) {
    const float *const s2[N_COPIES] = {b->a2.hidden_states, b->a2.weight1, b->a2.weight2, b->a2.gelu_out};
    const float *const s3[N_COPIES] = {b->a3.hidden_states, b->a3.weight1, b->a3.weight2,
                                       b->a3.intermediate_activated};
    return (b->block == 2 ? s2 : s3)[k];
}
/* Copies FAKE(20 + k) for each k in mask (bit k), none elsewhere. */
static bw bw_with(bw b, unsigned mask) {
    for (int k = 0; k < N_COPIES; ++k) bw_set_copy(&b, k, mask >> k & 1 ? FAKE(20 + k) : NULL);
    return b;
}
static bw bw_without_copies(bw b) { return bw_with(b, 0); }

/* Elements of copy k at the call's tokens: [M,D], [F,D], [D,F], [M,F]. */
static size_t copy_elems(const gg_gelu_ffn_desc *d, int k) {
    const int64_t rows = k == CP_X || k == CP_ACT ? d->tokens : k == CP_W1 ? d->ffn : d->hidden;
    const int64_t cols = k == CP_X || k == CP_W1 ? d->hidden : d->ffn;
    return (size_t)rows * (size_t)cols;
}

static gg_status bw_run(gg_ctx *ctx, const bw *b, gg_stream s) {
    if (b->block == 2) return gg_gelu_ffn_backward(ctx, &b->d, &b->a2, s);
    const gg_mlp_desc d = mlp_desc_of(&b->d);
    return gg_mlp_backward(ctx, &d, &b->a3, s);
}
static gg_status bw_graph_create(gg_ctx *ctx, const bw *b, const gg_graph_config *gc, gg_graph **g) {
    if (b->block == 2) return gg_gelu_ffn_graph_create(ctx, &b->d, gc, g);
    const gg_mlp_desc d = mlp_desc_of(&b->d);
    return gg_mlp_graph_create(ctx, &d, gc, g);
}
/* A graph of b's block with the buckets given (GG_BUCKETS_LIST), into *g. */
static gg_status bw_list_graph(gg_ctx *ctx, const bw *b, const int64_t *buckets, int n, gg_graph **g) {
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = buckets;
    gc.n_buckets = n;
    return bw_graph_create(ctx, b, &gc, g);
}
static gg_status bw_graph_run(gg_graph *g, const bw *b) {
    if (b->block == 2) return gg_gelu_ffn_graph_run(g, &b->d, &b->a2, NULL);
    const gg_mlp_desc d = mlp_desc_of(&b->d);
    return gg_mlp_graph_run(g, &d, &b->a3, NULL);
}
/* Runs graph g with b's pointers under the fake log (left for the caller to read and free), failing the test on an
 * error or a capture left open; returns how many captures the run made. */
static int logged_graph_run(gg_ctx *ctx, gg_graph *g, const bw *b) {
    const int captures = fake.captures;
    fake_log_start();
    const gg_status st = bw_graph_run(g, b);
    fake_log_stop();
    if (st != GG_SUCCESS) fail_msg("%s: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
    EXPECT_EQ(fake.captures_open, 0);
    if (fake.device_space && fake.captures > captures) { /* the capture orders every access to shared bytes */
        const fake_races r = fake_check_races(0, 3);
        if (r.races) fail_msg("%s: %d races in the capture (fake_order.h)", where, r.races);
        totals.race_pairs += r.pairs;
    }
    return fake.captures - captures;
}

static gg_status bw_step_add(gg_step *step, const bw *b) {
    if (b->block == 2) return gg_step_add_gelu_ffn(step, &b->d, &b->a2);
    const gg_mlp_desc d = mlp_desc_of(&b->d);
    return gg_step_add_mlp(step, &d, &b->a3);
}

/* ---- device memory from the fakes (fake.device_space: real address ranges, never touched) ---- */

typedef struct owned {
    void *p[96];
    int n;
} owned;

static void *dev(owned *o, size_t bytes) {
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, bytes), cudaSuccess);
    assert_true(o->n < (int)COUNT(o->p));
    o->p[o->n++] = p;
    return p;
}
static void owned_free(owned *o) {
    for (int i = 0; i < o->n; ++i) assert_int_equal(cudaFree(o->p[i]), cudaSuccess);
    o->n = 0;
}

/* A call whose every tensor (and, with copies, its four copies) is its own cudaMalloc, with rows for M tokens. */
static bw bw_device(int block, int64_t M, int64_t D, int64_t F, int copies, owned *o) {
    const size_t md = (size_t)(M * D) * 4, mf = (size_t)(M * F) * 4, fd = (size_t)(F * D) * 4;
    bw b = bw_fake(block, GG_PRECISION_FP16, M, D, F);
    if (block == 2) {
        b.a2 = (gg_gelu_ffn_args){dev(o, md), dev(o, md), dev(o, fd), dev(o, fd), dev(o, mf),
                                  dev(o, mf), dev(o, mf), dev(o, md), dev(o, fd), dev(o, fd),
                                  NULL,       NULL,       NULL,       NULL,       NULL, NULL};
    } else {
        b.a3 = (gg_mlp_args){dev(o, md), dev(o, md), dev(o, fd),        dev(o, fd), dev(o, mf), dev(o, mf),
                             dev(o, md), dev(o, fd), dev(o, (size_t)F * 4), dev(o, fd), dev(o, (size_t)D * 4),
                             NULL,       NULL,       NULL,              NULL,       NULL, NULL};
    }
    for (int k = 0; copies && k < N_COPIES; ++k) bw_set_copy(&b, k, dev(o, copy_elems(&b.d, k) * 2));
    return b;
}

/* ---- the log of a capture (fake_log) ---- */

typedef struct span {
    uintptr_t lo, hi; /* [lo, hi) */
} span;

static span span_of(const void *p, size_t bytes) { return (span){(uintptr_t)p, (uintptr_t)p + bytes}; }
/* Copy k's bytes at the call's tokens. */
static span copy_span(const bw *b, int k) { return span_of(bw_copy(b, k), copy_elems(&b->d, k) * 2); }
/* The fp32 tensor of copy k at the call's tokens. */
static span source_span(const bw *b, int k) { return span_of(bw_source(b, k), copy_elems(&b->d, k) * 4); }

static int touches(const fake_entry *e, span s) {
    for (int i = 0; i < e->n_ranges; ++i)
        if (e->ranges[i].lo < s.hi && s.lo < e->ranges[i].hi) return 1;
    return 0;
}
/* Whether a cuBLASLt GEMM of the log has an operand range that holds all of s. */
static int gemm_reads_whole(span s) {
    for (int i = 0; i < fake_log.n; ++i) {
        const fake_entry *e = &fake_log.entries[i];
        if (e->op != FAKE_OP_MATMUL) continue;
        for (int r = 0; r < e->n_ranges; ++r)
            if (e->ranges[r].lo <= s.lo && s.hi <= e->ranges[r].hi) return 1;
    }
    return 0;
}
/* Whether a cuBLASLt GEMM of the log shares a byte with s. */
static int gemm_touches(span s) {
    for (int i = 0; i < fake_log.n; ++i)
        if (fake_log.entries[i].op == FAKE_OP_MATMUL && touches(&fake_log.entries[i], s)) return 1;
    return 0;
}
/* Whether log entry e is a kernel launch whose name contains `name` and (s not NULL) whose arguments point into s. */
static int kernel_entry_is(const fake_entry *e, const char *name, const span *s) {
    return e->op == FAKE_OP_KERNEL && e->kernel && strstr(e->kernel, name) && (!s || touches(e, *s));
}
/* Kernel launches of the log whose name contains `name`: all of them (s NULL), or those whose arguments point into
 * *s. */
static int kernels_in_log(const char *name, const span *s) {
    int n = 0;
    for (int i = 0; i < fake_log.n; ++i) n += kernel_entry_is(&fake_log.entries[i], name, s);
    return n;
}
#define CONVERT_KERNEL "f32_to_f16_kernel"
#define F32W_KERNEL "gemm_f32w_kernel"
#define STAGE_KERNEL "stage_kernel"

/* Whether the route reads copy k of a call of M tokens (dims 1024 x 4096 or 2048 x 8192: both GEMMs' shapes are
 * gemm_f32w's) on device cc: X and the activation always; on the 9.0 device W2 past 1024 tokens (G reads the fp32 W2
 * in gemm_f32w up to there) and W1 past 512 at least (dX in gemm_f32w up to 512, and up to 1024 where its grid fills
 * the GPU); on the default device W2 past 512 (G in TF32 from the fp32 W2 up to there), W1 always. */
static int route_reads_copy(int cc, int64_t M, int k) {
    if (k == CP_X || k == CP_ACT) return 1;
    if (k == CP_W2) return M > (cc == 90 ? 1024 : 512);
    return cc == 90 ? M > 1024 : 1; /* W1: only the two ends are certain on the 9.0 device (see the callers) */
}

/* The checks of one logged capture of call b (its copies given): the copies the route reads are read whole by a
 * cuBLASLt GEMM; a weight's copy the route does not read is touched by none (gemm_f32w's launches are left out: the
 * fake's scan of their class argument reads stale stack words, see test_step_ring.c); no conversion touches any copy,
 * nor the fp32 tensor of a given copy; the conversions are block 2's dY alone. `calls`: such calls in the capture. */
static void check_logged_reads(const bw *b, int cc, int calls) {
    const int64_t M = b->d.tokens;
    for (int k = 0; k < N_COPIES; ++k) {
        const span c = copy_span(b, k);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &c), 0);
        const span s = source_span(b, k);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &s), 0); /* the fp32 tensor is not converted either */
        if (cc == 90 && k == CP_W1 && M > 512 && M <= 1024) continue; /* dX's route there: by its grid's fill */
        if (route_reads_copy(cc, M, k)) {
            if (!gemm_reads_whole(c)) fail_msg("%s: no GEMM reads %s whole", where, copy_name(b->block, k));
            totals.logged_reads++;
        } else {
            if (gemm_touches(c)) fail_msg("%s: a GEMM reads %s, which the route does not", where,
                                          copy_name(b->block, k));
            totals.unread_weights++;
        }
    }
    EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), b->block == 2 ? calls : 0);
}

/* ---- 1. validation of the backward's copies ---- */

/* A call that must be refused with `status` and a message holding text1 and text2, with nothing planned or
 * enqueued. */
static void expect_refused(gg_ctx *ctx, const bw *b, gg_status status, const char *text1, const char *text2) {
    const int enqueued = fake.enqueued, planned = fake.planned, launches = fake_kernel_launches("");
    EXPECT_EQ(bw_run(ctx, b, NULL), status);
    assert_message_has(ctx, text1);
    if (text2) assert_message_has(ctx, text2);
    EXPECT_EQ(fake.enqueued, enqueued);
    EXPECT_EQ(fake.planned, planned);
    EXPECT_EQ(fake_kernel_launches(""), launches);
    totals.refusals++;
}

/* Each copy given outside fp16 mode (FP32, TF32, and DEFAULT: the context's fp32) is refused naming the field and
 * the precision; in fp16 mode a misaligned copy, a host copy and an output overlapping a copy are refused naming
 * them; a graph run and a step call check the same; a valid call with all four copies (explicit fp16, or DEFAULT on
 * an fp16 context) succeeds. */
static void backward_copies_validated(void **state) {
    (void)state;
    for (size_t dv = 0; dv < COUNT(devices); ++dv)
        for (int block = 2; block <= 3; ++block) {
            const int cc = devices[dv];
            gg_ctx *ctx = make_ctx(cc, 0);
            const gg_precision others[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_DEFAULT};
            const char *other_names[] = {"precision is fp32", "precision is tf32", "precision is fp32"};
            for (size_t p = 0; p < COUNT(others); ++p)
                for (int k = 0; k < N_COPIES; ++k) {
                    snprintf(where, sizeof where, "block %d cc=%d %s given in %s", block, cc, copy_name(block, k),
                             gg_precision_string(others[p]));
                    char field[96];
                    snprintf(field, sizeof field, "args->%s is given", copy_name(block, k));
                    const bw b = bw_with(bw_fake(block, others[p], 256, 1024, 4096), 1u << k);
                    expect_refused(ctx, &b, GG_ERROR_INVALID_ARGUMENT, field, other_names[p]);
                    assert_message_has(ctx, block == 2 ? "gg_gelu_ffn_backward" : "gg_mlp_backward");
                }
            for (int k = 0; k < N_COPIES; ++k) {
                char field[96];
                snprintf(field, sizeof field, "args->%s (", copy_name(block, k));
                snprintf(where, sizeof where, "block %d cc=%d %s misaligned", block, cc, copy_name(block, k));
                bw b = bw_with(bw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
                bw_set_copy(&b, k, (const char *)FAKE(20 + k) + 8);
                expect_refused(ctx, &b, GG_ERROR_MISALIGNED, field, "16-byte aligned");
                snprintf(where, sizeof where, "block %d cc=%d %s in host memory", block, cc, copy_name(block, k));
                bw_set_copy(&b, k, HOST_PTR);
                expect_refused(ctx, &b, GG_ERROR_INVALID_ARGUMENT, field, "is host memory");
            }
            /* an output over a copy: dX over X's copy, dW1 over W1's */
            snprintf(where, sizeof where, "block %d cc=%d grad_hidden_states over hidden_states_fp16", block, cc);
            bw b = bw_with(bw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            bw_set_copy(&b, CP_X, block == 2 ? b.a2.grad_hidden_states : b.a3.grad_hidden_states);
            expect_refused(ctx, &b, GG_ERROR_INVALID_ARGUMENT, "output args->grad_hidden_states overlaps input",
                           "args->hidden_states_fp16");
            snprintf(where, sizeof where, "block %d cc=%d grad_weight1 over weight1_fp16", block, cc);
            b = bw_with(bw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            bw_set_copy(&b, CP_W1, (const char *)(block == 2 ? b.a2.grad_weight1 : b.a3.grad_weight1) + 4096);
            expect_refused(ctx, &b, GG_ERROR_INVALID_ARGUMENT, "output args->grad_weight1 overlaps input",
                           "args->weight1_fp16");

            /* a graph run checks as the eager call: a tf32 graph refuses a copy, captures and enqueues nothing */
            snprintf(where, sizeof where, "block %d cc=%d graph run in tf32 with a copy", block, cc);
            const int64_t buckets[] = {256};
            gg_graph *g = NULL;
            const bw tf32 = bw_fake(block, GG_PRECISION_TF32, 256, 1024, 4096);
            EXPECT_EQ(bw_list_graph(ctx, &tf32, buckets, 1, &g), GG_SUCCESS);
            const int enqueued = fake.enqueued, captures = fake.captures;
            const bw tf32_copy = bw_with(tf32, 1u << CP_W2);
            EXPECT_EQ(bw_graph_run(g, &tf32_copy), GG_ERROR_INVALID_ARGUMENT);
            assert_message_has(ctx, "args->weight2_fp16 is given");
            assert_message_has(ctx, "precision is tf32");
            EXPECT_EQ(fake.enqueued, enqueued);
            EXPECT_EQ(fake.captures, captures);
            EXPECT_EQ(fake.captures_open, 0);
            totals.refusals++;
            EXPECT_EQ(bw_graph_run(g, &tf32), GG_SUCCESS); /* the graph still runs */
            gg_graph_destroy(g);

            /* a step call too, at the step's max_tokens rows */
            snprintf(where, sizeof where, "block %d cc=%d step call in tf32 with a copy", block, cc);
            gg_step *step = NULL;
            EXPECT_EQ(gg_step_create(ctx, NULL, &step), GG_SUCCESS);
            EXPECT_EQ(bw_step_add(step, &tf32_copy), GG_ERROR_INVALID_ARGUMENT);
            assert_message_has(ctx, "args->weight2_fp16 is given");
            assert_message_has(ctx, "precision is tf32");
            totals.refusals++;
            gg_step_destroy(step);

            snprintf(where, sizeof where, "block %d cc=%d all four copies in fp16", block, cc);
            const bw ok = bw_with(bw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            EXPECT_EQ(bw_run(ctx, &ok, NULL), GG_SUCCESS);
            destroy_ctx(ctx);

            /* DEFAULT on a context whose precision is fp16: the copies are read */
            snprintf(where, sizeof where, "block %d cc=%d all four copies, DEFAULT on an fp16 context", block, cc);
            ctx = make_ctx_prec(cc, 0, GG_PRECISION_FP16);
            const bw dflt = bw_with(bw_fake(block, GG_PRECISION_DEFAULT, 256, 1024, 4096), 0xf);
            const int conv = fake_kernel_launches(CONVERT_KERNEL);
            EXPECT_EQ(bw_run(ctx, &dflt, NULL), GG_SUCCESS);
            EXPECT_EQ(fake_kernel_launches(CONVERT_KERNEL) - conv, block == 2 ? 1 : 0);
            destroy_ctx(ctx);
        }
}

/* ---- 2. conversions skipped ---- */

typedef struct ran {
    int conversions, gemms, f32w; /* f32_to_f16 launches; cuBLASLt GEMMs + gemm_f32w launches; gemm_f32w alone */
} ran;

/* An eager call that must succeed, and what it ran. */
static ran eager(gg_ctx *ctx, const bw *b) {
    const int conv = fake_kernel_launches(CONVERT_KERNEL), f32w = fake_kernel_launches(F32W_KERNEL),
              mm = fake.calls[FAKE_MATMUL];
    const gg_status st = bw_run(ctx, b, NULL);
    if (st != GG_SUCCESS) fail_msg("%s: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
    EXPECT_EQ(fake.captures_open, 0);
    EXPECT_EQ(fake.refused_launches, 0);
    totals.eager_calls++;
    const ran r = {fake_kernel_launches(CONVERT_KERNEL) - conv,
                   fake.calls[FAKE_MATMUL] - mm + fake_kernel_launches(F32W_KERNEL) - f32w,
                   fake_kernel_launches(F32W_KERNEL) - f32w};
    return r;
}

static const int64_t sweep_tokens[] = {1, 64, 512, 513, 1024, 1025, 4096, 8192};
static const int64_t sweep_dims[][2] = {{1024, 4096}, {2048, 8192}};

/* Eager fp16 calls over the tokens and dims above: without copies the call converts dY (block 2; block 3 in its
 * column sum), X, act and each weight its route does not read in fp32; each copy alone removes exactly its own
 * conversion (none for a weight the route reads in fp32), all four leave block 2's dY alone, and every call runs the
 * same four GEMMs (gemm_f32w launches included) as the call without copies. */
static void copies_skip_conversions(void **state) {
    (void)state;
    for (size_t dv = 0; dv < COUNT(devices); ++dv) {
        const int cc = devices[dv];
        gg_ctx *ctx = make_ctx(cc, 0);
        for (int block = 2; block <= 3; ++block)
            for (size_t di = 0; di < COUNT(sweep_dims); ++di)
                for (size_t t = 0; t < COUNT(sweep_tokens); ++t) {
                    const int64_t M = sweep_tokens[t], D = sweep_dims[di][0], F = sweep_dims[di][1];
                    snprintf(where, sizeof where, "block %d cc=%d M=%lld D=%lld F=%lld", block, cc, (long long)M,
                             (long long)D, (long long)F);
                    const bw b = bw_fake(block, GG_PRECISION_FP16, M, D, F);
                    const ran none = eager(ctx, &b);
                    EXPECT_EQ(none.gemms, 4);
                    /* the routes: G in gemm_f32w up to 1024 tokens on the 9.0 device, dX too up to 512 at least */
                    const int g_f32w = cc == 90 && M <= 1024;
                    const int dx_f32w = none.f32w - g_f32w;
                    EXPECT(dx_f32w == 0 || dx_f32w == 1);
                    if (cc == 90 && M <= 512) EXPECT_EQ(dx_f32w, 1);
                    if (cc != 90 || M > 1024) EXPECT_EQ(none.f32w, 0);
                    const int w2_converted = !g_f32w && !(cc != 90 && M <= 512); /* nor G in TF32 */
                    const int w1_converted = !dx_f32w;
                    const int dy = block == 2; /* block 3 converts dY in its column sum */
                    EXPECT_EQ(none.conversions, dy + 2 + w1_converted + w2_converted);

                    const bw all = bw_with(b, 0xf);
                    const ran r_all = eager(ctx, &all);
                    EXPECT_EQ(r_all.conversions, dy);
                    EXPECT_EQ(r_all.gemms, 4);
                    EXPECT_EQ(r_all.f32w, none.f32w);

                    int drops = 0;
                    for (int k = 0; k < N_COPIES; ++k) {
                        snprintf(where, sizeof where, "block %d cc=%d M=%lld D=%lld F=%lld, %s alone", block, cc,
                                 (long long)M, (long long)D, (long long)F, copy_name(block, k));
                        const bw one = bw_with(b, 1u << k);
                        const ran r = eager(ctx, &one);
                        EXPECT_EQ(r.gemms, 4);
                        EXPECT_EQ(r.f32w, none.f32w);
                        EXPECT(r.conversions <= none.conversions && r_all.conversions <= r.conversions);
                        const int drop = none.conversions - r.conversions;
                        const int expected = k == CP_W1 ? w1_converted : k == CP_W2 ? w2_converted : 1;
                        EXPECT_EQ(drop, expected);
                        drops += drop;
                    }
                    snprintf(where, sizeof where, "block %d cc=%d M=%lld D=%lld F=%lld", block, cc, (long long)M,
                             (long long)D, (long long)F);
                    EXPECT_EQ(drops, none.conversions - r_all.conversions); /* the singles add up to all four */
                }
        destroy_ctx(ctx);
    }
}

/* The frame of the tests below: body on a context of each device (device memory as far apart as its sizes) for
 * blocks 2 and 3, with the buffers it makes owned and freed after it. */
typedef void (*device_block_body)(gg_ctx *ctx, int cc, int block, owned *o);
static void each_device_and_block(device_block_body body) {
    for (size_t dv = 0; dv < COUNT(devices); ++dv)
        for (int block = 2; block <= 3; ++block) {
            gg_ctx *ctx = make_ctx(devices[dv], 1);
            owned o = {{0}, 0};
            body(ctx, devices[dv], block, &o);
            owned_free(&o);
            destroy_ctx(ctx);
        }
}

/* ---- 3. the copies are read: a graph's capture, logged ---- */

/* A graph with buckets 512 and 4096 run at both (exact buckets: no staging), every tensor and copy its own
 * allocation: in each capture's log the copies the route reads are read whole by a GEMM, the others by none, no
 * conversion touches a copy or its fp32 tensor, only block 2's dY is converted; without copies, the same graph
 * converts X (its fp32 tensor is a conversion's argument) and runs as another exec. */
static void copies_are_read_in_a_graph_in(gg_ctx *ctx, int cc, int block, owned *o) {
    bw b = bw_device(block, 4096, 1024, 4096, 1, o);
    const int64_t buckets[] = {512, 4096};
    gg_graph *g = NULL;
    snprintf(where, sizeof where, "block %d cc=%d graph create", block, cc);
    EXPECT_EQ(bw_list_graph(ctx, &b, buckets, 2, &g), GG_SUCCESS);
    for (size_t i = 0; i < COUNT(buckets); ++i) {
        b.d.tokens = buckets[i];
        snprintf(where, sizeof where, "block %d cc=%d graph run M=%lld with copies", block, cc,
                 (long long)b.d.tokens);
        EXPECT_EQ(logged_graph_run(ctx, g, &b), 1);
        EXPECT_EQ(kernels_in_log(STAGE_KERNEL, NULL), 0); /* an exact bucket: nothing staged */
        check_logged_reads(&b, cc, 1);
        totals.graph_runs++;
    }
    /* without copies: another exec, which converts X from its fp32 tensor */
    const bw plain = bw_without_copies(b);
    snprintf(where, sizeof where, "block %d cc=%d graph run M=4096 without copies", block, cc);
    EXPECT_EQ(logged_graph_run(ctx, g, &plain), 1);
    const span x = source_span(&b, CP_X), act = source_span(&b, CP_ACT);
    EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &x), 1);
    EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &act), 1);
    EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), block == 2 ? 5 : 4);
    for (int k = 0; k < N_COPIES; ++k) {
        const span c = copy_span(&b, k);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &c), 0);
        EXPECT(!gemm_touches(c));
    }
    totals.graph_runs++;
    fake_log_free();
    gg_graph_destroy(g);
}
static void copies_are_read_in_a_graph(void **state) {
    (void)state;
    each_device_and_block(copies_are_read_in_a_graph_in);
}

/* The index of the first kernel launch of the log whose name contains `name` and whose arguments point into s; -1:
 * none. */
static int first_kernel_in_log(const char *name, span s) {
    for (int i = 0; i < fake_log.n; ++i)
        if (kernel_entry_is(&fake_log.entries[i], name, &s)) return i;
    return -1;
}

/* The narrow schedule's fork (src/blocks/ffn.c, enqueue_overlapped): the side stream forks after W2's conversion,
 * so that its conversions (act, X, W1) and G become ready together and G, of the greater priority, takes its SMs
 * first (docs/decisions.md, "launch priorities"). In the capture of a call without copies at 4096 tokens: act's
 * conversion comes after W2's, on another stream, which waits, after W2's conversion and before act's, on an event
 * recorded on W2's stream after W2's conversion. */
static void narrow_copies_fork_after_w2_in(gg_ctx *ctx, int cc, int block, owned *o) {
    const bw b = bw_device(block, 4096, 1024, 4096, 0, o);
    const int64_t buckets[] = {4096};
    gg_graph *g = NULL;
    snprintf(where, sizeof where, "block %d cc=%d narrow schedule's fork", block, cc);
    EXPECT_EQ(bw_list_graph(ctx, &b, buckets, 1, &g), GG_SUCCESS);
    EXPECT_EQ(logged_graph_run(ctx, g, &b), 1);
    const int w2 = first_kernel_in_log(CONVERT_KERNEL, source_span(&b, CP_W2));
    const int act = first_kernel_in_log(CONVERT_KERNEL, source_span(&b, CP_ACT));
    if (w2 < 0 || act < 0) fail_msg("%s: no conversion of W2 (%d) or act (%d)", where, w2, act);
    if (act < w2) fail_msg("%s: act's conversion (%d) is enqueued before W2's (%d)", where, act, w2);
    const cudaStream_t main = fake_log.entries[w2].stream, side = fake_log.entries[act].stream;
    EXPECT(main != side);
    int forked = 0;
    for (int r = w2 + 1; r < act && !forked; ++r) {
        const fake_entry *rec = &fake_log.entries[r];
        if (rec->op != FAKE_OP_RECORD || rec->stream != main) continue;
        for (int w = r + 1; w < act && !forked; ++w)
            forked = fake_log.entries[w].op == FAKE_OP_WAIT && fake_log.entries[w].stream == side &&
                     fake_log.entries[w].event == rec->event;
    }
    if (!forked) fail_msg("%s: act's stream does not wait on W2's after W2's conversion", where);
    totals.graph_runs++;
    fake_log_free();
    gg_graph_destroy(g);
}
static void narrow_copies_fork_after_w2(void **state) {
    (void)state;
    each_device_and_block(narrow_copies_fork_after_w2_in);
}

/* The first GEMM of the log that writes into s; -1: none. */
static int gemm_writing(span s) {
    for (int i = 0; i < fake_log.n; ++i) {
        const fake_entry *e = &fake_log.entries[i];
        for (int r = 0; e->op == FAKE_OP_MATMUL && r < e->n_ranges; ++r)
            if (e->ranges[r].writes == FAKE_WRITES && e->ranges[r].lo < s.hi && s.lo < e->ranges[r].hi) return i;
    }
    return -1;
}
/* The gelu' pass (block 2's gelu_grad_kernel, block 3's column-sum kernel over GeluGradRow) that writes R for the
 * call whose activation gradient dX's GEMM then writes into dx: the last such kernel enqueued before that GEMM. */
static int gelu_pass_before(span dx) {
    const int gemm = gemm_writing(dx);
    int found = -1;
    for (int i = 0; i < gemm; ++i)
        if (kernel_entry_is(&fake_log.entries[i], "gelu_grad_kernel", NULL) ||
            kernel_entry_is(&fake_log.entries[i], "GeluGradRow", NULL))
            found = i;
    return found;
}
/* A call's activation and weight gradients ([M,D], [F,D], [D,F]). */
static span grad_span(const bw *b, int which) {
    const gg_gelu_ffn_desc *d = &b->d;
    const size_t md = (size_t)(d->tokens * d->hidden) * 4, fd = (size_t)(d->ffn * d->hidden) * 4;
    float *const t2[] = {b->a2.grad_hidden_states, b->a2.grad_weight1, b->a2.grad_weight2};
    float *const t3[] = {b->a3.grad_hidden_states, b->a3.grad_weight1, b->a3.grad_weight2};
    return span_of((b->block == 2 ? t2 : t3)[which], which == 0 ? md : fd);
}
enum { GRAD_X, GRAD_W1, GRAD_W2 };

/* Where dW2 forks (src/blocks/ffn.c, enqueue_overlapped): in a per-block graph after G, beside the gelu' pass
 * (neither ordered before the other), dW1 after it; in a step graph after the gelu' pass too, with dW1 (the weight
 * gradients overlap the next calls there: docs/decisions.md, "Step graphs: the weight gradients after R"). Logged
 * captures at 4096 tokens, with and without the copies (the narrow schedule's forks come first without). */
static void weight_gradients_fork_in(gg_ctx *ctx, int cc, int block, owned *o) {
    for (int copies = 0; copies <= 1; ++copies) {
        bw calls[2];
        for (int i = 0; i < 2; ++i) calls[i] = bw_device(block, 4096, 1024, 4096, copies, o);
        if (block == 2) calls[1].a2.grad_output = calls[0].a2.grad_hidden_states;
        else calls[1].a3.grad_output = calls[0].a3.grad_hidden_states;
        const int64_t buckets[] = {4096};
        gg_graph *g = NULL;
        snprintf(where, sizeof where, "block %d cc=%d copies %d: per-block graph", block, cc, copies);
        EXPECT_EQ(bw_list_graph(ctx, &calls[0], buckets, 1, &g), GG_SUCCESS);
        EXPECT_EQ(logged_graph_run(ctx, g, &calls[0]), 1);
        int gelu = gelu_pass_before(grad_span(&calls[0], GRAD_X));
        int dw2 = gemm_writing(grad_span(&calls[0], GRAD_W2)), dw1 = gemm_writing(grad_span(&calls[0], GRAD_W1));
        if (gelu < 0 || dw2 < 0 || dw1 < 0) fail_msg("%s: gelu' %d, dW2 %d, dW1 %d not found", where, gelu, dw2, dw1);
        EXPECT_EQ(fake_happens_before(gelu, dw2), 0);
        EXPECT_EQ(fake_happens_before(dw2, gelu), 0);
        EXPECT_EQ(fake_happens_before(gelu, dw1), 1);
        fake_log_free();
        gg_graph_destroy(g);
        totals.graph_runs++;

        snprintf(where, sizeof where, "block %d cc=%d copies %d: step graph", block, cc, copies);
        gg_step *step = NULL;
        EXPECT_EQ(gg_step_create(ctx, NULL, &step), GG_SUCCESS);
        for (int i = 0; i < 2; ++i) EXPECT_EQ(bw_step_add(step, &calls[i]), GG_SUCCESS);
        EXPECT_EQ(gg_step_finalize(step), GG_SUCCESS);
        fake_log_start();
        EXPECT_EQ(gg_step_run(step, 4096, 0, NULL), GG_SUCCESS);
        fake_log_stop();
        const fake_races races = fake_check_races(0, 3);
        EXPECT_EQ(races.races, 0);
        for (int i = 0; i < 2; ++i) {
            snprintf(where, sizeof where, "block %d cc=%d copies %d: step graph, call %d", block, cc, copies, i);
            gelu = gelu_pass_before(grad_span(&calls[i], GRAD_X));
            dw2 = gemm_writing(grad_span(&calls[i], GRAD_W2));
            dw1 = gemm_writing(grad_span(&calls[i], GRAD_W1));
            if (gelu < 0 || dw2 < 0 || dw1 < 0)
                fail_msg("%s: gelu' %d, dW2 %d, dW1 %d not found", where, gelu, dw2, dw1);
            EXPECT_EQ(fake_happens_before(gelu, dw2), 1);
            EXPECT_EQ(fake_happens_before(gelu, dw1), 1);
        }
        fake_log_free();
        gg_step_destroy(step);
        totals.step_runs++;
    }
}
static void weight_gradients_fork(void **state) {
    (void)state;
    each_device_and_block(weight_gradients_fork_in);
}

/* ---- 4. padded graphs, leaks, steps ---- */

/* A graph with buckets 1024 and 4096 run at 3000 tokens (padded into 4096): with copies (the [M, ...] copies are
 * staged, as the fp32 tensors are, and the weights' copies read in place), then without (another exec), then with
 * again (a replay: no capture); every run succeeds, no capture stays open, and destroying the graph gives back
 * everything it took (fake.live as after an earlier graph of the same buckets was made and destroyed). */
static void padded_graph_with_and_without_copies_in(gg_ctx *ctx, int cc, int block, owned *o) {
    bw b = bw_device(block, 4096, 1024, 4096, 1, o);
    const int64_t buckets[] = {1024, 4096};
    b.d.tokens = 3000;
    const bw plain = bw_without_copies(b);
    /* the baseline: the context's plans and scratch for these buckets exist after one graph's life */
    snprintf(where, sizeof where, "block %d cc=%d first graph", block, cc);
    gg_graph *g = NULL;
    EXPECT_EQ(bw_list_graph(ctx, &b, buckets, 2, &g), GG_SUCCESS);
    EXPECT_EQ(bw_graph_run(g, &plain), GG_SUCCESS);
    gg_graph_destroy(g);
    const int baseline = fake.live;

    snprintf(where, sizeof where, "block %d cc=%d padded run with copies", block, cc);
    EXPECT_EQ(bw_list_graph(ctx, &b, buckets, 2, &g), GG_SUCCESS);
    int launches = fake.graph_launches;
    EXPECT_EQ(logged_graph_run(ctx, g, &b), 1);
    EXPECT_EQ(fake.graph_launches, launches + 1);
    for (int k = 0; k < N_COPIES; ++k) {
        const span c = copy_span(&b, k);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &c), 0);
        if (k == CP_X || k == CP_ACT) {
            /* staged in (a kernel reads the caller's rows), the GEMM reads the staging buffer */
            if (!kernels_in_log(STAGE_KERNEL, &c))
                fail_msg("%s: %s is not staged", where, copy_name(block, k));
            EXPECT(!gemm_touches(c));
        } else if (!gemm_reads_whole(c)) { /* the 4096 bucket's route converts both weights */
            fail_msg("%s: no GEMM reads %s whole", where, copy_name(block, k));
        }
    }
    EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), block == 2 ? 1 : 0);
    fake_log_free();

    snprintf(where, sizeof where, "block %d cc=%d padded run without copies", block, cc);
    EXPECT_EQ(logged_graph_run(ctx, g, &plain), 1); /* another pointer set: captured again */
    snprintf(where, sizeof where, "block %d cc=%d padded run with copies again", block, cc);
    launches = fake.graph_launches;
    EXPECT_EQ(logged_graph_run(ctx, g, &b), 0); /* its exec was kept: a replay */
    EXPECT_EQ(fake.graph_launches, launches + 1);
    fake_log_free();
    totals.graph_runs += 3;
    gg_graph_destroy(g);
    EXPECT_EQ(fake.live, baseline);
    EXPECT_EQ(fake.captures_open, 0);
}
static void padded_graph_with_and_without_copies(void **state) {
    (void)state;
    each_device_and_block(padded_graph_with_and_without_copies_in);
}

/* A step of two calls of one block in fp16, each with its four copies (the second reading the first's activation
 * gradient): it finalizes, its 4096 bucket's capture reads every copy whole in a GEMM and converts nothing but
 * block 2's dY, a padded run (3000) and a small bucket (100 -> 128) run, and nothing leaks. */
static void step_with_copies_in(gg_ctx *ctx, int cc, int block, owned *o) {
    bw calls[2];
    for (int i = 0; i < 2; ++i) calls[i] = bw_device(block, 4096, 1024, 4096, 1, o);
    if (block == 2) calls[1].a2.grad_output = calls[0].a2.grad_hidden_states;
    else calls[1].a3.grad_output = calls[0].a3.grad_hidden_states;
    snprintf(where, sizeof where, "block %d cc=%d step", block, cc);
    gg_step *step = NULL;
    EXPECT_EQ(gg_step_create(ctx, NULL, &step), GG_SUCCESS); /* buckets 128 .. 4096 */
    for (int i = 0; i < 2; ++i) {
        const gg_status st = bw_step_add(step, &calls[i]);
        if (st != GG_SUCCESS) fail_msg("%s: add: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
    }
    gg_status st = gg_step_finalize(step);
    if (st != GG_SUCCESS) fail_msg("%s: finalize: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
    fake_log_start();
    st = gg_step_run(step, 4096, 0, NULL);
    fake_log_stop();
    if (st != GG_SUCCESS) fail_msg("%s: run: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
    for (int i = 0; i < 2; ++i)
        for (int k = 0; k < N_COPIES; ++k) {
            const span c = copy_span(&calls[i], k);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &c), 0);
            if (!gemm_reads_whole(c)) fail_msg("%s: call %d: no GEMM reads %s whole", where, i,
                                               copy_name(block, k));
            totals.logged_reads++;
        }
    EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), block == 2 ? 2 : 0);
    fake_log_free();
    EXPECT_EQ(gg_step_run(step, 3000, 1, NULL), GG_SUCCESS);
    EXPECT_EQ(gg_step_run(step, 100, 0, NULL), GG_SUCCESS);
    EXPECT_EQ(fake.captures_open, 0);
    totals.step_runs += 3;
    gg_step_destroy(step);
}
static void step_with_copies(void **state) {
    (void)state;
    each_device_and_block(step_with_copies_in);
}

/* ---- 5. gg_to_fp16 ---- */

/* gg_to_fp16 on the default and the 9.0 device: a NULL ctx, src or dst, a misaligned src or dst, dst overlapping
 * src (either side), host memory for either, and a count past the end of memory are refused naming the argument,
 * enqueueing nothing; count 0 succeeds and enqueues nothing; count 5 (not a multiple of 4) and buffers that only
 * touch launch one conversion each; captured, the launch's arguments are src and dst. */
static void to_fp16_validated_and_launched(void **state) {
    (void)state;
    for (size_t dv = 0; dv < COUNT(devices); ++dv) {
        const int cc = devices[dv];
        gg_ctx *ctx = make_ctx(cc, 0);
        const float *src = FAKE(0);
        char *dst = FAKE(1);
        const size_t n = 64;
        const struct {
            const char *what;
            gg_ctx *ctx;
            const float *src;
            void *dst;
            size_t count;
            gg_status status;
            const char *text1, *text2;
        } refused[] = {
            {"ctx NULL", NULL, src, dst, n, GG_ERROR_INVALID_ARGUMENT, "gg_to_fp16: ctx is NULL", NULL},
            {"src NULL", ctx, NULL, dst, n, GG_ERROR_INVALID_ARGUMENT, "gg_to_fp16: src is NULL", NULL},
            {"dst NULL", ctx, src, NULL, n, GG_ERROR_INVALID_ARGUMENT, "gg_to_fp16: dst is NULL", NULL},
            {"src misaligned", ctx, (const float *)((const char *)src + 8), dst, n, GG_ERROR_MISALIGNED, "src (",
             "16-byte aligned"},
            {"dst misaligned", ctx, src, dst + 8, n, GG_ERROR_MISALIGNED, "dst (", "16-byte aligned"},
            {"dst over src's end", ctx, src, (char *)FAKE(0) + 4 * n - 16, n, GG_ERROR_INVALID_ARGUMENT,
             "dst overlaps src", NULL},
            {"dst before src, overlapping", ctx, src, (char *)FAKE(0) - 2 * n + 16, n, GG_ERROR_INVALID_ARGUMENT,
             "dst overlaps src", NULL},
            {"dst is src", ctx, src, (void *)src, n, GG_ERROR_INVALID_ARGUMENT, "dst overlaps src", NULL},
            {"src in host memory", ctx, HOST_PTR, dst, n, GG_ERROR_INVALID_ARGUMENT, "src (", "is host memory"},
            {"dst in host memory", ctx, src, HOST_PTR, n, GG_ERROR_INVALID_ARGUMENT, "dst (", "is host memory"},
            {"count past the end of memory", ctx, src, dst, SIZE_MAX / 2, GG_ERROR_INVALID_ARGUMENT,
             "past the end of memory", NULL},
        };
        for (size_t i = 0; i < COUNT(refused); ++i) {
            snprintf(where, sizeof where, "gg_to_fp16 cc=%d %s", cc, refused[i].what);
            const int enqueued = fake.enqueued, launches = fake_kernel_launches("");
            EXPECT_EQ(gg_to_fp16(refused[i].ctx, refused[i].src, refused[i].dst, refused[i].count, NULL),
                      refused[i].status);
            assert_message_has(refused[i].ctx, refused[i].text1);
            if (refused[i].text2) assert_message_has(refused[i].ctx, refused[i].text2);
            EXPECT_EQ(fake.enqueued, enqueued);
            EXPECT_EQ(fake_kernel_launches(""), launches);
            totals.refusals++;
        }
        const struct {
            const char *what;
            const void *dst;
            size_t count;
            int launches;
        } accepted[] = {
            {"count 0", dst, 0, 0},
            {"count 5", dst, 5, 1},
            {"count 64", dst, n, 1},
            {"dst right after src", (const char *)FAKE(0) + 4 * n, n, 1},
            {"dst right before src", (const char *)FAKE(0) - 2 * n, n, 1},
        };
        for (size_t i = 0; i < COUNT(accepted); ++i) {
            snprintf(where, sizeof where, "gg_to_fp16 cc=%d %s", cc, accepted[i].what);
            const int enqueued = fake.enqueued, conv = fake_kernel_launches(CONVERT_KERNEL);
            const gg_status st = gg_to_fp16(ctx, src, (void *)accepted[i].dst, accepted[i].count, NULL);
            if (st != GG_SUCCESS) fail_msg("%s: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
            EXPECT_EQ(fake_kernel_launches(CONVERT_KERNEL) - conv, accepted[i].launches);
            EXPECT_EQ(fake.enqueued - enqueued, accepted[i].launches);
            EXPECT_EQ(fake.refused_launches, 0);
            totals.to_fp16_calls++;
        }
        /* captured on the caller's stream: one launch whose arguments are src and dst */
        snprintf(where, sizeof where, "gg_to_fp16 cc=%d captured", cc);
        cudaStream_t s = NULL;
        assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
        assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
        fake_log_start();
        EXPECT_EQ(gg_to_fp16(ctx, src, dst, n, s), GG_SUCCESS);
        fake_log_stop();
        cudaGraph_t graph = NULL;
        assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
        const span in = span_of(src, 4 * n), out = span_of(dst, 2 * n);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), 1);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &in), 1);
        EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &out), 1);
        EXPECT(fake_log.n >= 1 && fake_log.entries[0].stream == s);
        fake_log_free();
        assert_int_equal(cudaGraphDestroy(graph), cudaSuccess);
        assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
        totals.to_fp16_calls++;
        destroy_ctx(ctx);
    }
}

/* A failed launch (fault injection: the next kernel launch) returns GG_ERROR_CUDA naming the launch and the CUDA
 * error, with nothing launched; the context then converts again and runs fp16 block calls with copies. */
static void to_fp16_launch_failure(void **state) {
    (void)state;
    for (size_t dv = 0; dv < COUNT(devices); ++dv) {
        const int cc = devices[dv];
        gg_ctx *ctx = make_ctx(cc, 0);
        snprintf(where, sizeof where, "gg_to_fp16 cc=%d failed launch", cc);
        fake.fail_kind = FAKE_LAUNCH;
        fake.fail_at = fake.calls[FAKE_LAUNCH] + 1;
        const int conv = fake_kernel_launches(CONVERT_KERNEL);
        EXPECT_EQ(gg_to_fp16(ctx, FAKE(0), FAKE(1), 1000, NULL), GG_ERROR_CUDA);
        EXPECT_EQ(fake.injected, 1);
        EXPECT_EQ(fake_kernel_launches(CONVERT_KERNEL), conv);
        /* the entry point, what failed, and the CUDA error */
        assert_message_has(ctx, "gg_to_fp16: launching the conversion kernel");
        assert_message_has(ctx, "cudaErrorLaunchOutOfResources");
        fake.fail_at = 0;
        snprintf(where, sizeof where, "gg_to_fp16 cc=%d after a failed launch", cc);
        EXPECT_EQ(gg_to_fp16(ctx, FAKE(0), FAKE(1), 1000, NULL), GG_SUCCESS);
        EXPECT_EQ(fake_kernel_launches(CONVERT_KERNEL), conv + 1);
        for (int block = 2; block <= 3; ++block) {
            const bw b = bw_with(bw_fake(block, GG_PRECISION_FP16, 4096, 1024, 4096), 0xf);
            const ran r = eager(ctx, &b);
            EXPECT_EQ(r.gemms, 4);
            EXPECT_EQ(r.conversions, block == 2 ? 1 : 0);
        }
        totals.to_fp16_calls += 2;
        destroy_ctx(ctx);
    }
}

/* ---- 6. the forwards ---- */

typedef struct fw {
    int block;          /* 2: gg_gelu_ffn_forward, 3: gg_mlp_forward */
    gg_gelu_ffn_desc d; /* block 3's: mlp_desc_of */
    gg_gelu_ffn_fwd_args a2;
    gg_mlp_fwd_args a3;
} fw;

static fw fw_fake(int block, gg_precision precision, int64_t M, int64_t D, int64_t F) {
    fw f;
    memset(&f, 0, sizeof f);
    f.block = block;
    f.d = (gg_gelu_ffn_desc){M, D, F, precision, 0};
    f.a2 = (gg_gelu_ffn_fwd_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5),
                                  FAKE(6), NULL,    NULL,    NULL,    NULL, NULL};
    f.a3 = (gg_mlp_fwd_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5),
                             FAKE(6), FAKE(7), NULL,    NULL,    NULL,    NULL, NULL};
    return f;
}
/* Copy k (CP_*): the weights' are inputs, X's and the activation's outputs. */
static void fw_set_copy(fw *f, int k, void *p) {
    if (f->block == 2) {
        if (k == CP_X) f->a2.hidden_states_fp16 = p;
        else if (k == CP_W1) f->a2.weight1_fp16 = p;
        else if (k == CP_W2) f->a2.weight2_fp16 = p;
        else f->a2.gelu_out_fp16 = p;
    } else {
        if (k == CP_X) f->a3.hidden_states_fp16 = p;
        else if (k == CP_W1) f->a3.weight1_fp16 = p;
        else if (k == CP_W2) f->a3.weight2_fp16 = p;
        else f->a3.intermediate_activated_fp16 = p;
    }
}
static fw fw_with(fw f, unsigned mask) {
    for (int k = 0; k < N_COPIES; ++k) fw_set_copy(&f, k, mask >> k & 1 ? FAKE(20 + k) : NULL);
    return f;
}
static gg_status fw_run(gg_ctx *ctx, const fw *f, gg_stream s) {
    if (f->block == 2) return gg_gelu_ffn_forward(ctx, &f->d, &f->a2, s);
    const gg_mlp_desc d = mlp_desc_of(&f->d);
    return gg_mlp_forward(ctx, &d, &f->a3, s);
}
static void expect_fw_refused(gg_ctx *ctx, const fw *f, gg_status status, const char *text1, const char *text2) {
    const int enqueued = fake.enqueued, planned = fake.planned;
    EXPECT_EQ(fw_run(ctx, f, NULL), status);
    assert_message_has(ctx, text1);
    if (text2) assert_message_has(ctx, text2);
    assert_message_has(ctx, f->block == 2 ? "gg_gelu_ffn_forward" : "gg_mlp_forward");
    EXPECT_EQ(fake.enqueued, enqueued);
    EXPECT_EQ(fake.planned, planned);
    totals.refusals++;
}

/* The forwards' copies: each refused in tf32 and fp32 naming the field and the precision, misaligned or in host
 * memory naming the field; an output copy over an input (weight1) or over another output, and an output over a
 * weight's copy, refused naming both; nothing planned or enqueued. */
static void forward_copies_validated(void **state) {
    (void)state;
    for (size_t dv = 0; dv < COUNT(devices); ++dv)
        for (int block = 2; block <= 3; ++block) {
            const int cc = devices[dv];
            gg_ctx *ctx = make_ctx(cc, 0);
            const gg_precision others[] = {GG_PRECISION_TF32, GG_PRECISION_FP32};
            for (size_t p = 0; p < COUNT(others); ++p)
                for (int k = 0; k < N_COPIES; ++k) {
                    snprintf(where, sizeof where, "forward block %d cc=%d %s in %s", block, cc, copy_name(block, k),
                             gg_precision_string(others[p]));
                    char field[96], prec[64];
                    snprintf(field, sizeof field, "args->%s is given", copy_name(block, k));
                    snprintf(prec, sizeof prec, "precision is %s", gg_precision_string(others[p]));
                    const fw f = fw_with(fw_fake(block, others[p], 256, 1024, 4096), 1u << k);
                    expect_fw_refused(ctx, &f, GG_ERROR_INVALID_ARGUMENT, field, prec);
                }
            for (int k = 0; k < N_COPIES; ++k) {
                char field[96];
                snprintf(field, sizeof field, "args->%s (", copy_name(block, k));
                snprintf(where, sizeof where, "forward block %d cc=%d %s misaligned", block, cc, copy_name(block, k));
                fw f = fw_with(fw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
                fw_set_copy(&f, k, (char *)FAKE(20 + k) + 8);
                expect_fw_refused(ctx, &f, GG_ERROR_MISALIGNED, field, "16-byte aligned");
                snprintf(where, sizeof where, "forward block %d cc=%d %s in host memory", block, cc,
                         copy_name(block, k));
                fw_set_copy(&f, k, HOST_PTR);
                expect_fw_refused(ctx, &f, GG_ERROR_INVALID_ARGUMENT, field, "is host memory");
            }
            fw f = fw_with(fw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            const void *w1 = block == 2 ? (const void *)f.a2.weight1 : (const void *)f.a3.weight1;
            void *out = block == 2 ? (void *)f.a2.output : (void *)f.a3.output;
            void *pre = block == 2 ? (void *)f.a2.linear1_out : (void *)f.a3.intermediate;
            snprintf(where, sizeof where, "forward block %d cc=%d hidden_states_fp16 over weight1", block, cc);
            fw_set_copy(&f, CP_X, (char *)w1 + 256);
            expect_fw_refused(ctx, &f, GG_ERROR_INVALID_ARGUMENT, "output args->hidden_states_fp16 overlaps input",
                              "args->weight1");
            snprintf(where, sizeof where, "forward block %d cc=%d activation's copy over output", block, cc);
            f = fw_with(fw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            fw_set_copy(&f, CP_ACT, out);
            expect_fw_refused(ctx, &f, GG_ERROR_INVALID_ARGUMENT, "output args->output overlaps output",
                              copy_name(block, CP_ACT));
            snprintf(where, sizeof where, "forward block %d cc=%d pre-activation over weight1_fp16", block, cc);
            f = fw_with(fw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            fw_set_copy(&f, CP_W1, (char *)pre + 1024);
            expect_fw_refused(ctx, &f, GG_ERROR_INVALID_ARGUMENT, "overlaps input args->weight1_fp16",
                              block == 2 ? "output args->linear1_out" : "output args->intermediate");
            destroy_ctx(ctx);
        }
}

/* The forwards in fp16 over a few token counts: without copies they convert X, W1, the activation and W2 (4);
 * with both weights' copies 2 fewer, each alone 1 fewer; with the output copies (X's, the activation's) as many
 * as without (written instead of the scratch); two GEMMs each time. Captured with all four: the two conversions
 * write the output copies, the GEMMs read every copy whole, and nothing touches the fp32 weights' conversion. */
static void forward_copies_skip_and_write(void **state) {
    (void)state;
    unsetenv("GG_FORWARD_GELU"); /* the GELU in the first GEMM's epilogue: act's copy by the conversion kernel */
    const int64_t tokens[] = {1, 512, 4096};
    for (size_t dv = 0; dv < COUNT(devices); ++dv)
        for (int block = 2; block <= 3; ++block) {
            const int cc = devices[dv];
            gg_ctx *ctx = make_ctx(cc, 0);
            for (size_t t = 0; t < COUNT(tokens); ++t) {
                const fw base = fw_fake(block, GG_PRECISION_FP16, tokens[t], 1024, 4096);
                const struct {
                    const char *what;
                    unsigned mask;
                    int fewer;
                } cases[] = {{"no copies", 0, 0},
                             {"both weights' copies", 1u << CP_W1 | 1u << CP_W2, 2},
                             {"weight1_fp16 alone", 1u << CP_W1, 1},
                             {"weight2_fp16 alone", 1u << CP_W2, 1},
                             {"the output copies", 1u << CP_X | 1u << CP_ACT, 0},
                             {"all four", 0xf, 2}};
                for (size_t c = 0; c < COUNT(cases); ++c) {
                    snprintf(where, sizeof where, "forward block %d cc=%d M=%lld %s", block, cc,
                             (long long)tokens[t], cases[c].what);
                    const fw f = fw_with(base, cases[c].mask);
                    const int conv = fake_kernel_launches(CONVERT_KERNEL), mm = fake.calls[FAKE_MATMUL];
                    const gg_status st = fw_run(ctx, &f, NULL);
                    if (st != GG_SUCCESS) fail_msg("%s: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
                    EXPECT_EQ(fake_kernel_launches(CONVERT_KERNEL) - conv, 4 - cases[c].fewer);
                    EXPECT_EQ(fake.calls[FAKE_MATMUL] - mm, 2);
                    totals.eager_calls++;
                }
            }
            /* captured (the shape planned above), all four copies */
            const int64_t M = 4096, D = 1024, F = 4096;
            snprintf(where, sizeof where, "forward block %d cc=%d M=%lld captured with all four", block, cc,
                     (long long)M);
            const fw f = fw_with(fw_fake(block, GG_PRECISION_FP16, M, D, F), 0xf);
            cudaStream_t s = NULL;
            assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
            assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
            fake_log_start();
            const gg_status st = fw_run(ctx, &f, s);
            fake_log_stop();
            cudaGraph_t graph = NULL;
            assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
            if (st != GG_SUCCESS) fail_msg("%s: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
            const span x16 = span_of(FAKE(20 + CP_X), (size_t)(M * D) * 2);
            const span w1_16 = span_of(FAKE(20 + CP_W1), (size_t)(F * D) * 2);
            const span w2_16 = span_of(FAKE(20 + CP_W2), (size_t)(D * F) * 2);
            const span act16 = span_of(FAKE(20 + CP_ACT), (size_t)(M * F) * 2);
            const span w1 = span_of(block == 2 ? f.a2.weight1 : f.a3.weight1, (size_t)(F * D) * 4);
            const span w2 = span_of(block == 2 ? f.a2.weight2 : f.a3.weight2, (size_t)(D * F) * 4);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), 2);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &x16), 1);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &act16), 1);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &w1_16) + kernels_in_log(CONVERT_KERNEL, &w2_16), 0);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &w1) + kernels_in_log(CONVERT_KERNEL, &w2), 0);
            EXPECT(gemm_reads_whole(x16) && gemm_reads_whole(act16));
            EXPECT(gemm_reads_whole(w1_16) && gemm_reads_whole(w2_16));
            EXPECT(!gemm_touches(w1) && !gemm_touches(w2));
            totals.logged_reads += 4;
            fake_log_free();
            assert_int_equal(cudaGraphDestroy(graph), cudaSuccess);
            assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
            destroy_ctx(ctx);
        }
}

/* ---- the pre-activation's copy (linear1_out_fp16 / intermediate_fp16), which changes the result ---- */

static const char *pre_copy_name(int block) { return block == 2 ? "linear1_out_fp16" : "intermediate_fp16"; }
static void bw_set_pre_copy(bw *b, const void *p) {
    if (b->block == 2) b->a2.linear1_out_fp16 = p;
    else b->a3.intermediate_fp16 = p;
}
#define GELU_GRAD_KERNELS(name) (strstr((name), "gelu_grad_kernel") || strstr((name), "GeluGradRow"))

/* The gelu' launches in the log that touch s. */
static int gelu_grads_touching(span s) {
    int n = 0;
    for (int i = 0; i < fake_log.n; ++i) {
        const fake_entry *e = &fake_log.entries[i];
        if (e->op == FAKE_OP_KERNEL && e->kernel && GELU_GRAD_KERNELS(e->kernel) && touches(e, s)) ++n;
    }
    return n;
}

/* Refused outside fp16 mode (naming the field and the precision), misaligned and in host memory, with nothing
 * enqueued; in fp16 mode, on both devices and on every route, read by gelu' in place of the fp32 pre-activation
 * (which nothing reads then), converted by nothing, and no conversion more or fewer than without it. */
static void pre_activation_copy(void **state) {
    (void)state;
    for (size_t dv = 0; dv < COUNT(devices); ++dv)
        for (int block = 2; block <= 3; ++block) {
            const int cc = devices[dv];
            gg_ctx *ctx = make_ctx(cc, 0);
            char field[96];
            snprintf(field, sizeof field, "args->%s is given", pre_copy_name(block));
            snprintf(where, sizeof where, "block %d cc=%d %s given in tf32", block, cc, pre_copy_name(block));
            bw b = bw_fake(block, GG_PRECISION_TF32, 256, 1024, 4096);
            bw_set_pre_copy(&b, FAKE(30));
            expect_refused(ctx, &b, GG_ERROR_INVALID_ARGUMENT, field, "precision is tf32");
            snprintf(field, sizeof field, "args->%s (", pre_copy_name(block));
            snprintf(where, sizeof where, "block %d cc=%d %s misaligned", block, cc, pre_copy_name(block));
            b = bw_with(bw_fake(block, GG_PRECISION_FP16, 256, 1024, 4096), 0xf);
            bw_set_pre_copy(&b, (const char *)FAKE(30) + 8);
            expect_refused(ctx, &b, GG_ERROR_MISALIGNED, field, "16-byte aligned");
            snprintf(where, sizeof where, "block %d cc=%d %s in host memory", block, cc, pre_copy_name(block));
            bw_set_pre_copy(&b, HOST_PTR);
            expect_refused(ctx, &b, GG_ERROR_INVALID_ARGUMENT, field, "is host memory");
            destroy_ctx(ctx);

            /* read in a graph's capture, at few tokens and above every route threshold */
            const int64_t tokens[] = {256, 2048};
            for (size_t t = 0; t < COUNT(tokens); ++t) {
                const int64_t M = tokens[t], D = 1024, F = 4096;
                snprintf(where, sizeof where, "block %d cc=%d M=%lld %s read by gelu'", block, cc, (long long)M,
                         pre_copy_name(block));
                ctx = make_ctx_prec(cc, 1, GG_PRECISION_FP16);
                owned o = {{0}, 0};
                bw with = bw_device(block, M, D, F, 1, &o);
                void *pre16 = dev(&o, (size_t)(M * F) * 2);
                const float *pre = block == 2 ? with.a2.linear1_out : with.a3.intermediate;
                const int64_t buckets[] = {M};
                gg_graph *g = NULL;
                EXPECT_EQ(bw_list_graph(ctx, &with, buckets, 1, &g), GG_SUCCESS);
                logged_graph_run(ctx, g, &with);
                const int conversions = kernels_in_log(CONVERT_KERNEL, NULL);
                EXPECT(gelu_grads_touching(span_of(pre, (size_t)(M * F) * 4)) > 0); /* without the copy: x fp32 */
                fake_log_free();
                bw_set_pre_copy(&with, pre16);
                logged_graph_run(ctx, g, &with);
                const span x16 = span_of(pre16, (size_t)(M * F) * 2), x = span_of(pre, (size_t)(M * F) * 4);
                EXPECT(gelu_grads_touching(x16) > 0);
                EXPECT_EQ(gelu_grads_touching(x), 0);
                EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &x16) + kernels_in_log(CONVERT_KERNEL, &x), 0);
                EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, NULL), conversions);
                EXPECT(!gemm_touches(x16));
                totals.logged_reads++;
                fake_log_free();
                gg_graph_destroy(g);
                owned_free(&o);
                destroy_ctx(ctx);
            }

            /* the forward writes it when asked: one conversion more, of the fp32 pre-activation into it */
            snprintf(where, sizeof where, "forward block %d cc=%d writing %s", block, cc, pre_copy_name(block));
            unsetenv("GG_FORWARD_GELU");
            ctx = make_ctx(cc, 0);
            const int64_t M = 512, F = 4096;
            fw f = fw_with(fw_fake(block, GG_PRECISION_FP16, M, 1024, F), 0xf);
            EXPECT_EQ(fw_run(ctx, &f, NULL), GG_SUCCESS); /* planned: the calls below only enqueue */
            int conversions = fake_kernel_launches(CONVERT_KERNEL);
            EXPECT_EQ(fw_run(ctx, &f, NULL), GG_SUCCESS);
            const int without = fake_kernel_launches(CONVERT_KERNEL) - conversions;
            if (block == 2) f.a2.linear1_out_fp16 = FAKE(30);
            else f.a3.intermediate_fp16 = FAKE(30);
            cudaStream_t s = NULL; /* the log records a capture's launches */
            assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
            assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
            fake_log_start();
            conversions = fake_kernel_launches(CONVERT_KERNEL);
            const gg_status st = fw_run(ctx, &f, s);
            fake_log_stop();
            cudaGraph_t graph = NULL;
            assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
            if (st != GG_SUCCESS) fail_msg("%s: %s: %s", where, gg_status_string(st), gg_last_error(ctx));
            EXPECT_EQ(fake_kernel_launches(CONVERT_KERNEL) - conversions, without + 1);
            const span x16 = span_of(FAKE(30), (size_t)(M * F) * 2);
            const span x = span_of(block == 2 ? f.a2.linear1_out : f.a3.intermediate, (size_t)(M * F) * 4);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &x16), 1);
            EXPECT_EQ(kernels_in_log(CONVERT_KERNEL, &x), 1);
            fake_log_free();
            assert_int_equal(cudaGraphDestroy(graph), cudaSuccess);
            assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
            totals.eager_calls += 2;
            /* and refuses it outside fp16 mode */
            fw tf32 = fw_fake(block, GG_PRECISION_TF32, M, 1024, F);
            if (block == 2) tf32.a2.linear1_out_fp16 = FAKE(30);
            else tf32.a3.intermediate_fp16 = FAKE(30);
            EXPECT_EQ(fw_run(ctx, &tf32, NULL), GG_ERROR_INVALID_ARGUMENT);
            assert_message_has(ctx, pre_copy_name(block));
            totals.refusals++;
            destroy_ctx(ctx);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backward_copies_validated),
        cmocka_unit_test(forward_copies_validated),
        cmocka_unit_test(copies_skip_conversions),
        cmocka_unit_test(copies_are_read_in_a_graph),
        cmocka_unit_test(narrow_copies_fork_after_w2),
        cmocka_unit_test(weight_gradients_fork),
        cmocka_unit_test(padded_graph_with_and_without_copies),
        cmocka_unit_test(step_with_copies),
        cmocka_unit_test(to_fp16_validated_and_launched),
        cmocka_unit_test(to_fp16_launch_failure),
        cmocka_unit_test(forward_copies_skip_and_write),
        cmocka_unit_test(pre_activation_copy),
    };
    const int failed = cmocka_run_group_tests_name("fp16_copies", tests, NULL, NULL);
    printf("FP16_COPIES {\"refusals\": %d, \"eager_calls\": %d, \"logged_reads\": %d, \"unread_weight_copies\": %d, "
           "\"graph_runs\": %d, \"step_runs\": %d, \"to_fp16_calls\": %d, \"race_pairs\": %ld}\n",
           totals.refusals, totals.eager_calls, totals.logged_reads, totals.unread_weights, totals.graph_runs,
           totals.step_runs, totals.to_fp16_calls, totals.race_pairs);
    return failed;
}
