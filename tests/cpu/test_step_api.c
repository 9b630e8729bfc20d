/*
 * test_step_api.c - the step graph API's checks on a machine without a GPU: every refusal of gg_step_create,
 * gg_step_add_*, gg_step_finalize, gg_step_run and gg_step_set_args names the function, the call and the field,
 * and comes before any CUDA call but the host-pointer check's cudaPointerGetAttributes (the context here is made by
 * hand, with no device behind it; the CUDA runtime is the fakes of tests/fake/fake_cuda.c, and every test ends by
 * checking that pointer queries were the only CUDA calls made), and a refused add adds nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_cuda.h"
#include "internal.h"

#define assert_message_has(ctx, text)                                                                              \
    do {                                                                                                           \
        const char *msg_ = gg_last_error(ctx);                                                                     \
        if (!strstr(msg_, (text))) fail_msg("message \"%s\" does not contain \"%s\"", msg_, (text));             \
    } while (0)

/* A context with its configuration and nothing on a device: enough for every check that precedes CUDA. */
static gg_ctx *hand_made_ctx(void) {
    fake_reset(0); /* no device: cudaPointerGetAttributes is the only CUDA call a check may make */
    gg_ctx *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    ctx->config = (gg_config)GG_CONFIG_INIT;
    return ctx;
}

/* Distinct, 16-byte aligned fake device addresses, far apart so that no two tensors overlap. */
#define FAKE(i) ((void *)(uintptr_t)(0x100000000000ull * (uint64_t)((i) + 1)))

static const gg_mlp_desc mlp = {.tokens = 1, .hidden = 256, .ffn = 1024, .precision = GG_PRECISION_FP32};

/* Layer l's MLP args: its own tensors, grad_output the previous layer's grad_hidden_states (l > 0). */
static gg_mlp_args mlp_args(int l) {
    const int b = 16 * l;
    gg_mlp_args a = {FAKE(b + 0), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4), FAKE(b + 5),
                     FAKE(b + 6), FAKE(b + 7), FAKE(b + 8), FAKE(b + 9), FAKE(b + 10)};
    if (l > 0) a.grad_output = FAKE(16 * (l - 1) + 6);
    return a;
}

static gg_step *new_step(gg_ctx *ctx) {
    gg_step *step = NULL;
    assert_int_equal(gg_step_create(ctx, NULL, &step), GG_SUCCESS);
    assert_non_null(step);
    return step;
}

static void callback(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)stream, (void)tokens;
}

