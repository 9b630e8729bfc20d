/*
 * test_api.c - the public API on a machine without a GPU: status strings, config versioning, context creation
 * and its failure paths, and argument validation of every block.
 *
 * The CUDA runtime and cuBLASLt calls the library makes are replaced at link time (-Wl,--wrap, see
 * tests/CMakeLists.txt) by the fakes of tests/fake/fake_cuda.c. They hand out fake handles, count what is alive, can
 * fail the N-th resource creation, and count every call that would put work on a stream: a rejected call must make
 * none.
 */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "fake_cuda.h"
#include "held_call.h"
#include "gradgraph.h"

/* ---- helpers ---- */
#define assert_message_has(ctx, text)                                                                              \
    do {                                                                                                           \
        const char *msg_ = gg_last_error(ctx);                                                                     \
        if (!strstr(msg_, (text))) fail_msg("message \"%s\" does not contain \"%s\"", msg_, (text));             \
    } while (0)

static gg_ctx *make_ctx(void) {
    fake_reset(1);
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(NULL, &ctx), GG_SUCCESS);
    assert_non_null(ctx);
    fake.enqueued = 0;
    fake.planned = 0;
    return ctx;
}

static void destroy_ctx(gg_ctx *ctx) {
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

static gg_mlp_desc mlp_desc(void) { return (gg_mlp_desc){.tokens = 64, .hidden = 2048, .ffn = 8192}; }
static gg_mlp_args mlp_args(void) {
    return (gg_mlp_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7), FAKE(8), FAKE(9),
                         FAKE(10), NULL, NULL, NULL, NULL, NULL, NULL};
}
static gg_gelu_ffn_desc ffn_desc(void) { return (gg_gelu_ffn_desc){.tokens = 64, .hidden = 1536, .ffn = 6144}; }
static gg_gelu_ffn_args ffn_args(void) {
    return (gg_gelu_ffn_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6),
                              FAKE(7), FAKE(8), FAKE(9), NULL,    NULL,    NULL,    NULL,    NULL, NULL};
}
static gg_ssm_gate_desc ssm_desc(int silu) {
    return (gg_ssm_gate_desc){.tokens = 64, .hidden = 768, .expanded = 1536, .use_silu_gate = silu};
}
static gg_ssm_gate_args ssm_args(void) {
    return (gg_ssm_gate_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7), FAKE(8), FAKE(9)};
}
static gg_tanh_gate_desc tanh_desc(void) { return (gg_tanh_gate_desc){.tokens = 64, .hidden = 4096}; }
static gg_tanh_gate_args tanh_args(void) {
    return (gg_tanh_gate_args){FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6)};
}

/* Runs an MLP call that must be rejected with `status` and a message containing `text`, with nothing enqueued. */
/* The graph config of most graph tests: buckets of 128 .. 1024 tokens, the rest the defaults. */
static gg_graph_config config_to_1024(void) {
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 1024;
    return gc;
}

/* Block 1's graph (tanh_desc) made with gc, which must succeed. */
static gg_graph *tanh_graph(gg_ctx *ctx, const gg_graph_config *gc) {
    const gg_tanh_gate_desc td = tanh_desc();
    gg_graph *g = NULL;
    assert_int_equal(gg_tanh_gate_graph_create(ctx, &td, gc, &g), GG_SUCCESS);
    assert_non_null(g);
    return g;
}

static void expect_mlp_rejected(gg_ctx *ctx, const gg_mlp_desc *d, const gg_mlp_args *a, gg_status status,
                                const char *text) {
    fake.enqueued = fake.planned = 0;
    assert_int_equal(gg_mlp_backward(ctx, d, a, NULL), status);
    assert_message_has(ctx, text);
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.planned, 0);
}

/* ---- status, version, config ---- */
static void status_strings_name_every_status(void **state) {
    (void)state;
    const struct {
        gg_status s;
        const char *name;
    } all[] = {{GG_SUCCESS, "GG_SUCCESS"},
               {GG_ERROR_INVALID_ARGUMENT, "GG_ERROR_INVALID_ARGUMENT"},
               {GG_ERROR_MISALIGNED, "GG_ERROR_MISALIGNED"},
               {GG_ERROR_UNSUPPORTED, "GG_ERROR_UNSUPPORTED"},
               {GG_ERROR_VERSION, "GG_ERROR_VERSION"},
               {GG_ERROR_OUT_OF_MEMORY, "GG_ERROR_OUT_OF_MEMORY"},
               {GG_ERROR_NO_DEVICE, "GG_ERROR_NO_DEVICE"},
               {GG_ERROR_CUDA, "GG_ERROR_CUDA"},
               {GG_ERROR_CUBLAS, "GG_ERROR_CUBLAS"},
               {GG_ERROR_INTERNAL, "GG_ERROR_INTERNAL"},
               {GG_ERROR_NCCL, "GG_ERROR_NCCL"}, {GG_ERROR_PEER, "GG_ERROR_PEER"},
               {GG_ERROR_PARTIAL, "GG_ERROR_PARTIAL"}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        const char *s = gg_status_string(all[i].s);
        assert_int_equal(strncmp(s, all[i].name, strlen(all[i].name)), 0);
        assert_int_equal(s[strlen(all[i].name)], ':'); /* the whole name, not a prefix of another */
    }
    assert_string_equal(gg_status_string((gg_status)1234), "unknown gg_status");
}

static void precision_and_version_strings(void **state) {
    (void)state;
    assert_string_equal(gg_precision_string(GG_PRECISION_FP32), "fp32");
    assert_string_equal(gg_precision_string(GG_PRECISION_TF32), "tf32");
    assert_string_equal(gg_precision_string(GG_PRECISION_FP16), "fp16");
    assert_string_equal(gg_precision_string(GG_PRECISION_BF16), "bf16");
    assert_string_equal(gg_precision_string((gg_precision)99), "unknown");
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", GG_VERSION_MAJOR, GG_VERSION_MINOR, GG_VERSION_PATCH);
    assert_string_equal(gg_version_string(), expected);
}

static void create_rejects_null_out(void **state) {
    (void)state;
    fake_reset(1);
    assert_int_equal(gg_ctx_create(NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "out is NULL");
}

/* A bad config fails before any CUDA call, with *out cleared. */
static void expect_config_rejected(gg_config config, gg_status status, const char *text) {
    fake_reset(1);
    gg_ctx *ctx = (gg_ctx *)FAKE(0);
    assert_int_equal(gg_ctx_create(&config, &ctx), status);
    assert_null(ctx);
    assert_message_has(NULL, text);
    assert_int_equal(fake.cuda_calls, 0);
}

static void create_rejects_wrong_struct_size(void **state) {
    (void)state;
    gg_config c = GG_CONFIG_INIT;
    c.struct_size -= 8; /* a caller built against an older, smaller gg_config */
    expect_config_rejected(c, GG_ERROR_VERSION, "config->struct_size");
}

static void create_rejects_wrong_version(void **state) {
    (void)state;
    gg_config c = GG_CONFIG_INIT;
    c.version = GG_CONFIG_VERSION + 1;
    expect_config_rejected(c, GG_ERROR_VERSION, "config->version = 2");
}

static void create_rejects_bad_fields(void **state) {
    (void)state;
    gg_config c = GG_CONFIG_INIT;
    c.device = -1;
    expect_config_rejected(c, GG_ERROR_INVALID_ARGUMENT, "config->device = -1 is negative");
    c = (gg_config)GG_CONFIG_INIT;
    c.precision = GG_PRECISION_BF16;
    expect_config_rejected(c, GG_ERROR_UNSUPPORTED, "config->precision = bf16");
    c = (gg_config)GG_CONFIG_INIT;
    c.precision = (gg_precision)17;
    expect_config_rejected(c, GG_ERROR_INVALID_ARGUMENT, "config->precision = 17");
    c = (gg_config)GG_CONFIG_INIT;
    c.log_level = (gg_log_level)9;
    expect_config_rejected(c, GG_ERROR_INVALID_ARGUMENT, "config->log_level = 9");
    c = (gg_config)GG_CONFIG_INIT;
    c.overlap = (gg_overlap)3;
    expect_config_rejected(c, GG_ERROR_INVALID_ARGUMENT, "config->overlap = 3");
}

static void create_without_device(void **state) {
    (void)state;
    fake_reset(0);
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(NULL, &ctx), GG_ERROR_NO_DEVICE);
    assert_null(ctx);
    assert_message_has(NULL, "no CUDA device");
    fake_reset(2);
    gg_config c = GG_CONFIG_INIT;
    c.device = 2;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_ERROR_NO_DEVICE);
    assert_message_has(NULL, "config->device = 2 but only 2 device(s)");
    assert_int_equal(fake.live, 0);
}

static void create_and_destroy(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    /* two default workspaces, plus the reductions' counters and block 1's partial-sum slots (a few KiB) */
    const size_t workspaces = 2 * ((size_t)32 << 20), bytes = gg_ctx_device_bytes(ctx);
    assert_true(bytes > workspaces && bytes < workspaces + ((size_t)64 << 10));
    assert_string_equal(gg_last_error(ctx), "");
    destroy_ctx(ctx);
    gg_ctx_destroy(NULL); /* a no-op */
}

/* Every resource creation of gg_ctx_create fails in turn: each failure is reported and leaks nothing. */
static void create_failure_paths_leak_nothing(void **state) {
    (void)state;
    fake_reset(1);
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(NULL, &ctx), GG_SUCCESS);
    const int creations = fake.creates;
    gg_ctx_destroy(ctx);
    assert_true(creations >= 9); /* 2 streams, 3 events, cuBLASLt, 2 workspaces, the counter */
    for (int n = 1; n <= creations; ++n) {
        fake_reset(1);
        fake.fail_create_at = n;
        ctx = (gg_ctx *)FAKE(0);
        gg_status st = gg_ctx_create(NULL, &ctx);
        assert_int_not_equal(st, GG_SUCCESS);
        assert_true(st == GG_ERROR_CUDA || st == GG_ERROR_CUBLAS || st == GG_ERROR_OUT_OF_MEMORY);
        assert_null(ctx);
        assert_int_equal(fake.live, 0);
        assert_message_has(NULL, "gg_ctx_create: ");
    }
    /* and every host allocation (the context, its autotune cache and its path): GG_ERROR_OUT_OF_MEMORY saying so */
    int hits = 0;
    for (int k = 1;; ++k) {
        fake_reset(1);
        fake.fail_kind = FAKE_HOST_MEMORY;
        fake.fail_at = k;
        ctx = (gg_ctx *)FAKE(0);
        const gg_status st = gg_ctx_create(NULL, &ctx);
        const int hit = fake.injected > 0;
        fake.fail_at = 0;
        if (!hit) {
            assert_int_equal(st, GG_SUCCESS);
            gg_ctx_destroy(ctx);
            assert_int_equal(fake.live, 0);
            break;
        }
        ++hits;
        assert_int_equal(st, GG_ERROR_OUT_OF_MEMORY);
        assert_null(ctx);
        assert_int_equal(fake.live, 0);
        assert_message_has(NULL, "gg_ctx_create: out of host memory");
    }
    assert_true(hits >= 3);
}

