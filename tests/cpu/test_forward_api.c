/*
 * test_forward_api.c - the forward entry points (gg_*_forward) on a machine without a GPU: every argument check
 * with its message and nothing enqueued or planned on a refusal, the GEMMs and epilogues a valid call plans and runs,
 * the kernels it launches, and the rules inside a stream capture. The CUDA runtime and cuBLASLt are the link-time
 * fakes of tests/fake (see tests/CMakeLists.txt).
 */
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
#include "gradgraph.h"

#define assert_message_has(ctx, text)                                                                              \
    do {                                                                                                           \
        const char *msg_ = gg_last_error(ctx);                                                                     \
        if (!strstr(msg_, (text))) fail_msg("message \"%s\" does not contain \"%s\"", msg_, (text));             \
    } while (0)

/* A context on the fakes; plan_ok: cuBLASLt plans succeed (else the fake refuses every plan). */
static gg_ctx *make_ctx(int plan_ok) {
    fake_reset(1);
    gg_config config = GG_CONFIG_INIT;
    config.tune_cache_path = ""; /* nothing written to the user's cache */
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&config, &ctx), GG_SUCCESS);
    fake.plan_ok = plan_ok;
    fake.enqueued = fake.planned = 0;
    memset(fake.calls, 0, sizeof fake.calls);
    return ctx;
}

static void destroy_ctx(gg_ctx *ctx) {
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* ---- one table row per forward: its desc, args (all pointers FAKE(i) in field order) and call ---- */
typedef struct fwd {
    const char *fn;
    int n;                   /* pointer fields of its args struct */
    const char *names[8];    /* in field order */
    gg_status (*call)(gg_ctx *ctx, const void *desc, const void *args);
    size_t desc_bytes;
    const void *desc;        /* a valid desc */
} fwd;

static gg_status call_tanh(gg_ctx *c, const void *d, const void *a) { return gg_tanh_gate_forward(c, d, a, NULL); }
static gg_status call_ffn(gg_ctx *c, const void *d, const void *a) { return gg_gelu_ffn_forward(c, d, a, NULL); }
static gg_status call_mlp(gg_ctx *c, const void *d, const void *a) { return gg_mlp_forward(c, d, a, NULL); }
static gg_status call_ssm(gg_ctx *c, const void *d, const void *a) { return gg_ssm_gate_forward(c, d, a, NULL); }

static const gg_tanh_gate_desc tanh_desc = {.tokens = 64, .hidden = 4096};
static const gg_gelu_ffn_desc ffn_desc = {.tokens = 64, .hidden = 1536, .ffn = 6144};
static const gg_mlp_desc mlp_desc = {.tokens = 64, .hidden = 2048, .ffn = 8192};
static const gg_ssm_gate_desc ssm_desc = {.tokens = 64, .hidden = 768, .expanded = 1536, .use_silu_gate = 1};

static const fwd fwds[] = {
    {"gg_tanh_gate_forward", 5, {"residual", "gate", "hidden_states", "mask", "output"}, call_tanh,
     sizeof tanh_desc, &tanh_desc},
    {"gg_gelu_ffn_forward", 7,
     {"hidden_states", "weight1", "weight2", "linear1_out", "gelu_out", "tanh_inner", "output"}, call_ffn,
     sizeof ffn_desc, &ffn_desc},
    {"gg_mlp_forward", 8,
     {"hidden_states", "weight1", "bias1", "weight2", "bias2", "intermediate", "intermediate_activated", "output"},
     call_mlp, sizeof mlp_desc, &mlp_desc},
    {"gg_ssm_gate_forward", 7,
     {"ssm_output", "gate", "weight", "bias", "gate_activated", "gated_output", "output"}, call_ssm, sizeof ssm_desc,
     &ssm_desc},
};
enum { TANH, FFN, MLP, SSM, N_FWDS };

/* Every args struct is n pointers in field order (the library asserts the same of its tables). */
typedef struct any_args {
    void *p[13];
} any_args;
_Static_assert(sizeof(gg_mlp_fwd_args) <= sizeof(any_args), "the largest args struct fits");

static any_args valid_args(const fwd *f) {
    any_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < f->n; ++i) a.p[i] = FAKE(i);
    return a;
}

