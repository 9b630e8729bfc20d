/*
 * test_step_api.c - the step graph API's checks on a machine without a GPU: every refusal of gg_step_create,
 * gg_step_add_*, gg_step_finalize, gg_step_run and gg_step_set_args names the function, the call and the field,
 * and comes before any CUDA call but the host-pointer check's cudaPointerGetAttributes (the context here is made by
 * hand, with no device behind it; the CUDA runtime is the fakes of tests/fake/fake_cuda.c, and every test ends by
 * checking that pointer queries were the only CUDA calls made), and a refused add adds nothing. Then, on a context
 * the fakes make (a device that only counts), what runs capture and what replays: alternating pointer sets capture
 * once each, the exec cache updates in place or instantiates, and the device-selected step captures every bucket
 * behind one selection and refuses bad arguments.
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
#include "internal.h"
#include "step.h"

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

static const gg_mlp_desc mlp = {.tokens = 1, .hidden = 256, .ffn = 1024, .precision = GG_PRECISION_FP32};

/* Layer l's MLP args: its own tensors, grad_output the previous layer's grad_hidden_states (l > 0). */
static gg_mlp_args mlp_args(int l) {
    const int b = 16 * l;
    gg_mlp_args a = {FAKE(b + 0), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4), FAKE(b + 5), FAKE(b + 6),
                     FAKE(b + 7), FAKE(b + 8), FAKE(b + 9), FAKE(b + 10), NULL, NULL, NULL, NULL, NULL, NULL};
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
    const gg_tanh_gate_desc tanh = {.tokens = 1, .hidden = 512};
    gg_tanh_gate_args ta = {FAKE(110), FAKE(111), FAKE(112), NULL, FAKE(114), FAKE(115), FAKE(116)};
    assert_int_equal(gg_step_add_tanh_gate(step, &tanh, &ta), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_tanh_gate (call 2): args->mask is NULL");
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
    ta.mask = FAKE(113);
    assert_int_equal(gg_step_add_tanh_gate(step, &tanh, &ta), GG_SUCCESS);
    assert_int_equal(gg_step_call_count(step), 4);
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

/* gg_step_add_reduce and gg_step_set_sync refuse bad arguments with a message (a refused add adds nothing);
 * finalize refuses an entry that overlaps a parameter gradient or another entry, before any CUDA call; a
 * version-1 config (an older header, no sync_gradients) is still accepted. */
static void reduce_entries_and_sync(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_step *step = new_step(ctx);
    float *grad = (float *)FAKE(200);
    assert_int_equal(gg_step_add_reduce(NULL, grad, 8, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_add_reduce: step is NULL");
    assert_int_equal(gg_step_add_reduce(step, NULL, 8, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_reduce (call 0): grad is NULL");
    assert_int_equal(gg_step_add_reduce(step, grad, 0, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_reduce (call 0): count is 0");
    assert_int_equal(gg_step_add_reduce(step, (char *)grad + 2, 8, 0), GG_ERROR_MISALIGNED);
    assert_message_has(ctx, "gg_step_add_reduce (call 0): grad");
    assert_message_has(ctx, "is not aligned to its 4-byte elements");
    assert_int_equal(gg_step_add_reduce(step, (char *)grad + 2, 8, 1), GG_SUCCESS); /* bf16: 2-byte aligned */
    assert_int_equal(gg_step_add_reduce(step, grad, SIZE_MAX / 2, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_reduce (call 1): count = ");
    assert_message_has(ctx, "run past the address space");
    fake.host_lo = (uintptr_t)FAKE(201); /* host memory, refused by name */
    fake.host_hi = fake.host_lo + 64;
    assert_int_equal(gg_step_add_reduce(step, FAKE(201), 8, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_reduce: grad (");
    assert_message_has(ctx, "is host memory; gradgraph needs device memory");
    fake.host_lo = (uintptr_t)FAKE(202) + 31; /* a count larger than the buffer: its last byte no device memory */
    fake.host_hi = fake.host_lo + 1;
    assert_int_equal(gg_step_add_reduce(step, FAKE(202), 8, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_reduce: the last byte of grad's 32 bytes (");
    assert_message_has(ctx, "is not device memory: the buffer is smaller than the call says");
    fake.host_lo = fake.host_hi = 0;
    assert_int_equal(gg_step_call_count(step), 1); /* the refused adds added nothing */

    assert_int_equal(gg_step_set_sync(NULL, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_set_sync: step is NULL");
    assert_int_equal(gg_step_set_sync(step, 2), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_set_sync: sync = 2 is not 0 or 1");
    assert_int_equal(gg_step_set_sync(step, 0), GG_SUCCESS);
    assert_int_equal(gg_step_set_sync(step, 1), GG_SUCCESS);

    /* an entry inside a block call's parameter gradient: it would be reduced twice */
    const gg_mlp_args a0 = mlp_args(0);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
    assert_int_equal(gg_step_add_reduce(step, (char *)a0.grad_weight2 + 64, 16, 0), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize: call 2's gg_step_add_reduce buffer overlaps call 1's parameter "
                            "gradient args->grad_weight2");
    gg_step_destroy(step);

    /* two entries sharing bytes */
    step = new_step(ctx);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
    assert_int_equal(gg_step_add_reduce(step, grad, 64, 0), GG_SUCCESS);
    assert_int_equal(gg_step_add_reduce(step, grad + 63, 1, 0), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize: call 2's gg_step_add_reduce buffer overlaps call 1's");
    gg_step_destroy(step);

    /* configs: sync_gradients 0 or 1; a version-1 struct (without sync_gradients) is accepted */
    gg_step_config c = GG_STEP_CONFIG_INIT;
    assert_int_equal(c.sync_gradients, 1);
    c.sync_gradients = 2;
    step = (gg_step *)FAKE(0);
    assert_int_equal(gg_step_create(ctx, &c, &step), GG_ERROR_INVALID_ARGUMENT);
    assert_null(step);
    assert_message_has(ctx, "gg_step_create: config->sync_gradients = 2 is not 0 or 1");
    c = (gg_step_config)GG_STEP_CONFIG_INIT;
    c.version = 1;
    c.struct_size = offsetof(gg_step_config, sync_gradients);
    c.sync_gradients = 7; /* beyond a version-1 struct: never read */
    assert_int_equal(gg_step_create(ctx, &c, &step), GG_SUCCESS);
    gg_step_destroy(step);
    c.struct_size = sizeof c; /* version 1 with this header's size: refused */
    assert_int_equal(gg_step_create(ctx, &c, &step), GG_ERROR_VERSION);
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

/* ---- runs on the fakes' device ---- */

static gg_ctx *fake_device_ctx(void) {
    fake_reset(1);
    fake.plan_ok = 1;
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    return ctx;
}

static int64_t seen_tokens[16];
static int n_seen;
static void record_tokens(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)stream;
    if (n_seen < 16) seen_tokens[n_seen++] = tokens;
}

/* A step of up to 512 tokens holding one MLP call (layer 0's tensors), not finalized. */
static gg_step *one_call_step(gg_ctx *ctx) {
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.max_tokens = 512;
    gg_step *step = NULL;
    assert_int_equal(gg_step_create(ctx, &sc, &step), GG_SUCCESS);
    const gg_mlp_args a0 = mlp_args(0);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
    return step;
}

/* Two MLP layers (the second's grad_output the first's grad_hidden_states) with a callback between, finalized:
 * buckets 128, 256, 512. */
static gg_step *two_layer_step(gg_ctx *ctx, int execs_per_bucket) {
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.max_tokens = 512;
    sc.execs_per_bucket = execs_per_bucket;
    gg_step *step = NULL;
    assert_int_equal(gg_step_create(ctx, &sc, &step), GG_SUCCESS);
    const gg_mlp_args a0 = mlp_args(0), a1 = mlp_args(1);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
    assert_int_equal(gg_step_add_callback(step, record_tokens, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    memset(fake.calls, 0, sizeof fake.calls);
    n_seen = 0;
    return step;
}

/* Layer l's args with the other activation buffers (double buffering): hidden states and intermediates. */
static gg_mlp_args other_buffers(int l) {
    gg_mlp_args a = mlp_args(l);
    a.hidden_states = FAKE(200 + 4 * l);
    a.intermediate = FAKE(201 + 4 * l);
    a.intermediate_activated = FAKE(202 + 4 * l);
    return a;
}

/* Switches both layers to buffer set `set` (0 or 1). */
static void use_buffers(gg_step *step, int set) {
    for (int l = 0; l < 2; ++l) {
        const gg_mlp_args a = set ? other_buffers(l) : mlp_args(l);
        assert_int_equal(gg_step_set_args(step, 2 * l, &a), GG_SUCCESS); /* calls 0 and 2 (1 is the callback) */
    }
}

/* Alternating two pointer sets: two captures and two instantiations, then launches only; the accumulate flag and a
 * padded token count are part of the key too. */
static void alternating_pointer_sets_capture_twice(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_step *step = two_layer_step(ctx, 4);
    for (int r = 0; r < 10; ++r) {
        use_buffers(step, r % 2);
        assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    }
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 2);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 2);
    assert_int_equal(fake.calls[FAKE_EXEC_UPDATE], 0);
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 10);
    assert_int_equal(n_seen, 2); /* the callback ran at the two captures only, with the bucket's rows */
    assert_int_equal(seen_tokens[0], 512);
    /* set_args with the pointers the step has already: nothing new */
    use_buffers(step, 1);
    use_buffers(step, 1);
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 2);
    /* accumulate, then a padded count of the same bucket: each a capture of its own, then found */
    assert_int_equal(gg_step_run(step, 512, 1, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_run(step, 300, 0, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_run(step, 512, 1, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_run(step, 300, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 4);
    assert_int_equal(seen_tokens[3], 512); /* a padded run's callback gets the bucket's rows */
    gg_step_memory mem;
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 4);
    /* a fifth key in the full bucket: the least recently used exec is updated in place */
    assert_int_equal(gg_step_run(step, 400, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 4);
    assert_int_equal(fake.calls[FAKE_EXEC_UPDATE], 1);
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 4);
    gg_step_destroy(step);
    assert_int_equal(fake.captures_open, 0);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* One exec per bucket: alternating sets update it in place at every switch; an update the runtime refuses falls
 * back to a new instantiation. */
static void one_exec_per_bucket_updates_in_place(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_step *step = two_layer_step(ctx, 1);
    for (int r = 0; r < 4; ++r) {
        use_buffers(step, r % 2);
        assert_int_equal(gg_step_run(step, 256, 0, NULL), GG_SUCCESS);
    }
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 4);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 1);
    assert_int_equal(fake.calls[FAKE_EXEC_UPDATE], 3);
    fake.fail_kind = FAKE_EXEC_UPDATE;
    fake.fail_at = 4;
    use_buffers(step, 0);
    assert_int_equal(gg_step_run(step, 256, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.injected, 1);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 2);
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 5);
    gg_step_memory mem;
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 1);
    gg_step_destroy(step);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

static gg_optim *fake_optim(gg_ctx *ctx, int finalize) {
    gg_optim *opt = NULL;
    assert_int_equal(gg_optim_create(ctx, NULL, &opt), GG_SUCCESS);
    const gg_optim_param p = {.param = FAKE(200), .grad = FAKE(201), .count = 1000};
    assert_int_equal(gg_optim_add_param(opt, &p), GG_SUCCESS);
    if (finalize) assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    return opt;
}

/* gg_step_add_optimizer: refusals named (nothing added); in a run, the optimizer's launches come after the block
 * calls, inside the same capture, and every run launches the one graph. */
static void optimizer_in_the_step(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx(), *other = NULL;
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    assert_int_equal(gg_ctx_create(&c, &other), GG_SUCCESS);
    gg_optim *open = fake_optim(ctx, 0), *ready = fake_optim(ctx, 1), *foreign = fake_optim(other, 1);
    gg_step *step = one_call_step(ctx);
    assert_int_equal(gg_step_add_optimizer(NULL, ready), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gg_step_add_optimizer(step, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_optimizer (call 1): opt is NULL");
    assert_int_equal(gg_step_add_optimizer(step, open), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "opt is not finalized");
    assert_int_equal(gg_step_add_optimizer(step, foreign), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "another context");
    assert_int_equal(gg_step_call_count(step), 1);
    assert_int_equal(gg_step_add_optimizer(step, ready), GG_SUCCESS);
    assert_int_equal(gg_step_call_count(step), 2);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    assert_int_equal(gg_step_add_optimizer(step, ready), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "the step is finalized");
    /* a block call after the optimizer would make gradients the update has already run without */
    gg_step *late = one_call_step(ctx);
    const gg_mlp_args a1 = mlp_args(1);
    assert_int_equal(gg_step_add_optimizer(late, ready), GG_SUCCESS);
    assert_int_equal(gg_step_add_mlp(late, &mlp, &a1), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(late), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize (call 2): a block call after the optimizer (call 1)");
    gg_step_destroy(late);
    /* the same for a gradient callback, which needs every gradient final too; a plain callback may follow it */
    assert_int_equal(gg_step_add_gradient_callback(NULL, callback, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_add_gradient_callback: step is NULL");
    late = one_call_step(ctx);
    assert_int_equal(gg_step_add_gradient_callback(late, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_add_gradient_callback (call 1): fn is NULL");
    assert_int_equal(gg_step_add_gradient_callback(late, callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_add_callback(late, callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_add_reduce(late, FAKE(90), 16, 0), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(late), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize (call 3): a gg_step_add_reduce after the gradient callback (call 1)");
    gg_step_destroy(late);
    /* the same step without the optimizer: what the optimizer adds to a capture is its own launches */
    gg_step *plain = one_call_step(ctx);
    assert_int_equal(gg_step_finalize(plain), GG_SUCCESS);
    int enqueued[2];
    gg_step *steps[2] = {plain, step};
    for (int k = 0; k < 2; ++k) {
        memset(fake.calls, 0, sizeof fake.calls);
        fake.enqueued = 0;
        assert_int_equal(gg_step_run(steps[k], 512, 0, NULL), GG_SUCCESS);
        enqueued[k] = fake.enqueued;
        assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1);
        assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 1);
    }
    memset(fake.calls, 0, sizeof fake.calls);
    fake.enqueued = 0;
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS); /* a replay: one launch, no capture */
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 1);
    /* sum of squares, total, update (check_finite on) */
    printf("RESULT enqueued by a capture: %d without the optimizer, %d with it\n", enqueued[0], enqueued[1]);
    assert_true(enqueued[1] >= enqueued[0] + 3);
    gg_step_destroy(plain);
    /* the optimizer's destruction is refused while a step holds it (its graph updates through the optimizer's memory);
     * nothing is destroyed: the step still runs */
    const int live = fake.live;
    gg_optim_destroy(ready);
    assert_message_has(ctx, "gg_optim_destroy: 1 step graph holds the optimizer (gg_step_add_optimizer): "
                            "gg_step_destroy them first; nothing was destroyed");
    assert_int_equal(fake.live, live);
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    gg_step_destroy(step);
    gg_optim_destroy(open);
    const int before = fake.live;
    gg_optim_destroy(ready); /* no step holds it now: its device block goes */
    assert_int_equal(fake.live, before - 1);
    gg_optim_destroy(foreign);
    /* a step made before the optimizer it holds, both left to gg_ctx_destroy: the step goes first, nothing leaks */
    gg_step *first = one_call_step(ctx);
    gg_optim *after = fake_optim(ctx, 1);
    assert_int_equal(gg_step_add_optimizer(first, after), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(first), GG_SUCCESS);
    assert_int_equal(gg_step_run(first, 512, 0, NULL), GG_SUCCESS);
    gg_ctx_destroy(other);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* Counts the runs of a gradient callback's capture. */
static int gradient_callbacks;
static void count_gradient_callback(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)stream, (void)tokens;
    ++gradient_callbacks;
}

/* gg_step_set_update: refusals named; with the update off a run leaves out the optimizer's launches and the gradient
 * callback (the micro-batches of an accumulation) in an executable graph of its own, host- and device-selected; on
 * again, the first graph is found (no capture) and runs both; on a step without final work it changes nothing. */
static void update_off_leaves_out_the_final_work(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_optim *opt = fake_optim(ctx, 1);
    gg_step *step = one_call_step(ctx);
    assert_int_equal(gg_step_add_gradient_callback(step, count_gradient_callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_add_optimizer(step, opt), GG_SUCCESS);
    assert_int_equal(gg_step_set_update(NULL, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_set_update: step is NULL");
    assert_int_equal(gg_step_set_update(step, 2), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_set_update: update = 2 is not 0 or 1");
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    const int settings[] = {1, 0, 1, 0};
    int updates[4], captures[4], callbacks[4];
    for (int k = 0; k < 4; ++k) {
        assert_int_equal(gg_step_set_update(step, settings[k]), GG_SUCCESS);
        memset(fake.calls, 0, sizeof fake.calls);
        gradient_callbacks = 0;
        const int before = fake_kernel_launches("update_kernel");
        assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
        updates[k] = fake_kernel_launches("update_kernel") - before;
        captures[k] = fake.calls[FAKE_BEGIN_CAPTURE];
        callbacks[k] = gradient_callbacks;
    }
    print_message("update on, off, on, off: %d %d %d %d update launches, %d %d %d %d captures\n", updates[0],
                  updates[1], updates[2], updates[3], captures[0], captures[1], captures[2], captures[3]);
    assert_true(updates[0] >= 1 && callbacks[0] == 1); /* captured: the optimizer and the callback */
    assert_int_equal(updates[1], 0);                    /* off: neither, a graph of its own */
    assert_int_equal(callbacks[1], 0);
    assert_int_equal(captures[1], 1);
    assert_int_equal(captures[2], 0); /* on again, off again: both graphs found */
    assert_int_equal(captures[3], 0);
    /* device-selected: off leaves them out of every bucket's branch too */
    assert_int_equal(gg_step_set_update(step, 0), GG_SUCCESS);
    const int before = fake_kernel_launches("update_kernel");
    gradient_callbacks = 0;
    assert_int_equal(gg_step_run_device(step, (const int64_t *)FAKE(300), 0, NULL), GG_SUCCESS);
    assert_int_equal(fake_kernel_launches("update_kernel"), before);
    assert_int_equal(gradient_callbacks, 0);
    assert_int_equal(gg_step_set_update(step, 1), GG_SUCCESS);
    assert_int_equal(gg_step_run_device(step, (const int64_t *)FAKE(300), 0, NULL), GG_SUCCESS);
    assert_true(fake_kernel_launches("update_kernel") > before && gradient_callbacks > 0);
    gg_step_destroy(step);
    /* a step without final work: the setting changes nothing, its graph is found again (no second capture) */
    step = two_layer_step(ctx, 4);
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_set_update(step, 0), GG_SUCCESS);
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    gg_step_destroy(step);
    gg_optim_destroy(opt);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* gg_step_run_device: its refusals come before any capture; then one capture of the selection and one per bucket
 * (the callback once per bucket), one instantiation, and replays; the pointer set and accumulate are keys. */
static void run_device_selects_on_the_gpu(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_step *open = new_step(ctx);
    const int64_t *tokens = (const int64_t *)FAKE(300);
    assert_int_equal(gg_step_run_device(NULL, tokens, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_run_device: step is NULL");
    assert_int_equal(gg_step_run_device(open, tokens, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_run_device: the step is not finalized (call gg_step_finalize)");
    unsigned count = 7;
    assert_int_equal(gg_step_device_errors(NULL, &count), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_device_errors: step is NULL");
    assert_int_equal(gg_step_device_errors(open, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_device_errors: count is NULL");
    assert_int_equal(gg_step_device_errors(open, &count), GG_SUCCESS);
    assert_int_equal(count, 0);
    gg_step_destroy(open);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries);
    free(ctx);

    ctx = fake_device_ctx();
    gg_step *step = two_layer_step(ctx, 4);
    assert_int_equal(gg_step_run_device(step, NULL, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_run_device: device_tokens is NULL");
    assert_int_equal(gg_step_run_device(step, (const int64_t *)((const char *)tokens + 4), 0, NULL),
                     GG_ERROR_MISALIGNED);
    assert_message_has(ctx, "is not 8-byte aligned");
    /* inside what a block call writes: M would change while the step runs */
    const int64_t *written = (const int64_t *)((const char *)mlp_args(1).grad_weight1 + 64);
    assert_int_equal(gg_step_run_device(step, written, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "lies in output args->grad_weight1 of call 2: the step would change M while it runs");
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 0);

    const int live = fake.live;
    assert_int_equal(gg_step_run_device(step, tokens, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1 + 3); /* the selection, then buckets 128, 256, 512 */
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 1);
    assert_int_equal(fake.live, live + 1); /* the exec; the graph and its bodies are gone */
    assert_int_equal(n_seen, 3);
    assert_int_equal(seen_tokens[0], 128);
    assert_int_equal(seen_tokens[1], 256);
    assert_int_equal(seen_tokens[2], 512);
    for (int r = 0; r < 3; ++r) assert_int_equal(gg_step_run_device(step, tokens, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 4);
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 4);
    assert_int_equal(gg_step_run_device(step, tokens, 1, NULL), GG_SUCCESS); /* accumulate: another graph */
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 8);
    use_buffers(step, 1);
    assert_int_equal(gg_step_run_device(step, tokens, 0, NULL), GG_SUCCESS); /* another pointer set */
    use_buffers(step, 0);
    assert_int_equal(gg_step_run_device(step, tokens, 0, NULL), GG_SUCCESS); /* the first again: found */
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 12);
    /* host-selected runs keep their own execs */
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 13);
    gg_step_memory mem;
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 4);
    assert_int_equal(gg_step_device_errors(step, &count), GG_SUCCESS);
    assert_int_equal(count, 0);
    fake.calls[FAKE_MEMCPY] = 0, fake.fail_kind = FAKE_MEMCPY, fake.fail_at = 1; /* the read fails: named */
    assert_int_equal(gg_step_device_errors(step, &count), GG_ERROR_CUDA);
    fake.fail_at = 0;
    assert_message_has(ctx, "gg_step_device_errors: cudaMemcpy(device_errors) failed: cudaErrorLaunchFailure");
    assert_int_equal(fake.captures_open, 0);
    gg_step_destroy(step);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* gg_step_debug_dot: its checks first (nothing captured), then a bucket's step captured again as its last run
 * captured it (the same tokens: the callback sees the padded run's bucket rows; the accumulate flag) and written
 * out, nothing launched and nothing left; the device-selected graph likewise. */
static void debug_dot_captures_a_bucket_again(void **state) {
    (void)state;
    const char *path = "test_step_api_step.dot";
    remove(path);
    assert_int_equal(gg_step_debug_dot(NULL, 0, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_step_debug_dot: step is NULL");
    gg_ctx *ctx = hand_made_ctx();
    gg_step *open = new_step(ctx);
    assert_int_equal(gg_step_debug_dot(open, 0, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: the step is not finalized (call gg_step_finalize)");
    gg_step_destroy(open);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries);
    free(ctx);

    ctx = fake_device_ctx();
    gg_step *step = two_layer_step(ctx, 4); /* buckets 128, 256, 512 */
    assert_int_equal(gg_step_debug_dot(step, 0, NULL, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: path is NULL");
    assert_int_equal(gg_step_debug_dot(step, 0, "", 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: path is empty");
    assert_int_equal(gg_step_debug_dot(step, 3, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: bucket = 3 is not in [-1, 3)");
    assert_int_equal(gg_step_debug_dot(step, -2, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gg_step_debug_dot(step, 2, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: bucket = 2 has not run yet");
    assert_int_equal(gg_step_debug_dot(step, -1, path, 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: bucket = -1 has not run yet");
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    FILE *f = fopen(path, "r");
    assert_null(f); /* a refused call writes nothing */

    fake_log_start();
    assert_int_equal(gg_step_run(step, 300, 1, NULL), GG_SUCCESS); /* bucket 2 (512), padded, accumulating */
    fake_log_stop();
    const int run_ops = fake_log.n; /* its capture's work: the padding rows' zeroing among it */
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1);
    const int live = fake.live, launches = fake.calls[FAKE_GRAPH_LAUNCH];
    n_seen = 0;
    fake_log_start();
    assert_int_equal(gg_step_debug_dot(step, 2, path, 1), GG_SUCCESS);
    fake_log_stop();
    assert_int_equal(fake_log.n, run_ops); /* the same work as the run's capture (padded: not the bucket's own) */
    fake_log_free();
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 2);               /* captured again ... */
    assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], launches);         /* ... never launched */
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 1);                 /* nor instantiated */
    assert_int_equal(fake.live, live);                                 /* the captured graph is destroyed */
    assert_true(fake_dot_written(path, cudaGraphDebugDotFlagsVerbose));
    assert_int_equal(n_seen, 1);
    assert_int_equal(seen_tokens[0], 512); /* a callback has the bucket's rows */
    assert_int_equal(gg_step_debug_dot(step, 2, path, 0), GG_SUCCESS);
    assert_true(fake_dot_written(path, 0));
    assert_int_equal(gg_step_debug_dot(step, 2, "no-such-directory/step.dot", 0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_debug_dot: path \"no-such-directory/step.dot\" cannot be written");
    assert_int_equal(gg_step_debug_dot(step, 0, path, 0), GG_ERROR_INVALID_ARGUMENT); /* bucket 0 never ran */

    /* the device-selected graph: the selection and every bucket's body, captured again */
    const int64_t *tokens = (const int64_t *)FAKE(300);
    assert_int_equal(gg_step_run_device(step, tokens, 0, NULL), GG_SUCCESS);
    const int captures = fake.calls[FAKE_BEGIN_CAPTURE];
    assert_int_equal(gg_step_debug_dot(step, -1, path, 0), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], captures + 1 + 3);
    assert_int_equal(fake.live, live + 1); /* the device-selected run's exec, no more */
    remove(path);
    assert_int_equal(fake.captures_open, 0);
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS); /* still runs */
    assert_int_equal(fake.captures_open, 0);
    gg_step_destroy(step);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* ---- gradgraph's calls inside a callback ---- */

/* What the callback of nested_step runs: 0 another step's run, 1 a per-block graph's run, 2 an eager MLP forward at
 * the bucket's rows (planned at 512 rows only, so refused at others), 3 the same forward at 512 rows, 4 another
 * step's gg_step_set_args, 5 its gg_step_destroy, and on a stream outside the capture: 6 the forward at 512 rows, 7
 * an optimizer's step, 8 gg_to_fp16, 9 gg_check_finite, 10 gg_optim_set_lr, 11 gg_optim_set_loss_scale, 12 the step
 * of an optimizer on another context; 13 gg_graph_destroy, 14 gg_optim_destroy (refused: nothing destroyed). */
static struct {
    gg_ctx *ctx;
    int what;
    gg_step *other;
    gg_graph *graph;
    cudaStream_t outside; /* never forked from the callback's stream */
    gg_optim *opt, *other_opt; /* on the step's context, on another */
    gg_status status; /* what the call returned */
} nested;

static void nested_call(void *user, gg_stream stream, int64_t tokens) {
    (void)user;
    const gg_mlp_args a = mlp_args(5);
    const gg_mlp_desc d = {tokens, mlp.hidden, mlp.ffn, GG_PRECISION_FP32, 0};
    const gg_mlp_fwd_args f = {.hidden_states = FAKE(100), .weight1 = FAKE(101), .bias1 = FAKE(102),
                               .weight2 = FAKE(103), .bias2 = FAKE(104), .intermediate = FAKE(105),
                               .intermediate_activated = FAKE(106), .output = FAKE(107)};
    if (nested.what == 5 || nested.what == 13 || nested.what == 14) { /* void: refused, it records the failure */
        if (nested.what == 5) gg_step_destroy(nested.other);
        if (nested.what == 13) gg_graph_destroy(nested.graph);
        if (nested.what == 14) gg_optim_destroy(nested.opt);
        nested.status = GG_ERROR_INVALID_ARGUMENT;
        return;
    }
    nested.status = nested.what == 0   ? gg_step_run(nested.other, 512, 0, stream)
                    : nested.what == 1 ? gg_mlp_graph_run(nested.graph, &d, &a, stream)
                    : nested.what == 4 ? gg_step_set_args(nested.other, 0, &a)
                    : nested.what == 6 ? gg_mlp_forward(nested.ctx, &d, &f, (gg_stream)nested.outside)
                    : nested.what == 7 ? gg_optim_step(nested.opt, (gg_stream)nested.outside)
                    : nested.what == 8 ? gg_to_fp16(nested.ctx, FAKE(110), FAKE(111), 1024, (gg_stream)nested.outside)
                    : nested.what == 9 ? gg_check_finite(nested.ctx, FAKE(112), 1024, 0, FAKE(113),
                                                         (gg_stream)nested.outside)
                    : nested.what == 10 ? gg_optim_set_lr(nested.opt, 1e-4f, (gg_stream)nested.outside)
                    : nested.what == 11 ? gg_optim_set_loss_scale(nested.opt, 1024.0f, (gg_stream)nested.outside)
                    : nested.what == 12 ? gg_optim_step(nested.other_opt, (gg_stream)nested.outside)
                                       : gg_mlp_forward(nested.ctx, &d, &f, stream);
}

/* A callback's gradgraph call that fails (a graph's run or another step's, a step's rebinding or destruction, each
 * refused inside a capture; an eager forward whose shape has no plan; an eager call on a stream outside the capture: a
 * forward, an optimizer's step or setter, a conversion, a finite check, on the step's context or another) fails the
 * step's run: its status, a message naming the call index and quoting the inner failure, nothing instantiated or
 * launched, no capture left open, every run alike (the other step still there, and usable after); an eager forward that
 * succeeds there leaves the run alone. */
static void failed_calls_inside_callbacks_fail_the_run(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    nested.ctx = ctx;
    nested.other = two_layer_step(ctx, 4);
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 512;
    const gg_mlp_desc planned = {512, mlp.hidden, mlp.ffn, GG_PRECISION_FP32, 0};
    assert_int_equal(gg_mlp_graph_create(ctx, &planned, &gc, &nested.graph), GG_SUCCESS);
    nested.what = 3;
    nested_call(NULL, NULL, 512); /* plans the forward at 512 rows, outside any capture */
    assert_int_equal(nested.status, GG_SUCCESS);
    static const char *const inner[] = {"gg_step_run: called inside a step graph's callback",
                                        "gg_mlp_graph_run: called inside a step graph's callback",
                                        "has no plan ready", "",
                                        "gg_step_set_args: called inside a step graph's callback",
                                        "gg_step_destroy: called inside a step graph's callback, while the step is "
                                        "being captured: nothing was done",
                                        "gg_mlp_forward: called inside a step graph's callback on a stream that is "
                                        "not part of the step's capture: enqueue on the stream the callback is handed, "
                                        "or on one forked from it",
                                        "gg_optim_step: called inside a step graph's callback on a stream that is not "
                                        "part of the step's capture",
                                        "gg_to_fp16: called inside a step graph's callback on a stream that is not "
                                        "part of the step's capture",
                                        "gg_check_finite: called inside a step graph's callback on a stream that is "
                                        "not part of the step's capture",
                                        "gg_optim_set_lr: called inside a step graph's callback on a stream that is "
                                        "not part of the step's capture",
                                        "gg_optim_set_loss_scale: called inside a step graph's callback on a stream "
                                        "that is not part of the step's capture",
                                        "gg_optim_step: called inside a step graph's callback on a stream that is not "
                                        "part of the step's capture",
                                        "gg_graph_destroy: called inside a step graph's callback, while the step is "
                                        "being captured: nothing was done",
                                        "gg_optim_destroy: called inside a step graph's callback, while the step is "
                                        "being captured: nothing was done"};
    assert_int_equal(cudaStreamCreateWithFlags(&nested.outside, cudaStreamNonBlocking), cudaSuccess);
    nested.opt = fake_optim(ctx, 1);
    gg_ctx *other = NULL;
    gg_config oc = GG_CONFIG_INIT;
    oc.autotune = 0;
    assert_int_equal(gg_ctx_create(&oc, &other), GG_SUCCESS);
    nested.other_opt = fake_optim(other, 1);
    for (int what = 0; what < 15; ++what) {
        gg_step *step = one_call_step(ctx);
        assert_int_equal(gg_step_add_callback(step, nested_call, NULL), GG_SUCCESS);
        assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
        nested.what = what;
        const int64_t tokens = what == 2 ? 256 : 512;
        for (int run = 0; run < 2; ++run) {
            memset(fake.calls, 0, sizeof fake.calls);
            const gg_status st = gg_step_run(step, tokens, 0, NULL);
            assert_int_equal(fake.captures_open, 0);
            if (what == 3) { /* a forward that works there: the step runs */
                assert_int_equal(st, GG_SUCCESS);
                assert_int_equal(nested.status, GG_SUCCESS);
                continue;
            }
            assert_int_not_equal(nested.status, GG_SUCCESS);
            assert_int_equal(st, nested.status);
            assert_message_has(ctx, "gg_step_run: a gradgraph call inside the callback of call 1 failed, so the "
                                    "step is not captured (nothing runs): ");
            assert_message_has(ctx, inner[what]);
            assert_int_equal(fake.calls[FAKE_INSTANTIATE], 0);
            assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 0);
        }
        gg_step_destroy(step);
    }
    assert_int_equal(gg_step_run(nested.other, 512, 0, NULL), GG_SUCCESS); /* neither destroyed nor rebound */
    assert_int_equal(cudaStreamDestroy(nested.outside), cudaSuccess);
    gg_optim_destroy(nested.opt);
    gg_optim_destroy(nested.other_opt);
    gg_ctx_destroy(other);
    gg_graph_destroy(nested.graph);
    gg_step_destroy(nested.other);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

static void noop_callback(void *user, gg_stream stream, int64_t tokens) { (void)user, (void)stream, (void)tokens; }

/* A callback whose own launch failed (its error pending, as the runtime leaves it): 0 alone, 1 then an eager forward
 * on the handed stream (the step's context, claimed already by the run), 2 after an eager forward on a stream outside
 * the capture (refused for that). */
static int own_failure_then;
static void failing_launch(void *user, gg_stream stream, int64_t tokens) {
    (void)user;
    const gg_mlp_desc d = {tokens, mlp.hidden, mlp.ffn, GG_PRECISION_FP32, 0};
    const gg_mlp_fwd_args f = {.hidden_states = FAKE(100), .weight1 = FAKE(101), .bias1 = FAKE(102),
                               .weight2 = FAKE(103), .bias2 = FAKE(104), .intermediate = FAKE(105),
                               .intermediate_activated = FAKE(106), .output = FAKE(107)};
    if (own_failure_then == 2) (void)gg_mlp_forward(nested.ctx, &d, &f, (gg_stream)nested.outside);
    fake_pending = cudaErrorInvalidConfiguration;
    if (own_failure_then == 1) (void)gg_mlp_forward(nested.ctx, &d, &f, stream);
}

/* A CUDA error a callback's own work left pending fails the step's run with GG_ERROR_CUDA naming the callback and
 * the error (not taken for gradgraph's next launch's failure), and is cleared, having been reported; a gradgraph call
 * the callback makes after it is refused for it; after a gradgraph call of the callback's that failed, the run says
 * that failure and names the error too. Nothing instantiated or launched, no capture left open; the next run works. */
static void a_callbacks_own_cuda_error_fails_the_run(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    nested.ctx = ctx;
    gg_step *step = one_call_step(ctx);
    assert_int_equal(gg_step_add_callback(step, failing_launch, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    static const char *const says[] = {
        "gg_step_run: the callback of call 1 left a CUDA error pending, cudaErrorInvalidConfiguration",
        "gg_step_run: a gradgraph call inside the callback of call 1 failed, so the step is not captured (nothing "
        "runs): gg_mlp_forward: a CUDA error is pending on this thread from earlier work that was not this call's: "
        "cudaErrorInvalidConfiguration",
        "gg_step_run: a gradgraph call inside the callback of call 1 failed, so the step is not captured (nothing "
        "runs): gg_mlp_forward: called inside a step graph's callback on a stream that is not part of the step's "
        "capture"};
    assert_int_equal(cudaStreamCreateWithFlags(&nested.outside, cudaStreamNonBlocking), cudaSuccess);
    for (own_failure_then = 0; own_failure_then < 3; ++own_failure_then) {
        memset(fake.calls, 0, sizeof fake.calls);
        assert_int_equal(gg_step_run(step, 512, 0, NULL),
                         own_failure_then == 2 ? GG_ERROR_INVALID_ARGUMENT : GG_ERROR_CUDA);
        assert_message_has(ctx, says[own_failure_then]);
        if (own_failure_then == 2)
            assert_message_has(ctx, "; the callback also left a CUDA error pending: cudaErrorInvalidConfiguration "
                                    "(cleared)");
        assert_int_equal(fake_pending, cudaSuccess);
        assert_int_equal(fake.captures_open, 0);
        assert_int_equal(fake.calls[FAKE_INSTANTIATE], 0);
        assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 0);
    }
    gg_step_destroy(step);
    step = one_call_step(ctx);
    assert_int_equal(gg_step_add_callback(step, noop_callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    assert_int_equal(gg_step_run(step, 512, 0, NULL), GG_SUCCESS);
    gg_step_destroy(step);
    assert_int_equal(cudaStreamDestroy(nested.outside), cudaSuccess);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* What lifecycle's callback calls: every public call that makes, changes, finalizes, waits for or destroys something,
 * each refused inside a callback on any context (they allocate or synchronize, which would break the capture, or
 * change what the capture under way reads). */
enum {
    LC_CTX_CREATE, LC_CTX_DESTROY, LC_FP16_OVERFLOW, LC_GRAPH_CREATE, LC_GRAPH_DEVICE_ERRORS, LC_STEP_CREATE,
    LC_STEP_ADD_MLP, LC_STEP_ADD_CALLBACK, LC_STEP_ADD_GRADIENT_CALLBACK, LC_STEP_ADD_REDUCE, LC_STEP_ADD_OPTIMIZER,
    LC_STEP_FINALIZE, LC_STEP_SET_SYNC, LC_STEP_SET_UPDATE, LC_STEP_DEVICE_ERRORS, LC_OPTIM_CREATE,
    LC_OPTIM_ADD_PARAM, LC_OPTIM_FINALIZE, LC_OPTIM_LAST_STEP, LC_DIST_INIT_THREADS, LC_CALLS
};
static const char *const lc_names[LC_CALLS] = {
    "gg_ctx_create", "gg_ctx_destroy", "gg_fp16_overflow", "gg_mlp_graph_create", "gg_graph_device_errors",
    "gg_step_create", "gg_step_add_mlp", "gg_step_add_callback", "gg_step_add_gradient_callback",
    "gg_step_add_reduce", "gg_step_add_optimizer", "gg_step_finalize", "gg_step_set_sync", "gg_step_set_update",
    "gg_step_device_errors", "gg_optim_create", "gg_optim_add_param", "gg_optim_finalize", "gg_optim_last_step",
    "gg_dist_init_threads"};
static struct {
    int what;
    gg_ctx *ctx, *other;      /* the step's context, another one */
    gg_step *open, *finalized; /* on the other context: one still open for adds, one that ran */
    gg_graph *graph;
    gg_optim *open_opt, *opt;
    gg_status status;
} lifecycle;


static void lifecycle_call(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)stream, (void)tokens;
    gg_ctx *made = NULL;
    gg_graph *graph = NULL;
    gg_step *step = NULL;
    gg_optim *opt = NULL;
    unsigned count = 0;
    int found = 0;
    const gg_mlp_desc d = {512, mlp.hidden, mlp.ffn, GG_PRECISION_FP32, 0};
    const gg_mlp_args a = mlp_args(7);
    const gg_optim_param p = {.param = FAKE(210), .grad = FAKE(211), .count = 1000};
    gg_status st = GG_SUCCESS;
    switch (lifecycle.what) {
    case LC_CTX_CREATE: st = gg_ctx_create(NULL, &made); break;
    case LC_CTX_DESTROY: gg_ctx_destroy(lifecycle.other), st = GG_ERROR_INVALID_ARGUMENT; break; /* void */
    case LC_FP16_OVERFLOW: st = gg_fp16_overflow(lifecycle.ctx, &found, 1); break;
    case LC_GRAPH_CREATE: st = gg_mlp_graph_create(lifecycle.other, &d, NULL, &graph); break;
    case LC_GRAPH_DEVICE_ERRORS: st = gg_graph_device_errors(lifecycle.graph, &count); break;
    case LC_STEP_CREATE: st = gg_step_create(lifecycle.ctx, NULL, &step); break;
    case LC_STEP_ADD_MLP: st = gg_step_add_mlp(lifecycle.open, &d, &a); break;
    case LC_STEP_ADD_CALLBACK: st = gg_step_add_callback(lifecycle.open, noop_callback, NULL); break;
    case LC_STEP_ADD_GRADIENT_CALLBACK: st = gg_step_add_gradient_callback(lifecycle.open, noop_callback, NULL); break;
    case LC_STEP_ADD_REDUCE: st = gg_step_add_reduce(lifecycle.open, FAKE(212), 1000, 0); break;
    case LC_STEP_ADD_OPTIMIZER: st = gg_step_add_optimizer(lifecycle.open, lifecycle.opt); break;
    case LC_STEP_FINALIZE: st = gg_step_finalize(lifecycle.open); break;
    case LC_STEP_SET_SYNC: st = gg_step_set_sync(lifecycle.finalized, 0); break;
    case LC_STEP_SET_UPDATE: st = gg_step_set_update(lifecycle.finalized, 0); break;
    case LC_STEP_DEVICE_ERRORS: st = gg_step_device_errors(lifecycle.finalized, &count); break;
    case LC_OPTIM_CREATE: st = gg_optim_create(lifecycle.other, NULL, &opt); break;
    case LC_OPTIM_ADD_PARAM: st = gg_optim_add_param(lifecycle.open_opt, &p); break;
    case LC_OPTIM_FINALIZE: st = gg_optim_finalize(lifecycle.open_opt); break;
    case LC_OPTIM_LAST_STEP: st = gg_optim_last_step(lifecycle.opt, &found, NULL); break;
    case LC_DIST_INIT_THREADS: st = gg_dist_init_threads(&lifecycle.other, 1, NULL); break;
    default: break;
    }
    lifecycle.status = st;
    assert_null(made); /* nothing made */
    assert_null(graph);
    assert_null(step);
    assert_null(opt);
}

/* Every call that makes, changes, finalizes, waits for or destroys a context, graph, step, optimizer or communicator,
 * called inside a step's callback (on the step's context or another), is refused by name before it does anything,
 * and the step's run fails quoting it (nothing instantiated or launched, no capture left open); afterwards the open
 * step and optimizer take their adds and finalize, the other context and its objects work and are destroyed. */
static void lifecycle_calls_inside_callbacks_are_refused(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_config oc = GG_CONFIG_INIT;
    oc.autotune = 0;
    assert_int_equal(gg_ctx_create(&oc, &lifecycle.other), GG_SUCCESS);
    lifecycle.ctx = ctx;
    lifecycle.open = one_call_step(lifecycle.other);
    lifecycle.finalized = one_call_step(lifecycle.other);
    assert_int_equal(gg_step_finalize(lifecycle.finalized), GG_SUCCESS);
    assert_int_equal(gg_step_run(lifecycle.finalized, 512, 0, NULL), GG_SUCCESS);
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 512;
    const gg_mlp_desc planned = {512, mlp.hidden, mlp.ffn, GG_PRECISION_FP32, 0};
    assert_int_equal(gg_mlp_graph_create(ctx, &planned, &gc, &lifecycle.graph), GG_SUCCESS);
    lifecycle.open_opt = fake_optim(ctx, 0);
    lifecycle.opt = fake_optim(lifecycle.other, 1);
    const int open_calls = gg_step_call_count(lifecycle.open);
    for (int what = 0; what < LC_CALLS; ++what) {
        gg_step *step = one_call_step(ctx);
        assert_int_equal(gg_step_add_callback(step, lifecycle_call, NULL), GG_SUCCESS);
        assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
        lifecycle.what = what;
        lifecycle.status = GG_SUCCESS;
        memset(fake.calls, 0, sizeof fake.calls);
        const gg_status st = gg_step_run(step, 512, 0, NULL);
        assert_int_equal(fake.captures_open, 0);
        if (lifecycle.status != GG_ERROR_INVALID_ARGUMENT)
            fail_msg("%s inside a callback was not refused", lc_names[what]);
        assert_int_equal(st, GG_ERROR_INVALID_ARGUMENT);
        char inner[160];
        snprintf(inner, sizeof inner, "%s: called inside a step graph's callback, while the step is being captured: "
                 "nothing was done", lc_names[what]);
        assert_message_has(ctx, "gg_step_run: a gradgraph call inside the callback of call 1 failed");
        assert_message_has(ctx, inner);
        assert_int_equal(fake.calls[FAKE_INSTANTIATE], 0);
        assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 0);
        gg_step_destroy(step);
    }
    /* nothing was changed: the open step and optimizer are as they were and take what they were refused */
    assert_int_equal(gg_step_call_count(lifecycle.open), open_calls);
    assert_int_equal(gg_step_add_callback(lifecycle.open, noop_callback, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(lifecycle.open), GG_SUCCESS);
    assert_int_equal(gg_step_run(lifecycle.open, 512, 0, NULL), GG_SUCCESS);
    assert_int_equal(gg_step_run(lifecycle.finalized, 512, 0, NULL), GG_SUCCESS);
    const gg_optim_param p = {.param = FAKE(210), .grad = FAKE(211), .count = 1000};
    assert_int_equal(gg_optim_add_param(lifecycle.open_opt, &p), GG_SUCCESS);
    assert_int_equal(gg_optim_finalize(lifecycle.open_opt), GG_SUCCESS);
    gg_optim_destroy(lifecycle.open_opt);
    gg_optim_destroy(lifecycle.opt);
    gg_graph_destroy(lifecycle.graph);
    gg_step_destroy(lifecycle.open);
    gg_step_destroy(lifecycle.finalized);
    gg_ctx_destroy(lifecycle.other); /* not destroyed inside the callback: destroyed now, nothing left */
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* A finalized step's run refuses tokens below 1, past the largest bucket, and off the buckets when padding is off, each
 * named and nothing enqueued; a second finalize is refused; a step left alive is destroyed with its context. */
static void run_checks_its_tokens(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_step *step = two_layer_step(ctx, 4); /* buckets 128, 256, 512; padding on */
    fake.enqueued = 0;
    assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_finalize: the step is finalized already");
    assert_int_equal(gg_step_run(step, 0, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_run: tokens = 0 must be at least 1");
    assert_int_equal(gg_step_run(step, 513, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_run: tokens = 513 exceeds the largest bucket (512, config->max_tokens)");
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(gg_step_run(step, 300, 0, NULL), GG_SUCCESS); /* padded to 512 */
    gg_step_destroy(step);

    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.max_tokens = 512;
    sc.allow_padding = 0;
    assert_int_equal(gg_step_create(ctx, &sc, &step), GG_SUCCESS);
    const gg_mlp_args a0 = mlp_args(0);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    fake.enqueued = 0;
    assert_int_equal(gg_step_run(step, 300, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_step_run: tokens = 300 is not a bucket (next: 512) and config->allow_padding is 0");
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(gg_step_run(step, 256, 0, NULL), GG_SUCCESS);
    gg_ctx_destroy(ctx); /* the step, still alive, goes with its context: nothing is left */
    assert_int_equal(fake.live, 0);
}

/* A step whose calls need no scratch (block 1 only) has no ring: with several slots and side streams it finalizes and
 * runs, each slot's scratch NULL, its counters there (the fuzzer's clang UBSan found the slots' scratch computed as an
 * offset from the NULL ring here; gcc's, which runs this test in CI, does not flag that). */
static void step_without_scratch_runs(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.max_tokens = 512;
    sc.side_streams = 2;
    sc.scratch_slots = 3;
    gg_step *step = NULL;
    assert_int_equal(gg_step_create(ctx, &sc, &step), GG_SUCCESS);
    const gg_tanh_gate_desc tanh = {.tokens = 1, .hidden = 512};
    for (int i = 0; i < 3; ++i) {
        const int b = 120 + 8 * i;
        const gg_tanh_gate_args ta = {FAKE(b), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4), FAKE(b + 5),
                                      FAKE(b + 6)};
        assert_int_equal(gg_step_add_tanh_gate(step, &tanh, &ta), GG_SUCCESS);
    }
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    gg_step_memory mem;
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.slot_bytes, 0);
    for (int slot = 1; slot < 3; ++slot) {
        void *scratch = FAKE(0), *counter = NULL;
        size_t scratch_bytes = 1, counter_bytes = 0;
        gg_step_slot_region(step, slot, &scratch, &scratch_bytes, &counter, &counter_bytes);
        assert_null(scratch);
        assert_int_equal(scratch_bytes, 0);
        assert_non_null(counter);
    }
    assert_int_equal(gg_step_run(step, 300, 0, NULL), GG_SUCCESS);
    gg_step_destroy(step);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_checks_its_arguments),
        cmocka_unit_test(add_checks_every_call),
        cmocka_unit_test(finalize_checks_the_chain),
        cmocka_unit_test(reduce_entries_and_sync),
        cmocka_unit_test(queries_on_an_open_step),
        cmocka_unit_test(alternating_pointer_sets_capture_twice),
        cmocka_unit_test(one_exec_per_bucket_updates_in_place),
        cmocka_unit_test(run_checks_its_tokens),
        cmocka_unit_test(step_without_scratch_runs),
        cmocka_unit_test(run_device_selects_on_the_gpu),
        cmocka_unit_test(debug_dot_captures_a_bucket_again),
        cmocka_unit_test(optimizer_in_the_step),
        cmocka_unit_test(failed_calls_inside_callbacks_fail_the_run),
        cmocka_unit_test(a_callbacks_own_cuda_error_fails_the_run),
        cmocka_unit_test(lifecycle_calls_inside_callbacks_are_refused),
        cmocka_unit_test(update_off_leaves_out_the_final_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