static int log_calls;
static char log_last[512];
static void on_log(void *user, gg_log_level level, const char *message) {
    assert_ptr_equal(user, &log_calls);
    if (level == GG_LOG_ERROR) {
        ++log_calls;
        snprintf(log_last, sizeof log_last, "%s", message);
    }
}

static void log_callback_gets_errors(void **state) {
    (void)state;
    fake_reset(1);
    gg_config c = GG_CONFIG_INIT;
    c.log_fn = on_log;
    c.log_user_data = &log_calls;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    log_calls = 0;
    gg_mlp_desc d = mlp_desc();
    d.tokens = -5;
    gg_mlp_args a = mlp_args();
    assert_int_equal(gg_mlp_backward(ctx, &d, &a, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(log_calls, 1);
    assert_string_equal(log_last, gg_last_error(ctx));
    destroy_ctx(ctx);
}

/* ---- block argument validation ---- */
static void null_ctx_desc_args_every_block(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    gg_gelu_ffn_desc fd = ffn_desc();
    gg_gelu_ffn_args fa = ffn_args();
    gg_mlp_desc md = mlp_desc();
    gg_mlp_args ma = mlp_args();
    gg_ssm_gate_desc sd = ssm_desc(1);
    gg_ssm_gate_args sa = ssm_args();
    assert_int_equal(gg_tanh_gate_backward(NULL, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_tanh_gate_backward: ctx is NULL");
    assert_int_equal(gg_tanh_gate_backward(ctx, NULL, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc is NULL");
    assert_int_equal(gg_gelu_ffn_backward(ctx, &fd, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_gelu_ffn_backward: args is NULL");
    assert_int_equal(gg_gelu_ffn_backward(NULL, &fd, &fa, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_gelu_ffn_backward: ctx is NULL");
    assert_int_equal(gg_mlp_backward(NULL, &md, &ma, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gg_ssm_gate_backward(ctx, NULL, &sa, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gg_ssm_gate_backward(NULL, &sd, &sa, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(fake.enqueued, 0);
    destroy_ctx(ctx);
}

static void tokens_zero_negative_and_too_large(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_args a = mlp_args();
    gg_mlp_desc d = mlp_desc();
    d.tokens = 0;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->tokens = 0: an empty batch");
    d.tokens = -1;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->tokens = -1 is negative");
    d.tokens = (int64_t)INT32_MAX + 1;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->tokens = 2147483648 exceeds");
    destroy_ctx(ctx);
}

static void dims_must_be_positive_multiples_of_8(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_args a = mlp_args();
    gg_mlp_desc d = mlp_desc();
    d.hidden = 2044;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->hidden = 2044 is not a multiple of 8");
    d = mlp_desc();
    d.ffn = 0;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->ffn = 0 must be positive");
    d = mlp_desc();
    d.ffn = -8;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->ffn = -8 must be positive");
    d = mlp_desc();
    d.hidden = (int64_t)1 << 40;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->hidden = 1099511627776 exceeds");
    /* the other blocks use the same checks, with their own field names */
    gg_ssm_gate_desc sd = ssm_desc(0);
    gg_ssm_gate_args sa = ssm_args();
    sd.expanded = 1537;
    assert_int_equal(gg_ssm_gate_backward(ctx, &sd, &sa, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_ssm_gate_backward: desc->expanded = 1537 is not a multiple of 8");
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    td.hidden = 4;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc->hidden = 4 is not a multiple of 8");
    assert_int_equal(fake.enqueued, 0);
    destroy_ctx(ctx);
}

static void tensor_bytes_overflow(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_args a = mlp_args();
    gg_mlp_desc d = {.tokens = INT32_MAX, .hidden = 2147483640, .ffn = 2147483640}; /* 2^31 x 2^31 x 4 B */
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "does not fit in 2^63 bytes");
    destroy_ctx(ctx);
}

/* Every tensor of the MLP block, NULL in turn, is named in the message. */
static void every_null_tensor_is_named(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    const char *names[] = {"grad_output",  "hidden_states", "weight1",      "weight2",      "intermediate",
                           "intermediate_activated", "grad_hidden_states", "grad_weight1", "grad_bias1",
                           "grad_weight2", "grad_bias2"};
    const size_t offsets[] = {
        offsetof(gg_mlp_args, grad_output),        offsetof(gg_mlp_args, hidden_states),
        offsetof(gg_mlp_args, weight1),            offsetof(gg_mlp_args, weight2),
        offsetof(gg_mlp_args, intermediate),       offsetof(gg_mlp_args, intermediate_activated),
        offsetof(gg_mlp_args, grad_hidden_states), offsetof(gg_mlp_args, grad_weight1),
        offsetof(gg_mlp_args, grad_bias1),         offsetof(gg_mlp_args, grad_weight2),
        offsetof(gg_mlp_args, grad_bias2)};
    gg_mlp_desc d = mlp_desc();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        gg_mlp_args a = mlp_args();
        *(void **)((char *)&a + offsets[i]) = NULL;
        char expected[96];
        snprintf(expected, sizeof expected, "args->%s is NULL", names[i]);
        expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, expected);
    }
    destroy_ctx(ctx);
}

static void misaligned_pointer_says_alignment(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc d = mlp_desc();
    gg_mlp_args a = mlp_args();
    a.weight2 = (const float *)((const char *)a.weight2 + 4);
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_MISALIGNED, "args->weight2 (0x");
    assert_message_has(ctx, "is not 16-byte aligned");
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    ta.grad_gate = (char *)ta.grad_gate + 2;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_MISALIGNED);
    assert_message_has(ctx, "args->grad_gate");
    assert_int_equal(fake.enqueued, 0);
    destroy_ctx(ctx);
}

static void outputs_must_not_alias(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc d = mlp_desc();
    gg_mlp_args a = mlp_args();
    a.grad_hidden_states = (float *)a.grad_output; /* in-place over an input */
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT,
                        "output args->grad_hidden_states overlaps input args->grad_output");
    a = mlp_args();
    a.grad_bias2 = a.grad_weight2 + 16; /* inside another output */
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT,
                        "output args->grad_weight2 overlaps output args->grad_bias2");
    destroy_ctx(ctx);
}

/* grad_residual is optional; when given it is checked like every input (alignment, outputs must not overlap it) and
 * may be the call's own grad_output (a residual connection's gradient). */
static void residual_is_optional_and_checked(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc d = mlp_desc();
    gg_mlp_args a = mlp_args();
    /* accepted by the checks (the fake runtime has no cuBLASLt to plan with: the call then fails in planning) */
    const float *fine[2] = {a.grad_output, (const float *)FAKE(11)};
    for (int i = 0; i < 2; ++i) {
        a.grad_residual = fine[i];
        const gg_status st = gg_mlp_backward(ctx, &d, &a, NULL);
        assert_int_not_equal(st, GG_ERROR_INVALID_ARGUMENT);
        assert_int_not_equal(st, GG_ERROR_MISALIGNED);
        assert_null(strstr(gg_last_error(ctx), "grad_residual"));
    }
    a.grad_residual = (const float *)((const char *)FAKE(11) + 8);
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_MISALIGNED, "args->grad_residual (0x");
    a.grad_residual = a.grad_hidden_states; /* in place: the GEMM would read what it writes */
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT,
                        "output args->grad_hidden_states overlaps input args->grad_residual");
    gg_gelu_ffn_desc fd = ffn_desc();
    gg_gelu_ffn_args fa = ffn_args();
    fa.grad_residual = (const float *)((const char *)FAKE(10) + 4);
    assert_int_equal(gg_gelu_ffn_backward(ctx, &fd, &fa, NULL), GG_ERROR_MISALIGNED);
    assert_message_has(ctx, "args->grad_residual");
    destroy_ctx(ctx);
}

static void unsupported_precision(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_gelu_ffn_desc d = ffn_desc();
    gg_gelu_ffn_args a = ffn_args();
    d.precision = GG_PRECISION_BF16;
    assert_int_equal(gg_gelu_ffn_backward(ctx, &d, &a, NULL), GG_ERROR_UNSUPPORTED);
    assert_message_has(ctx, "desc->precision = bf16 is not supported");
    d.precision = (gg_precision)42;
    assert_int_equal(gg_gelu_ffn_backward(ctx, &d, &a, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc->precision = 42");
    gg_mlp_desc md = mlp_desc();
    gg_mlp_args ma = mlp_args();
    md.precision = GG_PRECISION_BF16;
    expect_mlp_rejected(ctx, &md, &ma, GG_ERROR_UNSUPPORTED, "bf16 operands fail the tolerance");
    assert_int_equal(fake.enqueued, 0);
    destroy_ctx(ctx);
}

/* The ssm block reads `gate` only with the silu gate: NULL is fine without it and an error with it. */
static void ssm_gate_pointer_needed_only_with_silu(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_ssm_gate_args a = ssm_args();
    a.gate = NULL;
    gg_ssm_gate_desc d = ssm_desc(1);
    assert_int_equal(gg_ssm_gate_backward(ctx, &d, &a, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "args->gate is NULL");
    assert_int_equal(fake.planned, 0);
    d = ssm_desc(0);
    /* valid: at M = 64 the block is one launch of its own kernel (no cuBLASLt plan), which the fake runtime takes */
    fake.enqueued = 0;
    assert_int_equal(gg_ssm_gate_backward(ctx, &d, &a, NULL), GG_SUCCESS);
    assert_int_equal(fake.planned, 0);
    assert_int_equal(fake.enqueued, 1);
    destroy_ctx(ctx);
}

/* Controls: valid calls do get through validation (so the rejections above are the checks' doing). */
static void valid_calls_pass_validation(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc md = mlp_desc();
    gg_mlp_args ma = mlp_args();
    assert_int_equal(gg_mlp_backward(ctx, &md, &ma, NULL), GG_ERROR_CUBLAS); /* stopped by the fake planner */
    assert_int_equal(fake.planned, 1);
    assert_message_has(ctx, "cublasLtMatmulDescCreate");
    gg_gelu_ffn_desc fd = ffn_desc();
    gg_gelu_ffn_args fa = ffn_args();
    fd.precision = GG_PRECISION_FP16;
    assert_int_equal(gg_gelu_ffn_backward(ctx, &fd, &fa, NULL), GG_ERROR_CUBLAS);
    /* block 1 has no GEMM: with the fake runtime its kernels are "launched", which the counter sees */
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    fake.enqueued = 0;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.enqueued, 1); /* one kernel */
    /* a failing device is reported as such */
    fake.fail_get_device = 1;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_CUDA);
    assert_message_has(ctx, "cudaGetDevice");
    fake.fail_get_device = 0;
    destroy_ctx(ctx);
}

/* Blocks 2/3 in fp16 mode plan G (their first GEMM, the one the fake planner refuses) in TF32 up to 512 tokens, the
 * few-token route that reads the fp32 inputs on a device without gradgraph's sm_90a GEMM (the fake runtime is one:
 * gg_k_gemm_f32w_capacity fails there), and with fp16 operands above; fp32 mode stays fp32. */
static void ffn_fp16_plans_g_by_tokens(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_gelu_ffn_desc fd = ffn_desc();
    gg_gelu_ffn_args fa = ffn_args();
    gg_mlp_desc md = mlp_desc();
    gg_mlp_args ma = mlp_args();
    const struct {
        int64_t tokens;
        gg_precision precision;
        cublasComputeType_t compute;
    } want[] = {{1, GG_PRECISION_FP16, CUBLAS_COMPUTE_32F_FAST_TF32},
                {512, GG_PRECISION_FP16, CUBLAS_COMPUTE_32F_FAST_TF32},
                {513, GG_PRECISION_FP16, CUBLAS_COMPUTE_32F},
                {256, GG_PRECISION_FP32, CUBLAS_COMPUTE_32F}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i) {
        fd.tokens = md.tokens = want[i].tokens;
        fd.precision = md.precision = want[i].precision;
        fake.planned = 0;
        assert_int_equal(gg_gelu_ffn_backward(ctx, &fd, &fa, NULL), GG_ERROR_CUBLAS);
        assert_int_equal(fake.planned, 1);
        assert_int_equal(fake.planned_compute, want[i].compute);
        fake.planned = 0;
        assert_int_equal(gg_mlp_backward(ctx, &md, &ma, NULL), GG_ERROR_CUBLAS);
        assert_int_equal(fake.planned, 1);
        assert_int_equal(fake.planned_compute, want[i].compute);
    }
    destroy_ctx(ctx);
}

/* An eager call on a stream the caller is capturing: refused (nothing allocated, nothing enqueued) until a call of
 * that shape has made its plan outside the capture; then it only enqueues. */
static void eager_call_in_a_capture_needs_a_plan_made_outside(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    fake.capturing = 1;
    const int live = fake.live;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_backward: stream is being captured");
    assert_message_has(ctx, "M = 64");
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.live, live); /* no scratch allocated */
    fake.capturing = 0;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS); /* plans, outside the capture */
    fake.capturing = 1;
    fake.enqueued = 0;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS); /* the plan exists: enqueue only */
    assert_int_equal(fake.enqueued, 1);
    td.tokens = 128; /* another shape: no plan yet */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "M = 128");
    fake.capturing = 0;
    destroy_ctx(ctx);
}

/* ---- graph entry points ---- */
static void graph_create_rejects_bad_config(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc d = mlp_desc();
    gg_graph *g = (gg_graph *)FAKE(0);
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.version = 9;
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_ERROR_VERSION);
    assert_null(g);
    assert_message_has(ctx, "gg_mlp_graph_create: config->version = 9");
    gc = (gg_graph_config)GG_GRAPH_CONFIG_INIT;
    gc.struct_size = 8;
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_ERROR_VERSION);
    gc = (gg_graph_config)GG_GRAPH_CONFIG_INIT;
    gc.execs_per_bucket = 0;
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->execs_per_bucket = 0");
    gc = (gg_graph_config)GG_GRAPH_CONFIG_INIT;
    gc.policy = GG_BUCKETS_LIST; /* without a list */
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "GG_BUCKETS_LIST needs");
    gc = (gg_graph_config)GG_GRAPH_CONFIG_INIT;
    d.hidden = 12; /* the graph's shape is checked like an eager call's */
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_mlp_graph_create: desc->hidden = 12 is not a multiple of 8");
    assert_int_equal(gg_mlp_graph_create(ctx, NULL, &gc, &g), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc is NULL");
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.planned, 0);
    destroy_ctx(ctx);
}

static void graph_create_plans_and_cleans_up_on_failure(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_ssm_gate_desc d = ssm_desc(1);
    gg_graph *g = (gg_graph *)FAKE(0);
    /* a valid config reaches planning, which the fake cuBLASLt refuses: the half-made graph is undone */
    assert_int_equal(gg_ssm_gate_graph_create(ctx, &d, NULL, &g), GG_ERROR_CUBLAS);
    assert_null(g);
    assert_int_equal(fake.planned, 1);
    /* block 1 plans without cuBLASLt: its graph is made (nothing captured until the first run) */
    gg_tanh_gate_desc td = tanh_desc();
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 1024;
    assert_int_equal(gg_tanh_gate_graph_create(ctx, &td, &gc, &g), GG_SUCCESS);
    assert_int_equal(gg_graph_bucket_count(g), 4); /* 128 256 512 1024 */
    assert_int_equal(gg_graph_bucket_tokens(g, 3), 1024);
    assert_int_equal(gg_graph_bucket_tokens(g, 4), 0);
    gg_graph_memory mem;
    assert_int_equal(gg_graph_memory_info(g, -1, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 0);
    assert_true(mem.staging_bytes >= (size_t)1024 * 4096 * 2 * 4); /* 4 [M, H] bf16 tensors at M = 1024 */
    assert_int_equal(gg_graph_memory_info(g, 4, &mem), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "bucket = 4 is not in [-1, 4)");
    assert_int_equal(fake.enqueued, 0);
    destroy_ctx(ctx); /* destroys the live graph too: no fake resource left */
}

/* A padding graph stages the [M, ...] tensors its runs read or write, and only those: not the fp16 copies outside fp16
 * mode (refused there), not block 2's tanh_inner (validated, never read), which a padded run does not copy in and
 * whose pointer does not key the executable. A shape whose tensors do not fit in 2^63 bytes at the largest bucket is
 * refused at creation, as the eager call of that shape is, before any plan. */
static void graph_staging_holds_what_runs_read(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    fake.plan_ok = 1;
    const size_t M = 1024, D = 1536, F = 6144;
    for (int fp16 = 0; fp16 < 2; ++fp16) {
        gg_gelu_ffn_desc d = ffn_desc();
        d.precision = fp16 ? GG_PRECISION_FP16 : GG_PRECISION_FP32;
        gg_graph_config gc = config_to_1024();
        gg_graph *g = NULL;
        assert_int_equal(gg_gelu_ffn_graph_create(ctx, &d, &gc, &g), GG_SUCCESS);
        gg_graph_memory mem;
        assert_int_equal(gg_graph_memory_info(g, -1, &mem), GG_SUCCESS);
        /* fp32: grad_output, hidden_states, grad_hidden_states, grad_residual [M, D]; linear1_out, gelu_out [M, F];
         * fp16 adds hidden_states' copy [M, D] and the two activations' copies [M, F], two bytes an element */
        const size_t want = M * (4 * D + 2 * F) * 4 + (fp16 ? M * (D + 2 * F) * 2 : 0);
        print_message("%s gelu_ffn graph to %zu tokens: %zu MiB staging (%zu MiB expected)\n", fp16 ? "fp16" : "fp32",
                      M, mem.staging_bytes >> 20, want >> 20);
        assert_int_equal(mem.staging_bytes, want);
        if (!fp16) { /* a padded run: four tensors staged in, one out; tanh_inner neither copied nor keyed */
            gg_gelu_ffn_args a = ffn_args();
            d.tokens = 100;
            const int staged = fake_kernel_launches("stage_kernel"), captures = fake.captures;
            assert_int_equal(gg_gelu_ffn_graph_run(g, &d, &a, NULL), GG_SUCCESS);
            assert_int_equal(fake_kernel_launches("stage_kernel") - staged, 5);
            assert_int_equal(fake.captures - captures, 1);
            a.tanh_inner = FAKE(20);
            assert_int_equal(gg_gelu_ffn_graph_run(g, &d, &a, NULL), GG_SUCCESS);
            assert_int_equal(fake.captures - captures, 1); /* the same executable */
            a.tanh_inner = NULL; /* still required */
            assert_int_equal(gg_gelu_ffn_graph_run(g, &d, &a, NULL), GG_ERROR_INVALID_ARGUMENT);
            assert_message_has(ctx, "args->tanh_inner is NULL");
        }
        gg_graph_destroy(g);
    }
    gg_mlp_desc huge = {.tokens = 64, .hidden = 2147483640, .ffn = 2147483640, .precision = GG_PRECISION_FP16};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = (int64_t)1 << 30;
    gg_graph *g = (gg_graph *)FAKE(0);
    const int planned = fake.planned;
    assert_int_equal(gg_mlp_graph_create(ctx, &huge, &gc, &g), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "x 2147483640 elements does not fit in 2^63 bytes");
    assert_null(g);
    assert_int_equal(fake.planned, planned);
    destroy_ctx(ctx);
}

/* The narrow schedules (block 2's fp16 copies and block 4's chain on a few SMs beside a GEMM planned for the rest)
 * only where a second stream runs them beside it: with overlap NEVER (one stream) they take every SM. The smallest
 * grid of those kernels in a call, per overlap mode. */
static unsigned narrowest;
static void note_grid(fake_entry *e, const char *kernel, void **args, dim3 grid) {
    (void)e, (void)args;
    if (kernel && (strstr(kernel, "f32_to_f16") || strstr(kernel, "ssm_gate_grad")) && grid.x < narrowest)
        narrowest = grid.x;
}

static void narrow_schedules_only_beside_a_second_stream(void **state) {
    (void)state;
    for (int block = 2; block <= 4; block += 2) {
        unsigned grids[2];
        for (int never = 0; never < 2; ++never) {
            fake_reset(1);
            gg_config c = GG_CONFIG_INIT;
            c.autotune = 0;
            c.overlap = never ? GG_OVERLAP_NEVER : GG_OVERLAP_AUTO;
            gg_ctx *ctx = NULL;
            assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
            fake.plan_ok = 1;
            narrowest = UINT_MAX;
            gg_graph_config gc = GG_GRAPH_CONFIG_INIT; /* the fakes log what a capture enqueues */
            gc.min_tokens = gc.max_tokens = 4096;
            gg_graph *g = NULL;
            fake_kernel_reach = note_grid;
            fake_log_start();
            if (block == 2) {
                gg_gelu_ffn_desc d = ffn_desc();
                d.tokens = 4096, d.precision = GG_PRECISION_FP16;
                gg_gelu_ffn_args a = ffn_args();
                assert_int_equal(gg_gelu_ffn_graph_create(ctx, &d, &gc, &g), GG_SUCCESS);
                assert_int_equal(gg_gelu_ffn_graph_run(g, &d, &a, NULL), GG_SUCCESS);
            } else {
                gg_ssm_gate_desc d = ssm_desc(1);
                d.tokens = 4096;
                gg_ssm_gate_args a = ssm_args();
                assert_int_equal(gg_ssm_gate_graph_create(ctx, &d, &gc, &g), GG_SUCCESS);
                assert_int_equal(gg_ssm_gate_graph_run(g, &d, &a, NULL), GG_SUCCESS);
            }
            fake_log_stop();
            fake_log_free();
            fake_kernel_reach = NULL;
            grids[never] = narrowest;
            gg_graph_destroy(g);
            destroy_ctx(ctx);
        }
        print_message("block %d at 4096 tokens: narrowest copy/chain grid %u with overlap, %u without\n", block,
                      grids[0], grids[1]);
        assert_true(grids[0] < 132 / 2);  /* narrow beside the GEMM */
        assert_true(grids[1] >= 132);     /* every SM, on one stream */
    }
}

static void graph_run_checks_its_arguments(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    assert_int_equal(gg_tanh_gate_graph_run(NULL, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_tanh_gate_graph_run: graph is NULL");
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    fake.enqueued = 0;
    gg_ssm_gate_desc sd = ssm_desc(0);
    gg_ssm_gate_args sa = ssm_args();
    assert_int_equal(gg_ssm_gate_graph_run(g, &sd, &sa, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "the graph was made by gg_tanh_gate_graph_create");
    td.hidden = 2048;
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc->hidden = 2048, but the graph was created for 4096");
    td = tanh_desc();
    td.tokens = 2000;
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc->tokens = 2000 exceeds the largest bucket (1024)");
    td = tanh_desc();
    ta.mask = NULL;
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_graph_run: args->mask is NULL");
    ta = tanh_args();
    int64_t *tokens = (int64_t *)FAKE(20);
    assert_int_equal(gg_tanh_gate_graph_run_device(g, &td, tokens, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->device_select = 0");
    assert_int_equal(fake.enqueued, 0);
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* A CUDA error the application's own earlier work left pending on the thread (cudaGetLastError not called) is
 * not taken for gradgraph's: the calls are refused before they do anything, the error stays pending for the
 * application to read, and a call works again once it is read. cudaErrorNotReady (a query's answer) is no error.
 * The destroy calls work with one pending and leave it so. Failed calls of gradgraph's own leave none behind
 * (test_faults: the fakes leave every injected failure pending, and the call after each fault must succeed). */
static void pending_cuda_error_is_the_applications(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    gg_graph *g2 = tanh_graph(ctx, &gc);
    const gg_tanh_gate_desc td = tanh_desc();
    const gg_tanh_gate_args ta = tanh_args();
    const gg_mlp_desc md = mlp_desc();
    const gg_mlp_args ma = mlp_args();
    const int live = fake.live;
    fake.enqueued = fake.planned = 0;
    fake_pending = cudaErrorInvalidConfiguration; /* an application's launch that failed before the calls */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_CUDA);
    assert_message_has(ctx, "gg_tanh_gate_backward: a CUDA error is pending on this thread from earlier work that was not "
                            "this call's: cudaErrorInvalidConfiguration");
    assert_message_has(ctx, "nothing was done");
    assert_int_equal(gg_mlp_backward(ctx, &md, &ma, NULL), GG_ERROR_CUDA); /* before its plan */
    assert_message_has(ctx, "gg_mlp_backward: a CUDA error is pending");
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_ERROR_CUDA);
    assert_message_has(ctx, "gg_tanh_gate_graph_run: a CUDA error is pending");
    gg_ctx *other = NULL;
    assert_int_equal(gg_ctx_create(NULL, &other), GG_ERROR_CUDA);
    assert_null(other);
    assert_message_has(NULL, "gg_ctx_create: a CUDA error is pending");
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.planned, 0);
    assert_int_equal(fake.live, live);
    assert_int_equal(fake_pending, cudaErrorInvalidConfiguration); /* still the application's to read */
    gg_graph_destroy(g2); /* teardown works, and leaves it */
    assert_int_equal(fake.live, live - 1);
    assert_int_equal(fake_pending, cudaErrorInvalidConfiguration);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration); /* the application reads it */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    fake_pending = cudaErrorNotReady; /* what a cudaStreamQuery of a busy stream answered: no failure */
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    fake_pending = cudaErrorMemoryAllocation;
    gg_graph_destroy(g);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
    assert_int_equal(fake_pending, cudaErrorMemoryAllocation);
}

/* The runtime keeps the pending error per thread, and so must gradgraph's check: another thread's calls on the same
 * context work while this thread has an application's error pending, and an error left pending on that thread never
 * refuses this one's calls. */
typedef struct {
    gg_ctx *ctx;
    gg_graph *graph;
    cudaError_t pending_seen; /* what the thread found pending before its calls */
    gg_status eager, replay;
} other_thread_calls;

static void *calls_on_another_thread(void *arg) {
    other_thread_calls *t = arg;
    const gg_tanh_gate_desc td = tanh_desc();
    const gg_tanh_gate_args ta = tanh_args();
    t->pending_seen = cudaPeekAtLastError();
    t->eager = gg_tanh_gate_backward(t->ctx, &td, &ta, NULL);
    t->replay = gg_tanh_gate_graph_run(t->graph, &td, &ta, NULL);
    fake_pending = cudaErrorMemoryAllocation; /* this thread's application fails a launch of its own and ends */
    return NULL;
}

static void a_pending_error_is_one_threads(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_graph_config gc = config_to_1024();
    other_thread_calls t = {.ctx = ctx, .graph = tanh_graph(ctx, &gc), .pending_seen = cudaErrorUnknown};
    const gg_tanh_gate_desc td = tanh_desc();
    const gg_tanh_gate_args ta = tanh_args();
    fake_pending = cudaErrorInvalidConfiguration; /* this thread's application error */
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, calls_on_another_thread, &t), 0);
    assert_int_equal(pthread_join(other, NULL), 0);
    assert_int_equal(t.pending_seen, cudaSuccess);
    assert_int_equal(t.eager, GG_SUCCESS);
    assert_int_equal(t.replay, GG_SUCCESS);
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_CUDA); /* this thread's is still pending */
    assert_message_has(ctx, "a CUDA error is pending on this thread from earlier work that was not this call's: "
                            "cudaErrorInvalidConfiguration");
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration);
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS); /* the other thread's never reaches it */
    assert_int_equal(gg_tanh_gate_graph_run(t.graph, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    gg_graph_destroy(t.graph);
    destroy_ctx(ctx);
}

/* A stream of another device than the context's (its launches would fail: an eager call's after part of its work) is
 * refused before anything is enqueued: an eager block call, a forward, a graph's run, gg_to_fp16, gg_check_finite;
 * the context's own streams and the default one work. */
static void a_stream_of_another_device_is_refused(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    const gg_tanh_gate_desc td = tanh_desc();
    const gg_tanh_gate_args ta = tanh_args();
    const gg_tanh_gate_fwd_args tf = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4)};
    cudaStream_t mine = NULL, foreign = NULL;
    assert_int_equal(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&foreign, cudaStreamNonBlocking), cudaSuccess);
    fake.foreign_stream = foreign;
    fake.enqueued = 0;
    char says[160];
    snprintf(says, sizeof says, "stream (%p) is a stream of device 1, and the context is on device 0",
             (void *)foreign);
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, (gg_stream)foreign), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_backward: ");
    assert_message_has(ctx, says);
    assert_int_equal(gg_tanh_gate_forward(ctx, &td, &tf, (gg_stream)foreign), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, says);
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, (gg_stream)foreign), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_graph_run: ");
    assert_message_has(ctx, says);
    assert_int_equal(gg_to_fp16(ctx, FAKE(10), FAKE(11), 1024, (gg_stream)foreign), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, says);
    assert_int_equal(gg_check_finite(ctx, FAKE(12), 1024, 0, FAKE(13), (gg_stream)foreign),
                     GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, says);
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, (gg_stream)mine), GG_SUCCESS);
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, (gg_stream)mine), GG_SUCCESS);
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(cudaStreamDestroy(mine), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(foreign), cudaSuccess);
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* A graph's run refuses what differs from the graph (the second dim, the precision), tokens that are not a bucket
 * when padding is off, and device tokens that are not 8-byte aligned, each named, nothing enqueued. */