static int field(const fwd *f, const char *name) {
    for (int i = 0; i < f->n; ++i)
        if (strcmp(f->names[i], name) == 0) return i;
    fail_msg("%s has no field %s", f->fn, name);
    return -1;
}

/* A desc of f's block with one int64 field changed (at byte offset `at`). */
typedef union any_desc {
    gg_tanh_gate_desc tanh;
    gg_gelu_ffn_desc ffn;
    gg_mlp_desc mlp;
    gg_ssm_gate_desc ssm;
} any_desc;

static any_desc desc_of(const fwd *f) {
    any_desc d;
    memset(&d, 0, sizeof d);
    memcpy(&d, f->desc, f->desc_bytes);
    return d;
}

/* The call must be refused with status and a message containing text, with nothing planned or enqueued. */
static void expect_rejected(gg_ctx *ctx, const fwd *f, const void *desc, const any_args *a, gg_status status,
                            const char *text) {
    fake.enqueued = fake.planned = 0;
    assert_int_equal(f->call(ctx, desc, a), status);
    assert_message_has(ctx, text);
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake.planned, 0);
}

/* ---- argument checks ---- */
static void null_ctx_desc_args(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(0);
    for (int b = 0; b < N_FWDS; ++b) {
        const fwd *f = &fwds[b];
        const any_args a = valid_args(f);
        char text[96];
        assert_int_equal(f->call(NULL, f->desc, &a), GG_ERROR_INVALID_ARGUMENT);
        snprintf(text, sizeof text, "%s: ctx is NULL", f->fn);
        assert_message_has(NULL, text);
        snprintf(text, sizeof text, "%s: desc is NULL", f->fn);
        expect_rejected(ctx, f, NULL, &a, GG_ERROR_INVALID_ARGUMENT, text);
        snprintf(text, sizeof text, "%s: args is NULL", f->fn);
        fake.enqueued = 0;
        assert_int_equal(f->call(ctx, f->desc, NULL), GG_ERROR_INVALID_ARGUMENT);
        assert_message_has(ctx, text);
        assert_int_equal(fake.enqueued, 0);
    }
    destroy_ctx(ctx);
}

/* Every pointer, NULL in turn, is named (block 2's tanh_inner may be NULL: then it is not written). */
static void every_null_tensor_is_named(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(0);
    for (int b = 0; b < N_FWDS; ++b) {
        const fwd *f = &fwds[b];
        for (int i = 0; i < f->n; ++i) {
            if (b == FFN && i == field(f, "tanh_inner")) continue;
            any_args a = valid_args(f);
            a.p[i] = NULL;
            char text[96];
            snprintf(text, sizeof text, "%s: args->%s is NULL", f->fn, f->names[i]);
            expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT, text);
        }
    }
    destroy_ctx(ctx);
}

static void misaligned_pointers_are_named(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(0);
    for (int b = 0; b < N_FWDS; ++b) {
        const fwd *f = &fwds[b];
        for (int i = 0; i < f->n; ++i) {
            any_args a = valid_args(f);
            a.p[i] = (char *)a.p[i] + 4;
            char text[128];
            snprintf(text, sizeof text, "%s: args->%s (%p) is not 16-byte aligned", f->fn, f->names[i], a.p[i]);
            expect_rejected(ctx, f, f->desc, &a, GG_ERROR_MISALIGNED, text);
        }
    }
    destroy_ctx(ctx);
}

