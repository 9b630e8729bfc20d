/*
 * test_routes.c - every route of blocks 2, 3 and 4 planned and run on the CPU, on the CUDA fakes
 * (tests/fake/fake_cuda.c) as a 9.0 device (fake.compute_capability = 90: an H100/H200, so the context has has_wgmma
 * and blocks 2/3 in fp16 mode run G and/or dX in gemm_f32w.cu, block 4 its fused kernel), as a 10.0 device (a B200:
 * sm_90a code does not run there, so no sm_90a route) and as the default device (no sm_90a route). Blocks 2 and 3 in
 * every precision over tokens at and around every threshold of src/blocks/ffn.c (the route's 512 and 1024, the TF32 G's
 * 512, ...) and a few large (odd k: cuBLASLt's split-k not trusted), hidden and ffn from a set of multiples of 64 (and
 * 1544, which no fast route takes), in pairs, both orders; block 4 over src/blocks/ssm_gate.c's thresholds (the
 * one-launch route's 256, the narrow rows' 1500 and 10000, the fused route's 32768, the bias sum's place) with SiLU on
 * and off. Each shape: an eager call and the first and second run of a graph with that one bucket must return
 * GG_SUCCESS, leave no stream capturing, and, with context and graph destroyed, leave nothing alive (the fakes count
 * every resource). What each call ran is checked too: blocks 2/3 run their four GEMMs exactly once each, in cuBLASLt or
 * gemm_f32w.cu (a GEMM that no route plans, the bug 5808b6b fixed, is caught here even without matmul.c's check), block
 * 4 its one-launch kernel, its fused kernel and dW, or its two GEMMs; the sm_90a kernels only on the 9.0 device, in
 * fp16 mode, on shapes they take; no launch or tensor map the runtime would refuse. Every graph's capture is free of
 * races (fake_order.h: two operations on the same bytes, one writing, neither before the other by the capture's streams
 * and events). Prints `ROUTES {...}`; GG_ROUTES_VERBOSE=1 prints every failure (else the first 40).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "block_calls.h"
#include "fake_cuda.h"
#include "fake_order.h"
#include "gradgraph.h"
#include "internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Tokens at and around ffn.c's thresholds, gemm_f32w.cu's token tiles (256, and the wide 320 where it saves a tile)
 * and matmul.c's (a dW GEMM's tail apart from 10240), and a few large. */
static const int64_t ffn_tokens[] = {1,    2,    255,  256,  257,  320,   321,   511,   512,   513,  640,
                                     641,  960,  961,  1023, 1024, 1025,  2047,  2048,  2049,  4096, 10239,
                                     10240, 10241, 32767, 32769, 65537};
/* Tokens at and around ssm_gate.c's (the one-launch route, the narrow rows, the fused route) and matmul.c's. */
static const int64_t ssm_tokens[] = {1,     2,     255,   256,   257,   1499,  1500,  1501,  9999,  10000,
                                     10001, 10239, 10240, 10241, 32767, 32768, 32769, 65536, 65537};
/* hidden and ffn (block 4: hidden and expanded): multiples of 64, of 128 and not, and 1544 (8 x 193). */
static const int64_t dims[] = {64, 128, 192, 256, 320, 384, 1024, 1536, 1544, 2048, 2816, 6144};
static const gg_precision precisions[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};

/* One block call (block_calls.h: blocks 2, 3 or 4) on one fake device. */
typedef struct route_case {
    block_case call;
    int cc; /* fake.compute_capability: 90, 100 or 0 */
} route_case;

static struct {
    int calls, failures, cases;
    int printed, verbose;
    /* what ran, counted per eager call on the 9.0 device */
    int f32w_one, f32w_two, fused, small;
    int f32w_default; /* ... on the default device: must stay 0 */
    int tails;    /* eager calls that ran a dW GEMM's tail apart (matmul.c) */
    long race_pairs; /* pairs of operations on the same bytes, one writing, checked for order in the captures */
} sweep;

static const char *prec_name(gg_precision p) {
    return p == GG_PRECISION_FP16 ? "fp16" : p == GG_PRECISION_TF32 ? "tf32" : "fp32";
}

static void route_fail(const route_case *c, const char *path, const char *fmt, ...) {
    ++sweep.failures;
    if (!sweep.verbose && ++sweep.printed > 40) return;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->call.block == 4)
        printf("ROUTE FAIL block 4 M=%lld H=%lld E=%lld silu=%d cc=%d %s: %s\n", (long long)c->call.tokens,
               (long long)c->call.dim0, (long long)c->call.dim1, c->call.silu, c->cc, path, what);
    else
        printf("ROUTE FAIL block %d %s M=%lld D=%lld F=%lld cc=%d %s: %s\n", c->call.block,
               prec_name(c->call.precision), (long long)c->call.tokens, (long long)c->call.dim0,
               (long long)c->call.dim1, c->cc, path, what);
}