static void graph_run_refuses_what_differs_from_the_graph(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc md = mlp_desc();
    gg_mlp_args ma = mlp_args();
    gg_graph *g = NULL;
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 1024;
    gc.allow_padding = 0;
    gc.device_select = 1;
    fake.plan_ok = 1; /* the graph plans its GEMMs at create */
    assert_int_equal(gg_mlp_graph_create(ctx, &md, &gc, &g), GG_SUCCESS);
    fake.enqueued = 0;
    md.ffn = 4096;
    assert_int_equal(gg_mlp_graph_run(g, &md, &ma, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_mlp_graph_run: desc->ffn = 4096, but the graph was created for 8192");
    md = mlp_desc();
    md.precision = GG_PRECISION_TF32;
    assert_int_equal(gg_mlp_graph_run(g, &md, &ma, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc->precision = tf32, but the graph was created for fp32");
    md = mlp_desc();
    md.tokens = 100;
    assert_int_equal(gg_mlp_graph_run(g, &md, &ma, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "desc->tokens = 100 is not a bucket (next: 128) and config->allow_padding is 0");
    md = mlp_desc();
    const int64_t *misaligned = (const int64_t *)((uintptr_t)FAKE(20) + 4);
    assert_int_equal(gg_mlp_graph_run_device(g, &md, misaligned, &ma, NULL), GG_ERROR_MISALIGNED);
    assert_message_has(ctx, "gg_mlp_graph_run_device: device_tokens");
    assert_message_has(ctx, "is not 8-byte aligned");
    const int64_t *written = (const int64_t *)((const char *)ma.grad_hidden_states + 8);
    assert_int_equal(gg_mlp_graph_run_device(g, &md, written, &ma, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "lies in output args->grad_hidden_states: the graph would change M while it runs");
    assert_int_equal(fake.enqueued, 0);
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* Past the largest bucket with eager_beyond_max: the call runs on the eager path (no capture, no graph launch, the
 * block's kernel launched), and a later call within the buckets still replays a graph. */
static void graph_runs_eagerly_past_its_largest_bucket_when_asked(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    gg_graph_config gc = config_to_1024();
    gc.eager_beyond_max = 1;
    gg_graph *g = tanh_graph(ctx, &gc);
    td.tokens = 2000;
    fake.captures = fake.graph_launches = fake.launches = 0;
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.captures, 0);
    assert_int_equal(fake.graph_launches, 0);
    assert_int_equal(fake.launches, 1);
    gg_graph_memory mem;
    assert_int_equal(gg_graph_memory_info(g, -1, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 0); /* nothing instantiated for it */
    td.tokens = 1024;
    fake.launches = 0;
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.captures, 1);
    assert_int_equal(fake.graph_launches, 1);
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* What the device holds in a device-selected graph's error counter, as the fake cudaMemcpy hands it back. */
static void three_device_errors(void *dst, size_t bytes) {
    const unsigned three = 3;
    if (bytes == sizeof three) memcpy(dst, &three, sizeof three);
}

/* gg_graph_device_errors: its arguments named; a graph that does not select on the device has none and reads
 * nothing; a device-selected one returns what its counter on the device holds, and a failed read names the call. */
static void graph_device_errors_reads_the_counter(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    unsigned count = 7;
    assert_int_equal(gg_graph_device_errors(NULL, &count), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_graph_device_errors: graph is NULL");
    gg_tanh_gate_desc td = tanh_desc();
    gg_graph *host_selected = NULL, *device_selected = NULL;
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 1024;
    assert_int_equal(gg_tanh_gate_graph_create(ctx, &td, &gc, &host_selected), GG_SUCCESS);
    assert_int_equal(gg_graph_device_errors(host_selected, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_graph_device_errors: count is NULL");
    const int calls = fake.cuda_calls;
    assert_int_equal(gg_graph_device_errors(host_selected, &count), GG_SUCCESS);
    assert_int_equal(count, 0);
    assert_int_equal(fake.cuda_calls, calls);
    gc.device_select = 1;
    assert_int_equal(gg_tanh_gate_graph_create(ctx, &td, &gc, &device_selected), GG_SUCCESS);
    fake.on_sync_copy_to_host = three_device_errors;
    assert_int_equal(gg_graph_device_errors(device_selected, &count), GG_SUCCESS);
    fake.on_sync_copy_to_host = NULL;
    assert_int_equal(count, 3);
    fake.calls[FAKE_MEMCPY] = 0, fake.fail_kind = FAKE_MEMCPY, fake.fail_at = 1; /* the read fails: named */
    assert_int_equal(gg_graph_device_errors(device_selected, &count), GG_ERROR_CUDA);
    fake.fail_at = 0;
    assert_message_has(ctx, "gg_graph_device_errors: cudaMemcpy(device_errors) failed: cudaErrorLaunchFailure");
    assert_int_equal(gg_graph_device_errors(device_selected, &count), GG_SUCCESS);
    gg_graph_destroy(device_selected);
    gg_graph_destroy(host_selected);
    destroy_ctx(ctx);
}

/* gg_graph_debug_dot: checks first, then a capture of the bucket's last run written out, nothing launched. */
static void graph_debug_dot_captures_again(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    const char *path = "test_api_graph.dot";
    assert_int_equal(gg_graph_debug_dot(NULL, 0, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_graph_debug_dot: graph is NULL");
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    assert_int_equal(gg_graph_debug_dot(g, 0, NULL, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_graph_debug_dot: path is NULL");
    assert_int_equal(gg_graph_debug_dot(g, 0, "", 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_graph_debug_dot: path is empty");
    assert_int_equal(gg_graph_debug_dot(g, 4, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_graph_debug_dot: bucket = 4 is not in [-1, 4)");
    assert_int_equal(gg_graph_debug_dot(g, -2, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gg_graph_debug_dot(g, -1, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->device_select = 0");
    assert_int_equal(gg_graph_debug_dot(g, 0, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_graph_debug_dot: bucket = 0 has not run yet");
    assert_int_equal(fake.captures, 0);

    /* M = 64 runs in bucket 0 (128 tokens): captured, instantiated, launched once */
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.captures, 1);
    assert_int_equal(fake.graph_launches, 1);
    const int live = fake.live;
    remove(path);
    assert_int_equal(gg_graph_debug_dot(g, 0, path, 1), GG_SUCCESS);
    assert_int_equal(fake.captures, 2);  /* captured again ... */
    assert_int_equal(fake.graph_launches, 1);  /* ... and never launched */
    assert_int_equal(fake.live, live);   /* the captured graph is destroyed */
    assert_true(fake_dot_written(path, cudaGraphDebugDotFlagsVerbose));
    assert_int_equal(gg_graph_debug_dot(g, 0, path, 0), GG_SUCCESS);
    assert_true(fake_dot_written(path, 0));
    assert_int_equal(gg_graph_debug_dot(g, 0, "no-such-directory/graph.dot", 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_graph_debug_dot: path \"no-such-directory/graph.dot\" cannot be written");
    assert_int_equal(fake.live, live);
    assert_int_equal(gg_graph_debug_dot(g, 1, path, 0), GG_ERROR_INVALID_ARGUMENT); /* bucket 1 never ran */
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* GG_LOG_LEVEL replaces the config's level at gg_ctx_create; a value it does not know fails the create. */
static int info_calls;
static void on_info(void *user, gg_log_level level, const char *message) {
    (void)user, (void)message;
    info_calls += level == GG_LOG_INFO;
}

static void log_level_from_environment(void **state) {
    (void)state;
    gg_config c = GG_CONFIG_INIT;
    c.log_fn = on_info;
    c.log_level = GG_LOG_ERROR;
    setenv("GG_LOG_LEVEL", "info", 1);
    fake_reset(1);
    info_calls = 0;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    assert_true(info_calls > 0); /* "gradgraph x.y.z: context on device 0 ..." */
    destroy_ctx(ctx);
    setenv("GG_LOG_LEVEL", "verbose", 1);
    fake_reset(1);
    ctx = (gg_ctx *)FAKE(0);
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_message_has(NULL, "gg_ctx_create: GG_LOG_LEVEL=\"verbose\" is not ERROR, WARN, INFO, DEBUG or TRACE");
    assert_int_equal(fake.cuda_calls, 0);
    setenv("GG_LOG_LEVEL", "", 1); /* empty: as if unset */
    fake_reset(1);
    info_calls = 0;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    assert_int_equal(info_calls, 0);
    destroy_ctx(ctx);
    unsetenv("GG_LOG_LEVEL");
}

/* The plans' DEBUG lines ("GEMM MxNxK ...: ..., split-k S, ..."), for the split-k rule below. */
static char gemm_log[64][256];
static int gemm_logged;
static void on_debug(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (level == GG_LOG_DEBUG && !strncmp(message, "GEMM ", 5) && gemm_logged < 64)
        snprintf(gemm_log[gemm_logged++], sizeof gemm_log[0], "%s", message);
}

/* The split-k the plan of the GEMM whose k is `k` logged (-1: none logged). */
static int logged_split_k(int64_t k) {
    char key[32];
    snprintf(key, sizeof key, "x%lld (", (long long)k);
    for (int i = 0; i < gemm_logged; ++i) {
        const char *at = strstr(gemm_log[i], "split-k ");
        if (strstr(gemm_log[i], key) && at) return atoi(at + 8);
    }
    return -1;
}

/* cuBLASLt's split-k is taken only at a k that is a multiple of 128 (matmul.c), the heuristic offering only a split-k
 * (2) algorithm. Block 3's dW GEMMs (k = the tokens): at 32768 they keep split-k 2; at another k from 10240 with a
 * small output (256 x 1024, fewer tiles than SMs) they run apart as the largest multiple of 128 rows of k (split-k 2)
 * and the rest (re-configured to split-k 1); with a large output (4096 x 4096), or below 10240, as one GEMM
 * re-configured to split-k 1. When cuBLASLt refuses the re-configured algorithm, the call fails (GG_ERROR_CUBLAS,
 * saying why) rather than run an algorithm known to be wrong there. G (k = hidden, under the narrow schedule's SM
 * target) and dX (k = ffn) keep split-k 2 throughout. -1: no GEMM of that k. */
static void split_k_only_at_multiples_of_128(void **state) {
    (void)state;
    static const struct {
        int64_t tokens, hidden, ffn;
        int check_ok;         /* fake.algo_check_ok: a re-configured algorithm is accepted */
        int whole, head, tail; /* the split-k logged at k = tokens, k = its multiple of 128, k = tokens % 128 */
    } cases[] = {
        {32768, 256, 1024, 1, 2, 2, -1},   {32769, 256, 1024, 1, -1, 2, 1}, {11912, 256, 1024, 1, -1, 2, 1},
        {32769, 256, 1024, 0, -1, -1, -1}, {32769, 4096, 4096, 1, 1, -1, -1}, {32769, 4096, 4096, 0, -1, -1, -1},
        {4225, 256, 1024, 1, 1, -1, -1},   {513, 256, 1024, 1, 1, -1, -1},  {10240, 256, 1024, 1, 2, 2, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        fake_reset(1);
        fake.plan_ok = 1;
        fake.heuristic_split_k = 2;
        fake.algo_check_ok = cases[i].check_ok;
        gg_config c = GG_CONFIG_INIT;
        c.autotune = 0;
        c.log_fn = on_debug;
        c.log_level = GG_LOG_DEBUG;
        gemm_logged = 0;
        gg_ctx *ctx = NULL;
        assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
        const int64_t tokens = cases[i].tokens;
        gg_mlp_desc d = {.tokens = tokens, .hidden = cases[i].hidden, .ffn = cases[i].ffn,
                         .precision = GG_PRECISION_FP16};
        gg_mlp_args a = mlp_args();
        if (!cases[i].check_ok) { /* only split-k (2) algorithms at k = tokens or its tail: refused */
            assert_int_equal(gg_mlp_backward(ctx, &d, &a, NULL), GG_ERROR_CUBLAS);
            assert_message_has(ctx, "gg_mlp_backward: cuBLASLt offers only split-k algorithms, which it cannot "
                                    "re-configure without,");
            assert_message_has(ctx, "split-k writes wrong results at a k that is not a multiple of 128");
            assert_int_equal(fake.enqueued, 0);
            destroy_ctx(ctx);
            continue;
        }
        assert_int_equal(gg_mlp_backward(ctx, &d, &a, NULL), GG_SUCCESS);
        assert_int_equal(logged_split_k(cases[i].ffn), 2);    /* dX: k = ffn, no SM target */
        assert_int_equal(logged_split_k(cases[i].hidden), 2); /* G: k = hidden, an SM target: trusted */
        assert_int_equal(logged_split_k(tokens), cases[i].whole);
        assert_int_equal(logged_split_k(tokens - tokens % 128), cases[i].head);
        assert_int_equal(logged_split_k(tokens % 128), cases[i].tail);
        assert_int_equal(fake.tail_matmuls, cases[i].tail >= 0 ? 2 : 0); /* dW1's and dW2's tails */
        destroy_ctx(ctx);
    }
    fake.heuristic_split_k = 0;
    fake.algo_check_ok = 0;
}

/* A bf16 dW run apart (block 4 at 11912 tokens: 1536 x 768 over k = 11904, then the last 8 rows) adds its two parts
 * up in fp32 and rounds the sum into grad_weight once (gg_k_round_sum), as one GEMM would; the narrow schedule runs
 * the tail on the side stream, beside the first part (into a sum of its own in that stream's workspace); with a
 * workspace too small for the fp32 sum (1 MiB against 4.5 MiB) it runs as one GEMM without split-k. */
static void bf16_tail_apart_rounds_once(void **state) {
    (void)state;
    for (int small = 0; small < 2; ++small) {
        fake_reset(1);
        fake.plan_ok = 1;
        fake.heuristic_split_k = 2;
        fake.algo_check_ok = 1;
        gg_config c = GG_CONFIG_INIT;
        c.autotune = 0;
        if (small) c.gemm_workspace_bytes = (size_t)1 << 20;
        gg_ctx *ctx = NULL;
        assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
        gg_ssm_gate_desc d = ssm_desc(1);
        d.tokens = 11912;
        const gg_ssm_gate_args a = ssm_args();
        const int rounded = fake_kernel_launches("round_sum_kernel");
        assert_int_equal(gg_ssm_gate_backward(ctx, &d, &a, NULL), GG_SUCCESS);
        assert_int_equal(fake.tail_matmuls, small ? 0 : 1);
        assert_int_equal(fake.tail_matmuls_beside, small ? 0 : 1);
        assert_int_equal(fake_kernel_launches("round_sum_kernel") - rounded, small ? 0 : 1);
        destroy_ctx(ctx);
    }
    fake.heuristic_split_k = 0;
    fake.algo_check_ok = 0;
}

/* GG_GEMM_MAX_CLUSTER_CTAS (a testing switch): a CTA count from 1 to 16, refused otherwise before any CUDA call. */
static void gemm_cluster_limit_from_environment(void **state) {
    (void)state;
    static const char *bad[] = {"0", "17", "2x", "-1", "many"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        setenv("GG_GEMM_MAX_CLUSTER_CTAS", bad[i], 1);
        fake_reset(1);
        gg_ctx *ctx = (gg_ctx *)FAKE(0);
        assert_int_equal(gg_ctx_create(NULL, &ctx), GG_ERROR_INVALID_ARGUMENT);
        assert_null(ctx);
        assert_message_has(NULL, "GG_GEMM_MAX_CLUSTER_CTAS=");
        assert_message_has(NULL, "is not a CTA count from 1 to 16");
        assert_int_equal(fake.cuda_calls, 0);
    }
    static const char *good[] = {"1", "16", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; ++i) {
        setenv("GG_GEMM_MAX_CLUSTER_CTAS", good[i], 1);
        fake_reset(1);
        fake.plan_ok = 1; /* the fake heuristic offers algorithms */
        gg_ctx *ctx = NULL;
        assert_int_equal(gg_ctx_create(NULL, &ctx), GG_SUCCESS);
        gg_mlp_desc d = mlp_desc(); /* GEMMs planned under the limit */
        gg_mlp_args a = mlp_args();
        assert_int_equal(gg_mlp_backward(ctx, &d, &a, NULL), GG_SUCCESS);
        destroy_ctx(ctx);
    }
    unsetenv("GG_GEMM_MAX_CLUSTER_CTAS");
}

/* ---- data-parallel entry points: argument checks (no NCCL call is made before they pass) ---- */
static void dist_entry_points_check_arguments(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    assert_int_equal(gg_dist_rank(ctx), -1);
    assert_int_equal(gg_dist_size(ctx), 0);
    assert_null(gg_dist_comm(ctx));
    assert_null(gg_dist_comm(NULL));
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS); /* no communicator: nothing to do */
    assert_int_equal(gg_dist_check(ctx), GG_SUCCESS);
    assert_int_equal(gg_dist_check(NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_check: ctx is NULL");
    assert_int_equal(gg_dist_abort(ctx), GG_SUCCESS); /* no communicator: nothing to abort */
    assert_int_equal(gg_dist_abort(NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_abort: ctx is NULL");
    const gg_status st = gg_dist_attach(ctx, NULL, NULL);
    if (st == GG_ERROR_UNSUPPORTED) { /* built without NCCL: every entry point says so */
        assert_message_has(NULL, "built without NCCL");
        destroy_ctx(ctx);
        return;
    }
    assert_int_equal(st, GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_dist_attach: nccl_comm is NULL");
    assert_int_equal(gg_dist_attach(NULL, FAKE(1), NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_attach: ctx is NULL");
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.version = 5;
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_VERSION);
    assert_message_has(ctx, "gg_dist_attach: config->version = 5");
    dc = (gg_dist_config)GG_DIST_CONFIG_INIT;
    dc.op = (gg_reduce_op)4;
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->op = 4");
    dc = (gg_dist_config)GG_DIST_CONFIG_INIT;
    dc.sync = (gg_grad_sync)9;
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->sync = 9");
    dc = (gg_dist_config)GG_DIST_CONFIG_INIT;
    dc.bucket_bytes = 100;
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->bucket_bytes = 100 is below 4096");
    dc.bucket_bytes = ((size_t)1 << 63) + 4096; /* twice it would wrap around: the copy engines' staging */
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->bucket_bytes = 9223372036854779904 is above 1099511627776 (1 TiB)");
    dc = (gg_dist_config)GG_DIST_CONFIG_INIT;
    dc.comm_sms = 67; /* more than half of the fake device's 132 SMs */
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->comm_sms = 67 is outside [0, 66]");
    dc.comm_sms = -1;
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    dc = (gg_dist_config)GG_DIST_CONFIG_INIT;
    dc.copy_engines = 2;
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "config->copy_engines = 2 is not 0 or 1");
    dc.copy_engines = 1; /* an attached communicator was made without the zero-CTA policy and windows */
    assert_int_equal(gg_dist_attach(ctx, FAKE(1), &dc), GG_ERROR_UNSUPPORTED);
    assert_message_has(ctx, "config->copy_engines = 1");
    /* reduce, alloc, free: no communicator on ctx, nothing done */
    assert_int_equal(gg_dist_reduce(NULL, FAKE(2), 16, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_reduce: ctx is NULL");
    assert_int_equal(gg_dist_reduce(ctx, FAKE(2), 16, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_dist_reduce: the context has no communicator");
    void *grad = FAKE(3);
    assert_int_equal(gg_dist_alloc(ctx, 1024, &grad), GG_ERROR_INVALID_ARGUMENT);
    assert_null(grad); /* cleared on failure */
    assert_message_has(ctx, "gg_dist_alloc: the context has no communicator");
    assert_int_equal(gg_dist_alloc(ctx, 0, &grad), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_dist_alloc: bytes is 0");
    assert_int_equal(gg_dist_alloc(ctx, 1024, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_dist_alloc: out is NULL");
    assert_int_equal(gg_dist_free(ctx, NULL), GG_SUCCESS);
    assert_int_equal(gg_dist_free(ctx, FAKE(4)), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_dist_free: ptr was not allocated by gg_dist_alloc on this context");
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    const gg_status no_path = gg_dist_init_env(ctx, NULL, NULL); /* the id would travel through MPI */
    assert_int_equal(no_path, GG_ERROR_INVALID_ARGUMENT);
#ifdef GG_HAVE_MPI
    assert_message_has(ctx, "gg_dist_init_env: MPI is not initialized");
#else
    assert_message_has(ctx, "gg_dist_init_env: id_path is NULL and gradgraph was built without MPI");
#endif
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    assert_int_equal(gg_dist_init_env(ctx, "/tmp/gg-id", NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "no valid rank and world size in the environment");
    assert_int_equal(gg_dist_init_mpi(NULL, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_init_mpi: ctx is NULL");
    dc = (gg_dist_config)GG_DIST_CONFIG_INIT;
    dc.version = 5;
    assert_int_equal(gg_dist_init_mpi(ctx, NULL, &dc), GG_ERROR_VERSION);
    assert_message_has(ctx, "gg_dist_init_mpi: config->version = 5");
    const gg_status mpi = gg_dist_init_mpi(ctx, NULL, NULL); /* this process never initialized MPI */
#ifdef GG_HAVE_MPI
    assert_int_equal(mpi, GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_dist_init_mpi: MPI is not initialized");
#else
    assert_int_equal(mpi, GG_ERROR_UNSUPPORTED);
    assert_message_has(ctx, "gg_dist_init_mpi: gradgraph was built without MPI");
#endif
    gg_ctx *two[2] = {ctx, ctx};
    assert_int_equal(gg_dist_init_threads(two, 2, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "ctxs[0] and ctxs[1] share device 0");
    assert_int_equal(gg_dist_init_threads(NULL, 2, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(gg_dist_rank(ctx), -1); /* nothing was attached */
    assert_null(gg_dist_comm(ctx));
    destroy_ctx(ctx);
}

/* ---- gg_check_finite ---- */

/* One call of gg_check_finite that must be refused with status and a message containing text, enqueuing nothing. */
static void expect_finite_refused(gg_ctx *ctx, const void *data, size_t count, int bf16, unsigned *flag,
                                  gg_status status, const char *text) {
    const int enqueued = fake.enqueued;
    assert_int_equal(gg_check_finite(ctx, data, count, bf16, flag, NULL), status);
    assert_message_has(ctx, text);
    assert_int_equal(fake.enqueued, enqueued);
}

static void word_is_set(void *dst, size_t bytes) {
    if (bytes == sizeof(unsigned)) *(unsigned *)dst = 1u;
}

/* The fp16 overflow word: gg_fp16_overflow_flag's refusals and its device address, which gg_fp16_overflow reads
 * (a synchronous copy after the device's work) and reports; clear = 1 zeroes a set word and nothing else, clear = 0
 * leaves it; a failed query leaves found 0 and names the call. */
static void fp16_overflow_word_read_and_cleared(void **state) {
    (void)state;
    unsigned *flag = NULL;
    assert_int_equal(gg_fp16_overflow_flag(NULL, &flag), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "gg_fp16_overflow_flag: ctx is NULL"));
    gg_ctx *ctx = make_ctx();
    assert_int_equal(gg_fp16_overflow_flag(ctx, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_fp16_overflow_flag: device_flag is NULL");
    assert_int_equal(gg_fp16_overflow_flag(ctx, &flag), GG_SUCCESS);
    assert_non_null(flag);
    int found = -1;
    assert_int_equal(gg_fp16_overflow(NULL, &found, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "gg_fp16_overflow: ctx is NULL"));
    fake.memsets = 0;
    assert_int_equal(gg_fp16_overflow(ctx, &found, 1), GG_SUCCESS); /* the fakes' word reads 0 */
    assert_int_equal(found, 0);
    assert_ptr_equal(fake.sync_copy_from, flag);
    assert_int_equal(fake.memsets, 0); /* nothing to clear */
    fake.on_sync_copy_to_host = word_is_set;
    assert_int_equal(gg_fp16_overflow(ctx, &found, 0), GG_SUCCESS);
    assert_int_equal(found, 1);
    assert_int_equal(fake.memsets, 0); /* left set */
    assert_int_equal(gg_fp16_overflow(ctx, &found, 1), GG_SUCCESS);
    assert_int_equal(found, 1);
    assert_int_equal(fake.memsets, 1);
    assert_ptr_equal(fake.memset_at, flag);
    fake.on_sync_copy_to_host = NULL;
    fake.fail_get_device = 1; /* the device cannot be made current: nothing is read */
    found = -1;
    assert_int_not_equal(gg_fp16_overflow(ctx, &found, 1), GG_SUCCESS);
    assert_int_equal(found, 0);
    assert_message_has(ctx, "gg_fp16_overflow");
    fake.fail_get_device = 0;
    destroy_ctx(ctx);
}

/* Every argument checked and named (NULL, misaligned, overlapping, host memory, past the end of memory), nothing
 * enqueued when refused; count 0 enqueues nothing; otherwise one launch, fp32 or bf16, at any count; a failed launch
 * is named and the context works after it. */
static void check_finite_checks_and_launches(void **state) {
    (void)state;
    assert_int_equal(gg_check_finite(NULL, FAKE(0), 8, 0, FAKE(1), NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "gg_check_finite: ctx is NULL"));
    gg_ctx *ctx = make_ctx();
    unsigned *flag = (unsigned *)FAKE(1);
    expect_finite_refused(ctx, NULL, 8, 0, flag, GG_ERROR_INVALID_ARGUMENT, "gg_check_finite: data is NULL");
    expect_finite_refused(ctx, FAKE(0), 8, 0, NULL, GG_ERROR_INVALID_ARGUMENT, "gg_check_finite: device_flag is NULL");
    expect_finite_refused(ctx, (char *)FAKE(0) + 4, 8, 0, flag, GG_ERROR_MISALIGNED,
                          "gg_check_finite: data (0x100000000004) is not 16-byte aligned");
    expect_finite_refused(ctx, FAKE(0), 8, 0, (unsigned *)((char *)FAKE(1) + 2), GG_ERROR_MISALIGNED,
                          "device_flag (0x200000000002) is not 4-byte aligned");
    expect_finite_refused(ctx, FAKE(0), 8, 0, (unsigned *)((char *)FAKE(0) + 28), GG_ERROR_INVALID_ARGUMENT,
                          "gg_check_finite: device_flag overlaps data");
    expect_finite_refused(ctx, FAKE(0), SIZE_MAX / 2, 0, flag, GG_ERROR_INVALID_ARGUMENT,
                          "run past the end of memory");
    expect_finite_refused(ctx, (void *)(UINTPTR_MAX & ~(uintptr_t)15), 8, 0, flag, GG_ERROR_INVALID_ARGUMENT,
                          "gg_check_finite: data (0xfffffffffffffff0) and its 32 bytes run past the end of memory");
    fake.host_lo = (uintptr_t)FAKE(1);
    fake.host_hi = fake.host_lo + 16;
    expect_finite_refused(ctx, FAKE(0), 8, 0, flag, GG_ERROR_INVALID_ARGUMENT,
                          "gg_check_finite: device_flag (0x200000000000) is host memory");
    /* a count larger than the buffer: its last byte no device memory (a count whose last byte no call checked yet:
     * the ones found to be device memory are remembered) */
    fake.host_lo = (uintptr_t)FAKE(0) + 35;
    fake.host_hi = fake.host_lo + 1;
    expect_finite_refused(ctx, FAKE(0), 9, 0, flag, GG_ERROR_INVALID_ARGUMENT,
                          "gg_check_finite: the last byte of data's 36 bytes (0x100000000023) is not device memory");
    fake.host_lo = fake.host_hi = 0;
    const int launches = fake_kernel_launches("check_finite_kernel");
    assert_int_equal(gg_check_finite(ctx, FAKE(0), 0, 0, flag, NULL), GG_SUCCESS); /* nothing to check */
    assert_int_equal(fake_kernel_launches("check_finite_kernel"), launches);
    assert_int_equal(gg_check_finite(ctx, FAKE(0), 3, 1, flag, NULL), GG_SUCCESS); /* bf16, a tail only */
    assert_int_equal(gg_check_finite(ctx, FAKE(0), 1000003, 0, flag, NULL), GG_SUCCESS);
    assert_int_equal(fake_kernel_launches("check_finite_kernel"), launches + 2);
    fake.fail_kind = FAKE_LAUNCH;
    fake.fail_at = fake.calls[FAKE_LAUNCH] + 1;
    assert_int_equal(gg_check_finite(ctx, FAKE(0), 64, 0, flag, NULL), GG_ERROR_CUDA);
    assert_message_has(ctx, "gg_check_finite: launching the check");
    fake.fail_at = 0;
    assert_int_equal(gg_check_finite(ctx, FAKE(0), 64, 0, flag, NULL), GG_SUCCESS);
    assert_int_equal(fake_kernel_launches("check_finite_kernel"), launches + 3);
    destroy_ctx(ctx);
}

/* ---- misuse: host memory, two threads ---- */

/* Host memory (unregistered or pinned) and another device's memory are refused at validation, naming the argument,
 * with nothing enqueued, on the eager and the graph path; managed memory is accepted. */
static void host_pointers_are_refused(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_mlp_desc d = mlp_desc();
    gg_mlp_args a = mlp_args();
    fake.host_lo = (uintptr_t)FAKE(3); /* weight2 */
    fake.host_hi = fake.host_lo + 16;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT,
                        "gg_mlp_backward: args->weight2 (0x400000000000) is host memory; gradgraph needs device "
                        "memory");
    fake.host_pinned = 1;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT, "args->weight2 (0x400000000000) is pinned host memory");
    fake.host_lo = fake.host_hi = 0;
    fake.foreign_lo = (uintptr_t)FAKE(3); /* device 1's memory for a context on device 0 */
    fake.foreign_hi = fake.foreign_lo + 16;
    expect_mlp_rejected(ctx, &d, &a, GG_ERROR_INVALID_ARGUMENT,
                        "args->weight2 (0x400000000000) is memory of device 1, and the context is on device 0");
    fake.foreign_lo = fake.foreign_hi = 0;
    fake.managed_lo = (uintptr_t)FAKE(3);
    fake.managed_hi = fake.managed_lo + 16;
    assert_int_equal(gg_mlp_backward(ctx, &d, &a, NULL), GG_ERROR_CUBLAS); /* through validation: planning refused */
    /* the graph path checks the same way */
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    ta.mask = FAKE(30); /* FAKE(3) is known to be device memory now: the call above cached it */
    fake.host_lo = (uintptr_t)FAKE(30);
    fake.host_hi = fake.host_lo + 16;
    fake.host_pinned = 0;
    fake.enqueued = 0;
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_graph_run: args->mask (0x1f00000000000) is host memory");
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.captures_open, 0);
    gg_graph_destroy(g);
    /* device_tokens too: the device reads it inside the replay */
    gc.device_select = 1;
    assert_int_equal(gg_tanh_gate_graph_create(ctx, &td, &gc, &g), GG_SUCCESS);
    ta = tanh_args();
    assert_int_equal(gg_tanh_gate_graph_run_device(g, &td, (const int64_t *)FAKE(30), &ta, NULL),
                     GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_graph_run_device: device_tokens (0x1f00000000000) is host memory");
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.captures_open, 0);
    fake.host_lo = fake.host_hi = 0;
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* Two driver queries per new tensor (its first and its last byte): repeated eager calls and replays with the same
 * pointers look them up, also across a few hundred tensors; a tensor smaller than the dims say is refused. */
static void device_pointers_are_queried_once(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    fake.pointer_queries = 0;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.pointer_queries, 14); /* block 1's seven tensors */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.pointer_queries, 14);
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    for (int i = 0; i < 3; ++i) assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.pointer_queries, 14);
    ta.grad_gate = FAKE(9); /* one new tensor: two queries */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(fake.pointer_queries, 16);
    /* 300 more tensors (a large model's eager loop): remembered all, so a second pass makes no query */
    for (int pass = 0; pass < 2; ++pass)
        for (int k = 0; k < 300; ++k) {
            ta.grad_gate = FAKE(100 + k);
            assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
        }
    assert_int_equal(fake.pointer_queries, 16 + 600);
    /* hidden_states smaller than tokens x hidden: its last byte is no device memory */
    ta = tanh_args();
    ta.hidden_states = FAKE(10);
    const size_t bytes = (size_t)td.tokens * (size_t)td.hidden * 2;
    fake.host_lo = (uintptr_t)FAKE(10) + bytes - 1;
    fake.host_hi = fake.host_lo + 1;
    fake.enqueued = 0;
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_tanh_gate_backward: the last byte of args->hidden_states's 524288 bytes (");
    assert_message_has(ctx, "is not device memory: the buffer is smaller than the call says");
    assert_int_equal(fake.enqueued, 0);
    fake.host_lo = fake.host_hi = 0;
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

/* A log callback that calls gradgraph back on an ERROR line: a destroy and a block call on the context that logged
 * (still inside its call), and a call on another context. Each is refused, nothing freed under the call that logged
 * (AddressSanitizer sees a use after free otherwise), and that call ends as it would have. */
static struct {
    gg_ctx *ctx, *other;
    gg_status block, other_block;
    int destroys, errors;
    char said[512];
} reentry;

static void call_back_on_error(void *user, gg_log_level level, const char *message) {
    (void)user, (void)message;
    if (level != GG_LOG_ERROR || reentry.errors++) return;
    gg_ctx_destroy(reentry.ctx);
    ++reentry.destroys;
    snprintf(reentry.said, sizeof reentry.said, "%s", gg_last_error(NULL));
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    reentry.block = gg_tanh_gate_backward(reentry.ctx, &td, &ta, NULL);
    reentry.other_block = gg_tanh_gate_backward(reentry.other, &td, &ta, NULL);
}

static void log_callback_cannot_call_back(void **state) {
    (void)state;
    gg_ctx *other = make_ctx();
    gg_config c = GG_CONFIG_INIT;
    c.log_fn = call_back_on_error;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    reentry.ctx = ctx, reentry.other = other;
    reentry.errors = reentry.destroys = 0;
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    ta.grad_output = NULL; /* refused: an ERROR line */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "args->grad_output is NULL");
    assert_int_equal(reentry.destroys, 1);
    assert_true(strstr(reentry.said, "gg_ctx_destroy: called from inside a gradgraph log callback") != NULL);
    assert_int_equal(reentry.block, GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(reentry.other_block, GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_tanh_gate_backward: called from inside a gradgraph log callback");
    ta = tanh_args(); /* the context is whole, and usable again */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    destroy_ctx(other);
}

static void second_thread_is_refused(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx();
    gg_tanh_gate_desc td = tanh_desc();
    gg_tanh_gate_args ta = tanh_args();
    gg_graph_config gc = config_to_1024();
    gg_graph *g = tanh_graph(ctx, &gc);
    gg_step *step = NULL;
    gg_optim *opt = NULL;
    assert_int_equal(gg_step_create(ctx, NULL, &step), GG_SUCCESS);
    assert_int_equal(gg_optim_create(ctx, NULL, &opt), GG_SUCCESS);
    held_call_begin(ctx);
    const int enqueued = fake.enqueued;
    /* another thread is inside gg_tanh_gate_backward: this thread's calls are refused, their message in its own
     * buffer */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_tanh_gate_backward: the context is in use by another thread");
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_tanh_gate_graph_run: the context is in use by another thread");
    gg_mlp_desc md = mlp_desc();
    gg_graph *g2 = (gg_graph *)FAKE(0);
    assert_int_equal(gg_mlp_graph_create(ctx, &md, NULL, &g2), GG_ERROR_INVALID_ARGUMENT);
    assert_null(g2);
    assert_message_has(NULL, "gg_mlp_graph_create: the context is in use by another thread");
    int found = 7; /* an entry point that claims the context as it makes its device current */
    assert_int_equal(gg_fp16_overflow(ctx, &found, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_fp16_overflow: the context is in use by another thread");
    /* the communicator calls claim the context too, gg_dist_detach even with nothing to detach */
    assert_int_equal(gg_dist_detach(ctx), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_detach: the context is in use by another thread");
    const int queries = fake.pointer_queries; /* refused before it reads the context (its known device pointers) */
    assert_int_equal(gg_dist_reduce(ctx, FAKE(40), 16, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_reduce: the context is in use by another thread");
    assert_int_equal(fake.pointer_queries, queries);
    void *buffer = FAKE(41);
    assert_int_equal(gg_dist_alloc(ctx, 4096, &buffer), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_alloc: the context is in use by another thread");
    assert_null(buffer);
    assert_int_equal(gg_dist_free(ctx, FAKE(41)), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_free: the context is in use by another thread");
    assert_int_equal(gg_dist_check(ctx), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_dist_check: the context is in use by another thread");
    /* destroying what the other thread may be using is refused too: nothing is freed (ASan would see a use after
     * free) */
    gg_graph_destroy(g);
    assert_message_has(NULL, "gg_graph_destroy: the context is in use by another thread");
    gg_step_destroy(step);
    assert_message_has(NULL, "gg_step_destroy: the context is in use by another thread");
    gg_optim_destroy(opt);
    assert_message_has(NULL, "gg_optim_destroy: the context is in use by another thread");
    gg_ctx_destroy(ctx);
    assert_message_has(NULL, "gg_ctx_destroy: the context is in use by another thread");
    /* and the queries that read what the other thread may be changing (exec caches, parameter lists) */
    gg_graph_memory gm;
    assert_int_equal(gg_graph_memory_info(g, 0, &gm), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_graph_memory_info: the context is in use by another thread");
    gg_step_memory sm;
    assert_int_equal(gg_step_memory_info(step, &sm), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_memory_info: the context is in use by another thread");
    gg_optim_memory om;
    assert_int_equal(gg_optim_memory_info(opt, &om), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_memory_info: the context is in use by another thread");
    /* adding an optimizer reads its state and counts the step among its holders: claimed first */
    assert_int_equal(gg_step_add_optimizer(step, opt), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_add_optimizer: the context is in use by another thread");
    /* refused for its arguments before it claims the context: the message is this thread's all the same */
    assert_int_equal(gg_fp16_overflow(ctx, NULL, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_fp16_overflow: found is NULL");
    assert_string_equal(gg_last_error(ctx), ""); /* the other thread's message is untouched */
    assert_int_equal(fake.enqueued, enqueued);
    assert_int_equal(held_call_end(), GG_SUCCESS);
    /* released: this thread may use the context now */
    assert_int_equal(gg_tanh_gate_backward(ctx, &td, &ta, NULL), GG_SUCCESS);
    assert_int_equal(gg_tanh_gate_graph_run(g, &td, &ta, NULL), GG_SUCCESS);
    gg_step_destroy(step);
    gg_optim_destroy(opt);
    gg_graph_destroy(g);
    destroy_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_strings_name_every_status),
        cmocka_unit_test(precision_and_version_strings),
        cmocka_unit_test(create_rejects_null_out),
        cmocka_unit_test(create_rejects_wrong_struct_size),
        cmocka_unit_test(create_rejects_wrong_version),
        cmocka_unit_test(create_rejects_bad_fields),
        cmocka_unit_test(create_without_device),
        cmocka_unit_test(create_and_destroy),
        cmocka_unit_test(create_failure_paths_leak_nothing),
        cmocka_unit_test(log_callback_gets_errors),
        cmocka_unit_test(null_ctx_desc_args_every_block),
        cmocka_unit_test(tokens_zero_negative_and_too_large),
        cmocka_unit_test(dims_must_be_positive_multiples_of_8),
        cmocka_unit_test(tensor_bytes_overflow),
        cmocka_unit_test(every_null_tensor_is_named),
        cmocka_unit_test(misaligned_pointer_says_alignment),
        cmocka_unit_test(outputs_must_not_alias),
        cmocka_unit_test(residual_is_optional_and_checked),
        cmocka_unit_test(unsupported_precision),
        cmocka_unit_test(ssm_gate_pointer_needed_only_with_silu),
        cmocka_unit_test(valid_calls_pass_validation),
        cmocka_unit_test(ffn_fp16_plans_g_by_tokens),
        cmocka_unit_test(eager_call_in_a_capture_needs_a_plan_made_outside),
        cmocka_unit_test(graph_create_rejects_bad_config),
        cmocka_unit_test(graph_create_plans_and_cleans_up_on_failure),
        cmocka_unit_test(graph_staging_holds_what_runs_read),
        cmocka_unit_test(narrow_schedules_only_beside_a_second_stream),
        cmocka_unit_test(graph_run_checks_its_arguments),
        cmocka_unit_test(pending_cuda_error_is_the_applications),
        cmocka_unit_test(a_pending_error_is_one_threads),
        cmocka_unit_test(a_stream_of_another_device_is_refused),
        cmocka_unit_test(graph_run_refuses_what_differs_from_the_graph),
        cmocka_unit_test(graph_runs_eagerly_past_its_largest_bucket_when_asked),
        cmocka_unit_test(graph_device_errors_reads_the_counter),
        cmocka_unit_test(graph_debug_dot_captures_again),
        cmocka_unit_test(log_level_from_environment),
        cmocka_unit_test(gemm_cluster_limit_from_environment),
        cmocka_unit_test(split_k_only_at_multiples_of_128),
        cmocka_unit_test(bf16_tail_apart_rounds_once),
        cmocka_unit_test(dist_entry_points_check_arguments),
        cmocka_unit_test(check_finite_checks_and_launches),
        cmocka_unit_test(fp16_overflow_word_read_and_cleared),
        cmocka_unit_test(host_pointers_are_refused),
        cmocka_unit_test(device_pointers_are_queried_once),
        cmocka_unit_test(log_callback_cannot_call_back),
        cmocka_unit_test(second_thread_is_refused),
    };
    return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