static void sizes_and_precision_are_checked(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(0);
    for (int b = 0; b < N_FWDS; ++b) {
        const fwd *f = &fwds[b];
        const any_args a = valid_args(f);
        any_desc d = desc_of(f);
        int64_t *tokens = (int64_t *)&d, *hidden = tokens + 1; /* every desc starts with tokens, hidden */
        char text[128];
        *tokens = 0;
        snprintf(text, sizeof text, "%s: desc->tokens = 0: an empty batch", f->fn);
        expect_rejected(ctx, f, &d, &a, GG_ERROR_INVALID_ARGUMENT, text);
        *tokens = -3;
        expect_rejected(ctx, f, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->tokens = -3 is negative");
        *tokens = (int64_t)INT32_MAX + 1;
        expect_rejected(ctx, f, &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->tokens = 2147483648 exceeds");
        d = desc_of(f);
        *hidden = 12;
        snprintf(text, sizeof text, "%s: desc->hidden = 12 is not a multiple of 8", f->fn);
        expect_rejected(ctx, f, &d, &a, GG_ERROR_INVALID_ARGUMENT, text);
    }
    any_desc d = desc_of(&fwds[FFN]);
    any_args a = valid_args(&fwds[FFN]);
    d.ffn.ffn = 20;
    expect_rejected(ctx, &fwds[FFN], &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->ffn = 20 is not a multiple of 8");
    d = desc_of(&fwds[FFN]);
    d.ffn.precision = GG_PRECISION_BF16;
    expect_rejected(ctx, &fwds[FFN], &d, &a, GG_ERROR_UNSUPPORTED, "gg_gelu_ffn_forward: desc->precision = bf16");
    d = desc_of(&fwds[MLP]);
    a = valid_args(&fwds[MLP]);
    d.mlp.precision = (gg_precision)9;
    expect_rejected(ctx, &fwds[MLP], &d, &a, GG_ERROR_INVALID_ARGUMENT, "desc->precision = 9 is not a gg_precision");
    d = desc_of(&fwds[SSM]);
    a = valid_args(&fwds[SSM]);
    d.ssm.expanded = 1537;
    expect_rejected(ctx, &fwds[SSM], &d, &a, GG_ERROR_INVALID_ARGUMENT,
                    "gg_ssm_gate_forward: desc->expanded = 1537 is not a multiple of 8");
    destroy_ctx(ctx);
}

static void outputs_must_not_alias(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(0);
    const fwd *f = &fwds[MLP];
    any_args a = valid_args(f);
    a.p[field(f, "output")] = a.p[field(f, "hidden_states")];
    expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT,
                    "gg_mlp_forward: output args->output overlaps input args->hidden_states");
    f = &fwds[FFN];
    a = valid_args(f);
    a.p[field(f, "tanh_inner")] = (char *)a.p[field(f, "gelu_out")] + 64; /* inside gelu_out */
    expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT,
                    "output args->gelu_out overlaps output args->tanh_inner");
    f = &fwds[SSM];
    a = valid_args(f);
    a.p[field(f, "gated_output")] = a.p[field(f, "gate")];
    expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT, "args->gated_output overlaps input args->gate");
    f = &fwds[TANH];
    a = valid_args(f);
    a.p[field(f, "output")] = a.p[field(f, "residual")]; /* in place is refused too */
    expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT,
                    "output args->output overlaps input args->residual");
    destroy_ctx(ctx);
}

static void host_pointers_are_refused(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(0);
    const fwd *f = &fwds[SSM];
    const any_args a = valid_args(f);
    fake.host_lo = (uintptr_t)a.p[field(f, "bias")];
    fake.host_hi = fake.host_lo + 16;
    char text[128];
    snprintf(text, sizeof text, "gg_ssm_gate_forward: args->bias (%p) is host memory; gradgraph needs device memory",
             a.p[field(f, "bias")]);
    expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT, text);
    fake.host_lo = fake.host_hi = 0;
    destroy_ctx(ctx);
}

/* ---- what a valid call runs ---- */

/* Kernel launches and GEMMs of one call. */
static void expect_work(gg_ctx *ctx, const fwd *f, const void *desc, const any_args *a, int launches, int gemms) {
    memset(fake.calls, 0, sizeof fake.calls);
    fake.n_epilogues = 0;
    const gg_status st = f->call(ctx, desc, a);
    if (st != GG_SUCCESS) fail_msg("%s: %s", f->fn, gg_last_error(ctx));
    assert_int_equal(fake.calls[FAKE_LAUNCH], launches);
    assert_int_equal(fake.calls[FAKE_MATMUL], gemms);
}