/* The launches of gradgraph's own GEMM kernels at the last counts_clear. */
static int f32w_base, fused_base, small_base;

/* Clears the counts of what a call runs. */
static void counts_clear(void) {
    memset(fake.calls, 0, sizeof fake.calls);
    fake.launches = fake.cluster_launches = fake.refused_launches = fake.refused_tensor_maps = 0;
    fake.graph_launches = fake.captures = fake.tail_matmuls = fake.tail_matmuls_beside = 0;
    f32w_base = fake_kernel_launches("gemm_f32w_kernel");
    fused_base = fake_kernel_launches("ssm_fused_kernel");
    small_base = fake_kernel_launches("ssm_small_kernel");
}
/* Launches since counts_clear. */
static int f32w_launches(void) { return fake_kernel_launches("gemm_f32w_kernel") - f32w_base; }
static int fused_launches(void) { return fake_kernel_launches("ssm_fused_kernel") - fused_base; }
static int small_launches(void) { return fake_kernel_launches("ssm_small_kernel") - small_base; }

/* Whether gemm_f32w.cu takes C[M,N] = A[M,K] @ B[K,N] (gg_k_gemm_f32w_supported's shape rule). */
static int f32w_takes(int64_t N, int64_t K) { return N % 128 == 0 && K % 64 == 0; }

/* What one call (eager, or a graph's first run: its capture) ran, against the rules every route keeps. */
static void check_ran(const route_case *c, const char *path) {
    /* a dW GEMM of a k not a multiple of 128 may run as two cuBLASLt calls, its multiple of 128 and the rest
     * (matmul.c) */
    const int tails = fake.tail_matmuls, matmuls = fake.calls[FAKE_MATMUL] - tails, f32w = f32w_launches(),
              fused = fused_launches(), small = small_launches();
    if (tails > (c->call.block == 4 ? 1 : 2) || (tails && c->call.tokens % 128 == 0))
        route_fail(c, path, "%d GEMMs of a tail apart at %lld tokens: at most one per dW GEMM, at a k not a multiple "
                   "of 128", tails, (long long)c->call.tokens);
    if (fake.refused_launches) route_fail(c, path, "%d launches the runtime would refuse", fake.refused_launches);
    if (fake.refused_tensor_maps)
        route_fail(c, path, "%d tensor maps the driver would refuse", fake.refused_tensor_maps);
    if (c->call.block != 4) {
        if (matmuls + f32w != 4)
            route_fail(c, path, "%d cuBLASLt GEMMs and %d gemm_f32w launches: the four GEMMs must run once each",
                       matmuls, f32w);
        if (f32w && (c->cc != 90 || c->call.precision != GG_PRECISION_FP16))
            route_fail(c, path, "gemm_f32w ran %d times, not in fp16 mode on a 9.0 device", f32w);
        if (f32w && !f32w_takes(c->call.dim1, c->call.dim0) && !f32w_takes(c->call.dim0, c->call.dim1))
            route_fail(c, path, "gemm_f32w ran on a shape it does not take (G's nor dX's)");
        if (f32w == 2 && !(f32w_takes(c->call.dim1, c->call.dim0) && f32w_takes(c->call.dim0, c->call.dim1)))
            route_fail(c, path, "gemm_f32w ran twice but takes only one of G's and dX's shapes");
        if (fused || small) route_fail(c, path, "block 4's kernels ran");
        return;
    }
    if (f32w) route_fail(c, path, "gemm_f32w ran in block 4");
    if (small > 1 || fused > 1) route_fail(c, path, "%d one-launch and %d fused launches", small, fused);
    if (small && (matmuls || fused))
        route_fail(c, path, "the one-launch kernel and %d GEMMs, %d fused", matmuls, fused);
    if (fused && matmuls != 1) route_fail(c, path, "the fused kernel and %d GEMMs (dW only expected)", matmuls);
    if (fused && (c->cc != 90 || c->call.dim0 % 64 || c->call.dim1 % 128))
        route_fail(c, path, "the fused kernel ran without a 9.0 device or on a shape it does not take");
    if (!small && !fused && matmuls != 2) route_fail(c, path, "%d GEMMs, neither of the own kernels", matmuls);
}