static void create_checks_its_arguments(void **state) {
    (void)state;
    gg_step *step = (gg_step *)FAKE(0);
    assert_int_equal(gg_step_create(NULL, NULL, &step), GG_ERROR_INVALID_ARGUMENT);
    assert_null(step);
    assert_message_has(NULL, "gg_step_create: ctx is NULL");
    gg_ctx *ctx = hand_made_ctx();
    assert_int_equal(gg_step_create(ctx, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "out is NULL");
    struct {
        gg_step_config config;
        gg_status status;
        const char *text;
    } bad[] = {
        {GG_STEP_CONFIG_INIT, GG_ERROR_VERSION, "config->struct_size"},
        {GG_STEP_CONFIG_INIT, GG_ERROR_VERSION, "config->version"},
        {GG_STEP_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->side_streams = 0"},
        {GG_STEP_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->side_streams = 5"},
        {GG_STEP_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->scratch_slots = 9"},
        {GG_STEP_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->execs_per_bucket = 0"},
        {GG_STEP_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->max_tokens = 0"},
    };
    bad[0].config.struct_size--;
    bad[1].config.version++;
    bad[2].config.side_streams = 0;
    bad[3].config.side_streams = 5;
    bad[4].config.scratch_slots = 9;
    bad[5].config.execs_per_bucket = 0;
    bad[6].config.max_tokens = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        step = (gg_step *)FAKE(0);
        assert_int_equal(gg_step_create(ctx, &bad[i].config, &step), bad[i].status);
        assert_null(step);
        assert_message_has(ctx, bad[i].text);
    }
    assert_int_equal(fake.cuda_calls, fake.pointer_queries); /* no CUDA call but the host-pointer checks' */
    free(ctx);
}

/* A refused add names the function, the call index and the field, and adds nothing. */
static void add_checks_every_call(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_step *step = new_step(ctx);
    const gg_mlp_args a0 = mlp_args(0), l1 = mlp_args(1);
    assert_int_equal(gg_step_add_mlp(NULL, &mlp, &a0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_add_mlp: step is NULL");
    assert_int_equal(gg_step_add_mlp(step, NULL, &a0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_mlp (call 0): desc is NULL");
    assert_int_equal(gg_step_add_mlp(step, &mlp, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_mlp (call 0): args is NULL");
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
    assert_int_equal(gg_step_add_callback(step, callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_add_callback(step, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_callback (call 2): fn is NULL");

    gg_mlp_args a1 = mlp_args(1);
    a1.hidden_states = NULL;
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_mlp (call 2): args->hidden_states is NULL");
    a1 = mlp_args(1);
    a1.weight1 = (const float *)((const char *)a1.weight1 + 4);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_ERROR_MISALIGNED);
    assert_message_has(ctx, "gg_step_add_mlp (call 2): args->weight1");
    gg_mlp_desc odd = mlp;
    odd.ffn = 1020;
    assert_int_equal(gg_step_add_mlp(step, &odd, &l1), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_mlp (call 2): desc->ffn = 1020 is not a multiple of 8");
    gg_mlp_desc bf16 = mlp;
    bf16.precision = GG_PRECISION_BF16;
    assert_int_equal(gg_step_add_mlp(step, &bf16, &l1), GG_ERROR_UNSUPPORTED);
    /* aliasing outputs, checked at the largest bucket's rows (4096 by default), not at desc->tokens */
    a1 = mlp_args(1);
    a1.grad_hidden_states = (float *)((char *)a1.hidden_states + (size_t)4095 * 256 * sizeof(float));
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_mlp (call 2): output args->grad_hidden_states overlaps input "
                            "args->hidden_states");
    const gg_ssm_gate_desc ssm = {.tokens = 1, .hidden = 768, .expanded = 1536, .use_silu_gate = 1};
    const gg_ssm_gate_args sa = {FAKE(100), FAKE(101), NULL,       FAKE(103), FAKE(104),
                                 FAKE(105), FAKE(106), FAKE(107), FAKE(108), FAKE(109)};
    assert_int_equal(gg_step_add_ssm_gate(step, &ssm, &sa), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_ssm_gate (call 2): args->gate is NULL");
    /* host memory where device memory is needed, as the eager calls refuse it */
    a1 = mlp_args(1);
    fake.host_lo = (uintptr_t)a1.weight2;
    fake.host_hi = fake.host_lo + 16;
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_mlp (call 2): args->weight2");
    assert_message_has(ctx, "is host memory");
    fake.host_lo = fake.host_hi = 0;
    assert_int_equal(gg_step_call_count(step), 2); /* the refused adds added nothing */

    assert_int_equal(gg_step_add_mlp(step, &mlp, &l1), GG_SUCCESS);
    assert_int_equal(gg_step_call_count(step), 3);
    gg_step_destroy(step);
    assert_null(ctx->hooks);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries); /* no CUDA call but the host-pointer checks' */
    free(ctx);
}

/* finalize refuses, before any CUDA call, what only the whole chain shows; run refuses an unfinalized step. */
static void finalize_checks_the_chain(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_step *step = new_step(ctx);
    assert_int_equal(gg_step_finalize(NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_finalize: step is NULL");
    assert_int_equal(gg_step_add_callback(step, callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize: the step has no block call");
    assert_int_equal(gg_step_run(step, 128, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_run: the step is not finalized");
    assert_int_equal(gg_step_run(NULL, 128, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_run: step is NULL");

    /* two calls writing one parameter gradient */
    const gg_mlp_args a1 = mlp_args(0);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_SUCCESS);
    gg_mlp_args a2 = mlp_args(1);
    a2.grad_bias1 = mlp_args(0).grad_bias1;
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a2), GG_SUCCESS); /* each call alone is fine */
    assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize: call 2's args->grad_bias1 overlaps call 1's parameter gradient "
                            "args->grad_bias1");

    /* set_args fixes call 2; its own checks first */
    assert_int_equal(gg_step_set_args(step, 0, &a2), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_set_args (call 0): the call is a callback");
    assert_int_equal(gg_step_set_args(step, 3, &a2), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_set_args: index = 3 is not in [0, 3)");
    assert_int_equal(gg_step_set_args(step, 2, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_set_args (call 2): args is NULL");
    gg_mlp_args bad = mlp_args(1);
    bad.weight2 = NULL;
    assert_int_equal(gg_step_set_args(step, 2, &bad), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_set_args (call 2): args->weight2 is NULL");

    /* an input reading part of an earlier activation gradient */
    gg_mlp_args a3 = mlp_args(1);
    a3.grad_output = (const float *)((const char *)mlp_args(0).grad_hidden_states + 256);
    assert_int_equal(gg_step_set_args(step, 2, &a3), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "call 2's args->grad_output overlaps call 1's args->grad_hidden_states without being "
                            "that tensor");
    gg_step_destroy(step);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries); /* no CUDA call but the host-pointer checks' */
    free(ctx);
}

/* The queries on a step that is not finalized yet, and NULL. */
static void queries_on_an_open_step(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_step *step = new_step(ctx);
    gg_step_destroy(NULL);
    assert_int_equal(gg_step_call_count(NULL), 0);
    gg_step_memory mem;
    assert_int_equal(gg_step_memory_info(NULL, &mem), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gg_step_memory_info(step, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_memory_info: out is NULL");
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.buckets, 6); /* 128 .. 4096 */
    assert_int_equal(mem.execs, 0);
    assert_int_equal(mem.staging_bytes, 0);
    gg_step_destroy(step);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries); /* no CUDA call but the host-pointer checks' */
    free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_checks_its_arguments),
        cmocka_unit_test(add_checks_every_call),
        cmocka_unit_test(finalize_checks_the_chain),
        cmocka_unit_test(queries_on_an_open_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