static void valid_calls_run_their_gemms_and_kernels(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(1);
    /* block 1: one kernel */
    any_args a = valid_args(&fwds[TANH]);
    expect_work(ctx, &fwds[TANH], fwds[TANH].desc, &a, 1, 0);
    /* block 3 in fp32: the GELU and bias1 in the first GEMM's epilogue (aux = intermediate), bias2 in the second's */
    const fwd *f = &fwds[MLP];
    a = valid_args(f);
    any_desc d = desc_of(f);
    d.mlp.accumulate = 1; /* ignored by a forward */
    d.mlp.precision = GG_PRECISION_FP32;
    expect_work(ctx, f, &d, &a, 0, 2);
    assert_int_equal(fake.n_epilogues, 2); /* planned now */
    assert_int_equal(fake.epilogues[0], CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    assert_int_equal(fake.epilogues[1], CUBLASLT_EPILOGUE_BIAS);
    assert_ptr_equal(fake.bias_pointer, a.p[field(f, "bias2")]);
    assert_ptr_equal(fake.aux_pointer, a.p[field(f, "intermediate")]);
    expect_work(ctx, f, &d, &a, 0, 2); /* planned once: no epilogue planned again */
    assert_int_equal(fake.n_epilogues, 0);
    /* fp16: x, W1, act and W2 converted (four launches) */
    d.mlp.precision = GG_PRECISION_FP16;
    expect_work(ctx, f, &d, &a, 4, 2);
    /* block 2: GELU_AUX and a plain GEMM; tanh_inner costs one kernel when asked for */
    f = &fwds[FFN];
    a = valid_args(f);
    d = desc_of(f);
    expect_work(ctx, f, &d, &a, 1, 2);
    assert_int_equal(fake.n_epilogues, 1);
    assert_int_equal(fake.epilogues[0], CUBLASLT_EPILOGUE_GELU_AUX);
    assert_ptr_equal(fake.aux_pointer, a.p[field(f, "linear1_out")]);
    a.p[field(f, "tanh_inner")] = NULL;
    expect_work(ctx, f, &d, &a, 0, 2);
    /* block 4: the gate pass, then one GEMM with its bias */
    f = &fwds[SSM];
    a = valid_args(f);
    expect_work(ctx, f, f->desc, &a, 1, 1);
    assert_int_equal(fake.epilogues[0], CUBLASLT_EPILOGUE_BIAS);
    assert_ptr_equal(fake.bias_pointer, a.p[field(f, "bias")]);
    destroy_ctx(ctx);
}

/* GG_FORWARD_GELU=kernel (read when a plan is made): the first GEMM writes the pre-activation (with a BIAS epilogue
 * in block 3) and gradgraph's kernel the GELU. */
static void gelu_kernel_switch(void **state) {
    (void)state;
    setenv("GG_FORWARD_GELU", "kernel", 1);
    gg_ctx *ctx = make_ctx(1);
    const fwd *f = &fwds[MLP];
    any_args a = valid_args(f);
    expect_work(ctx, f, f->desc, &a, 1, 2);
    assert_int_equal(fake.n_epilogues, 2);
    assert_int_equal(fake.epilogues[0], CUBLASLT_EPILOGUE_BIAS);
    assert_int_equal(fake.epilogues[1], CUBLASLT_EPILOGUE_BIAS);
    f = &fwds[FFN];
    a = valid_args(f);
    expect_work(ctx, f, f->desc, &a, 1, 2); /* one kernel writes gelu_out and tanh_inner */
    assert_int_equal(fake.n_epilogues, 0);  /* plain GEMMs */
    any_desc d = desc_of(f);
    d.ffn.precision = GG_PRECISION_FP16;
    expect_work(ctx, f, &d, &a, 4, 2); /* x, W1, W2 converted; act's fp16 copy from the GELU kernel */
    unsetenv("GG_FORWARD_GELU");
    destroy_ctx(ctx);
}

static int error_lines, info_lines;
static void count_lines(void *user, gg_log_level level, const char *message) {
    (void)user, (void)message;
    error_lines += level == GG_LOG_ERROR;
    info_lines += level == GG_LOG_INFO;
}

/* When cuBLASLt has no algorithm with the GELU epilogue for a shape, the plan runs the GELU in the kernel instead: the
 * call succeeds, logs no ERROR line (an INFO one says what happened) and leaves no message behind. */
static void no_epilogue_algorithm_falls_back_to_the_kernel(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(1);
    gg_ctx_destroy(ctx);
    gg_config config = GG_CONFIG_INIT;
    config.tune_cache_path = "";
    config.log_fn = count_lines;
    config.log_level = GG_LOG_INFO;
    assert_int_equal(gg_ctx_create(&config, &ctx), GG_SUCCESS);
    error_lines = info_lines = 0;
    const fwd *f = &fwds[MLP];
    const any_args a = valid_args(f);
    fake.fail_kind = FAKE_HEURISTIC;
    fake.fail_at = 1; /* the first GEMM's query, with GELU_AUX_BIAS */
    memset(fake.calls, 0, sizeof fake.calls);
    fake.n_epilogues = 0;
    assert_int_equal(f->call(ctx, f->desc, &a), GG_SUCCESS);
    fake.fail_at = 0;
    assert_int_equal(fake.n_epilogues, 3);
    assert_int_equal(fake.epilogues[0], CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    assert_int_equal(fake.epilogues[1], CUBLASLT_EPILOGUE_BIAS); /* planned again without the GELU */
    assert_int_equal(fake.calls[FAKE_LAUNCH], 1);                /* gg_k_gelu_forward */
    assert_int_equal(fake.calls[FAKE_MATMUL], 2);
    assert_int_equal(error_lines, 0);
    assert_true(info_lines >= 1);
    assert_string_equal(gg_last_error(ctx), "");
    destroy_ctx(ctx);
}

/* ---- captures ---- */
static void a_capture_needs_a_plan_made_outside(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(1);
    fake.capturing = 1;
    for (int b = FFN; b <= SSM; ++b) {
        const fwd *f = &fwds[b];
        const int live = fake.live;
        const any_args a = valid_args(f);
        char text[128];
        snprintf(text, sizeof text, "%s: stream is being captured, and this shape (M = 64) has no plan ready", f->fn);
        expect_rejected(ctx, f, f->desc, &a, GG_ERROR_INVALID_ARGUMENT, text);
        assert_null(strstr(gg_last_error(ctx), "graph_create")); /* no graph to point a forward at */
        assert_int_equal(fake.live, live);                       /* nothing allocated */
        fake.capturing = 0;
        expect_work(ctx, f, f->desc, &a, b == SSM || b == FFN ? 1 : 0, b == SSM ? 1 : 2); /* plans, eagerly */
        fake.capturing = 1;
        expect_work(ctx, f, f->desc, &a, b == SSM || b == FFN ? 1 : 0, b == SSM ? 1 : 2); /* enqueues only */
        assert_int_equal(fake.n_epilogues, 0);
    }
    /* block 1's plan holds nothing: it is made inside the capture */
    const any_args a = valid_args(&fwds[TANH]);
    expect_work(ctx, &fwds[TANH], fwds[TANH].desc, &a, 1, 0);
    fake.capturing = 0;
    destroy_ctx(ctx);
}

/* A GEMM the runtime refuses after the first one ran: GG_ERROR_PARTIAL, naming the forward. */
static void enqueue_failure_is_partial(void **state) {
    (void)state;
    gg_ctx *ctx = make_ctx(1);
    const fwd *f = &fwds[MLP];
    const any_args a = valid_args(f);
    memset(fake.calls, 0, sizeof fake.calls);
    fake.fail_kind = FAKE_MATMUL;
    fake.fail_at = 2;
    assert_int_equal(f->call(ctx, f->desc, &a), GG_ERROR_PARTIAL);
    assert_message_has(ctx, "gg_mlp_forward: failed after enqueueing part of its work, every output is undefined");
    assert_null(strstr(gg_last_error(ctx), "accumulated"));
    fake.fail_at = 0;
    destroy_ctx(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_ctx_desc_args),
        cmocka_unit_test(every_null_tensor_is_named),
        cmocka_unit_test(misaligned_pointers_are_named),
        cmocka_unit_test(sizes_and_precision_are_checked),
        cmocka_unit_test(outputs_must_not_alias),
        cmocka_unit_test(host_pointers_are_refused),
        cmocka_unit_test(valid_calls_run_their_gemms_and_kernels),
        cmocka_unit_test(gelu_kernel_switch),
        cmocka_unit_test(no_epilogue_algorithm_falls_back_to_the_kernel),
        cmocka_unit_test(a_capture_needs_a_plan_made_outside),
        cmocka_unit_test(enqueue_failure_is_partial),
    };
    return cmocka_run_group_tests_name("forward_api", tests, NULL, NULL);
}