static gg_ctx *make_ctx(int cc) {
    fake_reset(1);
    fake.plan_ok = 1;
    fake.compute_capability = cc;
    fake.device_space = 1; /* device memory at addresses as far apart as its sizes: the captures' ranges are real */
    gg_config config = GG_CONFIG_INIT;
    config.autotune = 0;
    gg_ctx *ctx = NULL;
    if (gg_ctx_create(&config, &ctx) != GG_SUCCESS) return NULL;
    counts_clear();
    return ctx;
}

/* A one-bucket graph's first run (capture, instantiate, launch) and second (a replay); `device`: the graph
 * device-selected and both runs gg_*_graph_run_device (staging, the selection kernel, the conditional node). */
static void graph_path(gg_ctx *ctx, const route_case *c, int device) {
    gg_graph *g = NULL;
    gg_status st = block_call_graph(ctx, &c->call, device, &g);
    if (st != GG_SUCCESS)
        route_fail(c, device ? "device graph create" : "graph create", "%s: %s", gg_status_string(st),
                   gg_last_error(ctx));
    if (fake.captures_open) route_fail(c, "graph create", "a stream is left capturing");
    for (int run = 0; run < 2 && st == GG_SUCCESS; ++run) {
        const char *path = device ? (run ? "device graph replay" : "device graph run")
                                  : (run ? "graph replay" : "graph run");
        counts_clear();
        ++sweep.calls;
        if (run == 0) fake_log_start();
        st = block_call_run(ctx, g, &c->call, 0, device);
        if (run == 0) { /* the capture: every pair of operations on the same bytes, one writing, is ordered */
            fake_log_stop();
            const fake_races r = fake_check_races(0, sweep.verbose ? 3 : 0);
            sweep.race_pairs += r.pairs;
            if (r.races || fake_log.truncated)
                route_fail(c, path, "%d races among %d ops (%d pairs on shared bytes), %d entries truncated",
                           r.races, r.ops, r.pairs, fake_log.truncated);
            fake_log_free();
        }
        if (st != GG_SUCCESS) route_fail(c, path, "%s: %s", gg_status_string(st), gg_last_error(ctx));
        if (fake.captures_open) route_fail(c, path, "a stream is left capturing");
        if (st != GG_SUCCESS) break;
        if (fake.graph_launches != 1) route_fail(c, path, "%d graph launches", fake.graph_launches);
        if (run == 0) {
            if (fake.captures < 1) route_fail(c, path, "nothing captured");
            check_ran(c, path); /* (a device graph also captures its staging and selection kernels) */
        } else if (fake.captures || fake.calls[FAKE_MATMUL] || fake.launches) {
            route_fail(c, path, "a replay captured %d times, launched %d kernels and %d GEMMs", fake.captures,
                       fake.launches, fake.calls[FAKE_MATMUL]);
        }
    }
    gg_graph_destroy(g);
}

/* One shape: eager, then a one-bucket graph's two runs, host- and device-selected. */
static void run_case(const route_case *c) {
    ++sweep.cases;
    gg_ctx *ctx = make_ctx(c->cc);
    if (!ctx) {
        route_fail(c, "context", "gg_ctx_create: %s", gg_last_error(NULL));
        return;
    }
    if (ctx->has_wgmma != (c->cc == 90)) route_fail(c, "context", "has_wgmma %d", ctx->has_wgmma);

    ++sweep.calls;
    gg_status st = block_call_run(ctx, NULL, &c->call, 0, 0);
    if (st != GG_SUCCESS) route_fail(c, "eager", "%s: %s", gg_status_string(st), gg_last_error(ctx));
    if (fake.captures_open) route_fail(c, "eager", "a stream is left capturing");
    if (st == GG_SUCCESS) {
        check_ran(c, "eager");
        sweep.tails += fake.tail_matmuls > 0;
        const int f32w = f32w_launches();
        if (c->cc == 90) {
            sweep.f32w_one += f32w == 1;
            sweep.f32w_two += f32w == 2;
            sweep.fused += fused_launches() == 1;
            sweep.small += small_launches() == 1;
        } else {
            sweep.f32w_default += f32w + fused_launches();
        }
    }

    graph_path(ctx, c, 0);
    graph_path(ctx, c, 1);
    gg_ctx_destroy(ctx);
    if (fake.live) route_fail(c, "teardown", "%d resources leaked", fake.live);
}

/* Blocks 2 and 3, every precision, every pair of dims both ways, on the device `cc`. */
static void sweep_ffn(int cc) {
    for (int block = 2; block <= 3; ++block)
        for (size_t p = 0; p < COUNT(precisions); ++p)
            for (size_t t = 0; t < COUNT(ffn_tokens); ++t)
                for (size_t i = 0; i < COUNT(dims); ++i)
                    for (size_t j = 0; j < COUNT(dims); ++j) {
                        const route_case c = {
                            {block, ffn_tokens[t], dims[i], dims[j], precisions[p], 0, (int)((t + i + j) & 1), 0}, cc};
                        run_case(&c);
                    }
}

/* Block 4, SiLU off and on, every pair of dims both ways, on the device `cc`. */
static void sweep_ssm(int cc) {
    for (int silu = 0; silu <= 1; ++silu)
        for (size_t t = 0; t < COUNT(ssm_tokens); ++t)
            for (size_t i = 0; i < COUNT(dims); ++i)
                for (size_t j = 0; j < COUNT(dims); ++j) {
                    const route_case c = {
                        {4, ssm_tokens[t], dims[i], dims[j], GG_PRECISION_DEFAULT, silu, (int)((t + i + j) & 1), 0},
                        cc};
                    run_case(&c);
                }
}

static void every_route(void **state) {
    (void)state;
    const char *verbose = getenv("GG_ROUTES_VERBOSE");
    sweep.verbose = verbose && *verbose && strcmp(verbose, "0") != 0;
    sweep_ffn(90);
    sweep_ssm(90);
    sweep_ffn(100); /* a B200 */
    sweep_ssm(100);
    sweep_ffn(0);
    sweep_ssm(0);
    printf("ROUTES {\"calls\": %d, \"failures\": %d, \"shapes\": %d, \"f32w_one\": %d, \"f32w_both\": %d, "
           "\"ssm_fused\": %d, \"ssm_small\": %d, \"tail_apart\": %d, \"race_pairs\": %ld}\n",
           sweep.calls, sweep.failures, sweep.cases, sweep.f32w_one, sweep.f32w_two, sweep.fused, sweep.small,
           sweep.tails, sweep.race_pairs);
    /* the sweep reached the sm_90a routes on the 9.0 device (else it proves nothing about them), never elsewhere */
    assert_true(sweep.f32w_one > 0);
    assert_true(sweep.f32w_two > 0);
    assert_true(sweep.fused > 0);
    assert_true(sweep.small > 0);
    assert_true(sweep.tails > 0);
    assert_int_equal(sweep.f32w_default, 0);
    assert_int_equal(fake.unnamed_launches, 0);
    assert_int_equal(sweep.failures, 0);
}

/* The 9.0 device's context: has_wgmma and an H200's cluster capacity; GG_HOPPER_KERNELS=0 and a capacity probe that
 * fails both turn the sm_90a routes off, and a shape that would take gemm_f32w then runs in cuBLASLt. */
static void hopper_context(void **state) {
    (void)state;
    const route_case c = {{2, 256, 1024, 1024, GG_PRECISION_FP16, 0, 0, 0}, 90};
    static const int h200[] = {0, 132, 66, 39, 30, 22, 17, 15, 15};
    for (int variant = 0; variant < 3; ++variant) {
        if (variant == 1) setenv("GG_HOPPER_KERNELS", "0", 1);
        gg_ctx *ctx = NULL;
        fake_reset(1);
        fake.plan_ok = 1;
        fake.compute_capability = 90;
        fake.fail_occupancy = variant == 2;
        gg_config config = GG_CONFIG_INIT;
        config.autotune = 0;
        assert_int_equal(gg_ctx_create(&config, &ctx), GG_SUCCESS);
        unsetenv("GG_HOPPER_KERNELS");
        assert_int_equal(ctx->has_wgmma, variant == 0);
        if (variant == 0) {
            assert_int_equal(fake.occupancy_queries, 16); /* clusters of 1-8, of either tile's kernel */
            assert_memory_equal(ctx->f32w_clusters, h200, sizeof h200);
        }
        counts_clear();
        assert_int_equal(block_call_run(ctx, NULL, &c.call, 0, 0), GG_SUCCESS);
        assert_int_equal(f32w_launches(), variant == 0 ? 2 : 0); /* G and dX at 256 tokens */
        assert_int_equal(fake.calls[FAKE_MATMUL] + f32w_launches(), 4);
        if (variant == 0) assert_int_equal(fake.cluster_launches, 2);
        gg_ctx_destroy(ctx);
        assert_int_equal(fake.live, 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(hopper_context), cmocka_unit_test(every_route)};
    return cmocka_run_group_tests_name("routes", tests, NULL, NULL);
}
